"""Synthetic datasets for every method, generated and written block by block.

Each generator returns a lazy dask array (or, for gridded data, a dask-backed xarray
Dataset) whose every block is drawn from its own seed — ``SeedSequence([seed, tag, block
index])`` — so the data do not depend on the cluster, the number of workers or the order in
which blocks are computed. Nothing is ever held whole in memory: :func:`write_dataset` lets the
workers generate and write one block each.

========================  =====================================================================
kind                      structure (and the method it exercises)
========================  =====================================================================
``low_rank``              ``Z diag(s) V + mean + noise·E``: PCA, PPCA
``missing``               ``low_rank`` with a fraction of entries set to NaN: PPCA with EM
``gridded``               (time, lat, lon) field of a few smooth spatial modes + noise, NaN on
                          a land mask, with coordinates: EOF analysis of xarray data
``rings``                 noisy concentric rings (radii 1, 2.8, 5) in the first two features:
                          kernel PCA
``sparse_spike``          spiked covariance whose leading eigenvectors have small disjoint
                          supports: sparse PCA
``low_rank_sparse``       ``L + S``: rank-r ``L`` (Candès et al. 2011 scaling) plus a fraction
                          of ±magnitude corruptions ``S``, in 2-D blocks: robust PCA
========================  =====================================================================
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

import dask.array as da
import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "GENERATORS",
    "low_rank_factors",
    "make_gridded",
    "make_low_rank",
    "make_low_rank_sparse",
    "make_low_rank_zarr",
    "make_missing",
    "make_rings",
    "make_sparse_spike",
    "sparse_spike_loadings",
    "write_dataset",
]

# seed tags: one per kind of random draw, so draws never share a stream
_TAG_FACTORS, _TAG_BLOCK, _TAG_MISSING = 1, 2, 3
_TAG_RINGS, _TAG_SPIKE_V, _TAG_SPIKE, _TAG_LR_U, _TAG_LR_V, _TAG_SPARSE = 4, 5, 6, 7, 8, 9
_TAG_GRID, _TAG_GRID_BLOCK = 10, 11


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
    return da.map_blocks(fn, chunks=chunks, dtype=dtype, meta=np.empty((0,) * len(chunks),
                                                                        dtype=dtype))


# -- low rank + noise (PCA, PPCA) -----------------------------------------------------------------
def low_rank_factors(n_features: int, rank: int, *, seed: int = 0, decay: float = 0.7):
    """Orthonormal loadings (rank × d) and decaying standard deviations of the latent factors."""
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

    ``V`` (rank × d) is orthonormal, the factor standard deviations decay as ``10 · 0.7^j``
    and ``E`` is standard normal; see :func:`low_rank_factors` for the true ``V``.
    Each row block is generated from its own seed (``[seed, 2, block index]``), so the data
    do not depend on the cluster that computes them.
    """
    if not 1 <= rank <= n_features:
        raise ValueError(f"rank must be in [1, n_features={n_features}]; got {rank}")
    loadings, scales, mean = low_rank_factors(n_features, rank, seed=seed)
    chunks = _row_chunks(n_samples, n_features, chunk_rows)
    rows = chunks[0]
    return _lazy(
        lambda block_id=None: _block(block_id, rows, n_features, loadings, scales, mean, noise,
                                     np.dtype(dtype), seed),
        chunks, dtype,
    )


# -- missing entries (PPCA EM) --------------------------------------------------------------------
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
    """:func:`make_low_rank` with each entry missing (NaN) independently with probability
    ``missing`` (missing completely at random). The complete data are ``make_low_rank`` with the
    same arguments, so a test can compare imputed values with the truth."""
    if not 0.0 <= missing < 1.0:
        raise ValueError(f"missing must be in [0, 1); got {missing}")
    X = make_low_rank(n_samples, n_features, rank=rank, noise=noise, chunk_rows=chunk_rows,
                      dtype=dtype, seed=seed)
    return X.map_blocks(_punch_holes, fraction=missing, seed=seed, dtype=X.dtype)


# -- gridded field with a land mask (EOF analysis) ------------------------------------------------
def _grid(n_lat: int, n_lon: int):
    lat = np.linspace(-90 + 90 / n_lat, 90 - 90 / n_lat, n_lat)
    lon = np.arange(n_lon) * (360.0 / n_lon)
    return lat, lon


def gridded_modes(n_lat: int, n_lon: int, rank: int, *, land_fraction: float = 0.3,
                  seed: int = 0):
    """Smooth spatial modes (rank × lat × lon), their amplitudes, and the land mask (bool)."""
    rng = _rng(seed, _TAG_GRID)
    lat, lon = _grid(n_lat, n_lon)
    la, lo = np.deg2rad(lat)[:, None], np.deg2rad(lon)[None, :]
    modes = np.empty((rank, n_lat, n_lon))
    for j in range(rank):
        phase = rng.uniform(0, 2 * np.pi)
        modes[j] = np.cos((j // 2 + 1) * la) * np.cos((j + 1) * lo + phase) + 0.3 * np.sin(
            (j + 1) * la)
    # land: where a smooth random field exceeds its quantile
    field = sum(
        rng.normal() * np.cos(a * la + rng.uniform(0, 2 * np.pi))
        * np.cos(b * lo + rng.uniform(0, 2 * np.pi))
        for a, b in [(1, 1), (2, 3), (3, 2), (1, 4)]
    )
    land = field > np.quantile(field, 1.0 - land_fraction) if land_fraction > 0 else (
        np.zeros((n_lat, n_lon), dtype=bool))
    amplitudes = 5.0 * 0.7 ** np.arange(rank)
    return modes, amplitudes, land


def _gridded_block(block_id=None, *, rows, modes, amplitudes, land, noise, dtype, seed):
    i = block_id[0]
    rng = _rng(seed, _TAG_GRID_BLOCK, i)
    m = rows[i]
    pcs = rng.standard_normal((m, len(amplitudes))) * amplitudes
    x = np.tensordot(pcs, modes, axes=1) + 15.0 + noise * rng.standard_normal(
        (m, *modes.shape[1:]))
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

    ``rank`` smooth spatial modes with amplitudes ``5 · 0.7^j`` and standard-normal time
    series, a mean of 15, plus ``noise``; cells on a fixed land mask (``land_fraction`` of the
    grid) are NaN at every time — the shape of a sea-surface-temperature record. Coordinates:
    daily ``time`` from 2000-01-01, ``lat`` (cell centres, degrees north), ``lon`` (degrees
    east). Open with ``open_matrix(path, sample_dims="time")``; the features are the grid cells.
    """
    import pandas as pd
    import xarray as xr

    if not 0.0 <= land_fraction < 1.0:
        raise ValueError(f"land_fraction must be in [0, 1); got {land_fraction}")
    modes, amplitudes, land = gridded_modes(n_lat, n_lon, rank, land_fraction=land_fraction,
                                            seed=seed)
    chunks = da.core.normalize_chunks((chunk_rows, n_lat, n_lon), (n_samples, n_lat, n_lon))
    data = _lazy(
        lambda block_id=None: _gridded_block(
            block_id, rows=chunks[0], modes=modes, amplitudes=amplitudes, land=land,
            noise=noise, dtype=np.dtype(dtype), seed=seed),
        chunks, dtype,
    )
    lat, lon = _grid(n_lat, n_lon)
    time = pd.date_range("2000-01-01", periods=n_samples, freq="D")
    arr = xr.DataArray(data, dims=("time", "lat", "lon"),
                       coords={"time": time, "lat": lat, "lon": lon},
                       attrs={"long_name": "synthetic field with a land mask"})
    arr["lat"].attrs["units"] = "degrees_north"
    arr["lon"].attrs["units"] = "degrees_east"
    return arr.to_dataset(name=variable)


# -- concentric rings (kernel PCA) ----------------------------------------------------------------
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
    """Points on noisy concentric circles in the first two features (the others pure noise).

    Each point picks a ring uniformly, an angle uniformly, and gets isotropic Gaussian noise of
    standard deviation ``noise`` in every feature. Linear PCA cannot separate the rings; an RBF
    kernel PCA (γ ≈ 0.5 for the default radii) does. With ``return_labels`` also the lazy ring
    index of every row (int64, same row chunks) is returned.
    """
    if n_features < 2:
        raise ValueError(f"rings need n_features >= 2; got {n_features}")
    chunks = _row_chunks(n_samples, n_features, chunk_rows)
    kw = dict(rows=chunks[0], n_features=n_features, radii=tuple(radii), noise=noise,
              dtype=np.dtype(dtype), seed=seed)
    X = _lazy(lambda block_id=None: _rings_block(block_id, labels=False, **kw), chunks, dtype)
    if not return_labels:
        return X
    y = _lazy(lambda block_id=None: _rings_block(block_id, labels=True, **kw), (chunks[0],),
              np.int64)
    return X, y


# -- sparse spiked covariance (sparse PCA) --------------------------------------------------------
def sparse_spike_loadings(n_features: int, n_components: int = 3, support: int = 10, *,
                          seed: int = 0) -> np.ndarray:
    """True loadings (n_components × d): disjoint supports of ``support`` features each, entries
    ``±1/√support`` (unit norm, orthonormal rows)."""
    if n_components * support > n_features:
        raise ValueError(
            f"n_components · support = {n_components * support} exceeds n_features = {n_features}"
        )
    rng = _rng(seed, _TAG_SPIKE_V)
    idx = rng.permutation(n_features)[: n_components * support].reshape(n_components, support)
    V = np.zeros((n_components, n_features))
    for j in range(n_components):
        V[j, idx[j]] = rng.choice([-1.0, 1.0], support) / np.sqrt(support)
    return V


def _spike_block(block_id=None, *, rows, V, sd, noise, dtype, seed):
    i = block_id[0]
    rng = _rng(seed, _TAG_SPIKE, i)
    m = rows[i]
    x = (rng.standard_normal((m, len(sd))) * sd) @ V + noise * rng.standard_normal(
        (m, V.shape[1]))
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
    """Spiked covariance ``Σ = Vᵀ diag(λ) V + noise² I`` with sparse rows of ``V``.

    The spike variances are ``λ_j = strength · decay^j`` and the rows of ``V`` are given by
    :func:`sparse_spike_loadings` (same ``seed``), so support recovery can be scored.
    """
    V = sparse_spike_loadings(n_features, n_components, support, seed=seed)
    sd = np.sqrt(strength * decay ** np.arange(n_components))
    chunks = _row_chunks(n_samples, n_features, chunk_rows)
    return _lazy(lambda block_id=None: _spike_block(block_id, rows=chunks[0], V=V, sd=sd,
                                                    noise=noise, dtype=np.dtype(dtype),
                                                    seed=seed),
                 chunks, dtype)


# -- low rank + sparse corruption (robust PCA) ----------------------------------------------------
def _lr_factor(seed, tag, j, m, rank, scale):
    return _rng(seed, tag, j).normal(0.0, scale, (m, rank))


def _lrs_block(block_id=None, *, chunks, rank, corruption, magnitude, n1, n2, dtype, seed,
               part):
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
    """``M = L + S``: the random robust-PCA problems of Candès, Li, Ma & Wright (2011).

    ``L = U Vᵀ`` with ``U`` (n₁ × r) and ``V`` (n₂ × r) entries ``N(0, 1/n₁)`` and
    ``N(0, 1/n₂)`` (for square problems the paper's ``N(0, 1/n)``); ``S`` has each entry
    corrupted independently with probability ``corruption`` to ``±magnitude``. Blocks are 2-D
    (``chunk_rows × chunk_cols``; by default square), each built from the factor blocks of its
    row and column and its own corruption seed. With ``return_parts`` the lazy ``L`` and ``S``
    are returned too (``M, L, S``), for checking a recovery.
    """
    if not 1 <= rank <= min(n_samples, n_features):
        raise ValueError(f"rank must be in [1, {min(n_samples, n_features)}]; got {rank}")
    if not 0.0 <= corruption < 1.0:
        raise ValueError(f"corruption must be in [0, 1); got {corruption}")
    chunk_cols = chunk_cols or chunk_rows
    chunks = da.core.normalize_chunks((chunk_rows, chunk_cols), (n_samples, n_features))
    kw = dict(chunks=chunks, rank=rank, corruption=corruption, magnitude=magnitude,
              n1=n_samples, n2=n_features, dtype=np.dtype(dtype), seed=seed)
    M = _lazy(lambda block_id=None: _lrs_block(block_id, part="M", **kw), chunks, dtype)
    if not return_parts:
        return M
    L = _lazy(lambda block_id=None: _lrs_block(block_id, part="L", **kw), chunks, dtype)
    S = _lazy(lambda block_id=None: _lrs_block(block_id, part="S", **kw), chunks, dtype)
    return M, L, S


#: ``data.generate.kind`` / ``scalepca make-data --kind`` → generator
GENERATORS = {
    "low_rank": make_low_rank,
    "missing": make_missing,
    "gridded": make_gridded,
    "rings": make_rings,
    "sparse_spike": make_sparse_spike,
    "low_rank_sparse": make_low_rank_sparse,
}


# -- writing --------------------------------------------------------------------------------------
def _regular(arr: da.Array) -> da.Array:
    """Zarr needs equal chunks except the last one along each axis."""
    for ax, c in enumerate(arr.chunks):
        if any(x != c[0] for x in c[:-1]) or c[-1] > c[0]:
            arr = arr.rechunk({ax: max(c)})
    return arr


def write_dataset(data, path, *, overwrite: bool = False, storage_options=None,
                  codec: str | None = None) -> str:
    """Write a lazy dataset (dask array or xarray Dataset) to a zarr store, block by block.

    ``codec`` names the compression, one of :data:`scalepca._codecs.CODECS` (default
    :data:`~scalepca._codecs.DEFAULT_CODEC`, chosen by measurement: see the README).

    The workers generate and write one block each. Local paths are written under a temporary
    sibling name and renamed into place, so an interrupted write never leaves a store that
    looks complete; remote URLs (``s3://...``) are written in place (object stores have no
    rename). Returns the path. If a store exists at ``path`` and ``overwrite`` is false, it is
    left as it is.
    """
    import xarray as xr
    import zarr

    from ._codecs import compressors
    from .io._open import _is_url

    spath = os.fspath(path)
    comp = compressors(codec)  # an unknown name fails here, before anything is written

    def _encoding(ds):
        return {v: {"compressors": comp} for v in ds.data_vars}

    def _write(target):
        if isinstance(data, xr.Dataset):
            ds = data.chunk({d: max(c) for d, c in data.chunks.items()})
            ds.to_zarr(target, mode="w", consolidated=False, encoding=_encoding(ds))
        else:
            arr = _regular(data)
            z = zarr.create_array(target, shape=arr.shape, dtype=arr.dtype,
                                  chunks=tuple(max(c[0], 1) for c in arr.chunks),
                                  compressors=comp, overwrite=True)
            arr.store(z, lock=False)

    if _is_url(spath):
        import fsspec

        fs, root = fsspec.core.url_to_fs(spath, **(storage_options or {}))
        if fs.exists(root):
            if not overwrite and dataset_complete(spath, storage_options):
                logger.info("dataset %s exists; not regenerating", spath)
                return spath
            fs.rm(root, recursive=True)
        # no rename on object stores: the store is flagged incomplete until the last block
        # is written, and readers (open_matrix) refuse it meanwhile
        if isinstance(data, xr.Dataset):
            ds = data.chunk({d: max(c) for d, c in data.chunks.items()})
            ds.attrs = {**ds.attrs, "complete": False}
            ds.to_zarr(spath, mode="w", consolidated=False, storage_options=storage_options,
                       encoding=_encoding(ds))
        else:
            arr = _regular(data)
            store = zarr.storage.FsspecStore.from_url(spath, storage_options=storage_options,
                                                      read_only=False)
            z = zarr.create_array(store, shape=arr.shape, chunks=tuple(c[0] for c in arr.chunks),
                                  dtype=arr.dtype, attributes={"complete": False},
                                  compressors=comp)
            arr.store(z, lock=False)
        node = zarr.open(store=zarr.storage.FsspecStore.from_url(
            spath, storage_options=storage_options, read_only=False), mode="r+")
        node.attrs["complete"] = True
        return spath
    if spath.startswith("file://"):
        spath = spath[len("file://"):]
    target = Path(spath)
    if target.exists() and not overwrite:
        logger.info("dataset %s exists; not regenerating", target)
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        _write(str(tmp))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(target)


def dataset_complete(path, storage_options=None) -> bool:
    """False when the store at ``path`` carries ``complete: false`` (an interrupted write)."""
    from .io import open_zarr_node

    try:
        node = open_zarr_node(path, storage_options=storage_options)
    except FileNotFoundError:
        return False
    return node.attrs.get("complete", True) is not False


def make_low_rank_zarr(path, n_samples: int, n_features: int, *, overwrite: bool = False,
                       storage_options=None, codec: str | None = None, **kwargs) -> str:
    """Write :func:`make_low_rank` data to a zarr array at ``path`` (see :func:`write_dataset`)."""
    return write_dataset(make_low_rank(n_samples, n_features, **kwargs), path,
                         overwrite=overwrite, storage_options=storage_options, codec=codec)
