"""The cross-covariance operator of two fields, one pass over both per product.

For two fields over the same samples, ``X`` (n × d_x) and ``Y`` (n × d_y), in aligned
row blocks ``x_b``, ``y_b`` with column means ``μ_x``, ``μ_y``, the centred cross
products ``C = X_cᵀ Y_c`` (d_x × d_y) are never formed: the Hermitian dilation

    H = [[0, C], [Cᵀ, 0]]        H [U; V] = [C V; Cᵀ U]

is applied block by block, ``C V = Σ_b (x_b − 1μ_xᵀ)ᵀ ((y_b − 1μ_yᵀ) V)`` and ``Cᵀ U``
alike, all four products inside the task that holds both blocks (the n_b × l
intermediates never leave it, and each entry of the task's (d_x + d_y) × l partial is
written once); only the partials are summed, in a tree. One read of both fields is one
application of ``H``, whose eigenvalues are ``±σ_i`` (the singular values of ``C``) with
eigenvectors ``[u_i; ±v_i] / √2``: the block Krylov eigensolver of
:mod:`scalepca.linalg.krylov` finds the leading singular triplets of ``C`` from it.

The first read also gathers the column moments of both fields: each block is centred by
its own means and its partial merged with the parallel update of Chan et al.,
``Cᵃ V + Cᵇ V + w δ_x (δ_yᵀ V)`` (and ``Cᵀ U`` alike), as the Gram operator's first pass
does — so the means cost no pass of their own. Blocks are centred slab by slab in
float64 before the products (no cancellation however large the means are).

Memory per task: the pair of row panels, their n_b × l products and the (d_x + d_y) ×
l partial; the panels' rows (:func:`aligned_panels`) should well exceed ``l`` for the
pass to be read-bound (a 256 MB pair of panels of two 1M-cell float64 fields holds 16
rows: give such fields larger row chunks, or workers that hold them).
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from . import passes
from .krylov import PANEL_BYTES, SLAB_BYTES, _blocks
from .moments import block_moments, merge_centred_product, merge_moments, merged_mean

__all__ = ["aligned_panels", "cross_times", "moments_and_cross_times"]


def aligned_panels(X: da.Array, Y: da.Array, panel_bytes: int = PANEL_BYTES):
    """``X`` and ``Y`` as row panels with all features in one chunk and the same row
    chunks (the pair of panels of a task at most ``panel_bytes`` when the rows allow
    it)."""
    width = (X.shape[1] + Y.shape[1]) * 8
    rows = min(max(X.chunks[0]), max(1, panel_bytes // max(1, width)))
    if max(X.chunks[0]) > rows:
        X = X.rechunk({0: rows, 1: -1})
    else:
        X = X.rechunk({1: -1})
    return X, Y.rechunk({0: X.chunks[0], 1: -1})


def _centred(a, rows: slice, cols: slice, shift: np.ndarray) -> np.ndarray:
    """``a[rows, cols] − shift[cols]`` in a new float64 array, NaN entries set to 0."""
    c = np.subtract(a[rows, cols], shift[cols], dtype=np.float64)
    np.copyto(c, 0.0, where=np.isnan(c))
    return c


def _block_cross_times(x, y, U: np.ndarray, V: np.ndarray, mx, my) -> np.ndarray:
    """``[(x − 1mxᵀ)ᵀ (y − 1myᵀ) V ; (y − 1myᵀ)ᵀ (x − 1mxᵀ) U]`` of one pair of row
    blocks ((d_x + d_y) × l; ``U`` d_x × l, ``V`` d_y × l); NaN entries count as their
    column's shift (0 once centred).

    Two sweeps over the blocks, each centring a float64 slab of at most
    :data:`SLAB_BYTES` before its product: row slabs give the n_b × l products
    ``y_c V`` and ``x_c U``, then column strips give each strip's rows of the result
    in one product (``x_cᵀ (y_c V)``), so every entry of the (d_x + d_y) × l result
    is written once however few rows a slab of a very wide block holds."""
    x, y = np.asarray(x), np.asarray(y)
    n, dx, dy, l = x.shape[0], x.shape[1], y.shape[1], U.shape[1]
    out = np.empty((dx + dy, l))
    everything = slice(None)
    yv, xu = np.empty((n, l)), np.empty((n, l))
    for a, shift, factor, prod in ((y, my, V, yv), (x, mx, U, xu)):
        step = max(1, SLAB_BYTES // (8 * max(a.shape[1], 1)))
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            prod[rows] = _centred(a, rows, everything, shift) @ factor
    for a, shift, prod, offset in ((x, mx, yv, 0), (y, my, xu, dx)):
        width = max(1, SLAB_BYTES // (8 * max(n, 1)))
        for start in range(0, a.shape[1], width):
            cols = slice(start, min(a.shape[1], start + width))
            out[offset + cols.start : offset + cols.stop] = (
                _centred(a, everything, cols, shift).T @ prod
            )
    return out


def _first_pair(pair, U: np.ndarray, V: np.ndarray) -> dict:
    """The first pass's partial of a pair of row blocks: the column moments of
    ``[x, y]`` (``n``, ``mean``, ``ss``, ``bad``, ``nan_features``; NaN entries taken
    as 0 and counted per feature), ``HV`` (:func:`_block_cross_times` about the
    block's own means) and ``mu = [mean_xᵀ U, mean_yᵀ V]`` for the merge."""
    x, y = pair
    dx = x.shape[1]
    moms = [block_moments(np.asarray(a), with_gram=False) for a in (x, y)]
    out = {
        "n": moms[0]["n"],
        "bad": 0,
        "mean": np.concatenate([m["mean"] for m in moms]),
        "ss": np.concatenate([m["ss"] for m in moms]),
        "nan_features": np.concatenate(
            [
                np.asarray(m.get("nan_features", np.zeros(a.shape[1], dtype=np.int64)))
                for m, a in zip(moms, (x, y), strict=True)
            ]
        ),
    }
    out["bad"] = int(
        sum(m["bad"] for m in moms) - out["nan_features"].sum()
    )  # inf only
    mx, my = out["mean"][:dx], out["mean"][dx:]
    out["HV"] = _block_cross_times(x, y, U, V, mx, my)
    out["mu"] = (mx @ U, my @ V)
    return out


def _merge_cross_partials(parts: list, dx: int) -> dict:
    """The partials of consecutive blocks merged left to right: moments by Chan's
    update, ``HV`` by the same update applied to the products,
    ``+ w [δ_x (δ_yᵀ V); δ_y (δ_xᵀ U)]`` with ``δᵀ U``, ``δᵀ V`` from the carried
    ``mu``."""
    acc = dict(parts[0])
    acc["HV"] = acc["HV"].copy()
    for b in parts[1:]:
        na, nb = acc["n"], b["n"]
        hv = acc["HV"]
        merged = merge_moments(
            {k: acc[k] for k in ("n", "mean", "ss", "bad")},
            {k: b[k] for k in ("n", "mean", "ss", "bad")},
        )
        mx, my = (acc["mean"][:dx], b["mean"][:dx]), (acc["mean"][dx:], b["mean"][dx:])
        mu, mv = (acc["mu"][0], b["mu"][0]), (acc["mu"][1], b["mu"][1])
        merge_centred_product(hv[:dx], b["HV"][:dx], mx, mv, na, nb)  # C V
        merge_centred_product(hv[dx:], b["HV"][dx:], my, mu, na, nb)  # Cᵀ U
        merged["mu"] = (merged_mean(*mu, na, nb), merged_mean(*mv, na, nb))
        merged["nan_features"] = acc["nan_features"] + b["nan_features"]
        merged["HV"] = hv
        acc = merged
    return acc


def _pairs(X: da.Array, Y: da.Array) -> list:
    """The aligned row panels of ``X`` and ``Y`` as pairs of ``Delayed`` objects."""
    return list(zip(_blocks(X), _blocks(Y), strict=True))


def moments_and_cross_times(
    X: da.Array, Y: da.Array, U: np.ndarray, V: np.ndarray, *, split_every: int = 8
) -> dict:
    """One pass over both fields (aligned row panels, :func:`aligned_panels`): the
    column moments of ``[X, Y]`` (``n``, ``mean``, ``ss`` — centred sums of squares
    —, ``bad`` — infinite entries —, ``nan_features`` — NaN per feature, which enter
    as 0) and ``HV``, ``[C V; Cᵀ U]`` with ``C = X_cᵀ Y_c`` ((d_x + d_y) × l)."""
    dx = X.shape[1]
    Ud = passes.shared(np.ascontiguousarray(U, dtype=np.float64))
    Vd = passes.shared(np.ascontiguousarray(V, dtype=np.float64))
    graph = passes.reduce_blocks(
        _pairs(X, Y),
        _first_pair,
        None,
        Ud,
        Vd,
        split_every=split_every,
        merge_all=lambda parts: _merge_cross_partials(parts, dx),
    )
    (out,) = passes.compute(graph, name="moments+cross")
    out.pop("mu")
    return out


def cross_times(
    X: da.Array,
    Y: da.Array,
    U: np.ndarray,
    V: np.ndarray,
    mean_x: np.ndarray,
    mean_y: np.ndarray,
    *,
    split_every: int = 8,
) -> np.ndarray:
    """One pass over both fields: ``[C V; Cᵀ U]`` ((d_x + d_y) × l), ``C`` the cross
    products of the fields centred by ``mean_x`` and ``mean_y``, each pair of row
    panels' four products in one task, the partials summed in a tree."""
    args = [
        passes.shared(np.ascontiguousarray(a, dtype=np.float64))
        for a in (U, V, mean_x, mean_y)
    ]
    graph = passes.reduce_blocks(
        _pairs(X, Y),
        _pair_times,
        None,
        *args,
        split_every=split_every,
        merge_all=passes.sum_parts,
    )
    (out,) = passes.compute(graph, name="cross")
    return out


def _pair_times(pair, U, V, mx, my) -> np.ndarray:
    return _block_cross_times(pair[0], pair[1], U, V, mx, my)
