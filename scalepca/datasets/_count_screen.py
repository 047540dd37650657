"""Which entries of a counts tile can be non-zero: a cheap, sound screen before the
exact test.

An entry of :func:`scalepca.datasets.make_counts` is a zero when its uniform draw
``u`` is at most ``P(0 | μ)``. Since ``1 − P(0) ≤ μ`` (Poisson: ``1 − e^{−μ} ≤ μ``;
negative binomial: ``(1 + μ/θ)^{−θ} ≥ 1 − μ``), an entry with ``μ < c = 1 − u`` is a
zero; and since ``log c ≥ (c − 1)/√c`` on (0, 1] (their difference decreases to 0 at
c = 1), ``log μ < (c − 1)/√c`` proves it from the log-mean, without an exp. The
screen keeps every other entry (a few per cent at single-cell densities); the caller
decides those exactly, so the counts are those of the direct test. The margins (1e-12
on ``c``, 1e-9 on the log scale) are far above the rounding of either side, so the
screen needs no bit-exact arithmetic: numba runs it in one pass when installed, NumPy
otherwise.
"""

from __future__ import annotations

import numpy as np

try:  # optional: one fused pass instead of NumPy's several
    import numba
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

#: margin on ``c = 1 − u`` and on the log scale
C_MARGIN, LOG_MARGIN = 1e-12, 1e-9


def _screen_loop(log_mu, u, out):
    k = 0
    for i in range(log_mu.size):
        c = (1.0 - C_MARGIN) - u[i]
        if c > 0.0 and log_mu[i] < (c - 1.0) / np.sqrt(c) - LOG_MARGIN:
            continue
        out[k] = i
        k += 1
    return k


_screen_compiled = (
    numba.njit(nogil=True, cache=True)(_screen_loop) if numba is not None else None
)


def candidates(log_mu: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Flat positions (increasing) of the entries the screen cannot prove zero."""
    lm, uu = np.ascontiguousarray(log_mu).ravel(), np.ascontiguousarray(u).ravel()
    if _screen_compiled is not None:
        out = np.empty(lm.size, dtype=np.int64)
        return out[: _screen_compiled(lm, uu, out)].copy()
    c = (1.0 - C_MARGIN) - uu
    with np.errstate(invalid="ignore", divide="ignore"):  # c ≤ 0: NaN, kept
        bound = (c - 1.0) / np.sqrt(c)
    return np.flatnonzero(~(lm < bound - LOG_MARGIN))
