"""Mergeable moments of allele counts, from which the genotype standardisation's
covariance follows at any allele frequencies (one pass, and ``partial_fit`` of new
samples).

The standardised genotype of sample ``i`` at SNP ``j`` is ``z_ij = o_ij (x_ij − μ_j) /
σ_j`` (``o_ij`` 1 for a call, 0 for a missing one; ``μ_j = 2 p_j`` the mean of the calls
and ``σ_j = √(2 p_j (1 − p_j))``; see :mod:`scalepca.preprocessing._genotype`). With
``x̃`` the counts with missing calls at 0 and ``m = 1 − o`` the missing-call indicator,
the Gram of the centred calls is

    Σ_i o_ij o_il (x̃_ij − μ_j)(x̃_il − μ_l)
        = G_jl − A_jl μ_l − μ_j A_lj + μ_j μ_l C_jl,

    G = x̃ᵀx̃,   A_jl = Σ_i x̃_ij o_il = s_j − (x̃ᵀm)_jl,
    C_jl = Σ_i o_ij o_il = n − c_j − c_l + (mᵀm)_jl,

with ``s`` the column sums of ``x̃`` and ``c`` the missing calls per SNP. Every term is
a sum over samples: the moments of two sets of samples merge by adding them, whatever
the allele frequencies of either, and the frequencies of all the samples seen are taken
from the merged sums. Allele counts are small integers, so every sum is exact in float64
(below 2⁵³): a model updated batch by batch has exactly the moments of a fit on all the
samples.

Cost per row block: one syrk (``x̃ᵀx̃``), plus a product and a syrk of the missing-call
indicator (``x̃ᵀm``, ``mᵀm``) when the block has any missing call. The products run on
slices of :data:`~scalepca.linalg.moments.GRAM_BLOCK_ROWS` rows summed in float64; on
integer counts the slices are multiplied in float32, which is exact (every partial sum
is an integer below 2²⁴) and twice as fast as float64 — measured, sparse products of the
indicator were 3–15× slower than these at 5–20 % missing calls. Other values (dosages)
are multiplied in float64. Memory: d × d float64 for ``G``, and two more d × d when
calls are missing.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import scipy.sparse

from .alleles import AlleleScaling, allele_scaling
from .moments import GRAM_BLOCK_ROWS
from .passes import reduce_rows

__all__ = [
    "allele_block_moments",
    "allele_covariance",
    "allele_moments_graph",
    "merge_allele_moments",
]

#: the keys of the moments: row count, column sums (missing calls 0), Gram, infinite
#: entries, missing calls per SNP; ``xm`` and ``mm`` when any call is missing
ALLELE_MOMENT_KEYS = ("n", "sums", "gram", "bad", "nan_features", "xm", "mm")


def allele_block_moments(x) -> dict:
    """The moments of one row block of allele counts (NaN a missing call; a CSR block is
    made dense, one block at a time: its stored NaN are the missing calls)."""
    if scipy.sparse.issparse(x):
        x = x.toarray()
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    n, d = x.shape
    missing = np.isnan(x)
    finite = np.isfinite(x)
    bad = int(x.size - np.count_nonzero(finite) - np.count_nonzero(missing))
    any_missing = bool(missing.any())
    if any_missing or bad:
        x = np.where(finite, x, 0)
    out = {
        "n": n,
        "sums": x.sum(axis=0, dtype=np.float64),
        "bad": bad,
        "nan_features": missing.sum(axis=0).astype(np.int64),
    }
    out.update(_products(x, missing if any_missing else None))
    return out


def _products(x: np.ndarray, missing: np.ndarray | None) -> dict:
    """``gram = x̃ᵀx̃`` and, with a ``missing`` mask, ``xm = x̃ᵀm`` and ``mm = mᵀm``,
    summed over row slices in float64 (slices in float32 for integer counts: exact)."""
    n, d = x.shape
    exact32 = (
        bool(np.array_equal(x, np.rint(x))) and float(np.abs(x).max(initial=0)) <= 4
    )
    dtype = np.float32 if exact32 else np.float64
    out = {"gram": np.zeros((d, d))}
    if missing is not None:
        out["xm"], out["mm"] = np.zeros((d, d)), np.zeros((d, d))
    for start in range(0, n, GRAM_BLOCK_ROWS):
        xs = np.ascontiguousarray(x[start : start + GRAM_BLOCK_ROWS], dtype=dtype)
        out["gram"] += xs.T @ xs
        if missing is not None:
            ms = missing[start : start + GRAM_BLOCK_ROWS].astype(dtype)
            out["xm"] += xs.T @ ms
            out["mm"] += ms.T @ ms
    return out


def merge_allele_moments(a: dict, b: dict) -> dict:
    """The moments of the rows of ``a`` and ``b`` together: sums, exact on counts."""
    out = {key: a[key] + b[key] for key in ("n", "sums", "gram", "bad", "nan_features")}
    for key in ("xm", "mm"):
        if key in a and key in b:
            out[key] = a[key] + b[key]
        elif key in a or key in b:
            out[key] = (a if key in a else b)[key].copy()
    return out


def _merge_all(parts: list) -> dict:
    acc = parts[0]
    for p in parts[1:]:
        acc = merge_allele_moments(acc, p)
    return acc


def allele_moments_graph(X: da.Array, *, split_every: int = 8):
    """A dask ``Delayed`` for the moments of the allele counts ``X`` (rows chunked, one
    column chunk, dense blocks): one pass, merged in a tree of fan-in
    ``split_every``."""
    if len(X.chunks[1]) != 1:
        raise ValueError(
            "allele moments need the SNPs in one column chunk; rechunk({1: -1}) first"
        )
    return reduce_rows(
        X,
        allele_block_moments,
        merge_all=_merge_all,
        split_every=split_every,
        name="allele-moments",
    )


def allele_covariance(mom: dict) -> tuple[AlleleScaling, np.ndarray]:
    """``(stats, cov)``: the allele frequencies of the merged moments ``mom``
    (:func:`~scalepca.linalg.alleles.allele_scaling`: monomorphic and uncalled SNPs left
    out) and the covariance (denominator n − 1) of the standardised genotypes of the
    kept SNPs, missing calls at the mean."""
    n = int(mom["n"])
    nanf = np.asarray(mom["nan_features"], dtype=np.int64)
    sums, gram = mom["sums"], mom["gram"]
    col = {
        "n": n,
        "mean": sums / max(n, 1),
        "ss": np.diag(gram) - sums**2 / max(n, 1),
        "nan_features": nanf,
    }
    stats = allele_scaling(col)
    keep = stats.keep
    mu, sigma = stats.mean, stats.scale
    g, s = gram[np.ix_(keep, keep)], sums[keep]
    if "xm" in mom:
        a = s[:, None] - mom["xm"][np.ix_(keep, keep)]
        c = (
            n
            - nanf[keep][:, None]
            - nanf[keep][None, :]
            + mom["mm"][np.ix_(keep, keep)]
        )
        centred = g - a * mu[None, :] - mu[:, None] * a.T + np.outer(mu, mu) * c
    else:
        centred = g - np.outer(s, mu) - np.outer(mu, s) + n * np.outer(mu, mu)
    cov = centred / np.outer(sigma, sigma) / max(n - 1, 1)
    return stats, (cov + cov.T) / 2
