"""Maximum covariance analysis (scalepca.analysis.mca) against xeofs' MCA on eofs' example files:
winter SST (sst_ndjfm_anom.nc) × 500 hPa height (hgt_djf.nc) over their common years."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
from scalepca.analysis.mca import MCA

eofs_examples = pytest.importorskip("eofs.examples")
xeofs = pytest.importorskip("xeofs")

K = 4
KINDS = ["numpy", "dask-one-chunk", "dask-many-chunks", "xarray-many-chunks", "netcdf-path"]
pytestmark = pytest.mark.filterwarnings("ignore:Ambiguous reference date string")


@pytest.fixture(scope="module")
def fields(sst_hgt):
    """(sst, hgt) over their common winters (tests/conftest.py)."""
    return sst_hgt


@pytest.fixture(scope="module", params=[False, True], ids=["covariance", "standardized"])
def reference(request, fields):
    sst, hgt = fields
    model = xeofs.cross.MCA(n_modes=K, use_coslat=True, use_pca=False,
                            standardize=request.param)
    model.fit(sst, hgt, dim="time")
    return request.param, model


def _weighted(field):
    w = np.sqrt(np.cos(np.deg2rad(field["latitude"]))).broadcast_like(field.isel(time=0))
    return w.values.ravel()


def _inputs(fields, kind, tmp_path):
    sst, hgt = fields
    if kind == "xarray-many-chunks":
        return [scalepca.open_matrix(f.chunk({"time": c}), sample_dims="time",
                                     weights="sqrt_coslat") for f, c in ((sst, 7), (hgt, 11))]
    if kind == "netcdf-path":
        out = []
        for f, c in ((sst, 9), (hgt, 13)):
            path = tmp_path / f"{f.name}.nc"
            f.to_dataset().to_netcdf(path, engine="scipy")
            out.append(scalepca.open_matrix(path, variable=f.name, sample_dims="time",
                                            weights="sqrt_coslat", chunks={"time": c}))
        return out
    out = []
    for f in (sst, hgt):  # the raw values, weighted by open_matrix (the model knows the weights)
        values = f.values.reshape(f.sizes["time"], -1)
        if kind != "numpy":
            values = da.from_array(values, chunks=(-1 if kind == "dask-one-chunk" else 6, -1))
        out.append(scalepca.open_matrix(values, weights=_weighted(f)))
    return out


def _aligned(a, b):
    axes = tuple(range(1, a.ndim))
    return np.sign(np.nansum(a * b, axis=axes)).reshape((-1,) + (1,) * len(axes)) * a


def _close(a, b, what):
    b = np.asarray(b, dtype=np.float64)
    a = _aligned(np.asarray(a, dtype=np.float64), b)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=what)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-8 * np.nanmax(np.abs(b)), equal_nan=True,
                               err_msg=what)


def _flat(obj, grid_dims):
    if isinstance(obj, xr.DataArray):
        return obj.transpose(*grid_dims).values
    return np.asarray(obj)


@pytest.mark.parametrize("kind", KINDS)
def test_mca_matches_xeofs(fields, reference, kind, tmp_path):
    standardize, ref = reference
    X, Y = _inputs(fields, kind, tmp_path)
    model = MCA(K, standardize=standardize).fit(X, Y)
    assert model.n_passes_ == 1
    np.testing.assert_allclose(model.squared_covariance_fraction_,
                               ref.squared_covariance_fraction().values, rtol=1e-10)
    np.testing.assert_allclose(model.squared_covariance_, ref.data["squared_covariance"].values,
                               rtol=1e-10)
    cx, cy = ref.components()
    sx, sy = ref.scores()
    (hx, hy), _ = ref.homogeneous_patterns()
    (gx, gy), _ = ref.heterogeneous_patterns()
    zx, zy = model.transform(X, Y)
    (mhx, mhy), (mgx, mgy) = model.patterns(X, Y)
    labelled = kind in ("xarray-many-chunks", "netcdf-path")
    grid = ("mode", "latitude", "longitude")
    if labelled:
        assert model.components_xr_.dims == grid and zx.dims == ("time", "mode")
        mine = [model.components_xr_, model.components_y_xr_, mhx, mhy, mgx, mgy]
        mine = [_flat(m, grid) for m in mine]
        z = [zx.transpose("mode", "time").values, zy.transpose("mode", "time").values]
    else:
        mine = [model.components_x_, model.components_y_, mhx, mhy, mgx, mgy]
        z = [np.asarray(zx).T, np.asarray(zy).T]
    refs = [r.transpose(*grid).values for r in (cx, cy, hx, hy, gx, gy)]
    if not labelled:
        refs = [r.reshape(K, -1) for r in refs]
    names = ["components_x", "components_y", "homogeneous_x", "homogeneous_y",
             "heterogeneous_x", "heterogeneous_y"]
    for a, b, what in zip(mine, refs, names, strict=True):
        _close(a, b, what)
    _close(z[0], sx.transpose("mode", "time").values, "scores_x")
    _close(z[1], sy.transpose("mode", "time").values, "scores_y")
    # the pairs keep their sign together: the scores of a mode covary positively
    cov = [np.cov(z[0][i], z[1][i])[0, 1] for i in range(K)]
    np.testing.assert_allclose(cov, model.singular_values_ if not standardize else cov)
    assert all(c > 0 for c in cov)


def test_chunking_does_not_change_the_fit(fields, tmp_path):
    fits = [MCA(K).fit(*_inputs(fields, kind, tmp_path)) for kind in KINDS[1:3]]
    np.testing.assert_allclose(fits[0].components_x_, fits[1].components_x_, rtol=0,
                               atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(fits[0].singular_values_, fits[1].singular_values_, rtol=1e-12)


def test_bad_input(fields, tmp_path):
    X, Y = _inputs(fields, "dask-many-chunks", tmp_path)
    with pytest.raises(ValueError, match="X has 50 samples and Y 49"):
        MCA(2).fit(X, Y[:49])
    for bad in (0, -1, 2.5, True):
        with pytest.raises((TypeError, ValueError), match="n_modes must be"):
            MCA(bad).fit(X, Y)
    with pytest.raises(ValueError, match="n_modes=600 but the fields have 540 and 1421"):
        MCA(600).fit(X, Y)
    with pytest.raises(TypeError, match="standardize must be"):
        MCA(2, standardize="yes").fit(X, Y)
    with pytest.raises(ValueError, match="over max_cross_size=1,000"):
        MCA(2, max_cross_size=1000).fit(X, Y)
    holed = fields[0].values.reshape(50, -1).copy()
    ocean = int(np.flatnonzero(~np.isnan(holed).any(axis=0))[0])
    holed[3, ocean] = np.nan  # a NaN at one sample of an ocean cell
    with pytest.raises(ValueError, match="NaN at some samples only"):
        MCA(2).fit(holed, Y)
    model = MCA(2).fit(X, Y)
    with pytest.raises(ValueError, match="Y has 540 features; the model was fitted on 1421"):
        model.transform(Y=X)


@pytest.mark.parametrize("kind", ["xarray-many-chunks", "numpy"])
def test_save_load(fields, kind, tmp_path):
    X, Y = _inputs(fields, kind, tmp_path)
    model = MCA(3, standardize=(True, False)).fit(X, Y)
    model.save(tmp_path / "mca.zarr")
    with pytest.raises(FileExistsError):
        model.save(tmp_path / "mca.zarr")
    model.save(tmp_path / "mca.zarr", overwrite=True)
    loaded = MCA.load(tmp_path / "mca.zarr")
    assert loaded.get_params() == model.get_params()
    for name in ("components_x_", "components_y_", "singular_values_", "mean_x_", "scale_x_",
                 "squared_covariance_fraction_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.scale_y_ is None and loaded.n_samples_ == 50
    for a, b in zip(loaded.transform(X, Y), model.transform(X, Y), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    if kind == "xarray-many-chunks":
        xr.testing.assert_equal(loaded.components_y_xr_, model.components_y_xr_)  # attrs: no
    else:
        with pytest.raises(AttributeError, match="not fitted on xarray"):
            loaded.components_xr_  # noqa: B018
    again = scalepca.load(tmp_path / "mca.zarr")  # through the registry, as the class's own
    assert type(again) is MCA and again.get_params() == model.get_params()
    for name in MCA._stored_arrays:
        a, b = getattr(again, name), getattr(model, name)
        assert (a is None and b is None) or np.array_equal(a, b, equal_nan=True), name
    scalepca.PCA(2).fit(np.random.default_rng(0).normal(size=(20, 4))).save(tmp_path / "p.zarr")
    with pytest.raises(ValueError, match="not an MCA model store"):
        MCA.load(tmp_path / "p.zarr")
