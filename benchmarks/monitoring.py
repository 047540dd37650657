"""``cluster.monitoring``: scalepca's light Dask housekeeping against Dask's own,
interleaved.

    python benchmarks/monitoring.py              # idle CPU, then 3 rounds of kpca + PCA
    fits python benchmarks/monitoring.py --quick      # small stores, one round (< 2
    min) python benchmarks/monitoring.py --fits kpca --rounds 4 --results
    monitoring_kpca

Every Dask scheduler and worker checks its event loop every 20 ms, samples CPU and
memory for the dashboard every 500 ms, and (workers) samples the running task's stack
every 10 ms. The clusters scalepca starts run these at 1 s, 2 s and 100 ms
(``cluster.monitoring: light``, the default; ``dask`` keeps Dask's). This script
measures what that buys on this machine:

- **idle**: the CPU time a fresh 2-worker ``LocalCluster`` (scheduler, 2 nannies, 2
  workers and this client) burns per second of wall time while it runs nothing;
- **fits**: the same fit on the same store, on a fresh cluster of each setting, the
  settings alternating round by round (light, dask, light, dask, …), so that this
  machine's drift over minutes hits both alike. The fits are the RFF kernel PCA moments
  (m = 1000, compute-bound, the fit of issue 23 that sat at its floor's 1.1× line) and
  PCA's one pass on the 4.1 GB store of ``benchmarks/pca.py`` (read-bound). Each cluster
  gets a warm-up read and a warm-up fit on one chunk before the timed fit.

It prints a table and writes ``results/monitoring.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fresh_array, local_cluster, table, warm_up, write_json  # noqa: E402

SETTINGS = ("light", "dask")  # values of cluster.monitoring


def cluster_cpu_seconds() -> float:
    """CPU seconds used so far by this process and every process it started (the
    cluster)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.NoSuchProcess:  # a process that ended in between
            continue
        total += t.user + t.system
    return total


def idle_cpu(setting: str, seconds: float, memory_limit: str) -> float:
    """CPU seconds per wall second of an idle 2-worker cluster of ``setting``."""
    with local_cluster(memory_limit=memory_limit, monitoring=setting):
        time.sleep(3)  # start-up done
        c0, t0 = cluster_cpu_seconds(), time.perf_counter()
        time.sleep(seconds)
        return (cluster_cpu_seconds() - c0) / (time.perf_counter() - t0)


def timed_fit(setting: str, path: str, fit, memory_limit: str) -> float:
    with local_cluster(memory_limit=memory_limit, monitoring=setting):
        warm_up(path, [fit])
        X = fresh_array(path)
        t0 = time.perf_counter()
        fit(X)
        return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--fits", default="kpca,pca", help="which fits (kpca, pca)")
    ap.add_argument("--data-dir", default="/work/bench-data")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--results",
        default="monitoring",
        help="name of the JSON file written in results/ (for a run beside another)",
    )
    args = ap.parse_args(argv)

    from scalepca import PCA, KernelPCA
    from scalepca.datasets import make_low_rank_zarr

    kpca_rows, pca_rows, m = (
        (200_000, 200_000, 200) if args.quick else (2_000_000, 2_000_000, 1000)
    )
    rounds = 1 if args.quick else args.rounds
    # the stores of benchmarks/kpca.py --part floor and benchmarks/pca.py --floor-only
    stores = {
        "kpca": (
            f"{args.data_dir}/kpca_floor_{kpca_rows}x20.zarr",
            "2GiB",
            lambda X: KernelPCA(
                10, approximation="rff", n_features=m, random_state=0
            ).fit(X),
            dict(n=kpca_rows, d=20, rank=10, chunk_rows=100_000),
        ),
        "pca": (
            f"{args.data_dir}/pca_{pca_rows}x256.zarr",
            "4GiB",
            lambda X: PCA(20, svd_solver="covariance_eigh").fit(X),
            dict(n=pca_rows, d=256, rank=20, chunk_rows=50_000),
        ),
    }
    fits = [f for f in args.fits.split(",") if f]
    unknown = sorted(set(fits) - set(stores))
    if unknown:
        ap.error(f"--fits: unknown {unknown}; choose from {sorted(stores)}")
    for name in fits:
        path, _, _, shape = stores[name]
        if not Path(path).exists():
            print(f"writing {path}", flush=True)
            with local_cluster(memory_limit="4GiB"):
                make_low_rank_zarr(
                    path,
                    shape["n"],
                    shape["d"],
                    rank=shape["rank"],
                    noise=1.0,
                    chunk_rows=shape["chunk_rows"],
                    seed=0,
                )

    idle = {s: idle_cpu(s, args.idle_seconds, "2GiB") for s in SETTINGS}
    times = {name: {s: [] for s in SETTINGS} for name in fits}
    for r in range(rounds):
        order = SETTINGS if r % 2 == 0 else SETTINGS[::-1]
        for name in fits:
            path, memory_limit, fit, _ = stores[name]
            for s in order:
                t = timed_fit(s, path, fit, memory_limit)
                times[name][s].append(t)
                print(f"round {r + 1}: {name} {s} {t:.2f} s", flush=True)

    rows = [
        {
            "what": "idle cluster, CPU s per s",
            "light": idle["light"],
            "dask": idle["dask"],
            "light / dask": idle["light"] / idle["dask"],
        }
    ]
    for name in fits:
        best = {s: min(times[name][s]) for s in SETTINGS}
        mean = {s: sum(times[name][s]) / len(times[name][s]) for s in SETTINGS}
        rows.append(
            {
                "what": f"{name} fit, best of {rounds} (s)",
                **best,
                "light / dask": best["light"] / best["dask"],
            }
        )
        rows.append(
            {
                "what": f"{name} fit, mean of {rounds} (s)",
                **mean,
                "light / dask": mean["light"] / mean["dask"],
            }
        )
    print(
        f"\ncluster.monitoring light / dask, 2 workers × 1 thread, settings "
        f"alternating ({rounds} rounds)"
    )
    print(table(rows, ["what", "light", "dask", "light / dask"]))
    print(
        "written",
        write_json(
            args.results + ("_quick" if args.quick else ""),
            {"rounds": rounds, "idle_cpu_per_s": idle, "fit_s": times, "rows": rows},
        ),
    )


if __name__ == "__main__":
    main()
