"""Open AnnData objects and stores (``.zarr``, ``.h5ad``) lazily as (cell × gene)
matrices.

Single-cell data come as AnnData: a matrix ``X`` (or one of its ``layers``) of cells ×
genes, usually sparse (CSR), with the cell names (``obs_names``) and gene names
(``var_names``). Here the matrix is read through anndata's own lazy reader
(``anndata.experimental.read_elem_lazy``), which gives a dask array whose every block is
read by the task that needs it: a block of rows of a CSR matrix stays a
``scipy.sparse.csr_matrix`` and nothing is densified. The result is a DataArray over
``("obs", "var")``:

* the ``var`` coordinate holds the gene names (small, read at once), so fitted
  components can be labelled by gene (``est.components_xr_``) and ``transform`` checks
  that new data have the same genes in the same order;
* the ``obs_names`` coordinate (along ``obs``, not an index) holds the cell names,
  lazily for a store: scores come back with it, and nothing of a large ``obs`` is read
  on the client.

The anndata package is an optional extra (``pip install 'scalepca[anndata]'``); this
module is imported only when AnnData input is met.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import dask.array as da
import numpy as np
import xarray as xr

from .._schema import did_you_mean

logger = logging.getLogger(__name__)

__all__ = [
    "is_anndata",
    "is_anndata_group",
    "is_anndata_object",
    "open_anndata",
    "open_anndata_subset",
    "read_layers",
]

#: file name endings of AnnData HDF5 files
H5AD_SUFFIXES = (".h5ad",)

#: the ``encoding-type`` attribute anndata puts on the root group of every store it
#: writes
ENCODING = "anndata"

#: first bytes of an HDF5 file
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"

#: dims of the matrix of an AnnData: cells (observations) × genes (variables)
OBS, VAR = "obs", "var"
#: the non-index coordinate along ``obs`` holding the cell names
OBS_NAMES = "obs_names"


def _import_anndata():
    try:
        import anndata
    except ImportError as err:
        raise ImportError(
            f"reading AnnData needs the anndata package ({err}); install "
            "the 'anndata' extra: pip install 'scalepca[anndata]'"
        ) from err
    return anndata


def is_anndata_object(obj) -> bool:
    """Whether ``obj`` is an ``anndata.AnnData`` (checked without importing anndata)."""
    return any(
        cls.__name__ == "AnnData" and cls.__module__.partition(".")[0] == "anndata"
        for cls in type(obj).__mro__
    )


def _local(path) -> str | None:
    from ._fs import local_path

    return local_path(path)


def is_anndata(path) -> bool:
    """True for a local path of an AnnData store: a ``.h5ad`` file, or a zarr folder or
    HDF5 file whose root group says ``encoding-type: anndata`` (the signature anndata
    writes).

    A ``.h5ad`` path that does not exist is one (so that opening it reports the
    missing file). URLs are recognised when opened (:func:`is_anndata_group`).
    """
    p = _local(path)
    if p is None:
        return False
    if p.lower().endswith(H5AD_SUFFIXES) and not Path(p).is_dir():
        return True
    if Path(p).is_dir():
        import json

        for meta in ("zarr.json", ".zattrs"):
            f = Path(p) / meta
            if f.is_file():
                try:
                    attrs = json.loads(f.read_text())
                except ValueError:
                    return False
                attrs = attrs.get("attributes", {}) if meta == "zarr.json" else attrs
                return attrs.get("encoding-type") == ENCODING
        return False
    if Path(p).is_file():
        with open(p, "rb") as fh:
            if fh.read(8) != HDF5_MAGIC:
                return False
        try:
            import h5py
        except (
            ImportError
        ):  # without h5py no AnnData file can be read: the NetCDF path says so
            return False
        with h5py.File(p, "r") as f:
            return f.attrs.get("encoding-type") == ENCODING
    return False


def is_anndata_group(node) -> bool:
    """Whether an opened zarr group is the root of an AnnData store."""
    return node.attrs.get("encoding-type") == ENCODING


def matrix_path(layer: str | None) -> str:
    """Where X (``layer=None``) or ``layer`` is in an AnnData store."""
    if layer is None:
        return "X"
    return f"layers/{layer}"


def _layers(root) -> list[str]:
    """The names of the layers of the AnnData store ``root``, sorted."""
    if "layers" not in root:
        return []
    return sorted(map(str, root["layers"].keys()))


def layer_problem(
    layers, layer: str | None, where: str, *, has_x: bool = True
) -> str | None:
    """Why ``layer`` cannot be read from an AnnData with ``layers`` (None: it can)."""
    names = sorted(map(str, layers))
    if layer is None:
        if has_x:
            return None
        return (
            f"{where} has no X; choose one of its layers with layer=... "
            f"(it has: {', '.join(names) or 'none'})"
        )
    if layer in names:
        return None
    return (
        f"{where} has no layer {layer!r}{did_you_mean(layer, names)} "
        f"(its layers: {', '.join(names) or 'none'}; layer=None reads X)"
    )


def _rows_per_block(
    n: int,
    d: int,
    *,
    nnz: int | None,
    itemsize: int,
    index_itemsize: int = 0,
    indptr_itemsize: int = 8,
) -> int:
    """Rows holding about ``SPARSE_BLOCK_BYTES`` of stored values (and indices) per
    block."""
    from .._validation import SPARSE_BLOCK_BYTES

    if nnz is None:  # dense
        per_row = d * itemsize
    else:
        per_row = (nnz / max(n, 1)) * (itemsize + index_itemsize) + indptr_itemsize
    return int(max(1, min(n, SPARSE_BLOCK_BYTES // max(per_row, 1))))


def _block_rows(chunks, default: int) -> int | None:
    """Rows per chunk from ``open_matrix``'s ``chunks`` for AnnData (axis 0 or
    ``obs``)."""
    if chunks is None:
        return default
    if isinstance(chunks, dict):
        rows = default
        for key, value in chunks.items():
            if key in (0, OBS):
                rows = value
            elif key in (1, VAR):
                if value not in (-1, None):
                    raise ValueError(
                        "chunks: the genes (var) always end in one chunk; chunk "
                        "the cells (obs, axis 0) instead"
                    )
            else:
                raise ValueError(
                    f"chunks: no dimension {key!r}; AnnData has dims ({OBS!r}, {VAR!r})"
                )
        return rows
    if isinstance(chunks, int) and not isinstance(chunks, bool):
        return chunks
    raise ValueError(
        f"chunks: give the cells per chunk as an int or {{'obs': rows}}; got {chunks!r}"
    )


def open_anndata(
    source,
    *,
    layer: str | None = None,
    chunks=None,
    storage_options: dict | None = None,
) -> xr.DataArray:
    """The matrix of an AnnData object or store, as a lazy DataArray over (obs, var).

    Parameters
    ----------
    source : anndata.AnnData, str or path
        An AnnData in memory or backed (``read_h5ad(..., backed="r")``), or the path of
        an AnnData store: a ``.zarr`` folder (or fsspec URL) or a ``.h5ad`` file. A view
        (``adata[cells, genes]``: slices, masks, permutations) gives exactly its cells
        and genes in its order, with its names, read lazily from its parent
        (:func:`view_matrix`).
    layer : str, optional
        The layer to read (``"counts"``); ``None`` reads ``X``.
    chunks : int or dict, optional
        Cells per block (``50_000`` or ``{"obs": 50_000}``). By default a block holds
        about 64 MiB of stored values and indices (from the store's count of stored
        entries, read from metadata), the bound
        :func:`~scalepca._validation.as_csr_blocks` uses in memory.
    storage_options : dict, optional
        fsspec options of a URL.

    Returns
    -------
    xarray.DataArray
        Dims ``("obs", "var")``, dask-backed: blocks of ``scipy.sparse.csr_matrix`` rows
        for a sparse matrix (CSC stores come as CSC blocks and are converted where they
        are read), NumPy blocks for a dense one. Coordinates: ``var`` (gene names, an
        index) and ``obs_names`` along ``obs`` (cell names; lazy for stores). Named
        after the layer (``"X"`` for ``X``).

    Raises
    ------
    FileNotFoundError
        No store at the path.
    KeyError
        No such layer (the message lists the layers, with a close match), or no ``X``.
    ImportError
        anndata is not installed.
    """
    _import_anndata()
    if is_anndata_object(source):
        return _from_object(source, layer=layer, chunks=chunks)
    return _from_store(
        source, layer=layer, chunks=chunks, storage_options=storage_options
    )


def _dataarray(X: da.Array, obs_names, var_names, name: str) -> xr.DataArray:
    n, d = X.shape
    if len(var_names) != d or len(obs_names) != n:
        raise ValueError(
            f"the AnnData's matrix {name} has shape {X.shape}, but it has "
            f"{len(obs_names)} obs names and {len(var_names)} var names"
        )
    return xr.DataArray(
        X,
        dims=(OBS, VAR),
        name=name,
        coords={VAR: np.asarray(var_names, dtype=object), OBS_NAMES: (OBS, obs_names)},
    )


def _from_object(adata, *, layer, chunks) -> xr.DataArray:
    where = "the AnnData"
    problem = layer_problem(
        adata.layers.keys(), layer, where, has_x=adata.X is not None
    )
    if problem:
        raise KeyError(problem)
    if adata.is_view:  # exactly its cells and genes, in its order, lazily
        return view_matrix(adata, layer=layer, chunks=chunks)
    if layer is None and adata.isbacked:
        # X stays in the file: read it lazily by path, as a store is read
        out = _from_store(
            adata.filename, layer=None, chunks=chunks, storage_options=None
        )
        return out.assign_coords(
            {
                OBS_NAMES: (OBS, np.asarray(adata.obs_names, dtype=object)),
                VAR: np.asarray(adata.var_names, dtype=object),
            }
        )
    X = adata.X if layer is None else adata.layers[layer]
    from .._validation import _row_chunks, _sparse_kind, as_csr_blocks

    if isinstance(X, da.Array):
        arr = X
        rows = _block_rows(chunks, None)
        if rows is not None:
            arr = arr.rechunk({0: rows})
    elif _sparse_kind(X) is not None:
        arr = as_csr_blocks(X)
        rows = _block_rows(chunks, None)
        if rows is not None:
            arr = arr.rechunk({0: rows})
    else:
        X = np.asarray(X)
        arr = da.from_array(X, chunks=(_block_rows(chunks, _row_chunks(X)[0]), -1))
    if len(arr.chunks[1]) > 1:
        arr = arr.rechunk({1: -1})
    return _dataarray(
        arr,
        np.asarray(adata.obs_names, dtype=object),
        np.asarray(adata.var_names, dtype=object),
        layer or "X",
    )


def _open_root(path, storage_options):
    """The root group of an AnnData store: an h5py File or a zarr Group."""
    p = _local(path)
    if p is not None and Path(p).is_file():
        import h5py

        return h5py.File(p, "r")
    if p is not None and p.lower().endswith(H5AD_SUFFIXES) and not Path(p).exists():
        raise FileNotFoundError(f"no AnnData file at {p!r}")
    from ._fs import open_zarr_node

    return open_zarr_node(path, storage_options=storage_options)


def read_layers(path, *, storage_options: dict | None = None) -> tuple[list[str], bool]:
    """``(layer names, whether there is an X)`` of the AnnData store at ``path``
    (metadata).

    Raises ``FileNotFoundError`` when there is no store and ``ValueError`` when it is
    not an AnnData store.
    """
    root = _open_root(path, storage_options)
    try:
        if root.attrs.get("encoding-type") != ENCODING:
            raise ValueError(
                f"{os.fspath(path)!r} is not an AnnData store (its root group has "
                "no 'encoding-type: anndata' attribute)"
            )
        return _layers(root), "X" in root
    finally:
        if hasattr(root, "close"):
            root.close()


def describe_store(path, *, storage_options: dict | None = None) -> list[str]:
    """Lines describing an AnnData store: its shape, and ``X`` and each layer
    (metadata only)."""
    root = _open_root(path, storage_options)
    try:
        n, d = (
            root[axis][root[axis].attrs.get("_index", "_index")].shape[0]
            for axis in (OBS, VAR)
        )
        lines = [
            f"AnnData store {os.fspath(path)}: {n:,} cells (obs) × {d:,} genes (var)"
        ]
        names = [matrix_path(k) for k in _layers(root)]
        if "X" in root:
            names.insert(0, "X")
        for name in names:
            elem = root[name]
            encoding = elem.attrs.get("encoding-type", "array")
            if encoding in ("csr_matrix", "csc_matrix"):
                nnz = int(elem["data"].shape[0])
                lines.append(
                    f"  {name}: {encoding}, {elem['data'].dtype}, {nnz:,} stored "
                    f"values ({nnz / max(n * d, 1):.2%} of the entries)"
                )
            else:
                lines.append(
                    f"  {name}: {encoding}, {elem.dtype}, shape {tuple(elem.shape)}"
                )
        return lines
    finally:
        if hasattr(root, "close"):
            root.close()


def _from_store(path, *, layer, chunks, storage_options) -> xr.DataArray:
    root = _open_root(path, storage_options)
    try:
        return _read_root(root, repr(os.fspath(path)), layer=layer, chunks=chunks)
    finally:
        # an h5py File: the lazy reader opens the file in each task
        if hasattr(root, "close"):
            root.close()


def matrix_elem(root, where: str, *, layer):
    """``(elem, encoding, (n, d), default rows per block)`` of X or a layer (metadata
    only)."""
    if root.attrs.get("encoding-type") != ENCODING:
        raise ValueError(
            f"{where} is not an AnnData store (its root group has no "
            "'encoding-type: anndata' attribute)"
        )
    problem = layer_problem(_layers(root), layer, where, has_x="X" in root)
    if problem:
        raise KeyError(problem)
    elem = root[matrix_path(layer)]
    encoding = elem.attrs.get("encoding-type")
    if encoding in ("csr_matrix", "csc_matrix"):
        n, d = (int(s) for s in elem.attrs["shape"])
        default = _rows_per_block(
            n,
            d,
            nnz=int(elem["data"].shape[0]),
            itemsize=elem["data"].dtype.itemsize,
            index_itemsize=elem["indices"].dtype.itemsize,
            indptr_itemsize=elem["indptr"].dtype.itemsize,
        )
    elif encoding == "array" or encoding is None and hasattr(elem, "shape"):
        if len(elem.shape) != 2:
            raise ValueError(
                f"{layer or 'X'} of {where} has shape {elem.shape}; a 2-D "
                "(cell × gene) matrix is needed"
            )
        n, d = elem.shape
        default = _rows_per_block(n, d, nnz=None, itemsize=elem.dtype.itemsize)
        encoding = "array"
    else:
        raise ValueError(
            f"{layer or 'X'} of {where} is stored as {encoding!r}; scalepca "
            "reads CSR, CSC and dense matrices"
        )
    return elem, encoding, (n, d), default


def _lazy_names(obs_names):
    string = getattr(np.dtypes, "StringDType", None)
    if obs_names.dtype == object and string is not None:
        # a variable-width string dtype, so that writing scores with the names does not
        # load them all to find a fixed width (xarray does that for object arrays)
        obs_names = obs_names.astype(string())
    return obs_names


def _read_root(root, where: str, *, layer, chunks) -> xr.DataArray:
    anndata = _import_anndata()
    from anndata.experimental import read_elem_lazy

    elem, encoding, (n, d), default = matrix_elem(root, where, layer=layer)
    rows = _block_rows(chunks, default)
    X = read_elem_lazy(elem, chunks=(rows, d))
    if encoding == "csc_matrix":
        from .._validation import as_csr_blocks

        logger.info(
            "%s: %s is stored by column (CSC); every row block reads all columns",
            where,
            layer or "X",
        )
        X = as_csr_blocks(X)
    obs_key = root["obs"].attrs.get("_index", "_index")
    var_key = root["var"].attrs.get("_index", "_index")
    obs_names = _lazy_names(read_elem_lazy(root["obs"][obs_key]))
    var_names = anndata.io.read_elem(root["var"][var_key])
    logger.info(
        "%s: %s, %d × %d, %d row blocks of %d cells",
        where,
        layer or "X",
        n,
        d,
        X.numblocks[0],
        rows,
    )
    return _dataarray(X, obs_names, var_names, layer or "X")


# -- views (adata[cells, genes]) -------------------------------------------------------
# Views of an AnnData (``adata[cells, genes]``) as exactly their cells and genes,
# lazily.
#
# A view holds no data of its own: anndata keeps its parent and the positions it selects
# along ``obs`` and ``var`` (views of views are resolved to one parent and one pair of
# positions). Those are private attributes (``_adata_ref``, ``_oidx``, ``_vidx``), the
# only record anndata keeps: ``view.X`` would read the selection at once. The matrix of
# a view is read from its parent:
#
# * a backed parent (``read_h5ad(path, backed="r")``): ``X`` stays in the file. Each
# task reads
#   the cells of its block in increasing order through anndata's sparse dataset (only those
#   rows' values are read; a dense ``X`` is read by a point selection), then puts them in the
#   view's order and keeps the view's genes. A permutation costs no shuffle between tasks.
# * a parent in memory (and layers, which a backed AnnData holds in memory): the
# parent's matrix
#   as row blocks, indexed by dask as anndata indexes dask arrays (cells, then genes).
#
# The cell and gene names are the view's, so scores and components carry the right
# labels.


def _positions(index, n: int):
    """Positions an anndata view index selects: ``None`` (all, in order), a slice (a
    contiguous increasing run) or an integer array (any order, repeats allowed)."""
    pos = np.atleast_1d(np.arange(n)[index])
    if pos.size == n and np.array_equal(pos, np.arange(n)):
        return None
    if pos.size and np.all(np.diff(pos) == 1):
        return slice(int(pos[0]), int(pos[-1]) + 1)
    return pos


def _index(positions):
    """Positions as :func:`_positions` gives them (None: all) as an index."""
    if positions is None:
        return slice(None)
    return positions


def _kept(mask):
    """The positions a boolean mask keeps (None: no mask, all)."""
    if mask is None:
        return None
    return np.flatnonzero(mask)


def view_selection(view):
    """``(parent, rows, cols)`` of an AnnData view (see :func:`_positions`)."""
    parent = view._adata_ref
    return (
        parent,
        _positions(view._oidx, parent.n_obs),
        _positions(view._vidx, parent.n_vars),
    )


def view_matrix(view, *, layer: str | None, chunks) -> xr.DataArray:
    """The matrix of the AnnData view ``view`` (X or ``layer``) as ``open_anndata``
    gives it."""
    parent, rows, cols = view_selection(view)
    if layer is None and parent.isbacked:
        X = _backed_rows(parent.filename, rows, cols, chunks)
    else:
        X = _from_object(parent, layer=layer, chunks=chunks).data
        if rows is not None:  # dask gathers the rows; blocks of the parent's size again
            block = X.chunks[0][0]
            X = X[rows]
            if X.chunks[0][0] != block:
                X = X.rechunk({0: block})
        if cols is not None:
            X = X[:, cols]
    return _dataarray(
        X,
        np.asarray(view.obs_names, dtype=object),
        np.asarray(view.var_names, dtype=object),
        layer or "X",
    )


def _backed_rows(path, rows, cols, chunks, layer=None) -> da.Array:
    """``X[rows][:, cols]`` (or a layer's) of the AnnData store at ``path`` (an
    ``.h5ad`` file or a ``.zarr`` folder), one task per block of rows."""
    import scipy.sparse as sp
    from dask.base import tokenize

    root = _open_root(path, None)
    try:
        elem, encoding, (n, d), default = matrix_elem(
            root, repr(str(path)), layer=layer
        )
        dtype = elem["data"].dtype if encoding != "array" else elem.dtype
        name = elem.name
    finally:
        if hasattr(root, "close"):
            root.close()
    rows = np.arange(n)[_index(rows)]
    n_cols = np.arange(d)[_index(cols)].size
    index = da.from_array(rows, chunks=_block_rows(chunks, default) or n)
    if encoding == "array":
        meta = np.empty((0, 0), dtype=dtype)
    else:
        meta = sp.csr_matrix((0, 0), dtype=dtype)
    return index.map_blocks(
        _read_rows,
        path=str(path),
        elem_name=name,
        encoding=encoding,
        cols=cols,
        new_axis=1,
        chunks=(index.chunks[0], (n_cols,)),
        dtype=dtype,
        meta=meta,
        name="anndata-view-" + tokenize(str(path), name, rows, cols, index.chunks),
    )


@contextlib.contextmanager
def _element(path: str, elem_name: str):
    """The stored matrix, opened in the task (h5py objects do not travel between
    processes)."""
    root = _open_root(path, None)
    try:
        yield root[elem_name]
    finally:
        if hasattr(root, "close"):
            root.close()


def _read_rows(index, *, path, elem_name, encoding, cols):
    """Rows ``index`` (any order) of the stored matrix, restricted to ``cols``.

    The distinct rows are read in increasing order (what HDF5 and anndata's sparse
    datasets select), then put in the order of ``index``. A CSC matrix is read over
    the span of the rows (each of its columns holds values of every row) and
    converted to CSR.
    """
    import scipy.sparse as sp

    rows, order = np.unique(index, return_inverse=True)
    with _element(path, elem_name) as elem:
        if encoding == "array":
            # an HDF5 point selection, or zarr's orthogonal one
            block = elem.oindex[rows] if hasattr(elem, "oindex") else elem[rows]
        else:
            from anndata.io import sparse_dataset

            mtx = sparse_dataset(elem, should_cache_indptr=False)
            if encoding == "csr_matrix":
                mask = np.zeros(mtx.shape[0], dtype=bool)
                mask[rows] = True
                block = mtx[mask]  # anndata reads each run of consecutive rows at once
            else:
                lo = hi = 0  # the span of the rows (none in an empty block)
                if rows.size:
                    lo, hi = int(rows[0]), int(rows[-1]) + 1
                block = sp.csr_matrix(mtx[lo:hi])[rows - lo]
    block = block[order.ravel()]
    if cols is not None:
        block = block[:, cols]
    if encoding == "array":
        return np.asarray(block)
    return sp.csr_matrix(block)


# -- subsets of cells and genes, without copying the store -----------------------------
def open_anndata_subset(
    source, *, cells=None, genes=None, layer: str | None = None, chunks=None
) -> xr.DataArray:
    """The matrix of ``source`` (AnnData object, view or local store path) restricted
    to the cells and genes of the boolean masks ``cells`` (over ``obs``) and
    ``genes`` (over ``var``), as :func:`open_anndata` gives it, lazily: an object
    becomes its view (``adata[cells, genes]``, read from its parent by
    :func:`view_matrix`); a store is read a row block per task, each task reading
    only its cells and keeping the genes inside the task (:func:`_backed_rows`).
    Nothing is copied."""
    if cells is None and genes is None:
        return open_anndata(source, layer=layer, chunks=chunks)
    _import_anndata()
    rows, cols = _kept(cells), _kept(genes)  # None: all
    if is_anndata_object(source):
        # one view of the parent (anndata makes none of a backed view)
        if source.is_view:
            parent, prow, pcol = view_selection(source)
            rows = np.arange(parent.n_obs)[_index(prow)][_index(rows)]
            cols = np.arange(parent.n_vars)[_index(pcol)][_index(cols)]
            source = parent
        return view_matrix(
            source[_index(rows), _index(cols)], layer=layer, chunks=chunks
        )
    import anndata
    from anndata.experimental import read_elem_lazy

    root = _open_root(source, None)
    try:
        matrix_elem(root, repr(os.fspath(source)), layer=layer)  # refusals first
        obs_names = _lazy_names(
            read_elem_lazy(root["obs"][root["obs"].attrs.get("_index", "_index")])
        )
        var_names = anndata.io.read_elem(
            root["var"][root["var"].attrs.get("_index", "_index")]
        )
    finally:
        if hasattr(root, "close"):
            root.close()
    X = _backed_rows(os.fspath(source), rows, cols, chunks, layer=layer)
    if rows is not None:
        obs_names = obs_names[rows]
    var_names = np.asarray(var_names, dtype=object)[_index(cols)]
    return _dataarray(X, obs_names, var_names, layer or "X")
