import tempfile
from pathlib import Path

import numpy as np

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_counts, write_dataset

with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "cells.zarr"  # an AnnData zarr store, as scanpy writes
    cells = make_counts(10_000, 300, density=0.1, layer="counts", seed=0)
    write_dataset(cells, path)
    X = scalepca.open_matrix(path, layer="counts")  # (obs, var), CSR blocks
    pca = scalepca.PCA(n_components=10).fit(X)  # centred implicitly: sparse
    genes = pca.components_xr_  # (mode, var), labelled by gene
    top = genes.isel(mode=0).to_series().abs().nlargest(3).index.tolist()
    print("dims:", genes.dims, "top genes of PC1:", top)
    ratio = pca.explained_variance_ratio_[:5]
    print("variance explained (%):", np.round(100 * ratio, 1))
    scores = pca.transform(X)  # (obs, mode), labelled by cell
    print(scores.dims, scores.shape)
    ax = plot.scree(pca)
    ax.figure.savefig("single_cell.png", dpi=100, bbox_inches="tight")
