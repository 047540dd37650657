"""Turn any accepted input into a 2-D dask array, and outputs back into the input's kind."""

from __future__ import annotations

from dataclasses import dataclass, field

import dask.array as da
import numpy as np
import xarray as xr

from .._validation import check_matrix

MODE = "mode"


@dataclass
class MatrixInput:
    """A validated 2-D dask array plus what is needed to label outputs like the input."""

    data: da.Array
    kind: str  # "numpy" | "dask" | "xarray"
    template: xr.DataArray | None = field(default=None, repr=False)

    @property
    def sample_dim(self) -> str | None:
        return None if self.template is None else self.template.dims[0]

    @property
    def feature_dim(self) -> str | None:
        return None if self.template is None else self.template.dims[1]

    def wrap_samples(self, Z: da.Array, *, last_dim: str = MODE, last_coords=None):
        """Scores (n × k) or per-sample values (n,) in the input's kind."""
        if self.kind == "numpy":
            return Z.compute()
        if self.kind == "dask":
            return Z
        t = self.template
        sdim = self.sample_dim
        coords = {name: c for name, c in t.coords.items() if set(c.dims) <= {sdim}}
        if Z.ndim == 1:
            out = xr.DataArray(Z, dims=(sdim,), coords=coords)
        else:
            lc = np.arange(Z.shape[1]) if last_coords is None else last_coords
            out = xr.DataArray(Z, dims=(sdim, last_dim), coords={**coords, last_dim: lc})
        return _unstack(out, sdim)

    def wrap_features(self, Xhat: da.Array):
        """A reconstruction (n × d) in the input's kind."""
        if self.kind == "numpy":
            return Xhat.compute()
        if self.kind == "dask":
            return Xhat
        t = self.template
        return _unstack(t.copy(data=Xhat), self.sample_dim, self.feature_dim)


def _unstack(arr: xr.DataArray, *dims):
    for dim in dims:
        if dim in arr.indexes and getattr(arr.indexes[dim], "nlevels", 1) > 1:
            arr = arr.unstack(dim)
    return arr


def as_matrix(X, *, what: str = "X", min_samples: int = 1, min_features: int = 1,
              allow_2d_blocks: bool = False) -> MatrixInput:
    """Validate ``X`` (metadata only) and wrap it as a :class:`MatrixInput`."""
    if isinstance(X, xr.Dataset):
        raise TypeError(
            f"{what} is an xarray Dataset; pass one variable (ds['name']) or use "
            "scalepca.open_matrix(ds, variable='name')"
        )
    if isinstance(X, xr.DataArray):
        if X.ndim != 2:
            raise ValueError(
                f"{what} is a DataArray with dims {X.dims}; stack it to (sample, feature) with "
                "scalepca.open_matrix(X, sample_dims=...) first"
            )
        if X.chunks is None:
            X = X.chunk()
        arr = check_matrix(X.data, what=what, min_samples=min_samples,
                           min_features=min_features, allow_2d_blocks=allow_2d_blocks)
        return MatrixInput(arr, "xarray", X)
    kind = "dask" if isinstance(X, da.Array) else "numpy"
    if kind == "numpy" and not isinstance(X, np.ndarray):
        import zarr

        if isinstance(X, zarr.Array):
            kind = "dask"
            X = da.from_zarr(X)
    arr = check_matrix(X, what=what, min_samples=min_samples, min_features=min_features,
                       allow_2d_blocks=allow_2d_blocks)
    return MatrixInput(arr, kind)
