"""What every reader of an input kind is: its options, ``describe`` and ``open``.

A reader knows one kind of input (a zarr store, a PLINK .bed, a NumPy array, ...).
:func:`~scalepca.preprocessing.readers.detect` decides the kind once;
:func:`~scalepca.open_matrix` then hands the source and its keywords to that kind's
reader, which takes the options that belong to it (:attr:`Reader.Options`), refuses the
others in its own words, and opens the matrix.
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar, NamedTuple

__all__ = ["COMMON", "Opened", "Reader", "is_path"]

#: open_matrix's keywords that any reader may leave unused (task_size has a default,
#: and storage_options or chunks mean nothing to some kinds)
COMMON = ("storage_options", "chunks", "task_size")


class Opened(NamedTuple):
    """The matrix a reader opened and the :class:`Preprocessing` that made it (None:
    the matrix is the data as they are)."""

    matrix: object
    preparation: object = None


class Reader:
    """One kind of input.

    A subclass sets ``kind`` (its name in the registry), ``title`` (how a message
    names a store of this kind, "zarr store"), ``paths`` and ``objects`` (whether
    it reads paths, objects in memory or both), ``Options`` (a dataclass of the
    :func:`~scalepca.open_matrix` keywords it takes) and ``ignored`` (keywords it
    leaves unused without refusing them), and defines :meth:`claims` and
    :meth:`open`; a reader of paths also :meth:`describe`.
    """

    kind: ClassVar[str]
    title: ClassVar[str]
    paths: ClassVar[bool] = True
    objects: ClassVar[bool] = False
    Options: ClassVar[type]
    ignored: ClassVar[tuple[str, ...]] = ()

    def claims(self, source, storage_options=None) -> bool:
        """Whether ``source`` is of this kind (a path: from its name, first bytes or
        metadata; an object: from its type)."""
        raise NotImplementedError

    def options(self, source, given: dict):
        """This kind's :attr:`Options` out of ``open_matrix``'s keywords ``given``,
        after :meth:`refuse` has said no to the ones set that it does not take."""
        fields = [f.name for f in dataclasses.fields(self.Options)]
        foreign = {
            k: v
            for k, v in given.items()
            if v is not None and k not in (*fields, *COMMON, *self.ignored)
        }
        if foreign:
            self.refuse(source, foreign)
        return self.Options(**{k: given[k] for k in fields if k in given})

    def refuse(self, source, foreign: dict) -> None:
        """Raise ``ValueError`` for the options in ``foreign`` (set, not taken): by
        default those of other kinds in their owners' words."""
        refuse_open_options(source, foreign, self)
        refuse_bed_options(foreign)
        refuse_layer(source, foreign, self)
        name = next(iter(foreign))
        raise ValueError(f"{name}={foreign[name]!r} does not apply to {self.title}")

    def open(self, source, options) -> Opened:
        """The (sample × feature) matrix of ``source`` (metadata read only)."""
        raise NotImplementedError

    def dataset(self, path, *, storage_options=None, open_options=None):
        """The data at ``path`` before a variable is chosen (an xarray Dataset, or
        the zarr node of a store xarray did not write); refused for kinds that hold
        no variables."""
        what = ("an " if self.title[0] in "AEIOU" else "a ") + self.title
        raise ValueError(f"{os.fspath(path)!r} is {what}; it holds no xarray variables")

    def describe(self, path, *, storage_options=None, verbose=False) -> list[str]:
        """The lines ``scalepca info`` prints for the store at ``path`` (metadata
        only)."""
        raise NotImplementedError(f"{self.title} has no description")


def is_path(source) -> bool:
    """Whether ``source`` names data by a path (or a list of paths) rather than
    holding them."""
    if isinstance(source, (list, tuple)):
        return all(isinstance(p, (str, os.PathLike)) for p in source)
    return isinstance(source, (str, os.PathLike))


def _where(source) -> str:
    return (
        repr(os.fspath(source))
        if isinstance(source, (str, os.PathLike))
        else "the Dataset"
    )


def refuse_open_options(source, foreign: dict, reader: Reader) -> None:
    """xarray's ``open_options`` given to a source xarray does not open."""
    if "open_options" not in foreign:
        return
    if not is_path(source):
        raise ValueError(
            "open_options apply to a path read through xarray (a NetCDF file, an "
            f"xarray zarr store); the source is a {type(source).__name__}, "
            "opened already"
        )
    what = {"anndata": "an AnnData store", "bed": "a PLINK .bed"}.get(
        reader.kind, f"a {reader.title}"
    )
    shown = (
        repr(os.fspath(source))
        if isinstance(source, (str, os.PathLike))
        else repr([os.fspath(p) for p in source])
    )
    raise ValueError(
        f"open_options apply to stores read through xarray; {shown} is {what}"
    )


def refuse_bed_options(foreign: dict) -> None:
    """The PLINK .bed reader's options given to another kind."""
    for name in ("dtype", "keep", "exclude_ranges"):
        if name in foreign:
            why = " (other sources keep their dtype)" if name == "dtype" else ""
            raise ValueError(
                f"{name}={foreign[name]!r} applies to PLINK .bed files only{why}"
            )


def refuse_layer(source, foreign: dict, reader: Reader) -> None:
    """The AnnData reader's ``layer`` given to another kind."""
    if "layer" in foreign:
        raise ValueError(
            f"layer={foreign['layer']!r} applies to AnnData only; "
            f"{_where(source)} is not AnnData"
        )
