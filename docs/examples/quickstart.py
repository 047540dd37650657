import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_low_rank

X = make_low_rank(500_000, 50, rank=5, seed=0)  # lazy 500,000 × 50 (200 MB)
pca = scalepca.PCA(n_components=8).fit(X)  # one pass over the data
print("explained variance ratio:", pca.explained_variance_ratio_.round(3))
print("passes over the data:", pca.n_passes_)
scores = pca.transform(X)  # lazy as well: dask in, dask out
ax = plot.scree(pca)
ax.figure.savefig("quickstart.png", dpi=100, bbox_inches="tight")
