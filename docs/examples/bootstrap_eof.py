import matplotlib.pyplot as plt
import numpy as np

import scalepca
from scalepca import BootstrapEOF
from scalepca.datasets import make_gridded

# 60 winters of a (time, lat, lon) field with four modes and noise, land cells NaN
ds = make_gridded(60, n_lat=36, n_lon=72, rank=4, seed=1)
X = scalepca.open_matrix(ds, sample_dims="time", weights="sqrt_coslat")
boot = BootstrapEOF(n_components=6, n_bootstraps=500, random_state=0).fit(X)
pca = scalepca.PCA(n_components=6, svd_solver="snapshot").fit(X)
print(
    "passes over the data: bootstrap",
    boot.n_passes_,
    "/ PCA alone",
    pca.n_passes_,
    f"(solver {boot.solver_!r}, 500 replicates)",
)
lo, hi = boot.explained_variance_ratio_interval_
for i, (r, a, b, sep) in enumerate(
    zip(boot.explained_variance_ratio_, lo, hi, boot.separated_, strict=True)
):
    print(
        f"mode {i + 1}: {100 * r:5.2f} %  95 % interval [{100 * a:5.2f}, "
        f"{100 * b:5.2f}]  separated from the next: {sep}"
    )
print("modes to keep (n_significant_):", boot.n_significant_)
print("North's rule of thumb agrees:", ~scalepca.north_test(pca).overlaps)

fig, ax = plt.subplots(1, 2, figsize=(11, 3.4))
modes = np.arange(1, 7)
ax[0].errorbar(
    modes,
    100 * boot.explained_variance_ratio_,
    yerr=100
    * np.abs(boot.explained_variance_ratio_interval_ - boot.explained_variance_ratio_),
    fmt="o",
    capsize=4,
)
ax[0].axvline(boot.n_significant_ + 0.5, color="grey", ls="--")
ax[0].set_xlabel("mode")
ax[0].set_ylabel("variance explained (%)")
ax[0].set_title("ratios with 95 % bootstrap intervals")
boot.components().sel(mode=1).plot(ax=ax[1], cmap="RdBu_r")
ax[1].contour(
    ds.lon, ds.lat, boot.components_std_[0].reshape(36, 72), colors="k", linewidths=0.6
)
ax[1].set_title("EOF 1, contours: its bootstrap std")
fig.tight_layout()
fig.savefig("bootstrap_eof.png", dpi=90, bbox_inches="tight")
