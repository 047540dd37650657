"""What the wide solvers of PCA and PPCA share: their parameters, the estimator's
reading of their first pass, their result, and the operator they multiply.

A wide solver (:mod:`.randomized`, :mod:`.sketch`, :mod:`.snapshot`) reads the
input's 2-D blocks as they are (no d × d matrix anywhere) in two steps, each a
function of the data and of values, never of the estimator:

* ``start(X, params)`` makes the first pass: the column statistics of every feature
  (:attr:`Start.stats`) and what the solver's later steps build on;
* the estimator reads those statistics — the features it leaves out (all NaN; for
  allele counts, monomorphic or uncalled), the moments it reports, the standardising
  scales, the map applied inside the blocks — and hands them down as
  :class:`Columns`;
* ``finish(X, start, columns, params)`` makes the other passes and returns a
  :class:`SpectralFit`.

Standardising (``scale``, per-feature standard deviations known only after the first
pass) is applied on the client to the Krylov and sketch products: with
``D = diag(scale)`` the standardised operator is ``D⁻¹ A D⁻¹``, and the first pass's
product ``A Ω`` is that operator applied to ``D Ω``, which becomes the start block.
A :class:`~scalepca.linalg.scaling.ColumnScaling` in :attr:`Columns.scaling` (allele
counts: centre ``2p``, scale ``√(2p(1−p))``, a missing call at the centre) is the same
per-column affine map with the scale applied on the client (once: the blocks are never
divided) and the centre and the missing entries inside each block's task, dense or CSR
alike; a .bed read by ``open_matrix`` is then multiplied from its packed calls after
the first pass (:mod:`scalepca.linalg.packed`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import check_random_state_seed
from ..io._bed import packed_blocks
from ..linalg.krylov import gram_times
from ..linalg.packed import HAVE_KERNEL, PackedRows
from ..linalg.scaling import ColumnScaling
from ..linalg.snapshot import snapshot_components

__all__ = ["Columns", "SpectralFit", "Start", "WideParams", "krylov_tol"]

#: the block Krylov solvers' stopping tolerance when the estimator gives none: 0,
#: every product
DEFAULT_TOL = 0.0


def krylov_tol(tol: float | None) -> float:
    """The stopping tolerance of the block Krylov solvers: ``tol`` as the estimator
    gave it, :data:`DEFAULT_TOL` for None (the one place the default is chosen)."""
    return DEFAULT_TOL if tol is None else float(tol)


@dataclasses.dataclass(frozen=True)
class WideParams:
    """A solver's parameters, as the estimator checked them.

    ``k``: the eigenpairs wanted (None: every one, the snapshot method's full
    spectrum); ``n_oversamples``: the Krylov block (and the sketch's probes) holds
    ``k + n_oversamples`` columns; ``n_power_iter``: block Krylov makes at most
    ``n_power_iter + 2`` products; ``tol``: it stops at the first product after which
    every residual is at most ``tol`` times its value (0: every product; None: the
    solvers' default, :func:`krylov_tol`);
    ``random_state``: the seed of the random draws (as the estimator's); ``centre``:
    the centred Gram (False: the uncentred one); ``standardize``: what column strips
    apply inside their tasks (``standardize`` of
    :func:`~scalepca.linalg.snapshot.snapshot_gram`)."""

    k: int | None
    n_oversamples: int = 10
    n_power_iter: int = 4
    tol: float | None = None
    random_state: Any = None
    centre: bool = True
    standardize: Any = False

    def rng(self) -> np.random.Generator:
        """A generator from ``random_state`` (for a seed, at the start of its stream:
        the same draws each call)."""
        return np.random.default_rng(check_random_state_seed(self.random_state))


@dataclasses.dataclass
class Start:
    """A solver's first pass: ``stats``, the column statistics of every feature
    (``n``, ``mean``, ``ss``, ``bad``, ``nan_features``; with ``strips``, the
    ``scale`` and ``centre`` the strips standardised with in their tasks); ``strips``:
    the pass read column strips; ``carry``: what the solver's later passes build on
    (its own business)."""

    stats: dict
    strips: bool
    carry: Any = None


@dataclasses.dataclass(frozen=True)
class Columns:
    """What the estimator made of a first pass's statistics.

    ``moments``: ``n``, ``mean``, ``ss`` of the kept features (what the fit reports);
    ``keep``: the mask of the features kept (None given: all True); ``scale``: their
    standardising scales (None: unscaled); ``scaling``: the map applied inside each
    block's task instead of the mean (allele counts: the centre, the scale, a missing
    entry at the centre); ``redraw``: when features are left out, the rows' Krylov
    solver draws its start block again for the kept ones and multiplies it in one
    more pass (the fit is then, draw for draw, the fit of the data without them);
    otherwise the first pass's product is restricted to them (valid when a feature
    left out was constant in the data that pass multiplied); ``exact``: the first
    pass's product is of the operator the fit decomposes (False: missing entries the
    pass zero-filled and ``scaling`` sets to the centre)."""

    moments: dict
    keep: np.ndarray | None = None
    scale: np.ndarray | None = None
    scaling: ColumnScaling | None = None
    redraw: bool = True
    exact: bool = True

    def __post_init__(self):
        if self.keep is None:
            object.__setattr__(self, "keep", np.ones(self.d_fit, dtype=bool))

    @property
    def d_fit(self) -> int:
        """The number of features kept."""
        return int(self.moments["mean"].shape[0])


@dataclasses.dataclass
class SpectralFit:
    """What a wide solver found. ``values``: eigenvalues of the (standardised)
    centred Gram (uncentred with ``centre=False``), descending; ``vectors``: d_fit ×
    k, orthonormal; ``residuals``: per pair ``‖A v − θ v‖`` (the sketch: an estimate
    of ``‖A − Â‖₂``, which bounds them) or None; ``error_bound``: the sketch's
    worst-case bound on that norm; ``passes``: the passes the solver made, its first
    one counted."""

    values: np.ndarray
    vectors: np.ndarray
    passes: int
    residuals: np.ndarray | None = None
    error_bound: float | None = None


def source(X, columns: Columns):
    """What the passes after the first read: the kept features of ``X`` — as packed
    row blocks when the map is applied in the tasks (``columns.scaling``), ``X`` is a
    .bed matrix as ``open_matrix`` made it and the packed kernels are compiled
    (:func:`~scalepca.linalg.krylov.gram_times` reads them straight into its
    products: a pass costs one read of the packed calls), else the float blocks."""
    keep = columns.keep
    if columns.scaling is not None and HAVE_KERNEL:
        blocks = packed_blocks(X, keep)
        if blocks is not None:
            return PackedRows(*blocks, shape=(X.shape[0], columns.d_fit))
    if keep.all():
        return X
    return X[:, keep]


def restricted_probes(V: np.ndarray, GV: np.ndarray, keep: np.ndarray):
    """The first pass's probes ``V`` and product ``GV`` at the kept features, probe
    columns left all zero dropped: the kept features' Gram times the kept rows of
    ``V`` when each feature left out was constant in the data the pass multiplied
    (its row and column of the centred Gram are 0)."""
    if keep.all():
        return V, GV
    V, GV = V[keep], GV[keep]
    cols = np.any(V != 0, axis=0)
    return V[:, cols], GV[:, cols]


def operator_of_first(columns: Columns, V, GV, centre: bool):
    """The start block ``V0`` and ``A V0`` for the operator the fit decomposes, from
    the first pass's ``V`` and ``GV`` (centred Gram times ``V``): ``A = D⁻¹ G D⁻¹``
    with ``V0 = D V``, and ``+ n μ μᵀ`` uncentred."""
    mom, scale = columns.moments, columns.scale
    AV = GV.copy()
    if not centre:
        AV += mom["n"] * np.outer(mom["mean"], mom["mean"] @ V)
    if scale is None:
        return V, AV
    return V * scale[:, None], AV / scale[:, None]


def gram_apply(X, columns: Columns, centre: bool) -> Callable:
    """``V ↦ A V`` for the (standardised, centred) Gram of the kept features ``X``,
    one pass each."""
    if columns.scaling is not None:
        return lambda V: gram_times(X, V, None, scaling=columns.scaling)
    mom, scale = columns.moments, columns.scale
    shift = mom["mean"] if centre else None
    if scale is None:
        return lambda V: gram_times(X, V, shift)

    def apply(V):
        return gram_times(X, V / scale[:, None], shift) / scale[:, None]

    return apply


def strip_axes(X, U, theta, stats: dict, columns: Columns, centre: bool):
    """One pass over column strips: the axes ``Xcᵀ U Σ⁻¹`` of the kept features,
    d_fit × k."""
    Vt = snapshot_components(X, U, np.sqrt(theta), stats, centre=centre)
    return Vt[:, columns.keep].T
