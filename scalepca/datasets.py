"""Synthetic datasets written to zarr block by block (never held whole in memory)."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

import dask.array as da
import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["low_rank_factors", "make_low_rank", "make_low_rank_zarr"]


def low_rank_factors(n_features: int, rank: int, *, seed: int = 0, decay: float = 0.7):
    """Orthonormal loadings (rank × d) and decaying standard deviations of the latent factors."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    Q, _ = np.linalg.qr(rng.standard_normal((n_features, rank)))
    scales = 10.0 * decay ** np.arange(rank)
    mean = rng.normal(0.0, 1.0, n_features)
    return Q.T, scales, mean


def _block(block_id, rows, n_features, loadings, scales, mean, noise, dtype, seed):
    i = block_id[0]
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2, i]))
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
    dtype="float64",
    seed: int = 0,
) -> da.Array:
    """Lazy low-rank-plus-noise matrix ``X = Z diag(scales) V + mean + noise · E``.

    Each row block is generated from its own seed (``[seed, 2, block index]``), so the data
    do not depend on the cluster that computes them.
    """
    loadings, scales, mean = low_rank_factors(n_features, rank, seed=seed)
    chunks = da.core.normalize_chunks((chunk_rows, n_features), (n_samples, n_features))
    rows = chunks[0]
    return da.map_blocks(
        lambda block_id=None: _block(block_id, rows, n_features, loadings, scales, mean, noise,
                                     np.dtype(dtype), seed),
        chunks=chunks,
        dtype=np.dtype(dtype),
        meta=np.empty((0, 0), dtype=dtype),
    )


def make_low_rank_zarr(path, n_samples: int, n_features: int, *, overwrite: bool = False,
                       **kwargs) -> str:
    """Write :func:`make_low_rank` data to a zarr v3 array at ``path`` (atomically).

    Blocks are generated and written by the workers; the array is built under a temporary
    name and renamed, so an interrupted write never leaves something that looks complete.
    Returns the path. If the store exists and ``overwrite`` is false it is left as it is.
    """
    path = Path(os.fspath(path))
    if path.exists() and not overwrite:
        logger.info("dataset %s exists; not regenerating", path)
        return str(path)
    X = make_low_rank(n_samples, n_features, **kwargs)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        X.to_zarr(str(tmp), overwrite=True)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(path)
