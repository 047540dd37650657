"""scalepca.analysis.plot: the figures hold the data they claim to show (artists and
values, not pixels)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PathCollection, QuadMesh  # noqa: E402

import scalepca  # noqa: E402
from scalepca.analysis import plot  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def pca_fit():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 36)) * np.linspace(3.0, 0.2, 36)
    return scalepca.PCA(6).fit(X), X


@pytest.fixture(scope="module")
def rpca_fit():
    rng = np.random.default_rng(1)
    n1, n2 = 40, 48  # 40 frames of 6 × 8 pixels
    L0 = rng.standard_normal((n1, 2)) @ rng.standard_normal((2, n2))
    S0 = np.where(rng.random((n1, n2)) < 0.05, 6.0, 0.0)
    M = L0 + S0
    return scalepca.RobustPCA(random_state=0).fit(M), M


def _images(fig):
    return [im for ax in fig.axes for im in ax.get_images()]


# -- import behaviour ------------------------------------------------------------------
def test_import_does_not_load_matplotlib():
    # matplotlib is an optional extra: no module-level import of it in
    # scalepca.analysis.plot (checked on the source, as this process has imported
    # matplotlib already)
    tree = ast.parse(Path(plot.__file__).read_text())
    for node in tree.body:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        assert not any(n.split(".")[0] == "matplotlib" for n in names), names


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"scalepca\[plot\]"):
        plot.scree([0.5, 0.3])
    with pytest.raises(ImportError, match=r"scalepca\[plot\]"):
        plot.components(np.eye(2))


# -- scree -----------------------------------------------------------------------------
def test_scree_bars_and_cumulative(pca_fit):
    pca, _ = pca_fit
    ax = plot.scree(pca)
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights, 100 * pca.explained_variance_ratio_)
    (line,) = ax.get_lines()
    np.testing.assert_allclose(
        line.get_ydata(), 100 * np.cumsum(pca.explained_variance_ratio_)
    )
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 7))
    assert "PCA" in ax.get_title()


def test_scree_array_truncated_on_given_axes():
    fig, ax = plt.subplots()
    out = plot.scree(
        np.array([0.5, 0.25, 0.125, 0.0625]),
        ax=ax,
        n_components=3,
        cumulative=False,
        log=True,
    )
    assert out is ax
    assert len(ax.patches) == 3 and not ax.get_lines()
    assert ax.get_yscale() == "log"


def test_scree_without_ratio_draws_variances():
    class Fitted:  # an estimator-like object with eigenvalues only
        def get_params(self):
            return {}

        def fit(self):
            return self

        eigenvalues_ = np.array([4.0, 2.0])

    ax = plot.scree(Fitted())
    np.testing.assert_allclose([p.get_height() for p in ax.patches], [4.0, 2.0])
    assert not ax.get_lines() and ax.get_ylabel() == "explained variance"


def test_scree_empty_raises():
    with pytest.raises(ValueError, match="empty"):
        plot.scree([])


# -- components ------------------------------------------------------------------------
def test_components_as_images(pca_fit):
    pca, _ = pca_fit
    fig = plot.components(pca, image_shape=(6, 6), n_components=4, ncols=2)
    ims = _images(fig)
    assert len(ims) == 4
    for i, im in enumerate(ims):
        np.testing.assert_allclose(im.get_array(), pca.components_[i].reshape(6, 6))
        lo, hi = im.get_clim()
        assert lo == -hi == -np.abs(pca.components_[i]).max()  # symmetric about zero
    assert fig.axes[0].get_title().startswith("mode 1 (")


def test_components_as_profiles():
    C = np.arange(10.0).reshape(2, 5)
    fig = plot.components(C, titles=["a", "b"], colorbar=False)
    lines = [ax.get_lines()[0] for ax in fig.axes if ax.get_visible()]
    np.testing.assert_array_equal(lines[1].get_ydata(), C[1])
    assert [ax.get_title() for ax in fig.axes] == ["a", "b"]
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "loading",
        "loading",
    ]  # both axes named


def test_components_as_maps_with_land_mask():
    from scalepca.datasets import make_gridded

    ds = make_gridded(60, n_lat=6, n_lon=12, rank=2, chunk_rows=30, land_fraction=0.3)
    X = scalepca.open_matrix(ds["sst"], sample_dims="time")
    pca = scalepca.PCA(2).fit(X)
    fig = plot.components(pca)
    panels = [ax for ax in fig.axes if ax.get_xlabel() == "lon"]  # not the colour bars
    meshes = [c for ax in panels for c in ax.collections if isinstance(c, QuadMesh)]
    assert len(meshes) == 2
    comp = pca.components_xr_.transpose("mode", "lat", "lon").values
    arr = meshes[0].get_array()
    np.testing.assert_array_equal(
        np.ma.getmaskarray(arr).ravel(), np.isnan(comp[0]).ravel()
    )
    np.testing.assert_allclose(arr.compressed(), comp[0][~np.isnan(comp[0])])
    assert fig.axes[0].get_xlabel() == "lon" and fig.axes[0].get_ylabel() == "lat"
    assert np.isnan(comp[0]).any()  # the land mask reaches the figure as masked cells
    bars = [ax for ax in fig.axes if ax not in panels]
    assert bars and all(
        ax.get_ylabel() == "loading" for ax in bars
    )  # colour bars say what


def test_components_errors():
    with pytest.raises(ValueError, match="image_shape"):
        plot.components(np.zeros((2, 10)), image_shape=(3, 3))
    import xarray as xr

    with pytest.raises(ValueError, match="'mode'"):
        plot.components(xr.DataArray(np.zeros((2, 3)), dims=("a", "b")))


# -- scores ----------------------------------------------------------------------------
def test_scores_coloured_by_class(pca_fit):
    pca, X = pca_fit
    Z = pca.transform(X)
    labels = np.arange(len(X)) % 3
    ax = plot.scores(Z, labels, components=(1, 2), label_names=["a", "b", "c"])
    cols = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(cols) == 3
    np.testing.assert_allclose(cols[2].get_offsets(), Z[labels == 2][:, [1, 2]])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b", "c"]
    assert ax.get_xlabel() == "score 2"


def test_scores_subsample_dask_and_continuous_labels():
    Z = da.from_array(np.random.default_rng(0).standard_normal((5000, 3)), chunks=1000)
    t = np.linspace(0, 1, 5000)
    ax = plot.scores(Z, t, max_points=700, random_state=3)
    (col,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    pts = col.get_offsets()
    assert pts.shape == (700, 2)
    rows = np.sort(np.random.default_rng(3).choice(5000, 700, replace=False))
    np.testing.assert_allclose(pts, Z.compute()[rows][:, [0, 1]])
    np.testing.assert_allclose(col.get_array(), t[rows])
    assert len(ax.figure.axes) == 2  # colour bar for continuous labels


def test_scores_xarray():
    import xarray as xr

    Z = xr.DataArray(np.arange(12.0).reshape(6, 2), dims=("time", "mode"))
    ax = plot.scores(Z)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), Z.values)


def test_scores_errors():
    with pytest.raises(ValueError, match="labels has 2"):
        plot.scores(np.zeros((3, 2)), [0, 1])
    with pytest.raises(ValueError, match="out of range"):
        plot.scores(np.zeros((3, 2)), components=(0, 2))
    with pytest.raises(ValueError, match="2-D"):
        plot.scores(np.zeros(3))


# -- sparse loadings -------------------------------------------------------------------
def test_sparse_loadings_blank_zeros():
    C = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, -0.7, 0.7]])
    ax = plot.sparse_loadings(C, feature_names=list("abcd"))
    (im,) = ax.get_images()
    arr = im.get_array()
    np.testing.assert_array_equal(np.ma.getmaskarray(arr), C == 0)
    np.testing.assert_allclose(arr.compressed(), C[C != 0])
    assert "50 % exactly zero" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
    assert len(ax.texts) == 4  # the non-zero values are written in their cells
    with pytest.raises(ValueError, match="feature_names"):
        plot.sparse_loadings(C, feature_names=["a"])


def test_sparse_loadings_of_estimator():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 12))
    sp = scalepca.SparsePCA(2, method="batch", alpha=0.5, random_state=0).fit(X)
    ax = plot.sparse_loadings(sp)
    (im,) = ax.get_images()
    np.testing.assert_array_equal(
        np.ma.getmaskarray(im.get_array()), sp.components_ == 0
    )


# -- robust PCA ------------------------------------------------------------------------
def test_rpca_frames(rpca_fit):
    rpca, M = rpca_fit
    fig = plot.rpca_frames(M, rpca, frames=[0, 7], image_shape=(6, 8))
    ims = _images(fig)
    assert len(ims) == 6
    L, S = rpca.low_rank_.compute(), rpca.sparse_.compute()
    np.testing.assert_allclose(ims[0].get_array(), M[0].reshape(6, 8))
    np.testing.assert_allclose(ims[4].get_array(), L[7].reshape(6, 8))
    np.testing.assert_allclose(ims[5].get_array(), np.abs(S[7]).reshape(6, 8))
    assert [fig.axes[i].get_title() for i in range(3)][0] == "observed"


def test_rpca_frames_as_columns_and_parts():
    rng = np.random.default_rng(2)
    M = rng.standard_normal((12, 5))  # 5 frames of 3 × 4 stored as columns
    L, S = M * 0.5, M * 0.5
    fig = plot.rpca_frames(
        M,
        frames=[4],
        image_shape=(3, 4),
        low_rank=L,
        sparse=S,
        axis=1,
        abs_sparse=False,
    )
    ims = _images(fig)
    np.testing.assert_allclose(ims[2].get_array(), S[:, 4].reshape(3, 4))
    with pytest.raises(ValueError, match="pixels"):
        plot.rpca_frames(
            M, frames=[0], image_shape=(2, 2), low_rank=L, sparse=S, axis=1
        )
    with pytest.raises(ValueError, match="out of range"):
        plot.rpca_frames(
            M, frames=[9], image_shape=(3, 4), low_rank=L, sparse=S, axis=1
        )
    with pytest.raises(ValueError, match="RobustPCA"):
        plot.rpca_frames(M, frames=[0], image_shape=(3, 4), axis=1)


def test_rpca_blocks(rpca_fit):
    rpca, M = rpca_fit
    fig = plot.rpca_blocks(M, rpca, rows=slice(0, 10), cols=slice(5, 20))
    ims = _images(fig)
    np.testing.assert_allclose(ims[1].get_array(), rpca.low_rank_[:10, 5:20].compute())
    assert f"rank {rpca.rank_}" in fig.axes[1].get_title()
    # own scales by default; one scale, L's, with "low_rank", so that L shows in M
    own = [im.get_clim()[1] for im in ims]
    assert own[0] > own[1] and len(fig.axes) == 6  # three panels, three colour bars
    fig = plot.rpca_blocks(
        M, rpca, rows=slice(0, 10), cols=slice(5, 20), scale="low_rank"
    )
    L = rpca.low_rank_[:10, 5:20].compute()
    for im in _images(fig):
        assert im.get_clim() == (-np.abs(L).max(), np.abs(L).max())
    assert len(fig.axes) == 4  # one colour bar
    with pytest.raises(ValueError, match="scale must be 'each' or 'low_rank'"):
        plot.rpca_blocks(M, rpca, scale="shared")


# -- convergence -----------------------------------------------------------------------
def test_convergence_rpca(rpca_fit):
    rpca, _ = rpca_fit
    ax = plot.convergence(rpca)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), rpca.history_["residual"])
    assert ax.get_yscale() == "log"
    assert ax.get_lines()[1].get_ydata()[0] == rpca.tol  # the tolerance line
    twin = [a for a in ax.figure.axes if a is not ax]
    assert len(twin) == 1
    np.testing.assert_allclose(
        twin[0].get_lines()[0].get_ydata(), rpca.history_["rank"]
    )


def test_convergence_ppca_em_and_closed_form():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3)) @ rng.standard_normal(
        (3, 8)
    ) + 0.1 * rng.standard_normal((200, 8))
    X[rng.random(X.shape) < 0.1] = np.nan
    em = scalepca.PPCA(2, missing="em", max_iter=30).fit(X)
    ax = plot.convergence(em)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), em.loglike_)
    closed = scalepca.PPCA(2).fit(np.nan_to_num(X))
    with pytest.raises(ValueError, match="no iteration history"):
        plot.convergence(closed)
    with pytest.raises(ValueError, match="records no iteration history"):
        plot.convergence(scalepca.PCA(2).fit(np.nan_to_num(X)))


def test_convergence_dict_and_array():
    ax = plot.convergence({"cost": [3.0, 2.0, 1.5], "rank": [1, 2, 2]})
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [3.0, 2.0, 1.5])
    ax = plot.convergence(np.array([1.0, 0.5]), log=True)
    assert ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="keys"):
        plot.convergence({"foo": [1.0]})
    with pytest.raises(ValueError, match="empty"):
        plot.convergence(np.array([]))


def _field(lat_name, lon_name, attrs_only):
    """(time, level=1, lat, lon) field, latitudes stored north to south."""
    import xarray as xr

    rng = np.random.default_rng(1)
    lat = np.linspace(80.0, -80.0, 9)
    lon = np.arange(0.0, 360.0, 30.0)
    data = rng.standard_normal((40, 1, 9, 12))
    data += np.cos(np.deg2rad(lat))[:, None] * rng.standard_normal((40, 1, 1, 1))
    dims = (
        ("time", "level", "y", "x")
        if attrs_only
        else ("time", "level", lat_name, lon_name)
    )
    return xr.DataArray(
        data,
        dims=dims,
        coords={
            "time": np.arange(40),
            "level": [500.0],
            lat_name: (
                (dims[2],),
                lat,
                {"units": "degrees_north"} if attrs_only else {},
            ),
            lon_name: (
                (dims[3],),
                lon,
                {"units": "degrees_east"} if attrs_only else {},
            ),
        },
    )


@pytest.mark.parametrize(
    "lat_name,lon_name,attrs_only",
    [("latitude", "longitude", False), ("nav_lat", "nav_lon", True)],
)
def test_maps_north_up_for_any_lat_lon_naming(lat_name, lon_name, attrs_only):
    """Latitude/longitude found by name or by CF units alone, a size-1 level
    squeezed: the components are drawn as maps whose y axis increases northwards,
    over the real coords."""
    field = _field(lat_name, lon_name, attrs_only)
    pca = scalepca.PCA(3).fit(scalepca.open_matrix(field, sample_dims="time"))
    fig = plot.components(pca)
    ax = fig.axes[0]
    (mesh,) = [c for c in ax.collections if isinstance(c, QuadMesh)]
    lo, hi = ax.get_ylim()
    assert lo < hi and lo <= -80 and hi >= 80  # north up
    assert ax.get_ylabel() == lat_name and ax.get_xlabel() == lon_name
    assert ax.get_title().startswith("mode 1 (")
    # the cell at the northernmost row holds the component's value at latitude 80
    comp = pca.components_xr_.isel(mode=0).squeeze("level")
    comp = comp.transpose(*(("y", "x") if attrs_only else (lat_name, lon_name))).values
    np.testing.assert_allclose(
        np.ma.filled(mesh.get_array(), np.nan).reshape(comp.shape), comp
    )
    plt.close(fig)


def test_mode_labels_agree_everywhere():
    """Modes are numbered from 1 in the xarray coords (components, scores, per-mode
    values), the plot labels, the CLI summary table and the report's table: mode 1 is
    components_[0]."""
    from scalepca.app.pipeline import summary
    from scalepca.app.report import _spectrum_rows

    field = _field("lat", "lon", False)
    X = scalepca.open_matrix(field, sample_dims="time")
    pca = scalepca.PCA(3).fit(X)
    assert list(pca.components_xr_.mode.values) == [1, 2, 3]
    assert list(pca.transform(X).mode.values) == [1, 2, 3]
    assert list(pca.explained_variance_xr_.mode.values) == [1, 2, 3]
    np.testing.assert_array_equal(
        pca.components_xr_.sel(mode=1).values.ravel(), pca.components_[0]
    )
    assert [int(r[0]) for r in _spectrum_rows(pca)] == [1, 2, 3]  # "1" … as printed
    table = summary(pca, data_shape=(40, 108), elapsed=0.0, method="pca").splitlines()
    first = next(i for i, line in enumerate(table) if line.startswith("mode"))
    assert [int(line.split()[0]) for line in table[first + 2 : first + 5]] == [1, 2, 3]
    fig = plot.components(pca)
    assert [ax.get_title().split(" (")[0] for ax in fig.axes if ax.get_title()] == [
        "mode 1",
        "mode 2",
        "mode 3",
    ]
    ax = plot.scores(pca.transform(X), components=(0, 2))
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("score 1", "score 3")
    ax = plot.scree(pca)
    plt.close("all")


def test_top_loadings_ranked_by_name(pca_fit):
    """Each panel: the largest |loadings| of its component, largest on top, named,
    with their signed values."""
    pca, _ = pca_fit
    names = [f"gene_{j}" for j in range(pca.components_.shape[1])]
    fig = plot.top_loadings(pca, names=names, n_components=3, n_features=5)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 3
    for i, ax in enumerate(shown):
        c = pca.components_[i]
        order = np.argsort(-np.abs(c), kind="stable")[:5]
        bars = sorted(ax.patches, key=lambda p: -p.get_y())  # top to bottom
        np.testing.assert_allclose([b.get_width() for b in bars], c[order])
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels == [names[j] for j in order]
        assert ax.get_title().startswith(f"mode {i + 1} (")
    with pytest.raises(ValueError, match="names has 2 entries"):
        plot.top_loadings(pca, names=["a", "b"])
    with pytest.raises(TypeError, match="complex"):
        plot.top_loadings(np.ones((2, 3)) * 1j)


def test_scree_error_bars_and_component_limits(pca_fit):
    from matplotlib.container import BarContainer

    pca, _ = pca_fit
    err = 0.1 * pca.explained_variance_ratio_
    ax = plot.scree(pca, yerr=err)
    bars = [c for c in ax.containers if isinstance(c, BarContainer)][0]
    segments = bars.errorbar.lines[2][0].get_segments()
    np.testing.assert_allclose(
        [s[1, 1] - s[0, 1] for s in segments], 2 * 100 * err, rtol=1e-12
    )
    fig = plot.components(pca, image_shape=(6, 6), limits=(0, 2), label="amplitude")
    assert fig.axes[0].images[0].get_clim() == (0.0, 2.0)
    assert fig.axes[-1].get_ylabel() == "amplitude"  # the colour bar's label
