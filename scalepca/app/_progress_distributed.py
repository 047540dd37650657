"""The distributed side of :func:`scalepca.app.progress.progress`: a scheduler that
follows chunks.

Every ``compute`` inside the progress block is handed to :class:`ProgressScheduler`,
which submits its graph to the client and follows, through the scheduler's progress
feed, how many of its chunk tasks (:func:`~scalepca.app.progress.chunk_keys`) are done,
then gathers the results. ``persist`` passes to ``Client.persist`` unchanged: the blocks
stay on the workers.

Dask's config holds only :data:`ROUTE`, which holds nothing: a nanny pickles the whole
config into every worker process it starts (a replacement too), so a client, a display
or a stream there would keep any lost worker from being replaced. The running schedulers
are kept here, in this process (:func:`following`).
"""

from __future__ import annotations

import contextlib
import time

from ._bars import Display, _n_tasks, chunk_keys


def _grouper(chunks: frozenset):
    """A key → group function for the scheduler's feed: ``"chunk"`` or ``"other"``.

    A closure, so that it is pickled by value: the scheduler needs no scalepca
    installed.
    """

    def group(key):
        return "chunk" if key in chunks else "other"

    return group


def _feed_bar(futures, chunks: frozenset, display: Display, interval: float):
    """Follow ``futures`` through the scheduler's multi-progress feed until they
    finish."""
    from distributed.diagnostics.progressbar import MultiProgressBar
    from distributed.utils import LoopRunner

    class _Feed(MultiProgressBar):
        def _draw_bar(self, remaining, all, **kwargs):
            done = all.get("chunk", 0) - remaining.get("chunk", 0)
            display.advance(done)

    feed = _Feed(futures, group_by=_grouper(chunks), interval=interval, complete=True)
    LoopRunner(loop=None).run_sync(feed.listen)


class ProgressScheduler:
    """A dask scheduler callable that runs graphs on ``client`` and reports their
    chunks."""

    def __init__(self, client, display: Display, *, interval: float = 0.1):
        self.client = client
        self.display = display
        self.interval = interval
        self.quiet_after = 0.0
        #: graphs computed through it (work submitted as futures, e.g. minibatches, is
        #: not)
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
            # only a terminal draws: a quick compute, or a log, needs no feed from the
            # scheduler
            if (
                futures
                and self.display.terminal
                and _not_done(futures, self.display.grace)
            ):
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

    def wait_for_feeds_dropped(self) -> None:
        """Wait until the scheduler has dropped the feeds of finished bars.

        Closing the cluster while a feed sleeps makes the scheduler log a cancelled
        task.
        """
        delay = self.quiet_after - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def persist(self, *args, **kwargs):
        # dask >= 2026.1 hands ``persist`` to a scheduler that has this method; older
        # dask ran it through ``__call__``, gathering every block into the client (hence
        # the lower bound in pyproject.toml, tested by tests/test_min_versions.py in
        # .ci/run)
        return self.client.persist(*args, **kwargs)


def _not_done(futures, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``futures``; True if some are still
    running."""
    from distributed import wait

    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        return True
    return False


#: the :class:`ProgressScheduler` of each :func:`following` block in force (innermost
#: last)
_ACTIVE: list[ProgressScheduler] = []


class _Route:
    """The scheduler callable set in Dask's config: hands each graph to the innermost
    :class:`ProgressScheduler` of this process. It pickles to ``"dask.distributed"``
    (what the default client itself sets), so a worker process started meanwhile gets
    Dask's own setting, and nothing of this process."""

    def __reduce__(self):
        return (str, ("dask.distributed",))

    def _target(self):
        if _ACTIVE:
            return _ACTIVE[-1]
        import dask

        # the block ended while a thread still held this callable: Dask's default
        return dask.base.get_scheduler(scheduler="dask.distributed")

    @property
    def client(self):
        """The client the graphs run on (:func:`scalepca._client.current_client`)."""
        return _ACTIVE[-1].client if _ACTIVE else None

    def __call__(self, dsk, keys, **kwargs):
        return self._target()(dsk, keys, **kwargs)

    def persist(self, *args, **kwargs):
        if _ACTIVE:
            return _ACTIVE[-1].persist(*args, **kwargs)
        from distributed import get_client

        return get_client().persist(*args, **kwargs)


#: the one object :func:`following` puts in Dask's config
ROUTE = _Route()


@contextlib.contextmanager
def following(client, display: Display):
    """Inside the block every ``compute`` runs through a :class:`ProgressScheduler` of
    ``client`` reporting to ``display``; Dask's config holds only :data:`ROUTE`."""
    import dask

    sched = ProgressScheduler(client, display)
    _ACTIVE.append(sched)
    try:
        with dask.config.set(scheduler=ROUTE):
            yield sched
    finally:
        _ACTIVE.remove(sched)
        sched.wait_for_feeds_dropped()
