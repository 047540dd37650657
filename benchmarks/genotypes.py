"""PCA of PLINK genotypes, the wide workload of issue 33 item 7.

A Balding–Nichols simulation (``scalepca make-data --kind genotypes``: K populations at
F_ST = 0.1, 1 % missing calls), default 100,000 samples × 100,000 SNPs (2.5 GB packed), is
written once under ``--data-dir`` and read lazily by ``scalepca.open_matrix`` (bed-reader
ranged reads, float32, row blocks of about 128 MiB). On ``LocalCluster(n_workers=2,
threads_per_worker=1)``:

* a read pass: the column sums of the float32 matrix (every block decoded once);
* ``PCA(n_components=10, standardize="genotype")`` with the default solver for wide data
  (what ``svd_solver="auto"`` picks above 4,096 features); its passes (``n_passes_``), its
  time and its time over the read pass, the peak worker memory;
* the population labels of the .fam recovered by the nearest population centroid on the top
  K − 1 PCs (accuracy), and with ``--quick`` the eigenvalues against the dense NumPy PCA of
  the standardised matrix.

sgkit (dask genetics, PCA through dask-ml) is compared only if it is installed: its
requirements (dask ≤ 2024.8, zarr < 3 when this was written) conflict with scalepca's, so it
is not installed into the project's environment (the JSON says so).

    python benchmarks/genotypes.py             # full size (2.5 GB .bed)
    python benchmarks/genotypes.py --quick     # 2,000 × 5,000
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _common import common_args, local_cluster, peak_worker_memory, table, write_json

import scalepca
from scalepca.datasets.genotypes import make_genotypes, write_bed

K = 10


def ensure_bed(path: Path, args) -> float | None:
    """Write the .bed if it is absent; the seconds it took (None: it was there)."""
    from scalepca.datasets import dataset_complete

    if dataset_complete(str(path)):
        return None
    t0 = time.perf_counter()
    g = make_genotypes(args.n_samples, args.n_snps, n_populations=args.populations,
                       fst=args.fst, missing=args.missing, seed=0, chunk_snps=1000,
                       dtype="int8")
    write_bed(g, path, overwrite=True)
    return time.perf_counter() - t0


def centroid_accuracy(T: np.ndarray, labels: np.ndarray, n_pop: int) -> float:
    """Share of samples whose nearest population centroid (top K − 1 PCs) is their own."""
    names = np.unique(labels)
    cent = np.stack([T[labels == p].mean(axis=0) for p in names])
    pred = names[np.argmin(((T[:, None, :] - cent[None]) ** 2).sum(axis=2), axis=1)]
    return float(np.mean(pred == labels))


def dense_eigenvalues(path) -> np.ndarray:
    """Eigenvalues of the standardised matrix by dense NumPy (quick sizes only)."""
    X = scalepca.open_matrix(path, dtype="float64").values
    calls = (~np.isnan(X)).sum(axis=0)
    p = np.nansum(X, axis=0) / np.maximum(calls, 1) / 2
    keep = (calls > 0) & (p > 0) & (p < 1)
    Z = (X[:, keep] - 2 * p[keep]) / np.sqrt(2 * p[keep] * (1 - p[keep]))
    Z[np.isnan(Z)] = 0
    s = np.linalg.svd(Z - Z.mean(axis=0), compute_uv=False)
    return s[:K] ** 2 / (len(Z) - 1)


def sgkit_status() -> str:
    try:
        import sgkit  # noqa: F401
    except ImportError:
        return ("not installed: `pip install sgkit` resolves to dask<=2024.8.0 and zarr<3, "
                "which would downgrade scalepca's environment (dask 2026.8, zarr 3); not run")
    return "installed (comparison not implemented in this script)"


def run(args) -> dict:
    path = Path(args.data_dir) / f"genotypes_{args.n_samples}x{args.n_snps}.bed"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_s = ensure_bed(path, args)
    size = path.stat().st_size
    print(f"{path}: {size / 1e9:.2f} GB" + (f", written in {write_s:.0f} s" if write_s else ""))
    rows, out = [], {"n_samples": args.n_samples, "n_snps": args.n_snps, "k": K,
                     "populations": args.populations, "fst": args.fst, "missing": args.missing,
                     "bed_bytes": size, "write_s": write_s, "workers": args.workers,
                     "memory_limit": args.memory_limit, "sgkit": sgkit_status()}
    with local_cluster(n_workers=args.workers, threads_per_worker=1,
                       memory_limit=args.memory_limit) as client:
        A = scalepca.open_matrix(path)
        out["chunks"] = {"row_blocks": len(A.chunks[0]), "rows_per_block": A.chunks[0][0],
                         "column_blocks": len(A.chunks[1])}
        t0 = time.perf_counter()
        A.data.sum(axis=0).compute()
        read_s = time.perf_counter() - t0
        rows.append({"step": "read pass (float32 column sums)", "seconds": read_s,
                     "x read": 1.0, "passes": 1})
        model = scalepca.PCA(K, standardize="genotype", random_state=0)
        t0 = time.perf_counter()
        model.fit(A)
        fit_s = time.perf_counter() - t0
        peak = peak_worker_memory(client)["max"]
        t0 = time.perf_counter()
        T = model.transform(A).values
        transform_s = time.perf_counter() - t0
        acc = centroid_accuracy(T[:, : args.populations - 1], np.asarray(A["fid"].values),
                                args.populations)
        rows.append({"step": f"PCA(k={K}, standardize='genotype'), "
                             f"{model._fit_svd_solver}", "seconds": fit_s,
                     "x read": fit_s / read_s, "passes": model.n_passes_,
                     "peak worker MB": peak / 1e6, "population accuracy": acc})
        rows.append({"step": "transform (scores of all samples)", "seconds": transform_s,
                     "x read": transform_s / read_s, "passes": 1})
        out.update(read_s=read_s, fit_s=fit_s, fit_over_read=fit_s / read_s,
                   n_passes=model.n_passes_, solver=model._fit_svd_solver,
                   peak_worker_bytes=peak, transform_s=transform_s,
                   population_accuracy=acc, n_monomorphic=model.n_monomorphic_,
                   explained_variance=model.explained_variance_.tolist())
    if args.quick:
        ev = dense_eigenvalues(path)
        err = np.abs(model.explained_variance_ - ev) / ev
        out["eigenvalue_rel_err_vs_dense"] = err.tolist()
        rows[1]["ev rel err (max)"] = float(err.max())
        # the structured components (K − 1 populations); the rest lie in the noise bulk
        rows[1]["ev rel err (top K-1)"] = float(err[: args.populations - 1].max())
    out["rows"] = rows
    print(table(rows, ["step", "seconds", "x read", "passes", "peak worker MB",
                       "population accuracy", "ev rel err (top K-1)", "ev rel err (max)"]))
    print(f"sgkit: {out['sgkit']}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common_args(ap, memory_limit="4GiB", quick="2,000 × 5,000 (a smoke test)")
    ap.add_argument("--n-samples", type=int, default=100_000)
    ap.add_argument("--n-snps", type=int, default=100_000)
    ap.add_argument("--populations", type=int, default=5)
    ap.add_argument("--fst", type=float, default=0.1)
    ap.add_argument("--missing", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    if args.quick:
        args.n_samples, args.n_snps = 2_000, 5_000
    out = run(args)
    path = write_json("genotypes_quick" if args.quick else "genotypes", out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
