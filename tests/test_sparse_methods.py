"""Kernel PCA, sparse PCA and robust PCA on sparse input (issue 20).

Every method that takes sparse input must give the fit of the densified data (same
``random_state`` ⇒ same landmarks, random features, initial dictionary, minibatch
order) to rounding, for any chunking and any sparse kind (scipy in memory, dask of
CSR, dask of pydata COO), and must never densify a row block of the data: blocks are
wrapped in a CSR subclass whose ``toarray`` refuses anything larger than the small
gathers the methods are allowed to make.
"""

import importlib
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import scalepca
from scalepca.linalg.kernels import (
    KERNELS,
    FourierFeatures,
    kernel_block,
    project_rows,
)
from scalepca.linalg.sparse import block_code_stats, scale_columns

sparse = pytest.importorskip("sparse")

#: rows per block of the dask inputs below; a guarded block refuses ``toarray`` above
#: this
BLOCK_ROWS = 120


class _NoDensify(sp.csr_matrix):
    """A CSR block that refuses to be densified when it has more than ``limit`` rows
    (the methods may densify small gathers on the client: landmarks, one row — never
    a block)."""

    limit = BLOCK_ROWS // 2

    def toarray(self, *args, **kwargs):
        if self.shape[0] > self.limit:
            raise AssertionError(f"a {self.shape} sparse block was densified")
        return super().toarray(*args, **kwargs)

    todense = toarray


def _guard(block):
    return _NoDensify(block)


@pytest.fixture(scope="module")
def X():
    """600 × 30 counts-like matrix, 15 % non-zero, with a non-zero mean in every
    column."""
    rng = np.random.default_rng(0)
    M = sp.random(
        600,
        30,
        density=0.15,
        format="csr",
        random_state=rng,
        data_rvs=lambda k: rng.poisson(3.0, k) + 1.0,
    )
    return M


def _forms(X):
    """The same matrix as every accepted sparse kind and several chunkings."""
    coo = sparse.COO.from_scipy_sparse(X)
    return {
        "scipy": X,
        "dask_one_block": da.from_array(
            X, chunks=(X.shape[0], X.shape[1]), asarray=False
        ),
        "dask_blocks": da.from_array(X, chunks=(BLOCK_ROWS, X.shape[1]), asarray=False),
        "dask_uneven": da.from_array(
            X, chunks=((37, 200, 163, 200), X.shape[1]), asarray=False
        ),
        "dask_pydata": da.from_array(coo, chunks=(BLOCK_ROWS, 10), asarray=False),
        "guarded": da.from_array(
            X, chunks=(BLOCK_ROWS, X.shape[1]), asarray=False
        ).map_blocks(_guard, dtype=X.dtype, meta=sp.csr_matrix((0, 0))),
    }


def _np(a):
    return np.asarray(a.compute() if hasattr(a, "compute") else a)


def _sparse_moments() -> bool:
    """Whether the moments pass takes CSR blocks (the sparse branch of
    ``block_moments``)."""
    moments = importlib.import_module("scalepca.linalg.moments")
    try:
        moments.block_moments(sp.csr_matrix(np.eye(3)))
    except Exception:
        return False
    return True


def _sparse_transform() -> bool:
    """Whether the linear models' ``transform`` (``affine_map``) takes CSR blocks."""
    from scalepca.models.base import affine_map

    X = da.from_array(sp.csr_matrix(np.eye(3)), chunks=(2, 3), asarray=False)
    try:
        affine_map(X, np.ones(3), np.eye(3)).compute()
    except Exception:
        return False
    return True


needs_sparse_moments = pytest.mark.skipif(
    not _sparse_moments(),
    reason="the one-pass moments on CSR blocks (linalg.moments.block_moments) are not merged",
)
needs_sparse_transform = pytest.mark.skipif(
    not _sparse_transform(),
    reason="the linear transform of CSR blocks (models.base.affine_map) is not merged",
)


# -- kernel PCA ------------------------------------------------------------------------
KPCA_CASES = [
    ("nystroem", "rbf", "uniform"),
    ("nystroem", "poly", "uniform"),
    ("nystroem", "sigmoid", "uniform"),
    ("nystroem", "linear", "kmeans++"),
    ("rff", "rbf", "uniform"),
    ("exact", "rbf", "uniform"),
    ("exact", "poly", "uniform"),
]


def _kpca(approx, kernel, landmarks, **kw):
    return scalepca.KernelPCA(
        3,
        approximation=approx,
        kernel=kernel,
        landmarks=landmarks,
        n_features=50,
        random_state=0,
        fit_inverse_transform=True,
        **kw,
    )


def test_kmeans_pool_of_sparse_rows_is_clustered_sparse(monkeypatch):
    """The k-means++ pool (max(5 m, 10,000) rows: 2.4 GB once densified at 30,000 genes)
    reaches k-means as CSR, never densified on the client, and gives the dense pool's
    landmarks; a feature stored as NaN in every row of it is left out as in dense input.

    Continuous values: on integer counts, points at exactly equal distances from two
    centres are common, and scikit-learn's sparse and dense Lloyd steps (whose
    distances round differently) may assign them differently — the k-means++ seeding
    is the same, the clusters then differ by those ties (documented in
    ``KernelPCA``)."""
    rng = np.random.default_rng(1)
    X = sp.random(
        600,
        30,
        density=0.15,
        format="csr",
        random_state=rng,
        data_rvs=lambda k: rng.standard_normal(k) + 3.0,
    )
    kpca_mod = importlib.import_module("scalepca.models.kernel_pca")
    real = kpca_mod.kmeans_plusplus_landmarks
    seen = []

    def spy(sample, *args, **kwargs):
        seen.append(sp.issparse(sample))
        return real(sample, *args, **kwargs)

    monkeypatch.setattr(kpca_mod, "kmeans_plusplus_landmarks", spy)
    kw = dict(
        approximation="nystroem",
        kernel="rbf",
        landmarks="kmeans++",
        n_features=20,
        random_state=0,
    )
    got = scalepca.KernelPCA(3, **kw).fit(X)
    ref = scalepca.KernelPCA(3, **kw).fit(X.toarray())
    assert seen == [True, False]
    np.testing.assert_allclose(
        got.landmarks_,
        ref.landmarks_,
        rtol=0,
        atol=1e-12 * np.abs(ref.landmarks_).max(),
    )
    np.testing.assert_allclose(got.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    land = X.tolil()
    land[:, 3] = np.nan  # stored in every row
    keep = np.arange(X.shape[1]) != 3
    with pytest.warns(UserWarning, match="1 of 30 features are NaN in every sample"):
        kp = scalepca.KernelPCA(3, **kw).fit(land.tocsr())
    ref = scalepca.KernelPCA(3, **kw).fit(X.toarray()[:, keep])
    np.testing.assert_allclose(kp.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(
        kp.landmarks_[:, keep],
        ref.landmarks_,
        rtol=0,
        atol=1e-12 * np.abs(ref.landmarks_).max(),
    )
    assert np.isnan(kp.landmarks_[:, 3]).all()
    bad = X.copy()
    bad.data[5] = (
        np.inf
    )  # a stored non-finite value in a kept feature: refused before the pass
    with pytest.raises(
        ValueError,
        match="NaN or infinite values \\(found in the sampled landmark rows\\)",
    ):
        scalepca.KernelPCA(3, **kw).fit(bad)


@pytest.mark.parametrize("approx,kernel,landmarks", KPCA_CASES)
def test_kernel_pca_on_sparse_equals_dense(X, approx, kernel, landmarks):
    Xd = X.toarray()
    ref = _kpca(approx, kernel, landmarks).fit(Xd)
    got = _kpca(approx, kernel, landmarks).fit(X)
    # the same landmarks / random features: the same m × m problem, up to rounding
    # (measured ≤ 1e-15 relative; 1e-10 leaves room for BLAS differences of sparse and
    # dense products)
    np.testing.assert_allclose(got.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    assert got.n_passes_ == ref.n_passes_
    z_ref = ref.transform(Xd)
    z = got.transform(X)
    assert isinstance(z, np.ndarray)
    scale = np.abs(z_ref).max()
    np.testing.assert_allclose(z, z_ref, rtol=0, atol=1e-10 * scale)
    # fit's scores of the training rows = transform of the dense rows by the sparse fit
    np.testing.assert_allclose(got.transform(Xd), z_ref, rtol=0, atol=1e-10 * scale)
    pre_ref = ref.inverse_transform(z_ref)
    np.testing.assert_allclose(
        got.inverse_transform(z), pre_ref, rtol=0, atol=1e-10 * np.abs(pre_ref).max()
    )


@pytest.mark.parametrize("approx", ["nystroem", "rff"])
def test_kernel_pca_sparse_any_kind_and_chunking(X, approx):
    Xd = X.toarray()
    ref = _kpca(approx, "rbf", "uniform").fit(Xd)
    z_ref = ref.transform(Xd)
    atol = 1e-10 * np.abs(z_ref).max()
    for name, form in _forms(X).items():
        got = _kpca(approx, "rbf", "uniform").fit(form)
        np.testing.assert_allclose(
            got.eigenvalues_, ref.eigenvalues_, rtol=1e-10, err_msg=name
        )
        z = got.transform(form)
        assert isinstance(z, da.Array) == isinstance(form, da.Array), name
        np.testing.assert_allclose(_np(z), z_ref, rtol=0, atol=atol, err_msg=name)


def test_kernel_pca_exact_on_guarded_blocks_densifies_only_the_training_matrix(X):
    # exact kernel PCA keeps the (bounded) training matrix on the client: it is gathered
    # whole, so its densification is of the gather (600 rows), not of a block in a task
    ref = _kpca("exact", "rbf", "uniform").fit(X.toarray())
    form = da.from_array(X, chunks=(BLOCK_ROWS, X.shape[1]), asarray=False)
    got = _kpca("exact", "rbf", "uniform").fit(form)
    np.testing.assert_allclose(got.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    z = got.transform(
        _forms(X)["guarded"]
    )  # new points: kernel rows from sparse blocks
    np.testing.assert_allclose(
        _np(z), ref.transform(X.toarray()), rtol=0, atol=1e-10 * np.abs(_np(z)).max()
    )


def test_kernel_pca_transform_of_sparse_by_a_dense_fit(X):
    Xd = X.toarray()
    model = _kpca("nystroem", "rbf", "uniform").fit(Xd)
    z = model.transform(_forms(X)["guarded"])
    np.testing.assert_allclose(
        _np(z),
        model.transform(Xd),
        rtol=0,
        atol=1e-10 * np.abs(model.transform(Xd)).max(),
    )


def test_kernel_blocks_of_sparse_rows_are_not_densified(X):
    rng = np.random.default_rng(1)
    L = rng.random((7, X.shape[1]))
    guarded = _NoDensify(X)  # 600 rows > limit: toarray would raise
    for kernel in ("rbf", "poly", "sigmoid", "linear"):
        kp = {"kernel": KERNELS[kernel], "gamma": 0.05, "degree": 3, "coef0": 1.0}
        np.testing.assert_allclose(
            kernel_block(guarded, L, **kp),
            kernel_block(X.toarray(), L, **kp),
            rtol=1e-12,
            atol=1e-14,
        )
    W, b = rng.standard_normal((X.shape[1], 9)), rng.uniform(0, 6, 9)
    P = rng.standard_normal((9, 2))
    np.testing.assert_allclose(
        project_rows(guarded, FourierFeatures(W, b), P, np.zeros(2)),
        project_rows(X.toarray(), FourierFeatures(W, b), P, np.zeros(2)),
        rtol=1e-12,
        atol=1e-12,
    )


def test_kernel_pca_standardize_is_refused_on_sparse(X):
    kp = scalepca.KernelPCA(2, n_features=20, standardize=True, random_state=0)
    with pytest.raises(
        ValueError, match="centres every feature.*dense.*standardize=False"
    ):
        kp.fit(da.from_array(X, chunks=(BLOCK_ROWS, X.shape[1]), asarray=False))
    assert not hasattr(kp, "n_features_in_")
    kp.fit(X.toarray())  # a model standardised on dense data cannot centre sparse rows
    with pytest.raises(ValueError, match="centres every feature"):
        kp.transform(X)


def test_kernel_pca_sparse_under_a_distributed_client(X):
    distributed = pytest.importorskip("distributed")
    with distributed.Client(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ):
        got = _kpca("nystroem", "rbf", "uniform").fit(_forms(X)["dask_blocks"])
    ref = _kpca("nystroem", "rbf", "uniform").fit(X.toarray())
    np.testing.assert_allclose(got.eigenvalues_, ref.eigenvalues_, rtol=1e-10)


# -- sparse PCA ------------------------------------------------------------------------
def test_code_statistics_of_sparse_blocks_equal_dense(X):
    rng = np.random.default_rng(2)
    d = X.shape[1]
    D = rng.standard_normal((d, 4))
    guarded = _NoDensify(X)
    for mean, scale in [
        (np.asarray(X.mean(axis=0)).ravel(), None),
        (rng.random(d), rng.random(d) + 0.5),
        # |mean| ≫ spread: S is summed per entry, so no digits are lost
        (np.full(d, 1e4), None),
    ]:
        got = block_code_stats(guarded, mean, scale, D, with_sums=True)
        ref = block_code_stats(X.toarray(), mean, scale, D, with_sums=True)
        assert got["n"] == ref["n"]
        m = ref["n"]
        # the column sums of centred data are ~0 at the mean: compare them on the scale
        # of their terms (|Σ_i a_i| ≤ √(m Σ_i a_i²))
        bounds = {
            "P": np.abs(ref["P"]).max(),
            "G": np.abs(ref["G"]).max(),
            "sum_x": np.sqrt(m * ref["S"]),
            "sum_z": np.sqrt(m * np.trace(ref["G"])),
        }
        for key, bound in bounds.items():
            np.testing.assert_allclose(
                got[key], ref[key], rtol=1e-12, atol=1e-12 * bound, err_msg=key
            )
        np.testing.assert_allclose(got["S"], ref["S"], rtol=1e-13)


def test_scale_columns_keeps_blocks_sparse(X):
    scale = np.linspace(0.5, 2.0, X.shape[1])
    A = scale_columns(
        da.from_array(X, chunks=(BLOCK_ROWS, X.shape[1]), asarray=False), scale
    )
    blocks = dask.compute(*[A.blocks[i, 0] for i in range(A.numblocks[0])])
    assert all(sp.issparse(b) for b in blocks)
    np.testing.assert_allclose(
        sp.vstack(blocks).toarray(), X.toarray() / scale, rtol=1e-15
    )


SPCA_CASES = [
    ("batch", {}),
    ("batch", {"use_correlation": True}),
    ("minibatch", {}),
    ("minibatch", {"init": "random", "batch_size": 150}),
    ("elasticnet", {}),
    ("elasticnet", {"n_nonzero": 5}),
]


def _spca(method, **kw):
    # a penalty of 0.02 per sample on the 600 rows of X; alpha is in scikit-learn's
    # units for the dictionary methods (alpha / √n per sample) and is λ₁ on the
    # covariance for elasticnet
    alpha = 0.02 * np.sqrt(600) if method in ("batch", "minibatch") else 0.02
    return scalepca.SparsePCA(
        3, method=method, alpha=alpha, random_state=0, max_iter=20, **kw
    )


def _fit_quiet(model, data):
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", UserWarning
        )  # components removed by the penalty
        return model.fit(data)


@needs_sparse_moments
@pytest.mark.parametrize("method,kw", SPCA_CASES)
def test_sparse_pca_on_sparse_equals_dense(X, method, kw):
    Xd = X.toarray()
    ref = _fit_quiet(_spca(method, **kw), Xd)
    got = _fit_quiet(_spca(method, **kw), X)
    np.testing.assert_allclose(got.components_, ref.components_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        got.explained_variance_, ref.explained_variance_, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(got.mean_, ref.mean_, rtol=1e-12)
    if hasattr(ref, "objective_"):
        np.testing.assert_allclose(got.objective_, ref.objective_, rtol=1e-10)
    assert (got.components_ == 0).any()  # sparse loadings
    assert got.n_passes_ == ref.n_passes_


@needs_sparse_moments
@pytest.mark.parametrize("method", ["batch", "minibatch"])
def test_sparse_pca_statistics_pass_on_sparse_blocks(X, method, monkeypatch):
    """Above the covariance threshold the dictionary statistics come from passes over the
    sparse blocks (code_stats_graph), not from the covariance: force that path."""
    monkeypatch.setattr(
        importlib.import_module("scalepca.models.sparse_pca"), "GRAM_MAX_FEATURES", 5
    )
    Xd = X.toarray()
    ref = _fit_quiet(_spca(method, init="random", use_correlation=True), Xd)
    for name, form in _forms(X).items():
        got = _fit_quiet(_spca(method, init="random", use_correlation=True), form)
        np.testing.assert_allclose(
            got.components_, ref.components_, rtol=0, atol=1e-10, err_msg=name
        )
        np.testing.assert_allclose(
            got.objective_, ref.objective_, rtol=1e-10, err_msg=name
        )


@needs_sparse_moments
def test_sparse_pca_any_kind_and_chunking(X):
    Xd = X.toarray()
    ref = _fit_quiet(_spca("minibatch", batch_size=150), Xd)
    for name, form in _forms(X).items():
        got = _fit_quiet(_spca("minibatch", batch_size=150), form)
        np.testing.assert_allclose(
            got.components_, ref.components_, rtol=0, atol=1e-10, err_msg=name
        )
        np.testing.assert_allclose(
            got.objective_, ref.objective_, rtol=1e-10, err_msg=name
        )


@needs_sparse_moments
@needs_sparse_transform
@pytest.mark.parametrize("method,kw", SPCA_CASES[::2])
def test_sparse_pca_transform_of_sparse_input(X, method, kw):
    Xd = X.toarray()
    ref = _fit_quiet(_spca(method, **kw), Xd)
    got = _fit_quiet(_spca(method, **kw), X)
    z_ref = ref.transform(Xd)
    atol = 1e-10 * np.abs(z_ref).max()
    for name, form in _forms(X).items():
        z = got.transform(form)
        assert isinstance(z, da.Array) == isinstance(form, da.Array), name
        np.testing.assert_allclose(_np(z), z_ref, rtol=0, atol=atol, err_msg=name)
    if hasattr(
        ref, "loadings_"
    ):  # the dictionary objective, by a pass over sparse blocks
        np.testing.assert_allclose(got.objective(X), ref.objective(Xd), rtol=1e-10)


# -- robust PCA ------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["scipy", "dask_blocks", "dask_pydata"])
def test_robust_pca_refuses_sparse_input_with_the_reason(X, form):
    data = _forms(X)[form]
    with pytest.raises(
        TypeError,
        match=r"RobustPCA does not take sparse input.*"
        r"M = L \+ S.*dense.*3 · 8 · n · d bytes.*toarray.*PCA or SparsePCA",
    ):
        scalepca.RobustPCA(random_state=0).fit(data)


def test_robust_pca_transform_refuses_sparse_input(X):
    rng = np.random.default_rng(3)
    model = scalepca.RobustPCA(random_state=0).fit(
        rng.standard_normal((60, X.shape[1]))
    )
    with pytest.raises(TypeError, match="RobustPCA does not take sparse input"):
        model.transform(X)


@needs_sparse_moments
def test_sparse_pca_partial_fit_streams_sparse_chunks(X):
    bounds = [0, 200, 450, X.shape[0]]
    ref, got = _spca("minibatch"), _spca("minibatch")
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        ref.partial_fit(X[a:b].toarray())
        got.partial_fit(X[a:b])
    np.testing.assert_allclose(got.components_, ref.components_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.mean_, ref.mean_, rtol=1e-12)
    np.testing.assert_allclose(
        got.explained_variance_, ref.explained_variance_, rtol=1e-10
    )


def test_robust_pca_refuses_sparse_inside_a_dataarray(X):
    xr = pytest.importorskip("xarray")
    coo = sparse.COO.from_scipy_sparse(X)
    field = xr.DataArray(
        da.from_array(coo, chunks=(BLOCK_ROWS, X.shape[1]), asarray=False),
        dims=("time", "space"),
    )
    with pytest.raises(TypeError, match="RobustPCA does not take sparse input"):
        scalepca.RobustPCA(random_state=0).fit(field)
