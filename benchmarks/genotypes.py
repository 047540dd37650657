"""PCA of PLINK genotypes, the wide workload of issue 33 item 7.

A Balding–Nichols simulation (``scalepca make-data --kind genotypes``: K populations at
F_ST = 0.1, 1 % missing calls), default 100,000 samples × 100,000 SNPs (2.5 GB packed), is
written once under ``--data-dir`` by ``scalepca make-data`` in a child process (its peak
memory is reported: the generator computes two blocks of 1,000 SNPs at a time and writes them
SNP by SNP, so it grows with the samples, not the SNPs — measured 538 MB at 20,000 × 2,000
and 582 MB at 20,000 × 12,000; 1.6 GB at 100,000 × 2,000), and read lazily by
``scalepca.open_matrix`` (bed-reader ranged reads, float32, row blocks of about 128 MiB). On
``LocalCluster(n_workers=2, threads_per_worker=1)``:

* a read pass: the column sums of the float32 matrix (every block decoded once);
* ``PCA(n_components=10, standardize="genotype")`` with ``--solver`` (default ``auto``:
  above 4,096 SNPs the snapshot method up to 4,096 samples — the quick size — and block
  Krylov above — the full size; both with the genotype map inside their per-block
  products); its passes (``n_passes_``), its time and its time over the read pass, the peak
  worker memory;
* the population labels of the .fam recovered by the nearest population centroid on the top
  K − 1 PCs (accuracy), and with ``--quick`` the eigenvalues against the dense NumPy PCA of
  the standardised matrix.

sgkit (dask genetics, PCA through dask-ml) is compared only if it is installed: its
requirements (dask ≤ 2024.8, zarr < 3 when this was written) conflict with scalepca's, so it
is not installed into the project's environment (the JSON says so).

    python benchmarks/genotypes.py --quick     # 2,000 × 5,000
    # full size (2.5 GB .bed; generating it takes about an hour on 2 busy cores):
    python benchmarks/genotypes.py --n-samples 100000 --n-snps 100000
    # the .bed alone, as the script writes it:
    scalepca make-data /work/bench-data/genotypes_100000x100000.bed --kind genotypes \
        --n-samples 100000 --n-features 100000 --dtype int8 --set n_populations=5 \
        --set fst=0.1 --set missing=0.01 --no-progress
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _common import common_args, local_cluster, peak_worker_memory, table, write_json

import scalepca

K = 10


def make_data_command(path: Path, args) -> list[str]:
    """The ``scalepca make-data`` command that writes the .bed (int8 blocks: the fastest)."""
    return [sys.executable, "-m", "scalepca.cli", "make-data", str(path), "--kind", "genotypes",
            "--n-samples", str(args.n_samples), "--n-features", str(args.n_snps),
            "--dtype", "int8", "--set", f"n_populations={args.populations}",
            "--set", f"fst={args.fst}", "--set", f"missing={args.missing}", "--seed", "0",
            "--overwrite", "--no-progress"]


def ensure_bed(path: Path, args) -> tuple[float | None, int | None]:
    """Write the .bed by ``scalepca make-data`` in a child process if it is absent; the
    seconds it took and the child's peak RSS in bytes (None, None: it was there)."""
    from scalepca.datasets import dataset_complete

    if dataset_complete(str(path)):
        return None, None
    t0 = time.perf_counter()
    subprocess.run(make_data_command(path, args), check=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return time.perf_counter() - t0, peak


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
    write_s, write_peak = ensure_bed(path, args)
    size = path.stat().st_size
    print(f"{path}: {size / 1e9:.2f} GB" + (f", written in {write_s:.0f} s, make-data peak "
                                             f"RSS {write_peak / 1e6:.0f} MB" if write_s else ""))
    rows, out = [], {"n_samples": args.n_samples, "n_snps": args.n_snps, "k": K,
                     "populations": args.populations, "fst": args.fst, "missing": args.missing,
                     "bed_bytes": size, "write_s": write_s,
                     "make_data_peak_rss_bytes": write_peak, "workers": args.workers,
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
        model = scalepca.PCA(K, standardize="genotype", svd_solver=args.solver,
                             random_state=0)
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
    ap.add_argument("--solver", default="auto",
                    choices=["auto", "randomized", "snapshot", "sketch", "tsqr"],
                    help="PCA's svd_solver (auto: block Krylov above 4,096 samples)")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_samples, args.n_snps = 2_000, 5_000
    out = run(args)
    out["solver_asked"] = args.solver
    path = write_json(("genotypes_quick" if args.quick else "genotypes")
                      + ("" if args.solver == "auto" else f"_{args.solver}"), out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
