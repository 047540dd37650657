import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

import scalepca
from scalepca import MCA

# two monthly fields over the same 20 years that share two signals: a sea-surface
# temperature dipole (its index a slow oscillation) followed a month later by a wave
# train in the heights above, and a weaker, faster pair (a tropical monopole and a
# meridional seesaw)
rng = np.random.default_rng(0)
t = np.arange(240)
index = np.sin(2 * np.pi * t / 43) + 0.5 * rng.normal(size=t.size)
index2 = 0.6 * np.sin(2 * np.pi * t / 11) + 0.3 * rng.normal(size=t.size)
lat_s, lon_s = np.linspace(-20, 20, 21), np.linspace(150, 270, 61)
lat_h, lon_h = np.linspace(20, 70, 26), np.linspace(160, 300, 71)
dipole = np.cos(np.deg2rad(lat_s))[:, None] ** 4 * np.sin(np.deg2rad(3 * (lon_s - 150)))
wave = np.exp(-(((lat_h[:, None] - 45) / 12) ** 2)) * np.cos(
    np.deg2rad(4 * (lon_h - 160))
)
monopole = np.exp(-((lat_s[:, None] / 10) ** 2 + ((lon_s - 210) / 30) ** 2))
seesaw = np.sin(np.deg2rad(6 * (lat_h[:, None] - 45))) * np.ones(lon_h.size)
sst = (
    index[:, None, None] * dipole
    + index2[:, None, None] * monopole
    + 0.8 * rng.normal(size=(t.size, *dipole.shape))
)
hgt = (
    30 * np.roll(index, 1)[:, None, None] * wave
    + 30 * index2[:, None, None] * seesaw
    + 40 * rng.normal(size=(t.size, *wave.shape))
)
sst = xr.DataArray(
    sst,
    dims=("time", "lat", "lon"),
    name="sst",
    coords={"time": t, "lat": lat_s, "lon": lon_s},
)
hgt = xr.DataArray(
    hgt,
    dims=("time", "lat", "lon"),
    name="z",
    coords={"time": t, "lat": lat_h, "lon": lon_h},
)

X = scalepca.open_matrix(
    sst.chunk({"time": 60}), sample_dims="time", weights="sqrt_coslat"
)
Y = scalepca.open_matrix(
    hgt.chunk({"time": 60}), sample_dims="time", weights="sqrt_coslat"
)
mca = MCA(n_components=2).fit(X, Y)  # the 1281 × 1846 cross-covariance, one pass
big = MCA(n_components=2, solver="randomized", random_state=0).fit(X, Y)  # never formed
for m in (mca, big):
    print(
        f"{m.solver_:>10}: {m.n_passes_} passes, singular values",
        np.round(m.singular_values_, 4),
        "squared covariance fraction (%)",
        np.round(100 * m.squared_covariance_fraction_, 2),
    )
print(
    "randomized: residual / singular value",
    np.round(big.residual_norms_ / big.singular_values_, 12),
)
# without the pass for the exact total: its bounds only
fast = MCA(n_components=2, solver="randomized", random_state=0, total="bounds").fit(
    X, Y
)
low, high = fast.total_squared_covariance_bounds_
print(
    f"total='bounds', {fast.n_passes_} passes: total squared covariance in "
    f"[{low:.0f}, {high:.0f}] (exact {mca.total_squared_covariance_:.0f})"
)
zx, zy = mca.transform(X, Y)
r = np.corrcoef(zx.sel(mode=1), zy.sel(mode=1))[0, 1]
print(f"correlation of the mode-1 expansion coefficients: {r:.2f}")

fig, ax = plt.subplots(
    1, 3, figsize=(14, 3.2), gridspec_kw={"width_ratios": [1, 1, 1.2]}
)
mca.components_xr_.sel(mode=1).plot(ax=ax[0], cmap="RdBu_r")
ax[0].set_title("mode 1: SST pattern")
mca.components_y_xr_.sel(mode=1).plot(ax=ax[1], cmap="RdBu_r")
ax[1].set_title("mode 1: height pattern")
ax[2].plot(t, zx.sel(mode=1) / zx.sel(mode=1).std(), label="SST")
ax[2].plot(t, zy.sel(mode=1) / zy.sel(mode=1).std(), label="height", alpha=0.8)
ax[2].set_xlabel("month")
ax[2].set_title("mode 1: expansion coefficients (standardised)")
ax[2].legend(loc="lower right")
fig.tight_layout()
fig.savefig("mca.png", dpi=90, bbox_inches="tight")
