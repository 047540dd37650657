"""The solvers of the spectral fits, their costs, and the one choice ``"auto"`` makes.

Each solver of PCA and PPCA's closed form is one line of :data:`REGISTRY`: the passes
it reads the data, the flops it spends in the workers and on the client, what it needs
(dense blocks, memory for a d × d or n × n matrix) and what it gives (every eigenpair,
or the leading ones). :func:`choose` predicts the seconds of every solver that can run
on a :class:`Problem` and returns the cheapest::

    seconds = passes × (PASS_SECONDS + blocks × TASK_SECONDS + read of the data)
              + worker flops / rate + client eigh

The rates are this machine's, measured by ``python benchmarks/solver_auto.py --probe``
(see ``docs/benchmarks.md``); only their ratios matter to the choice.

The same model, pass by pass and on a cluster of a given size (:class:`Rates`,
:class:`Cluster`), is what ``scalepca plan`` prints before a job: :func:`pass_costs`
gives each pass's tasks, bytes read, bytes moved between workers and seconds, and
:func:`peak_worker_bytes` a worker's peak memory; :func:`predicted_seconds` is their
sum on the machine the constants describe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple

from ..linalg.kernels import lanczos_top, subspace_top
from . import covariance, randomized, sketch, snapshot, tsqr

#: seconds of one pass's round trip (a ``compute`` of a one-block graph)
PASS_SECONDS = 0.037
#: seconds of each task of a pass beyond the first
TASK_SECONDS = 0.013
#: bytes a pass reads per second from blocks held in memory
READ_BYTES_PER_SECOND = 1.0e9
#: seconds a pass spends per entry decoding a PLINK ``.bed`` (2-bit codes to floats)
BED_SECONDS_PER_ENTRY = 3.5e-8
#: flops per second of dense block products (BLAS-3, the two workers together)
DENSE_FLOPS_PER_SECOND = 1.8e10
#: flops per second of CSR block times dense matrix products
SPARSE_FLOPS_PER_SECOND = 5.2e8
#: flops per second of TSQR's blockwise Householder QR (R factors stacked, reduced)
QR_FLOPS_PER_SECOND = 4.0e8
#: seconds per m³ of a dense symmetric eigendecomposition of order m on the client
EIGH_SECONDS_PER_CUBE = 9.1e-10
#: the cores the worker rates above were measured with (2 workers × 1 thread)
RATE_CORES = 2
#: bytes per second between two workers (a 1 Gbit/s link; ``plan --bandwidth``)
NETWORK_BYTES_PER_SECOND = 1.25e8
#: bytes of values per second read from a zarr store's files and decoded (Blosc-LZ4,
#: the two workers together)
DECODE_BYTES_PER_SECOND = 8.0e8
#: the fan-in of the tree reductions (``split_every`` of :mod:`scalepca.linalg.passes`)
SPLIT_EVERY = 8

#: the largest d × d Gram ``"auto"`` builds (128 MiB in float64), on each worker too
AUTO_MAX_GRAM_FEATURES = 4096
#: the largest n × n sample Gram ``"auto"`` builds (the snapshot method)
AUTO_MAX_SNAPSHOT_SAMPLES = 4096

#: a CSR input's share of stored entries when its reader does not say (single-cell
#: counts and bag-of-words matrices hold 1–10 %)
SPARSE_DENSITY = 0.05


@dataclasses.dataclass(frozen=True)
class Problem:
    """What the choice reads of a fit: the shape, the blocks and the parameters.

    ``k``: components asked (None: every eigenpair, to choose k from the spectrum);
    ``density``: the share of stored entries of sparse blocks; ``strips``: every block
    holds all rows (the wide solvers read column strips); ``source``: ``"memory"`` or
    ``"bed"`` (what one read of an entry costs); ``genotype``: the allele-frequency
    standardisation (one more pass for the solvers that need the frequencies first);
    ``split``: several column chunks (the solvers of whole rows regroup them first, an
    all-to-all rechunk costed as one more read); ``updates``: only a solver
    ``partial_fit`` can update; ``replicates``: BootstrapEOF's B (one spectrum each
    beside the fit's)."""

    n: int
    d: int
    k: int | None = None
    itemsize: int = 8
    sparse: bool = False
    density: float | None = None
    blocks: int = 1
    strips: bool = False
    source: str = "memory"
    genotype: bool = False
    split: bool = False
    n_oversamples: int = 10
    n_power_iter: int = 4
    updates: bool = False
    replicates: int = 0

    @property
    def stored(self) -> float:
        """Entries stored (all of them when dense)."""
        share = (self.density or SPARSE_DENSITY) if self.sparse else 1.0
        return float(self.n) * self.d * share

    @property
    def width(self) -> int:
        """Columns of the block a Krylov product multiplies (k + oversamples)."""
        k = min(self.n, self.d) if self.k is None else self.k
        return max(1, min(k + self.n_oversamples, self.n, self.d))


class Solver(NamedTuple):
    """One solver's cost model and needs. ``passes``, ``flops`` (of the products with
    the data's blocks), ``basis`` (dense flops on matrices of n or d rows beside them)
    and ``cube`` (the order of the client's eigendecomposition) of a :class:`Problem`;
    ``fits``: whether its matrices fit in memory; ``partial``: leading eigenpairs only;
    ``dense``: dense blocks only; ``wide``: reads 2-D blocks as they are (the others
    read whole rows, and standardise genotypes only on dense blocks); ``auto``: a
    candidate of ``"auto"``; ``updates``: ``partial_fit`` merges its moments;
    ``partial_bytes``: the partial one task of a pass sends up the tree;
    ``factor_bytes``: the client's matrix each worker receives per pass (scattered
    once, see :func:`scalepca.linalg.passes.shared`); ``kernel``: what its flops
    are, ``"gram"`` (a block's Gram) or ``"product"`` (a block times a thin matrix),
    priced at the rate of :class:`Rates` for that kernel; ``copies``: the blocks'
    worth of memory a task holds at its peak (the block read and its working
    copies).
    ``run``: the module that fits it (``start`` and ``finish``, see :mod:`.wide`);
    ``once``: it reads the data once (a missing entry cannot be set to
    a centre known only after that read)."""

    passes: Callable[[Problem], int]
    flops: Callable[[Problem], float]
    cube: Callable[[Problem], int]
    basis: Callable[[Problem], float] = lambda p: 0.0
    fits: Callable[[Problem], bool] = lambda p: True
    partial_bytes: Callable[[Problem], float] = lambda p: 8.0 * p.d * p.d
    factor_bytes: Callable[[Problem], float] = lambda p: 0.0
    kernel: str = "gram"
    copies: float = 2.0
    partial: bool = False
    dense: bool = False
    wide: bool = False
    auto: bool = True
    updates: bool = False
    run: ModuleType | None = None
    once: bool = False


def krylov_passes(p: Problem) -> int:
    """Block Krylov's passes: at most ``n_power_iter + 2`` products, fewer once the
    basis spans the operator's space (d; on column strips the n × n sample Gram, plus
    one pass for the axes)."""
    side = _side(p)
    products = min(p.n_power_iter + 2, -(-side // p.width))
    return products + 1 if p.strips else products


def _side(p: Problem) -> int:
    """The order of the operator Krylov multiplies: d, or n on column strips."""
    return p.n if p.strips else p.d


def _product_flops(p: Problem, width: int) -> float:
    """Flops of ``Xᵀ(X V)`` for a block ``V`` of ``width`` columns."""
    return 4.0 * p.stored * width


def _gram_flops(p: Problem, side: int, other: int) -> float:
    """Flops of a Gram of order ``side`` over ``other`` (sparse: per entry pair)."""
    if p.sparse:
        per = p.stored / other
        return 2.0 * other * per * per
    return 2.0 * other * float(side) ** 2


def _krylov_basis(p: Problem) -> float:
    """Flops of the full reorthogonalisation and Rayleigh–Ritz of the Krylov basis."""
    return 4.0 * _side(p) * float(krylov_passes(p) * p.width) ** 2


def _covariance_grams(p: Problem) -> float:
    """The d × d Grams the covariance pass sums: genotypes keep the count Gram and,
    for the missing calls, two products of their pattern (sums that merge by addition:
    one pass)."""
    if p.genotype:
        return 3.0
    return 1.0


def _covariance_flops(p: Problem) -> float:
    """The d × d Grams of :func:`_covariance_grams`."""
    return _covariance_grams(p) * _gram_flops(p, p.d, p.n)


#: every solver of the spectral fits, by the name ``svd_solver`` gives it
REGISTRY = {
    "covariance_eigh": Solver(
        passes=lambda p: 1,
        flops=_covariance_flops,
        cube=lambda p: p.d,
        fits=lambda p: p.d <= AUTO_MAX_GRAM_FEATURES,
        # sparse: the packed upper triangle
        partial_bytes=lambda p: (
            _covariance_grams(p) * (4.0 if p.sparse else 8.0) * p.d * p.d
        ),
        updates=True,
        run=covariance,
    ),
    "tsqr": Solver(
        passes=lambda p: 2,
        flops=lambda p: 0.0,
        basis=lambda p: (
            2.0
            * _gram_flops(p, p.d, p.n)
            * (DENSE_FLOPS_PER_SECOND / QR_FLOPS_PER_SECOND)
        ),
        cube=lambda p: p.d,
        fits=lambda p: p.d <= AUTO_MAX_GRAM_FEATURES,
        dense=True,
        run=tsqr,
    ),
    "randomized": Solver(
        passes=krylov_passes,
        flops=lambda p: krylov_passes(p) * _product_flops(p, p.width),
        cube=lambda p: krylov_passes(p) * p.width,
        basis=_krylov_basis,
        partial_bytes=lambda p: 8.0 * _side(p) * p.width,
        factor_bytes=lambda p: 8.0 * _side(p) * p.width,
        kernel="product",
        copies=3.0,  # the first pass's column moments centre a copy and square it
        partial=True,
        wide=True,
        run=randomized,
    ),
    "snapshot": Solver(
        passes=lambda p: 2,
        flops=lambda p: _gram_flops(p, p.n, p.d) + 2.0 * p.stored * p.width,
        cube=lambda p: p.n,
        fits=lambda p: p.n <= AUTO_MAX_SNAPSHOT_SAMPLES,
        partial_bytes=lambda p: 8.0 * p.n * p.n,
        factor_bytes=lambda p: 8.0 * p.n * p.width,
        wide=True,
        run=snapshot,
    ),
    # one pass, an estimate of its own error: never what "auto" promises (convergence)
    "sketch": Solver(
        passes=lambda p: 1,
        flops=lambda p: _product_flops(p, p.width),
        cube=lambda p: p.width,
        basis=lambda p: 4.0 * p.d * p.width**2,
        partial_bytes=lambda p: 8.0 * p.d * p.width,
        factor_bytes=lambda p: 8.0 * p.d * p.width,
        kernel="product",
        copies=3.0,  # the pass of Krylov's first: column moments, a centred square
        partial=True,
        wide=True,
        auto=False,
        run=sketch,
        once=True,
    ),
}


@dataclasses.dataclass(frozen=True)
class Rates:
    """The rates the model prices a pass with: the constants of this module by default,
    or those a probe measured on a machine (``scalepca plan`` measures them,
    :func:`scalepca.solvers.probe.probe`). The worker rates (read, decode, flops) are
    of ``cores`` cores together; a cluster of other size scales them (:class:`Cluster`).
    ``dense_flops_per_second`` and ``sparse_flops_per_second`` price a Gram of dense
    blocks and a product of CSR blocks; ``product_flops_per_second`` and
    ``sparse_gram_flops_per_second`` the other kernel of each (the constants price
    both kernels alike)."""

    pass_seconds: float = PASS_SECONDS
    task_seconds: float = TASK_SECONDS
    read_bytes_per_second: float = READ_BYTES_PER_SECOND
    bed_seconds_per_entry: float = BED_SECONDS_PER_ENTRY
    dense_flops_per_second: float = DENSE_FLOPS_PER_SECOND
    sparse_flops_per_second: float = SPARSE_FLOPS_PER_SECOND
    qr_flops_per_second: float = QR_FLOPS_PER_SECOND
    product_flops_per_second: float = DENSE_FLOPS_PER_SECOND
    sparse_gram_flops_per_second: float = SPARSE_FLOPS_PER_SECOND
    eigh_seconds_per_cube: float = EIGH_SECONDS_PER_CUBE
    decode_bytes_per_second: float = DECODE_BYTES_PER_SECOND
    network_bytes_per_second: float = NETWORK_BYTES_PER_SECOND
    cores: int = RATE_CORES


#: the rates of this module's constants
RATES = Rates()


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The cluster a pass runs on: ``workers`` × ``threads`` cores; ``hosts``: the
    machines they are spread over (1: every byte between workers stays on one machine,
    and costs no link); ``bandwidth``: bytes per second of a host's link (default: the
    rates'); ``store_bandwidth``: bytes per second of the data store's link, for a store
    the workers read over the network (an object store; None: read where they run)."""

    workers: int = 2
    threads: int = 1
    hosts: int = 1
    bandwidth: float | None = None
    store_bandwidth: float | None = None

    @property
    def cores(self) -> int:
        return max(1, self.workers * self.threads)


#: the cluster the constants were measured on
MEASURED_CLUSTER = Cluster()


class PassCost(NamedTuple):
    """One pass of a fit as the model sees it (see :func:`pass_costs`)."""

    name: str
    tasks: int
    bytes_read: float
    bytes_moved: float
    seconds: float


class FitPlan(NamedTuple):
    """What a spectral fit will do: the ``solver`` that runs, its ``problem``, and the
    ``tasks`` that read the data's blocks in each pass."""

    solver: str
    problem: Problem
    tasks: int


def decoded_bytes(p: Problem) -> float:
    """Bytes of the values a pass holds in memory (CSR: values and column indices)."""
    index = 4 if p.sparse else 0
    return p.stored * (p.itemsize + index)


def flop_rate(
    name: str, p: Problem, rates: Rates = RATES, table: dict | None = None
) -> float:
    """Flops per second of solver ``name``'s kernel (of ``table``, default
    :data:`REGISTRY`) on ``p``'s blocks."""
    product = (table or REGISTRY)[name].kernel == "product"
    if p.sparse and product:
        return rates.sparse_flops_per_second
    if p.sparse:
        return rates.sparse_gram_flops_per_second
    if product:
        return rates.product_flops_per_second
    return rates.dense_flops_per_second


def read_seconds(p: Problem, rates: Rates = RATES, scale: float = 1.0) -> float:
    """Seconds of one pass over the data, beyond its round trip, on ``scale`` times
    the cores the rates were measured with."""
    if p.source == "bed":
        return float(p.n) * p.d * rates.bed_seconds_per_entry / scale
    return decoded_bytes(p) / (rates.read_bytes_per_second * scale)


def tree_edges(tasks: int, split_every: int = SPLIT_EVERY) -> int:
    """The partials a tree reduction over ``tasks`` leaves sends, the root's to the
    client included: one per node of the tree."""
    edges, level = 0, max(int(tasks), 1)
    while level > 1:
        edges += level
        level = -(-level // split_every)
    return edges + 1


def pass_costs(
    name: str,
    p: Problem,
    *,
    rates: Rates = RATES,
    cluster: Cluster = MEASURED_CLUSTER,
    tasks: int | None = None,
    stored_bytes: float | None = None,
    table: dict | None = None,
) -> list[PassCost]:
    """The passes solver ``name`` makes on ``p``, each priced on ``cluster``.

    ``tasks``: the tasks that read the blocks in a pass (default ``p.blocks``);
    ``stored_bytes``: the bytes a pass reads from a store's chunk files, read and
    decoded at ``rates.decode_bytes_per_second`` (None: blocks held in memory). A pass
    costs its round trip, the scheduler's time per task, the read (and decode) of the
    data and its share of the solver's flops on the cluster's cores (in waves of one
    task per core), the
    client's work on the basis, the store's bytes over its link and the hosts' (a
    store read over the network), and its bytes moved between workers over the hosts'
    links: the partials up the tree of :data:`SPLIT_EVERY`, the client's factor to
    each worker, and the regrouping of split column chunks (a solver of whole rows on
    split data). Flops are spread evenly over the solver's passes. ``table``: the
    solvers ``name`` is one of (default :data:`REGISTRY`; :data:`TOOL_SOLVERS`).
    """
    s = (table or REGISTRY)[name]
    tasks = max(int(p.blocks if tasks is None else tasks), 1)
    # the workers' share of a pass runs in waves of one task per core: a core's rate
    # times the waves a core runs, over the tasks (1 / (cluster's cores / rates')
    # when the tasks outnumber the cores, the whole work on one core for one task)
    waves = -(-tasks // cluster.cores) * rates.cores / tasks
    n_passes = s.passes(p)
    compute = s.flops(p) * waves / flop_rate(name, p, rates, table)
    basis = s.basis(p) / rates.dense_flops_per_second  # the client's
    regroup = p.split and not s.wide
    # on one host nothing crosses a link: the bytes are counted, not priced
    crossing = 0.0 if cluster.hosts <= 1 else (cluster.hosts - 1) / cluster.hosts
    link = cluster.bandwidth or rates.network_bytes_per_second
    data = decoded_bytes(p)
    read = read_seconds(p, rates) * waves
    if stored_bytes is not None and p.source != "bed":
        read += data * waves / rates.decode_bytes_per_second
    fetched = data if stored_bytes is None else stored_bytes
    if cluster.store_bandwidth:  # through the store's link, then the hosts' links
        read += fetched / min(cluster.store_bandwidth, cluster.hosts * link)

    def priced(label: str, moved: float, work: float) -> PassCost:
        seconds = (
            rates.pass_seconds
            + (tasks - 1) * rates.task_seconds
            + read
            + work
            + moved * crossing / link
        )
        return PassCost(label, tasks, float(fetched), float(moved), seconds)

    out = []
    if regroup:  # the regrouping pass: a read, no flops
        out.append(priced("regroup", data * crossing, 0.0))
    moved = tree_edges(tasks) * s.partial_bytes(p)
    moved += cluster.workers * s.factor_bytes(p)
    for _ in range(n_passes):
        out.append(priced(name, moved, (compute + basis) / n_passes))
    return out


def peak_worker_bytes(
    name: str,
    p: Problem,
    *,
    cluster: Cluster = MEASURED_CLUSTER,
    tasks: int | None = None,
) -> float:
    """A worker's peak memory of a pass of solver ``name`` on ``p``: each thread holds
    one block read and its working copies (``Solver.copies`` blocks in all) and its
    partial; the worker also merges :data:`SPLIT_EVERY` partials and holds the
    client's factor."""
    s = REGISTRY[name]
    tasks = int(p.blocks if tasks is None else tasks)
    block = decoded_bytes(p) / max(tasks, 1)
    partial = s.partial_bytes(p)
    per_thread = s.copies * block + partial
    return cluster.threads * per_thread + SPLIT_EVERY * partial + s.factor_bytes(p)


def predicted_seconds(
    name: str,
    p: Problem,
    rates: Rates = RATES,
    cluster: Cluster = MEASURED_CLUSTER,
    table: dict | None = None,
) -> float:
    """The predicted seconds of solver ``name`` (of ``table``, default
    :data:`REGISTRY`) on ``p``: its passes (:func:`pass_costs`) and the client's
    eigendecomposition."""
    passes = pass_costs(name, p, rates=rates, cluster=cluster, table=table)
    cube = float((table or REGISTRY)[name].cube(p))
    return sum(c.seconds for c in passes) + rates.eigh_seconds_per_cube * cube**3


def _can_run(name: str, p: Problem) -> bool:
    s = REGISTRY[name]
    dense = s.dense or (p.genotype and not s.wide)
    return s.auto and s.fits(p) and not (dense and p.sparse)


class SolverChoice(NamedTuple):
    """``"auto"``'s solver, why, and the predicted seconds of every solver weighed."""

    solver: str
    why: str
    seconds: dict


def _needs(p: Problem) -> list[tuple[Callable[[str], bool], str]]:
    """What the fit asks of a solver, most binding first, in the words of a message."""
    gram = (
        f"(a d × d Gram up to {AUTO_MAX_GRAM_FEATURES} features, an n × n one up to "
        f"{AUTO_MAX_SNAPSHOT_SAMPLES} samples)"
    )
    out = []
    if p.updates:
        out.append(
            (
                lambda name: REGISTRY[name].updates,
                "what partial_fit updates (the d × d Gram of 'covariance_eigh', up to "
                f"{AUTO_MAX_GRAM_FEATURES} features)",
            )
        )
    if p.k is None:
        out.append(
            (lambda name: not REGISTRY[name].partial, f"every eigenvalue {gram}")
        )
    return out


def choose(p: Problem) -> SolverChoice:
    """The cheapest solver that runs on ``p`` and gives what it asks (see
    :class:`Problem`); when none both runs and gives it, the cheapest that runs, whose
    refusal then names it. Deterministic: ties go to the earlier solver of
    :data:`REGISTRY`."""
    runs = [name for name in REGISTRY if _can_run(name, p)]
    seconds = {name: predicted_seconds(name, p) for name in runs}
    pool, unmet = runs, []
    for need, words in _needs(p):
        kept = [name for name in pool if need(name)]
        if kept:
            pool = kept
        else:
            unmet.append(words)
    best = min(pool, key=lambda name: (seconds[name], runs.index(name)))
    others = sorted((seconds[name], name) for name in pool if name != best)
    why = f"predicted {seconds[best]:.3g} s"
    if others:
        why += ", against " + ", ".join(f"{name!r} {t:.3g} s" for t, name in others)
    if unmet:
        why += "; none that runs gives " + " or ".join(unmet)
    return SolverChoice(best, why, seconds)


def resolve(svd_solver: str, p: Problem) -> SolverChoice:
    """``svd_solver`` as it runs on ``p``: a named solver as it is, ``"auto"`` by
    :func:`choose`. The one place every spectral fit resolves ``"auto"``."""
    if svd_solver == "auto":
        return choose(p)
    return SolverChoice(svd_solver, "named", {})


def _bootstrap_gram_flops(p: Problem) -> float:
    """The sample Gram, then every replicate's EOFs ``Xcᵀ U Σ⁻¹`` in the second
    pass."""
    k = 1 if p.k is None else p.k
    return _gram_flops(p, p.n, p.d) + 2.0 * p.stored * k * (p.replicates + 1)


#: the solvers of the analysis tools whose ``"auto"`` the same model resolves: by
#: tool, the solvers of its ``solver`` parameter (spectra of B + 1 matrices: the
#: order of one, times (B + 1)^⅓; complex ones: 4 flops of each real one)
TOOL_SOLVERS = {
    "bootstrap": {
        "gram": Solver(
            passes=lambda p: 2,
            flops=_bootstrap_gram_flops,
            cube=lambda p: (p.replicates + 1) ** (1 / 3) * p.n,
            partial_bytes=lambda p: 8.0 * p.n * p.n,
            wide=True,
        ),
        "covariance": Solver(
            passes=lambda p: 1,
            flops=lambda p: (p.replicates + 1) * _gram_flops(p, p.d, p.n),
            cube=lambda p: (p.replicates + 1) ** (1 / 3) * p.d,
            partial_bytes=lambda p: 8.0 * (p.replicates + 1) * p.d * p.d,
        ),
    },
    "hilbert": {
        "gram": Solver(
            passes=lambda p: 2,
            flops=lambda p: 4.0 * (_gram_flops(p, p.n, p.d) + 2.0 * p.stored * p.n),
            cube=lambda p: 4 ** (1 / 3) * p.n,
            partial_bytes=lambda p: 16.0 * p.n * p.n,
            wide=True,
        ),
        "covariance": Solver(
            passes=lambda p: 2,
            flops=lambda p: 4.0 * (_gram_flops(p, p.d, p.n) + 2.0 * p.stored * p.d),
            cube=lambda p: 4 ** (1 / 3) * p.d,
            partial_bytes=lambda p: 16.0 * p.d * p.d,
        ),
    },
}


def resolve_tool(tool: str, solver: str, p: Problem) -> SolverChoice:
    """An analysis tool's ``solver`` as it runs on ``p``: a named one as it is,
    ``"auto"`` the one of :data:`TOOL_SOLVERS` ``[tool]`` that fits with the least
    predicted seconds (ties to the first)."""
    if solver != "auto":
        return SolverChoice(solver, "named", {})
    table = TOOL_SOLVERS[tool]
    runs = [name for name, s in table.items() if s.fits(p)] or list(table)
    seconds = {name: predicted_seconds(name, p, table=table) for name in runs}
    best = min(runs, key=lambda name: (seconds[name], runs.index(name)))
    return SolverChoice(best, f"predicted {seconds[best]:.3g} s", seconds)


def describe(svd_solver: str, choice: SolverChoice) -> str:
    """The solver that runs, in the parameter's words, for messages:
    ``"svd_solver='tsqr'"``, or for ``"auto"`` its choice and why."""
    if svd_solver != "auto":
        return f"svd_solver={svd_solver!r}"
    return f"svd_solver='auto' chooses {choice.solver!r} ({choice.why})"


def solver_passes(name: str, p: Problem) -> int:
    """The passes solver ``name`` plans on ``p`` (counted against ``n_passes_``)."""
    return REGISTRY[name].passes(p)


def check_blocks(name: str, sparse: bool) -> None:
    """Refuse, before any pass, a solver that cannot take sparse blocks."""
    if sparse and REGISTRY[name].dense:
        raise ValueError(
            f"svd_solver={name!r} needs dense blocks (QR factors of sparse blocks are "
            "dense); for sparse X use svd_solver='covariance_eigh' (one pass, d × d "
            "Gram) or 'randomized' (implicit centring, memory independent of d²)"
        )


def ppca_solver(solver: str, missing: str) -> str:
    """PPCA's ``solver`` resolved: ``"auto"`` is EM exactly when entries may be
    missing (only EM skips them), else the closed form, whose eigensolver
    :func:`choose` picks."""
    if solver == "auto":
        return "em" if missing == "em" else "closed_form"
    return solver


#: Kernel PCA's eigensolvers of the centred kernel held in memory, by ``eigen_solver``
KERNEL_EIGENSOLVERS = {"arpack": lanczos_top, "randomized": subspace_top}


def kernel_eigen_solver(eigen_solver: str) -> str:
    """Kernel PCA's ``eigen_solver`` resolved: ``"auto"`` is ARPACK on the kernel matrix
    held in memory (exact to its tolerance; the randomized one is an approximation)."""
    return "arpack" if eigen_solver == "auto" else eigen_solver
