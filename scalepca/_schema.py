"""The primitives of scalepca's checked mappings (run configs, the cluster section, estimator
parameters): a field's types, default and choices, the check of a section against its fields,
and the error that names the bad key.
"""

from __future__ import annotations

import copy
import numbers
import typing


class ConfigError(ValueError):
    """A run config is malformed; the message names the key and what is allowed."""


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
    """Check ``section`` against ``schema``; return it with defaults filled in."""
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ConfigError(f"'{name}' must be a mapping; got {type(section).__name__} {section!r}")
    unknown = sorted(set(section) - set(schema), key=str)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(repr(f'{name}.{k}') for k in unknown)}; "
            f"allowed in '{name}': {', '.join(schema)}"
        )
    out = {}
    for key, field in schema.items():
        if key not in section:
            if field.default is _REQUIRED:
                raise ConfigError(f"'{name}.{key}' is required ({_typename(field.types)})")
            out[key] = copy.deepcopy(field.default)
            continue
        value = section[key]
        if not _type_ok(value, field.types):
            raise ConfigError(
                f"'{name}.{key}' must be {_typename(field.types)}; got {value!r}"
            )
        if field.choices is not None and value not in field.choices:
            raise ConfigError(
                f"'{name}.{key}' is {value!r}; allowed: {', '.join(map(str, field.choices))}"
            )
        out[key] = value
    return out
