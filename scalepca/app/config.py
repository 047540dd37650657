"""YAML run configs: a small validated model with messages that name the bad key.

A run config has five sections:

``data``
    Where the matrix comes from (path/URL, variable, dims, chunks, weights,
    storage_options; optionally ``generate`` to write a synthetic dataset first).
    ``weights``: ``sqrt_coslat`` | ``coslat`` (from the latitude coordinate) or the name
    of a variable of the same store, multiplied into the features (the same rules as
    ``open_matrix(weights=...)``). The model keeps them: its scores of new data
    (``scalepca transform``) and the reconstruction apply and undo them.
``model``
    ``method`` (a key of ``scalepca.persistence.registry.METHODS``) and the estimator's
    parameters, either beside ``method`` or under ``params`` (for a parameter itself
    named method).
``cluster``
    ``kind`` (local | address | slurm | pbs | sge | lsf | htcondor | kubernetes |
    gateway) and the settings of that kind.
``output``
    ``store`` and what to write there (model, scores, reconstruction, low_rank, sparse;
    ``report``, default true: an HTML page with figures, see ``scalepca.app.report``;
    ``false`` writes none; ``overwrite``, default true: replace an earlier run's
    outputs, see ``scalepca.app.outputs``).
``progress``
    true | false — progress per pass over the data: a bar on a terminal, one line
    (tasks, time, rate) per pass in a log.

Relative paths in a config file (``data.path``, ``output.store``, the model's
``checkpoint``, ``scratch`` and ``mask``, the cluster's ``local_directory`` and
``log_directory``) are taken from the folder of the config file, not from the working
directory: see ``PATH_KEYS``.

Unknown keys are rejected with a message naming them, the allowed keys and the
closest one (``n_component``: did you mean ``n_components``?); values of the wrong
type are rejected with the expected type; choices list the allowed values. Every
problem is reported, not only the first (``ConfigError.problems``). Model parameters
are checked against the estimator's parameter table (``_parameters``,
``scalepca.models._params``): names, types, choices and the ranges that do not depend
on the data; ``fit`` and ``scalepca validate`` check the same table again with the
data's shape (``n_components <= min(n, d)``) and the conditions between parameters,
before any data is read.
"""

from __future__ import annotations

import copy
import inspect
import os
from pathlib import Path

import yaml

from .._codecs import CODECS, DEFAULT_CODEC
from .._schema import (
    _NONE,
    _REQUIRED,
    _SIZE,
    ConfigError,
    _check_section,
    _f,
    _Field,
    _typename,
    did_you_mean,
    unknown_keys,
)
from .config_keys import KEY_DOCS  # one sentence per key (the config reference)
from .yaml_files import read_yaml

__all__ = [
    "CLUSTER_KINDS",
    "ConfigError",
    "KEY_DOCS",
    "apply_overrides",
    "check_cluster",
    "PATH_KEYS",
    "load_config",
    "resolve_paths",
    "schema_sections",
    "validate_config",
]


_DATA = {
    "path": _f((str, list), _REQUIRED),  # a list: PLINK .bed files read as one matrix
    "variable": _f((str, list, _NONE)),  # a list: several fields (multivariate_eof)
    "storage_options": _f((dict, _NONE)),
    "chunks": _f((int, list, _NONE)),
    "sample_dims": _f((list, str, _NONE)),
    "feature_dims": _f((list, str, _NONE)),
    "weights": _f((str, _NONE)),
    "task_size": _f((str, int, _NONE), "128MiB"),
    "generate": _f((dict, _NONE)),
    "format": _f((str, _NONE)),
    "layer": _f((str, _NONE)),
    "decode_times": _f((bool, _NONE)),
    "use_cftime": _f((bool, _NONE)),
    "engine": _f((str, _NONE)),
    "singlecell": _f((dict, _NONE)),
    # PLINK .bed: the samples of a keep file, the SNPs outside ranges (io._bed)
    "keep": _f((str, _NONE)),
    "exclude_ranges": _f((list, _NONE)),
}

#: the ``data`` keys of a PLINK .bed only (scalepca.io._bed's subsets)
BED_KEYS = ("keep", "exclude_ranges")

#: the ``data`` keys passed to xarray's open functions (scalepca.io._open_options)
OPEN_KEYS = ("decode_times", "use_cftime", "engine")

#: ``data.format`` values (``null``: recognised from the path's ending or first bytes)
DATA_FORMATS = ("zarr", "netcdf", "anndata", "bed")


def data_kind(dcfg: dict) -> str:
    """The kind of data the ``data`` section names: ``data.format``, else what its
    path says (metadata only); the name of its reader in
    :data:`scalepca.preprocessing.readers.READERS`."""
    from ..preprocessing.readers import detect

    return detect(
        dcfg["path"],
        format=dcfg.get("format"),
        storage_options=dcfg.get("storage_options"),
    )


_OUTPUT = {
    "store": _f((str, _NONE)),
    "storage_options": _f((dict, _NONE)),
    "model": _f(bool, True),
    "scores": _f(bool, True),
    "reconstruction": _f(bool, False),
    "low_rank": _f(bool, False),
    "sparse": _f(bool, False),
    "report": _f(bool, True),  # report.html (figures embedded) next to the outputs
    # a rerun replaces the complete outputs of an earlier run (scalepca.app.outputs)
    "overwrite": _f(bool, True),
    # run --update: update the saved model with the rows appended since
    # (scalepca.app.update)
    "update": _f(bool, False),
    # compression of scores / reconstruction / low_rank / sparse, from the registry only
    "codec": _f(str, DEFAULT_CODEC, choices=tuple(CODECS)),
    # PLINK 2's pca.eigenvec and pca.eigenval next to the stores (a .bed's fit)
    "plink": _f(bool, False),
}

_SECURITY = {
    "tls_ca_file": _f(str, _REQUIRED),
    "tls_client_cert": _f(str, _REQUIRED),
    "tls_client_key": _f((str, _NONE)),
    "require_encryption": _f(bool, True),
}

_ADAPTIVE_JOBS = {"minimum_jobs": _f(int, 0), "maximum_jobs": _f(int, _REQUIRED)}
_ADAPTIVE = {"minimum": _f(int, 0), "maximum": _f(int, _REQUIRED)}

_LOCAL = {
    "n_workers": _f((int, _NONE)),
    "threads_per_worker": _f((int, _NONE)),
    "memory_limit": _f(_SIZE, "auto"),
    "dashboard_address": _f((str, _NONE), ":0"),
    "processes": _f(bool, True),
    "local_directory": _f((str, _NONE)),
    "monitoring": _f(str, "light"),
}

#: values of ``cluster.monitoring`` (local and batch kinds: the processes scalepca
#: starts)
MONITORING = ("light", "dask")

_ADDRESS = {
    "address": _f(str, _REQUIRED),
    "security": _f((dict, _NONE)),
    "timeout": _f((str, int, float), "30s"),
}

# keys common to every dask-jobqueue kind; per-kind extras below
_JOBQUEUE = {
    "cores": _f(int, _REQUIRED),
    "memory": _f((str, int), _REQUIRED),
    "processes": _f((int, _NONE)),
    "walltime": _f((str, _NONE)),
    "queue": _f((str, _NONE)),
    "account": _f((str, _NONE)),
    "job_name": _f((str, _NONE)),
    "job_extra": _f((list, _NONE)),
    "job_script_prologue": _f((list, _NONE)),
    "worker_extra_args": _f((list, _NONE)),
    "interface": _f((str, _NONE)),
    "local_directory": _f((str, _NONE)),
    "log_directory": _f((str, _NONE)),
    "python": _f((str, _NONE)),
    "death_timeout": _f((str, int, _NONE)),
    "dashboard_address": _f((str, _NONE), ":0"),
    "jobs": _f(int, 1),
    "adaptive": _f((dict, _NONE)),
    "start_timeout": _f((str, int, float, _NONE)),
    "monitoring": _f(str, "light"),
}
_JOBQUEUE_EXTRA = {
    "slurm": {},
    "pbs": {"resource_spec": _f((str, _NONE))},
    "sge": {"resource_spec": _f((str, _NONE))},
    "lsf": {},
    "htcondor": {"disk": _f((str, int), _REQUIRED)},
}
#: jobqueue keys a batch system does not have (HTCondor has no queues or wall times
#: here)
_JOBQUEUE_MISSING = {"htcondor": ("walltime", "queue", "account")}

_KUBERNETES = {
    "name": _f((str, _NONE)),
    "image": _f((str, _NONE)),
    "namespace": _f((str, _NONE)),
    "n_workers": _f(int, 2),
    "resources": _f((dict, _NONE)),
    "env": _f((dict, _NONE)),
    "adaptive": _f((dict, _NONE)),
}

_GATEWAY = {
    "address": _f((str, _NONE)),
    "proxy_address": _f((str, _NONE)),
    "auth": _f((str, _NONE)),
    "cluster_options": _f((dict, _NONE)),
    "n_workers": _f(int, 2),
    "adaptive": _f((dict, _NONE)),
}

JOBQUEUE_KINDS = ("slurm", "pbs", "sge", "lsf", "htcondor")
CLUSTER_KINDS = ("local", "address", *JOBQUEUE_KINDS, "kubernetes", "gateway")


def _cluster_schema(kind: str) -> dict:
    if kind == "local":
        return _LOCAL
    if kind == "address":
        return _ADDRESS
    if kind in JOBQUEUE_KINDS:
        schema = {**_JOBQUEUE, **_JOBQUEUE_EXTRA[kind]}
        for key in _JOBQUEUE_MISSING.get(kind, ()):
            schema.pop(key)
        return schema
    if kind == "kubernetes":
        return _KUBERNETES
    return _GATEWAY


_TOP = ("data", "model", "cluster", "output", "progress")


# -- estimator and generator signatures ------------------------------------------------
def _check_model(model, problems: list) -> dict:
    """The ``model`` section: ``method`` and the estimator's parameters, checked
    against its ``_parameters`` table (names, types, choices and ranges that do not
    depend on the data); each problem is appended to ``problems`` and the parameters
    that pass are kept."""
    from ..persistence.registry import METHODS, declared_problems, estimator_class
    from .messages import param_key, speak_cli

    if not isinstance(model, dict) or "method" not in model:
        raise ConfigError(
            f"'model' must be a mapping with a 'method' key; allowed methods: "
            f"{', '.join(METHODS)}"
        )
    params = dict(model)
    method = params.pop("method")
    cls = estimator_class(method)
    nested = params.pop("params", None)
    if nested is not None:
        # parameters may also sit under model.params — needed for an estimator parameter
        # that is itself called "method" (SparsePCA(method="minibatch"))
        if not isinstance(nested, dict):
            raise ConfigError(f"'model.params' must be a mapping; got {nested!r}")
        both = sorted(set(nested) & set(params))
        if both:
            raise ConfigError(
                f"model parameter(s) {', '.join(map(repr, both))} "
                "given both in 'model' and 'model.params'"
            )
        params.update(nested)
    params, found = declared_problems(
        cls,
        params,
        "model",
        word=lambda message: speak_cli(message, method=method),
        key=param_key,
    )
    problems.extend(found)
    cls(**params)  # __init__ only stores them
    return {"method": method, "params": params}


#: generator parameters that add arrays to what the function returns (the truth, for
#: checks in Python); a config or make-data writes the data only, so they are not keys
GENERATE_PYTHON_ONLY = ("return_labels", "return_parts")


def check_generate_params(func, params: dict, where: str) -> None:
    """Check the keyword ``params`` of the generator ``func`` (``data.generate``,
    ``make-data --set``): names and types, and none of the Python-only options."""
    from ..persistence.registry import check_params

    python_only = [p for p in GENERATE_PYTHON_ONLY if p in params]
    if python_only:
        raise ConfigError(
            f"'{where}.{python_only[0]}' is for Python (the generator then returns "
            "the truth beside the data); the data are written alone: remove it"
        )
    check_params(func, params, where, skip=GENERATE_PYTHON_ONLY)


def _check_generate(gen) -> dict:
    from ..datasets import GENERATORS

    if not isinstance(gen, dict):
        raise ConfigError(f"'data.generate' must be a mapping; got {gen!r}")
    params = dict(gen)
    kind = params.pop("kind", "low_rank")
    if kind not in GENERATORS:
        raise ConfigError(
            f"'data.generate.kind' {kind!r} is unknown; allowed: "
            f"{', '.join(GENERATORS)}{did_you_mean(kind, GENERATORS)}"
        )
    check_generate_params(GENERATORS[kind], params, "data.generate")
    required = [
        p
        for p, par in inspect.signature(GENERATORS[kind]).parameters.items()
        if par.default is inspect.Parameter.empty
    ]
    missing = [p for p in required if p not in params]
    if missing:
        raise ConfigError(
            f"'data.generate' of kind {kind!r} needs "
            f"{', '.join(repr(m) for m in missing)}"
        )
    return {"kind": kind, **params}


def check_cluster(section) -> dict:
    """Validate a ``cluster`` section (also used by :func:`scalepca.connect` for
    kwargs)."""
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ConfigError(f"'cluster' must be a mapping; got {section!r}")
    section = dict(section)
    kind = section.pop("kind", "local")
    if kind not in CLUSTER_KINDS:
        raise ConfigError(
            f"'cluster.kind' {kind!r} is unknown; allowed: {', '.join(CLUSTER_KINDS)}"
            f"{did_you_mean(kind, CLUSTER_KINDS)}"
        )
    out = _check_section(section, _cluster_schema(kind), "cluster")
    if kind == "address":
        addr = out["address"]
        scheme = addr.split("://", 1)[0] if "://" in addr else "tcp"
        if scheme not in ("tcp", "tls", "ws", "wss", "inproc", "ucx"):
            raise ConfigError(
                f"'cluster.address' {addr!r} has scheme "
                f"{scheme!r}; allowed: tcp://, tls://"
            )
        if out["security"] is not None:
            out["security"] = _check_section(
                out["security"], _SECURITY, "cluster.security"
            )
        elif scheme in ("tls", "wss"):
            raise ConfigError(
                f"'cluster.address' {addr!r} is a TLS address; set 'cluster.security' "
                "with tls_ca_file, tls_client_cert and tls_client_key"
            )
    if out.get("adaptive") is not None:
        schema = _ADAPTIVE_JOBS if kind in JOBQUEUE_KINDS else _ADAPTIVE
        out["adaptive"] = _check_section(out["adaptive"], schema, "cluster.adaptive")
        lo, hi = list(out["adaptive"].values())
        if not 0 <= lo <= hi:
            raise ConfigError(
                f"'cluster.adaptive' needs 0 <= minimum <= maximum; got {lo} and {hi}"
            )
    if out.get("monitoring", "light") not in MONITORING:
        value = out["monitoring"]
        raise ConfigError(
            f"'cluster.monitoring' is {value!r}; allowed: "
            f"{', '.join(MONITORING)}{did_you_mean(value, MONITORING)}"
        )
    for key in ("job_extra", "job_script_prologue", "worker_extra_args"):
        if out.get(key) is not None and not all(isinstance(x, str) for x in out[key]):
            raise ConfigError(
                f"'cluster.{key}' must be a list of strings; got {out[key]!r}"
            )
    for key in ("n_workers", "threads_per_worker", "cores", "jobs", "processes"):
        v = out.get(key)
        low = 0 if key == "jobs" else 1
        if isinstance(v, int) and not isinstance(v, bool) and v < low:
            raise ConfigError(f"'cluster.{key}' must be at least {low}; got {v}")
    return {"kind": kind, **out}


def anndata_keys_problem(dcfg: dict, where: str) -> str | None:
    """Why ``data.variable`` / ``sample_dims`` / ``feature_dims`` cannot apply to
    AnnData (``where``: how the data are AnnData), as ``open_matrix`` refuses them;
    None if unset."""
    given = [
        k
        for k in ("variable", "sample_dims", "feature_dims")
        if dcfg.get(k) is not None
    ]
    if not given:
        return None
    return (
        f"{', '.join(repr('data.' + k) for k in given)} do(es) not apply to {where} (a "
        "cell × gene matrix); choose the matrix with 'data.layer' (null: X)"
    )


def _check_path_list(out: dict) -> None:
    """``data.path`` as a list: PLINK .bed files (a cohort in batches), one matrix."""
    from ..io._bed_cohorts import check_bed_list

    paths = out["path"]
    if not all(isinstance(p, str) and p for p in paths):
        raise ConfigError(
            f"'data.path' must be a path or a list of .bed paths; got {paths!r}"
        )
    try:
        check_bed_list(paths)
    except ValueError as err:
        raise ConfigError(f"'data.path': {err}") from None
    if out["format"] not in (None, "bed"):
        raise ConfigError(
            f"'data.path' is a list of .bed files; data.format is {out['format']!r}"
        )
    if out["generate"] is not None:
        raise ConfigError(
            "'data.generate' writes one dataset at data.path; "
            "data.path is a list of .bed files"
        )


def _check_data(section) -> dict:
    if section is None or not isinstance(section, dict):
        raise ConfigError(
            f"'data' must be a mapping with at least 'path'; got {section!r}"
        )
    out = _check_section(section, _DATA, "data")
    if isinstance(out["path"], list):
        _check_path_list(out)
    chunks = out["chunks"]
    if isinstance(chunks, list) and (
        len(chunks) != 2
        or not all(
            isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in chunks
        )
    ):
        raise ConfigError(
            "'data.chunks' must be rows per chunk (an "
            f"integer) or [rows, columns]; got {chunks!r}"
        )
    if isinstance(chunks, int) and chunks < 1:
        raise ConfigError(f"'data.chunks' must be at least 1; got {chunks}")
    if out["task_size"] is not None:
        from ..io._coalesce import _task_bytes

        try:
            _task_bytes(out["task_size"])
        except ValueError as err:
            raise ConfigError(
                str(err).replace("task_size", "'data.task_size'", 1)
            ) from None
    for key in ("sample_dims", "feature_dims"):
        v = out[key]
        if isinstance(v, list) and not all(isinstance(x, str) for x in v):
            raise ConfigError(
                f"'data.{key}' must be a dimension name or a list of names; got {v!r}"
            )
    if out["format"] is not None and out["format"] not in DATA_FORMATS:
        hint = did_you_mean(out["format"], DATA_FORMATS)
        raise ConfigError(
            f"'data.format' is {out['format']!r}; allowed: {', '.join(DATA_FORMATS)} "
            f"(or leave it out: recognised from the path){hint}"
        )
    from ..io._open_options import config_problem

    problem = config_problem({k: out[k] for k in OPEN_KEYS})
    if problem:
        raise ConfigError(problem)
    if out["format"] == "anndata":
        given = [k for k in OPEN_KEYS if out[k] is not None]
        if given:
            raise ConfigError(
                f"{', '.join(repr('data.' + k) for k in given)} apply to stores "
                "read through xarray (NetCDF, xarray zarr); data.format is anndata"
            )
        if isinstance(out["chunks"], list):
            raise ConfigError(
                "'data.chunks' of AnnData is the cells per block (an integer): "
                "the genes stay in one block"
            )
        problem = anndata_keys_problem(out, "data.format anndata")
        if problem:
            raise ConfigError(problem)
    elif out["layer"] is not None and out["format"] is not None:
        raise ConfigError(
            "'data.layer' applies to data.format "
            f"anndata; data.format is {out['format']!r}"
        )
    if out["singlecell"] is not None:
        if out["format"] not in (None, "anndata"):
            raise ConfigError(
                "'data.singlecell' prepares AnnData "
                f"counts; data.format is {out['format']!r}"
            )
        from ..analysis.singlecell import check_step_keys

        problem = check_step_keys(out["singlecell"], "data.singlecell")
        if problem:
            raise ConfigError(problem)
    if out["generate"] is not None:
        out["generate"] = _check_generate(out["generate"])
        gen = out["generate"]
        if gen["kind"] == "counts" and gen.get("layer") != out["layer"]:
            raise ConfigError(
                f"'data.generate.layer' is {gen.get('layer')!r} but 'data.layer' "
                f"is {out['layer']!r}: the generated counts would not be read"
            )
        if gen["kind"] == "counts":
            problem = anndata_keys_problem(
                out, "the AnnData store data.generate.kind counts writes"
            )
            if problem:
                raise ConfigError(problem)
    _store_options(out, "path", "data")
    return out


def _store_options(out: dict, path_key: str, where: str) -> None:
    """The section's ``storage_options`` with scalepca's retries and timeouts of an
    ``s3://`` store filled in (:data:`scalepca.io._fs.S3_CONFIG`)."""
    from ..io._fs import with_store_defaults

    given = (out.get("storage_options") or {}).get("config_kwargs")
    if given is not None and not isinstance(given, dict):
        raise ConfigError(
            f"'{where}.storage_options.config_kwargs' must be a mapping of botocore "
            f"settings (connect_timeout, read_timeout, retries); got {given!r}"
        )
    out["storage_options"] = with_store_defaults(
        out.get(path_key), out.get("storage_options")
    )


def _check_output(section) -> dict:
    out = _check_section(section, _OUTPUT, "output")
    _store_options(out, "store", "output")
    return out


def validate_config(cfg, problems: list | None = None) -> dict:
    """Return a normalised copy of ``cfg`` with defaults filled in, or raise ConfigError
    naming every problem found (one sentence each, in ``ConfigError.problems``).

    With a list ``problems``, the problems are appended to it instead, and what could
    be read is returned: a section that could not be read is None, a model parameter
    or section key that is wrong is left out (``scalepca validate`` checks the rest
    against the data).
    """
    found = [] if problems is None else problems
    if not isinstance(cfg, dict):
        raise ConfigError(
            "a config must be a YAML mapping with sections "
            "data, model, cluster, output, progress"
        )
    unknown = sorted(set(cfg) - set(_TOP), key=str)
    if unknown:
        found.append(
            unknown_keys(unknown, list(_TOP), "", say_where=False, what="section(s)")
        )
    out = {}
    checks = {
        "data": _check_data,
        "model": lambda section: _check_model(section, found),
        "cluster": check_cluster,
        "output": _check_output,
    }
    for key, check in checks.items():
        out[key] = None
        if key in ("data", "model") and key not in cfg:
            found.append(f"a config needs a '{key}' section")
            continue
        try:
            out[key] = check(cfg.get(key))
        except ConfigError as err:
            found.extend(err.problems)
    if out["model"] is not None and out["output"] is not None:
        found.extend(_output_problems(out["model"], out["output"]))
    if out["data"] is not None and out["model"] is not None:
        found.extend(_variables_problems(out["data"], out["model"], out["output"]))
    progress = cfg.get("progress", True)
    if not isinstance(progress, bool):
        found.append(f"'progress' must be true or false; got {progress!r}")
        progress = True
    out["progress"] = progress
    if problems is None and found:
        raise ConfigError(*found)
    return out


def _output_problems(model: dict, output: dict) -> list[str]:
    """The outputs the configured model cannot give."""
    method = model["method"]
    problems = [
        f"'output.{part}' is only available for model.method robust_pca; got {method!r}"
        for part in ("low_rank", "sparse")
        if output[part] and method != "robust_pca"
    ]
    from ..persistence.registry import TOOLS

    if method in TOOLS:  # the analysis tools: a model store and scores
        for part, why in (
            ("reconstruction", _NO_RECONSTRUCTION[method]),
            (
                "update",
                "run --update needs a model that partial_fit updates; "
                f"model.method {method} is fitted in one go",
            ),
        ):
            if output[part]:
                problems.append(
                    f"'output.{part}' does not apply to "
                    f"model.method {method}: {why}; set it false"
                )
        return problems
    if output["reconstruction"]:
        # ask the configured estimator: KernelPCA has inverse_transform only with
        # fit_inverse_transform=True, and its error says so
        from ..persistence.registry import estimator_class

        try:
            estimator_class(method)(**model["params"]).inverse_transform  # noqa: B018
        except AttributeError as err:
            problems.append(f"'output.reconstruction': {err}")
    return problems


#: why the analysis tools write no ``output.reconstruction``
_NO_RECONSTRUCTION = {
    "mca": "MCA gives coupled patterns and their expansion coefficients, no reconstruction",
    "hilbert_eof": "its reconstruction (HilbertEOF.inverse_transform) is formed in memory, "
    "not written block by block",
    "bootstrap_eof": "it gives EOFs, their PCs and bootstrap intervals, no reconstruction",
}

#: the methods that fit several fields (``data.variable`` a list of names)
SEVERAL_FIELDS = ("multivariate_eof", "mca")


def _variables_problems(data: dict, model: dict, output: dict | None) -> list[str]:
    """``data.variable`` as a list: names, for a method that fits several fields (two
    for the methods of ``TWO_FIELDS``)."""
    from ..persistence.registry import TWO_FIELDS

    names = data.get("variable")
    if model["method"] in TWO_FIELDS and (
        not isinstance(names, list) or len(names) != 2
    ):
        return [
            f"model.method {model['method']} pairs two fields over "
            "the same samples: set 'data.variable' to a list of "
            f"two variable names (e.g. [sst, z]); got {names!r}"
        ]
    if not isinstance(names, list):
        return []
    if not names or not all(isinstance(v, str) for v in names):
        return [
            f"'data.variable' must be a variable name or a list of them; got {names!r}"
        ]
    if model["method"] not in SEVERAL_FIELDS:
        return [
            f"'data.variable' is a list ({', '.join(names)}): only model.method "
            f"{' or '.join(SEVERAL_FIELDS)} fits several fields; got "
            f"{model['method']!r}"
        ]
    if output is not None and output.get("reconstruction"):
        return [
            "'output.reconstruction' is one matrix; model.method "
            f"{model['method']} rebuilds one field per variable: set it false"
        ]
    return []


def apply_overrides(cfg, overrides) -> dict:
    """Apply ``key.sub=value`` overrides (values parsed as YAML) to a raw config."""
    cfg = copy.deepcopy(cfg) if cfg is not None else {}
    if not isinstance(cfg, dict):
        return cfg  # validate_config reports it
    for item in overrides or ():
        if "=" not in item:
            raise ConfigError(
                f"--set {item!r}: expected key=value, e.g. model.n_components=20"
            )
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise ConfigError(
                f"--set {item!r}: value is not valid YAML ({err})"
            ) from None
        node = cfg
        parts = key.strip().split(".")
        if not all(parts):
            raise ConfigError(f"--set {item!r}: empty key part")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {p!r} is not a section")
        node[parts[-1]] = value
    return cfg


#: config keys that hold local paths: relative ones are taken from the config file's
#: folder
PATH_KEYS = (
    ("data", "path"),
    ("data", "keep"),
    ("output", "store"),
    ("model", "checkpoint"),
    ("model", "scratch"),
    ("model", "mask"),
    ("model", "params", "checkpoint"),
    ("model", "params", "scratch"),
    ("model", "params", "mask"),
    ("cluster", "local_directory"),
    ("cluster", "log_directory"),
)


def resolve_paths(cfg, base) -> dict:
    """A copy of the raw config ``cfg`` with the relative paths of ``PATH_KEYS`` joined
    to the folder ``base``.

    URLs (``s3://...``), absolute paths and paths that start with ``$`` (expanded on
    the worker's machine) are left as they are; ``~`` is expanded. Anything that is
    not where a path should be is left for :func:`validate_config` to report.
    """
    if not isinstance(cfg, dict):
        return cfg
    cfg = copy.deepcopy(cfg)
    base = os.path.abspath(os.fspath(base))
    for keys in PATH_KEYS:
        node = cfg
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or keys[-1] not in node:
            continue
        value = node[keys[-1]]
        if isinstance(value, list):  # data.path: several .bed files
            node[keys[-1]] = [_resolved(v, base) for v in value]
        else:
            node[keys[-1]] = _resolved(value, base)
    return cfg


def _resolved(value, base: str):
    """``value`` joined to ``base`` when it is a relative local path; else as it is."""
    from ..io._fs import is_url

    if not isinstance(value, str) or not value or value.startswith("$"):
        return value
    if is_url(value):
        return value
    local = os.path.expanduser(value.removeprefix("file://"))
    return os.path.normpath(os.path.join(base, local))


def load_config(path, overrides=None) -> dict:
    """Read a YAML config, apply overrides, validate.

    Relative paths written in the file resolve from the file's folder (so a config
    and its data can move together, and a job runs the same from any working
    directory); paths given in ``overrides`` (``--set data.path=...`` on the command
    line) resolve from the current directory, like any other command-line path.
    """
    return validate_config(read_config(path, overrides))


def read_config(path, overrides=None):
    """The raw config of the YAML file ``path`` with ``overrides`` applied, relative
    paths resolved as :func:`load_config` resolves them; not validated."""
    raw = resolve_paths(read_yaml(path), Path(os.fspath(path)).parent)
    return apply_overrides(raw, overrides)


# -- the schema, described (the documentation's config reference is generated from this)
def schema_sections() -> list[tuple[str, str, dict]]:
    """Every fixed section of a config as ``(title, key prefix, {key: field})``.

    The ``model`` section and ``data.generate`` follow the estimators' and generators'
    signatures (see :data:`METHODS`); they are not listed here.
    """
    sections = [("data", "data", _DATA), ("output", "output", _OUTPUT)]
    for kind in CLUSTER_KINDS:
        sections.append((f"cluster, kind: {kind}", "cluster", _cluster_schema(kind)))
    sections += [
        ("cluster.security (kind: address)", "cluster.security", _SECURITY),
        ("cluster.adaptive (batch kinds)", "cluster.adaptive", _ADAPTIVE_JOBS),
        ("cluster.adaptive (kubernetes, gateway)", "cluster.adaptive", _ADAPTIVE),
        ("top level", "", {"progress": _f(bool, True)}),
    ]
    return sections


def describe_parameter(cls, name: str) -> str:
    """The type of the estimator parameter ``name`` of ``cls`` as the reference shows
    it, from its ``_parameters`` table (``one of: ...`` for choices)."""
    from ..models._params import table_of

    param = table_of(cls)[name]
    if param.choices:
        return "one of: " + ", ".join(param.choices)
    return param.forms or _typename(param.types)


def describe_field(field: _Field) -> tuple[str, str]:
    """``(type, default)`` of a schema field as the reference shows them."""
    if field.default is _REQUIRED:
        default = "required"
    else:
        default = yaml.safe_dump(field.default, default_flow_style=True).strip()
        default = default.removesuffix("...").strip()
    return _typename(field.types), default
