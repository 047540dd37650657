"""Measured unit costs behind docs/scaling.md: read, Gram, merge, scheduler overhead,
partials.

Each cost is measured on this machine, one core:

- ``read_s_per_mb``: reading uncompressed float64 zarr chunks (seconds per MB);
- ``gram_s_per_mb``: :func:`scalepca.linalg.moments.block_moments` (column sums +
  centred Gram) per MB of a block of ``d`` features;
- ``merge_s``: one pairwise merge of two moments partials of ``d`` features;
- ``partial_bytes``: bytes of one partial (``8 d² + 8 d``);
- ``task_overhead_s``: the scheduler's cost per task (no-op tasks on a 2-worker
  LocalCluster);
- ``graph_bytes_per_task``: client memory taken by the graph of the moments pass, per
  task.

    python benchmarks/scaling_costs.py          # writes
    benchmarks/results/scaling_costs.json
"""

from __future__ import annotations

import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import local_cluster, write_json  # noqa: E402

from scalepca.linalg.moments import block_moments, merge_moments, moments_graph  # noqa: E402


def best(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def unit_costs(d: int, rows: int) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, d)) + 3.0
    mb = x.nbytes / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        z = zarr.create_array(
            store=tmp,
            shape=(rows * 8, d),
            chunks=(rows, d),
            dtype="f8",
            compressors=None,
        )
        z[:] = np.tile(x, (8, 1))
        read = best(lambda: [z[i * rows : (i + 1) * rows] for i in range(8)]) / 8
    gram = best(lambda: block_moments(x))
    p = block_moments(x)
    merge = best(lambda: merge_moments(p, p), repeat=20)
    return {
        "d": d,
        "rows": rows,
        "block_mb": mb,
        "read_s_per_mb": read / mb,
        "gram_s_per_mb": gram / mb,
        "merge_s": merge,
        "partial_bytes": 8 * d * d + 8 * d,
    }


def graph_bytes_per_task(n_blocks: int = 20_000) -> float:
    X = da.zeros((n_blocks * 200, 16), chunks=(200, 16))
    tracemalloc.start()
    graph = dict(moments_graph(X).__dask_graph__())
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return size / len(graph)


def task_overhead(n_tasks: int = 4000) -> float:
    with local_cluster(
        n_workers=2, threads_per_worker=1, memory_limit="1GiB"
    ) as client:
        x = da.ones((n_tasks,), chunks=1)
        (x + 1).sum().compute()  # warm-up
        t = best(lambda: (x + 1).sum().compute(), repeat=3)
        tasks = len((x + 1).sum().__dask_graph__())
        client.close()
    return t / tasks


def main():
    costs = [unit_costs(16, 200), unit_costs(16, 50_000), unit_costs(256, 50_000)]
    payload = {
        "units": costs,
        "task_overhead_s": task_overhead(),
        "graph_bytes_per_task": graph_bytes_per_task(),
        "cores": 1,
    }
    for c in costs:
        print(
            f"d={c['d']:4d} rows={c['rows']:6d} ({c['block_mb']:.2f} MB): read "
            f"{c['read_s_per_mb'] * 1e3:.2f} ms/MB, moments "
            f"{c['gram_s_per_mb'] * 1e3:.2f} ms/MB, merge {c['merge_s'] * 1e6:.1f} "
            f"µs, partial {c['partial_bytes']:,} B"
        )
    print(
        f"scheduler: {payload['task_overhead_s'] * 1e3:.2f} ms per task (2 workers); "
        f"graph {payload['graph_bytes_per_task']:.0f} B per task on the client"
    )
    print(f"wrote {write_json('scaling_costs', payload)}")


if __name__ == "__main__":
    main()
