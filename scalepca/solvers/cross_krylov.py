"""MCA's randomized solver: block Krylov on the dilated cross-covariance, one pass per
product.

The d_x × d_y cross-covariance ``C`` is never formed. Its Hermitian dilation
``H = [[0, C], [Cᵀ, 0]]`` is applied to a block ``[U; V]`` in one read of both fields
(:mod:`scalepca.linalg.cross`: ``C V`` and ``Cᵀ U`` of each pair of row blocks in the
task that holds them), and :func:`scalepca.linalg.krylov.block_krylov_eigh` — PCA's
``svd_solver="randomized"`` eigensolver, block Lanczos with full reorthogonalisation and
Rayleigh–Ritz over the whole basis — takes its top ``k`` eigenpairs ``σ_i``,
``[u_i; v_i] / √2``. The start block is block diagonal, ``[[Ω_x, 0], [0, Ω_y]]`` (each
``k + n_oversamples`` orthonormal Gaussian columns), so the Krylov space is a direct sum
of a subspace of each field and Rayleigh–Ritz on it is the two-sided projection
``Q_xᵀ C Q_y``.

The first pass gathers the column moments of both fields with the first product (Chan's
update, :func:`~scalepca.linalg.cross.moments_and_cross_times`); the standardising
scales, known only then, are applied on the client, ``D⁻¹ H D⁻¹`` with
``D = diag(s_x, s_y)``, as PCA's Krylov path does (the first product is that operator
applied to ``D Ω``); features NaN at every sample (land) are dropped from the operator
after that pass: which features and scales, the estimator decides from the first pass's
moments (:func:`cross_start`) and hands to :func:`cross_krylov`.

The total squared covariance ``‖C‖²_F`` is not an output of any product:
``‖X_cᵀ Y_c‖²_F = trace((X_c X_cᵀ)(Y_c Y_cᵀ))`` needs the n × n Grams of both fields,
or every entry of ``C``. What the Krylov basis gives is the squared covariance it
captures, ``‖Cᵀ Q_x‖²_F`` (and ``‖C Q_y‖²_F``), a lower bound of ``‖C‖²_F`` that
equals it when the basis is invariant under ``H`` (its products lie in it:
``‖HQ − Q QᵀHQ‖_F ≤`` :data:`INVARIANT_TOL` ``‖HQ‖_F``), which happens once the basis
spans the fields' sample space — e.g. whenever ``n − 1`` plus the start block is at
most the basis' width per field. The upper bound is Cauchy–Schwarz's,
``‖X_c‖²_F ‖Y_c‖²_F / (n − 1)²`` (the fields' total variances, from the first pass).
When the basis does not give it and the caller asks for it (``exact_total``), one more
pass over column strips of both fields makes their n × n sample Grams
(:func:`~scalepca.linalg.snapshot.snapshot_gram_graph`, standardised as the fit is)
and ``‖C‖²_F = Σ (G_x ∘ G_y) / (n − 1)²`` exactly.
"""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np
from scipy import linalg as sla

from ..linalg import passes
from ..linalg.cross import aligned_panels, cross_times, moments_and_cross_times
from ..linalg.krylov import block_krylov_eigh, scaled_start, start_block
from ..linalg.snapshot import snapshot_gram_graph
from .wide import krylov_tol

__all__ = ["CrossFit", "CrossStart", "cross_krylov", "cross_start"]

#: the basis is taken as invariant under H (the squared covariance it captures is
#: ‖C‖²_F) when its products leave it by at most this fraction of their norm
INVARIANT_TOL = 1e-8


@dataclasses.dataclass
class CrossStart:
    """The first pass of :func:`cross_start`: the fields as row panels ``X``, ``Y``,
    the start block ``probes`` (``[[Ω_x, 0], [0, Ω_y]]``), its product ``HV`` with
    the (unscaled) dilation and the column ``moments`` of ``[X, Y]`` (``n``,
    ``mean``, ``ss``, ``bad``, ``nan_features``)."""

    X: da.Array
    Y: da.Array
    probes: np.ndarray
    HV: np.ndarray
    moments: dict


@dataclasses.dataclass
class CrossFit:
    """What :func:`cross_krylov` found: the leading singular triplets ``U`` (d_x ×
    k), ``s``, ``V`` (d_y × k) of the kept features' (standardised)
    cross-covariance, each pair's ``residuals``, the ``products`` made (one pass
    each), ``total`` ``‖C‖²_F`` (NaN when neither the basis nor a pass of sample
    Grams gave it) and its ``bounds`` (lower, upper)."""

    U: np.ndarray
    s: np.ndarray
    V: np.ndarray
    residuals: np.ndarray
    products: int
    total: float
    bounds: tuple


def cross_start(X: da.Array, Y: da.Array, width: int, rng) -> CrossStart:
    """One pass over both fields (dense dask arrays, the same samples): their column
    moments and the dilation times a block-diagonal start block of ``width``
    orthonormal Gaussian columns per field (at most each field's features)."""
    X, Y = aligned_panels(X, Y)
    dx, dy = X.shape[1], Y.shape[1]
    Om = sla.block_diag(start_block(rng, dx, width), start_block(rng, dy, width))
    mom = moments_and_cross_times(X, Y, Om[:dx], Om[dx:])
    return CrossStart(X, Y, Om, mom.pop("HV"), mom)


def cross_krylov(
    start: CrossStart,
    kept: tuple,
    scales: tuple,
    k: int,
    *,
    max_products: int,
    tol: float | None,
    rng,
    exact_total: bool,
) -> CrossFit:
    """Block Krylov on ``D⁻¹ H D⁻¹ / (n − 1)`` of the kept features from the first
    pass ``start``: ``kept`` the masks ``(kx, ky)`` of the features kept, ``scales``
    the standardising scales ``(sx, sy)`` of every feature (None: unscaled); at most
    ``max_products`` products (the first pass's counted), stopping once every
    residual is within ``tol`` of its value (:func:`block_krylov_eigh`); with
    ``exact_total``, one more pass for ``‖C‖²_F`` when the basis does not give it."""
    (kx, ky), (sx, sy) = kept, scales
    X, Y, mom = start.X, start.Y, start.moments
    (n, dx) = X.shape
    keep = np.concatenate([kx, ky])
    dxk = int(kx.sum())
    scale = np.concatenate(
        [
            np.ones(dxk) if sx is None else sx[kx],
            np.ones(int(ky.sum())) if sy is None else sy[ky],
        ]
    )
    mean = mom["mean"]
    Xk = X if kx.all() else X[:, np.flatnonzero(kx)]
    Yk = Y if ky.all() else Y[:, np.flatnonzero(ky)]

    def apply(Q):  # V ↦ D⁻¹ H D⁻¹ V / (n − 1), one pass over both fields
        W = Q / scale[:, None]
        HW = cross_times(Xk, Yk, W[:dxk], W[dxk:], mean[:dx][kx], mean[dx:][ky])
        return HW / ((n - 1) * scale[:, None])

    # the first product, of the operator restricted and standardised: V0 = D Ω, A V0 =
    # D⁻¹ HΩ
    V0 = start.probes[keep] * scale[:, None]
    AV0 = start.HV[keep] / ((n - 1) * scale[:, None])
    cols = np.any(V0 != 0, axis=0)  # start columns left only at dropped features
    Q0, AQ0, spent = scaled_start(V0[:, cols], AV0[:, cols], apply)
    res = block_krylov_eigh(
        apply,
        Q0,
        AQ0,
        k,
        max_products=max(max_products - spent, 1),
        tol=krylov_tol(tol),
        rng=rng,
        keep_basis=True,
    )
    U, V = res.vectors[:dxk], res.vectors[dxk:]
    U = U / np.linalg.norm(U, axis=0)
    V = V / np.linalg.norm(V, axis=0)
    ss = mom["ss"][keep] / scale**2
    total, bounds = _total(
        res.basis, res.products, dxk, ss[:dxk].sum() * ss[dxk:].sum() / (n - 1) ** 2
    )
    del res.basis, res.products
    if np.isnan(total) and exact_total:
        total = _sample_gram_total(Xk, Yk, scale[:dxk], scale[dxk:], n)
        bounds = (total, total)
    return CrossFit(U, res.values, V, res.residuals, res.n_products, total, bounds)


def _captured(Q: np.ndarray, W: np.ndarray, rows: slice, other: slice) -> float:
    """``‖Cᵀ Q_x‖²_F`` (or ``‖C Q_y‖²_F``): the squared norm of the operator's
    products over an orthonormal basis of the field's part ``Q[rows]`` of the Krylov
    basis (the products of ``Q`` are known, ``W = H Q``, so those of any combination
    of its columns are too)."""
    P = Q[rows]
    w, E = np.linalg.eigh(P.T @ P)
    good = w > 1e-6 * max(w.max(initial=0.0), np.finfo(float).tiny)
    T = E[:, good] / np.sqrt(w[good])
    return float(np.sum((W[other] @ T) ** 2))


def _sample_gram_total(X, Y, sx: np.ndarray, sy: np.ndarray, n: int) -> float:
    """``‖C‖²_F = trace(G_x G_y) / (n − 1)²`` from the centred n × n sample Grams of the
    (standardised) fields, both in one pass over their column strips."""
    graphs = [
        snapshot_gram_graph(A if np.all(s == 1) else A / s)
        for A, s in ((X, sx), (Y, sy))
    ]
    gx, gy = passes.compute(*graphs, name="sample grams")
    return float(np.sum(gx["G"] * gy["G"])) / (n - 1) ** 2


def _total(Q: np.ndarray, W: np.ndarray, dxk: int, upper: float):
    """``(‖C‖²_F or NaN, (lower, upper))`` from the Krylov basis ``Q`` and
    ``W = H Q``."""
    x, y = slice(0, dxk), slice(dxk, None)
    lower = max(_captured(Q, W, x, y), _captured(Q, W, y, x))
    outside = np.linalg.norm(W - Q @ (Q.T @ W))
    if outside <= INVARIANT_TOL * np.linalg.norm(W):
        return lower, (lower, lower)
    return float("nan"), (lower, max(upper, lower))
