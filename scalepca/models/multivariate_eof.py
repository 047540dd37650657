"""Multivariate EOF analysis: several fields, each on its own grid, in one model.

The fields share their samples (the same times, in the same order); their features are
put side by side, ``[x₁ | x₂ | …]``, each field weighted (√cos φ by default, as EOF
analysis of gridded data does) and, by default, divided by the square root of its total
variance, so that every field enters with total variance 1 whatever its units and number
of grid points. Without that (``normalize="none"``) the fields enter as they are
weighted: eofs' ``MultivariateEof`` (which leaves normalising to its ``weights``) and
xeofs' ``EOF`` of a list of DataArrays do this; a field in m² of geopotential then
outweighs one in K of temperature.

The fit is one pass: the concatenated row blocks (a blockwise concatenation: each task
joins the row blocks of every field that cover one row block of the first) go through
the covariance path of :class:`~scalepca.PCA` (count, mean and centred Gram merged in a
tree, :func:`scalepca.linalg.moments_graph`); each field's total variance is the trace
of its diagonal block of that Gram, so normalising costs no pass: the Gram is scaled on
the client before its ``eigh``.

Examples
--------
>>> meof = MultivariateEOF(4).fit([sst, hgt])            # DataArrays on their own grids
>>> sst_eofs, hgt_eofs = meof.components_xr_              # (mode, lat, lon) each
>>> pcs = meof.transform([sst, hgt])                      # lazy (time, mode)
>>> sst_hat, hgt_hat = meof.inverse_transform(pcs)        # each field in its own units
>>> meof.save("meof.zarr"); scalepca.load("meof.zarr")
"""

from __future__ import annotations

import logging

import dask.array as da
import numpy as np
import xarray as xr

from ..linalg import moments_graph, passes
from ..linalg.decomp import eigh_descending, flip_signs, variance_ratio
from ..preprocessing._matrix import MatrixInput, as_matrix, scores_matrix
from ._params import Choice, NComponents, Other, parameter_problems
from .base import DecompositionMixin, affine_map, refuse_nonfinite

logger = logging.getLogger(__name__)

__all__ = ["MultivariateEOF"]

#: the normalisations of the fields: by the square root of their total variance, or none
NORMALIZE = ("total_variance", "none")

#: the largest joint number of features whose covariance (d × d, 8 bytes each) is formed
MAX_FEATURES = 20_000


def _check_weights(value, name, params, shape):
    if value is None or isinstance(value, str) and value in ("sqrt_coslat", "coslat"):
        return value
    raise ValueError(f"{name} must be 'sqrt_coslat', 'coslat' or None; got {value!r}")


def _join_rows(start: int, stop: int, pieces: list) -> np.ndarray:
    """Rows ``start:stop`` (counted from the first piece's first row) of each field's
    consecutive row blocks ``pieces[i]``, the fields side by side."""
    out = []
    for blocks, offset in pieces:
        x = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=0)
        out.append(np.asarray(x)[start - offset : stop - offset])
    return np.concatenate(out, axis=1)


def join_fields(arrays: list) -> da.Array:
    """The fields (n × d_i dask arrays) side by side, in the first's row blocks, one
    column chunk. Each task joins the row blocks of every field that cover its rows,
    taken from the fields' own block tasks (``to_delayed``), so that a compute reads
    every block of every field once, however differently the fields are chunked (a
    rechunk would let dask fuse the slices of a straddling block into reads of their
    own)."""
    import dask

    arrays = [a.rechunk({1: -1}) for a in arrays]
    rows = arrays[0].chunks[0]
    bounds = [np.cumsum((0, *a.chunks[0])) for a in arrays]
    parts = [a.to_delayed().ravel() for a in arrays]
    d = sum(a.shape[1] for a in arrays)
    dtype = np.result_type(*[a.dtype for a in arrays])
    out, start = [], 0
    for r in rows:
        stop = start + r
        pieces = []
        for b, p in zip(bounds, parts, strict=True):
            i = int(np.searchsorted(b, start, side="right")) - 1
            j = int(np.searchsorted(b, stop, side="left"))
            pieces.append((list(p[i:j]), int(b[i])))
        task = dask.delayed(_join_rows, pure=True)(start, stop, pieces)
        out.append(da.from_delayed(task, shape=(r, d), dtype=dtype))
        start = stop
    return da.concatenate(out, axis=0) if len(out) > 1 else out[0]


#: above this many features the leading eigenpairs come from Lanczos (ARPACK) rather
#: than a full LAPACK ``eigh`` (whose O(d³) reduction dominates the fit when d is in the
#: thousands)
LANCZOS_MIN_FEATURES = 1000


def _leading_spectrum(mom: dict, k: int, scale: np.ndarray | None):
    """``(the k leading eigenvalues, their unit eigenvectors (k × d), the trace)`` of
    the covariance of the one-pass moments, divided by ``scale ⊗ scale`` when given.
    The same covariance as :func:`scalepca.linalg.decomp.spectrum_from_moments`
    (PCA's path), but only ``k`` eigenpairs: by ARPACK's Lanczos (tol=0, a fixed
    start vector) for large d."""
    cov = mom["m2"] / max(mom["n"] - 1, 1)
    if scale is not None:
        cov = cov / np.outer(scale, scale)
    d = cov.shape[0]
    if d >= LANCZOS_MIN_FEATURES and k < d // 4:
        from scipy.sparse.linalg import eigsh

        v0 = np.random.default_rng(0).standard_normal(d)
        w, V = eigsh(cov, k=k, which="LA", tol=0, v0=v0)
        order = np.argsort(w)[::-1]
        w, V = w[order], V[:, order]
    else:
        w, V = eigh_descending(cov, k)
    return np.maximum(w, 0.0), flip_signs(V.T), float(np.trace(cov))


class MultivariateEOF(DecompositionMixin):
    """EOF analysis of several fields over the same samples as one model.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of modes (``None``: all, ``min(n_samples, n_features)``).
    normalize : {"total_variance", "none"}, default="total_variance"
        ``"total_variance"``: each weighted field is divided by the square root of its
        total variance (the sum of its features' variances, ddof=1), so each field has
        total variance 1 and the explained variances add up to the number of fields.
        ``"none"``: the weighted fields as they are (eofs' ``MultivariateEof``, xeofs'
        ``EOF`` of a list).
    area_weights : {"sqrt_coslat", "coslat"} or None, default="sqrt_coslat"
        The weights of a field given as an N-D DataArray (as
        ``open_matrix(weights=...)``), whose first dim is taken as its samples (e.g.
        ``(time, lat, lon)``); a matrix made by :func:`scalepca.open_matrix` keeps its
        own sample dims and weights.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The joint EOFs over the fields' features side by side, unit norm, in the
        weighted (and normalised) space, as eofs and xeofs give them; NaN at features
        left out (land). ``components_xr_``: one array per field, in its own layout.
    explained_variance_ : ndarray of shape (n_components,)
        Eigenvalues of the joint covariance (denominator n − 1) of the normalised
        fields.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the joint covariance's trace.
    singular_values_ : ndarray of shape (n_components,)
        ``sqrt((n − 1) λ)`` for each ``explained_variance_`` λ.
    mean_ : ndarray of shape (n_features,)
        Feature means of the weighted fields (NaN at features left out).
    scale_ : ndarray of shape (n_features,)
        What each feature was divided by (the square root of its field's total variance;
        ones for ``normalize="none"``).
    variables_ : list of str
        The fields' names (``var0``, ``var1``, ... for unnamed ones).
    n_features_per_variable_ : list of int
        The number of features (grid cells) of each field, in the order of
        ``variables_``.
    total_variance_per_variable_ : ndarray of shape (n_variables,)
        Each field's total variance (the trace of its covariance, denominator n − 1,
        weighted, before normalisation): the square of what ``normalize=
        "total_variance"`` divides it by.
    n_samples_ : int
        Number of samples (time steps) in the training data.
    n_features_in_ : int
        Number of features of all fields together.
    features_kept_ : ndarray of shape (n_features_in_,), dtype bool
        True for the features the model was fitted on, False for those left out
        (NaN in every sample), which are NaN in the per-feature attributes.
    n_components_ : int
        The number of components kept.
    n_passes_ : int
        Passes over the data the fit made (1).
    solver_ : str
        ``"covariance_eigh"``, the only solver: the joint covariance of one pass.

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> rng = np.random.default_rng(0)
    >>> t = rng.standard_normal((200, 1))                # one signal in both fields
    >>> a = t @ rng.standard_normal((1, 30)) + 0.1 * rng.standard_normal((200, 30))
    >>> b = 1e3 * (t @ rng.standard_normal((1, 50)) + 0.1 * rng.standard_normal((200, 50)))
    >>> meof = scalepca.MultivariateEOF(2).fit([a, b])   # b in other units, 1,000× larger
    >>> meof.n_passes_, [c.shape for c in meof.components_xr_]
    (1, [(2, 30), (2, 50)])
    >>> round(float(meof.explained_variance_.sum() / 2), 2)  # each field: total variance 1
    0.99
    >>> meof.transform([a, b]).shape
    (200, 2)

    Notes
    -----
    One pass over the fields: per worker, one row block of each field plus the d × d
    partial Gram (d the fields' features together; at most ``MAX_FEATURES``); the
    ``eigh`` of the d × d covariance runs on the client. Each task joins the blocks
    of every field that cover one row block of the first (``join_fields``): every
    block of every field is read once, however the fields are chunked. ``transform``
    and ``inverse_transform`` are lazy blockwise maps.

    References
    ----------
    Hannachi, A., Jolliffe, I. T. & Stephenson, D. B. (2007). Empirical orthogonal
    functions and related techniques in atmospheric science: a review. International
    Journal of Climatology, 27, 1119–1152. (Combined EOFs of several fields.)
    """

    _parameters = {
        "n_components": NComponents(),
        "normalize": Choice(*NORMALIZE),
        "area_weights": Other((str, type(None)), _check_weights),
    }
    _per_feature_attrs = (("components_", 1), ("mean_", 0), ("scale_", 0))
    _saved_private = ("_fields_json", "_fields_weights")
    _covariance_spectrum = True

    def __init__(
        self,
        n_components: int | None = None,
        *,
        normalize: str = "total_variance",
        area_weights: str | None = "sqrt_coslat",
    ):
        self.n_components = n_components
        self.normalize = normalize
        self.area_weights = area_weights

    # -- input -------------------------------------------------------------------------
    def _field_list(self, X, what: str = "X") -> list:
        """The fields of ``X``: a Dataset's data variables, the items of a list, or
        ``X`` itself as the one field (then the model is an EOF analysis of one
        field)."""
        if isinstance(X, xr.Dataset):
            return [X[name] for name in X.data_vars]
        if isinstance(X, (list, tuple)):
            if not X:
                raise ValueError(f"{what} is an empty list; give one field or more")
            return list(X)
        return [X]

    def _open_field(self, field, what: str) -> MatrixInput:
        """One field as a matrix: an N-D DataArray stacked and weighted as
        ``open_matrix`` does; a matrix (``open_matrix``'s output, an array) taken as
        it is."""
        from ..preprocessing import open_matrix
        from ..preprocessing._steps import carried

        if isinstance(field, xr.DataArray) and carried(field) is None:
            field = open_matrix(
                field, sample_dims=field.dims[0], weights=self.area_weights
            )
        return as_matrix(field, what=what, min_samples=2)

    def _fit_fields(self, X) -> list[MatrixInput]:
        fields = self._field_list(X)
        mats = [self._open_field(f, f"X[{i}]") for i, f in enumerate(fields)]
        n = mats[0].data.shape[0]
        for i, m in enumerate(mats[1:], 1):
            if m.data.shape[0] != n:
                raise ValueError(
                    f"X[0] has {n} samples and X[{i}] {m.data.shape[0]}: the "
                    "fields of a multivariate EOF share their samples"
                )
        return mats

    # -- fit ---------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Fit on the fields ``X`` (one pass over all of them).

        Parameters
        ----------
        X : Dataset or list of array-like
            The fields: a Dataset (one field per variable) or a list of fields on
            their own grids, each of shape (n_samples, n_features_i) or N-D over the
            sample dims; one field alone is a list of one.
        y : None
            Ignored; present for scikit-learn's API.

        Returns
        -------
        self : MultivariateEOF
            The fitted model.
        """
        self._reset_fitted()
        try:
            self.n_passes_ = 0
            params = {name: getattr(self, name) for name in self._parameters}
            problems = parameter_problems(type(self), params)
            if problems:  # the forms first: the fields are opened with these weights
                raise problems[0][1]
            mats = self._fit_fields(X)
            sizes = [m.data.shape[1] for m in mats]
            n, d = mats[0].data.shape[0], sum(sizes)
            if d > MAX_FEATURES:
                raise ValueError(
                    f"the fields have {d:,} features together, over MAX_FEATURES="
                    f"{MAX_FEATURES:,} (the d × d covariance is formed): coarsen "
                    "or subset the fields"
                )
            k = self._check_parameters(n, d)["n_components"] or min(n, d)
            rows = mats[0].data.chunks[0]
            joined = join_fields([m.data for m in mats])
            self._features_kept = None
            with passes.counting(self, planned=1, chunks=len(rows)):
                (mom,) = passes.compute(moments_graph(joined), name="moments")
            self._fit_moments(mom, n, d, k, sizes, mats[0])
            self._widen_features(d)
            self._keep_fields(mats, sizes)
        except Exception:
            self._reset_fitted()
            raise
        return self

    def _fit_moments(
        self, mom: dict, n: int, d: int, k: int, sizes: list, first
    ) -> None:
        mom, d_fit = self._moments_without_land(mom, n, d, k, first)
        # the field of each kept feature
        owner = self._kept(np.repeat(np.arange(len(sizes)), sizes))
        diag = np.diag(mom["m2"]) / max(n - 1, 1)
        total = np.bincount(owner, weights=diag, minlength=len(sizes))
        if self.normalize == "total_variance":
            if (total <= 0).any():
                raise ValueError(
                    f"field(s) {np.flatnonzero(total <= 0).tolist()} have no "
                    "variance: normalize='total_variance' cannot scale them"
                )
            scale = np.sqrt(total)[owner]
            self.scale_ = scale
        else:
            scale = None
            self.scale_ = np.ones(d_fit)
        ev, components, total_var = _leading_spectrum(mom, k, scale)
        self.solver_ = "covariance_eigh"  # the only one: PCA's, on the joint moments
        mean = mom["mean"]
        self.components_ = components
        self.mean_ = mean
        self.explained_variance_ = ev
        self.explained_variance_ratio_ = variance_ratio(ev, total_var)
        self.singular_values_ = np.sqrt(ev * max(n - 1, 1))
        self.n_samples_, self.n_components_ = int(n), int(k)
        self.total_variance_per_variable_ = total

    def _keep_fields(self, mats: list[MatrixInput], sizes: list) -> None:
        """What transform and the per-field outputs need of each field: its
        preparation and its feature coordinates (saved with the model)."""
        from ..io._stack import feature_template, template_to_json

        fields, weights = [], []
        for i, (m, size) in enumerate(zip(mats, sizes, strict=True)):
            name, w, prep = f"var{i}", None, None
            if m.prep is not None:  # the field's own preparation: its name, weights
                name = m.prep.variable or name
                w, prep = m.prep.weights, m.prep.to_json()
            template = None
            if m.kind == "xarray":
                try:
                    template = template_to_json(feature_template(m.template))
                except TypeError as err:
                    logger.warning(
                        "not keeping the feature coordinates of X[%d]: %s", i, err
                    )
            fields.append(
                {
                    "name": name,
                    "size": int(size),
                    "prep": prep,
                    "weighted": w is not None,
                    "template": template,
                }
            )
            weights.append(
                np.ones(size) if w is None else np.asarray(w, dtype=np.float64)
            )
        self._fields_json = fields
        self._fields_weights = np.concatenate(weights)
        self.variables_ = [f["name"] for f in fields]
        self.n_features_per_variable_ = [f["size"] for f in fields]

    # -- per-field views ---------------------------------------------------------------
    def _offsets(self) -> np.ndarray:
        return np.cumsum([0, *self.n_features_per_variable_])

    def _preps(self) -> list:
        from ..preprocessing._steps import Preprocessing

        out, lo = [], 0
        for f in self._fields_json:
            hi = lo + f["size"]
            w = self._fields_weights[lo:hi] if f["weighted"] else None
            out.append(
                None if f["prep"] is None else Preprocessing.from_json(f["prep"], w)
            )
            lo = hi
        return out

    def _per_field(self, values: np.ndarray, name: str) -> list:
        """``values`` (k × d) split by field, each in its field's layout when known."""
        from ..io._stack import feature_dataarray, template_from_json

        off, out = self._offsets(), []
        for i, f in enumerate(self._fields_json):
            part = values[:, off[i] : off[i + 1]]
            if f["template"] is None:
                out.append(part)
                continue
            arr = feature_dataarray(part, template_from_json(f["template"]), name=name)
            arr.name = f["name"]
            out.append(arr)
        return out

    @property
    def components_xr_(self) -> list:
        """The EOFs of each field: DataArrays over ``mode`` and the field's own
        feature dims (arrays (k, d_i) for a field given as a bare matrix)."""
        self._check_fitted()
        return self._per_field(self.components_, "components")

    def components_dataset(self) -> xr.Dataset:
        """The EOFs of every field as one Dataset (fields with feature coordinates
        only)."""
        parts = self.components_xr_
        return xr.Dataset({a.name: a for a in parts if isinstance(a, xr.DataArray)})

    # -- transforms --------------------------------------------------------------------
    def _transform_fields(self, X, what: str) -> list[MatrixInput]:
        fields = self._field_list(X, what)
        if len(fields) != len(self._fields_json):
            raise ValueError(
                f"{what} has {len(fields)} fields; the model was fitted on "
                f"{len(self._fields_json)} ({', '.join(self.variables_)})"
            )
        mats = []
        for i, (field, prep) in enumerate(zip(fields, self._preps(), strict=True)):
            here = f"{what}[{i}]"
            if prep is not None:
                field = prep.prepare(field, what=here)
            m = as_matrix(field, what=here)
            size = self.n_features_per_variable_[i]
            if m.data.shape[1] != size:
                raise ValueError(
                    f"{here} has {m.data.shape[1]} features; the model was fitted "
                    f"on {size} for {self.variables_[i]!r}"
                )
            mats.append(m)
        n = mats[0].data.shape[0]
        if any(m.data.shape[0] != n for m in mats):
            raise ValueError(
                f"the fields of {what} do not have the same number of samples"
            )
        return mats

    def _projection(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(kept features mask, mean, P (d_kept × k)) of ``((x − mean) / scale) Vᵀ``."""
        keep = np.isfinite(self.mean_)
        P = self.components_[:, keep].T / self.scale_[keep][:, None]
        return keep, self.mean_[keep], P

    def transform(self, X):
        """The joint principal components of the fields ``X`` (as in fit: a Dataset or a
        list), unnormalised (xeofs' ``scores(normalized=False)``, eofs' ``pcs()``):
        lazy, an (n × k) array, or a DataArray over the sample dims and ``mode``.

        A NaN at a feature the model uses is refused (``ValueError``) when the PCs are
        computed (by this call for NumPy input, whose PCs it computes).

        Parameters
        ----------
        X : Dataset or list of array-like
            The fields, as in :meth:`fit`: a Dataset (one field per variable) or a list of fields on
            their own grids, each of shape (n_samples, n_features_i) or N-D over the
            sample dims; one field alone is a list of one.

        Returns
        -------
        scores : array of shape (n_samples, n_components)
            A lazy array, or a DataArray over the sample dims and ``mode``.
        """
        self._check_fitted()
        mats = self._transform_fields(X, "X")
        keep, mean, P = self._projection()
        joined = join_fields([m.data for m in mats])
        Z = affine_map(refuse_nonfinite(joined[:, np.flatnonzero(keep)]), mean, P)
        return mats[0].wrap_samples(Z)

    def inverse_transform(self, Z) -> list:
        """Each field rebuilt from the scores ``Z``, in its own units and layout.

        Parameters
        ----------
        Z : array-like of shape (n_samples, n_components)
            Scores, or the DataArray :meth:`transform` returns.

        Returns
        -------
        fields : list
            One array per field, in the order of ``variables_``.
        """
        self._check_fitted()
        zin = scores_matrix(Z)
        k = zin.data.shape[1]
        if k > self.components_.shape[0]:
            raise ValueError(
                f"the scores have {k} modes; the model has {self.components_.shape[0]}"
            )
        comps = np.nan_to_num(self.components_[:k]) * np.nan_to_num(self.scale_)
        off, out = self._offsets(), []
        for i, (prep, f) in enumerate(
            zip(self._preps(), self._fields_json, strict=True)
        ):
            block = comps[:, off[i] : off[i + 1]]
            mean = self.mean_[off[i] : off[i + 1]]
            Xhat = affine_map(
                zin.data.rechunk({1: -1}), np.zeros(k), block, offset=mean
            )
            features = None
            if f["template"] is not None:
                from ..io._stack import template_from_json

                features = template_from_json(f["template"])
            part = MatrixInput(zin.data, zin.kind, zin.template, prep)
            out.append(part.wrap_features(Xhat, features=features))
        return out

    def fit_transform(self, X, y=None):
        return self.fit(X).transform(X)

    # -- persistence -------------------------------------------------------------------
    def _restore_state(self, state: dict) -> None:
        super()._restore_state(state)
        self._fields_weights = np.asarray(self._fields_weights, dtype=np.float64)
