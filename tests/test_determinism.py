"""Determinism: the same ``random_state`` gives the same fit on 1 or 2 workers, run
after run, and for different chunkings of the same matrix — for every estimator, to
stated tolerances.

Tolerances (relative to the largest entry of each fitted attribute, see
``support.compare.max_rel_diff``):

* same chunking, 1 vs 2 workers, or a second run: ``Case.rtol_same`` (1e-10 for one-pass
  methods; iterative ones 1e-9/1e-8). The task graph is identical, so only the order in
  which a tree reduction merges two partial results could differ; random numbers are
  drawn from children of the seed sequence indexed by block or iteration, never by
  worker.
* different chunkings: ``Case.rtol_chunks`` with the reason in ``Case.chunks_note`` —
  another reduction tree changes rounding, and randomized methods draw per-block probe
  matrices.

Plus a hypothesis property test: PCA and PPCA (closed form) are invariant to how the
rows and features of small random matrices are split into chunks.
"""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scalepca

from .support.compare import assert_same_fit, max_rel_diff
from .support.reliability import ESTIMATORS, ProcessCluster, summary

#: chunkings compared per estimator: row chunk sizes (2-D blocks for RobustPCA)
CHUNKINGS = {
    "default": [50, 37, 400],
    "SparsePCA": [50, 25, 100],  # all divide batch_size=100: identical minibatches
    "RobustPCA": [(40, 40), (60, 30), (120, 120)],
}


def _chunks(case, spec):
    d = case.X().shape[1]
    if case.two_d_blocks:
        return spec
    return (spec, d)


def _fit(case, X, **over):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of capped iterations
        return summary(case.make(**over).fit(X))


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """Two real clusters on loopback, each a ``dask scheduler`` process with
    ``dask worker`` processes (one thread each, BLAS on one thread): one worker, and
    two. Separate processes mean every block and partial result is serialised between
    them, as on a real cluster."""
    with (
        ProcessCluster(1, workdir=tmp_path_factory.mktemp("one")) as one,
        ProcessCluster(2, workdir=tmp_path_factory.mktemp("two")) as two,
    ):
        yield {1: one, 2: two}


@pytest.mark.distributed
@pytest.mark.parametrize(
    "case",
    [
        # iterative fits make one compute per iteration: on a cluster they are the slow
        # ones
        pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.iterative else [])
        for c in ESTIMATORS
    ],
)
def test_same_result_on_one_or_two_workers(case, clusters):
    X = da.from_array(
        case.X(),
        chunks=_chunks(case, CHUNKINGS.get(case.name, CHUNKINGS["default"])[0]),
    )
    fits = {}
    for n, cluster in clusters.items():
        with cluster.client(n) as client:
            assert len(client.scheduler_info()["workers"]) == n
            fits[n] = _fit(case, X)
            if n == 2:
                fits["again"] = _fit(case, X)
    assert_same_fit(fits[1], fits[2], case.rtol_same, f"{case.name}: 1 vs 2 workers")
    assert_same_fit(fits[2], fits["again"], case.rtol_same, f"{case.name}: run to run")


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in ESTIMATORS])
def test_same_result_for_other_chunkings(case):
    specs = CHUNKINGS.get(case.name, CHUNKINGS["default"])
    Xn = case.X()
    with dask.config.set(scheduler="synchronous"):
        fits = [_fit(case, da.from_array(Xn, chunks=_chunks(case, s))) for s in specs]
    for s, f in zip(specs[1:], fits[1:], strict=True):
        d = max_rel_diff(fits[0], f)
        assert d <= case.rtol_chunks, (
            f"{case.name}: chunks {specs[0]} vs {s} differ by {d:.3g}, tolerance "
            f"{case.rtol_chunks:g} ({case.chunks_note})"
        )


# -- hypothesis: PCA / PPCA chunking invariance ----------------------------------------
def _splits(draw, total, max_parts):
    """Random composition of ``total`` into at most ``max_parts`` positive chunk
    sizes."""
    parts = draw(st.integers(1, min(total, max_parts)))
    cuts = (
        sorted(
            draw(
                st.lists(
                    st.integers(1, total - 1),
                    min_size=parts - 1,
                    max_size=parts - 1,
                    unique=True,
                )
            )
        )
        if parts > 1
        else []
    )
    bounds = [0, *cuts, total]
    return tuple(b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True))


@st.composite
def chunked_matrices(draw):
    n = draw(st.integers(3, 40))
    d = draw(st.integers(2, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    offset = draw(st.sampled_from([0.0, 5.0, -1e3]))
    X = rng.standard_normal((n, d)) * rng.uniform(0.2, 3.0, d) * scale + offset
    rows = _splits(draw, n, 6)
    cols = _splits(draw, d, 3)
    return X, rows, cols


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=chunked_matrices(), ppca=st.booleans())
def test_property_chunking_invariance(data, ppca):
    """The fitted covariance model is the same for any row/feature chunking.

    Compared through quantities that do not depend on how a degenerate eigenspace is
    rotated: eigenvalues, the mean, and the low-rank covariance ``Vᵀ diag(λ) V`` (for
    PPCA ``W Wᵀ`` and σ²). Tolerance 1e-9 of the total variance: the one-pass moments
    merge the same sums in another order (relative rounding ~1e-15 × number of
    merges), and eigh keeps that scale; the centring is exact to rounding even with
    offsets 10⁶ × the spread... up to 1e3 here.
    """
    X, rows, cols = data
    n, d = X.shape
    k = max(1, min(n, d) - 1)
    cls = scalepca.PPCA if ppca else scalepca.PCA

    def fit(chunks):
        with dask.config.set(scheduler="synchronous"):
            return cls(k, svd_solver="covariance_eigh").fit(
                da.from_array(X, chunks=chunks)
            )

    a, b = fit((n, d)), fit((rows, cols))
    total = float(np.trace(np.cov(X, rowvar=False))) + 1e-300
    tol = 1e-9 * total
    np.testing.assert_allclose(
        b.explained_variance_, a.explained_variance_, rtol=0, atol=tol
    )
    np.testing.assert_allclose(
        b.mean_, a.mean_, rtol=1e-12, atol=1e-12 * (np.abs(X).max() + 1)
    )
    if ppca:
        np.testing.assert_allclose(b.W_ @ b.W_.T, a.W_ @ a.W_.T, rtol=0, atol=tol)
        assert abs(b.noise_variance_ - a.noise_variance_) <= tol
    else:
        cov_a = a.components_.T @ np.diag(a.explained_variance_) @ a.components_
        cov_b = b.components_.T @ np.diag(b.explained_variance_) @ b.components_
        np.testing.assert_allclose(cov_b, cov_a, rtol=0, atol=tol)
