"""Bad input, table-driven: input × estimator (and the CLI) → exception type + message
fragment.

Every row of the table ``tests/support/bad_input.ROWS`` is tried on every estimator of
``tests/support/reliability.ESTIMATORS``.
For an expected error the test asserts

* the exception type and a fragment of its message that names the problem;
* no dask compute before the raise (``raise_if_dask_computes``) and no block of the data
  read (``counted_dask``) — except for non-finite values, which can only be found by
  reading the data: those may use the first pass (``Expect.max_computes``) and no more;
* nothing left behind: the estimator is not fitted afterwards, and the working directory
  (where RobustPCA would create its checkpoint) is still empty.

The same table, run by its ``observe_all``, gives the figures of
``benchmarks/faults.py`` (bad inputs tried, unclear errors found) and the table in
``docs/bad_input.md`` (``python -m tests.support.bad_input > docs/bad_input.md``).
"""

from __future__ import annotations

import warnings

import dask.array as da
import pytest

from .support.bad_input import CLI_METHODS, CLI_ROWS, cells, judge, observe, run_cli
from .support.compare import assert_same_fit
from .support.reliability import summary

#: cells whose error is right but late (none now: every estimator checks random_state
#: with its other parameters, before the first pass); an entry makes its cell a strict
#: xfail
LATE: dict = {}


# -- the test --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "row, case",
    [
        pytest.param(
            r,
            c,
            id=f"{r.key}-{c.name}",
            marks=[pytest.mark.xfail(strict=True, reason=LATE[r.key, c.name])]
            if (r.key, c.name) in LATE
            else [],
        )
        for r, c in cells()
    ],
)
def test_bad_input(row, case, tmp_path, raise_if_dask_computes):
    exp = row.expected(case)
    if exp.na:
        pytest.skip(f"n/a: {exp.na}")
    work = tmp_path / "work"
    work.mkdir()
    obs = observe(row, case, work, counting=raise_if_dask_computes)
    problems = judge(row, case, obs)
    assert not problems, f"{row.key} × {case.name}: " + "; ".join(problems)
    if row.key == "split-features" and case.name != "RobustPCA":
        # handled means the same fit as with features in one chunk
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = summary(case.make().fit(da.from_array(case.X(), chunks=(50, 5))))
            b = summary(case.make().fit(da.from_array(case.X(), chunks=(50, -1))))
        assert_same_fit(a, b, case.rtol_chunks, case.name)


# -- the CLI ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def inproc_cluster():
    """An in-process scheduler for the CLI rows: its transition counter shows whether
    any task ran before the error."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as cluster:
        yield cluster


@pytest.mark.parametrize(
    "row, method",
    [
        pytest.param(r, m, id=f"cli-{r.key}-{m}")
        for r in CLI_ROWS
        for m in CLI_METHODS.values()
    ],
)
def test_cli_bad_input(row, method, tmp_path, inproc_cluster):
    code, err, tasks, left = run_cli(row, method, tmp_path, inproc_cluster)
    fragment = row.overrides.get(method, row.fragment)
    assert code == 2, (code, err)
    # the error in one line, last; before it only warnings the user would see on a
    # terminal too (e.g. kernel PCA's landmark count), one line each in the CLI's words
    *before, last = err.split("\n")[:-1] if err.endswith("\n") else [err, ""]
    assert last.startswith("scalepca: error: "), err
    assert all(line.startswith("scalepca: warning: ") for line in before), err
    assert fragment.lower() in err.lower(), err
    if not row.may_compute:
        assert tasks == 0, f"{tasks} task transitions before the error"
    assert not (tmp_path / "out").exists(), f"output left behind: {left}"
