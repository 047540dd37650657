# %% [markdown]
# # 10 · Single-cell PCA, scanpy's way, inside the passes
#
# The single-cell pipeline before a PCA is `normalize_total → log1p → highly_variable_genes →
# scale → pca`. scanpy writes a new matrix at each step; `scalepca.pp.pca` reads the raw
# counts where they are stored, does every step inside the task that reads a block of cells,
# learns what the steps need from all cells in passes of its own, and writes the results where
# scanpy writes them (`obsm["X_pca"]`, `varm["PCs"]`, `uns["pca"]`, the highly variable genes
# in `var`) — into the AnnData object, or into a `.zarr`/`.h5ad` store beside `X`.
#
# Two datasets, both made here (nothing is downloaded):
#
# 1. scanpy's bundled **`pbmc68k_reduced`** (700 blood cells, 765 genes, Louvain clusters). It
#    keeps log-normalised values in `raw`, not counts; their `expm1` (normalised counts) go
#    through the whole pipeline as raw counts would.
# 2. a **synthetic atlas**, `make-data --kind counts`: negative-binomial counts around low-rank
#    log-means, written as an AnnData zarr store.
#
# On each, scalepca's numbers are set against scanpy's in-memory pipeline. The user guide's
# page on single-cell counts has the details (passes, sparse scaling, subsets).

# %%
import shutil
import tempfile
import warnings
from pathlib import Path

import anndata
import matplotlib.pyplot as plt
import numpy as np
import scanpy as sc
import scipy.sparse as sp

import scalepca

plt.rcParams["figure.dpi"] = 80
warnings.filterwarnings("ignore", message=".*zarr v2.*")  # anndata's notice on writing
warnings.filterwarnings("ignore", message="zero-centering a sparse")  # scanpy's scale
warnings.filterwarnings("ignore", message=".*autosharding")  # zarr's notice on writing
tmp = Path(tempfile.mkdtemp(prefix="scalepca-nb10-"))

# %% [markdown]
# ## pbmc68k_reduced: the pipeline from a store
#
# The counts (here: `expm1` of scanpy's stored log values) are written as an AnnData zarr
# store with the cells' Louvain clusters in `obs`. `pp.pca` runs scanpy's steps on the store
# and writes the results into it.

# %%
pb = sc.datasets.pbmc68k_reduced()
counts = sp.csr_matrix(pb.raw.X, dtype=np.float64)
counts.data = np.expm1(counts.data)
cells = anndata.AnnData(counts, obs=pb.obs[["louvain"]].copy(),
                        var=pb.raw.var[[]].copy())
store = tmp / "pbmc68k.zarr"
cells.write_zarr(store)
print(cells)

STEPS = dict(normalize_total=True, log1p=True, flavor="seurat", n_top_genes=300, scale=True,
             max_value=10)
model = scalepca.pp.pca(str(store), 30, **STEPS)
ours = anndata.read_zarr(store)
print(f"{model.n_features_in_} highly variable genes, "
      f"{ours.uns['pca']['scalepca']['n_passes']} passes over the counts")
print("written:", list(ours.obsm), list(ours.varm), list(ours.uns))

# %% [markdown]
# ## The same with scanpy, in memory
#
# scanpy's pipeline on the same counts, the PCA with `svd_solver="arpack"` (exact to machine
# precision, as scalepca's covariance solver is). Same genes, same variance ratios, same axes
# up to their sign.

# %%
ref = anndata.AnnData(counts.copy())
sc.pp.normalize_total(ref)
sc.pp.log1p(ref)
sc.pp.highly_variable_genes(ref, n_top_genes=300)
sc.pp.scale(ref, max_value=10)
sc.pp.pca(ref, n_comps=30, svd_solver="arpack")


def compare(ours, ref):
    hv = ref.var["highly_variable"].to_numpy()
    same_genes = np.array_equal(ours.var["highly_variable"].to_numpy(), hv)
    r1, r2 = ours.uns["pca"]["variance_ratio"], ref.uns["pca"]["variance_ratio"]
    pcs1, pcs2 = np.asarray(ours.varm["PCs"])[hv], np.asarray(ref.varm["PCs"])[hv]
    corr = min(abs(np.corrcoef(pcs1[:, k], pcs2[:, k])[0, 1]) for k in range(pcs1.shape[1]))
    x1, x2 = np.asarray(ours.obsm["X_pca"], float), np.asarray(ref.obsm["X_pca"], float)
    score_corr = min(abs(np.corrcoef(x1[:, k], x2[:, k])[0, 1]) for k in range(x1.shape[1]))
    print(f"same highly variable genes: {same_genes}")
    print(f"variance ratios, largest relative difference: {np.max(np.abs(r1 / r2 - 1)):.1e}")
    print(f"PCs (loadings), 1 − smallest |corr|: {1 - corr:.1e}")
    print(f"X_pca (float32, as scanpy's), 1 − smallest |corr|: {1 - score_corr:.1e}")


compare(ours, ref)

# %% [markdown]
# ## Variance ratio

# %% gallery="nb10_single_cell"
fig, ax = plt.subplots(figsize=(6, 3.2))
k = np.arange(1, 31)
ax.plot(k, ref.uns["pca"]["variance_ratio"], "o", mfc="none", ms=8, label="scanpy")
ax.plot(k, ours.uns["pca"]["variance_ratio"], ".", label="scalepca.pp.pca")
ax.set_xlabel("principal component")
ax.set_ylabel("variance ratio")
ax.set_yscale("log")
ax.set_title("pbmc68k_reduced: 300 highly variable genes, scaled")
ax.legend()
fig.tight_layout()

# %% [markdown]
# ## Cells in the first two components, coloured by Louvain cluster

# %% thumbnail=true
louvain = ours.obs["louvain"]
X_pca = np.asarray(ours.obsm["X_pca"])
fig, ax = plt.subplots(figsize=(6, 4.5))
colors = plt.get_cmap("tab20")
for i, cluster in enumerate(louvain.cat.categories):
    sel = (louvain == cluster).to_numpy()
    ax.scatter(X_pca[sel, 0], X_pca[sel, 1], s=8, color=colors(i), label=cluster)
ax.set_xlabel("PC1")
ax.set_ylabel("PC2")
ax.legend(title="louvain", markerscale=2, fontsize=7, ncol=2, loc="best")
fig.tight_layout()

# %% [markdown]
# ## Top genes of each component
#
# The genes of largest loading (`varm["PCs"]`, zero for genes not selected), signed.

# %%
pcs = np.asarray(ours.varm["PCs"])
genes = ours.var_names.to_numpy()
fig, axes = plt.subplots(1, 3, figsize=(9, 3.2), sharex=True)
for j, ax in enumerate(axes):
    top = np.argsort(-np.abs(pcs[:, j]))[:10][::-1]
    ax.barh(genes[top], pcs[top, j], color=np.where(pcs[top, j] > 0, "C3", "C0"))
    ax.set_title(f"PC{j + 1}")
    ax.tick_params(axis="y", labelsize=8)
axes[1].set_xlabel("loading")
fig.tight_layout()

# %% [markdown]
# ## A subset of cells, read where it lies
#
# `mask_obs` keeps some cells (here: those of Louvain clusters 0 to 3), read from the store
# without copying it. The result is scanpy's on the copy
# `adata[mask].copy()`: library sizes, highly variable genes and scaling all from those cells.
# The other cells' rows of `X_pca` are NaN. A view, `scalepca.pp.pca(adata[mask])`, gives the
# same numbers.

# %%
kept = louvain.isin(["0", "1", "2", "3"]).to_numpy()
subset_store = tmp / "pbmc68k-subset.zarr"
shutil.copytree(store, subset_store)
scalepca.pp.pca(str(subset_store), 20, mask_obs=kept, **STEPS)
sub = anndata.read_zarr(subset_store)
print(f"{kept.sum()} of {kept.size} cells; NaN rows for the others: "
      f"{np.isnan(sub.obsm['X_pca'][~kept]).all()}")

ref_sub = anndata.AnnData(counts[kept].copy())
sc.pp.normalize_total(ref_sub)
sc.pp.log1p(ref_sub)
sc.pp.highly_variable_genes(ref_sub, n_top_genes=300)
sc.pp.scale(ref_sub, max_value=10)
sc.pp.pca(ref_sub, n_comps=20, svd_solver="arpack")
mine_sub = anndata.AnnData(obs=sub.obs[kept], var=sub.var,
                         obsm={"X_pca": sub.obsm["X_pca"][kept]},
                         varm={"PCs": sub.varm["PCs"]}, uns={"pca": sub.uns["pca"]})
compare(mine_sub, ref_sub)

# %% [markdown]
# ## A synthetic atlas
#
# `scalepca make-data atlas.zarr --kind counts --n-samples 20000 --n-features 2000
# --set density=0.05` writes the same store from the shell. Here it is made from Python: 20,000
# cells × 2,000 genes, 5 % non-zero, ten latent factors. `pp.pca` reads it in row blocks of
# 5,000 cells.

# %%
import zarr

from scalepca.datasets import make_counts, write_dataset

atlas = tmp / "atlas.zarr"
write_dataset(make_counts(20_000, 2_000, density=0.05, chunk_rows=5_000, seed=1), atlas)
nnz = zarr.open_group(str(atlas), mode="r")["X/data"].shape[0]
print(f"20,000 cells × 2,000 genes, {nnz:,} stored counts ({nnz / 4e7:.1%} of the entries)")
model = scalepca.pp.pca(str(atlas), 20, chunks=5_000, normalize_total=True, log1p=True,
                        flavor="seurat", n_top_genes=500, scale=True, max_value=10)
ours = anndata.read_zarr(atlas)
print(f"{ours.uns['pca']['scalepca']['n_passes']} passes")

ref = anndata.AnnData(sp.csr_matrix(ours.X, dtype=np.float64))
sc.pp.normalize_total(ref)
sc.pp.log1p(ref)
sc.pp.highly_variable_genes(ref, n_top_genes=500)
sc.pp.scale(ref, max_value=10)
sc.pp.pca(ref, n_comps=20, svd_solver="arpack")
compare(ours, ref)

# %%
fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
k = np.arange(1, 21)
a1.plot(k, ref.uns["pca"]["variance_ratio"], "o", mfc="none", ms=8, label="scanpy")
a1.plot(k, ours.uns["pca"]["variance_ratio"], ".", label="scalepca.pp.pca")
a1.set_xlabel("principal component")
a1.set_ylabel("variance ratio")
a1.set_title("synthetic atlas: 10 latent factors")
a1.legend()
X_pca = np.asarray(ours.obsm["X_pca"])
a2.hexbin(X_pca[:, 0], X_pca[:, 1], gridsize=60, bins="log", cmap="viridis")
a2.set_xlabel("PC1")
a2.set_ylabel("PC2")
a2.set_title("20,000 cells")
fig.tight_layout()

# %%
shutil.rmtree(tmp)
