"""The primitives of scalepca's checked mappings (run configs, the cluster section, estimator
parameters): a field's types, default and choices, the check of a section against its fields,
and the error that names the bad key.
"""

from __future__ import annotations

import copy
import numbers
import typing


class ConfigError(ValueError):
    """A run config is malformed; the message names the key and what is allowed.

    ``ConfigError(*problems)``: one sentence per problem (``problems``); the message joins
    them with "; ".
    """

    def __init__(self, *problems: str):
        super().__init__("; ".join(problems))
        self.problems = list(problems)


def unknown_keys(unknown: list, allowed: list, where: str, *, say_where: bool = True,
                 what: str = "key(s)") -> str:
    """The sentence refusing the keys ``unknown`` of ``where``, with the allowed ones (``in
    'where'`` unless not ``say_where``) and, for a misspelt key, the closest allowed one
    (``n_component`` → ``n_components``)."""
    import difflib

    hints = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
        if close:
            hints.append(repr(close[0]) if len(unknown) == 1 else f"{close[0]!r} for {key!r}")
    hint = f"; did you mean {', '.join(hints)}?" if hints else ""
    names = ", ".join(repr(f"{where}.{k}" if where else k) for k in unknown)
    return (f"unknown {what} {names}; "
            f"allowed{f' in {where!r}' if say_where else ''}: "
            f"{', '.join(map(str, allowed))}{hint}")


_NONE = type(None)
_REQUIRED = object()


class _Field(typing.NamedTuple):
    types: tuple
    default: object = None
    choices: tuple | None = None


def _f(types, default=None, choices=None) -> _Field:
    return _Field(types if isinstance(types, tuple) else (types,), default, choices)


_SIZE = (str, int, _NONE)  # "4GiB" or bytes


def _typename(ts: tuple) -> str:
    names = {_NONE: "null", dict: "a mapping", list: "a list", str: "a string", int: "an integer",
             float: "a number", bool: "true or false"}
    return " or ".join(names.get(t, t.__name__) for t in ts)


def _type_ok(value, ts: tuple) -> bool:
    if isinstance(value, bool):
        return bool in ts
    if float in ts and isinstance(value, numbers.Real):
        return True
    return isinstance(value, ts)


def _check_section(section, schema: dict, name: str) -> dict:
    """Check ``section`` against ``schema``; return it with defaults filled in, or raise
    :class:`ConfigError` naming every problem of the section."""
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ConfigError(f"'{name}' must be a mapping; got {type(section).__name__} {section!r}")
    problems = []
    unknown = sorted(set(section) - set(schema), key=str)
    if unknown:
        problems.append(unknown_keys(unknown, list(schema), name))
    out = {}
    for key, field in schema.items():
        if key not in section:
            if field.default is _REQUIRED:
                problems.append(f"'{name}.{key}' is required ({_typename(field.types)})")
            out[key] = copy.deepcopy(None if field.default is _REQUIRED else field.default)
            continue
        value = section[key]
        if not _type_ok(value, field.types):
            problems.append(f"'{name}.{key}' must be {_typename(field.types)}; got {value!r}")
        elif field.choices is not None and value not in field.choices:
            problems.append(f"'{name}.{key}' is {value!r}; allowed: "
                            f"{', '.join(map(str, field.choices))}")
        else:
            out[key] = value
            continue
        out[key] = copy.deepcopy(None if field.default is _REQUIRED else field.default)
    if problems:
        raise ConfigError(*problems)
    return out
