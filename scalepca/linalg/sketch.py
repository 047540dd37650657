"""A one-pass sketch of the centred Gram and a bound on its error.

For data that can be read only once. The pass of :func:`~scalepca.linalg.krylov.
moments_and_gram_times` gives ``Y = A Ω`` for the centred Gram ``A = Xcᵀ Xc`` (d × d,
positive semi-definite) and ``l`` probe vectors ``Ω``; the Nyström approximation

    Â = Y (Ωᵀ Y)⁺ Yᵀ

is the best use of those products for a positive semi-definite matrix (Tropp, Yurtsever,
Udell & Cevher 2017, "Fixed-rank approximation of a positive-semidefinite matrix from
streaming data"), computed stably with a small shift ν (their Algorithm 3). Its eigenpairs are
the result: about as accurate as a range finder with no power iteration, i.e. much less than
the block Krylov solver's (a fraction of the gap to the noise, not 1e-8).

Error: ``A − Â`` is positive semi-definite, so every eigenvalue of ``Â`` is at most the
true one and below it by at most ``‖A − Â‖₂`` (Weyl), and each Ritz pair's residual
``‖A v − λ̂ v‖ = ‖(A − Â) v‖`` is at most ``‖A − Â‖₂`` too. The same pass multiplies
:data:`SKETCH_TESTS` independent Gaussian test vectors ``θ_i``; with them
``‖E‖₂ ≤ 10 √(2/π) max_i ‖E θ_i‖`` with probability at least ``1 − 10^(−SKETCH_TESTS)``
(Halko, Martinsson & Tropp 2011, Lemma 4.1), which :func:`nystrom_error_bound` returns.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg as sla

__all__ = ["SKETCH_TESTS", "nystrom_eigh", "nystrom_error_bound"]

#: Gaussian test vectors of the error bound (failure probability 10⁻¹⁰)
SKETCH_TESTS = 10


def nystrom_eigh(Q: np.ndarray, Y: np.ndarray):
    """Eigenpairs (descending) of the Nyström approximation ``Y (Qᵀ Y)⁺ Yᵀ`` for orthonormal
    probes ``Q`` (d × l) and ``Y = A Q``; returns ``(values (l,), vectors (d × l))``."""
    d = Q.shape[0]
    nu = np.sqrt(d) * np.finfo(np.float64).eps * max(np.linalg.norm(Y), np.finfo(float).tiny)
    Yn = Y + nu * Q
    B = Q.T @ Yn
    B = (B + B.T) / 2
    try:
        C = sla.cholesky(B, lower=False, check_finite=False)
    except np.linalg.LinAlgError:  # rounding left B indefinite: a larger shift
        w = np.linalg.eigvalsh(B)
        extra = -float(w.min()) + nu
        Yn, B = Yn + extra * Q, B + extra * np.eye(B.shape[0])
        nu += extra
        C = sla.cholesky(B, lower=False, check_finite=False)
    F = sla.solve_triangular(C, Yn.T, trans="T", lower=False, check_finite=False).T  # Yn C⁻¹
    U, s, _ = sla.svd(F, full_matrices=False, check_finite=False)
    return np.maximum(s**2 - nu, 0.0), U


def nystrom_error_bound(A_T: np.ndarray, T: np.ndarray, U: np.ndarray, lam: np.ndarray) -> float:
    """Upper bound (probability ≥ 1 − 10^(−m)) on ``‖A − U diag(lam) Uᵀ‖₂`` from ``m``
    standard Gaussian test vectors ``T`` (d × m) and their products ``A_T = A T``."""
    E_T = A_T - U @ (lam[:, None] * (U.T @ T))
    return float(10.0 * np.sqrt(2.0 / np.pi) * np.linalg.norm(E_T, axis=0).max())
