"""Synthetic datasets for every method: the generators (lazy, block by block) and their
writing to zarr stores (:func:`write_dataset`)."""

from ._generators import (
    GENERATORS,
    CountMatrix,
    count_model,
    low_rank_factors,
    make_counts,
    make_coupled_fields,
    make_gridded,
    make_low_rank,
    make_low_rank_sparse,
    make_missing,
    make_rings,
    make_sparse_spike,
    sparse_spike_loadings,
)
from ._writing import (
    csr_index_dtype,
    dataset_complete,
    make_low_rank_zarr,
    write_dataset,
)
from .genotypes import GenotypeMatrix, make_genotypes, write_bed

__all__ = [
    "GENERATORS",
    "CountMatrix",
    "GenotypeMatrix",
    "make_genotypes",
    "write_bed",
    "count_model",
    "csr_index_dtype",
    "dataset_complete",
    "low_rank_factors",
    "make_counts",
    "make_coupled_fields",
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
