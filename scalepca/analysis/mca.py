"""Maximum covariance analysis (MCA) of two fields over the same samples.

MCA (Bretherton et al., 1992; "SVD analysis") finds pairs of patterns, one per field,
whose expansion coefficients covary most: the singular vectors of the cross-covariance

    C = X_cᵀ Y_c / (n − 1)        (d_x × d_y, X_c and Y_c the centred fields)

``C = U S Vᵀ``: the left singular vectors ``U`` are the patterns of ``X``, the right
``V`` those of ``Y``, the singular values ``s_i`` the covariances of the expansion
coefficients ``X_c u_i`` and ``Y_c v_i``; the squared covariance fraction of a mode is
``s_i² / ‖C‖²_F``. As in xeofs' ``MCA`` (with ``use_pca=False``), the fields enter as
they are given: weight them first (``open_matrix(..., weights="sqrt_coslat")``, xeofs'
``use_coslat``); ``standardize=True`` divides each feature by its standard deviation.

Two solvers (``solver``):

* ``"covariance"`` makes **one pass** over the two fields: each pair of aligned row
  blocks is reduced to per-feature moments and a d_x × d_y block of centred cross
  products, merged in a tree (:func:`scalepca.linalg.passes.reduce_rows`, the parallel
  update of Chan et al.); the SVD of C runs on the client, so d_x · d_y must fit in
  memory (``max_cross_size``).
* ``"randomized"`` never forms C (two 1M-cell fields would need 8 TB): block Krylov on
  the dilation ``[[0, C], [Cᵀ, 0]]``, one read of both fields per product, each pair of
  row blocks giving ``x_bᵀ(y_b V)`` and ``y_bᵀ(x_b U)`` in one task, the means gathered
  with the first product (:mod:`scalepca.solvers.cross_krylov`,
  :mod:`scalepca.linalg.cross`; the eigensolver is PCA's ``svd_solver="randomized"``).
  At most ``n_power_iter + 2`` passes, fewer with ``tol``; residual norms in
  ``residual_norms_``. ``‖C‖²_F``, the denominator of the squared covariance fraction,
  has no out-of-core product: the Krylov basis gives the squared covariance it captures
  (a lower bound, exact once the basis is invariant — e.g. when ``n − 1`` plus the start
  block is at most its width per field) and the fields' total variances Cauchy–Schwarz's
  upper bound; otherwise it is exact only from the n × n sample Grams,
  ``trace(G_x G_y) / (n − 1)²``, one more pass (``total="auto"`` makes it up to 4,096
  samples, ``"exact"`` always, ``"bounds"`` never). ``total_squared_covariance_`` and
  ``squared_covariance_fraction_`` are NaN unless exact; their bounds are always given.
* ``"auto"``: ``"covariance"`` when d_x · d_y ≤ ``max_cross_size`` (8 bytes each: 400 MB
  by default), else ``"randomized"``.

Features that are NaN in every sample (land) are left out and come back NaN; a feature
NaN at only some samples is refused. Homogeneous and heterogeneous maps (the
correlations of each field with its own and with the other field's expansion
coefficients) take one more pass.

Examples
--------
>>> X = scalepca.open_matrix("sst.nc", variable="sst", sample_dims="time",
...                          weights="sqrt_coslat")
>>> Y = scalepca.open_matrix(hgt, sample_dims="time", weights="sqrt_coslat")
>>> mca = MCA(n_components=4).fit(X, Y)                       # one pass
>>> big = MCA(4, solver="randomized", random_state=0).fit(X, Y)  # ≤ n_power_iter + 2 passes
>>> mca.components_xr_[0], mca.squared_covariance_fraction_
>>> zx, zy = mca.transform(X, Y)                         # lazy (time, mode)
>>> (hx, hy), (gx, gy) = mca.patterns(X, Y)              # one pass: homogeneous, heterogeneous
>>> mca.save("mca.zarr"); scalepca.load("mca.zarr")     # a zarr group, no pickle

References
----------
Bretherton, C. S., Smith, C. and Wallace, J. M. (1992). An intercomparison of methods
for finding coupled patterns in climate data. J. Climate, 5, 541–560.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator

from .._validation import check_random_state_seed, full_rows
from ..linalg import feature_scale, passes
from ..models._params import (
    Choice,
    Int,
    Other,
    Param,
    Real,
    Seed,
    Shape,
    check_parameters,
    parameter_problems,
)
from ..models._saving import SavedModel
from ..solvers.cross_krylov import cross_krylov, cross_start
from . import _prep
from .eof import _cross_block, _label, _merge_cross

__all__ = ["MCA"]

#: the largest d_x · d_y (entries of the cross-covariance) formed on the client by
#: default
MAX_CROSS_SIZE = 50_000_000

#: ``total="auto"`` makes the exact ``‖C‖²_F`` of the randomized solver from the n × n
#: sample Grams (one more pass, n × n partials: 128 MB at this n) up to this many
#: samples
EXACT_TOTAL_SAMPLES = 4096

#: the solvers (``solver``); ``"auto"`` picks ``"covariance"`` up to ``max_cross_size``
SOLVERS = ("auto", "covariance", "randomized")


def _check_n_components(value, name, params, shape):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"n_components must be a positive integer; got {value!r}")
    return int(value)


def _pair_block(x, y) -> dict:
    """Moments of ``[x, y]`` (one aligned row block of each field) and their centred
    cross products ``(x − x̄)ᵀ (y − ȳ)``, with the NaN count per feature (NaN entries
    enter as 0: the features they fall in are left out or refused after the pass)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    nan_x, nan_y = np.isnan(x).sum(axis=0), np.isnan(y).sum(axis=0)
    if nan_x.any():
        x = np.where(np.isnan(x), 0.0, x)
    if nan_y.any():
        y = np.where(np.isnan(y), 0.0, y)
    out = _cross_block(x, y)
    out["nan"] = np.concatenate([nan_x, nan_y])
    return out


def _merge_pairs(*parts: dict) -> dict:
    """Tree merge of :func:`_pair_block` partials (the NaN counts add up)."""
    nan = sum(p["nan"] for p in parts)
    out = _merge_cross(*({k: v for k, v in p.items() if k != "nan"} for p in parts))
    out["nan"] = nan
    return out


def _weights(data, d: int) -> np.ndarray:
    """The weights (d,) a matrix was multiplied by (``open_matrix(weights=...)``),
    else 1."""
    prep = data.prep
    if prep is None or prep.weights is None:
        return np.ones(d)
    return np.asarray(prep.weights, dtype=np.float64).reshape(d)


def _per_field(standardize):
    """``standardize`` for each field: one bool says it for both."""
    if isinstance(standardize, (bool, np.bool_)):
        return (standardize, standardize)
    return standardize


def _check_standardize(value, name, params, shape):
    pair = _per_field(value)
    if (
        not isinstance(pair, (list, tuple))
        or len(pair) != 2
        or not all(isinstance(s, (bool, np.bool_)) for s in pair)
    ):
        raise TypeError(
            f"{name} must be True, False or a pair "
            f"(for X, for Y) of them; got {value!r}"
        )
    return value


#: the saved names of the fields' feature coordinates
_TEMPLATES = ("_template_x_json", "_template_y_json")


def _fields_pair(X, Y, what: str = "fit"):
    """``(X, Y)``, also from ``X`` given as the pair ``[X, Y]`` (as ``scalepca run``
    opens the two variables of ``data.variable``)."""
    if Y is None and isinstance(X, (list, tuple)):
        if len(X) != 2:
            raise ValueError(
                f"MCA.{what} takes two fields, X and Y (or "
                f"the pair [X, Y]); got a list of {len(X)}"
            )
        return X[0], X[1]
    return X, Y


class MCA(SavedModel, BaseEstimator):
    """Maximum covariance analysis of two fields ``X`` (n × d_x) and ``Y`` (n × d_y).

    Parameters
    ----------
    n_components : int, default=2
        Number of coupled modes.
    standardize : bool or (bool, bool), default=False
        Divide each feature of X (first) and Y (second) by its standard deviation
        (``ddof=0``) in the field's own units, the weights of ``open_matrix`` kept (as
        xeofs' ``standardize`` with ``use_coslat``: standardised, then weighted).
    max_cross_size : int, default=50_000_000
        The largest d_x · d_y the client forms and decomposes (8 bytes each, 400 MB by
        default): ``solver="covariance"`` refuses larger pairs of fields before any
        pass, ``"auto"`` takes ``"randomized"`` for them.
    solver : {"auto", "covariance", "randomized"}, default="auto"
        ``"covariance"``: the cross-covariance in one pass, its SVD on the client
        (exact). ``"randomized"``: block Krylov on the dilated cross-covariance, one
        pass over both fields per product, nothing of size d_x · d_y anywhere.
        ``"auto"``: ``"covariance"`` up to ``max_cross_size`` entries, else
        ``"randomized"``.
    n_power_iter : int, default=4
        ``"randomized"``: at most ``n_power_iter + 2`` passes (products: the first with
        the means, one per power iteration, one last), fewer with ``tol``.
    n_oversamples : int, default=10
        ``"randomized"``: the Krylov start block holds ``n_components + n_oversamples``
        vectors per field.
    tol : float, default=0.0
        ``"randomized"``: stop at the first pass after which every mode's residual
        ``residual_norms_[i]`` is at most ``tol · singular_values_[i]``. 0 runs every
        pass.
    random_state : int, Generator or None
        Seed of the ``"randomized"`` start block (its only random part).
    total : {"auto", "exact", "bounds"}, default="auto"
        ``"randomized"``: how ``‖C‖²_F`` (the squared covariance fraction's denominator)
        is known when the Krylov basis does not give it exactly: ``"exact"`` from the n
        × n sample Grams of both fields (one more pass over their column strips, n × n
        per worker and on the client); ``"bounds"``: only its bounds (fractions NaN, no
        pass); ``"auto"``: ``"exact"`` up to 4,096 samples, else ``"bounds"``.

    Attributes
    ----------
    components_x_, components_y_ : ndarray (n_components, d_x) / (n_components, d_y)
        Singular vectors (unit norm; NaN at features left out). The sign of each pair
        makes the largest-magnitude entry of the X pattern positive.
    singular_values_ : ndarray (n_components,)
        Covariances of the paired expansion coefficients.
    squared_covariance_ : ndarray (n_components,)
        ``singular_values_ ** 2``.
    total_squared_covariance_ : float
        ``‖C‖²_F``, the sum of all squared singular values. ``"randomized"``: NaN when
        known only by its bounds (``total``, ``total_squared_covariance_bounds_``).
    total_squared_covariance_bounds_ : ndarray (2,)
        Lower and upper bounds of ``‖C‖²_F``: both ``‖C‖²_F`` with ``"covariance"``;
        with ``"randomized"`` the squared covariance the Krylov basis captures
        (``‖Cᵀ Q_x‖²_F``) and Cauchy–Schwarz's ``‖X_c‖²_F ‖Y_c‖²_F / (n − 1)²``; both
        ``‖C‖²_F`` when the basis is invariant under the operator (e.g. when ``n − 1``
        plus the start block is at most its width per field) or the sample Grams gave it
        (``total``).
    squared_covariance_fraction_ : ndarray (n_components,)
        ``squared_covariance_ / total_squared_covariance_`` (NaN when the total is).
    squared_covariance_fraction_bounds_ : ndarray (n_components, 2)
        The fractions against the upper and the lower bound of the total.
    residual_norms_ : ndarray (n_components,) or None
        ``"randomized"``: ``‖H z_i − σ_i z_i‖`` for the unit eigenvectors
        ``z_i = [u_i; v_i] / √2`` of the dilation (standardised as the fit is): ``σ_i``
        is within it of a singular value of C, and the patterns' angle error at most it
        over the gap. None with ``"covariance"`` (exact).
    solver_ : str
        The solver used (``"covariance"`` or ``"randomized"``).
    mean_x_, mean_y_ : ndarray
        Feature means (NaN at features left out).
    scale_x_, scale_y_ : ndarray or None
        Standard deviations divided out (``standardize``).
    n_samples_ : int
        Number of samples the two fields share.
    n_features_x_, n_features_y_ : int
        Number of features of ``X`` and of ``Y``.
    n_passes_ : int
        Passes over the two fields the fit made.
    components_xr_, components_y_xr_ : DataArray
        The patterns over ``mode`` and each field's original feature dims (xarray
        input).

    Notes
    -----
    ``"covariance"``: one pass over the two fields (their row blocks aligned: Y is
    rechunked to X's row chunks); per worker one row block of each plus O(d_x · d_y) for
    the partial cross products. The SVD of the d_x × d_y matrix runs on the client.

    ``"randomized"``: at most ``n_power_iter + 2`` passes over both fields (6 by
    default; one more when standardising scales are so far apart that the start block
    is rebuilt from the first product), fewer with ``tol``; each reads every pair of
    row panels once. One more over column strips for the exact ``‖C‖²_F`` (``total``)
    when the basis does not give it: n × n floats per worker and on the client. Per
    worker: a pair of row panels (at most 256 MB together) and partials of (d_x +
    d_y) × 2(n_components + n_oversamples) floats. Client: the Krylov basis and its
    products, 2 · (d_x + d_y) · 2(n_components + n_oversamples)(n_power_iter + 2)
    floats (two 1M-cell fields, 4 modes: 5.4 GB) — nothing of size d_x · d_y.

    References
    ----------
    Bretherton, C. S., Smith, C. & Wallace, J. M. (1992). An intercomparison of methods
    for finding coupled patterns in climate data. Journal of Climate, 5, 541–560.

    Musco, C. & Musco, C. (2015). Randomized block Krylov methods for stronger and
    faster approximate singular value decomposition. Advances in Neural Information
    Processing Systems 28. (``solver="randomized"``.)

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> rng = np.random.default_rng(0)
    >>> t = rng.standard_normal((300, 1))                # one signal in both fields
    >>> X = t @ rng.standard_normal((1, 40)) + 0.1 * rng.standard_normal((300, 40))
    >>> Y = t @ rng.standard_normal((1, 25)) + 0.1 * rng.standard_normal((300, 25))
    >>> mca = scalepca.MCA(n_components=2).fit(X, Y)     # one pass
    >>> mca.components_x_.shape, mca.components_y_.shape
    ((2, 40), (2, 25))
    >>> bool(mca.squared_covariance_fraction_[0] > 0.99)
    True
    >>> zx, zy = mca.transform(X, Y)                     # expansion coefficients
    >>> zx.shape, zy.shape
    ((300, 2), (300, 2))
    """

    #: the parameters (:mod:`scalepca.models._params`), read by fit, configs and load
    _parameters = {
        "n_components": Other((int,), _check_n_components),
        "standardize": Param(
            "other",
            (bool, list),
            _check_standardize,
            forms="true, false or a pair [for X, for Y] of them",
        ),
        "max_cross_size": Int(1),
        "solver": Choice(*SOLVERS),
        "n_power_iter": Int(0),
        "n_oversamples": Int(0),
        "tol": Real(0),
        "random_state": Seed(),
        "total": Choice("auto", "exact", "bounds"),
    }

    def __init__(
        self,
        n_components: int = 2,
        *,
        standardize=False,
        max_cross_size: int = MAX_CROSS_SIZE,
        solver: str = "auto",
        n_power_iter: int = 4,
        n_oversamples: int = 10,
        tol: float = 0.0,
        random_state=None,
        total: str = "auto",
    ):
        self.n_components = n_components
        self.standardize = standardize
        self.max_cross_size = max_cross_size
        self.solver = solver
        self.n_power_iter = n_power_iter
        self.n_oversamples = n_oversamples
        self.tol = tol
        self.random_state = random_state
        self.total = total

    # -- fit ---------------------------------------------------------------------------
    def _check_params(
        self, n: int | None = None, dx: int | None = None, dy: int | None = None
    ) -> tuple[tuple[bool, bool], str] | None:
        """The parameters checked: without the fields' sizes against the table alone
        (before anything is read); with them, the table, then the sizes:
        ``(standardize pair, solver)``."""
        if n is None:
            problems = parameter_problems(
                type(self), {p: getattr(self, p) for p in self._parameters}
            )
            if problems:
                raise problems[0][1]
            return None
        values = check_parameters(self, Shape(n, dx))
        k = values["n_components"]
        if k > min(dx, dy):
            raise ValueError(
                f"n_components={k} but the fields have {dx} and {dy} features"
            )
        fits = dx * dy <= self.max_cross_size
        solver = self.solver
        if solver == "auto":
            solver = "covariance" if fits else "randomized"
        if solver == "covariance" and not fits:
            raise ValueError(
                f"the cross-covariance has {dx:,} × {dy:,} = {dx * dy:,} "
                f"entries, over max_cross_size={self.max_cross_size:,}: use "
                "solver='randomized' (block Krylov, nothing of that size "
                "formed), coarsen or subset a field, or raise max_cross_size "
                "if the client holds 8 bytes per entry (twice, for the SVD)"
            )
        pair = tuple(_per_field(values["standardize"]))
        return (bool(pair[0]), bool(pair[1])), solver

    def fit(self, X, Y=None) -> MCA:
        """Fit on the two fields (same samples, same order).

        Parameters
        ----------
        X : array-like of shape (n_samples, d_x), or the pair ``[X, Y]``
            The first field: a matrix as the estimators take it (the output of
            :func:`scalepca.open_matrix`, a NumPy or dask array, a 2-D DataArray); or
            both fields as a pair, ``Y`` then left out.
        Y : array-like of shape (n_samples, d_y), optional
            The second field, over the same samples in the same order.

        Returns
        -------
        self : MCA
            The fitted model.
        """
        X, Y = _fields_pair(X, Y)
        self._check_params()
        if Y is None:
            raise TypeError("MCA.fit needs two fields: fit(X, Y) or fit([X, Y])")
        xin, yin = _prep.field_input(X, "X"), _prep.field_input(Y, "Y")
        (n, dx), (ny, dy) = xin.data.shape, yin.data.shape
        if n != ny:
            raise ValueError(
                f"X has {n} samples and Y {ny}: MCA pairs the same samples"
            )
        (std_x, std_y), solver = self._check_params(n, dx, dy)
        std = (std_x and _weights(xin, dx), std_y and _weights(yin, dy))
        if solver == "randomized":
            self._fit_randomized(xin.data, yin.data, std)
        else:
            self._fit_covariance(xin.data, yin.data, std)
        self._templates = (_prep.kept_features(xin), _prep.kept_features(yin))
        self._preparations = (
            xin.prep,
            yin.prep,
        )  # transform repeats them on new raw data
        return self

    def _fit_covariance(self, X, Y, std) -> None:
        """One pass: the cross-covariance, its SVD on the client."""
        n, dx = X.shape
        Xd = full_rows(X)
        Yd = Y.rechunk({0: Xd.chunks[0], 1: -1})
        parts = da.map_blocks(
            _pair_block,
            Xd,
            Yd,
            chunks=((1,) * Xd.numblocks[0], (1,)),
            dtype=object,
            meta=np.empty((0, 0), dtype=object),
        )
        with passes.counting(self, planned=1, chunks=Xd.numblocks[0]):
            self.n_passes_ = 0
            (mom,) = passes.compute(
                passes.reduce_rows(parts, None, _merge_pairs), name="cross covariance"
            )
        kx, ky = self._kept_features(mom["nan"], n, dx)
        sx, sy = self._scales(mom["ss"], n, dx, std)
        C = mom["cross"][np.ix_(kx, ky)] / (n - 1)
        scale_x = sx[kx] if sx is not None else np.ones(kx.sum())
        scale_y = sy[ky] if sy is not None else np.ones(ky.sum())
        C = C / np.outer(scale_x, scale_y)
        U, s, Vt = np.linalg.svd(C, full_matrices=False)
        k = int(self.n_components)
        total = float((C * C).sum())
        self._set_modes(
            U[:, :k],
            s[:k],
            Vt[:k].T,
            mom["mean"],
            (kx, ky),
            (sx, sy),
            n,
            total=total,
            bounds=(total, total),
            solver="covariance",
        )

    def _fit_randomized(self, X, Y, std) -> None:
        """Block Krylov on the dilated cross-covariance
        (:mod:`scalepca.solvers.cross_krylov`): the first pass's moments say which
        features are kept and their scales, the solver makes the other passes."""
        n, dx = X.shape
        k = int(self.n_components)
        rng = np.random.default_rng(check_random_state_seed(self.random_state))
        budget = int(self.n_power_iter) + 2
        exact_total = self.total == "exact" or (
            self.total == "auto" and n <= EXACT_TOTAL_SAMPLES
        )
        with passes.counting(self, planned=budget, chunks=X.numblocks[0]):
            self.n_passes_ = 0
            start = cross_start(X, Y, k + int(self.n_oversamples), rng)
            mom = start.moments
            kept = self._kept_features(mom["nan_features"], n, dx, mom["bad"])
            scales = self._scales(mom["ss"], n, dx, std)
            fit = cross_krylov(
                start,
                kept,
                scales,
                k,
                max_products=budget,
                tol=self.tol,
                rng=rng,
                exact_total=exact_total,
            )
        self._set_modes(
            fit.U,
            fit.s,
            fit.V,
            mom["mean"],
            kept,
            scales,
            n,
            total=fit.total,
            bounds=fit.bounds,
            solver="randomized",
            residuals=fit.residuals,
        )

    @staticmethod
    def _kept_features(nan, n: int, dx: int, bad: int = 0):
        """The features kept (``(kx, ky)``, masks): NaN at no sample. A feature NaN
        at some samples only, infinite values, or a field all NaN are refused."""
        partial = np.flatnonzero((nan > 0) & (nan < n))
        if partial.size:
            where = ["X" if j < dx else "Y" for j in partial[:3]]
            cols = [int(j if j < dx else j - dx) for j in partial[:3]]
            raise ValueError(
                f"{partial.size} features are NaN at some samples only (e.g. "
                f"{list(zip(where, cols, strict=True))}); MCA leaves out features "
                "NaN at every sample (land) and needs the others complete"
            )
        if bad:
            raise ValueError(
                f"the fields hold {bad} infinite values; MCA needs finite data"
            )
        keep = nan == 0
        kx, ky = keep[:dx], keep[dx:]
        if not kx.any() or not ky.any():
            raise ValueError("a field is NaN at every feature")
        return kx, ky

    @staticmethod
    def _scales(ss, n: int, dx: int, std):
        """The standardising scales ``(sx, sy)`` (d each, or None) from the centred
        sums of squares ``ss`` of ``[X, Y]``; ``std``: per field False, or the
        weights (d,) the field was multiplied by, kept through the standardisation."""
        var = ss / n  # ddof=0, as xeofs standardises
        # standardised in the fields' own units, then weighted (xeofs' order): x_w /
        # (σ_w / w)
        sx = None if std[0] is False else feature_scale(var[:dx], std[0])[0]
        sy = None if std[1] is False else feature_scale(var[dx:], std[1])[0]
        return sx, sy

    def _set_modes(
        self, U, s, V, mean, kept, scales, n, *, total, bounds, solver, residuals=None
    ) -> None:
        """Fitted attributes from the leading singular triplets of the kept features'
        (standardised) cross-covariance; ``total`` its ``‖C‖²_F`` (NaN if unknown),
        ``bounds`` (lower, upper) of it."""
        (kx, ky), (sx, sy) = kept, scales
        dx, dy, k = kx.size, ky.size, s.size
        sign = np.sign(U[np.abs(U).argmax(axis=0), np.arange(k)])
        U, V = U * sign, V * sign
        self.components_x_ = np.full((k, dx), np.nan)
        self.components_x_[:, kx] = U.T
        self.components_y_ = np.full((k, dy), np.nan)
        self.components_y_[:, ky] = V.T
        self.singular_values_ = np.asarray(s, dtype=np.float64)
        self.squared_covariance_ = self.singular_values_**2
        self.total_squared_covariance_ = float(total)
        self.total_squared_covariance_bounds_ = np.asarray(bounds, dtype=np.float64)
        self.squared_covariance_fraction_ = self.squared_covariance_ / float(total)
        with np.errstate(divide="ignore"):
            self.squared_covariance_fraction_bounds_ = (
                self.squared_covariance_[:, None]
                / self.total_squared_covariance_bounds_[::-1]
            )
        self.residual_norms_ = None if residuals is None else np.asarray(residuals)
        self.solver_ = solver
        self.mean_x_ = np.where(kx, mean[:dx], np.nan)
        self.mean_y_ = np.where(ky, mean[dx:], np.nan)
        self.scale_x_ = None if sx is None else np.where(kx, sx, np.nan)
        self.scale_y_ = None if sy is None else np.where(ky, sy, np.nan)
        self.n_samples_, self.n_features_x_, self.n_features_y_ = (
            int(n),
            int(dx),
            int(dy),
        )
        self._kept = (kx, ky)

    # -- outputs -----------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "components_x_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this MCA is not fitted yet; call fit(X, Y) first")

    def _projection(self, which: int):
        """(kept-feature mask, mean, map d_kept × k) of
        ``(x − mean) / scale · pattern``."""
        keep = self._kept[which]
        comps = (self.components_x_, self.components_y_)[which][:, keep].T
        mean = (self.mean_x_, self.mean_y_)[which][keep]
        scale = (self.scale_x_, self.scale_y_)[which]
        P = comps if scale is None else comps / scale[keep][:, None]
        return keep, mean, P

    def _scores(self, A, which: int):
        """(input, lazy n × k expansion coefficients) of field ``which`` (0: X, 1:
        Y)."""
        from ..io._stack import check_features
        from ..models.base import affine_map, refuse_nonfinite

        what = "XY"[which]
        preps = getattr(self, "_preparations", (None, None))
        ain = _prep.field_input(A, what, preps[which])
        check_features(getattr(self, "_templates", (None, None))[which], ain, what)
        d = (self.n_features_x_, self.n_features_y_)[which]
        if ain.data.shape[1] != d:
            raise ValueError(
                f"{what} has {ain.data.shape[1]} features; the model was fitted on {d}"
            )
        keep, mean, P = self._projection(which)
        A_kept = refuse_nonfinite(
            full_rows(ain.data)[:, np.flatnonzero(keep)], what=what
        )
        return ain, affine_map(A_kept, mean, P)

    def transform(self, X=None, Y=None):
        """Expansion coefficients (xeofs' ``scores``, unnormalised) of either field.

        ``(x − x̄) U`` and ``(y − ȳ) V`` (divided by the scales with ``standardize``),
        lazy, in the input's kind (a DataArray over the sample dims and ``mode``).

        Each field is taken as the fit's was made: data in the field's own layout and
        units (a DataArray with the fitted dims, a Dataset holding the fitted variable)
        are stacked and weighted by the model itself, as recorded at ``fit`` (also after
        ``save`` and ``load``; the grid is checked); a matrix ``open_matrix`` made is
        checked against that record (variable, dims, weights) and taken as it is.

        A NaN at a feature the model uses is refused (``ValueError``) when the
        coefficients are computed (by this call for NumPy input, whose coefficients it
        computes).

        Parameters
        ----------
        X : array-like of shape (n_samples, d_x), the pair ``[X, Y]``, or None
            The first field, in the fit's layout and units; or both fields as a pair.
        Y : array-like of shape (n_samples, d_y) or None
            The second field.

        Returns
        -------
        zx, zy : arrays of shape (n_samples, n_components) or None
            The coefficients of each field given, of the input's kind; None for a
            field not given.
        """
        self._check_fitted()
        X, Y = _fields_pair(X, Y, "transform")
        out = []
        for which, A in enumerate((X, Y)):
            if A is None:
                out.append(None)
                continue
            ain, Z = self._scores(A, which)
            out.append(ain.wrap_samples(Z))
        return tuple(out)

    def scores_arrays(self, X, Y=None, *, fitted: bool = False) -> tuple[dict, dict]:
        """``(arrays by name, attrs)`` of a scores store (``scalepca run``'s
        ``output.scores``, ``scalepca transform``): each field's expansion coefficients,
        ``scores_x`` and ``scores_y`` (lazy, as :meth:`transform` gives them), and the
        fields' names (attribute ``fields``). ``fitted``: the fields are the fitted ones
        (MCA keeps no scores of its own: they are transformed all the same)."""
        X, Y = _fields_pair(X, Y, "scores_arrays")
        zx, zy = self.transform(X, Y)
        fields = [getattr(a, "name", None) for a in (X, Y)]
        return {"scores_x": zx, "scores_y": zy}, {"fields": [str(f) for f in fields]}

    def patterns(self, X, Y):
        """Homogeneous and heterogeneous correlation maps, in one pass over the two
        fields.

        Homogeneous: the correlation of each feature of a field with that field's
        expansion coefficients (``corr(X, zx)``, ``corr(Y, zy)``); heterogeneous:
        with the other field's (``corr(X, zy)``, ``corr(Y, zx)``), as xeofs'
        ``homogeneous_patterns`` / ``heterogeneous_patterns``. Returns
        ``((hom_x, hom_y), (het_x, het_y))``: DataArrays over ``mode`` and each
        field's feature dims for xarray input, else (k, d) arrays; NaN at features
        left out.
        """
        self._check_fitted()
        xin, zx = self._scores(X, 0)
        yin, zy = self._scores(Y, 1)
        Z = da.concatenate([zx, zy.rechunk({0: zx.chunks[0]})], axis=1).rechunk({1: -1})
        k = zx.shape[1]
        graphs, dims = [], []
        for ain in (xin, yin):
            F = ain.data.rechunk({0: Z.chunks[0], 1: -1})
            parts = da.map_blocks(
                _pair_block,
                F,
                Z,
                chunks=((1,) * F.numblocks[0], (1,)),
                dtype=object,
                meta=np.empty((0, 0), dtype=object),
            )
            graphs.append(passes.reduce_rows(parts, None, _merge_pairs))
            dims.append(F.shape[1])
        with passes.counting("MCA.patterns", planned=1, chunks=Z.numblocks[0]):
            moments = passes.compute(*graphs, name="pattern correlations")
        maps = []
        for which, (mom, d, ain) in enumerate(
            zip(moments, dims, (xin, yin), strict=True)
        ):
            sf, sz = np.sqrt(mom["ss"][:d]), np.sqrt(mom["ss"][d:])
            with np.errstate(invalid="ignore", divide="ignore"):
                corr = (mom["cross"] / np.outer(sf, sz)).T  # (2k, d)
            corr[:, ~self._kept[which]] = np.nan
            own, other = corr[:k], corr[k:]
            if which == 1:
                own, other = other, own
            labels = ain.template if ain.kind == "xarray" else None
            maps.append(
                (
                    _label(own, labels, "homogeneous_patterns"),
                    _label(other, labels, "heterogeneous_patterns"),
                )
            )
        (hx, gx), (hy, gy) = maps
        return (hx, hy), (gx, gy)

    @property
    def components_xr_(self):
        """``components_x_`` over ``mode`` and X's original feature dims (xarray
        input)."""
        return self._xr(0)

    @property
    def components_y_xr_(self):
        """``components_y_`` over ``mode`` and Y's original feature dims (xarray
        input)."""
        return self._xr(1)

    @property
    def variables_(self) -> tuple:
        """The names of the variables X and Y were read from (``open_matrix(...,
        variable=...)``, a ``run`` config's ``data.variable``), None for a field
        fitted as an array.

        Returns
        -------
        names : tuple of (str or None)
            X's and Y's.
        """
        self._check_fitted()
        preps = getattr(self, "_preparations", (None, None))
        return tuple(None if p is None or not p.labelled else p.variable for p in preps)

    def _xr(self, which: int):
        self._check_fitted()
        template = self._templates[which]
        if template is None:
            raise AttributeError("the model was not fitted on xarray data")
        from ..io._stack import feature_dataarray

        values = (self.components_x_, self.components_y_)[which]
        return feature_dataarray(values, template, name="components_" + "xy"[which])

    # -- persistence (est.save / scalepca.load, as every model) --------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "components_x_")

    def _state_to_save(self) -> dict:
        """The fitted attributes, the features kept in each field, and each field's
        preparation and feature coordinates."""
        state = super()._state_to_save()
        state["_kept_x"], state["_kept_y"] = self._kept
        templates = dict(zip(_TEMPLATES, self._templates, strict=True))
        preps = getattr(self, "_preparations", (None, None))
        return {**state, **_prep.state_of(preps, templates)}

    def _restore_state(self, state: dict) -> None:
        state = dict(state)
        self._preparations, self._templates = _prep.restored(state, 2, _TEMPLATES)
        self._kept = (
            np.asarray(state.pop("_kept_x"), dtype=bool),
            np.asarray(state.pop("_kept_y"), dtype=bool),
        )
        if isinstance(self.standardize, list):  # a pair, saved as a JSON list
            self.standardize = tuple(self.standardize)
        super()._restore_state(state)
