"""Kernels of sparse PCA: soft thresholding, the small dictionary problem, the
elastic-net path.

Two formulations share this module.

Dictionary learning (reconstruction), per sample::

    F(Y, D) = (1 / 2n) ‖Xc − Y Dᵀ‖²_F + α ‖D‖₁    subject to (1/n) ‖Y_:j‖² ≤ 1,

with Xc the centred (optionally standardised) data, Y (n × k) the codes and D (d × k)
the sparse dictionary. Everything the alternation needs from the data comes from the
per-sample statistics of the projection ``Z = Xc D`` for the current D::

    P = Xcᵀ Z / n  (d × k),   G = Zᵀ Z / n  (k × k),   s = ‖Xc‖²_F / n.

The exact code step for a fixed D is ``Y = Xc D (DᵀD + Λ)⁻¹`` — a ridge regression of
every row on the dictionary — where the k multipliers Λ ≥ 0 of the column bounds solve a
concave k-dimensional dual (:func:`code_multipliers`). With ``M = DᵀD + Λ`` the code
statistics are ``A = YᵀY / n = M⁻¹ G M⁻¹`` and ``B = XcᵀY / n = P M⁻¹``, and the
dictionary step is block coordinate descent over the columns of D with soft thresholding
(:func:`dictionary_bcd`). :func:`block_code_stats` computes one row block's share of (P,
G, s) where the block lives; :func:`code_stats_graph` reduces them as a tree.

Penalized regression (variance), Zou, Hastie & Tibshirani (2006), in Gram form: every
loading solves ``min βᵀ(S + λ₂ I)β − 2 aᵀ S β + λ₁ ‖β‖₁`` given the covariance S and
the current direction a. :func:`enet_gram_path` follows the LARS-EN (lasso-modified
LARS) path of that problem and stops at a given number of non-zeros or at a given λ₁;
:func:`enet_gram_cd` is coordinate descent for the penalty form (scikit-learn's
compiled solver on the Gram, with the factor ``XᵀX = G`` of :func:`gram_root`).
"""

from __future__ import annotations

from typing import NamedTuple

import dask.array as da
import numpy as np
from scipy import linalg as sla
from scipy.sparse import diags, issparse

from ._enet_lars import HAVE_KERNEL as HAVE_LARS_KERNEL
from ._enet_lars import lars_path
from .passes import reduce_blocks

__all__ = [
    "GramRoot",
    "adjusted_variance",
    "block_code_stats",
    "code_multipliers",
    "code_stats_graph",
    "code_step",
    "dictionary_bcd",
    "dictionary_objective",
    "enet_gram_cd",
    "enet_gram_path",
    "gram_root",
    "merge_code_stats",
    "recentre_code_stats",
    "revive_codes",
    "scale_columns",
    "soft_threshold",
]


def soft_threshold(x, t):
    """``S_t(x) = sign(x) · max(|x| − t, 0)`` elementwise (``t`` ≥ 0, broadcast)."""
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)


# -- per-block sufficient statistics (data side) ---------------------------------------
def block_code_stats(
    x,
    mean: np.ndarray,
    scale: np.ndarray | None,
    D: np.ndarray,
    dtype=np.float64,
    with_sums: bool = False,
) -> dict:
    """Sums over one row block of ``Xc = (x − mean) / scale`` and ``Z = Xc D``.

    Returns ``{"n", "P" = Xcᵀ Z, "G" = Zᵀ Z, "S" = ‖Xc‖²_F}`` in float64, and with
    ``with_sums`` also ``"sum_x" = Xcᵀ 1``, ``"sum_z" = Zᵀ 1`` (they let
    :func:`recentre_code_stats` move the centre afterwards). ``dtype`` is the working
    precision of the products: float64 (default), or float32 for float32 data when
    speed matters more than the last digits (relative error of the sums ~√m · 6e-8
    for an m-row block). Memory: one copy of the block in ``dtype`` plus m × k. A
    ``scipy.sparse`` block is not densified (see :func:`_sparse_code_stats`).
    """
    if issparse(x):
        return _sparse_code_stats(x, mean, scale, D, dtype, with_sums)
    dtype = np.dtype(dtype)
    xc = np.array(x, dtype=dtype, copy=True)  # one copy, centred in place
    xc -= mean.astype(dtype, copy=False)
    if scale is not None:
        xc /= scale.astype(dtype, copy=False)
    Z = xc @ D.astype(dtype, copy=False)
    flat = xc.reshape(-1)
    out = {
        "n": xc.shape[0],
        "P": (xc.T @ Z).astype(np.float64),
        "G": (Z.T @ Z).astype(np.float64),
        "S": float(np.dot(flat, flat)),
    }
    if with_sums:
        out["sum_x"] = xc.sum(axis=0, dtype=np.float64)
        out["sum_z"] = Z.sum(axis=0, dtype=np.float64)
    return out


def _sparse_code_stats(x, mean, scale, D, dtype, with_sums: bool) -> dict:
    """:func:`block_code_stats` of a sparse block ``x``, centred implicitly.

    With ``xs = x / scale`` (column scaling keeps the sparsity), ``c = mean / scale``
    and ``Xc = xs − 1 cᵀ``: ``Z = xs D − 1 (cᵀD)``, ``P = xsᵀZ − c (1ᵀZ)``, by
    sparse–dense products. ``S = ‖Xc‖²`` is summed per entry without cancellation:
    ``(v − c_j)²`` over the stored values ``v`` of column ``j`` and ``c_j²`` for each
    of its ``m − nnz_j`` zeros. Memory: the block, a scaled copy of its stored
    values, and m × k.
    """
    dtype = np.dtype(dtype)
    xs = x.tocsr().astype(dtype)  # a copy: its values are scaled in place
    m, d = xs.shape
    cols = xs.indices
    c = mean.astype(np.float64)
    if scale is not None:
        xs.data /= scale.astype(dtype, copy=False)[cols]
        c = c / scale
    Dd = D.astype(dtype, copy=False)
    e = (c @ D).astype(dtype)
    Z = np.asarray(xs @ Dd)
    Z -= e
    sum_z = Z.sum(axis=0, dtype=np.float64)
    P = np.asarray(xs.T @ Z, dtype=np.float64) - np.outer(c, sum_z)
    dev = xs.data.astype(np.float64) - c[cols]
    nnz = np.bincount(cols, minlength=d)
    S = float(np.dot(dev, dev)) + float(np.dot(m - nnz, c * c))
    out = {"n": m, "P": P, "G": (Z.T @ Z).astype(np.float64), "S": S}
    if with_sums:
        out["sum_x"] = np.asarray(xs.sum(axis=0), dtype=np.float64).ravel() - m * c
        out["sum_z"] = sum_z
    return out


def _scale_block(x, scale):
    scale = scale.ravel()  # this block's columns (a 1 × width block of the scales)
    if issparse(x):
        return x.tocsr() @ diags(1.0 / scale, format="csr")
    return x / scale


def scale_columns(X: da.Array, scale: np.ndarray) -> da.Array:
    """Lazy ``X / scale`` (columns divided by ``scale``), blockwise, for rows or 2-D
    blocks; sparse blocks stay sparse (a product with a diagonal matrix: the stored
    values are scaled, no zero is filled in)."""
    scale = da.from_array(
        np.asarray(scale, dtype=np.float64)[None, :], chunks=((1,), X.chunks[1])
    )  # one row block, X's column blocks
    dtype = np.result_type(X.dtype, np.float64)
    return X.map_blocks(_scale_block, scale, dtype=dtype, meta=X._meta.astype(dtype))


def merge_code_stats(*parts: dict) -> dict:
    """Sum partial statistics (they are all centred at the same mean, so sums are
    exact)."""
    out = dict.fromkeys(parts[0], 0.0)
    for p in parts:
        for key in out:
            out[key] = out[key] + p[key]
    return out


def recentre_code_stats(st: dict, delta: np.ndarray, D: np.ndarray) -> dict:
    """Statistics of :func:`block_code_stats` re-centred at ``mean + delta`` (exact).

    With ``Xc' = Xc − 1 δᵀ`` and ``Z' = Z − 1 eᵀ``, ``e = Dᵀ δ``:
    ``P' = P − sx eᵀ − δ szᵀ + m δ eᵀ``, ``G' = G − e szᵀ − sz eᵀ + m e eᵀ``,
    ``S' = S − 2 δᵀ sx + m ‖δ‖²``.
    """
    m, sx, sz = st["n"], st["sum_x"], st["sum_z"]
    e = D.T @ delta
    return {
        "n": m,
        "P": st["P"] - np.outer(sx, e) - np.outer(delta, sz) + m * np.outer(delta, e),
        "G": st["G"] - np.outer(e, sz) - np.outer(sz, e) + m * np.outer(e, e),
        "S": st["S"] - 2.0 * float(delta @ sx) + m * float(delta @ delta),
        "sum_x": sx - m * delta,
        "sum_z": sz - m * e,
    }


def code_stats_graph(
    blocks,
    mean,
    scale,
    D,
    *,
    split_every: int = 8,
    dtype=np.float64,
    with_sums: bool = False,
):
    """A ``Delayed`` summing :func:`block_code_stats` over ``blocks`` (Delayed row
    blocks) in a tree of fan-in ``split_every``
    (:func:`~scalepca.linalg.passes.reduce_blocks`); only d × k partials travel
    between workers."""
    return reduce_blocks(
        blocks,
        block_code_stats,
        merge_code_stats,
        mean,
        scale,
        D,
        dtype,
        with_sums,
        split_every=split_every,
    )


# -- the code step (client side, k-dimensional) ----------------------------------------
def _inv_spd(M: np.ndarray) -> np.ndarray:
    c, low = sla.cho_factor(M, check_finite=False)
    return sla.cho_solve((c, low), np.eye(M.shape[0]), check_finite=False)


def _code_floor(DtD: np.ndarray) -> float:
    """Smallest multiplier: a ridge of 1e-9 · mean ‖D_:j‖² on the codes, so that
    ``DᵀD + Λ`` stays well conditioned when columns of D are (nearly) collinear."""
    return 1e-9 * max(float(np.trace(DtD)) / max(DtD.shape[0], 1), 1e-300)


def code_multipliers(
    DtD: np.ndarray,
    G: np.ndarray,
    lam0=None,
    *,
    tol: float = 1e-12,
    max_iter: int = 100,
) -> np.ndarray:
    """Multipliers Λ of the code bounds ``(1/n)‖Y_:j‖² ≤ 1``.

    They maximise the concave dual ``h(λ) = −tr(G M⁻¹) − Σ λ_j`` with
    ``M = DᵀD + diag(λ)``, whose gradient is ``diag(M⁻¹ G M⁻¹) − 1`` (the code norms
    minus their bound) and whose Hessian is ``−2 M⁻¹ ∘ (M⁻¹ G M⁻¹)``. Solved by
    projected Newton with backtracking over ``λ ≥ λ_min`` (:func:`_code_floor`, a
    negligible ridge that keeps M invertible). All columns of D must be non-zero (the
    caller drops zero columns, whose codes are 0).
    """
    k = DtD.shape[0]
    floor = _code_floor(DtD)
    lam = np.full(k, floor)
    if lam0 is not None:  # a warm start
        lam = np.maximum(np.asarray(lam0, np.float64), floor)

    def parts(lam):
        Minv = _inv_spd(DtD + np.diag(lam))
        A = Minv @ G @ Minv
        return Minv, A, -float(np.sum(G * Minv)) - float(lam.sum())

    Minv, A, h = parts(lam)
    for _ in range(max_iter):
        g = np.diag(A) - 1.0
        free = (lam > floor) | (g > 0)
        if not free.any() or np.max(np.abs(g[free])) <= tol * max(
            1.0, float(np.max(np.diag(A)))
        ):
            break
        H = -2.0 * Minv * A
        step = np.zeros(k)
        try:
            step[free] = -np.linalg.solve(H[np.ix_(free, free)], g[free])
        except np.linalg.LinAlgError:
            step[free] = g[free]
        t = 1.0
        while True:
            new = np.maximum(lam + t * step, floor)
            try:
                Minv_n, A_n, h_n = parts(new)
            except (np.linalg.LinAlgError, sla.LinAlgError):
                h_n = -np.inf
            if h_n >= h - 1e-15 * abs(h) or t < 1e-12:
                break
            t *= 0.5
        if t < 1e-12:
            break
        lam, Minv, A, h = new, Minv_n, A_n, h_n
    return lam


def _polish_codes(
    K: np.ndarray,
    Q: np.ndarray,
    G: np.ndarray,
    *,
    tol: float = 1e-13,
    max_sweeps: int = 2000,
) -> np.ndarray:
    """Block coordinate descent over the code columns, in the coordinates ``Y = Z K``.

    Column j given the others: ``y_j = R_j d_j / max(‖d_j‖², ‖R_j d_j‖/√n)`` with the
    partial residual ``R_j = Xc − Σ_{l≠j} y_l d_lᵀ``; in terms of ``Z = Xc D`` this
    is ``K_:j = v / max(Q_jj, √(vᵀ G v))``, ``v = e_j − Σ_{l≠j} K_:l Q_lj``
    (``Q = DᵀD``). Always feasible; it converges to the exact code step and leaves an
    exact one in place, so it guards the Newton solution when D has (nearly)
    collinear columns.
    """
    k = K.shape[1]
    # start feasible: scale every column into its bound
    norms = np.sqrt(np.maximum(np.einsum("ij,ik,kj->j", K, G, K), 0.0))
    K = K / np.maximum(norms, 1.0)
    for _ in range(max_sweeps):
        change = 0.0
        for j in range(k):
            v = -K @ Q[:, j]
            v += K[:, j] * Q[j, j]
            v[j] += 1.0
            den = max(Q[j, j], float(np.sqrt(max(v @ G @ v, 0.0))))
            new = v / den
            change = max(change, float(np.max(np.abs(new - K[:, j]))))
            K[:, j] = new
        if change <= tol * max(float(np.max(np.abs(K))), 1e-300):
            break
    return K


def code_step(D: np.ndarray, P: np.ndarray, G: np.ndarray, lam0=None):
    """Exact code step for a fixed D from per-sample statistics ``P``, ``G`` of
    ``Z = Xc D``.

    Returns ``(A, B, lam)``: ``A = YᵀY/n`` (k × k), ``B = XcᵀY/n`` (d × k) for the
    optimal codes ``Y = Xc D M⁻¹``, and the multipliers. Codes of zero columns of D
    are zero.
    """
    d, k = D.shape
    live = np.flatnonzero(np.any(D != 0, axis=0))
    A = np.zeros((k, k))
    B = np.zeros((d, k))
    lam = np.zeros(k)
    if live.size == 0:
        return A, B, lam
    Dl = D[:, live]
    Gl = G[np.ix_(live, live)]
    DtD = Dl.T @ Dl
    lam_l = code_multipliers(DtD, Gl, None if lam0 is None else np.asarray(lam0)[live])
    K = _polish_codes(_inv_spd(DtD + np.diag(lam_l)), DtD, Gl)
    A[np.ix_(live, live)] = K.T @ Gl @ K
    B[:, live] = P[:, live] @ K
    lam[live] = lam_l
    return A, B, lam


def revive_codes(C: np.ndarray, D: np.ndarray, A: np.ndarray, B: np.ndarray):
    """Codes for the zero columns of D from the covariance ``C`` (per sample).

    A zero column leaves its code free (any bounded code gives the same objective).
    Instead of the zero code, the dead columns get the leading principal directions
    ``u_i`` of the residual ``R = Xc − Y Dᵀ`` as codes, ``y_i = R u_i / ‖R u_i‖``
    (per sample; mutually orthogonal), so the next dictionary step can bring a
    component back if the residual carries enough variance. Everything follows from
    ``Cres = C − B Dᵀ − D Bᵀ + D A Dᵀ``. Returns new ``(A, B)``; the objective is
    unchanged.
    """
    live = np.any(D != 0, axis=0)
    dead = np.flatnonzero(~live)
    if dead.size == 0:
        return A, B
    d = len(C)
    A, B = A.copy(), B.copy()
    Dl, Bl, All = D[:, live], B[:, live], A[np.ix_(live, live)]
    Cres = C - Bl @ Dl.T - Dl @ Bl.T + Dl @ All @ Dl.T
    w, V = sla.eigh(0.5 * (Cres + Cres.T), subset_by_index=[d - dead.size, d - 1])
    w, V = w[::-1], V[:, ::-1]
    floor = 1e-12 * max(float(np.trace(C)), 1e-300)
    for i, j in enumerate(dead):
        if w[i] <= floor:
            continue
        u = V[:, i]
        norm = np.sqrt(w[i])
        Du = Dl.T @ u
        A[j, :] = 0.0
        A[:, j] = 0.0
        A[j, j] = 1.0
        A[live, j] = A[j, live] = (Bl.T @ u - All @ Du) / norm
        B[:, j] = (C @ u - Bl @ Du) / norm
    return A, B


def dictionary_objective(D, A, B, s, alpha) -> float:
    """``(1/2n)‖Xc − Y Dᵀ‖² + α‖D‖₁`` from the per-sample code statistics."""
    fit = 0.5 * (s - 2.0 * float(np.sum(D * B)) + float(np.sum((D.T @ D) * A)))
    return max(fit, 0.0) + alpha * float(np.abs(D).sum())


def dictionary_bcd(D, A, B, alpha, *, max_sweeps: int = 100, tol: float = 1e-10):
    """Block coordinate descent on ``½ tr(Dᵀ D A) − tr(Dᵀ B) + α ‖D‖₁`` over the columns
    of D.

    Column ``j`` is minimised exactly given the others:
    ``D_:j ← S_{α/A_jj}(D_:j + (B_:j − D A_:j) / A_jj)``. Columns whose codes vanish
    (``A_jj = 0``) are set to zero. Sweeps stop when the largest change of an entry
    falls below ``tol`` times the largest entry. Returns ``(D, sweeps)``.
    """
    D = np.array(D, dtype=np.float64, copy=True)
    k = D.shape[1]
    sweeps = 0
    while sweeps < max_sweeps:
        sweeps += 1
        change = 0.0
        for j in range(k):
            ajj = A[j, j]
            old = D[:, j].copy()
            if ajj <= 0:
                D[:, j] = 0.0
            else:
                D[:, j] = soft_threshold(
                    old + (B[:, j] - D @ A[:, j]) / ajj, alpha / ajj
                )
            change = max(change, float(np.max(np.abs(D[:, j] - old))))
        scale = float(np.max(np.abs(D))) if D.size else 0.0
        if change <= tol * max(scale, 1e-300):
            break
    return D, sweeps


# -- adjusted explained variance -------------------------------------------------------
def adjusted_variance(gram: np.ndarray) -> np.ndarray:
    """Adjusted variances of Zou, Hastie & Tibshirani (2006): ``R_jj²`` of the QR of the
    scores.

    ``gram`` is the scores' covariance ``Vᵀ S V`` (k × k); ``U = Xc V = Q R`` gives
    ``UᵀU = RᵀR``, so ``R`` is its Cholesky factor and no data pass is needed. Each
    component's variance is what it adds beyond the span of the components before it.
    Zero or dependent components get 0.
    """
    gram = np.asarray(gram, dtype=np.float64)
    k = gram.shape[0]
    R = np.zeros((k, k))
    out = np.zeros(k)
    scale = max(float(np.max(np.abs(np.diag(gram)))), 1e-300) if k else 1.0
    for j in range(k):
        r2 = gram[j, j] - float(R[:j, j] @ R[:j, j])
        if r2 <= 1e-12 * scale:
            if r2 > 0:
                out[j] = r2
            continue  # R_jj = 0: this row of R stays zero
        rjj = np.sqrt(r2)
        R[j, j] = rjj
        R[j, j + 1 :] = (gram[j, j + 1 :] - R[:j, j] @ R[:j, j + 1 :]) / rjj
        out[j] = r2
    return out


# -- elastic net in Gram form ----------------------------------------------------------
def enet_gram_path(
    G: np.ndarray,
    b: np.ndarray,
    *,
    n_nonzero: int | None = None,
    lam1: float | None = None,
    max_steps: int | None = None,
) -> np.ndarray:
    """Solution of ``min βᵀ G β − 2 bᵀ β + λ₁ ‖β‖₁`` on the lasso-modified LARS path.

    ``G`` is positive definite (``S + λ₂ I`` for LARS-EN). The path starts at β = 0 (λ₁
    = 2 max|b|) and is piecewise linear in λ₁; along it the active correlations
    ``c = b − G β`` satisfy ``|c_A| = λ₁ / 2``. A coefficient that crosses zero leaves
    the active set (the lasso modification). Stop rules:

    * ``n_nonzero`` — the end of the last stretch of the path with exactly that many
      non-zeros, i.e. just before the next variable enters (the smallest λ₁ with that
      count);
    * ``lam1`` — the point of the path at that penalty.

    With neither, the path is followed to λ₁ = 0 (the ridge solution ``G⁻¹ b``).

    Why not scikit-learn's ``lars_path_gram(Xy=b, Gram=G, n_samples=1, method="lasso")``
    (the same path at ``λ₁ = 2 alpha``)? Away from ties the two agree to 1e-8 (the test
    suite checks it), but scikit-learn's LARS adds one variable per step, and on exactly
    tied variables — Zou, Hastie & Tibshirani's example, blocks of identical columns —
    its path drifts: followed to λ₁ = 0 (no ridge) it misses the principal axes by up to
    7e-3 relative (tried; the exact 0.5 loadings at four non-zeros were missed too, with
    a tie-aware stop on its breakpoints). Tied variables enter together here.

    With numba installed the same steps run compiled (:mod:`scalepca.linalg._enet_lars`;
    the tests compare the two).
    """
    G = np.asarray(G, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = b.shape[0]
    if n_nonzero is not None and n_nonzero >= d:
        n_nonzero = None  # every variable: go to the end of the path (λ₁ = 0 or lam1)
    target = 0.0 if lam1 is None else lam1 / 2.0
    max_steps = 8 * d + 8 if max_steps is None else max_steps
    if HAVE_LARS_KERNEL:  # the same steps, compiled
        return lars_path(G, b, n_nonzero, target, max_steps)
    beta = np.zeros(d)
    c = b.copy()
    chat = float(np.max(np.abs(c))) if d else 0.0
    if chat <= target:
        return beta
    eps = 1e-12 * max(chat, 1e-300)
    tie = (
        1e-9 * chat
    )  # correlations this close to the maximum enter together (exact ties)
    active: list[int] = [int(i) for i in np.flatnonzero(np.abs(c) >= chat - tie)]
    if n_nonzero is not None and len(active) > n_nonzero:
        return (
            beta  # tied variables cannot be split: no point of the path has that count
        )
    inactive = np.ones(d, dtype=bool)
    inactive[active] = False
    for _ in range(max_steps):
        A, w, a = _lars_direction(G, c, active)
        t_enter, j_enter = _entry_step(c, a, chat, inactive, eps)
        t_drop, m = _drop_step(beta[A], w, eps)
        t_end = chat - target
        t = min(t_enter, t_drop, t_end)
        stop_here = (
            n_nonzero is not None
            and t == t_enter
            and t_enter < t_drop
            and len(active) >= n_nonzero
        )
        beta[A] += t * w
        c -= t * a
        chat -= t
        if t == t_end or stop_here or (t_enter == np.inf and t_drop == np.inf):
            break
        if t_drop <= t_enter:
            i = int(A[m])
            beta[i] = 0.0
            active.remove(i)
            inactive[i] = True
            if not active:
                # every coefficient is back at zero: restart from the largest
                # correlation
                j = int(np.argmax(np.abs(c)))
                active.append(j)
                inactive[j] = False
        else:
            idx = np.flatnonzero(inactive)
            tied = idx[(idx != j_enter) & (np.abs(np.abs(c[idx]) - chat) <= tie)]
            entering = [j_enter, *tied.tolist()]
            if n_nonzero is not None and len(active) + len(entering) > n_nonzero:
                # a tie would jump past the requested count: stop at this breakpoint
                break
            for j in entering:
                active.append(j)
                inactive[j] = False
    return beta


def _lars_direction(G: np.ndarray, c: np.ndarray, active: list[int]):
    """The active set ``A``, the equiangular direction ``w = G_AA⁻¹ sign(c_A)`` of
    its coefficients, and the rate ``a = G_:A w`` at which every correlation changes
    along it."""
    A = np.array(active)
    s = np.sign(c[A])
    s[s == 0] = 1.0
    GAA = G[np.ix_(A, A)]
    # Cholesky solve straight from LAPACK (what solve(assume_a="pos") runs, without its
    # per-call checks: this runs once per breakpoint, thousands of times per fit)
    _, w, info = sla.lapack.dposv(GAA, s)
    if info != 0:
        w = np.linalg.lstsq(GAA, s, rcond=None)[0]
    return A, w, G[:, A] @ w


def _entry_step(
    c, a, chat: float, inactive: np.ndarray, eps: float
) -> tuple[float, int]:
    """The step ``t`` at which an inactive variable's correlation reaches the active
    ones (``|c_j − t a_j| = chat − t``), and that variable; ``(inf, -1)`` if none
    does."""
    idx = np.flatnonzero(inactive)
    if not idx.size:
        return np.inf, -1
    cj, aj = c[idx], a[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(1.0 - aj > 1e-15, (chat - cj) / (1.0 - aj), np.inf)
        t2 = np.where(1.0 + aj > 1e-15, (chat + cj) / (1.0 + aj), np.inf)
    t_all = np.minimum(np.where(t1 > eps, t1, np.inf), np.where(t2 > eps, t2, np.inf))
    m = int(np.argmin(t_all))
    return float(t_all[m]), int(idx[m])


def _drop_step(beta_A: np.ndarray, w: np.ndarray, eps: float) -> tuple[float, int]:
    """The step at which an active coefficient reaches zero (the lasso modification),
    and its position in the active set; ``(inf, 0)`` if none does."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t_d = np.where(w * beta_A < 0, -beta_A / w, np.inf)
    t_d = np.where(t_d > eps, t_d, np.inf)
    if not t_d.size:
        return np.inf, 0
    m = int(np.argmin(t_d))
    return float(t_d[m]), m


class GramRoot(NamedTuple):
    """``X`` (r × d, Fortran order) with ``XᵀX = G``; ``Xᵀ y = b`` is the triangular
    system ``triᵀ y = b[rows]`` (``tri`` upper triangular r × r)."""

    X: np.ndarray
    tri: np.ndarray
    rows: np.ndarray | slice


def gram_root(G: np.ndarray) -> GramRoot:
    """A factor ``X`` with ``XᵀX = G`` for a symmetric positive semi-definite ``G`` (d ×
    d).

    The Cholesky factor ``G = UᵀU`` (``X = tri = U``) when ``G`` is positive
    definite, every pivot ``U_ii²`` above d · ε · max G_ii; otherwise LAPACK's
    pivoted Cholesky ``Pᵀ G P = UᵀU`` (``dpstrf``), ``U`` upper trapezoidal of the
    numerical rank r (the first pivot below that same bound ends it), and
    ``X = U Pᵀ`` (r × d), ``tri`` its r pivoted columns. O(d³/3), once per ``G``.
    """
    G = np.asarray(G, dtype=np.float64)
    d = G.shape[0]
    U, info = sla.lapack.dpotrf(G, lower=0, clean=1)
    floor = d * np.finfo(np.float64).eps * float(np.max(np.diag(G), initial=0.0))
    if info == 0 and d and float(np.min(np.diag(U))) ** 2 > floor:
        return GramRoot(U, U, slice(None))
    U, piv, rank, _ = sla.lapack.dpstrf(G, tol=floor, lower=0)
    piv = piv - 1  # LAPACK counts from 1
    X = np.zeros((rank, d), order="F")
    X[:, piv] = np.triu(U[:rank])
    return GramRoot(X, np.asfortranarray(X[:, piv[:rank]]), piv[:rank])


def enet_gram_cd(
    G: np.ndarray,
    b: np.ndarray,
    lam1: float,
    beta0=None,
    *,
    tol: float = 1e-10,
    max_sweeps: int = 10_000,
    root=None,
) -> np.ndarray:
    """Coordinate descent for ``min βᵀ G β − 2 bᵀ β + λ₁ ‖β‖₁`` (G positive
    semi-definite).

    Coordinate i: ``β_i ← S_{λ₁/2}(b_i − Σ_{l≠i} G_il β_l) / G_ii`` (features with
    ``G_ii = 0`` stay at their start). The sweeps are scikit-learn's compiled
    coordinate descent on a precomputed Gram (:func:`sklearn.linear_model.enet_path`
    with ``precompute=G, Xy=b``). Its objective ``(1/2r)‖y − Xβ‖² + α‖β‖₁`` is ours
    divided by 2r, up to a constant, when ``XᵀX = G``, ``Xᵀy = b`` (r rows) and
    ``α = λ₁ / 2r``. ``X`` is the factor of :func:`gram_root` (pass it as ``root`` to
    factor ``G`` once for many ``b``); the sweeps read only ``G`` and ``b``, while
    ``X`` and ``y`` serve scikit-learn's checks and its duality gap. Stops when no
    coefficient moves by more than ``tol`` times the largest and the duality gap is
    at most ``tol · ‖y‖²``; ``beta0`` is a warm start. scikit-learn warns (a
    ``ConvergenceWarning``) when ``max_sweeps`` sweeps do not reach that.
    """
    # imported here: sklearn.linear_model adds ~0.13 s to importing the models, and only
    # the elastic net's fits with many features use this solver
    from sklearn.linear_model import enet_path

    G = np.ascontiguousarray(G, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    X, tri, rows = gram_root(G) if root is None else root
    r = X.shape[0]
    if r == 0:  # G = 0, and b (in its range) = 0: β = 0 is a minimiser
        return np.zeros(b.shape[0])
    y = sla.solve_triangular(tri, b[rows], trans="T", check_finite=False)
    start = None if beta0 is None else np.array(beta0, dtype=np.float64)
    # random_state only seeds random coordinate order (not used): fixed so that the
    # global NumPy generator is left alone check_input=False: the arrays are float64 in
    # the layouts scikit-learn expects (X Fortran, G and b contiguous), and XᵀX = G
    # holds by construction
    _, coefs, _ = enet_path(
        X,
        y,
        l1_ratio=1.0,
        alphas=[lam1 / (2.0 * r)],
        precompute=G,
        Xy=b,
        coef_init=start,
        copy_X=False,
        check_input=False,
        tol=tol,
        max_iter=max_sweeps,
        random_state=0,
    )
    return coefs[:, 0]
