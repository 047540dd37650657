"""The registry of scalepca's estimators: method names, their classes, and the check of
a config's or a model store's parameters against an estimator's parameter table
(:func:`declared_problems`) or a data generator's signature (:func:`check_params`).

Configs name an estimator by method (``model.method: pca``), model stores by class
name (:func:`scalepca.load`); both are looked up here, and nothing named in a file is
imported.
"""

from __future__ import annotations

import inspect
import types
import typing

from .._schema import (
    _NONE,
    ConfigError,
    _type_ok,
    _typename,
    did_you_mean,
    unknown_keys,
)

#: method name in configs → estimator class (imported lazily), from two floors: the
#: models (``scalepca.models``) and the analysis tools (``scalepca.analysis``); each
#: saves through ``models._saving`` and is read back by :func:`scalepca.load`. The table
#: is the only way a name becomes a class: nothing read from a file is imported.
METHODS = {
    "pca": "scalepca.models.pca:PCA",
    "ppca": "scalepca.models.ppca:PPCA",
    "kernel_pca": "scalepca.models.kernel_pca:KernelPCA",
    "sparse_pca": "scalepca.models.sparse_pca:SparsePCA",
    "robust_pca": "scalepca.models.robust_pca:RobustPCA",
    "multivariate_eof": "scalepca.models.multivariate_eof:MultivariateEOF",
    "extended_eof": "scalepca.models.extended_eof:ExtendedEOF",
    "mca": "scalepca.analysis.mca:MCA",
    "hilbert_eof": "scalepca.analysis.hilbert_eof:HilbertEOF",
    "bootstrap_eof": "scalepca.analysis.bootstrap:BootstrapEOF",
}

#: the analysis tools among the methods: their scores store holds the arrays they name
#: (``scores_arrays``), and they have no reconstruction nor ``run --update``
TOOLS = ("mca", "hilbert_eof", "bootstrap_eof")

#: the methods that fit two fields over the same samples (``data.variable``: two names)
TWO_FIELDS = ("mca",)


def _import_class(spec: str):
    """The class of a :data:`METHODS` value, from its floor's package (explicit
    imports)."""
    module, name = spec.rsplit(":", 1)
    if module.startswith("scalepca.analysis."):
        from ..analysis import bootstrap, hilbert_eof, mca  # the floor below this one

        modules = {m.__name__: m for m in (bootstrap, hilbert_eof, mca)}
        return getattr(modules[module], name)
    from .. import models  # on demand: the estimators are imported when one is needed

    return getattr(models, name)


def estimator_class(method: str):
    """The estimator class of ``method`` (a key of :data:`METHODS`), imported on
    demand."""
    if not isinstance(method, str) or method not in METHODS:
        raise ConfigError(
            f"'model.method' {method!r} is unknown; allowed: {', '.join(METHODS)}"
            f"{did_you_mean(method, METHODS)}"
        )
    try:
        return _import_class(METHODS[method])
    except (ImportError, AttributeError, KeyError) as err:
        raise ConfigError(
            f"'model.method' {method!r}: its estimator "
            f"{METHODS[method]} cannot be imported ({err})"
        ) from None


def method_of(cls) -> str | None:
    """The :data:`METHODS` key of the estimator class ``cls`` (None if not
    registered)."""
    spec = f"{cls.__module__}:{cls.__qualname__}"
    return next((m for m, target in METHODS.items() if target == spec), None)


def estimator_class_named(name: str):
    """The registered estimator class whose class name is ``name`` (``"PPCA"``), or
    None.

    The lookup goes through :data:`METHODS` only, so no name read from a file (a
    model store, a config) is ever imported: :func:`scalepca.load` relies on this.
    """
    for method, spec in METHODS.items():
        if spec.rsplit(":", 1)[1] == name:
            return estimator_class(method)
    return None


def _plain_types(annotation) -> tuple | None:
    """The classes of a resolved annotation like ``int | None``; None if not that
    simple."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, type):
        members = (annotation,)
    elif (
        isinstance(annotation, types.UnionType)
        or typing.get_origin(annotation) is typing.Union
    ):
        members = typing.get_args(annotation)
    else:
        return None
    if not all(
        isinstance(m, type) and m.__module__ == "builtins" or m is _NONE
        for m in members
    ):
        return None
    return tuple(members)


def check_params(func, params: dict, where: str, *, skip=("self",)) -> dict:
    """Check keyword ``params`` against ``func``'s signature: names, and simple
    annotated types.

    Returns the parameter names that are allowed; integral floats given for ``int``
    parameters are converted in place. Values are only type-checked where the
    signature says so unambiguously (``int``, ``float | None``, ``str`` ...), or,
    without an annotation, when the default is a bool or a string (a flag or a named
    choice).
    """
    sig = inspect.signature(func)
    allowed = [
        p
        for p, par in sig.parameters.items()
        if p not in skip and par.kind not in (par.VAR_POSITIONAL, par.VAR_KEYWORD)
    ]
    bad = sorted(set(params) - set(allowed), key=str)
    if bad:
        raise ConfigError(unknown_keys(bad, allowed, where, say_where=False))
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
        if (
            int in ts
            and float not in ts
            and isinstance(value, float)
            and value.is_integer()
        ):
            params[name] = int(value)  # 1e3 in YAML is a float
            continue
        if not _type_ok(value, ts):
            raise ConfigError(
                f"'{where}.{name}' must be {_typename(ts)}; got {value!r}"
            )
    return allowed


def declared_problems(
    cls, params: dict, where: str, *, word=None, key=None
) -> tuple[dict, list[str]]:
    """``params`` of the estimator class ``cls`` checked against its ``_parameters``
    table (:mod:`._params`) before the data are known — a config, a model store: the
    names, the plain types a file can hold, and each value's form and range.

    Returns
    ``(parameters, problems)``: the parameters that pass (integral floats given for
    integers made ints), and one sentence per problem.
    Names and types are worded ``'{where}.{name}' must be ...``; other problems are
    the estimator's own messages passed through ``word`` (default: prefixed with
    ``where``). ``key(name)``: the key a parameter is named by (default
    ``where.name``). Bounds that depend on the data and the conditions between
    parameters are left to ``fit`` and ``scalepca validate``, which know the data's
    shape.
    """
    from ..models._params import checked, table_of

    table = table_of(cls)
    say = word or str  # the estimator's own message, in the caller's words
    word = word or (lambda message: f"{where}: {message}")
    key = key or (lambda name: f"{where}.{name}")
    problems, typed = [], {}
    unknown = sorted(set(params) - set(table), key=str)
    if unknown:
        problems.append(unknown_keys(unknown, list(table), where, say_where=False))
    for name, value in params.items():
        param = table.get(name)
        if param is None:
            continue
        if (
            int in param.types
            and float not in param.types
            and isinstance(value, float)
            and value.is_integer()
        ):
            value = int(value)  # 1e3 in YAML is a float
        if not _type_ok(value, param.types):
            problems.append(
                f"'{key(name)}' must be "
                f"{param.forms or _typename(param.types)}; got {value!r}"
            )
            continue
        typed[name] = value
    values, found = checked(cls, typed)
    bad = set()
    for name, err in found:
        bad.add(name)
        if table[name].forms:
            problems.append(
                f"'{key(name)}' must be {table[name].forms}; got "
                f"{typed[name]!r} ({say(str(err))})"
            )
        else:
            problems.append(word(str(err)))
    return {k: values[k] for k in typed if k not in bad}, problems
