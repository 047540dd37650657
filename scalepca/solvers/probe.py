"""The rates of :class:`~scalepca.solvers.choice.Rates` measured on this machine, per
core, in a few seconds: the read of blocks in memory, the decode of compressed chunks,
dense Gram and CSR product flops, the client's eigendecomposition and the loopback
network.

No cluster is started and nothing of a dataset is read: each rate is timed on arrays
made here, on one thread (the BLAS limited to one), the best of a few repeats (a
machine shared with other work slows some repeats; the best is the rate the core
has). The scheduler's costs (a pass's round trip, a task's overhead) are not measured
here: they are the constants of :mod:`~scalepca.solvers.choice`, measured on a running
cluster by ``benchmarks/solver_auto.py --probe``.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time

import numpy as np

from .choice import RATES, Rates

__all__ = ["decode_rate", "probe"]


def _best_seconds(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
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


def decode_rate(codec=None, nbytes: int = 16 * 2**20) -> float:
    """Bytes of decoded values per second one core gets from ``codec`` (a numcodecs
    codec, as a zarr store's chunks are compressed; default Blosc-LZ4)."""
    import numcodecs

    if codec is None:
        codec = numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE)
    data = _sample(nbytes)
    encoded = codec.encode(data)
    use = getattr(numcodecs.blosc, "use_threads", None)
    numcodecs.blosc.use_threads = False  # a worker thread decodes on its own core
    try:
        seconds = _best_seconds(lambda: codec.decode(encoded))
    finally:
        numcodecs.blosc.use_threads = use
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

    rng = np.random.default_rng(0)
    with _one_thread():
        block = rng.standard_normal((40_000, 200))
        read = block.nbytes / _best_seconds(lambda: block.sum(axis=0))
        gram = 2.0 * block.shape[0] * block.shape[1] ** 2
        dense = gram / _best_seconds(lambda: block.T @ block)
        n_s, d_s, nnz = 50_000, 5_000, 2_000_000
        csr = sp.csr_matrix(
            (
                rng.standard_normal(nnz),
                (rng.integers(0, n_s, nnz), rng.integers(0, d_s, nnz)),
            ),
            (n_s, d_s),
        )
        V = rng.standard_normal((d_s, 20))
        sparse = 4.0 * csr.nnz * 20 / _best_seconds(lambda: csr.T @ (csr @ V))
        A = rng.standard_normal((600, 600))
        A = A + A.T
        eigh = _best_seconds(lambda: np.linalg.eigh(A)) / 600.0**3
    return dataclasses.replace(
        RATES,
        read_bytes_per_second=read,
        dense_flops_per_second=dense,
        sparse_flops_per_second=sparse,
        # QR's rate beside the Gram's, as the constants have it
        qr_flops_per_second=dense
        * RATES.qr_flops_per_second
        / RATES.dense_flops_per_second,
        eigh_seconds_per_cube=eigh,
        decode_bytes_per_second=decode_rate(),
        network_bytes_per_second=_loopback_rate(),
        cores=1,
    )
