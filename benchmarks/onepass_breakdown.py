"""Where a block task of the one-pass fit spends its time, and the whole fit against
its floor (issue 50, item 2), on the uncompressed 2,000,000 × 256 float64 store of
benchmarks/pca.py.

Steps, on one 50,000-row chunk in this process, one BLAS thread, in interleaved rounds
(every step once per round, in turn, so that the machine's drift hits them alike).
The medians over rounds are reported as process CPU time (what the step costs, whatever
else runs on the machine; zarr reads on a thread of its own) and as wall time:

- read: the chunk through zarr (``z[rows]``, what each task of ``da.from_zarr`` runs),
  and the same chunk file read straight into a new array (``readinto``): the read
  without zarr's copies;
- memory: the first touch of a new chunk-sized array (its page faults);
- check: ``isfinite(x).all()``, a pass the fit does not make (it rides on the sums);
- sums: the column sums;
- Gram: the centred Gram by slices (``moments._gram``) and ``XᵀX`` of the chunk as read
  (one syrk, no centring: the single-core rate the fit is measured against);
- block task: the two-pass route (sums with the check, then the centred slices: the
  route of a block with a NaN) and ``block_moments`` as the fit calls it (float64: one
  pass, ``moments._fused_moments``);
- merge: ``merge_moments`` of two partials.

The fit: ``PCA(svd_solver="covariance_eigh")`` on 2 workers × 1 thread against the
floor of ``_common.one_pass_against_floor`` (read pass + one core's block moments ×
chunks / workers, rounds interleaved with the fits), and its rate per core as a share of
one core's ``XᵀX``.

    python benchmarks/onepass_breakdown.py               # 2M rows, 5 rounds of the fit
    python benchmarks/onepass_breakdown.py --quick       # 200,000 rows (a few minutes)
    python benchmarks/onepass_breakdown.py --steps-only  # the steps only, no cluster

Writes benchmarks/results/onepass_breakdown[_quick].json.
"""

from __future__ import annotations

import argparse
import importlib
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

moments = importlib.import_module("scalepca.linalg.moments")


def chunk_file(path, z, index: int) -> Path | None:
    """The file of row chunk ``index`` of an uncompressed 2-D zarr v3 array (one column
    chunk), or None when the store is not such (another codec, another key encoding)."""
    codecs = [type(c).__name__ for c in z.metadata.codecs]
    if codecs != ["BytesCodec"] or z.shape[1] != z.chunks[1]:
        return None
    f = Path(path) / "c" / str(index) / "0"
    size = z.chunks[0] * z.shape[1] * 8
    return f if f.exists() and f.stat().st_size == size else None


def read_into(f: Path, shape) -> np.ndarray:
    """The chunk file into a new array: one copy, from the page cache."""
    out = np.empty(shape)
    with open(f, "rb", buffering=0) as fh:
        fh.readinto(memoryview(out).cast("B"))
    return out


def first_touch(shape) -> None:
    """A new array written once per 4 KiB page: the page faults (and the kernel's
    zeroing) that every read into fresh memory pays. zarr's read pays them twice, for
    the file's bytes and for the array; each task's output is a new array."""
    out = np.empty(shape)
    out.reshape(-1)[:: 4096 // out.itemsize] = 0.0


def two_pass(x: np.ndarray) -> dict:
    """The two-pass route of ``block_moments`` (a NaN-free block): sums with the
    finiteness check, then the centred Gram by slices."""
    colsum = x.sum(axis=0, dtype=np.float64)
    assert np.isfinite(colsum).all()
    mean = colsum / x.shape[0]
    return {"n": x.shape[0], "mean": mean, "bad": 0, "m2": moments._gram(x, mean)}


def steps(path, rounds: int) -> tuple[list[dict], dict]:
    """The per-step table of one chunk (the first) and the raw timings."""
    import zarr
    from threadpoolctl import threadpool_limits

    z = zarr.open_array(path, mode="r")
    rows = z.chunks[0]
    f = chunk_file(path, z, 0)
    x = z[:rows]
    mean = x.sum(axis=0) / rows
    part = moments.block_moments(x)
    other = moments.block_moments(z[rows : 2 * rows]) if z.shape[0] > rows else part
    work = {
        "read: zarr chunk → array": lambda: z[:rows],
        "read: chunk file → array (readinto)": (
            None if f is None else lambda: read_into(f, (rows, z.shape[1]))
        ),
        "memory: first touch of a new chunk-sized array": lambda: first_touch(x.shape),
        "check: isfinite(x).all()": lambda: np.isfinite(x).all(),
        "sums: x.sum(axis=0)": lambda: x.sum(axis=0, dtype=np.float64),
        "Gram: centred slices (_gram)": lambda: moments._gram(x, mean),
        "Gram: XᵀX as read (one syrk)": lambda: x.T @ x,
        "block task: two-pass route": lambda: two_pass(x),
        "block task: block_moments (one pass)": lambda: moments.block_moments(x),
        "merge: two partials": lambda: moments.merge_moments(part, other),
    }
    work = {k: v for k, v in work.items() if v is not None}
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
    xtx = med["Gram: XᵀX as read (one syrk)"]
    read = med["read: zarr chunk → array"]
    task = read + med["block task: block_moments (one pass)"]
    task_old = read + med["block task: two-pass route"]
    out = []
    for label in work:
        row = {
            "step": label,
            "CPU ms": med[label] * 1e3,
            "wall ms": statistics.median(wall[label]) * 1e3,
            "GB/s (CPU)": x.nbytes / med[label] / 1e9,
            "x XᵀX": med[label] / xtx,
        }
        if not label.startswith(
            ("block task", "Gram: XᵀX", "read: chunk file", "check", "memory")
        ):
            row["share of task"] = med[label] / task_old
        out.append(row)
    out.append(
        {
            "step": "task = zarr read + two-pass route",
            "CPU ms": task_old * 1e3,
            "x XᵀX": task_old / xtx,
            "XᵀX rate %": 100 * xtx / task_old,
        }
    )
    out.append(
        {
            "step": "task = zarr read + one pass",
            "CPU ms": task * 1e3,
            "x XᵀX": task / xtx,
            "XᵀX rate %": 100 * xtx / task,
        }
    )
    if f is not None:
        direct = med["read: chunk file → array (readinto)"]
        t = direct + med["block task: block_moments (one pass)"]
        out.append(
            {
                "step": "task = readinto + one pass (what-if)",
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


def fit_part(path, args, xtx_s: float, chunk_bytes: int) -> tuple[list[dict], dict]:
    """The fit against its floor (rounds interleaved), and its rate per core against one
    core's ``XᵀX``."""
    fits = {
        "PCA covariance_eigh": lambda X: scalepca.PCA(
            K, svd_solver="covariance_eigh"
        ).fit(X)
    }
    rows, info = one_pass_against_floor(
        {"none": path}, fits, repeat=args.repeat, memory_limit=args.memory_limit
    )
    xtx_rate = chunk_bytes / xtx_s / 1e9  # GB/s of one core's XᵀX
    for row in rows:
        row["x XᵀX rate"] = row["GB/s per core"] / xtx_rate
    per_round = [
        info["none"]["bytes"] / t / 2 / 1e9 / xtx_rate
        for t in info["none"]["fit_all_s"]["PCA covariance_eigh"]
    ]
    info["none"]["x_xtx_rate_rounds"] = per_round
    info["none"]["xtx_gb_s"] = xtx_rate
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
    step_rows, raw = steps(path, args.rounds)
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
    }
    if not args.steps_only:
        fit_rows, info = fit_part(path, args, raw["xtx_cpu_s"], raw["chunk_bytes"])
        results.update(fit_rows=fit_rows, fit_info=info)
        print(
            f"\nthe fit, 2 workers × 1 thread, {args.repeat} rounds "
            f"(one core's XᵀX: {info['none']['xtx_gb_s']:.2f} GB/s)"
        )
        print(table(fit_rows, [*FLOOR_COLUMNS, "x XᵀX rate"]))
        rates = info["none"]["x_xtx_rate_rounds"]
        print(
            f"fit per core / one core's XᵀX, per round: "
            f"{', '.join(f'{r:.0%}' for r in rates)} "
            f"(median {statistics.median(rates):.0%})"
        )
    print(
        "written",
        write_json("onepass_breakdown" + ("_quick" if args.quick else ""), results),
    )


if __name__ == "__main__":
    main()
