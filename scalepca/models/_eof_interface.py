"""The EOF interface of the linear models whose components are the eigenvectors of
the covariance (PCA, PPCA): what the tools of :mod:`scalepca.analysis` read a fit
through."""

from __future__ import annotations

import numpy as np

from ._affine import affine_map


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
