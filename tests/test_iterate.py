"""The driver of iterative fits (:mod:`scalepca.models._iterate`), on its own.

The test problem is a small fixed-point iteration with a known limit: Newton's
iteration for √a, ``x ← (x + a/x) / 2``, as a state ``{"x": ndarray, "count": int}``;
its history records the squared error ``(x² − a)²`` summed, which falls quadratically
to 0.
"""

from __future__ import annotations

import os
import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from scalepca.models._iterate import (
    FORMAT_VERSION,
    AnyOf,
    ChangeBelow,
    IterationCheckpoint,
    NoImprovement,
    ValueBelow,
    iterate,
)

A = np.array([2.0, 3.0, 10.0])


def _init():
    return {"x": np.ones(3), "count": 0, "note": None}


def _step(state, it):
    x = (state["x"] + A / state["x"]) / 2
    err = float(((x**2 - A) ** 2).sum())
    return {"x": x, "count": state["count"] + 1, "note": None}, {"err": err}


def _commits(path):
    return sorted(n for n in os.listdir(path) if n.startswith("state_"))


class Interrupt(RuntimeError):
    pass


def _interrupting(after):
    def step(state, it):
        if it > after:
            raise Interrupt(it)
        return _step(state, it)

    return step


# -- stopping --------------------------------------------------------------------------
def test_stops_on_the_rule_and_records_the_history():
    run = iterate(_step, _init, stop=ValueBelow("err", 1e-20), max_iter=50)
    assert run.converged and run.reason.startswith("err")
    errs = run.history["err"]
    assert len(errs) == run.n_iter == run.state["count"]
    assert errs[-1] <= 1e-20 < errs[-2]  # stopped at the first step under the tolerance
    np.testing.assert_allclose(run.state["x"], np.sqrt(A), rtol=1e-15)
    assert run.resumed_from == 0


def test_change_below_absolute_and_relative():
    h = {"c": [10.0, 5.0, 4.9999]}
    assert ChangeBelow("c", 1e-3)(h, {}) is not None
    assert ChangeBelow("c", 1e-5)(h, {}) is None
    assert (
        ChangeBelow("c", 1e-4, relative=True)(h, {}) is not None
    )  # 1e-4 / 4.9999 ≤ 1e-4
    assert ChangeBelow("c", 1e-6, relative=True)(h, {}) is None
    assert (
        ChangeBelow("c", 1e-6, relative=True)({"c": [1.0, 1.5]}, {}) is not None
    )  # rose
    assert ChangeBelow("c", 1.0)({"c": [1.0]}, {}) is None  # needs two values


def test_no_improvement_keeps_its_smoothed_state_in_the_memo():
    rule = NoImprovement("cost", patience=3)
    memo, h = {}, {"cost": []}
    for c in [5.0, 4.0, 3.0]:
        h["cost"].append(c)
        assert rule(h, memo) is None
    for c in [3.0, 3.5, 3.0]:  # the smoothed cost stays ≥ its best three times
        h["cost"].append(c)
        out = rule(h, memo)
    assert out is not None and memo["no_improve"] == 3 and memo["best"] == 3.0
    # weights from another history key: w = 0.5 halves the step towards each new value
    rule = NoImprovement("cost", patience=None, weight_key="w")
    memo = {}
    rule({"cost": [4.0, 2.0], "w": [0.5, 0.5]}, memo)
    assert memo["ewa"] == 3.0 and memo["seen"] == 2


def test_any_of_gives_each_rule_its_own_memo():
    rule = AnyOf(ChangeBelow("err", 0.0), NoImprovement("err", patience=2))
    run = iterate(_step, _init, stop=rule, max_iter=100)
    assert run.converged and "no improvement" in run.reason


def test_max_iter_warns_and_says_where_the_rule_stands():
    with pytest.warns(
        ConvergenceWarning,
        match=r"Newton did not converge in max_iter=3 "
        r"iterations \(last change of the err: .*tol=1e-30\); increase max_iter",
    ):
        run = iterate(
            _step, _init, stop=ChangeBelow("err", 1e-30), max_iter=3, name="Newton"
        )
    assert not run.converged and run.n_iter == 3 and run.reason is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        iterate(_step, _init, stop=ChangeBelow("err", 1e-30), max_iter=3, warn=False)


def test_callback_sees_every_iteration():
    seen = []
    iterate(
        _step,
        _init,
        stop=ValueBelow("err", 1e-20),
        max_iter=50,
        callback=lambda it, record, state: seen.append((it, record["err"])),
    )
    assert [it for it, _ in seen] == list(range(1, len(seen) + 1))


# -- checkpoints -----------------------------------------------------------------------
def test_resume_after_an_interruption_ends_where_an_uninterrupted_run_ends(tmp_path):
    stop = AnyOf(ValueBelow("err", 1e-25), NoImprovement("err", patience=50))
    fresh = iterate(_step, _init, stop=stop, max_iter=50)
    path = tmp_path / "ck"
    with pytest.raises(Interrupt):
        iterate(
            _interrupting(4),
            _init,
            stop=stop,
            max_iter=50,
            checkpoint=IterationCheckpoint(path, {"a": A.tolist()}),
            checkpoint_every=2,
        )
    assert _commits(path) == ["state_000004"]  # older commits pruned
    calls = []

    def init():
        calls.append(1)
        return _init()

    resumed = iterate(
        _step,
        init,
        stop=stop,
        max_iter=50,
        checkpoint=IterationCheckpoint(path, {"a": A.tolist()}),
        checkpoint_every=2,
    )
    assert not calls and resumed.resumed_from == 4
    assert resumed.n_iter == fresh.n_iter and resumed.converged
    assert resumed.history == fresh.history
    np.testing.assert_array_equal(resumed.state["x"], fresh.state["x"])
    assert (
        resumed.state["count"] == fresh.state["count"] and resumed.state["note"] is None
    )
    # the final commit resumes without a step
    again = iterate(
        _interrupting(0),
        _init,
        stop=stop,
        max_iter=50,
        checkpoint=IterationCheckpoint(path, {"a": A.tolist()}),
    )
    assert again.n_iter == fresh.n_iter and again.resumed_from == fresh.n_iter


def test_resume_after_max_iter_continues(tmp_path):
    stop = ValueBelow("err", 1e-25)
    fresh = iterate(_step, _init, stop=stop, max_iter=50)
    path = tmp_path / "ck"
    with pytest.warns(ConvergenceWarning):
        iterate(
            _step,
            _init,
            stop=stop,
            max_iter=2,
            checkpoint=IterationCheckpoint(path, {}),
            checkpoint_every=10,
        )
    assert _commits(path) == ["state_000002"]  # committed at max_iter
    run = iterate(
        _step, _init, stop=stop, max_iter=50, checkpoint=IterationCheckpoint(path, {})
    )
    assert run.resumed_from == 2 and run.history == fresh.history


def test_resume_applies_the_stopping_rule_and_max_iter_of_the_resumed_fit(tmp_path):
    """A commit that stopped under a loose tol goes on to a tighter one (the same
    iterations as a fresh fit to it); a looser tol, or a max_iter already reached,
    ends without a step."""
    path = tmp_path / "ck"
    loose = iterate(
        _step,
        _init,
        stop=ValueBelow("err", 1e-3),
        max_iter=50,
        checkpoint=IterationCheckpoint(path, {}),
    )
    assert loose.converged and loose.n_iter == 4
    fresh = iterate(_step, _init, stop=ValueBelow("err", 1e-25), max_iter=50)
    tight = iterate(
        _step,
        _init,
        stop=ValueBelow("err", 1e-25),
        max_iter=50,
        checkpoint=IterationCheckpoint(path, {}),
    )
    assert (
        tight.resumed_from == 4 and tight.converged and tight.n_iter == fresh.n_iter > 4
    )
    assert tight.history == fresh.history
    np.testing.assert_array_equal(tight.state["x"], fresh.state["x"])
    # looser again: the committed history already meets it, no step is taken
    again = iterate(
        _interrupting(0),
        _init,
        stop=ValueBelow("err", 1e-3),
        max_iter=50,
        checkpoint=IterationCheckpoint(path, {}),
    )
    assert (
        again.converged
        and again.n_iter == fresh.n_iter
        and again.resumed_from == fresh.n_iter
    )
    # a commit at max_iter=2 resumed with max_iter=1: nothing to do, and not converged
    short = tmp_path / "short"
    with pytest.warns(ConvergenceWarning):
        iterate(
            _step,
            _init,
            stop=ValueBelow("err", 1e-25),
            max_iter=2,
            checkpoint=IterationCheckpoint(short, {}),
        )
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        run = iterate(
            _interrupting(0),
            _init,
            stop=ValueBelow("err", 1e-25),
            max_iter=1,
            checkpoint=IterationCheckpoint(short, {}),
        )
    assert run.n_iter == 2 and not run.converged


def test_a_checkpoint_of_another_problem_or_format_is_refused(tmp_path):
    path = tmp_path / "ck"
    iterate(
        _step,
        _init,
        stop=ValueBelow("err", 1e-20),
        max_iter=50,
        checkpoint=IterationCheckpoint(path, {"a": [2.0, 3.0], "k": 2}),
    )
    with pytest.raises(ValueError, match=r"different problem \(k: 2 there, 3 now\)"):
        iterate(
            _step,
            _init,
            stop=ValueBelow("err", 1e-20),
            max_iter=50,
            checkpoint=IterationCheckpoint(path, {"a": [2.0, 3.0], "k": 3}),
        )
    # a commit without a format version and one of another version
    from scalepca.io._checkpoint import CheckpointStore

    for attrs, said in [
        ({"n_iter": 9}, "no format version"),
        (
            {"format": "scalepca-iterate", "version": FORMAT_VERSION + 1},
            f"version {FORMAT_VERSION + 1}",
        ),
    ]:
        store = CheckpointStore(tmp_path / said.replace(" ", "_"))
        store.commit(9, {"x": np.ones(3)}, attrs)
        with pytest.raises(
            ValueError,
            match=rf"{said}.*reads 'scalepca-iterate' version "
            rf"{FORMAT_VERSION} only",
        ):
            iterate(
                _step,
                _init,
                stop=ValueBelow("err", 1e-20),
                max_iter=50,
                checkpoint=IterationCheckpoint(store.path, {}),
            )


def test_large_state_beside_the_commits(tmp_path):
    """A chunked array kept in the checkpoint store (RobustPCA's T), referred to by
    name."""
    path = tmp_path / "ck"

    def init():
        return {"big": da.ones((6, 4), chunks=(3, 4)), "n": 0}

    def step(state, it):
        return {"big": state["big"] * 2, "n": state["n"] + 1}, {
            "sum": float(state["big"].sum())
        }

    def before_commit(it, state, ck):
        name = f"big_{it:06d}"
        ck.store.create(name, (6, 4), (3, 4))
        state["big"].store(ck.store.root[name], lock=False)
        return {"big": name, "n": state["n"]}, {name}

    def restore(
        ck,
    ):  # read now: a later commit prunes big_000003, which a lazy array reads
        return lambda st: {
            "big": da.from_array(ck.store.array(st["big"]).compute(), chunks=(3, 4)),
            "n": st["n"],
        }

    fresh = iterate(step, init, stop=ValueBelow("sum", -1), max_iter=5, warn=False)
    ck = IterationCheckpoint(path, {}, prune_prefixes=("big_",))
    with pytest.raises(Interrupt):
        iterate(
            lambda s, it: (
                step(s, it) if it <= 3 else (_ for _ in ()).throw(Interrupt())
            ),
            init,
            stop=ValueBelow("sum", -1),
            max_iter=5,
            checkpoint=ck,
            checkpoint_every=1,
            before_commit=lambda it, s: before_commit(it, s, ck),
        )
    assert sorted(os.listdir(path)) == ["big_000003", "state_000003", "zarr.json"]
    ck = IterationCheckpoint(path, {}, prune_prefixes=("big_",))
    run = iterate(
        step,
        init,
        stop=ValueBelow("sum", -1),
        max_iter=5,
        checkpoint=ck,
        warn=False,
        restore=restore(ck),
        valid=lambda st: os.path.isdir(path / st["big"]),
        before_commit=lambda it, s: before_commit(it, s, ck),
    )
    assert run.resumed_from == 3 and run.history == fresh.history
    np.testing.assert_array_equal(
        run.state["big"].compute(), fresh.state["big"].compute()
    )
