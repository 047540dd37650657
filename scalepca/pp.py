"""scanpy-shaped entry points: ``scalepca.pp.pca(adata, n_comps=50, ...)`` runs scanpy's
preprocessing and PCA inside scalepca's passes and writes the results where scanpy does
(:mod:`scalepca.analysis.singlecell`)."""

from __future__ import annotations

from .analysis.singlecell import pca

__all__ = ["pca"]
