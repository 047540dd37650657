"""``svd_solver="auto"`` against every solver it could have chosen, side by side.

On the benchmark shapes (tall dense, wide sparse counts, an n ≪ d field in column
strips, PLINK genotypes), each solver that can run there fits ``PCA(n_components=10)``
in turn, ``auto`` among them, the solvers interleaved repeat by repeat so that a load on
the machine falls on all of them alike; the table gives each one's median seconds, its
time over the best candidate's, and the seconds :mod:`scalepca.solvers.choice`
predicted. The target: ``auto`` at most 1.25× the best candidate on every shape.
``sketch`` (one pass, an estimate of its own error) is timed for reference but is not a
candidate of ``auto``.

    python benchmarks/solver_auto.py                  # every shape
    python benchmarks/solver_auto.py --shapes geno4k  # one shape
    python benchmarks/solver_auto.py --probe          # the rates of the cost model
    python benchmarks/solver_auto.py --shapes geno50k --scale 0.02 --out /tmp/check
                                                      # a tiny check of the run

A solver whose predicted seconds are more than :data:`SKIP_FACTOR` times the best
prediction on a shape is not timed (at 50,000 × 20,000 genotypes the Gram solvers
would take hours): its row gives its prediction and why it was skipped. The JSON is
written after every shape, with the provenance of the code it measured.

Solvers that cannot hold their matrices there (a d × d Gram past 4,096 features, an
n × n one past 4,096 samples) are not run: ``auto`` never chooses them, and they would
need tens of GB (their predicted seconds are listed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import dask.array as da
import numpy as np
import scipy.sparse as sp
from _common import local_cluster, table, write_json
from _provenance import provenance

import scalepca
from scalepca.models.pca import spectral_problem
from scalepca.solvers.choice import REGISTRY, choose, predicted_seconds

K = 10
#: a candidate predicted this many times slower than the best prediction is not timed
SKIP_FACTOR = 10.0
SOLVERS = ["auto", *REGISTRY]
COLUMNS = ["shape", "solver", "ran", "seconds", "x best", "passes", "predicted s"]


def _counts_block(block_info=None, *, d, density):
    loc = block_info[None]["array-location"][0]
    rows = loc[1] - loc[0]
    rng = np.random.default_rng(loc[0])
    nnz = int(rows * d * density)
    values = rng.poisson(2.0, nnz).astype(np.float32) + 1
    return sp.csr_matrix(
        (values, (rng.integers(0, rows, nnz), rng.integers(0, d, nnz))), shape=(rows, d)
    )


def tall_dense(args):
    X = da.random.default_rng(0).standard_normal((200_000, 100), chunks=(25_000, 100))
    return X.persist(), "200,000 × 100 dense float64, 8 row blocks, in memory"


def wide_sparse(args):
    n, d, rows = 5_000, 50_000, 1_250
    X = da.map_blocks(
        _counts_block,
        d=d,
        density=0.05,
        dtype=np.float32,
        chunks=((rows,) * (n // rows), (d,)),
        meta=sp.csr_matrix((0, 0), dtype=np.float32),
    )
    return (
        X.persist(),
        "5,000 × 50,000 counts, 5 % stored (CSR), 4 row blocks, in memory",
    )


def field(args):
    X = da.random.default_rng(1).standard_normal((500, 50_000), chunks=(500, 5_000))
    return X.persist(), "500 × 50,000 dense float64 field, 10 column strips, in memory"


def _bed(args, n, d):
    path = Path(args.data_dir) / f"g{n}x{d}.bed"
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: scalepca make-data {path} --kind genotypes "
            f"--n-samples {n} --n-features {d} --dtype int8 --set "
            "n_populations=5 --set fst=0.1 --set missing=0.01 --seed 0"
        )
    return scalepca.open_matrix(path), f"{n:,} × {d:,} genotypes (.bed, 1 % missing)"


def _scaled(args, n, d):
    """``n`` × ``d`` times ``--scale`` (a quick check of the run on small data)."""
    return max(int(n * args.scale), 50), max(int(d * args.scale), 50)


SHAPES = {
    "tall": (tall_dense, {}),
    "sparse": (wide_sparse, {}),
    "field": (field, {}),
    "geno4k": (
        lambda a: _bed(a, *_scaled(a, 4000, 20000)),
        {"standardize": "genotype"},
    ),
    "geno50k": (
        lambda a: _bed(a, *_scaled(a, 50000, 20000)),
        {"standardize": "genotype"},
    ),
}


def _problem(X, kw):
    arr = getattr(X, "data", X)
    n, d = arr.shape
    params = {
        "n_components": K,
        "standardize": kw.get("standardize", False),
        "n_oversamples": 10,
        "n_power_iter": 4,
    }
    return spectral_problem(params, n, d, arr)


def _fit_seconds(X, solver, kw) -> tuple[float, str, int]:
    model = scalepca.PCA(K, svd_solver=solver, random_state=0, **kw)
    t0 = time.perf_counter()
    model.fit(X)
    return time.perf_counter() - t0, model.solver_, model.n_passes_


def run_shape(name, args) -> tuple[list[dict], dict]:
    make, kw = SHAPES[name]
    X, what = make(args)
    problem = _problem(X, kw)
    auto = choose(problem)
    predicted = {s: predicted_seconds(s, problem) for s in REGISTRY}
    can_run = [
        s
        for s in REGISTRY
        if REGISTRY[s].fits(problem)
        and not (REGISTRY[s].dense and problem.sparse)
        and not (problem.genotype and REGISTRY[s].once)
    ]  # a one-pass solver refuses missing calls
    floor = min(predicted[s] for s in can_run)
    skipped = {
        s: f"not run (predicted {predicted[s]:.3g} s, over {SKIP_FACTOR:g}× the best "
        f"prediction {floor:.3g} s)"
        for s in can_run
        if predicted[s] > SKIP_FACTOR * floor and s != auto.solver
    }
    runnable = [s for s in can_run if s not in skipped]
    order = ["auto", *runnable]
    times = {s: [] for s in order}
    meta = {}
    repeat = args.repeat if name != "geno50k" else 1
    if repeat > 1:  # warm-up: imports, worker caches (one fit of many is negligible)
        _fit_seconds(X, auto.solver, kw)
    for rep in range(repeat):
        for solver in order[rep % len(order) :] + order[: rep % len(order)]:
            seconds, ran, n_passes = _fit_seconds(X, solver, kw)
            times[solver].append(seconds)
            meta[solver] = {"solver_": ran, "passes": n_passes}
            print(f"  {name}: {solver} {seconds:.2f} s ({n_passes} passes)", flush=True)
    med = {s: statistics.median(t) for s, t in times.items()}
    candidates = [s for s in runnable if REGISTRY[s].auto]
    best = min(candidates, key=lambda s: med[s])
    rows = []
    for solver in SOLVERS:
        row = {
            "shape": name,
            "solver": solver,
            "predicted s": (
                predicted[auto.solver] if solver == "auto" else predicted[solver]
            ),
        }
        if solver in med:
            row.update(
                {
                    "seconds": med[solver],
                    "x best": med[solver] / med[best],
                    "passes": meta[solver]["passes"],
                    "ran": meta[solver]["solver_"],
                }
            )
        elif solver in skipped:
            row["ran"] = skipped[solver]
        else:
            row["ran"] = (
                "not run (refuses missing calls)"
                if REGISTRY[solver].once and problem.genotype
                else "not run (matrix too large)"
            )
        rows.append(row)
    out = {
        "what": what,
        "problem": problem.__dict__,
        "auto_chose": auto.solver,
        "why": auto.why,
        "best_candidate": best,
        "auto_over_best": med["auto"] / med[best],
        "times": times,
        "predicted": predicted,
        "passes": {s: m["passes"] for s, m in meta.items()},
        "skipped": skipped,
    }
    return rows, out


def _write(args, payload: dict) -> Path:
    """The result with its provenance, in ``benchmarks/results`` or ``--out`` (a
    check's file, never a result: it stays out of the results)."""
    if args.out is None:
        return write_json("solver_auto", payload)
    path = Path(args.out) / "solver_auto.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {**payload, "provenance": provenance("solver_auto")}
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data-dir", default="/work/bench-data-solverauto")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--scale", type=float, default=1.0, help="genotype shapes' n and d times this"
    )
    ap.add_argument(
        "--out", default=None, help="folder of the JSON (default benchmarks/results)"
    )
    ap.add_argument(
        "--probe", action="store_true", help="measure the cost model's rates"
    )
    args = ap.parse_args(argv)
    with local_cluster(n_workers=2, threads_per_worker=1, memory_limit="4GiB"):
        if args.probe:
            from _solver_probe import probe

            bed = Path(args.data_dir) / "g4000x20000.bed"
            print(probe(bed if bed.exists() else None))
            return
        rows, results = [], {}
        for name in args.shapes.split(","):
            shape_rows, results[name] = run_shape(name, args)
            rows += shape_rows
            print(table(shape_rows, COLUMNS), flush=True)
            # written after every shape: a long run stopped keeps what it measured
            path = _write(
                args,
                {
                    "k": K,
                    "workers": "2 × 1 thread",
                    "repeat": args.repeat,
                    "scale": args.scale,
                    "skip_factor": SKIP_FACTOR,
                    "shapes": results,
                    "rows": rows,
                },
            )
    print(table(rows, COLUMNS))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
