"""xarray's open options (decode_times, use_cftime, engine) from open_matrix and the
config's data section, on eofs' example files: hgt_djf.nc, whose times ("hours since
1-1-1") xarray decodes only with cftime, and sst_ndjfm_anom.nc."""

from __future__ import annotations

import importlib.util

import dask
import numpy as np
import pytest
import xarray as xr
import yaml

import scalepca
from scalepca.analysis.eof import coslat_weights
from scalepca.analysis.eof_fields import eofs, pcs
from scalepca.app.config import ConfigError, validate_config
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main

from .support.compare import align_signs

eofs_examples = pytest.importorskip("eofs.examples")
eofs_xr = pytest.importorskip("eofs.xarray")

HAS_CFTIME = importlib.util.find_spec("cftime") is not None
no_cftime = pytest.mark.skipif(
    HAS_CFTIME, reason="with cftime, xarray decodes hgt_djf.nc"
)
# xarray's note on the unpadded reference year "1-1-1" of hgt_djf.nc
pytestmark = pytest.mark.filterwarnings("ignore:Ambiguous reference date string")


@pytest.fixture(scope="module")
def hgt_path():
    return eofs_examples.example_data_path("hgt_djf.nc")


@pytest.fixture(scope="module")
def hgt(hgt_path):
    with xr.open_dataset(hgt_path, decode_times=False, engine="scipy") as ds:
        return ds["z"].load()


# -- open_matrix -----------------------------------------------------------------------
@no_cftime
def test_undecodable_times_name_the_options(hgt_path):
    with pytest.raises(ValueError, match="cannot decode the times") as err:
        scalepca.open_matrix(hgt_path, variable="z", sample_dims="time")
    assert "open_options={'decode_times': False}" in str(err.value)
    assert "use_cftime" in str(err.value) and "pip install cftime" in str(err.value)


@pytest.mark.parametrize("engine", [None, "scipy"])
@pytest.mark.parametrize("time_chunk", [-1, 7])
def test_decode_times_false_fits_hgt_as_eofs(hgt_path, hgt, engine, time_chunk):
    opts = {"decode_times": False, "engine": engine}
    X = scalepca.open_matrix(
        hgt_path,
        variable="z",
        sample_dims="time",
        weights="sqrt_coslat",
        open_options=opts,
        chunks={"time": time_chunk},
    )
    np.testing.assert_array_equal(
        X["time"].values, hgt["time"].values
    )  # numbers, as stored
    pca = scalepca.PCA(4).fit(X)
    w = coslat_weights(hgt).broadcast_like(hgt.isel(time=0)).values
    solver = eofs_xr.Eof(hgt, weights=w)
    for scaling in (0, 1, 2):
        ref = solver.eofs(neofs=4, eofscaling=scaling).values
        got = eofs(pca, eofscaling=scaling).transpose(*solver.eofs(neofs=4).dims).values
        np.testing.assert_allclose(
            align_signs(got, ref), ref, rtol=0, atol=1e-8 * np.abs(ref).max()
        )
        ref = solver.pcs(npcs=4, pcscaling=scaling).values
        got = pcs(pca, X, pcscaling=scaling).values
        np.testing.assert_allclose(
            align_signs(got.T, ref.T).T, ref, rtol=0, atol=1e-8 * np.abs(ref).max()
        )


def test_use_cftime_false_and_zarr_stores(tmp_path, sst_dataset):
    path = eofs_examples.example_data_path("sst_ndjfm_anom.nc")
    X = scalepca.open_matrix(
        path, variable="sst", sample_dims="time", open_options={"use_cftime": False}
    )
    assert np.issubdtype(X["time"].dtype, np.datetime64)
    store = tmp_path / "sst.zarr"
    sst_dataset.to_zarr(store)
    Z = scalepca.open_matrix(
        store, variable="sst", sample_dims="time", open_options={"decode_times": False}
    )
    assert np.issubdtype(Z["time"].dtype, np.number)  # days since ..., as stored
    np.testing.assert_array_equal(Z.values, X.values)
    with pytest.raises(ValueError, match=r"open_options\['engine'\] applies to NetCDF"):
        scalepca.open_matrix(
            store, variable="sst", sample_dims="time", open_options={"engine": "scipy"}
        )


def test_bad_open_options_are_named(tmp_path, sst):
    path = eofs_examples.example_data_path("sst_ndjfm_anom.nc")
    cases = [
        (
            {"engine": "nope"},
            r"open_options\['engine'\] 'nope' is not an installed xarray "
            r"engine.*installed: .*scipy",
        ),
        (
            {"decode_times": "no"},
            r"open_options\['decode_times'\] must be true or false",
        ),
        ({"decode_times": 1}, r"open_options\['decode_times'\] must be true or false"),
        ({"chunks": 3}, r"unknown option\(s\) \['chunks'\]; allowed: decode_times"),
        ({"use_cftime": True, "decode_times": False}, "set one of them"),
        ("decode_times", "must be a mapping"),
    ]
    if not HAS_CFTIME:
        cases.append(({"use_cftime": True}, "cftime is not installed"))
    for opts, match in cases:
        with pytest.raises(ValueError, match=match):
            scalepca.open_matrix(
                path, variable="sst", sample_dims="time", open_options=opts
            )
    with pytest.raises(ValueError, match="the source is a DataArray, opened already"):
        scalepca.open_matrix(
            sst, sample_dims="time", open_options={"decode_times": False}
        )
    import zarr

    plain = tmp_path / "x.zarr"
    zarr.open_array(str(plain), mode="w", shape=(4, 3), dtype="f8")[:] = 1.0
    with pytest.raises(ValueError, match="not written by xarray"):
        scalepca.open_matrix(plain, open_options={"decode_times": False})


# -- the config's data section ---------------------------------------------------------
def _cfg(data, **extra):
    return {
        "data": {"path": "x.nc", **data},
        "model": {"method": "pca", "n_components": 2},
        **extra,
    }


def test_config_validates_the_open_keys():
    out = validate_config(_cfg({"decode_times": False, "engine": "scipy"}))["data"]
    assert (
        out["decode_times"] is False
        and out["engine"] == "scipy"
        and out["use_cftime"] is None
    )
    for data, match in [
        ({"decode_times": "no"}, "'data.decode_times'"),
        ({"use_cftime": 1}, "'data.use_cftime'"),
        ({"engine": "nope"}, "'data.engine' 'nope' is not an installed xarray engine"),
        ({"engine": 3}, "'data.engine'"),
        ({"use_cftime": False, "decode_times": False}, "'data.use_cftime' chooses how"),
        (
            {"decode_times": False, "format": "anndata"},
            "'data.decode_times' apply to stores read through xarray",
        ),
    ]:
        with pytest.raises(ConfigError, match=match):
            validate_config(_cfg(data))


def _write(tmp_path, path, **data):
    cfg = {
        "data": {
            "path": str(path),
            "variable": "z",
            "sample_dims": "time",
            "weights": "sqrt_coslat",
            **data,
        },
        "model": {"method": "pca", "n_components": 3},
        "cluster": {
            "kind": "local",
            "n_workers": 1,
            "threads_per_worker": 1,
            "processes": False,
        },
        "output": {"store": str(tmp_path / "out"), "report": False},
    }
    out = tmp_path / "run.yaml"
    out.write_text(yaml.safe_dump(cfg))
    return out


def _main(capsys, *argv):
    with dask.config.set({"scalepca.progress.grace": 0}):
        rc = main([str(a) for a in argv])
    return (rc, *capsys.readouterr())


@no_cftime
def test_cli_says_which_keys_open_hgt(tmp_path, hgt_path, capsys):
    cfg = _write(tmp_path, hgt_path)
    for verb in ("validate", "run"):
        rc, out, err = _main(capsys, verb, cfg)
        assert rc == EXIT_USER_ERROR, (out, err)
        assert "xarray cannot decode its times" in err + out
        assert "set data.decode_times: false" in err + out
        assert "data.use_cftime: true" in err + out
        assert "open_options" not in err + out  # said in the config's words


def test_cli_runs_with_the_open_keys(tmp_path, hgt_path, hgt, capsys):
    cfg = _write(tmp_path, hgt_path, decode_times=False, engine="scipy")
    rc, out, err = _main(capsys, "validate", cfg)
    assert rc == EXIT_OK, err
    assert "65 samples × 1,421 features" in out
    rc, out, err = _main(capsys, "run", cfg)
    assert rc == EXIT_OK, err
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    w = coslat_weights(hgt).broadcast_like(hgt.isel(time=0)).values
    ref = eofs_xr.Eof(hgt, weights=w).eofs(neofs=3).values
    got = model.components_xr_.transpose(
        "mode", "pressure", "latitude", "longitude"
    ).values
    np.testing.assert_allclose(
        align_signs(got, ref), ref, rtol=0, atol=1e-8 * np.abs(ref).max()
    )
    for key, value, match in [
        ("engine", "h5netcdf", "data.engine"),  # cannot read classic
        ("engine", "nope", "'data.engine' 'nope'"),
    ]:
        cfg = _write(tmp_path, hgt_path, decode_times=False, **{key: value})
        rc, out, err = _main(capsys, "validate", cfg)
        assert rc != EXIT_OK and match in err + out, (out, err)


def test_cli_refuses_open_keys_where_they_do_not_apply(tmp_path, capsys):
    import zarr

    plain = tmp_path / "x.zarr"
    zarr.open_array(str(plain), mode="w", shape=(40, 3), dtype="f8")[:] = (
        np.arange(120.0).reshape(40, 3) ** 0.5
    )
    cfg = _write(tmp_path, plain, decode_times=False)
    text = yaml.safe_load(cfg.read_text())
    for key in ("variable", "sample_dims", "weights"):
        del text["data"][key]
    cfg.write_text(yaml.safe_dump(text))
    rc, out, err = _main(capsys, "validate", cfg)
    assert rc == EXIT_USER_ERROR
    assert "'data.decode_times' applies to stores read through xarray" in err + out, (
        out,
        err,
    )
