"""Checkpoints of the iterative estimators (PPCA EM, SparsePCA minibatch / batch) and
the shared commit machinery in :mod:`scalepca.io._checkpoint` (RobustPCA's own resume
tests are in test_robust_pca.py; resuming on a new cluster in test_faults.py).

A resumed fit must end where an uninterrupted fit with the same ``random_state``
ends. Every iteration is a deterministic function of the committed state and of the
same graph over the same chunks, so the tolerance is exact equality (measured:
bit-identical); across another chunking only the reduction tree changes, so rounding
(stated per test).
"""

from __future__ import annotations

import os
import shutil
import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import scalepca
from scalepca.app.config import ConfigError, validate_config
from scalepca.io._checkpoint import (
    CheckpointStore,
    check_fingerprint,
)

from .support.reliability import low_rank, with_missing


def _quiet(fit):
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # ConvergenceWarning of the deliberately short fits
        return fit()


def _commits(path):
    return sorted(n for n in os.listdir(path) if n.startswith("state_"))


def _listing(path):
    """Every file under ``path`` with its size and modification time."""
    return sorted(
        (
            os.path.relpath(os.path.join(d, f), path),
            os.stat(os.path.join(d, f)).st_size,
            os.stat(os.path.join(d, f)).st_mtime_ns,
        )
        for d, _, files in os.walk(path)
        for f in files
    )


class Interrupt(RuntimeError):
    pass


def _interrupt_after(monkeypatch, module, name, n_calls):
    """Make ``module.name`` raise :class:`Interrupt` on call ``n_calls + 1`` (a
    killed fit)."""
    orig = getattr(module, name)
    calls = [0]

    def wrapped(*a, **k):
        calls[0] += 1
        if calls[0] > n_calls:
            raise Interrupt(f"interrupted at call {calls[0]}")
        return orig(*a, **k)

    monkeypatch.setattr(module, name, wrapped)


# -- the shared store ------------------------------------------------------------------
def test_store_commits_atomically_and_skips_damaged(tmp_path):
    st = CheckpointStore(tmp_path / "ck")
    assert st.latest() is None
    st.commit(
        1, {"W": np.arange(6.0).reshape(2, 3)}, {"n_iter": 1, "x": np.float64(0.5)}
    )
    st.commit(2, {"W": np.ones((2, 3))}, {"n_iter": 2, "x": 0.25})
    # a writer killed before its rename, and a commit whose 'complete' flag never got
    # set
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


def test_commit_replaced_by_a_writer_killed_between_its_renames_is_found(
    tmp_path, monkeypatch
):
    """Replacing commit k moves the old one aside, then renames the new one in: a
    writer killed between the two renames leaves commit k only as its ``.old-`` copy,
    which a resume reads (the old writer deleted commit k before renaming, so a kill
    there lost it)."""
    st = CheckpointStore(tmp_path / "ck")
    st.commit(3, {"W": np.full(2, 3.0)}, {"n_iter": 3})
    real, calls = os.replace, []

    def killed_after_first_rename(src, dst):
        if os.path.dirname(os.fspath(dst)) == os.fspath(
            tmp_path / "ck"
        ):  # not zarr's own
            calls.append(dst)
            if len(calls) == 2:
                raise KeyboardInterrupt  # the process dies here
        real(src, dst)

    monkeypatch.setattr(os, "replace", killed_after_first_rename)
    with pytest.raises(KeyboardInterrupt):
        st.commit(3, {"W": np.full(2, 4.0)}, {"n_iter": 3, "again": True})
    monkeypatch.setattr(os, "replace", real)
    assert not (tmp_path / "ck" / "state_000003").exists()
    attrs, arrays = CheckpointStore(tmp_path / "ck").latest()
    assert attrs == {"n_iter": 3}
    np.testing.assert_array_equal(arrays["W"], np.full(2, 3.0))
    st.commit(3, {"W": np.full(2, 5.0)}, {"n_iter": 3})  # the next commit is preferred
    np.testing.assert_array_equal(st.latest()[1]["W"], np.full(2, 5.0))


def test_fingerprint_names_the_differing_key(tmp_path):
    fp = {"shape": [10, 3], "alpha": 0.5, "mean": [3, 1.0, 2.0]}
    check_fingerprint(
        fp,
        {"shape": (10, 3), "alpha": 0.5 * (1 + 1e-12), "mean": [3, 1.0 + 1e-13, 2.0]},
    )  # rounding of another tree
    with pytest.raises(
        ValueError, match=r"different problem \(alpha: 0.5 there, 0.6 now\)"
    ):
        check_fingerprint(fp, {"shape": [10, 3], "alpha": 0.6, "mean": [3, 1.0, 2.0]})
    with pytest.raises(ValueError, match=r"\(mean: "):
        check_fingerprint(fp, {"shape": [10, 3], "alpha": 0.5, "mean": [3, 1.1, 2.0]})
    with pytest.raises(ValueError, match="only local paths"):
        CheckpointStore("s3://bucket/ck")


# -- PPCA EM ---------------------------------------------------------------------------
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
    first = _quiet(
        lambda: scalepca.PPCA(
            max_iter=5, checkpoint=path, checkpoint_every=1, **PPCA_PARAMS
        ).fit(X)
    )
    assert first.n_iter_ == 5 and _commits(path) == ["state_000005"]
    resumed = scalepca.PPCA(
        max_iter=60, checkpoint=path, checkpoint_every=1, **PPCA_PARAMS
    ).fit(X)
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
            scalepca.PPCA(
                max_iter=60, checkpoint=path, checkpoint_every=3, **PPCA_PARAMS
            ).fit(X)
    assert _commits(path) == ["state_000006"]
    resumed = scalepca.PPCA(
        max_iter=60, checkpoint=path, checkpoint_every=3, **PPCA_PARAMS
    ).fit(X)
    assert resumed.resumed_from_ == 6
    _same_ppca(resumed, fresh)
    # another chunking of the same data is the same problem: only the reduction tree
    # differs (rounding; 1e-9 relative leaves margin over the measured ~1e-14)
    other = scalepca.PPCA(max_iter=60, checkpoint=path, **PPCA_PARAMS).fit(
        X.rechunk(70)
    )
    np.testing.assert_allclose(
        other.W_, fresh.W_, rtol=0, atol=1e-9 * np.abs(fresh.W_).max()
    )


def test_ppca_em_refuses_a_commit_without_a_format_version(tmp_path):
    """A commit without the driver's format version (W, mean, σ² and the
    log-likelihood list at the top level) is refused, naming the version read, and
    left as it is."""
    X = da.from_array(with_missing(0), chunks=50)
    new, old = str(tmp_path / "new"), str(tmp_path / "old")
    _quiet(lambda: scalepca.PPCA(max_iter=5, checkpoint=new, **PPCA_PARAMS).fit(X))
    attrs, arrays = CheckpointStore(new).latest()
    assert attrs["format"] == "scalepca-iterate" and attrs["version"] == 1
    CheckpointStore(old).commit(
        5,
        {"W": arrays["W"], "mean": arrays["mean"]},
        {
            "sigma2": attrs["values"]["sigma2"],
            "n_iter": 5,
            "converged": False,
            "loglike": attrs["history"]["loglike"],
            "fingerprint": attrs["fingerprint"],
        },
    )
    with pytest.raises(
        ValueError, match="no format version.*reads 'scalepca-iterate' version 1"
    ):
        scalepca.PPCA(max_iter=60, checkpoint=old, **PPCA_PARAMS).fit(X)
    assert _commits(old) == ["state_000005"]


def test_ppca_checkpoint_of_other_problem_is_refused(tmp_path):
    X = with_missing(0)
    path = str(tmp_path / "ck")
    _quiet(lambda: scalepca.PPCA(max_iter=3, checkpoint=path, **PPCA_PARAMS).fit(X))
    with pytest.raises(
        ValueError, match=r"different problem \(n_components: 3 there, 2 now\)"
    ):
        scalepca.PPCA(**{**PPCA_PARAMS, "n_components": 2}, checkpoint=path).fit(X)
    with pytest.raises(ValueError, match=r"different problem \(mean: "):
        scalepca.PPCA(**PPCA_PARAMS, checkpoint=path).fit(X + 1.0)
    with pytest.raises(ValueError, match=r"different problem \(shape: "):
        scalepca.PPCA(**PPCA_PARAMS, checkpoint=path).fit(X[:-10])


def test_ppca_resume_with_another_tol_or_max_iter(tmp_path):
    """The issue's case: a checkpoint of a fit to tol=1e-1 resumed with tol=1e-10
    goes on to the fresh fit's answer (it stopped after 5 of 16 iterations, σ² 3 %
    off); a looser tol or a smaller max_iter then stops at once, from the commit."""
    X = da.from_array(with_missing(0), chunks=50)
    path = str(tmp_path / "ck")
    params = {**PPCA_PARAMS, "max_iter": 60}
    fresh = scalepca.PPCA(**params).fit(X)
    loose = scalepca.PPCA(**{**params, "tol": 1e-1}, checkpoint=path).fit(X)
    assert loose.converged_ and loose.n_iter_ < fresh.n_iter_
    tight = scalepca.PPCA(**params, checkpoint=path).fit(X)
    assert tight.resumed_from_ == loose.n_iter_ and tight.converged_
    assert tight.n_passes_ == 1 + fresh.n_iter_ - loose.n_iter_
    np.testing.assert_allclose(tight.noise_variance_, fresh.noise_variance_, rtol=1e-8)
    _same_ppca(tight, fresh)  # measured: bit-identical
    again = scalepca.PPCA(**{**params, "tol": 1e-1}, checkpoint=path).fit(X)
    assert again.n_passes_ == 1 and again.converged_  # the initialisation pass only
    _same_ppca(again, fresh)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        short = scalepca.PPCA(
            **{**params, "tol": 0.0, "max_iter": 3}, checkpoint=path
        ).fit(X)
    assert (
        short.n_passes_ == 1 and not short.converged_ and short.n_iter_ == fresh.n_iter_
    )


def test_ppca_checkpoint_of_permuted_data_is_refused(tmp_path):
    """Data with the features (or the samples) in another order have the same
    per-feature statistics; the sketch of the data tells them apart. Another chunking
    is the same data."""
    Xn = with_missing(0)
    path = str(tmp_path / "ck")
    _quiet(lambda: scalepca.PPCA(max_iter=3, checkpoint=path, **PPCA_PARAMS).fit(Xn))
    before = _listing(path)
    perm = np.random.default_rng(0).permutation(Xn.shape[1])
    for other in (Xn[:, perm], Xn[::-1]):
        with pytest.raises(
            ValueError,
            match=r"different problem \(data_sketch: the data differ"
            r".*left untouched.*another checkpoint path",
        ):
            scalepca.PPCA(max_iter=60, checkpoint=path, **PPCA_PARAMS).fit(other)
    assert _listing(path) == before
    resumed = scalepca.PPCA(max_iter=60, checkpoint=path, **PPCA_PARAMS).fit(
        da.from_array(Xn, chunks=(70, 5))
    )
    assert resumed.resumed_from_ == 3


def test_ppca_initialisation_pass_reads_each_block_once_with_a_checkpoint(tmp_path):
    """The sketch is computed in the initialisation pass, not in a pass of its own."""
    reads = []

    def counted(block):
        reads.append(1)
        return block

    X = da.from_array(with_missing(0), chunks=50).map_blocks(counted, dtype=np.float64)
    for checkpoint in (None, str(tmp_path / "ck")):
        reads.clear()
        _quiet(
            lambda ck=checkpoint: scalepca.PPCA(
                **{**PPCA_PARAMS, "max_iter": 1}, checkpoint=ck
            ).fit(X)
        )
        assert len(reads) == 2 * X.numblocks[0]  # initialisation and one EM iteration


def test_fingerprints_hold_every_parameter_but_the_listed_ones(tmp_path):
    """Every parameter of get_params() is in a commit's fingerprint unless the
    estimator lists it (with the reason it does not change the result): a new
    parameter joins by default."""
    from scalepca.models import _sparse_dictionary, ppca, robust_pca

    X = low_rank(0)
    cases = [
        (scalepca.PPCA(**PPCA_PARAMS, max_iter=2), ppca.EM_FINGERPRINT_IGNORES),
        (
            scalepca.SparsePCA(**{**SPCA_MB, "max_iter": 1}),
            _sparse_dictionary.FINGERPRINT_IGNORES,
        ),
        (
            scalepca.SparsePCA(3, method="batch", max_iter=2),
            _sparse_dictionary.FINGERPRINT_IGNORES,
        ),
        (scalepca.RobustPCA(max_iter=2), robust_pca.FINGERPRINT_IGNORES),
    ]
    for i, (est, ignored) in enumerate(cases):
        path = str(tmp_path / f"ck{i}")
        _quiet(lambda est=est, path=path: est.set_params(checkpoint=path).fit(X))
        fingerprint = CheckpointStore(path).latest()[0]["fingerprint"]
        params = set(est.get_params())
        assert ignored.keys() <= params
        assert params - set(ignored) <= set(fingerprint), type(est).__name__
        assert {"data_sketch", "shape", "dtype"} <= set(fingerprint)
        assert fingerprint["fingerprint_version"] == 2


def test_ppca_checkpoint_parameter_errors(tmp_path, raise_if_dask_computes):
    X = da.from_array(low_rank(0), chunks=100)
    with raise_if_dask_computes(0):
        with pytest.raises(ValueError, match="checkpoint applies to solver='em' only"):
            scalepca.PPCA(3, checkpoint=str(tmp_path / "ck")).fit(X)
        with pytest.raises(ValueError, match="checkpoint_every"):
            scalepca.PPCA(
                3, solver="em", checkpoint=str(tmp_path / "ck"), checkpoint_every=0
            ).fit(X)
        with pytest.raises(TypeError, match="checkpoint must be a path or None"):
            scalepca.PPCA(3, solver="em", checkpoint=3).fit(X)
    assert not os.path.exists(tmp_path / "ck")


# -- SparsePCA -------------------------------------------------------------------------
# alpha is scikit-learn's: 0.5 per sample on the 400 rows of low_rank (alpha / √n)
SPCA_MB = dict(
    n_components=3,
    method="minibatch",
    alpha=0.5 * np.sqrt(400),
    batch_size=100,
    random_state=0,
    tol=0,
    max_no_improvement=None,
)


def _same_spca(a, b):
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_array_equal(a.cost_history_, b.cost_history_)
    np.testing.assert_array_equal(a.loadings_, b.loadings_)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.objective_ == b.objective_


def test_sparse_minibatch_resumes_after_max_iter(tmp_path):
    X = da.from_array(
        low_rank(0), chunks=40
    )  # 10 chunks → 4 minibatches (3, 3, 3, 1 chunks)
    path = str(tmp_path / "ck")
    fresh = scalepca.SparsePCA(max_iter=6, **SPCA_MB).fit(X)
    assert fresh.n_steps_ == 24
    first = _quiet(
        lambda: scalepca.SparsePCA(
            max_iter=2, checkpoint=path, checkpoint_every=1, **SPCA_MB
        ).fit(X)
    )
    assert first.n_steps_ == 8 and _commits(path) == ["state_000008"]
    resumed = scalepca.SparsePCA(
        max_iter=6, checkpoint=path, checkpoint_every=1, **SPCA_MB
    ).fit(X)
    assert resumed.resumed_from_ == 8 and resumed.n_steps_ == 24
    _same_spca(resumed, fresh)


@pytest.mark.parametrize("shuffle", [True, False])
def test_sparse_minibatch_resumes_mid_epoch(tmp_path, monkeypatch, shuffle):
    """Interrupted at minibatch 7 of 4 per epoch: resumes from the commit after
    minibatch 6 with the pipelined dictionaries, the shuffled order and the epoch's
    partial objective."""
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
    _quiet(
        lambda: scalepca.SparsePCA(
            max_iter=4, checkpoint=path, checkpoint_every=3, **params
        ).fit(X)
    )
    assert _commits(path) == ["state_000004"]
    resumed = scalepca.SparsePCA(
        max_iter=15, checkpoint=path, checkpoint_every=3, **params
    ).fit(X)
    assert resumed.resumed_from_ == 4
    _same_spca(resumed, fresh)
    if not covariance:  # moments + the statistics of the remaining 12 dictionaries
        assert resumed.n_passes_ == 1 + 12 == fresh.n_passes_ - 4 - (2 + 2 * 4)


def test_sparse_checkpoint_of_other_problem_is_refused(tmp_path):
    X = low_rank(0)
    path = str(tmp_path / "ck")
    _quiet(lambda: scalepca.SparsePCA(max_iter=1, checkpoint=path, **SPCA_MB).fit(X))
    for over, key in [
        ({"alpha": 0.4}, "alpha"),
        ({"batch_size": 50}, "batch_size"),
        ({"random_state": 1}, "random_state"),
        ({"method": "batch"}, "method"),
        ({"n_components": 2}, "n_components"),
    ]:
        with pytest.raises(ValueError, match=rf"different problem \({key}: "):
            _quiet(
                lambda over=over: scalepca.SparsePCA(
                    **{**SPCA_MB, **over}, checkpoint=path
                ).fit(X)
            )
    with pytest.raises(ValueError, match=r"different problem \(row_chunks: "):
        scalepca.SparsePCA(**SPCA_MB, checkpoint=path).fit(da.from_array(X, chunks=50))
    with pytest.raises(ValueError, match=r"different problem \(mean: "):
        scalepca.SparsePCA(**SPCA_MB, checkpoint=path).fit(X * 2.0)


def test_sparse_batch_resume_with_another_tol(tmp_path):
    """A "batch" commit that met tol=1e-2 (2 alternations) resumed with tol=1e-4 ends
    where a fresh fit to 1e-4 ends (53); resumed with 1e-2 again it stops at once, on
    that answer."""
    X = da.from_array(low_rank(0), chunks=100)
    params = dict(
        n_components=3, method="batch", alpha=0.5, random_state=0, max_iter=100
    )
    path = str(tmp_path / "ck")
    fresh = scalepca.SparsePCA(**params, tol=1e-4).fit(X)
    loose = scalepca.SparsePCA(**params, tol=1e-2, checkpoint=path).fit(X)
    assert loose.n_iter_ < 5 < fresh.n_iter_ < 100
    tight = scalepca.SparsePCA(**params, tol=1e-4, checkpoint=path).fit(X)
    assert (
        tight.resumed_from_ == loose.n_iter_ + 1
    )  # the commit after the stopping step
    _same_spca(tight, fresh)  # measured: bit-identical
    np.testing.assert_allclose(tight.objective_, fresh.objective_, rtol=1e-12)
    again = scalepca.SparsePCA(**params, tol=1e-2, checkpoint=path).fit(X)
    assert again.resumed_from_ == tight.n_iter_ + 1
    _same_spca(again, fresh)


def test_sparse_checkpoint_of_permuted_data_is_refused(tmp_path):
    X = low_rank(0)
    path = str(tmp_path / "ck")
    params = dict(n_components=3, method="batch", alpha=0.5, random_state=0)
    _quiet(lambda: scalepca.SparsePCA(**params, max_iter=2, checkpoint=path).fit(X))
    perm = np.random.default_rng(0).permutation(X.shape[1])
    with pytest.raises(ValueError, match=r"different problem \(data_sketch: "):
        scalepca.SparsePCA(**params, checkpoint=path).fit(X[:, perm])
    for over, key in [
        ({"use_correlation": True}, "use_correlation"),
        ({"init": "random"}, "init"),
    ]:
        with pytest.raises(ValueError, match=rf"different problem \({key}: "):
            scalepca.SparsePCA(**{**params, **over}, checkpoint=path).fit(X)


def test_a_folder_scalepca_did_not_write_is_not_used_as_a_checkpoint(tmp_path):
    """Commits prune entries of their folder: a folder holding anything else (notes,
    a data store) is refused and left as it was; an empty one, or an older
    checkpoint, is used."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "T_readme.txt").write_text("mine")
    X = with_missing(0)
    with pytest.raises(
        FileExistsError,
        match=r"checkpoint .*notes' holds a folder that is not "
        r"a zarr store \(T_readme.txt\), not a scalepca checkpoint; scalepca "
        "never writes into it",
    ):
        scalepca.PPCA(max_iter=2, checkpoint=str(notes), **PPCA_PARAMS).fit(X)
    assert sorted(os.listdir(notes)) == ["T_readme.txt"]
    store = tmp_path / "data.zarr"
    da.from_array(X).to_zarr(str(store))
    with pytest.raises(FileExistsError, match="not a scalepca checkpoint"):
        scalepca.RobustPCA(max_iter=2, checkpoint=str(store)).fit(np.nan_to_num(X))
    (tmp_path / "file").write_text("x")
    with pytest.raises(
        FileExistsError, match="holds a file, not a scalepca checkpoint"
    ):
        scalepca.PPCA(max_iter=2, checkpoint=str(tmp_path / "file"), **PPCA_PARAMS).fit(
            X
        )
    (tmp_path / "empty").mkdir()
    _quiet(
        lambda: scalepca.PPCA(
            max_iter=2, checkpoint=str(tmp_path / "empty"), **PPCA_PARAMS
        ).fit(X)
    )
    assert _commits(tmp_path / "empty") == ["state_000002"]


def test_fingerprint_missing_a_key_is_another_problem():
    """A fingerprint missing a key (another fingerprint version, or none) is another
    problem, named by the first key it lacks."""
    now = {
        "fingerprint_version": 2,
        "shape": [10, 3],
        "alpha": 0.5,
        "random_state": 0,
        "data_sketch": [1.0, 2.0],
    }
    with pytest.raises(ValueError, match=r"\(fingerprint_version: None there, 2 now\)"):
        check_fingerprint({"shape": [10, 3], "alpha": 0.5}, now)
    with pytest.raises(ValueError, match=r"\(random_state: None there, 0 now\)"):
        check_fingerprint(
            {"fingerprint_version": 2, "shape": [10, 3], "alpha": 0.5}, now
        )
    # the sketch is compared as a vector, to 1e-9 of its norm (rounding of another
    # chunking)
    check_fingerprint({**now, "data_sketch": [1.0 + 1e-12, 2.0]}, now)
    with pytest.raises(ValueError, match="data_sketch: the data differ"):
        check_fingerprint({**now, "data_sketch": [1.0 + 1e-6, 2.0]}, now)


def test_sketch_is_the_fixed_projection_whatever_the_chunks():
    """``hᵀ V G`` and ``hᵀ N G`` from the fixed weights, against NumPy on the whole
    matrix; sparse blocks give the dense answer; any permutation or moved NaN changes
    it."""
    import scipy.sparse as sp

    from scalepca.io._fingerprint import SKETCH_COLUMNS, _gaussian_at, sketch_graph

    Xn = with_missing(0)
    n, d = Xn.shape
    h = _gaussian_at(np.arange(n), 0x5CA1E)
    G = np.stack(
        [_gaussian_at(np.arange(d), 0x5CA1E + 1 + c) for c in range(SKETCH_COLUMNS)],
        axis=1,
    )
    nan = np.isnan(Xn)
    ref = np.concatenate([h @ np.where(nan, 0, Xn) @ G, h @ nan @ G])
    for chunks in [(400, 12), 50, (70, 5)]:
        got = sketch_graph(da.from_array(Xn, chunks=chunks)).compute()
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    Z = np.where(np.abs(np.nan_to_num(Xn)) > 1, np.nan_to_num(Xn), 0.0)
    sparse = da.from_array(sp.csr_matrix(Z), chunks=(100, 12), asarray=False)
    np.testing.assert_allclose(
        sketch_graph(sparse).compute(),
        sketch_graph(da.from_array(Z, chunks=100)).compute(),
        rtol=0,
        atol=1e-12 * np.abs(ref).max(),
    )
    moved = Xn.copy()
    i, j = np.argwhere(nan)[0]
    moved[i, j], moved[(i + 1) % n, j] = moved[(i + 1) % n, j], np.nan
    for other in (Xn[:, ::-1], Xn[::-1], moved):
        got = sketch_graph(da.from_array(other, chunks=50)).compute()
        assert np.linalg.norm(got - ref) > 1e-3 * np.linalg.norm(ref)


def test_sparse_checkpoint_parameter_errors(tmp_path, raise_if_dask_computes):
    X = da.from_array(low_rank(0), chunks=100)
    with raise_if_dask_computes(0):
        with pytest.raises(
            ValueError, match="checkpoint applies to method='minibatch' or"
        ):
            SparsePCA = scalepca.SparsePCA
            SparsePCA(3, method="elasticnet", checkpoint=str(tmp_path / "ck")).fit(X)
        with pytest.raises(ValueError, match="checkpoint_every"):
            SparsePCA(3, checkpoint=str(tmp_path / "ck"), checkpoint_every=0).fit(X)
    assert not os.path.exists(tmp_path / "ck")


# -- config ----------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["ppca", "sparse_pca", "robust_pca"])
def test_config_accepts_checkpoint(method):
    model = {"method": method, "checkpoint": "ck.zarr", "checkpoint_every": 2}
    if method == "ppca":
        model["solver"] = "em"
    cfg = validate_config({"data": {"path": "x.zarr"}, "model": model})
    assert cfg["model"]["params"]["checkpoint"] == "ck.zarr"
    with pytest.raises(ConfigError, match="checkpoint_every"):
        validate_config(
            {
                "data": {"path": "x.zarr"},
                "model": {**model, "checkpoint_every": "often"},
            }
        )
