"""Missing genotype calls: PPCA's EM against mean imputation, on PLINK .bed files (issue
49 item 5).

One Balding–Nichols cohort (5 populations, F_ST = 0.1) is written as four .bed files
that hold the same calls with 0 %, 5 %, 10 % and 20 % of them missing (the generator
draws the missing calls from one uniform per call, so the holes of 5 % lie inside those
of 10 %, and the complete calls are the same in every file). On each file with missing
calls:

* ``mean imputation (genotype)``: ``PCA(standardize="genotype")`` — each SNP centred by
  ``2p`` and scaled by ``√(2p(1−p))``, a missing call set to the mean (what plink2 and
  smartpca do); compared with the same PCA of the complete file;
* ``mean imputation (counts)``: ``PCA()`` of the counts with each missing call set to
  its SNP's mean (the preparation EM's model has: counts centred, not scaled); compared
  with PCA of the complete counts;
* ``EM``: ``PPCA(missing="em")`` on the counts, missing calls left missing (NaN); its
  sample PCs are the posterior means of ``transform``; compared with PCA of the complete
  counts (EM's limit without missing calls is the closed form, whose axes are PCA's).
  The data are held in the workers' memory (``persist=True``, 32 MB here): each EM
  iteration is then a pass over memory rather than over the file.

Accuracy: sine of the largest principal angle between the top-``k`` sample PCs (the
scores of all samples, ``k`` = 4: five populations) and those of the complete data, for
each method's own preparation, and also against the genotype-standardised complete PCA
(the population structure a geneticist reads). Passes and wall time of each fit. Two
workers × one thread; on a shared machine compare the times within one run (ratios)
only.

    python benchmarks/genotype_missing.py            # 4,000 samples × 2,000 SNPs
    python benchmarks/genotype_missing.py --quick    # 2,000 × 1,000 (a smoke test)

Prints a table and writes benchmarks/results/genotype_missing.json.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
from scipy.linalg import subspace_angles

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import common_args, local_cluster, table, write_json  # noqa: E402

import scalepca  # noqa: E402
from scalepca.datasets.genotypes import make_genotypes, write_bed  # noqa: E402
from scalepca.preprocessing._genotype import fill_missing  # noqa: E402

RATES = (0.05, 0.10, 0.20)
K = 4
COLUMNS = [
    "missing",
    "method",
    "sine vs own complete",
    "sine vs genotype complete",
    "passes",
    "EM iterations",
    "seconds",
    "time / mean imputation (genotype)",
]


def _sine(A: np.ndarray, B: np.ndarray) -> float:
    return float(np.sin(np.max(subspace_angles(A, B))))


def _files(root: Path, n: int, d: int, seed: int) -> dict:
    """The four .bed files of one cohort (written once, kept under ``root``)."""
    paths = {}
    for rate in (0.0, *RATES):
        path = root / f"geno_{n}x{d}_s{seed}_m{int(rate * 100):02d}.bed"
        if not path.exists():
            g = make_genotypes(
                n,
                d,
                n_populations=5,
                fst=0.1,
                missing=rate,
                seed=seed,
                chunk_snps=500,
                dtype="int8",
            )
            write_bed(g, path)
        paths[rate] = path
    return paths


def _timed_fit(est, X):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(X)
    return est, time.perf_counter() - t0


def _counts_mean_filled(X):
    """The counts with each missing call at its SNP's mean over the calls (one pass)."""
    arr = X.data
    mean = da.nanmean(arr, axis=0).compute()
    return fill_missing(arr, mean)


def _scores(est, X) -> np.ndarray:
    """The n × k sample PCs (small: k columns) computed block by block."""
    out = est.transform(X)
    return np.asarray(
        getattr(out, "values", None) if hasattr(out, "dims") else out.compute()
    )


def run(paths: dict, *, max_iter: int, tols: list[float]) -> list[dict]:
    complete = scalepca.open_matrix(paths[0.0], dtype="float64")
    geno_ref, _ = _timed_fit(
        scalepca.PCA(K, standardize="genotype", svd_solver="covariance_eigh"), complete
    )
    counts_ref, _ = _timed_fit(
        scalepca.PCA(K, svd_solver="covariance_eigh"), complete.data
    )
    ref_geno = _scores(geno_ref, complete)
    ref_counts = _scores(counts_ref, complete.data)
    rows = []
    for rate in RATES:
        X = scalepca.open_matrix(paths[rate], dtype="float64")
        fits = {}
        est, t = _timed_fit(
            scalepca.PCA(K, standardize="genotype", svd_solver="covariance_eigh"), X
        )
        fits["mean imputation (genotype)"] = (est, t, _scores(est, X), ref_geno)
        filled = _counts_mean_filled(X)
        est, t = _timed_fit(scalepca.PCA(K, svd_solver="covariance_eigh"), filled)
        fits["mean imputation (counts)"] = (est, t, _scores(est, filled), ref_counts)
        for tol in tols:
            est, t = _timed_fit(
                scalepca.PPCA(
                    K, missing="em", max_iter=max_iter, tol=tol, persist=True
                ),
                X,
            )
            fits[f"EM (PPCA missing='em', tol={tol:g})"] = (
                est,
                t,
                _scores(est, X),
                ref_counts,
            )
        base = fits["mean imputation (genotype)"][1]
        for name, (est, t, S, ref) in fits.items():
            rows.append(
                {
                    "missing": f"{int(rate * 100)} %",
                    "method": name,
                    "sine vs own complete": _sine(S, ref),
                    "sine vs genotype complete": _sine(S, ref_geno),
                    "passes": int(est.n_passes_),
                    "EM iterations": int(est.n_iter_) if name.startswith("EM") else "",
                    "seconds": t,
                    "time / mean imputation (genotype)": t / base,
                }
            )
            print(table(rows[-1:], COLUMNS).splitlines()[-1], flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(ap, memory_limit="4GiB", quick="2,000 samples × 1,000 SNPs")
    ap.add_argument("--n-samples", type=int, default=4000)
    ap.add_argument("--n-snps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-iter", type=int, default=200)
    ap.add_argument(
        "--tols",
        default="1e-6,1e-9",
        help="EM's tol (the change of the log-likelihood per sample), one fit each",
    )
    args = ap.parse_args(argv)
    n, d = (2000, 1000) if args.quick else (args.n_samples, args.n_snps)
    root = Path(args.data_dir) / "genotype_missing"
    root.mkdir(parents=True, exist_ok=True)
    with local_cluster(
        n_workers=2, threads_per_worker=1, memory_limit=args.memory_limit
    ):
        paths = _files(root, n, d, args.seed)
        rows = run(
            paths, max_iter=args.max_iter, tols=[float(t) for t in args.tols.split(",")]
        )
    print()
    print(table(rows, COLUMNS))
    name = "genotype_missing_quick" if args.quick else "genotype_missing"
    out = write_json(
        name,
        {
            "shape": [n, d],
            "n_components": K,
            "populations": 5,
            "fst": 0.1,
            "cluster": "LocalCluster(n_workers=2, threads_per_worker=1)",
            "note": "machine shared with other jobs: compare times within one run",
            "em": {"max_iter": args.max_iter, "tols": args.tols},
            "rows": rows,
        },
    )
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
