"""Kernels of the one-pass bootstrap: Poisson row weights by global row index, weighted
moments of many replicates at once, and the replicates' spectra from one sample Gram.

The Poisson bootstrap (Hanley & MacGibbon, 2006; Chamandy et al., 2012) gives every row
of replicate ``b`` an independent weight ``w_ib ~ Poisson(1)`` instead of drawing n rows
with replacement: a row's weight depends on the row alone, so every row block can weigh
its own rows where it lives, in the pass that fits the model, and the replicates'
statistics are merged like any other moments. Here the weight is a function of
``(seed, global row index, replicate)`` only (a counter-based hash, SplitMix64, mapped
to Poisson(1) by its inverse distribution function), so the weights, and every result,
do not depend on the chunking, the number of workers or the order the blocks are read
in.

Two ways to the replicates' eigenvalues:

- row blocks (n ≫ d): :func:`weighted_block_moments` gives each replicate's weight
  total, weighted mean and weighted centred Gram (B × d × d), merged by
  :func:`merge_weighted` (the weighted parallel update of Chan et al.); each replicate's
  covariance is decomposed on the client.
- the sample Gram (n ≪ d): with ``P_w = I − 1 wᵀ / W`` (weighted centring,
  ``P_w 1 = 0``), the weighted centred data are ``P_w X_c`` whatever centre ``X_c``
  had, so the nonzero eigenvalues of a replicate's covariance are those of the n × n
  matrix ``D^½ P_w G P_wᵀ D^½ / (W − 1)`` (``G = X_c X_cᵀ``, ``D = diag(w)``,
  :func:`replicate_gram`): every replicate follows from the one Gram of the fit, on
  the client, and its EOFs ``X_cᵀ P_wᵀ D^½ U_b Λ_b^{-½}`` from the fit's own
  components pass.
"""

from __future__ import annotations

import math

import numpy as np

from .decomp import leading_eigh

__all__ = [
    "covariance_replicates",
    "gram_replicates",
    "merge_weighted",
    "poisson_weights",
    "replicate_gram",
    "strip_replicate_components",
    "weighted_block_moments",
]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: Poisson(1)'s distribution function at 0, 1, ..., 24 (beyond 24: below 2⁻⁵³)
_POISSON1_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(25)])


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 that mixes every bit."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def poisson_weights(seed: int, rows: np.ndarray, n_replicates: int) -> np.ndarray:
    """Poisson(1) weights (len(rows) × n_replicates, float64) of the rows with the
    global indices ``rows``: a function of ``(seed, row, replicate)`` only."""
    rows = np.asarray(rows, dtype=np.uint64)
    b = np.arange(n_replicates, dtype=np.uint64)
    with np.errstate(over="ignore"):
        key = _splitmix64(np.uint64(seed % 2**64) * _GOLDEN + _GOLDEN)
        counter = rows[:, None] * np.uint64(n_replicates) + b[None, :]
        h = _splitmix64(counter * _GOLDEN + key)
    u = (h >> np.uint64(11)).astype(np.float64) * 2.0**-53  # uniform on [0, 1)
    return np.searchsorted(_POISSON1_CDF, u, side="right").astype(np.float64)


def weighted_block_moments(
    x,
    row0: int,
    seed: int,
    n_replicates: int,
    replicates: range | None = None,
    plain: bool = True,
) -> dict:
    """The moments of one row block (rows ``row0 …`` of the matrix) for the fit and
    for every replicate: ``n``, ``mean``, ``m2`` (centred Gram, d × d) of the block
    as it is, and per replicate ``W`` (B,), ``wmean`` (B × d), ``wm2`` (B × d × d,
    weighted centred Gram). Non-finite entries count as 0 (the caller refuses or
    leaves out their features); their count per feature is ``nan``. ``replicates``:
    only these of the ``n_replicates`` (weighted as in the whole set);
    ``plain=False``: without ``n``, ``mean``, ``m2``."""
    x = np.asarray(x, dtype=np.float64)
    r, d = x.shape
    nan = np.isnan(x).sum(axis=0)
    if not np.isfinite(x).all():
        x = np.where(np.isfinite(x), x, 0.0)
    mean = x.mean(axis=0) if r else np.zeros(d)
    xc = x - mean
    reps = range(n_replicates) if replicates is None else replicates
    w = poisson_weights(seed, np.arange(row0, row0 + r), n_replicates)
    w = w[:, reps.start : reps.stop]
    W = w.sum(axis=0)
    m = np.divide(
        w.T @ xc, W[:, None], out=np.zeros((len(reps), d)), where=W[:, None] > 0
    )
    wm2 = np.empty((len(reps), d, d))
    for b in range(len(reps)):
        y = xc - m[b]
        wm2[b] = (y * w[:, b, None]).T @ y
    out = {"nan": nan, "W": W, "wmean": m + mean, "wm2": wm2}
    if plain:
        out.update(n=r, mean=mean, m2=xc.T @ xc)
    return out


def merge_weighted(a: dict, b: dict) -> dict:
    """Chan et al.'s parallel update of two partials of
    :func:`weighted_block_moments`, for the plain moments and every replicate's
    weighted ones (consecutive blocks, left to right). ``a``'s Gram arrays are
    updated in place (B · d² values: a copy would double a worker's memory); partials
    are made for this merge and read by it alone."""
    out = {"nan": a["nan"] + b["nan"]}
    for n_, mean_, m2_ in (("n", "mean", "m2"), ("W", "wmean", "wm2")):
        if n_ not in a:  # a replicate group's partial without the plain moments
            continue
        na, nb = (
            np.asarray(a[n_], dtype=np.float64),
            np.asarray(b[n_], dtype=np.float64),
        )
        n = na + nb
        delta = np.asarray(b[mean_] - a[mean_])
        frac = np.divide(nb, n, out=np.zeros_like(n), where=n > 0)
        f = np.divide(na * nb, n, out=np.zeros_like(n), where=n > 0)
        m2 = a[m2_]
        m2 += b[m2_]
        if delta.ndim > 1:  # one row per replicate
            m2 += np.einsum("b,bi,bj->bij", f, delta, delta)
            out[mean_] = a[mean_] + delta * frac[:, None]
        else:
            m2 += f * np.outer(delta, delta)
            out[mean_] = a[mean_] + delta * frac
        out[n_], out[m2_] = a[n_] + b[n_], m2
    return out


def replicate_gram(G: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``D^½ P_w G P_wᵀ D^½`` (n × n) of one replicate's weights ``w`` (n,) from the
    centred sample Gram ``G``: its eigenvalues are those of the replicate's weighted
    centred Gram ``Σ_i w_i (x_i − x̄_w)(x_i − x̄_w)ᵀ`` (the nonzero ones)."""
    W = w.sum()
    Gw = G @ w / W  # (G w) / W
    PGP = G - Gw[:, None] - Gw[None, :] + float(w @ Gw) / W
    s = np.sqrt(w)
    return s[:, None] * PGP * s[None, :]


def strip_replicate_components(x, mean, coef, k: int, q: tuple) -> np.ndarray:
    """One column strip's share of the fit's EOFs and of the replicates' EOF summaries.

    ``coef`` (n × (1 + B)·k): the fit's ``U Σ⁻¹`` then each replicate's
    ``P_wᵀ D^½ U_b Λ_b^{-½}`` (signs already matched to the fit), so that
    ``X_cᵀ coef`` are the EOFs. Returns (4·k × w): the fit's EOFs, the replicates'
    ``q`` percentiles (lower, upper) and their standard deviation, per mode and
    feature.
    """
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        x = np.where(np.isfinite(x), x, 0.0)
    V = (x - mean).T @ coef  # w × (1 + B)·k
    w = V.shape[0]
    fit = V[:, :k].T
    reps = V[:, k:].T.reshape(-1, k, w)  # B × k × w
    lo, hi = np.percentile(reps, q, axis=0)
    return np.concatenate([fit, lo, hi, reps.std(axis=0, ddof=1)])


#: the most bytes of stacked matrices decomposed in one call
BATCH_BYTES = 256 * 2**20


def _eigh_descending(mats: np.ndarray):
    """Eigenpairs of a stack of symmetric matrices, largest first (negative rounding
    → 0). Small matrices run one BLAS thread each: their decompositions gain nothing
    from threads, and lose much to thread start-up when the cores are shared."""
    from threadpoolctl import threadpool_limits

    if mats.shape[-1] <= 256:
        with threadpool_limits(limits=1):
            vals, vecs = np.linalg.eigh(mats)
    else:
        vals, vecs = np.linalg.eigh(mats)
    return vals[..., ::-1].clip(min=0.0), vecs[..., ::-1]


#: from this side on, a replicate's leading eigenpairs come from ARPACK (a few dozen
#: products with the n × n matrix) rather than a full decomposition (n³ each)
PARTIAL_EIGH_SIDE = 512


def _leading_eigh(mats: np.ndarray, m: int):
    """The ``m`` leading eigenpairs of each matrix of a stack, largest first: all of
    them by LAPACK for small sides, the ``m`` wanted by ARPACK (to machine precision)
    for large."""
    side = mats.shape[-1]
    if side < PARTIAL_EIGH_SIDE or m >= side - 1:
        vals, vecs = _eigh_descending(mats)
        return vals[:, :m], vecs[:, :, :m]
    vals = np.empty((len(mats), m))
    vecs = np.empty((len(mats), side, m))
    for i, M in enumerate(mats):
        lam, vecs[i] = leading_eigh(M, m)  # a fixed start: no draw changes the result
        vals[i] = lam.clip(min=0.0)
    return vals, vecs


def _batches(B: int, side: int, nbytes: int = BATCH_BYTES):
    """Consecutive ranges of the B replicates: each one's side × side matrices fill at
    most ``nbytes`` (at least one matrix a range)."""
    size = max(1, nbytes // (8 * side * side))
    return [range(i, min(B, i + size)) for i in range(0, B, size)]


def gram_replicates(G: np.ndarray, w_all: np.ndarray, k: int, fit_scores: np.ndarray):
    """Every replicate's leading ``k + 1`` eigenvalues, total variance and EOF
    coefficients from the centred sample Gram ``G`` (n × n) and the weights ``w_all`` (n
    × B).

    Returns ``(lam (B, k+1), total (B,), coef (n, B·k))``: ``X_cᵀ coef`` are the
    replicates' EOFs, each signed so that it points the way of the fit's
    (``fit_scores`` = ``X_c V``).
    """
    n, B = w_all.shape
    lam, total, coefs = [], [], []
    for batch in _batches(B, n):
        w = w_all[:, batch].T  # b × n
        M = np.stack([replicate_gram(G, wb) for wb in w])
        theta, U = _leading_eigh(M, k + 1)
        W = w.sum(axis=1)
        lam.append(theta[:, : k + 1] / (W - 1)[:, None])
        total.append(np.trace(M, axis1=1, axis2=2) / (W - 1))
        A = np.sqrt(w)[:, :, None] * U[:, :, :k]  # D^½ U_b
        A = A - w[:, :, None] * (A.sum(axis=1) / W[:, None])[:, None, :]  # P_wᵀ
        A = A / np.sqrt(np.where(theta[:, None, :k] > 0, theta[:, None, :k], 1.0))
        A = A * np.sign(np.einsum("bik,ik->bk", A, fit_scores))[:, None, :]
        coefs.append(A)
    A = np.concatenate(coefs)  # B × n × k
    return (
        np.concatenate(lam),
        np.concatenate(total),
        A.transpose(1, 0, 2).reshape(n, B * k),
    )


def covariance_replicates(
    wm2: np.ndarray, W: np.ndarray, keep: np.ndarray, k: int, components: np.ndarray
):
    """Every replicate's leading ``k + 1`` eigenvalues, total variance and EOFs (B ×
    k × d_kept, signed as ``components``, k × d_kept) from the weighted centred Grams
    ``wm2`` (B × d × d)."""
    B = wm2.shape[0]
    idx = np.flatnonzero(keep)
    lam, total, reps = [], [], []
    for batch in _batches(B, idx.size):
        M = wm2[np.asarray(batch)][:, idx][:, :, idx]
        theta, V = _leading_eigh(M, k + 1)
        Wb = W[np.asarray(batch)]
        lam.append(theta[:, : k + 1] / (Wb - 1)[:, None])
        total.append(np.trace(M, axis1=1, axis2=2) / (Wb - 1))
        Vt = V[:, :, :k].transpose(0, 2, 1)  # b × k × d
        reps.append(Vt * np.sign(np.einsum("bkd,kd->bk", Vt, components))[:, :, None])
    return np.concatenate(lam), np.concatenate(total), np.concatenate(reps)
