"""The fitted state of an estimator: whether it is fitted, forgetting an earlier fit,
the record of how its matrix was made (``preprocessing_``) and of its rows, and the
state a model store keeps (``_state_to_save`` / ``_restore_state``, the hooks
:mod:`scalepca.models._saving` and :mod:`scalepca.persistence` call)."""

from __future__ import annotations

import logging

import numpy as np
from sklearn.utils.validation import check_is_fitted

logger = logging.getLogger(__name__)

#: prefix of the saved arrays of a model's single-cell steps
CELLS = "_preprocessing_cells_"


class FittedStateMixin:
    """Fitted-state bookkeeping and persistence of an estimator (composed by
    :class:`~scalepca.models.base.DecompositionMixin`)."""

    #: names of private attributes that ``save`` must keep besides public ``*_``
    #: attributes
    _saved_private: tuple[str, ...] = ()

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "n_features_in_")

    def _check_fitted(self):
        check_is_fitted(
            self, msg=f"this {type(self).__name__} is not fitted yet; call fit(X) first"
        )

    def _reset_fitted(self) -> None:
        """Forget the fitted attributes (names ending in ``_``) of an earlier fit."""
        for attr in [
            a for a in vars(self) if a.endswith("_") and not a.startswith("__")
        ]:
            delattr(self, attr)

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
        if template is not None:
            from ..io._stack import template_from_json

            self._feature_template = template_from_json(template)
        if prep is not None:
            from ..preprocessing._steps import Preprocessing

            self._preprocessing = Preprocessing.from_json(prep, weights, cells)
