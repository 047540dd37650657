"""The input and the fixed problem of a
:class:`~scalepca.models.robust_pca.RobustPCA` fit and its checkpoints: dense M only;
what a commit holds, how the large T is written beside it and read back on resume,
and what a checkpoint's fingerprint leaves out.
"""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np

from .._validation import is_sparse
from ..io._checkpoint import CheckpointStore, commit_name
from ..linalg.svt import regular_layout
from ._robust_blocks import _a_block

#: what a commit prunes in the checkpoint store: old commits, temporaries, unneeded T
#: arrays
_PRUNED = ("state_", "T_")


@dataclasses.dataclass
class _Problem:
    """What stays fixed during a fit: M (its block layout), the mask, storage,
    statistics."""

    M: da.Array
    W: da.Array | None
    Mc: da.Array | np.ndarray  # M with the unobserved entries set to zero, float64
    storage: str  # "memory" or "zarr"
    fro: float  # ‖P_Ω M‖_F
    maxabs: float
    lam: float
    fingerprint: dict
    fused: bool  # the update pass also computes the next SVD's A Ω (randomized SVD)
    p: int  # oversampling of the randomized SVD
    scratch: CheckpointStore | None = None  # where T and A live in "zarr" mode
    #: the iterates are NumPy arrays on the client (a small in-memory problem):
    #: ``Mc`` and ``Wc`` are then M (cleaned, float64) and the mask in memory, and T
    #: and A NumPy arrays; M and W stay the blocked layout of the results
    local: bool = False
    Wc: np.ndarray | None = None
    store: CheckpointStore | None = None  # the checkpoint's store


#: parameters left out of a checkpoint's fingerprint, and why they do not change the
#: result
FINGERPRINT_IGNORES = {
    "checkpoint": "where the commits are written",
    "checkpoint_every": "how often commits are written; the iterations are the same",
    "tol": "a stopping parameter: evaluated again on resume",
    "max_iter": "the same",
    "storage": "where T and A live; the same arithmetic (zarr's regular blocks change only "
    "the rounding of sums, as another chunking does)",
    "scratch": "where T and A live without a checkpoint",
    "mask": "Ω is in the data sketch",
}

#: the small state a commit holds (besides ``t_name``, the T array beside it, and
#: ``n_iter``)
_COMMITTED = (
    "entropy",
    "a_tau",
    "c",
    "mu",
    "norm2",
    "J",
    "mu0",
    "mu_bar",
    "sv",
    "U",
    "s",
    "Vt",
    "V_warm",
)


def restore_state(P: _Problem, state: dict) -> dict:
    """The lazy n1 × n2 state of a resumed commit: T from the store, A formed from
    it."""
    t_name = state["t_name"]
    P.store.prune({t_name, commit_name(int(state["n_iter"]))}, _PRUNED)
    T = P.store.array(t_name).rechunk(P.M.chunks)
    args = [P.M, "ij", T, "ij"]
    if P.W is not None:
        args += [P.W, "ij"]
    A = da.blockwise(
        _a_block,
        "ij",
        *args,
        dtype=np.float64,
        a_tau=float(state["a_tau"]),
        c=float(state["c"]),
        meta=np.empty((0, 0), dtype=np.float64),
    )
    if P.storage == "memory":
        T, A = T.persist(), A.persist()
    return {**state, "T": T, "A": A, "Y_first": None}


def commit_state(P: _Problem, it: int, state: dict) -> tuple[dict, set]:
    """The small state of a commit and the arrays it keeps; in ``"memory"`` mode T is
    written beside it first (in ``"zarr"`` mode it is in the store already)."""
    t_name = state["t_name"]
    if P.storage == "memory":
        t_name = f"T_{it:06d}"
        zchunks = tuple(max(c_) for c_ in P.M.chunks)
        P.store.create(t_name, P.M.shape, zchunks)
        import zarr

        target = zarr.open_array(store=P.store.path, path=t_name, mode="r+")
        regular = tuple(
            regular_layout((n,), b)[0] for n, b in zip(P.M.shape, zchunks, strict=True)
        )
        da.store(state["T"].rechunk(regular), target, lock=False)
    small = {key: state[key] for key in _COMMITTED}
    return {**small, "t_name": t_name, "n_iter": int(it)}, {t_name}


def _refuse_sparse_input(X, what: str) -> None:
    """``TypeError`` for sparse ``X`` (or a DataArray holding it), naming why and
    what to do."""
    labelled = hasattr(X, "dims") and hasattr(X, "data")  # a DataArray: its array
    if not is_sparse(X.data if labelled else X):
        return
    raise TypeError(
        f"RobustPCA does not take sparse input ({what} is sparse): principal "
        "component pursuit splits M = L + S with S the sparse outliers, and on "
        "sparse data every zero is an observed value the low-rank part L must fit, "
        "so the ALM iterates (L, S and the multiplier, n × d each) are dense — "
        "about three dense copies of the data (3 · 8 · n · d bytes) in the cluster. "
        "If that fits, densify explicitly: X.map_blocks(lambda b: b.toarray(), "
        "dtype=X.dtype) for a dask array, X.toarray() in memory. For principal "
        "components of sparse data use PCA or SparsePCA, which keep it sparse"
    )
