"""Helpers shared by the benchmark scripts: clusters, timing, peak memory, tables,
JSON."""

from __future__ import annotations

import json
import platform
import resource
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from _provenance import DEPENDS, updated

RESULTS = Path(__file__).resolve().parent / "results"


def common_args(
    ap,
    *,
    memory_limit: str | None = None,
    memory_help: str = "per worker",
    repeat: int | None = None,
    floor: bool = False,
    quick: str | None = None,
):
    """Add the options the benchmarks share to the parser ``ap``: ``--data-dir``
    (where the stores are kept) and ``--quick`` (``quick``: its help);
    ``--memory-limit`` (per worker) and ``--repeat`` when given a default; the floor
    table's ``--codecs`` and ``--floor-only`` when ``floor``."""
    ap.add_argument("--data-dir", default="/work/bench-data")
    # argparse formats help with %: a literal "5 %" in a help string broke --help
    ap.add_argument(
        "--quick",
        action="store_true",
        help=None if quick is None else quick.replace("%", "%%"),
    )
    if memory_limit is not None:
        ap.add_argument("--memory-limit", default=memory_limit, help=memory_help)
    if repeat is not None:
        ap.add_argument("--repeat", type=int, default=repeat)
    if floor:
        ap.add_argument(
            "--codecs",
            default="zstd,none",
            help="stores of the floor table, by codec (scalepca._codecs.CODECS)",
        )
        ap.add_argument(
            "--floor-only", action="store_true", help="only the floor table"
        )


def _worker_peak_rss() -> int:
    """Peak resident memory of this worker process since it started (bytes, Linux).

    ``VmHWM`` of /proc/self/status, the high-water mark of this process's own address
    space: ``getrusage``'s ``ru_maxrss`` survives fork and exec, so a worker spawned
    by a client that once held 555 MB reported 555 MB for every fit below that."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextmanager
def local_cluster(n_workers=2, threads_per_worker=1, memory_limit="4GiB", **kw):
    """A fresh LocalCluster + Client, made by ``scalepca.app.cluster.make_cluster``
    as ``scalepca.connect`` makes one; fresh processes so peak memory is per
    configuration. ``kw``: other keys of a ``local`` cluster section
    (``local_directory``, ``monitoring``)."""
    from distributed import Client

    from scalepca.app.cluster import make_cluster

    cluster = make_cluster(
        kind="local",
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        memory_limit=memory_limit,
        **kw,
    )
    with cluster, Client(cluster) as client:
        yield client


def peak_worker_memory(client) -> dict:
    """Peak RSS of every worker (bytes) and the largest of them."""
    peaks = client.run(_worker_peak_rss)
    return {"per_worker": peaks, "max": max(peaks.values())}


# -- reads counted, not assumed --------------------------------------------------------
def _log_read(x, path=None):
    with open(
        path, "a"
    ) as f:  # one short line per read: appends from processes stay whole
        f.write("r\n")
    return x


class ReadLog:
    """Counts the block reads of a dask array: ``wrap(X)`` returns ``X`` whose every
    block read (on any worker of a local cluster) appends a line to a file;
    ``passes()`` is the number of lines over the number of blocks."""

    def __init__(self, directory, name):
        self.path = Path(directory) / f"reads_{name}_{time.time_ns()}.log"
        self.path.write_text("")
        self.blocks = 1

    def wrap(self, X):
        self.blocks = X.npartitions
        return X.map_blocks(_log_read, path=str(self.path), dtype=X.dtype, meta=X._meta)

    def count(self) -> float:
        """Block reads so far over the number of blocks (the log is kept)."""
        return len(self.path.read_text().splitlines()) / self.blocks

    def passes(self) -> float:
        """Block reads over the number of blocks; the log file is removed."""
        reads = self.count()
        self.path.unlink()
        return reads


def spilled_bytes(client) -> int:
    """Bytes the workers spilled to disk so far (distributed's memory manager
    counters)."""

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
    cells = [[str(c) for c in columns]] + [
        [_fmt(r.get(c, "")) for c in columns] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(cells[0], widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += [
        "  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True))
        for row in cells[1:]
    ]
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
    payload = {
        "machine": {
            "python": platform.python_version(),
            "node": platform.node(),
            "cpus": __import__("os").cpu_count(),
        },
        **payload,
    }
    if name in DEPENDS:  # the code it measured (a quick run's file is not a result)
        # a payload that kept parts of the file it read keeps their provenance too
        payload["provenance"] = updated(name, payload.get("provenance"))
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


# -- the floor: what the hardware allows for a one-pass fit ----------------------------
def open_store(path, name=None):
    """The store as ``scalepca.open_matrix`` reads it (``open_zarr``: an uncompressed
    store's chunk files read straight into the blocks, any other store through zarr),
    one store chunk per task as ``da.from_zarr`` gives; ``name``: the array's name."""
    import zarr

    from scalepca.io._coalesce import open_zarr

    return open_zarr(zarr.open_array(path, mode="r"), task_size=None, name=name)


def read_pass(path):
    """The bare read pass over a zarr array: a sum over rows (decode + one add per
    value)."""
    return open_store(path).sum(axis=0).compute()


def warm_up(path, fits) -> None:
    """Before timing on a fresh cluster: a read pass (imports on the workers, page
    cache) and each fit on the first chunk (first-call imports)."""
    read_pass(path)
    first = open_store(path)
    for fit in fits:
        fit(first[: first.chunks[0][0]])


def fresh_array(path):
    """The store as a dask array under a new name: the same graph keys as a fit
    before could be served from results the scheduler has not yet released."""
    return open_store(path, name=f"floor-{uuid.uuid4().hex}")


def chunk_seconds(path, work=None, repeat: int = 3, share: int = 0) -> dict:
    """One core's time for ``work`` per real chunk of the store (the client process, one
    BLAS thread).

    ``best_s`` (when ``repeat`` > 0): the best of ``repeat`` timings on the first
    chunk. ``share_s`` (when ``share`` > 0): the mean time per chunk over the first
    ``share`` chunks, each timed once in turn — the work one worker does in a fit
    (its share of the chunks), on one core. The floor uses ``share_s``: a fit's time
    is a sum over many chunks, not its luckiest one. ``work`` defaults to the centred
    Gram a moments pass forms (scalepca's own kernel, in the precision the fits use:
    by default float32 products for float32 blocks; ``scalepca.gram-precision`` in
    ``dask.config`` changes both)."""
    import zarr

    z = zarr.open_array(path, mode="r")
    work = chunk_work(work)
    out = {}
    if repeat > 0:
        out["best_s"] = one_core_seconds(work, z[: z.chunks[0]], repeat)
    if share > 0:
        times = chunk_times(path, work, range(min(share, z.nchunks)))
        out.update(share_s=sum(times) / len(times), share_chunks=len(times))
    return out


def _centred_gram(x, precision):
    """The default chunk work: a block's moments as the moments pass forms them (the
    column sums and the centred Gram; of a float64 block in one pass,
    ``moments._fused_moments``)."""
    from scalepca.linalg.moments import block_moments

    return block_moments(x, precision=precision)


def chunk_work(work=None):
    """``work``, or the default: scalepca's centred Gram in the precision the fits
    use (read here from ``dask.config``, so that a process started later does the
    same)."""
    if work is not None:
        return work
    from functools import partial

    from scalepca.linalg.moments import gram_precision

    return partial(_centred_gram, precision=gram_precision())


def chunk_times(path, work, indices, barrier=None) -> list[float]:
    """Seconds of ``work`` on each chunk of ``indices``, on one BLAS thread: a
    warm-up on the first chunk, then (once ``barrier`` lets every process go, when
    given) each chunk read untimed and worked on timed."""
    import zarr
    from threadpoolctl import threadpool_limits

    z = zarr.open_array(path, mode="r")
    step = z.chunks[0]
    indices = list(indices)
    with threadpool_limits(1):
        work(z[indices[0] * step : (indices[0] + 1) * step])
        if barrier is not None:
            barrier.wait()
        times = []
        for i in indices:
            x = z[i * step : (i + 1) * step]
            t0 = time.perf_counter()
            work(x)
            times.append(time.perf_counter() - t0)
    return times


def _time_chunks(path, work, indices, barrier, results):
    """In a process of its own: :func:`chunk_times`, handed back through ``results``."""
    results.put(chunk_times(path, work, indices, barrier))


def concurrent_chunk_seconds(
    path, work=None, *, processes: int = 2, share: int = 1
) -> float:
    """Mean time per chunk of ``work`` when ``processes`` plain processes (no Dask),
    one BLAS thread each, work at once on ``share`` chunks each (each its own run of
    chunks): one core's time per chunk while the other cores are as busy as in a fit,
    which share the caches, memory bandwidth and power. ``work`` must pickle (a
    module-level function or a ``functools.partial`` of one); the processes are
    spawned, so their start-up and imports are not timed."""
    import multiprocessing
    import queue

    import zarr

    work = chunk_work(work)
    nchunks = zarr.open_array(path, mode="r").nchunks
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = []
    for p in range(processes):
        first = (p * share) % nchunks
        indices = [(first + i) % nchunks for i in range(share)]
        procs.append(
            ctx.Process(
                target=_time_chunks, args=(str(path), work, indices, barrier, results)
            )
        )
    for proc in procs:
        proc.start()
    times, got = [], 0
    while got < processes:  # a process that failed is an error here, not a wait forever
        try:
            times += results.get(timeout=5)
            got += 1
        except queue.Empty:
            failed = [proc.exitcode for proc in procs if proc.exitcode not in (None, 0)]
            if failed:
                for proc in procs:
                    proc.kill()
                raise RuntimeError(
                    f"a floor process failed (exit codes {failed})"
                ) from None
    for proc in procs:
        proc.join()
    return sum(times) / len(times)


def one_core_seconds(work, x, repeat: int = 3) -> float:
    """Best of ``repeat`` timings of ``work(x)`` on one BLAS thread, after one
    warm-up call."""
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
    return {
        "bytes": int(z.nbytes),
        "chunks": int(z.nchunks),
        "dtype": str(z.dtype),
        "codec": ",".join(type(c).__name__ for c in z.compressors) or "none",
    }


def floor_rows(
    store: str,
    path,
    t_read: float,
    fits: dict,
    *,
    threads: int,
    work=None,
    work_label: str = "Gram",
    t_chunk: float | None = None,
    t_chunk_best: float | None = None,
    paired: dict | None = None,
    t_chunk_concurrent: float | None = None,
    paired_concurrent: dict | None = None,
) -> tuple[list[dict], dict]:
    """Table rows of one store: the read pass, the floor and each fit against both.

    ``fits`` maps a label to ``(seconds, passes)``. The floor is the read pass plus
    one core's ``work`` time per chunk (:func:`chunk_seconds`) × chunks / ``threads``
    (the worker threads of the cluster): the time a fit would take if computing
    overlapped nothing with reading. GB/s per core = bytes / seconds / ``threads``.
    ``t_chunk`` is that per-chunk time when the caller measured it already (while no
    cluster runs; else the best of 3 on the first chunk is measured here);
    ``t_chunk_best`` the best single chunk's time, reported beside it with the floor
    it would give; ``paired`` maps a fit's label to its ratios to the floor of each
    round (fit and floor measured minutes apart at most), reported as their median.
    ``t_chunk_concurrent`` is the time per chunk with every worker thread's core busy
    (:func:`concurrent_chunk_seconds`): the *two-core floor* read + that × chunks /
    ``threads`` is what the hardware allows with no Dask at all, so a fit's ratio to
    it is Dask's and scalepca's own overhead; ``paired_concurrent`` the fits' ratios
    to it per round.
    """
    import statistics

    facts = store_facts(path)
    if t_chunk is None:
        t_chunk = chunk_seconds(path, work)["best_s"]
    floor = t_read + t_chunk * facts["chunks"] / threads
    gb = facts["bytes"] / 1e9
    base = {"store": store}
    rows = [
        {
            **base,
            "method": "bare read pass",
            "seconds": t_read,
            "x read pass": 1.0,
            "x floor": t_read / floor,
            "GB/s per core": gb / t_read / threads,
        },
        {
            **base,
            "method": f"floor (read + 1-core {work_label} {t_chunk:.3f} s/chunk × "
            f"{facts['chunks']} / {threads})",
            "seconds": floor,
            "x read pass": floor / t_read,
            "x floor": 1.0,
            "GB/s per core": gb / floor / threads,
        },
    ]
    best_floor = (
        None
        if t_chunk_best is None
        else (t_read + t_chunk_best * facts["chunks"] / threads)
    )
    for label, (t, passes) in fits.items():
        rows.append(
            {
                **base,
                "method": label,
                "seconds": t,
                "x read pass": t / t_read,
                "x floor": t / floor,
                "GB/s per core": gb / t / threads,
                "passes": passes,
            }
        )
        if paired and label in paired:
            rows[-1]["x floor, paired rounds"] = statistics.median(paired[label])
        if paired_concurrent and label in paired_concurrent:
            rows[-1]["x 2-core floor, paired"] = statistics.median(
                paired_concurrent[label]
            )
        if best_floor is not None:
            rows[-1]["x best-chunk floor"] = t / best_floor
    info = {
        **facts,
        "read_s": t_read,
        "chunk_work_s": t_chunk,
        "floor_s": floor,
        "threads": threads,
    }
    if paired:
        info["x_floor_paired_rounds"] = paired
    if t_chunk_concurrent is not None:
        info["chunk_work_concurrent_s"] = t_chunk_concurrent
        info["floor_two_core_s"] = (
            t_read + t_chunk_concurrent * facts["chunks"] / threads
        )
    if paired_concurrent:
        info["x_two_core_floor_paired_rounds"] = paired_concurrent
    if (
        best_floor is not None
    ):  # the floor from the best single chunk, and each fit against it
        info.update(
            chunk_work_best_s=t_chunk_best,
            floor_best_chunk_s=best_floor,
            x_floor_best_chunk={
                label: t / best_floor for label, (t, _) in fits.items()
            },
        )
    return rows, info


FLOOR_COLUMNS = [
    "store",
    "method",
    "seconds",
    "x read pass",
    "x floor",
    "x floor, paired rounds",
    "x 2-core floor, paired",
    "x best-chunk floor",
    "GB/s per core",
    "passes",
]


def one_pass_against_floor(
    stores: dict,
    fits: dict,
    *,
    repeat: int,
    memory_limit: str,
    n_workers: int = 2,
    threads_per_worker: int = 1,
    work=None,
    work_label: str = "Gram",
) -> tuple[list[dict], dict]:
    """Each fit against the floor of its store, in ``repeat`` rounds.

    For each store (label → path): the best of 5 of one core's ``work`` on the first
    chunk, then ``repeat`` rounds of (with no cluster processes alive: one core's
    ``work`` over one worker's share of the chunks, alone, then in one plain process
    per worker thread at once; a fresh cluster, a warm-up read and fit, the read
    pass, every fit). The rows of :func:`floor_rows` come from the best times, and
    each fit's ratio to its own round's floors is reported as the median over rounds:
    this machine's speed drifts by several per cent over minutes, so a floor measured
    once, minutes away from the fits, can move a ratio by ±5 %. ``fits`` maps a label
    to a function ``X → fitted estimator`` (its ``n_passes_`` is reported); ``work``
    must pickle (see :func:`concurrent_chunk_seconds`)."""
    threads = n_workers * threads_per_worker
    rows, infos = [], {}
    for store, path in stores.items():
        chunks = store_facts(path)["chunks"]
        share = -(-chunks // threads)  # one worker thread's share of the chunks
        best_chunk = chunk_seconds(path, work, repeat=5)["best_s"]
        shares, concurrent, reads, times, passes = [], [], [], {k: [] for k in fits}, {}
        for _ in range(repeat):
            # one core's work per chunk with no cluster processes alive, so that their
            # start-up or shutdown does not raise the floor
            shares.append(chunk_seconds(path, work, repeat=0, share=share)["share_s"])
            concurrent.append(
                concurrent_chunk_seconds(path, work, processes=threads, share=share)
            )
            with local_cluster(
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                memory_limit=memory_limit,
            ):
                warm_up(path, fits.values())
                reads.append(timed(lambda path=path: read_pass(path))[0])
                for label, fit in fits.items():
                    t, _, est = timed(lambda fit=fit, path=path: fit(fresh_array(path)))
                    times[label].append(t)
                    passes[label] = getattr(est, "n_passes_", None)
        round_floors = [
            r + s * chunks / threads for r, s in zip(reads, shares, strict=True)
        ]
        round_two_core = [
            r + s * chunks / threads for r, s in zip(reads, concurrent, strict=True)
        ]

        def ratios(floors, times=times):
            return {
                k: [t / f for t, f in zip(v, floors, strict=True)]
                for k, v in times.items()
            }

        r, info = floor_rows(
            store,
            path,
            min(reads),
            {k: (min(v), passes[k]) for k, v in times.items()},
            threads=threads,
            work=work,
            work_label=work_label,
            t_chunk=min(shares),
            t_chunk_best=best_chunk,
            paired=ratios(round_floors),
            t_chunk_concurrent=min(concurrent),
            paired_concurrent=ratios(round_two_core),
        )
        info.update(
            chunk_work_share_chunks=share,
            chunk_work_all_s=shares,
            chunk_work_concurrent_all_s=concurrent,
            read_all_s=reads,
            fit_all_s=times,
            floor_rounds_s=round_floors,
            two_core_floor_rounds_s=round_two_core,
        )
        rows += r
        infos[store] = info
    return rows, infos
