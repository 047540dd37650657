"""The preflight behind ``scalepca validate`` (and before ``run`` starts a cluster):
a config checked against the data's metadata, the file system and the installed
packages, without a cluster or a pass over the data. Problems are one-line sentences
in config terms.
"""

from __future__ import annotations

import logging
import shutil

from .._schema import as_list
from .config import data_kind
from .pipeline import (
    UserError,
    _error_text,
    _no_data_store,
    _one_line,
    _store_exists,
    open_data,
    open_options,
    time_decode_problem,
)

logger = logging.getLogger("scalepca")


def _layer_problem(path: str, layer: str | None, storage_options=None) -> str | None:
    """The config's ``data.layer`` against the layers of an AnnData store, with a
    close match."""
    from ..io._anndata import layer_problem, read_layers

    try:
        layers, has_x = read_layers(path, storage_options=storage_options)
    except ValueError as err:
        return f"data.path: {_one_line(err)} (data.format is anndata)"
    problem = layer_problem(layers, layer, repr(path), has_x=has_x)
    if problem is None:
        return None
    return f"data.layer: {problem}"


def _variable_problem(
    path: str,
    kind: str,
    variable: str | None,
    storage_options=None,
    open_options: dict | None = None,
) -> str | None:
    """The config's ``data.variable`` against the arrays of the store of ``kind``
    at ``path``, with a close match (the store opened with the config's xarray
    ``open_options``)."""
    import zarr

    from ..io import open_zarr_node
    from ..io._netcdf import open_netcdf
    from ..io._open_options import (
        OpenOptionError,
        TimeDecodeError,
        is_time_decode_error,
        xarray_kwargs,
    )
    from ..preprocessing.readers.zarr_store import looks_like_xarray

    if kind == "bed" and variable is None:  # .bed: one matrix, no variables
        return None
    if kind == "bed":
        return (
            f"data.variable {variable!r} is set, but {path!r} is PLINK .bed data "
            "(one matrix); remove data.variable"
        )
    # NetCDF/HDF5 files: the opener of open_matrix lists the variables
    if kind == "netcdf":
        if variable is None:
            return None  # open_matrix says so if the file holds several
        try:
            open_netcdf(path, variable=variable, open_options=open_options)
        except KeyError as err:
            return f"data.variable: {err.args[0]}"
        except TimeDecodeError as err:
            return time_decode_problem(err)
        except OpenOptionError as err:
            return f"'data.{err.key}' {err.detail}"
        return None
    node = open_zarr_node(path, storage_options=storage_options)
    if not isinstance(node, zarr.Group):
        if variable is not None:
            return (
                f"data.variable {variable!r} is set, but {path!r} "
                "is a single zarr array; remove data.variable"
            )
        return None
    names = sorted(name for name, _ in node.arrays())
    if looks_like_xarray(node):
        import xarray as xr

        try:
            names = sorted(
                map(
                    str,
                    xr.open_zarr(
                        node.store,
                        chunks=None,
                        consolidated=False,
                        **xarray_kwargs(open_options or {}),
                    ).data_vars,
                )
            )
        except ValueError as err:
            if not is_time_decode_error(err):
                raise
            return time_decode_problem(TimeDecodeError(path, str(err)))
    if variable is None or variable in names:
        return None
    from .._schema import did_you_mean

    hint = did_you_mean(variable, names)
    return (
        f"data.variable {variable!r} is not in {path!r}{hint} "
        f"(it has: {', '.join(names) or 'nothing'})"
    )


def _generated_matrix(dcfg: dict):
    """The lazy matrix ``data.generate`` describes (nothing is generated or written)."""
    from ..datasets import GENERATORS
    from ..preprocessing import open_matrix

    params = dict(dcfg["generate"])
    data = GENERATORS[params.pop("kind", "low_rank")](**params)
    if hasattr(data, "data_vars"):  # gridded: an xarray Dataset, one field or more
        variable = dcfg.get("variable")
        fields = [
            open_matrix(
                data,
                variable=v,
                sample_dims=dcfg.get("sample_dims"),
                feature_dims=dcfg.get("feature_dims"),
            )
            for v in as_list(variable)
        ]
        if len(fields) == 1:
            return fields[0]
        return _joined(fields)
    return data


def _joined(fields: list):
    """The shape and dtype of several fields side by side (metadata only, nothing
    read)."""
    import dask.array as da
    import xarray as xr

    arrays = [f.data if isinstance(f, xr.DataArray) else f for f in fields]
    rows = arrays[0].chunks[0]
    n = arrays[0].shape[0]
    if any(a.shape[0] != n for a in arrays):
        raise UserError(
            f"the variables of data.variable have {[a.shape[0] for a in arrays]} "
            "samples: the fields of a multivariate EOF or an MCA share their samples"
        )
    return da.concatenate([a.rechunk({0: rows}) for a in arrays], axis=1)


def _estimator_problems(method: str, params: dict, X, path: str) -> list[str]:
    """Every problem of the estimator's parameters for data like ``X`` (metadata
    only): its ``_parameters`` table and rules (:mod:`scalepca.models._params`), as
    ``fit`` checks them, and sparse data for a method that does not take it."""
    import numpy as np

    from .._validation import is_sparse
    from ..models._params import Shape, parameter_problems
    from ..persistence.registry import estimator_class

    cls = estimator_class(method)
    full = cls(**params).get_params(deep=False)
    sparse = is_sparse(getattr(X, "X", getattr(X, "data", X)))
    shape = Shape(int(X.shape[0]), int(X.shape[1]), np.dtype(X.dtype).itemsize, sparse)
    problems = [_one_line(err) for _, err in parameter_problems(cls, full, shape)]
    where = f"data.path {path!r} holds a sparse matrix"
    if not problems and sparse and not getattr(cls, "_accepts_sparse", False):
        problems.append(
            f"model.method {method} does not take sparse "
            f"input, and {where}; use a method that does"
        )
    elif not problems and sparse and not cls(**params)._takes_sparse:
        dense_only = [
            f"model.{key}: {value}"
            for key, value in params.items()
            if key in ("svd_solver", "solver", "missing") and value in ("tsqr", "em")
        ]
        verb = "needs" if len(dense_only) == 1 else "need"
        problems.append(
            f"{', '.join(dense_only) or 'these model parameters'} {verb} dense "
            f"blocks, and {where}; use a solver that takes sparse blocks (the "
            "covariance or randomized paths)"
        )
    return problems


def _two_fields_problems(method: str, params: dict, n: int, widths: list) -> list[str]:
    """The checks of a two-field method (MCA) that need the samples ``n`` and each
    field's width: ``n_components``, ``max_cross_size`` and the solver, as ``fit``
    makes them, in config words."""
    from ..persistence.registry import TWO_FIELDS, estimator_class
    from .messages import speak_cli

    if method not in TWO_FIELDS or len(widths) != 2:
        return []
    try:
        estimator_class(method)(**params)._check_params(n, *widths)
    except (TypeError, ValueError) as err:
        return [speak_cli(_one_line(err), method=method)]
    return []


def check_config(cfg: dict, *, data: bool = True) -> tuple[list[str], list[str]]:
    """Check a validated config against the data, the file system and the installed
    packages.

    Nothing here starts a cluster or reads data: the store is opened (metadata), the
    variable, dimensions and weights are matched to it, the estimator's parameters
    are checked for the data's shape, output and checkpoint folders are checked for
    write access, and the optional package of the cluster kind is imported. Returns
    ``(problems, notes)``, both lists of one-line sentences in config terms.
    ``data=False`` checks only what does not depend on this machine's files (the
    cluster section), for a config meant for another machine.
    """
    from ..io._fs import write_problem
    from .outputs import output_problems

    problems, notes = [], []
    model, dcfg = cfg["model"], cfg["data"]
    method, params = None, {}
    if model is not None:
        method, params = model["method"], model["params"]
    X = None
    # a section validate_config could not read: checked no further
    if not data or dcfg is None:
        return _cluster_problems(cfg, problems, notes)
    path, so = dcfg["path"], dcfg["storage_options"]
    try:
        if dcfg["generate"] is not None and not _store_exists(path, so):
            try:
                X = _generated_matrix(dcfg)
            except (ValueError, TypeError) as err:
                raise UserError(f"data.generate: {_one_line(err)}") from None
            notes.append(
                f"data.path {path!r} does not exist yet; run generates it "
                f"({dcfg['generate']['kind']}, {X.shape[0]:,} × {X.shape[1]:,})"
            )
            problem = write_problem(path, so)
            if problem:
                problems.append(f"data.path {problem}")
        elif not _store_exists(path, so):
            problems.append(f"data.path: {_no_data_store(dcfg)}")
        else:
            kind = data_kind(dcfg)
            if kind == "anndata":
                problem = _layer_problem(path, dcfg["layer"], so)
            else:
                names = dcfg["variable"]
                problem = next(
                    filter(
                        None,
                        (
                            _variable_problem(
                                path, kind, v, so, open_options(dcfg, kind)
                            )
                            for v in as_list(names)
                        ),
                    ),
                    None,
                )
            if problem:
                problems.append(problem)
            else:
                # the kind decided above: open_data takes it as the format
                X = open_data({**dcfg, "format": kind}, method=method, fit_steps=False)
                # several fields (multivariate_eof), side by side
                if isinstance(X, list):
                    widths = [int(x.shape[1]) for x in X]
                    X = _joined(X)
                    problems += _two_fields_problems(
                        method, params, int(X.shape[0]), widths
                    )
    except (
        ValueError,
        TypeError,
        KeyError,
        FileNotFoundError,
        UserError,
        ImportError,
    ) as err:
        problems.append(_one_line(_error_text(err)))
    if X is not None and cfg["model"] is not None:
        more = _estimator_problems(method, params, X, path)
        problems += more
        if not more:
            notes.append(
                f"data: {X.shape[0]:,} samples × {X.shape[1]:,} features, "
                f"{X.dtype}; model parameters fit that shape"
            )
    if cfg["output"] is not None and model is not None:
        more, remarks = output_problems(cfg)
        problems, notes = problems + more, notes + remarks
        if cfg["output"]["update"] and X is not None and not problems:
            from .update import update_problems

            more, remarks = update_problems(cfg, X)
            problems, notes = problems + more, notes + remarks
    return _cluster_problems(cfg, problems, notes)


def _cluster_problems(
    cfg: dict, problems: list, notes: list
) -> tuple[list[str], list[str]]:
    if cfg["cluster"] is None:
        return problems, notes
    kind = cfg["cluster"]["kind"]
    from .cluster._connect import _EXTRAS
    from .cluster._jobs import _SUBMIT_COMMANDS

    if kind in _EXTRAS:
        from .cluster._connect import _import_extra

        try:
            _import_extra(kind)
        except ImportError as err:
            problems.append(_one_line(err))
    submit = _SUBMIT_COMMANDS.get(kind)
    if submit is not None and shutil.which(submit) is None:
        notes.append(
            f"cluster.kind {kind}: {submit!r} is not on this machine's PATH; run on a "
            "login node of the cluster (--job-script shows the job script)"
        )
    return problems, notes
