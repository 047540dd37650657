"""``PCA(standardize="genotype")``: the fit on allele counts standardised by frequency.

Passes: the first pass is the per-feature moments pass every fit makes; the allele
frequencies come from it (``allele_scaling``), and the standardisation is an affine map
of each SNP (centre ``2p``, scale ``√(2p(1−p))``, a missing call at the centre) that the
solvers apply where they read the blocks:

* ``randomized`` (block Krylov), ``sketch`` and ``snapshot`` are the wide solvers of
  :mod:`scalepca.solvers.wide` with the map inside their per-block products (the scale
  on the client, the centre and the missing calls in the task): the passes they take on
  any data. The
  Krylov and sketch first pass multiplies the zero-filled data before the frequencies
  are known; it is exact without missing calls. With missing calls, Krylov starts from
  that pass's product (one step of subspace iteration on a nearby operator) and
  multiplies the exact operator from then on, in the same number of passes; the one-pass
  sketch cannot set a missing call to a mean it has not yet read, and refuses: its pass
  stops at the first block holding a missing call (see :mod:`scalepca.solvers.sketch`).
* ``tsqr`` sees the standardised matrix block by block: 2 passes.
* ``covariance_eigh`` reads the counts once, for moments that merge by addition and
  give the covariance of the standardised genotypes at the frequencies of every sample
  seen (:mod:`scalepca.linalg.allele_moments`): 1 pass, and the model keeps them, so
  ``partial_fit`` adds new samples (a new cohort) by reading only those.

These are methods of the spectral PCA (:class:`GenotypeFitMixin`): they read its
parameters and set its fitted attributes; the solvers they call take the data and
values.
"""

from __future__ import annotations

import logging

import dask
import numpy as np

from ..linalg.allele_moments import allele_covariance, allele_moments_graph
from ..linalg.alleles import AlleleScaling, allele_scaling
from ..linalg.scaling import ColumnScaling
from ..solvers.covariance import spectrum
from ..solvers.wide import Columns
from ._params import fixed_k

logger = logging.getLogger(__name__)


def genotype_moments(stats: AlleleScaling, n: int) -> dict:
    """The moments a wide fit reports for the kept SNPs: ``mean`` ``2p`` and ``ss``
    the sum of squares of the mean-imputed counts about it (``ss / scale²`` is the
    standardised one)."""
    return {"n": n, "mean": stats.mean, "ss": stats.ss * stats.scale**2, "bad": 0}


class GenotypeFitMixin:
    """The fits of :class:`~scalepca.PCA` with ``standardize="genotype"`` (see the
    module)."""

    def _allele_moments(self, X) -> dict:
        """The one pass of ``covariance_eigh`` on allele counts ``X`` (rows chunked,
        one column chunk): sums that merge by addition."""
        with self._timed_pass("allele moments"):
            (mom,) = dask.compute(allele_moments_graph(X))
        return mom

    def _fit_genotype_moments(self, mom: dict, data, spec, k: int) -> None:
        """The ``covariance_eigh`` fit from the allele moments ``mom`` of
        every sample seen (``fit``'s one pass, or those merged by ``partial_fit``): the
        frequencies, then the spectrum of the standardised genotypes' covariance. The
        moments are kept (``_moments_``) for the next update."""
        n, d = int(mom["n"]), int(mom["sums"].shape[0])
        self._moments_ = mom
        self.n_samples_seen_ = n
        stats, cov = allele_covariance(mom)
        # _allele_scaling counts the infinite entries as the non-finite ones less the NaN
        nanf = np.asarray(mom["nan_features"])
        first = {"bad": int(mom["bad"]) + int(nanf.sum()), "nan_features": nanf}
        stats = self._allele_scaling(first, n, d, k, data, stats=stats)
        d_fit = int(stats.keep.sum())
        m2 = cov * max(n - 1, 1)
        res = spectrum({"n": n, "mean": np.zeros(d_fit), "m2": m2}, fixed_k(spec))
        moments = {"n": n, "mean": stats.mean, "ss": np.diag(m2)}
        self._set_solution(n, spec, k, Columns(moments, keep=stats.keep), res)

    def _allele_scaling(
        self,
        mom: dict,
        n: int,
        d: int,
        k: int,
        data,
        stats: AlleleScaling | None = None,
    ) -> AlleleScaling:
        """Allele frequencies from a first pass's moments (zero-filled, NaN counted per
        feature): infinite values refused, monomorphic and uncalled SNPs left out of the
        fit (recorded), ``k`` checked against the SNPs kept;
        ``scale_`` and ``n_monomorphic_`` set. ``stats``: the frequencies,
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
                type(self).__name__,
                stats.n_uncalled,
                stats.n_monomorphic,
            )
            self._leave_out_land(
                stats.keep.astype(np.int64),
                data,
                reason="monomorphic or without any call",
            )
        self.n_monomorphic_ = stats.n_monomorphic
        d_fit = int(stats.keep.sum())
        if k > min(n, d_fit):
            raise ValueError(
                f"n_components={k} is out of range: after leaving out {d - d_fit} "
                "monomorphic or uncalled SNPs it must be at most min(n_samples, "
                f"n_features) = {min(n, d_fit)}"
            )
        self.scale_ = stats.scale
        return stats

    def _genotype_columns(self, stats: dict, n: int, d: int, k: int, data) -> Columns:
        """What a wide solver's first pass ``stats`` give allele counts: the frequencies
        (:meth:`_allele_scaling`), and the map centre ``2p``, scale ``√(2p(1−p))``, a
        missing call at the centre, applied inside the solver's per-block products."""
        al = self._allele_scaling(stats, n, d, k, data)
        nanf = np.broadcast_to(np.asarray(stats.get("nan_features", 0)), (d,))
        return Columns(
            genotype_moments(al, n),
            keep=al.keep,
            scale=al.scale,
            scaling=ColumnScaling(al.mean, al.scale, fill=True),
            # a SNP left out is constant in the zero-filled counts of the first pass
            redraw=False,
            # that pass zero-filled the missing calls: exact without any
            exact=not bool(np.any((nanf > 0) & (nanf < n))),
        )
