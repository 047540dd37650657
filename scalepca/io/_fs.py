"""Local paths and fsspec URLs: which is which, how a store is opened (:func:`open_fs`,
with scalepca's defaults for ``s3://``), whether two overlap, what a path holds,
whether a store may be replaced there, and whether it can be written.

Every store scalepca writes says what it is in its ``format`` attribute
(:data:`KINDS`) and whether its write ended in ``complete``. The rule of every writer
(:func:`check_replace`): a path is written when it is free (absent or an empty
folder), when it holds an interrupted write of the same kind (``complete: false``:
nothing in it is a result), or — with ``overwrite`` — when it holds a complete store
of the same kind. Anything else (a folder of notes, a file, another kind of store, a
store of other software) is never replaced.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import zarr

MODEL = "scalepca-model"
OUTPUT = "scalepca-output"
DATASET = "scalepca-dataset"
CHECKPOINT = "scalepca-checkpoint"

#: ``format`` attribute → what the store is called in messages
KINDS = {
    MODEL: "scalepca model store",
    OUTPUT: "scalepca output store",
    DATASET: "scalepca dataset store",
    CHECKPOINT: "scalepca checkpoint",
}


def is_url(path) -> bool:
    """Whether ``path`` is an fsspec URL (``s3://``, ``local://``, …) rather than a
    local path (``file://`` URLs are local paths)."""
    from fsspec.core import split_protocol

    protocol, _ = split_protocol(os.fspath(path))
    return protocol not in (None, "file")


def local_path(path) -> str | None:
    """``path`` as a local path (``file://`` removed), or None for other URLs."""
    p = os.fspath(path)
    return None if is_url(p) else p.removeprefix("file://")


#: the botocore settings scalepca gives an ``s3://`` store unless its
#: ``storage_options.config_kwargs`` say otherwise (key by key), wherever a store is
#: opened (:func:`open_fs`): botocore's own wait 60 s for each connection attempt,
#: which makes an unreachable store minutes per request to report; "standard" retries
#: connection errors, timeouts and throttling answers (503 SlowDown) with jittered
#: exponential back-off; ``max_attempts`` counts the retries after the first request
S3_CONFIG = {
    "connect_timeout": 10,
    "read_timeout": 60,
    "retries": {"max_attempts": 4, "mode": "standard"},
}

#: the fsspec protocols that are s3fs (whose ``config_kwargs`` are botocore's)
_S3 = ("s3", "s3a")


def with_store_defaults(path, storage_options: dict | None) -> dict | None:
    """``storage_options`` with :data:`S3_CONFIG` filled in under ``config_kwargs``
    when ``path`` (or the first of a list of paths) is an ``s3://`` URL; the user's
    keys win, ``retries`` merged key by key. Other paths: unchanged."""
    from fsspec.core import split_protocol

    first = path[0] if isinstance(path, (list, tuple)) and path else path
    if not isinstance(first, (str, os.PathLike)):
        return storage_options
    protocol, _ = split_protocol(os.fspath(first))
    if protocol not in _S3:
        return storage_options
    options = dict(storage_options or {})
    given = options.get("config_kwargs") or {}
    if not isinstance(given, dict):
        return storage_options  # refused where the options are checked
    # copies all the way down: botocore writes into the ``retries`` it is given
    # (``total_max_attempts``), which would change the defaults of every later store
    merged = {**copy.deepcopy(S3_CONFIG), **copy.deepcopy(given)}
    if isinstance(given.get("retries"), dict):
        merged["retries"] = {**S3_CONFIG["retries"], **given["retries"]}
    options["config_kwargs"] = merged
    return options


def open_fs(path, storage_options: dict | None = None):
    """``(filesystem, path inside it)`` of a local path or fsspec URL, the way every
    store scalepca reads or writes is opened: an ``s3://`` store with
    :data:`S3_CONFIG` under the user's ``storage_options``
    (:func:`with_store_defaults`)."""
    import fsspec

    path = os.fspath(path)
    options = with_store_defaults(path, storage_options) or {}
    return fsspec.core.url_to_fs(path, **options)


def open_fsspec_store(path, storage_options: dict | None = None, *, read_only: bool):
    """A zarr ``FsspecStore`` at the URL ``path``, its filesystem opened as
    :func:`open_fs` opens it (zarr drives the store from its own event loop: it
    needs an asynchronous filesystem, which ``from_url`` makes)."""
    path = os.fspath(path)
    return zarr.storage.FsspecStore.from_url(
        path,
        storage_options=with_store_defaults(path, storage_options),
        read_only=read_only,
    )


def previous_hint(path) -> str:
    """The sentence telling where an interrupted in-place rewrite left the output it
    replaced."""
    p = os.fspath(path).rstrip("/")
    if not is_url(p):
        return ""
    return (
        "; the complete output it was replacing, if "
        f"there was one, is kept at {p + '.previous'!r}"
    )


def open_zarr_node(path, *, storage_options: dict | None = None):
    """Open a zarr array or group at a local path or fsspec URL for reading;
    ``FileNotFoundError`` if absent."""
    path = os.fspath(path)
    if is_url(path):
        try:
            fs, root = open_fs(path, storage_options)
        except ImportError as err:
            raise ImportError(
                f"opening {path!r} needs an fsspec backend that is "
                f"not installed ({err}); for s3:// URLs install the "
                "'s3' extra: pip install 'scalepca[s3]'"
            ) from err
        if not (
            fs.exists(f"{root}/zarr.json")
            or fs.exists(f"{root}/.zarray")
            or fs.exists(f"{root}/.zgroup")
        ):
            raise FileNotFoundError(f"no zarr store at {path!r}")
        store = open_fsspec_store(path, storage_options, read_only=True)
        return zarr.open(store=store, mode="r")
    if path.startswith("file://"):
        path = path[len("file://") :]
    if not Path(path).exists():
        raise FileNotFoundError(f"no zarr store at {path!r} (the path does not exist)")
    try:
        return zarr.open(path, mode="r")
    except (zarr.errors.NodeNotFoundError, FileNotFoundError) as err:
        raise FileNotFoundError(f"no zarr array or group at {path!r}") from err


def _key(path) -> tuple[str, str]:
    """``(where, normalised path)``: local paths and ``local://`` URLs resolved on
    this machine, other URLs by protocol and path."""
    from fsspec.core import split_protocol

    protocol, rest = split_protocol(os.fspath(path))
    if protocol in (None, "file", "local"):
        return "local", os.path.realpath(os.path.expanduser(rest))
    return protocol, rest.rstrip("/")


def overlaps(a, b) -> bool:
    """Whether paths or URLs ``a`` and ``b`` are the same location or one lies inside
    the other."""
    (wa, pa), (wb, pb) = _key(a), _key(b)
    if wa != wb:
        return False
    return (
        pa == pb
        or pa.startswith(pb.rstrip("/") + "/")
        or pb.startswith(pa.rstrip("/") + "/")
    )


def _how_placed(out: str, src: str) -> str:
    """How the overlapping normalised paths ``out`` and ``src`` lie: the same path,
    ``out`` inside ``src``, or ``out`` containing it."""
    if out == src:
        return "is"
    if out.startswith(src.rstrip("/") + "/"):
        return "lies inside"
    return "contains"


def check_apart(outputs, inputs) -> None:
    """ValueError when an output path equals, contains or lies inside an input path.

    ``outputs`` and ``inputs``: ``(what, path)`` pairs, named in the message as given.
    """
    for out_what, out in outputs:
        for in_what, src in inputs:
            if out is not None and src is not None and overlaps(out, src):
                how = _how_placed(_key(out)[1], _key(src)[1])
                raise ValueError(
                    f"{out_what} {os.fspath(out)!r} {how} {in_what} "
                    f"{os.fspath(src)!r}; write the output elsewhere"
                )


@dataclass(frozen=True)
class StoreState:
    """What a path holds (read from metadata only)."""

    exists: bool
    #: a folder or object prefix with nothing in it
    empty: bool = False
    #: a zarr array or group (zarr v3 ``zarr.json`` or v2 ``.zarray``/``.zgroup``)
    zarr: bool = False
    #: its ``format`` attribute (:data:`KINDS`), None if it has none
    kind: str | None = None
    #: its ``complete`` attribute; None if it has none
    complete: bool | None = None
    #: a file, not a folder
    file: bool = False
    #: the names inside a folder (local paths and URLs)
    members: tuple = ()

    def describe(self) -> str:
        if self.file:
            return "a file"
        if self.kind in KINDS:
            done = {True: "a complete ", False: "an incomplete ", None: "a "}[
                self.complete
            ]
            return f"{done}{KINDS[self.kind]}"
        if self.zarr:
            return "a zarr store that scalepca did not write (no 'format' attribute)"
        shown = ", ".join(self.members[:3]) + (", …" if len(self.members) > 3 else "")
        return f"a folder that is not a zarr store ({shown})"


def _attrs(text: str, v2: bool) -> dict:
    try:
        meta = json.loads(text)
    except ValueError:
        return {}
    return meta if v2 else meta.get("attributes", {}) or {}


def store_state(path, storage_options=None) -> StoreState:
    """What ``path`` holds: nothing, an empty folder, a file, a zarr store and its
    ``format`` and ``complete`` attributes, or other files (see :class:`StoreState`)."""
    local = local_path(path)
    if local is not None:
        if not os.path.lexists(local):
            return StoreState(exists=False)
        if not os.path.isdir(local):
            return StoreState(exists=True, file=True)
        members = tuple(sorted(os.listdir(local)))

        def read(name):
            with open(
                os.path.join(local, name), encoding="utf-8", errors="replace"
            ) as fh:
                return fh.read()
    else:
        fs, root = open_fs(path, storage_options)
        root = root.rstrip("/")
        if not fs.exists(root):
            return StoreState(exists=False)
        if fs.isfile(root):
            return StoreState(exists=True, file=True)
        members = tuple(
            sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False))
        )

        def read(name):
            return fs.cat_file(f"{root}/{name}").decode("utf-8", errors="replace")

    if not members:
        return StoreState(exists=True, empty=True)
    for meta, v2 in (("zarr.json", False), (".zattrs", True)):
        if meta in members:
            attrs = _attrs(read(meta), v2)
            complete = attrs.get("complete")
            return StoreState(
                exists=True,
                zarr=True,
                kind=attrs.get("format"),
                complete=complete if isinstance(complete, bool) else None,
                members=members,
            )
    zarr2 = ".zarray" in members or ".zgroup" in members
    return StoreState(exists=True, zarr=zarr2, members=members)


def check_replace(
    path,
    kind: str,
    *,
    overwrite: bool,
    storage_options=None,
    flag: str = "overwrite=True",
) -> StoreState:
    """Refuse to write a store of ``kind`` at ``path`` unless the rule above allows it.

    Raises ``FileExistsError`` naming what is there; ``flag`` is how the caller's
    interface says "replace it" (``overwrite=True``, ``--overwrite``,
    ``output.overwrite: true``). Returns the state found.
    """
    st = store_state(path, storage_options)
    if not st.exists or st.empty:
        return st
    where = os.fspath(path)
    if st.kind != kind:
        raise FileExistsError(
            f"{where!r} holds {st.describe()}, not a {KINDS[kind]}; scalepca "
            "never replaces it: write elsewhere, or remove it yourself"
        )
    if st.complete is False or overwrite:
        return st
    raise FileExistsError(
        f"{where!r} holds a complete {KINDS[kind]}; pass {flag} to replace it"
    )


def check_complete(node, path) -> None:
    """ValueError when the zarr ``node`` read from ``path`` carries
    ``complete: false``."""
    if node.attrs.get("complete") is False:
        raise ValueError(
            f"{os.fspath(path)!r} is incomplete: its write was interrupted (attribute "
            f"complete: false); write it again{previous_hint(path)}"
        )


#: object stores whose first path component is a bucket that must exist before a write
_BUCKETS = ("s3", "s3a", "gs", "gcs", "abfs", "az", "adl")


def write_problem(path, storage_options=None) -> str | None:
    """Why a store cannot be written at ``path``, found the way the write would go; or
    None.

    Local paths (and ``local://`` URLs): a folder is created and removed in the
    nearest existing parent (permission bits say nothing of read-only mounts or of
    ``/proc``). Other URLs: the bucket (first path component) must exist and be
    readable; write access itself cannot be known without writing an object, which
    this does not do.
    """
    from fsspec.core import split_protocol

    protocol, rest = split_protocol(os.fspath(path))
    if protocol in (None, "file", "local"):
        target = os.path.abspath(os.path.expanduser(rest))
        if os.path.exists(target) and not os.path.isdir(target):
            return f"{target!r} is a file; a zarr store is a folder"
        parent = target
        while not os.path.lexists(parent):
            up = os.path.dirname(parent)
            if up == parent:
                break
            parent = up
        if not os.path.isdir(parent):
            return f"{target!r} cannot be created: {parent!r} is not a folder"
        probe = os.path.join(parent, f".scalepca-probe-{uuid.uuid4().hex[:8]}")
        try:
            os.mkdir(probe)
            os.rmdir(probe)
        except OSError as err:
            return (
                f"{target!r} cannot be written: creating a folder in {parent!r} fails "
                f"({err.strerror or err})"
            )
        return None
    try:
        fs, root = open_fs(path, storage_options)
        bucket = root.strip("/").split("/", 1)[0]
        if fs.isfile(root.rstrip("/")):
            return f"{os.fspath(path)!r} is a file; a zarr store is a folder"
        if protocol in _BUCKETS and bucket and not fs.exists(bucket):
            return f"{os.fspath(path)!r} cannot be written: no bucket {bucket!r}"
    except ImportError:
        raise
    except (
        Exception
    ) as err:  # credentials, endpoint, permissions: what the write would meet
        return f"{os.fspath(path)!r} cannot be reached: {type(err).__name__}: {err}"
    return None
