"""The scalepca command line: run/transform/info/validate/make-data, exit codes, real
cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pytest
import xarray as xr
import yaml
import zarr

import scalepca
from scalepca.cli import EXIT_JOB_FAILED, EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets import make_low_rank, write_dataset

SCALEPCA = str(Path(sys.executable).parent / "scalepca")
DASK = str(Path(sys.executable).parent / "dask")
# an in-process cluster keeps the default tests fast; the distributed tests use real
# processes
FAST_CLUSTER = {
    "kind": "local",
    "n_workers": 1,
    "threads_per_worker": 2,
    "processes": False,
}


@pytest.fixture(scope="module")
def data_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "x.zarr"
    write_dataset(make_low_rank(3000, 20, rank=4, chunk_rows=500, seed=3), path)
    return path


def _config(tmp_path, data_path, *, name="run.yaml", **sections) -> Path:
    cfg = {
        "data": {"path": str(data_path)},
        "model": {"method": "pca", "n_components": 3},
        "cluster": dict(FAST_CLUSTER),
        "output": {"store": str(tmp_path / "out")},
    }
    for key, value in sections.items():
        if (
            isinstance(value, dict)
            and isinstance(cfg.get(key), dict)
            and key != "cluster"
        ):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def _main(capsys, *argv):
    with dask.config.set(
        {"scalepca.progress.grace": 0}
    ):  # a bar even for quick computes
        rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _data(path):
    return zarr.open_array(path, mode="r")[...]


# -- run -------------------------------------------------------------------------------
def test_run_writes_model_scores_reconstruction(tmp_path, data_path, capsys):
    cfg = _config(tmp_path, data_path, output={"reconstruction": True})
    rc, out, err = _main(capsys, "run", cfg)
    assert rc == EXIT_OK, err
    assert "method: pca (PCA)   data: 3,000 × 20" in out
    assert "explained variance" in out and "dask dashboard at http" in out
    # progress is on by default; captured output is not a terminal, so one line per pass
    # (the fit and the pass, chunks, time, rate) and no redrawn bar
    assert re.search(
        r"\] PCA pass 1 of 1 \(moments\): [\d,]+ chunks? in [\d.]+ s \([\d,.]+ "
        r"chunks/s\)\n",
        out,
    ), out
    assert "\r" not in out
    X = _data(data_path)
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    ref = scalepca.PCA(3).fit(X)
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    scores = zarr.open_group(tmp_path / "out" / "scores.zarr", mode="r")
    assert scores.attrs["complete"] is True
    np.testing.assert_array_equal(scores["scores"][...], model.transform(X))
    rec = zarr.open_group(tmp_path / "out" / "reconstruction.zarr", mode="r")[
        "reconstruction"
    ]
    np.testing.assert_allclose(
        rec[...], model.inverse_transform(model.transform(X)), rtol=1e-12, atol=1e-12
    )


def test_run_output_codec_from_config(tmp_path, data_path, capsys):
    """``output.codec`` (and ``--set output.codec=...``) picks the compression of
    outputs."""
    cfg = _config(
        tmp_path,
        data_path,
        output={"codec": "zstd", "reconstruction": True, "model": False},
    )
    rc, _, err = _main(capsys, "run", cfg, "--no-progress")
    assert rc == EXIT_OK, err
    for part in ("scores", "reconstruction"):
        arr = zarr.open_group(tmp_path / "out" / f"{part}.zarr", mode="r")[part]
        assert [type(c).__name__ for c in arr.compressors] == ["ZstdCodec"]
    rc, _, err = _main(
        capsys, "run", cfg, "--no-progress", "--set", "output.codec=none"
    )
    assert rc == EXIT_OK, err
    arr = zarr.open_group(tmp_path / "out" / "scores.zarr", mode="r")["scores"]
    assert arr.compressors == ()
    X = _data(data_path)
    np.testing.assert_allclose(
        arr[...], scalepca.PCA(3).fit(X).transform(X), rtol=1e-10, atol=1e-10
    )


def test_run_set_no_progress_and_generate(tmp_path, capsys):
    gen = tmp_path / "gen.zarr"
    cfg = _config(
        tmp_path,
        gen,
        data={
            "generate": {
                "kind": "low_rank",
                "n_samples": 1000,
                "n_features": 8,
                "rank": 2,
                "chunk_rows": 250,
            }
        },
        model={"method": "ppca", "n_components": 4},
        output={"scores": False},
    )
    rc, out, err = _main(
        capsys, "run", cfg, "--set", "model.n_components=2", "--no-progress"
    )
    assert rc == EXIT_OK, err
    assert "Completed" not in out and "generating low_rank dataset" in out
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    assert isinstance(model, scalepca.PPCA) and model.n_components_ == 2
    assert not (tmp_path / "out" / "scores.zarr").exists()
    assert _data(gen).shape == (1000, 8)


def test_run_progress_false_in_config(tmp_path, data_path, capsys):
    cfg = _config(tmp_path, data_path, progress=False, output={"store": None})
    rc, out, _ = _main(capsys, "run", cfg)
    assert rc == EXIT_OK and "Completed" not in out and "written" not in out


@pytest.mark.parametrize("max_iter, tol", [(2, 0.0), (500, 1e-3)])
def test_run_says_whether_em_converged_and_its_total_time(
    tmp_path, data_path, capsys, max_iter, tol
):
    model = {
        "method": "ppca",
        "n_components": 2,
        "missing": "em",
        "max_iter": max_iter,
        "tol": tol,
    }
    cfg = _config(tmp_path, data_path, model=model, output={"store": None})
    rc, out, err = _main(capsys, "run", cfg, "--no-progress", "-q")
    assert rc == EXIT_OK, err
    # the same fit in Python: its iterations and whether it met tol
    est = scalepca.PPCA(2, missing="em", max_iter=max_iter, tol=tol).fit(
        _data(data_path)
    )
    said = (
        f"converged: model.tol {tol:g} met"
        if est.converged_
        else f"not converged: stopped at model.max_iter {max_iter:,} before model.tol "
        f"{tol:g} was met; raise max_iter or tol"
    )
    assert f"iterations: {est.n_iter_:,} ({said})\n" in out, out
    assert est.converged_ == (tol > 0)  # both cases are met
    # the last line: the whole run's time (the fit's is in the summary)
    total = re.fullmatch(r"total time: ([\d.]+) s", out.rstrip("\n").split("\n")[-1])
    fit = float(re.search(r"fit time: ([\d.]+) s", out).group(1))
    assert total and fit <= float(total.group(1)), out


def test_run_interrupted_after_the_model_says_so(
    tmp_path, data_path, capsys, monkeypatch
):
    """Ctrl+C while the scores are written, the model already saved: the one line
    says the model was written (it loads, complete) and nothing else (no scores
    store)."""
    import scalepca.io

    real = scalepca.io.write_array

    def interrupted_at_the_scores(arrays, path, **kwargs):
        if kwargs.get("name") == "scores":
            raise KeyboardInterrupt  # Ctrl+C here
        return real(arrays, path, **kwargs)

    monkeypatch.setattr(scalepca.io, "write_array", interrupted_at_the_scores)
    cfg = _config(tmp_path, data_path)
    rc, out, err = _main(capsys, "run", cfg, "--no-progress", "-q")
    model = tmp_path / "out" / "model.zarr"
    assert rc == 130
    assert err == (
        f"scalepca: interrupted (written completely before it: {model}; nothing else)\n"
    ), err
    assert scalepca.load(model).n_components_ == 3
    assert not (tmp_path / "out" / "scores.zarr").exists()


def test_transform_and_info(tmp_path, data_path, capsys):
    X = _data(data_path)
    pca = scalepca.PPCA(3).fit(X)
    pca.save(tmp_path / "m.zarr")
    rc, out, err = _main(
        capsys,
        "transform",
        tmp_path / "m.zarr",
        data_path,
        "--out",
        tmp_path / "s.zarr",
        "--no-progress",
        "--no-processes",
        "--n-workers",
        1,
    )
    assert rc == EXIT_OK, err
    s = zarr.open_group(tmp_path / "s.zarr", mode="r")["scores"][...]
    np.testing.assert_array_equal(s, pca.transform(X))
    rc, out, _ = _main(capsys, "info", tmp_path / "m.zarr")
    assert rc == EXIT_OK
    assert "scalepca.models.ppca:PPCA (complete)" in out and "W_: shape (20, 3)" in out
    assert '"n_components": 3' in out
    rc, out, _ = _main(capsys, "info", tmp_path / "s.zarr")
    assert rc == EXIT_OK and "scores: shape (3000, 3)" in out
    rc, out, _ = _main(capsys, "info", data_path)
    assert rc == EXIT_OK and "shape (3000, 20)" in out


def test_validate_and_job_script(tmp_path, data_path, capsys):
    rc, out, _ = _main(capsys, "validate", _config(tmp_path, data_path))
    assert rc == EXIT_OK and "valid (method pca, cluster local)" in out
    rc, _, err = _main(capsys, "validate", _config(tmp_path, data_path), "--job-script")
    assert rc == EXIT_USER_ERROR and "--job-script needs a batch cluster kind" in err
    pytest.importorskip("dask_jobqueue")
    slurm = Path(__file__).parents[1] / "configs" / "slurm.yaml"
    rc, out, _ = _main(capsys, "validate", slurm, "--job-script")
    assert rc == EXIT_OK and "#SBATCH --cpus-per-task=8" in out


# -- error paths: one line, exit code 2, never a traceback -----------------------------
def _error_cases(tmp_path, data_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("data:\n  path: [x\nmodel: {method: pca}\n")
    return {
        "bad YAML": (["validate", bad_yaml], "not valid YAML (line"),
        "unknown key": (
            [
                "validate",
                _config(tmp_path, data_path, name="k.yaml", data={"pth": "x"}),
            ],
            "unknown key(s) 'data.pth'; allowed in 'data': path",
        ),
        "wrong type": (
            [
                "run",
                _config(
                    tmp_path,
                    data_path,
                    name="t.yaml",
                    model={"method": "pca", "n_components": "three"},
                ),
            ],
            "'model.n_components' must be an integer >= 1, a float in (0, 1), "
            "'mle' or null; got 'three'",
        ),
        "missing data store": (
            ["run", _config(tmp_path, tmp_path / "nope.zarr", name="m.yaml")],
            "no zarr store at",
        ),
        "unknown method": (
            [
                "run",
                _config(tmp_path, data_path, name="u.yaml", model={"method": "ica"}),
            ],
            "'model.method' 'ica' is unknown; allowed: pca, ppca",
        ),
        "missing config": (["run", tmp_path / "none.yaml"], "does not exist"),
        "bad --set": (
            ["run", _config(tmp_path, data_path, name="s.yaml"), "--set", "model"],
            "expected key=value",
        ),
        "bad parameter value": (
            [
                "run",
                _config(
                    tmp_path,
                    data_path,
                    name="v.yaml",
                    model={"method": "pca", "svd_solver": "qr"},
                ),
            ],
            "svd_solver",
        ),
        "missing model store": (
            [
                "transform",
                tmp_path / "nomodel.zarr",
                data_path,
                "--out",
                tmp_path / "o.zarr",
            ],
            "no zarr store at",
        ),
        "info missing store": (["info", tmp_path / "nothing.zarr"], "no zarr store at"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "bad YAML",
        "unknown key",
        "wrong type",
        "missing data store",
        "unknown method",
        "missing config",
        "bad --set",
        "bad parameter value",
        "missing model store",
        "info missing store",
    ],
)
def test_user_errors_one_line_exit_2(tmp_path, data_path, capsys, case):
    argv, fragment = _error_cases(tmp_path, data_path)[case]
    rc, out, err = _main(capsys, *argv)
    assert rc == EXIT_USER_ERROR
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("scalepca: error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in err + out


def test_failed_job_exit_1(tmp_path, data_path, capsys):
    cfg = _config(
        tmp_path,
        data_path,
        cluster={"kind": "address", "address": "tcp://127.0.0.1:9", "timeout": "1s"},
    )
    rc, out, err = _main(capsys, "run", cfg)
    assert rc == EXIT_JOB_FAILED
    assert (
        err.startswith("scalepca: job failed: ") and len(err.strip().splitlines()) == 1
    )
    assert "Traceback" not in err


def test_console_script_errors_have_no_traceback(tmp_path, data_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: {path: x}\nmodel: {method: pca}\ncluster: {workers: 2}\n")
    r = subprocess.run(
        [SCALEPCA, "validate", str(bad)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == EXIT_USER_ERROR
    # every problem of the config, one line each (issue 35), the misspelt key with its
    # match each at the line of its key in the file
    assert r.stderr.strip() == (
        f"scalepca: error: {bad}:3: unknown key(s) 'cluster.workers'; allowed in "
        "'cluster': n_workers, threads_per_worker, memory_limit, dashboard_address, "
        "processes, local_directory, monitoring; did you mean 'n_workers'?\n"
        f"scalepca: error: {bad}:1: data.path: no zarr store at '{tmp_path / 'x'}'"
    )
    assert r.stdout == ""


# -- make-data -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind", ["low_rank", "missing", "rings", "sparse_spike", "low_rank_sparse"]
)
def test_make_data_matrices(tmp_path, capsys, kind):
    path = tmp_path / f"{kind}.zarr"
    extra = ["--set", "chunk_cols=20"] if kind == "low_rank_sparse" else []
    rc, out, err = _main(
        capsys,
        "make-data",
        path,
        "--kind",
        kind,
        "--n-samples",
        300,
        "--n-features",
        40,
        "--chunk-rows",
        100,
        "--seed",
        1,
        "--no-progress",
        *extra,
    )
    assert rc == EXIT_OK, err
    arr = zarr.open_array(path, mode="r")
    assert arr.shape == (300, 40)
    X = arr[...]
    if kind == "missing":
        assert 0.15 < np.isnan(X).mean() < 0.25  # default 20 % missing
    else:
        assert np.isfinite(X).all()
    if kind == "low_rank_sparse":
        assert arr.chunks == (100, 20)  # 2-D blocks
    # the same seed gives the same data
    rc, _, _ = _main(
        capsys,
        "make-data",
        path,
        "--kind",
        kind,
        "--n-samples",
        300,
        "--n-features",
        40,
        "--chunk-rows",
        100,
        "--seed",
        1,
        "--overwrite",
        "--no-progress",
        *extra,
    )
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], X)


def test_make_data_gridded_and_size(tmp_path, capsys):
    path = tmp_path / "grid.zarr"
    rc, out, err = _main(
        capsys,
        "make-data",
        path,
        "--kind",
        "gridded",
        "--n-samples",
        50,
        "--set",
        "n_lat=6",
        "--set",
        "n_lon=12",
        "--no-progress",
    )
    assert rc == EXIT_OK, err
    ds = xr.open_zarr(path, consolidated=False)
    sst = ds["sst"]
    assert sst.dims == ("time", "lat", "lon") and sst.shape == (50, 6, 12)
    land = np.isnan(sst.values).all(axis=0)
    assert (
        land.any() and not np.isnan(sst.values[:, ~land]).any()
    )  # NaN exactly on land
    sized = tmp_path / "sized.zarr"
    rc, out, err = _main(
        capsys,
        "make-data",
        sized,
        "--size",
        "80kB",
        "--n-features",
        10,
        "--no-progress",
    )
    assert rc == EXIT_OK, err
    assert zarr.open_array(sized, mode="r").shape == (1000, 10)  # 80 kB / (10 · 8 B)


def test_make_data_errors(tmp_path, capsys):
    cases = [
        (
            ["--kind", "gridded", "--n-features", 5],
            "--n-features does not apply to kind",
        ),
        (["--set", "rnk=3"], "'--set rnk'"),
        (["--set", "rank=many"], "'--set rank' must be an integer"),
        # the generator would return (M, L, S) and the writer fail on the tuple
        (
            ["--kind", "low_rank_sparse", "--set", "return_parts=true"],
            "'--set return_parts' is for Python",
        ),
        (["--size", "lots"], "--size 'lots'"),
        (
            ["--codec", "blosc:lz4"],
            "--codec: unknown codec 'blosc:lz4'; choose one of lz4",
        ),
    ]
    for extra, fragment in cases:
        rc, _, err = _main(capsys, "make-data", tmp_path / "e.zarr", *extra)
        assert rc == EXIT_USER_ERROR and fragment in err, err
    rc, _, _ = _main(
        capsys,
        "make-data",
        tmp_path / "x.zarr",
        "--n-samples",
        10,
        "--n-features",
        12,
        "--no-progress",
    )
    assert rc == EXIT_OK
    rc, _, err = _main(capsys, "make-data", tmp_path / "x.zarr", "--n-samples", 10)
    assert rc == EXIT_USER_ERROR and "pass --overwrite" in err


# -- a real scheduler and two worker processes on loopback -----------------------------
@pytest.fixture(scope="module")
def real_cluster(tmp_path_factory):
    from distributed import Client

    from .support.reliability import start_scheduler

    logdir = tmp_path_factory.mktemp("cluster-logs")
    procs = []

    def start(name, argv):
        log = open(logdir / f"{name}.log", "w")  # closed at teardown
        procs.append(
            (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), log)
        )
        return procs[-1][0]

    try:
        _, address = start_scheduler(
            lambda argv: start("scheduler", argv),
            logdir / "scheduler.json",
            "--dashboard-address",
            "127.0.0.1:0",
        )
        for i in range(2):
            start(
                f"worker{i}",
                [
                    DASK,
                    "worker",
                    address,
                    "--host",
                    "127.0.0.1",
                    "--nthreads",
                    "1",
                    "--memory-limit",
                    "1GiB",
                    "--no-nanny",
                    "--no-dashboard",
                    "--name",
                    f"w{i}",
                ],
            )
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
            info = client.scheduler_info()["workers"]
            # import the package on the workers now, not inside the first timed task
            client.run(lambda: __import__("scalepca.models") and None)
        assert len(info) == 2
        assert all(w["memory_limit"] == 2**30 for w in info.values())
        yield address
    finally:
        # stop only the processes this fixture started: the workers (together), then the
        # scheduler
        workers, scheduler = procs[1:], procs[:1]
        for group in (workers, scheduler):
            for proc, _ in group:
                proc.terminate()
            for proc, log in group:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                log.close()


@pytest.mark.distributed
def test_run_against_real_scheduler_equals_embedded(
    tmp_path, data_path, real_cluster, capsys
):
    remote = _config(
        tmp_path,
        data_path,
        name="remote.yaml",
        model={"method": "ppca", "n_components": 3},
        output={"store": str(tmp_path / "remote")},
    )
    embedded = _config(
        tmp_path,
        data_path,
        name="embedded.yaml",
        model={"method": "ppca", "n_components": 3},
        output={"store": str(tmp_path / "embedded")},
    )
    env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "DASK_SCALEPCA__PROGRESS__GRACE": "0",
    }
    r = subprocess.run(
        [SCALEPCA, "run", str(remote), "--scheduler", real_cluster],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == EXIT_OK, r.stderr
    # stdout is a pipe, as in a batch job: one progress line per pass, no redrawn bar
    assert (
        "method: ppca (PPCA)" in r.stdout
        and "] PPCA pass 1 of 1 (moments): " in r.stdout
    )
    assert "\r" not in r.stdout
    rc, _, err = _main(capsys, "run", embedded, "--no-progress")
    assert rc == EXIT_OK, err
    a = scalepca.load(tmp_path / "remote" / "model.zarr")
    b = scalepca.load(tmp_path / "embedded" / "model.zarr")
    for name in ("mean_", "components_", "explained_variance_", "W_"):
        # the reduction tree depends on the graph only, not on the workers: bitwise
        # equal
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.noise_variance_ == b.noise_variance_
    sa = zarr.open_group(tmp_path / "remote" / "scores.zarr", mode="r")["scores"][...]
    sb = zarr.open_group(tmp_path / "embedded" / "scores.zarr", mode="r")["scores"][...]
    np.testing.assert_array_equal(sa, sb)

    rc, _, err = _main(
        capsys,
        "transform",
        tmp_path / "remote" / "model.zarr",
        data_path,
        "--out",
        tmp_path / "t.zarr",
        "--scheduler",
        real_cluster,
        "--no-progress",
    )
    assert rc == EXIT_OK, err
    np.testing.assert_array_equal(
        zarr.open_group(tmp_path / "t.zarr", mode="r")["scores"][...], sa
    )


@pytest.mark.distributed
def test_workers_write_output_blocks(tmp_path, data_path, real_cluster):
    """Each worker process writes some of the output chunks itself."""
    import dask.array as da
    from distributed import Client

    from scalepca.io import write_array

    def tagged(block):
        from distributed import get_worker

        name = get_worker().name
        return np.full(block.shape, float(name[1:]))

    with Client(real_cluster, timeout="30s"):
        # one task per store chunk (task_size=None): the store's 6 blocks, not one
        # coalesced
        X = scalepca.open_matrix(str(data_path), task_size=None)
        write_array(X.map_blocks(tagged, dtype=float), tmp_path / "w.zarr", name="who")
    who = zarr.open_group(tmp_path / "w.zarr", mode="r")["who"][...]
    assert set(np.unique(who)) == {0.0, 1.0}
    assert isinstance(X, da.Array) and X.numblocks[0] == 6


# -- gridded data with weights, and every shipped config end to end --------------------
def test_run_gridded_with_weights(tmp_path, capsys):
    grid = tmp_path / "grid.zarr"
    cfg = _config(
        tmp_path,
        grid,
        model={"method": "pca", "n_components": 2},
        data={
            "variable": "sst",
            "sample_dims": ["time"],
            "weights": "sqrt_coslat",
            "generate": {
                "kind": "gridded",
                "n_samples": 120,
                "n_lat": 6,
                "n_lon": 10,
                "chunk_rows": 40,
            },
        },
        progress=False,
    )
    rc, out, err = _main(capsys, "run", cfg)
    assert rc == EXIT_OK, err
    ds = xr.open_zarr(grid, consolidated=False)
    w = np.sqrt(np.cos(np.deg2rad(ds["lat"])))
    ref = scalepca.PCA(2).fit(
        scalepca.open_matrix(str(grid), variable="sst", sample_dims="time", weights=w)
    )
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr", consolidated=False)[
        "scores"
    ]
    assert scores.dims == ("time", "mode")
    np.testing.assert_array_equal(scores["time"].values, ds["time"].values)
    # a weight rule the store cannot satisfy is a one-line user error
    rc, _, err = _main(capsys, "run", cfg, "--set", "data.weights=area")
    assert rc == EXIT_USER_ERROR
    assert "'data.weights' 'area' is neither one of sqrt_coslat, coslat" in err


def test_gridded_model_keeps_its_preprocessing(tmp_path, capsys):
    """reconstruction in the field's units; transform needs no repeated options
    (issue 18.3)."""
    grid = tmp_path / "grid.zarr"
    cfg = _config(
        tmp_path,
        grid,
        model={"method": "pca", "n_components": 2},
        data={
            "variable": "sst",
            "sample_dims": ["time"],
            "weights": "sqrt_coslat",
            "generate": {
                "kind": "gridded",
                "n_samples": 120,
                "n_lat": 6,
                "n_lon": 10,
                "chunk_rows": 40,
                "dtype": "float64",
            },
        },
        output={"reconstruction": True},
        progress=False,
    )
    rc, _, err = _main(capsys, "run", cfg)
    assert rc == EXIT_OK, err
    raw = xr.open_zarr(grid, consolidated=False)["sst"]
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    # the written reconstruction is the field in its own units and dims (was weights ×
    # field)
    rec = xr.open_zarr(tmp_path / "out" / "reconstruction.zarr", consolidated=False)
    rec = rec["reconstruction"]
    assert rec.dims == ("time", "lat", "lon")
    x, w = raw.values, np.sqrt(np.cos(np.deg2rad(raw["lat"].values)))[:, None]
    Xw = (x * w).reshape(120, -1)
    sea = ~np.isnan(Xw).all(axis=0)
    mean = Xw[:, sea].mean(axis=0)
    _, _, vt = np.linalg.svd(Xw[:, sea] - mean, full_matrices=False)
    ref = np.full_like(Xw, np.nan)
    ref[:, sea] = (Xw[:, sea] - mean) @ vt[:2].T @ vt[:2] + mean
    ref = ref.reshape(x.shape) / w
    np.testing.assert_allclose(rec.values, ref, rtol=1e-9, atol=1e-9, equal_nan=True)
    # transform: the model's variable, dims and weights are used without being repeated
    expected = model.transform(raw).values
    np.testing.assert_allclose(
        xr.open_zarr(tmp_path / "out" / "scores.zarr", consolidated=False)[
            "scores"
        ].values,
        expected,
        rtol=1e-12,
        atol=1e-12,
    )
    # --overwrite: each transform below replaces the scores of the one before
    base = [
        "transform",
        tmp_path / "out" / "model.zarr",
        grid,
        "--out",
        tmp_path / "s.zarr",
        "--overwrite",
        "--no-progress",
        "--no-processes",
        "--n-workers",
        1,
    ]
    for extra in (
        [],
        ["--variable", "sst", "--sample-dims", "time", "--weights", "sqrt_coslat"],
    ):
        rc, _, err = _main(capsys, *base, *extra)
        assert rc == EXIT_OK, err
        s = xr.open_zarr(tmp_path / "s.zarr", consolidated=False)["scores"]
        assert s.dims == ("time", "mode")
        np.testing.assert_allclose(s.values, expected, rtol=1e-12, atol=1e-12)
    # options that contradict the model, and data on another grid, are refused
    for extra, message in (
        (
            ["--weights", "coslat"],
            "--weights coslat: the data would be weighted by coslat, "
            "fitted on data weighted by sqrt_coslat",
        ),
        (
            ["--sample-dims", "lat"],
            "--sample-dims lat: the model was fitted with sample dims time",
        ),
        (
            ["--variable", "t2m"],
            "--variable 't2m': the model was fitted on variable 'sst'",
        ),
    ):
        rc, _, err = _main(capsys, *base, *extra)
        assert rc == EXIT_USER_ERROR and message in err, err
    other = tmp_path / "other.zarr"
    from scalepca.datasets import make_gridded

    write_dataset(make_gridded(40, n_lat=5, n_lon=10, chunk_rows=20), other)
    rc, _, err = _main(capsys, *base[:2], other, *base[3:])
    assert (
        rc == EXIT_USER_ERROR
        and "not on the grid the model was fitted on: 5 along 'lat' (fitted: 6)" in err
    ), err


_SMALL = {
    "quickstart": ["data.generate.n_samples=4000", "data.generate.chunk_rows=1000"],
    "pca": ["data.generate.n_samples=4000", "data.generate.chunk_rows=1000"],
    "ppca": [
        "data.generate.n_samples=4000",
        "data.generate.chunk_rows=1000",
        "model.max_iter=20",
    ],
    "eof": [
        "data.generate.n_samples=200",
        "data.generate.n_lat=12",
        "data.generate.n_lon=24",
        "data.generate.chunk_rows=50",
    ],
    "kernel_pca": [
        "data.generate.n_samples=3000",
        "data.generate.chunk_rows=1000",
        "model.n_features=200",
    ],
    "sparse_pca": [
        "data.generate.n_samples=4000",
        "data.generate.chunk_rows=1000",
        "model.params.max_iter=3",
    ],
    "hilbert_eof": [
        "data.generate.n_samples=200",
        "data.generate.n_lat=12",
        "data.generate.n_lon=24",
        "data.generate.chunk_rows=50",
    ],
    "bootstrap_eof": [
        "data.generate.n_samples=200",
        "data.generate.n_lat=12",
        "data.generate.n_lon=24",
        "data.generate.chunk_rows=50",
        "model.n_bootstraps=20",
    ],
    "robust_pca": [
        "data.generate.n_samples=300",
        "data.generate.n_features=300",
        "data.generate.chunk_rows=150",
        "data.chunks=[150,150]",
        "data.generate.rank=5",
        "model.rank_guess=5",
        "model.max_iter=30",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_SMALL))
def test_shipped_local_configs_run(tmp_path, capsys, monkeypatch, name):
    """Each local config runs end to end (shrunk with --set) and writes what it
    promises."""
    path = Path(__file__).parents[1] / "configs" / f"{name}.yaml"
    raw = yaml.safe_load(path.read_text())
    from scalepca.persistence.registry import METHODS

    module = METHODS[raw["model"]["method"]].split(":")[0]
    pytest.importorskip(module)
    # the configs' relative ../data and ../out paths resolve from the config's folder: a
    # copy in tmp_path/configs/ lands them in tmp_path, whatever the working directory
    # is
    (tmp_path / "configs").mkdir()
    copy = tmp_path / "configs" / path.name
    copy.write_text(path.read_text())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    sets = [f"--set={s}" for s in _SMALL[name]] + [
        "--set=cluster.processes=false",
        "--set=cluster.n_workers=1",
        "--no-progress",
    ]
    rc, out, err = _main(capsys, "run", copy, *sets)
    assert rc == EXIT_OK, err
    store = (tmp_path / "configs" / raw["output"]["store"]).resolve()
    assert store.parent == (tmp_path / "out").resolve()
    assert scalepca.load(store / "model.zarr") is not None
    for part in ("scores", "reconstruction", "low_rank", "sparse"):
        default = part == "scores"
        assert (store / f"{part}.zarr").exists() == raw["output"].get(part, default), (
            part
        )


@pytest.mark.parametrize("as_glob", [False, True])
def test_run_netcdf_with_named_weights_matches_eofs(tmp_path, capsys, as_glob):
    """`scalepca run` on the eofs example NetCDF file (or a glob matching a copy of
    it) with weights: sqrt_coslat goes through the NetCDF opener (was: 'no zarr array
    or group'); eigenvalues, EOFs and PCs equal eofs'."""
    import shutil

    eofs_examples = pytest.importorskip("eofs.examples")
    eofs_xr = pytest.importorskip("eofs.xarray")
    path = eofs_examples.example_data_path("sst_ndjfm_anom.nc")
    if as_glob:
        (tmp_path / "in").mkdir()
        shutil.copy(path, tmp_path / "in" / "sst_1.nc")
        path = str(tmp_path / "in" / "sst_*.nc")
    cfg = _config(
        tmp_path,
        path,
        model={"method": "pca", "n_components": 3},
        data={"variable": "sst", "sample_dims": ["time"], "weights": "sqrt_coslat"},
        progress=False,
    )
    rc, out, err = _main(capsys, "run", cfg)
    assert rc == EXIT_OK, err
    with xr.open_dataset(eofs_examples.example_data_path("sst_ndjfm_anom.nc")) as ds:
        sst = ds["sst"].load()
    # the weights scalepca's rule gives (√cos of the file's float32 latitudes, as in
    # eofs' own example); those of float64 latitudes differ by ~1e-8
    from scalepca.analysis.eof import coslat_weights

    w = coslat_weights(sst).broadcast_like(sst.isel(time=0))
    solver = eofs_xr.Eof(sst, weights=w.values)
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    np.testing.assert_allclose(
        model.explained_variance_, solver.eigenvalues(neigs=3).values, rtol=1e-10
    )
    ref = solver.eofs(neofs=3, eofscaling=0).values.reshape(
        3, -1
    )  # of the weighted field
    comp = model.components_xr_.transpose(
        "mode", "latitude", "longitude"
    ).values.reshape(3, -1)
    ocean = np.isfinite(ref[0])
    sign = np.sign(np.sum(comp[:, ocean] * ref[:, ocean], axis=1))
    np.testing.assert_allclose(
        comp[:, ocean] * sign[:, None], ref[:, ocean], atol=1e-10
    )
    pcs = solver.pcs(npcs=3, pcscaling=0).values
    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr")["scores"]
    np.testing.assert_allclose(scores.values * sign, pcs, atol=1e-8 * np.abs(pcs).max())


#: shipped configs a fresh folder runs in the default suite (the rest with -m slow)
_FRESH_DEFAULT = {"quickstart", "bootstrap_eof"}
_FRESH = {**_SMALL, "extended_eof": _SMALL["eof"], "mca": [], "multivariate_eof": []}


def _run_fresh(tmp_path, name, sets):
    """``scalepca run configs/NAME.yaml`` as a new user runs it: the console script,
    from a fresh folder holding a copy of configs/, the config's own cluster and
    progress."""
    src = Path(__file__).parents[1] / "configs" / f"{name}.yaml"
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / src.name).write_text(src.read_text())
    argv = [SCALEPCA, "run", f"configs/{src.name}", *(f"--set={s}" for s in sets)]
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    return r, yaml.safe_load(src.read_text())


@pytest.mark.distributed
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[] if n in _FRESH_DEFAULT else [pytest.mark.slow])
        for n in sorted(_FRESH)
    ],
)
def test_shipped_configs_run_cleanly_from_a_fresh_folder(tmp_path, name):
    """Each local config (shrunk by its generate keys) runs with its cluster of worker
    processes and its progress display: exit 0, outputs written, no traceback, no worker
    lost. (configs/slurm.yaml, pbs.yaml and address.yaml need a batch system or a
    running scheduler: tests/test_config.py validates them.)"""
    r, raw = _run_fresh(tmp_path, name, _FRESH[name])
    assert r.returncode == EXIT_OK, r.stderr
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "lost and replaced" not in r.stderr, r.stderr
    assert "written: " in r.stdout and (tmp_path / "out").is_dir()


def test_every_local_config_is_run_from_a_fresh_folder():
    configs = Path(__file__).parents[1] / "configs"
    kinds = {
        p.stem: yaml.safe_load(p.read_text())["cluster"].get("kind", "local")
        for p in configs.glob("*.yaml")
    }
    local = {name for name, kind in kinds.items() if kind == "local"}
    assert local == set(_FRESH)


@pytest.mark.slow
@pytest.mark.distributed
def test_bootstrap_config_at_full_size_loses_no_worker(tmp_path):
    """configs/bootstrap_eof.yaml as shipped (2,000 × 1,152, 100 replicates, 2 × 2 GiB
    workers): its workers were ended for memory, and the run finished on fewer."""
    r, _ = _run_fresh(tmp_path, "bootstrap_eof", [])
    assert r.returncode == EXIT_OK, r.stderr
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "lost and replaced" not in r.stderr, r.stderr
