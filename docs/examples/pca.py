import numpy as np

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_low_rank

# a lazy 200,000 × 40 dask array in 10 row chunks: 4 strong directions + noise
X = make_low_rank(200_000, 40, rank=4, noise=0.5, chunk_rows=20_000, seed=0)
pca = scalepca.PCA(n_components=6).fit(X)  # one pass: the 40 × 40 covariance
print("explained variance ratio:", np.round(pca.explained_variance_ratio_, 3))
print("passes over the data:", pca.n_passes_)
Z = pca.transform(X)  # lazy: dask in, dask out
print("scores: dask", type(Z).__name__, Z.shape, "in chunks of", Z.chunksize)
ax = plot.scree(pca)
ax.figure.savefig("pca.png", dpi=100, bbox_inches="tight")
