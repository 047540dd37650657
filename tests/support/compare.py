"""How the tests compare results: signs of modes, closeness, subspaces, whole fits.

A mode (a component, an EOF, a column of scores) is defined up to its sign, so a
comparison first turns each mode of the result to the sign of the reference's
(:func:`align_signs`). Closeness is measured against the reference's largest entry
(:func:`assert_close`), so one tolerance serves fields of any units; a subspace by the
sine of its largest principal angle to the other (:func:`subspace_sine`).
"""

from __future__ import annotations

import numpy as np


def mode_signs(a, b, mode_axis: int = 0) -> np.ndarray:
    """The sign (±1) per mode that turns ``a`` towards ``b``, shaped to multiply ``a``.

    ``mode_axis`` is the axis that counts the modes: 0 for components (one per row,
    any further axes being the field's), 1 for scores (one per column). The sign is
    that of the inner product over the other axes, NaN left out; a mode orthogonal to
    its reference keeps its sign (+1).
    """
    a, b = np.asarray(a), np.asarray(b)
    axes = tuple(i for i in range(a.ndim) if i != mode_axis % a.ndim)
    s = np.sign(np.nansum(a * b, axis=axes, keepdims=True))
    return np.where(s == 0, 1.0, s)


def align_signs(a, b, mode_axis: int = 0) -> np.ndarray:
    """``a`` with each mode turned to the sign of the matching mode of ``b`` (see
    :func:`mode_signs` for ``mode_axis``)."""
    a = np.asarray(a)
    return a * mode_signs(a, b, mode_axis)


def _as_float(x) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def assert_close(actual, expected, tol, what: str = "", *, rtol=0.0, atol=None):
    """``actual`` equals ``expected`` entry by entry to ``tol`` times the largest
    magnitude in ``expected``, with NaN in the same places and the same shape.

    ``rtol`` adds a bound relative to each entry (``rtol`` × its magnitude); ``atol``
    (broadcast against the arrays, e.g. one bound per mode) raises the first bound to
    it where it is larger. Complex entries are compared by the modulus of the
    difference.
    """
    actual, expected = _as_float(actual), _as_float(expected)
    assert actual.shape == expected.shape, (
        f"{what}: shape {actual.shape} ≠ {expected.shape}"
    )
    np.testing.assert_array_equal(
        np.isnan(actual), np.isnan(expected), err_msg=f"{what}: NaN at other places"
    )
    finite = np.isfinite(expected)
    scale = float(np.nanmax(np.abs(expected))) if finite.any() else 1.0
    allowed = tol * scale if atol is None else np.maximum(tol * scale, atol)
    allowed = allowed + rtol * np.abs(expected)
    error = np.abs(actual - expected)
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = np.nan_to_num(error / allowed, nan=0.0)
    worst = float(excess.max(initial=0.0))
    assert worst <= 1, (
        f"{what}: off by up to {worst:.3g} times the bound (largest error "
        f"{float(np.nanmax(error, initial=0.0)):.3g}, scale {scale:.3g}, tol {tol:g})"
    )


def assert_same_components(
    a, b, tol=0.0, what: str = "", *, rtol=0.0, atol=None, mode_axis=0
):
    """``a`` equals ``b`` up to one sign per mode: :func:`assert_close` once ``a``'s
    modes take ``b``'s signs (:func:`align_signs`); ``atol`` alone gives an absolute
    bound, as ``numpy.testing.assert_allclose``'s."""
    assert_close(align_signs(a, b, mode_axis), b, tol, what, rtol=rtol, atol=atol)


def subspace_sine(a, b) -> float:
    """Sine of the largest principal angle between the spans of the rows of ``a`` and
    of ``b`` (modes as rows, as ``components_``; the rows need not be orthonormal).

    Computed as ‖Q_b − Q_a Q_aᵀ Q_b‖₂, accurate near 0 (no square root of 1 − cos²);
    with fewer rows in ``b`` than in ``a`` it measures how far ``b``'s span leaves
    ``a``'s.
    """
    qa = np.linalg.qr(np.asarray(a, dtype=np.float64).T)[0]
    qb = np.linalg.qr(np.asarray(b, dtype=np.float64).T)[0]
    return float(np.linalg.norm(qb - qa @ (qa.T @ qb), 2))


def max_rel_diff(a: dict, b: dict) -> float:
    """Largest |a − b| over the attributes of two fit summaries (dicts of arrays, as
    :func:`tests.support.reliability.summary` makes them), relative to the largest
    |entry| of that attribute; NaN positions must coincide (features dropped in fit)."""
    assert a.keys() == b.keys(), (sorted(a), sorted(b))
    worst = 0.0
    for name in a:
        x, y = a[name], b[name]
        assert x.shape == y.shape, (name, x.shape, y.shape)
        nan = np.isnan(x)
        assert np.array_equal(nan, np.isnan(y)), name
        x, y = x[~nan], y[~nan]
        if not x.size:
            continue
        scale = max(np.abs(x).max(), np.abs(y).max(), np.finfo(float).tiny)
        worst = max(worst, float(np.abs(x - y).max() / scale))
    return worst


def assert_same_fit(a: dict, b: dict, rtol: float, what: str = "") -> float:
    """Two fit summaries within ``rtol`` of each other (:func:`max_rel_diff`); returns
    the difference."""
    d = max_rel_diff(a, b)
    assert d <= rtol, f"{what}: fits differ by {d:.3g} (relative), tolerance {rtol:g}"
    return d


def assert_same_pca(a, b, tol=1e-12, *, up_to_sign=True):
    """Two fitted PCAs the same: eigenvalues to ``tol`` relative, components (up to
    their signs unless ``up_to_sign`` is false) and means to ``tol`` absolute."""
    np.testing.assert_allclose(a.explained_variance_, b.explained_variance_, rtol=tol)
    comps = align_signs(a.components_, b.components_) if up_to_sign else a.components_
    np.testing.assert_allclose(comps, b.components_, rtol=0, atol=tol)
    np.testing.assert_allclose(a.mean_, b.mean_, rtol=0, atol=tol)
