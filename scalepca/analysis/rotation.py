"""Varimax and promax rotation of a fitted linear model's leading EOFs
(:class:`Rotator`).

The rotation itself is small (k × k, on the client); the rotated scores are the
model's own projection of the data, so :meth:`Rotator.transform` takes whatever the
model's ``transform`` takes and is one blockwise map per row block.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from .bootstrap import BootstrapEOF
from .eof import _check_centred, _check_model, _check_shape, _n_modes, _total_variance

__all__ = ["Rotator"]


def _varimax(L: np.ndarray, max_iter: int, rtol: float) -> np.ndarray:
    """Orthogonal k × k rotation R maximising Kaiser's normalised varimax criterion of
    ``L R``.

    ``L`` (d × k) loadings. Rows are scaled to unit length (Kaiser normalisation) and
    R is found by the classical fixed-point iteration: with B = L R, the gradient of
    the varimax criterion is G = Lᵀ (B³ − B · diag(mean of B² over rows)); the next R
    is the orthogonal polar factor of G (U Vᵀ from G's SVD). The sum of G's singular
    values grows to the criterion's maximum; iteration stops when its relative change
    falls below ``rtol``.
    """
    d, k = L.shape
    norms = np.sqrt((L * L).sum(axis=1))
    A = L / (norms + np.finfo(L.dtype).eps)[:, None]
    R = np.eye(k)
    crit = 0.0
    for _ in range(max_iter):
        B = A @ R
        B2 = B * B
        G = A.T @ (B * (B2 - B2.sum(axis=0) / d))
        U, s, Vt = np.linalg.svd(G)
        R = U @ Vt
        prev, crit = crit, s.sum()
        if abs(crit - prev) / crit < rtol:
            return R
    raise RuntimeError(
        f"varimax did not converge in max_iter={max_iter} "
        f"iterations (rtol={rtol}); raise max_iter"
    )


def _promax(L: np.ndarray, power: int, max_iter: int, rtol: float):
    """(rotated loadings, rotation matrix T) of Hendrickson & White's promax, ``L T``.

    Varimax first; then the target P = sign(V)|V|^power of the row-normalised varimax
    loadings V (each column scaled by its largest |value|); T is the least-squares
    map of V onto P with columns scaled so that the implied factor correlation matrix
    has a unit diagonal. ``power=1`` leaves the varimax solution.
    """
    R = _varimax(L, max_iter, rtol)
    V = L @ R
    if power == 1:
        return V, R
    norms = np.sqrt((V * V).sum(axis=1))
    Vn = V / (norms + np.finfo(V.dtype).eps)[:, None]
    target = Vn / np.abs(Vn).max(axis=0)
    target = np.sign(target) * np.abs(target) ** power
    Q, *_ = np.linalg.lstsq(Vn, target, rcond=None)
    # columns scaled by the diagonal of (QᵀQ)⁻¹: unit-variance rotated scores
    Q = Q * np.sqrt(np.diag(np.linalg.inv(Q.T @ Q)))[None, :]
    return V @ Q, R @ Q


class Rotator(BaseEstimator):
    r"""Varimax (``power=1``) or promax (``power>1``) rotation of a model's leading
    EOFs.

    The loadings :math:`U_k \sqrt{\lambda}` (``components_[:n_modes]ᵀ`` scaled by the
    square root of their variances) are rotated with Kaiser normalisation; the rotated
    modes are sorted by the variance they explain and given a sign that makes their
    largest-magnitude entry positive, as xeofs' ``EOFRotator`` does.

    Parameters
    ----------
    n_modes : int, default=10
        Number of leading modes to rotate (at least 2, at most the model's components).
    power : int, default=1
        1 gives varimax (orthogonal); larger values give promax (oblique), the power the
        varimax loadings are raised to for the target.
    max_iter : int, default=1000
        Maximum varimax iterations.
    rtol : float, default=1e-8
        Relative change of the varimax criterion at which the iteration stops.

    Attributes
    ----------
    components_ : ndarray of shape (n_modes, n_features)
        Rotated patterns, unit norm (NaN at features the model left out).
    rotation_matrix_ : ndarray of shape (n_modes, n_modes)
        T with rotated loadings = loadings · T (before sorting; columns in the original
        rotation order).
    explained_variance_ : ndarray of shape (n_modes,)
        Variance of each rotated mode (squared norm of its loading), decreasing.
    explained_variance_ratio_ : ndarray of shape (n_modes,)
        The same as fractions of the model's total variance.
    order_ : ndarray of shape (n_modes,)
        Rotation-order index of each sorted mode.
    n_features_in_ : int
        Number of features of the rotated model.
    components_xr_ : DataArray
        ``components_`` over ``mode`` and the original feature dims (models fitted on
        xarray).

    Notes
    -----
    ``fit`` reads no data: it works on the d × k loadings and k × k matrices on the
    client (memory O(d·k)); it rotates the EOFs of a PCA, a PPCA or a BootstrapEOF.
    ``transform`` is lazy: the model's projection plus a k × k product per row block,
    one pass when computed.

    References
    ----------
    Kaiser, H. F. (1958). The varimax criterion for analytic rotation in factor
    analysis. Psychometrika, 23(3), 187–200.

    Hendrickson, A. E. & White, P. O. (1964). Promax: a quick method for rotation to
    oblique simple structure. British Journal of Statistical Psychology, 17, 65–70.

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 3)) @ rng.standard_normal((3, 20))
    >>> pca = scalepca.PCA(n_components=3).fit(X)
    >>> rot = scalepca.Rotator(n_modes=3).fit(pca)             # reads no data
    >>> rot.components_.shape, rot.rotation_matrix_.shape
    ((3, 20), (3, 3))
    >>> bool(np.isclose(rot.explained_variance_.sum(), pca.explained_variance_.sum()))
    True
    >>> rot.transform(X).shape                                  # rotated scores
    (500, 3)
    """

    def __init__(
        self,
        n_modes: int = 10,
        *,
        power: int = 1,
        max_iter: int = 1000,
        rtol: float = 1e-8,
    ):
        self.n_modes = n_modes
        self.power = power
        self.max_iter = max_iter
        self.rtol = rtol

    def fit(self, model) -> Rotator:
        """Rotate the leading ``n_modes`` EOFs of the fitted ``model``.

        A model fitted with ``zero_center=False`` is refused (the loadings and score
        scaling need the covariance's eigenvalues).

        Parameters
        ----------
        model : PCA, PPCA or BootstrapEOF
            A fitted model; a :class:`~scalepca.analysis.bootstrap.BootstrapEOF` lets
            EOFs, their bootstrap and their rotation take the bootstrap's passes only.
            :meth:`transform` needs a model that projects data (PCA, PPCA).

        Returns
        -------
        self : Rotator
            The fitted rotation.
        """
        # EOFs that are the covariance's eigenvectors: PCA's and PPCA's (which project
        # data) and BootstrapEOF's (which does not: its rotation has no transform)
        _check_model(model, project=not isinstance(model, BootstrapEOF))
        _check_centred(model, "Rotator")
        k = _n_modes(model, self.n_modes)
        if k < 2:
            raise ValueError(
                f"n_modes must be at least 2 to rotate; got {self.n_modes}"
            )
        if (
            isinstance(self.power, bool)
            or not isinstance(self.power, (int, np.integer))
            or self.power < 1
        ):
            raise ValueError(f"power must be an integer ≥ 1; got {self.power!r}")
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(
                f"max_iter must be a positive integer; got {self.max_iter!r}"
            )
        if not (isinstance(self.rtol, (int, float)) and self.rtol > 0):
            raise ValueError(f"rtol must be a positive number; got {self.rtol!r}")
        comps = np.asarray(model.components_[:k], dtype=np.float64)
        keep = np.isfinite(comps).all(axis=0)
        lam = np.asarray(model.explained_variance_[:k], dtype=np.float64)
        loadings = comps[:, keep].T * np.sqrt(lam)
        rotated, T = _promax(
            loadings, int(self.power), int(self.max_iter), float(self.rtol)
        )
        var = (rotated * rotated).sum(axis=0)
        order = np.argsort(var)[::-1]
        rot = rotated[:, order] / np.sqrt(var[order])
        peak = rot[np.abs(rot).argmax(axis=0), np.arange(k)]
        sign = np.where(peak < 0, -1.0, 1.0)
        comps_out = np.full((k, comps.shape[1]), np.nan)
        comps_out[:, keep] = (rot * sign).T
        # scores: unit-norm projections times (Tᵀ)⁻¹ (T itself for varimax), sorted,
        # scaled to the rotated modes' norms √(var (n − 1)), signed like the components
        n = model.n_samples_
        score_map = np.linalg.inv(T).T / np.sqrt(lam * (n - 1))[:, None]
        score_map = (
            score_map[:, order] * (np.sqrt(var[order] * (n - 1)) * sign)[None, :]
        )
        self.components_ = comps_out
        self.rotation_matrix_ = T
        self.explained_variance_ = var[order]
        self.explained_variance_ratio_ = var[order] / _total_variance(model)
        self.order_ = order
        self.n_features_in_ = comps.shape[1]
        self._score_map = score_map
        self._model = model
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "components_")

    def _check_fitted(self):
        if not self.__sklearn_is_fitted__():
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(
                "this Rotator is not fitted yet; call fit(model) first"
            )

    def transform(self, X):
        """Rotated scores of ``X``, lazily.

        ``X`` is whatever the model's ``transform`` takes (the raw field in its own
        layout and units, the matrix of ``open_matrix``, an array of the fitted
        features) and is prepared as it prepares it, standardised by ``scale_`` when the
        model standardises: the rotated scores are the model's projections times a k × k
        map, one blockwise map.

        On the training data these equal xeofs' rotated ``scores()`` (up to the sign
        convention both share); their variances are ``explained_variance_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data as the rotated model's ``transform`` takes them.

        Returns
        -------
        scores : array of shape (n_samples, n_modes)
            Of the input's kind: a DataArray over (sample dims, ``mode``), a dask or a
            NumPy array.
        """
        self._check_fitted()
        k = self.components_.shape[0]
        _check_model(self._model, project=True)
        _check_shape(self._model, X)
        # one map per block: (x − mean) / scale · Cᵀ · score_map
        # modes 1, 2, ... as the model's
        return self._model.project(X, self._model.eof_matrix(k) @ self._score_map)

    @property
    def components_xr_(self):
        """``components_`` over ``mode`` and the original feature dims (xarray-fitted
        models)."""
        self._check_fitted()
        model = self._model
        t = (
            model.components_xr_
            if hasattr(model, "components_xr_")
            else model.components()
        )
        if not hasattr(t, "isel"):
            raise AttributeError(
                f"components_xr_: the {type(model).__name__} was not fitted "
                "on a labelled field (xarray)"
            )
        k = self.components_.shape[0]
        ref = t.isel(mode=slice(0, k))
        # the model's components map feature by feature onto its grid: place ours the
        # same way
        flat = np.asarray(self._model.components_[:k])
        grid = ref.values.reshape(k, -1)
        pos = _feature_positions(flat, grid)
        values = np.full(grid.shape, np.nan)
        values[:, pos] = self.components_
        return ref.copy(data=values.reshape(ref.shape)).rename("rotated_components")


def _feature_positions(flat: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Column of ``grid`` (k × d, the model's components on its grid) holding each
    feature."""
    if grid.shape != flat.shape:
        raise ValueError("the model's components and its grid view differ in size")
    # both are the same numbers in a permuted feature order: match columns by their
    # values
    keys_flat = np.ascontiguousarray(np.nan_to_num(flat.T, nan=np.inf))
    keys_grid = np.ascontiguousarray(np.nan_to_num(grid.T, nan=np.inf))
    view = np.dtype((np.void, keys_flat.dtype.itemsize * keys_flat.shape[1]))
    of = np.argsort(keys_flat.view(view).ravel(), kind="stable")
    og = np.argsort(keys_grid.view(view).ravel(), kind="stable")
    pos = np.empty(flat.shape[1], dtype=np.int64)
    pos[of] = og
    return pos
