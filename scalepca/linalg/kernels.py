"""Kernel blocks, Nyström / random Fourier feature maps, landmark sampling, exact kernel
spectra.

Everything that touches the data is a blockwise map over row chunks or a small gather:

- :func:`kernel_block` evaluates ``k(x, y)`` for two in-memory row blocks (float64).
- ``_nystroem_block`` and ``_rff_block`` map in-memory rows to their Nyström / random
  Fourier features; the fit reduces their moments slab by slab inside each row block's
  task (:func:`scalepca.linalg.moments.feature_block_moments`), so no feature matrix is
  formed.
- :func:`project_features` fuses a feature map with a projection on k directions,
  working through each row block in sub-batches, so ``transform`` never holds an n_block
  × m block larger than a fixed budget. The model builds the feature map once, as a
  value (:class:`KernelRows`, :class:`CentredKernelRows`, :class:`NystroemFeatures`,
  :class:`FourierFeatures`: its block ``width``, its ``features`` and its
  ``project`` map), and looks its kernel up once in :data:`KERNELS`: nothing here
  compares a kernel's or an approximation's name.
- :func:`gather_rows` collects the rows of a given set of indices (m × d) from the
  chunks that hold them; nothing else of ``X`` reaches the client.
- :func:`preimage_stats_graph` reduces the sufficient statistics of the pre-image ridge
  (``Σ φ(z)ᵀφ(z)`` and ``Σ φ(z)ᵀx`` over the training rows, with ``z`` their scores) in
  one pass; :func:`preimage_map` maps scores back to the inputs blockwise.
- :func:`kernel_matrix` builds an n × n kernel as a blockwise dask array (exact kernel
  PCA of small n), and :func:`centred_kernel_eigh` finds its top eigenpairs after double
  centring, by Lanczos (ARPACK) or randomized subspace iteration, with matrix products
  on the blocks.

Row blocks of the data may be ``scipy.sparse`` CSR matrices (sparse input, see
:func:`scalepca._validation.as_csr_blocks`): they are never densified. Kernel values
against dense landmarks / training rows come from sparse–dense products ``x Lᵀ`` and,
for the RBF kernel, the squared row norms summed over the stored values; random Fourier
features from ``x W``. Only the results (rows × m, dense) and the small arrays beside
them are dense.

Kernels (``gamma`` already resolved, ``> 0``)::

    rbf      exp(−γ ‖x − y‖²)
    poly     (γ xᵀy + coef0)^degree
    sigmoid  tanh(γ xᵀy + coef0)
    linear   xᵀy
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import dask
import dask.array as da
import numpy as np
from scipy import linalg as sla
from scipy.sparse import issparse
from scipy.sparse.linalg import LinearOperator, eigsh

from .decomp import eigh_descending
from .passes import reduce_rows
from .sparse import merge_code_stats

__all__ = [
    "KERNELS",
    "CentredKernelRows",
    "FourierFeatures",
    "KernelRows",
    "NystroemFeatures",
    "as_rows64",
    "centred_kernel_eigh",
    "lanczos_top",
    "subspace_top",
    "gather_rows",
    "kernel_block",
    "kept_columns",
    "kernel_matrix",
    "kmeans_plusplus_landmarks",
    "nystroem_normalization",
    "preimage_map",
    "project_rows",
    "preimage_stats_graph",
    "project_features",
    "rff_weights",
]

#: default budget of one n_block × m kernel/feature block inside a task (bytes, float64)
BLOCK_BYTES = 64 * 2**20


# -- kernels of two row blocks ---------------------------------------------------------
def as_rows64(x):
    """A row block in float64: a ``scipy.sparse`` block stays sparse (CSR), anything
    else becomes a NumPy array. No copy when it already is one."""
    if issparse(x):
        return x.tocsr().astype(np.float64, copy=False)
    return np.asarray(x, dtype=np.float64)


def _squared_norms(x) -> np.ndarray:
    """``‖x_i‖²`` of every row (a sparse block: over its stored values only)."""
    if issparse(x):
        return np.asarray(x.multiply(x).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", x, x)


def _dense_product(x, y) -> np.ndarray:
    """``x yᵀ`` as a writable float64 NumPy array (either operand may be sparse)."""
    K = x @ y.T
    K = K.toarray() if issparse(K) else np.asarray(K)
    return np.require(K, dtype=np.float64, requirements=["C", "W"])


def _linear(K, x, y, gamma, degree, coef0):
    return K


def _rbf(K, x, y, gamma, degree, coef0):
    K *= -2.0
    K += _squared_norms(x)[:, None]
    K += _squared_norms(y)[None, :]
    np.maximum(K, 0.0, out=K)
    K *= -gamma
    np.exp(K, out=K)
    return K


def _poly(K, x, y, gamma, degree, coef0):
    K *= gamma
    K += coef0
    if degree == 1:
        return K
    if degree == 2:
        np.multiply(K, K, out=K)
        return K
    np.power(K, degree, out=K)
    return K


def _sigmoid(K, x, y, gamma, degree, coef0):
    K *= gamma
    K += coef0
    np.tanh(K, out=K)
    return K


#: the kernels by name: each turns ``K = x yᵀ`` (float64, writable) into ``k(x, y)`` in
#: place, given the blocks and ``gamma, degree, coef0``. The model looks its kernel up
#: here once; the functions below take the function, never the name.
KERNELS = {"rbf": _rbf, "poly": _poly, "sigmoid": _sigmoid, "linear": _linear}


def kernel_block(x, y, *, kernel, gamma: float, degree: int = 3, coef0: float = 1.0):
    """``K[i, j] = k(x_i, y_j)`` for in-memory blocks ``x`` (a × d) and ``y`` (b × d),
    float64; ``kernel`` is one of :data:`KERNELS`' functions.

    Either block may be a ``scipy.sparse`` matrix: ``xᵀy`` is then a sparse–dense (or
    sparse–sparse) product and ``‖x‖²`` a sum over the stored values, so a sparse block
    is never densified; the result is a dense a × b array.

    The RBF kernel uses ``‖x‖² + ‖y‖² − 2 xᵀy`` (one BLAS product), clipped at 0 against
    rounding, and is exponentiated in place: the only a × b array is the result.
    """
    x = as_rows64(x)
    y = as_rows64(y)
    return kernel(_dense_product(x, y), x, y, gamma, degree, coef0)


def _rows_per_batch(width: int, budget: int = BLOCK_BYTES) -> int:
    return max(1, budget // (8 * max(1, width)))


# -- Nyström ---------------------------------------------------------------------------
def nystroem_normalization(K_LL: np.ndarray, *, rtol: float = 1e-10):
    """``K_LL^{-½}`` restricted to its numerically positive eigen-directions.

    With ``K_LL = U diag(s) Uᵀ`` (descending), directions with ``s_j ≤ rtol · s_1``
    are dropped (a pseudo-inverse: the floor on tiny eigenvalues) and the symmetric
    ``N = U_r diag(s_r)^{-½} U_rᵀ`` (m × m, rank r) is returned with the kept
    eigenvalues. Then ``φ(x) = k(x, L) N`` has ``φ(x)ᵀφ(y) = k(x, L) K_LL⁺ k(L, y)``,
    the Nyström approximation of ``k(x, y)``. The symmetric root, unlike
    ``U_r diag(s_r)^{-½}``, does not depend on the signs (or, for close eigenvalues,
    the rotation) LAPACK gives the eigenvectors, so the feature coordinates, and the
    sign convention taken in them, are the same on every machine and for every memory
    layout of the landmarks.
    """
    s, U = eigh_descending(np.asarray(K_LL, dtype=np.float64))
    top = s.max(initial=0.0)  # a non-positive top is refused below
    if not top > 0:
        raise ValueError(
            "the kernel matrix of the landmarks has no positive eigenvalue; the "
            "kernel is degenerate on these data (check gamma / coef0)"
        )
    keep = s > rtol * top
    U_r = U[:, keep]
    return (U_r / np.sqrt(s[keep])) @ U_r.T, s[keep]


def kept_columns(x, keep: np.ndarray | None):
    """The columns ``keep`` of a row block, after checking that every other column is
    NaN in every row of it (features left out of a fit because they are NaN in every
    sample).

    Raises ``ValueError`` otherwise: a left-out feature that holds values has missing
    data. A sparse block stays sparse (its left-out columns must store NaN in every
    row).
    """
    if keep is None:
        return x
    if issparse(x):
        x = x.tocsr()
        out = x[:, ~keep]
        if out.nnz != out.shape[0] * out.shape[1] or not np.isnan(out.data).all():
            raise ValueError(
                "X contains NaN or infinite values: a feature that is "
                "NaN in the rows read before the pass holds values in "
                "other rows; remove or impute the missing values (only "
                "features that are NaN in every sample are left out)"
            )
        return x[:, keep]
    x = np.asarray(x)
    if not np.isnan(x[:, ~keep]).all():
        raise ValueError(
            "X contains NaN or infinite values: a feature that is NaN in the rows "
            "read before the pass holds values in other rows; remove or impute the "
            "missing values (only features that are NaN in every sample are left out)"
        )
    return x[:, keep]


def _nystroem_block(
    x, landmarks, normalization, kernel, gamma, degree, coef0, keep=None, out=None
):
    """Nyström features ``k(x, L) N`` of in-memory rows (into ``out`` when given)."""
    x = kept_columns(x, keep)
    K = kernel_block(
        x, landmarks, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0
    )
    return np.matmul(K, normalization, out=out)


# -- random Fourier features -----------------------------------------------------------
def rff_weights(n_features_in: int, m: int, gamma: float, seed):
    """Random Fourier frequencies for the RBF kernel ``exp(−γ‖x−y‖²)`` (Rahimi & Recht
    2007).

    By Bochner's theorem that kernel is the characteristic function of
    ``N(0, 2γ I)``, so with ``w ~ N(0, 2γ I)`` and ``b ~ U[0, 2π)``:
    ``E[2 cos(wᵀx + b) cos(wᵀy + b)] = k(x, y)``. Returns ``(W (d × m), b (m,))``.
    """
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n_features_in, m)) * math.sqrt(2.0 * gamma)
    b = rng.uniform(0.0, 2.0 * math.pi, size=m)
    return W, b


def _rff_block(x, W, b, keep=None, out=None):
    """Random Fourier features ``√(2/m) cos(x W + b)`` of in-memory rows (a NumPy or
    sparse block), written into ``out`` (float64, rows × m, C-ordered) when given."""
    x = as_rows64(kept_columns(x, keep))
    if issparse(x):  # sparse–dense product: scipy makes its own result
        Z = _dense_product(x, W.T)
        if out is not None:
            out[...] = Z
            Z = out
    else:
        Z = np.matmul(x, W, out=out)
    Z += b
    np.cos(Z, out=Z)
    Z *= math.sqrt(2.0 / W.shape[1])
    return Z


# -- feature maps: what transform and the pre-images map rows to -----------------------
@dataclass(frozen=True, eq=False)
class KernelRows:
    """``φ(x) = k(x, R)``: the kernel rows of ``x`` against fixed rows ``R`` (n_R × d).

    Nyström's transform (``R`` the landmarks, the normalisation folded into the
    projection) and the exact pre-image map (``R`` the training scores). ``kparams``
    are :func:`kernel_block`'s keywords (the kernel function and its parameters).
    """

    rows: np.ndarray
    kparams: dict

    @property
    def width(self) -> int:
        """Columns of the kernel block a row's features are computed from."""
        return self.rows.shape[0]

    @property
    def dim(self) -> int:
        """Columns of ``φ(x)``."""
        return self.rows.shape[0]

    def features(self, x) -> np.ndarray:
        return kernel_block(x, self.rows, **self.kparams)

    def project(self, x, P: np.ndarray) -> np.ndarray:
        """``φ(x) P``."""
        return self.features(x) @ P


@dataclass(frozen=True, eq=False)
class CentredKernelRows(KernelRows):
    """The exact transform: the kernel rows against the training rows, each centred by
    its own mean in the projection (with the dual coefficients ``P``, the training
    kernel's means are in the offset)."""

    def project(self, x, P: np.ndarray) -> np.ndarray:
        F = self.features(x)
        z = F @ P
        z -= F.mean(axis=1)[:, None] * P.sum(axis=0)[None, :]
        return z


@dataclass(frozen=True, eq=False)
class NystroemFeatures(KernelRows):
    """``φ(x) = k(x, L) N``: Nyström features on landmarks ``L`` (m × d) with the
    normalisation ``N`` (m × r) — the pre-image map's features of the scores."""

    normalization: np.ndarray

    @property
    def dim(self) -> int:
        return self.normalization.shape[1]

    def features(self, x) -> np.ndarray:
        return super().features(x) @ self.normalization


@dataclass(frozen=True, eq=False)
class FourierFeatures:
    """``φ(x) = √(2/m) cos(x W + b)``: random Fourier features (``W`` d × m, ``b``
    (m,))."""

    weights: np.ndarray
    offset: np.ndarray

    @property
    def width(self) -> int:
        return self.weights.shape[1]

    @property
    def dim(self) -> int:
        return self.weights.shape[1]

    def features(self, x) -> np.ndarray:
        return _rff_block(x, self.weights, self.offset)

    def project(self, x, P: np.ndarray) -> np.ndarray:
        return self.features(x) @ P


# -- fused feature map + projection (transform) ----------------------------------------
def project_rows(x, fmap, P, offset, budget=BLOCK_BYTES):
    """Scores ``fmap.project(x, P) − offset`` of in-memory rows ``x`` (see
    :func:`project_features`); ``x`` may be a sparse block."""
    x = as_rows64(x)
    step = _rows_per_batch(fmap.width, budget)
    out = np.empty((x.shape[0], P.shape[1]), dtype=np.float64)
    for start in range(0, x.shape[0], step):
        out[start : start + step] = fmap.project(x[start : start + step], P)
    out -= offset
    return out


def project_features(
    X: da.Array,
    fmap,
    P: np.ndarray,
    offset: np.ndarray,
    *,
    budget: int = BLOCK_BYTES,
) -> da.Array:
    """Lazy scores ``fmap.project(x, P) − offset`` (n × k), blockwise, in row
    sub-batches.

    ``fmap`` is :class:`KernelRows` on the landmarks (Nyström, ``P = N V``),
    :class:`FourierFeatures` (RFF) or :class:`CentredKernelRows` on the training rows
    (exact, ``P`` the dual coefficients). Within a task at most ``budget`` bytes of
    kernel/feature values exist at once, whatever the row chunk size.
    """
    k = P.shape[1]
    return X.map_blocks(
        project_rows,
        fmap,
        P,
        offset,
        budget,
        chunks=(X.chunks[0], (k,)),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )


# -- pre-images: a kernel ridge from scores back to the inputs -------------------------
def _preimage_chunk(x, *, projection, features, budget):
    """``{"A": Σ φ(z)ᵀφ(z), "B": Σ φ(z)ᵀx}`` of one row block, ``z`` its scores.

    Rows go in sub-batches, so the kernel rows of the projection and of ``φ`` never
    exceed ``budget`` bytes each, whatever the row chunk size.
    """
    x = as_rows64(x)
    fmap, P, offset = projection
    r = features.dim
    A = np.zeros((r, r))
    B = np.zeros((r, x.shape[1]))
    step = _rows_per_batch(max(fmap.width, features.width, x.shape[1]), budget)
    for start in range(0, x.shape[0], step):
        xb = x[start : start + step]
        F = features.features(project_rows(xb, fmap, P, offset, budget))
        A += F.T @ F
        B += (xb.T @ F).T if issparse(xb) else F.T @ xb
    return {"A": A, "B": B}


def preimage_stats_graph(
    X: da.Array,
    projection: tuple,
    features,
    *,
    budget: int = BLOCK_BYTES,
    split_every: int = 8,
):
    """Delayed ``{"A": Σ φ(z)ᵀφ(z) (r × r), "B": Σ φ(z)ᵀx (r × d)}`` over the rows of
    ``X``.

    ``z`` are the rows' scores, ``projection = (fmap, P, offset)`` as in
    :func:`project_features`; ``φ`` is the feature map ``features``
    (:class:`KernelRows`, :class:`NystroemFeatures` or :class:`FourierFeatures` of
    the scores). One pass: each row block is projected and reduced where it lives, the
    partials are summed in a tree of fan-in ``split_every``; only r × r and r × d
    arrays travel. The kernel ridge ``(A + αI) C = B`` then gives the pre-image map
    ``z ↦ φ(z) C``.
    """
    if len(X.chunks[1]) != 1:
        X = X.rechunk({1: -1})
    chunk = partial(
        _preimage_chunk, projection=projection, features=features, budget=budget
    )
    return reduce_rows(X, chunk, merge_code_stats, split_every=split_every)


def _preimage_block(z, features, C, budget):
    z = np.asarray(z, dtype=np.float64)
    out = np.empty((z.shape[0], C.shape[1]), dtype=np.float64)
    step = _rows_per_batch(max(features.width, C.shape[1]), budget)
    for start in range(0, z.shape[0], step):
        out[start : start + step] = features.features(z[start : start + step]) @ C
    return out


def preimage_map(
    Z: da.Array,
    features,
    C: np.ndarray,
    *,
    budget: int = BLOCK_BYTES,
) -> da.Array:
    """Lazy pre-images ``φ(Z) C`` (n × d) of scores ``Z`` (n × k), one block per row
    chunk.

    ``φ`` the feature map ``features`` of the scores (as in
    :func:`preimage_stats_graph`); ``C`` (r × d) the ridge coefficients. Memory per
    task: the output block plus a sub-batch of kernel values within ``budget`` bytes.
    """
    if len(Z.chunks[1]) != 1:
        Z = Z.rechunk({1: -1})
    return Z.map_blocks(
        _preimage_block,
        features,
        C,
        budget,
        chunks=(Z.chunks[0], (C.shape[1],)),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )


# -- landmarks -------------------------------------------------------------------------
def gather_rows(X: da.Array, indices: np.ndarray) -> da.Array:
    """Lazy ``X[indices]`` (sorted unique row indices): each chunk contributes only its
    rows.

    Computing it reads the chunks that hold the rows and moves ``len(indices) × d``
    values.
    """
    idx = np.unique(np.asarray(indices, dtype=np.int64))
    return X[idx]


def kmeans_plusplus_landmarks(
    sample: np.ndarray, m: int, rng: np.random.Generator, *, n_iter: int = 5
) -> np.ndarray:
    """``m`` centres from an in-memory ``sample`` by k-means++ seeding then ``n_iter``
    Lloyd steps.

    scikit-learn's k-means (``sklearn.cluster.KMeans`` with ``init="k-means++"``, one
    start, ``n_iter`` Lloyd iterations at most; ``kmeans_plusplus`` alone when
    ``n_iter=0``) seeded from ``rng``. Seeding (Arthur & Vassilvitskii 2007) picks
    every next centre with probability proportional to the squared distance to the
    nearest centre so far (scikit-learn keeps the best of a few such draws); the
    Lloyd steps move each centre to the mean of its points. Landmarks spread over the
    data like this lower the Nyström error for a given m (Zhang, Tsang & Kwok 2008).
    Memory: the sample plus scikit-learn's chunked distances. A CSR ``sample`` is
    clustered as it is (scikit-learn's sparse k-means); the centres are dense (m ×
    d).
    """
    from sklearn.cluster import KMeans, kmeans_plusplus

    S = as_rows64(sample)
    if m >= S.shape[0]:
        return S.toarray() if issparse(S) else S.copy()
    seed = int(rng.integers(2**31 - 1))  # scikit-learn seeds a RandomState from an int
    if n_iter == 0:
        return kmeans_plusplus(S, m, random_state=seed)[0]
    km = KMeans(
        n_clusters=m,
        init="k-means++",
        n_init=1,
        max_iter=n_iter,
        tol=0.0,
        algorithm="lloyd",
        random_state=seed,
    )
    return km.fit(S).cluster_centers_


# -- exact kernel PCA (small n) --------------------------------------------------------
def _kernel_pair(x, y, kernel, gamma, degree, coef0):
    return kernel_block(x, y, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)


def kernel_matrix(
    X: da.Array, *, kernel: str, gamma: float, degree: int = 3, coef0: float = 1.0
) -> da.Array:
    """Lazy n × n kernel matrix ``k(X, X)`` in (row chunk × row chunk) blocks of
    ``X``."""
    if len(X.chunks[1]) != 1:
        X = X.rechunk({1: -1})
    return da.blockwise(
        _kernel_pair,
        "ij",
        X,
        "ik",
        X,
        "jk",
        kernel,
        None,
        gamma,
        None,
        degree,
        None,
        coef0,
        None,
        dtype=np.float64,
        concatenate=True,
        meta=np.empty((0, 0)),
    )


def lanczos_top(times, n: int, k: int, rng: np.random.Generator):
    """Top-``k`` eigenpairs (descending) of the symmetric n × n operator ``times`` by
    implicitly restarted Lanczos (``scipy.sparse.linalg.eigsh``, largest algebraic),
    one product with an n-vector per iteration."""
    op = LinearOperator((n, n), matvec=times, matmat=times, dtype=np.float64)
    v0 = rng.uniform(-1.0, 1.0, n)
    w, U = eigsh(op, k=k, which="LA", v0=v0)
    order = np.argsort(w)[::-1]
    return w[order], U[:, order]


def subspace_top(
    times,
    n: int,
    k: int,
    rng: np.random.Generator,
    *,
    n_oversamples: int = 10,
    n_power_iter: int = 7,
):
    """Top-``k`` eigenpairs (descending) of the symmetric n × n operator ``times`` by
    subspace iteration with ``k + n_oversamples`` vectors and ``n_power_iter``
    re-orthonormalised iterations, then Rayleigh–Ritz: ``n_power_iter + 2`` products
    with n × l matrices."""
    l = min(n, k + n_oversamples)
    Q, _ = np.linalg.qr(times(rng.standard_normal((n, l))))
    for _ in range(n_power_iter):
        Q, _ = np.linalg.qr(times(Q))
    B = Q.T @ times(Q)
    w, Wv = eigh_descending((B + B.T) / 2, k)
    return w, Q @ Wv


def centred_kernel_eigh(K: da.Array, k: int, *, top=lanczos_top, seed=None):
    """Top-``k`` eigenpairs of the double-centred kernel
    ``K_c = (I − 11ᵀ/n) K (I − 11ᵀ/n)`` by the eigensolver ``top``
    (:func:`lanczos_top`, :func:`subspace_top`: ``top(times, n, k, rng)``, ``rng``
    from ``seed``).

    ``K`` (n × n, symmetric, blocked) should be persisted: every product reads it once.
    ``K_c`` is never formed; with ``c = K1/n`` and ``g = 1ᵀK1/n²``,
    ``K_c V = K V − 1 (cᵀV) − c (1ᵀV) + g 1 (1ᵀV)``.

    Returns
    ``(eigenvalues (k, descending), eigenvectors (n × k), c, g, trace(K_c))``.
    """
    n = K.shape[0]
    col_mean, diag = K.mean(axis=0), da.diagonal(K)
    col_mean, diag_sum = dask.compute(col_mean, diag.sum())
    g = float(col_mean.mean())
    trace_c = float(diag_sum) - n * g
    row_chunks = K.chunks[1]

    def times(V):
        V = np.asarray(V, dtype=np.float64)
        V2 = V.reshape(n, -1)  # ARPACK's matvec gives a vector, matmat a matrix
        (KV,) = dask.compute(K @ da.from_array(V2, chunks=(row_chunks, V2.shape[1])))
        ones_v = V2.sum(axis=0)
        KV -= (col_mean @ V2)[None, :]
        KV -= np.outer(col_mean, ones_v)
        KV += g * ones_v[None, :]
        return KV.reshape(V.shape)

    w, U = top(times, n, k, np.random.default_rng(seed))
    return w, U, col_mean, g, trace_c


def dense_rows64(rows) -> np.ndarray:
    """Rows gathered to the client (landmarks, RFF's first row, exact's training
    matrix) as a float64 NumPy array; a sparse gather (m × d) is densified here, on
    the client only."""
    if hasattr(rows, "toarray"):
        rows = rows.toarray()
    return np.asarray(rows, dtype=np.float64)


def ridge_solve(M: np.ndarray, B: np.ndarray, alpha: float) -> np.ndarray:
    """``M⁻¹ B`` for the pre-image ridge ``M = G + αI`` (Cholesky, as scikit-learn;
    an indefinite kernel such as the sigmoid falls back to a symmetric solve), with a
    clear error when ``M`` is singular."""
    try:
        return sla.solve(M, B, assume_a="pos")
    except sla.LinAlgError:
        pass
    try:
        return sla.solve(M, B, assume_a="sym")
    except sla.LinAlgError as err:
        raise ValueError(
            "the pre-image ridge system is singular with "
            f"alpha={alpha} ({err}); use a larger alpha"
        ) from None
