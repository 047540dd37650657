"""``svd_solver="covariance_eigh"``: one pass for the count, mean and centred Gram of
every feature (:func:`~scalepca.linalg.moments.moments_graph`, a tree of d × d
partials), then the eigendecomposition of the d × d covariance on the client.

The moments merge by addition, so ``partial_fit`` merges those of a new batch into
the ones kept and solves again (:func:`spectrum`) without reading the old rows.
"""

from __future__ import annotations

import numpy as np

from ..linalg import passes
from ..linalg.decomp import eigh_descending, spectrum_from_moments
from ..linalg.moments import moments_graph
from .wide import Columns, SpectralFit, Start, WideParams

__all__ = ["finish", "spectrum", "start"]


def start(X, params: WideParams) -> Start:
    """The one pass: count, mean, centred Gram and NaN per feature of ``X`` (rows
    chunked, one column chunk)."""
    (mom,) = passes.compute(moments_graph(X), name="moments")
    return Start(mom, strips=False)


def finish(X, first: Start, columns: Columns, params: WideParams) -> SpectralFit:
    """The spectrum of the kept features' moments; no further pass."""
    return spectrum(columns.moments, params.k, columns.scale, centre=params.centre)


def spectrum(
    mom: dict, k: int | None, scale: np.ndarray | None = None, *, centre: bool = True
) -> SpectralFit:
    """The leading ``k`` eigenpairs (None: every one) of the Gram of the moments
    ``mom`` (``n``, ``mean``, ``m2``): centred, of the standardised data with
    ``scale``, or uncentred (``m2 + n μ μᵀ``, its eigenvectors the right singular
    vectors of the data)."""
    n = int(mom["n"])
    if not centre:
        gram = mom["m2"] + n * np.outer(mom["mean"], mom["mean"])
        values, vectors = eigh_descending(gram, k)
        return SpectralFit(np.maximum(values, 0.0), vectors, 1)
    kk = mom["mean"].shape[0] if k is None else k
    _, _, ev, components, _ = spectrum_from_moments(mom, kk, scale)
    return SpectralFit(ev * max(n - 1, 1), components.T, 1)
