"""The scheduler's time per task and per pass as workers and tasks grow.

A pass here is scalepca's moments pass (:func:`scalepca.linalg.moments.moments_graph`:
one task per row block, partials merged in a tree of fan-in 8) over blocks so small (4 ×
4 float64 zeros, made on the worker) that reading and arithmetic cost nothing: what
remains is the scheduler's and the workers' bookkeeping and the tree's transfers. Each
configuration runs on a fresh local cluster of 1-thread worker processes; one warm-up
pass, then the best of ``--repeat`` passes.

    python benchmarks/scheduler.py                 # 2, 16, 32 workers × 10⁴, 10⁵ blocks
    python benchmarks/scheduler.py --workers 2,16 --tasks 10000
    python benchmarks/scheduler.py --project-only  # the 100 TB lines, from the JSON

The largest pass of a big job: a ``--project-bytes`` (10¹⁴, 100 TB) float32 matrix of
``--project-features`` columns read at scalepca's default ``task_size``
(:data:`scalepca.io._coalesce.TASK_SIZE`) makes the row blocks
:func:`~scalepca.io._coalesce.coalesced_rows` gives (a store of one-row chunks: the
finest coalescing, so the most blocks), and the pass the tasks of
:func:`~scalepca.solvers.choice.tree_edges` (a task per block, a merge per node of
the tree; checked against the graphs measured here); at each worker count's measured
milliseconds a task (of the largest pass measured) that is the scheduler's time for it;
the same for the larger task sizes of ``--project-task-sizes`` (what to set on many
nodes).

Writes ``benchmarks/results/scheduler.json`` (``--out PATH``: elsewhere, e.g. for a
check) and prints a table: tasks of the pass (map + merges), seconds per pass,
milliseconds per task, tasks per second; then the 100 TB projection.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

import dask.array as da

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, local_cluster, table, timed, write_json  # noqa: E402

from scalepca.io._coalesce import TASK_SIZE, _task_bytes, coalesced_rows  # noqa: E402
from scalepca.linalg.moments import moments_graph  # noqa: E402
from scalepca.solvers.choice import tree_edges  # noqa: E402

#: the moments pass's fan-in, as the code builds it
SPLIT_EVERY = inspect.signature(moments_graph).parameters["split_every"].default


def tiny_pass(n_blocks: int):
    """The moments pass of ``n_blocks`` row blocks of 4 × 4 zeros."""
    X = da.zeros((4 * n_blocks, 4), chunks=(4, 4))
    return moments_graph(X)


def pass_tasks(n_blocks: int) -> int:
    """Tasks of a moments pass over ``n_blocks`` row blocks as ``scalepca plan`` counts
    them: the blocks and a merge per node of the tree. The graph dask builds may have
    fewer, by at most one a level of the tree (where a level leaves a group of one
    partial); :func:`measure` checks that bound."""
    return tree_edges(n_blocks, SPLIT_EVERY)


def tree_levels(n_blocks: int) -> int:
    levels, n = 0, n_blocks
    while n > 1:
        n, levels = -(-n // SPLIT_EVERY), levels + 1
    return levels


def measure(workers: int, n_blocks: int, repeat: int, memory_limit: str) -> dict:
    graph = tiny_pass(n_blocks)
    tasks = len(graph.__dask_graph__())
    # the count the projection uses is plan's: within a task a level of the graph's
    over = pass_tasks(n_blocks) - tasks
    assert 0 <= over <= tree_levels(n_blocks), (tasks, pass_tasks(n_blocks))
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


def largest_pass(
    nbytes: float, features: int, itemsize: int = 4, task_size=TASK_SIZE
) -> dict:
    """The blocks and tasks of one pass over an ``nbytes`` matrix of ``features``
    columns at ``task_size`` (default: scalepca's), as scalepca cuts it."""
    row_bytes = features * itemsize
    n_rows = int(nbytes) // row_bytes
    rows = coalesced_rows(1, n_rows, row_bytes, task_size)
    blocks = -(-n_rows // rows)
    return {
        "bytes": int(nbytes),
        "features": features,
        "itemsize": itemsize,
        "rows": n_rows,
        "task_size": task_size,
        "task_bytes": _task_bytes(task_size),
        "rows_per_task": rows,
        "blocks": blocks,
        "tasks_per_pass": pass_tasks(blocks),
    }


def project(rows: list[dict], job: dict) -> dict:
    """``job`` with the scheduler's seconds for its pass at each worker count's
    measured rate (that of its largest pass measured)."""
    rate = {}
    for r in sorted(rows, key=lambda r: r["tasks"]):
        rate[r["workers"]] = (r["ms_per_task"], r["tasks"])
    job = dict(job)
    job["scheduler_seconds"] = [
        {
            "workers": w,
            "ms_per_task": ms,
            "measured_on_tasks": n,
            "seconds": job["tasks_per_pass"] * ms / 1e3,
        }
        for w, (ms, n) in sorted(rate.items())
    ]
    return job


def _print_projection(job: dict) -> None:
    print(
        f"{job['bytes'] / 1e12:g} TB float{8 * job['itemsize']}, "
        f"{job['features']} features, task_size {job['task_size']}: "
        f"{job['rows_per_task']:,} rows a task, {job['blocks']:,} blocks, "
        f"{job['tasks_per_pass']:,} tasks per pass"
    )
    for s in job.get("scheduler_seconds", []):
        print(
            f"  at {s['ms_per_task']:.2f} ms a task ({s['workers']} workers, measured "
            f"on {s['measured_on_tasks']:,} tasks): {s['seconds']:,.0f} s "
            f"({s['seconds'] / 3600:.2f} h) of scheduling per pass"
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="2,16,32")
    ap.add_argument("--tasks", default="10000,100000", help="row blocks of a pass")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--memory-limit", default="512MiB", help="per worker")
    ap.add_argument("--project-bytes", type=float, default=1e14)
    ap.add_argument("--project-features", type=int, default=256)
    ap.add_argument(
        "--project-only",
        action="store_true",
        help="time nothing: the projection from the passes of the results file",
    )
    ap.add_argument(
        "--project-task-sizes",
        default="1GiB,3GiB,4GiB",
        help="larger task sizes to project as well (what to set on many nodes)",
    )
    ap.add_argument("--out", help="write the JSON here, not to benchmarks/results/")
    args = ap.parse_args(argv)
    job = largest_pass(args.project_bytes, args.project_features)
    larger = [
        largest_pass(args.project_bytes, args.project_features, task_size=t)
        for t in args.project_task_sizes.split(",")
        if t
    ]

    def projections(rows):
        return [project(rows, j) for j in (job, *larger)]

    def write(payload):
        if args.out:
            Path(args.out).write_text(json.dumps(payload, indent=2, default=str))
            return Path(args.out)
        return write_json("scheduler", payload)

    if args.project_only:
        rows = json.loads((RESULTS / "scheduler.json").read_text())["passes"]
        for p in projections(rows):
            _print_projection(p)
        return
    rows = []
    for n_blocks in [int(t) for t in args.tasks.split(",")]:
        for workers in [int(w) for w in args.workers.split(",")]:
            row = measure(workers, n_blocks, args.repeat, args.memory_limit)
            rows.append(row)
            # after each: runs are long
            path = write(
                {
                    "passes": rows,
                    "largest_pass": project(rows, job),
                    "larger_task_sizes": projections(rows)[1:],
                }
            )
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
    for p in projections(rows):
        _print_projection(p)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
