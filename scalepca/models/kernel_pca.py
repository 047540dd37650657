"""Kernel PCA at scale: Nyström and random Fourier features, and exact kernel PCA for
small n."""

from __future__ import annotations

import logging
import warnings
from functools import partial

import dask
import numpy as np
from scipy.sparse import issparse
from sklearn.exceptions import NotFittedError

from .._validation import (
    check_random_state_seed,
    is_sparse,
)
from ..linalg import (
    column_moments_graph,
    feature_scale,
    flip_signs,
    moments_graph,
    variance_ratio,
)
from ..linalg.kernels import (
    KERNELS,
    CentredKernelRows,
    FourierFeatures,
    KernelRows,
    NystroemFeatures,
    _nystroem_block,
    _rff_block,
    as_rows64,
    centred_kernel_eigh,
    dense_rows64,
    gather_rows,
    kernel_block,
    kernel_matrix,
    kmeans_plusplus_landmarks,
    nystroem_normalization,
    preimage_map,
    preimage_stats_graph,
    project_features,
    project_rows,
    rff_weights,
    ridge_solve,
)
from ..preprocessing._matrix import MatrixInput
from ..solvers.choice import KERNEL_EIGENSOLVERS, kernel_eigen_solver
from ._incremental import KernelMomentUpdate, kernel_feature_spectrum
from ._params import Choice, Flag, Int, NComponents, Real, Rule, Seed
from ._resources import available_memory
from .base import DecompositionMixin

logger = logging.getLogger(__name__)

APPROXIMATIONS = ("nystroem", "rff", "exact")
LANDMARKS = ("uniform", "kmeans++")
EIGEN_SOLVERS = ("auto", "arpack", "randomized")

#: ``approximation="exact"`` refuses more samples than this (the n × n kernel is 3.2 GB
#: here)
EXACT_MAX_SAMPLES = 20_000
#: ... and training matrices larger than this (the model keeps them for ``transform``)
EXACT_MAX_TRAIN_BYTES = 256 * 2**20
#: the n × n kernel must fit in this fraction of the cluster's (or this machine's)
#: memory
EXACT_MEMORY_FRACTION = 0.5
#: rows per block of the exact n × n kernel (2048² float64 = 32 MiB a block)
EXACT_BLOCK_ROWS = 2048
#: Nyström: landmark directions with ``s_j ≤ NYSTROEM_RTOL · s_1`` are dropped
#: (pseudo-inverse)
NYSTROEM_RTOL = 1e-10
#: k-means++ landmarks are chosen from a uniform sample of
#: ``max(KMEANS_POOL_FACTOR · m, KMEANS_MIN_POOL)`` rows (all rows if fewer), followed
#: by ``KMEANS_LLOYD_ITER`` Lloyd steps
KMEANS_POOL_FACTOR = 5
KMEANS_MIN_POOL = 10_000
KMEANS_LLOYD_ITER = 5


def _first_row_kept(X):
    """``(X, its first row)``: the first row block read once and kept (persisted) in the
    returned ``X``, whose graph takes it from memory instead of reading it again."""
    import dask.array as da

    rows = X.chunks[0][0]
    head = X[:rows].persist()
    (first,) = dask.compute(head[:1])
    if X.numblocks[0] == 1:
        return head, first
    return da.concatenate([head, X[rows:]], axis=0), first


def _kernel_features(approximation: str, n: int, n_features: int) -> int:
    """The features of the kernel's map: one per sample for the exact kernel, else
    the Nyström landmarks or random Fourier features asked for."""
    return n if approximation == "exact" else int(n_features)


def _rff_needs_rbf(p, shape) -> None:
    if p["approximation"] == "rff" and p["kernel"] != "rbf":
        raise ValueError(
            f"approximation='rff' needs kernel='rbf' (random Fourier features exist "
            f"for shift-invariant kernels); got kernel={p['kernel']!r}. Use "
            "approximation='nystroem' for it"
        )


def _exact_fits(p, shape) -> None:
    """``approximation="exact"``: the n × n kernel and the training data must fit."""
    if p["approximation"] != "exact":
        return
    n, d = shape.n, shape.d
    if n > EXACT_MAX_SAMPLES:
        raise ValueError(
            f"approximation='exact' needs the {n} × {n} kernel matrix; it is limited "
            f"to n_samples <= {EXACT_MAX_SAMPLES} (got {n}). Use "
            f"approximation='nystroem' "
            "(or 'rff' for the RBF kernel), which scale linearly in n"
        )
    if n * d * 8 > EXACT_MAX_TRAIN_BYTES:
        raise ValueError(
            f"approximation='exact' keeps the training data ({n} × {d}, "
            f"{n * d * 8 / 2**20:.0f} MiB) in the model; the limit is "
            f"{EXACT_MAX_TRAIN_BYTES // 2**20} MiB. Use approximation='nystroem'"
        )
    need = 8 * n * n
    avail, where = available_memory()
    if need > EXACT_MEMORY_FRACTION * avail:
        raise ValueError(
            f"approximation='exact' needs the {n} × {n} kernel ({need / 2**30:.2f} "
            f"GiB), more than {EXACT_MEMORY_FRACTION:.0%} of {where} "
            f"({avail / 2**30:.2f} GiB). "
            "Use approximation='nystroem' or a larger cluster"
        )
    k = p["n_components"]
    if k >= shape.n and p["eigen_solver"] != "randomized":
        raise ValueError(
            f"n_components={k} must be below n_samples={shape.n} "
            "for the Lanczos solver; use eigen_solver='randomized'"
        )


class KernelPCA(KernelMomentUpdate, DecompositionMixin):
    r"""Kernel principal component analysis for data larger than memory.

    Kernel PCA is PCA of the data mapped into the feature space of a kernel :math:`k`;
    the principal axes are found from the double-centred n × n kernel matrix. That
    matrix does not fit for large n, so two approximations replace it by an explicit
    :math:`n \times m` feature matrix :math:`F` (:math:`F F^\top \approx K`), whose PCA
    is the tall-skinny PCA already used by :class:`PCA`: one pass of moments (count,
    mean, centred m × m Gram), centring in feature space (the approximation of
    double-centring ``K``), then ``eigh`` of the m × m matrix on the client.

    Parameters
    ----------
    n_components : int, default=2
        Number of kernel principal components.
    kernel : {"rbf", "poly", "sigmoid", "linear"}, default="rbf"
        :math:`\exp(-\gamma \|x - y\|^2)`,
        :math:`(\gamma\, x^\top y + c_0)^{\mathrm{degree}}`,
        :math:`\tanh(\gamma\, x^\top y + c_0)`, :math:`x^\top y` (:math:`c_0` is
        ``coef0``).
    gamma : float or None, default=None
        Kernel coefficient, > 0; ``None`` means one over the number of features in the
        fit (``n_features_in`` less the features that are NaN in every sample).
    degree : int, default=3
        Degree of the polynomial kernel, >= 1.
    coef0 : float, default=1.0
        Constant of the polynomial and sigmoid kernels.
    approximation : {"nystroem", "rff", "exact"}, default="nystroem"
        ``"nystroem"``: :math:`m` = ``n_features`` landmarks :math:`L` from the data;
        :math:`\varphi(x) = k(x, L) K_{LL}^{-1/2}`, with eigen-directions of
        :math:`K_{LL}` below :math:`10^{-10} s_{\max}` dropped (a pseudo-inverse; the
        floor on tiny eigenvalues). Any kernel (for the indefinite sigmoid kernel only
        the positive part of :math:`K_{LL}` is used). ``"rff"``: random Fourier features
        :math:`\sqrt{2/m} \cos(x^\top W + b)`, :math:`W \sim N(0, 2\gamma I)`,
        :math:`b \sim U[0, 2\pi)`; RBF kernel only. ``"exact"``: the n × n kernel, built
        blockwise on the cluster, double-centred, top eigenpairs by Lanczos or
        randomized subspace iteration; refused for more than
        ``EXACT_MAX_SAMPLES = 20000`` samples, a training matrix above 256 MiB, or when
        the n × n kernel needs more than half the memory of the cluster in use (or of
        this machine without a distributed client).
    n_features : int, default=1000
        m, the number of landmarks (Nyström; at most n — larger values are lowered to n
        with a warning) or of random features (RFF). Ignored by ``"exact"``.
    landmarks : {"uniform", "kmeans++"}, default="uniform"
        Nyström landmarks: ``"uniform"`` samples m distinct rows; ``"kmeans++"`` runs
        k-means++ seeding and 5 Lloyd steps on a uniform sample of ``max(5 m, 10000)``
        rows and uses the m centres (usually a lower error for the same m). A sample of
        sparse rows is clustered as CSR (scikit-learn's sparse k-means), never
        densified: its seeding is that of the dense rows, but where points lie at
        exactly equal distances from two centres — common with integer counts — the
        sparse and dense Lloyd steps may assign them differently, and the landmarks then
        differ from those of the densified data by those ties.
    eigen_solver : {"auto", "arpack", "randomized"}, default="auto"
        Solver of ``"exact"``: Lanczos (ARPACK) or randomized subspace iteration (k + 10
        vectors, 7 power iterations); ``"auto"`` is ``"arpack"``.
    random_state : int, Generator or None
        Seed of the landmark sampling, k-means++, the random features and the solver's
        start vector. Results do not depend on the chunking or the number of workers.
    fit_inverse_transform : bool, default=False
        Also learn a pre-image map from scores back to the inputs (a kernel ridge
        regression of the training rows on their scores, with the model's kernel on the
        scores, as scikit-learn's ``KernelPCA``), so that ``inverse_transform`` exists.
        ``"exact"``: scikit-learn's definition, ``dual_coef_``
        :math:`= (k(Z, Z) + \alpha I)^{-1} X` over the n training scores :math:`Z`.
        Nyström / RFF: the same ridge in a finite feature space ``φ`` of the scores —
        Nyström on the scores of the m landmarks, or m random Fourier features of the
        scores —
        :math:`C = (\sum_i \varphi(z_i)^\top \varphi(z_i) + \alpha I)^{-1}
        \sum_i \varphi(z_i)^\top x_i`,
        reduced over the row chunks in one extra pass; a pre-image is
        :math:`\varphi(z) C`.
    alpha : float, default=1.0
        Ridge of the pre-image regression, >= 0 (used with
        ``fit_inverse_transform=True``).
    standardize : bool, default=False
        Feed the kernel ``(x − input_mean_) / scale_`` (standard deviations with
        denominator n, 1 for constant features, as ``StandardScaler``), in fit and in
        transform: one more pass (the features' moments) before the fit's own passes.
        Weighted data (``open_matrix(weights=...)``) are standardised first and weighted
        after, as PCA's. Refused on sparse input, where centring would densify the data
        (see Notes).

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        Top eigenvalues of the centred kernel matrix :math:`K_c` (n × n, *not* divided
        by n) — the convention of scikit-learn's ``KernelPCA.eigenvalues_``. For the
        approximations they are the eigenvalues of

        .. math:: F_c^\top F_c = \big((I - \mathbf{1}\mathbf{1}^\top/n) F\big)^\top
                  \big((I - \mathbf{1}\mathbf{1}^\top/n) F\big),

        i.e. of the approximated :math:`K_c`; they equal :math:`n - 1` times the
        variances of the scores.
    explained_variance_ : ndarray of shape (n_components,)
        ``eigenvalues_`` :math:`/ (n - 1)`: the variance of each score column (for the
        linear kernel, :class:`PCA`'s ``explained_variance_``).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``eigenvalues_`` :math:`/ \operatorname{tr}(K_c)` (the approximated trace for
        Nyström/RFF).
    gamma_ : float
        The kernel coefficient used.
    components_ : ndarray of shape (n_components, n_kernel_features_)
        Nyström/RFF: principal axes in the feature space (sign: largest entry positive).
    mean_ : ndarray of shape (n_kernel_features_,)
        Nyström/RFF: the mean feature vector (centring in feature space).
    landmarks_ : ndarray of shape (m, n_features_in_)
        Nyström landmarks.
    normalization_ : ndarray of shape (m, n_kernel_features_)
        Nyström :math:`K_{LL}^{-1/2}` on the kept directions.
    random_weights_, random_offset_ : ndarray of shapes (n_features_in_, m), (m,)
        RFF frequencies :math:`W` and phases :math:`b`.
    X_fit_ : ndarray of shape (n_samples, n_features_in_)
        Exact: the training data (needed to project new points).
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        Exact: unit eigenvectors of :math:`K_c` (sign: largest entry positive).
    K_fit_rows_ : ndarray of shape (n_samples,)
        Exact: column means of the uncentred training kernel.
    K_fit_all_ : float
        Exact: the grand mean of the uncentred training kernel.
    n_kernel_features_ : int
        Nyström/RFF: width of the feature matrix, m (Nyström: of rank m less the dropped
        directions of :math:`K_{LL}`).
    n_components_ : int
        The number of components kept.
    n_samples_ : int
        Number of samples (rows) in the training data.
    n_features_in_ : int
        Number of features seen during ``fit``.
    features_kept_ : ndarray of shape (n_features_in_,), dtype bool
        True for the features the model was fitted on, False for those left out
        (NaN in every sample), which are NaN in the per-feature attributes.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during ``fit``; defined only when the data carry
        names.
    input_mean_ : ndarray of shape (n_features_in_,)
        ``standardize=True``: the per-feature mean of the inputs, subtracted before the
        kernel.
    scale_ : ndarray of shape (n_features_in_,)
        ``standardize=True``: the per-feature standard deviations the inputs are divided
        by before the kernel.
    n_passes_ : int
        Passes over the data the fit made (of the last batch for ``partial_fit``).
    fit_time_ : float
        Wall-clock seconds the last ``fit`` (or ``partial_fit``) took.
    solver_ : str
        The eigensolver that ran: exact, ``eigen_solver`` (``"auto"`` resolved); Nyström
        and RFF, ``"dense"`` (``eigh`` of the m × m feature covariance on the client).
    n_samples_seen_ : int
        Nyström/RFF: the rows seen by ``fit`` and every ``partial_fit`` since.
    X_transformed_fit_ : ndarray of shape (n_samples, n_components)
        Exact, ``fit_inverse_transform=True``: the training scores
        :math:`U \sqrt{\lambda}`.
    dual_coef_ : ndarray of shape (n_samples, n_features_in_)
        Exact, ``fit_inverse_transform=True``: :math:`(k(Z, Z) + \alpha I)^{-1} X` (NaN
        at left-out features).
    inverse_landmarks_, inverse_normalization_ : ndarrays of shapes (m, n_components), (m, m)
        Nyström, ``fit_inverse_transform=True``: the scores of the landmarks and
        :math:`k(Z_L, Z_L)^{-1/2}` on its kept directions (the feature map of the
        scores).
    inverse_weights_, inverse_offset_ : ndarrays of shapes (n_components, m), (m,)
        RFF, ``fit_inverse_transform=True``: random Fourier frequencies and phases on
        the scores.
    inverse_coef_ : ndarray of shape (r, n_features_in_)
        Nyström/RFF, ``fit_inverse_transform=True``: the ridge coefficients :math:`C`
        (NaN at left-out features).

    Notes
    -----
    Passes over the data per fit: Nyström 2 (gather the m landmark rows — or the
    k-means++ sample — then the moments of the feature map); RFF 1, every block read
    once (the first row block is kept for the pass after its first row has been taken
    from it); exact 1 (gather the n × d training matrix, which the model keeps), after
    which the solver's products read the n × n kernel held in cluster memory (ARPACK:
    one per Lanczos step; randomized: 9).

    ``partial_fit`` (Nyström, RFF; without ``standardize`` or
    ``fit_inverse_transform``): the first call is ``fit``, which draws the landmarks or
    random features and gamma for good; each later batch is read once for its feature
    moments, merged into the model's, and the m × m problem solved again — the PCA of
    every row's features, as if they were one batch.

    Features that are NaN in every sample (land in a gridded field) are left out of the
    fit: they are found in the rows read before the pass (the landmark sample, RFF's
    first row, the exact method's training matrix) and checked to be NaN everywhere in
    the pass itself, so they cost no extra pass. The fit equals the fit on the data
    without them (``gamma=None`` then means one over the number of kept features);
    ``landmarks_``, ``random_weights_`` and ``X_fit_`` come back with NaN at them, and
    ``transform`` ignores them. Any other NaN or infinite value is an error.

    Memory per worker, Nyström/RFF: a task maps its row block to features a slab of rows
    at a time (at most 16 MiB of features and the kernel block they come from) and
    reduces each slab into the m × m moments at once — the row block, about 3 × 16 MiB
    and 3 · 8 m² bytes. The client holds m × d landmarks, m × m matrices and d × m
    weights only; nothing of size n × m or n × n is formed anywhere. Exact: the n × n
    kernel (8 n² bytes) is held in cluster memory in 2048 × 2048 blocks; the client
    holds n × d and n × k arrays.

    Sparse input (``scipy.sparse`` matrices, pydata ``sparse`` arrays, dask arrays of
    either, read as blocks of CSR rows) is never densified where it lives: kernel blocks
    against the dense landmarks are sparse–dense products :math:`x L^\top` plus, for the
    RBF kernel, squared row norms over the stored values; random Fourier features are
    :math:`x W`; ``transform`` and the pre-image statistics work the same way. What
    comes to the client is dense, as for dense input: the m landmark rows (uniform), the
    k-means++ pool (``max(5 m, 10000)`` rows × d × 8 bytes — prefer uniform landmarks
    for very wide sparse data), RFF's first row and, for ``"exact"``, the training
    matrix (bounded by 256 MiB dense, as for dense input). The result equals the fit on
    the densified data to rounding (same ``random_state`` ⇒ same landmarks or weights).
    ``standardize=True`` is refused on sparse input: centring turns every zero into
    :math:`-\bar x / s` and the matrix dense; scale the columns beforehand without
    centring if needed (the RBF kernel is shift-invariant, so it does not need the
    centring).

    ``transform`` is lazy for dask/xarray input (one blockwise map that builds the
    kernel rows in sub-batches of at most 64 MiB and projects them at once). On the
    training data it returns the same scores as the fit: ``fit_transform(X)`` equals
    ``fit(X).transform(X)``.

    Pre-images (``fit_inverse_transform=True``): Nyström/RFF make one more pass, in
    which each row block is projected on the components and reduced to
    :math:`\sum \varphi(z)^\top \varphi(z)` (m × m) and :math:`\sum \varphi(z)^\top x`
    (m × d) where it lives; a task holds a row block, sub-batches of kernel values (≤ 64
    MiB) and the m × d partial, and the client solves the m × m system and keeps
    :math:`C` (8 m d bytes: lower ``n_features`` for very wide data). Exact makes no
    extra pass (the training data are on the client already); the client solves the n ×
    n system (8 n² bytes, as scikit-learn). ``inverse_transform`` is one lazy blockwise
    map over the score rows (a pre-image block is rows × d).

    References
    ----------
    Schölkopf, B., Smola, A. & Müller, K.-R. (1998). Nonlinear component analysis as a
    kernel eigenvalue problem. Neural Computation, 10(5), 1299–1319.

    Williams, C. K. I. & Seeger, M. (2001). Using the Nyström method to speed up kernel
    machines. Advances in Neural Information Processing Systems 13, 682–688.
    (``approximation="nystroem"``.)

    Rahimi, A. & Recht, B. (2007). Random features for large-scale kernel machines.
    Advances in Neural Information Processing Systems 20, 1177–1184.
    (``approximation="rff"``.)

    Zhang, K., Tsang, I. W. & Kwok, J. T. (2008). Improved Nyström low-rank
    approximation and error analysis. Proceedings of the 25th International Conference
    on Machine Learning (ICML), 1232–1239. (``landmarks="kmeans++"``.)

    Bakır, G. H., Weston, J. & Schölkopf, B. (2004). Learning to find pre-images.
    Advances in Neural Information Processing Systems 16, 449–456.
    (``fit_inverse_transform=True``.)

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> X = np.random.default_rng(0).standard_normal((2000, 5))
    >>> kp = scalepca.KernelPCA(3, n_features=200, random_state=0).fit(X)
    >>> kp.transform(X).shape
    (2000, 3)
    """

    #: fit and transform take sparse input (CSR row blocks) and keep it sparse
    _accepts_sparse = True

    #: fitted attributes over the input features, widened with NaN at features left out
    #: of the fit (components_ and mean_ live in the kernel's feature space and are not
    #: among them)
    _per_feature_attrs = (
        ("landmarks_", 1),
        ("random_weights_", 0),
        ("X_fit_", 1),
        ("dual_coef_", 1),
        ("inverse_coef_", 1),
    )

    def __init__(
        self,
        n_components: int = 2,
        *,
        kernel: str = "rbf",
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        approximation: str = "nystroem",
        n_features: int = 1000,
        landmarks: str = "uniform",
        eigen_solver: str = "auto",
        random_state=None,
        fit_inverse_transform: bool = False,
        alpha: float = 1.0,
        standardize: bool = False,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.approximation = approximation
        self.n_features = n_features
        self.landmarks = landmarks
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.fit_inverse_transform = fit_inverse_transform
        self.alpha = alpha
        self.standardize = standardize

    #: the parameters (:mod:`._params`), read by fit, the config schema, validate and
    #: load
    _parameters = {
        # at most n_samples (exact) or n_features (Nyström, RFF) components
        "n_components": NComponents(
            none=False,
            needs=("approximation", "n_features"),
            bound=(
                lambda p, s: (
                    s.n,
                    _kernel_features(p["approximation"], s.n, p["n_features"]),
                )
            ),
        ),
        "kernel": Choice(*KERNELS),
        "gamma": Real(0, open_low=True, none=True),
        "degree": Int(1),
        "coef0": Real(),
        "approximation": Choice(*APPROXIMATIONS),
        "n_features": Int(1),
        "landmarks": Choice(*LANDMARKS),
        "eigen_solver": Choice(*EIGEN_SOLVERS),
        "random_state": Seed(),
        "fit_inverse_transform": Flag(),
        "alpha": Real(0),
        "standardize": Flag(),
    }
    _parameter_rules = (
        Rule(_rff_needs_rbf, needs=("approximation", "kernel")),
        Rule(_exact_fits, needs=("approximation", "n_components", "eigen_solver")),
    )

    def _kparams(self) -> dict:
        """The fitted kernel's parameters."""
        return self._kernel_params(self.gamma_)

    def _kernel_params(self, gamma: float) -> dict:
        """:func:`~scalepca.linalg.kernels.kernel_block`'s keywords: the kernel's
        function (looked up here, once; the parameter check refused unknown names) and
        its parameters."""
        return {
            "kernel": KERNELS[self.kernel],
            "gamma": float(gamma),
            "degree": int(self.degree),
            "coef0": float(self.coef0),
        }

    # -- fitting -----------------------------------------------------------------------
    def _fit(self, data: MatrixInput) -> None:
        X = data.data
        n, d = X.shape
        k = self._check_parameters(n, d, X)["n_components"]
        m = _kernel_features(self.approximation, n, self.n_features)
        if self.approximation == "nystroem" and m > n:
            warnings.warn(
                f"n_features={m} is larger than n_samples={n}; using {n} landmarks",
                UserWarning,
                stacklevel=3,
            )
            m = n
        X = self._standardized_input(X, fit=data)
        seed = check_random_state_seed(self.random_state)
        # independent streams for the sampling, the solver and the pre-image features
        s_sample, s_solver, s_inverse = seed.spawn(3)
        logger.info(
            "KernelPCA: %d × %d, kernel=%s, approximation=%s, m=%d",
            n,
            d,
            self.kernel,
            self.approximation,
            m,
        )
        # fitted attributes are set only once the fit has succeeded (a failed fit leaves
        # the estimator unfitted)
        if self.approximation == "exact":
            state = self._fit_exact(X, k, s_solver, data)
        else:
            state = self._fit_features(X, k, m, s_sample, data)
        self.n_samples_ = int(n)
        self.n_components_ = int(k)
        for name, value in state.items():
            setattr(self, name, value)
        self._set_spectrum(*self._spectrum)
        del self._spectrum
        if self.fit_inverse_transform:
            try:
                for name, value in self._fit_preimage(X, s_inverse).items():
                    setattr(self, name, value)
            except BaseException:
                self._reset_fitted()  # a failed fit leaves the estimator unfitted
                raise
        self.n_features_in_ = int(d)

    def _standardized_input(self, X, *, fit: MatrixInput | None = None):
        """``(X − input_mean_) / scale_`` (lazy, blockwise) when ``standardize``; in
        ``fit`` (the input, ``fit``) one pass of column moments sets them (NaN-only
        features keep mean 0 and scale 1; weighted input is standardised before its
        weights)."""
        if fit is not None:
            if not self.standardize:
                return X
            if is_sparse(X):
                raise ValueError(_SPARSE_STANDARDIZE)
            with self._timed_pass("moments for standardize"):
                (mom,) = dask.compute(column_moments_graph(X))
            self.scale_, _ = feature_scale(
                mom["ss"] / max(int(mom["n"]), 1), self._standardizing_weights(fit)
            )
            self.input_mean_ = np.asarray(mom["mean"], dtype=np.float64)
        elif getattr(self, "scale_", None) is None:
            return X
        if is_sparse(X):
            raise ValueError(_SPARSE_STANDARDIZE)
        return (X - self.input_mean_) / self.scale_

    def _resolved_kparams(self, d_fit: int) -> dict:
        """Kernel parameters of a fit on ``d_fit`` features (``gamma=None``:
        ``1 / d_fit``)."""
        return self._kernel_params(1.0 / d_fit if self.gamma is None else self.gamma)

    def _leave_out_nan_features(
        self, rows: np.ndarray, data: MatrixInput, *, sample: str
    ):
        """Find the features that are NaN in every row of ``rows`` (a sample of X's
        rows, or all of them) and leave them out of the fit (land masks); raise on any
        other non-finite value.

        A feature NaN in every sampled row but not in every row of X has missing
        values, which kernel PCA refuses: the feature map checks the left-out columns
        in its pass over X (``_features_kept``, the fit's column selection). Returns
        the rows without those features. ``rows`` may be CSR (a k-means++ pool of
        sparse rows): a feature is then NaN in every row when every row stores NaN in
        it.
        """
        n_rows, d = rows.shape
        if issparse(rows):
            rows = rows.tocsr()
            rows.sum_duplicates()
            nan_per_feature = np.bincount(
                rows.indices[np.isnan(rows.data)], minlength=d
            )
        else:
            nan_per_feature = np.isnan(rows).sum(axis=0)

        def check(land):
            kept = rows
            if land.any():
                kept = rows[:, ~land]
            if issparse(kept):
                kept = kept.data
            if not np.isfinite(kept).all():
                raise ValueError(
                    "X contains NaN or infinite values (found in "
                    f"{sample}); remove or impute them before kernel PCA "
                    "(features that are NaN in every sample are left out)"
                )

        keep = self._leave_out_land(n_rows - nan_per_feature, data, check=check)
        if keep.all():
            return rows
        return rows[:, keep]

    def _fit_features(self, X, k: int, m: int, seed, data: MatrixInput) -> dict:
        """Nyström / RFF: feature map, one pass of moments, eigh of the m × m Gram.

        Features that are NaN in every sample are found in the rows read before the
        pass (the landmark sample, or RFF's first row) and left out; the pass checks
        that they are.
        """
        if self.approximation == "nystroem":
            rng = np.random.default_rng(seed)
            rows = self._leave_out_nan_features(
                self._sample_rows(X, m, rng), data, sample="the sampled landmark rows"
            )
            kparams = self._resolved_kparams(rows.shape[1])
            L = rows
            if self.landmarks == "kmeans++":
                L = kmeans_plusplus_landmarks(rows, m, rng, n_iter=KMEANS_LLOYD_ITER)
            K_LL = kernel_block(L, L, **kparams)
            N, kept = nystroem_normalization(K_LL, rtol=NYSTROEM_RTOL)
            if kept.size < k:
                raise ValueError(
                    f"only {kept.size} of the {m} landmark directions are "
                    f"numerically independent, fewer than n_components={k}; "
                    "lower n_components, raise n_features or change gamma"
                )
            state = {"landmarks_": L, "normalization_": N}
            feature_map = partial(
                _nystroem_block,
                landmarks=L,
                normalization=N,
                keep=self._features_kept,
                **kparams,
            )
        else:
            # one row tells which features can be NaN in every sample: the weights are
            # drawn for the features that enter the fit. Its row block is kept for the
            # pass, which then reads every block once (on one row block, reading the
            # row apart would read all the data twice)
            X, first = _first_row_kept(X)
            first = self._leave_out_nan_features(
                dense_rows64(first), data, sample="the first row"
            )
            kparams = self._resolved_kparams(first.shape[1])
            W, b = rff_weights(first.shape[1], m, kparams["gamma"], seed)
            state = {"random_weights_": W, "random_offset_": b}
            feature_map = partial(_rff_block, W=W, b=b, keep=self._features_kept)
        # the features are mapped and reduced slab by slab inside each row block's task:
        # never a whole feature block in memory, and one task (one partial) per row
        # block
        with self._timed_pass("feature moments"):
            (mom,) = dask.compute(moments_graph(X, feature_map=feature_map))
        spectral, self._spectrum = kernel_feature_spectrum(mom, k)  # partial_fit's too
        return {**state, **spectral, "gamma_": kparams["gamma"], "solver_": "dense"}

    def _set_spectrum(self, evals: np.ndarray, total: float) -> None:
        n = self.n_samples_
        self.eigenvalues_ = np.asarray(evals, dtype=np.float64)
        self.explained_variance_ = self.eigenvalues_ / max(n - 1, 1)
        self.explained_variance_ratio_ = variance_ratio(self.eigenvalues_, total)

    def _sample_rows(self, X, m: int, rng: np.random.Generator):
        """The m landmark rows (or the k-means++ pool), gathered from the chunks that
        hold them: float64, dense for uniform landmarks (they are the landmarks), but
        a pool of sparse rows stays CSR — it is ``max(5 m, 10,000)`` rows, 2.4 GB
        once densified at 30,000 genes — and k-means runs on it as it is."""
        n = X.shape[0]
        pool = self.landmarks != "uniform"
        size = m if not pool else min(n, max(KMEANS_POOL_FACTOR * m, KMEANS_MIN_POOL))
        idx = np.sort(rng.choice(n, size=size, replace=False))
        with self._timed_pass("landmarks"):
            (rows,) = dask.compute(gather_rows(X, idx))
        if pool and issparse(rows):
            return as_rows64(rows)
        return dense_rows64(rows)

    def _fit_exact(self, X, k: int, seed, data: MatrixInput) -> dict:
        n = X.shape[0]
        with self._timed_pass("gather training data"):
            (Xf,) = dask.compute(X)
        # sparse input: kept dense like dense input's (within EXACT_MAX_TRAIN_BYTES, 8 n
        # d)
        Xf = self._leave_out_nan_features(
            dense_rows64(Xf), data, sample="the training data"
        )
        Xf = np.ascontiguousarray(Xf)
        kparams = self._resolved_kparams(Xf.shape[1])
        import dask.array as da

        Xd = da.from_array(Xf, chunks=(min(n, EXACT_BLOCK_ROWS), -1))
        K = kernel_matrix(Xd, **kparams).persist()
        solver = kernel_eigen_solver(self.eigen_solver)
        w, U, col_mean, g, trace_c = centred_kernel_eigh(
            K, k, top=KERNEL_EIGENSOLVERS[solver], seed=seed
        )
        del K
        self._spectrum = (w, trace_c)
        return {
            "gamma_": kparams["gamma"],
            "solver_": solver,
            "X_fit_": Xf,
            "eigenvectors_": flip_signs(U.T).T,
            "K_fit_rows_": col_mean,
            "K_fit_all_": float(g),
        }

    def _fit_preimage(self, X, seed) -> dict:
        """The pre-image ridge (see ``fit_inverse_transform``): its state, by name.

        Exact: scikit-learn's dual coefficients from the training scores ``U √λ``, on
        the client. Nyström/RFF: one pass reducing ``A = Σ φ(z)ᵀφ(z)``,
        ``B = Σ φ(z)ᵀx`` over the row chunks, then ``(A + αI) C = B`` on the client.
        """
        kparams = self._kparams()
        alpha = float(self.alpha)
        if self.approximation == "exact":
            Z_fit = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
            K = kernel_block(Z_fit, Z_fit, **kparams)
            K.flat[:: K.shape[0] + 1] += alpha
            dual = ridge_solve(K, self._kept(self.X_fit_, axis=1), alpha)
            return {"X_transformed_fit_": Z_fit, "dual_coef_": dual}
        projection = self._projection()
        if self.approximation == "nystroem":
            # score landmarks: the scores of the fit's landmarks (a sample of the
            # training rows, or the k-means++ centres), with the kernel's Nyström map on
            # them
            fmap = projection[0]
            Z_L = project_rows(fmap.rows, *projection)
            N_Z, _ = nystroem_normalization(
                kernel_block(Z_L, Z_L, **kparams), rtol=NYSTROEM_RTOL
            )
            features = NystroemFeatures(Z_L, kparams, N_Z)
            state = {"inverse_landmarks_": Z_L, "inverse_normalization_": N_Z}
        else:
            W, b = rff_weights(
                self.n_components_, self.n_kernel_features_, kparams["gamma"], seed
            )
            features = FourierFeatures(W, b)
            state = {"inverse_weights_": W, "inverse_offset_": b}
        graph = preimage_stats_graph(self._select_features(X), projection, features)
        with self._timed_pass("pre-image statistics"):
            (stats,) = dask.compute(graph)
        A = stats["A"]
        A.flat[:: A.shape[0] + 1] += alpha
        state["inverse_coef_"] = ridge_solve(A, stats["B"], alpha)
        return state

    def _inverse_features(self):
        """(the feature map of the scores, C) of the fitted pre-image map."""
        if hasattr(self, "dual_coef_"):
            return KernelRows(self.X_transformed_fit_, self._kparams()), self.dual_coef_
        if hasattr(self, "inverse_landmarks_"):
            return (
                NystroemFeatures(
                    self.inverse_landmarks_,
                    self._kparams(),
                    self.inverse_normalization_,
                ),
                self.inverse_coef_,
            )
        if hasattr(self, "inverse_weights_"):
            return (
                FourierFeatures(self.inverse_weights_, self.inverse_offset_),
                self.inverse_coef_,
            )
        raise NotFittedError(
            "this KernelPCA was fitted with fit_inverse_transform=False, so it has no "
            "pre-image map; fit it again with fit_inverse_transform=True"
        )

    @property
    def inverse_transform(self):
        """Pre-images of scores: ``inverse_transform(Z)`` maps scores back to the
        inputs.

        Exists only with ``fit_inverse_transform=True`` (otherwise reading it raises
        ``NotFittedError``, an ``AttributeError``, as in scikit-learn, and ``hasattr``
        is False). The map is the kernel ridge learned in ``fit``; for the exact method
        it is scikit-learn's ``k(Z, Z_fit) dual_coef_``, for Nyström/RFF ``φ(Z) C``.
        Like scikit-learn's, it does not add back the mean of the kernel features.

        Parameters
        ----------
        Z : array-like, dask array or DataArray of shape (n_samples, n_components)
            Scores (a DataArray over sample dims and ``mode``, as ``transform``
            returns).

        Returns
        -------
        X_preimage : same kind as ``Z`` (NumPy, dask, or a DataArray over the data's dims)
            Lazy for dask and xarray input; NaN at the features left out of the fit.
        """
        if not self.fit_inverse_transform:
            raise NotFittedError(_NO_INVERSE)
        return self._preimages

    def _preimages(self, Z):
        self._check_fitted()
        features, C = self._inverse_features()
        zin = self._scores_input(Z, self.n_components_)
        Xhat = preimage_map(zin.data, features, C)
        # the ridge learnt standardised rows
        if getattr(self, "scale_", None) is not None:
            Xhat = Xhat * self.scale_ + self.input_mean_
        return self._wrap_reconstruction(zin, Xhat)

    def __getattr__(self, name):
        # only reached when normal lookup fails: say why the linear models' views are
        # absent
        if name == "inverse_transform":  # the property refused: repeat why
            raise NotFittedError(_NO_INVERSE)
        if name == "partial_fit":  # refused by its descriptor: say why again
            self._check_updatable(None, error=AttributeError)
        if name in ("components_xr_", "mean_xr_"):
            raise AttributeError(
                f"KernelPCA has no {name}: its components and mean live in the "
                "kernel's feature space, not over the input features, so they "
                "have no map on the input grid; use transform() for the scores"
            )
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}"
        )

    # -- transforms --------------------------------------------------------------------
    def _projection(self):
        """(feature map, P, offset) of the fitted model's ``transform``: scores are
        ``fmap.project(x, P) − offset``."""
        if hasattr(self, "X_fit_"):
            lam = self.eigenvalues_
            inv = np.divide(
                1.0, np.sqrt(np.maximum(lam, 0)), out=np.zeros_like(lam), where=lam > 0
            )
            A = self.eigenvectors_ * inv[None, :]  # dual coefficients
            offset = self.K_fit_rows_ @ A - self.K_fit_all_ * A.sum(axis=0)
            fmap = CentredKernelRows(self._kept(self.X_fit_, axis=1), self._kparams())
            return fmap, A, offset
        V = self.components_.T
        offset = self.mean_ @ V
        if hasattr(self, "landmarks_"):
            fmap = KernelRows(self._kept(self.landmarks_, axis=1), self._kparams())
            return fmap, self.normalization_ @ V, offset
        fmap = FourierFeatures(self._kept(self.random_weights_), self.random_offset_)
        return fmap, V, offset

    def transform(self, X):
        """Kernel principal component scores of ``X`` (lazy for dask and xarray input).

        New points are projected out of sample: their kernel values against the
        landmarks (Nyström), their random features (RFF) or their kernel row against the
        training data (exact, centred with the training kernel's means) — then centred
        and projected. A NaN at a feature the model uses is refused (``ValueError``): by
        this call for in-memory input, when the scores are computed for lazy input.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New data: a NumPy, dask or sparse array, a DataFrame, a DataArray or
            Dataset in the fitted data's own layout and units, or a matrix
            :func:`scalepca.open_matrix` made.

        Returns
        -------
        scores : same kind as ``X`` of shape (n_samples, n_components)
            The kernel principal component scores.
        """
        data = self._transform_input(X, unknown_rows=True)  # lazy for a dask DataFrame
        Z = project_features(
            self._select_features(self._standardized_input(data.data)),
            *self._projection(),
        )
        return data.wrap_samples(Z)


_SPARSE_STANDARDIZE = (
    "standardize=True centres every feature, which would turn sparse X into a dense "
    "matrix (every zero becomes −mean / scale); it is not done on sparse input. Fit "
    "with standardize=False, after scaling the columns without centring if you need "
    "it (e.g. sklearn.preprocessing.MaxAbsScaler, or StandardScaler(with_mean=False), "
    "on each block). The RBF kernel does not change under a shift of the data, so for "
    "kernel='rbf' centring is not needed"
)

_NO_INVERSE = (
    "KernelPCA.inverse_transform needs the pre-image map, which is learned only when "
    "the fit_inverse_transform parameter is True; set fit_inverse_transform=True "
    "(alpha sets the ridge) and fit again"
)
