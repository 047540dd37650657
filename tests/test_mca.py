"""Maximum covariance analysis (scalepca.analysis.mca) against xeofs' MCA on eofs'
example files: winter SST (sst_ndjfm_anom.nc) × 500 hPa height (hgt_djf.nc) over
their common years."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
from scalepca.analysis.mca import MCA

from .support.compare import assert_same_components

eofs_examples = pytest.importorskip("eofs.examples")
xeofs = pytest.importorskip("xeofs")

K = 4
KINDS = [
    "numpy",
    "dask-one-chunk",
    "dask-many-chunks",
    "xarray-many-chunks",
    "netcdf-path",
]
pytestmark = pytest.mark.filterwarnings("ignore:Ambiguous reference date string")


@pytest.fixture(scope="module")
def fields(sst_hgt):
    """(sst, hgt) over their common winters (tests/conftest.py)."""
    return sst_hgt


@pytest.fixture(
    scope="module", params=[False, True], ids=["covariance", "standardized"]
)
def reference(request, fields):
    sst, hgt = fields
    model = xeofs.cross.MCA(
        n_modes=K, use_coslat=True, use_pca=False, standardize=request.param
    )
    model.fit(sst, hgt, dim="time")
    return request.param, model


def _weighted(field):
    w = np.sqrt(np.cos(np.deg2rad(field["latitude"]))).broadcast_like(
        field.isel(time=0)
    )
    return w.values.ravel()


def _inputs(fields, kind, tmp_path):
    sst, hgt = fields
    if kind == "xarray-many-chunks":
        return [
            scalepca.open_matrix(
                f.chunk({"time": c}), sample_dims="time", weights="sqrt_coslat"
            )
            for f, c in ((sst, 7), (hgt, 11))
        ]
    if kind == "netcdf-path":
        out = []
        for f, c in ((sst, 9), (hgt, 13)):
            path = tmp_path / f"{f.name}.nc"
            f.to_dataset().to_netcdf(path, engine="scipy")
            out.append(
                scalepca.open_matrix(
                    path,
                    variable=f.name,
                    sample_dims="time",
                    weights="sqrt_coslat",
                    chunks={"time": c},
                )
            )
        return out
    out = []
    for f in (
        sst,
        hgt,
    ):  # the raw values, weighted by open_matrix (the model knows the weights)
        values = f.values.reshape(f.sizes["time"], -1)
        if kind != "numpy":
            values = da.from_array(
                values, chunks=(-1 if kind == "dask-one-chunk" else 6, -1)
            )
        out.append(scalepca.open_matrix(values, weights=_weighted(f)))
    return out


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
    np.testing.assert_allclose(
        model.squared_covariance_fraction_,
        ref.squared_covariance_fraction().values,
        rtol=1e-10,
    )
    np.testing.assert_allclose(
        model.squared_covariance_, ref.data["squared_covariance"].values, rtol=1e-10
    )
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
    names = [
        "components_x",
        "components_y",
        "homogeneous_x",
        "homogeneous_y",
        "heterogeneous_x",
        "heterogeneous_y",
    ]
    for a, b, what in zip(mine, refs, names, strict=True):
        assert_same_components(a, b, 1e-8, what)
    assert_same_components(z[0], sx.transpose("mode", "time").values, 1e-8, "scores_x")
    assert_same_components(z[1], sy.transpose("mode", "time").values, 1e-8, "scores_y")
    # the pairs keep their sign together: the scores of a mode covary positively
    cov = [np.cov(z[0][i], z[1][i])[0, 1] for i in range(K)]
    np.testing.assert_allclose(cov, model.singular_values_ if not standardize else cov)
    assert all(c > 0 for c in cov)


def test_chunking_does_not_change_the_fit(fields, tmp_path):
    fits = [MCA(K).fit(*_inputs(fields, kind, tmp_path)) for kind in KINDS[1:3]]
    np.testing.assert_allclose(
        fits[0].components_x_, fits[1].components_x_, rtol=0, atol=1e-12, equal_nan=True
    )
    np.testing.assert_allclose(
        fits[0].singular_values_, fits[1].singular_values_, rtol=1e-12
    )


def test_bad_input(fields, tmp_path):
    X, Y = _inputs(fields, "dask-many-chunks", tmp_path)
    with pytest.raises(ValueError, match="X has 50 samples and Y 49"):
        MCA(2).fit(X, Y[:49])
    for bad in (0, -1, 2.5, True):
        with pytest.raises((TypeError, ValueError), match="n_components must be"):
            MCA(bad).fit(X, Y)
    with pytest.raises(
        ValueError, match="n_components=600 but the fields have 540 and 1421"
    ):
        MCA(600).fit(X, Y)
    with pytest.raises(TypeError, match="standardize must be"):
        MCA(2, standardize="yes").fit(X, Y)
    with pytest.raises(
        ValueError, match="over max_cross_size=1,000: use solver='randomized'"
    ):
        MCA(2, max_cross_size=1000, solver="covariance").fit(X, Y)
    for name, bad in (
        ("solver", "svd"),
        ("n_power_iter", -1),
        ("tol", -1.0),
        ("n_oversamples", 2.5),
        ("random_state", -1),
    ):
        with pytest.raises((ValueError, TypeError), match=name):
            MCA(2, **{name: bad}).fit(X, Y)
    holed = fields[0].values.reshape(50, -1).copy()
    ocean = int(np.flatnonzero(~np.isnan(holed).any(axis=0))[0])
    holed[3, ocean] = np.nan  # a NaN at one sample of an ocean cell
    with pytest.raises(ValueError, match="NaN at some samples only"):
        MCA(2).fit(holed, Y)
    model = MCA(2).fit(X, Y)
    # a matrix open_matrix made: checked against the fit's record of Y's preparation
    with pytest.raises(
        ValueError, match="Y was prepared differently .*540 weights, fitted with 1421"
    ):
        model.transform(Y=X)
    with pytest.raises(
        ValueError, match="Y has 540 features; the model was fitted on 1421"
    ):
        model.transform(Y=fields[0].values.reshape(50, -1))


@pytest.mark.parametrize("kind", ["xarray-many-chunks", "numpy"])
def test_save_load(fields, kind, tmp_path):
    X, Y = _inputs(fields, kind, tmp_path)
    model = MCA(3, standardize=(True, False)).fit(X, Y)
    model.save(tmp_path / "mca.zarr")
    with pytest.raises(FileExistsError):
        model.save(tmp_path / "mca.zarr")
    model.save(tmp_path / "mca.zarr", overwrite=True)
    loaded = scalepca.load(tmp_path / "mca.zarr")
    assert type(loaded) is MCA and loaded.get_params() == model.get_params()
    for name in (
        "components_x_",
        "components_y_",
        "singular_values_",
        "mean_x_",
        "scale_x_",
        "squared_covariance_fraction_",
    ):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.scale_y_ is None and loaded.n_samples_ == 50
    for a, b in zip(loaded.transform(X, Y), model.transform(X, Y), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    if kind == "xarray-many-chunks":
        xr.testing.assert_equal(
            loaded.components_y_xr_, model.components_y_xr_
        )  # attrs: no
    else:
        with pytest.raises(AttributeError, match="not fitted on xarray"):
            loaded.components_xr_  # noqa: B018


# -- the randomized (block Krylov) path ------------------------------------------------
RANDOMIZED = dict(solver="randomized", random_state=0)


@pytest.fixture(scope="module")
def exact(reference, fields):
    """(standardize, the covariance path's fit on NumPy input), as ``reference``."""
    standardize = reference[0]
    return standardize, MCA(K, standardize=standardize).fit(
        *_inputs(fields, "numpy", None)
    )


@pytest.mark.parametrize("kind", KINDS[:4])
def test_randomized_matches_covariance_path_and_xeofs(fields, exact, reference, kind):
    """Block Krylov on the dilated cross-covariance equals the one-pass covariance
    path and xeofs to 1e-8, in the default n_power_iter + 2 = 6 passes. n = 50: the
    basis (14 vectors per field and product) holds the fields' 49-dimensional sample
    space with its start after 6 products, so the total squared covariance is exact
    too."""
    (standardize, cov), ref = exact, reference[1]
    X, Y = _inputs(fields, kind, None)
    model = MCA(K, standardize=standardize, **RANDOMIZED).fit(X, Y)
    assert model.solver_ == "randomized" and model.n_passes_ == 6
    np.testing.assert_allclose(model.singular_values_, cov.singular_values_, rtol=1e-10)
    assert np.all(model.residual_norms_ <= 1e-9 * model.singular_values_)
    np.testing.assert_allclose(
        model.total_squared_covariance_, cov.total_squared_covariance_, rtol=1e-10
    )
    np.testing.assert_allclose(
        model.total_squared_covariance_bounds_,
        [cov.total_squared_covariance_] * 2,
        rtol=1e-10,
    )
    np.testing.assert_allclose(
        model.squared_covariance_fraction_,
        ref.squared_covariance_fraction().values,
        rtol=1e-10,
    )
    grid = ("mode", "latitude", "longitude")
    cx, cy = (c.transpose(*grid).values.reshape(K, -1) for c in ref.components())
    for mine, theirs, other, what in (
        (model.components_x_, cx, cov.components_x_, "x"),
        (model.components_y_, cy, cov.components_y_, "y"),
    ):
        assert_same_components(
            mine, other, 1e-8, f"components_{what} against the covariance path"
        )
        assert_same_components(mine, theirs, 1e-8, f"components_{what} against xeofs")
    zx, _ = model.transform(X, Y)
    sx, _ = ref.scores()
    z = (
        zx.transpose("mode", "time").values
        if kind == "xarray-many-chunks"
        else np.asarray(zx).T
    )
    assert_same_components(
        z, sx.transpose("mode", "time").values, 1e-8, "scores_x against xeofs"
    )


def test_randomized_chunking_and_seed(fields):
    """The same seed gives the same fit on NumPy, one-chunk and many-chunk dask and
    xarray input (to rounding: only the tree of partial sums differs), and bitwise
    the same fit again; another seed other Ritz values, within their residuals of the
    same."""
    fits = [
        MCA(K, n_power_iter=1, **RANDOMIZED).fit(*_inputs(fields, kind, None))
        for kind in KINDS[:4]
    ]
    for other in fits[1:]:  # two products short of convergence: the start block shows
        np.testing.assert_allclose(
            other.components_x_,
            fits[0].components_x_,
            rtol=0,
            atol=1e-12,
            equal_nan=True,
        )
        np.testing.assert_allclose(
            other.singular_values_, fits[0].singular_values_, rtol=1e-12
        )
        np.testing.assert_allclose(
            other.residual_norms_, fits[0].residual_norms_, rtol=1e-6
        )
    X, Y = _inputs(fields, "dask-many-chunks", None)
    again = MCA(K, n_power_iter=1, **RANDOMIZED).fit(X, Y)
    np.testing.assert_array_equal(again.components_x_, fits[2].components_x_)
    np.testing.assert_array_equal(again.residual_norms_, fits[2].residual_norms_)
    seeded = MCA(K, n_power_iter=1, solver="randomized", random_state=1).fit(X, Y)
    assert not np.array_equal(seeded.components_x_, again.components_x_)
    # each within its residual of the same singular values (Ritz values of H)
    np.testing.assert_array_less(
        np.abs(seeded.singular_values_ - again.singular_values_),
        seeded.residual_norms_ + again.residual_norms_,
    )


def test_randomized_passes_tol_and_bounds(fields, exact):
    """Passes: n_power_iter + 2, fewer with tol (and then each residual within tol of
    its singular value); short of an invariant basis the total squared covariance is
    NaN with total="bounds" and its bounds bracket the exact one, the fractions'
    bounds the exact fractions; with "auto" (n = 50) or "exact" one more pass makes
    it exact."""
    standardize, cov = exact
    X, Y = _inputs(fields, "dask-many-chunks", None)
    for n_power_iter in (0, 2):
        model = MCA(
            K,
            standardize=standardize,
            n_power_iter=n_power_iter,
            total="bounds",
            **RANDOMIZED,
        ).fit(X, Y)
        assert model.n_passes_ == n_power_iter + 2
        assert np.isnan(model.total_squared_covariance_)
        assert np.isnan(model.squared_covariance_fraction_).all()
        low, high = model.total_squared_covariance_bounds_
        assert low <= cov.total_squared_covariance_ * (1 + 1e-12) and low > 0
        assert high >= cov.total_squared_covariance_
        # the fractions of the modes found (s_i = u_iᵀ C v_i, the covariance of their
        # expansion coefficients) against the exact total lie within their bounds
        fraction = model.squared_covariance_ / cov.total_squared_covariance_
        lo, hi = model.squared_covariance_fraction_bounds_.T
        assert np.all(lo <= fraction) and np.all(fraction <= hi * (1 + 1e-12))
    # the exact total from the sample Grams: one more pass (over column strips)
    for total in ("auto", "exact"):
        model = MCA(
            K, standardize=standardize, n_power_iter=0, total=total, **RANDOMIZED
        ).fit(X, Y)
        assert model.n_passes_ == 3
        np.testing.assert_allclose(
            model.total_squared_covariance_, cov.total_squared_covariance_, rtol=1e-12
        )
        np.testing.assert_allclose(
            model.squared_covariance_fraction_,
            model.squared_covariance_ / cov.total_squared_covariance_,
            rtol=1e-12,
        )
    model = MCA(K, standardize=standardize, tol=1e-6, total="bounds", **RANDOMIZED).fit(
        X, Y
    )
    assert model.n_passes_ < 6
    assert np.all(model.residual_norms_ <= 1e-6 * model.singular_values_)
    # Ritz values of a symmetric operator: within the residual of a singular value
    assert np.all(
        np.abs(model.singular_values_ - cov.singular_values_) <= model.residual_norms_
    )


def test_auto_solver_and_randomized_save_load(fields, tmp_path):
    """solver="auto" takes the randomized path when d_x · d_y > max_cross_size; its
    parameters, residuals and NaN total round-trip through save/load."""
    X, Y = _inputs(fields, "xarray-many-chunks", None)
    assert MCA(K).fit(X, Y).solver_ == "covariance"
    model = MCA(
        3,
        max_cross_size=540 * 1421 - 1,
        n_power_iter=1,
        random_state=4,
        standardize=(False, True),
        total="bounds",
    ).fit(X, Y)
    assert model.solver_ == "randomized" and model.n_passes_ == 3
    assert np.isnan(model.total_squared_covariance_)
    model.save(tmp_path / "mca.zarr")
    loaded = scalepca.load(tmp_path / "mca.zarr")
    assert loaded.get_params() == model.get_params()
    assert loaded.solver_ == "randomized" and np.isnan(loaded.total_squared_covariance_)
    for name in (
        "components_x_",
        "residual_norms_",
        "total_squared_covariance_bounds_",
        "squared_covariance_fraction_bounds_",
        "scale_y_",
    ):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    for a, b in zip(loaded.transform(X, Y), model.transform(X, Y), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("slab", [None, 3 * 8 * 7])
def test_cross_operator_against_dense(monkeypatch, slab):
    """linalg.cross: the first pass's moments and [C V; Cᵀ U], and a later pass's
    product, equal the dense centred cross products (large means, NaN at a land
    feature, float32 Y, uneven row chunks), whatever the slabs the blocks are centred
    in (3-row / 3-column slabs with ``slab``)."""
    from scalepca.linalg import cross

    if slab is not None:
        monkeypatch.setattr(cross, "SLAB_BYTES", slab)
    rng = np.random.default_rng(3)
    n, dx, dy, l = 41, 7, 5, 3
    X = rng.normal(size=(n, dx)) + 1e4
    Y = (rng.normal(size=(n, dy)) * 3 - 50).astype(np.float32)
    X[:, 2] = np.nan  # land
    U, V = rng.normal(size=(dx, l)), rng.normal(size=(dy, l))
    Xd, Yd = cross.aligned_panels(
        da.from_array(X, chunks=((10, 1, 17, 13), dx)), da.from_array(Y, chunks=(6, dy))
    )
    out = cross.moments_and_cross_times(Xd, Yd, U, V)
    Xf = np.where(np.isnan(X), 0.0, X)
    Xc, Yc = (
        Xf - Xf.mean(axis=0),
        Y.astype(np.float64) - Y.astype(np.float64).mean(axis=0),
    )
    C = Xc.T @ Yc
    np.testing.assert_allclose(
        out["HV"], np.vstack([C @ V, C.T @ U]), rtol=1e-9, atol=1e-9 * np.abs(C).max()
    )
    np.testing.assert_allclose(out["mean"][:dx], Xf.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(out["ss"][dx:], (Yc**2).sum(axis=0), rtol=1e-9)
    np.testing.assert_array_equal(out["nan_features"], [0, 0, n] + [0] * (dx - 3 + dy))
    assert out["n"] == n and out["bad"] == 0
    HV = cross.cross_times(Xd, Yd, U, V, out["mean"][:dx], out["mean"][dx:])
    np.testing.assert_allclose(
        HV, np.vstack([C @ V, C.T @ U]), rtol=1e-9, atol=1e-9 * np.abs(C).max()
    )
