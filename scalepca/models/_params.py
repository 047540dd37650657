"""Estimator parameters declared once: a table per estimator, read by ``fit``, the YAML
config schema, ``scalepca validate`` and :func:`scalepca.load`.

An estimator lists every ``__init__`` parameter in its ``_parameters`` (name →
:class:`Param`) and the conditions between parameters in ``_parameter_rules``
(:class:`Rule`). A :class:`Param` says which plain values a config or a model store may
hold (``types``, ``choices``) and checks a value in Python words. A check may have a
part that depends on the data (``n_components <= min(n, d)``): it is given the data's
:class:`Shape` when one is known (``fit``, ``validate``) and ``None`` before (a config
read without its data, a stored model). Defaults are not in the table: they are the
``__init__`` signature's.

The messages are the library's (``n_components=0 is out of range: ...``); the
application rewrites them into config keys (:mod:`scalepca.app.messages`).
"""

from __future__ import annotations

import numbers
import typing
from collections.abc import Callable

from .._validation import (
    check_bool,
    check_choice,
    check_n_components,
    check_random_state_form,
    check_scalar,
)
from ..io._checkpoint import check_checkpoint_path

_NONE = type(None)


class Shape(typing.NamedTuple):
    """What the parameter checks know of the data: its shape, item size and block
    kind."""

    n: int
    d: int
    itemsize: int = 8
    sparse: bool = False


class Param(typing.NamedTuple):
    """One parameter: the plain ``types`` a config or a model store may hold, the
    allowed ``choices``, and ``check(value, name, params, shape)`` returning the
    value as used (its data-dependent part only when ``shape`` is not None;
    ``shaped``: it has one). ``kind`` names the form (``int``, ``real``, ``flag``,
    ``choice``, ``seed``, ``path``, ``n_components`` or ``other``); ``forms`` is the
    config message's "must be ..." when the types say too little; ``needs``: the
    other parameters the check reads."""

    kind: str
    types: tuple
    check: Callable
    choices: tuple | None = None
    forms: str | None = None
    shaped: bool = False
    needs: tuple = ()


class Rule(typing.NamedTuple):
    """A condition between parameters, checked with the data's shape (``fit``,
    ``validate``): ``check(params, shape)`` raises ``ValueError`` (or ``TypeError``)
    when it fails. It is skipped when one of ``needs`` (the parameters it reads) is
    itself bad."""

    check: Callable
    needs: tuple


# -- the forms -------------------------------------------------------------------------
def Int(low=None, high=None, *, none: bool = False) -> Param:
    """An integer in ``[low, high]`` (``none``: or None)."""

    def check(value, name, params, shape):
        return check_scalar(
            value, name, kind=numbers.Integral, low=low, high=high, allow_none=none
        )

    return Param("int", (int, _NONE) if none else (int,), check)


def Real(low=None, *, open_low: bool = False, none: bool = False) -> Param:
    """A finite real number ``>= low`` (``open_low``: ``> low``; ``none``: or None)."""

    def check(value, name, params, shape):
        return check_scalar(
            value, name, low=low, low_inclusive=not open_low, allow_none=none
        )

    return Param("real", (float, _NONE) if none else (float,), check)


def Flag() -> Param:
    """True or False."""
    return Param(
        "flag", (bool,), lambda value, name, params, shape: check_bool(value, name)
    )


def Choice(*options: str) -> Param:
    """One of the strings ``options``."""

    def check(value, name, params, shape):
        return check_choice(value, name, options)

    return Param("choice", (str,), check, choices=options)


def Seed() -> Param:
    """``random_state``: None, a non-negative int, or a numpy RandomState, Generator or
    SeedSequence (a config or a store holds an int or null). Nothing is drawn here."""

    def check(value, name, params, shape):
        check_random_state_form(value)
        return value

    return Param("seed", (int, _NONE), check)


def Path() -> Param:
    """A local path (str or path-like) or None; nothing is created here."""

    def check(value, name, params, shape):
        check_checkpoint_path(value, name)
        return value

    return Param("path", (str, _NONE), check)


def NComponents(
    *,
    fraction: bool = False,
    none: bool = True,
    bound: Callable | None = None,
    needs: tuple = (),
) -> Param:
    """``n_components``: an integer in ``[1, min(*bound(params, shape))]`` (default
    bound: the data's ``(n, d)``); ``fraction``: also a float in (0, 1) or ``"mle"``;
    ``none``: None means all (the bound). Returns the number of components (or the
    float / ``"mle"``)."""

    def check(value, name, params, shape):
        if value is None and not none:
            raise TypeError(
                f"{name} must be an integer for {params['__estimator__']}; got None"
            )
        if shape is None:
            if isinstance(value, float) and value.is_integer() and value >= 1:
                value = int(value)
            return check_n_components(value, fraction=fraction, what=name)
        rows, cols = (shape.n, shape.d) if bound is None else bound(params, shape)
        return check_n_components(value, rows, cols, fraction=fraction, what=name)

    if fraction:
        forms = "an integer >= 1, a float in (0, 1), 'mle' or null"
        types = (int, float, str, _NONE)
    elif none:
        forms = "an integer >= 1 or null"
        types = (int, _NONE)
    else:
        forms = "an integer >= 1"
        types = (int,)
    return Param("n_components", types, check, forms=forms, shaped=True, needs=needs)


def fixed_k(n_components) -> int | None:
    """The number of components ``n_components`` fixes; None when the spectrum
    chooses it (a float or ``"mle"``) or it is not given."""
    if isinstance(n_components, int):
        return n_components
    return None


def Other(
    types: tuple, check: Callable, *, shaped: bool = False, needs: tuple = ()
) -> Param:
    """A parameter of its own form, checked by ``check(value, name, params, shape)``."""
    return Param("other", types, check, shaped=shaped, needs=needs)


# -- checking --------------------------------------------------------------------------
def table_of(cls) -> dict:
    """``cls._parameters``; a ``TypeError`` naming the class if it has none."""
    table = getattr(cls, "_parameters", None)
    if table is None:
        raise TypeError(f"{cls.__name__} declares no _parameters table")
    return table


def parameter_problems(
    cls,
    params: dict,
    shape: Shape | None = None,
) -> list[tuple[str | None, Exception]]:
    """Check ``params`` (every parameter of ``cls``'s table, or some of them) against
    the table; returns the problems as
    ``(parameter name or None for a rule, the TypeError or ValueError raised)``, in
    the table's order: each parameter's own form; with ``shape``, then the parts that
    depend on the data and the rules between parameters."""
    return checked(cls, params, shape)[1]


def checked(cls, params: dict, shape: Shape | None = None) -> tuple[dict, list]:
    """``(the values as used, the problems)`` of :func:`parameter_problems`."""
    table = table_of(cls)
    # a check reading another parameter that is not given reads its default
    given = {**cls().get_params(deep=False), **params, "__estimator__": cls.__name__}
    values, problems = {}, []

    def run(name, func, *args):
        try:
            return func(*args)
        except (TypeError, ValueError) as err:
            problems.append((name, err))
        return None

    for name, param in table.items():
        if name in params:
            values[name] = run(name, param.check, params[name], name, given, None)
    if shape is None:
        return values, problems
    bad = {name for name, _ in problems}
    for name, param in table.items():
        if param.shaped and name in params and not bad & {name, *param.needs}:
            values[name] = run(name, param.check, params[name], name, given, shape)
    bad = {name for name, _ in problems}
    for rule in getattr(cls, "_parameter_rules", ()):
        if not bad & set(rule.needs) and set(rule.needs) <= set(params):
            run(None, rule.check, given, shape)
    return values, problems


def check_parameters(est, shape: Shape) -> dict:
    """Every parameter of the estimator ``est`` checked for data of ``shape``: the
    values as used (``n_components`` resolved to an integer, ...), or the first
    problem raised."""
    params = {name: getattr(est, name) for name in table_of(type(est))}
    values, problems = checked(type(est), params, shape)
    if problems:
        raise problems[0][1]
    return values
