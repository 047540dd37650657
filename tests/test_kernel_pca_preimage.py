"""KernelPCA pre-images (``fit_inverse_transform=True``, ``inverse_transform``).

References: scikit-learn's ``KernelPCA(fit_inverse_transform=True)`` for the exact
method, a dense NumPy solve of the same finite-dimensional kernel ridge for Nyström /
RFF, and the de-noising of noisy digits (scikit-learn's bundled ``load_digits``).
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import yaml
import zarr
from sklearn.datasets import load_digits
from sklearn.decomposition import KernelPCA as SKKernelPCA
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import scalepca
from scalepca import PCA, KernelPCA
from scalepca.app.config import ConfigError, validate_config
from scalepca.cli import EXIT_OK, main
from scalepca.datasets import make_low_rank, write_dataset

from .conftest import arrays_in, recorded_results
from .support.counting import counted_dask

APPROX = [
    {"approximation": "nystroem", "n_features": 120},
    {"approximation": "rff", "n_features": 150},
]
ALL = [{"approximation": "exact"}, *APPROX]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    return rng.standard_normal((300, 6)) + 0.5, rng.standard_normal((40, 6)) + 0.5


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


# -- exact: scikit-learn's definition --------------------------------------------------
@pytest.mark.parametrize(
    "kernel,kp",
    [
        ("rbf", {"gamma": 0.2}),
        ("rbf", {}),  # gamma=None: one over the number of features, on the scores too
        ("poly", {"gamma": 0.3, "degree": 2, "coef0": 1.0}),
    ],
)
@pytest.mark.parametrize("alpha", [1.0, 0.05])
def test_exact_preimages_match_sklearn(data, kernel, kp, alpha):
    """Same setting as scikit-learn (kernel, gamma, n_components, alpha): the
    pre-images of new points' scores agree to 1e-8 (relative to their largest entry),
    and so do the dual coefficients. Scores are defined up to sign: the training
    scores are aligned first."""
    X, Xnew = data
    sk = SKKernelPCA(
        4,
        kernel=kernel,
        fit_inverse_transform=True,
        alpha=alpha,
        eigen_solver="dense",
        **kp,
    ).fit(X)
    ours = KernelPCA(
        4,
        kernel=kernel,
        approximation="exact",
        fit_inverse_transform=True,
        alpha=alpha,
        random_state=0,
        **kp,
    ).fit(X)
    sign = np.sign(np.sum(sk.X_transformed_fit_ * ours.X_transformed_fit_, axis=0))
    assert _rel(ours.X_transformed_fit_ * sign, sk.X_transformed_fit_) < 1e-8
    assert _rel(ours.dual_coef_, sk.dual_coef_) < 1e-8
    Z = sk.transform(Xnew)
    ref = sk.inverse_transform(Z)
    assert _rel(ours.inverse_transform(Z * sign), ref) < 1e-8  # the same scores
    assert (
        _rel(ours.inverse_transform(ours.transform(Xnew)), ref) < 1e-8
    )  # each its own
    assert (
        ours.n_passes_ == 1
    )  # the training data are on the client already: no extra pass


# -- Nyström / RFF: the finite-dimensional ridge ---------------------------------------
def _dense_ridge(model, X, Znew):
    """The same finite-dimensional kernel ridge, solved densely in NumPy from the
    training scores (``model.transform(X)``) and the model's random draws (landmarks
    / frequencies)."""
    Z = model.transform(X)
    kp = {"gamma": model.gamma_}
    if model.approximation == "nystroem":
        ZL = model.transform(model.landmarks_)
        s, U = np.linalg.eigh(pairwise_kernels(ZL, ZL, metric="rbf", **kp))
        keep = s > 1e-10 * s.max()
        N = U[:, keep] / np.sqrt(s[keep])

        def phi(z):
            return pairwise_kernels(z, ZL, metric="rbf", **kp) @ N
    else:
        W, b = model.inverse_weights_, model.inverse_offset_

        def phi(z):
            return np.sqrt(2.0 / W.shape[1]) * np.cos(z @ W + b)

    F = phi(Z)
    C = np.linalg.solve(F.T @ F + model.alpha * np.eye(F.shape[1]), F.T @ X)
    return phi(Znew) @ C


@pytest.mark.parametrize("kw", APPROX)
def test_finite_ridge_matches_dense_numpy(data, kw):
    X, Xnew = data
    m = KernelPCA(
        3, gamma=0.3, fit_inverse_transform=True, alpha=0.1, random_state=0, **kw
    ).fit(da.from_array(X, chunks=70))
    Znew = m.transform(Xnew)
    assert _rel(m.inverse_transform(Znew), _dense_ridge(m, X, Znew)) < 1e-10


@pytest.mark.parametrize("kw", APPROX)
def test_preimages_do_not_depend_on_chunking(data, kw):
    """NumPy, one dask chunk, many uneven chunks: the same pre-images (1e-10),
    whatever the chunks of the scores too. RFF's coefficients agree as well;
    Nyström's are expressed in the eigenbasis of the score landmarks' kernel, whose
    near-null directions (just above the 1e-10 floor) rotate with rounding — the
    pre-images do not depend on that basis."""
    X, Xnew = data
    fits = [
        KernelPCA(3, gamma=0.3, fit_inverse_transform=True, random_state=0, **kw).fit(
            Xi
        )
        for Xi in (
            X,
            da.from_array(X, chunks=-1),
            da.from_array(X, chunks=((17, 100, 3, 90, 90), (6,))),
        )
    ]
    Z = fits[0].transform(Xnew)
    ref = fits[0].inverse_transform(Z)
    assert isinstance(ref, np.ndarray) and ref.shape == Xnew.shape
    for f in fits[1:]:
        if kw["approximation"] == "rff":
            assert _rel(f.inverse_coef_, fits[0].inverse_coef_) < 1e-10
        assert _rel(f.inverse_transform(Z), ref) < 1e-10
        out = f.inverse_transform(da.from_array(Z, chunks=((7, 30, 3), (1, 2))))
        assert isinstance(out, da.Array) and out.chunks[0] == (7, 30, 3)
        assert _rel(out.compute(), ref) < 1e-10


@pytest.mark.parametrize("kw", APPROX)
def test_one_extra_pass_small_results_and_lazy_inverse(kw, raise_if_dask_computes):
    """The pre-image statistics cost exactly one more read of every block (counted at
    the source), the client receives nothing with n rows (only r × r and r × d sums),
    and ``inverse_transform`` of dask scores computes nothing."""
    n, d = 3000, 5
    X0 = np.random.default_rng(2).standard_normal((n, d))
    X, counter = counted_dask(X0, chunks=(500, d))
    plain = KernelPCA(3, random_state=0, **kw).fit(X)
    reads_plain, counter.reads = counter.reads, 0
    with recorded_results() as results:
        m = KernelPCA(3, fit_inverse_transform=True, random_state=0, **kw).fit(X)
    assert m.n_passes_ == plain.n_passes_ + 1
    assert counter.reads == reads_plain + X.numblocks[0]
    sizes = [a.shape for r in results for a in arrays_in(r)]
    assert all(s[0] < n for s in sizes if len(s)), sizes
    r = m.inverse_coef_.shape[0]
    assert m.inverse_coef_.shape == (r, d) and r <= kw["n_features"]
    Zd = da.from_array(m.transform(X0[:40]), chunks=10)
    with raise_if_dask_computes():
        out = m.inverse_transform(Zd)
    assert out.shape == (40, d)


# -- de-noising (the seeds' last kernel PCA example) -----------------------------------
def _noisy_digits(n_train=600, n_test=200, sigma=0.25, seed=0):
    X = load_digits().data / 16.0
    rng = np.random.default_rng(seed)
    X = X[rng.permutation(len(X))[: n_train + n_test]]
    noisy = X + sigma * rng.standard_normal(X.shape)
    return noisy[:n_train], X[n_train:], noisy[n_train:]


def test_denoising_digits_beats_noise_and_linear_pca():
    """Noisy digits (σ = 0.25 on pixels in [0, 1]) → kernel PCA (rbf) → pre-images:
    closer to the clean digits than the noisy input, and than linear PCA's
    reconstruction with the same number of components or its best one over 4 … 32
    components."""
    train, clean, noisy = _noisy_digits()

    def mse(a):
        return float(np.mean((np.asarray(a) - clean) ** 2))

    kp = KernelPCA(
        32,
        gamma=0.01,
        approximation="nystroem",
        n_features=300,
        fit_inverse_transform=True,
        alpha=0.05,
        random_state=0,
    )
    kp.fit(da.from_array(train, chunks=150))
    err_kpca = mse(kp.inverse_transform(kp.transform(noisy)))
    err_pca = {
        k: mse(p.inverse_transform(p.transform(noisy)))
        for k in (4, 8, 16, 32)
        for p in [PCA(k).fit(train)]
    }
    assert err_kpca < 0.5 * mse(noisy)
    assert err_kpca < min(err_pca.values()) < mse(noisy)


# -- the store -------------------------------------------------------------------------
@pytest.mark.parametrize("kw", ALL)
def test_saved_preimage_model_loads(tmp_path, data, kw):
    X, Xnew = data
    m = KernelPCA(
        3, gamma=0.3, fit_inverse_transform=True, alpha=0.2, random_state=0, **kw
    ).fit(X)
    m.save(tmp_path / "m.zarr")
    back = scalepca.load(tmp_path / "m.zarr")
    assert back.get_params() == m.get_params()
    Z = m.transform(Xnew)
    np.testing.assert_array_equal(back.inverse_transform(Z), m.inverse_transform(Z))


# -- features NaN in every sample, xarray, pipelines -----------------------------------
@pytest.mark.parametrize("kw", ALL)
def test_left_out_features_come_back_nan(data, kw):
    X, Xnew = data
    Xl = X.copy()
    Xl[:, [1, 4]] = np.nan
    keep = np.ones(6, dtype=bool)
    keep[[1, 4]] = False
    ref = KernelPCA(3, fit_inverse_transform=True, random_state=0, **kw).fit(X[:, keep])
    with pytest.warns(UserWarning, match="NaN in every sample"):
        m = KernelPCA(3, fit_inverse_transform=True, random_state=0, **kw).fit(
            da.from_array(Xl, chunks=60)
        )
    Z = ref.transform(Xnew[:, keep])
    out = m.inverse_transform(Z)
    assert np.isnan(out[:, ~keep]).all()
    assert _rel(out[:, keep], ref.inverse_transform(Z)) < 1e-10


def test_xarray_scores_give_a_field_back(rng):
    arr = xr.DataArray(
        rng.standard_normal((80, 3, 4)),
        dims=("time", "lat", "lon"),
        coords={
            "time": np.arange(80),
            "lat": [-10.0, 0.0, 10.0],
            "lon": [0.0, 90.0, 180.0, 270.0],
        },
    )
    X = scalepca.open_matrix(arr.chunk({"time": 25}), sample_dims="time")
    m = KernelPCA(3, n_features=50, fit_inverse_transform=True, random_state=0).fit(X)
    Z = m.transform(X)
    back = m.inverse_transform(Z)
    assert isinstance(back, xr.DataArray) and back.chunks is not None
    assert set(back.dims) == {"time", "lat", "lon"}
    flat = m.inverse_transform(Z.values)
    # the pre-image map (cosines of |Z W| arguments, then ridge coefficients) amplifies
    # a product's rounding: NumPy alone, the same rows in one call or in blocks of 25 or
    # 1, differs by up to 8e-12 (values ~1) with OpenBLAS 0.3.31's kernels, so 1e-10
    # here
    np.testing.assert_allclose(
        back.transpose("time", "lat", "lon").values.reshape(80, -1),
        flat,
        rtol=1e-10,
        atol=1e-10,
    )


def test_weighted_field_comes_back_in_its_units(rng):
    """With √cos(lat) weights the model is fitted on the weighted matrix; its
    pre-images are divided by the weights again (as the linear models'
    reconstructions): they equal the pre-images of a model fitted on the weighted
    matrix as a bare array, divided by w."""
    lat = np.array([-60.0, -20.0, 20.0, 60.0])
    arr = xr.DataArray(
        rng.standard_normal((90, 4, 3)) + 1.0,
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(90), "lat": lat, "lon": [0.0, 120.0, 240.0]},
    )
    X = scalepca.open_matrix(
        arr.chunk({"time": 30}), sample_dims="time", weights="sqrt_coslat"
    )
    kw = {
        "n_features": 40,
        "gamma": 0.1,
        "fit_inverse_transform": True,
        "random_state": 0,
    }
    m = KernelPCA(3, **kw).fit(X)
    Z = m.transform(X)
    back = m.inverse_transform(Z)
    assert back.dims == arr.dims
    w = np.repeat(np.sqrt(np.cos(np.deg2rad(lat))), 3)
    ref = KernelPCA(3, **kw).fit(arr.values.reshape(90, -1) * w)
    inner = ref.inverse_transform(ref.transform(arr.values.reshape(90, -1) * w))
    np.testing.assert_allclose(
        back.values.reshape(90, -1), inner / w, rtol=1e-10, atol=1e-10
    )


def test_pipeline_inverse_transform(data):
    X, _ = data
    pipe = make_pipeline(
        StandardScaler(),
        KernelPCA(3, n_features=60, random_state=0, fit_inverse_transform=True),
    ).fit(X)
    assert pipe.inverse_transform(pipe.transform(X)).shape == X.shape
    plain = make_pipeline(
        StandardScaler(), KernelPCA(3, n_features=60, random_state=0)
    ).fit(X)
    assert not hasattr(plain, "inverse_transform")


# -- bad input -------------------------------------------------------------------------
def test_inverse_transform_needs_the_option(data):
    X, _ = data
    m = KernelPCA(2, n_features=50, random_state=0).fit(X)
    assert not hasattr(m, "inverse_transform")
    # as scikit-learn: NotFittedError (an AttributeError and a ValueError) naming the
    # option
    with pytest.raises(NotFittedError, match="fit_inverse_transform"):
        m.inverse_transform(np.zeros((3, 2)))
    with pytest.raises(AttributeError, match="fit_inverse_transform=True"):
        m.inverse_transform  # noqa: B018
    # switched on after a fit without it: the map was never learned
    m.set_params(fit_inverse_transform=True)
    with pytest.raises(
        NotFittedError, match="fit it again with fit_inverse_transform=True"
    ):
        m.inverse_transform(np.zeros((3, 2)))
    with pytest.raises(NotFittedError, match="not fitted"):
        KernelPCA(2, fit_inverse_transform=True).inverse_transform(np.zeros((3, 2)))


@pytest.mark.parametrize("kw", ALL)
def test_wrong_number_of_score_columns(data, kw, raise_if_dask_computes):
    X, _ = data
    m = KernelPCA(3, fit_inverse_transform=True, random_state=0, **kw).fit(X)
    with (
        raise_if_dask_computes(),
        pytest.raises(ValueError, match="4 columns; the model has 3"),
    ):
        m.inverse_transform(da.zeros((10, 4), chunks=5))


@pytest.mark.parametrize(
    "params,exc,match",
    [
        ({"alpha": -1.0}, ValueError, "alpha must be >= 0"),
        ({"alpha": "big"}, TypeError, "alpha must be a real number"),
        (
            {"fit_inverse_transform": "yes"},
            TypeError,
            "fit_inverse_transform must be True or False",
        ),
    ],
)
def test_bad_parameters_before_compute(params, exc, match, raise_if_dask_computes):
    X = da.ones((100, 4), chunks=25)
    with raise_if_dask_computes(), pytest.raises(exc, match=match):
        KernelPCA(2, **params).fit(X)


# -- configs and the command line ------------------------------------------------------
def test_config_reconstruction_needs_the_option(tmp_path, capsys):
    """``output.reconstruction`` with kernel PCA is refused at validation unless the
    model learns pre-images; with ``fit_inverse_transform: true`` the CLI writes
    them."""

    path = tmp_path / "x.zarr"
    write_dataset(make_low_rank(600, 8, rank=3, chunk_rows=150, seed=1), path)
    cfg = {
        "data": {"path": str(path)},
        "model": {
            "method": "kernel_pca",
            "n_components": 2,
            "n_features": 60,
            "random_state": 0,
        },
        "cluster": {
            "kind": "local",
            "n_workers": 1,
            "threads_per_worker": 2,
            "processes": False,
        },
        "output": {"store": str(tmp_path / "out"), "reconstruction": True},
    }
    with pytest.raises(
        ConfigError, match="output.reconstruction.*fit_inverse_transform=True"
    ):
        validate_config(cfg)
    cfg["model"]["fit_inverse_transform"] = True
    validate_config(cfg)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", str(tmp_path / "run.yaml")]) == EXIT_OK, capsys.readouterr().err
    X = zarr.open_array(path, mode="r")[...]
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    rec = zarr.open_group(tmp_path / "out" / "reconstruction.zarr", mode="r")[
        "reconstruction"
    ]
    np.testing.assert_allclose(
        rec[...], model.inverse_transform(model.transform(X)), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("approximation", ["exact", "nystroem", "rff"])
def test_standardized_preimages_come_back_in_the_inputs_units(approximation):
    """With ``standardize=True`` the ridge learns standardised rows; the pre-images
    are the inputs' own units: the same as a model of StandardScaler-ed data, scaled
    back."""
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data
    scaler = StandardScaler().fit(X)
    params = dict(
        approximation=approximation,
        n_features=200,
        fit_inverse_transform=True,
        alpha=1e-3,
        random_state=0,
        gamma=0.05,
    )
    kp = scalepca.KernelPCA(5, standardize=True, **params).fit(X)
    ref = scalepca.KernelPCA(5, **params).fit(scaler.transform(X))
    got = kp.inverse_transform(kp.transform(X))
    want = scaler.inverse_transform(
        ref.inverse_transform(ref.transform(scaler.transform(X)))
    )
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
