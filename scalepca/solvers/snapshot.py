"""``svd_solver="snapshot"``: the n × n Gram of the centred (standardised) samples in
one pass over column strips (:mod:`scalepca.linalg.snapshot`), its eigendecomposition
on the client, one more pass for the components ``Xcᵀ U Σ⁻¹``. Exact, in two passes.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg as sla

from ..linalg.snapshot import snapshot_gram
from .wide import Columns, SpectralFit, Start, WideParams, strip_axes

__all__ = ["finish", "start"]


def start(X, params: WideParams) -> Start:
    """The first pass: the strips' column statistics and the n × n sample Gram, each
    strip centred and standardised in its task (``params.standardize``)."""
    out = snapshot_gram(X, centre=params.centre, standardize=params.standardize)
    return Start(out, strips=True, carry=out.pop("G"))


def finish(X, first: Start, columns: Columns, params: WideParams) -> SpectralFit:
    """``eigh`` of the sample Gram, then one pass for the axes of the leading ``k``
    (None: of every eigenvalue; all of them are returned)."""
    theta, U = sla.eigh(first.carry, driver="evr", check_finite=False)
    theta, U = np.maximum(theta[::-1], 0.0), U[:, ::-1]
    n = first.carry.shape[0]
    kk = min(n, columns.d_fit) if params.k is None else params.k
    axes = strip_axes(X, U[:, :kk], theta[:kk], first.stats, columns, params.centre)
    return SpectralFit(theta, axes, 2)
