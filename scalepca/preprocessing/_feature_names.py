"""Feature names: one notion for every input kind, recorded in ``fit``, checked on new
data.

The names of a matrix's columns, wherever the input keeps them:

* a data frame (pandas, polars, dask DataFrame): its columns;
* an AnnData: its ``var_names`` (the genes);
* an xarray (sample × feature) matrix: the index coordinate of its feature dim (for an
  N-D field, of the one feature dim it is stacked to; several stacked dims have no names
  — their coordinates are checked as a grid, ``io._stack.feature_differences``).

Names are strings, as in scikit-learn: columns all of another type are no names, a
mix of strings and other types is refused (scikit-learn's rule). ``fit`` records them
as ``feature_names_in_``; :func:`check_feature_names` compares new data with them,
the same way for every kind (a model fitted on a DataFrame and given a DataArray
too): other names, or the same names in another order, are refused before anything is
computed (scikit-learn refuses both; nothing is reordered silently), and names on one
side only give scikit-learn's warning.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["check_feature_names", "feature_names_of"]

#: names listed in a message, at most
_LISTED = 5


def _strings(values, *, what: str, frame: bool) -> np.ndarray | None:
    names = np.asarray(list(values), dtype=object)
    if names.size == 0:
        return None
    kinds = {type(v) for v in names}
    if kinds == {str}:
        return names
    if frame and str in kinds:  # scikit-learn refuses mixed column names the same way
        types = sorted(t.__qualname__ for t in kinds)
        raise TypeError(
            f"Feature names are only supported if all input features have string "
            f"names, but {what} has {types} as feature name / column name types; "
            f"convert them all to strings ({what}.columns = "
            f"{what}.columns.astype(str)) or none"
        )
    return None


def feature_names_of(
    X, *, feature_dim: str | None = None, what: str = "X"
) -> np.ndarray | None:
    """The feature names of ``X`` as an object array of str, or None (metadata only).

    ``X``: a data frame, an AnnData, or a DataArray (or Dataset): the index along
    ``feature_dim`` (the fitted feature dim, for data in their own layout), else
    along the second dim of a 2-D DataArray (a matrix: dims (sample, feature));
    anything else has no names.
    """
    import xarray as xr

    from ..io._anndata import is_anndata_object

    # a Dataset: its variable's feature dim
    if isinstance(X, (xr.DataArray, xr.Dataset)):
        dim = feature_dim
        if dim not in X.dims and isinstance(X, xr.DataArray) and X.ndim == 2:
            dim = X.dims[1]
        elif dim not in X.dims:
            return None
        index = X.indexes.get(dim)
        if index is None or getattr(index, "nlevels", 1) > 1:
            return None
        return _strings(index, what=what, frame=False)
    if is_anndata_object(X):
        return _strings(X.var_names, what=what, frame=False)
    columns = getattr(X, "columns", None)
    if columns is not None and not isinstance(X, np.ndarray) and hasattr(X, "shape"):
        return _strings(columns, what=what, frame=True)
    return None


def _listing(names) -> str:
    shown = [f"- {n}\n" for n in names[:_LISTED]]
    return "".join(shown) + ("- ...\n" if len(names) > _LISTED else "")


def check_feature_names(
    estimator, names: np.ndarray | None, *, what: str = "X"
) -> None:
    """Compare the feature names of new data with the fitted ``feature_names_in_``.

    Raises ``ValueError`` naming the unseen and the missing names, or the first
    position where the same names come in another order; warns (as scikit-learn does)
    when only one side has names. The messages contain scikit-learn's sentences.
    """
    fitted = getattr(estimator, "feature_names_in_", None)
    cls = type(estimator).__name__
    if fitted is None and names is None:
        return
    if fitted is None:
        warnings.warn(
            f"{what} has feature names, but {cls} was fitted without feature names",
            UserWarning,
            stacklevel=4,
        )
        return
    if names is None:
        warnings.warn(
            f"{what} does not have valid feature names, "
            f"but {cls} was fitted with feature names",
            UserWarning,
            stacklevel=4,
        )
        return
    fitted = np.asarray(fitted, dtype=object)
    if fitted.shape == names.shape and np.array_equal(fitted, names):
        return
    unseen = sorted(set(names) - set(fitted))
    missing = sorted(set(fitted) - set(names))
    msg = "The feature names should match those that were passed during fit.\n"
    if unseen:
        msg += "Feature names unseen at fit time:\n" + _listing(unseen)
    if missing:
        msg += "Feature names seen at fit time, yet now missing:\n" + _listing(missing)
    if not unseen and not missing:
        first = next(
            (i for i, (a, b) in enumerate(zip(names, fitted, strict=False)) if a != b),
            min(names.size, fitted.size),
        )
        msg += "Feature names must be in the same order as they were in fit.\n"
        if first < min(names.size, fitted.size):
            msg += (
                f"{what} has them in another order: {names[first]!r} at position "
                f"{first}, where the fit had {fitted[first]!r}.\n"
            )
    msg += (
        f"Give {what} the fitted features in the fitted order (feature_names_in_): "
        "df[est.feature_names_in_], arr.sel(<feature dim>=est.feature_names_in_) or "
        "adata[:, est.feature_names_in_]."
    )
    raise ValueError(msg)
