"""Decompositions of small matrices and tall-skinny / wide dask matrices.

Small (client-side) kernels take and return NumPy arrays; the dask ones take dask
arrays and say in their docstring how many passes over the data they make.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from scipy import linalg as sla

from .._validation import is_sparse
from . import passes
from .rangefinder import rayleigh_ritz, subspace_iteration

__all__ = [
    "eigh_descending",
    "flip_signs",
    "randomized_svd_centered",
    "tsqr_svd_centered",
    "variance_ratio",
]


def flip_signs(components: np.ndarray, scores_like: np.ndarray | None = None):
    """Sign convention: in every row of ``components`` the entry of largest magnitude is
    positive.

    It depends only on the components themselves, so it is the same for any chunking,
    number of workers or solver. ``scores_like`` (columns matching the rows of
    ``components``) is flipped with them when given.
    """
    idx = np.argmax(np.abs(components), axis=1)
    signs = np.sign(components[np.arange(components.shape[0]), idx])
    signs[signs == 0] = 1.0
    components = components * signs[:, None]
    if scores_like is not None:
        return components, scores_like * signs[None, :]
    return components


def variance_ratio(variances: np.ndarray, total: float) -> np.ndarray:
    """Each of ``variances`` as a fraction of the ``total`` variance; zeros when the
    total is 0 (constant data)."""
    if total > 0:
        return variances / total
    return np.zeros_like(variances)


def eigh_descending(C: np.ndarray, k: int | None = None):
    """Eigenpairs of the symmetric matrix ``C`` in descending order (all, or the top
    ``k``).

    LAPACK ``syevr`` via SciPy; with ``k`` only the top ``k`` are computed
    (``subset_by_index``).
    """
    d = C.shape[0]
    if k is None or k >= d:
        w, V = sla.eigh(C, driver="evr", check_finite=False)
    else:
        w, V = sla.eigh(
            C, subset_by_index=[d - k, d - 1], driver="evr", check_finite=False
        )
    return w[::-1].copy(), V[:, ::-1].copy()


#: :func:`spectrum_from_moments` finds only the leading k eigenpairs, by Lanczos
#: (ARPACK), when ``k · LEADING_FRACTION < d`` and ``d ≥ LEADING_MIN_FEATURES``:
#: LAPACK's reduction of the whole d × d matrix to tridiagonal form is the client's wait
#: after the pass (d = 2,000, k = 10: 0.25–0.45 s for the leading pairs alone, 0.55–0.9
#: s with every eigenvalue, against 0.07 s for ARPACK, measured on 1 and 2 cores)
LEADING_FRACTION = 10
LEADING_MIN_FEATURES = 1_000


def leading_eigh(C: np.ndarray, k: int):
    """The ``k`` largest eigenpairs of the symmetric positive semi-definite ``C``,
    descending.

    ARPACK's implicitly restarted Lanczos (``scipy.sparse.linalg.eigsh``) to machine
    precision (``tol=0``), from a fixed pseudo-random start (the same pairs for the
    same ``C``; a fixed vector such as all ones could be orthogonal to a leading
    eigenvector). Where it does not converge, LAPACK's ``syevr`` on the same subset.
    """
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    d = C.shape[0]
    v0 = np.random.default_rng(0).standard_normal(d)
    try:
        w, V = eigsh(C, k=k, which="LA", v0=v0, tol=0)
    except ArpackNoConvergence:
        return eigh_descending(C, k)
    order = np.argsort(w)[::-1]
    return w[order], np.ascontiguousarray(V[:, order])


def spectrum_from_moments(
    mom: dict, n_components: int, scale: np.ndarray | None = None
):
    """Eigen-decomposition of the sample covariance from one-pass moments.

    With ``scale`` (per-feature standard deviations,
    :func:`~scalepca.linalg.feature_scale`) the covariance of the standardised data
    ``Cᵢⱼ / (σᵢ σⱼ)`` — the correlation matrix — is decomposed instead: the same
    moments, no second pass.

    Returns
    ``(n, mean, eigenvalues (descending), components (k × d), total_variance)``. The
    eigenvalues are all d, or — for a few components of many features (see
    :data:`LEADING_FRACTION`) — the leading ``n_components``: the variance left out
    is then ``total − Σ`` of them (the trace), which is the sum of the others.
    """
    n = mom["n"]
    denom = max(n - 1, 1)
    cov = mom["m2"] / denom
    if scale is not None:
        cov = cov / np.outer(scale, scale)
    d = cov.shape[0]
    if n_components * LEADING_FRACTION < d and d >= LEADING_MIN_FEATURES:
        evals, evecs = leading_eigh(cov, n_components)
    else:
        evals, evecs = eigh_descending(cov)
    evals = np.maximum(evals, 0.0)
    components = flip_signs(evecs[:, :n_components].T)
    total = float(np.trace(cov))
    return n, mom["mean"], evals, components, total


def tsqr_svd_centered(X: da.Array, mean: np.ndarray):
    """Singular values and right singular vectors of ``X − 1 meanᵀ`` by direct TSQR.

    One pass over ``X`` (rows chunked, one column chunk): each block is centred and
    QR-factored where it lives; the stacked R factors are reduced as a tree (dask's
    ``tsqr``), and the SVD of the final d × d R gives the singular values to full
    working precision — unlike the covariance route, whose small eigenvalues lose digits
    to squaring.

    Memory per worker: one row block plus a few d × d factors.
    """
    n, d = X.shape
    rows = max(d, min(X.chunks[0]))
    if min(X.chunks[0]) < d:  # every TSQR block needs at least d rows
        X = X.rechunk({0: max(rows, max(X.chunks[0]))})
    Xc = X.astype(np.float64) - mean
    # compute_svd=False path: only R is needed, Q is never formed.
    _, R = da.linalg.tsqr(Xc, compute_svd=False)
    (R,) = dask.compute(R)
    _, s, Vt = sla.svd(R, full_matrices=False, check_finite=False)
    return s, Vt


def _orthonormalize(Y: da.Array) -> da.Array:
    """Orthonormal basis of the range of a tall dask matrix (TSQR; columns in one
    chunk)."""
    Q, _ = da.linalg.tsqr(Y.rechunk({1: -1}))
    return Q


def _rows_times(x, Om, shift):
    """``x Ω − shift`` of one row block (dense or ``scipy.sparse``: a sparse–dense
    product)."""
    return np.asarray(x @ Om) - shift


def _block_rtimes(x, q):
    """``xᵀ q`` of one row block as a (1, d, l) partial (dense or ``scipy.sparse``
    ``x``)."""
    return np.asarray(x.T @ q)[None]


def _sparse_times(X: da.Array, Om: np.ndarray, shift: np.ndarray) -> da.Array:
    """Lazy ``X Ω − 1 shiftᵀ`` of a row-chunked CSR dask array (one column chunk):
    dense n × l."""
    l = Om.shape[1]
    return X.map_blocks(
        _rows_times,
        Om,
        shift,
        chunks=(X.chunks[0], (l,)),
        dtype=np.float64,
        meta=np.empty((0, 0), dtype=np.float64),
    )


def _sparse_rtimes(X: da.Array, Q: da.Array) -> da.Array:
    """Lazy ``Xᵀ Q`` (d × l) of a row-chunked CSR dask array: each block's ``xᵀ q``
    where the block lives, summed as a tree of d × l partials."""
    Q = Q.rechunk({0: X.chunks[0], 1: -1})
    parts = da.blockwise(
        _block_rtimes,
        "ijk",
        X,
        "ij",
        Q,
        "ik",
        adjust_chunks={"i": 1},
        dtype=np.float64,
        meta=np.empty((0, 0, 0), dtype=np.float64),
    )
    return parts.sum(axis=0)


def randomized_svd_centered(
    X: da.Array,
    mean: np.ndarray,
    k: int,
    *,
    n_oversamples: int = 10,
    n_power_iter: int = 4,
    seed: np.random.SeedSequence,
    persist: bool = False,
):
    """Top-``k`` SVD of ``Xc = X − 1 meanᵀ`` by a randomized range finder (Halko et al.
    2011).

    ``Xc`` is never formed: products use ``X Ω − 1 (meanᵀ Ω)`` and
    ``Xᵀ Q − mean (1ᵀ Q)``, so ``X`` may be stored in 2-D blocks (wide data whose d × d
    Gram would not fit), or in ``scipy.sparse`` CSR row blocks (one column chunk): those
    are multiplied as they are (sparse–dense products ``x Ω`` and ``xᵀ q`` per block,
    the d × l partials summed in a tree), never densified, so memory per worker is one
    sparse block plus a few n_b × l and d × l dense factors — nothing grows with d². The
    iteration is the package's one range finder,
    :func:`~scalepca.linalg.rangefinder.subspace_iteration`; here its tall side is
    orthonormalised by TSQR and stays on the cluster, the d × l side by QR on the
    client.

    Passes over ``X``: ``2 + 2 · n_power_iter`` (one for ``X Ω``, two per power
    iteration, one for ``B = Qᵀ Xc``), fewer if ``persist`` holds ``X`` in cluster
    memory; each is counted on the active counter of :mod:`~scalepca.linalg.passes` (the
    fitting estimator's).

    Returns ``(s, Vt)`` with ``k`` singular values and right singular vectors.
    """
    n, d = X.shape
    l = min(k + n_oversamples, n, d)
    rng = np.random.default_rng(seed)
    X = X.astype(np.float64)
    sparse = is_sparse(X)
    # sparse row blocks are bounded by their stored values
    if sparse and len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    if persist:
        X = X.persist()
    mean = np.asarray(mean, dtype=np.float64)

    def range_of(Z):  # orth(Xc Z), lazy and held on the cluster (n × l)
        if sparse:
            XZ = _sparse_times(X, Z, mean @ Z)
        else:
            Zd = da.from_array(Z, chunks=(X.chunks[1], l))
            XZ = X @ Zd - (mean @ Zd)[None, :]
        return passes.persist(
            _orthonormalize(XZ),
            name="range finder: X Ω" if Z is Om else "range finder: X Z",
        )

    def rtimes(Q):  # Xcᵀ Q, computed (d × l)
        XtQ = _sparse_rtimes(X, Q) if sparse else X.T @ Q
        colsum = Q.sum(axis=0)
        XtQ, colsum = passes.compute(XtQ, colsum, name="range finder: Xᵀ Q")
        return XtQ - np.outer(mean, colsum)

    Om = rng.standard_normal((d, l))
    steps = subspace_iteration(range_of, rtimes, Om)
    for _ in range(n_power_iter + 1):
        Q, Bt = next(steps)
    _, s, Vt = rayleigh_ritz(Q, Bt)
    return s[:k], Vt[:k]
