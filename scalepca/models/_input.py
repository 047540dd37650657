"""Input and names: what every estimator does with its input before a pass, for
every kind (NumPy, pandas, dask, xarray, AnnData, zarr): scikit-learn's validation of
in-memory data, the matrix a fitted model's steps make of new data, feature names,
and the one rule of non-finite values in new data."""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np
from sklearn.utils.validation import check_array, validate_data

from .._validation import check_2d, check_dtype, check_n_features, is_sparse
from ..preprocessing._feature_names import check_feature_names, feature_names_of
from ..preprocessing._matrix import MatrixInput, as_matrix
from ..preprocessing._steps import carried, held


def raise_on_nonfinite(bad: int, what: str = "X") -> None:
    if bad:
        raise ValueError(
            f"{what} contains {bad} NaN or infinite value(s); remove or impute them "
            "(PPCA(missing='em') treats NaN as missing)"
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
    looked at (``keep``, a bool array over the columns — the model's
    ``_features_kept`` — or None: all): features NaN in every fitted sample (land)
    stay out.

    In-memory input is checked now and returned. A dask array (dense or CSR blocks)
    is returned with each block checked when it is computed: finding a NaN needs the
    data, and checking at the call would cost a pass of its own, so the refusal rides
    in the blocks the projection reads anyway (its ``ValueError`` counts the values
    of that row block).
    """
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


class InputMixin:
    """The input of an estimator's methods as a validated
    :class:`~scalepca.preprocessing._matrix.MatrixInput` (composed by
    :class:`~scalepca.models.base.DecompositionMixin`)."""

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
