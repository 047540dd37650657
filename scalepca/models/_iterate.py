"""One driver for iterative fits: the loop, its history, the stopping rule and
checkpoints.

An iterative estimator (PPCA's EM, SparsePCA's dictionary learning, RobustPCA's inexact
ALM) describes its algorithm with four things and hands them to :func:`iterate`:

``init()``
    The starting *state*: a dict of small values. NumPy arrays (d × k, k × k, ...) and
    JSON values (floats, ints, strings, None, lists, dicts). Called only when there is
    no checkpoint to resume.
``step(state, it) -> (state, record)``
    One iteration (``it`` = 1, 2, ... counts iterations done after this one). Returns
    the new state and a *record*: a dict of scalars to append to the history (e.g.
    ``{"loglike": -3.2}``). A record may name only some keys (e.g. an epoch cost every
    n-th step); each key has its own list. The step does the data work (and its
    ``_timed_pass``); the driver never touches data.
``stop``
    A :class:`StopRule` (or any callable ``stop(history, memo) -> str | None``) that
    returns a reason to stop, or None. ``memo`` is a dict for the rule's own small state
    (a smoothed cost, a count of steps without improvement); it is checkpointed with the
    state. Ready rules: :class:`ChangeBelow` (absolute or relative change of a history
    key), :class:`ValueBelow` (a residual under a tolerance), :class:`NoImprovement` (a
    smoothed cost that stops improving, as scikit-learn's minibatch dictionary
    learning), combined with :class:`AnyOf`.
``max_iter``
    The most iterations; reaching it without a stop gives a ``ConvergenceWarning``.

Checkpoints (:class:`IterationCheckpoint`) commit the state, the history, the memo and
the iteration count every ``checkpoint_every`` iterations, when the rule stops the fit
and at ``max_iter``; fitting again with the same path resumes from the newest commit and
ends where an uninterrupted fit ends (bit-identical when each step is a deterministic
function of the state and of the same graph). A commit also holds the problem's
*fingerprint* (refused, naming the differing key, when it does not match the fit's; the
checkpoint is left untouched) and the format version :data:`FORMAT_VERSION` (a commit
of another version, or of none, is refused, naming both).

The fingerprint holds what changes the result (parameters, a sketch of the data; see
:mod:`scalepca.io._fingerprint`), never the stopping parameters: on resume, the ``stop``
rule and ``max_iter`` of *this* fit are applied to the committed history. A commit that
stopped under a looser ``tol`` goes on iterating from its state to the tighter one (the
iterations an uninterrupted fit to the tighter ``tol`` makes, so the same answer), one
that did not stop under the old rule but does under the new one ends at once, and a
larger ``max_iter`` continues a fit that had reached the old one.

Large state (RobustPCA's chunked ``T``) lives beside the commits in
:attr:`IterationCheckpoint.store` (a :class:`~scalepca.io._checkpoint.CheckpointStore`):
the ``before_commit(it, state)`` hook writes it and returns the small state that refers
to it by name plus the names the commit needs kept; ``restore(state)`` rebuilds the lazy
arrays after a resume; ``valid(small_state)`` rejects commits whose large arrays are
gone. A commit prunes the entries of the store named by ``prune_prefixes`` that it does
not keep, so a lazy array of the state must not read an older entry after the next
commit (persist it, or read the entry the commit keeps).

Example (the shape of PPCA's EM)::

    ckpt = IterationCheckpoint(path, fingerprint) if path else None
    run = iterate(
        lambda state, it: em_step(state, it),            # one pass over the data
        lambda: {"W": W0, "mean": mu0, "sigma2": s0},
        stop=ChangeBelow("loglike", tol), max_iter=200, checkpoint=ckpt,
        checkpoint_every=5, name="PPCA EM",
    )
    run.state["W"], run.n_iter, run.history["loglike"], run.converged, run.resumed_from
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable

import dask
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..io._checkpoint import FINGERPRINT_VERSION, CheckpointStore, check_fingerprint

logger = logging.getLogger(__name__)

#: format of the commits this module writes; bump when their layout changes
FORMAT_NAME = "scalepca-iterate"
FORMAT_VERSION = 1


# -- stopping rules --------------------------------------------------------------------
class StopRule:
    """A stopping rule: ``rule(history, memo)`` returns a reason to stop, or None.

    ``history`` maps record keys to lists of values; ``memo`` is a dict the rule may
    use for its own small JSON state (kept in checkpoints).
    ``describe(history, memo)`` says where the rule stands, for the
    ConvergenceWarning.
    """

    def __call__(self, history: dict, memo: dict) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def describe(self, history: dict, memo: dict) -> str:
        return ""


@dataclasses.dataclass
class ChangeBelow(StopRule):
    """Stop when the last change of ``history[key]`` is below ``tol``.

    ``relative=False``: ``|h[-1] − h[-2]| < tol``. ``relative=True``: a cost that
    decreased by at most ``tol · |h[-1]|`` (``h[-2] − h[-1] <= tol |h[-1]|``; an
    increase stops too).
    """

    key: str
    tol: float
    relative: bool = False
    label: str | None = None

    def _change(self, h):
        if self.relative:
            return h[-2] - h[-1]
        return abs(h[-1] - h[-2])

    def __call__(self, history, memo):
        h = history.get(self.key, [])
        if len(h) < 2:
            return None
        if self.relative:
            hit = self._change(h) <= self.tol * abs(h[-1])
        else:
            hit = self._change(h) < self.tol
        if not hit:
            return None
        return f"change of {self.label or self.key} below tol={self.tol:g}"

    def describe(self, history, memo):
        h = history.get(self.key, [])
        change = self._change(h) if len(h) > 1 else float("nan")
        kind = "relative decrease" if self.relative else "last change"
        if self.relative and len(h) > 1 and h[-1] != 0:
            change = change / abs(h[-1])
        return f"{kind} of the {self.label or self.key}: {change:.3g}, tol={self.tol:g}"


@dataclasses.dataclass
class ValueBelow(StopRule):
    """Stop when ``history[key][-1] <= tol`` (e.g. a relative residual)."""

    key: str
    tol: float

    def __call__(self, history, memo):
        h = history.get(self.key, [])
        if not h or h[-1] > self.tol:
            return None
        return f"{self.key} {h[-1]:.3g} <= tol={self.tol:g}"

    def describe(self, history, memo):
        h = history.get(self.key, [])
        last = h[-1] if h else float("nan")
        return f"{self.key} {last:.3g} > tol={self.tol:g}"


@dataclasses.dataclass
class NoImprovement(StopRule):
    """Stop after ``patience`` records of ``key`` without a new best of its smoothed
    value.

    Each new value ``c`` (with weight ``w`` from ``history[weight_key]``, default 1)
    updates the exponentially weighted average ``ewa ← (1 − w) ewa + w c``; a record
    that does not lower the best ``ewa`` counts as no improvement. The rule keeps
    ``ewa``, the best value, the count and how many values it has seen in ``memo``
    (so it must see every record once: the driver calls it after every step).
    """

    key: str
    patience: int | None
    weight_key: str | None = None

    def __call__(self, history, memo):
        h = history.get(self.key, [])
        seen = memo.get("seen", 0)
        for i in range(seen, len(h)):
            w = 1.0
            if self.weight_key is not None:
                w = min(1.0, history[self.weight_key][i])
            ewa = memo.get("ewa")
            if ewa is None:
                ewa = h[i]
            else:
                ewa = (1 - w) * ewa + w * h[i]
            best = memo.get("best")
            if best is None or ewa < best:
                memo["best"], memo["no_improve"] = ewa, 0
            else:
                memo["no_improve"] = memo.get("no_improve", 0) + 1
            memo["ewa"] = ewa
        memo["seen"] = len(h)
        if self.patience is not None and memo.get("no_improve", 0) >= self.patience:
            return f"no improvement of the smoothed {self.key} in {self.patience} steps"
        return None

    def describe(self, history, memo):
        return f"{memo.get('no_improve', 0)} steps without improvement of the smoothed {self.key}"


class AnyOf(StopRule):
    """Stop when any of ``rules`` says so (all rules see every step)."""

    def __init__(self, *rules):
        self.rules = rules

    def __call__(self, history, memo):
        reasons = [
            rule(history, memo.setdefault(str(i), {}))
            for i, rule in enumerate(self.rules)
        ]
        reasons = [r for r in reasons if r]
        return "; ".join(reasons) if reasons else None

    def describe(self, history, memo):
        parts = [
            rule.describe(history, memo.get(str(i), {}))
            for i, rule in enumerate(self.rules)
            if hasattr(rule, "describe")
        ]
        return "; ".join(p for p in parts if p)


# -- checkpoints -----------------------------------------------------------------------
@dataclasses.dataclass
class Resumed:
    """What a commit holds: iterations done, state, history, the rule's memo,
    converged."""

    n_iter: int
    state: dict
    history: dict
    memo: dict
    converged: bool


class IterationCheckpoint:
    """Commits of an iterative fit in a local zarr group (see the module docstring).

    Parameters
    ----------
    path : str or path-like
        Local directory; created if missing.
    fingerprint : dict
        JSON values identifying the problem; a commit with another fingerprint is
        refused.
    what : str
        How the checkpoint is called in messages.
    prune_prefixes : tuple of str
        Entries of the store removed by a commit unless kept (old commits always).
    """

    def __init__(
        self,
        path,
        fingerprint: dict,
        *,
        what: str = "checkpoint",
        prune_prefixes: tuple = (),
    ):
        self.store = CheckpointStore(path, what=what)
        self.fingerprint = {"fingerprint_version": FINGERPRINT_VERSION, **fingerprint}
        self.what = what
        self.prune_prefixes = ("state_", *prune_prefixes)

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def _where(self) -> str:
        return f"{self.what} {self.path!r}"

    def resume(self, valid: Callable | None = None) -> Resumed | None:
        """The newest complete commit, checked (format version, then fingerprint), or
        None."""
        found = self.store.latest(
            valid=None
            if valid is None
            else lambda attrs: valid(attrs.get("values", attrs))
        )
        if found is None:
            return None
        attrs, arrays = found
        fmt, version = attrs.get("format"), attrs.get("version")
        if fmt != FORMAT_NAME or version != FORMAT_VERSION:
            if fmt is None:
                found_as = "no format version"
            else:
                found_as = f"format {fmt!r} version {version}"
            raise ValueError(
                f"{self.what} {self.path!r} has {found_as}; this scalepca "
                f"reads {FORMAT_NAME!r} version {FORMAT_VERSION} only. "
                "Delete it or use another path (the fit then starts afresh)"
            )
        check_fingerprint(attrs["fingerprint"], self.fingerprint, self._where)
        return Resumed(
            int(attrs["n_iter"]),
            {**attrs["values"], **arrays},
            {key: list(v) for key, v in attrs["history"].items()},
            dict(attrs["memo"]),
            bool(attrs["converged"]),
        )

    def commit(
        self, it: int, state: dict, history: dict, memo: dict, converged: bool, keep=()
    ) -> str:
        """Write commit ``it`` atomically, then remove older commits (and unkept
        entries)."""
        arrays = {key: v for key, v in state.items() if isinstance(v, np.ndarray)}
        values = {key: v for key, v in state.items() if key not in arrays}
        attrs = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "n_iter": int(it),
            "converged": bool(converged),
            "history": history,
            "memo": memo,
            "values": values,
            "fingerprint": self.fingerprint,
        }
        name = self.store.commit(it, arrays, attrs)
        self.store.prune({name, *keep}, self.prune_prefixes)
        return name


# -- the loop --------------------------------------------------------------------------
def computed_with_sketch(graph, sketch) -> tuple:
    """``(result, the data's sketch or None)`` of a fit's first pass ``graph`` built
    with ``also=sketch`` (:func:`~scalepca.linalg.passes.single_delayed`): with a
    checkpoint, the sketch its fingerprint holds is read in the same pass; without
    one, ``sketch`` is None and so is the second value."""
    if sketch is None:
        return dask.compute(graph)[0], None
    return dask.compute(*graph)


@dataclasses.dataclass
class IterationResult:
    """The end of :func:`iterate`."""

    state: dict
    n_iter: int
    history: dict
    converged: bool
    resumed_from: int
    reason: str | None


def iterate(
    step: Callable,
    init: Callable,
    *,
    stop: Callable,
    max_iter: int,
    checkpoint: IterationCheckpoint | None = None,
    checkpoint_every: int = 5,
    name: str = "fit",
    restore: Callable | None = None,
    before_commit: Callable | None = None,
    valid: Callable | None = None,
    callback: Callable | None = None,
    warn: bool = True,
    stacklevel: int = 2,
) -> IterationResult:
    """Run ``step`` from ``init()`` (or a checkpoint) until ``stop`` or ``max_iter``.

    Parameters
    ----------
    step : callable
        ``step(state, it) -> (state, record)``; ``it`` is the number of the iteration
        run.
    init : callable
        ``init() -> state``; not called when a checkpoint is resumed.
    stop : callable
        ``stop(history, memo) -> str | None`` (e.g. a :class:`StopRule`).
    max_iter : int
        Most iterations in total (resumed ones included).
    checkpoint : IterationCheckpoint, optional
        Resume from it and commit every ``checkpoint_every`` iterations, on stop and at
        ``max_iter``.
    name : str
        The fit's name in log lines and the ConvergenceWarning (e.g. ``"PPCA EM"``).
    restore : callable, optional
        ``restore(state) -> state`` after a resume (rebuild lazy or derived values).
    before_commit : callable, optional
        ``before_commit(it, state) -> (state_to_commit, names_to_keep)``: write large
        state to ``checkpoint.store`` and refer to it by name.
    valid : callable, optional
        ``valid(committed_small_state) -> bool``: skip commits whose large state is
        missing.
    callback : callable, optional
        ``callback(it, record, state)`` after every iteration (progress reporting).
    warn : bool
        Emit a ``ConvergenceWarning`` when ``max_iter`` is reached without a stop.
    stacklevel : int
        Of the warning, counted from the caller of ``iterate``.

    Returns
    -------
    IterationResult
    """
    found = checkpoint.resume(valid) if checkpoint is not None else None
    if found is not None:
        it, state, history, memo, reason = _resumed(
            found, restore, stop, name, checkpoint.path
        )
        resumed_from, converged = it, reason is not None
    else:
        it, state, history, memo, reason = 0, init(), {}, {}, None
        resumed_from, converged = 0, False
    while not converged and it < max_iter:
        it += 1
        state, record = step(state, it)
        for key, value in record.items():
            history.setdefault(key, []).append(value)
        reason = stop(history, memo)
        converged = reason is not None
        logger.debug("%s: iteration %d: %s", name, it, record)
        if callback is not None:
            callback(it, record, state)
        if checkpoint is not None and (
            it % checkpoint_every == 0 or converged or it >= max_iter
        ):
            small, keep = state, ()
            if before_commit is not None:
                small, keep = before_commit(it, state)
            checkpoint.commit(it, small, history, memo, converged, keep)
    if reason is not None:
        logger.info("%s: stopped after %d iterations (%s)", name, it, reason)
    if not converged and warn:
        _warn_not_converged(name, max_iter, stop, history, memo, stacklevel + 1)
    return IterationResult(state, it, history, converged, resumed_from, reason)


def _resumed(found: Resumed, restore, stop, name: str, path):
    """``(iterations, state, history, memo, stop reason)`` of a resumed fit.

    The rule of this fit decides, not the one the commit was written with: a tighter
    tol goes on from the committed state, a looser one stops at once.
    """
    state = found.state if restore is None else restore(found.state)
    reason = stop(found.history, found.memo)
    if found.converged and reason is None:
        logger.info(
            "%s: the commit had converged; the current stopping rule goes on", name
        )
    logger.info("%s: resuming from %s at iteration %d", name, path, found.n_iter)
    return found.n_iter, state, found.history, found.memo, reason


def _warn_not_converged(name: str, max_iter: int, stop, history, memo, stacklevel: int):
    """The ConvergenceWarning of a fit that reached ``max_iter`` (``stacklevel``
    counted from :func:`iterate`)."""
    detail = stop.describe(history, memo) if hasattr(stop, "describe") else ""
    warnings.warn(
        f"{name} did not converge in max_iter={max_iter} iterations"
        + (f" ({detail})" if detail else "")
        + "; increase max_iter or tol",
        ConvergenceWarning,
        stacklevel=stacklevel + 1,
    )


__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "AnyOf",
    "ChangeBelow",
    "IterationCheckpoint",
    "IterationResult",
    "NoImprovement",
    "Resumed",
    "StopRule",
    "ValueBelow",
    "iterate",
]
