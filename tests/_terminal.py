"""What a terminal shows: redrawn lines, stale characters, and commands run in a pseudo-terminal."""

from __future__ import annotations

import os
import subprocess


def shown(line: str) -> str:
    """What a terminal shows of ``line`` once its frames are drawn.

    Each ``\\r`` returns to the start of the line and the next frame overwrites only as many
    characters as it has, so a shorter frame leaves the end of a longer one on screen
    (``1.29 s ms``).
    """
    screen: list[str] = []
    for frame in line.split("\r"):
        screen[:len(frame)] = frame
    return "".join(screen)


def assert_no_stale_characters(text: str) -> None:
    """Every line shows exactly its last frame: no leftovers of a longer, earlier frame."""
    for line in text.split("\n"):
        last = line.rsplit("\r", 1)[-1]
        assert shown(line).rstrip() == last.rstrip(), f"stale characters: {shown(line)!r}"


def run_in_pty(argv, *, env=None, cwd=None, columns: int = 120, timeout: float = 300):
    """Run ``argv`` with standard output and error on a pseudo-terminal of ``columns`` columns.

    Returns ``(exit code, everything written, with "\\r\\n" as "\\n")``: the bytes a user's
    terminal receives, redraws included.
    """
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower,
                            env=env, cwd=cwd, close_fds=True)
    os.close(follower)
    chunks = []
    try:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        rc = proc.wait(timeout=timeout)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return rc, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
