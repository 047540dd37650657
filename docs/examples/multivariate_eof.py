import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from eofs.examples import example_data_path

import scalepca

# eofs' example files: winter SST anomalies (K) and 500 hPa height (m), 50 common
# winters
sst = xr.open_dataset(example_data_path("sst_ndjfm_anom.nc"), engine="scipy")["sst"]
z500 = xr.open_dataset(
    example_data_path("hgt_djf.nc"), decode_times=False, engine="scipy"
)["z"].isel(pressure=0, drop=True)
z500 = z500.isel(time=slice(15, None)).assign_coords(time=sst["time"].values)

# each field weighted by √cos φ on its own grid and divided by √(its total variance)
meof = scalepca.MultivariateEOF(n_components=3).fit([sst, z500])
print("passes over the data:", meof.n_passes_)
print(
    "total variance of each field:",
    dict(
        zip(
            meof.variables_,
            np.round(meof.total_variance_per_variable_, 3).tolist(),
            strict=True,
        )
    ),
)
print("variance explained (%):", np.round(100 * meof.explained_variance_ratio_, 1))
pcs = meof.transform([sst, z500])  # (time, mode): one joint series per mode
print(pcs.dims, pcs.shape)
sst_hat, z_hat = meof.inverse_transform(pcs)  # each field in its own units and grid
print(sst_hat.dims, z_hat.dims)

fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), layout="constrained")
for ax, eof, title in zip(axes, meof.components_xr_, ("SST", "Z500"), strict=True):
    mode = eof.isel(mode=0)
    lim = float(np.abs(mode).max())
    mode.plot(
        ax=ax,
        x="longitude",
        y="latitude",
        cmap="RdBu_r",
        vmin=-lim,
        vmax=lim,
        cbar_kwargs={"label": "EOF (weighted, normalised)"},
    )
    ax.set_title(f"{title}, joint mode 1")
fig.savefig("multivariate_eof.png", dpi=100, bbox_inches="tight")
