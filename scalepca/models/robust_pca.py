"""Robust PCA (principal component pursuit) by the inexact augmented Lagrangian method.

Solves ``min ‖L‖_* + λ‖S‖₁  s.t.  P_Ω(L + S) = P_Ω(M)`` (Ω = all entries unless a mask
is given) with the inexact ALM / ADMM iteration of Lin, Chen & Ma (2010)::

    L ← SVT_{1/μ}(M − S + Y/μ)
    S ← shrink_{λ/μ}(M − L + Y/μ)          (on Ω; off Ω S absorbs everything)
    Y ← Y + μ (M − L − S)                  (on Ω; zero off Ω)
    μ ← min(ρ μ, μ̄)

Out-of-core layout
------------------
``L`` is only ever held as factors ``U diag(σ) Vᵀ`` (client side, (n1 + n2) × r
numbers). ``S`` and ``Y`` need not be stored separately: with ``T = M − L + Y/μ`` (the
argument of the soft threshold) one has ``S = shrink_{λ/μ}(T)`` and ``Y/μ = T − S``, so
a single n1 × n2 matrix ``T`` (plus two scalars) is the whole large state. Each
iteration makes

* ``1 + 2·n_power_iter`` passes (fewer or more, until sure: ``svd_tol``) over
  ``A = M − S + Y/μ`` for the randomized partial SVD, and
* one update pass that reads blocks of ``M`` and the old ``T``, forms the matching block
  of ``L`` from the factors, and writes the new ``T`` and the next ``A``; the primal
  residual ``‖P_Ω(M − L − S)‖_F``, ``‖S‖₀`` and the first product ``A_next Ω`` of the
  next SVD (whose probe block is known by then) are reduced in the same pass.

``T`` and ``A`` are persisted in cluster memory when they fit (``storage="memory"``),
otherwise written block by block to a zarr scratch store (``storage="zarr"``), which is
also the checkpoint store when ``checkpoint`` is given.

The loop, its history, the stopping rule (the relative residual below ``tol``) and
the checkpoints are the iteration driver's (:mod:`scalepca.models._iterate`); this
module gives it the small state (factors of L, μ, c, the threshold of the stored T,
the predicted rank), an init, a step (:meth:`RobustPCA._step`: SVT, then the update
pass) and the large T written beside each commit.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
import uuid
import warnings

import dask
import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._validation import (
    check_random_state_seed,
    check_scalar,
)
from ..io._checkpoint import CheckpointStore
from ..io._fingerprint import (
    data_fingerprint,
    random_state_param,
    result_params,
    sketch_graph,
)
from ..io._store import is_regular
from ..linalg.decomp import flip_signs
from ..linalg.passes import compute_together
from ..linalg.svt import (
    block_times,
    graph_constant,
    low_rank_from_factors,
    predict_rank,
    regular_layout,
    spectral_norm_estimate,
    square_blocks,
    sum_block_products,
    svt,
)
from ..preprocessing._matrix import MatrixInput, as_matrix
from ._incremental import not_updatable
from ._iterate import IterationCheckpoint, ValueBelow, iterate
from ._params import Choice, Int, Other, Path, Real, Rule, Seed
from ._resources import available_memory
from ._robust_blocks import (
    _clean,
    _input_stats_block,
    _pick,
    _shrink_block,
    _update_block,
    _update_core,
    probes,
)
from ._robust_state import (
    FINGERPRINT_IGNORES,
    _Problem,
    _refuse_sparse_input,
    commit_state,
    restore_state,
)
from .base import LinearDecompositionMixin

logger = logging.getLogger(__name__)

#: the dense reference SVD refuses matrices with more entries than this (1 GiB in
#: float64)
FULL_SVD_MAX_ENTRIES = 2**27
#: NumPy input of at most this many entries (32 MiB in float64: one block of the
#: blocked layout, :func:`~scalepca.linalg.svt.square_blocks`) is fitted on the client
#: with NumPy, as the user who passed it in memory expects; the same iteration, but
#: each pass one BLAS call instead of a dask graph, whose scheduling costs more than
#: the arithmetic at this size
LOCAL_MAX_ENTRIES = 2**22


# --------------------------------------------------------------------------------------
# the estimator
# --------------------------------------------------------------------------------------
#: the thresholding's accuracy under ``svd_tol="auto"`` (relative to ‖P_Ω M‖_F): the
#: default ``tol``, not the fit's own, which is a stopping rule only
AUTO_SVD_TOL = 1e-7


def _check_svd_tol(value, name, p, shape):
    if not (isinstance(value, str) and value == "auto"):
        check_scalar(value, name, low=0, low_inclusive=False, allow_none=True)
    return value


def _check_mask_form(value, name, p, shape):
    """None, a path to a zarr array, or an array (its shape and dtype are checked in
    fit)."""
    if (
        value is None
        or isinstance(value, (str, os.PathLike))
        or hasattr(value, "shape")
    ):
        return value
    if isinstance(value, (list, tuple)):
        return value
    raise TypeError(
        f"mask must be a boolean array, a path to one, or None; got {value!r}"
    )


def _full_svd_fits(p, shape) -> None:
    if p["svd"] == "full" and shape.n * shape.d > FULL_SVD_MAX_ENTRIES:
        raise ValueError(
            f"svd='full' gathers the {shape.n} × {shape.d} matrix on the "
            "client for a dense SVD every iteration; refused above "
            f"{FULL_SVD_MAX_ENTRIES} entries. Use svd='randomized'"
        )


class RobustPCA(LinearDecompositionMixin):
    r"""Robust PCA by principal component pursuit: :math:`M = L + S`, :math:`L` low
    rank, :math:`S` sparse.

    The inexact augmented Lagrange multiplier method solves

    .. math::

        \min_{L, S}\ \|L\|_* + \lambda \|S\|_1
        \quad\text{subject to}\quad P_\Omega(M - L - S) = 0 ,

    with :math:`\|\cdot\|_*` the nuclear norm and :math:`P_\Omega` keeping the observed
    entries.

    Parameters
    ----------
    lam : float or None, default=None
        Weight :math:`\lambda` of :math:`\|S\|_1`; ``None`` uses
        :math:`1/\sqrt{\max(n_1, n_2)}` (Candès et al. 2011).
    mu : float or None, default=None
        Initial penalty :math:`\mu_0`; ``None`` uses :math:`1.25/\|P_\Omega M\|_2` (Lin,
        Chen & Ma 2010), with :math:`\|\cdot\|_2` estimated by randomized subspace
        iteration.
    rho : float, default=1.5
        Growth factor of :math:`\mu` per iteration (> 1); :math:`\mu` is capped at
        :math:`10^7 \mu_0`.
    tol : float, default=1e-7
        Stop when :math:`\|P_\Omega(M - L - S)\|_F \le \mathrm{tol}\, \|P_\Omega M\|_F`.
        The residual left over ends up in ``L`` and ``S``, so the relative error of
        ``L`` can reach about :math:`\mathrm{tol}\, \|M\|_F / \|L\|_F`. When the
        outliers dominate the norm of ``M``, lower ``tol`` by that ratio. For example,
        at n = 20,000 with 5 % ±1 outliers and :math:`\|L\|_F = 10` the ratio is 447;
        ``tol=1e-7`` then leaves a relative error of 1.6e-5 in ``L``, and ``tol=1e-8``
        leaves 3.4e-6 after 20 iterations.
    max_iter : int, default=500
    svd : {"randomized", "full"}, default="randomized"
        ``"randomized"``: partial SVD by a randomized range finder over the blocks with
        a predicted rank. ``"full"``: gathers ``A`` on the client for a dense LAPACK SVD
        each iteration (a reference for small problems; refused above 2²⁷ entries).
    rank_guess : int, default=10
        Number of singular triplets asked for at the first iteration; afterwards the
        rank is predicted as in Lin, Chen & Ma (one more than found; grown only when all
        clear the threshold).
    n_oversamples : int, default=10
        Extra probe vectors of the randomized SVD.
    n_power_iter : int, default=1
        Power iterations of the randomized SVD: with ``svd_tol=None`` this many; with
        ``svd_tol``, at least this many before two successive estimates are compared
        (the residual test needs none). The previous iteration's right singular
        vectors warm-start the probe block.
    svd_tol : float, "auto" or None, default="auto"
        ``svd="randomized"``: how sure each thresholding must be
        (``scalepca.linalg.svt.svt``). The partial SVD is grown, within the iteration,
        until at least one trusted singular value estimate lies below the threshold
        (once it would reach a quarter of ``min(n1, n2)``, from the eigenvectors of the
        small side's Gram matrix, which then reaches the client), and power iterations
        go on until the thresholded matrix is within ``svd_tol · ‖P_Ω M‖_F`` of the
        exact one, by the residual of its triplets or the change between two
        estimates (``"auto"``: 1e-7, the default ``tol``; fixed, so that ``tol`` only
        says when to stop and a checkpoint resumed with another ``tol`` goes on along
        the same path), so the fit follows the exact-SVD path. ``None``: the fixed
        ``1 + 2·n_power_iter`` passes, which can miss singular values just above the
        threshold and then end elsewhere (see the user guide).
    mask : array-like of bool, shape (n1, n2), or None
        Observed entries Ω (True = observed). Only those are constrained (robust matrix
        completion); unobserved entries of ``M`` may hold anything, NaN included.
    checkpoint : str or None
        Local path of a zarr store. State is committed atomically every
        ``checkpoint_every`` iterations and at the end; fitting again with the same path
        resumes from the newest complete commit. The checkpoint must belong to the same
        problem: every parameter but ``checkpoint``, ``checkpoint_every``, ``storage``,
        ``scratch`` and the stopping ``tol`` and ``max_iter``, and the same ``P_Ω M``
        and Ω (norms, and a sketch that tells apart other values or rows or columns in
        another order). Otherwise a ValueError names what differs and the checkpoint is
        left untouched; a non-empty folder scalepca did not write as a checkpoint is
        refused too. ``tol`` and ``max_iter`` are those of the resumed fit: a tighter
        ``tol`` goes on from the commit, a looser one stops at once. Commits are in the
        iteration driver's format (``scalepca-iterate`` version 1); any other version
        is refused by name.
    checkpoint_every : int, default=5
    storage : {"auto", "memory", "zarr"}, default="auto"
        Where the n1 × n2 state (T and A) lives: persisted in cluster memory, or in a
        zarr scratch store (the checkpoint store if given, else ``scratch``, else a
        temporary directory). ``"auto"`` picks memory when five n1 × n2 float64 arrays
        take less than 70 % of the cluster's memory. NumPy input of at most 2²²
        entries in ``"memory"`` without ``checkpoint`` is fitted on the client with
        NumPy: the same iteration and passes, each pass one BLAS call rather than a
        dask graph.
    scratch : str or None
        Directory of the zarr scratch store when ``storage`` resolves to ``"zarr"`` and
        no checkpoint is given. It must be visible to all workers (a shared file
        system). The final ``T`` stays there after ``fit`` because ``sparse_`` reads it
        lazily; delete the store once the model is saved or no longer needed.
    random_state : int, Generator or None
        Seed of the random probe vectors (iteration ``k`` draws from the child ``k`` of
        the seed sequence, so a resumed run draws the same numbers as an uninterrupted
        one).

    Attributes
    ----------
    low_rank_ : dask array of shape (n1, n2)
        ``L`` = ``U_ diag(singular_values_) components_``, lazy, formed block by block.
    sparse_ : dask array of shape (n1, n2)
        ``S`` (zero off Ω), lazy over the final state (persisted memory or the scratch
        store).
    components_ : ndarray of shape (rank_, n2)
        Right singular vectors of ``L``: the robust principal axes of the rows.
    U_ : ndarray of shape (n1, rank_)
        Left singular vectors of ``L``.
    singular_values_ : ndarray of shape (rank_,)
        Singular values of ``L``, in decreasing order.
    rank_ : int
        The rank of ``L`` at convergence.
    n_components_ : int
        ``rank_``, the number of rows of ``components_`` (scikit-learn's name).
    nnz_ : int
        :math:`\|S\|_0` on :math:`\Omega`.
    n_iter_ : int
        Iterations of the inexact ALM run.
    converged_ : bool
        Whether the residual met ``tol`` within ``max_iter``.
    n_samples_ : int
        Number of rows of ``M``, n1.
    n_features_in_ : int
        Number of columns of ``M``, n2.
    features_kept_ : ndarray of shape (n_features_in_,), dtype bool
        True for the features the model was fitted on, False for those left out
        (NaN in every sample), which are NaN in the per-feature attributes.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the columns seen during ``fit``; defined only when the data carry
        names.
    n_passes_ : int
        Passes over the data and its iterates the fit made (see Notes).
    fit_time_ : float
        Wall-clock seconds the fit took.
    solver_ : str
        The SVD of the iterations, ``svd``.
    history_ : dict of lists
        Per iteration: ``residual`` (‖P_Ω(M − L − S)‖_F / ‖P_Ω M‖_F), ``rank``, ``mu``,
        ``nnz``, ``sv`` (triplets asked for) and ``seconds``.
    lam_, mu0_, norm2_ : float
        λ, μ₀ and the ‖P_Ω M‖₂ estimate used.
    resumed_from_ : int
        Iterations taken from a checkpoint (0 for a fresh run).
    mean_ : ndarray of zeros, shape (n2,)
        Robust PCA does not centre; present for the linear ``transform``.
    storage_ : str
        ``"memory"`` or ``"zarr"``.

    Notes
    -----
    Passes over the data: one statistics pass over ``M`` (‖M‖_F, max |M|, non-finite
    check) and ``2 + 2·4`` for the ‖M‖₂ estimate (skipped on resume), one pass for the
    first ``A Ω``; then per iteration ``1 + 2·n_power_iter`` passes over the n1 × n2
    matrix ``A`` (with ``svd_tol``: 1 for ``Aᵀ Q``, 2 per power iteration, 1 for the
    residual's ``A V`` when that test ends it, 2 per growth of the partial SVD, 1 more
    for a growth from the Gram matrix ``AᵀA``) and one update pass reading ``M`` and
    ``T`` (writing ``T`` and ``A``, and computing the next ``A Ω``). With
    ``storage="memory"`` the SVD passes read persisted blocks; with ``"zarr"`` they read
    the scratch store. Checkpoints in ``"memory"`` mode write ``T`` once per commit; in
    ``"zarr"`` mode ``T`` is already in the store and a commit writes only the small
    state.

    Memory per worker: a few blocks (M, T, A, the block of L) plus a row slice of ``U``
    and a column slice of ``Vᵀ`` — independent of n1 × n2 in ``"zarr"`` mode.
    ``"memory"`` mode holds about three n1 × n2 float64 arrays across the cluster. The
    client holds (n1 + n2) × (k + p) factors and, when a thresholding grows them to a
    quarter of ``min(n1, n2)``, that side's Gram matrix (at most twice as large). The
    ``"full"`` SVD gathers ``A`` on the client.

    Float32 data are widened to float64 block by block: every iterate is float64, so the
    fit equals the float64 fit of the same values (``scalepca.gram-precision`` plays no
    part).

    Sparse input (``scipy.sparse``, pydata ``sparse``, dask arrays of such blocks) is
    refused with a ``TypeError`` that says why: principal component pursuit separates
    ``M = L + S`` with ``S`` the sparse outliers, and on data that are themselves sparse
    every stored zero is an observed value that the low-rank ``L`` has to fit. The
    inexact-ALM iterates ``L`` (as factors, but evaluated blockwise), ``S``, the
    multiplier and :math:`A = M - S + Y/\mu` are dense n1 × n2 arrays whatever the
    sparsity of ``M``, so a sparse path would save nothing: the fit holds about three
    dense copies of the data (``3 · 8 · n1 · n2`` bytes) in the cluster or in the
    scratch store either way. Users whose data fit that budget densify explicitly
    (``X.map_blocks(lambda b: b.toarray())`` for a dask array, ``X.toarray()`` in
    memory), which keeps the cost visible; principal components of sparse data without
    densifying come from :class:`PCA` and :class:`SparsePCA`.

    ``transform`` projects rows on ``components_`` (no centring): scores of the robust
    principal subspace; for the training rows the scores of ``L`` are
    ``U_ · singular_values_``.

    References
    ----------
    Candès, E. J., Li, X., Ma, Y. & Wright, J. (2011). Robust principal component
    analysis? Journal of the ACM, 58(3), article 11. (Principal component pursuit and
    the default ``lam``.)

    Lin, Z., Chen, M. & Ma, Y. (2010). The augmented Lagrange multiplier method for
    exact recovery of corrupted low-rank matrices. arXiv:1009.5055. (The inexact ALM
    iteration.)

    Cai, J.-F., Candès, E. J. & Shen, Z. (2010). A singular value thresholding
    algorithm for matrix completion. SIAM Journal on Optimization, 20(4), 1956–1982.
    (Singular value thresholding; entries outside :math:`\Omega`.)

    Halko, N., Martinsson, P.-G. & Tropp, J. A. (2011). Finding structure with
    randomness: probabilistic algorithms for constructing approximate matrix
    decompositions. SIAM Review, 53(2), 217–288. (The partial SVDs of the
    iterations.)

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> rng = np.random.default_rng(0)
    >>> n, r = 200, 10
    >>> L0 = rng.normal(0, n**-0.5, (n, r)) @ rng.normal(0, n**-0.5, (r, n))
    >>> S0 = np.where(rng.random((n, n)) < 0.05, rng.choice([-1.0, 1.0], (n, n)), 0.0)
    >>> rpca = scalepca.RobustPCA(random_state=0).fit(L0 + S0)
    >>> rpca.rank_
    10
    """

    #: the parameters (:mod:`._params`), read by fit, the config schema, validate and
    #: load
    _parameters = {
        "lam": Real(0, open_low=True, none=True),
        "mu": Real(0, open_low=True, none=True),
        "rho": Real(1, open_low=True),
        "tol": Real(0, open_low=True),
        "max_iter": Int(1),
        "svd": Choice("randomized", "full"),
        "rank_guess": Int(1),
        "n_oversamples": Int(0),
        "n_power_iter": Int(0),
        "svd_tol": Other((str, float, type(None)), _check_svd_tol),
        "mask": Other((str, type(None)), _check_mask_form),
        "checkpoint": Path(),
        "checkpoint_every": Int(1),
        "storage": Choice("auto", "memory", "zarr"),
        "scratch": Path(),
        "random_state": Seed(),
    }
    _parameter_rules = (Rule(_full_svd_fits, needs=("svd",)),)

    #: no update by merged moments: the augmented Lagrangian iterates over every row
    partial_fit = not_updatable(
        "robust PCA (its augmented Lagrangian iterates over every row)"
    )

    def __init__(
        self,
        *,
        lam: float | None = None,
        mu: float | None = None,
        rho: float = 1.5,
        tol: float = 1e-7,
        max_iter: int = 500,
        svd: str = "randomized",
        rank_guess: int = 10,
        n_oversamples: int = 10,
        n_power_iter: int = 1,
        svd_tol="auto",
        mask=None,
        checkpoint: str | None = None,
        checkpoint_every: int = 5,
        storage: str = "auto",
        scratch: str | None = None,
        random_state=None,
    ):
        self.lam = lam
        self.mu = mu
        self.rho = rho
        self.tol = tol
        self.max_iter = max_iter
        self.svd = svd
        self.rank_guess = rank_guess
        self.n_oversamples = n_oversamples
        self.n_power_iter = n_power_iter
        self.svd_tol = svd_tol
        self.mask = mask
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.storage = storage
        self.scratch = scratch
        self.random_state = random_state

    # -- input -------------------------------------------------------------------------
    def _input(
        self,
        X,
        *,
        what="X",
        min_samples=1,
        allow_2d_blocks=True,
        validated=False,
        unknown_rows=False,
    ) -> MatrixInput:
        """M keeps its 2-D blocks (both dimensions may be large; ``transform`` asks
        for rows chunked with the features in one chunk); sparse M is refused."""
        _refuse_sparse_input(X, what)
        if not validated:
            X = self._validated_in_memory(X, what=what, min_samples=min_samples)
        data = as_matrix(
            X,
            what=what,
            min_samples=min_samples,
            allow_2d_blocks=allow_2d_blocks,
            accept_sparse=True,
            unknown_rows=unknown_rows,
        )
        _refuse_sparse_input(
            data.data, what
        )  # sparse inside a container (metadata only)
        return data

    def _check_mask(self, M: da.Array):
        if self.mask is None:
            return None
        mask = self.mask
        if isinstance(mask, (str, os.PathLike)):
            mask = da.from_zarr(os.fspath(mask))
        if not isinstance(mask, da.Array):
            mask = np.asarray(mask)
        if mask.ndim != 2 or tuple(mask.shape) != tuple(M.shape):
            raise ValueError(
                f"mask has shape {tuple(mask.shape)}; it must match M's {M.shape}"
            )
        if np.dtype(mask.dtype).kind not in "biu":
            raise TypeError(
                f"mask must be boolean (True = observed); got dtype {mask.dtype}"
            )
        if isinstance(mask, np.ndarray):
            mask = da.from_array(mask.astype(bool), chunks=M.chunks)
        return mask.astype(bool).rechunk(M.chunks)

    @staticmethod
    def _square_if_in_memory(M: da.Array, data: MatrixInput) -> da.Array:
        """NumPy input (or one block) is cut into square blocks, so the passes run in
        parallel and the result does not depend on how the caller chunked it."""
        if data.kind == "numpy" or M.npartitions == 1:
            chunks = square_blocks(M.shape)
            if chunks != M.chunks:
                M = M.rechunk(chunks)
        return M

    def _statistics(self, M: da.Array, W, data: MatrixInput):
        """The statistics pass: ``(‖P_Ω M‖_F², max |P_Ω M|, |Ω|)`` of the features that
        enter the fit and their mask (None: all of them).

        Per column the pass also counts NaN entries: features NaN in every sample
        (land in a gridded field) are left out here, at no extra pass. Any other
        non-finite value on Ω, or an M that is zero on Ω, is an error.
        """
        args = [M, "ij"] + ([W, "ij"] if W is not None else [])
        tup = da.blockwise(
            _input_stats_block,
            "ij",
            *args,
            dtype=object,
            concatenate=True,
            meta=np.empty((0, 0), dtype=object),
        )
        f64 = np.empty((0, 0, 0), dtype=np.float64)
        stats = tup.map_blocks(
            _pick,
            0,
            dtype=np.float64,
            new_axis=2,
            meta=f64,
            chunks=((1,) * M.numblocks[0], (1,) * M.numblocks[1], (4,)),
        )
        cols = tup.map_blocks(
            _pick,
            1,
            dtype=np.float64,
            new_axis=2,
            meta=f64,
            chunks=((1,) * M.numblocks[0], M.chunks[1], (2,)),
        ).sum(axis=0)
        # a checkpoint's fingerprint holds a sketch of P_Ω M and Ω, from the same pass
        sketch = [sketch_graph(M, W)] if self.checkpoint is not None else []
        with self._timed_pass("statistics"):
            stats, cols, *sketch = compute_together(stats, cols, *sketch)
        stats = stats.reshape(-1, 4)
        fro2, maxabs, bad, n_obs = (
            stats[:, 0].sum(),
            stats[:, 1].max(),
            stats[:, 2].sum(),
            stats[:, 3].sum(),
        )

        # every observed entry of a land column is a NaN: those don't count
        def check(
            land,
        ):
            if bad - cols[land, 1].sum():
                raise ValueError(
                    f"M contains {int(bad - cols[land, 1].sum())} NaN or "
                    "infinite value(s) on the observed entries; mark "
                    "missing entries with mask= (False = unobserved)"
                )

        keep = self._leave_out_land(M.shape[0] - cols[:, 0], data, check=check)
        dropped_obs = 0 if keep is None else cols[~keep, 1].sum()
        n_obs -= dropped_obs
        if fro2 == 0:
            raise ValueError("M is zero on all observed entries; nothing to decompose")
        return (
            (fro2, maxabs, n_obs),
            keep,
            (data_fingerprint(M, *sketch) if sketch else None),
        )

    # -- fitting -----------------------------------------------------------------------
    def _fit(self, data: MatrixInput) -> None:
        from threadpoolctl import threadpool_limits

        # Parallelism comes from dask tasks; BLAS runs single-threaded in this process
        # (as in dask-distributed workers). Nested BLAS threads under the threaded
        # scheduler oversubscribe the cores, and OpenBLAS's spinning threads then slow
        # even the small client-side QRs by orders of magnitude on a busy machine.
        with threadpool_limits(limits=1, user_api="blas"):
            self._fit_ialm(data)

    def _fit_ialm(self, data: MatrixInput) -> None:
        """The inexact ALM as a state, an init, a step and a stopping quantity (the
        relative residual) run by the iteration driver, which also checkpoints and
        resumes."""
        P = self._setup(data)
        ckpt = (
            IterationCheckpoint(
                self.checkpoint,
                P.fingerprint,
                prune_prefixes=("T_",),
            )
            if self.checkpoint is not None
            else None
        )
        P.store = ckpt.store if ckpt is not None else None
        if P.storage == "zarr" and P.store is not None:
            P.scratch = P.store  # the n1 × n2 state lives beside the commits
        self._committed_t = None
        run = iterate(
            lambda state, it: self._step(P, state, it),
            lambda: self._init(P),
            stop=ValueBelow("residual", float(self.tol)),
            max_iter=int(self.max_iter),
            checkpoint=ckpt,
            checkpoint_every=int(self.checkpoint_every),
            name="RobustPCA",
            restore=lambda state: self._restore(P, state),
            before_commit=lambda it, state: self._before_commit(P, it, state),
            valid=lambda st: os.path.isdir(os.path.join(ckpt.path, st["t_name"])),
            warn=False,
        )
        state, history = run.state, run.history
        if not run.converged:
            warnings.warn(
                f"RobustPCA did not converge in {self.max_iter} iterations "
                f"(relative residual {history['residual'][-1]:.2e} > "
                f"tol={self.tol:g}); increase max_iter",
                ConvergenceWarning,
                stacklevel=3,
            )
        self.lam_, self.norm2_, self.mu0_ = (
            P.lam,
            float(state["norm2"]),
            float(state["mu0"]),
        )
        self.resumed_from_ = run.resumed_from
        self._set_results(
            P.M,
            P.W,
            state["T"],
            state["a_tau"],
            state["U"],
            state["s"],
            state["Vt"],
            history,
            run.converged,
            run.n_iter,
            *P.M.shape,
        )

    def _setup(self, data: MatrixInput) -> _Problem:
        """Layout, the statistics pass (features NaN in every sample left out),
        storage."""
        M = data.data
        self._check_parameters(*M.shape, M)
        M = self._square_if_in_memory(M, data)
        W = self._check_mask(M)
        (fro2, maxabs, n_obs), keep, data_fp = self._statistics(M, W, data)
        if keep is not None:  # features NaN in every sample (land) are left out
            M, W = M[:, keep], (W[:, keep] if W is not None else None)
            M = self._square_if_in_memory(M, data)
            M = M.rechunk(
                {1: tuple(c for c in M.chunks[1] if c)}
            )  # no empty column chunks
            W = W.rechunk(M.chunks) if W is not None else None
        n1, n2 = M.shape
        storage = self.storage
        if storage == "auto":  # five n1 × n2 float64 arrays within 70 % of the memory
            storage = (
                "memory" if 5 * n1 * n2 * 8 <= 0.7 * available_memory()[0] else "zarr"
            )
        if storage == "zarr" and not is_regular(M.chunks):
            block = max(max(M.chunks[0]), max(M.chunks[1]))
            logger.info(
                "RobustPCA: rechunking M to regular %d-blocks for the zarr store", block
            )
            M = M.rechunk(regular_layout(M.shape, block))
            W = W.rechunk(M.chunks) if W is not None else None
        # the one place where the in-memory path is chosen
        local = (
            data.kind == "numpy"
            and storage == "memory"
            and self.checkpoint is None
            and n1 * n2 <= LOCAL_MAX_ENTRIES
        )
        self.storage_ = storage
        self.solver_ = self.svd
        logger.info(
            "RobustPCA: %d × %d in %s, storage=%s, svd=%s",
            n1,
            n2,
            "memory on the client (NumPy)"
            if local
            else f"{M.numblocks[0]} × {M.numblocks[1]} blocks",
            storage,
            self.svd,
        )
        lam = float(self.lam) if self.lam is not None else 1.0 / math.sqrt(max(n1, n2))
        masked = W is not None
        fingerprint = {
            **result_params(
                self,
                FINGERPRINT_IGNORES,
                {"lam": lam, "random_state": random_state_param(self.random_state)},
            ),
            "shape": [n1, n2],
            "masked": masked,
            "n_obs": int(n_obs),
            "fro2": float(fro2),
            "maxabs": float(maxabs),
            **(
                {}
                if data_fp is None
                else {
                    "input_shape": data_fp["shape"],
                    "dtype": data_fp["dtype"],
                    "data_sketch": data_fp["data_sketch"],
                }
            ),
        }
        # float64 whatever the data's dtype: M (1 + c), the first SVT argument, and
        # the spectral-norm estimate are formed from Mc (float32 data rounded them to
        # float32)
        Mc = (
            M.astype(np.float64)
            if not masked
            else da.map_blocks(_clean, M, W, dtype=np.float64)
        )
        # in-memory input: gathering it copies what the client holds already
        Mc, Wc = dask.compute(Mc, W) if local else (Mc, None)
        return _Problem(
            M=M,
            W=W,
            Mc=Mc,
            local=local,
            Wc=Wc,
            storage=storage,
            fro=math.sqrt(fro2),
            maxabs=float(maxabs),
            lam=lam,
            fingerprint=fingerprint,
            fused=self.svd == "randomized",
            p=int(self.n_oversamples),
            scratch=self._scratch_store()
            if storage == "zarr" and self.checkpoint is None
            else None,
        )

    def _scratch_store(self) -> CheckpointStore:
        """The zarr scratch store of a fit without checkpoint (``scratch`` or a temp
        dir)."""
        if self.scratch:
            path = os.path.join(self.scratch, f"rpca-{uuid.uuid4().hex[:8]}.zarr")
        else:
            path = tempfile.mkdtemp(
                prefix="scalepca-rpca-",
                dir=dask.config.get("temporary-directory", None),
            )
        store = CheckpointStore(path, what="scratch")
        logger.info("RobustPCA: scratch store at %s", store.path)
        return store

    def _init(self, P: _Problem) -> dict:
        """The virtual initial state: T = M with an infinite threshold gives S₀ = 0, and
        c = 1/(J μ₀) gives Y₀/μ₀ = M/(J μ₀), i.e. Y₀ = M / J(M) (Lin, Chen & Ma)."""
        n1, n2 = P.M.shape
        entropy = check_random_state_seed(self.random_state).entropy
        rng0 = np.random.default_rng(
            np.random.SeedSequence(entropy, spawn_key=(2**31,))
        )
        norm2 = spectral_norm_estimate(
            P.Mc, rng=rng0, n_vectors=10, n_power_iter=4, timed=self._timed_pass
        )
        J = max(norm2, P.maxabs / P.lam)
        mu0 = float(self.mu) if self.mu is not None else 1.25 / norm2
        c = 1.0 / (J * mu0)
        A = P.Mc * (1.0 + c)
        return {
            "entropy": str(entropy),
            "a_tau": math.inf,
            "c": c,
            "mu": mu0,
            "norm2": norm2,
            "J": J,
            "mu0": mu0,
            "mu_bar": mu0 * 1e7,
            "sv": min(int(self.rank_guess), n1, n2),
            "t_name": None,
            "U": np.zeros((n1, 0)),
            "s": np.zeros(0),
            "Vt": np.zeros((0, n2)),
            "V_warm": np.zeros((n2, 0)),
            "T": P.Mc,
            "Y_first": None,
            "A": A.persist() if P.storage == "memory" and not P.local else A,
        }

    def _restore(self, P: _Problem, state: dict) -> dict:
        """The lazy n1 × n2 state of a resumed commit (see :func:`restore_state`)."""
        self._committed_t = state["t_name"]
        return restore_state(P, state)

    def _step(self, P: _Problem, state: dict, it: int) -> tuple[dict, dict]:
        """One iteration: L by SVT of A, then the update pass (T, the next A, the
        residual)."""
        t0 = time.perf_counter()
        n_min = min(P.M.shape)
        entropy, sv, mu = int(state["entropy"]), int(state["sv"]), float(state["mu"])
        rtol = (
            None
            if self.svd_tol is None
            else float(  # grow and iterate until sure
                AUTO_SVD_TOL if self.svd_tol == "auto" else self.svd_tol
            )
        )
        res = svt(
            state["A"],
            1.0 / mu,
            sv,
            full=self.svd == "full",
            n_oversamples=P.p,
            n_power_iter=self.n_power_iter,
            timed=self._timed_pass,
            probes=probes(entropy, it - 1, sv, P.p, *P.M.shape, state["V_warm"])
            if P.fused
            else None,
            first_product=state["Y_first"],
            rtol=rtol,
            scale=P.fro,
            rng=np.random.default_rng(
                np.random.SeedSequence(entropy, spawn_key=(it - 1, 1))
            ),
        )
        # V of the trusted triplets (above the threshold and below) seeds the next SVD
        V_warm = np.ascontiguousarray(res.V_trusted.T) if P.fused else state["V_warm"]
        sv_next = (
            predict_rank(res.n_above, res.k, n_min, n_min_dim=n_min)
            if P.fused
            else min(res.n_above + 1, n_min)
        )
        mu_next = min(mu * self.rho, float(state["mu_bar"]))
        new = {
            **state,
            "U": res.U,
            "s": res.s,
            "Vt": res.Vt,
            "V_warm": V_warm,
            "sv": sv_next,
            "a_tau": P.lam / mu,
            "c": mu / mu_next,
            "mu": mu_next,
        }
        T, A, Y_first, residual, nnz, t_name = self._update_pass(P, state, new, it)
        # the old T is no longer needed unless it is the committed checkpoint
        if (
            P.scratch is not None
            and state["t_name"] is not None
            and state["t_name"] != self._committed_t
        ):
            P.scratch.remove(state["t_name"])
        new.update(T=T, A=A, Y_first=Y_first, t_name=t_name)
        record = {
            "residual": residual,
            "rank": int(res.U.shape[1]),
            "mu": mu,
            "nnz": nnz,
            "sv": res.k if P.fused else sv,
            "seconds": time.perf_counter() - t0,
        }
        logger.info(
            "RobustPCA: iteration %d: residual %.3e, "
            "rank %d (asked %d), ‖S‖₀ %d, μ %.3g, %.2fs",
            it,
            residual,
            record["rank"],
            sv,
            nnz,
            mu,
            record["seconds"],
        )
        return new, record

    def _update_pass(self, P: _Problem, old: dict, new: dict, it: int):
        """The update pass of iteration ``it``: reads blocks of M and the old T,
        forms the block of L from the new factors, writes the new T and the next A,
        and reduces the residual, ‖S‖₀ and the next SVD's first product ``A Ω`` in
        the same pass."""
        M, n1, n2 = P.M, *P.M.shape
        U, s, Vt = new["U"], new["s"], new["Vt"]
        r = max(U.shape[1], 1)
        Us, Vs = (U * s, Vt) if U.shape[1] else (np.zeros((n1, r)), np.zeros((r, n2)))
        if P.local:
            return self._update_local(P, old, new, it, Us, Vs)
        kw = dict(
            a_tau=old["a_tau"],
            c=old["c"],
            tau_s=new["a_tau"],
            c_next=new["c"],
            masked=P.W is not None,
            fused=P.fused,
        )
        margs = (
            [M, "ij", old["T"], "ij"]
            + ([P.W, "ij"] if P.W is not None else [])
            + [
                graph_constant(Us, (M.chunks[0], r)),
                "ik",
                graph_constant(Vs, (r, M.chunks[1])),
                "kj",
            ]
        )
        if P.fused:
            Om_next = probes(
                int(new["entropy"]), it, new["sv"], P.p, n1, n2, new["V_warm"]
            )
            l_next = Om_next.shape[1]
            margs += [graph_constant(Om_next, (M.chunks[1], l_next)), "jq"]
        sink, t_name = None, None
        if P.storage == "zarr":
            t_name = f"T_{it:06d}"
            P.scratch.create(t_name, M.shape, tuple(c_[0] for c_ in M.chunks))
            if not P.scratch.has("A", M.shape, M.chunks):
                P.scratch.create("A", M.shape, tuple(c_[0] for c_ in M.chunks))
            # global row / column indices, so each block knows where it is written
            margs += [
                da.arange(n1, chunks=(M.chunks[0],)),
                "i",
                da.arange(n2, chunks=(M.chunks[1],)),
                "j",
            ]
            sink = (P.scratch.path, t_name, "A")
        # one task per block returns a tuple; its parts are picked out below and
        # computed (or persisted) together, so every block is updated once
        tup = da.blockwise(
            _update_block,
            "ij",
            *margs,
            dtype=object,
            concatenate=True,
            meta=np.empty((0, 0), dtype=object),
            sink=sink,
            **kw,
        )
        k_st, k_part = (2, 3) if sink is None else (0, 1)
        st_blocks = tup.map_blocks(
            _pick,
            k_st,
            dtype=np.float64,
            new_axis=2,
            meta=np.empty((0, 0, 0)),
            chunks=((1,) * M.numblocks[0], (1,) * M.numblocks[1], (2,)),
        )
        Yn = (
            sum_block_products(
                tup.map_blocks(
                    _pick,
                    k_part,
                    dtype=np.float64,
                    new_axis=2,
                    meta=np.empty((0, 0, 0)),
                    chunks=(M.chunks[0], (1,) * M.numblocks[1], (l_next,)),
                )
            )
            if P.fused
            else None
        )
        with self._timed_pass("update"):
            if sink is None:
                f64 = np.empty((0, 0), dtype=np.float64)
                T = tup.map_blocks(_pick, 0, dtype=np.float64, meta=f64)
                A = tup.map_blocks(_pick, 1, dtype=np.float64, meta=f64)
                T, A, st_blocks, Yn = dask.persist(T, A, st_blocks, Yn)
            st_blocks, Y_first = dask.compute(st_blocks, Yn)
        if sink is not None:
            T, A = P.scratch.array(t_name), P.scratch.array("A")
        st_blocks = st_blocks.reshape(-1, 2)
        residual = math.sqrt(st_blocks[:, 0].sum()) / P.fro
        return T, A, Y_first, residual, int(st_blocks[:, 1].sum()), t_name

    def _update_local(self, P: _Problem, old: dict, new: dict, it: int, Us, Vs):
        """The update pass of a problem held on the client: the block kernel of the
        blocked pass applied to the whole matrix."""
        with self._timed_pass("update"):
            T, A, stats = _update_core(
                P.Mc,
                old["T"],
                P.Wc,
                Us,
                Vs,
                old["a_tau"],
                old["c"],
                new["a_tau"],
                new["c"],
            )
            Y_first = None
            if P.fused:
                Om_next = probes(
                    int(new["entropy"]), it, new["sv"], P.p, *A.shape, new["V_warm"]
                )
                Y_first = block_times(A, Om_next)[:, 0, :]
        residual = math.sqrt(stats[0, 0, 0]) / P.fro
        return T, A, Y_first, residual, int(stats[0, 0, 1]), None

    def _before_commit(self, P: _Problem, it: int, state: dict):
        """The small state of a commit, T written beside it (see
        :func:`commit_state`)."""
        commit, kept = commit_state(P, it, state)
        self._committed_t = commit["t_name"]
        return commit, kept

    def _set_results(self, M, W, Tp, a_tau, U, s, Vt, history, converged, it, n1, n2):
        order = np.argsort(-s, kind="stable")
        U, s, Vt = U[:, order], s[order], Vt[order]
        # sign convention of the package: largest |entry| of each component positive
        Vt, U = flip_signs(Vt, U)
        self.U_ = np.ascontiguousarray(U)
        self.singular_values_ = np.asarray(s, dtype=np.float64)
        self.components_ = np.ascontiguousarray(Vt)
        self.rank_ = self.n_components_ = int(s.shape[0])
        self.mean_ = np.zeros(n2)
        self.n_samples_, self.n_features_in_ = int(n1), int(n2)
        self.n_iter_ = int(it)
        self.converged_ = bool(converged)
        self.history_ = history
        self.nnz_ = int(history["nnz"][-1]) if history["nnz"] else 0
        if isinstance(Tp, np.ndarray):  # fitted on the client: lazy over the last T
            Tp = da.from_array(Tp, chunks=M.chunks)
        args = [Tp, "ij"] + ([W, "ij"] if W is not None else [])
        self.low_rank_ = self._all_columns(low_rank_from_factors(U, s, Vt, M.chunks))
        self.sparse_ = self._all_columns(
            da.blockwise(_shrink_block, "ij", *args, dtype=np.float64, tau=a_tau)
        )

    def _all_columns(self, A: da.Array) -> da.Array:
        """``A`` over the fitted features spread lazily over all of them, NaN at the
        features left out of the fit (NaN in every sample)."""
        keep = getattr(self, "_features_kept", None)
        if keep is None:
            return A
        source = np.full(keep.size, A.shape[1])  # the appended NaN column
        source[keep] = np.arange(A.shape[1])
        nan = da.full((A.shape[0], 1), np.nan, chunks=(A.chunks[0], 1), dtype=A.dtype)
        return da.concatenate([A, nan], axis=1)[:, source]

    # -- persistence -------------------------------------------------------------------
    def save(self, store, *, storage_options=None) -> None:
        """Write the fitted model to a zarr group at ``store``.

        ``low_rank_`` and ``sparse_`` are written chunk by chunk; an in-memory mask
        parameter is not stored (only its effect, through ``sparse_``). Load it back
        with :func:`scalepca.load`.

        Parameters
        ----------
        store : str or path
            A local path or fsspec URL (``s3://bucket/model.zarr``).
        storage_options : dict, optional
            Passed to fsspec for URLs.
        """
        mask = self.mask
        if mask is not None and not isinstance(mask, (str, os.PathLike)):
            self.mask = None
        try:
            super().save(store, storage_options=storage_options)
        finally:
            self.mask = mask


__all__ = ["RobustPCA"]
