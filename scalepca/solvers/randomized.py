"""``svd_solver="randomized"``: block Krylov on the centred Gram operator, one pass
per product (:func:`~scalepca.linalg.krylov.block_krylov_eigh`).

The first pass gathers the column moments and the first product of the centred Gram
operator; every further pass is one more product. Passes: at most
``n_power_iter + 2``, fewer with ``tol`` (one more when features are left out and
drawn for again, see :attr:`~.wide.Columns.redraw`).

On column strips (every block holds all rows and there are several column chunks: a
field chunked along space, :func:`~scalepca.linalg.snapshot.holds_whole_columns`) the
same solver runs on the sample-side operator ``K = Xc Xcᵀ`` (n × n, the same nonzero
eigenvalues), each strip centred inside its task
(:func:`~scalepca.linalg.snapshot.sample_gram_times`), and one more pass gives the
axes ``Xcᵀ U Σ⁻¹``: at most ``n_power_iter + 3`` passes, fewer with ``tol``, and never
the all-to-all rechunk into row panels. Its residuals are those of ``K`` (each still
bounds its eigenvalue's error).

Allele counts with missing calls: the first pass multiplies the zero-filled counts
(the frequencies are not known yet), so Krylov starts from that pass's product (one
step of subspace iteration on a nearby operator) and multiplies the exact operator
from then on, in the same number of passes.
"""

from __future__ import annotations

import numpy as np

from ..linalg import passes
from ..linalg.krylov import (
    block_krylov_eigh,
    gram_times,
    moments_and_gram_times,
    scaled_start,
    start_block,
)
from ..linalg.snapshot import holds_whole_columns, sample_gram_times
from .wide import (
    Columns,
    SpectralFit,
    Start,
    WideParams,
    gram_apply,
    krylov_tol,
    operator_of_first,
    restricted_probes,
    source,
    strip_axes,
)

__all__ = ["finish", "start"]


def _width(params: WideParams) -> int:
    return params.k + params.n_oversamples


def _strips(params: WideParams) -> dict:
    """How the column strips are read: centred, standardised in their tasks."""
    return dict(centre=params.centre, standardize=params.standardize)


def start(X, params: WideParams) -> Start:
    """The first pass: the column moments and the operator times an orthonormal
    Gaussian start block of ``k + n_oversamples`` columns (at most d; on column
    strips, of the n × n sample Gram, at most n)."""
    n, d = X.shape
    rng = params.rng()
    if holds_whole_columns(X):
        U0 = start_block(rng, n, _width(params))
        out = sample_gram_times(X, U0, with_stats=True, **_strips(params))
        KU0 = out.pop("KU")
        return Start(out, strips=True, carry=(U0, KU0, rng))
    V = start_block(rng, d, _width(params))
    out = moments_and_gram_times(X, V)
    GV = out.pop("GV")
    return Start(out, strips=False, carry=(V, GV, rng))


def finish(X, first: Start, columns: Columns, params: WideParams) -> SpectralFit:
    """The products after the first pass, up to ``n_power_iter + 2`` in all or until
    ``tol`` is met; on column strips, one more pass for the axes."""
    if first.strips:
        return _finish_strips(X, first, columns, params)
    V, GV, rng = first.carry
    extra = 0
    if not columns.keep.all() and columns.redraw:
        # the same pass over the kept features: the same arithmetic as their fit
        counter = passes.active()
        if counter is not None:
            counter.plan(1)
        rng = params.rng()
        V = start_block(rng, columns.d_fit, _width(params))
        X = source(X, columns)
        GV = gram_times(X, V, columns.moments["mean"])
        extra = 1
    else:
        V, GV = restricted_probes(V, GV, columns.keep)
        X = source(X, columns)
    V0, AV0 = operator_of_first(columns, V, GV, params.centre)
    del V, GV
    apply = gram_apply(X, columns, params.centre)
    spent = 0
    if columns.scale is not None:
        V0, AV0, spent = scaled_start(V0, AV0, apply, exact=columns.exact)
    res = block_krylov_eigh(
        apply,
        V0,
        AV0,
        params.k,
        max_products=params.n_power_iter + 2 - spent,
        tol=krylov_tol(params.tol),
        rng=rng,
    )
    return SpectralFit(
        np.maximum(res.values, 0.0),
        res.vectors,
        res.n_products + spent + extra,
        res.residuals,
    )


def _finish_strips(X, first: Start, columns: Columns, params: WideParams):
    """Block Krylov on the sample Gram ``K = Xc Xcᵀ`` (n × n) of data in column
    strips: each pass one product ``K U`` — every strip centred and scaled in its own
    task, only n × l partials travel — and a last pass the axes. The values are the
    eigenvalues of ``K``, those of the centred Gram ``Xcᵀ Xc``."""
    U0, KU0, rng = first.carry
    how = _strips(params)
    res = block_krylov_eigh(
        lambda U: sample_gram_times(X, U, **how),
        U0,
        KU0,
        params.k,
        max_products=params.n_power_iter + 2,
        tol=krylov_tol(params.tol),
        rng=rng,
    )
    theta = np.maximum(res.values, 0.0)
    vectors = strip_axes(X, res.vectors, theta, first.stats, columns, params.centre)
    return SpectralFit(theta, vectors, res.n_products + 1, res.residuals)
