"""Highly variable genes from per-gene means and variances (scanpy's ``seurat`` and
``cell_ranger`` flavours), on the client: the moments come from one pass over the data
(:mod:`._singlecell`), and what is done here touches d numbers only.

``seurat``: the moments are those of the normalised counts (``expm1`` of the log data);
a gene's dispersion is ``log(var / mean)`` and its mean ``log1p(mean)``; genes are put
in ``n_bins`` equal-width bins of that mean, and each dispersion is standardised by its
bin's mean and standard deviation (a bin of one gene: the dispersion divided by itself,
so 1). ``cell_ranger``: the moments of the log data themselves; dispersion
``var / mean``; bins at the 10th, 15th, …, 100th percentiles of the mean; standardised
by the bin's median and its median absolute deviation (scaled to a normal's standard
deviation). Genes are then chosen by cutoffs on the mean and the standardised
dispersion, or as the ``n_top_genes`` of largest standardised dispersion (ties at the
last one included).

``seurat_v3`` reads raw counts: a LOESS curve (``skmisc.loess``, span 0.3, degree 2)
of log10 variance against log10 mean gives each gene an expected standard deviation
``s``; the counts are clipped at ``mean + s √n`` and the variance of the clipped
counts standardised by ``s`` ranks the genes (:func:`seurat_v3_clip`,
:func:`seurat_v3_genes`): two passes, the second needing the curve of the first.
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

FLAVORS = ("seurat", "cell_ranger", "seurat_v3")

#: the median absolute deviation of a standard normal (its 3rd quartile)
_MAD_NORMAL = 0.6744897501960817


def _mad(values) -> float:
    a = np.asarray(values, dtype=np.float64)
    return float(np.median(np.abs(a - np.median(a)) / _MAD_NORMAL))


def gene_dispersions(
    mean: np.ndarray, var: np.ndarray, *, flavor: str, n_bins: int = 20
):
    """``(means, dispersions, dispersions_norm)`` per gene as the flavour defines them.

    ``mean`` and ``var`` (denominator n − 1) are those the flavour reads (see the module
    docstring).
    """
    import pandas as pd

    mean = np.array(mean, dtype=np.float64)
    mean[mean == 0] = 1e-12
    disp = np.asarray(var, dtype=np.float64) / mean
    if flavor == "seurat":
        disp[disp == 0] = np.nan
        disp = np.log(disp)
        mean = np.log1p(mean)
        bins = n_bins
    else:
        bins = np.r_[-np.inf, np.percentile(mean, np.arange(10, 105, 5)), np.inf]
    frame = pd.DataFrame({"means": mean, "dispersions": disp})
    frame["mean_bin"] = pd.cut(frame["means"], bins=bins)
    grouped = frame.groupby("mean_bin", observed=True)["dispersions"]
    if flavor == "seurat":
        stats = grouped.agg(avg="mean", dev="std")
        single = stats["dev"].isnull()  # a bin of one gene: standardised to 1
        stats.loc[single, "dev"] = stats.loc[single, "avg"]
        stats.loc[single, "avg"] = 0
    else:
        stats = grouped.agg(avg="median", dev=_mad)
    per_gene = stats.loc[frame["mean_bin"]]
    norm = (disp - per_gene["avg"].to_numpy()) / per_gene["dev"].to_numpy()
    return mean, disp, norm


def select_genes(
    mean,
    norm,
    *,
    n_top_genes: int | None,
    min_mean: float,
    max_mean: float,
    min_disp: float,
    max_disp: float,
) -> np.ndarray:
    """The boolean mask of highly variable genes (see the module docstring)."""
    if n_top_genes is None:
        dn = np.nan_to_num(norm)
        return (mean > min_mean) & (mean < max_mean) & (dn > min_disp) & (dn < max_disp)
    finite = norm[~np.isnan(norm)]
    k = min(int(n_top_genes), finite.size)
    cut = np.sort(finite)[::-1][k - 1]
    chosen = np.nan_to_num(norm, nan=-np.inf) >= cut
    near = np.abs(finite - cut) <= 1e-9 * max(abs(cut), 1.0)
    if np.count_nonzero(near) > np.count_nonzero(near & (finite >= cut)):
        # e.g. bins of two genes, whose standardised dispersions are ±1/√2 exactly
        logger.warning(
            "highly variable genes: the n_top_genes=%d cut falls among %d genes of "
            "equal standardised dispersion (to rounding); which of them are chosen "
            "follows rounding, in scanpy as here",
            n_top_genes,
            int(np.count_nonzero(near)),
        )
    return chosen


def loess_class():
    """scikit-misc's ``loess`` (seurat_v3's curve), or ImportError saying how to get
    it."""
    try:
        from skmisc.loess import loess
    except ImportError as err:
        raise ImportError(
            f"flavor='seurat_v3' fits a LOESS curve with scikit-misc ({err}); "
            "pip install scikit-misc"
        ) from err
    return loess


def seurat_v3_clip(mean: np.ndarray, var: np.ndarray, n: int, *, span: float = 0.3):
    """``(expected standard deviation, clip value)`` per gene from the raw counts'
    means and variances (denominator n − 1), by the LOESS fit of seurat_v3."""
    loess = loess_class()
    fitted = np.zeros(mean.shape[0])
    varying = var > 0
    model = loess(np.log10(mean[varying]), np.log10(var[varying]), span=span, degree=2)
    model.fit()
    fitted[varying] = model.outputs.fitted_values
    sd = np.sqrt(10**fitted)
    return sd, sd * np.sqrt(n) + mean


def seurat_v3_genes(mean, sd, clipped_sum, clipped_sq_sum, n: int, n_top_genes: int):
    """``(standardised variance, rank, mask)`` of seurat_v3 from the clipped counts'
    sums."""
    v = (n * mean**2 + clipped_sq_sum - 2 * clipped_sum * mean) / ((n - 1) * sd**2)
    rank = np.argsort(np.argsort(-v)).astype(np.float64)  # 0: most variable
    mask = rank < int(n_top_genes)
    rank[~mask] = np.nan
    return v, rank, mask
