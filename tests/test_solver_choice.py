"""``svd_solver="auto"`` chooses by predicted cost, in one place (issue 47 item 1).

The cost model orders the solvers as measured on the benchmark shapes
(``benchmarks/solver_auto.py``), deterministically; every spectral estimator resolves
``"auto"`` through :func:`scalepca.solvers.choice.resolve` and records the choice in
``solver_`` (PPCA's closed form: ``svd_solver_``).
"""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import scalepca
from scalepca.datasets.genotypes import make_genotypes, write_bed
from scalepca.models.pca import spectral_problem
from scalepca.solvers import choice
from scalepca.solvers.choice import REGISTRY, Problem, choose, predicted_seconds

#: the benchmark shapes (benchmarks/solver_auto.py) and the solver measured fastest
BENCHMARK_SHAPES = {
    "tall dense": (Problem(200_000, 100, 10, blocks=8), "covariance_eigh"),
    "wide sparse counts": (
        Problem(5_000, 50_000, 10, itemsize=4, sparse=True, density=0.05, blocks=4),
        "randomized",
    ),
    "genotypes 4,000 × 20,000": (
        Problem(4_000, 20_000, 10, itemsize=4, source="bed", genotype=True, blocks=4),
        "randomized",
    ),
    "genotypes 50,000 × 20,000": (
        Problem(50_000, 20_000, 10, itemsize=4, source="bed", genotype=True, blocks=40),
        "randomized",
    ),
}


@pytest.mark.parametrize("name", list(BENCHMARK_SHAPES))
def test_auto_takes_the_cheapest_on_the_benchmark_shapes(name):
    problem, fastest = BENCHMARK_SHAPES[name]
    picked = choose(problem)
    assert picked.solver == fastest
    assert picked.seconds[fastest] == min(picked.seconds.values())
    assert choose(problem) == picked  # deterministic


def test_genotypes_at_4000_by_20000_are_not_the_snapshot_method():
    """The snapshot method makes 2 passes but n²d flops: at 4,000 × 20,000 genotypes
    it was 4.3× slower than block Krylov, which auto passed over when it chose by
    passes."""
    problem = BENCHMARK_SHAPES["genotypes 4,000 × 20,000"][0]
    assert REGISTRY["snapshot"].passes(problem) < REGISTRY["randomized"].passes(problem)
    assert predicted_seconds("snapshot", problem) > 3 * predicted_seconds(
        "randomized", problem
    )


def test_the_cost_grows_with_what_each_solver_spends():
    small, big = Problem(10_000, 1_000, 10), Problem(10_000, 2_000, 10)
    for name in REGISTRY:
        assert predicted_seconds(name, big) > predicted_seconds(name, small)
    # the covariance solver's Gram grows with d², block Krylov's products with d
    cov = predicted_seconds("covariance_eigh", big) / predicted_seconds(
        "covariance_eigh", small
    )
    krylov = predicted_seconds("randomized", big) / predicted_seconds(
        "randomized", small
    )
    assert cov > krylov


def test_what_a_fit_asks_limits_the_candidates():
    # the full spectrum: no partial solver while one that gives it runs
    assert not REGISTRY[choose(Problem(1_000, 3_000, None)).solver].partial
    # partial_fit: the solver whose moments merge
    assert choose(Problem(500_000, 4_000, 5, updates=True)).solver == "covariance_eigh"
    # sparse blocks: no QR of them; sparse genotypes: only the wide solvers
    assert all(
        choose(Problem(n, 50, 5, sparse=True)).solver != "tsqr"
        for n in (100, 10_000, 1_000_000)
    )
    geno = choose(Problem(2_000, 1_000, 5, sparse=True, genotype=True))
    assert REGISTRY[geno.solver].wide
    # sketch (one pass, an estimate of its error) is never auto's
    assert all("sketch" not in choose(p).seconds for p, _ in BENCHMARK_SHAPES.values())


def test_a_need_no_solver_meets_is_named():
    """Past both Gram limits no solver gives the full spectrum: the cheapest that runs
    is chosen, and the reason says what it lacks (the fit's refusal quotes it)."""
    picked = choose(Problem(10_000, 10_000, None))
    assert picked.solver == "randomized"
    assert "none that runs gives every eigenvalue" in picked.why


def _fitted_choice(est, X):
    arr = X if isinstance(X, da.Array) else da.asarray(X)
    p = est._check_parameters(*arr.shape, arr)
    return choose(spectral_problem(p, *arr.shape, arr)).solver


@pytest.mark.parametrize(
    "make",
    [
        lambda: scalepca.PCA(3, random_state=0),
        lambda: scalepca.PPCA(3, random_state=0),
        lambda: scalepca.PCA(3, random_state=0, standardize=True),
    ],
)
@pytest.mark.parametrize("shape", [(400, 30), (40, 5_000)])
def test_every_spectral_estimator_records_the_one_choice(make, shape):
    X = da.from_array(np.random.default_rng(0).standard_normal(shape), chunks=(100, -1))
    est = make().fit(X)
    ran = est.svd_solver_ if isinstance(est, scalepca.PPCA) else est.solver_
    assert ran == _fitted_choice(make(), X)
    assert ran == ("covariance_eigh" if shape[1] < 4096 else "snapshot")


def test_sparse_input_resolves_through_the_choice():
    X = sp.random(600, 80, density=0.1, format="csr", random_state=0)
    est = scalepca.PCA(4, random_state=0).fit(X)
    assert est.solver_ == "covariance_eigh"
    assert est.n_passes_ == REGISTRY["covariance_eigh"].passes(Problem(600, 80, 4))


@pytest.fixture(scope="module")
def bed_path(tmp_path_factory):
    g = make_genotypes(
        120,
        600,
        n_populations=3,
        fst=0.1,
        missing=0.01,
        seed=0,
        chunk_snps=200,
        dtype="int8",
    )
    return write_bed(g, tmp_path_factory.mktemp("bed") / "g.bed")


def test_a_bed_is_costed_as_a_bed(bed_path):
    A = scalepca.open_matrix(bed_path)
    est = scalepca.PCA(5, standardize="genotype", random_state=0)
    p = est._check_parameters(*A.shape, A.data)
    problem = spectral_problem(p, *A.shape, A.data)
    assert problem.source == "bed" and problem.genotype
    est.fit(A)
    assert est.solver_ == choose(problem).solver
    assert est.n_passes_ == REGISTRY[est.solver_].passes(problem)


def test_genotype_fits_at_4000_by_20000_choose_block_krylov():
    """The shape of the report: the lazy .bed matrix's metadata (no data read)."""
    n, d = 4_000, 20_000
    X = da.zeros((n, d), chunks=(1_000, -1), dtype=np.float32)
    est = scalepca.PCA(10, standardize="genotype")
    p = est._check_parameters(n, d, X)
    for source in ("memory", "bed"):
        problem = dataclasses.replace(spectral_problem(p, n, d, X), source=source)
        assert choose(problem).solver == "randomized"
    assert est._solver_choice(n, d, X).solver == "randomized"


def test_thresholds_are_read_where_the_choice_is_made(monkeypatch):
    monkeypatch.setattr(choice, "AUTO_MAX_GRAM_FEATURES", 10)
    assert choose(Problem(100_000, 20, 2)).solver != "covariance_eigh"
