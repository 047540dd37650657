"""Sparse PCA: dictionary learning streamed over chunks, or ZHT's elastic net on the covariance."""

from __future__ import annotations

import logging
import numbers
import time
import warnings
from collections.abc import Sequence

import dask
import numpy as np

from .._validation import (
    check_choice,
    check_n_components,
    check_random_state_seed,
    check_scalar,
)
from ..io._checkpoint import SmallStateCheckpoint, array_digest, check_checkpoint_path
from ..io._matrix import MatrixInput
from ..linalg import eigh_descending, flip_signs, moments_graph, randomized_svd_centered
from ..linalg.sparse import (
    adjusted_variance,
    code_stats_graph,
    code_step,
    dictionary_bcd,
    dictionary_objective,
    enet_gram_cd,
    enet_gram_path,
    recentre_code_stats,
    revive_codes,
)
from .base import LinearDecompositionMixin, _feature_template
from .pca import AUTO_MAX_GRAM_FEATURES, PCA, raise_on_nonfinite

logger = logging.getLogger(__name__)

METHODS = ("minibatch", "batch", "elasticnet")
INITS = ("pca", "random")
#: minibatch statistics are computed with the dictionary of this many updates ago, so the next
#: minibatch can be read while the current one is being used (deterministic, any worker count)
PIPELINE_LAG = 3
#: up to this many features the penalty form of "elasticnet" follows the LARS-EN path exactly;
#: above, coordinate descent (warm-started) is used
LARS_MAX_FEATURES = 1000
#: coordinate-descent sweeps of the dictionary after each minibatch
ONLINE_SWEEPS = 10
#: above this many features the d × d covariance is not formed (batch: one pass per iteration)
GRAM_MAX_FEATURES = AUTO_MAX_GRAM_FEATURES
#: minibatches are fixed row ranges (format 1, before: the row chunks); a checkpoint of another
#: format cannot be resumed
MINIBATCH_FORMAT = 2
#: default minibatches: at most this many per epoch ...
DEFAULT_MINIBATCHES = 8
#: ... of at least this many rows
MIN_BATCH_ROWS = 256


def default_batch_rows(n: int) -> int:
    """Rows per minibatch when ``batch_size`` is None: ``max(256, ⌈n / 8⌉)``."""
    return max(MIN_BATCH_ROWS, -(-n // DEFAULT_MINIBATCHES))


class SparsePCA(LinearDecompositionMixin):
    """Sparse principal components of data larger than memory.

    Three methods, one estimator:

    ``"minibatch"`` and ``"batch"`` — dictionary learning (reconstruction). Per sample,
    ``min_{Y, D} (1/2n) ‖Xc − Y Dᵀ‖²_F + α ‖D‖₁`` with the codes bounded,
    ``(1/n) ‖Y_:j‖² ≤ 1``; ``Xc`` is the centred data, ``D`` (d × k) the sparse loadings.
    This is scikit-learn's ``SparsePCA`` objective with ``U = Y/√n``, ``V = √n Dᵀ`` and
    ``alpha_sklearn = α √n``. The code step is a ridge regression of each row on the current
    dictionary, ``Y = Xc D (DᵀD + Λ)⁻¹``, with the k multipliers Λ that enforce the bounds
    (exact; a k-dimensional problem). The dictionary step is block coordinate descent over the
    columns of D with soft thresholding,
    ``D_:j ← S_{α/A_jj}(D_:j + (B_:j − D A_:j)/A_jj)``, from ``A = YᵀY/n`` (k × k) and
    ``B = XcᵀY/n`` (d × k) only. ``"batch"`` alternates both steps exactly; ``"minibatch"``
    cuts the rows into consecutive minibatches of about ``batch_size`` rows, accumulating A
    and B online with a forgetting factor (Mairal et al. 2009). The minibatches depend on the
    number of rows only, never on the chunking: the same data in one chunk, in many chunks,
    as NumPy or as xarray give the same fit up to the rounding of the per-chunk sums (tested:
    objective to 1e-10 relative, loadings to 1e-8).

    ``"elasticnet"`` — the penalized-regression sparse PCA of Zou, Hastie & Tibshirani (2006),
    from the covariance S alone (the Gram form of the elasticnet R package's ``spca``): every
    loading solves ``min βᵀ(S + λ₂ I)β − 2 aⱼᵀ S β + λ₁ⱼ ‖β‖₁`` (LARS-EN or coordinate
    descent), alternating with ``A = U Vᵀ`` from the SVD ``S B = U Σ Vᵀ``. This maximises
    variance rather than reconstruction.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of sparse components; ``None`` keeps ``min(n_samples, n_features)``.
    method : {"minibatch", "batch", "elasticnet"}, default="minibatch"
    alpha : float or sequence of float, default=1.0
        The l1 penalty. Dictionary methods: α of the objective above (per sample, in the
        units of the data). ``"elasticnet"``: λ₁ of ZHT in the units of the covariance, one
        number or one per component; ignored when ``n_nonzero`` is given.
    ridge_alpha : float, default=0.01
        Ridge of ``transform``: scores are ``(x − mean_) Cᵀ (C Cᵀ + ridge_alpha I)⁻¹`` for the
        unit components C (for orthogonal components, projections shrunk by
        ``1/(1 + ridge_alpha)``). For ``"elasticnet"`` it is also λ₂, added to the diagonal of
        the covariance.
    n_nonzero : int or sequence of int, optional
        ``"elasticnet"`` only: the number of non-zero loadings of each component, chosen on
        the LARS-EN path (the last point with exactly that many non-zeros).
    use_correlation : bool, default=False
        Standardise every feature by its standard deviation (from the same pass as the mean);
        components then describe the correlation matrix and ``transform`` standardises too.
    batch_size : int, optional
        ``"minibatch"``: the n rows are cut into ``max(1, n // batch_size)`` consecutive
        ranges of (nearly) equal size, so every minibatch holds at least ``batch_size`` rows
        (all rows when n < ``batch_size``), whatever the row chunks. ``None``: at most 8
        minibatches per epoch of at least 256 rows each
        (``max(256, ⌈n / 8⌉)``).
    max_iter : int, default=100
        Epochs (``"minibatch"``) or alternations (``"batch"``, ``"elasticnet"``).
    tol : float, default=1e-4
        Dictionary methods: stop when the objective (per epoch for ``"minibatch"``) decreases
        by less than ``tol`` relative to its value. ``"elasticnet"``: stop when no entry of
        the normalised loadings changes by more than ``tol``.
    max_no_improvement : int or None, default=10
        ``"minibatch"``: stop after this many minibatches without improvement of the smoothed
        minibatch objective; ``None`` disables.
    forget_factor : float, default=1.0
        ``"minibatch"``: ρ ≥ 0 of the online statistics ``A ← β_t A + A_t`` with
        ``β_t = (1 − 1/t)^ρ``; minibatch s then weighs ``(s/t)^ρ`` at update t. 0 keeps every
        minibatch with equal weight.
    shuffle : bool, default=True
        ``"minibatch"``: visit the minibatches in a new random order every epoch.
    init : {"pca", "random"}, default="pca"
        Dictionary methods: start from the principal components (``D = V_k Λ_k^½``) or from
        random directions.
    random_state : int, Generator or None
        Seeds the initialisation and the minibatch order; results do not depend on the
        number of workers.
    checkpoint : str or None, default=None
        ``"minibatch"`` and ``"batch"`` only (a ValueError for ``"elasticnet"``, which
        iterates on the client after one pass). Local directory (a zarr group on a file
        system the client can write) where the iteration state is committed atomically every
        ``checkpoint_every`` steps and at the end; fitting again with the same path resumes
        from the newest complete commit. The checkpoint must belong to the same problem
        (checked: method, penalties, ``n_components``, ``batch_size``, ``forget_factor``,
        ``shuffle``, ``init``, ``use_correlation``, an integer ``random_state``, the data's
        shape, row chunks and statistics from the first pass), else ValueError.
    checkpoint_every : int, default=5
        Steps between commits: minibatches (dictionary updates) for ``"minibatch"``,
        alternations for ``"batch"``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Sparse loadings with exact zeros, each row of unit Euclidean norm (a row of zeros if
        the penalty removed the component). Sign convention: the entry of largest magnitude is
        positive. Dictionary methods order components by their variance. NaN at features that
        are NaN in every sample (land in a gridded field): they are left out of the fit, which
        then equals the fit on the other features (also for ``mean_``, ``scale_``,
        ``loadings_``; ``transform`` ignores them, ``inverse_transform`` returns NaN there).
    mean_ : ndarray of shape (n_features,)
    scale_ : ndarray of shape (n_features,)
        Feature standard deviations if ``use_correlation``, else ones.
    explained_variance_ : ndarray of shape (n_components,)
        Adjusted variance of ZHT (2006): ``R_jj²`` of the QR decomposition of the scores
        ``Xc C_jᵀ``, i.e. what each component adds beyond the previous ones, computed from the
        scores' covariance ``C S Cᵀ`` (no data pass).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the total variance ``tr S``.
    loadings_ : ndarray of shape (n_components, n_features)
        Dictionary methods: the fitted dictionary Dᵀ (``components_`` times each component's
        length), the argument of the objective.
    objective_ : float
        Dictionary methods: the objective at the fitted dictionary with optimal codes.
    cost_history_ : ndarray
        Dictionary methods: objective per iteration (``"batch"``) or row-weighted mean of the
        minibatch objectives per epoch (``"minibatch"``).
    epoch_times_ : ndarray
        ``"minibatch"``: wall time of every epoch in seconds.
    n_iter_ : int
        Epochs or alternations run (``partial_fit``: minibatches seen).
    n_steps_ : int
        ``"minibatch"``: dictionary updates (minibatches) run.
    resumed_from_ : int
        Steps taken from a checkpoint (minibatches for ``"minibatch"``, alternations for
        ``"batch"``); 0 for a fresh run.
    n_components_, n_samples_, n_features_in_, n_passes_ : int

    Notes
    -----
    Passes over the data per ``fit``:

    * ``"elasticnet"``: 1 (the one-pass moments giving the d × d covariance); every
      iteration runs on the client on d × d and d × k arrays.
    * ``"batch"``: 1 when ``n_features`` ≤ 4096 (the alternation needs only ``C D`` and
      ``Dᵀ C D``, computed from the covariance); otherwise 1 for the mean, the randomized-PCA
      passes for ``init="pca"``, then ``n_iter_ + 1`` (the statistics of every dictionary).
    * ``"minibatch"``: 1 before the epochs (mean, and the covariance for ``init="pca"`` when
      ``n_features`` ≤ 4096), 1 per epoch, 1 at the end for the exact objective and variances
      (a row chunk that straddles the boundary of two minibatches is read by both).
      Minibatch statistics are computed with the dictionary of ``PIPELINE_LAG`` (3) updates
      before, so the next minibatches are read while the current one is used (fewer when an
      epoch has fewer minibatches: with one, every epoch uses the current dictionary).
      Under :func:`scalepca.cluster.progress` the read-ahead goes on (on its client).
      Epochs compute
      in the data's precision (float32 products for float32 data); the final pass is float64.

    Memory per worker: one row chunk in float64 plus d × k statistics (and d × d partials in
    the covariance pass). The client holds d × d (covariance methods) or d × k arrays.

    A component whose loadings all reach zero stays zero in ``"minibatch"``; ``"batch"`` with
    the covariance gives such a component the leading direction of the residual as its code
    at every iteration, so it comes back if the penalty allows.

    Checkpoints hold the small state only (no data pass; d × k arrays written by the
    client). ``"minibatch"``: the dictionary and the dictionaries of the last
    ``PIPELINE_LAG`` updates (the in-flight minibatches are recomputed with them), the online
    statistics A, B and their weight and step counters, the code multipliers, the smoothed
    cost and no-improvement counter, the epoch objective so far and the seed (the minibatch
    order is replayed from it), so a resumed fit visits the same minibatches with the same
    dictionaries and ends where an uninterrupted one ends. ``"batch"``: the dictionary, the
    multipliers, the objective history and the alternation count. A resumed fit makes the
    first pass again (mean, scale and the problem's fingerprint) but not the initialisation.
    A commit is a ``state_<k>`` directory renamed into place once complete, so a process
    killed at any moment leaves the previous commit usable.

    ``partial_fit`` (method ``"minibatch"``) updates the model from one chunk that the user
    streams, centring by a running mean; its ``explained_variance_`` is an estimate from the
    minibatch statistics seen so far. Features NaN in every row of the first chunk (or of the
    data of the ``fit`` it continues) are left out for good; a later chunk with values there
    is refused.

    References
    ----------
    Mairal, J., Bach, F., Ponce, J. & Sapiro, G. (2009). Online dictionary learning for sparse
    coding. ICML.
    Zou, H., Hastie, T. & Tibshirani, R. (2006). Sparse principal component analysis. JCGS
    15(2), 265–286.

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> X = np.random.default_rng(0).standard_normal((2000, 30))
    >>> spca = scalepca.SparsePCA(3, method="batch", alpha=0.3, random_state=0).fit(X)
    >>> spca.components_.shape
    (3, 30)
    """

    #: per-feature attributes widened with NaN at features left out as all-NaN
    _per_feature_attrs = (("components_", 1), ("mean_", 0), ("scale_", 0), ("loadings_", 1))

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

    # -- parameters ----------------------------------------------------------------------------
    def _check_params(self, n: int, d: int) -> int:
        check_choice(self.method, "method", METHODS)
        check_choice(self.init, "init", INITS)
        k = check_n_components(self.n_components, n, d)
        check_scalar(self.ridge_alpha, "ridge_alpha", low=0)
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1)
        check_scalar(self.tol, "tol", low=0)
        check_scalar(self.max_no_improvement, "max_no_improvement", kind=numbers.Integral,
                     low=1, allow_none=True)
        check_scalar(self.forget_factor, "forget_factor", low=0)
        check_scalar(self.batch_size, "batch_size", kind=numbers.Integral, low=1,
                     allow_none=True)
        if not isinstance(self.use_correlation, (bool, np.bool_)):
            raise TypeError(f"use_correlation must be True or False; got {self.use_correlation!r}")
        if not isinstance(self.shuffle, (bool, np.bool_)):
            raise TypeError(f"shuffle must be True or False; got {self.shuffle!r}")
        check_checkpoint_path(self.checkpoint)
        check_scalar(self.checkpoint_every, "checkpoint_every", kind=numbers.Integral, low=1)
        if self.checkpoint is not None and self.method == "elasticnet":
            raise ValueError(
                "checkpoint applies to method='minibatch' or 'batch' only ('elasticnet' makes "
                "one pass and iterates on the client: nothing to resume)"
            )
        self._alphas = self._check_alpha(k)
        self._n_nonzero = self._check_n_nonzero(k, d)
        return k

    def _check_alpha(self, k: int) -> np.ndarray:
        a = self.alpha
        if isinstance(a, (str, bytes)) or not (
            isinstance(a, numbers.Real) or isinstance(a, (Sequence, np.ndarray))
        ):
            raise TypeError(f"alpha must be a non-negative number; got {a!r}")
        if isinstance(a, numbers.Real):
            check_scalar(a, "alpha", low=0)
            return np.full(k, float(a))
        if self.method != "elasticnet":
            raise TypeError(
                f"alpha must be one number for method={self.method!r} (one per component is "
                f"allowed for method='elasticnet'); got {a!r}"
            )
        vals = list(a)
        if len(vals) != k:
            raise ValueError(f"alpha has {len(vals)} values; one per component ({k}) is needed")
        for i, v in enumerate(vals):
            check_scalar(v, f"alpha[{i}]", low=0)
        return np.asarray(vals, dtype=np.float64)

    def _check_n_nonzero(self, k: int, d: int):
        nz = self.n_nonzero
        if nz is None:
            return None
        if self.method != "elasticnet":
            raise ValueError(
                f"n_nonzero applies to method='elasticnet' only; method={self.method!r} takes "
                "alpha"
            )
        if isinstance(nz, numbers.Integral) and not isinstance(nz, bool):
            vals = [nz] * k
        elif isinstance(nz, (Sequence, np.ndarray)) and not isinstance(nz, (str, bytes)):
            vals = list(nz)
            if len(vals) != k:
                raise ValueError(
                    f"n_nonzero has {len(vals)} values; one per component ({k}) is needed"
                )
        else:
            raise TypeError(f"n_nonzero must be an integer or a sequence of integers; got {nz!r}")
        for i, v in enumerate(vals):
            check_scalar(v, f"n_nonzero[{i}]", kind=numbers.Integral, low=1, high=d)
        return [int(v) for v in vals]

    # -- fitting -------------------------------------------------------------------------------
    def _fit(self, data: MatrixInput) -> None:
        X = data.data
        n, d = X.shape
        k = self._check_params(n, d)
        self._online_state = None
        self.resumed_from_ = 0
        if self.method != "minibatch" and self.batch_size is not None:
            warnings.warn(f"batch_size is ignored by method={self.method!r}", UserWarning,
                          stacklevel=3)
        logger.info("SparsePCA: %d × %d (%d row chunks), %d components, method=%s", n, d,
                    X.numblocks[0], k, self.method)
        covariance = self.method == "elasticnet" or (
            d <= GRAM_MAX_FEATURES
            and (self.method == "batch" or self.init == "pca" or self.use_correlation)
        )
        with self._timed_pass("moments"):
            (mom,) = dask.compute(moments_graph(X, with_gram=covariance))
        mom, d, k = self._leave_out_all_nan(mom, n, d, k, data)
        X = self._select_features(X)
        n = int(mom["n"])
        mean = np.asarray(mom["mean"], dtype=np.float64)
        if covariance:
            var_n = np.diag(mom["m2"]) / n
        else:
            var_n = mom["ss"] / n
        scale = self._feature_scale(var_n)
        cov_n = None
        if covariance:
            cov_n = mom["m2"] / n
            if scale is not None:
                cov_n = cov_n / np.outer(scale, scale)
        self.n_samples_ = n
        self.n_features_in_ = d
        self.n_components_ = k
        self.mean_ = mean
        self.scale_ = np.ones(d) if scale is None else scale
        if self.method == "elasticnet":
            self._fit_elasticnet(cov_n * (n / max(n - 1, 1)), k)
            return
        seed = check_random_state_seed(self.random_state)
        total_n = float(np.sum(var_n / (1.0 if scale is None else scale**2)))
        ckpt, resumed = None, None
        if self.checkpoint is not None:
            ckpt = SmallStateCheckpoint(self.checkpoint, self._fingerprint(X, k, mom, scale))
            resumed = _resume(ckpt)
            if resumed is not None:
                seed = np.random.SeedSequence(int(resumed[0]["entropy"]),
                                              spawn_key=tuple(resumed[0]["spawn_key"]))
                logger.info("SparsePCA: resuming from checkpoint %s at step %d", ckpt.path,
                            int(resumed[0]["step"]))
        init_seed, order_seed = seed.spawn(2)
        if resumed is None:
            D0 = self._init_dictionary(X, cov_n, mean, scale, total_n, k, init_seed)
        else:
            arrs = resumed[1]
            D0 = arrs["D"] if "D" in arrs else arrs["dicts"][-1]  # batch / minibatch commits
        ck = None if ckpt is None else (
            ckpt, resumed, {"entropy": str(seed.entropy), "spawn_key": list(seed.spawn_key)})
        if self.method == "batch":
            if cov_n is not None:
                D, (P, G, s) = self._fit_batch(
                    lambda D: (cov_n @ D, D.T @ cov_n @ D, float(np.trace(cov_n))), D0, cov_n,
                    ck=ck,
                )
            else:
                D, (P, G, s) = self._fit_batch(lambda D: self._stats_pass(X, mean, scale, D), D0,
                                               ck=ck)
        else:
            D = self._fit_minibatch(X, mean, scale, D0, order_seed, ck=ck)
            P, G, s = self._stats_pass(X, mean, scale, D, label="final")
            self._keep_online_state(D, G, s, mean, n, scale)
        self._finish_dictionary(D, P, G, s, n)

    def _leave_out_all_nan(self, mom: dict, n: int, d: int, k: int, data: MatrixInput):
        """Features NaN in every sample (land masks) leave the fit, as in PCA; other NaN or
        inf raise. Returns the kept features' moments, their number and the components for
        them (``n_components=None``: ``min(n, kept)``)."""
        requested = 0 if self.n_components is None else k  # None: no bound to check yet
        mom, d_fit = PCA._drop_all_nan_features(self, mom, n, d, requested, data)
        return mom, d_fit, (k if d_fit == d else self._check_params(n, d_fit))

    def _fingerprint(self, X, k: int, mom: dict, scale) -> dict:
        """What identifies the problem a checkpoint belongs to (see ``checkpoint``)."""
        rs = self.random_state
        var = np.diag(mom["m2"]) if mom.get("m2") is not None else mom["ss"]
        return {
            "estimator": "SparsePCA", "method": self.method, "shape": list(X.shape),
            "n_components": k, "alpha": float(self._alphas[0]),
            "batch_size": None if self.batch_size is None else int(self.batch_size),
            "forget_factor": float(self.forget_factor), "shuffle": bool(self.shuffle),
            "init": self.init, "use_correlation": bool(self.use_correlation),
            "random_state": int(rs) if isinstance(rs, numbers.Integral) else None,
            "row_chunks": array_digest(X.chunks[0]) if self.method == "minibatch" else None,
            "n": int(mom["n"]), "mean": array_digest(mom["mean"]), "var": array_digest(var),
            "scale": None if scale is None else array_digest(scale),
            # minibatches were the row chunks before format 2 (see MINIBATCH_FORMAT)
            "minibatch_format": MINIBATCH_FORMAT if self.method == "minibatch" else None,
        }

    def _feature_scale(self, var_n: np.ndarray):
        if not self.use_correlation:
            return None
        sd = np.sqrt(np.maximum(var_n, 0.0))
        const = sd <= 1e-12 * max(float(sd.max()), 1e-300)
        if const.any():
            logger.info("SparsePCA: %d constant feature(s) left unscaled", int(const.sum()))
        sd[const] = 1.0
        return sd

    def fit_covariance(self, S, n_samples: int | None = None):
        """Fit from a covariance (or correlation) matrix instead of data.

        Methods ``"elasticnet"`` and ``"batch"`` only need the d × d covariance, so published
        covariance or correlation matrices can be analysed directly. ``mean_`` is set to zeros
        (``transform`` then expects centred data).

        Parameters
        ----------
        S : array-like of shape (n_features, n_features)
            Symmetric positive semi-definite covariance (denominator n − 1) or correlation.
        n_samples : int, optional
            Number of samples behind ``S`` (stored as ``n_samples_``; not needed otherwise).

        Returns
        -------
        self
        """
        for attr in [a for a in vars(self) if a.endswith("_") and not a.startswith("__")]:
            delattr(self, attr)
        t0 = time.perf_counter()
        self.n_passes_ = 0
        S = np.array(S, dtype=np.float64, copy=True)
        if S.ndim != 2 or S.shape[0] != S.shape[1]:
            raise ValueError(f"S must be a square matrix; got shape {S.shape}")
        if not np.all(np.isfinite(S)):
            raise ValueError("S contains NaN or infinite values")
        if not np.allclose(S, S.T, rtol=1e-10, atol=1e-12 * max(np.abs(S).max(), 1e-300)):
            raise ValueError("S must be symmetric")
        if np.any(np.diag(S) < 0):
            raise ValueError("S has negative diagonal entries; it is not a covariance matrix")
        S = 0.5 * (S + S.T)
        d = S.shape[0]
        check_scalar(n_samples, "n_samples", kind=numbers.Integral, low=1, allow_none=True)
        k = self._check_params(d if n_samples is None else n_samples, d)
        if self.method == "minibatch":
            raise ValueError(
                "fit_covariance needs method='elasticnet' or 'batch'; 'minibatch' streams data"
            )
        self._online_state = None
        scale = self._feature_scale(np.diag(S).copy())
        if scale is not None:
            S = S / np.outer(scale, scale)
        self.n_samples_ = None if n_samples is None else int(n_samples)
        self.n_features_in_ = d
        self.n_components_ = k
        self.mean_ = np.zeros(d)
        self.scale_ = np.ones(d) if scale is None else scale
        if self.method == "elasticnet":
            self._fit_elasticnet(S, k)
        else:
            seed = check_random_state_seed(self.random_state)
            D0 = self._init_dictionary(None, S, None, None, float(np.trace(S)), k,
                                       seed.spawn(2)[0])
            D, (P, G, s) = self._fit_batch(
                lambda D: (S @ D, D.T @ S @ D, float(np.trace(S))), D0, S)
            # S is taken as the per-sample covariance: its scale sets the objective's units
            self._finish_dictionary(D, P, G, s, None)
        self.fit_time_ = time.perf_counter() - t0
        return self

    # -- elastic net (ZHT 2006) ----------------------------------------------------------------
    def _fit_elasticnet(self, S: np.ndarray, k: int) -> None:
        d = S.shape[0]
        _, V = eigh_descending(S, k)
        Adir = V[:, :k]
        G = S + self.ridge_alpha * np.eye(d)
        B = np.zeros((d, k))
        prev = None
        it = 0
        while it < self.max_iter:
            it += 1
            SA = S @ Adir
            for j in range(k):
                if self._n_nonzero is not None:
                    B[:, j] = enet_gram_path(G, SA[:, j], n_nonzero=self._n_nonzero[j])
                elif d <= LARS_MAX_FEATURES:  # exact path, unaffected by collinearity
                    B[:, j] = enet_gram_path(G, SA[:, j], lam1=self._alphas[j])
                else:  # coordinate descent, warm-started from the previous alternation
                    B[:, j] = enet_gram_cd(G, SA[:, j], self._alphas[j],
                                           None if prev is None else B[:, j])
            norms = np.linalg.norm(B, axis=0)
            Bn = B / np.where(norms > 0, norms, 1.0)
            if prev is not None and np.max(np.abs(Bn - prev)) <= self.tol:
                break
            prev = Bn
            U, _, Vt = np.linalg.svd(S @ B, full_matrices=False)
            Adir = U @ Vt
        self.n_iter_ = it
        if np.any(norms == 0):
            warnings.warn(
                f"{int(np.sum(norms == 0))} component(s) are all zero: alpha is too large",
                UserWarning, stacklevel=3,
            )
        C = flip_signs(Bn.T)
        self._set_variance(C, C @ S @ C.T, float(np.trace(S)))

    def _set_variance(self, C: np.ndarray, gram: np.ndarray, total: float) -> None:
        self.components_ = C
        ev = adjusted_variance(gram)
        self.explained_variance_ = ev
        self.explained_variance_ratio_ = ev / total if total > 0 else np.zeros_like(ev)

    # -- dictionary learning -------------------------------------------------------------------
    def _init_dictionary(self, X, cov_n, mean, scale, total_n, k, seed) -> np.ndarray:
        """``D = V_k Λ_k^½`` from PCA (the solution at α = 0), or random directions scaled to
        the average variance."""
        d = len(cov_n) if cov_n is not None else X.shape[1]
        if self.init == "pca":
            if cov_n is not None:
                evals, V = eigh_descending(cov_n, k)
                evals = np.maximum(evals[:k], 0.0)
            else:
                Xs = X if scale is None else X / scale
                m = mean if scale is None else mean / scale
                s, Vt = randomized_svd_centered(Xs, m, k, seed=seed)
                self.n_passes_ += 2 + 2 * 4
                V, evals = Vt.T, s**2 / X.shape[0]
            return V[:, :k] * np.sqrt(np.maximum(evals, 1e-300 * max(total_n, 1e-300)))
        rng = np.random.default_rng(seed)
        D = rng.standard_normal((d, k))
        D /= np.linalg.norm(D, axis=0)
        return D * np.sqrt(max(total_n, 1e-300) / d)

    def _stats_pass(self, X, mean, scale, D, *, label="codes"):
        blocks = X.to_delayed(optimize_graph=True).ravel().tolist()
        with self._timed_pass(label):
            (st,) = dask.compute(code_stats_graph(blocks, mean, scale, D))
        m = st["n"]
        return st["P"] / m, st["G"] / m, st["S"] / m

    def _fit_batch(self, stats, D, C=None, *, ck=None):
        """Exact alternation: optimal codes for D (from its statistics), then BCD on D.

        With the covariance ``C``, zero columns get the residual's leading direction as code
        (:func:`revive_codes`), so a component removed early can come back.
        ``ck = (checkpoint, resumed commit or None, seed entropy)``: the state at the top of
        the loop (D, multipliers, history, count) is committed every ``checkpoint_every``
        alternations and at the end; a resumed fit starts at that top again.
        Returns the final D and its statistics ``(P, G, s)``."""
        alpha = float(self._alphas[0])
        history = []
        lam = None
        it = 0
        if ck is not None and ck[1] is not None:
            st, arrs = ck[1]
            history, it = [float(v) for v in st["history"]], int(st["step"])
            lam = arrs["lam"] if st["has_lam"] else None
            self.resumed_from_ = it

        def commit():
            ckpt, _, entropy = ck
            arrays = {"D": D} if lam is None else {"D": D, "lam": lam}
            ckpt.commit(it, arrays, {"step": it, "history": history, "has_lam": lam is not None,
                                     **entropy})

        while True:
            if ck is not None and it > 0 and it % self.checkpoint_every == 0 \
                    and it != self.resumed_from_:
                commit()
            lam_top, history_top = lam, list(history)
            P, G, s = last = stats(D)
            A, B, lam = code_step(D, P, G, lam)
            cost = dictionary_objective(D, A, B, s, alpha)
            history.append(cost)
            if (len(history) > 1 and history[-2] - cost <= self.tol * abs(cost)) \
                    or it >= self.max_iter:
                if ck is not None:  # the state at the top of this last alternation
                    lam, history, lam_end, history_end = lam_top, history_top, lam, history
                    commit()
                    lam, history = lam_end, history_end
                break
            if C is not None:
                A, B = revive_codes(C, D, A, B)
            D, _ = dictionary_bcd(D, A, B, alpha)
            it += 1
        self.n_iter_ = it
        self.cost_history_ = np.asarray(history)
        return D, last

    def _minibatch_bounds(self, n: int) -> np.ndarray:
        """Row boundaries of the minibatches: ``n // rows`` consecutive ranges of (nearly) equal
        size, with ``rows = batch_size`` (default :func:`default_batch_rows`). They depend on the
        number of rows only, never on how the rows are chunked."""
        rows = default_batch_rows(n) if self.batch_size is None else int(self.batch_size)
        count = max(1, n // rows)
        return np.linspace(0, n, count + 1).round().astype(np.int64)

    def _online_update(self, state: dict, D_used, st: dict, D) -> tuple[np.ndarray, float]:
        """Fold one minibatch's statistics (computed with ``D_used``) into the online surrogate
        and update the dictionary ``D``. Returns (new D, the minibatch's objective at D_used)."""
        alpha = float(self._alphas[0])
        m = st["n"]
        A_t, B_t, state["lam"] = code_step(D_used, st["P"] / m, st["G"] / m, state["lam"])
        cost = dictionary_objective(D_used, A_t, B_t, st["S"] / m, alpha)
        state["t"] += 1
        beta = (1.0 - 1.0 / state["t"]) ** self.forget_factor
        state["A"] = beta * state["A"] + m * A_t
        state["B"] = beta * state["B"] + m * B_t
        state["W"] = beta * state["W"] + m
        state["D_G"] = D_used  # partial_fit's variance estimate needs the dictionary used
        D, _ = dictionary_bcd(D, state["A"] / state["W"], state["B"] / state["W"], alpha,
                              max_sweeps=ONLINE_SWEEPS)
        return D, cost

    @staticmethod
    def _new_state(d: int, k: int) -> dict:
        return {"A": np.zeros((k, k)), "B": np.zeros((d, k)), "W": 0.0, "t": 0, "lam": None,
                "D_G": None}

    def _fit_minibatch(self, X, mean, scale, D, seed, *, ck=None) -> np.ndarray:
        d, k = D.shape
        bounds = self._minibatch_bounds(X.shape[0])
        batches = [X[a:b].to_delayed(optimize_graph=True).ravel().tolist()
                   for a, b in zip(bounds[:-1], bounds[1:])]
        n_groups = len(batches)
        lag = min(PIPELINE_LAG, n_groups)  # in flight; fewer than an epoch's minibatches
        rng = np.random.default_rng(seed)
        schedule: list[int] = []  # flat sequence of group indices over epochs, built on demand

        def group_at(t: int) -> int:
            while len(schedule) <= t:
                schedule.extend(rng.permutation(n_groups) if self.shuffle else range(n_groups))
            return int(schedule[t])

        client = _current_client()

        # epochs work in the data's precision (float32 data: float32 products, see
        # block_code_stats); the final pass reporting objective_ and the variances is float64
        work = np.result_type(X.dtype, np.float32)

        def submit(t: int, Dt):
            graph = code_stats_graph(batches[group_at(t)], mean, scale, Dt,
                                     dtype=work)
            return client.compute(graph) if client is not None else _Deferred(graph)

        state = self._new_state(d, k)
        total = n_groups * self.max_iter
        dicts = {-1: D}  # dictionary after update t (t = −1: initial)
        pending: dict[int, object] = {}
        history, epoch_times = [], []
        ewa, best, no_improve = None, np.inf, 0
        epoch_cost, epoch_rows = 0.0, 0
        n_rows = X.shape[0]
        stopped = False
        start = 0
        if ck is not None and ck[1] is not None:
            st, arrs = ck[1]
            start = int(st["step"])
            keys = st["dict_keys"]
            dicts = {int(key): arrs["dicts"][i] for i, key in enumerate(keys)}
            D = dicts[start - 1]
            state.update(A=arrs["A"], B=arrs["B"], W=float(st["W"]), t=int(st["t"]),
                         lam=arrs["lam"] if st["has_lam"] else None,
                         D_G=arrs["D_G"] if st["has_D_G"] else None)
            history, epoch_times = list(st["history"]), list(st["epoch_times"])
            ewa = st["ewa"]
            best = np.inf if st["best"] is None else float(st["best"])
            no_improve = int(st["no_improve"])
            epoch_cost, epoch_rows = float(st["epoch_cost"]), int(st["epoch_rows"])
            stopped = bool(st["stopped"])
            for s in range(start):  # replay the minibatch order drawn so far
                group_at(s)
            self.resumed_from_ = start

        def commit(t: int) -> None:
            """Commit the state after update ``t`` (t + 1 minibatches done)."""
            ckpt, _, entropy = ck
            keys = list(range(max(t + 1 - lag, -1), t + 1))
            arrays = {"A": state["A"], "B": state["B"],
                      "dicts": np.stack([dicts[key] for key in keys])}
            if state["lam"] is not None:
                arrays["lam"] = state["lam"]
            if state["D_G"] is not None:
                arrays["D_G"] = state["D_G"]
            ckpt.commit(t + 1, arrays, {
                "step": t + 1, "dict_keys": keys, "W": float(state["W"]), "t": int(state["t"]),
                "has_lam": state["lam"] is not None, "has_D_G": state["D_G"] is not None,
                "history": [float(v) for v in history],
                "epoch_times": [float(v) for v in epoch_times],
                "ewa": None if ewa is None else float(ewa),
                "best": None if not np.isfinite(best) else float(best),
                "no_improve": int(no_improve), "epoch_cost": float(epoch_cost),
                "epoch_rows": int(epoch_rows), "stopped": bool(stopped), **entropy,
            })

        t_epoch = time.perf_counter()
        t = start - 1
        try:
            for t in range(start, total if not stopped else start):
                for s in range(t, min(t + lag, total)):
                    if s not in pending:
                        pending[s] = (submit(s, dicts[max(s - lag, -1)]),
                                      dicts[max(s - lag, -1)])
                fut, D_used = pending.pop(t)
                t_wait = time.perf_counter()
                st = _result(fut)
                t_upd = time.perf_counter()
                D, cost = self._online_update(state, D_used, st, D)
                logger.debug("SparsePCA: minibatch %d waited %.3fs, update %.3fs", t,
                             t_upd - t_wait, time.perf_counter() - t_upd)
                dicts[t] = D
                dicts.pop(t - lag - 1, None)
                epoch_cost += cost * st["n"]
                epoch_rows += st["n"]
                w = min(1.0, st["n"] / (n_rows + 1.0))
                ewa = cost if ewa is None else (1 - w) * ewa + w * cost
                if ewa < best:
                    best, no_improve = ewa, 0
                else:
                    no_improve += 1
                if (t + 1) % n_groups == 0:
                    self.n_passes_ += 1
                    epoch_times.append(time.perf_counter() - t_epoch)
                    history.append(epoch_cost / epoch_rows)
                    logger.info("SparsePCA: epoch %d objective %.6g (%.2fs)", len(history),
                                history[-1], epoch_times[-1])
                    epoch_cost, epoch_rows = 0.0, 0
                    t_epoch = time.perf_counter()
                    if len(history) > 1 and history[-2] - history[-1] <= self.tol * abs(
                        history[-1]
                    ):
                        stopped = True
                if self.max_no_improvement is not None and no_improve >= self.max_no_improvement:
                    logger.info("SparsePCA: no improvement in %d minibatches; stopping",
                                no_improve)
                    stopped = True
                if ck is not None and ((t + 1) % self.checkpoint_every == 0 or stopped
                                       or t + 1 == total):
                    commit(t)
                if stopped:
                    break
        finally:
            for fut, _ in pending.values():
                if hasattr(fut, "cancel"):
                    fut.cancel()
        if epoch_rows:  # a partial last epoch
            self.n_passes_ += 1
            history.append(epoch_cost / epoch_rows)
            epoch_times.append(time.perf_counter() - t_epoch)
        self.n_iter_ = len(history)
        self.n_steps_ = max(t + 1, 0)
        self.cost_history_ = np.asarray(history)
        self.epoch_times_ = np.asarray(epoch_times)
        self._online_state = {**state, "D": D}
        return D

    def _keep_online_state(self, D, G, s, mean, n, scale) -> None:
        """Leave what ``partial_fit`` needs to go on from a minibatch ``fit``.

        The running mean and row count are the fit's; the code statistics it carries (weighted
        sums, normalised by the dictionary's column norms) are set from the exact per-sample
        statistics of the final pass, at the weight the online state has reached.
        """
        if scale is not None:
            self._online_state = None  # standardised fits cannot stream on
            return
        state = self._online_state
        norms = np.linalg.norm(D, axis=0)
        safe = np.where(norms > 0, norms, 1.0)
        state.update(mean=np.asarray(mean, dtype=np.float64).copy(), N=int(n),
                     S=float(s) * state["W"], Gu=G / np.outer(safe, safe) * state["W"],
                     D_G=D)

    def _finish_dictionary(self, D, P, G, s, n) -> None:
        """Fitted attributes from the final dictionary and its per-sample statistics."""
        alpha = float(self._alphas[0])
        A, B, _ = code_step(D, P, G)
        self.objective_ = float(dictionary_objective(D, A, B, s, alpha))
        norms = np.linalg.norm(D, axis=0)
        if np.any(norms == 0):
            warnings.warn(
                f"{int(np.sum(norms == 0))} component(s) are all zero: alpha is too large",
                UserWarning, stacklevel=3,
            )
        safe = np.where(norms > 0, norms, 1.0)
        gram = G / np.outer(safe, safe)
        order = np.argsort(-np.diag(gram), kind="stable")
        C, Dsigned = flip_signs((D / safe)[:, order].T, D[:, order])
        self.loadings_ = Dsigned.T
        gram = gram[np.ix_(order, order)]
        ratio = 1.0 if n is None else n / max(n - 1, 1)
        self._set_variance(C, gram * ratio, s * ratio)

    # -- streaming by the user -----------------------------------------------------------------
    def partial_fit(self, X, y=None):
        """Update the model with one chunk of rows (``"minibatch"`` only).

        The first call initialises the dictionary from that chunk (reading it twice); later
        calls read their chunk once. Rows are centred by the running mean of all rows seen;
        each chunk's statistics are re-centred exactly when the mean moves.

        Returns
        -------
        self
        """
        state = getattr(self, "_online_state", None)
        first = state is None
        if first and self.__sklearn_is_fitted__():
            raise ValueError(
                "partial_fit can only continue a model built by partial_fit or by "
                "fit(method='minibatch') in this session, without use_correlation"
            )
        data = self._input(X) if first else self._transform_input(X)
        Xd = data.data
        m, d_in = Xd.shape
        d = d_in
        if first:
            self._features_kept = None
            k = self._check_params(m, d)
            if self.method != "minibatch":
                raise ValueError(f"partial_fit needs method='minibatch'; got {self.method!r}")
            if self.use_correlation:
                raise ValueError("use_correlation=True is not supported by partial_fit")
            self.n_passes_ = 0
            gram = self.init == "pca" and d <= GRAM_MAX_FEATURES
            with self._timed_pass("moments"):
                (mom,) = dask.compute(moments_graph(Xd, with_gram=gram))
            mom, d, k = self._leave_out_all_nan(mom, m, d, k, data)
            mean = np.asarray(mom["mean"], dtype=np.float64)
            var = (np.diag(mom["m2"]) if gram else mom["ss"]) / m
            seed = check_random_state_seed(self.random_state).spawn(2)[0]
            if gram:
                D = self._init_dictionary(None, mom["m2"] / m, None, None, float(var.sum()),
                                          k, seed)
            else:  # no covariance of a wide chunk: random directions
                rng = np.random.default_rng(seed)
                D = rng.standard_normal((d, k))
                D *= np.sqrt(max(float(var.sum()), 1e-300) / d) / np.linalg.norm(D, axis=0)
            state = self._new_state(d, k)
            state.update(D=D, mean=mean, N=0, S=0.0, Gu=np.zeros((k, k)))
            self.n_features_in_ = d
            self.n_components_ = k
            self.scale_ = np.ones(d)
            self._feature_template = _feature_template(data)
        D = state["D"]
        blocks, dropped_all_nan = _kept_blocks(Xd, getattr(self, "_features_kept", None))
        with self._timed_pass("partial_fit"):
            st, still_nan = dask.compute(code_stats_graph(blocks, state["mean"], None, D,
                                                          with_sums=True), dropped_all_nan)
        raise_on_nonfinite(int(not np.isfinite(st["S"])))
        if not still_nan:
            raise ValueError(
                "X has values at features that were NaN in every sample of the data the model "
                "was started on (left out of the fit); a streamed model keeps its features"
            )
        N = state["N"] + m
        delta = st["sum_x"] / N  # running mean moves by Σ(x − mean_old) / N
        st = recentre_code_stats(st, delta, D)
        state["mean"] = state["mean"] + delta
        state["N"] = N
        D, _ = self._online_update(state, D, st, D)
        beta = (1.0 - 1.0 / state["t"]) ** self.forget_factor
        norms = np.linalg.norm(state["D_G"], axis=0)
        safe = np.where(norms > 0, norms, 1.0)
        state["Gu"] = beta * state["Gu"] + st["G"] / np.outer(safe, safe)
        state["S"] = beta * state["S"] + st["S"]
        state["D"] = D
        self._online_state = state
        self.mean_ = state["mean"].copy()
        self.n_samples_ = int(N)
        self.n_iter_ = state["t"]
        # estimates from the weighted minibatch statistics (computed with earlier dictionaries)
        gram = state["Gu"] / state["W"]
        norms = np.linalg.norm(D, axis=0)
        safe = np.where(norms > 0, norms, 1.0)
        order = np.argsort(-np.diag(gram), kind="stable")
        C = flip_signs((D / safe)[:, order].T)
        ratio = N / max(N - 1, 1)
        self._set_variance(C, gram[np.ix_(order, order)] * ratio, state["S"] / state["W"] * ratio)
        self._widen_features(d_in)
        return self

    # -- scores ----------------------------------------------------------------------------------
    def _transform_matrix(self) -> np.ndarray:
        """``Cᵀ (C Cᵀ + ridge_alpha I)⁻¹ / scale`` on the features the model was fitted on."""
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
        """The dictionary objective ``(1/2n)‖Xc − Y Dᵀ‖² + α‖D‖₁`` on ``X`` (one pass).

        D is ``loadings_ᵀ`` and Y the optimal bounded codes for it, so this is the value the
        dictionary methods minimise (``objective_`` on the training data).
        """
        if not hasattr(self, "loadings_"):
            self._check_fitted()
            raise ValueError("objective is defined for the dictionary methods ('minibatch', "
                             "'batch'), not for 'elasticnet'")
        data = self._transform_input(X)
        scale = self._kept(self.scale_)
        return dictionary_objective_on(self._select_features(data.data),
                                       self._kept(self.loadings_, axis=1).T, float(self.alpha),
                                       self._kept(self.mean_),
                                       None if np.all(scale == 1) else scale)


def dictionary_objective_on(X, D, alpha: float, mean, scale=None) -> float:
    """``(1/2n)‖Xc − Y Dᵀ‖² + α‖D‖₁`` with optimal bounded codes Y, in one pass over ``X``.

    ``Xc = (X − mean) / scale``. scikit-learn's ``SparsePCA`` solution (U, V) corresponds to
    ``D = Vᵀ / √n`` and ``alpha = alpha_sklearn / √n``; the value is then its objective / n
    (or less, the codes being re-optimised).
    """
    D = np.asarray(D, dtype=np.float64)
    blocks = X.to_delayed(optimize_graph=True).ravel().tolist()
    (st,) = dask.compute(code_stats_graph(blocks, np.asarray(mean, dtype=np.float64), scale, D))
    m = st["n"]
    A, B, _ = code_step(D, st["P"] / m, st["G"] / m)
    return float(dictionary_objective(D, A, B, st["S"] / m, alpha))


def _resume(ckpt: SmallStateCheckpoint):
    """``ckpt.resume()``, refusing a minibatch checkpoint of an earlier format by name."""
    try:
        return ckpt.resume()
    except ValueError as err:
        if "(minibatch_format: None there" not in str(err):
            raise
        raise ValueError(
            f"the checkpoint at {ckpt.path} was written by scalepca before minibatch format "
            f"{MINIBATCH_FORMAT} (its minibatches were the data's row chunks; they are now "
            "fixed row ranges, independent of the chunking), so this version cannot resume "
            "it; delete it or use another checkpoint path"
        ) from None


def _kept_blocks(X, keep):
    """Delayed row blocks of ``X`` restricted to the ``keep`` features, and a Delayed that is
    True when the other features are NaN in every row (True if all are kept). Each block is
    read once for both."""
    blocks = X.to_delayed(optimize_graph=True).ravel().tolist()
    if keep is None:
        return blocks, True
    kept = [dask.delayed(np.compress, pure=True)(keep, b, axis=1) for b in blocks]
    nan = [dask.delayed(_all_nan, pure=True)(b, ~keep) for b in blocks]
    return kept, dask.delayed(all, pure=True)(nan)


def _all_nan(block, columns) -> bool:
    return bool(np.isnan(np.asarray(block)[:, columns]).all())


class _Deferred:
    """A graph computed when its result is asked for (schedulers without futures)."""

    def __init__(self, graph):
        self.graph = graph

    def result(self):
        (out,) = dask.compute(self.graph)
        return out


def _result(fut, wait: float = 10.0):
    """``fut.result()``; if the scheduler goes away while the result is being fetched, the
    error is the client's own "lost the connection to the scheduler" cancellation (as for
    ``dask.compute``) rather than the socket error of the interrupted transfer."""
    try:
        return fut.result()
    except OSError:  # distributed's CommClosedError is an OSError
        if not hasattr(fut, "status"):
            raise
        deadline = time.monotonic() + wait
        while fut.status != "cancelled" and time.monotonic() < deadline:
            time.sleep(0.05)
        if fut.status != "cancelled":
            raise
    return fut.result()  # raises FutureCancelledError naming the lost connection


def _current_client():
    """The distributed Client that ``dask.compute`` would run on now, or None.

    That is the default client when the scheduler is its ``get`` method, or the client of a
    scheduler object that runs graphs on one (``scalepca.cluster.progress`` sets such an
    object, with a ``client`` attribute, to draw progress bars).
    """
    try:
        from distributed import Client
    except ImportError:
        return None
    sched = dask.base.get_scheduler()
    owner = getattr(sched, "__self__", None)
    if owner is None:
        owner = getattr(sched, "client", None)
    return owner if isinstance(owner, Client) and owner.status == "running" else None
