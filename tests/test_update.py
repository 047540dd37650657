"""``scalepca run --update`` (``output.update: true``): a store grown along its samples.

The updated model equals a fresh ``run`` on the whole store (float64, 1e-12), the old
rows' scores are kept byte for byte and the new rows' equal the fresh model's; only
the new rows are read (an old chunk the sketch does not sample may even be
unreadable); a scalepca dataset and an xarray field appended along ``time`` alike.
Refusals come before any read, in the config's words (``validate`` says them too). An
update SIGKILLed while appending the scores loses nothing, and the next update
completes it.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import dask
import numpy as np
import pytest
import xarray as xr
import yaml
import zarr

import scalepca
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets import make_gridded, make_low_rank, write_dataset

from .support.compare import assert_same_components, assert_same_pca
from .support.reliability import REPO, run_until_stopped

FAST_CLUSTER = {
    "kind": "local",
    "n_workers": 1,
    "threads_per_worker": 2,
    "processes": False,
}
N0, N1, D, CHUNK = 1000, 1200, 16, 100


def _config(tmp: Path, store, *, out="out", **sections) -> Path:
    cfg = {
        "data": {"path": str(store), "task_size": None},
        "model": {"method": "pca", "n_components": 3},
        "cluster": dict(FAST_CLUSTER),
        "output": {"store": str(tmp / out)},
    }
    for key, value in sections.items():
        cfg[key] = {**cfg[key], **value}
    path = tmp / f"{out}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _main(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _rows(seed=3):
    return make_low_rank(N1, D, rank=4, chunk_rows=CHUNK, seed=seed).compute()


def _grown(tmp: Path, full: np.ndarray) -> Path:
    """A dataset store of the first N0 rows, appended with the rest after a first
    run."""
    path = tmp / "x.zarr"
    write_dataset(dask.array.from_array(full[:N0], chunks=(CHUNK, D)), path)
    return path


def _append(path, rows):
    zarr.open_array(str(path), mode="r+").append(rows)


def _files(root: Path) -> dict:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    }


def _check_dense(model, full):
    """Against LAPACK's SVD of the whole centred matrix (scikit-learn's full solver)."""
    from sklearn.decomposition import PCA

    ref = PCA(3, svd_solver="full").fit(full)
    assert_same_components(model.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-10
    )


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """A run, the store grown by N1 - N0 rows, then ``run --update``; and a fresh
    run."""
    tmp = tmp_path_factory.mktemp("grown")
    full = _rows()
    data = _grown(tmp, full)
    cfg = _config(tmp, data)
    assert main(["run", str(cfg), "-q"]) == EXIT_OK
    old = _files(tmp / "out" / "scores.zarr")
    _append(data, full[N0:])
    fresh = _config(tmp, data, out="fresh")
    assert main(["run", str(fresh), "-q"]) == EXIT_OK
    return {"tmp": tmp, "full": full, "data": data, "cfg": cfg, "old_scores": old}


def test_update_equals_a_fresh_run_on_the_whole_store(grown, capsys):
    rc, out, _ = _main(capsys, "run", grown["cfg"], "--update", "--no-progress")
    assert rc == EXIT_OK
    assert "update: 1,000 rows seen before + 200 new rows = 1,200" in out
    assert "passes over the new rows only: 1" in out
    tmp = grown["tmp"]
    model = scalepca.load(tmp / "out" / "model.zarr")
    fresh = scalepca.load(tmp / "fresh" / "model.zarr")
    assert model.n_samples_seen_ == N1 and model.n_passes_ == 1
    assert_same_pca(model, fresh, up_to_sign=False)
    _check_dense(model, grown["full"])
    scores = xr.open_zarr(tmp / "out" / "scores.zarr")
    fresh_scores = xr.open_zarr(tmp / "fresh" / "scores.zarr").scores.values
    assert scores.scores.shape == (N1, 3)
    # the old rows' score chunks are the files they were (each chunk holds old rows
    # only)
    after = _files(tmp / "out" / "scores.zarr")
    assert {k: v for k, v in after.items() if k in grown["old_scores"]} == grown[
        "old_scores"
    ]
    np.testing.assert_allclose(scores.scores.values[N0:], fresh_scores[N0:], atol=1e-12)
    assert scores.attrs["scored_by"] == [
        {"rows": [0, N0], "model_rows": N0},
        {"rows": [N0, N1], "model_rows": N1},
    ]
    report = (tmp / "out" / "report.html").read_text()
    assert "1,000 rows seen before, 200 new rows read" in report
    # the whole update's passes: the fit's over the new rows, and their scores'
    import html

    assert (
        "<th>passes over the data (whole run)</th><td>2 (1 by the fit; 1 appending "
        "the new rows' scores)</td>" in html.unescape(report)
    )


def test_a_second_update_without_new_rows_writes_nothing(grown, capsys):
    model = grown["tmp"] / "out" / "model.zarr"
    if scalepca.load(model).n_samples_seen_ != N1:
        assert main(["run", str(grown["cfg"]), "--update", "-q"]) == EXIT_OK
    before = _files(model)
    rc, out, _ = _main(capsys, "run", grown["cfg"], "--update")
    assert rc == EXIT_OK and "no rows appended since the model's 1,200" in out
    assert _files(model) == before


def test_only_the_new_rows_are_read(tmp_path, capsys):
    """An old chunk the sketch does not sample is made unreadable: the update never
    reads it."""
    full = _rows(seed=5)
    data = _grown(tmp_path, full)
    cfg = _config(tmp_path, data)
    assert main(["run", str(cfg), "-q"]) == EXIT_OK
    sketched = scalepca.load(tmp_path / "out" / "model.zarr")._rows_sketch["positions"]
    unread = next(
        c for c in range(N0 // CHUNK) if not any(p // CHUNK == c for p in sketched)
    )
    (data / "c" / str(unread) / "0").write_bytes(b"not a chunk")
    _append(data, full[N0:])
    rc, _, err = _main(capsys, "run", cfg, "--update", "-q")
    assert rc == EXIT_OK, err
    assert_same_pca(
        scalepca.load(tmp_path / "out" / "model.zarr"),
        scalepca.PCA(3).fit(full),
        up_to_sign=False,
    )


def test_xarray_field_appended_along_time(tmp_path):
    g = make_gridded(
        n_samples=130, n_lat=6, n_lon=8, rank=3, chunk_rows=40, dtype="float64"
    ).compute()
    data = tmp_path / "g.zarr"
    write_dataset(g.isel(time=slice(0, 100)).chunk({"time": 40}), data)
    cfg = _config(
        tmp_path, data, data={"sample_dims": ["time"], "weights": "sqrt_coslat"}
    )
    assert main(["run", str(cfg), "-q"]) == EXIT_OK
    old = xr.open_zarr(tmp_path / "out" / "scores.zarr").scores.values
    g.isel(time=slice(100, None)).chunk({"time": 40}).to_zarr(data, append_dim="time")
    assert main(["run", str(cfg), "--update", "-q"]) == EXIT_OK
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    X = scalepca.open_matrix(str(data), sample_dims=["time"], weights="sqrt_coslat")
    ref = scalepca.PCA(3).fit(X)
    assert model.n_samples_seen_ == 130
    kept = ~np.isnan(ref.components_[0])
    np.testing.assert_allclose(
        model.components_[:, kept], ref.components_[:, kept], atol=1e-12
    )
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-12
    )
    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr").scores
    np.testing.assert_array_equal(
        scores.time.values, g.time.values
    )  # the new times too
    np.testing.assert_array_equal(scores.values[:100], old)
    np.testing.assert_allclose(
        scores.values[100:], ref.transform(X).values[100:], atol=1e-12
    )


# -- refusals, before any read ---------------------------------------------------------
@pytest.fixture
def first_run(tmp_path):
    full = _rows(seed=7)
    data = _grown(tmp_path, full)
    cfg = _config(tmp_path, data)
    assert main(["run", str(cfg), "-q"]) == EXIT_OK
    return tmp_path, data, cfg, full


def _refused(capsys, cfg, *more, validate=True) -> str:
    """The refusal of ``run --update``; ``validate`` says the same (but for changed
    rows, which take a read)."""
    rc, _, err = _main(capsys, "run", cfg, "--update", *more)
    assert rc == EXIT_USER_ERROR, err
    if validate:
        rc, _, verr = _main(
            capsys, "validate", cfg, "--set", "output.update=true", *more
        )
        assert rc == EXIT_USER_ERROR and verr.strip() == err.strip(), (verr, err)
    return err


def test_no_previous_model_is_refused(tmp_path, capsys):
    data = _grown(tmp_path, _rows())
    err = _refused(capsys, _config(tmp_path, data))
    assert "no model at" in err and "run without --update first" in err


def test_validate_says_the_refusal(tmp_path, capsys):
    data = _grown(tmp_path, _rows())
    rc, _, err = _main(
        capsys, "validate", _config(tmp_path, data), "--set", "output.update=true"
    )
    assert rc == EXIT_USER_ERROR and "no model at" in err


def test_a_store_that_shrank_is_refused(first_run, capsys):
    tmp, data, cfg, full = first_run
    write_dataset(
        dask.array.from_array(full[:900], chunks=(CHUNK, D)), data, overwrite=True
    )
    err = _refused(capsys, cfg)
    assert "900 rows, fewer than the 1,000" in err


def test_other_features_are_refused(first_run, capsys):
    tmp, data, cfg, full = first_run
    wider = np.hstack([full, full[:, :2]])
    write_dataset(
        dask.array.from_array(wider, chunks=(CHUNK, D + 2)), data, overwrite=True
    )
    assert "18 features; the model" in _refused(capsys, cfg)


def test_changed_old_rows_are_refused(first_run, capsys):
    tmp, data, cfg, full = first_run
    z = zarr.open_array(str(data), mode="r+")
    z[N0 - 1, 0] = 1e6  # the last row seen is always sampled
    _append(data, full[N0:])
    err = _refused(capsys, cfg, validate=False)
    assert "rows the model has seen changed" in err and "999" in err


def test_what_the_sketch_cannot_see(first_run, capsys):
    """Documented limit: one value edited in a row the sketch did not sample goes
    unnoticed."""
    tmp, data, cfg, full = first_run
    sketched = set(scalepca.load(tmp / "out" / "model.zarr")._rows_sketch["positions"])
    row = next(r for r in range(N0) if r not in sketched)
    zarr.open_array(str(data), mode="r+")[row, 0] = 1e6
    _append(data, full[N0:])
    assert main(["run", str(cfg), "--update", "-q"]) == EXIT_OK


def test_a_model_that_cannot_be_updated_is_refused(tmp_path, capsys):
    data = _grown(tmp_path, _rows())
    cfg = _config(tmp_path, data, model={"svd_solver": "randomized"})
    assert main(["run", str(cfg), "-q"]) == EXIT_OK
    err = _refused(capsys, cfg)
    assert "cannot update model.svd_solver: randomized" in err


def test_validate_says_what_an_update_reads(first_run, capsys):
    tmp, data, cfg, full = first_run
    _append(data, full[N0:])
    rc, out, err = _main(capsys, "validate", cfg, "--set", "output.update=true")
    assert rc == EXIT_OK, err
    assert "update: the model has seen 1,000 rows; 200 new rows to read" in out


def test_other_parameters_are_refused(first_run, capsys):
    tmp, data, cfg, full = first_run
    _append(data, full[N0:])
    err = _refused(capsys, cfg, "--set", "model.n_components=4")
    assert "the config says model.n_components: 4" in err


def test_other_outputs_are_refused(first_run, capsys):
    tmp, data, cfg, full = first_run
    err = _refused(capsys, cfg, "--set", "output.reconstruction=true")
    assert "output.reconstruction" in err


def test_a_model_without_a_record_of_its_rows_is_refused(first_run, capsys):
    tmp, data, cfg, full = first_run
    model = scalepca.load(tmp / "out" / "model.zarr")
    del model._rows_sketch  # as save() writes it, or a run before --update
    model.save(tmp / "out" / "model.zarr", overwrite=True)
    assert "keeps no record of the rows" in _refused(capsys, cfg)


# -- interrupted updates ---------------------------------------------------------------
_KILLED_UPDATE = textwrap.dedent(
    """
    import sys, dask
    from scalepca.cli import main
    from tests.support.reliability import stop_after_chunks

    stop_after_chunks("scores", int(sys.argv[2]))
    with dask.config.set(scheduler="synchronous"):
        main(["run", sys.argv[1], "--update", "-q"])
    print("finished", flush=True)
    """
)


def test_an_interrupted_update_loses_nothing(first_run):
    tmp, data, cfg, full = first_run
    out = tmp / "out"
    model_before, scores_before = (
        _files(out / "model.zarr"),
        _files(out / "scores.zarr"),
    )
    _append(data, full[N0:])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    printed = run_until_stopped(
        [sys.executable, "-c", _KILLED_UPDATE, str(cfg), "1"], env=env, cwd=REPO
    )
    assert "finished" not in printed
    # the model is the previous one; the old scores are as they were; the append is
    # flagged
    assert _files(out / "model.zarr") == model_before
    after = _files(out / "scores.zarr")
    assert {k: v for k, v in after.items() if k in scores_before} == scores_before
    group = zarr.open_group(str(out / "scores.zarr"), use_consolidated=False)
    assert group.attrs["complete"] is False
    assert group.attrs["appending"] == {"from": N0, "to": N1}
    with pytest.raises(ValueError, match="interrupted|incomplete|complete"):
        scalepca.open_matrix(str(out / "scores.zarr"), variable="scores")
    # the next update does it again, completely
    assert main(["run", str(cfg), "--update", "-q"]) == EXIT_OK
    ref = scalepca.PCA(3).fit(full)
    assert_same_pca(scalepca.load(out / "model.zarr"), ref, up_to_sign=False)
    _check_dense(ref, full)
    scores = xr.open_zarr(out / "scores.zarr")
    assert scores.scores.shape == (N1, 3) and scores.attrs["complete"] is True
    np.testing.assert_allclose(
        scores.scores.values[N0:], ref.transform(full[N0:]), atol=1e-12
    )


def test_an_update_interrupted_after_its_model_was_saved_is_completed(
    first_run, capsys
):
    tmp, data, cfg, full = first_run
    _append(data, full[N0:])
    assert main(["run", str(cfg), "--update", "-q"]) == EXIT_OK
    scores = tmp / "out" / "scores.zarr"
    group = zarr.open_group(str(scores), mode="r+", use_consolidated=False)
    attrs = dict(group.attrs)
    attrs.pop("scored_by")
    group.attrs.put({**attrs, "complete": False, "appending": {"from": N0, "to": N1}})
    rc, out, _ = _main(
        capsys, "run", cfg, "--update"
    )  # what a kill before the flag leaves
    assert rc == EXIT_OK and "no rows appended" in out
    done = xr.open_zarr(scores)
    assert done.attrs["complete"] is True and "appending" not in done.attrs
    assert done.scores.shape == (N1, 3)


def test_a_store_not_grown_in_place_is_refused(tmp_path, capsys):
    """NetCDF (like AnnData and .bed) is not appended in place: refused before the
    fit."""
    g = make_gridded(n_samples=40, n_lat=4, n_lon=6, rank=2, dtype="float64").compute()
    path = tmp_path / "g.nc"
    g.to_netcdf(path)
    cfg = _config(tmp_path, path, data={"sample_dims": ["time"], "task_size": "128MiB"})
    err = _refused(capsys, cfg)
    assert "is a netcdf store; --update (output.update) reads a zarr store" in err
