"""Model stores and output writing.

A fitted model is a zarr group: the estimator class, its parameters, the scalepca version and
scalar fitted values are attributes; NumPy fitted arrays are zarr arrays; lazy (dask) fitted
arrays are written chunk by chunk from the workers. No pickle.

Atomicity: a local store is written under a temporary sibling name and renamed into place, so a
process killed mid-write leaves only a ``.tmp-*`` directory that is never read as a model.
Every store (local or remote) also carries ``complete: true`` written last; a group without it
is refused by :func:`load`.
"""

from __future__ import annotations

import importlib
import json
import logging
import numbers
import os
import shutil
import socket
import uuid
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

from ._open import _is_url, open_zarr_node, previous_hint

logger = logging.getLogger(__name__)

FORMAT = "scalepca-model"
FORMAT_VERSION = 1


def _jsonable(value):
    """Convert ``value`` to JSON types, or raise TypeError."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return _jsonable(value.item())
    raise TypeError(f"cannot store {type(value).__name__} as a JSON attribute")


def _local_path(store) -> str | None:
    if isinstance(store, (str, os.PathLike)):
        s = os.fspath(store)
        if not _is_url(s):
            return s[len("file://"):] if s.startswith("file://") else s
    return None


def _open_for_write(path: str, storage_options=None) -> zarr.Group:
    """An empty group at ``path`` flagged ``complete: false``, replacing what is there.

    When a group is being replaced, its flag is turned off first and its root metadata
    deleted last, so a reader during the replacement never sees a store that claims to be
    complete with parts missing.
    """
    if _is_url(path):
        import fsspec

        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        store = zarr.storage.FsspecStore.from_url(path, storage_options=storage_options,
                                                  read_only=False)
        if fs.exists(f"{root}/zarr.json"):
            try:
                group = zarr.open_group(store=store, mode="r+")
            except (zarr.errors.GroupNotFoundError, zarr.errors.ContainsArrayError):
                group = None
            if group is not None:
                if group.attrs.get("complete") is True:
                    _keep_previous(fs, root)
                group.attrs["complete"] = False
                for child in fs.ls(root, detail=False):
                    if child.rstrip("/").rsplit("/", 1)[-1] != "zarr.json":
                        fs.rm(child, recursive=True)
                group.attrs.put({"complete": False})
                return group
        if fs.exists(root):
            fs.rm(root, recursive=True)
        group = zarr.open_group(store=store, mode="w")
        group.attrs["complete"] = False
        return group
    group = zarr.open_group(path, mode="w")
    group.attrs["complete"] = False
    return group


def atomic_group(path, *, storage_options=None, write=None):
    """Create a zarr group at ``path`` by calling ``write(group)``, atomically where possible.

    Local paths: written to ``<path>.tmp-<host>-<pid>-<uuid>`` and renamed over ``path``; the
    old store is removed only after the new one is complete. Partial siblings that killed
    writers on this host left behind (their process is gone) are removed after a successful
    write. Remote URLs (no rename on object stores): written in place with ``complete`` set
    last; a complete store being replaced is first copied to ``<path>.previous`` (server-side
    on object stores), which is deleted once the new store is complete — so a writer killed
    mid-way loses nothing: the previous output stays readable there.
    """
    local = _local_path(path)
    if local is None:
        group = _open_for_write(os.fspath(path), storage_options)
        group.attrs["complete"] = False
        write(group)
        group.attrs["complete"] = True
        drop_previous(os.fspath(path), storage_options)
        return
    target = Path(local)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{_writer_tag()}")
    try:
        group = zarr.open_group(str(tmp), mode="w")
        group.attrs["complete"] = False
        write(group)
        group.attrs["complete"] = True
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


PREVIOUS_SUFFIX = ".previous"


def _keep_previous(fs, root: str) -> None:
    """Copy the complete store at ``root`` to ``<root>.previous`` before it is rewritten in place.

    An older ``.previous`` (from a rewrite that was interrupted after the store it replaced had
    become complete again) is replaced: ``root`` is complete now, so it is the newer output.
    """
    backup = root.rstrip("/") + PREVIOUS_SUFFIX
    if fs.exists(backup):
        fs.rm(backup, recursive=True)
    logger.info("keeping the previous output %s as %s until the rewrite completes", root, backup)
    fs.copy(root.rstrip("/"), backup, recursive=True)


def drop_previous(path: str, storage_options=None) -> None:
    """Delete ``<path>.previous`` after ``path`` has been rewritten completely (URLs only)."""
    if not _is_url(path):
        return
    import fsspec

    fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
    backup = root.rstrip("/") + PREVIOUS_SUFFIX
    if fs.exists(backup):
        fs.rm(backup, recursive=True)


def _writer_tag() -> str:
    """``<host>-<pid>-<random>``: lets a later write tell an abandoned sibling from a live one."""
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
    """Delete ``<target>.tmp-*`` / ``.old-*`` siblings whose writer (on this host) has died.

    Siblings of writers on other hosts, of live processes, or in an older naming scheme are
    left alone: they may be a write under way. ``target`` is complete when this runs, so an
    ``.old-*`` copy is no longer the only complete one.
    """
    host = socket.gethostname().replace("-", "_") or "host"
    for sib in target.parent.iterdir():
        for kind in (".tmp-", ".old-"):
            prefix = f"{target.name}{kind}"
            if not sib.name.startswith(prefix):
                continue
            parts = sib.name[len(prefix):].split("-")
            if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
                continue
            if int(parts[1]) != os.getpid() and not _pid_alive(int(parts[1])):
                logger.info("removing %s left by an interrupted write", sib)
                shutil.rmtree(sib, ignore_errors=True)


def save_estimator(est, store, *, storage_options=None) -> None:
    """Write a fitted estimator to a zarr group (see module docstring)."""
    from .. import __version__

    if not est.__sklearn_is_fitted__():
        raise ValueError(f"{type(est).__name__} is not fitted; call fit before save")
    params = {}
    for name, value in est.get_params(deep=False).items():
        try:
            params[name] = _jsonable(value)
        except TypeError as err:
            raise TypeError(
                f"parameter {name}={value!r} of {type(est).__name__} cannot be saved: {err}"
            ) from None
    arrays, lazy, scalars = {}, {}, {}
    for name, value in est._state_to_save().items():
        if isinstance(value, da.Array):
            lazy[name] = value
        elif isinstance(value, np.ndarray) and value.ndim > 0:
            arrays[name] = value
        else:
            try:
                scalars[name] = _jsonable(value)
            except TypeError:
                logger.warning("not saving attribute %s (%s)", name, type(value).__name__)

    def write(group: zarr.Group):
        group.attrs.update(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "scalepca_version": __version__,
                "class": f"{type(est).__module__}:{type(est).__qualname__}",
                "params": params,
                "scalars": scalars,
                "arrays": sorted(arrays),
                "lazy_arrays": sorted(lazy),
                # memory order changes BLAS summation order: keep it, so a loaded model's
                # transform is bitwise the fitted one's
                "fortran_order": sorted(
                    n for n, v in arrays.items()
                    if v.ndim > 1 and v.flags.f_contiguous and not v.flags.c_contiguous
                ),
            }
        )
        for name, value in arrays.items():
            group.create_array(name, data=np.ascontiguousarray(value))
        for name, value in lazy.items():
            regular_chunks(value).to_zarr(group.store, component=_component(group, name),
                                          compute=True)

    atomic_group(store, storage_options=storage_options, write=write)


def _component(group: zarr.Group, name: str) -> str:
    return f"{group.path}/{name}".lstrip("/")


def _interrupted_siblings(store) -> list[str]:
    local = _local_path(store)
    if local is None:
        return []
    target = Path(local)
    if not target.parent.is_dir():
        return []
    return sorted(
        str(p) for p in target.parent.iterdir()
        if p.name.startswith(f"{target.name}.tmp-") or p.name.startswith(f"{target.name}.old-")
    )


def regular_chunks(arr: da.Array) -> da.Array:
    """Rechunk ``arr`` so every chunk but the last along each axis has the same size.

    Zarr arrays have one chunk shape; writing dask blocks of other sizes would make two
    workers write into the same zarr chunk. The rechunk moves blocks between workers only.
    """
    for ax, c in enumerate(arr.chunks):
        if any(x != c[0] for x in c[:-1]) or c[-1] > c[0]:
            arr = arr.rechunk({ax: max(c)})
    return arr


def load(store, *, storage_options=None):
    """Load an estimator written by ``save``; lazy arrays come back as dask arrays.

    Raises
    ------
    FileNotFoundError
        No store at ``store``.
    ValueError
        The store is not a scalepca model, or it is incomplete (an interrupted write).
    """
    try:
        group = open_zarr_node(store, storage_options=storage_options)
    except FileNotFoundError:
        left = _interrupted_siblings(store)
        if left:
            raise FileNotFoundError(
                f"no model store at {os.fspath(store)!r}; an interrupted save left "
                f"{', '.join(map(repr, left))} (a complete previous model, if any, is the "
                "'.old-*' one)"
            ) from None
        raise
    attrs = dict(group.attrs) if isinstance(group, zarr.Group) else {}
    if attrs.get("format") != FORMAT:
        raise ValueError(f"{os.fspath(store)!r} is not a scalepca model store")
    if not attrs.get("complete", False):
        raise ValueError(
            f"{os.fspath(store)!r} is an incomplete model store (its write was interrupted); "
            f"fit and save again{previous_hint(store)}"
        )
    module, qualname = attrs["class"].split(":")
    cls = getattr(importlib.import_module(module), qualname)
    est = cls(**attrs["params"])
    state = dict(attrs["scalars"])
    fortran = set(attrs.get("fortran_order", ()))
    for name in attrs["arrays"]:
        value = group[name][...]
        state[name] = np.asfortranarray(value) if name in fortran else value
    for name in attrs["lazy_arrays"]:
        state[name] = da.from_zarr(group[name])
    est._restore_state(state)
    return est


def write_array(arr, store, *, name: str = "scores", storage_options=None, attrs=None) -> None:
    """Write a lazy result (dask array or dask-backed DataArray) chunk by chunk from the workers.

    The store is written atomically (see :func:`atomic_group`); nothing is gathered on the
    client. xarray results are written with ``to_zarr`` so coordinates come along.
    """
    import xarray as xr

    def write(group: zarr.Group):
        group.attrs.update({"format": "scalepca-output", **json.loads(json.dumps(attrs or {}))})
        if isinstance(arr, xr.DataArray):
            out = arr
            if out.chunks is not None:
                out = out.copy(data=regular_chunks(out.data))
            out.to_dataset(name=name).to_zarr(group.store, group=group.path or None, mode="a",
                                              consolidated=False)
        else:
            a = arr if isinstance(arr, da.Array) else da.from_array(np.asarray(arr))
            regular_chunks(a).to_zarr(group.store, component=_component(group, name),
                                      compute=True)

    atomic_group(store, storage_options=storage_options, write=write)
