"""How many store chunks one task reads: a zarr array as dask blocks of whole store
chunks, coalesced to about ``task_size`` bytes (the ``task_size`` of ``open_matrix``
and of a run config's ``data`` section)."""

from __future__ import annotations

import mmap
import sys
import threading
import weakref
from pathlib import Path

import dask.array as da
import numpy as np
import zarr
from dask.base import tokenize

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
    if not n_rows:
        return unit
    k = max(1, nbytes // max(1, unit * row_bytes))
    return min(n_rows, k * unit)


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
    name: str | None = None,
) -> da.Array:
    """A 2-D zarr array as a dask array whose blocks are whole multiples of the store's
    chunks.

    Each dask task reads one region, and the store chunks inside it, so a store of
    many small chunks makes few tasks: rows per block are the largest multiple of the
    store's row chunk within ``task_size`` bytes (:func:`coalesced_rows`).
    ``full_rows``: the columns in one block (the tall-skinny methods need whole rows;
    the store's column chunks are then read side by side, never split); otherwise the
    store's column chunking is kept. ``rows`` given: exactly that many rows per block
    (the user's choice, even if it splits store chunks). ``name``: the dask array's
    name (default: a hash of the array and its chunks).

    A task reads its chunk files straight into the block (:class:`_ChunkFiles`) when
    that gives what zarr's read gives; otherwise zarr reads the region
    (``da.from_zarr``).
    """
    n, d = z.shape
    unit_rows, unit_cols = _store_unit(z)
    cols = d if full_rows else unit_cols
    if rows is None:
        rows = coalesced_rows(unit_rows, n, cols * z.dtype.itemsize, task_size)
    files = _ChunkFiles.of(z)
    if files is None:
        return da.from_zarr(z, chunks=(rows, cols), name=name)
    return da.from_array(
        files,
        chunks=(rows, cols),
        name=name or "read-zarr-" + tokenize(z, rows, cols),
        asarray=False,
        fancy=False,
        meta=np.empty((0, 0), dtype=z.dtype),
    )


def _direct_chunk_dir(z: zarr.Array) -> Path | None:
    """The directory of ``z``'s chunk files when each is the chunk's values as they lie
    in memory, else None.

    That holds for a zarr v3 array in a local directory store (``LocalStore`` itself,
    no wrapper), on a regular chunk grid, with no storage transformer and the bytes
    codec alone (no compressor, filter, transpose or sharding), in the machine's byte
    order, of a native integer or float dtype, with one chunk across the columns (so a
    chunk's rows are consecutive bytes of its file, and of the block's memory).
    """
    from zarr.codecs import BytesCodec
    from zarr.core.chunk_grids import RegularChunkGrid
    from zarr.storage import LocalStore

    meta = z.metadata
    if (
        meta.zarr_format != 3
        or type(z.store) is not LocalStore
        or z.ndim != 2
        or not isinstance(meta.chunk_grid, RegularChunkGrid)
        or meta.storage_transformers
        or len(meta.codecs) != 1
        or type(meta.codecs[0]) is not BytesCodec
        or z.dtype.kind not in "iuf"
        or not z.dtype.isnative
        or z.chunks[1] < z.shape[1]
    ):
        return None
    endian = meta.codecs[0].endian
    if z.dtype.itemsize > 1 and (endian is None or endian.value != sys.byteorder):
        return None
    return Path(z.store.root, z.path).resolve()


class _ChunkFiles:
    """The rows of an uncompressed local zarr v3 array, each task's block taken from its
    chunk files: mapped (a block within one chunk file) or read with ``readinto`` into
    the block's memory (a block across chunk files: one copy, from the page cache).

    zarr's read of the same region makes a bytes object of each chunk file, decodes it
    into a chunk array and copies that into the region: three passes over the data
    where a read makes one, and a mapping none (see :func:`_map_rows`). A missing
    chunk file is a chunk of the fill value, as for zarr; an edge chunk's file holds
    the whole chunk shape, of which the rows inside the array are its first bytes. A
    chunk file of another size than the chunk's, and any index other than a block of
    rows, are read by zarr itself (its error, or its result).
    """

    def __init__(self, z: zarr.Array, root: Path):
        self.z = z
        self.root = root
        self.shape = z.shape
        self.dtype = z.dtype
        self.ndim = 2
        self.chunk_rows = z.chunks[0]
        self.fill_value = z.fill_value
        self.key = z.metadata.chunk_key_encoding

    @classmethod
    def of(cls, z: zarr.Array) -> _ChunkFiles | None:
        """The reader of ``z``, or None where zarr must read it (see
        :func:`_direct_chunk_dir`)."""
        root = _direct_chunk_dir(z)
        return None if root is None else cls(z, root)

    def __dask_tokenize__(self):
        return ("scalepca-chunk-files", tokenize(self.z))

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        index += (slice(None),) * (2 - len(index))
        if len(index) != 2 or not all(isinstance(i, slice) for i in index):
            return self.z[index]
        start, stop, step = index[0].indices(self.shape[0])
        if step != 1:
            return self.z[index]
        block = self.rows(start, max(start, stop))
        return block if index[1] == slice(None) else block[:, index[1]]

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a C-ordered array whose memory no other array uses:
        the chunk file mapped when they lie in one (:func:`_map_rows`), else read
        (:meth:`read_rows`)."""
        cr = self.chunk_rows
        if start < stop and start // cr == (stop - 1) // cr:
            chunk = start // cr
            mapped = _map_rows(
                self._path(chunk),
                self._chunk_bytes(),
                (start - chunk * cr) * self.shape[1] * self.dtype.itemsize,
                (stop - start, self.shape[1]),
                self.dtype,
            )
            if mapped is not None:
                return mapped
        return self.read_rows(start, stop)

    def _path(self, chunk: int) -> Path:
        return self.root / self.key.encode_chunk_key((chunk, 0))

    def _chunk_bytes(self) -> int:
        return self.chunk_rows * self.shape[1] * self.dtype.itemsize

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` read into memory of their own (see
        :class:`_BlockMemory`)."""
        d, cr = self.shape[1], self.chunk_rows
        flat = _BLOCK_MEMORY.take((stop - start) * d * self.dtype.itemsize)
        flat = flat.view(self.dtype)
        out = flat.reshape(stop - start, d)
        row = d * self.dtype.itemsize
        for i in range(start // cr, -(-stop // cr)):
            lo, hi = max(start, i * cr), min(stop, (i + 1) * cr)
            part = flat[(lo - start) * d : (hi - start) * d]
            if not self._read(i, (lo - i * cr) * row, part):
                part[...] = self.z[lo:hi].reshape(-1)
        return out

    def _read(self, chunk: int, offset: int, part: np.ndarray) -> bool:
        """Bytes ``offset:`` of chunk file ``chunk`` into ``part`` (the fill value when
        the file is missing); False when the file is not of the chunk's size."""
        try:
            fh = open(self._path(chunk), "rb", buffering=0)  # noqa: SIM115
        except FileNotFoundError:
            part[...] = self.fill_value
            return True
        into = memoryview(part).cast("B")
        with fh:
            if fh.seek(0, 2) != self._chunk_bytes():
                return False
            fh.seek(offset)
            done = 0
            while done < into.nbytes:
                got = fh.readinto(into[done:])
                if not got:
                    return False
                done += got
        return True


#: blocks mapped from chunk files at once, per process (:func:`_map_rows`; threads
#: reading at the same moment may pass it by one each): each keeps a file descriptor
#: open (Python's mapping holds a duplicate of the file's), so a process under the
#: common soft limit of 1,024 descriptors keeps three quarters of them for its sockets
#: and files; further blocks are read into memory instead
MAPPED_BLOCKS = 256

#: the mappings of the blocks in use: each leaves with the last array or view of its
#: block
_MAPPED: weakref.WeakSet = weakref.WeakSet()


def _map_rows(path: Path, size: int, offset: int, shape: tuple, dtype):
    """The rows of ``shape`` at byte ``offset`` of the chunk file ``path`` (of ``size``
    bytes) as an array over a private mapping of the file; None when the file is
    missing or not of ``size`` bytes, there are no bytes to map, or
    :data:`MAPPED_BLOCKS` are mapped already (the caller reads the rows instead).

    A mapping costs no copy: the block's pages are the page cache's own, faulted in
    when first read (16 at a time), where a read copies every byte into new memory
    (measured on a 100 MB chunk, one core, against its ``XᵀX``: the read 0.24–0.37 of
    its time, the mapping's page faults 0.06–0.14). The mapping is copy on write
    (``ACCESS_COPY``): writing to the block changes the block alone, never the file.
    It is released with the last array or view of the block. zarr writes a chunk file
    anew and renames it over the old one, so a block keeps the values it was mapped
    with when the store is written meanwhile; only a chunk file truncated in place
    (never by zarr) would fault (``SIGBUS``) where a read would have failed.
    """
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if not nbytes or len(_MAPPED) >= MAPPED_BLOCKS:  # no bytes: no file to map
        return None
    try:
        with open(path, "rb", buffering=0) as fh:
            if fh.seek(0, 2) != size:
                return None
            start = offset - offset % mmap.ALLOCATIONGRANULARITY
            mapping = mmap.mmap(
                fh.fileno(),
                offset - start + nbytes,
                access=mmap.ACCESS_COPY,
                offset=start,
            )
    except FileNotFoundError:
        return None
    _MAPPED.add(mapping)
    count = nbytes // dtype.itemsize
    return np.frombuffer(mapping, dtype, count, offset - start).reshape(shape)


class _BlockMemory:
    """The memory of the blocks read from chunk files: each reading thread's last block
    is reused once it is garbage.

    New memory costs its first touch: the kernel zeroes every page, a third of the
    time of reading a 100 MB block from the page cache. A thread keeps the memory of the
    last block it read, and reads its next block of that size into it when nothing
    references it any more: no array or view of it, no buffer export of it (each holds
    a reference to it, numpy's condition for freeing it). Otherwise the block gets new
    memory, which the thread keeps instead. Memory kept beyond the blocks in use: at
    most one block per thread that reads, between its tasks.
    """

    def __init__(self):
        self.local = threading.local()

    def take(self, nbytes: int) -> np.ndarray:
        """A flat uint8 array of ``nbytes``: this thread's last one when free, or new
        memory."""
        buffer = getattr(self.local, "buffer", None)
        # a free buffer's references: the thread's, this name's, getrefcount's argument
        if buffer is None or buffer.nbytes != nbytes or sys.getrefcount(buffer) != 3:
            buffer = self.local.buffer = np.empty(nbytes, dtype=np.uint8)
        return buffer


_BLOCK_MEMORY = _BlockMemory()
