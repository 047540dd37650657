"""``scalepca plan``: the passes, tasks and bytes it predicts are those of the fit it
predicts, from metadata only (no dask compute, no chunk read)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from dask.callbacks import Callback

import scalepca
from scalepca.app.plan import JSON_KEYS, cache_path
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets import make_low_rank, write_dataset
from scalepca.linalg import passes
from scalepca.models import PCA, PPCA


class _NoCompute(Callback):
    """Fails any dask compute inside the block."""

    def _start(self, dsk):
        raise AssertionError("scalepca plan computed a dask graph")


def _chunk_bytes(store: Path) -> int:
    """The bytes of the chunk files of a zarr array (its metadata left out)."""
    return sum(
        f.stat().st_size
        for f in store.rglob("*")
        if f.is_file() and f.name not in ("zarr.json", ".zarray", ".zattrs")
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan")
    write_dataset(
        make_low_rank(1200, 30, rank=3, chunk_rows=200, seed=1), root / "rows.zarr"
    )
    # 2-D chunks: the wide solvers read them as they are, the others regroup rows
    write_dataset(
        make_low_rank(900, 40, rank=3, chunk_rows=300, seed=2).rechunk((300, 20)),
        root / "split.zarr",
    )
    # CSR counts in an AnnData store, read in blocks of 100 cells
    argv = ["make-data", str(root / "sparse.zarr"), "--kind", "counts", "-q"]
    assert main([*argv, "--n-samples", "4000", "--n-features", "50"]) == EXIT_OK
    return root


#: the rows per block a config reads each store in (None: the store's chunks)
CHUNKS = {"sparse.zarr": 100}


def _config(root: Path, store: str, **model) -> Path:
    cfg = {
        "data": {"path": store, "chunks": CHUNKS.get(store)},
        "model": {"method": "pca", "n_components": 3, **model},
        "cluster": {"kind": "local", "n_workers": 2, "processes": False},
    }
    path = root / f"plan-{store}-{'-'.join(map(str, model.values())) or 'x'}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _plan(capsys, path, *extra) -> dict:
    with _NoCompute():  # metadata only: any compute fails the plan
        rc = main(["plan", str(path), "--json", "--rates", "builtin", *extra])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    return json.loads(out)


def _fit(est, X):
    """``est`` fitted on ``X``, with the blocks each of its passes read."""
    ends = []
    with passes.listening(lambda e: ends.append(e) if e.stage == "end" else None):
        est.fit(X)
    return est, ends


CASES = [
    ("rows.zarr", {"svd_solver": "covariance_eigh"}),
    ("rows.zarr", {"svd_solver": "tsqr"}),
    ("rows.zarr", {"svd_solver": "randomized"}),
    ("rows.zarr", {"svd_solver": "sketch"}),
    ("rows.zarr", {"svd_solver": "auto", "standardize": True}),
    ("split.zarr", {"svd_solver": "randomized"}),
    ("split.zarr", {"svd_solver": "covariance_eigh"}),
    ("split.zarr", {"svd_solver": "snapshot"}),
    ("sparse.zarr", {"svd_solver": "covariance_eigh"}),
    ("sparse.zarr", {"svd_solver": "randomized"}),
]


@pytest.mark.parametrize(("store", "model"), CASES)
def test_plan_predicts_the_passes_and_tasks_of_the_fit(stores, capsys, store, model):
    out = _plan(capsys, _config(stores, store, **model))
    rows = CHUNKS.get(store)
    X = scalepca.open_matrix(
        str(stores / store), chunks=None if rows is None else {0: rows}
    )
    est, ends = _fit(PCA(n_components=3, **model), X)
    assert out["solver"] == est.solver_
    assert out["passes"] == est.n_passes_ == len(ends)
    arr = X.data if hasattr(X, "data") else X
    if model["svd_solver"] in ("randomized", "snapshot", "sketch"):
        blocks = arr.npartitions  # the wide solvers read the blocks as they are
    elif out["sparse"] and model["svd_solver"] == "covariance_eigh":
        from scalepca.linalg.moments import block_groups

        blocks = len(block_groups(arr.numblocks[0]))
        assert blocks < arr.numblocks[0]  # groups of row blocks, one task each
    else:
        blocks = arr.numblocks[0]
        assert [e.chunks_total for e in ends] == [blocks] * len(ends)
    assert out["tasks_per_pass"] == [blocks] * out["passes"]
    # a pass reads the store's chunks, each once (CSR: X's data, indices and indptr)
    chunks = _chunk_bytes(stores / store / ("X" if out["sparse"] else ""))
    assert out["bytes_read_per_pass"] == [chunks] * out["passes"]


def test_ppca_closed_form_is_planned_and_em_refused(stores, capsys):
    out = _plan(capsys, _config(stores, "rows.zarr"), "--set", "model.method=ppca")
    est, _ = _fit(PPCA(n_components=3), scalepca.open_matrix(str(stores / "rows.zarr")))
    assert out["passes"] == est.n_passes_
    path = _config(stores, "rows.zarr")
    rc = main(
        ["plan", str(path), "--rates", "builtin", "--set", "model.method=ppca"]
        + ["--set", "model.solver=em"]
    )
    err = capsys.readouterr().err
    assert rc == EXIT_USER_ERROR
    assert "model.method ppca with solver em passes until it converges" in err


def test_json_keys_and_types(stores, capsys):
    out = _plan(
        capsys,
        _config(stores, "rows.zarr", svd_solver="randomized"),
        "--workers",
        "4",
        "--bandwidth",
        "125MB",
        "--worker-memory",
        "1GiB",
    )
    assert set(JSON_KEYS) <= set(out)
    assert isinstance(out["passes"], int) and out["passes"] >= 1
    assert isinstance(out["peak_worker_bytes"], int) and out["peak_worker_bytes"] > 0
    for key in JSON_KEYS:
        if key.endswith("_per_pass"):
            assert len(out[key]) == out["passes"], key
            assert all(isinstance(v, (int, float)) and v >= 0 for v in out[key]), key
    assert all(isinstance(v, int) for v in out["tasks_per_pass"])
    # 4 workers on 4 hosts: Krylov sends each worker the d × l factor every pass,
    # besides the partials up the tree
    l_width = 3 + 10
    assert out["hosts"] == 4 and out["bandwidth"] == 125e6
    assert all(b >= 4 * 8 * 30 * l_width for b in out["bytes_moved_per_pass"])


def test_more_workers_and_links_price_the_passes(stores, capsys):
    path = _config(stores, "rows.zarr", svd_solver="randomized")
    one = _plan(capsys, path)
    linked = _plan(capsys, path, "--bandwidth", "1MB", "--workers", "2")
    assert linked["bytes_moved_per_pass"] == one["bytes_moved_per_pass"]
    # the same bytes over 1 MB/s links cost their time
    moved = one["bytes_moved_per_pass"][0]
    extra = linked["seconds_per_pass"][0] - one["seconds_per_pass"][0]
    assert extra == pytest.approx(moved * 0.5 / 1e6, rel=1e-3)
    # a store read over a 1 MB/s link: its bytes over that link, each pass
    remote = _plan(capsys, path, "--store-bandwidth", "1MB")
    read = one["bytes_read_per_pass"][0]
    extra = remote["seconds_per_pass"][0] - one["seconds_per_pass"][0]
    assert extra == pytest.approx(read / 1e6, rel=1e-3)


def test_a_batch_cluster_is_planned_by_its_jobs(stores, capsys):
    """jobs × processes workers, each with the job's cores and memory shared."""
    pytest.importorskip("dask_jobqueue")
    path = _config(stores, "rows.zarr")
    cfg = yaml.safe_load(path.read_text())
    cfg["cluster"] = {
        "kind": "slurm",
        "cores": 8,
        "memory": "32GiB",
        "processes": 2,
        "jobs": 4,
        "walltime": "01:00:00",
    }
    path = stores / "slurm.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = _plan(capsys, path)
    assert (out["workers"], out["threads_per_worker"]) == (8, 4)
    assert out["worker_memory"] == 16 * 2**30
    assert _plan(capsys, path, "--workers", "3")["workers"] == 3  # flags first


def test_text_plan(stores, capsys):
    path = _config(stores, "rows.zarr")
    with _NoCompute():
        rc = main(["plan", str(path), "--rates", "builtin", "--worker-memory", "1KiB"])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    assert "pca with svd_solver 'covariance_eigh' on 1,200 × 30" in out
    assert "1 pass(es)" in out
    assert "worker memory 1.00 kiB: too small" in out


def test_probe_rates_are_kept_per_machine(stores, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = _config(stores, "rows.zarr")
    assert main(["plan", str(path), "--json"]) == EXIT_OK
    first = json.loads(capsys.readouterr().out)
    assert "probed on this machine now" in first["rates"]
    kept = json.loads(cache_path().read_text())
    assert cache_path().parent == tmp_path / "scalepca"
    assert kept["dense_flops_per_second"] > 0 and kept["cores"] == 1
    assert main(["plan", str(path), "--json"]) == EXIT_OK
    second = json.loads(capsys.readouterr().out)
    assert "kept in" in second["rates"] and "now" not in second["rates"]


@pytest.mark.parametrize(
    ("config", "extra", "said"),
    [
        (None, [], "config file"),
        ("rows.zarr", ["--set", "model.method=pcaa"], "did you mean 'pca'?"),
        ("nope.zarr", [], "data.path: no zarr store at"),
        ("rows.zarr", ["--set", "model.method=robust_pca"], "passes until it"),
        ("rows.zarr", ["--workers", "0"], "--workers must be at least 1"),
    ],
)
def test_bad_input_is_refused_in_cli_words(stores, capsys, config, extra, said):
    path = stores / "missing.yaml" if config is None else _config(stores, config)
    if "model.method=robust_pca" in extra:  # a method of other parameters
        cfg = yaml.safe_load(path.read_text())
        cfg["model"] = {"method": "robust_pca"}
        path = stores / "robust.yaml"
        path.write_text(yaml.safe_dump(cfg))
        extra = []
    rc = main(["plan", str(path), "--rates", "builtin", *extra])
    err = capsys.readouterr().err
    assert rc == EXIT_USER_ERROR
    assert err.startswith("scalepca: error:") and said in err, err


def test_plan_of_a_generated_store_reads_nothing(stores, capsys):
    cfg = {
        "data": {
            "path": "later.zarr",
            "generate": {"kind": "low_rank", "n_samples": 4000, "n_features": 16},
        },
        "model": {"method": "pca", "n_components": 2},
    }
    path = stores / "later.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = _plan(capsys, path)
    assert out["passes"] == 1 and out["shape"] == [4000, 16]
    assert not (stores / "later.zarr").exists()


def test_no_chunk_file_is_opened(stores):
    """In a fresh interpreter, as ``validate``'s test: no chunk file opened."""
    import subprocess
    import sys

    path = _config(stores, "rows.zarr")
    code = (
        "import builtins, io, scalepca.cli as c\n"
        "opened = []\n"
        "real = builtins.open\n"
        "def spy(f, *a, **k):\n"
        "    opened.append(str(f)); return real(f, *a, **k)\n"
        "builtins.open = io.open = spy\n"
        f"rc = c.main(['plan', {str(path)!r}, '--rates', 'builtin'])\n"
        "builtins.open = io.open = real\n"
        "print('RESULT', rc, [f for f in opened if '/c/' in f])\n"
    )
    root = Path(__file__).parents[1]
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=120,
    )
    assert "RESULT 0 []" in r.stdout, r.stdout + r.stderr
