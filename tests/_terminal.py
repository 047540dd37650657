"""What a terminal shows: redrawn lines, stale characters, and commands run in a
pseudo-terminal."""

from __future__ import annotations

import os
import subprocess


def shown(line: str) -> str:
    """What a terminal shows of ``line`` once its frames are drawn.

    Each ``\\r`` returns to the start of the line and the next frame overwrites only
    as many characters as it has, so a shorter frame leaves the end of a longer one
    on screen (``1.29 s ms``).
    """
    screen: list[str] = []
    for frame in line.split("\r"):
        screen[: len(frame)] = frame
    return "".join(screen)


def assert_no_stale_characters(text: str) -> None:
    """Every line shows exactly its last frame: no leftovers of a longer, earlier
    frame."""
    for line in text.split("\n"):
        last = line.rsplit("\r", 1)[-1]
        assert shown(line).rstrip() == last.rstrip(), (
            f"stale characters: {shown(line)!r}"
        )


def run_in_pty(
    argv,
    *,
    env=None,
    cwd=None,
    columns: int = 120,
    timeout: float = 300,
    interrupt_at=None,
):
    """Run ``argv`` with standard output and error on a pseudo-terminal of ``columns``
    columns.

    Returns ``(exit code, everything written, with "\\r\\n" as "\\n")``: the bytes a
    user's terminal receives, redraws included. ``TimeoutError`` if it still runs
    after ``timeout`` seconds (it is killed).

    ``interrupt_at``: once the program has written this text, press Ctrl+C: SIGINT to
    its whole process group (the program runs in one of its own, as a terminal's
    foreground job), as a terminal sends it. The result then has a third item: the
    program's child processes at that moment, ``(psutil.Process, its command line)``,
    to check that none outlives it. A callable ``interrupt_at(text, pid)`` instead says
    when, from everything written so far and the program's process id; it is asked
    each time the program writes.
    """
    import fcntl
    import pty
    import select
    import signal
    import struct
    import termios
    import time

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
        cwd=cwd,
        close_fds=True,
        start_new_session=interrupt_at is not None,
    )
    os.close(follower)
    chunks, children = [], None
    deadline = time.monotonic() + timeout
    try:
        while True:
            if not select.select([leader], [], [], deadline - time.monotonic())[0]:
                raise TimeoutError(
                    f"still running after {timeout} s; it wrote:\n"
                    + b"".join(chunks).decode("utf-8", "replace")[-4000:]
                )
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not data:
                break
            chunks.append(data)
            if children is None and _due(interrupt_at, chunks, proc.pid):
                import psutil

                children = [
                    (p, " ".join(p.cmdline()))
                    for p in psutil.Process(proc.pid).children(recursive=True)
                ]
                os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(leader)
        if proc.poll() is None and interrupt_at is not None:
            os.killpg(proc.pid, signal.SIGKILL)  # and what it started, in its group
        elif proc.poll() is None:
            proc.kill()
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return (rc, text) if interrupt_at is None else (rc, text, children)


def _due(interrupt_at, chunks, pid) -> bool:
    if interrupt_at is None:
        return False
    if callable(interrupt_at):
        return interrupt_at(b"".join(chunks).decode("utf-8", "replace"), pid)
    return interrupt_at.encode() in b"".join(chunks)


def still_running(processes) -> list:
    """Those of ``processes`` (``psutil.Process``) that still run: not ended, not a
    zombie (an ended child whose new parent, a container's init, never reaps it)."""
    import psutil

    alive = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive
