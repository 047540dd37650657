"""Writes never destroy (issue 38: items 5, 10, 19).

* Nothing that is not a complete scalepca store of the kind being written is ever
  replaced: a folder of notes, a data store, another kind of scalepca store, a store
  another program wrote. A complete store of the same kind is replaced only when asked
  (``save(overwrite= True)``, ``transform --overwrite``, ``make-data --overwrite``,
  ``output.overwrite`` for a run, which defaults to true: a rerun replaces its own
  earlier outputs). An output that is, contains or lies inside an input is refused
  before any compute. Local paths and fsspec URLs (``local://``, the code path of
  ``s3://``; ``test_s3.py`` has S3 itself) alike.
* Scores are written in chunks aligned with the array's blocks: no "risk of data loss"
  warning from dask (item 10).
* ``validate`` and ``run`` find an output location that cannot be written the way the
  write would, before the fit (item 19).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import yaml
import zarr

import scalepca
from scalepca.app.pipeline import write_outputs
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets import make_low_rank, write_dataset
from scalepca.io import write_array

from .conftest import low_rank_data

FAST_CLUSTER = {
    "kind": "local",
    "n_workers": 1,
    "threads_per_worker": 1,
    "processes": False,
}
#: local:// does not create parent folders itself
URL_OPTIONS = {"auto_mkdir": True}


def _notes(folder: Path) -> dict:
    """A folder of the user's own files; returns its snapshot."""
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("field notes, 12 March\n")
    (folder / "sub" / "table.csv").write_text("a,b\n1,2\n")
    return _snapshot(folder)


def _snapshot(root: Path) -> dict:
    """Relative path → bytes of every file under ``root``."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(params=["path", "url"])
def where(request, tmp_path):
    """``(name → local path or local:// URL, storage_options)``: both writers' code
    paths."""

    def at(name):
        p = tmp_path / name
        return str(p) if request.param == "path" else f"local://{p}"

    return at, (None if request.param == "path" else URL_OPTIONS)


def _main(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# -- Python: save, write_array, write_dataset, checkpoints -----------------------------
def test_save_never_replaces_a_folder_of_other_files(tmp_path, rng, where):
    at, so = where
    before = _notes(tmp_path / "m.zarr")
    pca = scalepca.PCA(2).fit(low_rank_data(rng))
    for kwargs in ({}, {"overwrite": True}):
        with pytest.raises(FileExistsError, match="a folder that is not a zarr store"):
            pca.save(at("m.zarr"), storage_options=so, **kwargs)
    assert _snapshot(tmp_path / "m.zarr") == before
    (tmp_path / "file.zarr").write_text("a file\n")
    with pytest.raises(FileExistsError, match="holds a file"):
        pca.save(at("file.zarr"), storage_options=so, overwrite=True)
    assert (tmp_path / "file.zarr").read_text() == "a file\n"


def test_save_replaces_a_model_only_with_overwrite(tmp_path, rng, where):
    at, so = where
    X = low_rank_data(rng)
    first, second = scalepca.PCA(2).fit(X), scalepca.PPCA(3).fit(X)
    first.save(at("m.zarr"), storage_options=so)
    with pytest.raises(
        FileExistsError, match="complete scalepca model store; pass overwrite=True"
    ):
        second.save(at("m.zarr"), storage_options=so)
    back = scalepca.load(at("m.zarr"), storage_options=so)
    assert type(back) is scalepca.PCA
    np.testing.assert_array_equal(back.components_, first.components_)
    second.save(at("m.zarr"), storage_options=so, overwrite=True)
    back = scalepca.load(at("m.zarr"), storage_options=so)
    np.testing.assert_array_equal(back.transform(X), second.transform(X))
    # an interrupted save of a model (complete: false) holds no result: written again
    zarr.open_group(str(tmp_path / "m.zarr"), mode="r+").attrs["complete"] = False
    first.save(at("m.zarr"), storage_options=so)
    np.testing.assert_array_equal(
        scalepca.load(at("m.zarr"), storage_options=so).components_, first.components_
    )


def test_no_writer_replaces_another_kind_of_store(tmp_path, rng, where):
    at, so = where
    X = low_rank_data(rng)
    pca = scalepca.PCA(2).fit(X)
    write_dataset(
        make_low_rank(300, 6, rank=2, chunk_rows=100, seed=0),
        at("data.zarr"),
        storage_options=so,
    )
    pca.save(at("model.zarr"), storage_options=so)
    write_array(
        pca.transform(da.from_array(X, chunks=50)),
        at("scores.zarr"),
        storage_options=so,
    )
    zarr.create_array(str(tmp_path / "theirs.zarr"), shape=(4, 2), dtype="f8")[...] = (
        1.0
    )
    before = {
        name: _snapshot(tmp_path / name)
        for name in ("data.zarr", "model.zarr", "scores.zarr", "theirs.zarr")
    }
    Z = da.zeros((10, 2), chunks=5)
    cases = [
        (
            lambda p: pca.save(p, storage_options=so, overwrite=True),
            ("data.zarr", "scores.zarr", "theirs.zarr"),
            "not a scalepca model store",
        ),
        (
            lambda p: write_array(Z, p, storage_options=so, overwrite=True),
            ("data.zarr", "model.zarr", "theirs.zarr"),
            "not a scalepca output store",
        ),
        (
            lambda p: write_dataset(
                make_low_rank(20, 6, rank=2, chunk_rows=10),
                p,
                storage_options=so,
                overwrite=True,
            ),
            ("model.zarr", "scores.zarr", "theirs.zarr"),
            "not a scalepca dataset store",
        ),
    ]
    for write, targets, message in cases:
        for name in targets:
            with pytest.raises(FileExistsError, match=message):
                write(at(name))
    with pytest.raises(FileExistsError, match="did not write"):
        pca.save(at("theirs.zarr"), storage_options=so, overwrite=True)
    for name, files in before.items():
        assert _snapshot(tmp_path / name) == files, name


def test_write_dataset_never_replaces_other_files(tmp_path, where):
    at, so = where
    before = _notes(tmp_path / "gen.zarr")
    data = make_low_rank(40, 6, rank=2, chunk_rows=10, seed=0)
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="not a scalepca dataset store"):
            write_dataset(data, at("gen.zarr"), storage_options=so, overwrite=overwrite)
    assert _snapshot(tmp_path / "gen.zarr") == before


def test_write_array_refuses_an_input_path(tmp_path, rng):
    data = tmp_path / "data.zarr"
    write_dataset(make_low_rank(300, 6, rank=2, chunk_rows=100, seed=0), data)
    before = _snapshot(data)
    X = scalepca.open_matrix(str(data))
    computed = []

    def spy(block):
        computed.append(block.shape)
        return block

    Z = X.map_blocks(spy, dtype=X.dtype, meta=np.empty((0, 0)))
    inputs = [("the data", str(data))]
    for out, how in (
        (data, "is the data"),
        (data / "scores.zarr", "lies inside the data"),
        (tmp_path, "contains the data"),
        (f"local://{data}/s.zarr", "lies inside the data"),
    ):
        with pytest.raises(ValueError, match=how):
            write_array(Z, out, inputs=inputs, overwrite=True)
    assert computed == [] and _snapshot(data) == before


def test_checkpoint_never_writes_into_other_files(tmp_path, rng):
    X = low_rank_data(rng, d=6)
    X[0, 0] = np.nan
    before = _notes(tmp_path / "ck")
    with pytest.raises(FileExistsError, match="not a scalepca checkpoint"):
        scalepca.PPCA(2, missing="em", checkpoint=str(tmp_path / "ck")).fit(X)
    assert _snapshot(tmp_path / "ck") == before
    model = tmp_path / "m.zarr"
    scalepca.PCA(2).fit(np.nan_to_num(X)).save(model)
    saved = _snapshot(model)
    with pytest.raises(FileExistsError, match="not a scalepca checkpoint"):
        scalepca.PPCA(2, missing="em", checkpoint=str(model)).fit(X)
    assert _snapshot(model) == saved
    # a checkpoint is continued, an empty folder taken
    (tmp_path / "empty").mkdir()
    a = scalepca.PPCA(2, missing="em", checkpoint=str(tmp_path / "empty")).fit(X)
    b = scalepca.PPCA(2, missing="em", checkpoint=str(tmp_path / "empty")).fit(X)
    np.testing.assert_allclose(b.components_, a.components_, rtol=1e-10, atol=1e-12)


# -- the command line: transform --out, run outputs, make-data -------------------------
@pytest.fixture
def fitted(tmp_path):
    data = tmp_path / "x.zarr"
    write_dataset(make_low_rank(400, 8, rank=2, chunk_rows=100, seed=1), data)
    X = scalepca.open_matrix(str(data)).compute()
    model = tmp_path / "model.zarr"
    est = scalepca.PCA(2).fit(X)
    est.save(model)
    return data, model, est.transform(X)


def _transform(capsys, model, data, out, *extra):
    return _main(
        capsys,
        "transform",
        model,
        data,
        "--out",
        out,
        "--no-processes",
        "--n-workers",
        1,
        "--quiet",
        *extra,
    )


def test_transform_out_never_an_input(tmp_path, fitted, capsys):
    data, model, _ = fitted
    before = {p: _snapshot(p) for p in (data, model)}
    for out, fragment in (
        (data, "is the data"),
        (model, "is the model"),
        (data / "scores.zarr", "lies inside the data"),
        (tmp_path, "contains the model"),
    ):
        rc, _, err = _transform(capsys, model, data, out)
        assert rc == EXIT_USER_ERROR and fragment in err, err
        assert len(err.strip().splitlines()) == 1
    assert {p: _snapshot(p) for p in (data, model)} == before


def test_transform_replaces_scores_only_with_overwrite(tmp_path, fitted, capsys):
    data, model, expected = fitted
    out = tmp_path / "s.zarr"
    rc, _, err = _transform(capsys, model, data, out)
    assert rc == EXIT_OK, err
    rc, _, err = _transform(capsys, model, data, out)
    assert rc == EXIT_USER_ERROR and "pass --overwrite to replace it" in err, err
    rc, _, err = _transform(capsys, model, data, out, "--overwrite")
    assert rc == EXIT_OK, err
    got = scalepca.open_matrix(str(out), variable="scores").compute()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    notes = _notes(tmp_path / "notes")
    rc, _, err = _transform(capsys, model, data, tmp_path / "notes", "--overwrite")
    assert rc == EXIT_USER_ERROR and "not a scalepca output store" in err, err
    assert _snapshot(tmp_path / "notes") == notes


def _config(folder: Path, data, **output) -> Path:
    cfg = {
        "data": {"path": str(data)},
        "model": {"method": "pca", "n_components": 2},
        "cluster": FAST_CLUSTER,
        "output": {"store": str(folder / "out"), "report": False, **output},
        "progress": False,
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_run_outputs_rule(tmp_path, fitted, capsys):
    data, _, expected = fitted
    cfg = _config(tmp_path, data)
    for _ in range(
        2
    ):  # a rerun replaces its own earlier outputs (output.overwrite: true)
        rc, _, err = _main(capsys, "run", cfg, "--quiet")
        assert rc == EXIT_OK, err
    got = scalepca.open_matrix(str(tmp_path / "out" / "scores.zarr"), variable="scores")
    np.testing.assert_allclose(
        np.abs(got.compute()), np.abs(expected), rtol=1e-9, atol=1e-9
    )
    # output.overwrite: false keeps them
    for verb in ("validate", "run"):
        rc, _, err = _main(capsys, verb, cfg, "--set", "output.overwrite=false")
        assert (
            rc == EXIT_USER_ERROR and "pass output.overwrite: true to replace it" in err
        ), err
    # a folder of notes where an output goes is never replaced, whatever
    # output.overwrite says
    other = tmp_path / "other"
    notes = _notes(other / "scores.zarr")
    for verb in ("validate", "run"):
        rc, out, err = _main(capsys, verb, cfg, "--set", f"output.store={other}")
        assert rc == EXIT_USER_ERROR and "not a scalepca output store" in err, err
        assert "fit time" not in out  # refused before the fit
    assert (
        _snapshot(other / "scores.zarr") == notes
        and not (other / "model.zarr").exists()
    )


def test_run_refuses_outputs_inside_the_data(tmp_path, fitted, capsys):
    data, _, _ = fitted
    before = _snapshot(data)
    cfg = _config(tmp_path, data)
    for verb in ("validate", "run"):
        rc, out, err = _main(capsys, verb, cfg, "--set", f"output.store={data}")
        assert rc == EXIT_USER_ERROR and "lies inside data.path" in err, err
        assert "fit time" not in out
        # solver em: a checkpoint of the closed form is refused for that reason first
        rc, _, err = _main(
            capsys,
            verb,
            cfg,
            "--set",
            f"model.params.checkpoint={data}",
            "--set",
            "model.method=ppca",
            "--set",
            "model.params.solver=em",
        )
        assert rc == EXIT_USER_ERROR and "model.checkpoint" in err, err
    assert _snapshot(data) == before


def test_make_data_never_replaces_other_files(tmp_path, capsys):
    notes = _notes(tmp_path / "d.zarr")
    rc, _, err = _main(
        capsys,
        "make-data",
        tmp_path / "d.zarr",
        "--n-samples",
        20,
        "--n-features",
        12,
        "--overwrite",
        "--no-progress",
    )
    assert rc == EXIT_USER_ERROR and "not a scalepca dataset store" in err, err
    assert _snapshot(tmp_path / "d.zarr") == notes


# -- item 10: scores written in the array's own chunks ---------------------------------
def test_scores_of_coalesced_blocks_are_written_without_a_rechunk_warning(
    tmp_path, rng
):
    """The store's 200-row chunks are read 1,200 rows a task (``coalesced_rows``: the
    largest multiple of the store chunk within ``task_size``, as 120,000 rows of
    20,000 are within 128 MiB at 128 float64 columns); dask's ``to_zarr`` into the
    existing array rechunked the scores to its "auto" chunks (the whole 4,000 rows),
    not a multiple of 1,200, and warned "To avoid risk of data loss"."""
    n, d = 4000, 16
    z = zarr.create_array(
        str(tmp_path / "x.zarr"), shape=(n, d), chunks=(200, d), dtype="f8"
    )
    z[...] = low_rank_data(rng, n=n, d=d)
    X = scalepca.open_matrix(str(tmp_path / "x.zarr"), task_size=200 * d * 8 * 6)
    assert X.chunks[0] == (1200, 1200, 1200, 400)
    est = scalepca.PCA(3, svd_solver="tsqr").fit(X)
    out = {
        "store": str(tmp_path / "out"),
        "model": True,
        "scores": True,
        "reconstruction": True,
        "low_rank": False,
        "sparse": False,
    }
    with warnings.catch_warnings(), dask.config.set(scheduler="synchronous"):
        warnings.simplefilter("error")
        write_outputs(est, X, out)
    scores = zarr.open_array(
        str(tmp_path / "out" / "scores.zarr"), path="scores", mode="r"
    )
    assert scores.chunks == (1200, 3)
    ref = est.transform(z[...])
    np.testing.assert_allclose(scores[...], ref, rtol=1e-12, atol=1e-12)


# -- item 19: where the outputs go is probed the way the write goes --------------------
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_unwritable_output_is_found_before_the_fit(tmp_path, fitted, capsys):
    """``/proc`` lets no folder be created in it, though its permission bits (and
    ``os.access`` for root) say it is writable: the probe creates and removes a
    folder where the store would go."""
    data, _, _ = fitted
    cfg = _config(tmp_path, data)
    for verb in ("validate", "run"):
        rc, out, err = _main(
            capsys, verb, cfg, "--set", "output.store=/proc/scalepca-out"
        )
        assert (
            rc == EXIT_USER_ERROR
            and "output.store '/proc/scalepca-out' cannot be written" in err
        ), err
        assert "fit time" not in out
        rc, _, err = _main(
            capsys,
            verb,
            cfg,
            "--set",
            "model.method=ppca",
            "--set",
            "model.params.checkpoint=/proc/scalepca-ck",
            "--set",
            "model.params.solver=em",
        )
        assert rc == EXIT_USER_ERROR and "model.checkpoint" in err, err
    rc, _, err = _transform(capsys, tmp_path / "model.zarr", data, "/proc/scores.zarr")
    assert rc == EXIT_USER_ERROR and "cannot be written" in err, err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".scalepca-probe")]
