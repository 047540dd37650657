"""Tools over fitted models and the estimators of EOF analysis.

EOF analysis (:mod:`~scalepca.analysis.eof`), eofs' scaled views, reconstructions and
projections (:mod:`~scalepca.analysis.eof_fields`), rotated EOFs
(:mod:`~scalepca.analysis.rotation`), maximum covariance analysis of two fields
(:mod:`~scalepca.analysis.mca`), Hilbert (complex) EOF analysis of propagating patterns
(:mod:`~scalepca.analysis.hilbert_eof`), EOFs with one-pass bootstrap intervals
(:mod:`~scalepca.analysis.bootstrap`) and figures (:mod:`~scalepca.analysis.plot`, needs
matplotlib).

The public names are listed in ``__all__`` and imported on first use, as in
:mod:`scalepca`: ``import scalepca.analysis`` loads none of their dependencies.
"""

from __future__ import annotations

import importlib
import typing

#: public name → the module that defines it
_PUBLIC = {
    "BootstrapEOF": "bootstrap",
    "HilbertEOF": "hilbert_eof",
    "MCA": "mca",
    "NorthTest": "eof",
    "Rotator": "rotation",
    "coslat_weights": "eof",
    "eofs": "eof_fields",
    "eofs_as_correlation": "eof",
    "eofs_as_covariance": "eof",
    "find_lat_lon": "eof",
    "north_test": "eof",
    "pcs": "eof_fields",
    "project_field": "eof_fields",
    "reconstructed_field": "eof_fields",
}
_SUBMODULES = (
    "bootstrap",
    "eof",
    "eof_fields",
    "hilbert_eof",
    "mca",
    "plot",
    "rotation",
    "singlecell",
)

__all__ = [
    "BootstrapEOF",
    "HilbertEOF",
    "MCA",
    "NorthTest",
    "Rotator",
    "coslat_weights",
    "eofs",
    "eofs_as_correlation",
    "eofs_as_covariance",
    "find_lat_lon",
    "north_test",
    "pcs",
    "project_field",
    "reconstructed_field",
]

if typing.TYPE_CHECKING:  # static tools see the eager imports
    from .bootstrap import BootstrapEOF
    from .eof import (
        NorthTest,
        coslat_weights,
        eofs_as_correlation,
        eofs_as_covariance,
        find_lat_lon,
        north_test,
    )
    from .eof_fields import eofs, pcs, project_field, reconstructed_field
    from .hilbert_eof import HilbertEOF
    from .mca import MCA
    from .rotation import Rotator


def __getattr__(name: str):
    if name in _PUBLIC:
        module = importlib.import_module(f"{__name__}.{_PUBLIC[name]}")
        value = getattr(module, name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC, *_SUBMODULES})
