"""Progress of dask work, pass by pass: a labelled bar per pass on a terminal, a line in
a log.

Every pass a fit makes over the data is announced by :mod:`scalepca.linalg.passes` (an
event when it starts, one when it ends: the estimator, the pass number, the passes
planned when known, the pass's name). Inside :func:`progress` those events name the pass
whose dask computations are running, and every computation is counted in *chunks*: the
tasks that each read one block of the input (see :func:`chunk_keys`).

On a terminal (or any stream whose ``isatty()`` is true) each pass gets one tqdm bar
("of n" when the fit knows its number of passes in advance)::

    PPCA pass 2 (EM iteration 1):  45%|████▌     | 9/20 chunks [00:04<00:05, 2.11 chunks/s]
    PCA pass 2 of 2 (tsqr): 100%|██████████| 20/20 chunks [00:09<00:00, 2.11 chunks/s]

drawn only once the pass has run for ``grace`` seconds, so short iterations are not
slowed by drawing; a pass that ends sooner gets one summary line instead. Anywhere else
(a batch job's output, CI, a pipe) nothing is redrawn: one line per pass when it ends,
naming the fit and the pass::

    [14:02:11] PPCA pass 2 (EM iteration 1): 20 chunks in 9.48 s (2.11 chunks/s)

Computations outside a pass (writing outputs, generating data) are labelled with the
current :func:`stage`. Library code never shows progress by itself: the command line
switches it on (``progress: false`` in a config, ``--no-progress`` or ``--quiet``
switch it off).
"""

from __future__ import annotations

import contextlib
import threading

from ._bars import Display, chunk_keys, stage
from ._passlog import listen_passes

__all__ = ["chunk_keys", "progress", "stage"]


def _local_callback(display: Display):
    """A dask local-scheduler callback counting the chunks of each computation."""
    from dask.callbacks import Callback

    class _Chunks(Callback):
        def _start_state(self, dsk, state):
            self._keys, self._done = chunk_keys(dsk), 0
            display.compute_started(len(self._keys), len(dsk))
            self._stop = threading.Event()
            threading.Thread(target=self._tick, daemon=True).start()

        def _tick(self):  # elapsed and ETA move even while a long chunk runs
            while not self._stop.wait(0.2):
                display.advance(self._done)

        def _posttask(self, key, result, dsk, state, worker_id):
            if key in self._keys:
                self._done += 1
                display.advance(self._done)

        def _finish(self, dsk, state, errored):
            self._stop.set()
            display.compute_ended()

    return _Chunks()


@contextlib.contextmanager
def progress(
    enabled: bool = True, *, client=None, stream=None, grace: float | None = None
):
    """Show the progress of every dask computation inside the block, pass by pass.

    With a ``distributed`` client (``client``, or the default client) computations
    are sent to it and followed through the scheduler; without one, dask's local
    scheduler reports through a callback. A bar is drawn when ``stream`` (default:
    standard output) is a terminal; otherwise one line is written per pass (see the
    module's docstring). ``enabled=False`` makes this a no-op. Computations that
    finish within ``grace`` seconds get no bar; the default is the dask config value
    ``scalepca.progress.grace`` (0.5 s; environment variable
    ``DASK_SCALEPCA__PROGRESS__GRACE``).
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
    display = Display(stream, grace=grace)

    def on_pass(info):
        if info.get("event") == "start":
            display.pass_started(
                info["estimator"], info["index"], info["label"], info.get("planned")
            )
        elif info.get("event") == "end":
            display.pass_ended(info.get("seconds"))

    stopped = True
    try:
        with listen_passes(on_pass):
            if client is None:
                with _local_callback(display):
                    yield None
            else:
                from ._progress_distributed import following

                with following(client, display) as sched:
                    yield sched
        stopped = False
    finally:
        display.close(stopped=stopped)
