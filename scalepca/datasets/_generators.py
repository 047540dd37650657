"""Synthetic datasets for every method, generated block by block.

Each generator returns a lazy dask array (or, for gridded data, a dask-backed xarray
Dataset) whose every block is drawn from its own seed —
``SeedSequence([seed, tag, block index])`` — so the data do not depend on the cluster,
the number of workers or the order in which blocks are computed. Nothing is ever held
whole in memory: :func:`~scalepca.datasets.write_dataset` lets the workers generate and
write one block each.

========================  =====================================================================
kind                      structure (and the method it exercises)
========================  =====================================================================
``low_rank``              ``Z diag(s) V + mean + noise·E``: PCA, PPCA
``missing``               ``low_rank`` with a fraction of entries set to NaN: PPCA with EM
``gridded``               (time, lat, lon) field of a few smooth spatial modes + noise, NaN on
                          a land mask, with coordinates: EOF analysis of xarray data
``coupled_fields``        two gridded fields on their own grids, over the same times,
                          some modes sharing their time series: MCA, multivariate EOF
``rings``                 noisy concentric rings (radii 1, 2.8, 5) in the first two features:
                          kernel PCA
``sparse_spike``          spiked covariance whose leading eigenvectors have small disjoint
                          supports: sparse PCA
``low_rank_sparse``       ``L + S``: rank-r ``L`` (Candès et al. 2011 scaling) plus a fraction
                          of ±magnitude corruptions ``S``, in 2-D blocks: robust PCA
``counts``                single-cell-like counts, cells × genes: negative binomial (or
                          Poisson) around low-rank log-means, a stated density; written as an
                          AnnData zarr store with CSR ``X`` (or a layer): sparse input
``genotypes``             Balding–Nichols allele counts of K populations with missing calls,
                          written as a PLINK ``.bed`` (:mod:`scalepca.datasets.genotypes`): PCA
                          with ``standardize="genotype"``
========================  =====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import dask.array as da
import numpy as np

from .genotypes import make_genotypes

# seed tags: one per kind of random draw, so draws never share a stream
_TAG_FACTORS, _TAG_BLOCK, _TAG_MISSING = 1, 2, 3
_TAG_RINGS, _TAG_SPIKE_V, _TAG_SPIKE, _TAG_LR_U, _TAG_LR_V, _TAG_SPARSE = (
    4,
    5,
    6,
    7,
    8,
    9,
)
_TAG_GRID, _TAG_GRID_BLOCK = 10, 11
_TAG_GENES, _TAG_CALIBRATION, _TAG_CELLS = 12, 13, 14
_TAG_COUPLED, _TAG_COUPLED_NOISE = 15, 16


def _rng(seed: int, *path: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, path)]))


def _row_chunks(n_samples: int, n_cols: int, chunk_rows: int):
    if n_samples < 1 or n_cols < 1:
        raise ValueError(f"sizes must be positive; got {n_samples} × {n_cols}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive; got {chunk_rows}")
    return da.core.normalize_chunks((chunk_rows, n_cols), (n_samples, n_cols))


def _lazy(fn, chunks, dtype) -> da.Array:
    dtype = np.dtype(dtype)
    return da.map_blocks(
        fn, chunks=chunks, dtype=dtype, meta=np.empty((0,) * len(chunks), dtype=dtype)
    )


# -- low rank + noise (PCA, PPCA) ------------------------------------------------------
def low_rank_factors(n_features: int, rank: int, *, seed: int = 0, decay: float = 0.7):
    """Orthonormal loadings (rank × d) and decaying standard deviations of the latent
    factors."""
    rng = _rng(seed, _TAG_FACTORS)
    Q, _ = np.linalg.qr(rng.standard_normal((n_features, rank)))
    scales = 10.0 * decay ** np.arange(rank)
    mean = rng.normal(0.0, 1.0, n_features)
    return Q.T, scales, mean


def _block(block_id, rows, n_features, loadings, scales, mean, noise, dtype, seed):
    i = block_id[0]
    rng = _rng(seed, _TAG_BLOCK, i)
    m = rows[i]
    z = rng.standard_normal((m, loadings.shape[0])) * scales
    x = z @ loadings + mean + noise * rng.standard_normal((m, n_features))
    return x.astype(dtype, copy=False)


def make_low_rank(
    n_samples: int,
    n_features: int,
    *,
    rank: int = 10,
    noise: float = 1.0,
    chunk_rows: int = 50_000,
    dtype: str = "float64",
    seed: int = 0,
) -> da.Array:
    """Lazy low-rank-plus-noise matrix ``X = Z diag(scales) V + mean + noise · E``.

    ``V`` (rank × d) is orthonormal, the factor standard deviations decay as
    ``10 · 0.7^j`` and ``E`` is standard normal; see :func:`low_rank_factors` for the
    true ``V``. Each row block is generated from its own seed
    (``[seed, 2, block index]``), so the data do not depend on the cluster that
    computes them.

    Parameters
    ----------
    n_samples : int
        Number of rows (samples).
    n_features : int
        Number of columns (features).
    rank : int, default=10
        Number of latent factors, at most ``n_features``.
    noise : float, default=1.0
        Standard deviation of the Gaussian noise added to every entry.
    chunk_rows : int, default=50000
        Rows per block of the lazy array (the store's row chunk when written).
    dtype : str, default="float64"
        Data type of the values.
    seed : int, default=0
        Seed of every random draw: the same seed gives the same data whatever the
        blocks, the workers or their order.

    Examples
    --------
    >>> import scalepca
    >>> from scalepca.datasets import make_low_rank
    >>> X = make_low_rank(1000, 50, rank=5, chunk_rows=250)   # lazy, block by block
    >>> X.shape, X.chunks[0]
    ((1000, 50), (250, 250, 250, 250))
    >>> scalepca.PCA(5).fit(X).n_passes_
    1
    """
    if not 1 <= rank <= n_features:
        raise ValueError(f"rank must be in [1, n_features={n_features}]; got {rank}")
    loadings, scales, mean = low_rank_factors(n_features, rank, seed=seed)
    chunks = _row_chunks(n_samples, n_features, chunk_rows)
    rows = chunks[0]
    return _lazy(
        lambda block_id=None: _block(
            block_id,
            rows,
            n_features,
            loadings,
            scales,
            mean,
            noise,
            np.dtype(dtype),
            seed,
        ),
        chunks,
        dtype,
    )


# -- missing entries (PPCA EM) ---------------------------------------------------------
def _punch_holes(x, block_id=None, *, fraction, seed):
    rng = _rng(seed, _TAG_MISSING, block_id[0])
    x = x.copy()
    x[rng.random(x.shape) < fraction] = np.nan
    return x


def make_missing(
    n_samples: int,
    n_features: int,
    *,
    rank: int = 10,
    noise: float = 1.0,
    missing: float = 0.2,
    chunk_rows: int = 50_000,
    dtype: str = "float64",
    seed: int = 0,
) -> da.Array:
    """:func:`make_low_rank` with each entry missing (NaN) independently with
    probability ``missing`` (missing completely at random). The complete data are
    ``make_low_rank`` with the same arguments, so a test can compare imputed values
    with the truth.

    Parameters
    ----------
    n_samples : int
        Number of rows (samples).
    n_features : int
        Number of columns (features).
    rank : int, default=10
        Number of latent factors, as in :func:`make_low_rank`.
    noise : float, default=1.0
        Standard deviation of the Gaussian noise added to every entry.
    missing : float, default=0.2
        Probability that an entry is missing (NaN), in [0, 1).
    chunk_rows : int, default=50000
        Rows per block of the lazy array (the store's row chunk when written).
    dtype : str, default="float64"
        Data type of the values.
    seed : int, default=0
        Seed of every random draw: the same seed gives the same data whatever the
        blocks, the workers or their order.

    Examples
    --------
    >>> import numpy as np
    >>> from scalepca.datasets import make_missing
    >>> X = make_missing(1000, 50, missing=0.2)
    >>> round(float(np.isnan(X).mean().compute()), 2)       # the fraction missing
    0.2
    """
    if not 0.0 <= missing < 1.0:
        raise ValueError(f"missing must be in [0, 1); got {missing}")
    X = make_low_rank(
        n_samples,
        n_features,
        rank=rank,
        noise=noise,
        chunk_rows=chunk_rows,
        dtype=dtype,
        seed=seed,
    )
    return X.map_blocks(_punch_holes, fraction=missing, seed=seed, dtype=X.dtype)


# -- gridded field with a land mask (EOF analysis) -------------------------------------
def _grid(n_lat: int, n_lon: int):
    lat = np.linspace(-90 + 90 / n_lat, 90 - 90 / n_lat, n_lat)
    lon = np.arange(n_lon) * (360.0 / n_lon)
    return lat, lon


def gridded_modes(
    n_lat: int, n_lon: int, rank: int, *, land_fraction: float = 0.3, seed: int = 0
):
    """Smooth spatial modes (rank × lat × lon), their amplitudes, and the land mask
    (bool)."""
    rng = _rng(seed, _TAG_GRID)
    lat, lon = _grid(n_lat, n_lon)
    la, lo = np.deg2rad(lat)[:, None], np.deg2rad(lon)[None, :]
    modes = np.empty((rank, n_lat, n_lon))
    for j in range(rank):
        phase = rng.uniform(0, 2 * np.pi)
        modes[j] = np.cos((j // 2 + 1) * la) * np.cos(
            (j + 1) * lo + phase
        ) + 0.3 * np.sin((j + 1) * la)
    # land: where a smooth random field exceeds its quantile
    field = sum(
        rng.normal()
        * np.cos(a * la + rng.uniform(0, 2 * np.pi))
        * np.cos(b * lo + rng.uniform(0, 2 * np.pi))
        for a, b in [(1, 1), (2, 3), (3, 2), (1, 4)]
    )
    land = (
        field > np.quantile(field, 1.0 - land_fraction)
        if land_fraction > 0
        else (np.zeros((n_lat, n_lon), dtype=bool))
    )
    amplitudes = 5.0 * 0.7 ** np.arange(rank)
    return modes, amplitudes, land


def _gridded_block(block_id=None, *, rows, modes, amplitudes, land, noise, dtype, seed):
    i = block_id[0]
    rng = _rng(seed, _TAG_GRID_BLOCK, i)
    m = rows[i]
    pcs = rng.standard_normal((m, len(amplitudes))) * amplitudes
    x = (
        np.tensordot(pcs, modes, axes=1)
        + 15.0
        + noise * rng.standard_normal((m, *modes.shape[1:]))
    )
    x[:, land] = np.nan
    return x.astype(dtype, copy=False)


def make_gridded(
    n_samples: int,
    *,
    n_lat: int = 36,
    n_lon: int = 72,
    rank: int = 5,
    noise: float = 0.5,
    land_fraction: float = 0.3,
    chunk_rows: int = 1000,
    dtype: str = "float32",
    variable: str = "sst",
    seed: int = 0,
):
    """Lazy gridded field ``(time, lat, lon)`` as an xarray Dataset with one variable.

    ``rank`` smooth spatial modes with amplitudes ``5 · 0.7^j`` and standard-normal
    time series, a mean of 15, plus ``noise``; cells on a fixed land mask
    (``land_fraction`` of the grid) are NaN at every time — the shape of a
    sea-surface-temperature record. Coordinates: daily ``time`` from 2000-01-01,
    ``lat`` (cell centres, degrees north), ``lon`` (degrees east). Open with
    ``open_matrix(path, sample_dims="time")``; the features are the grid cells.

    Parameters
    ----------
    n_samples : int
        Number of time steps (daily, from 2000-01-01).
    n_lat : int, default=36
        Number of latitudes of the grid (cell centres from pole to pole).
    n_lon : int, default=72
        Number of longitudes of the grid (from 0° east).
    rank : int, default=5
        Number of smooth spatial modes with a time series each.
    noise : float, default=0.5
        Standard deviation of the Gaussian noise added to every sea cell.
    land_fraction : float, default=0.3
        Share of the grid under the land mask (NaN at every time), in [0, 1).
    chunk_rows : int, default=1000
        Time steps per block of the lazy array.
    dtype : str, default="float32"
        Data type of the values.
    variable : str, default="sst"
        Name of the Dataset's variable.
    seed : int, default=0
        Seed of every random draw: the same seed gives the same data whatever the
        blocks, the workers or their order.

    Examples
    --------
    >>> from scalepca.datasets import make_gridded
    >>> ds = make_gridded(120, n_lat=18, n_lon=36)
    >>> ds["sst"].dims, ds["sst"].shape
    (('time', 'lat', 'lon'), (120, 18, 36))
    """
    import pandas as pd
    import xarray as xr

    if not 0.0 <= land_fraction < 1.0:
        raise ValueError(f"land_fraction must be in [0, 1); got {land_fraction}")
    modes, amplitudes, land = gridded_modes(
        n_lat, n_lon, rank, land_fraction=land_fraction, seed=seed
    )
    chunks = da.core.normalize_chunks(
        (chunk_rows, n_lat, n_lon), (n_samples, n_lat, n_lon)
    )
    data = _lazy(
        lambda block_id=None: _gridded_block(
            block_id,
            rows=chunks[0],
            modes=modes,
            amplitudes=amplitudes,
            land=land,
            noise=noise,
            dtype=np.dtype(dtype),
            seed=seed,
        ),
        chunks,
        dtype,
    )
    lat, lon = _grid(n_lat, n_lon)
    time = pd.date_range("2000-01-01", periods=n_samples, freq="D")
    arr = xr.DataArray(
        data,
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": lat, "lon": lon},
        attrs={"long_name": "synthetic field with a land mask"},
    )
    arr["lat"].attrs["units"] = "degrees_north"
    arr["lon"].attrs["units"] = "degrees_east"
    return arr.to_dataset(name=variable)


# -- two coupled fields (MCA, multivariate EOF) ---------------------------------------
def _coupled_block(
    block_id=None,
    *,
    rows,
    modes,
    amplitudes,
    coupled,
    land,
    mean,
    noise,
    field,
    dtype,
    seed,
):
    i = block_id[0]
    m = rows[i]
    rank = modes.shape[0]
    # both fields draw the same time series; the first `coupled` drive both
    pcs = _rng(seed, _TAG_COUPLED, i).standard_normal((m, 2, rank))
    own = pcs[:, field]
    own[:, :coupled] = pcs[:, 0, :coupled]
    x = np.tensordot(own * amplitudes, modes, axes=1) + mean
    x += noise * _rng(seed, _TAG_COUPLED_NOISE, field, i).standard_normal(x.shape)
    x[:, land] = np.nan
    return x.astype(dtype, copy=False)


def make_coupled_fields(
    n_samples: int,
    *,
    n_lat: int = 24,
    n_lon: int = 48,
    n_lat_y: int = 18,
    n_lon_y: int = 36,
    rank: int = 4,
    coupled: int = 2,
    noise: float = 0.5,
    land_fraction: float = 0.3,
    chunk_rows: int = 1000,
    dtype: str = "float32",
    variables: tuple = ("sst", "z"),
    seed: int = 0,
):
    """Two lazy gridded fields over the same times, each on its own grid.

    The first, ``(time, lat, lon)``, is a :func:`make_gridded`-like field with a land
    mask (mean 15, amplitudes ``5 · 0.7^j``); the second, ``(time, lat_y, lon_y)``, has
    no mask, a mean of 5,500 and amplitudes 100 times larger (other units, as a 500 hPa
    height beside a sea-surface temperature). Each has ``rank`` smooth modes; the
    first ``coupled`` modes of both share their time series, the others are
    independent: the coupled patterns of maximum covariance analysis and the leading
    modes of a multivariate EOF analysis. An xarray Dataset with the two variables
    named by ``variables``; open with ``open_matrix(path, variable=[...],
    sample_dims="time")``.

    Parameters
    ----------
    n_samples : int
        Number of time steps, shared by both fields.
    n_lat : int, default=24
        Number of latitudes of the first field's grid.
    n_lon : int, default=48
        Number of longitudes of the first field's grid.
    n_lat_y : int, default=18
        Number of latitudes of the second field's grid.
    n_lon_y : int, default=36
        Number of longitudes of the second field's grid.
    rank : int, default=4
        Number of smooth modes of each field.
    coupled : int, default=2
        How many of the leading modes the two fields share their time series in,
        from 0 to ``rank``.
    noise : float, default=0.5
        Standard deviation of the noise of the first field (100 times that for
        the second).
    land_fraction : float, default=0.3
        Share of the first field's grid under its land mask, in [0, 1).
    chunk_rows : int, default=1000
        Time steps per block of the lazy arrays.
    dtype : str, default="float32"
        Data type of the values.
    variables : tuple of str, default=("sst", "z")
        The two variables' names, the first field's first.
    seed : int, default=0
        Seed of every random draw: the same seed gives the same data whatever the
        blocks, the workers or their order.

    Examples
    --------
    >>> import scalepca
    >>> from scalepca.datasets import make_coupled_fields
    >>> ds = make_coupled_fields(100)
    >>> ds["sst"].shape, ds["z"].shape                  # two grids, the same times
    ((100, 24, 48), (100, 18, 36))
    >>> X = scalepca.open_matrix(ds["sst"], sample_dims="time")
    >>> Y = scalepca.open_matrix(ds["z"], sample_dims="time")
    >>> scalepca.MCA(2).fit(X, Y).components_x_.shape
    (2, 1152)
    """
    import pandas as pd
    import xarray as xr

    if not 0 <= coupled <= rank:
        raise ValueError(f"coupled must be in [0, rank={rank}]; got {coupled}")
    if len(variables) != 2 or len(set(variables)) != 2:
        raise ValueError(f"variables must be two different names; got {variables!r}")
    time = pd.date_range("2000-01-01", periods=n_samples, freq="D")
    grids = [
        (n_lat, n_lon, land_fraction, 15.0, 1.0, ("lat", "lon")),
        (n_lat_y, n_lon_y, 0.0, 5500.0, 100.0, ("lat_y", "lon_y")),
    ]
    fields = {}
    for field, (ny, nx, land_frac, mean, unit, dims) in enumerate(grids):
        modes, amplitudes, land = gridded_modes(
            ny, nx, rank, land_fraction=land_frac, seed=seed + field
        )
        chunks = da.core.normalize_chunks((chunk_rows, ny, nx), (n_samples, ny, nx))
        block = partial(
            _coupled_block,
            rows=chunks[0],
            modes=modes,
            amplitudes=unit * amplitudes,
            coupled=coupled,
            land=land,
            mean=mean,
            noise=unit * noise,
            field=field,
            dtype=np.dtype(dtype),
            seed=seed,
        )
        lat, lon = _grid(ny, nx)
        arr = xr.DataArray(
            _lazy(block, chunks, dtype),
            dims=("time", *dims),
            coords={"time": time, dims[0]: lat, dims[1]: lon},
        )
        arr[dims[0]].attrs["units"] = "degrees_north"
        arr[dims[1]].attrs["units"] = "degrees_east"
        fields[variables[field]] = arr
    return xr.Dataset(fields, attrs={"title": "two synthetic coupled fields"})


# -- concentric rings (kernel PCA) -----------------------------------------------------
def _rings_block(block_id=None, *, rows, n_features, radii, noise, dtype, seed, labels):
    i = block_id[0]
    rng = _rng(seed, _TAG_RINGS, i)
    m = rows[i]
    ring = rng.integers(0, len(radii), m)
    if labels:
        return ring
    angle = rng.uniform(0, 2 * np.pi, m)
    x = noise * rng.standard_normal((m, n_features))
    x[:, 0] += np.asarray(radii)[ring] * np.cos(angle)
    x[:, 1] += np.asarray(radii)[ring] * np.sin(angle)
    return x.astype(dtype, copy=False)


def make_rings(
    n_samples: int,
    n_features: int = 2,
    *,
    radii: list = (1.0, 2.8, 5.0),
    noise: float = 0.25,
    chunk_rows: int = 50_000,
    dtype: str = "float64",
    seed: int = 0,
    return_labels: bool = False,
):
    """Points on noisy concentric circles in the first two features (the others pure
    noise).

    Each point picks a ring uniformly, an angle uniformly, and gets isotropic
    Gaussian noise of standard deviation ``noise`` in every feature. Linear PCA
    cannot separate the rings; an RBF kernel PCA (γ ≈ 0.1 for the default radii)
    does, along its first component. With ``return_labels`` also the lazy ring index
    of every row (int64, same row chunks) is returned.

    Parameters
    ----------
    n_samples : int
        Number of rows (samples).
    n_features : int, default=2
        Number of columns, at least 2: the rings lie in the first two, the others
        are noise only.
    radii : list of float, default=(1.0, 2.8, 5.0)
        Radius of each ring (one ring per value).
    noise : float, default=0.25
        Standard deviation of the Gaussian noise in every feature.
    chunk_rows : int, default=50000
        Rows per block of the lazy array (the store's row chunk when written).
    dtype : str, default="float64"
        Data type of the values.
    seed : int, default=0
        Seed of every random draw: the same seed gives the same data whatever the
        blocks, the workers or their order.
    return_labels : bool, default=False
        Also return the ring index of every row (from Python; a config writes the
        points only).

    Examples
    --------
    >>> from scalepca.datasets import make_rings
    >>> X, labels = make_rings(300, return_labels=True)   # three concentric rings
    >>> X.shape, sorted(set(labels.compute().tolist()))
    ((300, 2), [0, 1, 2])
    """
    if n_features < 2:
        raise ValueError(f"rings need n_features >= 2; got {n_features}")
    chunks = _row_chunks(n_samples, n_features, chunk_rows)
    kw = dict(
        rows=chunks[0],
        n_features=n_features,
        radii=tuple(radii),
        noise=noise,
        dtype=np.dtype(dtype),
        seed=seed,
    )
    X = _lazy(
        lambda block_id=None: _rings_block(block_id, labels=False, **kw), chunks, dtype
    )
    if not return_labels:
        return X
    y = _lazy(
        lambda block_id=None: _rings_block(block_id, labels=True, **kw),
        (chunks[0],),
        np.int64,
    )
    return X, y


# -- sparse spiked covariance (sparse PCA) ---------------------------------------------
def sparse_spike_loadings(
    n_features: int, n_components: int = 3, support: int = 10, *, seed: int = 0
) -> np.ndarray:
    """True loadings (n_components × d): disjoint supports of ``support`` features
    each, entries ``±1/√support`` (unit norm, orthonormal rows).

    Examples
    --------
    >>> from scalepca.datasets import sparse_spike_loadings
    >>> V = sparse_spike_loadings(100, 3, 10)
    >>> V.shape, (V != 0).sum(axis=1).tolist()           # 10 non-zero entries a row
    ((3, 100), [10, 10, 10])
    """
    if n_components * support > n_features:
        raise ValueError(
            f"n_components · support = {n_components * support} "
            f"exceeds n_features = {n_features}"
        )
    rng = _rng(seed, _TAG_SPIKE_V)
    idx = rng.permutation(n_features)[: n_components * support].reshape(
        n_components, support
    )
    V = np.zeros((n_components, n_features))
    for j in range(n_components):
        V[j, idx[j]] = rng.choice([-1.0, 1.0], support) / np.sqrt(support)
    return V


def _spike_block(block_id=None, *, rows, V, sd, noise, dtype, seed):
    i = block_id[0]
    rng = _rng(seed, _TAG_SPIKE, i)
    m = rows[i]
    x = (rng.standard_normal((m, len(sd))) * sd) @ V + noise * rng.standard_normal(
        (m, V.shape[1])
    )
    return x.astype(dtype, copy=False)


def make_sparse_spike(
    n_samples: int,
    n_features: int,
    *,
    n_components: int = 3,
    support: int = 10,
    strength: float = 20.0,
    decay: float = 0.7,
    noise: float = 1.0,
    chunk_rows: int = 50_000,
    dtype: str = "float64",
    seed: int = 0,
) -> da.Array:
    r"""Spiked covariance with sparse rows of :math:`V`,
    :math:`\Sigma = V^\top \mathrm{diag}(\lambda)\, V + \mathrm{noise}^2 I`.

    The spike variances are
    :math:`\lambda_j = \mathrm{strength} \cdot \mathrm{decay}^j` and the rows of
    :math:`V` are given by :func:`sparse_spike_loadings` (same ``seed``), so support
    recovery can be scored.

    Parameters
    ----------
    n_samples : int
        Number of rows (samples).
    n_features : int
        Number of columns (features).
    n_components : int, default=3
        Number of spikes (sparse components).
    support : int, default=10
        Number of non-zero loadings of each component (disjoint supports).
    strength : float, default=20.0
        Variance of the first spike.
    decay : float, default=0.7
        Ratio of each spike's variance to the previous one's.
    noise : float, default=1.0
        Standard deviation of the isotropic noise.
    chunk_rows : int, default=50000
        Rows per block of the lazy array (the store's row chunk when written).
    dtype : str, default="float64"
        Data type of the values.
    seed : int, default=0
        Seed of every random draw: the same seed gives the same data whatever the
        blocks, the workers or their order.

    Examples
    --------
    >>> from scalepca.datasets import make_sparse_spike
    >>> X = make_sparse_spike(500, 100, n_components=3, support=10)
    >>> X.shape
    (500, 100)
    """
    V = sparse_spike_loadings(n_features, n_components, support, seed=seed)
    sd = np.sqrt(strength * decay ** np.arange(n_components))
    chunks = _row_chunks(n_samples, n_features, chunk_rows)
    return _lazy(
        lambda block_id=None: _spike_block(
            block_id,
            rows=chunks[0],
            V=V,
            sd=sd,
            noise=noise,
            dtype=np.dtype(dtype),
            seed=seed,
        ),
        chunks,
        dtype,
    )


# -- low rank + sparse corruption (robust PCA) -----------------------------------------
def _lr_factor(seed, tag, j, m, rank, scale):
    return _rng(seed, tag, j).normal(0.0, scale, (m, rank))


def _lrs_block(
    block_id=None, *, chunks, rank, corruption, magnitude, n1, n2, dtype, seed, part
):
    i, j = block_id
    U = _lr_factor(seed, _TAG_LR_U, i, chunks[0][i], rank, 1 / np.sqrt(n1))
    V = _lr_factor(seed, _TAG_LR_V, j, chunks[1][j], rank, 1 / np.sqrt(n2))
    out = np.zeros((chunks[0][i], chunks[1][j])) if part == "S" else U @ V.T
    if part != "L":
        rng = _rng(seed, _TAG_SPARSE, i, j)
        hit = rng.random(out.shape) < corruption
        signs = rng.choice([-magnitude, magnitude], out.shape)
        out = out + np.where(hit, signs, 0.0)
    return out.astype(dtype, copy=False)


def make_low_rank_sparse(
    n_samples: int,
    n_features: int,
    *,
    rank: int = 10,
    corruption: float = 0.05,
    magnitude: float = 1.0,
    chunk_rows: int = 2000,
    chunk_cols: int | None = None,
    dtype: str = "float64",
    seed: int = 0,
    return_parts: bool = False,
):
    r""":math:`M = L + S`: the random robust-PCA problems of Candès, Li, Ma & Wright
    (2011).

    :math:`L = U V^\top` with :math:`U` (:math:`n_1 \times r`) and :math:`V`
    (:math:`n_2 \times r`) entries :math:`N(0, 1/n_1)` and :math:`N(0, 1/n_2)` (for
    square problems the paper's :math:`N(0, 1/n)`); :math:`S` has each entry
    corrupted independently with probability ``corruption`` to ``±magnitude``. Blocks
    are 2-D (``chunk_rows × chunk_cols``; by default square), each built from the
    factor blocks of its row and column and its own corruption seed. With
    ``return_parts`` the lazy ``L`` and ``S`` are returned too (``M, L, S``), for
    checking a recovery.

    Parameters
    ----------
    n_samples : int
        Number of rows (samples).
    n_features : int
        Number of columns (features).
    rank : int, default=10
        Rank of the low-rank part L.
    corruption : float, default=0.05
        Probability that an entry is corrupted (non-zero in S), in [0, 1).
    magnitude : float, default=1.0
        Size of each corruption (``+magnitude`` or ``-magnitude``, equally likely).
    chunk_rows : int, default=2000
        Rows per (2-D) block.
    chunk_cols : int or None, default=None
        Columns per block; ``None``: ``chunk_rows`` (square blocks).
    dtype : str, default="float64"
        Data type of the values.
    seed : int, default=0
        Seed of every random draw: the same seed gives the same data whatever the
        blocks, the workers or their order.
    return_parts : bool, default=False
        Also return L and S (from Python; a config writes M only).
    """
    if not 1 <= rank <= min(n_samples, n_features):
        raise ValueError(
            f"rank must be in [1, {min(n_samples, n_features)}]; got {rank}"
        )
    if not 0.0 <= corruption < 1.0:
        raise ValueError(f"corruption must be in [0, 1); got {corruption}")
    chunk_cols = chunk_cols or chunk_rows
    chunks = da.core.normalize_chunks((chunk_rows, chunk_cols), (n_samples, n_features))
    kw = dict(
        chunks=chunks,
        rank=rank,
        corruption=corruption,
        magnitude=magnitude,
        n1=n_samples,
        n2=n_features,
        dtype=np.dtype(dtype),
        seed=seed,
    )
    M = _lazy(lambda block_id=None: _lrs_block(block_id, part="M", **kw), chunks, dtype)
    if not return_parts:
        return M
    L = _lazy(lambda block_id=None: _lrs_block(block_id, part="L", **kw), chunks, dtype)
    S = _lazy(lambda block_id=None: _lrs_block(block_id, part="S", **kw), chunks, dtype)
    return M, L, S


# -- single-cell-like counts (sparse input) --------------------------------------------
#: cells and genes of the sample the density is calibrated on (drawn from the model
#: itself)
CALIBRATION_CELLS, CALIBRATION_GENES = 1024, 4096


@dataclass(frozen=True)
class CountModel:
    """The fixed part of :func:`make_counts`: per-gene levels and loadings, the global
    level.

    ``log μ[i, j] = level + gene_level[j] + log size[i] + (z[i] * scales) @ loadings[:, j]``
    with ``z[i]`` standard normal and ``log size[i]`` normal of sd ``size_sd``.
    """

    loadings: np.ndarray  # rank × genes
    scales: np.ndarray  # rank
    gene_level: np.ndarray  # genes
    level: float
    size_sd: float
    dispersion: float | None

    def log_means(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """Log-means of ``m`` new cells (m × genes), drawn from ``rng``."""
        z = rng.standard_normal((m, len(self.scales))) * self.scales
        log_size = rng.normal(0.0, self.size_sd, m)
        out = np.add(self.level + self.gene_level, log_size[:, None])  # in that order
        out += z @ self.loadings
        return out


def _zero_probability(mu: np.ndarray, dispersion: float | None) -> np.ndarray:
    """P(count = 0) under NB(mean μ, dispersion θ): (θ/(θ+μ))^θ; Poisson (θ None):
    e^-μ."""
    if dispersion is None:
        return np.exp(-mu)
    return np.exp(dispersion * (np.log(dispersion) - np.log(dispersion + mu)))


def count_model(
    n_features: int,
    *,
    rank: int = 10,
    density: float = 0.1,
    dispersion: float | None = 5.0,
    signal: float = 1.0,
    gene_sd: float = 1.0,
    size_sd: float = 0.3,
    decay: float = 0.8,
    seed: int = 0,
) -> CountModel:
    """The gene parameters of :func:`make_counts` and the global level meeting
    ``density``.

    Loadings are normal, scaled so that the cell factors move each gene's log-mean by
    ``signal`` (standard deviation), factor ``k`` weighing ``decay^k``; gene levels
    are normal of sd ``gene_sd`` (a few genes high, most low, as in real data). The
    global level is the root (Brent's method) of "expected fraction of non-zero
    counts = ``density``", the expectation taken with the closed-form zero
    probability over a calibration sample of ``CALIBRATION_CELLS`` cells drawn from
    the model (and up to ``CALIBRATION_GENES`` of the genes).
    """
    from scipy.optimize import brentq

    if not 0.0 < density < 1.0:
        raise ValueError(f"density must be in (0, 1); got {density}")
    if not 1 <= rank <= n_features:
        raise ValueError(f"rank must be in [1, n_features={n_features}]; got {rank}")
    if dispersion is not None and dispersion <= 0:
        raise ValueError(
            f"dispersion must be positive (or None for Poisson); got {dispersion}"
        )
    rng = _rng(seed, _TAG_GENES)
    scales = decay ** np.arange(rank)
    loadings = rng.standard_normal((rank, n_features)) * (
        signal / np.sqrt(np.sum(scales**2))
    )
    gene_level = rng.normal(0.0, gene_sd, n_features)
    model = CountModel(loadings, scales, gene_level, 0.0, size_sd, dispersion)
    cal = _rng(seed, _TAG_CALIBRATION)
    genes = (
        np.sort(cal.choice(n_features, CALIBRATION_GENES, replace=False))
        if n_features > CALIBRATION_GENES
        else slice(None)
    )
    base = model.log_means(cal, CALIBRATION_CELLS)[:, genes]

    def excess(level):
        return (
            1.0 - np.mean(_zero_probability(np.exp(base + level), dispersion)) - density
        )

    level = brentq(excess, -60.0, 60.0, xtol=1e-10)
    return CountModel(loadings, scales, gene_level, float(level), size_sd, dispersion)


def _tile_rows(n_features: int) -> int:
    """Cells drawn from one seed: about 4 M entries (32 MB of float64 means) a tile."""
    return int(min(1024, max(16, 2**22 // n_features)))


def _quantile_counts(mu: np.ndarray, u: np.ndarray, dispersion: float | None):
    """Counts ``F⁻¹(u)`` of NB(mean μ, dispersion θ) (Poisson for θ None), for
    ``u > P(0)``.

    The inverse CDF by the recurrence of the probabilities,
    ``p(k+1) = p(k) · (k+θ)/(k+1) · μ/(θ+μ)`` (Poisson: ``p(k) · μ/(k+1)``), entries
    leaving as soon as the CDF passes their ``u``: the work is the sum of the counts
    drawn. Where ``P(0)`` underflows (Poisson means above ~700, far above single-cell
    levels) the count is the normal approximation's.
    """
    from scipy.special import ndtri

    k = np.zeros(mu.shape, dtype=np.int64)
    pmf = _zero_probability(mu, dispersion)
    cdf = pmf.copy()
    q = mu if dispersion is None else mu / (dispersion + mu)
    huge = pmf < 1e-300
    if huge.any():
        var = mu[huge] if dispersion is None else mu[huge] + mu[huge] ** 2 / dispersion
        k[huge] = np.maximum(1, np.rint(mu[huge] + np.sqrt(var) * ndtri(u[huge])))
    active = np.flatnonzero(~huge)
    while active.size:
        ka = k[active]
        step = (
            q[active] / (ka + 1)
            if dispersion is None
            else (q[active] * (ka + dispersion) / (ka + 1))
        )
        pmf[active] *= step
        k[active] = ka + 1
        cdf[active] += pmf[active]
        active = active[(u[active] > cdf[active]) & (pmf[active] > 0)]
    return k


def _counts_tile(
    t: int,
    *,
    n: int,
    tile: int,
    model: CountModel,
    dtype,
    seed: int,
    pattern_only: bool = False,
):
    """Rows ``[t·tile, (t+1)·tile)``: CSR counts, or (``pattern_only``) non-zeros per
    row.

    One uniform ``u`` per entry decides both whether the count is zero (``u ≤ P(0)``)
    and, if not, its value (``F⁻¹(u)``): the pattern is known without drawing the
    values.
    """
    import scipy.sparse as sp

    rng = _rng(seed, _TAG_CELLS, t)
    m = min(tile, n - t * tile)
    log_mu = model.log_means(rng, m)
    u = rng.random(log_mu.shape)
    flat, mu = _nonzero_entries(log_mu, u, model.dispersion)
    rows, cols = np.divmod(flat, log_mu.shape[1])
    per_row = np.bincount(rows, minlength=m)
    if pattern_only:
        return per_row
    values = _quantile_counts(mu, u.ravel()[flat], model.dispersion)
    indptr = np.concatenate([[0], np.cumsum(per_row)])
    return sp.csr_matrix((values.astype(dtype), cols, indptr), shape=log_mu.shape)


def _nonzero_entries(log_mu: np.ndarray, u: np.ndarray, dispersion: float | None):
    """``(flat positions, means)`` of the entries whose count is not zero,
    ``u > P(0 | μ)``, in order: the decisions of the direct test on every entry, made
    exactly only for the entries a cheap screen cannot prove zero
    (:mod:`._count_screen`), since ``μ`` and ``P(0)`` on every entry (an exp, a log
    and an exp) would be the generator's hot spot."""
    from ._count_screen import candidates

    cand = candidates(log_mu, u)
    mu_c = np.exp(log_mu.ravel()[cand])
    keep = u.ravel()[cand] > _zero_probability(mu_c, dispersion)
    return cand[keep], mu_c[keep]


def _counts_block(
    block_id=None, *, rows, n, tile, model, dtype, seed, pattern_only=False
):
    """The CSR counts of row block ``block_id`` (``pattern_only``: its count of
    non-zeros)."""
    import scipy.sparse as sp

    i = block_id[0]
    start = sum(rows[:i])
    stop = start + rows[i]
    first, last = start // tile, (stop - 1) // tile
    tiles = [
        _counts_tile(
            t,
            n=n,
            tile=tile,
            model=model,
            dtype=dtype,
            seed=seed,
            pattern_only=pattern_only,
        )
        for t in range(first, last + 1)
    ]
    lo, hi = start - first * tile, stop - first * tile
    if pattern_only:
        return np.array([[int(np.concatenate(tiles)[lo:hi].sum())]], dtype=np.int64)
    out = tiles[0] if len(tiles) == 1 else sp.vstack(tiles, format="csr")
    return out[lo:hi]


@dataclass(frozen=True)
class CountMatrix:
    """A lazy count matrix (dask array of CSR row blocks) and where it goes in an
    AnnData.

    ``X`` is written as the store's ``X``, or as ``layers[layer]`` (then without
    ``X``); cells are named ``cell_0…`` and genes ``gene_0…`` (zero-padded).

    Attributes
    ----------
    X : dask array of shape (n_cells, n_genes)
        The counts, one ``scipy.sparse`` CSR matrix per row block.
    layer : str or None
        The AnnData layer the counts are written to (None: ``X``).
    nnz : dask array of shape (n_blocks, 1) or None
        The stored values of each row block, when cheaper to compute than ``X``.
    """

    X: da.Array
    layer: str | None = None
    #: stored values per row block (a (blocks, 1) int64 array), if cheaper than
    #: computing X
    nnz: da.Array | None = None

    @property
    def shape(self) -> tuple:
        """``(n_cells, n_genes)``, the shape of ``X``."""
        return self.X.shape

    @property
    def dtype(self):
        """The dtype of ``X``."""
        return self.X.dtype

    def var_names(self) -> np.ndarray:
        """The gene names, ``gene_0`` … (zero-padded)."""
        d = self.shape[1]
        return np.array(
            [f"gene_{j:0{len(str(d - 1))}d}" for j in range(d)], dtype=object
        )

    def obs_names(self, chunk: int) -> da.Array:
        """Lazy cell names in chunks of ``chunk``."""
        n = self.shape[0]
        width = len(str(n - 1))
        chunks = da.core.normalize_chunks((chunk,), (n,))

        def names(block_id=None):
            start = sum(chunks[0][: block_id[0]])
            return np.array(
                [
                    f"cell_{i:0{width}d}"
                    for i in range(start, start + chunks[0][block_id[0]])
                ],
                dtype=object,
            )

        return da.map_blocks(
            names, chunks=chunks, dtype=object, meta=np.empty((0,), dtype=object)
        )


def make_counts(
    n_samples: int,
    n_features: int = 2000,
    *,
    rank: int = 10,
    density: float = 0.1,
    dispersion: float | None = 5.0,
    signal: float = 1.0,
    chunk_rows: int = 10_000,
    dtype: str = "float32",
    layer: str | None = None,
    seed: int = 0,
) -> CountMatrix:
    r"""Single-cell-like counts: cells × genes, negative binomial around low-rank
    log-means.

    Each cell ``i`` has ``rank`` standard-normal factors (weights ``0.8^k``) and a size
    factor (log-normal, sd 0.3); gene ``j`` a level and loadings (:func:`count_model`).
    The count is negative binomial with mean
    :math:`\mu_{ij} = \exp(\mathrm{level} + \mathrm{level}_j + \log \mathrm{size}_i
    + f_i \cdot \ell_j)`
    (:math:`f_i` the cell's factors, :math:`\ell_j` the gene's loadings) and variance
    :math:`\mu + \mu^2/\mathrm{dispersion}`, or Poisson with ``dispersion=None``. Each
    entry draws one uniform ``u``: the count is zero when ``u`` is at most the zero
    probability, else the inverse CDF at ``u`` (so the pattern of non-zeros is known
    without drawing the values: ``write_counts`` counts them first).

    ``density`` is the expected fraction of non-zero counts: the global level is solved
    so that the mean zero probability (closed form,
    :math:`(\theta/(\theta+\mu))^\theta`) over a calibration sample of cells drawn from
    the model is :math:`1 - \mathrm{density}`; a large matrix has that density to within
    about a percent (relative).

    Cells are drawn in fixed tiles of rows (about 4 M entries each), tile ``t`` from
    the seed ``[seed, 14, t]``, whatever ``chunk_rows`` is: the values depend on
    ``seed`` only, not on the row blocks, the workers or their order. A block holds
    its rows' counts as ``scipy.sparse.csr_matrix`` (``dtype``, whole numbers);
    memory per task: one tile of dense means (float64) plus the block's CSR. Write
    with :func:`write_dataset` (an AnnData zarr store; ``layer`` names the layer to
    write the counts to instead of ``X``).

    Parameters
    ----------
    n_samples : int
        Number of cells (rows).
    n_features : int, default=2000
        Number of genes (columns).
    rank : int, default=10
        Number of latent factors of the log-means.
    density : float, default=0.1
        Expected fraction of non-zero counts.
    dispersion : float or None, default=5.0
        Negative binomial dispersion θ (variance μ + μ²/θ); ``None``: Poisson
        counts.
    signal : float, default=1.0
        Scale of the factors' effect on the log-means (0: no structure).
    chunk_rows : int, default=10000
        Cells per block of the lazy sparse matrix.
    dtype : str, default="float32"
        Data type of the values.
    layer : str or None, default=None
        AnnData layer the counts are written to; ``None``: ``X``.
    seed : int, default=0
        Seed of every random draw: the same seed gives the same data whatever the
        blocks, the workers or their order.

    Examples
    --------
    >>> from scalepca.datasets import make_counts
    >>> counts = make_counts(1000, 200)                 # cells × genes, CSR blocks
    >>> counts.shape, type(counts.X.blocks[0].compute()).__name__
    ((1000, 200), 'csr_matrix')
    """
    import scipy.sparse as sp

    model = count_model(
        n_features,
        rank=rank,
        density=density,
        dispersion=dispersion,
        signal=signal,
        seed=seed,
    )
    chunks = _row_chunks(n_samples, n_features, chunk_rows)
    dt = np.dtype(dtype)
    block = partial(
        _counts_block,
        rows=chunks[0],
        n=n_samples,
        tile=_tile_rows(n_features),
        model=model,
        dtype=dt,
        seed=seed,
    )
    X = da.map_blocks(
        block, chunks=chunks, dtype=dt, meta=sp.csr_matrix((0, 0), dtype=dt)
    )
    nnz = da.map_blocks(
        partial(block, pattern_only=True),
        chunks=(chunks[0] and (1,) * len(chunks[0]), (1,)),
        dtype=np.int64,
        meta=np.empty((0, 0), dtype=np.int64),
    )
    return CountMatrix(X, layer, nnz)


#: ``data.generate.kind`` / ``scalepca make-data --kind`` → generator
GENERATORS = {
    "low_rank": make_low_rank,
    "missing": make_missing,
    "gridded": make_gridded,
    "coupled_fields": make_coupled_fields,
    "rings": make_rings,
    "sparse_spike": make_sparse_spike,
    "low_rank_sparse": make_low_rank_sparse,
    "counts": make_counts,
    "genotypes": make_genotypes,
}
