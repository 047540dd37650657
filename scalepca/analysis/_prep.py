"""The data preparation an analysis tool owns (MCA, Hilbert EOF, bootstrap EOF).

As every scalepca model, a tool keeps at ``fit`` the description of how each field's
matrix was made from the user's data
(:class:`~scalepca.preprocessing._steps.Preprocessing`: variable, dims, weights,
grid): ``transform`` of new data in the field's own layout and units repeats it
(stack, weight, check the grid), a matrix that ``open_matrix`` made is checked
against it, and ``save`` / :func:`scalepca.load` keep it with the rest of the model's
state (:func:`state_of` / :func:`restored`: its JSON and its weights; the fields'
feature coordinates beside them).
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)


class OneField:
    """What a tool of one field (Hilbert EOF, bootstrap EOF) says of its fit, as every
    model does: the preparation it recorded and the samples behind its eigenvalues."""

    @property
    def preprocessing_(self):
        """How the fitted matrix was made from the data (variable, dims, weights: what
        ``transform`` repeats on new raw data), or None (a bare array).

        Returns
        -------
        preprocessing : Preprocessing or None
            Its ``variable``, ``sample_dims``, ``feature_dims`` and ``weights``.
        """
        return getattr(self, "_preprocessing", None)

    @property
    def n_spectrum_samples_(self) -> int:
        """The number of samples behind the eigenvalues ``explained_variance_``
        (``n_samples_``), as :func:`scalepca.north_test` reads it.

        Returns
        -------
        n : int
            ``n_samples_``.
        """
        if not self.__sklearn_is_fitted__():
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(f"this {type(self).__name__} is not fitted yet")
        return int(self.n_samples_)


def field_input(X, what: str = "X", prep=None):
    """``X`` as a tool's :class:`~scalepca.preprocessing._matrix.MatrixInput`: made as
    the fitted field's matrix was first (``prep``: its description; None at ``fit`` or
    for a model fitted on a bare array: ``X`` as it is), then through
    :func:`~scalepca.preprocessing._matrix.as_matrix`, the door of every estimator's
    input (metadata checks; sparse data refused there by name: the tools' products are
    dense).

    2-D blocks are kept: the strip solvers read them as they are, the row passes
    regroup them (:func:`~scalepca._validation.full_rows`), so a field chunked along
    space is never merged into one block.
    """
    from ..preprocessing._matrix import as_matrix

    if prep is not None:
        X = prep.prepare(X, what=what)
    return as_matrix(X, what=what, min_samples=2, allow_2d_blocks=True)


def components_asked(params: dict) -> int | None:
    """``n_components`` as the solver choice reads it: a count, or None when k is
    chosen from the spectrum (a variance fraction, or every mode)."""
    k = params.get("n_components")
    if isinstance(k, int):
        return k
    return None


def kept_features(xin):
    """The feature coordinates a tool keeps of the input ``xin`` (a
    :func:`field_input`): those of xarray input, else None."""
    if xin.kind != "xarray":
        return None
    from ..io._stack import feature_template

    return feature_template(xin.template)


def _suffixes(n: int) -> tuple[str, ...]:
    """The saved names' suffix of each field: none for one field (as every model store
    names its preparation), the field's letter for two (MCA's X and Y)."""
    return ("",) if n == 1 else tuple(f"_{c}" for c in "xy"[:n])


def state_of(preps: tuple, templates: dict) -> dict:
    """The saved state of the fields' descriptions ``preps`` (one per field, None for a
    field fitted on a bare array) and of the coordinates ``templates`` (saved name → a
    template of :mod:`scalepca.io._stack`, or None)."""
    from ..io._stack import template_to_json

    state = {}
    for name, template in templates.items():
        if template is None:
            continue
        try:  # coordinates, so the labelled views work after load
            state[name] = template_to_json(template)
        except TypeError as err:
            logger.warning("not saving the coordinates %s: %s", name, err)
    for suffix, prep in zip(_suffixes(len(preps)), preps, strict=True):
        if prep is None:
            continue
        state[f"_preprocessing{suffix}_json"] = prep.to_json()
        if prep.weights is not None:
            weights = np.asarray(prep.weights, dtype=np.float64)
            state[f"_preprocessing_weights{suffix}"] = weights
    return state


def restored(state: dict, n_fields: int, templates: tuple) -> tuple[tuple, tuple]:
    """``(descriptions, coordinates)`` taken out of a loaded ``state`` written by
    :func:`state_of`: one description per field (None if none was saved) and the
    coordinates saved under the names ``templates`` (None if none)."""
    from ..io._stack import template_from_json
    from ..preprocessing._steps import Preprocessing

    preps = []
    for suffix in _suffixes(n_fields):
        prep = state.pop(f"_preprocessing{suffix}_json", None)
        weights = state.pop(f"_preprocessing_weights{suffix}", None)
        if prep is not None and (
            not isinstance(prep, dict) or prep.get("cells") is not None
        ):
            raise ValueError(
                "it holds a field description the analysis tools do not write"
            )
        preps.append(None if prep is None else Preprocessing.from_json(prep, weights))
    coords = tuple(
        None if t is None else template_from_json(t)
        for t in (state.pop(name, None) for name in templates)
    )
    return tuple(preps), coords
