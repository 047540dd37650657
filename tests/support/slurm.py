"""A single-node SLURM on loopback for the tests: munged, slurmctld and slurmd in a tmp
folder.

:class:`LoopbackSlurm` writes a munge key and a ``slurm.conf`` (partition ``debug``, and
``short`` with a one-minute time limit for the tests of jobs that can never start; one
node: this host with the CPUs and memory ``slurmd -C`` reports), starts ``munged``,
``slurmctld -D`` and ``slurmd -D`` as child processes on free loopback ports, and waits
until ``sinfo`` shows the node idle. Nothing is written outside its folder: no cgroups
(``proctrack/linuxproc``, ``task/none``), no accounting database, state and spool in the
folder, daemons run as root (slurmd must be able to start jobs as the submitting user).
``stop`` cancels every job and ends the three daemons it started.

Debian ships the binaries as ``slurm-wlm`` and ``munge``; :func:`why_not` says what
is missing on a machine that cannot run it, so the tests can skip with that message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from .processes import free_ports, wait_or_kill

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")
HOW_TO_ENABLE = "as root: apt-get install slurm-wlm munge"
PARTITION = "debug"
SHORT = "short"


def why_not() -> str | None:
    """Why a loopback SLURM cannot start here (None if it can)."""
    missing = [b for b in BINARIES if _which(b) is None]
    if missing:
        return f"SLURM tests need {', '.join(missing)} ({HOW_TO_ENABLE})"
    if os.geteuid() != 0:
        return f"SLURM tests start slurmd, which runs jobs as their user: run them {HOW_TO_ENABLE}"
    return None


def _which(name: str) -> str | None:
    # Debian puts the daemons in /usr/sbin, which a non-login PATH may lack
    return shutil.which(name) or shutil.which(
        name, path="/usr/sbin:/usr/bin:/sbin:/bin"
    )


def _node_line() -> str:
    """``NodeName=... CPUs=... RealMemory=...`` of this host, as ``slurmd -C``
    reports it."""
    out = subprocess.run(
        [_which("slurmd"), "-C"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
    return " ".join(f for f in line.split() if not f.startswith("UpTime="))


class LoopbackSlurm:
    """munged + slurmctld + slurmd on 127.0.0.1, configured and kept under ``root``.

    Attributes
    ----------
    conf : Path
        The ``slurm.conf``; every SLURM command finds it through ``SLURM_CONF`` (see
        :attr:`env`).
    node : str
        The node's name (this host's short name).
    cpus, memory_mb : int
        What the node offers (``slurmd -C``).
    """

    def __init__(self, root):
        self.root = Path(root)
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs = []
        node = _node_line()
        fields = dict(f.split("=", 1) for f in node.split())
        self.node = fields["NodeName"]
        self.cpus = int(fields["CPUs"])
        self.memory_mb = int(fields["RealMemory"])
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.sock"
        self.env = {"SLURM_CONF": str(self.conf)}
        self._node_spec = node

    # -- setup -------------------------------------------------------------------------
    def _write_files(self) -> None:
        munge = self.root / "munge"
        for sub, mode in (
            ("munge", 0o755),
            ("state", 0o700),
            ("spool", 0o755),
            ("log", 0o755),
        ):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
            os.chmod(
                self.root / sub, mode
            )  # munged refuses a socket folder others cannot enter
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        ctld_port, slurmd_port = free_ports(2)
        r = self.root
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=scalepcatest",
                    f"SlurmctldHost={self.node}(127.0.0.1)",
                    f"SlurmctldPort={ctld_port}",
                    f"SlurmdPort={slurmd_port}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core_Memory",
                    "SchedulerType=sched/backfill",
                    "MpiDefault=none",
                    "MailProg=/bin/true",
                    "ReturnToService=2",
                    "SlurmctldTimeout=30",
                    "SlurmdTimeout=30",
                    "InactiveLimit=0",
                    "KillWait=2",
                    "MinJobAge=300",
                    f"{self._node_spec} NodeAddr=127.0.0.1 State=UNKNOWN",
                    f"PartitionName={PARTITION} Nodes={self.node} Default=YES "
                    f"MaxTime=INFINITE State=UP",
                    # jobs asking more than its one minute wait forever
                    # ("PartitionTimeLimit")
                    f"PartitionName={SHORT} Nodes={self.node} MaxTime=1 State=UP",
                    "",
                ]
            )
        )

    def _popen(self, name: str, args: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.log", "wb")  # noqa: SIM115
        self._logs.append(log)
        self.procs[name] = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
            cwd=str(self.root),
            start_new_session=True,
        )

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> str:
        """A SLURM command (``squeue``, ``scancel``, ...) against this cluster; its
        stdout."""
        res = subprocess.run(
            [_which(args[0]), *args[1:]],
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            timeout=timeout,
        )
        if check and res.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} failed ({res.returncode}): {res.stderr}"
            )
        return res.stdout

    def start(self, timeout: float = 60) -> LoopbackSlurm:
        self._write_files()
        m = self.root / "munge"
        self._popen(
            "munged",
            [
                _which("munged"),
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={m / 'munge.key'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--log-file={m / 'munged.log'}",
                f"--seed-file={m / 'munged.seed'}",
            ],
        )
        deadline = time.monotonic() + timeout
        while not self.munge_socket.exists():
            self._check_alive("munged", deadline)
            time.sleep(0.05)
        self._popen(
            "slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)]
        )
        self._popen("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf)])
        while True:
            state = self.run(
                "sinfo", "-h", "-n", self.node, "-o", "%t", check=False
            ).strip()
            if state == "idle":
                return self
            self._check_alive(None, deadline, f"node state {state!r}")
            time.sleep(0.25)

    def _check_alive(self, name, deadline, what="") -> None:
        for n, p in self.procs.items():
            if p.poll() is not None:
                raise RuntimeError(
                    f"{n} exited ({p.returncode}); see {self.root}/log/{n}.log"
                )
        if time.monotonic() > deadline:
            raise RuntimeError(
                "loopback SLURM did not come up "
                f"({what or name}); logs in {self.root}/log"
            )

    # -- jobs --------------------------------------------------------------------------
    def jobs(
        self, states: str = "PENDING,RUNNING,CONFIGURING,COMPLETING"
    ) -> dict[str, str]:
        """Job id → state of this cluster's jobs in ``states``."""
        out = self.run("squeue", "-h", "-t", states, "-o", "%i %T")
        return dict(line.split() for line in out.splitlines() if line.strip())

    def cancel(self, *job_ids: str) -> None:
        self.run("scancel", *job_ids)

    def wait_no_jobs(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.jobs():
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs still queued or running: {self.jobs()}")
            time.sleep(0.25)

    # -- teardown ----------------------------------------------------------------------
    def stop(self) -> None:
        """Cancel all jobs, then end slurmd, slurmctld and munged (in that order)."""
        if (
            self.procs.get("slurmctld") is not None
            and self.procs["slurmctld"].poll() is None
        ):
            try:
                self.run("scancel", "--full", "-u", "root", check=False, timeout=10)
                deadline = time.monotonic() + 20
                while self.jobs() and time.monotonic() < deadline:
                    time.sleep(0.25)
            except Exception:  # the daemons are ended below regardless
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            wait_or_kill(proc, 15, group=True)
        for log in self._logs:
            log.close()
        self._logs.clear()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
