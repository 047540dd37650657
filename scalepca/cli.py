"""The ``scalepca`` command line: run | transform | info | validate | make-data.

Exit codes: 0 success; 2 a user mistake (bad config or arguments, missing store, missing
optional package), reported in one line; 1 a failed job (a worker died, a compute raised),
reported in one line — ``-v`` shows the log and the full traceback.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import shutil
import sys
import time

logger = logging.getLogger("scalepca")

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A mistake in the command line or its inputs; printed as one line, exit code 2."""


def _fmt_table(rows, headers) -> str:
    cols = [list(headers)] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cols[1:]]
    return "\n".join(out)


def summary(est, *, data_shape, elapsed: float, method: str) -> str:
    """A plain-text summary table of a fitted estimator."""
    lines = [
        f"method: {method} ({type(est).__name__})   data: {data_shape[0]:,} × {data_shape[1]:,}"
        f"   fit time: {elapsed:.2f} s   passes over the data: {getattr(est, 'n_passes_', '?')}"
    ]
    for attr, label in (("n_iter_", "iterations"), ("rank_", "rank")):
        if hasattr(est, attr):
            lines.append(f"{label}: {getattr(est, attr)}")
    ev = getattr(est, "explained_variance_", None)
    if ev is None:
        ev = getattr(est, "eigenvalues_", None)
    ratio = getattr(est, "explained_variance_ratio_", None)
    if ev is not None:
        import numpy as np

        from .io._stack import mode_coords

        ev = np.ravel(np.asarray(ev))
        rows = []
        cum = 0.0
        for i, (mode, v) in enumerate(zip(mode_coords(len(ev)), ev, strict=True)):
            r = float(np.ravel(np.asarray(ratio))[i]) if ratio is not None else float("nan")
            cum += r
            rows.append([int(mode), f"{v:.6g}", f"{100 * r:.2f}", f"{100 * cum:.2f}"])
        lines.append(_fmt_table(rows, ["mode", "explained variance", "ratio %", "cumulative %"]))
    if hasattr(est, "noise_variance_"):
        lines.append(f"noise variance σ²: {float(est.noise_variance_):.6g}")
    return "\n".join(lines)


# -- helpers ---------------------------------------------------------------------------------------
def _is_url(path: str) -> bool:
    from .io._fs import is_url

    return is_url(path)


def _abs(path: str | None) -> str | None:
    """Absolute local paths (workers may run elsewhere); URLs unchanged."""
    if path is None or _is_url(path):
        return path
    if path.startswith("file://"):
        path = path[len("file://"):]
    return os.path.abspath(os.path.expanduser(path))


def _store_exists(path: str, storage_options=None) -> bool:
    if _is_url(path):
        import fsspec

        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        return fs.exists(root)
    from .io._netcdf import _has_glob

    if _has_glob(path):  # several NetCDF files ("data/sst_*.nc"), opened as open_matrix does
        import glob

        return bool(glob.glob(path))
    return os.path.exists(path)


def _json_arg(text, what: str):
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{what}: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise UserError(f"{what}: expected a JSON object, got {text!r}")
    return value


def generate_data(gen: dict, path: str, *, storage_options=None, overwrite=False,
                  codec: str | None = None) -> str:
    """Write the synthetic dataset a ``data.generate`` section describes (if absent)."""
    from .datasets import GENERATORS, dataset_complete, write_dataset
    from .io._fs import store_state

    params = dict(gen)
    kind = params.pop("kind", "low_rank")
    if not overwrite and dataset_complete(path, storage_options):
        return path
    if not overwrite and store_state(path, storage_options).complete is False:
        # written again if it is an interrupted dataset; write_dataset refuses anything else
        print(f"scalepca: {path} is an interrupted write; generating it again", flush=True)
    size = ", ".join(f"{k}={v}" for k, v in params.items())
    print(f"scalepca: generating {kind} dataset ({size}) at {path} ...", flush=True)
    data = GENERATORS[kind](**params)
    return write_dataset(data, path, overwrite=overwrite, storage_options=storage_options,
                         codec=codec)


def open_data(dcfg: dict, *, method: str | None = None):
    """Open the ``data`` section as the matrix an estimator fits (generating it if asked)."""
    from .io import open_matrix, open_zarr_node
    from .io._coalesce import TASK_SIZE, open_zarr
    from .io._fs import check_complete
    from .io._preprocess import WeightsError

    path = dcfg["path"]
    so = dcfg.get("storage_options")
    if dcfg.get("generate") is not None:
        generate_data(dcfg["generate"], path, storage_options=so)
    chunks = dcfg.get("chunks")
    if _is_anndata(dcfg):
        from .config import anndata_keys_problem

        problem = anndata_keys_problem(dcfg, f"the AnnData store {path!r}")
        if problem:  # open_matrix refuses them too; said here in the config's words
            raise UserError(problem)
        try:
            return open_matrix(path, storage_options=so, format="anndata",
                               layer=dcfg.get("layer"),
                               chunks=chunks if isinstance(chunks, int) else None,
                               weights=dcfg.get("weights"))
        except ValueError as err:
            if dcfg.get("weights") is not None:
                raise UserError(f"'data.weights' {err}") from None
            raise
    if method == "robust_pca" or isinstance(chunks, list):
        # robust PCA works on 2-D blocks: keep the store's (or the given) 2-D chunking
        import dask.array as da
        import zarr

        node = open_zarr_node(path, storage_options=so)
        check_complete(node, path)
        if isinstance(node, zarr.Array) and node.ndim == 2:
            if chunks is None:  # the store's 2-D blocks, several row chunks per task
                return open_zarr(node, task_size=dcfg.get("task_size", TASK_SIZE),
                                 full_rows=False)
            arr = da.from_zarr(node)
            return arr.rechunk(tuple(chunks) if isinstance(chunks, list) else {0: chunks})
    try:
        return open_matrix(path, variable=dcfg.get("variable"), storage_options=so,
                           layer=dcfg.get("layer"), format=dcfg.get("format"),
                           chunks={0: chunks} if isinstance(chunks, int) else None,
                           sample_dims=dcfg.get("sample_dims"),
                           feature_dims=dcfg.get("feature_dims"), weights=dcfg.get("weights"),
                           task_size=dcfg.get("task_size", TASK_SIZE))
    except WeightsError as err:
        raise UserError(f"'data.weights' {err.detail}") from None


def _is_anndata(dcfg: dict) -> bool:
    """Whether the ``data`` section names an AnnData store (by ``format`` or by the path)."""
    from .io._open import data_kind

    return data_kind(dcfg["path"], format=dcfg.get("format"),
                     storage_options=dcfg.get("storage_options")) == "anndata"


def _layer_problem(path: str, layer: str | None, storage_options=None) -> str | None:
    """The config's ``data.layer`` against the layers of an AnnData store, with a close match."""
    from .io._anndata import layer_problem, read_layers

    try:
        layers, has_x = read_layers(path, storage_options=storage_options)
    except ValueError as err:
        return f"data.path: {_one_line(err)} (data.format is anndata)"
    problem = layer_problem(layers, layer, repr(path), has_x=has_x)
    return None if problem is None else f"data.layer: {problem}"


def transform_data(est, path: str, *, variable=None, sample_dims=None, weights=None,
                   storage_options=None):
    """The data of ``scalepca transform`` as ``est`` takes them.

    A model fitted on xarray data (``open_matrix`` / a ``run`` config) keeps its variable,
    dims and weights: the data are opened in their own layout and the model repeats its steps
    (checking the grid). The options need not be repeated; given ones must agree with the
    model. A model fitted on a bare array gets the array (with ``--weights`` if given).
    """
    from .io import open_matrix
    from .io._open import open_dataset
    from .io._preprocess import WeightsError, describe

    prep = getattr(est, "_preprocessing", None)
    if prep is not None and prep.dims == ("obs", "var"):  # fitted on AnnData: its matrix again
        from .io._anndata import is_anndata

        if variable is not None or sample_dims is not None:
            raise UserError("--variable and --sample-dims do not apply: the model was fitted on "
                            f"AnnData ({prep.variable})")
        if is_anndata(path) or _is_url(path):
            return open_matrix(path, storage_options=storage_options, format="anndata",
                               layer=None if prep.variable == "X" else prep.variable)
    if prep is None or not prep.labelled:
        try:
            return open_matrix(path, variable=variable, storage_options=storage_options,
                               sample_dims=sample_dims, weights=weights)
        except WeightsError as err:
            raise UserError(f"--weights {err.detail}") from None
    if variable is not None and prep.variable is not None and variable != prep.variable:
        raise UserError(f"--variable {variable!r}: the model was fitted on variable "
                        f"{prep.variable!r}")
    if sample_dims is not None and tuple(sample_dims) != tuple(prep.sample_dims):
        raise UserError(f"--sample-dims {' '.join(sample_dims)}: the model was fitted with "
                        f"sample dims {' '.join(prep.sample_dims)}")
    ds = open_dataset(path, storage_options=storage_options)
    if not hasattr(ds, "data_vars"):
        raise UserError(f"{path} is not an xarray store; the model was fitted on variable "
                        f"{prep.variable!r} with dims {prep.dims}")
    name = variable or prep.variable
    if name is None:
        names = list(ds.data_vars)
        if len(names) != 1:
            raise UserError(f"{path} holds variables {names}; pass --variable")
        name = names[0]
    if name not in ds.data_vars:
        raise UserError(f"{path} has no variable {name!r} (the model was fitted on it); it has "
                        f"{', '.join(map(str, ds.data_vars))}")
    raw = ds[name]
    if weights is not None:
        try:
            given = describe(raw, sample_dims=prep.sample_dims, feature_dims=prep.feature_dims,
                             weights=weights, dataset=ds)
        except WeightsError as err:
            raise UserError(f"--weights {err.detail}") from None
        diff = prep.differences(given)
        if diff:
            raise UserError(f"--weights {weights}: the data would be {'; '.join(diff)}")
    return raw


def _shape(X):
    return tuple(X.shape)


def write_outputs(est, X, out: dict) -> list[str]:
    """Write what ``output`` asks for under ``output.store``; return the written paths."""
    from ._outputs import FLAG
    from .io import write_array
    from .models.persist import save_estimator

    root = out["store"].rstrip("/")
    so = out.get("storage_options")
    codec = out.get("codec")
    # a rerun replaces the complete outputs of an earlier run (output.overwrite, default true);
    # nothing else is ever replaced
    replace = {"overwrite": out.get("overwrite", True), "flag": FLAG}
    written = []
    if out["model"]:
        save_estimator(est, f"{root}/model.zarr", storage_options=so, **replace)
        written.append(f"{root}/model.zarr")
    scores = None
    if out["scores"] or out["reconstruction"]:
        if not hasattr(est, "transform"):
            raise UserError(f"{type(est).__name__} has no transform; set output.scores: false")
        scores = est.transform(X)
    if out["scores"]:
        write_array(scores, f"{root}/scores.zarr", name="scores", storage_options=so,
                    codec=codec, **replace)
        written.append(f"{root}/scores.zarr")
    if out["reconstruction"]:
        write_array(est.inverse_transform(scores), f"{root}/reconstruction.zarr",
                    name="reconstruction", storage_options=so, codec=codec, **replace)
        written.append(f"{root}/reconstruction.zarr")
    for part in ("low_rank", "sparse"):
        if out[part]:
            value = getattr(est, f"{part}_", None)
            if value is None:
                raise UserError(f"{type(est).__name__} has no {part}_ to write")
            write_array(value, f"{root}/{part}.zarr", name=part, storage_options=so,
                        codec=codec, **replace)
            written.append(f"{root}/{part}.zarr")
    return written


# -- messages in the words of the command line -----------------------------------------------------
#: library wording → (wording for a config: run/validate, wording for command-line flags:
#: transform). The library's messages name Python arguments; the CLI rewrites them here, in one
#: place, instead of every library message knowing about configs and flags.
_CLI_WORDS = (
    (r"pass variable=\.\.\.", "set data.variable", "pass --variable"),
    (r"\blayer=None\b", "data.layer: null", "a model fitted on X"),
    (r"\bwith layer=\.\.\.", "with data.layer", "with the model's layer"),
    (r"pass sample_dims=\(\.\.\.\)", "set data.sample_dims", "pass --sample-dims"),
    (r"\bpass sample_dims\b", "set data.sample_dims", "pass --sample-dims"),
    (r"(?<![\w.-])sample_dims\b", "data.sample_dims", "--sample-dims"),
    (r"(?<![\w.-])feature_dims\b", "data.feature_dims", "the feature dimensions"),
    (r"^weights\b", "data.weights", "--weights"),
    (r"(?<![\w.-])storage_options\b", "data.storage_options", "--storage-options"),
    (r"^[XM] (?=has|contains|is)", "the data ", "the data "),
)


def _method_of_class(name: str) -> str | None:
    from .models.registry import METHODS

    return next((m for m, target in METHODS.items() if target.endswith(f":{name}")), None)


def speak_cli(message: str, *, command: str | None = None, method: str | None = None) -> str:
    """``message`` with Python argument syntax replaced by config keys or command-line flags.

    ``command`` is the subcommand (``transform`` speaks flags, the others config keys);
    ``method`` the config's ``model.method``, whose estimator parameters become
    ``model.<name>: value`` (``n_components=3`` → ``model.n_components: 3``), and an
    estimator call like ``PPCA(missing='em')`` becomes ``model.method: ppca with
    model.missing: em``.
    """
    import re

    flags = command == "transform"
    for pattern, as_config, as_flag in _CLI_WORDS:
        message = re.sub(pattern, as_flag if flags else as_config, message)
    if flags:
        return message
    from .models.registry import METHODS, estimator_class

    def params_of(m):
        return set(inspect.signature(estimator_class(m).__init__).parameters) - {"self"}

    def keys(text: str, names: set) -> str:
        def one(match):
            value = match.group(3)
            return f"model.{match.group(1)}: {value}" if value else f"model.{match.group(1)}"

        alternatives = "|".join(sorted(names, key=len, reverse=True))
        text = re.sub(rf"(?<![\w.'\"-])({alternatives})=(['\"]?)([^\s,;)'\"]*)\2", one, text)
        return re.sub(rf"(?<![\w.'\"-])({alternatives})(?= must\b)", r"model.\1", text)

    classes = "|".join(target.split(":")[1] for target in METHODS.values())

    def call(match):
        m = _method_of_class(match.group(1))
        inner = keys(match.group(2), params_of(m)) if match.group(2) else ""
        return f"model.method: {m}" + (f" with {inner}" if inner else "")

    message = re.sub(rf"\b({classes})\(([^()]*)\)", call, message)
    if method in METHODS:
        message = keys(message, params_of(method))
    return message


# -- checks without a cluster or a pass over the data ----------------------------------------------
def _variable_problem(path: str, variable: str | None, storage_options=None) -> str | None:
    """The config's ``data.variable`` against the arrays of the store, with a close match."""
    import difflib

    import zarr

    from .io import open_zarr_node
    from .io._netcdf import is_netcdf, open_netcdf
    from .io._open import _looks_like_xarray

    if is_netcdf(path):  # NetCDF/HDF5 files: the opener of open_matrix lists the variables
        if variable is None:
            return None  # open_matrix says so if the file holds several
        try:
            open_netcdf(path, variable=variable)
        except KeyError as err:
            return f"data.variable: {err.args[0]}"
        return None
    node = open_zarr_node(path, storage_options=storage_options)
    if not isinstance(node, zarr.Group):
        if variable is not None:
            return (f"data.variable {variable!r} is set, but {path!r} is a single zarr array; "
                    "remove data.variable")
        return None
    names = sorted(name for name, _ in node.arrays())
    if _looks_like_xarray(node):
        import xarray as xr

        names = sorted(map(str, xr.open_zarr(node.store, chunks=None,
                                             consolidated=False).data_vars))
    if variable is None or variable in names:
        return None
    close = difflib.get_close_matches(variable, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (f"data.variable {variable!r} is not in {path!r}{hint} "
            f"(it has: {', '.join(names) or 'nothing'})")


def _generated_matrix(dcfg: dict):
    """The lazy matrix ``data.generate`` describes (nothing is generated or written)."""
    from .datasets import GENERATORS
    from .io import open_matrix

    params = dict(dcfg["generate"])
    data = GENERATORS[params.pop("kind", "low_rank")](**params)
    if hasattr(data, "data_vars"):  # gridded: an xarray Dataset
        return open_matrix(data, variable=dcfg.get("variable"),
                           sample_dims=dcfg.get("sample_dims"),
                           feature_dims=dcfg.get("feature_dims"))
    return data


def _estimator_problem(est, shape, itemsize: int) -> str | None:
    """Run the estimator's own parameter checks for data of ``shape`` (metadata only)."""
    import warnings

    check = getattr(est, "_check_params", None)
    if check is None:
        return None
    values = {"n": shape[0], "d": shape[1], "n1": shape[0], "n2": shape[1],
              "itemsize": itemsize}
    try:
        names = list(inspect.signature(check).parameters)
        kwargs = {name: values[name] for name in names}
    except (KeyError, TypeError, ValueError):
        logger.info("%s._check_params takes %s; parameter ranges not checked",
                    type(est).__name__, names)
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check(**kwargs)
    except (ValueError, TypeError) as err:
        return _one_line(err)
    return None


def check_config(cfg: dict, *, data: bool = True) -> tuple[list[str], list[str]]:
    """Check a validated config against the data, the file system and the installed packages.

    Nothing here starts a cluster or reads data: the store is opened (metadata), the variable,
    dimensions and weights are matched to it, the estimator's parameters are checked for the
    data's shape, output and checkpoint folders are checked for write access, and the optional
    package of the cluster kind is imported. Returns ``(problems, notes)``, both lists of
    one-line sentences in config terms. ``data=False`` checks only what does not depend on
    this machine's files (the cluster section), for a config meant for another machine.
    """
    from ._outputs import output_problems
    from .io._fs import write_problem

    problems, notes = [], []
    method, params = cfg["model"]["method"], cfg["model"]["params"]
    dcfg = cfg["data"]
    path, so = dcfg["path"], dcfg["storage_options"]
    X = None
    if not data:
        return _cluster_problems(cfg, problems, notes)
    try:
        if dcfg["generate"] is not None and not _store_exists(path, so):
            try:
                X = _generated_matrix(dcfg)
            except (ValueError, TypeError) as err:
                raise UserError(f"data.generate: {_one_line(err)}") from None
            notes.append(f"data.path {path!r} does not exist yet; run generates it "
                         f"({dcfg['generate']['kind']}, {X.shape[0]:,} × {X.shape[1]:,})")
            problem = write_problem(path, so)
            if problem:
                problems.append(f"data.path {problem}")
        elif not _store_exists(path, so):
            problems.append(f"data.path: {_no_data_store(dcfg)}")
        else:
            if _is_anndata(dcfg):
                problem = _layer_problem(path, dcfg["layer"], so)
            else:
                problem = _variable_problem(path, dcfg["variable"], so)
            if problem:
                problems.append(problem)
            else:
                X = open_data(dcfg, method=method)
    except (ValueError, TypeError, KeyError, FileNotFoundError, UserError, ImportError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        problems.append(_one_line(msg))
    if X is not None:
        import numpy as np

        from ._validation import is_sparse
        from .models.registry import estimator_class

        est = estimator_class(method)(**params)
        problem = _estimator_problem(est, X.shape, np.dtype(X.dtype).itemsize)
        sparse = is_sparse(getattr(X, "X", getattr(X, "data", X)))
        if problem is None and sparse and not getattr(est, "_accepts_sparse", False):
            problem = (f"model.method {method} does not take sparse input, and data.path "
                       f"{path!r} holds a sparse matrix; use a method that does")
        if problem:
            problems.append(problem)
        else:
            notes.append(f"data: {X.shape[0]:,} samples × {X.shape[1]:,} features, "
                         f"{X.dtype}; model parameters fit that shape")
    more, remarks = output_problems(cfg)
    return _cluster_problems(cfg, problems + more, notes + remarks)


def _no_data_store(dcfg: dict) -> str:
    """"no NetCDF file at ..." (or AnnData / zarr store): the kind ``data`` names."""
    from .io._open import data_kind, no_data_store

    kind = data_kind(dcfg["path"], format=dcfg.get("format"),
                     storage_options=dcfg.get("storage_options"))
    return no_data_store(dcfg["path"], kind)


def _cluster_problems(cfg: dict, problems: list, notes: list) -> tuple[list[str], list[str]]:
    kind = cfg["cluster"]["kind"]
    from .cluster import _EXTRAS, _SUBMIT_COMMANDS

    if kind in _EXTRAS:
        from .cluster import _import_extra

        try:
            _import_extra(kind)
        except ImportError as err:
            problems.append(_one_line(err))
    submit = _SUBMIT_COMMANDS.get(kind)
    if submit is not None and shutil.which(submit) is None:
        notes.append(f"cluster.kind {kind}: {submit!r} is not on this machine's PATH; run on a "
                     "login node of the cluster (--job-script shows the job script)")
    return problems, notes


# -- commands --------------------------------------------------------------------------------------
def _load(args) -> dict:
    """The validated config of ``args.config`` (+ ``--set``), local paths made absolute."""
    from .config import load_config

    cfg = load_config(args.config, args.set)
    args.method = cfg["model"]["method"]  # error messages name this estimator's keys
    cfg["data"]["path"] = _abs(cfg["data"]["path"])
    if cfg["output"]["store"]:
        cfg["output"]["store"] = _abs(cfg["output"]["store"])
    return cfg


def cmd_run(args) -> int:
    from .cluster import connect, progress
    from .models.registry import estimator_class

    cfg = _load(args)
    ccfg = dict(cfg["cluster"])
    if args.scheduler:
        ccfg = {"kind": "address", "address": args.scheduler}
    show = cfg["progress"] and not args.no_progress and not args.quiet
    method, params = cfg["model"]["method"], cfg["model"]["params"]
    dcfg = cfg["data"]
    if dcfg["generate"] is None and not _store_exists(dcfg["path"], dcfg["storage_options"]):
        raise FileNotFoundError(f"{_no_data_store(dcfg)} (data.path)")
    # what `validate` checks, before a cluster starts: a mistake costs a second, not a cluster
    problems, _ = check_config(cfg if not args.scheduler else {**cfg, "cluster": ccfg})
    if problems:
        raise UserError(problems[0])
    with connect(ccfg, quiet=args.quiet) as client, progress(show, client=client):
        X = open_data(cfg["data"], method=method)
        est = estimator_class(method)(**params)
        t0 = time.perf_counter()
        est.fit(X)
        elapsed = time.perf_counter() - t0
        print(summary(est, data_shape=_shape(X), elapsed=elapsed, method=method), flush=True)
        if cfg["output"]["store"]:
            written = write_outputs(est, X, cfg["output"])
            for path in written:
                print(f"written: {path}", flush=True)
            if cfg["output"].get("report"):  # HTML + PNG summary (scalepca.report)
                from .report import run_report

                path = run_report(est, X, cfg, elapsed=elapsed, client=client, written=written)
                print(f"written: {path}", flush=True)
    return EXIT_OK


def cmd_transform(args) -> int:
    from ._outputs import transform_output_problem
    from .cluster import connect, progress
    from .io import write_array
    from .models.persist import load

    so = _json_arg(args.storage_options, "--storage-options")
    model, data, out = _abs(args.model), _abs(args.data), _abs(args.out)
    # where the scores go, then the model and the data's metadata: mistakes fail before a
    # cluster starts
    problem = transform_output_problem(out, model=model, data=data, overwrite=args.overwrite,
                                       storage_options=so)
    if problem:
        raise UserError(problem)
    est = load(model, storage_options=so)
    X = transform_data(est, data, variable=args.variable, sample_dims=args.sample_dims,
                       weights=args.weights, storage_options=so)
    scores = est.transform(X)
    if args.scheduler:
        ccfg = {"kind": "address", "address": args.scheduler}
    else:
        ccfg = {"kind": "local", "n_workers": args.n_workers,
                "threads_per_worker": args.threads_per_worker, "processes": args.processes}
    quiet = args.no_progress or args.quiet
    with connect(ccfg, quiet=quiet) as client, progress(not quiet, client=client):
        write_array(scores, out, name="scores", storage_options=so, overwrite=args.overwrite,
                    flag="--overwrite", inputs=[("the model", model), ("the data", data)])
    print(f"written: {out}")
    return EXIT_OK


def cmd_info(args) -> int:
    import zarr

    from .io import open_zarr_node
    from .io._open import data_kind

    so = _json_arg(args.storage_options, "--storage-options")
    kind = data_kind(args.store, storage_options=so)
    if kind == "anndata":
        from .io._anndata import describe_store

        print("\n".join(describe_store(args.store, storage_options=so)))
        return EXIT_OK
    if kind == "netcdf":
        from .io._open import open_dataset

        ds = open_dataset(args.store, format=kind)
        print(f"NetCDF {args.store}: dims {dict(ds.sizes)}")
        for name, var in ds.data_vars.items():
            print(f"  {name}: dims {var.dims}, shape {var.shape}, dtype {var.dtype}")
        return EXIT_OK
    node = open_zarr_node(args.store, storage_options=so)
    if isinstance(node, zarr.Array):
        print(f"zarr array {args.store}: shape {node.shape}, dtype {node.dtype}, "
              f"chunks {node.chunks}")
        return EXIT_OK
    attrs = dict(node.attrs)
    if attrs.get("format") == "scalepca-model":
        state = "complete" if attrs.get("complete") else "INCOMPLETE (interrupted write)"
        print(f"scalepca model {args.store}: {attrs.get('class')} ({state})")
        print(f"  written by scalepca {attrs.get('scalepca_version')}, "
              f"format version {attrs.get('format_version')}")
        print(f"  parameters: {json.dumps(attrs.get('params', {}))}")
        for k, v in sorted(attrs.get("scalars", {}).items()):
            text = json.dumps(v, default=str)
            if len(text) > 120:  # e.g. the coordinates of stacked feature dims
                text = f"<{type(v).__name__} of {len(text):,} characters>"
            print(f"  {k}: {text}")
    else:
        kind = attrs.get("format", "zarr group")
        print(f"{kind} {args.store}")
        extra = {k: v for k, v in attrs.items() if k != "format"}
        if extra:
            print(f"  attributes: {json.dumps(extra, default=str)}")
    for name, arr in sorted(node.arrays(), key=lambda t: t[0]):
        print(f"  {name}: shape {arr.shape}, dtype {arr.dtype}, chunks {arr.chunks}")
    return EXIT_OK


def cmd_validate(args) -> int:
    from .config import JOBQUEUE_KINDS

    cfg = _load(args)
    kind = cfg["cluster"]["kind"]
    problems, notes = check_config(cfg, data=not args.job_script)
    if problems:
        for problem in problems:
            print(f"scalepca: error: {speak_cli(problem, method=args.method)}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(f"{args.config}: valid (method {cfg['model']['method']}, cluster {kind})")
    for note in notes:
        print(f"  {note}")
    if args.job_script:
        if kind not in JOBQUEUE_KINDS:
            raise UserError(f"--job-script needs a batch cluster kind "
                            f"({', '.join(JOBQUEUE_KINDS)}); the config has {kind!r}")
        from .cluster import make_cluster

        cluster = make_cluster(cfg["cluster"])
        try:
            print(cluster.job_script())
        finally:
            cluster.close()
    return EXIT_OK


def cmd_make_data(args) -> int:
    import numpy as np
    from dask.utils import parse_bytes

    from .config import ConfigError, apply_overrides
    from .datasets import GENERATORS
    from .models.registry import check_params

    func = GENERATORS[args.kind]
    sig = inspect.signature(func).parameters
    params = apply_overrides({}, args.set)
    for opt in ("n_features", "chunk_rows", "dtype", "seed", "density"):
        value = getattr(args, opt)
        if value is not None:
            if opt not in sig:
                raise UserError(f"--{opt.replace('_', '-')} does not apply to kind {args.kind!r};"
                                f" its parameters: {', '.join(sig)}")
            params[opt] = value
    if args.size is not None:
        if args.n_samples is not None:
            raise UserError("give --n-samples or --size, not both")
        itemsize = np.dtype(params.get("dtype", sig["dtype"].default)).itemsize
        per_row = itemsize
        if "density" in sig:  # sparse (CSR): stored values and column indices of a row
            per_row = (itemsize + 4) * params.get("density", sig["density"].default)
        if "n_features" in sig:
            per_row *= params.get("n_features", sig["n_features"].default
                                  if sig["n_features"].default is not inspect.Parameter.empty
                                  else 100)
        else:  # gridded: one row is a (lat, lon) field
            per_row *= params.get("n_lat", sig["n_lat"].default) * params.get(
                "n_lon", sig["n_lon"].default)
        try:
            params["n_samples"] = max(1, parse_bytes(args.size) // per_row)
        except ValueError as err:
            raise UserError(f"--size {args.size!r}: {err}") from None
    else:
        params["n_samples"] = args.n_samples if args.n_samples is not None else 100_000
    if "n_features" in sig and sig["n_features"].default is inspect.Parameter.empty:
        params.setdefault("n_features", 100)
    try:
        check_params(func, params, "make-data")
    except ConfigError as err:
        raise UserError(str(err).replace("'make-data.", "'--set ")) from None
    from ._codecs import check_codec

    try:
        codec = check_codec(args.codec)
    except ValueError as err:
        raise UserError(f"--codec: {err}") from None
    from .io._fs import DATASET, check_replace

    so = _json_arg(args.storage_options, "--storage-options")
    path = args.path if _is_url(args.path) else _abs(args.path)
    try:  # an interrupted dataset is written again; anything else but a dataset never is
        check_replace(path, DATASET, overwrite=args.overwrite, storage_options=so,
                      flag="--overwrite")
    except FileExistsError as err:
        raise UserError(str(err)) from None

    def write():
        t0 = time.perf_counter()
        generate_data({"kind": args.kind, **params}, path, storage_options=so, overwrite=True,
                      codec=codec)
        return time.perf_counter() - t0

    if args.scheduler:
        from .cluster import connect, progress

        with connect(kind="address", address=args.scheduler, quiet=args.quiet) as client, \
                progress(not (args.no_progress or args.quiet), client=client):
            elapsed = write()
    else:
        from .cluster import progress

        with progress(not (args.no_progress or args.quiet)):
            elapsed = write()
    print(f"wrote {args.kind} dataset to {path} in {elapsed:.1f} s")
    return EXIT_OK


# -- parser ----------------------------------------------------------------------------------------
class _DataKinds:
    """The ``make-data --kind`` choices, read from :mod:`scalepca.datasets` on first use.

    Importing the generators imports dask.array (about a second); ``scalepca --help`` and
    every command but ``make-data`` never look at the choices, so they do not pay for it.
    """

    def _names(self) -> list[str]:
        from .datasets import GENERATORS

        return list(GENERATORS)

    def __contains__(self, name) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


def _progress_flags(parser) -> None:
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress (a bar per pass on a terminal, else one line per pass)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress and no dashboard link: results and errors only")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scalepca", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true",
                   help="log every pass; show full tracebacks of failed jobs")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="fit a model as described by a YAML config")
    r.add_argument("config")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. model.n_components=20 (repeatable)")
    r.add_argument("--scheduler", help="address of an existing dask scheduler (tcp://...); "
                   "overrides the config's cluster section")
    _progress_flags(r)
    r.set_defaults(func=cmd_run)

    t = sub.add_parser("transform", help="scores of DATA under a saved model")
    t.add_argument("model", help="model store written by run or save()")
    t.add_argument("data", help="zarr store path or URL")
    t.add_argument("--out", required=True, help="scores store to write (never the model or "
                   "the data, nor inside or around them)")
    t.add_argument("--overwrite", action="store_true",
                   help="replace a scores store already at --out (only a complete scalepca "
                   "output store is ever replaced)")
    t.add_argument("--variable", help="array/variable inside DATA (default: the model's)")
    t.add_argument("--sample-dims", nargs="+", help="sample dimensions of N-D xarray data "
                   "(default: the model's)")
    t.add_argument("--weights", help="feature weights: sqrt_coslat, coslat or a variable name "
                   "(default: the model's; a model fitted with weights applies them itself)")
    t.add_argument("--storage-options", help="fsspec options as JSON, for s3:// URLs")
    t.add_argument("--scheduler", help="address of an existing dask scheduler")
    t.add_argument("--n-workers", type=int, help="workers of the embedded cluster")
    t.add_argument("--threads-per-worker", type=int)
    t.add_argument("--processes", action=argparse.BooleanOptionalAction, default=True,
                   help="embedded cluster workers as processes (default) or threads")
    _progress_flags(t)
    t.set_defaults(func=cmd_transform)

    i = sub.add_parser("info", help="describe a zarr store (model, scores or data)")
    i.add_argument("store")
    i.add_argument("--storage-options", help="fsspec options as JSON, for s3:// URLs")
    i.set_defaults(func=cmd_info)

    v = sub.add_parser("validate", help="check a YAML config without running it",
                       description="Checks, in a few seconds, without a cluster or a pass over "
                       "the data: the config's keys and types, that the store opens, the "
                       "variable, dimensions and weights, the model's parameters for the "
                       "data's shape, write access to output.store and checkpoints, and the "
                       "cluster kind's package. Exit code 0: valid; 2: the problems found.")
    v.add_argument("config")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    v.add_argument("--job-script", action="store_true",
                   help="print the batch job script of a slurm/pbs/sge/lsf/htcondor cluster "
                   "(checks the cluster section only, so it works away from the cluster)")
    v.set_defaults(func=cmd_validate)

    m = sub.add_parser("make-data", help="write a synthetic zarr dataset, block by block",
                       description="Parameters of a kind not covered by the options are given "
                       "with --set name=value.")
    m.add_argument("path", help="zarr store path or s3:// URL")
    m.add_argument("--kind", choices=_DataKinds(), default="low_rank", metavar="KIND",
                   help="what to generate: %(choices)s (default %(default)s)")
    m.add_argument("--n-samples", type=int)
    m.add_argument("--size", help="total size instead of --n-samples, e.g. 4GB")
    m.add_argument("--n-features", type=int)
    m.add_argument("--chunk-rows", type=int)
    m.add_argument("--dtype")
    m.add_argument("--seed", type=int)
    m.add_argument("--density", type=float,
                   help="kind counts: expected fraction of non-zero counts (default 0.1)")
    m.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="another parameter of the kind, e.g. rank=20 or missing=0.1")
    m.add_argument("--storage-options", help="fsspec options as JSON, for s3:// URLs")
    m.add_argument("--codec", help="compression: lz4 (default: Blosc-LZ4 with byte shuffle, "
                   "the fastest to decode in benchmarks/codecs.py), lz4-bitshuffle, zstd "
                   "(zarr's default) or none")
    m.add_argument("--overwrite", action="store_true",
                   help="replace a dataset already at PATH (only a scalepca dataset store is "
                   "ever replaced)")
    m.add_argument("--scheduler", help="write from an existing dask cluster")
    _progress_flags(m)
    m.set_defaults(func=cmd_make_data)
    return p


def _one_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return " ".join(text.split())


def main(argv=None) -> int:
    import yaml

    from .config import ConfigError

    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.INFO if args.verbose else logging.WARNING)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    pkg = logging.getLogger("scalepca")
    pkg.addHandler(handler)
    if args.verbose:
        pkg.setLevel(logging.INFO)
    def said(err) -> str:
        return speak_cli(_one_line(err), command=args.command,
                         method=getattr(args, "method", None))

    try:
        return args.func(args)
    except (ConfigError, UserError, FileNotFoundError, FileExistsError, yaml.YAMLError,
            ImportError) as err:
        print(f"scalepca: error: {said(err)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (ValueError, TypeError, KeyError) as err:
        # raised by validation before any compute (parameters, shapes, dtypes)
        if args.verbose:
            raise
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"scalepca: error: {said(msg)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("scalepca: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # a failed job: one line, details with -v
        if args.verbose:
            raise
        print(f"scalepca: job failed: {type(err).__name__}: {_one_line(err)}", file=sys.stderr)
        return EXIT_JOB_FAILED
    finally:
        pkg.removeHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
