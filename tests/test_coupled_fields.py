"""make-data's ``coupled_fields``: the two fields configs/mca.yaml and
configs/multivariate_eof.yaml generate when no file of the user's is there."""

import numpy as np
import pytest

import scalepca
from scalepca.analysis.mca import MCA
from scalepca.datasets import make_coupled_fields, write_dataset


def _fields(ds):
    return [
        scalepca.open_matrix(ds[v], sample_dims="time", weights="sqrt_coslat")
        for v in ("sst", "z")
    ]


@pytest.mark.parametrize("coupled", [1, 2, 3])
def test_mca_finds_as_many_coupled_modes_as_were_made(coupled):
    """Only the modes that share their time series covary: the first ``coupled`` modes
    of MCA hold all but the sampling noise of the squared covariance."""
    ds = make_coupled_fields(
        3000,
        n_lat=12,
        n_lon=24,
        n_lat_y=9,
        n_lon_y=18,
        rank=4,
        coupled=coupled,
        chunk_rows=500,
        seed=3,
    )
    X, Y = _fields(ds)
    frac = MCA(4).fit(X, Y).squared_covariance_fraction_
    assert frac[:coupled].sum() > 0.99, frac
    assert frac[coupled - 1] > 20 * frac[coupled:].sum(), frac


def test_the_second_field_is_in_other_units_without_a_mask():
    ds = make_coupled_fields(
        200, n_lat=6, n_lon=12, n_lat_y=5, n_lon_y=10, chunk_rows=50
    )
    sst, z = ds["sst"].values, ds["z"].values
    assert sst.shape == (200, 6, 12) and z.shape == (200, 5, 10)
    land = np.isnan(sst).all(axis=0)
    assert land.any() and not np.isnan(sst[:, ~land]).any()
    assert not np.isnan(z).any()
    assert abs(np.nanmean(z) / np.nanmean(sst) - 5500 / 15) < 30
    assert ds["lat_y"].attrs["units"] == "degrees_north"


def test_written_and_read_back_as_generated(tmp_path):
    ds = make_coupled_fields(
        120, n_lat=6, n_lon=12, n_lat_y=5, n_lon_y=10, chunk_rows=40
    )
    write_dataset(ds, tmp_path / "c.zarr")
    import xarray as xr

    back = xr.open_zarr(tmp_path / "c.zarr")
    for v in ("sst", "z"):
        np.testing.assert_array_equal(back[v].values, ds[v].values)


def test_refuses_more_coupled_modes_than_modes():
    with pytest.raises(ValueError, match="coupled must be in"):
        make_coupled_fields(10, rank=2, coupled=3)
