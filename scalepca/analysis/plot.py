"""Figures of fitted decompositions (needs matplotlib:
``pip install 'scalepca[plot]'``).

Every function takes a fitted estimator or the arrays it produced and returns the matplotlib
object it drew on: functions that draw one panel take an optional ``ax`` and return the
``Axes``; those that draw a grid of panels return the ``Figure``. Nothing here reads the
training data: the inputs are the small fitted attributes (components, spectra,
histories) or a few rows of scores/frames, selected before they are computed.

=======================  =========================================================================
function                 what it shows
=======================  =========================================================================
:func:`scree`            explained variance per component (bars) and cumulative (line), in %
:func:`components`       components as images (``image_shape``), as maps (xarray components with
                         lat/lon), or as loading profiles
:func:`scores`           2-D scatter of two score columns, coloured by a label
:func:`top_loadings`     the features with the largest loadings of each component, by name
:func:`sparse_loadings`  heat map of (sparse) loadings with exact zeros left blank
:func:`rpca_frames`      robust PCA: observed frame | low-rank part | sparse part, frame by frame
:func:`rpca_blocks`      robust PCA of a plain matrix: a block of M, L and S side by side
:func:`convergence`      cost / residual / log-likelihood per iteration
=======================  =========================================================================
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "components",
    "convergence",
    "rpca_blocks",
    "rpca_frames",
    "scores",
    "scree",
    "sparse_loadings",
    "top_loadings",
]

_EXTRA_MSG = (
    "scalepca.analysis.plot needs matplotlib, which is not installed; install the "
    "plot extra: pip install 'scalepca[plot]'"
)


def _pyplot():
    """``matplotlib.pyplot``, imported on first use (an optional dependency)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(_EXTRA_MSG) from err
    return plt


def _matplotlib():
    try:
        import matplotlib
    except ImportError as err:
        raise ImportError(_EXTRA_MSG) from err
    return matplotlib


def _new_axes(ax, figsize):
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _grid(n_panels: int, ncols: int, panel_size=(2.6, 2.4)):
    plt = _pyplot()
    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        squeeze=False,
        layout="constrained",
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
    )
    for ax in axes.ravel()[n_panels:]:
        ax.set_visible(False)
    return fig, axes.ravel()[:n_panels]


def _small(x, what: str) -> np.ndarray:
    """A small array (fitted attribute, a few rows) as NumPy; computes dask/xarray if
    needed."""
    if hasattr(x, "dims") and hasattr(x, "values"):  # xarray
        x = x.data
    if hasattr(x, "compute") and not isinstance(x, np.ndarray):
        x = x.compute()
    x = np.asarray(x)
    if x.dtype == object:
        raise TypeError(f"{what} must be numeric; got an object array")
    return x


def _fitted(est, attr: str):
    value = getattr(est, attr, None)
    if value is None:
        raise ValueError(
            f"{type(est).__name__} has no {attr}; is it "
            "fitted (and does this method have it)?"
        )
    return value


def _is_estimator(obj) -> bool:
    return hasattr(obj, "get_params") and hasattr(obj, "fit")


# -- spectrum --------------------------------------------------------------------------
def scree(
    source,
    *,
    ax=None,
    n_components: int | None = None,
    cumulative: bool = True,
    log: bool = False,
    label: str | None = None,
    yerr=None,
):
    """Explained variance per component (bars) and its cumulative sum (line), in
    percent.

    Parameters
    ----------
    source : fitted estimator or array-like of shape (n_components,)
        An estimator with ``explained_variance_ratio_`` (fractions of the total
        variance), or the fractions themselves. An estimator without ratios but with
        ``explained_variance_`` (or kernel ``eigenvalues_``) is drawn in its own units,
        without the cumulative line.
    ax : matplotlib Axes, optional
    n_components : int, optional
        Draw only the first ``n_components``.
    cumulative : bool, default=True
        Also draw the cumulative percentage (a line with markers).
    log : bool, default=False
        Logarithmic y axis (for long spectra).
    label : str, optional
        Legend label of the bars (to compare models on one axes, draw twice).
    yerr : array-like of shape (n_components,) or (2, n_components), optional
        Error bars on the bars, in the units of ``source`` (fractions of the total
        variance for ratios): one half-width per component, or the distances below and
        above each bar. North's rule of thumb, for instance, is
        :func:`scalepca.analysis.eof.north_test` with ``vfscaled=True``.

    Returns
    -------
    matplotlib.axes.Axes
    """
    percent = True  # ratios, drawn in per cent
    if _is_estimator(source):
        values = getattr(source, "explained_variance_ratio_", None)
        if values is None:
            percent = False
            values = getattr(source, "explained_variance_", None)
            if values is None:
                values = _fitted(source, "eigenvalues_")
        name = type(source).__name__
    else:
        values, name = source, None
    values = np.ravel(_small(values, "explained variance")).astype(float)
    if n_components is not None:
        values = values[:n_components]
    if values.size == 0:
        raise ValueError("nothing to draw: the spectrum is empty")
    ax = _new_axes(ax, (5.0, 3.4))
    scale, ylabel = 1.0, "explained variance"
    if percent:
        scale, ylabel = 100.0, "explained variance (%)"
    x = np.arange(1, values.size + 1)
    y = scale * values
    err = None
    if yerr is not None:
        err = scale * np.asarray(_small(yerr, "yerr"), dtype=float)[..., : values.size]
    ax.bar(
        x,
        y,
        yerr=err,
        color="C0",
        alpha=0.8,
        label=label or "per component",
        error_kw={"ecolor": "0.2", "capsize": 3, "lw": 1},
    )
    if cumulative and percent:
        ax.plot(x, np.cumsum(y), "o-", color="C1", ms=4, label="cumulative")
        ax.legend(loc="center right", frameon=False)
    ax.set_xlabel("component")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ticks = x
    if x.size > 20:  # about ten of them
        ticks = np.unique(np.linspace(1, x.size, 10).astype(int))
    ax.set_xticks(ticks)
    if name:
        ax.set_title(f"{name}: scree plot")
    return ax


# -- components ------------------------------------------------------------------------
def _symmetric_limit(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def _mode_labels(k: int) -> np.ndarray:
    from ..io._stack import mode_coords

    return mode_coords(k)


def _component_titles(k: int, ratio, titles, modes=None):
    if titles is not None:
        titles = list(titles)
        if len(titles) < k:
            raise ValueError(f"titles has {len(titles)} entries for {k} components")
        return titles
    if modes is None:
        modes = _mode_labels(k)
    out = []
    for i in range(k):
        t = f"mode {modes[i]}"
        if ratio is not None and i < len(ratio):
            t += f" ({100 * float(ratio[i]):.1f} %)"
        out.append(t)
    return out


def _map_coords(field, lat: str | None, lon: str | None):
    """The (lat, lon) coordinates over which ``field`` (a per-mode field) is a map, or
    None.

    Given names are used as they are; otherwise latitude and longitude are found by
    meaning (:func:`scalepca.analysis.eof.find_lat_lon`: CF attributes, then names
    such as ``latitude`` or ``nav_lat``). It is a map when they span exactly the
    field's dims: 1-D coordinates over one dim each, or 2-D coordinates of a
    curvilinear grid over both.
    """
    field_dims = {d for d in field.dims if d != "mode"}
    if lat is not None and lon is not None:
        if lat not in field.coords or lon not in field.coords:
            return None
        la, lo = field[lat], field[lon]
    else:
        from .eof import find_lat_lon

        try:
            la, lo = find_lat_lon(field)
        except (KeyError, ImportError):
            return None
        if lo is None or la.name not in field.coords or lo.name not in field.coords:
            return None
        la, lo = field[la.name], field[lo.name]
    if (
        la.ndim == lo.ndim == 1
        and {la.dims[0], lo.dims[0]} == field_dims
        and len(field_dims) == 2
    ):
        return la, lo
    if la.ndim == lo.ndim == 2 and set(la.dims) == set(lo.dims) == field_dims:
        return la, lo
    return None


def components(
    source,
    *,
    image_shape=None,
    n_components: int | None = None,
    ncols: int = 4,
    cmap: str = "RdBu_r",
    titles=None,
    lat: str | None = None,
    lon: str | None = None,
    colorbar: bool = True,
    limits=None,
    label: str = "loading",
):
    """Draw components as images, as maps, or as loading profiles; returns the Figure.

    Parameters
    ----------
    source : fitted estimator, ndarray of shape (n_components, n_features), or DataArray
        An estimator fitted on N-D xarray input uses its ``components_xr_`` (maps);
        otherwise its ``components_``. A DataArray must have a ``mode`` dimension.
    image_shape : tuple of int, optional
        Reshape every component (``n_features`` values) to this shape and draw it as an
        image (e.g. ``(8, 8)`` for the digits, ``(height, width)`` for video frames).
    n_components : int, optional
        Draw only the first components.
    ncols : int, default=4
        Panels per row.
    cmap : str, default="RdBu_r"
        A diverging colormap; every panel's colour range is symmetric about zero. NaN
        (land, features left out of the fit) is drawn grey.
    titles : sequence of str, optional
        Panel titles; by default "mode m (explained %)", m the ``mode`` label (1, 2,
        ...).
    lat, lon : str, optional
        Names of the coordinates drawn on the axes of maps; by default found by meaning
        (CF attributes, or names such as ``lat``/``latitude``/``nav_lat``) with
        :func:`scalepca.analysis.eof.find_lat_lon`.
    colorbar : bool, default=True
    limits : pair of float, optional
        The colour range ``(vmin, vmax)`` of every panel (e.g. ``(0, a)`` for
        amplitudes, ``(-np.pi, np.pi)`` for phases with ``cmap="twilight"``); by default
        each panel's range is symmetric about zero.
    label : str, default="loading"
        The colour bar's label.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Size-1 dimensions (a single pressure level) are dropped first. A DataArray whose
    other dimensions are spanned by its latitude and longitude coordinates (1-D, or
    2-D on a curvilinear grid) is drawn as maps with ``pcolormesh`` over them, north
    up and east right whatever order the coordinates are stored in; any other 2-D
    field as an image; a 1-D field (no ``image_shape``) as a profile of loadings
    against the feature index.
    """
    mpl = _matplotlib()
    ratio = None
    if _is_estimator(source):
        ratio = getattr(source, "explained_variance_ratio_", None)
        arr = None
        if getattr(source, "feature_coords_", None) is not None and image_shape is None:
            arr = source.components_xr_
        source = arr if arr is not None else _fitted(source, "components_")
    if hasattr(source, "dims"):
        values, modes, coords = _component_fields(source, lat, lon)
    else:
        values, modes, coords = _component_rows(source), None, None
    k = values.shape[0] if n_components is None else min(n_components, values.shape[0])
    values = _as_images(values[:k], image_shape)
    names = _component_titles(k, ratio, titles, modes)
    cm = mpl.colormaps[cmap].with_extremes(bad="0.75")
    size = (2.6, 2.4)  # a panel's inches: a profile or an image
    if coords is not None:  # a map: wider
        size = (3.2, 2.0)
    fig, axes = _grid(k, ncols, size)
    for i, ax in enumerate(axes):
        im = _draw_component(ax, values[i], coords, cm, limits)
        ax.set_title(names[i], fontsize=9)
        if im is not None and colorbar:
            fig.colorbar(im, ax=ax, shrink=0.8).set_label(label, fontsize=8)
    return fig


def _component_fields(source, lat, lon):
    """``(values, mode labels, (lat, lon) or None)`` of a DataArray of components:
    size-1 dims dropped, the field dims last (in the order of the map's coordinates
    for a map)."""
    if "mode" not in source.dims:
        raise ValueError(
            f"a DataArray of components needs a 'mode' dimension; has {source.dims}"
        )
    single = [d for d in source.dims if d != "mode" and source.sizes[d] == 1]
    source = source.squeeze(single)  # a single level: its coordinate stays, as a scalar
    modes = source["mode"].values if "mode" in source.coords else None
    field_dims = [d for d in source.dims if d != "mode"]
    coords = _map_coords(source, lat, lon)
    if coords is not None and coords[0].ndim == 1:
        field_dims = [coords[0].dims[0], coords[1].dims[0]]
    values = _small(source.transpose("mode", *field_dims), "components")
    if coords is None and values.ndim > 3:
        raise ValueError(
            f"cannot draw components over {len(field_dims)} feature dims "
            f"{field_dims}; select down to two (e.g. lat, lon)"
        )
    return values, modes, coords


def _component_rows(source) -> np.ndarray:
    """An array of components as (n_components, n_features) values."""
    values = _small(source, "components")
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2:
        raise ValueError(
            f"components must be (n_components, n_features); got shape {values.shape}"
        )
    return values


def _as_images(values: np.ndarray, image_shape) -> np.ndarray:
    """``values`` (k components) reshaped to ``image_shape`` each, when it is given."""
    if image_shape is None:
        return values
    image_shape = tuple(int(s) for s in image_shape)
    if int(np.prod(image_shape)) != int(np.prod(values.shape[1:])):
        raise ValueError(
            f"image_shape {image_shape} holds {int(np.prod(image_shape))} "
            f"values; the components have {int(np.prod(values.shape[1:]))}"
        )
    return values.reshape(values.shape[0], *image_shape)


def _draw_component(ax, v: np.ndarray, coords, cm, limits=None):
    """One panel: a map over ``coords`` (lat, lon), an image (2-D ``v``) or a loading
    profile; returns the mappable for a colour bar (None for a profile)."""
    if limits is None:
        lim = _symmetric_limit(v)
        vmin, vmax = -lim, lim
    else:
        vmin, vmax = (float(a) for a in limits)
    if coords is not None:
        la, lo = coords
        # pcolormesh places cells at their coordinates: descending latitudes are drawn
        # north up all the same (the y axis increases upwards)
        im = ax.pcolormesh(
            _small(lo, str(lo.name)),
            _small(la, str(la.name)),
            np.ma.masked_invalid(v),
            cmap=cm,
            vmin=vmin,
            vmax=vmax,
            shading="auto",
        )
        ax.set_xlabel(str(lo.name))
        ax.set_ylabel(str(la.name))
        return im
    if v.ndim == 2:
        im = ax.imshow(
            np.ma.masked_invalid(v),
            cmap=cm,
            vmin=vmin,
            vmax=vmax,
            interpolation="nearest",
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return im
    ax.plot(np.arange(v.size), v, lw=1)
    ax.axhline(0, color="0.5", lw=0.5)
    ax.set_xlabel("feature")
    ax.set_ylabel("loading")
    return None


# -- scores ----------------------------------------------------------------------------
def _subsample_rows(n: int, max_points: int | None, random_state) -> np.ndarray | slice:
    """The rows drawn: at most ``max_points`` of ``n``, sorted."""
    if max_points is None or n <= max_points:
        return slice(None)
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(n, size=max_points, replace=False))


def scores(
    Z,
    labels=None,
    *,
    components=(0, 1),
    ax=None,
    max_points: int | None = 20_000,
    random_state=0,
    cmap: str | None = None,
    s: float = 6.0,
    alpha: float = 0.7,
    label_names=None,
    title: str | None = None,
):
    """Scatter of two score columns, coloured by ``labels``; returns the Axes.

    Parameters
    ----------
    Z : array-like of shape (n_samples, n_components)
        Scores (NumPy, dask or an xarray DataArray with a ``mode`` dimension). Only the
        sampled rows of the two chosen columns are computed.
    labels : array-like of shape (n_samples,), optional
        Class of every row (at most 20 distinct values: one colour and legend entry
        each) or a continuous value (a colour bar).
    components : pair of int, default=(0, 1)
        The score columns on the x and y axes (0-based).
    max_points : int or None, default=20000
        Draw at most this many rows, chosen uniformly at random by ``random_state``
        (``None``: all rows).
    label_names : mapping or sequence, optional
        Legend names of the classes.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if hasattr(Z, "dims"):
        mode = "mode" if "mode" in Z.dims else Z.dims[-1]
        sample = [d for d in Z.dims if d != mode]
        if len(sample) != 1:
            Z = Z.stack(_sample=sample)
            sample = ["_sample"]
        Z = Z.transpose(sample[0], mode).data
    if getattr(Z, "ndim", None) != 2:
        Z = np.asarray(Z)
        if Z.ndim != 2:
            raise ValueError(
                f"scores must be 2-D (n_samples, n_components); got {Z.shape}"
            )
    i, j = (int(c) for c in components)
    if not (0 <= i < Z.shape[1] and 0 <= j < Z.shape[1]):
        raise ValueError(
            f"components {components} out of range for {Z.shape[1]} score columns"
        )
    n = Z.shape[0]
    rows = _subsample_rows(n, max_points, random_state)
    pts = Z[rows][:, [i, j]]
    pts = _small(pts, "scores")
    lab = None
    if labels is not None:
        if hasattr(labels, "dims"):
            labels = labels.data
        if len(labels) != n:
            raise ValueError(
                f"labels has {len(labels)} entries; the scores have {n} rows"
            )
        lab = labels[rows]
        if isinstance(lab, (list, tuple)):
            lab = np.asarray(lab)
        else:
            lab = _small(lab, "labels")
    ax = _new_axes(ax, (4.6, 4.0))
    if lab is None:
        ax.scatter(pts[:, 0], pts[:, 1], s=s, alpha=alpha, color="C0", linewidths=0)
    else:
        classes = np.unique(lab)
        categorical = classes.size <= 20 and (
            lab.dtype.kind in "biuUSOb" or np.all(np.equal(np.mod(classes, 1), 0))
        )
        if categorical:
            cmap_obj = _pyplot().get_cmap(cmap or "tab10")
            for c_i, c in enumerate(classes):
                sel = lab == c
                name = c
                if isinstance(label_names, (list, tuple)):
                    name = label_names[int(c)]
                elif label_names is not None:
                    name = label_names[c]
                ax.scatter(
                    pts[sel, 0],
                    pts[sel, 1],
                    s=s,
                    alpha=alpha,
                    linewidths=0,
                    color=cmap_obj(c_i % cmap_obj.N),
                    label=str(name),
                )
            ax.legend(markerscale=2, frameon=False, fontsize=8)
        else:
            sc = ax.scatter(
                pts[:, 0],
                pts[:, 1],
                c=lab.astype(float),
                s=s,
                alpha=alpha,
                cmap=cmap or "viridis",
                linewidths=0,
            )
            ax.figure.colorbar(sc, ax=ax)
    labels = _mode_labels(max(i, j) + 1)
    ax.set_xlabel(f"score {labels[i]}")
    ax.set_ylabel(f"score {labels[j]}")
    if title:
        ax.set_title(title)
    return ax


# -- loadings by name ------------------------------------------------------------------
def top_loadings(
    source,
    *,
    names=None,
    n_components: int = 4,
    n_features: int = 10,
    ncols: int = 2,
    titles=None,
):
    """The features with the largest loadings of each component, ranked, by name;
    returns the Figure.

    One panel per component: a horizontal bar for each of its ``n_features`` largest
    loadings in absolute value, the largest on top, labelled with the feature's name
    (a gene, a SNP id, a variable) and coloured by its sign. The way to read loadings
    over features that have no order (genes, SNPs), where a line over the feature
    index would join unrelated neighbours.

    Parameters
    ----------
    source : fitted estimator or array-like of shape (n_components, n_features)
        An estimator's ``components_`` (its ``feature_names_in_`` name the features
        when ``names`` is not given), or the loadings themselves.
    names : sequence of str, optional
        One name per feature; default the estimator's ``feature_names_in_``, else
        ``feature 0``, ``feature 1``, ...
    n_components : int, default=4
        Draw the first ``n_components`` components.
    n_features : int, default=10
        Features per component.
    ncols : int, default=2
        Panels per row.
    titles : sequence of str, optional
        Panel titles; by default "mode m (explained %)".

    Returns
    -------
    matplotlib.figure.Figure
    """
    ratio = None
    if _is_estimator(source):
        ratio = getattr(source, "explained_variance_ratio_", None)
        if names is None:
            names = getattr(source, "feature_names_in_", None)
        source = _fitted(source, "components_")
    values = _component_rows(source)
    if np.iscomplexobj(values):
        raise TypeError("complex loadings: draw their amplitude (np.abs) instead")
    values = values.astype(float)
    d = values.shape[1]
    if names is None:
        names = [f"feature {j}" for j in range(d)]
    names = [str(n) for n in np.asarray(names, dtype=object).tolist()]
    if len(names) != d:
        raise ValueError(f"names has {len(names)} entries; the loadings have {d}")
    k = min(int(n_components), values.shape[0])
    m = min(int(n_features), d)
    heads = _component_titles(k, ratio, titles)
    fig, axes = _grid(k, ncols, (3.6, 0.5 + 0.22 * m))
    for i, ax in enumerate(axes):
        v = values[i]
        order = np.argsort(-np.nan_to_num(np.abs(v), nan=-1.0), kind="stable")[:m]
        y = np.arange(m)[::-1]
        ax.barh(y, v[order], color=np.where(v[order] >= 0, "C3", "C0"), height=0.7)
        ax.set_yticks(y, [names[j] for j in order], fontsize=7)
        ax.axvline(0, color="0.5", lw=0.5)
        ax.set_xlabel("loading", fontsize=8)
        ax.set_title(heads[i], fontsize=9)
    return fig


# -- sparse loadings -------------------------------------------------------------------
def sparse_loadings(
    source,
    *,
    feature_names=None,
    ax=None,
    cmap: str = "RdBu_r",
    annotate: bool | None = None,
    n_components: int | None = None,
):
    """Heat map of loadings (components × features); exact zeros are left blank (white).

    Parameters
    ----------
    source : fitted estimator or ndarray of shape (n_components, n_features)
    feature_names : sequence of str, optional
        x tick labels (drawn when there are at most 40 features).
    annotate : bool, optional
        Write every non-zero value in its cell; default when the matrix has ≤ 200 cells.
    n_components : int, optional

    Returns
    -------
    matplotlib.axes.Axes
        Its title gives the share of exact zeros.
    """
    mpl = _matplotlib()

    C = _fitted(source, "components_") if _is_estimator(source) else source
    C = np.atleast_2d(_small(C, "loadings")).astype(float)
    if n_components is not None:
        C = C[:n_components]
    k, d = C.shape
    if feature_names is None:
        feature_names = [str(j) for j in range(d)]
    elif len(feature_names) != d:
        raise ValueError(
            f"feature_names has {len(feature_names)} names for {d} features"
        )
    zero = C == 0
    lim = _symmetric_limit(C)
    cm = mpl.colormaps[cmap].with_extremes(bad="white")
    ax = _new_axes(ax, (min(0.35 * d + 2.0, 12.0), 0.45 * k + 1.6))
    im = ax.imshow(
        np.ma.masked_where(zero, C),
        cmap=cm,
        vmin=-lim,
        vmax=lim,
        aspect="auto",
        interpolation="nearest",
    )
    ax.figure.colorbar(im, ax=ax, shrink=0.9)
    ax.set_yticks(np.arange(k), [f"mode {m}" for m in _mode_labels(k)])
    if d <= 40:
        ax.set_xticks(
            np.arange(d),
            feature_names,
            rotation=90 if d > 12 else 0,
        )
    ax.set_xlabel("feature")
    if annotate is None:
        annotate = k * d <= 200
    if annotate:
        for (r, c), v in np.ndenumerate(C):
            if v != 0:
                ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7)
    ax.set_title(f"loadings: {100 * zero.mean():.0f} % exactly zero")
    return ax


# -- robust PCA ------------------------------------------------------------------------
def _rpca_parts(model, low_rank, sparse):
    if model is not None:
        if low_rank is None:
            low_rank = _fitted(model, "low_rank_")
        if sparse is None:
            sparse = _fitted(model, "sparse_")
    if low_rank is None or sparse is None:
        raise ValueError("give a fitted RobustPCA (model) or both low_rank and sparse")
    return low_rank, sparse


def rpca_frames(
    M,
    model=None,
    *,
    frames=(0,),
    image_shape,
    low_rank=None,
    sparse=None,
    axis: int = 0,
    cmap: str = "gray",
    titles=("observed", "low rank (background)", "sparse (foreground)"),
    abs_sparse: bool = True,
):
    """Robust PCA of a video: one row per frame — observed | low-rank part | sparse
    part.

    Parameters
    ----------
    M : array-like of shape (n1, n2)
        The decomposed matrix (NumPy or dask); every row (``axis=0``) or column
        (``axis=1``) is one frame flattened to ``prod(image_shape)`` pixels.
    model : fitted RobustPCA, optional
        Its ``low_rank_`` and ``sparse_`` are used (only the chosen frames are
        computed).
    frames : sequence of int, default=(0,)
        Frame indices to draw, one figure row each.
    image_shape : tuple of int
        (height, width) of a frame.
    low_rank, sparse : array-like of shape (n1, n2), optional
        The parts, instead of ``model``.
    axis : {0, 1}
        Whether frames are rows or columns of ``M``.
    abs_sparse : bool, default=True
        Draw ``|S|`` (foreground magnitude) rather than signed ``S``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    low_rank, sparse = _rpca_parts(model, low_rank, sparse)
    frames = [int(f) for f in np.atleast_1d(frames)]
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 (frames are rows) or 1 (columns); got {axis}")
    shape = tuple(int(s) for s in image_shape)
    n_frames, n_pixels = M.shape[0], M.shape[1]
    if axis == 1:  # frames are columns
        n_frames, n_pixels = n_pixels, n_frames
    if int(np.prod(shape)) != n_pixels:
        raise ValueError(
            f"image_shape {shape} holds {int(np.prod(shape))} "
            f"pixels; a frame has {n_pixels}"
        )
    bad = [f for f in frames if not -n_frames <= f < n_frames]
    if bad:
        raise ValueError(f"frames {bad} out of range for {n_frames} frames")

    def pick(A):
        A = A[frames] if axis == 0 else A[:, frames].T
        return _small(A, "frames").reshape(len(frames), *shape)

    parts = [pick(M), pick(low_rank), pick(sparse)]
    if abs_sparse:
        parts[2] = np.abs(parts[2])
    plt = _pyplot()
    h, w = shape
    scale = 2.4 / max(h, w)
    fig, axes = plt.subplots(
        len(frames),
        3,
        squeeze=False,
        layout="constrained",
        figsize=(3 * (w * scale + 0.2) + 0.4, len(frames) * h * scale + 0.6),
    )
    vmin = min(float(np.nanmin(parts[0])), float(np.nanmin(parts[1])))
    vmax = max(float(np.nanmax(parts[0])), float(np.nanmax(parts[1])))
    smax = _symmetric_limit(parts[2])
    for r, f in enumerate(frames):
        for c in range(3):
            ax = axes[r, c]
            if c < 2:
                ax.imshow(
                    parts[c][r],
                    cmap=cmap,
                    vmin=vmin,
                    vmax=vmax,
                    interpolation="nearest",
                )
            elif abs_sparse:
                ax.imshow(
                    parts[2][r], cmap=cmap, vmin=0, vmax=smax, interpolation="nearest"
                )
            else:
                ax.imshow(
                    parts[2][r],
                    cmap="RdBu_r",
                    vmin=-smax,
                    vmax=smax,
                    interpolation="nearest",
                )
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(titles[c], fontsize=9)
            if c == 0:
                ax.set_ylabel(f"frame {f}", fontsize=9)
    return fig


def rpca_blocks(
    M,
    model=None,
    *,
    rows=slice(0, 200),
    cols=slice(0, 200),
    low_rank=None,
    sparse=None,
    cmap: str = "RdBu_r",
    scale: str = "each",
):
    """Robust PCA of a matrix: the block ``[rows, cols]`` of M, L and S side by side.

    Only that block of each array is computed. Returns the Figure (three image
    panels; the titles give the share of non-zero entries of S in the block and the
    rank of the model if known).

    ``scale`` sets the colour scales, symmetric about zero: ``"each"`` gives every
    panel its own (L readable in its panel, but where the outliers of S are far
    larger, as in the problems of Candès et al., M's scale hides L and M looks like
    S); ``"low_rank"`` gives the three panels one scale, set by the block of L, with
    one colour bar: L shows in M as it does on its own, and the entries of S beyond
    L's range saturate (the ends of the colour bar).
    """
    if scale not in ("each", "low_rank"):
        raise ValueError(f"scale must be 'each' or 'low_rank'; got {scale!r}")
    low_rank, sparse = _rpca_parts(model, low_rank, sparse)
    parts = [_small(A[rows, cols], "block") for A in (M, low_rank, sparse)]
    if parts[0].ndim != 2 or parts[0].size == 0:
        raise ValueError(f"rows={rows}, cols={cols} select no 2-D block of M {M.shape}")
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.4), layout="constrained")
    rank = getattr(model, "rank_", None)
    low = "L (low rank)"
    if rank is not None:
        low = f"L (low rank, rank {rank})"
    nz = 100 * float(np.mean(parts[2] != 0))
    names = ["M (observed)", low, f"S (sparse, {nz:.1f} % non-zero)"]
    shared = _symmetric_limit(parts[1])
    for ax, A, name in zip(axes, parts, names, strict=True):
        lim = shared if scale == "low_rank" else _symmetric_limit(A)
        im = ax.imshow(
            A, cmap=cmap, vmin=-lim, vmax=lim, interpolation="nearest", aspect="auto"
        )
        ax.set_title(name, fontsize=9)
        if scale == "each":
            fig.colorbar(im, ax=ax, shrink=0.8)
    if scale == "low_rank":
        fig.colorbar(
            im, ax=axes, shrink=0.8, extend="both", label="value (the scale of L)"
        )
    return fig


# -- convergence -----------------------------------------------------------------------
def _history_of(source, key):
    """(values, y label, log scale?, extra series for a twin axis or None,
    tolerance)."""
    if isinstance(source, dict) or _is_estimator(source):
        hist = source
        if _is_estimator(source):
            if getattr(source, "history_", None) is not None:
                hist = source.history_
            elif getattr(source, "cost_history_", None) is not None:
                return (
                    np.asarray(source.cost_history_, float),
                    "objective",
                    False,
                    None,
                    None,
                )
            elif getattr(source, "loglike_", None) is not None:
                ll = np.asarray(source.loglike_, float)
                if ll.size == 0:
                    raise ValueError(
                        f"{type(source).__name__} has no iteration history "
                        "(fitted in closed form, no iterations)"
                    )
                return ll, "log-likelihood per sample", False, None, None
            else:
                raise ValueError(
                    f"{type(source).__name__} records no iteration history "
                    "(history_, cost_history_ or loglike_)"
                )
        if key is None:
            key = next(
                (k for k in ("residual", "cost", "objective", "loglike") if k in hist),
                None,
            )
            if key is None:
                raise ValueError(
                    "no known series in the history; "
                    f"keys: {sorted(hist)}; pass key=..."
                )
        if key not in hist:
            raise ValueError(f"history has no {key!r}; keys: {sorted(hist)}")
        twin = None  # the rank beside another series, on a second axis
        if "rank" in hist and key != "rank":
            twin = np.asarray(hist["rank"], float)
        tol = getattr(source, "tol", None) if key == "residual" else None
        label = {"residual": "relative residual ‖M − L − S‖_F / ‖M‖_F"}.get(key, key)
        return np.asarray(hist[key], float), label, key == "residual", twin, tol
    values = np.ravel(_small(source, "history")).astype(float)
    return values, key or "value", False, None, None


def convergence(source, *, key: str | None = None, ax=None, log: bool | None = None):
    """Cost, residual or log-likelihood per iteration; returns the Axes.

    Parameters
    ----------
    source : fitted estimator, dict of lists, or 1-D array
        Read from the estimator: ``history_`` (RobustPCA: the relative primal residual
        on a log axis, with the rank of L on a second axis and ``tol`` as a dashed
        line), ``cost_history_`` (SparsePCA) or ``loglike_`` (PPCA fitted by EM).
    key : str, optional
        Which series of a history dict to draw (default: ``residual``, ``cost``,
        ``objective`` or ``loglike``, the first present).
    log : bool, optional
        Logarithmic y axis; default on for residuals.

    Returns
    -------
    matplotlib.axes.Axes
    """
    values, label, default_log, twin, tol = _history_of(source, key)
    if values.size == 0:
        raise ValueError("the history is empty (no iterations)")
    ax = _new_axes(ax, (5.0, 3.4))
    it = np.arange(1, values.size + 1)
    ax.plot(it, values, "o-", ms=3, color="C0", label=label)
    if log is None:
        log = default_log
    if log:
        ax.set_yscale("log")
    if isinstance(tol, numbers.Real):
        ax.axhline(float(tol), color="C0", ls="--", lw=0.8, label=f"tol = {tol:g}")
    ax.set_xlabel("iteration")
    ax.set_ylabel(label)
    if twin is not None:
        ax2 = ax.twinx()
        ax2.step(it, twin, where="mid", color="C3", lw=1.2, label="rank of L")
        ax2.set_ylabel("rank of L", color="C3")
    if _is_estimator(source):
        ax.set_title(f"{type(source).__name__}: convergence")
    return ax
