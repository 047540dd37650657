"""The lazy linear map of the estimators' transforms: ``(X − mean) P + offset`` over
row blocks, dense or sparse, without moving data."""

from __future__ import annotations

import dask.array as da
import numpy as np

from .._validation import is_sparse


def _affine_block(x, mean, P, offset):
    """``(x − mean) P + offset`` for one row block, in float64 for float64 data.

    A ``scipy.sparse`` block is not centred: ``x P − meanᵀ P`` (a sparse–dense
    product; the result is dense, n_b × k).
    """
    dtype = np.result_type(x.dtype, np.float32)
    P = P.astype(dtype, copy=False)
    if is_sparse(x):
        out = (
            np.asarray(x.astype(dtype, copy=False) @ P)
            - mean.astype(dtype, copy=False) @ P
        )
    else:
        out = (np.asarray(x) - mean.astype(dtype, copy=False)) @ P
    if offset is not None:
        out += offset.astype(dtype, copy=False)
    return out


def affine_map(X: da.Array, mean: np.ndarray, P: np.ndarray, offset=None) -> da.Array:
    """Lazy ``(X − mean) P + offset`` as a blockwise map over row chunks (no data
    moves).

    ``X`` in 2-D blocks (wide data, features split over column chunks) is not
    rechunked to full rows: each block is multiplied by its slice of ``P`` and the
    k-column products of a row are summed over the column chunks in a tree, so a task
    holds one block, never a row. ``X`` of ``scipy.sparse`` row blocks is never
    densified: each block gives ``x P − meanᵀP`` (its column chunks, if any, are
    joined first: a sparse row block is bounded by its stored values, not by its
    width).
    """
    k = P.shape[1]
    dtype = np.result_type(X.dtype, np.float32)
    if is_sparse(X) and len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    if len(X.chunks[1]) > 1:
        P = np.asarray(P, dtype=dtype)
        shift = -(np.asarray(mean, dtype=dtype) @ P)
        if offset is not None:
            shift = shift + np.asarray(offset, dtype=dtype)
        Z = X.astype(dtype) @ da.from_array(P, chunks=(X.chunks[1], k))
        return Z + shift
    return X.map_blocks(
        _affine_block,
        mean,
        P,
        offset,
        chunks=(X.chunks[0], (k,)),
        dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype),
    )
