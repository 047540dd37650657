"""What a checkpoint's fingerprint holds: the parameters that change the result, and a
sketch of the data.

:func:`result_params` takes an estimator's ``get_params()`` whole, minus the parameters
the estimator names with the reason they do not change the result (the checkpoint's
path, its commit interval, the stopping parameters, which a resume evaluates again,
...). A parameter added to an estimator later joins its fingerprint without anyone
having to remember it.

:func:`sketch_graph` is a fixed random projection of the data, ``hᵀ V G`` and
``hᵀ N G``: ``V`` the values (non-finite and unobserved entries as 0), ``N`` the
pattern of NaN (or unobserved) entries, ``h`` and the four columns of ``G`` fixed
N(0, 1) weights addressed by the global row and column index. Any change of the
values, of the missing entries or of the order of rows or features moves it (with
probability 1), while another chunking of the same data changes only the rounding of
its sums. It is a blockwise map and a sum of 2 × 4 numbers per block, computed in the
same ``dask.compute`` as the fit's first pass, so each block is read once for both.
"""

from __future__ import annotations

import numbers

import dask.array as da
import numpy as np

from .._json import jsonable

#: columns of G: the sketch holds twice as many numbers (values and pattern)
SKETCH_COLUMNS = 4
#: streams of the fixed weights: rows, then one per column of G
_ROW_STREAM = 0x5CA1E


def result_params(est, ignore: dict, resolved: dict | None = None) -> dict:
    """``est.get_params()`` minus ``ignore`` (name → why it does not change the result),
    with the values of ``resolved`` (e.g. ``"auto"`` or ``None`` resolved for this fit,
    a random state that the fit does not use set to None) taking their place, as JSON
    values.

    A parameter that is neither JSON nor resolved is a TypeError: the estimator must
    say how it enters the fingerprint.
    """
    params = {
        key: value
        for key, value in est.get_params(deep=False).items()
        if key not in ignore
    }
    params.update(resolved or {})
    return {key: _json_value(key, value) for key, value in sorted(params.items())}


def random_state_param(random_state):
    """A random state as it enters a fingerprint: an integer seed, else None (a
    Generator or None draws anew each fit; a resumed fit goes on with the draws the
    checkpoint holds)."""
    if isinstance(random_state, numbers.Integral) and not isinstance(
        random_state, bool
    ):
        return int(random_state)
    return None


def _json_value(key, value):
    try:
        return jsonable(value)
    except TypeError:
        raise TypeError(
            f"parameter {key}={value!r} has no fingerprint "
            "value; the estimator must resolve it"
        ) from None


def _gaussian_at(index: np.ndarray, stream: int) -> np.ndarray:
    """Fixed N(0, 1) numbers addressed by ``index`` (splitmix64 of the index in
    ``stream``, then the normal quantile): the same for a given index whatever the
    blocks."""
    from scipy.special import ndtri

    z = (index.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    z = z + np.uint64(stream)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return ndtri(((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53)


def _sketch_block(x, rows, cols, observed=None):
    """``[hᵀ V G, hᵀ N G]`` of one block (shape (1, 1, 2 · SKETCH_COLUMNS))."""
    h = _gaussian_at(np.asarray(rows), _ROW_STREAM)
    G = np.stack(
        [
            _gaussian_at(np.asarray(cols), _ROW_STREAM + 1 + c)
            for c in range(SKETCH_COLUMNS)
        ],
        axis=1,
    )
    if hasattr(x, "tocsr"):  # a scipy.sparse block: only its stored entries can be NaN
        x = x.tocsr(copy=True).astype(np.float64)
        bad = x.copy()
        bad.data = (~np.isfinite(x.data)).astype(np.float64)
        x.data[~np.isfinite(x.data)] = 0.0
        values, pattern = h @ (x @ G), h @ (bad @ G)
    else:
        x = np.asarray(x, dtype=np.float64)
        ok = np.isfinite(x)
        if observed is not None:
            ok = ok & np.asarray(observed)
        values = h @ (np.where(ok, x, 0.0) @ G)
        pattern = h @ ((~ok) @ G)
    return np.concatenate([values, pattern])[None, None, :]


def sketch_graph(X: da.Array, observed: da.Array | None = None) -> da.Array:
    """The data's sketch (see the module docstring), lazy: ``2 · SKETCH_COLUMNS``
    float64 numbers. ``observed``: a boolean array of X's shape and chunks
    (unobserved entries count as missing, whatever they hold)."""
    rows = da.arange(X.shape[0], chunks=(X.chunks[0],))
    cols = da.arange(X.shape[1], chunks=(X.chunks[1],))
    args = [X, "ij", rows, "i", cols, "j"]
    if observed is not None:
        args += [observed, "ij"]
    parts = da.blockwise(
        _sketch_block,
        "ijk",
        *args,
        new_axes={"k": 2 * SKETCH_COLUMNS},
        adjust_chunks={"i": 1, "j": 1},
        dtype=np.float64,
        meta=np.empty((0, 0, 0), dtype=np.float64),
    )
    return parts.sum(axis=(0, 1))


def data_fingerprint(X, sketch, statistics: dict | None = None) -> dict:
    """The fingerprint entries of the data: shape, dtype, the estimator's
    ``statistics`` (digests of its first pass, checked before the sketch so a message
    can name them), then the computed sketch."""
    return {
        "shape": [int(s) for s in X.shape],
        "dtype": str(np.dtype(X.dtype)),
        **(statistics or {}),
        "data_sketch": [float(v) for v in np.asarray(sketch)],
    }
