"""Appending the new rows' scores to the ``scores.zarr`` of a previous run
(``run --update``), without rewriting the old rows' scores.

The store's arrays along the sample dim (the scores, and for xarray data their sample
coordinate) are resized, and the new rows written into the region past the old end,
in dask blocks aligned on the store's chunks (no two tasks write one chunk). While
this happens the store is flagged ``complete: false`` with ``appending: {from, to}``;
:func:`finish` clears the flag once the model is saved, and records which rows which
model scored (``scored_by``). The one chunk that straddles the old end is written
again whole (its old rows with the values they had).
"""

from __future__ import annotations

import dask.array as da

from ..io._fs import OUTPUT, is_url, open_fsspec_store
from ..io._store import _consolidate
from .pipeline import UserError

NAME = "scores"


def _group(path: str, storage_options=None, mode: str = "r"):
    import zarr

    store = path
    if is_url(path):
        store = open_fsspec_store(path, storage_options, read_only=mode == "r")
    return zarr.open_group(store=store, mode=mode, use_consolidated=False)


def _along(group, sample_dim: str):
    """The arrays of the group whose first dim is the sample dim."""
    for _, arr in group.arrays():
        names = getattr(arr.metadata, "dimension_names", None) or ()
        if names and names[0] == sample_dim:
            yield arr


def check(path: str, n_seen: int, storage_options=None, sample_dim=None) -> dict | None:
    """Refuse a scores store that does not hold the model's rows; the pending append
    of an interrupted update (``None``: none)."""
    from ..io._fs import store_state

    if not store_state(path, storage_options).zarr:
        raise UserError(
            f"output.scores: no scores at {path} to append to (the previous run "
            "wrote none); set output.scores: false, or run without --update"
        )
    group = _group(path, storage_options)
    if group.attrs.get("format") != OUTPUT or NAME not in group:
        raise UserError(
            f"output.scores: {path} is not the scores store of a scalepca run; "
            "--update appends to the scores its previous run wrote"
        )
    rows = group[NAME].shape[0]
    pending = group.attrs.get("appending")
    if (
        pending is not None
        and n_seen in (pending["from"], pending["to"])
        and rows in (pending["from"], pending["to"])
    ):
        return dict(pending)
    if rows != n_seen or group.attrs.get("complete") is False:
        raise UserError(
            f"output.scores: {path} holds the scores of {rows:,} rows; the model "
            f"has seen {n_seen:,}. Run without --update to write them all again"
        )
    return None


def finish_interrupted_update(
    path: str, pending: dict, n_seen: int, storage_options=None, sample_dim=None
) -> None:
    """Finish an interrupted update's scores: drop its rows if the model was not saved,
    keep them if it was."""
    if n_seen == pending["to"]:
        finish(path, pending["from"], pending["to"], storage_options)
        return
    group = _group(path, storage_options, "r+")
    for arr in _along(group, sample_dim or "sample"):
        arr.resize((pending["from"],) + arr.shape[1:])


def _aligned(n0: int, m: int, chunk: int) -> tuple[int, ...]:
    """Row block sizes of ``m`` rows written from row ``n0``, cut at the store's
    chunks."""
    first = min(m, chunk - n0 % chunk)
    rest = m - first
    sizes = [first] + [chunk] * (rest // chunk) + [rest % chunk]
    return tuple(size for size in sizes if size)  # no empty block at either end


def append(path: str, scores, n0: int, storage_options=None, sample_dim=None) -> None:
    """Write ``scores`` (the new rows') after row ``n0``, flagged as an append under
    way."""
    group = _group(path, storage_options, "r+")
    m = int(scores.shape[0])
    attrs = dict(group.attrs)
    attrs.pop("consolidated_metadata", None)
    group.attrs.put(
        {**attrs, "complete": False, "appending": {"from": n0, "to": n0 + m}}
    )
    dim = sample_dim or "sample"
    chunk = group[NAME].chunks[0]
    for arr in _along(group, dim):
        arr.resize((n0 + m,) + arr.shape[1:])
    sizes = _aligned(n0, m, chunk)
    if sample_dim is None:
        target = group[NAME]
        data = da.asarray(scores).rechunk({0: sizes, 1: -1})
        da.store(data, target, regions=(slice(n0, n0 + m), slice(None)), lock=False)
        return
    ds = scores.chunk({sample_dim: sizes}).to_dataset(name=NAME)
    _append_coords(group, ds, sample_dim, n0)
    ds = ds.drop_vars(list(ds.coords))
    ds.attrs = {}
    ds.to_zarr(
        group.store,
        group=group.path or None,
        region={sample_dim: slice(n0, n0 + m)},
        mode="r+",
        consolidated=False,
        safe_chunks=False,
    )  # aligned above


def _append_coords(group, ds, sample_dim: str, n0: int) -> None:
    """Write the new rows' sample coordinates (times, …), encoded as the store's are (a
    region write of xarray leaves index coordinates out)."""
    import numpy as np
    import xarray as xr

    old = xr.open_zarr(group.store, group=group.path or None, consolidated=False)
    for name, coord in ds.coords.items():
        if coord.dims != (sample_dim,) or name not in group:
            continue
        var = coord.variable.copy(deep=False)
        var.encoding = {
            k: v
            for k, v in old[name].encoding.items()
            if k in ("units", "calendar", "dtype")
        }
        values = np.asarray(xr.conventions.encode_cf_variable(var, name=name).values)
        group[name][n0 : n0 + len(values)] = values.astype(
            group[name].dtype, copy=False
        )


def finish(path: str, n0: int, n1: int, storage_options=None) -> None:
    """Mark the scores complete after the model was saved: the rows ``n0 … n1`` are
    scored by the model of ``n1`` rows (recorded in ``scored_by``)."""
    group = _group(path, storage_options, "r+")
    attrs = dict(group.attrs)
    attrs.pop("appending", None)
    attrs.pop("consolidated_metadata", None)
    scored = list(attrs.get("scored_by") or [{"rows": [0, n0], "model_rows": n0}])
    scored.append({"rows": [n0, n1], "model_rows": n1})
    group.attrs.put({**attrs, "complete": True, "scored_by": scored})
    _consolidate(group)
