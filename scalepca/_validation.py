"""Metadata-only checks of arrays and parameters.

Nothing in this module computes data: every check reads shapes, chunks and dtypes only,
so bad input is rejected before any pass over a large store starts.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import warnings

import dask.array as da
import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "check_matrix",
    "check_n_components",
    "check_n_features",
    "check_random_state_seed",
    "check_scalar",
]


def _dtype_of(X) -> np.dtype:
    return np.dtype(getattr(X, "dtype", np.asarray(X).dtype))


def check_dtype(dtype: np.dtype, *, what: str = "X") -> np.dtype:
    """Return the floating dtype data of ``dtype`` is computed in, or raise ``TypeError``.

    float32 and float64 are kept; integers and booleans are converted to float64 with a
    warning; complex, object, string and other dtypes raise.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if dtype.itemsize < 4:
            warnings.warn(
                f"{what} has dtype {dtype}; converting to float32", UserWarning, stacklevel=3
            )
            return np.dtype(np.float32)
        if dtype.itemsize > 8:
            return np.dtype(np.float64)
        return dtype
    if dtype.kind in "iub":
        warnings.warn(
            f"{what} has dtype {dtype}; converting to float64", UserWarning, stacklevel=3
        )
        return np.dtype(np.float64)
    if dtype.kind == "c":  # a ValueError, as scikit-learn's validation raises for complex data
        raise ValueError(
            f"{what} has dtype {dtype}: Complex data not supported; scalepca needs real numbers "
            "(take the real part or the modulus, or put real and imaginary parts side by side "
            "as features)"
        )
    raise TypeError(
        f"{what} has dtype {dtype} ({_KIND_NAMES.get(dtype.kind, 'unsupported')}); "
        "scalepca needs real numbers (float32, float64, or integers/booleans to convert)"
    )


_KIND_NAMES = {
    "c": "complex",
    "O": "object",
    "U": "unicode strings",
    "S": "byte strings",
    "M": "datetime",
    "m": "timedelta",
    "V": "void/structured",
}


def check_matrix(
    X,
    *,
    what: str = "X",
    min_samples: int = 1,
    min_features: int = 1,
    allow_2d_blocks: bool = False,
) -> da.Array:
    """Validate ``X`` from metadata and return it as a 2-D floating dask array.

    Parameters
    ----------
    X : array-like
        numpy array, dask array, zarr array or anything ``da.asarray`` accepts.
    what : str
        Name used in error messages.
    min_samples, min_features : int
        Smallest accepted number of rows / columns.
    allow_2d_blocks : bool
        If False (tall-skinny algorithms), a matrix whose features are split over several
        column chunks is rechunked to one column chunk (with a log line).

    Raises
    ------
    TypeError
        Non-numeric dtype (``ValueError`` for complex numbers); sparse input (a
        ``scipy.sparse`` matrix or pydata ``sparse`` array, or a dask array of such blocks:
        not supported yet).
    ValueError
        Not 2-D, too few samples or features, unknown chunk sizes.
    """
    _refuse_sparse(X, what)
    if isinstance(X, da.Array):
        arr = X
    else:
        if isinstance(X, (str, bytes, os.PathLike)):
            raise TypeError(f"{what} is a path ({X!r}), not an array; open the store with "
                            "scalepca.open_matrix(path) and pass the result")
        if not hasattr(X, "shape") or not hasattr(X, "dtype"):
            X = np.asarray(X)
        if np.dtype(X.dtype).kind not in "fiub":
            check_dtype(X.dtype, what=what)
        if isinstance(X, np.ndarray):
            arr = da.from_array(X, chunks=_row_chunks(X))
        else:
            arr = da.asarray(X)
    check_2d(arr.shape, what=what)
    if any(math.isnan(c) for dim in arr.chunks for c in dim):
        raise ValueError(
            f"{what} has unknown chunk sizes (shape {arr.shape}); call "
            f"`{what}.compute_chunk_sizes()` (or `X = X.compute_chunk_sizes()`) before fitting"
        )
    n, d = arr.shape
    if n < min_samples:
        raise ValueError(f"{what} has {n} sample(s); at least {min_samples} required")
    if d < min_features:
        raise ValueError(f"{what} has {d} feature(s); at least {min_features} required")
    dtype = check_dtype(arr.dtype, what=what)
    if dtype != arr.dtype:
        arr = arr.astype(dtype)
    if not allow_2d_blocks and len(arr.chunks[1]) > 1:
        logger.info(
            "%s: features were split over %d column chunks; rechunking to one column chunk "
            "(rows stay as they are)",
            what,
            len(arr.chunks[1]),
        )
        arr = arr.rechunk({1: -1})
    return arr


def check_2d(shape: tuple, *, what: str = "X") -> None:
    """Raise ``ValueError`` unless ``shape`` is that of a 2-D (samples × features) array."""
    if len(shape) != 2:
        raise ValueError(
            f"{what} must be 2-D (samples × features); got {len(shape)}-D with shape {shape}"
            + (". Reshape your data: X.reshape(-1, 1) if it is one feature, X.reshape(1, -1) "
               "if it is one sample" if len(shape) == 1 else "")
        )


def _sparse_kind(x) -> tuple[str, str] | None:
    """``(name, densifying method)`` of a scipy.sparse or pydata sparse array, else None."""
    import scipy.sparse

    if scipy.sparse.issparse(x):
        return f"scipy.sparse {type(x).__name__}", "toarray"
    if type(x).__module__.partition(".")[0] == "sparse":  # pydata sparse, without importing it
        return f"pydata sparse {type(x).__name__}", "todense"
    return None


def _refuse_sparse(X, what: str) -> None:
    """Raise ``TypeError`` naming sparse input (the array, or a dask array's block type)."""
    blocks = isinstance(X, da.Array)
    kind = _sparse_kind(getattr(X, "_meta", None) if blocks else X)
    if kind is None:
        return
    name, method = kind
    if blocks:
        where = f"a dask array of {name} blocks"
        fix = f"densify its blocks with X.map_blocks(lambda b: b.{method}(), dtype=X.dtype)"
    else:
        where = f"a {name}"
        fix = f"densify it with X.{method}() if it fits in memory, or write it to a zarr store"
    raise TypeError(f"{what} is {where}; sparse input is not supported yet — {fix}")


def _row_chunks(X) -> tuple:
    """Row chunking for an in-memory array: about 64 MiB per block."""
    n = X.shape[0]
    d = int(np.prod(X.shape[1:])) if X.ndim > 1 else 1
    rows = max(1, (64 * 2**20) // max(1, d * np.dtype(X.dtype).itemsize))
    return (min(n, rows),) + tuple(X.shape[1:]) if n else X.shape


def check_n_components(n_components, n_samples: int, n_features: int, *, what="n_components"):
    """Check 1 ≤ n_components ≤ min(n_samples, n_features); ``None`` means the maximum."""
    upper = min(n_samples, n_features)
    if n_components is None:
        return upper
    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral):
        raise TypeError(f"{what} must be an integer or None; got {n_components!r}")
    if not 1 <= n_components <= upper:
        raise ValueError(
            f"{what}={n_components} is out of range: it must be between 1 and "
            f"min(n_samples, n_features) = min({n_samples}, {n_features}) = {upper}"
        )
    return int(n_components)


def check_n_features(X, n_features_in: int, *, what: str = "X",
                     estimator: str = "the estimator") -> None:
    """Raise ``ValueError`` when ``X`` does not have the number of features seen in fit.

    The message is scikit-learn's (``validate_data`` says the same of NumPy input).
    """
    d = X.shape[1]
    if d != n_features_in:
        raise ValueError(
            f"{what} has {d} features, but {estimator} is expecting {n_features_in} features "
            "as input"
        )


def check_scalar(value, name: str, *, kind=numbers.Real, low=None, high=None,
                 low_inclusive=True, high_inclusive=True, allow_none=False):
    """Type and range check of one parameter, with a message naming it."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, kind):
        kname = "an integer" if kind is numbers.Integral else "a real number"
        raise TypeError(f"{name} must be {kname}; got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}; got {value!r}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise ValueError(f"{name} must be {op} {high}; got {value!r}")
    return value


def check_bool(value, name: str) -> bool:
    """A flag parameter: ``True`` or ``False`` (NumPy booleans too), nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def check_choice(value, name: str, choices) -> str:
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}={value!r} is not one of the allowed values: {allowed}")
    return value


def check_random_state_seed(random_state) -> np.random.SeedSequence:
    """A ``SeedSequence`` from ``random_state``.

    Accepted, as in scikit-learn: None (fresh entropy), a non-negative int, a
    ``np.random.RandomState`` instance; also a ``np.random.Generator`` or a
    ``np.random.SeedSequence``. Blocks draw from children of this sequence indexed by block
    position, so random numbers do not depend on the number of workers or the order tasks
    run in.

    Raises
    ------
    ValueError
        A negative int.
    TypeError
        Anything else (a float, a string, ...).
    """
    accepted = ("random_state must be None, a non-negative int, a numpy RandomState or "
                "Generator, or a numpy SeedSequence")
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"{accepted}; got the negative int {random_state}")
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(int(random_state.randint(2**31)))
    raise TypeError(f"{accepted}; got {random_state!r} ({type(random_state).__name__})")


def check_random_state_form(random_state) -> None:
    """Check the form of ``random_state`` (as :func:`check_random_state_seed`) without drawing.

    For a parameter check at the start of ``fit``: a Generator or RandomState passed by the user
    is not advanced, so the draw made later, where the seed is used, is the one it always was.
    """
    if not isinstance(random_state, (np.random.Generator, np.random.RandomState)):
        check_random_state_seed(random_state)
