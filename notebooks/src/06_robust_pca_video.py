# %% [markdown]
# # 6 · Robust PCA: background and foreground of a surveillance-style video
#
# Principal component pursuit splits a matrix into a low-rank part and a sparse part,
# `M = L + S`. With one video frame per row of M, a static scene (slowly changing light) is low
# rank and the moving objects are sparse: L is the background, S the foreground. scalepca's
# `RobustPCA` solves it by the inexact augmented Lagrangian method with a blocked randomized
# SVD; M may be a dask array in 2-D blocks much larger than memory.
#
# The video is synthetic (no download): a textured static background whose brightness drifts,
# three objects crossing the scene, and sensor noise.
#
# With noise there is no exact split into low rank + sparse (the noise is neither), so the
# solver is stopped when the residual ‖M − L − S‖_F / ‖M‖_F reaches 1 %, about the relative
# size of the noise (`tol=1e-2`); run further, it would fit the noise with a growing rank.
# The small non-zeros of S are noise; the foreground is where |S| is large.

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

# %%
rng = np.random.default_rng(0)
T, H, W = 120, 48, 64
yy, xx = np.mgrid[0:H, 0:W]
background = (0.35 + 0.25 * xx / W + 0.1 * np.sin(yy / 4.0)
              + 0.15 * ((xx // 8 + yy // 12) % 2))          # gradient, stripes, "tiles"
light = 1.0 + 0.08 * np.sin(np.linspace(0, 3 * np.pi, T))  # slow illumination drift
frames = background[None] * light[:, None, None]
truth_fg = np.zeros((T, H, W), dtype=bool)
objects = [  # (row, col at t=0, d row/frame, d col/frame, half size, intensity)
    (10, -6, 0.05, 0.6, 3, 1.0), (30, 70, -0.08, -0.5, 4, 0.05), (2, 20, 0.35, 0.15, 2, 0.9),
]
for t in range(T):
    for r0, c0, dr, dc, half, value in objects:
        r, c = int(round(r0 + dr * t)), int(round(c0 + dc * t))
        box = (slice(max(r - half, 0), max(r + half + 1, 0)),
               slice(max(c - half, 0), max(c + half + 1, 0)))
        frames[t][box] = value
        truth_fg[t][box] = True
video = frames + 0.01 * rng.standard_normal(frames.shape)
M = video.reshape(T, H * W)
print(f"M: {M.shape[0]} frames × {M.shape[1]} pixels; foreground pixels {truth_fg.mean():.1%}")

# %%
Md = da.from_array(M, chunks=(60, 1536))   # 2 × 2 blocks
rpca = scalepca.RobustPCA(tol=1e-2, random_state=0).fit(Md)
print(f"rank of L: {rpca.rank_}, {rpca.n_iter_} iterations, converged={rpca.converged_}; "
      f"entries of S: {rpca.nnz_ / M.size:.0%} non-zero, "
      f"{np.mean(np.abs(rpca.sparse_.compute()) > 0.1):.1%} above 0.1")
plot.convergence(rpca);

# %% [markdown]
# ## Frame by frame: observed | background (L) | foreground (|S|)

# %% gallery="robust_pca_video"
plot.rpca_frames(M, rpca, frames=[5, 40, 75, 110], image_shape=(H, W));

# %% [markdown]
# ## How well is the foreground found?
#
# Pixels with |S| above a small threshold, against the true object masks. The darker object
# (intensity 0.05 on a brighter background) is found as well as the bright ones: what matters
# is that it differs from the background, not its brightness. The usual shortcut — subtracting
# the per-pixel median over time — is shown for comparison.

# %%
S = rpca.sparse_.compute().reshape(T, H, W)
L = rpca.low_rank_.compute().reshape(T, H, W)


def precision_recall(found, truth):
    tp = np.sum(found & truth)
    return tp / max(found.sum(), 1), tp / truth.sum()


thr = 0.1
p, r = precision_recall(np.abs(S) > thr, truth_fg)
median_fg = np.abs(video - np.median(video, axis=0)) > thr
pm, rm = precision_recall(median_fg, truth_fg)
print(f"robust PCA      |S| > {thr}: precision {p:.3f}, recall {r:.3f}")
print(f"median background    > {thr}: precision {pm:.3f}, recall {rm:.3f}  "
      "(the drifting light leaks into the foreground)")
true_bg = background[None] * light[:, None, None]
print(f"background: mean |L − true background| = {np.mean(np.abs(L - true_bg)):.4f} "
      f"(noise level 0.01)")

# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 2.8), layout="constrained")
t = 75
for ax, img, title in zip(axes, [truth_fg[t], np.abs(S[t]) > thr, median_fg[t]],
                          ["true foreground", "robust PCA |S| > 0.1", "median subtraction"]):
    ax.imshow(img, cmap="gray", interpolation="nearest")
    ax.set_title(f"{title}, frame {t}", fontsize=9)
    ax.set_xticks([]); ax.set_yticks([])

# %% [markdown]
# Frame 75 in one picture: the background robust PCA recovered (L, grey) and, in colour, the
# pixels it put in the foreground (|S| > 0.1).

# %% thumbnail=true
fig, ax = plt.subplots(figsize=(5, 4), layout="constrained")
ax.imshow(L[t], cmap="gray", interpolation="nearest")
moving = np.ma.masked_where(np.abs(S[t]) <= thr, np.abs(S[t]))
ax.imshow(moving, cmap="autumn", interpolation="nearest")
ax.set_title(f"frame {t}: background L, foreground |S| > {thr} in colour")
ax.set_xticks([])
ax.set_yticks([]);
