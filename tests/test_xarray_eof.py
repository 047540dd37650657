"""Gridded xarray data end to end: stacking, land masks, weights, labelled outputs,
EOF tools."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca

from .conftest import field
from .support.compare import assert_same_components


def coslat_weights(arr):
    return np.sqrt(np.cos(np.deg2rad(arr.lat))).clip(0)


def dense_eof(arr, weights, k):
    """NumPy reference: SVD of the centred, weighted (time × sea-cell) matrix."""
    X = (
        (arr * weights)
        .transpose("time", "lat", "lon")
        .values.reshape(arr.sizes["time"], -1)
    )
    sea = ~np.isnan(X).all(axis=0)
    Xc = X[:, sea] - X[:, sea].mean(axis=0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    ev = s**2 / (X.shape[0] - 1)
    comps = np.full((k, X.shape[1]), np.nan)
    comps[:, sea] = Vt[:k]
    return (
        ev[:k],
        ev[:k] / ev.sum(),
        comps.reshape(k, arr.sizes["lat"], arr.sizes["lon"]),
        Xc @ Vt[:k].T,
    )


# -- stacking --------------------------------------------------------------------------
def test_open_matrix_stacks_lazily(rng, raise_if_dask_computes):
    arr = field(rng).chunk({"time": 20})
    with raise_if_dask_computes(0):
        X = scalepca.open_matrix(arr, sample_dims=("time",))
    assert X.dims == ("time", "feature") and X.shape == (60, 48)
    assert isinstance(X.data, da.Array) and X.chunks == ((20, 20, 20), (48,))
    np.testing.assert_array_equal(
        X.sel(lat=70.0, lon=90.0).values, arr.isel(lat=0, lon=2).values
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: scalepca.PCA(2),
        lambda: scalepca.PPCA(2),
        lambda: scalepca.KernelPCA(2, n_features=20, random_state=0),
    ],
)
def test_scores_of_xarray_input_are_named(rng, make):
    """The scores' name labels a plot's axis (it was the dask task's,
    ``_affine_block-…``)."""
    arr = field(rng).chunk({"time": 20})
    X = scalepca.open_matrix(arr, sample_dims="time")
    scores = make().fit(X).transform(X)
    assert scores.dims == ("time", "mode") and scores.name == "scores"


@pytest.mark.parametrize("solver", ["covariance_eigh", "tsqr", "randomized"])
def test_pca_matches_dense_eof_with_land_and_weights(rng, solver):
    arr = field(rng)
    w = coslat_weights(arr)
    X = scalepca.open_matrix(arr.chunk({"time": 25}), sample_dims="time", weights=w)
    pca = scalepca.PCA(3, svd_solver=solver, random_state=0).fit(X)
    ev, ratio, comps, pcs = dense_eof(arr, w, 3)
    np.testing.assert_allclose(pca.explained_variance_, ev, rtol=1e-8)
    np.testing.assert_allclose(pca.explained_variance_ratio_, ratio, rtol=1e-8)
    c = pca.components_xr_
    assert c.dims == ("mode", "lat", "lon") and c.name == "components"
    np.testing.assert_array_equal(c.lat, arr.lat)
    np.testing.assert_array_equal(c.lon, arr.lon)
    np.testing.assert_array_equal(c.mode, [1, 2, 3])  # modes are numbered from 1
    land = np.isnan(arr.isel(time=0).values)
    assert np.isnan(c.values[:, land]).all() and not np.isnan(c.values[:, ~land]).any()
    assert_same_components(c.values, comps, rtol=1e-6, atol=1e-8)
    scores = pca.transform(X)
    assert scores.dims == ("time", "mode")
    np.testing.assert_array_equal(scores.time, arr.time)
    assert_same_components(scores.values.T, pcs.T, rtol=1e-6, atol=1e-8)
    r = pca.explained_variance_ratio_xr_
    assert r.dims == ("mode",) and np.allclose(r.values, ratio)
    assert pca.explained_variance_xr_.dims == ("mode",)
    m = pca.mean_xr_
    assert m.dims == ("lat", "lon") and np.isnan(m.values[land]).all()
    # the mean in the field's units (mean_ is that of the weighted field)
    np.testing.assert_allclose(
        m.values[~land], arr.mean("time").values[~land], rtol=1e-12
    )
    # reconstruction from the leading EOFs comes back on the grid, in the field's units
    rec = pca.inverse_transform(scores)
    assert rec.dims == ("time", "lat", "lon") and isinstance(rec.data, da.Array)
    np.testing.assert_array_equal(rec.lat, arr.lat)
    wgrid = w.broadcast_like(arr.isel(time=0, drop=True)).transpose("lat", "lon").values
    ref = (
        scores.values @ np.nan_to_num(c.values.reshape(3, -1))
        + np.nan_to_num(pca.mean_)
    ) / wgrid.ravel()
    rv = rec.values.reshape(60, -1)
    np.testing.assert_allclose(rv[:, ~land.ravel()], ref[:, ~land.ravel()], rtol=1e-10)
    assert np.isnan(rv[:, land.ravel()]).all()


def test_land_mask_is_found_in_the_one_pass(rng):
    from .support.counting import counted_dask

    arr = field(rng)
    Xd, counter = counted_dask(arr.values.reshape(60, -1), chunks=(20, 48))
    with pytest.warns(UserWarning, match="5 of 48 features are NaN in every sample"):
        pca = scalepca.PCA(2).fit(Xd)
    assert pca.n_passes_ == 1 and counter.reads == 3
    assert np.isnan(pca.components_).sum() == 2 * 5


def test_matches_eofs(rng):
    eofs_xr = pytest.importorskip("eofs.xarray")
    arr = field(rng)
    w = coslat_weights(arr)
    solver = eofs_xr.Eof(arr, weights=w.broadcast_like(arr.isel(time=0)).values)
    pca = scalepca.PCA(4).fit(scalepca.open_matrix(arr, sample_dims="time", weights=w))
    np.testing.assert_allclose(
        pca.explained_variance_, solver.eigenvalues(neigs=4).values, rtol=1e-9
    )
    np.testing.assert_allclose(
        pca.explained_variance_ratio_,
        solver.varianceFraction(neigs=4).values,
        rtol=1e-9,
    )
    e = solver.eofs(neofs=4)
    assert pca.components_xr_.dims == e.dims
    assert_same_components(pca.components_xr_.values, e.values, rtol=1e-6, atol=1e-9)
    assert_same_components(
        pca.transform(
            scalepca.open_matrix(arr, sample_dims="time", weights=w)
        ).values.T,
        solver.pcs(npcs=4).values.T,
        rtol=1e-6,
        atol=1e-9,
    )


def test_matches_xeofs(rng):
    xe = pytest.importorskip("xeofs")
    arr = field(rng)
    w = coslat_weights(arr)
    model = xe.single.EOF(n_modes=3, use_coslat=True, solver="full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(arr, dim="time")
    pca = scalepca.PCA(3).fit(scalepca.open_matrix(arr, sample_dims="time", weights=w))
    np.testing.assert_allclose(
        pca.explained_variance_, model.explained_variance().values, rtol=1e-8
    )
    np.testing.assert_allclose(
        pca.explained_variance_ratio_,
        model.explained_variance_ratio().values,
        rtol=1e-8,
    )
    # xeofs numbers modes from 1 and may reorder the grid; align by coordinates
    comps = (
        model.components().transpose("mode", "lat", "lon").sel(lat=arr.lat, lon=arr.lon)
    )
    np.testing.assert_array_equal(comps.mode, [1, 2, 3])
    assert_same_components(
        pca.components_xr_.values, comps.values, rtol=1e-6, atol=1e-9
    )


# -- weights ---------------------------------------------------------------------------
def test_weight_forms_agree_and_are_applied_before_the_fit(rng):
    arr = field(rng)
    w = coslat_weights(arr)
    full = w.broadcast_like(arr.isel(time=0, drop=True)).transpose("lat", "lon")
    fits = [
        scalepca.PCA(2).fit(scalepca.open_matrix(arr, sample_dims="time", weights=wt))
        for wt in (w, full, full.values)
    ]
    for f in fits[1:]:
        np.testing.assert_allclose(
            f.components_, fits[0].components_, rtol=1e-12, equal_nan=True
        )
    unweighted = scalepca.PCA(2).fit(scalepca.open_matrix(arr * w, sample_dims="time"))
    np.testing.assert_allclose(
        unweighted.components_, fits[0].components_, rtol=1e-10, equal_nan=True
    )
    # 2-D sources take one weight per column
    X = arr.values.reshape(60, -1)
    wcol = full.values.ravel()
    Xw = scalepca.open_matrix(X, weights=wcol)
    np.testing.assert_allclose(Xw, X * wcol)
    assert isinstance(
        scalepca.open_matrix(da.from_array(X, chunks=(20, 48)), weights=wcol), da.Array
    )


@pytest.mark.parametrize(
    "weights, match",
    [
        (np.ones(5), "shape"),
        (-np.ones((6, 8)), "non-negative"),
        (np.full((6, 8), np.nan), "NaN"),
        (xr.DataArray(np.ones(60), dims="time"), "only feature dims"),
        (xr.DataArray(np.ones(5), dims="lat"), "5 values along 'lat'"),
        (
            xr.DataArray(np.ones(6), dims="lat", coords={"lat": np.arange(6.0)}),
            "coordinates",
        ),
    ],
)
def test_bad_weights(rng, weights, match, raise_if_dask_computes):
    arr = field(rng).chunk({"time": 30})
    with raise_if_dask_computes(0), pytest.raises(ValueError, match=match):
        scalepca.open_matrix(arr, sample_dims="time", weights=weights)


def test_bad_column_weights():
    with pytest.raises(ValueError, match="one per feature"):
        scalepca.open_matrix(np.ones((4, 3)), weights=np.ones(4))


# -- sources and dims ------------------------------------------------------------------
def test_dataset_and_zarr_store_sources(rng, tmp_path):
    arr = field(rng)
    ds = xr.Dataset({"sst": arr, "other": arr.isel(lat=0) * 2})
    with pytest.raises(ValueError, match="pass variable"):
        scalepca.open_matrix(ds, sample_dims="time")
    X1 = scalepca.open_matrix(ds, variable="sst", sample_dims="time")
    path = tmp_path / "grid.zarr"
    ds.chunk({"time": 20}).to_zarr(path, consolidated=False)
    X2 = scalepca.open_matrix(
        str(path), variable="sst", sample_dims=("time",), weights=coslat_weights(arr)
    )
    assert X2.dims == ("time", "feature") and isinstance(X2.data, da.Array)
    p1 = scalepca.PCA(2).fit(
        scalepca.open_matrix(
            ds, variable="sst", sample_dims="time", weights=coslat_weights(arr)
        )
    )
    p2 = scalepca.PCA(2).fit(X2)
    np.testing.assert_allclose(
        p2.components_, p1.components_, rtol=1e-10, equal_nan=True
    )
    assert X1.shape == X2.shape


def test_several_sample_dims_and_explicit_feature_dims(rng):
    arr = field(rng, nt=30, members=3)  # (member, time, lat, lon)
    X = scalepca.open_matrix(arr, sample_dims=("member", "time"))
    assert X.dims == ("sample", "feature") and X.shape == (90, 48)
    pca = scalepca.PCA(2).fit(X)
    scores = pca.transform(X)
    # the order matters: sample dims in stacking order, then mode (a set hid (mode,
    # ...))
    assert scores.dims == ("member", "time", "mode") and scores.sizes["member"] == 3
    assert pca.inverse_transform(scores).dims == arr.dims
    assert pca.components_xr_.dims == ("mode", "lat", "lon")
    # one feature dim keeps its name; the other dims become samples
    Xlon = scalepca.open_matrix(
        arr.isel(member=0, lat=1), sample_dims="time", feature_dims=("lon",)
    )
    assert Xlon.dims == ("time", "lon")
    with pytest.raises(ValueError, match="neither sample nor feature"):
        scalepca.open_matrix(arr, sample_dims="time", feature_dims=("lat", "lon"))
    with pytest.raises(ValueError, match="not dimensions"):
        scalepca.open_matrix(arr, sample_dims="depth")
    with pytest.raises(ValueError, match="both sample and feature"):
        scalepca.open_matrix(arr, sample_dims="time", feature_dims=("time", "lat"))


def test_xr_attributes_need_xarray_input(rng):
    pca = scalepca.PCA(2).fit(rng.standard_normal((30, 4)))
    with pytest.raises(AttributeError, match="xarray input"):
        pca.components_xr_  # noqa: B018
    with pytest.raises(AttributeError, match="xarray input"):
        pca.explained_variance_ratio_xr_  # noqa: B018
    assert not hasattr(scalepca.PCA(2), "components_xr_")


# -- gaps: PCA refuses, PPCA(missing="em") fits ----------------------------------------
def test_pca_refuses_gaps_outside_the_land_mask(rng):
    arr = field(rng)
    arr[5, 3, 3] = np.nan
    with pytest.raises(ValueError, match=r"1 NaN .*PPCA\(missing='em'\)"):
        scalepca.PCA(2).fit(scalepca.open_matrix(arr, sample_dims="time"))


def test_ppca_em_on_a_gappy_grid(rng):
    clean = field(rng, nt=200)
    gappy = field(
        np.random.default_rng(12345), nt=200, gaps=0.15
    )  # same field, gaps added
    w = coslat_weights(clean)
    Xg = scalepca.open_matrix(gappy.chunk({"time": 50}), sample_dims="time", weights=w)
    Xc = scalepca.open_matrix(clean, sample_dims="time", weights=w)
    em = scalepca.PPCA(3, missing="em", tol=1e-9).fit(Xg)
    ref = scalepca.PPCA(3).fit(Xc)
    c = em.components_xr_
    land = np.isnan(clean.isel(time=0).values)
    assert c.dims == ("mode", "lat", "lon")
    assert np.isnan(c.values[:, land]).all() and not np.isnan(c.values[:, ~land]).any()
    from scipy.linalg import subspace_angles

    keep = ~np.isnan(ref.mean_)
    angle = np.degrees(
        subspace_angles(ref.components_[:, keep].T, em.components_[:, keep].T).max()
    )
    assert angle < 5.0
    Z = em.transform(Xg)
    assert Z.dims == ("time", "mode") and np.isfinite(Z.values).all()
    filled = em.impute(Xg)
    assert filled.dims == ("time", "lat", "lon")
    fv = filled.values
    assert np.isnan(fv[:, land]).all() and not np.isnan(fv[:, ~land]).any()
    np.testing.assert_allclose(
        em.explained_variance_ratio_xr_.values, em.explained_variance_ratio_
    )


def test_save_load_keeps_the_land_mask(rng, tmp_path):
    arr = field(rng)
    X = scalepca.open_matrix(arr, sample_dims="time")
    pca = scalepca.PCA(3).fit(X)
    pca.save(tmp_path / "eof.zarr")
    back = scalepca.load(tmp_path / "eof.zarr")
    np.testing.assert_array_equal(back.components_, pca.components_)
    np.testing.assert_allclose(back.transform(X).values, pca.transform(X).values)
    rec = back.inverse_transform(back.transform(X))
    land = np.isnan(arr.isel(time=0).values).ravel()
    assert rec.dims == ("time", "lat", "lon")
    assert np.isnan(rec.values.reshape(60, -1)[:, land]).all()
    # the feature coordinates travel with the model: labelled outputs after load
    xr.testing.assert_identical(back.components_xr_, pca.components_xr_)
    xr.testing.assert_identical(back.mean_xr_, pca.mean_xr_)


def test_save_load_single_feature_dim_with_extra_coords(rng, tmp_path):
    arr = field(rng).isel(lat=1)
    arr = arr.assign_coords(name=("lon", [f"cell{i}" for i in range(arr.sizes["lon"])]))
    pca = scalepca.PPCA(2, missing="em").fit(
        scalepca.open_matrix(arr, sample_dims="time")
    )
    pca.save(tmp_path / "m.zarr")
    back = scalepca.load(tmp_path / "m.zarr")
    c = back.components_xr_
    assert c.dims == ("mode", "lon") and list(c["name"].values) == list(
        arr["name"].values
    )
    xr.testing.assert_identical(c, pca.components_xr_)
