"""A one-pass sketch of the centred Gram, an estimate of its error and a bound on it.

For data that can be read only once. The pass of :func:`~scalepca.linalg.krylov.
moments_and_gram_times` gives ``Y = A Ω`` for the centred Gram ``A = Xcᵀ Xc`` (d × d,
positive semi-definite) and ``l`` probe vectors ``Ω``; the Nyström approximation

    Â = Y (Ωᵀ Y)⁺ Yᵀ

is the best use of those products for a positive semi-definite matrix (Tropp, Yurtsever,
Udell & Cevher 2017, "Fixed-rank approximation of a positive-semidefinite matrix from
streaming data"), computed stably with a small shift ν (their Algorithm 3). Its
eigenpairs are the result: about as accurate as a range finder with no power iteration,
i.e. much less than the block Krylov solver's (a fraction of the gap to the noise, not
1e-8).

Error: ``E = A − Â`` is positive semi-definite, so every eigenvalue of ``Â`` is at most
the true one and below it by at most ``‖E‖₂`` (Weyl), and each Ritz pair's residual
``‖A v − λ̂ v‖ = ‖E v‖`` is at most ``‖E‖₂`` too. The same pass multiplies
:data:`SKETCH_TESTS` independent Gaussian test vectors ``Θ``, held out of the
approximation, which give ``E Θ`` and two figures for ``‖E‖₂``:

* an estimate, :func:`nystrom_error_estimate`: the largest eigenvalue of the Nyström
  approximation of ``E`` itself from ``Θ``, ``E Θ (Θᵀ E Θ)⁺ Θᵀ E``. It is at most
  ``‖E‖₂`` whatever ``Θ`` (the Nyström approximation of a positive semi-definite matrix
  lies below it), and close to it: the tests are a randomized range finder of ``E``
  (Tropp, Yurtsever, Udell & Cevher 2019, "Streaming low-rank matrix approximation with
  an application to scientific simulation", §6: the error estimated from a held-out
  sketch). Measured: :data:`ERROR_ESTIMATE_FACTOR`;
* a worst case, :func:`nystrom_error_bound`: ``‖E‖₂ ≤ 10 √(2/π) max_i ‖E θ_i‖`` with
  probability at least ``1 − 10^(−SKETCH_TESTS)`` (Halko, Martinsson & Tropp 2011,
  Lemma 4.1). ``‖E θ_i‖`` is about ``‖E‖_F``, so the bound is 7–36 × ``‖E‖₂`` on the
  data measured (and above ``λ₁`` itself where the spectrum has a wide noise bulk): it
  holds, but says little.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg as sla

__all__ = [
    "ERROR_ESTIMATE_FACTOR",
    "SKETCH_TESTS",
    "nystrom_eigh",
    "nystrom_error_bound",
    "nystrom_error_estimate",
]

#: Gaussian test vectors of the error bound (failure probability 10⁻¹⁰)
SKETCH_TESTS = 10

#: :func:`nystrom_error_estimate` is at most ``‖E‖₂`` and, measured, at least this
#: fraction of it (0.56 the least seen, on scikit-learn's digits and breast cancer,
#: standardised or not, and on low-rank plus noise and decaying spectra, k = 2–10, 20
#: seeds each; ``tests/test_wide.py``): the error is within twice the estimate
ERROR_ESTIMATE_FACTOR = 0.5


def nystrom_eigh(Q: np.ndarray, Y: np.ndarray):
    """Eigenpairs (descending) of the Nyström approximation ``Y (Qᵀ Y)⁺ Yᵀ`` for
    orthonormal probes ``Q`` (d × l) and ``Y = A Q``; returns
    ``(values (l,), vectors (d × l))``."""
    d = Q.shape[0]
    nu = (
        np.sqrt(d)
        * np.finfo(np.float64).eps
        * max(np.linalg.norm(Y), np.finfo(float).tiny)
    )
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
    F = sla.solve_triangular(
        C, Yn.T, trans="T", lower=False, check_finite=False
    ).T  # Yn C⁻¹
    U, s, _ = sla.svd(F, full_matrices=False, check_finite=False)
    return np.maximum(s**2 - nu, 0.0), U


def nystrom_error_bound(
    A_T: np.ndarray, T: np.ndarray, U: np.ndarray, lam: np.ndarray
) -> float:
    """Upper bound (probability ≥ 1 − 10^(−m)) on ``‖A − U diag(lam) Uᵀ‖₂`` from ``m``
    standard Gaussian test vectors ``T`` (d × m) and their products ``A_T = A T``."""
    E_T = _error_times_tests(A_T, T, U, lam)
    return float(10.0 * np.sqrt(2.0 / np.pi) * np.linalg.norm(E_T, axis=0).max())


def _error_times_tests(A_T, T, U, lam):
    return A_T - U @ (lam[:, None] * (U.T @ T))


def nystrom_error_estimate(
    A_T: np.ndarray, T: np.ndarray, U: np.ndarray, lam: np.ndarray
) -> float:
    """An estimate of ``‖A − U diag(lam) Uᵀ‖₂`` from test vectors ``T`` (d × m, held out
    of the approximation) and ``A_T = A T``: the largest eigenvalue of the Nyström
    approximation of the error ``E`` from ``T``. At most ``‖E‖₂`` for any ``T`` when
    ``E`` is positive semi-definite; about it for Gaussian ``T`` (see the module's
    docstring)."""
    Z = _error_times_tests(A_T, T, U, lam)
    M = T.T @ Z
    w, W = np.linalg.eigh((M + M.T) / 2)
    if w.size == 0 or w[-1] <= 0:
        return 0.0
    good = w > w[-1] * T.shape[1] * np.finfo(np.float64).eps
    # E T (Tᵀ E T)^(-1/2) on its kept directions: its Gram's eigenvalues are Ê's
    S = Z @ (W[:, good] / np.sqrt(w[good]))
    return float(np.linalg.norm(S, 2) ** 2)
