"""The object store unreachable or throttled (issue 48).

scalepca gives an ``s3://`` store botocore's "standard" retries and short connection
timeouts (:data:`scalepca.io._fs.S3_CONFIG`, changed key by key in
``storage_options.config_kwargs``). Checked:

* the defaults reach the validated config, the user's keys win;
* a store that does not answer: ``scalepca run`` retries as configured, then fails
  with one line naming the store's URL, exits non-zero and writes nothing — on
  loopback (a port nobody listens on: runs everywhere) and on emulated hosts (the
  store's link down: needs root);
* a store all but cut mid-read, then back: the run completes with the same answer;
* a throttled store that works (its link capped at 1 Mbit/s by ``tc … tbf`` with a
  short queue, so packets wait or are dropped; scalepca's default timeouts): the run
  completes with the eigenvalues of the unthrottled fit (1e-12).

The host tests use ``tests/support/hosts.py`` (network namespaces, ``tc``); they skip
with the reason when that cannot run (not root).
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import yaml
from distributed.diagnostics.plugin import WorkerPlugin

import scalepca
from scalepca.app.config import validate_config
from scalepca.cli import EXIT_JOB_FAILED, EXIT_OK, main
from scalepca.datasets import make_low_rank
from scalepca.io._fs import S3_CONFIG

from .support import hosts as H

pytest.importorskip("s3fs")  # the 's3' extra

ROWS = 100


def on_hosts(test):
    """The marks of a test on emulated hosts: as ``tests/test_hosts.py``'s."""
    for mark in (
        pytest.mark.distributed,
        pytest.mark.xdist_group("hosts"),
        pytest.mark.skipif(H.unavailable() is not None, reason=str(H.unavailable())),
    ):
        test = mark(test)
    return test


def _config(data, storage_options, out, cluster):
    return {
        "data": {"path": data, "storage_options": storage_options},
        "model": {"method": "pca", "n_components": 3},
        "cluster": cluster,
        "output": {"store": str(out)},
        "progress": False,
    }


def _write(tmp_path, cfg, name="run.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _retries(caplog) -> int:
    """Retries botocore made in this process (its standard retry handler's log)."""
    return sum(
        r.getMessage().startswith("Retry needed, retrying")
        for r in caplog.records
        if r.name == "botocore.retries.standard"
    )


# -- the defaults --------------------------------------------------------------------
def test_s3_defaults_in_the_config():
    """An s3:// data path or output store gets scalepca's retries and timeouts; what the
    user sets wins key by key (``retries`` merged); other paths are left alone."""
    model = {"method": "pca", "n_components": 2}
    cfg = validate_config(
        {
            "data": {
                "path": "s3://bucket/x.zarr",
                "storage_options": {
                    "key": "k",
                    "config_kwargs": {
                        "connect_timeout": 3,
                        "retries": {"max_attempts": 1},
                    },
                },
            },
            "model": model,
            "output": {"store": "s3://bucket/out"},
        }
    )
    got = cfg["data"]["storage_options"]
    assert got["key"] == "k"
    assert got["config_kwargs"] == {
        **S3_CONFIG,
        "connect_timeout": 3,
        "retries": {**S3_CONFIG["retries"], "max_attempts": 1},
    }
    assert cfg["output"]["storage_options"] == {"config_kwargs": S3_CONFIG}
    # a client made with them leaves scalepca's defaults as they were (botocore
    # writes into the ``retries`` it is given)
    import s3fs

    pristine = {**S3_CONFIG, "retries": dict(S3_CONFIG["retries"])}
    s3fs.S3FileSystem(
        anon=True,
        endpoint_url="http://127.0.0.1:9",
        skip_instance_cache=True,
        **cfg["output"]["storage_options"],
    ).connect()
    assert S3_CONFIG == pristine
    assert validate_config({"data": {"path": "s3://b/x.zarr"}, "model": model})["data"][
        "storage_options"
    ] == {"config_kwargs": pristine}
    # the config reference states them
    from scalepca.app.config_keys import KEY_DOCS

    said = yaml.safe_dump(S3_CONFIG, default_flow_style=True, sort_keys=False).strip()
    assert said.replace("'", "") in KEY_DOCS["data.storage_options"].replace("``", "")
    local = validate_config(
        {"data": {"path": "x.zarr"}, "model": model, "output": {"store": "out"}}
    )
    assert local["data"]["storage_options"] is None
    assert local["output"]["storage_options"] is None
    with pytest.raises(Exception, match="config_kwargs' must be a mapping"):
        validate_config(
            {
                "data": {
                    "path": "s3://b/x.zarr",
                    "storage_options": {"config_kwargs": 5},
                },
                "model": model,
            }
        )


def test_store_refusing_connections(tmp_path, capsys, caplog):
    """An endpoint where nothing listens (a bound, never listening socket: every
    connection refused): ``scalepca run`` retries as configured, then fails in one
    line naming the store's URL, before a cluster starts, and writes nothing."""
    caplog.set_level(logging.DEBUG, logger="botocore.retries.standard")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
        opts = {
            "key": "testing",
            "secret": "testing",
            "endpoint_url": endpoint,
            "client_kwargs": {"region_name": "us-east-1"},
            "config_kwargs": {"retries": {"max_attempts": 2}},
        }
        out = tmp_path / "out"
        cfg = _config("s3://bucket/tall.zarr", opts, out, {"kind": "local"})
        rc = main(["run", _write(tmp_path, cfg)])
    _, err = capsys.readouterr()
    assert rc == EXIT_JOB_FAILED, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("scalepca: job failed: the object store did not answer"), err
    assert f"{endpoint}/bucket/tall.zarr" in line and "after its retries" in line, err
    assert "data.storage_options.config_kwargs" in line, err
    assert _retries(caplog) == 2
    assert not out.exists()


def test_python_open_matrix_retries_an_unreachable_store(caplog):
    """``open_matrix`` of an ``s3://`` store from Python, where nothing listens: the
    request is retried as :data:`S3_CONFIG` says (botocore's "standard" mode, its
    ``max_attempts``), or as the user's ``config_kwargs`` say, then refused."""
    caplog.set_level(logging.DEBUG, logger="botocore.retries.standard")
    import s3fs

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        opts = {
            "key": "testing",
            "secret": "testing",
            "endpoint_url": f"http://127.0.0.1:{closed.getsockname()[1]}",
            "client_kwargs": {"region_name": "us-east-1"},
        }
        mine = {"retries": {"max_attempts": 1}}
        for given, retries in (
            (opts, S3_CONFIG["retries"]["max_attempts"]),
            ({**opts, "config_kwargs": mine}, 1),
        ):
            caplog.clear()
            s3fs.S3FileSystem.clear_instance_cache()
            with pytest.raises(Exception, match="Could not connect"):
                scalepca.open_matrix("s3://bucket/x.zarr", storage_options=given)
            assert _retries(caplog) == retries


# -- emulated hosts ------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """2 hosts × 1 worker at 200 Mbit/s, the store at 100 Mbit/s."""
    import dask

    with (
        H.Hosts(
            2,
            links=H.Link("200mbit"),
            store_link=H.Link("100mbit"),
            workdir=tmp_path_factory.mktemp("hosts"),
        ) as hosts,
        dask.config.set(H.FAST_FAILURE),
    ):
        yield hosts


@pytest.fixture(scope="module")
def tall(cluster):
    """A 1,600 × 24 zarr store of 16 row chunks in the S3 server, and its in-memory
    fit."""
    import zarr

    X = make_low_rank(16 * ROWS, 24, rank=3, chunk_rows=ROWS, seed=5).compute()
    url = cluster.url("tall.zarr")
    store = zarr.storage.FsspecStore.from_url(
        url, storage_options=cluster.storage_options, read_only=False
    )
    z = zarr.create_array(
        store, shape=X.shape, chunks=(ROWS, X.shape[1]), dtype=X.dtype, overwrite=True
    )
    z[...] = X
    return url, scalepca.PCA(3).fit(da.from_array(X, chunks=(ROWS, X.shape[1])))


def _qdisc(host) -> dict:
    """The statistics of the cap on what ``host`` sends."""
    out = subprocess.run(
        ["ip", "netns", "exec", host.ns, "tc", "-s", "-j", "qdisc", "show", "dev"]
        + ["eth0"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)[0]


def _own_options(hosts) -> dict:
    """The cluster's s3fs options without the short timeouts its other tests use:
    scalepca's defaults apply."""
    return {k: v for k, v in hosts.storage_options.items() if k != "config_kwargs"}


@on_hosts
def test_throttled_store_completes(cluster, tall, tmp_path, capsys):
    """The store's link capped at 1 Mbit/s both ways, a queue of 50 ms: ``scalepca
    run`` with scalepca's default timeouts completes, and its eigenvalues equal the
    unthrottled fit's to 1e-12."""
    url, ref = tall
    out = tmp_path / "out"
    cfg = _config(
        url,
        _own_options(cluster),
        out,
        {"kind": "address", "address": cluster.scheduler_address},
    )
    cfg["output"]["report"] = False
    # the kernel here has no netem: tbf's queue, a few packets deep at this rate,
    # delays what it can and drops the rest (TCP sends them again)
    cluster.set_link(cluster.store, H.Link("1mbit", burst="64kb", latency="50ms"))
    try:
        before = _qdisc(cluster.store)["overlimits"]
        rc = main(["run", _write(tmp_path, cfg)])
        throttled = _qdisc(cluster.store)["overlimits"] - before
    finally:
        cluster.set_link(cluster.store, H.Link("100mbit"))
    captured = capsys.readouterr()
    assert rc == EXIT_OK, captured.err
    assert throttled > 0  # the cap bound: packets waited in, or were dropped by, tbf
    got = scalepca.load(out / "model.zarr")
    np.testing.assert_allclose(
        got.explained_variance_, ref.explained_variance_, rtol=1e-12, atol=0
    )


@on_hosts
def test_store_unreachable_from_the_start(cluster, tall, tmp_path, capsys, caplog):
    """The store's link down before ``scalepca run`` starts: it retries as configured
    (1 s to connect, 2 retries), then fails in one line naming the store's URL, and
    writes nothing."""
    url, _ = tall
    caplog.set_level(logging.DEBUG, logger="botocore.retries.standard")
    opts = {
        **_own_options(cluster),
        "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 2}},
    }
    out = tmp_path / "out"
    cfg = _config(
        url, opts, out, {"kind": "address", "address": cluster.scheduler_address}
    )
    cluster.partition(cluster.store)
    try:
        rc = main(["run", _write(tmp_path, cfg)])
    finally:
        cluster.heal(cluster.store)
    _, err = capsys.readouterr()
    assert rc == EXIT_JOB_FAILED, err
    line = err.strip().splitlines()[-1]
    endpoint = cluster.storage_options["endpoint_url"]
    assert line.startswith("scalepca: job failed: the object store did not answer"), err
    assert f"{endpoint}/{cluster.bucket}/tall.zarr" in line, err
    assert _retries(caplog) == 2
    assert not out.exists()


class HeldReads(WorkerPlugin):
    """A worker plugin: in each worker, the first read of a chunk goes ahead and later
    ones wait until the file ``gate`` exists (for up to ``timeout`` seconds), so that
    a run cannot read its chunks before the test has done what it must between them;
    the file ``gate + ".held"`` says a read waits. Reads of metadata are never
    held."""

    name = "scalepca-held-reads"
    METADATA = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")

    def __init__(self, gate, timeout: float = 120.0):
        self.gate = str(gate)
        self.timeout = timeout

    def setup(self, worker):
        import asyncio
        import os
        import time

        import s3fs

        self.original = original = s3fs.S3FileSystem._cat_file
        gate, timeout, read = self.gate, self.timeout, []

        async def _cat_file(fs, path, *args, **kwargs):
            if not path.endswith(self.METADATA):
                if read and not os.path.exists(gate):
                    open(gate + ".held", "a").close()
                deadline = time.monotonic() + timeout
                while read and not os.path.exists(gate) and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                read.append(path)
            return await original(fs, path, *args, **kwargs)

        s3fs.S3FileSystem._cat_file = _cat_file

    def teardown(self, worker):
        import s3fs

        s3fs.S3FileSystem._cat_file = self.original


@on_hosts
def test_store_back_after_an_outage(cluster, tall, tmp_path, capsys):
    """The store's link all but cut (a cap of 8 kbit/s whose queue drops nearly every
    packet) once a worker has read a chunk, and restored once packets to the store have
    been dropped: the reads sent meanwhile recover (TCP sends again, or botocore
    retries a request that timed out) and ``scalepca run`` completes with the
    eigenvalues of the fault-free fit (1e-12).

    The workers' reads after their first wait until the link is cut
    (:class:`HeldReads`): the run cannot end before the outage, however fast the store
    answers."""
    import threading
    import time

    from distributed import Client

    url, ref = tall
    out = tmp_path / "out"
    opts = {
        **_own_options(cluster),
        "config_kwargs": {"connect_timeout": 2, "read_timeout": 3},
    }
    cfg = _config(
        url, opts, out, {"kind": "address", "address": cluster.scheduler_address}
    )
    cfg["output"]["report"] = False
    done, seen, gate = threading.Event(), {}, tmp_path / "outage-begun"

    def dropped() -> int:
        out = subprocess.run(
            ["tc", "-s", "-j", "qdisc", "show", "dev", cluster.store.port],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return json.loads(out)[0]["drops"]

    def outage():
        try:
            held = Path(f"{gate}.held")
            while not done.is_set() and not held.exists():
                time.sleep(0.02)  # until a chunk has been read and the next waits
            if done.is_set():
                return
            before = dropped()
            cluster.set_link(cluster.store, H.Link("8kbit", burst="2kb", latency="1ms"))
            gate.touch()  # the held reads go now, into the outage
            while not done.is_set() and dropped() <= before:
                time.sleep(0.02)  # until a packet to the store has been lost
            seen["dropped"] = dropped() - before
        except Exception as err:  # reported by the test
            seen["error"] = err
        finally:
            gate.touch()
            cluster.set_link(cluster.store, H.Link("100mbit"))

    # not the default client: the run's own is, and two defaults closed out of order
    # would leave dask's scheduler setting behind
    with Client(cluster.scheduler_address, timeout=60, set_as_default=False) as client:
        client.register_plugin(HeldReads(gate))
        thread = threading.Thread(target=outage, daemon=True)
        thread.start()
        try:
            rc = main(["run", _write(tmp_path, cfg)])
        finally:
            done.set()
            thread.join(timeout=60)
            cluster.set_link(cluster.store, H.Link("100mbit"))
            client.unregister_worker_plugin(HeldReads.name)
    captured = capsys.readouterr()
    assert "error" not in seen, seen
    assert rc == EXIT_OK, captured.err
    assert Path(f"{gate}.held").exists(), "no read waited for the outage"
    assert seen.get("dropped", 0) > 0, "no packet to the store was lost"
    got = scalepca.load(out / "model.zarr")
    np.testing.assert_allclose(
        got.explained_variance_, ref.explained_variance_, rtol=1e-12, atol=0
    )
