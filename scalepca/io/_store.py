"""Atomic zarr writing: output stores, and the groups model stores are written into.

Model stores themselves (what a fitted estimator saves, and :func:`scalepca.load`) are
in :mod:`scalepca.persistence`; they are written with ``atomic_group``.

Atomicity: a local store is written under a temporary sibling name and renamed into
place, so a process killed mid-write leaves only a ``.tmp-*`` directory that is never
read as a model. Every store (local or remote) also carries ``complete: true`` written
last; a group without it is refused by its readers (:func:`scalepca.load`,
``open_matrix``).

Nothing is replaced that is not a store of the kind being written (``format``: a
model, an output), and a complete one only with ``overwrite``: see
:func:`scalepca.io._fs.check_replace`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import uuid
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

from ._fs import (
    OUTPUT,
    check_apart,
    check_replace,
    local_path,
    open_fs,
    open_fsspec_store,
)
from ._fs import is_url as _is_url

logger = logging.getLogger(__name__)


def _local_path(store) -> str | None:
    return local_path(store) if isinstance(store, (str, os.PathLike)) else None


def _open_for_write(path: str, storage_options=None, kind=OUTPUT) -> zarr.Group:
    """An empty group at ``path`` flagged ``complete: false``, replacing what is there
    (a store of the same kind: ``atomic_group`` checks that first).

    When a group is being replaced, its flag is turned off first and its root
    metadata deleted last, so a reader during the replacement never sees a store that
    claims to be complete with parts missing.
    """
    if _is_url(path):
        fs, root = open_fs(path, storage_options)
        store = open_fsspec_store(path, storage_options, read_only=False)
        if fs.exists(f"{root}/zarr.json"):
            try:
                group = zarr.open_group(store=store, mode="r+")
            except (zarr.errors.GroupNotFoundError, zarr.errors.ContainsArrayError):
                group = None
            if group is not None:
                if group.attrs.get("complete") is True:
                    _keep_previous(fs, root)
                group.attrs.update({"format": kind, "complete": False})
                for child in fs.ls(root, detail=False):
                    if child.rstrip("/").rsplit("/", 1)[-1] != "zarr.json":
                        fs.rm(child, recursive=True)
                group.attrs.put({"format": kind, "complete": False})
                return group
        if fs.exists(root):
            fs.rm(root, recursive=True)
        group = zarr.open_group(
            store=store, mode="w", attributes={"format": kind, "complete": False}
        )
        return group
    group = zarr.open_group(
        path, mode="w", attributes={"format": kind, "complete": False}
    )
    return group


def atomic_group(
    path,
    *,
    storage_options=None,
    write=None,
    consolidate=False,
    kind=OUTPUT,
    overwrite=False,
    flag="overwrite=True",
):
    """Create a zarr group at ``path`` by calling ``write(group)``, atomically where
    possible.

    ``kind`` is the ``format`` the group gets (written first, with ``complete: false``);
    what is at ``path`` is replaced only if it is a store of that kind, and a complete
    one only with ``overwrite`` (:func:`~scalepca.io._fs.check_replace`; ``flag`` names
    that option in the caller's words). The check comes before anything is written.

    ``write`` may put an array in the group's place (a store whose root is an array) and
    return it; ``complete`` is then set on that array.

    ``consolidate``: once the group is complete, its members' metadata are consolidated
    into the group's own metadata (``zarr.consolidate_metadata``), so readers
    (``xr.open_zarr``) find everything in one read.

    Local paths: written to ``<path>.tmp-<host>-<pid>-<uuid>`` and renamed over
    ``path``; the old store is removed only after the new one is complete. Partial
    siblings that killed writers on this host left behind (their process is gone) are
    removed after a successful write. Remote URLs (no rename on object stores):
    written in place with ``complete`` set last; a complete store being replaced is
    first copied to ``<path>.previous`` (server-side on object stores), which is
    deleted once the new store is complete — so a writer killed mid-way loses
    nothing: the previous output stays readable there.
    """
    check_replace(
        path, kind, overwrite=overwrite, storage_options=storage_options, flag=flag
    )
    local = _local_path(path)
    if local is None:
        group = _open_for_write(os.fspath(path), storage_options, kind)
        _mark_complete(group, write(group))
        # last: an attrs update afterwards would drop the consolidated view
        if consolidate:
            _consolidate(group)
        drop_previous(os.fspath(path), storage_options)
        return
    target = Path(local)
    target.parent.mkdir(parents=True, exist_ok=True)
    renamed_into_place(
        target, write, attributes={"format": kind}, consolidate=consolidate
    )


def _regular_field(field):
    """The DataArray ``field`` with regular chunks, as zarr stores them (one in
    memory as it is)."""
    if field.chunks is None:
        return field
    return field.copy(data=regular_chunks(field.data))


def _mark_complete(group, written) -> None:
    """Flag a write complete on the group ``write`` returned (its root), or on
    ``group`` when it returned None."""
    if written is None:
        written = group
    written.attrs["complete"] = True


def renamed_into_place(
    target: Path, write, *, attributes=None, consolidate=False
) -> None:
    """The local atomic write: a zarr group built by ``write(group)`` under
    ``<target>.tmp-<host>-<pid>-<random>`` (``complete: false`` first, ``true`` last),
    then renamed over ``target``.

    An existing ``target`` is first renamed to ``<target>.old-<…>`` and removed only
    once the new group is in place, so a process killed at any moment leaves either
    the old group (under its name or, between the two renames, as the ``.old-``
    sibling) or the new complete one; never a half-written group under the final
    name. Siblings that writers on this host left when they died are removed after a
    successful write. Used by ``atomic_group`` and by the commits of a checkpoint
    (:mod:`scalepca.io._checkpoint`).
    """
    tmp = target.with_name(f"{target.name}.tmp-{_writer_tag()}")
    try:
        group = zarr.open_group(
            str(tmp), mode="w", attributes={**(attributes or {}), "complete": False}
        )
        _mark_complete(group, write(group))
        if consolidate:
            _consolidate(group)
        if target.exists():
            old = target.with_name(f"{target.name}.old-{_writer_tag()}")
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _remove_abandoned(target)


def _consolidate(group: zarr.Group) -> None:
    """Consolidate the metadata of ``group``'s members into its own (what xarray
    looks for)."""
    with warnings.catch_warnings():
        # zarr 3 notes that consolidated metadata are not yet in the v3 specification;
        # xarray and zarr-python read them, and xarray warns when they are missing
        warnings.filterwarnings(
            "ignore",
            message="Consolidated metadata is currently not part",
            category=UserWarning,
        )
        zarr.consolidate_metadata(group.store, path=group.path)


PREVIOUS_SUFFIX = ".previous"


def _keep_previous(fs, root: str) -> None:
    """Copy the complete store at ``root`` to ``<root>.previous`` before it is rewritten
    in place.

    An older ``.previous`` (from a rewrite that was interrupted after the store it
    replaced had become complete again) is replaced: ``root`` is complete now, so it
    is the newer output.
    """
    backup = root.rstrip("/") + PREVIOUS_SUFFIX
    if fs.exists(backup):
        fs.rm(backup, recursive=True)
    logger.info(
        "keeping the previous output %s as %s until the rewrite completes", root, backup
    )
    fs.copy(root.rstrip("/"), backup, recursive=True)


def drop_previous(path: str, storage_options=None) -> None:
    """Delete ``<path>.previous`` after ``path`` has been rewritten completely (URLs
    only)."""
    if not _is_url(path):
        return
    fs, root = open_fs(path, storage_options)
    backup = root.rstrip("/") + PREVIOUS_SUFFIX
    if fs.exists(backup):
        fs.rm(backup, recursive=True)


def _writer_tag() -> str:
    """``<host>-<pid>-<random>``: lets a later write tell an abandoned sibling from a
    live one."""
    host = socket.gethostname().replace("-", "_") or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_abandoned(target: Path) -> None:
    """Delete ``<target>.tmp-*`` / ``.old-*`` siblings whose writer (on this host) has
    died.

    Siblings of writers on other hosts, of live processes, or in an older naming
    scheme are left alone: they may be a write under way. ``target`` is complete when
    this runs, so an ``.old-*`` copy is no longer the only complete one.
    """
    host = socket.gethostname().replace("-", "_") or "host"
    for sib in target.parent.iterdir():
        for kind in (".tmp-", ".old-"):
            prefix = f"{target.name}{kind}"
            if not sib.name.startswith(prefix):
                continue
            parts = sib.name[len(prefix) :].split("-")
            if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
                continue
            if int(parts[1]) != os.getpid() and not _pid_alive(int(parts[1])):
                logger.info("removing %s left by an interrupted write", sib)
                shutil.rmtree(sib, ignore_errors=True)


def is_regular(chunks) -> bool:
    """True when along every axis all chunks but the last have one size and the last is no
    larger: a dask layout zarr can store chunk for chunk."""
    return all(len(set(c[:-1])) <= 1 and (len(c) < 2 or c[-1] <= c[0]) for c in chunks)


def regular_chunks(arr: da.Array) -> da.Array:
    """Rechunk ``arr`` so every chunk but the last along each axis has the same size.

    Zarr arrays have one chunk shape; writing dask blocks of other sizes would make
    two workers write into the same zarr chunk. The rechunk moves blocks between
    workers only.
    """
    for ax, c in enumerate(arr.chunks):
        if not is_regular((c,)):
            arr = arr.rechunk({ax: max(c)})
    return arr


def write_array(
    arr,
    store,
    *,
    name: str = "scores",
    storage_options=None,
    attrs=None,
    codec: str | None = None,
    overwrite=False,
    flag="overwrite=True",
    inputs=(),
) -> None:
    """Write a lazy result (dask array or dask-backed DataArray) chunk by chunk from the
    workers.

    ``arr`` may also be a dict of such results by name (``{"scores_x": ..., "scores_y":
    ...}``), written side by side in the one store; ``name`` is then not used.

    ``codec`` names the compression: ``"lz4"`` (Blosc-LZ4, byte shuffle; the default),
    ``"lz4-bitshuffle"``, ``"zstd"`` or ``"none"``.

    The store is written atomically (see ``atomic_group``); nothing is gathered on the
    client. xarray results are written with ``to_zarr`` so coordinates come along; plain
    arrays get dimension names (``sample`` and ``mode`` for scores, ``sample`` and
    ``feature`` otherwise) so xarray can open them too. The store's metadata are
    consolidated at the end, so ``xr.open_zarr(store)`` opens it at once, without
    xarray's warning about a store lacking consolidated metadata.

    An output store already at ``store`` is replaced only with ``overwrite`` (``flag``
    names that option in messages); anything else there never is (``FileExistsError``).
    ``inputs``: ``(what, path)`` of the stores the result is computed from; ``store``
    must not be one of them, nor lie inside or contain one (``ValueError``, before
    anything is computed).

    Dask blocks are stored as they are into zarr chunks of the blocks' size (no
    rechunk at write time: ``regular_chunks`` has made them equal), so each task
    writes its own chunks.
    """
    import xarray as xr

    from .._codecs import compressors

    comp = compressors(codec)  # an unknown name fails before anything is written
    if isinstance(store, (str, os.PathLike)):
        check_apart([("the output", store)], inputs)

    def write_one(group: zarr.Group, arr, name: str):
        if isinstance(arr, xr.DataArray):
            _regular_field(arr).to_dataset(name=name).to_zarr(
                group.store,
                group=group.path or None,
                mode="a",
                consolidated=False,
                encoding={name: {"compressors": comp}},
            )
        else:
            a = arr if isinstance(arr, da.Array) else da.from_array(np.asarray(arr))
            dims = ("sample", "mode" if name.startswith("scores") else "feature")[
                : a.ndim
            ]
            if a.ndim > 2:
                dims = None
            a = regular_chunks(a)
            # the array is created here, with its dimension names, and the workers write
            # its chunks: dask's to_zarr forwards dimension_names to zarr only on newer
            # versions
            target = group.create_array(
                name,
                shape=a.shape,
                dtype=a.dtype,
                chunks=tuple(max(c[0], 1) for c in a.chunks),
                dimension_names=dims,
                compressors=comp,
            )
            # da.store, not to_zarr: dask's to_zarr into an existing array rechunks to
            # its own "auto" chunks (one block for a small array), which need not align
            # with the zarr chunks and warns of data loss
            da.store(a, target, lock=False, compute=True)

    def write(group: zarr.Group):
        group.attrs.update({"format": OUTPUT, **json.loads(json.dumps(attrs or {}))})
        if isinstance(arr, dict) and all(
            isinstance(v, xr.DataArray) for v in arr.values()
        ):
            # labelled results side by side: one Dataset, their shared coordinates
            # written once
            ds = xr.Dataset({k: _regular_field(v) for k, v in arr.items()})
            ds.to_zarr(
                group.store,
                group=group.path or None,
                mode="a",
                consolidated=False,
                encoding={k: {"compressors": comp} for k in arr},
            )
            return
        for key, value in arr.items() if isinstance(arr, dict) else [(name, arr)]:
            write_one(group, value, key)

    atomic_group(
        store,
        storage_options=storage_options,
        write=write,
        consolidate=True,
        kind=OUTPUT,
        overwrite=overwrite,
        flag=flag,
    )
