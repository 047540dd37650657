"""scalepca on a real batch system: a single-node SLURM on loopback (the ``slurm``
fixture, tests/support/slurm.py), with dask-jobqueue submitting the worker jobs through
``sbatch``.

* The quickstart job through a SLURM config, run by the ``scalepca`` CLI, equals the run
  on a ``LocalCluster``.
* Preemption: a worker job cancelled by the batch system (``scancel``) mid-fit; the fit
  completes with the undisturbed result, and a replacement job is submitted. All worker
  jobs of an iterative fit (PPCA EM) cancelled after its first checkpoint: it continues
  on the replacement jobs; and the whole run killed with its jobs: running the same
  command again resumes from the checkpoint and ends where an uninterrupted run ends.
* ``adaptive`` scaling submits jobs when work arrives and releases them when idle
  (squeue).
* A job that cannot be scheduled is an error naming the config keys, not a hang.

The fits read through the gates of tests/support/reliability.py, so the cancellations
land mid-fit whatever the machine's load. Skips (saying how to enable them) without
SLURM or root.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest
import yaml
import zarr

from .support.compare import assert_same_fit
from .support.reliability import (
    BY_NAME,
    REPO,
    commits,
    gated,
    new_gate,
    open_gate,
    summary,
    wait_until_busy,
)

# one loopback SLURM per session: under pytest-xdist (--dist loadgroup) every test of
# this file runs on the same worker, which starts it once
pytestmark = [pytest.mark.distributed, pytest.mark.xdist_group("slurm")]

#: a lost worker's job is dropped (and replaced) after this, instead of distributed's 15
#: s
LOST_AFTER = "1s"


def _env(slurm) -> dict:
    return {
        **os.environ,
        **slurm.env,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "DASK_DISTRIBUTED__DEPLOY__LOST_WORKER_TIMEOUT": LOST_AFTER,
    }


def _cluster_cfg(tmp_path, **over) -> dict:
    """The issue's SLURM section; the worker jobs run this venv's Python on this
    worktree."""
    logs = tmp_path / "jobs"
    logs.mkdir(exist_ok=True)
    return {
        "kind": "slurm",
        "queue": "debug",
        "cores": 1,
        "memory": "2GiB",
        "jobs": 2,
        "python": sys.executable,
        "log_directory": str(logs),
        "local_directory": str(tmp_path / "dask-worker-space"),
        "death_timeout": 30,
        "job_script_prologue": [
            f"export PYTHONPATH={REPO}",
            "export OMP_NUM_THREADS=1",
            "export OPENBLAS_NUM_THREADS=1",
        ],
        **over,
    }


def _cli(args, slurm, cwd, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scalepca.cli", *args],
        capture_output=True,
        text=True,
        env=_env(slurm),
        cwd=str(cwd),
        timeout=timeout,
    )


def _job_of(cluster, worker_name: str) -> str:
    return cluster.workers[worker_name].job_id


def _warm(client):
    def imports():
        import scalepca  # noqa: F401
        import tests.support.reliability  # noqa: F401

        return True

    client.run(imports)


def _store(tmp_path, case, rows: int) -> str:
    X = case.X()
    path = tmp_path / f"{case.name}.zarr"
    z = zarr.create_array(
        str(path), shape=X.shape, chunks=case.chunks(rows), dtype="f8"
    )
    z[...] = X
    return str(path)


def _until(pred, timeout: float, what: str, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(poll)


@pytest.fixture
def slurm_connect(slurm, tmp_path, monkeypatch):
    """``connect(cluster section)`` on the loopback SLURM; every client closed at the
    end and the queue left empty for the next test."""
    import distributed  # noqa: F401  (its config defaults, before dask.config.set below)

    from scalepca import connect

    for key, value in _env(slurm).items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)
    # workers import tests.support.reliability (gated reads): they need this worktree on
    # their path
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    clients = []

    def make(**over):
        with dask.config.set({"distributed.deploy.lost-worker-timeout": LOST_AFTER}):
            client = connect(_cluster_cfg(tmp_path, **over), quiet=True)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
    slurm.wait_no_jobs(timeout=60)


# -- a) the quickstart job through SLURM equals the LocalCluster run -------------------
def test_quickstart_through_slurm_equals_local(slurm, tmp_path):
    from scalepca import load

    base = {
        "data": {
            "path": str(tmp_path / "quickstart.zarr"),
            "generate": {
                "n_samples": 20000,
                "n_features": 32,
                "rank": 5,
                "noise": 1.0,
                "chunk_rows": 2000,
                "seed": 0,
            },
        },
        "model": {"method": "ppca", "n_components": 5},
        "output": {"model": True, "scores": True},
        "progress": False,
    }
    runs = {
        "local": {
            "kind": "local",
            "n_workers": 2,
            "threads_per_worker": 1,
            "memory_limit": "2GiB",
        },
        "slurm": _cluster_cfg(tmp_path),
    }
    fitted = {}
    for name, cluster in runs.items():
        cfg = {
            **base,
            "cluster": cluster,
            "output": {**base["output"], "store": str(tmp_path / name)},
        }
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        t0 = time.monotonic()
        res = _cli(["run", str(path)], slurm, tmp_path)
        print(f"{name}: scalepca run took {time.monotonic() - t0:.1f} s")
        assert res.returncode == 0, res.stderr[-3000:]
        fitted[name] = load(str(tmp_path / name / "model.zarr"))
    slurm.wait_no_jobs()  # the run cancelled its worker jobs on exit
    local, batch = fitted["local"], fitted["slurm"]
    signs = np.sign(np.sum(local.components_ * batch.components_, axis=1))
    np.testing.assert_allclose(
        batch.components_ * signs[:, None], local.components_, rtol=0, atol=1e-10
    )
    np.testing.assert_allclose(
        batch.explained_variance_, local.explained_variance_, rtol=1e-10
    )
    np.testing.assert_allclose(batch.noise_variance_, local.noise_variance_, rtol=1e-10)
    np.testing.assert_allclose(batch.mean_, local.mean_, rtol=0, atol=1e-12)
    scores = {
        n: da.from_zarr(str(tmp_path / n / "scores.zarr"), component="scores").compute()
        for n in runs
    }
    np.testing.assert_allclose(
        scores["slurm"] * signs, scores["local"], rtol=0, atol=1e-8
    )
    # the jobs ran this worktree's scalepca with the venv's Python, and wrote their logs
    # there
    assert list((tmp_path / "jobs").glob("*.err")), (
        "no job output in cluster.log_directory"
    )


# -- b) preemption ---------------------------------------------------------------------
def _two_workers_and(slurm_connect, tmp_path, case_name, rows):
    """A client of two warm worker jobs, the case of ``case_name`` and its data (a
    zarr store of ``rows``-row chunks): ``(client, cluster, case, X)``."""
    client = slurm_connect()
    client.wait_for_workers(2, timeout=60)
    _warm(client)
    case = BY_NAME[case_name]
    return (
        client,
        client._scalepca_cluster,
        case,
        da.from_zarr(_store(tmp_path, case, rows=rows)),
    )


def _fit_while(client, gate, preempt, fit):
    """``fit()`` while a thread runs ``preempt()`` and then opens ``gate`` (whatever
    happened): the fit's result; an error of ``preempt`` fails the test."""
    errors = []

    def run():
        try:
            preempt()
        except Exception as err:
            errors.append(err)
        finally:
            open_gate(client, gate)

    killer = threading.Thread(target=run, daemon=True)
    killer.start()
    out = fit()
    killer.join(timeout=60)
    assert errors == [], errors
    return out


def test_pca_survives_a_cancelled_worker_job(slurm, slurm_connect, tmp_path):
    client, cluster, case, X = _two_workers_and(slurm_connect, tmp_path, "PCA", rows=25)
    with dask.config.set(
        scheduler="sync"
    ):  # the same graph, undisturbed, in this process
        ref = summary(case.make().fit(X))

    # each worker reads two blocks, then the fit stalls until the job of a worker
    # executing a fit task while holding results (the first seen) is cancelled
    gate = new_gate()
    jobs = []

    def preempt():
        busy = wait_until_busy(
            client, list(cluster.workers), min_results=2, need_all=False
        )
        victim = next(iter(busy))
        jobs.append(_job_of(cluster, victim))
        slurm.cancel(jobs[0])
        _until(
            lambda: (
                victim
                not in {
                    w["name"]
                    for w in client.scheduler_info(n_workers=-1)["workers"].values()
                }
            ),
            60,
            "the cancelled worker leaving",
        )

    got = _fit_while(
        client, gate, preempt, lambda: summary(case.make().fit(gated(X, gate, free=2)))
    )
    (job,) = jobs
    assert job not in slurm.jobs(), "the cancelled job is still queued"
    assert_same_fit(ref, got, case.rtol_same, "PCA after a cancelled job")
    # the cluster submits a job for the lost one
    _until(
        lambda: len(slurm.jobs()) == 2 and job not in slurm.jobs(),
        60,
        "a replacement job in squeue",
    )
    client.wait_for_workers(2, timeout=60)


# a fixed number of steps, not convergence, is what both fits run
@pytest.mark.filterwarnings("ignore:PPCA EM did not converge")
def test_em_continues_when_all_worker_jobs_are_cancelled(
    slurm, slurm_connect, tmp_path
):
    client, cluster, case, X = _two_workers_and(
        slurm_connect, tmp_path, "PPCA-EM", rows=40
    )
    ckpt = str(tmp_path / "ckpt.zarr")
    # 6 of the case's 40 iterations: the reads stall after the first commit (the 2nd),
    # so the other 4 run on the replacement jobs
    params = {"checkpoint": ckpt, "checkpoint_every": 2, "max_iter": 6}
    with dask.config.set(
        scheduler="sync"
    ):  # the same graph, undisturbed, in this process
        ref = summary(
            case.make(**{**params, "checkpoint": str(tmp_path / "ref.zarr")}).fit(X)
        )

    # reads stall once the first commit is on disk; then every worker job is cancelled
    gate = new_gate()
    jobs = [_job_of(cluster, w) for w in cluster.workers]

    def preempt_all():
        _until(lambda: commits(ckpt), 120, "a checkpoint commit", poll=0.05)
        wait_until_busy(client, list(cluster.workers), need_all=False)
        slurm.cancel(*jobs)
        _until(
            lambda: not client.scheduler_info(n_workers=-1)["workers"],
            60,
            "all workers leaving",
        )

    est = _fit_while(
        client,
        gate,
        preempt_all,
        lambda: case.make(**params).fit(gated(X, gate, free=0, after_commit=ckpt)),
    )
    assert not set(jobs) & set(slurm.jobs()), "cancelled jobs still queued"
    assert est.n_iter_ > 2  # it went on past the commit, on the replacement jobs
    assert_same_fit(
        ref, summary(est), case.rtol_same, "PPCA EM after all jobs were cancelled"
    )


#: ``scalepca <argv>`` whose data reads stall for good once the checkpoint ``ckpt``
#: holds a commit: the run cannot end before the test kills it
_RUN_STALLED_AFTER_COMMIT = textwrap.dedent(
    """
    import sys
    import scalepca.cli as cli
    from tests.support.reliability import gated, new_gate

    ckpt, argv = sys.argv[1], sys.argv[2:]
    open_data = cli.open_data

    def stalled_after_commit(*args, **kwargs):
        return gated(open_data(*args, **kwargs), new_gate(), free=0, after_commit=ckpt)

    cli.open_data = stalled_after_commit
    sys.exit(cli.main(argv))
    """
)


@pytest.mark.slow  # three runs of the CLI, each submitting its jobs: about a minute
def test_killed_run_resumes_from_its_checkpoint(slurm, tmp_path):
    """The run itself preempted (the driver and its worker jobs): the same command again
    resumes from the checkpoint and ends where an uninterrupted run ends."""
    from scalepca import load
    from scalepca.app.config import load_config
    from scalepca.cli import open_data
    from scalepca.persistence.registry import estimator_class

    cfg = {
        "data": {
            "path": str(tmp_path / "missing.zarr"),
            "generate": {
                "kind": "missing",
                "n_samples": 10000,
                "n_features": 20,
                "rank": 4,
                "noise": 0.5,
                "missing": 0.1,
                "chunk_rows": 2000,
                "seed": 1,
            },
        },
        "model": {
            "method": "ppca",
            "n_components": 4,
            "solver": "em",
            "missing": "em",
            "max_iter": 30,
            "tol": 1e-12,
            "random_state": 0,
            "checkpoint": str(tmp_path / "run.ckpt"),
            "checkpoint_every": 2,
        },
        "cluster": _cluster_cfg(tmp_path, death_timeout=10),
        "output": {"store": str(tmp_path / "run"), "model": True, "scores": False},
        "progress": False,
    }
    run = tmp_path / "run.yaml"
    run.write_text(yaml.safe_dump(cfg))
    run, ckpt = str(run), tmp_path / "run.ckpt"
    # the run's reads stall once its first commit is on disk: it is killed there
    proc = subprocess.Popen(
        [sys.executable, "-c", _RUN_STALLED_AFTER_COMMIT, str(ckpt), "-v", "run", run],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(slurm),
        cwd=str(tmp_path),
        start_new_session=True,
    )
    try:
        _until(
            lambda: commits(ckpt) or proc.poll() is not None, 180, "a checkpoint commit"
        )
        assert proc.poll() is None, (
            "the run ended before it could be killed:\n" + proc.stdout.read()[-3000:]
        )
        os.killpg(proc.pid, signal.SIGKILL)  # the driver is gone at once ...
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
    slurm.cancel(*slurm.jobs())  # ... and its worker jobs with it
    slurm.wait_no_jobs()
    assert not (tmp_path / "run" / "model.zarr").exists()

    again = _cli(["-v", "run", run], slurm, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from" in again.stderr, again.stderr[-3000:]
    # the uninterrupted fit of the same data and parameters, here (synchronous
    # scheduler)
    checked = load_config(run)
    with dask.config.set(scheduler="sync"):
        X = open_data(checked["data"], method="ppca")
        params = {
            **checked["model"]["params"],
            "checkpoint": str(tmp_path / "fresh.ckpt"),
        }
        ref = estimator_class("ppca")(**params).fit(X)
    resumed = load(str(tmp_path / "run" / "model.zarr"))
    assert resumed.n_iter_ == ref.n_iter_
    assert_same_fit(summary(ref), summary(resumed), 1e-9, "resumed run")
    slurm.wait_no_jobs()


# -- c) adaptive scaling ---------------------------------------------------------------
def test_adaptive_submits_and_releases_jobs(slurm, slurm_connect, tmp_path):
    from scalepca import PCA

    client = slurm_connect(jobs=0, adaptive={"minimum_jobs": 0, "maximum_jobs": 2})
    time.sleep(2)
    assert slurm.jobs() == {}, "jobs submitted before any work arrived"
    case = BY_NAME["PCA"]
    X = da.from_zarr(_store(tmp_path, case, rows=25))
    gate = new_gate()
    seen = []

    def watch():
        try:
            seen.append(
                _until(
                    lambda: {j for j, st in slurm.jobs().items() if st == "RUNNING"},
                    120,
                    "a running job",
                )
            )
            client.wait_for_workers(1, timeout=120)
        finally:
            open_gate(client, gate)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    got = summary(PCA(**case.params).fit(gated(X, gate, free=0)))
    watcher.join(timeout=60)
    assert seen, "no job ran the work"
    assert_same_fit(summary(case.make().fit(case.X())), got, 1e-10, "adaptive PCA")
    # idle: adapt retires the workers and their jobs leave the queue
    _until(lambda: not slurm.jobs(), 120, "the idle jobs released", poll=0.5)


# -- d) a job that can never run -------------------------------------------------------
def test_job_larger_than_any_node_is_a_clear_error(slurm, tmp_path):
    cfg = {
        "data": {
            "path": str(tmp_path / "d.zarr"),
            "generate": {
                "n_samples": 1000,
                "n_features": 8,
                "rank": 2,
                "chunk_rows": 500,
            },
        },
        "model": {"method": "pca", "n_components": 2},
        "cluster": _cluster_cfg(
            tmp_path, memory=f"{2 * slurm.memory_mb // 1024 + 1}GiB"
        ),
        "output": {"store": None},
        "progress": False,
    }
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = _cli(["run", str(path)], slurm, tmp_path, timeout=120)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "will not run the worker jobs" in res.stderr
    assert "cluster.memory=" in res.stderr and "cluster.cores=" in res.stderr
    assert "Requested node configuration is not available" in res.stderr
    assert slurm.jobs() == {}


def test_job_pending_forever_is_a_clear_error(slurm, slurm_connect):
    from scalepca.app.config import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"pending with reason \['Partition(Config|TimeLimit)'\]"
        r".*cluster.walltime='02:00:00'.*cluster.queue='short'",
    ):
        slurm_connect(queue="short", walltime="02:00:00")
    slurm.wait_no_jobs(timeout=30)  # connect cancelled the pending jobs


def test_worker_jobs_that_die_at_start_are_a_clear_error(
    slurm, slurm_connect, tmp_path
):
    with pytest.raises(
        RuntimeError,
        match="every worker job ended before its worker "
        r"connected.*cluster.python",
    ):
        slurm_connect(python=str(tmp_path / "no-such-python"))


def test_start_timeout(slurm, slurm_connect, tmp_path):
    # held jobs (`--hold`) stay pending for an ordinary reason: only the timeout ends
    # the wait
    with pytest.raises(TimeoutError, match=r"cluster.start_timeout=2.*JobHeldUser"):
        slurm_connect(job_extra=["--hold"], start_timeout=2)
    slurm.wait_no_jobs(timeout=30)
