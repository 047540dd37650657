"""Shared by the reliability tests (faults, bad input, determinism, interrupted writes)
and by ``benchmarks/faults.py``: the table of estimators with a small problem each,
result summaries to compare fits, a real ``dask scheduler`` + ``dask worker`` process
cluster on loopback, reads that stall until the test has injected its fault, and writer
processes that stop at a known point to be SIGKILLed there.

Every estimator is in :data:`ESTIMATORS`; an estimator that cannot be imported is an
error of the tests that use it, never a skip.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .processes import wait_or_kill

REPO = Path(__file__).resolve().parents[2]


# -- data ------------------------------------------------------------------------------
def low_rank(
    seed: int = 0, n: int = 400, d: int = 12, rank: int = 3, noise: float = 0.2
):
    """Low rank + isotropic noise with a non-zero mean; clear spectral gap after
    ``rank``."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, rank)) * np.linspace(6, 2, rank)
    B = np.linalg.qr(rng.standard_normal((d, rank)))[0].T
    return A @ B + 2.0 + noise * rng.standard_normal((n, d))


def with_missing(seed: int = 0, n: int = 400, d: int = 12, frac: float = 0.05):
    X = low_rank(seed, n, d)
    rng = np.random.default_rng(seed + 1)
    X[rng.random(X.shape) < frac] = np.nan
    return X


def low_rank_plus_sparse(
    seed: int = 0, n: int = 120, d: int = 120, rank: int = 4, frac: float = 0.05
):
    """The Candès–Li–Ma–Wright kind of problem: L0 (entries N(0, 1/n) factors) + ±1
    spikes."""
    rng = np.random.default_rng(seed)
    L0 = rng.normal(0, n**-0.5, (n, rank)) @ rng.normal(0, n**-0.5, (rank, d))
    S0 = np.where(rng.random((n, d)) < frac, rng.choice([-1.0, 1.0], (n, d)), 0.0)
    return L0 + S0


DATA = {"low_rank": low_rank, "missing": with_missing, "rpca": low_rank_plus_sparse}


# -- the estimator table ---------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One estimator configuration on a small problem.

    ``rtol_same`` is the tolerance between two fits that run the same graph (same
    chunking) on different workers / after a worker was killed: only the order in
    which partial sums are merged may differ, so results agree to a few ulps times
    the number of reductions; 1e-10 relative to the largest entry leaves a wide
    margin. ``rtol_chunks`` is the tolerance across chunkings (a different reduction
    tree; iterative methods amplify the rounding differences over their iterations),
    stated per estimator with its reason.
    """

    name: str
    module: str
    cls: str
    params: dict
    data: str = "low_rank"
    rtol_same: float = 1e-10
    rtol_chunks: float = 1e-12
    chunks_note: str = (
        "one-pass moments merged in a different tree: rounding only (measured "
    )
    "~1e-14)"
    two_d_blocks: bool = False  # fits on 2-D blocks (RobustPCA)
    has_n_components: bool = True
    iterative: bool = False
    checkpoint: bool = False
    tags: tuple = field(default=())

    @property
    def label(self) -> str:
        return self.name

    def estimator_class(self):
        return getattr(importlib.import_module(self.module), self.cls)

    def make(self, **over):
        return self.estimator_class()(**{**self.params, **over})

    def X(self, seed: int = 0) -> np.ndarray:
        return DATA[self.data](seed)

    def chunks(self, rows: int) -> tuple:
        X_shape = self.X().shape
        return (rows, rows) if self.two_d_blocks else (rows, X_shape[1])


ESTIMATORS = [
    Case(
        "PCA",
        "scalepca.models.pca",
        "PCA",
        {"n_components": 3, "svd_solver": "covariance_eigh"},
    ),
    Case(
        "PCA-randomized",
        "scalepca.models.pca",
        "PCA",
        {"n_components": 3, "svd_solver": "randomized", "random_state": 0},
        rtol_chunks=1e-10,
        chunks_note="probe matrix drawn per row block, so another chunking draws other probes; "
        "4 power iterations on an exactly rank-3 signal + small noise converge to "
        "rounding (measured 4e-14); 1e-10 leaves margin",
    ),
    Case("PPCA", "scalepca.models.ppca", "PPCA", {"n_components": 3}),
    Case(
        "PPCA-EM",
        "scalepca.models.ppca",
        "PPCA",
        {
            "n_components": 3,
            "solver": "em",
            "missing": "em",
            "max_iter": 40,
            "tol": 1e-10,
            "random_state": 0,
        },
        data="missing",
        iterative=True,
        checkpoint=True,
        rtol_same=1e-9,
        rtol_chunks=1e-10,
        chunks_note="40 EM iterations, each a reduction in another tree: rounding differences "
        "can grow with the iteration count (measured 2e-14)",
    ),
    Case(
        "KernelPCA",
        "scalepca.models.kernel_pca",
        "KernelPCA",
        {"n_components": 3, "n_features": 50, "random_state": 0},
        rtol_chunks=1e-12,
        chunks_note="landmarks drawn from random_state by row index, not per block; the PCA "
        "of the feature block is a one-pass reduction (measured 1e-15)",
    ),
    Case(
        "SparsePCA",
        "scalepca.models.sparse_pca",
        "SparsePCA",
        {
            "n_components": 3,
            "method": "minibatch",
            "alpha": 0.5,
            "max_iter": 5,
            "batch_size": 100,
            "random_state": 0,
        },
        iterative=True,
        checkpoint=True,
        rtol_same=1e-9,
        rtol_chunks=1e-10,
        chunks_note="minibatches are groups of >= batch_size rows: the chunkings compared "
        "divide batch_size, so the minibatches are the same rows (measured 1e-15)",
    ),
    Case(
        "SparsePCA-batch",
        "scalepca.models.sparse_pca",
        "SparsePCA",
        {
            "n_components": 3,
            "method": "batch",
            "alpha": 0.5,
            "max_iter": 20,
            "random_state": 0,
        },
        rtol_chunks=1e-10,  # iterates on the client only: one pass over the data
        chunks_note="alternation on the client from the one-pass covariance (measured 1e-15)",
    ),
    Case(
        "SparsePCA-elasticnet",
        "scalepca.models.sparse_pca",
        "SparsePCA",
        {"n_components": 3, "method": "elasticnet", "alpha": 0.5},
        rtol_chunks=1e-10,  # one-pass covariance, then the alternation on the client
        chunks_note="ZHT alternation on the client from the one-pass covariance",
    ),
    Case(
        "RobustPCA",
        "scalepca.models.robust_pca",
        "RobustPCA",
        {"random_state": 0, "max_iter": 60, "tol": 1e-6, "storage": "memory"},
        data="rpca",
        two_d_blocks=True,
        has_n_components=False,
        iterative=True,
        checkpoint=True,
        rtol_same=1e-8,
        rtol_chunks=1e-9,
        chunks_note="probes drawn per iteration from random_state, but the blocked randomized "
        "SVD and ~14 ALM iterations accumulate the rounding of another block "
        "layout (measured 7e-15); 1e-9 leaves margin for the soft threshold "
        "flipping an entry at its edge",
    ),
]

BY_NAME = {c.name: c for c in ESTIMATORS}

#: the estimator classes the issue names, each must appear in every table
ISSUE_ESTIMATORS = ("PCA", "PPCA", "PPCA-EM", "KernelPCA", "SparsePCA", "RobustPCA")


# -- comparing fits --------------------------------------------------------------------
SUMMARY_ATTRS = (
    "components_",
    "explained_variance_",
    "mean_",
    "noise_variance_",
    "W_",
    "singular_values_",
    "eigenvalues_",
    "U_",
    "n_components_",
    "rank_",
    "nnz_",
    "n_iter_",
)


def summary(est) -> dict:
    """The concrete fitted values that define a fit (lazy arrays excluded)."""
    out = {}
    for name in SUMMARY_ATTRS:
        value = getattr(est, name, None)
        if value is None:
            continue
        if isinstance(value, (int, float, np.integer, np.floating, np.ndarray)):
            out[name] = np.asarray(value, dtype=np.float64)
    return out


# -- a real process cluster on loopback ------------------------------------------------
def _dask_exe() -> str:
    exe = Path(sys.executable).with_name("dask")
    return str(exe) if exe.exists() else "dask"


def start_scheduler(
    popen, scheduler_file: Path, *extra: str, timeout: float = 120.0
) -> tuple[subprocess.Popen, str]:
    """Start ``dask scheduler`` on 127.0.0.1 with ``popen(argv)``; return the process
    and its address once it listens.

    The scheduler binds a free port itself (``--port 0``) and writes its address to
    ``scheduler_file`` when it listens; a port chosen here and passed to it could be
    taken by another process (another test's connection) before the scheduler binds
    it. ``timeout`` only bounds a broken start.
    """
    import json

    proc = popen(
        [
            _dask_exe(),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--scheduler-file",
            str(scheduler_file),
            *extra,
        ]
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                return proc, json.loads(scheduler_file.read_text())["address"]
            except (
                FileNotFoundError,
                ValueError,
                KeyError,
            ):  # not (completely) written yet
                pass
            if proc.poll() is not None:
                raise RuntimeError(
                    f"dask scheduler exited ({proc.returncode}) before listening"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"dask scheduler did not write {scheduler_file} within {timeout} s"
                )
            time.sleep(0.05)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        raise


class ProcessCluster:
    """``dask scheduler`` and ``dask worker`` processes on 127.0.0.1 (no nanny: a
    SIGKILLed worker stays dead, as a preempted node would).

    Workers import the test helpers (pickled by reference), so they run with the
    repository on ``PYTHONPATH``; BLAS is held to one thread so workers do not
    compete for the 2 cores.
    """

    def __init__(
        self,
        n_workers: int = 2,
        *,
        memory_limit: str = "1GiB",
        workdir=None,
        nthreads: int = 1,
        nanny: bool = False,
    ):
        import uuid

        self.tag = uuid.uuid4().hex[
            :8
        ]  # names this cluster's files in a shared workdir
        self.memory_limit = memory_limit
        self.nthreads = nthreads
        # with a nanny (as `dask worker` runs by default) a killed worker process is
        # replaced; its Popen here is then the nanny's
        self.nanny = nanny
        self.workdir = Path(workdir or os.environ.get("TMPDIR", "/tmp"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), os.environ.get("PYTHONPATH", "")]
            ).rstrip(os.pathsep),
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "DASK_DISTRIBUTED__WORKER__DAEMON": "False",
        }
        self.scheduler = None
        self.workers: dict[str, subprocess.Popen] = {}
        self._n = 0
        self._logs = []
        try:
            self.scheduler, self.address = start_scheduler(
                lambda argv: self._popen(argv, "scheduler"),
                self.workdir / f"scheduler-{self.tag}.json",
                "--no-dashboard",
            )
            for _ in range(n_workers):
                self.add_worker()
        except BaseException:
            self.close()
            raise

    def _popen(self, args, name):
        log = open(self.workdir / f"{name}-{self.tag}.log", "wb")  # noqa: SIM115
        self._logs.append(log)
        return subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=str(self.workdir),
            start_new_session=True,
        )

    def add_worker(self) -> str:
        name = f"w{self._n}"
        self._n += 1
        local = self.workdir / f"dask-{self.tag}-{name}"
        self.workers[name] = self._popen(
            [
                _dask_exe(),
                "worker",
                self.address,
                "--nthreads",
                str(self.nthreads),
                "--memory-limit",
                str(self.memory_limit),
                "--nanny" if self.nanny else "--no-nanny",
                "--no-dashboard",
                "--name",
                name,
                "--local-directory",
                str(local),
                "--death-timeout",
                "60",
            ],
            name,
        )
        return name

    def client(self, n_workers: int | None = None, timeout: float = 60):
        from distributed import Client

        client = Client(self.address, timeout=timeout, set_as_default=True)
        want = len(self.alive_workers()) if n_workers is None else n_workers
        client.wait_for_workers(want, timeout=timeout)
        return client

    def alive_workers(self) -> list[str]:
        return [n for n, p in self.workers.items() if p.poll() is None]

    def full_strength(self, client, n: int, timeout: float = 60.0) -> None:
        """Replace killed workers until ``n`` are alive, and wait until the scheduler
        lists exactly those (it may still list a killed worker for a moment)."""
        while len(self.alive_workers()) < n:
            self.add_worker()
        client.wait_for_workers(n, timeout=timeout)
        deadline = time.monotonic() + timeout
        while len(client.scheduler_info(n_workers=-1)["workers"]) != n:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the scheduler still lists dead workers after {timeout} s"
                )
            time.sleep(0.1)

    def kill_worker(self, name: str) -> int:
        proc = self.workers[name]
        os.kill(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=30)

    def kill_all(self):
        """The whole cluster goes away at once (scheduler and workers SIGKILLed)."""
        for proc in [self.scheduler, *self.workers.values()]:
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        for proc in [self.scheduler, *self.workers.values()]:
            if proc is not None:
                proc.wait(timeout=30)

    def close(self):
        for proc in [*self.workers.values(), self.scheduler]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in [*self.workers.values(), self.scheduler]:
            if proc is not None:
                wait_or_kill(proc, 10)
        for log in self._logs:
            log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: per worker process: how many blocks each gate has let through on this worker
_GATE_COUNTS: dict[str, int] = {}


def commits(path) -> list[str]:
    """The complete commits (``state_*``) of the checkpoint store at ``path``."""
    if not os.path.isdir(path):
        return []
    return [p for p in os.listdir(path) if p.startswith("state_") and ".tmp-" not in p]


def gated_identity(
    block, gate: str, free: int, timeout: float = 120.0, after_commit: str | None = None
):
    """A block read that each worker runs ``free`` times freely; from then on it waits
    for the distributed ``Event(gate)`` (set by the test once it has killed what it
    kills). With ``after_commit`` (a checkpoint store on the shared file system) it
    waits only once that store holds a complete commit.

    A fit reading through the gate therefore stalls with every worker executing a fit task and
    holding the results of its first ``free`` reads, until the test acts: the test
    waits for that state instead of racing the fit with sleeps. ``timeout`` only
    bounds a broken test.
    """
    seen = _GATE_COUNTS.get(gate, 0)
    _GATE_COUNTS[gate] = seen + 1
    if seen >= free and (after_commit is None or commits(after_commit)):
        from distributed import Event

        Event(gate).wait(timeout)
    return block


def gated(arr, gate: str, free: int, after_commit: str | None = None):
    """``arr`` (a dask array) read through :func:`gated_identity`."""
    return arr.map_blocks(
        gated_identity,
        gate=gate,
        free=free,
        after_commit=after_commit,
        dtype=arr.dtype,
        meta=np.empty((0,) * arr.ndim, dtype=arr.dtype),
    )


def new_gate() -> str:
    import uuid

    return f"gate-{uuid.uuid4().hex}"


def open_gate(client, gate: str) -> None:
    from distributed import Event

    Event(gate, client=client).set()


def wait_until_busy(
    client,
    workers,
    *,
    min_results: int = 0,
    timeout: float = 120.0,
    stop=None,
    need_all: bool = True,
) -> dict[str, int] | None:
    """Block until the scheduler reports each worker (by name; any one of them if not
    ``need_all``) executing a task while holding at least ``min_results`` task results;
    return those workers' names and the results each holds (None if the ``stop`` event
    was set first).

    Meant for fits stalled by :func:`gated` reads: that state then lasts until the
    gate opens, so this sees it whatever the machine's load.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stop is not None and stop.is_set():
            return None
        info = client.scheduler_info(n_workers=-1)["workers"]
        addrs = {v.get("name"): a for a, v in info.items()}
        held_by, busy_on = client.has_what(), client.processing()
        ready = {
            w: len(held_by.get(addrs[w], ()))
            for w in workers
            if w in addrs
            and busy_on.get(addrs[w])
            and len(held_by.get(addrs[w], ())) >= min_results
        }
        if ready and (len(ready) == len(workers) or not need_all):
            return ready
        time.sleep(0.02)
    raise TimeoutError(
        f"workers {workers} were not {'all ' if need_all else ''}busy with >= "
        f"{min_results} results within {timeout} s"
    )


# -- a process stopped at a known point, then SIGKILLed --------------------------------
#: what a process prints when it reaches its stop point (it then waits for ever)
STOPPED = "scalepca-tests: stopped at the kill point"


def stop_here() -> None:
    """Say so on stdout and wait for ever: the test SIGKILLs this process here."""
    print(STOPPED, flush=True)
    threading.Event().wait()


def stop_after_chunks(array: str, n: int) -> None:
    """Make this process :func:`stop_here` once ``n`` chunks of the zarr array ``array``
    (its path in the store written to; ``""`` for an array at the store's root) have
    been written.

    Called in a writer process before it writes. zarr's local and fsspec stores count
    each chunk write of ``array`` once it has completed; the ``n``-th stops the
    process in zarr's event loop, so no further write of it starts. Writes already in
    flight in zarr's I/O threads may still complete: on disk then are at least ``n``
    chunks of ``array`` and at most ``n`` + ``async.concurrency`` (zarr's setting, 10
    by default), whatever the machine's speed, and the write never completes.
    """
    import re

    from zarr.storage import FsspecStore, LocalStore

    chunk_key = re.compile(rf"^{re.escape(f'{array}/' if array else '')}c/")
    written = [0]

    def counted(write):
        async def set(self, key, value, *args, **kwargs):
            await write(self, key, value, *args, **kwargs)
            if chunk_key.match(key):
                written[0] += 1  # in zarr's event loop thread only: no lock needed
                if written[0] >= n:
                    stop_here()

        return set

    for store in (LocalStore, FsspecStore):
        store.set = counted(store.set)


def run_until_stopped(args, *, env=None, cwd=None, timeout: float = 300.0) -> str:
    """Run ``args`` until it prints :data:`STOPPED` (see :func:`stop_here`), SIGKILL it
    there and return what it printed (stdout and stderr).

    Waits on the child's output, not on a clock: the child holds still at its stop
    point, so the kill lands there on a fast or a loaded machine alike. ``timeout``
    only bounds a broken test; a child that ends before its stop point is an error
    showing its output.
    """
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=None if cwd is None else str(cwd),
    )
    lines, at_stop, ended = [], threading.Event(), threading.Event()

    def read():
        for line in iter(proc.stdout.readline, b""):
            lines.append(line)
            if (
                STOPPED.encode() in line
            ):  # at the end of a line if others wrote without one
                at_stop.set()
        ended.set()
        at_stop.set()  # wake the waiter: the child ended without stopping

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stopped = ended_first = False
    try:
        at_stop.wait(timeout)
        stopped = any(STOPPED.encode() in line for line in lines)
        ended_first = ended.is_set()
        if stopped:
            os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None and not stopped:
            proc.kill()
        proc.wait(timeout=30)
        reader.join(timeout=30)
        proc.stdout.close()
    output = b"".join(lines).decode(errors="replace")
    if not stopped:
        what = "it ended" if ended_first else f"not within {timeout} s"
        raise AssertionError(
            f"the process never reached its stop point ({what}, exit code "
            f"{proc.returncode}):\n{output[-3000:]}"
        )
    assert proc.returncode == -signal.SIGKILL, proc.returncode
    return output


class WorkerKiller:
    """A thread that SIGKILLs one worker once the fit is under way on it.

    "Under way": the scheduler reports the victim executing a task while at least
    ``min_results`` task results sit in its memory (they are lost with it and must be
    recomputed). ``victim=None``: the first worker seen in that state (which worker
    the scheduler gives the stalled tasks is its choice), named by ``victim``
    afterwards. With ``gate`` (reads through :func:`gated`) the fit stalls in that
    state, so the kill cannot miss it; the gate opens after the kill (or when the
    killer gives up), and the fit completes on the other workers.
    """

    def __init__(
        self,
        cluster: ProcessCluster,
        client,
        victim: str | None = None,
        *,
        min_results: int = 2,
        timeout: float = 120.0,
        gate: str | None = None,
    ):
        self.cluster, self.client, self.victim = cluster, client, victim
        self.min_results, self.timeout = min_results, timeout
        self.gate = gate
        self.killed_at = None
        self.lost_keys = 0
        self.returncode = None
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            t0 = time.monotonic()
            candidates = (
                self.cluster.alive_workers() if self.victim is None else [self.victim]
            )
            busy = wait_until_busy(
                self.client,
                candidates,
                min_results=self.min_results,
                timeout=self.timeout,
                stop=self._stop,
                need_all=False,
            )
            if busy is not None:
                self.victim, self.lost_keys = next(iter(busy.items()))
                self.returncode = self.cluster.kill_worker(self.victim)
                self.killed_at = time.monotonic() - t0
        except Exception as err:  # reported by the test, not swallowed
            self.error = err
        finally:
            if self.gate is not None:
                try:
                    open_gate(self.client, self.gate)
                except Exception as err:
                    self.error = self.error or err

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)


def wait_for_commit(path, timeout: float = 180.0, n: int = 1) -> list[str]:
    """Block until the checkpoint store at ``path`` holds ``n`` complete commits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = commits(path)
        if len(done) >= n:
            return done
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint commit appeared in {path} within {timeout} s")


class ClusterKiller:
    """A thread that SIGKILLs the whole cluster (scheduler and workers) mid-fit.

    It waits until every worker (any one with ``need_all=False``) executes a task
    while holding ``min_results`` results — with ``after_commit``, first until that
    checkpoint store holds a complete commit — then kills. The fit reads through a
    gate that never opens (:func:`gated`, with the same ``after_commit``), so it
    stalls in that state and the kill lands there whatever the machine's load.
    ``killed_at`` is the ``time.monotonic()`` of the kill; ``error`` what went wrong
    while waiting (the cluster is killed regardless).
    """

    def __init__(
        self,
        cluster: ProcessCluster,
        client,
        *,
        min_results: int = 0,
        need_all: bool = True,
        after_commit: str | None = None,
        timeout: float = 180.0,
    ):
        self.cluster, self.client = cluster, client
        self.min_results, self.need_all = min_results, need_all
        self.after_commit, self.timeout = after_commit, timeout
        self.killed_at = None
        self.error = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            if self.after_commit is not None:
                wait_for_commit(self.after_commit, self.timeout)
            wait_until_busy(
                self.client,
                self.cluster.alive_workers(),
                min_results=self.min_results,
                need_all=self.need_all,
                timeout=self.timeout,
            )
        except Exception as err:  # reported by the caller
            self.error = err
        finally:
            self.killed_at = time.monotonic()
            self.cluster.kill_all()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._thread.join(timeout=60)
