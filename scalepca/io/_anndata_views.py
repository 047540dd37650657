"""Views of an AnnData (``adata[cells, genes]``) as exactly their cells and genes, lazily.

A view holds no data of its own: anndata keeps its parent and the positions it selects along
``obs`` and ``var`` (views of views are resolved to one parent and one pair of positions). Those
are private attributes (``_adata_ref``, ``_oidx``, ``_vidx``), the only record anndata keeps:
``view.X`` would read the selection at once. The matrix of a view is read from its parent:

* a backed parent (``read_h5ad(path, backed="r")``): ``X`` stays in the file. Each task reads
  the cells of its block in increasing order through anndata's sparse dataset (only those
  rows' values are read; a dense ``X`` is read by a point selection), then puts them in the
  view's order and keeps the view's genes. A permutation costs no shuffle between tasks.
* a parent in memory (and layers, which a backed AnnData holds in memory): the parent's matrix
  as row blocks, indexed by dask as anndata indexes dask arrays (cells, then genes).

The cell and gene names are the view's, so scores and components carry the right labels.
"""

from __future__ import annotations

import contextlib

import dask.array as da
import numpy as np
import xarray as xr

__all__ = ["view_matrix"]


def _positions(index, n: int):
    """Positions an anndata view index selects: ``None`` (all, in order), a slice (a
    contiguous increasing run) or an integer array (any order, repeats allowed)."""
    pos = np.atleast_1d(np.arange(n)[index])
    if pos.size == n and np.array_equal(pos, np.arange(n)):
        return None
    if pos.size and np.all(np.diff(pos) == 1):
        return slice(int(pos[0]), int(pos[-1]) + 1)
    return pos


def view_selection(view):
    """``(parent, rows, cols)`` of an AnnData view (see :func:`_positions`)."""
    parent = view._adata_ref
    return (parent, _positions(view._oidx, parent.n_obs), _positions(view._vidx, parent.n_vars))


def view_matrix(view, *, layer: str | None, chunks) -> xr.DataArray:
    """The matrix of the AnnData view ``view`` (X or ``layer``) as ``open_anndata`` gives it."""
    from ._anndata import _dataarray, _from_object

    parent, rows, cols = view_selection(view)
    if layer is None and parent.isbacked:
        X = _backed_rows(parent.filename, rows, cols, chunks)
    else:
        X = _from_object(parent, layer=layer, chunks=chunks).data
        if rows is not None:  # dask gathers the rows; blocks of the parent's size again
            block = X.chunks[0][0]
            X = X[rows]
            X = X.rechunk({0: block}) if X.chunks[0][0] != block else X
        if cols is not None:
            X = X[:, cols]
    return _dataarray(X, np.asarray(view.obs_names, dtype=object),
                      np.asarray(view.var_names, dtype=object), layer or "X")


def _backed_rows(path, rows, cols, chunks) -> da.Array:
    """``X[rows][:, cols]`` of the AnnData file at ``path``, one task per block of rows."""
    import scipy.sparse as sp
    from dask.base import tokenize

    from ._anndata import _block_rows, _open_root, matrix_elem

    root = _open_root(path, None)
    try:
        elem, encoding, (n, d), default = matrix_elem(root, repr(str(path)), layer=None)
        dtype = elem["data"].dtype if encoding != "array" else elem.dtype
        name = elem.name
    finally:
        if hasattr(root, "close"):
            root.close()
    rows = np.arange(n)[rows if rows is not None else slice(None)]
    n_cols = d if cols is None else np.arange(d)[cols].size
    index = da.from_array(rows, chunks=_block_rows(chunks, default) or n)
    meta = (np.empty((0, 0), dtype=dtype) if encoding == "array"
            else sp.csr_matrix((0, 0), dtype=dtype))
    return index.map_blocks(
        _read_rows, path=str(path), elem_name=name, encoding=encoding, cols=cols,
        new_axis=1, chunks=(index.chunks[0], (n_cols,)), dtype=dtype, meta=meta,
        name="anndata-view-" + tokenize(str(path), name, rows, cols, index.chunks),
    )


@contextlib.contextmanager
def _element(path: str, elem_name: str):
    """The stored matrix, opened in the task (h5py objects do not travel between processes)."""
    from ._anndata import _open_root

    root = _open_root(path, None)
    try:
        yield root[elem_name]
    finally:
        if hasattr(root, "close"):
            root.close()


def _read_rows(index, *, path, elem_name, encoding, cols):
    """Rows ``index`` (any order) of the stored matrix, restricted to ``cols``.

    The distinct rows are read in increasing order (what HDF5 and anndata's sparse datasets
    select), then put in the order of ``index``. A CSC matrix is read over the span of the
    rows (each of its columns holds values of every row) and converted to CSR.
    """
    import scipy.sparse as sp

    rows, order = np.unique(index, return_inverse=True)
    with _element(path, elem_name) as elem:
        if encoding == "array":
            block = elem[rows]  # an HDF5 point selection (backed AnnData is HDF5)
        else:
            from anndata.io import sparse_dataset

            mtx = sparse_dataset(elem, should_cache_indptr=False)
            if encoding == "csr_matrix":
                mask = np.zeros(mtx.shape[0], dtype=bool)
                mask[rows] = True
                block = mtx[mask]  # anndata reads each run of consecutive rows at once
            else:
                lo = int(rows[0]) if rows.size else 0
                block = sp.csr_matrix(mtx[lo:int(rows[-1]) + 1 if rows.size else 0])
                block = block[rows - lo]
    block = block[order.ravel()]
    if cols is not None:
        block = block[:, cols]
    return sp.csr_matrix(block) if encoding != "array" else np.asarray(block)
