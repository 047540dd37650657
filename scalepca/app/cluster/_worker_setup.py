"""A Dask worker preload (``dask_setup``) for the worker processes of the local clusters
scalepca starts: each ignores SIGINT.

Ctrl+C on a terminal signals the whole foreground process group, the worker processes
too; the program alone answers it, and closing its client stops them. The first
workers inherit an ignored SIGINT from the program (``_connect._interrupts_ignored``),
but a nanny spawns a replacement for a worker that died long after that, while the
program handles SIGINT again: the replacement sets it itself, before it joins the
scheduler (a press in the second or so its Python takes to start still reaches it).
"""

import signal


def dask_setup(worker) -> None:
    # a worker process runs its event loop in its main thread, which sets handlers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
