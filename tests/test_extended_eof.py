"""Extended EOF analysis (scalepca.models.extended_eof) against xeofs' ``ExtendedEOF``
on eofs' example files: winter SST (window 3, lag 2) and 500 hPa height (window 2, lag
3).

The references are in tests/fixtures/eof_references.npz, written by
tests/fixtures/make_eof_references.py (xeofs 3.0.6, its full SVD).
"""

from __future__ import annotations

from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
from scalepca.models import ExtendedEOF

from .support.compare import assert_same_components

eofs_examples = pytest.importorskip("eofs.examples")

K = 4
REFERENCES = Path(__file__).parent / "fixtures" / "eof_references.npz"
CASES = [("sst", 3, 2), ("hgt", 2, 3)]
# "dask-small-chunks": blocks of 3 rows, shorter than the halo of 4: a block's halo
# spans the next two blocks
KINDS = [
    "numpy",
    "dask-one-chunk",
    "dask-small-chunks",
    "xarray-many-chunks",
    "netcdf-path",
]
pytestmark = pytest.mark.filterwarnings("ignore:Ambiguous reference date string")


@pytest.fixture(scope="module")
def ref():
    with np.load(REFERENCES) as f:
        return dict(f)


@pytest.fixture(scope="module")
def fields(sst_hgt):
    """{"sst", "hgt"} over their common winters, latitudes in float64
    (tests/conftest.py)."""
    return dict(zip(("sst", "hgt"), sst_hgt, strict=True))


def _input(field, kind, tmp_path):
    if kind == "xarray-many-chunks":
        return scalepca.open_matrix(
            field.chunk({"time": 7}), sample_dims="time", weights="sqrt_coslat"
        )
    if kind == "netcdf-path":
        path = tmp_path / "field.nc"
        field.to_dataset(name="f").to_netcdf(path, engine="scipy")
        return scalepca.open_matrix(
            path,
            variable="f",
            sample_dims="time",
            weights="sqrt_coslat",
            chunks={"time": 9},
        )
    values = field.values.reshape(field.sizes["time"], -1)
    w = np.sqrt(np.cos(np.deg2rad(field["latitude"]))).broadcast_like(
        field.isel(time=0)
    )
    if kind != "numpy":
        values = da.from_array(
            values, chunks=(-1 if kind == "dask-one-chunk" else 3, -1)
        )
    return scalepca.open_matrix(values, weights=w.values.ravel())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("name", "L", "tau"), CASES)
def test_matches_xeofs(fields, ref, kind, name, L, tau, tmp_path):
    field = fields[name]
    X = _input(field, kind, tmp_path)
    model = ExtendedEOF(K, embedding=L, tau=tau).fit(X)
    assert model.n_passes_ == 1 and model.n_windows_ == 50 - (L - 1) * tau
    tag = f"eeof_{name}_L{L}_tau{tau}"
    np.testing.assert_allclose(
        model.explained_variance_, ref[f"{tag}_explained_variance"], rtol=1e-10
    )
    np.testing.assert_allclose(
        model.explained_variance_ratio_,
        ref[f"{tag}_explained_variance_ratio"],
        rtol=1e-10,
    )
    grid = (K, L) + field.shape[1:]
    labelled = kind in ("xarray-many-chunks", "netcdf-path")
    if labelled:
        comps = model.components_xr_
        assert comps.dims == ("mode", "lag", "latitude", "longitude")
        np.testing.assert_array_equal(comps["lag"], np.arange(L) * tau)
        comps = comps.values
    else:
        comps = model.eofs_.reshape(grid)
    assert_same_components(comps, ref[f"{tag}_components"], 1e-10, "EOFs")
    Z = model.transform(X)
    if labelled:
        assert Z.dims == ("time", "mode")
        np.testing.assert_array_equal(Z["time"], field["time"])
    zv = np.asarray(Z)
    assert_same_components(
        zv.T, ref[f"{tag}_scores"].T, 1e-10, "scores"
    )  # NaN at the last (L - 1)·tau times
    rec = np.asarray(model.inverse_transform(Z)).reshape(field.shape)
    b = ref[f"{tag}_reconstruction"]  # the last 8 times
    np.testing.assert_array_equal(np.isnan(rec[-len(b) :]), np.isnan(b))
    np.testing.assert_allclose(
        rec[-len(b) :], b, rtol=0, atol=1e-10 * np.nanmax(np.abs(b)), equal_nan=True
    )


def test_window_of_one_is_pca(fields):
    """embedding=1: the EOFs, variances and scores of PCA of the same matrix."""
    X = scalepca.open_matrix(fields["sst"], sample_dims="time", weights="sqrt_coslat")
    eeof = ExtendedEOF(3, embedding=1).fit(X)
    pca = scalepca.PCA(3).fit(X)
    np.testing.assert_allclose(
        eeof.explained_variance_, pca.explained_variance_, rtol=1e-12
    )
    assert_same_components(eeof.eofs_[:, 0], pca.components_, 1e-12, "EOFs")
    assert_same_components(
        np.asarray(eeof.transform(X)).T, np.asarray(pca.transform(X)).T, 1e-12, "scores"
    )


def test_chunking_does_not_change_the_fit(fields, tmp_path):
    fits = [
        ExtendedEOF(K, embedding=3, tau=2).fit(_input(fields["sst"], kind, tmp_path))
        for kind in KINDS[:3]
    ]
    for other in fits[1:]:
        np.testing.assert_allclose(
            other.eofs_, fits[0].eofs_, rtol=0, atol=1e-12, equal_nan=True
        )
        np.testing.assert_allclose(
            other.mean_, fits[0].mean_, rtol=0, atol=1e-12, equal_nan=True
        )


def test_bad_input(fields, raise_if_dask_computes):
    X = scalepca.open_matrix(fields["sst"], sample_dims="time", weights="sqrt_coslat")
    with raise_if_dask_computes():
        with pytest.raises(ValueError, match="leaving 0 window"):
            ExtendedEOF(2, embedding=26, tau=2).fit(X)
        for name, bad in (("embedding", 0), ("tau", 0), ("tau", 1.5)):
            with pytest.raises((TypeError, ValueError), match=name):
                ExtendedEOF(2, **{name: bad}).fit(X)
        with pytest.raises(ValueError, match="n_components"):
            ExtendedEOF(47, embedding=3, tau=2).fit(X)
    model = ExtendedEOF(2, embedding=3, tau=2).fit(X)
    with pytest.raises(ValueError, match="grid|features"):
        model.transform(fields["sst"].isel(latitude=slice(1, None)))


def test_save_load_and_raw_fields(fields, tmp_path):
    X = scalepca.open_matrix(
        fields["sst"].chunk({"time": 10}), sample_dims="time", weights="sqrt_coslat"
    )
    model = ExtendedEOF(3, embedding=3, tau=2).fit(X)
    model.save(tmp_path / "eeof.zarr")
    loaded = scalepca.load(tmp_path / "eeof.zarr")
    assert isinstance(loaded, ExtendedEOF) and loaded.get_params() == model.get_params()
    for name in ("eofs_", "mean_", "embedded_mean_", "explained_variance_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    xr.testing.assert_equal(loaded.components_xr_, model.components_xr_)
    # the raw (time, lat, lon) field goes through the saved stacking and √cos φ weights
    np.testing.assert_allclose(
        np.asarray(loaded.transform(fields["sst"])),
        np.asarray(model.transform(X)),
        rtol=1e-12,
        equal_nan=True,
    )


def test_run_config(tmp_path, capsys):
    """The shipped config, shrunk: `scalepca validate` and `run` write the model and
    the scores (NaN at the last (embedding − 1)·tau times), equal to the model's
    transform."""
    import yaml

    from scalepca.cli import main

    cfg = yaml.safe_load(
        (Path(__file__).parents[1] / "configs" / "extended_eof.yaml").read_text()
    )
    cfg["data"]["path"] = str(tmp_path / "gridded.zarr")
    cfg["data"]["generate"].update(n_samples=120, n_lat=6, n_lon=8, chunk_rows=25)
    cfg["output"]["store"] = str(tmp_path / "out")
    cfg["cluster"] = {"kind": "local", "n_workers": 1, "processes": False}
    cfg["progress"] = False
    path = tmp_path / "eeof.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["run", str(path)]) == 0, capsys.readouterr().err
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    assert isinstance(model, ExtendedEOF) and model.n_passes_ == 1
    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr")["scores"].values
    assert np.isnan(scores[-6:]).all() and np.isfinite(scores[:-6]).all()
    X = scalepca.open_matrix(
        tmp_path / "gridded.zarr",
        variable="sst",
        sample_dims="time",
        weights="sqrt_coslat",
    )
    np.testing.assert_allclose(
        scores, np.asarray(model.transform(X)), rtol=1e-12, equal_nan=True
    )
    assert (tmp_path / "out" / "report.html").exists()


def test_nan_outside_land_is_refused(fields):
    values = fields["sst"].values.reshape(50, -1).copy()
    ocean = int(np.flatnonzero(~np.isnan(values).any(axis=0))[0])
    for t in (3, 49):  # in a window's rows, and in the tail that starts no window
        holed = values.copy()
        holed[t, ocean] = np.nan
        with pytest.raises(ValueError, match="1 NaN or infinite"):
            ExtendedEOF(2, embedding=3, tau=2).fit(
                da.from_array(holed, chunks=(10, -1))
            )


@pytest.mark.parametrize(
    "rows", [25, 3]
)  # blocks longer, and shorter, than the halo of 4
def test_one_read_of_each_block(fields, rows):
    """The halo pass reads every row block of the input once: a block's halo comes
    from the blocks after it in the same graph, not from a second read."""
    from .support.counting import counted_dask

    values = np.nan_to_num(fields["sst"].values.reshape(50, -1))
    Xd, counter = counted_dask(values, chunks=(rows, -1))
    model = ExtendedEOF(2, embedding=3, tau=2).fit(Xd)
    assert model.n_passes_ == 1 and counter.reads == Xd.numblocks[0]
