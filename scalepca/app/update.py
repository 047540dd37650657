"""``scalepca run --update`` (``output.update: true``): a model brought up to date with
the rows appended to its store since the previous run, reading only those rows.

PLINK genotypes grow the same way: ``data.path`` lists the ``.bed`` files of a cohort
that arrives in batches (read as one matrix, :mod:`scalepca.io._bed_cohorts`); the next
run lists one more file, after those the model has seen, and its samples are the new
rows.

A zarr store grows along its sample dimension (``zarr.Array.append`` on a scalepca
dataset, ``Dataset.to_zarr(append_dim=...)`` on an xarray field). The previous run left
its model (``output.store/model.zarr``) with the moments of every row it has seen
(``n_samples_seen_`` of them, see :mod:`scalepca.models._incremental`) and a *sketch* of
those rows (:func:`rows_sketch`). An update:

1. checks, before any data are read (``scalepca validate`` says the same,
   :func:`update_problems`): the store is a zarr store, the model is there and can be
   updated (its method merges moments, it kept them, it was fitted with the config's
   method and parameters), the store has not shrunk, its features are the model's, and
   the scores store holds the rows seen;
2. re-reads the sketch's rows and refuses if any changed (:meth:`Update.check_rows`);
3. reads the new rows once (``partial_fit`` on ``X[n_samples_seen_:]``: dask's slicing
   of the lazily opened store reads only the chunks that hold them);
4. appends their scores to ``scores.zarr`` (the old rows' scores are not rewritten),
   then saves the model, then marks the scores complete (:meth:`Update.write`).

What the sketch catches: rows replaced, removed or inserted before the end of the old
rows, the store rewritten with other data or in another order, the last old row changed
— all seen when one of the sampled rows (the first and last old row and a few seeded
rows in a few chunks) differs. What it cannot catch: a single value edited in a row it
did not sample.

An interrupted update loses nothing: the scores store is flagged ``complete: false``
with ``appending: {from, to}`` while rows are appended, and the model is replaced
atomically afterwards. The next update finds the flag and either drops the appended
rows (the model still has ``from`` rows: the update is then done again) or completes
the flag (the model was saved: only the flag was missing).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .outputs import PARTS
from .pipeline import UserError, write_outputs

#: rows of a few chunks the sketch samples (besides the first and the last row seen)
SKETCH_CHUNKS, SKETCH_ROWS_PER_CHUNK = 3, 2
_OTHER_OUTPUTS = ("reconstruction", "low_rank", "sparse")


def _row_digests(block: np.ndarray) -> np.ndarray:
    """Two 64-bit words of a BLAKE2b digest of each row's bytes (on a worker)."""
    block = np.ascontiguousarray(block)
    out = np.empty((block.shape[0], 2), dtype=np.uint64)
    for i, row in enumerate(block):
        out[i] = np.frombuffer(
            hashlib.blake2b(row.tobytes(), digest_size=16).digest(), dtype=np.uint64
        )
    return out


def _matrix(X):
    """The dask array of the opened matrix (a DataArray's data)."""
    return getattr(X, "data", X) if hasattr(X, "dims") else X


def _digests(X, positions) -> list[str]:
    """The digests of rows ``positions`` of the lazily opened matrix: a read of those
    rows' chunks only, hashed where they are read (no row comes to the client)."""
    import dask.array as da

    A = _matrix(X)
    if not isinstance(A, da.Array):
        A = da.from_array(np.asarray(A))
    rows = A[np.asarray(positions, dtype=np.int64)]
    if rows.numblocks[1] > 1:
        rows = rows.rechunk({1: -1})
    words = rows.map_blocks(
        _row_digests, dtype=np.uint64, chunks=(rows.chunks[0], (2,))
    )
    return [f"{a:016x}{b:016x}" for a, b in words.compute()]


def sketch_positions(row_chunks, n: int, seed: int = 0) -> list[int]:
    """The rows a sketch of the first ``n`` rows samples: the first and the last, and
    ``SKETCH_ROWS_PER_CHUNK`` seeded rows in each of ``SKETCH_CHUNKS`` seeded chunks."""
    bounds = np.concatenate([[0], np.cumsum(row_chunks)])
    blocks = [i for i in range(len(bounds) - 1) if bounds[i] < n]
    rng = np.random.default_rng([seed, n])
    picked = rng.choice(
        len(blocks), size=min(SKETCH_CHUNKS, len(blocks)), replace=False
    )
    positions = {0, n - 1}
    for b in sorted(blocks[i] for i in picked):
        lo, hi = int(bounds[b]), int(min(bounds[b + 1], n))
        positions.update(
            int(p) for p in rng.integers(lo, hi, size=SKETCH_ROWS_PER_CHUNK)
        )
    return sorted(positions)


def rows_sketch(X, n: int, seed: int = 0) -> dict:
    """A record of the first ``n`` rows of ``X``: sampled rows' positions and
    digests."""
    positions = sketch_positions(_matrix(X).chunks[0], n, seed)
    return {
        "n_rows": int(n),
        "n_features": int(X.shape[1]),
        "dtype": str(X.dtype),
        "seed": int(seed),
        "positions": positions,
        "digests": _digests(X, positions),
    }


def updatable_store(dcfg: dict) -> str | None:
    """Why ``--update`` cannot read ``data`` (``None``: a zarr store it can)."""
    from .config import data_kind

    kind = data_kind(dcfg)
    if kind == "bed" and not isinstance(dcfg["path"], list):
        return (
            f"data.path {dcfg['path']!r} is one PLINK .bed file; --update adds "
            "the samples of new .bed files: list the files, the ones already "
            "fitted first (data.path: [batch1.bed, batch2.bed])"
        )
    if kind not in ("zarr", "bed"):
        return (
            f"data.path {dcfg['path']!r} is {'an' if kind == 'anndata' else 'a'} "
            f"{kind} store; --update (output.update) reads a zarr store grown "
            "along its samples (a scalepca dataset or an xarray zarr store) or a "
            "list of PLINK .bed files (a cohort in batches)"
        )
    return None


def record_rows(est, X, cfg: dict, timings=None) -> None:
    """Keep a sketch of the fitted rows in ``est`` (saved with it) when a later
    ``--update`` could update it: an updatable model of a zarr store or of PLINK .bed
    files (one file too: the list of a later update starts with it). ``timings``: the
    run's :class:`~scalepca.app.timing.RunTimings`, where reading the sampled rows is a
    stage of its own."""
    # n_samples_seen_: the count of the moments an update merges with
    if not hasattr(est, "partial_fit") or getattr(est, "n_samples_seen_", None) is None:
        return
    from .config import data_kind

    # a zarr store or .bed files: a single .bed file too, which a later update's list
    # starts with
    if data_kind(cfg["data"]) not in ("zarr", "bed") or _sample_dim(X) is False:
        return
    if timings is None:
        est.rows_sketch = rows_sketch(X, X.shape[0])
        return
    with timings.stage("sampling rows for a later --update"):
        est.rows_sketch = rows_sketch(X, X.shape[0])


def _sample_dim(X):
    """The sample dim of a DataArray (``None`` for an array; ``False``: stacked
    samples)."""
    if not hasattr(X, "dims"):
        return None
    dim = X.dims[0]
    if dim in X.indexes and X.indexes[dim].nlevels > 1:
        return False
    return dim


@dataclass
class Update:
    """An update checked against the model and the store, before any data are read."""

    est: object
    X: object
    n_seen: int
    scores: str | None
    storage_options: dict | None
    pending: dict | None = None
    sample_dim: str | None = None
    written: list = field(default_factory=list)

    @property
    def n_total(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_new(self) -> int:
        return self.n_total - self.n_seen

    def new_rows(self):
        """The appended rows, lazily (only their chunks are read)."""
        if self.sample_dim is None:
            return self.X[self.n_seen :]
        return self.X.isel({self.sample_dim: slice(self.n_seen, None)})

    def check_rows(self) -> None:
        """Re-read the sketch's rows; refuse if any differs from when the model saw
        it."""
        sk = self.est.rows_sketch
        now = _digests(self.X, sk["positions"])
        changed = [
            p
            for p, a, b in zip(sk["positions"], sk["digests"], now, strict=True)
            if a != b
        ]
        if changed:
            raise UserError(
                f"data.path: the rows the model has seen changed "
                f"(row{'s' * (len(changed) > 1)} {', '.join(map(str, changed[:5]))} "
                f"of the first {self.n_seen:,} differ from "
                "when it was fitted); --update only adds rows appended since. Run "
                "without --update to fit the store as it is now"
            )

    def summary_lines(self) -> list[str]:
        """What ``run`` prints after the fit's summary."""
        return [
            f"update: {self.n_seen:,} rows seen before + {self.n_new:,} new rows = "
            f"{self.n_total:,}; passes over the new rows only: "
            f"{getattr(self.est, 'n_passes_', '?')}"
        ]

    def report_rows(self) -> dict:
        return {
            "update": f"{self.n_seen:,} rows seen before, {self.n_new:,} new rows read "
            f"({getattr(self.est, 'n_passes_', '?')} pass over the new rows only)"
        }

    def write_outputs(self, out: dict, written: list, timings) -> None:
        """``run``'s outputs: :meth:`write`, timed as the stage "writing outputs"."""
        with timings.stage("writing outputs"):
            self.write(out, written, timings=timings)

    def write(self, out: dict, written: list | None = None, timings=None) -> list[str]:
        """Append the new rows' scores, save the model, then mark the scores complete;
        return the paths written (also appended to ``written`` as each is complete).
        ``timings``: the run's :class:`~scalepca.app.timing.RunTimings`, which count
        the pass over the new rows that their scores make."""
        from ..models._saving import save_estimator
        from . import _scores_append as sa
        from .timing import data_pass

        root = out["store"].rstrip("/")
        if self.pending is not None:
            sa.finish_interrupted_update(
                self.scores,
                self.pending,
                self.n_seen,
                self.storage_options,
                self.sample_dim,
            )
        if self.n_new == 0:
            return []
        if self.scores is not None:
            new = self.est.transform(self.new_rows())
            with data_pass(timings, "appending the new rows' scores"):
                sa.append(
                    self.scores, new, self.n_seen, self.storage_options, self.sample_dim
                )
        self.est.rows_sketch = rows_sketch(self.X, self.n_total)
        model = f"{root}/{PARTS['model'][0]}"
        save_estimator(
            self.est,
            model,
            storage_options=self.storage_options,
            overwrite=True,
            flag="output.update: true",
        )
        written = [] if written is None else written
        written.append(model)
        if self.scores is not None:
            sa.finish(self.scores, self.n_seen, self.n_total, self.storage_options)
            written.append(self.scores)
        return written


class NewFit:
    """``run`` without ``--update``: the model fitted on every row. It answers what
    ``run`` asks of an :class:`Update` (the lines after the summary, the outputs, the
    report's rows), so the run decides once which of the two it makes."""

    def __init__(self, est, X, cfg: dict):
        self.est, self.X, self.cfg = est, X, cfg

    def summary_lines(self) -> list[str]:
        return []

    def write_outputs(self, out: dict, written: list, timings) -> None:
        """The outputs ``out`` asks for; with the model, a sample of the rows (what a
        later ``--update`` checks the rows by)."""
        if out["model"]:
            record_rows(self.est, self.X, self.cfg, timings=timings)
        with timings.stage("writing outputs"):
            write_outputs(self.est, self.X, out, written, timings=timings)

    def report_rows(self) -> None:
        return None


def plan_update(cfg: dict, X) -> Update:
    """The update ``cfg`` asks for, checked (``UserError`` in config words) before
    any read."""
    from ..io._fs import store_state
    from ..persistence.loading import load
    from ..persistence.registry import estimator_class
    from . import _scores_append as sa

    out, model = cfg["output"], cfg["model"]
    problem = updatable_store(cfg["data"])
    if problem:
        raise UserError(problem)
    if not out["store"] or not out["model"]:
        raise UserError(
            "--update (output.update) updates the model of output.store: set "
            "output.store and output.model: true"
        )
    extra = [k for k in _OTHER_OUTPUTS if out.get(k)]
    if extra:
        raise UserError(
            f"output.{extra[0]}: --update appends the new rows' scores only; set "
            f"output.{extra[0]}: false (or run without --update)"
        )
    so = out.get("storage_options")
    root = out["store"].rstrip("/")
    path = f"{root}/{PARTS['model'][0]}"
    if not store_state(path, so).zarr:
        raise UserError(
            f"--update: no model at {path} to update "
            "(output.store); run without --update first"
        )
    try:
        est = load(path, storage_options=so)
    except (ValueError, OSError) as err:
        raise UserError(
            f"--update: the model at {path} cannot be read: {err}"
        ) from None
    try:
        est.partial_fit  # noqa: B018 (says why a configuration cannot be updated)
    except AttributeError as err:
        raise UserError(f"--update: {err}") from None
    _check_same_model(est, estimator_class(model["method"])(**model["params"]), path)
    if getattr(est, "n_samples_seen_", None) is None or est.rows_sketch is None:
        raise UserError(
            f"--update: the model at {path} keeps no record of the rows it has "
            "seen (written by `run` before --update existed, or by save()); run "
            "without --update once, then --update adds new rows"
        )
    n_seen = int(est.n_samples_seen_)
    upd = Update(
        est=est,
        X=X,
        n_seen=n_seen,
        storage_options=so,
        scores=None,
        sample_dim=_sample_dim(X),
    )
    _check_store(upd, path)
    if out["scores"]:
        upd.scores = f"{root}/{PARTS['scores'][0]}"
        upd.pending = sa.check(upd.scores, n_seen, so, upd.sample_dim)
    return upd


def _check_same_model(est, configured, path: str) -> None:
    from .._json import jsonable

    if type(est) is not type(configured):
        raise UserError(
            f"--update: the model at {path} is a {type(est).__name__}; the config's "
            f"model.method makes a {type(configured).__name__}"
        )
    saved, given = est.get_params(deep=False), configured.get_params(deep=False)
    differ = [k for k in sorted(given) if jsonable(saved.get(k)) != jsonable(given[k])]
    if differ:
        k = differ[0]
        raise UserError(
            f"--update: the model at {path} was fitted with {k}={saved.get(k)!r}; "
            f"the config says model.{k}: {given[k]!r}. An update keeps the model's "
            "parameters: change them back, or run without --update"
        )


def _check_store(upd: Update, path: str) -> None:
    est, X, sk = upd.est, upd.X, upd.est.rows_sketch
    if upd.sample_dim is False:
        raise UserError(
            "--update: data.sample_dims stacks several dims into samples; an "
            "update appends along one sample dim"
        )
    if X.shape[0] < upd.n_seen:
        raise UserError(
            f"data.path: the store has {X.shape[0]:,} rows, fewer than the "
            f"{upd.n_seen:,} the model at {path} has seen: it shrank or was "
            "replaced; run without --update to fit it as it is"
        )
    if X.shape[1] != est.n_features_in_ or sk["n_features"] != X.shape[1]:
        raise UserError(
            f"data.path: the store's rows have {X.shape[1]:,} features; the model "
            f"at {path} was fitted on {est.n_features_in_:,}. An update adds rows "
            "on the same features"
        )
    if str(X.dtype) != sk["dtype"]:
        raise UserError(
            f"data.path: the store holds {X.dtype}; the model's rows were "
            f"{sk['dtype']}: the store was rewritten"
        )
    if upd.n_new:
        # names, grid coordinates, layout: transform checks them (metadata only; the
        # scores stay lazy, never computed here)
        try:
            est.transform(upd.new_rows())
        except ValueError as err:
            raise UserError(
                f"data.path: the new rows are not on the model's features: {err}"
            ) from None


def update_problems(cfg: dict, X) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` ``scalepca validate`` says of an update (the checks
    before any read; whether the rows seen are unchanged shows only when they are
    read)."""
    try:
        upd = plan_update(cfg, X)
    except UserError as err:
        return [str(err)], []
    return [], [
        f"update: the model has seen {upd.n_seen:,} "
        f"rows; {upd.n_new:,} new rows to read"
    ]
