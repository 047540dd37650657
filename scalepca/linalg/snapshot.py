"""The snapshot method (Sirovich 1987) for data with far fewer samples than features.

When n ≪ d (900 monthly maps of a million grid cells; a few thousand cells of 30,000
genes), the n × n sample Gram ``Xc Xcᵀ = Σ_c Xc[:, c] Xc[:, c]ᵀ`` is a sum over column
strips: each strip (all rows, some features) is centred by its own column means — exact,
the strip holds whole columns — and multiplied where it lives; only n × n partials
travel. Its eigendecomposition ``Xc Xcᵀ = U Σ² Uᵀ`` on the client gives every eigenvalue
of the covariance (``Σ²/(n − 1)``), and one more pass gives the axes ``V = Xcᵀ U Σ⁻¹``,
strip by strip. Two passes, exact to float64 like LAPACK on the covariance.

Memory per worker: one strip (n × width, at most :data:`STRIP_BYTES` when the
features are regrouped) and the n × n partials of a merge (:func:`gram_fan_in`:
within :data:`MERGE_BYTES`, 2 GiB, from 4 partials down to 2 at n = 10,000).
``scipy.sparse`` strips stay sparse and are centred implicitly
(``x xᵀ − (x μ) 1ᵀ − 1 (x μ)ᵀ + |μ|² 1 1ᵀ``).
"""

from __future__ import annotations

from collections.abc import Callable

import dask
import dask.array as da
import numpy as np

from .._validation import is_sparse
from . import passes
from .moments import feature_scale

__all__ = [
    "STRIP_BYTES",
    "column_strips",
    "holds_whole_columns",
    "sample_gram_times",
    "snapshot_components",
    "snapshot_gram",
    "snapshot_gram_graph",
]

#: largest column strip (all rows × some features) a task holds when features are
#: regrouped
STRIP_BYTES = 128 * 2**20

#: strips of the input (one row chunk) are kept up to this many times
#: :data:`STRIP_BYTES` (e.g. 10,000 × 2,880 float32 store chunks, 230 MB as float64),
#: split beyond
KEEP_STRIPS = 4


def column_strips(X: da.Array, strip_bytes: int = STRIP_BYTES) -> da.Array:
    """``X`` with all rows in one chunk and column chunks of at most ``strip_bytes``
    (the input's own column chunks when they are smaller). Data already in strips
    (one row chunk) keep them up to ``KEEP_STRIPS × strip_bytes`` (as float64): a
    store chunked along space is read as its own chunks, each once. Wider blocks of
    such data are only split, into equal parts, never regrouped: every strip is cut
    from one block of the input, so no task waits on two (a regrouping rechunk of a
    10 GB field, 2,880 columns a block into 1,677 a strip, held blocks for two
    consumers each and exhausted 8 GiB workers)."""
    n = X.shape[0]
    # a sparse strip's size is its stored values: keep the input's columns
    if is_sparse(X):
        return X if len(X.chunks[0]) == 1 else X.rechunk({0: -1})
    width = max(1, strip_bytes // max(1, n * max(X.dtype.itemsize, 8)))
    if len(X.chunks[0]) != 1:
        return X.rechunk({0: -1, 1: min(max(X.chunks[1]), width)})
    if max(X.chunks[1]) <= KEEP_STRIPS * width:
        return X
    cols = []
    for c in X.chunks[1]:
        parts = -(-c // width)
        base, extra = divmod(c, parts)
        cols.extend([base + 1] * extra + [base] * (parts - extra))
    return X.rechunk({1: tuple(cols)})


def holds_whole_columns(X) -> bool:
    """Whether every block of ``X`` holds all its rows and there are several column
    chunks (a field chunked along space with every time step in each chunk): the
    layout the wide solvers read as column strips, never as row panels (that
    regrouping would be an all-to-all rechunk of the whole array)."""
    chunks = getattr(X, "chunks", None)
    return chunks is not None and len(chunks[0]) == 1 and len(chunks[1]) > 1


def _is_sparse_block(x) -> bool:
    import scipy.sparse

    return scipy.sparse.issparse(x)


def _fill_strip(x, missing, nan_at, centre: np.ndarray, keep: np.ndarray):
    """The strip with its missing values at their column's ``centre`` (0 once centred)
    and the columns left out set to 0 (``missing``: dense mask; ``nan_at``: the stored
    NaN of a CSR strip, whose non-finite values are already 0)."""
    if _is_sparse_block(x):
        if nan_at is not None and nan_at.any():
            x.data[nan_at] = centre[x.indices[nan_at]]
        return x if keep.all() else x.multiply(keep[None, :].astype(np.float64)).tocsr()
    if missing is not None and missing.any():
        x = np.where(missing, centre, x)
    return x if keep.all() else np.where(keep, x, 0.0)


def _strip_stats(x, standardize, centre: bool):
    """Column statistics of one strip and the (sparse or dense float64) strip cleaned
    of non-finite values and divided by its scales: ``(stats, x, shift)``, ``shift``
    the mean to take out of ``x`` (zero when not centring). ``standardize``: False,
    True, the strip's column weights (standardised before the weights, by
    :func:`~scalepca.linalg.feature_scale`) or a rule
    ``standardize(n, stats) → (centre, scale, keep)`` of the strip's own moments
    (e.g. :func:`~scalepca.linalg.alleles.strip_scaling`): missing values at the
    centre, columns not kept at 0."""
    n, w = x.shape
    rule = callable(standardize)
    missing = nan_at = None  # the NaN of a dense strip; those stored in a CSR strip
    if _is_sparse_block(x):
        x = x.tocsr().astype(np.float64)
        finite = np.isfinite(x.data)
        nan_at = np.isnan(x.data)
        nanf = np.bincount(x.indices[nan_at], minlength=w)
        bad = int(finite.size - np.count_nonzero(finite))
        if bad:
            x.data[~finite] = 0.0
        mean = np.asarray(x.sum(axis=0)).ravel() / max(n, 1)
        ss = np.asarray(x.multiply(x).sum(axis=0)).ravel() - n * mean**2
    else:
        x = np.asarray(x, dtype=np.float64)
        finite = np.isfinite(x)
        bad = int(x.size - np.count_nonzero(finite))
        nanf = np.isnan(x).sum(axis=0) if bad else np.zeros(w, dtype=np.int64)
        if bad:
            x = np.where(finite, x, 0.0)
            missing = ~finite
        mean = x.mean(axis=0) if n else np.zeros(w)
        ss = ((x - mean) ** 2).sum(axis=0)
    scale = np.ones(w)
    if rule:  # the moments above are of the zero-filled strip
        stats = {"mean": mean, "ss": ss, "bad": bad, "nan_features": nanf}
        centre_g, scale, keep = standardize(n, stats)
        x = _fill_strip(x, missing, nan_at, centre_g, keep)
        stats = {**stats, "scale": scale, "centre": centre_g}
        return stats, _divided(x, scale), centre_g / scale
    scaled = standardize is not False
    if scaled:  # constant to rounding against the strip's largest: scale 1
        weights = None if standardize is True else standardize
        scale, _ = feature_scale(ss / max(n, 1), weights)
    stats = {"mean": mean, "ss": ss, "bad": bad, "nan_features": nanf, "scale": scale}
    shift = mean / scale if centre else np.zeros(w)
    if scaled:
        x = _divided(x, scale)
    return stats, x, shift


def _divided(x, scale: np.ndarray):
    """The strip's columns divided by ``scale`` (a CSR strip stays CSR)."""
    if _is_sparse_block(x):
        return x.multiply(1.0 / scale).tocsr()
    return x / scale


def _centred_times(x, shift, M):
    """``(x − 1 shiftᵀ) M`` for a strip and a w × m matrix ``M``."""
    return np.asarray(x @ M) - (shift @ M)[None, :]


def _strip_gram(x, standardize, centre: bool) -> dict:
    stats, x, shift = _strip_stats(x, standardize, centre)
    if _is_sparse_block(x):
        xs = np.asarray(x @ shift)
        G = (x @ x.T).toarray() - xs[:, None] - xs[None, :] + float(shift @ shift)
    else:
        c = x - shift
        G = c @ c.T
    return {**stats, "G": G}


def _merge_strips(parts: list) -> dict:
    """Strips side by side (left to right): per-feature statistics joined, Grams
    (``G``) or Gram products (``KU``) summed into one new array (the parts' own are
    never written: a part may be read again)."""
    out = {
        name: np.concatenate([p[name] for p in parts])
        for name in ("mean", "ss", "nan_features", "scale", "centre")
        if name in parts[0]
    }
    out["bad"] = sum(p["bad"] for p in parts)
    for name in ("G", "KU"):
        if name in parts[0]:
            out[name] = passes.sum_parts([p[name] for p in parts])
    return out


#: bytes of n × n partials one merge of the sample Gram may hold (its inputs and its
#: sum)
MERGE_BYTES = 2 * 2**30


def gram_fan_in(n: int) -> int:
    """Partials per merge of n × n Grams: 4, fewer when ``fan-in + 1`` of them exceed
    :data:`MERGE_BYTES` (at n = 10,000 a partial is 800 MB: merges of 2), never below
    2."""
    return max(2, min(4, MERGE_BYTES // (8 * n * n) - 1))


def snapshot_gram(
    X: da.Array,
    *,
    centre: bool = True,
    standardize: bool | np.ndarray | Callable = False,
) -> dict:
    """One pass: the n × n Gram of the centred (standardised) rows, ``G``, and per
    feature ``mean``, ``ss`` (centred sum of squares), ``nan_features``, ``scale`` (ones
    unless ``standardize``), plus ``n`` and ``bad``. Non-finite entries are counted and
    taken as 0.

    ``standardize`` a rule ``(n, stats) → (centre, scale, keep)`` (e.g. allele counts'
    :func:`~scalepca.linalg.alleles.strip_scaling`): each strip mapped by the centre and
    scale the rule gives from the strip's own columns, missing values at the centre,
    columns not kept at 0; the output adds the per-column ``centre``. The moments are
    those of the zero-filled data. ``standardize`` an
    array: the column weights ``X`` was multiplied by; the scales are those of the
    unweighted data (standardised, then weighted:
    :func:`~scalepca.linalg.feature_scale`)."""
    (out,) = passes.compute(
        snapshot_gram_graph(X, centre=centre, standardize=standardize),
        name="sample gram",
    )
    out["n"] = X.shape[0]
    if not out["bad"]:
        out.pop("nan_features")
    return out


def snapshot_gram_graph(
    X: da.Array,
    *,
    centre: bool = True,
    standardize: bool | np.ndarray | Callable = False,
):
    """The ``Delayed`` of :func:`snapshot_gram`'s pass (without ``n``), to compute with
    others in one pass (e.g. the Grams of two fields)."""
    X = column_strips(X)
    strips = X.to_delayed(optimize_graph=True).ravel().tolist()
    # only n × n partials travel, at most gram_fan_in(n) + 1 of them in a merge
    return passes.reduce_blocks(
        strips,
        _strip_gram,
        None,
        centre,
        per_block=_per_strip(standardize, X.chunks[1]),
        split_every=gram_fan_in(X.shape[0]),
        merge_all=_merge_strips,
    )


def _per_strip(standardize, widths) -> list:
    """Each strip's ``standardize`` (see :func:`_strip_stats`): its slice of the column
    weights when ``standardize`` holds them, else the same for every strip."""
    if not isinstance(standardize, np.ndarray):
        return [standardize] * len(widths)
    ends = np.cumsum((0, *widths))
    return [standardize[a:b] for a, b in zip(ends[:-1], ends[1:], strict=True)]


# -- the sample Gram as an operator: block Krylov on strips ----------------------------
def _strip_times(x, standardize, centre: bool, U: np.ndarray, with_stats: bool):
    """``c (cᵀ U)`` (n × l) of one strip, ``c`` the strip centred (and standardised, or
    mapped by a rule) by :func:`_strip_stats` in this task — exact, the strip holds
    whole columns. A sparse strip stays sparse: ``y = xᵀU − shift (1ᵀU)``,
    ``x y − 1 (shiftᵀ y)``. ``with_stats``: the strip's column statistics too, as a dict
    with the product ``KU``."""
    stats, x, shift = _strip_stats(x, standardize, centre)
    if _is_sparse_block(x):
        y = np.asarray(x.T @ U) - np.outer(shift, U.sum(axis=0))
        KU = np.asarray(x @ y) - (shift @ y)[None, :]
    else:
        # centred explicitly (a copy: the block may be the store's or a persisted one)
        if shift.any():
            x = x - shift
        KU = x @ (x.T @ U)
    if with_stats:
        return {**stats, "KU": KU}
    return KU


def sample_gram_times_graph(
    X: da.Array,
    U: np.ndarray,
    *,
    centre: bool = True,
    standardize: bool | np.ndarray | Callable = False,
    with_stats: bool = False,
):
    """The ``Delayed`` of one pass of the sample Gram operator ``K U = Xc Xcᵀ U`` (n ×
    l) over the column strips of ``X`` (``Xc`` centred and standardised or mapped by a
    rule as by :func:`snapshot_gram`): each strip's two products in its task, n × l
    partials summed in a tree. ``with_stats``: a dict with the statistics
    :func:`snapshot_gram` gives (``n`` aside) and ``KU``; else the n × l product alone.

    Every pass centres (and scales) each strip anew from its own columns rather than
    receiving the first pass's means: the few column sums cost a fraction of the two
    n × w × l products, no d-long vectors travel with the pass, and every pass applies
    bit for bit the same map the first one measured (a rule's centres included)."""
    X = column_strips(X)
    strips = X.to_delayed(optimize_graph=True).ravel().tolist()
    Ud = passes.shared(np.ascontiguousarray(U, dtype=np.float64))
    merge = _merge_strips if with_stats else passes.sum_parts
    return passes.reduce_blocks(
        strips,
        _strip_times,
        None,
        centre,
        Ud,
        with_stats,
        per_block=_per_strip(standardize, X.chunks[1]),
        split_every=4,
        merge_all=merge,
    )


def sample_gram_times(
    X: da.Array,
    U: np.ndarray,
    *,
    centre: bool = True,
    standardize: bool | np.ndarray | Callable = False,
    with_stats: bool = False,
):
    """One pass: :func:`sample_gram_times_graph` computed; with ``with_stats``, the dict
    gains ``n`` and loses ``nan_features`` when nothing was non-finite (as
    :func:`snapshot_gram`)."""
    (out,) = passes.compute(
        sample_gram_times_graph(
            X, U, centre=centre, standardize=standardize, with_stats=with_stats
        ),
        name="moments+sample gram" if with_stats else "sample gram",
    )
    if with_stats:
        out["n"] = X.shape[0]
        if not out["bad"]:
            out.pop("nan_features")
    return out


def _strip_components(x, mean, scale, U, inv_s, centre: bool, fill: bool = False):
    """``((x − 1 μᵀ) D⁻¹)ᵀ U Σ⁻¹`` of one strip, as k × w (``fill``: a non-finite
    entry is a missing value at its column's ``mean``, else 0)."""
    if _is_sparse_block(x):
        x = x.tocsr().astype(np.float64)
        bad = ~np.isfinite(x.data)
        x.data[bad] = mean[x.indices[bad]] if fill else 0.0
    else:
        x = np.asarray(x, dtype=np.float64)
        x = np.where(np.isfinite(x), x, mean if fill else 0.0)
    xtU = np.asarray(x.T @ U)
    if centre:
        xtU -= np.outer(mean, U.sum(axis=0))
    return (xtU / scale[:, None] * inv_s).T


def snapshot_components(
    X: da.Array, U: np.ndarray, s: np.ndarray, gram: dict, *, centre: bool = True
) -> np.ndarray:
    """One pass: the axes ``Vᵀ = Σ⁻¹ Uᵀ Xc D⁻¹`` (k × d) from the left singular
    vectors ``U`` (n × k) and singular values ``s`` of the (standardised) centred
    data; ``gram`` is the output of :func:`snapshot_gram` (means and scales per
    feature; with its rule's ``centre``, missing calls are set to it). A zero
    singular value gives a zero axis."""
    fill = "centre" in gram
    means = gram["centre"] if fill else gram["mean"]
    X = column_strips(X)
    inv_s = np.divide(1.0, s, out=np.zeros_like(s), where=s > 0)
    bounds = np.cumsum((0,) + X.chunks[1])
    Ud, inv_sd = (
        passes.shared(U),
        passes.shared(inv_s),
    )  # one key each, not a copy per task
    parts = []
    for j, strip in enumerate(X.to_delayed().ravel()):
        sl = slice(bounds[j], bounds[j + 1])
        parts.append(
            dask.delayed(_strip_components, pure=True)(
                strip, means[sl], gram["scale"][sl], Ud, inv_sd, centre, fill
            )
        )
    return np.hstack(passes.compute(*parts, name="components"))
