"""Principal component analysis of row-chunked data larger than memory."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from .._validation import (
    check_bool,
    choose_n_components,
    full_rows,
    is_sparse,
)
from ..linalg import feature_scale, flip_signs, passes, variance_ratio
from ..linalg.alleles import refuse_partial_calls, strip_scaling
from ..linalg.moments import block_groups, float32_relative_error, gram_precision
from ..linalg.snapshot import holds_whole_columns
from ..preprocessing._genotype import GENOTYPE
from ..preprocessing._matrix import MatrixInput
from ..solvers.choice import (
    REGISTRY,
    FitPlan,
    Problem,
    SolverChoice,
    check_blocks,
    describe,
    resolve,
    solver_passes,
)
from ..solvers.covariance import spectrum
from ..solvers.wide import Columns, SpectralFit, Start, WideParams
from ._gaussian import LatentGaussianMixin
from ._genotype_fit import GenotypeFitMixin
from ._incremental import SpectralMomentUpdate
from ._params import Choice, Flag, Int, NComponents, Other, Real, Rule, Seed, fixed_k
from .base import EOFMixin, LinearDecompositionMixin

logger = logging.getLogger(__name__)

SOLVERS = ("auto", *REGISTRY)

#: the solvers of wide data: they read the input's 2-D blocks (no d × d matrix anywhere)
WIDE_SOLVERS = tuple(name for name, solver in REGISTRY.items() if solver.wide)

#: why a solver that reads the data once refuses genotypes with missing calls
SKETCH_MISSING_CALLS = (
    "svd_solver='sketch' with standardize='genotype' needs data without missing "
    "calls: the sketch reads the data once, and a missing call is set to its SNP's "
    "mean, known only after that read; use svd_solver='randomized' (block Krylov, the "
    "same accuracy with missing calls) or 'snapshot'"
)

#: the task layer of a lazily read PLINK ``.bed`` (see :mod:`scalepca.io._bed`)
_BED_LAYER = "read-bed-"


def _source_of(X) -> str:
    """What a pass over ``X`` reads: ``"bed"`` (2-bit codes decoded) or ``"memory"``."""
    layers = getattr(getattr(X, "dask", None), "layers", {})
    bed = any(str(name).startswith(_BED_LAYER) for name in layers)
    return "bed" if bed else "memory"


def spectral_problem(
    p: dict,
    n: int,
    d: int,
    X=None,
    *,
    itemsize: int = 8,
    sparse: bool = False,
    updates: bool = False,
) -> Problem:
    """The :class:`~scalepca.solvers.choice.Problem` of a spectral fit with the checked
    parameters ``p`` on ``n`` × ``d`` data; ``X`` (the input's dask array) adds its
    blocks, layout and source."""
    spec = p["n_components"]
    standardize = p.get("standardize")
    layout = {}
    if X is not None:
        itemsize, sparse = np.dtype(X.dtype).itemsize, is_sparse(X)
        layout = {
            "blocks": int(np.prod(X.numblocks)),
            "strips": holds_whole_columns(X),
            "split": len(X.chunks[1]) > 1,
            "source": _source_of(X),
        }
    return Problem(
        int(n),
        int(d),
        fixed_k(spec),
        itemsize=itemsize,
        sparse=sparse,
        genotype=isinstance(standardize, str) and standardize == GENOTYPE,
        n_oversamples=int(p["n_oversamples"]),
        n_power_iter=int(p["n_power_iter"]),
        updates=updates,
        **layout,
    )


def _check_standardize(value, name, params, shape):
    """PCA's ``standardize``: True, False or ``"genotype"`` (allele counts)."""
    if isinstance(value, str) and value == GENOTYPE:
        return value
    if isinstance(value, str):
        raise TypeError(
            f"{name} must be True or False (or {GENOTYPE!r}, "
            f"for allele counts); got {value!r}"
        )
    return check_bool(value, name)


def _standardize_needs_centring(p, shape) -> None:
    if p["standardize"] and not p.get("zero_center", True):
        raise ValueError(
            "standardize=True needs zero_center=True (standardising divides "
            "the centred features by their standard deviations)"
        )


def _chosen_k_needs_full_spectrum(p, shape) -> None:
    spec = p["n_components"]
    if not isinstance(spec, (float, str)):
        return
    problem = spectral_problem(
        p, shape.n, shape.d, itemsize=shape.itemsize, sparse=shape.sparse
    )
    choice = resolve(p["svd_solver"], problem)
    if REGISTRY[choice.solver].partial:
        why = describe(p["svd_solver"], choice)
        raise ValueError(
            f"n_components={spec!r} chooses k from the full spectrum, but {why}, which "
            "finds only the leading n_components + n_oversamples values; give an "
            "integer n_components, or svd_solver='covariance_eigh', 'tsqr' or "
            "'snapshot' (all min(n, d) values)"
        )
    if not p.get("zero_center", True):
        raise ValueError(
            f"n_components={spec!r} chooses k from the explained variance of "
            "centred data; with zero_center=False give an integer n_components"
        )


#: the conditions between the parameters of PCA and PPCA's closed form
SPECTRAL_RULES = (
    Rule(_standardize_needs_centring, needs=("standardize",)),
    Rule(_chosen_k_needs_full_spectrum, needs=("n_components", "svd_solver")),
)


#: ``_note_float32_accuracy`` logs when a float32-product fit leaves its smallest
#: variances less relative accuracy than this
FLOAT32_NOTE_THRESHOLD = 1e-5


class _BaseSpectralPCA(
    GenotypeFitMixin,
    SpectralMomentUpdate,
    LatentGaussianMixin,
    EOFMixin,
    LinearDecompositionMixin,
):
    """The spectral fit shared by :class:`PCA` and :class:`PPCA` (not public).

    Solvers (one-pass covariance ``eigh``, TSQR, randomized) giving the mean, the
    leading eigenvalues and axes of the sample covariance (denominator n − 1),
    features that are NaN in every sample left out, and the Gaussian model of
    :mod:`._gaussian`. Subclasses say how the discarded variance becomes
    ``noise_variance_`` (:meth:`_noise_variance`) and what ``transform`` means
    (projection for PCA, posterior mean for PPCA); neither is the other
    (``isinstance(PPCA(), PCA)`` is False).
    """

    #: CSR row blocks: moments and randomized products are sparse kernels, transform is
    #: ``X W − μᵀW`` (see :mod:`scalepca.linalg.moments`, :mod:`scalepca.linalg.decomp`)
    _accepts_sparse = True

    _covariance_spectrum = True

    #: ``scale_`` is per feature like ``mean_``: widened with NaN at features left out
    #: of the fit (a land mask), so standardised transforms line up with the widened
    #: components
    _per_feature_attrs = (("components_", 1), ("mean_", 0), ("scale_", 0))

    #: the parameters (:mod:`._params`), read by fit, the config schema, validate and
    #: load
    _parameters = {
        "n_components": NComponents(fraction=True),
        "svd_solver": Choice(*SOLVERS),
        "n_oversamples": Int(0),
        "n_power_iter": Int(0),
        "random_state": Seed(),
        "persist": Flag(),
        "standardize": Flag(),
    }
    _parameter_rules = SPECTRAL_RULES

    @property
    def _takes_sparse(self) -> bool:
        name = self.svd_solver
        # None: "auto", or no solver (refused with the other parameters)
        solver = REGISTRY.get(name) if isinstance(name, str) else None
        return solver is None or not solver.dense

    def _zero_center(self) -> bool:
        return getattr(self, "zero_center", True)

    def _genotypes(self) -> bool:
        """Whether the model standardises allele counts (``standardize="genotype"``)."""
        return isinstance(self.standardize, str) and self.standardize == GENOTYPE

    def _fills_missing(self) -> bool:
        return self._genotypes()

    @property
    def allele_frequency_(self) -> np.ndarray:
        """Per-SNP allele frequency ``p = mean_ / 2`` of a ``standardize="genotype"``
        fit (NaN at SNPs left out)."""
        self._check_fitted()
        if not self._genotypes():
            raise AttributeError(
                "allele_frequency_ is set by standardize='genotype' fits"
            )
        return np.asarray(self.mean_) / 2.0

    #: the parameter handed to the solvers as their stopping tolerance (None: none,
    #: the solvers' default; PPCA's ``tol`` is EM's)
    _solver_tol: str | None = None

    def _standardizing_scale(
        self, var_n: np.ndarray, n_features: int, data: MatrixInput | None
    ) -> np.ndarray | None:
        """Per-feature scales from the variances ``var_n`` (denominator n) of the
        moments pass when ``standardize``, else ``None``; ``scale_`` is set (ones
        without it). Those of the unweighted data when ``data`` carries weights:
        standardised, then weighted."""
        if not self.standardize:
            self.scale_ = np.ones(n_features)
            return None
        scale, n_const = feature_scale(var_n, self._standardizing_weights(data))
        if n_const:
            logger.info(
                "%s: %d constant feature(s) left unscaled (scale 1)",
                type(self).__name__,
                n_const,
            )
        self.scale_ = scale
        return scale

    def _solver_choice(
        self, n: int, d: int, X=None, *, updates: bool = False
    ) -> SolverChoice:
        """``svd_solver`` resolved for ``n`` × ``d`` data (``X``: the input's array):
        the one choice of :func:`scalepca.solvers.choice.resolve`."""
        p = self._check_parameters(n, d, X)
        updates = updates or vars(self).get("_fit_for_update", False)
        return resolve(self.svd_solver, spectral_problem(p, n, d, X, updates=updates))

    def _update_problem(self, n: int, d: int) -> Problem:
        """The problem of a first ``partial_fit`` on ``n`` × ``d`` data, before its fit
        has checked the parameters: only whether the covariance solver runs matters."""
        spec = self.n_components
        return Problem(
            max(n, 1),
            max(d, 1),
            fixed_k(spec),
            genotype=self._genotypes(),
            updates=True,
        )

    def _record_solver(self, svd_solver: str) -> None:
        """The fitted record of the solver that ran (``svd_solver`` resolved)."""
        self.solver_ = svd_solver

    def _solver_that_ran(self) -> str | None:
        """The eigensolver of the fitted model (None: not fitted)."""
        return getattr(self, "solver_", None)

    # -- input: wide data keeps its 2-D blocks for the wide solvers --------------------
    _transform_keeps_2d_blocks = True

    def _fit_keeps_2d_blocks(self, solver: str) -> bool:
        """Whether ``fit`` works on the input's 2-D blocks (the wide solvers do)."""
        return solver in WIDE_SOLVERS

    def _fit_input(self, X) -> MatrixInput:
        data = self._input(X, allow_2d_blocks=True)
        arr = data.data
        # chosen once, on the blocks as given: regrouping them would change the costs
        self._fit_choice = self._solver_choice(*arr.shape, arr)
        solver = self._fit_choice.solver
        if len(arr.chunks[1]) > 1 and not self._fit_keeps_2d_blocks(solver):
            logger.info(
                "X: features were split over %d column chunks; rechunking to one "
                "column chunk (rows stay as they are)",
                len(arr.chunks[1]),
            )
            data = dataclasses.replace(data, data=full_rows(arr))
        return data

    def _fit_plan(self, X) -> FitPlan:
        """What ``fit(X)`` will do, from ``X``'s metadata (nothing is read): the
        solver, its :class:`~scalepca.solvers.choice.Problem` and the tasks that read
        the blocks in each pass (``scalepca plan``)."""
        data = self._fit_input(self._validated_in_memory(X, reset=True))
        arr = data.data
        n, d = arr.shape
        choice = vars(self).pop("_fit_choice")
        p = self._check_parameters(n, d, arr)
        spec = p["n_components"]
        k = fixed_k(spec) or 1
        problem = spectral_problem({**p, "n_components": k}, n, d, arr)
        solver = choice.solver
        tasks = arr.numblocks[0]
        if self._fit_keeps_2d_blocks(solver):
            tasks = int(np.prod(arr.numblocks))
        elif solver == "covariance_eigh" and is_sparse(arr):
            tasks = len(block_groups(tasks))  # one task per group of row blocks
        return FitPlan(solver, problem, int(tasks))

    def _fit(self, data: MatrixInput) -> None:
        X = data.data
        n, d = X.shape
        p = self._check_parameters(n, d, X)
        spec = p["n_components"]
        # a float or "mle" keeps every axis until the spectrum has chosen k (then
        # trimmed)
        k = fixed_k(spec) or 1
        choice = vars(self).pop("_fit_choice", None) or self._solver_choice(n, d, X)
        solver = choice.solver
        check_blocks(solver, is_sparse(X))
        self._record_solver(solver)
        problem = spectral_problem({**p, "n_components": k}, n, d, X)
        planned = solver_passes(solver, problem)
        entry = REGISTRY[solver]
        passes.counter_of(self).plan(planned)
        if self._genotypes() and not entry.wide and is_sparse(X):
            raise ValueError(
                "standardize='genotype' with svd_solver='tsqr' or 'covariance_eigh' "
                "needs dense blocks; sparse allele counts run the wide solvers "
                "(svd_solver='randomized', 'snapshot' or 'sketch')"
            )
        if not entry.wide and len(X.chunks[1]) > 1:
            X = full_rows(X)
        logger.info(
            "%s: fitting %d × %d %s(%d row chunks) with %s",
            type(self).__name__,
            n,
            d,
            "genotypes " if self._genotypes() else "",
            X.numblocks[0],
            solver,
        )
        if self.persist and planned > 1:
            logger.info(
                "persisting %.1f MB in %d blocks in cluster memory",
                X.nbytes / 1e6,
                X.npartitions,
            )
            X = X.persist()
        params = self._solver_params(p, k, data)
        if entry.updates and self._genotypes():
            return self._fit_genotype_moments(self._allele_moments(X), data, spec, k)
        if entry.updates:  # the moments are kept for partial_fit
            first = entry.run.start(X, params)
            return self._fit_from_moments(first.stats, X, data, spec, k)
        if entry.once and self._genotypes():
            # a missing call stops the pass at the first block holding one
            X = refuse_partial_calls(X, SKETCH_MISSING_CALLS)
        first = entry.run.start(X, params)
        cols = self._solver_columns(first, n, d, k, data)
        if entry.once and not cols.exact:
            # missing calls seen only in blocks where their SNP had no call at all
            raise ValueError(SKETCH_MISSING_CALLS)
        self._set_solution(n, spec, k, cols, entry.run.finish(X, first, cols, params))

    def _solver_params(self, p: dict, k: int, data: MatrixInput) -> WideParams:
        """The solvers' parameters from the checked parameters ``p``, as given."""
        spec = p["n_components"]
        return WideParams(
            fixed_k(spec),
            n_oversamples=int(p["n_oversamples"]),
            n_power_iter=int(p["n_power_iter"]),
            tol=None if self._solver_tol is None else p[self._solver_tol],
            random_state=self.random_state,
            centre=self._zero_center(),
            standardize=self._strip_standardize(data),
        )

    def _fit_from_moments(self, mom: dict, X, data: MatrixInput, spec, k: int) -> None:
        """The ``covariance_eigh`` solver from the moments of every row seen (count,
        mean, centred Gram of all ``n_features_in_`` features): ``fit``'s one pass,
        or those merged by ``partial_fit``. The moments are kept (``_moments_``) for
        the next update."""
        n, d = int(mom["n"]), mom["mean"].shape[0]
        self._moments_ = mom
        self.n_samples_seen_ = n
        kept, d_fit = self._moments_without_land(mom, n, d, k, data)
        ss = np.diag(kept["m2"])
        scale = self._standardizing_scale(ss / max(n, 1), d_fit, data)
        cols = Columns(
            {**kept, "ss": ss}, keep=getattr(self, "_features_kept", None), scale=scale
        )
        res = spectrum(kept, fixed_k(spec), scale, centre=self._zero_center())
        self._set_solution(n, spec, k, cols, res)
        if self._zero_center():
            self._note_float32_accuracy(X, float(self.explained_variance_[0]))

    def _note_float32_accuracy(self, X, lam_max: float) -> None:
        """Log (INFO) the relative accuracy left to the smallest variances of a
        covariance fit of dense float32 data by float32 products, when it is worse than
        :data:`FLOAT32_NOTE_THRESHOLD` (see the Notes of :class:`PCA`)."""
        if X.dtype != np.float32 or is_sparse(X) or gram_precision() != "auto":
            return
        small = [float(self.explained_variance_[-1])]
        if self.noise_variance_ > 0:
            small.append(float(self.noise_variance_))
        rel = float32_relative_error(lam_max, min(small))
        if rel > FLOAT32_NOTE_THRESHOLD:
            logger.info(
                "%s: float32 data multiplied in float32: the smallest variances "
                "(noise_variance_, the last explained_variance_, their North errors) are "
                "accurate to about %.0e relative; dask.config 'scalepca.gram-precision': "
                "'float64' gives float64 accuracy",
                type(self).__name__,
                rel,
            )

    def _set_solution(
        self, n: int, spec, k: int, cols: Columns, res: SpectralFit
    ) -> None:
        """The fitted attributes from a solver's result ``res`` on the columns
        ``cols``: k chosen from the spectrum when ``spec`` asks for it."""
        mom, d_fit = cols.moments, cols.d_fit
        if res.residuals is not None:
            self.residual_norms_ = np.asarray(res.residuals[:k]) / max(n - 1, 1)
        if res.error_bound is not None:
            self.error_bound_ = float(res.error_bound) / max(n - 1, 1)
        components = flip_signs(res.vectors.T)
        if not self._zero_center():
            self._set_uncentred(
                n,
                d_fit,
                k,
                np.sqrt(res.values[:k]),
                components[:k],
                mom["mean"],
                float(mom["ss"].sum()),
            )
            return
        ss = mom["ss"] if cols.scale is None else mom["ss"] / cols.scale**2
        total = float(ss.sum() / max(n - 1, 1))
        ev = res.values / max(n - 1, 1)
        if fixed_k(spec) is None:
            k = choose_n_components(spec, ev, variance_ratio(ev, total), n)
            logger.info(
                "%s: n_components=%r chose k = %d", type(self).__name__, spec, k
            )
        self._set_spectrum(n, d_fit, k, mom["mean"], ev, components[:k], total)

    def _strip_standardize(self, data: MatrixInput):
        """The ``standardize`` column strips apply inside their tasks (see
        ``snapshot_gram``): the column weights of ``data`` when it carries them, so the
        strips standardise before the weights (every feature's: the fit has left none
        out before its first pass)."""
        if self._genotypes():
            return strip_scaling
        if not self.standardize:
            return False
        weights = self._standardizing_weights(data)
        return True if weights is None else weights

    def _solver_columns(self, first: Start, n: int, d: int, k: int, data) -> Columns:
        """What the fit makes of a solver's first pass ``first``: all-NaN features
        (allele counts: monomorphic and uncalled SNPs) left out and recorded, their
        moments and standardising scales (``scale_`` set; on column strips, the scales
        the strips used). ``k`` must fit the features kept."""
        stats = first.stats
        if self._genotypes():
            return self._genotype_columns(stats, n, d, k, data)
        mom, d_fit = self._moments_without_land(stats, n, d, k, data)
        scale = self._standardizing_scale(mom["ss"] / max(n, 1), d_fit, data)
        keep = getattr(self, "_features_kept", None)
        if first.strips and self.standardize:  # the scales the strips used
            scale = self._kept(stats["scale"])
            self.scale_ = scale
        return Columns(mom, keep=keep, scale=scale)

    def _is_scaled(self) -> bool:
        """Whether the model standardises its input (``scale_`` from a standardised
        fit)."""
        return self._kept_scale() is not None

    def _of_data(self, P: np.ndarray) -> np.ndarray:
        """A map ``P`` (n_features × m) of centred standardised rows as a map of
        centred rows of the data:
        ``((x − mean_) / scale_) P = (x − mean_) (P / scale_)``."""
        return P / self.scale_[:, None] if self._is_scaled() else P

    def _eof_matrix(self, k: int | None = None) -> np.ndarray:
        """n_features × k map of centred rows to their projections on the leading
        ``k`` components (eofs' ``pcs``; of the standardised rows with
        ``standardize``), whatever ``transform`` returns (posterior means, whitened
        scores): the EOF tools' scores."""
        return self._of_data(self.components_[:k].T)

    def _set_spectrum(self, n, d, k, mean, ev, components, total) -> None:
        """Fitted attributes from the spectrum; ``ev`` may hold more than ``k``
        eigenvalues."""
        self.n_samples_ = int(n)
        self.n_features_in_ = int(d)
        self.n_components_ = int(k)
        self.mean_ = np.asarray(mean, dtype=np.float64)
        self.components_ = components
        self.explained_variance_ = np.asarray(ev[:k], dtype=np.float64)
        self.explained_variance_ratio_ = variance_ratio(self.explained_variance_, total)
        self.singular_values_ = np.sqrt(self.explained_variance_ * max(n - 1, 1))
        self.noise_variance_ = self._noise_variance(n, d, k, ev, total)

    def _set_uncentred(
        self, n, d, k, s, components, col_mean, centred_ss: float
    ) -> None:
        """Fitted attributes of a truncated SVD of the uncentred data
        (``zero_center=False``).

        ``s`` and ``components`` are the leading singular values and right singular
        vectors of X itself. As scikit-learn's ``TruncatedSVD``: ``mean_`` is zero
        (``transform`` is ``X components_ᵀ``), ``explained_variance_`` is the
        variance (denominator n) of each score column, ``‖X v‖²/n − (μᵀv)²``, and
        ``explained_variance_ratio_`` divides it by the total variance of the
        features (denominator n), ``centred_ss / n``.
        """
        nn = max(n, 1)
        ev = s**2 / nn - (components @ col_mean) ** 2
        total = centred_ss / nn
        self.n_samples_ = int(n)
        self.n_features_in_ = int(d)
        self.n_components_ = int(k)
        self.mean_ = np.zeros(d)
        self.components_ = components
        self.singular_values_ = np.asarray(s, dtype=np.float64)
        self.explained_variance_ = np.maximum(ev, 0.0)
        self.explained_variance_ratio_ = variance_ratio(self.explained_variance_, total)
        rank = min(n, d)
        self.noise_variance_ = 0.0
        if k < rank:
            rest = max(total - float(self.explained_variance_.sum()), 0.0)
            self.noise_variance_ = rest / (rank - k)

    def _noise_variance(self, n: int, d: int, k: int, ev, total: float) -> float:
        """σ² from the spectrum; ``ev`` holds all eigenvalues, or only the leading ``k``
        (randomized solver: the discarded variance is then ``total − Σ ev[:k]``)."""
        raise NotImplementedError

    @staticmethod
    def _discarded_variance(n: int, d: int, k: int, ev, total: float) -> float:
        """Sum of the eigenvalues after the ``k``-th (the variance the model leaves
        out)."""
        if len(ev) >= min(n, d):  # every nonzero eigenvalue is known
            return float(np.sum(ev[k:]))
        return float(max(total - float(np.sum(ev[:k])), 0.0))


class PCA(_BaseSpectralPCA):
    r"""Principal component analysis for data larger than memory.

    Parameters
    ----------
    n_components : int, float, "mle" or None, default=None
        Number of components; ``None`` keeps ``min(n_samples, n_features)``. A float in
        (0, 1) keeps the smallest k whose cumulative ``explained_variance_ratio_``
        exceeds it, and ``"mle"`` the k of Minka's (2000) evidence (needs n_samples ≥
        n_features), both as scikit-learn's PCA chooses them, from the spectrum of the
        same pass(es): only with ``svd_solver="covariance_eigh"``, ``"tsqr"`` or
        ``"snapshot"`` (all min(n, d) values; ``"randomized"`` and ``"sketch"`` find the
        leading few only and refuse these forms before reading the data).
        ``n_components_`` holds the k chosen.
    svd_solver : {"auto", "covariance_eigh", "tsqr", "randomized", "snapshot", "sketch"}
        Default ``"auto"``. ``"covariance_eigh"``: exact, one pass, the :math:`d \times
        d` covariance decomposed on the client (up to a few thousand features).
        ``"tsqr"``: exact, two passes, singular values to full precision (eigenvalues
        below :math:`\sim 10^{-8} \lambda_{\max}` that matter). ``"randomized"``: block
        Krylov for wide data, one pass per product, ``tol`` and ``residual_norms_``.
        ``"snapshot"``: exact in two passes when n ≪ d. ``"sketch"``: one pass, less
        accurate, for data that can be read only once. ``"auto"``: the solver of least
        predicted time from the shape, block kind and ``n_components``; ``solver_``
        records the choice. How each works and what it costs: :doc:`/guide/pca` and
        :doc:`/guide/choosing`.
    whiten : bool, default=False
        Scale scores to unit variance.
    n_oversamples : int, default=10
        ``"randomized"``: the Krylov block holds ``n_components + n_oversamples``
        vectors; ``"sketch"``: as many probes.
    n_power_iter : int, default=4
        ``"randomized"``: at most ``n_power_iter + 2`` passes (products of the Gram
        operator: the first with the mean, one per power iteration, one last), fewer
        with ``tol``.
    tol : float, default=0.0
        ``"randomized"``: stop at the first pass after which every component's residual
        ``residual_norms_[i]`` is at most ``tol · explained_variance_[i]`` (each
        eigenvalue is then within ``tol`` relative; in practice far closer,
        :math:`\approx \mathrm{tol}^2 \lambda / \mathrm{gap}`). 0 runs all
        ``n_power_iter + 2`` passes.
    random_state : int, Generator or None
        Seed of the ``"randomized"`` and ``"sketch"`` solvers (the only random part).
    persist : bool, default=False
        Multi-pass solvers (``"tsqr"``, ``"randomized"``, ``"snapshot"``) only: hold the
        data in cluster memory for the fit (``X.persist()``) instead of re-reading the
        store on every pass. Worth it when the array fits in the workers' memory (each
        re-read costs one full read of the store); harmful when it does not (workers
        spill to disk).
    standardize : bool or "genotype", default=False
        ``True``: PCA of the correlation matrix, each feature divided by its standard
        deviation (denominator n) after centring, so the result equals
        ``make_pipeline(StandardScaler(), PCA())``; a constant feature keeps scale 1. On
        a matrix ``open_matrix`` weighted, each feature is standardised first and
        weighted after. ``"genotype"``: allele counts (0, 1, 2; NaN a missing call), each
        SNP centred by twice its allele frequency :math:`p` and divided by
        :math:`\sqrt{2p(1-p)}` (Patterson, Price & Reich, 2006), a missing call set to
        the mean; monomorphic SNPs are left out of the fit (NaN in ``components_``) and
        ``"sketch"`` refuses missing calls. The model keeps ``mean_`` and ``scale_`` and
        repeats the step in ``transform``. Neither costs a pass of its own: see
        :doc:`/guide/pca` (standardising) and :doc:`/guide/genotypes`.
    zero_center : bool, default=True
        ``False``: a truncated SVD of the data as they are, uncentred (latent semantic
        analysis; scikit-learn's ``TruncatedSVD``, scanpy's ``pca(zero_center=False)``).
        ``components_`` are the leading right singular vectors of X,
        ``singular_values_`` its singular values, ``mean_`` is zero (``transform`` is
        ``X components_ᵀ``), and ``explained_variance_`` is the variance (denominator n)
        of each score column, its ratio taken to the features' total variance
        (denominator n) — ``TruncatedSVD``'s definitions. The components are ordered by
        singular value, so ``explained_variance_`` need not decrease (the first axis
        often follows the mean); ``noise_variance_`` is the total variance outside the k
        axes over ``min(n, d) − k``. Such a model is no Gaussian: ``score``,
        ``score_samples``, ``get_covariance`` and ``get_precision`` raise, as do
        :func:`~scalepca.north_test` and :class:`~scalepca.Rotator`, which need the
        covariance's eigenvalues in descending order. Every solver takes it; not with
        ``standardize=True``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal principal axes. Sign convention: the largest-magnitude entry of each
        component is positive.
    mean_ : ndarray of shape (n_features,)
        Per-feature mean of the (weighted) training data; zero with
        ``zero_center=False``; ``2p`` (twice the allele frequency) with
        ``standardize="genotype"``.
    scale_ : ndarray of shape (n_features,)
        Per-feature standard deviations with ``standardize=True`` (ones otherwise), of
        the data before ``open_matrix``'s weights; ``transform`` projects
        ``(x − mean_) / scale_`` of the weighted matrix (the data standardised, then
        weighted), ``inverse_transform`` multiplies back.
    explained_variance_ : ndarray of shape (n_components,)
        Eigenvalues of the sample covariance (denominator n − 1); of the standardised
        data's covariance with ``standardize=True``; the variances of the scores, in
        singular-value order (not sorted), with ``zero_center=False``.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Fraction of the total variance each component explains (of the standardised
        data with ``standardize=True``).
    singular_values_ : ndarray of shape (n_components,)
        Singular values of the centred (and scaled) data matrix, the 2-norms of the
        score columns: :math:`\sqrt{(n - 1) \lambda}` for ``explained_variance_``
        :math:`\lambda`; of the uncentred data with ``zero_center=False``.
    noise_variance_ : float
        scikit-learn's convention (``sklearn.decomposition.PCA.noise_variance_``): the
        mean of the :math:`\min(n, d) - k` eigenvalues after the k-th. For :math:`n > d`
        this is Tipping & Bishop's :math:`\sigma^2`; for :math:`n \le d` it leaves out
        the :math:`d - n` zero eigenvalues and so is larger than the maximum-likelihood
        :math:`\sigma^2` :math:`(d-k)/(n-k)`-fold — :class:`PPCA` gives the latter.
    n_components_ : int
        The number of components kept (``n_components``, or the k a float or
        ``"mle"`` chose).
    n_samples_ : int
        Number of samples (rows) in the training data.
    n_features_in_ : int
        Number of features seen during ``fit``.
    features_kept_ : ndarray of shape (n_features_in_,), dtype bool
        True for the features the model was fitted on, False for those left out
        (NaN in every sample), which are NaN in the per-feature attributes.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during ``fit`` (a DataFrame's columns, a
        DataArray's feature coordinate, an AnnData's genes). Defined only when the
        data carry names.
    n_monomorphic_ : int
        ``standardize="genotype"`` only: the SNPs left out of the fit because every
        call is the same allele.
    n_samples_seen_ : int
        ``"covariance_eigh"``: the rows the model has seen (every ``fit`` and
        ``partial_fit`` batch since the last ``fit``), as scikit-learn's
        ``IncrementalPCA``.
    n_passes_ : int
        Passes over the data the fit made (of the last batch for ``partial_fit``).
    fit_time_ : float
        Wall-clock seconds the last ``fit`` (or ``partial_fit``) took.
    solver_ : str
        The solver that ran: ``svd_solver``, or the one ``"auto"`` chose (as
        scikit-learn's private ``_fit_svd_solver``); saved and loaded with the model.
    residual_norms_ : ndarray of shape (n_components,)
        ``"randomized"`` and ``"sketch"`` only: :math:`\|C v - \lambda v\|` for each
        component :math:`v` and its ``explained_variance_`` :math:`\lambda` (:math:`C`
        the covariance, denominator :math:`n - 1`; the Gram :math:`X^\top X/(n-1)` with
        ``zero_center=False``), from products the fit made anyway. Some eigenvalue of
        :math:`C` lies within it of :math:`\lambda`, and the axis is within
        :math:`\mathrm{residual} / \mathrm{gap}` (sine of the angle) of the true one,
        the gap to the other eigenvalues. ``"sketch"``: one figure for every component,
        an estimate of :math:`\|C - \hat C\|_2` (:math:`\hat C` its Nyström
        approximation), which bounds each residual and each eigenvalue's error; never
        above that norm and, measured, at least half of it
        (``scalepca.linalg.sketch.ERROR_ESTIMATE_FACTOR``): the error is within twice
        the estimate.
    error_bound_ : float
        ``"sketch"`` only: the worst case, :math:`\|C - \hat C\|_2` at most this with
        probability :math:`\ge 1 - 10^{-10}` (Halko et al. 2011, Lemma 4.1); 7–36 times
        the error measured, more with ``standardize=True``, often above the largest
        eigenvalue: it holds but says little (see ``scalepca.linalg.sketch``).

    Notes
    -----
    Sparse input (``scipy.sparse`` matrices, pydata ``sparse`` arrays, dask arrays of
    either kind of block) is never densified and is centred implicitly:
    ``covariance_eigh`` reduces each CSR row block to its count, column sums and ``xᵀx``
    and centres the small d × d result (relative precision of the covariance about
    :math:`\varepsilon (|\mu|^2/\sigma^2 + 1)`, full for counts), ``randomized``
    multiplies by :math:`X \Omega - 1 (\mu^\top \Omega)` and
    :math:`X^\top Q - \mu (1^\top Q)`, and ``transform`` maps :math:`X W - \mu^\top W`.
    ``tsqr`` refuses sparse input. The only dense copy of sparse data is a slab of at
    most 32 MiB of rows (``linalg.moments.SPARSE_SLAB_BYTES``) when a block's Gram is
    cheaper by syrk; per worker, a sparse fit holds one CSR block, that slab and a d × d
    partial (``covariance_eigh``), or one CSR block and n_b × l and d × l dense factors
    (``randomized``: nothing of size d², so 30,000 genes fit 2 GiB workers).

    Passes over the data: ``covariance_eigh`` 1; ``tsqr`` 2; ``snapshot`` 2; ``sketch``
    1; ``randomized`` at most ``n_power_iter + 2`` (6 by default; the mean rides in the
    first; one more when all-NaN features are left out, so that the fit is that of the
    other features; not ``sketch``, which reads every block once whatever the data, its
    probes restricted to the kept features); on column strips (every block holds all
    rows) ``n_power_iter + 2`` products of the sample Gram plus one pass for the axes (7
    by default, fewer with ``tol``; all-NaN features cost no pass there, their strip
    columns are zero once mapped) and ``residual_norms_`` of the sample Gram's Ritz
    pairs. Memory per worker: one row chunk (converted to float64) plus a few d × d
    partials (``covariance_eigh``/``tsqr``); a row panel of at most 256 MiB and d × l
    partials (``randomized``, ``sketch``; l = n_components + n_oversamples); a column
    strip of at most 128 MiB and n × n partials (``snapshot``; n × l for ``randomized``
    on strips). The client holds d × d (``covariance_eigh``, ``tsqr``), n × n and d × k
    (``snapshot``) or the Krylov basis and its products, 2 × d × l × passes floats
    (``randomized``: 58 MB at d = 20,000, l = 30, 6 passes).

    Wide solvers, measured on single-cell-like counts (``make_counts``, k = 8 of 500
    genes, 10,000 cells; ``tests/test_wide.py``): ``randomized`` reaches eigenvalues
    within 1e-9 and axes within sin 4e-5 of LAPACK in its default 6 passes, where
    Halko's range finder needs about twice the passes for a far larger error
    (``benchmarks/wide.py``); each residual in ``residual_norms_`` bounds the error of
    its eigenvalue. ``sketch`` reads the data once: its eigenvalues are below the true
    ones (1e-2 relative or far worse: 0.87 on those counts), like a range finder without
    power iterations, by at most twice the estimate in ``residual_norms_`` on the data
    measured (``error_bound_`` is the worst case). ``snapshot`` is exact (float64
    against LAPACK, 1e-10) and gives every eigenvalue. Float32 dense blocks:
    ``randomized`` multiplies slabs centred in float64 and rounded once to float32, and
    sums in float64 (``scalepca.gram-precision: float64`` widens them); each product
    then carries errors of a few :math:`\varepsilon_{32} \lambda_1`, so eigenvalues stay
    within about :math:`10\, \varepsilon_{32} \lambda_1` of the float64 ones and a
    ``tol`` below ~1e-6 is not met.

    Float32 data: the covariance pass multiplies mean-centred float32 slices of 2048
    rows in float32 and sums the slice products in float64 (about twice the speed of
    float64 products); each Gram entry is within
    :math:`1025\, \varepsilon_{32} \|c_j\| \|c_k\|` of the float64 products (:math:`c_j`
    the centred column, so a large mean costs no accuracy; see
    ``scalepca.linalg.moments.gram_error_bound``). Small quantities lose most: every
    eigenvalue of a float32-product Gram carries an absolute error of a fraction of
    :math:`\varepsilon_{32} \lambda_1` (:math:`\lambda_1` the largest eigenvalue,
    :math:`\varepsilon_{32} = 1.2 \cdot 10^{-7}`; at most
    :math:`0.13\, \varepsilon_{32} \lambda_1` measured on low-rank-plus-noise float32
    data, :math:`d \le 200`, :math:`\lambda_1/\sigma^2` from 3e2 to 3e6; Weyl's
    inequality guarantees ``gram_error_bound() · trace``). The relative error of an
    eigenvalue :math:`\lambda` — a trailing ``explained_variance_``, its North error
    (:func:`scalepca.north_test`) — is thus up to
    :math:`1.5 \cdot 10^{-8}\, \lambda_1/\lambda`: 1.5e-4 at
    :math:`\lambda_1/\lambda = 10^4`, 1.5e-3 at :math:`10^5`. ``noise_variance_``
    (:math:`\sigma^2`, a mean of :math:`d - k` of them) fares better, at most
    :math:`0.01\, \varepsilon_{32} \lambda_1` measured (1.2e-4 relative at
    :math:`\lambda_1/\sigma^2 = 10^5`). The same float32 products cannot give these
    digits back cheaply (:math:`\sigma^2` from a float64 trace gained 2–10× for up to 30
    % of the Gram's time; shorter slices, at most 10×). A fit that leaves its smallest
    variances less than 1e-5 relative accuracy logs the figure (INFO). Where they
    matter, ``dask.config.set({"scalepca.gram-precision": "float64"})`` asks for float64
    products (float64 accuracy, about twice the Gram's time). Sparse blocks are always
    summed and multiplied in float64, whatever the setting.

    ``transform`` is lazy (one blockwise map); its result is of the same kind as its
    input.

    ``partial_fit`` updates a ``"covariance_eigh"`` model (``"auto"`` takes it for a
    first ``partial_fit`` up to 4096 features; after ``fit``, when it chose it) with a
    batch of rows in one pass of it: the batch's count, mean and centred Gram are merged
    into those the model keeps (saved with it) by the one-pass fit's own pairwise
    update, and the spectrum is solved again; the model then equals ``fit`` on every row
    seen to 1e-12 (float64), in any batches and order. ``standardize`` takes its scales
    from the merged moments; weights, land mask and feature names are the first call's.
    The other solvers' results are no function of such moments: they have no
    ``partial_fit``.

    References
    ----------
    Chan, T. F., Golub, G. H. & LeVeque, R. J. (1979). Updating formulae and a
    pairwise algorithm for computing sample variances. Technical Report
    STAN-CS-79-773, Stanford University. (The pairwise merge of the moments.)

    Halko, N., Martinsson, P.-G. & Tropp, J. A. (2011). Finding structure with
    randomness: probabilistic algorithms for constructing approximate matrix
    decompositions. SIAM Review, 53(2), 217–288. (Randomized range finding; the
    ``"sketch"`` error bound.)

    Musco, C. & Musco, C. (2015). Randomized block Krylov methods for stronger and
    faster approximate singular value decomposition. Advances in Neural Information
    Processing Systems 28. (The ``"randomized"`` solver.)

    Tropp, J. A., Yurtsever, A., Udell, M. & Cevher, V. (2017). Fixed-rank
    approximation of a positive-semidefinite matrix from streaming data. Advances
    in Neural Information Processing Systems 30. (The ``"sketch"`` solver.)

    Minka, T. P. (2000). Automatic choice of dimensionality for PCA. Advances in
    Neural Information Processing Systems 13, 598–604. (``n_components="mle"``.)

    Patterson, N., Price, A. L. & Reich, D. (2006). Population structure and
    eigenanalysis. PLoS Genetics, 2(12), e190. (``standardize="genotype"``.)

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> X = np.random.default_rng(0).standard_normal((1000, 20))
    >>> pca = scalepca.PCA(n_components=3).fit(X)
    >>> pca.transform(X).shape
    (1000, 3)
    """

    _parameters = {
        **_BaseSpectralPCA._parameters,
        "whiten": Flag(),
        "zero_center": Flag(),
        "standardize": Other((bool, str), _check_standardize),
        "tol": Real(0),
    }

    def __init__(
        self,
        n_components: int | float | str | None = None,
        *,
        svd_solver: str = "auto",
        whiten: bool = False,
        n_oversamples: int = 10,
        n_power_iter: int = 4,
        tol: float = 0.0,
        random_state=None,
        persist: bool = False,
        standardize: bool | str = False,
        zero_center: bool = True,
    ):
        self.n_components = n_components
        self.svd_solver = svd_solver
        self.whiten = whiten
        self.n_oversamples = n_oversamples
        self.n_power_iter = n_power_iter
        self.tol = tol
        self.random_state = random_state
        self.persist = persist
        self.standardize = standardize
        self.zero_center = zero_center

    _solver_tol = "tol"

    def _noise_variance(self, n, d, k, ev, total) -> float:
        # scikit-learn's convention: the mean of the min(n, d) − k eigenvalues after the
        # k-th
        rank = min(n, d)
        if k >= rank:
            return 0.0
        if len(ev) >= rank:
            return float(np.mean(ev[k:rank]))
        return self._discarded_variance(n, d, k, ev, total) / (rank - k)

    # -- transforms --------------------------------------------------------------------
    def _transform_matrix(self) -> np.ndarray:
        P = self._eof_matrix()  # (x − mean_) / scale_ projected: the scale folds into P
        if self.whiten:
            P = P / np.sqrt(self.explained_variance_)
        return P

    def _inverse_matrix(self) -> np.ndarray:
        Q = (
            self.components_ * self.scale_[None, :]
            if self._is_scaled()
            else self.components_
        )
        if self.whiten:
            return Q * np.sqrt(self.explained_variance_)[:, None]
        return Q
