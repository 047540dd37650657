"""The wide-data solvers of PCA and PPCA: block Krylov, the one-pass sketch, the
snapshot method.

Each returns the spectrum the spectral fit needs (see ``_BaseSpectralPCA._fit``) and
counts its passes on the model (``_timed_pass``). None makes a pass for the mean alone:

* ``"randomized"`` (block Krylov, :mod:`scalepca.linalg.krylov`): the first pass gathers
  the column moments and the first product of the centred Gram operator; every further
  pass is one more product. Passes: at most ``n_power_iter + 2``, fewer with ``tol``. On
  column strips (every block holds all rows and there are several column chunks: a field
  chunked along space, :func:`~scalepca.linalg.snapshot.holds_whole_columns`) the same
  solver runs on the sample-side operator ``K = Xc Xcᵀ`` (n × n, the same nonzero
  eigenvalues), each strip centred inside its task
  (:func:`~scalepca.linalg.snapshot.sample_gram_times`), and one more pass gives the
  axes ``Xcᵀ U Σ⁻¹`` (:func:`_fit_krylov_strips`): at most ``n_power_iter + 3`` passes,
  fewer with ``tol``, and never the all-to-all rechunk into row panels. Its residuals
  are those of ``K`` (each still bounds its eigenvalue's error).
* ``"sketch"`` (:mod:`scalepca.linalg.sketch`): one pass; a Nyström approximation of the
  centred Gram, an estimate of its error from held-out test vectors and a probabilistic
  worst-case bound on it. It reads row panels, so column strips are regrouped into them
  (an all-to-all rechunk): on the sample side it would need a second pass for the axes,
  which is the snapshot method's count with none of its exactness, so on that layout
  ``"snapshot"`` or ``"randomized"`` are the solvers that read the strips as they are.
* ``"snapshot"`` (:mod:`scalepca.linalg.snapshot`): the n × n sample Gram in one pass
  over column strips, ``eigh`` on the client, one more pass for the components. Exact.

Standardising (``scale``, per-feature standard deviations known only after the first
pass) is applied on the client to the Krylov and sketch products: with
``D = diag(scale)`` the standardised operator is ``D⁻¹ A D⁻¹``, and the first pass's
product ``A Ω`` is that operator applied to ``D Ω``, which becomes the start block.

Genotypes (``standardize="genotype"``) are the same per-column affine map with the
centre ``2p`` and scale ``√(2p(1−p))`` from the first pass's moments: the scale is
applied on the client as above (once: the blocks are never divided), the centre and
the missing calls (set to the centre) inside each block's task — dense or CSR alike
(:func:`_genotype_first_pass`, ``gram_times(scaling=…)``,
``snapshot_gram(standardize=strip_scaling)``). A .bed read by ``open_matrix`` is
multiplied from its packed calls after the first pass
(:mod:`scalepca.linalg.packed`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import linalg as sla

from .._validation import check_random_state_seed
from ..io._bed import packed_blocks
from ..linalg import passes
from ..linalg.alleles import refuse_partial_calls, strip_scaling
from ..linalg.krylov import (
    block_krylov_eigh,
    gram_times,
    moments_and_gram_times,
    start_block,
)
from ..linalg.packed import HAVE_KERNEL, PackedRows
from ..linalg.scaling import ColumnScaling
from ..linalg.sketch import (
    SKETCH_TESTS,
    nystrom_eigh,
    nystrom_error_bound,
    nystrom_error_estimate,
)
from ..linalg.snapshot import (
    holds_whole_columns,
    sample_gram_times,
    snapshot_components,
    snapshot_gram,
)
from ._genotype_fit import genotype_moments, genotype_scaling

__all__ = ["WideFit", "fit_krylov", "fit_sketch", "fit_snapshot"]


@dataclasses.dataclass
class WideFit:
    """What a wide solver found. ``theta``: eigenvalues of the (standardised) centred
    Gram (uncentred with ``zero_center=False``), descending; ``vectors``: d_fit × k;
    ``mom``: the column moments of the kept features; ``scale``: standardising scales
    or None; ``residuals``: per component ``‖A v − θ v‖`` (for the sketch, an
    estimate of ``‖A − Â‖₂``, which bounds them) or None; ``error_bound``: the
    sketch's worst-case bound on that norm."""

    mom: dict
    d_fit: int
    scale: np.ndarray | None
    theta: np.ndarray
    vectors: np.ndarray
    residuals: np.ndarray | None = None
    error_bound: float | None = None


def _first_pass(
    model, X, data, draw, k: int, precision: str | None = None, *, once: bool = False
):
    """The moments and the centred Gram times the probes ``V = draw(rng, d)`` (``rng``
    from the model's ``random_state``); all-NaN features dropped, standardising scales
    set. Returns ``(mom, d_fit, scale, V, GV, X, rng, exact)`` with ``X`` restricted to
    the kept features (genotypes from a .bed: possibly its packed row blocks, see
    :func:`_genotype_source`); ``exact``: ``GV`` is the product of the operator the fit
    decomposes (False only for genotypes with missing calls, see
    :func:`_genotype_first_pass`).

    When features are dropped, the probes are drawn again for the kept features only and
    multiplied in one more pass: the fit is then the fit of the data without them, draw
    for draw (at the cost of a pass, only on data with all-NaN features).

    ``once`` (data read once, the sketch): no second pass. The pass zero-filled the
    dropped features, so their rows and columns of the centred Gram are 0 and the kept
    rows of ``GV`` are the kept features' Gram times the kept rows of ``V`` (probes left
    all zero dropped): the draw restricted, not a draw for the kept features."""
    n, d = X.shape
    rng = np.random.default_rng(check_random_state_seed(model.random_state))
    V = draw(rng, d)
    out = moments_and_gram_times(X, V, precision=precision)
    GV = out.pop("GV")
    if model._genotypes():
        return _genotype_first_pass(model, X, data, out, V, GV, k, rng)
    mom, d_fit = model._moments_without_land(out, n, d, k, data)
    X = model._select_features(X)
    if d_fit < d and once:
        keep = model._features_kept
        V, GV = V[keep], GV[keep]
        cols = np.any(V != 0, axis=0)
        V, GV = V[:, cols], GV[:, cols]
    elif d_fit < d:
        # the same pass over the kept features: the same arithmetic as their fit
        passes.counter_of(model).plan(1)
        rng = np.random.default_rng(check_random_state_seed(model.random_state))
        V = draw(rng, d_fit)
        mom = moments_and_gram_times(X, V, precision=precision)
        GV = mom.pop("GV")
    scale = model._standardizing_scale(mom["ss"] / max(n, 1), d_fit, data)
    return mom, d_fit, scale, V, GV, X, rng, True


def _genotype_first_pass(model, X, data, out: dict, V, GV, k: int, rng):
    """:func:`_first_pass` of allele counts (``standardize="genotype"``): the allele
    frequencies from the pass's moments, SNPs left out, ``scale`` ``√(2p(1−p))``.

    No second pass when SNPs are left out: a monomorphic or uncalled SNP is constant
    in the zero-filled data the pass multiplied (when it has no missing call), so its
    row and column of the centred Gram are 0 and the kept rows of ``GV`` are the kept
    SNPs' Gram times the kept rows of ``V`` (probe columns left all zero are dropped
    with them). That product is the standardised operator's (``exact``) when no
    polymorphic SNP has a missing call: the zero-filled data are then the data. A
    missing call makes it the product of the zero-filled data's Gram, which is not
    the mean-imputed one's."""
    n, d = X.shape
    stats = genotype_scaling(model, out, n, d, k, data)
    keep = stats.keep
    nanf = np.broadcast_to(np.asarray(out.get("nan_features", 0)), (d,))
    exact = not bool(np.any((nanf > 0) & (nanf < n)))
    if not keep.all():
        V, GV = V[keep], GV[keep]
        cols = np.any(V != 0, axis=0)
        V, GV = V[:, cols], GV[:, cols]
    return (
        genotype_moments(stats, n),
        int(keep.sum()),
        stats.scale,
        V,
        GV,
        _genotype_source(model, X, keep),
        rng,
        exact,
    )


def _genotype_source(model, X, keep: np.ndarray):
    """What the later passes read: the kept SNPs of ``X`` — as packed row blocks when
    ``X`` is a .bed matrix as ``open_matrix`` made it and the packed kernels are
    compiled (:func:`~scalepca.linalg.krylov.gram_times` reads them straight into its
    products: a pass costs one read of the packed calls), else the float blocks."""
    blocks = packed_blocks(X, keep) if HAVE_KERNEL else None
    if blocks is None:
        return model._select_features(X)
    return PackedRows(*blocks, shape=(X.shape[0], int(keep.sum())))


def _operator_of_first(mom, scale, V, GV, centre: bool):
    """The start block ``V0`` and ``A V0`` for the operator the fit decomposes, from
    the first pass's ``V`` and ``GV`` (centred Gram times ``V``): ``A = D⁻¹ G D⁻¹``
    with ``V0 = D V``, and ``+ n μ μᵀ`` uncentred."""
    AV = GV.copy()
    if not centre:
        AV += mom["n"] * np.outer(mom["mean"], mom["mean"] @ V)
    if scale is None:
        return V, AV
    return V * scale[:, None], AV / scale[:, None]


def _gram_apply(model, X, mom, scale, centre: bool):
    """``V ↦ A V`` for the (standardised, centred) Gram, one pass each."""
    if model._genotypes():  # centre 2p, scale √(2p(1−p)), a missing call at the centre
        scaling = ColumnScaling(mom["mean"], scale, fill=True)
        return lambda V: gram_times(X, V, None, scaling=scaling)
    shift = mom["mean"] if centre else None

    def apply(V):
        W = V if scale is None else V / scale[:, None]
        AW = gram_times(X, W, shift)
        return AW if scale is None else AW / scale[:, None]

    return apply


#: largest condition number of the standardised start block ``D Ω`` the Krylov solver
#: orthonormalises (its product loses about ``ε · cond`` relative accuracy); above it
#: the first product, ``A D Ω``, is orthonormalised and multiplied again instead (one
#: pass of the budget: the first pass then acts as one step of subspace iteration)
START_COND = 1e3


def fit_krylov(model, X, data, k: int, *, centre: bool) -> WideFit:
    """Block Krylov on the centred Gram operator (see :func:`block_krylov_eigh`):
    block size ``k + n_oversamples`` (at most d), at most ``n_power_iter + 2``
    passes, stopping early when every residual is within ``tol`` of its eigenvalue.
    Column strips: on the sample side (:func:`_fit_krylov_strips`)."""
    if holds_whole_columns(X):
        return _fit_krylov_strips(model, X, data, k, centre=centre)
    start = _krylov_start(model, X, data, k, centre)
    mom, d_fit, scale, apply, budget, rng = start[2:]
    res = block_krylov_eigh(
        apply, *start[:2], k, max_products=budget, tol=model._krylov_tol(), rng=rng
    )
    return WideFit(
        mom, d_fit, scale, np.maximum(res.values, 0.0), res.vectors, res.residuals
    )


def _krylov_start(model, X, data, k, centre):
    """The first pass and the Krylov start block: ``(Q0, A Q0, mom, d_fit, scale, apply,
    passes left, rng)`` (its own frame, so that only ``Q0`` and ``A Q0`` outlive it)."""

    def draw(rng, d):  # an orthonormal start block: its product needs no R⁻¹ (unscaled)
        return start_block(rng, d, k + model.n_oversamples)

    mom, d_fit, scale, Om, GV, X, rng, exact = _first_pass(model, X, data, draw, k)
    budget = (
        model.n_power_iter + 2
    )  # products of the Krylov basis (passes: one more when
    # features were dropped, see _first_pass)
    V0, AV0 = _operator_of_first(mom, scale, Om, GV, centre)
    del Om, GV
    apply = _gram_apply(model, X, mom, scale, centre)
    if scale is None:
        return V0, AV0, mom, d_fit, scale, apply, budget, rng
    Q0, R = np.linalg.qr(V0)
    if exact and np.linalg.cond(R) <= START_COND:
        AQ0 = sla.solve_triangular(R, AV0.T, trans="T").T  # A V0 R⁻¹
        return Q0, AQ0, mom, d_fit, scale, apply, budget, rng
    # V0 = D Ω is ill-conditioned (scales far apart), or A V0 the product of a nearby
    # operator only (genotypes with missing calls): start from that product instead
    Q0 = np.linalg.qr(AV0)[0]
    return Q0, apply(Q0), mom, d_fit, scale, apply, budget - 1, rng


#: why the sketch refuses genotypes with missing calls
SKETCH_MISSING_CALLS = (
    "svd_solver='sketch' with standardize='genotype' needs data without missing "
    "calls: the sketch reads the data once, and a missing call is set to its SNP's "
    "mean, known only after that read; use svd_solver='randomized' (block Krylov, the "
    "same accuracy with missing calls) or 'snapshot'"
)


def fit_sketch(model, X, data, k: int, *, centre: bool) -> WideFit:
    """One pass: the centred Gram times ``k + n_oversamples`` Gaussian probes and
    :data:`SKETCH_TESTS` test vectors; a Nyström approximation from the probes, its
    error estimated and bounded from the test vectors.

    Genotypes (``standardize="genotype"``) with missing calls are refused in the pass
    itself: each block checks its SNPs as it is read, so the pass stops at the first
    block where a SNP has both calls and missing calls (a SNP missing in every row of
    a block is known to be uncalled, or not, only from the pass's count, checked
    after it). Nothing is fitted and no second pass is made."""

    # orthonormal probes (the identity if they span it all), Gaussian tests
    def draw(rng, d):
        l = min(k + model.n_oversamples, d)
        G = rng.standard_normal((d, l + SKETCH_TESTS))
        probes = np.eye(d) if l == d else np.linalg.qr(G[:, :l])[0]
        return np.hstack([probes, G[:, l:]])

    # a missing call stops the pass at the first block holding one
    if model._genotypes():
        X = refuse_partial_calls(X, SKETCH_MISSING_CALLS)
    # float64 products: the pass is read-bound, and the sketch's own error dwarfs their
    # cost
    mom, d_fit, scale, Om, GV, X, _, exact = _first_pass(
        model, X, data, draw, k, precision="float64", once=True
    )
    # missing calls seen only in blocks where their SNP had no call at all
    if not exact:
        raise ValueError(SKETCH_MISSING_CALLS)
    l = Om.shape[1] - SKETCH_TESTS
    Om, Th = Om[:, :l], Om[:, l:]
    AOm, ATh = GV[:, :l], GV[:, l:]
    if not centre:
        mu = mom["mean"]
        AOm = AOm + mom["n"] * np.outer(mu, mu @ Om)
        ATh = ATh + mom["n"] * np.outer(mu, mu @ Th)
    V0, AV0 = _operator_of_first(mom, scale, Om, AOm, True)  # centring done above
    # an orthonormal basis of the probes and its product: the probes restricted to the
    # features kept can be more than their number, or no longer independent
    P, sv, Wt = np.linalg.svd(V0, full_matrices=False)
    r = int(np.sum(sv > sv[0] * max(V0.shape) * np.finfo(np.float64).eps))
    Q, Y = P[:, :r], AV0 @ (Wt[:r].T / sv[:r])
    theta, U = nystrom_eigh(Q, Y)
    # the estimate is of the error of the operator decomposed, D⁻¹ A D⁻¹, whose product
    # with the tests D Θ is D⁻¹ A Θ; the worst-case bound needs Gaussian tests: it is on
    # ‖A − D Â D‖ for the unstandardised A
    if scale is None:
        estimate = nystrom_error_estimate(ATh, Th, U, theta)
    else:
        estimate = nystrom_error_estimate(
            ATh / scale[:, None], Th * scale[:, None], U, theta
        )
    Us = U if scale is None else U * scale[:, None]
    bound = nystrom_error_bound(ATh, Th, Us, theta)
    if scale is not None:
        bound /= float(np.min(scale)) ** 2
    kk = min(k, theta.size)
    return WideFit(
        mom,
        d_fit,
        scale,
        theta[:kk],
        U[:, :kk],
        np.full(kk, estimate),
        error_bound=bound,
    )


def _strip_standardize(model, data):
    """The ``standardize`` the strips apply inside their tasks (see ``snapshot_gram``):
    the column weights of ``data`` when it carries them, so the strips standardise
    before the weights (every feature's: the fit has left none out before its first
    pass)."""
    if model._genotypes():
        return strip_scaling
    if not model.standardize:
        return False
    weights = model._standardizing_weights(data)
    return True if weights is None else weights


def _strip_moments(model, out: dict, n: int, d: int, k: int, data):
    """What a fit over column strips reports from the strips' statistics ``out`` (of
    ``snapshot_gram`` or a first ``sample_gram_times``): ``(mom, d_fit, scale)`` of
    the kept features, all-NaN features (genotypes: monomorphic and uncalled SNPs)
    left out, and the scales the strips used set on the model. Nothing to read again:
    a left-out feature is a zero column once the strip is mapped, so the passes made
    are those of the kept ones."""
    if model._genotypes():  # the strips mapped the counts with these frequencies
        stats = genotype_scaling(model, out, n, d, k, data)
        return genotype_moments(stats, n), int(stats.keep.sum()), stats.scale
    mom, d_fit = model._moments_without_land(out, n, d, k, data)
    model._standardizing_scale(mom["ss"] / max(n, 1), d_fit, data)
    if not model.standardize:
        return mom, d_fit, None
    keep = getattr(model, "_features_kept", None)  # the scales the strips used
    scale = out["scale"] if keep is None else out["scale"][keep]
    model.scale_ = scale
    return mom, d_fit, scale


def _strip_axes(model, X, U, theta, out: dict, centre: bool) -> np.ndarray:
    """One pass: the axes ``Xcᵀ U Σ⁻¹`` of the kept features, d_fit × k."""
    Vt = snapshot_components(X, U, np.sqrt(theta), out, centre=centre)
    keep = getattr(model, "_features_kept", None)
    return (Vt if keep is None else Vt[:, keep]).T


def _fit_krylov_strips(model, X, data, k: int, *, centre: bool) -> WideFit:
    """Block Krylov on the sample Gram ``K = Xc Xcᵀ`` (n × n) of data in column
    strips: the first pass gathers the strips' column statistics and ``K U0`` (``U0``
    orthonormal, ``k + n_oversamples`` columns, at most n), each later pass one
    product ``K U`` — every strip centred and scaled in its own task, only n × l
    partials travel — and a last pass the axes. ``theta``: the eigenvalues of ``K``,
    those of the centred Gram ``Xcᵀ Xc``."""
    n, d = X.shape
    rng = np.random.default_rng(check_random_state_seed(model.random_state))
    U0 = start_block(rng, n, k + model.n_oversamples)
    how = dict(centre=centre, standardize=_strip_standardize(model, data))
    out = sample_gram_times(X, U0, with_stats=True, **how)
    KU0 = out.pop("KU")
    mom, d_fit, scale = _strip_moments(model, out, n, d, k, data)
    res = block_krylov_eigh(
        lambda U: sample_gram_times(X, U, **how),
        U0,
        KU0,
        k,
        max_products=model.n_power_iter + 2,
        tol=model._krylov_tol(),
        rng=rng,
    )
    theta = np.maximum(res.values, 0.0)
    return WideFit(
        mom,
        d_fit,
        scale,
        theta,
        _strip_axes(model, X, res.vectors, theta, out, centre),
        res.residuals,
    )


def fit_snapshot(model, X, data, k: int | None, *, centre: bool) -> WideFit:
    """The snapshot method: the n × n Gram of the centred (standardised) rows over
    column strips, its eigendecomposition on the client, one more pass for the
    components ``Xcᵀ U Σ⁻¹``. ``k`` None: every eigenvalue is returned (components
    for all of them)."""
    n, d = X.shape
    out = snapshot_gram(X, centre=centre, standardize=_strip_standardize(model, data))
    G = out.pop("G")
    mom, d_fit, scale = _strip_moments(model, out, n, d, k or 1, data)
    theta, U = sla.eigh(G, driver="evr", check_finite=False)
    theta, U = np.maximum(theta[::-1], 0.0), U[:, ::-1]
    kk = min(n, d_fit) if k is None else k
    return WideFit(
        mom,
        d_fit,
        scale,
        theta,
        _strip_axes(model, X, U[:, :kk], theta[:kk], out, centre),
    )
