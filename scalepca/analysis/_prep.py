"""The data preparation an analysis tool owns (MCA, Hilbert EOF, bootstrap EOF).

As every scalepca model, a tool keeps at ``fit`` the description of how each field's matrix
was made from the user's data (:class:`~scalepca.preprocessing._steps.Preprocessing`:
variable, dims, weights, grid): ``transform`` of new data in the field's own layout and units
repeats it (stack, weight, check the grid), a matrix that ``open_matrix`` made is checked
against it, and ``save``/``load`` keep it (its JSON in the store's attributes, its weights as
an array). Stores written before the tools kept it hold none: their ``transform`` takes the
matrix as it is.
"""

from __future__ import annotations

import numpy as np

#: the store attribute holding each field's description (a list: one per field, or None)
ATTR = "preprocessing"


def weights_names(n_fields: int) -> tuple[str, ...]:
    """The store's arrays of each field's weights: one field as every model store names it,
    two (MCA's X and Y) with the field's letter."""
    if n_fields == 1:
        return ("_preprocessing_weights",)
    return tuple(f"_preprocessing_weights_{c}" for c in "xy"[:n_fields])


def prepared(prep, X, what: str):
    """``X`` made into a matrix as the fitted field's was (``prep``: its description, None
    for a model fitted on a bare array or loaded from an older store: ``X`` as it is)."""
    if prep is None or X is None:
        return X
    return prep.prepare(X, what=what)


def to_store(preps) -> tuple[list, dict]:
    """``(attribute value, arrays by name)`` of the fields' descriptions ``preps``."""
    names = weights_names(len(preps))
    attrs = [None if p is None else p.to_json() for p in preps]
    arrays = {name: np.asarray(p.weights, dtype=np.float64)
              for p, name in zip(preps, names, strict=True)
              if p is not None and p.weights is not None}
    return attrs, arrays


def from_store(group, attrs: dict, n_fields: int) -> tuple:
    """The fields' descriptions a store written by :func:`to_store` holds (Nones if none)."""
    from ..preprocessing._steps import Preprocessing

    states = attrs.get(ATTR)
    if states is None:  # a store written before the tools kept their preparation
        return (None,) * n_fields
    if not isinstance(states, list) or len(states) != n_fields:
        raise ValueError(f"its {ATTR!r} must list {n_fields} field description(s)")
    out = []
    for state, name in zip(states, weights_names(n_fields), strict=True):
        if state is None:
            out.append(None)
            continue
        if not isinstance(state, dict) or state.get("cells") is not None:
            raise ValueError(f"its {ATTR!r} holds a description the analysis tools do not "
                             "write")
        weights = group[name][...] if name in group else None
        out.append(Preprocessing.from_json(state, weights))
    return tuple(out)
