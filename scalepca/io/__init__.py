"""Input/output: open zarr/xarray/fsspec sources as matrices, write outputs atomically.

Model stores (``est.save``, :func:`scalepca.load`) are in :mod:`scalepca.models.persist`.
"""

from ._fs import open_zarr_node
from ._matrix import MatrixInput, as_matrix
from ._open import open_matrix
from ._store import write_array

__all__ = [
    "MatrixInput",
    "as_matrix",
    "open_matrix",
    "open_zarr_node",
    "write_array",
]
