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


class _Listener(logging.Filter):
    """Hands pass records to ``callback``; drops records the user's logging would not show."""

    def __init__(self, callback, hide_below: int):
        super().__init__()
        self.callback, self.hide_below = callback, hide_below

    def filter(self, record: logging.LogRecord) -> bool:
        info = getattr(record, "scalepca_pass", None)
        if info is not None:
            self.callback(info)
        return record.levelno >= self.hide_below


@contextlib.contextmanager
def listen_passes(callback):
    """Call ``callback(info)`` for every pass record logged inside the block."""
    log = logging.getLogger(PASS_LOGGER)
    old_level = log.level
    listener = _Listener(callback, log.getEffectiveLevel())
    log.addFilter(listener)
    log.setLevel(logging.DEBUG)  # the start records are debug records
    try:
        yield
    finally:
        log.removeFilter(listener)
        log.setLevel(old_level)  # nested blocks restore in turn
