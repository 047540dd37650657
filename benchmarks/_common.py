"""Helpers shared by the benchmark scripts: clusters, timing, peak memory, tables, JSON."""

from __future__ import annotations

import json
import platform
import resource
import time
from contextlib import contextmanager
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _worker_peak_rss() -> int:
    """Peak resident memory of this worker process since it started (bytes, Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextmanager
def local_cluster(n_workers=2, threads_per_worker=1, memory_limit="4GiB", **kw):
    """A fresh LocalCluster + Client; fresh processes so peak memory is per configuration."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                      memory_limit=memory_limit, dashboard_address=":0", **kw) as cluster:
        with Client(cluster) as client:
            yield client


def peak_worker_memory(client) -> dict:
    """Peak RSS of every worker (bytes) and the largest of them."""
    peaks = client.run(_worker_peak_rss)
    return {"per_worker": peaks, "max": max(peaks.values())}


def spilled_bytes(client) -> int:
    """Bytes the workers spilled to disk so far (distributed's memory manager counters)."""

    def _spilled(dask_worker):
        data = getattr(dask_worker, "data", None)
        slow = getattr(data, "slow", None)
        metrics = getattr(data, "cumulative_metrics", None) or {}
        total = 0
        for key, value in metrics.items():
            if "disk-write" in str(key) and "bytes" in str(key):
                total += value
        if not total and slow is not None:
            total = getattr(slow, "total_weight", 0)
        return int(total)

    return int(sum(client.run(_spilled).values()))


def timed(fn, repeat: int = 1):
    """Run ``fn`` ``repeat`` times; return (best seconds, all seconds, last result)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), times, out


def table(rows: list[dict], columns: list[str]) -> str:
    cells = [[str(c) for c in columns]] + [[_fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(cells[0], widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells[1:]]
    return "\n".join(lines)


def _fmt(v) -> str:
    if isinstance(v, float):
        if v != v:
            return "nan"
        if abs(v) >= 100:
            return f"{v:.1f}"
        if abs(v) >= 0.01:
            return f"{v:.3f}"
        return f"{v:.2e}"
    return str(v)


def write_json(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"machine": {"python": platform.python_version(), "node": platform.node(),
                           "cpus": __import__("os").cpu_count()}, **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path
