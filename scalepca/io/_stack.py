"""Stack N-D xarray data to a (sample × feature) matrix and back."""

from __future__ import annotations

import logging

import xarray as xr

logger = logging.getLogger(__name__)

SAMPLE = "sample"
FEATURE = "feature"


def _as_tuple(dims) -> tuple:
    if dims is None:
        return ()
    if isinstance(dims, str):
        return (dims,)
    return tuple(dims)


def stack_dataarray(
    arr: xr.DataArray, *, sample_dims=None, feature_dims=None, chunks=None
) -> xr.DataArray:
    """Return ``arr`` as a 2-D DataArray with dims (sample, feature).

    ``sample_dims`` default to the first dimension; ``feature_dims`` default to all others.
    A single dimension on either side is kept under its own name; several are stacked into
    ``sample`` / ``feature`` with a MultiIndex, undone by :func:`unstack_dim`.
    """
    sample_dims = _as_tuple(sample_dims) or (arr.dims[0],)
    missing = [d for d in sample_dims if d not in arr.dims]
    if missing:
        raise ValueError(f"sample_dims {missing} are not dimensions of the data {arr.dims}")
    feature_dims = _as_tuple(feature_dims) or tuple(d for d in arr.dims if d not in sample_dims)
    missing = [d for d in feature_dims if d not in arr.dims]
    if missing:
        raise ValueError(f"feature_dims {missing} are not dimensions of the data {arr.dims}")
    extra = set(arr.dims) - set(sample_dims) - set(feature_dims)
    if extra:
        raise ValueError(f"dimensions {sorted(extra)} are neither sample nor feature dims")
    if not feature_dims:
        raise ValueError("no feature dimensions left after choosing the sample dimensions")
    out = arr
    sdim = sample_dims[0] if len(sample_dims) == 1 else SAMPLE
    fdim = feature_dims[0] if len(feature_dims) == 1 else FEATURE
    if len(sample_dims) > 1:
        out = out.stack({SAMPLE: sample_dims})
    if len(feature_dims) > 1:
        out = out.stack({FEATURE: feature_dims})
    out = out.transpose(sdim, fdim)
    if out.chunks is None:
        out = out.chunk()
    row = {sdim: chunks.get(0, "auto") if isinstance(chunks, dict) else chunks} if chunks else {}
    out = out.chunk({**row, fdim: -1})
    return out
