"""Open NetCDF and HDF5 files (one file or a glob of several) lazily through xarray.

NetCDF-4 files are HDF5 files; netCDF "classic" files start with ``CDF``. xarray
picks the engine from the file's first bytes among those installed (h5netcdf or
netCDF4 for HDF5, scipy or netCDF4 for classic files); variables come back as dask
arrays, nothing is read until a fit computes.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import xarray as xr

from ._fs import is_url
from ._open_options import (
    OpenOptionError,
    TimeDecodeError,
    check_open_options,
    is_time_decode_error,
    xarray_kwargs,
)

__all__ = ["is_netcdf", "open_netcdf", "open_netcdf_dataset"]

#: file name endings of NetCDF / HDF5 files
SUFFIXES = (".nc", ".nc4", ".netcdf", ".cdf", ".h5", ".hdf5", ".he5")

#: first bytes of an HDF5 file (NetCDF-4) and of a netCDF classic / 64-bit offset /
#: CDF-5 file
MAGIC = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")


def _has_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def is_netcdf(path) -> bool:
    """True for a local path or glob naming NetCDF/HDF5 files (by ending or first
    bytes).

    Directories (zarr stores) and URLs are not NetCDF here; a path that does not
    exist is one when its ending says so (so that opening it reports the missing
    file).
    """
    p = os.fspath(path)
    if is_url(p):
        return False
    p = p.removeprefix("file://")
    if p.lower().endswith(SUFFIXES):
        return not Path(p).is_dir()
    if _has_glob(p) or not Path(p).is_file():
        return False
    with open(p, "rb") as fh:
        head = fh.read(8)
    return head.startswith(MAGIC)


def open_netcdf(
    path,
    *,
    variable: str | None = None,
    chunks="auto",
    open_options: dict | None = None,
) -> xr.DataArray:
    """One variable of a NetCDF/HDF5 file, or of several files combined by their
    coordinates.

    Parameters
    ----------
    path : str or path
        A file, or a glob (``"data/sst_*.nc"``) whose files are combined by their
        coordinates (``xr.open_mfdataset(..., combine="by_coords")``, e.g. years split
        along ``time``).
    variable : str, optional
        The data variable; needed when the file holds several.
    chunks : default "auto"
        dask chunks passed to xarray ("auto" starts from the files' own HDF5 chunking).
    open_options : dict, optional
        xarray's open options ``decode_times``, ``use_cftime``, ``engine``
        (:mod:`scalepca.io._open_options`).

    Returns
    -------
    xarray.DataArray
        Dask-backed; nothing is read yet.

    Raises
    ------
    FileNotFoundError
        The file does not exist, or the glob matches no file.
    ValueError
        Several data variables and no ``variable``; or no engine to read the file
        installed; bad ``open_options``.
    TimeDecodeError
        xarray cannot decode the file's times (a ``ValueError`` naming the options that
        open it).
    KeyError
        ``variable`` is not in the file.
    """
    ds = open_netcdf_dataset(path, chunks=chunks, open_options=open_options)
    p = os.fspath(path).removeprefix("file://")
    names = list(ds.data_vars)
    if variable is None:
        if len(names) != 1:
            raise ValueError(
                f"{p!r} holds variables {names}; pass variable=... to choose one"
            )
        variable = names[0]
    if variable not in ds.data_vars:
        raise KeyError(f"no variable {variable!r} in {p!r}; it has {names}")
    return ds[variable]


def open_netcdf_dataset(
    path, *, chunks="auto", open_options: dict | None = None
) -> xr.Dataset:
    """The file (or the files a glob matches, combined) as a lazy Dataset: see
    :func:`open_netcdf`, which picks one variable of it."""
    p = os.fspath(path).removeprefix("file://")
    kwargs = xarray_kwargs(check_open_options(open_options, netcdf=True))
    try:
        if _has_glob(p):
            files = sorted(glob.glob(p))
            if not files:
                raise FileNotFoundError(f"no file matches {p!r}")
            ds = xr.open_mfdataset(
                files,
                combine="by_coords",
                chunks=chunks,
                data_vars="minimal",
                coords="minimal",
                compat="override",
                **kwargs,
            )
        else:
            if not Path(p).is_file():
                raise FileNotFoundError(f"no NetCDF/HDF5 file at {p!r}")
            ds = xr.open_dataset(p, chunks=chunks, **kwargs)
    except (ValueError, OSError) as err:
        if is_time_decode_error(err):
            raise TimeDecodeError(p, str(err)) from err
        if "engine" in kwargs and not isinstance(err, FileNotFoundError):
            raise OpenOptionError(
                "engine",
                f"{kwargs['engine']!r} cannot read {p!r} ({type(err).__name__}: {err})",
            ) from err
        if isinstance(err, OSError):
            raise
        if "engine" in str(err) or "backend" in str(err):
            raise ValueError(
                f"cannot read {p!r}: no installed xarray engine reads it ({err}); "
                "install the 'netcdf' extra: pip install 'scalepca[netcdf]'"
            ) from err
        raise
    return ds
