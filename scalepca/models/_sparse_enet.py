"""Sparse PCA as penalized regression: the elastic net of Zou, Hastie & Tibshirani
(2006).

The ``"elasticnet"`` method of :class:`~scalepca.SparsePCA` works on the d × d
covariance S alone (the Gram form of the elasticnet R package's ``spca``), so after the
one pass of moments everything here runs on the client. Every loading solves

    min βᵀ(S + λ₂ I)β − 2 aⱼᵀ S β + λ₁ⱼ ‖β‖₁

given the current direction aⱼ, alternating with ``A = U Vᵀ`` from the SVD
``S B = U Σ Vᵀ``. It maximises variance, where the dictionary methods
(:mod:`._sparse_dictionary`) minimise reconstruction error.
"""

from __future__ import annotations

import numpy as np

from ..linalg import eigh_descending
from ..linalg.sparse import enet_gram_cd, enet_gram_path, gram_root

#: up to this many features the penalty form follows the LARS-EN path exactly; above,
#: coordinate descent (scikit-learn's, compiled; warm-started from the previous
#: alternation)
LARS_MAX_FEATURES = 1000


def zht_loadings(
    S: np.ndarray,
    k: int,
    *,
    alphas: np.ndarray,
    n_nonzero: list[int] | None,
    ridge: float,
    max_iter: int,
    tol: float,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The loadings of ZHT's sparse PCA from the covariance ``S``.

    Each loading follows the LARS-EN path
    (:func:`~scalepca.linalg.sparse.enet_gram_path`), or, for a penalty λ₁ above
    ``LARS_MAX_FEATURES`` features, runs coordinate descent
    (:func:`~scalepca.linalg.sparse.enet_gram_cd`) on a factor ``XᵀX = S + λ₂ I`` taken
    once (O(d³/3); the client then holds three d × d arrays: S, S + λ₂ I and the
    factor).

    Parameters
    ----------
    S : ndarray of shape (n_features, n_features)
        Covariance (or correlation) matrix.
    k : int
        Number of components.
    alphas : ndarray of shape (k,)
        λ₁ of every component (ignored when ``n_nonzero`` is given).
    n_nonzero : list of int or None
        Non-zeros of every component, chosen on the LARS-EN path.
    ridge : float
        λ₂, added to the diagonal of S.
    max_iter, tol : int, float
        Alternations at most; stop when no entry of the normalised loadings moves by
        more than ``tol``.

    Returns
    -------
    loadings : ndarray of shape (n_features, k)
        Columns of unit norm (zero columns where the penalty removed the component).
    norms : ndarray of shape (k,)
        The columns' norms before normalisation (0: removed).
    n_iter : int
        Alternations run.
    """
    d = S.shape[0]
    _, V = eigh_descending(S, k)
    directions = V[:, :k]
    G = S + ridge * np.eye(d)
    B = np.zeros((d, k))
    # coordinate descent factors G once (XᵀX = G) for all its calls
    root = gram_root(G) if n_nonzero is None and d > LARS_MAX_FEATURES else None
    prev = None
    it = 0
    while it < max_iter:
        it += 1
        SA = S @ directions
        for j in range(k):
            if n_nonzero is not None:
                B[:, j] = enet_gram_path(G, SA[:, j], n_nonzero=n_nonzero[j])
            elif d <= LARS_MAX_FEATURES:  # exact path, unaffected by collinearity
                B[:, j] = enet_gram_path(G, SA[:, j], lam1=alphas[j])
            else:  # coordinate descent, warm-started from the previous alternation
                B[:, j] = enet_gram_cd(
                    G, SA[:, j], alphas[j], None if prev is None else B[:, j], root=root
                )
        norms = np.linalg.norm(B, axis=0)
        Bn = B / np.where(norms > 0, norms, 1.0)
        if prev is not None and np.max(np.abs(Bn - prev)) <= tol:
            break
        prev = Bn
        U, _, Vt = np.linalg.svd(S @ B, full_matrices=False)
        directions = U @ Vt
    return Bn, norms, it
