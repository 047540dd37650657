"""``scalepca validate``: every check that needs neither a cluster nor a pass over the
data.

Also: messages in config/flag words (not Python keyword syntax), relative paths taken
from the config file's folder, and ``run`` refusing a bad config before it starts a
cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scalepca.app.config import load_config, resolve_paths
from scalepca.app.messages import speak_cli
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets import make_gridded, make_low_rank, write_dataset

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("validate")
    write_dataset(
        make_low_rank(600, 12, rank=3, chunk_rows=200, seed=1), root / "x.zarr"
    )
    write_dataset(
        make_gridded(40, n_lat=6, n_lon=10, rank=2, chunk_rows=20, seed=2),
        root / "g.zarr",
    )
    (root / "a_file").write_text("a plain file: no output store can be made under it\n")
    return root


def _write(folder: Path, name: str, **sections) -> Path:
    cfg = {
        "data": {"path": "x.zarr"},
        "model": {"method": "pca", "n_components": 3},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
    }
    cfg.update(sections)
    path = folder / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def _validate(capsys, path, *extra):
    rc = main(["validate", str(path), *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def test_valid_config_reports_the_shape(stores, capsys):
    rc, out, err = _validate(capsys, _write(stores, "ok.yaml", output={"store": "out"}))
    assert rc == EXIT_OK, err
    assert "valid (method pca, cluster local)" in out
    assert "600 samples × 12 features, float64" in out


BAD = {
    "missing store": ({"data": {"path": "nope.zarr"}}, "data.path: no zarr store at"),
    "variable, close match": (
        {"data": {"path": "g.zarr", "variable": "ssst", "sample_dims": "time"}},
        "data.variable 'ssst' is not in",
        "did you mean 'sst'?",
    ),
    "variable of a plain array": (
        {"data": {"path": "x.zarr", "variable": "x"}},
        "data.variable 'x' is set, but",
    ),
    "sample dims": (
        {"data": {"path": "g.zarr", "sample_dims": ["tim"]}},
        "data.sample_dims ['tim'] are not dimensions of the data",
    ),
    "feature dims": (
        {
            "data": {
                "path": "g.zarr",
                "sample_dims": "time",
                "feature_dims": ["lat", "lonn"],
            }
        },
        "data.feature_dims ['lonn'] are not dimensions",
    ),
    "weights": (
        {"data": {"path": "g.zarr", "sample_dims": "time", "weights": "area"}},
        "'data.weights' 'area' is neither",
    ),
    "solver name": (
        {"model": {"method": "pca", "n_components": 3, "svd_solver": "qr"}},
        "model.svd_solver: qr is not one of the allowed values",
    ),
    "n_components range": (
        {"model": {"method": "pca", "n_components": 40}},
        "model.n_components: 40 is out of range",
        "min(n_samples, n_features) = min(600, 12)",
    ),
    "kernel/approximation": (
        {
            "model": {
                "method": "kernel_pca",
                "n_components": 2,
                "approximation": "rff",
                "kernel": "poly",
            }
        },
        "model.approximation: rff needs model.kernel: rbf",
    ),
    "sparse alpha": (
        {"model": {"method": "sparse_pca", "n_components": 2, "alpha": -1}},
        "alpha must be >= 0",
    ),
    "robust rank": (
        {"model": {"method": "robust_pca", "rank_guess": 0}},
        "model.rank_guess",
    ),
    "output not writable": (
        {"output": {"store": "a_file/out"}},
        "output.store",
        "is not a folder",
    ),
    "generate too small for the model": (
        {
            "data": {
                "path": "new.zarr",
                "generate": {"n_samples": 50, "n_features": 4, "rank": 2},
            },
            "model": {"method": "pca", "n_components": 6},
        },
        "model.n_components: 6 is out of range",
    ),
    "output codec": (
        {"output": {"store": "out", "codec": "gzip"}},
        "'output.codec' is 'gzip'; allowed: lz4, lz4-bitshuffle, zstd, none",
    ),
    "generate parameters": (
        {"data": {"path": "new.zarr", "generate": {"n_samples": 50, "n_features": 4}}},
        "data.generate: rank must be in [1, n_features=4]; got 10",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_problems_exit_2_in_config_words(stores, capsys, case, raise_if_dask_computes):
    sections, *fragments = BAD[case]
    path = _write(stores, "bad.yaml", **sections)
    with raise_if_dask_computes():  # metadata only: nothing computed
        rc, out, err = _validate(capsys, path)
    assert rc == EXIT_USER_ERROR, (out, err)
    assert "valid" not in out
    for fragment in fragments:
        assert fragment in err, err
    assert "pass " not in err and "=..." not in err and "Traceback" not in err
    assert not (stores / "new.zarr").exists()  # nothing is generated by validate


def test_several_problems_are_all_reported(stores, capsys):
    path = _write(
        stores,
        "two.yaml",
        data={"path": "g.zarr", "variable": "sts", "sample_dims": "time"},
        output={"store": "a_file/out"},
    )
    rc, _, err = _validate(capsys, path)
    lines = err.strip().splitlines()
    assert rc == EXIT_USER_ERROR and len(lines) == 2, err
    assert all(ln.startswith("scalepca: error: ") for ln in lines)


def test_every_problem_at_once_with_did_you_mean(stores, capsys):
    """A misspelt key, a bad value and an output that cannot be written: three lines,
    each naming its key, whatever stage finds it (the config's keys, or the data and
    folders)."""
    path = _write(
        stores,
        "three.yaml",
        model={"method": "pca", "n_component": 3, "svd_solver": "qr"},
        output={"store": "a_file/out"},
    )
    rc, out, err = _validate(capsys, path)
    lines = err.strip().splitlines()
    assert rc == EXIT_USER_ERROR and "valid" not in out
    assert len(lines) == 3 and all(
        ln.startswith("scalepca: error: ") for ln in lines
    ), err
    assert (
        "'model.n_component'" in lines[0] and "did you mean 'n_components'?" in lines[0]
    )
    assert "model.svd_solver: qr is not one of the allowed values" in lines[1]
    assert "output.store" in lines[2] and "is not a folder" in lines[2]


def test_values_did_you_mean_and_the_line_of_each_problem(stores, capsys):
    """A value one letter or the case off gets its match (``EM`` → ``em``, ``pcaa``
    → ``pca``, a store path one character off), and each problem the line of its key
    in the file (a key under ``model.params`` too; a key ``--set`` gave has none)."""
    path = stores / "lines.yaml"
    path.write_text(
        "# problems on known lines\ndata:\n  path: x.zar\nmodel:\n  method: "
        "ppca\n  n_components: 2\n  missing: EM\ncluster: {kind: local, "
        "n_workers: 1, processes: false}\noutput:\n  store: out\n  codec: LZ4\n"
    )
    rc, _, err = _validate(capsys, path)
    assert rc == EXIT_USER_ERROR
    assert err.splitlines() == [
        f"scalepca: error: {path}:7: model.missing: EM is not one of the allowed "
        "values: 'error', 'em'; did you mean 'em'?",
        f"scalepca: error: {path}:11: 'output.codec' is 'LZ4'; allowed: lz4, "
        "lz4-bitshuffle, zstd, none; did you mean 'lz4'?",
        f"scalepca: error: {path}:3: data.path: no zarr store at "
        f"'{stores / 'x.zar'}'; did you mean '{stores / 'x.zarr'}'?",
    ], err
    path.write_text("data: {path: x.zarr}\nmodel:\n  method: pcaa\n")
    rc, _, err = _validate(capsys, path)
    assert rc == EXIT_USER_ERROR
    said = f"scalepca: error: {path}:3: 'model.method' 'pcaa' is unknown; "
    assert err.startswith(said), err
    assert err.endswith("; did you mean 'pca'?\n"), err
    path.write_text(
        "data: {path: x.zarr}\nmodel:\n  method: ppca\n "
        " params:\n    n_components: 2\n    missing: Em\n"
    )
    rc, _, err = _validate(capsys, path)
    said = f"scalepca: error: {path}:6: model.missing: Em is not one"
    assert err.startswith(said), err
    assert err.endswith("; did you mean 'em'?\n"), err
    # the file's line of a key --set replaced is not the value's
    path.write_text(
        "data: {path: x.zarr}\nmodel: {method: ppca, n_components: 2, missing: em}\n"
    )
    rc, _, err = _validate(capsys, path, "--set", "model.missing=EM")
    assert err.startswith("scalepca: error: model.missing: EM is not one"), err


def test_the_allowed_keys_of_a_section_are_its_own(stores, capsys):
    """A misspelt output key lists the keys of output as a config writes them: its
    own storage_options, not data's (the CLI's rewording once renamed it
    data.storage_options)."""
    path = _write(stores, "scors.yaml", output={"store": "out", "scors": True})
    for run in (False, True):
        rc = main(["run" if run else "validate", str(path)])
        err = capsys.readouterr().err
        assert rc == EXIT_USER_ERROR, err
        assert (
            "did you mean 'scores'?" in err and "store, storage_options, model" in err
        ), err
        assert "data.storage_options" not in err


def test_generate_config_is_valid_before_the_data_exist(stores, capsys):
    path = _write(
        stores,
        "gen.yaml",
        data={
            "path": "later.zarr",
            "generate": {"n_samples": 1000, "n_features": 8, "rank": 2},
        },
    )
    rc, out, err = _validate(capsys, path)
    assert rc == EXIT_OK, err
    assert "does not exist yet; run generates it (low_rank, 1,000 × 8)" in out
    assert not (stores / "later.zarr").exists()


def test_validate_starts_no_cluster_and_reads_no_data(stores):
    """In a fresh interpreter: distributed is never imported, no chunk file is
    opened."""
    path = _write(stores, "fresh.yaml")
    code = (
        "import sys, builtins, io, scalepca.cli as c\n"
        "opened = []\n"
        "real = builtins.open\n"
        "def spy(f, *a, **k):\n"
        "    opened.append(str(f)); return real(f, *a, **k)\n"
        "builtins.open = io.open = spy\n"
        f"rc = c.main(['validate', {str(path)!r}])\n"
        "builtins.open = io.open = real\n"
        "chunks = [f for f in opened if '/c/' in f]\n"
        "meta = [f for f in opened if f.endswith('zarr.json')]\n"
        "print('RESULT', rc, 'distributed' in sys.modules, chunks, bool(meta))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    # the store's metadata were read (the spy sees file reads), no chunk of data was
    assert "RESULT 0 False [] True" in r.stdout, r.stdout + r.stderr


def test_run_refuses_before_starting_a_cluster(stores, capsys):
    path = _write(
        stores,
        "run.yaml",
        model={"method": "pca", "n_components": 3, "svd_solver": "qr"},
    )
    rc = main(["run", str(path), "--quiet"])
    out, err = capsys.readouterr()
    assert rc == EXIT_USER_ERROR and "model.svd_solver: qr" in err
    assert "dashboard" not in out  # no cluster was started


# -- CLI words -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "message, command, method, expected",
    [
        (
            "'d.zarr' holds variables ['a', 'b']; pass variable=... to choose one",
            "run",
            "pca",
            "'d.zarr' holds variables ['a', 'b']; set data.variable to choose one",
        ),
        (
            "'d.zarr' holds variables ['a', 'b']; pass variable=... to choose one",
            "transform",
            None,
            "'d.zarr' holds variables ['a', 'b']; pass --variable to choose one",
        ),
        (
            "the DataArray has dims ('t', 'x', 'y'); pass "
            "sample_dims=(...) to say which are samples",
            "validate",
            "pca",
            "the DataArray has dims ('t', 'x', 'y'); set "
            "data.sample_dims to say which are samples",
        ),
        (
            "X contains 1 NaN or infinite value(s); remove or impute them "
            "(PPCA(missing='em') treats NaN as missing)",
            "run",
            "pca",
            "the data contains 1 NaN or infinite value(s); remove or impute them "
            "(model.method: ppca with model.missing: em treats NaN as missing)",
        ),
        (
            "svd='full' gathers the matrix; use svd='randomized'",
            "run",
            "robust_pca",
            "model.svd: full gathers the matrix; use model.svd: randomized",
        ),
        (
            "n_components=3 is out of range: min(n_samples, n_features) = 2",
            "run",
            "kernel_pca",
            "model.n_components: 3 is out of range: min(n_samples, n_features) = 2",
        ),
    ],
)
def test_library_messages_in_cli_words(message, command, method, expected):
    assert speak_cli(message, command=command, method=method) == expected


def test_transform_speaks_flags(stores, tmp_path, capsys):
    rc = main(
        [
            "transform",
            str(tmp_path / "m.zarr"),
            str(stores / "g.zarr"),
            "--out",
            str(tmp_path / "o.zarr"),
            "--quiet",
        ]
    )
    _, err = capsys.readouterr()
    assert rc == EXIT_USER_ERROR and "no zarr store at" in err


# -- relative paths --------------------------------------------------------------------
def test_paths_are_relative_to_the_config_file(tmp_path, monkeypatch):
    (tmp_path / "job").mkdir()
    cfg = _write(
        tmp_path / "job",
        "c.yaml",
        data={"path": "../data/x.zarr"},
        output={"store": "out"},
        model={"method": "ppca", "n_components": 2, "checkpoint": "ckpt"},
        cluster={"kind": "local", "local_directory": "scratch"},
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded = load_config(cfg)
    assert loaded["data"]["path"] == str(tmp_path / "data" / "x.zarr")
    assert loaded["output"]["store"] == str(tmp_path / "job" / "out")
    assert loaded["model"]["params"]["checkpoint"] == str(tmp_path / "job" / "ckpt")
    assert loaded["cluster"]["local_directory"] == str(tmp_path / "job" / "scratch")
    # --set values are command-line paths: they stay relative to the working directory
    loaded = load_config(cfg, ["output.store=o2"])
    assert loaded["output"]["store"] == "o2"
    # URLs, absolute paths and $VARIABLES are left alone
    raw = {
        "data": {"path": "s3://b/x.zarr"},
        "output": {"store": "/abs/out"},
        "cluster": {"local_directory": "$TMPDIR"},
    }
    assert resolve_paths(raw, tmp_path) == raw


def test_run_from_another_folder_writes_next_to_the_config(
    tmp_path, monkeypatch, capsys
):
    job = tmp_path / "job"
    job.mkdir()
    write_dataset(make_low_rank(300, 6, rank=2, chunk_rows=100, seed=0), job / "x.zarr")
    cfg = _write(job, "c.yaml", output={"store": "out", "report": False})
    monkeypatch.chdir(tmp_path)
    rc = main(["run", str(cfg.relative_to(tmp_path)), "--quiet"])
    _, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    assert (job / "out" / "model.zarr").exists() and not (tmp_path / "out").exists()
