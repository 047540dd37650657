"""zarr stores (local or fsspec URLs): a 2-D array (a dataset scalepca wrote), a group
of arrays, or a store written by xarray (read as its Dataset, each task reading whole
store chunks)."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import xarray as xr
import zarr

from ...io._coalesce import _task_bytes, coalesced_rows
from ...io._fs import check_complete, open_zarr_node
from ...io._open_options import (
    OpenOptionError,
    TimeDecodeError,
    check_open_options,
    is_time_decode_error,
    xarray_kwargs,
)
from ._reader import Opened, Reader
from .arrays import zarr_array_opened
from .netcdf import NetCDFOptions
from .xarray_objects import open_xarray

__all__ = ["ZarrReader", "looks_like_xarray", "open_store"]


@dataclasses.dataclass(frozen=True)
class ZarrOptions(NetCDFOptions):
    """The options of zarr stores: those of NetCDF files, and fsspec's
    ``storage_options`` (see :func:`~scalepca.open_matrix`)."""

    storage_options: dict | None = None


class ZarrReader(Reader):
    """A zarr store; the reader of paths no other reader claims."""

    kind = "zarr"
    title = "zarr store"
    Options = ZarrOptions

    def claims(self, source, storage_options=None) -> bool:
        return True

    def open(self, source, options: ZarrOptions) -> Opened:
        node, variable = _store_node(
            source,
            options.variable,
            options.storage_options,
            options.chunks,
            options.sample_dims,
            options.feature_dims,
            options.task_size,
            options.open_options,
        )
        if isinstance(node, zarr.Array):
            return zarr_array_opened(node, options)
        options = dataclasses.replace(options, variable=variable)
        return open_xarray(node, options, where=repr(os.fspath(source)))

    def dataset(self, path, *, storage_options=None, open_options=None):
        return open_store(
            path, storage_options=storage_options, open_options=open_options
        )

    def describe(self, path, *, storage_options=None, verbose=False) -> list[str]:
        node = open_zarr_node(path, storage_options=storage_options)
        path = os.fspath(path)
        if isinstance(node, zarr.Array):
            return [
                f"zarr array {path}: shape {node.shape}, dtype {node.dtype}, "
                f"chunks {node.chunks}"
            ]
        attrs, hidden = dict(node.attrs), []
        if attrs.get("format") == "scalepca-model":
            lines, hidden = _model_lines(path, node, attrs, verbose)
        else:
            lines = [f"{attrs.get('format', 'zarr group')} {path}"]
            extra = {k: v for k, v in attrs.items() if k != "format"}
            if extra:
                lines.append(f"  attributes: {json.dumps(extra, default=str)}")
        for name, arr in sorted(node.arrays(), key=lambda t: t[0]):
            if name not in hidden:  # a model's private arrays (saved moments, ...)
                lines.append(
                    f"  {name}: shape {arr.shape}, dtype {arr.dtype}, "
                    f"chunks {arr.chunks}"
                )
        return lines


def _model_lines(path, node, attrs, verbose):
    """The lines of a model store, and the private entries they leave out (all
    shown when ``verbose``)."""
    state = "complete" if attrs.get("complete") else "INCOMPLETE (interrupted write)"
    lines = [
        f"scalepca model {path}: {attrs.get('class')} ({state})",
        f"  written by scalepca {attrs.get('scalepca_version')}, "
        f"format version {attrs.get('format_version')}",
        f"  parameters: {json.dumps(attrs.get('params', {}))}",
    ]
    scalars = attrs.get("scalars", {})
    private = [
        k for k in [*scalars, *(n for n, _ in node.arrays())] if k.startswith("_")
    ]
    hidden = [] if verbose else private
    for k, v in sorted((k, v) for k, v in scalars.items() if k not in hidden):
        text = json.dumps(v, default=str)
        if len(text) > 120:  # e.g. the coordinates of stacked feature dims
            text = f"<{type(v).__name__} of {len(text):,} characters>"
        lines.append(f"  {k}: {text}")
    # the estimator's private state (feature template, preprocessing, ...)
    if hidden:
        lines.append(f"  ({len(hidden)} private entries not shown; -v shows them)")
    return lines, hidden


def open_store(
    path,
    *,
    storage_options: dict | None = None,
    chunks=None,
    open_options: dict | None = None,
):
    """The data at ``path``: an xarray Dataset for stores written by xarray, else the
    zarr node.

    Reads metadata only. Raises ``FileNotFoundError`` when there is no store and
    ``ValueError`` when its write was interrupted (scalepca flags in-place writes
    ``complete: false``). ``chunks``: the dask chunks of a Dataset by dim name
    (default: the store's chunks). ``open_options``: xarray's ``decode_times`` /
    ``use_cftime`` for a store written by xarray (:mod:`~scalepca.io._open_options`);
    refused for other stores.
    """
    options = check_open_options(open_options, netcdf=False)
    node = open_zarr_node(path, storage_options=storage_options)
    check_complete(node, path)
    if isinstance(node, zarr.Group) and looks_like_xarray(node):
        try:
            return xr.open_zarr(
                node.store,
                chunks=chunks or {},
                consolidated=False,
                **xarray_kwargs(options),
            )
        except ValueError as err:
            if is_time_decode_error(err):
                raise TimeDecodeError(os.fspath(path), str(err)) from err
            raise
    if options:
        raise OpenOptionError(
            sorted(options)[0],
            "applies to stores read through xarray; "
            f"{os.fspath(path)!r} is a zarr store not written by xarray",
        )
    return node


def _dataset_chunks(
    ds: xr.Dataset, variable, sample_dims, feature_dims, task_size
) -> dict:
    """``xr.open_zarr`` chunks reading whole multiples of ``variable``'s store chunks.

    The outermost sample dim is coalesced to ``task_size`` bytes per task; the other
    sample dims and the feature dims are read whole (stacking needs them in one chunk),
    so each task reads the store chunks of a slab of the outermost sample dim.

    Unless every store chunk holds all the samples (one sample dim, chunked along
    space only: the layout of climate stores) and the whole array exceeds
    ``task_size``: then the first feature dim (in stacking order) is coalesced to
    ``task_size`` instead and the others read whole, so that each task is a column
    strip of whole store chunks — the matrix keeps them as column chunks
    (:func:`~scalepca.io._stack.stack_dataarray`) rather than one block of the whole
    array.
    """
    from ...io._stack import split_dims

    names = list(ds.data_vars)
    name = variable
    if name is None and len(names) == 1:  # the one variable
        name = names[0]
    if name not in ds.data_vars:
        return {}
    arr = ds[name]
    store_chunks = arr.encoding.get("preferred_chunks") or {}
    sdims, fdims = split_dims(arr, sample_dims, feature_dims)
    outer = sdims[0]

    def unit_of(dim):
        return store_chunks.get(dim) or (
            arr.chunksizes[dim][0] if arr.chunks else arr.sizes[dim]
        )

    slab = arr.dtype.itemsize * int(
        np.prod([arr.sizes[d] for d in arr.dims if d != outer])
    )
    rows = coalesced_rows(unit_of(outer), arr.sizes[outer], slab, task_size)
    whole = {d: (rows if d == outer else -1) for d in arr.dims}
    nbytes = _task_bytes(task_size)
    if (
        len(sdims) > 1
        or not fdims
        or rows < arr.sizes[outer]
        or nbytes is None
        or arr.nbytes <= nbytes
        or unit_of(fdims[0]) >= arr.sizes[fdims[0]]
    ):
        return whole
    first = fdims[
        0
    ]  # column strips: whole store chunks of the first feature dim per task
    band = arr.nbytes // max(1, arr.sizes[first])
    return {
        **whole,
        first: coalesced_rows(unit_of(first), arr.sizes[first], band, task_size),
    }


def _store_node(
    source,
    variable,
    storage_options,
    chunks,
    sample_dims,
    feature_dims,
    task_size,
    open_options=None,
):
    """``(node, variable)`` of a store path: an xarray Dataset (chunked so that each
    task reads whole store chunks) or the zarr array chosen by ``variable`` (then
    None)."""
    node = open_store(
        source, storage_options=storage_options, open_options=open_options
    )
    if isinstance(node, xr.Dataset) and chunks is None and task_size is not None:
        spec = _dataset_chunks(node, variable, sample_dims, feature_dims, task_size)
        if spec:  # opened again (metadata only), each task reading whole store chunks
            node = open_store(
                source,
                storage_options=storage_options,
                chunks=spec,
                open_options=open_options,
            )
    if not isinstance(node, zarr.Group):
        return node, variable
    arrays = sorted(name for name, _ in node.arrays())
    if variable is None:
        if len(arrays) != 1:
            raise ValueError(
                f"{os.fspath(source)!r} is a zarr group with arrays {arrays}; "
                "pass variable=... to choose one"
            )
        variable = arrays[0]
    if variable not in arrays:
        raise KeyError(
            f"no array {variable!r} in {os.fspath(source)!r}; it has {arrays}"
        )
    return node[variable], variable


def looks_like_xarray(group: zarr.Group) -> bool:
    for _, arr in group.arrays():
        md = arr.metadata
        if getattr(md, "dimension_names", None) or "_ARRAY_DIMENSIONS" in arr.attrs:
            return True
    return False
