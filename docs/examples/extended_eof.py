import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from eofs.examples import example_data_path

import scalepca

# eofs' example winter SST anomalies (50 winters): windows of 3 winters, one apart
sst = xr.open_dataset(example_data_path("sst_ndjfm_anom.nc"), engine="scipy")["sst"]
X = scalepca.open_matrix(
    sst.chunk({"time": 10}), sample_dims="time", weights="sqrt_coslat"
)
eeof = scalepca.ExtendedEOF(n_components=3, embedding=3, tau=1).fit(X)
print("passes over the data:", eeof.n_passes_, " windows:", eeof.n_windows_)
print("variance explained (%):", np.round(100 * eeof.explained_variance_ratio_, 1))
eofs = eeof.components_xr_  # (mode, lag, latitude, longitude)
print(eofs.dims, eofs.shape)
pcs = eeof.transform(X)  # (time, mode); the last 2 winters start no window
print("PCs NaN at the last winters:", int(pcs.isnull().any("mode").sum()))

fig, axes = plt.subplots(1, 3, figsize=(13, 3.2), layout="constrained")
lim = float(np.abs(eofs.isel(mode=0)).max())
for ax, lag in zip(axes, eofs["lag"].values, strict=True):
    eofs.isel(mode=0).sel(lag=lag).plot(
        ax=ax,
        x="longitude",
        y="latitude",
        cmap="RdBu_r",
        vmin=-lim,
        vmax=lim,
        add_colorbar=lag == 2,
    )
    ax.set_title(f"mode 1, lag {lag} winter(s)")
    if lag:
        ax.set_ylabel("")
fig.savefig("extended_eof.png", dpi=100, bbox_inches="tight")
