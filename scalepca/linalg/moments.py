"""One-pass moments of a row-chunked matrix: count, mean, centred Gram, non-finite
count.

Each row block is reduced where it lives to a small partial
``{"n", "mean", "m2", "bad"}`` (``m2`` is the d × d centred Gram matrix
``(x - mean_block)ᵀ (x - mean_block)``); partials are merged pairwise in a tree with the
parallel-variance update of Chan, Golub & LeVeque (1979):

    n = na + nb,  δ = mean_b − mean_a,
    mean = mean_a + δ · nb / n,
    m2 = m2_a + m2_b + δ δᵀ · na nb / n.

Unlike ``XᵀX − n μ μᵀ`` this never subtracts two large nearly equal numbers, so the
covariance keeps full relative precision even when |mean| ≫ standard deviation.

The non-finite count rides along in the same pass: a NaN or inf in the data is
reported without a second read.
"""

from __future__ import annotations

from functools import partial

import dask
import dask.array as da
import numpy as np
from scipy.linalg import blas, lapack

from .._validation import is_sparse
from . import passes
from .passes import row_reduction, single_delayed

__all__ = [
    "block_moments",
    "feature_block_moments",
    "column_moments_graph",
    "feature_scale",
    "float32_relative_error",
    "gram_error_bound",
    "gram_precision",
    "merge_moments",
    "moments",
    "moments_graph",
]


#: rows per syrk call in :func:`_gram` (a 4 MiB float64 buffer at d = 256); also the
#: length of the float32 sums whose rounding bounds the float32 Gram (see :func:`_gram`)
GRAM_BLOCK_ROWS = 2048

#: ``dask.config`` key choosing the precision of the products of float32 blocks:
#: ``"auto"`` (float32 products of centred slices, float64 accumulation) or
#: ``"float64"`` (every slice widened to float64 first). Read on the client when the
#: graph is built.
GRAM_PRECISION_KEY = "scalepca.gram-precision"

GRAM_PRECISIONS = ("auto", "float64")


#: measured: every eigenvalue of a centred Gram of float32 products
#: (``precision="auto"``) stayed within this fraction of ``ε₃₂ λ₁`` of the float64
#: products' (λ₁ the largest; at most 0.13 on low-rank-plus-noise float32 data, d ≤ 200,
#: λ₁/σ² from 3e2 to 3e6), so a small eigenvalue λ keeps a relative accuracy of about
#: ``0.13 ε₃₂ λ₁/λ`` only
FLOAT32_EIGENVALUE_ERROR = 0.13


def gram_precision(precision: str | None = None) -> str:
    """The Gram precision to use: ``precision`` if given, else the ``dask.config``
    setting."""
    value = precision
    if value is None:
        value = dask.config.get(GRAM_PRECISION_KEY, "auto")
    if value not in GRAM_PRECISIONS:
        raise ValueError(
            f"gram precision must be one of {', '.join(map(repr, GRAM_PRECISIONS))};"
            f" got {value!r} (dask.config key {GRAM_PRECISION_KEY!r})"
        )
    return value


def gram_error_bound(n_rows: int | None = None) -> float:
    """Relative error bound of a float32 centred Gram (``precision="auto"``) against
    float64.

    Entry by entry, ``|Ĝ_jk − G_jk| ≤ gram_error_bound() · ‖c_j‖ ‖c_k‖``, where ``G`` is
    the centred Gram of the same float32 data computed in float64 and ``c_j`` the
    centred column ``j``: with ``u = 2⁻²⁴`` (float32's unit roundoff, half its epsilon),
    each float32 slice sum of at most ``L = GRAM_BLOCK_ROWS`` products errs by at most
    ``L u Σ|c_ij c_ik|`` (the classical bound for a dot product), centring adds ``2u``
    (one rounding of ``x − μ₃₂``, at most one more of the product), and the float64 sum
    over slices and the exact correction for the rounded mean add nothing at float32
    scale; Cauchy–Schwarz turns ``Σ|c_ij c_ik|`` into ``‖c_j‖ ‖c_k‖``. So the bound is
    ``(L + 2) u = (L + 2)/2 · ε₃₂``. Summing block partials keeps it (Cauchy–Schwarz
    over blocks; a block's centred norm is at most the global one). Because it involves
    the *centred* norms, it holds however large
    |mean| is compared with the spread. Typical errors are ``√L u``-sized, far below it.

    For the spectrum, Weyl's inequality turns the bound into
    ``|δλ_i| ≤ gram_error_bound() · trace`` for every eigenvalue (the Frobenius norm
    of the error is at most the bound times ``Σ_j ‖c_j‖²``). Measured errors are a
    fraction of ``ε₃₂ λ₁`` (λ₁ the largest eigenvalue), which small eigenvalues feel
    as a relative error of ``~1e-8 · λ₁/λ_i`` (:class:`scalepca.PCA`'s Notes give the
    figures).
    """
    rows = GRAM_BLOCK_ROWS if n_rows is None else min(int(n_rows), GRAM_BLOCK_ROWS)
    return (rows + 2) * float(np.finfo(np.float32).eps) / 2


def float32_relative_error(lam_max: float, lam: float) -> float:
    """Relative error to expect of the eigenvalue ``lam`` (and of quantities made of
    such eigenvalues: σ², North's errors) when the Gram of float32 data was formed by
    float32 products and ``lam_max`` is the largest eigenvalue
    (:data:`FLOAT32_EIGENVALUE_ERROR`)."""
    if lam <= 0:
        return np.inf
    return (
        FLOAT32_EIGENVALUE_ERROR
        * float(np.finfo(np.float32).eps)
        * float(lam_max)
        / lam
    )


def _gram(
    x: np.ndarray, shift: np.ndarray | None = None, *, precision: str = "auto"
) -> np.ndarray:
    """``(x − shift)ᵀ (x − shift)`` accumulated in float64, by syrk (half the flops of a
    general product).

    Rows go ``GRAM_BLOCK_ROWS`` at a time into one reused buffer, so no shifted or
    widened copy of the whole block is made. A float32 block with a ``shift`` and
    ``precision="auto"`` is centred into a float32 buffer (by the shift rounded to
    float32) and multiplied in float32 (ssyrk: twice the speed of the float64
    product), and the d × d slice products are summed in float64; the exact effect of
    rounding the shift is taken out at the end
    (``Σ (x − s₃₂)(x − s₃₂)ᵀ = Σ (x − s)(x − s)ᵀ + n δ δᵀ`` with ``δ = s − s₃₂`` when
    ``s`` is the block mean, the one ``shift`` this path is used with). Error bound:
    :func:`gram_error_bound`. Every other case (float64 blocks, no shift,
    ``precision="float64"``) widens each slice to float64. The product is numpy's
    ``aᵀ @ a``, which numpy hands to OpenBLAS syrk when both operands are one buffer.
    """
    x = np.ascontiguousarray(x)
    n, d = x.shape
    g = np.zeros((d, d), dtype=np.float64)
    if n == 0:
        return g
    rows = min(n, GRAM_BLOCK_ROWS)
    if x.dtype == np.float32 and shift is not None and precision == "auto":
        shift32 = np.asarray(shift, dtype=np.float32)
        buf = np.empty((rows, d), dtype=np.float32)
        product = np.empty((d, d), dtype=np.float32)
        for start in range(0, n, rows):
            part = np.subtract(
                x[start : start + rows], shift32, out=buf[: min(rows, n - start)]
            )
            _add_gram(g, part, product)
        delta = np.asarray(shift, dtype=np.float64) - shift32
        _add_outer(g, -float(n), delta)
        return g
    widen = x.dtype != np.float64
    buf = np.empty((rows, d), dtype=np.float64) if shift is not None or widen else None
    product = np.empty((d, d), dtype=np.float64)
    for start in range(0, n, rows):
        part = x[start : start + rows]
        if shift is not None:
            part = np.subtract(part, shift, out=buf[: part.shape[0]], dtype=np.float64)
        elif widen:
            buf[: part.shape[0]] = part
            part = buf[: part.shape[0]]
        _add_gram(g, part, product)
    return g


def _add_gram(g: np.ndarray, part: np.ndarray, product: np.ndarray) -> None:
    """``g += partᵀ part`` for a C-ordered row slab ``part``, through the reused d × d
    buffer ``product`` of ``part``'s dtype (numpy hands ``partᵀ part`` to its BLAS
    syrk).

    The buffer matters inside dask workers: their ``MALLOC_TRIM_THRESHOLD_`` (set by
    the nanny) makes glibc return every freed large array to the system, so a fresh d
    × d product per slice is fresh zeroed pages each time (measured 5–10 % of a
    block's moments at d = 256, one core). numpy's own syrk is used rather than
    scipy's in-place one, which links another OpenBLAS build and ran float32 13 %
    slower here.
    """
    np.matmul(part.T, part, out=product)
    g += (
        product  # float32 products are widened element by element: float64 accumulation
    )


#: Without numba, the Gram of a CSR block is formed by densified row slabs (syrk) when
#: the sparse product's work Σ nnz_row² exceeds this fraction of the slab product's n·d²
#: (measured, one BLAS thread, on 20,000-row blocks of 500 and 2,000 features: slabs win
#: at 10 % non-zero — 5.8 s vs 9.3 s at d = 2,000 — scipy's sparse product at 2 % and
#: below — 0.8 s vs 5.6 s; they tie near 8 %)
SPARSE_GRAM_DENSE_FRACTION = 1 / 160

#: With numba, the compiled kernel (:mod:`scalepca.linalg._csr_gram`) forms it when Σ
#: nnz_row² is at most this fraction of n·d²; denser blocks still go to the slabs
#: (measured, one thread, 20,000 × 2,000 blocks: on negative binomial counts at 10 %
#: non-zero the kernel takes 0.42 s against the slabs' 2.15 s; on uniform random blocks
#: it takes 1.26 s against 1.94 s at 20 % non-zero and 2.63 s against 2.19 s at 30 %:
#: they tie near Σ nnz_row² ≈ n·d²/14, and the slabs win above)
KERNEL_DENSE_FRACTION = 1 / 14

#: bytes of one densified row slab of a CSR block (the only dense copy
#: :func:`_gram_sparse` makes)
SPARSE_SLAB_BYTES = 32 * 2**20


def _csr_gram_kernel():
    """The compiled CSR Gram kernel, or None where numba is not installed."""
    from . import _csr_gram

    return _csr_gram.csr_gram if _csr_gram.HAVE_KERNEL else None


def _gram_sparse(x) -> np.ndarray:
    """``xᵀ x`` of a CSR block in float64 (uncentred), without densifying the block.

    The cheapest route by an estimate of its work: the compiled kernel of
    :mod:`scalepca.linalg._csr_gram` (Σ nnz_row² / 2 multiply-adds) where numba is
    installed, else scipy's sparse product ``(xᵀ x).toarray()``; or — when the block
    is dense enough that the syrk of dense row slabs does less (see
    :data:`KERNEL_DENSE_FRACTION` and :data:`SPARSE_GRAM_DENSE_FRACTION`) — densified
    slabs of at most :data:`SPARSE_SLAB_BYTES` handed to :func:`_gram`. All give the
    same sums up to rounding (the same sums exactly for integer counts).
    """
    n, d = x.shape
    if n == 0 or x.nnz == 0:
        return np.zeros((d, d), dtype=np.float64)
    kernel, work = _csr_gram_kernel(), _sparse_work(x)
    if kernel is not None and work <= KERNEL_DENSE_FRACTION:
        return kernel(x)
    x = x.astype(np.float64, copy=False)  # float32 values are summed in float64
    if kernel is None and work <= SPARSE_GRAM_DENSE_FRACTION:
        return (x.T @ x).toarray()
    rows = max(1, min(n, SPARSE_SLAB_BYTES // (8 * d)))
    g = np.zeros((d, d), dtype=np.float64)
    slab = np.empty(
        (rows, d), dtype=np.float64
    )  # reused, as the product (see _add_gram)
    product = np.empty((d, d), dtype=np.float64)
    for start in range(0, n, rows):
        part = slab[: min(rows, n - start)]
        part.fill(0.0)  # scipy's toarray(out=) adds the stored values into its buffer
        x[start : start + rows].toarray(out=part)
        _add_gram(g, part, product)
    return g


def _clean_csr(x):
    """``(x, bad, nan_features)``: a CSR float block with its non-finite stored values
    counted (NaN per feature; None when there are none) and set to 0 (on a copy)."""
    import scipy.sparse

    x = scipy.sparse.csr_matrix(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    finite = np.isfinite(x.data)
    if finite.all():
        return x, 0, None
    nanf = np.bincount(x.indices[np.isnan(x.data)], minlength=x.shape[1])
    x = x.copy()
    x.data[~finite] = 0.0
    return x, int(finite.size - np.count_nonzero(finite)), nanf


def _sparse_work(x) -> float:
    """The sparse product's work on a CSR block, Σ nnz_row², as a fraction of the dense
    slabs' n·d² (what :func:`_gram_sparse` chooses its route by)."""
    n, d = x.shape
    per_row = np.diff(x.indptr).astype(np.float64)
    return float(per_row @ per_row) / max(n * float(d) * d, 1.0)


def group_moments_sparse(blocks: list) -> dict:
    """:func:`_block_moments_sparse` of consecutive CSR row blocks taken as one block,
    with the centred Gram as its packed upper triangle (``m2p``, see
    :func:`packed_gram`): their raw Grams summed by the compiled kernel into one packed
    array and centred once.

    One task of a sparse Gram pass reads a group of blocks
    (:data:`SPARSE_GROUP_BLOCKS`), so a pass sends and merges one packed partial per
    group, not a d × d one per block (at d = 2,000, 16 MB against 32 MB each). The
    sums are those of the blocks stacked, whatever the grouping. Without the kernel,
    or where a block is too dense for it, the blocks' own moments are merged and
    packed. A group of one block takes the kernel's packed route too.
    """
    cleaned = [_clean_csr(x) for x in blocks]
    if _csr_gram_kernel() is None or any(
        _sparse_work(x) > KERNEL_DENSE_FRACTION for x, _, _ in cleaned
    ):
        return packed_gram(
            _merge_list([_csr_moments(*c) for c in cleaned])
        )  # cleaned once
    from ._csr_gram import csr_gram_add, packed_size

    d = cleaned[0][0].shape[1]
    n = sum(x.shape[0] for x, _, _ in cleaned)
    colsum = np.zeros(d)
    m2p = np.zeros(packed_size(d))
    for x, _, _ in cleaned:
        colsum += np.bincount(x.indices, weights=x.data, minlength=d)
        csr_gram_add(x, m2p, packed=True)
    mean = _column_mean(colsum, n)
    _add_outer_packed(m2p, -float(n), mean)
    out = {"n": n, "mean": mean, "bad": sum(b for _, b, _ in cleaned), "m2p": m2p}
    nanf = [f for _, _, f in cleaned if f is not None]
    if nanf:
        out["nan_features"] = sum(nanf)
    return out


def packed_gram(mom: dict) -> dict:
    """``mom`` with its centred Gram ``m2`` (d × d, symmetric) as ``m2p``: the upper
    triangle row by row, d (d + 1) / 2 values — LAPACK's column-major packed lower
    storage of the same matrix, which ``?tpttr``, ``?trttp`` and ``?spr`` read and
    write. Partials of the sparse Gram pass travel and merge packed (half the bytes);
    :func:`full_gram` unpacks."""
    out = {k: v for k, v in mom.items() if k != "m2"}
    out["m2p"], info = lapack.dtrttp(
        mom["m2"], uplo="L"
    )  # symmetric: its lower = our upper
    if info:  # pragma: no cover - LAPACK's argument check
        raise ValueError(f"dtrttp failed ({info})")
    return out


def full_gram(mom: dict) -> dict:
    """``mom`` with a packed ``m2p`` (:func:`packed_gram`) as the d × d symmetric ``m2``
    (C-ordered), what the moments pass hands to its callers."""
    from ._csr_gram import mirror_upper

    out = {k: v for k, v in mom.items() if k != "m2p"}
    lower, info = lapack.dtpttr(
        mom["mean"].shape[0], mom["m2p"], uplo="L"
    )  # zeros above
    if info:  # pragma: no cover - LAPACK's argument check
        raise ValueError(f"dtpttr failed ({info})")
    m2 = lower.T  # C-ordered: the upper triangle, zeros below
    mirror_upper(m2)
    out["m2"] = m2
    return out


def _block_moments_sparse(x, *, with_gram: bool = True) -> dict:
    """:func:`block_moments` of one ``scipy.sparse`` row block (CSR), never densified.

    Count, column sums and the uncentred ``xᵀ x`` (:func:`_gram_sparse`) or column sums
    of squares are accumulated in float64 over the stored values; the block is centred
    on the small result, ``m2 = xᵀx − n_b μ_b μ_bᵀ``, and blocks merge by
    :func:`merge_moments`.

    Precision: the block-level subtraction cancels. With ``n_b`` rows, the entry
    ``(i, j)`` of ``m2`` carries an absolute rounding error of about
    ``ε n_b (|μᵢ μⱼ| + σᵢ σⱼ)``, so the covariance keeps a relative error of about
    ``ε (|μ|²/σ² + 1)`` (``ε`` = 2.2e-16): full precision for counts and word
    occurrences, whose means are of the order of their standard deviations or below, and
    ``ε |μ|²/σ²`` where the mean dominates (a feature with mean 1e4 and standard
    deviation 1 keeps about 8 digits). Dense blocks are centred before their product and
    do not lose these digits.

    Non-finite stored values are counted (``bad``; ``nan_features`` per feature for
    NaN) and taken as 0 in the other statistics, as in the dense path.
    """
    return _csr_moments(*_clean_csr(x), with_gram=with_gram)


def _csr_moments(x, bad: int, nanf, *, with_gram: bool = True) -> dict:
    """:func:`_block_moments_sparse` of a block :func:`_clean_csr` has cleaned (its
    count of non-finite values ``bad`` and NaN per feature ``nanf`` given with it)."""
    n, d = x.shape
    # not x.sum(axis=0, dtype=np.float64): scipy sums float32 values in float32 and
    # converts the result (pbmc68k's float32 counts: means 2.8e-6 off, eigenvalues
    # 3.6e-6)
    colsum = np.bincount(
        x.indices, weights=x.data, minlength=d
    )  # weights: float64 sums
    mean = _column_mean(colsum, n)
    out = {"n": n, "mean": mean, "bad": bad}
    if nanf is not None:
        out["nan_features"] = nanf
    if with_gram:
        m2 = _gram_sparse(x)
        _add_outer(m2, -float(n), mean)  # m2 −= n μ μᵀ, in place
        out["m2"] = m2
    else:
        sq = np.bincount(
            x.indices, weights=np.square(x.data, dtype=np.float64), minlength=d
        )
        out["ss"] = sq - n * mean**2
    return out


def block_moments(
    x: np.ndarray, *, with_gram: bool = True, precision: str = "auto"
) -> dict:
    """Moments of one row block, accumulated in float64.

    ``precision`` chooses the products of a float32 block's Gram (see :func:`_gram`).

    Non-finite entries are counted; the remaining statistics of a block that has them
    are meaningless, and the caller is expected to raise on ``bad > 0``.
    ``scipy.sparse`` blocks go to :func:`_block_moments_sparse` (implicit centring;
    its docstring states the precision).
    """
    if _is_sparse_block(x):
        return _block_moments_sparse(x, with_gram=with_gram)
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    # float32 blocks stay float32 here: sums accumulate in float64 and the Gram is
    # formed slice by slice (no float64 copy of the block)
    if with_gram and x.dtype == np.float64 and x.size:
        out = _fused_moments(x)
        if out is not None:
            return out
    n = x.shape[0]
    colsum = x.sum(axis=0, dtype=np.float64)
    bad = 0
    # The column sums are finite exactly when every entry is finite (barring overflow of
    # sums near 1e308), so the NaN/inf check costs nothing on clean data; only then
    # count exactly.
    if not np.isfinite(colsum).all():
        finite = np.isfinite(x)
        bad = int(x.size - np.count_nonzero(finite))
        if bad:
            # per-feature NaN counts let callers drop all-NaN features (land masks)
            nan_features = np.isnan(x).sum(axis=0)
            x = np.where(finite, x, 0.0)
        colsum = x.sum(axis=0, dtype=np.float64)
    mean = _column_mean(colsum, n)
    out = {"n": n, "mean": mean, "bad": bad}
    if bad:
        out["nan_features"] = nan_features
    if with_gram:
        out["m2"] = _gram(x, mean, precision=precision)
    else:
        out["ss"] = ((x - mean) ** 2).sum(axis=0)
    return out


#: rows per slab of :func:`_fused_moments` (2 MB at d = 256: a slab stays in the
#: core's own cache between its shift and its syrk; measured 5–10 % faster than 2,048)
FUSED_SLAB_ROWS = 1024

#: :func:`_fused_moments` keeps its result when the block's mean is within this many of
#: its standard deviations of the shift (column by column); else the block is redone
#: centred on its exact mean
FUSED_SHIFT_TOLERANCE = 1 / 8


def _fused_moments(x: np.ndarray) -> dict | None:
    """:func:`block_moments` of a float64 block with its Gram, in one pass over its
    memory; None when the block has a non-finite entry or its shift was poor (the caller
    then takes the two-pass route, whose results for such blocks are the defining ones).

    The two-pass route reads the block twice: its column sums (the mean, and the
    finiteness check), then centred slices for the syrk. Here each slab of
    :data:`FUSED_SLAB_ROWS` rows is shifted by ``s`` into a buffer with one more column
    of ones, so the slab's syrk gives its shifted column sums with its Gram (``d`` more
    of the ``(d + 1)²/2`` products) while the slab is in the cache. ``s`` is the mean of
    2,048 rows spread evenly over the block (a strided read of 4 % of it), within
    sampling error of the block's mean ``μ``; the centred Gram follows exactly,
    ``Σ (x − μ)(x − μ)ᵀ = Σ (x − s)(x − s)ᵀ − n δ δᵀ`` with ``δ = μ − s``, and the
    correction costs no precision while ``|δ_j|`` is small beside the column's spread.
    A block where it exceeds :data:`FUSED_SHIFT_TOLERANCE` standard deviations (rows in
    an order whose even sample is not typical of the block) is redone on its exact mean.

    Why shifted slabs rather than one syrk of the block as read (``xᵀx − n μ μᵀ``): the
    syrk sums same-signed products over all the rows, so its rounding grows with
    ``n μ²``; measured on 50,000 × 40 blocks, the Gram's error relative to
    ``‖c_j‖ ‖c_k‖`` was 40 times the centred product's at ``|μ| = σ`` and 2,000 times
    (1.6e-12) at ``|μ| = 8σ``. The syrk is scipy's, summing into ``g`` in place (numpy's
    and scipy's OpenBLAS ran float64 alike here; see :func:`_add_gram` for float32).

    A NaN or inf makes the slab's sums non-finite (the check of :func:`block_moments`,
    folded into the syrk): the pass stops at that slab and returns None.
    """
    n, d = x.shape
    step = max(1, n // GRAM_BLOCK_ROWS)
    shift = x[::step][:GRAM_BLOCK_ROWS].mean(axis=0)
    rows = min(n, FUSED_SLAB_ROWS)
    buf = np.empty((rows, d + 1))  # reused for every slab (see _add_gram on why)
    buf[:, d] = 1.0
    g = np.zeros((d + 1, d + 1), order="F")  # upper triangle, summed into in place
    for start in range(0, n, rows):
        part = buf[: min(rows, n - start)]
        with np.errstate(invalid="ignore", over="ignore"):  # inf − inf: found below
            np.subtract(x[start : start + part.shape[0]], shift, out=part[:, :d])
        blas.dsyrk(1.0, part.T, beta=1.0, c=g, trans=0, lower=0, overwrite_c=1)
        if not np.isfinite(g[:d, d]).all():
            return None
    delta = g[:d, d] / n
    upper = np.triu(g[:d, :d])
    var = np.diagonal(upper) / n - delta * delta
    if np.any(delta * delta > FUSED_SHIFT_TOLERANCE**2 * var):
        return None
    m2 = upper + np.triu(upper, 1).T  # C-ordered and exactly symmetric, as _gram's
    root = np.sqrt(float(n)) * delta
    m2 -= np.outer(root, root)  # n δ δᵀ as (√n δ)(√n δ)ᵀ: m2 stays exactly symmetric
    return {"n": n, "mean": shift + delta, "bad": 0, "m2": m2}


#: bytes of one slab of mapped features in :func:`feature_block_moments` (2,048 rows at
#: m = 1,000): a slab stays in the last-level cache between the map and its syrk
FEATURE_SLAB_BYTES = 16 * 2**20


def feature_block_moments(x, feature_map) -> dict:
    """:func:`block_moments` of ``feature_map(x)`` without forming the mapped block
    whole.

    ``feature_map(slab, out=buf)`` takes row slabs of ``x`` (NumPy or CSR) to float64
    rows of m features, written into ``buf`` (one C-ordered buffer reused for every
    slab, which is shifted in place) or returned in a new array. It is applied to
    slabs of at most :data:`GRAM_BLOCK_ROWS` rows and :data:`FEATURE_SLAB_BYTES`, and
    each slab is centred by a shift — the mean of the first slab — before its syrk;
    the block's own mean and centred Gram come from the shifted sums
    (``m2 = Σ (f − s)(f − s)ᵀ − n (μ − s)(μ − s)ᵀ``), which keep full precision
    because ``s`` is within a slab's sampling error of ``μ``. Memory: the row block
    and one slab of features, whatever the block's length; the result is the same
    partial :func:`block_moments` gives for the mapped block (up to rounding), so the
    partials merge as before. Non-finite features are counted in ``bad`` and taken as
    0.
    """
    n = x.shape[0]
    m = feature_map(x[:1]).shape[1]
    if n == 0:
        return {"n": 0, "mean": np.zeros(m), "bad": 0, "m2": np.zeros((m, m))}
    step = max(1, min(n, GRAM_BLOCK_ROWS, FEATURE_SLAB_BYTES // (8 * max(1, m))))
    bad = 0
    shift = None
    total = np.zeros(m)
    g = np.zeros((m, m))
    buf = np.empty((step, m))  # the slab's features, reused (see _add_gram on why)
    product = np.empty((m, m))
    for start in range(0, n, step):
        rows = min(step, n - start)
        f = feature_map(x[start : start + rows], out=buf[:rows])
        if not np.shares_memory(f, buf):  # a new array: shifted in place all the same
            f = np.ascontiguousarray(f, dtype=np.float64)
        colsum = f.sum(axis=0)
        if not np.isfinite(colsum).all():
            finite = np.isfinite(f)
            bad += int(f.size - np.count_nonzero(finite))
            f[~finite] = 0.0
            colsum = f.sum(axis=0)
        if shift is None:
            shift = colsum / f.shape[0]
        f -= shift
        total += colsum - f.shape[0] * shift
        _add_gram(g, f, product)
    delta = total / n
    _add_outer(g, -float(n), delta)  # g −= n δ δᵀ, in place
    return {"n": n, "mean": shift + delta, "bad": bad, "m2": g}


def _is_sparse_block(x) -> bool:
    import scipy.sparse

    return scipy.sparse.issparse(x)


def _add_outer(m2: np.ndarray, w: float, v: np.ndarray) -> None:
    """``m2 += w v vᵀ`` in place (BLAS dger on the transposed view; no d × d
    temporary)."""
    if m2.flags.c_contiguous and m2.dtype == np.float64 and m2.size:
        blas.dger(w, v, v, a=m2.T, overwrite_a=1)
    else:
        m2 += w * np.outer(v, v)


def _add_outer_packed(m2p: np.ndarray, w: float, v: np.ndarray) -> None:
    """``m2 += w v vᵀ`` in place on a packed Gram (:func:`packed_gram`; BLAS dspr)."""
    out = blas.dspr(v.shape[0], w, v, m2p, lower=1, overwrite_ap=1)
    # pragma: no cover - f2py writes a contiguous float64 array in place
    if out is not m2p:
        m2p[:] = out


def merge_centred_product(P, P_b, means: tuple, projected: tuple, na, nb) -> None:
    """Chan's update of a centred product merged from two sets of rows, in place:
    ``P += P_b + w δ Δᵀ`` with ``w = na nb / (na + nb)``, ``δ`` the difference of the
    sets' column means ``means = (a, b)`` and ``Δ`` that of their ``projected`` means
    (``μ'ᵀ V`` of the other factor of the product; ``δ`` itself for the Gram, whose
    update :func:`merge_moments` makes with BLAS). Column by column: no temporary of
    ``P``'s size."""
    P += P_b
    if not (na and nb):
        return
    w = na * nb / (na + nb)
    delta = means[1] - means[0]
    for j, dv in enumerate(projected[1] - projected[0]):
        P[:, j] += (w * dv) * delta


def _column_mean(colsum: np.ndarray, n: int) -> np.ndarray:
    """The column means of ``n`` rows from their column sums; zeros for no rows."""
    if n:
        return colsum / n
    return np.zeros(colsum.shape[0])


def merged_mean(a, b, na, nb):
    """The mean of two sets of rows from theirs (``a`` of ``na`` rows, ``b`` of
    ``nb``): ``a + (b − a) nb / n``; either one when the other set is empty."""
    if nb == 0:
        return a
    if na == 0:
        return b
    return a + (b - a) * (nb / (na + nb))


def _gram_key(mom: dict) -> str | None:
    """Which Gram a partial carries: ``"m2"`` (d × d), ``"m2p"`` (packed) or None
    (``ss``)."""
    if "m2" in mom:
        return "m2"
    if "m2p" in mom:
        return "m2p"
    return None


def merge_moments(a: dict, b: dict, *, reuse_a: bool = False) -> dict:
    """Merge two partials with the parallel (Chan et al.) update; exact in exact
    arithmetic.

    ``reuse_a``: ``a["m2"]`` belongs to the caller and may be summed into in place (a
    merge of several partials accumulates into the one array it made first). Packed
    Grams (``m2p``, :func:`packed_gram`) merge packed.
    """
    na, nb = a["n"], b["n"]
    nanf = {}
    if "nan_features" in a or "nan_features" in b:
        nanf["nan_features"] = a.get("nan_features", 0) + b.get("nan_features", 0)
    if na == 0:
        return {**b, "bad": a["bad"] + b["bad"], **nanf}
    if nb == 0:
        return {**a, "bad": a["bad"] + b["bad"], **nanf}
    n = na + nb
    delta = b["mean"] - a["mean"]
    out = {
        "n": n,
        "mean": a["mean"] + delta * (nb / n),
        "bad": a["bad"] + b["bad"],
        **nanf,
    }
    w = na * nb / n
    key = _gram_key(a)
    if key is not None:
        if reuse_a:
            m2 = a[key]
            m2 += b[key]
        else:
            m2 = a[key] + b[key]
        # += w δ δᵀ in place
        if key == "m2":
            _add_outer(m2, w, delta)
        else:
            _add_outer_packed(m2, w, delta)
        out[key] = m2
    else:
        out["ss"] = a["ss"] + b["ss"] + w * delta**2
    return out


def _block_partial(
    x, *, with_gram: bool = True, precision: str = "auto", feature_map=None
):
    """The partial of one row block (of its mapped features when ``feature_map`` is
    given)."""
    if feature_map is not None:
        return feature_block_moments(x, feature_map)
    return block_moments(x, with_gram=with_gram, precision=precision)


def _merge_list(parts: list) -> dict:
    """Merge the partials of consecutive row blocks, left to right, accumulating into
    the Gram matrix the first merge made (never into a part's own)."""
    acc = parts[0]
    owned = False  # whether acc["m2"] is an array this merge made (never a part's own)
    for p in parts[1:]:
        acc = merge_moments(acc, p, reuse_a=owned)
        key = _gram_key(acc)
        owned = key is not None and all(acc[key] is not q.get(key) for q in parts)
    return acc


def _moments_reduction(
    X: da.Array,
    *,
    with_gram: bool,
    split_every: int,
    precision: str = "auto",
    feature_map=None,
) -> da.Array:
    """The tree reduction over row blocks
    (:func:`~scalepca.linalg.passes.row_reduction`): one dict of moments per column
    chunk of ``X``."""
    block = partial(
        _block_partial,
        with_gram=with_gram,
        precision=precision,
        feature_map=feature_map,
    )
    return row_reduction(
        X, block, merge_all=_merge_list, split_every=split_every, name="moments"
    )


def moments_graph(
    X: da.Array,
    *,
    with_gram: bool = True,
    split_every: int = 8,
    precision: str | None = None,
    feature_map=None,
    also=None,
):
    """A dask ``Delayed`` for the moments of ``X`` (rows chunked, one column chunk).

    Blocks are mapped with :func:`block_moments` and merged in a tree of fan-in
    ``split_every`` (:mod:`~scalepca.linalg.passes`); only d × d partials ever travel
    between workers. ``precision`` (``"auto"`` or ``"float64"``; default: the
    ``dask.config`` key ``scalepca.gram-precision``, itself ``"auto"``) chooses the
    products of float32 blocks: float32 on centred slices summed in float64 (error
    within :func:`gram_error_bound` of the float64 products), or float64. It is fixed
    when the graph is built, on the client.

    ``feature_map`` (a function of row slabs, picklable): the moments of the mapped
    rows instead, by :func:`feature_block_moments` — the mapped matrix is never
    formed, one slab at a time is (kernel PCA's feature moments). ``also``: see
    :func:`~scalepca.linalg.passes.single_delayed`.
    """
    if len(X.chunks[1]) != 1:
        raise ValueError(
            "moments need the features in one column chunk; rechunk({1: -1}) first"
        )
    if with_gram and feature_map is None and also is None and is_sparse(X):
        return _sparse_gram_graph(X, split_every)
    precision = gram_precision(precision)
    return single_delayed(
        _moments_reduction(
            X,
            with_gram=with_gram,
            split_every=split_every,
            precision=precision,
            feature_map=feature_map,
        ),
        also,
    )


#: consecutive CSR row blocks one task of a sparse Gram pass reads
#: (group_moments_sparse)
SPARSE_GROUP_BLOCKS = 4
#: groups shrink to keep at least this many tasks in the pass
SPARSE_MIN_TASKS = 16


def block_groups(n_blocks: int) -> list[range]:
    """The groups of consecutive row blocks of a sparse Gram pass, in order: groups
    of ``size`` (:data:`SPARSE_GROUP_BLOCKS`, fewer to keep :data:`SPARSE_MIN_TASKS`
    tasks), then a tapered end — the last ``2 size`` blocks in groups of
    ``size // 2`` and the last ``size`` of them one by one — so that the workers run
    out of work together: with groups of equal size, one worker can wait up to a
    whole group's time for the last (measured: 0.5 s of an 18 s pass of 25 groups on
    2 workers)."""
    size = max(1, min(SPARSE_GROUP_BLOCKS, n_blocks // SPARSE_MIN_TASKS))
    if size == 1:
        return [range(i, i + 1) for i in range(n_blocks)]
    # size ≥ 2 means n_blocks ≥ 2 SPARSE_MIN_TASKS: the tapered end always fits
    n, half = n_blocks, size // 2
    cuts = [
        *range(0, n - 2 * size, size),
        *range(n - 2 * size, n - size, half),
        *range(n - size, n),
    ]
    return [range(a, b) for a, b in zip(cuts, cuts[1:] + [n], strict=True)]


def _sparse_gram_graph(X: da.Array, split_every: int):
    """The moments pass of CSR row blocks in groups of consecutive blocks (one packed
    partial per group, see :func:`group_moments_sparse` and :func:`block_groups`),
    merged packed in a tree of fan-in ``split_every`` and unpacked once at the end."""
    tree = passes.reduce_block_groups(
        X,
        block_groups(X.numblocks[0]),
        group_moments_sparse,
        merge_all=_merge_list,
        split_every=split_every,
    )
    return dask.delayed(full_gram, pure=True)(tree)


def _concat_columns(*parts: dict) -> dict:
    """Per-feature moments of column strips (same rows) side by side."""
    out = {
        "n": parts[0]["n"],
        "mean": np.concatenate([p["mean"] for p in parts]),
        "ss": np.concatenate([p["ss"] for p in parts]),
        "bad": sum(p["bad"] for p in parts),
    }
    if any("nan_features" in p for p in parts):
        out["nan_features"] = np.concatenate(
            [
                p.get("nan_features", np.zeros(p["mean"].shape[0], dtype=np.int64))
                for p in parts
            ]
        )
    return out


def column_moments_graph(X: da.Array, *, split_every: int = 8):
    """A dask ``Delayed`` for count, mean and per-feature sum of squares of ``X`` in 2-D
    blocks.

    Each column strip is reduced over its rows (``with_gram=False``) and the strips'
    results are put side by side: one pass, and no task holds more than one block, so
    wide data never has to be rechunked to full rows.
    """
    if len(X.chunks[1]) == 1:
        return moments_graph(X, with_gram=False, split_every=split_every)
    strips = _moments_reduction(
        X, with_gram=False, split_every=split_every
    ).to_delayed()
    return dask.delayed(_concat_columns, pure=True)(*strips.tolist())


def moments(
    X: da.Array,
    *,
    with_gram: bool = True,
    split_every: int = 8,
    precision: str | None = None,
) -> dict:
    """Compute count, mean, centred Gram (or per-feature sum of squares) in one pass."""
    (out,) = dask.compute(
        moments_graph(
            X, with_gram=with_gram, split_every=split_every, precision=precision
        )
    )
    return out


def feature_scale(
    var: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Per-feature standard deviations that standardise the data (correlation-matrix
    PCA).

    ``var`` holds the per-feature variances (denominator n, as ``StandardScaler``; e.g.
    ``diag(m2) / n`` or ``ss / n`` of the moments pass). A feature whose standard
    deviation is at most ``1e-12`` times the largest one is constant to rounding: its
    scale is 1, so it stays centred but unscaled (scikit-learn's ``StandardScaler`` does
    the same) instead of being divided by zero. Returns the scales and the number of
    such constant features.

    ``weights``: the column weights the data were multiplied by
    (``open_matrix(weights=...)``), non-negative, of the same features as ``var``. The
    scales are then the standard deviations of the unweighted data, ``σ_w / w``: the
    weighted data divided by them are the data standardised first and weighted after,
    ``(x − x̄) / σ · w`` (xeofs' order, and MCA's). Divided by ``σ_w`` itself, the
    weights would cancel. A feature of weight 0 (zero once weighted) is constant. Every
    estimator's and tool's standardisation takes its scales here.
    """
    sd = np.sqrt(np.maximum(np.asarray(var, dtype=np.float64), 0.0))
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        sd = np.divide(sd, w, out=np.zeros_like(sd), where=w > 0)
    const = sd <= 1e-12 * max(float(sd.max(initial=0.0)), 1e-300)
    sd[const] = 1.0
    return sd, int(const.sum())
