"""How a (sample × feature) matrix was made from the user's data, so a model can repeat
it.

:func:`scalepca.open_matrix` turns data in their own layout and units (a
``(time, lat, lon)`` field in kelvin, a table) into the matrix an estimator fits: it
picks a variable, stacks the sample dims and the feature dims, and multiplies each
column by a weight (√cos φ in EOF analysis). A :class:`Preprocessing` records those
steps. It travels with the matrix (in the attributes of a stacked DataArray, held by
a dask matrix: :class:`PreparedMatrix`), the estimator keeps it when it is fitted and
saves it in its store, and then

* ``transform(raw)`` repeats the steps on data in their own layout and units, after
  checking that they are the same kind of data (variable, dims, grid);
* ``inverse_transform`` and ``mean_xr_`` undo them: the field comes back in its own
  units and dims order, NaN where a weight is 0 (nothing of such a feature entered the
  fit).

Standardisation, where an estimator offers it (``SparsePCA(use_correlation=True)``),
is a fitted attribute of that estimator (``scale_``) and is undone by it; features
left out of the fit (NaN in every sample) are recorded by the estimator too
(``DecompositionMixin``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.sparse as sp
import xarray as xr
from dask.array.core import BlockView

from .._validation import check_dtype
from ..io._coalesce import _task_bytes
from ..io._stack import (
    feature_dim_of,
    sample_dim_of,
    split_dims,
    stack_dataarray,
    weights_dataarray,
)

#: attribute of a stacked DataArray that holds its :class:`Preprocessing`
ATTR = "scalepca_preprocessing"

#: weight rules computed from the latitude coordinate
WEIGHT_RULES = ("sqrt_coslat", "coslat")


class WeightsError(ValueError):
    """Weights that cannot be used; ``detail`` is the message without its subject."""

    def __init__(self, detail: str):
        self.detail = detail
        super().__init__(f"weights {detail}")


@dataclass(frozen=True, eq=False)
class Preprocessing:
    """The steps that made a (sample × feature) matrix from the user's data.

    Parameters
    ----------
    variable : str or None
        Name of the data variable (``None`` for arrays and unnamed DataArrays).
    dims : tuple of str or None
        Dims of the data in their own order (``None`` for array sources).
    sample_dims, feature_dims : tuple of str or None
        Dims stacked into the rows and the columns (in stacking order).
    weights : ndarray of shape (n_features,) or None
        Weight of each column (stacked feature order), multiplied into the data.
    weights_name : str or None
        What the weights are (``"sqrt_coslat"``, ``"coslat"``, a variable name,
        ``"given"``), for messages.
    feature_sizes : tuple of int or None
        Sizes of the feature dims (the grid's shape).
    cells : CellSteps or None
        Single-cell steps from raw counts (normalisation, log1p, gene selection,
        scaling: :mod:`._singlecell`), fitted; ``prepare`` applies them to raw
        counts.
    """

    variable: str | None = None
    dims: tuple | None = None
    sample_dims: tuple | None = None
    feature_dims: tuple | None = None
    weights: np.ndarray | None = None
    weights_name: str | None = None
    feature_sizes: tuple | None = None
    cells: object | None = None

    # -- names -------------------------------------------------------------------------
    @property
    def labelled(self) -> bool:
        """Whether the data had named dims (xarray) rather than being a bare 2-D
        array."""
        return self.dims is not None

    @property
    def sample_dim(self) -> str | None:
        if not self.labelled:
            return None
        return sample_dim_of(self.sample_dims)

    @property
    def feature_dim(self) -> str | None:
        if not self.labelled:
            return None
        return feature_dim_of(self.feature_dims)

    @property
    def layer(self) -> str | None:
        """The AnnData layer the data were read from (None: X, or not AnnData)."""
        if self.variable in (None, "X"):
            return None
        return self.variable

    def __repr__(self) -> str:
        parts = []
        if self.variable is not None:
            parts.append(f"variable={self.variable!r}")
        if self.labelled:
            parts += [
                f"dims={self.dims}",
                f"sample_dims={self.sample_dims}",
                f"feature_dims={self.feature_dims}",
            ]
        if self.weights is not None:
            parts.append(f"weights={self.weights_name or 'given'}")
        return f"Preprocessing({', '.join(parts)})"

    # -- the forward steps -------------------------------------------------------------
    def weight(self, X):
        """``X`` (n × d: NumPy, dask or DataArray) times the column weights; lazy for
        dask."""
        if self.weights is None:
            return X
        dtype = np.result_type(X.dtype, np.float32)
        w = self.weights.astype(dtype)
        if isinstance(X, xr.DataArray):
            return X.copy(data=X.data.astype(dtype, copy=False) * w)
        return X.astype(dtype, copy=False) * w

    def unweight(self, values):
        """``values`` (…, d) divided by the column weights; NaN where a weight is 0."""
        if self.weights is None:
            return values
        inv = np.full(self.weights.shape, np.nan)
        pos = self.weights > 0
        inv[pos] = 1.0 / self.weights[pos]
        return values * inv

    def stack(
        self, arr: xr.DataArray, *, chunks=None, strip_bytes=None
    ) -> xr.DataArray:
        """The matrix of an N-D DataArray in these data's layout (stacked, weighted,
        lazy); ``strip_bytes``: see :func:`~scalepca.io._stack.stack_dataarray`."""
        out = stack_dataarray(
            arr,
            sample_dims=self.sample_dims,
            feature_dims=self.feature_dims,
            chunks=chunks,
            strip_bytes=strip_bytes,
        )
        out = self.weight(out)
        out.attrs = {**{k: v for k, v in arr.attrs.items() if k != ATTR}, ATTR: self}
        out.name = arr.name
        return out

    def prepare(self, X, *, what: str = "X", unknown_rows: bool = False):
        """``X`` as a matrix made like the one the model was fitted on.

        A matrix that carries a description (an output of ``open_matrix``) is checked
        against this one and passed on; data in their own layout and units go through
        the steps. Raises ``ValueError`` saying what differs when the data cannot be
        of this kind. ``unknown_rows``: a dask DataFrame's rows are not counted (as
        ``as_matrix``).
        """
        if isinstance(X, xr.Dataset):
            X = self._variable_of(X, what)
        if self.cells is not None:
            return self._prepare_cells(X, what)
        # fitted on AnnData: an AnnData gives the same matrix
        if self.dims == (
            "obs",
            "var",
        ):
            from ..io._anndata import is_anndata_object

            if is_anndata_object(X):  # read as open_matrix reads it
                from ..io._anndata import open_anndata

                return _dataarray_matrix(open_anndata(X, layer=self.layer))
        carried_by = carried(X)
        if carried_by is None:
            _refuse_computed(X, what)
        if carried_by is not None:
            diff = self.differences(carried_by)
            if diff:
                raise ValueError(
                    f"{what} was prepared differently from "
                    "the data the model was fitted on: " + "; ".join(diff)
                )
            return X
        if isinstance(X, xr.DataArray) and self.labelled:
            self._check_raw(X, what)
            return self.stack(X)
        if isinstance(X, (list, tuple)):
            X = np.asarray(X)
        if self.weights is not None and not isinstance(
            X, (np.ndarray, da.Array, xr.DataArray)
        ):
            X = _weightable(X, what, unknown_rows)
        if self.weights is None or not isinstance(
            X, (np.ndarray, da.Array, xr.DataArray)
        ):
            # other inputs (zarr arrays, sparse matrices) go to validation as they are
            return X
        if self._fits(X):  # a table fitted through open_matrix(array, weights=...)
            return held(self.weight(X), self)
        return X  # the wrong shape: the n_features check says so

    def _prepare_cells(self, X, what: str):
        """Raw counts through the fitted single-cell steps; a matrix they made, as it
        is."""
        carried_by = carried(X)
        if carried_by is None:
            _refuse_computed(X, what)
        if (
            carried_by is not None
            and carried_by.cells is None
            and carried_by.dims == ("obs", "var")
            and carried_by.weights is None
        ):
            carried_by = None  # an AnnData's matrix as open_matrix reads it: raw counts
        if carried_by is not None:
            if carried_by.cells is None or (
                carried_by.cells is not self.cells
                and carried_by.cells.to_json() != self.cells.to_json()
            ):
                raise ValueError(
                    f"{what} was prepared by other single-cell steps than the "
                    "data the model was fitted on; pass the raw counts"
                )
            return X
        return prepare_counts(X, self, what=what)

    def _fits(self, X) -> bool:
        return getattr(X, "ndim", 0) == 2 and (
            self.weights is None or X.shape[1] == self.weights.shape[0]
        )

    def _variable_of(self, ds: xr.Dataset, what: str) -> xr.DataArray:
        names = list(ds.data_vars)
        if self.variable in names:
            return ds[self.variable]
        if len(names) == 1 and self.variable is None:
            return ds[names[0]]
        raise ValueError(
            f"{what} is a Dataset with variables {names}; the model was fitted "
            f"on variable {self.variable!r}"
        )

    def _check_raw(self, X: xr.DataArray, what: str) -> None:
        if (
            isinstance(X.name, str)
            and self.variable is not None
            and X.name != self.variable
        ):
            raise ValueError(
                f"{what} is variable {X.name!r}; the model "
                f"was fitted on variable {self.variable!r}"
            )
        if set(X.dims) != set(self.dims):
            missing = [d for d in self.dims if d not in X.dims]
            extra = [d for d in X.dims if d not in self.dims]
            detail = ", ".join(
                part
                for part in (
                    f"missing {missing}" if missing else "",
                    f"not in the fitted data {extra}" if extra else "",
                )
                if part
            )
            raise ValueError(
                f"{what} has dims {X.dims}; the model was fitted on data with dims "
                f"{self.dims} ({detail})"
            )
        sizes = tuple(X.sizes[d] for d in self.feature_dims)
        if self.feature_sizes is not None and sizes != tuple(self.feature_sizes):
            diff = ", ".join(
                f"{n} along {d!r} (fitted: {f})"
                for d, n, f in zip(
                    self.feature_dims, sizes, self.feature_sizes, strict=True
                )
                if n != f
            )
            raise ValueError(
                f"{what} is not on the grid the model was fitted on: {diff}"
            )

    # -- comparing descriptions --------------------------------------------------------
    def differences(self, other: Preprocessing) -> list[str]:
        """What differs between the data ``other`` describes and these (empty: the
        same)."""
        out = []
        if (
            self.variable is not None
            and other.variable is not None
            and self.variable != other.variable
        ):
            out.append(f"variable {other.variable!r}, fitted on {self.variable!r}")
        if self.labelled and other.labelled:
            if set(self.dims) != set(other.dims):
                out.append(f"dims {other.dims}, fitted on {self.dims}")
            if tuple(self.sample_dims) != tuple(other.sample_dims):
                out.append(
                    f"sample_dims {other.sample_dims}, fitted on {self.sample_dims}"
                )
            if tuple(self.feature_dims) != tuple(other.feature_dims):
                out.append(
                    f"feature_dims {other.feature_dims}, fitted on {self.feature_dims}"
                )
            elif (
                self.feature_sizes is not None
                and other.feature_sizes is not None
                and tuple(self.feature_sizes) != tuple(other.feature_sizes)
            ):
                out.append(
                    f"a grid of shape {other.feature_sizes}, fitted on "
                    f"{self.feature_sizes}"
                )
        if (self.cells is None) != (other.cells is None):
            out.append(
                "raw counts, fitted on counts prepared by single-cell steps"
                if other.cells is None
                else "counts prepared by single-cell steps, fitted on data without them"
            )
        mine, theirs = (
            _weights_label(self.weights_name),
            _weights_label(other.weights_name),
        )
        if (self.weights is None) != (other.weights is None):
            if self.weights is None:
                out.append(f"weighted by {theirs}, fitted on unweighted data")
            else:
                out.append(f"not weighted, fitted on data weighted by {mine}")
        elif self.weights is not None and (
            self.weights.shape != other.weights.shape
            or not np.allclose(self.weights, other.weights, rtol=1e-12, atol=0)
        ):
            if mine != theirs:
                out.append(f"weighted by {theirs}, fitted on data weighted by {mine}")
            elif self.weights.shape != other.weights.shape:
                out.append(
                    f"{other.weights.size} weights, fitted with {self.weights.size}"
                )
            else:
                worst = float(np.max(np.abs(self.weights - other.weights)))
                out.append(
                    f"weighted by other {theirs} than the fitted data (largest "
                    f"difference {worst:.3g})"
                )
        return out

    # -- undoing the steps -------------------------------------------------------------
    def field(self, out: xr.DataArray) -> xr.DataArray:
        """A labelled (sample × feature) result in the data's units and dims order."""
        from ..io._stack import _unstack

        if self.weights is not None:
            out = self.unweight(out)
        out = _unstack(out, *out.dims)
        if self.labelled and set(out.dims) == set(self.dims):
            out = out.transpose(*self.dims)
        out.name = self.variable
        return out

    # -- storage -----------------------------------------------------------------------
    def to_json(self) -> dict:
        """Everything but the weights, as JSON types (the weights are stored as an
        array)."""
        return {
            "variable": self.variable,
            "dims": _optional(list, self.dims),
            "sample_dims": _optional(list, self.sample_dims),
            "feature_dims": _optional(list, self.feature_dims),
            "weights_name": self.weights_name,
            "feature_sizes": _optional(list, self.feature_sizes),
            "cells": _optional(lambda cells: cells.to_json(), self.cells),
        }

    @classmethod
    def from_json(cls, state: dict, weights=None, cell_arrays=None) -> Preprocessing:
        cells = None
        if state.get("cells") is not None:
            from ._singlecell import CellSteps

            cells = CellSteps.from_json(state["cells"], cell_arrays or {})

        return cls(
            variable=state.get("variable"),
            dims=_optional(tuple, state.get("dims")),
            sample_dims=_optional(tuple, state.get("sample_dims")),
            feature_dims=_optional(tuple, state.get("feature_dims")),
            weights=_optional(_float_weights, weights),
            weights_name=state.get("weights_name"),
            feature_sizes=_optional(tuple, state.get("feature_sizes")),
            cells=cells,
        )


def _optional(func, value):
    """``func(value)``; None stays None (the optional fields of the JSON form)."""
    if value is None:
        return None
    return func(value)


def _float_weights(weights) -> np.ndarray:
    return np.asarray(weights, dtype=np.float64)


def _weightable(X, what: str, unknown_rows: bool = False):
    """A table given to a model fitted on weighted data, as an array the weights
    multiply: a pandas DataFrame as NumPy, a dask DataFrame and a zarr array as dask
    arrays. Sparse input is refused, as ``open_matrix`` refuses weights for it:
    passed on, it would be projected unweighted."""
    from .._validation import is_sparse

    if is_sparse(X):
        raise ValueError(
            f"{what} is sparse, but the model was fitted on data "
            "weighted by column, and weights are not applied to "
            "sparse input; give the data dense, as at the fit"
        )

    if is_dask_frame(X):
        return frame_matrix(X, what=what, lengths=not unknown_rows)
    import zarr

    if isinstance(X, zarr.Array) and X.ndim == 2:
        from ..io._coalesce import open_zarr

        return open_zarr(X)
    if hasattr(X, "to_numpy"):  # a pandas DataFrame
        return X.to_numpy()
    return X


def _weights_label(name: str | None) -> str:
    return "given weights" if name in (None, "given") else name


# -- describing data -------------------------------------------------------------------
def describe(
    arr,
    *,
    sample_dims=None,
    feature_dims=None,
    weights=None,
    dataset=None,
) -> Preprocessing:
    """The :class:`Preprocessing` that ``open_matrix`` applies to ``arr`` (reads no
    data).

    ``arr`` is a DataArray (N-D) or a 2-D array; ``weights`` as in
    :func:`open_matrix`: ``"sqrt_coslat"``, ``"coslat"``, the name of a variable of
    ``dataset`` or a coordinate of ``arr``, a DataArray over feature dims, or an
    array of the feature dims' shape.
    """
    if not isinstance(arr, xr.DataArray):
        if weights is None:
            return Preprocessing()
        w = column_weights(weights, arr.shape[1])
        return Preprocessing(weights=w, weights_name="given")
    sample_dims, feature_dims = split_dims(arr, sample_dims, feature_dims)
    name = None
    if weights is not None:
        if isinstance(weights, str):
            name, weights = weights, named_weights(weights, arr, dataset)
        else:
            name = "given"
        wda = weights_dataarray(weights, arr, feature_dims)
        grid = xr.DataArray(
            np.zeros([arr.sizes[d] for d in feature_dims], dtype=np.int8),
            dims=feature_dims,
        )
        weights = (
            wda.drop_vars(list(wda.coords))
            .broadcast_like(grid)
            .transpose(*feature_dims)
            .values.ravel()
        )  # stacked (C) order
    return Preprocessing(
        variable=arr.name if isinstance(arr.name, str) else None,
        dims=tuple(arr.dims),
        sample_dims=tuple(sample_dims),
        feature_dims=tuple(feature_dims),
        weights=weights,
        weights_name=name,
        feature_sizes=tuple(arr.sizes[d] for d in feature_dims),
    )


def stacked(
    arr: xr.DataArray,
    *,
    chunks=None,
    sample_dims=None,
    feature_dims=None,
    weights=None,
    dataset=None,
    task_size=None,
) -> tuple[xr.DataArray, Preprocessing]:
    """The matrix of a DataArray (described, stacked, weighted) and the
    :class:`Preprocessing` that made it; ``task_size`` (``open_matrix``'s, None: no
    strips): see :func:`~scalepca.io._stack.stack_dataarray`'s ``strip_bytes``."""
    if arr.ndim != 2 and sample_dims is None:
        raise ValueError(
            f"the DataArray has dims {arr.dims}; pass "
            "sample_dims=(...) to say which are samples"
        )
    prep = describe(
        arr,
        sample_dims=sample_dims,
        feature_dims=feature_dims,
        weights=weights,
        dataset=dataset,
    )
    return prep.stack(arr, chunks=chunks, strip_bytes=_task_bytes(task_size)), prep


def remember(X, prep: Preprocessing | None):
    """``X`` as ``open_matrix`` returns it, holding ``prep`` when ``prep`` weights its
    columns: a DataArray in its attributes, and its dask array (or a bare array) as
    :func:`named_matrix` makes it, so that it is never weighted twice."""
    if prep is None or prep.weights is None:
        return X
    if isinstance(X, xr.DataArray):
        if not isinstance(X.data, da.Array):
            return X
        return X.copy(data=named_matrix(X.data, prep))
    return named_matrix(X, prep)


def _dataarray_matrix(arr: xr.DataArray, **options) -> xr.DataArray:
    """The matrix of a DataArray as ``open_matrix`` returns it (see
    :func:`stacked`)."""
    return remember(*stacked(arr, **options))


def named_weights(rule: str, arr: xr.DataArray, dataset: xr.Dataset | None = None):
    """Weights named by a string: ``sqrt_coslat`` / ``coslat`` or a variable/coordinate.

    ``sqrt_coslat``: √cos(latitude), the EOF-analysis weighting under which each grid
    cell's share of the covariance is proportional to its area; ``coslat``:
    cos(latitude). The latitude is found by its meaning and checked to be in degrees
    (:func:`~scalepca.preprocessing._latitude.find_latitude`, the rule of
    :func:`scalepca.analysis.eof.coslat_weights` too). Any other string names a
    variable of ``dataset`` (the source the data came from) or a coordinate of
    ``arr``.
    """
    if rule in WEIGHT_RULES:
        from ._latitude import LatitudeError, coslat

        try:
            w = coslat(arr, 0.5 if rule == "sqrt_coslat" else 1.0)
        except LatitudeError as err:
            raise WeightsError(f"{rule!r}: {err}") from None
        return w.drop_vars([c for c in w.coords if c not in w.dims])
    if dataset is not None and rule in dataset.variables:
        return dataset[rule].load()
    if rule in arr.coords:
        return arr[rule].load()
    names = list(dataset.variables) if dataset is not None else list(arr.coords)
    raise WeightsError(
        f"{rule!r} is neither one of {', '.join(WEIGHT_RULES)} nor a variable of "
        f"the data (they have {', '.join(map(str, names)) or 'none'})"
    )


def is_dask_frame(X) -> bool:
    return hasattr(X, "to_dask_array") and hasattr(X, "columns")


def frame_matrix(X, *, what: str = "X", weights=None, lengths: bool = True) -> da.Array:
    """A dask DataFrame as a dask array of its partitions (row blocks).

    What needs only the frame's metadata is checked first (the columns' dtype;
    ``weights``, one per column, as ``open_matrix`` takes them for arrays). With
    ``lengths`` the row count of each partition is then computed, which reads every
    partition once: one pass over the data, which ``fit`` counts in ``n_passes_``;
    without, the blocks' row counts are unknown (NaN) and nothing is computed
    (``transform`` maps the partitions as they are).
    """
    lazy = X.to_dask_array()  # no compute: rows of unknown count
    if lazy.dtype.kind not in "fiub":
        check_dtype(lazy.dtype, what=what)
    if weights is not None:
        column_weights(weights, lazy.shape[1])
    return X.to_dask_array(lengths=True) if lengths else lazy


def column_weights(weights, d: int) -> np.ndarray:
    """One validated weight per column of a 2-D array (small: checked eagerly)."""
    if isinstance(weights, str):
        raise WeightsError(
            f"{weights!r}: named weights need xarray data with coordinates; a "
            "2-D array takes one weight per column"
        )
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (d,):
        raise WeightsError(f"have shape {w.shape}; expected ({d},), one per feature")
    if not np.all(np.isfinite(w)):
        raise WeightsError("contain NaN or infinite values")
    if np.any(w < 0):
        raise WeightsError("must be non-negative")
    return w


# -- carrying a description with a matrix ----------------------------------------------
# A DataArray carries its description in its attributes; a dask matrix made by
# open_matrix is a PreparedMatrix and a NumPy one a PreparedArray, which hold it: the
# record goes where the matrix goes (a copy, rows of it, another process), never
# through a table of this module. The dask matrix's graph name is its own,
# ``scalepca-matrix-<random>`` (a dask name is otherwise a hash of the values and
# steps, which an unrelated array of the same values shares), so that an array
# computed from it in any other way (a sum, ``Y / w``, an ``inverse_transform``), a
# plain dask array, is recognised: it may or may not still be prepared, and
# :meth:`Preprocessing.prepare` refuses it rather than guess. A NumPy matrix's ufunc
# results are PreparedArrays without a record, refused alike.
#: the start of the graph name of a dask matrix made by ``open_matrix``
MATRIX_PREFIX = "scalepca-matrix-"


class PreparedArray(np.ndarray):
    """A NumPy matrix made by :func:`~scalepca.open_matrix`, holding the
    :class:`Preprocessing` that made it (``preparation``).

    A NumPy array in every other way. Its copies (``M.copy()``, ``copy.deepcopy``,
    a pickle), rows, views and ``astype`` hold the record; a ufunc's result (``M * 2``,
    ``M.mean(0)``) holds ``None``, computed from the matrix, which ``transform``
    refuses; a plain ``ndarray`` made of it (``np.array(M)``, ``np.asarray(M)``) is
    data in their own units.
    """

    def __new__(cls, arr: np.ndarray, preparation: Preprocessing | None):
        self = np.asarray(arr).view(cls)
        self.preparation = preparation
        return self

    def __array_finalize__(self, obj):
        self.preparation = getattr(obj, "preparation", None)

    def __array_wrap__(self, arr, *args, **kwargs):
        # (context, return_scalar): NumPy 1 passes the first only
        out = super().__array_wrap__(arr, *args, **kwargs)
        if isinstance(out, PreparedArray):
            out.preparation = None  # computed from the matrix, not the matrix
        return out

    def __reduce__(self):
        rebuild, args, state = super().__reduce__()
        return _unpickled_array, (rebuild, args, state, self.preparation)


def _unpickled_array(rebuild, args, state, preparation):
    arr = rebuild(*args)
    arr.__setstate__(state)
    arr.preparation = preparation
    return arr


class PreparedMatrix(da.Array):
    """A dask matrix made by :func:`~scalepca.open_matrix`, holding the
    :class:`Preprocessing` that made it (``preparation``).

    A dask array in every other way. Its rows (``X[rows]``, ``X.blocks[i]``), a
    rechunk, another dtype, a copy and its persisted and pickled versions hold the
    record too; any other operation gives a plain dask array.
    """

    def __new__(cls, arr: da.Array, preparation: Preprocessing):
        self = super().__new__(cls, arr.dask, arr.name, arr.chunks, meta=arr._meta)
        self.preparation = preparation
        return self

    def _keep(self, arr):
        """``arr``, made from this matrix's rows, holding its record."""
        if isinstance(arr, PreparedMatrix) or not isinstance(arr, da.Array):
            return arr
        return PreparedMatrix(arr, self.preparation)

    def __getitem__(self, index):
        return self._keep(super().__getitem__(index))

    def rechunk(self, *args, **kwargs):
        return self._keep(super().rechunk(*args, **kwargs))

    def astype(self, dtype, **kwargs):
        return self._keep(super().astype(dtype, **kwargs))

    def copy(self):
        return self._keep(super().copy())

    @property
    def blocks(self):
        return _PreparedBlocks(self)

    # the dask collection protocol: persist() and dask.persist rebuild the matrix here
    def __dask_postpersist__(self):
        rebuild, args = super().__dask_postpersist__()
        return _persisted, (rebuild, args, self.preparation)

    def __reduce__(self):
        rebuild, args = super().__reduce__()
        return _unpickled, (rebuild, args, self.preparation)


class _PreparedBlocks(BlockView):
    """``X.blocks`` of a :class:`PreparedMatrix`: blocks of rows hold its record."""

    def __getitem__(self, index):
        return self._array._keep(super().__getitem__(index))


def _persisted(dsk, rebuild, args, preparation, *, rename=None):
    arr = rebuild(dsk, *args, rename=rename) if rename else rebuild(dsk, *args)
    return PreparedMatrix(arr, preparation)


def _unpickled(rebuild, args, preparation):
    return PreparedMatrix(rebuild(*args), preparation)


def held(X, prep: Preprocessing | None):
    """``X`` holding the record ``prep`` of how it was made: a DataArray in its
    attributes, a dask array as a :class:`PreparedMatrix`, a NumPy array as a
    :class:`PreparedArray` (a view: nothing is copied), a SciPy sparse matrix as a
    :class:`PreparedSparse` (CSR); anything else as it is."""
    if prep is None:
        return X
    if isinstance(X, xr.DataArray):
        X.attrs[ATTR] = prep
        return X
    if isinstance(X, da.Array):
        return PreparedMatrix(X, prep)
    if isinstance(X, np.ndarray):
        return PreparedArray(X, prep)
    if sp.issparse(X):
        return PreparedSparse(X, prep)
    return X


class PreparedSparse(sp.csr_matrix):
    """Prepared single-cell counts in memory (a CSR matrix) holding the record of
    their steps (``preparation``), as :class:`PreparedArray` does: its copies, rows,
    ``astype`` and pickles hold it; SciPy's other results (``M * 2``) hold ``None``,
    computed from the matrix, which ``transform`` refuses."""

    preparation = None

    def __init__(self, X, preparation: Preprocessing | None = None, **kwargs):
        super().__init__(X, **kwargs)
        self.preparation = preparation

    def _keep(self, out):
        if isinstance(out, PreparedSparse):
            out.preparation = self.preparation
        return out

    def copy(self):
        return self._keep(super().copy())

    def astype(self, *args, **kwargs):
        return self._keep(super().astype(*args, **kwargs))

    def __getitem__(self, index):
        return self._keep(super().__getitem__(index))


def _identity_block(block):
    return block


def named_matrix(X, prep: Preprocessing | None):
    """The matrix ``open_matrix`` returns, marked as made by ``prep``: a dask array
    as a :class:`PreparedMatrix` of a graph name of its own, else as :func:`held`
    marks it."""
    if prep is None or not isinstance(X, da.Array):
        return held(X, prep)
    name = MATRIX_PREFIX + uuid.uuid4().hex
    return PreparedMatrix(
        X.map_blocks(_identity_block, name=name, dtype=X.dtype, meta=X._meta), prep
    )


def carried(X) -> Preprocessing | None:
    """The description ``X`` carries: a matrix made by scalepca, or rows of one."""
    if isinstance(X, xr.DataArray):
        p = X.attrs.get(ATTR)
        if not isinstance(p, Preprocessing):
            return None
        # xarray keeps attributes through arithmetic: they describe the data only while
        # it is the matrix's own (``M / 2`` is refused as a bare dask array's is)
        return None if computed_from_matrix(X) is not None else p
    if isinstance(X, (PreparedMatrix, PreparedArray, PreparedSparse)):
        return X.preparation
    return None


def unheld(X):
    """``X`` without the record it holds: the plain NumPy array of a
    :class:`PreparedArray` (so that its blocks and results are plain arrays), any
    other input as it is."""
    if isinstance(X, PreparedArray):
        return X.view(np.ndarray)
    return X


def _refuse_computed(X, what: str) -> None:
    """``ValueError`` for ``X`` computed from a matrix scalepca made (see
    :func:`computed_from_matrix`): it may or may not be prepared still."""
    if computed_from_matrix(X) is not None:
        raise ValueError(
            f"{what} is computed from a matrix made by open_matrix by other "
            "steps than the matrix's own row selection, rechunk, astype, copy "
            "or persist, so it may or may not be prepared (weighted) still: "
            "pass the matrix open_matrix made (or rows of it), or the data in "
            "their own units"
        )


def computed_from_matrix(X) -> str | None:
    """The name of a scalepca dask matrix in ``X``'s graph when ``X`` is a plain dask
    array (or a DataArray of one) computed from it, the class name of an in-memory
    result computed from an in-memory matrix (else ``None``)."""
    if isinstance(X, xr.DataArray):
        X = X.data
    if isinstance(X, (PreparedArray, PreparedSparse)) and X.preparation is None:
        return type(X).__name__
    if not isinstance(X, da.Array) or isinstance(X, PreparedMatrix):
        return None
    return next((n for n in X.dask.layers if n.startswith(MATRIX_PREFIX)), None)


def prepare_counts(X, prep, *, what: str = "X"):
    """Raw counts ``X`` made into the matrix ``prep`` (a ``Preprocessing`` with
    ``cells``) describes: a DataArray over (obs, var) on the kept genes for AnnData
    and DataArray input, a lazy dask array for dask input, a CSR matrix for data in
    memory. Genes are checked against the fit's (their number, and their names when
    both sides have them)."""
    import xarray as xr

    from .._validation import as_csr_blocks, is_sparse
    from ._singlecell import _as_blocks, raw_counts

    steps = prep.cells
    X = raw_counts(X, layer=prep.layer)
    if isinstance(X, xr.DataArray):
        names = X["var"].values if "var" in X.coords else None
        steps.check_genes(X.shape[1], names, what)
        data = _as_blocks(X)
        coords = {c: X.coords[c] for c in X.coords if "var" not in X.coords[c].dims}
        kept = steps.kept_gene_names()
        if kept is not None:
            coords["var"] = kept
        out = xr.DataArray(steps.apply(data), dims=X.dims, coords=coords, name=X.name)
        return held(out, prep)
    steps.check_genes(X.shape[1], None, what)
    if isinstance(X, da.Array):
        blocks = as_csr_blocks(X) if is_sparse(X) else X.rechunk({1: -1})
        return named_matrix(steps.apply(blocks), prep)
    return held(steps.block(X if is_sparse(X) else np.asarray(X)), prep)
