"""``PCA(standardize="genotype")``: the fit on allele counts standardised by frequency.

Passes: the first pass is the per-feature moments pass every fit makes; the allele
frequencies come from it (``allele_scaling``), and the standardisation is an affine map
of each SNP (centre ``2p``, scale ``√(2p(1−p))``, a missing call at the centre) that the
solvers apply where they read the blocks:

* ``randomized`` (block Krylov), ``sketch`` and ``snapshot`` are the wide solvers of
  :mod:`._wide` with the map inside their per-block products (the scale on the client,
  the centre and the missing calls in the task): the passes they take on any data. The
  Krylov and sketch first pass multiplies the zero-filled data before the frequencies
  are known; it is exact without missing calls. With missing calls, Krylov starts from
  that pass's product (one step of subspace iteration on a nearby operator) and
  multiplies the exact operator from then on, in the same number of passes; the one-pass
  sketch cannot set a missing call to a mean it has not yet read, and refuses: its pass
  stops at the first block holding a missing call (see :func:`._wide.fit_sketch`).
* ``tsqr`` sees the standardised matrix block by block: 2 passes.
* ``covariance_eigh`` reads the counts once, for moments that merge by addition and
  give the covariance of the standardised genotypes at the frequencies of every sample
  seen (:mod:`scalepca.linalg.allele_moments`): 1 pass, and the model keeps them, so
  ``partial_fit`` adds new samples (a new cohort) by reading only those.
"""

from __future__ import annotations

import logging

import dask
import numpy as np

from .._validation import choose_n_components, is_sparse
from ..linalg import (
    column_moments_graph,
    flip_signs,
    passes,
    tsqr_svd_centered,
)
from ..linalg.allele_moments import allele_covariance, allele_moments_graph
from ..linalg.alleles import AlleleScaling, allele_scaling
from ..linalg.decomp import spectrum_from_moments
from ..preprocessing._genotype import standardized

logger = logging.getLogger(__name__)

#: the solvers that run the genotype map inside their own per-block products
WIDE = ("randomized", "sketch", "snapshot")


def genotype_scaling(
    model, mom: dict, n: int, d: int, k: int, data, stats: AlleleScaling | None = None
) -> AlleleScaling:
    """Allele frequencies from a first pass's moments (zero-filled, NaN counted per
    feature): infinite values refused, monomorphic and uncalled SNPs left out of the
    fit (recorded on ``model``), ``k`` checked against the SNPs kept;
    ``model.scale_`` and ``model.n_monomorphic_`` set. ``stats``: the frequencies,
    when the caller has them."""
    stats = allele_scaling(mom) if stats is None else stats
    bad = int(mom["bad"]) - int(np.sum(mom.get("nan_features", 0)))
    if bad:
        raise ValueError(
            f"X contains {bad} infinite value(s); allele counts are 0, 1, 2 or "
            "NaN (a missing call)"
        )
    if stats.n_uncalled or stats.n_monomorphic:
        logger.info(
            "%s: %d SNP(s) without any call and %d monomorphic SNP(s) (allele "
            "frequency 0 or 1) left out",
            type(model).__name__,
            stats.n_uncalled,
            stats.n_monomorphic,
        )
        model._leave_out_land(
            stats.keep.astype(np.int64), data, reason="monomorphic or without any call"
        )
    model.n_monomorphic_ = stats.n_monomorphic
    d_fit = int(stats.keep.sum())
    if k > min(n, d_fit):
        raise ValueError(
            f"n_components={k} is out of range: after leaving out {d - d_fit} "
            "monomorphic or uncalled SNPs it must be at most min(n_samples, "
            f"n_features) = {min(n, d_fit)}"
        )
    model.scale_ = stats.scale
    return stats


def genotype_moments(stats: AlleleScaling, n: int) -> dict:
    """The moments a wide fit reports for the kept SNPs: ``mean`` ``2p`` and ``ss``
    the sum of squares of the mean-imputed counts about it (``ss / scale²`` is the
    standardised one)."""
    return {"n": n, "mean": stats.mean, "ss": stats.ss * stats.scale**2, "bad": 0}


def fit_genotypes(model, X, data, spec, k: int, solver: str, planned: int) -> None:
    """Fit ``model`` (a PCA) to allele counts ``X`` (n × d dask array, NaN missing) by
    ``solver`` in ``planned`` passes."""
    n, d = X.shape
    if solver in WIDE:
        passes.counter_of(model).plan(planned)
        logger.info(
            "%s: fitting %d × %d genotypes (%d row chunks) with %s",
            type(model).__name__,
            n,
            d,
            X.numblocks[0],
            solver,
        )
        if model.persist and solver != "sketch":
            X = X.persist()
        return model._fit_wide(X, data, spec, k, solver)
    if is_sparse(X):
        raise ValueError(
            "standardize='genotype' with svd_solver='tsqr' or 'covariance_eigh' "
            "needs dense blocks; sparse allele counts run the wide solvers "
            "(svd_solver='randomized', 'snapshot' or 'sketch')"
        )
    if solver == "covariance_eigh":
        passes.counter_of(model).plan(planned)
        X = X.rechunk({1: -1}) if len(X.chunks[1]) > 1 else X
        with model._timed_pass("allele moments"):
            (mom,) = dask.compute(allele_moments_graph(X))
        return fit_genotype_moments(model, mom, data, spec, k)
    passes.counter_of(model).plan(planned)
    with model._timed_pass("allele frequencies"):
        (mom,) = dask.compute(column_moments_graph(X))
    stats = genotype_scaling(model, mom, n, d, k, data)
    d_fit = int(stats.keep.sum())
    mean, scale = stats.mean, stats.scale
    Z = standardized(model._select_features(X), mean, scale)
    total = float(stats.ss.sum() / max(n - 1, 1))
    zero = np.zeros(d_fit)
    k_fit = k if isinstance(spec, int) else min(n, d_fit)
    with model._timed_pass("tsqr"):
        s, Vt = tsqr_svd_centered(Z.rechunk({1: -1}), zero)
    ev = s**2 / max(n - 1, 1)
    components = flip_signs(Vt[:k_fit])
    if not isinstance(spec, int):
        k = choose_n_components(
            spec, ev, ev / total if total > 0 else np.zeros_like(ev), n
        )
        components = components[:k]
    model._set_spectrum(n, d_fit, k, mean, ev, components, total)


def fit_genotype_moments(model, mom: dict, data, spec, k: int) -> None:
    """The ``covariance_eigh`` fit of ``model`` from the allele moments ``mom`` of
    every sample seen (``fit``'s one pass, or those merged by ``partial_fit``): the
    frequencies, then the spectrum of the standardised genotypes' covariance. The
    moments are kept (``_moments_``) for the next update."""
    n, d = int(mom["n"]), int(mom["sums"].shape[0])
    model._moments_ = mom
    model.n_samples_seen_ = n
    stats, cov = allele_covariance(mom)
    # genotype_scaling counts the infinite entries as the non-finite ones less the NaN
    nanf = np.asarray(mom["nan_features"])
    first = {"bad": int(mom["bad"]) + int(nanf.sum()), "nan_features": nanf}
    stats = genotype_scaling(model, first, n, d, k, data, stats=stats)
    d_fit = int(stats.keep.sum())
    k_fit = k if isinstance(spec, int) else min(n, d_fit)
    moments = {"n": n, "mean": np.zeros(d_fit), "m2": cov * max(n - 1, 1)}
    _, _, ev, components, total = spectrum_from_moments(moments, k_fit)
    if not isinstance(spec, int):
        ratio = ev / total if total > 0 else np.zeros_like(ev)
        k = choose_n_components(spec, ev, ratio, n)
        components = components[:k]
    model._set_spectrum(n, d_fit, k, stats.mean, ev, components, total)
