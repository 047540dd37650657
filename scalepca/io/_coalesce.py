"""How many store chunks one task reads: a zarr array as dask blocks of whole store
chunks, coalesced to about ``task_size`` bytes (the ``task_size`` of ``open_matrix``
and of a run config's ``data`` section)."""

from __future__ import annotations

import dask.array as da
import zarr

#: default bytes of data one task reads when a store's small chunks are coalesced
TASK_SIZE = "128MiB"


def _task_bytes(task_size) -> int | None:
    """``task_size`` (bytes, ``"128MiB"``, or ``None``: off) as bytes, checked."""
    if task_size is None:
        return None
    from dask.utils import parse_bytes

    if isinstance(task_size, bool) or not isinstance(task_size, (int, str)):
        raise TypeError(
            f"task_size must be bytes (an integer or a string like '128MiB') or "
            f"None; got {task_size!r}"
        )
    try:
        nbytes = parse_bytes(task_size)
    except ValueError as err:
        raise ValueError(
            f"task_size {task_size!r} is not a size in bytes ('128MiB')"
        ) from err
    if nbytes < 1:
        raise ValueError(f"task_size must be at least 1 byte; got {task_size!r}")
    return nbytes


def coalesced_rows(unit: int, n_rows: int, row_bytes: int, task_size) -> int:
    """Rows per task: the largest whole multiple of ``unit`` rows within ``task_size``
    bytes.

    ``unit`` is the store's row chunk (or shard): a task reads whole store chunks,
    never part of one, and a store chunk larger than ``task_size`` stays one task.
    ``task_size=None`` keeps ``unit``.
    """
    nbytes = _task_bytes(task_size)
    unit = max(1, min(int(unit), n_rows))
    if nbytes is None:
        return unit
    k = max(1, nbytes // max(1, unit * row_bytes))
    return min(n_rows, k * unit) if n_rows else unit


def _store_unit(z: zarr.Array) -> tuple:
    """The read unit of a zarr array: its shard shape when sharded, else its chunk
    shape."""
    return tuple(getattr(z, "shards", None) or z.chunks)


def open_zarr(
    z: zarr.Array,
    *,
    rows: int | None = None,
    task_size=TASK_SIZE,
    full_rows: bool = True,
) -> da.Array:
    """A 2-D zarr array as a dask array whose blocks are whole multiples of the store's
    chunks.

    Each dask task reads one region (``da.from_zarr`` with the coalesced chunks), and
    zarr reads the store chunks inside it, so a store of many small chunks makes few
    tasks: rows per block are the largest multiple of the store's row chunk within
    ``task_size`` bytes (:func:`coalesced_rows`). ``full_rows``: the columns in one
    block (the tall-skinny methods need whole rows; the store's column chunks are
    then read side by side, never split); otherwise the store's column chunking is
    kept. ``rows`` given: exactly that many rows per block (the user's choice, even
    if it splits store chunks).
    """
    n, d = z.shape
    unit_rows, unit_cols = _store_unit(z)
    cols = d if full_rows else unit_cols
    if rows is None:
        rows = coalesced_rows(unit_rows, n, cols * z.dtype.itemsize, task_size)
    return da.from_zarr(z, chunks=(rows, cols))
