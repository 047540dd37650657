"""Open zarr stores, fsspec URLs, xarray and in-memory arrays as a (sample × feature)
matrix."""

from __future__ import annotations

import logging
import os

import dask.array as da
import numpy as np
import xarray as xr
import zarr

from ..io._bed import is_bed_path
from ..io._bed_cohorts import check_bed_list, is_bed_list
from ..io._coalesce import TASK_SIZE, _task_bytes, coalesced_rows, open_zarr
from ..io._fs import (
    check_complete,
    open_zarr_node,
    previous_hint,  # noqa: F401  (re-exported)
)
from ..io._fs import is_url as _is_url
from ..io._netcdf import is_netcdf, open_netcdf, open_netcdf_dataset
from ..io._open_options import (
    OpenOptionError,
    TimeDecodeError,
    check_open_options,
    is_time_decode_error,
    xarray_kwargs,
)
from ._steps import (
    _dataarray_matrix,
    describe,
    frame_matrix,
    is_dask_frame,
    named_matrix,
)

logger = logging.getLogger(__name__)

__all__ = ["data_kind", "open_dataset", "open_matrix", "open_store"]


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
    from ..io._stack import split_dims

    names = list(ds.data_vars)
    name = variable if variable is not None else (names[0] if len(names) == 1 else None)
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
    if isinstance(node, zarr.Group) and _looks_like_xarray(node):
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


#: how each kind of data store is called in messages ("no NetCDF file at ...")
KIND_NAMES = {
    "zarr": "zarr store",
    "netcdf": "NetCDF file",
    "anndata": "AnnData store",
    "bed": "PLINK .bed file",
}
#: the ``format`` values of :func:`open_matrix` (``None``: recognised from the path)
FORMATS = ("zarr", "netcdf", "anndata", "bed")


def data_kind(
    path, *, format: str | None = None, storage_options: dict | None = None
) -> str:
    """How the data at ``path`` are read: ``"anndata"``, ``"netcdf"``, ``"bed"`` or
    ``"zarr"``.

    ``format`` when given; else from the path's ending, a file's first bytes or a
    zarr root's attributes (metadata only), as :func:`open_matrix` recognises them. A
    path that does not exist gets the kind its ending says (``.nc``: NetCDF,
    ``.h5ad``: AnnData; else zarr), so that a message can say what is missing.
    """
    if format is not None:
        return format
    if isinstance(path, (list, tuple)):  # several .bed files: one matrix
        check_bed_list(path)
        return "bed"
    if is_bed_path(path):
        return "bed"
    if _anndata_path(path):
        return "anndata"
    if is_netcdf(path):
        return "netcdf"
    if _is_url(os.fspath(path)):
        try:
            node = open_zarr_node(path, storage_options=storage_options)
        except FileNotFoundError:
            return "zarr"
        if isinstance(node, zarr.Group) and _is_anndata_group(node):
            return "anndata"
    return "zarr"


def no_data_store(path, kind: str) -> str:
    """The sentence saying there is no data store of ``kind`` at ``path``; for a local
    path, with the name beside it that it was most likely meant to be (a typo)."""
    from .._schema import closest
    from ..io._fs import is_url

    path = os.fspath(path)
    hint = ""
    folder, name = os.path.split(path.rstrip(os.sep))
    typed = name and not any(c in name for c in "*?[")  # not a glob of NetCDF files
    if typed and not is_url(path) and os.path.isdir(folder or "."):
        meant = closest(name, os.listdir(folder or "."))
        if meant is not None and meant != name:
            hint = f"; did you mean {os.path.join(folder, meant)!r}?"
    return f"no {KIND_NAMES.get(kind, 'data store')} at {path!r}{hint}"


def open_dataset(
    path,
    *,
    storage_options: dict | None = None,
    format: str | None = None,
    open_options: dict | None = None,
):
    """The data at ``path`` before a variable is chosen: an xarray Dataset for a
    NetCDF file (or glob) and for a zarr store written by xarray, else the zarr node
    (:func:`open_store`). AnnData stores are refused (they are read by
    :func:`open_matrix` as a matrix). ``open_options`` as in :func:`open_matrix`."""
    kind = data_kind(path, format=format, storage_options=storage_options)
    if kind == "netcdf":
        return open_netcdf_dataset(path, open_options=open_options)
    if kind == "anndata":
        raise ValueError(
            f"{os.fspath(path)!r} is an AnnData store; it holds no xarray variables"
        )
    return open_store(path, storage_options=storage_options, open_options=open_options)


def open_matrix(
    source,
    *,
    variable: str | None = None,
    storage_options: dict | None = None,
    chunks=None,
    sample_dims=None,
    feature_dims=None,
    weights=None,
    layer: str | None = None,
    format: str | None = None,
    task_size=TASK_SIZE,
    open_options: dict | None = None,
    dtype=None,
    keep=None,
    exclude_ranges=None,
):
    """Open ``source`` as a lazy (sample × feature) matrix, reading metadata only.

    Parameters
    ----------
    source : str, path, list of paths, zarr.Array, zarr.Group, \
xarray.DataArray/Dataset, dask or numpy array
        A path or fsspec URL of a zarr store, a NetCDF/HDF5 file or an AnnData store
        (``.zarr``, ``.h5ad``); an array or ``anndata.AnnData``. Sparse arrays become
        CSR row blocks. A list of PLINK ``.bed`` paths is one matrix, the files' samples
        appended in order (a cohort genotyped in batches): they must have the same SNPs
        in the same order (the first ``.bim`` line that differs is named) and no sample
        in two files.
    variable : str, optional
        The array of a zarr group, or the variable of an xarray Dataset.
    storage_options : dict, optional
        fsspec's options for URLs (credentials, endpoint_url, ...).
    chunks : int, tuple, "auto" or dict, optional
        Rows per chunk, or a dict by axis or (xarray) dim name; features end in one
        chunk. Default: dask and zarr data keep their chunks, in-memory data ~64 MiB row
        chunks.
    sample_dims, feature_dims : str or sequence of str, optional
        N-D xarray data: the sample dims; the others (``feature_dims``) are stacked into
        one ``feature`` dim (``components_xr_`` unstacks them). All-NaN features (land)
        are left out.
    weights : str, array-like or xarray.DataArray, optional
        One non-negative weight per feature, multiplied into the data (EOF analysis):
        ``"sqrt_coslat"`` / ``"coslat"`` of the latitude (found as
        :func:`scalepca.analysis.eof.coslat_weights` finds it; degrees north), the name
        of a variable or coordinate, or values over some or all of the feature dims.
    layer : str, optional
        AnnData: the layer to read (``"counts"``); ``None`` reads ``X``.
    format : {"zarr", "netcdf", "anndata", "bed"}, optional
        The kind of store at a path; by default recognised by its ending or first bytes
        (``.bed``: PLINK genotypes, with their ``.bim`` and ``.fam``).
    task_size : int, str or None, default "128MiB"
        Bytes one task reads, in whole store chunks (``None``: one each), without
        ``chunks``; results do not depend on it. A field above it keeps all-sample
        chunks as column strips.
    open_options : dict, optional
        For a path read through xarray (NetCDF, xarray zarr): xarray's ``decode_times``,
        ``use_cftime`` and (NetCDF) ``engine``; undecodable times are refused naming
        them.
    dtype : {"float32", "float64"}, optional
        For a PLINK ``.bed``: the float type the allele counts are read as (default
        float32; missing calls are NaN). Other sources keep their dtype.
    keep : str or path, optional
        For a PLINK ``.bed``: a keep file (PLINK's ``--keep`` format, ``FID IID`` per
        line, or a .fam); only its samples are read, in the .fam's order. Unknown
        samples are refused.
    exclude_ranges : list of str, optional
        For a PLINK ``.bed``: base-pair ranges of the .bim whose SNPs are left out
        (PLINK's ``--exclude range``), ``"CHROMOSOME:FIRST-LAST"`` with both ends
        included, e.g. ``["6:28477797-33448354"]`` (the MHC on GRCh37), or
        ``"CHROMOSOME"`` for a whole chromosome. A chromosome the .bim does not have is
        refused.

    Returns
    -------
    dask.array.Array, numpy.ndarray or xarray.DataArray
        A 2-D dask array (NumPy for a NumPy source), or a dask-backed DataArray (xarray,
        AnnData) whose coordinates label the outputs. The data page of the documentation
        has the details (preprocessing remembered, dask DataFrames, AnnData).

    Raises
    ------
    FileNotFoundError
        The store path does not exist.
    ValueError
        Not 2-D (no stacking dims), several arrays and no ``variable``, an option not
        taken.

    Examples
    --------
    >>> import scalepca
    >>> sst = scalepca.datasets.make_gridded(120, n_lat=18, n_lon=36)["sst"]
    >>> X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
    >>> X.dims, X.shape                               # lat and lon stacked, lazy
    (('time', 'feature'), (120, 648))
    >>> pca = scalepca.PCA(3).fit(X)
    >>> pca.components_xr_.dims                       # back over the grid
    ('mode', 'lat', 'lon')
    """
    kind = _checked_kind(source, format, storage_options, task_size, open_options)
    path = source if isinstance(source, (str, os.PathLike)) or kind == "bed" else None
    bed = {"dtype": dtype, "keep": keep, "exclude_ranges": exclude_ranges}
    if kind == "bed" or any(v is not None for v in bed.values()):
        return _bed_matrix(
            kind,
            path,
            variable=variable,
            sample_dims=sample_dims,
            feature_dims=feature_dims,
            weights=weights,
            layer=layer,
            chunks=chunks,
            task_size=task_size,
            **bed,
        )
    if kind == "anndata" or _anndata_object(source):
        _refuse_for_anndata(variable, sample_dims, feature_dims, weights)
        return _anndata_matrix(source, layer, chunks, storage_options)
    where = "the Dataset" if path is None else repr(os.fspath(path))
    if layer is not None:
        raise ValueError(
            f"layer={layer!r} applies to AnnData only; {where} is not AnnData"
        )
    if kind == "netcdf":  # then as any DataArray or Dataset
        source = open_netcdf(source, variable=variable, open_options=open_options)
        where = "the Dataset"
    if isinstance(source, (str, os.PathLike)):
        source, variable = _store_node(
            source,
            variable,
            storage_options,
            chunks,
            sample_dims,
            feature_dims,
            task_size,
            open_options,
        )
    dataset = None
    if isinstance(source, xr.Dataset):
        dataset, source = source, _dataset_variable(source, variable, where)
    if isinstance(source, xr.DataArray):
        return _dataarray_matrix(
            source,
            chunks=chunks,
            sample_dims=sample_dims,
            weights=weights,
            feature_dims=feature_dims,
            dataset=dataset,
            task_size=task_size,
        )
    return _array_matrix(source, chunks, weights, task_size)


def _anndata_matrix(source, layer, chunks, storage_options):
    """The cell × gene matrix of an AnnData store or object, read lazily."""
    from ..io._anndata import open_anndata

    return _dataarray_matrix(
        open_anndata(
            source, layer=layer, chunks=chunks, storage_options=storage_options
        )
    )


def _bed_matrix(kind, path, *, dtype, keep, exclude_ranges, **options):
    """The matrix of a PLINK ``.bed`` (``kind == "bed"``); ``dtype``, ``keep`` and
    ``exclude_ranges`` are refused for others."""
    if kind != "bed":
        given = {"dtype": dtype, "keep": keep, "exclude_ranges": exclude_ranges}
        name, value = next((k, v) for k, v in given.items() if v is not None)
        why = " (other sources keep their dtype)" if name == "dtype" else ""
        raise ValueError(f"{name}={value!r} applies to PLINK .bed files only{why}")
    return _open_bed(
        path, dtype=dtype, keep=keep, exclude_ranges=exclude_ranges, **options
    )


def _checked_kind(
    source, format, storage_options, task_size, open_options
) -> str | None:
    """The kind of store at a path ``source`` (:func:`data_kind`; None for objects),
    after the options of :func:`open_matrix` that need no data are checked, before
    anything is opened: ``task_size``, ``format``, and xarray's ``open_options``,
    refused where xarray does not open the source (objects opened already, AnnData
    stores; plain zarr stores: by :func:`open_store`)."""
    _task_bytes(task_size)
    if format not in (None, *FORMATS):
        raise ValueError(
            f"format={format!r} is not one of {', '.join(map(repr, FORMATS))} (or "
            "None: recognised from the path)"
        )
    path = (
        source
        if isinstance(source, (str, os.PathLike, list, tuple))
        and (
            not isinstance(source, (list, tuple))
            or all(isinstance(p, (str, os.PathLike)) for p in source)
        )
        else None
    )
    kind = (
        None
        if path is None
        else data_kind(path, format=format, storage_options=storage_options)
    )
    if isinstance(path, (list, tuple)) and kind != "bed":
        raise ValueError(
            f"format={format!r}: a list of paths is read as one matrix "
            "for PLINK .bed files only"
        )
    if open_options is None:
        return kind
    if path is None:
        raise ValueError(
            "open_options apply to a path read through xarray (a NetCDF file, an "
            f"xarray zarr store); the source is a {type(source).__name__}, "
            "opened already"
        )
    if kind in ("anndata", "bed"):
        what = "an AnnData store" if kind == "anndata" else "a PLINK .bed"
        raise ValueError(
            "open_options apply to stores read through xarray; "
            f"{os.fspath(source)!r} is {what}"
        )
    return kind


def _refuse_for_anndata(variable, sample_dims, feature_dims, weights) -> None:
    """The options of :func:`open_matrix` that AnnData does not take, refused by
    name."""
    if variable is not None:
        raise ValueError(
            f"variable={variable!r}: an AnnData store has no variables; pass "
            "layer=... to read a layer instead of X"
        )
    if sample_dims is not None or feature_dims is not None:
        raise ValueError(
            "AnnData is a (cell × gene) matrix already: sample_dims and "
            "feature_dims do not apply"
        )
    if weights is not None:
        raise ValueError(
            "weights apply to gridded fields; AnnData is read as it is (scale "
            "the genes in the AnnData, e.g. with scanpy, before the fit)"
        )


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


def _dataset_variable(ds: xr.Dataset, variable, where: str) -> xr.DataArray:
    """The variable of ``ds`` named by ``variable``, or its only one."""
    names = list(ds.data_vars)
    if variable is None and len(names) != 1:
        raise ValueError(
            f"{where} holds variables {names}; pass variable=... to choose one"
        )
    return ds[variable or names[0]]


def _array_matrix(source, chunks, weights, task_size):
    """A sparse, zarr, dask, DataFrame or in-memory array source as a row-chunked
    matrix with its features in one chunk, weighted (and described) when ``weights``
    are given."""
    from .._validation import as_csr_blocks, is_sparse

    if is_sparse(source):  # scipy.sparse / pydata sparse, in memory or as dask blocks
        if weights is not None:
            raise ValueError(
                "weights are not applied to sparse input; scale its columns "
                "first (X @ scipy.sparse.diags(w))"
            )
        arr = as_csr_blocks(source)
        if arr.ndim != 2:
            raise ValueError(f"expected a 2-D array; got shape {arr.shape}")
        rows = _array_rows(chunks)
        arr = arr.rechunk({0: rows}) if rows is not None else arr
        return arr.rechunk({1: -1}) if len(arr.chunks[1]) > 1 else arr
    if isinstance(source, zarr.Array):
        if source.ndim != 2:
            raise ValueError(
                f"the zarr array has {source.ndim} dimensions (shape "
                f"{source.shape}); a 2-D (sample × feature) array is needed "
                "— for N-D data open it with xarray and pass sample_dims"
            )
        arr = open_zarr(source, rows=_array_rows(chunks), task_size=task_size)
    elif isinstance(source, da.Array):
        arr = source
    # lazily, refused from its metadata before its rows are counted
    elif is_dask_frame(source):
        arr = frame_matrix(source, what="the DataFrame", weights=weights)
    else:
        arr = np.asarray(source)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D array; got shape {arr.shape}")
    prep = describe(arr, weights=weights)
    rows = _array_rows(chunks)
    if isinstance(arr, np.ndarray):
        if rows is not None:
            arr = da.from_array(arr, chunks=(rows, -1))
    else:
        if rows is not None:
            arr = arr.rechunk({0: rows})
        if len(arr.chunks[1]) > 1:
            arr = arr.rechunk({1: -1})
    if prep.weights is None:
        return arr
    return named_matrix(prep.weight(arr), prep)


def _open_bed(
    path,
    *,
    variable,
    sample_dims,
    feature_dims,
    weights,
    layer,
    chunks,
    dtype,
    task_size,
    keep=None,
    exclude_ranges=None,
):
    """A PLINK .bed as the (sample × SNP) matrix (see :mod:`scalepca.io._bed`)."""
    from ..io._bed import open_bed_matrix

    given = {
        "variable": variable,
        "sample_dims": sample_dims,
        "feature_dims": feature_dims,
        "layer": layer,
    }
    given = [name for name, value in given.items() if value is not None]
    if given:
        raise ValueError(
            f"{', '.join(given)} do(es) not apply to a PLINK .bed file, which is a "
            "(sample × SNP) matrix already"
        )
    if weights is not None:
        raise ValueError(
            "weights do not apply to a PLINK .bed file: genotypes are "
            "standardised by the model, PCA(standardize='genotype')"
        )
    paths = list(path) if is_bed_list(path) else [path]
    for one in paths:
        if one is not None and _is_url(os.fspath(one)):
            raise ValueError(
                f"{os.fspath(one)!r}: PLINK .bed files are read from local paths"
            )
    if len(paths) > 1 or isinstance(path, (list, tuple)):
        from ..io._bed_cohorts import open_bed_list

        arr = open_bed_list(
            paths,
            rows=_array_rows(chunks),
            dtype="float32" if dtype is None else dtype,
            task_size=task_size,
            keep=keep,
            exclude_ranges=exclude_ranges,
        )
        return _dataarray_matrix(arr)
    arr = open_bed_matrix(
        os.fspath(path),
        rows=_array_rows(chunks),
        dtype="float32" if dtype is None else dtype,
        task_size=task_size,
        keep=keep,
        exclude_ranges=exclude_ranges,
    )
    return _dataarray_matrix(arr)


def _anndata_path(path) -> bool:
    from ..io._anndata import is_anndata

    return is_anndata(path)


def _anndata_object(obj) -> bool:
    from ..io._anndata import is_anndata_object

    return is_anndata_object(obj)


def _is_anndata_group(group) -> bool:
    from ..io._anndata import is_anndata_group

    return is_anndata_group(group)


def _array_rows(chunks):
    """Rows per chunk from ``chunks`` for an array source (no dim names)."""
    if chunks is None or not isinstance(chunks, dict):
        return chunks
    rows = None
    for key, value in chunks.items():
        if key == 0:
            rows = value
        elif key == 1:
            if value not in (-1, None):
                raise ValueError(
                    "chunks: axis 1 is the features, which always end in one "
                    "chunk; chunk the rows (axis 0) instead"
                )
        else:
            raise ValueError(
                f"chunks: {key!r} is not an axis of a 2-D array; an array has no "
                "dim names: give the rows per chunk as {0: rows} or an int"
            )
    return rows


def _looks_like_xarray(group: zarr.Group) -> bool:
    for _, arr in group.arrays():
        md = arr.metadata
        if getattr(md, "dimension_names", None) or "_ARRAY_DIMENSIONS" in arr.attrs:
            return True
    return False
