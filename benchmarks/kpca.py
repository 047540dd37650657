"""Kernel PCA benchmark: scikit-learn against scalepca at n = 8,000, then a scaling run.

Part 1 (``--part small``), one process, default threaded scheduler, n = 8,000 × 20
standard normal rows, RBF γ = 1/d, top-10 eigenvalues:

- scikit-learn ``KernelPCA`` dense (the reference eigenvalues) and randomized;
- scikit-learn ``Nystroem(m) + PCA(10)``, with PCA's default solver and with
  ``covariance_eigh`` (so the error is the Nyström error, not the PCA solver's);
- scalepca ``KernelPCA`` exact (Lanczos), Nyström (m = 1000, 2000; uniform and k-means++
  landmarks) and RFF (m = 1000, 2000, 4000).

Time = best of ``--repeats`` fits (the machine is shared); error = relative error of
each of the top-10 eigenvalues against the dense reference (max and mean). Eigenvalues
are compared in scikit-learn's ``KernelPCA.eigenvalues_`` convention (eigenvalues of the
centred n × n kernel); ``PCA.explained_variance_ · (n − 1)`` is the same quantity for
Nystroem + PCA.

Part 2 (``--part scaling``): Nyström m = 1000 fits of the first n = 1M, 2M, 4M, 8M rows
of one zarr store of 8M × 20 rows (written once to ``/work/bench-data/``, reused), on a
2-worker ``LocalCluster`` (1 thread, 2 GiB each). Reported per n: fit time, time per
million rows, the bytes every ``dask.compute`` returned to the client, the peak cluster
memory (distributed ``MemorySampler``) and the client's peak RSS — compared with the n ×
m feature matrix (8 GB per million rows) that is never formed.

Part 3 (``--part floor``, issue 23): the one-pass moments of RFF kernel PCA
(``approximation="rff"``, m = ``--m``) on a ``--floor-rows`` × 20 store written with
zstd and an uncompressed copy (``--codecs``): the read pass, the floor (read pass + one
core's time to map a real chunk to its m random features and form their Gram, one BLAS
thread, × chunks / worker threads, measured in rounds between the fits:
``_common.one_pass_against_floor``) and the fit against both, with GB/s per core of the
stored data.

Run (heavy; the lock keeps benchmarks from overlapping)::

    flock /tmp/scalepca-bench.lock .venv/bin/python benchmarks/kpca.py --part all
    .venv/bin/python benchmarks/kpca.py --part floor --quick   # < 1 min check
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from _provenance import updated

RESULTS = Path(__file__).parent / "results" / "kpca.json"
DATA = Path("/work/bench-data/kpca_8M_x20.zarr")


def _best_of(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def _errors(ev, ref):
    r = np.abs(np.asarray(ev)[: len(ref)] - ref) / ref
    return float(r.max()), float(r.mean())


def part_small(repeats: int) -> dict:
    from sklearn.decomposition import PCA as SKPCA
    from sklearn.decomposition import KernelPCA as SKKernelPCA
    from sklearn.kernel_approximation import Nystroem

    from scalepca import KernelPCA

    n, d, k = 8000, 20, 10
    gamma = 1.0 / d
    X = np.random.default_rng(0).standard_normal((n, d))
    rows = []

    t, sk_dense = _best_of(
        lambda: SKKernelPCA(k, kernel="rbf", gamma=gamma, eigen_solver="dense").fit(X),
        1,
    )
    ref = sk_dense.eigenvalues_
    rows.append(("sklearn KernelPCA dense", "-", t, 0.0, 0.0))
    print(f"reference top-10 eigenvalues: {np.round(ref, 3).tolist()}", flush=True)

    t, m_ = _best_of(
        lambda: SKKernelPCA(
            k, kernel="rbf", gamma=gamma, eigen_solver="randomized", random_state=0
        ).fit(X),
        repeats,
    )
    rows.append(
        ("sklearn KernelPCA randomized", "-", t, *_errors(m_.eigenvalues_, ref))
    )

    for m in (1000, 2000):
        for solver in ("auto", "covariance_eigh"):

            def sk_nys(m=m, solver=solver):
                F = Nystroem(gamma=gamma, n_components=m, random_state=0).fit_transform(
                    X
                )
                return SKPCA(k, svd_solver=solver, random_state=0).fit(F)

            t, p = _best_of(sk_nys, repeats)
            rows.append(
                (
                    f"sklearn Nystroem+PCA({solver})",
                    m,
                    t,
                    *_errors(p.explained_variance_ * (n - 1), ref),
                )
            )

    t, ex = _best_of(
        lambda: KernelPCA(k, approximation="exact", random_state=0).fit(X), 1
    )
    rows.append(("scalepca exact (arpack)", "-", t, *_errors(ex.eigenvalues_, ref)))
    for m in (1000, 2000):
        for lm in ("uniform", "kmeans++"):
            t, kp = _best_of(
                lambda m=m, lm=lm: KernelPCA(
                    k, n_features=m, landmarks=lm, random_state=0
                ).fit(X),
                repeats,
            )
            rows.append(
                (f"scalepca Nystroem ({lm})", m, t, *_errors(kp.eigenvalues_, ref))
            )
    for m in (1000, 2000, 4000):
        t, kp = _best_of(
            lambda m=m: KernelPCA(
                k, approximation="rff", n_features=m, random_state=0
            ).fit(X),
            repeats,
        )
        rows.append(("scalepca RFF", m, t, *_errors(kp.eigenvalues_, ref)))

    print(f"\nn = {n} × {d}, RBF gamma = 1/{d}, top-{k} eigenvalues, best of {repeats}")
    print(f"{'method':<36}{'m':>6}{'time s':>9}{'max err %':>11}{'mean err %':>12}")
    for name, m, t, emax, emean in rows:
        print(f"{name:<36}{m!s:>6}{t:>9.3f}{100 * emax:>11.3f}{100 * emean:>12.3f}")
    keys = ("method", "m", "time_s", "max_rel_err", "mean_rel_err")
    table = [dict(zip(keys, r, strict=True)) for r in rows]
    by = {(r["method"], r["m"]): r for r in table}
    ours = by[("scalepca Nystroem (uniform)", 1000)]
    ratios = {}
    for solver in ("auto", "covariance_eigh"):
        sk = by[(f"sklearn Nystroem+PCA({solver})", 1000)]
        ratios[f"time scalepca/sklearn({solver}) m=1000"] = (
            ours["time_s"] / sk["time_s"]
        )
        ratios[f"max err scalepca/sklearn({solver}) m=1000"] = (
            ours["max_rel_err"] / sk["max_rel_err"]
        )
    for key, v in ratios.items():
        print(f"{key}: {v:.2f}")
    return {
        "n": n,
        "d": d,
        "k": k,
        "gamma": gamma,
        "repeats": repeats,
        "reference_eigenvalues": ref.tolist(),
        "rows": table,
        "ratios": ratios,
    }


def _ensure_data(path: Path, n_max: int) -> str:
    from scalepca.datasets import make_low_rank_zarr

    if path.exists():
        print(f"reusing {path}", flush=True)
    else:
        print(f"writing {path} ({n_max} × 20 float64, 100,000-row chunks)", flush=True)
        t0 = time.perf_counter()
        make_low_rank_zarr(
            path, n_max, 20, rank=10, noise=1.0, chunk_rows=100_000, seed=0
        )
        print(f"  written in {time.perf_counter() - t0:.1f}s", flush=True)
    return str(path)


def _result_bytes(obj) -> int:
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_result_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_result_bytes(v) for v in obj)
    return 8


def part_scaling(sizes, m: int, data: Path = DATA) -> dict:
    from distributed.diagnostics import MemorySampler

    import scalepca
    from scalepca import KernelPCA

    path = _ensure_data(data, max(sizes))
    gathered = []
    real_compute = dask.compute

    def recording_compute(*args, **kwargs):  # what reaches the client, per compute
        out = real_compute(*args, **kwargs)
        gathered.append(_result_bytes(out))
        return out

    rows = []
    with scalepca.connect(
        n_workers=2, threads_per_worker=1, memory_limit="2GiB", quiet=True
    ) as client:
        print(f"cluster: {client}", flush=True)
        Xall = da.from_zarr(path)
        for n in sizes:
            X = Xall[:n]
            ms = MemorySampler()
            gathered.clear()
            dask.compute = recording_compute
            try:
                with ms.sample("fit", interval=0.25):
                    t0 = time.perf_counter()
                    kp = KernelPCA(10, n_features=m, random_state=0).fit(X)
                    t = time.perf_counter() - t0
            finally:
                dask.compute = real_compute
            peak_cluster = float(max(v for _, v in ms.samples["fit"]))
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            rows.append(
                {
                    "n": n,
                    "time_s": t,
                    "s_per_million": t / (n / 1e6),
                    "passes": kp.n_passes_,
                    "n_chunks": X.numblocks[0],
                    "gathered_bytes": list(gathered),
                    "peak_cluster_bytes": peak_cluster,
                    "client_peak_rss_bytes": rss,
                    "n_by_m_bytes": 8 * n * m,
                    "top_eigenvalue": float(kp.eigenvalues_[0]),
                }
            )
            print(
                f"n={n:>9,}: {t:8.1f}s  ({t / (n / 1e6):.1f} s per 1M rows), "
                f"gathered {max(gathered) / 2**20:.1f} MiB max, cluster peak "
                f"{peak_cluster / 2**30:.2f} GiB",
                flush=True,
            )
    t1 = rows[0]["s_per_million"]
    print(f"\nNystroem m={m}, 2 workers × 1 thread × 2 GiB, data {path}")
    print(
        f"{'n':>10}{'time s':>9}{'s/1M':>7}{'vs 1M':>7}{'to client MiB':>15}"
        f"{'cluster peak GiB':>18}{'client RSS GiB':>16}{'n×m GiB':>9}"
    )
    for r in rows:
        print(
            f"{r['n']:>10,}{r['time_s']:>9.1f}{r['s_per_million']:>7.1f}"
            f"{r['s_per_million'] / t1:>7.2f}"
            f"{max(r['gathered_bytes']) / 2**20:>15.2f}"
            f"{r['peak_cluster_bytes'] / 2**30:>18.2f}"
            f"{r['client_peak_rss_bytes'] / 2**30:>16.2f}"
            f"{r['n_by_m_bytes'] / 2**30:>9.1f}"
        )
    ns = np.array([r["n"] for r in rows], dtype=float)
    ts = np.array([r["time_s"] for r in rows])
    slope, intercept = np.polyfit(ns / 1e6, ts, 1)
    fit = slope * ns / 1e6 + intercept
    r2 = 1 - np.sum((ts - fit) ** 2) / np.sum((ts - ts.mean()) ** 2)
    print(
        f"least-squares line: time = {slope:.1f} s per "
        f"1M rows + {intercept:.1f} s, R² = {r2:.4f}"
    )
    return {
        "m": m,
        "data": path,
        "workers": 2,
        "threads_per_worker": 1,
        "memory_limit": "2GiB",
        "rows": rows,
        "linear_fit": {"s_per_million": slope, "intercept_s": intercept, "r2": r2},
    }


def part_floor(rows: int, m: int, codecs: str, repeat: int, data_dir: str) -> dict:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from functools import partial

    import zarr
    from _common import FLOOR_COLUMNS, one_pass_against_floor, table

    from scalepca import KernelPCA
    from scalepca.datasets import make_low_rank_zarr
    from scalepca.linalg.kernels import _rff_block
    from scalepca.linalg.moments import feature_block_moments

    stores = {}
    for codec in codecs.split(","):
        path = f"{data_dir}/kpca_floor_{rows}x20" + (
            "" if codec == "zstd" else f"_{codec}"
        )
        stores[codec] = path + ".zarr"
        if not Path(stores[codec]).exists():
            print(
                f"writing {stores[codec]} ({rows:,} × 20 float64, {codec})", flush=True
            )
            make_low_rank_zarr(
                stores[codec],
                rows,
                20,
                rank=10,
                noise=1.0,
                chunk_rows=100_000,
                seed=0,
                codec=codec,
            )

    def rff(X):
        return KernelPCA(10, approximation="rff", n_features=m, random_state=0).fit(X)

    # the fit's own task on one stored chunk: features and Gram, slab by slab, with the
    # weights of a small in-memory fit (the same random_state: the fitted model's
    # weights); a partial of module-level functions, so that the floor's worker
    # processes can take it
    est = rff(zarr.open_array(next(iter(stores.values())), mode="r")[:2000])
    work = partial(
        feature_block_moments,
        feature_map=partial(_rff_block, W=est.random_weights_, b=est.random_offset_),
    )

    rows_out, info = one_pass_against_floor(
        stores,
        {f"KernelPCA rff m={m}": rff},
        repeat=repeat,
        memory_limit="2GiB",
        work=work,
        work_label="RFF features + Gram",
    )
    print(
        f"\nfloor: {rows:,} × 20 float64, 100,000-row chunks, RFF m = {m}, 2 workers "
        f"× 1 thread, 2GiB/worker (best of {repeat})"
    )
    print(table(rows_out, FLOOR_COLUMNS))
    return {"m": m, "rows": rows_out, "stores": info}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--part", choices=["small", "scaling", "floor", "all"], default="all"
    )
    ap.add_argument("--floor-rows", type=int, default=2_000_000)
    ap.add_argument("--codecs", default="zstd,none")
    ap.add_argument("--data-dir", default="/work/bench-data")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="floor part only at 200,000 rows and m = 200, one repeat",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[1_000_000, 2_000_000, 4_000_000, 8_000_000],
    )
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help="zarr store of the scaling run (written if missing)",
    )
    args = ap.parse_args()
    if args.quick:
        part = part_floor(200_000, 200, args.codecs, 1, args.data_dir)
        quick = RESULTS.with_name("kpca_floor_quick.json")
        quick.parent.mkdir(parents=True, exist_ok=True)
        quick.write_text(json.dumps(part, indent=2, default=str))
        print(f"\nwrote {quick}")
        return
    out = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    out["provenance"] = updated("kpca", out.get("provenance"))
    if args.part in ("small", "all"):
        out["small"] = part_small(args.repeats)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2))
    if args.part in ("scaling", "all"):
        out["scaling"] = part_scaling(sorted(args.sizes), args.m, args.data)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2))
    if args.part in ("floor", "all"):
        out["floor"] = part_floor(
            args.floor_rows, args.m, args.codecs, args.repeats, args.data_dir
        )
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2, default=str))
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
