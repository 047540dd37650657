"""``svd_solver="sketch"``: one pass, a Nyström approximation of the centred Gram
(:mod:`scalepca.linalg.sketch`), an estimate of its error from held-out test vectors
and a probabilistic worst-case bound on it.

It reads row panels, so column strips are regrouped into them (an all-to-all
rechunk): on the sample side it would need a second pass for the axes, which is the
snapshot method's count with none of its exactness, so on that layout ``"snapshot"``
or ``"randomized"`` are the solvers that read the strips as they are. It reads the
data once: a map that sets a missing entry to a centre known only after that read
(:attr:`~.wide.Columns.exact` False) cannot be applied, and the estimator refuses
such data.
"""

from __future__ import annotations

import numpy as np

from ..linalg.krylov import moments_and_gram_times
from ..linalg.sketch import (
    SKETCH_TESTS,
    nystrom_eigh,
    nystrom_error_bound,
    nystrom_error_estimate,
)
from .wide import (
    Columns,
    SpectralFit,
    Start,
    WideParams,
    operator_of_first,
    restricted_probes,
)

__all__ = ["finish", "start"]


def start(X, params: WideParams) -> Start:
    """The one pass: the column moments and the centred Gram times
    ``k + n_oversamples`` orthonormal probes (the identity if they span it all) and
    :data:`~scalepca.linalg.sketch.SKETCH_TESTS` Gaussian test vectors, in float64
    (the pass is read-bound, and the sketch's own error dwarfs their cost)."""
    d = X.shape[1]
    l = min(params.k + params.n_oversamples, d)
    G = params.rng().standard_normal((d, l + SKETCH_TESTS))
    probes = np.eye(d) if l == d else np.linalg.qr(G[:, :l])[0]
    V = np.hstack([probes, G[:, l:]])
    out = moments_and_gram_times(X, V, precision="float64")
    return Start(out, strips=False, carry=(V, out.pop("GV")))


def finish(X, first: Start, columns: Columns, params: WideParams) -> SpectralFit:
    """The Nyström approximation from the probes, its error estimated and bounded
    from the test vectors; no further pass. Features left out: the pass zero-filled
    them, so their rows and columns of the centred Gram are 0 and the kept rows of
    the product are the kept features' Gram times the kept rows of the probes (the
    draw restricted, not a draw for the kept features)."""
    Om, GV = restricted_probes(*first.carry, columns.keep)
    mom, scale, k = columns.moments, columns.scale, params.k
    l = Om.shape[1] - SKETCH_TESTS
    Om, Th = Om[:, :l], Om[:, l:]
    AOm, ATh = GV[:, :l], GV[:, l:]
    if not params.centre:
        mu = mom["mean"]
        AOm = AOm + mom["n"] * np.outer(mu, mu @ Om)
        ATh = ATh + mom["n"] * np.outer(mu, mu @ Th)
    V0, AV0 = operator_of_first(columns, Om, AOm, True)  # centring done above
    # an orthonormal basis of the probes and its product: the probes restricted to the
    # features kept can be more than their number, or no longer independent
    P, sv, Wt = np.linalg.svd(V0, full_matrices=False)
    r = int(np.sum(sv > sv[0] * max(V0.shape) * np.finfo(np.float64).eps))
    Q, Y = P[:, :r], AV0 @ (Wt[:r].T / sv[:r])
    theta, U = nystrom_eigh(Q, Y)
    # the estimate is of the error of the operator decomposed, D⁻¹ A D⁻¹, whose product
    # with the tests D Θ is D⁻¹ A Θ; the worst-case bound needs Gaussian tests: it is on
    # ‖A − D Â D‖ for the unstandardised A
    if scale is None:
        estimate = nystrom_error_estimate(ATh, Th, U, theta)
    else:
        estimate = nystrom_error_estimate(
            ATh / scale[:, None], Th * scale[:, None], U, theta
        )
    Us = U if scale is None else U * scale[:, None]
    bound = nystrom_error_bound(ATh, Th, Us, theta)
    if scale is not None:
        bound /= float(np.min(scale)) ** 2
    kk = min(k, theta.size)
    return SpectralFit(
        theta[:kk], U[:, :kk], 1, np.full(kk, estimate), error_bound=bound
    )
