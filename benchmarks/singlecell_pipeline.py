"""scanpy's single-cell pipeline end to end from a counts store: scalepca against
scanpy's dask pipeline (issue 36).

The pipeline: ``normalize_total`` (median target) → ``log1p`` →
``highly_variable_genes`` (seurat, ``--n-top-genes``) → ``scale(max_value=10)`` → PCA
(``--n-comps``), the scores in ``obsm["X_pca"]``. scalepca runs it as
``scalepca.pp.pca(store, ...)``: the steps inside the passes (counts per cell, per-gene
moments, the covariance of the chosen genes, the scores: 4 passes), results written into
the store without rewriting X. scanpy runs the same calls on the same lazily read dask
CSR array (anndata's ``read_elem_lazy``), subsetting the genes before ``scale`` (its
dask ``scale`` densifies) and ``pca(svd_solver="covariance_eigh")``; a failure (memory,
an unsupported step) is reported, not fatal. Both on
``LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GiB")``.

The floor: each pass's bare read (a pass over the store counting stored entries) plus
one core's time for the pass's own task on one block (measured before the cluster
starts, one BLAS thread) × blocks / workers, summed over scalepca's passes.

Prints a table; writes benchmarks/results/singlecell_pipeline.json
(``singlecell_pipeline_quick.json`` with ``--quick``).

    # the issue's size: 1,000,000 cells × 20,000 genes at 2 % (4·10⁸ stored counts)
    python benchmarks/singlecell_pipeline.py --n-cells 1000000 --n-genes 20000
    --density 0.02 python benchmarks/singlecell_pipeline.py --quick    # 20,000 ×
    2,000 at 5 %, 500 genes, 20 PCs
"""

from __future__ import annotations

import argparse
import time
import traceback
from pathlib import Path

import numpy as np
from _common import (
    common_args,
    local_cluster,
    one_core_seconds,
    peak_worker_memory,
    table,
    write_json,
)
from sparse_counts import ensure_store, lazy_counts, read_pass

import scalepca
from scalepca.linalg.moments import block_moments


def block_work(path, chunk_rows, steps, model) -> dict:
    """One core's seconds for each pass's task on the store's first block (steps and
    model fitted on that block alone: the work per block does not depend on the
    values learned)."""
    from scalepca.linalg import singlecell as k

    x = lazy_counts(path, chunk_rows)[:chunk_rows].compute(scheduler="sync")
    moments = steps._gene_moments_block()
    prepared = steps.block(x)
    W = np.ascontiguousarray(model.components_.T)
    return {
        "counts per cell": one_core_seconds(k.cell_totals, x),
        "gene moments": one_core_seconds(moments, x),
        "covariance": one_core_seconds(lambda b: block_moments(steps.block(b)), x),
        "scores": one_core_seconds(lambda b: steps.block(b) @ W, x),
        "_prepared_nnz": int(prepared.nnz),
    }


def scalepca_run(store, args) -> tuple[dict, object]:
    t0 = time.perf_counter()
    model = scalepca.pp.pca(
        str(store),
        args.n_comps,
        normalize_total=True,
        log1p=True,
        flavor="seurat",
        n_top_genes=args.n_top_genes,
        scale=True,
        max_value=10.0,
        chunks=args.chunk_rows,
    )
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "passes": model.singlecell_n_passes_,
        "variance_ratio": model.explained_variance_ratio_.tolist(),
        "highly_variable": np.flatnonzero(
            model._preprocessing.cells.highly_variable_
        ).tolist(),
    }, model


def scanpy_run(store, args) -> dict:
    import anndata
    import scanpy as sc

    t0 = time.perf_counter()
    a = anndata.AnnData(X=lazy_counts(store, args.chunk_rows).astype(np.float64))
    sc.pp.normalize_total(a)
    sc.pp.log1p(a)
    sc.pp.highly_variable_genes(a, n_top_genes=args.n_top_genes, flavor="seurat")
    hv = np.asarray(a.var["highly_variable"])
    a = a[:, hv].copy()
    sc.pp.scale(a, max_value=10.0)
    sc.pp.pca(a, n_comps=args.n_comps, svd_solver="covariance_eigh")
    np.asarray(a.obsm["X_pca"])  # the scores, computed
    ratio = np.asarray(a.uns["pca"]["variance_ratio"])
    return {
        "seconds": time.perf_counter() - t0,
        "variance_ratio": ratio.tolist(),
        "highly_variable": np.flatnonzero(hv).tolist(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n-cells", type=int, default=1_000_000)
    ap.add_argument("--n-genes", type=int, default=20_000)
    ap.add_argument("--density", type=float, default=0.02)
    ap.add_argument("--chunk-rows", type=int, default=20_000)
    ap.add_argument("--n-top-genes", type=int, default=2_000)
    ap.add_argument("--n-comps", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    common_args(ap, memory_limit="2GiB", quick="20,000 × 2,000 at 5 % (a smoke test)")
    ap.add_argument("--skip-scanpy", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_cells, args.n_genes, args.density = 20_000, 2_000, 0.05
        args.chunk_rows, args.n_top_genes, args.n_comps = 4_000, 500, 20
    Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    store = Path(args.data_dir) / (
        f"sc_counts_{args.n_cells}x{args.n_genes}_{args.density:g}.zarr"
    )
    ensure_store(store, args.n_cells, args.n_genes, args.density, args.chunk_rows, args)
    out = {
        "n_cells": args.n_cells,
        "n_genes": args.n_genes,
        "density": args.density,
        "n_top_genes": args.n_top_genes,
        "n_comps": args.n_comps,
        "workers": args.workers,
        "memory_limit": args.memory_limit,
    }
    rows = []
    with local_cluster(
        n_workers=args.workers, memory_limit=args.memory_limit
    ) as client:
        X = lazy_counts(store, args.chunk_rows)
        t_read, nnz = read_pass(X)
        out["read_pass_seconds"], out["stored_counts"] = t_read, nnz
        res, model = scalepca_run(store, args)
        res["peak_worker_MiB"] = peak_worker_memory(client)["max"] / 2**20
        out["scalepca"] = res
        rows.append(
            {
                "method": "scalepca pp.pca",
                "seconds": res["seconds"],
                "x read": res["seconds"] / t_read,
                "passes": res["passes"],
                "peak worker MiB": res["peak_worker_MiB"],
            }
        )
    work = block_work(store, args.chunk_rows, model._preprocessing.cells, model)
    blocks = X.numblocks[0]
    floor = sum(
        t_read + s * blocks / args.workers
        for k, s in work.items()
        if not k.startswith("_")
    )
    out["floor_seconds"], out["block_seconds"] = floor, work
    rows[0]["x floor"] = res["seconds"] / floor
    if not args.skip_scanpy:
        with local_cluster(
            n_workers=args.workers, memory_limit=args.memory_limit
        ) as client:
            try:
                sc_res = scanpy_run(store, args)
                sc_res["peak_worker_MiB"] = peak_worker_memory(client)["max"] / 2**20
                sc_res["same_hvg"] = sc_res["highly_variable"] == res["highly_variable"]
                sc_res["variance_ratio_max_rel_diff"] = float(
                    np.max(
                        np.abs(
                            np.array(sc_res["variance_ratio"])
                            / np.array(res["variance_ratio"])
                            - 1
                        )
                    )
                )
                out["scanpy_dask"] = sc_res
                out["speedup_vs_scanpy"] = sc_res["seconds"] / res["seconds"]
                rows.append(
                    {
                        "method": "scanpy dask pipeline",
                        "seconds": sc_res["seconds"],
                        "x read": sc_res["seconds"] / t_read,
                        "peak worker MiB": sc_res["peak_worker_MiB"],
                    }
                )
            except Exception:  # noqa: BLE001 - a failing comparison is reported, not fatal
                out["scanpy_dask"] = {"error": traceback.format_exc()}
                print(traceback.format_exc(), flush=True)
    print(
        table(
            rows,
            ["method", "seconds", "x read", "x floor", "passes", "peak worker MiB"],
        )
    )
    for key in ("speedup_vs_scanpy",):
        if key in out:
            print(f"{key}: {out[key]:.2f}")
    if "scanpy_dask" in out and "same_hvg" in out["scanpy_dask"]:
        print(
            f"same HVG list: {out['scanpy_dask']['same_hvg']}; variance ratios differ "
            f"by {out['scanpy_dask']['variance_ratio_max_rel_diff']:.2e} at most"
        )
    path = write_json(
        "singlecell_pipeline_quick" if args.quick else "singlecell_pipeline", out
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
