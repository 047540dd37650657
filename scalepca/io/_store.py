"""Model stores and output writing.

A fitted model is a zarr group: the estimator class, its parameters, the scalepca version and
scalar fitted values are attributes; NumPy fitted arrays are zarr arrays; lazy (dask) fitted
arrays are written chunk by chunk from the workers. No pickle.

Atomicity: a local store is written under a temporary sibling name and renamed into place, so a
process killed mid-write leaves only a ``.tmp-*`` directory that is never read as a model.
Every store (local or remote) also carries ``complete: true`` written last; a group without it
is refused by :func:`load`.

Nothing is replaced that is not a store of the kind being written (``format``: a model, an
output), and a complete one only with ``overwrite``: see :func:`scalepca.io._fs.check_replace`.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import numbers
import os
import re
import shutil
import socket
import uuid
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

from ._fs import MODEL, OUTPUT, check_apart, check_replace, local_path, previous_hint
from ._fs import is_url as _is_url
from ._open import open_zarr_node

logger = logging.getLogger(__name__)

FORMAT = MODEL
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
    return local_path(store) if isinstance(store, (str, os.PathLike)) else None


def _open_for_write(path: str, storage_options=None, kind=OUTPUT) -> zarr.Group:
    """An empty group at ``path`` flagged ``complete: false``, replacing what is there (a store
    of the same kind: :func:`atomic_group` checks that first).

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
                group.attrs.update({"format": kind, "complete": False})
                for child in fs.ls(root, detail=False):
                    if child.rstrip("/").rsplit("/", 1)[-1] != "zarr.json":
                        fs.rm(child, recursive=True)
                group.attrs.put({"format": kind, "complete": False})
                return group
        if fs.exists(root):
            fs.rm(root, recursive=True)
        group = zarr.open_group(store=store, mode="w", attributes={"format": kind,
                                                                    "complete": False})
        return group
    group = zarr.open_group(path, mode="w", attributes={"format": kind, "complete": False})
    return group


def atomic_group(path, *, storage_options=None, write=None, consolidate=False, kind=OUTPUT,
                 overwrite=False, flag="overwrite=True"):
    """Create a zarr group at ``path`` by calling ``write(group)``, atomically where possible.

    ``kind`` is the ``format`` the group gets (written first, with ``complete: false``); what
    is at ``path`` is replaced only if it is a store of that kind, and a complete one only with
    ``overwrite`` (:func:`~scalepca.io._fs.check_replace`; ``flag`` names that option in the
    caller's words). The check comes before anything is written.

    ``consolidate``: once the group is complete, its members' metadata are consolidated into
    the group's own metadata (``zarr.consolidate_metadata``), so readers (``xr.open_zarr``)
    find everything in one read.

    Local paths: written to ``<path>.tmp-<host>-<pid>-<uuid>`` and renamed over ``path``; the
    old store is removed only after the new one is complete. Partial siblings that killed
    writers on this host left behind (their process is gone) are removed after a successful
    write. Remote URLs (no rename on object stores): written in place with ``complete`` set
    last; a complete store being replaced is first copied to ``<path>.previous`` (server-side
    on object stores), which is deleted once the new store is complete — so a writer killed
    mid-way loses nothing: the previous output stays readable there.
    """
    check_replace(path, kind, overwrite=overwrite, storage_options=storage_options, flag=flag)
    local = _local_path(path)
    if local is None:
        group = _open_for_write(os.fspath(path), storage_options, kind)
        write(group)
        group.attrs["complete"] = True
        if consolidate:  # last: an attrs update afterwards would drop the consolidated view
            _consolidate(group)
        drop_previous(os.fspath(path), storage_options)
        return
    target = Path(local)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{_writer_tag()}")
    try:
        group = zarr.open_group(str(tmp), mode="w", attributes={"format": kind,
                                                                "complete": False})
        write(group)
        group.attrs["complete"] = True
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
    """Consolidate the metadata of ``group``'s members into its own (what xarray looks for)."""
    with warnings.catch_warnings():
        # zarr 3 notes that consolidated metadata are not yet in the v3 specification; xarray
        # and zarr-python read them, and xarray warns when they are missing
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part",
                                category=UserWarning)
        zarr.consolidate_metadata(group.store, path=group.path)


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


def save_estimator(est, store, *, storage_options=None, overwrite=False,
                   flag="overwrite=True") -> None:
    """Write a fitted estimator to a zarr group (see module docstring).

    A model store already at ``store`` is replaced only with ``overwrite``; anything else there
    (a folder of other files, another kind of store) never is: ``FileExistsError``.
    """
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
        elif isinstance(value, np.ndarray) and value.dtype == object:
            # feature names (scikit-learn keeps them as an object array): saved as JSON
            # strings, never as an object array (zarr would need a codec that can run code)
            scalars[name] = [str(v) for v in value.tolist()]
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

    atomic_group(store, storage_options=storage_options, write=write, kind=MODEL,
                 overwrite=overwrite, flag=flag)


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

    A store is data, never code: its ``class`` is looked up by class name among scalepca's own
    estimators (:data:`scalepca.config.METHODS`), nothing named in it is imported, its
    parameters are checked against that estimator's signature and its fitted state against
    the names, dtypes and shapes such a model has — all from metadata, before the estimator
    is built or any array is read.

    Raises
    ------
    FileNotFoundError
        No store at ``store``.
    ValueError
        The store is not a scalepca model, it is incomplete (an interrupted write), or its
        contents are not those of a scalepca model (another class, unknown or mistyped
        parameters, unexpected state names, arrays of a non-numeric dtype or of a shape the
        model cannot have).
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
    where = repr(os.fspath(store)) if isinstance(store, (str, os.PathLike)) else "the store"
    cls, params, scalars, arrays, lazy, fortran = _checked_contents(group, attrs, where)
    est = cls(**params)
    state = dict(scalars)
    for name in arrays:
        value = group[name][...]
        state[name] = np.asfortranarray(value) if name in fortran else value
    for name in lazy:
        state[name] = da.from_zarr(group[name])
    try:
        est._restore_state(state)
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(
            f"{where} is not a loadable scalepca model: its saved state does not make a "
            f"{cls.__name__} ({type(err).__name__}: {err})"
        ) from None
    return est


#: a saved state name: a plain identifier (fitted attributes end in "_"; private state starts
#: with one "_"), never a dunder name
_STATE_NAME = re.compile(r"(?:[A-Za-z][A-Za-z0-9_]*_|_[A-Za-z][A-Za-z0-9_]*)\Z")

#: scalar state giving the sizes a fitted array may have along any axis
_SIZE_SCALARS = ("n_samples_", "n_features_in_", "n_components_", "n_kernel_features_")


def _refuse(where: str, problem: str):
    raise ValueError(f"{where} is not a loadable scalepca model: {problem}")


def _checked_contents(group: zarr.Group, attrs: dict, where: str):
    """Check a model store from its metadata; return what :func:`load` builds the model from.

    Returns ``(cls, params, scalars, arrays, lazy, fortran)``; raises ``ValueError`` naming
    the first problem. Only attributes and array metadata are read.
    """
    from ..config import (
        METHODS,
        ConfigError,
        check_n_components_form,
        check_params,
        estimator_class_named,
    )

    spec = attrs.get("class")
    registered = ", ".join(v.rsplit(":", 1)[1] for v in METHODS.values())
    module, _, name = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    cls = None
    if module == "scalepca" or module.startswith("scalepca."):
        cls = estimator_class_named(name)
    if cls is None:
        _refuse(where, f"its class {spec!r} is not a scalepca estimator (a model store may "
                       f"only name one of {registered}; classes named in a store are never "
                       "imported)")

    params = attrs.get("params")
    if not isinstance(params, dict):
        _refuse(where, f"'params' must be a mapping; got {type(params).__name__}")
    params = dict(params)
    try:
        check_params(cls.__init__, params, "params")
        if "n_components" in params:  # its annotation allows strings: only "mle" is one
            check_n_components_form(cls, params["n_components"], "params")
    except ConfigError as err:
        _refuse(where, f"{err} (parameters of {cls.__name__})")

    scalars = attrs.get("scalars")
    if not isinstance(scalars, dict):
        _refuse(where, f"'scalars' must be a mapping; got {type(scalars).__name__}")
    lists = {}
    for key in ("arrays", "lazy_arrays", "fortran_order"):
        value = attrs.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            _refuse(where, f"{key!r} must be a list of names; got {value!r}")
        lists[key] = value
    arrays, lazy, fortran = lists["arrays"], lists["lazy_arrays"], set(lists["fortran_order"])
    names = [*scalars, *arrays, *lazy]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        _refuse(where, f"state {', '.join(map(repr, twice))} is saved more than once")
    init_params = set(inspect.signature(cls.__init__).parameters)
    bad = [n for n in names if not isinstance(n, str) or not _STATE_NAME.match(n)
           or hasattr(cls, n) or n in init_params]
    if bad:
        _refuse(where, f"state name(s) {', '.join(map(repr, bad))} cannot be fitted state of "
                       f"{cls.__name__} (saved names are fitted attributes ending in '_' or "
                       "private '_names' that are not methods, properties or parameters)")
    if not fortran <= set(arrays):
        _refuse(where, f"'fortran_order' names {sorted(fortran - set(arrays))}, which are not "
                       "saved arrays")

    sizes = {}
    for key in _SIZE_SCALARS:
        value = scalars.get(key)
        if value is None and key != "n_features_in_":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            _refuse(where, f"{key} must be a positive integer; got {value!r}")
        sizes[key] = value
    largest = max(sizes.values())
    d = sizes["n_features_in_"]
    for name in [*arrays, *lazy]:
        node = group.get(name)
        if not isinstance(node, zarr.Array):
            _refuse(where, f"the saved array {name!r} is missing or not an array")
        dtype = node.dtype
        dtype = getattr(dtype, "to_native_dtype", lambda dt=dtype: dt)()  # zarr ZDType
        if not isinstance(dtype, np.dtype) or dtype.kind not in "fiub":
            _refuse(where, f"array {name!r} has dtype {dtype}; fitted arrays are numbers")
        shape = tuple(node.shape)
        if name in lazy:
            n = sizes.get("n_samples_")
            if len(shape) != 2 or shape[1] != d or (n is not None and shape[0] != n):
                _refuse(where, f"lazy array {name!r} has shape {shape}; expected "
                               f"(n_samples_, n_features_in_) = ({n}, {d})")
        elif any(s > largest for s in shape) or math.prod(shape) > largest**2:
            _refuse(where, f"array {name!r} has shape {shape}; a fitted array has no axis longer "
                           f"than the model's largest size ({largest}, from "
                           f"{', '.join(f'{k}={v}' for k, v in sizes.items())}) and at most "
                           f"{largest}² values")
    shapes = {name: tuple(group[name].shape) for name in arrays}
    width = sizes.get("n_kernel_features_", d)  # kernel PCA: components live in feature space
    comp, mean, k = shapes.get("components_"), shapes.get("mean_"), sizes.get("n_components_")
    if comp is not None and (len(comp) != 2 or comp[1] != width or (k and comp[0] != k)):
        _refuse(where, f"components_ has shape {comp}; expected (n_components_, "
                       f"{'n_kernel_features_' if width != d else 'n_features_in_'}) = "
                       f"({k}, {width})")
    if mean is not None and mean != (width,):
        _refuse(where, f"mean_ has shape {mean}; expected ({width},)")
    return cls, params, scalars, arrays, lazy, fortran


def write_array(arr, store, *, name: str = "scores", storage_options=None, attrs=None,
                codec: str | None = None, overwrite=False, flag="overwrite=True",
                inputs=()) -> None:
    """Write a lazy result (dask array or dask-backed DataArray) chunk by chunk from the workers.

    ``codec`` names the compression, one of :data:`scalepca._codecs.CODECS` (default
    :data:`~scalepca._codecs.DEFAULT_CODEC`).

    The store is written atomically (see :func:`atomic_group`); nothing is gathered on the
    client. xarray results are written with ``to_zarr`` so coordinates come along; plain
    arrays get dimension names (``sample`` and ``mode`` for scores, ``sample`` and
    ``feature`` otherwise) so xarray can open them too. The store's metadata are consolidated
    at the end, so ``xr.open_zarr(store)`` opens it at once, without xarray's warning about a
    store lacking consolidated metadata.

    An output store already at ``store`` is replaced only with ``overwrite`` (``flag`` names
    that option in messages); anything else there never is (``FileExistsError``). ``inputs``:
    ``(what, path)`` of the stores the result is computed from; ``store`` must not be one of
    them, nor lie inside or contain one (``ValueError``, before anything is computed).

    Dask blocks are stored as they are into zarr chunks of the blocks' size (no rechunk at
    write time: ``regular_chunks`` has made them equal), so each task writes its own chunks.
    """
    import xarray as xr

    from .._codecs import compressors

    comp = compressors(codec)  # an unknown name fails before anything is written
    if isinstance(store, (str, os.PathLike)):
        check_apart([("the output", store)], inputs)

    def write(group: zarr.Group):
        group.attrs.update({"format": OUTPUT, **json.loads(json.dumps(attrs or {}))})
        if isinstance(arr, xr.DataArray):
            out = arr
            if out.chunks is not None:
                out = out.copy(data=regular_chunks(out.data))
            out.to_dataset(name=name).to_zarr(group.store, group=group.path or None, mode="a",
                                              consolidated=False,
                                              encoding={name: {"compressors": comp}})
        else:
            a = arr if isinstance(arr, da.Array) else da.from_array(np.asarray(arr))
            dims = ("sample", "mode" if name == "scores" else "feature")[: a.ndim]
            if a.ndim > 2:
                dims = None
            a = regular_chunks(a)
            # the array is created here, with its dimension names, and the workers write its
            # chunks: dask's to_zarr forwards dimension_names to zarr only on newer versions
            target = group.create_array(name, shape=a.shape, dtype=a.dtype,
                                        chunks=tuple(max(c[0], 1) for c in a.chunks),
                                        dimension_names=dims, compressors=comp)
            # da.store, not to_zarr: dask's to_zarr into an existing array rechunks to its own
            # "auto" chunks (one block for a small array), which need not align with the zarr
            # chunks and warns of data loss
            da.store(a, target, lock=False, compute=True)

    atomic_group(store, storage_options=storage_options, write=write, consolidate=True,
                 kind=OUTPUT, overwrite=overwrite, flag=flag)
