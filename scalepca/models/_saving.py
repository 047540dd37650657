"""Writing a model store: a fitted estimator saved to a zarr group (``est.save``).

A fitted model is a zarr group: the estimator class, its parameters, the scalepca
version and scalar fitted values are attributes; NumPy fitted arrays are zarr arrays;
lazy (dask) fitted arrays are written chunk by chunk from the workers. No pickle. The
group is written atomically (:func:`scalepca.io._store.atomic_group`) and carries
``complete: true`` written last; a group without it is refused by :func:`scalepca.load`
(:mod:`scalepca.persistence.loading`).

Saving needs nothing of an estimator but its parameters and its state
(``_state_to_save``): it is the estimators' own step, beside them. Reading a store
back needs the registry of every estimator class, so it stands a floor above them, in
:mod:`scalepca.persistence`.
"""

from __future__ import annotations

import logging

import dask.array as da
import numpy as np
import zarr

from .._json import jsonable
from .._version import __version__
from ..io._fs import MODEL
from ..io._store import atomic_group, regular_chunks

logger = logging.getLogger(__name__)

FORMAT = MODEL
FORMAT_VERSION = 1


def save_estimator(
    est, store, *, storage_options=None, overwrite=False, flag="overwrite=True"
) -> None:
    """Write a fitted estimator to a zarr group (see module docstring).

    A model store already at ``store`` is replaced only with ``overwrite``; anything
    else there (a folder of other files, another kind of store) never is:
    ``FileExistsError``.
    """
    if not est.__sklearn_is_fitted__():
        raise ValueError(f"{type(est).__name__} is not fitted; call fit before save")
    params = {}
    for name, value in est.get_params(deep=False).items():
        try:
            params[name] = jsonable(value)
        except TypeError as err:
            raise TypeError(
                f"parameter {name}={value!r} of "
                f"{type(est).__name__} cannot be saved: {err}"
            ) from None
    arrays, lazy, scalars = {}, {}, {}
    for name, value in est._state_to_save().items():
        if isinstance(value, da.Array):
            lazy[name] = value
        elif isinstance(value, np.ndarray) and value.dtype == object:
            # feature names (scikit-learn keeps them as an object array): saved as JSON
            # strings, never as an object array (zarr would need a codec that can run
            # code)
            scalars[name] = [str(v) for v in value.tolist()]
        elif isinstance(value, np.ndarray) and value.ndim > 0:
            arrays[name] = value
        else:
            try:
                scalars[name] = jsonable(value)
            except TypeError:
                logger.warning(
                    "not saving attribute %s (%s)", name, type(value).__name__
                )

    def write(group: zarr.Group):
        group.attrs.update(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "scalepca_version": __version__,
                "class": f"{type(est).__module__}:{type(est).__qualname__}",
                "params": params,
                "scalars": scalars,
                "arrays": sorted(arrays),
                "lazy_arrays": sorted(lazy),
                # memory order changes BLAS summation order: keep it, so a loaded
                # model's transform is bitwise the fitted one's
                "fortran_order": sorted(
                    n
                    for n, v in arrays.items()
                    if v.ndim > 1 and v.flags.f_contiguous and not v.flags.c_contiguous
                ),
            }
        )
        for name, value in arrays.items():
            group.create_array(name, data=np.ascontiguousarray(value))
        for name, value in lazy.items():
            regular_chunks(value).to_zarr(
                group.store, component=_component(group, name), compute=True
            )

    atomic_group(
        store,
        storage_options=storage_options,
        write=write,
        kind=MODEL,
        overwrite=overwrite,
        flag=flag,
    )


class SavedModel:
    """``save``, the one way every scalepca estimator and analysis tool writes its model
    store; :func:`scalepca.load` reads it back. An estimator gives its parameters
    (``get_params``), ``__sklearn_is_fitted__``, the state to keep (``_state_to_save``:
    fitted ``*_`` attributes and private ``_names``) and ``_restore_state``."""

    def save(self, store, *, storage_options=None, overwrite: bool = False) -> None:
        """Write the fitted model to a zarr group at ``store``, atomically.

        Load it back with :func:`scalepca.load`.

        Parameters
        ----------
        store : str or path
            A local path or fsspec URL (``s3://bucket/model.zarr``).
        storage_options : dict, optional
            Passed to fsspec for URLs.
        overwrite : bool, default False
            Replace a complete model store already at ``store``. Without it such a
            store is kept and ``FileExistsError`` raised. Whatever ``overwrite`` says,
            nothing at ``store`` that is not a scalepca model store (a folder of other
            files, a data or output store) is ever replaced; a model store whose save
            was interrupted is.
        """
        save_estimator(
            self, store, storage_options=storage_options, overwrite=overwrite
        )

    def _state_to_save(self) -> dict:
        """The fitted attributes (public names ending in ``_``)."""
        return {
            k: v
            for k, v in vars(self).items()
            if k.endswith("_") and not k.startswith("_")
        }

    def _restore_state(self, state: dict) -> None:
        """The state :func:`scalepca.load` read, set on the estimator it built."""
        for k, v in state.items():
            setattr(self, k, v)


def _component(group: zarr.Group, name: str) -> str:
    return f"{group.path}/{name}".lstrip("/")
