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
    "is_sparse",
    "check_n_components",
    "choose_n_components",
    "full_rows",
    "check_n_features",
    "check_random_state_seed",
    "check_scalar",
]


def check_dtype(dtype: np.dtype, *, what: str = "X") -> np.dtype:
    """Return the floating dtype data of ``dtype`` is computed in, or raise
    ``TypeError``.

    float32 and float64 are kept; integers and booleans are converted to float64 with a
    warning; complex, object, string and other dtypes raise.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if dtype.itemsize < 4:
            warnings.warn(
                f"{what} has dtype {dtype}; converting to float32",
                UserWarning,
                stacklevel=3,
            )
            return np.dtype(np.float32)
        if dtype.itemsize > 8:
            return np.dtype(np.float64)
        return dtype
    if dtype.kind in "iub":
        warnings.warn(
            f"{what} has dtype {dtype}; converting to float64",
            UserWarning,
            stacklevel=3,
        )
        return np.dtype(np.float64)
    # a ValueError, as scikit-learn's validation raises for complex data
    if dtype.kind == "c":
        raise ValueError(
            f"{what} has dtype {dtype}: Complex data not supported; scalepca "
            "needs real numbers (take the real part or the modulus, or put "
            "real and imaginary parts side by side as features)"
        )
    raise TypeError(
        f"{what} has dtype {dtype} ({_KIND_NAMES.get(dtype.kind, 'unsupported')}); "
        "scalepca needs real numbers (float32, float64, or integers/booleans to "
        "convert)"
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


def _as_dask_matrix(X, what: str) -> da.Array:
    """``X`` as a dask array (sparse input as CSR row blocks), its dtype refused by
    name when it is not numeric; a path is refused with a pointer to ``open_matrix``."""
    if is_sparse(X):
        if np.dtype(X.dtype).kind not in "fiub":
            check_dtype(X.dtype, what=what)
        return as_csr_blocks(X)
    if isinstance(X, da.Array):
        return X
    if isinstance(X, (str, bytes, os.PathLike)):
        raise TypeError(
            f"{what} is a path ({X!r}), not an array; open the store with "
            "scalepca.open_matrix(path) and pass the result"
        )
    if not hasattr(X, "shape") or not hasattr(X, "dtype"):
        X = np.asarray(X)
    if np.dtype(X.dtype).kind not in "fiub":
        check_dtype(X.dtype, what=what)
    if isinstance(X, np.ndarray):
        return da.from_array(X, chunks=_row_chunks(X))
    return da.asarray(X)


def _check_size(
    arr: da.Array, what: str, min_samples: int, min_features: int, unknown_rows: bool
) -> None:
    """2-D, known chunk sizes (rows may be unknown with ``unknown_rows``), enough
    samples and features."""
    check_2d(arr.shape, what=what)
    if any(math.isnan(c) for dim in arr.chunks[int(unknown_rows) :] for c in dim):
        raise ValueError(
            f"{what} has unknown chunk sizes (shape {arr.shape}); call "
            f"`{what}.compute_chunk_sizes()` (or `X = X.compute_chunk_sizes()`) "
            f"before fitting"
        )
    n, d = arr.shape
    if n < min_samples:  # False for an unknown (NaN) row count
        raise ValueError(f"{what} has {n} sample(s); at least {min_samples} required")
    if d < min_features:
        raise ValueError(f"{what} has {d} feature(s); at least {min_features} required")


def check_matrix(
    X,
    *,
    what: str = "X",
    min_samples: int = 1,
    min_features: int = 1,
    allow_2d_blocks: bool = False,
    accept_sparse: bool = False,
    unknown_rows: bool = False,
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
        If False (tall-skinny algorithms), a matrix whose features are split over
        several column chunks is rechunked to one column chunk (with a log line).
    accept_sparse : bool
        Whether the caller works on sparse blocks. If True, a ``scipy.sparse`` matrix or
        array (any format), a pydata ``sparse`` array, or a dask array of either kind of
        block becomes a dask array of ``scipy.sparse.csr_matrix`` row blocks (see
        :func:`as_csr_blocks`); :func:`is_sparse` tells such arrays apart. If False,
        sparse input is refused by name.
    unknown_rows : bool
        Whether the row blocks' sizes may be unknown (``transform`` of a dask DataFrame
        maps its partitions without counting their rows; ``min_samples`` is then not
        checked).

    Raises
    ------
    TypeError
        Non-numeric dtype (``ValueError`` for complex numbers); sparse input when
        ``accept_sparse`` is False.
    ValueError
        Not 2-D, too few samples or features, unknown chunk sizes.
    """
    if not accept_sparse:
        _refuse_sparse(X, what)
    arr = _as_dask_matrix(X, what)
    _check_size(arr, what, min_samples, min_features, unknown_rows)
    dtype = check_dtype(arr.dtype, what=what)
    if dtype != arr.dtype:
        arr = arr.astype(dtype)
    if not allow_2d_blocks and len(arr.chunks[1]) > 1:
        logger.info(
            "%s: features were split over %d column chunks; "
            "rechunking to one column chunk (rows stay as they are, "
            "or are split where whole rows would exceed 256 MiB)",
            what,
            len(arr.chunks[1]),
        )
        arr = arr.rechunk({1: -1})
    return arr


#: largest block (rows × all features) that regrouping features into one chunk makes
ROW_BLOCK_BYTES = 256 * 2**20


def full_rows(arr: da.Array, block_bytes: int = ROW_BLOCK_BYTES) -> da.Array:
    """``arr`` with its features in one column chunk: row chunks kept, except where a
    block of whole rows would exceed ``block_bytes`` (a field chunked along space
    holds every sample in each block; merged as it is, it would be one block of all
    the data) — then rows are split to fit. ``scipy.sparse`` blocks keep their rows
    (their size is their stored values)."""
    if len(arr.chunks[1]) == 1:
        return arr
    rows = max(1, block_bytes // max(1, arr.shape[1] * arr.dtype.itemsize))
    if not is_sparse(arr) and arr.chunks[0] and max(arr.chunks[0]) > rows:
        return arr.rechunk({0: rows, 1: -1})
    return arr.rechunk({1: -1})


def check_2d(shape: tuple, *, what: str = "X") -> None:
    """Raise ``ValueError`` unless ``shape`` is that of a 2-D (samples × features)
    array."""
    if len(shape) != 2:
        hint = ""
        if len(shape) == 1:
            hint = (
                ". Reshape your data: X.reshape(-1, 1) if it is one feature, "
                "X.reshape(1, -1) if it is one sample"
            )
        raise ValueError(
            f"{what} must be 2-D (samples × features); "
            f"got {len(shape)}-D with shape {shape}{hint}"
        )


def _sparse_kind(x) -> tuple[str, str] | None:
    """``(name, densifying method)`` of a scipy.sparse or pydata sparse array, else
    None."""
    import scipy.sparse

    if scipy.sparse.issparse(x):
        return f"scipy.sparse {type(x).__name__}", "toarray"
    # pydata sparse, without importing it
    if type(x).__module__.partition(".")[0] == "sparse":
        return f"pydata sparse {type(x).__name__}", "todense"
    return None


def _meta_or_self(X):
    """A dask array's block type (its ``_meta``), or ``X`` itself."""
    return getattr(X, "_meta", None) if isinstance(X, da.Array) else X


def is_sparse(X) -> bool:
    """Whether ``X`` (an array, or a dask array by its block type) holds sparse
    blocks."""
    return _sparse_kind(_meta_or_self(X)) is not None


#: bytes of stored values and indices per row block of an in-memory sparse matrix
SPARSE_BLOCK_BYTES = 64 * 2**20


def _to_csr(block):
    """One block as a ``scipy.sparse.csr_matrix`` (already-CSR blocks are not
    copied)."""
    import scipy.sparse

    if isinstance(block, scipy.sparse.csr_matrix):
        return block
    if not scipy.sparse.issparse(block):  # pydata sparse: COO, GCXS, ... (2-D)
        block = block.to_scipy_sparse()
    return scipy.sparse.csr_matrix(block)


def as_csr_blocks(X, *, block_bytes: int = SPARSE_BLOCK_BYTES) -> da.Array:
    """``X`` (sparse, in memory or as dask blocks) as a dask array of CSR row blocks.

    In memory, the matrix is converted to CSR once and cut into row blocks holding
    about ``block_bytes`` (default :data:`SPARSE_BLOCK_BYTES`) of values and indices
    each (from the average row's count of stored entries); a dask array keeps its
    chunks and has each block converted where it lives. Nothing is densified.
    """
    import scipy.sparse

    if isinstance(X, da.Array):
        meta = scipy.sparse.csr_matrix((0, 0), dtype=X.dtype)
        if isinstance(X._meta, scipy.sparse.csr_matrix):
            return X
        return X.map_blocks(_to_csr, dtype=X.dtype, meta=meta)
    csr = _to_csr(X)
    n, d = csr.shape
    if csr.ndim != 2:
        raise ValueError(f"a sparse matrix must be 2-D; got shape {csr.shape}")
    per_row = (csr.nnz / max(n, 1)) * (
        csr.dtype.itemsize + csr.indices.dtype.itemsize
    ) + 8
    rows = max(1, min(n, int(block_bytes // max(per_row, 1))))
    return da.from_array(
        csr,
        chunks=(rows, d),
        asarray=False,
        meta=scipy.sparse.csr_matrix((0, 0), dtype=csr.dtype),
    )


def _refuse_sparse(X, what: str) -> None:
    """Raise ``TypeError`` naming sparse input (the array, or a dask array's block
    type)."""
    blocks = isinstance(X, da.Array)
    kind = _sparse_kind(_meta_or_self(X))
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
    if not n:
        return X.shape
    d = int(np.prod(X.shape[1:]))  # 1 for a vector
    rows = max(1, (64 * 2**20) // max(1, d * np.dtype(X.dtype).itemsize))
    return (min(n, rows),) + tuple(X.shape[1:])


#: the string form of ``n_components`` choosing k by Minka's evidence (PCA, PPCA)
N_COMPONENTS_MLE = "mle"


def check_n_components(
    n_components,
    n_samples: int | None = None,
    n_features: int | None = None,
    *,
    what="n_components",
    fraction: bool = False,
):
    """Check ``n_components``; ``None`` means ``min(n_samples, n_features)``.

    Parameters
    ----------
    n_components : int, None, float or str
        An integer in ``[1, min(n_samples, n_features)]`` or ``None``; with ``fraction``
        also a float in (0, 1) (the smallest k whose explained variance ratio reaches
        it) or ``"mle"`` (Minka's choice, which needs ``n_samples >= n_features``).
        Those two are chosen from the spectrum after the fit
        (:func:`choose_n_components`).
    n_samples, n_features : int or None
        The data's shape; both ``None`` checks the form only (a config file, before any
        data).
    fraction : bool
        Whether the estimator accepts the float and ``"mle"`` forms.

    Returns
    -------
    int, float or str
        The number of components, or (``fraction``) the float or ``"mle"`` as given.
    """
    if fraction:
        if isinstance(n_components, str):
            if n_components != N_COMPONENTS_MLE:
                raise ValueError(
                    f"{what}={n_components!r} is not understood: the only string "
                    f"accepted is {N_COMPONENTS_MLE!r} (Minka's choice of k)"
                )
            if (
                n_samples is not None
                and n_features is not None
                and n_samples < n_features
            ):
                raise ValueError(
                    f"{what}='mle' needs n_samples >= n_features; got {n_samples} "
                    f"samples and {n_features} features"
                )
            return n_components
        if isinstance(n_components, numbers.Real) and not isinstance(
            n_components, (bool, numbers.Integral)
        ):
            if not 0.0 < n_components < 1.0:  # not a fraction, and not a count either
                raise TypeError(
                    f"{what} must be an integer, a float in (0, 1), 'mle' or "
                    f"None; got {n_components!r}: a float is the fraction of "
                    "the variance to explain and must lie strictly between 0 "
                    "and 1 (give an integer for a number of components)"
                )
            return float(n_components)
    if isinstance(n_components, bool) or not (
        n_components is None or isinstance(n_components, numbers.Integral)
    ):
        forms = "an integer or None"
        if fraction:
            forms = "an integer, a float in (0, 1), 'mle' or None"
        raise TypeError(f"{what} must be {forms}; got {n_components!r}")
    if n_samples is None or n_features is None:
        if n_components is None:
            return None
        if n_components < 1:
            raise ValueError(
                f"{what}={n_components} is out of range: it must be at least 1"
            )
        return int(n_components)
    upper = min(n_samples, n_features)
    if n_components is None:
        return upper
    if not 1 <= n_components <= upper:
        raise ValueError(
            f"{what}={n_components} is out of range: it must be between 1 and "
            f"min(n_samples, n_features) = min({n_samples}, {n_features}) = {upper}"
        )
    return int(n_components)


def choose_n_components(
    n_components,
    explained_variance: np.ndarray,
    explained_variance_ratio: np.ndarray,
    n_samples: int,
) -> int:
    """k for a float or ``"mle"`` ``n_components``, from the full spectrum of one fit.

    A float ``f`` gives the smallest k with ``Σ_{i≤k} ratio_i ≥ f`` counted as
    scikit-learn's PCA counts it (``searchsorted(cumsum, f, side="right") + 1``, so
    k's cumulative ratio exceeds ``f``), at most the number of eigenvalues. ``"mle"``
    gives the k in ``[1, d − 1]`` maximising Minka's Laplace approximation of the
    evidence (:func:`minka_dimension`). An integer is returned as it is.
    """
    if n_components == N_COMPONENTS_MLE:
        return minka_dimension(explained_variance, n_samples)
    if isinstance(n_components, float):
        cumulative = np.cumsum(np.asarray(explained_variance_ratio, dtype=np.float64))
        k = int(np.searchsorted(cumulative, n_components, side="right")) + 1
        return min(k, len(cumulative))
    return int(n_components)


def minka_dimension(spectrum: np.ndarray, n_samples: int) -> int:
    """Minka's (2000) choice of the latent dimension from a covariance spectrum.

    ``spectrum`` holds all d eigenvalues of the sample covariance, descending (d ≤ n).
    This is scikit-learn's private ``sklearn.decomposition._pca._infer_dimension``,
    reached from this one place so a change of that private name fails here, with this
    message, and in ``tests/test_n_components.py``. Its loops are pure Python, O(d³) in
    all: seconds for a few hundred features, long for thousands.

    References
    ----------
    Minka, T. P. (2000). Automatic choice of dimensionality for PCA. NIPS 13,
    598–604.
    """
    try:
        from sklearn.decomposition._pca import _infer_dimension
    except ImportError as err:  # a private name: it may move in a future scikit-learn
        raise ImportError(
            "n_components='mle' uses scikit-learn's sklearn.decomposition._pca."
            "_infer_dimension, which this scikit-learn version does not have; give an "
            "integer or a float n_components"
        ) from err
    spectrum = np.asarray(spectrum, dtype=np.float64)
    if spectrum.shape[0] < 2:
        raise ValueError("n_components='mle' needs at least 2 features")
    return int(_infer_dimension(spectrum, n_samples))


def check_n_features(
    X, n_features_in: int, *, what: str = "X", estimator: str = "the estimator"
) -> None:
    """Raise ``ValueError`` when ``X`` does not have the number of features seen in fit.

    The message is scikit-learn's (``validate_data`` says the same of NumPy input).
    """
    d = X.shape[1]
    if d != n_features_in:
        raise ValueError(
            f"{what} has {d} features, but {estimator} is "
            f"expecting {n_features_in} features as input"
        )


def check_scalar(
    value,
    name: str,
    *,
    kind=numbers.Real,
    low=None,
    high=None,
    low_inclusive=True,
    high_inclusive=True,
    allow_none=False,
):
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
        from ._schema import did_you_mean

        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(
            f"{name}={value!r} is not one of the allowed values: {allowed}"
            f"{did_you_mean(value, choices)}"
        )
    return value


def check_random_state_seed(random_state) -> np.random.SeedSequence:
    """A ``SeedSequence`` from ``random_state``.

    Accepted, as in scikit-learn: None (a draw from numpy's global RandomState, as
    ``sklearn.utils.check_random_state(None)`` gives it), a non-negative int (the
    sequence's seed itself, so a seed's results do not depend on numpy's legacy
    generator), a ``np.random.RandomState`` instance (one draw from it, through
    scikit-learn's ``check_random_state``); also a ``np.random.Generator`` or a
    ``np.random.SeedSequence``. Blocks draw from children of this sequence indexed by
    block position, so random numbers do not depend on the number of workers or the
    order tasks run in.

    Raises
    ------
    ValueError
        A negative int.
    TypeError
        Anything else (a float, a string, ...).
    """
    accepted = (
        "random_state must be None, a non-negative int, a numpy RandomState or "
        "Generator, or a numpy SeedSequence"
    )
    if random_state is None or isinstance(random_state, np.random.RandomState):
        # scikit-learn's reading: None is numpy's global RandomState (np.random.seed
        # fixes it)
        from sklearn.utils import check_random_state

        return np.random.SeedSequence(
            int(check_random_state(random_state).randint(2**31))
        )
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(
        random_state, bool
    ):
        if random_state < 0:
            raise ValueError(f"{accepted}; got the negative int {random_state}")
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    raise TypeError(f"{accepted}; got {random_state!r} ({type(random_state).__name__})")


def check_random_state_form(random_state) -> None:
    """Check the form of ``random_state`` (as :func:`check_random_state_seed`) without
    drawing.

    For a parameter check at the start of ``fit``: a Generator or RandomState passed
    by the user is not advanced, so the draw made later, where the seed is used, is
    the one it would be without the check.
    """
    if not isinstance(random_state, (np.random.Generator, np.random.RandomState)):
        check_random_state_seed(random_state)
