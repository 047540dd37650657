"""The figures of the run report: what each method produced, drawn from its fitted
attributes and from a sample of the written scores.

:func:`report_figures` yields a :class:`ReportFigure` per figure (its name, caption, alt
text and a function drawing it); :mod:`scalepca.app.report` draws and embeds them. Per
method:

- the spectrum: a scree plot with North's typical errors ``λ·√(2/n)`` where the fit is an
  eigen decomposition of a sample covariance, the noise level σ² on PPCA's, the bootstrap
  intervals and the separated modes on BootstrapEOF's, the squared covariance on MCA's;
- the patterns: maps for gridded data (each field of a multivariate EOF, each lag of an
  extended EOF, amplitude and phase of a Hilbert EOF, the X and Y patterns of MCA, the
  bootstrap EOFs where their interval excludes zero), and otherwise the largest loadings
  of each component by feature name (:func:`scalepca.analysis.plot.top_loadings`);
- the scores: the first two against each other, coloured by a label of the samples when
  the data carry one (:func:`sample_labels`), and against time when the scores have a time
  coordinate.

Nothing here reads the training data: the fitted attributes, the labels' coordinates and
at most 5,000 rows of the written scores.
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

#: rows of the written scores a figure reads, at most
MAX_ROWS = 5000
#: panels of a figure of maps, at most
MAX_MAPS = 6
#: classes a label may have to colour the scores (one colour each)
MAX_CLASSES = 20
#: obs columns taken first as the label of an AnnData store's cells, in this order
OBS_LABELS = ("cell_type", "celltype", "leiden", "louvain", "cluster", "clusters")


@dataclass(frozen=True)
class ReportFigure:
    """One figure of the report: ``stem`` names it, ``alt`` says what it shows."""

    stem: str
    caption: str
    alt: str
    draw: Callable[[], object]


class Family(enum.Enum):
    """The figures a method's fit is drawn with, where they are not a linear PCA's."""

    LINEAR = enum.auto()
    COUPLED = enum.auto()  # MCA: two fields' coupled modes
    BOOTSTRAP = enum.auto()
    HILBERT = enum.auto()
    MULTIVARIATE = enum.auto()
    EXTENDED = enum.auto()
    PROBABILISTIC = enum.auto()  # PPCA: a noise level, latent scores
    SPARSE = enum.auto()
    ROBUST = enum.auto()  # parts L and S, drawn as blocks
    KERNEL = enum.auto()  # components over landmarks, not the input features


@functools.cache
def _families() -> dict[type, Family]:
    from .. import models
    from ..analysis.bootstrap import BootstrapEOF
    from ..analysis.hilbert_eof import HilbertEOF
    from ..analysis.mca import MCA

    return {
        MCA: Family.COUPLED,
        BootstrapEOF: Family.BOOTSTRAP,
        HilbertEOF: Family.HILBERT,
        models.MultivariateEOF: Family.MULTIVARIATE,
        models.ExtendedEOF: Family.EXTENDED,
        models.PPCA: Family.PROBABILISTIC,
        models.SparsePCA: Family.SPARSE,
        models.RobustPCA: Family.ROBUST,
        models.KernelPCA: Family.KERNEL,
    }


def family(est) -> Family:
    """The :class:`Family` of ``est``'s class, or of the nearest of its bases that
    has one (a subclass is drawn as its method is); :attr:`Family.LINEAR` else."""
    table = _families()
    return next(
        (table[cls] for cls in type(est).__mro__ if cls in table), Family.LINEAR
    )


def _pct(x) -> str:
    return f"{100 * float(x):.1f} %"


def _shares(ratio, k: int) -> str:
    """``55.9 %, 25.6 % and 10.6 %`` of the first ``k`` ratios."""
    parts = [_pct(r) for r in np.ravel(ratio)[:k]]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _ratio(est) -> np.ndarray:
    """The components' shares of the variance; empty for a model (or no model) without
    them, whose figures then give no shares."""
    return np.ravel(
        np.asarray(getattr(est, "explained_variance_ratio_", ()), dtype=float)
    )


def _share(ratio, i: int, of: str = "") -> str:
    """`` (34.2 %{of})``: mode ``i``'s share, or nothing where it is not known."""
    if i >= np.size(ratio):
        return ""
    return f" ({_pct(np.ravel(ratio)[i])}{of})"


def _shares_of(ratio, k: int, of: str) -> str:
    """`` (55.9 %, 25.6 % and 10.6 % of the {of})`` of the first ``k`` modes, or
    nothing where the shares are not known."""
    if not np.size(ratio):
        return ""
    return f" ({_shares(ratio, k)} of the {of})"


def _modes(k: int, noun: str = "EOF") -> str:
    """``EOF 1`` or ``EOFs 1–4``."""
    return f"{noun} 1" if k == 1 else f"{noun}s 1–{k}"


# -- the spectrum ----------------------------------------------------------------------
def _north_errors(est):
    """``(errors as fractions of the total variance, n)`` of North's rule of thumb
    ``λ·√(2/n)`` (:func:`scalepca.analysis.eof.north_test`), or None for a fit whose
    ``explained_variance_`` are no eigenvalues of a sample covariance (its
    ``n_spectrum_samples_`` is None)."""
    from ..analysis.eof import north_test

    n = getattr(est, "n_spectrum_samples_", None)
    if n is None or not _ratio(est).size:
        return None
    return north_test(est, vfscaled=True).errors, int(n)


def _spectrum(est) -> Iterator[ReportFigure]:
    from ..analysis import plot

    kind = family(est)
    if kind is Family.COUPLED:
        frac = np.ravel(est.squared_covariance_fraction_)

        def draw_mca():
            ax = plot.scree(frac)
            ax.set_ylabel("squared covariance (%)")
            ax.set_title("MCA: squared covariance per mode")
            return ax.figure

        yield ReportFigure(
            "scree",
            "Squared covariance of X and Y per coupled mode (bars) and cumulative.",
            f"Scree plot of the coupled modes: mode 1 holds {_pct(frac[0])} of the "
            f"squared covariance, the first {frac.size} together {_pct(frac.sum())}",
            draw_mca,
        )
        return
    ratio = _ratio(est)
    if not ratio.size and not any(
        getattr(est, a, None) is not None
        for a in ("explained_variance_", "eigenvalues_")
    ):
        return
    if kind is Family.BOOTSTRAP:
        yield _bootstrap_scree(est, ratio)
        return
    north = _north_errors(est)
    caption = "Explained variance per component (bars) and cumulative"
    extras = []
    if north is not None:
        caption += (
            f"; error bars: North's typical errors λ·√(2/n), n = {north[1]:,} "
            "(modes whose bars overlap are not separated by the sample)"
        )
        extras.append("with North's error bars")
    noise = _noise_share(est)
    if noise is not None:
        caption += (
            f"; dashed: the noise level σ² = {float(est.noise_variance_):.4g} "
            f"({_pct(noise)} of the variance)"
        )
        extras.append(f"the noise level σ² at {_pct(noise)}")

    def draw():
        ax = plot.scree(est, yerr=None if north is None else north[0])
        if noise is not None:
            ax.axhline(100 * noise, color="C2", ls="--", lw=1, label="noise level σ²")
            ax.legend(loc="center right", frameon=False)
        return ax.figure

    if ratio.size:
        alt = (
            f"Scree plot{' ' + ' and '.join(extras) if extras else ''}: component 1 "
            f"explains {_pct(ratio[0])} of the variance, the first {ratio.size} "
            f"together {_pct(ratio.sum())}"
        )
    else:
        alt = "Scree plot: the eigenvalue of each component"
    yield ReportFigure("scree", caption + ".", alt, draw)


def _noise_share(est):
    """PPCA's σ² as a fraction of the total variance (None for other models)."""
    if family(est) is not Family.PROBABILISTIC:
        return None
    sigma2 = getattr(est, "noise_variance_", None)
    ratio, ev = _ratio(est), getattr(est, "explained_variance_", None)
    if sigma2 is None or not ratio.size or ev is None or not ratio[0] > 0:
        return None
    total = float(np.ravel(ev)[0]) / float(ratio[0])
    return float(sigma2) / total if total > 0 else None


def _bootstrap_scree(est, ratio) -> ReportFigure:
    from ..analysis import plot

    lo, hi = est.explained_variance_ratio_interval_
    n_sig = int(est.n_significant_)
    level = f"{100 * float(est.confidence):g} %"

    def draw():
        # the fit on all samples may lie outside its replicates' interval: no bar
        # below zero length
        below, above = np.clip(ratio - lo, 0, None), np.clip(hi - ratio, 0, None)
        ax = plot.scree(est, yerr=np.stack([below, above]))
        for patch in ax.patches[n_sig:]:
            patch.set_facecolor("0.7")  # not separated from the next mode
        ax.set_title(f"BootstrapEOF: {n_sig} of {ratio.size} modes separated")
        return ax.figure

    return ReportFigure(
        "scree",
        f"Explained variance per component with its {level} bootstrap interval "
        f"({est.n_bootstraps:,} replicates) and cumulative; blue: the {n_sig} leading "
        "modes whose interval lies above the next mode's (n_significant_), grey: "
        "modes not separated.",
        f"Scree plot with {level} bootstrap intervals: EOF 1 explains "
        f"{_pct(ratio[0])} of the variance; {n_sig} of {ratio.size} modes are "
        "separated",
        draw,
    )


# -- the patterns ----------------------------------------------------------------------
def _is_map(field) -> bool:
    """Whether a DataArray of components spans two or more feature dims (a map or an
    image), not one dim of named features."""
    return sum(1 for d in field.dims if d != "mode" and field.sizes[d] > 1) >= 2


def _maps(
    stem, field, *, what, ratio, caption, noun="EOF", suffix="", of="variance", **kw
) -> ReportFigure:
    """Maps of the first modes of ``field`` (a DataArray over ``mode`` and the field's
    dims); the alt text reads "Maps of {what} {noun}s 1–k{suffix} (shares of the
    {of})"."""
    from ..analysis import plot

    k = min(MAX_MAPS, field.sizes["mode"])
    modes = field["mode"].values[:k] if "mode" in field.coords else np.arange(1, k + 1)
    titles = [f"mode {m}{_share(ratio, i)}" for i, m in enumerate(modes)]
    alt = f"Maps of {what}{_modes(k, noun)}{suffix}{_shares_of(ratio, k, of)}"
    return ReportFigure(
        stem,
        caption,
        alt,
        lambda: plot.components(field, n_components=k, ncols=3, titles=titles, **kw),
    )


def _ranked(
    stem, values, names, *, what, ratio, caption, noun="EOF", of="variance"
) -> ReportFigure:
    """The largest loadings of the first components, by feature name."""
    from ..analysis import plot

    k = min(4, np.shape(values)[0])
    by = "name" if names is not None else "index"
    alt = (
        f"Bar charts of the 10 largest {what} of {_modes(k, noun)}, by feature {by}"
        f"{_shares_of(ratio, k, of)}"
    )
    titles = [f"mode {i + 1}{_share(ratio, i)}" for i in range(k)]
    return ReportFigure(
        stem,
        caption,
        alt,
        lambda: plot.top_loadings(values, names=names, n_components=k, titles=titles),
    )


def _patterns(est) -> Iterator[ReportFigure]:
    kind = family(est)
    ratio = _ratio(est)
    names = getattr(est, "feature_names_in_", None)
    if kind in (Family.ROBUST, Family.KERNEL):
        # robust PCA's parts are drawn as blocks; kernel PCA's components live in the
        # kernel feature space (one value per landmark), not over the input features
        return
    if kind is Family.HILBERT:
        yield from _hilbert_patterns(est, ratio, names)
    elif kind is Family.COUPLED:
        yield from _mca_patterns(est)
    elif kind is Family.MULTIVARIATE:
        yield from _multivariate_patterns(est, ratio)
    elif kind is Family.EXTENDED:
        yield from _extended_patterns(est, ratio)
    elif kind is Family.BOOTSTRAP:
        yield from _bootstrap_patterns(est, ratio, names)
    else:
        yield from _linear_patterns(est, ratio, names)


def _linear_patterns(est, ratio, names) -> Iterator[ReportFigure]:
    from ..analysis import plot

    comps = getattr(est, "components_", None)
    if comps is None or np.ndim(comps) != 2:
        return
    if getattr(est, "feature_coords_", None) is not None:
        field = est.components_xr_
        if _is_map(field):
            yield _maps(
                "components",
                field,
                what="",
                noun="component",
                ratio=ratio,
                caption="The first components over the data's own dimensions "
                "(maps for lat/lon grids; grey: features left out, e.g. land).",
            )
            return
        if names is None:  # one feature dim (stations, variables): its labels
            (dim,) = [d for d in field.dims if d != "mode"] or [None]
            if dim is not None and dim in field.coords:
                names = field[dim].values
    sparse = family(est) is Family.SPARSE
    if sparse and comps.shape[1] <= 200:
        k = min(6, comps.shape[0])
        yield ReportFigure(
            "loadings",
            "Sparse loadings; blank cells are exact zeros.",
            f"Heat map of the sparse loadings of components 1–{k} over the "
            f"{comps.shape[1]} features; blank cells are exact zeros",
            lambda: plot.sparse_loadings(est, n_components=k).figure,
        )
        return
    yield _ranked(
        "loadings",
        comps,
        names,
        what="sparse loadings" if sparse else "loadings",
        noun="component",
        ratio=ratio,
        caption="The 10 features with the largest loadings (in absolute value) of "
        "each of the first components, by name; red: positive, blue: negative.",
    )


def _hilbert_patterns(est, ratio, names) -> Iterator[ReportFigure]:
    amp, phase = est.components_amplitude(), est.components_phase()
    if hasattr(amp, "dims") and _is_map(amp):
        top = float(np.nanmax(np.abs(amp.values))) or 1.0
        yield _maps(
            "amplitude",
            amp,
            what="the amplitude of complex ",
            ratio=ratio,
            caption="Amplitude |v| of each complex EOF: where the mode's variance is.",
            cmap="viridis",
            limits=(0.0, top),
            label="amplitude",
        )
        yield _maps(
            "phase",
            phase,
            what="the phase of complex ",
            ratio=ratio,
            caption="Phase arg v of each complex EOF in radians, on a cyclic colour "
            "scale: lines of equal phase are the mode's wave fronts (grey: features "
            "left out).",
            cmap="hsv",  # cyclic and saturated everywhere: grey land stands apart
            limits=(-np.pi, np.pi),
            label="phase (rad)",
        )
        return
    yield _ranked(
        "amplitude",
        np.abs(np.asarray(est.components_)),
        names,
        what="amplitudes",
        ratio=ratio,
        caption="The 10 features with the largest amplitude |v| of each complex EOF.",
    )


def _mca_patterns(est) -> Iterator[ReportFigure]:
    frac = np.ravel(est.squared_covariance_fraction_)
    names = est.variables_
    for which, (attr, side) in enumerate(
        (("components_xr_", "X"), ("components_y_xr_", "Y"))
    ):
        label = side if names[which] is None else names[which]
        try:
            field = getattr(est, attr)
        except AttributeError:  # fitted on arrays
            field = None
        caption = (
            f"The patterns of field {side} ({label}) of the first coupled modes; each "
            "title gives the mode's share of the squared covariance."
        )
        if field is not None and _is_map(field):
            yield _maps(
                f"patterns_{side.lower()}",
                field,
                what=f"the {side} pattern ({label}) of coupled ",
                noun="mode",
                of="squared covariance",
                ratio=frac,
                caption=caption,
            )
        else:
            yield _ranked(
                f"patterns_{side.lower()}",
                est.components_x_ if side == "X" else est.components_y_,
                None,
                what=f"{side} loadings",
                noun="coupled mode",
                of="squared covariance",
                ratio=frac,
                caption=caption,
            )


def _multivariate_patterns(est, ratio) -> Iterator[ReportFigure]:
    # one name per field (MultivariateEOF.variables_)
    for var, field in zip(est.variables_, est.components_xr_, strict=True):
        caption = (
            f"The joint EOFs over field {var}: the pattern of {var} in each mode "
            "(the modes' shares are of the variance of all fields together)."
        )
        if hasattr(field, "dims") and _is_map(field):
            yield _maps(
                f"components_{var}",
                field,
                what=f"the {var} part of ",
                ratio=ratio,
                caption=caption,
            )
        else:
            yield _ranked(
                f"components_{var}",
                np.asarray(field),
                None,
                what=f"loadings of {var}",
                ratio=ratio,
                caption=caption,
            )


def _extended_patterns(est, ratio) -> Iterator[ReportFigure]:
    from ..analysis import plot

    if getattr(est, "feature_coords_", None) is None:
        return
    field = est.components_xr_  # (mode, lag, field dims)
    lags = field["lag"].values
    if lags.size > MAX_MAPS:  # evenly spaced lags, the first and the last among them
        field = field.isel(
            lag=np.unique(np.linspace(0, lags.size - 1, MAX_MAPS)).astype(int)
        )
        lags = field["lag"].values
    for i in range(min(3, field.sizes["mode"])):
        # the panels of one mode are its lags: drawn as plot.components draws modes
        one = field.isel(mode=i, drop=True).rename({"lag": "mode"})
        share = _share(ratio, i, " of the variance")
        titles = [f"lag {int(lag)}" for lag in lags]
        # one colour scale for all lags: the pattern's growth and decay are seen
        top = float(np.nanmax(np.abs(one.values))) or 1.0
        yield ReportFigure(
            f"components_mode{i + 1}",
            f"Extended EOF {i + 1}{share} at each lag (in time steps), on one colour "
            "scale: how the pattern evolves over the embedding window.",
            f"Maps of extended EOF {i + 1}{share} at lags "
            f"{', '.join(str(int(lag)) for lag in lags)}",
            lambda one=one, titles=titles, top=top: plot.components(
                one,
                n_components=len(titles),
                ncols=3,
                titles=titles,
                limits=(-top, top),
            ),
        )


def _bootstrap_patterns(est, ratio, names) -> Iterator[ReportFigure]:
    comps = est.components()
    if not (hasattr(comps, "dims") and _is_map(comps)):
        yield _ranked(
            "components",
            est.components_,
            names,
            what="loadings",
            ratio=ratio,
            caption="The 10 features with the largest loadings of each EOF, by name.",
        )
        return
    yield _maps(
        "components",
        comps,
        what="",
        ratio=ratio,
        caption="The EOFs fitted on all samples (grey: features left out, e.g. land).",
    )
    lo, hi = est.components_interval()
    robust = comps.where((lo > 0) | (hi < 0))
    level = f"{100 * float(est.confidence):g} %"
    fig = _maps(
        "components_interval",
        robust,
        what="",
        suffix=f" where their {level} bootstrap interval excludes zero",
        ratio=ratio,
        caption=f"The EOFs where the {level} bootstrap interval of the loading "
        "excludes zero; grey: the sign is not settled by the sample (or land).",
    )
    yield fig


# -- the scores ------------------------------------------------------------------------
def sample_labels(X, dcfg: dict | None) -> tuple[str, np.ndarray] | None:
    """``(name, one label per sample)`` to colour the scores by, or None.

    A coordinate of the samples held in memory with 2 to 20 distinct values (a PLINK
    ``.fam``'s family ids ``fid``, where simulated populations are written), else a
    categorical ``obs`` column of an AnnData store with 2 to 20 categories (the first
    of :data:`OBS_LABELS` it has, else the first). Only that column is read.
    """
    found = _coordinate_labels(X)
    if found is None and dcfg is not None:
        # the colours are optional: a store without readable labels, or no anndata
        # installed, draws the figure plain (an error of scalepca's own still shows)
        try:
            found = _obs_labels(dcfg, X)
        except (OSError, KeyError, ValueError, TypeError, ModuleNotFoundError) as err:
            logger.debug("report: no obs labels (%s)", err)
    return found


def _coordinate_labels(X):
    if not hasattr(X, "dims") or not hasattr(X, "coords"):
        return None
    sample = X.dims[0]
    for name, coord in X.coords.items():
        # the samples' own names (an index, AnnData's obs_names) are no classes
        if coord.dims != (sample,) or name in (sample, "obs_names"):
            continue
        if coord.dtype.kind not in "OUSb":
            continue
        values = np.asarray(coord.values)  # a .fam column when lazy: one string a row
        if 2 <= np.unique(values).size <= MAX_CLASSES:
            return str(name), values
    return None


def _obs_labels(dcfg: dict, X):
    from .config import data_kind

    path = dcfg.get("path")
    so = dcfg.get("storage_options")
    if not isinstance(path, str) or data_kind(dcfg) != "anndata":
        return None
    import zarr
    from anndata.io import read_elem

    from ..io import open_zarr_node

    obs = open_zarr_node(path, storage_options=so)["obs"]
    columns = [
        c
        for c in obs.attrs.get("column-order", [])
        if isinstance(obs.get(c), zarr.Group)
    ]
    categorical = []
    for c in columns:
        group = obs[c]
        if "categories" in group and 2 <= group["categories"].shape[0] <= MAX_CLASSES:
            categorical.append(c)
    if not categorical:
        return None
    preferred = [c for c in OBS_LABELS if c in categorical]
    name = (preferred or categorical)[0]
    values = np.asarray(read_elem(obs[name]).astype(str))
    n = np.shape(X)[0]
    if values.size != n and hasattr(X, "coords") and "obs_names" in X.coords:
        # the cells a config's steps kept (data.singlecell's mask_obs): by their names
        index = read_elem(obs[obs.attrs.get("_index", "_index")])
        where = {str(c): i for i, c in enumerate(index)}
        kept = X.coords["obs_names"].values
        values = values[[where[str(c)] for c in kept]]
    if values.size != n:  # rows the labels cannot be matched to
        return None
    return f"obs[{name!r}]", values


def _axis_shares(est) -> list[str]:
    """``PC1 (34.2 % of variance)``, ... for the score axes (no share when not
    known)."""
    ratio = _ratio(est)
    return [f"PC{i + 1}{_share(ratio, i, ' of variance')}" for i in range(2)]


def scores_figure(store, storage_options, est=None, labels=None):
    """The first two score columns of a sample of at most 5,000 rows of ``store``,
    coloured by ``labels`` (``(name, one value per row)``); MCA: mode 1 of X against
    mode 1 of Y."""
    import dask.array as da
    import zarr

    from ..analysis import plot
    from ..io import open_zarr_node

    node = open_zarr_node(store, storage_options=storage_options)
    if not isinstance(node, zarr.Array) and "scores" not in node and "scores_x" in node:
        # MCA's expansion coefficients: mode 1 of X against mode 1 of Y, whose
        # covariance the mode maximises
        first = [da.from_zarr(node[name])[:, 0] for name in ("scores_x", "scores_y")]
        Z = da.stack(first, axis=1)
        title = "mode 1: expansion coefficients (sample of rows)"
        x, y = "X, mode 1", "Y, mode 1"
    else:
        arr = node if isinstance(node, zarr.Array) else node["scores"]
        Z = da.from_zarr(arr)
        if Z.ndim != 2 or Z.shape[1] < 2:
            raise ValueError(
                f"the scores have shape {Z.shape}; a scatter needs two columns"
            )
        Z, title = Z[:, :2], "scores (sample of rows)"
        x, y = _axis_shares(est)
    colour = None
    if labels is not None and len(labels[1]) == Z.shape[0]:
        colour = labels[1]
        title = f"{title}, by {labels[0]}"
    ax = plot.scores(Z, colour, max_points=MAX_ROWS, s=4, alpha=0.5, title=title)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    return ax.figure


def _dims_of(arr) -> tuple | None:
    names = getattr(getattr(arr, "metadata", None), "dimension_names", None)
    return (
        tuple(names) if names else tuple(arr.attrs.get("_ARRAY_DIMENSIONS", ())) or None
    )


def _time_rows(node, sample_dim: str, n: int):
    """``(row positions, their times)`` of at most :data:`MAX_ROWS` evenly spaced rows
    when the scores' sample dim is a time coordinate; None otherwise."""
    import xarray as xr
    import zarr

    if sample_dim not in node or not isinstance(node[sample_dim], zarr.Array):
        return None
    coord = node[sample_dim]
    attrs = dict(coord.attrs)
    rows = np.unique(np.linspace(0, n - 1, min(n, MAX_ROWS)).astype(int))
    values = coord.get_orthogonal_selection((rows,))
    decoded = xr.decode_cf(
        xr.Dataset(
            {
                sample_dim: (
                    sample_dim,
                    values,
                    {k: v for k, v in attrs.items() if k in ("units", "calendar")},
                )
            }
        )
    )[sample_dim].values
    if decoded.dtype.kind != "M" and not (
        decoded.dtype == object and decoded.size and hasattr(decoded[0], "year")
    ):
        return None
    return rows, decoded


def _series_spec(node):
    """``(array names, what each is, columns)`` of the series a scores store holds."""
    if "scores_amplitude" in node:
        return [("scores_amplitude", "amplitude |z| of complex PC")], 3
    if "scores_x" in node:
        return [
            ("scores_x", "X expansion coefficient"),
            ("scores_y", "Y expansion coefficient"),
        ], 1
    if "scores" in node:
        return [("scores", "PC")], 3
    return [], 0


def _time_dim(store, storage_options) -> str | None:
    """The name of the scores' sample dim when it is a time coordinate, else None."""
    import zarr

    from ..io import open_zarr_node

    try:
        node = open_zarr_node(store, storage_options=storage_options)
    except Exception:  # the scatter names the problem
        return None
    if isinstance(node, zarr.Array):
        return None
    spec, _ = _series_spec(node)
    if not spec:
        return None
    first = node[spec[0][0]]
    dims = _dims_of(first)
    if not dims or _time_rows(node, dims[0], min(first.shape[0], 2)) is None:
        return None
    return dims[0]


def time_series_figure(store, storage_options, est=None):
    """The first PCs (Hilbert: their amplitude; MCA: mode 1 of X and Y) against the
    time coordinate of the scores, over at most 5,000 evenly spaced rows."""
    from ..analysis import plot
    from ..io import open_zarr_node

    node = open_zarr_node(store, storage_options=storage_options)
    spec, k = _series_spec(node)
    first = node[spec[0][0]]
    n = first.shape[0]
    rows, times = _time_rows(node, _dims_of(first)[0], n)
    k = min(k, first.shape[1])
    ratio = _ratio(est)
    plt = plot._pyplot()
    fig, axes = plt.subplots(
        k * len(spec),
        1,
        sharex=True,
        squeeze=False,
        layout="constrained",
        figsize=(7.5, 0.6 + 1.3 * k * len(spec)),
    )
    panel = 0
    for name, what in spec:
        values = node[name].get_orthogonal_selection((rows, slice(0, k)))
        for j in range(k):
            ax = axes[panel, 0]
            ax.plot(times, values[:, j], lw=0.8, color=f"C{panel}")
            ax.axhline(0, color="0.6", lw=0.5)
            share = _share(ratio, j)
            ax.set_title(f"{what} {j + 1}{share}", fontsize=9, loc="left")
            panel += 1
    if times.dtype.kind == "M":
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator()
        axes[-1, 0].xaxis.set_major_locator(locator)
        axes[-1, 0].xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    axes[-1, 0].set_xlabel(_dims_of(first)[0])
    return fig


def _scores(est, scores_store, storage_options, labels) -> Iterator[ReportFigure]:
    kind = family(est)
    sample = f"a sample of at most {MAX_ROWS:,} rows of the written scores"
    if kind is not Family.HILBERT:
        note = (
            " PPCA's scores are posterior means of unit-variance latent variables, not "
            "projections: their variance is at most 1 on every axis, whatever the "
            "component's variance."
            if kind is Family.PROBABILISTIC
            else ""
        )
        by = "" if labels is None else f", coloured by {labels[0]}"
        if kind is Family.COUPLED:
            caption = (
                "The first mode's expansion coefficients of X against those of Y "
                f"({sample})."
            )
            alt = "Scatter of mode 1's expansion coefficients, X against Y" + by
        else:
            caption = (
                f"Scores of the first two components ({sample}){by}; each axis gives "
                "its component's share of the variance." + note
            )
            ax_x, ax_y = _axis_shares(est)
            alt = f"Scatter of the scores, {ax_x} against {ax_y}{by}"
        yield ReportFigure(
            "scores",
            caption,
            alt,
            lambda: scores_figure(scores_store, storage_options, est, labels),
        )
    dim = _time_dim(scores_store, storage_options)
    if dim is not None:
        ratio = _ratio(est)
        k = min(3, ratio.size or 3)
        shares = _shares_of(ratio, k, "variance")
        what = {
            Family.HILBERT: f"the amplitude of complex PCs 1–{k}{shares}",
            Family.COUPLED: "mode 1's expansion coefficients of X and Y",
        }.get(kind, f"PCs 1–{k}{shares}")
        yield ReportFigure(
            "pc_series",
            f"Time series of {what} against the data's time coordinate (at most "
            f"{MAX_ROWS:,} evenly spaced rows of the written scores).",
            f"Time series of {what} against {dim}",
            lambda: time_series_figure(scores_store, storage_options, est),
        )


# -- all of them -----------------------------------------------------------------------
def report_figures(
    est, *, X=None, scores_store=None, storage_options=None, labels=None
) -> Iterator[ReportFigure]:
    """The report's figures for the fitted ``est``, in the order shown.

    ``X``: the fitted matrix (robust PCA's block view of M, L and S reads a 200 × 200
    block of it); ``scores_store``: the written scores (a sample of their rows is read);
    ``labels``: ``(name, one value per sample)`` colouring the scores
    (:func:`sample_labels`).
    """
    from ..analysis import plot

    yield from _spectrum(est)
    yield from _patterns(est)
    for attr in ("history_", "cost_history_", "loglike_"):
        value = getattr(est, attr, None)
        if value is not None and (isinstance(value, dict) or len(value)):
            yield ReportFigure(
                "convergence",
                "Convergence per iteration.",
                f"Line plot of the fit's convergence over its "
                f"{getattr(est, 'n_iter_', '?')} iterations",
                lambda: plot.convergence(est).figure,
            )
            break
    if scores_store is not None:
        yield from _scores(est, scores_store, storage_options, labels)
    if (
        family(est) is Family.ROBUST
        and X is not None
        and getattr(est, "low_rank_", None) is not None
    ):
        n1, n2 = est.low_rank_.shape
        r, c = min(n1, 200), min(n2, 200)
        yield ReportFigure(
            "rpca_parts",
            f"Robust PCA: the top-left {r} × {c} block of M, of the low-rank "
            "part L and of the sparse part S.",
            f"Images of the top-left {r} × {c} block of the data M, its low-rank part "
            f"L (rank {getattr(est, 'rank_', '?')}) and its sparse part S",
            lambda: plot.rpca_blocks(X, est, rows=slice(0, r), cols=slice(0, c)),
        )
