"""The one-pass Poisson bootstrap of EOFs (scalepca.analysis.bootstrap,
scalepca.linalg.bootstrap) against dense references and against xeofs' EOFBootstrapper
on eofs' winter SST.

xeofs' replicates (B = 1000 refits, about three minutes) are kept in
tests/fixtures/bootstrap/xeofs_sst_bootstrap.npz, written by make_xeofs_reference.py
beside it.
"""

from __future__ import annotations

from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
from scalepca.analysis.bootstrap import BootstrapEOF
from scalepca.linalg import bootstrap as boot

FIXTURE = Path(__file__).parent / "fixtures" / "bootstrap" / "xeofs_sst_bootstrap.npz"


@pytest.fixture(scope="module")
def field(sst):
    return sst.assign_coords(latitude=sst["latitude"].astype(np.float64))


@pytest.fixture(scope="module")
def coarse(field):
    """Every third latitude and longitude: 60 cells (50 time steps), for the d × d
    path."""
    return field.isel(latitude=slice(None, None, 3), longitude=slice(None, None, 3))


def _matrix(f, chunks=7):
    return scalepca.open_matrix(
        f.chunk({"time": chunks}), sample_dims="time", weights="sqrt_coslat"
    )


# -- the kernels -----------------------------------------------------------------------
def test_poisson_weights_depend_on_the_row_only():
    w = boot.poisson_weights(7, np.arange(5000), 40)
    np.testing.assert_array_equal(
        boot.poisson_weights(7, np.arange(1200, 1300), 40), w[1200:1300]
    )
    assert (
        abs(w.mean() - 1) < 0.01 and abs(w.var() - 1) < 0.02
    )  # Poisson(1): mean = var = 1
    assert np.all(w == np.round(w)) and w.min() == 0
    for k in range(4):  # P(w = k) = e⁻¹ / k!
        assert abs((w == k).mean() - np.exp(-1) / np.prod(np.arange(1, k + 1))) < 0.005
    assert not np.array_equal(w, boot.poisson_weights(8, np.arange(5000), 40))
    # replicates are not copies of one another
    assert np.abs(np.corrcoef(w[:, :5].T) - np.eye(5)).max() < 0.05


def test_replicate_moments_equal_weighted_covariances(rng):
    X = rng.normal(size=(90, 6)) * [1, 2, 3, 4, 5, 6] + 10
    parts = [
        boot.weighted_block_moments(X[i : i + 20], i, 3, 5) for i in range(0, 90, 20)
    ]
    acc = parts[0]
    for p in parts[1:]:
        acc = boot.merge_weighted(acc, p)
    w = boot.poisson_weights(3, np.arange(90), 5)
    for b in range(5):
        expected = np.cov(X.T, fweights=w[:, b].astype(int)) * (w[:, b].sum() - 1)
        np.testing.assert_allclose(acc["wm2"][b], expected, rtol=1e-10)
    np.testing.assert_allclose(acc["m2"], np.cov(X.T) * 89, rtol=1e-10)
    # the Gram route: the same eigenvalues from the n × n sample Gram
    Xc = X - X.mean(axis=0)
    for b in range(5):
        M = boot.replicate_gram(Xc @ Xc.T, w[:, b])
        top = np.linalg.eigvalsh(M)[::-1][:6]
        np.testing.assert_allclose(
            top, np.linalg.eigvalsh(acc["wm2"][b])[::-1], rtol=1e-9
        )


def test_covariance_partials_hold_a_replicate_group(rng, monkeypatch):
    """No partial of the covariance path holds every replicate's d × d Gram: 100
    replicates at d = 300 are 72 MB of Grams, and a worker merging two of them held
    three times that (the merge's update too). Each partial holds one group (at most 64
    MiB), every block is read once, and the fit equals the NumPy weighted covariances'
    eigenvalues."""
    import dask.array as da

    from scalepca.analysis.bootstrap import BootstrapEOF

    X = rng.normal(size=(400, 300)) * np.linspace(3, 0.5, 300)
    sizes, merge = [], boot.merge_weighted

    def recorded(a, b):
        sizes.extend([a["wm2"].nbytes, b["wm2"].nbytes])
        return merge(a, b)

    monkeypatch.setattr(boot, "merge_weighted", recorded)
    B = 100
    est = BootstrapEOF(
        3, n_bootstraps=B, solver="covariance", random_state=4, max_partial_bytes=2**30
    ).fit(da.from_array(X, chunks=(100, 300)))
    assert sizes and max(sizes) <= 64 * 2**20 < B * 300**2 * 8
    w = boot.poisson_weights(est.seed_, np.arange(400), B)
    for b in (0, 57, 99):  # replicates of the first, a middle and the last group
        C = np.cov(X.T, fweights=w[:, b].astype(int))
        top = np.linalg.eigvalsh(C)[::-1][:3]
        np.testing.assert_allclose(
            est.explained_variance_samples_[b, :3], top, rtol=1e-9
        )


# -- against xeofs ---------------------------------------------------------------------
def test_intervals_equal_xeofs_within_monte_carlo_error(field):
    ref = np.load(FIXTURE)
    R = ref["ratio"][:, :4]
    model = BootstrapEOF(4, n_bootstraps=1000, random_state=0).fit(_matrix(field))
    assert model.solver_ == "gram"
    np.testing.assert_allclose(
        model.explained_variance_ratio_, ref["ratio_fit"][:4], rtol=1e-10
    )
    M = model.explained_variance_ratio_samples_[:, :4]
    q = [2.5, 50, 97.5]
    # Monte Carlo standard error of each percentile: the spread of the percentile over
    # resamples of the 1000 replicates (both sets), fixed seed
    pick = np.random.default_rng(0)
    se = [
        np.std(
            [
                np.percentile(S[pick.integers(0, len(S), len(S))], q, axis=0)
                for _ in range(200)
            ],
            axis=0,
        )
        for S in (R, M)
    ]
    z = (np.percentile(M, q, axis=0) - np.percentile(R, q, axis=0)) / np.hypot(*se)
    assert np.abs(z).max() < 3, z  # measured: 1.6
    np.testing.assert_allclose(
        model.explained_variance_ratio_interval_, np.percentile(M, [2.5, 97.5], axis=0)
    )
    # the spread of the EOFs over the replicates (per feature, averaged over the ocean)
    np.testing.assert_allclose(
        np.nanmean(model.components_std_, axis=1),
        np.nanmean(ref["components_std"][:4], axis=1),
        rtol=0.05,
    )
    assert model.n_significant_ == 1 and model.separated_.tolist() == [
        True,
        False,
        False,
        False,
    ]


# -- passes, paths, chunking -----------------------------------------------------------
@pytest.mark.parametrize(
    "solver,pca_solver,n_passes",
    [("gram", "snapshot", 2), ("covariance", "covariance_eigh", 1)],
)
def test_no_pass_beyond_the_fit(coarse, solver, pca_solver, n_passes):
    X = _matrix(coarse)
    model = BootstrapEOF(3, n_bootstraps=60, solver=solver).fit(X)
    pca = scalepca.PCA(3, svd_solver=pca_solver).fit(X)
    assert model.n_passes_ == pca.n_passes_ == n_passes
    np.testing.assert_allclose(
        model.explained_variance_ratio_, pca.explained_variance_ratio_, rtol=1e-10
    )
    ocean = ~np.isnan(model.components_[0])
    V = (
        pca.components_[:, ocean]
        if pca.components_.shape[1] == ocean.size
        else pca.components_
    )
    signs = np.sign(np.sum(V * model.components_[:, ocean], axis=1))[:, None]
    np.testing.assert_allclose(model.components_[:, ocean], V * signs, atol=1e-10)


def test_rotation_of_the_bootstrap_eofs_equals_the_pca_s(field):
    """EOFs, their bootstrap and their varimax rotation in the bootstrap's two
    passes: the Rotator rotates a BootstrapEOF's EOFs (no read) as it rotates the
    same PCA's, to 1e-8; rotated scores need a model that projects data, refused
    before any compute."""
    X = _matrix(field)
    model = BootstrapEOF(4, n_bootstraps=20).fit(X)
    pca = scalepca.PCA(4, svd_solver="snapshot").fit(X)
    rot, ref = scalepca.Rotator(4).fit(model), scalepca.Rotator(4).fit(pca)
    assert model.n_passes_ == 2
    np.testing.assert_allclose(
        rot.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-8
    )
    np.testing.assert_allclose(
        rot.components_, ref.components_, atol=1e-8, equal_nan=True
    )
    assert rot.components_xr_.dims == ref.components_xr_.dims
    with pytest.raises(TypeError, match="does not project data on EOFs"):
        rot.transform(X)


def test_paths_and_chunkings_agree(coarse):
    fits = [
        BootstrapEOF(3, n_bootstraps=50, solver=s, random_state=5).fit(
            _matrix(coarse, c)
        )
        for s, c in (
            ("gram", 7),
            ("covariance", 7),
            ("covariance", 50),
            ("covariance", 3),
        )
    ]
    for other in fits[1:]:
        np.testing.assert_allclose(
            other.explained_variance_ratio_samples_,
            fits[0].explained_variance_ratio_samples_,
            rtol=1e-10,
        )
        np.testing.assert_allclose(
            other.components_interval_,
            fits[0].components_interval_,
            atol=1e-10,
            equal_nan=True,
        )
        np.testing.assert_allclose(
            other.components_std_, fits[0].components_std_, atol=1e-10, equal_nan=True
        )
    again = BootstrapEOF(3, n_bootstraps=50, random_state=6).fit(_matrix(coarse))
    assert not np.allclose(
        again.explained_variance_ratio_samples_,
        fits[0].explained_variance_ratio_samples_,
    )


def test_partial_eigendecompositions_equal_full_ones(coarse, monkeypatch):
    """Large replicate matrices, and the fit's large sample Gram, take ARPACK's leading
    eigenpairs: the same results."""
    full = BootstrapEOF(3, n_bootstraps=30, random_state=2).fit(_matrix(coarse))
    monkeypatch.setattr(boot, "PARTIAL_EIGH_SIDE", 10)
    for solver in ("gram", "covariance"):
        part = BootstrapEOF(3, n_bootstraps=30, random_state=2, solver=solver).fit(
            _matrix(coarse)
        )
        np.testing.assert_allclose(
            part.explained_variance_ratio_samples_,
            full.explained_variance_ratio_samples_,
            rtol=1e-9,
        )
        np.testing.assert_allclose(
            part.components_interval_,
            full.components_interval_,
            atol=1e-9,
            equal_nan=True,
        )
        # the fit's own leading pairs too (of the n × n Gram for "gram"; its variance
        # from the trace)
        np.testing.assert_allclose(
            part.explained_variance_ratio_, full.explained_variance_ratio_, rtol=1e-10
        )
        np.testing.assert_allclose(
            part.components_, full.components_, atol=1e-9, equal_nan=True
        )


def test_selection_rule_finds_the_separated_modes(rng):
    n, d = 400, 30
    latent = rng.normal(size=(n, 2)) * [6.0, 3.0]
    X = latent @ np.linalg.qr(rng.normal(size=(d, 2)))[0].T + rng.normal(size=(n, d))
    model = BootstrapEOF(4, n_bootstraps=200).fit(da.from_array(X, chunks=(64, -1)))
    assert model.solver_ == "covariance" and model.n_passes_ == 1
    assert model.n_significant_ == 2
    assert model.separated_[:2].all() and not model.separated_[2:].any()
    lo, hi = model.explained_variance_ratio_interval_
    # the signal modes' intervals hold their fitted ratio (a noise mode's need not:
    # resampling lifts the leading noise eigenvalues, a known bias of the bootstrap of
    # eigenvalues)
    assert np.all(lo[:2] <= model.explained_variance_ratio_[:2])
    assert np.all(model.explained_variance_ratio_[:2] <= hi[:2])


# -- refusals, save/load ---------------------------------------------------------------
def test_bad_input_is_refused_before_compute(field, raise_if_dask_computes):
    X = _matrix(field)
    cases = [
        (dict(n_components=0), "n_components must be an integer of at least 1"),
        (dict(n_components=50), "n_components=50 but the field has 50 samples"),
        (dict(n_bootstraps=1), "n_bootstraps must be >= 2"),
        (dict(confidence=1.5), "confidence must be a number between 0 and 1"),
        (dict(random_state=-3), "random_state must be a non-negative integer"),
        (dict(solver="svd"), "solver='svd' is not one of the allowed values"),
        (dict(solver="covariance", n_bootstraps=1000), "over max_partial_bytes"),
    ]
    for params, match in cases:
        with raise_if_dask_computes(), pytest.raises(ValueError, match=match):
            BootstrapEOF(**{"n_components": 2, **params}).fit(X)
    holed = field.values.reshape(50, -1).copy()
    holed[3, int(np.flatnonzero(~np.isnan(holed).any(axis=0))[0])] = np.nan
    with pytest.raises(ValueError, match="NaN at some samples only"):
        BootstrapEOF(2, n_bootstraps=10).fit(holed)


def test_save_load(coarse, tmp_path):
    model = BootstrapEOF(3, n_bootstraps=40, random_state=None).fit(_matrix(coarse))
    assert isinstance(model.seed_, int)
    model.save(tmp_path / "boot.zarr")
    loaded = scalepca.load(tmp_path / "boot.zarr")
    assert type(loaded) is BootstrapEOF and loaded.get_params() == model.get_params()
    for name in (
        "components_",
        "explained_variance_ratio_samples_",
        "components_interval_",
        "separated_",
    ):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.n_significant_ == model.n_significant_ and loaded.seed_ == model.seed_
    lo, hi = loaded.components_interval()
    assert lo.dims == ("mode", "latitude", "longitude")
    xr.testing.assert_equal(loaded.components(), model.components())
