import warnings

import anndata
import matplotlib.pyplot as plt
import numpy as np
import scanpy as sc
import scipy.sparse as sp

import scalepca
from scalepca.analysis import plot

warnings.filterwarnings("ignore", message="zero-centering a sparse")
# scanpy's bundled 700 blood cells: log-normalised values in .raw, cell types in obs
pb = sc.datasets.pbmc68k_reduced()
counts = sp.csr_matrix(pb.raw.X, dtype=np.float64)
counts.data = np.expm1(counts.data)  # back to (normalised) counts
adata = anndata.AnnData(counts, obs=pb.obs[["bulk_labels"]], var=pb.raw.var[[]])
scalepca.pp.pca(  # scanpy's normalize_total → log1p → hvg → scale → pca, in the passes
    adata,
    30,
    normalize_total=True,
    log1p=True,
    flavor="seurat",
    n_top_genes=300,
    scale=True,
    max_value=10,
)
ratio = 100 * adata.uns["pca"]["variance_ratio"]
print("variance explained (%):", np.round(ratio[:5], 1))
loadings = adata.varm["PCs"]  # (genes × 30), zero for the genes left out
for j in range(2):
    top = np.argsort(-np.abs(loadings[:, j]))[:5]
    print(f"PC{j + 1} top genes:", ", ".join(adata.var_names[top]))

fig, axes = plt.subplots(
    1, 3, figsize=(14, 4.4), layout="constrained", width_ratios=(1.6, 1, 1)
)
cell_type = adata.obs["bulk_labels"].cat
ax = plot.scores(
    adata.obsm["X_pca"],
    cell_type.codes.to_numpy(),
    label_names=list(cell_type.categories),
    ax=axes[0],
    s=10,
)
ax.set(xlabel=f"PC1 ({ratio[0]:.1f} %)", ylabel=f"PC2 ({ratio[1]:.1f} %)")
ax.set_title("cells by cell type (obs['bulk_labels'])")
ax.legend(fontsize=8, markerscale=2, loc="upper left", bbox_to_anchor=(1, 1))
for j, ax in zip(
    range(2), axes[1:], strict=True
):  # scanpy's pca_loadings: genes by name
    top = np.argsort(-np.abs(loadings[:, j]))[:12][::-1]
    color = np.where(loadings[top, j] > 0, "C3", "C0")  # the sign of the loading
    ax.barh(adata.var_names[top], loadings[top, j], color=color)
    ax.set(title=f"PC{j + 1}: top genes", xlabel="loading (varm['PCs'])")
fig.savefig("single_cell_pbmc.png", dpi=100)
