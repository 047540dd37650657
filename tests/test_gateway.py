"""scalepca on a real Dask Gateway: ``dask-gateway-server`` on loopback with its local
backend and a password (the ``gateway`` fixture, tests/support/gateway.py).

* ``scalepca run`` of a config with ``cluster.kind: gateway`` gives the answer of the
  same config on a ``LocalCluster``; the password, given only in Dask's config
  (environment), is in none of the outputs nor the report.
* ``cluster_options``, ``n_workers`` and ``adaptive`` reach the gateway: read back from
  the server's report of the cluster, from the scheduler it started and from its
  workers.
* The gateway cluster is shut down when the run ends, also when it fails.

Skips (saying what to install) without dask-gateway-server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dask
import numpy as np
import pytest
import yaml
import zarr

from .support.reliability import REPO

pytestmark = [pytest.mark.distributed, pytest.mark.xdist_group("gateway")]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """A ``dask-gateway-server`` on loopback for this module, ended at its end (also
    when a test fails); every test leaves no cluster of its own running."""
    from .support.gateway import LoopbackGateway, why_not

    reason = why_not()
    if reason:
        pytest.skip(reason)
    server = LoopbackGateway(tmp_path_factory.mktemp("gateway"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _store(path: Path) -> str:
    rng = np.random.default_rng(7)
    X = rng.standard_normal((3000, 5)) @ rng.standard_normal((5, 24)) * 3
    X += rng.standard_normal(X.shape)
    z = zarr.create_array(str(path), shape=X.shape, chunks=(500, 24), dtype="f8")
    z[...] = X
    return str(path)


def _cli(args, cwd, env_extra, timeout=300) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        **env_extra,
    }
    return subprocess.run(
        [sys.executable, "-m", "scalepca.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(cwd),
        timeout=timeout,
    )


def _gateway_section(**over) -> dict:
    """The cluster section of a user's config: no address, no password (both come from
    Dask's config, here its environment variables)."""
    return {
        "kind": "gateway",
        "n_workers": 2,
        "cluster_options": {"worker_memory_mib": 700, "tag": "from-the-config"},
        **over,
    }


def _files_containing(root: Path, secret: str) -> list[str]:
    needle = secret.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_run_on_the_gateway_equals_local(gateway, tmp_path):
    from scalepca import load

    data = _store(tmp_path / "data.zarr")
    runs = {
        "local": {
            "kind": "local",
            "n_workers": 2,
            "threads_per_worker": 1,
            "memory_limit": "1GiB",
        },
        "gateway": _gateway_section(),
    }
    fitted, outputs = {}, {}
    for name, cluster in runs.items():
        outputs[name] = tmp_path / name
        # one task per store chunk (no coalescing): the 6 blocks' partials cross workers
        cfg = {
            "data": {"path": data, "task_size": None},
            "model": {"method": "pca", "n_components": 4},
            "cluster": cluster,
            "progress": False,
            "output": {
                "store": str(outputs[name]),
                "model": True,
                "scores": True,
                "report": True,
            },
        }
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        t0 = time.monotonic()
        res = _cli(
            ["run", str(path)], tmp_path, gateway.env() if name == "gateway" else {}
        )
        print(f"{name}: scalepca run took {time.monotonic() - t0:.1f} s")
        assert res.returncode == 0, res.stderr[-3000:]
        assert gateway.password not in res.stdout + res.stderr
        fitted[name] = load(str(outputs[name] / "model.zarr"))
    # the run shut its cluster down as it ended (the server's idle timeout is 10
    # minutes)
    gateway.wait_no_clusters(timeout=30)
    local, remote = fitted["local"], fitted["gateway"]
    np.testing.assert_allclose(
        remote.explained_variance_, local.explained_variance_, rtol=1e-12
    )
    signs = np.sign(np.sum(local.components_ * remote.components_, axis=1))
    np.testing.assert_allclose(
        remote.components_ * signs[:, None], local.components_, rtol=0, atol=1e-10
    )
    np.testing.assert_allclose(remote.mean_, local.mean_, rtol=0, atol=1e-12)
    # the password is nowhere in what the run wrote: model attributes, scores, report
    report = outputs["gateway"] / "report.html"
    assert report.is_file()
    assert "gateway" in report.read_text()  # the report does describe the cluster
    assert _files_containing(outputs["gateway"], gateway.password) == []
    # the server made the cluster with the config's options
    (made,) = [
        c
        for c in gateway.clusters(status="stopped")
        if c.options.get("tag") == "from-the-config"
    ]
    assert made.options["worker_memory_mib"] == 700


def _scheduler_adaptive(dask_scheduler):
    service = dask_scheduler.services["gateway"]
    return service.minimum, service.maximum, service.adapt_task is not None


def _worker_side(dask_worker):
    from .support.gateway import TAG_VARIABLE

    return (
        dask_worker.memory_manager.memory_limit,
        dask_worker.state.nthreads,
        os.environ.get(TAG_VARIABLE),
    )


def test_options_and_scaling_reach_the_gateway(gateway):
    from scalepca import connect

    # the credentials and addresses as a user's Dask config
    # (~/.config/dask/gateway.yaml) has them; the config section names only what to
    # start
    settings = {
        "gateway.address": gateway.address,
        "gateway.proxy-address": gateway.proxy_address,
        "gateway.auth.type": "basic",
        "gateway.auth.kwargs": {"username": "root", "password": gateway.password},
    }
    options = {"worker_memory_mib": 640, "worker_cores": 2, "tag": "fixed"}
    with dask.config.set(settings):
        with connect(_gateway_section(cluster_options=options), quiet=True) as client:
            client.wait_for_workers(2, timeout=120)
            (report,) = gateway.clusters()
            assert report.options == options
            sides = set(client.run(_worker_side).values())
            assert sides == {(640 * 2**20, 2, "fixed")}
            assert client.run_on_scheduler(_scheduler_adaptive)[2] is False
        gateway.wait_no_clusters(timeout=30)
        adaptive = _gateway_section(
            adaptive={"minimum": 1, "maximum": 3}, cluster_options={"tag": "adaptive"}
        )
        with connect(adaptive, quiet=True) as client:
            # the gateway's scheduler runs the adaptive loop, with the config's bounds
            assert client.run_on_scheduler(_scheduler_adaptive) == (1, 3, True)
            client.wait_for_workers(1, timeout=120)  # the minimum, with no work
            assert {side[2] for side in client.run(_worker_side).values()} == {
                "adaptive"
            }
    gateway.wait_no_clusters(timeout=30)


def test_a_failed_run_shuts_its_gateway_cluster_down(gateway, tmp_path):
    data = Path(_store(tmp_path / "data.zarr"))
    # a chunk that cannot be decoded: the metadata is right, so the run starts its
    # cluster and fails in the fit
    chunk = data / "c" / "3" / "0"  # zarr 3's key of block (3, 0)
    assert chunk.is_file()
    chunk.write_bytes(b"not a chunk")
    cfg = {
        "data": {"path": str(data), "task_size": None},
        "model": {"method": "pca", "n_components": 2},
        "cluster": _gateway_section(),
        "progress": False,
        "output": {"store": str(tmp_path / "out"), "model": True},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = _cli(["run", str(path)], tmp_path, gateway.env())
    assert res.returncode != 0
    assert gateway.password not in res.stdout + res.stderr
    gateway.wait_no_clusters(timeout=30)
    assert not (tmp_path / "out" / "model.zarr").exists()
