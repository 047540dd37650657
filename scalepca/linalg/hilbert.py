"""Kernels of Hilbert (complex) EOF analysis: the analytic signal of whole time series
and the Hermitian products of column strips.

The analytic signal ``z = x + i H[x]`` of a series needs the whole series (the Hilbert
transform is a filter in the frequency domain), so these kernels take **column strips**:
all samples (time steps) of some features, as
:func:`scalepca.linalg.snapshot.column_strips` makes them. Each feature's series is
centred (exact: the strip holds whole columns), optionally padded at both ends
(``padding="exp"``: an exponential decay from the series' first and last anomaly towards
its linear trend, continued over one series length on each side, which damps the leakage
of the FFT's periodic wrap-around), transformed by :func:`scipy.signal.hilbert`, cut
back to its own length, and centred again (the padding can shift the mean of the
imaginary part).

Features that are NaN at every sample (land) give a zero signal; their NaN counts
travel with the partials so that the estimator can leave them out (and refuse
features NaN at only some samples).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "PADDINGS",
    "analytic_signal",
    "merge_row_grams",
    "merge_strips",
    "row_gram",
    "strip_components",
    "strip_gram",
    "strip_scores",
    "strip_stats",
]


def _exp_padded(x: np.ndarray, decay_factor: float) -> tuple[np.ndarray, int]:
    """``x`` (n × w) extended by n rows before and after: the anomaly from each column's
    least-squares line at its first (last) sample, decaying as ``exp(−t / (n·decay))``
    away from the series, added to the line continued; with n, the row of the series'
    first sample."""
    n = x.shape[0]
    t = np.arange(n, dtype=np.float64)
    A = np.stack([np.ones(n), t], axis=1)
    coef, *_ = np.linalg.lstsq(
        A, x, rcond=None
    )  # (2, w): intercept and slope per column
    t_ext = np.arange(-n, 2 * n, dtype=np.float64)
    line = coef[0] + t_ext[:, None] * coef[1]
    anomaly = x - line[n : 2 * n]
    decay = np.exp(-t / n / decay_factor)[:, None]
    before = anomaly[0] * decay[::-1]
    after = anomaly[-1] * decay
    return np.concatenate([before, anomaly, after]) + line, n


def _unpadded(x: np.ndarray, decay_factor: float) -> tuple[np.ndarray, int]:
    """``x`` as it is (no padding), its first sample at row 0."""
    return x, 0


#: the paddings of :func:`analytic_signal` by name: ``pad(x, decay_factor)`` gives the
#: padded columns and the row of the series' first sample. The estimator looks its
#: padding up here once.
PADDINGS = {"exp": _exp_padded, "none": _unpadded}


def analytic_signal(x, pad, decay_factor: float = 0.2) -> np.ndarray:
    """The centred analytic signal (n × w complex128) of each column of the strip ``x``,
    padded by ``pad`` (one of :data:`PADDINGS`' functions) before the transform.

    Non-finite entries are taken as 0 (their features are refused or left out by the
    caller).
    """
    from scipy.signal import hilbert

    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        x = np.where(np.isfinite(x), x, 0.0)
    n = x.shape[0]
    x = x - x.mean(axis=0)
    padded, start = pad(x, decay_factor)
    z = hilbert(padded, axis=0)[start : start + n]
    return z - z.mean(axis=0)


def strip_stats(x) -> np.ndarray:
    """(2, w): each feature's mean over its finite values and its NaN count."""
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    count = np.maximum(x.shape[0] - nan.sum(axis=0), 1)
    return np.stack([np.where(nan, 0.0, x).sum(axis=0) / count, nan.sum(axis=0)])


def strip_gram(x, pad, decay_factor: float) -> dict:
    """One strip's share of the n × n Hermitian Gram ``Z Zᴴ`` and its features'
    means, NaN counts and sums of squares ``Σ_t |z|²``."""
    z = analytic_signal(x, pad, decay_factor)
    mean, nan = strip_stats(x)
    return {
        "G": z @ z.conj().T,
        "mean": mean,
        "nan": nan,
        "ss": (np.abs(z) ** 2).sum(axis=0),
    }


def merge_strips(a: dict, b: dict) -> dict:
    """Strips side by side (left to right): Grams summed, per-feature values joined."""
    out = {name: np.concatenate([a[name], b[name]]) for name in ("mean", "nan", "ss")}
    out["G"] = a["G"] + b["G"]
    return out


def strip_components(x, U, inv_s, pad, decay_factor: float) -> np.ndarray:
    """``(Zᴴ U Σ⁻¹)ᵀ`` of one strip (k × w): its features' share of the complex EOFs
    from the left singular vectors ``U`` (n × k) of the analytic signal."""
    z = analytic_signal(x, pad, decay_factor)
    return ((z.conj().T @ U) * inv_s).T


def strip_scores(x, V, mean, pad, decay_factor: float) -> np.ndarray:
    """One strip's share (n × k) of the scores ``Z V``: ``x`` minus ``mean`` (w,),
    its analytic signal, times ``V`` (w × k, the strip's rows of the components)."""
    x = np.asarray(x, dtype=np.float64) - mean
    z = analytic_signal(x, pad, decay_factor)
    return z @ V


def row_gram(z) -> dict:
    """The d × d Hermitian ``zᴴ z`` of a row block of the analytic signal (the
    covariance path: the signal is made on strips, then regrouped into rows)."""
    z = np.asarray(z)
    return {"C": z.conj().T @ z}


def merge_row_grams(a: dict, b: dict) -> dict:
    return {"C": a["C"] + b["C"]}
