# %% [markdown]
# # 2 · EOF analysis of a gridded field with a land mask and latitude weights
#
# Empirical orthogonal functions (EOFs) are the principal components of a space–time field:
# samples are time steps, features are grid cells. scalepca takes the N-D xarray data as it is:
# `open_matrix(..., sample_dims="time")` stacks `(lat, lon)` into features, cells that are NaN
# at every time (land) are left out of the fit and come back as NaN, and `weights=√cos(lat)`
# makes every cell count in proportion to its area. The components come back as maps over
# `lat`/`lon`, the scores over `time`.

# %%
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import scalepca
from scalepca.analysis import plot

plt.rcParams["figure.dpi"] = 80

import xarray as xr

from scalepca.datasets import make_gridded, write_dataset

work = Path(tempfile.mkdtemp(prefix="scalepca-eof-"))

# %% [markdown]
# ## A synthetic "sea-surface temperature" record
#
# Ten years of daily fields on a 7.5° grid (24 × 48): four smooth spatial modes with random time
# series, noise, a mean of 15 and a fixed land mask (30 % of the cells). Written to zarr by
# xarray, then opened lazily as a real record would be.

# %%
write_dataset(make_gridded(3650, n_lat=24, n_lon=48, rank=4, noise=0.5, chunk_rows=365,
                           seed=1), work / "sst.zarr")
sst = xr.open_zarr(work / "sst.zarr", consolidated=False)["sst"]
sst.attrs.update(long_name="sea-surface temperature", units="°C")  # synthetic, SST-like
print(sst)
sst.isel(time=0).plot(size=3, aspect=2, cmap="viridis")
plt.title("the field on 2000-01-01 (white: land)");

# %% [markdown]
# ## Weighted EOFs
#
# `weights` is a DataArray over `lat` only; it broadcasts over `lon`. This is the convention of
# the eofs and xeofs packages (the test suite checks scalepca against both).

# %%
weights = np.sqrt(np.cos(np.deg2rad(sst["lat"])))
X = scalepca.open_matrix(sst, sample_dims="time", weights=weights)
eof = scalepca.PCA(n_components=6).fit(X)
print(f"{eof.n_passes_} pass over {X.shape[0]:,} × {X.shape[1]:,} "
      f"({int(np.isnan(eof.mean_).sum())} land cells left out)")
eof.explained_variance_ratio_xr_.round(5)

# %%
plot.scree(eof);

# %% [markdown]
# ## The EOFs as maps
#
# `components_xr_` is a DataArray over `mode`, `lat` and `lon` with the land cells NaN (grey);
# `plot.components` draws it as maps. The first four modes hold the signal; modes 5 and 6 are
# noise.

# %% gallery="eof_maps"
print(eof.components_xr_.dims, dict(eof.components_xr_.sizes))
fig = plot.components(eof, ncols=3)
for cax in fig.axes:
    if cax.get_label() == "<colorbar>":  # EOFs have unit norm: no physical unit
        cax.set_ylabel("loading (dimensionless)");

# %% [markdown]
# The leading mode on a map of its own:

# %% thumbnail=true
fig, ax = plt.subplots(figsize=(6, 3.4), layout="constrained")
eof.components_xr_.sel(mode=1).plot(
    ax=ax, cmap="RdBu_r", cbar_kwargs={"label": "loading (dimensionless)"}
)
ax.set_title(f"EOF 1: {eof.explained_variance_ratio_[0]:.0%} of the variance");

# %% [markdown]
# ## Principal-component time series
#
# `transform` of xarray input is an xarray DataArray over `time` and `mode`.

# %%
pcs = eof.transform(X)
print(pcs.dims)
pcs.sel(mode=[1, 2]).isel(time=slice(0, 365)).plot.line(x="time", size=3, aspect=3)
plt.ylabel("PC amplitude (°C)")  # the field's units: the EOFs have unit norm
plt.title("first two PC time series, first year");

# %% [markdown]
# ## Check against a dense reference
#
# The same weighted eigenvalues from a dense eigendecomposition of the (ocean-only) covariance
# matrix in NumPy, feasible here because the example is small.

# %%
field = sst.values.reshape(sst.sizes["time"], -1)
w = np.broadcast_to(weights.values[:, None], (sst.sizes["lat"], sst.sizes["lon"])).ravel()
ocean = ~np.isnan(field).all(axis=0)
A = (field[:, ocean] - field[:, ocean].mean(axis=0)).astype(np.float64) * w[ocean]
eigenvalues = np.linalg.eigvalsh(A.T @ A / (A.shape[0] - 1))[::-1]
ref = eigenvalues[:6]
print("relative difference of the eigenvalues:",
      np.abs(eof.explained_variance_ - ref).max() / ref[0])
print("variance fractions, dense   :", np.round(ref / eigenvalues.sum(), 5))
print("variance fractions, scalepca:", np.round(eof.explained_variance_ratio_, 5))

# %%
shutil.rmtree(work)
