# %% [markdown]
# # 3 · Probabilistic PCA with missing values
#
# Real records have gaps. `PPCA(missing="em")` treats NaN entries as missing at random: every
# EM iteration is one pass over the data, each row's E-step uses only its observed entries, and
# the M-step solves for the loadings `W`, the mean and the noise variance σ² from statistics
# reduced across chunks. `impute(X)` fills the gaps with the model's reconstruction `W⟨z⟩ + μ`.
#
# Here 20 % of the entries of a low-rank + noise matrix are removed at random; the missing
# values are predicted and compared with the truth and with the usual shortcut (fill with the
# column mean, then PCA).

# %%
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import scalepca
from scalepca.analysis import plot

plt.rcParams["figure.dpi"] = 80

import dask.array as da
from scipy.linalg import subspace_angles

from scalepca.datasets import make_low_rank

# %%
rng = np.random.default_rng(0)
X_true = make_low_rank(20_000, 50, rank=5, noise=0.5, chunk_rows=5_000, seed=3).compute()
missing = rng.random(X_true.shape) < 0.20
X_obs = np.where(missing, np.nan, X_true)
X = da.from_array(X_obs, chunks=(5_000, 50))
print(f"{missing.mean():.1%} of the entries missing; rows with a gap: "
      f"{missing.any(axis=1).mean():.0%}")

# %%
em = scalepca.PPCA(n_components=5, missing="em", tol=1e-7, random_state=0).fit(X)
print(f"EM: {em.n_iter_} iterations, {em.n_passes_} passes, converged={em.converged_}, "
      f"σ² = {em.noise_variance_:.4f} (true 0.25)")
plot.convergence(em);

# %% [markdown]
# ## The subspace against a fit to the complete data

# %%
full = scalepca.PPCA(n_components=5).fit(X_true)
angles = np.degrees(subspace_angles(em.components_.T, full.components_.T))
print("principal angles to the complete-data subspace (degrees):", np.round(angles, 3))

# %% [markdown]
# ## Imputation quality on the held-out entries
#
# Three predictions of the removed entries: the column mean; PCA fitted to the mean-filled
# matrix and its rank-5 reconstruction; and PPCA-EM's `impute`.

# %%
X_imputed = em.impute(X).compute()
col_mean = np.nanmean(X_obs, axis=0)
X_mean = np.where(missing, col_mean, X_obs)
pca_mf = scalepca.PCA(n_components=5).fit(X_mean)
X_pca = pca_mf.inverse_transform(pca_mf.transform(X_mean))


def rmse(pred):
    return float(np.sqrt(np.mean((pred[missing] - X_true[missing]) ** 2)))


table = {"column mean": rmse(X_mean), "mean fill + PCA": rmse(X_pca),
         "PPCA-EM impute": rmse(X_imputed)}
for name, value in table.items():
    print(f"{name:>16}: RMSE {value:.4f}")
print("noise standard deviation (the floor):", 0.5)

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
sample = rng.choice(int(missing.sum()), 3000, replace=False)
truth = X_true[missing][sample]
for ax, (name, pred) in zip(axes, [("mean fill + PCA", X_pca), ("PPCA-EM", X_imputed)]):
    ax.scatter(truth, pred[missing][sample], s=3, alpha=0.4)
    lim = [truth.min(), truth.max()]
    ax.plot(lim, lim, "k--", lw=0.8)
    ax.set_xlabel("true value of a removed entry")
    ax.set_ylabel("prediction")
    ax.set_title(f"{name}: RMSE {rmse(pred):.3f}")

# %% [markdown]
# ## More gaps
#
# The same comparison as the share of missing entries grows. Mean-filling shrinks the
# structure towards the mean as gaps grow; EM keeps using the observed entries of every row.

# %% gallery="ppca_missing" thumbnail=true
fractions = [0.1, 0.3, 0.5]
errors = {"mean fill + PCA": [], "PPCA-EM": []}
for f in fractions:
    m = rng.random(X_true.shape) < f
    Xo = np.where(m, np.nan, X_true)
    fitted = scalepca.PPCA(5, missing="em", tol=1e-6, random_state=0).fit(
        da.from_array(Xo, chunks=(5_000, 50)))
    imp = fitted.impute(da.from_array(Xo, chunks=(5_000, 50))).compute()
    filled = np.where(m, np.nanmean(Xo, axis=0), Xo)
    p = scalepca.PCA(5).fit(filled)
    rec = p.inverse_transform(p.transform(filled))
    errors["PPCA-EM"].append(np.sqrt(np.mean((imp[m] - X_true[m]) ** 2)))
    errors["mean fill + PCA"].append(np.sqrt(np.mean((rec[m] - X_true[m]) ** 2)))
fig, ax = plt.subplots(figsize=(5, 3.4), layout="constrained")
for name, e in errors.items():
    ax.plot(np.array(fractions) * 100, e, "o-", label=name)
ax.axhline(0.5, color="0.5", ls=":", label="noise level")
ax.set_xlabel("missing entries (%)")
ax.set_ylabel("RMSE on the missing entries")
ax.legend(frameon=False);
