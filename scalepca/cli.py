"""The ``scalepca`` command line: run | transform | info | validate | make-data."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

logger = logging.getLogger("scalepca")

EXIT_USER_ERROR = 2
EXIT_JOB_FAILED = 1


def _fmt_table(rows, headers) -> str:
    cols = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)), line]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cols[1:]]
    return "\n".join(out)


def summary(est, *, data_shape, elapsed: float, method: str) -> str:
    """A plain-text summary table of a fitted estimator."""
    lines = [
        f"method: {method} ({type(est).__name__})   data: {data_shape[0]:,} × {data_shape[1]:,}   "
        f"fit time: {elapsed:.2f} s   passes over the data: {getattr(est, 'n_passes_', '?')}"
    ]
    ev = getattr(est, "explained_variance_", None)
    ratio = getattr(est, "explained_variance_ratio_", None)
    if ev is not None:
        rows = []
        cum = 0.0
        for i, v in enumerate(ev):
            r = float(ratio[i]) if ratio is not None else float("nan")
            cum += r
            rows.append([i, f"{v:.6g}", f"{100 * r:.2f}", f"{100 * cum:.2f}"])
        lines.append(_fmt_table(rows, ["mode", "explained variance", "ratio %", "cumulative %"]))
    if hasattr(est, "noise_variance_"):
        lines.append(f"noise variance σ²: {float(est.noise_variance_):.6g}")
    return "\n".join(lines)


def _open_data(dcfg):
    from .datasets import make_low_rank_zarr
    from .io import open_matrix

    path = dcfg["path"]
    gen = dcfg.get("generate")
    if gen is not None and not Path(path).exists() and "://" not in path:
        gen = dict(gen)
        kind = gen.pop("kind")
        if kind != "low_rank":
            raise ValueError(f"data.generate.kind {kind!r} is unknown; allowed: low_rank")
        n, d = gen.pop("n_samples"), gen.pop("n_features")
        print(f"generating {n:,} × {d:,} {gen['dtype']} low-rank dataset at {path} ...",
              flush=True)
        make_low_rank_zarr(path, n, d, **gen)
    chunks = {0: dcfg["chunks"]} if dcfg.get("chunks") else None
    return open_matrix(path, variable=dcfg.get("variable"),
                       storage_options=dcfg.get("storage_options"), chunks=chunks,
                       sample_dims=dcfg.get("sample_dims"), feature_dims=dcfg.get("feature_dims"))


def cmd_run(args) -> int:
    from .cluster import connect
    from .config import estimator_class, load_config
    from .io import write_array

    cfg = load_config(args.config, args.set)
    ccfg = dict(cfg["cluster"])
    if args.scheduler:
        ccfg = {"kind": "address", "address": args.scheduler}
    elif ccfg["kind"] == "local":
        ccfg.pop("address")
    with connect(ccfg) as client:
        print(f"dask dashboard: {client.dashboard_link}", flush=True)
        X = _open_data(cfg["data"])
        params = dict(cfg["model"])
        method = params.pop("method")
        est = estimator_class(method)(**params)
        t0 = time.perf_counter()
        est.fit(X)
        elapsed = time.perf_counter() - t0
        print(summary(est, data_shape=X.shape, elapsed=elapsed, method=method), flush=True)
        out = cfg["output"]
        if out["store"]:
            root = out["store"].rstrip("/")
            so = out.get("storage_options")
            if out["model"]:
                est.save(f"{root}/model.zarr", storage_options=so)
                print(f"model written to {root}/model.zarr")
            if out["scores"] and hasattr(est, "transform"):
                write_array(est.transform(X), f"{root}/scores.zarr", storage_options=so)
                print(f"scores written to {root}/scores.zarr")
    return 0


def cmd_transform(args) -> int:
    from .cluster import connect
    from .io import load, open_matrix, write_array

    with connect(address=args.scheduler) if args.scheduler else connect() as _client:
        est = load(args.model)
        X = open_matrix(args.data, variable=args.variable)
        write_array(est.transform(X), args.out)
    print(f"scores written to {args.out}")
    return 0


def cmd_info(args) -> int:
    import zarr

    from .io import open_zarr_node

    node = open_zarr_node(args.store)
    if isinstance(node, zarr.Array):
        print(f"zarr array {args.store}: shape {node.shape}, dtype {node.dtype}, chunks {node.chunks}")
        return 0
    attrs = dict(node.attrs)
    print(json.dumps({k: v for k, v in attrs.items()}, indent=2, default=str))
    for name, arr in node.arrays():
        print(f"  {name}: shape {arr.shape}, dtype {arr.dtype}")
    return 0


def cmd_validate(args) -> int:
    from .config import load_config

    load_config(args.config, args.set)
    print(f"{args.config}: valid")
    return 0


def cmd_make_data(args) -> int:
    from .cluster import connect
    from .datasets import make_low_rank_zarr

    with connect(quiet=True):
        make_low_rank_zarr(args.path, args.n_samples, args.n_features, rank=args.rank,
                           noise=args.noise, chunk_rows=args.chunk_rows, dtype=args.dtype,
                           seed=args.seed, overwrite=True)
    print(f"wrote {args.n_samples:,} × {args.n_features:,} to {args.path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scalepca", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log progress of every pass")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="fit a model as described by a YAML config")
    r.add_argument("config")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. model.n_components=20")
    r.add_argument("--scheduler", help="address of an existing dask scheduler (tcp://...)")
    r.set_defaults(func=cmd_run)

    t = sub.add_parser("transform", help="scores of DATA under a saved model")
    t.add_argument("model")
    t.add_argument("data")
    t.add_argument("--out", required=True)
    t.add_argument("--variable")
    t.add_argument("--scheduler")
    t.set_defaults(func=cmd_transform)

    i = sub.add_parser("info", help="describe a zarr store (model, scores or data)")
    i.add_argument("store")
    i.set_defaults(func=cmd_info)

    v = sub.add_parser("validate", help="check a YAML config without running it")
    v.add_argument("config")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    v.set_defaults(func=cmd_validate)

    m = sub.add_parser("make-data", help="write a synthetic low-rank + noise zarr dataset")
    m.add_argument("path")
    m.add_argument("--n-samples", type=int, default=100_000)
    m.add_argument("--n-features", type=int, default=100)
    m.add_argument("--rank", type=int, default=10)
    m.add_argument("--noise", type=float, default=1.0)
    m.add_argument("--chunk-rows", type=int, default=50_000)
    m.add_argument("--dtype", default="float64")
    m.add_argument("--seed", type=int, default=0)
    m.set_defaults(func=cmd_make_data)
    return p


def main(argv=None) -> int:
    from .config import ConfigError

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    try:
        return args.func(args)
    except (ConfigError, FileNotFoundError, KeyError, TypeError, ValueError) as err:
        print(f"scalepca: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("scalepca: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a failed job: one line, details with -v
        if args.verbose:
            raise
        print(f"scalepca: job failed: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_JOB_FAILED


if __name__ == "__main__":
    sys.exit(main())
