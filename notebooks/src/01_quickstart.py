# %% [markdown]
# # 1 · Quickstart: zarr → PCA and probabilistic PCA on a local Dask cluster
#
# This notebook writes a synthetic low-rank dataset to a zarr store, starts an embedded
# two-worker Dask cluster, fits PCA and probabilistic PCA (PPCA) in **one pass over the data
# each**, draws the scree plot and round-trips a model through its zarr store.
#
# Everything runs in a temporary directory that is removed at the end.

# %%
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import scalepca
from scalepca.analysis import plot

plt.rcParams["figure.dpi"] = 80

from scalepca.datasets import low_rank_factors, make_low_rank, write_dataset

work = Path(tempfile.mkdtemp(prefix="scalepca-quickstart-"))

# %% [markdown]
# ## A local cluster
#
# `scalepca.connect()` starts an embedded `LocalCluster` (the same call takes an `address=` of an
# existing scheduler, or a SLURM/PBS/cloud section — see notebook 7). Estimators never start
# clusters themselves: they run on whatever client is current.

# %%
client = scalepca.connect(n_workers=2, threads_per_worker=1, memory_limit="1GiB")
client

# %% [markdown]
# ## Data: 50,000 × 100, rank 8 plus noise, in a zarr store
#
# `make_low_rank` builds a lazy dask array `X = Z diag(s) V + mean + noise·E` whose blocks are
# generated on the workers (each from its own seed), and `write_dataset` writes it block by
# block — the data never pass through this notebook.

# %%
path = write_dataset(
    make_low_rank(50_000, 100, rank=8, noise=1.0, chunk_rows=5_000, seed=0),
    work / "data.zarr",
)
X = scalepca.open_matrix(path)
X

# %% [markdown]
# ## PCA and PPCA
#
# Both fits compute the count, mean and centred Gram matrix of every chunk on the workers and
# merge them pairwise (a tree reduction); only the 100 × 100 result reaches the client, where
# it is diagonalised. `n_passes_` counts the reads of the data.

# %%
pca = scalepca.PCA(n_components=10).fit(X)
ppca = scalepca.PPCA(n_components=8).fit(X)
print(f"PCA : {pca.n_passes_} pass, {pca.fit_time_:.2f} s")
print(f"PPCA: {ppca.n_passes_} pass, {ppca.fit_time_:.2f} s, noise variance σ² = "
      f"{ppca.noise_variance_:.3f} (true: 1.0)")
print("explained variance ratio:", np.round(pca.explained_variance_ratio_, 3))

# %% thumbnail=true
ax = plot.scree(pca)
ax.set_title("scree plot: 8 components above the noise");

# %%
# the fitted subspace against the generator's true loadings V
V_true, scales, _ = low_rank_factors(100, 8, seed=0)
cosines = np.linalg.svd(ppca.components_ @ V_true.T, compute_uv=False)
fig, ax = plt.subplots(figsize=(5, 3.4), layout="constrained")
ax.bar(np.arange(1, 9), cosines)
ax.set_ylim(0.99, 1.0005)
ax.set_xlabel("principal angle")
ax.set_ylabel("cosine")
ax.set_title("PPCA subspace vs the true one");

# %% [markdown]
# ## Scores
#
# `transform` is lazy and returns the input's kind (here a dask array). A scatter of the first
# two scores draws a random sample of rows — only those rows' scores are computed.

# %%
Z = ppca.transform(X)
print(type(Z).__name__, Z.shape, Z.chunksize)
plot.scores(Z, max_points=4000, title="PPCA scores, 4,000 random rows");

# %% [markdown]
# ## Save and load
#
# A model is a zarr group (parameters in its attributes, fitted arrays as zarr arrays; no
# pickle). Loading it back gives identical transforms. `scalepca info` describes a store.

# %%
ppca.save(work / "ppca.zarr")
again = scalepca.load(work / "ppca.zarr")
diff = np.abs(again.transform(X[:5000]) - ppca.transform(X[:5000])).max().compute()
print("largest difference of the scores after a round trip:", diff)

from scalepca.cli import main as scalepca_cli

scalepca_cli(["info", str(work / "ppca.zarr")]);

# %%
client.close()
shutil.rmtree(work)
