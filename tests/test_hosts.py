"""Beyond one host: emulated hosts with real network stacks (``support/hosts.py``).

Four "hosts" (network namespaces on a bridge, links capped with ``tc … tbf``), one
``dask worker`` each, the scheduler and moto's S3 server in namespaces of their own; the
data are a zarr store in that server. Checked:

* a one-pass PCA and a Krylov (wide) PCA over the network equal the in-memory fit;
* a host partitioned mid-pass (its link down): the pass completes on the others, the
  answer equals the fault-free fit and the tasks run again are at most that host's share
  of the pass;
* a host lost (every process in its namespace SIGKILLed) in a one-pass fit and in an EM
  iteration: the same answer;
* the object store unreachable during ``scalepca run``: a clear error naming the store
  and no output that looks complete;
* the scheduler's host lost mid-run (``-m slow``): ``scalepca run`` says so, and the
  same command on a new scheduler resumes from the checkpoint.

Faults land at a known point, not after a sleep: the fit reads through a gate
(``support.reliability.gated``) that stalls it once every worker holds results and runs
a read, the fault is made then, and the gate opens. Workers and scheduler run with
:data:`~tests.support.hosts.FAST_FAILURE` so a host that drops off is noticed in
seconds. Needs root (CI runs as root); skips elsewhere with the reason.
"""

from __future__ import annotations

import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest

import scalepca
from scalepca.datasets import make_low_rank

from .support import hosts as H
from .support.reliability import BY_NAME, gated, new_gate, open_gate, wait_until_busy

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.xdist_group("hosts"),
    pytest.mark.skipif(H.unavailable() is not None, reason=str(H.unavailable())),
]

N_HOSTS = 4
ROWS = 100  # rows per block: 16 blocks of the tall matrix, 4 per host


def _warm(client):
    def imports():
        import s3fs  # noqa: F401

        import scalepca  # noqa: F401
        import tests.support.reliability  # noqa: F401

        return True

    client.run(imports)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """4 hosts × 1 worker at 200 Mbit/s, the store at 100 Mbit/s; a client in this
    process."""
    workdir = tmp_path_factory.mktemp("hosts")
    with (
        H.Hosts(
            N_HOSTS,
            links=H.Link("200mbit"),
            store_link=H.Link("100mbit"),
            workdir=workdir,
        ) as hosts,
        dask.config.set(H.FAST_FAILURE),
    ):
        client = hosts.client()
        _warm(client)
        H.count_tasks(client)  # registers the counter
        hosts.client_ = client
        yield hosts
        hosts.client_.close()


def _store(hosts, name, X, rows=ROWS, cols=None):
    """``X`` as a zarr store in the S3 server; returns its URL."""
    import zarr

    url = hosts.url(f"{name}.zarr")
    store = zarr.storage.FsspecStore.from_url(
        url, storage_options=hosts.storage_options, read_only=False
    )
    z = zarr.create_array(
        store,
        shape=X.shape,
        chunks=(rows, cols or X.shape[1]),
        dtype=X.dtype,
        overwrite=True,
    )
    z[...] = X
    return url


@pytest.fixture(scope="module")
def tall(cluster):
    X = make_low_rank(16 * ROWS, 24, rank=3, chunk_rows=ROWS, seed=3).compute()
    return _store(cluster, "tall", X), X


def _restore_all(hosts):
    """Every host back with a live worker, and the scheduler listing only those."""
    listed = {
        v.get("name")
        for v in hosts.client_.scheduler_info(n_workers=-1)["workers"].values()
    }
    for host in hosts.hosts:
        if (
            not hosts.link_up(host)
            or not set(host.workers) <= listed
            or any(p.poll() is not None for p in host.procs[-len(host.workers) :])
        ):
            hosts.restore(host)
    hosts.wait_for_workers(hosts.client_)


def _eigenvalues_equal(got, ref, rtol=1e-12):
    np.testing.assert_allclose(
        got.explained_variance_, ref.explained_variance_, rtol=rtol, atol=0
    )


def test_fits_over_the_network_equal_in_memory(cluster, tall):
    """One-pass PCA from the S3 store over capped links = the in-memory fit; so does the
    Krylov solver of wide data (2-D blocks), with the same probes."""
    url, X = tall
    opts = cluster.storage_options
    with dask.config.set(scheduler="sync"):
        ref = scalepca.PCA(3).fit(X)
    got = scalepca.PCA(3).fit(da.from_zarr(url, storage_options=opts))
    _eigenvalues_equal(got, ref)
    sent = [cluster.link_bytes(h)["rx"] for h in cluster.hosts]
    assert sum(s > X.nbytes / 16 for s in sent) >= 2, (
        sent
    )  # more than one host read blocks

    W = (
        np.random.default_rng(4).standard_normal((400, 300))
        @ np.diag(np.linspace(3, 0.1, 300))
        + 2.0
    )
    wide_url = _store(cluster, "wide", W, rows=100, cols=100)
    params = {"n_components": 4, "svd_solver": "randomized", "random_state": 0}
    with dask.config.set(scheduler="sync"):
        ref = scalepca.PCA(**params).fit(da.from_array(W, chunks=(100, 100)))
    got = scalepca.PCA(**params).fit(da.from_zarr(wide_url, storage_options=opts))
    assert got.n_passes_ == ref.n_passes_ and got.n_passes_ > 1
    _eigenvalues_equal(got, ref)


class _Fault:
    """A thread that, once every worker runs a gated read while holding ``min_results``
    results, applies ``act(host)`` to the host of one of them, then opens the gate."""

    def __init__(self, hosts, gate, act, min_results=1):
        self.hosts, self.gate, self.act = hosts, gate, act
        self.min_results = min_results
        self.victim = self.error = self.at = None
        self.held = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        client = self.hosts.client_
        try:
            busy = wait_until_busy(
                client,
                self.hosts.worker_names,
                min_results=self.min_results,
                timeout=120,
            )
            name, self.held = max(busy.items(), key=lambda kv: kv[1])
            self.victim = self.hosts.host_of(name)
            self.act(self.victim)
            self.at = time.monotonic()
        except Exception as err:  # reported by the test
            self.error = err
        finally:
            open_gate(client, self.gate)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._thread.join(timeout=120)


def _faulty_fit(hosts, make, X, act, *, free, min_results=1):
    """``make().fit`` of ``X`` read through a gate, with ``act`` applied to one host
    mid-fit; returns (the fit, the fault, seconds from the fault to the fit's end, tasks
    completed)."""
    client = hosts.client_
    H.count_tasks(client, reset=True)
    gate = new_gate()
    with _Fault(hosts, gate, act, min_results) as fault:
        got = make().fit(gated(X, gate, free))
    assert fault.error is None, fault.error
    assert fault.victim is not None, "the fit ended before the fault"
    return got, fault, time.monotonic() - fault.at, H.count_tasks(client, reset=True)


def _removals(client) -> int:
    """How many workers the scheduler has removed."""
    return sum(m.get("action") == "remove-worker" for _, m in client.get_events("all"))


def test_partitioned_host_mid_pass(cluster, tall):
    """A host's link set down mid-pass: the pass completes on the other three within
    seconds (worker TTL 10 s), the answer equals the fault-free fit, and the tasks run
    again are no more than that host's share of the pass."""
    url, X = tall
    A = da.from_zarr(url, storage_options=cluster.storage_options)
    try:
        H.count_tasks(cluster.client_, reset=True)
        ref = scalepca.PCA(3).fit(gated(A, new_gate(), free=10**6))
        pass_tasks = len(H.count_tasks(cluster.client_, reset=True))
        removed_before = _removals(cluster.client_)
        got, fault, _, done = _faulty_fit(
            cluster,
            lambda: scalepca.PCA(3),
            A,
            cluster.partition,
            free=2,
            min_results=2,
        )
        _eigenvalues_equal(got, ref)
        np.testing.assert_allclose(got.components_, ref.components_, rtol=0, atol=1e-12)
        share = -(-pass_tasks // N_HOSTS)
        assert H.rework(done) <= share, (H.rework(done), share, fault.held)
        # the scheduler noticed the host gone (its lowered timeouts) and removed it
        assert _removals(cluster.client_) > removed_before
    finally:
        _restore_all(cluster)


@pytest.mark.parametrize(
    "what",
    ["one-pass", pytest.param("em", marks=pytest.mark.slow)],  # em: 18-27 s here
)
def test_host_lost_mid_fit(cluster, tall, what):
    """Every process of one host SIGKILLed mid-fit (a one-pass PCA, or an EM iteration
    of PPCA with missing values): the fit completes on the others with the fault-free
    answer."""
    if what == "one-pass":
        url, _ = tall
        make, free = (lambda: scalepca.PCA(3)), 2
    else:
        case = BY_NAME["PPCA-EM"]
        Xm = case.X()
        url = _store(cluster, "missing", Xm, rows=25)
        # each worker reads every block once freely: the kill lands an iteration or
        # more in
        free = int(np.ceil(len(Xm) / 25))

        def make():
            return case.make(max_iter=8, tol=0.0)

    A = da.from_zarr(url, storage_options=cluster.storage_options)
    try:
        ref = make().fit(A)
        got, fault, _, done = _faulty_fit(
            cluster, make, A, cluster.kill_host, free=free
        )
        assert all(p.poll() is not None for p in fault.victim.procs)
        _eigenvalues_equal(got, ref)
        if what == "em":
            assert got.n_iter_ == ref.n_iter_ and got.n_iter_ > 1
            np.testing.assert_allclose(
                got.noise_variance_, ref.noise_variance_, rtol=1e-12
            )
    finally:
        _restore_all(cluster)


def test_store_unreachable_during_run(cluster, tall, tmp_path, capsys):
    """The object store's link goes down while ``scalepca run`` reads: the run fails
    with an error naming the store, and leaves no output that looks complete."""
    import yaml

    from scalepca.cli import EXIT_JOB_FAILED, main

    url, _ = tall
    client = cluster.client_
    out = tmp_path / "out"
    cfg = {
        "data": {"path": url, "storage_options": cluster.storage_options},
        "model": {"method": "pca", "n_components": 3},
        "cluster": {"kind": "address", "address": cluster.scheduler_address},
        "output": {"store": str(out)},
        "progress": False,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    slow = H.Link("1mbit", burst="64kb")  # the read takes seconds: the cut lands in it
    cluster.set_link(cluster.store, slow)
    cut = threading.Event()

    def cut_when_reading():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not cut.is_set():
            if any(client.has_what().values()):  # a first block has been read
                cluster.partition(cluster.store)
                cut.set()
                return
            time.sleep(0.02)

    thread = threading.Thread(target=cut_when_reading, daemon=True)
    thread.start()
    try:
        rc = main(["run", str(path)])
    finally:
        cut.set()
        thread.join(timeout=30)
        cluster.heal(cluster.store)
        cluster.set_link(cluster.store, H.Link("100mbit"))
    _, err = capsys.readouterr()
    assert rc == EXIT_JOB_FAILED, err
    # one line, naming the store's endpoint and the object it could not reach, and
    # saying the retries are spent (the error came from a worker)
    line = err.strip().splitlines()[-1]
    assert line.startswith(
        "scalepca: job failed: the object store did not answer at"
    ), err
    assert cluster.storage_options["endpoint_url"] in line and "tall.zarr" in line, err
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert "model.zarr" not in left and "scores.zarr" not in left, left


@pytest.mark.slow  # 70 s here: each chunk write waits out the store's timeouts
def test_store_unreachable_while_writing(cluster, tall, tmp_path, capsys):
    """The object store's link goes down while ``scalepca run`` writes its outputs
    there: the run fails naming the store; an output it completed before the cut is
    named in that line, and one it had begun is refused as incomplete when read."""
    import s3fs
    import yaml

    from scalepca.cli import EXIT_JOB_FAILED, main

    url, _ = tall
    opts = cluster.storage_options
    out = cluster.url("out-written")
    cfg = {
        "data": {"path": url, "storage_options": opts},
        "model": {"method": "pca", "n_components": 3},
        "cluster": {"kind": "address", "address": cluster.scheduler_address},
        "output": {"store": out, "storage_options": opts, "reconstruction": True},
        "progress": False,
    }
    path = tmp_path / "write.yaml"
    path.write_text(yaml.safe_dump(cfg))
    fs = s3fs.S3FileSystem(**opts, skip_instance_cache=True)
    started = f"{cluster.bucket}/out-written/reconstruction.zarr"
    cut = threading.Event()

    def cut_when_writing():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not cut.is_set():
            fs.invalidate_cache()
            if fs.exists(started):  # the last output has begun
                cluster.set_link(cluster.store, H.Link("1mbit", burst="64kb"))
                cluster.partition(cluster.store)
                cut.set()
                return
            time.sleep(0.02)

    thread = threading.Thread(target=cut_when_writing, daemon=True)
    thread.start()
    try:
        rc = main(["run", str(path)])
    finally:
        cut.set()
        thread.join(timeout=30)
        cluster.heal(cluster.store)
        cluster.set_link(cluster.store, H.Link("100mbit"))
    _, err = capsys.readouterr()
    if rc == 0:
        pytest.skip("the outputs were written before the cut (nothing to check)")
    assert rc == EXIT_JOB_FAILED, err
    line = err.strip().splitlines()[-1]
    assert opts["endpoint_url"] in line, err
    for name in ("scores", "reconstruction"):
        store = f"{out}/{name}.zarr"
        fs.invalidate_cache()
        if not fs.exists(store.removeprefix("s3://")):
            continue  # never begun
        try:
            scalepca.open_matrix(store, variable=name, storage_options=opts)
        except ValueError as refused:
            assert "incomplete" in str(refused), refused
            assert store not in line, err
        else:  # complete: the failure says so
            assert f"written completely before it: {store}" in line or (
                f", {store}" in line
            ), err


@pytest.mark.slow
def test_scheduler_lost_then_resumed(cluster, tmp_path, capsys):
    """The scheduler's host lost mid-run of an EM fit with a checkpoint: ``scalepca
    run`` fails at once with an error saying so and writes no model; the same command on
    a new scheduler resumes from the checkpoint and ends where an uninterrupted fit
    ends.

    Last in this module: it replaces the module's cluster and client."""
    import yaml

    from scalepca.cli import EXIT_JOB_FAILED, EXIT_OK, main

    from .support.reliability import commits, wait_for_commit

    case = BY_NAME["PPCA-EM"]
    Xm = case.X()
    url = _store(cluster, "resume", Xm, rows=25)
    opts = cluster.storage_options
    ckpt, out = tmp_path / "ckpt.zarr", tmp_path / "out"
    params = {**case.params, "max_iter": 12, "tol": 0.0}  # every iteration runs
    cfg = {
        "data": {"path": url, "storage_options": opts},
        "model": {
            "method": "ppca",
            **params,
            "checkpoint": str(ckpt),
            "checkpoint_every": 2,
        },
        "cluster": {"kind": "address", "address": cluster.scheduler_address},
        "output": {"store": str(out), "scores": False},
        "progress": False,
    }
    path = tmp_path / "em.yaml"
    path.write_text(yaml.safe_dump(cfg))
    ref = case.make(max_iter=12, tol=0.0).fit(da.from_zarr(url, storage_options=opts))

    killed = {}

    def kill_after_first_commit():
        try:
            wait_for_commit(str(ckpt), timeout=120)
            cluster.kill_host(cluster.scheduler)
            killed["at"] = time.monotonic()
        except Exception as err:  # reported below
            killed["error"] = err

    thread = threading.Thread(target=kill_after_first_commit, daemon=True)
    thread.start()
    rc = main(["run", str(path)])
    thread.join(timeout=60)
    _, err = capsys.readouterr()
    assert "error" not in killed, killed
    assert "at" in killed, f"the run ended before the scheduler was lost: {err}"
    assert rc == EXIT_JOB_FAILED, err
    line = err.strip().splitlines()[-1]
    # what happened and what to do, not the internal key of a cancelled task
    assert line.startswith(
        "scalepca: job failed: lost the connection to the dask scheduler"
    ), err
    assert "run the same command again" in line and "model.checkpoint" in line, err
    assert not (out / "model.zarr").exists()
    done_before = len(commits(str(ckpt)))
    assert done_before >= 1

    cluster.client_.close(timeout=5)
    cluster.new_scheduler()
    cluster.client_ = cluster.client()
    _warm(cluster.client_)
    rc = main(["run", str(path)])
    captured = capsys.readouterr()
    assert rc == EXIT_OK, captured.err
    got = scalepca.load(out / "model.zarr")
    # resumed from the commit made before the loss: no completed iteration redone
    assert got.resumed_from_ >= 2 and got.resumed_from_ % 2 == 0
    assert f"passes over the data: {ref.n_passes_ - got.resumed_from_}" in captured.out
    assert got.n_iter_ == ref.n_iter_
    _eigenvalues_equal(got, ref)
    np.testing.assert_allclose(got.noise_variance_, ref.noise_variance_, rtol=1e-12)
