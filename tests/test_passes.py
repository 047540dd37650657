"""scalepca.linalg.passes: the one tree reduction over row blocks, pass counting,
pass events."""

from __future__ import annotations

import logging

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse

from scalepca import PCA
from scalepca._validation import as_csr_blocks
from scalepca.analysis.eof import eofs_as_correlation
from scalepca.linalg import passes
from scalepca.linalg.sparse import merge_code_stats

from .support.counting import counted_dask


def _stats(x) -> dict:
    """Row count, column sums and Gram of one block (dense or CSR)."""
    g = x.T @ x
    return {
        "n": x.shape[0],
        "s": np.asarray(x.sum(axis=0)).ravel(),
        "g": g.toarray() if scipy.sparse.issparse(g) else np.asarray(g),
    }


def _reference(X: np.ndarray) -> dict:
    return {"n": X.shape[0], "s": X.sum(axis=0), "g": X.T @ X}


def _matrix(rng, n=97, d=6, density=None):
    X = rng.standard_normal((n, d)) + 3.0
    if density is not None:
        X[rng.random((n, d)) > density] = 0.0
    return X


def _as_dask(X, rows, sparse):
    if not sparse:
        return da.from_array(X, chunks=(rows, -1))
    csr = scipy.sparse.csr_matrix(X)
    return as_csr_blocks(
        da.from_array(
            csr, chunks=(rows, -1), asarray=False, meta=scipy.sparse.csr_matrix((0, 0))
        )
    )


def _assert_stats(got, ref):
    assert got["n"] == ref["n"]
    np.testing.assert_allclose(got["s"], ref["s"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got["g"], ref["g"], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("rows", [97, 10, 1])
@pytest.mark.parametrize("split_every", [2, 3, 8])
def test_reduce_rows_equals_the_dense_reference(rng, sparse, rows, split_every):
    X = _matrix(rng, density=0.3 if sparse else None)
    graph = passes.reduce_rows(
        _as_dask(X, rows, sparse), _stats, merge_code_stats, split_every=split_every
    )
    (got,) = dask.compute(graph)
    _assert_stats(got, _reference(X))


@pytest.mark.parametrize("rows", [97, 10, 1])
@pytest.mark.parametrize("split_every", [2, 3, 8])
def test_reduce_blocks_is_the_same_tree_as_reduce_rows(rng, rows, split_every):
    """Delayed blocks and a dask array of the same blocks merge in the same order:
    bitwise the same result, equal to the reference."""
    X = _matrix(rng)
    A = _as_dask(X, rows, False)
    blocks = A.to_delayed(optimize_graph=True).ravel().tolist()
    a, b = dask.compute(
        passes.reduce_blocks(blocks, _stats, merge_code_stats, split_every=split_every),
        passes.reduce_rows(A, _stats, merge_code_stats, split_every=split_every),
    )
    for key in ("s", "g"):
        assert np.array_equal(a[key], b[key])
    _assert_stats(a, _reference(X))


def _stacked(blocks):
    return {
        "s": sum(b.sum(axis=0) for b in blocks),
        "n": sum(b.shape[0] for b in blocks),
    }


def _sum_stats(parts):
    return {"s": sum(p["s"] for p in parts), "n": sum(p["n"] for p in parts)}


def test_reduce_block_groups_reads_each_block_inside_its_group_s_task(rng):
    """A group is one task that reads its blocks (no task per block is left in the
    graph), every block is read once, and blocks another task also reads (an array
    that repeats itself) stay tasks of their own."""
    X = _matrix(rng)
    A, counter = counted_dask(X, (10, X.shape[1]))
    groups = [range(0, 3), range(3, 4), range(4, A.numblocks[0])]
    graph = passes.reduce_block_groups(
        A, groups, _stacked, merge_all=_sum_stats, split_every=2
    )
    keys = dict(graph.__dask_graph__())
    assert not any(
        k in keys for (k,) in A.__dask_keys__()
    )  # every read is inside a group
    (got,) = dask.compute(graph)
    assert counter.reads == A.numblocks[0]
    np.testing.assert_allclose(got["s"], X.sum(axis=0), rtol=1e-12)
    assert got["n"] == X.shape[0]
    twice = da.concatenate([A, A])  # its blocks are aliases of A's, each read twice
    graph = passes.reduce_block_groups(
        twice,
        [range(0, 5), range(5, twice.numblocks[0])],
        _stacked,
        merge_all=_sum_stats,
    )
    (got,) = dask.compute(graph)
    np.testing.assert_allclose(got["s"], 2 * X.sum(axis=0), rtol=1e-12)


def test_fold_merges_left_to_right_then_finishes():
    seen = []

    def merge(a, b):
        seen.append((a, b))
        return a + b

    assert passes.fold([[1], [2, 3]], merge=merge, finish=lambda v: -v) == -6
    assert seen == [(1, 2), (3, 3)]
    assert passes.fold([4, 5], merge_all=sum) == 9


def test_row_reduction_gives_one_result_per_column_strip(rng):
    X = _matrix(rng, d=7)
    out = passes.row_reduction(
        da.from_array(X, chunks=(13, 3)), _stats, merge_code_stats, split_every=3
    )
    strips = dask.compute(*out.to_delayed().ravel().tolist())
    assert len(strips) == 3
    for got, cols in zip(strips, (slice(0, 3), slice(3, 6), slice(6, 7)), strict=True):
        _assert_stats(got, _reference(X[:, cols]))


def test_row_reduction_needs_one_merge():
    A = da.zeros((4, 2), chunks=2)
    with pytest.raises(TypeError, match="exactly one of merge and merge_all"):
        passes.row_reduction(A, _stats)


def test_reduce_rows_finish_runs_once_at_the_root(rng):
    X = _matrix(rng)
    graph = passes.reduce_rows(
        _as_dask(X, 7, False),
        _stats,
        merge_code_stats,
        lambda p: p["s"] / p["n"],
        split_every=2,
    )
    (mean,) = dask.compute(graph)
    np.testing.assert_allclose(mean, X.mean(axis=0), rtol=1e-12)


def test_reduce_rows_is_bitwise_stable(rng):
    X = _matrix(rng, n=400, d=5)
    runs = [
        dask.compute(
            passes.reduce_rows(
                _as_dask(X, 17, False), _stats, merge_code_stats, split_every=3
            )
        )[0]["g"]
        for _ in range(3)
    ]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


def _centred_product(x, P, mean, scale):
    """A strip's n × k share of ``(X − mean) P · scale``."""
    return (x - mean) @ P * scale


@pytest.mark.parametrize("split_every", [2, 3, 8])
@pytest.mark.parametrize("width", [1, 4, 7, 30])
def test_sum_over_strips_equals_the_dense_product(
    rng, width, split_every, raise_if_dask_computes
):
    """Every strip's share of ``(X − mean) P`` with its rows of ``P`` and ``mean``,
    summed over 1 to 30 strips in trees of fan-in 2, 3 and 8: the dense product,
    lazily, and bitwise the same on every run."""
    X, P, mean = (
        _matrix(rng, n=23, d=30),
        rng.standard_normal((30, 3)),
        rng.normal(size=30),
    )
    S = da.from_array(X, chunks=(-1, width))
    with raise_if_dask_computes(0):
        Z = passes.sum_over_strips(
            S,
            _centred_product,
            P,
            mean,
            k=3,
            dtype=np.float64,
            args=(2.0,),
            split_every=split_every,
        )
    assert Z.shape == (23, 3) and Z.chunks == ((23,), (3,))
    runs = [Z.compute() for _ in range(2)]
    np.testing.assert_allclose(runs[0], (X - mean) @ P * 2.0, rtol=0, atol=1e-12)
    assert np.array_equal(runs[0], runs[1])


def test_sum_over_strips_needs_whole_columns():
    with pytest.raises(
        ValueError, match="all rows of S in one chunk; got 2 row chunks"
    ):
        passes.sum_over_strips(
            da.zeros((4, 6), chunks=2),
            _centred_product,
            np.zeros((6, 1)),
            np.zeros(6),
            k=1,
            dtype=np.float64,
            args=(1.0,),
        )


# -- counting --------------------------------------------------------------------------
def test_compute_counts_on_the_active_counter_only(rng):
    A = _as_dask(_matrix(rng), 10, False)
    graph = passes.reduce_rows(A, _stats, merge_code_stats)
    passes.compute(graph, name="uncounted")  # no counter: computed, nothing counted
    with passes.counting("tool", planned=2, chunks=A.numblocks[0]) as counter:
        (got,) = passes.compute(graph, name="first")
        passes.persist(A.sum(axis=0), name="second")
    assert counter.n == 2 and counter.method == "tool"
    assert passes.active() is None
    _assert_stats(got, _reference(_matrix(np.random.default_rng(12345))))


def test_a_failed_pass_is_not_counted():
    with passes.counting("tool") as counter:
        with pytest.raises(ZeroDivisionError), counter.one_pass("boom"):
            raise ZeroDivisionError
    assert counter.n == 0


def test_nested_counting_for_the_same_estimator_keeps_the_counter():
    est = PCA(2)
    with passes.counting(est, chunks=5) as outer, passes.counting(est) as inner:
        assert inner is outer
        with passes.one_pass("x"):
            pass
    assert est.n_passes_ == 1


@pytest.mark.parametrize(
    "solver, power",
    [("covariance_eigh", 0), ("tsqr", 0), ("randomized", 0), ("randomized", 3)],
)
def test_every_counted_pass_reads_every_block_once(rng, solver, power):
    """The count recorded by the module equals the reads of the blocks (6 blocks) and
    the events name each pass, numbered 1..n_passes_."""
    X, counter = counted_dask(_matrix(rng, n=120, d=8), chunks=(20, 8))
    events = []
    with passes.listening(
        events.append
    ):  # Krylov blocks of 3: the basis grows by 3 a pass
        pca = PCA(
            3, svd_solver=solver, n_power_iter=power, n_oversamples=0, random_state=0
        ).fit(X)
    # block Krylov: n_power_iter + 2 products, or fewer once the basis spans all 8
    # features
    expected = {"covariance_eigh": 1, "tsqr": 2, "randomized": min(power + 2, 3)}[
        solver
    ]
    assert pca.n_passes_ == expected
    assert counter.reads == 6 * expected
    ends = [e for e in events if e.stage == "end"]
    starts = [e for e in events if e.stage == "start"]
    assert (
        [e.index for e in ends]
        == [e.index for e in starts]
        == list(range(1, expected + 1))
    )
    assert all(
        e.method == "PCA" and e.chunks_total == 6 and e.planned == expected
        for e in events
    )
    assert [e.chunks_done for e in starts] == [0] * expected
    assert [e.chunks_done for e in ends] == [6] * expected
    assert all(e.seconds >= 0 for e in ends)
    if solver == "randomized":  # the mean rides in the first product's pass
        assert ends[0].name == "moments+gram" and all(
            e.name == "gram" for e in ends[1:]
        )
    else:
        assert ends[0].name == "moments"


def test_pass_log_line_and_record(rng, caplog):
    X = da.from_array(_matrix(rng), chunks=(30, -1))
    with caplog.at_level(logging.INFO, logger="scalepca.linalg.passes"):
        PCA(2).fit(X)
    (rec,) = [r for r in caplog.records if r.name == "scalepca.linalg.passes"]
    assert rec.getMessage().startswith("PCA: pass 1 (moments) took ")
    assert rec.pass_event.index == 1 and rec.pass_event.name == "moments"
    assert rec.pass_event.chunks_total == 4


def test_transform_is_not_counted(rng):
    X = da.from_array(_matrix(rng), chunks=(30, -1))
    pca = PCA(2, svd_solver="randomized", random_state=0).fit(X)
    n = pca.n_passes_
    events = []
    with passes.listening(events.append):
        pca.transform(X).compute()
    assert pca.n_passes_ == n and events == []


def test_listener_is_removed_after_listening():
    events = []
    with passes.listening(events.append), passes.counting("tool") as counter:
        counter.record("a", 0.1)
    with passes.counting("tool") as counter:
        counter.record("b", 0.1)
    assert [e.name for e in events] == ["a"]


def test_eof_tool_counts_its_one_pass(rng):
    X = _matrix(rng, n=60, d=5)
    model = PCA(2).fit(da.from_array(X, chunks=(20, -1)))
    events = []
    with passes.listening(events.append):
        eofs_as_correlation(model, da.from_array(X, chunks=(20, -1)))
    assert [
        (e.method, e.stage, e.index, e.planned, e.chunks_total) for e in events
    ] == [
        ("eofs_as_correlation", "start", 1, 1, 3),
        ("eofs_as_correlation", "end", 1, 1, 3),
    ]


def test_a_pass_s_factor_travels_scattered_not_in_the_graph():
    """On a distributed client the d × l block of a Krylov pass is scattered to the
    workers once (:func:`passes.shared`), not carried in the pass's graph: no "large
    graph" warning at d = 100,000 (a 12 MB block), and the fit is the one of the
    local scheduler."""
    import warnings

    from distributed import Client, LocalCluster

    # made on the workers: an in-memory array would travel in the graph itself
    X = da.random.default_rng(0).standard_normal((40, 100_000), chunks=(10, -1))
    ref = PCA(5, svd_solver="randomized", random_state=0).fit(X)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = PCA(5, svd_solver="randomized", random_state=0).fit(X)
        assert not [w for w in caught if "large graph" in str(w.message)]
        assert isinstance(passes.shared(np.ones(3)), __import__("distributed").Future)
    assert not isinstance(passes.shared(np.ones(3)), __import__("distributed").Future)
    assert m.n_passes_ == ref.n_passes_
    np.testing.assert_allclose(
        m.explained_variance_, ref.explained_variance_, rtol=1e-12
    )
