"""EOF + varimax + a 100-replicate bootstrap of a gridded field, scalepca against xeofs
(issue 37's benchmark).

The store: a float32 zarr store ``field(time, lat, lon)``, default 10,000 × 360 × 720
(10.4 GB; xeofs' dask docs fit 5,000 × 720 × 360 float64, the same bytes), a smooth
rank-10 field (products of cosines in latitude and longitude, each with a sinusoid of
its own period in time, amplitudes 10 · 0.8^r) plus unit Gaussian noise seeded per
block. It is written once under ``--data-dir`` block by block by the cluster
(``--layout space``, the default: every time step of a tile of latitudes per chunk,
about ``--chunk-mib`` each, the layout in which the n × n sample Gram — n ≪ d — reads
each chunk once; ``--layout time``: whole maps of ``--chunk-time`` steps, as a model
writes them). The store is complete when the file ``<store>.complete`` beside it exists.

On a ``LocalCluster(--workers, 1 thread, --memory-limit)``, a fresh one per step (so
that the peak worker memory is the step's):

* the bare read pass: the sum over time of the store's array (each chunk decoded once);
* scalepca: ``open_matrix(weights="sqrt_coslat")`` (√cos φ), ``PCA(--modes)`` with
  ``svd_solver="auto"`` (the snapshot method for n ≤ d, else the covariance), then
  ``Rotator`` (varimax; reads nothing), then
  ``BootstrapEOF(--modes, n_bootstraps=100)``; and **the whole job in one estimator's
  passes**: ``BootstrapEOF`` gives the EOFs (equal to PCA's, checked) and the 100
  replicates in its two passes, and ``Rotator`` rotates its EOFs with no read. Passes
  are ``n_passes_`` and counted reads (every block read of the matrix appends a line to
  a file: ``reads / blocks``);
* xeofs on the same store, on a cluster of the same size:
  ``xeofs.single.EOF(use_coslat=True)`` (its ``solver="auto"``), ``EOFRotator``
  (varimax) and ``validation.EOFBootstrapper`` with ``--xeofs-bootstraps`` replicates
  (default 5: each refits the EOFs), whose time and reads are **extrapolated** linearly
  to 100 replicates and labelled so; reads counted the same way, spilled bytes reported.
  xeofs runs in this interpreter if it imports, else in a ``/tmp/*/bin/python`` that has
  it (a subprocess of this script, ``--xeofs-part``), else not.

Accuracy: scalepca's explained variance ratios and EOF subspace (sine of the largest
principal angle) against xeofs'.

Prints a table; writes benchmarks/results/climate.json (``climate_quick.json`` with
``--quick``).

    python benchmarks/climate.py --quick --workers 2 --memory-limit 1GiB   # 500 × 90 ×
    180 # the issue's 10 GB (10,000 × 360 × 720 float32; the store is written first,
    block by # block by the cluster), on workers large enough for the n × n Gram's
    merges: python benchmarks/climate.py --workers 4 --memory-limit 6GiB # xeofs' docs'
    shape (5,000 × 360 × 720, 5.2 GB as float32) on its docs' 4 × 3 GB workers: python
    benchmarks/climate.py --n-time 5000 --workers 4 --memory-limit 3GiB # some steps
    only (read, pca, job, xeofs); the others from their last run on the store: python
    benchmarks/climate.py --steps pca

Memory: BootstrapEOF's (and PCA's snapshot) first pass merges n × n float64 partials,
8 n² bytes each, at most ``gram_fan_in(n)`` at a time (2 GiB of partials in a merge):
800 MB each at n = 10,000, merged two by two (2.4 GB with the sum); 200 MB and four
at a time at n = 5,000. The replicate EOFs of the second pass stay within 128 MiB per
strip. xeofs' memory is what it is (spilled bytes are reported).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import ReadLog, peak_worker_memory, spilled_bytes, table, write_json

VAR = "field"
#: amplitude of mode r: 10 · 0.8^r; (latitude wavenumber, longitude wavenumber, period)
RANK = 10
MODES = [(1 + r % 4, 1 + (r * 3) % 7, 12.0 + 7.3 * r) for r in range(RANK)]
NOISE = 1.0
N_BOOT = 100


# -- the store -------------------------------------------------------------------------
def grid(n_lat: int, n_lon: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell-centre latitudes (south to north) and longitudes, degrees."""
    dlat, dlon = 180.0 / n_lat, 360.0 / n_lon
    return -90 + dlat * (np.arange(n_lat) + 0.5), dlon * np.arange(n_lon)


def field_block(block_info=None, *, shape, seed: int):
    """One block of the field: the rank-10 signal at the block's cells and times plus
    noise drawn from the seed and the block's position (the same values for any
    worker)."""
    (t0, t1), (a0, a1), (b0, b1) = block_info[None]["array-location"]
    lat, lon = grid(shape[1], shape[2])
    phi, lam = np.deg2rad(lat[a0:a1]), np.deg2rad(lon[b0:b1])
    t = np.arange(t0, t1, dtype=np.float64)
    out = np.zeros((t1 - t0, a1 - a0, b1 - b0))
    for r, (l, m, period) in enumerate(MODES):
        amp = 10.0 * 0.8**r * np.sin(2 * np.pi * t / period + r)
        pattern = np.cos(l * phi + 0.3 * r)[:, None] * np.cos(m * lam + r)[None, :]
        out += amp[:, None, None] * pattern[None]
    rng = np.random.default_rng([seed, t0, a0, b0])
    out += NOISE * rng.standard_normal(out.shape)
    return out.astype(np.float32)


def store_chunks(args) -> tuple[int, int, int]:
    """Chunk shape of the store: ``space`` (all times, whole latitude rows, about
    ``--chunk-mib``) or ``time`` (``--chunk-time`` whole maps)."""
    nt, nlat, nlon = args.n_time, args.n_lat, args.n_lon
    if args.layout == "time":
        return min(args.chunk_time, nt), nlat, nlon
    rows = max(1, int(args.chunk_mib * 2**20) // (4 * nt * nlon))
    return nt, min(rows, nlat), nlon


def ensure_store(path: Path, args) -> float | None:
    """Write the store (on a fresh cluster, block by block) unless it is complete; the
    seconds it took (None: it was there)."""
    import dask.array as da
    import xarray as xr

    done = path.with_name(path.name + ".complete")
    if done.exists():
        return None
    shape = (args.n_time, args.n_lat, args.n_lon)
    chunks = store_chunks(args)
    lat, lon = grid(args.n_lat, args.n_lon)
    data = da.map_blocks(
        field_block,
        chunks=da.core.normalize_chunks(chunks, shape),
        dtype=np.float32,
        meta=np.empty((0, 0, 0), np.float32),
        shape=shape,
        seed=0,
    )
    ds = xr.Dataset(
        {VAR: (("time", "lat", "lon"), data)},
        coords={"time": np.arange(args.n_time), "lat": lat, "lon": lon},
    )
    print(
        f"writing {path} ({np.prod(shape) * 4 / 1e9:.2f} GB, chunks {chunks}) ...",
        flush=True,
    )
    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    with cluster(args):
        ds.to_zarr(tmp, mode="w", encoding={VAR: {"chunks": chunks}})
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)
    done.write_text("")
    return time.perf_counter() - t0


def cluster(args):
    """A fresh ``LocalCluster`` + ``Client`` (plain distributed: the xeofs subprocess
    may run where scalepca is not installed)."""
    from contextlib import ExitStack

    from distributed import Client, LocalCluster

    stack = ExitStack()
    lc = stack.enter_context(
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            memory_limit=args.memory_limit,
            dashboard_address=None,
            local_directory=tempfile.gettempdir(),
        )
    )
    stack.enter_context(Client(lc))
    return stack


def current_client():
    from distributed import default_client

    return default_client()


# -- steps -----------------------------------------------------------------------------
def read_pass(path: Path, args) -> dict:
    """The bare read: the time sum of the store's array, every chunk read once."""
    import dask.array as da

    with cluster(args):
        arr = da.from_zarr(str(path), component=VAR)
        t0 = time.perf_counter()
        arr.sum(axis=0, dtype=np.float64).compute()
        seconds = time.perf_counter() - t0
        peak = peak_worker_memory(current_client())["max"]
    return {"seconds": seconds, "blocks": arr.npartitions, "peak_worker_bytes": peak}


def _matrix(path: Path, log: ReadLog):
    """The weighted (time × cell) matrix of the store, every block read logged."""
    import scalepca

    X = scalepca.open_matrix(
        str(path), variable=VAR, sample_dims="time", weights="sqrt_coslat"
    )
    return X.copy(data=log.wrap(X.data))


def on_grid(components) -> np.ndarray:
    """EOFs over (mode, lat, lon) as a (mode × cell) array in the store's cell order."""
    c = components.transpose("mode", "lat", "lon").values
    return c.reshape(c.shape[0], -1)


def scalepca_eof(path: Path, args) -> dict:
    """PCA (auto) and its varimax rotation, as a user runs them."""
    import scalepca

    with cluster(args):
        log = ReadLog(args.scratch, "pca")
        X = _matrix(path, log)
        t0 = time.perf_counter()
        pca = scalepca.PCA(args.modes, svd_solver="auto").fit(X)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rot = scalepca.Rotator(args.modes).fit(pca)
        rot_s = time.perf_counter() - t0
        peak = peak_worker_memory(current_client())["max"]
    return {
        "solver": pca._fit_svd_solver,
        "seconds": fit_s,
        "rotation_s": rot_s,
        "n_passes": pca.n_passes_,
        "read_passes": log.passes(),
        "blocks": log.blocks,
        "peak_worker_bytes": peak,
        "explained_variance_ratio": pca.explained_variance_ratio_.tolist(),
        "_components": on_grid(pca.components_xr_),
        "_rotated": on_grid(rot.components_xr_),
    }


def scalepca_job(path: Path, args) -> dict:
    """The whole job in the bootstrap's passes: BootstrapEOF (EOFs and 100
    replicates) and the varimax rotation of its EOFs."""
    import scalepca
    from scalepca.analysis.bootstrap import BootstrapEOF

    with cluster(args):
        log = ReadLog(args.scratch, "bootstrap")
        X = _matrix(path, log)
        t0 = time.perf_counter()
        boot = BootstrapEOF(args.modes, n_bootstraps=N_BOOT, random_state=0).fit(X)
        boot_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rot = scalepca.Rotator(args.modes).fit(boot)
        rot_s = time.perf_counter() - t0
        peak = peak_worker_memory(current_client())["max"]
    ratios = boot.explained_variance_ratio_samples_[:, 0]
    return {
        "solver": boot.solver_,
        "seconds": boot_s,
        "rotation_s": rot_s,
        "n_passes": boot.n_passes_,
        "read_passes": log.passes(),
        "blocks": log.blocks,
        "peak_worker_bytes": peak,
        "n_significant": boot.n_significant_,
        "explained_variance_ratio": boot.explained_variance_ratio_.tolist(),
        "ratio_interval": boot.explained_variance_ratio_interval_.tolist(),
        "mode1_ratio_replicates_mean_std": [float(ratios.mean()), float(ratios.std())],
        "_components": on_grid(boot.components()),
        "_rotated": on_grid(rot.components_xr_),
    }


def _delta(log: ReadLog, before: float) -> float:
    return log.count() - before


def xeofs_part(path: Path, args, out_npz: str) -> dict:
    """xeofs' EOF, EOFRotator and EOFBootstrapper on the store, reads counted per
    step; the components go to ``out_npz`` (they may be large for JSON)."""
    import xarray as xr
    import xeofs as xe

    k, B = args.modes, args.xeofs_bootstraps
    res = {"version": xe.__version__, "n_bootstraps": B}
    with cluster(args):
        arr = xr.open_zarr(str(path))[VAR]
        log = ReadLog(args.scratch, "xeofs")
        X = arr.copy(data=log.wrap(arr.data))
        model = xe.single.EOF(n_modes=k, use_coslat=True, random_state=0)
        rot = xe.single.EOFRotator(n_modes=k, power=1)
        bs = xe.validation.EOFBootstrapper(n_bootstraps=B, seed=0)
        for name, step in (
            ("eof", lambda: model.fit(X, dim="time")),
            ("rotator", lambda: rot.fit(model)),
            ("bootstrapper", lambda: bs.fit(model)),
        ):
            before, t0 = log.count(), time.perf_counter()
            step()
            res[name] = {
                "seconds": time.perf_counter() - t0,
                "read_passes": _delta(log, before),
            }
        client = current_client()
        res["peak_worker_bytes"] = peak_worker_memory(client)["max"]
        res["spilled_bytes"] = spilled_bytes(client)
        log.passes()
        res["solver"] = str(getattr(model, "_params", {}).get("solver", "auto"))
        res["explained_variance_ratio"] = (
            model.explained_variance_ratio().values.tolist()
        )
        ratios = (
            (bs.data["explained_variance"] / bs.data["total_variance"])
            .transpose("n", "mode")
            .values
        )
        res["mode1_ratio_replicates_mean_std"] = [
            float(ratios[:, 0].mean()),
            float(ratios[:, 0].std()),
        ]
        comps = model.components().transpose("mode", "lat", "lon").values.reshape(k, -1)
        rotated = rot.components().transpose("mode", "lat", "lon").values.reshape(k, -1)
    np.savez(out_npz, components=comps, rotated=rotated)
    return res


def xeofs_python() -> str | None:
    """This interpreter if xeofs imports here, else a ``/tmp/*/bin/python`` that has
    xeofs, zarr and distributed, else None."""
    try:
        import xeofs  # noqa: F401

        return sys.executable
    except ImportError:
        pass
    for py in sorted(glob.glob("/tmp/*/bin/python")):
        probe = subprocess.run(
            [py, "-c", "import xeofs, zarr, distributed"], capture_output=True
        )
        if probe.returncode == 0:
            return py
    return None


def run_xeofs(path: Path, args) -> tuple[dict | None, dict | None]:
    """xeofs' steps (in this interpreter or a subprocess of another) and its
    components."""
    py = xeofs_python()
    if py is None or args.skip_xeofs:
        return None, None
    npz = str(Path(args.scratch) / "xeofs_components.npz")
    if py == sys.executable:
        res = xeofs_part(path, args, npz)
    else:
        out = Path(args.scratch) / "xeofs.json"
        cmd = [
            py,
            __file__,
            "--xeofs-part",
            "--store",
            str(path),
            "--out",
            str(out),
            *sys.argv[1:],
        ]
        print(f"xeofs in {py} (a subprocess)", flush=True)
        subprocess.run(cmd, check=True)
        res = json.loads(out.read_text())
    res["python"] = py
    with np.load(npz) as f:
        return res, {"components": f["components"], "rotated": f["rotated"]}


# -- comparison and report -------------------------------------------------------------
def subspace_sin(A: np.ndarray, B: np.ndarray) -> float:
    """Sine of the largest principal angle between the row spaces of ``A`` and ``B``."""
    Qa, Qb = np.linalg.qr(A.T)[0], np.linalg.qr(B.T)[0]
    s = np.linalg.svd(Qa.T @ Qb, compute_uv=False)
    return float(np.sqrt(max(0.0, 1.0 - s.min() ** 2)))


def signed_diff(A: np.ndarray, B: np.ndarray) -> float:
    """Largest |A − B| over rows, each row of A signed to match B's."""
    sign = np.sign(np.nansum(A * B, axis=1))[:, None]
    return float(np.nanmax(np.abs(A * sign - B)))


def compare(eof: dict, job: dict, xe: dict | None, xcomp: dict | None) -> dict:
    """Agreement of the bootstrap's EOFs with PCA's, and of scalepca with xeofs."""
    out = {
        "bootstrap_vs_pca_eofs_max_abs": signed_diff(
            job["_components"], eof["_components"]
        ),
        "rotated_bootstrap_vs_pca_max_abs": signed_diff(
            job["_rotated"], eof["_rotated"]
        ),
    }
    if xe is not None:
        ours, theirs = (
            np.array(eof["explained_variance_ratio"]),
            np.array(xe["explained_variance_ratio"]),
        )
        out["ratio_max_rel_diff_vs_xeofs"] = float(
            np.max(np.abs(ours - theirs) / theirs)
        )
        out["eof_subspace_sin_vs_xeofs"] = subspace_sin(
            eof["_components"], xcomp["components"]
        )
        out["rotated_subspace_sin_vs_xeofs"] = subspace_sin(
            eof["_rotated"], xcomp["rotated"]
        )
        # the spread of the leading mode's ratio over the replicates (xeofs: few
        # replicates)
        out["mode1_ratio_sd_scalepca"] = job["mode1_ratio_replicates_mean_std"][1]
        out["mode1_ratio_sd_xeofs"] = xe["mode1_ratio_replicates_mean_std"][1]
    return out


def rows_of(
    read: dict, eof: dict, job: dict, xe: dict | None, modes: int
) -> list[dict]:
    """The table's rows (times over the read pass; passes: n_passes_ and reads /
    blocks)."""
    r = read["seconds"]
    mib = 2**20

    def row(step, seconds, passes, reads, peak, spilled=None):
        return {
            "step": step,
            "seconds": seconds,
            "x read": seconds / r,
            "n_passes_": passes,
            "reads/blocks": reads,
            "peak worker MiB": peak / mib if peak else None,
            "spilled MB": None if spilled is None else spilled / 1e6,
        }

    rows = [
        row("read pass (time sum of the store)", r, 1, 1.0, read["peak_worker_bytes"])
    ]
    rows.append(
        row(
            f"scalepca PCA({modes}), {eof['solver']} + varimax",
            eof["seconds"] + eof["rotation_s"],
            eof["n_passes"],
            eof["read_passes"],
            eof["peak_worker_bytes"],
        )
    )
    rows.append(
        row(
            f"scalepca BootstrapEOF(B={N_BOOT}, {job['solver']}) "
            "+ varimax of its EOFs: the whole job",
            job["seconds"] + job["rotation_s"],
            job["n_passes"],
            job["read_passes"],
            job["peak_worker_bytes"],
        )
    )
    rows.append(
        row(
            "scalepca as separate estimators (PCA + varimax + BootstrapEOF)",
            eof["seconds"] + eof["rotation_s"] + job["seconds"],
            eof["n_passes"] + job["n_passes"],
            eof["read_passes"] + job["read_passes"],
            None,
        )
    )
    if xe is None:
        return rows
    B = xe["n_bootstraps"]
    for name, label in (
        ("eof", f"xeofs EOF({modes})"),
        ("rotator", "xeofs EOFRotator"),
        ("bootstrapper", f"xeofs EOFBootstrapper(B={B}), measured"),
    ):
        rows.append(
            row(
                label,
                xe[name]["seconds"],
                None,
                xe[name]["read_passes"],
                xe["peak_worker_bytes"] if name == "eof" else None,
                xe["spilled_bytes"] if name == "eof" else None,
            )
        )
    scale = N_BOOT / B
    boot_s, boot_reads = (
        xe["bootstrapper"]["seconds"] * scale,
        xe["bootstrapper"]["read_passes"] * scale,
    )
    rows.append(
        row(
            f"xeofs EOFBootstrapper(B={N_BOOT}), EXTRAPOLATED ×{scale:g}",
            boot_s,
            None,
            boot_reads,
            None,
        )
    )
    rows.append(
        row(
            f"xeofs whole job (EOF + rotator + B={N_BOOT}), EXTRAPOLATED",
            xe["eof"]["seconds"] + xe["rotator"]["seconds"] + boot_s,
            None,
            xe["eof"]["read_passes"] + xe["rotator"]["read_passes"] + boot_reads,
            None,
        )
    )
    return rows


class StepCache:
    """Each step's result kept beside the store (``<store>.steps/<step>.pkl``), so
    that a run of some ``--steps`` reports the others from their last run (named in
    the JSON's ``steps_from_earlier_runs`` with the time they were measured)."""

    def __init__(self, store: Path, wanted: str):
        self.dir = store.with_name(store.name + ".steps")
        self.wanted = {s.strip() for s in wanted.split(",")}
        self.reused = {}

    def run(self, name: str, step):
        import pickle

        f = self.dir / f"{name}.pkl"
        if name not in self.wanted:
            if not f.exists():  # never run on this store: the report waits for it
                return None
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(f.stat().st_mtime))
            self.reused[name] = when
            return pickle.loads(f.read_bytes())
        res = step()
        self.dir.mkdir(exist_ok=True)
        f.write_bytes(pickle.dumps(res))
        return res


def _xeofs_step(path: Path, args) -> dict | None:
    res, comps = run_xeofs(path, args)
    return None if res is None else {"res": res, "_comps": comps}


def run(args) -> dict:
    path = Path(args.data_dir) / (
        f"climate_{args.n_time}x{args.n_lat}x{args.n_lon}_{args.layout}.zarr"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_s = ensure_store(path, args)
    out = {
        "shape": [args.n_time, args.n_lat, args.n_lon],
        "store": str(path),
        "store_chunks": list(store_chunks(args)),
        "layout": args.layout,
        "bytes": args.n_time * args.n_lat * args.n_lon * 4,
        "write_s": write_s,
        "workers": args.workers,
        "threads_per_worker": 1,
        "memory_limit": args.memory_limit,
        "modes": args.modes,
        "n_bootstraps": N_BOOT,
    }
    steps = StepCache(path, args.steps)
    read = steps.run("read", lambda: read_pass(path, args))
    eof = steps.run("pca", lambda: scalepca_eof(path, args))
    job = steps.run("job", lambda: scalepca_job(path, args))
    xe_both = (
        None if args.skip_xeofs else steps.run("xeofs", lambda: _xeofs_step(path, args))
    )
    xe, xcomp = (None, None) if xe_both is None else (xe_both["res"], xe_both["_comps"])
    out["steps_from_earlier_runs"] = steps.reused
    missing = [
        name
        for name, res in (("read", read), ("pca", eof), ("job", job))
        if res is None
    ]
    if missing:  # kept for a later run of these steps; no comparison without them
        print(
            "steps never run on this store: "
            f"{', '.join(missing)} (run them with --steps)"
        )
        out["missing_steps"] = missing
        return out
    out["comparison"] = compare(eof, job, xe, xcomp)
    out.update(
        read=read,
        xeofs=xe if xe is not None else "not run (not installed or skipped)",
        scalepca_eof={k: v for k, v in eof.items() if not k.startswith("_")},
        scalepca_job={k: v for k, v in job.items() if not k.startswith("_")},
    )
    out["whole_job_passes"] = job["n_passes"]
    out["rows"] = rows_of(read, eof, job, xe, args.modes)
    print(
        table(
            out["rows"],
            [
                "step",
                "seconds",
                "x read",
                "n_passes_",
                "reads/blocks",
                "peak worker MiB",
                "spilled MB",
            ],
        )
    )
    for key, value in out["comparison"].items():
        print(f"{key}: {value:.3g}")
    return out


def parse(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data-dir", default="/work/bench-data")
    ap.add_argument(
        "--quick", action="store_true", help="500 × 90 × 180, chunks of 4 MiB"
    )
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--memory-limit", default="6GiB", help="per worker")
    ap.add_argument("--n-time", type=int, default=10_000)
    ap.add_argument("--n-lat", type=int, default=360)
    ap.add_argument("--n-lon", type=int, default=720)
    ap.add_argument("--layout", choices=["space", "time"], default="space")
    ap.add_argument("--chunk-mib", type=float, default=128.0)
    ap.add_argument("--chunk-time", type=int, default=100)
    ap.add_argument("--modes", type=int, default=10)
    ap.add_argument("--xeofs-bootstraps", type=int, default=5)
    ap.add_argument("--skip-xeofs", action="store_true")
    ap.add_argument(
        "--steps",
        default="read,pca,job,xeofs",
        help="steps to run (comma-separated); the others are reported from their "
        "last run on the same store",
    )
    ap.add_argument("--xeofs-part", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.n_time, args.n_lat, args.n_lon = 500, 90, 180
        args.chunk_mib, args.chunk_time = 4.0, 50
    return args


def main(argv=None):
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="climate-") as scratch:
        args.scratch = scratch
        if args.xeofs_part:  # the subprocess of run_xeofs, in an interpreter with xeofs
            res = xeofs_part(
                Path(args.store),
                args,
                str(Path(args.out).with_name("xeofs_components.npz")),
            )
            Path(args.out).write_text(json.dumps(res, default=str))
            return
        out = run(args)
    path = write_json("climate_quick" if args.quick else "climate", out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
