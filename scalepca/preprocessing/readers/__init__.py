"""One reader per kind of input, and the one place that decides the kind.

:data:`READERS` lists every kind :func:`~scalepca.open_matrix` reads, each a
:class:`Reader` in a module of its own with its options, ``describe()`` (what
``scalepca info`` prints) and ``open()`` (the matrix and the steps that made it).
:func:`detect` decides which reader a source goes to, once; the application asks the
same registry. A new kind of input is one reader module plus one line here.
"""

from __future__ import annotations

from ._reader import COMMON, Opened, Reader, is_path
from .anndata import AnnDataReader
from .arrays import ArrayReader
from .bed import BedReader
from .frames import FrameReader
from .netcdf import NetCDFReader
from .xarray_objects import XarrayReader
from .zarr_store import ZarrReader

__all__ = ["COMMON", "FORMATS", "READERS", "Opened", "Reader", "detect", "is_path"]

#: every kind of input by its name, in the order :func:`detect` asks them: the first
#: that claims a source reads it, so the last reader of paths (zarr) and the last of
#: objects (array) take what no other claims
READERS: dict[str, Reader] = {
    "bed": BedReader(),
    "anndata": AnnDataReader(),
    "netcdf": NetCDFReader(),
    "zarr": ZarrReader(),
    "xarray": XarrayReader(),
    "frame": FrameReader(),
    "array": ArrayReader(),
}

#: the kinds a path may be read as: ``open_matrix``'s ``format`` values
FORMATS = tuple(kind for kind, reader in READERS.items() if reader.paths)


def detect(source, *, format: str | None = None, storage_options=None) -> str:
    """The kind of ``source``: the key of its reader in :data:`READERS`.

    A path (or list of paths) is of the kind ``format`` when given, else of the kind
    its ending, first bytes or (for a URL) zarr root attributes say, reading metadata
    only; a list of paths is PLINK .bed files. A path that does not exist gets the
    kind its ending says (``.nc``: NetCDF, ``.h5ad``: AnnData; else zarr), so that a
    message can say what is missing. An object is of the kind its type says.
    """
    paths = is_path(source)
    if paths and format is not None:
        return format
    return next(
        kind
        for kind, reader in READERS.items()
        if (reader.paths if paths else reader.objects)
        and reader.claims(source, storage_options)
    )
