"""Open zarr stores, fsspec URLs, xarray and in-memory arrays as a (sample × feature) matrix."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import dask.array as da
import numpy as np
import xarray as xr
import zarr

from ._netcdf import is_netcdf, open_netcdf

logger = logging.getLogger(__name__)

__all__ = ["open_matrix", "open_zarr_node"]


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def previous_hint(path) -> str:
    """The sentence telling where an interrupted in-place rewrite left the output it replaced."""
    p = os.fspath(path).rstrip("/")
    if not _is_url(p):
        return ""
    backup = p + ".previous"
    return f"; the complete output it was replacing, if there was one, is kept at {backup!r}"


def open_zarr_node(path, *, storage_options: dict | None = None, mode: str = "r"):
    """Open a zarr array or group at a local path or fsspec URL; ``FileNotFoundError`` if absent."""
    path = os.fspath(path)
    if _is_url(path):
        import fsspec

        try:
            fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        except ImportError as err:
            raise ImportError(
                f"opening {path!r} needs an fsspec backend that is not installed ({err}); "
                "for s3:// URLs install the 's3' extra: pip install 'scalepca[s3]'"
            ) from err
        if mode == "r" and not (fs.exists(f"{root}/zarr.json") or fs.exists(f"{root}/.zarray")
                                or fs.exists(f"{root}/.zgroup")):
            raise FileNotFoundError(f"no zarr store at {path!r}")
        # zarr drives the store from its own event loop: it needs an asynchronous filesystem
        store = zarr.storage.FsspecStore.from_url(path, storage_options=storage_options,
                                                  read_only=(mode == "r"))
        return zarr.open(store=store, mode=mode)
    if path.startswith("file://"):
        path = path[len("file://"):]
    if mode == "r" and not Path(path).exists():
        raise FileNotFoundError(f"no zarr store at {path!r} (the path does not exist)")
    try:
        return zarr.open(path, mode=mode)
    except (zarr.errors.NodeNotFoundError, FileNotFoundError) as err:
        raise FileNotFoundError(f"no zarr array or group at {path!r}") from err


def open_matrix(
    source,
    *,
    variable: str | None = None,
    storage_options: dict | None = None,
    chunks=None,
    sample_dims=None,
    feature_dims=None,
    weights=None,
):
    """Open ``source`` as a lazy (sample × feature) matrix.

    Parameters
    ----------
    source : str, path, zarr.Array, zarr.Group, xarray.DataArray/Dataset, dask or numpy array
        A path or fsspec URL (``s3://bucket/data.zarr``) of a zarr store, or an array object.
    variable : str, optional
        The array inside a zarr group or the variable of an xarray Dataset.
    storage_options : dict, optional
        Passed to fsspec for URLs (credentials, endpoint_url, ...).
    chunks : optional
        Row chunking to apply, e.g. ``{0: 50_000}``; features always end in one chunk.
    sample_dims, feature_dims : str or sequence of str, optional
        For N-D xarray data (e.g. ``sample_dims=("time",)`` on a (time, lat, lon) field): which
        dimensions are samples; ``feature_dims`` default to all the others, which are stacked
        into one ``feature`` dimension (a single dimension keeps its name). Fitted
        components can then be read back over the original feature dims
        (``est.components_xr_``), and scores come over the sample dims and ``mode``.
        Features that are NaN for every sample (land in an ocean grid) need no special
        handling: the estimators leave them out of the fit and return NaN there.
    weights : array-like or xarray.DataArray, optional
        One non-negative weight per feature, multiplied into the data before the fit, as in
        EOF analysis (eofs, xeofs): for a latitude-longitude grid use ``√cos(latitude)`` so
        each cell's contribution to the covariance is proportional to its area. A DataArray
        over some or all feature dims broadcasts over the others; an array must have the
        shape of the feature dims (for a 2-D array source: length ``n_features``). As in eofs
        and xeofs, the components are the EOFs of the weighted field (unit norm in weighted
        space); divide by the weights for the unweighted patterns. Data passed to
        ``transform`` later must be opened with the same weights.

    Returns
    -------
    dask.array.Array or xarray.DataArray
        A 2-D dask array for array sources; a DataArray (dask-backed) for xarray sources or
        zarr stores written by xarray, which keeps coordinates so outputs can be labelled.

    Raises
    ------
    FileNotFoundError
        The store path does not exist.
    ValueError
        The array is not 2-D (and no stacking dims were given), or the group holds several
        arrays and ``variable`` was not given.
    """
    if isinstance(source, (str, os.PathLike)) and is_netcdf(source):
        source = open_netcdf(source, variable=variable)  # then as any DataArray
    if isinstance(source, (str, os.PathLike)):
        node = open_zarr_node(source, storage_options=storage_options)
        if node.attrs.get("complete") is False:  # scalepca writes flag in-place writes
            raise ValueError(
                f"{os.fspath(source)!r} is incomplete: its write was interrupted (attribute "
                f"complete: false); write it again{previous_hint(source)}"
            )
        if isinstance(node, zarr.Group):
            arrays = sorted(name for name, _ in node.arrays())
            if _looks_like_xarray(node):
                ds = xr.open_zarr(node.store, chunks={}, consolidated=False)
                names = list(ds.data_vars)
                if variable is None and len(names) != 1:
                    raise ValueError(
                        f"{os.fspath(source)!r} holds variables {names}; "
                        "pass variable=... to choose one"
                    )
                return open_matrix(ds[variable or names[0]], chunks=chunks,
                                   sample_dims=sample_dims, feature_dims=feature_dims,
                                   weights=weights)
            if variable is None:
                if len(arrays) != 1:
                    raise ValueError(
                        f"{os.fspath(source)!r} is a zarr group with arrays {arrays}; "
                        "pass variable=... to choose one"
                    )
                variable = arrays[0]
            if variable not in arrays:
                raise KeyError(f"no array {variable!r} in {os.fspath(source)!r}; it has {arrays}")
            node = node[variable]
        source = node
    if isinstance(source, xr.Dataset):
        names = list(source.data_vars)
        if variable is None and len(names) != 1:
            raise ValueError(
                f"the Dataset holds variables {names}; pass variable=... to choose one"
            )
        source = source[variable or names[0]]
    if isinstance(source, xr.DataArray):
        return _dataarray_matrix(source, chunks=chunks, sample_dims=sample_dims,
                                 feature_dims=feature_dims, weights=weights)
    if isinstance(source, zarr.Array):
        if source.ndim != 2:
            raise ValueError(
                f"the zarr array has {source.ndim} dimensions (shape {source.shape}); a 2-D "
                "(sample × feature) array is needed — for N-D data open it with xarray and "
                "pass sample_dims"
            )
        arr = da.from_zarr(source)
    elif isinstance(source, da.Array):
        arr = source
    else:
        arr = np.asarray(source)
        if arr.ndim != 2:
            raise ValueError(f"expected a 2-D array; got shape {arr.shape}")
        arr = _weighted_columns(arr, weights)
        return arr if chunks is None else da.from_array(arr, chunks=chunks)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D array; got shape {arr.shape}")
    arr = _weighted_columns(arr, weights)
    if chunks is not None:
        arr = arr.rechunk(chunks)
    if len(arr.chunks[1]) > 1:
        arr = arr.rechunk({1: -1})
    return arr


def _looks_like_xarray(group: zarr.Group) -> bool:
    for _, arr in group.arrays():
        md = arr.metadata
        if getattr(md, "dimension_names", None) or "_ARRAY_DIMENSIONS" in arr.attrs:
            return True
    return False


def _weighted_columns(arr, weights):
    """``arr`` times one weight per column (validated eagerly: weights are small)."""
    if weights is None:
        return arr
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (arr.shape[1],):
        raise ValueError(
            f"weights have shape {w.shape}; expected ({arr.shape[1]},), one per feature"
        )
    if not np.all(np.isfinite(w)):
        raise ValueError("weights contain NaN or infinite values")
    if np.any(w < 0):
        raise ValueError("weights must be non-negative")
    return arr * w.astype(np.result_type(arr.dtype, np.float32))[None, :]


def _dataarray_matrix(da_: xr.DataArray, *, chunks=None, sample_dims=None, feature_dims=None,
                      weights=None):
    if da_.chunks is None:
        da_ = da_.chunk()
    if weights is not None and sample_dims is None and da_.ndim == 2:
        sample_dims = (da_.dims[0],)
    if da_.ndim != 2 and sample_dims is None:
        raise ValueError(
            f"the DataArray has dims {da_.dims}; pass sample_dims=(...) to say which are samples"
        )
    if da_.ndim == 2 and sample_dims is None:
        if chunks is not None:
            rows = chunks.get(0, chunks) if isinstance(chunks, dict) else chunks
            da_ = da_.chunk({da_.dims[0]: rows})
        return da_.chunk({da_.dims[1]: -1})
    from ._stack import stack_dataarray

    return stack_dataarray(da_, sample_dims=sample_dims, feature_dims=feature_dims, chunks=chunks,
                           weights=weights)
