"""``scalepca plan``: what a config's job will cost, from the data's metadata only.

The fit's solver and passes come from the estimator itself (``_fit_plan``: the choice
``fit`` makes), their costs from the one cost model of
:mod:`scalepca.solvers.choice` priced with this machine's rates
(:func:`scalepca.solvers.probe.probe`, cached per machine in the user's cache folder)
on the cluster the config or the flags describe. Nothing starts a cluster or reads a
chunk of the data.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
from pathlib import Path

from .pipeline import UserError, _store_exists, open_data

#: the methods whose passes are known before the fit (the spectral fits; the iterative
#: ones pass until they converge)
PLANNED_METHODS = ("pca", "ppca")

#: the keys of ``plan --json`` every plan has
JSON_KEYS = (
    "passes",
    "tasks_per_pass",
    "bytes_read_per_pass",
    "bytes_moved_per_pass",
    "peak_worker_bytes",
    "seconds_per_pass",
)


def cache_path() -> Path:
    """Where the probe's rates are kept: ``$XDG_CACHE_HOME/scalepca`` (else
    ``~/.cache/scalepca``), one file per machine."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "scalepca" / f"rates-{platform.node() or 'this-machine'}.json"


def machine_rates(how: str):
    """The rates to price the passes with: ``"builtin"`` the constants of the cost
    model; ``"cached"`` the probe's, measured once and kept (:func:`cache_path`);
    ``"probe"`` measured again (and kept). Returns ``(rates, words)``."""
    from ..solvers.choice import RATES, Rates
    from ..solvers.probe import probe

    if how == "builtin":
        return RATES, "built-in constants (2 workers × 1 thread)"
    path = cache_path()
    if how == "cached" and path.is_file():
        try:
            fields = {f.name for f in dataclasses.fields(Rates)}
            kept = json.loads(path.read_text())
            if set(kept) == fields:
                return Rates(**kept), f"probed on this machine, kept in {path}"
        except (OSError, ValueError, TypeError):
            pass  # an unreadable cache is measured again
    rates = probe()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dataclasses.asdict(rates), indent=1))
        where = f"probed on this machine now, kept in {path}"
    except OSError:
        where = "probed on this machine now (not kept: the cache folder is read-only)"
    return rates, where


def _stored_arrays(dcfg: dict) -> tuple[list, int | None]:
    """The zarr arrays a pass over ``data`` reads, and the stored entries of a CSR
    matrix (its ``data`` array's length; None when dense): ``([], None)`` for data
    that are no zarr array nor an AnnData store's CSR matrix in zarr."""
    import zarr

    from ..io import open_zarr_node
    from .config import data_kind

    try:
        node = open_zarr_node(dcfg["path"], storage_options=dcfg["storage_options"])
    except (FileNotFoundError, ValueError, OSError, TypeError):
        return [], None
    if isinstance(node, zarr.Group) and data_kind(dcfg) == "anndata":
        from ..io._anndata import matrix_path

        node = node.get(matrix_path(dcfg.get("layer")))
        if isinstance(node, zarr.Group) and "data" in node:  # CSR: data, indices, …
            arrays = [node[k] for k in ("data", "indices", "indptr") if k in node]
            return arrays, int(node["data"].shape[0])
    variable = dcfg.get("variable")
    if isinstance(node, zarr.Group) and isinstance(variable, str):
        node = node.get(variable)
    return ([node] if isinstance(node, zarr.Array) else []), None


def chunk_bytes(array) -> int:
    """The bytes of an array's chunks in its store (its metadata left out): what a
    pass reads. Listed from the store, no chunk opened."""
    from zarr.core.sync import sync

    store, prefix = array.store_path.store, array.store_path.path
    prefix = f"{prefix}/" if prefix else ""

    async def total() -> int:
        size = 0
        async for key in store.list_prefix(prefix):
            if key.rsplit("/", 1)[-1] not in ("zarr.json", ".zarray", ".zattrs"):
                size += await store.getsize(key)
        return size

    return int(sync(total()))


def _section_workers(ccfg: dict) -> tuple:
    """``(workers, threads, memory per worker)`` the cluster section asks for (None
    where it does not say): a local cluster's keys, or a batch cluster's jobs of
    ``processes`` workers sharing the job's ``cores`` and ``memory``."""

    from .config import JOBQUEUE_KINDS

    if ccfg.get("kind") not in JOBQUEUE_KINDS:
        return (
            ccfg.get("n_workers"),
            ccfg.get("threads_per_worker"),
            ccfg.get("memory_limit"),
        )
    procs = int(ccfg.get("processes") or 1)
    jobs = ccfg.get("jobs") or (ccfg.get("adaptive") or {}).get("maximum_jobs")
    memory = _bytes(ccfg.get("memory"))
    workers = threads = per_worker = None  # each: unknown unless the section says
    if jobs:
        workers = int(jobs) * procs
    if ccfg.get("cores"):
        threads = max(1, int(ccfg["cores"]) // procs)
    if memory:
        per_worker = int(memory) // procs
    return workers, threads, per_worker


def _bytes(size) -> int | None:
    """A size in bytes given as a number or a string (``"16GiB"``); None stays None."""
    from dask.utils import parse_bytes

    if size is None:
        return None
    if isinstance(size, str):
        size = parse_bytes(size)
    return int(size)


def _cluster(cfg: dict, args):
    """The cluster to price the passes on: the config's section, the flags over it."""
    from ..solvers.choice import Cluster

    workers, threads, memory = _section_workers(cfg["cluster"] or {})
    workers = args.workers or workers or 2
    threads = args.threads or threads or 1
    bandwidth, store = _bytes(args.bandwidth), _bytes(args.store_bandwidth)
    if args.hosts is not None:
        hosts = args.hosts
    elif bandwidth is None:  # no links to price: the workers share one host
        hosts = 1
    else:  # links priced: each worker on a host of its own
        hosts = workers
    memory = args.worker_memory or memory
    limit = None  # "auto": Dask's share of the host
    if memory != "auto":
        limit = _bytes(memory)
    cluster = Cluster(int(workers), int(threads), int(max(hosts, 1)), bandwidth, store)
    return cluster, limit


def plan(cfg: dict, args) -> dict:
    """The plan of the validated ``cfg`` (see ``scalepca plan --help``)."""
    from ..persistence.registry import estimator_class
    from ..solvers.choice import pass_costs, peak_worker_bytes, ppca_solver
    from .preflight import _generated_matrix

    method, params = cfg["model"]["method"], cfg["model"]["params"]
    est = estimator_class(method)(**params)
    iterative = method == "ppca" and ppca_solver(est.solver, est.missing) == "em"
    if method not in PLANNED_METHODS or iterative:
        raise UserError(
            f"scalepca plan predicts the fits whose passes are known before they run "
            f"(model.method {' or '.join(PLANNED_METHODS)}, ppca with solver "
            f"closed_form); model.method {method} "
            f"{'with solver em ' if iterative else ''}passes until it converges"
        )
    dcfg = cfg["data"]
    if dcfg["generate"] is not None and not _store_exists(
        dcfg["path"], dcfg["storage_options"]
    ):
        X, (arrays, nnz) = _generated_matrix(dcfg), ([], None)
    else:
        X = open_data(dcfg, method=method, fit_steps=False)
        arrays, nnz = _stored_arrays(dcfg)
    fit = est._fit_plan(X)  # as fit takes it: the choice fit makes
    problem = fit.problem
    if nnz is not None and problem.sparse:  # the store says how many entries it holds
        problem = dataclasses.replace(
            problem, density=nnz / max(problem.n * problem.d, 1)
        )
    rates, where = machine_rates(args.rates)
    stored = None  # bytes in the store: known for a zarr store
    if arrays:
        stored = sum(chunk_bytes(a) for a in arrays)
    if arrays and args.rates != "builtin":  # the read of this store's codec
        from ..solvers.probe import store_read_rate

        read = store_read_rate(tuple(arrays[0].compressors)) * rates.cores
        rates = dataclasses.replace(rates, decode_bytes_per_second=read)
    cluster, limit = _cluster(cfg, args)
    costs = pass_costs(
        fit.solver,
        problem,
        rates=rates,
        cluster=cluster,
        tasks=fit.tasks,
        stored_bytes=stored,
    )
    peak = peak_worker_bytes(fit.solver, problem, cluster=cluster, tasks=fit.tasks)
    p = problem
    return {
        "method": method,
        "solver": fit.solver,
        "shape": [p.n, p.d],
        "dtype_bytes": p.itemsize,
        "sparse": p.sparse,
        "workers": cluster.workers,
        "threads_per_worker": cluster.threads,
        "hosts": cluster.hosts,
        "bandwidth": cluster.bandwidth,
        "store_bandwidth": cluster.store_bandwidth,
        "worker_memory": limit,
        "rates": where,
        "passes": len(costs),
        "tasks_per_pass": [c.tasks for c in costs],
        "bytes_read_per_pass": [int(c.bytes_read) for c in costs],
        "bytes_moved_per_pass": [int(c.bytes_moved) for c in costs],
        "peak_worker_bytes": int(peak),
        "seconds_per_pass": [round(c.seconds, 6) for c in costs],
        "seconds": round(sum(c.seconds for c in costs), 6),
    }


def _size(nbytes: float) -> str:
    from dask.utils import format_bytes

    return format_bytes(int(nbytes))


def _cluster_text(out: dict) -> str:
    """The cluster a plan priced: workers and threads, the hosts and their links when
    more than one, the store's read rate when given."""
    text = f"{out['workers']} worker(s) × {out['threads_per_worker']} thread(s)"
    if out["hosts"] > 1:
        text += f" on {out['hosts']} hosts"
        if out["bandwidth"]:
            text += f" ({_size(out['bandwidth'])}/s links)"
    if out["store_bandwidth"]:
        text += f", the store read at {_size(out['store_bandwidth'])}/s"
    return text


def describe_plan(out: dict, config: str) -> str:
    """The plan as the lines ``scalepca plan`` prints."""
    n, d = out["shape"]
    lines = [
        f"{config}: {out['method']} with svd_solver {out['solver']!r} on "
        f"{n:,} × {d:,}{' sparse' if out['sparse'] else ''}, {_cluster_text(out)}",
        f"  rates: {out['rates']}",
        f"  {'pass':>4}  {'tasks':>7}  {'read':>10}  {'moved':>10}  {'seconds':>9}",
    ]
    for i in range(out["passes"]):
        lines.append(
            f"  {i + 1:>4}  {out['tasks_per_pass'][i]:>7,}  "
            f"{_size(out['bytes_read_per_pass'][i]):>10}  "
            f"{_size(out['bytes_moved_per_pass'][i]):>10}  "
            f"{out['seconds_per_pass'][i]:>9.3g}"
        )
    lines.append(
        f"  {out['passes']} pass(es), {out['seconds']:.3g} s predicted; peak worker "
        f"memory {_size(out['peak_worker_bytes'])}"
    )
    limit = out["worker_memory"]
    if limit is not None:
        verdict = "fits"
        if out["peak_worker_bytes"] > limit:
            verdict = "too small; give workers more memory or smaller chunks"
        lines.append(f"  worker memory {_size(limit)}: {verdict}")
    return "\n".join(lines)
