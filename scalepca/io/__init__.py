"""Input/output: open zarr/xarray/fsspec sources as matrices, write outputs and model stores."""

from ._matrix import MatrixInput, as_matrix
from ._open import open_matrix, open_zarr_node
from ._store import load, save_estimator, write_array

__all__ = [
    "MatrixInput",
    "as_matrix",
    "load",
    "open_matrix",
    "open_zarr_node",
    "save_estimator",
    "write_array",
]
