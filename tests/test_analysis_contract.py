"""MCA, HilbertEOF and BootstrapEOF on the estimators' one contract: exported beside
PCA, ``n_components``, one save/load route (``est.save`` / :func:`scalepca.load`)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
import scalepca.analysis

TOOLS = ("MCA", "HilbertEOF", "BootstrapEOF")


def test_tools_at_the_top_level_and_listed_in_analysis():
    from scalepca.analysis.bootstrap import BootstrapEOF
    from scalepca.analysis.hilbert_eof import HilbertEOF
    from scalepca.analysis.mca import MCA

    assert (scalepca.MCA, scalepca.HilbertEOF, scalepca.BootstrapEOF) == (
        MCA,
        HilbertEOF,
        BootstrapEOF,
    )
    assert set(TOOLS) <= set(scalepca.__all__) <= set(dir(scalepca))
    public = scalepca.analysis.__all__
    assert set(TOOLS) | {"Rotator", "north_test", "eofs_as_correlation"} <= set(public)
    assert set(public) <= set(dir(scalepca.analysis))
    for name in public:  # every listed name resolves, to the object its module defines
        assert getattr(scalepca.analysis, name) is not None
    assert scalepca.analysis.MCA is MCA
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        scalepca.analysis.nothing  # noqa: B018


@pytest.mark.parametrize("name", TOOLS)
def test_n_components_is_the_only_name(name):
    cls = getattr(scalepca, name)
    params = cls().get_params()
    assert params["n_components"] == 2 and "n_modes" not in params
    assert cls(3).n_components == 3
    with pytest.raises(TypeError):
        cls(n_modes=3)


def test_analysis_lists_what_it_maps():
    assert sorted(scalepca.analysis.__all__) == sorted(scalepca.analysis._PUBLIC)


# -- one persistence route ---------------------------------------------------------
def _field(rng, n=40, d=(5, 6), seed_land=True):
    """A (time, lat, lon) DataArray with a land cell (NaN at every time step)."""
    values = rng.normal(size=(n, *d)) + np.linspace(0, 3, d[1])
    if seed_land:
        values[:, 0, 0] = np.nan
    return xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={
            "time": np.arange(n),
            "lat": np.linspace(-40, 40, d[0]),
            "lon": np.arange(d[1]) * 10.0,
        },
        name="f",
    )


def _as(kind, field):
    if kind == "xarray":
        return scalepca.open_matrix(
            field.chunk({"time": 9}), sample_dims="time", weights="sqrt_coslat"
        )
    values = field.values.reshape(field.sizes["time"], -1)
    if kind == "dask":
        values = da.from_array(values, chunks=(7, -1))
    return values


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


FITS = {
    "mca": lambda X, Y: scalepca.MCA(3, standardize=(True, False)).fit(X, Y),
    "mca-randomized": lambda X, Y: scalepca.MCA(
        2, solver="randomized", random_state=1, total="bounds"
    ).fit(X, Y),
    "hilbert_eof": lambda X, Y: scalepca.HilbertEOF(3, decay_factor=0.1).fit(X),
    "bootstrap_eof": lambda X, Y: scalepca.BootstrapEOF(
        3, n_bootstraps=12, random_state=None
    ).fit(X),
}


@pytest.mark.parametrize("kind", ["numpy", "dask", "xarray"])
@pytest.mark.parametrize("fit", list(FITS))
def test_save_load_transform(tmp_path, kind, fit):
    """est.save → scalepca.load, the route of every model: the same class, parameters,
    fitted state and transform (to 1e-12; it is bitwise here), no second layout."""
    import zarr

    rng = np.random.default_rng(5)
    X, Y = _as(kind, _field(rng)), _as(kind, _field(rng, d=(4, 5)))
    est = FITS[fit](X, Y)
    est.save(tmp_path / "m.zarr")
    attrs = dict(zarr.open_group(str(tmp_path / "m.zarr"), mode="r").attrs)
    assert attrs["class"] == f"{type(est).__module__}:{type(est).__name__}"
    assert {"arrays", "scalars", "params", "fortran_order"} <= set(attrs)
    got = scalepca.load(tmp_path / "m.zarr")
    assert type(got) is type(est) and got.get_params() == est.get_params()
    assert got._state_to_save().keys() == est._state_to_save().keys()
    args = (X, Y) if fit.startswith("mca") else (X,)
    for a, b in zip(
        _tuple(est.transform(*args)), _tuple(got.transform(*args)), strict=True
    ):
        assert type(a) is type(b)
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * np.abs(a).max())
    if kind == "xarray":  # the coordinates and the preparation came back too
        raw = _field(rng) if not fit.startswith("mca") else None
        if raw is not None:
            np.testing.assert_allclose(
                np.asarray(got.transform(raw)),
                np.asarray(est.transform(raw)),
                rtol=0,
                atol=1e-12,
            )


def test_analysis_stores_are_model_stores():
    from scalepca.persistence import registry

    assert not hasattr(registry, "OWN_STORES")
    import scalepca.io._store as store

    assert not hasattr(store, "write_model_group")
    assert not hasattr(store, "open_model_group")
    for name in TOOLS:
        assert not hasattr(getattr(scalepca, name), "load")
