"""The counts generator's screen (``datasets/_count_screen.py``): the non-zero
entries it leads to are exactly those of the direct test ``u > P(0 | μ)`` on every
entry, with numba's fused pass and with NumPy's, for negative binomial and Poisson
counts, at low and high densities (so the generated stores are the same counts as
before the screen)."""

from __future__ import annotations

import numpy as np
import pytest

from scalepca.datasets import _count_screen
from scalepca.datasets._generators import (
    _TAG_CELLS,
    _nonzero_entries,
    _rng,
    _tile_rows,
    _zero_probability,
    count_model,
)


@pytest.mark.parametrize(
    ("d", "density", "dispersion"),
    [(3000, 0.02, 5.0), (400, 0.15, 5.0), (1000, 0.1, None), (300, 0.5, 0.5)],
)
def test_screen_gives_the_direct_tests_entries(monkeypatch, d, density, dispersion):
    model = count_model(d, density=density, dispersion=dispersion, seed=2)
    rng = _rng(2, _TAG_CELLS, 0)
    log_mu = model.log_means(rng, _tile_rows(d))
    u = rng.random(log_mu.shape)
    mu = np.exp(log_mu)
    direct = np.flatnonzero(u > _zero_probability(mu, dispersion))
    for numba_pass in (True, False):
        if not numba_pass:
            monkeypatch.setattr(_count_screen, "_screen_compiled", None)
        flat, mu_kept = _nonzero_entries(log_mu, u, dispersion)
        np.testing.assert_array_equal(flat, direct)
        np.testing.assert_array_equal(mu_kept, mu.ravel()[direct])
        assert _count_screen.candidates(log_mu, u).size < u.size  # it screens something
