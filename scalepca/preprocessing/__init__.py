"""Preprocessing: what makes the (sample × feature) matrix an estimator fits out of
data in their own layout and units — :func:`open_matrix`, the recorded steps a model
repeats on new data (``_steps``: variable, stacked dims, column weights), latitude
weights, feature names — and :func:`as_matrix`, the one door every estimator's input
passes through."""

from ._matrix import MatrixInput, as_matrix
from ._open import open_matrix

__all__ = ["MatrixInput", "as_matrix", "open_matrix"]
