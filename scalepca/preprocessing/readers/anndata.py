"""AnnData: a ``.h5ad`` file or an AnnData zarr store (local or a URL), or an
``anndata.AnnData`` object, read as its lazy (cell × gene) matrix."""

from __future__ import annotations

import dataclasses
import os

from ...io._fs import is_url, open_zarr_node
from .._steps import stacked
from ._reader import Opened, Reader, is_path, refuse_bed_options, refuse_open_options

__all__ = ["AnnDataReader"]


@dataclasses.dataclass(frozen=True)
class AnnDataOptions:
    """The options of AnnData (see :func:`~scalepca.open_matrix`)."""

    layer: str | None = None
    chunks: object = None
    storage_options: dict | None = None


class AnnDataReader(Reader):
    """An AnnData store or object (``X`` or one of its ``layers``)."""

    kind = "anndata"
    title = "AnnData store"
    paths = objects = True
    Options = AnnDataOptions

    def claims(self, source, storage_options=None) -> bool:
        from ...io._anndata import is_anndata, is_anndata_group, is_anndata_object

        if not is_path(source):
            return is_anndata_object(source)
        if is_anndata(source):
            return True
        if not is_url(os.fspath(source)):
            return False
        try:  # a URL: by its root group's attributes
            node = open_zarr_node(source, storage_options=storage_options)
        except FileNotFoundError:
            return False
        import zarr

        return isinstance(node, zarr.Group) and is_anndata_group(node)

    def refuse(self, source, foreign: dict) -> None:
        refuse_open_options(source, foreign, self)
        refuse_bed_options(foreign)
        if "variable" in foreign:
            raise ValueError(
                f"variable={foreign['variable']!r}: an AnnData store has no "
                "variables; pass layer=... to read a layer instead of X"
            )
        if "sample_dims" in foreign or "feature_dims" in foreign:
            raise ValueError(
                "AnnData is a (cell × gene) matrix already: sample_dims and "
                "feature_dims do not apply"
            )
        if "weights" in foreign:
            raise ValueError(
                "weights apply to gridded fields; AnnData is read as it is (scale "
                "the genes in the AnnData, e.g. with scanpy, before the fit)"
            )
        super().refuse(source, foreign)

    def open(self, source, options: AnnDataOptions) -> Opened:
        from ...io._anndata import open_anndata

        arr = open_anndata(
            source,
            layer=options.layer,
            chunks=options.chunks,
            storage_options=options.storage_options,
        )
        return Opened(*stacked(arr))

    def describe(self, path, *, storage_options=None, verbose=False) -> list[str]:
        from ...io._anndata import describe_store

        return describe_store(path, storage_options=storage_options)
