"""Probabilistic PCA (Tipping & Bishop 1999): closed form from one pass of moments,
or EM (also with entries missing at random)."""

from __future__ import annotations

import logging
import numbers
import warnings

import dask
import dask.array as da
import numpy as np

from .._validation import (
    check_random_state_seed,
    check_scalar,
    is_sparse,
)
from ..io._checkpoint import array_digest
from ..io._fingerprint import (
    data_fingerprint,
    random_state_param,
    result_params,
    sketch_graph,
)
from ..linalg import eigh_descending, flip_signs, variance_ratio
from ..linalg.em import (
    estep_graph,
    impute_block,
    loglike_rows_block,
    mstep,
    observed_moments_graph,
    posterior_mean_block,
)
from ..preprocessing._matrix import MatrixInput
from ..solvers.choice import AUTO_MAX_GRAM_FEATURES, ppca_solver
from ._gaussian import _delayed_sample, _rank_tol, _sample_block, _warn_rank_deficient
from ._incremental import PPCAMomentUpdate
from ._iterate import (
    ChangeBelow,
    IterationCheckpoint,
    computed_with_sketch,
    iterate,
)
from ._params import Choice, Int, NComponents, Path, Real, Rule
from ._ppca_params import (
    EM_FINGERPRINT_IGNORES,
    _checkpoint_needs_em,
    _em_bound,
    _em_needs_dense_rows,
    _em_needs_integer_k,
    _missing_needs_em,
)
from .base import affine_map
from .pca import SPECTRAL_RULES, _BaseSpectralPCA

logger = logging.getLogger(__name__)


class PPCA(PPCAMomentUpdate, _BaseSpectralPCA):
    r"""Probabilistic PCA: :math:`x = W z + \mu + \varepsilon`,
    :math:`z \sim N(0, I_k)`, :math:`\varepsilon \sim N(0, \sigma^2 I_d)`.

    Two solvers. ``"closed_form"``: the maximum-likelihood solution (Tipping & Bishop
    1999) from the sample covariance :math:`S = U \Lambda U^\top`: :math:`\mu` is the
    sample mean,

    .. math::

        \sigma^2 = \frac{1}{d-k} \sum_{j=k+1}^{d} \lambda_j ,
        \qquad W = U_k (\Lambda_k - \sigma^2 I)^{1/2}

    (taking the rotation :math:`R = I`): :math:`\sigma^2` is the mean of *all*
    :math:`d - k` discarded eigenvalues (with :math:`n \le d`, the zero ones included:
    this is the likelihood's maximum and EM's limit, and differs from :class:`PCA`'s
    ``noise_variance_``, which follows scikit-learn and averages over
    :math:`\min(n, d) - k` of them). ``"em"``: expectation-maximisation, which also fits
    data with missing entries (``missing="em"``: NaN = missing at random; each row's
    E-step uses its observed entries only, with its own k × k posterior, and the M-step
    solves for :math:`W`, :math:`\mu` and :math:`\sigma^2` from sufficient statistics
    reduced across chunks — see ``scalepca.linalg.em``).

    Parameters
    ----------
    n_components : int, float, "mle" or None
        Latent dimension k; must be smaller than the data's rank for a proper σ² > 0
        (``solver="em"`` requires ``n_components < n_features``, and ``None`` keeps
        ``min(n_samples, n_features - 1)`` components there). The closed form also takes
        a float in (0, 1) or ``"mle"``, chosen from the spectrum as :class:`PCA` chooses
        them (``n_components_`` holds the k); EM needs an integer. When the data's rank
        is at most k (e.g. constant features, or few samples), σ² is 0 with a warning:
        the model covariance is then singular, so ``score``, ``score_samples`` and
        ``get_precision`` raise, while ``transform`` gives the σ² → 0 limit of the
        posterior means.
    solver : {"auto", "closed_form", "em"}, default="auto"
        ``"auto"``: ``"em"`` when ``missing="em"``, else ``"closed_form"``.
    missing : {"error", "em"}, default="error"
        ``"error"``: a NaN in the data raises. ``"em"``: NaN entries are missing at
        random (needs ``solver="em"`` or ``"auto"``). In both cases features that are
        NaN in every sample (e.g. land in an ocean grid) are left out with a warning and
        come back as NaN in ``components_``, ``W_`` and ``mean_``; with ``missing="em"``
        rows with no observed value are left out with a warning too. Infinite values
        always raise.
    max_iter : int, default=200
        Most EM iterations (``solver="em"``).
    tol : float, default=1e-6
        EM stops when the observed-data log-likelihood per sample changes by less than
        ``tol`` between two iterations (a change that does not depend on the data's
        units).
    init : {"auto", "pca", "random"}, default="auto"
        EM starting point, from one initialisation pass over the data. ``"pca"``: the
        closed form fitted to the data with missing entries replaced by their feature's
        observed mean (d × d statistics per block). ``"random"``: :math:`W` with
        independent :math:`N(0, \bar v/k)` entries drawn from ``random_state``,
        :math:`\sigma^2 = \bar v` (:math:`\bar v` the mean observed variance),
        :math:`\mu` the observed means — for data too wide for a d × d matrix.
        ``"auto"``: ``"pca"`` up to 4096 features, ``"random"`` above.
    svd_solver, n_oversamples, n_power_iter
        As in :class:`PCA`, which computes the spectrum of the closed form.
    random_state : int, Generator or None
        Seed of the randomized SVD solver and of ``init="random"``.
    persist : bool, default=False
        Hold the data in cluster memory during the fit (``X.persist()``) instead of
        reading the store again on every EM iteration (and, as in :class:`PCA`, for the
        multi-pass closed-form solvers). Worth it when the array fits in the workers'
        memory — each EM iteration otherwise costs one full read of the store; harmful
        when it does not (workers spill to disk).
    checkpoint : str or None, default=None
        ``solver="em"`` only (a ValueError with the closed form). Local directory (a
        zarr group) where the EM state is committed atomically every
        ``checkpoint_every`` iterations and at the end; fitting again with the same path
        resumes from the newest complete commit. A checkpoint of another problem —
        another value of a parameter that changes the result (all but ``checkpoint``,
        ``checkpoint_every``, ``persist``, the closed form's ``svd_solver``,
        ``n_oversamples`` and ``n_power_iter``, and the stopping parameters), or other
        data — is refused with a ValueError naming what differs, and left untouched.
        The resumed fit stops at its own ``tol`` and ``max_iter``; see :doc:`/hpc`.
    checkpoint_every : int, default=5
        EM iterations between commits.
    standardize : bool, default=False
        Closed form only: the model of the standardised data ``(x − mean_) / scale_``
        (the correlation matrix), from the same one moments pass, as :class:`PCA`'s
        ``standardize``. ``scale_`` holds the per-feature standard deviations (1 for
        constant features; of the data before ``open_matrix``'s weights, which are
        applied after the standardisation, as PCA's); ``get_covariance``,
        ``score_samples`` and ``sample`` speak of ``x`` itself, and the EOF tools
        (:mod:`scalepca.analysis.eof`) project the standardised data, maps in the
        field's own units.

    Attributes
    ----------
    W_ : ndarray of shape (n_features, n_components)
        Loading matrix :math:`U_k \operatorname{diag}(\sqrt{\lambda - \sigma^2})` (the
        EM solution is rotated to this form).
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal :math:`U_k^\top` (same sign convention as :class:`PCA`).
    noise_variance_ : float
        :math:`\sigma^2`, Tipping & Bishop's maximum-likelihood estimate scaled to the
        sample-covariance convention (:math:`\times\, n/(n-1)`, as ``W_``; see Notes):
        the mean of the :math:`d - k` eigenvalues after the k-th, zeros included.
        Float32 data with float32 products (the default): see Notes for its accuracy.
    posterior_covariance_ : ndarray of shape (n_components, n_components)
        :math:`\sigma^2 M^{-1}` with :math:`M = W^\top W + \sigma^2 I`; the covariance
        of :math:`z` given a fully observed :math:`x`.
    explained_variance_ : ndarray of shape (n_components,)
        Model variances along the components, :math:`\lambda_i`
        (:math:`s_i^2 + \sigma^2` for EM).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the total variance; for EM the model's total
        :math:`\operatorname{tr}(W W^\top + \sigma^2 I)`, which equals the sample total
        at the complete-data optimum.
    n_iter_ : int
        EM iterations run; 1 for the closed form (one solve).
    loglike_ : ndarray of shape (n_iter_,)
        Observed-data log-likelihood per sample at the parameters each EM iteration
        started from (computed in the same pass as that iteration's E-step);
        non-decreasing. Empty for the closed form. It is the likelihood of the matrix
        fitted: with weights from ``open_matrix``, of the weighted data (``score`` of
        the same data adds the weights' log-Jacobian, the data being scored in their own
        units).
    converged_ : bool
        Whether EM met ``tol`` within ``max_iter``.
    resumed_from_ : int
        EM iterations taken from a checkpoint (0 for a fresh run or the closed form).
    solver_ : str
        The solver that ran, ``"closed_form"`` or ``"em"`` (``solver="auto"`` resolved).
    svd_solver_ : str
        The closed form only: the eigensolver that ran, as :class:`PCA`'s ``solver_``.
    mean_ : ndarray of shape (n_features,)
        :math:`\mu`: the per-feature mean of the (weighted) training data; with missing
        entries, the estimate EM converged to.
    scale_ : ndarray of shape (n_features,)
        Per-feature standard deviations with ``standardize=True`` (ones otherwise), as
        :class:`PCA`'s.
    singular_values_ : ndarray of shape (n_components,)
        :math:`\sqrt{(n - 1) \lambda_i}` for the ``explained_variance_``
        :math:`\lambda_i`, as :class:`PCA`'s.
    n_components_ : int
        The number of components kept.
    n_samples_ : int
        Number of samples (rows) in the training data.
    n_samples_seen_ : int
        The closed form with ``svd_solver="covariance_eigh"``: the rows seen by ``fit``
        and every ``partial_fit`` since.
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

    Notes
    -----
    Passes over the data: closed form 1 (the one-pass moments of :class:`PCA`); EM
    ``1 + n_iter_`` — one initialisation pass, then exactly one pass per iteration.
    Memory per worker: one row chunk (as float64) plus, closed form and ``init="pca"``,
    d × d partials; per EM iteration, for a row chunk of m rows with missing entries, m
    × (k+1)² posterior moments and a d × (k+1)² partial (blocks without missing entries
    share one k × k posterior and return (k+1)² and d × (k+1) partials). The client
    holds d × (k+1)² arrays. ``partial_fit``: the closed form with
    ``svd_solver="covariance_eigh"`` is updated batch by batch as :class:`PCA`'s (one
    pass a batch, equal to ``fit`` on every row); EM has none.

    Float32 data: the closed form's covariance pass is :class:`PCA`'s, with the accuracy
    its Notes state: each eigenvalue within a fraction of
    :math:`\varepsilon_{32} \lambda_1`, so a trailing ``explained_variance_`` or its
    North error up to :math:`1.5 \cdot 10^{-8}\, \lambda_1/\lambda` relative and
    ``noise_variance_`` at most :math:`0.01\, \varepsilon_{32} \lambda_1` (measured);
    where those digits matter,
    ``dask.config.set({"scalepca.gram-precision": "float64"})`` asks for float64
    products.

    Checkpoints: a commit holds :math:`W`, :math:`\mu`, :math:`\sigma^2`, the iteration
    count and the log-likelihood history (d × k numbers, written by the client; no data
    pass). A resumed fit makes the initialisation pass again (it gives the mean, the
    kept features and the problem's fingerprint), then continues with iteration
    ``k + 1`` from the committed parameters: each iteration is a deterministic function
    of them, so it ends where an uninterrupted fit ends (to rounding when the data are
    chunked differently). A commit is a ``state_<k>`` directory renamed into place only
    once complete, so a process killed at any moment leaves the previous commit usable.
    The loop, its stopping rule and the commits are those of scalepca's iteration
    driver, shared with the other iterative fits (commits carry its format version).

    EM maximises the likelihood, whose covariance estimate has denominator n; to agree
    with the closed form (denominator n − 1, as :class:`PCA`), the final :math:`W` and
    :math:`\sigma^2` are scaled by :math:`n/(n-1)`. Without missing data EM converges to
    the closed form (the test suite checks :math:`W W^\top` and :math:`\sigma^2` to 1e-6
    relative).

    ``transform`` is the posterior mean :math:`M_n^{-1} W_O^\top (x_O - \mu_O)` using
    each row's observed entries (rows may have NaN, with either solver; a row with no
    observed entry gives NaN, an infinite entry raises as in ``fit``);
    ``inverse_transform`` maps :math:`z \mapsto W z + \mu`; ``impute`` fills NaN entries
    with :math:`W \langle z \rangle + \mu` (lazy); ``score_samples`` is the exact
    Gaussian log-likelihood of each row's observed entries under
    :math:`C = W W^\top + \sigma^2 I`, computed from k-dimensional factors (Woodbury),
    never inverting a d × d matrix, and carried to the data's own units (the
    log-Jacobian of the weights and of ``standardize`` over the observed entries; see
    :meth:`~scalepca.PPCA.score_samples`).

    Sparse input (``scipy.sparse``, pydata ``sparse``, dask arrays of either) takes the
    closed form, as :class:`PCA` does (``covariance_eigh`` or ``randomized``, centred
    implicitly, never densified); ``transform`` is :math:`(X W - \mu^\top W) M^{-1}` and
    ``score_samples`` uses :math:`\|x - \mu\|^2 = \|x\|^2 - 2 x^\top \mu + \|\mu\|^2`
    row by row. Sparse rows have no missing entries (an unstored entry is a zero), so
    ``solver="em"``, ``missing="em"`` and ``impute`` refuse them.

    PPCA shares its spectral fit with :class:`PCA` but is not a :class:`PCA`
    (``isinstance(PPCA(), PCA)`` is False): its ``transform`` is a posterior mean, not a
    projection. At least 2 samples are needed.

    References
    ----------
    Tipping, M. E. & Bishop, C. M. (1999). Probabilistic principal component analysis.
    Journal of the Royal Statistical Society: Series B, 61(3), 611–622.

    Roweis, S. (1998). EM algorithms for PCA and SPCA. Advances in Neural Information
    Processing Systems 10, 626–632.

    Ilin, A. & Raiko, T. (2010). Practical approaches to principal component analysis
    in the presence of missing values. Journal of Machine Learning Research, 11,
    1957–2000. (EM with entries missing at random.)

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((1000, 3)) @ rng.standard_normal((3, 20))
    >>> X += 0.1 * rng.standard_normal((1000, 20))   # noise of variance 0.01
    >>> ppca = scalepca.PPCA(n_components=3).fit(X)
    >>> round(float(ppca.noise_variance_), 3)
    0.01
    >>> X[0, 5] = np.nan                                 # a gap in the first row
    >>> filled = ppca.impute(X[:1])                      # from the row's other entries
    >>> bool(np.isnan(filled).any()), filled.shape
    (False, (1, 20))
    """

    _per_feature_attrs = (("components_", 1), ("mean_", 0), ("scale_", 0), ("W_", 0))

    #: the parameters (:mod:`._params`), read by fit, the config schema, validate and
    #: load
    _parameters = {
        **_BaseSpectralPCA._parameters,
        # EM keeps at most n_features − 1 components (None: that many)
        "n_components": NComponents(
            fraction=True, bound=_em_bound, needs=("solver", "missing")
        ),
        "solver": Choice("auto", "closed_form", "em"),
        "missing": Choice("error", "em"),
        "max_iter": Int(1),
        "tol": Real(0.0),
        "init": Choice("auto", "pca", "random"),
        "checkpoint": Path(),
        "checkpoint_every": Int(1),
    }
    _parameter_rules = (
        Rule(_missing_needs_em, needs=("solver", "missing")),
        Rule(_checkpoint_needs_em, needs=("solver", "missing", "checkpoint")),
        Rule(_em_needs_dense_rows, needs=("solver", "missing", "standardize")),
        Rule(_em_needs_integer_k, needs=("solver", "missing", "n_components")),
        *SPECTRAL_RULES,
    )

    def __init__(
        self,
        n_components: int | float | str | None = None,
        *,
        solver: str = "auto",
        missing: str = "error",
        max_iter: int = 200,
        tol: float = 1e-6,
        init: str = "auto",
        svd_solver: str = "auto",
        n_oversamples: int = 10,
        n_power_iter: int = 4,
        random_state=None,
        persist: bool = False,
        checkpoint: str | None = None,
        checkpoint_every: int = 5,
        standardize: bool = False,
    ):
        self.n_components = n_components
        self.svd_solver = svd_solver
        self.n_oversamples = n_oversamples
        self.n_power_iter = n_power_iter
        self.random_state = random_state
        self.persist = persist
        self.solver = solver
        self.missing = missing
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.standardize = standardize

    _transform_keeps_2d_blocks = False  # transform and scores map whole rows

    @property
    def _transform_allows_nan(self) -> bool:
        """With ``missing="em"`` NaN entries are missing values in fit and transform
        (the scikit-learn tag ``allow_nan``); with ``missing="error"`` NumPy input
        with NaN is refused by ``transform`` and ``score`` as by ``fit`` (``impute``
        always takes NaN)."""
        return self.missing == "em"

    @property
    def _takes_sparse(self) -> bool:
        # the closed form takes CSR blocks; EM (solver="em", or "auto" with
        # missing="em") maps dense rows and refuses them
        return super()._takes_sparse and self.solver != "em" and self.missing != "em"

    def _fit_keeps_2d_blocks(self, solver: str) -> bool:
        # EM maps whole rows; only the closed form with the randomized solver takes 2-D
        # blocks
        return ppca_solver(
            self.solver, self.missing
        ) == "closed_form" and super()._fit_keeps_2d_blocks(solver)

    def _fit(self, data: MatrixInput) -> None:  # parameters checked in _fit_input
        solver = ppca_solver(self.solver, self.missing)
        self.solver_ = solver
        self.resumed_from_ = 0
        self.n_iter_ = 1  # the closed form is one solve; EM sets its iteration count
        self.loglike_ = np.zeros(0)
        self.converged_ = True
        if solver == "closed_form":
            super()._fit(data)
            self._set_loadings_from_spectrum()
        else:
            vars(self).pop("_fit_choice", None)  # the closed form's: not run
            self._fit_em(data)

    def _record_solver(self, svd_solver: str) -> None:
        """The closed form's record: ``solver_`` stays ``"closed_form"``, the
        eigensolver it ran is ``svd_solver_``."""
        self.svd_solver_ = svd_solver

    def _solver_that_ran(self) -> str | None:
        return getattr(self, "svd_solver_", None)

    # -- EM ----------------------------------------------------------------------------
    def _fit_em(self, data: MatrixInput) -> None:
        X = data.data
        n, d = X.shape
        # None keeps every direction but one, which σ² describes (see _parameters)
        k = self._check_parameters(n, d, X)["n_components"]
        init = self.init
        if init == "auto":
            init = "pca" if d <= AUTO_MAX_GRAM_FEATURES else "random"
        logger.info(
            "PPCA: EM on %d × %d (%d row chunks), init=%s, missing=%s",
            n,
            d,
            X.numblocks[0],
            init,
            self.missing,
        )
        if self.persist:
            logger.info(
                "persisting %.1f MB in %d blocks in cluster memory",
                X.nbytes / 1e6,
                X.npartitions,
            )
            X = X.persist()
        mom, keep, n_rows, n_missing, sketch = self._em_observed_moments(
            X, k, init, data
        )
        var = mom["var"][keep]
        vbar = float(var.mean()) if var.size else 1.0
        floor = 1e-12 * vbar if vbar > 0 else 1e-300
        Xf = self._select_features(X)

        def step(state, it):
            with self._timed_pass(f"EM iteration {it}"):
                (stats,) = dask.compute(
                    estep_graph(Xf, state["mean"], state["W"], state["sigma2"])
                )
            W, mean, sigma2 = mstep(stats, state["mean"], k, min_sigma2=floor)
            state = {"W": W, "mean": mean, "sigma2": float(sigma2)}
            return state, {"loglike": float(stats["ll"] / n_rows)}

        ckpt = None
        if self.checkpoint is not None:
            used_seed = (
                random_state_param(self.random_state) if init == "random" else None
            )
            fingerprint = {
                "estimator": "PPCA-EM",
                **result_params(
                    self,
                    EM_FINGERPRINT_IGNORES,
                    {
                        "n_components": k,
                        "solver": "em",
                        "init": init,
                        "random_state": used_seed,
                    },
                ),
                **data_fingerprint(
                    X,
                    sketch,
                    {
                        "n_rows": n_rows,
                        "n_missing": n_missing,
                        "keep": array_digest(np.flatnonzero(keep)),
                        "mean": array_digest(mom["mean"][keep]),
                        "var": array_digest(var),
                    },
                ),
            }
            ckpt = IterationCheckpoint(self.checkpoint, fingerprint)
        run = iterate(
            step,
            lambda: self._em_start(mom, keep, n_rows, k, init, vbar, floor),
            stop=ChangeBelow("loglike", self.tol, label="log-likelihood per sample"),
            max_iter=self.max_iter,
            checkpoint=ckpt,
            checkpoint_every=self.checkpoint_every,
            name="PPCA EM",
            stacklevel=4,
        )
        self.resumed_from_ = run.resumed_from
        self.n_iter_ = run.n_iter
        self.loglike_ = np.asarray(run.history.get("loglike", []), dtype=np.float64)
        self.converged_ = run.converged
        state = run.state
        if state["sigma2"] <= floor:  # the likelihood grows without bound as σ² → 0
            _warn_rank_deficient(k)
            state = {**state, "sigma2": 0.0}
        self._set_em_result(state, n_rows, k)

    def _em_observed_moments(self, X, k: int, init: str, data: MatrixInput):
        """The initialisation pass: observed moments, checks, features and rows kept,
        and the data's sketch for a checkpoint's fingerprint (in the same pass)."""
        n, d = X.shape
        sketch = None if self.checkpoint is None else sketch_graph(X)
        graph = observed_moments_graph(X, with_gram=init == "pca", also=sketch)
        with self._timed_pass("EM initialisation"):
            mom, sketch = computed_with_sketch(graph, sketch)
        if mom["n_inf"]:
            raise ValueError(
                f"X contains {mom['n_inf']} infinite value(s); "
                "replace them (NaN marks a missing entry)"
            )
        n_rows = int(mom["n"])
        n_missing = int(mom["n_missing"] - n_rows * int((mom["c"] == 0).sum()))

        def check(land):  # other NaN (missing="error"), no value at all, empty rows
            if self.missing == "error" and (n_missing or mom["n_empty"]):
                raise ValueError(
                    f"X contains {n_missing + mom['n_empty'] * d} NaN value(s) "
                    f"(outside "
                    "features that are NaN in every sample); use PPCA(missing='em') "
                    "to treat NaN as missing at random, or remove/impute them"
                )
            if land.all():
                raise ValueError("X has no observed value (every entry is NaN)")
            if mom["n_empty"]:
                warnings.warn(
                    f"PPCA: {mom['n_empty']} of {n} rows have no observed value; "
                    "they are left out of the fit",
                    UserWarning,
                    stacklevel=7,
                )

        keep = self._leave_out_land(mom["c"], data, check=check)
        d_fit = int(keep.sum())
        if k >= d_fit or k > n_rows:
            raise ValueError(
                f"n_components={k} is too large: after leaving out empty "
                f"rows/features there are {n_rows} samples and {d_fit} "
                "features (n_components must be < n_features and <= n_samples)"
            )
        return mom, keep, n_rows, n_missing, sketch

    def _em_start(
        self, mom, keep, n_rows: int, k: int, init: str, vbar: float, floor: float
    ):
        """EM's starting state ``{"W", "mean", "sigma2"}`` (see ``init``)."""
        mean = mom["mean"][keep]
        if init == "pca":
            cov = mom["U"][np.ix_(keep, keep)] / max(n_rows - 1, 1)
            evals, evecs = eigh_descending(cov)
            evals = np.maximum(evals, 0.0)
            rank = min(n_rows, int(keep.sum()))
            sigma2 = float(np.mean(evals[k:rank])) if rank > k else 0.0
            sigma2 = max(sigma2, 1e-6 * vbar, floor)
            W = evecs[:, :k] * np.sqrt(np.maximum(evals[:k] - sigma2, 1e-6 * vbar))
        else:
            rng = np.random.default_rng(check_random_state_seed(self.random_state))
            W = rng.standard_normal((int(keep.sum()), k)) * np.sqrt(
                max(vbar, floor) / k
            )
            sigma2 = max(vbar, floor)
        return {"W": W, "mean": mean, "sigma2": float(sigma2)}

    def _set_em_result(self, state: dict, n_rows: int, k: int) -> None:
        """Fitted attributes from EM's final state, in the closed form's conventions."""
        # ML (denominator n) → the closed form's sample-covariance convention (n − 1)
        bessel = n_rows / max(n_rows - 1, 1)
        W = state["W"] * np.sqrt(bessel)
        sigma2 = state["sigma2"] * bessel
        d_fit = W.shape[0]
        U, s, _ = np.linalg.svd(W, full_matrices=False)
        components = flip_signs(U.T)
        ev = s**2 + sigma2
        total = float((s**2).sum() + d_fit * sigma2)
        self.n_samples_ = n_rows
        self.n_components_ = k
        self.mean_ = np.asarray(state["mean"], dtype=np.float64)
        self.components_ = components
        self.W_ = components.T * s
        self.noise_variance_ = float(sigma2)
        self.explained_variance_ = ev
        self.explained_variance_ratio_ = variance_ratio(ev, total)
        self.singular_values_ = np.sqrt(ev * max(n_rows - 1, 1))
        self._set_posterior()

    # -- closed form -------------------------------------------------------------------
    def _fit_input(self, X) -> MatrixInput:
        data = super()._fit_input(X)
        self._check_parameters(*data.data.shape, data.data)  # its message comes first
        if data.data.shape[0] < 2:
            raise ValueError(
                f"PPCA needs at least 2 samples; got {data.data.shape[0]} (the "
                "covariance, and so the noise variance, of one sample is undefined)"
            )
        return data

    def _noise_variance(self, n, d, k, ev, total) -> float:
        # Tipping & Bishop's maximum-likelihood σ²: the mean of all d − k eigenvalues
        # after the k-th, the zero ones (n ≤ d, constant features) included
        if k >= d:
            return 0.0
        sigma2 = self._discarded_variance(n, d, k, ev, total) / (d - k)
        if sigma2 <= _rank_tol(d, ev):
            _warn_rank_deficient(k)
            return 0.0
        return sigma2

    def _set_loadings_from_spectrum(self) -> None:
        sigma2 = self.noise_variance_
        excess = self.explained_variance_ - sigma2
        # directions with no variance above σ² (to rounding) get no loading
        excess = np.where(
            excess > _rank_tol(self.n_features_in_, self.explained_variance_),
            excess,
            0.0,
        )
        self.W_ = self.components_.T * np.sqrt(excess)
        self._set_posterior()

    def _set_posterior(self) -> None:
        W, sigma2 = self._kept(self.W_, axis=0), self.noise_variance_
        k = W.shape[1]
        M = W.T @ W + sigma2 * np.eye(k)
        if sigma2 > 0:
            self._M_inv = np.linalg.inv(M)
            self.posterior_covariance_ = sigma2 * self._M_inv
        # the σ² → 0 limits: M⁻¹ → (WᵀW)⁺, σ² M⁻¹ → projector on the null space of W
        else:
            self._M_inv = np.linalg.pinv(M, hermitian=True)
            self.posterior_covariance_ = np.eye(k) - self._M_inv @ M

    def _model_basis(self):
        # Eigen-form of W Wᵀ + σ² I, valid for any W (closed form or EM):
        # W = U diag(s) Rᵀ  ⇒  C = U diag(s² + σ²) Uᵀ + σ² (I − U Uᵀ).
        U, s, _ = np.linalg.svd(self._kept(self.W_, axis=0), full_matrices=False)
        sigma2 = float(self.noise_variance_)
        return U, s**2 + sigma2, sigma2

    def _transform_matrix(self) -> np.ndarray:
        if not hasattr(self, "_M_inv"):
            self._set_posterior()
        return self._of_data(self.W_ @ self._M_inv)  # (x − μ) W M⁻¹ = (M⁻¹ Wᵀ (x − μ))ᵀ

    def _inverse_matrix(self) -> np.ndarray:
        return self.W_.T * self.scale_[None, :] if self._is_scaled() else self.W_.T

    # -- rows with missing entries -----------------------------------------------------
    def _kept_params(self):
        """Mean (divided by ``scale_`` when standardised), loadings and σ² of the
        model on the kept features: the model of the data as :meth:`_standardized`
        makes them."""
        _, mean = self._standardized(None)
        return mean, self._kept(self.W_, axis=0), float(self.noise_variance_)

    def transform(self, X):
        """Posterior means ``⟨z⟩`` of the rows of ``X``; NaN entries are treated as
        missing.

        With ``missing="error"``, NumPy and pandas input with NaN is refused (as
        scikit-learn estimators refuse NaN they were not fitted to handle); use
        ``missing="em"`` or :meth:`impute` for data with gaps.

        Lazy for dask and xarray input (one blockwise map). A row with no observed entry
        gives NaN; an infinite entry raises ValueError, and so does a NaN with
        ``missing="error"`` (for lazy input when the block is computed: finding it needs
        the data).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New data, NaN marking missing entries: a NumPy, dask or sparse array, a
            DataFrame, a DataArray or Dataset in the fitted data's own layout and
            units, or a matrix :func:`scalepca.open_matrix` made.

        Returns
        -------
        scores : same kind as ``X`` of shape (n_samples, n_components)
            The posterior means of the latent variables.
        """
        data = self._transform_input(X, unknown_rows=True)  # lazy for a dask DataFrame
        Xd, _ = self._standardized(self._select_features(data.data))
        mean, W, sigma2 = self._kept_params()
        # no missing entries in sparse rows: ⟨z⟩ = M⁻¹ Wᵀ (x − μ), implicit
        if is_sparse(Xd):
            if not hasattr(self, "_M_inv"):
                self._set_posterior()
            return data.wrap_samples(affine_map(Xd, mean, W @ self._M_inv))
        dtype = np.result_type(Xd.dtype, np.float32)
        Z = Xd.map_blocks(
            _typed,
            posterior_mean_block,
            dtype,
            mean,
            W,
            sigma2,
            chunks=(Xd.chunks[0], (W.shape[1],)),
            dtype=dtype,
            meta=np.empty((0, 0), dtype=dtype),
        )
        return data.wrap_samples(Z)

    def score_samples(self, X):
        r"""Log-density of each row's observed entries under the model (lazy for dask).

        In the data's own units, as :class:`PCA`'s: the weights of
        ``open_matrix(..., weights=...)`` and ``standardize`` enter with their Jacobian,
        here over each row's observed entries
        (:math:`\sum_{j\ \mathrm{observed}} (\log w_j - \log s_j)`, :math:`s` =
        ``scale_``), so this is the marginal density of the observed entries of ``x``
        itself; features left out of the fit are not scored, and a weight of 0 on a kept
        feature is refused before ``X`` is read. A row with no observed entry scores 0.
        ``score`` is the mean over the rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New data: a NumPy, dask or sparse array, a DataFrame, a DataArray or
            Dataset in the fitted data's own layout and units, or a matrix
            :func:`scalepca.open_matrix` made.

        Returns
        -------
        ll : same kind as ``X``, shape (n_samples,)
            The log-density of each row's observed entries.
        """
        return super().score_samples(X)

    def _loglike(self, data, logjac):
        if float(self.noise_variance_) <= 0 or is_sparse(data.data):
            # k = d: no noise term; the eigen-form handles it (complete rows only).
            # Sparse rows have no missing entries either: the eigen-form centres them
            # implicitly
            return super()._loglike(data, logjac)
        Xd, _ = self._standardized(self._select_features(data.data))
        mean, W, sigma2 = self._kept_params()
        return Xd.map_blocks(
            _typed,
            _loglike_observed_block,
            np.float64,
            mean,
            W,
            sigma2,
            logjac,
            drop_axis=1,
            dtype=np.float64,
            meta=np.empty((0,), dtype=np.float64),
        )

    def impute(self, X):
        """``X`` with each NaN entry replaced by its reconstruction ``W ⟨z⟩ + μ``
        (lazy).

        Observed entries are returned unchanged; features left out of the fit stay NaN.

        Returns
        -------
        X_filled : same kind as ``X`` of shape (n_samples, n_features)
        """
        data = self._transform_input(X, allow_nan=True)
        Xd = data.data
        if is_sparse(Xd):
            raise TypeError(
                "impute fills NaN entries of dense rows; X is sparse (its "
                "unstored entries are zeros, not missing values)"
            )
        mean, W, sigma2 = self._kept_params()
        keep = getattr(self, "_features_kept", None)
        scale = self._kept_scale()
        # fill in standardised units, back to the data's (widened)
        if scale is not None:
            full = np.ones(Xd.shape[1])
            full[self.features_kept_] = scale
            filled = (Xd / full).map_blocks(
                impute_block,
                mean,
                W,
                sigma2,
                keep,
                dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            ) * full
            return data.wrap_features(da.where(da.isnan(Xd), filled, Xd))
        out = Xd.map_blocks(
            impute_block,
            mean,
            W,
            sigma2,
            keep,
            dtype=np.float64,
            meta=np.empty((0, 0), dtype=np.float64),
        )
        return data.wrap_features(out)

    def sample(
        self, n_samples: int = 1, random_state=None, *, chunks: int | None = None
    ):
        """Draw samples ``x = W z + μ + σ ε`` from the fitted model.

        Parameters
        ----------
        n_samples : int
        random_state : int, Generator or None
        chunks : int, optional
            Rows per block; if given, a lazy dask array is returned (each block seeded
            from ``random_state`` and its index, so the draw does not depend on the
            cluster).

        Returns
        -------
        X : ndarray or dask array of shape (n_samples, n_features)
        """
        self._check_fitted()
        check_scalar(n_samples, "n_samples", kind=numbers.Integral, low=1)
        seed = check_random_state_seed(random_state)
        W, mu, sigma = self.W_, self.mean_, np.sqrt(self.noise_variance_)
        if self._kept_scale() is not None:  # the model is of x / scale_
            W, sigma = W * self.scale_[:, None], sigma * self.scale_
        if chunks is None:
            return _sample_block(n_samples, W, mu, sigma, seed)
        sizes = [chunks] * (n_samples // chunks)
        if n_samples % chunks:
            sizes.append(n_samples % chunks)
        children = seed.spawn(len(sizes))
        blocks = [
            da.from_delayed(
                _delayed_sample(m, W, mu, sigma, child),
                shape=(m, W.shape[0]),
                dtype=np.float64,
            )
            for m, child in zip(sizes, children, strict=True)
        ]
        return da.concatenate(blocks, axis=0)

    def _state_to_save(self) -> dict:
        state = super()._state_to_save()
        state.pop("posterior_covariance_", None)  # derived from W_ and σ²
        return state

    def _restore_state(self, state: dict) -> None:
        super()._restore_state(state)
        self._set_posterior()


def _typed(x, kernel, dtype, *args):
    """``kernel`` of one block, as ``dtype`` (NaN entries were refused by
    ``_transform_input`` unless the model takes them as missing)."""
    return kernel(x, *args).astype(dtype, copy=False)


def _loglike_observed_block(x, mean, W, sigma2, logjac):
    """Each row's observed-entry log-density plus the log-Jacobian of those entries."""
    x = np.asarray(x, dtype=np.float64)
    return loglike_rows_block(x, mean, W, sigma2) + np.where(
        np.isnan(x), 0.0, logjac
    ).sum(1)


__all__ = ["PPCA"]
