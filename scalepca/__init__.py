"""scalepca: PCA and its variants on data larger than memory, on a Dask cluster."""

__version__ = "0.1.0"

from .cluster import connect
from .io import load, open_matrix
from .models import PCA, PPCA, KernelPCA, RobustPCA, SparsePCA

__all__ = [
    "KernelPCA", "PCA", "PPCA", "RobustPCA", "SparsePCA", "__version__", "connect", "load",
    "open_matrix",
]
