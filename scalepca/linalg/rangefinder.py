"""The randomized range finder (Halko, Martinsson & Tropp 2011), written once.

Subspace iteration from a probe block ``Ω`` (n2 × l)::

    Q₀ = orth(A Ω);   Bᵢᵀ = Aᵀ Qᵢ;   Qᵢ₊₁ = orth(A orth(Bᵢᵀ))

with the Rayleigh–Ritz triplets of ``A ≈ Qᵢ Bᵢ`` after each step. Every iterate is
re-orthonormalised on both sides, which keeps the small singular directions from being
swamped in floating point.

The matrix is seen only through two products that the caller supplies, so the same
iteration serves a centred data matrix that is never formed (``X Ω − 1 meanᵀ Ω`` for
PCA, dense or sparse row blocks, ``Q`` kept lazy on the cluster) and a matrix in 2-D
blocks whose tall-skinny factors fit on the client (robust PCA's singular value
thresholding, with warm starts and per-pass timing). Neither scikit-learn's
``randomized_range_finder`` (in-memory arrays, legacy ``RandomState`` probes, no
implicit centring) nor dask's ``svd_compressed`` (no implicit centring: ``X − mean``
densifies sparse blocks; no warm start or pass timing) offers those two products,
hence this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from scipy import linalg as sla

__all__ = ["orth", "rayleigh_ritz", "subspace_iteration"]


def orth(Y: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the columns of a tall in-memory matrix (Householder QR,
    economic)."""
    Q, _ = np.linalg.qr(Y)
    return Q


def subspace_iteration(
    range_of: Callable, rtimes: Callable, Om, *, first_range=None
) -> Iterator[tuple]:
    """Yield ``(Q, Bt)`` with ``Bt = Aᵀ Q`` (n2 × l, in memory) after each step.

    ``range_of(Z)`` returns an orthonormal basis of the range of ``A Z`` (in memory
    or lazy, as ``rtimes`` takes it) and ``rtimes(Q)`` the in-memory ``Aᵀ Q``. The
    first pair comes from ``Q = range_of(Ω)``, or ``first_range`` when the caller has
    it; every next one after one power iteration, which reuses the previous ``Bt``.
    Passes over ``A``: one per call of each product, so ``2 + 2 · i`` for the
    ``i``-th power iteration's pair.
    """
    Q = range_of(Om) if first_range is None else first_range
    while True:
        Bt = rtimes(Q)
        yield Q, Bt
        Q = range_of(orth(Bt))


def rayleigh_ritz(Q, Bt: np.ndarray):
    """Triplets ``(U, s, Vt)`` of ``A ≈ Q Qᵀ A`` from ``Bt = Aᵀ Q``, singular values
    descending.

    ``Bᵀ = V Σ Wᵀ`` gives ``B = W Σ Vᵀ`` and so ``A ≈ (Q W) Σ Vᵀ``; ``U`` is lazy
    when ``Q`` is.
    """
    # Not the symmetric Rayleigh–Ritz of linalg.krylov: B is rectangular, and through
    # a symmetric eigenproblem its small singular values lose their digits (eigh of
    # B Bᵀ squares them; eigh of the dilation [[0, R], [Rᵀ, 0]] of B's R factor mixes
    # the ±σ pairs of small σ, their vectors no longer orthonormal): 1e-6 relative
    # against LAPACK's SVD at σ from 1 to 1e-10, where robust PCA thresholds them.
    V, s, Wt = sla.svd(
        Bt, full_matrices=False, check_finite=False, lapack_driver="gesdd"
    )
    return Q @ Wt.T, s, V.T
