"""Emulated hosts with real network stacks: Linux network namespaces joined by a bridge.

Each "host" is a network namespace with one end of a veth pair (``eth0`` inside); the
other end is a port of a bridge in the root namespace, which holds the subnet's first
address so the test process (the client) reaches every host. The dask scheduler runs in
a namespace of its own, each host runs its own ``dask worker`` processes (``ip netns
exec``), and the data live in moto's S3 server in a namespace of its own. Every link is
capped both ways with ``tc qdisc … tbf`` (egress of the bridge port shapes what enters
the host, egress of ``eth0`` what leaves it), so bytes that cross the network cost what
they cost.

Faults: :meth:`Hosts.partition` sets a host's link down (its processes live on,
unreachable); :meth:`Hosts.kill_host` SIGKILLs every process in its namespace (``ip
netns pids``, so the children of a nanny go too); :meth:`Hosts.restore` brings a host
back with fresh workers.

Names carry the pid of the test process and a counter, so parallel runs never meet; the
subnet is a 10.x.y.0/24 that no interface or route of the root namespace uses.
Everything made is removed by :meth:`Hosts.close` (also when starting fails half-way),
and namespaces left by a killed earlier run (its pid gone) are swept when a new run
starts.

Needs root and iproute2 with ``tc``: :func:`unavailable` says why not, for a skip.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .processes import wait_or_kill

REPO = Path(__file__).resolve().parents[2]

#: every namespace made here is named ``PREFIX<pid>-<n>-<role>``
PREFIX = "spca-"
_COUNTER = itertools.count()
_PROBED: list[str | None] = []

#: dask settings of every process (scheduler, workers, and the client through
#: ``dask_config``) so that a host that drops off the network is noticed in seconds, not
#: the defaults' 30 s (``comm.timeouts``) and 5 minutes (``scheduler.worker-ttl``); the
#: scheduler checks the TTL once per TTL and allows at least 10 heartbeats (0.5 s each
#: for a few workers); the TCP timeout (keepalive probes and TCP_USER_TIMEOUT) may not
#: be under 11 s
FAST_FAILURE = {
    # 5 s removed every worker of a loaded machine (load 16 on 2 cores) whose
    # scheduler's event loop stalled for 6 s: with no nanny they died and the fit waited
    # for ever
    "distributed.scheduler.worker-ttl": "10s",
    "distributed.comm.timeouts.connect": "5s",
    "distributed.comm.timeouts.tcp": "12s",
    "distributed.comm.retry.count": 1,
}


def _env_key(key: str) -> str:
    return "DASK_" + "__".join(p.upper().replace("-", "_") for p in key.split("."))


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode:
        raise RuntimeError(
            f"{' '.join(argv)} failed ({proc.returncode}): "
            f"{proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def unavailable() -> str | None:
    """Why emulated hosts cannot be made here (None if they can): not root, no
    ``ip``/``tc``, or the kernel refuses a namespace. Probed once per process."""
    if _PROBED:
        return _PROBED[0]
    reason = None
    if sys.platform != "linux":
        reason = "emulated hosts need Linux network namespaces"
    elif os.geteuid() != 0:
        reason = (
            "emulated hosts need root (ip netns, veth, bridge, tc); "
            "CI runs them as root"
        )
    elif not (shutil.which("ip") and shutil.which("tc")):
        reason = "emulated hosts need iproute2's ip and tc"
    else:
        probe = f"{PREFIX}probe-{os.getpid()}"
        made = _run("ip", "netns", "add", probe, check=False)
        if made.returncode:
            reason = f"ip netns add failed: {made.stderr.strip()}"
        else:
            _run("ip", "netns", "del", probe, check=False)
    _PROBED.append(reason)
    return reason


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> None:
    """Remove namespaces and bridges left by runs whose process is gone (a SIGKILLed
    pytest cannot clean up after itself)."""
    names = _run("ip", "netns", "list", check=False).stdout.split()
    for name in names:
        m = re.match(rf"{re.escape(PREFIX)}(\d+)-", name)
        if m and not _pid_alive(int(m.group(1))):
            _kill_namespace(name)
            _run("ip", "netns", "del", name, check=False)
    links = _run("ip", "-o", "link", "show", "type", "bridge", check=False).stdout
    for m in re.finditer(r"^\d+: (sp([0-9a-z]+)x[0-9a-z]+b)[:@]", links, re.M):
        if not _pid_alive(int(m.group(2), 36)):
            _run("ip", "link", "del", m.group(1), check=False)


def _kill_namespace(ns: str) -> list[int]:
    """SIGKILL every process in namespace ``ns``; return their pids."""
    out = _run("ip", "netns", "pids", ns, check=False).stdout.split()
    pids = [int(p) for p in out]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


def _pick_subnet(seed: int) -> str:
    """A 10.x.y.0/24 (as ``"10.x.y"``) that no address or route of this namespace
    uses."""
    used = _run("ip", "-4", "-o", "addr", "show", check=False).stdout
    used += _run("ip", "-4", "route", "show", "table", "all", check=False).stdout
    for i in range(4096):
        h = (seed * 2654435761 + i * 40503) % (150 * 256)
        net = f"10.{100 + h // 256}.{h % 256}"
        if not re.search(rf"\b{re.escape(net)}\.", used):
            return net
    raise RuntimeError("no free 10.x.y.0/24 subnet for the emulated hosts")


@dataclass
class Link:
    """A tbf cap: ``rate`` in tc's units (e.g. ``"200mbit"``; None = uncapped)."""

    rate: str | None = "1gbit"
    burst: str = (
        "256kb"  # at least one GSO packet (64 KiB) so large sends are not dropped
    )
    latency: str = (
        "100ms"  # how long a packet may wait in the queue before it is dropped
    )


@dataclass
class Host:
    """One emulated host: its namespace, address, bridge port and the processes in
    it."""

    role: str
    ns: str
    ip: str
    port: str  # the veth end on the bridge (root namespace)
    link: Link
    procs: list[subprocess.Popen] = field(default_factory=list)
    workers: list[str] = field(
        default_factory=list
    )  # worker names, as the scheduler knows


class Hosts:
    """``n_hosts`` emulated hosts with ``workers_per_host`` ``dask worker`` processes
    each, a scheduler host and an S3 store host, all on one bridge.

    Parameters
    ----------
    n_hosts, workers_per_host
        Worker hosts, and ``dask worker`` processes on each (one thread each, no nanny:
        a killed worker stays dead, like a lost node).
    links
        A :class:`Link` per worker host (or one for all); ``scheduler_link``,
        ``store_link`` those of the scheduler's and the store's hosts.
    workdir
        Logs, scheduler file and worker directories (namespaces share the file system).
    memory_limit
        Of each worker.

    Attributes: ``scheduler_address``, ``storage_options`` (s3fs options that reach the
    store from any namespace, with short timeouts), ``hosts`` (worker hosts),
    ``scheduler``, ``store``.
    """

    S3_PORT = 5000
    SCHEDULER_PORT = 8786

    def __init__(
        self,
        n_hosts: int = 3,
        *,
        workers_per_host: int = 1,
        links: Link | list[Link] | None = None,
        scheduler_link: Link | None = None,
        store_link: Link | None = None,
        workdir=None,
        memory_limit: str = "1GiB",
        bucket: str = "scalepca-hosts",
    ):
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        sweep_stale()
        pid, n = os.getpid(), next(_COUNTER)
        self.tag = f"{pid}-{n}"
        self._short = (
            f"sp{_b36(pid)}x{_b36(n)}"  # interface names: at most 15 characters
        )
        self.bridge = f"{self._short}b"
        self.net = _pick_subnet(pid * 64 + n)
        self.workdir = (
            Path(workdir or os.environ.get("TMPDIR", "/tmp")) / f"hosts-{self.tag}"
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.memory_limit = memory_limit
        self.workers_per_host = workers_per_host
        self.bucket = bucket
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), os.environ.get("PYTHONPATH", "")]
            ).rstrip(os.pathsep),
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            **{_env_key(k): str(v) for k, v in FAST_FAILURE.items()},
        }
        if links is None or isinstance(links, Link):
            links = [links or Link()] * n_hosts
        self.hosts: list[Host] = []
        self.scheduler: Host | None = None
        self.store: Host | None = None
        self._logs = []
        self._bridge_made = False
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            self._bridge_made = True
            _run("ip", "addr", "add", f"{self.net}.1/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            self.scheduler = self._make_host("s", 2, scheduler_link or Link())
            self.store = self._make_host("o", 3, store_link or Link())
            for i, link in enumerate(links):
                self.hosts.append(self._make_host(f"h{i}", 10 + i, link))
            self._start_store()
            self._start_scheduler()
            for host in self.hosts:
                self._start_workers(host)
        except BaseException:
            self.close()
            raise

    # -- making the network ------------------------------------------------------------
    def _make_host(self, role: str, octet: int, link: Link) -> Host:
        ns = f"{PREFIX}{self.tag}-{role}"
        host = Host(role, ns, f"{self.net}.{octet}", f"{self._short}{role}", link)
        _run("ip", "netns", "add", ns)
        peer = f"{self._short}{role}n"
        _run("ip", "link", "add", host.port, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", ns)
        _run("ip", "-n", ns, "link", "set", peer, "name", "eth0")
        _run("ip", "-n", ns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "link", "set", host.port, "master", self.bridge)
        _run("ip", "link", "set", host.port, "up")
        self.set_link(host, link, "add")
        return host

    def set_link(self, host: Host, link: Link, how: str = "replace") -> None:
        """Cap ``host``'s link both ways at ``link`` (``how``: tc's add or replace)."""
        if not link.rate:
            return
        tbf = [
            "root",
            "tbf",
            "rate",
            link.rate,
            "burst",
            link.burst,
            "latency",
            link.latency,
        ]
        _run("tc", "qdisc", how, "dev", host.port, *tbf)  # into the host
        _run(
            "ip", "netns", "exec", host.ns, "tc", "qdisc", how, "dev", "eth0", *tbf
        )  # out
        host.link = link

    def popen(self, host: Host, argv: list[str], name: str) -> subprocess.Popen:
        """Start ``argv`` inside ``host``'s namespace (its own session, output to a
        log)."""
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115
        self._logs.append(log)
        proc = subprocess.Popen(
            ["ip", "netns", "exec", host.ns, *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=str(self.workdir),
            start_new_session=True,
        )
        host.procs.append(proc)
        return proc

    def _wait_port(
        self,
        ip: str,
        port: int,
        proc: subprocess.Popen,
        what: str,
        timeout: float = 120.0,
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((ip, port), timeout=1).close()
                return
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{what} exited ({proc.returncode}) "
                    f"before listening; see {self.workdir}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{what} did not listen on {ip}:{port} within {timeout} s"
                )
            time.sleep(0.1)

    def _start_store(self) -> None:
        exe = Path(sys.executable).with_name("moto_server")
        proc = self.popen(
            self.store,
            [str(exe), "-H", self.store.ip, "-p", str(self.S3_PORT)],
            "store",
        )
        self._wait_port(self.store.ip, self.S3_PORT, proc, "moto_server")
        self.storage_options = {
            "key": "testing",
            "secret": "testing",
            "endpoint_url": f"http://{self.store.ip}:{self.S3_PORT}",
            "client_kwargs": {"region_name": "us-east-1"},
            # an unreachable store fails within seconds (botocore: 60 s and 4 retries)
            "config_kwargs": {
                "connect_timeout": 2,
                "read_timeout": 5,
                "retries": {"max_attempts": 2, "mode": "standard"},
            },
        }
        import boto3

        boto3.client(
            "s3",
            endpoint_url=self.storage_options["endpoint_url"],
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=self.bucket)

    def _start_scheduler(self) -> None:
        sched_file = self.workdir / "scheduler.json"
        proc = self.popen(
            self.scheduler,
            [
                str(Path(sys.executable).with_name("dask")),
                "scheduler",
                "--host",
                self.scheduler.ip,
                "--port",
                str(self.SCHEDULER_PORT),
                "--no-dashboard",
                "--scheduler-file",
                str(sched_file),
            ],
            "scheduler",
        )
        self._wait_port(self.scheduler.ip, self.SCHEDULER_PORT, proc, "dask scheduler")
        self.scheduler_address = f"tcp://{self.scheduler.ip}:{self.SCHEDULER_PORT}"

    def _start_workers(self, host: Host) -> None:
        host.workers = []
        for j in range(self.workers_per_host):
            name = f"{host.role}-w{j}-{len(host.procs)}"
            self.popen(
                host,
                [
                    str(Path(sys.executable).with_name("dask")),
                    "worker",
                    self.scheduler_address,
                    "--host",
                    host.ip,
                    "--nthreads",
                    "1",
                    "--memory-limit",
                    self.memory_limit,
                    "--no-nanny",
                    "--no-dashboard",
                    "--name",
                    name,
                    "--local-directory",
                    str(self.workdir / name),
                    "--death-timeout",
                    "60",
                ],
                name,
            )
            host.workers.append(name)

    # -- using it ----------------------------------------------------------------------
    @property
    def worker_names(self) -> list[str]:
        return [w for h in self.hosts for w in h.workers]

    def host_of(self, worker_name: str) -> Host:
        return next(h for h in self.hosts if worker_name in h.workers)

    def client(self, timeout: float = 120.0):
        """A ``distributed.Client`` of this cluster, once every worker has joined."""
        from distributed import Client

        client = Client(self.scheduler_address, timeout=timeout)
        self.wait_for_workers(client, timeout)
        return client

    def wait_for_workers(self, client, timeout: float = 120.0) -> None:
        """Until the scheduler lists exactly the live workers of the live hosts."""
        want = set(self.worker_names)
        deadline = time.monotonic() + timeout
        while True:
            info = client.scheduler_info(n_workers=-1)["workers"]
            if {v.get("name") for v in info.values()} == want:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"workers {sorted(want)} not (only) listed after "
                    f"{timeout} s; see {self.workdir}"
                )
            time.sleep(0.1)

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def partition(self, host: Host) -> None:
        """Cut ``host`` off the network (its bridge port down); its processes live
        on."""
        _run("ip", "link", "set", host.port, "down")

    def link_up(self, host: Host) -> bool:
        out = _run("ip", "-o", "link", "show", host.port, check=False).stdout
        return "state UP" in out

    def heal(self, host: Host) -> None:
        _run("ip", "link", "set", host.port, "up")

    def kill_host(self, host: Host) -> list[int]:
        """SIGKILL every process in ``host``'s namespace, as a machine that loses
        power."""
        pids = _kill_namespace(host.ns)
        for proc in host.procs:
            if proc.poll() is None:
                proc.wait(timeout=30)
        return pids

    def restore(self, host: Host, client=None) -> None:
        """``host`` back with fresh workers (its old processes killed, its link up)."""
        self.kill_host(host)
        self.heal(host)
        if host in self.hosts:
            self._start_workers(host)
        if client is not None:
            self.wait_for_workers(client)

    def new_scheduler(self) -> None:
        """A new scheduler at the same address (the old one's processes killed, if any),
        and fresh workers on every host joined to it: a cluster restarted after its
        scheduler was lost."""
        self.kill_host(self.scheduler)
        for host in self.hosts:
            self.kill_host(host)
        self._start_scheduler()
        for host in self.hosts:
            self.heal(host)
            self._start_workers(host)

    def link_bytes(self, host: Host) -> dict[str, int]:
        """Bytes the host has sent (``tx``) and received (``rx``) on its link so far."""
        out = _run("ip", "-n", host.ns, "-j", "-s", "link", "show", "eth0").stdout
        stats = json.loads(out)[0]["stats64"]
        return {"rx": int(stats["rx"]["bytes"]), "tx": int(stats["tx"]["bytes"])}

    # -- ending it ---------------------------------------------------------------------
    def close(self) -> None:
        """Kill every process, then remove the namespaces, veths and bridge; errors of
        one step do not stop the next."""
        everyone = [
            h for h in [self.scheduler, self.store, *self.hosts] if h is not None
        ]
        for host in everyone:
            for proc in host.procs:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
        for host in everyone:
            for proc in host.procs:
                try:
                    wait_or_kill(proc, 5, group=True)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
            _kill_namespace(host.ns)  # anything that left its session
        for host in everyone:
            _run("ip", "netns", "del", host.ns, check=False)
            _run(
                "ip", "link", "del", host.port, check=False
            )  # gone with its peer, normally
        if self._bridge_made:
            _run("ip", "link", "del", self.bridge, check=False)
            self._bridge_made = False
        for log in self._logs:
            log.close()
        self._logs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- counting the tasks a fault makes the cluster run again ----------------------------
try:  # the scheduler unpickles this class by reference (the repository is on its path)
    from distributed.diagnostics.plugin import SchedulerPlugin
except ImportError:  # pragma: no cover - distributed is a test dependency
    SchedulerPlugin = object


class TaskCounter(SchedulerPlugin):
    """A scheduler plugin recording, per task key, the worker of each completion
    (``processing → memory``): a key completed twice was run again (rework)."""

    name = "scalepca-task-counter"

    def __init__(self):
        self.done: dict[str, list[str | None]] = {}
        self.scheduler = None

    async def start(self, scheduler):
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs):
        if start != "processing" or finish != "memory":
            return
        ts = self.scheduler.tasks.get(key) if self.scheduler is not None else None
        owners = (
            [ws.name for ws in ts.who_has] if ts is not None and ts.who_has else [None]
        )
        self.done.setdefault(str(key), []).append(owners[0])


def count_tasks(client, *, reset: bool = False) -> dict[str, list]:
    """What :class:`TaskCounter` recorded (registering it the first time); ``reset``
    empties it after reading."""

    def read(dask_scheduler, reset=reset):
        plugin = dask_scheduler.plugins.get(TaskCounter.name)
        if plugin is None:
            return None
        out = dict(plugin.done)
        if reset:
            plugin.done = {}
        return out

    got = client.run_on_scheduler(read)
    if got is None:
        client.register_plugin(TaskCounter())
        got = {}
    return got


def rework(done: dict[str, list]) -> int:
    """Completions beyond the first of each key."""
    return sum(len(v) - 1 for v in done.values())
