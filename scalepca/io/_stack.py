"""Stack N-D xarray data to a (sample × feature) matrix, and label fitted results back.

EOF analysis of gridded data in two steps, none of which reads the data:

1. the sample dims (e.g. ``time``) and the feature dims (e.g. ``lat``, ``lon``) are
   stacked into two dimensions, each kept under its own name when it is a single
   dimension;
2. after the fit, per-feature results (components, mean) are unstacked to the original
   feature dims with their coordinates, and per-mode results get a ``mode`` dimension.

Weights and the other steps a model repeats on new data are described in
``_preprocess``. Features that are NaN for every sample (land in an ocean grid) are
found by the estimators in their first pass, left out of the fit and come back as NaN
(see ``DecompositionMixin``).
"""

from __future__ import annotations

import logging

import numpy as np
import xarray as xr

logger = logging.getLogger(__name__)

SAMPLE = "sample"
FEATURE = "feature"
MODE = "mode"


def mode_coords(k: int) -> np.ndarray:
    """Labels of ``k`` modes: 1, 2, ..., k — everywhere scalepca names a mode (the
    ``mode`` coordinate of scores, components and per-mode values, the CLI's table,
    plots, report.html), as eofs and xeofs number them. Array positions stay 0-based:
    mode 1 is ``components_[0]`` (``.isel(mode=0)`` or ``.sel(mode=1)``).
    """
    return np.arange(1, int(k) + 1)


def sample_dim_of(sample_dims: tuple) -> str:
    """The sample dim of the matrix: the one sample dim, or ``SAMPLE`` stacking
    several."""
    if len(sample_dims) == 1:
        return sample_dims[0]
    return SAMPLE


def feature_dim_of(feature_dims: tuple) -> str:
    """The feature dim of the matrix: the one feature dim, or ``FEATURE`` stacking
    several."""
    if len(feature_dims) == 1:
        return feature_dims[0]
    return FEATURE


def _as_tuple(dims) -> tuple:
    if dims is None:
        return ()
    if isinstance(dims, str):
        return (dims,)
    return tuple(dims)


def split_dims(
    arr: xr.DataArray, sample_dims=None, feature_dims=None
) -> tuple[tuple, tuple]:
    """Validated (sample_dims, feature_dims); defaults: first dim / all other dims."""
    sample_dims = _as_tuple(sample_dims) or (arr.dims[0],)
    missing = [d for d in sample_dims if d not in arr.dims]
    if missing:
        raise ValueError(
            f"sample_dims {missing} are not dimensions of the data {arr.dims}"
        )
    feature_dims = _as_tuple(feature_dims) or tuple(
        d for d in arr.dims if d not in sample_dims
    )
    missing = [d for d in feature_dims if d not in arr.dims]
    if missing:
        raise ValueError(
            f"feature_dims {missing} are not dimensions of the data {arr.dims}"
        )
    both = set(sample_dims) & set(feature_dims)
    if both:
        raise ValueError(
            f"dimensions {sorted(both)} are given as both sample and feature dims"
        )
    extra = set(arr.dims) - set(sample_dims) - set(feature_dims)
    if extra:
        raise ValueError(
            f"dimensions {sorted(extra)} are neither sample nor feature dims"
        )
    if not feature_dims:
        raise ValueError(
            "no feature dimensions left after choosing the sample dimensions"
        )
    return sample_dims, feature_dims


def weights_dataarray(weights, arr: xr.DataArray, feature_dims: tuple) -> xr.DataArray:
    """Validate per-feature ``weights`` against ``arr`` and return them as a DataArray.

    ``weights`` is a DataArray over some or all of ``feature_dims`` (coordinates must
    match the data's exactly), or an array of the shape of ``feature_dims`` (in that
    order), or a 1-D array over a single feature dim. Weights are small (one value
    per feature) and are checked eagerly: finite and non-negative.
    """
    if isinstance(weights, xr.DataArray):
        other = [d for d in weights.dims if d not in feature_dims]
        if other:
            raise ValueError(
                f"weights have dims {weights.dims}; only feature dims {feature_dims} "
                f"are allowed (not {other})"
            )
        for dim in weights.dims:
            if weights.sizes[dim] != arr.sizes[dim]:
                raise ValueError(
                    f"weights have {weights.sizes[dim]} values along {dim!r}; the "
                    f"data have {arr.sizes[dim]}"
                )
            if (
                dim in weights.indexes
                and dim in arr.indexes
                and not weights.indexes[dim].equals(arr.indexes[dim])
            ):
                raise ValueError(f"the {dim!r} coordinates of weights and data differ")
        w = weights.drop_vars([c for c in weights.coords if c not in weights.dims])
        w = w.assign_coords({d: arr[d] for d in w.dims if d in arr.coords})
    else:
        values = np.asarray(weights)
        shape = tuple(arr.sizes[d] for d in feature_dims)
        if values.shape != shape:
            raise ValueError(
                f"weights have shape {values.shape}; expected the "
                f"shape of the feature dims {feature_dims}: "
                f"{shape} (or pass a DataArray over some of them)"
            )
        w = xr.DataArray(
            values,
            dims=feature_dims,
            coords={d: arr[d] for d in feature_dims if d in arr.coords},
        )
    wv = np.asarray(w.values, dtype=np.float64)
    if not np.all(np.isfinite(wv)):
        raise ValueError("weights contain NaN or infinite values")
    if np.any(wv < 0):
        raise ValueError("weights must be non-negative")
    return w.astype(np.float64)


def stack_dataarray(
    arr: xr.DataArray,
    *,
    sample_dims=None,
    feature_dims=None,
    chunks=None,
    strip_bytes=None,
) -> xr.DataArray:
    """Return ``arr`` as a 2-D DataArray with dims (sample, feature); reads no data.

    ``sample_dims`` default to the first dimension; ``feature_dims`` default to all
    others. A single dimension on either side is kept under its own name; several are
    stacked into ``sample`` / ``feature`` with a MultiIndex, undone when results are
    labelled. The result is dask-backed, features in one chunk; rows as ``chunks`` says
    (see :func:`row_chunk_spec`), else as the source's chunks, else (in-memory data)
    about 64 MiB per block, the rule for NumPy arrays.

    ``strip_bytes`` (``open_matrix``'s task size): a dask field whose chunks each
    hold every sample (one row chunk, no ``chunks`` given) and whose whole matrix
    exceeds it keeps its feature chunks as column strips — the layout of climate
    stores chunked along space, which one block of all features would hold whole in
    one task (the wide solvers read such strips as they are; other consumers regroup
    the features as they need).
    """
    from .._validation import _row_chunks

    sample_dims, feature_dims = split_dims(arr, sample_dims, feature_dims)
    sdim, fdim = sample_dim_of(sample_dims), feature_dim_of(feature_dims)
    rows, by_dim = row_chunk_spec(chunks, arr.dims, sample_dims, feature_dims)
    out = arr
    if by_dim:
        out = out.chunk(by_dim)
    if len(sample_dims) > 1:
        out = out.stack({SAMPLE: sample_dims})
    if len(feature_dims) > 1:
        out = out.stack({FEATURE: feature_dims})
    out = out.transpose(sdim, fdim)
    if rows is None and out.chunks is None:
        rows = _row_chunks(out.data)[0]
    if (
        rows is None
        and strip_bytes is not None
        and out.chunks is not None
        and len(out.chunks[0]) == 1
        and len(out.chunks[1]) > 1
        and out.nbytes > strip_bytes
    ):
        return out  # column strips of whole samples (see above)
    if rows is None:
        return out.chunk({fdim: -1})
    return out.chunk({sdim: rows, fdim: -1})


def row_chunk_spec(chunks, dims: tuple, sample_dims: tuple, feature_dims: tuple):
    """``(rows, by_dim)`` from ``open_matrix``'s ``chunks`` for data with named
    ``dims``.

    ``chunks`` is rows per chunk (an int, ``"auto"``, or a tuple of sizes), or a dict
    keyed by axis (``0``: rows) or by dim name: the sample dim (or, with several
    sample dims, any of them, chunked before stacking). Features always end in one
    chunk, so a feature dim takes only ``-1``.
    """
    if chunks is None:
        return None, {}
    if not isinstance(chunks, dict):
        return chunks, {}
    sdim = sample_dim_of(sample_dims)
    rows, by_dim = None, {}
    for key, value in chunks.items():
        if key == 0 or key == sdim:
            rows = value
        elif key == 1 or key in feature_dims or key == FEATURE:
            if value not in (-1, None):
                raise ValueError(
                    f"chunks: {key!r} is along the features, which always end in "
                    "one chunk; chunk the samples instead"
                )
        elif key in sample_dims:
            by_dim[key] = value
        else:
            raise ValueError(
                f"chunks: no dimension {key!r}; the data have dims {tuple(dims)} "
                f"(samples {tuple(sample_dims)}), or give axis 0 for the rows"
            )
    return rows, by_dim


def feature_template(template: xr.DataArray) -> xr.DataArray:
    """A data-free 1-D DataArray carrying the feature coordinates of a (sample,
    feature) array."""
    sdim, fdim = template.dims
    t = template.isel({sdim: 0}, drop=True)
    t = t.copy(data=np.zeros(template.sizes[fdim], dtype=np.int8))
    t.attrs = {}
    t.name = None
    return t


def _index_values(template: xr.DataArray) -> dict:
    """The index coordinates along a feature template's dim (levels of a stacked
    one)."""
    fdim = template.dims[0]
    index = template.indexes.get(fdim)
    if index is None:
        return {}
    if getattr(index, "nlevels", 1) > 1:
        return {name: np.asarray(index.get_level_values(name)) for name in index.names}
    return {fdim: np.asarray(index)}


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def feature_differences(fitted: xr.DataArray, other: xr.DataArray) -> list[str]:
    """How the features of ``other`` differ from ``fitted`` (1-D feature templates).

    Compared: the feature dim, the number of features and the index coordinates along it
    (for stacked features, each level: ``lat``, ``lon``, ...). Empty when they agree.
    """
    if fitted.dims != other.dims:
        return [f"features along {other.dims[0]!r}, fitted along {fitted.dims[0]!r}"]
    if fitted.size != other.size:
        return [f"{other.size} features, fitted on {fitted.size}"]
    out = []
    theirs = _index_values(other)
    for name, ref in _index_values(fitted).items():
        if name not in theirs:
            out.append(f"no {name!r} coordinate along the features")
            continue
        val = theirs[name]
        try:
            same = ref.shape == val.shape and np.array_equal(ref, val, equal_nan=True)
        except TypeError:
            same = ref.shape == val.shape and np.array_equal(ref, val)
        if not same:
            first = next(
                (i for i, (a, b) in enumerate(zip(ref, val, strict=False)) if a != b),
                min(ref.size, val.size),
            )
            where = (
                f"first at position {first}: {_plain(val[first])!r}, fitted "
                f"{_plain(ref[first])!r}"
                if first < min(ref.size, val.size)
                else f"{val.size} values, fitted on {ref.size}"
            )
            out.append(f"the {name!r} coordinates differ ({where})")
    return out


def check_features(template: xr.DataArray | None, xin, what: str = "X") -> None:
    """Refuse a labelled matrix ``xin`` (a validated input: ``kind``, ``template``)
    whose feature coordinates are not those of the fit (``template``, the fit's 1-D
    feature template; None: nothing to check), saying what differs: every model's and
    analysis tool's ``transform`` makes this check, as the grid's sizes alone do not
    tell a moved grid."""
    if template is None or xin.kind != "xarray":
        return
    diff = feature_differences(template, feature_template(xin.template))
    if diff:
        raise ValueError(
            f"{what} is not on the features the model was fitted on: " + "; ".join(diff)
        )


def _unstack(arr: xr.DataArray, *dims) -> xr.DataArray:
    for dim in dims:
        if dim in arr.indexes and getattr(arr.indexes[dim], "nlevels", 1) > 1:
            arr = arr.unstack(dim)
    return arr


def feature_dataarray(
    values: np.ndarray, template: xr.DataArray, *, name: str
) -> xr.DataArray:
    """Label per-feature ``values`` ((d,) or (k, d)) with the original feature dims.

    A stacked feature dimension is unstacked back to its dims (e.g. ``lat``, ``lon``)
    in the order of the data; features left out of the fit are NaN already.
    """
    fdim = template.dims[0]
    values = np.asarray(values)
    if values.ndim == 1:
        out = template.copy(data=values)
    else:
        out = xr.DataArray(
            values, dims=(MODE, fdim), coords={MODE: mode_coords(values.shape[0])}
        )
        out = out.assign_coords(template.coords)
    out.name = name
    return _unstack(out, fdim)


def label_features(
    values, template: xr.DataArray, sample_dim: str, sample_coords: dict
):
    """A (sample × feature) array labelled with the original feature dims
    (unstacked)."""
    fdim = template.dims[0]
    out = xr.DataArray(values, dims=(sample_dim, fdim), coords=sample_coords)
    return _unstack(out.assign_coords(template.coords), fdim)


def mode_dataarray(values: np.ndarray, name: str) -> xr.DataArray:
    """Per-mode ``values`` as a DataArray over ``mode`` (1, 2, ...), like the scores."""
    values = np.asarray(values)
    return xr.DataArray(
        values, dims=(MODE,), coords={MODE: mode_coords(values.shape[0])}, name=name
    )


def template_to_json(template: xr.DataArray) -> dict:
    """The feature coordinates of a :func:`feature_template` as JSON types (for model
    stores).

    Raises ``TypeError`` for coordinates that are neither numbers, strings nor
    datetimes.
    """
    fdim = template.dims[0]
    index = template.indexes.get(fdim)
    levels = list(index.names) if getattr(index, "nlevels", 1) > 1 else None
    coords, dtypes = {}, {}
    for name, c in template.coords.items():
        if name == fdim and levels:
            continue
        if c.dims != (fdim,) and c.dims != ():
            continue
        values = np.asarray(c.values)
        if values.dtype.kind in "Mm":
            dtypes[name] = str(values.dtype)
            values = values.astype(str)
        elif values.dtype.kind in "biuf":
            dtypes[name] = str(values.dtype)  # float32 coordinates stay float32
        elif values.dtype.kind not in "UO":
            raise TypeError(
                f"coordinate {name!r} of dtype {values.dtype} cannot be stored"
            )
        coords[name] = {"dims": list(c.dims), "values": values.tolist()}
    return {
        "dim": fdim,
        "levels": levels,
        "coords": coords,
        "dtypes": dtypes,
        "size": int(template.sizes[fdim]),
    }


def template_from_json(state: dict) -> xr.DataArray:
    """Inverse of :func:`template_to_json`."""
    import pandas as pd

    fdim = state["dim"]
    t = xr.DataArray(np.zeros(state["size"], dtype=np.int8), dims=(fdim,))
    coords = {}
    for name, c in state["coords"].items():
        values = np.asarray(c["values"])
        if name in state.get("dtypes", {}):
            values = values.astype(state["dtypes"][name])
        coords[name] = (tuple(c["dims"]), values)
    levels = state.get("levels")
    if levels:
        # levels in order of appearance (from_arrays would sort them, and unstack
        # follows the level order: a descending latitude would come back ascending)
        codes, uniques = zip(
            *(pd.factorize(coords.pop(lv)[1], sort=False) for lv in levels), strict=True
        )
        mi = pd.MultiIndex(levels=list(uniques), codes=list(codes), names=levels)
        t = t.assign_coords(xr.Coordinates.from_pandas_multiindex(mi, fdim))
    return t.assign_coords(coords) if coords else t
