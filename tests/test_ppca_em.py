"""PPCA by EM: agreement with the closed form, missing values, pass counting, kernels
vs dense."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from scipy.linalg import subspace_angles
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

import scalepca
from scalepca.linalg.em import (
    estep_block,
    loglike_rows_block,
    merge_estep,
    merge_observed_moments,
    mstep,
    observed_moments_block,
    posterior_mean_block,
)

from .conftest import low_rank_data
from .support.counting import counted_dask


def well_specified(rng, n=600, d=24, k=3, noise=0.3):
    """Rank-k signal + isotropic noise: the PPCA model holds, so EM converges
    quickly."""
    return low_rank_data(rng, n=n, d=d, rank=k, noise=noise)


def with_missing(rng, X, frac):
    Xm = X.copy()
    mask = rng.random(X.shape) < frac
    Xm[mask] = np.nan
    return Xm, mask


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


# -- agreement with the closed form ----------------------------------------------------
@pytest.mark.parametrize("init", ["random", "pca"])
def test_em_converges_to_closed_form(rng, init):
    X = well_specified(rng)
    cf = scalepca.PPCA(3).fit(X)
    em = scalepca.PPCA(
        3, solver="em", init=init, tol=1e-12, max_iter=500, random_state=0
    ).fit(da.from_array(X, chunks=(100, 24)))
    assert em.converged_ and em.solver_ == "em"
    # the target of the issue: W Wᵀ and σ² to 1e-6 relative
    assert rel(em.W_ @ em.W_.T, cf.W_ @ cf.W_.T) < 1e-6
    assert abs(em.noise_variance_ - cf.noise_variance_) / cf.noise_variance_ < 1e-6
    # the rotation is removed, so W_ itself and the rest agree too
    np.testing.assert_allclose(em.W_, cf.W_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(em.components_, cf.components_, atol=1e-6)
    np.testing.assert_allclose(em.mean_, cf.mean_, rtol=1e-10)
    np.testing.assert_allclose(
        em.explained_variance_, cf.explained_variance_, rtol=1e-6
    )
    np.testing.assert_allclose(
        em.explained_variance_ratio_, cf.explained_variance_ratio_, rtol=1e-6
    )
    np.testing.assert_allclose(em.score(X), cf.score(X), rtol=1e-9)
    np.testing.assert_allclose(em.transform(X), cf.transform(X), rtol=1e-5, atol=1e-6)


def test_em_iterations_are_few_with_px(rng):
    # parameter expansion removes plain EM's slow scale mode (thousands of iterations
    # here)
    X = well_specified(rng)
    em = scalepca.PPCA(3, solver="em", init="random", tol=1e-10, random_state=0).fit(X)
    assert em.n_iter_ <= 30


def test_loglike_is_non_decreasing_and_matches_dense(rng):
    X, _ = with_missing(rng, low_rank_data(rng, rank=5), 0.2)
    em = scalepca.PPCA(
        3, missing="em", init="random", tol=1e-9, max_iter=300, random_state=1
    ).fit(X)
    ll = em.loglike_
    assert len(ll) == em.n_iter_
    assert np.all(np.diff(ll) >= -1e-10 * np.abs(ll[1:]))


# -- kernels against dense per-row references ------------------------------------------
def dense_row_loglike(x, mean, W, sigma2):
    o = ~np.isnan(x)
    if not o.any():
        return 0.0
    C = W[o] @ W[o].T + sigma2 * np.eye(o.sum())
    return multivariate_normal(mean[o], C).logpdf(x[o])


def dense_posterior(x, mean, W, sigma2):
    o = ~np.isnan(x)
    k = W.shape[1]
    M = W[o].T @ W[o] + sigma2 * np.eye(k)
    Ez = np.linalg.solve(M, W[o].T @ (x[o] - mean[o]))
    return Ez, sigma2 * np.linalg.inv(M)


def model_params(rng, d=12, k=3):
    W = rng.standard_normal((d, k))
    mean = rng.standard_normal(d)
    return mean, W, 0.4


@pytest.mark.parametrize("frac", [0.0, 0.3])
def test_posterior_and_loglike_kernels_match_dense(rng, frac):
    mean, W, s2 = model_params(rng)
    X, _ = with_missing(rng, rng.standard_normal((40, 12)) * 2 + mean, frac)
    if frac:
        X[5] = np.nan  # a row with nothing observed
    Ez = posterior_mean_block(X, mean, W, s2)
    ll = loglike_rows_block(X, mean, W, s2)
    for i, x in enumerate(X):
        if np.isnan(x).all():
            assert ll[i] == 0.0 and np.isnan(Ez[i]).all()  # issue 18 item 8 (was 0)
            continue
        np.testing.assert_allclose(
            Ez[i], dense_posterior(x, mean, W, s2)[0], rtol=1e-10
        )
        np.testing.assert_allclose(ll[i], dense_row_loglike(x, mean, W, s2), rtol=1e-10)


def dense_em_step(X, mean, W, s2):
    """One plain EM step (Ilin & Raiko's per-feature M-step with the mean), row by
    row."""
    n, d = X.shape
    k = W.shape[1]
    A = np.zeros((d, k + 1, k + 1))
    b = np.zeros((d, k + 1))
    num, cnt = 0.0, 0
    posts = []
    for x in X:
        o = ~np.isnan(x)
        if not o.any():
            posts.append(None)
            continue
        Ez, S = dense_posterior(x, mean, W, s2)
        zt = np.append(Ez, 1.0)
        G = np.outer(zt, zt)
        G[:k, :k] += S
        A[o] += G
        b[o] += (x[o] - mean[o])[:, None] * zt
        posts.append((Ez, S))
    Wt = np.stack([np.linalg.solve(A[j], b[j]) for j in range(d)])
    Wn, mn = Wt[:, :k], mean + Wt[:, k]
    for x, post in zip(X, posts, strict=True):
        if post is None:
            continue
        Ez, S = post
        o = ~np.isnan(x)
        r = x[o] - Wn[o] @ Ez - mn[o]
        num += (r**2).sum() + np.einsum("ij,jk,ik->", Wn[o], S, Wn[o])
        cnt += o.sum()
    return Wn, mn, num / cnt


@pytest.mark.parametrize("frac", [0.0, 0.25])
def test_em_step_matches_dense_reference(rng, frac):
    mean, W, s2 = model_params(rng)
    X, _ = with_missing(
        rng, rng.standard_normal((60, 12)) @ np.diag(np.linspace(3, 1, 12)), frac
    )
    if frac:
        X[7] = np.nan
    # statistics merged over uneven blocks equal the whole-matrix statistics
    parts = [estep_block(X[a:b], mean, W, s2) for a, b in [(0, 13), (13, 40), (40, 60)]]
    st = merge_estep(merge_estep(parts[0], parts[1]), parts[2])
    W1, m1, v1 = mstep(st, mean, 3, expand=False)
    W2, m2, v2 = dense_em_step(X, mean, W, s2)
    np.testing.assert_allclose(W1, W2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m1, m2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(v1, v2, rtol=1e-9)
    ll = sum(dense_row_loglike(x, mean, W, s2) for x in X)
    np.testing.assert_allclose(st["ll"], ll, rtol=1e-10)


def test_px_step_is_the_reparametrised_em_step(rng):
    # PX-EM changes (W, μ) by the latent prior fit and nothing else: W_px = W L, μ_px =
    # μ + W m
    mean, W, s2 = model_params(rng)
    X, _ = with_missing(rng, rng.standard_normal((80, 12)) * 2, 0.2)
    st = estep_block(X, mean, W, s2)
    W1, m1, v1 = mstep(st, mean, 3, expand=False)
    W2, m2, v2 = mstep(st, mean, 3, expand=True)
    k = 3
    nrow = st["A"][k, k]
    mz = st["A"][:k, k] / nrow
    L = np.linalg.cholesky(st["A"][:k, :k] / nrow - np.outer(mz, mz))
    np.testing.assert_allclose(W2, W1 @ L, rtol=1e-12)
    np.testing.assert_allclose(m2, m1 + W1 @ mz, rtol=1e-12)
    assert v1 == v2


def test_observed_moments_merge_is_exact(rng):
    X, _ = with_missing(rng, rng.standard_normal((90, 7)) * 3 + 100.0, 0.3)
    X[4] = np.nan
    parts = [observed_moments_block(X[a:b]) for a, b in [(0, 10), (10, 55), (55, 90)]]
    mom = merge_observed_moments(merge_observed_moments(parts[0], parts[1]), parts[2])
    obs = ~np.isnan(X)
    mu = np.nanmean(X, axis=0)
    U = np.where(obs, X - mu, 0.0)
    U = U[obs.any(axis=1)]
    ref = mom["c"] * mom["r"] + mom["s"]
    np.testing.assert_allclose(ref / mom["c"], mu, rtol=1e-12)
    from scalepca.linalg.em import _shift

    shifted = _shift(mom, mu)
    np.testing.assert_allclose(shifted["U"], U.T @ U, rtol=1e-9, atol=1e-9)
    assert mom["n"] == 89 and mom["n_empty"] == 1


# -- missing values --------------------------------------------------------------------
def test_twenty_percent_missing_subspace_and_heldout_rmse(rng):
    X = well_specified(rng, n=800, d=30, k=4, noise=0.3)
    Xm, mask = with_missing(rng, X, 0.2)
    full = scalepca.PPCA(4).fit(X)
    em = scalepca.PPCA(4, missing="em", tol=1e-8).fit(
        da.from_array(Xm, chunks=(200, 30))
    )
    angle = np.degrees(subspace_angles(full.components_.T, em.components_.T).max())
    assert angle < 3.0  # measured 2.1° on this data (seed 12345)
    filled = em.impute(Xm)
    rmse_em = np.sqrt(np.mean((filled[mask] - X[mask]) ** 2))
    # baseline: mean-imputation, then PCA with the same rank, reconstruct
    mu = np.nanmean(Xm, axis=0)
    Xi = np.where(mask, mu, Xm)
    pca = scalepca.PCA(4).fit(Xi)
    rec = pca.inverse_transform(pca.transform(Xi))
    rmse_mean = np.sqrt(np.mean((rec[mask] - X[mask]) ** 2))
    assert rmse_em < 0.7 * rmse_mean
    assert rmse_em < 1.5 * 0.3  # close to the noise level itself
    np.testing.assert_array_equal(filled[~mask], X[~mask])


def test_transform_and_score_accept_missing_entries(rng):
    X = well_specified(rng)
    Xm, _ = with_missing(rng, X, 0.15)
    # a model fitted with missing="error" refuses NaN in NumPy input (scikit-learn's
    # check_estimators_nan_inf, issue 19); with missing="em" NaN entries are missing
    # values
    with pytest.raises(ValueError, match="NaN value"):
        scalepca.PPCA(3).fit(X).transform(Xm)
    for em in (
        scalepca.PPCA(3, missing="em").fit(X),
        scalepca.PPCA(3, missing="em").fit(Xm),
    ):
        Z = em.transform(Xm)
        ll = em.score_samples(Xm)
        mean, W, s2 = em.mean_, em.W_, em.noise_variance_
        for i in (0, 1, 17):
            np.testing.assert_allclose(
                Z[i], dense_posterior(Xm[i], mean, W, s2)[0], rtol=1e-9
            )
            np.testing.assert_allclose(
                ll[i], dense_row_loglike(Xm[i], mean, W, s2), rtol=1e-9
            )
        # complete rows: the closed-form projection and Gaussian likelihood
        full = ~np.isnan(Xm).any(axis=1)
        M = W.T @ W + s2 * np.eye(3)
        np.testing.assert_allclose(
            Z[full], (X[full] - mean) @ W @ np.linalg.inv(M), rtol=1e-9
        )


def test_missing_error_refuses_nan_in_lazy_input_too(rng):
    """A model fitted with missing="error" refuses NaN in dask input as it does in
    NumPy input (before, dask blocks took NaN as missing values and returned finite
    scores)."""
    X = well_specified(rng)
    Xm, _ = with_missing(rng, X, 0.15)
    lazy = da.from_array(Xm, chunks=(150, 24))
    model = scalepca.PPCA(3).fit(X)
    for result in (model.transform(lazy), model.score_samples(lazy)):
        with pytest.raises(ValueError, match="NaN value"):
            result.compute()
    clean = da.from_array(X, chunks=(150, 24))
    np.testing.assert_allclose(
        model.transform(clean).compute(), model.transform(X), rtol=1e-12
    )
    np.testing.assert_allclose(
        model.score_samples(clean).compute(), model.score_samples(X), rtol=1e-12
    )
    em = scalepca.PPCA(3, missing="em").fit(X)
    np.testing.assert_allclose(
        em.transform(lazy).compute(), em.transform(Xm), rtol=1e-12
    )
    np.testing.assert_allclose(
        em.score_samples(lazy).compute(), em.score_samples(Xm), rtol=1e-12
    )


def test_impute_is_lazy_and_keeps_kinds(rng, raise_if_dask_computes):
    Xm, mask = with_missing(rng, well_specified(rng), 0.1)
    Xd = da.from_array(Xm, chunks=(150, 24))
    em = scalepca.PPCA(3, missing="em").fit(Xd)
    with raise_if_dask_computes(0):
        out = em.impute(Xd)
        Z = em.transform(Xd)
        ll = em.score_samples(Xd)
    assert (
        isinstance(out, da.Array)
        and isinstance(Z, da.Array)
        and isinstance(ll, da.Array)
    )
    dense = em.impute(Xm)
    assert isinstance(dense, np.ndarray)
    np.testing.assert_allclose(out.compute(), dense)
    assert not np.isnan(dense).any()


def test_empty_rows_and_features_are_dropped_with_a_warning(rng):
    X = well_specified(rng)
    Xm, _ = with_missing(rng, X, 0.1)
    Xm[[3, 50]] = np.nan
    Xm[:, 7] = np.nan
    with pytest.warns(UserWarning) as rec:
        em = scalepca.PPCA(3, missing="em").fit(Xm)
    text = " ".join(str(w.message) for w in rec)
    assert "2 of 600 rows" in text and "1 of 24 features" in text
    assert em.n_samples_ == 598 and em.n_features_in_ == 24
    assert np.isnan(em.components_[:, 7]).all() and np.isnan(em.W_[7]).all()
    assert np.isnan(em.mean_[7])
    assert not np.isnan(np.delete(em.components_, 7, axis=1)).any()
    Z = em.transform(Xm)
    # a row with no observed value has nothing to project: NaN (issue 18 item 8; was 0)
    assert (
        np.isnan(Z[[3, 50]]).all() and np.isfinite(np.delete(Z, [3, 50], axis=0)).all()
    )
    ll = em.score_samples(Xm)
    assert ll[3] == 0.0 and np.isfinite(ll).all()
    filled = em.impute(Xm)
    assert (
        np.isnan(filled[:, 7]).all()
        and not np.isnan(np.delete(filled, 7, axis=1)).any()
    )
    # the same as fitting without the empty feature
    ref = scalepca.PPCA(3, missing="em").fit(
        np.delete(Xm, 7, axis=1)[~np.isnan(Xm).all(1)]
    )
    np.testing.assert_allclose(
        np.delete(em.W_, 7, axis=0), ref.W_, rtol=1e-8, atol=1e-10
    )
    C = em.get_covariance()
    assert (
        np.isnan(C[7]).all() and np.isfinite(np.delete(np.delete(C, 7, 0), 7, 1)).all()
    )


# -- passes, chunking, determinism -----------------------------------------------------
@pytest.mark.parametrize("frac", [0.0, 0.2])
def test_one_pass_per_iteration_counted_at_the_store(rng, frac):
    Xm, _ = with_missing(rng, well_specified(rng), frac)
    Xd, counter = counted_dask(Xm, chunks=(100, 24))
    em = scalepca.PPCA(
        3, solver="em", missing="em", init="random", tol=1e-8, random_state=0
    ).fit(Xd)
    assert em.n_iter_ >= 3
    assert em.n_passes_ == 1 + em.n_iter_
    assert counter.reads == Xd.numblocks[0] * (1 + em.n_iter_)


def test_persist_reads_the_store_once(rng):
    Xm, _ = with_missing(rng, well_specified(rng), 0.2)
    Xd, counter = counted_dask(Xm, chunks=(100, 24))
    em = scalepca.PPCA(3, missing="em", tol=1e-8, persist=True).fit(Xd)
    assert em.n_iter_ >= 2 and em.n_passes_ == 1 + em.n_iter_
    assert counter.reads == Xd.numblocks[0]  # the persist; every pass then reads memory
    ref = scalepca.PPCA(3, missing="em", tol=1e-8).fit(Xm)
    np.testing.assert_allclose(em.W_, ref.W_, rtol=1e-10, atol=1e-12)


def test_chunking_invariance_and_determinism(rng):
    Xm, _ = with_missing(rng, well_specified(rng), 0.2)
    fits = [
        scalepca.PPCA(3, missing="em", init="random", random_state=7, tol=1e-10).fit(
            da.from_array(Xm, chunks=(c, 24))
        )
        for c in (600, 77, 250)
    ]
    for f in fits[1:]:
        assert f.n_iter_ == fits[0].n_iter_
        np.testing.assert_allclose(f.W_, fits[0].W_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(
            f.noise_variance_, fits[0].noise_variance_, rtol=1e-10
        )
        np.testing.assert_allclose(f.loglike_, fits[0].loglike_, rtol=1e-12)
    again = scalepca.PPCA(
        3, missing="em", init="random", random_state=7, tol=1e-10
    ).fit(da.from_array(Xm, chunks=(77, 24)))
    np.testing.assert_array_equal(again.W_, fits[1].W_)


def test_float32_input(rng):
    Xm, _ = with_missing(rng, well_specified(rng), 0.1)
    e64 = scalepca.PPCA(3, missing="em", tol=1e-10).fit(Xm)
    e32 = scalepca.PPCA(3, missing="em", tol=1e-10).fit(Xm.astype(np.float32))
    np.testing.assert_allclose(e32.W_, e64.W_, rtol=1e-4, atol=1e-4)
    assert e32.transform(Xm.astype(np.float32)).dtype == np.float32


# -- API and errors --------------------------------------------------------------------
def test_save_load_round_trip(tmp_path, rng):
    Xm, _ = with_missing(rng, well_specified(rng), 0.1)
    Xm[:, 2] = np.nan
    with pytest.warns(UserWarning):
        em = scalepca.PPCA(3, missing="em").fit(Xm)
    em.save(tmp_path / "m.zarr")
    back = scalepca.load(tmp_path / "m.zarr")
    assert back.missing == "em" and back.n_iter_ == em.n_iter_
    np.testing.assert_array_equal(back.loglike_, em.loglike_)
    np.testing.assert_array_equal(back.transform(Xm), em.transform(Xm))
    np.testing.assert_array_equal(back.impute(Xm), em.impute(Xm))
    np.testing.assert_array_equal(back.score_samples(Xm), em.score_samples(Xm))


def test_sklearn_clone_and_params():
    est = scalepca.PPCA(
        2, solver="em", missing="em", max_iter=5, tol=1e-3, init="random"
    )
    params = clone(est).get_params()
    assert (
        params["solver"] == "em"
        and params["missing"] == "em"
        and params["max_iter"] == 5
    )
    assert params["tol"] == 1e-3 and params["init"] == "random"


def test_convergence_warning(rng):
    X = low_rank_data(rng, rank=6)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        em = scalepca.PPCA(
            3, solver="em", init="random", max_iter=2, random_state=0
        ).fit(X)
    assert em.n_iter_ == 2 and not em.converged_


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        ({"solver": "svd"}, ValueError, "solver='svd'"),
        ({"missing": "drop"}, ValueError, "missing='drop'"),
        ({"init": "kmeans"}, ValueError, "init='kmeans'"),
        ({"max_iter": 0}, ValueError, "max_iter"),
        ({"tol": -1.0}, ValueError, "tol"),
        ({"max_iter": 2.5}, TypeError, "max_iter"),
        ({"solver": "closed_form", "missing": "em"}, ValueError, "missing='em' needs"),
    ],
)
def test_bad_parameters(rng, kwargs, err, match, raise_if_dask_computes):
    X = da.from_array(well_specified(rng), chunks=(100, 24))
    with raise_if_dask_computes(0), pytest.raises(err, match=match):
        scalepca.PPCA(2, **kwargs).fit(X)


def test_too_many_components_for_em(rng):
    X = rng.standard_normal((50, 5))
    with pytest.raises(ValueError, match="n_components < n_features"):
        scalepca.PPCA(5, solver="em").fit(X)
    X[:, [1, 2]] = np.nan
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="too large"):
        scalepca.PPCA(3, missing="em").fit(X)


def test_nan_with_missing_error_and_inf_always_raise(rng):
    X = well_specified(rng)
    Xm = X.copy()
    Xm[3, 4] = np.nan
    for est in (scalepca.PPCA(3), scalepca.PPCA(3, solver="em")):
        with pytest.raises(ValueError, match="NaN"):
            est.fit(Xm)
    Xi = X.copy()
    Xi[1, 1] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        scalepca.PPCA(3, missing="em").fit(Xi)
    Xa = X.copy()
    Xa[:] = np.nan
    with pytest.raises(ValueError, match="no observed value"):
        scalepca.PPCA(3, missing="em").fit(Xa)


def test_transform_treats_inf_as_fit_does_and_empty_rows_as_nan(rng):
    """``fit`` refuses infinite values; ``transform`` used to read them as missing. Both
    solvers, NumPy and dask input (lazy: the error comes when the block is computed). An
    empty row (all NaN) of a model that takes NaN as missing gets NaN scores."""
    X = well_specified(rng)
    for est in (scalepca.PPCA(3).fit(X), scalepca.PPCA(3, solver="em").fit(X)):
        Xi = X[:40].copy()
        Xi[7, 2] = np.inf
        Xi[9, 0] = -np.inf
        with pytest.raises(ValueError, match="2 infinite value"):
            est.transform(Xi)
        with pytest.raises(ValueError, match="infinite"):
            est.transform(da.from_array(Xi, chunks=(10, 24))).compute()
        with pytest.raises(ValueError, match="infinite"):
            est.impute(Xi)
        Xn = X[:40].copy()
        Xn[5] = np.nan
        Xn[6, :5] = np.nan
        # fitted with missing="error", lazy input with NaN is refused like NumPy input
        with pytest.raises(ValueError, match="NaN value"):
            est.transform(da.from_array(Xn, chunks=(10, 24))).compute()
        # imputation of an empty row is the model mean (its posterior is the prior)
        np.testing.assert_allclose(est.impute(Xn)[5], est.mean_)
    em = scalepca.PPCA(3, missing="em").fit(X)
    Z = em.transform(da.from_array(Xn, chunks=(10, 24))).compute()
    assert np.isnan(Z[5]).all() and np.isfinite(np.delete(Z, 5, axis=0)).all()


def test_land_features_dropped_also_without_missing_em(rng):
    X = well_specified(rng)
    X[:, [0, 9]] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        cf = scalepca.PPCA(3).fit(X)
        em = scalepca.PPCA(3, solver="em", tol=1e-12).fit(X)
    assert np.isnan(cf.W_[[0, 9]]).all() and np.isnan(em.W_[[0, 9]]).all()
    keep = ~np.isnan(cf.mean_)
    np.testing.assert_allclose(em.W_[keep], cf.W_[keep], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(em.score(X), cf.score(X), rtol=1e-9)


def test_not_fitted():
    with pytest.raises(NotFittedError):
        scalepca.PPCA(2).impute(np.ones((3, 3)))
    with pytest.raises(NotFittedError):
        scalepca.PPCA(2).score_samples(np.ones((3, 3)))


@pytest.mark.distributed
def test_em_on_a_local_cluster(rng):
    from distributed import Client, LocalCluster

    Xm, _ = with_missing(rng, well_specified(rng), 0.1)
    ref = scalepca.PPCA(3, missing="em", tol=1e-10).fit(Xm)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        em = scalepca.PPCA(3, missing="em", tol=1e-10).fit(
            da.from_array(Xm, chunks=(100, 24))
        )
    np.testing.assert_allclose(em.W_, ref.W_, rtol=1e-9, atol=1e-12)
    assert em.n_iter_ == ref.n_iter_


@pytest.mark.parametrize("k", [1, 2, 5, 12, 13])
def test_batched_spd_inverse(rng, k):
    from scalepca.linalg.em import _spd_inverse

    B = rng.standard_normal((200, k, k))
    M = B @ B.transpose(0, 2, 1) + 0.1 * np.eye(k)
    Minv, logdet = _spd_inverse(M)
    np.testing.assert_allclose(Minv, np.linalg.inv(M), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(M)[1], rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError):
        _spd_inverse(-M)
