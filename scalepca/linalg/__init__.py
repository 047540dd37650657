"""Pure functions on dask and NumPy arrays; no estimator state lives here."""

from .decomp import (
    eigh_descending,
    flip_signs,
    randomized_svd_centered,
    tsqr_svd_centered,
    variance_ratio,
)
from .moments import (
    block_moments,
    column_moments_graph,
    feature_scale,
    merge_moments,
    moments,
    moments_graph,
)

__all__ = [
    "block_moments",
    "column_moments_graph",
    "eigh_descending",
    "feature_scale",
    "flip_signs",
    "merge_moments",
    "moments",
    "moments_graph",
    "randomized_svd_centered",
    "tsqr_svd_centered",
    "variance_ratio",
]
