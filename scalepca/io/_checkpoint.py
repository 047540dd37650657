"""Checkpoints of iterative fits: atomic commits of small state in a local zarr group.

A checkpoint is a directory (a zarr v3 group) on a local or shared POSIX file system.
Each commit is a subgroup ``state_<k>`` (k = iterations done) holding NumPy arrays and a
JSON ``state`` attribute. It is written by the package's one atomic writer
(:func:`scalepca.io._store.renamed_into_place`): under a ``.tmp-`` sibling name with
``complete = true`` set last, then renamed into place, a replaced commit moved aside
first. A process killed at any moment (SIGKILL included) leaves either the previous
commits untouched or a new complete one, never a half-written commit under a final name.
Readers take the newest commit that is complete and readable and skip the rest (a
damaged commit falls back to an older one; a commit moved aside by a writer killed
mid-replacement is still found).

Every commit carries a *fingerprint* of the problem: every parameter that changes the
result and a sketch of the data (:mod:`scalepca.io._fingerprint`); a fit refuses a
checkpoint whose fingerprint differs from its own, naming the first differing key, and
leaves it untouched.

Estimators whose state includes large arrays (RobustPCA's n1 × n2 matrix) keep them
as sibling zarr arrays of the same group (:meth:`CheckpointStore.create`,
:meth:`array`) and refer to them by name in the commit's attributes.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from ._fs import CHECKPOINT, local_path, store_state
from ._store import renamed_into_place

logger = logging.getLogger(__name__)

COMMIT_PREFIX = "state_"


def commit_name(k: int) -> str:
    """Directory name of the commit after ``k`` iterations."""
    return f"{COMMIT_PREFIX}{int(k):06d}"


def check_checkpoint_path(value, name: str = "checkpoint") -> None:
    """TypeError unless ``value`` is None or a path (metadata only, nothing is
    created)."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path or None; got {value!r}")


def check_checkpoint_target(path, what: str = "checkpoint") -> None:
    """``FileExistsError`` unless ``path`` is absent, an empty folder or a
    checkpoint."""
    st = store_state(path)
    if not st.exists or st.empty or st.kind == CHECKPOINT:
        return
    raise FileExistsError(
        f"{what} {os.fspath(path)!r} holds {st.describe()}, not a scalepca "
        "checkpoint; scalepca never writes into it: choose another path"
    )


class CheckpointStore:
    """A local zarr group holding commits (and, optionally, large state arrays).

    Parameters
    ----------
    path : str or path-like
        Local directory (``file://`` URLs accepted). Object stores are refused: the
        commit relies on an atomic directory rename. It must not exist, be an empty
        folder, or be a checkpoint (``format: scalepca-checkpoint``); anything else
        there (a folder of other files, a data or model store) is refused with
        ``FileExistsError``, never written into.
    what : str
        How the store is called in error messages.
    """

    def __init__(self, path, *, what: str = "checkpoint"):
        import zarr

        local = local_path(path)
        if local is None:
            raise ValueError(
                f"{what} {os.fspath(path)!r}: only local paths are supported "
                "(the commit relies on an atomic directory rename)"
            )
        self.path = local
        check_checkpoint_target(self.path, what)
        os.makedirs(self.path, exist_ok=True)
        self.root = zarr.open_group(self.path, mode="a")
        if self.root.attrs.get("format") != CHECKPOINT:
            self.root.attrs["format"] = CHECKPOINT

    # -- large arrays beside the commits -----------------------------------------------
    def create(self, name: str, shape, chunks) -> None:
        """An uncompressed float64 array ``name`` (zero-filled), replacing any old one.

        Scratch arrays are rewritten and read back every few iterations on a local
        disk, and hold dense iterates that compress by 4–8 % at best:
        ``benchmarks/codecs.py`` measures "none" at 2–4× the encode and decode speed
        per core of every compressor.
        """
        from .._codecs import compressors

        self.root.create_array(
            name,
            shape=shape,
            chunks=chunks,
            dtype="float64",
            compressors=compressors("none"),
            fill_value=0.0,
            overwrite=True,
        )

    def has(self, name: str, shape, chunks) -> bool:
        """An array ``name`` of this shape whose zarr chunks match the dask blocks
        exists."""
        try:
            a = self.root[name]
        except KeyError:
            return False
        return tuple(a.shape) == tuple(shape) and tuple(a.chunks) == tuple(
            c[0] for c in chunks
        )

    def array(self, name: str, chunks=None):
        """The stored array ``name`` as a dask array (a unique graph name per call)."""
        import dask.array as da

        return da.from_zarr(
            self.path,
            component=name,
            chunks=chunks,
            name=f"ckpt-{name}-{uuid.uuid4().hex[:8]}",
        )

    def remove(self, name: str) -> None:
        shutil.rmtree(os.path.join(self.path, name), ignore_errors=True)

    def names(self, prefix: str) -> list[str]:
        """Sorted entries of the group starting with ``prefix`` (temporaries
        included)."""
        try:
            return sorted(n for n in os.listdir(self.path) if n.startswith(prefix))
        except FileNotFoundError:
            return []

    # -- commits -----------------------------------------------------------------------
    def commit(self, k: int, arrays: dict, attrs: dict) -> str:
        """Write one commit atomically; returns its name (``state_<k>``).

        ``arrays``: small NumPy arrays; ``attrs``: JSON-serialisable values (NumPy
        scalars are converted). An existing commit of the same ``k`` is replaced.
        """
        name = commit_name(k)

        def write(g):
            for key, value in arrays.items():
                g.create_array(key, data=np.ascontiguousarray(value))
            g.attrs["state"] = json.loads(json.dumps(attrs, default=_json_default))
            g.attrs["arrays"] = sorted(
                arrays
            )  # a commit missing one of them is damaged

        renamed_into_place(Path(self.path) / name, write)
        return name

    def latest(self, keys=None, valid=None):
        """``(attrs, arrays)`` of the newest complete, readable commit, or None.

        ``keys``: the arrays to read (None: all the arrays the commit was written with).
        ``valid(attrs)``: an extra check (e.g. that a large array the commit refers to
        exists); commits failing it are skipped like damaged ones.
        """
        import zarr

        for name in sorted(self.names(COMMIT_PREFIX), key=_newest_last, reverse=True):
            if ".tmp-" in name:
                continue
            try:
                g = zarr.open_group(os.path.join(self.path, name), mode="r")
                if not g.attrs.get("complete", False):
                    continue
                attrs = dict(g.attrs["state"])
                names = keys
                if names is None:
                    names = g.attrs.get("arrays")
                if names is None:
                    names = [key for key, _ in g.arrays()]
                arrays = {key: g[key][...] for key in names}
            except (
                Exception
            ) as err:  # a damaged commit is skipped, an older one is used
                logger.warning(
                    "skipping unreadable checkpoint commit %s: %s", name, err
                )
                continue
            if valid is not None and not valid(attrs):
                continue
            return attrs, arrays
        return None

    def prune(self, keep: set[str], prefixes=(COMMIT_PREFIX,)) -> None:
        """Delete entries starting with one of ``prefixes`` that are not in ``keep``
        (commits, left-over temporaries of killed writers, large arrays no commit
        needs)."""
        for prefix in prefixes:
            for name in self.names(prefix):
                if name not in keep:
                    self.remove(name)


def _newest_last(name: str) -> tuple:
    """Sort key of commit entries, newest last; of a commit and the ``.old-`` copy a
    writer killed between its two renames left
    (:func:`~scalepca.io._store.renamed_into_place`), the commit itself is the newer."""
    return (name.split(".", 1)[0], "." not in name)


#: marks fingerprints that hold every result-changing parameter and a sketch of the data
FINGERPRINT_VERSION = 2


def check_fingerprint(stored: dict, now: dict, where: str = "the checkpoint") -> None:
    """ValueError naming the first key where the checkpoint's problem differs from this
    fit.

    Floats (also inside lists) are compared to 1e-9 relative (data statistics recomputed
    by another reduction tree differ in the last bits), a data sketch (keys ending in
    ``sketch``) as a vector to 1e-9 of its norm; everything else exactly, after JSON
    round-tripping as stored. A key the checkpoint lacks differs (``None`` there).
    """
    now = json.loads(json.dumps(now, default=_json_default))
    for key, value in now.items():
        old = stored.get(key)
        if key.endswith("sketch"):
            same = _same_vector(old, value)
            detail = (
                "the data differ from those it was written for (other values, "
                "missing entries, or rows or features in another order)"
            )
        else:
            same = _same_setting(old, value)
            detail = f"{old!r} there, {value!r} now"
        if not same:
            raise ValueError(
                f"{where} was written for a different problem ({key}: "
                f"{detail}); it is left untouched. Use another "
                "checkpoint path, or delete this one to start afresh"
            )


def _same_vector(old, value) -> bool:
    if not isinstance(old, list) or len(old) != len(value):
        return False
    a, b = np.asarray(old, dtype=np.float64), np.asarray(value, dtype=np.float64)
    return bool(
        np.linalg.norm(a - b) <= 1e-9 * max(np.linalg.norm(b), np.linalg.norm(a))
    )


def _same_setting(old, value) -> bool:
    if (
        isinstance(value, float)
        and isinstance(old, (int, float))
        and not isinstance(old, bool)
    ):
        return math.isclose(old, value, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(value, list) and isinstance(old, list):
        return len(old) == len(value) and all(
            _same_setting(a, b) for a, b in zip(old, value, strict=True)
        )
    return old == value


def array_digest(a) -> list:
    """A short numeric fingerprint of a small array: its size, sum and sum of
    squares."""
    a = np.asarray(a, dtype=np.float64)
    finite = a[np.isfinite(a)]
    return [int(a.size), float(finite.sum()), float(np.vdot(finite, finite))]


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
