"""Worker faults on a real cluster: ``dask scheduler`` + ``dask worker`` processes on
loopback.

* A worker SIGKILLed in the middle of ``fit`` (while it holds results of the fit and
  runs one of its tasks): the fit completes on the other workers — Dask recomputes the
  lost pieces — and equals the undisturbed fit on the same cluster to ``Case.rtol_same``
  (the graphs are the same, so only the order in which partial sums merge can differ; in
  practice the results are bit-identical).
* The whole cluster (scheduler and workers) SIGKILLed mid-fit: the fit raises at once
  with an error saying the scheduler connection was lost, not a hang.
* Iterative estimators with a ``checkpoint`` resume from it on a new cluster and end
  where an uninterrupted fit ends.

The data are zarr stores. The kills do not race the fit: in the default-suite tests
the fit reads through a gate (``support.reliability.gated``) that stalls it once
every worker is executing a fit task and holds results, the killer acts when the
scheduler reports that state, and only then is the gate opened — so the fault always
lands mid-fit, whatever the machine's load. The resume tests stall the reads once the
first checkpoint commit is on disk and kill the cluster then. Workers run without a
nanny (a killed worker stays dead, like a preempted node), one thread each,
``--memory-limit 1GiB``.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr

from scalepca.app.messages import scheduler_lost

from .support.compare import assert_same_fit
from .support.reliability import (
    BY_NAME,
    ESTIMATORS,
    ClusterKiller,
    ProcessCluster,
    WorkerKiller,
    gated,
    new_gate,
    summary,
)

pytestmark = pytest.mark.distributed

#: the default suite kills a worker under these; the rest run with -m slow
FAST = {"PCA"}


def _warm(client):
    """Import the libraries on every worker before timing anything."""

    def imports():
        import scalepca  # noqa: F401
        import tests.support.reliability  # noqa: F401

        return True

    client.run(imports)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("cluster")
    with ProcessCluster(3, memory_limit="1GiB", workdir=workdir) as c:
        client = c.client(3)
        _warm(client)
        c.client_ = client
        yield c
        client.close()


def _store(tmp_path_factory, case, rows):
    """The case's training matrix in a zarr store (shared file system: the workers
    read it)."""
    X = case.X()
    path = tmp_path_factory.mktemp("data") / f"{case.name}.zarr"
    z = zarr.create_array(
        str(path), shape=X.shape, chunks=case.chunks(rows), dtype="f8"
    )
    z[...] = X
    return str(path)


def _fault_params():
    out = []
    for case in ESTIMATORS:
        marks = [] if case.name in FAST else [pytest.mark.slow]
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


@pytest.mark.parametrize("case", _fault_params())
def test_worker_sigkill_mid_fit(cluster, tmp_path_factory, case):
    client = cluster.client_
    cluster.full_strength(client, 3)
    path = _store(tmp_path_factory, case, rows=40 if case.two_d_blocks else 25)
    X = da.from_zarr(path)
    ref = summary(case.make().fit(X))  # undisturbed, same cluster, same graph

    # every worker reads `free` blocks, then the fit stalls until the victim is killed:
    # one-pass fits lose the victim in their only pass, iterative ones about three
    # passes in
    gate = new_gate()
    free = int(np.prod(X.numblocks)) if case.iterative else 2
    Xs = gated(X, gate, free)
    # the victim: the first worker seen stalled in a fit task while holding >= 2 results
    with WorkerKiller(cluster, client, min_results=2, gate=gate) as killer:
        got = summary(case.make().fit(Xs))
    assert killer.error is None, killer.error
    assert killer.killed_at is not None, (
        f"{case.name}: the fit ended before a worker was killed"
    )
    assert killer.returncode == -9 and killer.victim not in cluster.alive_workers()
    assert killer.lost_keys >= 2  # results held by the dead worker had to be recomputed
    assert_same_fit(ref, got, case.rtol_same, case.name)


def test_whole_cluster_gone_is_a_clear_error(tmp_path_factory):
    from distributed.client import FutureCancelledError

    case = BY_NAME["PCA"]
    path = _store(tmp_path_factory, case, rows=25)
    with ProcessCluster(2, workdir=tmp_path_factory.mktemp("gone")) as c:
        client = c.client(2)
        _warm(client)
        # each worker reads one block, then the fit stalls (the gate never opens): the
        # cluster goes away while the scheduler reports both workers executing fit tasks
        Xs = gated(da.from_zarr(path), new_gate(), free=1)
        with ClusterKiller(c, client, min_results=1) as killer:
            with pytest.raises(
                FutureCancelledError, match="lost the connection to the scheduler"
            ) as lost:
                case.make().fit(Xs)
        # `scalepca run` says it in words, not as the key of a cancelled task
        said = scheduler_lost(lost.value)
        assert said and said.startswith("lost the connection to the dask scheduler"), (
            said
        )
        # the fit raised, where its reads stall forever: it noticed the kill
        assert killer.killed_at is not None
        assert killer.error is None, killer.error
        client.close(timeout=5)


ITERATIVE = [c for c in ESTIMATORS if c.iterative]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c.name,
            marks=[pytest.mark.slow]
            if c.checkpoint
            else [
                pytest.mark.xfail(
                    strict=True,
                    reason=f"{c.cls} has no checkpoint: a fit whose "
                    "cluster goes away restarts from the beginning",
                )
            ],
        )
        for c in ITERATIVE
    ],
)
def test_iterative_resumes_on_a_new_cluster(tmp_path_factory, case):
    from distributed.client import FutureCancelledError

    est = case.make()
    assert "checkpoint" in est.get_params(), f"{case.cls} has no checkpoint parameter"
    tmp = tmp_path_factory.mktemp(f"resume-{case.name}")
    path = _store(tmp_path_factory, case, rows=40)
    ckpt = str(tmp / "ckpt.zarr")
    params = {"checkpoint": ckpt, "checkpoint_every": 2}
    if (
        "storage" in est.get_params()
    ):  # RobustPCA: the n1 × n2 state in the checkpoint store
        params["storage"] = "zarr"

    # cluster A goes away after the first commit
    with ProcessCluster(2, workdir=tmp / "a") as a:
        client = a.client(2)
        _warm(client)
        # reads stall once the first commit is on disk: the cluster goes away after it,
        # while the scheduler reports a worker executing a read of the fit
        Xs = gated(da.from_zarr(path), new_gate(), free=0, after_commit=ckpt)
        with (
            ClusterKiller(a, client, need_all=False, after_commit=ckpt) as killer,
            pytest.raises(
                FutureCancelledError, match="lost the connection to the scheduler"
            ),
        ):
            case.make(**params).fit(Xs)
        assert killer.error is None, killer.error
        client.close(timeout=5)

    # cluster B: resume, and an uninterrupted fit for reference
    with ProcessCluster(2, workdir=tmp / "b") as b:
        client = b.client(2)
        X = da.from_zarr(path)
        resumed = case.make(**params).fit(X)
        assert resumed.resumed_from_ >= 2
        fresh = case.make(**{**params, "checkpoint": str(tmp / "fresh.zarr")}).fit(X)
        assert fresh.resumed_from_ == 0
        assert resumed.n_iter_ == fresh.n_iter_
        assert_same_fit(summary(fresh), summary(resumed), 1e-8, f"{case.name} resumed")
        if hasattr(fresh, "low_rank_"):  # RobustPCA: the lazy L too
            np.testing.assert_allclose(
                resumed.low_rank_.compute(),
                fresh.low_rank_.compute(),
                rtol=0,
                atol=1e-8 * float(np.abs(case.X()).max()),
            )
        client.close(timeout=5)


# -- `scalepca run`: a worker lost under the progress display is replaced -------------
def _run_config(tmp_path, data, method, params, name, cluster=None):
    import yaml

    cfg = {
        "data": {"path": str(data)},
        "model": {"method": method, **params},
        # one worker: the run can only finish if its nanny starts a replacement
        "cluster": cluster
        or {
            "kind": "local",
            "n_workers": 1,
            "threads_per_worker": 1,
            "memory_limit": "1GiB",
        },
        "output": {"store": str(tmp_path / name), "scores": False},
        "progress": True,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _kill_workers_at(index: int):
    """A pass listener that SIGKILLs every worker process when pass ``index`` starts."""
    import os
    import signal

    killed = []

    def on_pass(info):
        if info["event"] == "start" and info["index"] == index and not killed:
            from distributed import get_client

            for pid in get_client().run(os.getpid).values():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    return on_pass, killed


@pytest.mark.parametrize(
    "method, params, index",
    [
        pytest.param("pca", {"n_components": 3}, 1, id="one-pass"),
        pytest.param(
            "ppca",
            {"n_components": 3, "solver": "em", "max_iter": 6, "tol": 0.0},
            3,
            id="iterative",
        ),
    ],
)
def test_cli_run_replaces_a_killed_worker(tmp_path, capfd, method, params, index):
    import dask

    import scalepca
    from scalepca.app._passlog import listen_passes
    from scalepca.cli import EXIT_OK, main
    from scalepca.datasets import make_low_rank, write_dataset

    data = tmp_path / "x.zarr"
    write_dataset(make_low_rank(2000, 30, rank=4, chunk_rows=250, seed=5), data)
    runs = {}
    for name in ("undisturbed", "killed"):
        cfg = _run_config(tmp_path, data, method, params, name)
        on_pass, killed = _kill_workers_at(index if name == "killed" else -1)
        with listen_passes(on_pass), dask.config.set({"scalepca.progress.grace": 0}):
            rc = main(["run", str(cfg)])
        out, err = capfd.readouterr()
        assert rc == EXIT_OK, err
        assert "Traceback" not in out + err, out + err
        # the run says it lost a worker (and only when it did)
        assert ("lost and replaced" in err) == (name == "killed"), err
        runs[name] = scalepca.load(tmp_path / name / "model.zarr"), killed
    (ref, _), (got, killed) = runs["undisturbed"], runs["killed"]
    assert killed, f"pass {index} never started"
    np.testing.assert_allclose(
        got.explained_variance_, ref.explained_variance_, rtol=1e-12
    )


def test_cli_run_on_a_real_scheduler_replaces_a_killed_worker(tmp_path, capfd):
    """The same with ``cluster.kind: address``: a ``dask scheduler`` and one ``dask
    worker`` under its nanny, in processes of their own; the worker process is SIGKILLed
    when the fit's pass starts, with the progress display on."""
    import dask

    import scalepca
    from scalepca.app._passlog import listen_passes
    from scalepca.cli import EXIT_OK, main
    from scalepca.datasets import make_low_rank, write_dataset

    data = tmp_path / "x.zarr"
    write_dataset(make_low_rank(2000, 30, rank=4, chunk_rows=250, seed=5), data)
    runs = {}
    with ProcessCluster(
        1, memory_limit="1GiB", workdir=tmp_path / "cluster", nanny=True
    ) as cluster:
        where = {"kind": "address", "address": cluster.address}
        for name in ("undisturbed", "killed"):
            cfg = _run_config(tmp_path, data, "pca", {"n_components": 3}, name, where)
            on_pass, killed = _kill_workers_at(1 if name == "killed" else -1)
            with (
                listen_passes(on_pass),
                dask.config.set({"scalepca.progress.grace": 0}),
            ):
                rc = main(["run", str(cfg)])
            out, err = capfd.readouterr()
            assert rc == EXIT_OK, err
            assert "Traceback" not in out + err, out + err
            runs[name] = scalepca.load(tmp_path / name / "model.zarr"), killed
    (ref, _), (got, killed) = runs["undisturbed"], runs["killed"]
    assert killed, "the pass never started"
    np.testing.assert_allclose(
        got.explained_variance_, ref.explained_variance_, rtol=1e-12
    )


def test_cli_run_with_every_worker_gone_exits_naming_them(tmp_path, capfd):
    """No worker left and none coming: the run ends non-zero within the scheduler's
    no-workers timeout, naming the workers lost and why, and writes no output."""
    import dask

    from scalepca.app._passlog import listen_passes
    from scalepca.app.cluster import connect
    from scalepca.cli import EXIT_JOB_FAILED, main
    from scalepca.datasets import make_low_rank, write_dataset

    # the default: a local cluster's scheduler gives up after a minute without workers
    with connect(n_workers=1, processes=False, quiet=True) as client:
        assert client._scalepca_cluster.scheduler.no_workers_timeout == 60

    data = tmp_path / "x.zarr"
    write_dataset(make_low_rank(600, 10, rank=3, chunk_rows=200, seed=2), data)
    cfg = _run_config(tmp_path, data, "pca", {"n_components": 2}, "gone")
    retired = []

    # every worker retires as the fit's pass starts; none replaces them
    def on_pass(info):
        if info["event"] == "start" and not retired:
            from distributed import get_client

            retired.extend(get_client().retire_workers())

    # a value the user's Dask config sets is kept: a short wait keeps the test quick
    with (
        listen_passes(on_pass),
        dask.config.set({"distributed.scheduler.no-workers-timeout": "1s"}),
    ):
        rc = main(["run", str(cfg)])
    out, err = capfd.readouterr()
    assert retired
    assert rc == EXIT_JOB_FAILED, err
    assert "no worker was left to run the work" in err, err
    for addr in retired:
        assert f"{addr}: it was retired" in err, err
    assert not (tmp_path / "gone").exists()  # nothing written as if complete


def test_progress_puts_nothing_unpicklable_in_dasks_config():
    """A nanny pickles Dask's whole config into each worker it starts (a replacement
    too): under the progress display it pickles, holds no client, and a worker reads
    Dask's own ``scheduler`` setting from it."""
    import io
    import pickle

    import dask

    from scalepca.app.cluster import connect, progress

    with (
        connect(n_workers=1, processes=False, quiet=True) as client,
        progress(client=client, stream=io.StringIO()),
    ):
        assert dask.config.get("scheduler") is not None
        copied = pickle.loads(pickle.dumps(dask.config.global_config))
        assert copied["scheduler"] == "dask.distributed"
        assert "Client" not in repr(copied)
