"""Checkpoints of the iterative estimators (PPCA EM, SparsePCA minibatch / batch) and the shared
commit machinery in :mod:`scalepca.io._checkpoint` (RobustPCA's own resume tests are in
test_robust_pca.py; resuming on a new cluster in test_faults.py).

A resumed fit must end where an uninterrupted fit with the same ``random_state`` ends. Every
iteration is a deterministic function of the committed state and of the same graph over the
same chunks, so the tolerance is exact equality (measured: bit-identical); across another
chunking only the reduction tree changes, so rounding (stated per test).
"""

from __future__ import annotations

import os
import shutil
import warnings

import dask.array as da
import numpy as np
import pytest

import scalepca
from scalepca.config import ConfigError, validate_config
from scalepca.io._checkpoint import CheckpointStore, SmallStateCheckpoint, check_fingerprint

from ._reliability import low_rank, with_missing


def _quiet(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the deliberately short fits
        return fit()


def _commits(path):
    return sorted(n for n in os.listdir(path) if n.startswith("state_"))


class Interrupt(RuntimeError):
    pass


def _interrupt_after(monkeypatch, module, name, n_calls):
    """Make ``module.name`` raise :class:`Interrupt` on call ``n_calls + 1`` (a killed fit)."""
    orig = getattr(module, name)
    calls = [0]

    def wrapped(*a, **k):
        calls[0] += 1
        if calls[0] > n_calls:
            raise Interrupt(f"interrupted at call {calls[0]}")
        return orig(*a, **k)

    monkeypatch.setattr(module, name, wrapped)


# -- the shared store ------------------------------------------------------------------------------
def test_store_commits_atomically_and_skips_damaged(tmp_path):
    st = CheckpointStore(tmp_path / "ck")
    assert st.latest() is None
    st.commit(1, {"W": np.arange(6.0).reshape(2, 3)}, {"n_iter": 1, "x": np.float64(0.5)})
    st.commit(2, {"W": np.ones((2, 3))}, {"n_iter": 2, "x": 0.25})
    # a writer killed before its rename, and a commit whose 'complete' flag never got set
    os.makedirs(tmp_path / "ck" / "state_000003.tmp-deadbeef")
    import zarr

    zarr.open_group(str(tmp_path / "ck" / "state_000004"), mode="w").attrs["state"] = {}
    # a commit whose array data were lost (damaged file system)
    st.commit(5, {"W": np.full((2, 3), 5.0)}, {"n_iter": 5})
    shutil.rmtree(tmp_path / "ck" / "state_000005" / "W")
    attrs, arrays = st.latest()
    assert attrs == {"n_iter": 2, "x": 0.25}
    np.testing.assert_array_equal(arrays["W"], np.ones((2, 3)))
    assert st.latest(valid=lambda a: a["n_iter"] == 1)[0]["n_iter"] == 1
    st.prune({"state_000002"})
    assert _commits(tmp_path / "ck") == ["state_000002"]


def test_fingerprint_names_the_differing_key(tmp_path):
    fp = {"shape": [10, 3], "alpha": 0.5, "mean": [3, 1.0, 2.0]}
    check_fingerprint(fp, {"shape": (10, 3), "alpha": 0.5 * (1 + 1e-12),
                           "mean": [3, 1.0 + 1e-13, 2.0]})  # rounding of another tree
    with pytest.raises(ValueError, match=r"different problem \(alpha: 0.5 there, 0.6 now\)"):
        check_fingerprint(fp, {"shape": [10, 3], "alpha": 0.6, "mean": [3, 1.0, 2.0]})
    with pytest.raises(ValueError, match=r"\(mean: "):
        check_fingerprint(fp, {"shape": [10, 3], "alpha": 0.5, "mean": [3, 1.1, 2.0]})
    ck = SmallStateCheckpoint(tmp_path / "s", {"k": 2})
    ck.commit(3, {"a": np.ones(2)}, {"n": 3})
    ck.commit(4, {"a": np.ones(2)}, {"n": 4})
    assert _commits(tmp_path / "s") == ["state_000004"]  # older commits pruned
    assert ck.resume()[0]["n"] == 4
    with pytest.raises(ValueError, match=r"\(k: 2 there, 3 now\)"):
        SmallStateCheckpoint(tmp_path / "s", {"k": 3}).resume()
    with pytest.raises(ValueError, match="only local paths"):
        CheckpointStore("s3://bucket/ck")


# -- PPCA EM ---------------------------------------------------------------------------------------
PPCA_PARAMS = dict(n_components=3, solver="em", missing="em", tol=1e-10, random_state=0)


def _same_ppca(a, b):
    assert a.n_iter_ == b.n_iter_ and a.converged_ == b.converged_
    np.testing.assert_array_equal(a.loglike_, b.loglike_)
    np.testing.assert_array_equal(a.W_, b.W_)
    np.testing.assert_array_equal(a.mean_, b.mean_)
    assert a.noise_variance_ == b.noise_variance_


def test_ppca_em_resumes_after_max_iter(tmp_path):
    X = da.from_array(with_missing(0), chunks=50)
    path = str(tmp_path / "ck")
    fresh = scalepca.PPCA(max_iter=60, **PPCA_PARAMS).fit(X)
    assert fresh.converged_ and fresh.n_iter_ > 8 and fresh.resumed_from_ == 0
    first = _quiet(lambda: scalepca.PPCA(max_iter=5, checkpoint=path, checkpoint_every=1,
                                         **PPCA_PARAMS).fit(X))
    assert first.n_iter_ == 5 and _commits(path) == ["state_000005"]
    resumed = scalepca.PPCA(max_iter=60, checkpoint=path, checkpoint_every=1,
                            **PPCA_PARAMS).fit(X)
    assert resumed.resumed_from_ == 5
    assert resumed.n_passes_ == 1 + fresh.n_iter_ - 5  # initialisation pass + the rest
    _same_ppca(resumed, fresh)
    # a finished fit resumes from its final commit without iterating
    again = scalepca.PPCA(max_iter=60, checkpoint=path, **PPCA_PARAMS).fit(X)
    assert again.resumed_from_ == fresh.n_iter_ and again.n_passes_ == 1
    _same_ppca(again, fresh)


def test_ppca_em_resumes_after_an_interrupted_fit(tmp_path, monkeypatch):
    from scalepca.models import ppca

    X = da.from_array(with_missing(1), chunks=40)
    path = str(tmp_path / "ck")
    fresh = scalepca.PPCA(max_iter=60, **PPCA_PARAMS).fit(X)
    with monkeypatch.context() as m:
        _interrupt_after(m, ppca, "mstep", 7)
        with pytest.raises(Interrupt):
            scalepca.PPCA(max_iter=60, checkpoint=path, checkpoint_every=3,
                          **PPCA_PARAMS).fit(X)
    assert _commits(path) == ["state_000006"]
    resumed = scalepca.PPCA(max_iter=60, checkpoint=path, checkpoint_every=3,
                            **PPCA_PARAMS).fit(X)
    assert resumed.resumed_from_ == 6
    _same_ppca(resumed, fresh)
    # another chunking of the same data is the same problem: only the reduction tree differs
    # (rounding; 1e-9 relative leaves margin over the measured ~1e-14)
    other = scalepca.PPCA(max_iter=60, checkpoint=path, **PPCA_PARAMS).fit(X.rechunk(70))
    np.testing.assert_allclose(other.W_, fresh.W_, rtol=0, atol=1e-9 * np.abs(fresh.W_).max())


def test_ppca_em_resumes_a_commit_written_before_the_iteration_driver(tmp_path):
    """Commits of scalepca before the driver of iterative fits (no format version; W, mean,
    σ² and the log-likelihood list at the top level) still resume, to the same end."""
    X = da.from_array(with_missing(0), chunks=50)
    fresh = scalepca.PPCA(max_iter=60, **PPCA_PARAMS).fit(X)
    new, old = str(tmp_path / "new"), str(tmp_path / "old")
    _quiet(lambda: scalepca.PPCA(max_iter=5, checkpoint=new, **PPCA_PARAMS).fit(X))
    attrs, arrays = CheckpointStore(new).latest()
    assert attrs["format"] == "scalepca-iterate" and attrs["version"] == 1
    CheckpointStore(old).commit(5, {"W": arrays["W"], "mean": arrays["mean"]}, {
        "sigma2": attrs["values"]["sigma2"], "n_iter": 5, "converged": False,
        "loglike": attrs["history"]["loglike"], "fingerprint": attrs["fingerprint"]})
    resumed = scalepca.PPCA(max_iter=60, checkpoint=old, **PPCA_PARAMS).fit(X)
    assert resumed.resumed_from_ == 5
    _same_ppca(resumed, fresh)


def test_ppca_checkpoint_of_other_problem_is_refused(tmp_path):
    X = with_missing(0)
    path = str(tmp_path / "ck")
    _quiet(lambda: scalepca.PPCA(max_iter=3, checkpoint=path, **PPCA_PARAMS).fit(X))
    with pytest.raises(ValueError, match=r"different problem \(n_components: 3 there, 2 now\)"):
        scalepca.PPCA(**{**PPCA_PARAMS, "n_components": 2}, checkpoint=path).fit(X)
    with pytest.raises(ValueError, match=r"different problem \(mean: "):
        scalepca.PPCA(**PPCA_PARAMS, checkpoint=path).fit(X + 1.0)
    with pytest.raises(ValueError, match=r"different problem \(shape: "):
        scalepca.PPCA(**PPCA_PARAMS, checkpoint=path).fit(X[:-10])


def test_ppca_checkpoint_parameter_errors(tmp_path, raise_if_dask_computes):
    X = da.from_array(low_rank(0), chunks=100)
    with raise_if_dask_computes(0):
        with pytest.raises(ValueError, match="checkpoint applies to solver='em' only"):
            scalepca.PPCA(3, checkpoint=str(tmp_path / "ck")).fit(X)
        with pytest.raises(ValueError, match="checkpoint_every"):
            scalepca.PPCA(3, solver="em", checkpoint=str(tmp_path / "ck"),
                          checkpoint_every=0).fit(X)
        with pytest.raises(TypeError, match="checkpoint must be a path or None"):
            scalepca.PPCA(3, solver="em", checkpoint=3).fit(X)
    assert not os.path.exists(tmp_path / "ck")


# -- SparsePCA -------------------------------------------------------------------------------------
# alpha is scikit-learn's: 0.5 per sample on the 400 rows of low_rank (alpha / √n)
SPCA_MB = dict(n_components=3, method="minibatch", alpha=0.5 * np.sqrt(400), batch_size=100,
               random_state=0, tol=0, max_no_improvement=None)


def _same_spca(a, b):
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_array_equal(a.cost_history_, b.cost_history_)
    np.testing.assert_array_equal(a.loadings_, b.loadings_)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.objective_ == b.objective_


def test_sparse_minibatch_resumes_after_max_iter(tmp_path):
    X = da.from_array(low_rank(0), chunks=40)  # 10 chunks → 4 minibatches (3, 3, 3, 1 chunks)
    path = str(tmp_path / "ck")
    fresh = scalepca.SparsePCA(max_iter=6, **SPCA_MB).fit(X)
    assert fresh.n_steps_ == 24
    first = _quiet(lambda: scalepca.SparsePCA(max_iter=2, checkpoint=path, checkpoint_every=1,
                                              **SPCA_MB).fit(X))
    assert first.n_steps_ == 8 and _commits(path) == ["state_000008"]
    resumed = scalepca.SparsePCA(max_iter=6, checkpoint=path, checkpoint_every=1,
                                 **SPCA_MB).fit(X)
    assert resumed.resumed_from_ == 8 and resumed.n_steps_ == 24
    _same_spca(resumed, fresh)


@pytest.mark.parametrize("shuffle", [True, False])
def test_sparse_minibatch_resumes_mid_epoch(tmp_path, monkeypatch, shuffle):
    """Interrupted at minibatch 7 of 4 per epoch: resumes from the commit after minibatch 6
    with the pipelined dictionaries, the shuffled order and the epoch's partial objective."""
    from scalepca.models import _sparse_dictionary

    X = da.from_array(low_rank(2), chunks=40)
    path = str(tmp_path / "ck")
    params = {**SPCA_MB, "shuffle": shuffle, "forget_factor": 0.7, "max_iter": 5}
    fresh = scalepca.SparsePCA(**params).fit(X)
    with monkeypatch.context() as m:
        _interrupt_after(m, _sparse_dictionary, "dictionary_bcd", 7)
        with pytest.raises(Interrupt):
            scalepca.SparsePCA(checkpoint=path, checkpoint_every=3, **params).fit(X)
    assert _commits(path) == ["state_000006"]
    resumed = scalepca.SparsePCA(checkpoint=path, checkpoint_every=3, **params).fit(X)
    assert resumed.resumed_from_ == 6
    _same_spca(resumed, fresh)


def test_sparse_minibatch_resumes_after_early_stop(tmp_path):
    X = da.from_array(low_rank(0), chunks=40)
    params = {**SPCA_MB, "max_no_improvement": 3, "max_iter": 50}
    fresh = scalepca.SparsePCA(**params).fit(X)
    path = str(tmp_path / "ck")
    first = scalepca.SparsePCA(checkpoint=path, **params).fit(X)
    assert first.n_steps_ == fresh.n_steps_ < 200  # stopped early, final commit written
    again = scalepca.SparsePCA(checkpoint=path, **params).fit(X)
    assert again.resumed_from_ == fresh.n_steps_ and again.n_steps_ == fresh.n_steps_
    _same_spca(again, fresh)


@pytest.mark.parametrize("covariance", [True, False])
def test_sparse_batch_resumes(tmp_path, monkeypatch, covariance):
    from scalepca.models import sparse_pca

    if not covariance:  # the path for wide data: one statistics pass per alternation
        monkeypatch.setattr(sparse_pca, "GRAM_MAX_FEATURES", 4)
    X = da.from_array(low_rank(0), chunks=100)
    params = dict(n_components=3, method="batch", alpha=0.5, random_state=0, tol=1e-12)
    path = str(tmp_path / "ck")
    fresh = scalepca.SparsePCA(max_iter=15, **params).fit(X)
    assert fresh.n_iter_ == 15
    _quiet(lambda: scalepca.SparsePCA(max_iter=4, checkpoint=path, checkpoint_every=3,
                                      **params).fit(X))
    assert _commits(path) == ["state_000004"]
    resumed = scalepca.SparsePCA(max_iter=15, checkpoint=path, checkpoint_every=3,
                                 **params).fit(X)
    assert resumed.resumed_from_ == 4
    _same_spca(resumed, fresh)
    if not covariance:  # moments + the statistics of the remaining 12 dictionaries
        assert resumed.n_passes_ == 1 + 12 == fresh.n_passes_ - 4 - (2 + 2 * 4)


def test_sparse_checkpoint_of_other_problem_is_refused(tmp_path):
    X = low_rank(0)
    path = str(tmp_path / "ck")
    _quiet(lambda: scalepca.SparsePCA(max_iter=1, checkpoint=path, **SPCA_MB).fit(X))
    for over, key in [({"alpha": 0.4}, "alpha"), ({"batch_size": 50}, "batch_size"),
                      ({"random_state": 1}, "random_state"), ({"method": "batch"}, "method"),
                      ({"n_components": 2}, "n_components")]:
        with pytest.raises(ValueError, match=rf"different problem \({key}: "):
            _quiet(lambda over=over: scalepca.SparsePCA(**{**SPCA_MB, **over},
                                                        checkpoint=path).fit(X))
    with pytest.raises(ValueError, match=r"different problem \(row_chunks: "):
        scalepca.SparsePCA(**SPCA_MB, checkpoint=path).fit(da.from_array(X, chunks=50))
    with pytest.raises(ValueError, match=r"different problem \(mean: "):
        scalepca.SparsePCA(**SPCA_MB, checkpoint=path).fit(X * 2.0)


def test_sparse_checkpoint_parameter_errors(tmp_path, raise_if_dask_computes):
    X = da.from_array(low_rank(0), chunks=100)
    with raise_if_dask_computes(0):
        with pytest.raises(ValueError, match="checkpoint applies to method='minibatch' or"):
            SparsePCA = scalepca.SparsePCA
            SparsePCA(3, method="elasticnet", checkpoint=str(tmp_path / "ck")).fit(X)
        with pytest.raises(ValueError, match="checkpoint_every"):
            SparsePCA(3, checkpoint=str(tmp_path / "ck"), checkpoint_every=0).fit(X)
    assert not os.path.exists(tmp_path / "ck")


# -- config ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["ppca", "sparse_pca", "robust_pca"])
def test_config_accepts_checkpoint(method):
    model = {"method": method, "checkpoint": "ck.zarr", "checkpoint_every": 2}
    if method == "ppca":
        model["solver"] = "em"
    cfg = validate_config({"data": {"path": "x.zarr"}, "model": model})
    assert cfg["model"]["params"]["checkpoint"] == "ck.zarr"
    with pytest.raises(ConfigError, match="checkpoint_every"):
        validate_config({"data": {"path": "x.zarr"},
                         "model": {**model, "checkpoint_every": "often"}})
