"""Standardised, then weighted (issue 46, item 1): ``standardize=True`` on a matrix
that ``open_matrix(..., weights=...)`` weighted divides each feature by the standard
deviation of the unweighted data, so the weights survive the standardisation (xeofs'
order, and MCA's). It divided by the weighted data's own, which cancels a per-column
weight: the fit was the unweighted one, to 1e-15.

References: xeofs' ``EOF(standardize=True, use_coslat=True)`` on eofs' winter SST, and
the dense matrix made by hand, ``(x − x̄) / σ · w``, decomposed by LAPACK.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca

from .support.compare import align_signs, subspace_sine

K = 4
SOLVERS = ["covariance_eigh", "tsqr", "randomized", "snapshot"]


# -- against xeofs on eofs' SST -------------------------------------------------------
@pytest.fixture(scope="module")
def sst64(sst):
    """The SST with float64 latitudes: xeofs computes √cos φ in the coordinate's dtype,
    scalepca in float64 (float32 latitudes move the weights by ~1e-8)."""
    return sst.assign_coords(latitude=sst["latitude"].astype(np.float64))


@pytest.fixture(scope="module")
def xeofs_fit(sst64):
    xe = pytest.importorskip("xeofs")
    model = xe.single.EOF(n_modes=K, standardize=True, use_coslat=True, solver="full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(sst64, dim="time")
    comps = model.components().transpose("mode", "latitude", "longitude").values
    return comps.reshape(K, -1), model.explained_variance_ratio().values


def _check_against_xeofs(model, xeofs_fit):
    ref, ratio = xeofs_fit
    ocean = np.isfinite(ref[0])
    ours = model.components_xr_.transpose("mode", "latitude", "longitude").values
    ours = ours.reshape(K, -1)
    np.testing.assert_array_equal(np.isfinite(ours[0]), ocean)
    assert subspace_sine(ours[:, ocean], ref[:, ocean]) < 1e-10
    np.testing.assert_allclose(model.explained_variance_ratio_, ratio, rtol=1e-10)


@pytest.mark.parametrize("solver", SOLVERS)
def test_pca_standardized_weighted_equals_xeofs(sst64, xeofs_fit, solver):
    """Every solver; the unweighted fit is 0.15 (sin) and 13 % (ratios) away."""
    X = scalepca.open_matrix(sst64, sample_dims="time", weights="sqrt_coslat")
    params = {"random_state": 0} if solver == "randomized" else {}
    model = scalepca.PCA(K, standardize=True, svd_solver=solver, **params).fit(X)
    _check_against_xeofs(model, xeofs_fit)


def test_pca_column_strips_equal_xeofs(sst64, xeofs_fit):
    """A field chunked along space (every time step in each chunk): block Krylov and the
    snapshot method standardise each strip in its task, with that strip's weights."""
    field = sst64.chunk({"time": -1, "latitude": 3, "longitude": -1})
    # a task size below the field's bytes keeps the strips (as a large store's)
    X = scalepca.open_matrix(
        field, sample_dims="time", weights="sqrt_coslat", task_size=20_000
    )
    assert len(X.data.chunks[0]) == 1 and len(X.data.chunks[1]) > 1
    for solver in ("randomized", "snapshot"):
        model = scalepca.PCA(
            K, standardize=True, svd_solver=solver, random_state=0
        ).fit(X)
        _check_against_xeofs(model, xeofs_fit)


def test_ppca_standardized_weighted_equals_xeofs(sst64, xeofs_fit):
    X = scalepca.open_matrix(sst64, sample_dims="time", weights="sqrt_coslat")
    _check_against_xeofs(scalepca.PPCA(K, standardize=True).fit(X), xeofs_fit)


def test_run_config_standardized_weighted_equals_xeofs(
    tmp_path, sst64, xeofs_fit, capsys
):
    """The config route: data.weights and model.standardize, the model written by
    ``scalepca run`` and read back."""
    import yaml

    from scalepca.cli import EXIT_OK, main

    path = tmp_path / "sst.nc"
    sst64.to_dataset(name="sst").to_netcdf(path)
    cfg = {
        "data": {
            "path": str(path),
            "variable": "sst",
            "sample_dims": ["time"],
            "weights": "sqrt_coslat",
        },
        "model": {"method": "pca", "n_components": K, "standardize": True},
        "cluster": {
            "kind": "local",
            "n_workers": 1,
            "threads_per_worker": 2,
            "processes": False,
        },
        "output": {"store": str(tmp_path / "out")},
        "progress": False,
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    rc = main(["run", str(tmp_path / "run.yaml")])
    assert rc == EXIT_OK, capsys.readouterr().err
    _check_against_xeofs(scalepca.load(tmp_path / "out" / "model.zarr"), xeofs_fit)


# -- against the dense matrix made by hand --------------------------------------------
N, LAT, LON = 40, 3, 4
D = LAT * LON


@pytest.fixture(scope="module")
def field():
    """A (time, lat, lon) field of columns 0.01 to 100 apart, three modes and noise."""
    rng = np.random.default_rng(46)
    modes = rng.normal(size=(3, D))
    X = (rng.normal(size=(N, 3)) * [4.0, 2.0, 1.0]) @ modes + 0.2 * rng.normal(
        size=(N, D)
    )
    X = X * np.logspace(-2, 2, D) + rng.normal(size=D)
    return xr.DataArray(
        X.reshape(N, LAT, LON),
        dims=("time", "lat", "lon"),
        coords={
            "time": np.arange(N),
            "lat": [-50.0, 10.0, 70.0],
            "lon": [0.0, 90.0, 180.0, 270.0],
        },
        name="x",
    )


WEIGHTS = np.linspace(0.2, 2.0, D)


def _matrix(field, chunks=None):
    f = field if chunks is None else field.chunk(chunks)
    w = xr.DataArray(WEIGHTS.reshape(LAT, LON), dims=("lat", "lon"))
    if chunks is None:
        return scalepca.open_matrix(f, sample_dims="time", weights=w)
    X = scalepca.open_matrix(f, sample_dims="time", weights=w, task_size=1000)
    assert len(X.data.chunks[0]) == 1 and len(X.data.chunks[1]) == LAT  # column strips
    return X


def _by_hand(field):
    """(Z, x̄, σ) with Z = (x − x̄) / σ · w: standardised, then weighted."""
    x = field.values.reshape(N, D)
    mean, sd = x.mean(axis=0), x.std(axis=0)
    return (x - mean) / sd * WEIGHTS, mean, sd


STRIPS = {"time": -1, "lat": 1, "lon": -1}


@pytest.mark.parametrize(
    ("solver", "chunks"),
    [(s, None) for s in [*SOLVERS, "sketch"]]
    + [(s, STRIPS) for s in ("randomized", "snapshot", "sketch")],
    ids=lambda v: "strips" if v is STRIPS else "rows" if v is None else v,
)
def test_pca_equals_dense_reference(field, solver, chunks):
    """Components, variances, scores of the field and its reconstruction in its own
    units; the same fit of Z (without weights or standardize) is the reference of every
    solver (column strips: each standardised in its task)."""
    Z, mean, sd = _by_hand(field)
    params = dict(n_components=3, svd_solver=solver, random_state=0)
    ref = scalepca.PCA(**params).fit(Z)
    lam, V = np.linalg.eigh(np.cov(Z, rowvar=False))
    np.testing.assert_allclose(
        ref.explained_variance_[:3] if solver == "sketch" else lam[::-1][:3],
        ref.explained_variance_,
        rtol=1e-10,
    )
    X = _matrix(field, chunks)
    model = scalepca.PCA(standardize=True, **params).fit(X)
    np.testing.assert_allclose(model.scale_, sd, rtol=1e-12)
    comps = model.components_xr_.values.reshape(3, D)
    np.testing.assert_allclose(
        align_signs(comps, ref.components_), ref.components_, atol=1e-10
    )
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    np.testing.assert_allclose(
        model.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-10
    )
    signs = np.sign(np.sum(comps * ref.components_, axis=1))
    scores = (
        np.asarray(model.transform(field).values) * signs
    )  # the raw field, prepared
    np.testing.assert_allclose(
        scores, ref.transform(Z), atol=1e-10 * np.abs(scores).max()
    )
    back = model.inverse_transform(
        model.transform(field)
    )  # in the field's units and dims
    expected = ref.inverse_transform(ref.transform(Z)) / WEIGHTS * sd + mean
    assert back.dims == field.dims
    np.testing.assert_allclose(
        back.values.reshape(N, D), expected, atol=1e-10 * np.abs(expected).max()
    )


def test_full_rank_round_trip_returns_the_field(field):
    model = scalepca.PCA(D, standardize=True).fit(_matrix(field))
    back = model.inverse_transform(model.transform(field))
    np.testing.assert_allclose(
        back.values, field.values, atol=1e-10 * abs(field).max().item()
    )


def test_ppca_equals_dense_reference(field):
    Z, _, sd = _by_hand(field)
    ref = scalepca.PPCA(3).fit(Z)
    model = scalepca.PPCA(3, standardize=True).fit(_matrix(field))
    np.testing.assert_allclose(model.scale_, sd, rtol=1e-12)
    comps = model.components_xr_.values.reshape(3, D)
    np.testing.assert_allclose(
        align_signs(comps, ref.components_), ref.components_, atol=1e-10
    )
    np.testing.assert_allclose(model.noise_variance_, ref.noise_variance_, rtol=1e-10)
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-10
    )


def test_kernel_pca_equals_dense_reference(field):
    """The kernel of the standardised, weighted rows: the scores of the fit of Z."""
    Z, _, sd = _by_hand(field)
    params = dict(n_components=3, approximation="exact", gamma=0.1)
    ref = scalepca.KernelPCA(**params).fit(Z)
    model = scalepca.KernelPCA(standardize=True, **params).fit(_matrix(field))
    np.testing.assert_allclose(model.scale_, sd, rtol=1e-12)
    a, b = np.asarray(model.transform(field).values), ref.transform(Z)
    a = a * np.sign(np.sum(a * b, axis=0))
    np.testing.assert_allclose(a, b, atol=1e-10 * np.abs(b).max())


def test_sparse_pca_correlation_equals_dense_reference(field):
    """SparsePCA's ``use_correlation``, the same standardisation: Z's components."""
    Z, _, sd = _by_hand(field)
    params = dict(n_components=3, method="elasticnet", alpha=0.5, random_state=0)
    ref = scalepca.SparsePCA(**params).fit(Z)
    model = scalepca.SparsePCA(use_correlation=True, **params).fit(_matrix(field))
    np.testing.assert_allclose(model.scale_, sd, rtol=1e-12)
    comps = np.asarray(model.components_)
    np.testing.assert_allclose(
        align_signs(comps, ref.components_), ref.components_, atol=1e-8
    )
    # partial_fit's merged moments: the second batch raw, weighted as the first
    inc = scalepca.SparsePCA(use_correlation=True, **params)
    inc.partial_fit(_matrix(field)[:25]).partial_fit(field.isel(time=slice(25, None)))
    np.testing.assert_allclose(inc.scale_, sd, rtol=1e-12)
    comps = np.asarray(inc.components_)
    np.testing.assert_allclose(
        align_signs(comps, ref.components_), ref.components_, atol=1e-8
    )


def test_save_load_and_partial_fit(field, tmp_path):
    """The scales survive the store, and partial_fit's batches (the second raw, weighted
    and standardised as the first) equal the fit of all rows."""
    Z, mean, sd = _by_hand(field)
    ref = scalepca.PCA(3).fit(Z)
    model = scalepca.PCA(3, standardize=True).fit(_matrix(field))
    model.save(tmp_path / "m.zarr")
    loaded = scalepca.load(tmp_path / "m.zarr")
    np.testing.assert_array_equal(loaded.scale_, model.scale_)
    np.testing.assert_allclose(
        loaded.transform(field).values,
        model.transform(field).values,
        atol=1e-12 * np.abs(ref.transform(Z)).max(),
    )
    X = _matrix(field)
    inc = scalepca.PCA(3, standardize=True).partial_fit(X[:25])
    inc.partial_fit(field.isel(time=slice(25, None)))
    np.testing.assert_allclose(inc.scale_, sd, rtol=1e-12)
    comps = inc.components_xr_.values.reshape(3, D)
    np.testing.assert_allclose(
        align_signs(comps, ref.components_), ref.components_, atol=1e-10
    )


def test_zero_weight_is_a_constant_feature(field):
    """A feature of weight 0 is 0 once weighted: it keeps scale 1 and takes no part."""
    w = WEIGHTS.copy()
    w[0] = 0.0
    X = scalepca.open_matrix(field.values.reshape(N, D), weights=w)
    model = scalepca.PCA(3, standardize=True).fit(X)
    assert model.scale_[0] == 1.0
    np.testing.assert_array_equal(np.asarray(model.components_)[:, 0], 0.0)
    assert np.all(np.isfinite(model.components_))


def test_dask_matrix_of_weighted_array(field):
    """A dask matrix (rows chunked) weighted by open_matrix: the field's fit."""
    x = da.from_array(field.values.reshape(N, D), chunks=(7, -1))
    a = scalepca.PCA(3, standardize=True).fit(scalepca.open_matrix(x, weights=WEIGHTS))
    b = scalepca.PCA(3, standardize=True).fit(_matrix(field))
    np.testing.assert_allclose(a.scale_, b.scale_, rtol=1e-12)
    np.testing.assert_allclose(a.explained_variance_, b.explained_variance_, rtol=1e-10)
