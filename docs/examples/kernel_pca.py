import matplotlib.pyplot as plt

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_rings

# three concentric rings in 2-D: no linear projection separates them
radii = (1.0, 2.8, 5.0)
X, labels = make_rings(6_000, radii=radii, chunk_rows=2_000, seed=0, return_labels=True)
kpca = scalepca.KernelPCA(
    n_components=2,
    kernel="rbf",
    gamma=0.1,
    approximation="nystroem",
    n_features=300,
    random_state=0,
).fit(X)
Z = kpca.transform(X)  # lazy (6,000 × 2), block by block
print("kernel PCA eigenvalues:", kpca.eigenvalues_.round(4))
print("passes over the data:", kpca.n_passes_)
z1, ring = Z[:, 0].compute(), labels.compute()
lo = [z1[ring == r].min() for r in range(3)]
hi = [z1[ring == r].max() for r in range(3)]
for r, radius in enumerate(radii):  # where each ring lies along kernel PC 1
    print(f"ring r = {radius}: kernel PC 1 in [{lo[r]:+.3f}, {hi[r]:+.3f}]")
between = ((ring == 0) & (z1 < hi[1])) | ((ring == 1) & (z1 > lo[0]))
print(f"points where the inner two rings' intervals overlap: {between.sum()}")
names = [f"ring r = {r}" for r in radii]
fig, axes = plt.subplots(1, 2, figsize=(9, 4), layout="constrained")
ax = plot.scores(X, labels, label_names=names, ax=axes[0])
ax.get_legend().remove()  # one legend, on the right
ax.set(title="input: the two features", xlabel="$x_1$", ylabel="$x_2$", aspect="equal")
ax = plot.scores(Z, labels, label_names=names, ax=axes[1])
ax.set(
    title="kernel PCA scores (RBF, Nyström, m = 300)",
    xlabel="kernel PC 1",
    ylabel="kernel PC 2",
)
fig.savefig("kernel_pca.png", dpi=100)
