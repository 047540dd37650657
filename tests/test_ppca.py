"""Closed-form probabilistic PCA against the Tipping–Bishop formulas and scikit-learn."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import PCA as SKPCA

import scalepca

from .conftest import low_rank_data


@pytest.fixture
def data(rng):
    return low_rank_data(rng, n=800, d=20, rank=4, noise=0.5)


def test_closed_form_formulas(data):
    k = 4
    ppca = scalepca.PPCA(k).fit(da.from_array(data, chunks=(128, 20)))
    Xc = data - data.mean(0)
    w, V = np.linalg.eigh(Xc.T @ Xc / (len(data) - 1))
    w, V = w[::-1], V[:, ::-1]
    sigma2 = w[k:].mean()
    np.testing.assert_allclose(ppca.noise_variance_, sigma2, rtol=1e-10)
    W_ref = V[:, :k] * np.sqrt(w[:k] - sigma2)
    # W is determined up to the sign of each column (rotation R = I)
    np.testing.assert_allclose(np.abs(ppca.W_), np.abs(W_ref), atol=1e-10)
    np.testing.assert_allclose(ppca.components_ @ ppca.components_.T, np.eye(k), atol=1e-12)
    M = ppca.W_.T @ ppca.W_ + sigma2 * np.eye(k)
    np.testing.assert_allclose(ppca.posterior_covariance_, sigma2 * np.linalg.inv(M), rtol=1e-10)
    # posterior mean M⁻¹ Wᵀ (x − μ)
    Z = ppca.transform(data)
    np.testing.assert_allclose(Z, np.linalg.solve(M, ppca.W_.T @ Xc.T).T, atol=1e-10)
    np.testing.assert_allclose(ppca.inverse_transform(Z), Z @ ppca.W_.T + ppca.mean_, atol=1e-12)
    assert ppca.n_passes_ == 1


def test_agrees_with_sklearn_likelihood(data):
    ours = scalepca.PPCA(4).fit(da.from_array(data, chunks=(100, 20)))
    ref = SKPCA(4, svd_solver="full").fit(data)
    np.testing.assert_allclose(ours.get_covariance(), ref.get_covariance(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ours.get_precision(), ref.get_precision(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ours.score(data), ref.score(data), rtol=1e-8)
    ll = ours.score_samples(da.from_array(data, chunks=(100, 20)))
    assert isinstance(ll, da.Array)
    np.testing.assert_allclose(ll.compute(), ref.score_samples(data), rtol=1e-8)
    # PCA carries the same Gaussian model
    p = scalepca.PCA(4).fit(data)
    np.testing.assert_allclose(p.score(data), ref.score(data), rtol=1e-8)


def test_precision_is_inverse_covariance(data):
    ppca = scalepca.PPCA(3).fit(data)
    np.testing.assert_allclose(ppca.get_precision() @ ppca.get_covariance(), np.eye(20), atol=1e-10)


def test_sample_reproduces_the_model(data):
    ppca = scalepca.PPCA(4).fit(data)
    S = ppca.sample(200_000, random_state=0)
    np.testing.assert_allclose(S.mean(0), ppca.mean_, atol=0.05)
    C = np.cov(S, rowvar=False)
    assert np.abs(C - ppca.get_covariance()).max() < 0.05 * np.abs(ppca.get_covariance()).max()
    np.testing.assert_array_equal(ppca.sample(10, random_state=3), ppca.sample(10, random_state=3))
    lazy = ppca.sample(1000, random_state=1, chunks=300)
    assert isinstance(lazy, da.Array) and lazy.chunks[0] == (300, 300, 300, 100)
    again = ppca.sample(1000, random_state=1, chunks=300)
    np.testing.assert_array_equal(lazy.compute(), again.compute())


def test_full_rank_is_singular_for_likelihood(rng):
    X = rng.standard_normal((50, 5))
    ppca = scalepca.PPCA(5).fit(X)
    assert ppca.noise_variance_ == 0.0
    ref = SKPCA(5).fit(X)
    np.testing.assert_allclose(ppca.score(X), ref.score(X), rtol=1e-8)


def test_save_load_round_trip(tmp_path, data):
    ppca = scalepca.PPCA(4).fit(data)
    ppca.save(tmp_path / "m.zarr")
    back = scalepca.load(tmp_path / "m.zarr")
    assert type(back) is scalepca.PPCA
    np.testing.assert_array_equal(back.transform(data), ppca.transform(data))
    np.testing.assert_array_equal(back.score_samples(data), ppca.score_samples(data))


@pytest.mark.distributed
def test_on_local_cluster_with_small_memory_limit(tmp_path, rng):
    """Two worker processes with 600 MiB each (≈270 MiB is the bare worker) fit a 96 MB zarr
    store; same answer as in memory."""
    from distributed import Client, LocalCluster

    X = low_rank_data(rng, n=120_000, d=100, rank=5, noise=1.0)  # 96 MB float64
    path = tmp_path / "x.zarr"
    da.from_array(X, chunks=(10_000, 100)).to_zarr(str(path))
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="600MiB",
                      dashboard_address=":0", processes=True) as cluster, Client(cluster):
        Xd = scalepca.open_matrix(path)
        ppca = scalepca.PPCA(5).fit(Xd)
        Z = ppca.transform(Xd)
        zsum = Z.sum(axis=0).compute()
    ref = scalepca.PPCA(5).fit(X)
    np.testing.assert_allclose(ppca.explained_variance_, ref.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(ppca.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(zsum, ref.transform(X).sum(axis=0), atol=1e-6)
