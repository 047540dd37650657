"""Reading a YAML run config: a safe loader that refuses a key given twice, and errors that
say where the file is broken."""

from __future__ import annotations

import os
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
                "while reading a mapping", node.start_mark,
                f"the key {key!r} is given twice", key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def read_yaml(path):
    """The raw mapping of a YAML file; ``FileNotFoundError``/``ConfigError`` when unreadable."""
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
