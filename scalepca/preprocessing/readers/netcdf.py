"""NetCDF/HDF5 files (or a glob of them, combined by coordinates), read through
xarray."""

from __future__ import annotations

import dataclasses
import os

from ...io._netcdf import is_netcdf, open_netcdf, open_netcdf_dataset
from ._reader import Opened, Reader
from .xarray_objects import XarrayOptions, open_xarray

__all__ = ["NetCDFReader"]


@dataclasses.dataclass(frozen=True)
class NetCDFOptions(XarrayOptions):
    """The options of NetCDF files: those of xarray data, and xarray's open options
    (see :func:`~scalepca.open_matrix`)."""

    open_options: dict | None = None


class NetCDFReader(Reader):
    """A local NetCDF/HDF5 file or glob: a variable of its Dataset."""

    kind = "netcdf"
    title = "NetCDF file"
    Options = NetCDFOptions

    def claims(self, source, storage_options=None) -> bool:
        return is_netcdf(source)

    def open(self, source, options: NetCDFOptions) -> Opened:
        data = open_netcdf(
            source, variable=options.variable, open_options=options.open_options
        )
        return open_xarray(data, options, where="the Dataset")

    def dataset(self, path, *, storage_options=None, open_options=None):
        """The file's Dataset before a variable is chosen."""
        return open_netcdf_dataset(path, open_options=open_options)

    def describe(self, path, *, storage_options=None, verbose=False) -> list[str]:
        ds = self.dataset(path)
        lines = [f"NetCDF {os.fspath(path)}: dims {dict(ds.sizes)}"]
        for name, var in ds.data_vars.items():
            lines.append(
                f"  {name}: dims {var.dims}, shape {var.shape}, dtype {var.dtype}"
            )
        return lines
