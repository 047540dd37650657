"""The distributed side of :func:`scalepca.app.progress.progress`: a scheduler that follows chunks.

Every ``compute`` inside the progress block is handed to :class:`ProgressScheduler`, which
submits its graph to the client and follows, through the scheduler's progress feed, how many
of its chunk tasks (:func:`~scalepca.app.progress.chunk_keys`) are done, then gathers the
results. ``persist`` passes to ``Client.persist`` unchanged: the blocks stay on the workers.
"""

from __future__ import annotations

import time

from ._bars import Display, _n_tasks, chunk_keys


def _grouper(chunks: frozenset):
    """A key → group function for the scheduler's feed: ``"chunk"`` or ``"other"``.

    A closure, so that it is pickled by value: the scheduler needs no scalepca installed.
    """

    def group(key):
        return "chunk" if key in chunks else "other"

    return group


def _feed_bar(futures, chunks: frozenset, display: Display, interval: float):
    """Follow ``futures`` through the scheduler's multi-progress feed until they finish."""
    from distributed.diagnostics.progressbar import MultiProgressBar
    from distributed.utils import LoopRunner

    class _Feed(MultiProgressBar):
        def _draw_bar(self, remaining, all, **kwargs):
            done = all.get("chunk", 0) - remaining.get("chunk", 0)
            display.advance(done)

    feed = _Feed(futures, group_by=_grouper(chunks), interval=interval, complete=True)
    LoopRunner(loop=None).run_sync(feed.listen)


class ProgressScheduler:
    """A dask scheduler callable that runs graphs on ``client`` and reports their chunks."""

    def __init__(self, client, display: Display, *, interval: float = 0.1):
        self.client = client
        self.display = display
        self.interval = interval
        self.quiet_after = 0.0
        #: graphs computed through it (work submitted as futures, e.g. minibatches, is not)
        self.count = 0

    def __call__(self, dsk, keys, **kwargs):
        from dask.core import flatten
        from distributed import wait

        self.count += 1
        chunks = frozenset(chunk_keys(dsk))
        self.display.compute_started(len(chunks), _n_tasks(dsk))
        packed = self.client.get(dsk, keys, sync=False, **kwargs)
        futures = [f for f in flatten([packed]) if hasattr(f, "key")]
        try:
            # only a terminal draws: a quick compute, or a log, needs no feed from the scheduler
            if futures and self.display.terminal and _not_done(futures, self.display.grace):
                _feed_bar(futures, chunks, self.display, self.interval)
                # the scheduler's feed notices the closed comm at its next tick
                self.quiet_after = time.monotonic() + 2 * self.interval
            else:
                wait(futures)
            return self.client.gather(packed)
        finally:
            self.display.compute_ended()
            for f in futures:
                f.release()

    def settle(self) -> None:
        """Wait until the scheduler has dropped the feeds of finished bars.

        Closing the cluster while a feed sleeps makes the scheduler log a cancelled task.
        """
        delay = self.quiet_after - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def persist(self, *args, **kwargs):
        # dask >= 2026.1 hands ``persist`` to a scheduler that has this method; older dask ran
        # it through ``__call__``, gathering every block into the client (hence the lower
        # bound in pyproject.toml, tested by tests/test_min_versions.py in .ci/run)
        return self.client.persist(*args, **kwargs)


def _not_done(futures, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``futures``; True if some are still running."""
    from distributed import wait

    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        return True
    return False
