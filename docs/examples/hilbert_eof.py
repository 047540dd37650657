import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

import scalepca
from scalepca import HilbertEOF

# a wave travelling east along the equator (period 48 months, one wavelength across the
# basin), its amplitude falling off with latitude, plus noise: monthly (time, lat, lon)
rng = np.random.default_rng(0)
t = np.arange(480)
lat = np.linspace(-30, 30, 25)
lon = np.linspace(120, 280, 65)
phase = 2 * np.pi * (t[:, None, None] / 48 - (lon - 120)[None, None, :] / 160)
envelope = np.exp(-((lat / 12) ** 2))[None, :, None]
sst = envelope * np.cos(phase) + 0.3 * rng.normal(size=(t.size, lat.size, lon.size))
field = xr.DataArray(
    sst,
    dims=("time", "lat", "lon"),
    coords={"time": t, "lat": lat, "lon": lon},
    name="sst",
)

X = scalepca.open_matrix(
    field.chunk({"time": 120}), sample_dims="time", weights="sqrt_coslat"
)
heof = HilbertEOF(n_components=2, padding="exp", decay_factor=0.2).fit(X)
pca = scalepca.PCA(n_components=2).fit(X)
print(
    "Hilbert EOF, variance explained (%):",
    np.round(100 * heof.explained_variance_ratio_, 1),
)
print(
    "EOF (PCA), variance explained (%):  ",
    np.round(100 * pca.explained_variance_ratio_, 1),
)
print("passes over the data:", heof.n_passes_, f"(solver {heof.solver_!r})")

# the phase of mode 1 along the equator grows eastward: the direction the wave travels
eq = heof.components_phase().sel(mode=1, lat=0, method="nearest")
step = np.angle(np.exp(1j * eq.diff("lon"))).mean()
print(
    f"phase step per grid cell: {np.degrees(step):.2f} deg "
    f"(one wavelength over the basin: {360 * 2.5 / 160:.2f} deg)"
)
pc_phase = np.unwrap(heof.scores_phase().sel(mode=1).values)
period = 2 * np.pi / np.polyfit(t, pc_phase, 1)[0]
print(f"period from the PC phase: {abs(period):.1f} months (true: 48)")

fig, ax = plt.subplots(1, 3, figsize=(13, 3.2))
heof.components_amplitude().sel(mode=1).plot(ax=ax[0], cmap="viridis")
ax[0].set_title("mode 1: amplitude")
heof.components_phase().sel(mode=1).plot(
    ax=ax[1], cmap="twilight", vmin=-np.pi, vmax=np.pi
)
ax[1].set_title("mode 1: phase (rad)")
ax[2].plot(t[:120], heof.scores_amplitude().sel(mode=1)[:120], label="amplitude")
ax[2].plot(t[:120], heof.scores_phase().sel(mode=1)[:120] / np.pi, label="phase / π")
ax[2].set_xlabel("month")
ax[2].set_title("PC 1")
ax[2].legend(loc="lower right")
fig.tight_layout()
fig.savefig("hilbert_eof.png", dpi=90, bbox_inches="tight")
