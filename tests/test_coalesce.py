"""Stores of many small chunks are read several store chunks per task (issue 23).

A task reads one region of whole store chunks (``da.from_zarr`` with coalesced
chunks): the task count follows the data size over ``task_size``, results do not
depend on it.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import scalepca
from scalepca.app.config import ConfigError, validate_config
from scalepca.io._coalesce import _ChunkFiles, coalesced_rows, open_zarr

from .conftest import low_rank_data


def _store(path, X, chunks, **kw):
    z = zarr.create_array(
        store=str(path), shape=X.shape, chunks=chunks, dtype=X.dtype, **kw
    )
    z[:] = X
    return z


def _read_tasks(arr) -> int:
    """Tasks of a freshly opened array's graph that read data (the zarr array is one
    key)."""
    graph = dict(arr.__dask_graph__())
    return sum(1 for k in graph if isinstance(k, tuple))


@pytest.fixture
def X0(rng):
    return low_rank_data(rng, n=6000, d=16, rank=4)


def test_rows_are_whole_multiples_of_the_store_chunk():
    # 200 rows of 16 float64 = 25,600 bytes per store chunk
    assert coalesced_rows(200, 4_000_000, 128, "128MiB") == 200 * (2**27 // 25_600)
    assert coalesced_rows(200, 4_000_000, 128, None) == 200
    assert coalesced_rows(200, 4_000_000, 128, 1) == 200  # a store chunk is never split
    assert (
        coalesced_rows(200, 1000, 128, "128MiB") == 1000
    )  # never more rows than the data


def test_many_small_chunks_become_few_tasks(tmp_path, X0):
    _store(tmp_path / "s.zarr", X0, (20, 16))  # 300 store chunks
    native = scalepca.open_matrix(tmp_path / "s.zarr", task_size=None)
    assert native.chunks[0] == (20,) * 300 and _read_tasks(native) == 300
    X = scalepca.open_matrix(
        tmp_path / "s.zarr", task_size=20 * 16 * 8 * 7
    )  # 7 store chunks
    assert set(X.chunks[0][:-1]) == {140} and _read_tasks(X) == len(X.chunks[0]) == 43
    np.testing.assert_array_equal(X.compute(), X0)
    # the default (128 MiB) reads this small store in one task
    assert _read_tasks(scalepca.open_matrix(tmp_path / "s.zarr")) == 1


def test_column_chunks_are_read_side_by_side_into_whole_rows(tmp_path, X0):
    _store(tmp_path / "c.zarr", X0, (20, 4))  # 300 × 4 store chunks
    X = scalepca.open_matrix(tmp_path / "c.zarr", task_size=20 * 16 * 8 * 5)
    assert X.chunks[1] == (16,) and set(X.chunks[0]) == {100}
    assert (
        _read_tasks(X) == 60
    )  # no rechunk tasks: each task reads its 5 × 4 store chunks
    np.testing.assert_array_equal(X.compute(), X0)
    # 2-D blocks kept (robust PCA from a config): rows coalesced, store columns kept
    z = zarr.open_array(str(tmp_path / "c.zarr"))
    B = open_zarr(z, task_size=20 * 4 * 8 * 5, full_rows=False)
    assert B.chunks[1] == (4,) * 4 and set(B.chunks[0]) == {100}


def test_sharded_store_is_read_whole_shards_per_task(tmp_path, X0):
    _store(tmp_path / "sh.zarr", X0, (20, 16), shards=(200, 16))
    X = scalepca.open_matrix(tmp_path / "sh.zarr", task_size=1)
    assert set(X.chunks[0]) == {200}  # a shard is the read unit, not its inner chunks
    np.testing.assert_array_equal(X.compute(), X0)


def test_xarray_store_is_coalesced_along_the_outer_sample_dim(tmp_path, rng):
    field = xr.DataArray(
        rng.standard_normal((400, 6, 5)),
        dims=("time", "lat", "lon"),
        coords={"lat": np.arange(6.0), "lon": np.arange(5.0)},
        name="sst",
    )
    field.to_dataset().chunk({"time": 20, "lat": 3, "lon": 5}).to_zarr(
        tmp_path / "f.zarr", consolidated=False
    )
    native = scalepca.open_matrix(
        tmp_path / "f.zarr", sample_dims="time", task_size=None
    )
    X = scalepca.open_matrix(
        tmp_path / "f.zarr", sample_dims="time", task_size=20 * 30 * 8 * 4
    )
    assert set(X.chunks[0]) == {80} and X.chunks[1] == (30,)
    assert len(X.data.__dask_graph__()) < len(native.data.__dask_graph__()) // 5
    np.testing.assert_array_equal(X.values, native.values)
    a = scalepca.PCA(5).fit(native)
    b = scalepca.PCA(5).fit(X)
    np.testing.assert_allclose(b.components_, a.components_, rtol=0, atol=1e-12)


def test_pca_of_many_small_chunks_equals_the_single_chunk_fit(tmp_path, X0):
    """Chunking invariance for a store of 1,200 store chunks (300 row chunks × 4 column
    chunks), read one store row chunk per task, coalesced, and as one chunk."""
    _store(tmp_path / "m.zarr", X0, (20, 4))
    ref = scalepca.PCA(6).fit(da.from_array(X0, chunks=X0.shape))
    for task_size in (None, 20 * 16 * 8 * 9, "128MiB"):
        X = scalepca.open_matrix(tmp_path / "m.zarr", task_size=task_size)
        pca = scalepca.PCA(6).fit(X)
        np.testing.assert_allclose(pca.components_, ref.components_, rtol=0, atol=1e-12)
        np.testing.assert_allclose(
            pca.explained_variance_, ref.explained_variance_, rtol=1e-12
        )
        np.testing.assert_allclose(pca.mean_, ref.mean_, rtol=0, atol=1e-12)


def test_zarr_array_given_to_fit_is_coalesced(tmp_path, X0):
    z = _store(tmp_path / "z.zarr", X0, (20, 16))
    ref = scalepca.PCA(3).fit(X0)
    np.testing.assert_allclose(
        scalepca.PCA(3).fit(z).components_, ref.components_, rtol=0, atol=1e-12
    )
    from scalepca.preprocessing import as_matrix

    assert len(as_matrix(z).data.chunks[0]) == 1


@pytest.mark.parametrize(
    "bad, match",
    [
        ("lots", "not a size"),
        (0, "at least 1"),
        (1.5, "must be bytes"),
        (True, "must be bytes"),
    ],
)
def test_bad_task_size_is_refused_before_opening(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        scalepca.open_matrix("/tmp/definitely/nope.zarr", task_size=bad)


def test_task_size_config_key():
    cfg = {"data": {"path": "x.zarr"}, "model": {"method": "pca"}}
    assert validate_config(cfg)["data"]["task_size"] == "128MiB"
    cfg["data"]["task_size"] = None
    assert validate_config(cfg)["data"]["task_size"] is None
    cfg["data"]["task_size"] = "a lot"
    with pytest.raises(ConfigError, match="'data.task_size' 'a lot' is not a size"):
        validate_config(cfg)


def _uncompressed(path, X, chunks=(20, 7), **kw):
    return _store(path, X, chunks, compressors=None, **kw)


def _reads_chunk_files(arr) -> bool:
    """Whether the dask array's graph reads chunk files itself (not through zarr)."""
    return any(isinstance(v, _ChunkFiles) for v in dict(arr.__dask_graph__()).values())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fill", [np.nan, 2.5])
def test_uncompressed_store_is_read_from_its_chunk_files_as_zarr_reads_it(
    tmp_path, rng, dtype, fill
):
    """Edge chunk (105 rows in chunks of 20), a chunk never written and one equal to
    the fill value (zarr writes neither file): blocks of whole chunks, of rows that
    split chunks, and slices of them equal zarr's own read exactly."""
    X = rng.standard_normal((105, 7)).astype(dtype)
    X[40:60] = fill
    z = zarr.create_array(
        store=str(tmp_path / "u.zarr"),
        shape=X.shape,
        chunks=(20, 7),
        dtype=dtype,
        compressors=None,
        fill_value=fill,
    )
    z[:80] = X[:80]  # rows 80:105 (chunks 4 and 5, the edge) never written
    z[100:] = X[100:]  # the edge chunk written, rows 80:100 still missing
    files = sorted(p.name for p in (tmp_path / "u.zarr" / "c").iterdir())
    assert files == ["0", "1", "3", "5"]  # chunk 2 is all fill, chunk 4 unwritten
    ref = z[:]
    for rows in (None, 30, 7, 105):
        A = open_zarr(z, rows=rows)
        assert _reads_chunk_files(A) and A.dtype == z.dtype
        np.testing.assert_array_equal(A.compute(), ref)
        np.testing.assert_array_equal(A[13:99:4, 2:6].compute(), ref[13:99:4, 2:6])
        np.testing.assert_array_equal(A[-1].compute(), ref[-1])
    np.testing.assert_array_equal(
        scalepca.open_matrix(tmp_path / "u.zarr").compute(), ref
    )
    assert _reads_chunk_files(scalepca.open_matrix(tmp_path / "u.zarr"))


@pytest.mark.parametrize("chunks_per_task", [1, 3])
def test_pca_of_an_uncompressed_store_equals_the_in_memory_fit(
    tmp_path, X0, chunks_per_task
):
    """Blocks mapped (one chunk file each) or read (three)."""
    _uncompressed(tmp_path / "p.zarr", X0, chunks=(400, 16))
    X = scalepca.open_matrix(
        tmp_path / "p.zarr", task_size=400 * 16 * 8 * chunks_per_task
    )
    assert _reads_chunk_files(X) and X.chunks[0][0] == 400 * chunks_per_task
    ref = scalepca.PCA(6).fit(da.from_array(X0, chunks=X0.shape))
    pca = scalepca.PCA(6).fit(X)
    np.testing.assert_allclose(pca.components_, ref.components_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pca.mean_, ref.mean_, rtol=0, atol=1e-12)


def _mapping(a: np.ndarray):
    """The ``mmap`` under an array's memory, or None."""
    import mmap

    while isinstance(a, np.ndarray):
        a = a.base
    obj = a.obj if isinstance(a, memoryview) else a
    return obj if isinstance(obj, mmap.mmap) else None


def test_block_within_one_chunk_file_is_mapped_copy_on_write(tmp_path, rng):
    """Rows inside one chunk file (at any offset, not only a page's) are its mapping,
    released with the block's last view; writing to a block changes neither the file
    nor the next read of it, and writing the store leaves a mapped block as it was.
    Rows across chunk files are read into memory."""
    from scalepca.io import _coalesce

    X = rng.standard_normal((105, 300))  # 2,400-byte rows: offsets off the pages
    files = _ChunkFiles.of(_uncompressed(tmp_path / "m.zarr", X, chunks=(20, 300)))
    live = len(_coalesce._MAPPED)
    for start, stop in [(0, 20), (23, 39), (100, 105), (41, 42)]:
        block = files[start:stop]
        assert _mapping(block) is not None and block.flags.c_contiguous
        np.testing.assert_array_equal(block, X[start:stop])
        view = block[1:, 5:9]
        del block
        assert len(_coalesce._MAPPED) == live + 1  # the view keeps the mapping
        view[...] = -1.0
        np.testing.assert_array_equal(files[start:stop], X[start:stop])
        del view
        assert len(_coalesce._MAPPED) == live
    np.testing.assert_array_equal(files.z[:], X)  # the file is as written
    across = files[15:25]
    assert _mapping(across) is None
    np.testing.assert_array_equal(across, X[15:25])
    # zarr writes a chunk file anew: a block mapped before keeps its values
    block = files[:20]
    files.z[:20] = -X[:20]
    np.testing.assert_array_equal(block, X[:20])
    np.testing.assert_array_equal(files[:20], -X[:20])


def test_blocks_mapped_at_once_are_capped(tmp_path, rng, monkeypatch):
    """Past ``MAPPED_BLOCKS`` live mappings (each holds a file descriptor), blocks are
    read into memory, with the same values; a released mapping makes room again."""
    from scalepca.io import _coalesce

    monkeypatch.setattr(_coalesce, "MAPPED_BLOCKS", len(_coalesce._MAPPED) + 2)
    X = rng.standard_normal((105, 7))
    files = _ChunkFiles.of(_uncompressed(tmp_path / "c.zarr", X))
    held = [files[i * 20 : (i + 1) * 20] for i in range(4)]
    assert [_mapping(b) is not None for b in held] == [True, True, False, False]
    for i, b in enumerate(held):
        np.testing.assert_array_equal(b, X[i * 20 : (i + 1) * 20])
    del held[0]
    assert _mapping(files[80:100]) is not None


def _zarr_v2(path, X):
    return zarr.create_array(
        store=str(path),
        shape=X.shape,
        chunks=(20, 7),
        dtype=X.dtype,
        compressors=None,
        zarr_format=2,
    )


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda p, X: _store(p, X, (20, 7)), id="zstd"),
        pytest.param(
            lambda p, X: _uncompressed(
                p, X, serializer=zarr.codecs.BytesCodec(endian="big")
            ),
            id="big-endian",
        ),
        pytest.param(
            lambda p, X: _uncompressed(
                p, X, filters=[zarr.codecs.TransposeCodec(order=(1, 0))]
            ),
            id="transposed",
        ),
        pytest.param(lambda p, X: _uncompressed(p, X, shards=(40, 7)), id="sharded"),
        pytest.param(lambda p, X: _uncompressed(p, X, chunks=(20, 3)), id="col-chunks"),
        pytest.param(lambda p, X: _uncompressed(p, X.astype(">f8")), id=">f8"),
        pytest.param(_zarr_v2, id="zarr-v2"),
        pytest.param(
            lambda p, X: zarr.create_array(
                store=zarr.storage.MemoryStore(),
                shape=X.shape,
                chunks=(20, 7),
                dtype=X.dtype,
                compressors=None,
            ),
            id="memory",
        ),
    ],
)
def test_other_stores_are_read_by_zarr(tmp_path, rng, make):
    X = rng.standard_normal((105, 7))
    z = make(tmp_path / "o.zarr", X)
    z[:] = X
    assert _ChunkFiles.of(z) is None
    for rows in (None, 30):
        A = open_zarr(z, rows=rows)
        assert not _reads_chunk_files(A)
        np.testing.assert_array_equal(A.compute(), z[:])


def test_chunk_file_of_the_wrong_size_is_left_to_zarr(tmp_path, rng):
    """A damaged chunk file gives zarr's own error, not other values."""
    z = _uncompressed(tmp_path / "d.zarr", rng.standard_normal((105, 7)))
    with open(tmp_path / "d.zarr" / "c" / "1" / "0", "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(ValueError) as from_zarr:
        z[:]
    with pytest.raises(ValueError) as direct:
        open_zarr(z).compute()
    assert str(direct.value) == str(from_zarr.value)


def test_block_memory_is_reused_only_once_nothing_references_it(
    tmp_path, rng, monkeypatch
):
    """A thread reads a block into its last block's memory only when no array, view or
    buffer export of that memory is alive: blocks held (persisted, or a view of one)
    keep their values while other blocks are read."""
    from scalepca.io import _coalesce

    monkeypatch.setattr(_coalesce, "_BLOCK_MEMORY", _coalesce._BlockMemory())
    X, Y = rng.standard_normal((105, 7)), rng.standard_normal((105, 7))
    fx = _ChunkFiles.of(_uncompressed(tmp_path / "x.zarr", X))
    fy = _ChunkFiles.of(_uncompressed(tmp_path / "y.zarr", Y))
    a = fx[:40]
    view = a[10:20, 1:3]
    del a
    b = fy[:40]  # the view keeps the first block's memory
    assert not np.shares_memory(b, view)
    np.testing.assert_array_equal(view, X[10:20, 1:3])
    address = b.__array_interface__["data"][0]
    del b
    c = fy[40:80]  # the second block's memory, free now, is reused
    assert c.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(c, Y[40:80])
    export = memoryview(c[20:])
    del c
    d = fx[:40]  # the export keeps the third block's memory
    assert not np.shares_memory(d, np.asarray(export))
    np.testing.assert_array_equal(np.asarray(export), Y[60:80])
    np.testing.assert_array_equal(d, X[:40])
    e = fx[:20]  # another size: new memory
    assert not np.shares_memory(d, e)
    np.testing.assert_array_equal(e, X[:20])
    del d, e, export
    # blocks kept by dask (persisted) are not overwritten by the reads of others
    zx, zy = fx.z, fy.z
    for rows in (20, 40):  # mapped, read
        P = open_zarr(zx, rows=rows).persist(scheduler="threads")
        for _ in range(3):
            np.testing.assert_array_equal(open_zarr(zy, rows=rows).compute(), Y)
        np.testing.assert_array_equal(P.compute(), X)
