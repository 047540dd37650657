"""Sparse PCA as dictionary learning: the exact alternation ("batch") and online
minibatches.

Per sample, ``min_{Y, D} (1/2n) ‖Xc − Y Dᵀ‖²_F + α ‖D‖₁`` with bounded codes, where
``α = alpha / √n`` (``alpha_per_sample_``) for the user's ``alpha`` of scikit-learn's
units (see :class:`~scalepca.SparsePCA`); the kernels (code step, block coordinate
descent, per-block statistics) are in :mod:`scalepca.linalg.sparse`. This module holds
the two iterations over them, each a state, an init and a step run by the driver of
:mod:`._iterate` (history, stopping rule, checkpoints):

* ``"batch"`` — a step is one alternation: the statistics of the dictionary (from the
  covariance, or one pass over the data), its optimal codes and cost, then block
  coordinate descent to the next dictionary;
* ``"minibatch"`` — a step is one minibatch (a fixed range of rows, whatever the
  chunking): its statistics, folded into online averages A, B (Mairal et al. 2009), then
  a few sweeps of coordinate descent. The statistics of the next minibatches are read
  ahead, computed with the dictionary of ``PIPELINE_LAG`` updates before; the state
  keeps those dictionaries, so a resumed fit recomputes the minibatches in flight with
  them.

:class:`DictionaryLearning` is mixed into :class:`~scalepca.SparsePCA`, whose
parameters it reads; ``partial_fit`` streams minibatches given by the user.
"""

from __future__ import annotations

import logging
import time

import dask
import numpy as np

from .._client import current_client
from .._validation import check_random_state_seed
from ..io._checkpoint import array_digest
from ..io._fingerprint import random_state_param, result_params
from ..linalg import (
    eigh_descending,
    flip_signs,
    moments_graph,
    passes,
    randomized_svd_centered,
)
from ..linalg.moments import gram_precision
from ..linalg.sparse import (
    code_stats_graph,
    code_step,
    dictionary_bcd,
    dictionary_objective,
    recentre_code_stats,
    revive_codes,
    scale_columns,
)
from ..solvers.choice import AUTO_MAX_GRAM_FEATURES
from ._iterate import (
    AnyOf,
    ChangeBelow,
    IterationCheckpoint,
    NoImprovement,
    iterate,
)
from .base import _feature_template, raise_on_nonfinite

logger = logging.getLogger(__name__)

#: minibatch statistics are computed with the dictionary of this many updates ago, so
#: the next minibatches can be read while the current one is being used (deterministic,
#: any worker count); never more than the minibatches of one epoch
PIPELINE_LAG = 3
#: coordinate-descent sweeps of the dictionary after each minibatch
ONLINE_SWEEPS = 10
#: default minibatches: at most this many per epoch ...
DEFAULT_MINIBATCHES = 8
#: ... of at least this many rows
MIN_BATCH_ROWS = 256


#: SparsePCA parameters left out of a checkpoint's fingerprint, and why they do not
#: change the result of ``"batch"`` or ``"minibatch"``
FINGERPRINT_IGNORES = {
    "checkpoint": "where the commits are written",
    "checkpoint_every": "how often commits are written; the steps are the same",
    "tol": "a stopping parameter: evaluated again on resume",
    "max_iter": "a stopping parameter: evaluated again on resume",
    "max_no_improvement": "a stopping parameter: evaluated again on resume",
    "ridge_alpha": "method='elasticnet' only, which has no checkpoint",
    "n_nonzero": "method='elasticnet' only, which has no checkpoint",
}


def default_batch_rows(n: int) -> int:
    """Rows per minibatch when ``batch_size`` is None: ``max(256, ⌈n / 8⌉)``."""
    return max(MIN_BATCH_ROWS, -(-n // DEFAULT_MINIBATCHES))


def minibatch_bounds(n: int, batch_size: int | None) -> np.ndarray:
    """Row boundaries of the minibatches: ``max(1, n // rows)`` consecutive ranges of
    (nearly) equal size, ``rows = batch_size`` (default :func:`default_batch_rows`).
    They depend on the number of rows only, never on how the rows are chunked."""
    rows = default_batch_rows(n) if batch_size is None else int(batch_size)
    return np.linspace(0, n, max(1, n // rows) + 1).round().astype(np.int64)


def centred_squares(mom: dict) -> np.ndarray:
    """Each feature's centred sum of squares in the moments ``mom``: the diagonal of
    the Gram when the pass formed one, else the sums it kept instead."""
    return np.diag(mom["m2"]) if mom.get("m2") is not None else mom["ss"]


def _new_online_state(d: int, k: int) -> dict:
    return {
        "A": np.zeros((k, k)),
        "B": np.zeros((d, k)),
        "W": 0.0,
        "t": 0,
        "lam": None,
        "D_G": None,
    }


class DictionaryLearning:
    """The dictionary methods of :class:`~scalepca.SparsePCA` (mixed into it)."""

    # -- start -------------------------------------------------------------------------
    def _fit_dictionary(
        self,
        X,
        mom: dict,
        mean,
        scale,
        cov_n,
        var_n,
        k: int,
        data_fp: dict | None = None,
    ) -> None:
        """Fit ``"batch"`` or ``"minibatch"`` after the first pass (moments, land
        mask); ``data_fp``: the input's shape, dtype and sketch, for a checkpoint's
        fingerprint."""
        n = int(mom["n"])
        seed = check_random_state_seed(self.random_state)
        total_n = float(np.sum(var_n / (1.0 if scale is None else scale**2)))
        ckpt = None
        if self.checkpoint is not None:
            ckpt = IterationCheckpoint(
                self.checkpoint,
                self._fingerprint(X, k, mom, scale, data_fp),
            )
        init_seed, order_seed = seed.spawn(2)
        # the minibatch order is drawn from this seed, kept in the state
        # (random_state=None)
        order = {
            "order_entropy": str(order_seed.entropy),
            "order_spawn_key": list(order_seed.spawn_key),
        }

        def init_dictionary() -> np.ndarray:
            return self._init_dictionary(X, cov_n, mean, scale, total_n, k, init_seed)

        if self.method == "batch":
            if cov_n is not None:
                stats = _covariance_stats(cov_n)
            else:

                def stats(D):
                    return self._stats_pass(X, mean, scale, D)

            D, (P, G, s) = self._fit_batch(stats, init_dictionary, cov_n, ckpt=ckpt)
        else:
            D = self._fit_minibatch(X, mean, scale, init_dictionary, order, ckpt=ckpt)
            self.n_polish_ = 0
            # exact alternations from the covariance: no data pass
            if cov_n is not None:
                D, _, _, self.n_polish_, _ = self._alternate(
                    _covariance_stats(cov_n),
                    lambda: D,
                    cov_n,
                    max_iter=self.max_iter,
                    name="SparsePCA minibatch polish",
                )
            P, G, s = self._stats_pass(X, mean, scale, D, label="final")
            self._keep_online_state(D, P, G, s, mean, n, scale)
        self._finish_dictionary(D, P, G, s, n)

    def _fingerprint(self, X, k: int, mom: dict, scale, data_fp: dict) -> dict:
        """What identifies the problem a checkpoint belongs to (see ``checkpoint``):
        every parameter but those of :data:`FINGERPRINT_IGNORES`, then the data: the
        shape fitted (after features NaN in every sample leave) and ``data_fp`` (the
        input's shape, dtype and sketch), with digests of the moments."""
        var = centred_squares(mom)
        params = result_params(
            self,
            FINGERPRINT_IGNORES,
            {
                "n_components": k,
                "alpha": float(self._alphas[0]),
                "random_state": random_state_param(self.random_state),
            },
        )
        row_chunks = None  # the minibatches are cut from the row chunks
        if self.method == "minibatch":
            row_chunks = array_digest(X.chunks[0])
        stats = {
            "alpha_per_sample": self.alpha_per_sample_,
            "row_chunks": row_chunks,
            "n": int(mom["n"]),
            "mean": array_digest(mom["mean"]),
            "var": array_digest(var),
            "scale": None if scale is None else array_digest(scale),
        }
        return {
            "estimator": "SparsePCA",
            **params,
            "shape": list(X.shape),
            "input_shape": data_fp["shape"],
            "dtype": data_fp["dtype"],
            **stats,
            "data_sketch": data_fp["data_sketch"],
        }

    def _init_dictionary(self, X, cov_n, mean, scale, total_n, k, seed) -> np.ndarray:
        """``D = V_k Λ_k^½`` from PCA (the solution at α = 0), or random directions
        scaled to the average variance."""
        d = len(cov_n) if cov_n is not None else X.shape[1]
        if self.init == "pca":
            if cov_n is not None:
                evals, V = eigh_descending(cov_n, k)
                evals = np.maximum(evals[:k], 0.0)
            else:
                Xs, m = X, mean
                if scale is not None:  # the standardised data
                    Xs, m = scale_columns(X, scale), mean / scale
                # its 2 + 2·4 passes are counted by linalg.passes on the fit's counter
                s, Vt = randomized_svd_centered(Xs, m, k, seed=seed)
                V, evals = Vt.T, s**2 / X.shape[0]
            # C order, as a commit stores it: a resumed fit repeats the fresh one bit
            # for bit
            return np.ascontiguousarray(
                V[:, :k] * np.sqrt(np.maximum(evals, 1e-300 * max(total_n, 1e-300)))
            )
        rng = np.random.default_rng(seed)
        D = rng.standard_normal((d, k))
        D /= np.linalg.norm(D, axis=0)
        return D * np.sqrt(max(total_n, 1e-300) / d)

    def _stats_pass(self, X, mean, scale, D, *, label="codes"):
        """Per-sample statistics ``(P, G, s)`` of ``Z = Xc D`` in one pass over
        ``X``."""
        blocks = X.to_delayed(optimize_graph=True).ravel().tolist()
        with self._timed_pass(label):
            (st,) = dask.compute(code_stats_graph(blocks, mean, scale, D))
        m = st["n"]
        return st["P"] / m, st["G"] / m, st["S"] / m

    # -- "batch": exact alternation ----------------------------------------------------
    def _fit_batch(self, stats, init, C=None, *, ckpt=None):
        """The ``"batch"`` method: :meth:`_alternate` to convergence, checkpointed.

        Sets ``n_iter_``, ``cost_history_`` and ``resumed_from_``; returns the final
        D and its statistics ``(P, G, s)``.
        """
        D, last, history, self.n_iter_, self.resumed_from_ = self._alternate(
            stats, init, C, max_iter=self.max_iter, ckpt=ckpt, name="SparsePCA batch"
        )
        self.cost_history_ = np.asarray(history)
        return D, last

    def _alternate(self, stats, init, C=None, *, max_iter: int, ckpt=None, name: str):
        """Alternate optimal codes for D (from ``stats(D) = (P, G, s)``) and BCD on D.

        A step evaluates the cost of the dictionary it starts from and moves to the
        next one; the run stops when that cost decreases by at most ``tol`` relative
        (it returns the dictionary that cost belongs to) or after ``max_iter``
        dictionary updates (it then computes the statistics of the last one). With
        the covariance ``C``, zero columns get the residual's leading direction as
        code (:func:`revive_codes`), so a component removed early can come back.
        Returns the final D, its statistics ``(P, G, s)``, the cost history, the
        dictionary updates run and the steps taken from a checkpoint.
        """
        alpha = self.alpha_per_sample_

        def step(state, it):
            D = state["D"]
            P, G, s = stats(D)
            A, B, lam = code_step(D, P, G, state["lam"])
            cost = dictionary_objective(D, A, B, s, alpha)
            if C is not None:
                A, B = revive_codes(C, D, A, B)
            nxt, _ = dictionary_bcd(D, A, B, alpha)
            return {"D": nxt, "lam": lam, "D_cost": D, "P": P, "G": G, "s": float(s)}, {
                "cost": cost
            }

        run = iterate(
            step,
            lambda: {"D": init(), "lam": None},
            stop=ChangeBelow("cost", self.tol, relative=True, label="objective"),
            max_iter=max_iter,
            checkpoint=ckpt,
            checkpoint_every=self.checkpoint_every,
            name=name,
            warn=False,
        )
        state, history = run.state, list(run.history.get("cost", []))
        # the dictionary whose cost stopped the run (a commit of the layout before the
        # iteration driver holds only the next one: its cost is computed below)
        if run.converged and "D_cost" in state:
            D, last, n_iter = (
                state["D_cost"],
                (state["P"], state["G"], state["s"]),
                run.n_iter - 1,
            )
        else:  # max_iter updates: the cost of the last dictionary ends the history
            D, n_iter = state["D"], run.n_iter
            last = stats(D)
            A, B, _ = code_step(D, last[0], last[1], state["lam"])
            history.append(dictionary_objective(D, A, B, last[2], alpha))
        return D, last, history, n_iter, run.resumed_from

    # -- "minibatch": online dictionary learning ---------------------------------------
    def _online_update(
        self, state: dict, D_used, st: dict, D
    ) -> tuple[np.ndarray, float]:
        """Fold one minibatch's statistics (computed with ``D_used``) into the online
        surrogate and update the dictionary ``D``. Returns (new D, the minibatch's
        objective at D_used)."""
        alpha = self.alpha_per_sample_
        m = st["n"]
        A_t, B_t, state["lam"] = code_step(
            D_used, st["P"] / m, st["G"] / m, state["lam"]
        )
        cost = dictionary_objective(D_used, A_t, B_t, st["S"] / m, alpha)
        state["t"] += 1
        beta = (1.0 - 1.0 / state["t"]) ** self.forget_factor
        state["A"] = beta * state["A"] + m * A_t
        state["B"] = beta * state["B"] + m * B_t
        state["W"] = beta * state["W"] + m
        state["D_G"] = (
            D_used  # partial_fit's variance estimate needs the dictionary used
        )
        D, _ = dictionary_bcd(
            D,
            state["A"] / state["W"],
            state["B"] / state["W"],
            alpha,
            max_sweeps=ONLINE_SWEEPS,
        )
        return D, cost

    def _fit_minibatch(
        self, X, mean, scale, init_dictionary, order: dict, *, ckpt=None
    ):
        """Online dictionary learning over the minibatches of :func:`minibatch_bounds`.

        A driver step is one minibatch. The state holds the online statistics, the
        last ``lag`` dictionaries (``dicts``, oldest first; the newest is the current
        one), the running epoch cost and the seed of the minibatch order. Returns the
        final dictionary.
        """
        bounds = minibatch_bounds(X.shape[0], self.batch_size)
        feed = _MinibatchFeed(self, X, mean, scale, bounds)
        n_groups, lag = feed.n_groups, feed.lag
        clock = {"epoch": time.perf_counter()}

        def init():
            D = init_dictionary()
            return {
                **_new_online_state(*D.shape),
                "dicts": D[None],
                "epoch_cost": 0.0,
                "epoch_rows": 0,
                "epoch_times": [],
                **order,
            }

        def step(state, it):
            s = (
                it - 1
            )  # this minibatch; state["dicts"][-1] is the dictionary after s updates
            st, D_used = feed.take(s, state)
            D, cost = self._online_update(state, D_used, st, state["dicts"][-1])
            state["dicts"] = np.concatenate([state["dicts"], D[None]])[-lag:]
            state["epoch_cost"] += cost * st["n"]
            state["epoch_rows"] += st["n"]
            record = {"cost": cost, "weight": st["n"] / (X.shape[0] + 1.0)}
            if it % n_groups == 0:
                record["epoch"] = self._end_epoch(state, clock)
            return state, record

        stop = AnyOf(
            ChangeBelow("epoch", self.tol, relative=True, label="epoch objective"),
            NoImprovement("cost", self.max_no_improvement, weight_key="weight"),
        )
        try:
            run = iterate(
                step,
                init,
                stop=stop,
                max_iter=n_groups * self.max_iter,
                checkpoint=ckpt,
                checkpoint_every=self.checkpoint_every,
                name="SparsePCA minibatch",
                warn=False,
            )
        finally:
            feed.cancel()
        state, history = run.state, list(run.history.get("epoch", []))
        if state["epoch_rows"]:  # a partial last epoch
            history.append(self._end_epoch(state, clock))
        self.resumed_from_ = run.resumed_from
        self.n_iter_, self.n_steps_ = len(history), run.n_iter
        self.cost_history_ = np.asarray(history)
        self.epoch_times_ = np.asarray(state["epoch_times"])
        D = state["dicts"][-1]
        self._online_state = {key: state[key] for key in _new_online_state(1, 1)} | {
            "D": D
        }
        return D

    def _end_epoch(self, state: dict, clock: dict) -> float:
        """Close the epoch (a pass over the data): its row-weighted mean minibatch
        cost."""
        now = time.perf_counter()
        state["epoch_times"] = [*state["epoch_times"], now - clock["epoch"]]
        passes.counter_of(self).record(
            f"epoch {len(state['epoch_times'])}", state["epoch_times"][-1]
        )
        clock["epoch"] = now
        cost = state["epoch_cost"] / state["epoch_rows"]
        logger.info(
            "SparsePCA: epoch %d objective %.6g (%.2fs)",
            len(state["epoch_times"]),
            cost,
            state["epoch_times"][-1],
        )
        state["epoch_cost"], state["epoch_rows"] = 0.0, 0
        return cost

    def _keep_online_state(self, D, P, G, s, mean, n, scale) -> None:
        """Leave what ``partial_fit`` needs to go on from a minibatch ``fit``.

        The running mean and row count are the fit's; the statistics it carries (the
        online sums A and B, and the code Gram normalised by the dictionary's column
        norms) are set from the exact per-sample statistics of the final pass, at the
        weight the online state has reached: the online surrogate is then the
        objective of the data at the final (polished) dictionary, which is its own
        minimiser, so streaming goes on from there.
        """
        if scale is not None:
            self._online_state = None  # standardised fits cannot stream on
            return
        state = self._online_state
        A, B, lam = code_step(D, P, G, state["lam"])
        norms = np.linalg.norm(D, axis=0)
        safe = np.where(norms > 0, norms, 1.0)
        W = state["W"]
        state.update(
            mean=np.asarray(mean, dtype=np.float64).copy(),
            N=int(n),
            A=A * W,
            B=B * W,
            lam=lam,
            S=float(s) * W,
            Gu=G / np.outer(safe, safe) * W,
            D_G=D,
            D=D,
        )

    def _finish_dictionary(self, D, P, G, s, n) -> None:
        """Fitted attributes from the final dictionary and its per-sample statistics."""
        A, B, _ = code_step(D, P, G)
        self.objective_ = float(
            dictionary_objective(D, A, B, s, self.alpha_per_sample_)
        )
        norms = np.linalg.norm(D, axis=0)
        safe = np.where(norms > 0, norms, 1.0)
        gram = G / np.outer(safe, safe)
        order = np.argsort(-np.diag(gram), kind="stable")
        C, Dsigned = flip_signs((D / safe)[:, order].T, D[:, order])
        self.loadings_ = Dsigned.T
        ratio = 1.0 if n is None else n / max(n - 1, 1)
        self._set_components(C, gram[np.ix_(order, order)] * ratio, s * ratio, norms)

    # -- streaming by the user ---------------------------------------------------------
    def partial_fit(self, X, y=None):
        """Update the model with one chunk of rows (``"minibatch"`` only).

        The first call initialises the dictionary from that chunk (reading it twice);
        later calls read their chunk once. Rows are centred by the running mean of all
        rows seen; each chunk's statistics are re-centred exactly when the mean moves.
        Features NaN in every row of the first chunk (or of the data of the ``fit`` this
        continues) are left out for good; a later chunk with values there is refused.

        Returns
        -------
        self
        """
        state = getattr(self, "_online_state", None)
        if state is None and self.__sklearn_is_fitted__():
            raise ValueError(
                "partial_fit can only continue a model built by partial_fit or by "
                "fit(method='minibatch') in this session, without use_correlation"
            )
        data = self._input(X) if state is None else self._transform_input(X)
        if state is None:
            state = self._start_stream(data)
        m, d_in = data.data.shape
        D = state["D"]
        blocks, dropped_all_nan = _kept_blocks(
            data.data, getattr(self, "_features_kept", None)
        )
        with self._timed_pass("partial_fit"):
            st, still_nan = dask.compute(
                code_stats_graph(blocks, state["mean"], None, D, with_sums=True),
                dropped_all_nan,
            )
        raise_on_nonfinite(int(not np.isfinite(st["S"])))
        if not still_nan:
            raise ValueError(
                "X has values at features that were NaN in every "
                "sample of the data the model was started on (left "
                "out of the fit); a streamed model keeps its features"
            )
        N = state["N"] + m
        delta = st["sum_x"] / N  # running mean moves by Σ(x − mean_old) / N
        st = recentre_code_stats(st, delta, D)
        state["mean"] = state["mean"] + delta
        state["N"] = N
        # the objective of the N rows seen so far, per sample (alpha is scikit-learn's)
        self.alpha_per_sample_ = self._per_sample_alpha(N)
        D, _ = self._online_update(state, D, st, D)
        beta = (1.0 - 1.0 / state["t"]) ** self.forget_factor
        norms = np.linalg.norm(state["D_G"], axis=0)
        safe = np.where(norms > 0, norms, 1.0)
        state["Gu"] = beta * state["Gu"] + st["G"] / np.outer(safe, safe)
        state["S"] = beta * state["S"] + st["S"]
        state["D"] = D
        self._online_state = state
        self._set_streamed(state, D, N)
        self._widen_features(d_in)
        return self

    def _start_stream(self, data) -> dict:
        """The first ``partial_fit`` call: parameters, moments of the chunk, the
        dictionary."""
        m, d = data.data.shape
        self._features_kept = None
        k = self._checked_k(m, d, data.data)
        if self.method != "minibatch":
            raise ValueError(
                f"partial_fit needs method='minibatch'; got {self.method!r}"
            )
        if self.use_correlation:
            raise ValueError("use_correlation=True is not supported by partial_fit")
        self.n_passes_ = 0
        gram = self.init == "pca" and d <= AUTO_MAX_GRAM_FEATURES
        with self._timed_pass("moments"):
            (mom,) = dask.compute(moments_graph(data.data, with_gram=gram))
        mom, d, k = self._leave_out_all_nan(mom, m, d, k, data)
        var = centred_squares(mom) / m
        seed = check_random_state_seed(self.random_state).spawn(2)[0]
        if gram:
            D = self._init_dictionary(
                None, mom["m2"] / m, None, None, float(var.sum()), k, seed
            )
        else:  # no covariance of a wide chunk: random directions
            D = np.random.default_rng(seed).standard_normal((d, k))
            D *= np.sqrt(max(float(var.sum()), 1e-300) / d) / np.linalg.norm(D, axis=0)
        self.n_features_in_ = d
        self.n_components_ = k
        self.scale_ = np.ones(d)
        self._feature_template = _feature_template(data)
        self._preprocessing = data.prep  # later chunks and transform repeat it
        return {
            **_new_online_state(d, k),
            "D": D,
            "N": 0,
            "S": 0.0,
            "Gu": np.zeros((k, k)),
            "mean": np.asarray(mom["mean"], dtype=np.float64),
        }

    def _set_streamed(self, state: dict, D, N: int) -> None:
        """Fitted attributes after ``partial_fit``: the variance is an estimate from the
        weighted minibatch statistics (computed with earlier dictionaries)."""
        self.mean_ = state["mean"].copy()
        self.n_samples_ = int(N)
        self.n_iter_ = state["t"]
        gram = state["Gu"] / state["W"]
        norms = np.linalg.norm(D, axis=0)
        safe = np.where(norms > 0, norms, 1.0)
        order = np.argsort(-np.diag(gram), kind="stable")
        C = flip_signs((D / safe)[:, order].T)
        ratio = N / max(N - 1, 1)
        self._set_components(
            C, gram[np.ix_(order, order)] * ratio, state["S"] / state["W"] * ratio
        )


class _MinibatchFeed:
    """The statistics of the minibatches, read ahead: minibatch ``s`` is computed
    with the dictionary after ``s − lag + 1`` updates, so up to ``lag`` are in
    flight. A cache of futures beside the driver's state; the state alone decides
    every result."""

    def __init__(self, est, X, mean, scale, bounds):
        self.batches = [
            X[a:b].to_delayed(optimize_graph=True).ravel().tolist()
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        self.n_groups = len(self.batches)
        self.lag = min(
            PIPELINE_LAG, self.n_groups
        )  # in flight: at most one epoch's worth
        self.est, self.mean, self.scale = est, mean, scale
        # epochs work in the data's precision (float32 data: float32 products, see
        # block_code_stats) unless the gram-precision setting asks for float64 products;
        # the final pass reporting objective_ and the variances is float64
        self.dtype = (
            np.float64
            if gram_precision() == "float64"
            else np.result_type(X.dtype, np.float32)
        )
        self.client = current_client()
        self.pending: dict[int, tuple] = {}
        self.schedule: list[int] = []
        self.rng = None

    def group_at(self, s: int, state: dict) -> int:
        """The minibatch visited at step ``s`` (a new random order every epoch if
        shuffled)."""
        if self.rng is None:
            self.rng = np.random.default_rng(
                np.random.SeedSequence(
                    int(state["order_entropy"]),
                    spawn_key=tuple(state["order_spawn_key"]),
                )
            )
        while len(self.schedule) <= s:
            if self.est.shuffle:
                self.schedule.extend(self.rng.permutation(self.n_groups))
            else:
                self.schedule.extend(range(self.n_groups))
        return int(self.schedule[s])

    def take(self, s: int, state: dict):
        """``(statistics, dictionary used)`` of minibatch ``s``; submits the next
        ones."""
        dicts, done = state["dicts"], state["t"]  # dicts[-1]: after ``done`` updates
        total = self.n_groups * self.est.max_iter
        for r in range(s, min(s + self.lag, total)):
            if r not in self.pending:
                Dr = dicts[max(r - self.lag + 1, 0) - (done - len(dicts) + 1)]
                graph = code_stats_graph(
                    self.batches[self.group_at(r, state)],
                    self.mean,
                    self.scale,
                    Dr,
                    dtype=self.dtype,
                )
                if self.client is not None:
                    fut = self.client.compute(graph)
                else:
                    fut = _Deferred(graph)
                self.pending[r] = (fut, Dr)
        fut, D_used = self.pending.pop(s)
        t_wait = time.perf_counter()
        st = _result(fut)
        logger.debug(
            "SparsePCA: minibatch %d waited %.3fs", s, time.perf_counter() - t_wait
        )
        return st, D_used

    def cancel(self) -> None:
        for fut, _ in self.pending.values():
            if hasattr(fut, "cancel"):
                fut.cancel()
        self.pending.clear()


def _covariance_stats(C: np.ndarray):
    """``stats(D) = (C D, Dᵀ C D, tr C)``: the per-sample code statistics from the
    covariance."""

    def stats(D):
        return C @ D, D.T @ C @ D, float(np.trace(C))

    return stats


def dictionary_objective_on(X, D, alpha: float, mean, scale=None) -> float:
    """``(1/2n)‖Xc − Y Dᵀ‖² + α‖D‖₁`` with optimal bounded codes Y, in one pass over
    ``X``.

    ``Xc = (X − mean) / scale``. scikit-learn's ``SparsePCA`` solution (U, V)
    corresponds to ``D = Vᵀ / √n`` and ``alpha = alpha_sklearn / √n``; the value is
    then its objective / n (or less, the codes being re-optimised).
    """
    D = np.asarray(D, dtype=np.float64)
    blocks = X.to_delayed(optimize_graph=True).ravel().tolist()
    (st,) = dask.compute(
        code_stats_graph(blocks, np.asarray(mean, dtype=np.float64), scale, D)
    )
    m = st["n"]
    A, B, _ = code_step(D, st["P"] / m, st["G"] / m)
    return float(dictionary_objective(D, A, B, st["S"] / m, alpha))


def _kept_blocks(X, keep):
    """Delayed row blocks of ``X`` restricted to the ``keep`` features, and a Delayed
    that is True when the other features are NaN in every row (True if all are kept).
    Each block is read once for both."""
    blocks = X.to_delayed(optimize_graph=True).ravel().tolist()
    if keep is None:
        return blocks, True
    kept = [dask.delayed(np.compress, pure=True)(keep, b, axis=1) for b in blocks]
    nan = [dask.delayed(_all_nan, pure=True)(b, ~keep) for b in blocks]
    return kept, dask.delayed(all, pure=True)(nan)


def _all_nan(block, columns) -> bool:
    return bool(np.isnan(np.asarray(block)[:, columns]).all())


class _Deferred:
    """A graph computed when its result is asked for (schedulers without futures)."""

    def __init__(self, graph):
        self.graph = graph

    def result(self):
        (out,) = dask.compute(self.graph)
        return out


def _result(fut, wait: float = 10.0):
    """``fut.result()``; if the scheduler goes away while the result is being
    fetched, the error is the client's own "lost the connection to the scheduler"
    cancellation (as for ``dask.compute``) rather than the socket error of the
    interrupted transfer."""
    try:
        return fut.result()
    except OSError:  # distributed's CommClosedError is an OSError
        if not hasattr(fut, "status"):
            raise
        deadline = time.monotonic() + wait
        while fut.status != "cancelled" and time.monotonic() < deadline:
            time.sleep(0.05)
        if fut.status != "cancelled":
            raise
    return fut.result()  # raises FutureCancelledError naming the lost connection
