"""Multivariate EOF analysis (scalepca.models.multivariate_eof) against eofs'
``MultivariateEof`` and xeofs' ``EOF`` of a list, on eofs' example files: winter SST
(sst_ndjfm_anom.nc) and 500 hPa height (hgt_djf.nc) over their 50 common winters.

The peers' arrays are stored in tests/fixtures/eof_references.npz, written by
tests/fixtures/make_eof_references.py (xeofs 3.0.6, eofs 2.0.0: the versions are in
the file).
"""

from __future__ import annotations

import json
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
from scalepca.models import MultivariateEOF

from .support.compare import assert_same_components

eofs_examples = pytest.importorskip("eofs.examples")

K = 4
REFERENCES = Path(__file__).parent / "fixtures" / "eof_references.npz"
KINDS = [
    "numpy",
    "dask-one-chunk",
    "dask-many-chunks",
    "xarray-many-chunks",
    "dataset",
    "netcdf-path",
]
pytestmark = pytest.mark.filterwarnings("ignore:Ambiguous reference date string")


@pytest.fixture(scope="module")
def ref():
    with np.load(REFERENCES) as f:
        out = dict(f)
    assert json.loads(str(out["versions"]))["xeofs"] == "3.0.6"
    return out


@pytest.fixture(scope="module")
def fields(sst_hgt):
    """(sst, hgt) over the 50 common winters, latitudes in float64
    (tests/conftest.py)."""
    return sst_hgt


def _coslat(field):
    w = np.sqrt(np.cos(np.deg2rad(field["latitude"]))).broadcast_like(
        field.isel(time=0)
    )
    return w.values.ravel()


def _inputs(fields, kind, tmp_path):
    sst, hgt = fields
    if kind == "xarray-many-chunks":
        return [sst.chunk({"time": 7}), hgt.chunk({"time": 11})]
    if kind == "dataset":  # one Dataset: the height on grid dims of its own
        return xr.Dataset(
            {"sst": sst, "z": hgt.rename(latitude="lat_z", longitude="lon_z")}
        )
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
    for f in (sst, hgt):  # raw values, weighted by open_matrix
        values = f.values.reshape(f.sizes["time"], -1)
        if kind != "numpy":
            values = da.from_array(
                values, chunks=(-1 if kind == "dask-one-chunk" else 6, -1)
            )
        out.append(scalepca.open_matrix(values, weights=_coslat(f)))
    return out


def _grid(obj, shape):
    """A per-field array (k, lat, lon) from a DataArray or a flat (k, d) array."""
    if isinstance(obj, xr.DataArray):
        return obj.transpose("mode", ...).values
    return np.asarray(obj).reshape(shape)


# the references of xeofs are from its full SVD (solver="full"): its default randomized
# solver agrees with eofs to 1.6e-7 only on these files
PEERS = [
    ("eofs", "none", 1e-10),
    ("eofs", "total_variance", 1e-10),
    ("xeofs", "none", 1e-10),
    ("xeofs", "total_variance", 1e-10),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("peer", "normalize", "rtol"), PEERS)
def test_matches_the_peers(fields, ref, kind, peer, normalize, rtol, tmp_path):
    X = _inputs(fields, kind, tmp_path)
    model = MultivariateEOF(K, normalize=normalize).fit(X)
    assert model.n_passes_ == 1
    tag = f"meof_{normalize}_{peer}"
    ev = ref[f"{tag}_eigenvalues" if peer == "eofs" else f"{tag}_explained_variance"]
    ratio = ref[
        f"{tag}_variance_fraction"
        if peer == "eofs"
        else f"{tag}_explained_variance_ratio"
    ]
    np.testing.assert_allclose(model.explained_variance_, ev, rtol=1e-10)
    np.testing.assert_allclose(model.explained_variance_ratio_, ratio, rtol=1e-10)
    pcs = ref[f"{tag}_pcs" if peer == "eofs" else f"{tag}_scores"]
    Z = model.transform(X)
    if kind in ("xarray-many-chunks", "dataset"):
        assert Z.dims == ("time", "mode")
    assert_same_components(np.asarray(Z).T, pcs.T, rtol, "scores")
    for i, (name, shape) in enumerate((("sst", (K, 18, 30)), ("hgt", (K, 29, 49)))):
        key = f"{tag}_{name}" if peer == "eofs" else f"{tag}_components_{name}"
        assert_same_components(
            _grid(model.components_xr_[i], shape), ref[key], rtol, f"EOFs of {name}"
        )


@pytest.mark.parametrize("kind", ["numpy", "xarray-many-chunks", "dataset"])
@pytest.mark.parametrize("normalize", ["none", "total_variance"])
def test_inverse_transform_in_each_fields_units(fields, ref, kind, normalize, tmp_path):
    X = _inputs(fields, kind, tmp_path)
    model = MultivariateEOF(K, normalize=normalize).fit(X)
    rebuilt = model.inverse_transform(model.transform(X))
    assert len(rebuilt) == 2
    for part, name, shape in zip(
        rebuilt, ("sst", "hgt"), ((50, 18, 30), (50, 29, 49)), strict=True
    ):
        if isinstance(part, xr.DataArray):
            assert part.dims[0] == "time" and part.sizes["time"] == 50
            part = part.values
        b = ref[f"meof_{normalize}_xeofs_reconstruction_{name}"]  # the first 8 winters
        a = np.asarray(part).reshape(shape)[: len(b)]
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(
            a, b, rtol=0, atol=1e-10 * np.nanmax(np.abs(b)), equal_nan=True
        )


def test_total_variance_normalisation(fields):
    """Each field enters with total variance 1: the variances of all modes add up to
    2."""
    model = MultivariateEOF(normalize="total_variance").fit(list(fields))
    assert model.n_components_ == 50
    np.testing.assert_allclose(model.explained_variance_.sum(), 2.0, rtol=1e-12)
    np.testing.assert_allclose(model.explained_variance_ratio_.sum(), 1.0, rtol=1e-12)
    plain = MultivariateEOF(normalize="none").fit(list(fields))
    np.testing.assert_allclose(
        plain.total_variance_per_variable_,
        model.total_variance_per_variable_,
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        plain.explained_variance_.sum(),
        model.total_variance_per_variable_.sum(),
        rtol=1e-12,
    )


def test_chunking_does_not_change_the_fit(fields, tmp_path):
    fits = [
        MultivariateEOF(K).fit(_inputs(fields, kind, tmp_path)) for kind in KINDS[:3]
    ]
    for other in fits[1:]:
        np.testing.assert_allclose(
            other.components_, fits[0].components_, rtol=0, atol=1e-12, equal_nan=True
        )
        np.testing.assert_allclose(
            other.explained_variance_, fits[0].explained_variance_, rtol=1e-12
        )


def test_bad_input(fields, tmp_path):
    sst, hgt = fields
    with pytest.raises(ValueError, match="X\\[0\\] has 50 samples and X\\[1\\] 49"):
        MultivariateEOF(2).fit([sst, hgt.isel(time=slice(1, None))])
    with pytest.raises(ValueError, match="normalize"):
        MultivariateEOF(2, normalize="std").fit([sst, hgt])
    with pytest.raises(
        ValueError, match="area_weights must be .sqrt_coslat., .coslat. or None"
    ):
        MultivariateEOF(2, area_weights="area").fit([sst, hgt])
    with pytest.raises(ValueError, match="X is an empty list"):
        MultivariateEOF(2).fit([])
    with pytest.raises(ValueError, match="n_components"):
        MultivariateEOF(60).fit([sst, hgt])
    model = MultivariateEOF(2).fit([sst, hgt])
    with pytest.raises(ValueError, match="has 1 fields; the model was fitted on 2"):
        model.transform([sst])
    with pytest.raises(ValueError, match="grid"):
        model.transform([sst, hgt.isel(latitude=slice(1, None))])


@pytest.mark.parametrize("kind", ["xarray-many-chunks", "numpy"])
def test_save_load(fields, kind, tmp_path):
    X = _inputs(fields, kind, tmp_path)
    model = MultivariateEOF(3).fit(X)
    model.save(tmp_path / "meof.zarr")
    with pytest.raises(FileExistsError):
        model.save(tmp_path / "meof.zarr")
    loaded = scalepca.load(tmp_path / "meof.zarr")
    assert (
        isinstance(loaded, MultivariateEOF)
        and loaded.get_params() == model.get_params()
    )
    for name in ("components_", "mean_", "scale_", "explained_variance_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.variables_ == model.variables_
    np.testing.assert_array_equal(
        np.asarray(loaded.transform(X)), np.asarray(model.transform(X))
    )
    for a, b in zip(loaded.components_xr_, model.components_xr_, strict=True):
        if kind == "numpy":
            np.testing.assert_array_equal(a, b)
        else:
            xr.testing.assert_equal(a, b)
    if (
        kind != "numpy"
    ):  # the raw fields go through the saved preparation (stack, √cos φ)
        np.testing.assert_allclose(
            np.asarray(loaded.transform(list(fields))),
            np.asarray(model.transform(X)),
            rtol=1e-12,
        )


def test_run_config_on_two_variables(fields, ref, tmp_path, capsys):
    """`scalepca validate` and `run` with data.variable: [sst, z] (a NetCDF file of both
    fields) and model.method multivariate_eof: the scores equal eofs' PCs."""
    import yaml

    from scalepca.cli import main

    sst, hgt = fields
    ds = xr.Dataset({"sst": sst, "z": hgt.rename(latitude="lat_z", longitude="lon_z")})
    ds.to_netcdf(tmp_path / "both.nc", engine="scipy")
    cfg = yaml.safe_load(
        (Path(__file__).parents[1] / "configs" / "multivariate_eof.yaml").read_text()
    )
    cfg["data"]["path"] = str(tmp_path / "both.nc")
    del cfg["data"]["generate"]  # the shipped config generates its fields when absent
    cfg["output"] = {"store": str(tmp_path / "out")}  # the report too
    cfg["cluster"] = {"kind": "local", "n_workers": 1, "processes": False}
    cfg["progress"] = False
    path = tmp_path / "meof.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert main(["run", str(path)]) == 0, capsys.readouterr().err
    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr")["scores"]
    assert_same_components(
        scores.transpose("mode", "time").values,
        ref["meof_total_variance_eofs_pcs"].T,
        1e-10,
        "scores",
    )
    assert (tmp_path / "out" / "report.html").exists()
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    assert model.variables_ == ["sst", "z"]
    # `scalepca transform` reads both fields by name and stacks and weights them as the
    # fit
    assert (
        main(
            [
                "transform",
                str(tmp_path / "out" / "model.zarr"),
                str(tmp_path / "both.nc"),
                "--out",
                str(tmp_path / "again.zarr"),
            ]
        )
        == 0
    ), capsys.readouterr().err
    again = xr.open_zarr(tmp_path / "again.zarr")["scores"]
    np.testing.assert_allclose(
        again.transpose("time", "mode").values,
        scores.transpose("time", "mode").values,
        rtol=1e-12,
    )
    assert (
        main(
            [
                "transform",
                str(tmp_path / "out" / "model.zarr"),
                str(tmp_path / "both.nc"),
                "--out",
                str(tmp_path / "bad.zarr"),
                "--variable",
                "sst",
            ]
        )
        == 2
    )
    assert "--variable do not apply" in capsys.readouterr().err
    cfg["model"]["method"] = "pca"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["validate", str(path)]) == 2
    assert "fits several fields" in capsys.readouterr().err


def test_one_read_of_each_block(fields):
    """One pass: every row block of every field is read once, however differently the
    fields are chunked."""
    from .support.counting import counted_dask

    arrays = [np.nan_to_num(f.values.reshape(50, -1)) for f in fields]
    (a, ca), (b, cb) = (
        counted_dask(arrays[0], (10, -1)),
        counted_dask(arrays[1], (7, -1)),
    )
    model = MultivariateEOF(2).fit([a, b])
    assert model.n_passes_ == 1
    assert (ca.reads, cb.reads) == (a.numblocks[0], b.numblocks[0])
