import numpy as np

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_low_rank_sparse

# M = L + S: 600 × 400, L of rank 5, 5 % of the entries corrupted by ±1
M, L, S = make_low_rank_sparse(
    600, 400, rank=5, corruption=0.05, chunk_rows=200, seed=0, return_parts=True
)
rpca = scalepca.RobustPCA(random_state=0).fit(M)
L_hat, L_true = rpca.low_rank_.compute(), L.compute()
err = np.linalg.norm(L_hat - L_true) / np.linalg.norm(L_true)
print(f"rank {rpca.rank_}, {rpca.n_iter_} iterations, relative error of L {err:.1e}")
found = rpca.sparse_.compute() != 0
print("support of S found exactly:", bool((found == (S.compute() != 0)).all()))
# one colour scale, L's: L shows in M as on its own; the ±1 entries of S saturate it
fig = plot.rpca_blocks(M, rpca, rows=slice(0, 60), cols=slice(0, 60), scale="low_rank")
fig.savefig("robust_pca.png", dpi=100, bbox_inches="tight")
