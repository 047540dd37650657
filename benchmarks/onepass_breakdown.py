"""Where a block task of the one-pass fit spends its time, and the whole fit against
its floor (issue 50, item 2), on the uncompressed 2,000,000 × 256 float64 store of
benchmarks/pca.py.

Steps, on one 50,000-row chunk in this process, one BLAS thread, in interleaved rounds
(every step once per round, in turn, so that the machine's drift hits them alike).
The medians over rounds are reported as process CPU time (what the step costs, whatever
else runs on the machine; zarr reads on a thread of its own) and as wall time:

- read: the chunk through zarr (``z[rows]``, what each task of ``da.from_zarr`` runs),
  and through ``open_zarr`` (what the fit's tasks run on an uncompressed store): a block
  within one chunk file is the file mapped (no copy), a block across chunk files is
  read with ``readinto`` into the reading thread's reused block memory (one copy);
- memory: the first touch of a new chunk-sized array (its page faults);
- check: ``isfinite(x).all()``, a pass the fit does not make (it rides on the sums);
- sums: the column sums;
- Gram: the centred Gram by slices (``moments._gram``), ``XᵀX`` of the chunk in memory
  (one syrk, no centring: the single-core rate the fit is measured against), and of
  the mapped block (the mapping and its page faults included);
- one pass, in parts: the shift of each slab into the slab buffer alone, and the syrks
  of the slab buffer (d + 1 columns) alone;
- block task: the two-pass route (sums with the check, then the centred slices: the
  route of a block with a NaN), ``block_moments`` as the fit calls it (float64: one
  pass, ``moments._fused_moments``) of the chunk in memory, and the fit's whole task
  (the chunk file mapped, then ``block_moments``);
- merge: ``merge_moments`` of two partials.

The fit: ``PCA(svd_solver="covariance_eigh")`` on 2 workers × 1 thread, the store
opened as ``scalepca.open_matrix`` opens it (one store chunk per task), against the
floor of ``_common.one_pass_against_floor`` with ``XᵀX`` as the chunk work (read pass +
one core's ``XᵀX`` × chunks / workers, rounds interleaved with the fits), and its rate
per core as a share of one core's ``XᵀX`` rate of its own round (wall time: alone, and
in two processes at once).

    python benchmarks/onepass_breakdown.py               # 2M rows, 5 rounds of the fit
    python benchmarks/onepass_breakdown.py --quick       # 200,000 rows (a few minutes)
    python benchmarks/onepass_breakdown.py --steps-only  # the steps only, no cluster

Writes benchmarks/results/onepass_breakdown[_quick].json.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    FLOOR_COLUMNS,
    common_args,
    one_pass_against_floor,
    table,
    write_json,
)
from pca import K, ensure_data, store_path  # noqa: E402

import scalepca  # noqa: E402
from scalepca.io._coalesce import _ChunkFiles  # noqa: E402

moments = importlib.import_module("scalepca.linalg.moments")


def first_touch(shape) -> None:
    """A new array written once per 4 KiB page: the page faults (and the kernel's
    zeroing) that every read into fresh memory pays. zarr's read pays them twice, for
    the file's bytes and for the array; ``open_zarr``'s read into a thread's reused
    block memory, once per thread; its mapping, never."""
    out = np.empty(shape)
    out.reshape(-1)[:: 4096 // out.itemsize] = 0.0


def mapped_xtx(files, rows: int) -> np.ndarray:
    """``XᵀX`` of the first chunk as ``open_zarr`` gives it: the chunk file mapped, its
    pages faulted in by the syrk."""
    block = files[:rows]
    return block.T @ block


def two_pass(x: np.ndarray) -> dict:
    """The two-pass route of ``block_moments`` (a NaN-free block): sums with the
    finiteness check, then the centred Gram by slices."""
    colsum = x.sum(axis=0, dtype=np.float64)
    assert np.isfinite(colsum).all()
    mean = colsum / x.shape[0]
    return {"n": x.shape[0], "mean": mean, "bad": 0, "m2": moments._gram(x, mean)}


def slabs(x: np.ndarray):
    """The slab buffer of ``moments._fused_moments`` (d + 1 columns, the last of ones)
    and the row ranges of its slabs."""
    n, d = x.shape
    rows = min(n, moments.FUSED_SLAB_ROWS)
    buf = np.empty((rows, d + 1))
    buf[:, d] = 1.0
    return buf, [(a, min(n, a + rows)) for a in range(0, n, rows)]


def shift_only(x: np.ndarray, shift: np.ndarray) -> None:
    """The one pass's shift of each slab into the slab buffer, without its syrk."""
    buf, ranges = slabs(x)
    d = x.shape[1]
    for a, b in ranges:
        np.subtract(x[a:b], shift, out=buf[: b - a, :d])


def syrk_only(x: np.ndarray, buf: np.ndarray) -> None:
    """The one pass's syrks of the slab buffer (d + 1 columns), without the shifts:
    the Gram's flops with the column sums', on data in the cache."""
    from scipy.linalg import blas

    d = x.shape[1]
    g = np.zeros((d + 1, d + 1), order="F")
    for a, b in slabs(x)[1]:
        part = buf[: b - a]
        blas.dsyrk(1.0, part.T, beta=1.0, c=g, trans=0, lower=0, overwrite_c=1)


def steps(path, rounds: int) -> tuple[list[dict], dict]:
    """The per-step table of one chunk (the first) and the raw timings."""
    import zarr
    from threadpoolctl import threadpool_limits

    z = zarr.open_array(path, mode="r")
    rows = z.chunks[0]
    files = _ChunkFiles.of(z)
    assert files is not None, "the store should be read from its chunk files"
    x = z[:rows]
    mean = x.sum(axis=0) / rows
    part = moments.block_moments(x)
    other = moments.block_moments(z[rows : 2 * rows]) if z.shape[0] > rows else part
    slab = slabs(x)[0]
    slab[:, :-1] = x[: slab.shape[0]] - mean
    work = {
        "read: zarr chunk → array": lambda: z[:rows],
        "read: open_zarr's block in one chunk file (mapped)": lambda: files[:rows],
        "read: open_zarr's block across chunk files (readinto)": lambda: (
            files.read_rows(0, rows)
        ),
        "memory: first touch of a new chunk-sized array": lambda: first_touch(x.shape),
        "check: isfinite(x).all()": lambda: np.isfinite(x).all(),
        "sums: x.sum(axis=0)": lambda: x.sum(axis=0, dtype=np.float64),
        "Gram: centred slices (_gram)": lambda: moments._gram(x, mean),
        "Gram: XᵀX in memory (one syrk)": lambda: x.T @ x,
        "Gram: XᵀX of the mapped block": lambda: mapped_xtx(files, rows),
        "one pass, part: the shifts into the slab buffer": lambda: shift_only(x, mean),
        "one pass, part: the syrks of the slab buffer": lambda: syrk_only(x, slab),
        "block task: two-pass route": lambda: two_pass(x),
        "block task: block_moments (one pass) in memory": lambda: moments.block_moments(
            x
        ),
        "block task: the fit's (mapped block + one pass)": lambda: (
            moments.block_moments(files[:rows])
        ),
        "merge: two partials": lambda: moments.merge_moments(part, other),
    }
    cpu, wall = {k: [] for k in work}, {k: [] for k in work}
    with threadpool_limits(1):
        for fn in work.values():  # warm-up: first calls, page cache
            fn()
        for _ in range(rounds):
            for label, fn in work.items():
                c0, w0 = time.process_time(), time.perf_counter()
                fn()
                cpu[label].append(time.process_time() - c0)
                wall[label].append(time.perf_counter() - w0)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    xtx = med["Gram: XᵀX in memory (one syrk)"]
    one_pass = med["block task: block_moments (one pass) in memory"]
    task = med["block task: the fit's (mapped block + one pass)"]
    read = med["read: zarr chunk → array"]
    mapped = med["read: open_zarr's block in one chunk file (mapped)"]
    copied = med["read: open_zarr's block across chunk files (readinto)"]
    out = []
    for label in work:
        row = {
            "step": label,
            "CPU ms": med[label] * 1e3,
            "wall ms": statistics.median(wall[label]) * 1e3,
            "GB/s (CPU)": x.nbytes / med[label] / 1e9,
            "x XᵀX": med[label] / xtx,
        }
        if label.startswith(("read: open_zarr's block in", "merge", "one pass, part")):
            row["share of task"] = med[label] / task
        out.append(row)
    totals = {
        "task = zarr read + two-pass route": read + med["block task: two-pass route"],
        "task = zarr read + one pass": read + one_pass,
        "task = readinto across chunk files + one pass": copied + one_pass,
        "task = mapped block + one pass (steps summed)": mapped + one_pass,
        "task = the fit's, mapped block + one pass (measured whole)": task,
    }
    for label, t in totals.items():
        out.append(
            {
                "step": label,
                "CPU ms": t * 1e3,
                "x XᵀX": t / xtx,
                "XᵀX rate %": 100 * xtx / t,
            }
        )
    raw = {
        "chunk_bytes": int(x.nbytes),
        "rounds": rounds,
        "cpu_s": cpu,
        "wall_s": wall,
        "xtx_cpu_s": xtx,
        "xtx_gb_s": x.nbytes / xtx / 1e9,
    }
    return out, raw


STEP_COLUMNS = [
    "step",
    "CPU ms",
    "wall ms",
    "GB/s (CPU)",
    "x XᵀX",
    "share of task",
    "XᵀX rate %",
]


def xtx(x: np.ndarray) -> np.ndarray:
    """``XᵀX`` of a chunk as read: the floor's chunk work in the fit part (module-level,
    so that the floor's processes can unpickle it)."""
    return x.T @ x


def fit_part(path, args) -> tuple[list[dict], dict]:
    """The fit against the floor of read + one core's ``XᵀX`` (rounds interleaved), and
    its rate per core against one core's ``XᵀX`` measured in its own round: alone, and
    with another process doing the same at once (both cores busy, as in the fit)."""
    fits = {
        "PCA covariance_eigh": lambda X: scalepca.PCA(
            K, svd_solver="covariance_eigh"
        ).fit(X)
    }
    rows, info = one_pass_against_floor(
        {"none": path},
        fits,
        repeat=args.repeat,
        memory_limit=args.memory_limit,
        work=xtx,
        work_label="XᵀX",
    )
    run = info["none"]
    chunk_bytes = run["bytes"] / run["chunks"]
    fit_s = run["fit_all_s"]["PCA covariance_eigh"]
    for key, xtx_s in (
        ("x_xtx_rate_rounds", run["chunk_work_all_s"]),
        ("x_xtx_concurrent_rate_rounds", run["chunk_work_concurrent_all_s"]),
    ):
        run[key] = [
            (run["bytes"] / t / 2) / (chunk_bytes / w)
            for t, w in zip(fit_s, xtx_s, strict=True)
        ]
    run["xtx_gb_s_rounds"] = [chunk_bytes / w / 1e9 for w in run["chunk_work_all_s"]]
    return rows, info


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n-samples", type=int, default=2_000_000)
    ap.add_argument("--n-features", type=int, default=256)
    ap.add_argument("--chunk-rows", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=9, help="rounds of the steps")
    ap.add_argument("--steps-only", action="store_true", help="no fit (no cluster)")
    common_args(
        ap,
        memory_limit="4GiB",
        repeat=5,
        quick="200,000 rows, 5 rounds of steps, 2 of the fit (a few minutes)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.n_samples, args.rounds, args.repeat = 200_000, 5, 2
    return args


def main(argv=None):
    args = parse_args(argv)
    n, d = args.n_samples, args.n_features
    path = store_path(args.data_dir, n, d, "none")
    ensure_data(path, n, d, args.chunk_rows, codec="none")
    load = {"start": os.getloadavg()}  # the machine's load (1, 5, 15 min) around it
    step_rows, raw = steps(path, args.rounds)
    load["after_steps"] = os.getloadavg()
    print(
        f"\none {args.chunk_rows:,} × {d} float64 chunk of {path}, one BLAS thread, "
        f"medians of {args.rounds} interleaved rounds"
    )
    print(table(step_rows, STEP_COLUMNS))
    results = {
        "n_samples": n,
        "n_features": d,
        "chunk_rows": args.chunk_rows,
        "steps": step_rows,
        "steps_raw": raw,
        "load_avg": load,
    }
    if not args.steps_only:
        fit_rows, info = fit_part(path, args)
        results.update(fit_rows=fit_rows, fit_info=info)
        run = info["none"]
        print(
            f"\nthe fit, 2 workers × 1 thread, {args.repeat} rounds, against the floor "
            f"of read + one core's XᵀX (GB/s per round: "
            f"{', '.join(f'{r:.2f}' for r in run['xtx_gb_s_rounds'])})"
        )
        print(table(fit_rows, FLOOR_COLUMNS))
        for key, what in (
            ("x_xtx_rate_rounds", "one core's XᵀX alone"),
            ("x_xtx_concurrent_rate_rounds", "one core's XᵀX, both cores busy"),
        ):
            rates = run[key]
            print(
                f"fit per core / {what}, per round: "
                f"{', '.join(f'{r:.0%}' for r in rates)} "
                f"(median {statistics.median(rates):.0%})"
            )
    load["end"] = os.getloadavg()
    print(f"load average (1, 5, 15 min): {load}")
    print(
        "written",
        write_json("onepass_breakdown" + ("_quick" if args.quick else ""), results),
    )


if __name__ == "__main__":
    main()
