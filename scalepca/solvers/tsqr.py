"""``svd_solver="tsqr"``: the column moments in a first pass, then the centred
(standardised) rows QR-factored where they live, the R factors reduced as a tree and
the SVD of the last d × d R on the client
(:func:`~scalepca.linalg.decomp.tsqr_svd_centered`). The singular values keep full
working precision (the covariance route squares them). Two passes; dense blocks.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from ..linalg import passes
from ..linalg.decomp import tsqr_svd_centered
from ..linalg.moments import column_moments_graph
from ..linalg.scaling import ColumnScaling
from ..linalg.sparse import scale_columns
from .wide import Columns, SpectralFit, Start, WideParams

__all__ = ["finish", "start"]


def start(X, params: WideParams) -> Start:
    """The first pass: count, mean and sum of squares of every feature."""
    (mom,) = passes.compute(column_moments_graph(X), name="moments")
    return Start(mom, strips=False)


def _mapped(X, scaling: ColumnScaling):
    """``(x − centre) / scale`` column by column, lazily, in the data's float type (a
    missing entry 0 with ``scaling.fill``)."""
    dtype = np.result_type(X.dtype, np.float32)
    Z = (X.astype(dtype) - scaling.centre.astype(dtype)) / scaling.scale.astype(dtype)
    return da.where(da.isnan(Z), dtype.type(0), Z) if scaling.fill else Z


def finish(X, first: Start, columns: Columns, params: WideParams) -> SpectralFit:
    """The second pass: TSQR of the kept features, centred (``params.centre``) and
    scaled block by block; every ``min(n, d_fit)`` singular pair."""
    if not columns.keep.all():
        X = X[:, columns.keep]
    mean = columns.moments["mean"]
    if columns.scaling is not None:  # the map of each column, missing entries filled
        X = _mapped(X, columns.scaling)
        mean = np.zeros(columns.d_fit)
    elif columns.scale is not None:
        X = scale_columns(X, columns.scale)
        mean = mean / columns.scale
    if not params.centre:
        mean = np.zeros_like(mean)
    with passes.one_pass("tsqr"):
        s, Vt = tsqr_svd_centered(X.rechunk({1: -1}), mean)
    return SpectralFit(s**2, Vt.T, 2)
