"""Features left out of a fit: those with no observed value (NaN in every sample:
land in an ocean grid, dead sensors) leave the fit and come back as NaN in the
per-feature attributes."""

from __future__ import annotations

import logging
import warnings

import dask.array as da
import numpy as np

from ..preprocessing._matrix import MatrixInput
from ._input import raise_on_nonfinite

logger = logging.getLogger(__name__)

#: why features leave a fit (:meth:`DecompositionMixin._leave_out_land`)
LAND = "NaN in every sample"


class FeatureSelectionMixin:
    """The all-NaN features of a fit: left out, recorded (``features_kept_``) and
    put back as NaN (composed by :class:`~scalepca.models.base.DecompositionMixin`)."""

    #: fitted per-feature attributes and their feature axis: computed on the kept
    #: features, then widened to all features with NaN at features dropped in fit
    #: (all-NaN, e.g. land)
    _per_feature_attrs: tuple[tuple[str, int], ...] = (("components_", 1), ("mean_", 0))

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
        other non-finite values first. Returns the mask of kept features (all True
        when every feature is kept). ``reason`` says why a feature with a count of 0
        leaves (genotypes: also monomorphic).

        The model records the mask (``_features_kept``) only when a feature leaves:
        ``_features_kept`` is the fit's column selection, None when there is none, so
        that the data of a fit without land go through no column index.
        """
        land = np.asarray(n_observed) == 0
        if check is not None:
            check(land)
        n_drop = int(land.sum())
        if not n_drop:
            return ~land
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
