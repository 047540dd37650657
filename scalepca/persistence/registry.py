"""The registry of scalepca's estimators: method names, their classes, and the check of
parameters against an estimator's signature.

Configs name an estimator by method (``model.method: pca``), model stores by class name
(:func:`scalepca.load`); both are looked up here, and nothing named in a file is imported.
"""

from __future__ import annotations

import inspect
import types
import typing

from .._schema import _NONE, ConfigError, _type_ok, _typename

#: method name in configs → estimator class (imported lazily)
METHODS = {
    "pca": "scalepca.models.pca:PCA",
    "ppca": "scalepca.models.ppca:PPCA",
    "kernel_pca": "scalepca.models.kernel_pca:KernelPCA",
    "sparse_pca": "scalepca.models.sparse_pca:SparsePCA",
    "robust_pca": "scalepca.models.robust_pca:RobustPCA",
}


def estimator_class(method: str):
    """The estimator class of ``method`` (a key of :data:`METHODS`), imported on demand."""
    if not isinstance(method, str) or method not in METHODS:
        raise ConfigError(
            f"'model.method' {method!r} is unknown; allowed: {', '.join(METHODS)}"
        )
    name = METHODS[method].rsplit(":", 1)[1]
    try:
        from .. import models  # on demand: the estimators are imported when one is needed

        return getattr(models, name)
    except (ImportError, AttributeError) as err:
        raise ConfigError(
            f"'model.method' {method!r}: its estimator {METHODS[method]} cannot be imported "
            f"({err})"
        ) from None


def estimator_class_named(name: str):
    """The registered estimator class whose class name is ``name`` (``"PPCA"``), or None.

    The lookup goes through :data:`METHODS` only, so no name read from a file (a model store,
    a config) is ever imported: :func:`scalepca.load` relies on this.
    """
    for method, spec in METHODS.items():
        if spec.rsplit(":", 1)[1] == name:
            return estimator_class(method)
    return None


def _plain_types(annotation) -> tuple | None:
    """The classes of a resolved annotation like ``int | None``; None if not that simple."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, type):
        members = (annotation,)
    elif isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = typing.get_args(annotation)
    else:
        return None
    if not all(isinstance(m, type) and m.__module__ == "builtins" or m is _NONE for m in members):
        return None
    return tuple(members)


def check_params(func, params: dict, where: str, *, skip=("self",)) -> dict:
    """Check keyword ``params`` against ``func``'s signature: names, and simple annotated types.

    Returns the parameter names that are allowed; integral floats given for ``int``
    parameters are converted in place. Values are only type-checked where the
    signature says so unambiguously (``int``, ``float | None``, ``str`` ...), or, without an
    annotation, when the default is a bool or a string (a flag or a named choice).
    """
    sig = inspect.signature(func)
    allowed = [
        p for p, par in sig.parameters.items()
        if p not in skip and par.kind not in (par.VAR_POSITIONAL, par.VAR_KEYWORD)
    ]
    bad = sorted(set(params) - set(allowed), key=str)
    if bad:
        raise ConfigError(
            f"unknown key(s) {', '.join(repr(f'{where}.{b}') for b in bad)}; "
            f"allowed: {', '.join(allowed)}"
        )
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # annotations that do not resolve: check names only
        hints = {}
    for name, value in params.items():
        par = sig.parameters[name]
        ts = _plain_types(hints.get(name, inspect.Parameter.empty))
        if ts is None:
            default = par.default
            if isinstance(default, bool):
                ts = (bool,)
            elif isinstance(default, str):
                ts = (str,)
            else:
                continue
            if value is None:
                continue
        if int in ts and float not in ts and isinstance(value, float) and value.is_integer():
            params[name] = int(value)  # 1e3 in YAML is a float
            continue
        if not _type_ok(value, ts):
            raise ConfigError(f"'{where}.{name}' must be {_typename(ts)}; got {value!r}")
    return allowed


def check_n_components_form(cls, value, where: str = "model"):
    """``n_components`` of ``cls`` checked in form (the data's shape is not known yet): PCA
    and PPCA also take a float in (0, 1) and ``"mle"``; an integral float is an int.
    ``where``: the section named in the message (``model`` in configs, ``params`` in stores)."""
    from .._validation import check_n_components

    fraction = getattr(cls, "_n_components_fraction", False)
    if isinstance(value, float) and value.is_integer() and value >= 1:
        value = int(value)  # 1e3 in YAML is a float
    try:
        return check_n_components(value, fraction=fraction)
    except (TypeError, ValueError) as err:
        forms = ("an integer >= 1, a float in (0, 1), 'mle' or null" if fraction
                 else "an integer >= 1 or null")
        raise ConfigError(f"'{where}.n_components' must be {forms}; got {value!r} "
                          f"({err})") from None
