"""Block kernels of :class:`~scalepca.models.robust_pca.RobustPCA`'s inexact ALM:
NumPy functions of one block of M (and of the stored T, the mask and the factors of
L), mapped over the blocks by the estimator. See :mod:`scalepca.models.robust_pca`
for the iteration.
"""

from __future__ import annotations

import numpy as np

from ..linalg.svt import block_times


def _clean(m, w):
    """A block of M in float64 with the unobserved entries set to zero."""
    m = np.asarray(m, dtype=np.float64)
    if w is not None:
        m = np.where(w, m, 0.0)
    return m


def _clip_obs(t, w, tau):
    """``P = clip(T, −τ, τ)`` on Ω and 0 off Ω, so that ``S = T − P`` (the soft
    threshold on Ω, all of ``T`` off Ω) and ``Y/μ = c P``. ``τ = inf`` gives
    ``P = T`` and ``S = 0``."""
    p = np.clip(np.asarray(t, dtype=np.float64), -tau, tau)
    if w is not None:
        p = np.where(w, p, 0.0)
    return p


def _a_from_parts(m, t, p, c):
    """``A = M − S + Y/μ = M − (T − P) + c P`` (one formula for every path, so a
    resumed run computes bit for bit what an uninterrupted one does). ``p`` is
    overwritten (with ``c P``): no temporary of the block's size."""
    a = m - t
    a += p
    p *= c
    a += p
    return a


def _a_block(m, t, w=None, *, a_tau, c):
    """The SVT argument from blocks of M and the stored T."""
    return _a_from_parts(
        _clean(m, w), np.asarray(t, dtype=np.float64), _clip_obs(t, w, a_tau), c
    )


def _update_core(m, t, w, us, vt, a_tau, c, tau_s, c_next):
    """One ALM update of a block: returns ``(T_new, A_next, [residual², ‖S‖₀])``.

    With ``Y/μ = c P_old``: ``T_new = M − L + Y/μ``, ``P = clip(T_new, ±λ/μ)``,
    ``S_new = T_new − P`` and the primal residual ``M − L − S_new = P − Y/μ`` (on Ω).
    """
    # in place where a temporary of the block's size would be new (each costs its
    # page faults on top of a pass over memory)
    m = _clean(m, w)
    y = _clip_obs(t, w, a_tau)
    y *= c
    tn = us @ vt
    np.subtract(m, tn, out=tn)
    tn += y
    p = _clip_obs(tn, w, tau_s)
    # |T_new| > λ/μ exactly where the clip changed it
    big = p != tn
    if w is not None:
        big &= w
    r = np.subtract(p, y, out=y)
    stats = np.array([[[np.vdot(r, r), np.count_nonzero(big)]]], dtype=np.float64)
    a_next = _a_from_parts(m, tn, p, c_next)
    return tn, a_next, stats


def _update_block(m, t, *rest, a_tau, c, tau_s, c_next, masked, fused, sink=None):
    """The update task of one block.

    ``rest`` holds, in order: the mask block (if ``masked``), the row slice of
    ``U diag(σ)``, the column slice of ``Vᵀ``, the probe rows ``Ω_j`` of the next SVD
    (if ``fused``) and the global row/column indices (if ``sink``). With ``fused`` the
    block's share ``A_next,ij Ω_j`` of the next SVD's first product is returned too,
    saving that pass over ``A``.

    ``sink=None`` (memory): returns ``(T_new, A_next, stats, part)``. Otherwise
    writes ``T_new`` and ``A_next`` into the zarr arrays
    ``sink = (root, t_name, a_name)`` and returns ``(stats, part)``.
    """
    rest = list(rest)
    w = rest.pop(0) if masked else None
    us, vt = rest.pop(0), rest.pop(0)
    om = rest.pop(0) if fused else None
    tn, a_next, stats = _update_core(m, t, w, us, vt, a_tau, c, tau_s, c_next)
    part = block_times(a_next, om) if fused else None
    if sink is None:
        return tn, a_next, stats, part
    import zarr

    roff, coff = rest
    root, t_name, a_name = sink
    i0, j0 = int(roff[0]), int(coff[0])
    sl = (slice(i0, i0 + tn.shape[0]), slice(j0, j0 + tn.shape[1]))
    zarr.open_array(store=root, path=t_name, mode="r+")[sl] = tn
    zarr.open_array(store=root, path=a_name, mode="r+")[sl] = a_next
    return stats, part


def _pick(block, i):
    return block[i]


def _input_stats_block(m, w=None):
    """Per block: ``[[[‖P_Ω M‖_F², max |P_Ω M|, non-finite count on Ω, |Ω|]]]`` and,
    per column, ``[[[NaN count, |Ω| count], ...]]`` (shape (1, columns, 2))."""
    m = np.asarray(m, dtype=np.float64)
    obs = np.ones(m.shape, dtype=bool) if w is None else np.asarray(w, dtype=bool)
    finite = np.isfinite(m)
    bad = np.count_nonzero(obs & ~finite)
    v = np.where(obs & finite, m, 0.0)
    mx = float(np.abs(v).max()) if v.size else 0.0
    stats = np.array(
        [[[np.vdot(v, v), mx, bad, np.count_nonzero(obs)]]], dtype=np.float64
    )
    cols = np.stack([np.isnan(m).sum(axis=0), obs.sum(axis=0)], axis=-1)[None].astype(
        np.float64
    )
    return stats, cols


def _shrink_block(t, w=None, *, tau):
    """``S`` on Ω (zero off Ω) from the stored T."""
    t = np.asarray(t, dtype=np.float64)
    s = t - np.clip(t, -tau, tau)
    return s if w is None else np.where(w, s, 0.0)


def probes(entropy, it, sv, p, n1, n2, V_warm) -> np.ndarray:
    """RobustPCA's probe block of iteration ``it``: drawn from child ``it`` of the
    seed, so a resumed run and an uninterrupted one use the same numbers."""
    from ..linalg.svt import probe_matrix

    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(it,)))
    return probe_matrix(n2, int(min(sv + p, n1, n2)), rng, V_warm)
