"""The Gram ``xᵀ x`` of a CSR row block as a dense float64 matrix, in Σ nnz_row² / 2
work.

Neither scipy nor scikit-learn forms a dense Gram from a CSR matrix at sparse cost:
scipy's ``x.T @ x`` is a general sparse-times-sparse product that builds a sparse result
entry by entry (about 0.15 G multiply-adds a second on one core here), and the
alternative, densified row slabs by BLAS syrk, does ``n d² / 2`` multiply-adds whatever
the density — 100 times the sparse work at 10 % non-zero. This module is the one
hand-written kernel of scalepca, compiled by numba when numba is installed (it comes
with the ``sparse`` and ``anndata`` extras); without numba the callers fall back to
those two library routes.

The kernel (Gustavson's row-by-row product, with a dense accumulator that is the output
row itself). The block's rows are taken in slabs whose stored entries fit in the core's
cache; for each slab a column index (CSC order, by a counting sort) records, for every
stored entry ``(i, j)``, its position in row ``i``. Then, column by column, for each row
``i`` with an entry ``v`` in column ``j``, the rest of row ``i`` — its entries in
columns ``k ≥ j`` — is added to ``G[j, k]`` as ``v · x_ik``. Each output row ``G[j]``
stays in L1 while column ``j`` is processed and each row tail is read in order, so the
work is Σ nnz_row² / 2 multiply-adds over the upper triangle, with no scattered writes
across ``G``. The lower triangle is filled at the end.

Each product is formed in float64 and each ``G[j, k]`` is a sum in row order, so the
result equals the float64 sum up to the rounding of that order (exact for counts:
integers whose sums stay below 2⁵³).
"""

from __future__ import annotations

import numpy as np

try:  # optional: numba compiles the kernel; without it the callers use library routes
    import numba
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

__all__ = ["HAVE_KERNEL", "SLAB_NNZ", "csr_gram", "csr_gram_add", "packed_size"]

#: stored entries per slab of rows: 65,536 entries of a float32 value and an int32
#: index, plus their column index, are under 1 MiB, the L2 cache of one core here
SLAB_NNZ = 65_536

HAVE_KERNEL = numba is not None


# pragma: no cover - compiled
def _upper_gram(indptr, indices, data, d, slab_nnz, g, packed):
    # ``indices`` come as unsigned integers and ``g`` as the flat d·d view of the
    # output, or (``packed``) its upper triangle row by row, d (d + 1) / 2 values: with
    # unsigned subscripts numba drops its negative-index wraparound in the inner loop,
    # which made the kernel 1.55× faster (0.61 → 0.39 s on 20,000 × 2,000 counts at 10
    # %)
    n = indptr.shape[0] - 1
    width = slab_nnz
    for i in range(n):  # the slab buffers must hold the longest row
        width = max(width, indptr[i + 1] - indptr[i])
    cstart = np.empty(d + 1, dtype=np.int64)
    cnext = np.empty(d, dtype=np.int64)
    cend = np.empty(width, dtype=np.uint64)
    cpos = np.empty(width, dtype=np.uint64)
    lo = 0
    while lo < n:
        hi = lo + 1
        while hi < n and indptr[hi + 1] - indptr[lo] <= slab_nnz:
            hi += 1
        # counting sort of the slab's entries by column: cstart[j] .. cstart[j + 1]; for
        # each entry, its position in its row and the end of that row
        cstart[:] = 0
        for q in range(indptr[lo], indptr[hi]):
            cstart[indices[q] + 1] += 1
        for j in range(d):
            cstart[j + 1] += cstart[j]
        cnext[:] = cstart[:d]
        for i in range(lo, hi):
            for q in range(indptr[i], indptr[i + 1]):
                c = indices[q]
                slot = cnext[c]
                cend[slot] = indptr[i + 1]
                cpos[slot] = q
                cnext[c] = slot + 1
        for j in range(d):
            # where G[j, k] is: j d + k, or packed (rows j..d−1 of row j) j d − j (j +
            # 1) / 2 + k
            row = numba.uint64(j) * numba.uint64(d)
            if packed:
                row -= numba.uint64(j) * numba.uint64(j + 1) // numba.uint64(2)
            for slot in range(cstart[j], cstart[j + 1]):
                q = cpos[slot]
                end = cend[slot]
                v = np.float64(data[q])
                while q < end:
                    g[row + numba.uint64(indices[q])] += v * np.float64(data[q])
                    q += numba.uint64(1)
        lo = hi


_upper_gram_compiled = (
    numba.njit(nogil=True, cache=True)(_upper_gram) if numba is not None else None
)


def csr_gram(x, *, slab_nnz: int = SLAB_NNZ) -> np.ndarray:
    """``xᵀ x`` of a ``scipy.sparse`` CSR matrix as a dense float64 array (needs numba).

    The matrix is brought to canonical form (sorted indices, no duplicates) on a copy
    when it is not already, because the kernel reads each row's entries in column
    order. ``slab_nnz`` (stored entries per slab of rows) changes the speed only,
    never the result.
    """
    if _upper_gram_compiled is None:
        raise ImportError(
            "csr_gram needs numba (pip install numba, or the scalepca[sparse] extra)"
        )
    d = x.shape[1]
    g = np.zeros((d, d), dtype=np.float64)
    csr_gram_add(x, g, slab_nnz=slab_nnz)
    _mirror_upper(g)
    return g


def packed_size(d: int) -> int:
    """Length of the packed upper triangle of a d × d matrix, d (d + 1) / 2."""
    return d * (d + 1) // 2


def csr_gram_add(
    x, g: np.ndarray, *, slab_nnz: int = SLAB_NNZ, packed: bool = False
) -> None:
    """Add the upper triangle of ``xᵀ x`` (``x`` CSR) into that of the C-ordered float64
    d × d ``g``, in place (the strict lower triangle is not touched): the Grams of
    several row blocks summed in one array, mirrored once by the caller
    (:func:`mirror_upper`).

    ``packed``: ``g`` is instead the upper triangle alone, row by row (``G[j, j:]``
    for j = 0 … d − 1; :func:`packed_size` values), which is also LAPACK's
    column-major packed *lower* storage of the same symmetric matrix (``uplo="L"`` of
    ``?tpttr`` and ``?spr``).
    """
    if _upper_gram_compiled is None:
        raise ImportError(
            "csr_gram needs numba (pip install numba, or the scalepca[sparse] extra)"
        )
    d = x.shape[1]
    if packed:
        size, values = packed_size(d), "d (d + 1) / 2"
    else:
        size, values = d * d, "d × d"
    if g.dtype != np.float64 or not g.flags.c_contiguous or g.size != size:
        raise ValueError(
            f"csr_gram_add: the output must be C-ordered float64 of "
            f"{values} values for d = {d}"
        )
    if not x.has_canonical_format:
        x = x.copy()
        x.sum_duplicates()
    if x.nnz:
        data = x.data
        if data.dtype not in (np.float32, np.float64):
            data = data.astype(np.float64)
        unsigned = x.indices.view(np.uint32 if x.indices.itemsize == 4 else np.uint64)
        _upper_gram_compiled(
            x.indptr, unsigned, data, d, int(slab_nnz), g.reshape(-1), bool(packed)
        )


def mirror_upper(g: np.ndarray) -> None:
    """Copy the strict upper triangle of ``g`` onto its (zero) strict lower one, in
    place."""
    _mirror_upper(g)


def _mirror_upper(g: np.ndarray, step: int = 64) -> None:
    """Copy the strict upper triangle of the square ``g`` onto its strict lower
    triangle (zero before), band of ``step`` rows by band, in place: no d × d
    temporary, which inside dask workers (whose nanny sets
    ``MALLOC_TRIM_THRESHOLD_``) would be fresh zeroed pages — 32 MB at d = 2,000 for
    every block."""
    d = g.shape[0]
    for j0 in range(0, d, step):
        j1 = min(d, j0 + step)
        g[j0:j1, :j0] = g[:j0, j0:j1].T
        band = g[j0:j1, j0:j1]
        band += np.triu(band, 1).T
