"""Outputs interrupted mid-write (the writing process SIGKILLed) are never read back as
complete, a previous complete output survives, and the next run overwrites cleanly.

Three writers, each in a subprocess that stops once a known number of its chunks are on
disk (``support.reliability.stop_after_chunks``) and is SIGKILLed there, so the kill
lands mid-write on a fast or a loaded machine alike:

* ``scalepca.app.pipeline.write_outputs`` (what ``scalepca run`` calls) writing a model
  and scores to a local directory — the atomic path: temporary sibling, rename;
* the same to an fsspec URL (``local://`` — the code path of ``s3://`` and other object
  stores, where the store is written in place with ``complete: false`` until the end);
* ``scalepca make-data`` to an fsspec URL (in place).

Model stores interrupted mid-save are covered in ``test_store.py``; RobustPCA
checkpoints killed mid-fit in ``test_robust_pca.py`` and ``test_faults.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import scalepca

from .support.interrupted_writes import (
    FSSPEC_OPTIONS,
    STOP_AFTER,
    expected_scores,
    scenario_local,
    scenario_make_data,
    scenario_url,
)


# -- local (atomic rename) -------------------------------------------------------------
@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    return scenario_local(tmp_path_factory.mktemp("local"))


def test_killed_local_write_is_never_read_as_complete(local_run):
    # killed in the middle of writing the scores
    assert STOP_AFTER <= local_run["killed_chunks"] < local_run["n_chunks"]
    assert not local_run["first_readable"], (
        "a killed first write left a readable scores store"
    )


def test_killed_local_overwrite_keeps_previous_output(local_run):
    assert STOP_AFTER <= local_run["overwrite_killed_at"] < local_run["n_chunks"]
    assert local_run["previous_intact"], "the previous complete scores changed"
    assert local_run["bytes_lost"] == 0


def test_next_local_run_overwrites_cleanly(local_run):
    out = local_run["out"]
    est, expected = expected_scores(local_run["data"])
    got = scalepca.open_matrix(str(out / "scores.zarr"), variable="scores")
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12, atol=1e-12)
    assert zarr.open_group(str(out / "scores.zarr")).attrs["complete"] is True
    back = scalepca.load(str(out / "model.zarr"))
    np.testing.assert_array_equal(back.components_, est.components_)


def test_next_local_run_leaves_no_partial_directories(local_run):
    assert local_run["leftovers"] == [], (
        f"partial stores of the killed writes are still beside the output after the "
        f"next run: {local_run['leftovers']}"
    )


# -- fsspec URL (in place, complete flag) ----------------------------------------------
@pytest.fixture(scope="module")
def url_run(tmp_path_factory):
    return scenario_url(tmp_path_factory.mktemp("url"))


@pytest.mark.slow
def test_killed_url_write_is_flagged_incomplete(url_run):
    assert (
        STOP_AFTER <= url_run["killed_chunks"] < url_run["n_chunks"]
    )  # killed mid-scores
    assert url_run["flag"] is False
    assert url_run["model_loads"]  # the model was written completely before the scores


@pytest.mark.slow
def test_killed_url_write_is_never_read_as_complete(url_run):
    assert not url_run["partial_readable"], (
        "open_matrix read an interrupted in-place "
        "output (attribute complete: false) as data"
    )


@pytest.mark.slow
def test_killed_url_rewrite_loses_nothing(url_run):
    """Object stores cannot rename: the complete output being replaced is kept as
    ``<store>.previous`` until the rewrite completes, so a killed rewrite loses no
    byte."""
    assert (
        url_run["bytes_replaced"] > 0
    )  # the kill did land while chunks were being rewritten
    assert url_run["kept_equal"], (
        "the kept copy differs from the previous complete output"
    )
    assert url_run["bytes_lost"] == 0
    assert isinstance(url_run["previous_readable"], tuple), url_run["previous_readable"]
    assert (
        "scores.zarr.previous" in url_run["hint"]
    )  # the error says where the old output is


@pytest.mark.slow
def test_next_url_run_overwrites_cleanly(url_run):
    est, expected = expected_scores(url_run["data"])
    got = scalepca.open_matrix(
        f"{url_run['url']}/scores.zarr",
        variable="scores",
        storage_options=FSSPEC_OPTIONS,
    )
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12, atol=1e-12)
    assert (
        zarr.open_group(str(url_run["out_dir"] / "scores.zarr")).attrs["complete"]
        is True
    )
    assert (
        url_run["previous_left"] == []
    )  # the kept copy goes once the new output is complete


# -- make-data to a URL (in place) -----------------------------------------------------
@pytest.mark.slow
def test_killed_make_data_to_url_is_not_reused_as_complete(tmp_path):
    facts = scenario_make_data(tmp_path)
    assert 5 <= facts["killed_chunks"] < 100  # killed mid-write
    assert not facts["partial_readable"], (
        f"a make-data killed mid-write was opened as a complete dataset "
        f"{facts.get('shape')}"
    )
    assert facts["regenerated"], "scalepca run reused a partially generated dataset"
