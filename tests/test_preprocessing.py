"""The model owns its preprocessing (issue 18, items 3, 4, 7).

A model fitted on ``open_matrix(field, sample_dims=..., weights=...)`` keeps the
variable, the dims, the weights and the grid: ``transform`` takes the raw field (any
dims order, any chunking), ``inverse_transform`` / ``mean_xr_`` give the field in its
own units and dims order, the store keeps all of it, and data that differ are refused
with what differs. References: xeofs and eofs' SST example (NDJFM anomalies, 50
winters on a 18 × 30 grid).
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
from scalepca._validation import _row_chunks
from scalepca.preprocessing import as_matrix

from .conftest import field
from .support.compare import assert_same_components


def xeofs_weights(arr):
    """√cos φ as xeofs computes it (from the float32 latitudes of the file)."""
    return np.sqrt(np.cos(np.deg2rad(arr.latitude))).clip(0)


# -- item 3: reconstruction in the field's units, raw transform, store -----------------
@pytest.mark.parametrize("backing", ["numpy", "dask"])
def test_sst_reconstruction_in_field_units_matches_xeofs(sst, backing):
    xe = pytest.importorskip("xeofs")
    data = sst if backing == "numpy" else sst.chunk({"time": 7})
    k = 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = xe.single.EOF(n_modes=k, use_coslat=True, solver="full").fit(
            sst, dim="time"
        )
        ref = model.inverse_transform(model.scores())
    ref = ref.transpose(*sst.dims).sel(latitude=sst.latitude, longitude=sst.longitude)
    pca = scalepca.PCA(k).fit(
        scalepca.open_matrix(data, sample_dims="time", weights=xeofs_weights(sst))
    )
    rec = pca.inverse_transform(pca.transform(data))
    assert rec.dims == sst.dims and rec.name == "sst" and isinstance(rec.data, da.Array)
    land = np.isnan(sst.isel(time=0).values)
    assert np.isnan(rec.values[:, land]).all() and np.isnan(ref.values[:, land]).all()
    np.testing.assert_allclose(
        rec.values[:, ~land], ref.values[:, ~land], rtol=0, atol=1e-10
    )
    # every mode: the field itself comes back (it was weights × field before)
    full = scalepca.PCA(50).fit(
        scalepca.open_matrix(data, sample_dims="time", weights="sqrt_coslat")
    )
    back = full.inverse_transform(full.transform(data))
    np.testing.assert_allclose(
        back.values[:, ~land], sst.values[:, ~land], rtol=0, atol=1e-10
    )
    # the mean in the field's units; mean_ stays the mean of the weighted matrix
    m = full.mean_xr_
    assert m.dims == ("latitude", "longitude")
    np.testing.assert_allclose(
        m.values[~land], sst.mean("time").values[~land], atol=1e-13
    )
    assert np.isnan(m.values[land]).all()


def test_sst_transform_of_the_raw_field_and_the_store(sst, tmp_path):
    X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    pca = scalepca.PCA(4).fit(X)
    fitted = pca.transform(X)
    # the raw field (no weights, no stacking) gives the fit-time scores
    np.testing.assert_array_equal(pca.transform(sst).values, fitted.values)
    # in another dims order and chunking
    other = sst.transpose("longitude", "time", "latitude").chunk({"time": 9})
    np.testing.assert_allclose(
        pca.transform(other).values, fitted.values, rtol=1e-12, atol=1e-12
    )
    # a Dataset: the fitted variable is taken
    ds = xr.Dataset({"sst": sst, "other": sst.isel(time=0) * 0})
    np.testing.assert_array_equal(pca.transform(ds).values, fitted.values)
    pca.save(tmp_path / "eof.zarr")
    back = scalepca.load(tmp_path / "eof.zarr")
    assert back._preprocessing.weights_name == "sqrt_coslat"
    np.testing.assert_array_equal(
        back._preprocessing.weights, pca._preprocessing.weights
    )
    np.testing.assert_array_equal(back.transform(sst).values, fitted.values)
    xr.testing.assert_allclose(
        back.inverse_transform(fitted),
        pca.inverse_transform(fitted),
        rtol=0,
        atol=1e-13,
    )
    xr.testing.assert_equal(
        back.mean_xr_, pca.mean_xr_
    )  # (coordinate attrs are not kept)


def _other_lat(sst):
    return sst.assign_coords(latitude=sst.latitude + 1)


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda s: scalepca.open_matrix(s, sample_dims="time"),
            "not weighted, fitted on data weighted by sqrt_coslat",
        ),
        (
            lambda s: scalepca.open_matrix(s, sample_dims="time", weights="coslat"),
            "weighted by coslat, fitted on data weighted by sqrt_coslat",
        ),
        (
            lambda s: s.rename("t2m"),
            "variable 't2m'; the model was fitted on variable 'sst'",
        ),
        (lambda s: xr.Dataset({"t2m": s}), "fitted on variable 'sst'"),
        (
            lambda s: s.isel(latitude=slice(1, None)),
            r"17 along 'latitude' \(fitted: 18\)",
        ),
        (
            _other_lat,
            r"'latitude' coordinates differ \(first at position 0: -21.5, fitted -22.5",
        ),
        (lambda s: s.isel(longitude=0), r"missing \['longitude'\]"),
        (lambda s: s.expand_dims(member=2), r"not in the fitted data \['member'\]"),
    ],
)
def test_transform_refuses_other_data(sst, make, match, raise_if_dask_computes):
    pca = scalepca.PCA(3).fit(
        scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    )
    bad = make(sst.chunk({"time": 10}))
    with raise_if_dask_computes(0), pytest.raises(ValueError, match=match):
        pca.transform(bad)


def test_named_weights_in_python_as_in_yaml(rng):
    arr = field(rng)
    coslat = np.cos(np.deg2rad(arr.lat))
    ds = xr.Dataset({"sst": arr, "area": coslat})
    for rule, explicit in (
        ("sqrt_coslat", np.sqrt(coslat)),
        ("coslat", coslat),
        ("area", coslat),
    ):
        source = ds if rule == "area" else arr
        a = scalepca.PCA(2).fit(
            scalepca.open_matrix(
                source, variable="sst", sample_dims="time", weights=rule
            )
        )
        b = scalepca.PCA(2).fit(
            scalepca.open_matrix(arr, sample_dims="time", weights=explicit)
        )
        np.testing.assert_array_equal(a.components_, b.components_)
        assert a._preprocessing.weights_name == rule
    with pytest.raises(
        ValueError, match="'area' is neither one of sqrt_coslat, coslat"
    ):
        scalepca.open_matrix(arr, sample_dims="time", weights="area")
    with pytest.raises(ValueError, match="needs a 'lat' or 'latitude' coordinate"):
        scalepca.open_matrix(arr.rename(lat="y"), sample_dims="time", weights="coslat")
    with pytest.raises(ValueError, match="named weights need xarray data"):
        scalepca.open_matrix(np.ones((4, 3)), weights="coslat")


def test_zero_weight_features_come_back_nan(rng):
    arr = field(rng, land=False)
    w = xr.DataArray(
        np.linspace(0.0, 1.0, arr.sizes["lat"]), dims="lat", coords={"lat": arr.lat}
    )
    pca = scalepca.PCA(48).fit(scalepca.open_matrix(arr, sample_dims="time", weights=w))
    rec = pca.inverse_transform(pca.transform(arr))
    assert np.isnan(rec.values[:, 0]).all() and np.isnan(pca.mean_xr_.values[0]).all()
    np.testing.assert_allclose(rec.values[:, 1:], arr.values[:, 1:], rtol=1e-10)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_array_weights_are_owned_by_the_model(rng, kind, tmp_path):
    X = rng.standard_normal((60, 20)) @ rng.standard_normal((20, 20)) + 3.0
    w = rng.uniform(0.2, 2.0, 20)
    source = X if kind == "numpy" else da.from_array(X, chunks=(15, 20))
    Xw = scalepca.open_matrix(source, weights=w)
    assert isinstance(Xw, np.ndarray if kind == "numpy" else da.Array)
    np.testing.assert_allclose(
        np.asarray(Xw), X * w
    )  # the matrix is weighted, as before
    pca = scalepca.PCA(20).fit(Xw)
    ref = scalepca.PCA(20).fit(X * w)
    np.testing.assert_allclose(pca.components_, ref.components_, rtol=1e-10, atol=1e-12)
    Z = pca.transform(X)  # unweighted data: the model weights them
    np.testing.assert_allclose(Z, ref.transform(X * w), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(pca.transform(Xw), Z, rtol=1e-12, atol=1e-12)  # as it is
    assert isinstance(pca.transform(da.from_array(X, chunks=20)), da.Array)
    back = pca.inverse_transform(Z)  # in the data's units
    assert isinstance(back, np.ndarray)
    np.testing.assert_allclose(back, X, rtol=1e-10, atol=1e-10)
    pca.save(tmp_path / "m.zarr")
    loaded = scalepca.load(tmp_path / "m.zarr")
    np.testing.assert_array_equal(loaded.transform(X), Z)
    with pytest.raises(
        ValueError, match="weighted by other given weights than the fitted data"
    ):
        pca.transform(scalepca.open_matrix(X, weights=2 * w))
    # a slice of the weighted matrix is still weighted: never weighted twice
    np.testing.assert_allclose(pca.transform(Xw[:10]), Z[:10], rtol=1e-12, atol=1e-12)
    if kind == "dask":
        np.testing.assert_allclose(
            pca.transform(Xw.rechunk((7, 20))[5:30]), Z[5:30], rtol=1e-12, atol=1e-12
        )


def test_partial_fit_owns_its_preprocessing(rng):
    X = rng.standard_normal((90, 12)) @ rng.standard_normal((12, 12))
    w = rng.uniform(0.2, 2.0, 12)
    sp = scalepca.SparsePCA(3, alpha=0.1, random_state=0)
    sp.partial_fit(scalepca.open_matrix(X[:60], weights=w))
    sp.partial_fit(X[60:])  # raw rows: the model weights them as it did the first chunk
    ref = scalepca.SparsePCA(3, alpha=0.1, random_state=0)
    ref.partial_fit(X[:60] * w)
    ref.partial_fit(X[60:] * w)
    np.testing.assert_allclose(sp.components_, ref.components_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        sp.transform(X), ref.transform(X * w), rtol=1e-10, atol=1e-10
    )


# -- item 4: several sample dims, several feature dims, transposed input ---------------
def test_several_sample_dims_round_trip(rng):
    arr = field(rng, nt=30, members=3)  # (member, time, lat, lon) with land
    X = scalepca.open_matrix(arr, sample_dims=("time", "member"), weights="sqrt_coslat")
    pca = scalepca.PCA(43).fit(X)  # every sea cell: an exact round trip
    scores = pca.transform(X)
    assert scores.dims == ("time", "member", "mode")
    np.testing.assert_array_equal(scores.time, arr.time)
    np.testing.assert_array_equal(scores.member, arr.member)
    rec = pca.inverse_transform(scores)
    assert rec.dims == arr.dims  # the data's own order
    np.testing.assert_allclose(
        rec.values, arr.values, rtol=1e-10, atol=1e-10, equal_nan=True
    )
    # the raw data in another order: the same scores, in the same order
    s2 = pca.transform(arr.transpose("lon", "member", "lat", "time"))
    assert s2.dims == scores.dims
    np.testing.assert_allclose(s2.values, scores.values, rtol=1e-12, atol=1e-12)
    # a subset of the sample dims' values is fine; a sample dim missing is not
    part = pca.transform(arr.isel(member=[0, 2], time=slice(5, 12)))
    np.testing.assert_allclose(
        part.values,
        scores.isel(member=[0, 2], time=slice(5, 12)).values,
        rtol=1e-12,
        atol=1e-12,
    )
    with pytest.raises(ValueError, match=r"missing \['member'\]"):
        pca.transform(arr.isel(member=0))


def test_several_feature_dims_in_another_order(rng):
    arr = field(rng)
    a = scalepca.PCA(3).fit(scalepca.open_matrix(arr, sample_dims="time"))
    b = scalepca.PCA(3).fit(
        scalepca.open_matrix(arr, sample_dims="time", feature_dims=("lon", "lat"))
    )
    cb = b.components_xr_
    assert cb.dims == ("mode", "lon", "lat")
    assert_same_components(
        cb.transpose("mode", "lat", "lon").values,
        a.components_xr_.values,
        rtol=1e-8,
        atol=1e-10,
    )
    sa, sb = a.transform(arr), b.transform(arr.transpose("lat", "time", "lon"))
    assert_same_components(sb.values.T, sa.values.T, rtol=1e-8, atol=1e-10)
    rec = b.inverse_transform(sb)
    assert rec.dims == arr.dims
    np.testing.assert_allclose(
        rec.values,
        a.inverse_transform(sa).values,
        rtol=1e-8,
        atol=1e-10,
        equal_nan=True,
    )


# -- item 7: chunking of DataArrays ----------------------------------------------------
def test_chunks_by_dim_name_and_axis(rng):
    arr = field(rng)  # NumPy-backed (time, lat, lon)
    for chunks in ({"time": 25}, {0: 25}, 25):
        X = scalepca.open_matrix(arr, sample_dims="time", chunks=chunks)
        assert X.chunks == ((25, 25, 10), (48,)), chunks
    flat = arr.isel(lat=1)  # 2-D (time, lon): chunks by name raised TypeError
    for chunks in ({"time": 25}, {0: 25}, 25, {"time": 25, "lon": -1}):
        assert scalepca.open_matrix(flat, chunks=chunks).chunks == ((25, 25, 10), (8,))
    members = field(rng, nt=30, members=3)
    X = scalepca.open_matrix(
        members, sample_dims=("member", "time"), chunks={"member": 1}
    )
    assert X.chunks == ((30, 30, 30), (48,))
    X = scalepca.open_matrix(
        members, sample_dims=("member", "time"), chunks={"sample": 45}
    )
    assert X.chunks == ((45, 45), (48,))
    with pytest.raises(ValueError, match="no dimension 'depth'"):
        scalepca.open_matrix(arr, sample_dims="time", chunks={"depth": 5})
    with pytest.raises(ValueError, match="'lat' is along the features"):
        scalepca.open_matrix(arr, sample_dims="time", chunks={"lat": 2})
    with pytest.raises(ValueError, match="no dim names"):
        scalepca.open_matrix(np.ones((10, 3)), chunks={"time": 5})
    X = scalepca.open_matrix(np.ones((10, 3)), chunks={0: 4})
    assert X.chunks == ((4, 4, 2), (3,))


def test_numpy_backed_dataarrays_get_the_numpy_row_chunks():
    big = xr.DataArray(
        np.zeros((1100, 8000)), dims=("time", "cell")
    )  # 70 MB: two blocks
    rows = _row_chunks(big.values)[0]
    assert rows < 1100
    X = scalepca.open_matrix(big)
    assert X.chunks[0][0] == rows and len(X.chunks[0]) == 2
    assert as_matrix(big).data.chunks[0][0] == rows  # a DataArray given to fit directly
    grid = xr.DataArray(np.zeros((1100, 80, 100)), dims=("time", "lat", "lon"))
    X = scalepca.open_matrix(grid, sample_dims="time")
    assert X.chunks == ((rows, 1100 - rows), (8000,))


def test_results_do_not_depend_on_the_chunking(rng):
    arr = field(rng)
    ref = scalepca.PCA(3).fit(
        scalepca.open_matrix(arr, sample_dims="time", weights="sqrt_coslat")
    )
    zref = ref.transform(arr).values
    for source, chunks in (
        (arr, None),
        (arr, {"time": 7}),
        (arr.chunk({"time": 13}), None),
        (arr.chunk({"time": 13}), 60),
        (arr.chunk({"lat": 2}), None),
    ):
        pca = scalepca.PCA(3).fit(
            scalepca.open_matrix(
                source, sample_dims="time", weights="sqrt_coslat", chunks=chunks
            )
        )
        np.testing.assert_allclose(
            pca.components_, ref.components_, rtol=1e-10, atol=1e-12, equal_nan=True
        )
        np.testing.assert_allclose(
            pca.transform(source).values, zref, rtol=1e-10, atol=1e-10
        )
        xr.testing.assert_allclose(pca.mean_xr_, ref.mean_xr_, rtol=1e-12)


# -- every estimator repeats the preprocessing (standardisation is the estimator's own)
@pytest.mark.parametrize(
    "make",
    [
        lambda: scalepca.PCA(3),
        lambda: scalepca.PPCA(3),
        lambda: scalepca.PPCA(3, missing="em", max_iter=20),
        lambda: scalepca.SparsePCA(3, method="batch", max_iter=5, random_state=0),
        lambda: scalepca.SparsePCA(
            3, method="batch", max_iter=5, use_correlation=True, random_state=0
        ),
        lambda: scalepca.KernelPCA(3, kernel="rbf", n_features=40, random_state=0),
        lambda: scalepca.RobustPCA(max_iter=30),
    ],
    ids=["pca", "ppca", "ppca-em", "spca", "spca-correlation", "kpca", "rpca"],
)
def test_every_estimator_takes_the_raw_data(rng, make, tmp_path):
    arr = field(rng, land=False)
    X = scalepca.open_matrix(
        arr.chunk({"time": 20}), sample_dims="time", weights="sqrt_coslat"
    )
    est = make().fit(X)
    fitted = est.transform(X)
    raw = est.transform(arr.transpose("lon", "lat", "time"))
    assert raw.dims == fitted.dims == ("time", "mode")
    np.testing.assert_allclose(raw.values, fitted.values, rtol=1e-10, atol=1e-10)
    # a bare array of the unweighted field is weighted by the model too
    flat = arr.values.reshape(arr.sizes["time"], -1)
    np.testing.assert_allclose(
        est.transform(flat), fitted.values, rtol=1e-10, atol=1e-10
    )
    est.save(tmp_path / "m.zarr")
    np.testing.assert_allclose(
        scalepca.load(tmp_path / "m.zarr").transform(arr).values,
        fitted.values,
        rtol=1e-10,
        atol=1e-10,
    )
    if hasattr(est, "inverse_transform"):
        rec = est.inverse_transform(fitted)
        assert rec.dims == arr.dims
        if isinstance(est, scalepca.SparsePCA) and est.use_correlation:
            assert not np.all(
                est.scale_ == 1
            )  # standardised, and undone by the estimator
        # in the field's units: the matrix-space reconstruction divided by the weights
        w = np.sqrt(np.cos(np.deg2rad(arr.lat.values)))[:, None]
        inner = fitted.values @ est._inverse_matrix() + est.mean_
        np.testing.assert_allclose(
            rec.values, inner.reshape(arr.shape) / w, rtol=1e-10, atol=1e-10
        )
        np.testing.assert_allclose(
            est.inverse_transform(fitted.values),  # NumPy in, NumPy out
            (inner.reshape(arr.shape) / w).reshape(len(inner), -1),
            rtol=1e-10,
            atol=1e-10,
        )
