"""The drawing side of :mod:`scalepca.app.progress`: chunk counting, bars and log
lines."""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Display", "chunk_keys", "stage"]

#: what computations outside a pass are labelled with (see :func:`stage`)
_STAGE: contextvars.ContextVar[str] = contextvars.ContextVar(
    "scalepca_stage", default="compute"
)
_BAR_FORMAT = (
    "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} chunks "
    "[{elapsed}<{remaining}, {rate_noinv_fmt}]"
)


@contextlib.contextmanager
def stage(name: str):
    """Label the computations inside the block that are not part of a fit's pass."""
    token = _STAGE.set(name)
    try:
        yield
    finally:
        _STAGE.reset(token)


@contextlib.contextmanager
def _interrupt_deferred():
    """Hold Ctrl+C back until the block has run.

    A bar draws its first frame while it is made; an interrupt landing between that
    frame and the bar's assignment left a bar nobody held, which closed itself when
    collected and ended its line a second time. Python runs signal handlers in the main
    thread only, so elsewhere there is nothing to hold back.
    """
    import signal

    before = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or before is None:
        yield  # None: a handler not set from Python, which could not be put back
        return
    pressed = []
    signal.signal(signal.SIGINT, lambda *args: pressed.append(args))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        if pressed and callable(before):
            before(*pressed[0])
        elif pressed and before == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def _in_notebook() -> bool:
    from distributed.utils import is_kernel

    return is_kernel()


def _graph(dsk):
    """The task mapping of a graph handed to a scheduler: a mapping, or a dask
    expression of one."""
    if hasattr(dsk, "__dask_graph__"):
        return dsk.__dask_graph__()
    return dsk


def _n_tasks(dsk) -> int:
    """Tasks in a graph handed to a scheduler."""
    return len(_graph(dsk))


def chunk_keys(dsk) -> set:
    """The keys of the tasks of a graph that each process one block of the input.

    They are the graph's source tasks (no dependency inside the graph: a generated
    block, a block persisted earlier, a block read by a fused task), except a lone
    shared source such as the handle of a zarr array, which all block readers depend
    on; the readers then count.
    """
    from dask.core import get_deps
    from dask.utils import key_split

    graph = dict(_graph(dsk))
    deps, dependents = get_deps(graph)
    roots = [k for k, d in deps.items() if not d]
    groups: dict[str, int] = {}
    for k in roots:
        groups[key_split(k)] = groups.get(key_split(k), 0) + 1
    shared = {k for k in roots if groups[key_split(k)] == 1 and len(dependents[k]) > 1}
    chunks = {k for k in roots if k not in shared}
    chunks |= {k for k, d in deps.items() if d and d <= shared}
    return chunks or set(graph)


@dataclass
class _Pass:
    """One pass, or one stage's computation: its label and what its computations
    counted."""

    label: str
    chunks: int = 0
    tasks: int = 0
    t0: float = field(default_factory=time.perf_counter)
    bar: object = None  # the tqdm bar, once drawn


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.2f} chunks/s" if seconds > 0 else "instant"


class Display:
    """What :func:`progress` shows: one bar per pass on a terminal, a line per pass in a
    log.

    Fed by pass events (:meth:`pass_started` / :meth:`pass_ended`) and by the dask
    callbacks of each computation (:meth:`compute_started`, :meth:`advance`,
    :meth:`compute_ended`).
    """

    def __init__(self, stream=None, *, grace: float = 0.5):
        self.notebook = stream is None and _in_notebook()  # tqdm draws a widget there
        self.stream = stream or sys.stdout
        self.grace = grace
        self.terminal = self.notebook or _is_terminal(self.stream)
        self.current: _Pass | None = None  # the pass being made, if any
        self.active: _Pass | None = None  # what the running computation counts into
        self.done_before = 0  # chunks of earlier computations of the same pass
        self.lock = threading.RLock()

    # -- passes ------------------------------------------------------------------------
    def pass_started(
        self, estimator: str, index: int, label: str, planned: int | None = None
    ):
        of = f" of {planned}" if planned else ""
        with self.lock:
            self._close()
            self.current = _Pass(f"{estimator} pass {index}{of} ({label})")

    def pass_ended(self, seconds: float | None = None):
        with self.lock:
            p, self.current = self.current, None
            if p is None:
                return
            if seconds is None:
                seconds = time.perf_counter() - p.t0
            if p.bar is None:  # never drawn (quicker than the grace period), or a log
                self._line(p, seconds)
            self._close(p)

    # -- computations ------------------------------------------------------------------
    def compute_started(self, n_chunks: int, n_tasks: int):
        with self.lock:
            if self.current is None:
                self._close()
                self.active = _Pass(_STAGE.get())
            else:
                self.active = self.current
            self.done_before = self.active.chunks
            self.active.chunks += n_chunks
            self.active.tasks += n_tasks
            if self.active.bar is not None:
                self.active.bar.total = self.active.chunks
            self.advance(0)

    def advance(self, done: int):
        """``done`` chunks of the running computation have finished; redraw if due."""
        with self.lock:
            p = self.active
            if p is None or not self.terminal:
                return
            if p.bar is None and time.perf_counter() - p.t0 >= self.grace:
                with _interrupt_deferred():  # a bar drawn is a bar held: closed once
                    p.bar = self._bar(p)
            if p.bar is not None:
                p.bar.n = self.done_before + done
                p.bar.refresh()

    def compute_ended(self):
        with self.lock:
            p, self.active = self.active, None
            if p is None or p is self.current:
                return  # the pass's bar or line is finished when the pass ends
            seconds = time.perf_counter() - p.t0
            if p.bar is None and seconds >= self.grace:
                self._line(p, seconds)
            self._close(p)

    def close(self, *, stopped: bool = False):
        """End the display. ``stopped``: the work was interrupted (or failed), so the
        pass or stage under way did not finish: its bar stays where it stopped, a log
        says so."""
        with self.lock:
            if not stopped:
                self.pass_ended()
                self._close()
                return
            under_way = []
            if self.current is not None:
                under_way.append(self.current)
            if self.active is not None and self.active is not self.current:
                under_way.append(self.active)
            for p in under_way:
                if p.bar is not None:
                    p.bar.close()  # drawn once more as it is: not filled up
                elif not self.terminal:
                    seconds = time.perf_counter() - p.t0
                    print(
                        f"  [{time.strftime('%H:%M:%S')}] "
                        f"{p.label}: stopped after {seconds:.2f} s",
                        file=self.stream,
                        flush=True,
                    )
            self.current = self.active = None

    # -- drawing -----------------------------------------------------------------------
    def _bar(self, p: _Pass):
        if self.notebook:  # a widget where ipywidgets is installed, else text
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm
        bar = tqdm(
            total=p.chunks,
            desc=p.label,
            unit=" chunks",
            file=self.stream,
            bar_format=_BAR_FORMAT,
            dynamic_ncols=True,
            leave=True,
            mininterval=0.1,
        )
        # elapsed and rate count from the start of the pass (tqdm's own clock)
        clock = getattr(bar, "_time", time.time)
        bar.start_t = bar.last_print_t = clock() - (time.perf_counter() - p.t0)
        return bar

    def _close(self, p: _Pass | None = None):
        p = p or self.active
        if p is not None and p.bar is not None:
            p.bar.n = p.bar.total = max(p.chunks, p.bar.n)
            p.bar.close()
            p.bar = None
            p.t0 = float("inf")  # closed: never drawn again
        if p is self.active:
            self.active = None

    def _line(self, p: _Pass, seconds: float):
        print(
            f"  [{time.strftime('%H:%M:%S')}] {p.label}: {p.chunks:,} "
            f"chunk{'s' * (p.chunks != 1)} in "
            f"{seconds:.2f} s ({_rate(p.chunks, seconds)})",
            file=self.stream,
            flush=True,
        )
