"""Batch jobs (SLURM, PBS, SGE, LSF, HTCondor through dask-jobqueue): the job
request, the refusals the batch system gives before any job runs, jobs it ends, and
the wait for the first worker. :func:`~scalepca.app.cluster.connect` drives them."""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)


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


def _env_exports(settings: dict) -> list[str]:
    """Shell lines exporting Dask ``settings`` as the environment variables a worker
    job's dask.config reads (``DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=1s``)."""
    import shlex

    return [
        f"export DASK_{key.upper().replace('.', '__').replace('-', '_')}="
        f"{shlex.quote(str(value))}"
        for key, value in settings.items()
    ]


def _scale(cluster, cfg: dict) -> None:
    kind, adaptive = cfg["kind"], cfg.get("adaptive")
    if kind in _JOBQUEUE_CLASSES:
        if kind == "slurm":
            _slurm_test_only(cluster, cfg)
        if adaptive:
            cluster.adapt(
                minimum_jobs=adaptive["minimum_jobs"],
                maximum_jobs=adaptive["maximum_jobs"],
            )
        else:
            cluster.scale(jobs=cfg["jobs"])
        _replace_lost_jobs(cluster)
    elif kind in ("kubernetes", "gateway"):
        if adaptive:
            cluster.adapt(minimum=adaptive["minimum"], maximum=adaptive["maximum"])
        elif kind == "gateway":
            cluster.scale(cfg["n_workers"])


# -- batch jobs: requests the batch system refuses, jobs it ends -----------------------
#: SLURM pending reasons no amount of waiting resolves: the request itself exceeds a
#: limit
_SLURM_NEVER = (
    "PartitionConfig",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "BadConstraints",
    "InvalidAccount",
    "InvalidQOS",
    "QOSMaxMemoryPerJob",
    "QOSMaxCpuPerJobLimit",
    "QOSMaxWallDurationPerJobLimit",
    "AssocMaxWallDurationPerJobLimit",
    "MaxMemPerLimit",
)
#: SLURM job states after which the job's worker will never connect
_SLURM_ENDED = (
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
)


def _request(cfg: dict) -> str:
    """What a worker job asks for, as the config keys that set it."""
    keys = ("cores", "memory", "processes", "walltime", "queue", "account", "job_extra")
    return ", ".join(f"cluster.{k}={cfg[k]!r}" for k in keys if cfg.get(k) is not None)


def _refused(cfg: dict, why: str):
    from ..config import ConfigError

    return ConfigError(
        f"the batch system will not run the worker jobs: {why}. The "
        f"job asks for {_request(cfg)}; change these keys to what a "
        "node of the queue offers (on SLURM, `sinfo -o '%P %c %m %l'` "
        "lists each partition's CPUs, memory in MB and time limit)"
    )


def _slurm_test_only(cluster, cfg: dict) -> None:
    """Ask ``sbatch --test-only`` whether the worker job script could ever run (no
    job is submitted); a refusal — more memory or cores than any node has, an unknown
    partition or account — is a :class:`~scalepca.app.config.ConfigError` naming the
    keys, before any job."""
    import os
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write(cluster.job_script())
    try:
        res = subprocess.run(
            ["sbatch", "--test-only", f.name],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        logger.warning("sbatch --test-only could not check the worker job: %s", err)
        return
    finally:
        os.unlink(f.name)
    if res.returncode != 0:
        said = [
            ln.removeprefix("sbatch: error: ").strip()
            for ln in res.stderr.splitlines()
            if ln.strip()
        ]
        raise _refused(
            cfg, "; ".join(said) or f"sbatch --test-only exit {res.returncode}"
        )


def _replace_lost_jobs(cluster, interval: float = 1.0) -> None:
    """Keep the number of worker jobs the cluster was scaled to (or adapt chose).

    A job the batch system ends — preempted, cancelled, out of wall time — loses its
    workers; distributed drops it from ``cluster.workers`` (after
    ``distributed.deploy.lost-worker- timeout``) but not from the cluster's plan, and
    submits no replacement by itself: with all jobs gone a computation would wait
    forever. This periodic check re-applies the plan, which submits a new job for
    each lost one; Dask then recomputes what the lost workers held.
    """
    from distributed.core import Status
    from tornado.ioloop import PeriodicCallback

    def check():
        if cluster.status == Status.running and len(cluster.workers) < len(
            cluster.worker_spec
        ):
            logger.warning(
                "%d worker job(s) ended; submitting replacements",
                len(cluster.worker_spec) - len(cluster.workers),
            )
            cluster.scale(jobs=len(cluster.worker_spec))

    pc = PeriodicCallback(check, interval * 1000)
    cluster.periodic_callbacks["scalepca-replace-lost-jobs"] = (
        pc  # stopped when it closes
    )
    cluster.loop.add_callback(pc.start)


def _slurm_states(job_ids) -> dict[str, tuple[str, str]]:
    """Job id → (state, reason) from ``squeue`` (jobs it no longer knows are absent)."""
    import subprocess

    res = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i|%T|%r"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = {}
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            out[parts[0]] = (parts[1], parts[2])
    return out


def _wait_for_first_worker(cluster, client, cfg: dict, poll: float = 1.0) -> None:
    """Block until a worker of the submitted jobs has connected.

    Raises at once when the submit command failed, or (SLURM) when every job is
    pending for a reason that never clears (``PartitionConfig``, ...) or ended before
    its worker connected; otherwise after ``cluster.start_timeout`` (no limit by
    default: a busy queue may take hours), with the jobs' states.
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
        failed = [
            j
            for j in jobs
            if getattr(j, "job_id", None) is None
            and getattr(j, "status", None) == Status.created
        ]
        if failed:
            _mark_failed(failed)
            raise _refused(
                cfg,
                f"{submit!r} failed to submit {len(failed)} of the "
                f"{len(cluster.worker_spec)} worker jobs (its error is logged above)",
            )
        ids = [j.job_id for j in jobs if getattr(j, "job_id", None)]
        if cfg["kind"] == "slurm" and ids and len(ids) == len(cluster.worker_spec):
            states = _slurm_states(ids)
            never = {
                i: r
                for i, (st, r) in states.items()
                if st == "PENDING" and r.split(",")[0] in _SLURM_NEVER
            }
            ended = {i: st for i, (st, _) in states.items() if st in _SLURM_ENDED}
            gone = [i for i in ids if i not in states]
            if len(never) == len(ids):
                raise _refused(
                    cfg,
                    "SLURM keeps the jobs pending with reason "
                    f"{sorted(set(never.values()))} (`squeue -j {','.join(ids)}`)",
                )
            if len(ended) + len(gone) == len(ids):
                where = cfg.get("log_directory") or "the folder scalepca was started in"
                raise RuntimeError(
                    "every worker job ended before its worker connected "
                    f"(states {sorted(set(ended.values())) or 'purged'}): the "
                    f"jobs' output files in {where} say why (often "
                    "cluster.python or cluster.job_script_prologue: the nodes "
                    "need the same Python environment with scalepca installed)"
                )
        if limit is not None and time.monotonic() - t0 > limit:
            shown = {i: f"{st} ({r})" for i, (st, r) in states.items()} or "unknown"
            raise TimeoutError(
                f"no worker job started within cluster.start_timeout={timeout!r}; job "
                f"states: {shown}. The queue may be busy (raise "
                f"cluster.start_timeout), or the request ({_request(cfg)}) too large "
                f"for the nodes that are free"
            )
        time.sleep(poll)


def _mark_failed(jobs) -> None:
    """Jobs whose submission failed never started; closing the cluster expects them
    to say so."""
    from distributed.core import Status

    for job in jobs:
        job.status = Status.failed
