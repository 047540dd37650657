"""The rates of :mod:`scalepca.solvers.choice`, measured on this machine.

``python benchmarks/solver_auto.py --probe`` runs :func:`probe` on the benchmark's
cluster (2 workers × 1 thread) and prints the constants the cost model holds; each is
the median of a few repeats, so that a loaded machine shifts it less.
"""

from __future__ import annotations

import statistics
import time

import dask.array as da
import numpy as np
import scipy.sparse as sp


def _median_seconds(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def probe(bed_path=None) -> dict:
    """Seconds per pass, per task, per byte read and per flop on the current client."""
    out = {}
    tiny = da.ones((10, 10), chunks=(10, 10)).persist()
    out["pass_seconds"] = _median_seconds(lambda: tiny.sum().compute())
    many = da.ones((400, 10), chunks=(1, 10)).persist()
    t_many = _median_seconds(lambda: many.sum(axis=0).compute())
    out["task_seconds"] = max(t_many - out["pass_seconds"], 0.0) / 400
    rng = da.random.default_rng(0)
    X = rng.standard_normal((400_000, 200), chunks=(25_000, 200)).persist()
    X.sum().compute()
    t_read = _median_seconds(lambda: X.sum(axis=0).compute())
    out["read_bytes_per_second"] = X.nbytes / max(t_read - out["pass_seconds"], 1e-9)
    t_gram = _median_seconds(lambda: (X.T @ X).compute(), repeat=3)
    flops = 2.0 * X.shape[0] * X.shape[1] ** 2
    out["dense_flops_per_second"] = flops / max(t_gram - t_read, 1e-9)
    A = np.random.default_rng(0).standard_normal((2000, 2000))
    t_eigh = _median_seconds(lambda: np.linalg.eigh(A), repeat=3)
    out["eigh_seconds_per_cube"] = t_eigh / 2000.0**3
    g = np.random.default_rng(0)
    n_s, d_s, nnz = 200_000, 20_000, 40_000_000
    S = sp.csr_matrix(
        (g.standard_normal(nnz), (g.integers(0, n_s, nnz), g.integers(0, d_s, nnz))),
        (n_s, d_s),
    )
    V = np.random.default_rng(1).standard_normal((20_000, 20))
    t_sp = _median_seconds(lambda: S.T @ (S @ V), repeat=3)
    out["sparse_flops_per_second"] = 4.0 * S.nnz * 20 / t_sp
    if bed_path is not None:
        import scalepca

        B = scalepca.open_matrix(bed_path).data
        t_bed = _median_seconds(lambda: B.sum(axis=0).compute(), repeat=3)
        out["bed_seconds_per_entry"] = (t_bed - out["pass_seconds"]) / (
            B.shape[0] * B.shape[1]
        )
    return out
