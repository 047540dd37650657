"""Wide data (issue 33): passes, time and accuracy of PCA's wide solvers, side by side.

Case ``counts`` (default 200,000 cells × 20,000 genes at 2 %, k = 20; the AnnData zarr
store of ``scalepca make-data --kind counts``, read lazily as CSR row blocks by
anndata): a read pass; scalepca's default ``svd_solver="randomized"`` (block Krylov on
the centred Gram, at most ``n_power_iter + 2`` = 6 passes), the same with ``tol``, the
one-pass ``sketch``, and the previous default (Halko's range finder: a moments pass,
then ``2 + 2 · 4`` passes; the function is kept for RobustPCA), each on a fresh
``LocalCluster`` (peak worker memory per fit). Against them, in client memory:
scikit-learn ``PCA(svd_solver="arpack")`` on the CSR (implicit centring; its eigenpairs
are the reference) and scanpy's ``pp.pca(svd_solver="arpack")``
(``sklearn.utils.extmath.randomized_svd`` refuses an implicitly centred
``LinearOperator``, and the centred matrix in memory is 32 GB); and dask's
``svd_compressed`` (``n_power_iter=4``) of the dense equivalent (blocks densified and
centred lazily) on the cluster. Accuracy: largest relative error of the k eigenvalues
and sine of the largest principal angle between the k-dimensional subspaces, both
against the reference.

Case ``field`` (default 1,000 × 200,000 float64, a low-rank field plus noise in a zarr
store chunked along features, 1,000 × 10,000): the two-pass snapshot method (what
``"auto"`` picks) and the Krylov default against LAPACK's SVD of the centred matrix in
memory.

Case ``dense`` (default 100,000 × 20,000 float32, 8 GB, k = 10; the zarr store of
``scalepca make-data --kind low_rank --dtype float32 --set noise=0.1``, row chunks of
2,000: 10 factors of variance 100 · 0.49^j above a noise bulk near 0.02, so the 10th
eigenvalue stands about 8× above the 11th): a read pass; scalepca's block Krylov
default, the same with ``tol``, the previous default (Halko), and dask's own
``da.linalg.svd_compressed`` (``n_power_iter=4``) on the cluster; ARPACK
(``scipy.sparse.linalg.eigsh`` on the implicitly centred Gram ``XᵀX − n μμᵀ``, the
float32 matrix held in client memory and multiplied slab by slab in float64) is the
reference. dask cannot centre implicitly: the mean is computed first (one compute, one
read) and subtracted lazily, ``X − μ``, so every block is centred as it is read, inside
``svd_compressed``'s graph. Its passes are counted, not assumed: every block read
appends a line to a file, and ``passes = reads / blocks`` (with ``compute calls`` beside
it); the same counter runs under Halko's range finder. dask computes ``svd_compressed``
as one graph, so it may keep the blocks it read in worker memory between its steps
(fewer reads, more memory: compare the peak). Peak worker memory is measured for every
cluster fit.

Prints a table; writes benchmarks/results/wide.json (``wide_quick.json`` with
``--quick``; ``_<case>`` added with ``--only``).

    python benchmarks/wide.py --quick         # 20,000 × 5,000; 300 × 20,000; 20,000 ×
    2,000 python benchmarks/wide.py --only counts --skip dask scanpy # the full sizes,
    each alone (the dense case: an 8 GB store, ARPACK on 8 GB in memory): python
    benchmarks/wide.py --only counts   # 200,000 × 20,000 at 2 % python
    benchmarks/wide.py --only field    # 1,000 × 200,000 python benchmarks/wide.py
    --only dense --workers 2 --memory-limit 6GiB # the dense store alone (what the case
    writes when it is missing): scalepca make-data
    /work/bench-data/dense_100000x20000_f32.zarr --kind low_rank \
        --n-samples 100000 --n-features 20000 --dtype float32 --chunk-rows 2000 \
        --set noise=0.1 --no-progress
"""

from __future__ import annotations

import argparse
import time
import traceback
from pathlib import Path

import numpy as np
from _common import ReadLog, local_cluster, peak_worker_memory, table, write_json
from sparse_counts import lazy_counts, read_pass

import scalepca

METHODS = ("default", "tol", "sketch", "halko", "scanpy", "dask")

CASES = ("counts", "field", "dense")


def ensure_counts(path, n, d, density, chunk_rows, args):
    """The store of ``scalepca make-data --kind counts`` (written once)."""
    if Path(path).exists():
        return
    from scalepca.datasets import make_counts, write_dataset

    print(f"generating {n:,} × {d:,} counts at {density:.0%} ...", flush=True)
    with local_cluster(n_workers=args.workers, memory_limit=args.memory_limit):
        write_dataset(
            make_counts(n, d, density=density, chunk_rows=chunk_rows, seed=0), str(path)
        )


def accuracy(ev, comps, ref_ev, ref_comps, k):
    """(largest relative eigenvalue error, sine of the largest principal angle)."""
    ev = np.asarray(ev[:k], dtype=np.float64)
    err = float(np.max(np.abs(ev - ref_ev[:k]) / ref_ev[:k]))
    C = np.asarray(comps[:k], dtype=np.float64).T
    C, _ = np.linalg.qr(C)
    R = ref_comps[:k].T
    return err, float(np.linalg.norm(C - R @ (R.T @ C), 2))


def halko_fit(X, k, seed=0):
    """The previous default: a moments pass, then the range finder (3 + 2 · 4
    passes)."""
    import dask

    from scalepca.linalg import column_moments_graph
    from scalepca.linalg.decomp import randomized_svd_centered

    (mom,) = dask.compute(column_moments_graph(X))
    s, Vt = randomized_svd_centered(
        X,
        mom["mean"],
        k,
        n_oversamples=10,
        n_power_iter=4,
        seed=np.random.SeedSequence(seed),
    )
    return s**2 / (X.shape[0] - 1), Vt, 3 + 2 * 4


def in_memory_counts(path):
    import anndata
    import zarr

    return anndata.io.read_elem(zarr.open_group(str(path), mode="r")["X"]).astype(
        np.float64
    )


def _run_scalepca(name, path, args, make, rows, res, t_read, pending):
    with local_cluster(
        n_workers=args.workers, memory_limit=args.memory_limit
    ) as client:
        X = lazy_counts(path, args.chunk_rows)
        m = make()  # scalepca's lazy imports happen here, untimed
        t0 = time.perf_counter()
        m.fit(X)
        t = time.perf_counter() - t0
        peak = peak_worker_memory(client)["max"]
    rel_res = getattr(m, "residual_norms_", np.full(1, np.nan)) / m.explained_variance_
    res[name] = {
        "seconds": t,
        "passes": m.n_passes_,
        "x_read": t / t_read,
        "peak_worker_bytes": peak,
        "max_rel_residual": float(rel_res.max()),
        "params": {k: str(v) for k, v in m.get_params().items()},
    }
    rows.append(
        {
            "case": "counts",
            "method": f"scalepca {name}",
            "seconds": t,
            "x read": t / t_read,
            "passes": m.n_passes_,
            "peak worker MiB": peak / 2**20,
        }
    )
    pending.append((res[name], rows[-1], m.explained_variance_, m.components_))


def case_counts(args, rows, out):
    n, d, k = args.n_cells, args.n_genes, args.k
    path = (
        Path(args.data_dir) / f"counts_{n}x{d}_{int(round(args.density * 100))}pct.zarr"
    )
    ensure_counts(path, n, d, args.density, args.chunk_rows, args)
    res = {
        "n": n,
        "d": d,
        "density": args.density,
        "k": k,
        "chunk_rows": args.chunk_rows,
        "store": str(path),
    }
    with local_cluster(n_workers=args.workers, memory_limit=args.memory_limit):
        t_read, nnz = read_pass(lazy_counts(path, args.chunk_rows))
    res.update(read_s=t_read, nnz=nnz)
    rows.append(
        {"case": "counts", "method": "read pass", "seconds": t_read, "x read": 1.0}
    )
    # the cluster fits first: workers forked later would inherit the peak RSS of a
    # client holding the data in memory
    run, pending = set(args.methods) - set(args.skip), []
    fits = {
        "default": lambda: scalepca.PCA(k, svd_solver="randomized", random_state=0),
        "tol": lambda: scalepca.PCA(
            k, svd_solver="randomized", tol=1e-4, n_power_iter=10, random_state=0
        ),
        "sketch": lambda: scalepca.PCA(k, svd_solver="sketch", random_state=0),
    }
    for name, make in fits.items():
        if name in run:
            _guard(
                name,
                rows,
                _run_scalepca,
                name,
                path,
                args,
                make,
                rows,
                res,
                t_read,
                pending,
            )
    if "halko" in run:
        _guard("halko", rows, _halko, path, args, rows, res, t_read, pending)
    Xm = in_memory_counts(path)
    from sklearn.decomposition import PCA as SKPCA

    t0 = time.perf_counter()
    sk = SKPCA(k, svd_solver="arpack", random_state=0).fit(Xm)
    t = time.perf_counter() - t0
    ref = (sk.explained_variance_, sk.components_)
    res["sklearn_arpack"] = {
        "seconds": t,
        "eigenvalues": sk.explained_variance_.tolist(),
    }
    rows.append(
        {
            "case": "counts",
            "method": "sklearn PCA arpack (memory; reference)",
            "seconds": t,
            "x read": t / t_read,
        }
    )
    for entry, row, ev, comps in pending:
        err, sin = accuracy(ev, comps, *ref, k)
        entry.update(eig_err=err, sin=sin)
        row.update({"eig err": err, "sin": sin})
    if "scanpy" in run:
        _guard("scanpy", rows, _scanpy, Xm, args, rows, res, t_read, ref)
    del Xm
    if "dask" in run:
        _guard("dask", rows, _dask_dense, path, args, rows, res, t_read, ref)
    out["counts"] = res


def _guard(name, rows, fn, *fn_args):
    try:
        fn(*fn_args)
    except (
        Exception
    ) as err:  # a comparison that fails is reported, the others still run
        traceback.print_exc()
        rows.append({"case": "-", "method": f"{name}: failed ({type(err).__name__})"})


def _halko(path, args, rows, res, t_read, pending):
    with local_cluster(
        n_workers=args.workers, memory_limit=args.memory_limit
    ) as client:
        X = lazy_counts(path, args.chunk_rows)
        t0 = time.perf_counter()
        ev, Vt, passes = halko_fit(X, args.k)
        t = time.perf_counter() - t0
        peak = peak_worker_memory(client)["max"]
    res["halko_previous_default"] = {
        "seconds": t,
        "passes": passes,
        "x_read": t / t_read,
        "peak_worker_bytes": peak,
    }
    rows.append(
        {
            "case": "counts",
            "method": "scalepca previous default (Halko, q=4)",
            "seconds": t,
            "x read": t / t_read,
            "passes": passes,
            "peak worker MiB": peak / 2**20,
        }
    )
    pending.append((res["halko_previous_default"], rows[-1], ev, Vt))


def _scanpy(Xm, args, rows, res, t_read, ref):
    import anndata
    import scanpy as sc

    ad = anndata.AnnData(Xm)
    t0 = time.perf_counter()
    sc.pp.pca(ad, n_comps=args.k, svd_solver="arpack", zero_center=True, random_state=0)
    t = time.perf_counter() - t0
    ev = ad.uns["pca"]["variance"]
    err, sin = accuracy(ev, ad.varm["PCs"].T, *ref, args.k)
    res["scanpy_arpack"] = {"seconds": t, "eig_err": err, "sin": sin}
    rows.append(
        {
            "case": "counts",
            "method": "scanpy pp.pca arpack (memory)",
            "seconds": t,
            "x read": t / t_read,
            "eig err": err,
            "sin": sin,
        }
    )


def _dense_block(x):
    return x.toarray().astype(np.float64)


def _dask_dense(path, args, rows, res, t_read, ref):
    import dask
    import dask.array as da

    q = 4
    log = ReadLog(args.data_dir, "counts-dask")
    with local_cluster(
        n_workers=args.workers, memory_limit=args.memory_limit
    ) as client:
        X = log.wrap(lazy_counts(path, args.dense_chunk_rows))
        Xd = X.map_blocks(
            _dense_block, dtype=np.float64, meta=np.empty((0, 0), dtype=np.float64)
        )
        t0 = time.perf_counter()
        mu = Xd.mean(axis=0).compute()
        Xc = Xd - da.from_array(mu, chunks=Xd.chunks[1])
        _, s, Vt = da.linalg.svd_compressed(
            Xc, args.k, n_oversamples=10, n_power_iter=q, seed=0
        )
        s, Vt = dask.compute(s, Vt)
        t = time.perf_counter() - t0
        peak = peak_worker_memory(client)["max"]
    err, sin = accuracy(s**2 / (Xd.shape[0] - 1), Vt, *ref, args.k)
    passes = log.passes()  # counted reads (1 + 2q + 2 if every step re-reads the store)
    res["dask_svd_compressed_dense"] = {
        "seconds": t,
        "passes": passes,
        "x_read": t / t_read,
        "eig_err": err,
        "sin": sin,
        "peak_worker_bytes": peak,
    }
    rows.append(
        {
            "case": "counts",
            "method": f"dask svd_compressed, densified X − μ (q={q})",
            "seconds": t,
            "x read": t / t_read,
            "passes": passes,
            "eig err": err,
            "sin": sin,
            "peak worker MiB": peak / 2**20,
        }
    )


# -- a field with far fewer samples than features --------------------------------------
def ensure_field(path, n, d, chunk):
    import dask.array as da

    if Path(path).exists():
        return
    rs = da.random.RandomState(0)
    F = rs.standard_normal((n, 12), chunks=(n, 12)) * (0.8 ** np.arange(12) * 10)
    G = rs.standard_normal((12, d), chunks=(12, chunk))
    X = F @ G + rs.standard_normal((n, d), chunks=(n, chunk)) + 280.0
    da.to_zarr(X, str(path))


def case_field(args, rows, out):
    import dask.array as da
    from scipy import linalg as sla

    n, d, k, chunk = args.field_n, args.field_d, args.k, args.field_chunk
    path = Path(args.data_dir) / f"field_{n}x{d}.zarr"
    ensure_field(path, n, d, chunk)
    res = {"n": n, "d": d, "chunks": [n, chunk], "store": str(path)}
    with local_cluster(n_workers=args.workers, memory_limit=args.memory_limit):
        t0 = time.perf_counter()
        da.from_zarr(str(path)).sum(axis=0).compute()
        t_read = time.perf_counter() - t0
    res["read_s"] = t_read
    rows.append(
        {"case": "field", "method": "read pass", "seconds": t_read, "x read": 1.0}
    )
    Xm = da.from_zarr(str(path)).compute()
    Xm -= Xm.mean(axis=0)
    t0 = (
        time.perf_counter()
    )  # LAPACK's eigh of the n × n Gram in memory (gesdd of the whole
    w, U = sla.eigh(Xm @ Xm.T)  # 1,000 × 200,000 matrix needs more memory than is here)
    w, U = w[::-1][:k], U[:, ::-1][:, :k]
    Vt = (U.T @ Xm) / np.sqrt(w)[:, None]
    t = time.perf_counter() - t0
    del Xm
    ref = (w / (n - 1), Vt)
    res["lapack_reference"] = {"seconds": t}
    rows.append(
        {
            "case": "field",
            "method": "LAPACK eigh of X Xᵀ (memory; reference)",
            "seconds": t,
        }
    )
    for name, solver in (("snapshot (auto)", "auto"), ("randomized", "randomized")):
        with local_cluster(
            n_workers=args.workers, memory_limit=args.memory_limit
        ) as client:
            t0 = time.perf_counter()
            m = scalepca.PCA(k, svd_solver=solver, random_state=0).fit(
                da.from_zarr(str(path))
            )
            t = time.perf_counter() - t0
            peak = peak_worker_memory(client)["max"]
        err, sin = accuracy(m.explained_variance_, m.components_, *ref, k)
        res[name] = {
            "solver": m._fit_svd_solver,
            "seconds": t,
            "passes": m.n_passes_,
            "x_read": t / t_read,
            "eig_err": err,
            "sin": sin,
            "peak_worker_bytes": peak,
        }
        rows.append(
            {
                "case": "field",
                "method": f"scalepca {name}",
                "seconds": t,
                "x read": t / t_read,
                "passes": m.n_passes_,
                "eig err": err,
                "sin": sin,
                "peak worker MiB": peak / 2**20,
            }
        )
    out["field"] = res


# -- a dense float32 store (8 GB at full size) -----------------------------------------
def ensure_dense(path, n, d, chunk_rows):
    """The store of ``scalepca make-data --kind low_rank --dtype float32`` (written
    once, block by block by make-data itself)."""
    if Path(path).exists():
        return
    from scalepca.cli import main as cli

    print(f"generating {n:,} × {d:,} float32 (low rank 10 + noise 0.1) ...", flush=True)
    rc = cli(
        [
            "make-data",
            str(path),
            "--kind",
            "low_rank",
            "--n-samples",
            str(n),
            "--n-features",
            str(d),
            "--dtype",
            "float32",
            "--chunk-rows",
            str(chunk_rows),
            "--set",
            "noise=0.1",
            "--no-progress",
            "-q",
        ]
    )
    if rc:
        raise RuntimeError(f"make-data failed ({rc})")


def arpack_dense(X32, k, slab=2_000):
    """ARPACK's top-k eigenpairs of the implicitly centred Gram of the in-memory float32
    ``X32``, products in float64 slab by slab (never a centred or float64 copy of X)."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    n, d = X32.shape
    mu = X32.mean(axis=0, dtype=np.float64)

    def gram(v):
        v = np.asarray(v, dtype=np.float64).reshape(d)
        out = np.zeros(d)
        for i in range(0, n, slab):
            x = X32[i : i + slab].astype(np.float64)
            out += x.T @ (x @ v)
        return out - n * mu * (mu @ v)

    w, V = eigsh(
        LinearOperator((d, d), matvec=gram, dtype=np.float64),
        k=k,
        which="LA",
        tol=1e-12,
    )
    order = np.argsort(w)[::-1]
    return w[order] / (n - 1), V[:, order].T


def _dense_svd_compressed(X, k, q, log):
    """dask's svd_compressed of ``X − μ`` (centred lazily; the mean one compute
    before)."""
    import dask
    import dask.array as da

    Xr = log.wrap(X)
    mu = Xr.mean(axis=0, dtype=np.float64).compute()  # compute call 1 (one read)
    Xc = Xr.astype(np.float64) - da.from_array(mu, chunks=Xr.chunks[1])
    _, s, Vt = da.linalg.svd_compressed(Xc, k, n_oversamples=10, n_power_iter=q, seed=0)
    s, Vt = dask.compute(s, Vt)  # compute call 2
    return s**2 / (X.shape[0] - 1), Vt, 2


def _dense_halko(X, k, log):
    ev, Vt, _ = halko_fit(log.wrap(X), k)
    return ev, Vt, None


def _dense_fit(name, path, args, rows, res, t_read, pending):
    """One cluster fit of the dense case, its passes (n_passes_ or reads counted),
    time and peak worker memory; accuracy filled in later against ARPACK."""
    k, q = args.dense_k, 4
    fits = {
        "default": lambda: scalepca.PCA(k, svd_solver="randomized", random_state=0),
        "tol": lambda: scalepca.PCA(
            k, svd_solver="randomized", tol=1e-4, n_power_iter=10, random_state=0
        ),
    }
    with local_cluster(
        n_workers=args.workers, memory_limit=args.memory_limit
    ) as client:
        X = scalepca.open_matrix(str(path))
        log = None if name in fits else ReadLog(args.data_dir, name)
        t0 = time.perf_counter()
        if name in fits:
            m = fits[name]().fit(X)
            ev, comps, calls, passes = (
                m.explained_variance_,
                m.components_,
                None,
                m.n_passes_,
            )
        elif name == "halko":
            ev, comps, calls = _dense_halko(X, k, log)
        else:
            ev, comps, calls = _dense_svd_compressed(X, k, q, log)
        t = time.perf_counter() - t0
        peak = peak_worker_memory(client)["max"]
    if name not in fits:
        passes = log.passes()
    label = {
        "halko": "scalepca previous default (Halko, q=4)",
        "dask": f"dask svd_compressed of X − μ (q={q})",
    }.get(name, f"scalepca {name}")
    res[name] = {
        "seconds": t,
        "passes": passes,
        "compute_calls": calls,
        "x_read": t / t_read,
        "peak_worker_bytes": peak,
    }
    rows.append(
        {
            "case": "dense",
            "method": label,
            "seconds": t,
            "x read": t / t_read,
            "passes": passes,
            "peak worker MiB": peak / 2**20,
        }
    )
    pending.append((res[name], rows[-1], ev, comps))


def case_dense(args, rows, out):
    import dask.array as da

    n, d, k = args.dense_n, args.dense_d, args.dense_k
    path = Path(args.data_dir) / f"dense_{n}x{d}_f32.zarr"
    ensure_dense(path, n, d, args.dense_store_rows)
    res = {
        "n": n,
        "d": d,
        "dtype": "float32",
        "k": k,
        "store": str(path),
        "chunks": [list(c[:1]) for c in scalepca.open_matrix(str(path)).chunks],
    }
    with local_cluster(n_workers=args.workers, memory_limit=args.memory_limit):
        t0 = time.perf_counter()
        scalepca.open_matrix(str(path)).sum(axis=0, dtype=np.float64).compute()
        t_read = time.perf_counter() - t0
    res["read_s"] = t_read
    rows.append(
        {"case": "dense", "method": "read pass", "seconds": t_read, "x read": 1.0}
    )
    # the cluster fits first (see case_counts), then ARPACK in client memory
    pending = []
    for name in ("default", "tol", "halko", "dask"):
        if name in set(args.methods) - set(args.skip):
            _guard(name, rows, _dense_fit, name, path, args, rows, res, t_read, pending)
    X32 = da.from_zarr(str(path)).compute()
    t0 = time.perf_counter()
    ref = arpack_dense(X32, k)
    t = time.perf_counter() - t0
    del X32
    res["arpack_reference"] = {"seconds": t, "eigenvalues": ref[0].tolist()}
    rows.append(
        {
            "case": "dense",
            "method": "ARPACK eigsh, centred Gram (memory; reference)",
            "seconds": t,
            "x read": t / t_read,
        }
    )
    for entry, row, ev, comps in pending:
        err, sin = accuracy(ev, comps, *ref, k)
        entry.update(eig_err=err, sin=sin)
        row.update({"eig err": err, "sin": sin})
    out["dense"] = res


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--n-cells", type=int, default=200_000)
    ap.add_argument("--n-genes", type=int, default=20_000)
    ap.add_argument("--density", type=float, default=0.02)
    ap.add_argument("--chunk-rows", type=int, default=10_000)
    ap.add_argument(
        "--dense-chunk-rows",
        type=int,
        default=2_000,
        help="row blocks of the densified matrix given to dask's svd_compressed",
    )
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--field-n", type=int, default=1_000)
    ap.add_argument("--field-d", type=int, default=200_000)
    ap.add_argument("--field-chunk", type=int, default=10_000)
    ap.add_argument("--dense-n", type=int, default=100_000, help="case dense: samples")
    ap.add_argument("--dense-d", type=int, default=20_000, help="case dense: features")
    ap.add_argument("--dense-k", type=int, default=10, help="case dense: components")
    ap.add_argument(
        "--dense-store-rows",
        type=int,
        default=2_000,
        help="case dense: rows per stored chunk (make-data --chunk-rows)",
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="4GiB", help="per worker")
    ap.add_argument("--data-dir", default="/work/bench-data")
    ap.add_argument("--only", choices=CASES, default=None)
    ap.add_argument("--methods", nargs="*", default=list(METHODS), choices=METHODS)
    ap.add_argument("--skip", nargs="*", default=[], choices=METHODS)
    args = ap.parse_args(argv)
    if args.quick:
        args.n_cells, args.n_genes, args.chunk_rows = 20_000, 5_000, 2_000
        args.field_n, args.field_d, args.field_chunk = 300, 20_000, 2_000
        args.dense_n, args.dense_d, args.dense_store_rows = 20_000, 2_000, 2_000
    Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    rows, out = (
        [],
        {"k": args.k, "workers": args.workers, "memory_limit": args.memory_limit},
    )
    if args.only in (None, "counts"):
        case_counts(args, rows, out)
    if args.only in (None, "field"):
        case_field(args, rows, out)
    if args.only in (None, "dense"):
        case_dense(args, rows, out)
    print(
        table(
            rows,
            [
                "case",
                "method",
                "seconds",
                "x read",
                "passes",
                "eig err",
                "sin",
                "peak worker MiB",
            ],
        )
    )
    name = ("wide_quick" if args.quick else "wide") + (
        "" if args.only is None else f"_{args.only}"
    )
    print(f"wrote {write_json(name, out)}")


if __name__ == "__main__":
    main()
