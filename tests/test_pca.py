"""PCA against a dense LAPACK reference, scikit-learn, chunkings, and its error
paths."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from scipy.linalg import subspace_angles
from sklearn.base import clone
from sklearn.decomposition import PCA as SKPCA
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import scalepca
from scalepca.linalg import merge_moments, moments

from .conftest import low_rank_data
from .support.counting import counted_dask


def dense_reference(X):
    """Eigen-decomposition of the sample covariance by numpy.linalg.eigh (LAPACK)."""
    Xc = X - X.mean(axis=0)
    w, V = np.linalg.eigh(Xc.T @ Xc / (X.shape[0] - 1))
    return w[::-1], V[:, ::-1]


def test_leading_pairs_of_many_features_equal_lapack(rng):
    """Past LEADING_MIN_FEATURES, covariance_eigh finds the leading pairs by ARPACK
    and the discarded variance from the trace: the same fit as LAPACK's every pair,
    for PCA's and PPCA's σ², dense and CSR, and for a leading axis orthogonal to the
    all-ones vector."""
    import scipy.sparse
    from scipy.linalg import eigh as lapack_eigh

    from scalepca.linalg.decomp import LEADING_MIN_FEATURES, leading_eigh

    n, d, k = 2_500, LEADING_MIN_FEATURES + 200, 6
    X = rng.standard_normal((n, d))
    X[:, :40] += rng.standard_normal((n, 8)) @ rng.standard_normal((8, 40)) * 3
    w, V = dense_reference(X)
    for data in (
        da.from_array(X, chunks=(700, d)),
        da.from_array(scipy.sparse.csr_matrix(X), chunks=(700, d)),
    ):
        pca = scalepca.PCA(n_components=k, svd_solver="covariance_eigh").fit(data)
        np.testing.assert_allclose(pca.explained_variance_, w[:k], rtol=1e-12)
        assert np.max(subspace_angles(pca.components_.T, V[:, :k])) < 1e-10
        np.testing.assert_allclose(pca.noise_variance_, w[k:].mean(), rtol=1e-12)
        ppca = scalepca.PPCA(n_components=k).fit(data)
        np.testing.assert_allclose(ppca.noise_variance_, w[k:].mean(), rtol=1e-12)
    # a leading eigenvector orthogonal to ones: a start at the all-ones vector would
    # miss it
    q = np.ones(d) / np.sqrt(d)
    u = rng.standard_normal(d)
    u -= (u @ q) * q
    u /= np.linalg.norm(u)
    C = np.diag(np.linspace(1.0, 2.0, d)) + 50 * np.outer(u, u)
    C = (
        C - np.outer(C @ q, q) - np.outer(q, q @ C) + (q @ C @ q) * np.outer(q, q)
    )  # C q = 0
    lw, lv = leading_eigh(C, 3)
    ref_w, ref_v = lapack_eigh(C, subset_by_index=[d - 3, d - 1])
    np.testing.assert_allclose(lw, ref_w[::-1], rtol=1e-12)
    assert np.max(subspace_angles(lv, ref_v)) < 1e-8


@pytest.mark.parametrize("chunks", [(600, 24), (100, 24), (77, 24), (250, 8)])
def test_covariance_eigh_matches_lapack(rng, chunks):
    X = low_rank_data(rng)
    w, V = dense_reference(X)
    pca = scalepca.PCA(n_components=8, svd_solver="covariance_eigh").fit(
        da.from_array(X, chunks=chunks)
    )
    np.testing.assert_allclose(pca.explained_variance_, w[:8], rtol=1e-10)
    assert np.max(subspace_angles(pca.components_.T, V[:, :8])) < 1e-8
    np.testing.assert_allclose(pca.mean_, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(
        pca.explained_variance_ratio_, w[:8] / w.sum(), rtol=1e-10
    )
    np.testing.assert_allclose(pca.noise_variance_, w[8:].mean(), rtol=1e-10)
    assert pca.n_passes_ == 1


@pytest.mark.parametrize("solver", ["tsqr", "randomized"])
def test_other_solvers_match_lapack(rng, solver):
    X = low_rank_data(rng, n=800, d=30, rank=6, noise=0.1)
    w, V = dense_reference(X)
    pca = scalepca.PCA(n_components=6, svd_solver=solver, random_state=0).fit(
        da.from_array(X, chunks=(150, 30))
    )
    # Randomized with 4 power iterations on a gap of ~10x: errors far below 1e-8 in
    # practice; the tolerance leaves a margin over Halko et al.'s bound
    # ((σ_{k+1}/σ_k)^(2q+1) ≈ 1e-9).
    tol = 1e-10 if solver == "tsqr" else 1e-7
    np.testing.assert_allclose(pca.explained_variance_, w[:6], rtol=tol)
    tol = 1e-8 if solver == "tsqr" else 1e-5
    assert np.max(subspace_angles(pca.components_.T, V[:, :6])) < tol
    np.testing.assert_allclose(pca.noise_variance_, w[6:].mean(), rtol=1e-6)


def _task_shapes(fn):
    """Shapes of every array a task returns while ``fn`` runs (synchronous
    scheduler)."""
    import dask
    from dask.callbacks import Callback

    shapes = []

    class Spy(Callback):
        def _posttask(self, key, result, dsk, state, worker_id):
            if isinstance(result, np.ndarray):
                shapes.append(result.shape)

    with dask.config.set(scheduler="sync"), Spy():
        out = fn()
    return out, shapes


def test_randomized_on_2d_blocks(rng, caplog):
    # wide data: the fit reads 2-D blocks as row panels of at most krylov.PANEL_BYTES
    # (issue 33: both products of the Gram operator in one task), transform keeps the
    # 2-D blocks
    n, d = 500, 120
    X = low_rank_data(rng, n=n, d=d, rank=4, noise=0.05)
    X[:, 7] += 50.0  # a mean far from zero: the centring must be exact per column strip
    w, V = dense_reference(X)
    Xd = da.from_array(X, chunks=(100, 40))
    with caplog.at_level("INFO", logger="scalepca"):
        pca, shapes = _task_shapes(
            lambda: scalepca.PCA(4, svd_solver="randomized", random_state=1).fit(Xd)
        )
        Z, tshapes = _task_shapes(lambda: pca.transform(Xd).compute())
    assert "rechunking" not in caplog.text
    # no fit task result is larger than one 100 × 120 row panel, no transform task
    # result larger than one 100 × 40 block
    assert shapes and max(int(np.prod(s)) for s in shapes) <= 100 * 120
    assert tshapes and max(int(np.prod(s)) for s in tshapes) <= 100 * 40
    np.testing.assert_allclose(pca.explained_variance_, w[:4], rtol=1e-8)
    np.testing.assert_allclose(pca.mean_, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(pca.noise_variance_, w[4:].mean(), rtol=1e-8)
    assert np.max(subspace_angles(pca.components_.T, V[:, :4])) < 1e-8
    np.testing.assert_allclose(Z, (X - X.mean(axis=0)) @ pca.components_.T, atol=1e-9)
    # the same model from one column chunk, and PPCA's closed form on the 2-D blocks
    ref = scalepca.PCA(4, svd_solver="randomized", random_state=1).fit(X)
    np.testing.assert_allclose(pca.components_, ref.components_, atol=1e-9)
    ppca = scalepca.PPCA(4, svd_solver="randomized", random_state=1).fit(Xd)
    np.testing.assert_allclose(ppca.noise_variance_, w[4:].mean(), rtol=1e-8)


def test_randomized_2d_blocks_report_nan(rng):
    X = low_rank_data(rng, n=300, d=60, rank=3)
    X[5, 45] = np.nan
    X[9, 3] = np.inf
    with pytest.raises(ValueError, match="2 "):
        scalepca.PCA(3, svd_solver="randomized").fit(da.from_array(X, chunks=(100, 20)))


def test_tsqr_keeps_small_singular_values(rng):
    # Singular values spanning 1e-9 .. 1: the covariance route squares them (1e-18
    # relative, below float64 precision), TSQR keeps them to working precision.
    n, d = 400, 6
    U = np.linalg.qr(rng.standard_normal((n, d)))[0]
    U -= U.mean(axis=0)  # centred columns, so the mean is exactly zero
    U = np.linalg.qr(U)[0]
    s = np.logspace(0, -9, d)
    Vt = np.linalg.qr(rng.standard_normal((d, d)))[0]
    X = (U * s) @ Vt + 7.0
    pca = scalepca.PCA(svd_solver="tsqr").fit(da.from_array(X, chunks=(100, d)))
    np.testing.assert_allclose(pca.singular_values_, s, rtol=1e-5)


def test_matches_sklearn(rng):
    X = low_rank_data(rng)
    ours = scalepca.PCA(5).fit(X)
    ref = SKPCA(5, svd_solver="full").fit(X)
    np.testing.assert_allclose(
        ours.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    np.testing.assert_allclose(ours.singular_values_, ref.singular_values_, rtol=1e-10)
    np.testing.assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=1e-10)
    np.testing.assert_allclose(
        np.abs(ours.components_), np.abs(ref.components_), atol=1e-10
    )
    Z = ours.transform(X)
    Zr = ref.transform(X)
    np.testing.assert_allclose(np.abs(Z), np.abs(Zr), atol=1e-8)


@pytest.mark.parametrize("solver", ["covariance_eigh", "tsqr", "randomized"])
def test_noise_variance_keeps_sklearn_convention_when_n_le_d(rng, solver):
    """PCA.noise_variance_ follows scikit-learn (mean of the min(n, d) − k
    eigenvalues after the k-th); PPCA's is the ML estimate over all d − k, so they
    differ (d − k)/(n − k)-fold."""
    X = low_rank_data(rng, n=30, d=70, rank=4, noise=0.3)
    k = 4
    ours = scalepca.PCA(k, svd_solver=solver, random_state=0).fit(X)
    ref = SKPCA(k, svd_solver="full").fit(X)
    # randomized: σ² = (total − Σ leading) / (n − k) inherits the leading eigenvalues'
    # error (measured 1.7e-7 relative with 4 power iterations on this small gap)
    tol = 1e-5 if solver == "randomized" else 1e-8
    np.testing.assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=tol)
    ppca = scalepca.PPCA(k, svd_solver=solver, random_state=0).fit(X)
    np.testing.assert_allclose(
        ppca.noise_variance_ * (70 - k) / (30 - k), ours.noise_variance_, rtol=1e-8
    )


def test_sign_convention_and_chunking_invariance(rng):
    X = low_rank_data(rng)
    results = [
        scalepca.PCA(6).fit(da.from_array(X, chunks=c)).components_
        for c in [(600, 24), (64, 24), (13, 24)]
    ]
    for C in results:
        idx = np.argmax(np.abs(C), axis=1)
        assert np.all(C[np.arange(6), idx] > 0)
        np.testing.assert_allclose(C, results[0], atol=1e-11)


def test_transform_kinds_and_inverse(rng):
    X = low_rank_data(rng)
    pca = scalepca.PCA(24).fit(X)  # full rank: exact reconstruction
    Z = pca.transform(X)
    assert isinstance(Z, np.ndarray) and Z.shape == (600, 24)
    np.testing.assert_allclose(pca.inverse_transform(Z), X, atol=1e-9)
    Zd = pca.transform(da.from_array(X, chunks=(100, 24)))
    assert isinstance(Zd, da.Array)
    np.testing.assert_allclose(Zd.compute(), Z, atol=1e-10)
    # whitening gives unit-variance scores and still inverts
    w = scalepca.PCA(5, whiten=True).fit(X)
    np.testing.assert_allclose(w.transform(X).var(axis=0, ddof=1), 1.0, rtol=1e-8)
    Xa = xr.DataArray(X, dims=("time", "space"), coords={"time": np.arange(600)})
    Za = pca.transform(Xa)
    assert isinstance(Za, xr.DataArray) and Za.dims == ("time", "mode")
    np.testing.assert_array_equal(Za["time"].values, np.arange(600))
    np.testing.assert_allclose(Za.values, Z, atol=1e-10)


def test_transform_is_lazy(rng, raise_if_dask_computes):
    X = da.from_array(low_rank_data(rng), chunks=(100, 24))
    pca = scalepca.PCA(3).fit(X)
    with raise_if_dask_computes(0):
        Z = pca.transform(X)
        pca.inverse_transform(Z)


def test_one_pass_counted_at_the_store(rng):
    X = low_rank_data(rng)
    Xd, counter = counted_dask(X, chunks=(100, 24))
    pca = scalepca.PCA(4).fit(Xd)
    assert counter.reads == Xd.numblocks[0] * pca.n_passes_ == 6  # 6 blocks, one pass
    counter.reads = 0
    scalepca.PCA(4, svd_solver="tsqr").fit(Xd)
    assert counter.reads == 12


def test_float32_accumulates_in_float64(rng):
    """float32 data: float32 products of centred slices, float64 sums (issue 23);
    within the stated bound of the float64 products, and equal to them when float64
    is asked for."""
    from scalepca.linalg.moments import GRAM_PRECISION_KEY, gram_error_bound

    X = (low_rank_data(rng) + 1e4).astype(
        np.float32
    )  # large mean: a naive XᵀX would cancel
    Xd = da.from_array(X, chunks=(50, 24))
    w, _ = dense_reference(X.astype(np.float64))
    pca = scalepca.PCA(4).fit(Xd)
    # Weyl: |Δλ| ≤ ‖ΔG‖₂/(n−1) ≤ bound · Σ_j ‖c_j‖²/(n−1) = bound · total variance
    tol = gram_error_bound() * w.sum()
    assert np.all(np.abs(pca.explained_variance_ - w[:4]) <= tol)
    np.testing.assert_allclose(pca.explained_variance_, w[:4], rtol=1e-5)
    assert pca.transform(X).dtype == np.float32
    with dask.config.set({GRAM_PRECISION_KEY: "float64"}):
        pca64 = scalepca.PCA(4).fit(Xd)
    np.testing.assert_allclose(pca64.explained_variance_, w[:4], rtol=1e-10)


def test_moments_merge_is_exact(rng):
    X = rng.standard_normal((300, 5)) * 1e-3 + 1e6  # mean ≫ std
    m = moments(da.from_array(X, chunks=(7, 5)))
    Xc = X - X.mean(axis=0)
    ref = Xc.T @ Xc
    scale = np.abs(ref).max()
    # The data carry ~1e-10 absolute rounding (|x| ≈ 1e6), i.e. ~1e-7 of their spread;
    # the merged moments stay at that level, while the textbook XᵀX − n μ μᵀ loses
    # everything.
    assert np.abs(m["m2"] - ref).max() < 1e-7 * scale
    naive = X.T @ X - X.shape[0] * np.outer(X.mean(0), X.mean(0))
    assert np.abs(naive - ref).max() > 100 * scale
    np.testing.assert_allclose(m["mean"], X.mean(axis=0), rtol=1e-15)
    empty = {"n": 0, "mean": np.zeros(5), "m2": np.zeros((5, 5)), "bad": 0}
    assert merge_moments(empty, m)["n"] == 300


def test_sklearn_api(rng):
    X = low_rank_data(rng)
    pca = scalepca.PCA(3, svd_solver="tsqr")
    assert clone(pca).get_params()["svd_solver"] == "tsqr"
    pipe = Pipeline([("scale", StandardScaler()), ("pca", scalepca.PCA(3))]).fit(X)
    assert pipe.transform(X).shape == (600, 3)
    np.testing.assert_allclose(
        scalepca.PCA(3).fit_transform(X), scalepca.PCA(3).fit(X).transform(X)
    )


# -- errors: all raised before any compute ---------------------------------------------


@pytest.mark.parametrize(
    "X, err, match",
    [
        (np.ones(10), ValueError, "2-D"),
        (np.ones((3, 4, 5)), ValueError, "2-D"),
        (np.ones((5, 3), dtype=complex), ValueError, "Complex data not supported"),
        (np.array([["a", "b"], ["c", "d"]]), TypeError, "dtype"),
        # an object array of numbers is converted (scikit-learn's convention); a dict is
        # not
        (np.array([[1.0, {"a": 1}], [2.0, 3.0]], dtype=object), TypeError, "dict"),
        (np.ones((0, 3)), ValueError, "0 sample"),
        (np.ones((5, 0)), ValueError, "0 feature"),
    ],
)
def test_bad_arrays(X, err, match, raise_if_dask_computes):
    with raise_if_dask_computes(0), pytest.raises(err, match=match):
        scalepca.PCA(1).fit(X)


@pytest.mark.parametrize("k", [0, -1, 7, 100])
def test_n_components_out_of_range(k, raise_if_dask_computes):
    X = da.ones((6, 10), chunks=(3, 10))
    with raise_if_dask_computes(0), pytest.raises(ValueError, match="n_components"):
        scalepca.PCA(k).fit(X)


def test_bad_parameters(raise_if_dask_computes):
    X = da.ones((6, 10), chunks=(3, 10))
    with raise_if_dask_computes(0):
        with pytest.raises(ValueError, match="svd_solver"):
            scalepca.PCA(2, svd_solver="magic").fit(X)
        with pytest.raises(TypeError, match="n_components"):
            scalepca.PCA(2.5).fit(X)
        with pytest.raises(ValueError, match="n_power_iter"):
            scalepca.PCA(2, svd_solver="randomized", n_power_iter=-1).fit(X)


def test_unknown_chunks(raise_if_dask_computes):
    X = da.ones((20, 4), chunks=(5, 4))
    X = X[X[:, 0] > 0]
    with (
        raise_if_dask_computes(0),
        pytest.raises(ValueError, match="compute_chunk_sizes"),
    ):
        scalepca.PCA(2).fit(X)


def test_integers_and_bools_warn(rng):
    Xi = rng.integers(0, 10, size=(50, 4))
    with pytest.warns(UserWarning, match="converting to float64"):
        scalepca.PCA(2).fit(Xi)
    with pytest.warns(UserWarning, match="bool"):
        scalepca.PCA(2).fit(Xi > 4)


def test_nan_and_inf_counted_in_the_same_pass(rng):
    X = low_rank_data(rng)
    X[3, 4] = np.nan
    X[100, 0] = np.inf
    X[599, 2] = -np.inf
    Xd, counter = counted_dask(X, chunks=(100, 24))
    with pytest.raises(ValueError, match="3 NaN or infinite"):
        scalepca.PCA(2).fit(Xd)
    assert counter.reads == 6  # found during the one moments pass


def test_mismatched_features_in_transform(rng):
    pca = scalepca.PCA(2).fit(low_rank_data(rng))
    with pytest.raises(ValueError, match="23 features.*24"):
        pca.transform(np.ones((5, 23)))
    with pytest.raises(ValueError, match="columns"):
        pca.inverse_transform(np.ones((5, 3)))


def test_not_fitted():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        scalepca.PCA(2).transform(np.ones((3, 3)))


def test_features_split_across_chunks_are_rechunked(rng, caplog):
    X = low_rank_data(rng)
    with caplog.at_level("INFO", logger="scalepca"):
        pca = scalepca.PCA(3).fit(da.from_array(X, chunks=(100, 5)))
    assert "rechunking to one column chunk" in caplog.text
    ref = scalepca.PCA(3).fit(X)
    np.testing.assert_allclose(pca.components_, ref.components_, atol=1e-11)


def test_missing_store():
    with pytest.raises(FileNotFoundError, match="nope.zarr"):
        scalepca.open_matrix("/tmp/definitely/nope.zarr")


# -- standardize=True: PCA of the correlation matrix from the same moments pass --------
def _breast_cancer_with_constant():
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data
    return np.column_stack([X, np.full(len(X), 7.5)])  # a constant feature: scale 1


@pytest.mark.parametrize(
    "solver,extra",
    [("covariance_eigh", {}), ("tsqr", {}), ("randomized", {"n_oversamples": 40})],
)
@pytest.mark.parametrize("chunks", [None, (97, -1), (100, 7)])
def test_standardize_matches_standardscaler_pipeline(solver, extra, chunks):
    """PCA(standardize=True) equals make_pipeline(StandardScaler(), PCA()) on
    breast_cancer, for every solver and chunking (randomized with l = d: exact up to
    rounding)."""
    from sklearn.pipeline import make_pipeline

    X = _breast_cancer_with_constant()
    Xin = X if chunks is None else da.from_array(X, chunks=chunks)
    ref = make_pipeline(StandardScaler(), SKPCA(12)).fit(X)
    m = scalepca.PCA(
        12, standardize=True, svd_solver=solver, random_state=0, **extra
    ).fit(Xin)
    p = ref[-1]
    assert m.n_passes_ == {"covariance_eigh": 1, "tsqr": 2}.get(solver, m.n_passes_)
    np.testing.assert_allclose(m.scale_, ref[0].scale_, rtol=1e-12)
    assert m.scale_[-1] == 1.0
    np.testing.assert_allclose(m.explained_variance_, p.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(
        m.explained_variance_ratio_, p.explained_variance_ratio_, rtol=1e-10
    )
    sign = np.sign(np.sum(m.components_ * p.components_, axis=1))
    np.testing.assert_allclose(m.components_ * sign[:, None], p.components_, atol=1e-10)
    Z = np.asarray(m.transform(Xin))
    np.testing.assert_allclose(Z * sign, ref.transform(X), atol=1e-10)
    back = np.asarray(m.inverse_transform(Z))
    np.testing.assert_allclose(
        back, ref.inverse_transform(Z * sign), rtol=1e-10, atol=1e-10
    )


def test_standardize_is_remembered_by_save_and_load(tmp_path):
    X = _breast_cancer_with_constant()
    m = scalepca.PCA(5, standardize=True).fit(X)
    m.save(tmp_path / "m")
    back = scalepca.load(tmp_path / "m")
    assert back.standardize is True
    np.testing.assert_array_equal(back.scale_, m.scale_)
    np.testing.assert_array_equal(
        np.asarray(back.transform(X)), np.asarray(m.transform(X))
    )
    assert np.all(scalepca.PCA(5).fit(X).scale_ == 1)


def test_standardize_rejects_a_non_bool():
    with pytest.raises(TypeError, match="standardize must be True or False"):
        scalepca.PCA(2, standardize="yes").fit(np.eye(4))
