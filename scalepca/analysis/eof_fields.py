"""EOFs, PCs, reconstructions and projections of a fitted model, scaled as eofs scales
them.

The views eofs users know by name, on a fitted :class:`scalepca.PCA` or PPCA:

- :func:`eofs`: the EOFs with eofs' ``eofscaling`` (0: unit norm, 1: divided by √λ,
  2: multiplied by √λ), over ``mode`` and the field's own dims for xarray-fitted models
  (eofs ``Eof.eofs``);
- :func:`pcs`: the projections of the centred data on the EOFs with eofs' ``pcscaling``
  (0: as projected, variance λ; 1: divided by √λ, unit variance; 2: multiplied by √λ)
  (eofs ``Eof.pcs``);
- :func:`reconstructed_field`: the field rebuilt from a few modes, anomalies only (the
  mean left out, weights divided out) as eofs' ``reconstructedField`` gives it, or with
  the mean (``with_mean=True``, as ``inverse_transform(transform(X))`` of those modes);
- :func:`project_field`: eofs' ``projectField``: the field, weighted as at the fit but
  **not centred**, projected on the (scaled) EOFs: pseudo-PCs of data that are anomalies
  already, e.g. of another period against the fitted climatology.

λ is ``explained_variance_`` (the covariance's eigenvalues, divided by ``n − 1`` as
eofs' default ``ddof=1``). Data-touching results are lazy: a blockwise map per row block
of the input (one pass when computed), through the model's own preparation of its input
(an N-D field is stacked, weighted and land-masked as at the fit; ``standardize=True``
divides by ``scale_``).

Examples
--------
>>> pca = scalepca.PCA(8).fit(scalepca.open_matrix(sst, sample_dims="time",
...                                                weights="sqrt_coslat"))
>>> eofs(pca, eofscaling=2)                      # (mode, lat, lon), loadings: EOF · √λ
>>> pcs(pca, sst, pcscaling=1)                   # (time, mode), unit variance, lazy
>>> reconstructed_field(pca, sst, [1, 2])        # anomalies of modes 1 and 2, in sst's units
>>> project_field(pca, sst_other_period)         # uncentred pseudo-PCs (time, mode)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .eof import _check_centred, _check_model, _check_shape, _n_modes

__all__ = ["eofs", "pcs", "project_field", "reconstructed_field"]

#: eofs' scalings of EOFs and PCs, by their option value
SCALINGS = {0: "unscaled", 1: "divided by √λ", 2: "multiplied by √λ"}


def _scale(model, k: int, scaling, name: str) -> np.ndarray:
    """The factor per mode of eofs' ``pcscaling`` / ``eofscaling`` ``scaling`` (0, 1,
    2)."""
    if isinstance(scaling, bool) or scaling not in SCALINGS:
        raise ValueError(
            f"{name} must be 0 (unscaled), 1 (divided by √eigenvalue) or 2 "
            f"(multiplied by √eigenvalue); got {scaling!r}"
        )
    if scaling == 0:
        return np.ones(k)
    _check_centred(model, f"{name}={scaling}")
    lam = np.asarray(model.explained_variance_[:k], dtype=np.float64)
    return 1.0 / np.sqrt(lam) if scaling == 1 else np.sqrt(lam)


def _modes(model, modes) -> np.ndarray:
    """0-based indices of ``modes``: an int n (the leading n), or mode numbers from
    1."""
    k = model.components_.shape[0]
    if modes is None or isinstance(modes, (int, np.integer)):
        return np.arange(_n_modes(model, modes, "n_modes"))
    if not isinstance(modes, Iterable) or isinstance(modes, (str, bytes)):
        raise ValueError(
            f"modes must be a number of leading modes or a list of mode numbers "
            f"(from 1); got {modes!r}"
        )
    out = list(modes)
    bad = [
        m
        for m in out
        if isinstance(m, bool)
        or not isinstance(m, (int, np.integer))
        or not 1 <= m <= k
    ]
    if not out or bad:
        raise ValueError(
            f"modes {out!r}: mode numbers run from 1 to {k} (the model's components)"
        )
    return np.asarray(out, dtype=np.int64) - 1


def eofs(model, *, n_modes: int | None = None, eofscaling: int = 0):
    """The leading EOFs, scaled as eofs' ``Eof.eofs(eofscaling=...)``.

    Parameters
    ----------
    model : fitted scalepca.PCA or PPCA
    n_modes : int, optional
        Number of leading modes (default: all components).
    eofscaling : {0, 1, 2}, default=0
        0: unit-norm EOFs (``components_``); 1: divided by √λ; 2: multiplied by √λ (the
        loadings: the covariance of the field with the unit-variance PCs).

    Returns
    -------
    DataArray over (``mode``, the original feature dims) for a model fitted on xarray
    data (as ``components_xr_``: EOFs of the weighted field, NaN where the model left
    features out), else ndarray (n_modes, n_features). Reads no data.

    Examples
    --------
    >>> import scalepca
    >>> sst = scalepca.datasets.make_gridded(120, n_lat=18, n_lon=36)["sst"]  # (time, lat, lon)
    >>> X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    >>> pca = scalepca.PCA(3).fit(X)
    >>> from scalepca.analysis.eof_fields import eofs
    >>> loadings = eofs(pca, eofscaling=2)           # EOF · √λ
    >>> loadings.dims, loadings.shape
    (('mode', 'lat', 'lon'), (3, 18, 36))
    """
    _check_model(model)
    k = _n_modes(model, n_modes)
    values = np.asarray(model.components_[:k], dtype=np.float64)
    values = values * _scale(model, k, eofscaling, "eofscaling")[:, None]
    return model.to_field(values, "eofs")


def pcs(model, X, *, n_modes: int | None = None, pcscaling: int = 0):
    """Projections of ``X`` on the leading EOFs, scaled as eofs'
    ``Eof.pcs(pcscaling=...)``.

    ``(x − mean_) · EOFᵀ`` per sample (of the standardised rows with
    ``standardize=True``), whatever ``transform`` returns (whitened scores, PPCA's
    posterior means); on the training data the PCs of eofs.

    Parameters
    ----------
    model : fitted scalepca.PCA or PPCA
    X : whatever the model's ``transform`` takes
        The raw field in its own layout and units, the matrix of ``open_matrix``, or an
        array of the fitted features.
    n_modes : int, optional
        Number of leading modes (default: all).
    pcscaling : {0, 1, 2}, default=0
        0: as projected (variance λ on the training data); 1: divided by √λ (unit
        variance); 2: multiplied by √λ.

    Returns
    -------
    The input's kind: DataArray over (sample dims, ``mode``), dask or NumPy array of
    shape (n_samples, n_modes). Lazy for dask and xarray input: one blockwise map per
    row block.

    Examples
    --------
    >>> import scalepca
    >>> sst = scalepca.datasets.make_gridded(120, n_lat=18, n_lon=36)["sst"]  # (time, lat, lon)
    >>> X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    >>> pca = scalepca.PCA(3).fit(X)
    >>> from scalepca.analysis.eof_fields import pcs
    >>> z = pcs(pca, sst, pcscaling=1)               # lazy, unit variance
    >>> z.dims, z.std("time", ddof=1).values.round(6).tolist()
    (('time', 'mode'), [1.0, 1.0, 1.0])
    """
    _check_model(model, project=True)
    k = _n_modes(model, n_modes)
    scale = _scale(model, k, pcscaling, "pcscaling")
    _check_shape(model, X)
    return model.project(X, model.eof_matrix(k) * scale[None, :])


def reconstructed_field(model, X, n_modes=None, *, with_mean: bool = False):
    """The field rebuilt from some modes: eofs' ``reconstructedField`` (anomalies).

    ``Σ_i pc_i(t) · EOF_i`` over the chosen modes, with the steps of the fit undone
    (weights divided out, NaN where a weight is 0; ``scale_`` multiplied back; stacked
    dims unstacked): the anomalies of ``X`` in the field's own units carried by those
    modes. ``with_mean=True`` adds the fitted mean: the same as ``inverse_transform`` of
    the scores of those modes (all modes:
    ``model.inverse_transform(model.transform(X))`` for ``PCA(whiten=False)``).

    Parameters
    ----------
    model : fitted scalepca.PCA or PPCA
    X : whatever the model's ``transform`` takes (the training field for eofs' result)
    n_modes : int or iterable of int, optional
        The leading ``n_modes`` modes, or mode numbers counted from 1 (``[1, 2, 5]``),
        as in eofs. Default: all components.
    with_mean : bool, default=False
        Add ``mean_`` (the field's mean, in its units) to the anomalies.

    Returns
    -------
    The input's kind: a DataArray over the field's dims (xarray input), dask or NumPy
    array (n_samples, n_features). Lazy: one blockwise map per row block (projection
    and reconstruction in the same tasks).

    Examples
    --------
    >>> import scalepca
    >>> sst = scalepca.datasets.make_gridded(120, n_lat=18, n_lon=36)["sst"]  # (time, lat, lon)
    >>> X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    >>> pca = scalepca.PCA(3).fit(X)
    >>> from scalepca.analysis.eof_fields import reconstructed_field
    >>> anomalies = reconstructed_field(pca, sst, [1, 2])   # modes 1 and 2, in sst's units
    >>> anomalies.dims, anomalies.shape
    (('time', 'lat', 'lon'), (120, 18, 36))
    """
    _check_model(model, project=True)
    idx = _modes(model, n_modes)
    if not isinstance(with_mean, (bool, np.bool_)):
        raise ValueError(f"with_mean must be true or false; got {with_mean!r}")
    _check_shape(model, X)
    return model.reconstruct(X, idx, with_mean=bool(with_mean))


def project_field(
    model,
    field,
    *,
    n_modes: int | None = None,
    eofscaling: int = 0,
    weighted: bool = True,
):
    """Pseudo-PCs of ``field``: eofs' ``projectField``, the field projected
    **uncentred**.

    ``field · EOFᵀ`` per sample, the mean **not** removed (unlike ``transform`` and
    :func:`pcs`, which project ``field − mean_``): give anomalies (e.g. the departures
    of another period from its own or the fitted climatology). As in eofs, the field is
    weighted as the fitted data were (``weighted=True``), and divided by ``scale_`` when
    the model standardises.

    Parameters
    ----------
    model : fitted scalepca.PCA or PPCA
    field : whatever the model's ``transform`` takes
        An N-D field in its own layout and units (stacked and weighted as at the fit),
        the matrix of ``open_matrix``, or an array of the fitted features.
    n_modes : int, optional
        Number of leading EOFs (default: all).
    eofscaling : {0, 1, 2}, default=0
        Scaling of the EOFs projected on, as in :func:`eofs`.
    weighted : bool, default=True
        ``False``: project the field without the fitted weights (eofs'
        ``weighted=False``: the weighted input divided by the weights again; 0 where a
        weight is 0).

    Returns
    -------
    The input's kind: DataArray over (sample dims, ``mode``), dask or NumPy array of
    shape (n_samples, n_modes); lazy for dask and xarray input, one blockwise map per
    row block.

    Examples
    --------
    >>> import scalepca
    >>> sst = scalepca.datasets.make_gridded(120, n_lat=18, n_lon=36)["sst"]  # (time, lat, lon)
    >>> X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    >>> pca = scalepca.PCA(3).fit(X)
    >>> from scalepca.analysis.eof_fields import project_field
    >>> z = project_field(pca, sst - sst.mean("time"))      # give anomalies: not centred
    >>> z.dims, z.shape
    (('time', 'mode'), (120, 3))
    """
    _check_model(model, project=True)
    k = _n_modes(model, n_modes)
    scale = _scale(model, k, eofscaling, "eofscaling")
    if not isinstance(weighted, (bool, np.bool_)):
        raise ValueError(f"weighted must be true or false; got {weighted!r}")
    _check_shape(model, field)
    P = model.eof_matrix(k, weighted=bool(weighted)) * scale[None, :]
    data, Z = model.project_rows(field, P, center=False, what="field")
    return data.wrap_samples(Z)
