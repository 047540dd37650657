"""Many workers on one machine: 16 worker processes (1 thread, 768 MiB each) give the
answers of 2 workers.

What the number of workers could change, and does not: the tree reductions of a pass
(the partials of 64 row blocks merged on whichever workers hold them), the factors every
task of a Krylov step shares (``passes.shared``: one key, fetched by 16 workers at
once), the sparse Gram pass's groups of CSR blocks (each group one task that reads its
own blocks) and ``run --update`` (a model's moments merged with those of the new rows).
The merge order is fixed by the graph, not by where tasks run, so the answers are equal
to rounding of the summation order at most (1e-12).

16 processes on a 2-core machine start in about half a minute, and the module took 8
minutes on a loaded machine: it is ``slow``.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import yaml

import scalepca
from scalepca.cli import EXIT_OK, main

from .support.compare import assert_same_pca

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

WORKERS = (2, 16)


@pytest.fixture(scope="module")
def clusters():
    """A 2-worker and a 16-worker local cluster of 1-thread worker processes."""
    from distributed import Client

    from scalepca.app.cluster import make_cluster

    made = {}
    try:
        for n in WORKERS:
            made[n] = make_cluster(
                {
                    "kind": "local",
                    "n_workers": n,
                    "threads_per_worker": 1,
                    "memory_limit": "768MiB",
                    "dashboard_address": ":0",
                }
            )
        with Client(made[16]) as client:
            client.wait_for_workers(16, timeout=120)
        yield made
    finally:
        for cluster in made.values():
            cluster.close()


def _fit_on_each(clusters, fit):
    """``fit()`` once on each cluster: {workers: result}."""
    from distributed import Client

    out = {}
    for n, cluster in clusters.items():
        with Client(cluster) as client:
            assert len(client.scheduler_info()["workers"]) == n
            out[n] = fit()
    return out


def _reference_variances(X, k):
    """LAPACK's eigenvalues of the sample covariance, largest first."""
    Xc = X - X.mean(axis=0)
    return np.linalg.eigvalsh(Xc.T @ Xc / (len(X) - 1))[::-1][:k]


def _data(n=4096, d=40, rank=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d)) * 2 + (
        rng.standard_normal((n, d))
    )


def test_tree_reduction_fit(clusters):
    X = _data()
    dX = da.from_array(X, chunks=(64, -1))  # 64 blocks: 4 per worker, a 2-level tree
    fits = _fit_on_each(clusters, lambda: scalepca.PCA(5).fit(dX))
    assert_same_pca(fits[16], fits[2])
    np.testing.assert_allclose(
        fits[16].explained_variance_, _reference_variances(X, 5), rtol=1e-10
    )


def test_krylov_wide_fit_with_shared_factors(clusters):
    X = _data(n=2048, d=300, rank=8, seed=1)
    dX = da.from_array(X, chunks=(64, -1))
    fits = _fit_on_each(
        clusters,
        lambda: scalepca.PCA(6, svd_solver="randomized", random_state=0).fit(dX),
    )
    assert_same_pca(fits[16], fits[2])
    assert fits[16].n_passes_ == fits[2].n_passes_ > 2  # several passes, each sharing V
    np.testing.assert_allclose(
        fits[16].explained_variance_, _reference_variances(X, 6), rtol=1e-8
    )


def test_sparse_block_groups(clusters):
    from scalepca.linalg.moments import block_groups

    rng = np.random.default_rng(2)
    S = sp.random(6400, 60, density=0.05, format="csr", random_state=rng) * 10
    dS = da.from_array(S, chunks=(100, -1), asarray=False)
    groups = block_groups(dS.numblocks[0])
    assert max(len(g) for g in groups) > 1  # blocks are read in groups
    fits = _fit_on_each(clusters, lambda: scalepca.PCA(5).fit(dS))
    assert_same_pca(fits[16], fits[2])
    np.testing.assert_allclose(
        fits[16].explained_variance_, _reference_variances(S.toarray(), 5), rtol=1e-10
    )


def test_run_update(clusters, tmp_path):
    """``run`` then ``run --update`` on a grown store, with each cluster joined through
    ``--scheduler``: the same updated model."""
    import zarr

    from scalepca.datasets import write_dataset

    full = _data(n=2400, d=16, seed=3)
    models = {}
    for n, cluster in clusters.items():
        path = tmp_path / f"x{n}.zarr"
        write_dataset(dask.array.from_array(full[:2000], chunks=(50, 16)), path)
        cfg = {
            "data": {"path": str(path), "task_size": None},
            "model": {"method": "pca", "n_components": 3},
            "output": {"store": str(tmp_path / f"out{n}")},
        }
        config = tmp_path / f"run{n}.yaml"
        config.write_text(yaml.safe_dump(cfg))
        address = cluster.scheduler_address
        assert main(["run", str(config), "-q", "--scheduler", address]) == EXIT_OK
        zarr.open_array(str(path), mode="r+").append(full[2000:])
        update = ["run", str(config), "--update", "-q", "--scheduler", address]
        assert main(update) == EXIT_OK
        models[n] = scalepca.load(tmp_path / f"out{n}" / "model.zarr")
    assert models[16].n_samples_seen_ == models[2].n_samples_seen_ == 2400
    assert_same_pca(models[16], models[2])
    np.testing.assert_allclose(
        models[16].explained_variance_, _reference_variances(full, 3), rtol=1e-10
    )
