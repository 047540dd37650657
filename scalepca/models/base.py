"""Shared plumbing of the estimators: input kinds, lazy linear transforms, save/load,
timing."""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import time
import warnings

import dask.array as da
import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils._set_output import _wrap_data_with_container
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._validation import check_2d, check_dtype, check_n_features, is_sparse
from ..linalg import passes
from ..preprocessing._feature_names import check_feature_names, feature_names_of
from ..preprocessing._matrix import MatrixInput, as_matrix
from ..preprocessing._steps import carried, held, is_dask_frame
from ._params import Shape, check_parameters
from ._saving import SavedModel

logger = logging.getLogger(__name__)

#: prefix of the saved arrays of a model's single-cell steps
CELLS = "_preprocessing_cells_"


#: why features leave a fit (:meth:`DecompositionMixin._leave_out_land`)
LAND = "NaN in every sample"


def raise_on_nonfinite(bad: int, what: str = "X") -> None:
    if bad:
        raise ValueError(
            f"{what} contains {bad} NaN or infinite value(s); remove or impute them "
            "(PPCA(missing='em') treats NaN as missing)"
        )


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


def _affine_block(x, mean, P, offset):
    """``(x − mean) P + offset`` for one row block, in float64 for float64 data.

    A ``scipy.sparse`` block is not centred: ``x P − meanᵀ P`` (a sparse–dense
    product; the result is dense, n_b × k).
    """
    dtype = np.result_type(x.dtype, np.float32)
    P = P.astype(dtype, copy=False)
    if is_sparse(x):
        out = (
            np.asarray(x.astype(dtype, copy=False) @ P)
            - mean.astype(dtype, copy=False) @ P
        )
    else:
        out = (np.asarray(x) - mean.astype(dtype, copy=False)) @ P
    if offset is not None:
        out += offset.astype(dtype, copy=False)
    return out


def affine_map(X: da.Array, mean: np.ndarray, P: np.ndarray, offset=None) -> da.Array:
    """Lazy ``(X − mean) P + offset`` as a blockwise map over row chunks (no data
    moves).

    ``X`` in 2-D blocks (wide data, features split over column chunks) is not
    rechunked to full rows: each block is multiplied by its slice of ``P`` and the
    k-column products of a row are summed over the column chunks in a tree, so a task
    holds one block, never a row. ``X`` of ``scipy.sparse`` row blocks is never
    densified: each block gives ``x P − meanᵀP`` (its column chunks, if any, are
    joined first: a sparse row block is bounded by its stored values, not by its
    width).
    """
    k = P.shape[1]
    dtype = np.result_type(X.dtype, np.float32)
    if is_sparse(X) and len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    if len(X.chunks[1]) > 1:
        P = np.asarray(P, dtype=dtype)
        shift = -(np.asarray(mean, dtype=dtype) @ P)
        if offset is not None:
            shift = shift + np.asarray(offset, dtype=dtype)
        Z = X.astype(dtype) @ da.from_array(P, chunks=(X.chunks[1], k))
        return Z + shift
    return X.map_blocks(
        _affine_block,
        mean,
        P,
        offset,
        chunks=(X.chunks[0], (k,)),
        dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype),
    )


def _in_memory(X) -> bool:
    """Whether ``X`` is input scikit-learn's validation may read whole: a NumPy
    array, a list, a pandas or polars frame. Dask arrays, xarray objects, zarr arrays
    and sparse matrices are checked from their metadata only (scikit-learn's
    validation would compute or densify)."""
    if isinstance(X, (np.ndarray, list, tuple)):
        return True
    return type(X).__module__.partition(".")[0] in ("pandas", "polars")


def _refuse_nonfinite(X: np.ndarray, *, allow_nan: bool, what: str) -> None:
    """``ValueError`` counting the infinite (and, unless ``allow_nan``, NaN) entries of
    ``X``.

    The test is one ``isfinite`` reduction on clean data; only then are the kinds
    counted.
    """
    X = np.asarray(X)
    if X.dtype.kind != "f" or np.isfinite(X).all():
        return
    n_inf = int(np.isinf(X).sum())
    n_nan = 0 if allow_nan else int(np.isnan(X).sum())
    if n_inf:
        raise ValueError(
            f"{what} contains {n_inf} infinite value(s); replace or remove them"
        )
    if n_nan:
        raise ValueError(
            f"{what} contains {n_nan} NaN value(s); remove or impute them (this "
            "model was fitted without missing values)"
        )


def refuse_nonfinite(X, *, keep=None, allow_nan: bool = False, what: str = "X"):
    """The one rule of new data's non-finite values, for ``transform`` (and the
    methods on new data) of every estimator and analysis tool (HilbertEOF's own,
    stricter, aside): an infinite value is refused, and a NaN too unless
    ``allow_nan`` (a model of missing entries). Only the features the model uses are
    looked at (``keep``, a mask over the columns; None: all): features NaN in every
    fitted sample (land) stay out.

    In-memory input is checked now and returned. A dask array (dense or CSR blocks)
    is returned with each block checked when it is computed: finding a NaN needs the
    data, and checking at the call would cost a pass of its own, so the refusal rides
    in the blocks the projection reads anyway (its ``ValueError`` counts the values
    of that row block).
    """
    keep = None if keep is None else np.asarray(keep, dtype=bool)
    if not isinstance(X, da.Array):
        _refuse_block(X, keep, allow_nan=allow_nan, what=what)
        return X
    if keep is None:
        return X.map_blocks(
            _refuse_block,
            None,
            allow_nan=allow_nan,
            what=f"a row block of {what}",
            dtype=X.dtype,
            meta=X._meta,
        )
    return da.blockwise(
        _refuse_block,
        "ij",
        X,
        "ij",
        da.from_array(keep, chunks=(X.chunks[1],)),
        "j",
        allow_nan=allow_nan,
        what=f"a row block of {what}",
        dtype=X.dtype,
        meta=X._meta,
    )


def _refuse_block(x, keep, *, allow_nan: bool, what: str):
    """``x`` after :func:`_refuse_nonfinite` of its columns ``keep`` (stored values of a
    ``scipy.sparse`` block)."""
    if not is_sparse(x) and x.dtype.kind == "f":
        # NaN and inf reach their column's sum (which overflows only near 1e308: then
        # the exact test below decides), so clean blocks cost one sum and no copy
        sums = x.sum(axis=0)
        if np.isfinite(sums if keep is None else sums[keep]).all():
            return x
    kept = x if keep is None or keep.all() else x[:, keep]
    _refuse_nonfinite(
        kept.data if is_sparse(kept) else kept, allow_nan=allow_nan, what=what
    )
    return x


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
    SavedModel, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
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

    #: names of private attributes that ``save`` must keep besides public ``*_``
    #: attributes
    _saved_private: tuple[str, ...] = ()

    #: fitted per-feature attributes and their feature axis: computed on the kept
    #: features, then widened to all features with NaN at features dropped in fit
    #: (all-NaN, e.g. land)
    _per_feature_attrs: tuple[tuple[str, int], ...] = (("components_", 1), ("mean_", 0))

    # -- bookkeeping -------------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "n_features_in_")

    def _check_fitted(self):
        check_is_fitted(
            self, msg=f"this {type(self).__name__} is not fitted yet; call fit(X) first"
        )

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

    #: whether the estimator's fit and transform work on sparse blocks (CSR row blocks,
    #: see :func:`scalepca._validation.as_csr_blocks`); without it sparse input is
    #: refused by name
    _accepts_sparse: bool = False

    def _input(
        self,
        X,
        *,
        what="X",
        min_samples=1,
        allow_2d_blocks=False,
        validated=False,
        unknown_rows=False,
    ) -> MatrixInput:
        if not validated:
            X = self._validated_in_memory(X, what=what, min_samples=min_samples)
        return as_matrix(
            X,
            what=what,
            min_samples=min_samples,
            allow_2d_blocks=allow_2d_blocks,
            accept_sparse=self._accepts_sparse,
            unknown_rows=unknown_rows,
        )

    def _validated_in_memory(self, X, *, what="X", min_samples=1, reset=False):
        """NumPy/pandas input through scikit-learn's ``validate_data``; other kinds as
        they are.

        Shape and dtype are checked first, in scalepca's words (``check_2d``,
        ``check_dtype``); then ``validate_data`` converts object and frame input to a
        numeric array, refuses empty data, and with ``reset`` records
        ``n_features_in_``; without ``reset``, ``check_array`` does the same and the
        number of features seen in fit is checked (the names are checked by
        ``_transform_input`` for every input kind). Non-finite values are left to the
        caller (NaN may mark features left out of the fit, or entries PPCA treats as
        missing).
        """
        if not _in_memory(X):
            return X
        check_2d(np.shape(X), what=what)
        dtype = getattr(X, "dtype", None)
        if isinstance(dtype, np.dtype) and dtype.kind not in "fiubO":
            check_dtype(dtype, what=what)
        # validation makes a plain array of a matrix of open_matrix: it keeps the record
        record = carried(X)
        if reset:
            return held(
                validate_data(
                    self,
                    X,
                    reset=True,
                    dtype="numeric",
                    ensure_all_finite=False,
                    ensure_min_samples=min_samples,
                ),
                record,
            )
        X = check_array(
            X,
            dtype="numeric",
            ensure_all_finite=False,
            ensure_min_samples=min_samples,
            estimator=self,
            input_name=what,
        )
        if hasattr(self, "n_features_in_"):
            check_n_features(
                X, self.n_features_in_, what=what, estimator=type(self).__name__
            )
        return held(X, record)

    def _fit_input(self, X) -> MatrixInput:
        """The validated input of ``fit`` (features in one column chunk unless
        overridden)."""
        return self._input(X)

    def _transform_input(
        self,
        X,
        *,
        what="X",
        allow_2d_blocks=False,
        allow_nan=None,
        unknown_rows=False,
        lazy_check=True,
    ) -> MatrixInput:
        """Input of ``transform`` and the other methods on new data, checked against the
        fit.

        Non-finite values on the features the model was fitted on are refused by
        ``refuse_nonfinite`` (NaN too unless ``allow_nan``, default
        ``_transform_allows_nan``): NumPy/pandas input now, lazy input when its
        blocks are computed (``lazy_check=False``: the caller counts them in a pass
        of its own). ``unknown_rows``: the method maps row blocks whatever their
        sizes (``transform``), so a dask DataFrame is not read to count its rows (see
        ``as_matrix``).
        """
        self._check_fitted()
        prep = getattr(self, "_preprocessing", None)
        if prep is not None and prep.cells is not None:  # raw counts: prepared first
            X = prep.prepare(X, what=what)
        names = feature_names_of(
            X, feature_dim=None if prep is None else prep.feature_dim, what=what
        )
        check_feature_names(
            self, names, what=what
        )  # for every kind, before the layout's checks
        X = self._prepared(
            X, what=what, unknown_rows=unknown_rows
        )  # as it is, unprepared
        validated = _in_memory(X) and getattr(self, "_preprocessing", None) is None
        keep = getattr(self, "_features_kept", None)
        allow_nan = self._transform_allows_nan if allow_nan is None else allow_nan
        if validated:
            X = self._validated_in_memory(X, what=what)
            refuse_nonfinite(X, keep=keep, allow_nan=allow_nan, what=what)
        data = self._input(
            X,
            what=what,
            allow_2d_blocks=allow_2d_blocks,
            validated=validated,
            unknown_rows=unknown_rows,
        )
        check_n_features(
            data.data, self.n_features_in_, what=what, estimator=type(self).__name__
        )
        self._check_features(data, what=what)
        if not validated and lazy_check:  # lazy input: refused when its blocks are read
            data = dataclasses.replace(
                data,
                data=refuse_nonfinite(
                    data.data, keep=keep, allow_nan=allow_nan, what=what
                ),
            )
        return data

    def _prepared(self, X, *, what="X", unknown_rows=False):
        """``X`` made into a matrix as the fitted one was (see ``_preprocessing``).

        Data in their own layout and units (an N-D field, an unweighted array) go
        through the fitted steps (stacking, weights); a matrix made by
        ``open_matrix`` is checked against them. A model fitted on a bare array
        without weights takes its input as it is.
        """
        prep = getattr(self, "_preprocessing", None)
        return (
            X if prep is None else prep.prepare(X, what=what, unknown_rows=unknown_rows)
        )

    def _check_features(self, data: MatrixInput, *, what="X") -> None:
        """Refuse labelled input whose feature coordinates are not those of the fit."""
        from ..io._stack import check_features

        check_features(getattr(self, "_feature_template", None), data, what)

    # -- the scikit-learn surface ------------------------------------------------------
    def _reset_fitted(self) -> None:
        """Forget the fitted attributes (names ending in ``_``) of an earlier fit."""
        for attr in [
            a for a in vars(self) if a.endswith("_") and not a.startswith("__")
        ]:
            delattr(self, attr)

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

    # -- features dropped in fit (all NaN: land in an ocean grid, dead sensors) --------
    def _leave_out_land(
        self,
        n_observed,
        data: MatrixInput | None = None,
        *,
        check=None,
        reason: str = LAND,
    ):
        """The land-mask step of every estimator: features with no observed (non-NaN)
        value in the rows looked at leave the fit; warn (log for xarray, whose land
        masks are the documented convention) and record them for ``_select_features`` /
        ``_widen_features``.

        ``n_observed`` holds each feature's count of non-NaN entries. ``check(land)``
        (bool mask) runs before anything is recorded, so that an estimator refuses
        other non-finite values first. Returns the mask of kept features, or None
        when every feature is kept. ``reason`` says why a feature with a count of 0
        leaves (genotypes: also monomorphic).
        """
        land = np.asarray(n_observed) == 0
        if check is not None:
            check(land)
        n_drop = int(land.sum())
        if not n_drop:
            return None
        if land.all():
            raise ValueError(f"every feature is {reason}; nothing to fit")
        per_feature = ", ".join(name for name, _ in self._per_feature_attrs)
        msg = (
            f"{type(self).__name__}: {n_drop} of {land.size} features are {reason}; "
            f"they are left out of the fit and come back as NaN in {per_feature}"
        )
        if data is not None and data.kind == "xarray":
            logger.info(msg)  # the documented land-mask convention of gridded data
        else:
            warnings.warn(msg, UserWarning, stacklevel=4)
        self._features_kept = ~land
        return ~land

    def _moments_without_land(
        self, mom: dict, n: int, d: int, k: int, data: MatrixInput
    ):
        """:meth:`_leave_out_land` on the moments of a pass that counted NaN per feature
        (PCA, SparsePCA); any other NaN or inf raises.

        The moments of the other features are exact: the pass zero-filled non-finite
        entries. Returns the moments restricted to the kept features and their
        number; ``k`` (0: none requested yet) must fit them.
        """
        if not mom["bad"]:
            return mom, d
        nanf = mom.get("nan_features", np.zeros(d, dtype=np.int64))
        keep = self._leave_out_land(
            n - nanf,
            data,
            check=lambda land: raise_on_nonfinite(mom["bad"] - int(nanf[land].sum())),
        )
        d_fit = int(keep.sum())
        if k > min(n, d_fit):
            raise ValueError(
                f"n_components={k} is out of range: after leaving "
                f"out {d - d_fit} all-NaN features it must be at "
                f"most min(n_samples, n_features) = {min(n, d_fit)}"
            )
        out = {**mom, "mean": mom["mean"][keep], "bad": 0}
        if "m2" in mom:
            out["m2"] = mom["m2"][np.ix_(keep, keep)]
        if "ss" in mom:
            out["ss"] = mom["ss"][keep]
        return out, d_fit

    def _kept(self, arr: np.ndarray, axis: int = 0) -> np.ndarray:
        """``arr`` restricted to the features the model was fitted on."""
        keep = getattr(self, "_features_kept", None)
        # not widened yet (inside _fit)
        if keep is None or arr.shape[axis] != keep.size:
            return arr
        return np.compress(keep, arr, axis=axis)

    def _standardizing_weights(self, data: MatrixInput | None) -> np.ndarray | None:
        """The column weights of the kept features the matrix was multiplied by
        (``open_matrix(weights=...)``), or None: what
        :func:`~scalepca.linalg.feature_scale` divides out of the scales, so that
        standardising comes before the weights.

        The batch's own preparation, else the model's (a ``partial_fit`` batch is
        checked against it)."""
        prep = None if data is None else data.prep
        if prep is None:
            prep = getattr(self, "_preprocessing", None)
        if prep is None or prep.weights is None:
            return None
        return self._kept(np.asarray(prep.weights, dtype=np.float64))

    def _select_features(self, X: da.Array) -> da.Array:
        keep = getattr(self, "_features_kept", None)
        return X if keep is None else X[:, keep]

    def _widen_features(self, d: int) -> None:
        self.n_features_in_ = int(d)
        keep = getattr(self, "_features_kept", None)
        if keep is None:
            return
        for name, axis in self._per_feature_attrs:
            value = getattr(self, name, None)
            if isinstance(value, np.ndarray) and value.shape[axis] == keep.sum() != d:
                shape = list(value.shape)
                shape[axis] = d
                full = np.full(shape, np.nan)
                index = [slice(None)] * value.ndim
                index[axis] = keep
                full[tuple(index)] = value
                setattr(self, name, full)

    @property
    def features_kept_(self) -> np.ndarray:
        """Boolean mask of shape (n_features_in_,): True for the features the model
        was fitted on, False for those left out of the fit (NaN in every sample),
        which come back as NaN in the per-feature attributes.

        Returns
        -------
        features_kept : ndarray of bool
            A copy: changing it changes nothing in the model.
        """
        self._check_fitted()
        keep = getattr(self, "_features_kept", None)
        if keep is None:
            return np.ones(self.n_features_in_, dtype=bool)
        return np.array(keep, dtype=bool)

    @property
    def preprocessing_(self):
        """How the fitted matrix was made from the data, or None (a bare array).

        The variable, the sample and feature dims, the weights (and a single-cell
        model's steps) of :func:`scalepca.open_matrix`: what ``transform`` repeats on
        new data in their own layout and units (xeofs' ``preprocessor``).

        Returns
        -------
        preprocessing : Preprocessing or None
            Its ``variable``, ``sample_dims``, ``feature_dims`` and ``weights``.
        """
        self._check_fitted()
        return getattr(self, "_preprocessing", None)

    @property
    def feature_coords_(self):
        """The coordinates of the fitted features for a model fitted on xarray data
        (what the ``*_xr_`` views put the features back on), else None.

        Returns
        -------
        coords : DataArray or None
            A 1-D DataArray over the (stacked) feature dim, holding no data.
        """
        self._check_fitted()
        return getattr(self, "_feature_template", None)

    @property
    def rows_sketch(self) -> dict | None:
        """A record of the rows the model was fitted on, kept and saved with it, or
        None.

        ``scalepca run`` records the digests of some rows here when a later
        ``--update`` could add rows to the model, and checks them before it does; the
        model only saves the record.

        Returns
        -------
        sketch : dict or None
            The record as it was set.
        """
        return getattr(self, "_rows_sketch", None)

    @rows_sketch.setter
    def rows_sketch(self, sketch: dict) -> None:
        self._rows_sketch = sketch

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

    # -- xarray views of the fitted attributes (EOF analysis) --------------------------
    def _require_template(self, name: str):
        t = getattr(self, "_feature_template", None)
        if t is None:
            raise AttributeError(
                f"{name} exists only for a model fitted on xarray input "
                "(scalepca.open_matrix(DataArray, sample_dims=...))"
            )
        return t

    def _feature_dataarray(self, values: np.ndarray, name: str):
        t = self._require_template(name + "xr_")
        from ..io._stack import feature_dataarray

        return feature_dataarray(values, t, name=name.rstrip("_"))

    @property
    def explained_variance_xr_(self):
        """``explained_variance_`` as a DataArray over ``mode``."""
        self._check_fitted()
        self._require_template("explained_variance_xr_")
        from ..io._stack import mode_dataarray

        return mode_dataarray(self.explained_variance_, "explained_variance")

    @property
    def explained_variance_ratio_xr_(self):
        """``explained_variance_ratio_`` as a DataArray over ``mode``."""
        self._check_fitted()
        self._require_template("explained_variance_ratio_xr_")
        from ..io._stack import mode_dataarray

        return mode_dataarray(
            self.explained_variance_ratio_, "explained_variance_ratio"
        )

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

    # -- persistence -------------------------------------------------------------------
    def _state_to_save(self) -> dict:
        state = {
            k: v
            for k, v in vars(self).items()
            if k.endswith("_") and not k.startswith("_")
        }
        if getattr(self, "_features_kept", None) is not None:
            state["_features_kept"] = self._features_kept
        if getattr(self, "_feature_template", None) is not None:
            from ..io._stack import template_to_json

            try:  # feature coordinates, so components_xr_ works after load
                state["_feature_template_json"] = template_to_json(
                    self._feature_template
                )
            except TypeError as err:
                logger.warning("not saving the feature coordinates: %s", err)
        prep = getattr(self, "_preprocessing", None)
        if prep is not None:  # how to make a matrix of new data: transform repeats it
            state["_preprocessing_json"] = prep.to_json()
            if prep.weights is not None:
                state["_preprocessing_weights"] = prep.weights
            if prep.cells is not None:  # the single-cell steps' gene statistics
                state["n_genes_in_"] = prep.cells.n_genes_in_
                state.update({CELLS + k: v for k, v in prep.cells.arrays().items()})
        for name in self._saved_private + ("_rows_sketch",):  # run --update's record
            if hasattr(self, name):
                state[name] = getattr(self, name)
        return state

    def _restore_state(self, state: dict) -> None:
        state = dict(state)
        template = state.pop("_feature_template_json", None)
        prep = state.pop("_preprocessing_json", None)
        weights = state.pop("_preprocessing_weights", None)
        cells = {
            k[len(CELLS) :]: state.pop(k) for k in list(state) if k.startswith(CELLS)
        }
        for k, v in state.items():
            setattr(self, k, v)
        names = getattr(self, "feature_names_in_", None)
        # saved as a list of strings; scikit-learn's is an object array
        if names is not None:
            self.feature_names_in_ = np.asarray([str(v) for v in names], dtype=object)
        if getattr(self, "_features_kept", None) is not None and hasattr(
            self, "n_features_in_"
        ):
            # stores written before an attribute was widened hold it on the kept
            # features only
            self._widen_features(self.n_features_in_)
        if template is not None:
            from ..io._stack import template_from_json

            self._feature_template = template_from_json(template)
        if prep is not None:
            from ..preprocessing._steps import Preprocessing

            self._preprocessing = Preprocessing.from_json(prep, weights, cells)


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


class EOFMixin:
    """The EOF interface of a linear model whose components are the eigenvectors of
    the covariance (PCA, PPCA): the map of data rows to their projections on the
    EOFs, projections of new data on any map of them, fields rebuilt from chosen
    modes, and values over the features in the field's own coordinates. The tools
    of :mod:`scalepca.analysis` (the maps, the eofs-style views, the rotation) read a
    fit through these methods only."""

    def _checked_modes(self, n_components) -> int:
        k = self.components_.shape[0]
        if n_components is None:
            return k
        if (
            isinstance(n_components, bool)
            or not isinstance(n_components, (int, np.integer))
            or not 1 <= n_components <= k
        ):
            raise ValueError(
                f"n_components must be a number of components from 1 to {k}; got "
                f"{n_components!r}"
            )
        return int(n_components)

    def eof_matrix(self, n_components=None, *, weighted: bool = True) -> np.ndarray:
        """The map of centred rows to their projections on the leading EOFs.

        ``(x − mean_) @ eof_matrix(k)`` are the projections of a row ``x`` of the
        fitted matrix on the first ``k`` rows of ``components_`` (of the
        standardised row with ``standardize=True``): eofs' PCs, whatever
        :meth:`transform` returns (whitened scores, PPCA's posterior means).

        Parameters
        ----------
        n_components : int, optional
            Number of leading EOFs (default: all components).
        weighted : bool, default=True
            False: the map that gives, from a row of the weighted matrix
            (``open_matrix(weights=...)``), the projection of the row without its
            weights (divided by the weights, 0 where a weight is 0; eofs'
            ``projectField(weighted=False)``). Without weights the same map.

        Returns
        -------
        P : ndarray of shape (n_features, n_components)
            Rows at features left out of the fit are not used by :meth:`project`.

        Examples
        --------
        >>> import numpy as np, scalepca
        >>> X = np.random.default_rng(0).standard_normal((50, 6))
        >>> pca = scalepca.PCA(3).fit(X)
        >>> P = pca.eof_matrix(2)
        >>> P.shape, bool(np.allclose(P, pca.components_[:2].T))
        ((6, 2), True)
        """
        self._check_fitted()
        P = self._eof_matrix(self._checked_modes(n_components))
        prep = getattr(self, "_preprocessing", None)
        if not weighted and prep is not None and prep.weights is not None:
            # (x w) (P / w) = x P; 0 where w = 0
            P = np.nan_to_num(prep.unweight(P.T), nan=0.0).T
        return P

    def project_rows(self, X, P: np.ndarray, *, center: bool = True, what: str = "X"):
        """``X`` as the model reads it and the lazy projections of its rows on ``P``.

        The step below :meth:`project`, for tools that pair the projections with
        other data of the same rows (the correlation maps of
        :func:`scalepca.eofs_as_correlation`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data as :meth:`transform` takes them.
        P : ndarray of shape (n_features, m)
            The map, as :meth:`project` takes it.
        center : bool, default=True
            As in :meth:`project`.
        what : str, default="X"
            The name of ``X`` in error messages.

        Returns
        -------
        data : MatrixInput
            ``X`` made into the fitted matrix (stacked, weighted, checked): its dask
            array ``data.data`` (n_samples × n_features) and what labels results
            like ``X`` (``data.wrap_samples``).
        scores : dask array of shape (n_samples, m)
            The projections, lazy: a blockwise map over the row blocks of
            ``data.data``.
        """
        self._check_fitted()
        # rows paired with other data must be counted (a dask DataFrame's are not)
        return self._project(X, P, center=center, what=what)

    def project(self, X, P: np.ndarray, *, center: bool = True):
        """Projections of the rows of ``X`` on a map ``P`` of the features, lazily.

        ``(x − mean_) P`` per row (divided by ``scale_`` first with
        ``standardize=True`` when ``P`` comes from :meth:`eof_matrix`), ``X``
        prepared as :meth:`transform` prepares it (a raw N-D field stacked,
        weighted and land-masked as at the fit).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data as :meth:`transform` takes them.
        P : ndarray of shape (n_features, m)
            The map: :meth:`eof_matrix`, scaled or multiplied by an m-column matrix
            (a rotation). Rows at features left out of the fit are not used.
        center : bool, default=True
            False: ``x P``, the mean not removed (eofs' ``projectField``, for data
            that are anomalies already).

        Returns
        -------
        scores : same kind as ``X`` of shape (n_samples, m)
            A DataArray over (sample dims, ``mode``), a dask or a NumPy array: lazy
            for dask and xarray input, one blockwise map per row block.

        Examples
        --------
        >>> import numpy as np, scalepca
        >>> X = np.random.default_rng(0).standard_normal((50, 6))
        >>> pca = scalepca.PCA(3).fit(X)
        >>> Z = pca.project(X, pca.eof_matrix())
        >>> bool(np.allclose(Z, pca.transform(X)))
        True
        """
        self._check_fitted()
        data, Z = self._project(X, P, unknown_rows=True, center=center)
        return data.wrap_samples(Z)

    def reconstruct(self, X, components=None, *, with_mean: bool = False):
        """The data rebuilt from their projections on some EOFs, lazily.

        ``Σ_i ((x − mean_) · EOF_i) EOF_i`` over the chosen components, with the
        steps of the fit undone (``scale_`` multiplied back, weights divided out,
        NaN where a weight is 0, stacked dims unstacked): the anomalies those modes
        carry, in the field's own units and layout (eofs' ``reconstructedField``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data as :meth:`transform` takes them.
        components : array-like of int, optional
            Indices (from 0) of the rows of ``components_`` to use; default all.
        with_mean : bool, default=False
            Add ``mean_`` back: the data, not their anomalies.

        Returns
        -------
        X_reconstructed : same kind as ``X`` of shape (n_samples, n_features)
            A DataArray over the field's dims, a dask or a NumPy array; lazy: the
            projection and the reconstruction in the same tasks, one per row block.

        Examples
        --------
        >>> import numpy as np, scalepca
        >>> X = np.random.default_rng(0).standard_normal((50, 6))
        >>> pca = scalepca.PCA(6).fit(X)
        >>> bool(np.allclose(pca.reconstruct(X, with_mean=True), X))
        True
        """
        self._check_fitted()
        k = self.components_.shape[0]
        idx = np.arange(k) if components is None else np.asarray(components)
        if (
            idx.ndim != 1
            or idx.dtype.kind not in "iu"
            or not np.all((0 <= idx) & (idx < k))
        ):
            raise ValueError(
                f"components must be indices of components_ (0 to {k - 1}); got "
                f"{components!r}"
            )
        comps = np.asarray(self.components_, dtype=np.float64)[idx]
        data, Z = self._project(X, self._of_data(comps.T), unknown_rows=True)
        back = comps * self.scale_[None, :] if self._is_scaled() else comps
        offset = np.asarray(self.mean_, dtype=np.float64) if with_mean else None
        Xhat = affine_map(Z, np.zeros(idx.size), back, offset)
        return self._wrap_reconstruction(data, Xhat)

    def to_field(self, values: np.ndarray, name: str):
        """``values`` over the features in the field's own coordinates.

        Parameters
        ----------
        values : ndarray of shape (n_modes, n_features)
            One value per mode and fitted feature (EOFs, scaled or not).
        name : str
            The name of the result.

        Returns
        -------
        field : DataArray or ndarray
            Over ``mode`` and the original feature dims for a model fitted on
            xarray data (NaN at features left out), else ``values`` as given.

        Examples
        --------
        >>> import scalepca
        >>> sst = scalepca.datasets.make_gridded(60, n_lat=6, n_lon=12)["sst"]
        >>> pca = scalepca.PCA(2).fit(scalepca.open_matrix(sst, sample_dims="time"))
        >>> pca.to_field(pca.components_, "eofs").dims
        ('mode', 'lat', 'lon')
        """
        self._check_fitted()
        if getattr(self, "_feature_template", None) is None:
            return values
        return self._feature_dataarray(values, name + "_")


def _feature_template(data: MatrixInput):
    """Coordinates of the feature dimension of xarray input (no data), or ``None``."""
    if data.kind != "xarray":
        return None
    from ..io._stack import feature_template

    return feature_template(data.template)
