"""Tools of EOF analysis on a fitted linear model (PCA, PPCA).

What climate analysts do once the EOFs are computed, built on a model's public fitted
attributes (``components_``, ``explained_variance_``, ``explained_variance_ratio_``,
``mean_``, ``n_samples_``):

- :func:`north_test`: North et al.'s (1982) typical sampling errors of the eigenvalues
  and the modes whose error bars overlap a neighbour's (the eofs ``northTest``);
- :func:`eofs_as_correlation` / :func:`eofs_as_covariance`: the field correlated with
  (or the covariance with) each score, in one pass over the data (the eofs
  ``eofsAsCorrelation`` / ``eofsAsCovariance``);
- :class:`~scalepca.analysis.rotation.Rotator` (its own module): varimax and promax
  rotation of the leading modes (xeofs ``EOFRotator``);
- :func:`find_lat_lon`: the latitude and longitude coordinates of a field found by their
  meaning (CF attributes or usual names), e.g. for area weights or map axes.

The scores behind the maps and the rotation are the model's own projections: the data go
through the model's preparation as in its ``transform`` (a raw N-D field is stacked,
weighted and land-masked as in the fit; ``standardize=True`` divides by ``scale_``), so
the tools take whatever ``transform`` takes, sparse data included (centred implicitly,
never densified).

Only small (k × k, k × d) arrays are computed on the client; data-touching work is a
blockwise map plus a tree reduction over row chunks.

Examples
--------
>>> import scalepca
>>> from scalepca.analysis.eof import coslat_weights, eofs_as_correlation
>>> sst = scalepca.datasets.make_gridded(120, n_lat=18, n_lon=36)["sst"]  # (time, lat, lon)
>>> X = scalepca.open_matrix(sst, sample_dims="time", weights=coslat_weights(sst))
>>> pca = scalepca.PCA(4).fit(X)
>>> errors, overlaps = scalepca.north_test(pca)                  # reads no data
>>> overlaps.tolist()
[False, False, False, False]
>>> corr = eofs_as_correlation(pca, X)                           # one pass
>>> corr.dims, corr.shape
(('mode', 'lat', 'lon'), (4, 18, 36))
>>> cov = scalepca.eofs_as_covariance(pca, sst)                  # raw field: in its units
>>> rot = scalepca.Rotator(n_modes=4, power=1).fit(pca)          # varimax; power>1: promax
>>> rot.transform(sst).dims                                      # lazy
('time', 'mode')
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import dask.array as da
import numpy as np
import xarray as xr

from .._validation import full_rows, is_sparse
from ..linalg import passes
from ..linalg.moments import _concat_columns, block_moments, merge_moments

logger = logging.getLogger(__name__)

__all__ = [
    "NorthTest",
    "coslat_weights",
    "eofs_as_correlation",
    "eofs_as_covariance",
    "find_lat_lon",
    "north_test",
]


# -- fitted-model access ---------------------------------------------------------------
def _check_model(model, *, project: bool = False) -> None:
    """Refuse what is not a fitted linear model; ``project``: one that projects data
    on its EOFs as PCA and PPCA do (their ``eof_matrix`` and ``project``: the scores
    of the maps and of the rotation)."""
    missing = [
        a
        for a in ("components_", "explained_variance_", "mean_", "n_samples_")
        if not hasattr(model, a)
    ]
    if missing:
        raise TypeError(
            f"{type(model).__name__} has no {missing}: EOF tools need "
            "a fitted linear model (scalepca.PCA or PPCA after fit)"
        )
    if project and not (hasattr(model, "eof_matrix") and hasattr(model, "project")):
        raise TypeError(
            f"{type(model).__name__} does not project data on EOFs: the maps and "
            "rotated scores need a fitted scalepca.PCA or PPCA"
        )


def _total_variance(model) -> float:
    """Total variance of the fitted data, from the public variances and their
    fractions."""
    ev = np.asarray(model.explained_variance_, dtype=np.float64)
    ratio = np.asarray(model.explained_variance_ratio_, dtype=np.float64)
    return float(ev[0] / ratio[0])


def _n_modes(model, n_modes, what="n_modes") -> int:
    k = len(model.explained_variance_)
    if n_modes is None:
        return k
    if (
        isinstance(n_modes, bool)
        or not isinstance(n_modes, (int, np.integer))
        or n_modes < 1
    ):
        raise ValueError(f"{what} must be a positive integer; got {n_modes!r}")
    if n_modes > k:
        raise ValueError(f"{what}={n_modes} but the model has only {k} components")
    return int(n_modes)


def _check_centred(model, what: str) -> None:
    """Refuse a model whose ``explained_variance_`` are not the covariance's
    eigenvalues in descending order: ``PCA(zero_center=False)`` (a truncated SVD; its
    components follow the singular values of the uncentred data, its variances are
    the scores' and need not decrease)."""
    if getattr(model, "zero_center", True) is False:
        raise ValueError(
            f"{what} needs the eigenvalues of the covariance (centred data, in "
            f"descending order); {type(model).__name__}(zero_center=False) is a "
            f"truncated SVD of the "
            "uncentred data whose explained_variance_ are its scores' variances, not "
            "sorted: fit with zero_center=True"
        )


# -- North's rule of thumb -------------------------------------------------------------
def _spectrum_samples(model) -> int:
    """The sample count of the covariance whose eigenvalues are the model's
    ``explained_variance_`` (its ``n_spectrum_samples_``); refuses a model without
    one."""
    missing = [
        a
        for a in ("explained_variance_", "explained_variance_ratio_")
        if not hasattr(model, a)
    ]
    if missing:
        raise TypeError(
            f"{type(model).__name__} has no {missing}: north_test needs a fitted "
            "linear model with eigenvalues (scalepca.PCA or PPCA after fit)"
        )
    _check_centred(model, "north_test")
    n = getattr(model, "n_spectrum_samples_", None)
    if n is None:
        raise TypeError(
            f"the explained_variance_ of {type(model).__name__} are not the "
            "eigenvalues of a sample covariance: North's errors do not apply"
        )
    return n


class NorthTest(NamedTuple):
    """Result of :func:`north_test`: ``errors`` (k,) and ``overlaps`` (k,) bool."""

    errors: np.ndarray
    overlaps: np.ndarray


def north_test(
    model,
    n_eff: float | None = None,
    *,
    n_modes: int | None = None,
    vfscaled: bool = False,
) -> NorthTest:
    r"""Typical sampling errors of the eigenvalues (North et al., 1982).

    The typical error of eigenvalue :math:`\lambda_i` is

    .. math::

        \delta\lambda_i = \lambda_i \sqrt{2 / n_\mathrm{eff}} .

    When the error bars
    :math:`[\lambda_i - \delta\lambda_i, \lambda_i + \delta\lambda_i]` of two
    neighbouring modes overlap, the two patterns are not separated by the sample: any
    rotation of them within their plane is as likely, and the individual EOFs should not
    be interpreted alone.

    Parameters
    ----------
    model : fitted estimator with eigenvalues
        A fit whose ``explained_variance_`` are the eigenvalues of a sample covariance
        (its ``n_spectrum_samples_`` is not None): PCA, PPCA, MultivariateEOF,
        ExtendedEOF, HilbertEOF, BootstrapEOF.
    n_eff : float, optional
        Number of independent samples. Defaults to ``model.n_spectrum_samples_``, the
        samples of the decomposed covariance (``n_samples_``; an extended EOF's
        windows): every sample independent, as eofs assumes. Pass a smaller effective
        count for autocorrelated series.
    n_modes : int, optional
        Number of leading modes (default: all fitted components).
    vfscaled : bool, default=False
        Divide the errors by the total variance, so they are on the scale of
        ``explained_variance_ratio_`` (eofs ``northTest(vfscaled=True)``).

    Returns
    -------
    NorthTest
        ``errors``: ndarray of shape (n_modes,), the typical errors (scaled if
        ``vfscaled``). ``overlaps``: bool ndarray of shape (n_modes,), True where the
        mode's error bar overlaps the error bar of the mode before or after it. The mode
        after the last fitted component is unknown, so the last mode is compared with
        its predecessor only.

    Notes
    -----
    Reads no data: uses ``explained_variance_`` and ``n_spectrum_samples_`` only. A
    model fitted with ``zero_center=False`` is refused (its variances are no
    eigenvalues, and are not sorted). The errors are as accurate as the eigenvalues:
    with float32 data under the default ``scalepca.gram-precision`` (float32
    products), a trailing mode's error carries a relative error up to about
    :math:`1.5 \cdot 10^{-8}\, \lambda_1/\lambda_i` (the model's Notes state it);
    ``"float64"`` products keep float64 accuracy.

    References
    ----------
    North, G. R., Bell, T. L., Cahalan, R. F. & Moeng, F. J. (1982). Sampling errors
    in the estimation of empirical orthogonal functions. Monthly Weather Review,
    110, 699–706.

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> sd = [10, 9.5, 5, 2, 1, 1, 1, 1, 1, 1]        # modes 1 and 2 nearly degenerate
    >>> X = np.random.default_rng(0).standard_normal((100, 10)) * sd
    >>> errors, overlaps = scalepca.north_test(scalepca.PCA(4).fit(X))
    >>> overlaps.tolist()
    [True, True, False, False]
    """
    n_fit = _spectrum_samples(model)
    k = _n_modes(model, n_modes)
    n = n_fit if n_eff is None else n_eff
    if not np.isfinite(n) or n <= 0:
        raise ValueError(f"n_eff must be a positive number; got {n_eff!r}")
    lam_all = np.asarray(model.explained_variance_, dtype=np.float64)
    err_all = lam_all * np.sqrt(2.0 / n)
    # overlaps are judged on all fitted modes, so the last returned mode sees its
    # successor
    lo, hi = lam_all - err_all, lam_all + err_all
    touch = lo[:-1] <= hi[1:]  # mode i and mode i+1 overlap (variances decrease)
    overlaps = np.zeros(lam_all.size, dtype=bool)
    overlaps[:-1] |= touch
    overlaps[1:] |= touch
    errors = err_all[:k]
    if vfscaled:
        errors = errors / _total_variance(model)
    return NorthTest(errors, overlaps[:k])


# -- correlation / covariance maps -----------------------------------------------------
def _cross_block(f, z: np.ndarray) -> dict:
    """Moments of one row block of the field ``f`` (n × d) and the scores ``z`` (n × k).

    Per-column count/mean/centred sum of squares of ``[f, z]`` (as
    :func:`block_moments`) plus the centred cross products ``(f − f̄)ᵀ (z − z̄)`` (d
    × k), all in float64. A ``scipy.sparse`` block is never densified: it is centred
    implicitly, ``(f − f̄)ᵀ z_c = fᵀ z_c − f̄ (1ᵀ z_c)`` with ``z_c = z − z̄`` (whose
    column sums are zero to rounding, so the field's mean costs about
    ``ε |f̄| / σ_f`` relative, the sparse moments' precision).
    """
    z = np.asarray(z, dtype=np.float64)
    mf = block_moments(f, with_gram=False)
    mz = block_moments(z, with_gram=False)
    out = _concat_columns(mf, mz)
    out["n"] = mf["n"]
    zc = z - mz["mean"]
    if is_sparse(f):
        import scipy.sparse

        f = scipy.sparse.csr_matrix(f, dtype=np.float64)
        if mf[
            "bad"
        ]:  # non-finite stored values count as 0 (their features come out NaN)
            f = f.copy()
            f.data[~np.isfinite(f.data)] = 0.0
        out["cross"] = np.asarray(f.T @ zc) - np.outer(mf["mean"], zc.sum(axis=0))
        return out
    fc = np.asarray(f) - mf["mean"]
    if mf["bad"]:
        fc = np.where(
            np.isfinite(fc), fc, 0.0
        )  # non-finite features come out NaN at the end
    out["cross"] = fc.T @ zc
    return out


def _merge_cross(*parts: dict) -> dict:
    """Pairwise (Chan et al.) merge of :func:`_cross_block` partials."""
    acc = parts[0]
    for b in parts[1:]:
        na, nb = acc["n"], b["n"]
        cross = acc["cross"] + b["cross"]
        if na and nb:
            d = acc["cross"].shape[0]
            delta = b["mean"] - acc["mean"]
            cross += (na * nb / (na + nb)) * np.outer(delta[:d], delta[d:])
        merged = merge_moments(
            {k: v for k, v in acc.items() if k != "cross"},
            {k: v for k, v in b.items() if k != "cross"},
        )
        merged["cross"] = cross
        acc = merged
    return acc


def _cross_moments(F: da.Array, Z: da.Array, split_every: int = 8) -> dict:
    """One pass over the field ``F`` and the scores ``Z`` (same row chunks): merged
    moments.

    Each row block of ``F`` (one column chunk; dense or CSR) meets the scores of the
    same rows in one task (:func:`_cross_block`, a blockwise map: no data move
    between rows), and the partials are merged over the row blocks by
    :func:`~scalepca.linalg.passes.reduce_rows` (fan-in ``split_every``), as the
    pre-image statistics are; only d × k partials travel. The pass is counted on the
    active counter (the calling tool's).
    """
    parts = da.map_blocks(
        _cross_block,
        F,
        Z,
        chunks=((1,) * F.numblocks[0], (1,)),
        dtype=object,
        meta=np.empty((0, 0), dtype=object),
    )
    (out,) = passes.compute(
        passes.reduce_rows(parts, None, _merge_cross, split_every=split_every),
        name="cross moments",
    )
    return out


def _check_shape(model, X) -> None:
    """Refuse an array whose shape is not (samples × the fitted features), before any
    read.

    Labelled data (xarray, AnnData) are checked by the model's own preparation
    instead.
    """
    if isinstance(X, (xr.DataArray, xr.Dataset)) or not hasattr(X, "shape"):
        return
    shape = tuple(X.shape)
    d = model.n_features_in_
    if len(shape) != 2 or shape[1] != d:
        raise ValueError(f"X has shape {shape}; the model was fitted on {d} features")


def _matrix_dims(template: xr.DataArray) -> tuple[tuple, tuple]:
    """(sample dims, feature dims) that were stacked into a (sample × feature)
    DataArray."""
    out = []
    for dim in template.dims:
        index = template.indexes.get(dim)
        if index is not None and getattr(index, "nlevels", 1) > 1:  # stacked dims
            out.append(tuple(index.names))
        else:
            out.append((dim,))
    return out[0], out[1]


def _field_matrix(field, data, model):
    """``(matrix, labels)`` of the field: a dask array (row blocks, one column chunk)
    holding the samples and features of ``data`` (the input as the model's ``transform``
    took it), and the stacked DataArray that labels the maps (``None`` for arrays).

    An N-D DataArray (the raw field) is stacked as the data were, without weights:
    maps in the field's own units. A matrix (NumPy, dask, sparse, a 2-D DataArray
    such as an output of ``open_matrix``) is taken as it is.
    """
    from ..io._stack import stack_dataarray
    from ..preprocessing._matrix import as_matrix
    from ..preprocessing._steps import carried

    prep = model.preprocessing_
    if isinstance(field, xr.Dataset):
        if prep is None or not prep.labelled:
            raise TypeError("field is a Dataset; pass one variable, e.g. ds['sst']")
        field = prep._variable_of(
            field, "field"
        )  # the fitted variable, as transform picks it
    labels = None
    if isinstance(field, xr.DataArray):
        matrix_like = carried(field) is not None or (
            data.kind == "xarray" and field.dims == data.template.dims
        )
        if not matrix_like:
            if data.kind == "xarray":
                sample_dims, feature_dims = _matrix_dims(data.template)
            else:
                if prep is None or not prep.labelled:
                    raise ValueError(
                        f"field has dims {field.dims}, but neither X "
                        "nor the model says how to stack it into "
                        "samples and features; pass a 2-D field"
                    )
                sample_dims, feature_dims = prep.sample_dims, prep.feature_dims
            missing = [d for d in (*sample_dims, *feature_dims) if d not in field.dims]
            if missing or field.ndim != len(sample_dims) + len(feature_dims):
                raise ValueError(
                    f"field has dims {field.dims}; the data have sample dims "
                    f"{sample_dims} and feature dims {feature_dims}"
                )
            field = stack_dataarray(
                field, sample_dims=sample_dims, feature_dims=feature_dims
            )
        labels = field
    F = as_matrix(field, what="field", accept_sparse=True, allow_2d_blocks=True).data
    if tuple(F.shape) != tuple(data.data.shape):
        raise ValueError(
            f"field has shape {tuple(F.shape)} as a (sample × "
            f"feature) matrix; X has {tuple(data.data.shape)} (the "
            "field must hold the same samples and features as X)"
        )
    if labels is not None and data.kind == "xarray":
        for dim, other in zip(data.template.dims, labels.dims, strict=True):
            a, b = data.template.indexes.get(dim), labels.indexes.get(other)
            if a is not None and b is not None and not a.equals(b):
                raise ValueError(f"the {dim!r} coordinates of field and X differ")
    if labels is None and data.kind == "xarray":
        labels = data.template
    return F, labels


def _maps(model, X, field, n_modes, tool: str):
    """(centred cross-moments, score variances) of ``field`` with the model's scores of
    ``X``, one pass counted under the name ``tool`` (see
    :mod:`~scalepca.linalg.passes`).

    The scores are the projections of ``X`` on the leading EOFs (eofs' ``pcs``):
    ``X`` goes through the model's own preparation (``model.project_rows``, as in
    ``transform``: raw fields stacked and weighted, standardised by ``scale_`` when
    the model standardises).
    """
    _check_model(model, project=True)
    k = _n_modes(model, n_modes)
    _check_shape(model, X)
    data, Z = model.project_rows(X, model.eof_matrix(k))
    F, labels = _field_matrix(X if field is None else field, data, model)
    if is_sparse(F) and len(F.chunks[1]) > 1:
        F = F.rechunk({1: -1})
    F = full_rows(F)  # whole rows; a field of column strips is split into row blocks
    Z = Z.rechunk({0: F.chunks[0]})
    with passes.counting(tool, planned=1, chunks=F.numblocks[0]):
        out = _cross_moments(F, Z)
    d = F.shape[1]
    bad = np.zeros(d, bool)
    if "nan_features" in out:
        bad = out["nan_features"][:d] > 0
    bad |= np.isnan(model.components_[0])  # features left out of the fit
    return out, d, bad, k, labels


def _label(values: np.ndarray, labels, name: str):
    """(k, d) values over ``mode`` and the field's original feature dims (xarray),
    else as given."""
    if labels is None:
        return values
    from ..io._stack import feature_dataarray, feature_template

    return feature_dataarray(values, feature_template(labels), name=name)


def eofs_as_correlation(model, X, *, field=None, n_modes: int | None = None):
    """EOFs as correlation maps: the correlation of each score with the field at every
    feature.

    The scores are the projections of ``X`` on the model's EOFs (eofs ``pcs``): ``X`` is
    prepared as the model's ``transform`` prepares it, standardised by ``scale_`` when
    the model was fitted with ``standardize=True``. The map of mode i is
    ``corr(field[:, j], score_i)`` over the samples, for every feature j.

    Parameters
    ----------
    model : fitted scalepca.PCA or PPCA
    X : whatever the model's ``transform`` takes
        The raw field in its own layout and units (e.g. the ``(time, lat, lon)``
        DataArray, a Dataset holding it; weighted and land-masked as in the fit), the
        matrix made by ``open_matrix``, or a NumPy, dask or ``scipy.sparse`` array of
        the fitted features (sparse data are centred implicitly, never densified).
    field : optional
        The data to correlate the scores with; defaults to ``X`` as given. For an N-D
        DataArray (e.g. the unweighted ``(time, lat, lon)`` field), it is stacked like
        ``X``. A positive weight or scale per feature does not change a correlation, so
        the weighted and the unweighted field give the same maps (except where a weight
        is 0: NaN with the weighted matrix, as eofs gives).
    n_modes : int, optional
        Number of leading modes (default: all).

    Returns
    -------
    DataArray over (mode, the field's feature dims, e.g. lat, lon) for xarray ``X`` or
    ``field``, else ndarray (n_modes, n_features). NaN at features with a NaN in any
    sample and at features left out of the fit.

    Notes
    -----
    One pass over the data: each row block of ``X`` (and ``field``, read in the same
    tasks when it is the source of ``X``) is reduced to per-feature sums and a d × k
    block of cross products, merged in a tree with the stable parallel update of Chan
    et al. Memory per worker: one row block plus O(d·k).

    Examples
    --------
    >>> import scalepca
    >>> sst = scalepca.datasets.make_gridded(120, n_lat=18, n_lon=36)["sst"]  # (time, lat, lon)
    >>> X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    >>> pca = scalepca.PCA(3).fit(X)
    >>> corr = scalepca.eofs_as_correlation(pca, X)       # one pass over X
    >>> corr.dims, corr.shape
    (('mode', 'lat', 'lon'), (3, 18, 36))
    """
    out, d, bad, k, labels = _maps(model, X, field, n_modes, "eofs_as_correlation")
    sf = np.sqrt(out["ss"][:d])
    sz = np.sqrt(out["ss"][d:])
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = (out["cross"] / np.outer(sf, sz)).T
    corr[:, bad] = np.nan
    return _label(corr, labels, "eofs_as_correlation")


def eofs_as_covariance(
    model,
    X,
    *,
    field=None,
    n_modes: int | None = None,
    pcscaling: int = 1,
    ddof: int = 1,
):
    """EOFs as covariance maps: the covariance of each (scaled) score with the field.

    The map of mode i is ``cov(score_i, field[:, j])`` over the samples, as eofs'
    ``eofsAsCovariance`` and xeofs define it: in the units of ``field`` (per unit of the
    scaled score). With ``standardize=True`` the scores are projections of the
    standardised data (``(x − mean_) / scale_``, unit variance per feature) and the maps
    stay in the field's own units, not in standard deviations.

    Parameters
    ----------
    model : fitted scalepca.PCA or PPCA
    X : whatever the model's ``transform`` takes
        As in :func:`eofs_as_correlation`.
    field : optional
        The data to take the covariance with; defaults to ``X`` as given: the raw field
        gives maps in its own units (as eofs ``eofsAsCovariance`` does), the weighted
        matrix of ``open_matrix`` maps in weighted units (pass
        ``field=<the unweighted data>``, or the raw field as ``X``, for the field's own
        units).
    n_modes : int, optional
        Number of leading modes (default: all).
    pcscaling : {0, 1, 2}, default=1
        Scores as projected (0), divided by √λ to unit variance (1), or multiplied by √λ
        (2), λ being ``explained_variance_``: eofs' ``pcscaling``.
    ddof : int, default=1
        The covariance divides by ``n_samples − ddof``.

    Returns
    -------
    DataArray over (mode, the field's feature dims) for xarray ``X`` or ``field``, else
    ndarray (n_modes, n_features); NaN as in :func:`eofs_as_correlation`.

    Notes
    -----
    One pass over the data, as :func:`eofs_as_correlation`.

    Examples
    --------
    >>> import scalepca
    >>> sst = scalepca.datasets.make_gridded(120, n_lat=18, n_lon=36)["sst"]  # (time, lat, lon)
    >>> X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    >>> pca = scalepca.PCA(3).fit(X)
    >>> cov = scalepca.eofs_as_covariance(pca, sst)      # the raw field: in its units
    >>> cov.dims, cov.shape
    (('mode', 'lat', 'lon'), (3, 18, 36))
    """
    from ..preprocessing._steps import carried

    if pcscaling not in (0, 1, 2):
        raise ValueError(f"pcscaling must be 0, 1 or 2; got {pcscaling!r}")
    if field is None and isinstance(X, xr.DataArray):
        prep = carried(X)
    else:  # the maps are of another field, or of an unlabelled matrix
        prep = None
    if prep is not None and prep.weights is not None:
        logger.info(
            "eofs_as_covariance: X is weighted; the maps are in weighted units (pass "
            "field=<the unweighted data> for the field's own units)"
        )
    out, d, bad, k, labels = _maps(model, X, field, n_modes, "eofs_as_covariance")
    n = out["n"]
    if n - ddof <= 0:
        raise ValueError(f"ddof={ddof} leaves no degrees of freedom with {n} samples")
    lam = np.asarray(model.explained_variance_[:k], dtype=np.float64)
    scale = {0: np.ones(k), 1: 1.0 / np.sqrt(lam), 2: np.sqrt(lam)}[pcscaling]
    cov = (out["cross"] * scale / (n - ddof)).T
    cov[:, bad] = np.nan
    return _label(cov, labels, "eofs_as_covariance")


# -- coordinates by meaning ------------------------------------------------------------
def find_lat_lon(obj) -> tuple[xr.DataArray, xr.DataArray | None]:
    """The latitude and longitude coordinates of ``obj`` (DataArray or Dataset), by
    meaning.

    The rule of ``open_matrix(weights="sqrt_coslat")`` (one implementation for both):
    CF attributes (``standard_name`` latitude/longitude, ``units``
    degrees_north/degrees_east in any of CF's spellings, ``_CoordinateAxisType``);
    failing those, usual names (``lat``, ``latitude``, ``nav_lat``, ``lat_z``, ...);
    failing those, ``axis`` Y/X. No extra is needed. A generic ``y`` is not taken for a
    latitude, and the latitude must be in degrees (units of degrees north if given,
    values within ±90).

    Returns
    -------
    (lat, lon) : DataArray coordinates; ``lon`` is None when the data have no longitude.

    Raises
    ------
    KeyError
        No latitude coordinate in degrees (a ``LatitudeError``, also a
        ``ValueError``; the message says what to rename or which ``units`` to set).

    Examples
    --------
    >>> import scalepca
    >>> from scalepca.analysis.eof import find_lat_lon
    >>> sst = scalepca.datasets.make_gridded(12, n_lat=18, n_lon=36)["sst"]
    >>> lat, lon = find_lat_lon(sst)
    >>> lat.name, lon.name
    ('lat', 'lon')
    """
    from ..preprocessing._latitude import find_latitude, find_longitude

    return find_latitude(obj), find_longitude(obj)


def coslat_weights(obj, *, power: float = 0.5) -> xr.DataArray:
    """Area weights ``cos(latitude) ** power`` over the latitude coordinate of ``obj``.

    ``power=0.5`` (√cos φ) is the usual EOF weighting of the data, so that each grid
    cell's share of the covariance is proportional to its area; pass the result as
    ``weights=`` to :func:`scalepca.open_matrix`. The same weights as
    ``weights="sqrt_coslat"`` (``power=1``: ``"coslat"``), from the latitude
    :func:`find_lat_lon` finds (refused as it refuses); negative cosines from
    rounding at the poles are clipped to 0.

    Examples
    --------
    >>> import scalepca
    >>> from scalepca.analysis.eof import coslat_weights
    >>> sst = scalepca.datasets.make_gridded(12, n_lat=18, n_lon=36)["sst"]
    >>> w = coslat_weights(sst)                      # √cos(latitude), over lat
    >>> w.dims, w.shape
    (('lat',), (18,))
    """
    from ..preprocessing._latitude import coslat

    return coslat(obj, power).rename("weights")
