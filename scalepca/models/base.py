"""The estimator contract: :class:`DecompositionMixin`, the base of every scalepca
estimator, composed of its parts (input and names: :mod:`._input`; all-NaN features:
:mod:`._land`; xarray views: :mod:`._xarray_views`; fitted state and persistence:
:mod:`._fitted_state`), and :class:`LinearDecompositionMixin`, whose transforms are
the affine map of :mod:`._affine`. The EOF interface is :mod:`._eof_interface`."""

from __future__ import annotations

import dataclasses
import functools
import sys
import time

import dask.array as da
import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils._set_output import _wrap_data_with_container

from .._validation import is_sparse
from ..linalg import passes
from ..preprocessing._feature_names import feature_names_of
from ..preprocessing._matrix import MatrixInput
from ..preprocessing._steps import is_dask_frame
from ._affine import affine_map
from ._eof_interface import EOFMixin
from ._fitted_state import CELLS, FittedStateMixin
from ._input import (
    InputMixin,
    _in_memory,
    raise_on_nonfinite,
    refuse_nonfinite,
)
from ._land import LAND, FeatureSelectionMixin
from ._params import Shape, check_parameters
from ._saving import SavedModel
from ._xarray_views import XarrayViewsMixin, _feature_template

__all__ = [
    "CELLS",
    "LAND",
    "DecompositionMixin",
    "EOFMixin",
    "LinearDecompositionMixin",
    "_feature_template",
    "_in_memory",
    "affine_map",
    "caller_stacklevel",
    "raise_on_nonfinite",
    "refuse_nonfinite",
]


def caller_stacklevel() -> int:
    """The ``stacklevel`` of a warning raised by the calling function that points it
    at the first frame outside scalepca (the user's call), however deep the fit's
    path is."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith(
        "scalepca."
    ):
        frame, level = frame.f_back, level + 1
    return level


def _row_blocks(data: MatrixInput) -> int | None:
    """The number of row blocks of the fitted matrix (the chunks of each pass), if
    known."""
    numblocks = getattr(data.data, "numblocks", None)
    return None if numblocks is None else int(numblocks[0])


def _wrap_numpy_output(method):
    """``method`` whose NumPy results follow ``set_output`` (pandas, polars); dask
    and xarray results stay what they are (wrapping them in a frame would compute
    them)."""

    @functools.wraps(method)
    def wrapped(self, X, *args, **kwargs):
        out = method(self, X, *args, **kwargs)
        if isinstance(out, np.ndarray) and out.ndim == 2:
            return _wrap_data_with_container("transform", out, X, self)
        return out

    return wrapped


class DecompositionMixin(
    InputMixin,
    FeatureSelectionMixin,
    XarrayViewsMixin,
    FittedStateMixin,
    SavedModel,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    BaseEstimator,
):
    """Base of all scalepca estimators.

    Subclasses implement ``_fit(data: MatrixInput)`` and, for linear models, expose
    ``components_`` and ``mean_`` so the default transforms apply.

    NumPy and pandas input go through scikit-learn's ``validate_data`` (2-D, numeric
    dtype, empty data, the number of features seen in fit, finite values in
    ``transform``). Feature names are one notion for every input kind (frame columns,
    AnnData genes, the feature coordinate of a DataArray:
    :mod:`scalepca.preprocessing._feature_names`), recorded in ``fit`` as
    ``feature_names_in_`` and checked on new data of any kind: other names or another
    order are refused; ``get_feature_names_out`` gives ``pca0, pca1, …`` (the class
    name in lower case) and ``set_output(transform="pandas")`` applies to NumPy
    results.
    """

    #: whether ``transform`` takes NaN entries as missing (PPCA's posterior means do)
    _transform_allows_nan = False

    def __init_subclass__(cls, **kwargs):
        # scikit-learn's own wrapping would turn dask results into frames (a compute):
        # the transforms are wrapped here for NumPy results only, set_output stays
        # available
        super().__init_subclass__(auto_wrap_output_keys=None, **kwargs)
        cls._sklearn_auto_wrap_output_keys = {"transform"}
        for name in ("transform", "fit_transform"):
            if name in vars(cls):
                setattr(cls, name, _wrap_numpy_output(vars(cls)[name]))

    @property
    def _n_features_out(self) -> int:
        """Number of columns of ``transform`` (names from ``get_feature_names_out``)."""
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self._transform_allows_nan
        tags.input_tags.sparse = self._takes_sparse
        return tags

    @property
    def _takes_sparse(self) -> bool:
        """Whether this configuration fits sparse input (the scikit-learn tag
        ``sparse``)."""
        return self._accepts_sparse

    # -- bookkeeping -------------------------------------------------------------------
    def _timed_pass(self, label: str):
        """A context counting one pass over the data on ``n_passes_``, its duration
        logged and its events emitted (:mod:`~scalepca.linalg.passes`)."""
        return passes.counter_of(self).one_pass(label)

    def _check_parameters(self, n: int, d: int, X=None) -> dict:
        """Every parameter checked against the estimator's ``_parameters`` table and
        rules (:mod:`._params`) for ``n`` × ``d`` data (``X``: the input's dask
        array, for its item size and block kind); returns the values as used. Reads
        no data."""
        shape = (
            Shape(int(n), int(d))
            if X is None
            else Shape(int(n), int(d), np.dtype(X.dtype).itemsize, is_sparse(X))
        )
        return check_parameters(self, shape)

    # -- the scikit-learn surface ------------------------------------------------------
    def fit(self, X, y=None):
        """Fit the model to ``X`` (rows = samples).

        A dask DataFrame is read lazily; the row count of each partition is computed
        first, one pass over the data that ``n_passes_`` counts.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data: a NumPy, dask or sparse array (for the estimators that take
            sparse input), a pandas or dask DataFrame, a DataArray, a Dataset, an
            AnnData or a zarr array, or the matrix :func:`scalepca.open_matrix` made of
            a store or a file.
        y : None
            Ignored; present for scikit-learn's API.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        # partial_fit's first call: a check of the validated input before any pass
        check = vars(self).pop("_check_before_fit", None)
        self._reset_fitted()
        # in this frame: the stack levels of warnings raised in _fit count from here
        try:
            self.n_passes_ = 0
            t0 = time.perf_counter()
            names = feature_names_of(X)  # of any input kind (frame, AnnData, DataArray)
            X = self._validated_in_memory(X, reset=True)
            # set after the fit: X is now an array, which must not be checked against
            # them
            vars(self).pop("feature_names_in_", None)
            data = self._fit_input(X)
            if check is not None:
                check(data)
            self._features_kept = None
            self._preprocessing = (
                None  # inside _fit, transforms take the matrix as it is
            )
            with passes.counting(self, chunks=_row_blocks(data)) as counter:
                if is_dask_frame(X):
                    counter.plan(1)
                self._fit(data)
                if is_dask_frame(X):  # its partitions' row counts were read first
                    counter.record("partition row counts")
            self._widen_features(data.data.shape[1])
            self._feature_template = _feature_template(data)
            self._preprocessing = data.prep
            if names is not None:
                self.feature_names_in_ = names
            self.fit_time_ = time.perf_counter() - t0
        except Exception:
            self._reset_fitted()  # a failed fit leaves no fitted attributes behind
            raise
        return self

    #: whether ``explained_variance_`` are the eigenvalues of the sample covariance
    #: the fit decomposed, in descending order (see :attr:`n_spectrum_samples_`)
    _covariance_spectrum = False

    @property
    def n_spectrum_samples_(self) -> int | None:
        """The number of samples behind the eigenvalues ``explained_variance_``.

        The samples of the covariance the fit decomposed (``n_samples_``), which
        North's typical errors need (:func:`scalepca.north_test`); None when
        ``explained_variance_`` are no eigenvalues of a sample covariance (kernel,
        sparse and robust PCA, ``PCA(zero_center=False)``).

        Returns
        -------
        n : int or None
            The number of samples, or None.
        """
        self._check_fitted()
        if not self._covariance_spectrum or getattr(self, "zero_center", True) is False:
            return None
        return int(self.n_samples_)

    def fit_transform(self, X, y=None):
        """Fit the model to ``X`` and return the scores of ``X``.

        The same as ``fit(X).transform(X)``: the scores are lazy for lazy input and
        cost one more pass when computed.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, as :meth:`fit` takes it.
        y : None
            Ignored; present for scikit-learn's API.

        Returns
        -------
        scores : same kind as ``X`` of shape (n_samples, n_components)
            The scores of the training data.
        """
        return self.fit(X).transform(X)

    # -- reconstructions (inverse_transform) -------------------------------------------
    def _scores_input(self, Z, k: int) -> MatrixInput:
        """Scores given to ``inverse_transform`` as a matrix, checked to have ``k``
        columns (rows mapped block by block: those of a dask DataFrame's scores need
        not be counted)."""
        from ..preprocessing._matrix import scores_matrix

        zin = scores_matrix(Z, what="scores", unknown_rows=True)
        if zin.data.shape[1] != k:
            raise ValueError(
                f"scores have {zin.data.shape[1]} columns; the model has {k} components"
            )
        return zin

    def _wrap_reconstruction(self, zin: MatrixInput, Xhat: da.Array):
        """``Xhat`` (n × d, rows of ``zin``) in the data's own units, layout and kind.

        The steps that made the fitted matrix are undone (weights divided out,
        stacked dims unstacked); scores in a DataArray give a DataArray over the
        data's dims.
        """
        features = getattr(self, "_feature_template", None)
        # fitted on an array: plain columns
        if zin.kind == "xarray" and features is None:
            import xarray as xr

            features = xr.DataArray(
                np.zeros(self.n_features_in_, dtype=np.int8), dims=("feature",)
            )
        out = dataclasses.replace(zin, prep=getattr(self, "_preprocessing", None))
        return out.wrap_features(Xhat, features=features)


class LinearDecompositionMixin(DecompositionMixin):
    """Estimators whose transform is ``(x − mean_) P`` and reconstruction
    ``z Q + mean_``."""

    #: ``transform`` keeps the input's 2-D blocks (see :func:`affine_map`) instead of
    #: rechunking every row block to full width
    _transform_keeps_2d_blocks = False

    # components over the input features (kernel PCA's live in its feature space)
    @property
    def components_xr_(self):
        """``components_`` as a DataArray over ``mode`` and the original feature dims.

        With weights (``open_matrix(..., weights=...)``) these are, as in eofs and
        xeofs, the EOFs of the weighted field: unit norm in weighted space, in the
        units the weighted data had; divide by the weights for the unweighted
        patterns.
        """
        self._check_fitted()
        return self._feature_dataarray(self.components_, "components_")

    @property
    def mean_xr_(self):
        """The mean of the data over the original feature dims, in the field's own
        units.

        ``mean_`` is the mean of the matrix the model was fitted on (the weighted
        field when there are weights); ``mean_xr_`` divides the weights out (NaN
        where a weight is 0).
        """
        self._check_fitted()
        prep = getattr(self, "_preprocessing", None)
        mean = self.mean_ if prep is None else prep.unweight(np.asarray(self.mean_))
        return self._feature_dataarray(mean, "mean_")

    def _transform_matrix(self) -> np.ndarray:
        """d × k projection applied to centred rows."""
        return self.components_.T

    def _inverse_matrix(self) -> np.ndarray:
        """k × d map from scores back to centred data."""
        return self.components_

    def _project(self, X, P: np.ndarray, *, unknown_rows=False, center=True, what="X"):
        """``(data, Z)``: ``X`` taken as ``transform`` takes it (raw fields stacked
        and weighted, checked against the fit) and the lazy ``(x − mean_) P`` of its
        rows on the features the model was fitted on (``P``: n_features × m, rows at
        dropped features ignored; ``center=False``: ``x P``). The one projection of
        new data: ``transform`` and the EOF interface (:class:`EOFMixin`) both go
        through it."""
        fills = center and self._fills_missing()
        data = self._transform_input(
            X,
            what=what,
            allow_2d_blocks=self._transform_keeps_2d_blocks,
            unknown_rows=unknown_rows,
            allow_nan=fills or None,
        )
        Xk = self._select_features(data.data)
        mean = self._kept(self.mean_)
        if fills:  # a missing entry is set to the mean: 0 once centred
            from ..preprocessing._genotype import fill_missing

            Xk = fill_missing(Xk, mean)
        if not center:
            mean = np.zeros(mean.shape)
        Z = affine_map(Xk, mean, self._kept(P, axis=0))
        return data, Z

    def _fills_missing(self) -> bool:
        """Whether NaN in new data are missing entries set to ``mean_`` (genotypes)."""
        return False

    def transform(self, X):
        """Project ``X`` on the components (lazy for dask and xarray input).

        A dask DataFrame gives a lazy dask array: its partitions are mapped as they are,
        their rows not counted (the row sizes in ``.chunks`` are NaN until computed, as
        in ``DataFrame.to_dask_array()``); nothing is computed until the scores are.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New data: a NumPy, dask or sparse array, a DataFrame, a DataArray or
            Dataset in the fitted data's own layout and units, or a matrix
            :func:`scalepca.open_matrix` made.

        Returns
        -------
        scores : same kind as ``X`` of shape (n_samples, n_components)
            The projections of the centred (and scaled) rows on ``components_``.

        Raises
        ------
        ValueError
            ``X`` has feature names (DataFrame columns, the DataArray's feature
            coordinate, an AnnData's genes) other than ``feature_names_in_``, or the
            same in another order: features are never matched by position when both
            sides name them.
        ValueError
            ``X`` holds a NaN or an infinite value at a feature the model uses:
            in-memory input is refused by this call, lazy input when its scores are
            computed (one rule for every kind, ``refuse_nonfinite``; features left
            out of the fit, NaN in every sample, are not looked at).
        """
        # before the projection matrix is formed from fitted attributes
        self._check_fitted()
        data, Z = self._project(X, self._transform_matrix(), unknown_rows=True)
        return data.wrap_samples(Z)

    def inverse_transform(self, Z):
        """Map scores back to the data: ``Z Q + mean_``, in the data's own units (lazy).

        The steps that made the fitted matrix are undone: weights are divided out (NaN
        where a weight is 0), stacked dims unstacked, and xarray results come in the
        data's dims order. Scores over several sample dims (as ``transform`` returns
        them) are accepted.

        Parameters
        ----------
        Z : array-like of shape (n_samples, n_components)
            Scores, as :meth:`transform` returns them (NumPy, dask, a DataFrame or a
            DataArray).

        Returns
        -------
        X_reconstructed : same kind as ``Z`` (NumPy, dask, or a DataArray over the data's dims)
            Of shape (n_samples, n_features): the data the scores stand for.
        """
        self._check_fitted()
        k = self._inverse_matrix().shape[0]
        zin = self._scores_input(Z, k)
        Xhat = affine_map(zin.data, np.zeros(k), self._inverse_matrix(), self.mean_)
        return self._wrap_reconstruction(zin, Xhat)
