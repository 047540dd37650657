"""Singular value thresholding and soft thresholding on matrices stored in 2-D blocks.

The proximal operators of robust PCA (principal component pursuit):

* soft threshold (entrywise), the proximal map of ``τ‖·‖₁``::

      shrink_τ(x) = sign(x) · max(|x| − τ, 0)

* singular value thresholding (Cai, Candès & Shen 2010), the proximal map of ``τ‖·‖_*``::

      SVT_τ(A) = U · diag(max(σ − τ, 0)) · Vᵀ      where A = U diag(σ) Vᵀ

Only the singular triplets with ``σ > τ`` matter, so the SVD is partial: a randomized
range finder (Halko, Martinsson & Tropp 2011) over the blocks of ``A`` with ``k + p``
probe vectors, where ``k`` is a *predicted* rank (Lin, Chen & Ma 2010: one more than the
number of values found above the threshold last time). Between outer iterations the
previous right singular vectors warm-start the probe block. A partial SVD of fixed
passes can miss values just above the threshold, where those of the inexact ALM's
argument crowd on data that are not exactly low rank, and the ALM then ends elsewhere;
with ``rtol`` the partial SVD is grown within the call until a trusted value lies below
the threshold and iterated until the thresholded matrix settles (:func:`_complete_svt`),
which follows the exact-SVD path.

Every product ``A Ω`` / ``Aᵀ Q`` is a blockwise dask product with a tree sum over
blocks; only the tall-skinny results (n1 × l, n2 × l) and l × l matrices reach the
client, and, when the partial SVD must grow to a quarter of ``min(n1, n2)``, the Gram
matrix of the small side (then no larger than twice the factors). ``A`` itself is
never gathered and no dense SVD of it is taken. A NumPy ``A`` (a small problem held on
the client) takes the same steps, each product one BLAS call.
"""

from __future__ import annotations

import logging
import math
from contextlib import nullcontext
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
from scipy import linalg as sla

from .._client import current_client
from .rangefinder import orth as _orth
from .rangefinder import rayleigh_ritz

logger = logging.getLogger(__name__)

__all__ = [
    "SVTResult",
    "low_rank_from_factors",
    "predict_rank",
    "randomized_partial_svd",
    "soft_threshold",
    "soft_threshold_blocks",
    "spectral_norm_estimate",
    "svt",
]


def soft_threshold(x: np.ndarray, tau: float) -> np.ndarray:
    """Entrywise ``sign(x) · max(|x| − τ, 0)``, computed as ``x − clip(x, −τ, τ)``
    (two passes over memory instead of five; ``τ = inf`` gives zeros)."""
    x = np.asarray(x)
    return x - np.clip(x, -tau, tau)


def soft_threshold_blocks(X: da.Array, tau: float) -> da.Array:
    """Lazy blockwise soft threshold of a dask array (no data moves)."""
    return X.map_blocks(soft_threshold, tau, dtype=X.dtype)


def _ctx(timed, label):
    return timed(label) if timed is not None else nullcontext()


#: distributed's setting: graphs above it are sent with a warning that advises
#: scattering
LARGE_GRAPH_KEY = "distributed.admin.large-graph-warning-threshold"


def graph_constant(x: np.ndarray, chunks) -> da.Array:
    """A small in-memory array (factors, probe blocks: n × l) as a dask array in
    ``chunks``.

    Named at random, not by a hash of the values: each constant is new, and hashing
    it is a pass over it on the client for nothing. Without a distributed client this
    is ``da.from_array``. With one, the values go
    to the cluster in pieces, each sent by its own ``persist`` and at most a quarter
    of distributed's large-graph warning threshold, so the graphs that use them carry
    only keys (arrays below a sixteenth of it, of which a graph holds at most three,
    are embedded): no graph of the fit crosses the user's threshold, and the user's
    dask config is not touched. Unlike scattered data, a persisted piece keeps its
    task (with its values) at the scheduler, so a piece lost with a worker is
    recomputed like any other task.
    """
    x = np.ascontiguousarray(x)
    client = current_client()
    if client is None:
        return da.from_array(x, chunks=chunks, name=False)
    from dask.utils import parse_bytes

    limit = max(1, parse_bytes(dask.config.get(LARGE_GRAPH_KEY, "10MB")) // 4)
    if x.nbytes <= limit // 4:  # a few of these fit in any graph of the fit: embed them
        return da.from_array(x, chunks=chunks, name=False)
    axis = int(np.argmax(x.shape))
    line = max(
        1, x.nbytes // max(1, x.shape[axis])
    )  # bytes of one index along ``axis``
    step = max(1, limit // line)
    pieces = []
    for start in range(0, max(1, x.shape[axis]), step):
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, start + step)
        piece = da.from_array(np.ascontiguousarray(x[tuple(index)]), chunks=-1)
        pieces.append(client.persist(piece))
    return da.concatenate(pieces, axis=axis).rechunk(chunks)


def block_times(a, om) -> np.ndarray:
    """The contribution ``A_ij Ω_j`` of one block, shaped (rows, 1, l) for a sum over
    axis 1.

    Shared by :func:`times` and the fused update pass of robust PCA, so that both
    give bit for bit the same ``A Ω``.
    """
    return (np.asarray(a, dtype=np.float64) @ om)[:, None, :]


def sum_block_products(P: da.Array) -> da.Array:
    """``Σ_j`` of the (rows, 1, l) block products: the n1 × l result."""
    return P.sum(axis=1)


def times(A: da.Array, Om: np.ndarray) -> da.Array:
    """Lazy ``A Ω`` for a small dense ``Ω``; blocks of ``Ω`` follow ``A``'s column
    chunks. A NumPy ``A`` (a problem held on the client) gives ``A Ω`` at once."""
    if isinstance(A, np.ndarray):
        return A @ Om
    l = Om.shape[1]
    Omd = graph_constant(Om, (A.chunks[1], l))
    P = da.blockwise(
        block_times,
        "ijk",
        A,
        "ij",
        Omd,
        "jk",
        adjust_chunks={"j": 1},
        dtype=np.float64,
        meta=np.empty((0, 0, 0), dtype=np.float64),
    )
    return sum_block_products(P)


def probe_matrix(
    n2: int, l: int, rng: np.random.Generator, warm_start=None
) -> np.ndarray:
    """The n2 × l probe block: the warm-start columns first, Gaussian columns after."""
    if warm_start is not None and warm_start.shape[1] > 0:
        W = np.asarray(warm_start, dtype=np.float64)[:, :l]
        extra = l - W.shape[1]
        return (
            np.hstack([W, rng.standard_normal((n2, extra))]) if extra > 0 else W.copy()
        )
    return rng.standard_normal((n2, l))


def _rtimes(A: da.Array, Q: np.ndarray) -> da.Array:
    """Lazy ``Aᵀ Q`` for a small dense ``Q`` (at once for a NumPy ``A``)."""
    if isinstance(A, np.ndarray):
        return A.T @ Q
    return A.T @ graph_constant(Q, (A.chunks[0], Q.shape[1]))


def randomized_partial_svd(
    A: da.Array,
    k: int,
    *,
    n_oversamples: int = 10,
    n_power_iter: int = 1,
    rng: np.random.Generator,
    warm_start: np.ndarray | None = None,
    timed=None,
    probes: np.ndarray | None = None,
    first_product: np.ndarray | None = None,
):
    """Leading singular triplets of a blocked dask matrix by a randomized range finder.

    Parameters
    ----------
    A : dask array of shape (n1, n2)
        Any 2-D block layout.
    k : int
        Number of triplets wanted; ``l = k + n_oversamples`` probe vectors are used.
    n_power_iter : int
        Power (subspace) iterations, each re-orthonormalised on both sides.
    rng : numpy Generator
        Source of the Gaussian probe vectors.
    warm_start : ndarray of shape (n2, k0), optional
        Orthonormal columns (e.g. the right singular vectors of a nearby matrix) used as
        the first ``k0`` probe vectors; the rest are Gaussian.
    timed : callable, optional
        ``timed(label)`` returns a context manager wrapped around every pass over ``A``
        (the estimators count passes with it).
    probes, first_product : ndarray, optional
        The probe block ``Ω`` (n2 × l, then ``rng`` and ``warm_start`` are not used)
        and, if a caller already computed it while writing ``A``, ``A Ω`` (saves a
        pass).

    Returns
    -------
    U : ndarray (n1, l), s : ndarray (l,), Vt : ndarray (l, n2)
        All ``l`` computed triplets, singular values descending; the first ``k`` are the
        accurate ones, the oversampled rest lower bounds.

    Notes
    -----
    Passes over ``A``: ``2 + 2 · n_power_iter``. Client memory: a few (n1 + n2) × l
    arrays.
    """
    n1, n2 = A.shape
    l = int(min(k + n_oversamples, n1, n2))
    Om = probes if probes is not None else probe_matrix(n2, l, rng, warm_start)
    estimates = ritz_estimates(A, Om, timed=timed, first_product=first_product)
    for _ in range(n_power_iter + 1):
        U, s, Vt, _ = next(estimates)
    estimates.close()
    return U, s, Vt


def ritz_estimates(
    A: da.Array,
    Om: np.ndarray,
    *,
    timed=None,
    first_product: np.ndarray | None = None,
    first_range: np.ndarray | None = None,
):
    """Subspace iteration from the probe block ``Ω``, yielding ``(U, s, Vt, AV)``
    after each step.

    The first estimate is the Rayleigh–Ritz one of ``Q = orth(A Ω)`` (2 passes, 1 if
    ``first_product`` is ``A Ω``); every next one follows one power iteration
    ``Q ← orth(A V)`` (2 passes: ``A V``, then ``Aᵀ Q``), ``V`` the right Ritz vectors
    of the estimate, which span ``Aᵀ Q`` (the subspace iteration of
    :func:`~scalepca.linalg.rangefinder.subspace_iteration`, with ``Q`` on the
    client). All ``l = Ω.shape[1]`` triplets, singular values descending. ``AV()``
    computes ``A V`` (one pass), kept for the power iteration that follows, so a
    caller that checks the estimate's residual ``A V − U S`` with it pays no extra
    pass if it goes on. ``first_range``, orthonormal columns, is taken for
    ``orth(A Ω)`` as it is (no pass, no QR).
    """

    def product(Z, label):
        with _ctx(timed, label):
            (Y,) = dask.compute(times(A, Z))
        return Y

    if first_range is None:
        Y = first_product if first_product is not None else product(Om, "svt: A Ω")
    while True:
        Q = first_range if first_range is not None else _orth(Y)
        first_range = None
        with _ctx(timed, "svt: Aᵀ Q"):
            (Bt,) = dask.compute(_rtimes(A, Q))  # (Qᵀ A)ᵀ, n2 × l
        U, s, Vt = rayleigh_ritz(Q, Bt)
        made = []

        def AV(Vt=Vt, made=made):
            if not made:
                made.append(product(Vt.T, "svt: A V"))
            return made[0]

        yield U, s, Vt, AV
        Y = AV()


@dataclass
class SVTResult:
    """Factors of ``SVT_τ(A) = U diag(s) Vt`` and what the rank predictor needs."""

    U: np.ndarray  # n1 × r
    s: np.ndarray  # r, thresholded (σ − τ > 0), descending
    Vt: np.ndarray  # r × n2
    sigma: np.ndarray  # all computed singular values of A (before thresholding)
    n_above: int  # how many of the trusted (first k) values exceed τ
    k: int  # number of trusted values requested
    V_trusted: np.ndarray  # k × n2: right vectors of the trusted values (a warm start)
    n_power: int = 0  # power iterations run (randomized)
    n_restarts: int = 0  # times the probe block was grown (randomized, ``rtol`` given)
    n_gram: int = 0  # passes beyond 2 per growth: a growth from the Gram matrix AᵀA
    n_residual: int = 0  # 1 if the last estimate's A V was formed for its residual

    @property
    def rank(self) -> int:
        return int(self.s.shape[0])


def svt(
    A: da.Array,
    tau: float,
    k: int,
    *,
    full: bool = False,
    n_oversamples: int = 10,
    n_power_iter: int = 1,
    rng: np.random.Generator | None = None,
    warm_start: np.ndarray | None = None,
    timed=None,
    probes: np.ndarray | None = None,
    first_product: np.ndarray | None = None,
    rtol: float | None = None,
    max_power_iter: int = 50,
    scale: float | None = None,
) -> SVTResult:
    """Singular value thresholding ``SVT_τ(A)`` returned as factors, never as a dense
    matrix.

    By default it computes ``k`` (+ oversampling) triplets with
    :func:`randomized_partial_svd` and keeps those of the first ``k`` above ``τ``;
    with ``rtol`` it makes sure of the answer instead (:func:`_complete_svt`): every
    value above ``τ`` found, and the thresholded matrix to ``rtol · scale`` in the
    Frobenius norm (``scale`` None: its own norm), in at most ``max_power_iter``
    power iterations. ``full`` gathers ``A`` on the client and takes a dense
    LAPACK SVD: a reference for small problems only.
    """
    n1, n2 = A.shape
    k = int(max(1, min(k, n1, n2)))
    if not full and rtol is not None:
        return _complete_svt(
            A,
            tau,
            k,
            n_oversamples=n_oversamples,
            n_power_iter=n_power_iter,
            rng=rng if rng is not None else np.random.default_rng(),
            warm_start=warm_start,
            timed=timed,
            probes=probes,
            first_product=first_product,
            rtol=rtol,
            max_power_iter=max_power_iter,
            scale=scale,
        )
    if full:
        with _ctx(timed, "svt: gather A (full SVD)"):
            (Ad,) = dask.compute(A)
        U, s, Vt = sla.svd(
            np.asarray(Ad),
            full_matrices=False,
            check_finite=False,
            lapack_driver="gesdd",
        )
        trusted = s.shape[0]
    else:
        U, s, Vt = randomized_partial_svd(
            A,
            k,
            n_oversamples=n_oversamples,
            n_power_iter=n_power_iter,
            rng=rng if rng is not None else np.random.default_rng(),
            warm_start=warm_start,
            timed=timed,
            probes=probes,
            first_product=first_product,
        )
        trusted = min(k, s.shape[0])
    keep = int(np.count_nonzero(s[:trusted] > tau))
    return SVTResult(
        U=np.ascontiguousarray(U[:, :keep]),
        s=s[:keep] - tau,
        Vt=np.ascontiguousarray(Vt[:keep]),
        sigma=s,
        n_above=keep,
        k=trusted,
        V_trusted=np.ascontiguousarray(Vt[:trusted]),
    )


def _complete_svt(
    A,
    tau,
    k,
    *,
    n_oversamples,
    n_power_iter,
    rng,
    warm_start,
    timed,
    probes,
    first_product,
    rtol,
    max_power_iter,
    scale=None,
) -> SVTResult:
    """``SVT_τ(A)`` from a randomized partial SVD that is grown and iterated until it is
    sure.

    A partial SVD of ``k`` trusted triplets can only threshold correctly if it holds
    every singular value above ``τ``, and its estimates are lower bounds that are least
    accurate next to ``τ``, where the singular values of the inexact-ALM argument crowd
    (the multiplier's part outside L has singular values up to ``τ``). So:

    * **complete** — while no trusted estimate lies below ``τ`` (every computed value
      may be one of many above it), the probe block is grown at once, in this call, to
      twice the trusted triplets, and by at least a twentieth of ``min(n1, n2)`` (plus
      the oversampling), its first columns the right vectors found so far; the next
      iteration's prediction (:func:`predict_rank`) then starts from there. Once the
      block would reach a quarter of ``min(n1, n2)`` the growth starts, once per call,
      from the eigenvectors of the small side's Gram matrix (:func:`_gram_start`), which
      also count the values above ``τ``: where hundreds of values crowd above it (the
      first iteration on the Candès problems) a block that large stalls in power
      iterations;
    * **accurate** — the estimate stands once its error is sure to be at most
      ``rtol · scale`` in the Frobenius norm (``scale`` None: the estimate's own
      norm), by either of two tests. The residual ``R = A V − U S`` of the kept
      triplets bounds it: they are exact triplets of ``A − R Vᵀ`` (``Aᵀ U = V S``
      holds by construction), and the thresholding is non-expansive, so the
      thresholded matrix is off by at most ``‖R‖_F`` (given the completeness above).
      ``A V`` costs one pass, which is the next power iteration's first product when
      the test fails. Or, after at least ``n_power_iter`` power iterations, two
      successive estimates differ by at most the bound: the change of one step
      measures the error of the older estimate as well as the convergence is fast
      (values that crowd at both sides of ``τ`` converge fast, Rayleigh–Ritz
      separates them), and costs no pass. Power iterations stop at
      ``max_power_iter`` (logged).

    Passes over ``A``: 1 for ``A Ω`` (0 with ``first_product``) and 1 for ``Aᵀ Q``,
    then 2 per power iteration and 1 for the last estimate's residual when that test
    ended it (``n_residual``; none when no value is kept: the thresholded matrix is
    then zero); a growth starts again with a new ``A Ω`` (2 passes), a
    growth from ``AᵀA`` takes one more (``n_gram``).
    """
    n1, n2 = A.shape
    n_max = min(n1, n2)
    l = int(min(k + n_oversamples, n_max))
    Om = probes if probes is not None else probe_matrix(n2, l, rng, warm_start)
    estimates = ritz_estimates(A, Om, timed=timed, first_product=first_product)
    prev, n_power, n_restarts, n_gram, gram_used = None, 0, 0, 0, False
    n_residual = 0
    while True:
        U, s, Vt, AV = next(estimates)
        trusted = min(k, s.shape[0])
        keep = int(np.count_nonzero(s[:trusted] > tau))
        if keep == trusted < n_max:  # no trusted value below τ: grow now
            estimates.close()
            # by blocks of at least a twentieth of the small side (a rank that jumps is
            # found in one or two growths, not in doublings from one)
            k = int(min(max(2 * k, k + math.ceil(GROWTH * n_max), keep + 1), n_max))
            l = int(min(k + n_oversamples, n_max))
            if not gram_used and GRAM_FRACTION * n_max <= l:
                k, estimates, n_gram = _gram_start(A, tau, n_oversamples, timed)
                gram_used = True
            else:
                Om = probe_matrix(n2, l, rng, Vt.T)
                estimates = ritz_estimates(A, Om, timed=timed)
            prev, n_restarts = None, n_restarts + 1
            continue
        now = (U[:, :keep], s[:keep] - tau, Vt[:keep])
        bound = rtol * (_factor_norm(now) if scale is None else scale)
        if (
            n_power >= n_power_iter
            and prev is not None
            and _factor_distance(prev, now) <= bound
        ):
            break
        if keep == 0:  # nothing kept: the thresholded matrix is zero, exactly
            break
        # A V, the next power iteration's first product, bounds the error at once
        residual = np.linalg.norm(AV()[:, :keep] - U[:, :keep] * s[:keep])
        n_residual = 1
        if residual <= bound:
            break
        if n_power >= max_power_iter:
            logger.info(
                "svt: the residual of the thresholded matrix is still %.1e after %d "
                "power iterations (rtol %.1e)",
                residual,
                n_power,
                rtol,
            )
            break
        # the next estimate follows a power iteration, which began with that A V
        prev, n_power, n_residual = now, n_power + 1, 0
    estimates.close()
    return SVTResult(
        U=np.ascontiguousarray(now[0]),
        s=now[1],
        Vt=np.ascontiguousarray(now[2]),
        sigma=s,
        n_above=keep,
        k=trusted,
        V_trusted=np.ascontiguousarray(Vt[:trusted]),
        n_power=n_power,
        n_restarts=n_restarts,
        n_gram=n_gram,
        n_residual=n_residual,
    )


#: the grown partial SVD's block, as a fraction of the small side, from which the Gram
#: matrix of the small side is cheaper than subspace iteration: the client then holds
#: at least half its entries as factors anyway, and a block that large converges slowly
#: where the values crowd at the threshold
GRAM_FRACTION = 0.25
#: the least growth of the partial SVD within a call, as a fraction of the small side
GROWTH = 0.05


def _gram_start(A: da.Array, tau: float, n_oversamples: int, timed):
    """Ritz estimates started from the eigenvectors of the small side's Gram matrix.

    ``AᵀA`` (or ``AAᵀ`` when ``A`` is wide or square) is reduced blockwise on the
    cluster and decomposed on the client; its eigenvalues count the singular values
    above ``τ`` and its leading eigenvectors span the block. Squaring loses the small
    singular values (to ``ε σ₁²`` absolutely), so these only start the subspace
    iteration, which then makes sure as from any probe block. Passes over ``A``: the
    Gram, then (tall ``A``) the first ``A Ω``; the left eigenvectors of a wide or
    square ``A`` are the first range itself (so a square ``A`` takes the left side).
    """
    n1, n2 = A.shape
    n_max = min(n1, n2)
    with _ctx(timed, "svt: Gram"):
        (G,) = dask.compute(A.T @ A if n2 < n1 else A @ A.T)
    w, vecs = sla.eigh(G, check_finite=False, driver="evd")
    above = int(np.count_nonzero(w > tau * tau))
    k = int(min(above + 1, n_max))
    basis = np.ascontiguousarray(vecs[:, ::-1][:, : int(min(k + n_oversamples, n_max))])
    if n2 < n1:  # the right vectors probe: one pass more than a growth's two
        return k, ritz_estimates(A, basis, timed=timed), 1
    return k, ritz_estimates(A, None, timed=timed, first_range=basis), 0


def _factor_norm(f) -> float:
    return float(np.linalg.norm(f[1]))


def _factor_distance(a, b) -> float:
    """``‖D‖_F`` of ``D = U_a S_a V_aᵀ − U_b S_b V_bᵀ`` from the factors, without
    cancellation.

    With ``V_a`` orthonormal, ``D`` splits into ``D V_a`` and ``D (I − V_a V_aᵀ)``,
    whose norms add in squares: ``D V_a = U_a S_a − U_b S_b C`` (``C = V_bᵀ V_a``) and,
    ``U_b`` being orthonormal, ``‖D (I − V_a V_aᵀ)‖ = ‖S_b (V_bᵀ − C V_aᵀ)‖``. Both
    differences are taken entrywise, as QRs of ``[U_a U_b]`` and ``[V_a V_b]`` would
    take them, with matrix products only (those QRs would cost as much as the rest of
    a power iteration on the client).
    """
    C = b[2] @ a[2].T
    left = a[0] * a[1] - (b[0] * b[1]) @ C
    right = b[1][:, None] * (b[2] - C @ a[2])
    return math.hypot(np.linalg.norm(left), np.linalg.norm(right))


def predict_rank(
    n_above: int,
    k: int,
    n_max: int,
    *,
    growth: float = 0.05,
    n_min_dim: int | None = None,
) -> int:
    """Number of singular triplets to ask for at the next iteration (Lin, Chen & Ma
    2010).

    If fewer than ``k`` values cleared the threshold the rank is known: ask for one
    more than were found. If all ``k`` did, the rank may be larger: grow, by doubling
    but by at most ``growth · min(n1, n2)`` (the 5 % step of Lin et al.), so a
    rank-100 problem on a 20,000 × 20,000 matrix is not made to compute 1,000
    vectors.
    """
    if n_above < k:
        return int(min(n_above + 1, n_max))
    step = max(k, 10)
    if n_min_dim is not None:
        step = min(step, max(1, int(round(growth * n_min_dim))))
    return int(min(k + step, n_max))


def spectral_norm_estimate(
    M: da.Array,
    *,
    rng: np.random.Generator,
    n_vectors: int = 8,
    n_power_iter: int = 3,
    timed=None,
) -> float:
    """Estimate of ``‖M‖₂`` (largest singular value) by randomized subspace iteration.

    A lower bound that is accurate to a few per cent on matrices whose top singular value is
    not isolated. Passes over ``M``: ``2 + 2 · n_power_iter``.
    """
    _, s, _ = randomized_partial_svd(
        M,
        1,
        n_oversamples=n_vectors - 1,
        n_power_iter=n_power_iter,
        rng=rng,
        timed=timed,
    )
    return float(s[0]) if s.size else 0.0


def _lowrank_block(us, vt):
    return us @ vt


def low_rank_from_factors(
    U: np.ndarray, s: np.ndarray, Vt: np.ndarray, chunks
) -> da.Array:
    """Lazy ``U diag(s) Vt`` in the 2-D block layout ``chunks``; each block is formed
    alone.

    Memory per task: one output block plus its row slice of ``U`` and column slice of
    ``Vt``.
    """
    r = s.shape[0]
    rows, cols = chunks
    n1, n2 = sum(rows), sum(cols)
    if r == 0:
        return da.zeros((n1, n2), chunks=chunks, dtype=np.float64)
    Us = da.from_array(np.ascontiguousarray(U * s), chunks=(rows, r))
    Vd = da.from_array(np.ascontiguousarray(Vt), chunks=(r, cols))
    return da.blockwise(
        _lowrank_block,
        "ij",
        Us,
        "ik",
        Vd,
        "kj",
        dtype=np.float64,
        concatenate=True,
        meta=np.empty((0, 0), dtype=np.float64),
    )


def regular_layout(shape, block: int) -> tuple:
    """Regular 2-D chunks of edge at most ``block``."""
    return tuple(
        tuple([block] * (n // block) + ([n % block] if n % block else [])) or (n,)
        for n in shape
    )


def square_blocks(
    shape, *, target_elems: int = 2**22, min_blocks_per_dim: int = 2
) -> tuple:
    """A regular 2-D block layout of about ``target_elems`` entries per block."""
    edge = int(math.sqrt(target_elems))
    out = []
    for n in shape:
        b = min(edge, n)
        if n >= 512 and math.ceil(n / b) < min_blocks_per_dim:
            b = math.ceil(n / min_blocks_per_dim)
        out.append(b)
    return tuple(regular_layout((n,), b)[0] for n, b in zip(shape, out, strict=True))
