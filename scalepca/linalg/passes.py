"""Passes over the row blocks of a matrix: the one map-and-tree-reduce, and the pass
counter.

A *pass* reads every row block of the input once. Every data-touching statistic of the
package is one of them: a function applied to each row block where it lives (dense
``ndarray`` or ``scipy.sparse`` CSR blocks, see
:func:`scalepca._validation.as_csr_blocks`) returns a small partial (a dict of d × k
arrays at most), and the partials are merged by a tree of fan-in ``split_every``,
consecutive blocks left to right, with an optional ``finish`` at the root. The merge
order depends on the number of blocks and ``split_every`` only, so a result is bitwise
the same on every run; merges that are exact in exact arithmetic (sums, the
parallel-variance update) make it independent of the chunking up to rounding.

Reductions
    :func:`row_reduction` (a ``da.reduction`` over a dask array, one output block per
    column strip) and :func:`reduce_rows` (its single output as a ``Delayed``,
    optionally computed in one graph with another array, see :func:`single_delayed`) for
    dask arrays; :func:`reduce_blocks` for a list of ``Delayed`` row blocks (sparse
    PCA's minibatches); :func:`reduce_block_groups` for groups of consecutive row blocks
    of a dask array, each group one task that reads its own blocks (the sparse Gram
    pass). :func:`sum_over_strips` is the same tree across the *column strips* of a
    matrix (all rows, some features, e.g. Hilbert EOF's complex PCs): a lazy n × k dask
    array, a sum of one partial per strip. All of them fold the partials with the same
    :func:`fold`.

Counting
    An estimator's fit runs inside :func:`counting` (``DecompositionMixin.fit`` does
    it), which makes a :class:`PassCounter` of the estimator the active one. Every pass
    computed through :func:`compute` or :func:`persist`, or wrapped in :func:`one_pass`,
    then adds one to the estimator's ``n_passes_``; a pass that ends without a single
    compute (an epoch of minibatches) is counted by :meth:`PassCounter.record`. Outside
    :func:`counting` nothing is counted (``transform`` reads the data too, but
    ``n_passes_`` describes the fit). A function that is no estimator (the EOF tools)
    counts under its own name: ``counting("eofs_as_correlation")``.

Events
    Each counted pass logs ``"<method>: pass <i> (<name>) took <s>s"`` at INFO on the
    logger ``scalepca.linalg.passes`` (:data:`logger`), and emits a
    :class:`PassEvent` when it starts (``stage="start"``, ``chunks_done=0``) and when
    it ends (``stage="end"``, ``chunks_done=chunks_total``) to every function
    registered by :func:`add_listener` (or inside :func:`listening`). The end event
    also rides on the log record as its attribute ``pass_event``. ``chunks_total`` is
    the number of row blocks of the fitted input when the counter knows it;
    ``planned`` the number of passes the fit will make when it is known in advance
    (else ``None``). Progress within a pass is the scheduler's business (the progress
    bars of :mod:`scalepca.app.progress`, which label each bar with these events).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial

import dask
import dask.array as da
import numpy as np
from dask.core import flatten

__all__ = [
    "PassCounter",
    "PassEvent",
    "add_listener",
    "compute",
    "compute_together",
    "counting",
    "fold",
    "listening",
    "one_pass",
    "optimized_together",
    "persist",
    "reduce_block_groups",
    "reduce_blocks",
    "reduce_rows",
    "remove_listener",
    "row_reduction",
    "single_delayed",
    "sum_over_strips",
    "sum_parts",
]

#: the logger of the pass lines (``PCA: pass 1 (moments) took 0.41s``)
logger = logging.getLogger(__name__)


# -- the reduction ---------------------------------------------------------------------
def fold(
    parts,
    axis=None,
    keepdims=None,
    *,
    merge=None,
    merge_all=None,
    finish=None,
    computing_meta=False,
):
    """Merge the partials of consecutive row blocks left to right, ``finish`` the
    result.

    The combine/aggregate step of :func:`row_reduction` and the merge step of
    :func:`reduce_blocks`. ``merge(a, b)`` merges two partials; ``merge_all(list)``
    instead merges a whole group (e.g. accumulating in place into an array it made
    itself).
    """
    if computing_meta:
        return parts
    parts = list(flatten(parts)) if isinstance(parts, list) else [parts]
    if merge_all is not None:
        acc = merge_all(parts)
    else:
        acc = parts[0]
        for p in parts[1:]:
            acc = merge(acc, p)
    return acc if finish is None else finish(acc)


def _block_step(x, axis=None, keepdims=None, *, block, computing_meta=False):
    """The chunk step of :func:`row_reduction`: ``block(x)``, or ``x`` when already
    mapped."""
    if computing_meta:  # dask probing the output type: a dict is no array
        return np.empty((0,) * x.ndim, dtype=object)
    return x if block is None else block(x)


def row_reduction(
    X: da.Array,
    block: Callable | None,
    merge: Callable | None = None,
    finish: Callable | None = None,
    *,
    merge_all: Callable | None = None,
    split_every: int = 8,
    name: str | None = None,
) -> da.Array:
    """Tree reduction over the row blocks of ``X``: one partial per output column strip.

    ``block(x)`` maps a row block (dense or CSR) to its partial (``None``: the blocks
    already are partials, e.g. made by ``map_blocks`` with one object per block);
    partials are merged by :func:`fold` in groups of ``split_every`` and the root is
    ``finish``-ed. The result is a 1-D dask array with one block per column chunk of
    ``X``, each holding that strip's result (``da.reduction`` with
    ``concatenate=False``: the claimed shape is nominal).
    """
    if (merge is None) == (merge_all is None):
        raise TypeError("give exactly one of merge and merge_all")
    step = partial(fold, merge=merge, merge_all=merge_all)
    return da.reduction(
        X,
        partial(_block_step, block=block),
        partial(step, finish=finish),
        combine=step,
        axis=0,
        concatenate=False,
        split_every=split_every,
        dtype=object,
        meta=np.empty((0,) * (X.ndim - 1), dtype=object),
        name=name,
    )


def reduce_rows(
    X: da.Array,
    block: Callable | None,
    merge: Callable | None = None,
    finish: Callable | None = None,
    *,
    merge_all: Callable | None = None,
    split_every: int = 8,
    name: str | None = None,
    also=None,
):
    """:func:`row_reduction` of ``X`` (one column chunk) as a ``Delayed`` of its one
    result; with ``also``, ``(Delayed, also)`` read in the same pass (see
    :func:`single_delayed`)."""
    out = row_reduction(
        X, block, merge, finish, merge_all=merge_all, split_every=split_every, name=name
    )
    return single_delayed(out, also)


def shared(value):
    """``value`` (a client-side array that every task of a pass reads, e.g. the d × l
    block a Gram product multiplies) as one key of the pass's graph: scattered once
    to the workers when the current scheduler is a running ``distributed`` client —
    the graph then carries its key, not its bytes (a 10⁶ × 20 float64 block is 160 MB
    that would otherwise travel inside every pass's graph through the scheduler) —
    else a ``Delayed`` literal."""
    distributed = sys.modules.get(
        "distributed"
    )  # no client runs unless it was imported
    client = getattr(dask.base.get_scheduler(), "__self__", None)
    if (
        distributed is None
        or not isinstance(client, distributed.Client)
        or client.status != "running"
    ):
        return dask.delayed(value)
    return client.scatter(value, hash=False)


def reduce_blocks(
    blocks: list,
    block: Callable,
    merge: Callable | None,
    *args,
    split_every: int = 8,
    merge_all: Callable | None = None,
    per_block: list | None = None,
):
    """A ``Delayed`` reducing ``block(b, *args)`` over the ``Delayed`` row blocks
    ``blocks`` with the tree of :func:`row_reduction` (groups of ``split_every``,
    left to right; ``merge`` or ``merge_all`` as in :func:`fold`). ``args`` may be
    ``Delayed``: one key read by every block's task (a d × l factor is then sent once
    per worker, not once per task). ``per_block``: one argument of each block's own
    (a list as long as ``blocks``), given right after the block:
    ``block(b, per_block[i], *args)``."""
    if (merge is None) == (merge_all is None):
        raise TypeError("give exactly one of merge and merge_all")
    own = [()] * len(blocks) if per_block is None else [(a,) for a in per_block]
    level = [
        dask.delayed(block, pure=True)(b, *mine, *args)
        for b, mine in zip(blocks, own, strict=True)
    ]
    return _fold_tree(level, merge, merge_all, split_every)


def _fold_tree(level: list, merge, merge_all, split_every: int):
    """The tree of :func:`fold` over ``Delayed`` partials, groups of ``split_every``
    left to right: one ``Delayed``."""
    while len(level) > 1:
        level = [
            dask.delayed(fold, pure=True)(
                level[i : i + split_every], merge=merge, merge_all=merge_all
            )
            for i in range(0, len(level), split_every)
        ]
    return level[0]


def reduce_block_groups(
    X: da.Array,
    groups: list,
    block: Callable,
    *,
    merge_all: Callable,
    split_every: int = 8,
):
    """A ``Delayed`` reducing ``block([x_i for i in group])`` over ``groups`` of
    consecutive row blocks of ``X`` (index ranges; ``X`` rows chunked, one column
    chunk), merged by the tree of :func:`reduce_blocks`.

    Each group is **one task that reads its own blocks**: the tasks of the group's
    blocks (after dask's optimisation of ``X``'s graph) are fused into the group's
    task, so a block is made where it is used and never travels, and the scheduler
    balances whole groups between workers. Measured on 100 CSR blocks of 10,000 ×
    2,000 in 29 groups on 2 workers: a block read by a separate task went to the
    other worker for 15–20 % of the blocks, and one worker idled up to 1.2 s at the
    end. What the blocks share (a store handle, an array the blocks are cut from)
    stays one task, a dependency of every group.
    """
    from collections import Counter

    from dask._task_spec import Alias, List, Task, TaskRef
    from dask.base import tokenize
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    keys = [k for (k,) in X.__dask_keys__()]
    dsk = dict(X.__dask_optimize__(X.__dask_graph__(), keys))
    used = Counter(dep for node in dsk.values() for dep in node.dependencies)
    name = f"{block.__name__}-{tokenize(X.name, [tuple(g) for g in groups], block)}"
    level = []
    for j, group in enumerate(groups):
        inner, refs = [], []
        for i in group:
            k = keys[i]
            refs.append(TaskRef(k))
            # another task reads the block too: it stays a task
            if used[k] or k not in dsk:
                continue
            node = dsk.pop(k)
            inner.append(node)
            # a block renamed by dask's linear fusion, read by its alias only
            while (
                isinstance(node, Alias)
                and used[node.target] == 1
                and node.target in dsk
            ):
                node = dsk.pop(node.target)
                inner.append(node)
        key = (name, j)
        dsk[key] = Task.fuse(
            *inner, Task(key, block, List(*refs)), key=key
        )  # reads inline
        level.append(key)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=())
    return _fold_tree(
        [Delayed(k, graph, layer=name) for k in level], None, merge_all, split_every
    )


def sum_parts(parts: list) -> np.ndarray:
    """The sum of same-shape partials in one new array (a part is never written: it
    may be read again): the ``merge_all`` of passes whose partials are plain arrays."""
    if len(parts) == 1:
        return parts[0].copy()
    acc = parts[0] + parts[1]
    for p in parts[2:]:
        acc += p
    return acc


def _strip_partial(x, *per_feature, block, args):
    """One strip's n × k partial of :func:`sum_over_strips`, with the strip axis in
    front."""
    return block(x, *per_feature, *args)[None]


def _first(acc):
    return acc[0]


def sum_over_strips(
    S: da.Array,
    block: Callable,
    *per_feature: np.ndarray,
    k: int,
    dtype,
    args: tuple = (),
    split_every: int = 4,
    name: str | None = None,
) -> da.Array:
    """Lazy ``Σ_j block(S_j, f_j, …, *args)`` (n × k) over the column strips ``S_j`` of
    ``S``.

    ``S`` holds all its rows in one chunk (column strips, as
    :func:`scalepca.linalg.snapshot.column_strips` makes them); each ``per_feature``
    array (d × …, NumPy) reaches the strip's task as its rows of the strip's
    features. A blockwise map gives one n × k partial per strip where the strip
    lives, and the partials are summed by :func:`fold` in a tree of fan-in
    ``split_every``, consecutive strips left to right (only n × k values travel).
    Nothing is computed: the result is one (n, k) chunk of ``dtype``.
    """
    if len(S.chunks[0]) != 1:
        raise ValueError(
            "sum_over_strips needs column strips: all rows of S in one chunk; "
            f"got {len(S.chunks[0])} row chunks"
        )
    pairs = []
    for i, f in enumerate(per_feature):
        f = np.asarray(f)
        rest = "".join(chr(ord("p") + i * 4 + a) for a in range(f.ndim - 1))
        pairs += [da.from_array(f, chunks=(S.chunks[1],) + f.shape[1:]), "j" + rest]
    parts = da.blockwise(
        _strip_partial,
        "jik",
        S,
        "ij",
        *pairs,
        new_axes={"k": k},
        adjust_chunks={"j": 1},
        concatenate=True,
        dtype=dtype,
        meta=np.empty((0, 0, 0), dtype=dtype),
        block=block,
        args=tuple(args),
    )
    step = partial(fold, merge=np.add)
    return da.reduction(
        parts,
        partial(_block_step, block=None),
        partial(step, finish=_first),
        combine=step,
        axis=0,
        concatenate=False,
        split_every=split_every,
        dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype),
        name=name,
    )


def optimized_together(*arrays: da.Array) -> dict:
    """One optimised graph for dask arrays over the same input, so that computing them
    (``dask.compute(..., optimize_graph=False)``) reads each input block once: optimised
    apart, as ``dask.compute`` does per collection, each fuses the block's read into its
    own tasks."""
    from dask.highlevelgraph import HighLevelGraph

    keys = [k for a in arrays for k in flatten(a.__dask_keys__())]
    return da.Array.__dask_optimize__(
        HighLevelGraph.merge(*[a.dask for a in arrays]), keys
    )


def compute_together(*arrays: da.Array) -> tuple:
    """``dask.compute(*arrays)`` as one graph (see :func:`optimized_together`)."""
    dsk = optimized_together(*arrays)
    return dask.compute(
        *[da.Array(dsk, a.name, a.chunks, meta=a._meta) for a in arrays],
        optimize_graph=False,
    )


def single_delayed(out: da.Array, also: da.Array | None = None):
    """The one output block of the reduction ``out`` as a ``Delayed``; with ``also``
    (another one-block dask array over the same input, e.g. a checkpoint's data
    sketch), a ``Delayed`` of each from one graph (:func:`optimized_together`), so
    ``dask.compute`` of both reads each input block once."""
    if also is None:
        return out.to_delayed(optimize_graph=True).ravel()[0]
    return delayed_together(out, also)


def delayed_together(*outs: da.Array) -> tuple:
    """The one output block of each one-block dask array of ``outs`` (reductions over
    the same input) as a ``Delayed``, all from one graph (:func:`optimized_together`):
    computed together with ``optimize_graph=False``, they read each input block once."""
    from dask.delayed import Delayed

    dsk = optimized_together(*outs)
    return tuple(Delayed(next(iter(flatten(o.__dask_keys__()))), dsk) for o in outs)


# -- events ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PassEvent:
    """One pass starting or ending: what a progress display needs to label its bar."""

    method: str  #: the estimator's class name, or the tool's name
    index: int  #: 1 for the first pass of the fit
    planned: int | None  #: the passes the fit will make, when known in advance
    name: str  #: what the pass computes ("moments", "EM iteration 3", ...)
    stage: str  #: "start" or "end"
    chunks_done: int | None  #: row blocks read so far (0 at start, all at end)
    chunks_total: int | None  #: row blocks of the input, when known
    seconds: float | None = None  #: duration of the pass (at "end")


_listeners: list[Callable[[PassEvent], None]] = []


def add_listener(fn: Callable[[PassEvent], None]) -> Callable[[PassEvent], None]:
    """Call ``fn(event)`` for every :class:`PassEvent` from now on; returns ``fn``."""
    _listeners.append(fn)
    return fn


def remove_listener(fn: Callable[[PassEvent], None]) -> None:
    """Stop calling ``fn`` (registered by :func:`add_listener`)."""
    with contextlib.suppress(ValueError):
        _listeners.remove(fn)


@contextlib.contextmanager
def listening(fn: Callable[[PassEvent], None]):
    """``fn`` receives every :class:`PassEvent` emitted inside the block."""
    add_listener(fn)
    try:
        yield fn
    finally:
        remove_listener(fn)


def _emit(event: PassEvent) -> None:
    for fn in list(_listeners):
        fn(event)


# -- counting --------------------------------------------------------------------------
class PassCounter:
    """Counts the passes of one fit (on ``owner.n_passes_``) or of one tool (on itself).

    ``method``: the name events and log lines carry (default: the owner's class
    name); ``planned``: the passes the fit will make, if known; ``chunks``: row
    blocks of the input.
    """

    def __init__(
        self,
        owner=None,
        *,
        method: str | None = None,
        planned: int | None = None,
        chunks: int | None = None,
    ):
        self.owner = owner
        self.method = method or type(owner).__name__
        self.planned, self.chunks = planned, chunks
        self._n = 0

    @property
    def n(self) -> int:
        """Passes counted so far."""
        return self._n if self.owner is None else getattr(self.owner, "n_passes_", 0)

    def _set(self, n: int) -> None:
        if self.owner is None:
            self._n = n
        else:
            self.owner.n_passes_ = n

    def plan(self, n: int) -> None:
        """Announce ``n`` more passes (``planned`` of the events; ``None`` until
        then)."""
        self.planned = (self.planned or 0) + int(n)

    def record(self, name: str, seconds: float | None = None) -> int:
        """Count one pass that has ended (``seconds`` long); log it and emit its end
        event. Returns its index."""
        i = self.n + 1
        self._set(i)
        event = PassEvent(
            self.method, i, self.planned, name, "end", self.chunks, self.chunks, seconds
        )
        if seconds is None:
            logger.info(
                "%s: pass %d (%s)", self.method, i, name, extra={"pass_event": event}
            )
        else:
            logger.info(
                "%s: pass %d (%s) took %.2fs",
                self.method,
                i,
                name,
                seconds,
                extra={"pass_event": event},
            )
        _emit(event)
        return i

    @contextlib.contextmanager
    def one_pass(self, name: str):
        """Count the block as one pass: emit its start, time it, then :meth:`record`
        it (a block that raises is no pass)."""
        _emit(
            PassEvent(
                self.method,
                self.n + 1,
                self.planned,
                name,
                "start",
                None if self.chunks is None else 0,
                self.chunks,
            )
        )
        t0 = time.perf_counter()
        yield
        self.record(name, time.perf_counter() - t0)


_active: ContextVar[PassCounter | None] = ContextVar(
    "scalepca_pass_counter", default=None
)


def counter_of(owner) -> PassCounter:
    """The active counter if it counts for ``owner``, else a new one for it."""
    active = _active.get()
    if active is not None and active.owner is owner:
        return active
    return PassCounter(owner)


@contextlib.contextmanager
def counting(owner, *, planned: int | None = None, chunks: int | None = None):
    """Make a :class:`PassCounter` of ``owner`` (an estimator, or a tool's name) the
    active one inside the block; yields it. Inside a block already counting for
    ``owner`` the active counter stays."""
    current = _active.get()
    if current is not None and current.owner is owner and not isinstance(owner, str):
        yield current
        return
    if isinstance(owner, str):  # a tool's name
        counter = PassCounter(method=owner, planned=planned, chunks=chunks)
    else:
        counter = PassCounter(owner, planned=planned, chunks=chunks)
    token = _active.set(counter)
    try:
        yield counter
    finally:
        _active.reset(token)


def active() -> PassCounter | None:
    """The counter passes are counted on now, if any."""
    return _active.get()


@contextlib.contextmanager
def one_pass(name: str, owner=None):
    """Count the block as one pass of ``owner`` (default: the active counter; none:
    the block runs uncounted)."""
    counter = _active.get() if owner is None else counter_of(owner)
    if counter is None:
        yield
        return
    with counter.one_pass(name):
        yield


def compute(*graphs, name: str, **kwargs) -> tuple:
    """``dask.compute(*graphs, **kwargs)`` counted as one pass named ``name``."""
    with one_pass(name):
        return dask.compute(*graphs, **kwargs)


def persist(array, *, name: str):
    """``array.persist()`` counted as one pass named ``name``."""
    with one_pass(name):
        return array.persist()
