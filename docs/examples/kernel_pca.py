import matplotlib.pyplot as plt

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_rings

# three concentric rings in 2-D: no linear projection separates them
X, labels = make_rings(
    6_000, radii=(1.0, 2.8, 5.0), chunk_rows=2_000, seed=0, return_labels=True
)
kpca = scalepca.KernelPCA(
    n_components=2,
    kernel="rbf",
    gamma=0.5,
    approximation="nystroem",
    n_features=300,
    random_state=0,
).fit(X)
Z = kpca.transform(X)  # lazy (6,000 × 2), block by block
print("kernel PCA eigenvalues:", kpca.eigenvalues_.round(4))
print("passes over the data:", kpca.n_passes_)
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
plot.scores(X, labels, ax=axes[0]).set_title("input")
ax = plot.scores(Z, labels, ax=axes[1])
ax.set_title("kernel PCA (Nyström, m = 300)")
fig.savefig("kernel_pca.png", dpi=100, bbox_inches="tight")
