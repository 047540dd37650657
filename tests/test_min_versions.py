"""What the lowest supported dask/distributed must do; ``.ci/run`` also runs this file
in a venv with the oldest versions ``pyproject.toml`` allows.

dask before 2026.1 handed ``persist`` under a custom scheduler (the CLI's progress
bar, ``cluster._ProgressScheduler``) to that scheduler's ``__call__``, i.e. computed
the blocks and gathered the whole array into the client process. 2026.1 asks the
scheduler for its own ``persist`` (which passes to ``Client.persist``: blocks stay on
the workers). The installable pair is dask + distributed 2026.1.1 (distributed
2026.1.0 pins dask 2025.12).
"""

from __future__ import annotations

import io

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Future, futures_of

import scalepca
from scalepca.app.cluster import connect, progress

from .conftest import low_rank_data

pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module")
def client():
    with connect(n_workers=2, threads_per_worker=1, processes=False, quiet=True) as c:
        yield c


def _on_workers(client, arr) -> None:
    """Every block of the persisted ``arr`` is a future held by a worker, none is in
    the client."""
    kinds = {type(v).__name__ for v in dict(arr.__dask_graph__()).values()}
    assert kinds == {Future.__name__}, f"the client holds {kinds}, not only futures"
    futures = futures_of(arr)
    assert len({f.key for f in futures}) == arr.npartitions
    who = client.who_has(futures)
    assert all(who[f.key] for f in futures), who


def test_persist_under_the_progress_bar_keeps_blocks_on_workers(client):
    # generated on the workers: nothing of X ever exists in this process
    X = da.random.default_rng(0).standard_normal((4000, 200), chunks=(500, 200))
    out = io.StringIO()
    with progress(client=client, stream=out, grace=0):
        Xp = X.persist()
        (Yp,) = dask.persist(X * 2.0)
        total = float((Yp - 2.0 * Xp).sum().compute())  # a compute still shows progress
    _on_workers(client, Xp)
    _on_workers(client, Yp)
    assert total == 0.0
    # not a terminal: one line per compute outside a fit (a bar on a terminal), so the
    # compute went through the progress scheduler, and the persists did not (no line for
    # them)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "] compute: 8 chunks in " in lines[0], lines


@pytest.mark.parametrize("cls", [scalepca.PCA, scalepca.PPCA])
def test_fit_with_persist_under_the_progress_bar(client, rng, cls):
    X = low_rank_data(rng, n=600, d=10, rank=3)
    with progress(client=client, stream=io.StringIO(), grace=0):
        est = cls(3, persist=True).fit(da.from_array(X, chunks=(150, 10)))
    # dense LAPACK reference: leading eigenvectors of the sample covariance
    evals, evecs = np.linalg.eigh(np.cov(X, rowvar=False))
    top = evecs[:, ::-1][:, :3]
    np.testing.assert_allclose(np.abs(est.components_ @ top), np.eye(3), atol=1e-10)
    np.testing.assert_allclose(est.mean_, X.mean(axis=0), rtol=1e-12)
    if cls is scalepca.PCA:
        np.testing.assert_allclose(est.explained_variance_, evals[::-1][:3], rtol=1e-10)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_with_the_oldest_tqdm(rng):
    """The bar of a pass (tqdm at its lowest allowed version): label, chunks, time,
    rate."""
    import re

    X = da.from_array(low_rank_data(rng, n=400, d=6, rank=2), chunks=(100, 6))
    out = _Terminal()
    with (
        dask.config.set(scheduler="threads"),
        progress(stream=out, client=None, grace=0),
    ):
        scalepca.PCA(2).fit(X)
    final = out.getvalue().split("\n")[0].rsplit("\r", 1)[-1]
    assert re.fullmatch(
        r"PCA pass 1 of 1 \(moments\): 100%\|\S+\| 4/4 chunks "
        r"\[\d\d:\d\d<00:00, +[\d,.]+ chunks/s\]",
        final.rstrip(),
    ), final
