import numpy as np

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_gridded

# a lazy (time, lat, lon) sea-surface-temperature-like field, land cells NaN
ds = make_gridded(365, n_lat=36, n_lon=72, rank=4, seed=0)
X = scalepca.open_matrix(ds, sample_dims="time", weights="sqrt_coslat")
pca = scalepca.PCA(n_components=4).fit(X)
print("land cells left out:", int(ds.sst.isel(time=0).isnull().sum()))
print("variance explained (%):", np.round(100 * pca.explained_variance_ratio_, 1))
north = scalepca.north_test(pca)
print("North's typical errors:", np.round(north.errors, 2), "overlap:", north.overlaps)
pcs = pca.transform(ds)  # (time, mode): the PC series
print(pcs.dims, pcs.shape)
fig = plot.components(pca.components_xr_, ncols=2)
fig.savefig("eof.png", dpi=100, bbox_inches="tight")
