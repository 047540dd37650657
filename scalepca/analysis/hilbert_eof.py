"""Hilbert (complex) EOF analysis: EOFs of the analytic signal, for propagating
patterns.

A standing EOF cannot hold a wave that travels (ENSO's eastward and westward phases, a
monsoon's northward march): it needs two modes in quadrature. Hilbert EOF analysis
(Rasmusson et al., 1981; Barnett, 1983; Horel, 1984) replaces every grid cell's series
``x(t)`` by its analytic signal ``z(t) = x(t) + i H[x](t)`` (``H`` the Hilbert transform
along time, a 90° phase shift of every frequency) and diagonalises the Hermitian
covariance

    C = Zᴴ Z / (n − 1)        (d × d complex, Z the centred analytic signal, n × d)

``C = V Λ Vᴴ``. Each complex EOF ``v_i`` has an amplitude ``|v_i|`` (where the mode is
strong) and a phase ``arg v_i`` (its propagation: the phase increases in the direction
the pattern travels); each complex PC ``Z v_i`` has an amplitude (the mode's strength in
time) and a phase (where in its cycle the mode is). As xeofs' ``HilbertEOF``, the field
enters as it is given (weight it first, ``open_matrix(..., weights="sqrt_coslat")``), is
centred, and may be padded before the transform (``padding="exp"``, ``decay_factor``) to
damp the edge effects of the FFT.

Time must be whole in every task: the Hilbert transform of a series needs all of it. The
fit regroups the matrix into **column strips** (all time steps × some grid cells,
:func:`scalepca.linalg.snapshot.column_strips`; a rechunk of the input, no data at the
client) and makes the analytic signal strip by strip. Two solvers:

- ``"gram"``: the n × n Hermitian Gram ``Z Zᴴ = Σ_strips z zᴴ`` in one pass (only n × n
  partials travel), its eigendecomposition ``U Σ² Uᴴ`` on the client, which gives every
  eigenvalue and the PCs ``U Σ``; a second pass gives the EOFs ``V = Zᴴ U Σ⁻¹`` strip by
  strip.
- ``"covariance"``: the analytic signal made on strips is regrouped into row blocks and
  reduced to the d × d ``Zᴴ Z`` (one pass; the regrouping moves the signal between
  workers: 16 bytes per value); its eigendecomposition gives the EOFs and every
  eigenvalue; a second pass gives the PCs ``Z V``.

``"auto"`` takes the one of least predicted cost (``scalepca.solvers.choice``; the smaller
side: ``"gram"`` when n ≤ d, else ``"covariance"``). Both are exact (LAPACK on the
client, float64).

Examples
--------
>>> X = scalepca.open_matrix("sst.nc", variable="sst", sample_dims="time",
...                          weights="sqrt_coslat")
>>> model = HilbertEOF(4, padding="exp", decay_factor=0.2).fit(X)   # two passes
>>> model.components_amplitude()[0], model.components_phase()[0]           # (lat, lon)
>>> model.scores_amplitude(), model.scores_phase()                         # (time, mode)
>>> model.save("heof.zarr"); scalepca.load("heof.zarr")

References
----------
Horel, J. D. (1984). Complex principal component analysis: theory and examples. J.
Climate Appl. Meteor., 23, 1660–1673.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator

from ..linalg import hilbert as kern
from ..linalg import passes
from ..linalg.snapshot import STRIP_BYTES, column_strips
from ..models._params import Choice, Param, Real, Rule, Shape, check_parameters
from ..models._saving import SavedModel
from ..solvers.choice import Problem, resolve_tool
from . import _prep

__all__ = ["HilbertEOF"]

SOLVERS = ("auto", "gram", "covariance")
#: a strip's padded complex signal is 3 n × w × 16 bytes: strips 6× narrower than PCA's,
#: so that the signal takes about what PCA's strip does (128 MiB)
HILBERT_STRIP_BYTES = STRIP_BYTES // 6
#: the largest d (covariance) or n (gram) whose square the client decomposes by default
MAX_GRAM_SIDE = 20_000


def _strips(X: da.Array) -> da.Array:
    """``X`` regrouped to column strips (every time step in each task)."""
    return column_strips(X, HILBERT_STRIP_BYTES)


def _complex_pcs(S: da.Array, comps: np.ndarray, mean: np.ndarray, opts) -> da.Array:
    """The lazy complex PCs ``Z V`` (n × k complex, one chunk) of the column strips
    ``S``: each strip centred (``mean``, NaN at features left out), turned into its
    analytic signal (``opts``: padding and decay factor) and multiplied by its rows
    of the components (``comps``, k × d, 0 at features left out) where it lives, a
    blockwise map; the n × k partials summed over the strips in a tree
    (:func:`passes.sum_over_strips`). One pass when computed; nothing is computed
    here."""
    mean = np.where(np.isfinite(mean), mean, 0.0)
    return passes.sum_over_strips(
        S,
        kern.strip_scores,
        comps.T,
        mean,
        k=comps.shape[0],
        dtype=np.complex128,
        args=opts,
        name="complex-pcs",
    )


def _whole_series(z, nan, *, n: int, keep: np.ndarray):
    """The complex PCs ``z``, once ``HilbertEOF._check_nan`` passed the new data's
    NaN counts ``nan``."""
    HilbertEOF._check_nan(nan, n, keep)
    return z


#: the saved names of the field's feature and sample coordinates
_TEMPLATES = ("_template_features_json", "_template_samples_json")
#: the complex fitted arrays
_COMPLEX = ("components_", "scores_")


def _check_n_components(value, name, params, shape):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    if shape is not None and value > min(shape.n, shape.d):
        raise ValueError(
            f"{name}={value} but the field has {shape.n} samples and {shape.d} features"
        )
    return int(value)


def _check_padding(value, name, params, shape):
    if value is not None and value not in tuple(kern.PADDINGS):
        raise ValueError(f"{name} must be 'exp' or 'none' (or None); got {value!r}")
    return value  # as given: None stays None in get_params, and in a store


def _padding_used(padding: str | None):
    """The padding function the transform applies, looked up once in
    :data:`~scalepca.linalg.hilbert.PADDINGS`: None is ``"none"``."""
    if padding is None:
        padding = "none"
    return kern.PADDINGS[padding]


def _solver_of(params, n: int, d: int) -> str:
    """``solver`` as it runs on n × d data: ``"auto"`` by the solvers' predicted cost
    (:func:`scalepca.solvers.choice.resolve_tool`)."""
    p = Problem(n, d, _prep.components_asked(params))
    return resolve_tool("hilbert", params["solver"], p).solver


def _check_side(params, shape):
    """The decomposed side (n for ``"gram"``, d for ``"covariance"``) within
    MAX_GRAM_SIDE."""
    solver = _solver_of(params, shape.n, shape.d)
    side = shape.n if solver == "gram" else shape.d
    if side > MAX_GRAM_SIDE:
        raise ValueError(
            f"solver={solver!r} decomposes a {side:,} × {side:,} complex matrix on the "
            f"client (over {MAX_GRAM_SIDE:,}): use solver="
            f"{'covariance' if solver == 'gram' else 'gram'!r} or coarsen the field"
        )


def _polar(z):
    """``(|z|, arg z)`` of complex PCs in their kind (a DataArray keeps its
    coordinates)."""
    import xarray as xr

    def parts(a):
        angle = da.angle if isinstance(a, da.Array) else np.angle
        return abs(a), angle(a)

    if isinstance(z, xr.DataArray):
        amplitude, phase = parts(z.data)
        return (
            z.copy(data=amplitude).rename("scores_amplitude"),
            z.copy(data=phase).rename("scores_phase"),
        )
    return parts(z)


class HilbertEOF(_prep.OneField, SavedModel, BaseEstimator):
    """Hilbert (complex) EOF analysis of a field ``X`` (n time steps × d grid cells).

    Parameters
    ----------
    n_components : int, default=2
        Number of complex modes.
    padding : {"exp", "none"} or None, default="exp"
        ``"exp"``: each series is extended by its own length at both ends with an
        exponential decay from its first (last) anomaly to its linear trend before the
        transform (xeofs' ``padding="exp"``); ``"none"`` / None: the transform of the
        series as it is.
    decay_factor : float, default=0.2
        The e-folding length of the padding as a fraction of the series length (xeofs'
        ``decay_factor``; 0.05 for very variable series, 0.2 for smooth ones).
    solver : {"auto", "gram", "covariance"}, default="auto"
        ``"gram"``: the n × n Hermitian Gram of the time steps; ``"covariance"``: the d
        × d Hermitian covariance; ``"auto"``: the one of least predicted cost
        (``"gram"`` when n ≤ d).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features), complex
        The complex EOFs (unit norm; NaN at features left out). The phase of each mode
        is fixed so that its largest-magnitude entry is real and positive.
    scores_ : ndarray of shape (n_samples, n_components), complex
        The complex PCs ``Z v_i`` of the fitted data (xeofs'
        ``scores(normalized=False)``).
    explained_variance_ : ndarray of shape (n_components,)
        ``λ_i = s_i² / (n − 1)``, the eigenvalues of the Hermitian covariance.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``λ_i / total_variance_``.
    singular_values_ : ndarray of shape (n_components,)
        ``s_i``, the singular values of the centred analytic signal.
    total_variance_ : float
        ``Σ_t |z|² / (n − 1)`` over the features kept (the trace of C).
    mean_ : ndarray (n_features,)
        Feature means (NaN at features left out).
    n_samples_ : int
        Number of time steps in the training data.
    n_features_in_ : int
        Number of features (grid cells) seen during ``fit``.
    n_passes_ : int
        Passes over the data the fit made (2).
    solver_ : str
        The solver ``solver`` chose.

    Notes
    -----
    Passes over the data: 2 (``"gram"``: the Gram, then the EOFs; ``"covariance"``: the
    covariance, then the PCs); the means and the land mask come with the first. The
    input is rechunked to column strips (all n time steps × w features, w such that the
    strip holds about 21 MiB in float64 and its padded complex signal, 3 n × w × 16
    bytes, about 128 MiB; narrower when the input's column chunks are). Memory per
    worker: a strip, its signal and an n × n (``"gram"``) partial; ``"covariance"``
    holds row blocks of the signal (16 bytes per value) in flight while it is regrouped,
    and d × d partials. The client holds n × n or d × d complex values and decomposes
    them: the decomposed side is at most 20,000 (``MAX_GRAM_SIDE``), the other is not
    limited.

    ``transform(X)`` gives the complex PCs of a field of the same grid (other times,
    or the fitted field again: then ``scores_``), lazily for dask and xarray input
    (NumPy input gives NumPy, computed in one counted pass). ``X`` is regrouped to
    column strips as in the fit; in each strip's task its series become their own
    analytic signals (the fit's padding and decay) and meet the strip's rows of the
    complex EOFs (a blockwise map, an n' × k complex partial per strip); the partials
    are summed over the strips in a tree of fan-in 4. One pass over ``X`` when the
    result is computed. Memory per worker: the fit's strip and its padded signal, and
    at most 5 n' × k partials in a merge; only the n' × k result reaches the client,
    when it is asked for. The (n', k) result comes in ``X``'s row chunks.
    ``inverse_transform`` rebuilds the field from complex PCs.

    References
    ----------
    Barnett, T. P. (1983). Interaction of the monsoon and Pacific trade wind system at
    interannual time scales. Part I: The equatorial zone. Monthly Weather Review,
    111, 756–773.

    Horel, J. D. (1984). Complex principal component analysis: theory and examples.
    Journal of Climate and Applied Meteorology, 23, 1660–1673.

    Hannachi, A., Jolliffe, I. T. & Stephenson, D. B. (2007). Empirical orthogonal
    functions and related techniques in atmospheric science: a review. International
    Journal of Climatology, 27, 1119–1152.

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> t = np.arange(400)[:, None]
    >>> x = np.cos(2 * np.pi * (t / 25 - np.arange(30) / 30))   # a wave travelling east
    >>> heof = scalepca.HilbertEOF(n_components=1).fit(x)       # two passes
    >>> heof.components_.shape, heof.components_.dtype
    ((1, 30), dtype('complex128'))
    >>> bool(heof.explained_variance_ratio_[0] > 0.95)          # one complex mode
    True
    >>> phase = np.unwrap(heof.components_phase()[0])            # radians, by cell
    >>> bool(np.all(np.diff(phase) > 0))                         # grows along the way
    True
    """

    #: the parameters (:mod:`scalepca.models._params`), read by ``fit``, configs and
    #: ``load``
    _parameters = {
        "n_components": Param("int", (int,), _check_n_components, shaped=True),
        "padding": Param(
            "choice",
            (str, type(None)),
            _check_padding,
            choices=("exp", "none"),
            forms="'exp', 'none' or null",
        ),
        "decay_factor": Real(0, open_low=True),
        "solver": Choice(*SOLVERS),
    }
    _parameter_rules = (Rule(_check_side, needs=("solver",)),)

    def __init__(
        self,
        n_components: int = 2,
        *,
        padding: str | None = "exp",
        decay_factor: float = 0.2,
        solver: str = "auto",
    ):
        self.n_components = n_components
        self.padding = padding
        self.decay_factor = decay_factor
        self.solver = solver

    # -- fit ---------------------------------------------------------------------------
    def _check_params(self, n: int, d: int) -> tuple:
        """The parameters checked against their table for n × d data:
        ``(padding function, solver)`` as used."""
        values = check_parameters(self, Shape(n, d))
        return _padding_used(values["padding"]), _solver_of(values, n, d)

    def fit(self, X, y=None) -> HilbertEOF:
        """Fit on the field ``X`` (time steps as samples).

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
        self : HilbertEOF
            The fitted model.
        """
        xin = _prep.field_input(X)
        n, d = xin.data.shape
        padding, solver = self._check_params(n, d)
        S = _strips(xin.data)
        opts = (padding, float(self.decay_factor))
        self.n_passes_ = 0
        with passes.counting(self, planned=2, chunks=S.numblocks[1]):
            if solver == "gram":
                vals, U, comps, mom = self._fit_gram(S, opts)
            else:
                vals, U, comps, mom = self._fit_covariance(S, opts)
        self._set_fitted(vals, U, comps, mom, n, d, solver)
        self._keep_labels(xin)
        self._preprocessing = xin.prep  # transform repeats it on new raw data
        return self

    def _fit_gram(self, S, opts):
        blocks = S.to_delayed(optimize_graph=True).ravel().tolist()
        graph = passes.reduce_blocks(
            blocks, kern.strip_gram, kern.merge_strips, *opts, split_every=4
        )
        (mom,) = passes.compute(graph, name="Hermitian Gram")
        self._check_nan(mom["nan"], S.shape[0])
        theta, U = np.linalg.eigh(mom.pop("G"))
        theta, U = theta[::-1].clip(min=0.0), U[:, ::-1]
        k = int(self.n_components)
        s = np.sqrt(theta[:k])
        inv_s = np.divide(1.0, s, out=np.zeros_like(s), where=s > 0)
        Ud, inv_sd = passes.shared(U[:, :k]), passes.shared(inv_s)  # one key each
        parts = [
            dask.delayed(kern.strip_components, pure=True)(b, Ud, inv_sd, *opts)
            for b in blocks
        ]
        comps = np.hstack(passes.compute(*parts, name="complex EOFs"))
        return theta, U[:, :k] * s, comps, mom

    def _fit_covariance(self, S, opts):
        Z = S.map_blocks(
            kern.analytic_signal,
            *opts,
            dtype=np.complex128,
            meta=np.empty((0, 0), dtype=np.complex128),
        )
        rows = max(1, min(S.shape[0], 2**27 // max(1, 16 * S.shape[1])))
        stats = S.map_blocks(
            kern.strip_stats, chunks=((2,), S.chunks[1]), dtype=np.float64
        )
        graph = passes.reduce_rows(
            Z.rechunk({0: rows, 1: -1}),
            kern.row_gram,
            kern.merge_row_grams,
            also=stats.rechunk({1: -1}),
        )
        g, (mean, nan) = passes.compute(*graph, name="Hermitian covariance")
        C = g["C"]
        mom = {"mean": mean, "nan": nan, "ss": np.real(np.diag(C)).copy()}
        self._check_nan(mom["nan"], S.shape[0])
        theta, V = np.linalg.eigh(C)
        theta, V = theta[::-1].clip(min=0.0), V[:, ::-1]
        k = int(self.n_components)
        comps = V[:, :k].T
        (scores,) = passes.compute(
            _complex_pcs(S, comps, mean, opts), name="complex PCs"
        )
        return theta, scores, comps, mom

    @staticmethod
    def _check_nan(nan, n, keep=None):
        """Refuse series with gaps, from each feature's NaN count ``nan`` over the
        ``n`` time steps. In ``fit`` (``keep`` None) a feature NaN at every step is
        land, left out; in ``transform`` every feature the model uses (``keep``) must
        be whole."""
        nan = np.asarray(nan)
        only = ""
        if keep is None:  # the fit: a feature NaN at every step is land, left out
            keep, only = nan < n, " only"
        partial = np.flatnonzero((nan > 0) & keep)
        if partial.size:
            raise ValueError(
                f"{partial.size} features are NaN at some time steps{only} "
                f"(e.g. features {partial[:3].tolist()}): the analytic "
                "signal needs whole series (one gap changes every time "
                "step's PCs); Hilbert EOF leaves out features NaN at every "
                "step of the fit (land) and needs the others complete"
            )
        if keep is None and (nan == n).all():
            raise ValueError("X is NaN at every feature")

    def _set_fitted(self, theta, scores, comps, mom, n, d, solver):
        keep = np.asarray(mom["nan"]) == 0
        comps = np.where(keep[None, :], comps, 0.0)
        k = comps.shape[0]
        # the phase of each mode: its largest-magnitude entry real and positive
        top = comps[np.arange(k), np.abs(comps).argmax(axis=1)]
        rot = np.where(np.abs(top) > 0, np.abs(top) / np.where(top == 0, 1, top), 1.0)
        comps, scores = comps * rot[:, None], scores * rot[None, :]
        comps[:, ~keep] = np.nan
        total = float(np.asarray(mom["ss"])[keep].sum()) / (n - 1)
        lam = theta[:k] / (n - 1)
        self.components_ = comps
        self.scores_ = np.asarray(scores)
        self.singular_values_ = np.sqrt(theta[:k])
        self.explained_variance_ = lam
        self.total_variance_ = total
        self.explained_variance_ratio_ = lam / total
        self.mean_ = np.where(keep, np.asarray(mom["mean"], dtype=np.float64), np.nan)
        self.n_samples_, self.n_features_in_ = int(n), int(d)
        self.solver_ = solver

    def _keep_labels(self, xin) -> None:
        from ..io._stack import feature_template

        if xin.kind != "xarray":
            self._templates = (None, None)
            return
        sdim = xin.sample_dim
        samples = xin.template.isel({xin.feature_dim: 0}, drop=True)
        samples = samples.copy(data=np.zeros(samples.sizes[sdim], dtype=np.int8))
        samples.attrs, samples.name = {}, None
        self._templates = (feature_template(xin.template), samples)

    # -- outputs -----------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "components_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this HilbertEOF is not fitted yet; call fit(X) first")

    def _over_features(self, values, name):
        features = self._templates[0]
        if features is None:
            return values
        from ..io._stack import feature_dataarray

        return feature_dataarray(values, features, name=name)

    def _over_samples(self, values, name):
        samples = self._templates[1]
        if samples is None:
            return values
        import xarray as xr

        from ..io._stack import MODE, _unstack, mode_coords

        sdim = samples.dims[0]
        out = xr.DataArray(
            values,
            dims=(sdim, MODE),
            coords={**samples.coords, MODE: mode_coords(values.shape[1])},
            name=name,
        )
        return _unstack(out, sdim).transpose(..., MODE)

    def _prepared(self, X):
        """``X`` as a matrix made as the fitted field's (:mod:`._prep`): raw data
        stacked and weighted by the model, an ``open_matrix`` matrix checked against
        its record."""
        from ..io._stack import check_features

        xin = _prep.field_input(X, "X", getattr(self, "_preprocessing", None))
        check_features(getattr(self, "_templates", (None, None))[0], xin)
        return xin

    def transform(self, X):
        """The complex PCs of the field ``X`` (n' time steps × the fit's grid): the
        analytic signal of each of its series, made with the fit's ``padding`` and
        ``decay_factor`` (the series centred on its own mean, as in the fit), times the
        complex EOFs. Lazy for dask and xarray input (nothing is computed until the
        result is; then one pass over ``X``'s column strips, see the Notes); NumPy input
        is computed here. Returns (n', k) complex in the input's kind ((time, mode) for
        xarray input). On the fitted field it gives ``scores_``.

        ``X`` in the field's own layout and units (a DataArray with the fitted dims, a
        Dataset holding the fitted variable) is stacked and weighted by the model
        itself, as recorded at ``fit`` (also after ``save`` and ``load``; the grid is
        checked); a matrix ``open_matrix`` made is checked against that record and taken
        as it is.

        A NaN in a series the model uses is refused (``ValueError``) by fit's own check:
        the Hilbert transform runs along time, so one gap would move the PCs of every
        time step. NumPy input is refused by this call; lazy input when its PCs are
        computed (the NaN counts ride in the same pass: checking at the call would cost
        one).

        Parameters
        ----------
        X : array-like of shape (n_samples_new, n_features)
            The field on the fit's grid, in its own layout and units or as
            :func:`scalepca.open_matrix` made it.

        Returns
        -------
        scores : array of shape (n_samples_new, n_components), complex
            The complex PCs, of the input's kind.
        """
        self._check_fitted()
        xin = self._prepared(X)
        n, d = xin.data.shape
        if d != self.n_features_in_:
            raise ValueError(
                f"X has {d} features; the model was fitted on {self.n_features_in_}"
            )
        S = _strips(xin.data)
        Z = self._transform_strips(S)
        # an eager result: its one pass counted under the tool's name
        if xin.kind == "numpy":
            with passes.counting(
                "HilbertEOF.transform", planned=1, chunks=S.numblocks[1]
            ):
                (Z,) = passes.compute(Z, name="complex PCs of new data")
            return Z
        return xin.wrap_samples(Z.rechunk({0: xin.data.chunks[0]}))

    def _transform_strips(self, S: da.Array) -> da.Array:
        """The lazy complex PCs (n × k, one chunk) of the prepared matrix regrouped
        to column strips ``S`` (:func:`_strips`; n × the fit's features): each
        strip's analytic signal, padded as in the fit, on its rows of the complex
        EOFs, summed over the strips (:func:`_complex_pcs`)."""
        keep = ~np.isnan(self.mean_)
        comps = np.where(keep[None, :], self.components_, 0.0)
        opts = (_padding_used(self.padding), float(self.decay_factor))
        Z = _complex_pcs(S, comps, self.mean_, opts)
        # fit's check of gaps, on the NaN counts of the strips the PCs read: a gap is
        # found in the same pass and refused when the PCs are computed (no pass of its
        # own; at the call it would cost one)
        nan = S.map_blocks(
            kern.strip_stats, chunks=((2,), S.chunks[1]), dtype=np.float64
        )
        return da.blockwise(
            _whole_series,
            "ik",
            Z,
            "ik",
            nan[1].rechunk(-1),
            "j",
            concatenate=True,
            n=S.shape[0],
            keep=keep,
            dtype=Z.dtype,
            meta=Z._meta,
        )

    def components(self):
        """The complex EOFs: (mode, feature dims) for xarray input, else (k, d)."""
        self._check_fitted()
        return self._over_features(self.components_, "components")

    def _pcs(self, normalized: bool):
        """The fitted complex PCs, divided by the singular values when
        ``normalized``."""
        if normalized:
            return self.scores_ / self.singular_values_
        return self.scores_

    def scores(self, normalized: bool = False):
        """The complex PCs of the fitted data ((time, mode) for xarray input);
        ``normalized``: divided by the singular values (unit norm)."""
        self._check_fitted()
        return self._over_samples(self._pcs(normalized), "scores")

    def components_amplitude(self, normalized: bool = True):
        """``|v_i|`` of each complex EOF (times ``s_i`` unless ``normalized``), over the
        field's feature dims (xarray input)."""
        self._check_fitted()
        amp = np.abs(self.components_)
        if not normalized:
            amp = amp * self.singular_values_[:, None]
        return self._over_features(amp, "components_amplitude")

    def components_phase(self):
        """``arg v_i`` of each complex EOF in radians, (−π, π]."""
        self._check_fitted()
        return self._over_features(np.angle(self.components_), "components_phase")

    def scores_amplitude(self, normalized: bool = True):
        """``|Z v_i|`` of each complex PC (divided by ``s_i`` when ``normalized``)."""
        self._check_fitted()
        return self._over_samples(np.abs(self._pcs(normalized)), "scores_amplitude")

    def scores_phase(self):
        """``arg(Z v_i)`` of each complex PC in radians, (−π, π]."""
        self._check_fitted()
        return self._over_samples(np.angle(self.scores_), "scores_phase")

    def scores_arrays(self, X=None, *, fitted: bool = False) -> tuple[dict, dict]:
        """``(arrays by name, attrs)`` of a scores store (``scalepca run``'s
        ``output.scores``, ``scalepca transform``): the complex PCs as amplitude and
        phase, ``scores_amplitude`` (``|Z v|``, unnormalised) and ``scores_phase``
        (``arg(Z v)`` in radians): the PCs are ``amplitude · exp(i phase)``.
        ``fitted``: ``scores_`` (no pass over ``X``), else those of :meth:`transform`
        of ``X``."""
        if fitted:
            amplitude = self.scores_amplitude(normalized=False)
            phase = self.scores_phase()
        else:
            amplitude, phase = _polar(self.transform(X))
        return (
            {"scores_amplitude": amplitude, "scores_phase": phase},
            {"complex_scores": "scores_amplitude * exp(1j * scores_phase)"},
        )

    def inverse_transform(self, scores=None):
        """The field rebuilt from complex PCs (default: ``scores_``) as the real part
        of ``Z Vᴴ`` plus the mean, over the samples and the field's feature dims
        (xarray input), in the field's own units (the weights the model recorded at
        ``fit`` divided out, NaN where a weight is 0); NaN at features left out.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_components), complex, optional
            Complex PCs; default ``scores_``.

        Returns
        -------
        X : ndarray or DataArray of shape (n_samples, n_features)
            The rebuilt field (a DataArray over the samples and the field's dims for
            xarray input).
        """
        self._check_fitted()
        z = self.scores_ if scores is None else np.asarray(scores)
        if z.ndim != 2 or z.shape[1] != self.components_.shape[0]:
            raise ValueError(
                "scores must be (n_samples, "
                f"{self.components_.shape[0]}); got shape {z.shape}"
            )
        Xhat = np.real(z @ self.components_.conj()) + self.mean_
        prep = getattr(self, "_preprocessing", None)
        if prep is not None:
            Xhat = prep.unweight(Xhat)
        samples, features = self._templates[1], self._templates[0]
        if features is None or scores is not None:
            return Xhat
        from ..io._stack import label_features

        sdim = samples.dims[0]
        return label_features(Xhat, features, sdim, dict(samples.coords))

    # -- persistence (est.save / scalepca.load, as every model) --------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "components_")

    def _state_to_save(self) -> dict:
        """The fitted attributes (the complex ones as real and imaginary parts: a model
        store holds real arrays), the field's preparation and its feature and sample
        coordinates."""
        templates = dict(zip(_TEMPLATES, self._templates, strict=True))
        preps = (getattr(self, "_preprocessing", None),)
        state = super()._state_to_save()
        for name in _COMPLEX:
            z = state.pop(name)
            state[f"_{name}real"], state[f"_{name}imag"] = z.real, z.imag
        return {**state, **_prep.state_of(preps, templates)}

    def _restore_state(self, state: dict) -> None:
        state = dict(state)
        for name in _COMPLEX:
            z = np.empty(np.shape(state[f"_{name}real"]), dtype=np.complex128)
            z.real, z.imag = state.pop(f"_{name}real"), state.pop(f"_{name}imag")
            state[name] = z
        (self._preprocessing,), self._templates = _prep.restored(state, 1, _TEMPLATES)
        super()._restore_state(state)
