"""Results written into an AnnData store (``.zarr`` folder or ``.h5ad`` file) where
scanpy keeps them, without rewriting ``X``: ``obsm["X_pca"]`` from the workers block
by block (a dask array), ``varm["PCs"]``, ``uns["pca"]`` and the gene table ``var``
(small) through anndata's own element writer, so ``anndata.read_zarr`` /
``read_h5ad`` read them back as scanpy's."""

from __future__ import annotations

from pathlib import Path

from ._anndata import _local, _open_root

#: what :func:`write_results` writes into a store: the groups it changes
RESULTS = ("obsm", "varm", "uns", "var")


def results_stamp(path):
    """A value that changes whenever :func:`write_results` writes into the local store
    ``path`` (the newest change time of what it writes; the file's, for ``.h5ad``), so
    an interrupted command can tell whether it had begun to; None for a URL."""
    import os

    p = _local(path)
    if p is None:
        return None
    if Path(p).is_file():
        return os.stat(p).st_mtime_ns
    stamps = [os.stat(p).st_mtime_ns]
    for group in RESULTS:
        for folder, _, files in os.walk(Path(p) / group):
            stamps += [os.stat(os.path.join(folder, f)).st_mtime_ns for f in files]
            stamps.append(os.stat(folder).st_mtime_ns)
    return max(stamps)


def _open_for_update(path):
    """``(root opened for writing, whether its metadata were consolidated)``. anndata
    edits no consolidated store: it is opened without, and consolidated again after
    the writes."""
    p = _local(path)
    if p is not None and Path(p).is_file():
        import h5py

        return h5py.File(p, "r+"), False
    import zarr

    where = p if p is not None else path
    consolidated = (
        zarr.open_group(where, mode="r").metadata.consolidated_metadata is not None
    )
    return zarr.open_group(where, mode="r+", use_consolidated=False), consolidated


def write_results(path, scores, pcs, uns: dict, hvg: dict | None, flavor) -> None:
    """Write PCA results (and highly variable genes) into the AnnData store at
    ``path``."""
    import anndata

    root = _open_root(path, None)  # checks it is an AnnData store first
    if hasattr(root, "close"):
        root.close()
    root, consolidated = _open_for_update(path)
    try:
        for group in ("obsm", "varm", "uns"):
            if group not in root:
                root.create_group(group)
        anndata.io.write_elem(root["obsm"], "X_pca", scores)
        anndata.io.write_elem(root["varm"], "PCs", pcs)
        anndata.io.write_elem(root["uns"], "pca", uns)
        if hvg is not None:
            var = anndata.io.read_elem(root["var"])
            for k, v in hvg.items():
                var[k] = v
            anndata.io.write_elem(root, "var", var)
            anndata.io.write_elem(root["uns"], "hvg", {"flavor": flavor})
    finally:
        if hasattr(root, "close"):
            root.close()
    if consolidated:
        import zarr

        zarr.consolidate_metadata(root.store)
