"""Codecs of what scalepca writes: every registry codec round-trips through make-data
(``write_dataset``), outputs (``write_array``, plain and xarray) and a CLI run; names
outside the registry are refused before anything is written."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

from scalepca._codecs import CODECS, DEFAULT_CODEC, check_codec, compressors
from scalepca.datasets import make_gridded, make_low_rank, write_dataset
from scalepca.io import write_array


def _compressor_names(arr: zarr.Array) -> list[str]:
    return [type(c).__name__ for c in arr.compressors]


EXPECTED = {
    "lz4": ["BloscCodec"],
    "lz4-bitshuffle": ["BloscCodec"],
    "zstd": ["ZstdCodec"],
    "none": [],
}


def test_registry():
    assert set(CODECS) == set(EXPECTED) and DEFAULT_CODEC in CODECS
    assert check_codec(None) == DEFAULT_CODEC
    for bad in ("gzip", "LZ4", "numcodecs.blosc:Blosc", 3, ""):
        with pytest.raises(ValueError, match="unknown codec"):
            check_codec(bad)
    assert compressors("none") is None
    (blosc,) = compressors("lz4-bitshuffle")
    assert blosc.cname.value == "lz4" and blosc.shuffle.value == "bitshuffle"


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_datasets_round_trip(tmp_path, codec):
    X = make_low_rank(250, 9, rank=2, chunk_rows=100, seed=3, dtype="float32")
    path = write_dataset(X, tmp_path / "x.zarr", codec=codec)
    z = zarr.open_array(path, mode="r")
    assert _compressor_names(z) == EXPECTED[codec]
    np.testing.assert_array_equal(z[...], X.compute())
    G = make_gridded(30, n_lat=4, n_lon=6, rank=2, chunk_rows=10, seed=1)
    gpath = write_dataset(G, tmp_path / "g.zarr", codec=codec)
    assert _compressor_names(zarr.open_group(gpath, mode="r")["sst"]) == EXPECTED[codec]
    expected = G.load()  # the store also says what it is and that its write ended
    expected.attrs = {**expected.attrs, "format": "scalepca-dataset", "complete": True}
    xr.testing.assert_identical(
        xr.open_zarr(gpath, consolidated=False).load(), expected
    )


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_outputs_round_trip(tmp_path, codec):
    a = da.from_array(
        np.random.default_rng(0).standard_normal((120, 3)), chunks=(50, 3)
    )
    write_array(a, tmp_path / "s.zarr", name="scores", codec=codec)
    z = zarr.open_group(tmp_path / "s.zarr", mode="r")["scores"]
    assert _compressor_names(z) == EXPECTED[codec]
    np.testing.assert_array_equal(z[...], a.compute())
    xa = xr.DataArray(a, dims=("sample", "mode"), coords={"sample": np.arange(120) * 2})
    write_array(xa, tmp_path / "x.zarr", name="scores", codec=codec)
    back = xr.open_zarr(tmp_path / "x.zarr")["scores"]
    assert (
        _compressor_names(zarr.open_group(tmp_path / "x.zarr", mode="r")["scores"])
        == (EXPECTED[codec])
    )
    xr.testing.assert_equal(back.load(), xa.compute())


def test_default_codec_and_bad_name_before_writing(tmp_path):
    a = da.ones((10, 2), chunks=5)
    write_array(a, tmp_path / "d.zarr")
    assert (
        _compressor_names(zarr.open_group(tmp_path / "d.zarr", mode="r")["scores"])
        == (EXPECTED[DEFAULT_CODEC])
    )
    with pytest.raises(ValueError, match="unknown codec 'gzip'"):
        write_array(a, tmp_path / "e.zarr", codec="gzip")
    with pytest.raises(ValueError, match="unknown codec 'gzip'"):
        write_dataset(a, tmp_path / "f.zarr", codec="gzip")
    assert not (tmp_path / "e.zarr").exists() and not (tmp_path / "f.zarr").exists()
