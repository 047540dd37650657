"""Products of a matrix of counts 0, 1, 2 stored two bits an entry, column-major (the
layout of a SNP-major PLINK ``.bed``), decoded straight into the products.

A row block is a ``(d, nbytes)`` array of bytes: column ``j`` holds its entries four
to a byte, entry ``r`` in byte ``r // 4`` at bits ``2 (r % 4)``, codes as
:data:`CODE_COUNTS`. A :class:`~scalepca.linalg.scaling.ColumnScaling` gives each
column's four values of ``z`` (a look-up table), so decoding, filling the missing
entries, centring and scaling are one look-up per entry. The columns are decoded
:data:`TILE` at a time into a buffer that stays in cache, and each tile's product is
accumulated at once by BLAS:

* ``Y = Z V = Σ_tiles Z_t V_t`` (n_b × l);
* ``Zᵀ U``, tile by tile.

One task of :func:`packed_gram_times` reads its packed block (16 times smaller than
its float32 values) and makes both products of ``Zᵀ (Z V)``, decoding each tile twice
(``Y`` is whole only after the last tile): a pass of the Gram operator costs one read
of the packed data, and no float matrix larger than a tile is made. Products and sums
are in float64, so the result equals decoding to float64 then multiplying, up to the
order of the sums. The decoding is compiled by numba (``HAVE_KERNEL``); without it the
callers read the float blocks instead.
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

#: the count each 2-bit code stands for, NaN a missing entry (PLINK's codes 00, 01,
#: 10, 11 with the first allele counted, as bed-reader reads them by default)
CODE_COUNTS = np.array([2.0, np.nan, 1.0, 0.0])


def decode(packed: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The ``(len(rows), d)`` float64 counts of a packed block (NaN missing): the
    reference the products are checked against."""
    rows = np.asarray(rows, dtype=np.int64)
    codes = (packed[:, rows >> 2] >> ((rows & 3) << 1).astype(np.uint8)) & 3
    return CODE_COUNTS[codes.T]


#: columns decoded at a time: a 64 × n_b float64 tile (430 kB at the 836 rows of a
#: 128 MiB float32 block of 40,000 SNPs) stays in the core's cache for its product
TILE = 64


def _decode_tile(packed, j0, j1, at, sh, table, out):  # pragma: no cover - compiled
    # out[j - j0, i] = z of entry (i, j): its code looked up in column j's table
    for j in range(j0, j1):
        p, t, o = packed[j], table[j], out[j - j0]
        for i in range(at.shape[0]):
            o[i] = t[(p[at[i]] >> sh[i]) & 3]


if numba is not None:
    _decode_tile_compiled = numba.njit(nogil=True, cache=True)(_decode_tile)
else:  # pragma: no cover - exercised where numba is absent
    _decode_tile_compiled = None


class _Tiles:
    """The columns of a packed block decoded ``TILE`` at a time into one buffer."""

    def __init__(self, packed, rows, table):
        if _decode_tile_compiled is None:
            raise RuntimeError("the packed kernels need numba: pip install numba")
        self.packed = np.ascontiguousarray(packed, dtype=np.uint8)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        self.at, self.sh = rows >> 2, (rows & 3) << 1
        self.table = table
        self.buf = np.empty((min(TILE, self.packed.shape[0]), rows.size))

    def __iter__(self):
        d = self.packed.shape[0]
        for j0 in range(0, d, TILE):
            j1 = min(d, j0 + TILE)
            z = self.buf[: j1 - j0]
            _decode_tile_compiled(self.packed, j0, j1, self.at, self.sh, self.table, z)
            yield slice(j0, j1), z


def _times(tiles: _Tiles, V) -> np.ndarray:
    """``Z V``, summed tile by tile."""
    Y = np.zeros((tiles.at.size, V.shape[1]))
    for cols, z in tiles:
        Y += z.T @ V[cols]
    return Y


def _t_times(tiles: _Tiles, U) -> np.ndarray:
    """``Zᵀ U``, tile by tile."""
    out = np.empty((tiles.packed.shape[0], U.shape[1]))
    for cols, z in tiles:
        np.matmul(z, U, out=out[cols])
    return out


def _tiles(packed, rows, scaling: ColumnScaling) -> _Tiles:
    table = scaling.values_of_codes(CODE_COUNTS)
    if np.shape(packed)[0] != table.shape[0]:
        raise ValueError(
            f"{np.shape(packed)[0]} packed columns but a scaling of {table.shape[0]}"
        )
    return _Tiles(packed, rows, table)


def packed_times(packed, rows, scaling: ColumnScaling, V) -> np.ndarray:
    """``Z V`` (n_b × l) of a packed block: ``Z`` its rows ``rows`` (positions in each
    column's bytes) decoded and mapped by ``scaling``, ``V`` d × l."""
    return _times(_tiles(packed, rows, scaling), np.asarray(V, dtype=np.float64))


def packed_t_times(packed, rows, scaling: ColumnScaling, U) -> np.ndarray:
    """``Zᵀ U`` (d × l) of a packed block (see :func:`packed_times`), ``U`` n_b × l."""
    return _t_times(_tiles(packed, rows, scaling), np.asarray(U, dtype=np.float64))


def _block_gram_times(packed, rows, V, table) -> np.ndarray:
    tiles = _Tiles(packed, rows, table)  # decoded twice: Y must be whole before Zᵀ Y
    return _t_times(tiles, _times(tiles, V))


@dataclass(frozen=True)
class PackedRows:
    """A matrix read as packed row blocks: ``blocks`` (``Delayed``, each a
    ``(d, nbytes)`` uint8 array of all the matrix's columns), ``rows`` (per block, the
    int64 positions of its rows in those bytes) and ``shape`` (n, d)."""

    blocks: list
    rows: list
    shape: tuple


def packed_gram_times(
    P: PackedRows, V: np.ndarray, scaling: ColumnScaling, *, split_every: int = 8
) -> np.ndarray:
    """One pass: ``Zᵀ Z V`` (d × l), ``Z`` the packed matrix ``P`` mapped by
    ``scaling``; each block's two products in its task, straight from its bytes, the
    d × l partials summed in a tree."""
    if _decode_tile_compiled is None:
        raise RuntimeError("the packed kernels need numba: pip install numba")
    # the d × l block and the d × 4 table: one key each, read by every task
    Vd = passes.shared(np.ascontiguousarray(V, dtype=np.float64))
    table = passes.shared(scaling.values_of_codes(CODE_COUNTS))
    rows = [np.ascontiguousarray(r, dtype=np.int64) for r in P.rows]
    graph = passes.reduce_blocks(
        P.blocks,
        _block_gram_times,
        None,
        Vd,
        table,
        per_block=rows,
        split_every=split_every,
        merge_all=passes.sum_parts,
    )
    (out,) = passes.compute(graph, name="gram")
    return out
