"""Robust PCA: the Candès–Li–Ma–Wright recovery problems, a dense NumPy inexact-ALM
reference, the P_Ω (mask) variant, chunkings, determinism, zarr scratch storage,
checkpoints that survive SIGKILL, save/load and the error paths."""

from __future__ import annotations

import contextlib
import os
import sys
import textwrap
import time

import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone

import scalepca
from scalepca.linalg import svt as svt_mod
from scalepca.linalg.svt import (
    low_rank_from_factors,
    predict_rank,
    randomized_partial_svd,
    soft_threshold,
)
from scalepca.models import robust_pca as rpca_mod

from .conftest import land_inserted


def clmw_problem(n, frac=0.05, seed=0):
    """The random problems of Candès, Li, Ma & Wright (2011), Table 1.

    L0 = X Yᵀ with X, Y of size n × r, entries N(0, 1/n), r = 0.05 n; S0 has frac ·
    n² entries at uniformly random positions with values ±1.
    """
    rng = np.random.default_rng(seed)
    r = int(round(0.05 * n))
    X = rng.normal(0.0, np.sqrt(1.0 / n), (n, r))
    Y = rng.normal(0.0, np.sqrt(1.0 / n), (n, r))
    L0 = X @ Y.T
    m = int(round(frac * n * n))
    idx = rng.choice(n * n, m, replace=False)
    S0 = np.zeros(n * n)
    S0[idx] = rng.choice([-1.0, 1.0], m)
    return L0, S0.reshape(n, n), r


def reference_ialm(M, *, lam, mu0, norm2, rho=1.5, tol=1e-7, max_iter=100, mask=None):
    """Plain NumPy inexact ALM with a full LAPACK SVD per iteration (same updates and
    start as scalepca: Y₀ = M/J(M), L first, then S, then Y)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(
        limits=1, user_api="blas"
    ):  # no BLAS oversubscription under xdist
        return _reference_ialm(
            M,
            lam=lam,
            mu0=mu0,
            norm2=norm2,
            rho=rho,
            tol=tol,
            max_iter=max_iter,
            mask=mask,
        )


def _reference_ialm(M, *, lam, mu0, norm2, rho, tol, max_iter, mask):
    W = np.ones(M.shape, dtype=bool) if mask is None else mask
    M = np.where(W, M, 0.0)
    J = max(norm2, np.abs(M).max() / lam)
    Y, S, mu, fro = M / J, np.zeros_like(M), mu0, np.linalg.norm(M)
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        U, s, Vt = np.linalg.svd(M - S + Y / mu, full_matrices=False)
        s = np.maximum(s - 1.0 / mu, 0.0)
        L = (U * s) @ Vt
        T = M - L + Y / mu
        S = np.where(W, soft_threshold(T, lam / mu), T)
        Z = np.where(W, M - L - S, 0.0)
        Y = Y + mu * Z
        mu = min(rho * mu, 1e7 * mu0)
        if np.linalg.norm(Z) / fro <= tol:
            break
    return L, np.where(W, S, 0.0), n_iter, int(np.count_nonzero(s))


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


# -- the published recovery problems ---------------------------------------------------
@pytest.mark.parametrize(
    "n, frac",
    [
        (200, 0.05),
        (300, 0.10),
        (400, 0.05),
        pytest.param(500, 0.05, marks=pytest.mark.slow),
        pytest.param(500, 0.10, marks=pytest.mark.slow),
    ],
)
def test_clmw_table1_recovery(n, frac):
    """Targets from the issue (CLMW 2011 Table 1 report ~1e-6, exact rank and support,
    15–20 SVDs): relative error ≤ 1e-5, rank = r, ‖S‖₀ = ‖S0‖₀, ≤ 25 iterations."""
    L0, S0, r = clmw_problem(n, frac)
    est = scalepca.RobustPCA(random_state=0).fit(da.from_array(L0 + S0, chunks=n // 2))
    L, S = est.low_rank_.compute(), est.sparse_.compute()
    assert est.converged_
    assert rel(L, L0) <= 1e-5
    assert est.rank_ == r
    assert np.linalg.matrix_rank(L, tol=1e-8) == r
    assert est.nnz_ == np.count_nonzero(S) == np.count_nonzero(S0)
    np.testing.assert_array_equal(np.sign(S), S0)  # same support, same signs
    assert est.n_iter_ <= 25
    assert est.history_["residual"][-1] <= 1e-7
    assert len(est.history_["residual"]) == est.n_iter_


def test_full_svd_path_matches_numpy_reference():
    """svd='full' follows the dense NumPy inexact ALM iterate for iterate."""
    L0, S0, r = clmw_problem(120)
    M = L0 + S0
    est = scalepca.RobustPCA(svd="full", random_state=0).fit(
        da.from_array(M, chunks=50)
    )
    L, S, it, rank = reference_ialm(M, lam=est.lam_, mu0=est.mu0_, norm2=est.norm2_)
    assert est.n_iter_ == it and est.rank_ == rank
    np.testing.assert_allclose(est.low_rank_.compute(), L, atol=1e-9)
    np.testing.assert_allclose(est.sparse_.compute(), S, atol=1e-9)


def test_randomized_agrees_with_full_svd():
    L0, S0, r = clmw_problem(200, seed=3)
    M = da.from_array(L0 + S0, chunks=(70, 90))
    a = scalepca.RobustPCA(random_state=1).fit(M)
    b = scalepca.RobustPCA(svd="full").fit(M)
    assert a.rank_ == b.rank_ == r
    assert rel(a.low_rank_.compute(), b.low_rank_.compute()) < 1e-5
    np.testing.assert_array_equal(a.sparse_.compute() != 0, b.sparse_.compute() != 0)


def test_no_dense_svd_on_randomized_path(monkeypatch):
    """Only (n × l) and smaller matrices are decomposed on the client."""
    shapes = []
    orig = svt_mod.sla.svd

    def spy(a, *args, **kw):
        shapes.append(np.shape(a))
        return orig(a, *args, **kw)

    monkeypatch.setattr(svt_mod.sla, "svd", spy)
    L0, S0, r = clmw_problem(200)
    est = scalepca.RobustPCA(random_state=0, n_oversamples=5).fit(
        da.from_array(L0 + S0, chunks=100)
    )
    assert shapes and max(min(s) for s in shapes) <= max(est.history_["sv"]) + 5 < 200


# -- mask (P_Ω) ------------------------------------------------------------------------
def test_mask_matches_reference_and_completes():
    """Robust matrix completion: 80 % observed, unobserved entries hold NaN."""
    L0, S0, r = clmw_problem(200, seed=5)
    rng = np.random.default_rng(7)
    W = rng.random(L0.shape) < 0.8
    M = np.where(W, L0 + S0, np.nan)
    est = scalepca.RobustPCA(mask=W, svd="full").fit(da.from_array(M, chunks=(100, 80)))
    L, S, it, rank = reference_ialm(
        np.nan_to_num(M), lam=est.lam_, mu0=est.mu0_, norm2=est.norm2_, mask=W
    )
    assert est.n_iter_ == it and est.rank_ == rank == r
    np.testing.assert_allclose(est.low_rank_.compute(), L, atol=1e-8)
    Sx = est.sparse_.compute()
    np.testing.assert_allclose(Sx, S, atol=1e-8)
    assert not np.any(Sx[~W])
    # the unobserved entries of L0 are recovered too, and the corruptions on Ω found
    assert rel(est.low_rank_.compute(), L0) < 1e-4
    np.testing.assert_array_equal(Sx != 0, (S0 != 0) & W)

    rnd = scalepca.RobustPCA(mask=da.from_array(W, chunks=60), random_state=0).fit(M)
    assert rnd.rank_ == r and rel(rnd.low_rank_.compute(), L0) < 1e-4


def test_mask_errors():
    M = np.ones((20, 30))
    with pytest.raises(ValueError, match="mask has shape"):
        scalepca.RobustPCA(mask=np.ones((30, 20), bool)).fit(M)
    with pytest.raises(TypeError, match="mask must be boolean"):
        scalepca.RobustPCA(mask=np.ones((20, 30)) * 0.5).fit(M)
    M[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite.*mask="):
        scalepca.RobustPCA().fit(M)


# -- chunking, determinism, storage ----------------------------------------------------
def test_chunking_invariance():
    L0, S0, r = clmw_problem(240, seed=2)
    M = L0 + S0
    fits = [
        scalepca.RobustPCA(random_state=4).fit(X)
        for X in (
            M,
            da.from_array(M, chunks=(50, 120)),
            da.from_array(M, chunks=(97, 61)),
            da.from_array(
                M, chunks=-1
            ),  # one chunk (cut into square blocks like NumPy input)
        )
    ]
    ref = fits[0]
    for est in fits[1:]:
        assert est.rank_ == ref.rank_ == r and est.n_iter_ == ref.n_iter_
        assert est.nnz_ == ref.nnz_ == np.count_nonzero(S0)
        np.testing.assert_allclose(
            est.singular_values_, ref.singular_values_, rtol=1e-8
        )
        np.testing.assert_allclose(
            est.low_rank_.compute(), ref.low_rank_.compute(), atol=1e-8
        )


def test_float32_data_are_fitted_in_float64():
    """Float32 data give the fit of their values in float64: the iterates are float64
    (the starting SVT argument M (1 + c) and the spectral-norm estimate too, not
    rounded to float32), so the result equals the fit of the same values held in
    float64."""
    L0, S0, r = clmw_problem(120, seed=5)
    M32 = (L0 + S0).astype(np.float32)
    M64 = M32.astype(np.float64)
    for svd in ("full", "randomized"):
        a = scalepca.RobustPCA(svd=svd, random_state=0).fit(
            da.from_array(M32, chunks=50)
        )
        b = scalepca.RobustPCA(svd=svd, random_state=0).fit(
            da.from_array(M64, chunks=50)
        )
        assert a.n_iter_ == b.n_iter_ and a.rank_ == b.rank_ == r
        assert a.norm2_ == pytest.approx(b.norm2_, rel=1e-12)
        np.testing.assert_allclose(
            a.history_["residual"], b.history_["residual"], rtol=1e-10
        )
        np.testing.assert_allclose(a.singular_values_, b.singular_values_, rtol=1e-10)
        np.testing.assert_allclose(
            a.low_rank_.compute(), b.low_rank_.compute(), atol=1e-10
        )


def test_determinism_with_random_state():
    L0, S0, _ = clmw_problem(200, seed=9)
    M = da.from_array(L0 + S0, chunks=(64, 100))
    a = scalepca.RobustPCA(random_state=11).fit(M)
    b = scalepca.RobustPCA(random_state=11).fit(M)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.singular_values_, b.singular_values_)
    assert a.history_["residual"] == b.history_["residual"]


def test_zarr_storage_matches_memory(tmp_path):
    L0, S0, r = clmw_problem(200, seed=4)
    M = da.from_array(
        L0 + S0, chunks=(80, 100)
    )  # irregular row chunks: rechunked for zarr
    mem = scalepca.RobustPCA(random_state=0, storage="memory").fit(M)
    zr = scalepca.RobustPCA(random_state=0, storage="zarr", scratch=str(tmp_path)).fit(
        M
    )
    assert mem.storage_ == "memory" and zr.storage_ == "zarr"
    assert zr.n_iter_ == mem.n_iter_ and zr.rank_ == mem.rank_ == r
    np.testing.assert_allclose(
        zr.low_rank_.compute(), mem.low_rank_.compute(), atol=1e-9
    )
    np.testing.assert_array_equal(zr.sparse_.compute(), mem.sparse_.compute())
    # only the final T and A remain in the scratch store
    (store,) = os.listdir(tmp_path)
    left = sorted(n for n in os.listdir(tmp_path / store) if not n.startswith("zarr"))
    assert left == ["A", f"T_{zr.n_iter_:06d}"]


# -- checkpoints -----------------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np, dask.array as da
    sys.path[:0] = [{tests!r}, {repo!r}]
    from tests.test_robust_pca import clmw_problem
    from tests.support.reliability import commits, stop_here
    from scalepca.models import robust_pca as m

    orig = m.svt
    def svt_until_commit_4(*a, **k):  # the run stops (and is SIGKILLed) after commit 4
        if any(int(c[6:]) >= 4 for c in commits({path!r})):
            stop_here()
        return orig(*a, **k)
    m.svt = svt_until_commit_4
    L0, S0, _ = clmw_problem(150, seed=1)
    est = m.RobustPCA(random_state=3, checkpoint={path!r}, checkpoint_every=2,
                      storage={storage!r})
    est.fit(da.from_array(L0 + S0, chunks=75))
    print("FINISHED", flush=True)
    """
)


@pytest.mark.parametrize("storage", ["memory", "zarr"])
def test_checkpoint_survives_sigkill(tmp_path, storage):
    from .support.reliability import REPO, commits, run_until_stopped

    path = str(tmp_path / "ck.zarr")
    code = CHILD.format(
        tests=os.path.dirname(__file__), repo=str(REPO), path=path, storage=storage
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # the child stops in the SVT of the iteration after commit 4 and is SIGKILLed there
    out = run_until_stopped([sys.executable, "-c", code], env=env)
    assert "FINISHED" not in out
    assert commits(path) == ["state_000004"]

    L0, S0, r = clmw_problem(150, seed=1)
    M = da.from_array(L0 + S0, chunks=75)
    resumed = scalepca.RobustPCA(
        random_state=3, checkpoint=path, checkpoint_every=2, storage=storage
    ).fit(M)
    fresh = scalepca.RobustPCA(
        random_state=3,
        storage=storage,
        scratch=str(tmp_path) if storage == "zarr" else None,
    ).fit(M)
    assert resumed.resumed_from_ == 4 and fresh.resumed_from_ == 0
    assert resumed.n_iter_ == fresh.n_iter_ and resumed.rank_ == fresh.rank_ == r
    assert resumed.history_["residual"] == pytest.approx(
        fresh.history_["residual"], rel=1e-9
    )
    np.testing.assert_allclose(
        resumed.low_rank_.compute(), fresh.low_rank_.compute(), atol=1e-12
    )
    np.testing.assert_array_equal(resumed.sparse_.compute(), fresh.sparse_.compute())
    assert rel(resumed.low_rank_.compute(), L0) <= 1e-5

    # a finished run resumes from its final commit without iterating
    again = scalepca.RobustPCA(
        random_state=3, checkpoint=path, checkpoint_every=2, storage=storage
    ).fit(M)
    assert again.resumed_from_ == again.n_iter_ == fresh.n_iter_
    np.testing.assert_allclose(again.components_, fresh.components_, atol=1e-12)
    left = [n for n in os.listdir(path) if n.startswith("state_")]
    assert left == [f"state_{fresh.n_iter_:06d}"]


def test_checkpoint_of_other_problem_is_refused(tmp_path):
    path = str(tmp_path / "ck.zarr")
    L0, S0, _ = clmw_problem(100, seed=1)
    with pytest.warns(Warning, match="did not converge"):
        scalepca.RobustPCA(random_state=0, checkpoint=path, max_iter=3).fit(L0 + S0)
    with pytest.raises(ValueError, match="different problem"):
        scalepca.RobustPCA(random_state=0, checkpoint=path).fit(L0 + 2 * S0)
    with pytest.raises(ValueError, match="different problem"):
        scalepca.RobustPCA(random_state=0, checkpoint=path, lam=0.3).fit(L0 + S0)
    with pytest.raises(ValueError, match="only local paths"):
        scalepca.RobustPCA(checkpoint="s3://bucket/ck.zarr").fit(L0 + S0)


def test_checkpoint_resume_with_another_tol(tmp_path):
    """A commit that met tol=1e-3 resumed with tol=1e-9 ends where a fresh fit to
    1e-9 ends; resumed with 1e-3 again it stops at once."""
    path = str(tmp_path / "ck.zarr")
    L0, S0, r = clmw_problem(100, seed=1)
    M = da.from_array(L0 + S0, chunks=50)
    fresh = scalepca.RobustPCA(random_state=0, tol=1e-9).fit(M)
    loose = scalepca.RobustPCA(random_state=0, tol=1e-3, checkpoint=path).fit(M)
    assert loose.converged_ and loose.n_iter_ < fresh.n_iter_
    tight = scalepca.RobustPCA(random_state=0, tol=1e-9, checkpoint=path).fit(M)
    assert tight.resumed_from_ == loose.n_iter_ and tight.converged_
    assert tight.n_iter_ == fresh.n_iter_ and tight.rank_ == fresh.rank_ == r
    assert tight.history_["residual"] == pytest.approx(
        fresh.history_["residual"], rel=1e-9
    )
    np.testing.assert_allclose(
        tight.low_rank_.compute(), fresh.low_rank_.compute(), atol=1e-12
    )
    again = scalepca.RobustPCA(random_state=0, tol=1e-3, checkpoint=path).fit(M)
    assert again.resumed_from_ == again.n_iter_ == fresh.n_iter_ and again.converged_
    np.testing.assert_allclose(again.components_, fresh.components_, atol=1e-12)


def test_checkpoint_of_permuted_data_or_other_parameters_is_refused(tmp_path):
    """‖M‖_F, max |M| and |Ω| do not see a permutation or a moved mask; the data
    sketch does. The seed, μ₀ and the first rank asked for change the result too."""
    path = str(tmp_path / "ck.zarr")
    L0, S0, _ = clmw_problem(60, seed=1)
    M = L0 + S0
    mask = np.random.default_rng(0).random(M.shape) > 0.1
    with pytest.warns(Warning, match="did not converge"):
        scalepca.RobustPCA(random_state=0, checkpoint=path, max_iter=2, mask=mask).fit(
            M
        )
    perm = np.random.default_rng(1).permutation(M.shape[1])
    for other, mask_other in [(M[:, perm], mask[:, perm]), (M[::-1], mask[::-1])]:
        with pytest.raises(ValueError, match=r"different problem \(data_sketch: "):
            scalepca.RobustPCA(random_state=0, checkpoint=path, mask=mask_other).fit(
                other
            )
    with pytest.raises(ValueError, match="different problem"):  # ‖P_Ω M‖ differs first
        scalepca.RobustPCA(
            random_state=0, checkpoint=path, mask=np.roll(mask, 1, axis=1)
        ).fit(M)
    for over in [{"random_state": 1}, {"mu": 0.1}, {"rank_guess": 3}]:
        key = next(iter(over))
        with pytest.raises(ValueError, match=rf"different problem \({key}: "):
            scalepca.RobustPCA(
                **{"random_state": 0, **over}, checkpoint=path, mask=mask
            ).fit(M)
    # entries off Ω may hold anything: the same problem
    with pytest.warns(Warning, match="did not converge"):
        resumed = scalepca.RobustPCA(
            random_state=0, checkpoint=path, max_iter=3, mask=mask
        ).fit(np.where(mask, M, np.nan))
    assert resumed.resumed_from_ == 2


def test_checkpoint_of_another_format_version_is_refused(tmp_path):
    import json

    path = tmp_path / "ck.zarr"
    L0, S0, _ = clmw_problem(60, seed=1)
    with pytest.warns(Warning, match="did not converge"):
        scalepca.RobustPCA(random_state=0, checkpoint=str(path), max_iter=2).fit(
            L0 + S0
        )
    meta = path / "state_000002" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["state"]["version"] = 99  # the commit's attrs live under "state"
    meta.write_text(json.dumps(doc))
    with pytest.raises(
        ValueError, match="version 99.*reads 'scalepca-iterate' version 1"
    ):
        scalepca.RobustPCA(random_state=0, checkpoint=str(path)).fit(L0 + S0)


# -- results as a model ----------------------------------------------------------------
def test_components_transform_save_load(tmp_path):
    L0, S0, r = clmw_problem(200, seed=6)
    M = da.from_array(L0 + S0, chunks=100)
    est = scalepca.RobustPCA(random_state=0).fit(M)
    U, s, Vt = est.U_, est.singular_values_, est.components_
    assert Vt.shape == (r, 200) and U.shape == (200, r)
    np.testing.assert_allclose(Vt @ Vt.T, np.eye(r), atol=1e-10)
    np.testing.assert_allclose(U.T @ U, np.eye(r), atol=1e-10)
    np.testing.assert_allclose(est.low_rank_.compute(), (U * s) @ Vt, atol=1e-12)
    # scores of clean rows are the scores of L; the axes span the row space of L0
    np.testing.assert_allclose(est.transform(L0), L0 @ Vt.T, atol=1e-12)
    np.testing.assert_allclose(est.transform(L0), U * s, atol=1e-4)
    np.testing.assert_allclose(est.inverse_transform(est.transform(L0)), L0, atol=1e-4)
    Z = est.transform(M)
    assert isinstance(Z, da.Array) and Z.shape == (200, r)
    est.save(str(tmp_path / "m.zarr"))
    back = scalepca.load(str(tmp_path / "m.zarr"))
    assert isinstance(back.low_rank_, da.Array) and back.rank_ == r
    np.testing.assert_allclose(back.low_rank_.compute(), est.low_rank_.compute())
    np.testing.assert_array_equal(back.sparse_.compute(), est.sparse_.compute())
    np.testing.assert_allclose(back.transform(L0), est.transform(L0))
    assert back.history_["rank"] == est.history_["rank"]
    assert clone(est).get_params() == est.get_params()


def test_masked_model_saves(tmp_path):
    L0, S0, _ = clmw_problem(100, seed=6)
    W = np.random.default_rng(0).random(L0.shape) < 0.9
    est = scalepca.RobustPCA(mask=W, random_state=0).fit(L0 + S0)
    est.save(str(tmp_path / "m.zarr"))
    back = scalepca.load(str(tmp_path / "m.zarr"))
    assert back.mask is None and est.mask is W
    np.testing.assert_array_equal(back.sparse_.compute(), est.sparse_.compute())


def _spy_svt(monkeypatch) -> list:
    """The SVTResult of every thresholding of the fits that follow."""
    results, orig = [], rpca_mod.svt

    def spy(*args, **kw):
        results.append(orig(*args, **kw))
        return results[-1]

    monkeypatch.setattr(rpca_mod, "svt", spy)
    return results


def test_pass_count_and_config_entry(monkeypatch):
    L0, S0, _ = clmw_problem(120, seed=8)
    svds = _spy_svt(monkeypatch)
    est = scalepca.RobustPCA(random_state=0, n_power_iter=2).fit(L0 + S0)
    # 1 statistics pass, 2 + 2·4 for ‖M‖₂, one A Ω before the first SVD, then per
    # iteration the SVD's passes — 1 for Aᵀ Q, 2 per power iteration (at least
    # n_power_iter unless the residual test ended it), 1 for that residual's A V,
    # 2 per growth, 1 more for a growth from AᵀA — and 1 update pass (which also
    # computes the next A Ω)
    assert len(svds) == est.n_iter_
    assert all(r.n_power >= 2 or r.n_residual for r in svds)
    assert est.n_passes_ == 1 + 10 + 1 + sum(
        1 + 2 * r.n_power + r.n_residual + 2 * r.n_restarts + r.n_gram + 1 for r in svds
    )
    # svd_tol=None: the fixed 2q + 1 SVD passes
    fixed = scalepca.RobustPCA(random_state=0, n_power_iter=2, svd_tol=None).fit(
        L0 + S0
    )
    assert fixed.n_passes_ == 1 + 10 + 1 + fixed.n_iter_ * (2 * 2 + 1 + 1)
    from scalepca.persistence.registry import estimator_class

    assert estimator_class("robust_pca") is scalepca.RobustPCA


class _GraphRuns:
    """Counts the dask graphs run by the local schedulers (one per ``compute`` or
    ``persist`` of dask collections; NumPy arrays pass through ``dask.compute``
    without one)."""

    def __enter__(self):
        from dask.callbacks import Callback

        self.n = 0

        def start(dsk):
            self.n += 1

        self._cb = Callback(start=start)
        self._cb.__enter__()
        return self

    def __exit__(self, *exc):
        self._cb.__exit__(*exc)


def test_small_numpy_input_is_fitted_on_the_client(monkeypatch):
    """NumPy input of at most ``LOCAL_MAX_ENTRIES`` entries is fitted with NumPy on
    the client: the fit runs two dask graphs (the statistics pass and gathering the
    cleaned M), not one per pass; the blocked path of the same data runs one graph per
    pass, one more per iteration (the update pass persists T and A, then gathers its
    reductions) and one for the first A. Both make the same passes and reach the same
    fit."""
    L0, S0, r = clmw_problem(200, seed=3)
    M = L0 + S0
    for svd_tol in ("auto", None):
        with _GraphRuns() as local_runs:
            local = scalepca.RobustPCA(random_state=0, svd_tol=svd_tol).fit(M)
        with _GraphRuns() as blocked_runs:
            blocked = scalepca.RobustPCA(random_state=0, svd_tol=svd_tol).fit(
                da.from_array(M, chunks=100)
            )
        assert local_runs.n == 2
        assert blocked_runs.n == blocked.n_passes_ + blocked.n_iter_ + 1
        assert local.n_passes_ == blocked.n_passes_
        assert local.n_iter_ == blocked.n_iter_ and local.rank_ == blocked.rank_ == r
        np.testing.assert_allclose(
            local.low_rank_.compute(), blocked.low_rank_.compute(), atol=1e-9
        )
        np.testing.assert_array_equal(
            local.sparse_.compute() != 0, blocked.sparse_.compute() != 0
        )
    # above the size: blocked
    monkeypatch.setattr(rpca_mod, "LOCAL_MAX_ENTRIES", 200 * 200 - 1)
    with _GraphRuns() as runs:
        big = scalepca.RobustPCA(random_state=0, svd_tol=None).fit(M)
    assert runs.n == big.n_passes_ + big.n_iter_ + 1


@pytest.mark.slow
def test_clmw_n1000_passes_and_graphs():
    """Candès et al. Table 1 at n = 1000, 5 % corruptions (the benchmark's problem):
    the passes of the default and of ``svd_tol=None``, pinned, and no dask graph per
    pass in memory (the time per pass is then the BLAS call's)."""
    L0, S0, r = clmw_problem(1000, seed=0)
    M = L0 + S0
    got = {}
    for svd_tol in ("auto", None):
        with _GraphRuns() as runs:
            est = scalepca.RobustPCA(random_state=0, svd_tol=svd_tol).fit(M)
        assert runs.n == 2 and est.rank_ == r
        assert rel(est.low_rank_.compute(), L0) <= 1e-5
        got[svd_tol] = (est.n_iter_, est.n_passes_)
    assert got == {"auto": (17, 115), None: (18, 84)}


def test_nonconvergence_warns():
    L0, S0, _ = clmw_problem(100)
    with pytest.warns(Warning, match="did not converge in 3 iterations"):
        est = scalepca.RobustPCA(max_iter=3, random_state=0).fit(L0 + S0)
    assert est.n_iter_ == 3 and not est.converged_


@pytest.mark.parametrize(
    "params, err, match",
    [
        ({"rho": 1.0}, ValueError, "rho must be > 1"),
        ({"lam": -1.0}, ValueError, "lam must be > 0"),
        ({"mu": 0.0}, ValueError, "mu must be > 0"),
        ({"tol": 0}, ValueError, "tol must be > 0"),
        ({"max_iter": 0}, ValueError, "max_iter must be >= 1"),
        ({"svd": "lanczos"}, ValueError, "svd='lanczos' is not one of"),
        ({"storage": "disk"}, ValueError, "storage='disk' is not one of"),
        ({"rank_guess": 0}, ValueError, "rank_guess must be >= 1"),
        ({"n_power_iter": 1.5}, TypeError, "n_power_iter must be an integer"),
        ({"svd_tol": 0.0}, ValueError, "svd_tol must be > 0"),
        ({"checkpoint_every": 0}, ValueError, "checkpoint_every must be >= 1"),
        ({"checkpoint": 3}, TypeError, "checkpoint must be a path"),
    ],
)
def test_parameter_errors(params, err, match):
    with pytest.raises(err, match=match):
        scalepca.RobustPCA(**params).fit(np.ones((10, 12)))


def test_input_errors(monkeypatch):
    with pytest.raises(ValueError, match="zero on all observed"):
        scalepca.RobustPCA().fit(np.zeros((10, 12)))
    with pytest.raises(ValueError, match="must be 2-D"):
        scalepca.RobustPCA().fit(np.ones(10))
    monkeypatch.setattr(rpca_mod, "FULL_SVD_MAX_ENTRIES", 100)
    with pytest.raises(ValueError, match="svd='full' gathers"):
        scalepca.RobustPCA(svd="full").fit(np.ones((10, 12)))
    est = scalepca.RobustPCA(random_state=0).fit(np.eye(12)[:, :10] * 3 + 1)
    with pytest.raises(ValueError, match="features"):
        est.transform(np.ones((3, 7)))


# -- the kernels -----------------------------------------------------------------------
def test_soft_threshold_and_low_rank_blocks(rng):
    x = np.array([-3.0, -0.5, 0.0, 0.2, 2.0])
    np.testing.assert_array_equal(soft_threshold(x, 1.0), [-2.0, 0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(soft_threshold(x, np.inf), np.zeros(5))
    U, _ = np.linalg.qr(rng.standard_normal((30, 3)))
    V, _ = np.linalg.qr(rng.standard_normal((20, 3)))
    s = np.array([3.0, 2.0, 1.0])
    Ld = low_rank_from_factors(U, s, V.T, ((7, 23), (5, 5, 10)))
    assert Ld.chunks == ((7, 23), (5, 5, 10))
    np.testing.assert_allclose(Ld.compute(), (U * s) @ V.T)


def test_randomized_partial_svd_halko_bound(rng):
    """Leading singular values of a matrix with a decaying spectrum, against LAPACK.
    With one power iteration, (k + p) = 25 probes and a spectral gap σ_{k+1}/σ_k =
    0.1, the Halko bound puts the error of σ_1..σ_k far below 1e-6 relative."""
    n1, n2, k = 300, 200, 15
    Uo, _ = np.linalg.qr(rng.standard_normal((n1, n2)))
    Vo, _ = np.linalg.qr(rng.standard_normal((n2, n2)))
    s = np.concatenate([np.linspace(10, 5, k), 0.5 * 0.9 ** np.arange(n2 - k)])
    A = (Uo * s) @ Vo.T
    U, sv, Vt = randomized_partial_svd(
        da.from_array(A, chunks=(64, 90)),
        k,
        n_oversamples=10,
        n_power_iter=1,
        rng=np.random.default_rng(0),
    )
    np.testing.assert_allclose(sv[:k], s[:k], rtol=1e-6)
    np.testing.assert_allclose(
        np.abs(np.sum(U[:, :k] * Uo[:, :k], axis=0)), 1.0, atol=1e-6
    )
    np.testing.assert_allclose(
        np.abs(np.sum(Vt[:k].T * Vo[:, :k], axis=0)), 1.0, atol=1e-6
    )


def test_predict_rank():
    assert predict_rank(3, 10, 100) == 4  # rank known: one more than found
    assert predict_rank(10, 10, 100) == 20  # all above: grow
    assert predict_rank(200, 200, 20000, n_min_dim=20000) == 400
    assert (
        predict_rank(200, 200, 2000, n_min_dim=2000) == 300
    )  # at most 5 % of min(n1, n2)
    assert predict_rank(50, 50, 60) == 60


def test_rectangular_and_xarray_input():
    import xarray as xr

    rng = np.random.default_rng(0)
    n1, n2, r = 400, 150, 6
    L0 = rng.normal(0, n1**-0.5, (n1, r)) @ rng.normal(0, n2**-0.5, (r, n2)) * 3
    S0 = np.where(rng.random((n1, n2)) < 0.05, rng.choice([-1.0, 1.0], (n1, n2)), 0.0)
    Xd = xr.DataArray(L0 + S0, dims=("time", "space")).chunk({"time": 100})
    est = scalepca.RobustPCA(random_state=0).fit(Xd)
    assert est.lam_ == pytest.approx(1 / np.sqrt(n1))
    assert est.rank_ == r and est.nnz_ == np.count_nonzero(S0)
    assert rel(est.low_rank_.compute(), L0) < 1e-5
    Z = est.transform(Xd)
    assert (
        isinstance(Z, xr.DataArray)
        and Z.dims == ("time", "mode")
        and Z.shape == (n1, r)
    )


def test_factor_graphs_do_not_warn_and_leave_the_config_alone(tmp_path):
    """The factors of L and the probe blocks go to the cluster in pieces below
    distributed's large-graph threshold (persisted, so recomputable after a worker
    loss, unlike scattered data): no large-graph warning, and the user's dask config
    is never changed — not even for a moment, as another thread of the user's sees it
    during the fit."""
    import threading
    import warnings

    import dask
    import zarr
    from distributed import Client, LocalCluster

    L0, S0, r = clmw_problem(600)
    z = zarr.create_array(
        tmp_path / "m.zarr", shape=(600, 600), chunks=(150, 150), dtype="f8"
    )
    z[:] = L0 + S0
    key = "distributed.admin.large-graph-warning-threshold"
    seen, done = set(), threading.Event()

    def watch():  # the user's other work, in another thread
        while not done.is_set():
            seen.add(dask.config.get(key))
            time.sleep(0.002)

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster),
        dask.config.set({key: "200kB"}),
    ):  # the factors of one iteration are ~480 kiB
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est = scalepca.RobustPCA(random_state=0).fit(
                    da.from_zarr(str(tmp_path / "m.zarr"))
                )
        finally:
            done.set()
            watcher.join()
        assert seen == {"200kB"}
        assert dask.config.get(key) == "200kB"
        with pytest.warns(UserWarning, match="large graph"):  # the threshold is live
            da.from_array(np.zeros((200, 200)), chunks=100).sum().compute()
    assert not [w for w in caught if "large graph" in str(w.message)]
    assert est.rank_ == r and rel(est.low_rank_.compute(), L0) <= 1e-5


# -- features that are NaN in every sample (land masks) --------------------------------
def _assert_same_as_without_land(est, ref, keep, atol):
    assert est.n_features_in_ == keep.size and est.n_iter_ == ref.n_iter_
    assert est.rank_ == ref.rank_ and est.nnz_ == ref.nnz_ and est.lam_ == ref.lam_
    L, S = est.low_rank_.compute(), est.sparse_.compute()
    assert L.shape == S.shape == (ref.n_samples_, keep.size)
    assert np.isnan(L[:, ~keep]).all() and np.isnan(S[:, ~keep]).all()
    np.testing.assert_allclose(L[:, keep], ref.low_rank_.compute(), rtol=0, atol=atol)
    np.testing.assert_allclose(S[:, keep], ref.sparse_.compute(), rtol=0, atol=atol)
    assert (
        np.isnan(est.components_[:, ~keep]).all() and np.isnan(est.mean_[~keep]).all()
    )
    np.testing.assert_allclose(
        est.components_[:, keep], ref.components_, rtol=0, atol=atol
    )
    np.testing.assert_array_equal(est.mean_[keep], 0.0)


def test_all_nan_features_are_left_out():
    """open_matrix's promise: features NaN in every sample are left out of the fit
    (found in the statistics pass, no extra pass) and come back as NaN columns of
    low_rank_ and sparse_; the rest equals the fit on the data without them. NumPy
    input is cut into the same square blocks, so it matches to rounding; other
    chunkings to the chunking tolerance."""
    L0, S0, r = clmw_problem(120, seed=2)
    M = L0 + S0
    Mn, keep = land_inserted(M, at=(3, 50, 50))
    ref = scalepca.RobustPCA(random_state=0).fit(M)
    with pytest.warns(UserWarning, match="3 of 123 features are NaN in every sample"):
        est = scalepca.RobustPCA(random_state=0).fit(Mn)
    _assert_same_as_without_land(est, ref, keep, atol=1e-12)
    assert est.n_passes_ == ref.n_passes_
    np.testing.assert_allclose(est.transform(Mn), ref.transform(M), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        est.transform(np.nan_to_num(Mn)), ref.transform(M), atol=1e-12
    )
    Xhat = est.inverse_transform(est.transform(Mn))
    assert np.isnan(Xhat[:, ~keep]).all()
    for chunks in [(50, 41), (120, 123), (37, 30)]:
        with pytest.warns(UserWarning, match="NaN in every sample"):
            est = scalepca.RobustPCA(random_state=0).fit(
                da.from_array(Mn, chunks=chunks)
            )
        _assert_same_as_without_land(est, ref, keep, atol=1e-8)


def test_all_nan_features_xarray_mask_zarr_and_save(tmp_path):
    """The same through open_matrix on a gridded DataArray, with a mask and the zarr
    storage (irregular blocks after the columns are left out), and after save/load."""
    import xarray as xr

    L0, S0, r = clmw_problem(100, seed=3)
    Mn, keep = land_inserted(L0 + S0, at=(0, 10, 99, 99))
    W = np.random.default_rng(1).random(Mn.shape) < 0.9
    field = xr.DataArray(Mn.reshape(100, 13, 8), dims=("time", "lat", "lon")).chunk(
        {"time": 40}
    )
    ref = scalepca.RobustPCA(mask=W[:, keep], random_state=0).fit(
        da.from_array((L0 + S0), chunks=(40, 100))
    )
    est = scalepca.RobustPCA(
        mask=W, random_state=0, storage="zarr", scratch=str(tmp_path)
    ).fit(scalepca.open_matrix(field, sample_dims="time"))
    assert est.storage_ == "zarr"
    _assert_same_as_without_land(est, ref, keep, atol=1e-8)
    est.save(str(tmp_path / "m.zarr"))
    back = scalepca.load(str(tmp_path / "m.zarr"))
    np.testing.assert_array_equal(
        np.isnan(back.low_rank_.compute()), np.isnan(est.low_rank_.compute())
    )
    np.testing.assert_allclose(
        back.transform(Mn), est.transform(Mn), rtol=0, atol=1e-12
    )


def test_partly_nan_feature_still_raises():
    L0, S0, _ = clmw_problem(60, seed=1)
    M = L0 + S0
    M[1:, 5] = np.nan  # NaN in all rows but one: missing data, not land
    with pytest.raises(ValueError, match="59 NaN or infinite value"):
        scalepca.RobustPCA().fit(M)
    with pytest.raises(ValueError, match="every feature is NaN in every sample"):
        scalepca.RobustPCA().fit(np.full((20, 30), np.nan))


@pytest.mark.slow
@pytest.mark.distributed
def test_factor_pieces_survive_a_worker_loss(tmp_path):
    """With a low large-graph threshold the factors and probe blocks travel as
    persisted pieces; SIGKILLing a worker mid-fit loses some, and the scheduler
    recomputes them from their tasks: the fit equals the undisturbed one on the same
    cluster (no scattered data to lose), and no large-graph warning is raised."""
    import warnings

    import dask
    import zarr

    from .support.reliability import ProcessCluster, WorkerKiller, gated, new_gate

    L0, S0, r = clmw_problem(120, seed=5)
    z = zarr.create_array(
        tmp_path / "m.zarr", shape=(120, 120), chunks=(40, 40), dtype="f8"
    )
    z[:] = L0 + S0
    key = "distributed.admin.large-graph-warning-threshold"
    with (
        ProcessCluster(3, workdir=tmp_path / "cluster") as cluster,
        dask.config.set({key: "20kB"}),
    ):  # pieces of at most 5 kB; 1.25 kB and less embedded
        client = cluster.client(3)
        X = da.from_zarr(str(tmp_path / "m.zarr"))
        ref = scalepca.RobustPCA(random_state=0, storage="memory").fit(X)
        # every worker reads 9 blocks (a few iterations in), then the fit stalls until a
        # worker executing a read and holding results of the fit has been killed
        gate = new_gate()
        Xs = gated(X, gate, free=int(np.prod(X.numblocks)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with WorkerKiller(cluster, client, min_results=2, gate=gate) as killer:
                got = scalepca.RobustPCA(random_state=0, storage="memory").fit(Xs)
        assert killer.error is None, killer.error
        assert killer.killed_at is not None, "the fit ended before a worker was killed"
        assert killer.victim not in cluster.alive_workers() and killer.lost_keys >= 2
        assert got.n_iter_ == ref.n_iter_ and got.rank_ == ref.rank_ == r
        np.testing.assert_allclose(
            got.low_rank_.compute(), ref.low_rank_.compute(), rtol=0, atol=1e-8
        )
        client.close(timeout=5)
    assert not [w for w in caught if "large graph" in str(w.message)]


# -- issue 38, item 14: the randomized default reaches the exact-SVD answer on real data
def _digits_salt_and_pepper():
    """scikit-learn's digits (1797 × 64, /16) with 10 % of the pixels set to 0 or 1."""
    from sklearn.datasets import load_digits

    X = load_digits().data / 16.0
    rng = np.random.default_rng(0)
    hit = rng.random(X.shape) < 0.10
    M = X.copy()
    M[hit] = rng.choice([0.0, 1.0], int(hit.sum()))
    return X, M


def test_default_reaches_the_exact_svd_answer_on_real_data(monkeypatch):
    """Real data have no exact low rank: the singular values of the ALM's argument
    crowd at the threshold, where a randomized partial SVD of fixed passes is least
    accurate. The former default missed one (rank 27 for 28, ‖ΔL‖/‖L‖ = 4.4 %, MSE to
    the clean digits 0.0299 for 0.0272; more power iterations or oversamples did not
    help, since a rank truncated early sends the inexact ALM down another path it
    never leaves). Now every thresholding is grown until a trusted estimate lies
    below the threshold and iterated until it changes by at most ``tol`` (1e-7): the
    fit follows the NumPy inexact ALM with a full LAPACK SVD iteration for iteration.
    Its distance to it is that of the per-iteration SVD tolerance carried along the
    path (measured 1.0e-7, in 366 passes for 156); 1e-6 leaves room for BLAS
    rounding."""
    X, M = _digits_salt_and_pepper()
    svds = _spy_svt(monkeypatch)
    est = scalepca.RobustPCA(random_state=0).fit(M)
    L, S, it, rank = reference_ialm(
        M, lam=est.lam_, mu0=est.mu0_, norm2=est.norm2_, max_iter=500
    )
    Lx = est.low_rank_.compute()
    assert est.converged_ and est.n_iter_ == it
    assert est.rank_ == rank == 28
    assert rel(Lx, L) <= 1e-6
    np.testing.assert_allclose(np.mean((Lx - X) ** 2), np.mean((L - X) ** 2), rtol=1e-6)
    assert est.nnz_ == np.count_nonzero(S)
    # the passes: statistics, ‖M‖₂ (2 + 2·4), the first A Ω, then per iteration the
    # SVD's (1 for Aᵀ Q, 2 per power iteration, 2 per growth, 1 more from AᵀA) and the
    # update pass
    assert len(svds) == est.n_iter_
    assert all(r.n_power >= 1 or r.n_residual for r in svds)
    assert est.n_passes_ == 1 + 10 + 1 + sum(
        1 + 2 * r.n_power + r.n_residual + 2 * r.n_restarts + r.n_gram + 1 for r in svds
    )


def test_svt_with_rtol_equals_the_dense_thresholding(rng):
    """A spectrum that crowds at the threshold, as the inexact ALM's argument does on
    real data: 12 values above τ = 1 (four of them within 3 % of it) and 10 just
    below. Asked for 5 triplets, the fixed-pass partial SVD keeps 5; with ``rtol`` it
    grows within the call and iterates until sure, and equals the dense SVT."""
    n1, n2 = 400, 300
    Uo, _ = np.linalg.qr(rng.standard_normal((n1, n2)))
    Vo, _ = np.linalg.qr(rng.standard_normal((n2, n2)))
    s = np.concatenate(
        [
            np.linspace(5.0, 1.1, 8),
            [1.03, 1.02, 1.01, 1.005],
            np.linspace(0.99, 0.95, 10),
            0.5 * 0.98 ** np.arange(n2 - 22),
        ]
    )
    A = (Uo * s) @ Vo.T
    exact = (Uo[:, :12] * (s[:12] - 1.0)) @ Vo[:, :12].T
    Ad = da.from_array(A, chunks=(100, 150))
    fixed = svt_mod.svt(Ad, 1.0, 5, rng=np.random.default_rng(0))
    assert fixed.rank == 5
    sure = svt_mod.svt(Ad, 1.0, 5, rng=np.random.default_rng(0), rtol=1e-10)
    assert sure.rank == 12 and sure.n_restarts >= 1
    np.testing.assert_allclose(sure.s, s[:12] - 1.0, rtol=1e-8)
    assert rel((sure.U * sure.s) @ sure.Vt, exact) <= 1e-9


def test_svt_with_rtol_is_sure_where_hundreds_of_values_crowd_above_the_threshold(rng):
    """The inexact ALM's first argument on the Candès problems is mostly the corruption:
    a random matrix whose singular values fill a quarter circle, 30 % of them above the
    threshold. Grown by doublings, the partial SVD's block (l = k + p) stalled there:
    the values next to ``τ`` and the first one outside the block are nearly equal, so
    the power iterations ran to their limit (50) without settling. Grown from the small
    side's Gram matrix, it settles in a few and equals the dense SVT."""
    n1, n2 = 500, 400
    A = rng.standard_normal((n1, n2))
    s = np.linalg.svd(A, compute_uv=False)
    tau = float(np.quantile(s, 0.7))  # 30 % of the values above it
    Uo, so, Vto = np.linalg.svd(A, full_matrices=False)
    keep = so > tau
    exact = (Uo[:, keep] * (so[keep] - tau)) @ Vto[keep]
    for M in (A, A.T):  # tall, then wide (the Gram matrix of the other side)
        ref = exact if M is A else exact.T
        chunks = (125, 100) if M is A else (100, 125)
        sure = svt_mod.svt(
            da.from_array(M, chunks=chunks),
            tau,
            10,
            rng=np.random.default_rng(0),
            rtol=1e-10,
        )
        assert sure.rank == int(keep.sum())
        assert sure.n_power <= 5 and sure.n_gram == (1 if M is A else 0)
        np.testing.assert_allclose(sure.s, so[keep] - tau, rtol=1e-9)
        assert rel((sure.U * sure.s) @ sure.Vt, ref) <= 1e-9


def test_svt_residual_test_bounds_the_thresholded_error(rng):
    """The residual ``A V − U S`` of the kept triplets bounds the error of the
    thresholded matrix (they are exact triplets of ``A − R Vᵀ`` and the thresholding is
    non-expansive): an estimate the residual test ends is within ``rtol · scale`` of
    the dense SVT, and a warm start on the exact right vectors of a low-rank matrix is
    ended by it at once, in 2 passes (Aᵀ Q, then A V), without a power iteration."""
    n1, n2 = 300, 200
    Uo, _ = np.linalg.qr(rng.standard_normal((n1, n2)))
    Vo, _ = np.linalg.qr(rng.standard_normal((n2, n2)))
    s = np.concatenate([np.linspace(6.0, 1.5, 10), 0.6 * 0.97 ** np.arange(n2 - 10)])
    A = (Uo * s) @ Vo.T
    exact = (Uo[:, :10] * (s[:10] - 1.0)) @ Vo[:, :10].T
    passes = []

    @contextlib.contextmanager
    def timed(label):
        passes.append(label)
        yield

    for rtol in (1e-4, 1e-8):
        sure = svt_mod.svt(
            da.from_array(A, chunks=(100, 100)),
            1.0,
            12,
            rng=np.random.default_rng(1),
            rtol=rtol,
            scale=1.0,
            timed=timed,
        )
        assert sure.rank == 10 and sure.n_residual == 1
        assert rel((sure.U * sure.s) @ sure.Vt, exact) * np.linalg.norm(exact) <= rtol
    low = (Uo[:, :10] * s[:10]) @ Vo[:, :10].T
    passes.clear()
    sure = svt_mod.svt(
        da.from_array(low, chunks=(100, 100)),
        1.0,
        12,
        rng=np.random.default_rng(1),
        rtol=1e-10,
        scale=1.0,
        warm_start=Vo[:, :12],
        timed=timed,
    )
    assert (sure.rank, sure.n_power, sure.n_residual) == (10, 0, 1)
    assert passes == ["svt: A Ω", "svt: Aᵀ Q", "svt: A V"]


def test_svt_with_rtol_takes_no_residual_pass_when_nothing_is_kept(rng):
    """When no estimate clears the threshold the thresholded matrix is zero whatever
    the residual, so the call ends after ``A Ω`` and ``Aᵀ Q`` without the residual's
    ``A V``; the result is the dense SVT's (zero)."""
    n1, n2 = 300, 200
    Uo, _ = np.linalg.qr(rng.standard_normal((n1, n2)))
    Vo, _ = np.linalg.qr(rng.standard_normal((n2, n2)))
    s = 0.9 * 0.97 ** np.arange(n2)  # all below τ = 1
    A = (Uo * s) @ Vo.T
    passes = []

    @contextlib.contextmanager
    def timed(label):
        passes.append(label)
        yield

    sure = svt_mod.svt(
        da.from_array(A, chunks=(100, 100)),
        1.0,
        5,
        rng=np.random.default_rng(1),
        rtol=1e-10,
        scale=1.0,
        timed=timed,
    )
    dense = svt_mod.svt(da.from_array(A, chunks=(100, 100)), 1.0, 5, full=True)
    assert sure.rank == dense.rank == 0 and sure.n_residual == 0
    assert passes == ["svt: A Ω", "svt: Aᵀ Q"]


def test_svt_of_a_square_matrix_grows_from_the_left_gram_matrix(rng):
    """A square matrix's Gram matrices are equally large; the left one's eigenvectors
    are the first range itself, so the growth from it takes no pass beyond the Gram
    (``n_gram`` 0, where the right one's probe ``A Ω`` costs one), and the result is
    the dense SVT's."""
    n = 400
    A = rng.standard_normal((n, n))
    Uo, so, Vto = np.linalg.svd(A)
    tau = float(np.quantile(so, 0.7))  # 30 % of the values above it
    keep = so > tau
    exact = (Uo[:, keep] * (so[keep] - tau)) @ Vto[keep]
    sure = svt_mod.svt(
        da.from_array(A, chunks=(100, 100)),
        tau,
        10,
        rng=np.random.default_rng(0),
        rtol=1e-10,
    )
    assert sure.rank == int(keep.sum()) and sure.n_gram == 0 and sure.n_restarts >= 1
    np.testing.assert_allclose(sure.s, so[keep] - tau, rtol=1e-9)
    assert rel((sure.U * sure.s) @ sure.Vt, exact) <= 1e-9
