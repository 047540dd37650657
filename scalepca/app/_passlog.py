"""Listening to the passes a fit announces (:mod:`scalepca.linalg.passes` events).

Every counted pass emits a :class:`~scalepca.linalg.passes.PassEvent` when it starts
and when it ends. :func:`listen_passes` hands them, as plain dicts, to a callback:
the progress bars (:mod:`scalepca.app.progress`) and the run report's timing table
(:mod:`scalepca.app.timing`) read them. The user's logging configuration is not
touched.
"""

from __future__ import annotations

import contextlib


def _as_info(event) -> dict:
    """A pass event as the application reads it."""
    return {
        "estimator": event.method,
        "index": event.index,
        "label": event.name,
        "planned": event.planned,
        "event": event.stage,
        "seconds": event.seconds,
        "chunks": event.chunks_total,
    }


@contextlib.contextmanager
def listen_passes(callback):
    """Call ``callback(info)`` for every pass that starts or ends inside the block;
    ``info`` has ``estimator``, ``index``, ``label``, ``planned``, ``event``
    (``"start"``/``"end"``), ``seconds`` (at the end) and ``chunks`` (row blocks,
    when known)."""
    from ..linalg import passes

    with passes.listening(lambda event: callback(_as_info(event))):
        yield
