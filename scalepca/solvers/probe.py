"""The rates of :class:`~scalepca.solvers.choice.Rates` measured on this machine, per
core, in a few seconds: the read of blocks in memory, the read of a zarr store's files
(decoded), the flops of the kernels a pass runs on a block (the moments and Gram of a
dense block, :func:`~scalepca.linalg.moments.block_moments`; of a group of CSR
blocks, :func:`~scalepca.linalg.moments.group_moments_sparse`; a block's centred Gram
times a thin matrix, the Krylov product, dense and CSR), the client's
eigendecomposition and the loopback network.

No cluster is started and nothing of a dataset is read: each rate is timed on arrays
made here (a store in a temporary folder), the BLAS limited to one thread, in CPU
seconds of this process (what the work costs a core: a machine shared with other work
stretches the wall time, not these), the least of a few repeats; the loopback rate is
the one wall-clock rate. The scheduler's costs (a pass's round trip, a task's
overhead) are not measured here: they are the constants of
:mod:`~scalepca.solvers.choice`, measured on a running cluster by
``benchmarks/solver_auto.py --probe``.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time

import numpy as np

from .choice import RATES, Rates

__all__ = ["probe", "store_read_rate"]


def _best_seconds(fn, repeat: int = 3) -> float:
    """The least CPU seconds of this process ``fn`` took in ``repeat`` calls (its own
    threads too, as zarr's reads): what it costs a core, whatever else the machine
    runs meanwhile."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return max(best, 1e-9)


def _one_thread():
    """The BLAS limited to one thread (a worker thread's share of the machine)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def _sample(nbytes: int) -> np.ndarray:
    """Float64 values like a dataset's (low rank plus noise: compressible as little as
    real measurements are), ``nbytes`` of them."""
    rng = np.random.default_rng(0)
    rows = max(1, nbytes // (8 * 64))
    basis = rng.standard_normal((8, 64))
    return rng.standard_normal((rows, 8)) @ basis + 0.1 * rng.standard_normal(
        (rows, 64)
    )


def store_read_rate(compressors="auto", nbytes: int = 32 * 2**20) -> float:
    """Bytes of values per second one core reads from a zarr store's files, decoded
    (``compressors``: the store's, as zarr takes them; default Blosc-LZ4, the codec
    of ``make-data``). The store is written to a temporary folder and removed."""
    import tempfile

    import zarr

    if isinstance(compressors, str) and compressors == "auto":
        compressors = zarr.codecs.BloscCodec(cname="lz4", shuffle="shuffle")
    data = _sample(nbytes).reshape(-1, 256)
    with tempfile.TemporaryDirectory() as tmp:
        z = zarr.create_array(
            f"{tmp}/probe.zarr",
            shape=data.shape,
            chunks=(max(1, 4 * 2**20 // (8 * 256)), 256),
            dtype=data.dtype,
            compressors=compressors,
        )
        z[:] = data
        seconds = _best_seconds(lambda: zarr.open_array(f"{tmp}/probe.zarr")[:])
    return data.nbytes / seconds


def _loopback_rate(nbytes: int = 64 * 2**20) -> float:
    """Bytes per second through a TCP connection on this machine (what two workers on
    one host exchange through; between hosts, their link's rate)."""
    server = socket.create_server(("127.0.0.1", 0))
    payload = bytes(4 * 2**20)
    done = threading.Event()

    def sink():
        conn, _ = server.accept()
        with conn:
            got = 0
            while got < nbytes:
                chunk = conn.recv(4 * 2**20)
                if not chunk:
                    break
                got += len(chunk)
        done.set()

    thread = threading.Thread(target=sink, daemon=True)
    thread.start()
    try:
        with socket.create_connection(server.getsockname()) as conn:
            t0 = time.perf_counter()
            for _ in range(nbytes // len(payload)):
                conn.sendall(payload)
            done.wait(60)
            seconds = time.perf_counter() - t0
    finally:
        server.close()
        thread.join(5)
    return nbytes / max(seconds, 1e-9)


def probe() -> Rates:
    """This machine's rates, per core (``Rates.cores == 1``), in a few seconds."""
    import scipy.sparse as sp

    from ..linalg.krylov import _block_gram_times
    from ..linalg.moments import block_moments, group_moments_sparse
    from .choice import Problem, _gram_flops, _product_flops

    rng = np.random.default_rng(0)
    with _one_thread():
        n, d, width = 40_000, 200, 20
        block = rng.standard_normal((n, d))
        dense = Problem(n, d)
        read = block.nbytes / _best_seconds(lambda: block.sum(axis=0))
        gram = _gram_flops(dense, d, n) / _best_seconds(lambda: block_moments(block))
        V, shift = rng.standard_normal((d, width)), block.mean(axis=0)
        product = _product_flops(dense, width) / _best_seconds(
            lambda: _block_gram_times(block, V, shift, "auto")
        )
        n_s, d_s, density = 20_000, 1_000, 0.05
        csr = sp.random(n_s, d_s, density=density, format="csr", random_state=0)
        sparse = Problem(n_s, d_s, sparse=True, density=density)
        sparse_gram = _gram_flops(sparse, d_s, n_s) / _best_seconds(
            lambda: group_moments_sparse([csr])
        )
        V = rng.standard_normal((d_s, width))
        sparse_product = _product_flops(sparse, width) / _best_seconds(
            lambda: _block_gram_times(csr, V, np.zeros(d_s), "auto")
        )
        A = rng.standard_normal((600, 600))
        A = A + A.T
        eigh = _best_seconds(lambda: np.linalg.eigh(A)) / 600.0**3
    return dataclasses.replace(
        RATES,
        read_bytes_per_second=read,
        dense_flops_per_second=gram,
        product_flops_per_second=product,
        sparse_flops_per_second=sparse_product,
        sparse_gram_flops_per_second=sparse_gram,
        # QR's rate beside the Gram's, as the constants have it
        qr_flops_per_second=gram
        * RATES.qr_flops_per_second
        / RATES.dense_flops_per_second,
        eigh_seconds_per_cube=eigh,
        decode_bytes_per_second=store_read_rate(),
        network_bytes_per_second=_loopback_rate(),
        cores=1,
    )
