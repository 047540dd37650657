"""The solver layer takes data and values, never the estimator (issue 47 item 1).

``covariance_eigh`` and ``tsqr`` called as the registry runs them, on a dask array
and :class:`~scalepca.solvers.wide.WideParams`, against LAPACK; ``tol`` handed down
as given, its default chosen in one place; the analysis tools' ``"auto"`` resolved
by the same cost model and recorded in ``solver_``.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from scipy import linalg as sla

from scalepca.analysis.bootstrap import BootstrapEOF
from scalepca.analysis.bootstrap import _solver_of as bootstrap_solver
from scalepca.analysis.hilbert_eof import _solver_of as hilbert_solver
from scalepca.solvers import covariance, tsqr
from scalepca.solvers.choice import (
    REGISTRY,
    TOOL_SOLVERS,
    Problem,
    predicted_seconds,
    resolve_tool,
)
from scalepca.solvers.wide import DEFAULT_TOL, Columns, WideParams, krylov_tol


def _data(n=300, d=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) @ np.diag(np.linspace(3.0, 0.1, d)) + 5.0
    return X, da.from_array(X, chunks=(70, d))


def _lapack(X, centre=True):
    Xc = X - X.mean(axis=0) if centre else X
    _, s, Vt = sla.svd(Xc, full_matrices=False)
    return s**2, Vt


def _aligned(V, ref):
    """``V``'s columns signed as the rows of ``ref``."""
    return V * np.sign(np.sum(V * ref.T, axis=0))


def test_the_registry_runs_every_solver_from_a_module():
    assert REGISTRY["covariance_eigh"].run is covariance
    assert REGISTRY["tsqr"].run is tsqr
    assert all(s.run is not None for s in REGISTRY.values())


@pytest.mark.parametrize("module", [covariance, tsqr], ids=["covariance", "tsqr"])
@pytest.mark.parametrize("centre", [True, False])
def test_one_pass_solvers_equal_lapack_from_data_and_values(module, centre):
    X, dX = _data()
    params = WideParams(4, centre=centre)
    first = module.start(dX, params)
    mom = first.stats
    cols = Columns({**mom, "ss": mom.get("ss", np.diag(mom.get("m2", np.eye(1))))})
    res = module.finish(dX, first, cols, params)
    values, Vt = _lapack(X, centre)
    np.testing.assert_allclose(res.values[:4], values[:4], rtol=1e-12)
    np.testing.assert_allclose(
        _aligned(res.vectors[:, :4], Vt[:4]), Vt[:4].T, atol=1e-10
    )


def test_covariance_spectrum_of_standardised_moments_is_the_correlation():
    X, dX = _data(seed=1)
    first = covariance.start(dX, WideParams(None))
    scale = X.std(axis=0, ddof=1)
    res = covariance.spectrum(first.stats, None, scale)
    corr = np.corrcoef(X.T)
    ref = np.linalg.eigvalsh(corr)[::-1] * (X.shape[0] - 1)
    np.testing.assert_allclose(res.values, ref, rtol=1e-12)


def test_tol_goes_down_as_given_and_its_default_is_chosen_once():
    assert krylov_tol(None) == DEFAULT_TOL == 0.0
    assert krylov_tol(1e-3) == 1e-3
    assert WideParams(3).tol is None  # the estimator gave none: the solver's default


def test_pca_tol_stops_krylov_and_ppca_runs_every_product():
    import scalepca

    rng = np.random.default_rng(2)
    X = rng.standard_normal((400, 3)) @ (10 * rng.standard_normal((3, 200)))
    dX = da.from_array(X + 0.01 * rng.standard_normal(X.shape), chunks=(70, 200))
    loose = scalepca.PCA(3, svd_solver="randomized", tol=1e-2, random_state=0)
    every = scalepca.PPCA(3, svd_solver="randomized", random_state=0)
    assert loose.fit(dX).n_passes_ < every.fit(dX).n_passes_ == 6


@pytest.mark.parametrize(
    "n, d",
    [(100, 5_000), (2_000, 50_000), (50_000, 200), (5_000, 500), (1_000, 1_000)],
)
def test_tools_auto_takes_the_smaller_side_where_it_is_cheaper(n, d):
    old = "gram" if n <= d else "covariance"
    boot = {"solver": "auto", "n_components": 4, "n_bootstraps": 100}
    assert bootstrap_solver(boot, n, d) == old
    assert hilbert_solver({"solver": "auto", "n_components": 4}, n, d) == old


def test_tools_auto_is_the_cheapest_prediction():
    p = Problem(20, 50, 4, replicates=100)
    choice = resolve_tool("bootstrap", "auto", p)
    table = TOOL_SOLVERS["bootstrap"]
    assert choice.solver == min(
        table, key=lambda name: predicted_seconds(name, p, table=table)
    )
    # a named solver is as given
    assert resolve_tool("bootstrap", "gram", p).solver == "gram"


def test_bootstrap_records_the_solver_auto_chose():
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((40, 600))
    tall = rng.standard_normal((600, 8))
    assert BootstrapEOF(2, n_bootstraps=20, random_state=0).fit(wide).solver_ == "gram"
    model = BootstrapEOF(2, n_bootstraps=20, random_state=0).fit(tall)
    assert model.solver_ == "covariance"
