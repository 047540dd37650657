"""MCA's out-of-core path: block Krylov on the dilated cross-covariance, one pass per
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
after that pass.

The total squared covariance ``‖C‖²_F`` is not an output of any product:
``‖X_cᵀ Y_c‖²_F = trace((X_c X_cᵀ)(Y_c Y_cᵀ))`` needs the n × n Grams of both fields,
or every entry of ``C``. What the Krylov basis gives is the squared covariance it
captures, ``‖Cᵀ Q_x‖²_F`` (and ``‖C Q_y‖²_F``), a lower bound of ``‖C‖²_F`` that
equals it when the basis is invariant under ``H`` (its products lie in it:
``‖HQ − Q QᵀHQ‖_F ≤`` :data:`INVARIANT_TOL` ``‖HQ‖_F``), which happens once the basis
spans the fields' sample space — e.g. whenever ``n − 1`` plus the start block is at
most the basis' width per field. The upper bound is Cauchy–Schwarz's,
``‖X_c‖²_F ‖Y_c‖²_F / (n − 1)²`` (the fields' total variances, from the first pass).
When the basis does not give it and ``total`` asks (``"exact"``, or ``"auto"`` with n
at most :data:`EXACT_TOTAL_SAMPLES`), one more pass over column strips of both fields
makes their n × n sample Grams
(:func:`~scalepca.linalg.snapshot.snapshot_gram_graph`, standardised as the fit is)
and ``‖C‖²_F = Σ (G_x ∘ G_y) / (n − 1)²`` exactly.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg as sla

from .._validation import check_random_state_seed
from ..linalg import passes
from ..linalg.cross import aligned_panels, cross_times, moments_and_cross_times
from ..linalg.krylov import block_krylov_eigh, start_block
from ..linalg.snapshot import snapshot_gram_graph
from ..models._wide import START_COND

__all__ = ["fit_randomized"]

#: the basis is taken as invariant under H (the squared covariance it captures is
#: ‖C‖²_F) when its products leave it by at most this fraction of their norm
INVARIANT_TOL = 1e-8

#: ``total="auto"`` makes the exact ``‖C‖²_F`` from the n × n sample Grams (one more
#: pass, n × n partials: 128 MB at this n) up to this many samples
EXACT_TOTAL_SAMPLES = 4096


def fit_randomized(model, X, Y, k: int, std: tuple) -> dict:
    """The randomized (block Krylov) fit of ``model`` (an
    :class:`~scalepca.analysis.mca.MCA`) on the dense dask fields ``X``, ``Y`` (same
    samples); ``std``: each field's weights to standardise with, or False. Returns
    what ``MCA._set_fitted`` takes."""
    X, Y = aligned_panels(X, Y)
    (n, dx), dy = X.shape, Y.shape[1]
    rng = np.random.default_rng(check_random_state_seed(model.random_state))
    b = k + int(model.n_oversamples)
    Ox, Oy = start_block(rng, dx, b), start_block(rng, dy, b)
    Om = sla.block_diag(Ox, Oy)  # [[Ω_x, 0], [0, Ω_y]]
    mom = moments_and_cross_times(X, Y, Om[:dx], Om[dx:])
    kx, ky = model._kept_features(mom["nan_features"], n, dx, mom["bad"])
    sx, sy = model._scales(mom["ss"], n, dx, std)
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
    V0 = Om[keep] * scale[:, None]
    AV0 = mom.pop("HV")[keep] / ((n - 1) * scale[:, None])
    cols = np.any(V0 != 0, axis=0)  # start columns left only at dropped features
    V0, AV0 = V0[:, cols], AV0[:, cols]
    budget = int(model.n_power_iter) + 2
    Q0, R = np.linalg.qr(V0)
    if np.linalg.cond(R) <= START_COND:
        AQ0 = sla.solve_triangular(R, AV0.T, trans="T").T  # A V0 R⁻¹
    else:  # scales far apart: start from the product, one pass of the budget
        Q0 = np.linalg.qr(AV0)[0]
        AQ0, budget = apply(Q0), budget - 1
    res = block_krylov_eigh(
        apply,
        Q0,
        AQ0,
        k,
        max_products=max(budget, 1),
        tol=float(model.tol),
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
    wanted = model.total == "exact" or (
        model.total == "auto" and n <= EXACT_TOTAL_SAMPLES
    )
    if np.isnan(total) and wanted:
        total = _sample_gram_total(Xk, Yk, scale[:dxk], scale[dxk:], n)
        bounds = (total, total)
    return {
        "mom": mom,
        "kept": (kx, ky),
        "scales": (sx, sy),
        "U": U,
        "s": res.values,
        "V": V,
        "total": total,
        "bounds": bounds,
        "residuals": res.residuals,
        "n_products": res.n_products,
    }


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
