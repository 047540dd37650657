"""Turn any accepted input into a 2-D dask array, and outputs back into the input's
kind."""

from __future__ import annotations

from dataclasses import dataclass, field

import dask.array as da
import numpy as np
import xarray as xr

from .._validation import _row_chunks, check_matrix
from ..io._stack import MODE, SAMPLE, _unstack, feature_template, mode_coords
from ._steps import (
    ATTR,
    Preprocessing,
    carried,
    frame_matrix,
    is_dask_frame,
    unheld,
)


@dataclass
class MatrixInput:
    """A validated 2-D dask array plus what is needed to label outputs like the input.

    ``prep`` describes how the matrix was made from the user's data (see
    :class:`~scalepca.preprocessing._steps.Preprocessing`): outputs over the features
    are returned in the data's own units and layout.
    """

    data: da.Array
    kind: str  # "numpy" | "dask" | "xarray"
    template: xr.DataArray | None = field(default=None, repr=False)
    prep: Preprocessing | None = None

    @property
    def sample_dim(self) -> str | None:
        return None if self.template is None else self.template.dims[0]

    @property
    def feature_dim(self) -> str | None:
        return None if self.template is None else self.template.dims[1]

    def sample_coords(self) -> dict:
        sdim = self.sample_dim
        return {n: c for n, c in self.template.coords.items() if set(c.dims) <= {sdim}}

    def wrap_samples(self, Z: da.Array, *, last_dim: str = MODE, last_coords=None):
        """Scores (n × k) or per-sample values (n,) in the input's kind.

        For xarray input the rows come back over the sample dims (unstacked, in stacking
        order), followed by ``last_dim``.
        """
        if self.kind == "numpy":
            return Z.compute()
        if self.kind == "dask":
            return Z
        sdim = self.sample_dim
        coords = self.sample_coords()
        if Z.ndim == 1:
            return _unstack(xr.DataArray(Z, dims=(sdim,), coords=coords), sdim)
        lc = last_coords
        if lc is None:
            lc = mode_coords(Z.shape[1])
        out = _unstack(
            xr.DataArray(
                Z, dims=(sdim, last_dim), coords={**coords, last_dim: lc}, name="scores"
            ),
            sdim,
        )  # a plot's label, not a task name
        return out.transpose(..., last_dim)

    def wrap_features(self, Xhat: da.Array, *, features: xr.DataArray | None = None):
        """An n × d result over the features in the data's own units and layout.

        The steps of ``prep`` are undone (weights divided out, NaN where a weight is
        0; stacked dims unstacked; the data's dims order). ``features``: the 1-D
        template of the feature coordinates when this input holds scores rather than
        data.
        """
        prep = self.prep
        if self.kind != "xarray":
            if prep is not None:
                Xhat = prep.unweight(Xhat)
            return Xhat.compute() if self.kind == "numpy" else Xhat
        sdim = self.sample_dim
        if features is None:
            features = feature_template(self.template)
        out = xr.DataArray(
            Xhat, dims=(sdim, features.dims[0]), coords=self.sample_coords()
        )
        out = out.assign_coords(features.coords)
        if prep is None:
            return _unstack(out, *out.dims)
        out = prep.field(out)
        out.attrs = {k: v for k, v in self.template.attrs.items() if k != ATTR}
        return out


def as_matrix(
    X,
    *,
    what: str = "X",
    min_samples: int = 1,
    min_features: int = 1,
    allow_2d_blocks: bool = False,
    accept_sparse: bool = False,
    unknown_rows: bool = False,
) -> MatrixInput:
    """Validate ``X`` (metadata only) and wrap it as a ``MatrixInput``.

    With ``accept_sparse``, sparse input (in memory or as dask blocks) becomes a dask
    array of CSR row blocks (``scalepca._validation.as_csr_blocks``); results over
    the samples come back as NumPy arrays for in-memory input and as dask arrays for
    dask input. With ``unknown_rows`` (``transform``), a dask DataFrame is mapped as
    it is, its rows not counted first, and dask arrays of unknown row block sizes are
    taken.
    """
    from ..io._anndata import is_anndata_object

    if is_anndata_object(X):  # its X; open_matrix(adata, layer=...) reads a layer
        from ._open import open_matrix

        X = open_matrix(X)
    if isinstance(X, xr.Dataset):
        raise TypeError(
            f"{what} is an xarray Dataset; pass one variable (ds['name']) or use "
            "scalepca.open_matrix(ds, variable='name')"
        )
    if isinstance(X, xr.DataArray):
        if X.ndim != 2:
            raise ValueError(
                f"{what} is a DataArray with dims {X.dims}; stack it to (sample, "
                "feature) with scalepca.open_matrix(X, sample_dims=...) first"
            )
        prep = carried(X)
        if prep is None:  # a table given as it is: rows are samples, columns features
            prep = Preprocessing(
                variable=X.name if isinstance(X.name, str) else None,
                dims=tuple(X.dims),
                sample_dims=(X.dims[0],),
                feature_dims=(X.dims[1],),
                feature_sizes=(X.shape[1],),
            )
        # in memory: row blocks of about 64 MiB, as for NumPy arrays
        if X.chunks is None:
            X = X.chunk({X.dims[0]: _row_chunks(X.data)[0], X.dims[1]: -1})
        arr = check_matrix(
            X.data,
            what=what,
            min_samples=min_samples,
            min_features=min_features,
            allow_2d_blocks=allow_2d_blocks,
            accept_sparse=accept_sparse,
            unknown_rows=unknown_rows,
        )
        return MatrixInput(arr, "xarray", X, prep)
    if is_dask_frame(X):
        X = frame_matrix(X, what=what, lengths=not unknown_rows)
    prep = carried(X)
    X = unheld(X)
    kind = "dask" if isinstance(X, da.Array) else "numpy"
    if kind == "numpy" and not isinstance(X, np.ndarray):
        import zarr

        if isinstance(X, zarr.Array):
            from ..io._coalesce import open_zarr

            kind = "dask"
            # a 2-D array is read several small store chunks per task; any other is left
            # for check_matrix to refuse
            if X.ndim == 2:
                X = open_zarr(X)
            else:
                X = da.from_zarr(X)
    arr = check_matrix(
        X,
        what=what,
        min_samples=min_samples,
        min_features=min_features,
        allow_2d_blocks=allow_2d_blocks,
        accept_sparse=accept_sparse,
        unknown_rows=unknown_rows,
    )
    return MatrixInput(arr, kind, prep=prep)


def scores_matrix(
    Z, *, what: str = "scores", unknown_rows: bool = False
) -> MatrixInput:
    """Scores as a matrix: a DataArray over sample dims and ``mode`` is stacked to 2-D.

    The sample dims (all dims but ``mode``, in their order) become the rows, as the
    scores of several sample dims come from ``transform``.
    """
    if isinstance(Z, xr.DataArray) and MODE in Z.dims and Z.ndim != 2:
        others = [d for d in Z.dims if d != MODE]
        if not others:
            raise ValueError(
                f"{what} have only the {MODE!r} dim; give one row per sample"
            )
        if len(others) > 1:
            Z = Z.stack({SAMPLE: others}).transpose(SAMPLE, MODE)
    if isinstance(Z, xr.DataArray) and MODE in Z.dims and Z.ndim == 2:
        Z = Z.transpose(..., MODE)
    return as_matrix(Z, what=what, unknown_rows=unknown_rows)
