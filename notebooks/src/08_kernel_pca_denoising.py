# %% [markdown]
# # 8 · De-noising digits with kernel PCA pre-images
#
# The course notes in the seeds end their kernel PCA chapter with *Example: De-noising*: project
# noisy images on a few kernel principal components and map the scores back to image space. The
# way back needs a **pre-image** map, because a kernel PCA score lives in the kernel's feature
# space, not among the pixels. `KernelPCA(fit_inverse_transform=True)` learns it as
# scikit-learn does: a kernel ridge regression (ridge `alpha`) of the training images on their
# scores. With the Nyström or random-feature approximations the ridge is finite-dimensional and
# built from statistics reduced over row chunks in one extra pass over the data, so it scales
# like the rest of the fit.
#
# Data: the 8 × 8 handwritten digits bundled with scikit-learn (1797 images, pixels scaled to
# [0, 1]), with Gaussian noise of standard deviation 0.25 added. Both models are fitted on 1000
# noisy images and then de-noise 300 other noisy images.

# %%
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import scalepca
from scalepca.analysis import plot

plt.rcParams["figure.dpi"] = 80

import dask.array as da
from sklearn.datasets import load_digits

rng = np.random.default_rng(0)
digits = load_digits().data / 16.0
digits = digits[rng.permutation(len(digits))]
clean_train, clean_test = digits[:1000], digits[1000:1300]
noisy_train = clean_train + 0.25 * rng.standard_normal(clean_train.shape)
noisy_test = clean_test + 0.25 * rng.standard_normal(clean_test.shape)


def mse(images):
    """Mean squared error against the clean test digits."""
    return float(np.mean((np.asarray(images) - clean_test) ** 2))


# %% [markdown]
# ## Kernel PCA with pre-images, and linear PCA
#
# Kernel PCA: RBF kernel (γ = 0.01), 32 components, Nyström with 400 landmarks, pre-image ridge
# α = 0.05; the training images come as a dask array in chunks of 250 rows. Linear PCA
# reconstructs `Z Vᵀ + mean`; its best number of components is searched over 4 … 32, so the
# comparison is with linear PCA at its best.

# %%
kpca = scalepca.KernelPCA(32, kernel="rbf", gamma=0.01, approximation="nystroem",
                          n_features=400, fit_inverse_transform=True, alpha=0.05,
                          random_state=0)
kpca.fit(da.from_array(noisy_train, chunks=250))
kpca_images = kpca.inverse_transform(kpca.transform(noisy_test))
print(f"kernel PCA: {kpca.n_passes_} passes over the training data "
      "(landmarks, feature moments, pre-image statistics)")

pca_errors, pca_images = {}, {}
for k in (4, 8, 12, 16, 24, 32):
    pca = scalepca.PCA(k).fit(noisy_train)
    pca_images[k] = pca.inverse_transform(pca.transform(noisy_test))
    pca_errors[k] = mse(pca_images[k])
best_k = min(pca_errors, key=pca_errors.get)
print(f"MSE against the clean digits — noisy input: {mse(noisy_test):.4f}, "
      f"linear PCA (best, {best_k} components): {pca_errors[best_k]:.4f}, "
      f"kernel PCA pre-images: {mse(kpca_images):.4f}")
print("linear PCA by number of components:",
      ", ".join(f"{k}: {e:.4f}" for k, e in pca_errors.items()))

# %% [markdown]
# ## Errors
#
# Mean squared error against the clean digits (pixels in [0, 1]), as printed above: the noisy
# input has **0.0627**; linear PCA's best reconstruction (16 components) **0.0294**; the kernel
# PCA pre-images **0.0225** — about a quarter lower than linear PCA's best and a third of the
# noise. Linear PCA with more components keeps more of the noise (0.0373 with 32).

# %% thumbnail=true
show = np.arange(6)
rows = [("clean", clean_test), ("noisy", noisy_test),
        (f"PCA ({best_k})", pca_images[best_k]), ("kernel PCA", kpca_images)]
# one image: a row of 8 × 8 digits per method, one pixel of white between digits
montage = np.ones((len(rows) * 9 - 1, len(show) * 9 - 1))
for r, (_, images) in enumerate(rows):
    for c, i in enumerate(show):
        montage[9 * r:9 * r + 8, 9 * c:9 * c + 8] = 1 - np.clip(images[i], 0, 1).reshape(8, 8)
fig, ax = plt.subplots(figsize=(5.6, 3.8), layout="constrained")
ax.imshow(montage, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
ax.set_yticks(9 * np.arange(len(rows)) + 3.5, [label for label, _ in rows])
ax.set_xticks([])
ax.set_title(f"MSE: noisy {mse(noisy_test):.4f} · PCA {pca_errors[best_k]:.4f} · "
             f"kernel PCA {mse(kpca_images):.4f}");

# %% [markdown]
# The pre-image map is part of the fitted model: it is saved with `kpca.save(...)` and
# `inverse_transform` is lazy for dask and xarray scores, like the other estimators'. For
# `approximation="exact"` (small n) it is scikit-learn's map exactly, and agrees with
# `sklearn.decomposition.KernelPCA(fit_inverse_transform=True)` to 1e-8 (tested).
