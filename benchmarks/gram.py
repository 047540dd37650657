"""One core's centred Gram of one float32 chunk: float32 products (scalepca's default
for float32 blocks) against float64 products, and the error against the float64 result
in float32 epsilons.

Single process, one BLAS thread, best of 3; chunks of the spca (62,500 × 200) and pca
(50,000 × 256) benchmarks, mean 1e3 and standard deviation 1 (|mean| ≫ sd).

    python benchmarks/gram.py
"""

from __future__ import annotations

import time

import numpy as np
from threadpoolctl import threadpool_limits

from scalepca.linalg.moments import _gram, gram_error_bound


def main():
    rng = np.random.default_rng(0)
    eps = float(np.finfo(np.float32).eps)
    for n, d in [(62_500, 200), (50_000, 256)]:
        x = (rng.standard_normal((n, d)) + 1e3).astype(np.float32)
        mean = x.sum(axis=0, dtype=np.float64) / n
        best = {}
        with threadpool_limits(1):
            for precision in ["float64", "auto"] * 3:
                t0 = time.perf_counter()
                _gram(x, mean, precision=precision)
                dt = time.perf_counter() - t0
                best[precision] = min(best.get(precision, np.inf), dt)
            g64 = _gram(x, mean, precision="float64")
            g32 = _gram(x, mean, precision="auto")
        norms = np.sqrt(np.diag(g64))
        err = float(np.max(np.abs(g32 - g64) / np.outer(norms, norms)))
        t64, t32 = best["float64"], best["auto"]
        print(
            f"{n:,} × {d} float32: float64 products {t64 * 1e3:.1f} ms "
            f"({x.nbytes / t64 / 1e9:.2f} GB/s), float32 products {t32 * 1e3:.1f} ms "
            f"({x.nbytes / t32 / 1e9:.2f} GB/s): {t64 / t32:.2f}× faster; max |ΔG_jk| "
            f"/ (‖c_j‖ ‖c_k‖) = {err:.2e} = {err / eps:.2f} ε₃₂ (stated bound "
            f"{gram_error_bound():.2e} = {gram_error_bound() / eps:.0f} ε₃₂)"
        )


if __name__ == "__main__":
    main()
