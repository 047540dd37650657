"""Allele frequencies and the genotype standardisation's statistics from one moments
pass (the algebra behind :mod:`scalepca.preprocessing._genotype`, used by the fits
and by the wide solvers' per-strip maps)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse


@dataclass(frozen=True)
class AlleleScaling:
    """Per-SNP statistics of the first pass (all SNPs; ``keep`` selects the fitted
    ones)."""

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

    ``mom`` holds what :func:`~scalepca.linalg.moments.column_moments_graph` returns:
    ``n``, the ``mean`` and ``ss`` (sum of squared deviations) of the data with
    non-finite entries set to 0, and ``nan_features`` (NaN per feature) when there
    were any. With ``c`` calls, ``Σ x² = ss + n m²`` and ``Σ (x − μ)² = Σ x² − c μ²``
    over the calls.
    """
    n = int(mom["n"])
    nanf = np.asarray(mom.get("nan_features", 0), dtype=np.int64)
    calls = n - np.broadcast_to(nanf, mom["mean"].shape)
    total = mom["mean"] * n  # Σ over the calls (missing entries were 0)
    called = calls > 0
    mu = np.full(calls.shape, np.nan)
    mu[called] = total[called] / calls[called]
    p = mu / 2.0
    # a frequency within rounding of 0 or 1 is monomorphic (exact counts give exact 0 or
    # 1)
    eps = 8 * np.finfo(np.float64).eps
    poly = called & (p > eps) & (p < 1.0 - eps)
    sq = mom["ss"] + n * mom["mean"] ** 2  # Σ x² over the calls
    dev = np.maximum(sq - calls * np.where(called, mu, 0.0) ** 2, 0.0)
    var = 2.0 * p[poly] * (1.0 - p[poly])
    return AlleleScaling(
        frequency=p,
        keep=poly,
        ss=dev[poly] / var,
        n_uncalled=int((~called).sum()),
        n_monomorphic=int((called & ~poly).sum()),
    )


def strip_scaling(n: int, stats: dict):
    """The genotype standardisation as a rule of a column strip's own moments (the
    ``standardize`` of :func:`~scalepca.linalg.snapshot.snapshot_gram`): per SNP the
    centre ``2p`` and scale ``√(2p(1−p))`` and which SNPs are kept (polymorphic,
    called), ``(centre, scale, keep)``, with centre 0 and scale 1 where left out.
    :func:`allele_scaling` of a strip's moments gives the same numbers as of all
    features, column by column."""
    al = allele_scaling({"n": n, **stats})
    centre = np.where(al.keep, 2.0 * np.nan_to_num(al.frequency), 0.0)
    scale = np.ones(al.keep.size)
    scale[al.keep] = al.scale
    return centre, scale, al.keep


def refuse_partial_calls(X, message: str):
    """``X`` (a dask array of allele counts, dense or CSR blocks) with a check fused
    into the read of each block: a block in which a SNP has both calls and missing
    calls raises ``ValueError(message)`` there, so that a pass over it stops at the
    first such block instead of reading the whole input. A SNP missing in every row
    of a block passes (it may be a SNP without any call, which a fit leaves out: only
    the whole pass's count tells)."""
    return X.map_blocks(
        _check_partial_calls, message=message, dtype=X.dtype, meta=X._meta
    )


def _check_partial_calls(block, message: str):
    rows = block.shape[0]
    if scipy.sparse.issparse(block):  # missing calls are stored NaN
        csr = block.tocsr()
        nan = np.isnan(csr.data)
        if not nan.any():
            return block
        per_snp = np.bincount(csr.indices[nan], minlength=block.shape[1])
    else:
        nan = np.isnan(block)
        if not nan.any():
            return block
        per_snp = nan.sum(axis=0)
    if np.any((per_snp > 0) & (per_snp < rows)):
        raise ValueError(message)
    return block
