"""Connect to a Dask cluster, and show progress bars while it works.

Estimators never create clusters; the user (or the CLI) calls :func:`connect` once, from a
``cluster`` config section or keyword arguments:

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
:func:`connect` started. Dask distributed does all scheduling; scalepca only configures it.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import shutil
import sys
import time

logger = logging.getLogger(__name__)

__all__ = ["connect", "make_cluster", "progress"]

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
#: the command each batch system submits jobs with (must be on PATH to scale)
_SUBMIT_COMMANDS = {
    "slurm": "sbatch",
    "pbs": "qsub",
    "sge": "qsub",
    "lsf": "bsub",
    "htcondor": "condor_submit",
}
_JOBQUEUE_CLASSES = {
    "slurm": "SLURMCluster",
    "pbs": "PBSCluster",
    "sge": "SGECluster",
    "lsf": "LSFCluster",
    "htcondor": "HTCondorCluster",
}


def _import_extra(kind: str):
    module, extra = _EXTRAS[kind]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"cluster kind {kind!r} needs the optional package {module.split('.')[0]!r} "
            f"({err}); install it with: pip install 'scalepca[{extra}]'"
        ) from None


def _distributed_client_class():
    from distributed import Client

    class _ClusterClient(Client):
        """A ``distributed.Client`` that also closes the cluster :func:`connect` started."""

        _scalepca_cluster = None

        def close(self, *args, **kwargs):
            try:
                return super().close(*args, **kwargs)
            finally:
                cluster, self._scalepca_cluster = self._scalepca_cluster, None
                if cluster is not None:
                    with contextlib.suppress(Exception):
                        cluster.close()

    return _ClusterClient


_CLIENT_CLASS = []  # built on first use: importing distributed is slow and not always needed


def _client_for(cluster=None, address=None, **kwargs):
    if not _CLIENT_CLASS:
        _CLIENT_CLASS.append(_distributed_client_class())
    client = _CLIENT_CLASS[0](cluster if cluster is not None else address, **kwargs)
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


def _jobqueue_kwargs(kind: str, cfg: dict) -> dict:
    """dask-jobqueue keyword arguments from a validated cluster section."""
    kw = {
        "cores": cfg["cores"],
        "memory": cfg["memory"],
        "processes": cfg.get("processes"),
        "walltime": cfg.get("walltime"),
        "queue": cfg.get("queue"),
        "job_name": cfg.get("job_name"),
        "job_extra_directives": cfg.get("job_extra"),
        "job_script_prologue": cfg.get("job_script_prologue"),
        "worker_extra_args": cfg.get("worker_extra_args"),
        "interface": cfg.get("interface"),
        "local_directory": cfg.get("local_directory"),
        "log_directory": cfg.get("log_directory"),
        "python": cfg.get("python"),
        "death_timeout": cfg.get("death_timeout"),
        "resource_spec": cfg.get("resource_spec"),
        "disk": cfg.get("disk"),
    }
    account = cfg.get("account")
    if account is not None:
        # SLURM and PBS call it account; SGE and LSF charge a project
        kw["account" if kind in ("slurm", "pbs") else "project"] = account
    if cfg.get("dashboard_address") is not None:
        kw["scheduler_options"] = {"dashboard_address": cfg["dashboard_address"]}
    return {k: v for k, v in kw.items() if v is not None}


def _settings(config, kwargs) -> dict:
    from .config import check_cluster

    merged = {**(dict(config) if config else {}), **kwargs}
    if "kind" not in merged and merged.get("address") is not None:
        merged["kind"] = "address"  # connect(address="tcp://...")
    return check_cluster(merged)


#: Dask settings of the processes scalepca starts under ``cluster.monitoring: light`` (the
#: default): Dask's periodic housekeeping on every scheduler and worker — the event-loop
#: health check, the dashboard's CPU and memory samples, the worker profiler's stack samples —
#: at intervals 20-50 times longer than Dask's. On 2 cores an idle 2-worker cluster then burns
#: 0.027 instead of 0.062 CPU-s per s, and an RFF kernel PCA fit (compute-bound, 39 s) ran
#: 1.1 s (3 %) faster on average over 10 rounds alternating with Dask's settings
#: (``benchmarks/monitoring.py``). A setting the user's own Dask config already changed is
#: left as it is (:func:`_monitoring`).
LIGHT_MONITORING = {
    "distributed.admin.tick.interval": "1s",  # event-loop health check (Dask: 20 ms)
    "distributed.admin.system-monitor.interval": "2s",  # dashboard CPU/memory samples (500 ms)
    "distributed.worker.profile.interval": "100ms",  # statistical profiler samples (10 ms)
}


def _monitoring(cfg: dict) -> dict:
    """The :data:`LIGHT_MONITORING` settings to apply for ``cfg`` (validated), without those
    whose current value differs from Dask's shipped default (the user set them)."""
    if cfg.get("monitoring", "light") != "light":
        return {}
    import dask
    import distributed  # noqa: F401 — registers distributed's defaults with dask.config

    shipped = dask.config.merge(*dask.config.defaults)
    return {key: value for key, value in LIGHT_MONITORING.items()
            if dask.config.get(key, None) == dask.config.get(key, None, config=shipped)}


def _env_exports(settings: dict) -> list[str]:
    """Shell lines exporting Dask ``settings`` as the environment variables a worker job's
    dask.config reads (``DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=1s``)."""
    import shlex

    return [f"export DASK_{key.upper().replace('.', '__').replace('-', '_')}="
            f"{shlex.quote(str(value))}" for key, value in settings.items()]


def make_cluster(config: dict | None = None, **kwargs):
    """Create (but do not scale or connect to) the cluster object a config describes.

    For the batch kinds this builds the dask-jobqueue cluster — its scheduler runs here, no
    job is submitted until it is scaled — so ``make_cluster(cfg).job_script()`` shows the
    script that would be submitted. ``local`` returns a ``LocalCluster``; ``address`` has no
    cluster object and raises ``ValueError``.
    """
    import dask

    cfg = _settings(config, kwargs)
    kind = cfg["kind"]
    if kind == "local":
        from distributed import LocalCluster

        # the scheduler and each nanny read dask.config when they are made; a nanny hands its
        # copy to the worker process it starts
        with dask.config.set(_monitoring(cfg)):
            return LocalCluster(
                n_workers=cfg["n_workers"],
                threads_per_worker=cfg["threads_per_worker"],
                memory_limit=cfg["memory_limit"],
                dashboard_address=cfg["dashboard_address"],
                processes=cfg["processes"],
                local_directory=cfg["local_directory"],
                silence_logs=logging.ERROR,
            )
    if kind == "address":
        raise ValueError("cluster kind 'address' joins an existing scheduler; it has no cluster")
    mod = _import_extra(kind)
    if kind in _JOBQUEUE_CLASSES:
        light = _monitoring(cfg)
        kw = _jobqueue_kwargs(kind, cfg)
        if light:  # the workers run in the jobs: they read it from the job's environment
            kw["job_script_prologue"] = _env_exports(light) + kw.get("job_script_prologue", [])
        with dask.config.set(light):  # the scheduler runs here
            return getattr(mod, _JOBQUEUE_CLASSES[kind])(**kw)
    if kind == "kubernetes":
        kw = {k: cfg[k] for k in ("name", "image", "namespace", "resources", "env")
              if cfg.get(k) is not None}
        return mod.KubeCluster(n_workers=0 if cfg.get("adaptive") else cfg["n_workers"], **kw)
    # gateway
    gw = mod.Gateway(address=cfg.get("address"), proxy_address=cfg.get("proxy_address"),
                     auth=cfg.get("auth"))
    options = gw.cluster_options()
    for key, value in (cfg.get("cluster_options") or {}).items():
        options[key] = value
    return gw.new_cluster(options)


def _scale(cluster, cfg: dict) -> None:
    kind, adaptive = cfg["kind"], cfg.get("adaptive")
    if kind in _JOBQUEUE_CLASSES:
        if kind == "slurm":
            _slurm_test_only(cluster, cfg)
        if adaptive:
            cluster.adapt(minimum_jobs=adaptive["minimum_jobs"],
                          maximum_jobs=adaptive["maximum_jobs"])
        else:
            cluster.scale(jobs=cfg["jobs"])
        _replace_lost_jobs(cluster)
    elif kind in ("kubernetes", "gateway"):
        if adaptive:
            cluster.adapt(minimum=adaptive["minimum"], maximum=adaptive["maximum"])
        elif kind == "gateway":
            cluster.scale(cfg["n_workers"])


# -- batch jobs: requests the batch system refuses, jobs it ends -----------------------------------
#: SLURM pending reasons no amount of waiting resolves: the request itself exceeds a limit
_SLURM_NEVER = ("PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
                "InvalidAccount", "InvalidQOS", "QOSMaxMemoryPerJob", "QOSMaxCpuPerJobLimit",
                "QOSMaxWallDurationPerJobLimit", "AssocMaxWallDurationPerJobLimit",
                "MaxMemPerLimit")
#: SLURM job states after which the job's worker will never connect
_SLURM_ENDED = ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT")


def _request(cfg: dict) -> str:
    """What a worker job asks for, as the config keys that set it."""
    keys = ("cores", "memory", "processes", "walltime", "queue", "account", "job_extra")
    return ", ".join(f"cluster.{k}={cfg[k]!r}" for k in keys if cfg.get(k) is not None)


def _refused(cfg: dict, why: str):
    from .config import ConfigError

    return ConfigError(
        f"the batch system will not run the worker jobs: {why}. The job asks for "
        f"{_request(cfg)}; change these keys to what a node of the queue offers (on SLURM, "
        "`sinfo -o '%P %c %m %l'` lists each partition's CPUs, memory in MB and time limit)")


def _slurm_test_only(cluster, cfg: dict) -> None:
    """Ask ``sbatch --test-only`` whether the worker job script could ever run (no job is
    submitted); a refusal — more memory or cores than any node has, an unknown partition or
    account — is a :class:`~scalepca.config.ConfigError` naming the keys, before any job."""
    import os
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write(cluster.job_script())
    try:
        res = subprocess.run(["sbatch", "--test-only", f.name], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        logger.warning("sbatch --test-only could not check the worker job: %s", err)
        return
    finally:
        os.unlink(f.name)
    if res.returncode != 0:
        said = [ln.removeprefix("sbatch: error: ").strip()
                for ln in res.stderr.splitlines() if ln.strip()]
        raise _refused(cfg, "; ".join(said) or f"sbatch --test-only exit {res.returncode}")


def _replace_lost_jobs(cluster, interval: float = 1.0) -> None:
    """Keep the number of worker jobs the cluster was scaled to (or adapt chose).

    A job the batch system ends — preempted, cancelled, out of wall time — loses its workers;
    distributed drops it from ``cluster.workers`` (after ``distributed.deploy.lost-worker-
    timeout``) but not from the cluster's plan, and submits no replacement by itself: with all
    jobs gone a computation would wait forever. This periodic check re-applies the plan, which
    submits a new job for each lost one; Dask then recomputes what the lost workers held.
    """
    from distributed.core import Status
    from tornado.ioloop import PeriodicCallback

    def check():
        if cluster.status == Status.running and len(cluster.workers) < len(cluster.worker_spec):
            logger.warning("%d worker job(s) ended; submitting replacements",
                           len(cluster.worker_spec) - len(cluster.workers))
            cluster.scale(jobs=len(cluster.worker_spec))

    pc = PeriodicCallback(check, interval * 1000)
    cluster.periodic_callbacks["scalepca-replace-lost-jobs"] = pc  # stopped when it closes
    cluster.loop.add_callback(pc.start)


def _slurm_states(job_ids) -> dict[str, tuple[str, str]]:
    """Job id → (state, reason) from ``squeue`` (jobs it no longer knows are absent)."""
    import subprocess

    res = subprocess.run(["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o",
                          "%i|%T|%r"], capture_output=True, text=True, timeout=60)
    out = {}
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            out[parts[0]] = (parts[1], parts[2])
    return out


def _wait_for_first_worker(cluster, client, cfg: dict, poll: float = 1.0) -> None:
    """Block until a worker of the submitted jobs has connected.

    Raises at once when the submit command failed, or (SLURM) when every job is pending for a
    reason that never clears (``PartitionConfig``, ...) or ended before its worker connected;
    otherwise after ``cluster.start_timeout`` (no limit by default: a busy queue may take
    hours), with the jobs' states.
    """
    from dask.utils import parse_timedelta
    from distributed.core import Status

    timeout = cfg.get("start_timeout")
    limit = None if timeout is None else parse_timedelta(timeout, default="s")
    t0 = time.monotonic()
    submit = _SUBMIT_COMMANDS[cfg["kind"]]
    states: dict = {}
    while True:
        if client.scheduler_info(n_workers=1)["workers"]:
            return
        jobs = list(cluster.workers.values())
        # a job object the cluster holds without a job id: its submit command failed
        failed = [j for j in jobs if getattr(j, "job_id", None) is None
                  and getattr(j, "status", None) == Status.created]
        if failed:
            _mark_failed(failed)
            raise _refused(cfg, f"{submit!r} failed to submit {len(failed)} of the "
                           f"{len(cluster.worker_spec)} worker jobs (its error is logged above)")
        ids = [j.job_id for j in jobs if getattr(j, "job_id", None)]
        if cfg["kind"] == "slurm" and ids and len(ids) == len(cluster.worker_spec):
            states = _slurm_states(ids)
            never = {i: r for i, (st, r) in states.items()
                     if st == "PENDING" and r.split(",")[0] in _SLURM_NEVER}
            ended = {i: st for i, (st, _) in states.items() if st in _SLURM_ENDED}
            gone = [i for i in ids if i not in states]
            if len(never) == len(ids):
                raise _refused(cfg, "SLURM keeps the jobs pending with reason "
                               f"{sorted(set(never.values()))} (`squeue -j {','.join(ids)}`)")
            if len(ended) + len(gone) == len(ids):
                where = cfg.get("log_directory") or "the folder scalepca was started in"
                raise RuntimeError(
                    f"every worker job ended before its worker connected (states "
                    f"{sorted(set(ended.values())) or 'purged'}): the jobs' output files in "
                    f"{where} say why (often cluster.python or cluster.job_script_prologue: "
                    "the nodes need the same Python environment with scalepca installed)")
        if limit is not None and time.monotonic() - t0 > limit:
            shown = {i: f"{st} ({r})" for i, (st, r) in states.items()} or "unknown"
            raise TimeoutError(
                f"no worker job started within cluster.start_timeout={timeout!r}; job states: "
                f"{shown}. The queue may be busy (raise cluster.start_timeout), or the request "
                f"({_request(cfg)}) too large for the nodes that are free")
        time.sleep(poll)


def _mark_failed(jobs) -> None:
    """Jobs whose submission failed never started; closing the cluster expects them to say so."""
    from distributed.core import Status

    for job in jobs:
        job.status = Status.failed


def connect(config: dict | None = None, *, quiet: bool = False, **kwargs):
    """Return a ``distributed.Client`` for the cluster described by ``config`` / ``kwargs``.

    Parameters
    ----------
    config : dict, optional
        A ``cluster`` config section, e.g. ``{"kind": "slurm", "cores": 8, "memory": "32GB",
        "walltime": "02:00:00", "queue": "normal", "jobs": 4}``. Keys are validated (unknown
        keys and wrong types raise :class:`scalepca.config.ConfigError`).
    quiet : bool, default=False
        Do not print the dashboard link.
    **kwargs
        The same keys as ``config`` (they override it), e.g. ``connect(n_workers=2)`` or
        ``connect(kind="address", address="tcp://10.0.0.5:8786")``.

    Returns
    -------
    distributed.Client
        Registered as the default client. A context manager: ``with connect(...) as client:``
        closes the client — and the cluster if ``connect`` started one — on exit.

    Raises
    ------
    scalepca.config.ConfigError
        A bad setting (the message names the key and the allowed values); for the batch
        kinds also a worker job the batch system refuses or can never run (more memory or
        cores than any node has, an unknown queue): the message names the keys to change.
    TimeoutError
        Batch kinds with a fixed number of ``jobs``: no job started within
        ``start_timeout``. ``connect`` waits for the first worker of those jobs; jobs the
        batch system ends later (preemption, wall time) are replaced by new ones.
    ImportError
        The kind needs an optional package; the message names the extra to install.
    OSError
        The scheduler at ``address`` cannot be reached within ``timeout``.
    """
    cfg = _settings(config, kwargs)
    kind = cfg["kind"]
    if kind == "address":
        client = _client_for(address=cfg["address"], security=_security(cfg["security"]),
                             timeout=cfg["timeout"])
    else:
        submit = _SUBMIT_COMMANDS.get(kind)
        if submit is not None:
            _import_extra(kind)  # a missing package is reported before a missing command
        if submit is not None and shutil.which(submit) is None:
            from .config import ConfigError

            raise ConfigError(
                f"cluster kind {kind!r} submits worker jobs with {submit!r}, which is not on "
                "this machine's PATH; run scalepca on a login node of the cluster "
                "(`scalepca validate CONFIG --job-script` shows the job script)"
            )
        cluster = make_cluster(cfg)
        client = None
        try:
            _scale(cluster, cfg)
            client = _client_for(cluster)
            if kind in _JOBQUEUE_CLASSES and not cfg.get("adaptive") and cfg["jobs"] > 0:
                _wait_for_first_worker(cluster, client, cfg)
        except BaseException:
            if client is not None:
                client.close()  # closes the cluster too
            else:
                cluster.close()
            raise
    if not quiet:
        print(f"scalepca: dask dashboard at {client.dashboard_link}", flush=True)
    logger.info("connected to %s (%s); dashboard %s", client.scheduler.address, kind,
                client.dashboard_link)
    return client


# -- progress -------------------------------------------------------------------------------------
def not_done(futures, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``futures``; True if some are still running."""
    from distributed import wait

    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        return True
    return False


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def _n_tasks(dsk) -> int:
    """Tasks in a graph handed to a scheduler: a mapping, or a dask expression of one."""
    graph = dsk.__dask_graph__() if hasattr(dsk, "__dask_graph__") else dsk
    return len(graph)


def _progress_line(n_tasks: int, seconds: float) -> str:
    """The line written for one finished compute when the output is not a terminal."""
    rate = n_tasks / seconds if seconds > 0 else float("inf")
    return (f"  [{time.strftime('%H:%M:%S')}] {n_tasks} tasks in {seconds:.2f} s "
            f"({rate:,.1f} tasks/s)")


class _ProgressScheduler:
    """A dask scheduler callable that runs graphs on ``client`` and reports their progress.

    Every ``compute`` (one pass over the data, one EM iteration, one write) is submitted to
    the client. On a terminal (or in a notebook) a progress bar follows its tasks until they
    finish; anywhere else (a log file, a batch job's output, a pipe) one line is written when
    it finishes, with its time and rate — never a stream of redrawn ``\r`` frames. The
    results are then gathered. ``persist`` is handed to the client unchanged (data stay on
    the workers).
    """

    def __init__(self, client, *, stream=None, grace: float = 0.5):
        self.client = client
        self.stream = stream
        self.grace = grace
        self.count = 0
        self.quiet_after = 0.0

    def settle(self) -> None:
        """Wait until the scheduler has dropped the feeds of finished bars.

        Closing the cluster while a feed sleeps makes the scheduler log a cancelled task.
        """
        delay = self.quiet_after - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def __call__(self, dsk, keys, **kwargs):
        from dask.core import flatten
        from dask.utils import parse_timedelta
        from distributed import progress as dist_progress
        from distributed import wait
        from distributed.utils import is_kernel

        t0 = time.perf_counter()
        packed = self.client.get(dsk, keys, sync=False, **kwargs)
        futures = [f for f in flatten([packed]) if hasattr(f, "key")]
        self.count += 1
        stream = self.stream or sys.stdout
        try:
            # computes that finish within the grace period get no bar (and no overhead)
            if futures and not_done(futures, self.grace):
                if is_kernel() or _is_terminal(stream):
                    interval = "100ms"
                    with contextlib.redirect_stdout(stream):
                        dist_progress(futures, notebook=is_kernel(), complete=True,
                                      interval=interval)
                    # the scheduler's feed of this bar notices the closed comm at its next tick
                    self.quiet_after = time.monotonic() + 2 * parse_timedelta(interval)
                else:
                    wait(futures)
                    if all(f.status == "finished" for f in futures):
                        print(_progress_line(_n_tasks(dsk), time.perf_counter() - t0),
                              file=stream, flush=True)
            return self.client.gather(packed)
        finally:
            for f in futures:
                f.release()

    def persist(self, *args, **kwargs):
        # dask >= 2026.1 hands ``persist`` to a scheduler that has this method; older dask ran
        # it through ``__call__``, gathering every block into the client (hence the lower
        # bound in pyproject.toml, tested by tests/test_min_versions.py in .ci/run)
        return self.client.persist(*args, **kwargs)


def _pass_filter(stream, hide_below: int):
    """A filter for the estimators' pass log (``PCA: pass 1 (moments) took 0.41s``).

    It echoes pass lines under the progress bars and drops records the user's logging
    configuration would not have shown (so lowering the logger's level changes nothing else).
    """

    def filt(record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if ": pass " in msg:
            print(f"  {msg}", file=stream or sys.stdout, flush=True)
        return record.levelno >= hide_below

    return filt


def _line_callback(stream, grace: float):
    """A dask local-scheduler callback writing one line per compute slower than ``grace``."""
    from dask.callbacks import Callback

    class _Lines(Callback):
        def _start(self, dsk):
            self._t0, self._n = time.perf_counter(), _n_tasks(dsk)

        def _finish(self, dsk, state, errored):
            seconds = time.perf_counter() - self._t0
            if not errored and seconds >= grace:
                print(_progress_line(self._n, seconds), file=stream, flush=True)

    return _Lines()


@contextlib.contextmanager
def progress(enabled: bool = True, *, client=None, stream=None, grace: float | None = None):
    """Show a progress bar for every dask computation inside the block.

    With a ``distributed`` client (the default client, or ``client``) each ``compute`` —
    one pass over the data, one iteration, one write — gets distributed's text progress bar,
    followed by the estimator's timing line for that pass; without a client, dask's local
    ``ProgressBar`` callback is used. Bars are drawn only when ``stream`` (default: standard
    output) is a terminal, or in a notebook; otherwise — batch jobs, CI logs, pipes — each
    compute writes one line when it ends, with its number of tasks, time and rate.
    ``enabled=False`` makes this a no-op, so callers can switch progress off with a flag
    (``--quiet`` on the command line). Computations that finish within ``grace`` seconds get no
    bar (so many short iterations are not slowed by drawing); the default is the dask config
    value ``scalepca.progress.grace`` (0.5 s; environment variable
    ``DASK_SCALEPCA__PROGRESS__GRACE``). Library code never shows bars by itself.
    """
    if not enabled:
        yield None
        return
    import dask

    if grace is None:
        grace = float(dask.config.get("scalepca.progress.grace", 0.5))

    if client is None:
        try:
            from distributed import get_client

            client = get_client()
        except (ImportError, ValueError):
            client = None
    # linalg.passes logs every counted pass on this logger
    pass_logger = logging.getLogger("scalepca.linalg.passes")
    old_level = pass_logger.level
    effective = pass_logger.getEffectiveLevel()
    filt = _pass_filter(stream, effective)
    pass_logger.addFilter(filt)
    pass_logger.setLevel(min(effective, logging.INFO))
    try:
        if client is None:
            from dask.diagnostics import ProgressBar

            out = stream or sys.stdout
            bar = (ProgressBar(out=out, minimum=grace) if _is_terminal(out)
                   else _line_callback(out, grace))
            with bar:
                yield None
        else:
            sched = _ProgressScheduler(client, stream=stream, grace=grace)
            try:
                with dask.config.set(scheduler=sched):
                    yield sched
            finally:
                sched.settle()
    finally:
        pass_logger.removeFilter(filt)
        pass_logger.setLevel(old_level)
