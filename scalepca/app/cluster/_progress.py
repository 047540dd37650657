"""Progress of dask computations: bars on a terminal or in a notebook, one line per compute
anywhere else (:func:`progress`)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time


def not_done(futures, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``futures``; True if some are still running."""
    from distributed import wait

    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        return True
    return False


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def _n_tasks(dsk) -> int:
    """Tasks in a graph handed to a scheduler: a mapping, or a dask expression of one."""
    graph = dsk.__dask_graph__() if hasattr(dsk, "__dask_graph__") else dsk
    return len(graph)


def _progress_line(n_tasks: int, seconds: float) -> str:
    """The line written for one finished compute when the output is not a terminal."""
    rate = n_tasks / seconds if seconds > 0 else float("inf")
    return (f"  [{time.strftime('%H:%M:%S')}] {n_tasks} tasks in {seconds:.2f} s "
            f"({rate:,.1f} tasks/s)")


class _ProgressScheduler:
    """A dask scheduler callable that runs graphs on ``client`` and reports their progress.

    Every ``compute`` (one pass over the data, one EM iteration, one write) is submitted to
    the client. On a terminal (or in a notebook) a progress bar follows its tasks until they
    finish; anywhere else (a log file, a batch job's output, a pipe) one line is written when
    it finishes, with its time and rate — never a stream of redrawn ``\r`` frames. The
    results are then gathered. ``persist`` is handed to the client unchanged (data stay on
    the workers).
    """

    def __init__(self, client, *, stream=None, grace: float = 0.5):
        self.client = client
        self.stream = stream
        self.grace = grace
        self.count = 0
        self.quiet_after = 0.0

    def settle(self) -> None:
        """Wait until the scheduler has dropped the feeds of finished bars.

        Closing the cluster while a feed sleeps makes the scheduler log a cancelled task.
        """
        delay = self.quiet_after - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def __call__(self, dsk, keys, **kwargs):
        from dask.core import flatten
        from dask.utils import parse_timedelta
        from distributed import progress as dist_progress
        from distributed import wait
        from distributed.utils import is_kernel

        t0 = time.perf_counter()
        packed = self.client.get(dsk, keys, sync=False, **kwargs)
        futures = [f for f in flatten([packed]) if hasattr(f, "key")]
        self.count += 1
        stream = self.stream or sys.stdout
        try:
            # computes that finish within the grace period get no bar (and no overhead)
            if futures and not_done(futures, self.grace):
                if is_kernel() or _is_terminal(stream):
                    interval = "100ms"
                    with contextlib.redirect_stdout(stream):
                        dist_progress(futures, notebook=is_kernel(), complete=True,
                                      interval=interval)
                    # the scheduler's feed of this bar notices the closed comm at its next tick
                    self.quiet_after = time.monotonic() + 2 * parse_timedelta(interval)
                else:
                    wait(futures)
                    if all(f.status == "finished" for f in futures):
                        print(_progress_line(_n_tasks(dsk), time.perf_counter() - t0),
                              file=stream, flush=True)
            return self.client.gather(packed)
        finally:
            for f in futures:
                f.release()

    def persist(self, *args, **kwargs):
        # dask >= 2026.1 hands ``persist`` to a scheduler that has this method; older dask ran
        # it through ``__call__``, gathering every block into the client (hence the lower
        # bound in pyproject.toml, tested by tests/test_min_versions.py in .ci/run)
        return self.client.persist(*args, **kwargs)


def _pass_filter(stream, hide_below: int):
    """A filter for the estimators' pass log (``PCA: pass 1 (moments) took 0.41s``).

    It echoes pass lines under the progress bars and drops records the user's logging
    configuration would not have shown (so lowering the logger's level changes nothing else).
    """

    def filt(record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if ": pass " in msg:
            print(f"  {msg}", file=stream or sys.stdout, flush=True)
        return record.levelno >= hide_below

    return filt


def _line_callback(stream, grace: float):
    """A dask local-scheduler callback writing one line per compute slower than ``grace``."""
    from dask.callbacks import Callback

    class _Lines(Callback):
        def _start(self, dsk):
            self._t0, self._n = time.perf_counter(), _n_tasks(dsk)

        def _finish(self, dsk, state, errored):
            seconds = time.perf_counter() - self._t0
            if not errored and seconds >= grace:
                print(_progress_line(self._n, seconds), file=stream, flush=True)

    return _Lines()


@contextlib.contextmanager
def progress(enabled: bool = True, *, client=None, stream=None, grace: float | None = None):
    """Show a progress bar for every dask computation inside the block.

    With a ``distributed`` client (the default client, or ``client``) each ``compute`` —
    one pass over the data, one iteration, one write — gets distributed's text progress bar,
    followed by the estimator's timing line for that pass; without a client, dask's local
    ``ProgressBar`` callback is used. Bars are drawn only when ``stream`` (default: standard
    output) is a terminal, or in a notebook; otherwise — batch jobs, CI logs, pipes — each
    compute writes one line when it ends, with its number of tasks, time and rate.
    ``enabled=False`` makes this a no-op, so callers can switch progress off with a flag
    (``--quiet`` on the command line). Computations that finish within ``grace`` seconds get no
    bar (so many short iterations are not slowed by drawing); the default is the dask config
    value ``scalepca.progress.grace`` (0.5 s; environment variable
    ``DASK_SCALEPCA__PROGRESS__GRACE``). Library code never shows bars by itself.
    """
    if not enabled:
        yield None
        return
    import dask

    if grace is None:
        grace = float(dask.config.get("scalepca.progress.grace", 0.5))

    if client is None:
        try:
            from distributed import get_client

            client = get_client()
        except (ImportError, ValueError):
            client = None
    # linalg.passes logs every counted pass on this logger
    pass_logger = logging.getLogger("scalepca.linalg.passes")
    old_level = pass_logger.level
    effective = pass_logger.getEffectiveLevel()
    filt = _pass_filter(stream, effective)
    pass_logger.addFilter(filt)
    pass_logger.setLevel(min(effective, logging.INFO))
    try:
        if client is None:
            from dask.diagnostics import ProgressBar

            out = stream or sys.stdout
            bar = (ProgressBar(out=out, minimum=grace) if _is_terminal(out)
                   else _line_callback(out, grace))
            with bar:
                yield None
        else:
            sched = _ProgressScheduler(client, stream=stream, grace=grace)
            try:
                with dask.config.set(scheduler=sched):
                    yield sched
            finally:
                sched.settle()
    finally:
        pass_logger.removeFilter(filt)
        pass_logger.setLevel(old_level)
