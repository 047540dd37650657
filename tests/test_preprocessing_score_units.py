"""``score_samples`` and ``score`` of PCA and PPCA are log-densities of the data in the
units the user holds them (issue 38, a finding of the contract matrix): every
preparation the model applies to its input — weights from ``open_matrix``,
``standardize=True``, features left out as all-NaN (a land mask) — is undone by its
Jacobian, so that the answer is ``scipy.stats.multivariate_normal(mean, C).logpdf(x)``
on the raw data, with the model's covariance carried back to the data's units, over the
features the model keeps.

Before the fix, weights were the one preparation not undone (no Σ log w): the score
was that of the weighted data, while with ``standardize`` it was that of the raw
data.
"""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from scipy import stats

import scalepca

xr = pytest.importorskip("xarray")


# -- the dense reference ---------------------------------------------------------------
def _model_covariance(Y, k: int, estimator: str):
    """Mean and covariance of the Gaussian model of ``Y`` (n × d, NumPy eigh): PCA
    keeps scikit-learn's noise variance (the mean of the min(n, d) − k trailing
    eigenvalues of the n − 1 covariance), PPCA Tipping & Bishop's (the mean of all d
    − k, zeros included)."""
    n, d = Y.shape
    mu = Y.mean(axis=0)
    lam, U = np.linalg.eigh(np.cov(Y, rowvar=False))
    lam, U = lam[::-1], U[:, ::-1]
    sigma2 = (
        lam[k : min(n, d)].mean() if estimator == "PCA" else lam[k:].sum() / (d - k)
    )
    Uk = U[:, :k]
    C = (Uk * (np.maximum(lam[:k], sigma2) - sigma2)) @ Uk.T + sigma2 * np.eye(d)
    return mu, C


def _reference(X, w, k, estimator, standardize):
    """Log-density of each row of the raw ``X`` (n × d, NaN columns = the land mask)
    under the model fitted to the prepared matrix ``(x w − m) / s`` on the kept
    features: the model's mean and covariance mapped back through
    ``x = (s y + m) / w``. Standardised, ``s`` is the raw data's standard deviation:
    standardised first, weighted after (issue 46)."""
    keep = ~np.isnan(X).all(axis=0)
    Xk = X[:, keep]
    Y = Xk * w[keep]
    m, s = np.zeros(Y.shape[1]), np.ones(Y.shape[1])
    if standardize:
        m, s = Y.mean(axis=0), Xk.std(axis=0)
    mu, C = _model_covariance((Y - m) / s, k, estimator)
    D = s / w[keep]
    mean_x, C_x = (mu * s + m) / w[keep], C * np.outer(D, D)
    return stats.multivariate_normal(mean_x, C_x).logpdf(Xk)


#: the float64 bound; rounding of the dense log-density (LAPACK's solve and
#: log-determinant of the model covariance) measured at most 3.3e-12 relative here (PPCA
#: on the SST)
RTOL = 1e-10


def _sst():
    eofs_examples = pytest.importorskip("eofs.examples")
    path = eofs_examples.example_data_path("sst_ndjfm_anom.nc")
    # the file is netCDF-3: scipy reads it (netCDF4 and h5netcdf are not installed)
    with xr.open_dataset(path, engine="scipy") as ds:
        return ds["sst"].load()  # 50 winters × 18 × 30, 90 land points NaN throughout


def _sqrt_coslat(sst):
    lat = np.broadcast_to(
        sst.latitude.values.astype(np.float64)[:, None],
        (sst.sizes["latitude"], sst.sizes["longitude"]),
    )
    return np.sqrt(np.cos(np.deg2rad(lat))).ravel()


def _fit(estimator, k, standardize, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the land features left out of the fit
        return getattr(scalepca, estimator)(k, standardize=standardize).fit(X)


def _values(ll):
    if isinstance(ll, xr.DataArray):
        return np.asarray(ll.values, dtype=np.float64)
    if isinstance(ll, da.Array):
        return np.asarray(ll.compute(), dtype=np.float64)
    return np.asarray(ll, dtype=np.float64)


ESTIMATORS = ["PCA", "PPCA"]


# -- named weights and a land mask on real data (eofs' example SST) --------------------
@pytest.mark.parametrize("standardize", [False, True], ids=["raw", "standardize"])
@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("backing", ["numpy", "dask"])
def test_sst_sqrt_coslat_land_mask_score_in_the_data_units(
    backing, estimator, standardize, tmp_path
):
    sst = _sst()
    field = sst if backing == "numpy" else sst.chunk({"time": 13})
    k = 4
    model = _fit(
        estimator,
        k,
        standardize,
        scalepca.open_matrix(field, sample_dims="time", weights="sqrt_coslat"),
    )
    X = sst.values.reshape(sst.sizes["time"], -1).astype(np.float64)
    w = _sqrt_coslat(sst)
    expected = _reference(X, w, k, estimator, standardize)
    ll = model.score_samples(field)  # the raw field: weighted and stacked as at the fit
    assert isinstance(ll, xr.DataArray) and ll.dims == ("time",)
    np.testing.assert_allclose(_values(ll), expected, rtol=RTOL)
    np.testing.assert_allclose(model.score(field), expected.mean(), rtol=RTOL)
    # the prepared matrix (open_matrix's output) scores as the data it was made from
    prepared = scalepca.open_matrix(field, sample_dims="time", weights="sqrt_coslat")
    np.testing.assert_allclose(
        _values(model.score_samples(prepared)), expected, rtol=RTOL
    )
    model.save(tmp_path / "model.zarr")
    loaded = scalepca.load(tmp_path / "model.zarr")
    np.testing.assert_allclose(
        _values(loaded.score_samples(field)), expected, rtol=RTOL
    )
    np.testing.assert_allclose(loaded.score(field), expected.mean(), rtol=RTOL)


# -- array weights on a 2-D array (NumPy and dask) -------------------------------------
def _diabetes():
    from sklearn.datasets import load_diabetes

    X = load_diabetes(
        scaled=False
    ).data  # 442 × 10, columns from 0.1 (s6 … ) to 300 (tc)
    w = np.linspace(0.25, 2.5, X.shape[1])
    return X, w


@pytest.mark.parametrize("standardize", [False, True], ids=["raw", "standardize"])
@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("backing", ["numpy", "dask"])
def test_array_weights_score_in_the_data_units(
    backing, estimator, standardize, tmp_path
):
    X, w = _diabetes()
    data = X if backing == "numpy" else da.from_array(X, chunks=(100, -1))
    k = 3
    model = _fit(estimator, k, standardize, scalepca.open_matrix(data, weights=w))
    expected = _reference(X, w, k, estimator, standardize)
    ll = model.score_samples(data)  # the unweighted data: weighted as at the fit
    assert isinstance(ll, da.Array if backing == "dask" else np.ndarray)
    np.testing.assert_allclose(_values(ll), expected, rtol=RTOL)
    np.testing.assert_allclose(model.score(data), expected.mean(), rtol=RTOL)
    model.save(tmp_path / "model.zarr")
    loaded = scalepca.load(tmp_path / "model.zarr")
    np.testing.assert_allclose(_values(loaded.score_samples(data)), expected, rtol=RTOL)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_land_mask_with_array_weights_scores_the_kept_features(estimator):
    """All-NaN features are left out: the density is that of the kept features, whose
    weights' Jacobian alone enters (a land feature may have any weight, 0 included)."""
    X, w = _diabetes()
    X = X.copy()
    X[:, [2, 7]] = np.nan
    w = w.copy()
    w[7] = 0.0  # a zero weight on a land feature: no information lost, nothing refused
    model = _fit(estimator, 3, False, scalepca.open_matrix(X, weights=w))
    expected = _reference(X, w, 3, estimator, False)
    np.testing.assert_allclose(model.score_samples(X), expected, rtol=RTOL)


# -- PPCA EM: each row's observed entries, each with its weight ------------------------
def test_ppca_em_missing_entries_weighted_score_of_the_observed_entries():
    X, w = _diabetes()
    X = X.copy()
    rng = np.random.default_rng(38)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[5] = np.nan  # a row with nothing observed scores 0 (density 1 of nothing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scalepca.PPCA(3, missing="em", tol=0, max_iter=30).fit(
            scalepca.open_matrix(da.from_array(X, chunks=(100, -1)), weights=w)
        )
    # the fitted model of the weighted data, mapped back to the data's units by 1/w
    C_y = model.W_ @ model.W_.T + model.noise_variance_ * np.eye(X.shape[1])
    mean_x, C_x = model.mean_ / w, C_y / np.outer(w, w)
    expected = np.zeros(len(X))
    for i, row in enumerate(X):
        o = ~np.isnan(row)
        if o.any():
            expected[i] = stats.multivariate_normal(
                mean_x[o], C_x[np.ix_(o, o)]
            ).logpdf(row[o])
    ll = model.score_samples(X)
    np.testing.assert_allclose(ll, expected, rtol=RTOL)
    assert ll[5] == 0.0
    # score is the mean of score_samples over the same rows (it was NaN with missing
    # entries)
    np.testing.assert_allclose(model.score(X), expected.mean(), rtol=RTOL)
    np.testing.assert_allclose(
        model.score(da.from_array(X, chunks=(50, -1))), expected.mean(), rtol=RTOL
    )


# -- zero weights: refused, before any data is read ------------------------------------
class _Tasks(dask.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.count = 0

    def _pretask(self, key, dsk, state):
        self.count += 1


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_zero_weight_on_a_kept_feature_refuses_score(estimator):
    """A weight of 0 maps every value of its feature to 0: the density of the data in
    their own units is not defined there. score and score_samples refuse it, naming
    the features and the remedy, before reading X; transform still works (the EOFs
    ignore the feature)."""
    X, w = _diabetes()
    w = w.copy()
    w[[1, 4]] = 0.0
    data = da.from_array(X, chunks=(100, -1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(scalepca, estimator)(3).fit(
            scalepca.open_matrix(data, weights=w)
        )
    counter = _Tasks()
    with dask.config.set(scheduler="sync"), counter:
        for method in (model.score_samples, model.score):
            with pytest.raises(
                ValueError, match=r"weight of 0 .*column\(s\) 1, 4 .*NaN"
            ):
                method(data)
    assert counter.count == 0, f"refused after {counter.count} dask tasks"
    assert np.isfinite(np.asarray(model.transform(data))).all()
