"""YAML run configs: a small validated model with messages that name the bad key."""

from __future__ import annotations

import copy
import importlib
import inspect
import os
from pathlib import Path

import yaml

__all__ = ["ConfigError", "METHODS", "apply_overrides", "load_config", "validate_config"]


class ConfigError(ValueError):
    """A run config is malformed; the message names the key and what is allowed."""


#: method name in configs → estimator class (imported lazily)
METHODS = {
    "pca": "scalepca.models.pca:PCA",
    "ppca": "scalepca.models.ppca:PPCA",
}

_SCHEMA = {
    "data": {
        "path": (str, None),
        "variable": ((str, type(None)), None),
        "storage_options": ((dict, type(None)), None),
        "chunks": ((int, type(None)), None),
        "sample_dims": ((list, str, type(None)), None),
        "feature_dims": ((list, str, type(None)), None),
        "weights": ((str, type(None)), None),
        "generate": ((dict, type(None)), None),
    },
    "data.generate": {
        "kind": (str, "low_rank"),
        "n_samples": (int, 500_000),
        "n_features": (int, 256),
        "rank": (int, 10),
        "noise": ((int, float), 1.0),
        "chunk_rows": (int, 50_000),
        "dtype": (str, "float64"),
        "seed": (int, 0),
    },
    "cluster": {
        "kind": (str, "local"),
        "address": ((str, type(None)), None),
        "n_workers": ((int, type(None)), None),
        "threads_per_worker": ((int, type(None)), None),
        "memory_limit": ((str, int, type(None)), "auto"),
        "dashboard_address": ((str, type(None)), ":0"),
        "processes": (bool, True),
    },
    "output": {
        "store": ((str, type(None)), None),
        "storage_options": ((dict, type(None)), None),
        "model": (bool, True),
        "scores": (bool, True),
    },
}
_TOP = {"data", "model", "cluster", "output", "progress"}
_CLUSTER_KINDS = ("local", "address")


def _typename(t) -> str:
    ts = t if isinstance(t, tuple) else (t,)
    return " or ".join("null" if x is type(None) else x.__name__ for x in ts)


def _check_section(section: dict, name: str) -> dict:
    schema = _SCHEMA[name]
    if not isinstance(section, dict):
        raise ConfigError(f"'{name}' must be a mapping; got {type(section).__name__}")
    unknown = sorted(set(section) - set(schema))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(repr(f'{name}.{k}') for k in unknown)}; "
            f"allowed in '{name}': {', '.join(sorted(schema))}"
        )
    out = {}
    for key, (types, default) in schema.items():
        value = section.get(key, copy.deepcopy(default))
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,)))
        if not ok:
            raise ConfigError(f"'{name}.{key}' must be {_typename(types)}; got {value!r}")
        out[key] = value
    return out


def estimator_class(method: str):
    if method not in METHODS:
        raise ConfigError(f"'model.method' {method!r} is unknown; allowed: {', '.join(METHODS)}")
    module, name = METHODS[method].split(":")
    return getattr(importlib.import_module(module), name)


def validate_config(cfg) -> dict:
    """Return a normalised copy of ``cfg`` with defaults filled in, or raise ConfigError."""
    if not isinstance(cfg, dict):
        raise ConfigError("a config must be a YAML mapping with sections data, model, cluster, output")
    unknown = sorted(set(cfg) - _TOP)
    if unknown:
        raise ConfigError(f"unknown section(s) {unknown}; allowed: {', '.join(sorted(_TOP))}")
    if "data" not in cfg or "model" not in cfg:
        raise ConfigError("a config needs at least the 'data' and 'model' sections")
    out = {"data": _check_section(cfg["data"], "data")}
    if out["data"]["path"] is None:
        raise ConfigError("'data.path' is required (a zarr store path or URL)")
    if out["data"]["generate"] is not None:
        out["data"]["generate"] = _check_section(out["data"]["generate"], "data.generate")
    model = cfg["model"]
    if not isinstance(model, dict) or "method" not in model:
        raise ConfigError("'model' must be a mapping with a 'method' key")
    model = dict(model)
    cls = estimator_class(model.pop("method"))
    params = inspect.signature(cls.__init__).parameters
    allowed = [p for p in params if p != "self"]
    bad = sorted(set(model) - set(allowed))
    if bad:
        raise ConfigError(
            f"unknown key(s) {', '.join(repr('model.' + b) for b in bad)} for {cls.__name__}; "
            f"allowed: method, {', '.join(allowed)}"
        )
    try:
        cls(**model)  # parameter values are validated at fit, before any compute
    except TypeError as err:
        raise ConfigError(f"model: {err}") from None
    out["model"] = {"method": cfg["model"]["method"], **model}
    out["cluster"] = _check_section(cfg.get("cluster") or {}, "cluster")
    if out["cluster"]["kind"] not in _CLUSTER_KINDS:
        raise ConfigError(
            f"'cluster.kind' {out['cluster']['kind']!r} is unknown; allowed: {', '.join(_CLUSTER_KINDS)}"
        )
    out["output"] = _check_section(cfg.get("output") or {}, "output")
    progress = cfg.get("progress", True)
    if not isinstance(progress, bool):
        raise ConfigError(f"'progress' must be true or false; got {progress!r}")
    out["progress"] = progress
    return out


def apply_overrides(cfg: dict, overrides) -> dict:
    """Apply ``key.sub=value`` overrides (values parsed as YAML) to a raw config."""
    cfg = copy.deepcopy(cfg)
    for item in overrides or ():
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. model.n_components=20")
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw)
        node = cfg
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {p!r} is not a section")
        node[parts[-1]] = value
    return cfg


def load_config(path, overrides=None) -> dict:
    """Read a YAML config, apply overrides, validate. Relative paths resolve from the CWD."""
    path = Path(os.fspath(path))
    if not path.exists():
        raise FileNotFoundError(f"config file {str(path)!r} does not exist")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    return validate_config(apply_overrides(raw, overrides))
