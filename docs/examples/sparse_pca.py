import numpy as np

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_sparse_spike, sparse_spike_loadings

# 20,000 × 60: 3 components of 10 non-zero loadings each, hidden in noise
spike = dict(n_components=3, support=10, seed=0)
X = make_sparse_spike(20_000, 60, **spike, chunk_rows=5_000)
spca = scalepca.SparsePCA(n_components=3, alpha=20.0, random_state=0).fit(X)
V = spca.components_  # (3, 60), most entries exactly 0
print("non-zero loadings per component:", (V != 0).sum(axis=1))
print("features of component 0:", np.flatnonzero(V[0]))
truth = sparse_spike_loadings(60, **spike)  # the loadings X was made with
found = {frozenset(np.flatnonzero(v)) for v in V}
true = {frozenset(np.flatnonzero(t)) for t in truth}
print("the true supports:", found == true)
print("passes over the data:", spca.n_passes_)
ax = plot.sparse_loadings(spca)
ax.figure.savefig("sparse_pca.png", dpi=100, bbox_inches="tight")
