"""Sparse PCA: scalepca (minibatch, batch, elasticnet) against scikit-learn and the read
pass.

Part 1 (in memory, issue 5): 100,000 × 400 sparse-spiked data, 10 components.
scikit-learn ``MiniBatchSparsePCA(alpha=1, batch_size=256, max_iter=5)`` against
scalepca's dictionary methods on the same objective. scikit-learn minimises
``½‖Xc − U V‖² + α_s ‖V‖₁`` with ``‖U_k‖ ≤ 1``; scalepca minimises the per-sample form
``(1/2n)‖Xc − Y Dᵀ‖² + α ‖D‖₁`` with ``(1/n)‖Y_:j‖² ≤ 1``, which is the same problem
divided by n with ``D = Vᵀ/√n`` and ``α = α_s/√n``; both take ``alpha = α_s`` (scalepca
converts). Every solution is scored by the same function: the objective at its sparse
loadings with the optimal bounded codes (one exact pass, ``dictionary_objective_on``),
reported in scikit-learn's units (× n). "Matched sparsity": scalepca's alpha is also
tuned (bisection) until its share of zero loadings equals scikit-learn's.

Part 2 (issue 5 and 10): a 5,000,000 × 200 float32 zarr (4 GB) on a LocalCluster of 2
workers with 1 GiB each: one read pass (sum over rows) against an epoch of
``method="minibatch"`` (target ≤ 2×) and a whole ``method="elasticnet"`` fit (target ≤
1.3×), beside PCA's and the batch method's fits from the same moments pass; the one-pass
ratios are medians of ``--zarr-repeat`` paired ratios (each fit over the mean of the
read passes either side).

    flock /tmp/scalepca-bench.lock python benchmarks/spca.py            # everything
    python benchmarks/spca.py --quick                                  # small smoke run
    python benchmarks/spca.py --quick --floor-only                     # floor table, <
    1 min

Part 3 (issue 23), the floor table: on the float32 store written with zstd (zarr's
default, the store of the earlier rounds) and on an uncompressed copy (``--codecs``),
the read pass, the floor (read pass + one core's Gram time per chunk × chunks /
worker threads, measured in rounds between the fits:
``_common.one_pass_against_floor``) and the one-pass fits (elasticnet, PCA, batch)
against both, with GB/s per core. ``--gram-precision float64`` runs them with float64
products (the Gram before issue 23), for the before/after comparison of float32 data.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    FLOOR_COLUMNS,
    common_args,
    local_cluster,
    one_pass_against_floor,
    table,
    timed,
    write_json,
)

import scalepca  # noqa: E402
from scalepca.datasets import make_sparse_spike, sparse_spike_loadings, write_dataset  # noqa: E402
from scalepca.models.sparse_pca import dictionary_objective_on  # noqa: E402

K = 10


def zero_share(C) -> float:
    return float(np.mean(np.asarray(C) == 0))


def support_scores(C, V_true) -> dict:
    """Support recovery: every true component is matched to the estimated component
    sharing most of its support; precision = matched true non-zeros / all estimated
    non-zeros, recall = matched true non-zeros / all true non-zeros."""
    est = [set(np.flatnonzero(c)) for c in np.asarray(C)]
    true = [set(np.flatnonzero(v)) for v in np.asarray(V_true)]
    tp = sum(len(max(est, key=lambda e, t=t: len(e & t)) & t) for t in true)
    return {
        "precision": tp / max(sum(map(len, est)), 1),
        "recall": tp / max(sum(map(len, true)), 1),
    }


def part_in_memory(args) -> tuple[list[dict], dict]:
    from sklearn.decomposition import MiniBatchSparsePCA

    n, d = args.mem_samples, args.mem_features
    X = make_sparse_spike(
        n,
        d,
        n_components=K,
        support=20,
        strength=20.0,
        noise=1.0,
        chunk_rows=n // 10,
        seed=1,
    ).compute()
    V_true = sparse_spike_loadings(d, K, 20, seed=1)
    Xd = da.from_array(X, chunks=(n // 10, d))
    mean = X.mean(axis=0)
    alpha_s = args.sk_alpha
    alpha = alpha_s / np.sqrt(n)  # the per-sample penalty both objectives amount to

    def score(D):  # scikit-learn's objective (× n) at loadings D (d × k), optimal codes
        return n * dictionary_objective_on(Xd, D, alpha, mean)

    rows = []
    sk = MiniBatchSparsePCA(
        n_components=K, alpha=alpha_s, batch_size=256, max_iter=5, random_state=0
    )
    t_sk, _, _ = timed(lambda: sk.fit(X), repeat=args.repeat)
    sk_zero = zero_share(sk.components_)
    rows.append(
        {
            "method": "sklearn MiniBatchSparsePCA (5 it)",
            "seconds": t_sk,
            "objective": score(sk.components_.T / np.sqrt(n)),
            "zero share": sk_zero,
            **support_scores(sk.components_, V_true),
        }
    )

    def run(method, a, repeat=args.repeat, **kw):
        est = scalepca.SparsePCA(K, method=method, alpha=a, random_state=0, **kw)
        t, _, _ = timed(lambda: est.fit(X), repeat=repeat)
        return est, t

    for method, kw in [
        ("minibatch", {"max_iter": 5, "tol": 0.0, "max_no_improvement": None}),
        ("batch", {}),
    ]:
        est, t = run(method, alpha_s, **kw)
        rows.append(
            {
                "method": f"scalepca {method}, same alpha",
                "seconds": t,
                "objective": score(est.loadings_.T),
                "zero share": zero_share(est.components_),
                "n_iter": est.n_iter_,
                **support_scores(est.components_, V_true),
            }
        )
        # matched sparsity: bisection on alpha (log scale) to sklearn's share of zeros
        lo, hi = alpha_s / 50, alpha_s * 50
        best = None
        for _ in range(args.bisect):
            mid = np.sqrt(lo * hi)
            e, _ = run(method, mid, repeat=1, **kw)
            z = zero_share(e.components_)
            if best is None or abs(z - sk_zero) < abs(best[1] - sk_zero):
                best = (mid, z)
            if abs(z - sk_zero) < 0.5 / (K * d):
                break
            lo, hi = (mid, hi) if z < sk_zero else (lo, mid)
        est, t = run(method, best[0], **kw)
        rows.append(
            {
                "method": f"scalepca {method}, matched sparsity (alpha×{best[0] / alpha_s:.3g})",
                "seconds": t,
                "objective": score(est.loadings_.T),
                "zero share": zero_share(est.components_),
                "n_iter": est.n_iter_,
                **support_scores(est.components_, V_true),
            }
        )
    for r in rows:
        r["x sklearn time"] = r["seconds"] / t_sk
        r["objective / sklearn"] = r["objective"] / rows[0]["objective"]
    return rows, {
        "n_samples": n,
        "n_features": d,
        "alpha_sklearn": alpha_s,
        "alpha_per_sample": alpha,
    }


def ensure_zarr(path, n, d, chunk_rows, codec="zstd"):
    if Path(path).exists():
        return
    print(
        f"generating {n:,} × {d} float32 sparse-spiked data ({codec}) at {path} ...",
        flush=True,
    )
    with local_cluster(memory_limit="3GiB"):
        write_dataset(
            make_sparse_spike(
                n,
                d,
                n_components=K,
                support=10,
                strength=20.0,
                noise=1.0,
                chunk_rows=chunk_rows,
                dtype="float32",
                seed=0,
            ),
            path,
            codec=codec,
        )


def zarr_path(args, codec="zstd"):
    """The zstd store keeps the earlier rounds' name; other codecs get a suffix."""
    stem = f"{args.data_dir}/spca_spike_{args.zarr_samples}x{args.zarr_features}_f32"
    return f"{stem}.zarr" if codec == "zstd" else f"{stem}_{codec}.zarr"


def part_floor(args) -> tuple[list[dict], dict]:
    from scalepca.linalg.moments import GRAM_PRECISION_KEY

    stores = {}
    for codec in args.codecs.split(","):
        stores[codec] = zarr_path(args, codec)
        ensure_zarr(
            stores[codec], args.zarr_samples, args.zarr_features, args.chunk_rows, codec
        )
    fits = {
        "elasticnet (n_nonzero=10)": lambda X: scalepca.SparsePCA(
            K, method="elasticnet", n_nonzero=10
        ).fit(X),
        "PCA covariance_eigh": lambda X: scalepca.PCA(
            K, svd_solver="covariance_eigh"
        ).fit(X),
        "batch (covariance)": lambda X: scalepca.SparsePCA(
            K, method="batch", alpha=args.zarr_alpha, random_state=0
        ).fit(X),
    }
    # the precision is read when a fit builds its graph, on this client
    with dask.config.set({GRAM_PRECISION_KEY: args.gram_precision}):
        return one_pass_against_floor(
            stores, fits, repeat=args.zarr_repeat, memory_limit=args.memory_limit
        )


def _one_pass_bracketed(args, X, read, prev, V_true) -> list[dict]:
    """The one-pass fits, each bracketed by read passes (``read()``; ``prev``: the
    last one's time), repeated round-robin: the ratio is the median of the paired
    ratios (a single pair moved by ±0.1× between runs here)."""
    one_pass = [
        (
            "elasticnet (n_nonzero=10)",
            lambda: scalepca.SparsePCA(K, method="elasticnet", n_nonzero=10),
        ),
        (
            "PCA covariance_eigh (the same moments pass)",
            lambda: scalepca.PCA(K, svd_solver="covariance_eigh"),
        ),
        (
            "batch (covariance)",
            lambda: scalepca.SparsePCA(
                K, method="batch", alpha=args.zarr_alpha, random_state=0
            ),
        ),
    ]
    runs = {label: [] for label, _ in one_pass}
    for _ in range(args.zarr_repeat):
        for label, make in one_pass:
            e = make()
            t0 = time.perf_counter()
            e.fit(X)
            t = time.perf_counter() - t0
            after = read()
            runs[label].append((t, 0.5 * (prev + after), e))
            prev = after
    rows = []
    for label, _ in one_pass:
        ts = [t for t, _, _ in runs[label]]
        ratios = [t / ref for t, ref, _ in runs[label]]
        e = runs[label][-1][2]
        row = {
            "method": f"{label}: whole fit ({e.n_passes_} pass)",
            "seconds": float(np.median(ts)),
            "x read pass": float(np.median(ratios)),
            "read pass around": float(np.median([ref for _, ref, _ in runs[label]])),
            "paired ratios": [round(r, 3) for r in ratios],
        }
        if isinstance(e, scalepca.SparsePCA):
            row.update(
                zero_share=zero_share(e.components_),
                **support_scores(e.components_, V_true),
            )
            row["zero share"] = row.pop("zero_share")
        rows.append(row)
    return rows


def part_zarr(args) -> tuple[list[dict], dict]:
    """Every fit is bracketed by read passes; its ratio uses the mean of the two
    neighbouring reads, so load from other processes on a shared machine hits both
    sides alike."""
    import os

    n, d = args.zarr_samples, args.zarr_features
    path = zarr_path(args)
    ensure_zarr(path, n, d, args.chunk_rows)
    V_true = sparse_spike_loadings(d, K, 10, seed=0)
    rows = []
    info = {
        "path": path,
        "n_samples": n,
        "n_features": d,
        "gigabytes": n * d * 4 / 1e9,
        "memory_per_worker": args.memory_limit,
        "loadavg_start": os.getloadavg(),
    }
    with local_cluster(memory_limit=args.memory_limit) as client:
        X = da.from_zarr(path)
        info["chunks"] = int(X.numblocks[0])
        reads = []

        def read():
            t0 = time.perf_counter()
            da.from_zarr(path).sum(axis=0).compute()
            reads.append(time.perf_counter() - t0)
            return reads[-1]

        read()  # warm-up (worker imports, page cache state), not used
        r0 = read()
        est = scalepca.SparsePCA(
            K,
            method="minibatch",
            alpha=args.zarr_alpha,
            max_iter=args.epochs,
            tol=0.0,
            max_no_improvement=None,
            batch_size=args.batch_size,
            random_state=0,
        )
        t0 = time.perf_counter()
        est.fit(X)
        t_fit = time.perf_counter() - t0
        r1 = read()
        per_epoch = float(np.median(est.epoch_times_))
        ref = 0.5 * (r0 + r1)
        rows.append(
            {
                "method": "bare read pass (sum over rows), mean of the two around",
                "seconds": ref,
                "x read pass": 1.0,
            }
        )
        rows.append(
            {
                "method": f"minibatch: one epoch (median of {len(est.epoch_times_)})",
                "seconds": per_epoch,
                "x read pass": per_epoch / ref,
                "zero share": zero_share(est.components_),
                **support_scores(est.components_, V_true),
            }
        )
        rows.append(
            {
                "method": f"minibatch: whole fit ({est.n_passes_} passes)",
                "seconds": t_fit,
                "x read pass": t_fit / ref,
                "objective": est.objective_,
            }
        )
        info["minibatch_epoch_times"] = est.epoch_times_.tolist()
        info["minibatch_cost_history"] = est.cost_history_.tolist()
        rows += _one_pass_bracketed(args, X, read, r1, V_true)
        info["read_passes"] = reads
        info["loadavg_end"] = os.getloadavg()
        # current (not peak: ru_maxrss of a spawned worker includes its parent's) memory
        info["worker_rss_MiB_end"] = client.run(
            lambda dask_worker: dask_worker.monitor.get_process_memory() // 2**20
        )
    return rows, info


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mem-samples", type=int, default=100_000)
    ap.add_argument("--mem-features", type=int, default=400)
    ap.add_argument("--sk-alpha", type=float, default=1.0)
    ap.add_argument("--bisect", type=int, default=14)
    ap.add_argument("--zarr-samples", type=int, default=5_000_000)
    ap.add_argument("--zarr-features", type=int, default=200)
    ap.add_argument("--chunk-rows", type=int, default=62_500)
    ap.add_argument(
        "--zarr-alpha",
        type=float,
        default=224.0,
        help="SparsePCA alpha (scikit-learn's units; 224 is 0.1 per sample at 5M rows)",
    )
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="rows per minibatch (default: SparsePCA's, at most 8 minibatches "
        "an epoch)",
    )
    ap.add_argument(
        "--zarr-repeat",
        type=int,
        default=3,
        help="round-robin repeats of the one-pass fits on the zarr",
    )
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-zarr", action="store_true")
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--skip-floor", action="store_true")
    ap.add_argument(
        "--gram-precision",
        default="auto",
        choices=["auto", "float64"],
        help="products of float32 blocks in the floor table's fits",
    )
    common_args(ap, memory_limit="1GiB", repeat=2, floor=True)
    args = ap.parse_args(argv)
    if args.quick:
        args.mem_samples, args.zarr_samples, args.repeat, args.bisect = (
            20_000,
            250_000,
            1,
            8,
        )
        args.zarr_repeat = 1
        args.chunk_rows = 25_000
    if args.floor_only:
        args.skip_memory = args.skip_zarr = True
    return args


#: the heading (formatted with a part's figures) and the table columns of each part
IN_MEMORY_TABLE = (
    "\nin memory: {n_samples:,} × {n_features}, " + str(K) + " components, sklearn "
    "alpha={alpha_sklearn} ≡ per-sample penalty {alpha_per_sample:.4g}",
    [
        "method",
        "seconds",
        "x sklearn time",
        "objective",
        "objective / sklearn",
        "zero share",
        "precision",
        "recall",
        "n_iter",
    ],
)
ZARR_TABLE = (
    "\nzarr: {n_samples:,} × {n_features} float32 ({gigabytes:.1f} GB, {chunks} "
    "chunks), 2 workers × {memory_per_worker}",
    [
        "method",
        "seconds",
        "x read pass",
        "read pass around",
        "zero share",
        "precision",
        "recall",
        "objective",
        "paired ratios",
    ],
)


def _in_memory(args):
    with dask.config.set(scheduler="threads"):
        rows, info = part_in_memory(args)
    return (
        "in_memory",
        rows,
        {**info, "rows": rows},
        IN_MEMORY_TABLE[0].format(**info),
        IN_MEMORY_TABLE[1],
        "",
    )


def _zarr(args):
    rows, info = part_zarr(args)
    footer = (
        f"load average at start {info['loadavg_start']}, at end {info['loadavg_end']}"
    )
    return (
        "zarr",
        rows,
        {**info, "rows": rows},
        ZARR_TABLE[0].format(**info),
        ZARR_TABLE[1],
        footer,
    )


def _floor(args):
    rows, info = part_floor(args)
    header = (
        f"\nfloor: {args.zarr_samples:,} × {args.zarr_features} float32, "
        f"{args.chunk_rows:,}-row chunks, 2 workers × 1 thread, "
        f"{args.memory_limit}/worker, gram precision {args.gram_precision} (best of "
        f"{args.zarr_repeat})"
    )
    key = "floor" if args.gram_precision == "auto" else f"floor_{args.gram_precision}"
    entry = {"rows": rows, "stores": info, "gram_precision": args.gram_precision}
    return key, rows, entry, header, FLOOR_COLUMNS, ""


def run_parts(args) -> dict:
    """The parts not skipped, each printed as it ends: ``{part: figures}``."""
    out = {}
    for skip, part in (
        (args.skip_memory, _in_memory),
        (args.skip_zarr, _zarr),
        (args.skip_floor, _floor),
    ):
        if skip:
            continue
        key, rows, entry, header, columns, footer = part(args)
        print(header)
        print(table(rows, columns))
        if footer:
            print(footer)
        out[key] = entry
    return out


def main(argv=None):
    args = parse_args(argv)
    if args.generate_only:
        for codec in args.codecs.split(","):
            ensure_zarr(
                zarr_path(args, codec),
                args.zarr_samples,
                args.zarr_features,
                args.chunk_rows,
                codec,
            )
        return
    warnings.simplefilter("ignore", UserWarning)
    out = run_parts(args)
    name = "spca" if not args.quick else "spca_quick"
    if args.skip_memory or args.skip_zarr:  # keep the other part's last results
        import json

        old = write_json.__globals__["RESULTS"] / f"{name}.json"
        if old.exists():
            prev = json.loads(old.read_text())
            out = {**{k: v for k, v in prev.items() if k != "machine"}, **out}
    path = write_json(name, out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
