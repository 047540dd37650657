"""A store of many small chunks: per-chunk cost of scalepca's PCA against dask's own
reduction.

Default run (issue 23): 4,000,000 × 16 float64 (512 MB) in 20,000 uncompressed chunks of
200 × 16, LocalCluster(n_workers=2, threads_per_worker=1). In one run, each timed after
a warm-up:

- ``read``: every chunk read and dropped (``map_blocks`` to a 1 × 1 block, summed) — the
  bare read pass, at the store's native chunks;
- ``dask sum``: dask's own ``da.from_zarr(store).sum(axis=0)`` at the native chunks;
- ``pca native``: ``scalepca.PCA`` on ``open_matrix(store, task_size=None)`` (one task
  per store chunk: the per-task cost of the moments reduction against dask's);
- ``pca coalesced``: ``scalepca.PCA`` on ``open_matrix(store)`` (several store chunks
  per task, ``task_size`` 128 MiB by default);
- ``read coalesced``: the bare read at the coalesced chunks.

Per-chunk cost = time × workers / store chunks (core-seconds per store chunk). Prints a
table and writes benchmarks/results/chunks.json (``chunks_quick.json`` with
``--quick``).

    python benchmarks/chunks.py            # 20,000 chunks (the issue's size)
    python benchmarks/chunks.py --quick    # 2,000 chunks (400,000 × 16, 51 MB)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import local_cluster, table, timed, write_json  # noqa: E402

import scalepca  # noqa: E402
from scalepca.linalg.moments import moments_graph  # noqa: E402


def ensure_store(path: Path, n_chunks: int, rows: int, d: int) -> zarr.Array:
    """``n_chunks`` × ``rows`` rows of ``d`` float64 features, one store chunk per
    ``rows`` rows, uncompressed (the per-chunk costs, not a codec's, are measured)."""
    n = n_chunks * rows
    if path.exists():
        z = zarr.open_array(str(path), mode="r")
        if z.shape == (n, d) and z.chunks == (rows, d):
            return z
    print(
        f"writing {n:,} × {d} float64 in {n_chunks:,} "
        f"chunks of {rows} × {d} at {path} ...",
        flush=True,
    )
    z = zarr.create_array(
        store=str(path),
        shape=(n, d),
        chunks=(rows, d),
        dtype="f8",
        compressors=None,
        overwrite=True,
    )
    rng = np.random.default_rng(0)
    mix = rng.standard_normal((4, d)) * np.array([[5.0], [3.0], [2.0], [1.0]])
    step = rows * max(1, 200_000 // rows)
    for start in range(0, n, step):
        m = min(step, n - start)
        z[start : start + m] = (
            rng.standard_normal((m, 4)) @ mix + 2.0 + 0.5 * rng.standard_normal((m, d))
        )
    return z


def _drop(block):
    return np.zeros((1, 1))


def bare_read(X: da.Array) -> da.Array:
    """Read every block and keep nothing (a 1 × 1 zero per block, summed in a tree)."""
    return X.map_blocks(
        _drop, chunks=((1,) * X.numblocks[0], (1,) * X.numblocks[1]), dtype=float
    ).sum()


def n_tasks(*collections) -> int:
    """Tasks of the optimized graph of ``collections`` (what the scheduler runs)."""
    opt = dask.optimize(*collections)
    return sum(len(c.__dask_graph__()) for c in opt)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--quick", action="store_true", help="2,000 chunks instead of 20,000"
    )
    ap.add_argument("--n-chunks", type=int, default=None)
    ap.add_argument("--chunk-rows", type=int, default=200)
    ap.add_argument("--n-features", type=int, default=16)
    ap.add_argument("--task-size", default="128MiB", help="coalesced task size")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--data-dir", default="/work/bench-data")
    args = ap.parse_args(argv)
    n_chunks = args.n_chunks or (2_000 if args.quick else 20_000)
    rows, d = args.chunk_rows, args.n_features
    path = Path(args.data_dir) / f"chunks_{n_chunks}x{rows}x{d}.zarr"
    path.parent.mkdir(parents=True, exist_ok=True)
    z = ensure_store(path, n_chunks, rows, d)

    results = []
    with local_cluster(
        n_workers=args.workers, threads_per_worker=1, memory_limit="2GiB"
    ) as client:
        native = da.from_zarr(z)
        Xn = scalepca.open_matrix(str(path), task_size=None)
        Xc = scalepca.open_matrix(str(path), task_size=args.task_size)
        assert Xn.chunks == native.chunks
        cases = [
            ("read", lambda: bare_read(native).compute(), n_tasks(bare_read(native))),
            (
                "dask sum",
                lambda: native.sum(axis=0).compute(),
                n_tasks(native.sum(axis=0)),
            ),
            ("pca native", lambda: scalepca.PCA(4).fit(Xn), n_tasks(moments_graph(Xn))),
            (
                "pca coalesced",
                lambda: scalepca.PCA(4).fit(Xc),
                n_tasks(moments_graph(Xc)),
            ),
            ("read coalesced", lambda: bare_read(Xc).compute(), n_tasks(bare_read(Xc))),
        ]
        fits = {}
        for name, fn, tasks in cases:
            fn()  # warm-up: imports, page cache, worker code
            best, times, out = timed(fn, repeat=args.repeat)
            if name.startswith("pca"):
                fits[name] = out
            results.append(
                {
                    "case": name,
                    "seconds": best,
                    "times": times,
                    "tasks": tasks,
                    "blocks": len(Xc.chunks[0]) if "coalesced" in name else n_chunks,
                }
            )
        client.close()
    ref = {r["case"]: r["seconds"] for r in results}
    for r in results:
        r["core_us_per_chunk"] = 1e6 * r["seconds"] * args.workers / n_chunks
        r["x_dask_sum"] = r["seconds"] / ref["dask sum"]
        r["x_read"] = r["seconds"] / ref["read"]
    a, b = fits["pca native"], fits["pca coalesced"]
    diff = float(np.max(np.abs(a.components_ - b.components_)))
    print(
        f"\n{n_chunks:,} store chunks of {rows} × {d} float64 ({z.nbytes / 1e6:.0f} "
        f"MB), {args.workers} workers × 1 thread; coalesced tasks of {args.task_size} "
        f"({Xc.chunks[0][0]:,} rows); best of {args.repeat}"
    )
    print(
        table(
            results,
            [
                "case",
                "seconds",
                "tasks",
                "blocks",
                "core_us_per_chunk",
                "x_dask_sum",
                "x_read",
            ],
        )
    )
    print(f"components native vs coalesced: max |difference| {diff:.1e}")
    payload = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "store": {
            "path": str(path),
            "shape": list(z.shape),
            "chunks": list(z.chunks),
            "n_chunks": n_chunks,
            "nbytes": int(z.nbytes),
            "codec": None,
        },
        "workers": args.workers,
        "threads_per_worker": 1,
        "task_size": args.task_size,
        "coalesced_rows": int(Xc.chunks[0][0]),
        "results": results,
        "components_max_abs_diff": diff,
    }
    out = write_json("chunks_quick" if args.quick else "chunks", payload)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
