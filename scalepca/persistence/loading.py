"""Reading a model store back: :func:`load` (``scalepca.load``).

The store's layout is written by :mod:`scalepca.models._saving` (``est.save``). A
store is data, never code: the estimator it names is looked up in the registry of
scalepca's own estimators (:mod:`scalepca.persistence.registry`), and everything in
it is checked from metadata before the estimator is built.
"""

from __future__ import annotations

import inspect
import math
import os
import re
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

from ..io._fs import open_zarr_node, previous_hint
from ..io._store import _local_path
from ..models._saving import FORMAT, FORMAT_VERSION
from .registry import METHODS, declared_problems, estimator_class_named


def _interrupted_siblings(store) -> list[str]:
    local = _local_path(store)
    if local is None:
        return []
    target = Path(local)
    if not target.parent.is_dir():
        return []
    return sorted(
        str(p)
        for p in target.parent.iterdir()
        if p.name.startswith(f"{target.name}.tmp-")
        or p.name.startswith(f"{target.name}.old-")
    )


def load(store, *, storage_options=None):
    """Load an estimator written by ``save``; lazy arrays come back as dask arrays.

    A store is data, never code: its ``class`` is looked up by class name among
    scalepca's own estimators (``scalepca.persistence.registry.METHODS``), nothing named
    in it is imported, its parameters are checked against that estimator's signature and
    its fitted state against the names, dtypes and shapes such a model has — all from
    metadata, before the estimator is built or any array is read.

    Parameters
    ----------
    store : str or path
        A local path or fsspec URL of a store ``save`` (or ``scalepca run``) wrote.
    storage_options : dict, optional
        Passed to fsspec for URLs.

    Returns
    -------
    estimator : object
        The fitted estimator or analysis tool, of the class that was saved.

    Raises
    ------
    FileNotFoundError
        No store at ``store``.
    ValueError
        The store is not a scalepca model, it is incomplete (an interrupted write),
        or its contents are not those of a scalepca model (another class, unknown or
        mistyped parameters, unexpected state names, arrays of a non-numeric dtype or
        of a shape the model cannot have).

    Examples
    --------
    >>> import tempfile, numpy as np, scalepca
    >>> X = np.random.default_rng(0).standard_normal((100, 5))
    >>> pca = scalepca.PCA(2).fit(X)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     pca.save(f"{tmp}/model.zarr")                # a zarr group, no pickle
    ...     loaded = scalepca.load(f"{tmp}/model.zarr")
    >>> type(loaded).__name__, bool(np.allclose(loaded.transform(X), pca.transform(X)))
    ('PCA', True)
    """
    try:
        group = open_zarr_node(store, storage_options=storage_options)
    except FileNotFoundError:
        left = _interrupted_siblings(store)
        if left:
            raise FileNotFoundError(
                f"no model store at {os.fspath(store)!r}; an "
                f"interrupted save left {', '.join(map(repr, left))} (a "
                "complete previous model, if any, is the '.old-*' one)"
            ) from None
        raise
    attrs = dict(group.attrs) if isinstance(group, zarr.Group) else {}
    if attrs.get("format") != FORMAT:
        raise ValueError(f"{os.fspath(store)!r} is not a scalepca model store")
    if not attrs.get("complete", False):
        raise ValueError(
            f"{os.fspath(store)!r} is an incomplete model store (its write was "
            f"interrupted); fit and save again{previous_hint(store)}"
        )
    where = "the store"  # a zarr store object
    if isinstance(store, (str, os.PathLike)):
        where = repr(os.fspath(store))
    if attrs.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{where} is a scalepca model store of format version "
            f"{attrs.get('format_version')!r}; this scalepca reads version "
            f"{FORMAT_VERSION} only: fit and save the model again"
        )
    cls, params, scalars, arrays, lazy, fortran = _checked_contents(group, attrs, where)
    est = cls(**params)
    state = dict(scalars)
    for name in arrays:
        state[name] = group[name][...]
        if name in fortran:
            state[name] = np.asfortranarray(state[name])
    for name in lazy:
        state[name] = da.from_zarr(group[name])
    try:
        est._restore_state(state)
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(
            f"{where} is not a loadable scalepca model: its saved state does not make "
            f"a {cls.__name__} ({type(err).__name__}: {err})"
        ) from None
    return est


#: a saved state name: a plain identifier (fitted attributes end in "_"; private state
#: starts with one "_"), never a dunder name
_STATE_NAME = re.compile(r"(?:[A-Za-z][A-Za-z0-9_]*_|_[A-Za-z][A-Za-z0-9_]*)\Z")


#: scalar state giving the sizes a fitted array may have along any axis (MCA's two
#: fields: ``n_features_x_``, ``n_features_y_``)
_SIZE_SCALARS = (
    "n_samples_",
    "n_features_in_",
    "n_components_",
    "n_kernel_features_",
    "n_genes_in_",
    "n_features_x_",
    "n_features_y_",
)


def _refuse(where: str, problem: str):
    raise ValueError(f"{where} is not a loadable scalepca model: {problem}")


def _checked_contents(group: zarr.Group, attrs: dict, where: str):
    """Check a model store from its metadata; return what :func:`load` builds the model
    from.

    Returns ``(cls, params, scalars, arrays, lazy, fortran)``; raises ``ValueError``
    naming the first problem. Only attributes and array metadata are read.
    """
    cls = _checked_class(attrs, where)
    params = _checked_params(cls, attrs, where)
    scalars, arrays, lazy, fortran = _checked_state_names(cls, attrs, where)
    # parameters that bound an axis too (BootstrapEOF's replicates)
    bounds = {name: params.get(name) for name in getattr(cls, "_size_parameters", ())}
    sizes = _checked_sizes({**scalars, **bounds}, where, tuple(bounds))
    _check_array_shapes(group, arrays, lazy, sizes, where)
    return cls, params, scalars, arrays, lazy, fortran


def _checked_class(attrs: dict, where: str):
    """The estimator class a store names: one of the registry's, never imported by
    name."""
    spec = attrs.get("class")
    registered = ", ".join(v.rsplit(":", 1)[1] for v in METHODS.values())
    module, _, name = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    cls = None
    if module == "scalepca" or module.startswith("scalepca."):
        cls = estimator_class_named(name)
    if cls is None:
        _refuse(
            where,
            f"its class {spec!r} is not a scalepca estimator (a model store may only "
            f"name one of {registered}; classes named in a store are never imported)",
        )
    return cls


def _checked_params(cls, attrs: dict, where: str) -> dict:
    """A store's parameters checked against the estimator's ``_parameters`` table."""
    params = attrs.get("params")
    if not isinstance(params, dict):
        _refuse(where, f"'params' must be a mapping; got {type(params).__name__}")
    checked, problems = declared_problems(cls, dict(params), "params")
    if problems:
        _refuse(where, f"{problems[0]} (parameters of {cls.__name__})")
    return {**params, **checked}


def _checked_state_names(cls, attrs: dict, where: str):
    """``(scalars, arrays, lazy, fortran)``: the saved state's names, each saved once
    and each a name fitted state of ``cls`` can have."""
    scalars = attrs.get("scalars")
    if not isinstance(scalars, dict):
        _refuse(where, f"'scalars' must be a mapping; got {type(scalars).__name__}")
    lists = {}
    for key in ("arrays", "lazy_arrays", "fortran_order"):
        value = attrs.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            _refuse(where, f"{key!r} must be a list of names; got {value!r}")
        lists[key] = value
    arrays, lazy, fortran = (
        lists["arrays"],
        lists["lazy_arrays"],
        set(lists["fortran_order"]),
    )
    names = [*scalars, *arrays, *lazy]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        _refuse(where, f"state {', '.join(map(repr, twice))} is saved more than once")
    init_params = set(inspect.signature(cls.__init__).parameters)
    bad = [
        n
        for n in names
        if not isinstance(n, str)
        or not _STATE_NAME.match(n)
        or hasattr(cls, n)
        or n in init_params
    ]
    if bad:
        _refuse(
            where,
            f"state name(s) {', '.join(map(repr, bad))} cannot be fitted state of "
            f"{cls.__name__} (saved names are fitted attributes ending in '_' or "
            "private '_names' that are not methods, properties or parameters)",
        )
    if not fortran <= set(arrays):
        _refuse(
            where,
            f"'fortran_order' names {sorted(fortran - set(arrays))}, "
            "which are not saved arrays",
        )
    return scalars, arrays, lazy, fortran


def _checked_sizes(scalars: dict, where: str, extra: tuple = ()) -> dict:
    """The model's size scalars (``n_features_in_`` required, or MCA's
    ``n_features_x_``) and the sizes ``extra`` names, each a positive integer."""
    sizes = {}
    required = "n_features_x_" if "n_features_x_" in scalars else "n_features_in_"
    for key in (*_SIZE_SCALARS, *extra):
        value = scalars.get(key)
        if value is None and key != required:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            _refuse(where, f"{key} must be a positive integer; got {value!r}")
        sizes[key] = value
    return sizes


def _check_array_shapes(
    group: zarr.Group, arrays, lazy, sizes: dict, where: str
) -> None:
    """Every saved array is a numeric zarr array no larger than the model's sizes allow;
    lazy arrays are (n_samples_, n_features_in_); ``components_`` and ``mean_`` fit the
    feature space."""
    largest = max(sizes.values())
    d = sizes.get("n_features_in_")
    for name in [*arrays, *lazy]:
        node = group.get(name)
        if not isinstance(node, zarr.Array):
            _refuse(where, f"the saved array {name!r} is missing or not an array")
        dtype = node.dtype
        dtype = getattr(dtype, "to_native_dtype", lambda dt=dtype: dt)()  # zarr ZDType
        if not isinstance(dtype, np.dtype) or dtype.kind not in "fiub":
            _refuse(
                where, f"array {name!r} has dtype {dtype}; fitted arrays are numbers"
            )
        shape = tuple(node.shape)
        if name in lazy:
            n = sizes.get("n_samples_")
            if len(shape) != 2 or shape[1] != d or (n is not None and shape[0] != n):
                _refuse(
                    where,
                    f"lazy array {name!r} has shape {shape}; expected "
                    f"(n_samples_, n_features_in_) = ({n}, {d})",
                )
        elif any(s > largest for s in shape) or math.prod(shape) > largest**2:
            _refuse(
                where,
                f"array {name!r} has shape {shape}; a fitted array has no axis longer "
                f"than the model's largest size ({largest}, from "
                f"{', '.join(f'{k}={v}' for k, v in sizes.items())}) and at most "
                f"{largest}² values",
            )
    shapes = {name: tuple(group[name].shape) for name in arrays}
    width = sizes.get(
        "n_kernel_features_", d
    )  # kernel PCA: components live in feature space
    comp, mean, k = (
        shapes.get("components_"),
        shapes.get("mean_"),
        sizes.get("n_components_"),
    )
    if comp is not None and (
        len(comp) != 2 or comp[1] != width or (k and comp[0] != k)
    ):
        _refuse(
            where,
            f"components_ has shape {comp}; expected (n_components_, "
            f"{'n_kernel_features_' if width != d else 'n_features_in_'}) = "
            f"({k}, {width})",
        )
    if mean is not None and mean != (width,):
        _refuse(where, f"mean_ has shape {mean}; expected ({width},)")
