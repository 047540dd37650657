"""JSON values of parameters and attributes: what a model store and a checkpoint's
fingerprint record (the one conversion both use)."""

from __future__ import annotations

import numbers

import numpy as np


def jsonable(value):
    """Convert ``value`` to JSON types, or raise TypeError."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return jsonable(value.item())
    raise TypeError(f"cannot store {type(value).__name__} as a JSON attribute")
