"""PPCA by EM with missing values against one bare read pass, on one zarr store.

Default run (issue 3): 1,000,000 × 200 float64 (1.6 GB), rank-5 signal + unit noise, 10
% of entries missing completely at random, 50,000-row chunks, LocalCluster(n_workers=2,
threads_per_worker=1). Prints a table and writes benchmarks/results/ppca_em.json.

    python benchmarks/ppca_em.py            # the issue's figures
    python benchmarks/ppca_em.py --quick    # 100,000 rows (a smoke test)
    python benchmarks/ppca_em.py --codec none   # the same on an uncompressed store

Floor (issue 23): the read pass + one core's time for the initialisation pass's
per-chunk statistics (observed-entry d × d moments, measured on one real chunk in this
process with one BLAS thread) × chunks / worker threads; the passes and the whole fit
against both, with GB/s per core.

Measured, side by side in one run:
- one bare read pass (``nansum`` over rows of the zarr store), best of ``--repeat``;
- PPCA(missing="em") fit: time of every pass (the initialisation pass and each EM
  iteration, from the estimator's own pass timer), iterations to converge, passes, peak
  worker memory;
- accuracy: largest principal angle to the true loadings and to the closed-form PPCA
  of the complete data (generated again on the fly, same seed), and the RMSE of
  imputed entries of the first row chunk against the complete data.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

import dask.array as da
import numpy as np
from scipy.linalg import subspace_angles

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    FLOOR_COLUMNS,
    common_args,
    floor_rows,
    local_cluster,
    peak_worker_memory,
    table,
    timed,
    write_json,
)

import scalepca  # noqa: E402
from scalepca.datasets import (  # noqa: E402
    low_rank_factors,
    make_low_rank,
    make_missing,
    write_dataset,
)

RANK = 5
K = 5
NOISE = 1.0


class PassTimes(logging.Handler):
    """Collects ``(label, seconds)`` from the estimators' pass timer log lines."""

    pattern = re.compile(r"pass \d+ \((.*)\) took ([0-9.]+)s")

    def __init__(self):
        super().__init__(logging.INFO)
        self.passes: list[tuple[str, float]] = []

    def emit(self, record):
        m = self.pattern.search(record.getMessage())
        if m:
            self.passes.append((m.group(1), float(m.group(2))))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n-samples", type=int, default=1_000_000)
    ap.add_argument("--n-features", type=int, default=200)
    ap.add_argument("--missing", type=float, default=0.1)
    ap.add_argument("--chunk-rows", type=int, default=50_000)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument(
        "--codec", default="zstd", help="the store's codec (scalepca._codecs)"
    )
    common_args(ap, memory_limit="4GiB", repeat=3)
    args = ap.parse_args(argv)
    if args.quick:
        args.n_samples, args.repeat = 100_000, 1
    return args


def measure(args, path, gen) -> dict:
    """The read pass, the EM fit (its passes timed from scalepca's log), the closed
    form of the complete data, the angles, the imputation error and the floor rows."""
    n, d = args.n_samples, args.n_features
    handler = PassTimes()
    logging.getLogger("scalepca").addHandler(handler)
    logging.getLogger("scalepca").setLevel(logging.INFO)
    m = {}
    with local_cluster(memory_limit=args.memory_limit) as client:
        m["t_read"], m["all_read"], _ = timed(
            lambda: da.nansum(da.from_zarr(path), axis=0).compute(), repeat=args.repeat
        )
        X = da.from_zarr(path)
        handler.passes.clear()
        m["t_fit"], _, em = timed(
            lambda: scalepca.PPCA(K, missing="em", tol=args.tol).fit(X)
        )
        m["em"], m["peak"] = em, peak_worker_memory(client)
        passes = list(handler.passes)
        m["iters"] = [s for label, s in passes if label.startswith("EM iteration")]
        m["init"] = [s for label, s in passes if label.startswith("EM initialisation")]
        # accuracy against the truth and against the closed form of the complete data
        V, _, _ = low_rank_factors(d, RANK, seed=0)
        complete = make_low_rank(n, d, **gen)
        m["t_cf"], _, cf = timed(lambda: scalepca.PPCA(K).fit(complete))
        m["cf"] = cf
        m["ang_true"] = float(np.degrees(subspace_angles(V.T, em.components_.T).max()))
        m["ang_cf"] = float(
            np.degrees(subspace_angles(cf.components_.T, em.components_.T).max())
        )
        m["ang_cf_true"] = float(
            np.degrees(subspace_angles(V.T, cf.components_.T).max())
        )
        rows = slice(0, args.chunk_rows)
        x_true = complete[rows].compute()
        x_miss = X[rows].compute()
        hole = np.isnan(x_miss)
        filled = em.impute(x_miss)
        m["rmse"] = float(np.sqrt(np.mean((filled[hole] - x_true[hole]) ** 2)))
        from scalepca.linalg.em import observed_moments_block

        m["f_rows"], m["f_info"] = floor_rows(
            args.codec,
            path,
            m["t_read"],
            {
                "EM initialisation pass": (m["init"][0], 1),
                "EM iteration (mean)": (float(np.mean(m["iters"])), 1),
                f"whole fit ({em.n_iter_} iterations)": (m["t_fit"], em.n_passes_),
            },
            threads=2,
            work=observed_moments_block,
            work_label="observed moments",
        )
    return m


def step_rows(m) -> list[dict]:
    t_read, init, iters, em = m["t_read"], m["init"], m["iters"], m["em"]
    it_mean = float(np.mean(iters))
    return [
        {
            "step": "bare read pass (nansum over rows)",
            "seconds": t_read,
            "x read pass": 1.0,
        },
        {
            "step": "EM initialisation pass (init='pca', d×d stats)",
            "seconds": init[0],
            "x read pass": init[0] / t_read,
        },
        {
            "step": "EM iteration (mean)",
            "seconds": it_mean,
            "x read pass": it_mean / t_read,
        },
        {
            "step": "EM iteration (max)",
            "seconds": max(iters),
            "x read pass": max(iters) / t_read,
        },
        {
            "step": f"whole fit ({em.n_iter_} iterations, {em.n_passes_} passes)",
            "seconds": m["t_fit"],
            "x read pass": m["t_fit"] / t_read,
        },
        {
            "step": "closed-form PPCA of the complete data (regenerated)",
            "seconds": m["t_cf"],
            "x read pass": m["t_cf"] / t_read,
        },
    ]


def figures(m, table_rows) -> dict:
    em, cf, t_read, iters, peak = m["em"], m["cf"], m["t_read"], m["iters"], m["peak"]
    it_mean = float(np.mean(iters))
    return {
        "read_pass_seconds_all": m["all_read"],
        "read_pass_seconds": t_read,
        "init_pass_seconds": m["init"][0],
        "iteration_seconds": iters,
        "iteration_over_read_mean": it_mean / t_read,
        "iteration_over_read_max": max(iters) / t_read,
        "n_iter": em.n_iter_,
        "converged": bool(em.converged_),
        "n_passes": em.n_passes_,
        "fit_seconds": m["t_fit"],
        "loglike_per_sample": em.loglike_.tolist(),
        "peak_worker_bytes": peak,
        "peak_worker_gib": peak["max"] / 2**30,
        "angle_to_true_deg": m["ang_true"],
        "angle_to_complete_closed_form_deg": m["ang_cf"],
        "angle_complete_closed_form_to_true_deg": m["ang_cf_true"],
        "imputation_rmse_first_chunk": m["rmse"],
        "noise_sd": NOISE,
        "noise_variance_em": em.noise_variance_,
        "noise_variance_closed_form_complete": cf.noise_variance_,
        "targets": {"iteration_over_read_le_2": it_mean / t_read},
        "rows": table_rows,
        "floor_rows": m["f_rows"],
        "floor_store": m["f_info"],
    }


def main(argv=None):
    args = parse_args(argv)
    n, d = args.n_samples, args.n_features
    pct = int(round(100 * args.missing))
    path = f"{args.data_dir}/ppca_em_{n}x{d}_miss{pct}" + (
        ".zarr" if args.codec == "zstd" else f"_{args.codec}.zarr"
    )
    gen = dict(rank=RANK, noise=NOISE, chunk_rows=args.chunk_rows, seed=0)
    if not Path(path).exists():
        print(
            f"generating {n:,} × {d} float64 with {pct}% missing at {path} ...",
            flush=True,
        )
        with local_cluster(memory_limit=args.memory_limit):
            write_dataset(
                make_missing(n, d, missing=args.missing, **gen), path, codec=args.codec
            )
    results = {
        "n_samples": n,
        "n_features": d,
        "missing_fraction": args.missing,
        "chunk_rows": args.chunk_rows,
        "rank": RANK,
        "n_components": K,
        "gigabytes": n * d * 8 / 1e9,
        "tol": args.tol,
    }
    m = measure(args, path, gen)
    em, cf, peak = m["em"], m["cf"], m["peak"]
    table_rows = step_rows(m)
    results.update(figures(m, table_rows))
    print(
        f"\n{n:,} × {d} float64 ({results['gigabytes']:.2f} GB), {pct}% missing, "
        f"{args.chunk_rows:,}-row chunks, 2 workers × 1 thread, "
        f"{args.memory_limit}/worker, k={K}"
    )
    print(table(table_rows, ["step", "seconds", "x read pass"]))
    print(table(m["f_rows"], FLOOR_COLUMNS))
    print(
        f"\niterations to converge (tol={args.tol} on loglike/sample): {em.n_iter_} "
        f"(converged: {em.converged_}); passes: {em.n_passes_} = 1 + n_iter"
    )
    print(f"peak worker memory: {peak['max'] / 2**30:.2f} GiB")
    print(
        f"max principal angle: EM vs truth {m['ang_true']:.3f}°, EM vs complete-data "
        f"closed form {m['ang_cf']:.3f}°, closed form vs truth {m['ang_cf_true']:.3f}°"
    )
    print(
        f"σ²: EM {em.noise_variance_:.5f}, closed form (complete) "
        f"{cf.noise_variance_:.5f}, true {NOISE**2}"
    )
    print(f"imputation RMSE on the first chunk: {m['rmse']:.4f} (noise sd {NOISE})")
    print("targets:", results["targets"])
    print(
        "written", write_json("ppca_em" if not args.quick else "ppca_em_quick", results)
    )


if __name__ == "__main__":
    main()
