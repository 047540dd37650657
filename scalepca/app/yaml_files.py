"""Reading a YAML run config: a safe loader that refuses a key given twice, errors that
say where the file is broken, and the line of the key each problem of a config names."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from .._schema import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects a key given twice in one mapping."""


def _no_duplicates(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"the key {key!r} is given twice",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates
)


def key_lines(path) -> dict[tuple, int]:
    """The line (from 1) of each key of the YAML file ``path``, by its keys from the top
    (``("model", "n_components")``); empty when the file cannot be read."""
    try:  # the node tree keeps each node's place in the file; nothing is constructed
        root = yaml.compose(Path(os.fspath(path)).read_text(), Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):
        return {}
    lines = {}

    def walk(node, keys):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    lines[(*keys, key.value)] = key.start_mark.line + 1
                    walk(value, (*keys, key.value))

    walk(root, ())
    return lines


#: a config key as problems name it: ``model.n_components``, ``'data.path'``
_KEY = re.compile(r"(?<![\w./-])((?:data|model|cluster|output|progress)(?:\.\w+)*)")


def problem_line(problem: str, lines: dict, overrides=()) -> int | None:
    """The line of the first key ``problem`` names that is in the file (``lines``, from
    :func:`key_lines`; the key's deepest part that is there), or None. A model parameter
    may sit under ``model.params``. Keys the ``overrides`` (``--set key=value``) set are
    not the file's, so they have no line."""
    given = [tuple(item.split("=", 1)[0].strip().split(".")) for item in overrides]
    for match in _KEY.finditer(problem):
        keys = tuple(match.group(1).split("."))
        if any(keys[: len(g)] == g or g[: len(keys)] == keys for g in given):
            continue
        if keys[0] == "model" and len(keys) > 1 and keys not in lines:
            keys = ("model", "params", *keys[1:])
        while keys:
            if keys in lines:
                return lines[keys]
            keys = keys[:-1]
    for name in re.findall(r"'([^'.]+)'", problem):  # an unknown section: 'modle'
        if (name,) in lines:
            return lines[(name,)]
    return None


def read_yaml(path):
    """The raw mapping of a YAML file; ``FileNotFoundError``/``ConfigError`` when
    unreadable."""
    path = Path(os.fspath(path))
    if not path.is_file():
        raise FileNotFoundError(f"config file {str(path)!r} does not exist")
    try:
        return yaml.load(path.read_text(), Loader=_StrictLoader)
    except yaml.YAMLError as err:
        where = ""
        mark = getattr(err, "problem_mark", None)
        if mark is not None:
            where = f" (line {mark.line + 1}, column {mark.column + 1})"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
