"""The xarray views of the fitted attributes (EOF analysis): the feature coordinates of
a model fitted on xarray data, and its per-feature and per-mode values over them."""

from __future__ import annotations

import numpy as np

from ..preprocessing._matrix import MatrixInput


class XarrayViewsMixin:
    """``feature_coords_`` and the ``*_xr_`` views (composed by
    :class:`~scalepca.models.base.DecompositionMixin`)."""

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


def _feature_template(data: MatrixInput):
    """Coordinates of the feature dimension of xarray input (no data), or ``None``."""
    if data.kind != "xarray":
        return None
    from ..io._stack import feature_template

    return feature_template(data.template)
