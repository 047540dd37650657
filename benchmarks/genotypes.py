"""PCA of PLINK genotypes, the wide workload of issue 33 item 7.

A Balding–Nichols simulation (``scalepca make-data --kind genotypes``: K populations at
F_ST = 0.1, 1 % missing calls), default 100,000 samples × 100,000 SNPs (2.5 GB packed),
is written once under ``--data-dir`` by ``scalepca make-data`` in a child process (its
peak memory is reported: the generator computes two blocks of 1,000 SNPs at a time and
writes them SNP by SNP, so it grows with the samples, not the SNPs — measured 538 MB at
20,000 × 2,000 and 582 MB at 20,000 × 12,000; 1.6 GB at 100,000 × 2,000), and read
lazily by ``scalepca.open_matrix`` (bed-reader ranged reads, float32, row blocks of
about 128 MiB). On ``LocalCluster(n_workers=2, threads_per_worker=1)``:

* a read pass: the column sums of the float32 matrix (every block decoded once);
* ``PCA(n_components=10, standardize="genotype")`` with ``--solver`` (default ``auto``:
  above 4,096 SNPs the snapshot method up to 4,096 samples — the quick size — and block
  Krylov above — the full size; both with the genotype map inside their per-block
  products); its passes (``n_passes_``), its time and its time over the read pass, the
  peak worker memory;
* the population labels of the .fam recovered by the nearest population centroid on the
  top K − 1 PCs (accuracy), and with ``--quick`` the eigenvalues against the dense NumPy
  PCA of the standardised matrix.

``--passes``: one Krylov pass over the float blocks and one read packed
(:mod:`scalepca.linalg.packed`) against a read pass, interleaved ``--rounds`` times.
``--compare``: scalepca (``--solver``; and with ``tol`` set from the accuracy plink2
reaches) beside ``plink2 --pca approx``, smartpca and, with ``--exact-plink``, the exact
``plink2 --pca``, each in a child process on 2 cores (wall time, peak RSS of its process
tree), against the exact eigenpairs of the relationship matrix by NumPy (cached next to
the .bed): subspace sines of the top 4 and top 10 sample PCs, eigenvalue errors.

    python benchmarks/genotypes.py --passes --n 10000 --d 40000
    # every tool at 10,000 × 40,000 (the exact plink2 and smartpca stopped after
    # --slow-timeout seconds; the NumPy reference is cached next to the .bed)
    python benchmarks/genotypes.py --compare --exact-plink --n 10000 --d 40000

sgkit (dask genetics, PCA through dask-ml) is compared only if it is installed: its
requirements (dask ≤ 2024.8, zarr < 3 when this was written) conflict with scalepca's,
so it is not installed into the project's environment (the JSON says so).

    python benchmarks/genotypes.py --quick     # 2,000 × 5,000
    # full size (2.5 GB .bed; generating it takes about an hour on 2 busy cores):
    python benchmarks/genotypes.py --n-samples 100000 --n-snps 100000
    # the .bed alone, as the script writes it:
    scalepca make-data /work/bench-data/genotypes_100000x100000.bed --kind genotypes \
        --n-samples 100000 --n-features 100000 --dtype int8 --set n_populations=5 \
        --set fst=0.1 --set missing=0.01 --no-progress
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _common import common_args, local_cluster, peak_worker_memory, table, write_json

import scalepca

K = 10


def make_data_command(path: Path, args) -> list[str]:
    """The ``scalepca make-data`` command that writes the .bed (int8 blocks: the
    fastest)."""
    return [
        sys.executable,
        "-m",
        "scalepca.cli",
        "make-data",
        str(path),
        "--kind",
        "genotypes",
        "--n-samples",
        str(args.n_samples),
        "--n-features",
        str(args.n_snps),
        "--dtype",
        "int8",
        "--set",
        f"n_populations={args.populations}",
        "--set",
        f"fst={args.fst}",
        "--set",
        f"missing={args.missing}",
        "--seed",
        "0",
        "--overwrite",
        "--no-progress",
    ]


def ensure_bed(path: Path, args) -> tuple[float | None, int | None]:
    """Write the .bed by ``scalepca make-data`` in a child process if it is absent; the
    seconds it took and the child's peak RSS in bytes (None, None: it was there)."""
    from scalepca.datasets import dataset_complete

    if dataset_complete(str(path)):
        return None, None
    t0 = time.perf_counter()
    subprocess.run(make_data_command(path, args), check=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return time.perf_counter() - t0, peak


def centroid_accuracy(T: np.ndarray, labels: np.ndarray, n_pop: int) -> float:
    """Share of samples whose nearest population centroid (top K − 1 PCs) is their
    own."""
    names = np.unique(labels)
    cent = np.stack([T[labels == p].mean(axis=0) for p in names])
    pred = names[np.argmin(((T[:, None, :] - cent[None]) ** 2).sum(axis=2), axis=1)]
    return float(np.mean(pred == labels))


def dense_eigenvalues(path) -> np.ndarray:
    """Eigenvalues of the standardised matrix by dense NumPy (quick sizes only)."""
    X = scalepca.open_matrix(path, dtype="float64").values
    calls = (~np.isnan(X)).sum(axis=0)
    p = np.nansum(X, axis=0) / np.maximum(calls, 1) / 2
    keep = (calls > 0) & (p > 0) & (p < 1)
    Z = (X[:, keep] - 2 * p[keep]) / np.sqrt(2 * p[keep] * (1 - p[keep]))
    Z[np.isnan(Z)] = 0
    s = np.linalg.svd(Z - Z.mean(axis=0), compute_uv=False)
    return s[:K] ** 2 / (len(Z) - 1)


def sgkit_status() -> str:
    try:
        import sgkit  # noqa: F401
    except ImportError:
        return (
            "not installed: `pip install sgkit` resolves to "
            "dask<=2024.8.0 and zarr<3, which would downgrade "
            "scalepca's environment (dask 2026.8, zarr 3); not run"
        )
    return "installed (comparison not implemented in this script)"


def run(args) -> dict:
    path = Path(args.data_dir) / f"genotypes_{args.n_samples}x{args.n_snps}.bed"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_s, write_peak = ensure_bed(path, args)
    size = path.stat().st_size
    print(
        f"{path}: {size / 1e9:.2f} GB"
        + (
            f", written in {write_s:.0f} s, make-data peak "
            f"RSS {write_peak / 1e6:.0f} MB"
            if write_s
            else ""
        )
    )
    rows, out = (
        [],
        {
            "n_samples": args.n_samples,
            "n_snps": args.n_snps,
            "k": K,
            "populations": args.populations,
            "fst": args.fst,
            "missing": args.missing,
            "bed_bytes": size,
            "write_s": write_s,
            "make_data_peak_rss_bytes": write_peak,
            "workers": args.workers,
            "memory_limit": args.memory_limit,
            "sgkit": sgkit_status(),
        },
    )
    with local_cluster(
        n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit
    ) as client:
        A = scalepca.open_matrix(path)
        out["chunks"] = {
            "row_blocks": len(A.chunks[0]),
            "rows_per_block": A.chunks[0][0],
            "column_blocks": len(A.chunks[1]),
        }
        t0 = time.perf_counter()
        A.data.sum(axis=0).compute()
        read_s = time.perf_counter() - t0
        rows.append(
            {
                "step": "read pass (float32 column sums)",
                "seconds": read_s,
                "x read": 1.0,
                "passes": 1,
            }
        )
        model = scalepca.PCA(
            K, standardize="genotype", svd_solver=args.solver, random_state=0
        )
        t0 = time.perf_counter()
        model.fit(A)
        fit_s = time.perf_counter() - t0
        peak = peak_worker_memory(client)["max"]
        t0 = time.perf_counter()
        T = model.transform(A).values
        transform_s = time.perf_counter() - t0
        acc = centroid_accuracy(
            T[:, : args.populations - 1], np.asarray(A["fid"].values), args.populations
        )
        rows.append(
            {
                "step": f"PCA(k={K}, standardize='genotype'), {model.solver_}",
                "seconds": fit_s,
                "x read": fit_s / read_s,
                "passes": model.n_passes_,
                "peak worker MB": peak / 1e6,
                "population accuracy": acc,
            }
        )
        rows.append(
            {
                "step": "transform (scores of all samples)",
                "seconds": transform_s,
                "x read": transform_s / read_s,
                "passes": 1,
            }
        )
        out.update(
            read_s=read_s,
            fit_s=fit_s,
            fit_over_read=fit_s / read_s,
            n_passes=model.n_passes_,
            solver=model.solver_,
            peak_worker_bytes=peak,
            transform_s=transform_s,
            population_accuracy=acc,
            n_monomorphic=model.n_monomorphic_,
            explained_variance=model.explained_variance_.tolist(),
        )
    if args.quick:
        ev = dense_eigenvalues(path)
        err = np.abs(model.explained_variance_ - ev) / ev
        out["eigenvalue_rel_err_vs_dense"] = err.tolist()
        rows[1]["ev rel err (max)"] = float(err.max())
        # the structured components (K − 1 populations); the rest lie in the noise bulk
        rows[1]["ev rel err (top K-1)"] = float(err[: args.populations - 1].max())
    out["rows"] = rows
    print(
        table(
            rows,
            [
                "step",
                "seconds",
                "x read",
                "passes",
                "peak worker MB",
                "population accuracy",
                "ev rel err (top K-1)",
                "ev rel err (max)",
            ],
        )
    )
    print(f"sgkit: {out['sgkit']}")
    return out


# -- side by side with plink2 and smartpca (issue 49 item 1) ---------------------------
def exact_reference(path: Path) -> dict:
    """The top-K eigenpairs of the relationship matrix ``Z Zᵀ / M`` (``Z`` the n × M
    standardised genotypes of the M polymorphic SNPs, a missing call 0) by NumPy:
    ``Z Zᵀ`` summed over strips of 1,000 SNPs in float64, then LAPACK's ``eigh`` of its
    top K. Cached next to the .bed (``.reference.npz``): minutes at 10,000 samples."""
    cache = path.with_suffix(".reference.npz")
    if cache.exists():
        got = np.load(cache)
        return {k: got[k] for k in got.files}
    import bed_reader
    from scipy import linalg as sla

    t0 = time.perf_counter()
    with bed_reader.open_bed(path) as bed:
        n, d = bed.iid_count, bed.sid_count
        G, used = np.zeros((n, n)), 0
        for a in range(0, d, 1000):
            X = bed.read(index=np.s_[:, a : a + 1000], dtype="float64")
            calls = (~np.isnan(X)).sum(axis=0)
            p = np.nansum(X, axis=0) / np.maximum(calls, 1) / 2
            keep = (calls > 0) & (p > 0) & (p < 1)
            Z = (X[:, keep] - 2 * p[keep]) / np.sqrt(2 * p[keep] * (1 - p[keep]))
            Z[np.isnan(Z)] = 0.0
            G += Z @ Z.T
            used += int(keep.sum())
    w, U = sla.eigh(G, subset_by_index=[n - K, n - 1])
    out = {
        "eigval": w[::-1] / used,
        "eigvec": U[:, ::-1],
        "snps_used": np.array(used),
        "seconds": np.array(time.perf_counter() - t0),
    }
    np.savez(cache, **out)
    return out


def subspace_sine(A: np.ndarray, B: np.ndarray) -> float:
    """Sine of the largest principal angle between the column spaces of A and B."""
    qa, qb = np.linalg.qr(A)[0], np.linalg.qr(B)[0]
    return float(np.linalg.norm(qb - qa @ (qa.T @ qb), 2))


def accuracy(
    vectors: np.ndarray, values: np.ndarray | None, ref: dict, populations: int
) -> dict:
    """Subspace sines of the top ``populations − 1`` (the structure) and top K sample
    PCs against the exact ones, and the largest relative error of the top K
    eigenvalues (in the relationship matrix's units)."""
    s = populations - 1
    out = {
        f"sine top {s}": subspace_sine(ref["eigvec"][:, :s], vectors[:, :s]),
        f"sine top {K}": subspace_sine(ref["eigvec"], vectors[:, :K]),
    }
    if values is not None:
        err = np.abs(np.asarray(values[:K]) - ref["eigval"]) / ref["eigval"]
        out[f"ev rel err top {s}"] = float(err[:s].max())
        out[f"ev rel err top {K}"] = float(err.max())
    return out


def measured(cmd: list[str], log: Path, timeout: float | None = None) -> dict:
    """Run ``cmd`` to its end: wall seconds and the peak of the summed RSS of its whole
    process tree (polled every 0.1 s: workers and threads' processes included). After
    ``timeout`` seconds the tree is stopped and ``stopped`` set."""
    import psutil

    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        top, peak = psutil.Process(proc.pid), 0
        while proc.poll() is None:
            try:
                tree = [top, *top.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree))
            except psutil.Error:
                pass
            if timeout is not None and time.perf_counter() - t0 > timeout:
                for p in reversed(tree):
                    with contextlib.suppress(psutil.Error):
                        p.kill()
                proc.wait()
                return {
                    "seconds": time.perf_counter() - t0,
                    "peak MB": peak / 1e6,
                    "stopped": True,
                }
            time.sleep(0.1)
    if proc.returncode:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}); see {log}")
    return {"seconds": time.perf_counter() - t0, "peak MB": peak / 1e6}


def scalepca_child(argv: list[str]) -> None:
    """In a child process (so its memory is measured like the other tools'): fit
    ``PCA(K, standardize="genotype")`` on 2 workers × 1 thread, the samples' PCs as
    PLINK's eigenvectors (a transform pass), written to an .npz."""
    path, out, tol, workers, solver = (*argv[:2], float(argv[2]), int(argv[3]), argv[4])
    from scalepca.io._bed import plink_pca

    with local_cluster(n_workers=workers, threads_per_worker=1, memory_limit="4GiB"):
        A = scalepca.open_matrix(path)
        t0 = time.perf_counter()
        model = scalepca.PCA(
            K, standardize="genotype", tol=tol, svd_solver=solver, random_state=0
        ).fit(A)
        fit_s = time.perf_counter() - t0
        vectors, values = plink_pca(model, model.transform(A).data)
        vectors = vectors.compute()
    np.savez(
        out,
        eigvec=np.asarray(vectors),
        eigval=np.asarray(values),
        fit_s=fit_s,
        passes=model.n_passes_,
        solver=model.solver_,
        residuals=np.asarray(getattr(model, "residual_norms_", np.full(K, np.nan))),
    )


def run_scalepca(path: Path, work: Path, tol: float, args, name: str) -> dict:
    out = work / f"{name}.npz"
    cmd = [
        sys.executable,
        __file__,
        "--child-scalepca",
        str(path),
        str(out),
        repr(tol),
        str(args.workers),
        args.solver,
    ]
    got = measured(cmd, work / f"{name}.log")
    res = np.load(out)
    got.update(
        eigvec=res["eigvec"],
        eigval=res["eigval"],
        passes=int(res["passes"]),
        solver=str(res["solver"]),
        fit_s=float(res["fit_s"]),
    )
    return got


def _read_plink(prefix: Path) -> tuple[np.ndarray, np.ndarray]:
    vec = np.loadtxt(f"{prefix}.eigenvec", comments="#", usecols=range(2, 2 + K))
    return vec, np.loadtxt(f"{prefix}.eigenval")


def run_plink2(
    path: Path, work: Path, threads: int, approx: bool, timeout: float | None = None
) -> dict:
    name = "plink2_approx" if approx else "plink2_exact"
    prefix = work / name
    cmd = [
        "plink2",
        "--bfile",
        str(path.with_suffix("")),
        "--pca",
        *(["approx"] * approx),
        str(K),
        "--threads",
        str(threads),
        "--out",
        str(prefix),
    ]
    got = measured(cmd, work / f"{name}.stdout", timeout)
    if not got.get("stopped"):
        got["eigvec"], got["eigval"] = _read_plink(prefix)
    return got


def run_smartpca(
    path: Path, work: Path, threads: int, timeout: float | None = None
) -> dict:
    """smartpca (EIGENSOFT) with ``numthreads`` and no outlier removal (its default
    removes outliers over 5 iterations, which the other tools do not)."""
    stem = path.with_suffix("")
    par = work / "smartpca.par"
    par.write_text(
        "".join(
            f"{k}: {v}\n"
            for k, v in {
                "genotypename": path,
                "snpname": f"{stem}.bim",
                "indivname": f"{stem}.fam",
                "evecoutname": work / "smartpca.evec",
                "evaloutname": work / "smartpca.eval",
                "numoutevec": K,
                "numoutlieriter": 0,
                "numthreads": threads,
            }.items()
        )
    )
    got = measured(
        ["/usr/lib/eigensoft/smartpca", "-p", str(par)], work / "smartpca.log", timeout
    )
    if got.get("stopped"):
        return got
    got["eigvec"] = np.loadtxt(
        work / "smartpca.evec", comments="#", usecols=range(1, 1 + K)
    )
    # smartpca's eigenvalues sum to the samples less one over all axes; its top K are
    # compared after scaling by the exact reference's top one (a unit, not an accuracy)
    got["eigval"] = np.loadtxt(work / "smartpca.eval")[:K]
    return got


def compare(path: Path, args) -> dict:
    """Every tool on the same .bed and 2 cores, the fast ones interleaved over
    ``--rounds`` rounds (times as medians and as ratios to plink2's approximation in the
    same round), the slow ones once; accuracy against :func:`exact_reference`."""
    import shutil

    work = path.parent / f"compare_{path.stem}_{args.solver}"
    work.mkdir(exist_ok=True)
    ref = exact_reference(path)
    print(f"exact reference: {float(ref['seconds']):.0f} s (NumPy GRM + eigh, cached)")
    label = (
        "scalepca default"
        if args.solver == "auto"
        else f"scalepca svd_solver={args.solver}"
    )
    tools = {
        label: lambda: run_scalepca(path, work, 0.0, args, "scalepca_default"),
        "plink2 --pca approx": lambda: run_plink2(path, work, args.workers, True),
    }
    results: dict[str, list] = {name: [] for name in tools}
    for _ in range(args.rounds):
        for name, go in tools.items():
            results[name].append(go())
            print(name, round(results[name][-1]["seconds"], 1), "s")
    # tol from the accuracy plink2 reaches: a relative residual tol bounds the sine of
    # each structured PC by about tol · λ₁ / (λ_s − λ_{s+1}) (sin ≤ ‖r‖ / gap)
    s = args.populations - 1
    plink_sine = accuracy(
        results["plink2 --pca approx"][0]["eigvec"], None, ref, args.populations
    )[f"sine top {s}"]
    ev = ref["eigval"]
    tol = float(plink_sine * (ev[s - 1] - ev[s]) / ev[0])
    name = f"{label}, tol={tol:.1e}"
    results[name] = []
    for _ in range(args.rounds):
        results[name].append(run_scalepca(path, work, tol, args, "scalepca_tol"))
        results["plink2 --pca approx"].append(
            run_plink2(path, work, args.workers, True)
        )
        print(name, round(results[name][-1]["seconds"], 1), "s")
    if shutil.which("smartpca") and not args.no_smartpca:
        results["smartpca (numthreads 2)"] = [
            run_smartpca(path, work, args.workers, args.slow_timeout)
        ]
    if args.exact_plink:
        results["plink2 --pca (exact)"] = [
            run_plink2(path, work, args.workers, False, args.slow_timeout)
        ]
    approx = np.array([r["seconds"] for r in results["plink2 --pca approx"]])
    # each scalepca run against the plink2 run next to it (same round, same load)
    paired = {label: approx[: args.rounds], name: approx[args.rounds :]}
    rows = []
    for name, runs in results.items():
        last = runs[-1]
        if last.get("stopped"):
            rows.append(
                {
                    "tool": name,
                    "seconds (median)": last["seconds"],
                    "runs": 1,
                    "peak MB": last["peak MB"],
                    "passes": "stopped",
                }
            )
            continue
        values = last["eigval"]
        if name.startswith("smartpca"):  # its own unit: scaled to the reference's top
            values = values * ev[0] / values[0]
        secs = np.array([r["seconds"] for r in runs])
        row = {
            "tool": name,
            "seconds (median)": float(np.median(secs)),
            "runs": len(runs),
            "peak MB": max(r["peak MB"] for r in runs),
            "passes": last.get("passes", ""),
            "fit s (in process)": last.get("fit_s", ""),
            **accuracy(last["eigvec"], values, ref, args.populations),
        }
        pair = paired.get(name)
        row["x plink2 approx"] = float(
            np.median(secs / pair)
            if pair is not None
            else np.median(secs) / np.median(approx)
        )
        rows.append(row)
    print(table(rows, list(rows[0])))
    return {
        "reference_s": float(ref["seconds"]),
        "tol_from_plink2": tol,
        "rows": rows,
        "seconds_per_run": {k: [r["seconds"] for r in v] for k, v in results.items()},
        "solver": results[label][-1]["solver"],
    }


# -- one Krylov pass against one read pass (issue 49 item 2) --------------------------
def pass_ratios(path: Path, args) -> dict:
    """Interleaved rounds of: a read pass (float32 column sums), one pass of the Gram
    operator over the float blocks (decode to float32, centre and fill in a float64
    slab, two float32 products: the path every Krylov pass took before the packed
    kernel) and the same pass read packed (:mod:`scalepca.linalg.packed`), with the
    block of 20 columns of a k = 10 fit. Medians and the ratio of each pass to the read
    pass of its own round (the machine is shared: ratios in one round, not times across
    runs)."""
    import dask.array as da

    from scalepca.io._bed import packed_blocks
    from scalepca.linalg.krylov import gram_times
    from scalepca.linalg.packed import PackedRows
    from scalepca.linalg.scaling import ColumnScaling

    rounds = []
    with local_cluster(
        n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit
    ):
        X = scalepca.open_matrix(path).data
        calls, total = da.compute((~da.isnan(X)).sum(axis=0), da.nansum(X, axis=0))
        p = total / np.maximum(calls, 1) / 2.0
        keep = (calls > 0) & (p > 0) & (p < 1)
        scaling = ColumnScaling(2 * p[keep], np.sqrt(2 * p[keep] * (1 - p[keep])))
        rng = np.random.default_rng(0)
        V = np.linalg.qr(rng.standard_normal((keep.sum(), 2 * K)))[0]
        floats = X[:, keep]
        packed = PackedRows(
            *packed_blocks(X, keep), shape=(X.shape[0], int(keep.sum()))
        )
        steps = {
            "read": lambda: X.sum(axis=0).compute(),
            "float pass": lambda: gram_times(floats, V, None, scaling=scaling),
            "packed pass": lambda: gram_times(packed, V, None, scaling=scaling),
        }
        steps["packed pass"]()  # numba compiles (cached on disk) in each worker
        for _ in range(args.rounds):
            times = {}
            for name, step in steps.items():
                t0 = time.perf_counter()
                step()
                times[name] = time.perf_counter() - t0
            rounds.append(times)
            print({k: round(v, 2) for k, v in times.items()})
    out = {"rounds": rounds}
    for name in ("float pass", "packed pass"):
        ratios = [r[name] / r["read"] for r in rounds]
        out[f"{name} / read"] = {
            "median": float(np.median(ratios)),
            "min": float(np.min(ratios)),
            "max": float(np.max(ratios)),
        }
    out["median_s"] = {k: float(np.median([r[k] for r in rounds])) for k in steps}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common_args(ap, memory_limit="4GiB", quick="2,000 × 5,000 (a smoke test)")
    ap.add_argument("--n-samples", "--n", type=int, default=100_000)
    ap.add_argument("--n-snps", "--d", type=int, default=100_000)
    ap.add_argument("--populations", type=int, default=5)
    ap.add_argument("--fst", type=float, default=0.1)
    ap.add_argument("--missing", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--solver",
        default="auto",
        choices=["auto", "randomized", "snapshot", "sketch", "tsqr"],
        help="PCA's svd_solver (auto: block Krylov above 4,096 samples)",
    )
    ap.add_argument(
        "--passes",
        action="store_true",
        help="time a Krylov pass (float blocks, then packed) against a "
        "read pass, interleaved --rounds times, and stop",
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--compare",
        action="store_true",
        help="scalepca beside plink2 --pca approx, smartpca and (with "
        "--exact-plink) plink2 --pca, against an exact reference",
    )
    ap.add_argument(
        "--exact-plink",
        action="store_true",
        help="also run the exact plink2 --pca (long: over 16 min at 10,000 × 40,000)",
    )
    ap.add_argument("--no-smartpca", action="store_true")
    ap.add_argument(
        "--slow-timeout",
        type=float,
        default=900,
        help="seconds after which smartpca and the exact plink2 are stopped",
    )
    if argv is None and sys.argv[1:2] == ["--child-scalepca"]:
        return scalepca_child(sys.argv[2:])
    args = ap.parse_args(argv)
    if args.quick:
        args.n_samples, args.n_snps = 2_000, 5_000
    if args.compare:
        path = Path(args.data_dir) / f"genotypes_{args.n_samples}x{args.n_snps}.bed"
        ensure_bed(path, args)
        load_before = os.getloadavg()
        got = compare(path, args)
        out = {
            "n_samples": args.n_samples,
            "n_snps": args.n_snps,
            "k": K,
            "populations": args.populations,
            "missing": args.missing,
            "workers": args.workers,
            "threads": args.workers,
            # the times are only comparable on a quiet machine: the load it had
            "load_average_1_5_15": {"before": load_before, "after": os.getloadavg()},
            **got,
        }
        name = f"genotypes_peers_{args.n_samples}x{args.n_snps}" + (
            "" if args.solver == "auto" else f"_{args.solver}"
        )
        print(f"wrote {write_json(name, out)}")
        return
    if args.passes:
        path = Path(args.data_dir) / f"genotypes_{args.n_samples}x{args.n_snps}.bed"
        ensure_bed(path, args)
        out = {
            "n_samples": args.n_samples,
            "n_snps": args.n_snps,
            "block": 2 * K,
            "workers": args.workers,
            **pass_ratios(path, args),
        }
        name = f"genotypes_passes_{args.n_samples}x{args.n_snps}"
        print(f"wrote {write_json(name, out)}")
        return
    out = run(args)
    out["solver_asked"] = args.solver
    path = write_json(
        ("genotypes_quick" if args.quick else "genotypes")
        + ("" if args.solver == "auto" else f"_{args.solver}"),
        out,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
