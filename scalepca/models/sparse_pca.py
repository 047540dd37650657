"""Sparse PCA: one estimator, two method families.

``SparsePCA`` (this module) holds what the methods share: parameters and their checks,
the first pass (moments, land mask, standardisation), the adjusted explained variance
and the ridge ``transform``. The families live apart:

* :mod:`._sparse_dictionary` — dictionary learning, ``"batch"`` and ``"minibatch"``
  (reconstruction; each a state and a step run by the driver of :mod:`._iterate`);
* :mod:`._sparse_enet` — ZHT's elastic net on the covariance, ``"elasticnet"``
  (variance).
"""

from __future__ import annotations

import logging
import numbers
import time
import warnings
from collections.abc import Sequence

import numpy as np

from .._validation import (
    check_n_components,
    check_random_state_seed,
    check_scalar,
)
from ..io._fingerprint import data_fingerprint, sketch_graph
from ..linalg import feature_scale, flip_signs, moments_graph, variance_ratio
from ..linalg.sparse import adjusted_variance
from ..preprocessing._matrix import MatrixInput
from ..solvers.choice import AUTO_MAX_GRAM_FEATURES
from ._incremental import MomentUpdateMixin, SparseMomentUpdate, if_updatable
from ._iterate import computed_with_sketch
from ._params import Choice, Flag, Int, NComponents, Other, Path, Real, Rule, Seed
from ._sparse_dictionary import (
    DictionaryLearning,
    centred_squares,
    dictionary_objective_on,
)
from ._sparse_enet import zht_loadings
from .base import LinearDecompositionMixin

logger = logging.getLogger(__name__)

__all__ = ["SparsePCA", "dictionary_objective_on"]

METHODS = ("minibatch", "batch", "elasticnet")
INITS = ("pca", "random")
#: above this many features the d × d covariance is not formed (batch: one pass per
#: iteration)
GRAM_MAX_FEATURES = AUTO_MAX_GRAM_FEATURES


def _components(p, shape) -> int:
    return check_n_components(p["n_components"], shape.n, shape.d)


def _check_alpha(a, name, p, shape):
    """One non-negative number, or (``method="elasticnet"``) one per component; with the
    data's shape, the array of k weights."""
    if isinstance(a, (str, bytes)) or not (
        isinstance(a, numbers.Real) or isinstance(a, (Sequence, np.ndarray))
    ):
        raise TypeError(f"alpha must be a non-negative number; got {a!r}")
    if isinstance(a, numbers.Real):
        check_scalar(a, "alpha", low=0)
        if shape is None:
            return a
        return np.full(_components(p, shape), float(a))
    if p["method"] != "elasticnet":
        raise TypeError(
            f"alpha must be one number for method={p['method']!r} (one per component "
            f"is allowed for method='elasticnet'); got {a!r}"
        )
    vals = list(a)
    if shape is not None and len(vals) != _components(p, shape):
        raise ValueError(
            f"alpha has {len(vals)} values; one per component "
            f"({_components(p, shape)}) is needed"
        )
    for i, v in enumerate(vals):
        check_scalar(v, f"alpha[{i}]", low=0)
    if shape is None:
        return a
    return np.asarray(vals, dtype=np.float64)


def _check_n_nonzero(nz, name, p, shape):
    """None, or (``method="elasticnet"``) the nonzero loadings of each component, at
    most n_features: one integer or one per component; with the data's shape, the
    list."""
    if nz is None:
        return None
    if p["method"] != "elasticnet":
        raise ValueError(
            f"n_nonzero={nz!r} applies to method='elasticnet' only; "
            f"method={p['method']!r} takes alpha"
        )
    k, high = 1, None  # before the data: the form only
    if shape is not None:
        k, high = _components(p, shape), shape.d
    if isinstance(nz, numbers.Integral) and not isinstance(nz, bool):
        vals = [nz] * k
    elif isinstance(nz, (Sequence, np.ndarray)) and not isinstance(nz, (str, bytes)):
        vals = list(nz)
        if shape is not None and len(vals) != k:
            raise ValueError(
                f"n_nonzero has {len(vals)} values; one per component ({k}) is needed"
            )
    else:
        raise TypeError(
            f"n_nonzero must be an integer or a sequence of integers; got {nz!r}"
        )
    for i, v in enumerate(vals):
        check_scalar(v, f"n_nonzero[{i}]", kind=numbers.Integral, low=1, high=high)
    if shape is None:
        return nz
    return [int(v) for v in vals]


def _checkpoint_needs_iterations(p, shape) -> None:
    if p["checkpoint"] is not None and p["method"] == "elasticnet":
        raise ValueError(
            "checkpoint applies to method='minibatch' or 'batch' only ('elasticnet' "
            "makes one pass and iterates on the client: nothing to resume)"
        )


class SparsePCA(SparseMomentUpdate, DictionaryLearning, LinearDecompositionMixin):
    r"""Sparse principal components of data larger than memory.

    Three methods, one estimator:

    ``"minibatch"`` and ``"batch"`` — dictionary learning (reconstruction),
    scikit-learn's ``SparsePCA`` problem with the same ``alpha``,

    .. math::

        \min_{U, V}\ \tfrac12 \|X_c - U V\|_F^2 + \mathrm{alpha}\, \|V\|_1
        \quad\text{subject to}\quad \|U_{:j}\|_2 \le 1 ,

    where :math:`X_c` (n × d) is the centred (with ``use_correlation``, standardised)
    data, :math:`U` (n × k) the codes and :math:`V` (k × d) the sparse loadings;
    ``alpha`` is in the units of the data times :math:`\sqrt n` (the codes have unit
    norm over the n samples, so :math:`V` carries :math:`\|X_c\|`'s scale). A streaming
    fit works per sample instead: dividing by n with :math:`Y = \sqrt n\, U` (codes of
    unit mean square) and :math:`D = V^\top / \sqrt n` gives the same minimiser of

    .. math::

        \tfrac{1}{2n} \|X_c - Y D^\top\|_F^2 + \alpha \|D\|_1 ,
        \qquad \tfrac1n \|Y_{:j}\|^2 \le 1 ,

    with :math:`\alpha` = ``alpha`` :math:`/ \sqrt n` (``alpha_per_sample_``;
    ``objective_`` is this per-sample value, scikit-learn's objective / n).
    ``partial_fit`` uses the rows seen so far as n.
    The code step is a ridge regression of each row on the current
    dictionary, :math:`Y = X_c D (D^\top D + \Lambda)^{-1}`, with the k multipliers
    :math:`\Lambda` that enforce the bounds (exact; a k-dimensional problem). The
    dictionary step is block coordinate descent over the columns of D with soft
    thresholding,
    :math:`D_{:j} \leftarrow S_{\alpha/A_{jj}}\big(D_{:j} + (B_{:j} - D A_{:j})/A_{jj}\big)`,
    from :math:`A = Y^\top Y/n` (k × k) and :math:`B = X_c^\top Y/n` (d × k) only.
    ``"batch"`` alternates both steps exactly; ``"minibatch"`` cuts the rows into
    consecutive minibatches of about ``batch_size`` rows, accumulating A and B online
    with a forgetting factor (Mairal et al. 2009). The minibatches depend on the number
    of rows only, never on the chunking: the same data in one chunk, in many chunks, as
    NumPy or as xarray give the same fit up to the rounding of the per-chunk sums
    (tested: objective to 1e-10 relative, loadings to 1e-8).

    The online averages keep the codes of earlier dictionaries, so the epochs alone stop
    short of a stationary point (measured: 0.8 % above the batch optimum on 300 × 20
    data after 1000 epochs at ``tol=0``, 6.6 % on scikit-learn's breast cancer data).
    When the covariance fits (``n_features`` ≤ 4096; it is formed in the first pass,
    which reads the data anyway), ``"minibatch"`` therefore polishes its result with
    exact ``"batch"`` alternations on the covariance (``n_polish_``; no extra pass, a
    few d × d × k products on the client per alternation), stopped by the same ``tol``
    rule: the fit then ends at a stationary point of the objective, the batch method's
    (tested: objective to 1e-9 relative, first-order conditions to 1e-4 α). We polish
    rather than switch the default to ``"batch"`` so that ``method="minibatch"`` (the
    default, and what configs name) keeps its meaning and ``partial_fit`` can go on from
    a ``fit``. Wider data (no covariance) are not polished: each alternation would cost
    a pass; use ``"batch"`` there for a stationary point (one pass per alternation).

    ``"elasticnet"`` — the penalized-regression sparse PCA of Zou, Hastie & Tibshirani
    (2006), from the covariance S (denominator n − 1) alone (the Gram form of the
    elasticnet R package's ``spca``): every loading solves
    :math:`\min_\beta\ \beta^\top (S + \lambda_2 I) \beta - 2 a_j^\top S \beta
    + \lambda_{1j} \|\beta\|_1`
    with :math:`\lambda_{1j}` = ``alpha`` (or ``alpha[j]``) and :math:`\lambda_2` =
    ``ridge_alpha`` (LARS-EN or coordinate descent), alternating with
    :math:`A = U V^\top` from the SVD :math:`S B = U \Sigma V^\top`. This maximises
    variance rather than reconstruction: a different model from the dictionary methods
    and scikit-learn's ``SparsePCA``, so the same ``alpha`` does not give the same
    loadings. On the data, ZHT's criterion
    :math:`\|X_c a_j - X_c \beta\|^2 + \lambda_2' \|\beta\|^2 + \lambda_1' \|\beta\|_1`
    is this one times :math:`n - 1` (:math:`\lambda_1' = (n-1)` ``alpha``,
    :math:`\lambda_2' = (n-1)` ``ridge_alpha``), i.e. scikit-learn's
    ``ElasticNet(fit_intercept=False)`` of :math:`y = X_c a_j` on :math:`X_c` with
    ``alpha_enet = (n − 1)(alpha + 2 ridge_alpha) / (2n)`` and
    ``l1_ratio = alpha / (alpha + 2 ridge_alpha)``.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of sparse components; ``None`` keeps ``min(n_samples, n_features)``.
    method : {"minibatch", "batch", "elasticnet"}, default="minibatch"
    alpha : float or sequence of float, default=1.0
        The l1 penalty. Dictionary methods: scikit-learn's ``SparsePCA(alpha=...)`` (the
        objective above; per sample the kernels use ``alpha / √n``), one number.
        ``"elasticnet"``: λ₁ of ZHT's criterion on the covariance (see below), in the
        units of the covariance, one number or one per component; ignored when
        ``n_nonzero`` is given.
    ridge_alpha : float, default=0.01
        Ridge of ``transform``: scores are
        :math:`(x - \bar x)\, C^\top (C C^\top + r I)^{-1}` (:math:`r` =
        ``ridge_alpha``) for the unit components C (for orthogonal components,
        projections shrunk by ``1/(1 + ridge_alpha)``). For ``"elasticnet"`` it is also
        λ₂, added to the diagonal of the covariance.
    n_nonzero : int or sequence of int, optional
        ``"elasticnet"`` only: the number of non-zero loadings of each component, chosen
        on the LARS-EN path (the last point with exactly that many non-zeros).
    use_correlation : bool, default=False
        Standardise every feature by its standard deviation (from the same pass as the
        mean); components then describe the correlation matrix and ``transform``
        standardises too. Weighted data (``open_matrix(weights=...)``) are standardised
        first and weighted after, as PCA's ``standardize``.
    batch_size : int, optional
        ``"minibatch"``: the n rows are cut into ``max(1, n // batch_size)`` consecutive
        ranges of (nearly) equal size, so every minibatch holds at least ``batch_size``
        rows (all rows when n < ``batch_size``), whatever the row chunks. ``None``: at
        most 8 minibatches per epoch of at least 256 rows each (``max(256, ⌈n / 8⌉)``).
    max_iter : int, default=100
        Epochs (``"minibatch"``, then at most as many polishing alternations when the
        covariance fits) or alternations (``"batch"``, ``"elasticnet"``).
    tol : float, default=1e-4
        Dictionary methods: stop when the objective (per epoch for ``"minibatch"``)
        decreases by less than ``tol`` relative to its value. ``"elasticnet"``: stop
        when no entry of the normalised loadings changes by more than ``tol``.
    max_no_improvement : int or None, default=10
        ``"minibatch"``: stop after this many minibatches without improvement of the
        smoothed minibatch objective; ``None`` disables.
    forget_factor : float, default=1.0
        ``"minibatch"``: ρ ≥ 0 of the online statistics ``A ← β_t A + A_t`` with
        ``β_t = (1 − 1/t)^ρ``; minibatch s then weighs ``(s/t)^ρ`` at update t. 0 keeps
        every minibatch with equal weight.
    shuffle : bool, default=True
        ``"minibatch"``: visit the minibatches in a new random order every epoch.
    init : {"pca", "random"}, default="pca"
        Dictionary methods: start from the principal components (``D = V_k Λ_k^½``) or
        from random directions.
    random_state : int, Generator or None
        Seeds the initialisation and the minibatch order; results do not depend on the
        number of workers.
    checkpoint : str or None, default=None
        ``"minibatch"`` and ``"batch"`` only (a ValueError for ``"elasticnet"``). Local
        directory (a zarr group) where the iteration state is committed atomically
        every ``checkpoint_every`` steps and at the end; fitting again with the same
        path resumes from the newest complete commit. A checkpoint of another problem —
        another value of a parameter that changes the result (all but ``checkpoint``,
        ``checkpoint_every``, the elastic net's ``ridge_alpha`` and ``n_nonzero``, and
        the stopping parameters ``tol``, ``max_iter``, ``max_no_improvement``), other
        data or other row chunks (``"minibatch"``) — is refused with a ValueError naming
        what differs, and left untouched. The resumed fit stops at its own stopping
        parameters; see :doc:`/hpc`.
    checkpoint_every : int, default=5
        Steps between commits: minibatches (dictionary updates) for ``"minibatch"``,
        alternations for ``"batch"``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Sparse loadings with exact zeros, each row of unit Euclidean norm (a row of
        zeros if the penalty removed the component). Sign convention: the entry of
        largest magnitude is positive. Dictionary methods order components by their
        variance. NaN at features that are NaN in every sample (land in a gridded
        field): they are left out of the fit, which then equals the fit on the other
        features (also for ``mean_``, ``scale_``, ``loadings_``; ``transform`` ignores
        them, ``inverse_transform`` returns NaN there).
    mean_ : ndarray of shape (n_features,)
        Per-feature mean of the (weighted) training data, subtracted before the fit
        and in ``transform``.
    scale_ : ndarray of shape (n_features,)
        Feature standard deviations if ``use_correlation``, else ones.
    explained_variance_ : ndarray of shape (n_components,)
        Adjusted variance of ZHT (2006): ``R_jj²`` of the QR decomposition of the scores
        ``Xc C_jᵀ``, i.e. what each component adds beyond the previous ones, computed
        from the scores' covariance ``C S Cᵀ`` (no data pass).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the total variance ``tr S``.
    loadings_ : ndarray of shape (n_components, n_features)
        Dictionary methods: the fitted dictionary Dᵀ (``components_`` times each
        component's length), the argument of the objective.
    objective_ : float
        Dictionary methods: the per-sample objective at the fitted dictionary with
        optimal codes (scikit-learn's ``SparsePCA`` objective divided by n).
    alpha_per_sample_ : float
        Dictionary methods: ``alpha / √n``, the l1 weight of the per-sample objective.
    cost_history_ : ndarray
        Dictionary methods: objective per iteration (``"batch"``) or row-weighted mean
        of the minibatch objectives per epoch (``"minibatch"``).
    epoch_times_ : ndarray
        ``"minibatch"``: wall time of every epoch in seconds.
    n_iter_ : int
        Epochs or alternations run (``partial_fit``: minibatches seen).
    n_steps_ : int
        ``"minibatch"``: dictionary updates (minibatches) run.
    n_polish_ : int
        ``"minibatch"``: exact batch alternations on the covariance after the epochs (0
        when ``n_features`` > 4096: no covariance).
    resumed_from_ : int
        Steps taken from a checkpoint (minibatches for ``"minibatch"``, alternations for
        ``"batch"``); 0 for a fresh run.
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
    n_passes_ : int
        Passes over the data the fit made (of the last batch for ``partial_fit``).
    fit_time_ : float
        Wall-clock seconds the last ``fit`` (or ``partial_fit``) took.
    solver_ : str
        The solver that ran, ``method``.
    n_samples_seen_ : int
        ``"elasticnet"``: the rows seen by ``fit`` and every ``partial_fit`` since.

    Notes
    -----
    Passes over the data per ``fit``:

    * ``"elasticnet"``: 1 (the one-pass moments giving the d × d covariance); every
      iteration runs on the client on d × d and d × k arrays. ``partial_fit`` merges a
      batch's moments into the model's in one pass of it and solves again: ``fit`` on
      every row seen.
    * ``"batch"``: 1 when ``n_features`` ≤ 4096 (the alternation needs only ``C D`` and
      ``Dᵀ C D``, computed from the covariance); otherwise 1 for the mean, the
      randomized-PCA passes for ``init="pca"``, then ``n_iter_ + 1`` (the statistics of
      every dictionary).
    * ``"minibatch"``: 1 before the epochs (mean, and the covariance when ``n_features``
      ≤ 4096, which the initialisation and the polish use), 1 per epoch, none for the
      polish, 1 at the end for the exact objective and variances (a row chunk that
      straddles the boundary of two minibatches is read by both). Minibatch statistics
      are computed with the dictionary of ``PIPELINE_LAG`` (3) updates before, so the
      next minibatches are read while the current one is used (fewer when an epoch has
      fewer minibatches: with one, every epoch uses the current dictionary). Under
      :func:`scalepca.app.cluster.progress` the read-ahead goes on (on its client).
      Epochs compute
      in the data's precision (float32 products for float32 data, float64 ones when the
      ``scalepca.gram-precision`` setting below is ``"float64"``); the final pass is
      float64.

    Memory per worker: one row chunk in float64 plus d × k statistics (and d × d
    partials in the covariance pass). The client holds d × d (covariance methods) or d ×
    k arrays.

    Float32 data: the covariance pass forms the Gram in float32 products summed in
    float64, as :class:`PCA`'s does (its Notes state the bound,
    ``scalepca.linalg.moments.gram_error_bound``);
    ``dask.config.set({"scalepca.gram-precision": "float64"})`` asks for float64
    products (in the covariance pass and the minibatch epochs). Sparse blocks are always
    multiplied and summed in float64.

    A component whose loadings all reach zero stays zero in ``"minibatch"``; ``"batch"``
    with the covariance gives such a component the leading direction of the residual as
    its code at every iteration, so it comes back if the penalty allows.

    Both dictionary methods are a state and a step run by scalepca's iteration driver
    (the one of PPCA's EM and robust PCA), which keeps the history, applies the stopping
    rules and writes the checkpoints. Checkpoints hold the small state only (no data
    pass; d × k arrays written by the client). ``"minibatch"``: the dictionaries of the
    last ``PIPELINE_LAG`` updates, the newest being the current one (the in-flight
    minibatches are recomputed with them), the online statistics A, B and their weight
    and step counters, the code multipliers, the epoch objective so far and the seed of
    the minibatch order, with the driver's smoothed cost and no-improvement counter, so
    a resumed fit visits the same minibatches with the same dictionaries and ends where
    an uninterrupted one ends. ``"batch"``: the dictionary, the multipliers, the
    objective history and the alternation count. A resumed fit makes the first pass
    again (mean, scale and the problem's fingerprint) but not the initialisation. A
    commit is a ``state_<k>`` directory renamed into place once complete, so a process
    killed at any moment leaves the previous commit usable. Commits carry the driver's
    format version: a commit of another version is refused with a message naming both.

    Sparse input (``scipy.sparse`` matrices, pydata ``sparse`` arrays, dask arrays of
    either, turned into CSR row blocks) is never densified: the moments pass works on
    the sparse blocks (``scalepca.linalg.moments_graph``), and the code statistics of
    every dictionary are sparse–dense products with the centring applied implicitly,
    :math:`X_c D = X D - \mathbf{1} (\mu^\top D)` and
    :math:`X_c^\top Z = X^\top Z - \mu (\mathbf{1}^\top Z)` (``use_correlation`` scales
    the stored values, which keeps the sparsity); :math:`\|X_c\|^2` is summed per entry,
    :math:`(v - \mu_j)^2` over stored values and :math:`\mu_j^2` over zeros, without
    cancellation. ``transform`` is :math:`X P - \mu^\top P` on the sparse blocks. The
    fit equals the fit on the densified data to rounding.

    ``partial_fit`` (method ``"minibatch"``) updates the model from one chunk that the
    user streams, centring by a running mean; its ``explained_variance_`` is an estimate
    from the minibatch statistics seen so far. Features NaN in every row of the first
    chunk (or of the data of the ``fit`` it continues) are left out for good; a later
    chunk with values there is refused.

    References
    ----------
    Mairal, J., Bach, F., Ponce, J. & Sapiro, G. (2009). Online dictionary learning for
    sparse coding. Proceedings of the 26th International Conference on Machine
    Learning (ICML), 689–696. (``method="minibatch"``.)

    Mairal, J., Bach, F., Ponce, J. & Sapiro, G. (2010). Online learning for matrix
    factorization and sparse coding. Journal of Machine Learning Research, 11, 19–60.
    (The dictionary methods.)

    Zou, H., Hastie, T. & Tibshirani, R. (2006). Sparse principal component analysis.
    Journal of Computational and Graphical Statistics, 15(2), 265–286.
    (``method="elasticnet"`` and the adjusted ``explained_variance_``.)

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> X = np.random.default_rng(0).standard_normal((2000, 30))
    >>> spca = scalepca.SparsePCA(3, method="batch", alpha=0.3, random_state=0).fit(X)
    >>> spca.components_.shape
    (3, 30)
    """

    #: per-feature attributes widened with NaN at features left out as all-NaN
    _per_feature_attrs = (
        ("components_", 1),
        ("mean_", 0),
        ("scale_", 0),
        ("loadings_", 1),
    )

    #: fit, partial_fit and transform take sparse input (CSR row blocks), kept sparse
    _accepts_sparse = True

    def __init__(
        self,
        n_components: int | None = None,
        *,
        method: str = "minibatch",
        alpha: float | Sequence[float] = 1.0,
        ridge_alpha: float = 0.01,
        n_nonzero: int | Sequence[int] | None = None,
        use_correlation: bool = False,
        batch_size: int | None = None,
        max_iter: int = 100,
        tol: float = 1e-4,
        max_no_improvement: int | None = 10,
        forget_factor: float = 1.0,
        shuffle: bool = True,
        init: str = "pca",
        random_state=None,
        checkpoint: str | None = None,
        checkpoint_every: int = 5,
    ):
        self.n_components = n_components
        self.method = method
        self.alpha = alpha
        self.ridge_alpha = ridge_alpha
        self.n_nonzero = n_nonzero
        self.use_correlation = use_correlation
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.max_no_improvement = max_no_improvement
        self.forget_factor = forget_factor
        self.shuffle = shuffle
        self.init = init
        self.random_state = random_state
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every

    # -- parameters --------------------------------------------------------------------
    @if_updatable
    def partial_fit(self, X, y=None):
        """Update the model with a batch of rows (``"elasticnet"`` and ``"minibatch"``).

        ``"elasticnet"``: the batch's moments are merged into the model's and the
        loadings solved again from the merged covariance, so the model equals ``fit`` on
        every row seen (:meth:`scalepca.PCA.partial_fit` says how). ``"minibatch"``: one
        online step of dictionary learning on the batch
        (``DictionaryLearning.partial_fit``). ``"batch"`` alternates over all the data:
        it has no ``partial_fit`` attribute (the ``AttributeError`` says so;
        scikit-learn's checks test ``hasattr``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A batch of rows, as :meth:`fit` takes them; the features of the first
            batch.
        y : None
            Ignored; present for scikit-learn's API.

        Returns
        -------
        self : SparsePCA
            The updated model.
        """
        if self.method == "minibatch":
            return DictionaryLearning.partial_fit(self, X, y)
        return MomentUpdateMixin.partial_fit(self, X, y)

    #: the parameters (:mod:`._params`), read by fit, the config schema, validate and
    #: load
    _parameters = {
        "n_components": NComponents(),
        "method": Choice(*METHODS),
        "alpha": Other(
            (float, list), _check_alpha, shaped=True, needs=("method", "n_components")
        ),
        "ridge_alpha": Real(0),
        "n_nonzero": Other(
            (int, list, type(None)),
            _check_n_nonzero,
            shaped=True,
            needs=("method", "n_components"),
        ),
        "use_correlation": Flag(),
        "batch_size": Int(1, none=True),
        "max_iter": Int(1),
        "tol": Real(0),
        "max_no_improvement": Int(1, none=True),
        "forget_factor": Real(0),
        "shuffle": Flag(),
        "init": Choice(*INITS),
        "random_state": Seed(),
        "checkpoint": Path(),
        "checkpoint_every": Int(1),
    }
    _parameter_rules = (
        Rule(_checkpoint_needs_iterations, needs=("method", "checkpoint")),
    )

    def _checked_k(self, n: int, d: int, X=None) -> int:
        """Check the parameters for ``n`` × ``d`` data; keep the per-component
        ``alpha`` and ``n_nonzero``; returns the number of components."""
        p = self._check_parameters(n, d, X)
        self._alphas, self._n_nonzero = p["alpha"], p["n_nonzero"]
        return p["n_components"]

    # -- fitting -----------------------------------------------------------------------
    def _fit(self, data: MatrixInput) -> None:
        X = data.data
        n, d = X.shape
        k = self._checked_k(n, d, X)
        self._online_state = None
        self.resumed_from_ = 0
        self.solver_ = self.method  # no "auto": the method is the solver
        if self.method != "minibatch" and self.batch_size is not None:
            warnings.warn(
                f"batch_size is ignored by method={self.method!r}",
                UserWarning,
                stacklevel=3,
            )
        logger.info(
            "SparsePCA: %d × %d (%d row chunks), %d components, method=%s",
            n,
            d,
            X.numblocks[0],
            k,
            self.method,
        )
        # the dictionary methods always take the covariance when it fits (same pass):
        # "batch" alternates on it, "minibatch" is polished on it
        covariance = self.method == "elasticnet" or d <= GRAM_MAX_FEATURES
        # a checkpoint's fingerprint holds a sketch of the data, from the same pass
        sketch = sketch_graph(X) if self.checkpoint is not None else None
        graph = moments_graph(X, with_gram=covariance, also=sketch)
        with self._timed_pass("moments"):
            mom, sketch = computed_with_sketch(graph, sketch)
        data_fp = data_fingerprint(X, sketch) if sketch is not None else None
        self._fit_from_moments(mom, X, data, k, data_fp)

    def _fit_from_moments(
        self, mom: dict, X, data: MatrixInput, k: int, data_fp=None
    ) -> None:
        """The fit from the moments pass: ``fit``'s, or (elastic net) those
        ``partial_fit`` merged, which the model keeps (``_moments_``) for the next
        update."""
        n, d = int(mom["n"]), X.shape[1]
        if self.method == "elasticnet":
            self._moments_, self.n_samples_seen_ = mom, n
        covariance = "m2" in mom
        mom, d, k = self._leave_out_all_nan(mom, n, d, k, data)
        X = self._select_features(X)
        n = int(mom["n"])
        var_n = centred_squares(mom) / n
        scale = self._feature_scale(var_n, self._standardizing_weights(data))
        cov_n = None
        if covariance:
            cov_n = mom["m2"] / n
            if scale is not None:
                cov_n = cov_n / np.outer(scale, scale)
        self._set_problem(n, d, k, np.asarray(mom["mean"], dtype=np.float64), scale)
        if self.method == "elasticnet":
            self._fit_elasticnet(cov_n * (n / max(n - 1, 1)), k)
        else:
            self.alpha_per_sample_ = self._per_sample_alpha(n)
            self._fit_dictionary(X, mom, self.mean_, scale, cov_n, var_n, k, data_fp)

    def _set_problem(self, n: int | None, d: int, k: int, mean, scale) -> None:
        """The fitted problem: its samples, features, components, mean and feature
        scale (``scale=None``: unscaled, ones)."""
        self.n_samples_, self.n_features_in_, self.n_components_ = n, d, k
        self.mean_ = mean
        self.scale_ = np.ones(d) if scale is None else scale

    def _leave_out_all_nan(self, mom: dict, n: int, d: int, k: int, data: MatrixInput):
        """Features NaN in every sample (land masks) leave the fit, as in PCA; other
        NaN or inf raise. Returns the kept features' moments, their number and the
        components for them (``n_components=None``: ``min(n, kept)``)."""
        requested = 0 if self.n_components is None else k  # None: no bound to check yet
        mom, d_fit = self._moments_without_land(mom, n, d, requested, data)
        if d_fit < d:  # k checked again against the features kept
            k = self._checked_k(n, d_fit)
        return mom, d_fit, k

    def _per_sample_alpha(self, n: int) -> float:
        """The l1 weight of the per-sample objective the dictionary kernels minimise.

        scikit-learn's ``½‖Xc − U V‖²_F + alpha ‖V‖₁`` (‖U_:j‖ ≤ 1) is n times
        ``(1/2n)‖Xc − Y Dᵀ‖²_F + (alpha/√n)‖D‖₁`` with ``U = Y/√n``, ``V = √n Dᵀ``.
        """
        return float(self._alphas[0]) / np.sqrt(max(int(n), 1))

    def _feature_scale(self, var_n: np.ndarray, weights: np.ndarray | None = None):
        if not self.use_correlation:
            return None
        sd, n_const = feature_scale(var_n, weights)
        if n_const:
            logger.info("SparsePCA: %d constant feature(s) left unscaled", n_const)
        return sd

    def fit_covariance(self, S, n_samples: int | None = None):
        """Fit from a covariance (or correlation) matrix instead of data.

        Methods ``"elasticnet"`` and ``"batch"`` only need the d × d covariance, so
        published covariance or correlation matrices can be analysed directly. ``mean_``
        is set to zeros (``transform`` then expects centred data).

        Parameters
        ----------
        S : array-like of shape (n_features, n_features)
            Symmetric positive semi-definite covariance (denominator n − 1) or
            correlation.
        n_samples : int, optional
            Number of samples behind ``S`` (stored as ``n_samples_``; not needed
            otherwise).

        Returns
        -------
        self
        """
        self._reset_fitted()
        t0 = time.perf_counter()
        self.n_passes_ = 0
        S = np.array(S, dtype=np.float64, copy=True)
        if S.ndim != 2 or S.shape[0] != S.shape[1]:
            raise ValueError(f"S must be a square matrix; got shape {S.shape}")
        if not np.all(np.isfinite(S)):
            raise ValueError("S contains NaN or infinite values")
        if not np.allclose(
            S, S.T, rtol=1e-10, atol=1e-12 * max(np.abs(S).max(), 1e-300)
        ):
            raise ValueError("S must be symmetric")
        if np.any(np.diag(S) < 0):
            raise ValueError(
                "S has negative diagonal entries; it is not a covariance matrix"
            )
        S = 0.5 * (S + S.T)
        d = S.shape[0]
        check_scalar(
            n_samples, "n_samples", kind=numbers.Integral, low=1, allow_none=True
        )
        k = self._checked_k(d if n_samples is None else n_samples, d)
        if self.method == "minibatch":
            raise ValueError(
                "fit_covariance needs method='elasticnet' "
                "or 'batch'; 'minibatch' streams data"
            )
        self._online_state = None
        scale = self._feature_scale(np.diag(S).copy())
        if scale is not None:
            S = S / np.outer(scale, scale)
        n_fit = None if n_samples is None else int(n_samples)
        self._set_problem(n_fit, d, k, np.zeros(d), scale)
        if self.method == "elasticnet":
            self._fit_elasticnet(S, k)
        else:
            if n_samples is None:
                raise ValueError(
                    "fit_covariance with method='batch' needs n_samples: alpha is "
                    "scikit-learn's penalty on the objective summed over the n "
                    "samples, so the covariance alone does not say how strong it is "
                    "(per sample it is alpha / √n)"
                )
            self.alpha_per_sample_ = self._per_sample_alpha(n_samples)
            seed = check_random_state_seed(self.random_state).spawn(2)[0]
            D, (P, G, s) = self._fit_batch(
                lambda D: (S @ D, D.T @ S @ D, float(np.trace(S))),
                lambda: self._init_dictionary(
                    None, S, None, None, float(np.trace(S)), k, seed
                ),
                S,
            )
            # S is taken as the per-sample covariance: its scale sets the objective's
            # units
            self._finish_dictionary(D, P, G, s, None)
        self.fit_time_ = time.perf_counter() - t0
        return self

    # -- elastic net (ZHT 2006) --------------------------------------------------------
    def _fit_elasticnet(self, S: np.ndarray, k: int) -> None:
        """ZHT's loadings from the covariance (:func:`zht_loadings`), then the
        variances."""
        B, norms, self.n_iter_ = zht_loadings(
            S,
            k,
            alphas=self._alphas,
            n_nonzero=self._n_nonzero,
            ridge=self.ridge_alpha,
            max_iter=self.max_iter,
            tol=self.tol,
        )
        C = flip_signs(B.T)
        self._set_components(C, C @ S @ C.T, float(np.trace(S)), norms)

    # -- shared by both families -------------------------------------------------------
    def _set_components(
        self,
        C: np.ndarray,
        gram: np.ndarray,
        total: float,
        norms: np.ndarray | None = None,
    ) -> None:
        """``components_`` and ZHT's adjusted variances from the scores' covariance
        ``gram``; warns when the penalty removed components (``norms`` of the raw
        loadings 0)."""
        if norms is not None and np.any(norms == 0):
            warnings.warn(
                f"{int(np.sum(norms == 0))} component(s) "
                "are all zero: alpha is too large",
                UserWarning,
                stacklevel=4,
            )
        self.components_ = C
        ev = adjusted_variance(gram)
        self.explained_variance_ = ev
        self.explained_variance_ratio_ = variance_ratio(ev, total)

    # -- scores ------------------------------------------------------------------------
    def _transform_matrix(self) -> np.ndarray:
        """``Cᵀ (C Cᵀ + ridge_alpha I)⁻¹ / scale`` on the features the model was
        fitted on."""
        C = self._kept(self.components_, axis=1)
        gram = C @ C.T
        if self.ridge_alpha > 0:
            P = np.linalg.solve(gram + self.ridge_alpha * np.eye(len(gram)), C).T
        else:
            P = np.linalg.pinv(gram) @ C
            P = P.T
        return P / self._kept(self.scale_)[:, None]

    def _inverse_matrix(self) -> np.ndarray:
        return self.components_ * self.scale_[None, :]

    def objective(self, X) -> float:
        r"""The dictionary objective
        :math:`\frac{1}{2n}\|X_c - Y D^\top\|^2 + \alpha \|D\|_1` on ``X`` (one pass).

        D is ``loadings_ᵀ``, Y the optimal bounded codes for it and α the fitted
        ``alpha_per_sample_``, so this is the value the dictionary methods minimise
        (``objective_`` on the training data).
        """
        if not hasattr(self, "loadings_"):
            self._check_fitted()
            raise ValueError(
                "objective is defined for the dictionary methods ('minibatch', "
                "'batch'), not for 'elasticnet'"
            )
        data = self._transform_input(X)
        scale = self._kept(self.scale_)
        return dictionary_objective_on(
            self._select_features(data.data),
            self._kept(self.loadings_, axis=1).T,
            self.alpha_per_sample_,
            self._kept(self.mean_),
            None if np.all(scale == 1) else scale,
        )
