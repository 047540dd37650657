# %% [markdown]
# # 5 · Sparse PCA: interpretable loadings
#
# Principal components mix every variable. Sparse PCA forces most loadings to exactly zero, so
# each component names a few variables (pixels, words, grid cells). Two examples: the 8 × 8
# handwritten digits bundled with scikit-learn (no download), and the synthetic example of
# Zou, Hastie & Tibshirani (2006), where the true sparse structure is known.

# %%
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import scalepca
from scalepca.analysis import plot

plt.rcParams["figure.dpi"] = 80

from sklearn.datasets import load_digits

# %%
digits = load_digits()
X = digits.data  # 1797 images × 64 pixels, values 0..16
pca = scalepca.PCA(8).fit(X)
# alpha as in scikit-learn's SparsePCA (on the objective summed over the 1797 rows):
# 42 ≈ 1 per sample (alpha / √n)
spca = scalepca.SparsePCA(8, method="batch", alpha=42.0, random_state=0).fit(X)
print(f"PCA loadings exactly zero: {np.mean(pca.components_ == 0):.0%}; "
      f"sparse PCA: {np.mean(spca.components_ == 0):.0%}")
plot.components(pca, image_shape=(8, 8), colorbar=False).suptitle("PCA: every pixel in "
                                                                   "every component");

# %% gallery="sparse_pca_digits"
plot.components(spca, image_shape=(8, 8), colorbar=False).suptitle(
    "sparse PCA (alpha = 42): a few strokes each, white = zero");

# %% [markdown]
# ## Sparsity against explained variance
#
# A larger penalty gives sparser components that explain less variance. Sparse components are
# not orthogonal, so the variance they explain is the *adjusted* variance of Zou, Hastie &
# Tibshirani (what each component adds beyond the previous ones, from a QR decomposition of the
# scores) — `explained_variance_ratio_`.

# %% thumbnail=true
alphas = [0.0, 10.0, 21.0, 42.0, 85.0, 127.0]
zeros, explained = [], []
for a in alphas:
    m = scalepca.SparsePCA(8, method="batch", alpha=a, random_state=0).fit(X)
    zeros.append(np.mean(m.components_ == 0))
    explained.append(m.explained_variance_ratio_.sum())
fig, ax = plt.subplots(figsize=(5, 3.6), layout="constrained")
ax.plot(np.array(zeros) * 100, np.array(explained) * 100, "o-")
for a, z, e in zip(alphas, zeros, explained):
    ax.annotate(f"α={a:g}", (100 * z, 100 * e), textcoords="offset points", xytext=(4, 4),
                fontsize=8)
ax.axhline(100 * pca.explained_variance_ratio_.sum(), color="0.5", ls=":", label="PCA, 8 comp.")
ax.set_xlabel("loadings exactly zero (%)")
ax.set_ylabel("adjusted explained variance (%)")
ax.legend(frameon=False);

# %% [markdown]
# ## The Zou–Hastie–Tibshirani example
#
# Two hidden factors V1 ~ N(0, 290), V2 ~ N(0, 300) and V3 = −0.3 V1 + 0.925 V2 + ε; ten
# variables: X1–X4 = V1 + noise, X5–X8 = V2 + noise, X9–X10 = V3 + noise. PCA's first two
# loadings are dense; sparse PCA by the elastic-net method (`method="elasticnet"`, from the
# one-pass covariance) with four non-zero loadings per component recovers the two groups.

# %%
rng = np.random.default_rng(0)
n = 100_000
V1 = rng.normal(0, np.sqrt(290), n)
V2 = rng.normal(0, np.sqrt(300), n)
V3 = -0.3 * V1 + 0.925 * V2 + rng.normal(0, 1, n)
Xz = np.column_stack([V1] * 4 + [V2] * 4 + [V3] * 2) + rng.normal(0, 1, (n, 10))
names = [f"X{j}" for j in range(1, 11)]
zht_pca = scalepca.PCA(2).fit(Xz)
zht_spca = scalepca.SparsePCA(2, method="elasticnet", n_nonzero=[4, 4]).fit(Xz)
fig, axes = plt.subplots(2, 1, figsize=(7, 4.2), layout="constrained")
plot.sparse_loadings(zht_pca, feature_names=names, ax=axes[0])
axes[0].set_title("PCA loadings: " + axes[0].get_title())
plot.sparse_loadings(zht_spca, feature_names=names, ax=axes[1])
axes[1].set_title("sparse PCA (n_nonzero = 4, 4): " + axes[1].get_title())
print("adjusted explained variance, sparse PCA:",
      np.round(100 * zht_spca.explained_variance_ratio_, 1), "%")
print("explained variance, PCA:", np.round(100 * zht_pca.explained_variance_ratio_, 1), "%")
