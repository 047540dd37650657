"""The latent Gaussian model shared by PCA and PPCA (Tipping & Bishop 1999).

A fitted model is described by an orthonormal basis ``U`` (d × k), the model variances
``lam`` along it (k,) and the isotropic noise variance ``sigma2`` in the orthogonal
complement:

    C = U diag(lam) Uᵀ + sigma2 (I − U Uᵀ),   lam_i = max(eigenvalue_i, sigma2).

This equals ``W Wᵀ + sigma2 I`` with ``W = U diag(sqrt(lam − sigma2))``. Everything
below uses only the k-dimensional factors: no d × d matrix is inverted or factored.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np

from .base import caller_stacklevel


def _loglike_block(x, mean, U, lam, sigma2):
    import scipy.sparse

    if scipy.sparse.issparse(x):  # centred implicitly: ‖x − μ‖² = ‖x‖² − 2 xᵀμ + ‖μ‖²
        x = scipy.sparse.csr_matrix(x, dtype=np.float64)
        proj = np.asarray(x @ U) - mean @ U
        sq = (
            np.asarray(x.multiply(x).sum(axis=1)).ravel()
            - 2 * np.asarray(x @ mean).ravel()
            + mean @ mean
        )
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
    """``get_covariance``, ``get_precision``, ``score_samples``, ``score`` from the k
    factors.

    A standardised fit (``scale_`` not all ones) models ``x / scale_``; the
    covariance and precision returned here are those of ``x`` itself, on the matrix
    the model was fitted on (weighted, when ``open_matrix`` applied weights, as
    ``mean_`` and ``components_``). The density (``score_samples``, ``score``) is
    that of the data in their own units: every preparation — weights and
    ``standardize`` alike — enters with its log-Jacobian, over the kept features (see
    :meth:`score_samples`). A fit with ``zero_center=False`` (a truncated SVD) is no
    Gaussian model: all four refuse it.
    """

    def _check_gaussian(self, what: str) -> None:
        """Refuse ``what`` (before reading any data) for a model that describes no
        Gaussian: ``PCA(zero_center=False)``, whose zero ``mean_`` is not the data's
        mean and whose ``explained_variance_`` are its scores' variances, not the
        covariance's eigenvalues (a model built from them gave a log-likelihood of
        −26.8 where PCA's is −23.3)."""
        self._check_fitted()
        if not getattr(self, "zero_center", True):
            raise ValueError(
                f"{what} is undefined with zero_center=False: {type(self).__name__}"
                "(zero_center=False) is a truncated SVD of the uncentred data and "
                "fits no Gaussian model (mean_ is 0, not the data's mean; "
                "explained_variance_ are the scores' variances, not the covariance's "
                "eigenvalues); fit with zero_center=True for the likelihood and the "
                "model covariance"
            )

    def _kept_scale(self) -> np.ndarray | None:
        """The per-feature scales on the kept features, or ``None`` when there are
        none."""
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
                "the fitted covariance is singular (noise_variance_ is 0 with fewer "
                "components than features, or a zero variance); the Gaussian "
                "likelihood is undefined — use fewer components than the data's rank"
            )

    def get_covariance(self) -> np.ndarray:
        r"""Model covariance :math:`W W^\top + \sigma^2 I` of shape (n_features,
        n_features).

        In the units of ``mean_``: those of the data, or of the weighted matrix when
        the model was fitted on ``open_matrix(..., weights=w)`` (the covariance of
        the data themselves is this divided by :math:`w w^\top`); NaN rows and
        columns at features left out of the fit.
        """
        self._check_gaussian("get_covariance")
        U, lam, sigma2 = self._model_basis()
        C = (U * (lam - sigma2)) @ U.T
        C[np.diag_indices_from(C)] += sigma2
        scale = self._kept_scale()
        if scale is not None:
            C = C * np.outer(scale, scale)
        return self._widen_square(C)

    def _widen_square(self, C: np.ndarray) -> np.ndarray:
        """A kept-features d × d matrix widened with NaN rows/columns at dropped
        features."""
        keep = getattr(self, "_features_kept", None)
        if keep is None:
            return C
        full = np.full((keep.size, keep.size), np.nan)
        full[np.ix_(keep, keep)] = C
        return full

    def get_precision(self) -> np.ndarray:
        r"""Inverse model covariance by the Woodbury identity (no d × d inversion).

        .. math::

            C^{-1} = U \operatorname{diag}(1/\lambda)\, U^\top + (I - U U^\top) / \sigma^2 .
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
        r"""Log-density of each sample of ``X`` under the fitted Gaussian model (lazy
        for dask).

        The density is that of the data in the units they are given in (to
        ``transform``: raw, unweighted, unstandardised), whatever the model did to them
        before fitting: each preparation enters with the log of its Jacobian,
        :math:`\sum_j (\log w_j - \log s_j)` over the kept features (:math:`s` =
        ``scale_``), :math:`w` the weights of ``open_matrix(..., weights=...)``. So
        ``score_samples(x)`` equals ``scipy.stats.multivariate_normal(m, C).logpdf(x)``
        with the model's mean and covariance carried back to the data's units (:math:`m`
        = ``mean_`` :math:`/\, w`, :math:`C` = ``get_covariance()``
        :math:`/\, (w w^\top)`), and models fitted with other weights or with and
        without ``standardize`` score the same data comparably. Features left out of the
        fit (NaN in every sample: a land mask) are not scored: it is the density of the
        kept features. A weight of 0 on a kept feature makes that density undefined
        (every value of the feature maps to 0): refused before reading ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New data: a NumPy, dask or sparse array, a DataFrame, a DataArray or
            Dataset in the fitted data's own layout and units, or a matrix
            :func:`scalepca.open_matrix` made.

        Returns
        -------
        ll : same kind as ``X``, shape (n_samples,)
            The log-density of each sample.
        """
        logjac = self._check_scorable("score_samples")
        data = self._transform_input(X)
        return data.wrap_samples(self._loglike(data, logjac))

    def score(self, X, y=None) -> float:
        """Average log-density of the samples (one pass over ``X``).

        The mean of :meth:`score_samples`, in the data's own units as described there.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New data: a NumPy, dask or sparse array, a DataFrame, a DataArray or
            Dataset in the fitted data's own layout and units, or a matrix
            :func:`scalepca.open_matrix` made.
        y : None
            Ignored; present for scikit-learn's API.

        Returns
        -------
        ll : float
            The mean log-density of the samples.
        """
        logjac = self._check_scorable("score")
        data = self._transform_input(X)
        return float(da.mean(self._loglike(data, logjac)).compute())

    def _loglike(self, data, logjac: np.ndarray):
        """The lazy per-sample log-density of checked input (``_transform_input``) in
        the data's units: the model's density of the prepared rows plus
        ``logjac.sum()``."""
        U, lam, sigma2 = self._model_basis()
        Xd, mean = self._standardized(self._select_features(data.data))
        ll = Xd.map_blocks(
            _loglike_block,
            mean,
            U,
            lam,
            sigma2,
            drop_axis=1,
            dtype=np.float64,
            meta=np.empty((0,), dtype=np.float64),
        )
        return ll + float(logjac.sum())

    def _check_scorable(self, what: str) -> np.ndarray:
        """Refuse ``what`` for a model with no density (before reading any data);
        return the log-Jacobian of its preparation (:meth:`_log_jacobian`)."""
        self._check_gaussian(what)
        self._check_nonsingular(*self._model_basis())
        return self._log_jacobian(what)

    def _log_jacobian(self, what: str) -> np.ndarray:
        """Per kept feature, ``log w_j − log scale_j``: the log of the derivative of the
        prepared value (``x_j w_j / scale_j`` up to a shift) by the data's value
        ``x_j``.

        A zero weight on a kept feature is refused (the data's density is undefined
        there); checked on the model alone, before any data are read.
        """
        prep = getattr(self, "_preprocessing", None)
        w = None if prep is None else prep.weights
        logjac = np.zeros(self.n_features_in_)
        if w is not None:
            w = np.asarray(w, dtype=np.float64)
            zero = w == 0
            zero &= self.features_kept_  # a feature left out of the fit may weigh 0
            zero = np.flatnonzero(zero)
            if zero.size:
                shown = ", ".join(map(str, zero[:10])) + (
                    ", …" if zero.size > 10 else ""
                )
                raise ValueError(
                    f"{what} is undefined with a weight of 0 on {zero.size} "
                    f"feature(s) the model was fitted on (column(s) {shown} of the "
                    f"matrix): the density of "
                    "the data in their own units needs every weight positive, as a "
                    "zero weight maps all of its feature's values to 0. Make those "
                    "features NaN in the data (features NaN in every sample are left "
                    "out of the fit, as a land mask) or give them a positive weight"
                )
            with np.errstate(divide="ignore"):  # zero weights on features left out
                logjac = np.log(w)
        logjac = self._kept(logjac)
        scale = self._kept_scale()
        return logjac if scale is None else logjac - np.log(scale)

    def _standardized(self, Xd):
        """``(Xd / scale, mean / scale)`` on the kept features (lazy, blockwise): the
        data the model describes. Without standardisation ``Xd`` and the mean."""
        mean = self._kept(self.mean_)
        scale = self._kept_scale()
        if scale is None:
            return Xd, mean
        from ..linalg.sparse import scale_columns

        return (None if Xd is None else scale_columns(Xd, scale)), mean / scale


def _sample_block(m, W, mu, sigma, seed):
    """``m`` draws of ``x = W z + μ + σ ε`` (z, ε standard normal), from ``seed``."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((m, W.shape[1]))
    eps = rng.standard_normal((m, W.shape[0]))
    return z @ W.T + mu + sigma * eps


def _delayed_sample(m, W, mu, sigma, seed):
    import dask

    return dask.delayed(_sample_block, pure=True)(m, W, mu, sigma, seed)


def _warn_rank_deficient(k: int) -> None:
    """PPCA's note that a rank-deficient fit has a singular model covariance."""
    warnings.warn(
        f"PPCA: the data's rank is at most n_components={k} (the smallest "
        "eigenvalues of the covariance are 0 to rounding), so noise_variance_ "
        "is 0 and the model covariance is singular: score, score_samples and "
        "get_precision are undefined (they raise); transform gives the limit "
        "of the posterior means. Use fewer components than the data's rank.",
        UserWarning,
        stacklevel=caller_stacklevel(),
    )


def _rank_tol(d: int, ev) -> float:
    """Eigenvalues of the covariance at or below this are zero to rounding (d ε
    λ_max)."""
    return d * np.finfo(np.float64).eps * float(np.max(ev, initial=0.0))
