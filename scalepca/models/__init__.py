"""Estimators. Each lives in its own module; shared plumbing is in ``base``."""

from .extended_eof import ExtendedEOF
from .kernel_pca import KernelPCA
from .multivariate_eof import MultivariateEOF
from .pca import PCA
from .ppca import PPCA
from .robust_pca import RobustPCA
from .sparse_pca import SparsePCA

__all__ = [
    "ExtendedEOF",
    "KernelPCA",
    "MultivariateEOF",
    "PCA",
    "PPCA",
    "RobustPCA",
    "SparsePCA",
]
