"""The bad-input table: input × estimator (and the CLI rows) → exception type + message
fragment.

Every row of :data:`ROWS` is tried on every estimator of
:data:`.reliability.ESTIMATORS`. :func:`observe` tries one cell and :func:`judge`
lists how it misses its expectation; ``tests/test_bad_input.py`` asserts every cell,
:func:`observe_all` / :func:`observe_cli` give the figures of
``benchmarks/faults.py`` (bad inputs tried, unclear errors found) and
:func:`markdown` the table in ``docs/bad_input.md``
(``python -m tests.support.bad_input > docs/bad_input.md``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dask
import dask.array as da
import numpy as np

from .counting import ComputeCounter, counted_dask
from .reliability import ESTIMATORS, low_rank


# -- expectations ----------------------------------------------------------------------
@dataclass(frozen=True)
class Expect:
    """``exc=None``: the input is handled (the fit succeeds). ``na``: the row does
    not apply."""

    exc: type | None = None
    fragment: str = ""
    max_computes: int = 0
    na: str = ""

    def describe(self) -> str:
        if self.na:
            return f"n/a ({self.na})"
        if self.exc is None:
            return "handled"
        return f"{self.exc.__name__}: “{self.fragment}”"


OK = Expect()


def raises(exc, fragment, max_computes=0):
    return Expect(exc, fragment, max_computes)


@dataclass
class Row:
    """One bad input. ``build(case, est, tmp)`` returns a zero-argument callable
    doing the operation under test (preparations such as a first good fit happen
    inside ``build``, outside the counted region) and the ReadCounter of the data, if
    any."""

    key: str
    what: str
    build: Callable
    expect: Expect
    overrides: dict = field(default_factory=dict)
    params: Callable | None = None  # case -> parameter overrides of the estimator

    def expected(self, case) -> Expect:
        return self.overrides.get(case.name, self.expect)


def _data(case):
    """The case's training data as counted dask (reads of every block are counted)."""
    X = case.X()
    return counted_dask(X, case.chunks(40 if case.two_d_blocks else 50))


def _fit(arr_fn):
    def build(case, est, tmp):
        X, counter = arr_fn(case, tmp)
        return (lambda: est.fit(X)), counter

    return build


def _with_value(value, row=333, col=5):
    def make(case, tmp):
        X = case.X().copy()
        X[row % X.shape[0], col] = (
            value  # not in the first chunk, nor a landmark by design
        )
        return counted_dask(X, case.chunks(40 if case.two_d_blocks else 50))

    return make


def _object_with_text(case):
    X = case.X().astype(object)
    X[3, 2] = "n/a"
    return X


def _plain(fn):
    return lambda case, tmp: (fn(case), None)


def _counted(fn):
    def make(case, tmp):
        X = fn(case)
        return (
            counted_dask(X, (50,) + X.shape[1:])
            if X.ndim >= 1 and X.size
            else (X, None)
        )

    return make


def _unknown_chunks(case, tmp):
    X, counter = _data(case)
    return X[X[:, 0] > -np.inf], counter  # boolean mask: row chunk sizes unknown (nan)


def _split_features(case, tmp):
    X = case.X()
    return counted_dask(X, (40, 30) if case.two_d_blocks else (50, 5))


def _transform_mismatch(case, est, tmp):
    X = case.X()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    Y, counter = counted_dask(np.hstack([X, X[:, :1]]), (50, X.shape[1] + 1))
    return (lambda: est.transform(Y)), counter


def _path_missing(case, est, tmp):
    import scalepca

    return (
        lambda: est.fit(scalepca.open_matrix(str(tmp / "no-such-store.zarr")))
    ), None


def _path_as_x(case, est, tmp):
    return (lambda: est.fit(str(tmp / "data.zarr"))), None


def _zarr_3d_store(tmp):
    import zarr

    path = tmp.parent / f"{tmp.name}-z3.zarr"  # outside the checked directory
    z = zarr.create_array(str(path), shape=(40, 3, 4), chunks=(10, 3, 4), dtype="f8")
    z[...] = 1.0
    return path, z


def _zarr_3d_array(case, est, tmp):
    _, z = _zarr_3d_store(tmp)
    return (lambda: est.fit(z)), None


def _zarr_3d_open(case, est, tmp):
    import scalepca

    path, _ = _zarr_3d_store(tmp)
    return (lambda: est.fit(scalepca.open_matrix(str(path)))), None


def _csr(case):
    import scipy.sparse

    return scipy.sparse.csr_matrix(case.X())


def _dask_of_csr(case):
    return da.from_array(
        _csr(case), chunks=(50, -1)
    )  # blocks are csr_matrix (its _meta too)


TWO_D = "must be 2-D"
SPARSE_REFUSED = {
    "PPCA-EM": raises(ValueError, "PPCA(solver='em') needs dense blocks"),
    "RobustPCA": raises(TypeError, "RobustPCA does not take sparse input"),
}
UNUSED_SEED = "random_state is not used by this solver"
NONFINITE = "NaN or infinite"
RANGE = "out of range"

ROWS = [
    Row(
        "nan",
        "one NaN (row 333)",
        _fit(_with_value(np.nan)),
        raises(ValueError, NONFINITE, 1),
        {"PPCA-EM": OK, "KernelPCA": raises(ValueError, NONFINITE, 2)},
    ),
    Row(
        "inf",
        "one +inf (row 333)",
        _fit(_with_value(np.inf)),
        raises(ValueError, NONFINITE, 1),
        {
            "PPCA-EM": raises(ValueError, "infinite", 1),
            "KernelPCA": raises(ValueError, NONFINITE, 2),
        },
    ),
    Row(
        "empty-samples",
        "0 × 12 array",
        _fit(_plain(lambda c: np.empty((0, 12)))),
        raises(ValueError, "0 sample(s)"),
    ),
    Row(
        "empty-features",
        "400 × 0 array",
        _fit(_plain(lambda c: np.empty((400, 0)))),
        raises(ValueError, "0 feature(s)"),
    ),
    Row(
        "one-sample",
        "1 × 12 (n_components=3)",
        _fit(_counted(lambda c: c.X()[:1])),
        raises(ValueError, RANGE),
        {"RobustPCA": OK},
    ),
    Row(
        "one-feature",
        "400 × 1 (n_components=3)",
        _fit(_counted(lambda c: c.X()[:, :1])),
        raises(ValueError, RANGE),
        {"RobustPCA": OK, "KernelPCA": OK},
    ),
    Row(
        "1-D",
        "1-D array of 400",
        _fit(_counted(lambda c: c.X()[:, 0])),
        raises(ValueError, TWO_D),
    ),
    Row(
        "3-D",
        "400 × 3 × 4 array",
        _fit(_counted(lambda c: c.X()[:, :12].reshape(-1, 3, 4))),
        raises(ValueError, TWO_D),
    ),
    Row(
        "strings",
        "dtype <U (numbers as text)",
        _fit(_plain(lambda c: c.X().astype(str))),
        raises(TypeError, "unicode strings"),
    ),
    # an object array of numbers is converted, as scikit-learn's validation does; one
    # that holds text is refused by name
    Row(
        "object",
        "dtype object (numbers)",
        _fit(_plain(lambda c: c.X().astype(object))),
        OK,
    ),
    Row(
        "object-text",
        "dtype object with a text entry",
        _fit(_plain(_object_with_text)),
        raises(ValueError, "could not convert string to float: 'n/a'"),
    ),
    Row(
        "complex",
        "dtype complex128",
        _fit(_counted(lambda c: c.X() + 1j)),
        raises(ValueError, "complex data not supported"),
    ),
    Row(
        "datetime",
        "dtype datetime64",
        _fit(_plain(lambda c: np.zeros((40, 12), dtype="datetime64[s]"))),
        raises(TypeError, "datetime"),
    ),
    Row(
        "n_components=0",
        "n_components=0 (RobustPCA: rank_guess=0)",
        _fit(lambda c, t: _data(c)),
        raises(ValueError, "n_components=0 is out of range"),
        {"RobustPCA": raises(ValueError, "rank_guess must be >= 1")},
        params=lambda c: (
            {"n_components": 0} if c.has_n_components else {"rank_guess": 0}
        ),
    ),
    Row(
        "n_components>min(n,d)",
        "n_components=10⁶",
        _fit(lambda c, t: _data(c)),
        raises(ValueError, RANGE),
        {"RobustPCA": Expect(na="no n_components: the rank is found by the ALM")},
        params=lambda c: {"n_components": 10**6} if c.has_n_components else {},
    ),
    Row(
        "n_components=2.5",
        "n_components=2.5 (RobustPCA: rank_guess=2.5)",
        _fit(lambda c, t: _data(c)),
        raises(TypeError, "must be an integer"),
        {"RobustPCA": raises(TypeError, "rank_guess must be an integer")},
        params=lambda c: (
            {"n_components": 2.5} if c.has_n_components else {"rank_guess": 2.5}
        ),
    ),
    Row(
        "random_state=-1",
        "random_state=-1",
        _fit(lambda c, t: _data(c)),
        raises(ValueError, "random_state must be None, a non-negative int"),
        {
            n: Expect(na=UNUSED_SEED)
            for n in ("PCA", "PPCA", "PPCA-EM", "SparsePCA-elasticnet")
        },
        params=lambda c: {"random_state": -1},
    ),
    # sparse input is taken as CSR row blocks (issue 20) except where a method needs
    # dense rows, which says so before any compute
    Row(
        "scipy-sparse",
        "scipy.sparse CSR matrix",
        _fit(_plain(_csr)),
        OK,
        SPARSE_REFUSED,
    ),
    Row(
        "dask-of-sparse",
        "dask array of scipy.sparse CSR blocks",
        _fit(_plain(_dask_of_csr)),
        OK,
        SPARSE_REFUSED,
    ),
    Row(
        "split-features",
        "features split over 3 column chunks",
        _fit(_split_features),
        OK,
    ),
    Row(
        "unknown-chunks",
        "dask array with unknown row chunk sizes (boolean mask)",
        _fit(_unknown_chunks),
        raises(ValueError, "compute_chunk_sizes"),
    ),
    Row(
        "transform-features",
        "transform(X) with 13 features, fitted with 12",
        _transform_mismatch,
        raises(ValueError, "features as input"),
    ),
    Row(
        "store-missing",
        "open_matrix(path that does not exist)",
        _path_missing,
        raises(FileNotFoundError, "no zarr store"),
    ),
    Row(
        "path-as-X",
        "fit('data.zarr') — a path, not an array",
        _path_as_x,
        raises(TypeError, "open_matrix"),
    ),
    Row(
        "zarr-3-D",
        "fit(zarr array of 3 dims)",
        _zarr_3d_array,
        raises(ValueError, TWO_D),
    ),
    Row(
        "open-zarr-3-D",
        "open_matrix(zarr store of 3 dims)",
        _zarr_3d_open,
        raises(ValueError, "2-D (sample × feature) array is needed"),
    ),
]


# -- running one cell ------------------------------------------------------------------
@dataclass
class Observed:
    exc: BaseException | None
    computes: int
    reads: int
    fitted_after: bool
    leftovers: list

    @property
    def outcome(self) -> str:
        if self.exc is None:
            return "handled"
        return f"{type(self.exc).__name__}: {self.exc}"


def observe(row: Row, case, tmp: Path, counting=None) -> Observed:
    """Run ``row`` on ``case`` in the empty directory ``tmp`` and record what happened.

    ``counting(max_computes)`` is a context manager yielding an object with
    ``.count`` (the ``raise_if_dask_computes`` fixture in tests; a plain counter in
    the benchmark).
    """
    over = row.params(case) if row.params else {}
    if case.checkpoint:
        over = {"checkpoint": str(tmp / "ckpt.zarr"), **over}
    est = case.make(**over)
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        act, counter = row.build(case, est, tmp)
        before = {
            p.name for p in tmp.iterdir()
        }  # e.g. the checkpoint of a first good fit
        base_reads = counter.reads if counter is not None else 0
        exc = None
        ctx = counting or _count_computes
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exp = row.expected(case)
            with ctx(exp.max_computes if exp.exc else 10**9) as cc:
                try:
                    act()
                except Exception as err:  # recorded and judged by the caller
                    exc = err
    finally:
        os.chdir(cwd)
    reads = (counter.reads - base_reads) if counter is not None else 0
    leftovers = sorted(p.name for p in tmp.iterdir() if p.name not in before)
    fitted = (
        bool(est.__sklearn_is_fitted__()) if row.key != "transform-features" else False
    )
    return Observed(exc, cc.count, reads, fitted, leftovers)


@contextlib.contextmanager
def _count_computes(max_computes=0):
    counter = ComputeCounter()
    with dask.config.set(scheduler=counter):
        yield counter


def judge(row: Row, case, obs: Observed) -> list[str]:
    """The ways ``obs`` misses the expectation (empty: as expected)."""
    exp = row.expected(case)
    problems = []
    if exp.exc is None:
        if obs.exc is not None:
            problems.append(f"expected to be handled, raised {obs.outcome}")
        return problems
    if obs.exc is None:
        return [f"expected {exp.describe()}, but nothing was raised"]
    if not isinstance(obs.exc, exp.exc):
        problems.append(f"expected {exp.exc.__name__}, got {obs.outcome}")
    elif exp.fragment.lower() not in str(obs.exc).lower():
        problems.append(f"message does not say “{exp.fragment}”: {obs.exc}")
    if obs.computes > exp.max_computes:
        problems.append(
            f"{obs.computes} dask computes before "
            f"the raise (allowed {exp.max_computes})"
        )
    if exp.max_computes == 0 and obs.reads:
        problems.append(f"{obs.reads} data blocks read before the raise")
    if obs.fitted_after:
        problems.append("the estimator claims to be fitted after the failed fit")
    if obs.leftovers:
        problems.append(f"left behind: {obs.leftovers}")
    return problems


def cells():
    for row in ROWS:
        for case in ESTIMATORS:
            yield row, case


# -- the CLI ---------------------------------------------------------------------------
CLI_METHODS = {
    "PCA": "pca",
    "PPCA": "ppca",
    "KernelPCA": "kernel_pca",
    "SparsePCA": "sparse_pca",
    "RobustPCA": "robust_pca",
}


def _config(tmp: Path, method: str, data: str, **model) -> Path:
    import yaml

    params = {} if method == "robust_pca" else {"n_components": 3}
    params.update(model)
    cfg = {
        "data": {"path": data},
        "model": {"method": method, **params},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"store": str(tmp / "out"), "model": True, "scores": True},
        "progress": False,
    }
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return path


def _good_store(tmp: Path, X=None) -> str:
    import zarr

    X = low_rank(0) if X is None else X
    path = tmp / "data.zarr"
    z = zarr.create_array(str(path), shape=X.shape, chunks=(50, X.shape[1]), dtype="f8")
    z[...] = X
    return str(path)


@dataclass
class CliRow:
    key: str
    what: str
    args: Callable  # (tmp, method) -> list of CLI arguments
    fragment: str
    may_compute: bool = False
    overrides: dict = field(default_factory=dict)  # method -> fragment (None: handled)


def _nan_store(tmp):
    X = low_rank(0)
    X[333, 5] = np.nan
    return _good_store(tmp, X)


CLI_ROWS = [
    CliRow(
        "config-wrong-type",
        "n_components: 'three' in the YAML",
        lambda t, m: [
            "run",
            str(
                _config(
                    t,
                    m,
                    _good_store(t),
                    **(
                        {"rank_guess": "three"}
                        if m == "robust_pca"
                        else {"n_components": "three"}
                    ),
                )
            ),
        ],
        "three",
    ),
    CliRow(
        "config-unknown-key",
        "misspelt model key n_compnents",
        lambda t, m: ["run", str(_config(t, m, _good_store(t), n_compnents=3))],
        "n_compnents",
    ),
    CliRow(
        "config-section-type",
        "data: a string instead of a mapping",
        lambda t, m: [
            "run",
            str(_write_yaml(t, {"data": "x.zarr", "model": {"method": m}})),
        ],
        "data",
    ),
    CliRow(
        "store-missing",
        "data.path does not exist",
        lambda t, m: ["run", str(_config(t, m, str(t / "nope.zarr")))],
        "no zarr store",
    ),
    CliRow(
        "zarr-3-D",
        "data.path is a 3-D zarr array",
        lambda t, m: ["run", str(_config(t, m, str(_zarr_3d_store(t / "x")[0])))],
        "dimensions",
    ),
    CliRow(
        "n_components>min(n,d)",
        "n_components: 1000 in the YAML",
        lambda t, m: [
            "run",
            str(
                _config(
                    t,
                    m,
                    _good_store(t),
                    **(
                        {"rank_guess": 0}
                        if m == "robust_pca"
                        else {"n_components": 1000}
                    ),
                )
            ),
        ],
        "out of range",
        overrides={"robust_pca": "rank_guess must be >= 1"},
    ),
    CliRow(
        "nan",
        "a NaN in the data",
        lambda t, m: ["run", str(_config(t, m, _nan_store(t)))],
        "NaN",
        may_compute=True,
    ),
    CliRow(
        "transform-store-missing",
        "transform with a model store that does not exist",
        lambda t, m: [
            "transform",
            str(t / "no-model.zarr"),
            _good_store(t),
            "--out",
            str(t / "out"),
        ],
        "no zarr store",
    ),
]


def _write_yaml(tmp, cfg):
    import yaml

    path = tmp / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run_cli(row: CliRow, method: str, tmp: Path, scheduler=None):
    """``(exit code, stderr, tasks run, output left)`` of one CLI row."""
    from scalepca import cli

    args = row.args(tmp, method)
    if scheduler is not None and args[0] in ("run", "transform"):
        args = args + ["--scheduler", scheduler.scheduler_address, "--no-progress"]
    before = scheduler.scheduler.transition_counter if scheduler is not None else 0
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(args)
    after = scheduler.scheduler.transition_counter if scheduler is not None else 0
    out = tmp / "out"
    left = (
        sorted(str(p.relative_to(tmp)) for p in out.rglob("*")) if out.exists() else []
    )
    return code, err.getvalue(), after - before, left


# -- the table for the docs ------------------------------------------------------------
def observe_all(tmp_root: Path):
    """Every cell of the table: ``[(row, case, expected, observed, problems)]``."""
    import tempfile

    results = []
    for row, case in cells():
        exp = row.expected(case)
        if exp.na:
            results.append((row, case, exp, None, []))
            continue
        work = Path(tempfile.mkdtemp(dir=tmp_root))
        obs = observe(row, case, work)
        results.append((row, case, exp, obs, judge(row, case, obs)))
    return results


def observe_cli(tmp_root: Path):
    import tempfile

    out = []
    for row in CLI_ROWS:
        for method in CLI_METHODS.values():
            work = Path(tempfile.mkdtemp(dir=tmp_root))
            code, err, tasks, left = run_cli(row, method, work)
            fragment = row.overrides.get(method, row.fragment)
            problems = []
            if code != 2:
                problems.append(f"exit code {code}")
            if fragment.lower() not in err.lower():
                problems.append(f"message does not say “{fragment}”")
            if left:
                problems.append(f"left behind {left}")
            out.append((row, method, code, err.strip(), problems))
    return out


def markdown(results, cli_results) -> str:
    names = [c.name for c in ESTIMATORS]
    lines = [
        "# Bad input: what each estimator and the CLI do",
        "",
        "Generated by `python -m tests.support.bad_input "
        "> docs/bad_input.md` from the table that",
        "`tests/test_bad_input.py` asserts. Every "
        "error below is raised before any pass over the",
        "data (no dask compute, no block read) — except "
        "non-finite values, which only a read can",
        "find: those are reported at the end of the "
        "first pass (max. computes in brackets) — and",
        "leaves nothing behind (the estimator is not "
        "fitted, no checkpoint/output is created).",
        "",
        "Legend: **handled** — the input is accepted "
        "and gives the right fit; `Type: “fragment”`",
        "— the exception raised and a fragment of "
        "its message; ✗ — an unclear or late error",
        "(see the notes below the table).",
        "",
        "| input | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    by = {(r.key, c.name): (exp, obs, probs) for r, c, exp, obs, probs in results}
    for row in ROWS:
        cells_ = []
        for name in names:
            exp, obs, probs = by[(row.key, name)]
            if exp.na:
                cells_.append("n/a")
                continue
            if obs.exc is None:
                text = "handled"
            else:
                text = f"`{type(obs.exc).__name__}`"
                if exp.max_computes:
                    text += f" ({obs.computes})"
            cells_.append(("✗ " if probs else "") + text)
        lines.append(f"| {row.what} | " + " | ".join(cells_) + " |")
    lines += ["", "## Messages", ""]
    for row in ROWS:
        seen = {}
        for r, c, _, o, _ in results:
            if r.key == row.key and o is not None and o.exc is not None:
                text = re.sub(
                    r"'/[^']*/([^/']+)'", r"'…/\1'", f"{type(o.exc).__name__}: {o.exc}"
                )
                seen.setdefault(text, []).append(c.name)
        for text, names_ in seen.items():
            who = (
                "all"
                if len(names_) == len([c for c in ESTIMATORS if not row.expected(c).na])
                else ", ".join(names_)
            )
            lines.append(f"- **{row.what}** ({who}) — {text}")
    bad = [(r, c, p) for r, c, _, o, p in results if p and o is not None]
    lines += ["", "## Unclear or late errors", ""]
    lines += [f"- {r.what} × {c.name}: {'; '.join(p)}" for r, c, p in bad] or ["none"]
    lines += [
        "",
        "## Command line (`scalepca run` / `transform`)",
        "",
        "Exit code 2 and one line on stderr for "
        "each; nothing written under `output.store`.",
        "",
        "| input | " + " | ".join(CLI_METHODS.values()) + " |",
        "|---|" + "---|" * len(CLI_METHODS),
    ]
    byc = {(r.key, m): (code, err, p) for r, m, code, err, p in cli_results}
    msgs = {}
    for row in CLI_ROWS:
        cells_ = []
        for m in CLI_METHODS.values():
            code, err, probs = byc[(row.key, m)]
            cells_.append(("✗ " if probs else "") + f"exit {code}")
            msgs.setdefault(row.key, re.sub(r"'/[^']*/([^/']+)'", r"'…/\1'", err))
        lines.append(f"| {row.what} | " + " | ".join(cells_) + " |")
    lines += ["", "Messages (pca):", ""]
    lines += [f"- **{r.what}** — `{msgs[r.key]}`" for r in CLI_ROWS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        res = observe_all(Path(d))
        cli_res = observe_cli(Path(d))
    print(markdown(res, cli_res), end="")
