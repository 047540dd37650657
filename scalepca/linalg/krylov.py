"""Block Krylov eigensolver on the centred Gram operator, one pass over the data per
product.

For data ``X`` (n × d) in row blocks ``x_b`` with column means ``μ``, the centred Gram
operator ``A V = Xcᵀ Xc V`` is formed block by block::

    A V = Σ_b (x_b − 1 μᵀ)ᵀ ((x_b − 1 μᵀ) V)

both products inside the task that holds the block (the n_b × l intermediate never
leaves it); only d × l partials are summed, in a tree. One read of the data is one
application of ``A``. The first read also gathers the column moments: each block is
centred by its own mean and its partial ``Gᵇ V`` (``Gᵇ`` the block-centred Gram) merged
with the parallel update of Chan et al., ``G V = Gᵃ V + Gᵇ V + w δ (δᵀ V)``, exactly as
the covariance pass merges the Gram itself — so the mean costs no pass of its own.

:func:`block_krylov_eigh` runs block Lanczos with full reorthogonalisation on the
products: block ``j + 1`` is ``A Q_j`` made orthogonal to every earlier block (twice,
classical Gram–Schmidt), and the Rayleigh–Ritz step takes the whole basis
``Q = [Q_0 … Q_j]``, whose products ``W = A Q`` are all known: ``H = Qᵀ W``, its
eigenpairs ``(θ, s)``, Ritz vectors ``Q s`` and their residuals ``‖W s − θ Q s‖``
without another read. Those residuals bound the error (for a symmetric operator some
eigenvalue lies within ``r`` of ``θ``, and ``sin ∠ ≤ r / gap``), so a tolerance stops at
the first pass that meets it.

Dense blocks are centred slab by slab before the products (no cancellation however large
|μ| is); ``scipy.sparse`` blocks stay sparse and are centred implicitly,
``xᵀ (x V − 1 μᵀV) − μ 1ᵀ(…)``. Float32 dense blocks are multiplied in float32 (slabs
centred in float64 then rounded once) with float64 sums when ``precision="auto"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import dask.array as da
import numpy as np
from scipy import linalg as sla

from .._validation import full_rows
from . import passes
from .moments import (
    block_moments,
    gram_precision,
    merge_centred_product,
    merge_moments,
    merged_mean,
)
from .packed import PackedRows, packed_gram_times
from .scaling import ColumnScaling

__all__ = [
    "START_COND",
    "KrylovResult",
    "block_krylov_eigh",
    "gram_times",
    "moments_and_gram_times",
    "row_panels",
    "scaled_start",
]

#: largest row panel (rows × all features) a Gram-operator task reads at once; 2-D
#: chunked dense data are regrouped into panels of at most this size
PANEL_BYTES = 256 * 2**20

#: bytes of one centred float64 slab inside a task (the rows multiplied at a time)
SLAB_BYTES = 16 * 2**20


def row_panels(X: da.Array, panel_bytes: int = PANEL_BYTES) -> da.Array:
    """``X`` as row panels (all features in one chunk), each at most ``panel_bytes``
    when the rows allow it. Sparse arrays keep their row blocks (their size is their
    stored values)."""
    return full_rows(X, panel_bytes)


def _is_sparse_block(x) -> bool:
    import scipy.sparse

    return scipy.sparse.issparse(x)


def _fill_sparse(x, shift):
    """A CSR block with its stored NaN set to their column's ``shift`` (0 once
    centred)."""
    missing = np.isnan(x.data)
    if not missing.any():
        return x
    x = x.copy()
    x.data[missing] = shift[x.indices[missing]]
    return x


def _block_gram_times(
    x, V: np.ndarray, shift, precision: str, fill: bool = False
) -> np.ndarray:
    """``(x − 1 shiftᵀ)ᵀ (x − 1 shiftᵀ) V`` of one row block (``shift`` None:
    uncentred). ``fill``: a NaN entry is a missing value set to its column's
    ``shift`` (0 once centred)."""
    d, l = V.shape
    if _is_sparse_block(x):
        if fill:
            x = _fill_sparse(x, shift)
        y = np.asarray(x @ V)
        if shift is None:
            return np.asarray(x.T @ y)
        y -= shift @ V
        out = np.asarray(x.T @ y)
        for j, total in enumerate(y.sum(axis=0)):  # − shift (1ᵀy), no d × l temporary
            out[:, j] -= total * shift
        return out
    x = np.asarray(x)
    n = x.shape[0]
    out = np.zeros((d, l))
    if n == 0:
        return out
    f32 = x.dtype == np.float32 and precision == "auto"
    Vp = V.astype(np.float32) if f32 else V
    step = max(1, min(n, SLAB_BYTES // (8 * max(d, 1))))
    buf = np.empty((step, d))
    buf32 = np.empty((step, d), dtype=np.float32) if f32 else None
    for start in range(0, n, step):
        rows = min(step, n - start)
        c = buf[:rows]
        if shift is None:
            c[...] = x[start : start + rows]
        else:
            np.subtract(x[start : start + rows], shift, out=c, dtype=np.float64)
            if fill:
                np.copyto(c, 0.0, where=np.isnan(c))
        # centred in float64, rounded once, multiplied in float32, summed in float64
        if f32:
            c = buf32[:rows]
            c[...] = buf[:rows]
        out += c.T @ (c @ Vp)
    return out


def _first_block(x, V: np.ndarray, precision: str) -> dict:
    """The first pass's partial of one row block: its column moments
    (:func:`~scalepca.linalg.moments.block_moments`, no Gram), ``GV``, its
    block-centred Gram times ``V``, and ``muV = meanᵀ V`` (for the merge); non-finite
    entries are counted and taken as 0."""
    mom = block_moments(x, with_gram=False)
    if mom["bad"]:
        if _is_sparse_block(x):
            x = x.copy()
            x.data[~np.isfinite(x.data)] = 0.0
        else:
            x = np.where(np.isfinite(x), x, 0.0)
    mom["GV"] = _block_gram_times(x, V, mom["mean"], precision)
    mom["muV"] = mom["mean"] @ V
    return mom


def _merge_gram_times(a: dict, b: dict, *, owned: bool = False) -> dict:
    """Merge two first-pass partials: moments by Chan's update, ``GV`` by the same
    update applied to the product, ``GVᵃ + GVᵇ + w δ (δᵀ V)`` with
    ``δᵀV = muVᵇ − muVᵃ`` (``owned``: ``a["GV"]`` was made by an earlier merge and is
    summed into in place)."""
    na, nb = a["n"], b["n"]
    gv = a["GV"] if owned else a["GV"].copy()
    out = merge_moments(a, b)
    means, muV = (a["mean"], b["mean"]), (a["muV"], b["muV"])
    merge_centred_product(gv, b["GV"], means, muV, na, nb)
    out["muV"] = merged_mean(*muV, na, nb)
    out["GV"] = gv
    return out


def _merge_gram_times_all(parts: list) -> dict:
    """The partials of consecutive blocks merged left to right into one new ``GV``."""
    acc = parts[0]
    for i, p in enumerate(parts[1:]):
        acc = _merge_gram_times(acc, p, owned=i > 0)
    return acc


def _blocks(X: da.Array) -> list:
    """The row panels of ``X`` as ``Delayed`` objects (reads fused into them)."""
    return X.to_delayed(optimize_graph=True).ravel().tolist()


def moments_and_gram_times(
    X: da.Array, V: np.ndarray, *, precision: str | None = None, split_every: int = 8
) -> dict:
    """One pass: the column moments of ``X`` (``n``, ``mean``, ``ss``, ``bad``,
    ``nan_features`` as :func:`~scalepca.linalg.moments.column_moments_graph` gives
    them) and ``GV``, the centred Gram ``Xcᵀ Xc`` times ``V`` (d × l). ``X`` is read
    as row panels."""
    Vd = passes.shared(
        np.ascontiguousarray(V, dtype=np.float64)
    )  # one key for every task
    graph = passes.reduce_blocks(
        _blocks(row_panels(X)),
        _first_block,
        None,
        Vd,
        gram_precision(precision),
        split_every=split_every,
        merge_all=_merge_gram_times_all,
    )
    (out,) = passes.compute(graph, name="moments+gram")
    out.pop("muV")
    return out


def gram_times(
    X: da.Array | PackedRows,
    V: np.ndarray,
    mean: np.ndarray | None,
    *,
    precision: str | None = None,
    split_every: int = 8,
    scaling: ColumnScaling | None = None,
) -> np.ndarray:
    """One pass: ``(X − 1 meanᵀ)ᵀ (X − 1 meanᵀ) V`` (d × l; ``mean`` None: uncentred),
    each row panel's two products in one task, the d × l partials summed in a tree.

    ``scaling`` (``mean`` then None): the product of ``Z = (X − 1 centreᵀ) D⁻¹``
    instead, ``Zᵀ Z V``, its missing entries at the centre when it fills them; the
    centre and the missing entries are taken in the task, the scale ``D`` on the client
    (the blocks are never divided). ``X`` may then be packed row blocks, read straight
    into the products (:func:`~scalepca.linalg.packed.packed_gram_times`)."""
    if scaling is not None:
        if mean is not None:
            raise TypeError("give the centre as mean or in scaling, not both")
        if isinstance(X, PackedRows):
            return packed_gram_times(X, V, scaling, split_every=split_every)
        scale = scaling.scale[:, None]
        out = _gram_times(
            X, V / scale, scaling.centre, precision, split_every, scaling.fill
        )
        return out / scale
    return _gram_times(X, V, mean, precision, split_every, False)


def _gram_times(X, V, mean, precision, split_every, fill):
    Vd = passes.shared(np.ascontiguousarray(V, dtype=np.float64))
    shift = None if mean is None else passes.shared(np.asarray(mean, dtype=np.float64))
    graph = passes.reduce_blocks(
        _blocks(row_panels(X)),
        _block_gram_times,
        None,
        Vd,
        shift,
        gram_precision(precision),
        fill,
        split_every=split_every,
        merge_all=passes.sum_parts,
    )
    (out,) = passes.compute(graph, name="gram")
    return out


# -- the eigensolver -------------------------------------------------------------------
@dataclasses.dataclass
class KrylovResult:
    """Leading Ritz pairs of the operator: ``values`` (k, descending), ``vectors`` (d
    × k, orthonormal), ``residuals`` ``‖A v − θ v‖`` per pair, and the products made
    (``n_products``, one pass each); with ``keep_basis``, the whole Krylov ``basis``
    (d × m, orthonormal) and its ``products`` ``A basis`` (for quantities of the
    operator on the whole subspace, such as MCA's captured squared covariance)."""

    values: np.ndarray
    vectors: np.ndarray
    residuals: np.ndarray
    n_products: int
    basis: np.ndarray | None = None
    products: np.ndarray | None = None


def _orthonormal_columns(Z: np.ndarray, floor: float):
    """An orthonormal basis of the columns of ``Z`` whose singular values exceed
    ``floor``, from the small Gram ``ZᵀZ`` (products only: no d × b SVD or QR on the
    client, where BLAS threads share the cores with the workers). Returns
    ``(U, rank)``."""
    w, W = np.linalg.eigh(Z.T @ Z)
    good = w > floor**2
    U = Z @ (W[:, good] / np.sqrt(w[good]))
    return U, int(good.sum())


def start_block(rng: np.random.Generator, d: int, b: int) -> np.ndarray:
    """``b`` orthonormal Gaussian columns of length ``d``, a start block whose
    product needs no ``R⁻¹``; the identity when ``b >= d`` (the whole space: the
    operator itself, which rounds least)."""
    if b >= d:
        return np.eye(d)
    return np.linalg.qr(rng.standard_normal((d, b)))[0]


#: largest condition number of a standardised start block ``D Ω`` the solver
#: orthonormalises (its product loses about ``ε · cond`` relative accuracy); above it
#: the first product, ``A D Ω``, is orthonormalised and multiplied again instead (one
#: product of the budget: the first pass then acts as one step of subspace iteration)
START_COND = 1e3


def scaled_start(V0: np.ndarray, AV0: np.ndarray, apply, *, exact: bool = True):
    """The orthonormal start block ``Q0``, its product ``A Q0`` and the products it
    spent, from a start block ``V0`` (``D Ω``: orthonormal probes ``Ω`` scaled by the
    standardising ``D``) whose product ``A V0`` a first pass made: ``Q0 R = V0`` and
    ``A Q0 = A V0 R⁻¹``, no product spent. When ``R`` is ill-conditioned (above
    :data:`START_COND`: scales far apart), or ``A V0`` is the product of a nearby
    operator only (not ``exact``), the start is that product orthonormalised and
    multiplied once more by ``apply``: one product spent."""
    Q0, R = np.linalg.qr(V0)
    if exact and np.linalg.cond(R) <= START_COND:
        return Q0, sla.solve_triangular(R, AV0.T, trans="T").T, 0
    Q0 = np.linalg.qr(AV0)[0]
    return Q0, apply(Q0), 1


def _next_block(Q: np.ndarray, Z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``Z`` made orthonormal and orthogonal to the columns of ``Q`` (Gram–Schmidt
    twice, then an orthonormalisation from the block's Gram, twice — CholeskyQR2's
    accuracy); directions lost to rank deficiency are replaced by random ones, so the
    basis keeps growing."""
    d = Q.shape[0]
    width = min(Z.shape[1], d - Q.shape[1])
    if width <= 0:
        return Z[:, :0]
    Z = Z[:, :width]
    scale = max(np.linalg.norm(Z, axis=0).max(initial=0.0), np.finfo(float).tiny)
    for _ in range(2):
        Z = Z - Q @ (Q.T @ Z)
    U, rank = _orthonormal_columns(Z, 1e-7 * scale)
    if rank < width:  # fill up with random directions orthogonal to everything so far
        R = rng.standard_normal((d, width - rank))
        B = np.hstack([Q, U])
        for _ in range(2):
            R = R - B @ (B.T @ R)
        U = np.hstack([U, R])
    for _ in range(2):  # the second round restores orthogonality to rounding
        U = U - Q @ (Q.T @ U)
        U, _ = _orthonormal_columns(U, 0.0)
    return U


def _rayleigh_ritz(Q: np.ndarray, W: np.ndarray, k: int):
    """The top ``k`` Ritz values, vectors and residual norms over the basis ``Q`` (d
    × m, orthonormal) with ``W = A Q``."""
    # the symmetric case only: the range finder's Rayleigh–Ritz of a rectangular
    # operator is an SVD (linalg.rangefinder.rayleigh_ritz says why it stays one)
    H = Q.T @ W
    H = (H + H.T) / 2
    m = H.shape[0]
    k = min(k, m)
    theta, S = sla.eigh(H, subset_by_index=[m - k, m - 1], check_finite=False)
    theta, S = theta[::-1], S[:, ::-1]
    vectors = Q @ S
    residuals = np.linalg.norm(W @ S - vectors * theta, axis=0)
    return theta, vectors, residuals


def block_krylov_eigh(
    apply: Callable[[np.ndarray], np.ndarray],
    Q0: np.ndarray,
    AQ0: np.ndarray,
    k: int,
    *,
    max_products: int,
    tol: float = 0.0,
    rng: np.random.Generator,
    on_product: Callable[[int, np.ndarray], None] | None = None,
    keep_basis: bool = False,
) -> KrylovResult:
    """Top-``k`` eigenpairs of a symmetric operator (the ``k`` algebraically largest: a
    positive semi-definite Gram, or the indefinite dilation ``[[0, C], [Cᵀ, 0]]`` whose
    top eigenvalues are the singular values of ``C``) by block Lanczos with full
    reorthogonalisation and Rayleigh–Ritz over the whole basis.

    ``Q0`` (d × b, orthonormal) is the start block and ``AQ0`` its product (made by the
    caller, e.g. in a pass that also gathered the moments); ``apply(V)`` returns ``A V``
    (one pass). At most ``max_products`` products are made in all (counting ``AQ0``);
    with ``tol > 0`` the solver stops at the first product after which every one of the
    ``k`` residuals is at most ``tol`` times its Ritz value (relative residual; the
    eigenvalue then has relative error ``≤ tol`` and in practice ``≈ tol² λ/gap``). A
    basis that reaches ``d`` columns is the whole space: the pairs are exact.
    ``on_product(j, residuals)`` is called after each product; ``keep_basis`` returns
    the basis and its products too.

    Client memory: the basis and its products, 2 × d × (products · b) floats.
    """
    d, b = Q0.shape
    # the basis and its products fill preallocated arrays (no copy of the basis per
    # step)
    width = min(d, b * max_products)
    Qa, Wa = np.empty((d, width)), np.empty((d, width))
    Qa[:, :b], Wa[:, :b] = Q0, AQ0
    m, last, n = b, slice(0, b), 1
    while True:
        Q, W = Qa[:, :m], Wa[:, :m]
        theta, vectors, res = _rayleigh_ritz(Q, W, k)
        if on_product is not None:
            on_product(n, res)
        met = tol > 0 and bool(np.all(res <= tol * np.maximum(theta, 0.0)))
        done = met or n >= max_products or m >= width
        if not done:
            nxt = _next_block(Q, Wa[:, last], rng)[:, : width - m]
            done = nxt.shape[1] == 0
        if done:
            kept = (Q, W) if keep_basis else (None, None)
            return KrylovResult(theta, vectors, res, n, *kept)
        last = slice(m, m + nxt.shape[1])
        Qa[:, last] = nxt
        Wa[:, last] = apply(nxt)
        m, n = last.stop, n + 1
