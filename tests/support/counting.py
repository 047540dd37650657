"""Counting what a computation does: block reads of an array, and dask ``compute``
calls."""

from __future__ import annotations

import threading

import dask
import dask.array as da
import numpy as np
from dask.callbacks import Callback


class ReadCounter:
    """A NumPy array behind a ``__getitem__`` that counts reads, like a zarr store would
    see.

    ``da.from_array(counter, chunks=...)`` gives a dask array whose every block read
    is counted, so tests can assert how many passes over the data a fit makes:
    ``passes = counter.reads / number_of_blocks``.
    """

    def __init__(self, array: np.ndarray):
        self.array = array
        self.shape = array.shape
        self.dtype = array.dtype
        self.ndim = array.ndim
        self.reads = 0
        self._lock = threading.Lock()

    def __getitem__(self, key):
        with self._lock:
            self.reads += 1
        return self.array[key]


def counted_dask(array: np.ndarray, chunks):
    """(dask array over a :class:`ReadCounter`, the counter)."""
    counter = ReadCounter(array)
    arr = da.from_array(counter, chunks=chunks, asarray=False, fancy=False)
    counter.reads = 0  # from_array reads an empty slice to learn the block type
    return arr, counter


class ComputeCounter:
    """A dask scheduler that counts ``compute`` calls (each runs the synchronous
    scheduler)."""

    def __init__(self):
        self.count = 0

    def __call__(self, dsk, keys, **kwargs):
        self.count += 1
        return dask.get(dsk, keys, **kwargs)


class TaskCounter(Callback):
    """Counts the dask tasks run since the last :meth:`reset` (local schedulers)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _pretask(self, key, dsk, state):
        self.count += 1

    def reset(self):
        self.count = 0
