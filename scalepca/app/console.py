"""Warnings on the command line: the user's in the user's words, libraries' notices not
at all.

Inside :func:`cli_warnings`, a warning that concerns the user's data or settings (a
dtype converted, features left out, a fit that did not converge) is printed as one
line, ``scalepca: warning: ...``, in the words of the interface (config keys, flags:
see :func:`scalepca.app.messages.speak_cli`); notices addressed to library developers
(zarr's sharding notices, dask's chunking advice, deprecations inside dependencies)
are dropped. With ``-v`` every warning is shown as Python shows it. A known race of a
library's on Ctrl+C is not shown either (:func:`interrupt_races_quiet`).
"""

from __future__ import annotations

import _thread
import contextlib
import logging
import re
import signal
import sys
import threading
import warnings

from .messages import speak_cli

#: (warning class name, message pattern) of notices meant for library developers, not
#: users
LIBRARY_NOTICES = (
    ("ZarrUserWarning", ""),  # zarr's experimental-feature and format notices
    (
        "UserWarning",
        r"autosharding|shard shape",
    ),  # zarr v3 sharding, raised through anndata
    ("PerformanceWarning", ""),  # dask: "Increasing number of chunks by factor ..."
    ("FutureWarning", ""),  # a dependency's API changing under another dependency
    ("DeprecationWarning", ""),
    (
        "UserWarning",
        r"^Sending large graph",
    ),  # distributed: the graph holds NumPy arrays
)


def is_library_notice(category: type, message: str) -> bool:
    """Whether a warning is one of :data:`LIBRARY_NOTICES`."""
    names = {c.__name__ for c in category.__mro__}
    return any(
        cls in names and re.search(pattern, message) for cls, pattern in LIBRARY_NOTICES
    )


class _InterruptRace(logging.Filter):
    """Drops the traceback tornado logs when Ctrl+C lands in distributed's ``sync``
    before the coroutine it waits on has started: its cancel callback then finds no
    future yet and raises ``NameError`` (a race of distributed's, harmless: the
    interrupt goes on)."""

    def filter(self, record) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        return not (
            isinstance(err, NameError) and "sync.<locals>.cancel" in record.getMessage()
        )


def _interrupt_kept(previous):
    """An unraisable-exception hook that raises a Ctrl+C again in the main thread:
    Python reports a ``KeyboardInterrupt`` that lands in a garbage-collector callback
    (distributed's ``GCDiagnosis``) or a finaliser as "Exception ignored", and the
    program went on as if no key had been pressed."""

    def hook(unraisable):
        if issubclass(unraisable.exc_type, KeyboardInterrupt):
            # SIGINT to the main thread (it may wait in a lock), sent by another: from
            # here the handler would raise inside this hook, where it is lost again;
            # that thread runs no Python, and waits for the GIL until this has returned
            main = threading.main_thread().ident
            _thread.start_new_thread(signal.pthread_kill, (main, signal.SIGINT))
        else:
            previous(unraisable)

    return hook


@contextlib.contextmanager
def interrupt_races_quiet():
    """Inside the block, a Ctrl+C prints no library traceback
    (:class:`_InterruptRace`) and is not lost (:func:`_interrupt_kept`)."""
    logger, race = logging.getLogger("tornado.application"), _InterruptRace()
    logger.addFilter(race)
    previous, sys.unraisablehook = (
        sys.unraisablehook,
        _interrupt_kept(sys.unraisablehook),
    )
    try:
        yield
    finally:
        logger.removeFilter(race)
        sys.unraisablehook = previous


@contextlib.contextmanager
def cli_warnings(*, command: str | None = None, method=None, verbose: bool = False):
    """Route warnings raised inside the block as the module's docstring says.

    ``method`` is a callable returning the config's ``model.method`` once known (or
    None).
    """
    if verbose:
        yield
        return

    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if is_library_notice(category, text):
            return
        known = method
        if callable(method):  # read when a warning is said: the config sets it
            known = method()
        said = speak_cli(" ".join(text.split()), command=command, method=known)
        print(f"scalepca: warning: {said}", file=sys.stderr, flush=True)

    with warnings.catch_warnings(), interrupt_races_quiet():
        warnings.simplefilter("default")  # each distinct warning once per place
        warnings.showwarning = show
        yield
