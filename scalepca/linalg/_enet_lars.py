"""The lasso-modified LARS path of :func:`scalepca.linalg.sparse.enet_gram_path`,
compiled.

The same steps in the same order as the NumPy version (entry, drop, tied entries,
restart), compiled by numba when it is installed (the ``sparse`` and ``anndata``
extras): the path has one breakpoint per entering or leaving variable and ZHT's
alternation solves d-variable paths k times per alternation, so at d in the hundreds
the per-breakpoint overhead of NumPy calls is most of the fit's client time. The
active system is solved by Cholesky (``G`` is positive definite on the path), falling
back to least squares when it is numerically singular.
"""

from __future__ import annotations

import importlib.util

import numpy as np

__all__ = ["HAVE_KERNEL", "lars_path"]

#: numba is optional; it is imported, and the path compiled, at the first call only
HAVE_KERNEL = importlib.util.find_spec("numba") is not None
_compiled = None


def _solve_active(GAA, s):  # pragma: no cover - compiled
    """``GAA⁻¹ s`` by Cholesky; least squares when GAA is not numerically positive
    definite."""
    m = GAA.shape[0]
    L = np.zeros((m, m))
    for j in range(m):
        r = GAA[j, j]
        for p in range(j):
            r -= L[j, p] * L[j, p]
        if not r > 0.0:
            return np.linalg.lstsq(GAA, s)[0]
        L[j, j] = np.sqrt(r)
        for i in range(j + 1, m):
            v = GAA[i, j]
            for p in range(j):
                v -= L[i, p] * L[j, p]
            L[i, j] = v / L[j, j]
    y = np.empty(m)
    for i in range(m):
        v = s[i]
        for p in range(i):
            v -= L[i, p] * y[p]
        y[i] = v / L[i, i]
    w = np.empty(m)
    for i in range(m - 1, -1, -1):
        v = y[i]
        for p in range(i + 1, m):
            v -= L[p, i] * w[p]
        w[i] = v / L[i, i]
    return w


def _direction(G, c, A):  # pragma: no cover - compiled
    """``w = G_AA⁻¹ sign(c_A)`` and the rate ``a = G_:A w`` of every correlation."""
    na, d = A.shape[0], G.shape[0]
    s = np.sign(c[A])
    for i in range(na):
        if s[i] == 0.0:
            s[i] = 1.0
    GAA = np.empty((na, na))
    for i in range(na):
        for j in range(na):
            GAA[i, j] = G[A[i], A[j]]
    w = _solve_active(GAA, s)
    a = np.zeros(d)
    for j in range(na):
        col, wj = A[j], w[j]
        for i in range(d):
            a[i] += G[i, col] * wj
    return w, a


def _entry_step(c, a, chat, inactive, eps):  # pragma: no cover - compiled
    """The first inactive variable to reach the active correlations, and when."""
    t_enter, j_enter = np.inf, -1
    for i in range(c.shape[0]):
        if not inactive[i]:
            continue
        t1 = (chat - c[i]) / (1.0 - a[i]) if 1.0 - a[i] > 1e-15 else np.inf
        t2 = (chat + c[i]) / (1.0 + a[i]) if 1.0 + a[i] > 1e-15 else np.inf
        t = min(t1 if t1 > eps else np.inf, t2 if t2 > eps else np.inf)
        if t < t_enter or j_enter < 0:
            t_enter, j_enter = t, i
    return t_enter, j_enter


def _drop_step(beta, A, w, eps):  # pragma: no cover - compiled
    """The first active coefficient to reach zero (its place in ``A``), and when."""
    t_drop, m = np.inf, 0
    for i in range(A.shape[0]):
        bi = beta[A[i]]
        td = -bi / w[i] if w[i] * bi < 0 else np.inf
        td = td if td > eps else np.inf
        if td < t_drop:
            t_drop, m = td, i
    return t_drop, m


def _admit(c, chat, tie, j_enter, inactive, active, na, n_nonzero):  # pragma: no cover
    """Make ``j_enter`` and the variables tied with it active; the new count, or -1
    when that would pass ``n_nonzero`` (nothing is changed then)."""
    n_enter = 1
    for i in range(c.shape[0]):
        if inactive[i] and i != j_enter and abs(abs(c[i]) - chat) <= tie:
            n_enter += 1
    if n_nonzero >= 0 and na + n_enter > n_nonzero:
        return -1
    active[na] = j_enter
    na += 1
    inactive[j_enter] = False
    for i in range(c.shape[0]):
        if inactive[i] and abs(abs(c[i]) - chat) <= tie:
            active[na] = i
            na += 1
            inactive[i] = False
    return na


def _lars_path(G, b, n_nonzero, target, max_steps):  # pragma: no cover - compiled
    # n_nonzero < 0: no count to stop at
    d = b.shape[0]
    beta = np.zeros(d)
    c = b.copy()
    chat = np.max(np.abs(c)) if d else 0.0
    if chat <= target:
        return beta
    eps = 1e-12 * max(chat, 1e-300)
    tie = 1e-9 * chat
    active = np.empty(d, dtype=np.int64)
    na = 0
    inactive = np.ones(d, dtype=np.bool_)
    for i in range(d):
        if abs(c[i]) >= chat - tie:
            active[na] = i
            na += 1
            inactive[i] = False
    if n_nonzero >= 0 and na > n_nonzero:
        return beta
    for _ in range(max_steps):
        A = active[:na].copy()
        w, a = _direction(G, c, A)
        t_enter, j_enter = _entry_step(c, a, chat, inactive, eps)
        t_drop, m = _drop_step(beta, A, w, eps)
        t_end = chat - target
        t = min(t_enter, t_drop, t_end)
        stop_here = (
            n_nonzero >= 0 and t == t_enter and t_enter < t_drop and na >= n_nonzero
        )
        for i in range(na):
            beta[A[i]] += t * w[i]
        for i in range(d):
            c[i] -= t * a[i]
        chat -= t
        if t == t_end or stop_here or (t_enter == np.inf and t_drop == np.inf):
            break
        if t_drop <= t_enter:
            gone = A[m]
            beta[gone] = 0.0
            for i in range(m, na - 1):
                active[i] = active[i + 1]
            na -= 1
            inactive[gone] = True
            if na == 0:
                # every coefficient is back at zero: restart from the largest
                # correlation
                j = int(np.argmax(np.abs(c)))
                active[0] = j
                na = 1
                inactive[j] = False
        else:
            na_new = _admit(c, chat, tie, j_enter, inactive, active, na, n_nonzero)
            if na_new < 0:
                # a tie would jump past the requested count: stop at this breakpoint
                break
            na = na_new
    return beta


def lars_path(
    G: np.ndarray, b: np.ndarray, n_nonzero: int | None, target: float, max_steps: int
) -> np.ndarray:
    """The compiled path (``HAVE_KERNEL`` must be true); arguments as in
    ``enet_gram_path``, ``target = λ₁ / 2``."""
    global _compiled, _solve_active, _direction, _entry_step, _drop_step, _admit
    if _compiled is None:
        import numba

        jit = numba.njit(cache=True, nogil=True)
        _solve_active, _direction = jit(_solve_active), jit(_direction)
        _entry_step, _drop_step, _admit = jit(_entry_step), jit(_drop_step), jit(_admit)
        _compiled = jit(_lars_path)
    return _compiled(
        np.ascontiguousarray(G, dtype=np.float64),
        np.ascontiguousarray(b, dtype=np.float64),
        -1 if n_nonzero is None else int(n_nonzero),
        float(target),
        int(max_steps),
    )
