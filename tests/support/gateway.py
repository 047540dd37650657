"""A Dask Gateway server on loopback for the tests: ``dask-gateway-server`` (the server
JupyterHub and Pangeo deployments run) with its local backend and password
authentication.

:class:`LoopbackGateway` writes a ``dask_gateway_config.py`` in a tmp folder and starts
``dask-gateway-server -f`` as a child process on free loopback ports: its proxy answers
HTTP (the API the ``dask_gateway`` client calls) on one port and the schedulers' TLS
traffic on another. Clusters are local processes started with this venv's ``dask
scheduler`` and ``dask worker`` (``UnsafeLocalBackend``: as the server's own user; the
per-user ``LocalBackend`` fails to start any cluster in dask-gateway-server 2026.3.0 —
its ``setup_working_directory`` extends the list of paths to chown with the letters of a
file name, so ``os.chown('t')`` raises ``FileNotFoundError``). ``SimpleAuthenticator``
takes any user name with the one password. ``stop`` ends the server, which stops every
cluster still running, and then its process group.

The server offers three cluster options, each read on the workers' side by the tests:
``worker_cores`` (threads per worker), ``worker_memory_mib`` (each worker's memory
limit) and ``tag`` (an environment variable ``SCALEPCA_GATEWAY_TAG`` of the scheduler
and workers).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from .processes import free_ports, wait_or_kill
from .reliability import REPO

HOW_TO_ENABLE = "pip install 'dask-gateway-server>=2026.3.0' 'dask-gateway>=2026.3.0'"
#: the environment variable the workers see the ``tag`` cluster option in
TAG_VARIABLE = "SCALEPCA_GATEWAY_TAG"


def why_not() -> str | None:
    """Why a loopback gateway cannot start here (None if it can)."""
    for module in ("dask_gateway_server", "dask_gateway"):
        try:
            __import__(module)
        except ImportError:
            return f"Dask Gateway tests need {module} ({HOW_TO_ENABLE})"
    if _server_command() is None:
        return f"dask-gateway-server is not next to {sys.executable} ({HOW_TO_ENABLE})"
    return None


def _server_command() -> str | None:
    return shutil.which("dask-gateway-server", path=str(Path(sys.executable).parent))


def _config(http: int, tcp: int, password: str, clusters: Path) -> str:
    dask = str(Path(sys.executable).parent / "dask")
    # the processes the backend starts get only the variables it passes on: this
    # worktree's scalepca, one BLAS thread per worker (2 cores shared by many processes)
    environment = {
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    return textwrap.dedent(f"""\
        from dask_gateway_server.options import Integer, Options, String

        c.DaskGateway.backend_class = (
            "dask_gateway_server.backends.local.UnsafeLocalBackend")
        c.DaskGateway.authenticator_class = (
            "dask_gateway_server.auth.SimpleAuthenticator")
        c.SimpleAuthenticator.password = {password!r}
        c.Proxy.address = "127.0.0.1:{http}"
        c.Proxy.tcp_address = "127.0.0.1:{tcp}"
        c.LocalBackend.clusters_directory = {str(clusters)!r}
        c.ClusterConfig.scheduler_cmd = [{dask!r}, "scheduler"]
        c.ClusterConfig.worker_cmd = [{dask!r}, "worker"]
        c.ClusterConfig.environment = {environment!r}
        c.ClusterConfig.idle_timeout = 600


        def options_handler(options):
            return {{"worker_cores": options.worker_cores,
                     "worker_memory": "%dM" % options.worker_memory_mib,
                     "environment": {{**{environment!r},
                                      {TAG_VARIABLE!r}: options.tag}}}}


        c.Backend.cluster_options = Options(
            Integer("worker_cores", 1, min=1, max=2, label="Threads per worker"),
            Integer("worker_memory_mib", 1024, min=256, max=4096,
                    label="Worker memory (MiB)"),
            String("tag", "none", label="A tag the workers see"),
            handler=options_handler,
        )
        """)


class LoopbackGateway:
    """``dask-gateway-server`` on 127.0.0.1, configured and logging under ``root``.

    Attributes
    ----------
    address, proxy_address : str
        The HTTP address of the gateway API and the ``gateway://`` address of its
        scheduler proxy (the ``cluster.address`` and ``cluster.proxy_address`` of a
        config).
    password : str
        The one password of every user (random per server).
    log : Path
        The server's log.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.password = "gw-" + secrets.token_hex(12)
        self.log = self.root / "server.log"
        self._proc: subprocess.Popen | None = None
        self._client = None  # a dask_gateway.Gateway, made on first use
        http, tcp = free_ports(2)
        self.address = f"http://127.0.0.1:{http}"
        self.proxy_address = f"gateway://127.0.0.1:{tcp}"
        self.conf = self.root / "dask_gateway_config.py"
        self.conf.write_text(_config(http, tcp, self.password, self.root / "clusters"))

    def start(self, timeout: float = 60.0) -> None:
        with open(self.log, "ab") as log:
            # its own session: stop() ends the server with the proxy it starts
            self._proc = subprocess.Popen(
                [_server_command(), "-f", str(self.conf)],
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(
                    f"{self.address}/api/health", timeout=2
                ) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"dask-gateway-server did not start: {tail}")
            time.sleep(0.25)

    def clusters(self, status=None) -> list:
        """The server's reports of this user's clusters (``status`` as
        ``Gateway.list_clusters``: by default those pending or running)."""
        if self._client is None:
            from dask_gateway import Gateway
            from dask_gateway.auth import BasicAuth

            self._client = Gateway(
                self.address,
                proxy_address=self.proxy_address,
                auth=BasicAuth("root", self.password),
            )
        return self._client.list_clusters(status=status)

    def wait_no_clusters(self, timeout: float = 60.0) -> None:
        """Wait until no cluster is pending, running or stopping."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.clusters(status=["pending", "running", "stopping"])
            if not left:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"gateway clusters still active after {timeout} s: {left}"
                )
            time.sleep(0.5)

    def env(self) -> dict:
        """Environment variables that give a client the address and the password (the
        ``gateway.*`` keys of Dask's config), for a ``scalepca`` subprocess."""
        return {
            "DASK_GATEWAY__ADDRESS": self.address,
            "DASK_GATEWAY__PROXY_ADDRESS": self.proxy_address,
            "DASK_GATEWAY__AUTH__TYPE": "basic",
            "DASK_GATEWAY__AUTH__KWARGS__USERNAME": "root",
            "DASK_GATEWAY__AUTH__KWARGS__PASSWORD": self.password,
        }

    def stop(self) -> None:
        if self._client is not None:
            from scalepca.app.cluster._connect import gateway_closed

            self._client.close()
            gateway_closed(self._client)
            self._client = None
        if self._proc is None:
            return
        if self._proc.poll() is None:
            # the server stops its clusters as it ends (stop_clusters_on_shutdown)
            os.killpg(self._proc.pid, signal.SIGTERM)
        wait_or_kill(self._proc, grace=20, group=True)
        self._proc = None
