"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import dask
import dask.array as da
import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


class ReadCounter:
    """A NumPy array behind a ``__getitem__`` that counts reads, like a zarr store would see.

    ``da.from_array(counter, chunks=...)`` gives a dask array whose every block read is counted,
    so tests can assert how many passes over the data a fit makes:
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


def arrays_in(obj):
    """The NumPy arrays inside a computed result (nested dicts, lists and tuples)."""
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from arrays_in(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from arrays_in(v)


@contextmanager
def recorded_results():
    """Run dask computes synchronously and collect what each returns to the client (a list)."""
    results = []

    def recording_get(dsk, keys, **kwargs):
        out = dask.get(dsk, keys, **kwargs)
        results.append(out)
        return out

    with dask.config.set(scheduler=recording_get):
        yield results


class ComputeCounter:
    """A dask scheduler that counts ``compute`` calls (each runs the synchronous scheduler)."""

    def __init__(self):
        self.count = 0

    def __call__(self, dsk, keys, **kwargs):
        self.count += 1
        return dask.get(dsk, keys, **kwargs)


@pytest.fixture
def raise_if_dask_computes():
    """Context factory: ``with raise_if_dask_computes(max_computes=0): ...``."""
    from contextlib import contextmanager

    @contextmanager
    def ctx(max_computes: int = 0):
        counter = ComputeCounter()
        with dask.config.set(scheduler=counter):
            yield counter
        if counter.count > max_computes:
            raise RuntimeError(
                f"dask computed {counter.count} times; at most {max_computes} allowed")

    return ctx


def low_rank_data(rng, n=600, d=24, rank=5, noise=0.3, offset=3.0):
    """Low rank + isotropic noise with a non-zero mean (exercises centring)."""
    A = rng.standard_normal((n, rank)) * np.linspace(5, 1, rank)
    B = np.linalg.qr(rng.standard_normal((d, rank)))[0].T
    return A @ B + offset + noise * rng.standard_normal((n, d))


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A single-node SLURM on loopback (tests/_slurm.py), for the session; skips, saying how to
    enable it, where the binaries are missing or the tests do not run as root.

    ``SLURM_CONF`` is set in this process's environment while it runs, so ``sbatch``,
    ``squeue`` and ``scancel`` — also those dask-jobqueue and the ``scalepca`` CLI call — talk
    to it. At the end every job is cancelled and the daemons are stopped.
    """
    import os

    from ._slurm import LoopbackSlurm, why_not

    reason = why_not()
    if reason:
        pytest.skip(reason)
    cluster = LoopbackSlurm(tmp_path_factory.mktemp("slurm"))
    old = os.environ.get("SLURM_CONF")
    try:
        cluster.start()
        os.environ.update(cluster.env)
        yield cluster
    finally:
        cluster.stop()
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
