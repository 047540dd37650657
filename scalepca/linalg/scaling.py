"""A per-column affine map of the data that the solvers apply where they read the
blocks.

``z = (x − centre) / scale`` column by column; with ``fill`` a missing entry (NaN) is
set to its column's centre, so it is 0 once mapped. A fit chooses the numbers (PCA's
standardisation of allele counts: centre ``2p``, scale ``√(2p(1−p))``); the kernels
below the estimators apply them without knowing what they stand for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ColumnScaling"]


@dataclass(frozen=True, eq=False)
class ColumnScaling:
    """``centre`` and ``scale`` (d floats each, scale > 0) of
    ``z = (x − centre) / scale``; ``fill``: a NaN entry is a missing value at its
    column's centre (0 once mapped)."""

    centre: np.ndarray
    scale: np.ndarray
    fill: bool = True

    def __post_init__(self):
        for name in ("centre", "scale"):
            object.__setattr__(
                self, name, np.ascontiguousarray(getattr(self, name), dtype=np.float64)
            )
        if self.centre.shape != self.scale.shape or self.centre.ndim != 1:
            raise ValueError("centre and scale must be two vectors of one length")

    def values_of_codes(self, counts: np.ndarray) -> np.ndarray:
        """``(d, len(counts))``: each column's ``z`` of the values ``counts`` (NaN: a
        missing value, 0 with ``fill``) — the table a kernel reading coded entries
        looks its values up in."""
        counts = np.asarray(counts, dtype=np.float64)
        z = (counts[None, :] - self.centre[:, None]) / self.scale[:, None]
        return np.where(np.isnan(z), 0.0, z) if self.fill else z
