"""``svd_solver="tsqr"``: the column moments in a first pass, then the centred
(standardised) rows QR-factored where they live, the R factors reduced as a tree and
the SVD of the last d × d R on the client
(:func:`~scalepca.linalg.decomp.tsqr_svd_centered`). The singular values keep full
working precision (the covariance route squares them). Two passes; dense blocks.
"""

from __future__ import annotations

import numpy as np

from ..linalg import passes
from ..linalg.decomp import tsqr_svd_centered
from ..linalg.moments import column_moments_graph
from ..linalg.sparse import scale_columns
from ..preprocessing._genotype import standardized
from .wide import Columns, SpectralFit, Start, WideParams

__all__ = ["finish", "start"]


def start(X, params: WideParams) -> Start:
    """The first pass: count, mean and sum of squares of every feature."""
    (mom,) = passes.compute(column_moments_graph(X), name="moments")
    return Start(mom, strips=False)


def finish(X, first: Start, columns: Columns, params: WideParams) -> SpectralFit:
    """The second pass: TSQR of the kept features, centred (``params.centre``) and
    scaled block by block; every ``min(n, d_fit)`` singular pair."""
    if columns.keep is not None:
        X = X[:, columns.keep]
    mean = columns.moments["mean"]
    if columns.scaling is not None:  # the map of each column, missing entries filled
        X = standardized(X, columns.scaling.centre, columns.scaling.scale)
        mean = np.zeros(columns.d_fit)
    elif columns.scale is not None:
        X = scale_columns(X, columns.scale)
        mean = mean / columns.scale
    if not params.centre:
        mean = np.zeros_like(mean)
    with passes.one_pass("tsqr"):
        s, Vt = tsqr_svd_centered(X.rechunk({1: -1}), mean)
    return SpectralFit(s**2, Vt.T, 2)
