"""scalepca: PCA and its variants on data larger than memory, on a Dask cluster.

The public names are imported on first use (PEP 562 module ``__getattr__``): ``import
scalepca`` stays fast, and dask, xarray, scikit-learn and distributed load only when an
estimator, :func:`open_matrix` or :func:`connect` is first touched.
"""

from __future__ import annotations

import importlib
import typing

from ._version import __version__

#: public name → the module that defines it
_PUBLIC = {
    "BootstrapEOF": "scalepca.analysis.bootstrap",
    "ExtendedEOF": "scalepca.models.extended_eof",
    "HilbertEOF": "scalepca.analysis.hilbert_eof",
    "KernelPCA": "scalepca.models.kernel_pca",
    "MCA": "scalepca.analysis.mca",
    "MultivariateEOF": "scalepca.models.multivariate_eof",
    "PCA": "scalepca.models.pca",
    "PPCA": "scalepca.models.ppca",
    "RobustPCA": "scalepca.models.robust_pca",
    "SparsePCA": "scalepca.models.sparse_pca",
    "Rotator": "scalepca.analysis.rotation",
    "connect": "scalepca.app.cluster",
    "eofs_as_correlation": "scalepca.analysis.eof",
    "eofs_as_covariance": "scalepca.analysis.eof",
    "load": "scalepca.persistence.loading",
    "north_test": "scalepca.analysis.eof",
    "open_matrix": "scalepca.preprocessing",
}
_SUBMODULES = (
    "analysis",
    "app",
    "cli",
    "datasets",
    "io",
    "linalg",
    "models",
    "persistence",
    "pp",
    "preprocessing",
)

__all__ = [
    "BootstrapEOF",
    "ExtendedEOF",
    "HilbertEOF",
    "KernelPCA",
    "MCA",
    "MultivariateEOF",
    "PCA",
    "PPCA",
    "RobustPCA",
    "Rotator",
    "SparsePCA",
    "__version__",
    "connect",
    "eofs_as_correlation",
    "eofs_as_covariance",
    "load",
    "north_test",
    "open_matrix",
]

if typing.TYPE_CHECKING:  # static tools see the eager imports
    from .analysis.bootstrap import BootstrapEOF
    from .analysis.eof import eofs_as_correlation, eofs_as_covariance, north_test
    from .analysis.hilbert_eof import HilbertEOF
    from .analysis.mca import MCA
    from .analysis.rotation import Rotator
    from .app.cluster import connect
    from .models import (
        PCA,
        PPCA,
        ExtendedEOF,
        KernelPCA,
        MultivariateEOF,
        RobustPCA,
        SparsePCA,
    )
    from .persistence.loading import load
    from .preprocessing import open_matrix


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'scalepca' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC, *_SUBMODULES})
