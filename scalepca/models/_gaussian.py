"""The latent Gaussian model shared by PCA and PPCA (Tipping & Bishop 1999).

A fitted model is described by an orthonormal basis ``U`` (d × k), the model variances ``lam``
along it (k,) and the isotropic noise variance ``sigma2`` in the orthogonal complement:

    C = U diag(lam) Uᵀ + sigma2 (I − U Uᵀ),   lam_i = max(eigenvalue_i, sigma2).

This equals ``W Wᵀ + sigma2 I`` with ``W = U diag(sqrt(lam − sigma2))``. Everything below uses
only the k-dimensional factors: no d × d matrix is inverted or factored.
"""

from __future__ import annotations

import dask.array as da
import numpy as np


def _loglike_block(x, mean, U, lam, sigma2):
    import scipy.sparse

    if scipy.sparse.issparse(x):  # centred implicitly: ‖x − μ‖² = ‖x‖² − 2 xᵀμ + ‖μ‖²
        x = scipy.sparse.csr_matrix(x, dtype=np.float64)
        proj = np.asarray(x @ U) - mean @ U
        sq = (np.asarray(x.multiply(x).sum(axis=1)).ravel() - 2 * np.asarray(x @ mean).ravel()
              + mean @ mean)
    else:
        xc = np.asarray(x, dtype=np.float64) - mean
        proj = xc @ U
        sq = (xc**2).sum(axis=1)
    d = x.shape[1]
    quad = (proj**2 / lam).sum(axis=1)
    logdet = np.log(lam).sum()
    if U.shape[1] < d:
        resid = np.maximum(sq - (proj**2).sum(axis=1), 0.0)
        quad = quad + resid / sigma2
        logdet = logdet + (d - U.shape[1]) * np.log(sigma2)
    return -0.5 * (quad + d * np.log(2 * np.pi) + logdet)


class LatentGaussianMixin:
    """``get_covariance``, ``get_precision``, ``score_samples``, ``score`` from the k factors.

    A standardised fit (``scale_`` not all ones) models ``x / scale_``; the covariance,
    precision and density returned here are those of ``x`` itself. A fit with
    ``zero_center=False`` (a truncated SVD) is no Gaussian model: all four refuse it.
    """

    def _check_gaussian(self, what: str) -> None:
        """Refuse ``what`` (before reading any data) for a model that describes no Gaussian:
        ``PCA(zero_center=False)``, whose zero ``mean_`` is not the data's mean and whose
        ``explained_variance_`` are its scores' variances, not the covariance's eigenvalues
        (a model built from them gave a log-likelihood of −26.8 where PCA's is −23.3)."""
        self._check_fitted()
        if not getattr(self, "zero_center", True):
            raise ValueError(
                f"{what} is undefined with zero_center=False: {type(self).__name__}"
                "(zero_center=False) is a truncated SVD of the uncentred data and fits no "
                "Gaussian model (mean_ is 0, not the data's mean; explained_variance_ are the "
                "scores' variances, not the covariance's eigenvalues); fit with "
                "zero_center=True for the likelihood and the model covariance"
            )

    def _kept_scale(self) -> np.ndarray | None:
        """The per-feature scales on the kept features, or ``None`` when there are none."""
        scale = getattr(self, "scale_", None)
        if scale is None:
            return None
        scale = self._kept(np.asarray(scale, dtype=np.float64))
        return None if np.all(scale == 1) else scale

    def _model_basis(self):
        """(U, lam, sigma2) of the fitted model; see the module docstring."""
        U = self._kept(self.components_, axis=1).T
        sigma2 = float(self.noise_variance_)
        lam = np.maximum(self.explained_variance_, sigma2)
        return U, lam, sigma2

    def _check_nonsingular(self, U, lam, sigma2):
        # a variance at or below d ε max(λ) is zero to rounding (a rank-deficient fit)
        tiny = U.shape[0] * np.finfo(np.float64).eps * float(np.max(lam, initial=0.0))
        if (U.shape[1] < U.shape[0] and sigma2 <= 0) or np.any(lam <= tiny):
            raise ValueError(
                "the fitted covariance is singular (noise_variance_ is 0 with fewer components "
                "than features, or a zero variance); the Gaussian likelihood is undefined — "
                "use fewer components than the data's rank"
            )

    def get_covariance(self) -> np.ndarray:
        """Model covariance ``W Wᵀ + σ² I`` of shape (n_features, n_features)."""
        self._check_gaussian("get_covariance")
        U, lam, sigma2 = self._model_basis()
        C = (U * (lam - sigma2)) @ U.T
        C[np.diag_indices_from(C)] += sigma2
        scale = self._kept_scale()
        if scale is not None:
            C = C * np.outer(scale, scale)
        return self._widen_square(C)

    def _widen_square(self, C: np.ndarray) -> np.ndarray:
        """A kept-features d × d matrix widened with NaN rows/columns at dropped features."""
        keep = getattr(self, "_features_kept", None)
        if keep is None:
            return C
        full = np.full((keep.size, keep.size), np.nan)
        full[np.ix_(keep, keep)] = C
        return full

    def get_precision(self) -> np.ndarray:
        """Inverse model covariance by the Woodbury identity (no d × d inversion).

        ``C⁻¹ = U diag(1/lam) Uᵀ + (I − U Uᵀ)/σ²``.
        """
        self._check_gaussian("get_precision")
        U, lam, sigma2 = self._model_basis()
        self._check_nonsingular(U, lam, sigma2)
        d, k = U.shape
        if k == d:
            P = (U / lam) @ U.T
        else:
            P = (U * (1.0 / lam - 1.0 / sigma2)) @ U.T
            P[np.diag_indices_from(P)] += 1.0 / sigma2
        scale = self._kept_scale()
        if scale is not None:
            P = P / np.outer(scale, scale)
        return self._widen_square(P)

    def score_samples(self, X):
        """Log-likelihood of each sample under the fitted Gaussian model (lazy for dask input).

        Returns
        -------
        ll : same kind as ``X``, shape (n_samples,)
        """
        self._check_gaussian("score_samples")
        data = self._transform_input(X)
        return data.wrap_samples(self._loglike(data))

    def _loglike(self, data):
        """The lazy per-sample log-likelihood of checked input (``_transform_input``)."""
        U, lam, sigma2 = self._model_basis()
        self._check_nonsingular(U, lam, sigma2)
        Xd, mean, logdet_scale = self._standardized(self._select_features(data.data))
        ll = Xd.map_blocks(
            _loglike_block, mean, U, lam, sigma2,
            drop_axis=1, dtype=np.float64, meta=np.empty((0,), dtype=np.float64),
        )
        return ll - logdet_scale

    def _standardized(self, Xd):
        """``(Xd / scale, mean / scale, Σ log scale)`` on the kept features (lazy, blockwise):
        the data the model describes and the log-Jacobian that turns its density into the
        density of ``x``. Without standardisation ``Xd``, the mean and 0."""
        mean = self._kept(self.mean_)
        scale = self._kept_scale()
        if scale is None:
            return Xd, mean, 0.0
        from ..linalg.sparse import scale_columns

        return (None if Xd is None else scale_columns(Xd, scale)), mean / scale, \
            float(np.log(scale).sum())

    def score(self, X, y=None) -> float:
        """Average log-likelihood of the samples (one pass over ``X``)."""
        self._check_gaussian("score")
        data = self._transform_input(X)
        return float(da.mean(self._loglike(data)).compute())
