"""Writing synthetic datasets to zarr stores, block by block from the workers.

Every dataset store is written by the one atomic zarr writer of the package,
``scalepca.io._store.atomic_group``: a local store under a temporary sibling name
renamed into place, a remote one in place; in both a ``complete`` flag written last,
so an interrupted write never leaves a store that looks complete, and a complete
store being replaced stays readable until its replacement is.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import dask.array as da
import numpy as np

from ._generators import CountMatrix, make_low_rank
from .genotypes import GenotypeMatrix, write_bed

logger = logging.getLogger(__name__)

#: entries per zarr chunk of the 1-D arrays of a CSR matrix (data, indices, indptr)
CSR_ZARR_CHUNK = 2**22


def _block_nnz(block):
    return np.array([[block.nnz]], dtype=np.int64)


def _indptr_part(block, block_id=None, *, offsets, dtype_out=np.int64):
    """A block's row pointers, shifted to where its values start in the whole matrix."""
    return (offsets[block_id[0]] + block.indptr[1:].astype(np.int64)).astype(dtype_out)


def csr_index_dtype(nnz: int, shape: tuple) -> np.dtype:
    """The integer type of ``indices`` and ``indptr`` of a CSR matrix: int32 while
    the count of stored values and both dimensions fit in it, else int64 (the rule of
    scipy.sparse, whose matrices anndata writes as they are)."""
    fits = max(int(nnz), *map(int, shape)) <= np.iinfo(np.int32).max
    return np.dtype(np.int32 if fits else np.int64)


def _csr_parts(X: da.Array, nnz: np.ndarray, index: np.dtype) -> dict:
    """The ``data``, ``indices`` and ``indptr`` arrays of the CSR blocks ``X``
    (lazy), whose blocks hold ``nnz`` stored values each."""
    offsets = np.concatenate([[0], np.cumsum(nnz)])
    return {
        "data": X.map_blocks(
            lambda b: b.data,
            drop_axis=1,
            chunks=(tuple(nnz),),
            dtype=X.dtype,
            meta=np.empty((0,), dtype=X.dtype),
        ),
        "indices": X.map_blocks(
            lambda b: b.indices.astype(index),
            drop_axis=1,
            chunks=(tuple(nnz),),
            dtype=index,
            meta=np.empty((0,), dtype=index),
        ),
        "indptr": da.concatenate(
            [
                da.zeros((1,), dtype=index, chunks=1),
                X.map_blocks(
                    _indptr_part,
                    offsets=offsets,
                    dtype_out=index,
                    drop_axis=1,
                    chunks=(X.chunks[0],),
                    dtype=index,
                    meta=np.empty((0,), dtype=index),
                ),
            ]
        ),
    }


def write_counts(data: CountMatrix, root, *, compressors=None) -> None:
    """Write ``data`` into the zarr group ``root`` in anndata's layout, its blocks by
    the workers.

    Two passes over the blocks: the first counts the stored values of each block (a
    number per block comes back; ``data.nnz`` when the generator can count without
    drawing the values), the second draws them and writes ``data``, ``indices`` and
    ``indptr`` at their offsets, rechunked to :data:`CSR_ZARR_CHUNK` entries so that no
    zarr chunk is written by two tasks. Cell names are written the same way; gene names,
    and the empty ``obs``/``var`` columns and mappings, by anndata itself
    (``anndata.io.write_elem``). ``compressors``: those of the CSR arrays (zarr's
    default if None).

    ``indices`` and ``indptr`` share one integer type, as in the stores anndata
    writes from a ``scipy.sparse`` matrix (:func:`csr_index_dtype`): readers such as
    scanpy's PCA kernels take them only in matching types.
    """
    import pandas as pd
    from anndata.io import write_elem

    from ..io._anndata import matrix_path

    X = data.X
    n, d = X.shape
    counted = data.nnz
    if counted is None:  # counted in a pass of its own
        counted = X.map_blocks(
            _block_nnz,
            chunks=(1, 1),
            dtype=np.int64,
            meta=np.empty((0, 0), dtype=np.int64),
        )
    nnz = counted.compute().ravel()
    index = csr_index_dtype(int(nnz.sum()), (n, d))
    root.attrs.update({"encoding-type": "anndata", "encoding-version": "0.1.0"})
    for name in ("layers", "obsm", "obsp", "varm", "varp", "uns"):
        write_elem(root, name, {})
    write_elem(root, "var", pd.DataFrame(index=pd.Index(data.var_names())))
    obs = root.create_group("obs")
    obs.attrs.update(
        {
            "_index": "_index",
            "column-order": [],
            "encoding-type": "dataframe",
            "encoding-version": "0.2.0",
        }
    )
    names = data.obs_names(min(n, 2**16))
    zn = obs.create_array("_index", shape=(n,), chunks=(names.chunks[0][0],), dtype=str)
    zn.attrs.update({"encoding-type": "string-array", "encoding-version": "0.2.0"})
    group = root.create_group(matrix_path(data.layer))
    group.attrs.update(
        {"encoding-type": "csr_matrix", "encoding-version": "0.1.0", "shape": [n, d]}
    )
    sources, targets = [names], [zn]
    for name, arr in _csr_parts(X, nnz, index).items():
        z = group.create_array(
            name,
            shape=arr.shape,
            dtype=arr.dtype,
            chunks=(
                max(
                    1, min(arr.shape[0], CSR_ZARR_CHUNK if name != "indptr" else 2**20)
                ),
            ),
            **({} if compressors is None else {"compressors": compressors}),
        )
        sources.append(arr.rechunk(z.chunks))
        targets.append(z)
    da.store(sources, targets, lock=False)


def _write_blocks(data, group, comp):
    """Write ``data`` into the new store whose root is ``group`` (everything but its
    final ``complete: true``); returns the root node, which a plain array replaces."""
    import xarray as xr
    import zarr

    from ..io._store import regular_chunks

    if isinstance(data, CountMatrix):
        write_counts(data, group, compressors=comp)
        return group
    if isinstance(data, xr.Dataset):
        ds = data.chunk({d: max(c) for d, c in data.chunks.items()})
        ds.attrs = {**ds.attrs, **dict(group.attrs)}
        ds.to_zarr(
            group.store,
            group=group.path or None,
            mode="a",
            consolidated=False,
            encoding={v: {"compressors": comp} for v in ds.data_vars},
        )
        return group
    arr = regular_chunks(data)
    z = zarr.create_array(
        group.store,
        name=group.path or None,
        shape=arr.shape,
        dtype=arr.dtype,
        chunks=tuple(max(c[0], 1) for c in arr.chunks),
        attributes=dict(group.attrs),
        compressors=comp,
        overwrite=True,
    )
    arr.store(z, lock=False)
    return z


def write_dataset(
    data,
    path,
    *,
    overwrite: bool = False,
    storage_options=None,
    codec: str | None = None,
) -> str:
    """Write a lazy dataset (dask array, xarray Dataset, :class:`CountMatrix`) to a zarr
    store (a :class:`~scalepca.datasets.genotypes.GenotypeMatrix` to a PLINK .bed:
    ``write_bed``).

    ``codec`` names the compression: ``"lz4"`` (Blosc-LZ4, byte shuffle; the default,
    chosen by measurement: see the README), ``"lz4-bitshuffle"``, ``"zstd"`` or
    ``"none"``.

    The workers generate and write one block each. The store is written atomically
    (``scalepca.io._store.atomic_group``): local paths under a temporary sibling name
    renamed into place, so an interrupted write never leaves a store that looks
    complete; remote URLs (``s3://...``) in place (object stores have no rename),
    flagged ``complete: false`` until the last block is written. Returns the path.

    The store's root carries ``format: scalepca-dataset``. A zarr store already at
    ``path`` is kept as it is unless ``overwrite`` (or unless it is an interrupted
    write of a dataset, which is written again); with ``overwrite`` a dataset store
    is replaced, but nothing else ever is (a folder of other files, a model or output
    store, a store scalepca did not write): ``FileExistsError``.

    Examples
    --------
    >>> import tempfile, scalepca
    >>> from scalepca.datasets import make_low_rank, write_dataset
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_dataset(make_low_rank(1000, 50), f"{tmp}/data.zarr")
    ...     X = scalepca.open_matrix(path)              # lazy, from the store
    ...     n_passes = scalepca.PCA(5).fit(X).n_passes_
    >>> X.shape, n_passes
    ((1000, 50), 1)
    """
    from .._codecs import compressors
    from ..io._fs import DATASET, local_path, store_state
    from ..io._store import atomic_group

    spath = os.fspath(path)
    if isinstance(data, GenotypeMatrix):  # a PLINK .bed, not a zarr store
        if not overwrite and dataset_complete(spath):
            return spath
        return write_bed(data, spath, overwrite=True)
    local = local_path(spath)
    comp = compressors(codec)  # an unknown name fails here, before anything is written
    st = store_state(spath, storage_options)
    if not overwrite and st.zarr and st.complete is not False:
        logger.info("dataset %s exists; not regenerating", spath)
        return spath if local is None else local
    atomic_group(
        spath,
        storage_options=storage_options,
        kind=DATASET,
        overwrite=overwrite,
        write=lambda group: _write_blocks(data, group, comp),
    )
    if local is None:
        return spath
    return str(Path(local))


def dataset_complete(path, storage_options=None) -> bool:
    """Whether ``path`` holds a zarr store whose write was not interrupted (no
    ``complete: false``)."""
    from ..io._bed import check_bed, is_bed_path
    from ..io._fs import store_state

    if is_bed_path(path):  # written under a temporary name, renamed when complete
        try:
            check_bed(path)
        except (OSError, ValueError):
            return False
        return True
    st = store_state(path, storage_options)
    return st.zarr and st.complete is not False


def make_low_rank_zarr(
    path,
    n_samples: int,
    n_features: int,
    *,
    overwrite: bool = False,
    storage_options=None,
    codec: str | None = None,
    **kwargs,
) -> str:
    """Write :func:`make_low_rank` data to a zarr array at ``path`` (see
    :func:`write_dataset`).

    Examples
    --------
    >>> import tempfile, scalepca
    >>> from scalepca.datasets import make_low_rank_zarr
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = make_low_rank_zarr(f"{tmp}/data.zarr", 1000, 20, rank=3)
    ...     shape = scalepca.open_matrix(path).shape
    >>> shape
    (1000, 20)
    """
    return write_dataset(
        make_low_rank(n_samples, n_features, **kwargs),
        path,
        overwrite=overwrite,
        storage_options=storage_options,
        codec=codec,
    )
