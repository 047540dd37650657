"""Reliability figures (issue 8): faults injected and survived, bad inputs and unclear
errors, interrupted writes and bytes lost, and fits under memory pressure.

    flock /tmp/scalepca-bench.lock .venv/bin/python benchmarks/faults.py
    python benchmarks/faults.py --skip-memory          # no memory-pressure runs
    python benchmarks/faults.py --only memory

Sections
--------
faults      For every estimator of ``tests.support.reliability.ESTIMATORS``: a real ``dask
            scheduler`` + 3 ``dask worker`` processes (no nanny, 1 thread, 1 GiB) on loopback; an
            undisturbed fit, then the same fit with reads that stall (``reliability.gated``) until
            one worker is SIGKILLed while it runs a fit task and holds results of the fit (the kill
            lands there on any machine). Survived = the fit completed and equals the undisturbed fit
            to the case's ``rtol_same``. Then the whole cluster is SIGKILLed mid-fit (a PCA fit):
            survived = a clear error (the client says it lost the scheduler) within 60 s; every
            estimator with a checkpoint (PPCA-EM, SparsePCA, RobustPCA) is then killed with its
            whole cluster after its first commit, resumes from the checkpoint on a new cluster and
            must equal an uninterrupted fit.
bad input   The table of ``tests/support/bad_input.py`` (input × estimator, and the CLI
rows);
            unclear = any cell whose exception type, message, compute count, leftovers
            or fitted state misses the expectation. Writes docs/bad_input.md.
writes      The scenarios of ``tests/support/interrupted_writes.py``: processes
SIGKILLed while
            writing outputs (local atomic path; fsspec URL in place; make-data to a
            URL). Bytes lost = bytes of a previous complete output that changed; "read
            back as complete" counts interrupted stores that ``open_matrix`` accepts.
memory      LocalCluster(2 workers × ``--memory-limit`` = 512 MiB) fitting data several
            times larger than a worker's limit (2 GB low-rank store, 4 × a worker's
            limit and 2 × the cluster's; 512 MB robust-PCA matrix): peak worker RSS and
            bytes spilled to disk per fit.

Writes benchmarks/results/faults.json.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from _common import local_cluster, peak_worker_memory, spilled_bytes, table, write_json  # noqa: E402, I001

from tests.support.compare import max_rel_diff  # noqa: E402
from tests.support.reliability import (  # noqa: E402
    BY_NAME,
    ESTIMATORS,
    ClusterKiller,
    ProcessCluster,
    WorkerKiller,
    gated,
    new_gate,
    summary,
)


def _store(tmp: Path, case, rows):
    import zarr

    X = case.X()
    path = tmp / f"{case.name}.zarr"
    z = zarr.create_array(
        str(path), shape=X.shape, chunks=case.chunks(rows), dtype="f8", overwrite=True
    )
    z[...] = X
    return str(path)


def _warm(client):
    def imports():
        import scalepca  # noqa: F401
        import tests.support.reliability  # noqa: F401

        return True

    client.run(imports)


# -- worker faults ---------------------------------------------------------------------
def run_faults(tmp: Path) -> list[dict]:
    import dask.array as da

    rows = []
    with ProcessCluster(3, memory_limit="1GiB", workdir=tmp / "cluster") as c:
        client = c.client(3)
        _warm(client)
        for case in ESTIMATORS:
            row = {"fault": "worker SIGKILL mid-fit", "estimator": case.name}
            c.full_strength(client, 3)
            path = _store(tmp, case, 40 if case.two_d_blocks else 25)
            X = da.from_zarr(path)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                ref = summary(case.make().fit(X))
                t_ref = time.perf_counter() - t0
                # as in tests/test_faults.py: every worker reads `free` blocks, then the
                # fit stalls until a worker executing a fit task and holding results is
                # killed
                gate = new_gate()
                free = X.npartitions if case.iterative else 2
                t0 = time.perf_counter()
                try:
                    with WorkerKiller(c, client, min_results=2, gate=gate) as k:
                        got = summary(case.make().fit(gated(X, gate, free)))
                    err = None
                except Exception as e:  # a fit that did not survive
                    got, err = None, e
                t_fit = time.perf_counter() - t0
            injected = int(k.killed_at is not None)
            diff = max_rel_diff(ref, got) if got is not None else float("nan")
            ok = got is not None and injected and diff <= case.rtol_same
            rows.append(
                {
                    **row,
                    "injected": injected,
                    "survived": int(bool(ok)),
                    "lost results": k.lost_keys,
                    "killed at s": k.killed_at or float("nan"),
                    "max rel diff": diff,
                    "tolerance": case.rtol_same,
                    "undisturbed s": t_ref,
                    "with fault s": t_fit,
                    "note": "" if err is None else f"{type(err).__name__}: {err}",
                }
            )
            print(table([rows[-1]], list(rows[-1])), flush=True)
        client.close()
    rows += run_cluster_loss(tmp)
    return rows


def run_cluster_loss(tmp: Path) -> list[dict]:
    import dask.array as da
    from distributed.client import FutureCancelledError

    rows = []
    case = BY_NAME["PCA"]
    path = _store(tmp, case, 25)
    with ProcessCluster(2, workdir=tmp / "gone") as c:
        client = c.client(2)
        _warm(client)
        # each worker reads one block, then the fit stalls (the gate never opens) until
        # the cluster has been killed while both workers execute fit tasks
        with ClusterKiller(c, client, min_results=1) as killer:
            try:
                case.make().fit(gated(da.from_zarr(path), new_gate(), free=1))
                outcome, clear = "completed?!", False
            except FutureCancelledError as err:
                outcome = str(err).replace("\n", " ")
                clear = "lost the connection to the scheduler" in outcome
            except Exception as err:
                outcome, clear = f"{type(err).__name__}: {err}", False
            raised_at = time.monotonic()
        client.close(timeout=5)
    injected = killer.killed_at is not None and killer.error is None
    rows.append(
        {
            "fault": "whole cluster SIGKILL",
            "estimator": "PCA",
            "injected": int(injected),
            "survived": int(clear and injected),
            "error after s": raised_at - killer.killed_at if injected else float("nan"),
            "note": outcome[:120]
            if killer.error is None
            else f"killer: {killer.error}",
        }
    )
    for case in ESTIMATORS:
        if case.checkpoint:
            rows.append(run_resume(tmp / f"resume-{case.name}", case))
    for r in rows:
        print(table([r], list(r)), flush=True)
    return rows


def run_resume(tmp: Path, case) -> dict:
    import dask.array as da
    from distributed.client import FutureCancelledError

    tmp.mkdir(parents=True, exist_ok=True)
    row = {"fault": "whole cluster SIGKILL + resume", "estimator": case.name}
    path = _store(tmp, case, 40)
    ckpt = str(tmp / "ckpt.zarr")
    params = {"checkpoint": ckpt, "checkpoint_every": 2}
    if (
        "storage" in case.make().get_params()
    ):  # RobustPCA: the n1 × n2 state in the store
        params["storage"] = "zarr"
    err_text = ""
    with ProcessCluster(2, workdir=tmp / "ra") as a:
        client = a.client(2)
        _warm(client)
        # as in tests/test_faults.py: reads stall once the first commit is on disk, and
        # the cluster is killed while a worker executes one of them
        Xs = gated(da.from_zarr(path), new_gate(), free=0, after_commit=ckpt)
        with ClusterKiller(a, client, need_all=False, after_commit=ckpt) as killer:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    case.make(**params).fit(Xs)
            except FutureCancelledError as err:
                err_text = str(err)
        client.close(timeout=5)
    with ProcessCluster(2, workdir=tmp / "rb") as b:
        client = b.client(2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            resumed = case.make(**params).fit(da.from_zarr(path))
            t_res = time.perf_counter() - t0
            t0 = time.perf_counter()
            fresh = case.make(**{**params, "checkpoint": str(tmp / "fresh.zarr")}).fit(
                da.from_zarr(path)
            )
            t_fresh = time.perf_counter() - t0
        client.close(timeout=5)
    diff = max_rel_diff(summary(fresh), summary(resumed))
    injected = killer.killed_at is not None and killer.error is None
    ok = (
        injected
        and "lost the connection" in err_text
        and resumed.resumed_from_ > 0
        and diff <= 1e-8
    )
    return {
        **row,
        "injected": int(injected),
        "survived": int(ok),
        "resumed from it": resumed.resumed_from_,
        "iterations": resumed.n_iter_,
        "max rel diff": diff,
        "resume s": t_res,
        "fresh s": t_fresh,
    }


# -- bad input -------------------------------------------------------------------------
def run_bad_input(tmp: Path, docs: Path) -> dict:
    from tests.support.bad_input import markdown, observe_all, observe_cli

    res = observe_all(tmp)
    cli = observe_cli(tmp)
    docs.parent.mkdir(parents=True, exist_ok=True)
    docs.write_text(markdown(res, cli))
    tried = [r for r in res if r[3] is not None]
    unclear = [(r.key, c.name, p) for r, c, _, o, p in res if o is not None and p]
    cli_unclear = [(r.key, m, p) for r, m, _, _, p in cli if p]
    return {
        "tried": len(tried) + len(cli),
        "estimator cells": len(tried),
        "cli cells": len(cli),
        "unclear": len(unclear) + len(cli_unclear),
        "unclear cells": [
            f"{k} × {n}: {'; '.join(p)}" for k, n, p in unclear + cli_unclear
        ],
        "docs": str(docs),
    }


# -- interrupted writes ----------------------------------------------------------------
def run_writes(tmp: Path) -> list[dict]:
    from tests.support.interrupted_writes import (
        scenario_local,
        scenario_make_data,
        scenario_url,
    )

    rows = []
    loc = scenario_local(tmp / "local")
    rows.append(
        {
            "writer": "write_outputs → local dir",
            "killed": 2,
            "read back as complete": int(loc["first_readable"]),
            "bytes lost": loc["bytes_lost"],
            "next run clean": int(not loc["leftovers"]),
            "note": f"left behind: {loc['leftovers']}" if loc["leftovers"] else "",
        }
    )
    url = scenario_url(tmp / "url")
    rows.append(
        {
            "writer": "write_outputs → fsspec URL (in place)",
            "killed": 1,
            "read back as complete": int(url["partial_readable"]),
            "bytes lost": url["bytes_lost"],
            "next run clean": int(not url["previous_left"]),
            "note": f"in place: {url['bytes_replaced']} bytes of the old scores rewritten, "
            "all of them kept in scores.zarr.previous until the rewrite completes",
        }
    )
    gen = scenario_make_data(tmp / "gen")
    rows.append(
        {
            "writer": "make-data → fsspec URL (in place)",
            "killed": 1,
            "read back as complete": int(gen["partial_readable"]),
            "bytes lost": 0,
            "next run clean": int(gen["regenerated"]),
            "note": "" if gen["regenerated"] else "next run reuses the partial dataset",
        }
    )
    return rows


# -- memory pressure -------------------------------------------------------------------
def _ensure_low_rank(path: Path, n: int, d: int, chunk_rows: int):
    if path.exists():
        return
    from scalepca.datasets import make_low_rank_zarr

    print(f"generating {n:,} × {d} at {path} ...", flush=True)
    with local_cluster(memory_limit="2GiB"):
        make_low_rank_zarr(
            str(path), n, d, rank=10, noise=1.0, chunk_rows=chunk_rows, seed=0
        )


def _ensure_rpca(path: Path, n: int, block: int):
    if path.exists():
        return
    from scalepca.datasets import make_low_rank_sparse, write_dataset

    print(f"generating robust-PCA matrix {n:,} × {n:,} at {path} ...", flush=True)
    with local_cluster(memory_limit="2GiB"):
        write_dataset(
            make_low_rank_sparse(n, n, rank=10, chunk_rows=block, seed=0), str(path)
        )


def _too_long(signum, frame):
    raise TimeoutError("the fit did not finish within the time limit")


def run_memory(
    data_dir: Path,
    memory_limit: str,
    tmp: Path,
    args_timeout: int = 900,
    quick: bool = False,
) -> list[dict]:
    import dask.array as da
    from dask.utils import parse_bytes

    import scalepca

    n, m = (100_000, 2000) if quick else (2_000_000, 8000)
    lr = data_dir / f"faults_lowrank_{n}x128.zarr"
    rp = data_dir / f"faults_rpca_{m}x{m}.zarr"
    _ensure_low_rank(lr, n, 128, 25_000)
    _ensure_rpca(rp, m, 1000)
    runs = [
        (
            "PCA covariance_eigh",
            lr,
            lambda: scalepca.PCA(10, svd_solver="covariance_eigh"),
        ),
        (
            "PCA randomized, persist=True",
            lr,
            lambda: scalepca.PCA(
                10,
                svd_solver="randomized",
                n_power_iter=1,
                persist=True,
                random_state=0,
            ),
        ),
        (
            "PPCA EM (3 iterations), persist=True",
            lr,
            lambda: scalepca.PPCA(
                10, solver="em", max_iter=3, persist=True, random_state=0
            ),
        ),
        (
            "SparsePCA minibatch (1 epoch)",
            lr,
            lambda: scalepca.SparsePCA(
                10, method="minibatch", max_iter=1, random_state=0
            ),
        ),
        (
            "KernelPCA nystroem m=200",
            lr,
            lambda: BY_NAME["KernelPCA"].make(n_components=10, n_features=200),
        ),
        (
            "RobustPCA zarr storage (3 iterations)",
            rp,
            lambda: scalepca.RobustPCA(
                max_iter=3, storage="zarr", scratch=str(tmp / "scratch"), random_state=0
            ),
        ),
    ]
    rows = []
    for label, path, make in runs:
        X = da.from_zarr(str(path))
        row = {
            "fit": label,
            "data MB": X.nbytes / 1e6,
            "limit/worker MB": parse_bytes(memory_limit) / 1e6,
        }
        est = make()
        with local_cluster(
            n_workers=2,
            threads_per_worker=1,
            memory_limit=memory_limit,
            local_directory=str(tmp / "spill"),
        ) as client:
            t0 = time.perf_counter()
            signal.signal(signal.SIGALRM, _too_long)
            signal.alarm(args_timeout)  # a worker paused for good must not hang the run
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(X)
                ok, note = 1, ""
            except Exception as err:
                ok, note = 0, f"{type(err).__name__}: {str(err)[:100]}"
                traceback.print_exc()
            finally:
                signal.alarm(0)
            elapsed = time.perf_counter() - t0
            peak = peak_worker_memory(client)["max"]
            spilled = spilled_bytes(client)
        rows.append(
            {
                **row,
                "finished": ok,
                "seconds": elapsed,
                "peak worker MB": peak / 1e6,
                "spilled MB": spilled / 1e6,
                "note": note,
            }
        )
        print(table([rows[-1]], list(rows[-1])), flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--only", choices=["faults", "bad_input", "writes", "memory"], nargs="+"
    )
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument(
        "--memory-limit", default="512MiB", help="per worker, memory-pressure runs"
    )
    ap.add_argument(
        "--fit-timeout", type=int, default=900, help="seconds per memory fit"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="memory section on 100 MB data (a smoke test; no pressure)",
    )
    ap.add_argument("--data-dir", default="/work/bench-data")
    ap.add_argument("--docs", default=str(REPO / "docs" / "bad_input.md"))
    args = ap.parse_args(argv)
    sections = set(args.only or ["faults", "bad_input", "writes", "memory"])
    if args.skip_memory:
        sections.discard("memory")
    out = {}
    with tempfile.TemporaryDirectory(prefix="scalepca-faults-") as d:
        tmp = Path(d)
        if "faults" in sections:
            (tmp / "f").mkdir()
            out["faults"] = run_faults(tmp / "f")
        if "bad_input" in sections:
            (tmp / "b").mkdir()
            out["bad_input"] = run_bad_input(tmp / "b", Path(args.docs))
        if "writes" in sections:
            (tmp / "w").mkdir()
            out["writes"] = run_writes(tmp / "w")
        if "memory" in sections:
            (tmp / "m").mkdir()
            out["memory"] = run_memory(
                Path(args.data_dir),
                args.memory_limit,
                tmp / "m",
                args.fit_timeout,
                args.quick,
            )

    # sections run separately (e.g. memory under the benchmark lock) are merged into one
    # JSON
    prev_path = HERE / "results" / "faults.json"
    if prev_path.exists():
        import json

        prev = json.loads(prev_path.read_text())
        out = {
            **{
                k: prev[k]
                for k in ("faults", "bad_input", "writes", "memory")
                if k in prev
            },
            **out,
        }
    print("\n== reliability figures ==")
    if "faults" in out:
        cols = [
            "fault",
            "estimator",
            "injected",
            "survived",
            "max rel diff",
            "tolerance",
            "lost results",
            "undisturbed s",
            "with fault s",
            "note",
        ]
        print(table(out["faults"], cols))
    if "writes" in out:
        print()
        print(
            table(
                out["writes"],
                [
                    "writer",
                    "killed",
                    "read back as complete",
                    "bytes lost",
                    "next run clean",
                    "note",
                ],
            )
        )
    if "memory" in out:
        print()
        print(
            table(
                out["memory"],
                [
                    "fit",
                    "data MB",
                    "limit/worker MB",
                    "finished",
                    "seconds",
                    "peak worker MB",
                    "spilled MB",
                    "note",
                ],
            )
        )
    summary_ = {}
    if "faults" in out:
        summary_["faults injected"] = sum(r["injected"] for r in out["faults"])
        summary_["fits survived"] = sum(r["survived"] for r in out["faults"])
    if "bad_input" in out:
        b = out["bad_input"]
        summary_["bad inputs tried"] = b["tried"]
        summary_["unclear errors found (target 0)"] = b["unclear"]
    if "writes" in out:
        summary_["writes interrupted"] = sum(r["killed"] for r in out["writes"])
        summary_["read back as complete (target 0)"] = sum(
            r["read back as complete"] for r in out["writes"]
        )
        summary_["bytes lost (target 0)"] = sum(r["bytes lost"] for r in out["writes"])
    if "memory" in out:
        summary_["memory-pressure fits finished"] = (
            f"{sum(r['finished'] for r in out['memory'])}/{len(out['memory'])}"
        )
    print()
    for k, v in summary_.items():
        print(f"{k:40s} {v}")
    if "bad_input" in out:
        for cell in out["bad_input"]["unclear cells"]:
            print(f"  unclear: {cell}")
    path = write_json(
        "faults_quick" if args.quick else "faults", {"summary": summary_, **out}
    )
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
