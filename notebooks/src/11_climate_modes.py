# %% [markdown]
# # 11 · Climate modes: a travelling wave with Hilbert EOF, SST and heights with MCA
#
# Two methods climate users reach for after EOFs, both in `scalepca.analysis` and both out of
# core:
#
# 1. **Hilbert (complex) EOF** (`HilbertEOF`) for patterns that *travel*. An ordinary EOF is a
#    standing pattern; a wave needs two of them in quadrature. The EOFs of each grid cell's
#    analytic signal catch the wave in one complex mode, whose phase says where it goes and
#    how fast.
# 2. **Maximum covariance analysis** (`MCA`) of two fields over the same times: the pairs of
#    patterns, one in each field, whose time series covary most.
#
# The data: an ENSO-like wave made here with NumPy (seeded), then the winter sea-surface
# temperature and 500 hPa height files that ship with the eofs package (nothing is
# downloaded). The user guide's pages on Hilbert EOF and MCA have the mathematics, the
# passes and the memory.

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from eofs.examples import example_data_path

import scalepca
from scalepca.analysis.hilbert_eof import HilbertEOF
from scalepca.analysis.mca import MCA

plt.rcParams["figure.dpi"] = 80

# %% [markdown]
# ## An ENSO-like propagating pattern
#
# Forty years of monthly anomalies on a 2.5° × 5° equatorial Pacific grid (20°S–20°N,
# 120°E–80°W). A warm anomaly travels east along the equator, crossing the basin once every
# four years; it is strongest in the east Pacific and fades away from the equator. A weaker
# standing pattern with a one-year period (the seasonal remnant a real record keeps) and
# noise are added. The field is chunked along time as a long record on disk would be.

# %%
rng = np.random.default_rng(11)
months = np.arange(480)
lat = np.arange(-20, 20.1, 2.5)
lon = np.arange(120, 280.1, 5.0)
time = np.datetime64("1980-01", "M") + months
travel = 2 * np.pi * (months[:, None, None] / 48 - (lon - 120)[None, None, :] / 160)
envelope = (np.exp(-(lat / 8) ** 2)[:, None]
            * (0.6 + 0.4 * np.sin(np.pi * (lon - 120) / 160))[None, :])
seasonal = (np.cos(np.deg2rad(3 * lat))[:, None] * np.cos(np.deg2rad(lon - 200))[None, :])
values = (1.5 * envelope * np.cos(travel)
          + 0.4 * np.cos(2 * np.pi * months / 12)[:, None, None] * seasonal
          + 0.5 * rng.normal(size=(months.size, lat.size, lon.size)))
wave = xr.DataArray(values, dims=("time", "lat", "lon"), name="sst",
                    coords={"time": time, "lat": lat, "lon": lon},
                    attrs={"long_name": "SST anomaly (synthetic)", "units": "K"})
wave = wave.chunk({"time": 120})
print(wave)

# %% thumbnail=true
fig, ax = plt.subplots(figsize=(6, 4))
wave.sel(lat=0).isel(time=slice(0, 120)).plot(ax=ax, x="lon", y="time", cmap="RdBu_r",
                                              cbar_kwargs={"label": "anomaly (K)"})
ax.set_xlabel("longitude (°E)")
ax.set_ylabel("time")
ax.set_title("the field along the equator, first ten years");

# %% [markdown]
# ## Ordinary EOFs split the wave into a pair
#
# `scalepca.PCA` on the field weighted by √cos(latitude): the first two EOFs hold about the
# same variance, their maps are the same wave a quarter wavelength apart, and their PCs are
# the same oscillation a quarter period apart (the lagged correlation peaks at a lag of a
# year, a quarter of 48 months). Neither mode alone is the signal.

# %%
X = scalepca.open_matrix(wave, sample_dims="time", weights="sqrt_coslat")
pca = scalepca.PCA(n_components=4).fit(X)
print("EOF: variance explained (%)", np.round(100 * pca.explained_variance_ratio_, 1))
pcs = pca.transform(X)
p1, p2 = pcs.sel(mode=1).values, pcs.sel(mode=2).values
lags = np.arange(-24, 25)
lagged = [np.corrcoef(p1[max(0, -k):p1.size - max(0, k)], p2[max(0, k):p2.size
                                                              - max(0, -k)])[0, 1]
          for k in lags]
best = lags[np.argmax(np.abs(lagged))]
print(f"PC1 and PC2: correlation at lag 0 {lagged[24]:.2f}, largest |correlation| "
      f"{np.max(np.abs(lagged)):.2f} at a lag of {best} months")

# %%
fig, ax = plt.subplots(1, 3, figsize=(13, 3.2), gridspec_kw={"width_ratios": [1, 1, 1.1]})
for j in (0, 1):
    pca.components_xr_.sel(mode=j + 1).plot(ax=ax[j], cmap="RdBu_r",
                                            cbar_kwargs={"label": "loading"})
    ax[j].set_title(f"EOF {j + 1} "
                    f"({100 * pca.explained_variance_ratio_[j]:.0f} % of the variance)")
    ax[j].set_xlabel("longitude (°E)")
    ax[j].set_ylabel("latitude (°N)")
ax[2].plot(time[:120], p1[:120], label="PC 1")
ax[2].plot(time[:120], p2[:120], label="PC 2")
ax[2].set_xlabel("time")
ax[2].set_ylabel("PC (K)")
ax[2].set_title("the two PCs, first ten years")
ax[2].legend(loc="upper left", ncol=2)
ax[2].tick_params(axis="x", labelrotation=30)
fig.tight_layout()

# %% [markdown]
# ## One Hilbert EOF holds the whole wave
#
# `HilbertEOF` makes each grid cell's analytic signal (its series plus *i* times its Hilbert
# transform, each series padded at both ends with an exponential decay so that the FFT does
# not wrap the end onto the start) and decomposes their Hermitian covariance. The fit
# regroups the field into column strips (every month of a few cells in one task): two passes.
# Each complex mode has an amplitude and a phase, in space and in time.

# %%
heof = HilbertEOF(n_components=4, padding="exp", decay_factor=0.2).fit(X)
print("Hilbert EOF: variance explained (%)",
      np.round(100 * heof.explained_variance_ratio_, 1))
print(f"{heof.n_passes_} passes over the data (solver {heof.solver_!r})")

# the phase grows eastward along the equator: the wave's direction and wavelength
eq = heof.components_phase().sel(mode=1, lat=0)
step = np.angle(np.exp(1j * eq.diff("lon"))).mean()
print(f"phase step per 5° of longitude: {np.degrees(step):.1f}° "
      f"(one wavelength over 160°: {360 * 5 / 160:.1f}°)")
# the PC's phase turns at a steady rate: the period
turn = np.unwrap(heof.scores_phase().sel(mode=1).values)
period = 2 * np.pi / abs(np.polyfit(months, turn, 1)[0])
print(f"period from the PC's phase: {period:.1f} months (made with 48)")

# %% gallery="nb11_climate_modes"
fig, ax = plt.subplots(2, 2, figsize=(12, 6.4))
heof.components_amplitude().sel(mode=1).plot(ax=ax[0, 0], cmap="viridis",
                                             cbar_kwargs={"label": "amplitude"})
ax[0, 0].set_title("Hilbert EOF 1: amplitude (where)")
heof.components_phase().sel(mode=1).plot(ax=ax[0, 1], cmap="twilight", vmin=-np.pi,
                                         vmax=np.pi, cbar_kwargs={"label": "phase (rad)"})
ax[0, 1].set_title("Hilbert EOF 1: phase (grows eastward: the wave travels east)")
for a in ax[0]:
    a.set_xlabel("longitude (°E)")
    a.set_ylabel("latitude (°N)")
ax[1, 0].plot(time, heof.scores_amplitude().sel(mode=1), color="C0")
ax[1, 0].set_xlabel("time")
ax[1, 0].set_ylabel("amplitude (normalised)")
ax[1, 0].set_title("PC 1: amplitude (when)")
ax[1, 1].plot(time[:120], heof.scores_phase().sel(mode=1)[:120], ".", color="C1")
ax[1, 1].set_xlabel("time")
ax[1, 1].set_ylabel("phase (rad)")
ax[1, 1].set_title("PC 1: phase, first ten years (one turn in 48 months)")
fig.tight_layout()

# %% [markdown]
# ## Variance explained by the two methods
#
# The pair of ordinary EOFs and the one complex mode hold the same wave: the complex mode's
# fraction is about that of the pair together. (Each fraction is of its own method's total;
# the analytic signal's variance is about twice the field's.) The standing one-year pattern
# is one mode in both: EOF 3 and Hilbert EOF 2.

# %%
fig, ax = plt.subplots(figsize=(6, 3.2))
k = np.arange(1, 5)
ax.bar(k - 0.2, 100 * pca.explained_variance_ratio_, width=0.4, label="EOF (PCA)")
ax.bar(k + 0.2, 100 * heof.explained_variance_ratio_, width=0.4, label="Hilbert EOF")
ax.set_xticks(k)
ax.set_xlabel("mode")
ax.set_ylabel("variance explained (%)")
ax.set_title("synthetic wave: one complex mode, two real ones")
ax.legend();

# %% [markdown]
# Mode 1 rebuilt (`inverse_transform` of its complex PC: the real part of PC × EOFᴴ) along
# the equator, next to the field: the noise is gone, the eastward march is kept.

# %%
pc1 = heof.scores_.copy()
pc1[:, 1:] = 0
rebuilt = xr.DataArray(heof.inverse_transform(pc1).reshape(wave.shape), dims=wave.dims,
                       coords=wave.coords)
fig, ax = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for a, field, title in ((ax[0], wave, "field"), (ax[1], rebuilt, "Hilbert mode 1")):
    field.sel(lat=0).isel(time=slice(0, 120)).plot(ax=a, x="lon", y="time", cmap="RdBu_r",
                                                   vmin=-2.5, vmax=2.5,
                                                   cbar_kwargs={"label": "anomaly (K)"})
    a.set_xlabel("longitude (°E)")
    a.set_title(f"{title} at the equator")
ax[0].set_ylabel("time")
ax[1].set_ylabel("")
fig.tight_layout()

# %% [markdown]
# ## The same on a real record: eofs' winter SST
#
# `sst_ndjfm_anom.nc` of the eofs package: 50 winter (November–March) means of Pacific
# sea-surface temperature anomalies, 1962/63–2011/12, on a 5° grid, NaN over land (left out
# of the fit, NaN again in the maps). One value per winter is too coarse to follow El Niño
# across the basin within a season: the complex mode's amplitude is ENSO's tongue along the
# equator, but its PC's phase jumps from winter to winter (no steady turn, as the wave's had)
# and the map's phase mostly tells the tongue from the horseshoe around it. The test suite
# checks this fit against xeofs' `HilbertEOF` on the same file to 1e-8.

# %%
with xr.open_dataset(example_data_path("sst_ndjfm_anom.nc"), engine="scipy") as ds:
    sst = ds["sst"].load()  # netCDF-3: scipy's engine reads it
sst = sst.assign_coords(latitude=sst["latitude"].astype(np.float64))
S = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
sst_eof = scalepca.PCA(n_components=4).fit(S)
sst_heof = HilbertEOF(n_components=4).fit(S)
print("EOF:         variance explained (%)", np.round(100 * sst_eof.explained_variance_ratio_, 1))
print("Hilbert EOF: variance explained (%)",
      np.round(100 * sst_heof.explained_variance_ratio_, 1))

# %%
years = sst["time"].dt.year.values
fig, ax = plt.subplots(1, 3, figsize=(15, 3.4), gridspec_kw={"width_ratios": [1, 1, 0.9]})
sst_heof.components_amplitude().sel(mode=1).plot(ax=ax[0], cmap="viridis",
                                                 cbar_kwargs={"label": "amplitude"})
ax[0].set_title("winter SST, Hilbert EOF 1: amplitude")
sst_heof.components_phase().sel(mode=1).plot(ax=ax[1], cmap="twilight", vmin=-np.pi,
                                             vmax=np.pi, cbar_kwargs={"label": "phase (rad)"})
ax[1].set_title("winter SST, Hilbert EOF 1: phase")
for a in ax[:2]:
    a.set_xlabel("longitude (°E)")
    a.set_ylabel("latitude (°N)")
amp = sst_heof.scores_amplitude().sel(mode=1)
ax[2].plot(years, amp, color="C0", label="amplitude")
ax[2].set_xlabel("winter (year of its January)")
ax[2].set_ylabel("amplitude (normalised)")
ax2 = ax[2].twinx()
ax2.plot(years, sst_heof.scores_phase().sel(mode=1), ".", color="C1", label="phase")
ax2.set_ylabel("phase (rad)")
ax[2].set_title("winter SST, PC 1")
ax[2].legend(handles=ax[2].lines + ax2.lines, loc="upper left", fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## Maximum covariance analysis: Pacific SST and North Atlantic heights
#
# `hgt_djf.nc` of the eofs package holds 65 winter (December–February) means of the 500 hPa
# geopotential height over the North Atlantic and Europe. Its winters from 1963 are those of
# the SST file (a winter is labelled by its January); its time is in hours since year 1,
# which needs `decode_times=False`. Both fields are weighted by √cos(latitude) and MCA
# decomposes their 437 × 1421 cross-covariance, formed in one pass.

# %%
with xr.open_dataset(example_data_path("hgt_djf.nc"), engine="scipy",
                     decode_times=False) as ds:
    hgt = ds["z"].isel(pressure=0, drop=True).load()
hours = hgt["time"].values.astype("int64").astype("timedelta64[h]")
hgt_years = (np.datetime64("0001-01-01T00", "h") + hours).astype("datetime64[Y]")
common = hgt_years >= np.datetime64("1963", "Y")
assert (hgt_years[common] == sst["time"].values.astype("datetime64[Y]")).all()
hgt = hgt.isel(time=common).assign_coords(time=sst["time"].values,
                                          latitude=hgt["latitude"].astype(np.float64))
hgt.attrs.update(units="m")
H = scalepca.open_matrix(hgt, sample_dims="time", weights="sqrt_coslat")
mca = MCA(n_components=6).fit(S, H)
print(f"{mca.n_passes_} pass, solver {mca.solver_!r}")
print("squared covariance fraction (%)", np.round(100 * mca.squared_covariance_fraction_, 1))

# %%
fig, ax = plt.subplots(figsize=(6, 3.2))
k = np.arange(1, 7)
ax.bar(k, 100 * mca.squared_covariance_fraction_)
ax.set_xticks(k)
ax.set_xlabel("mode")
ax.set_ylabel("squared covariance fraction (%)")
ax.set_title("winter SST × 500 hPa height, 50 winters");

# %% [markdown]
# ## The first pair of patterns
#
# `patterns(X, Y)` correlates each field with the expansion coefficients of the mode, in one
# more pass: *homogeneous* maps with its own coefficients, *heterogeneous* with the other
# field's. The SST pattern is ENSO's (warm equatorial central and east Pacific, a cool
# horseshoe around it); the height pattern is a north–south seesaw over the Atlantic, the
# shape of the North Atlantic Oscillation. The heterogeneous maps are much weaker than the
# homogeneous ones: what the two fields share over 50 winters is modest.

# %%
(hom_x, hom_y), (het_x, het_y) = mca.patterns(S, H)
fig, ax = plt.subplots(2, 2, figsize=(12, 6.4))
maps = ((hom_x, "SST, homogeneous: corr(SST, SST coefficients)"),
        (het_y, "height, heterogeneous: corr(height, SST coefficients)"),
        (het_x, "SST, heterogeneous: corr(SST, height coefficients)"),
        (hom_y, "height, homogeneous: corr(height, height coefficients)"))
for a, (m, title) in zip(ax.ravel(), maps, strict=True):
    m.sel(mode=1).plot(ax=a, cmap="RdBu_r", vmin=-1, vmax=1,
                       cbar_kwargs={"label": "correlation"})
    a.set_title(f"mode 1 — {title}", fontsize=10)
    a.set_xlabel("longitude (°E)")
    a.set_ylabel("latitude (°N)")
fig.tight_layout()

# %% [markdown]
# ## Expansion coefficients
#
# `transform(X, Y)` gives each field's coefficients (lazy, over `time` and `mode`). The
# coefficients of mode 1 move together loosely: their correlation is the strength of the
# link the pair of patterns describes (MCA maximises their covariance, not their
# correlation).

# %%
zx, zy = mca.transform(S, H)
zx, zy = zx.sel(mode=1).values, zy.sel(mode=1).values
r = np.corrcoef(zx, zy)[0, 1]
fig, ax = plt.subplots(figsize=(8, 3.2))
ax.plot(years, zx / zx.std(), "-o", ms=3, label="SST")
ax.plot(years, zy / zy.std(), "-o", ms=3, label="500 hPa height")
ax.set_xlabel("winter (year of its January)")
ax.set_ylabel("coefficient (standardised)")
ax.set_title(f"MCA mode 1 expansion coefficients: correlation {r:.2f}")
ax.legend();
