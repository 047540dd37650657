"""scalepca.connect: local, address (tcp, tls), jobqueue scripts, missing extras,
progress."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

import scalepca
from scalepca.app.cluster import connect, make_cluster, progress
from scalepca.app.config import ConfigError, load_config, validate_config

from ._terminal import assert_no_stale_characters

CONFIGS = Path(__file__).parents[1] / "configs"


@pytest.fixture(scope="module")
def local_cluster():
    """One in-process cluster shared by the tests that join an existing scheduler."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
    ) as cluster:
        yield cluster


def test_connect_local_is_a_context_manager(capsys):
    with connect(n_workers=1, threads_per_worker=1, processes=False) as client:
        assert da.ones((10, 3), chunks=5).sum().compute() == 30
        cluster = client._scalepca_cluster
        assert client.dashboard_link.startswith("http")
        from distributed import get_client

        assert get_client() is client
    out = capsys.readouterr().out
    assert f"dask dashboard at {client.dashboard_link}" in out
    assert client.status == "closed"
    assert cluster.status.name == "closed"


def test_connect_quiet_and_config_plus_kwargs(capsys):
    cfg = {"kind": "local", "n_workers": 3, "threads_per_worker": 1, "processes": False}
    with connect(cfg, n_workers=1, quiet=True) as client:
        assert (
            len(client.scheduler_info()["workers"]) == 1
        )  # kwargs override the config
    assert "dashboard" not in capsys.readouterr().out


def test_connect_rejects_bad_settings():
    with pytest.raises(ConfigError, match="'cluster.n_worker'.*n_workers"):
        connect(n_worker=2)
    with pytest.raises(ConfigError, match="'cluster.kind' 'spark' is unknown"):
        connect(kind="spark")


def test_connect_address_tcp(local_cluster, capsys):
    addr = local_cluster.scheduler_address
    with connect(address=addr) as client:  # kind inferred from address
        assert client.scheduler.address == addr
        assert da.arange(10, chunks=3).sum().compute() == 45
    with connect({"kind": "address", "address": addr}, quiet=True) as client:
        assert client.scheduler.address == addr
    # leaving the block closes the client, never the cluster it joined
    assert local_cluster.status.name == "running"


def test_connect_address_unreachable_fails_fast():
    with pytest.raises(OSError):
        connect(address="tcp://127.0.0.1:9", timeout="1s", quiet=True)


def test_connect_address_tls(tmp_path):
    pytest.importorskip("cryptography")
    from distributed import LocalCluster
    from distributed.security import Security

    sec = Security.temporary()
    files = {}
    for name in ("tls_ca_file", "tls_client_cert", "tls_client_key"):
        path = tmp_path / f"{name}.pem"
        path.write_text(getattr(sec, name))
        files[name] = str(path)
    with LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tls://",
        security=sec,
        dashboard_address=":0",
    ) as cluster:
        addr = cluster.scheduler_address
        assert addr.startswith("tls://")
        with connect(address=addr, security=files, quiet=True) as client:
            assert client.submit(lambda x: x + 1, 1).result() == 2
        with pytest.raises(ConfigError, match="TLS address"):
            connect(address=addr)


@pytest.mark.parametrize(
    "kind, module, extra",
    [
        ("slurm", "dask_jobqueue", "hpc"),
        ("kubernetes", "dask_kubernetes", "kubernetes"),
        ("gateway", "dask_gateway", "gateway"),
    ],
)
def test_missing_extra_names_it(monkeypatch, kind, module, extra):
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    kw = {"cores": 1, "memory": "1GB"} if kind == "slurm" else {}
    with pytest.raises(ImportError, match=rf"pip install 'scalepca\[{extra}\]'"):
        connect(kind=kind, **kw)


def test_batch_kind_needs_its_submit_command(monkeypatch, tmp_path):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    with pytest.raises(
        ConfigError, match="'sbatch', which is not on this machine's PATH"
    ):
        connect(kind="slurm", cores=2, memory="4GiB")


def _script(cfg_cluster) -> str:
    cluster = make_cluster(cfg_cluster)
    try:
        return cluster.job_script()
    finally:
        cluster.close()


def _gib(memory: str) -> int:
    from dask.utils import parse_bytes

    return round(parse_bytes(memory) / 2**30)


#: the lines each scheduler's job script must hold, from the config's cluster section
#: ``c``
JOB_SCRIPT_LINES = {
    "slurm": lambda c: [
        f"#SBATCH --cpus-per-task={c['cores']}",
        f"#SBATCH --mem={_gib(c['memory'])}G",
        f"#SBATCH -t {c['walltime']}",
        f"#SBATCH -p {c['queue']}",
        f"#SBATCH -A {c['account']}",
        *(f"#SBATCH {line}" for line in c["job_extra"]),
        f"--nthreads {c['cores'] // (c['processes'] or 1)}",
    ],
    "pbs": lambda c: [
        f"#PBS -l select=1:ncpus={c['cores']}:mem={_gib(c['memory'])}GB",
        f"#PBS -l walltime={c['walltime']}",
        f"#PBS -q {c['queue']}",
        f"#PBS -A {c['account']}",
        f"--nworkers {c['processes']}",
    ],
}


@pytest.mark.parametrize("scheduler", sorted(JOB_SCRIPT_LINES))
def test_job_script_from_config(scheduler):
    pytest.importorskip("dask_jobqueue")
    c = load_config(CONFIGS / f"{scheduler}.yaml")["cluster"]
    script = _script(c)
    for line in JOB_SCRIPT_LINES[scheduler](c):
        assert line in script
    if scheduler == "pbs":
        assert c["adaptive"] == {"minimum_jobs": 1, "maximum_jobs": 8}


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("sge", ["#$ -q short", "#$ -l h_rt=00:30:00", "#$ -P proj"]),
        ("lsf", ["#BSUB -q short", "#BSUB -W 00:30", "#BSUB -n 4", '#BSUB -P "proj"']),
    ],
)
def test_other_batch_systems_scripts(kind, expected):
    pytest.importorskip("dask_jobqueue")
    script = _script(
        {
            "kind": kind,
            "cores": 4,
            "memory": "8GiB",
            "walltime": "00:30:00" if kind == "sge" else "00:30",
            "queue": "short",
            "account": "proj",
        }
    )
    for line in expected:
        assert line in script, script


def test_htcondor_script():
    pytest.importorskip("dask_jobqueue")
    script = _script({"kind": "htcondor", "cores": 2, "memory": "4GiB", "disk": "1GiB"})
    assert "RequestCpus = MY.DaskWorkerCores" in script
    assert "MY.DaskWorkerCores = 2" in script


class _Terminal(io.StringIO):
    """Captured output that says it is a terminal, as a user's console does."""

    def isatty(self) -> bool:
        return True


def test_progress_bar_per_pass(rng):
    X = da.from_array(rng.standard_normal((400, 6)), chunks=100)
    out = _Terminal()
    with connect(
        n_workers=1, threads_per_worker=2, processes=False, quiet=True
    ) as client:
        with progress(stream=out, grace=0):
            scalepca.PCA(2, svd_solver="tsqr").fit(X)
            # persist keeps the blocks on the workers (no gathering through the bar)
            (Xp,) = dask.persist(X)
            from distributed import Future

            assert all(
                isinstance(v, Future) for v in dict(Xp.__dask_graph__()).values()
            )
        text = out.getvalue()
        # one bar per pass, labelled with the fit and the pass, counting the 4 row
        # chunks
        final = [ln.rsplit("\r", 1)[-1] for ln in text.split("\n") if ln]
        # (tqdm pads a rate below 10 to its width: "<00:00,  5.42 chunks/s")
        assert re.match(
            r"PCA pass 1 of 2 \(moments\): 100%\|.*\| 4/4 chunks \[[\d:]+<[\d:]+, +"
            r"[\d,.]+ chunks/s\]",
            final[0],
        ), final
        assert (
            final[1].startswith("PCA pass 2 of 2 (tsqr): 100%|")
            and "/5 chunks" in final[1]
        )
        assert len(final) == 2, final
        assert_no_stale_characters(text)
        # passes shorter than the grace period draw no bar, only the pass line
        short = _Terminal()
        with progress(stream=short, grace=60):
            scalepca.PCA(2).fit(X)
        assert (
            "%|" not in short.getvalue()
            and "PCA pass 1 of 1 (moments): 4 chunks in" in (short.getvalue())
        )
        quiet = io.StringIO()
        with progress(False, stream=quiet):
            scalepca.PCA(2).fit(X)
        assert quiet.getvalue() == ""
        assert client.status == "running"


def test_progress_in_a_log_is_one_line_per_pass(rng):
    """Not a terminal (batch job, CI, pipe): no redrawn bar frames, one line per
    pass."""
    X = da.from_array(rng.standard_normal((400, 6)), chunks=100)
    log = io.StringIO()
    with connect(n_workers=1, threads_per_worker=2, processes=False, quiet=True):
        with progress(stream=log, grace=0):
            scalepca.PCA(2, svd_solver="tsqr").fit(X)
    text = log.getvalue()
    assert "\r" not in text and "%|" not in text, text
    lines = text.splitlines()
    # each line names the fit and the pass it reports
    assert re.fullmatch(
        r"  \[[\d:]{8}\] PCA pass 1 of 2 \(moments\): 4 chunks in [\d.]+ s "
        r"\([\d,.]+ chunks/s\)",
        lines[0],
    ), lines
    assert (
        lines[1].startswith("  [")
        and "] PCA pass 2 of 2 (tsqr): 5 chunks in " in lines[1]
    )
    assert len(lines) == 2, text


def test_progress_of_a_pass_cut_short(rng):
    """A pass that stops (Ctrl+C, a block that fails): its bar stays where it stopped
    and a log says it stopped; neither claims the pass's chunks were all read."""

    def fails_at_the_third(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            raise OSError("block 3 cannot be read")
        return block

    X = da.from_array(rng.standard_normal((400, 6)), chunks=100).map_blocks(
        fails_at_the_third, dtype=float
    )
    for stream in (_Terminal(), io.StringIO()):
        with (
            dask.config.set(scheduler="synchronous"),
            pytest.raises(OSError, match="cannot be read"),
            progress(stream=stream, client=None, grace=0),
        ):
            scalepca.PCA(2).fit(X)
        last = stream.getvalue().rstrip("\n").split("\n")[-1]
        if isinstance(stream, _Terminal):
            counted = re.search(r"\| (\d)/4 chunks", last.rsplit("\r", 1)[-1])
            assert counted and int(counted.group(1)) < 4, last
        else:
            said = r"  \[[\d:]{8}\] PCA pass 1 of 1 \(moments\): stopped after [\d.]+ s"
            assert re.fullmatch(said, last), last


def test_progress_without_cluster_uses_dask_callback(rng):
    X = da.from_array(rng.standard_normal((200, 4)), chunks=50)
    out = _Terminal()
    with (
        dask.config.set(scheduler="threads"),
        progress(stream=out, client=None, grace=0),
    ):
        scalepca.PCA(2).fit(X)
    assert (
        "PCA pass 1 of 1 (moments): 100%|" in out.getvalue()
        and "4/4 chunks" in out.getvalue()
    )
    log = io.StringIO()
    with (
        dask.config.set(scheduler="threads"),
        progress(stream=log, client=None, grace=0),
    ):
        scalepca.PCA(2).fit(X)
    assert "\r" not in log.getvalue() and " chunks/s)" in log.getvalue(), log.getvalue()
    assert np.isfinite(scalepca.PCA(2).fit(X).explained_variance_).all()


def test_chunk_keys_count_blocks_read():
    """A bar counts the tasks that each read one block, not the graph's bookkeeping."""
    import zarr

    from scalepca.app.progress import chunk_keys

    generated = da.ones((400, 6), chunks=(100, 6))
    assert len(chunk_keys((generated.T @ generated).sum())) == 4
    z = zarr.create_array(
        zarr.storage.MemoryStore(), shape=(400, 6), chunks=(50, 6), dtype="f8"
    )
    read = da.from_zarr(z)  # one shared handle of the array, read by 8 block tasks
    assert len(chunk_keys(read.sum())) == 8


class _FakeCluster:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls = []

    def scale(self, *args, **kwargs):
        self.calls.append(("scale", args, kwargs))

    def adapt(self, **kwargs):
        self.calls.append(("adapt", (), kwargs))


def test_kubernetes_wiring(monkeypatch):
    """dask-kubernetes gets the configured settings. Faked: its operator needs a
    Kubernetes API server and a container runtime, and neither can run on this machine
    (Dask Gateway, the other cloud kind, runs for real in tests/test_gateway.py)."""
    import types

    from scalepca.app.cluster._jobs import _scale

    kube = types.ModuleType("dask_kubernetes.operator")
    kube.KubeCluster = _FakeCluster
    monkeypatch.setitem(
        sys.modules, "dask_kubernetes", types.ModuleType("dask_kubernetes")
    )
    monkeypatch.setitem(sys.modules, "dask_kubernetes.operator", kube)
    cfg = {
        "kind": "kubernetes",
        "name": "pca",
        "image": "ghcr.io/x/scalepca:1",
        "n_workers": 4,
        "resources": {"limits": {"memory": "8Gi"}},
    }
    cluster = make_cluster(cfg)
    assert cluster.kwargs == {
        "n_workers": 4,
        "name": "pca",
        "image": "ghcr.io/x/scalepca:1",
        "resources": {"limits": {"memory": "8Gi"}},
    }
    adaptive = make_cluster({**cfg, "adaptive": {"minimum": 1, "maximum": 6}})
    assert adaptive.kwargs["n_workers"] == 0
    _scale(adaptive, {"kind": "kubernetes", "adaptive": {"minimum": 1, "maximum": 6}})
    assert adaptive.calls == [("adapt", (), {"minimum": 1, "maximum": 6})]


# -- cluster.monitoring: Dask's housekeeping on the processes scalepca starts ----------
def _intervals_ms(dask_worker=None, dask_scheduler=None):
    """Periods (ms) of a server's tick, system monitor and (workers) profiler
    callbacks."""
    server = dask_worker if dask_worker is not None else dask_scheduler
    cbs = server.periodic_callbacks
    return {
        name: cbs[name].callback_time
        for name in ("tick", "monitor", "profile")
        if name in cbs
    }


def test_monitoring_light_reaches_scheduler_and_worker_processes():
    # worker processes (not threads): the settings must travel through the nanny
    with connect(
        n_workers=1, threads_per_worker=1, processes=True, quiet=True
    ) as client:
        (worker,) = client.run(_intervals_ms).values()
        scheduler = client.run_on_scheduler(_intervals_ms)
    assert worker == {"tick": 1000, "monitor": 2000, "profile": 100}
    assert scheduler == {"tick": 1000, "monitor": 2000}
    # nothing leaks into this process's own Dask config
    assert dask.config.get("distributed.admin.tick.interval") == "20ms"


def _malloc_env():
    import os

    return {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}


def test_local_workers_reuse_heap_memory_unless_the_users_dask_config_says_otherwise(
    monkeypatch,
):
    """Worker processes get glibc settings that reuse freed arrays up to memory_limit
    / 64, at most 32 MiB (Dask's trim threshold alone maps every array over 128 KiB
    afresh); a user's setting wins, and nothing stays behind in this process: neither
    in its Dask config nor in its environment (a nanny writes its workers'
    environment into ``os.environ``, and the next nanny of any cluster would take it
    over its config)."""
    for key in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(key, raising=False)
    with connect(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        memory_limit="4GiB",
        quiet=True,
    ) as client:
        (env,) = client.run(_malloc_env).values()
        assert _malloc_env() == {}
        # a replaced worker gets them too; its nanny writes them here again, until the
        # cluster closes (a lost worker under 'scalepca run' left them in this process,
        # and the next cluster's 600 MiB workers ran out of memory)
        client.restart_workers(list(client.scheduler_info()["workers"]))
        (env_replaced,) = client.run(_malloc_env).values()
    assert _malloc_env() == {}
    assert (
        env
        == env_replaced
        == {
            "MALLOC_TRIM_THRESHOLD_": str(64 * 2**20),
            "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
        }
    )
    # smaller workers keep less free heap: the thresholds follow the memory limit
    with connect(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        memory_limit="640MiB",
        quiet=True,
    ) as client:
        (env,) = client.run(_malloc_env).values()
    assert env == {
        "MALLOC_TRIM_THRESHOLD_": str(20 * 2**20),
        "MALLOC_MMAP_THRESHOLD_": str(10 * 2**20),
    }
    assert (
        dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_")
        == 65536
    )
    key = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
    with (
        dask.config.set({key: 4096}),
        connect(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            memory_limit="4GiB",
            quiet=True,
        ) as client,
    ):
        (env,) = client.run(_malloc_env).values()
    assert env == {
        "MALLOC_TRIM_THRESHOLD_": "4096",
        "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
    }


def test_monitoring_dask_keeps_dasks_own_intervals():
    with connect(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        quiet=True,
        monitoring="dask",
    ) as client:
        (worker,) = client.run(_intervals_ms).values()
    assert worker == {"tick": 20, "monitor": 500, "profile": 10}


def test_monitoring_light_keeps_what_the_users_dask_config_changed():
    with (
        dask.config.set({"distributed.worker.profile.interval": "30ms"}),
        connect(
            n_workers=1, threads_per_worker=1, processes=False, quiet=True
        ) as client,
    ):
        (worker,) = client.run(_intervals_ms).values()
    assert worker == {"tick": 1000, "monitor": 2000, "profile": 30}


def test_monitoring_bad_value_names_the_key():
    with pytest.raises(
        ConfigError, match="'cluster.monitoring' is 'off'; allowed: light, dask"
    ):
        connect(monitoring="off")
    with pytest.raises(ConfigError, match="'cluster.monitoring' is 'quiet'"):
        validate_config(
            {
                "data": {"path": "x.zarr"},
                "model": {"method": "pca"},
                "cluster": {
                    "kind": "slurm",
                    "cores": 1,
                    "memory": "1GiB",
                    "monitoring": "quiet",
                },
            }
        )


def test_monitoring_light_in_the_batch_job_environment():
    pytest.importorskip("dask_jobqueue")
    base = {
        "kind": "slurm",
        "cores": 1,
        "memory": "1GiB",
        "job_script_prologue": ["export DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=200ms"],
    }
    script = _script(base)
    lines = script.splitlines()
    light = [
        "export DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=1s",
        "export DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL=2s",
        "export DASK_DISTRIBUTED__WORKER__PROFILE__INTERVAL=100ms",
    ]
    at = [lines.index(line) for line in light]
    # before the user's own prologue, so a line of theirs overrides it
    assert at == sorted(at) and max(at) < lines.index(base["job_script_prologue"][0])
    assert "DASK_DISTRIBUTED" not in _script(
        {**base, "monitoring": "dask", "job_script_prologue": None}
    )
