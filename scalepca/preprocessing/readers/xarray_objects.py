"""xarray DataArrays and Datasets in memory (or dask-backed), and the route every
source read through xarray takes: a variable chosen, N-D dims stacked, weighted."""

from __future__ import annotations

import dataclasses

import xarray as xr

from ...io._coalesce import TASK_SIZE
from .._steps import stacked
from ._reader import Opened, Reader

__all__ = ["XarrayReader", "open_xarray"]


@dataclasses.dataclass(frozen=True)
class XarrayOptions:
    """The options of data read through xarray (see :func:`~scalepca.open_matrix`)."""

    variable: str | None = None
    chunks: object = None
    sample_dims: object = None
    feature_dims: object = None
    weights: object = None
    task_size: object = TASK_SIZE


class XarrayReader(Reader):
    """An ``xarray.DataArray`` or ``xarray.Dataset`` object."""

    kind = "xarray"
    title = "xarray object"
    paths, objects = False, True
    Options = XarrayOptions

    def claims(self, source, storage_options=None) -> bool:
        return isinstance(source, (xr.DataArray, xr.Dataset))

    def open(self, source, options: XarrayOptions) -> Opened:
        return open_xarray(source, options, where="the Dataset")


def open_xarray(source, options, *, where: str) -> Opened:
    """The matrix of a DataArray, or of the variable ``options.variable`` of a
    Dataset (its only one by default); ``where`` names the Dataset in messages."""
    dataset = None
    if isinstance(source, xr.Dataset):
        dataset, source = source, _dataset_variable(source, options.variable, where)
    return Opened(
        *stacked(
            source,
            chunks=options.chunks,
            sample_dims=options.sample_dims,
            feature_dims=options.feature_dims,
            weights=options.weights,
            dataset=dataset,
            task_size=options.task_size,
        )
    )


def _dataset_variable(ds: xr.Dataset, variable, where: str) -> xr.DataArray:
    """The variable of ``ds`` named by ``variable``, or its only one."""
    names = list(ds.data_vars)
    if variable is None and len(names) != 1:
        raise ValueError(
            f"{where} holds variables {names}; pass variable=... to choose one"
        )
    return ds[variable or names[0]]
