"""Helpers shared by the benchmark scripts: clusters, timing, peak memory, tables, JSON."""

from __future__ import annotations

import json
import platform
import resource
import time
import uuid
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


# -- the floor: what the hardware allows for a one-pass fit ------------------------------------
def read_pass(path):
    """The bare read pass over a zarr array: a sum over rows (decode + one add per value)."""
    import dask.array as da

    return da.from_zarr(path).sum(axis=0).compute()


def chunk_seconds(path, work=None, repeat: int = 3) -> float:
    """One core's time for ``work`` on one real chunk of the store (the client process, one
    BLAS thread, best of ``repeat``). ``work`` defaults to the centred Gram a moments pass
    forms (scalepca's own kernel, in the precision the fits use: by default float32 products
    for float32 blocks; ``scalepca.gram-precision`` in ``dask.config`` changes both)."""
    import numpy as np
    import zarr

    from scalepca.linalg.moments import _gram, gram_precision

    z = zarr.open_array(path, mode="r")
    x = z[: z.chunks[0]]  # one stored chunk, the size a task works on
    if work is None:
        precision = gram_precision()  # the fits' own setting (dask.config), read here

        def work(x):
            return _gram(x, x.sum(axis=0, dtype=np.float64) / x.shape[0], precision=precision)
    return one_core_seconds(work, x, repeat)


def one_core_seconds(work, x, repeat: int = 3) -> float:
    """Best of ``repeat`` timings of ``work(x)`` on one BLAS thread, after one warm-up call."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        work(x)  # warm-up
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            work(x)
            best = min(best, time.perf_counter() - t0)
    return best


def store_facts(path) -> dict:
    """Bytes, chunks and codec of a zarr array (from metadata)."""
    import zarr

    z = zarr.open_array(path, mode="r")
    return {"bytes": int(z.nbytes), "chunks": int(z.nchunks), "dtype": str(z.dtype),
            "codec": ",".join(type(c).__name__ for c in z.compressors) or "none"}


def floor_rows(store: str, path, t_read: float, fits: dict, *, threads: int, work=None,
               work_label: str = "Gram", t_chunk: float | None = None
               ) -> tuple[list[dict], dict]:
    """Table rows of one store: the read pass, the floor and each fit against both.

    ``fits`` maps a label to ``(seconds, passes)``. The floor is the read pass plus one core's
    ``work`` time per chunk (:func:`chunk_seconds`) × chunks / ``threads`` (the worker threads
    of the cluster): the time a fit would take if computing overlapped nothing with reading.
    GB/s per core = bytes / seconds / ``threads``. ``t_chunk`` is that per-chunk time when
    the caller measured it already (best measured while no cluster runs).
    """
    facts = store_facts(path)
    if t_chunk is None:
        t_chunk = chunk_seconds(path, work)
    floor = t_read + t_chunk * facts["chunks"] / threads
    gb = facts["bytes"] / 1e9
    base = {"store": store}
    rows = [{**base, "method": "bare read pass", "seconds": t_read, "x read pass": 1.0,
             "x floor": t_read / floor, "GB/s per core": gb / t_read / threads},
            {**base, "method": f"floor (read + 1-core {work_label} {t_chunk:.3f} s/chunk × "
                               f"{facts['chunks']} / {threads})",
             "seconds": floor, "x read pass": floor / t_read, "x floor": 1.0,
             "GB/s per core": gb / floor / threads}]
    for label, (t, passes) in fits.items():
        rows.append({**base, "method": label, "seconds": t, "x read pass": t / t_read,
                     "x floor": t / floor, "GB/s per core": gb / t / threads,
                     "passes": passes})
    info = {**facts, "read_s": t_read, "chunk_work_s": t_chunk, "floor_s": floor,
            "threads": threads}
    return rows, info


FLOOR_COLUMNS = ["store", "method", "seconds", "x read pass", "x floor", "GB/s per core",
                 "passes"]


def one_pass_against_floor(stores: dict, fits: dict, *, repeat: int, memory_limit: str,
                           n_workers: int = 2, threads_per_worker: int = 1, work=None,
                           work_label: str = "Gram") -> tuple[list[dict], dict]:
    """For each store (label → path): a fresh cluster, a warm-up read, then ``repeat`` rounds
    of (read pass, every fit) — so load from elsewhere hits reads and fits alike — and the
    rows of :func:`floor_rows` from the best times. ``fits`` maps a label to a function
    ``X → fitted estimator`` (its ``n_passes_`` is reported)."""
    import dask.array as da

    rows, infos = [], {}
    for store, path in stores.items():
        # one core's Gram per chunk, measured first: with no cluster processes alive, so that
        # the floor is not raised by their start-up or shutdown (best of 5)
        t_chunk = chunk_seconds(path, work, repeat=5)
        with local_cluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                           memory_limit=memory_limit):
            read_pass(path)  # warm-up: imports on the workers, page cache
            first = da.from_zarr(path)
            for fit in fits.values():  # warm-up on one chunk: first-call imports, not timed
                fit(first[: first.chunks[0][0]])
            reads, times, passes = [], {k: [] for k in fits}, {}
            for _ in range(repeat):
                reads.append(timed(lambda path=path: read_pass(path))[0])
                for label, fit in fits.items():
                    # a fresh array name per fit: the same graph keys as the fit before
                    # could be served from results the scheduler has not yet released
                    t, _, est = timed(lambda fit=fit, path=path: fit(
                        da.from_zarr(path, name=f"floor-{uuid.uuid4().hex}")))
                    times[label].append(t)
                    passes[label] = getattr(est, "n_passes_", None)
        r, info = floor_rows(store, path, min(reads),
                             {k: (min(v), passes[k]) for k, v in times.items()},
                             threads=n_workers * threads_per_worker, work=work,
                             work_label=work_label, t_chunk=t_chunk)
        info["read_all_s"] = reads
        info["fit_all_s"] = times
        rows += r
        infos[store] = info
    return rows, infos
