"""EOFs with bootstrap confidence intervals, in the passes of the fit itself.

Which EOFs stand out of sampling noise? xeofs' ``EOFBootstrapper`` answers by refitting
the EOFs on B resamples of the time steps (B more fits: B more reads of the data). Here
the B replicates ride along the fit: each row ``i`` gets, in replicate ``b``, a
Poisson(1) weight ``w_ib`` (the Poisson bootstrap: the weight of a row drawn with
replacement is Binomial(n, 1/n) ≈ Poisson(1)), made from the seed and the row's global
index alone (so the chunking changes nothing), and every replicate's weighted covariance
comes out of the same pass as the fit's (:mod:`scalepca.linalg.bootstrap`):

- ``solver="covariance"`` (n ≫ d): one pass over row blocks accumulating, beside the
  fit's moments, each replicate's weight total, weighted mean and weighted centred Gram
  (B × d × d); the B + 1 eigendecompositions run on the client. **One pass**, as
  ``PCA(svd_solver="covariance_eigh")``.
- ``solver="gram"`` (n ≪ d, the usual gridded case): the fit's n × n sample Gram (one
  pass over column strips, ``PCA(svd_solver="snapshot")``'s first) gives every
  replicate's eigenvalues on the client (the weighted centring is an n × n operation on
  the Gram); the replicates' EOFs come out of the fit's own second pass (the EOFs
  ``X_cᵀ U Σ⁻¹``), summarised per feature on the workers. **Two passes**, as
  ``PCA(svd_solver="snapshot")``.

For each mode the percentile interval of the explained variance ratio (``confidence``,
default 95 %) is reported; a mode is **separated** when its interval lies above the next
mode's (no overlap: its pattern is not a mix with the next one, in the spirit of North
et al.'s rule of thumb), and ``n_significant_`` counts the leading modes that are. The
EOFs get per-feature percentile intervals and standard deviations over the replicates
(each replicate's EOF signed to match the fit's).

Examples
--------
>>> X = scalepca.open_matrix("sst.nc", variable="sst", sample_dims="time",
...                          weights="sqrt_coslat")
>>> boot = BootstrapEOF(4, n_bootstraps=200, random_state=0).fit(X)   # 2 passes
>>> boot.explained_variance_ratio_interval_        # (2, 4): lower and upper bounds
>>> boot.n_significant_, boot.separated_
>>> lower, upper = boot.components_interval()       # (mode, lat, lon) each

References
----------
Hanley, J. A. and MacGibbon, B. (2006). Creating non-parametric bootstrap samples using
Poisson frequencies. Comput. Methods Programs Biomed., 83, 57–62.
"""

from __future__ import annotations

import dask
import numpy as np
from sklearn.base import BaseEstimator

from .._validation import full_rows
from ..linalg import bootstrap as boot
from ..linalg import passes
from ..linalg.snapshot import STRIP_BYTES, column_strips, snapshot_gram
from ..models._params import Choice, Int, Param, Rule, Shape, check_parameters
from ..models._saving import SavedModel
from ..solvers.choice import Problem, resolve_tool
from . import _prep

__all__ = ["BootstrapEOF"]

SOLVERS = ("auto", "gram", "covariance")
#: the largest B · d² · 8 bytes of the covariance path's partial by default
MAX_PARTIAL_BYTES = 2**30


#: the most bytes of one replicate group's d × d Grams in the covariance path. A row
#: block's partial holds one group, so a worker's merge holds a few groups, not all B
#: Grams: with every replicate in one partial, a merge held three times B Grams and the
#: workers of configs/bootstrap_eof.yaml were ended by their nannies for memory
GROUP_BYTES = 64 * 2**20


def _rows_of(x, block_info=None, *, seed, n_replicates, replicates, plain):
    """:func:`~scalepca.linalg.bootstrap.weighted_block_moments` of a row block for one
    replicate group, with its global first row from dask's ``block_info``."""
    row0 = block_info[0]["array-location"][0][0]
    return boot.weighted_block_moments(x, row0, seed, n_replicates, replicates, plain)


def _summary(values: np.ndarray, q: tuple) -> tuple:
    """Percentiles ``q`` and standard deviation over the first axis (the replicates)."""
    lo, hi = np.percentile(values, q, axis=0)
    return lo, hi, values.std(axis=0, ddof=1)


def _check_n_components(value, name, params, shape):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer of at least 1; got {value!r}")
    if shape is not None and value >= min(shape.n, shape.d):
        raise ValueError(
            f"{name}={value} but the field has {shape.n} samples and {shape.d} "
            "features (the selection rule needs one mode more)"
        )
    return int(value)


def _check_confidence(value, name, params, shape):
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.floating))
        or not 0 < value < 1
    ):
        raise ValueError(f"{name} must be a number between 0 and 1; got {value!r}")
    return float(value)


def _check_seed(value, name, params, shape):
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0
    ):
        raise ValueError(
            f"{name} must be a non-negative integer or None; got {value!r}"
        )
    return value


def _solver_of(params, n: int, d: int) -> str:
    """``solver`` as it runs on n × d data: ``"auto"`` by the solvers' predicted cost
    (:func:`scalepca.solvers.choice.resolve_tool`)."""
    p = Problem(
        n, d, _prep.components_asked(params), replicates=int(params["n_bootstraps"])
    )
    return resolve_tool("bootstrap", params["solver"], p).solver


def _check_partial(params, shape):
    """The covariance path's partial (B replicate d × d Grams) within
    max_partial_bytes."""
    d, B = shape.d, int(params["n_bootstraps"])
    size = 8 * B * d * d
    if (
        _solver_of(params, shape.n, d) == "covariance"
        and size > params["max_partial_bytes"]
    ):
        raise ValueError(
            f"solver='covariance' accumulates {B} replicate covariances of "
            f"{d:,} × {d:,} ({size / 2**20:,.0f} MiB a partial), over "
            f"max_partial_bytes={params['max_partial_bytes']:,}: use "
            "solver='gram', fewer n_bootstraps, or raise max_partial_bytes"
        )


class BootstrapEOF(_prep.OneField, SavedModel, BaseEstimator):
    """EOFs of a field ``X`` (n samples × d features) with Poisson-bootstrap confidence
    intervals of the explained variance ratios and the EOFs, from the fit's own passes.

    Parameters
    ----------
    n_components : int, default=2
        Number of EOFs (the intervals are computed for one more, for the selection
        rule).
    n_bootstraps : int, default=100
        Number of bootstrap replicates B.
    confidence : float, default=0.95
        Coverage of the percentile intervals (the ``(1 − confidence)/2`` and
        ``(1 + confidence)/2`` percentiles of the replicates).
    solver : {"auto", "gram", "covariance"}, default="auto"
        ``"gram"``: the n × n sample Gram (two passes); ``"covariance"``: the d × d
        covariance and B weighted ones (one pass); ``"auto"``: the one of least
        predicted cost (``"gram"`` when n ≤ d, but for the smallest fields, where
        the second pass costs more than the B + 1 d × d Grams).
    random_state : int or None, default=0
        Seed of the Poisson weights (None: a fresh one, kept in ``seed_``).
    max_partial_bytes : int, default=2**30
        ``"covariance"``: the largest B · d² · 8 bytes a partial may hold (refused
        above).

    Attributes
    ----------
    components_ : ndarray (n_components, n_features)
        The EOFs of the data (the fit, not a replicate); NaN at features left out.
    explained_variance_ : ndarray of shape (n_components,)
        Eigenvalues of the data's covariance (denominator n − 1).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the total variance.
    singular_values_ : ndarray of shape (n_components,)
        ``sqrt((n − 1) λ)`` for each ``explained_variance_`` λ.
    mean_ : ndarray of shape (n_features,)
        Feature means of the data (NaN at features left out).
    explained_variance_samples_, explained_variance_ratio_samples_ : ndarray
        Of shape (B, n_components + 1): each replicate's eigenvalues and their fractions
        of its total variance.
    explained_variance_ratio_interval_ : ndarray (2, n_components)
        Lower and upper percentile bounds of the ratios.
    separated_ : ndarray of bool (n_components,)
        The mode's interval lies entirely above the next mode's.
    n_significant_ : int
        The leading modes that are separated (the first that is not ends the count).
    components_interval_ : ndarray (2, n_components, n_features)
        Per-feature percentile bounds of the replicates' EOFs.
    components_std_ : ndarray (n_components, n_features)
        Per-feature standard deviation of the replicates' EOFs.
    seed_ : int
        The seed of the Poisson weights (``random_state``, or the one drawn for None):
        the same seed gives the same replicates.
    n_samples_ : int
        Number of samples in the training data.
    n_features_in_ : int
        Number of features seen during ``fit``.
    n_passes_ : int
        Passes over the data the fit made (1 or 2, see Notes).
    solver_ : str
        The solver that ran: ``solver``, or the one ``"auto"`` chose.

    Notes
    -----
    Passes over the data: ``"covariance"`` 1 (a row block's partial holds the fit's d
    × d Gram and one group of replicates' Grams, at most 64 MiB; each group is merged
    in a tree of fan-in 8, every block read once for all groups); ``"gram"`` 2 (a
    column strip and an n × n partial in the first, as
    ``PCA(svd_solver="snapshot")``; in the second a strip narrowed so that its B
    replicate EOFs, ``8 B k w`` bytes, stay within 128 MiB). The client holds the
    merged partials (``8 (B + 1) d²`` bytes for ``"covariance"``, refused above
    ``max_partial_bytes``) and runs B + 1 eigendecompositions (d × d or n × n); the
    gram path's replicate EOFs are summarised on the workers: the client receives 4 k
    × d.

    References
    ----------
    Babamoradi, H., van den Berg, F. & Rinnan, Å. (2013). Bootstrap based confidence
    limits in principal component analysis — a case study. Chemometrics and
    Intelligent Laboratory Systems, 120, 97–105.

    Hanley, J. A. & MacGibbon, B. (2006). Creating non-parametric bootstrap samples
    using Poisson frequencies. Computer Methods and Programs in Biomedicine, 83,
    57–62. (The Poisson weights.)

    North, G. R., Bell, T. L., Cahalan, R. F. & Moeng, F. J. (1982). Sampling errors
    in the estimation of empirical orthogonal functions. Monthly Weather Review,
    110, 699–706. (Separated modes.)

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 2)) @ np.diag([3.0, 1.5]) @ rng.standard_normal(
    ...     (2, 40)) + 0.3 * rng.standard_normal((500, 40))  # two modes and noise
    >>> boot = scalepca.BootstrapEOF(3, n_bootstraps=50).fit(X)   # one pass
    >>> boot.explained_variance_ratio_interval_.shape            # lower and upper
    (2, 3)
    >>> boot.separated_.tolist(), boot.n_significant_
    ([True, True, False], 2)
    """

    #: the parameters (:mod:`scalepca.models._params`), read by ``fit``, configs and
    #: ``load``
    _parameters = {
        "n_components": Param("int", (int,), _check_n_components, shaped=True),
        "n_bootstraps": Int(2),
        "confidence": Param("real", (float,), _check_confidence),
        "solver": Choice(*SOLVERS),
        "random_state": Param("seed", (int, type(None)), _check_seed),
        "max_partial_bytes": Int(1),
    }
    _parameter_rules = (
        Rule(_check_partial, needs=("solver", "n_bootstraps", "max_partial_bytes")),
    )
    #: parameters that bound the size of a saved array (the replicates' axis), checked
    #: by :func:`scalepca.load` as the size scalars are
    _size_parameters = ("n_bootstraps",)

    def __init__(
        self,
        n_components: int = 2,
        *,
        n_bootstraps: int = 100,
        confidence: float = 0.95,
        solver: str = "auto",
        random_state: int | None = 0,
        max_partial_bytes: int = MAX_PARTIAL_BYTES,
    ):
        self.n_components = n_components
        self.n_bootstraps = n_bootstraps
        self.confidence = confidence
        self.solver = solver
        self.random_state = random_state
        self.max_partial_bytes = max_partial_bytes

    # -- fit ---------------------------------------------------------------------------
    def _check_params(self, n: int, d: int) -> str:
        """The parameters checked against their table for n × d data; the solver
        used."""
        return _solver_of(check_parameters(self, Shape(n, d)), n, d)

    def fit(self, X, y=None) -> BootstrapEOF:
        """Fit the EOFs and their bootstrap replicates on ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A matrix as the estimators take it (the output of
            :func:`scalepca.open_matrix`, a NumPy or dask array, a 2-D DataArray);
            dense only.
        y : None
            Ignored; scikit-learn's signature.

        Returns
        -------
        self : BootstrapEOF
            The fitted model.
        """
        xin = _prep.field_input(X)
        n, d = xin.data.shape
        solver = self._check_params(n, d)
        seed = self.random_state
        if seed is None:  # drawn once, kept: the resamples can be drawn again
            seed = np.random.SeedSequence().entropy % 2**63
        self.seed_ = int(seed)
        self.n_passes_ = 0
        q = (50 * (1 - self.confidence), 50 * (1 + self.confidence))
        fit = self._fit_gram if solver == "gram" else self._fit_covariance
        with passes.counting(
            self, planned=2 if solver == "gram" else 1, chunks=xin.data.numblocks[0]
        ):
            fit(xin.data, n, d, q)
        self.solver_ = solver
        self._set_selection(q)
        self._template = _prep.kept_features(xin)
        self._preprocessing = xin.prep  # transform repeats it on new raw data
        return self

    def _fit_covariance(self, X, n, d, q):
        B, k = int(self.n_bootstraps), int(self.n_components)
        X = full_rows(X)
        # one reduction per replicate group (the first also the fit's moments), computed
        # as one graph: each row block is read once for all groups
        groups = boot._batches(B, d, GROUP_BYTES)
        outs = []
        for g, reps in enumerate(groups):
            parts = X.map_blocks(
                _rows_of,
                seed=self.seed_,
                n_replicates=B,
                replicates=reps,
                plain=g == 0,
                chunks=((1,) * X.numblocks[0], (1,)),
                dtype=object,
                meta=np.empty((0, 0), dtype=object),
            )
            outs.append(passes.row_reduction(parts, None, boot.merge_weighted))
        moms = list(
            passes.compute(
                *passes.delayed_together(*outs),
                name="moments and replicates",
                optimize_graph=False,
            )
        )
        mom = moms[0]
        keep = self._keep(mom["nan"], n)
        kk = np.ix_(keep, keep)
        theta, V = boot._eigh_descending(mom["m2"][kk])
        self._set_fit(theta, V[:, :k].T, mom["mean"], keep, n, d)
        parts = []
        while moms:  # each group's Grams freed once decomposed
            part = moms.pop(0)
            parts.append(
                boot.covariance_replicates(
                    part["wm2"], part["W"], keep, k, self.components_[:, keep]
                )
            )
        lam, total, reps = (np.concatenate(a) for a in zip(*parts, strict=True))
        self._set_samples(lam, total)
        lo, hi, sd = _summary(reps, q)
        self._set_component_summary(lo, hi, sd, keep)

    def _fit_gram(self, X, n, d, q):
        B, k = int(self.n_bootstraps), int(self.n_components)
        out = snapshot_gram(X)  # pass 1: the n × n Gram of the centred rows
        nan = out.get("nan_features", np.zeros(d, dtype=np.int64))
        keep = self._keep(nan, n)
        G = out["G"]
        # the fit's leading k pairs only (ARPACK beyond PARTIAL_EIGH_SIDE: at n = 10,000
        # a full decomposition of G is minutes of the client's time); the variance is
        # G's trace
        vals, vecs = boot._leading_eigh(G[None], k)
        theta, U = vals[0], vecs[0]
        s = np.sqrt(theta[:k])
        fit_scores = U[:, :k] * s  # X_c v_i
        w_all = boot.poisson_weights(self.seed_, np.arange(n), B)  # n × B
        lam, total, coef = boot.gram_replicates(G, w_all, k, fit_scores)
        self._set_samples(lam, total)
        coef = np.hstack([U[:, :k] / np.where(s > 0, s, 1), coef])
        # strips w features wide with w ≤ 128 MiB / (8 B k): their replicate EOFs in 128
        # MiB
        S = column_strips(X, min(STRIP_BYTES, max(8 * n, n * STRIP_BYTES // (B * k))))
        bounds = np.cumsum((0,) + S.chunks[1])
        coef_d = passes.shared(coef)  # one key, not a copy per task
        mean = np.where(np.isfinite(out["mean"]), out["mean"], 0.0)
        parts = [
            dask.delayed(boot.strip_replicate_components, pure=True)(
                blk, mean[bounds[j] : bounds[j + 1]], coef_d, k, q
            )
            for j, blk in enumerate(S.to_delayed(optimize_graph=True).ravel())
        ]
        stacked = np.hstack(passes.compute(*parts, name="EOFs and replicate EOFs"))
        fit, lo, hi, sd = np.split(stacked[:, keep], 4)
        self._set_fit(theta, fit, out["mean"], keep, n, d, total=float(np.trace(G)))
        self._set_component_summary(lo, hi, sd, keep)

    @staticmethod
    def _keep(nan, n) -> np.ndarray:
        nan = np.asarray(nan)
        partial = np.flatnonzero((nan > 0) & (nan < n))
        if partial.size:
            raise ValueError(
                f"{partial.size} features are NaN at some samples only (e.g. "
                f"features {partial[:3].tolist()}); the bootstrap leaves out "
                "features NaN at every sample (land) and needs the others complete"
            )
        keep = nan == 0
        if not keep.any():
            raise ValueError("X is NaN at every feature")
        return keep

    def _set_fit(
        self, theta, comps, mean, keep, n, d, total: float | None = None
    ) -> None:
        """The fit's attributes from its eigenvalues ``theta`` (of the centred Gram:
        every one, or the leading ``n_components`` with their sum ``total``, the
        Gram's trace)."""
        k = int(self.n_components)
        comps = (
            comps * np.sign(comps[np.arange(k), np.abs(comps).argmax(axis=1)])[:, None]
        )
        self.components_ = np.full((k, d), np.nan)
        self.components_[:, keep] = comps
        lam = theta / (n - 1)
        self.explained_variance_ = lam[:k]
        self.explained_variance_ratio_ = lam[:k] / (
            lam.sum() if total is None else total / (n - 1)
        )
        self.singular_values_ = np.sqrt(theta[:k])
        self.mean_ = np.where(keep, mean, np.nan)
        self.n_samples_, self.n_features_in_ = int(n), int(d)

    def _set_samples(self, lam, total) -> None:
        self.explained_variance_samples_ = lam
        self.explained_variance_ratio_samples_ = lam / total[:, None]

    def _set_component_summary(self, lo, hi, sd, keep) -> None:
        """Per-feature bounds and spread of the replicate EOFs, signed as
        ``components_``."""
        k, d = self.components_.shape
        # the fit's EOFs were signed after the replicates were matched to them: follow
        sign = np.sign(np.nansum(self.components_[:, keep] * (lo + hi), axis=1))
        sign = np.where(sign == 0, 1.0, sign)[:, None]
        lo, hi = np.where(sign > 0, lo, -hi), np.where(sign > 0, hi, -lo)
        self.components_interval_ = np.full((2, k, d), np.nan)
        self.components_interval_[:, :, keep] = np.stack([lo, hi])
        self.components_std_ = np.full((k, d), np.nan)
        self.components_std_[:, keep] = sd

    def _set_selection(self, q) -> None:
        k = int(self.n_components)
        lo, hi = np.percentile(self.explained_variance_ratio_samples_, q, axis=0)
        self.explained_variance_ratio_interval_ = np.stack([lo[:k], hi[:k]])
        self.separated_ = lo[:k] > hi[1 : k + 1]
        self.n_significant_ = k  # the first mode not separated from the next
        if not self.separated_.all():
            self.n_significant_ = int(np.argmin(self.separated_))

    # -- outputs -----------------------------------------------------------------------
    def _labelled(self, values, name):
        if getattr(self, "_template", None) is None:
            return values
        from ..io._stack import feature_dataarray

        return feature_dataarray(values, self._template, name=name)

    def transform(self, X):
        """The PCs of ``X`` on the fitted EOFs, ``(x − mean_) · components_ᵀ`` over the
        features kept: lazy (one blockwise map over the row blocks, a pass when
        computed), in the input's kind (a DataArray over the sample dims and ``mode``
        for xarray input).

        ``X`` in the field's own layout and units (a DataArray with the fitted dims, a
        Dataset holding the fitted variable) is stacked and weighted by the model
        itself, as recorded at ``fit`` (also after ``save`` and ``load``; the grid is
        checked); a matrix ``open_matrix`` made is checked against that record and taken
        as it is.

        A NaN at a feature the model uses is refused (``ValueError``) when the PCs are
        computed (by this call for NumPy input, whose PCs it computes).

        Parameters
        ----------
        X : array-like of shape (n_samples_new, n_features)
            The field on the fit's grid, in its own layout and units or as
            :func:`scalepca.open_matrix` made it.

        Returns
        -------
        scores : array of shape (n_samples_new, n_components)
            The PCs, of the input's kind.
        """
        from ..io._stack import check_features
        from ..models.base import affine_map, refuse_nonfinite

        if not hasattr(self, "components_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(
                "this BootstrapEOF is not fitted yet; call fit(X) first"
            )
        xin = _prep.field_input(X, "X", getattr(self, "_preprocessing", None))
        check_features(getattr(self, "_template", None), xin)
        if xin.data.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {xin.data.shape[1]} features; the model was fitted on "
                f"{self.n_features_in_}"
            )
        keep = np.flatnonzero(~np.isnan(self.mean_))
        Z = affine_map(
            refuse_nonfinite(full_rows(xin.data)[:, keep]),
            self.mean_[keep],
            self.components_[:, keep].T,
        )
        return xin.wrap_samples(Z)

    def scores_arrays(self, X, *, fitted: bool = False) -> tuple[dict, None]:
        """``(arrays by name, attrs)`` of a scores store (``scalepca run``'s
        ``output.scores``, ``scalepca transform``): the PCs of ``X`` as ``scores``
        (lazy, as :meth:`transform` gives them), also for the fitted field
        (``fitted``)."""
        return {"scores": self.transform(X)}, None

    def components(self):
        """The EOFs, over ``mode`` and the field's feature dims for xarray input."""
        return self._labelled(self.components_, "components")

    def components_interval(self):
        """``(lower, upper)`` percentile bounds of the EOFs over the replicates
        (labelled as :meth:`components`)."""
        lo, hi = self.components_interval_
        return self._labelled(lo, "components_lower"), self._labelled(
            hi, "components_upper"
        )

    # -- persistence (est.save / scalepca.load, as every model) --------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "components_")

    def _state_to_save(self) -> dict:
        """The fitted attributes, the field's preparation and feature coordinates."""
        preps = (getattr(self, "_preprocessing", None),)
        templates = {"_template_json": getattr(self, "_template", None)}
        state = super()._state_to_save()
        # the bounds apart: each k × d, as every saved array is at most (largest size)²
        lower, upper = state.pop("components_interval_")
        state["_components_lower"], state["_components_upper"] = lower, upper
        return {**state, **_prep.state_of(preps, templates)}

    def _restore_state(self, state: dict) -> None:
        state = dict(state)
        self.components_interval_ = np.stack(
            [state.pop("_components_lower"), state.pop("_components_upper")]
        )
        (self._preprocessing,), (self._template,) = _prep.restored(
            state, 1, ("_template_json",)
        )
        super()._restore_state(state)
