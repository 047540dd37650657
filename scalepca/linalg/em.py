"""EM for probabilistic PCA with entries missing at random: block kernels and the
M-step.

Model (Tipping & Bishop 1999): ``x = W z + μ + ε``, ``z ~ N(0, I_k)``,
``ε ~ N(0, σ² I_d)``. Entries that are NaN are missing at random; row ``n`` sees only
its observed set ``O_n``.

E-step, per row, with ``W_O`` the rows of ``W`` at the observed features::

    M_n = W_Oᵀ W_O + σ² I_k                 (k × k, one per row)
    ⟨z_n⟩ = M_n⁻¹ W_Oᵀ (x_O − μ_O),   Cov(z_n) = σ² M_n⁻¹

M-step, per feature ``j`` (Ilin & Raiko 2010): ``μ`` is estimated jointly with ``W`` by
appending a constant 1 to the latent vector, ``z̃ = [z; 1]``::

    [w_j, δ_j] = b_jᵀ A_j⁻¹,   A_j = Σ_{n: j∈O_n} ⟨z̃_n z̃_nᵀ⟩,
    b_j = Σ_{n: j∈O_n} (x_nj − μ_j) ⟨z̃_n⟩,
    μ_j ← μ_j + δ_j
    σ² = (1 / #observed) Σ_j (s_j − [w_j, δ_j] · b_j),   s_j = Σ_{n: j∈O_n} (x_nj − μ_j)²

``A_j`` is kept as ``A − A_miss,j``: the sum over all rows minus the sum over the rows
where ``j`` is missing, so a block without missing entries contributes one (k+1)² matrix
and no d-sized stack, and the per-row ``M_n = WᵀW + σ²I − Σ_{j missing} w_j w_jᵀ`` and
``A_miss`` come from sparse products with the missing-entry pattern, at a cost
proportional to the number of missing entries rather than m × d. Everything a block
returns is small (d × (k+1)² at most).

The observed-data log-likelihood of row ``n`` at the current parameters comes from the
same factors (determinant lemma and Woodbury)::

    log p(x_O) = −½ [ d_O log 2π + (d_O − k) log σ² + log|M_n|
                      + (‖x_O − μ_O‖² − (W_Oᵀ x_c)·⟨z_n⟩) / σ² ]

so one pass over the data yields both the statistics of iteration t and the
log-likelihood of the parameters it started from.

The initialisation pass (:func:`observed_moments_graph`) computes per-feature observed
counts, means and the centred Gram matrix of the data imputed with the (global) observed
feature means, in one pass with any chunking: each block keeps its statistics relative
to a reference vector ``r`` (``u = m ⊙ (x − r)``, with ``m`` the 0/1 observation mask)::

    s = Σ u,   U = Σ u uᵀ,   P = Σ u mᵀ,   Q = Σ m mᵀ

and moving the reference by ``Δ`` is exact::

    s' = s − c ⊙ Δ,   U' = U − P diag(Δ) − diag(Δ) Pᵀ + Q ⊙ ΔΔᵀ,   P' = P − diag(Δ) Q

so partials are merged in a tree at the combined observed mean, like Chan et al.'s
update. Both passes are tree reductions of :mod:`~scalepca.linalg.passes` (the partials
are dicts) that merge ``split_every`` partials per task, left to right.

References
----------
Tipping, M. E. & Bishop, C. M. (1999). Probabilistic principal component analysis.
JRSS B 61(3), 611–622. Ilin, A. & Raiko, T. (2010). Practical approaches to principal
component analysis in the presence of missing values. JMLR 11, 1957–2000. Liu, C.,
Rubin, D. B. & Wu, Y. N. (1998). Parameter expansion to accelerate EM: the PX-EM
algorithm. Biometrika 85(4), 755–770.
"""

from __future__ import annotations

from functools import partial

import dask
import dask.array as da
import numpy as np

from .moments import _gram
from .passes import reduce_rows

__all__ = [
    "estep_block",
    "estep_graph",
    "impute_block",
    "loglike_rows_block",
    "merge_estep",
    "merge_observed_moments",
    "mstep",
    "observed_moments_block",
    "observed_moments_graph",
    "posterior_mean_block",
]


# -- initialisation pass ---------------------------------------------------------------
def observed_moments_block(x, *, with_gram: bool = True) -> dict:
    """Observed-entry statistics of one row block (see module docstring).

    Rows with no observed value are left out (counted in ``n_empty``); ``n_inf`` counts
    infinite entries, which are not "missing" and make the caller raise.
    """
    x = np.asarray(x, dtype=np.float64)
    isnan = np.isnan(x)
    obs = ~isnan & np.isfinite(x)
    n_inf = int(np.count_nonzero(~obs & ~isnan))
    rows = obs.any(axis=1)
    n_empty = int(x.shape[0] - np.count_nonzero(rows))
    if n_empty:
        x, obs = x[rows], obs[rows]
    n, d = x.shape
    c = obs.sum(axis=0).astype(np.float64)
    xo = np.where(obs, x, 0.0)
    r = np.divide(xo.sum(axis=0), c, out=np.zeros(d), where=c > 0)
    u = np.where(obs, xo - r, 0.0)
    out = {
        "n": n,
        "n_empty": n_empty,
        "n_inf": n_inf,
        "n_missing": int(obs.size - c.sum()),
        "c": c,
        "r": r,
        "s": u.sum(axis=0),
    }
    if with_gram:
        out["U"] = _gram(u)
        if out["n_missing"] == 0:
            out["P"] = np.repeat(out["s"][:, None], d, axis=1)
            out["Q"] = np.full((d, d), float(n))
        else:
            m = obs.astype(np.float64)
            out["P"] = u.T @ m
            out["Q"] = _gram(m)
    else:
        out["ss"] = (u**2).sum(axis=0)
    return out


def _shift(p: dict, ref: np.ndarray) -> dict:
    """Re-express partial ``p`` relative to the reference ``ref`` (exact)."""
    delta = ref - p["r"]
    out = dict(p)
    out["r"] = ref
    out["s"] = p["s"] - p["c"] * delta
    if "U" in p:
        PD = p["P"] * delta[None, :]
        out["U"] = p["U"] - PD - PD.T + p["Q"] * np.outer(delta, delta)
        out["P"] = p["P"] - delta[:, None] * p["Q"]
    else:
        out["ss"] = p["ss"] - 2.0 * delta * p["s"] + p["c"] * delta**2
    return out


def merge_observed_moments(a: dict, b: dict) -> dict:
    """Merge two partials at their combined observed mean."""
    c = a["c"] + b["c"]
    tot = a["c"] * a["r"] + a["s"] + b["c"] * b["r"] + b["s"]
    ref = np.divide(tot, c, out=np.zeros_like(c), where=c > 0)
    a, b = _shift(a, ref), _shift(b, ref)
    out = {key: a[key] + b[key] for key in a if key != "r"}
    out["r"] = ref
    return out


def _check_row_blocks(X: da.Array) -> None:
    if len(X.chunks[1]) != 1:
        raise ValueError(
            "EM needs the features in one column chunk; rechunk({1: -1}) first"
        )


def observed_moments_graph(
    X: da.Array, *, with_gram: bool = True, split_every: int = 8, also=None
):
    """Delayed observed-entry moments of ``X`` (one pass; d × d partials with
    ``with_gram``); with ``also``, ``(Delayed, also)`` to compute in the same pass
    (see :func:`~scalepca.linalg.passes.single_delayed`)."""
    _check_row_blocks(X)
    return reduce_rows(
        X,
        partial(observed_moments_block, with_gram=with_gram),
        merge_observed_moments,
        _finalize_observed,
        split_every=split_every,
        also=also,
    )


def _finalize_observed(p: dict) -> dict:
    """Shift to the exact observed mean; add the mean and per-feature observed
    variance."""
    c = p["c"]
    mean = np.divide(p["c"] * p["r"] + p["s"], c, out=np.zeros_like(c), where=c > 0)
    p = _shift(p, mean)
    p["mean"] = mean
    ss = np.diag(p["U"]).copy() if "U" in p else p["ss"]
    p["var"] = np.divide(ss, c - 1, out=np.zeros_like(c), where=c > 1)
    return p


# -- posterior of each row -------------------------------------------------------------
def _missing_pattern(obs: np.ndarray):
    """The missing entries of a block as a sparse 0/1 matrix (rows × features, CSR).

    Products with it cost in proportion to the number of missing entries, not m × d.
    """
    from scipy import sparse

    m, d = obs.shape
    # row-major order, as CSR wants; one flat index array is cheaper than 2-D nonzero
    rows, cols = np.divmod(np.flatnonzero(~obs), d)
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    return (
        sparse.csr_matrix((np.ones(rows.size), cols, indptr), shape=(m, d)),
        rows,
        cols,
    )


#: up to this latent dimension the per-row k × k inverses are computed entry by entry,
#: vectorised over the rows (~k³/2 array operations); above it by batched LAPACK calls
VECTORISED_MAX_K = 12


def _spd_inverse(M: np.ndarray):
    """Inverse and log-determinant of a stack of small SPD matrices (m, k, k).

    For small k a Cholesky factorisation written entry by entry, each operation
    vectorised over the m rows: a handful of passes over m-vectors instead of m
    LAPACK calls (whose per-call overhead dominates for k ≤ 10). Raises
    ``LinAlgError`` if a matrix is not positive definite.
    """
    m, k, _ = M.shape
    if k > VECTORISED_MAX_K or m == 0:
        L = np.linalg.cholesky(M)
        logdet = 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
        return np.linalg.inv(M), logdet
    A = [[np.ascontiguousarray(M[:, i, j]) for j in range(k)] for i in range(k)]
    L = [[None] * k for _ in range(k)]
    for j in range(k):
        t = A[j][j].copy()
        for l in range(j):
            t -= L[j][l] * L[j][l]
        if not np.all(t > 0):
            raise np.linalg.LinAlgError(
                "posterior precision matrix is not positive definite"
            )
        L[j][j] = np.sqrt(t)
        inv = 1.0 / L[j][j]
        for i in range(j + 1, k):
            t = A[i][j].copy()
            for l in range(j):
                t -= L[i][l] * L[j][l]
            L[i][j] = t * inv
    logdet = 2.0 * sum(np.log(L[j][j]) for j in range(k))
    Li = [[None] * k for _ in range(k)]  # L⁻¹, lower triangular
    for i in range(k):
        Li[i][i] = 1.0 / L[i][i]
        for j in range(i):
            t = L[i][j] * Li[j][j]
            for l in range(j + 1, i):
                t += L[i][l] * Li[l][j]
            Li[i][j] = -t * Li[i][i]
    out = np.empty((m, k, k))
    for i in range(k):  # M⁻¹ = L⁻ᵀ L⁻¹
        for j in range(i + 1):
            t = Li[i][i] * Li[i][j]
            for l in range(i + 1, k):
                t += Li[l][i] * Li[l][j]
            out[:, i, j] = t
            out[:, j, i] = t
    return out, logdet


def _posterior(x, mean, W, sigma2):
    """Per-row posterior factors of a block; shared ``M`` when no entry is missing."""
    x = np.asarray(x, dtype=np.float64)
    obs = np.isfinite(x)
    full = bool(obs.all())
    if not full:
        n_inf = int(np.count_nonzero(np.isinf(x)))
        if n_inf:
            raise ValueError(
                f"X contains {n_inf} infinite value(s); PPCA treats "
                "NaN (only) as a missing entry — replace them"
            )
    xc = x - mean
    k = W.shape[1]
    eye = np.eye(k)
    extra = {}
    if full:
        XW = xc @ W
        M = W.T @ W + sigma2 * eye
        # σ² = 0 (a model of data whose rank is at most k): the limit M⁻¹ → M⁺
        Minv = np.linalg.inv(M) if sigma2 > 0 else np.linalg.pinv(M, hermitian=True)
        Minv = 0.5 * (Minv + Minv.T)
        Ez = XW @ Minv
        logdet = np.linalg.slogdet(M)[1]
        dobs = np.full(x.shape[0], x.shape[1], dtype=np.float64)
    else:
        m, d = x.shape
        miss, rows, cols = _missing_pattern(obs)
        xc[rows, cols] = 0.0
        XW = xc @ W  # W_Oᵀ (x_O − μ_O) per row: missing entries are zero in xc
        # M_n = Wᵀ W + σ² I − Σ_{j missing in row n} w_j w_jᵀ
        WW = (W[:, :, None] * W[:, None, :]).reshape(d, k * k)
        M = (W.T @ W + sigma2 * eye)[None, :, :] - (miss @ WW).reshape(m, k, k)
        if sigma2 > 0:
            Minv, logdet = _spd_inverse(M)
        else:
            Minv, logdet = np.linalg.pinv(M, hermitian=True), np.linalg.slogdet(M)[1]
        Ez = np.matmul(Minv, XW[:, :, None])[:, :, 0]
        dobs = d - np.diff(miss.indptr).astype(np.float64)
        extra = {"miss": miss, "miss_cols": cols}
    # per-row sums of squares without an m × d temporary (einsum reduces in place)
    sq_rows = np.einsum("ij,ij->i", xc, xc)
    return {
        "xc": xc,
        "sq_rows": sq_rows,
        "XW": XW,
        "Ez": Ez,
        "Minv": Minv,
        "logdet": logdet,
        "dobs": dobs,
        "full": full,
        **extra,
    }


def _loglike_rows(p: dict, sigma2: float, k: int) -> np.ndarray:
    quad = (p["sq_rows"] - (p["XW"] * p["Ez"]).sum(axis=1)) / sigma2
    ll = -0.5 * (
        p["dobs"] * np.log(2 * np.pi)
        + (p["dobs"] - k) * np.log(sigma2)
        + p["logdet"]
        + quad
    )
    if not p["full"]:
        ll = np.where(
            p["dobs"] > 0, ll, 0.0
        )  # a row with nothing observed has density 1
    return ll


def posterior_mean_block(x, mean, W, sigma2):
    """``⟨z⟩ = M_n⁻¹ W_Oᵀ (x_O − μ_O)`` of every row (the PPCA transform), NaN =
    missing.

    A row with no observed entry gets NaN (nothing to project); infinite entries
    raise.
    """
    p = _posterior(x, mean, W, sigma2)
    Ez = p["Ez"]
    if not p["full"]:
        Ez[p["dobs"] == 0] = np.nan
    return Ez


def loglike_rows_block(x, mean, W, sigma2):
    """Observed-data log-likelihood of every row; 0 for a row with nothing observed."""
    return _loglike_rows(_posterior(x, mean, W, sigma2), sigma2, W.shape[1])


def impute_block(x, mean, W, sigma2, keep=None):
    """Rows with missing entries replaced by ``W ⟨z⟩ + μ``; observed entries unchanged.

    ``keep`` (bool, n_features) selects the features the model was fitted on; the
    others are returned as they are.
    """
    x = np.asarray(x, dtype=np.float64)
    xk = x if keep is None else x[:, keep]
    # a row with nothing observed is filled with μ (its posterior is the prior, ⟨z⟩ = 0)
    fill = _posterior(xk, mean, W, sigma2)["Ez"] @ W.T + mean
    filled = np.where(np.isnan(xk), fill, xk)
    if keep is None:
        return filled
    out = x.copy()
    out[:, keep] = filled
    return out


# -- E-step statistics -----------------------------------------------------------------
def estep_block(x, mean, W, sigma2) -> dict:
    """Sufficient statistics of one row block at ``(W, μ, σ²)`` plus its log-likelihood.

    Returns ``{"n", "A", "Amiss", "B", "s", "nobs", "ll"}``: ``A`` ((k+1)²) sums
    ``⟨z̃ z̃ᵀ⟩`` over all rows with data; the per-feature ``A_j`` is
    ``A − Amiss[j]``, where ``Amiss`` (d × (k+1)², ``None`` for a block without
    missing entries) sums over the rows where feature ``j`` is missing — computed
    with a sparse product, at a cost proportional to the number of missing entries;
    ``B`` is d × (k+1); ``s`` and ``nobs`` have length d.
    """
    k = W.shape[1]
    p = _posterior(x, mean, W, sigma2)
    Ez, xc = p["Ez"], p["xc"]
    ll = float(_loglike_rows(p, sigma2, k).sum())
    m = xc.shape[0]
    Zt = np.empty((m, k + 1))
    Zt[:, :k] = Ez
    Zt[:, k] = 1.0
    if p["full"]:
        Sigma = sigma2 * p["Minv"]
        ez = Ez.sum(axis=0)
        A = np.empty((k + 1, k + 1))
        A[:k, :k] = m * Sigma + Ez.T @ Ez
        A[:k, k] = A[k, :k] = ez
        A[k, k] = m
        Amiss = None
        nobs = np.full(xc.shape[1], float(m))
        nrows = m
    else:
        rows = p["dobs"] > 0
        G = np.empty((m, k + 1, k + 1))
        G[:, :k, :k] = sigma2 * p["Minv"] + Ez[:, :, None] * Ez[:, None, :]
        G[:, :k, k] = Ez
        G[:, k, :k] = Ez
        G[:, k, k] = 1.0
        G = G.reshape(m, -1)
        G[~rows] = 0.0  # a row with nothing observed carries no information
        A = G.sum(axis=0).reshape(k + 1, k + 1)
        Amiss = np.asarray(p["miss"].T @ G)  # per feature: its rows where it is missing
        nobs = m - np.bincount(p["miss_cols"], minlength=xc.shape[1]).astype(np.float64)
        nrows = int(rows.sum())
        Zt[~rows, k] = 0.0
    B = xc.T @ Zt
    return {
        "n": nrows,
        "A": A,
        "Amiss": Amiss,
        "B": B,
        "s": np.einsum("ij,ij->j", xc, xc),
        "nobs": nobs,
        "ll": ll,
    }


def merge_estep(a: dict, b: dict) -> dict:
    out = {}
    for key in a:
        va, vb = a[key], b[key]
        if vb is None:
            out[key] = va
        elif va is None:
            out[key] = vb
        else:
            out[key] = va + vb
    return out


def estep_graph(X: da.Array, mean, W, sigma2, *, split_every: int = 8):
    """Delayed E-step statistics of all of ``X`` (one pass), tree-reduced.

    The parameters travel once to the cluster as one graph key shared by every block task
    (a ``map_blocks`` argument; :func:`~scalepca.linalg.passes.reduce_rows` then
    merges the per-block statistics).
    """
    _check_row_blocks(X)
    params = dask.delayed((np.asarray(mean), np.asarray(W), float(sigma2)), pure=True)
    parts = X.map_blocks(
        _estep_packed,
        params,
        chunks=((1,) * X.numblocks[0], (1,)),
        dtype=object,
        meta=np.empty((0, 0), dtype=object),
    )
    return reduce_rows(parts, None, merge_estep, split_every=split_every)


def _estep_packed(x, params):
    mean, W, sigma2 = params
    return estep_block(x, mean, W, sigma2)


# -- M-step ----------------------------------------------------------------------------
def mstep(
    stats: dict,
    mean: np.ndarray,
    k: int,
    *,
    min_sigma2: float = 0.0,
    expand: bool = True,
):
    """New ``(W, μ, σ²)`` from reduced E-step statistics (small arrays, on the client).

    With ``expand`` (default) the step is parameter-expanded (PX-EM, Liu, Rubin & Wu
    1998): the latent prior is temporarily given a free mean ``m`` and covariance
    ``Σ_z = L Lᵀ``, estimated from the same statistics (``m = mean ⟨z⟩``,
    ``Σ_z = mean ⟨z zᵀ⟩ − m mᵀ``), and folded back into the standard model:
    ``W ← W L``, ``μ ← μ + W m``. The fixed points are those of plain EM, but the
    slow mode of plain EM (the scale of ``W`` along strong components shrinks by a
    factor ≈ 1 − σ²/λ per iteration) is gone: on well-separated data it converges in
    tens of iterations instead of thousands.
    """
    A, B = stats["A"], stats["B"]
    d = B.shape[0]
    if stats["Amiss"] is None:
        Wt = np.linalg.solve(A, B.T).T  # A symmetric: B A⁻¹
    else:
        Aj = A[None, :, :] - stats["Amiss"].reshape(d, k + 1, k + 1)
        Wt = np.linalg.solve(Aj, B[:, :, None])[:, :, 0]
    W = Wt[:, :k].copy()
    new_mean = mean + Wt[:, k]
    resid = float((stats["s"] - (Wt * B).sum(axis=1)).sum())
    sigma2 = max(resid / float(stats["nobs"].sum()), min_sigma2)
    if expand:
        n = A[k, k]
        mz = A[:k, k] / n
        Szz = A[:k, :k] / n - np.outer(mz, mz)
        try:
            L = np.linalg.cholesky(0.5 * (Szz + Szz.T))
        except np.linalg.LinAlgError:  # degenerate latent covariance: plain EM step
            return W, new_mean, sigma2
        new_mean = new_mean + W @ mz
        W = W @ L
    return W, new_mean, sigma2
