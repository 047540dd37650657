"""Connect to a Dask cluster: a local one, a scheduler at an address, batch jobs,
Kubernetes or a

Estimators never create clusters; the user (or the CLI) calls :func:`connect` once, from
a ``cluster`` config section or keyword arguments:

=============================  =================================================================
``kind``                       what it starts or joins
=============================  =================================================================
``local`` (default)            an embedded ``distributed.LocalCluster``
``address``                    an existing scheduler, ``tcp://`` or ``tls://`` (with
                               ``security``: CA file, client certificate and key)
``slurm`` ``pbs`` ``sge``      batch jobs through dask-jobqueue (extra ``scalepca[hpc]``):
``lsf`` ``htcondor``           ``cores``, ``memory``, ``walltime``, ``queue``, ``account``,
                               ``job_extra``, fixed ``jobs`` or ``adaptive`` min/max jobs;
                               ended jobs are replaced, refused ones are an error
``kubernetes``                 dask-kubernetes' operator ``KubeCluster`` (extra
                               ``scalepca[kubernetes]``)
``gateway``                    a cluster from a Dask Gateway server (extra ``scalepca[gateway]``)
=============================  =================================================================

The returned client is a context manager; leaving the block closes it and any cluster
:func:`connect` started. Dask distributed does all scheduling; scalepca only
configures it.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil

from ._jobs import (
    _JOBQUEUE_CLASSES,
    _SUBMIT_COMMANDS,
    _env_exports,
    _jobqueue_kwargs,
    _scale,
    _wait_for_first_worker,
)

logger = logging.getLogger(__name__)

#: optional package per cluster kind → the extra that installs it
_EXTRAS = {
    "slurm": ("dask_jobqueue", "hpc"),
    "pbs": ("dask_jobqueue", "hpc"),
    "sge": ("dask_jobqueue", "hpc"),
    "lsf": ("dask_jobqueue", "hpc"),
    "htcondor": ("dask_jobqueue", "hpc"),
    "kubernetes": ("dask_kubernetes.operator", "kubernetes"),
    "gateway": ("dask_gateway", "gateway"),
}


def _import_extra(kind: str):
    module, extra = _EXTRAS[kind]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"cluster kind {kind!r} needs the optional package "
            f"{module.split('.')[0]!r} ({err}); install it with: pip install "
            f"'scalepca[{extra}]'"
        ) from None


def _prepare_to_close(dask_worker):
    """Run on each worker before a cluster scalepca started is closed: stop its
    heartbeat, and keep what the closing itself makes it log off the user's screen (a
    transfer from a worker already gone logs "failed during get data" with a traceback
    when Ctrl+C stops a pass mid-way; nothing is left to fix or retry by then)."""
    import logging

    dask_worker.periodic_callbacks["heartbeat"].stop()
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


class _Cancelled(logging.Filter):
    """Drops the records of handlers a closing scheduler cancels."""

    def filter(self, record) -> bool:
        import asyncio

        err = record.exc_info[1] if record.exc_info else None
        return not isinstance(err, asyncio.CancelledError)


@contextlib.contextmanager
def _cancellations_quiet():
    """Inside the block, the scheduler of a local cluster logs no handler it cancels as
    it closes: a progress feed still waits for its tasks when Ctrl+C lands as a pass
    starts (the client released them before the scheduler had them), and the closing
    scheduler logs its ``CancelledError`` with a traceback."""
    logger, cancelled = logging.getLogger("distributed.scheduler"), _Cancelled()
    logger.addFilter(cancelled)
    try:
        yield
    finally:
        logger.removeFilter(cancelled)


def _distributed_client_class():
    from distributed import Client

    class _ClusterClient(Client):
        """A ``distributed.Client`` that also closes the cluster :func:`connect`
        started."""

        _scalepca_cluster = None

        def close(self, *args, **kwargs):
            if self._scalepca_cluster is not None and self.status == "running":
                # a worker's heartbeat still in flight when its nanny closes it logs a
                # "Stream is closed" traceback (distributed's shutdown race): stop the
                # heartbeats while the scheduler still answers, then close the cluster
                # (a worker busy in a task is not waited for beyond a few seconds)
                with contextlib.suppress(Exception):
                    self.sync(self._run, _prepare_to_close, callback_timeout=5)
            try:
                return super().close(*args, **kwargs)
            finally:
                cluster, self._scalepca_cluster = self._scalepca_cluster, None
                if cluster is not None:
                    with contextlib.suppress(Exception), _cancellations_quiet():
                        cluster.close()
                    if type(cluster).__module__.startswith("dask_gateway"):
                        gateway_closed(cluster.gateway)  # closed by cluster.close()
                    _environ_restore(getattr(cluster, "_scalepca_environ", {}))

    return _ClusterClient


# built on first use: importing distributed is slow and not always needed
_CLIENT_CLASS = []


def _client_for(cluster=None, address=None, **kwargs):
    if not _CLIENT_CLASS:
        _CLIENT_CLASS.append(_distributed_client_class())
    if cluster is None:  # a running scheduler's address
        client = _CLIENT_CLASS[0](address, **kwargs)
    else:
        client = _CLIENT_CLASS[0](cluster, **kwargs)
    client._scalepca_cluster = cluster
    return client


def _security(sec: dict | None):
    if not sec:
        return None
    from distributed.security import Security

    return Security(
        tls_ca_file=sec["tls_ca_file"],
        tls_client_cert=sec["tls_client_cert"],
        tls_client_key=sec.get("tls_client_key"),
        require_encryption=sec.get("require_encryption", True),
    )


def _settings(config, kwargs) -> dict:
    from ..config import check_cluster

    merged = {**(dict(config) if config else {}), **kwargs}
    if "kind" not in merged and merged.get("address") is not None:
        merged["kind"] = "address"  # connect(address="tcp://...")
    return check_cluster(merged)


#: Dask settings of the processes scalepca starts under ``cluster.monitoring: light``
#: (the default): Dask's periodic housekeeping on every scheduler and worker — the
#: event-loop health check, the dashboard's CPU and memory samples, the worker
#: profiler's stack samples — at intervals 20-50 times longer than Dask's. On 2 cores an
#: idle 2-worker cluster then burns 0.027 instead of 0.062 CPU-s per s, and an RFF
#: kernel PCA fit (compute-bound, 39 s) ran 1.1 s (3 %) faster on average over 10 rounds
#: alternating with Dask's settings (``benchmarks/monitoring.py``). A setting the user's
#: own Dask config already changed is left as it is (:func:`_monitoring`).
LIGHT_MONITORING = {
    "distributed.admin.tick.interval": "1s",  # event-loop health check (Dask: 20 ms)
    # dashboard CPU/memory samples (500 ms)
    "distributed.admin.system-monitor.interval": "2s",
    # statistical profiler samples (10 ms)
    "distributed.worker.profile.interval": "100ms",
}


def _monitoring(cfg: dict) -> dict:
    """The :data:`LIGHT_MONITORING` settings to apply for ``cfg`` (validated),
    without those whose current value differs from Dask's shipped default (the user
    set them)."""
    if cfg.get("monitoring", "light") != "light":
        return {}
    return _unchanged(LIGHT_MONITORING)


#: glibc's allocator in the worker processes of the local clusters scalepca starts.
#: Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_=65536`` so that freed memory goes back to
#: the system; setting it also fixes glibc's mmap threshold at 128 KiB, so every array
#: above that — a decompressed store chunk, a CSR row block, a d × d partial — is new
#: pages the kernel maps and faults in one by one, every time. scalepca's workers
#: instead take arrays up to ``memory_limit / 64`` (at most 32 MiB, at least 128 KiB)
#: from the heap, reused, and keep up to twice that of free heap: on 2 × 2 GiB workers
#: (2 cores, a VM) the read pass of 1,000,000 × 2,000 CSR counts took 2.7–3.2 s instead
#: of 5.1–5.8 s and its covariance fit 13.3–14.3 s instead of 16.8–17.7 s
#: (``benchmarks/sparse_counts.py``). The thresholds follow the memory limit because
#: glibc keeps that much free heap per arena (per thread that allocates): with the 2 GiB
#: settings, 600 MiB workers that Dask's default carries through a PPCA fit of a 96 MB
#: store were killed for memory (``test_ppca``'s small-memory fit). A value the user's
#: own Dask config sets is left as it is (as :data:`LIGHT_MONITORING`). Batch and cloud
#: workers keep Dask's: their nannies read their own Dask config, where the same two
#: keys can be set.
ALLOCATOR_KEYS = (
    "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_",
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_",
)
#: the largest heap-served array (glibc's own ceiling of the mmap threshold on 64-bit)
ALLOCATOR_MMAP_MAX = 32 * 2**20


def _worker_allocator(cfg: dict) -> dict:
    """The glibc settings (:data:`ALLOCATOR_KEYS`) for the workers of a local cluster
    ``cfg``: the mmap threshold ``memory_limit / 64`` within [128 KiB, 32 MiB], the
    trim threshold twice that; without those the user's Dask config already sets."""
    from distributed.worker_memory import parse_memory_limit

    threads = cfg.get("threads_per_worker") or 1
    cores = max(1, (cfg.get("n_workers") or 1) * threads)
    limit = parse_memory_limit(cfg.get("memory_limit"), threads, cores, logger=logger)
    mmap = ALLOCATOR_MMAP_MAX
    if limit is not None:
        mmap = min(ALLOCATOR_MMAP_MAX, max(128 * 2**10, limit // 64))
    return _unchanged(dict(zip(ALLOCATOR_KEYS, (mmap, 2 * mmap), strict=True)))


_ALLOCATOR_VARIABLES = tuple(key.rsplit(".", 1)[1] for key in ALLOCATOR_KEYS)


@contextlib.contextmanager
def _environ_kept(names):
    """Keep these environment variables of this process as they were: a nanny writes
    its workers' environment into ``os.environ`` before it starts them (and the next
    nanny of any cluster would take those values over its Dask config), so scalepca's
    worker settings would otherwise stay behind in the user's process. Yields what
    they were, which :func:`_environ_restore` puts back again when the cluster
    closes: a nanny that replaces a lost worker writes them once more."""
    before = {name: os.environ.get(name) for name in names}
    try:
        yield before
    finally:
        _environ_restore(before)


def _environ_restore(before: dict) -> None:
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextlib.contextmanager
def _interrupts_ignored():
    """Start the block's processes ignoring SIGINT, and keep a Ctrl+C pressed meanwhile
    for the program.

    Ctrl+C on a terminal signals the whole foreground process group, the worker
    processes of a local cluster too: each printed its KeyboardInterrupt traceback,
    however the program that started them handled it. An ignored SIGINT stays ignored
    through ``exec`` (and Python keeps it so), so the workers the nannies start here
    never see it: the program alone answers Ctrl+C, and closing its client stops them.
    (A worker a nanny starts later, to replace one that died, sets it itself:
    :data:`WORKER_SETUP`.)
    Neither a handler nor a blocked mask passes through ``exec`` that way, and an
    ignored signal is gone (a blocked one is taken by a thread that does not block it:
    BLAS's own threads). So a witness learns of a press: a ``sleep`` started before
    SIGINT is ignored, in the same process group, which the press ends. As the block
    ends, a witness ended by SIGINT raises it in the program, whose own handler answers
    (a KeyboardInterrupt by default).
    """
    import signal
    import subprocess
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler (it is the one SIGINT reaches)
        return
    sleep = shutil.which("sleep")
    witness = None
    if sleep is not None:
        witness = subprocess.Popen(
            [sleep, "86400"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    pressed = False
    try:
        yield
    finally:
        try:
            signal.signal(signal.SIGINT, before)
        finally:
            if witness is not None:
                # a press ended it with SIGINT already (the exit status of a process
                # is set as a fatal signal is sent), whatever this kill does after
                witness.kill()
                pressed = witness.wait() == -signal.SIGINT
        if pressed:
            signal.raise_signal(signal.SIGINT)


#: The preload that makes every worker process of a local cluster ignore SIGINT, the
#: replacements a nanny starts for workers that died too
WORKER_SETUP = "scalepca.app.cluster._worker_setup"


def _worker_preloads(cfg: dict) -> dict:
    """The nannies' ``preload`` and ``preload_argv`` for local cluster ``cfg``: those of
    the user's Dask config, and :data:`WORKER_SETUP` for worker processes."""
    import dask

    if not cfg["processes"]:
        return {}
    preload = dask.config.get("distributed.worker.preload")
    argv = dask.config.get("distributed.worker.preload-argv")
    preload = [preload] if isinstance(preload, str) else list(preload)
    if argv and not isinstance(argv[0], str):  # one list of arguments per preload
        argv = [*argv, []]
    return {"preload": [*preload, WORKER_SETUP], "preload_argv": argv}


def _unchanged(settings: dict) -> dict:
    """``settings`` without those whose current Dask value differs from Dask's
    shipped default (the user set them)."""
    import dask
    import distributed  # noqa: F401 — registers distributed's defaults with dask.config

    shipped = dask.config.merge(*dask.config.defaults)
    return {
        key: value
        for key, value in settings.items()
        if dask.config.get(key, None) == dask.config.get(key, None, config=shipped)
    }


#: How long the schedulers scalepca starts keep ready tasks while no worker is left
#: (Dask's ``distributed.scheduler.no-workers-timeout``; Dask's default waits forever).
#: A local nanny replaces a lost worker within seconds, so a minute without any means
#: none is coming; batch kinds wait ``start_timeout`` (a replacement job queues like the
#: first), without one as long as it takes. A value the user's own Dask config sets is
#: kept.
NO_WORKERS_KEY = "distributed.scheduler.no-workers-timeout"
LOCAL_NO_WORKERS_TIMEOUT = "60s"


def _no_workers(cfg: dict) -> dict:
    """The :data:`NO_WORKERS_KEY` setting for the scheduler of cluster ``cfg``."""
    timeout = cfg.get("start_timeout")
    if cfg["kind"] == "local":
        timeout = LOCAL_NO_WORKERS_TIMEOUT
    if timeout is None:
        return {}
    return _unchanged({NO_WORKERS_KEY: timeout})


def lost_workers(client, *, retired: bool = True) -> list[str]:
    """What the scheduler of ``client`` recorded of the workers it lost, one line each:
    the address, the tasks it was running, and why it went when Dask says (a nanny's
    restart for memory, a missed heartbeat, a closed connection). ``retired=False``
    leaves out the workers the scheduler expected to go (retired, scaled down)."""
    events = client.get_events()
    memory = {
        e.get("worker"): e
        for _, e in events.get("worker-restart-memory", [])
        if isinstance(e, dict)
    }
    why = {
        "handle-worker-cleanup": "its connection closed (the process exited or was "
        "killed)",
        "check-worker-ttl": "it missed its heartbeats",
        "retire-workers": "it was retired",
        "worker-close": "it closed itself",
    }
    out = []
    for _, e in events.get("all", []):
        if not isinstance(e, dict) or e.get("action") != "remove-worker":
            continue
        if e.get("expected") and not retired:
            continue
        addr = e.get("worker")
        stim = str(e.get("stimulus_id", ""))
        reason = next(
            (text for key, text in why.items() if stim.startswith(key)),
            stim.rsplit("-", 1)[0] or "no reason recorded",
        )
        if addr in memory:
            rss = memory[addr].get("rss")
            used = f" ({rss / 2**30:.2f} GiB)" if isinstance(rss, (int, float)) else ""
            reason = f"its nanny ended it over the memory limit{used}"
        running = len(e.get("processing-tasks") or ())
        out.append(f"{addr}: {reason}; {running} running task(s)")
    return out


class WorkersLost(RuntimeError):
    """The cluster lost the workers a computation needed and none came back in time."""


@contextlib.contextmanager
def reporting_lost_workers(client):
    """Inside the block, Dask's errors for tasks that lost their workers for good (no
    worker left for ``distributed.scheduler.no-workers-timeout``; a task that ended
    ``distributed.scheduler.allowed-failures`` workers) are :class:`WorkersLost`, naming
    the workers the scheduler lost and why (:func:`lost_workers`). Workers lost while
    the block ran are named in a warning at its end: Dask redid their work, so the
    answer is the same, but a worker that keeps running out of memory costs time."""
    import warnings

    from distributed import KilledWorker
    from distributed.scheduler import NoWorkerError

    try:
        yield
        # a scheduler gone by now has nothing to add
        with contextlib.suppress(Exception):
            lost = lost_workers(client, retired=False)
            if lost:
                warnings.warn(
                    f"{len(lost)} worker(s) lost and replaced during the run "
                    f"(their work was redone): {'; '.join(lost)}",
                    RuntimeWarning,
                    stacklevel=2,
                )
    except (NoWorkerError, KilledWorker) as err:
        try:
            lost = lost_workers(client)
        except Exception:  # the scheduler itself is gone: Dask's error says enough
            raise err from None
        what = "a task ended every worker that ran it"
        if isinstance(err, NoWorkerError):
            what = "no worker was left to run the work"
        lines = "; ".join(lost) if lost else "none recorded by the scheduler"
        raise WorkersLost(f"{what} ({err}); workers lost: {lines}") from err


def make_cluster(config: dict | None = None, **kwargs):
    """Create (but do not scale or connect to) the cluster object a config describes.

    For the batch kinds this builds the dask-jobqueue cluster — its scheduler runs
    here, no job is submitted until it is scaled — so
    ``make_cluster(cfg).job_script()`` shows the script that would be submitted.
    ``local`` returns a ``LocalCluster``; ``address`` has no cluster object and
    raises ``ValueError``.
    """
    import dask

    cfg = _settings(config, kwargs)
    kind = cfg["kind"]
    if kind == "local":
        from distributed import LocalCluster

        # the scheduler and each nanny read dask.config when they are made; a nanny
        # hands its copy (and its pre-spawn environment) to the worker process it starts
        cluster = None
        try:
            with (
                dask.config.set(
                    {**_monitoring(cfg), **_worker_allocator(cfg), **_no_workers(cfg)}
                ),
                _environ_kept(_ALLOCATOR_VARIABLES) as before,
                _interrupts_ignored(),
            ):
                cluster = LocalCluster(
                    n_workers=cfg["n_workers"],
                    threads_per_worker=cfg["threads_per_worker"],
                    memory_limit=cfg["memory_limit"],
                    dashboard_address=cfg["dashboard_address"],
                    processes=cfg["processes"],
                    local_directory=cfg["local_directory"],
                    silence_logs=logging.ERROR,
                    **_worker_preloads(cfg),
                )
        except BaseException:
            # Ctrl+C pressed while the cluster started arrives as the start ends: the
            # cluster is up, and no one else holds it to close
            if cluster is not None:
                cluster.close()
            raise
        cluster._scalepca_environ = before
        return cluster
    if kind == "address":
        raise ValueError(
            "cluster kind 'address' joins an existing scheduler; it has no cluster"
        )
    mod = _import_extra(kind)
    if kind in _JOBQUEUE_CLASSES:
        light = _monitoring(cfg)
        kw = _jobqueue_kwargs(kind, cfg)
        # the workers run in the jobs: they read it from the job's environment
        if light:
            kw["job_script_prologue"] = _env_exports(light) + kw.get(
                "job_script_prologue", []
            )
        with dask.config.set({**light, **_no_workers(cfg)}):  # the scheduler runs here
            return getattr(mod, _JOBQUEUE_CLASSES[kind])(**kw)
    if kind == "kubernetes":
        kw = {
            k: cfg[k]
            for k in ("name", "image", "namespace", "resources", "env")
            if cfg.get(k) is not None
        }
        return mod.KubeCluster(
            n_workers=0 if cfg.get("adaptive") else cfg["n_workers"], **kw
        )
    # gateway
    # address, proxy address, auth type and credentials left out of the config come from
    # Dask's config (``gateway.*``, also its environment variables), never from
    # scalepca's config or outputs. The new cluster keeps a gateway client of its own.
    gw = mod.Gateway(
        address=cfg.get("address"),
        proxy_address=cfg.get("proxy_address"),
        auth=cfg.get("auth"),
    )
    try:
        options = gw.cluster_options()
        for key, value in (cfg.get("cluster_options") or {}).items():
            options[key] = value
        return gw.new_cluster(options)
    finally:
        gw.close()
        gateway_closed(gw)


def gateway_closed(gateway) -> None:
    """Mark a closed ``dask_gateway.Gateway`` client as closed for its finaliser too.

    dask-gateway's ``Gateway.__del__`` closes the client again; on distributed >= 2026
    a second close raises from the stopped event loop, and Python prints that error
    wherever the garbage collector happens to run (mid-way through a later step of the
    program). Without its loop runner the finaliser has nothing to close.
    """
    gateway.__dict__.pop("_loop_runner", None)


def _local_shape(cfg: dict) -> str:
    """A local cluster's workers, threads and memory as :func:`starting_line` says
    them; what the config leaves to Dask, said so."""
    n, threads = cfg["n_workers"], cfg["threads_per_worker"]
    if cfg["processes"]:
        worker = ("worker process", "worker processes")
    else:
        worker = ("worker thread", "worker threads")
    shape = "Dask chooses the workers" if n is None else _counted(n, *worker)
    if threads is None:
        shape += ", Dask chooses the threads"
    else:
        shape += f", {_counted(threads, 'thread', 'threads')} each"
    if cfg["memory_limit"] not in (None, "auto"):
        shape += f", {cfg['memory_limit']} of memory each"
    return shape


def _counted(n: int, one: str, many: str) -> str:
    """``n`` things in words: ``1 thread``, ``4 threads``."""
    return f"{n} {one if n == 1 else many}"


def starting_line(config: dict | None = None, **kwargs) -> str:
    """What :func:`connect` is about to start or join, in one line (a cluster can take
    seconds to minutes to start; the command line says what it waits for)."""
    cfg = _settings(config, kwargs)
    kind = cfg["kind"]
    adaptive = cfg.get("adaptive")
    if kind == "local":
        return f"starting a local Dask cluster ({_local_shape(cfg)})"
    if kind == "address":
        return f"connecting to the Dask scheduler at {cfg['address']}"
    if adaptive:
        lo, hi = list(adaptive.values())
        size = f"adaptive, {lo} to {hi}"
    else:
        size = cfg.get("jobs", cfg.get("n_workers"))
    if kind in _JOBQUEUE_CLASSES:
        return (
            f"submitting {kind.upper()} worker jobs ({size} job(s) of "
            f"{cfg.get('cores')} cores and {cfg.get('memory')} each)"
        )
    if kind == "kubernetes":
        return f"starting a Dask cluster on Kubernetes ({size} workers)"
    return f"asking the Dask Gateway at {cfg.get('address')} for a cluster ({size} workers)"


def _say(line: str) -> None:
    """Print ``line`` in one write: unbuffered, ``print`` writes the text and its
    newline apart, and a Ctrl+C between them left the line open for the next."""
    print(line + "\n", end="", flush=True)


def connect(config: dict | None = None, *, quiet: bool = False, **kwargs):
    """Return a ``distributed.Client`` for the cluster described by ``config`` /
    ``kwargs``.

    Parameters
    ----------
    config : dict, optional
        A ``cluster`` config section, e.g.
        ``{"kind": "slurm", "cores": 8, "memory": "32GB", "walltime": "02:00:00",
        "queue": "normal", "jobs": 4}``.
        Keys are validated (unknown keys and wrong types raise
        :class:`scalepca.app.config.ConfigError`).
    quiet : bool, default=False
        Do not print what starts (or is joined) and the dashboard link.
    **kwargs
        The same keys as ``config`` (they override it), e.g. ``connect(n_workers=2)`` or
        ``connect(kind="address", address="tcp://10.0.0.5:8786")``.

    Returns
    -------
    distributed.Client
        Registered as the default client. A context manager:
        ``with connect(...) as client:`` closes the client — and the cluster if
        ``connect`` started one — on exit.

    Raises
    ------
    scalepca.app.config.ConfigError
        A bad setting (the message names the key and the allowed values); for the batch
        kinds also a worker job the batch system refuses or can never run (more memory
        or cores than any node has, an unknown queue): the message names the keys to
        change.
    TimeoutError
        Batch kinds with a fixed number of ``jobs``: no job started within
        ``start_timeout``. ``connect`` waits for the first worker of those jobs; jobs
        the batch system ends later (preemption, wall time) are replaced by new ones.
    ImportError
        The kind needs an optional package; the message names the extra to install.
    OSError
        The scheduler at ``address`` cannot be reached within ``timeout``.
    """
    cfg = _settings(config, kwargs)
    kind = cfg["kind"]
    if not quiet:
        _say(f"scalepca: {starting_line(cfg)}")
    if kind == "address":
        client = _client_for(
            address=cfg["address"],
            security=_security(cfg["security"]),
            timeout=cfg["timeout"],
        )
    else:
        submit = _SUBMIT_COMMANDS.get(kind)
        if submit is not None:
            _import_extra(
                kind
            )  # a missing package is reported before a missing command
        if submit is not None and shutil.which(submit) is None:
            from ..config import ConfigError

            raise ConfigError(
                f"cluster kind {kind!r} submits worker jobs with {submit!r}, which is "
                f"not on "
                "this machine's PATH; run scalepca on a login node of the cluster "
                "(`scalepca validate CONFIG --job-script` shows the job script)"
            )
        cluster = make_cluster(cfg)
        client = None
        try:
            _scale(cluster, cfg)
            client = _client_for(cluster)
            if (
                kind in _JOBQUEUE_CLASSES
                and not cfg.get("adaptive")
                and cfg["jobs"] > 0
            ):
                _wait_for_first_worker(cluster, client, cfg)
        except BaseException:
            if client is not None:
                client.close()  # closes the cluster too
            else:
                cluster.close()
            raise
    if not quiet:
        _say(f"scalepca: dask dashboard at {client.dashboard_link}")
    logger.info(
        "connected to %s (%s); dashboard %s",
        client.scheduler.address,
        kind,
        client.dashboard_link,
    )
    return client
