"""Hilbert (complex) EOF analysis (scalepca.analysis.hilbert_eof) against xeofs'
HilbertEOF on eofs' example winter SST (sst_ndjfm_anom.nc), √cos φ weighted, both
paddings, both solvers."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
import scalepca.analysis.hilbert_eof as hilbert_module
from scalepca.analysis.hilbert_eof import HilbertEOF
from scalepca.linalg import passes
from scalepca.linalg.hilbert import PADDINGS, analytic_signal

from .support.compare import assert_close
from .support.counting import counted_dask

xeofs = pytest.importorskip("xeofs")

K = 4
KINDS = [
    "numpy",
    "dask-one-chunk",
    "dask-many-chunks",
    "xarray-many-chunks",
    "netcdf-path",
]
GRID = ("mode", "latitude", "longitude")


@pytest.fixture(scope="module")
def field(sst):
    """The SST field with float64 latitudes (xeofs weighs in the coordinate's dtype)."""
    return sst.assign_coords(latitude=sst["latitude"].astype(np.float64))


@pytest.fixture(scope="module", params=["exp", None], ids=["exp", "none"])
def reference(request, field):
    model = xeofs.single.HilbertEOF(
        n_modes=K,
        padding=request.param,
        decay_factor=0.2,
        use_coslat=True,
        solver="full",
    )
    model.fit(field, dim="time")
    return request.param, model


def _weights(field):
    w = np.sqrt(np.cos(np.deg2rad(field["latitude"]))).broadcast_like(
        field.isel(time=0)
    )
    return w.values.ravel()


def _input(field, kind, tmp_path):
    if kind == "xarray-many-chunks":
        return scalepca.open_matrix(
            field.chunk({"time": 7}), sample_dims="time", weights="sqrt_coslat"
        )
    if kind == "netcdf-path":
        path = tmp_path / "sst.nc"
        field.to_dataset().to_netcdf(path, engine="scipy")
        return scalepca.open_matrix(
            path,
            variable="sst",
            sample_dims="time",
            weights="sqrt_coslat",
            chunks={"time": 9},
        )
    values = field.values.reshape(field.sizes["time"], -1)
    if kind != "numpy":
        values = da.from_array(
            values, chunks=(-1 if kind == "dask-one-chunk" else 6, -1)
        )
    return scalepca.open_matrix(values, weights=_weights(field))


def _phased(a, b):
    """``a`` (k × ...) with each mode turned by the unit complex number that best
    matches ``b``."""
    a2, b2 = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    ok = ~np.isnan(b2)
    ph = np.array([np.vdot(x[m], y[m]) for x, y, m in zip(a2, b2, ok, strict=True)])
    return a * (ph / np.abs(ph)).reshape((-1,) + (1,) * (a.ndim - 1))


def _grid(obj):
    return (
        obj.transpose(*GRID).values
        if isinstance(obj, xr.DataArray)
        else np.asarray(obj)
    )


@pytest.mark.parametrize("solver", ["gram", "covariance"])
@pytest.mark.parametrize("kind", KINDS)
def test_hilbert_eof_matches_xeofs(field, reference, kind, solver, tmp_path):
    padding, ref = reference
    model = HilbertEOF(K, padding=padding, solver=solver).fit(
        _input(field, kind, tmp_path)
    )
    assert model.n_passes_ == 2 and model.solver_ == solver
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance().values, rtol=1e-10
    )
    np.testing.assert_allclose(
        model.explained_variance_ratio_,
        ref.explained_variance_ratio().values,
        rtol=1e-10,
    )
    labelled = kind in ("xarray-many-chunks", "netcdf-path")
    C = _grid(model.components())
    R = ref.components().transpose(*GRID).values
    if not labelled:
        R = R.reshape(K, -1)
    assert_close(_phased(C, R), R, 1e-8, "components")
    S = model.scores()
    S = S.transpose("mode", "time").values if labelled else np.asarray(S).T
    RS = ref.scores(normalized=False).transpose("mode", "time").values
    assert_close(_phased(S, RS), RS, 1e-8, "scores")
    # amplitudes need no phase; phases differ by one constant per mode
    amp = ref.components_amplitude().transpose(*GRID).values
    assert_close(
        _grid(model.components_amplitude()),
        amp if labelled else amp.reshape(K, -1),
        1e-8,
        "components_amplitude",
    )
    samp = ref.scores_amplitude().transpose("mode", "time").values
    mine = model.scores_amplitude()
    assert_close(
        mine.transpose("mode", "time").values if labelled else np.asarray(mine).T,
        samp,
        1e-8,
        "scores_amplitude",
    )
    dphi = _grid(model.components_phase()) - ref.components_phase().transpose(
        *GRID
    ).values.reshape(C.shape)
    spread = np.angle(
        np.exp(
            1j
            * (
                dphi
                - np.nanmedian(dphi.reshape(K, -1), axis=1).reshape(
                    (K,) + (1,) * (dphi.ndim - 1)
                )
            )
        )
    )
    assert np.nanmax(np.abs(spread)) < 1e-8
    if labelled:
        assert model.components_phase().dims == GRID
        assert model.scores_phase().dims == ("time", "mode")


def test_chunking_does_not_change_the_fit(field, tmp_path):
    fits = [HilbertEOF(K).fit(_input(field, kind, tmp_path)) for kind in KINDS[:3]]
    for other in fits[1:]:
        np.testing.assert_allclose(
            other.components_, fits[0].components_, rtol=0, atol=1e-12, equal_nan=True
        )
        np.testing.assert_allclose(
            other.explained_variance_, fits[0].explained_variance_, rtol=1e-12
        )
    # features split over many strips (narrow strips): the same EOFs
    import scalepca.analysis.hilbert_eof as mod

    X = _input(field, "dask-many-chunks", tmp_path)
    narrow = mod.HILBERT_STRIP_BYTES
    try:
        mod.HILBERT_STRIP_BYTES = 50 * 8 * 37  # strips of 37 features
        for solver in ("gram", "covariance"):
            m = HilbertEOF(K, solver=solver).fit(X)
            np.testing.assert_allclose(
                m.components_, fits[0].components_, rtol=0, atol=1e-12, equal_nan=True
            )
    finally:
        mod.HILBERT_STRIP_BYTES = narrow


def test_propagating_wave_has_linear_phase():
    """A wave travelling east: one complex mode holds it all, its phase grows
    linearly east (the direction it travels)."""
    t = np.arange(400)[:, None]
    x = np.arange(30)[None, :]
    rng = np.random.default_rng(3)
    X = np.cos(2 * np.pi * (t / 40 - x / 30)) + 0.01 * rng.normal(size=(400, 30))
    model = HilbertEOF(1, padding=None).fit(X)
    assert model.explained_variance_ratio_[0] > 0.99
    step = np.angle(model.components_[0, 1:] / model.components_[0, :-1])
    np.testing.assert_allclose(step, 2 * np.pi / 30, atol=0.01)
    np.testing.assert_allclose(np.abs(model.components_[0]), 1 / np.sqrt(30), rtol=0.02)


def test_inverse_transform_rebuilds_the_field(field):
    X = field.values.reshape(50, -1) * _weights(field)
    ocean = ~np.isnan(X).any(axis=0)
    model = HilbertEOF(50, padding=None).fit(X)  # all modes: the field back
    Xhat = model.inverse_transform()
    np.testing.assert_allclose(
        Xhat[:, ocean], X[:, ocean], atol=1e-10 * np.nanmax(np.abs(X))
    )
    assert np.isnan(Xhat[:, ~ocean]).all()


def test_bad_input(field, tmp_path):
    X = _input(field, "dask-many-chunks", tmp_path)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(
            (TypeError, ValueError), match="n_components must be a positive integer"
        ):
            HilbertEOF(bad).fit(X)
    with pytest.raises(
        ValueError, match="n_components=60 but the field has 50 samples"
    ):
        HilbertEOF(60).fit(X)
    with pytest.raises(ValueError, match="padding must be 'exp' or 'none'"):
        HilbertEOF(2, padding="reflect").fit(X)
    with pytest.raises(ValueError, match="decay_factor must be > 0"):
        HilbertEOF(2, decay_factor=0).fit(X)
    with pytest.raises(
        ValueError, match="solver='svd' is not one of the allowed values"
    ):
        HilbertEOF(2, solver="svd").fit(X)
    holed = field.values.reshape(50, -1).copy()
    ocean = int(np.flatnonzero(~np.isnan(holed).any(axis=0))[0])
    holed[3, ocean] = np.nan
    with pytest.raises(ValueError, match="NaN at some time steps only"):
        HilbertEOF(2).fit(holed)
    import scipy.sparse

    with pytest.raises(TypeError, match="sparse"):
        HilbertEOF(2).fit(scipy.sparse.random(50, 20, density=0.3, format="csr"))


def test_bad_parameters_compute_nothing(field, tmp_path, raise_if_dask_computes):
    X = _input(field, "dask-many-chunks", tmp_path)
    with raise_if_dask_computes(), pytest.raises(ValueError, match="decay_factor"):
        HilbertEOF(2, decay_factor=-1.0).fit(X)


@pytest.mark.parametrize("kind", ["xarray-many-chunks", "numpy"])
def test_save_load(field, kind, tmp_path):
    model = HilbertEOF(3, decay_factor=0.1).fit(_input(field, kind, tmp_path))
    model.save(tmp_path / "heof.zarr")
    with pytest.raises(FileExistsError):
        model.save(tmp_path / "heof.zarr")
    loaded = scalepca.load(tmp_path / "heof.zarr")
    assert type(loaded) is HilbertEOF and loaded.get_params() == model.get_params()
    for name in ("components_", "scores_", "explained_variance_ratio_", "mean_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.n_passes_ == 2 and loaded.solver_ == model.solver_
    if kind == "xarray-many-chunks":
        xr.testing.assert_equal(loaded.components_phase(), model.components_phase())
        xr.testing.assert_equal(loaded.scores_amplitude(), model.scores_amplitude())


@pytest.mark.parametrize("padding", ["exp", None], ids=["exp", "none"])
@pytest.mark.parametrize("solver", ["gram", "covariance"])
@pytest.mark.parametrize("kind", ["numpy", "dask-many-chunks", "xarray-many-chunks"])
def test_transform_of_the_fitted_field_is_scores(
    field, kind, solver, padding, tmp_path
):
    """transform of the training field: its analytic signal with the fit's padding on
    the complex EOFs, the fitted complex PCs to 1e-10 (both solvers, every kind)."""
    X = _input(field, kind, tmp_path)
    model = HilbertEOF(K, padding=padding, solver=solver).fit(X)
    Z = model.transform(X)
    if kind == "xarray-many-chunks":
        assert Z.dims == ("time", "mode") and Z.dtype == np.complex128
        Z = Z.values
    for part in (np.real, np.imag):
        assert_close(
            part(np.asarray(Z)), part(model.scores_), 1e-10, "transform(X) = scores_"
        )


@pytest.mark.parametrize("strip", [None, 37], ids=["one-strip", "strips-of-37"])
@pytest.mark.parametrize("kind", KINDS[:4])
def test_transform_is_the_dense_projection(field, kind, strip, tmp_path, monkeypatch):
    """transform of the weighted SST: each series' padded analytic signal times the
    complex EOFs, formed densely in NumPy (the projection transform computed eagerly
    before it was lazy) to 1e-12, in NumPy, dask in one and in many row chunks,
    xarray, and over one or 15 column strips (the tree sum over strips); NumPy in,
    NumPy out; dask in, dask out."""
    model = HilbertEOF(K).fit(_input(field, "numpy", tmp_path))
    if strip is not None:
        monkeypatch.setattr(hilbert_module, "HILBERT_STRIP_BYTES", 50 * 8 * strip)
    X = field.values.reshape(50, -1) * _weights(field)
    keep = ~np.isnan(model.mean_)
    expected = (
        analytic_signal(X[:, keep] - model.mean_[keep], PADDINGS["exp"], 0.2)
        @ model.components_[:, keep].T
    )
    xin = _input(field, kind, tmp_path)
    got = model.transform(xin)
    if kind == "numpy":
        assert isinstance(got, np.ndarray)
    elif kind == "xarray-many-chunks":
        assert isinstance(got.data, da.Array) and got.dims == ("time", "mode")
        assert got.data.chunks[0] == xin.data.chunks[0]
        got = got.values
    else:
        assert isinstance(got, da.Array) and got.chunks[0] == xin.chunks[0]
        got = got.compute()
    assert got.shape == (50, K) and got.dtype == np.complex128
    for part in (np.real, np.imag):
        assert_close(part(got), part(expected), 1e-12, "transform = dense projection")


@pytest.mark.parametrize("strip", [None, 37], ids=["one-strip", "strips-of-37"])
def test_transform_is_lazy_and_one_pass(
    field, strip, tmp_path, monkeypatch, raise_if_dask_computes
):
    """transform of dask and xarray input computes nothing (a scheduler that counts
    every compute, zero allowed) and reads no block; computing its result is one dask
    compute that reads every block of the input once (one pass), with the features in
    one strip or in 15. NumPy input is one pass counted under
    ``HilbertEOF.transform``."""
    values = field.values.reshape(50, -1)
    model = HilbertEOF(K).fit(scalepca.open_matrix(values, weights=_weights(field)))
    if strip is not None:
        monkeypatch.setattr(hilbert_module, "HILBERT_STRIP_BYTES", 50 * 8 * strip)
    arr, reads = counted_dask(values, chunks=(6, 100))
    X = scalepca.open_matrix(arr, weights=_weights(field))
    field_in = _input(field, "xarray-many-chunks", tmp_path)
    with raise_if_dask_computes(0):
        Z = model.transform(X)
        Zx = model.transform(field_in)
    assert (
        isinstance(Z, da.Array) and isinstance(Zx.data, da.Array) and reads.reads == 0
    )
    with raise_if_dask_computes(1) as computes:
        got = Z.compute()
    assert computes.count == 1 and reads.reads == arr.npartitions == 9 * 6
    events = []
    with passes.listening(events.append):
        eager = model.transform(scalepca.open_matrix(values, weights=_weights(field)))
    ends = [e for e in events if e.stage == "end"]
    assert [(e.method, e.index, e.name) for e in ends] == [
        ("HilbertEOF.transform", 1, "complex PCs of new data")
    ]
    np.testing.assert_allclose(got, eager, rtol=0, atol=1e-12 * np.abs(eager).max())
    np.testing.assert_allclose(
        Zx.values, eager, rtol=0, atol=1e-12 * np.abs(eager).max()
    )


def test_transform_of_new_times(field, tmp_path):
    """New series (the last 20 winters): each turned into its own padded analytic
    signal (xeofs' transform with padding, by hand) and projected on the complex
    EOFs; the model saved and loaded gives the same. The model weighs the raw series
    itself, as the matrix open_matrix made with the fit's weights."""
    hilbert = pytest.importorskip("xeofs.utils.hilbert_transform")
    X = _input(field, "numpy", tmp_path)
    model = HilbertEOF(K).fit(X)
    raw = field.values.reshape(field.sizes["time"], -1)[30:]
    new = raw * _weights(field)
    keep = ~np.isnan(model.mean_)
    x = new[:, keep] - new[:, keep].mean(axis=0)
    z = hilbert._hilbert_transform_with_padding(x, padding="exp", decay_factor=0.2)
    expected = (z - z.mean(axis=0)) @ model.components_[:, keep].T
    got = model.transform(raw)
    for part in (np.real, np.imag):
        assert_close(part(got), part(expected), 1e-10, "transform of new times")
    np.testing.assert_array_equal(
        model.transform(scalepca.open_matrix(raw, weights=_weights(field))), got
    )
    model.save(tmp_path / "h.zarr")
    again = scalepca.load(tmp_path / "h.zarr").transform(raw)
    np.testing.assert_array_equal(again, got)
    with pytest.raises(
        ValueError, match="X has 10 features; the model was fitted on 540"
    ):
        model.transform(new[:, :10])


@pytest.mark.parametrize("kind", ["numpy", "xarray-many-chunks"])
def test_transform_refuses_a_nan_at_an_ocean_cell(
    field, kind, tmp_path, raise_if_dask_computes
):
    """One NaN at one ocean cell in one winter changes every complex PC (the Hilbert
    transform runs along time), so transform refuses it as fit does: NumPy input at the
    call; lazy input without computing anything at the call, then when the PCs are."""
    model = HilbertEOF(K).fit(_input(field, "numpy", tmp_path))
    holed = field.copy(data=field.values.copy())
    ocean = np.argwhere(np.isfinite(holed.values[7]))[100]
    holed.values[(7, *ocean)] = np.nan
    if kind == "numpy":
        with pytest.raises(ValueError, match="NaN at some time steps"):
            model.transform(holed.values.reshape(50, -1) * _weights(field))
        return
    X = _input(holed, kind, tmp_path)
    with raise_if_dask_computes():
        Z = model.transform(X)
    with pytest.raises(ValueError, match="NaN at some time steps"):
        _ = Z.values
