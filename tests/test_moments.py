"""One-pass moments (``linalg.moments``) as a ``da.reduction``: against dense float64
references for many chunk layouts and tree fan-ins, with the all-NaN feature counts."""

from __future__ import annotations

import importlib

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
    """Mean and centred Gram to 1e-13 relative (the one-pass merge keeps full
    precision even with a mean 300 standard deviations from zero), for every layout
    and fan-in."""
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
        graph = (
            moments_graph
            if len(chunks[1:]) and chunks[1] == 7
            else column_moments_graph
        )
        (mom,) = dask.compute(graph(da.from_array(X, chunks=chunks)))
        assert mom["bad"] == 1003 + 1
        np.testing.assert_array_equal(mom["nan_features"], [0, 0, 1003, 0, 0, 0, 0])


def test_tree_fan_in_is_split_every():
    """The partials of 64 blocks merge 4 at a time: 64 → 16 → 4 (combine) → 1
    (aggregate)."""
    from collections import Counter

    X = da.ones((640, 3), chunks=(10, 3))
    graph = moments_graph(X, split_every=4).__dask_graph__()
    layers = Counter(
        key[0].rsplit("-", 1)[0] for key in graph if isinstance(key, tuple)
    )
    assert layers == {"moments": 64, "moments-partial": 20, "moments-aggregate": 1}
    (mom,) = dask.compute(moments_graph(X, split_every=4))
    assert mom["n"] == 640
    np.testing.assert_array_equal(mom["m2"], np.zeros((3, 3)))


# -- float32 blocks: float32 products of centred slices, float64 accumulation ----------
def _f32_data(kind: str, n: int = 5000, d: int = 12) -> np.ndarray:
    rng = np.random.default_rng(3)
    z = rng.standard_normal((n, d))
    if kind == "centred":
        x = z
    elif (
        kind == "mean_much_larger_than_sd"
    ):  # |mean| / sd = 1e5: only centring first keeps it
        x = 1e4 + 0.1 * z
    else:  # columns on scales 1e-3 … 1e3, correlated, with offsets
        x = (z @ rng.standard_normal((d, d))) * np.logspace(-3, 3, d) + np.linspace(
            -50, 50, d
        )
    return x.astype(np.float32)


def _gram_ref(x32: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x32.astype(np.float64)
    c = x - x.mean(axis=0)
    return c.T @ c, np.sqrt(np.diag(c.T @ c))


@pytest.mark.parametrize(
    "kind", ["centred", "mean_much_larger_than_sd", "mixed_scales"]
)
def test_float32_gram_within_stated_bound(kind):
    """Every entry of the float32 Gram is within ``gram_error_bound() ‖c_j‖ ‖c_k‖``
    of the float64 Gram of the same float32 data (5000 rows: three slices of
    GRAM_BLOCK_ROWS)."""
    from scalepca.linalg.moments import GRAM_BLOCK_ROWS, _gram, gram_error_bound

    x = _f32_data(kind)
    assert x.shape[0] > 2 * GRAM_BLOCK_ROWS
    ref, norms = _gram_ref(x)
    mean = x.sum(axis=0, dtype=np.float64) / x.shape[0]
    g = _gram(x, mean, precision="auto")
    scale = np.outer(norms, norms)
    bound = gram_error_bound()
    assert bound == pytest.approx((GRAM_BLOCK_ROWS + 2) * np.finfo(np.float32).eps / 2)
    assert np.all(np.abs(g - ref) <= bound * scale)
    # in practice the error is a few float32 epsilons, far inside the worst-case bound
    assert np.max(np.abs(g - ref) / scale) < 16 * np.finfo(np.float32).eps
    # float64 on request: the products of the widened slices
    g64 = _gram(x, mean, precision="float64")
    np.testing.assert_allclose(g64, ref, rtol=1e-10, atol=1e-10 * scale.max())
    if kind == "mean_much_larger_than_sd":
        # the bound is not vacuous: float32 products of the uncentred data lose
        # everything
        xs = x[:GRAM_BLOCK_ROWS]
        naive = (xs.T @ xs).astype(np.float64) - GRAM_BLOCK_ROWS * np.outer(
            xs.mean(axis=0, dtype=np.float64), xs.mean(axis=0, dtype=np.float64)
        )
        ref_s, norms_s = _gram_ref(xs)
        assert np.max(np.abs(naive - ref_s) / np.outer(norms_s, norms_s)) > bound


@pytest.mark.parametrize("kind", ["mean_much_larger_than_sd", "mixed_scales"])
@pytest.mark.parametrize("chunks", [5000, 1000, 777])
def test_float32_moments_pass_within_bound(kind, chunks):
    """The merged centred Gram of a float32 dask array keeps the bound for any
    chunking."""
    from scalepca.linalg.moments import gram_error_bound

    x = _f32_data(kind)
    ref, norms = _gram_ref(x)
    (m,) = dask.compute(moments_graph(da.from_array(x, chunks=(chunks, -1))))
    assert np.all(np.abs(m["m2"] - ref) <= gram_error_bound() * np.outer(norms, norms))
    np.testing.assert_allclose(m["mean"], x.astype(np.float64).mean(axis=0), rtol=1e-12)


def test_gram_precision_option_and_bad_value():
    from scalepca.linalg.moments import GRAM_PRECISION_KEY

    x = _f32_data("mixed_scales", n=3000)
    X = da.from_array(x, chunks=(1000, -1))
    ref, _ = _gram_ref(x)
    (explicit,) = dask.compute(moments_graph(X, precision="float64"))
    with dask.config.set({GRAM_PRECISION_KEY: "float64"}):
        graph = moments_graph(X)  # the setting is read when the graph is built
    (configured,) = dask.compute(graph)
    np.testing.assert_array_equal(configured["m2"], explicit["m2"])
    np.testing.assert_allclose(
        explicit["m2"], ref, rtol=1e-9, atol=1e-12 * np.abs(ref).max()
    )
    with pytest.raises(
        ValueError, match="gram precision must be one of 'auto', 'float64'"
    ):
        moments_graph(X, precision="float16")
    with (
        dask.config.set({GRAM_PRECISION_KEY: "half"}),
        pytest.raises(ValueError, match="half"),
    ):
        moments_graph(X)


def _tanh_features(x, scale=1.0, offset=0.0, out=None, *, into_out=True):
    """A small nonlinear feature map (n × 3d) with an offset that sets |mean| / std;
    written into ``out`` when given, unless ``into_out=False`` (a map that returns a
    new array)."""
    x = np.asarray(x, dtype=np.float64)
    F = np.hstack(
        [np.tanh(x) * scale + offset, x**2 * scale + offset, x * scale + offset]
    )
    if out is None or not into_out:
        return F
    out[...] = F
    return out


@pytest.mark.parametrize("into_out", [True, False])
@pytest.mark.parametrize("offset", [0.0, 1e6])
@pytest.mark.parametrize("chunks", [5000, 1000, 777])
def test_feature_moments_equal_moments_of_the_mapped_matrix(
    X0, offset, chunks, into_out, monkeypatch
):
    """``moments_graph(X, feature_map=f)`` (slab by slab, never forming f(X)) gives
    the moments of f(X) — also with slabs of 64 rows, and where |mean| ≫ std (offset
    1e6): the shift by the first slab's mean keeps the centred Gram at the precision
    of a centred product. The same whether the map writes into the reused slab buffer
    or returns new arrays."""
    from functools import partial

    moments_mod = importlib.import_module("scalepca.linalg.moments")
    f = partial(_tanh_features, offset=offset, into_out=into_out)
    F = f(X0)
    Fc = F - F.mean(axis=0)
    ref = Fc.T @ Fc
    for slab in (moments_mod.FEATURE_SLAB_BYTES, 64 * 8 * F.shape[1]):
        monkeypatch.setattr(moments_mod, "FEATURE_SLAB_BYTES", slab)
        (mom,) = dask.compute(
            moments_graph(da.from_array(X0, chunks=(chunks, -1)), feature_map=f)
        )
        assert mom["n"] == X0.shape[0] and mom["bad"] == 0
        np.testing.assert_allclose(mom["mean"], F.mean(axis=0), rtol=1e-14, atol=1e-12)
        np.testing.assert_allclose(
            mom["m2"], ref, rtol=0, atol=1e-11 * np.abs(ref).max()
        )


def test_feature_moments_count_nonfinite_features(X0):
    X = X0.copy()
    X[3, 0] = np.inf  # tanh(inf) = 1 is finite; inf² and inf are not: 2 bad features
    (mom,) = dask.compute(
        moments_graph(da.from_array(X, chunks=(700, -1)), feature_map=_tanh_features)
    )
    assert mom["bad"] == 2


def test_merging_many_partials_leaves_every_partial_unchanged(X0):
    """The merge of a list accumulates in place only into the array it made itself: the
    partials handed to it (results dask may hold for other uses) are never written."""
    from scalepca.linalg.moments import _merge_list, block_moments

    parts = [block_moments(X0[i : i + 100]) for i in range(0, 1000, 100)]
    parts.insert(
        3, block_moments(X0[:0])
    )  # an empty block, whose merge returns the other
    before = [p["m2"].copy() for p in parts]
    merged = _merge_list(parts)
    for p, m2 in zip(parts, before, strict=True):
        np.testing.assert_array_equal(p["m2"], m2)
    mean, m2, _ = _ref(X0[:1000])
    np.testing.assert_allclose(merged["m2"], m2, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(merged["mean"], mean, rtol=1e-14)


_moments_module = importlib.import_module("scalepca.linalg.moments")


@pytest.mark.parametrize("n", [1, 2, 1023, 1025, 5000])
@pytest.mark.parametrize("offset", [0.0, 3.0, 1e6])
@pytest.mark.parametrize("order", ["C", "F"])
def test_fused_block_moments_equal_the_reference(n, offset, order):
    """A float64 block's moments in one pass (shifted slabs whose syrk also sums them)
    equal the two-pass reference to 1e-13, at every length around the slab and sample
    sizes, in either memory order, and with |mean| 10⁶ standard deviations from zero."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 37)) @ rng.standard_normal((37, 37)) + offset
    x = np.asarray(x, order=order)
    mom = _moments_module.block_moments(x)
    assert _moments_module._fused_moments(x) is not None  # the one-pass route was taken
    mean, m2, _ = _ref(x)
    assert mom["n"] == n and mom["bad"] == 0 and "nan_features" not in mom
    np.testing.assert_allclose(mom["mean"], mean, rtol=1e-13, atol=1e-13 * abs(offset))
    np.testing.assert_allclose(mom["m2"], m2, rtol=1e-13, atol=1e-13 * np.abs(m2).max())
    assert mom["m2"].flags.c_contiguous and np.array_equal(mom["m2"], mom["m2"].T)


def test_fused_block_moments_redo_a_block_whose_sample_is_not_typical():
    """Rows alternating between +10 and −10: the even sample of the one-pass route sees
    only one of them (its shift is 20 standard deviations off), so the block is redone
    centred on its exact mean — and the result is still the reference's."""
    rng = np.random.default_rng(1)
    n = 2 * _moments_module.GRAM_BLOCK_ROWS  # the sample takes every second row
    sign = np.where(np.arange(n) % 2, -10.0, 10.0)[:, None]
    x = rng.standard_normal((n, 5)) * 0.01 + sign
    assert _moments_module._fused_moments(x) is None
    mom = _moments_module.block_moments(x)
    mean, m2, _ = _ref(x)
    np.testing.assert_allclose(mom["mean"], mean, atol=1e-13)
    np.testing.assert_allclose(mom["m2"], m2, rtol=1e-13)


@pytest.mark.parametrize("row", [0, 2500, 4999])
def test_fused_block_moments_count_nonfinite_anywhere(row):
    """A NaN (or inf) in the first, a middle or the last slab: counted per feature as by
    the two-pass route, the other statistics those of the block with the non-finite
    entries at 0 (the rule the callers rely on)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5000, 6)) + 2.0
    x[row, 1] = np.nan
    x[row, 4] = np.inf
    assert _moments_module._fused_moments(x) is None
    mom = _moments_module.block_moments(x)
    clean = np.where(np.isfinite(x), x, 0.0)
    mean, m2, _ = _ref(clean)
    assert mom["bad"] == 2 and mom["nan_features"].tolist() == [0, 1, 0, 0, 0, 0]
    np.testing.assert_allclose(mom["mean"], mean, rtol=1e-13)
    np.testing.assert_allclose(mom["m2"], m2, rtol=1e-13, atol=1e-13 * np.abs(m2).max())
