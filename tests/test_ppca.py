"""Closed-form probabilistic PCA against the Tipping–Bishop formulas and
scikit-learn."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import PCA as SKPCA
from sklearn.exceptions import ConvergenceWarning

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
    np.testing.assert_allclose(
        ppca.components_ @ ppca.components_.T, np.eye(k), atol=1e-12
    )
    M = ppca.W_.T @ ppca.W_ + sigma2 * np.eye(k)
    np.testing.assert_allclose(
        ppca.posterior_covariance_, sigma2 * np.linalg.inv(M), rtol=1e-10
    )
    # posterior mean M⁻¹ Wᵀ (x − μ)
    Z = ppca.transform(data)
    np.testing.assert_allclose(Z, np.linalg.solve(M, ppca.W_.T @ Xc.T).T, atol=1e-10)
    np.testing.assert_allclose(
        ppca.inverse_transform(Z), Z @ ppca.W_.T + ppca.mean_, atol=1e-12
    )
    assert ppca.n_passes_ == 1


def test_agrees_with_sklearn_likelihood(data):
    ours = scalepca.PPCA(4).fit(da.from_array(data, chunks=(100, 20)))
    ref = SKPCA(4, svd_solver="full").fit(data)
    np.testing.assert_allclose(
        ours.get_covariance(), ref.get_covariance(), rtol=1e-8, atol=1e-12
    )
    np.testing.assert_allclose(
        ours.get_precision(), ref.get_precision(), rtol=1e-8, atol=1e-12
    )
    np.testing.assert_allclose(ours.score(data), ref.score(data), rtol=1e-8)
    ll = ours.score_samples(da.from_array(data, chunks=(100, 20)))
    assert isinstance(ll, da.Array)
    np.testing.assert_allclose(ll.compute(), ref.score_samples(data), rtol=1e-8)
    # PCA carries the same Gaussian model
    p = scalepca.PCA(4).fit(data)
    np.testing.assert_allclose(p.score(data), ref.score(data), rtol=1e-8)


def test_precision_is_inverse_covariance(data):
    ppca = scalepca.PPCA(3).fit(data)
    np.testing.assert_allclose(
        ppca.get_precision() @ ppca.get_covariance(), np.eye(20), atol=1e-10
    )


def test_sample_reproduces_the_model(data):
    ppca = scalepca.PPCA(4).fit(data)
    S = ppca.sample(200_000, random_state=0)
    np.testing.assert_allclose(S.mean(0), ppca.mean_, atol=0.05)
    C = np.cov(S, rowvar=False)
    assert (
        np.abs(C - ppca.get_covariance()).max()
        < 0.05 * np.abs(ppca.get_covariance()).max()
    )
    np.testing.assert_array_equal(
        ppca.sample(10, random_state=3), ppca.sample(10, random_state=3)
    )
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
    """Two worker processes with 600 MiB each (≈270 MiB is the bare worker) fit a 96
    MB zarr store; same answer as in memory."""
    from distributed import Client, LocalCluster

    X = low_rank_data(rng, n=120_000, d=100, rank=5, noise=1.0)  # 96 MB float64
    path = tmp_path / "x.zarr"
    da.from_array(X, chunks=(10_000, 100)).to_zarr(str(path))
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            memory_limit="600MiB",
            dashboard_address=":0",
            processes=True,
        ) as cluster,
        Client(cluster),
    ):
        Xd = scalepca.open_matrix(path)
        ppca = scalepca.PPCA(5).fit(Xd)
        Z = ppca.transform(Xd)
        zsum = Z.sum(axis=0).compute()
    ref = scalepca.PPCA(5).fit(X)
    np.testing.assert_allclose(
        ppca.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    np.testing.assert_allclose(ppca.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(zsum, ref.transform(X).sum(axis=0), atol=1e-6)


# -- the maximum-likelihood σ² (issue 18 item 5) ---------------------------------------
def _dense_ml(X, k):
    """Tipping & Bishop's ML estimate from numpy.linalg.eigvalsh of the (1/n)
    covariance: σ² the mean of the d − k smallest eigenvalues (zeros included), W's
    variances λ − σ²."""
    n, d = X.shape
    Xc = X - X.mean(0)
    lam = np.linalg.eigvalsh(Xc.T @ Xc / n)[::-1]
    return lam, lam[k:].sum() / (d - k)


def _dense_loglike(X, mean, C):
    """Mean Gaussian log-likelihood with a dense d × d covariance (LAPACK slogdet,
    solve)."""
    d = X.shape[1]
    Xc = X - mean
    logdet = np.linalg.slogdet(C)[1]
    quad = np.einsum("ij,ij->i", Xc, np.linalg.solve(C, Xc.T).T)
    return float(np.mean(-0.5 * (d * np.log(2 * np.pi) + logdet + quad)))


@pytest.mark.parametrize("n, d", [(30, 80), (400, 12)])
def test_noise_variance_is_the_ml_estimate_and_em_limit(rng, n, d):
    k = 3
    X = low_rank_data(rng, n=n, d=d, rank=k, noise=0.4)
    lam, sigma2_ml = _dense_ml(X, k)
    bessel = n / (n - 1)  # PPCA reports W and σ² in the sample-covariance convention
    cf = scalepca.PPCA(k).fit(da.from_array(X, chunks=(7, d)))
    np.testing.assert_allclose(cf.noise_variance_, sigma2_ml * bessel, rtol=1e-10)
    np.testing.assert_allclose(cf.explained_variance_, lam[:k] * bessel, rtol=1e-10)
    # the ML σ² maximises the likelihood of the ML model (W = U_k (Λ_k − σ²)^½) over σ²:
    # moving it by ±1 % lowers the (1/n) log-likelihood
    Xc = X - X.mean(0)
    U = np.linalg.eigh(Xc.T @ Xc / n)[1][:, ::-1][:, :k]

    def ll(s2):
        W = U * np.sqrt(lam[:k] - s2)
        return _dense_loglike(X, X.mean(0), W @ W.T + s2 * np.eye(d))

    assert ll(sigma2_ml) > max(ll(0.99 * sigma2_ml), ll(1.01 * sigma2_ml))
    # EM without missing data converges to the same σ², W Wᵀ and score (1e-6: EM's tol)
    em = scalepca.PPCA(k, solver="em", tol=1e-12, max_iter=2000).fit(X)
    assert em.converged_
    np.testing.assert_allclose(em.noise_variance_, cf.noise_variance_, rtol=1e-6)
    np.testing.assert_allclose(em.W_ @ em.W_.T, cf.W_ @ cf.W_.T, atol=1e-6 * lam[0])
    np.testing.assert_allclose(em.score(X), cf.score(X), rtol=1e-7)
    # and the score is the dense Gaussian log-likelihood under W Wᵀ + σ² I
    np.testing.assert_allclose(
        cf.score(X), _dense_loglike(X, cf.mean_, cf.get_covariance()), rtol=1e-10
    )


def _sst(weighted: bool):
    xr = pytest.importorskip("xarray")
    eofs_examples = pytest.importorskip("eofs.examples")
    sst = xr.open_dataset(eofs_examples.example_data_path("sst_ndjfm_anom.nc"))["sst"]
    if weighted:  # EOF weights √cos φ, applied to the field before the fit
        sst = sst * np.sqrt(np.cos(np.deg2rad(sst.latitude)))
    return sst


@pytest.mark.parametrize("weighted", [False, True])
def test_eofs_sst_closed_form_and_em_agree(weighted):
    """n = 50 winters ≤ d = 450 ocean points: the case where σ² used to be 9.9× too
    large."""
    sst = _sst(weighted)
    m = scalepca.open_matrix(sst, sample_dims="time")
    k = 5
    cf = scalepca.PPCA(k).fit(m)
    em = scalepca.PPCA(k, solver="em", tol=1e-12, max_iter=2000).fit(m)
    # dense NumPy reference on the ocean points
    X = sst.values.reshape(sst.shape[0], -1)
    X = X[:, ~np.isnan(X).any(axis=0)]
    n, d = X.shape
    assert n <= d
    _, sigma2_ml = _dense_ml(X, k)
    np.testing.assert_allclose(cf.noise_variance_, sigma2_ml * n / (n - 1), rtol=1e-10)
    np.testing.assert_allclose(em.noise_variance_, cf.noise_variance_, rtol=1e-6)
    np.testing.assert_allclose(em.score(m), cf.score(m), rtol=1e-6)
    ocean = cf._features_kept
    C = cf.get_covariance()[np.ix_(ocean, ocean)]
    np.testing.assert_allclose(cf.score(m), _dense_loglike(X, X.mean(0), C), rtol=1e-9)


def test_digits_agree_with_em_and_sklearn():
    from sklearn.datasets import load_digits

    X = load_digits().data  # n = 1797 > d = 64, 3 constant pixels
    cf = scalepca.PPCA(10).fit(X)
    ref = SKPCA(10, svd_solver="full").fit(X)
    # n > d: scikit-learn's noise variance is the ML one (its zero eigenvalues are
    # counted)
    np.testing.assert_allclose(cf.noise_variance_, ref.noise_variance_, rtol=1e-10)
    np.testing.assert_allclose(cf.score(X), ref.score(X), rtol=1e-10)
    em = scalepca.PPCA(10, solver="em", tol=1e-12, max_iter=3000).fit(X)
    np.testing.assert_allclose(em.noise_variance_, cf.noise_variance_, rtol=1e-6)
    np.testing.assert_allclose(em.score(X), cf.score(X), rtol=1e-7)


def _rank_deficient(solver):
    """digits (rank 61: 3 constant pixels) for the closed form, k = 63; for EM
    (hundreds of slow iterations on digits) a 200 × 12 matrix of rank 4 with a
    constant feature, k = 5."""
    if solver == "closed_form":
        from sklearn.datasets import load_digits

        return load_digits().data, 63, 60, {}
    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 4)) @ rng.standard_normal((4, 12)) + 3.0
    X[:, 5] = 1.0
    Xn = X + 0.01 * rng.standard_normal(X.shape)
    return X, 5, (Xn, 5), {"solver": "em", "max_iter": 100}


@pytest.mark.parametrize("solver", ["closed_form", "em"])
def test_rank_deficient_data_give_zero_noise_with_a_warning(solver):
    """Data of rank r ≤ k < d: the ML σ² is 0 and the model covariance singular. Fit
    warns; transform is the σ² → 0 limit of the posterior mean (W⁺ (x − μ)); the
    likelihood and the precision raise a clear error, before any compute."""
    X, k, below, kw = _rank_deficient(solver)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # EM's σ² creeps towards 0
        with pytest.warns(
            UserWarning, match=f"rank is at most n_components={k}"
        ) as rec:
            p = scalepca.PPCA(k, **kw).fit(X)
    assert any(w.filename == __file__ for w in rec)  # points at the caller's fit
    assert p.noise_variance_ == 0.0
    Z = p.transform(X)
    assert np.isfinite(Z).all()
    np.testing.assert_allclose(
        Z, (X - p.mean_) @ np.linalg.pinv(p.W_).T, atol=1e-8 * np.abs(Z).max()
    )
    np.testing.assert_allclose(p.inverse_transform(Z), X, atol=1e-6 * np.abs(X).max())
    assert np.isfinite(p.get_covariance()).all()
    for fn in (
        lambda: p.score(X),
        lambda: p.score_samples(da.from_array(X)),
        p.get_precision,
    ):
        with pytest.raises(ValueError, match="covariance is singular"):
            fn()
    # below the rank (or with noise) σ² is positive and the likelihood finite
    ok = (
        scalepca.PPCA(below, **kw).fit(X)
        if isinstance(below, int)
        else scalepca.PPCA(below[1], **kw).fit(below[0])
    )
    assert ok.noise_variance_ > 0 and np.isfinite(ok.score(X))


def test_one_sample_is_refused_before_compute(raise_if_dask_computes):
    X = da.ones((1, 5))
    with (
        raise_if_dask_computes(0),
        pytest.raises(ValueError, match="at least 2 samples"),
    ):
        scalepca.PPCA(1).fit(X)
    with (
        raise_if_dask_computes(0),
        pytest.raises(ValueError, match="at least 2 samples"),
    ):
        scalepca.PPCA(1, solver="em").fit(X)


def test_ppca_is_not_a_pca(data):
    """PPCA's transform is a posterior mean: it shares PCA's fit but is no PCA
    subclass."""
    from sklearn.base import clone

    from scalepca.models.pca import _BaseSpectralPCA

    ppca = scalepca.PPCA(4)
    assert not isinstance(ppca, scalepca.PCA) and isinstance(ppca, _BaseSpectralPCA)
    assert not isinstance(scalepca.PCA(4), scalepca.PPCA)
    assert "whiten" not in ppca.get_params()
    assert clone(ppca).get_params() == ppca.get_params()


def test_standardize_is_the_model_of_the_standardised_data():
    """PPCA(standardize=True): transform, score_samples, covariance, sample and
    impute speak of x, the model of x / scale_ being scikit-learn's PCA after
    StandardScaler."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.decomposition import PCA as SKPCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = load_breast_cancer().data
    ref = make_pipeline(StandardScaler(), SKPCA(5)).fit(X)
    s = ref[0].scale_
    m = scalepca.PPCA(5, standardize=True).fit(da.from_array(X, chunks=(100, -1)))
    np.testing.assert_allclose(m.scale_, s, rtol=1e-12)
    ll_ref = ref[-1].score_samples(ref[0].transform(X)) - np.log(s).sum()
    np.testing.assert_allclose(np.asarray(m.score_samples(X)), ll_ref, rtol=1e-10)
    np.testing.assert_allclose(
        m.get_covariance(),
        ref[-1].get_covariance() * np.outer(s, s),
        rtol=1e-10,
        atol=1e-10 * np.abs(m.get_covariance()).max(),
    )
    np.testing.assert_allclose(
        m.get_precision() @ m.get_covariance(), np.eye(X.shape[1]), atol=1e-8
    )
    Xn = X.copy()
    Xn[0, 3] = np.nan
    filled = np.asarray(m.impute(Xn))
    np.testing.assert_array_equal(np.delete(filled[0], 3), np.delete(X[0], 3))
    draw = m.sample(20000, random_state=0)
    np.testing.assert_allclose(
        draw.std(axis=0), np.sqrt(np.diag(m.get_covariance())), rtol=0.03
    )
    with pytest.raises(ValueError, match="standardize=True needs solver='closed_form'"):
        scalepca.PPCA(5, solver="em", standardize=True).fit(X)


# -- float32 products and small quantities (the accuracy the Notes state) --------------
def _spiked_float32(snr: float, n=12000, d=50, seed=0):
    """Three strong directions (variances 3, 2, 1 × snr) over unit noise, stored in
    float32."""
    rng = np.random.default_rng(seed)
    W = np.linalg.qr(rng.standard_normal((d, 3)))[0] * np.sqrt(
        snr * np.array([3.0, 2.0, 1.0])
    )
    X = rng.standard_normal((n, 3)) @ W.T + rng.standard_normal((n, d)) + 10.0
    return X.astype(np.float32)


@pytest.mark.parametrize("snr", [1e4, 1e5])
def test_float32_small_quantities_keep_the_stated_accuracy(snr, caplog):
    """σ² and the North errors of the trailing modes against LAPACK on the float64
    copy of the same float32 values: within the Notes' figures with float32 products
    (each eigenvalue within 0.13 ε₃₂ λ₁, σ² within 0.01 ε₃₂ λ₁; the fit logs the
    accuracy left), to 1e-10 with ``scalepca.gram-precision: float64``."""
    import logging

    import dask

    from scalepca.linalg.moments import FLOAT32_EIGENVALUE_ERROR

    x = _spiked_float32(snr)
    X = da.from_array(x, chunks=(4000, x.shape[1]))
    n, d = x.shape
    xc = x.astype(np.float64) - x.astype(np.float64).mean(axis=0)
    ev = np.linalg.eigvalsh(xc.T @ xc / (n - 1))[::-1]
    sigma2 = ev[3:].mean()
    north = ev[:10] * np.sqrt(2.0 / n)
    eps32 = float(np.finfo(np.float32).eps)
    with caplog.at_level(logging.INFO, logger="scalepca.models.pca"):
        fast = scalepca.PPCA(3).fit(X)
        fast_pca = scalepca.PCA(10).fit(X)
    lam_err = np.abs(fast_pca.explained_variance_ - ev[:10])
    assert np.all(lam_err <= FLOAT32_EIGENVALUE_ERROR * eps32 * ev[0])
    assert abs(fast.noise_variance_ - sigma2) <= 0.01 * eps32 * ev[0]
    errors = scalepca.north_test(fast_pca).errors
    rel = np.abs(errors / north - 1)
    assert np.all(rel <= FLOAT32_EIGENVALUE_ERROR * eps32 * ev[0] / ev[:10])
    # the fit says how many digits its small variances kept
    notes = [
        r.getMessage()
        for r in caplog.records
        if "multiplied in float32" in r.getMessage()
    ]
    assert len(notes) == 2 and "gram-precision" in notes[0]
    caplog.clear()
    with (
        dask.config.set({"scalepca.gram-precision": "float64"}),
        caplog.at_level(logging.INFO, logger="scalepca.models.pca"),
    ):
        exact = scalepca.PPCA(3).fit(X)
        exact_pca = scalepca.PCA(10).fit(X)
    assert exact.noise_variance_ == pytest.approx(sigma2, rel=1e-10)
    np.testing.assert_allclose(scalepca.north_test(exact_pca).errors, north, rtol=1e-10)
    assert not [r for r in caplog.records if "multiplied in float32" in r.getMessage()]
