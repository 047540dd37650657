"""Probabilistic PCA (Tipping & Bishop 1999), closed form from one pass of moments."""

from __future__ import annotations

import numbers

import dask.array as da
import numpy as np

from .._validation import check_random_state_seed, check_scalar
from ..io._matrix import MatrixInput
from .pca import PCA


class PPCA(PCA):
    """Probabilistic PCA: ``x = W z + μ + ε``, ``z ~ N(0, I_k)``, ``ε ~ N(0, σ² I_d)``.

    The maximum-likelihood solution (Tipping & Bishop 1999) from the sample covariance
    ``S = U Λ Uᵀ``: ``μ`` is the sample mean, ``σ² = (1/(d−k)) Σ_{j>k} λ_j`` the mean of the
    discarded eigenvalues, and ``W = U_k (Λ_k − σ² I)^½`` (taking the rotation R = I).

    Parameters
    ----------
    n_components : int or None
        Latent dimension k; must be smaller than the data's rank for a proper σ² > 0.
    svd_solver, n_oversamples, n_power_iter, random_state
        As in :class:`PCA`, which computes the spectrum.

    Attributes
    ----------
    W_ : ndarray of shape (n_features, n_components)
        Loading matrix.
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal ``U_kᵀ`` (same sign convention as :class:`PCA`).
    noise_variance_ : float
        σ².
    posterior_covariance_ : ndarray of shape (n_components, n_components)
        ``σ² M⁻¹`` with ``M = WᵀW + σ² I``; the covariance of ``z`` given any ``x``.
    mean_, explained_variance_, explained_variance_ratio_, singular_values_,
    n_samples_, n_features_in_, n_components_, n_passes_
        As in :class:`PCA`.

    Notes
    -----
    Passes over the data: 1 (the one-pass moments of :class:`PCA`), then small k-dimensional
    algebra on the client. Memory per worker: one row chunk plus d × d partials.
    ``transform`` is the posterior mean ``M⁻¹ Wᵀ (x − μ)``; ``inverse_transform`` maps
    ``z ↦ W z + μ``; ``score_samples`` is the exact Gaussian log-likelihood under
    ``C = W Wᵀ + σ² I`` computed from k-dimensional factors (Woodbury), never inverting a
    d × d matrix.

    References
    ----------
    Tipping, M. E. & Bishop, C. M. (1999). Probabilistic principal component analysis.
    JRSS B 61(3), 611–622.
    """

    def __init__(
        self,
        n_components: int | None = None,
        *,
        svd_solver: str = "auto",
        n_oversamples: int = 10,
        n_power_iter: int = 4,
        random_state=None,
    ):
        super().__init__(
            n_components,
            svd_solver=svd_solver,
            n_oversamples=n_oversamples,
            n_power_iter=n_power_iter,
            random_state=random_state,
        )

    def _fit(self, data: MatrixInput) -> None:
        super()._fit(data)
        self._set_loadings_from_spectrum()

    def _set_loadings_from_spectrum(self) -> None:
        sigma2 = self.noise_variance_
        scale = np.sqrt(np.maximum(self.explained_variance_ - sigma2, 0.0))
        self.W_ = self.components_.T * scale
        self._set_posterior()

    def _set_posterior(self) -> None:
        W, sigma2 = self.W_, self.noise_variance_
        M = W.T @ W + sigma2 * np.eye(W.shape[1])
        self._M_inv = np.linalg.inv(M)
        self.posterior_covariance_ = sigma2 * self._M_inv

    def _model_basis(self):
        # Eigen-form of W Wᵀ + σ² I, valid for any W (closed form or EM):
        # W = U diag(s) Rᵀ  ⇒  C = U diag(s² + σ²) Uᵀ + σ² (I − U Uᵀ).
        U, s, _ = np.linalg.svd(self.W_, full_matrices=False)
        sigma2 = float(self.noise_variance_)
        return U, s**2 + sigma2, sigma2

    def _transform_matrix(self) -> np.ndarray:
        if not hasattr(self, "_M_inv"):
            self._set_posterior()
        return self.W_ @ self._M_inv  # (x − μ) W M⁻¹ = (M⁻¹ Wᵀ (x − μ))ᵀ, M symmetric

    def _inverse_matrix(self) -> np.ndarray:
        return self.W_.T

    def sample(self, n_samples: int = 1, random_state=None, *, chunks: int | None = None):
        """Draw samples ``x = W z + μ + σ ε`` from the fitted model.

        Parameters
        ----------
        n_samples : int
        random_state : int, Generator or None
        chunks : int, optional
            Rows per block; if given, a lazy dask array is returned (each block seeded from
            ``random_state`` and its index, so the draw does not depend on the cluster).

        Returns
        -------
        X : ndarray or dask array of shape (n_samples, n_features)
        """
        self._check_fitted()
        check_scalar(n_samples, "n_samples", kind=numbers.Integral, low=1)
        seed = check_random_state_seed(random_state)
        W, mu, sigma = self.W_, self.mean_, np.sqrt(self.noise_variance_)
        if chunks is None:
            return _sample_block(n_samples, W, mu, sigma, seed)
        sizes = [chunks] * (n_samples // chunks) + ([n_samples % chunks] if n_samples % chunks else [])
        children = seed.spawn(len(sizes))
        blocks = [
            da.from_delayed(
                _delayed_sample(m, W, mu, sigma, child), shape=(m, W.shape[0]), dtype=np.float64
            )
            for m, child in zip(sizes, children)
        ]
        return da.concatenate(blocks, axis=0)

    def _state_to_save(self) -> dict:
        state = super()._state_to_save()
        state.pop("posterior_covariance_", None)  # derived from W_ and σ²
        return state

    def _restore_state(self, state: dict) -> None:
        super()._restore_state(state)
        self._set_posterior()


def _sample_block(m, W, mu, sigma, seed):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((m, W.shape[1]))
    eps = rng.standard_normal((m, W.shape[0]))
    return z @ W.T + mu + sigma * eps


def _delayed_sample(m, W, mu, sigma, seed):
    import dask

    return dask.delayed(_sample_block, pure=True)(m, W, mu, sigma, seed)


__all__ = ["PPCA"]
