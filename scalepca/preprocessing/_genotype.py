"""The standard genetics preprocessing of a (sample × SNP) matrix of allele counts.

Each SNP ``j`` is centred by twice its allele frequency and scaled by the binomial standard
deviation (Patterson, Price & Reich 2006):

    z_ij = (x_ij − 2 p_j) / √(2 p_j (1 − p_j)),     p_j = (Σ_observed x_ij) / (2 c_j),

over the ``c_j`` observed calls of the SNP; a missing call (NaN) is set to the mean, i.e. 0
after centring. SNPs with ``p ∈ {0, 1}`` (monomorphic: nothing varies) and SNPs with no call
are left out, like all-NaN features of a gridded field. ``PCA(standardize="genotype")`` keeps
``mean_ = 2p`` and ``scale_ = √(2p(1−p))`` as fitted attributes and repeats the step in
``transform`` (missing calls of new samples are set to ``mean_``).

The allele frequencies come from the per-feature moments the fit's first pass computes
anyway (count, mean and sum of squares of the zero-filled data, with the NaN count per
feature), so the preprocessing adds no pass of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import numpy as np

from .._validation import is_sparse

#: the ``standardize`` value that asks for it
GENOTYPE = "genotype"


@dataclass(frozen=True)
class AlleleScaling:
    """Per-SNP statistics of the first pass (all SNPs; ``keep`` selects the fitted ones)."""

    frequency: np.ndarray  # p (NaN where a SNP has no call)
    keep: np.ndarray  # bool: called at least once and polymorphic
    ss: np.ndarray  # sum over samples of z² (standardised, missing 0), of kept SNPs
    n_uncalled: int  # SNPs with no call
    n_monomorphic: int  # called SNPs with p ∈ {0, 1}

    @property
    def mean(self) -> np.ndarray:
        """``2 p`` of the kept SNPs (the centre)."""
        return 2.0 * self.frequency[self.keep]

    @property
    def scale(self) -> np.ndarray:
        """``√(2 p (1 − p))`` of the kept SNPs."""
        p = self.frequency[self.keep]
        return np.sqrt(2.0 * p * (1.0 - p))


def allele_scaling(mom: dict) -> AlleleScaling:
    """Allele frequencies and the standardised sums of squares from one moments pass.

    ``mom`` holds what :func:`~scalepca.linalg.moments.column_moments_graph` returns: ``n``,
    the ``mean`` and ``ss`` (sum of squared deviations) of the data with non-finite entries
    set to 0, and ``nan_features`` (NaN per feature) when there were any. With
    ``c`` calls, ``Σ x² = ss + n m²`` and ``Σ (x − μ)² = Σ x² − c μ²`` over the calls.
    """
    n = int(mom["n"])
    nanf = np.asarray(mom.get("nan_features", 0), dtype=np.int64)
    calls = n - np.broadcast_to(nanf, mom["mean"].shape)
    total = mom["mean"] * n  # Σ over the calls (missing entries were 0)
    called = calls > 0
    mu = np.full(calls.shape, np.nan)
    mu[called] = total[called] / calls[called]
    p = mu / 2.0
    # a frequency within rounding of 0 or 1 is monomorphic (exact counts give exact 0 or 1)
    eps = 8 * np.finfo(np.float64).eps
    poly = called & (p > eps) & (p < 1.0 - eps)
    sq = mom["ss"] + n * mom["mean"] ** 2  # Σ x² over the calls
    dev = np.maximum(sq - calls * np.where(called, mu, 0.0) ** 2, 0.0)
    var = 2.0 * p[poly] * (1.0 - p[poly])
    return AlleleScaling(frequency=p, keep=poly, ss=dev[poly] / var,
                         n_uncalled=int((~called).sum()),
                         n_monomorphic=int((called & ~poly).sum()))


def _standardize_block(x, mean, scale):
    dtype = np.result_type(x.dtype, np.float32)
    z = (np.asarray(x, dtype=dtype) - mean.astype(dtype)) / scale.astype(dtype)
    z[np.isnan(z)] = 0
    return z


def standardized(X: da.Array, mean: np.ndarray, scale: np.ndarray) -> da.Array:
    """Lazy ``(X − mean) / scale`` with missing calls (NaN) set to 0, block by block.

    Works on row blocks and on 2-D blocks (each block gets its columns' mean and scale); the
    map is fused into the read of every pass that uses it.
    """
    cols = X.chunks[1]
    m = da.from_array(np.asarray(mean, dtype=np.float64)[None, :], chunks=((1,), cols))
    s = da.from_array(np.asarray(scale, dtype=np.float64)[None, :], chunks=((1,), cols))
    dtype = np.result_type(X.dtype, np.float32)
    return da.map_blocks(_standardize_block, X, m, s, dtype=dtype,
                         meta=np.empty((0, 0), dtype=dtype))


def _fill_block(x, mean):
    import scipy.sparse

    if scipy.sparse.issparse(x):  # stored NaN at the mean; the block stays sparse
        x = scipy.sparse.csr_matrix(x, dtype=np.result_type(x.dtype, np.float32), copy=True)
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
    """Lazy ``X`` with its NaN entries set to the column's ``mean`` (the model's ``2p``);
    ``scipy.sparse`` blocks stay sparse (their stored NaN are the missing calls)."""
    m = da.from_array(np.asarray(mean, dtype=np.float64)[None, :], chunks=((1,), X.chunks[1]))
    dtype = np.result_type(X.dtype, np.float32)
    meta = X._meta if is_sparse(X) else np.empty((0, 0), dtype=dtype)
    return da.map_blocks(_fill_block, X, m, dtype=dtype, meta=meta)
