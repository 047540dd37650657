"""NumPy, SciPy/pydata sparse, dask and zarr arrays: row-chunked matrices with their
features in one chunk."""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np
import zarr

from ...io._coalesce import TASK_SIZE, open_zarr
from .._steps import describe
from ._reader import Opened, Reader

__all__ = ["ArrayReader", "array_rows", "dense_opened"]


@dataclasses.dataclass(frozen=True)
class ArrayOptions:
    """The options of an array (see :func:`~scalepca.open_matrix`)."""

    chunks: object = None
    weights: object = None
    task_size: object = TASK_SIZE


class ArrayReader(Reader):
    """A NumPy, sparse, dask or ``zarr.Array`` array (or anything NumPy makes an
    array of); the reader of objects no other reader claims."""

    kind = "array"
    title = "array"
    paths, objects = False, True
    Options = ArrayOptions
    # an array has no variables or dims to choose: these are left unused
    ignored = ("variable", "sample_dims", "feature_dims")

    def claims(self, source, storage_options=None) -> bool:
        return True

    def open(self, source, options: ArrayOptions) -> Opened:
        from ..._validation import as_csr_blocks, is_sparse

        if is_sparse(source):  # scipy.sparse / pydata sparse, in memory or dask blocks
            if options.weights is not None:
                raise ValueError(
                    "weights are not applied to sparse input; scale its columns "
                    "first (X @ scipy.sparse.diags(w))"
                )
            arr = as_csr_blocks(source)
            if arr.ndim != 2:
                raise ValueError(f"expected a 2-D array; got shape {arr.shape}")
            rows = array_rows(options.chunks)
            if rows is not None:
                arr = arr.rechunk({0: rows})
            if len(arr.chunks[1]) > 1:
                arr = arr.rechunk({1: -1})
            return Opened(arr)
        if isinstance(source, zarr.Array):
            return zarr_array_opened(source, options)
        return dense_opened(
            source if isinstance(source, da.Array) else np.asarray(source), options
        )


def zarr_array_opened(node: zarr.Array, options) -> Opened:
    """The matrix of a 2-D zarr array, each task reading whole store chunks."""
    if node.ndim != 2:
        raise ValueError(
            f"the zarr array has {node.ndim} dimensions (shape "
            f"{node.shape}); a 2-D (sample × feature) array is needed "
            "— for N-D data open it with xarray and pass sample_dims"
        )
    arr = open_zarr(node, rows=array_rows(options.chunks), task_size=options.task_size)
    return dense_opened(arr, options)


def dense_opened(arr, options) -> Opened:
    """A NumPy or dask matrix row-chunked by ``options.chunks``, its features in one
    chunk, weighted by ``options.weights``."""
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D array; got shape {arr.shape}")
    prep = describe(arr, weights=options.weights)
    rows = array_rows(options.chunks)
    if isinstance(arr, np.ndarray):
        if rows is not None:
            arr = da.from_array(arr, chunks=(rows, -1))
    else:
        if rows is not None:
            arr = arr.rechunk({0: rows})
        if len(arr.chunks[1]) > 1:
            arr = arr.rechunk({1: -1})
    return Opened(prep.weight(arr), prep)


def array_rows(chunks):
    """Rows per chunk from ``chunks`` for an array source (no dim names)."""
    if chunks is None or not isinstance(chunks, dict):
        return chunks
    rows = None
    for key, value in chunks.items():
        if key == 0:
            rows = value
        elif key == 1:
            if value not in (-1, None):
                raise ValueError(
                    "chunks: axis 1 is the features, which always end in one "
                    "chunk; chunk the rows (axis 0) instead"
                )
        else:
            raise ValueError(
                f"chunks: {key!r} is not an axis of a 2-D array; an array has no "
                "dim names: give the rows per chunk as {0: rows} or an int"
            )
    return rows
