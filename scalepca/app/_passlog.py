"""Listening to the passes estimators announce, without changing what the user's logging shows.

``DecompositionMixin._timed_pass`` logs a debug record when a pass starts and an info record
when it ends, each with a ``scalepca_pass`` dict (``estimator``, ``index``, ``label``,
``event``: ``"start"``/``"end"``, and ``seconds`` at the end). :func:`listen_passes` hands those
dicts to a callback — the progress bars and the run report's timing table read them.
"""

from __future__ import annotations

import contextlib
import logging

#: the logger ``_timed_pass`` announces passes on
PASS_LOGGER = "scalepca.models.base"


class _Dispatch(logging.Filter):
    """One filter on the pass logger for every listener: it hands pass records to each, then
    drops the records the user's logging would not have shown (below ``hide_below``)."""

    def __init__(self, hide_below: int, old_level: int):
        super().__init__()
        self.callbacks: list = []
        self.hide_below, self.old_level = hide_below, old_level

    def filter(self, record: logging.LogRecord) -> bool:
        info = getattr(record, "scalepca_pass", None)
        if info is not None:
            for callback in list(self.callbacks):
                callback(info)
        return record.levelno >= self.hide_below


_dispatch: _Dispatch | None = None


@contextlib.contextmanager
def listen_passes(callback):
    """Call ``callback(info)`` for every pass record logged inside the block."""
    global _dispatch
    log = logging.getLogger(PASS_LOGGER)
    if _dispatch is None:
        _dispatch = _Dispatch(log.getEffectiveLevel(), log.level)
        log.addFilter(_dispatch)
        log.setLevel(logging.DEBUG)  # the start records are debug records
    _dispatch.callbacks.append(callback)
    try:
        yield
    finally:
        _dispatch.callbacks.remove(callback)
        if not _dispatch.callbacks:
            log.removeFilter(_dispatch)
            log.setLevel(_dispatch.old_level)
            _dispatch = None
