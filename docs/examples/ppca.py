import numpy as np

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_low_rank, make_missing

# 50,000 × 30, 20 % of the entries missing at random (NaN), and the truth
shape = dict(n_samples=50_000, n_features=30, rank=3, noise=0.3)
X = make_missing(**shape, missing=0.2, chunk_rows=10_000, seed=1)
truth = make_low_rank(**shape, chunk_rows=10_000, seed=1)
ppca = scalepca.PPCA(
    n_components=3, solver="em", missing="em", tol=1e-8, random_state=0
)
ppca.fit(X)  # one pass per EM iteration
print(f"σ² = {ppca.noise_variance_:.4f} after {ppca.n_iter_} iterations")
filled = ppca.impute(X[:1000])  # E[x_missing | x_observed]
gaps = np.isnan(X[:1000].compute())
err = (filled.compute() - truth[:1000].compute())[gaps]
rmse = np.sqrt(np.mean(err**2))
print(f"imputation RMSE on {gaps.sum():,} missing entries: {rmse:.3f}")
ax = plot.convergence(ppca)
ax.figure.savefig("ppca.png", dpi=100, bbox_inches="tight")
