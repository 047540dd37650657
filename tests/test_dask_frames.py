"""A dask DataFrame is read lazily: checked from its metadata, its rows counted in
one counted pass before a fit, and mapped partition by partition (nothing computed)
by ``transform``."""

from __future__ import annotations

import dask
import numpy as np
import pandas as pd
import pytest

import scalepca

from .support.compare import assert_close, assert_same_components
from .support.counting import TaskCounter

dd = pytest.importorskip("dask.dataframe")


@pytest.fixture
def tasks():
    counter = TaskCounter()
    with dask.config.set(scheduler="sync"), counter:
        yield counter


@pytest.fixture
def frames():
    rng = np.random.default_rng(38)
    X = rng.standard_normal((80, 8)) @ rng.standard_normal((8, 8)) + rng.uniform(
        -3, 3, 8
    )
    pdf = pd.DataFrame(X, columns=[f"f{i}" for i in range(8)])
    return X, pdf, dd.from_pandas(pdf, npartitions=4)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ("sqrt_coslat", "named weights need xarray data"),
        (np.ones(3), r"shape \(3,\); expected \(8,\)"),
    ],
)
def test_weights_refused_before_any_compute(frames, tasks, weights, match):
    _, _, ddf = frames
    with pytest.raises(ValueError, match=match):
        scalepca.open_matrix(ddf, weights=weights)
    assert tasks.count == 0


def test_non_numeric_columns_refused_before_any_compute(frames, tasks):
    _, _, ddf = frames
    bad = ddf.assign(name="a")
    with pytest.raises(TypeError, match="dtype object"):
        scalepca.open_matrix(bad)
    with pytest.raises(TypeError, match="dtype object"):
        scalepca.PCA(3).fit(bad)
    assert tasks.count == 0


def test_open_matrix_keeps_the_frame_lazy(frames):
    """The frame becomes a dask array of its partitions, not a NumPy array on the
    client."""
    import dask.array as da

    X, _, ddf = frames
    M = scalepca.open_matrix(ddf)
    assert isinstance(M, da.Array)
    assert M.chunks == ((20, 20, 20, 20), (8,))
    np.testing.assert_array_equal(M.compute(), X)


def test_fit_counts_the_row_count_pass(frames):
    X, pdf, ddf = frames
    on_frame = scalepca.PCA(3).fit(ddf)
    in_memory = scalepca.PCA(3).fit(pdf)
    assert on_frame.n_passes_ == in_memory.n_passes_ + 1
    assert_same_components(
        on_frame.components_, in_memory.components_, 1e-10, rtol=1e-10
    )


@pytest.mark.parametrize(
    "model",
    [
        scalepca.PCA(3),
        scalepca.PCA(3, svd_solver="tsqr"),
        scalepca.PPCA(3),
        scalepca.KernelPCA(3),
        scalepca.SparsePCA(3, alpha=0.1, random_state=0),
    ],
    ids=lambda m: f"{type(m).__name__}-{m.get_params().get('svd_solver', '')}",
)
def test_transform_is_lazy(frames, tasks, model):
    """transform maps the partitions as they are: no task runs until the scores are
    asked for, and they equal those of the in-memory frame."""
    import dask.array as da

    _, pdf, ddf = frames
    model.fit(pdf)
    tasks.reset()
    Z = model.transform(ddf)
    assert tasks.count == 0
    assert isinstance(Z, da.Array)
    assert_same_components(
        Z.compute(), model.transform(pdf), 1e-10, rtol=1e-10, mode_axis=1
    )


def test_weighted_transform_is_lazy(frames, tasks):
    X, _, ddf = frames
    w = np.random.default_rng(0).uniform(0.5, 2.0, 8)
    model = scalepca.PCA(3).fit(scalepca.open_matrix(ddf, weights=w))
    tasks.reset()
    Z = model.transform(ddf)
    assert tasks.count == 0
    ref = scalepca.PCA(3).fit(X * w)
    assert_same_components(
        Z.compute(), ref.transform(X * w), 1e-10, rtol=1e-10, mode_axis=1
    )


def test_reconstruction_of_lazy_scores(frames, tasks):
    """The scores of a frame (rows not counted) map back lazily too."""
    X, pdf, ddf = frames
    model = scalepca.PCA(3).fit(pdf)
    tasks.reset()
    R = model.inverse_transform(model.transform(ddf))
    assert tasks.count == 0
    assert_close(
        R.compute(), model.inverse_transform(model.transform(X)), 1e-10, rtol=1e-10
    )
