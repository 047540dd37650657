"""Free loopback ports, and ending a child process that a test started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess


def free_ports(n: int = 1) -> list[int]:
    """``n`` distinct TCP ports of 127.0.0.1 that were free a moment ago (all bound
    at once, so they differ, then released for the caller's server to bind)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_or_kill(
    proc: subprocess.Popen, grace: float = 10.0, *, group: bool = False
) -> None:
    """Wait ``grace`` seconds for ``proc`` (already asked to end) to exit, then
    SIGKILL it — its whole process group when ``group`` (a process started with
    ``start_new_session`` whose children must go too) — and reap it."""
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
