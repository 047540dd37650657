"""The standard genetics preprocessing of a (sample × SNP) matrix of allele counts.

Each SNP ``j`` is centred by twice its allele frequency and scaled by the binomial
standard deviation (Patterson, Price & Reich 2006):

    z_ij = (x_ij − 2 p_j) / √(2 p_j (1 − p_j)),     p_j = (Σ_observed x_ij) / (2 c_j),

over the ``c_j`` observed calls of the SNP; a missing call (NaN) is set to the mean,
i.e. 0 after centring. SNPs with ``p ∈ {0, 1}`` (monomorphic: nothing varies) and SNPs
with no call are left out, like all-NaN features of a gridded field.
``PCA(standardize="genotype")`` keeps ``mean_ = 2p`` and ``scale_ = √(2p(1−p))`` as
fitted attributes and repeats the step in ``transform`` (missing calls of new samples
are set to ``mean_``).

The allele frequencies come from the per-feature moments the fit's first pass computes
anyway (count, mean and sum of squares of the zero-filled data, with the NaN count per
feature), so the preprocessing adds no pass of its own.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from .._validation import is_sparse

#: the ``standardize`` value that asks for it
GENOTYPE = "genotype"


def _standardize_block(x, mean, scale):
    dtype = np.result_type(x.dtype, np.float32)
    z = (np.asarray(x, dtype=dtype) - mean.astype(dtype)) / scale.astype(dtype)
    z[np.isnan(z)] = 0
    return z


def standardized(X: da.Array, mean: np.ndarray, scale: np.ndarray) -> da.Array:
    """Lazy ``(X − mean) / scale`` with missing calls (NaN) set to 0, block by block.

    Works on row blocks and on 2-D blocks (each block gets its columns' mean and
    scale); the map is fused into the read of every pass that uses it.
    """
    cols = X.chunks[1]
    m = da.from_array(np.asarray(mean, dtype=np.float64)[None, :], chunks=((1,), cols))
    s = da.from_array(np.asarray(scale, dtype=np.float64)[None, :], chunks=((1,), cols))
    dtype = np.result_type(X.dtype, np.float32)
    return da.map_blocks(
        _standardize_block, X, m, s, dtype=dtype, meta=np.empty((0, 0), dtype=dtype)
    )


def _fill_block(x, mean):
    import scipy.sparse

    if scipy.sparse.issparse(x):  # stored NaN at the mean; the block stays sparse
        x = scipy.sparse.csr_matrix(
            x, dtype=np.result_type(x.dtype, np.float32), copy=True
        )
        missing = np.isnan(x.data)
        x.data[missing] = mean.ravel()[x.indices[missing]]
        return x
    missing = np.isnan(x)
    if not missing.any():
        return x
    x = np.array(x, dtype=np.result_type(x.dtype, np.float32))
    x[missing] = np.broadcast_to(mean.astype(x.dtype), x.shape)[missing]
    return x


def fill_missing(X: da.Array, mean: np.ndarray) -> da.Array:
    """Lazy ``X`` with its NaN entries set to the column's ``mean`` (the model's
    ``2p``); ``scipy.sparse`` blocks stay sparse (their stored NaN are the missing
    calls)."""
    m = da.from_array(
        np.asarray(mean, dtype=np.float64)[None, :], chunks=((1,), X.chunks[1])
    )
    dtype = np.result_type(X.dtype, np.float32)
    meta = X._meta if is_sparse(X) else np.empty((0, 0), dtype=dtype)
    return da.map_blocks(_fill_block, X, m, dtype=dtype, meta=meta)
