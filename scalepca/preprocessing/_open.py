"""Open zarr stores, fsspec URLs, xarray and in-memory arrays as a (sample × feature)
matrix: the door every input kind passes, handing each to its reader
(:mod:`scalepca.preprocessing.readers`)."""

from __future__ import annotations

import os

from ..io._coalesce import TASK_SIZE, _task_bytes
from ._steps import remember
from .readers import FORMATS, READERS, detect, is_path

__all__ = ["no_data_store", "open_dataset", "open_matrix"]

#: how each kind of data store is called in messages ("no NetCDF file at ...")
KIND_NAMES = {kind: READERS[kind].title for kind in FORMATS}


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
    NetCDF file (or glob) and for a zarr store written by xarray, else the zarr node.
    AnnData stores and PLINK .bed files are refused (they are read by
    :func:`open_matrix` as a matrix). ``open_options`` as in :func:`open_matrix`."""
    kind = detect(path, format=format, storage_options=storage_options)
    return READERS[kind].dataset(
        path, storage_options=storage_options, open_options=open_options
    )


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
        AnnData) whose coordinates label the outputs. A weighted matrix holds the record
        of its preparation, and so do its rows, rechunks, copies, persisted and pickled
        versions; an estimator keeps it. A plain NumPy array made of it
        (``np.array(M)``) is data in their own units, and an array computed from it
        (``M / w``) is refused by ``transform``. The data page of the documentation
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
    given = dict(
        variable=variable,
        storage_options=storage_options,
        chunks=chunks,
        sample_dims=sample_dims,
        feature_dims=feature_dims,
        weights=weights,
        layer=layer,
        task_size=task_size,
        open_options=open_options,
        dtype=dtype,
        keep=keep,
        exclude_ranges=exclude_ranges,
    )
    _task_bytes(task_size)
    if format not in (None, *FORMATS):
        raise ValueError(
            f"format={format!r} is not one of {', '.join(map(repr, FORMATS))} (or "
            "None: recognised from the path)"
        )
    kind = detect(source, format=format, storage_options=storage_options)
    if isinstance(source, (list, tuple)) and is_path(source) and kind != "bed":
        raise ValueError(
            f"format={format!r}: a list of paths is read as one matrix "
            "for PLINK .bed files only"
        )
    reader = READERS[kind]
    return remember(*reader.open(source, reader.options(source, given)))
