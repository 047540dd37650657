"""Products of a matrix of counts 0, 1, 2 stored two bits an entry, column-major (the
layout of a SNP-major PLINK ``.bed``), decoded straight into the products.

A row block is a ``(d, nbytes)`` array of bytes: column ``j`` holds its entries four to a
byte, entry ``r`` in byte ``r // 4`` at bits ``2 (r % 4)``, codes as :data:`CODE_COUNTS`.
A :class:`~scalepca.linalg.scaling.ColumnScaling` gives each column's four values of ``z``
(a look-up table), so decoding, filling the missing entries, centring and scaling cost
nothing beyond the look-up, and the products are accumulated as the bytes are read:

* ``Y = Z V``: column by column, ``Y[i] += z_ij V[j]`` (the n_b × l block stays in cache);
* ``Zᵀ U``: column by column, ``Σ_i z_ij U[i]``.

One task of :func:`packed_gram_times` reads its packed block (16 times smaller than its
float32 values) and makes both products of ``Zᵀ (Z V)``: a pass of the Gram operator
costs one read of the packed data, with no float matrix made. Products and sums are in
float64, so the result equals decoding to float64 then multiplying, up to the order of
the sums. The kernels are compiled by numba (``HAVE_KERNEL``); without it the callers
read the float blocks instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import passes
from .scaling import ColumnScaling

try:  # optional: numba compiles the kernels; without it the callers read float blocks
    import numba
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

__all__ = [
    "CODE_COUNTS",
    "HAVE_KERNEL",
    "PackedRows",
    "decode",
    "packed_gram_times",
    "packed_t_times",
    "packed_times",
]

HAVE_KERNEL = numba is not None

#: the count each 2-bit code stands for, NaN a missing entry (PLINK's codes 00, 01, 10, 11
#: with the first allele counted, as bed-reader reads them by default)
CODE_COUNTS = np.array([2.0, np.nan, 1.0, 0.0])


def decode(packed: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The ``(len(rows), d)`` float64 counts of a packed block (NaN missing): the
    reference the products are checked against."""
    rows = np.asarray(rows, dtype=np.int64)
    codes = (packed[:, rows >> 2] >> ((rows & 3) << 1).astype(np.uint8)) & 3
    return CODE_COUNTS[codes.T]


def _times(packed, rows, table, V):  # pragma: no cover - compiled
    # Y = Z V: for each column j, Y[i] += z_ij V[j]; four columns at a time, so each row
    # of Y is loaded and stored once for four columns
    d = packed.shape[0]
    nb = rows.shape[0]
    l = V.shape[1]
    Y = np.zeros((nb, l))
    at = rows >> 2
    sh = (rows & 3) << 1
    j = 0
    while j + 4 <= d:
        p0, p1, p2, p3 = packed[j], packed[j + 1], packed[j + 2], packed[j + 3]
        t0, t1, t2, t3 = table[j], table[j + 1], table[j + 2], table[j + 3]
        v0, v1, v2, v3 = V[j], V[j + 1], V[j + 2], V[j + 3]
        for i in range(nb):
            a, s = at[i], sh[i]
            z0 = t0[(p0[a] >> s) & 3]
            z1 = t1[(p1[a] >> s) & 3]
            z2 = t2[(p2[a] >> s) & 3]
            z3 = t3[(p3[a] >> s) & 3]
            y = Y[i]
            for c in range(l):
                y[c] += z0 * v0[c] + z1 * v1[c] + z2 * v2[c] + z3 * v3[c]
        j += 4
    while j < d:
        p, t, v = packed[j], table[j], V[j]
        for i in range(nb):
            z = t[(p[at[i]] >> sh[i]) & 3]
            y = Y[i]
            for c in range(l):
                y[c] += z * v[c]
        j += 1
    return Y


def _t_times(packed, rows, table, U):  # pragma: no cover - compiled
    # Zᵀ U: for each column j, Σ_i z_ij U[i]; two columns at a time share the loads of U
    d = packed.shape[0]
    nb = rows.shape[0]
    l = U.shape[1]
    out = np.zeros((d, l))
    at = rows >> 2
    sh = (rows & 3) << 1
    j = 0
    while j + 2 <= d:
        p0, p1, t0, t1 = packed[j], packed[j + 1], table[j], table[j + 1]
        o0, o1 = out[j], out[j + 1]
        for i in range(nb):
            a, s = at[i], sh[i]
            z0 = t0[(p0[a] >> s) & 3]
            z1 = t1[(p1[a] >> s) & 3]
            u = U[i]
            for c in range(l):
                o0[c] += z0 * u[c]
                o1[c] += z1 * u[c]
        j += 2
    if j < d:
        p, t, o = packed[j], table[j], out[j]
        for i in range(nb):
            z = t[(p[at[i]] >> sh[i]) & 3]
            u = U[i]
            for c in range(l):
                o[c] += z * u[c]
    return out


if numba is not None:
    _compile = numba.njit(nogil=True, cache=True, fastmath=False)
    _times_compiled, _t_times_compiled = _compile(_times), _compile(_t_times)
else:  # pragma: no cover - exercised where numba is absent
    _times_compiled = _t_times_compiled = None


def _args(packed, rows, scaling: ColumnScaling, M):
    if _times_compiled is None:
        raise RuntimeError("the packed kernels need numba: pip install numba")
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    table = scaling.values_of_codes(CODE_COUNTS)
    if packed.shape[0] != table.shape[0]:
        raise ValueError(f"{packed.shape[0]} packed columns but a scaling of "
                         f"{table.shape[0]}")
    return (packed, np.ascontiguousarray(rows, dtype=np.int64), table,
            np.ascontiguousarray(M, dtype=np.float64))


def packed_times(packed, rows, scaling: ColumnScaling, V) -> np.ndarray:
    """``Z V`` (n_b × l) of a packed block: ``Z`` its rows ``rows`` (positions in each
    column's bytes) decoded and mapped by ``scaling``, ``V`` d × l."""
    return _times_compiled(*_args(packed, rows, scaling, V))


def packed_t_times(packed, rows, scaling: ColumnScaling, U) -> np.ndarray:
    """``Zᵀ U`` (d × l) of a packed block (see :func:`packed_times`), ``U`` n_b × l."""
    return _t_times_compiled(*_args(packed, rows, scaling, U))


def _block_gram_times(packed, rows, V, table) -> np.ndarray:
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    return _t_times_compiled(packed, rows, table, _times_compiled(packed, rows, table, V))


@dataclass(frozen=True)
class PackedRows:
    """A matrix read as packed row blocks: ``blocks`` (``Delayed``, each a ``(d, nbytes)``
    uint8 array of all the matrix's columns), ``rows`` (per block, the int64 positions of
    its rows in those bytes) and ``shape`` (n, d)."""

    blocks: list
    rows: list
    shape: tuple


def packed_gram_times(P: PackedRows, V: np.ndarray, scaling: ColumnScaling, *,
                      split_every: int = 8) -> np.ndarray:
    """One pass: ``Zᵀ Z V`` (d × l), ``Z`` the packed matrix ``P`` mapped by ``scaling``;
    each block's two products in its task, straight from its bytes, the d × l partials
    summed in a tree."""
    if _times_compiled is None:
        raise RuntimeError("the packed kernels need numba: pip install numba")
    # the d × l block and the d × 4 table: one key each, read by every task
    Vd = passes.shared(np.ascontiguousarray(V, dtype=np.float64))
    table = passes.shared(scaling.values_of_codes(CODE_COUNTS))
    rows = [np.ascontiguousarray(r, dtype=np.int64) for r in P.rows]
    graph = passes.reduce_blocks(P.blocks, _block_gram_times, None, Vd, table,
                                 per_block=rows, split_every=split_every,
                                 merge_all=passes.sum_parts)
    (out,) = passes.compute(graph, name="gram")
    return out
