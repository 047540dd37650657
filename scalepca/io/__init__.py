"""Input/output: read zarr/NetCDF/AnnData/fsspec sources, write outputs atomically.

Opening a source as the matrix an estimator fits is :func:`scalepca.open_matrix`
(``scalepca.preprocessing``); model stores (``est.save``, :func:`scalepca.load`) are in
``scalepca.persistence``.
"""

from ._fs import open_zarr_node
from ._store import write_array

__all__ = [
    "open_zarr_node",
    "write_array",
]
