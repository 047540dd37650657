"""The contract matrix (issue 38): every estimator × input kind × option × operation
cell the table in ``tests/_contract.py`` lists either equals the dense in-memory
NumPy reference (float64: 1e-10 relative; components and scores sign-aligned) or is
refused before any compute with an error that names the problem. The lists, the cells
and the expected refusals and known defects live in ``tests/_contract.py`` (also the
source of the docs page "what works with what"); this module only runs them.
"""

from __future__ import annotations

import contextlib
import copy
import io
import re
import zlib

import numpy as np
import pytest
import yaml

from . import _contract as C
from .support.compare import align_signs, assert_close
from .support.counting import TaskCounter

dask = pytest.importorskip("dask")
xr = pytest.importorskip("xarray")
pytest.importorskip("anndata")


# iterative fits run a fixed number of steps (tol=0) so that every path runs the same
# ones
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*did not converge:UserWarning", "ignore:.*did not converge"
)


@pytest.fixture
def tasks():
    counter = TaskCounter()
    with dask.config.set(scheduler="sync"), counter:
        yield counter


@pytest.fixture(scope="module")
def cli_scheduler():
    """() → the address of one dask cluster of the module, in this process with one
    worker thread (as ``--no-processes --n-workers 1`` would start), started at the
    first call: the cells' CLI commands join it with ``--scheduler`` instead of each
    starting and closing a cluster of its own (the commands' own clusters are
    tests/test_cli.py's)."""
    clusters = []

    def address():
        if not clusters:
            from distributed import LocalCluster

            clusters.append(
                LocalCluster(
                    n_workers=1,
                    threads_per_worker=1,
                    processes=False,
                    dashboard_address=None,
                )
            )
        return clusters[0].scheduler_address

    yield address
    for cluster in clusters:
        cluster.close()


def _param(cell):
    outcome = C.expectation(cell)
    marks = []
    if isinstance(outcome, C.Defect):
        where = f"issue 38 item {outcome.item}" if outcome.item else "new finding"
        marks.append(
            pytest.mark.xfail(strict=True, reason=f"{where}: {outcome.reason}")
        )
    return pytest.param(*cell, id="/".join(cell), marks=marks)


CELLS = [c for c in C.cells() if not isinstance(C.expectation(c), C.NotApplicable)]


# -- the data of a cell and its reference ----------------------------------------------
def _data(
    option: C.Option,
    *,
    permute_columns=False,
    shift=0.0,
    kind: C.InputKind | None = None,
) -> np.ndarray:
    if option.genotype or (kind is not None and kind.genotypes):
        X = C.genotype_data()  # allele counts: no shift
    else:
        X = C.base_data() + shift
    if (
        permute_columns
    ):  # other data with the same per-feature statistics, in another order
        X = X[:, [3, 0, 7, 5, 1, 6, 2, 4]]
    if option.land:
        X[:, list(C.LAND)] = np.nan
    if option.missing:
        rng = np.random.default_rng(1)
        hole = rng.random(X.shape) < 0.05
        hole[:, 0] = False  # no feature all-missing, every row with observed entries
        X[hole] = np.nan
    return X.astype(option.dtype)


def _weights(option: C.Option, kind: C.InputKind):
    """The open_matrix ``weights`` of the cell (canonical order; feature-dims shape
    on grids)."""
    if option.weights != "array":
        return option.open_kwargs.get("weights")
    if not kind.grid:
        return C.ARRAY_WEIGHTS
    w = xr.DataArray(
        C.ARRAY_WEIGHTS.reshape(len(C.LAT), len(C.LON)), dims=("lat", "lon")
    )
    return w


def _weight_vector(option: C.Option) -> np.ndarray:
    if option.weights == "array":
        return C.ARRAY_WEIGHTS
    if option.weights == "named":
        return C.coslat_column()
    return np.ones(C.N_FEATURES)


class _UncentredPCA:
    """The dense reference of ``PCA(zero_center=False)``: a truncated SVD of X (as
    scikit-learn's TruncatedSVD), explained variance = the variance of each score
    column."""

    def __init__(self, k):
        self.k = k

    def fit(self, X):
        _, s, vt = np.linalg.svd(X, full_matrices=False)
        self.components_ = _flip(vt[: self.k])
        Z = X @ self.components_.T
        self.explained_variance_ = Z.var(axis=0)
        self.explained_variance_ratio_ = self.explained_variance_ / X.var(axis=0).sum()
        self.mean_ = np.zeros(X.shape[1])
        self.n_samples_ = len(X)
        return self

    def transform(self, X):
        return X @ self.components_.T

    def inverse_transform(self, Z):
        return Z @ self.components_


def _flip(V):
    return V * np.sign(V[np.arange(len(V)), np.abs(V).argmax(axis=1)])[:, None]


class Reference:
    """The cell's dense path, on the matrix as the kind orders its features: the
    preprocessing by hand (weights, land mask dropped, standardisation), then the
    same estimator on NumPy."""

    def __init__(
        self,
        est: C.Estimator,
        kind: C.InputKind,
        option: C.Option,
        X: np.ndarray,
        params: dict | None = None,
    ):
        self.perm = np.asarray(kind.feature_order or np.arange(C.N_FEATURES))
        self.Xm = X[:, self.perm].astype(
            np.float64
        )  # float32 data: float64 of their values
        self.option = option
        self.w = _weight_vector(option)[self.perm]
        self.keep = ~np.isnan(self.Xm).all(axis=0)
        self.field = self.Xm * self.w  # the weighted matrix (what open_matrix returns)
        Xp = self.field[:, self.keep]
        self.mu = np.zeros(Xp.shape[1])
        self.sd = np.ones(Xp.shape[1])
        if option.standardize:  # standardised in the data's units, then weighted
            self.mu = np.nanmean(Xp, axis=0)
            self.sd = np.nanstd(self.Xm[:, self.keep], axis=0)
        if option.genotype:  # 2p and √(2p(1−p)); no call is missing in these data
            self.mu = np.nanmean(Xp, axis=0)
            self.sd = np.sqrt(self.mu * (1 - self.mu / 2))
        self.Xs = (Xp - self.mu) / self.sd
        extra = {
            k: v
            for k, v in option.params.items()
            if k not in ("standardize", "zero_center")
        }
        extra.update(params or {})
        if option.standardize or kind.genotypes:  # data of unit scale
            extra.update(est.standardized)
        if option.missing and est.cls == "PPCA":
            extra["missing"] = "em"
        self.model = (
            _UncentredPCA(C.N_COMPONENTS) if not option.center else est.make(**extra)
        ).fit(self.Xs)

    def score_samples(self):
        """Log-density of the data in their own units over the kept features (the
        documented convention of score_samples): the prepared data's, plus the log of
        the Jacobian of the preparation (Σ log wⱼ/σⱼ over the kept features)."""
        log_jac = np.sum(np.log(self.w[self.keep] / self.sd))
        return self.model.score_samples(self.Xs) + log_jac

    def score_rtol(self):
        """Rounding of a log-density: the inverse covariance's error grows with its
        condition number (1e9 for these columns, scaled 0.1 to 1000)."""
        ev = np.linalg.eigvalsh(np.cov(self.Xs, rowvar=False))
        return max(1e-10 * C.N_FEATURES, 100 * np.finfo(float).eps * ev[-1] / ev[0])

    def float32_bounds(self, rtol):
        """The tolerances float32 data imply, or None for float64 data: (the absolute
        error bound of each component, of each score column, the relative bound of other
        outputs).

        With float32 products (``scalepca.gram-precision`` "auto") every eigenvalue of the
        Gram is within ``FLOAT32_EIGENVALUE_ERROR · ε₃₂ · λ₁`` of the float64 one (the stated
        bound, ``scalepca.linalg.moments``); taken as the size of the perturbation, the
        Davis–Kahan theorem bounds the angle of component i by ``sin θᵢ ≤ err / gapᵢ`` (its
        distance to the nearest other eigenvalue), so ``‖v̂ᵢ − vᵢ‖ ≤ √2 sin θᵢ``. With float64
        products the fit keeps the float64 tolerance. The scores of float32 data are float32:
        a projection ``(x − μ) v`` rounded in float32 errs by at most ``(d + 2) u Σⱼ (|xⱼ| +
        |xⱼ − μⱼ|)`` (``u = ε₃₂/2``, |vⱼ| ≤ 1; the dot-product bound), plus ``‖x − μ‖ ‖v̂ − v‖``
        from the component. Other outputs, which mix the modes, are held to the
        largest score bound relative to the largest score."""
        if self.option.dtype != "float32":
            return None
        from scalepca.linalg.moments import FLOAT32_EIGENVALUE_ERROR

        eps = float(np.finfo(np.float32).eps)
        k = self.scores().shape[1]  # RobustPCA's rank is its own
        ev = np.linalg.eigvalsh(np.cov(self.Xs, rowvar=False))[::-1]
        if self.option.config.get("scalepca.gram-precision") == "float64":
            comp = np.full(k, rtol)
        else:
            err = FLOAT32_EIGENVALUE_ERROR * eps * ev[0]
            gaps = np.array(
                [
                    min(ev[i - 1] - ev[i] if i else np.inf, ev[i] - ev[i + 1])
                    for i in range(k)
                ]
            )
            comp = np.sqrt(2) * err / gaps
        Xc = self.Xs - self.Xs.mean(axis=0)
        d = self.Xs.shape[1]
        rounding = (
            (d + 2) * eps / 2 * np.max(np.abs(self.Xs).sum(1) + np.abs(Xc).sum(1))
        )
        scores = np.linalg.norm(Xc, axis=1).max() * comp + rounding
        rel = float(np.max(scores) / np.abs(self.scores()).max())
        return comp, scores, max(rel, rtol)

    def components(self):
        comps = self.model.components_
        out = np.full((len(comps), C.N_FEATURES), np.nan)
        out[:, self.keep] = comps
        return self.canonical(out)

    def canonical(self, A):
        """Columns of the matrix order → canonical feature order."""
        out = np.empty_like(A)
        out[:, self.perm] = A
        return out

    def scores(self):
        return self.model.transform(self.Xs)

    def reconstruction(self):
        Xs_hat = self.model.inverse_transform(self.scores())
        out = np.full(self.Xm.shape, np.nan)
        out[:, self.keep] = (Xs_hat * self.sd + self.mu) / self.w[self.keep]
        return self.canonical(out)

    def pcs(self):
        """eofs' pcs: projections of the centred prepared data on the EOFs."""
        Xc = self.Xs - np.nanmean(self.Xs, axis=0)
        return Xc @ self.model.components_[: C.N_COMPONENTS].T

    def eof_maps(self, kind: str):
        F = self.field - self.field.mean(axis=0)
        P = self.pcs()
        P = P - P.mean(axis=0)
        n = len(F)
        cross = F.T @ P  # d × k
        if kind == "correlation":
            with np.errstate(invalid="ignore"):
                maps = (
                    cross / np.outer(np.sqrt((F**2).sum(0)), np.sqrt((P**2).sum(0)))
                ).T
        else:
            lam = self.model.explained_variance_[: C.N_COMPONENTS]
            maps = (cross / np.sqrt(lam) / (n - 1)).T
        maps[:, ~self.keep] = np.nan
        return self.canonical(maps)


def _fitted_arrays(est) -> list[str]:
    """The names of ``est``'s fitted arrays (public attributes ending in ``_``)."""
    return [
        k
        for k, v in vars(est).items()
        if k.endswith("_") and not k.startswith("_") and isinstance(v, np.ndarray)
    ]


# -- outputs as NumPy ------------------------------------------------------------------
def _values(obj):
    if hasattr(obj, "compute") and not isinstance(obj, xr.DataArray):
        obj = obj.compute()
    if hasattr(obj, "to_numpy") and not isinstance(obj, xr.DataArray):
        return np.asarray(obj.to_numpy(), dtype=np.float64)
    return obj


def _scores(obj, kind: C.InputKind):
    """(n × k) scores in sample order; the sample names checked for named kinds."""
    obj = _values(obj)
    if isinstance(obj, xr.DataArray):
        sample = [d for d in obj.dims if d != "mode"]
        if kind.sample_names:
            name = "obs_names" if "obs_names" in obj.coords else sample[0]
            names = [str(v) for v in np.asarray(obj[name].values)]
            assert names == [f"c{i}" for i in range(C.N_TIME)], (
                f"scores are labelled {names[:4]}…, the data's rows are c0, c1, …"
            )
        obj = obj.transpose(*sample, "mode").values.reshape(-1, obj.sizes["mode"])
    return np.asarray(obj, dtype=np.float64)


def _data_space(obj, ref: Reference, *, leading="sample"):
    """A (n × d) or (k × d) output in the canonical feature order."""
    obj = _values(obj)
    if isinstance(obj, xr.DataArray):
        if "lat" in obj.dims:
            rest = [d for d in obj.dims if d not in ("lat", "lon")]
            obj = obj.transpose(*rest, "lat", "lon")
            return np.asarray(obj.values, dtype=np.float64).reshape(-1, C.N_FEATURES)
        obj = obj.values
    if hasattr(obj, "toarray"):
        obj = obj.toarray()
    return np.asarray(obj, dtype=np.float64)


#: the analysis tools among the operations: ``save-load>TOOL`` saves and reloads the
#: tool itself
TOOLS = ("MCA", "HilbertEOF", "BootstrapEOF", "tools-raw")

#: (fitted model, dense reference, float32 bounds) of each (estimator, kind, option) on
#: its data, made by the first cell of the triple a process runs: a fit is most of a
#: cell's time, and the triple's other operations need the same one. Cells take deep
#: copies, so an operation that changes the model or the reference in place changes
#: its own copy only (and fails its own checks); a fit that raises is not kept, so
#: every cell of the triple raises it again.
_FITS: dict[tuple, tuple] = {}


# -- a cell ----------------------------------------------------------------------------
class Cell:
    def __init__(self, estimator, kind, option, op, tmp_path, tasks, scheduler):
        self.est = C._ESTIMATORS[estimator]
        self.kind = C._KINDS[kind]
        self.option = C._OPTIONS[option]
        self.op = op
        self.tmp = tmp_path
        self.tasks = tasks
        #: () → the address of the scheduler its CLI commands join (cli_scheduler)
        self.scheduler = scheduler
        # values of its own per (estimator, kind, option), so that no cell can depend
        # on what a cell of another triple fitted earlier in the same process (that
        # scalepca keeps no such state by value is checked on its own:
        # test_no_description_leaks_by_value); the operations of one triple share its
        # fit (_FITS)
        self.shift = (
            zlib.crc32("/".join((estimator, kind, option)).encode()) % 997 * 1e-6
        )

    def call(self, f, *args, **kwargs):
        """A step of the cell; the task count restarts, so a refusal's count is its
        own."""
        self.tasks.reset()
        return f(*args, **kwargs)

    def inputs(self, X, tag="a"):
        """(the object fitted, the object transformed) for the data X."""
        import scalepca

        folder = self.tmp / tag
        folder.mkdir(exist_ok=True)
        raw = self.kind.make(X, folder)
        open_kwargs = dict(self.kind.open_kwargs)
        weights = _weights(self.option, self.kind)
        if weights is not None:
            open_kwargs["weights"] = weights
        open_kwargs.update(
            {k: v for k, v in self.option.open_kwargs.items() if k != "weights"}
        )
        if self.kind.path:  # opened the same way for fit and transform
            fitted = self.call(scalepca.open_matrix, raw, **open_kwargs)
            return fitted, fitted, raw
        fitted = (
            self.call(scalepca.open_matrix, raw, **open_kwargs) if open_kwargs else raw
        )
        return fitted, raw, raw

    def params(self, **extra):
        p = dict(self.option.params)
        if self.option.standardize or self.kind.genotypes:  # data of unit scale
            p.update(self.est.standardized)
        if self.option.missing and self.est.cls == "PPCA":
            p["missing"] = "em"
        return {**p, **extra}

    def fit(self, Xfit, **extra):
        model = self.est.make(**self.params(**extra))
        return self.call(model.fit, Xfit)

    def shared_fit(self, X, Xfit):
        """(the model fitted on ``Xfit``, the reference of ``X``): copies of the
        triple's (:data:`_FITS`), fitted here if this cell is its first. ``Xfit`` is
        the cell's own input, made from the triple's data ``X`` as the first cell's
        was."""
        key = (self.est.name, self.kind.name, self.option.name)
        if key not in _FITS:
            model = self.fit(Xfit)
            ref = self.reference(X)
            # a copy: NumPy memory of its own, not the blocks of the cell's store
            _FITS[key] = copy.deepcopy((model, ref, self.bounds))
        model, ref, self.bounds = copy.deepcopy(_FITS[key])
        return model, ref

    def run(self):
        with dask.config.set(self.option.config):
            return self._run()

    def _run(self):
        op = self.op
        X = _data(self.option, shift=self.shift, kind=self.kind)
        if op.startswith("resume-"):
            return self.resume(X)
        if op == "partial_fit":
            return self.partial(X)
        if op == "pp.pca-masks":
            return self.pp_pca_masks(X)
        if op == "run-singlecell":
            return self.run_singlecell(X)
        Xfit, Xnew, raw = self.inputs(X)
        model, ref = self.shared_fit(X, Xfit)
        if (
            op.split(">", 1)[-1] in TOOLS
        ):  # the analysis tool's own model saved and loaded
            self.reload_tool = op.startswith("save-load>")
            op = op.split(">", 1)[-1]
        elif op.startswith(
            "save-load>"
        ):  # the operation with the model saved and loaded
            import scalepca

            self.call(model.save, self.tmp / "model.zarr")
            model = self.call(scalepca.load, self.tmp / "model.zarr")
            op = op.split(">", 1)[1]
        rtol = (
            self.bounds[2] if self.bounds else self.est.rtol
        )  # outputs other than scores
        if op == "transform":
            if self.est.linear:
                self.close_components(
                    self.call(self.components, model), ref, "components_"
                )
            Z = self.call(model.transform, Xnew)
            self.close_scores(_scores(Z, self.kind), ref, "transform")
        elif op == "inverse_transform":
            Z = self.call(model.transform, Xnew)
            Xhat = self.call(model.inverse_transform, Z)
            assert_close(
                _data_space(Xhat, ref),
                ref.reconstruction(),
                rtol,
                "inverse_transform",
                rtol=rtol,
            )
        elif op == "score":
            s = self.call(model.score_samples, Xnew)
            tol = ref.score_rtol()
            expected = ref.score_samples()
            assert_close(_flat(s), expected, tol, "score_samples", rtol=tol)
            assert_close(
                self.call(model.score, Xnew), expected.mean(), tol, "score", rtol=tol
            )
        elif op == "save-load":
            import scalepca

            self.call(model.save, self.tmp / "model.zarr")
            loaded = self.call(scalepca.load, self.tmp / "model.zarr")
            Z = self.call(loaded.transform, Xnew)
            self.close_scores(
                _scores(Z, self.kind), ref, "transform after save and load"
            )
        elif op in ("eofs_as_correlation", "eofs_as_covariance"):
            import scalepca

            maps = self.call(getattr(scalepca, op), model, Xfit)
            expected = ref.eof_maps(op.rsplit("_", 1)[1])
            assert_close(
                align_signs(_data_space(maps, ref), expected),
                expected,
                rtol,
                op,
                rtol=rtol,
            )
        elif op == "Rotator":
            import scalepca

            rot = self.call(scalepca.Rotator(2).fit, model)
            rref = scalepca.Rotator(2).fit(ref.model)
            Z = self.call(rot.transform, Xfit)
            expected = rref.transform(ref.Xs)
            assert_close(
                align_signs(_scores(Z, self.kind), expected, mode_axis=1),
                expected,
                rtol,
                "Rotator.transform",
                rtol=rtol,
            )
            comps = np.full((2, C.N_FEATURES), np.nan)
            comps[:, ref.keep] = rref.components_
            comps = ref.canonical(comps)
            assert_close(
                align_signs(self._canonical_components(rot.components_), comps),
                comps,
                rtol,
                "Rotator.components_",
                rtol=rtol,
            )
        elif (
            op == "EOF-tools-raw"
        ):  # the data as transform takes them (an N-D field, unweighted)
            import scalepca

            maps = self.call(scalepca.eofs_as_correlation, model, Xnew)
            expected = ref.eof_maps("correlation")
            assert_close(
                align_signs(_data_space(maps, ref), expected),
                expected,
                rtol,
                "eofs_as_correlation of the raw data",
                rtol=rtol,
            )
            rot = scalepca.Rotator(2).fit(model)
            Z = self.call(rot.transform, Xnew)
            expected = scalepca.Rotator(2).fit(ref.model).transform(ref.Xs)
            assert_close(
                align_signs(_scores(Z, self.kind), expected, mode_axis=1),
                expected,
                rtol,
                "Rotator.transform of the raw data",
                rtol=rtol,
            )
        elif op == "eof-fields":
            self.eof_fields(model, Xnew, ref, rtol)
        elif op in ("MCA", "MCA-randomized"):
            from scalepca.analysis.mca import MCA

            krylov = (
                dict(solver="randomized", n_oversamples=0, random_state=0)
                if op == "MCA-randomized"
                else {}
            )
            mca = self.reloaded(
                self.call(
                    MCA(2, standardize=self.option.standardize, **krylov).fit,
                    Xfit,
                    Xfit,
                )
            )
            assert mca.solver_ == ("randomized" if krylov else "covariance")
            expected = ref.components()[:2]
            assert_close(
                align_signs(self._canonical_components(mca.components_x_), expected),
                expected,
                rtol,
                "MCA.components_x_",
                rtol=rtol,
            )
            assert_close(
                mca.singular_values_,
                ref.model.explained_variance_[:2],
                rtol,
                "MCA.singular_values_",
                rtol=rtol,
            )
        elif op in ("MultivariateEOF", "ExtendedEOF"):
            import scalepca

            if op == "MultivariateEOF":
                est = scalepca.MultivariateEOF(2, normalize="none", area_weights=None)
                fitted = self.call(est.fit, [Xfit])
                comps, Z = fitted.components_, self.call(fitted.transform, [Xnew])
            else:
                fitted = self.call(scalepca.ExtendedEOF(2, embedding=1).fit, Xfit)
                comps, Z = fitted.eofs_[:, 0], self.call(fitted.transform, Xnew)
            expected = ref.components()[:2]
            assert_close(
                align_signs(self._canonical_components(comps), expected),
                expected,
                rtol,
                f"{op} EOFs",
                rtol=rtol,
            )
            assert_close(
                fitted.explained_variance_,
                ref.model.explained_variance_[:2],
                rtol,
                f"{op}.explained_variance_",
                rtol=rtol,
            )
            scores = ref.scores()[:, :2]
            assert_close(
                align_signs(_scores(Z, self.kind), scores, mode_axis=1),
                scores,
                rtol,
                f"{op} scores",
                rtol=rtol,
            )
        elif op == "HilbertEOF":
            self.hilbert_eof(Xfit, ref, rtol)
        elif op == "BootstrapEOF":
            self.bootstrap_eof(Xfit, ref, rtol)
        elif op == "transform-reordered":  # labels travel with their columns
            moved = _reorder_features(Xnew)
            try:
                Z = self.call(model.transform, moved)
            except ValueError as err:  # or refused before compute, naming the features
                assert self.tasks.count == 0, (
                    f"refused after {self.tasks.count} dask tasks"
                )
                assert "feature" in str(err) or "order" in str(err), str(err)
                return
            self.close_scores(
                _scores(Z, self.kind), ref, "transform of the reordered features"
            )
        elif op == "transform-as-other-kind":  # the same data held another way
            for other, Xo in self.other_kinds(X):
                Z = self.call(model.transform, Xo)
                self.close_scores(
                    _scores(Z, other), ref, f"transform of the data as {other.name}"
                )
        elif op == "transform-as-other-kind-reordered":  # scikit-learn's rule: refused
            for other, Xo in self.other_kinds(X):
                if not other.labelled:
                    continue
                with pytest.raises(ValueError, match="feature|coordinates") as err:
                    self.call(model.transform, _reorder_features(Xo))
                assert self.tasks.count == 0, (
                    f"{other.name}: refused after {self.tasks.count} dask tasks"
                )
                assert re.search(r"'f3'|'g3'|'lat'", str(err.value)), (
                    f"{other.name}: the refusal names no feature: {err.value}"
                )
        elif op == "pp.pca":
            self.pp_pca(raw, ref)
        elif op == "cli-transform":
            self.cli_transform(model, raw, ref)
        elif op == "cli-run":
            self.cli_run(raw, Xfit)
        elif op == "tools-raw":
            self.tools_raw(Xfit, Xnew, raw, ref, rtol)
        elif op == "tools-cli-transform":
            self.tools_cli_transform(raw, Xfit)
        elif op == "transform-nan":
            self.transform_nan(model, X, ref)
        elif op == "tools-transform-nan":
            self.tools_transform_nan(Xfit, X)
        else:  # pragma: no cover - a new operation needs its branch here
            raise AssertionError(f"no runner for operation {op!r}")

    def eof_fields(self, model, Xnew, ref, rtol):
        """eofs' views (scalepca.analysis.eof_fields) against the reference by hand."""
        from scalepca.analysis.eof_fields import (
            eofs,
            pcs,
            project_field,
            reconstructed_field,
        )

        lam = np.asarray(ref.model.explained_variance_[: C.N_COMPONENTS])
        comps = ref.components()
        for scaling, factor in (
            (1, 1 / np.sqrt(lam)),
            (0, np.ones_like(lam)),
            (2, np.sqrt(lam)),
        ):
            E = _data_space(
                self.call(eofs, model, eofscaling=scaling), ref
            )  # canonical order
            assert_close(
                align_signs(E, comps * factor[:, None]),
                comps * factor[:, None],
                self.est.rtol,
                f"eofs(eofscaling={scaling})",
                rtol=self.est.rtol,
                atol=None
                if self.bounds is None
                else (self.bounds[0] * factor)[:, None],
            )
            Z = _scores(self.call(pcs, model, Xnew, pcscaling=scaling), self.kind)
            expected = ref.pcs() * factor
            assert_close(
                align_signs(Z, expected, mode_axis=1),
                expected,
                self.est.rtol,
                f"pcs(pcscaling={scaling})",
                rtol=self.est.rtol,
                atol=None
                if self.bounds is None
                else (self.bounds[1] * factor)[None, :],
            )
        C2 = ref.model.components_[:2]
        Xc = ref.Xs - ref.Xs.mean(axis=0)
        anomalies = np.full(ref.Xm.shape, np.nan)
        anomalies[:, ref.keep] = (Xc @ C2.T @ C2) * ref.sd / ref.w[ref.keep]
        got = _data_space(self.call(reconstructed_field, model, Xnew, 2), ref)
        assert_close(
            got, ref.canonical(anomalies), rtol, "reconstructed_field(2)", rtol=rtol
        )
        # uncentred: the prepared field (weighted, standardised by scale_ only) on the
        # EOFs
        factor = 1 / np.sqrt(lam)
        expected = (ref.field[:, ref.keep] / ref.sd) @ ref.model.components_.T * factor
        Z = _scores(self.call(project_field, model, Xnew, eofscaling=1), self.kind)
        assert_close(
            align_signs(Z, expected, mode_axis=1),
            expected,
            rtol,
            "project_field(eofscaling=1)",
            rtol=rtol,
        )

    def pp_pca(self, raw, ref):
        """scalepca.pp.pca on the data as the user holds them: the model equals the
        reference, and an AnnData holds its scores and axes where scanpy puts them."""
        import scalepca

        model = self.call(
            scalepca.pp.pca,
            raw,
            C.N_COMPONENTS,
            zero_center=self.option.center,
            mask_var=None,
            dtype="float64",
        )
        self.close_components(self.components(model), ref, "pp.pca components_")
        if self.kind.name.startswith("anndata"):
            if self.kind.path:
                import anndata

                raw = anndata.read_zarr(raw)
            self.close_scores(np.asarray(raw.obsm["X_pca"]), ref, "obsm['X_pca']")
            self.close_components(
                self._canonical_components(np.asarray(raw.varm["PCs"]).T),
                ref,
                "varm['PCs']",
            )

    def pp_pca_masks(self, X):
        """pp.pca of the data held among other cells and genes, kept by mask_obs
        (booleans) and mask_var (positions): the data's PCA; in an AnnData, NaN rows
        for the other cells and zero loadings for the other genes."""
        import scalepca

        ref = self.reference(X)
        refused = isinstance(
            C.expectation((self.est.name, self.kind.name, self.option.name, self.op)),
            C.Refused,
        )
        big, rows, cols = (X, None, None) if refused else _among_others(X)
        raw = self.call(self.kind.make, big, self.tmp)
        model = self.call(
            scalepca.pp.pca,
            raw,
            C.N_COMPONENTS,
            zero_center=self.option.center,
            mask_obs=rows,
            mask_var=cols,
            dtype="float64",
        )
        self.close_components(self.components(model), ref, "pp.pca components_, masked")
        if self.kind.name.startswith("anndata"):
            if self.kind.path:
                import anndata

                raw = anndata.read_zarr(raw)
            Z = np.asarray(raw.obsm["X_pca"])
            assert np.isnan(Z[~rows]).all(), (
                "the other cells' rows of X_pca are not NaN"
            )
            self.close_scores(Z[rows], ref, "obsm['X_pca'] of the cells kept")
            pcs = np.asarray(raw.varm["PCs"])
            assert np.all(np.delete(pcs, cols, axis=0) == 0), (
                "other genes' loadings not 0"
            )
            self.close_components(
                self._canonical_components(pcs[cols].T),
                ref,
                "varm['PCs'] of the genes kept",
            )

    def run_singlecell(self, X):
        """`scalepca run` on a config whose data.singlecell keeps the data's cells
        and genes of a store holding others too (mask_obs, mask_var: boolean
        columns)."""
        import anndata
        import yaml
        import zarr

        import scalepca
        from scalepca.cli import main

        ref = self.reference(X)
        big, rows, cols = _among_others(X)
        a = anndata.read_zarr(self.call(self.kind.make, big, self.tmp))
        a.obs["keep"] = rows
        a.var["use"] = np.isin(np.arange(a.n_vars), cols)
        store = self.tmp / "masked.zarr"
        a.write_zarr(store)
        model = {"method": self.est.cls.lower(), **self.est.params, **self.params()}
        cfg = {
            "data": {
                "path": str(store),
                "format": "anndata",
                "singlecell": {"mask_obs": "keep", "mask_var": "use"},
            },
            "model": model,
            "cluster": {
                "kind": "local",
                "n_workers": 1,
                "threads_per_worker": 1,
                "processes": False,
            },
            "output": {"store": str(self.tmp / "out"), "report": False},
        }
        (self.tmp / "run.yaml").write_text(yaml.safe_dump(cfg))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = self.call(
                main,
                [
                    "run",
                    str(self.tmp / "run.yaml"),
                    "-q",
                    "--scheduler",
                    self.scheduler(),
                ],
            )
        if rc == 2:  # refused: the message, in the config's words, as an error here
            raise ValueError(err.getvalue())
        assert rc == 0, f"scalepca run exited with {rc}: {err.getvalue()}"
        fitted = scalepca.load(self.tmp / "out" / "model.zarr")
        self.close_components(
            self.components(fitted), ref, "run: the saved model's components_"
        )
        Z = zarr.open_group(str(self.tmp / "out" / "scores.zarr"), mode="r")["scores"]
        self.close_scores(
            np.asarray(Z[...], dtype=np.float64), ref, "run: the scores written"
        )

    def other_kinds(self, X):
        """(kind, the data as that kind) for each kind the cell's data are also held
        as."""
        for name in self.kind.also_as:
            other = C._KINDS[name]
            folder = self.tmp / f"as-{name}"
            folder.mkdir(exist_ok=True)
            held = self.call(other.make, X, folder)
            if other.path:  # a store is opened as its own cells open it
                import scalepca

                held = self.call(scalepca.open_matrix, held, **other.open_kwargs)
            yield other, held

    def components(self, model):
        return self._canonical_components(model.components_)

    def hilbert_eof(self, Xfit, ref, rtol):
        """HilbertEOF against the Hermitian eigenproblem of the analytic signal by
        hand."""
        xeofs_hilbert = pytest.importorskip("xeofs.utils.hilbert_transform")
        from scalepca.analysis.hilbert_eof import HilbertEOF

        model = self.reloaded(self.call(HilbertEOF(2).fit, Xfit))
        # transform of the fitted field: its analytic signal on the EOFs, the fitted PCs
        Z = self.call(model.transform, Xfit)
        if hasattr(Z, "compute"):
            Z = Z.compute()
        if isinstance(Z, xr.DataArray):
            Z = Z.transpose(..., "mode").values
        Z = np.asarray(Z).reshape(-1, 2)
        for part in (np.real, np.imag):
            assert_close(
                part(Z),
                part(model.scores_),
                1e-10,
                "HilbertEOF.transform(X) = scores_",
                rtol=1e-10,
            )
        Xc = ref.Xs - ref.Xs.mean(axis=0)
        Z = xeofs_hilbert._hilbert_transform_with_padding(
            Xc, padding="exp", decay_factor=0.2
        )
        lam, V = np.linalg.eigh(Z.conj().T @ Z / (len(Z) - 1))
        assert_close(
            model.explained_variance_,
            lam[::-1][:2],
            rtol,
            "HilbertEOF.explained_variance_",
            rtol=rtol,
        )
        expected = np.full((2, C.N_FEATURES), np.nan, dtype=complex)
        expected[:, ref.keep] = V[:, ::-1][:, :2].T
        expected = ref.canonical(expected)
        comps = np.empty_like(model.components_)
        comps[:, np.asarray(self.kind.feature_order or np.arange(C.N_FEATURES))] = (
            model.components_
        )
        ok = ref.canonical(np.tile(ref.keep, (2, 1)))
        phase = np.array(
            [np.vdot(c[m], e[m]) for c, e, m in zip(comps, expected, ok, strict=True)]
        )
        comps = comps * (phase / np.abs(phase))[:, None]
        land = np.isnan(expected.real)  # NaN + 0j at land: its imaginary part NaN too
        for part in (np.real, np.imag):
            assert_close(
                part(comps),
                np.where(land, np.nan, part(expected)),
                rtol,
                "HilbertEOF.components_",
                rtol=rtol,
            )

    def bootstrap_eof(self, Xfit, ref, rtol):
        """BootstrapEOF: the fit's EOFs as the reference's, each replicate's ratios
        as the eigenvalues of the dense weighted covariance with the same Poisson
        weights."""
        from scalepca.analysis.bootstrap import BootstrapEOF
        from scalepca.linalg.bootstrap import poisson_weights

        model = self.reloaded(
            self.call(BootstrapEOF(2, n_bootstraps=20, random_state=4).fit, Xfit)
        )
        assert model.n_passes_ == (1 if model.solver_ == "covariance" else 2)
        expected = ref.components()[:2]
        assert_close(
            align_signs(self._canonical_components(model.components_), expected),
            expected,
            rtol,
            "BootstrapEOF.components_",
            rtol=rtol,
        )
        w = poisson_weights(4, np.arange(len(ref.Xs)), 20)
        ratios = []
        for b in range(20):
            lam = np.linalg.eigvalsh(np.cov(ref.Xs.T, fweights=w[:, b].astype(int)))[
                ::-1
            ]
            ratios.append(lam[:3] / lam.sum())
        assert_close(
            model.explained_variance_ratio_samples_,
            np.array(ratios),
            rtol,
            "BootstrapEOF.explained_variance_ratio_samples_",
            rtol=rtol,
        )
        # its EOFs rotated (no read) as the reference model's: EOF + varimax + bootstrap
        # in the bootstrap's passes
        import scalepca

        rref = scalepca.Rotator(2).fit(ref.model)
        comps = np.full((2, C.N_FEATURES), np.nan)
        comps[:, ref.keep] = rref.components_
        comps = ref.canonical(comps)
        rot = scalepca.Rotator(2).fit(model)
        assert_close(
            align_signs(self._canonical_components(rot.components_), comps),
            comps,
            rtol,
            "Rotator.components_ of BootstrapEOF",
            rtol=rtol,
        )

    def reloaded(self, tool, name: str = "tool"):
        """``tool`` itself, or (``save-load>`` of a tool) its store ``name.zarr``
        read back by scalepca.load: the same class, parameters and saved state."""
        if not getattr(self, "reload_tool", False):
            return tool
        import scalepca

        self.call(tool.save, self.tmp / f"{name}.zarr")
        got = self.call(scalepca.load, self.tmp / f"{name}.zarr")
        assert type(got) is type(tool) and got.get_params() == tool.get_params()
        return got

    def cli_run(self, raw, Xfit):
        """`scalepca run` of each analysis method on the store ``raw``: the model it
        writes (read by scalepca.load) and its scores equal the tool fitted in Python
        on ``Xfit``, the same store opened the same way."""
        import zarr

        import scalepca
        from scalepca.analysis.bootstrap import BootstrapEOF
        from scalepca.analysis.hilbert_eof import HilbertEOF
        from scalepca.analysis.mca import MCA
        from scalepca.cli import main

        data = {
            "path": str(raw),
            "sample_dims": ["time"],
            **{
                k: v for k, v in self.option.open_kwargs.get("open_options", {}).items()
            },
        }
        if self.option.open_kwargs.get("weights"):
            data["weights"] = self.option.open_kwargs["weights"]
        runs = {
            "mca": ({"n_components": 2}, MCA(2).fit(Xfit, Xfit)),
            "hilbert_eof": ({"n_components": 2}, HilbertEOF(2).fit(Xfit)),
            "bootstrap_eof": (
                {"n_components": 2, "n_bootstraps": 10, "random_state": 4},
                BootstrapEOF(2, n_bootstraps=10, random_state=4).fit(Xfit),
            ),
        }
        for method, (params, tool) in runs.items():
            out = self.tmp / f"run-{method}"
            cfg = {
                "data": {
                    **data,
                    "variable": ["sst", "sst"] if method == "mca" else "sst",
                },
                "model": {"method": method, **params},
                "cluster": {"kind": "local", "n_workers": 1, "processes": False},
                "output": {"store": str(out), "report": False},
                "progress": False,
            }
            path = self.tmp / f"{method}.yaml"
            path.write_text(yaml.safe_dump(cfg))
            argv = ["run", str(path), "--quiet", "--scheduler", self.scheduler()]
            assert self.call(main, argv) == 0, method
            got = self.call(scalepca.load, out / "model.zarr")
            assert type(got) is type(tool) and got.get_params() == tool.get_params()
            for name in _fitted_arrays(tool):
                a, b = getattr(tool, name), getattr(got, name)
                for part in (np.real, np.imag) if np.iscomplexobj(a) else (np.asarray,):
                    if a is not None:
                        assert_close(
                            part(b), part(a), 1e-12, f"{method}: {name}", rtol=1e-12
                        )
            group = zarr.open_group(str(out / "scores.zarr"), mode="r")
            if method == "mca":
                zx, _ = tool.transform(Xfit, Xfit)
                assert_close(
                    _scores(np.asarray(group["scores_x"]), self.kind),
                    _scores(zx, self.kind),
                    1e-12,
                    "mca: scores_x",
                    rtol=1e-12,
                )
            elif method == "hilbert_eof":
                z = group["scores_amplitude"][...] * np.exp(
                    1j * group["scores_phase"][...]
                )
                for part in (np.real, np.imag):
                    assert_close(
                        part(z),
                        part(tool.scores_),
                        1e-12,
                        "hilbert_eof: complex PCs",
                        rtol=1e-12,
                    )
            else:
                assert_close(
                    _scores(np.asarray(group["scores"]), self.kind),
                    _scores(tool.transform(Xfit), self.kind),
                    1e-12,
                    "bootstrap_eof: PCs",
                    rtol=1e-12,
                )

    def _tools(self, Xfit) -> dict:
        """The three analysis tools fitted on the matrix ``Xfit`` (MCA: paired with
        itself)."""
        from scalepca.analysis.bootstrap import BootstrapEOF
        from scalepca.analysis.hilbert_eof import HilbertEOF
        from scalepca.analysis.mca import MCA

        return {
            "mca": self.call(MCA(2).fit, Xfit, Xfit),
            "hilbert_eof": self.call(HilbertEOF(2).fit, Xfit),
            "bootstrap_eof": self.call(
                BootstrapEOF(2, n_bootstraps=10, random_state=4).fit, Xfit
            ),
        }

    @staticmethod
    def _transformed(tool, X):
        """The tool's scores of ``X`` (MCA: of X paired with itself, X's
        coefficients)."""
        from scalepca.analysis.mca import MCA

        return tool.transform(X, X)[0] if isinstance(tool, MCA) else tool.transform(X)

    def _rows(self, Z):
        """Scores as (n × k) NumPy in sample order; complex PCs kept complex."""
        Z = _values(Z)
        if np.issubdtype(getattr(Z, "dtype", np.float64), np.complexfloating):
            return _scores(Z.real, self.kind) + 1j * _scores(Z.imag, self.kind)
        return _scores(Z, self.kind)

    def tools_raw(self, Xfit, Xnew, raw, ref, rtol):
        """Each tool (saved and loaded for ``save-load>tools-raw``) given the data as
        the user holds them repeats its recorded preparation: the scores of the
        matrix ``Xfit`` to 1e-12, the reference's PCs (MCA, bootstrap) and the fitted
        complex PCs (Hilbert)."""
        new = [Xnew]
        if self.kind.path and self.kind.name in C.XARRAY_PATHS.split("|"):
            from scalepca.preprocessing._open import open_dataset

            new.append(
                open_dataset(str(raw))
            )  # the store's Dataset: the variable by name
        expected = ref.scores()[:, :2]
        for name, tool in self._tools(Xfit).items():
            tool = self.reloaded(tool, name)
            by_matrix = self._rows(self.call(self._transformed, tool, Xfit))
            for X in new:
                got = self._rows(self.call(self._transformed, tool, X))
                for part in (np.real, np.imag) if name == "hilbert_eof" else (np.real,):
                    assert_close(
                        part(got),
                        part(by_matrix),
                        1e-12,
                        f"{name}: transform of the raw data vs of the matrix",
                        rtol=1e-12,
                    )
                if name == "hilbert_eof":
                    for part in (np.real, np.imag):
                        assert_close(
                            part(got),
                            part(tool.scores_),
                            1e-10,
                            "hilbert_eof: transform of the raw data = scores_",
                            rtol=1e-10,
                        )
                else:
                    assert_close(
                        align_signs(got.real, expected, mode_axis=1),
                        expected,
                        rtol,
                        f"{name}: scores of the raw data vs the reference's PCs",
                        rtol=rtol,
                    )

    def tools_cli_transform(self, raw, Xfit):
        """`scalepca transform` of each tool's store on the cell's store: the arrays its
        scores_arrays gives in Python (the layout of run's scores.zarr)."""
        import zarr

        from scalepca.cli import main

        for name, tool in self._tools(Xfit).items():
            self.call(tool.save, self.tmp / f"{name}.zarr")
            out = self.tmp / f"{name}-scores.zarr"
            rc = self.call(
                main,
                [
                    "transform",
                    str(self.tmp / f"{name}.zarr"),
                    str(raw),
                    "--out",
                    str(out),
                    "--no-progress",
                    "--scheduler",
                    self.scheduler(),
                    "-q",
                ],
            )
            assert rc == 0, f"{name}: scalepca transform exited with {rc}"
            group = zarr.open_group(str(out), mode="r")
            fields = [Xfit, Xfit] if name == "mca" else Xfit
            arrays, _ = tool.scores_arrays(fields, fitted=True)
            assert set(group.array_keys()) >= set(arrays), f"{name}: {sorted(group)}"
            if name == "hilbert_eof":
                z = group["scores_amplitude"][...] * np.exp(
                    1j * group["scores_phase"][...]
                )
                for part in (np.real, np.imag):
                    assert_close(
                        part(z),
                        part(tool.scores_),
                        1e-12,
                        "hilbert_eof: complex PCs",
                        rtol=1e-12,
                    )
                continue
            for key, expected in arrays.items():
                assert_close(
                    _scores(np.asarray(group[key]), self.kind),
                    _scores(expected, self.kind),
                    1e-12,
                    f"{name}: {key}",
                    rtol=1e-12,
                )

    def _holed(self, X):
        """What transform takes for ``X`` with the entry (NAN_ROW, NAN_FEATURE) NaN."""
        holed = X.copy()
        holed[C.NAN_ROW, C.NAN_FEATURE] = np.nan
        return self.inputs(holed, tag="nan")[1]

    def _refused_or_lazy(self, f, X, what, *, rows_counted=False):
        """``f(X)`` refused (ValueError) by the call, or lazy: nothing computed at the
        call and the refusal raised when its result is (re-raised for the table's
        check). ``rows_counted``: the call may count a dask DataFrame's partition rows
        first."""
        Z = self.call(f, X)  # refused here: in memory (a tool's NumPy PCs are computed)
        if rows_counted and self.kind.name == "dask-dataframe":
            pass  # the tools map row blocks of known sizes: the partitions are counted
        elif isinstance(Z, xr.DataArray) and Z.chunks is not None or hasattr(Z, "dask"):
            assert self.tasks.count == 0, (
                f"{what}: {self.tasks.count} dask tasks at the call"
            )
        return Z.compute() if isinstance(Z, xr.DataArray) else _values(Z)

    def transform_nan(self, model, X, ref):
        """transform of the data with one NaN at a feature the model uses: refused (by
        the call for in-memory input, when computed for lazy input); where the model
        takes a NaN as a missing value (PPCA EM; genotypes: a missing call set to 2p),
        the reference's scores of the holed data, the other rows unchanged."""
        Z = self._refused_or_lazy(model.transform, self._holed(X), "transform")
        got = _scores(Z, self.kind)
        cell = (self.est.name, self.kind.name, self.option.name, self.op)
        # not a ValueError: the reference below would refuse the NaN itself
        assert C.expectation(cell) is None, "scores of data with a NaN, not a refusal"
        column = int(np.flatnonzero(ref.perm == C.NAN_FEATURE)[0])
        holed = ref.Xs.copy()  # in the fit's units: a missing call is 0 standardised
        holed[C.NAN_ROW, int(np.sum(ref.keep[:column]))] = (
            0.0 if self.option.genotype else np.nan
        )
        expected = ref.model.transform(holed)
        assert np.isfinite(got).all(), "a missing value gave NaN scores"
        assert_close(
            align_signs(got, expected, mode_axis=1),
            expected,
            self.est.rtol,
            "transform of holed data",
            rtol=self.est.rtol,
        )

    def tools_transform_nan(self, Xfit, X):
        """Each tool fitted on the clean data refuses the data with one NaN: MCA,
        MultivariateEOF, ExtendedEOF and BootstrapEOF as the estimators do, HilbertEOF
        by fit's check of gaps; the last refusal is raised for the table's check."""
        import scalepca

        new = self._holed(X)
        tools = {
            name: (lambda A, t=tool: self._transformed(t, A))
            for name, tool in self._tools(Xfit).items()
        }
        mv = scalepca.MultivariateEOF(2, normalize="none", area_weights=None)
        self.call(mv.fit, [Xfit])
        tools["MultivariateEOF"] = lambda A: mv.transform([A])
        tools["ExtendedEOF"] = self.call(
            scalepca.ExtendedEOF(2, embedding=1).fit, Xfit
        ).transform
        errors = []
        for name in (
            "mca",
            "bootstrap_eof",
            "MultivariateEOF",
            "ExtendedEOF",
            "hilbert_eof",
        ):
            with pytest.raises(ValueError, match="NaN") as err:
                self._refused_or_lazy(tools[name], new, name, rows_counted=True)
            errors.append(err.value)
        raise errors[-1]

    def _canonical_components(self, comps):
        comps = np.asarray(comps, dtype=np.float64)
        perm = np.asarray(self.kind.feature_order or np.arange(C.N_FEATURES))
        out = np.empty_like(comps)
        out[:, perm] = comps
        return out

    def reference(self, X, **params):
        ref = Reference(self.est, self.kind, self.option, X, params)
        self.bounds = ref.float32_bounds(self.est.rtol)
        return ref

    def close_components(self, comps, ref, what):
        """Components (rows, canonical order) against the reference's, to the
        estimator's tolerance or, for float32 data, each to its own bound."""
        expected = ref.components()
        assert_close(
            align_signs(comps, expected),
            expected,
            self.est.rtol,
            what,
            rtol=self.est.rtol,
            atol=None if self.bounds is None else self.bounds[0][:, None],
        )

    def close_scores(self, Z, ref, what):
        expected = ref.scores()
        assert_close(
            align_signs(Z, expected, mode_axis=1),
            expected,
            self.est.rtol,
            what,
            rtol=self.est.rtol,
            atol=None if self.bounds is None else self.bounds[1][None, :],
        )

    def cli_transform(self, model, raw, ref):
        import zarr

        from scalepca.cli import main

        self.call(model.save, self.tmp / "model.zarr")
        out = self.tmp / "scores.zarr"
        rc = self.call(
            main,
            [
                "transform",
                str(self.tmp / "model.zarr"),
                *(map(str, raw) if isinstance(raw, list) else [str(raw)]),
                "--out",
                str(out),
                "--no-progress",
                "--scheduler",
                self.scheduler(),
            ],
        )
        assert rc == 0, f"scalepca transform exited with {rc}"
        group = zarr.open_group(str(out), mode="r")
        scores = group["scores"]
        Z = np.asarray(scores[...], dtype=np.float64)
        dims = scores.attrs.get("_ARRAY_DIMENSIONS")
        if dims and "mode" in dims and dims[-1] != "mode":
            Z = np.moveaxis(Z, dims.index("mode"), -1)
        Z = Z.reshape(-1, Z.shape[-1])
        self.close_scores(Z, ref, "CLI transform")

    def resume(self, X):
        """A checkpointed fit, then another with the same checkpoint: after a change
        of the tolerance (resume-params) or of the data (resume-data). The second
        must equal a fresh fit of its own parameters and data, or be refused."""
        loose, tight = self.est.checkpoint
        ck = str(self.tmp / "ck")
        if self.op == "resume-params":
            Xfit, _, _ = self.inputs(X)
            self.fit(Xfit, checkpoint=ck, **loose)
            model = self.fit(Xfit, checkpoint=ck, **tight)
            ref = self.reference(X, **tight)
            Xnew = Xfit
        else:
            Xfit, _, _ = self.inputs(X)
            self.fit(Xfit, checkpoint=ck)
            X2 = _data(
                self.option, permute_columns=True, shift=self.shift, kind=self.kind
            )
            Xnew, _, _ = self.inputs(X2, tag="b")
            model = self.fit(Xnew, checkpoint=ck)
            ref = self.reference(X2)
        if self.est.linear or self.est.cls in ("SparsePCA", "RobustPCA"):
            self.close_components(
                self.components(model), ref, "components_ after resume"
            )
        Z = self.call(model.transform, Xnew)
        self.close_scores(_scores(Z, self.kind), ref, "transform after resume")

    def partial(self, X):
        """partial_fit on the cell's data, then on 60 more rows of the same kind
        (other values, made and opened the same way): the model of all 120 rows."""
        X2 = _data(self.option, shift=self.shift + 0.25, kind=self.kind)
        if not (self.option.genotype or self.kind.genotypes):
            X2 = X2 + np.linspace(-1.0, 1.0, C.N_FEATURES) * X2.std(
                axis=0
            )  # a moved mean
        first, new, _ = self.inputs(X)
        second, _, _ = self.inputs(X2, tag="b")
        model = self.est.make(**self.params())
        self.call(model.partial_fit, first)
        self.call(model.partial_fit, second)
        ref = self.reference(np.vstack([X, X2]))
        if self.est.linear or self.est.cls == "SparsePCA":
            self.close_components(
                self.components(model), ref, "components_ after partial_fit"
            )
        Z = _scores(self.call(model.transform, new), self.kind)
        expected = ref.scores()[: len(X)]
        assert_close(
            align_signs(Z, expected, mode_axis=1),
            expected,
            self.est.rtol,
            "transform after partial_fit",
            rtol=self.est.rtol,
            atol=None if self.bounds is None else self.bounds[1][None, :],
        )


REORDER = [3, 0, 7, 5, 1, 6, 2, 4]


def _among_others(X):
    """X held among 20 other cells (10 before, 10 after) and 3 other genes (2 before,
    1 after): (the larger matrix, the boolean mask of X's rows, the positions of X's
    columns)."""
    n, d = X.shape
    big = (
        np.random.default_rng(36)
        .normal(scale=7.0, size=(n + 20, d + 3))
        .astype(X.dtype)
    )
    rows = np.zeros(n + 20, dtype=bool)
    rows[10 : 10 + n] = True
    cols = np.arange(2, 2 + d)
    big[np.ix_(rows, cols)] = X
    return big, rows, cols


def _reorder_features(obj):
    """The same data with the features in another order, each label with its column."""
    if isinstance(obj, xr.DataArray):
        if "lat" in obj.dims:
            return obj.isel(lat=slice(None, None, -1))
        return obj.isel({obj.dims[1]: REORDER})
    if hasattr(obj, "columns"):  # pandas or dask DataFrame
        return obj[list(obj.columns[REORDER])]
    return obj[:, REORDER]  # AnnData, its views and backed files


def _flat(s):
    return np.asarray(_values(s), dtype=np.float64).reshape(-1)


@pytest.mark.parametrize(
    ("estimator", "kind", "option", "op"), [_param(c) for c in CELLS]
)
def test_contract(estimator, kind, option, op, tmp_path, tasks, cli_scheduler):
    cell = Cell(estimator, kind, option, op, tmp_path, tasks, cli_scheduler)
    outcome = C.expectation((estimator, kind, option, op))
    if isinstance(
        outcome, C.Defect
    ):  # run as it should be once fixed (xfail until then)
        outcome = outcome.then
    if isinstance(outcome, C.Refused):
        with pytest.raises(outcome.error, match=re.escape(outcome.match)):
            cell.run()
        if outcome.before_compute:
            assert tasks.count == 0, f"refused after {tasks.count} dask tasks had run"
    else:
        cell.run()


def test_no_description_leaks_by_value(tasks):
    """Two arrays of the same values are still two inputs: fitting an AnnData does
    not change how a later model takes a dask array that happens to hold the same
    numbers."""
    import anndata as ad
    import dask.array as da

    import scalepca

    X = C.base_data()
    w = C.ARRAY_WEIGHTS
    scalepca.PCA(3).fit(ad.AnnData(X))
    model = scalepca.PCA(3).fit(
        scalepca.open_matrix(da.from_array(X, chunks=(-1, -1)), weights=w)
    )
    ref = scalepca.PCA(3).fit(X * w)
    Z = model.transform(da.from_array(X, chunks=(-1, -1))).compute()
    assert_close(
        align_signs(Z, ref.transform(X * w), mode_axis=1),
        ref.transform(X * w),
        1e-10,
        "transform",
        rtol=1e-10,
    )


def test_every_axis_value_is_tried():
    """Each estimator, kind, option and operation is in at least one cell that runs."""
    run = set(CELLS)
    for axis, names in zip(C.AXES, C._names(), strict=True):
        i = C.AXES.index(axis)
        missing = [n for n in names if not any(c[i] == n for c in run)]
        assert not missing, f"{axis} never run: {missing}"


def test_expectation_rows_match_cells():
    """Every row of the table applies to some cell of the matrix (no stale rows)."""
    all_cells = C.cells()
    unused = [r for r in C.EXPECTATIONS if not any(r.matches(c) for c in all_cells)]
    assert not unused, f"rows that match no cell: {unused}"
