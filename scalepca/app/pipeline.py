"""The run pipeline of ``scalepca run`` and ``transform``: open the data (generating it
if the config asks), fit, write the outputs, and the summary table.

The application's layer: the command line (:mod:`scalepca.cli`) calls it; the library
never does. Heavy dependencies are imported inside the functions, so
``scalepca --help`` stays fast.
"""

from __future__ import annotations

import os


class UserError(Exception):
    """A mistake in the command line or its inputs; printed as one line, exit code 2."""


def _fmt_table(rows, headers) -> str:
    cols = [list(headers)] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    out += [
        "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cols[1:]
    ]
    return "\n".join(out)


def summary(est, *, data_shape, elapsed: float, method: str) -> str:
    """A plain-text summary table of a fitted estimator."""
    lines = [
        f"method: {method} ({type(est).__name__})   data: {data_shape[0]:,} × "
        f"{data_shape[1]:,}   fit time: {elapsed:.2f} s   passes over the data: "
        f"{getattr(est, 'n_passes_', '?')}"
    ]
    from .report_sections import is_closed_form

    for attr, label in (("n_iter_", "iterations"), ("rank_", "rank")):
        if attr == "n_iter_" and hasattr(est, attr) and is_closed_form(est):
            lines.append("solution: closed form (one direct solve, no iterations)")
        elif attr == "n_iter_" and hasattr(est, "converged_"):
            lines.append(f"iterations: {est.n_iter_:,} ({_convergence(est)})")
        elif hasattr(est, attr):
            lines.append(f"{label}: {getattr(est, attr):,}")
    ev = getattr(est, "explained_variance_", None)
    if ev is None:
        ev = getattr(est, "eigenvalues_", None)
    ratio = getattr(est, "explained_variance_ratio_", None)
    what = "explained variance"
    if ev is None and hasattr(est, "squared_covariance_"):  # MCA: the coupled modes
        ev, ratio = est.squared_covariance_, est.squared_covariance_fraction_
        what = "squared covariance"
    if ev is not None:
        import numpy as np

        from ..io._stack import mode_coords

        ev = np.ravel(np.asarray(ev))
        rows = []
        cum = 0.0
        for i, (mode, v) in enumerate(zip(mode_coords(len(ev)), ev, strict=True)):
            r = float("nan")
            if ratio is not None:
                r = float(np.ravel(np.asarray(ratio))[i])
            cum += r
            rows.append([int(mode), f"{v:.6g}", f"{100 * r:.2f}", f"{100 * cum:.2f}"])
        lines.append(_fmt_table(rows, ["mode", what, "ratio %", "cumulative %"]))
    if hasattr(est, "noise_variance_"):
        lines.append(f"noise variance σ²: {float(est.noise_variance_):.6g}")
    return "\n".join(lines)


def _convergence(est) -> str:
    """Whether an iterative fit converged, in the config's words."""
    if est.converged_:
        return f"converged: model.tol {est.tol:g} met"
    return (
        f"not converged: stopped at model.max_iter {est.max_iter:,} before model.tol "
        f"{est.tol:g} was met; raise max_iter or tol"
    )


def _is_url(path: str) -> bool:
    from ..io._fs import is_url

    return is_url(path)


def _abs(path: str | None) -> str | None:
    """Absolute local paths (workers may run elsewhere); URLs unchanged. A list of paths
    (PLINK .bed files read as one matrix): each."""
    if isinstance(path, list):
        return [_abs(p) for p in path]
    if path is None or _is_url(path):
        return path
    if path.startswith("file://"):
        path = path[len("file://") :]
    return os.path.abspath(os.path.expanduser(path))


def _store_exists(path: str, storage_options=None) -> bool:
    if isinstance(path, list):  # .bed files read as one matrix: every one of them
        return all(_store_exists(p, storage_options) for p in path)
    if _is_url(path):
        from ..io._fs import open_fs

        fs, root = open_fs(path, storage_options)
        return fs.exists(root)
    from ..io._netcdf import _has_glob

    # several NetCDF files ("data/sst_*.nc"), opened as open_matrix does
    if _has_glob(path):
        import glob

        return bool(glob.glob(path))
    return os.path.exists(path)


def generate_data(
    gen: dict,
    path: str,
    *,
    storage_options=None,
    overwrite=False,
    codec: str | None = None,
    quiet: bool = False,
) -> str:
    """Write the synthetic dataset a ``data.generate`` section describes (if absent).

    Says what it generates on standard output unless ``quiet``.
    """
    from ..datasets import GENERATORS, dataset_complete, write_dataset
    from ..io._fs import store_state

    params = dict(gen)
    kind = params.pop("kind", "low_rank")
    if not overwrite and dataset_complete(path, storage_options):
        return path
    if not overwrite and store_state(path, storage_options).complete is False:
        # written again if it is an interrupted dataset; write_dataset refuses anything
        # else
        if not quiet:
            print(
                f"scalepca: {path} is an interrupted write; generating it again",
                flush=True,
            )
    size = ", ".join(
        f"{k}={v:,}" if type(v) is int else f"{k}={v}" for k, v in params.items()
    )
    if not quiet:
        print(f"scalepca: generating {kind} dataset ({size}) at {path}", flush=True)
    data = GENERATORS[kind](**params)
    return write_dataset(
        data, path, overwrite=overwrite, storage_options=storage_options, codec=codec
    )


def open_data(
    dcfg: dict,
    *,
    method: str | None = None,
    quiet: bool = False,
    fit_steps: bool = True,
):
    """Open the ``data`` section as the matrix an estimator fits (generating it if
    asked). ``fit_steps=False`` (``validate``): ``data.singlecell``'s steps are not
    fitted, so nothing is read; the matrix then has the shape and kind the fit will
    see, not its values."""
    from ..io import open_zarr_node
    from ..io._bed import BedOptionError
    from ..io._coalesce import TASK_SIZE, open_zarr
    from ..io._fs import check_complete
    from ..io._open_options import OpenOptionError, TimeDecodeError
    from ..preprocessing import open_matrix
    from ..preprocessing._steps import WeightsError
    from .config import data_kind

    path = dcfg["path"]
    so = dcfg.get("storage_options")
    if dcfg.get("generate") is not None:
        generate_data(dcfg["generate"], path, storage_options=so, quiet=quiet)
    chunks = dcfg.get("chunks")
    # rows per chunk: an integer (a list also chunks the features, for a 2-D zarr)
    rows = None
    if isinstance(chunks, int):
        rows = chunks
    kind = data_kind(dcfg)
    opts = open_options(dcfg, kind)
    bed = bed_options(dcfg, kind)
    if kind == "anndata":
        if opts:
            raise UserError(
                f"{', '.join(repr('data.' + k) for k in opts)} apply to stores read "
                f"through xarray (NetCDF, xarray zarr); {path!r} is an AnnData store"
            )
        from .config import anndata_keys_problem

        problem = anndata_keys_problem(dcfg, f"the AnnData store {path!r}")
        if problem:  # open_matrix refuses them too; said here in the config's words
            raise UserError(problem)
        if dcfg.get("singlecell") is not None:  # raw counts through scanpy's steps
            from ..analysis.singlecell import prepared_matrix, unfitted_matrix

            if so or dcfg.get("weights") is not None:
                raise UserError(
                    "'data.singlecell' reads local AnnData stores without "
                    "'data.weights' or 'data.storage_options'"
                )
            prepare = prepared_matrix if fit_steps else unfitted_matrix
            return prepare(
                path,
                dcfg["singlecell"],
                layer=dcfg.get("layer"),
                chunks=rows,
            )
        try:
            return open_matrix(
                path,
                storage_options=so,
                format="anndata",
                layer=dcfg.get("layer"),
                chunks=rows,
                weights=dcfg.get("weights"),
            )
        except ValueError as err:
            if dcfg.get("weights") is not None:
                raise UserError(f"'data.weights' {err}") from None
            raise
    if kind == "zarr" and (method == "robust_pca" or isinstance(chunks, list)):
        # robust PCA works on 2-D blocks: keep the store's (or the given) 2-D chunking
        import dask.array as da
        import zarr

        node = open_zarr_node(path, storage_options=so)
        check_complete(node, path)
        if isinstance(node, zarr.Array) and node.ndim == 2:
            if opts:
                raise UserError(
                    f"{', '.join(repr('data.' + k) for k in opts)} apply to stores "
                    f"read through xarray; {path!r} is a zarr array"
                )
            if chunks is None:  # the store's 2-D blocks, several row chunks per task
                return open_zarr(
                    node, task_size=dcfg.get("task_size", TASK_SIZE), full_rows=False
                )
            if rows is not None:
                return da.from_zarr(node).rechunk({0: rows})
            return da.from_zarr(node).rechunk(tuple(chunks))
    variable = dcfg.get("variable")
    if isinstance(variable, list):  # several fields (multivariate_eof): one matrix each
        return [
            open_data(  # the kind decided: each field's opens go straight to it
                {**dcfg, "variable": v, "generate": None, "format": kind},
                method=method,
                quiet=quiet,
            )
            for v in variable
        ]
    try:
        return open_matrix(
            path,
            variable=variable,
            storage_options=so,
            layer=dcfg.get("layer"),
            format=kind,
            chunks=None if rows is None else {0: rows},
            sample_dims=dcfg.get("sample_dims"),
            feature_dims=dcfg.get("feature_dims"),
            weights=dcfg.get("weights"),
            task_size=dcfg.get("task_size", TASK_SIZE),
            open_options=opts,
            **bed,
        )
    except BedOptionError as err:
        raise UserError(f"data.{err.key}: {err.detail}") from None
    except WeightsError as err:
        raise UserError(f"'data.weights' {err.detail}") from None
    except TimeDecodeError as err:
        raise UserError(time_decode_problem(err)) from None
    except OpenOptionError as err:  # does not apply to this store, or failed to open it
        raise UserError(f"'data.{err.key}' {err.detail}") from None


def open_options(dcfg: dict, kind: str) -> dict | None:
    """xarray's open options the ``data`` section sets (``decode_times``,
    ``use_cftime``, ``engine``), checked for the ``kind`` of store at ``data.path``
    (:func:`~scalepca.app.config.data_kind`) in the config's words; None when none
    is set."""
    from ..io._open_options import check_open_options
    from .config import OPEN_KEYS

    given = {k: dcfg[k] for k in OPEN_KEYS if dcfg.get(k) is not None}
    if not given:
        return None
    try:
        return check_open_options(
            given, netcdf=kind == "netcdf", name=lambda key: f"'data.{key}'"
        )
    except ValueError as err:
        raise UserError(str(err)) from None


def bed_options(dcfg: dict, kind: str) -> dict:
    """The PLINK .bed subsets the ``data`` section sets (``keep``, ``exclude_ranges``),
    refused in the config's words for data of another ``kind`` than a .bed."""
    from .config import BED_KEYS

    given = {k: dcfg[k] for k in BED_KEYS if dcfg.get(k) is not None}
    if given and kind != "bed":
        keys = ", ".join(repr("data." + k) for k in given)
        raise UserError(
            f"{keys} apply to PLINK .bed data; data.path "
            f"{dcfg['path']!r} is not a .bed file"
        )
    return given


def time_decode_problem(err) -> str:
    """The sentence of a :class:`~scalepca.io._open_options.TimeDecodeError` in the
    config's words."""
    return (
        f"data.path {err.path!r}: xarray cannot decode its times "
        f"({err.reason.split('. Try')[0]}); set data.decode_times: false to keep them "
        f"as "
        "numbers, or install cftime (pip install cftime) and set data.use_cftime: true"
    )


def transform_data(
    est,
    path: str,
    *,
    variable=None,
    sample_dims=None,
    weights=None,
    storage_options=None,
    keep=None,
):
    """The data of ``scalepca transform`` as ``est`` takes them.

    A model fitted on xarray data (``open_matrix`` / a ``run`` config) keeps its
    variable, dims and weights: the data are opened in their own layout and the model
    repeats its steps (checking the grid). The options need not be repeated; given
    ones must agree with the model. A model fitted on a bare array gets the array
    (with ``--weights`` if given). An MCA model gets the pair of its two fields, read
    from ``path`` by the variables it records. A PLINK .bed gives the samples of
    ``keep`` (``--keep``, a keep file; default all) and the SNPs the model was fitted
    on, by their .bim ids (a fit with ``data.exclude_ranges`` scores a whole .bed).
    """
    from ..preprocessing import open_matrix
    from ..preprocessing._open import open_dataset
    from ..preprocessing._steps import WeightsError, describe

    if hasattr(est, "components_y_"):  # MCA: two fields, X and Y
        return _pair_data(est, path, variable, sample_dims, weights, storage_options)
    prep = getattr(est, "preprocessing_", None)
    # several fields (multivariate_eof)
    if hasattr(est, "variables_"):
        return _fields_data(est, path, variable, sample_dims, weights, storage_options)
    from ..preprocessing.readers import detect

    kind = detect(path, storage_options=storage_options)
    # PLINK genotypes: one (sample × SNP) matrix, nothing to choose
    if kind == "bed":
        given = _given_options(variable, sample_dims, weights)
        if given:
            raise UserError(f"{' and '.join(given)} do not apply to a PLINK .bed file")
        from ..io._bed import BedOptionError

        try:  # float64: the scores of exact allele counts in float64
            X = open_matrix(path, format=kind, dtype="float64", keep=keep)
        except BedOptionError as err:
            raise UserError(f"--{err.key}: {err.detail}") from None
        except (FileNotFoundError, ValueError) as err:
            raise UserError(str(err)) from None
        return _model_snps(est, X, path)
    if keep is not None:
        raise UserError(f"--keep applies to PLINK .bed data; {path!r} is not a .bed")
    # fitted on AnnData: its matrix again
    if prep is not None and prep.dims == (
        "obs",
        "var",
    ):
        if variable is not None or sample_dims is not None:
            raise UserError(
                "--variable and --sample-dims do not apply: the model was fitted on "
                f"AnnData ({prep.variable})"
            )
        if kind == "anndata" or _is_url(path):
            return open_matrix(
                path,
                storage_options=storage_options,
                format="anndata",
                layer=prep.layer,
            )
    if prep is None or not prep.labelled:
        try:
            return open_matrix(
                path,
                variable=variable,
                storage_options=storage_options,
                format=kind,
                sample_dims=sample_dims,
                weights=weights,
            )
        except WeightsError as err:
            raise UserError(f"--weights {err.detail}") from None
    if variable is not None and prep.variable is not None and variable != prep.variable:
        raise UserError(
            f"--variable {variable!r}: the model was "
            f"fitted on variable {prep.variable!r}"
        )
    if sample_dims is not None and tuple(sample_dims) != tuple(prep.sample_dims):
        raise UserError(
            f"--sample-dims {' '.join(sample_dims)}: the model was fitted with "
            f"sample dims {' '.join(prep.sample_dims)}"
        )
    ds = open_dataset(path, storage_options=storage_options, format=kind)
    if not hasattr(ds, "data_vars"):
        raise UserError(
            f"{path} is not an xarray store; the model was fitted on variable "
            f"{prep.variable!r} with dims {prep.dims}"
        )
    name = variable or prep.variable
    if name is None:
        names = list(ds.data_vars)
        if len(names) != 1:
            raise UserError(f"{path} holds variables {names}; pass --variable")
        name = names[0]
    if name not in ds.data_vars:
        raise UserError(
            f"{path} has no variable {name!r} (the model was fitted on it); it has "
            f"{', '.join(map(str, ds.data_vars))}"
        )
    raw = ds[name]
    if weights is not None:
        try:
            given = describe(
                raw,
                sample_dims=prep.sample_dims,
                feature_dims=prep.feature_dims,
                weights=weights,
                dataset=ds,
            )
        except WeightsError as err:
            raise UserError(f"--weights {err.detail}") from None
        diff = prep.differences(given)
        if diff:
            raise UserError(f"--weights {weights}: the data would be {'; '.join(diff)}")
    return raw


def _model_snps(est, X, path: str):
    """The SNPs of the .bed ``X`` the model ``est`` was fitted on, by id, when they are
    some of the .bed's (a fit on a subset); ``X`` itself otherwise (the model's own
    check then names any difference)."""
    import numpy as np

    from ..preprocessing import open_matrix

    names = getattr(est, "feature_names_in_", None)
    if names is None or len(names) == X.shape[1] and (X["snp"].values == names).all():
        return X
    have = set(X["snp"].values.tolist())
    absent = [n for n in names.tolist() if n not in have]
    if absent:
        more = " …" if len(absent) > 3 else ""
        raise UserError(
            f"{path} lacks {len(absent)} of the model's {len(names)} SNPs "
            f"({', '.join(absent[:3])}{more})"
        )
    # described again: the model checks the SNPs it scores against the fitted ones
    return open_matrix(X.sel(snp=np.asarray(names)).drop_attrs())


def _given_options(variable, sample_dims, weights) -> list[str]:
    """The options of ``scalepca transform`` that say how to read the data, among
    those given (a .bed or a multivariate model's fields take none of them)."""
    options = (
        ("--variable", variable),
        ("--sample-dims", sample_dims),
        ("--weights", weights),
    )
    return [flag for flag, value in options if value is not None]


def _fields_data(est, path, variable, sample_dims, weights, storage_options) -> list:
    """The fields a multivariate EOF was fitted on, read from ``path`` by their names
    (each stacked and weighted by the model as in its fit)."""
    from ..preprocessing._open import open_dataset

    names = list(est.variables_)
    given = _given_options(variable, sample_dims, weights)
    if given:
        raise UserError(
            f"{' and '.join(given)} do not apply: the model was fitted on the "
            f"fields {', '.join(names)}, each read as in its fit"
        )
    ds = open_dataset(path, storage_options=storage_options)
    missing = [
        n for n in names if not hasattr(ds, "data_vars") or n not in ds.data_vars
    ]
    if missing:
        raise UserError(
            f"{path} has no variable(s) {', '.join(missing)}; the model was fitted "
            f"on the fields {', '.join(names)}"
        )
    return [ds[n] for n in names]


def _pair_data(est, path, variable, sample_dims, weights, storage_options) -> list:
    """The fields ``[X, Y]`` of an MCA model, read from the one store ``path`` by the
    variables the model records (as ``scalepca run`` reads
    ``data.variable: [x, y]``); each is stacked and weighted by the model as in its
    fit."""
    from ..preprocessing._open import open_dataset

    names = list(est.variables_)
    if None in names:
        raise UserError(
            "the MCA model records no variable for field "
            f"{'XY'[names.index(None)]} (fitted on arrays, not on a named "
            "variable of an xarray store): scalepca transform reads its two fields "
            "by name; transform them in Python with MCA.transform(X, Y)"
        )
    given = [
        f
        for f, v in (
            ("--variable", variable),
            ("--sample-dims", sample_dims),
            ("--weights", weights),
        )
        if v is not None
    ]
    if given:
        verb = "does" if len(given) == 1 else "do"
        raise UserError(
            f"{' and '.join(given)} {verb} not apply: the MCA "
            f"model was fitted on the fields {names[0]} (X) and "
            f"{names[1]} (Y), each read from DATA as in its fit"
        )
    ds = open_dataset(path, storage_options=storage_options)
    missing = list(
        dict.fromkeys(
            n for n in names if not hasattr(ds, "data_vars") or n not in ds.data_vars
        )
    )
    if missing:
        raise UserError(
            f"{path} has no variable(s) {', '.join(missing)}; the MCA model was "
            f"fitted on the fields {names[0]} (X) and {names[1]} (Y), which "
            "scalepca transform reads from the one store DATA"
        )
    return [ds[n] for n in names]


def transform_scores(est, X) -> tuple:
    """``(scores, attrs)`` that ``scalepca transform`` writes: an analysis tool's
    arrays by name (its ``scores_arrays``: the layout of ``scalepca run``'s
    ``scores.zarr``), else the lazy scores of ``transform`` (attrs None)."""
    from ..persistence.registry import TOOLS, method_of

    if method_of(type(est)) in TOOLS:
        return est.scores_arrays(X)
    return est.transform(X), None


def _shape(X):
    if isinstance(X, list):  # several fields: their features side by side
        return (X[0].shape[0], sum(x.shape[1] for x in X))
    return tuple(X.shape)


def reads_data(X, out) -> bool:
    """Whether computing ``out`` (an array, a DataArray, a dict or list of them) reads
    the data ``X``: whether its dask graph holds a task of ``X``'s, known by the
    token of one of ``X``'s layers in its name (a fused task keeps the token of
    the layers it fuses, as one ``dask.delayed`` of an array does)."""
    import re

    def graphs(obj) -> list:
        if isinstance(obj, dict):
            obj = list(obj.values())
        if isinstance(obj, (list, tuple)):
            return [g for o in obj for g in graphs(o)]
        data = getattr(obj, "data", obj)
        graph = getattr(data, "__dask_graph__", lambda: None)()
        if graph is None:
            return []
        return [graph]

    token = re.compile(r"[0-9a-f]{32}")
    ours = {
        t
        for g in graphs(X)
        for layer in getattr(g, "layers", {})
        for t in token.findall(str(layer))
    }
    if not ours:
        return False
    for g in graphs(out):
        for key in g.keys():
            name = key[0] if isinstance(key, tuple) else key
            if any(t in ours for t in token.findall(str(name))):
                return True
    return False


def write_outputs(
    est, X, out: dict, written: list | None = None, timings=None
) -> list[str]:
    """Write what ``output`` asks for under ``output.store``; return the written paths.

    ``written``: a list each store's path is appended to once it is written completely
    (in the order written: the model first), so an interrupted run can say which are.
    ``timings``: the run's :class:`~scalepca.app.timing.RunTimings`, which count each
    write that reads the data as a pass over it."""
    from ..io import write_array
    from ..models._saving import save_estimator
    from .outputs import FLAG, PARTS
    from .progress import stage
    from .timing import data_pass

    root = out["store"].rstrip("/")
    so = out.get("storage_options")
    codec = out.get("codec")
    # a rerun replaces the complete outputs of an earlier run (output.overwrite, default
    # true); nothing else is ever replaced
    replace = {"overwrite": out.get("overwrite", True), "flag": FLAG}
    written = [] if written is None else written

    def path(key: str) -> str:  # where output.<key> goes: the store validate checked
        return f"{root}/{PARTS[key][0]}"

    from ..persistence.registry import TOOLS, method_of

    own = method_of(type(est)) in TOOLS
    if out["model"]:
        save_estimator(est, path("model"), storage_options=so, **replace)
        written.append(path("model"))
    scores = None
    if (out["scores"] or out["reconstruction"] or out.get("plink")) and not own:
        if not hasattr(est, "transform"):
            raise UserError(
                f"{type(est).__name__} has no transform; set output.scores: false"
            )
        scores = est.transform(X)
    if out["scores"]:
        # an analysis tool names its arrays itself (its scores_arrays)
        arrays, attrs = est.scores_arrays(X, fitted=True) if own else (scores, None)
        label = f"writing {PARTS['scores'][0]}"
        with stage(label), data_pass(timings, label, reads_data(X, arrays)):
            write_array(
                arrays,
                path("scores"),
                name="scores",
                storage_options=so,
                codec=codec,
                attrs=attrs,
                **replace,
            )
        written.append(path("scores"))
    if out["reconstruction"]:
        label = f"writing {PARTS['reconstruction'][0]}"
        with stage(label), data_pass(timings, label, reads_data(X, scores)):
            write_array(
                est.inverse_transform(scores),
                path("reconstruction"),
                name="reconstruction",
                storage_options=so,
                codec=codec,
                **replace,
            )
        written.append(path("reconstruction"))
    for part in ("low_rank", "sparse"):
        if out[part]:
            value = getattr(est, f"{part}_", None)
            if value is None:
                raise UserError(f"{type(est).__name__} has no {part}_ to write")
            label = f"writing {PARTS[part][0]}"
            with stage(label), data_pass(timings, label, reads_data(X, value)):
                write_array(
                    value,
                    path(part),
                    name=part,
                    storage_options=so,
                    codec=codec,
                    **replace,
                )
            written.append(path(part))
    if out.get("plink"):  # PLINK 2's --pca files (output_problems checked the model)
        from ..io._bed import write_plink_scores
        from .outputs import PLINK_PREFIX

        label = f"writing {PLINK_PREFIX}.eigenvec"
        with stage(label), data_pass(timings, label, reads_data(X, scores)):
            written += write_plink_scores(
                f"{root}/{PLINK_PREFIX}", est, X, scores, storage_options=so
            )
    return written


def _no_data_store(dcfg: dict) -> str:
    """ "no NetCDF file at ..." (or AnnData / zarr store): the kind ``data`` names."""
    from ..preprocessing._open import no_data_store
    from .config import data_kind

    path = dcfg["path"]
    kind = data_kind(dcfg)
    if isinstance(path, list):  # .bed files read as one matrix: the first one missing
        path = next((p for p in path if not _store_exists(p)), path[0])
    return no_data_store(path, kind)


def _error_text(err: BaseException):
    """What an error says: a KeyError's message (its str is the repr of it), else
    the error."""
    if isinstance(err, KeyError) and err.args:
        return err.args[0]
    return err


def _one_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return " ".join(text.split())
