"""One-pass moments (``linalg.moments``) as a ``da.reduction``: against dense float64
references for many chunk layouts and tree fan-ins, with the all-NaN feature counts."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from scalepca.linalg import column_moments_graph, moments_graph

LAYOUTS = [(1003, 7), (100, 7), (7, 7), (1, 7), ((500, 503), 7)]


@pytest.fixture(scope="module")
def X0():
    rng = np.random.default_rng(0)
    # |mean| ≫ standard deviation: the case the pairwise (Chan) merge is for
    return rng.standard_normal((1003, 7)) * 3 + 1e3


def _ref(X):
    mean = X.mean(axis=0)
    C = X - mean
    return mean, C.T @ C, (C**2).sum(axis=0)


@pytest.mark.parametrize("chunks", LAYOUTS)
@pytest.mark.parametrize("split_every", [2, 3, 8])
def test_moments_match_dense_reference(X0, chunks, split_every):
    """Mean and centred Gram to 1e-13 relative (the one-pass merge keeps full precision even
    with a mean 300 standard deviations from zero), for every layout and fan-in."""
    mean, m2, ss = _ref(X0)
    X = da.from_array(X0, chunks=chunks)
    (mom,) = dask.compute(moments_graph(X, split_every=split_every))
    assert mom["n"] == 1003 and mom["bad"] == 0 and "nan_features" not in mom
    np.testing.assert_allclose(mom["mean"], mean, rtol=1e-13)
    np.testing.assert_allclose(mom["m2"], m2, rtol=1e-13, atol=1e-13 * np.abs(m2).max())
    (col,) = dask.compute(moments_graph(X, with_gram=False, split_every=split_every))
    np.testing.assert_allclose(col["ss"], ss, rtol=1e-13)
    assert "m2" not in col


@pytest.mark.parametrize("chunks", [(100, 3), (7, 7), (1003, 1), ((500, 503), (2, 5))])
def test_column_moments_of_2d_blocks(X0, chunks):
    mean, _, ss = _ref(X0)
    (mom,) = dask.compute(column_moments_graph(da.from_array(X0, chunks=chunks)))
    assert mom["n"] == 1003
    np.testing.assert_allclose(mom["mean"], mean, rtol=1e-13)
    np.testing.assert_allclose(mom["ss"], ss, rtol=1e-13)


def test_nan_counts_ride_along(X0):
    X = X0.copy()
    X[:, 2] = np.nan
    X[5, 4] = np.inf
    for chunks in [(100, 7), ((500, 503), (2, 5))]:
        graph = moments_graph if len(chunks[1:]) and chunks[1] == 7 else column_moments_graph
        (mom,) = dask.compute(graph(da.from_array(X, chunks=chunks)))
        assert mom["bad"] == 1003 + 1
        np.testing.assert_array_equal(mom["nan_features"], [0, 0, 1003, 0, 0, 0, 0])


def test_tree_fan_in_is_split_every():
    """The partials of 64 blocks merge 4 at a time: 64 → 16 → 4 (combine) → 1 (aggregate)."""
    from collections import Counter

    X = da.ones((640, 3), chunks=(10, 3))
    graph = moments_graph(X, split_every=4).__dask_graph__()
    layers = Counter(key[0].rsplit("-", 1)[0] for key in graph if isinstance(key, tuple))
    assert layers == {"moments": 64, "moments-partial": 20, "moments-aggregate": 1}
    (mom,) = dask.compute(moments_graph(X, split_every=4))
    assert mom["n"] == 640
    np.testing.assert_array_equal(mom["m2"], np.zeros((3, 3)))
