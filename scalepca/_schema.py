"""The primitives of scalepca's checked mappings (run configs, the cluster section,
estimator parameters): a field's types, default and choices, the check of a section
against its fields, and the error that names the bad key.
"""

from __future__ import annotations

import copy
import numbers
import typing


class ConfigError(ValueError):
    """A run config is malformed; the message names the key and what is allowed.

    ``ConfigError(*problems)``: one sentence per problem (``problems``); the message
    joins them with "; ".
    """

    def __init__(self, *problems: str):
        super().__init__("; ".join(problems))
        self.problems = list(problems)


#: names other libraries give scalepca's keys (xeofs: ``n_modes``), each suggested as
#: scalepca's name when that is allowed
OTHER_NAMES = {"n_modes": "n_components"}


def as_list(value) -> list:
    """A key that takes one value or a list of them (``data.path``,
    ``data.variable``), as a list."""
    if isinstance(value, list):
        return value
    return [value]


def closest(word, options) -> str | None:
    """The option ``word`` was most likely meant to be: scalepca's name of a name other
    libraries use (``n_modes`` → ``n_components``, :data:`OTHER_NAMES`), the same but
    for case (``EM`` → ``em``), else the closest spelling (``pcaa`` → ``pca``,
    ``n_component`` → ``n_components``); None if none is close."""
    import difflib

    options = [str(o) for o in options]
    word = str(word)
    if OTHER_NAMES.get(word) in options:
        return OTHER_NAMES[word]
    same = [o for o in options if o.lower() == word.lower()]
    if same:
        return same[0]
    lower = {o.lower(): o for o in options}
    close = difflib.get_close_matches(word.lower(), list(lower), n=1)
    return lower[close[0]] if close else None


def did_you_mean(word, options) -> str:
    """``"; did you mean 'em'?"`` for the option :func:`closest` finds, else ``""``."""
    if not isinstance(word, str):
        return ""
    match = closest(word, options)
    if match is None or match == word:
        return ""
    return f"; did you mean {match!r}?"


def unknown_keys(
    unknown: list,
    allowed: list,
    where: str,
    *,
    say_where: bool = True,
    what: str = "key(s)",
) -> str:
    """The sentence refusing the keys ``unknown`` of ``where``, with the allowed ones
    (``in 'where'`` unless not ``say_where``) and, for a misspelt key, the closest
    allowed one (``n_component`` → ``n_components``)."""
    hints = []
    for key in unknown:
        close = closest(key, allowed)
        if close is not None:
            hints.append(repr(close) if len(unknown) == 1 else f"{close!r} for {key!r}")
    hint = f"; did you mean {', '.join(hints)}?" if hints else ""
    names = ", ".join(repr(f"{where}.{k}" if where else k) for k in unknown)
    allowed_in = "allowed"
    if say_where:
        allowed_in += f" in {where!r}"
    return f"unknown {what} {names}; {allowed_in}: {', '.join(map(str, allowed))}{hint}"


_NONE = type(None)
_REQUIRED = object()


class _Field(typing.NamedTuple):
    types: tuple
    default: object = None
    choices: tuple | None = None

    @property
    def fallback(self):
        """The value of a key missing or refused: its default (None when required)."""
        if self.default is _REQUIRED:
            return None
        return self.default


def _f(types, default=None, choices=None) -> _Field:
    return _Field(types if isinstance(types, tuple) else (types,), default, choices)


_SIZE = (str, int, _NONE)  # "4GiB" or bytes


def _typename(ts: tuple) -> str:
    names = {
        _NONE: "null",
        dict: "a mapping",
        list: "a list",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
    }
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
        raise ConfigError(
            f"'{name}' must be a mapping; got {type(section).__name__} {section!r}"
        )
    problems = []
    unknown = sorted(set(section) - set(schema), key=str)
    if unknown:
        problems.append(unknown_keys(unknown, list(schema), name))
    out = {}
    for key, field in schema.items():
        if key not in section:
            if field.default is _REQUIRED:
                problems.append(
                    f"'{name}.{key}' is required ({_typename(field.types)})"
                )
            out[key] = copy.deepcopy(field.fallback)
            continue
        value = section[key]
        if not _type_ok(value, field.types):
            problems.append(
                f"'{name}.{key}' must be {_typename(field.types)}; got {value!r}"
            )
        elif field.choices is not None and value not in field.choices:
            problems.append(
                f"'{name}.{key}' is {value!r}; allowed: "
                f"{', '.join(map(str, field.choices))}"
                f"{did_you_mean(value, field.choices)}"
            )
        else:
            out[key] = value
            continue
        out[key] = copy.deepcopy(field.fallback)
    if problems:
        raise ConfigError(*problems)
    return out
