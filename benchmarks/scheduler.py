"""The scheduler's time per task and per pass as workers and tasks grow.

A pass here is scalepca's moments pass (:func:`scalepca.linalg.moments.moments_graph`:
one task per row block, partials merged in a tree of fan-in 8) over blocks so small (4 ×
4 float64 zeros, made on the worker) that reading and arithmetic cost nothing: what
remains is the scheduler's and the workers' bookkeeping and the tree's transfers. Each
configuration runs on a fresh local cluster of 1-thread worker processes; one warm-up
pass, then the best of ``--repeat`` passes.

    python benchmarks/scheduler.py                 # 2, 16, 32 workers × 10⁴, 10⁵ blocks
    python benchmarks/scheduler.py --workers 2,16 --tasks 10000

Writes ``benchmarks/results/scheduler.json`` and prints a table: tasks of the pass (map
+ merges), seconds per pass, milliseconds per task, tasks per second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import dask.array as da

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import local_cluster, table, timed, write_json  # noqa: E402

from scalepca.linalg.moments import moments_graph  # noqa: E402


def tiny_pass(n_blocks: int):
    """The moments pass of ``n_blocks`` row blocks of 4 × 4 zeros."""
    X = da.zeros((4 * n_blocks, 4), chunks=(4, 4))
    return moments_graph(X)


def measure(workers: int, n_blocks: int, repeat: int, memory_limit: str) -> dict:
    graph = tiny_pass(n_blocks)
    tasks = len(graph.__dask_graph__())
    with local_cluster(
        n_workers=workers, threads_per_worker=1, memory_limit=memory_limit
    ) as client:
        client.wait_for_workers(workers, timeout=300)
        tiny_pass(min(n_blocks, 1000)).compute()  # warm-up: imports on every worker
        best, times, _ = timed(lambda: tiny_pass(n_blocks).compute(), repeat=repeat)
    return {
        "workers": workers,
        "blocks": n_blocks,
        "tasks": tasks,
        "seconds": best,
        "all_seconds": times,
        "ms_per_task": 1e3 * best / tasks,
        "tasks_per_s": tasks / best,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="2,16,32")
    ap.add_argument("--tasks", default="10000,100000", help="row blocks of a pass")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--memory-limit", default="512MiB", help="per worker")
    args = ap.parse_args(argv)
    rows = []
    for n_blocks in [int(t) for t in args.tasks.split(",")]:
        for workers in [int(w) for w in args.workers.split(",")]:
            row = measure(workers, n_blocks, args.repeat, args.memory_limit)
            rows.append(row)
            path = write_json(
                "scheduler", {"passes": rows}
            )  # after each: runs are long
            print(
                f"{workers} workers, {row['tasks']:,} tasks: "
                f"{row['seconds']:.1f} s a pass, {row['ms_per_task']:.2f} ms a task",
                flush=True,
            )
    print(
        table(
            rows,
            ["workers", "blocks", "tasks", "seconds", "ms_per_task", "tasks_per_s"],
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
