"""The scalepca command line: run | transform | info | validate | plan | make-data |
pp-pca.

Exit codes: 0 success; 2 a user mistake (bad config or arguments, missing store,
missing optional package), reported in one line; 1 a failed job (a worker died, a
compute raised), reported in one line; 130 interrupted (Ctrl+C), saying which outputs
were written completely before it; -v shows the log and the full traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import logging
import sys
import time

from .app.console import cli_warnings
from .app.messages import scheduler_lost, speak_cli, store_unreachable
from .app.pipeline import (
    UserError,
    _abs,
    _error_text,
    _is_url,
    _no_data_store,
    _one_line,
    _shape,
    _store_exists,
    generate_data,
    open_data,
    summary,
    transform_data,
    transform_scores,
)
from .app.preflight import check_config

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


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


# -- commands --------------------------------------------------------------------------
def _load(args, problems: list | None = None) -> dict:
    """The validated config of ``args.config`` (+ ``--set``), local paths made absolute.
    ``problems``: a list the config's problems are appended to (see ``validate_config``)
    instead of raising the first."""
    from .app.config import read_config, validate_config

    sets = list(args.set)
    if getattr(args, "update", False):  # run's --update
        sets.append("output.update=true")
    cfg = validate_config(read_config(args.config, sets), problems)
    if cfg["model"] is not None:
        args.method = cfg["model"][
            "method"
        ]  # error messages name this estimator's keys
    if cfg["data"] is not None:
        cfg["data"]["path"] = _abs(cfg["data"]["path"])
    if cfg["output"] is not None and cfg["output"]["store"]:
        cfg["output"]["store"] = _abs(cfg["output"]["store"])
    return cfg


def _cluster(args, own: dict) -> dict:
    """The cluster section a command runs on: the scheduler of ``--scheduler`` when
    given, else ``own`` (the config's, or the command's flags')."""
    if args.scheduler:
        return {"kind": "address", "address": args.scheduler}
    return dict(own)


def cmd_run(args) -> int:
    from .app.cluster import connect, progress, reporting_lost_workers
    from .app.progress import stage
    from .app.timing import RunTimings
    from .app.update import NewFit
    from .persistence.registry import estimator_class

    cfg = _load(args)
    ccfg = _cluster(args, cfg["cluster"])
    ran = {**cfg, "cluster": ccfg}  # the config as run
    show = cfg["progress"] and not args.no_progress and not args.quiet
    method, params = cfg["model"]["method"], cfg["model"]["params"]
    dcfg = cfg["data"]
    present = _store_exists(dcfg["path"], dcfg["storage_options"])
    generating = bool(dcfg["generate"]) and not present
    if dcfg["generate"] is None and not present:
        raise FileNotFoundError(f"{_no_data_store(dcfg)} (data.path)")
    # what `validate` checks, before a cluster starts: a mistake costs a second, not a
    # cluster
    problems, _ = check_config(ran)
    if problems:
        spoken = speak_cli(problems[0], method=getattr(args, "method", None))
        raise UserError(_located(args, spoken))
    timings = RunTimings()
    with contextlib.ExitStack() as stack:
        with timings.stage("starting the cluster"):
            client = stack.enter_context(connect(ccfg, quiet=args.quiet))
        stack.enter_context(reporting_lost_workers(client))
        stack.enter_context(progress(show, client=client))
        stack.enter_context(timings.passes())
        with timings.stage("data generation" if generating else "opening the data"):
            X = open_data(cfg["data"], method=method, quiet=args.quiet)
        if generating:  # the dataset: written before the rest
            args.written.append(dcfg["path"])
        if cfg["output"]["update"]:
            fitted = _update(cfg, X, timings)
            if fitted is None:
                return EXIT_OK
        else:
            fitted = NewFit(estimator_class(method)(**params), X, cfg)
            with timings.stage("fit"):
                fitted.est.fit(X)
        est = fitted.est
        print(
            summary(
                est, data_shape=_shape(X), elapsed=timings.stages["fit"], method=method
            ),
            flush=True,
        )
        for line in fitted.summary_lines():
            print(line, flush=True)
        if cfg["output"]["store"]:
            written = args.written  # each store once complete: an interrupt says which
            before = len(written)  # a generated dataset: announced when generated
            fitted.write_outputs(cfg["output"], written, timings)
            for path in written[before:]:
                print(f"written: {path}", flush=True)
            if cfg["output"].get("report"):  # one self-contained HTML page
                from .app.report import run_report

                with stage("writing the report"):
                    path = run_report(
                        est,
                        X,
                        ran,
                        timings=timings,
                        client=client,
                        written=written[before:],
                        update=fitted.report_rows(),
                        command=args.argv,
                        config_file=args.config,
                    )
                written.append(path)
                print(f"written: {path}", flush=True)
    print(
        f"total time: {timings.total():.2f} s", flush=True
    )  # the fit's is in the summary
    return EXIT_OK


def _update(cfg, X, timings):
    """``run --update``: the model updated with the new rows (``None``: there are
    none)."""
    from .app.update import plan_update

    upd = plan_update(cfg, X)  # every refusal before a row is read
    if upd.n_new == 0:
        # an interrupted update whose model was saved: finish it
        if upd.pending is not None:
            upd.write(cfg["output"])
        print(
            "update: no rows appended since the "
            f"model's {upd.n_seen:,}; nothing to update",
            flush=True,
        )
        return None
    with timings.stage("checking the rows seen"):
        upd.check_rows()
    with timings.stage("fit"):
        upd.est.partial_fit(upd.new_rows())
    return upd


def cmd_transform(args) -> int:
    from .app.cluster import connect, progress
    from .app.outputs import transform_output_problem
    from .io import write_array
    from .persistence.loading import load

    so = _json_arg(args.storage_options, "--storage-options")
    model, data, out = _abs(args.model), _transform_data_arg(args.data), _abs(args.out)
    # where the scores go, then the model and the data's metadata: mistakes fail before
    # a cluster starts
    problem = transform_output_problem(
        out, model=model, data=data, overwrite=args.overwrite, storage_options=so
    )
    if problem:
        raise UserError(problem)
    est = load(model, storage_options=so)
    X = transform_data(
        est,
        data,
        variable=args.variable,
        sample_dims=args.sample_dims,
        weights=args.weights,
        storage_options=so,
        keep=_abs(args.keep),
    )
    plink = _plink_target(args, est, out, data) if args.plink else None
    scores, attrs = transform_scores(est, X)
    local = {
        "kind": "local",
        "n_workers": args.n_workers,
        "threads_per_worker": args.threads_per_worker,
        "processes": args.processes,
    }
    ccfg = _cluster(args, local)
    quiet = args.no_progress or args.quiet
    with connect(ccfg, quiet=quiet) as client, progress(not quiet, client=client):
        write_array(
            scores,
            out,
            name="scores",
            storage_options=so,
            overwrite=args.overwrite,
            flag="--overwrite",
            inputs=[("the model", model), *_named_data(data)],
            attrs=attrs,
        )
        args.written.append(out)  # each store once complete: an interrupt says which
        if plink is not None:
            from .io._bed import write_plink_scores

            args.written += write_plink_scores(
                plink, est, X, scores, storage_options=so
            )
    for path in args.written:
        print(f"written: {path}")
    return EXIT_OK


def _transform_data_arg(paths: list[str]):
    """``transform``'s DATA: one path, or a list of .bed paths read as one matrix
    (anything else in a list is refused by name, before a cluster starts)."""
    if len(paths) == 1:
        return _abs(paths[0])
    from .io._bed_cohorts import check_bed_list

    try:
        return [_abs(p) for p in check_bed_list(paths)]
    except ValueError as err:
        raise UserError(f"DATA: {err}") from None


def _named_data(data) -> list[tuple[str, str]]:
    """``("the data", path)`` for each path of ``transform``'s DATA."""
    from ._schema import as_list

    return [("the data", p) for p in as_list(data)]


def _plink_target(args, est, out: str, data) -> str:
    """The prefix of ``transform --plink``'s files (``--out`` without ``.zarr``),
    after what stops them is refused: data that are not a .bed, a model that does not
    fit PLINK's PCA, the files' places."""
    from .app.outputs import plink_file_problem, plink_files
    from .io._bed import plink_model_problem
    from .preprocessing.readers import detect

    if detect(data) != "bed":
        raise UserError(
            "--plink writes PLINK's .eigenvec and "
            f".eigenval of a PLINK .bed; {data} is not one"
        )
    problem = plink_model_problem(est)
    if problem:
        raise UserError(f"--plink: {problem}")
    prefix = out.rstrip("/").removesuffix(".zarr")
    for path in plink_files(prefix):
        problem = plink_file_problem(
            path,
            overwrite=args.overwrite,
            flag="--overwrite",
            storage_options=_json_arg(args.storage_options, "--storage-options"),
        )
        if problem:
            raise UserError(f"--plink: {problem}")
    return prefix


def cmd_pp_pca(args) -> int:
    """scanpy's pipeline on an AnnData store, results written into it
    (scalepca.pp.pca)."""
    from .app.cluster import connect, progress
    from .io._anndata_write import RESULTS, results_stamp
    from .pp import pca
    from .preprocessing.readers import detect

    store = _abs(args.store)
    if detect(store) != "anndata":
        raise UserError(
            f"{args.store!r} is not an AnnData store (.zarr folder or .h5ad file "
            "with 'encoding-type: anndata')"
        )
    steps = dict(
        normalize_total=args.normalize_total,
        target_sum=args.target_sum,
        exclude_highly_expressed=args.exclude_highly_expressed,
        log1p=args.log1p,
        flavor=args.flavor,
        n_top_genes=args.n_top_genes,
        scale=args.scale,
        max_value=args.max_value,
        layer=args.layer,
        chunks=args.chunk_rows,
    )
    if args.mask_var is not None:
        steps["mask_var"] = None if args.mask_var == "none" else args.mask_var
    if args.mask_obs is not None:
        steps["mask_obs"] = args.mask_obs
    ccfg = _cluster(args, {"kind": "local", "n_workers": args.n_workers})
    quiet = args.no_progress or args.quiet
    before = results_stamp(store)
    try:
        with connect(ccfg, quiet=quiet) as client, progress(not quiet, client=client):
            model = pca(store, args.n_comps, **steps)
    except KeyboardInterrupt:  # the results are written into the store in place, last
        if results_stamp(store) != before:
            args.partly.append(f"{store} ({', '.join(RESULTS)}: run pp-pca again)")
        raise
    ratio = model.explained_variance_ratio_
    print(
        f"written into {store}: obsm/X_pca, varm/PCs, uns/pca"
        + (", var (highly variable genes)" if args.flavor else "")
        + f"; {model.n_features_in_} genes, {model.singlecell_n_passes_} passes; "
        f"variance ratio of the first {min(5, ratio.size)}: "
        + ", ".join(f"{r:.4f}" for r in ratio[:5])
    )
    return EXIT_OK


def cmd_info(args) -> int:
    from .preprocessing.readers import READERS, detect

    so = _json_arg(args.storage_options, "--storage-options")
    reader = READERS[detect(args.store, storage_options=so)]
    try:
        lines = reader.describe(args.store, storage_options=so, verbose=args.verbose)
    except (OSError, ValueError) as err:  # no store, or not what it says it is
        raise UserError(str(err)) from None
    print("\n".join(lines))
    return EXIT_OK


def _located(args, problem: str) -> str:
    """A problem of the config after the file and the line of the key it names
    (``config.yaml:12: ...``, as compilers say it), as ``validate`` and ``run`` both
    say it; as it is where the file has no such key."""
    from .app.yaml_files import key_lines, problem_line

    line = problem_line(problem, key_lines(args.config), args.set)
    if line is None:
        return problem
    return f"{args.config}:{line}: {problem}"


def _checked(args, *, data: bool = True):
    """``(cfg, notes)`` of the config of ``args`` checked as ``validate`` checks it, or
    None once every problem found is printed, each at the line of its key."""
    found = []  # every problem of the config at once: its keys, then against the data
    cfg = _load(args, found)
    problems, notes = check_config(cfg, data=data)
    # the config's own problems are in its words already (speaking them again turned the
    # key list "store, storage_options, …" of output into "store, data.storage_options,
    # …")
    said = found + [
        speak_cli(problem, method=getattr(args, "method", None)) for problem in problems
    ]
    for problem in dict.fromkeys(said):  # each at the line of the key it names
        print(f"scalepca: error: {_located(args, problem)}", file=sys.stderr)
    if said:
        return None
    return cfg, notes


def cmd_validate(args) -> int:
    from .app.config import JOBQUEUE_KINDS

    checked = _checked(args, data=not args.job_script)
    if checked is None:
        return EXIT_USER_ERROR
    cfg, notes = checked
    kind = cfg["cluster"]["kind"]
    print(f"{args.config}: valid (method {cfg['model']['method']}, cluster {kind})")
    if not args.quiet:
        for note in notes:
            print(f"  {note}")
    if args.job_script:
        if kind not in JOBQUEUE_KINDS:
            raise UserError(
                f"--job-script needs a batch cluster kind "
                f"({', '.join(JOBQUEUE_KINDS)}); the config has {kind!r}"
            )
        from .app.cluster import make_cluster

        cluster = make_cluster(cfg["cluster"])
        try:
            print(cluster.job_script())
        finally:
            cluster.close()
    return EXIT_OK


def cmd_plan(args) -> int:
    from .app.plan import describe_plan, plan

    checked = _checked(args)  # refused as validate refuses it
    if checked is None:
        return EXIT_USER_ERROR
    cfg = checked[0]
    for flag in ("workers", "threads", "hosts"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UserError(f"--{flag} must be at least 1; got {value}")
    out = plan(cfg, args)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(describe_plan(out, args.config))
    return EXIT_OK


def _n_samples(args, sig, params) -> int:
    """The rows ``make-data`` writes: ``--n-samples``, or as many as ``--size`` bytes
    hold."""
    import numpy as np
    from dask.utils import parse_bytes

    if args.size is not None:
        if args.n_samples is not None:
            raise UserError("give --n-samples or --size, not both")
        itemsize = np.dtype(params.get("dtype", sig["dtype"].default)).itemsize
        per_row = itemsize
        if "density" in sig:  # sparse (CSR): stored values and column indices of a row
            per_row = (itemsize + 4) * params.get("density", sig["density"].default)
        if "n_features" in sig:
            per_row *= params.get("n_features", sig["n_features"].default)
        else:  # gridded: one row is a (lat, lon) field, or two of them
            fields = [("n_lat", "n_lon"), ("n_lat_y", "n_lon_y")]
            per_row *= sum(
                params.get(a, sig[a].default) * params.get(b, sig[b].default)
                for a, b in fields
                if a in sig
            )
        try:
            return max(1, parse_bytes(args.size) // per_row)
        except ValueError as err:
            raise UserError(f"--size {args.size!r}: {err}") from None
    return args.n_samples if args.n_samples is not None else 100_000


def cmd_make_data(args) -> int:
    from .app.config import ConfigError, apply_overrides, check_generate_params
    from .datasets import GENERATORS

    func = GENERATORS[args.kind]
    sig = inspect.signature(func).parameters
    params = apply_overrides({}, args.set)
    for opt in ("n_features", "chunk_rows", "dtype", "seed", "density"):
        value = getattr(args, opt)
        if value is not None:
            if opt not in sig:
                raise UserError(
                    f"--{opt.replace('_', '-')} does not apply to kind {args.kind!r};"
                    f" its parameters: {', '.join(sig)}"
                )
            params[opt] = value
    if "n_features" in sig and sig["n_features"].default is inspect.Parameter.empty:
        params.setdefault("n_features", 100)
    params["n_samples"] = _n_samples(args, sig, params)
    try:
        check_generate_params(func, params, "make-data")
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
    from .io._bed import is_bed_path

    # an interrupted dataset is written again; anything else but a dataset never is
    try:
        if args.kind == "genotypes" or is_bed_path(path):
            _check_bed_kind(args.kind, path, args.overwrite)
        else:
            check_replace(
                path,
                DATASET,
                overwrite=args.overwrite,
                storage_options=so,
                flag="--overwrite",
            )
    except FileExistsError as err:
        raise UserError(str(err)) from None

    from .app.cluster import connect, progress
    from .app.progress import stage

    show = not (args.no_progress or args.quiet)
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        client = None
        if args.scheduler:
            client = stack.enter_context(
                connect(kind="address", address=args.scheduler, quiet=args.quiet)
            )
        stack.enter_context(progress(show, client=client))
        with stage(f"make-data {args.kind}"):
            generate_data(
                {"kind": args.kind, **params},
                path,
                storage_options=so,
                overwrite=True,
                codec=codec,
                quiet=args.quiet,
            )
    if not args.quiet:
        print(
            f"wrote {args.kind} dataset to {path} in {time.perf_counter() - t0:.1f} s"
        )
    return EXIT_OK


def _check_bed_kind(kind: str, path: str, overwrite: bool) -> None:
    """A PLINK .bed path for kind genotypes (and for it only); one there replaced
    only with ``--overwrite``."""
    from .datasets.genotypes import check_bed_target

    if kind != "genotypes":
        raise UserError(
            f"{path}: a .bed path holds PLINK genotypes; --kind {kind} writes a "
            "zarr store (give another path, or --kind genotypes)"
        )
    try:
        check_bed_target(path, overwrite=overwrite, flag="--overwrite")
    except ValueError as err:
        raise UserError(f"--kind genotypes: {err}") from None


# -- parser ----------------------------------------------------------------------------
class _DataKinds:
    """The ``make-data --kind`` choices, read from :mod:`scalepca.datasets` on first
    use.

    Importing the generators imports dask.array (about a second); ``scalepca --help``
    and every command but ``make-data`` never look at the choices, so they do not pay
    for it.
    """

    def _names(self) -> list[str]:
        from .datasets import GENERATORS

        return list(GENERATORS)

    def __contains__(self, name) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


_RUN_EXAMPLES = """examples:
  scalepca run configs/pca.yaml
  scalepca run job.yaml --set model.n_components=20 --set cluster.n_workers=8
  scalepca run job.yaml --scheduler tcp://10.0.0.5:8786 -q"""
_TRANSFORM_EXAMPLES = """examples:
  scalepca transform out/model.zarr new.zarr --out new_scores.zarr
  scalepca transform out/model.zarr sst.nc --variable sst --out eofs.zarr --n-workers 4
  scalepca transform out/mca/model.zarr winters.nc --out mca.zarr   # both fields by name
  scalepca transform out/model.zarr batch1.bed batch2.bed --out scores.zarr --plink"""
_INFO_EXAMPLES = """examples:
  scalepca info out/model.zarr
  scalepca info s3://bucket/data.zarr --storage-options '{"anon": true}'"""
_VALIDATE_EXAMPLES = """examples:
  scalepca validate job.yaml
  scalepca validate slurm.yaml --job-script"""
_PLAN_EXAMPLES = """examples:
  scalepca plan job.yaml
  scalepca plan job.yaml --workers 100 --threads 4 --worker-memory 16GiB \\
      --bandwidth 1.25GB --json      # 100 hosts, 10 Gbit/s links
  scalepca plan job.yaml --rates builtin   # no probe: the cost model's constants"""
_PP_PCA_EXAMPLES = """examples:
  scalepca pp-pca cells.zarr --normalize-total --log1p --flavor seurat --n-top-genes 2000 \\
      --scale --max-value 10
  scalepca pp-pca pbmc.h5ad --n-comps 30          # X already prepared; var/highly_variable used"""
_MAKE_DATA_EXAMPLES = """examples:
  scalepca make-data data.zarr --n-samples 1000000 --n-features 256
  scalepca make-data big.zarr --size 4GB --dtype float32 --set rank=20
  scalepca make-data sst.zarr --kind gridded --set n_lat=90 --set n_lon=180"""


def _common_flags(parser, *, progress: bool, top: bool = False) -> None:
    """-v/-q (before or after the subcommand) and, for commands that compute,
    --no-progress."""
    default = (
        False if top else argparse.SUPPRESS
    )  # a subcommand's flag never resets the top's
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="log every pass; show every warning and full tracebacks",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="results and errors only: no progress, dashboard link or notes",
    )
    if progress:
        parser.add_argument(
            "--no-progress",
            action="store_true",
            help="no progress (a bar per pass on a terminal, else one line per pass)",
        )


#: the documentation page that describes each command: its title and its file in the
#: built site. The site is not published online, so the help says how to build it.
DOCS_PAGES = {
    "run": ("Config reference", "config.html"),
    "transform": ("Getting started", "getting-started.html"),
    "info": ("Getting started", "getting-started.html"),
    "validate": ("Config reference", "config.html"),
    "make-data": ("Config reference", "config.html#data-generate"),
    "pp-pca": ("Single-cell counts (AnnData)", "guide/single_cell.html"),
    "plan": ("Scaling: what a fit costs at 1 TB, 10 TB and 100 TB", "scaling.html"),
}
DOCS_BUILD = "python -m sphinx -b html docs docs/_build/html"


def _docs_line(name: str) -> str:
    title, page = DOCS_PAGES[name]
    return (
        f'documentation: the page "{title}" of the scalepca documentation, which is\n'
        "  not published online; build it from a source checkout with\n"
        f"  `{DOCS_BUILD}`\n"
        f"  and open docs/_build/html/{page}"
    )


def _subparser(
    sub, name: str, help: str, examples: str, description: str | None = None
):
    import textwrap

    text = textwrap.fill(description or help[0].upper() + help[1:] + ".", width=79)
    return sub.add_parser(
        name,
        help=help,
        description=text,
        epilog=f"{examples}\n\n{_docs_line(name)}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _set_flag(parser) -> None:
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, as run does (repeatable)",
    )


def _storage_options(parser) -> None:
    parser.add_argument(
        "--storage-options",
        metavar="JSON",
        help="fsspec options as a JSON object, for s3:// and other URLs "
        "(default: none)",
    )


def _add_run(sub) -> None:
    r = _subparser(
        sub, "run", "fit a model as described by a YAML config", _RUN_EXAMPLES
    )
    r.add_argument(
        "config",
        help="the run's YAML config: sections data, model, cluster, output, "
        'progress (every key: the documentation\'s "Config reference" page, below; '
        "`scalepca validate` checks a config)",
    )
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. model.n_components=20 (repeatable)",
    )
    r.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="address of an existing dask "
        "scheduler (tcp://...); overrides the config's cluster section",
    )
    r.add_argument(
        "--update",
        action="store_true",
        help="update the previous run's model with the rows appended to the zarr "
        "store since, reading only them, and append their scores "
        "(= --set output.update=true)",
    )
    _common_flags(r, progress=True)
    r.set_defaults(func=cmd_run)


def _add_transform(sub) -> None:
    t = _subparser(
        sub, "transform", "scores of DATA under a saved model", _TRANSFORM_EXAMPLES
    )
    t.add_argument("model", help="model store written by run or save()")
    t.add_argument(
        "data",
        nargs="+",
        help="zarr or NetCDF store path or URL; PLINK .bed files: one, or several "
        "read as one matrix (their samples appended, as a list in data.path)",
    )
    t.add_argument(
        "--out",
        required=True,
        help="scores store to write (never the model or "
        "the data, nor inside or around them)",
    )
    t.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a scores store already at --out (only a complete scalepca "
        "output store is ever replaced)",
    )
    t.add_argument(
        "--plink",
        action="store_true",
        help="a PLINK .bed fitted with standardize genotype: also write "
        "OUT's .eigenvec and .eigenval (--out "
        "without .zarr) as plink2 --pca writes them",
    )
    t.add_argument(
        "--keep",
        metavar="FILE",
        help="a PLINK .bed: only the samples of "
        "this keep file (FID IID per line, PLINK's --keep)",
    )
    t.add_argument(
        "--variable", help="array/variable inside DATA (default: the model's)"
    )
    t.add_argument(
        "--sample-dims",
        nargs="+",
        metavar="DIM",
        help="sample dimensions of N-D xarray data (default: the model's)",
    )
    t.add_argument(
        "--weights",
        help="feature weights: sqrt_coslat, coslat or a variable name "
        "(default: the model's; a model fitted with weights applies them itself)",
    )
    _storage_options(t)
    t.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="address of an existing dask "
        "scheduler (default: start an embedded cluster)",
    )
    t.add_argument(
        "--n-workers",
        type=int,
        metavar="N",
        help="workers of the embedded cluster (default: dask's choice)",
    )
    t.add_argument(
        "--threads-per-worker",
        type=int,
        metavar="N",
        help="threads per worker of the embedded cluster (default: dask's choice)",
    )
    t.add_argument(
        "--processes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="embedded cluster workers as processes (default) or threads",
    )
    _common_flags(t, progress=True)
    t.set_defaults(func=cmd_transform)


def _add_info_validate(sub) -> None:
    i = _subparser(
        sub, "info", "describe a store (model, scores or data)", _INFO_EXAMPLES
    )
    i.add_argument("store", help="zarr, NetCDF or AnnData store path or URL")
    _storage_options(i)
    _common_flags(i, progress=False)
    i.set_defaults(func=cmd_info)
    v = _subparser(
        sub,
        "validate",
        "check a YAML config without running it",
        _VALIDATE_EXAMPLES,
        description="Checks, in a few seconds, without a "
        "cluster or a pass over the data: the config's keys and types, that the "
        "store opens, the variable, dimensions and weights, the model's parameters "
        "for the data's shape, write access to output.store and checkpoints, and the "
        "cluster kind's package. Exit code 0: valid; 2: the problems found.",
    )
    v.add_argument("config", help="the YAML config to check")
    _set_flag(v)
    v.add_argument(
        "--job-script",
        action="store_true",
        help="print the batch job script of a slurm/pbs/sge/lsf/htcondor cluster "
        "(checks the cluster section only, so it works away from the cluster)",
    )
    _common_flags(v, progress=False)
    v.set_defaults(func=cmd_validate)


def _add_plan(sub) -> None:
    p = _subparser(
        sub,
        "plan",
        "predict a config's passes, bytes and time without running it",
        _PLAN_EXAMPLES,
        description="Predicts, from the data's metadata and without a cluster or a "
        "pass over the data, what run will do: the solver, the passes, the tasks of "
        "each, the bytes each reads and moves between workers (partials up the "
        "reduction trees, factors sent to the workers), a worker's peak memory and "
        "the seconds of each pass. Rates come from a probe of a few seconds on this "
        "machine, kept in the user's cache folder (--rates). Exit code 0: planned; "
        "2: the config's problems, as validate reports them.",
    )
    p.add_argument("config", help="the YAML config to plan")
    _set_flag(p)
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="workers of the cluster (default: cluster.n_workers, a batch cluster's "
        "jobs × processes, else 2)",
    )
    p.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="threads per worker (default: cluster.threads_per_worker, a batch "
        "cluster's cores / processes, else 1)",
    )
    p.add_argument(
        "--worker-memory",
        metavar="BYTES",
        help="memory per worker, e.g. 4GiB, checked against the peak "
        "(default: cluster.memory_limit, a batch cluster's memory / processes)",
    )
    p.add_argument(
        "--bandwidth",
        metavar="BYTES",
        help="bytes per second of each host's link, e.g. 125MB (1 Gbit/s); "
        "prices the bytes moved between hosts (default: none cross a link: one host)",
    )
    p.add_argument(
        "--store-bandwidth",
        metavar="BYTES",
        help="bytes per second of the data store's link, for a store read over the "
        "network, e.g. 50MB (an object store; default: read where the workers run)",
    )
    p.add_argument(
        "--hosts",
        type=int,
        metavar="N",
        help="hosts the workers are spread over (default: one per worker with "
        "--bandwidth, else 1)",
    )
    p.add_argument(
        "--rates",
        choices=["cached", "probe", "builtin"],
        default="cached",
        help="cached: this machine's rates, probed once (a few seconds) and kept; "
        "probe: measure them again; builtin: the cost model's constants, no probe "
        "(default %(default)s)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the plan as JSON (keys passes, tasks_per_pass, "
        "bytes_read_per_pass, bytes_moved_per_pass, peak_worker_bytes, "
        "seconds_per_pass, and more)",
    )
    _common_flags(p, progress=False)
    p.set_defaults(func=cmd_plan)


def _add_make_data(sub) -> None:
    m = _subparser(
        sub,
        "make-data",
        "write a synthetic dataset, block by block",
        _MAKE_DATA_EXAMPLES,
        description="Write a synthetic dataset, block by "
        "block. Parameters of a kind not covered by the options are given with "
        "--set name=value; options left out take the kind's defaults.",
    )
    m.add_argument("path", help="zarr store path or s3:// URL to write")
    m.add_argument(
        "--kind",
        choices=_DataKinds(),
        default="low_rank",
        metavar="KIND",
        help="what to generate: %(choices)s (default %(default)s)",
    )
    m.add_argument("--n-samples", type=int, metavar="N", help="rows (default 100,000)")
    m.add_argument("--size", help="total size instead of --n-samples, e.g. 4GB")
    m.add_argument(
        "--n-features",
        type=int,
        metavar="N",
        help="columns (default: the kind's, or 100)",
    )
    m.add_argument(
        "--chunk-rows",
        type=int,
        metavar="N",
        help="rows per stored chunk (default: the kind's, 50,000 for low_rank)",
    )
    m.add_argument(
        "--dtype", help="float64 or float32 (default: the kind's, float64 for low_rank)"
    )
    m.add_argument(
        "--seed", type=int, help="random seed; same seed, same data (default 0)"
    )
    m.add_argument(
        "--density",
        type=float,
        help="kind counts: expected fraction of non-zero counts (default 0.1)",
    )
    m.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another parameter of the kind, e.g. rank=20 or missing=0.1",
    )
    _storage_options(m)
    m.add_argument(
        "--codec",
        help="compression: lz4 (default: Blosc-LZ4 with byte shuffle, "
        "the fastest to decode in benchmarks/codecs.py), lz4-bitshuffle, zstd "
        "(zarr's default) or none",
    )
    m.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a dataset already at PATH (only a scalepca dataset store is "
        "ever replaced; default: refuse)",
    )
    m.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="write from an existing dask cluster (default: this process's threads)",
    )
    _common_flags(m, progress=True)
    m.set_defaults(func=cmd_make_data)


def _add_pp_pca(sub) -> None:
    c = _subparser(
        sub,
        "pp-pca",
        "scanpy's normalize_total, log1p, highly_variable_genes, "
        "scale and pca on an AnnData store, results written into it",
        _PP_PCA_EXAMPLES,
        description="scanpy's pipeline on an AnnData store (.zarr "
        "or .h5ad) in a few passes, without rewriting X: obsm/X_pca, varm/PCs, "
        "uns/pca and (with --flavor) the highly variable genes in var, as scanpy "
        "writes them. Steps left out are not run (X taken as it is).",
    )
    c.add_argument("store", help="AnnData store path (.zarr folder or .h5ad file)")
    c.add_argument(
        "--n-comps",
        type=int,
        metavar="K",
        help="principal components (default: scanpy's, 50)",
    )
    c.add_argument("--layer", help="layer of raw counts (default: X)")
    c.add_argument(
        "--normalize-total",
        action="store_true",
        help="scale each cell's counts to --target-sum",
    )
    c.add_argument(
        "--target-sum",
        type=float,
        metavar="T",
        help="counts per cell after normalising (default: the median)",
    )
    c.add_argument(
        "--exclude-highly-expressed",
        action="store_true",
        help="leave genes above 5%% of a cell's counts out of its total",
    )
    c.add_argument("--log1p", action="store_true", help="log(1 + x) after normalising")
    c.add_argument(
        "--flavor",
        choices=["seurat", "cell_ranger", "seurat_v3"],
        help="select highly variable genes this way (default: no selection)",
    )
    c.add_argument(
        "--n-top-genes",
        type=int,
        metavar="N",
        help="highly variable genes to keep (default: scanpy's cutoffs)",
    )
    c.add_argument(
        "--mask-var",
        metavar="COLUMN",
        help="boolean var column of the genes to "
        "use, or 'none' (default: highly_variable when present, as scanpy)",
    )
    c.add_argument(
        "--mask-obs",
        metavar="COLUMN",
        help="boolean obs column of the cells to "
        "analyse, read where they lie; the other cells' X_pca rows are NaN "
        "(default: every cell)",
    )
    c.add_argument(
        "--scale", action="store_true", help="genes to unit variance, centred"
    )
    c.add_argument(
        "--max-value", type=float, metavar="V", help="clip scaled values to ±V"
    )
    c.add_argument(
        "--chunk-rows",
        type=int,
        metavar="N",
        help="cells per block (default: about 64 MiB of stored values)",
    )
    c.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="address of an existing dask "
        "scheduler (default: start an embedded cluster)",
    )
    c.add_argument(
        "--n-workers",
        type=int,
        metavar="N",
        help="workers of the embedded cluster (default: dask's choice)",
    )
    _common_flags(c, progress=True)
    c.set_defaults(func=cmd_pp_pca)


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    p = argparse.ArgumentParser(
        prog="scalepca",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="`scalepca COMMAND --help` describes a command, with examples.",
    )
    p.add_argument("--version", action="version", version=f"scalepca {__version__}")
    _common_flags(p, progress=False, top=True)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(sub)
    _add_transform(sub)
    _add_info_validate(sub)
    _add_plan(sub)
    _add_make_data(sub)
    _add_pp_pca(sub)
    return p


def main(argv=None) -> int:
    import yaml

    from .app.config import ConfigError

    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the run report's title
    args.written = []  # the stores a command has written completely, in order
    args.partly = []  # those it had begun to write into when interrupted
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.INFO if args.verbose else logging.WARNING)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s")
    )
    pkg = logging.getLogger("scalepca")
    pkg.addHandler(handler)
    if args.verbose:
        pkg.setLevel(logging.INFO)

    def said(err) -> str:
        return speak_cli(
            _one_line(err), command=args.command, method=getattr(args, "method", None)
        )

    try:
        with cli_warnings(
            command=args.command,
            method=lambda: getattr(args, "method", None),
            verbose=args.verbose,
        ):
            return args.func(args)
    except (
        ConfigError,
        UserError,
        FileNotFoundError,
        FileExistsError,
        yaml.YAMLError,
        ImportError,
    ) as err:
        for problem in getattr(err, "problems", None) or [
            err
        ]:  # a config's: one line each
            text = _one_line(problem) if isinstance(err, ConfigError) else said(problem)
            print(f"scalepca: error: {text}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (ValueError, TypeError, KeyError) as err:
        # raised by validation before any compute (parameters, shapes, dtypes)
        if args.verbose:
            raise
        print(f"scalepca: error: {said(_error_text(err))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:  # Ctrl+C: the cluster closed on the way out; one line
        said = []
        if args.written:
            said.append(f"written completely before it: {', '.join(args.written)}")
        if args.partly:
            said.append(f"partly written: {', '.join(args.partly)}")
        elif args.written:
            said.append("nothing else")
        print(
            f"scalepca: interrupted ({'; '.join(said) or 'nothing written'})",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except Exception as err:  # a failed job: one line, details with -v
        if args.verbose:
            raise
        what = scheduler_lost(err) or store_unreachable(err)
        if what is None:
            what = f"{type(err).__name__}: {_one_line(err)}"
        if args.written:  # a failed run's complete outputs: named, as an interrupt does
            done = ", ".join(map(str, args.written))
            what += f" (written completely before it: {done})"
        print(f"scalepca: job failed: {what}", file=sys.stderr)
        return EXIT_JOB_FAILED
    finally:
        pkg.removeHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
