"""NetCDF / HDF5 input: one file or a glob of several, opened lazily like zarr
stores."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca

eofs_examples = pytest.importorskip("eofs.examples")
pytest.importorskip("h5netcdf")

SST = eofs_examples.example_data_path(
    "sst_ndjfm_anom.nc"
)  # netCDF classic, 4 variables


def _fit(X):
    return scalepca.PCA(4).fit(X)


@pytest.fixture
def zarr_reference(sst_dataset, tmp_path):
    store = tmp_path / "sst.zarr"
    sst_dataset.to_zarr(store, zarr_format=3, consolidated=False)
    return store


def test_single_hdf5_file_equals_zarr(
    sst_dataset, tmp_path, zarr_reference, raise_if_dask_computes
):
    path = tmp_path / "sst.nc"
    sst_dataset.to_netcdf(path, engine="h5netcdf")  # NetCDF-4 (HDF5)
    with raise_if_dask_computes(0):
        X = scalepca.open_matrix(str(path), variable="sst", sample_dims="time")
    Z = scalepca.open_matrix(str(zarr_reference), variable="sst", sample_dims="time")
    assert (
        isinstance(X.data, da.Array)
        and X.dims == Z.dims
        and X.shape == Z.shape == (50, 540)
    )
    np.testing.assert_array_equal(X.values, Z.values)
    np.testing.assert_array_equal(_fit(X).components_, _fit(Z).components_)


def test_classic_netcdf_and_magic_bytes(sst_dataset, tmp_path):
    """The eofs example file (netCDF classic) opens; files without an ending by their
    bytes."""
    X = scalepca.open_matrix(SST, variable="sst", sample_dims="time")
    np.testing.assert_array_equal(X.values, sst_dataset.sst.values.reshape(50, -1))
    plain = tmp_path / "sst_without_ending"
    plain.write_bytes(open(SST, "rb").read())
    Y = scalepca.open_matrix(str(plain), variable="sst", sample_dims="time")
    np.testing.assert_array_equal(Y.values, X.values)
    h5 = tmp_path / "sst_hdf5_without_ending"  # NetCDF-4: found by the HDF5 signature
    sst_dataset.to_netcdf(h5, engine="h5netcdf")
    H = scalepca.open_matrix(str(h5), variable="sst", sample_dims="time")
    np.testing.assert_array_equal(H.values, X.values)


def test_glob_of_files_split_along_time_equals_zarr(
    sst_dataset, tmp_path, zarr_reference
):
    d = tmp_path / "parts"
    d.mkdir()
    sst_dataset.isel(time=slice(0, 23)).to_netcdf(d / "sst_a.nc", engine="h5netcdf")
    sst_dataset.isel(time=slice(23, None)).to_netcdf(d / "sst_b.nc", engine="h5netcdf")
    X = scalepca.open_matrix(str(d / "*.nc"), variable="sst", sample_dims="time")
    Z = scalepca.open_matrix(str(zarr_reference), variable="sst", sample_dims="time")
    assert X.data.numblocks[0] >= 2  # one chunk per file at least: still lazy and split
    np.testing.assert_array_equal(X.time.values, Z.time.values)
    np.testing.assert_array_equal(X.values, Z.values)
    a, b = _fit(X), _fit(Z)
    np.testing.assert_allclose(a.explained_variance_, b.explained_variance_, rtol=1e-12)


def test_missing_file_and_empty_glob(tmp_path):
    with pytest.raises(FileNotFoundError, match="no NetCDF"):
        scalepca.open_matrix(str(tmp_path / "missing.nc"), variable="sst")
    with pytest.raises(FileNotFoundError, match="no file matches"):
        scalepca.open_matrix(str(tmp_path / "nothing_*.nc"), variable="sst")
    with pytest.raises(
        FileNotFoundError
    ):  # no ending, not there: the zarr path reports it
        scalepca.open_matrix(str(tmp_path / "missing"))


def test_several_variables_need_variable():
    with pytest.raises(
        ValueError,
        match=r"holds variables \['bounds_time'.*'sst'\]; pass "
        r"variable=",
    ):
        scalepca.open_matrix(SST, sample_dims="time")
    with pytest.raises(KeyError, match="no variable 'tos'"):
        scalepca.open_matrix(SST, variable="tos", sample_dims="time")


# -- every CLI verb reads NetCDF (issue 38, item 15) -----------------------------------
def _main(capsys, *argv):
    from scalepca.cli import main

    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_every_cli_verb_reads_netcdf(sst_dataset, tmp_path, capsys):
    """`transform` and `info` read the NetCDF file `run` and `validate` read (they
    said "no zarr array or group at '….nc'"); a missing file is "no NetCDF file", not
    "no zarr store"."""
    import yaml

    h5 = tmp_path / "sst.nc"
    # NetCDF-4 (HDF5) besides the classic example file
    sst_dataset.to_netcdf(h5, engine="h5netcdf")
    for path in (SST, h5):
        cfg = {
            "data": {
                "path": str(path),
                "variable": "sst",
                "sample_dims": ["time"],
                "weights": "sqrt_coslat",
            },
            "model": {"method": "pca", "n_components": 3},
            "cluster": {
                "kind": "local",
                "n_workers": 1,
                "threads_per_worker": 1,
                "processes": False,
            },
            "output": {"store": str(tmp_path / "out"), "report": False},
            "progress": False,
        }
        config = tmp_path / "nc.yaml"
        config.write_text(yaml.safe_dump(cfg))
        rc, out, err = _main(capsys, "validate", config)
        assert rc == 0, err
        rc, out, err = _main(capsys, "run", config, "--quiet")
        assert rc == 0, err
        model = tmp_path / "out" / "model.zarr"
        rc, out, err = _main(
            capsys,
            "transform",
            model,
            path,
            "--out",
            tmp_path / "s.zarr",
            "--overwrite",
            "--no-processes",
            "--n-workers",
            1,
            "--quiet",
        )
        assert rc == 0, err
        got = xr.open_zarr(tmp_path / "s.zarr")["scores"]
        ran = xr.open_zarr(tmp_path / "out" / "scores.zarr")["scores"]
        np.testing.assert_allclose(got.values, ran.values, rtol=1e-12, atol=1e-12)
        # the dense float64 reference: the weighted field minus the mean, onto the EOFs
        est = scalepca.load(model)
        from scalepca.analysis.eof import coslat_weights

        w = coslat_weights(sst_dataset).broadcast_like(sst_dataset.sst.isel(time=0))
        field = (sst_dataset.sst * w).values.reshape(50, -1).astype(np.float64)
        ocean = np.isfinite(est.mean_)
        ref = (field[:, ocean] - est.mean_[ocean]) @ est.components_[:, ocean].T
        np.testing.assert_allclose(
            got.values, ref, rtol=0, atol=1e-10 * np.abs(ref).max()
        )
        rc, out, err = _main(capsys, "info", path)
        assert rc == 0, err
        assert (
            "sst: dims ('time', 'latitude', 'longitude'), shape (50, 18, 30)" in out
        ), out
    for verb in ("validate", "run"):
        rc, _, err = _main(
            capsys, verb, config, "--set", f"data.path={tmp_path / 'none.nc'}"
        )
        assert rc == 2 and "no NetCDF file at" in err and "zarr" not in err, err
    rc, _, err = _main(capsys, "info", tmp_path / "none.nc")
    assert rc == 2 and "no NetCDF" in err and "zarr" not in err, err
