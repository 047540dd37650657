"""A store grown by 5 %: ``scalepca run --update`` (the new rows only) against a full
refit and scikit-learn's ``IncrementalPCA`` over the same batches (issue 34).

The store: ``--size`` (default 4GB) of float64 ``low_rank`` data (``make_low_rank``,
rank 20, 256 features), written as its first 1/1.05 share of rows; a first
``scalepca run`` fits it (model, scores), then the remaining rows (5 % more) are
appended along the samples, as a store that grows. Timed, on LocalCluster(n_workers=2,
threads_per_worker=1):

* ``run --update``: the previous model updated with the new rows (its sketch re-read,
  one pass over the new rows, their scores appended, the model saved) — wall time of the
  command and its fit;
* ``run`` of the grown store from scratch (full refit: one pass over every row, every
  score);
* scikit-learn's ``IncrementalPCA`` fed the store's chunks in order on the client (the
  same batches): the time of the new batches only (after the old ones) and of all of
  them.

Accuracy of each model against LAPACK (``numpy.linalg.eigh``) of the full covariance of
the grown store (its moments by a dask reduction): the largest relative error of the top
10 eigenvalues, and the sine of the largest principal angle between the top-10 subspaces
(``sin_angle``) and between the top-5 ones, the components well above the noise
(``sin_angle_5``). Timings on a shared machine are noisy; the accuracy is not.

    python benchmarks/update.py                  # the 4 GB store (2,000,000 × 256 after
    growth) python benchmarks/update.py --quick          # 200 MB (a smoke test)

Writes ``benchmarks/results/update.json`` (``update_quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import dask.array as da
import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import common_args, local_cluster, table, write_json  # noqa: E402

K, D, GROWTH = 10, 256, 0.05
#: components above the noise floor of the data (factor variances 100 · 0.49^j + 1): the
#: subspace of the top SIGNAL is well separated; components 7-10 lie near the noise bulk
SIGNAL = 5


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--size", default="4GB", help="bytes of the grown store (default 4GB)"
    )
    ap.add_argument(
        "--chunk-rows",
        type=int,
        default=None,
        help="rows per store chunk (default 50,000; 10,000 with --quick)",
    )
    common_args(ap, memory_limit="4GiB", quick="200MB store, 10,000-row chunks")
    args = ap.parse_args(argv)
    if args.quick:
        args.size = "200MB"
    if args.chunk_rows is None:
        args.chunk_rows = 10_000 if args.quick else 50_000
    return args


def _grow(path: str, n0: int, n1: int, chunk_rows: int) -> float:
    """Write the first ``n0`` rows (a first store), or cut the store back to them."""
    import zarr

    from scalepca.datasets import make_low_rank, write_dataset

    data = make_low_rank(n1, D, rank=20, noise=1.0, chunk_rows=chunk_rows, seed=0)
    if Path(path).exists():
        zarr.open_array(path, mode="r+").resize((n0, D))
    else:
        write_dataset(data[:n0], path, codec="zstd")
    return data


def _append(path: str, data, n0: int) -> None:
    """Append rows ``n0 …`` of ``data`` to the store, chunk-aligned, from the
    workers."""
    import zarr

    z = zarr.open_array(path, mode="r+")
    z.resize(data.shape)
    new = data[n0:].rechunk({0: z.chunks[0]})
    da.store(new, z, regions=(slice(n0, data.shape[0]), slice(None)), lock=False)


def _config(folder: Path, data: str, out: str) -> Path:
    cfg = {
        "data": {"path": data},
        "model": {"method": "pca", "n_components": K, "svd_solver": "covariance_eigh"},
        "output": {"store": str(folder / out), "report": False},
    }
    path = folder / f"{out}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(cfg: Path, address: str, *more) -> float:
    from scalepca.cli import EXIT_OK, main

    t0 = time.perf_counter()
    rc = main(["run", str(cfg), "--scheduler", address, "-q", "--no-progress", *more])
    assert rc == EXIT_OK, f"scalepca run {' '.join(more)} failed ({rc})"
    return time.perf_counter() - t0


def reference(path: str) -> tuple[np.ndarray, np.ndarray]:
    """LAPACK's eigenpairs of the store's covariance (moments reduced by dask, eigh
    here)."""
    X = da.from_zarr(path)
    n = X.shape[0]
    mean = X.mean(axis=0).compute()
    C = ((X - mean).T @ (X - mean)).compute() / (n - 1)
    w, V = np.linalg.eigh(C)
    return w[::-1][:K], V[:, ::-1][:, :K].T


def accuracy(ev, comps, ref_ev, ref_v) -> dict:
    from scipy.linalg import subspace_angles

    comps = np.asarray(comps)
    angle = float(np.max(subspace_angles(comps.T, ref_v.T)))
    signal = float(np.max(subspace_angles(comps[:SIGNAL].T, ref_v[:SIGNAL].T)))
    return {
        "eig_err": float(np.max(np.abs(np.asarray(ev)[:K] / ref_ev - 1))),
        "sin_angle": float(np.sin(angle)),
        "sin_angle_5": float(np.sin(signal)),
    }


def incremental_pca(path: str, n0: int) -> tuple[dict, object]:
    """scikit-learn's IncrementalPCA fed the store's chunks: the old ones, then the
    new."""
    import zarr
    from sklearn.decomposition import IncrementalPCA

    z = zarr.open_array(path, mode="r")
    step = z.chunks[0]
    ipca = IncrementalPCA(n_components=K)
    t0 = time.perf_counter()
    for lo in range(0, n0, step):
        ipca.partial_fit(z[lo : min(lo + step, n0)])
    t_old = time.perf_counter() - t0
    t0 = time.perf_counter()
    for lo in range(n0, z.shape[0], step):
        ipca.partial_fit(z[lo : min(lo + step, z.shape[0])])
    t_new = time.perf_counter() - t0
    return {"new_s": t_new, "all_s": t_old + t_new}, ipca


def main(argv=None):
    from dask.utils import parse_bytes

    import scalepca

    args = parse_args(argv)
    n1 = parse_bytes(args.size) // (D * 8)
    n0 = int(round(n1 / (1 + GROWTH)))
    folder = Path(args.data_dir) / f"update_{n1}x{D}"
    folder.mkdir(parents=True, exist_ok=True)
    path = str(folder / "data.zarr")
    print(
        f"store {n0:,} → {n1:,} rows × {D} float64 ({n1 * D * 8 / 1e9:.2f} GB after "
        f"growing by {n1 - n0:,} rows), {args.chunk_rows:,}-row chunks",
        flush=True,
    )
    rows = []
    with local_cluster(
        n_workers=2, threads_per_worker=1, memory_limit=args.memory_limit
    ) as client:
        address = client.scheduler.address
        data = _grow(path, n0, n1, args.chunk_rows)
        upd_cfg, full_cfg = _config(folder, path, "out"), _config(folder, path, "refit")
        t_first = _run(upd_cfg, address)  # the previous run, on the first n0 rows
        _append(path, data, n0)
        t_update = _run(upd_cfg, address, "--update")
        updated = scalepca.load(folder / "out" / "model.zarr")
        t_full = _run(full_cfg, address)
        refit = scalepca.load(folder / "refit" / "model.zarr")
        ref_ev, ref_v = reference(path)
    ipca_t, ipca = incremental_pca(path, n0)
    same = float(np.max(np.abs(updated.components_ - refit.components_)))
    rows.append(
        {
            "method": "scalepca run --update (new rows)",
            "rows read": n1 - n0,
            "run s": t_update,
            "fit s": updated.fit_time_,
            "passes": updated.n_passes_,
            **accuracy(updated.explained_variance_, updated.components_, ref_ev, ref_v),
        }
    )
    rows.append(
        {
            "method": "scalepca run (full refit)",
            "rows read": n1,
            "run s": t_full,
            "fit s": refit.fit_time_,
            "passes": refit.n_passes_,
            **accuracy(refit.explained_variance_, refit.components_, ref_ev, ref_v),
        }
    )
    acc = accuracy(ipca.explained_variance_, ipca.components_, ref_ev, ref_v)
    rows.append(
        {
            "method": "sklearn IncrementalPCA (new batches)",
            "rows read": n1 - n0,
            "fit s": ipca_t["new_s"],
            **acc,
        }
    )
    rows.append(
        {
            "method": "sklearn IncrementalPCA (all batches)",
            "rows read": n1,
            "fit s": ipca_t["all_s"],
            **acc,
        }
    )
    columns = [
        "method",
        "rows read",
        "run s",
        "fit s",
        "passes",
        "eig_err",
        "sin_angle",
        "sin_angle_5",
    ]
    print(table(rows, columns))
    print(f"update vs refit: max |Δ component| {same:.2e}; first run {t_first:.1f} s")
    out = write_json(
        "update_quick" if args.quick else "update",
        {
            "n_before": n0,
            "n_after": n1,
            "n_features": D,
            "k": K,
            "chunk_rows": args.chunk_rows,
            "size": args.size,
            "cluster": "LocalCluster(n_workers=2, threads_per_worker=1)",
            "first_run_s": t_first,
            "update_vs_refit_max_component_diff": same,
            "rows": rows,
            "command": " ".join(
                ["python", "benchmarks/update.py", *(argv or sys.argv[1:])]
            ),
        },
    )
    print(f"written: {out}")


if __name__ == "__main__":
    main()
