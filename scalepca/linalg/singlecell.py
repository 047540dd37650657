"""Block kernels of the single-cell preparation: library-size normalisation, log1p, gene
selection and per-gene scaling of one CSR row block of counts, never densified.

Each function takes one row block (``scipy.sparse`` CSR, or a dense ``ndarray``, which
is made CSR first) and returns a CSR block or a small per-block statistic; the passes
that map them over a whole matrix are in :mod:`scalepca.preprocessing._singlecell`. All
arithmetic is float64.

Scaling keeps the block sparse. A gene scaled to unit variance and centred is
``z = (y − μ) / σ``, optionally clipped to ``[−max_value, max_value]``. Every zero of
``y`` in a gene's column becomes the same number, ``a = clip(−μ / σ)``, so the scaled
matrix is ``Z = 1 aᵀ + S`` with ``S`` holding ``clip((y − μ)/σ) − a`` at the stored
entries of ``y`` only: the clip does not densify anything. :func:`scale_block`
returns ``S``; the constant ``1 aᵀ`` changes the mean of the matrix but not its
covariance, so centred PCA of ``S`` is centred PCA of ``Z`` (scores and axes alike),
and new cells project the same way.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = [
    "as_csr64",
    "cell_totals",
    "clipped_sums",
    "count_highly_expressed",
    "count_problems",
    "normalize_log_block",
    "scale_block",
    "scale_offset",
]


def as_csr64(x) -> sp.csr_matrix:
    """``x`` as a float64 CSR matrix (no copy when it already is one)."""
    x = sp.csr_matrix(x)
    return x if x.dtype == np.float64 else x.astype(np.float64)


def _rows_of_entries(x: sp.csr_matrix) -> np.ndarray:
    return np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))


def count_problems(x) -> np.ndarray:
    """What raw counts cannot be, among the stored values of one block: the numbers of
    NaN, infinite, negative and of finite values that are not whole numbers (int64,
    length 4)."""
    data = x.data if sp.issparse(x) else np.asarray(x).ravel()
    if data.size == 0 or data.dtype.kind in "bu":
        return np.zeros(4, dtype=np.int64)
    if data.dtype.kind == "i":
        return np.array([0, 0, np.count_nonzero(data < 0), 0], dtype=np.int64)
    finite = np.isfinite(data)
    if finite.all():
        nan = inf = 0
    else:
        nan = np.count_nonzero(np.isnan(data))
        inf = data.size - np.count_nonzero(finite) - nan
        data = data[finite]
    return np.array(
        [nan, inf, np.count_nonzero(data < 0), np.count_nonzero(data != np.rint(data))],
        dtype=np.int64,
    )


def cell_totals(x, keep: np.ndarray | None = None) -> np.ndarray:
    """Counts per cell (row sums in float64), over the genes ``keep`` (bool, or all)."""
    x = as_csr64(x)
    w = x.data if keep is None else np.where(keep[x.indices], x.data, 0.0)
    return np.bincount(_rows_of_entries(x), weights=w, minlength=x.shape[0])


def count_highly_expressed(x, max_fraction: float) -> np.ndarray:
    """Per gene, the number of cells of the block in which it holds more than
    ``max_fraction`` of the cell's counts (int64, length d)."""
    x = as_csr64(x)
    totals = cell_totals(x)
    high = x.data > max_fraction * totals[_rows_of_entries(x)]
    return np.bincount(x.indices[high], minlength=x.shape[1]).astype(np.int64)


def clipped_sums(x, clip: np.ndarray) -> np.ndarray:
    """Per gene, the sum and the sum of squares of the counts clipped above at ``clip``
    (a (2, d) float64 array; zeros stay zeros)."""
    x = as_csr64(x)
    v = np.minimum(x.data, clip[x.indices])
    d = x.shape[1]
    return np.stack(
        [
            np.bincount(x.indices, weights=v, minlength=d),
            np.bincount(x.indices, weights=v * v, minlength=d),
        ]
    )


def normalize_log_block(
    x, *, target_sum: float | None, keep: np.ndarray | None = None, log: bool = True
) -> sp.csr_matrix:
    """Counts of each cell scaled to ``target_sum`` (its total over the genes
    ``keep``), then ``log1p``; ``target_sum=None`` skips the normalisation. A cell
    with no counts is left as it is (divided by 1), as scanpy leaves it."""
    x = as_csr64(x).copy()
    if target_sum is not None:
        factor = cell_totals(x, keep) / target_sum
        factor[factor == 0] = 1.0
        x.data /= factor[_rows_of_entries(x)]
    if log:
        np.log1p(x.data, out=x.data)
    return x


def scale_offset(
    mean: np.ndarray, std: np.ndarray, *, max_value: float | None, zero_center: bool
) -> np.ndarray:
    """``a``: the scaled value of a zero in each gene (see the module docstring)."""
    if not zero_center:
        return np.zeros_like(mean)
    a = -mean / std
    return a if max_value is None else np.clip(a, -max_value, max_value)


def scale_block(
    y,
    *,
    cols: np.ndarray | None,
    mean: np.ndarray,
    std: np.ndarray,
    max_value: float | None,
    zero_center: bool,
) -> sp.csr_matrix:
    """``S`` of the block ``y`` restricted to the genes ``cols`` (bool mask or None:
    all); ``mean`` and ``std`` are those of the kept genes, ``std`` already 1 for
    constant genes.

    Without ``zero_center`` the genes are divided by ``std`` and clipped above only (as
    scanpy's ``scale(zero_center=False)``); the offset is then 0.
    """
    y = as_csr64(y)
    if cols is not None:
        y = y[:, np.flatnonzero(cols)]
    m, s = mean[y.indices], std[y.indices]
    if zero_center and max_value is not None:
        a = scale_offset(mean, std, max_value=max_value, zero_center=True)
        data = np.clip((y.data - m) / s, -max_value, max_value) - a[y.indices]
    else:  # no clip: (y − μ)/σ − (−μ/σ) = y / σ
        data = y.data / s
        if max_value is not None:
            np.minimum(data, max_value, out=data)
    # a new matrix: the input block's own arrays are never written
    return sp.csr_matrix((data, y.indices, y.indptr), shape=y.shape)
