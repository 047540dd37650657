"""Writers SIGKILLed mid-write, and what they leave behind
(``tests/test_interrupted_writes.py`` asserts it; ``benchmarks/faults.py`` counts it).

Each scenario runs a writer in a subprocess that stops once a known number of its chunks are on
disk (:func:`.reliability.stop_after_chunks`) and is SIGKILLed there, then returns
the facts (chunks written, whether the partial store reads as complete, bytes of a
previous output lost).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

import scalepca

from .reliability import REPO, low_rank, run_until_stopped

ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
FSSPEC_OPTIONS = {
    "auto_mkdir": True
}  # local:// does not create parent directories itself


_WRITE_OUTPUTS = textwrap.dedent(
    """
    import json, sys
    import dask, dask.array as da
    import scalepca
    from scalepca.app.pipeline import write_outputs
    from tests.support.reliability import stop_after_chunks

    data, out, stop, so = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    if stop:  # killed by the test once `stop` chunks of the scores are on disk
        stop_after_chunks("scores", stop)
    X = da.from_zarr(data)
    est = scalepca.PCA(3, svd_solver="covariance_eigh").fit(X)
    with dask.config.set(scheduler="synchronous"):  # zarr's own I/O is the only concurrency
        write_outputs(est, X, {"store": out, "storage_options": so or None,
                      "model": True, "scores": True, "reconstruction": False,
                      "low_rank": False, "sparse": False})
    print("finished", flush=True)
    """
)


#: the scores have N_ROWS / CHUNK_ROWS chunks; a killed write is stopped after
#: STOP_AFTER of them
N_ROWS, CHUNK_ROWS, STOP_AFTER = 800, 20, 3


def _data_store(tmp: Path) -> tuple[str, np.ndarray]:
    X = low_rank(0, n=N_ROWS, d=12)
    path = tmp / "data.zarr"
    z = zarr.create_array(str(path), shape=X.shape, chunks=(CHUNK_ROWS, 12), dtype="f8")
    z[...] = X
    return str(path), X


def _chunk_files(root: Path, array: str) -> int:
    base = root / array / "c"
    return sum(len(files) for _, _, files in os.walk(base)) if base.is_dir() else 0


def _write_outputs(data, out, so=None, *, stop_after=0):
    """Run ``write_outputs`` in a subprocess: to the end, or (``stop_after``)
    SIGKILLed once that many chunks of the scores are on disk."""
    import json

    args = [
        sys.executable,
        "-c",
        _WRITE_OUTPUTS,
        data,
        out,
        str(stop_after),
        json.dumps(so or {}),
    ]
    if stop_after:
        out = run_until_stopped(args, env=ENV, cwd=REPO)
        assert "finished" not in out
        return
    res = subprocess.run(args, capture_output=True, env=ENV, cwd=str(REPO), timeout=300)
    assert res.returncode == 0 and b"finished" in res.stdout, res.stderr[-3000:]


def expected_scores(data):
    X = da.from_zarr(data)
    est = scalepca.PCA(3, svd_solver="covariance_eigh").fit(X)
    return est, np.asarray(est.transform(X.compute()))


def _files(root: Path) -> dict:
    """Relative path → bytes of every file under ``root`` (to prove nothing changed)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# -- local (atomic rename) -------------------------------------------------------------
def scenario_local(tmp: Path) -> dict:
    """A first run killed mid-scores, a complete run, a run killed mid-overwrite, a
    clean rerun. Returns the facts the tests and ``benchmarks/faults.py`` check."""
    data, _ = _data_store(tmp)
    out = tmp / "out"
    seen = set()  # partial stores of earlier killed runs: not this run's write

    def killed_write():
        """The partial scores store a run killed mid-write left beside the output."""
        _write_outputs(data, str(out), stop_after=STOP_AFTER)
        (partial,) = [
            p
            for p in out.iterdir()
            if p.name.startswith("scores.zarr.tmp-") and p.name not in seen
        ]
        seen.add(partial.name)
        return partial

    facts = {"data": data, "out": out, "n_chunks": N_ROWS // CHUNK_ROWS}
    # run 1, killed: nothing may pass for the scores output
    facts["killed_chunks"] = _chunk_files(killed_write(), "scores")
    try:
        scalepca.open_matrix(str(out / "scores.zarr"), variable="scores")
        facts["first_readable"] = True
    except FileNotFoundError:
        facts["first_readable"] = False
    # run 2 complete, run 3 killed while overwriting it
    _write_outputs(data, str(out))
    before = _files(out / "scores.zarr")
    facts["overwrite_killed_at"] = _chunk_files(killed_write(), "scores")
    after = _files(out / "scores.zarr") if (out / "scores.zarr").exists() else {}
    facts["previous_intact"] = after == before
    facts["bytes_lost"] = sum(len(v) for k, v in before.items() if after.get(k) != v)
    # run 4: the next run
    _write_outputs(data, str(out))
    facts["leftovers"] = sorted(
        p.name for p in out.iterdir() if ".tmp-" in p.name or ".old-" in p.name
    )
    return facts


# -- fsspec URL (in place, complete flag) ----------------------------------------------
def scenario_url(tmp: Path) -> dict:
    data, _ = _data_store(tmp)
    out_dir = tmp / "remote"
    url = f"local://{out_dir}"
    _write_outputs(data, url, so=FSSPEC_OPTIONS)
    before = _files(out_dir / "scores.zarr")

    # the rewrite deletes the old store first: killed once the new one is being filled
    _write_outputs(data, url, so=FSSPEC_OPTIONS, stop_after=STOP_AFTER)
    after = _files(out_dir / "scores.zarr")
    backup_dir = out_dir / "scores.zarr.previous"
    kept = _files(backup_dir) if backup_dir.is_dir() else {}
    # data chunks of the previous complete scores that are gone (metadata excluded: its
    # complete flag is meant to change): replaced in place, and not in the kept copy
    # either
    facts = {
        "flag": zarr.open_group(str(out_dir / "scores.zarr"), mode="r").attrs.get(
            "complete"
        ),
        "killed_chunks": _chunk_files(out_dir / "scores.zarr", "scores"),
        "n_chunks": N_ROWS // CHUNK_ROWS,
        "bytes_replaced": sum(
            len(v) for k, v in before.items() if "/c/" in k and after.get(k) != v
        ),
        "bytes_lost": sum(
            len(v)
            for k, v in before.items()
            if "/c/" in k and after.get(k) != v and kept.get(k) != v
        ),
        "kept_equal": bool(kept) and kept == before,
    }
    try:
        prev = scalepca.open_matrix(
            f"{url}/scores.zarr.previous",
            variable="scores",
            storage_options=FSSPEC_OPTIONS,
        )
        facts["previous_readable"] = prev.shape
    except Exception as err:  # reported by the test
        facts["previous_readable"] = f"{type(err).__name__}: {err}"
    try:
        scalepca.open_matrix(
            f"{url}/scores.zarr", variable="scores", storage_options=FSSPEC_OPTIONS
        )
        facts["hint"] = ""
    except ValueError as err:
        facts["hint"] = str(err)
    try:
        scalepca.open_matrix(
            f"{url}/scores.zarr", variable="scores", storage_options=FSSPEC_OPTIONS
        )
        facts["partial_readable"] = True
    except ValueError:
        facts["partial_readable"] = False
    facts["model_loads"] = True
    try:
        scalepca.load(f"{url}/model.zarr", storage_options=FSSPEC_OPTIONS)
    except ValueError:
        facts["model_loads"] = False
    _write_outputs(data, url, so=FSSPEC_OPTIONS)
    facts["previous_left"] = sorted(
        p.name for p in out_dir.iterdir() if p.name.endswith(".previous")
    )
    facts.update(url=url, out_dir=out_dir, data=data)
    return facts


# -- make-data to a URL (in place) -----------------------------------------------------
_MAKE_DATA = textwrap.dedent(
    """
    import runpy, sys
    from tests.support.reliability import stop_after_chunks

    stop_after_chunks("", int(sys.argv[1]))  # killed by the test once that many blocks are written
    sys.argv = ["scalepca", *sys.argv[2:]]
    runpy.run_module("scalepca.cli", run_name="__main__", alter_sys=True)
    """
)


def scenario_make_data(tmp: Path) -> dict:
    """``scalepca make-data`` to a URL killed after 5 of its 100 blocks, then what
    ``scalepca run`` does with the store."""
    target = tmp / "gen.zarr"
    url = f"local://{target}"
    args = [
        sys.executable,
        "-c",
        _MAKE_DATA,
        "5",
        "make-data",
        url,
        "--n-samples",
        "400000",
        "--n-features",
        "20",
        "--chunk-rows",
        "4000",
        "--seed",
        "0",
        "--no-progress",
        "--storage-options",
        '{"auto_mkdir": true}',
    ]
    out = run_until_stopped(args, env=ENV, cwd=REPO)
    assert "wrote low_rank dataset" not in out, out
    facts = {"killed_chunks": _chunk_files(target.parent, target.name)}
    try:
        X = scalepca.open_matrix(url, storage_options=FSSPEC_OPTIONS)
        facts["partial_readable"] = True
        facts["shape"] = tuple(X.shape)
    except (ValueError, FileNotFoundError):
        facts["partial_readable"] = False
    # what `scalepca run` does with a data.generate section: reuse the store if it
    # exists
    from scalepca.app.pipeline import generate_data

    generate_data(
        {
            "kind": "low_rank",
            "n_samples": 400000,
            "n_features": 20,
            "chunk_rows": 4000,
            "seed": 0,
        },
        url,
        storage_options=FSSPEC_OPTIONS,
    )
    files = sum(len(f) for _, _, f in os.walk(target))
    facts["regenerated"] = files >= 100  # 100 row blocks + metadata when complete
    return facts
