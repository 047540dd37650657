"""``PCA(standardize="genotype")``: the fit on allele counts standardised by frequency.

Passes: the first pass is the per-feature moments pass every fit of the randomized and TSQR
solvers makes; the allele frequencies come from it (``allele_scaling``).
The solver then sees the standardised matrix (missing calls 0), block by block, with mean 0:
``randomized`` and ``tsqr`` take the passes they take on any data; ``covariance_eigh`` takes
one more pass than on other data (the Gram of the standardised matrix needs the frequencies
first): 2 in all.
"""

from __future__ import annotations

import logging

import dask
import numpy as np

from .._validation import check_random_state_seed, choose_n_components, is_sparse
from ..linalg import (
    column_moments_graph,
    flip_signs,
    moments_graph,
    passes,
    randomized_svd_centered,
    tsqr_svd_centered,
)
from ..linalg.decomp import spectrum_from_moments
from ..preprocessing._genotype import allele_scaling, standardized

logger = logging.getLogger(__name__)


def fit_genotypes(model, X, data, spec, k: int, solver: str) -> None:
    """Fit ``model`` (a PCA) to allele counts ``X`` (n × d dask array, NaN missing)."""
    n, d = X.shape
    if is_sparse(X):
        raise ValueError("standardize='genotype' needs dense blocks: missing calls are NaN in "
                         "dense rows, and centring by 2p makes every entry non-zero")
    solver = "randomized" if solver == "snapshot" else solver  # auto's choice for n ≪ d
    passes.counter_of(model).plan(
        {"covariance_eigh": 2, "tsqr": 2}.get(solver, 3 + 2 * model.n_power_iter))
    with model._timed_pass("allele frequencies"):
        (mom,) = dask.compute(column_moments_graph(X))
    stats = allele_scaling(mom)
    bad = int(mom["bad"]) - int(np.sum(mom.get("nan_features", 0)))
    if bad:
        raise ValueError(f"X contains {bad} infinite value(s); allele counts are 0, 1, 2 or "
                         "NaN (a missing call)")
    if stats.n_uncalled or stats.n_monomorphic:
        logger.info("%s: %d SNP(s) without any call and %d monomorphic SNP(s) (allele "
                    "frequency 0 or 1) left out", type(model).__name__, stats.n_uncalled,
                    stats.n_monomorphic)
        model._leave_out_land(stats.keep.astype(np.int64), data,
                              reason="monomorphic or without any call")
    model.n_monomorphic_ = stats.n_monomorphic
    d_fit = int(stats.keep.sum())
    if k > min(n, d_fit):
        raise ValueError(f"n_components={k} is out of range: after leaving out {d - d_fit} "
                         "monomorphic or uncalled SNPs it must be at most min(n_samples, "
                         f"n_features) = {min(n, d_fit)}")
    mean, scale = stats.mean, stats.scale
    Z = standardized(model._select_features(X), mean, scale)
    total = float(stats.ss.sum() / max(n - 1, 1))
    zero = np.zeros(d_fit)
    k_fit = k if isinstance(spec, int) else min(n, d_fit)
    if solver == "covariance_eigh":

        Z = Z.rechunk({1: -1}) if len(Z.chunks[1]) > 1 else Z
        with model._timed_pass("moments of the standardised genotypes"):
            (mom2,) = dask.compute(moments_graph(Z))
        _, _, ev, components, _ = spectrum_from_moments(mom2, k_fit)
    elif solver == "tsqr":
        with model._timed_pass("tsqr"):
            s, Vt = tsqr_svd_centered(Z.rechunk({1: -1}), zero)
        ev = s**2 / max(n - 1, 1)
        components = flip_signs(Vt[:k_fit])
    else:
        s, Vt = randomized_svd_centered(
            Z, zero, k, n_oversamples=model.n_oversamples, n_power_iter=model.n_power_iter,
            seed=check_random_state_seed(model.random_state))
        ev = s**2 / max(n - 1, 1)
        components = flip_signs(Vt)
    if not isinstance(spec, int):
        k = choose_n_components(spec, ev, ev / total if total > 0 else np.zeros_like(ev), n)
        components = components[:k]
    model.scale_ = scale
    model._set_spectrum(n, d_fit, k, mean, ev, components, total)
