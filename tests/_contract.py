"""The contract matrix: what scalepca promises at every junction of estimator, input
kind, preprocessing option and downstream operation (issue 38).

Each cell either equals the dense in-memory reference — the same estimator fitted on the
dense NumPy float64 matrix with the preprocessing applied by hand — or is refused before
any compute with an error that names the problem. This module holds the four lists and
the table of expected outcomes; ``tests/test_contract.py`` runs the cells and
``docs/_ext/docgen.py`` publishes the same table ("what works with what"), so the page
cannot drift from the tests.

A new estimator, input kind, option or operation joins the matrix by being added to ONE
of ``ESTIMATORS``, ``INPUT_KINDS``, ``OPTIONS``, ``OPERATIONS``; a cell that should be
refused gets a row in ``EXPECTATIONS``. The cells run are every pair of two axes with
the other two at their first (default) value: each estimator on each kind, each option
with each operation and so on (:func:`cells`), which keeps the module within the suite's
time budget while every junction of two features is tried.

Only NumPy is imported here: the docs build reads the lists without dask, xarray or
anndata.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import itertools
from collections.abc import Callable

import numpy as np

# -- the data --------------------------------------------------------------------------
N_TIME, LAT, LON = 60, (-60.0, 0.0, 30.0, 75.0), (0.0, 120.0)
N_FEATURES = len(LAT) * len(LON)  # 8: the canonical order is (lat, lon), lon fastest
N_COMPONENTS = 3
#: features that are NaN in every sample with the land-mask option
LAND = (1, 6)
#: the entry made NaN in the new data of transform-nan (a feature every fit uses)
NAN_ROW, NAN_FEATURE = 5, 3


def base_data() -> np.ndarray:
    """A 60 × 8 float64 matrix: three modes of distinct variance, noise, and a column
    scale of 1 to 1000 (so standardising and weighting change the answer)."""
    rng = np.random.default_rng(38)
    modes = rng.normal(size=(N_COMPONENTS, N_FEATURES))
    latent = rng.normal(size=(N_TIME, N_COMPONENTS)) * np.array([5.0, 3.0, 2.0])
    X = latent @ modes + 0.3 * rng.normal(size=(N_TIME, N_FEATURES))
    scale = np.array([1.0, 10.0, 100.0, 0.1, 1.0, 1000.0, 3.0, 0.5])
    return X * scale + rng.normal(size=N_FEATURES) * scale


def coslat_column() -> np.ndarray:
    """√cos(lat) per canonical feature (the ``"sqrt_coslat"`` weights)."""
    return np.repeat(np.sqrt(np.cos(np.deg2rad(LAT))), len(LON))


ARRAY_WEIGHTS = np.array([1.0, 0.5, 2.0, 1.5, 0.25, 1.0, 3.0, 0.75])


def genotype_data() -> np.ndarray:
    """The canonical matrix as allele counts 0, 1, 2 (a PLINK .bed holds nothing
    else): each column of :func:`base_data` cut at two of its quantiles, different
    per column, so the allele frequencies differ and the three modes still shape the
    covariance."""
    X = base_data()
    lo = np.linspace(0.15, 0.5, N_FEATURES)
    hi = np.linspace(0.6, 0.9, N_FEATURES)[::-1]
    q1 = np.array([np.quantile(X[:, j], lo[j]) for j in range(N_FEATURES)])
    q2 = np.array([np.quantile(X[:, j], hi[j]) for j in range(N_FEATURES)])
    return (X > q1).astype(np.float64) + (X > q2)


# -- estimators ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Estimator:
    """An estimator and solver. ``make(**extra)`` builds it (extra: the option's
    parameters)."""

    name: str
    cls: str
    params: dict
    #: linear: components_ over the input features, transform = projection (EOF tools
    #: apply)
    linear: bool = True
    #: the parameters of an iterative fit with a checkpoint: (loose, tight) tolerance
    checkpoint: tuple | None = None
    #: relative tolerance against the reference
    rtol: float = 1e-10
    #: parameters on standardised data (a kernel width for unit-variance features)
    standardized: dict = dataclasses.field(default_factory=dict)

    def make(self, **extra):
        import scalepca

        return getattr(scalepca, self.cls)(**{**self.params, **extra})


ESTIMATORS = [
    Estimator(
        "PCA-covariance_eigh", "PCA", dict(n_components=3, svd_solver="covariance_eigh")
    ),
    Estimator("PCA-tsqr", "PCA", dict(n_components=3, svd_solver="tsqr")),
    Estimator(
        "PCA-randomized",
        "PCA",
        dict(n_components=3, svd_solver="randomized", random_state=0),
    ),
    # block Krylov stopped by its tolerance (blocks of 3 vectors: the basis grows by 3 a
    # pass); a stop one pass apart leaves the axes within tol · λ / gap of each other
    Estimator(
        "PCA-randomized-tol",
        "PCA",
        dict(
            n_components=3,
            svd_solver="randomized",
            n_oversamples=0,
            tol=1e-12,
            n_power_iter=8,
            random_state=0,
        ),
        rtol=1e-8,
    ),
    Estimator("PCA-snapshot", "PCA", dict(n_components=3, svd_solver="snapshot")),
    Estimator(
        "PCA-sketch", "PCA", dict(n_components=3, svd_solver="sketch", random_state=0)
    ),
    Estimator("PPCA-closed_form", "PPCA", dict(n_components=3, solver="closed_form")),
    # iterative fits run a fixed number of steps (tol=0): the paths then agree to
    # rounding
    Estimator(
        "PPCA-em",
        "PPCA",
        dict(n_components=3, solver="em", tol=0, max_iter=25),
        checkpoint=({"tol": 1e-1}, {"tol": 0}),
        rtol=1e-8,
    ),
    Estimator(
        "KernelPCA-nystroem",
        "KernelPCA",
        dict(
            n_components=3,
            approximation="nystroem",
            n_features=30,
            random_state=0,
            fit_inverse_transform=True,
            gamma=3e-8,
        ),
        linear=False,
        standardized=dict(gamma=0.1),
    ),
    Estimator(
        "KernelPCA-rff",
        "KernelPCA",
        dict(
            n_components=3,
            approximation="rff",
            n_features=40,
            random_state=0,
            fit_inverse_transform=True,
            gamma=3e-8,
        ),
        linear=False,
        standardized=dict(gamma=0.1),
    ),
    Estimator(
        "KernelPCA-exact",
        "KernelPCA",
        dict(
            n_components=3,
            approximation="exact",
            fit_inverse_transform=True,
            gamma=3e-8,
        ),
        linear=False,
        standardized=dict(gamma=0.1),
    ),
    Estimator(
        "SparsePCA-minibatch",
        "SparsePCA",
        dict(
            n_components=3,
            method="minibatch",
            alpha=0.5,
            random_state=0,
            tol=0,
            max_iter=20,
            shuffle=False,
        ),
        checkpoint=({"max_iter": 3}, {"max_iter": 20}),
        rtol=1e-8,
    ),
    Estimator(
        "SparsePCA-batch",
        "SparsePCA",
        dict(
            n_components=3,
            method="batch",
            alpha=0.5,
            random_state=0,
            tol=0,
            max_iter=30,
        ),
        checkpoint=({"tol": 1e-1}, {"tol": 0}),
        rtol=1e-8,
    ),
    Estimator(
        "SparsePCA-elasticnet",
        "SparsePCA",
        dict(n_components=3, method="elasticnet", alpha=0.5, random_state=0),
        rtol=1e-8,
    ),
    Estimator(
        "RobustPCA-randomized",
        "RobustPCA",
        dict(random_state=0, tol=1e-7, max_iter=20),
        checkpoint=({"tol": 1e-2}, {"tol": 1e-7}),
        rtol=1e-8,
    ),
    Estimator(
        "RobustPCA-full",
        "RobustPCA",
        dict(svd="full", random_state=0, tol=1e-7, max_iter=40),
        rtol=1e-8,
    ),
]


# -- input kinds -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class InputKind:
    """How a user holds the data. ``make(X, tmp)`` turns the canonical 60 × 8 NumPy
    matrix into the object (or path) the user has; ``feature_order`` is the canonical
    index of each column of the matrix the kind becomes (xarray stacks the feature
    dims in their order)."""

    name: str
    make: Callable
    #: open_matrix keywords that make the matrix (sample_dims of N-D fields)
    open_kwargs: dict = dataclasses.field(default_factory=dict)
    #: a path: opened with open_matrix for fit and transform alike
    path: bool = False
    #: an xarray grid with lat/lon coordinates (named weights apply)
    grid: bool = False
    #: the sample names scores must carry (AnnData obs_names), else None
    sample_names: bool = False
    #: features carry labels (column names, coordinates, var_names): their order can
    #: change
    labelled: bool = False
    feature_order: tuple | None = None
    #: other kinds of the same data a model fitted on this kind transforms
    #: (transform-as-*)
    also_as: tuple = ()
    #: holds allele counts only (a PLINK .bed): the data are :func:`genotype_data`
    genotypes: bool = False


def _field(X: np.ndarray):
    import xarray as xr

    return xr.DataArray(
        X.reshape(N_TIME, len(LAT), len(LON)),
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(N_TIME), "lat": list(LAT), "lon": list(LON)},
        name="sst",
    )


def _dask(chunks):
    def make(X, tmp):
        import dask.array as da

        return da.from_array(X, chunks=(chunks, -1))

    return make


def _xarray_2d(X, tmp):
    import xarray as xr

    return xr.DataArray(
        X,
        dims=("sample", "feature"),
        coords={"feature": [f"f{j}" for j in range(X.shape[1])]},
        name="x",
    )


def _xarray_field(X, tmp):
    return _field(X).chunk({"time": 13})


def _xarray_transposed(X, tmp):
    return _field(X).transpose("lon", "time", "lat").chunk({"time": 13})


def _xarray_two_sample_dims(X, tmp):
    f = _field(X)
    f = f.assign_coords(
        year=("time", np.repeat(np.arange(5), 12)),
        month=("time", np.tile(np.arange(12), 5)),
    )
    return (
        f.set_index(time=("year", "month"))
        .unstack("time")
        .transpose("year", "month", "lat", "lon")
        .chunk({"year": 2})
    )


def _pandas(X, tmp):
    import pandas as pd

    return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])


def _dask_strips(X, tmp):
    """Column strips: every block holds all samples, 2 features each (a field chunked
    along space with all time steps in each store chunk; the wide solvers read it
    strip by strip, block Krylov on the sample Gram)."""
    import dask.array as da

    return da.from_array(X, chunks=(-1, 2))


def _dask_dataframe(X, tmp):
    import dask.dataframe as dd

    return dd.from_pandas(_pandas(X, tmp), npartitions=4)


def _scipy(fmt):
    def make(X, tmp):
        import scipy.sparse as sp

        return getattr(sp, f"{fmt}_matrix")(X)

    return make


def _dask_csr(X, tmp):
    import dask.array as da
    import scipy.sparse as sp

    return da.from_array(X, chunks=(16, -1)).map_blocks(sp.csr_matrix, dtype=X.dtype)


def _adata(X, *, extra_rows=0, extra_cols=0, perm=False):
    import anndata as ad

    rng = np.random.default_rng(7)
    n, d = X.shape
    full = np.vstack([X, rng.normal(size=(extra_rows, d))]) if extra_rows else X
    if extra_cols:
        full = np.hstack([full, rng.normal(size=(len(full), extra_cols))])
    obs = np.array([f"c{i}" for i in range(len(full))])
    var = np.array([f"g{j}" for j in range(full.shape[1])])
    order = rng.permutation(len(full)) if perm else np.arange(len(full))
    a = ad.AnnData(full[order].astype(X.dtype, copy=False))
    a.obs_names, a.var_names = obs[order], var
    # the rows of X in their order: where each c_i went
    back = np.argsort(order)[:n] if perm else np.arange(n)
    return a, back, d


def _anndata_memory(X, tmp):
    return _adata(X)[0]


def _anndata_view_permuted(X, tmp):
    a, back, _ = _adata(X, perm=True)
    return a[back]


def _anndata_view_subset(X, tmp):
    a, _, d = _adata(X, extra_rows=20, extra_cols=3)
    return a[: X.shape[0], :d]


def _backed(a, tmp, name):
    import anndata as ad

    path = tmp / f"{name}.h5ad"
    a.write_h5ad(path)
    return ad.read_h5ad(path, backed="r")


def _anndata_backed(X, tmp):
    return _backed(_adata(X)[0], tmp, "backed")


def _anndata_backed_permuted(X, tmp):
    a, back, _ = _adata(X, perm=True)
    return _backed(a, tmp, "backed_perm")[back]


def _anndata_backed_subset(X, tmp):
    a, _, d = _adata(X, extra_rows=20, extra_cols=3)
    return _backed(a, tmp, "backed_subset")[: X.shape[0], :d]


def _zarr_array(X, tmp):
    import zarr

    path = tmp / "x.zarr"
    z = zarr.open_array(
        str(path), mode="w", shape=X.shape, chunks=(16, X.shape[1]), dtype=X.dtype
    )
    z[:] = X
    return str(path)


def _zarr_object(X, tmp):
    import zarr

    return zarr.open_array(_zarr_array(X, tmp), mode="r")


def _zarr_xarray(X, tmp):
    path = tmp / "field.zarr"
    _field(X).chunk({"time": 16}).to_dataset().to_zarr(path)
    return str(path)


def _zarr_xarray_strips(X, tmp):
    """A field store chunked along space, every time step in each chunk (one latitude
    a chunk); opened with a task size below the field's bytes, its matrix is 4 column
    strips (the layout of a 10 GB climate store at the default task size)."""
    path = tmp / "field_strips.zarr"
    _field(X).chunk({"time": -1, "lat": 1, "lon": -1}).to_dataset().to_zarr(path)
    return str(path)


def _netcdf(X, tmp):
    path = tmp / "field.nc"
    _field(X).to_dataset().to_netcdf(path)
    return str(path)


def _anndata_zarr(X, tmp):
    path = tmp / "cells.zarr"
    _adata(X)[0].write_zarr(path)
    return str(path)


def _plink_bed(X, tmp):
    import bed_reader

    path = tmp / "genotypes.bed"
    bed_reader.to_bed(path, np.ascontiguousarray(X, dtype=np.float64))
    return str(path)


#: the sizes of the first batches of the list of .bed files (the last holds the rest):
#: unequal, their boundaries (rows 25 and 44) inside chunks of dask-chunks (7 rows)
BED_BATCHES = (25, 19)


def _plink_bed_list(X, tmp):
    """The rows as three .bed files (a cohort genotyped in batches), each with its own
    samples' ids; ``open_matrix`` reads the list as one matrix."""
    import bed_reader

    paths, start = [], 0
    for i, stop in enumerate([*np.cumsum(BED_BATCHES), len(X)]):
        path = tmp / f"batch{i}.bed"
        ids = [f"s{j}" for j in range(start, stop)]
        bed_reader.to_bed(
            path,
            np.ascontiguousarray(X[start:stop], dtype=np.float64),
            properties={"fid": [f"f{i}"] * len(ids), "iid": ids},
        )
        paths.append(str(path))
        start = stop
    return paths


def _lon_major() -> tuple:
    return tuple(np.arange(N_FEATURES).reshape(len(LAT), len(LON)).T.ravel())


FIELD = dict(sample_dims="time")

INPUT_KINDS = [
    InputKind("numpy", lambda X, tmp: X, also_as=("dask-chunks", "pandas")),
    InputKind("dask-1chunk", _dask(-1)),
    InputKind("dask-chunks", _dask(7), also_as=("numpy",)),
    InputKind("dask-strips", _dask_strips, also_as=("numpy", "dask-chunks")),
    InputKind(
        "xarray-2d", _xarray_2d, labelled=True, also_as=("pandas", "dask-dataframe")
    ),
    InputKind(
        "xarray-field",
        _xarray_field,
        FIELD,
        grid=True,
        labelled=True,
        also_as=("xarray-transposed", "numpy"),
    ),
    InputKind(
        "xarray-transposed",
        _xarray_transposed,
        FIELD,
        grid=True,
        feature_order=_lon_major(),
        labelled=True,
    ),
    InputKind(
        "xarray-2-sample-dims",
        _xarray_two_sample_dims,
        dict(sample_dims=("year", "month")),
        grid=True,
        labelled=True,
    ),
    InputKind(
        "pandas",
        _pandas,
        labelled=True,
        also_as=("xarray-2d", "dask-dataframe", "numpy"),
    ),
    InputKind("dask-dataframe", _dask_dataframe, labelled=True, also_as=("pandas",)),
    InputKind("scipy-csr", _scipy("csr"), also_as=("anndata",)),
    InputKind("scipy-csc", _scipy("csc")),
    InputKind("dask-csr", _dask_csr),
    InputKind(
        "anndata",
        _anndata_memory,
        sample_names=True,
        labelled=True,
        also_as=("scipy-csr", "anndata-backed"),
    ),
    InputKind(
        "anndata-view-permuted",
        _anndata_view_permuted,
        sample_names=True,
        labelled=True,
    ),
    InputKind(
        "anndata-view-subset", _anndata_view_subset, sample_names=True, labelled=True
    ),
    InputKind("anndata-backed", _anndata_backed, sample_names=True, labelled=True),
    InputKind(
        "anndata-backed-permuted",
        _anndata_backed_permuted,
        sample_names=True,
        labelled=True,
    ),
    InputKind(
        "anndata-backed-subset",
        _anndata_backed_subset,
        sample_names=True,
        labelled=True,
    ),
    InputKind("zarr-object", _zarr_object),
    InputKind("zarr-array", _zarr_array, path=True),
    InputKind("zarr-xarray", _zarr_xarray, FIELD, path=True, grid=True),
    InputKind(
        "zarr-xarray-strips",
        _zarr_xarray_strips,
        dict(FIELD, task_size=1000),
        path=True,
        grid=True,
    ),
    InputKind("netcdf", _netcdf, FIELD, path=True, grid=True),
    InputKind("anndata-zarr", _anndata_zarr, path=True, sample_names=True),
    *(
        InputKind(
            name,
            make,
            dict(dtype="float64"),
            path=True,
            genotypes=True,
            also_as=(other,),
        )
        for name, make, other in (
            ("plink-bed", _plink_bed, "plink-bed-list"),
            # the same genotypes as a list of .bed files read as one matrix (their
            # samples appended): every cell equals the single .bed's
            ("plink-bed-list", _plink_bed_list, "plink-bed"),
        )
    ),
]

#: the PLINK kinds: one .bed, a list of them
BED_KINDS = "plink-bed|plink-bed-list"


# -- preprocessing options -------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Option:
    """A preprocessing option: ``open_kwargs`` go to open_matrix, ``params`` to the
    estimator; ``weights`` (per canonical feature), ``land`` (all-NaN features),
    ``standardize``, ``center`` and ``missing`` say what the reference does by hand."""

    name: str
    open_kwargs: dict = dataclasses.field(default_factory=dict)
    params: dict = dataclasses.field(default_factory=dict)
    weights: str | None = None  # "array" or "named"
    land: bool = False
    standardize: bool = False
    center: bool = True
    missing: bool = False
    #: the dtype the data are held in (the reference is float64 on the same values)
    dtype: str = "float64"
    #: ``dask.config`` settings around the fit and the operations
    config: dict = dataclasses.field(default_factory=dict)
    #: ``standardize="genotype"``: allele counts (:func:`genotype_data`), each feature
    #: centred by 2p and scaled by √(2p(1−p))
    genotype: bool = False


OPTIONS = [
    Option("none"),
    Option("weights-array", weights="array"),
    Option("weights-named", open_kwargs=dict(weights="sqrt_coslat"), weights="named"),
    Option("land-mask", land=True),
    Option("standardize", params=dict(standardize=True), standardize=True),
    Option("zero_center=False", params=dict(zero_center=False), center=False),
    Option("missing", missing=True),
    Option(
        "weights+land-mask",
        open_kwargs=dict(weights="sqrt_coslat"),
        weights="named",
        land=True,
    ),
    Option(
        "standardize+land-mask",
        params=dict(standardize=True),
        standardize=True,
        land=True,
    ),
    # standardised, then weighted (xeofs' order): the weights survive standardising
    Option(
        "standardize+weights-array",
        params=dict(standardize=True),
        weights="array",
        standardize=True,
    ),
    Option(
        "standardize+weights-named",
        open_kwargs=dict(weights="sqrt_coslat"),
        params=dict(standardize=True),
        weights="named",
        standardize=True,
    ),
    # float32 data against the float64 reference of the same values, at the stated
    # float32 bound (scalepca.linalg.moments.FLOAT32_EIGENVALUE_ERROR; see
    # tests/test_contract.py)
    Option("float32", dtype="float32"),
    # float64 products of float32 data: the fit to 1e-10, the outputs (float32 arrays,
    # as the data) to their own rounding
    Option(
        "float32+gram-float64",
        dtype="float32",
        config={"scalepca.gram-precision": "float64"},
    ),
    # xarray's open options (decode_times, use_cftime, engine) of paths read through
    # xarray; the contract data's times are plain numbers: the values are unchanged
    Option("open_options", open_kwargs=dict(open_options={"decode_times": False})),
    Option("standardize=genotype", params=dict(standardize="genotype"), genotype=True),
]


# -- downstream operations -------------------------------------------------------------
OPERATIONS = [
    "transform",  # fit, then components_ and the scores of the data
    # reconstruction of the data from its scores, in the data's units
    "inverse_transform",
    "score",  # score_samples and score: the log-density of the data themselves
    "save-load",  # save → load → transform
    "eofs_as_correlation",
    "eofs_as_covariance",
    "Rotator",  # Rotator(2).fit(model).transform(X)
    "EOF-tools-raw",  # eofs_as_correlation and Rotator.transform on transform's input
    # scalepca.analysis.eof_fields on transform's input: eofs / pcs with eofs' scalings
    # 0, 1, 2, the anomaly reconstruction from 2 modes, the uncentred projection (eofs'
    # projectField)
    "eof-fields",
    # scalepca.analysis.mca.MCA(2) of the data with themselves: its patterns are the
    # EOFs, its singular values the eigenvalues (standardised as the option says);
    # MCA-randomized the same by block Krylov on the dilated cross-covariance
    # (n_oversamples=0: a 2-vector start per field, so the Krylov space grows over the
    # passes before it spans the 8 features)
    "MCA",
    "MCA-randomized",
    # scalepca.MultivariateEOF(2, normalize="none") of the data as its one field, and
    # scalepca.ExtendedEOF(2, embedding=1): both are then PCA, their EOFs and variances
    # the reference's (the peers' equality is in tests/test_multivariate_eof.py and
    # tests/test_extended_eof.py)
    "MultivariateEOF",
    "ExtendedEOF",
    # scalepca.analysis.hilbert_eof.HilbertEOF(2) of the data (exponential padding): the
    # eigenpairs of the Hermitian covariance of their analytic signal, made by hand
    # (xeofs' padded transform) and decomposed densely
    "HilbertEOF",
    # scalepca.analysis.bootstrap.BootstrapEOF(2, 20 replicates): the fit's EOFs and
    # each replicate's explained variance ratios against dense weighted covariances, and
    # Rotator(2) of its EOFs (the whole job in the bootstrap's passes) against the
    # reference's
    "BootstrapEOF",
    # the three analysis tools (MCA of the data with themselves, HilbertEOF(2),
    # BootstrapEOF(2)) fitted on the matrix open_matrix made, then transform of the data
    # as the user holds them (the kind's raw object: an N-D field, a table, ...): the
    # tool repeats its recorded preparation, equal to the transform of the matrix
    # (1e-12), to the reference's PCs (MCA, bootstrap) and to the fitted complex PCs
    # (Hilbert); save-load>tools-raw: with each tool saved and read back by
    # scalepca.load first
    "tools-raw",
    # each tool saved, then `scalepca transform TOOL.zarr DATA --out`: the arrays of
    # run's scores.zarr, equal to the tool's own in Python (an MCA model reads its two
    # fields by the variables it records)
    "tools-cli-transform",
    # transform of the data with their labelled features in another order
    "transform-reordered",
    # fit on one kind, transform the same data as each of also_as
    "transform-as-other-kind",
    # the same with the features reordered: refused
    "transform-as-other-kind-reordered",
    "cli-transform",  # save, then `scalepca transform MODEL DATA --out`
    # `scalepca run` of model.method mca (the field paired with itself), hilbert_eof and
    # bootstrap_eof on the cell's store: the written model (through scalepca.load) and
    # scores equal the Python tool fitted on the same opened matrix
    "cli-run",
    "resume-params",  # checkpointed fit with a loose tolerance, again with a tight one
    "resume-data",  # checkpointed fit, again on other data with the same checkpoint
    # partial_fit on the data, then on 60 more rows of the same kind: equal to the
    # reference fitted on all 120 rows (components, and the scores of the first 60)
    "partial_fit",
    # scalepca.pp.pca(data, 3) with no single-cell step: the PCA of the data, its scores
    # in obsm["X_pca"] of an AnnData (tests/test_singlecell.py: the steps against
    # scanpy's); a view is analysed as its own cells and genes and made an AnnData of
    # its own to hold them
    "pp.pca",
    # pp.pca of the data among 20 other cells and 3 other genes, kept by mask_obs
    # (booleans) and mask_var (positions): the data's PCA, NaN rows of X_pca for the
    # others (tests/test_singlecell_subsets.py: subsets against scanpy's on the copy)
    "pp.pca-masks",
    # `scalepca run` on a config with data.singlecell (no step; mask_obs and mask_var as
    # boolean columns of obs and var of the store holding the data among others): the
    # model saved and the scores written equal the data's reference
    "run-singlecell",
    # transform of the data with one NaN (row NAN_ROW, feature NAN_FEATURE): refused,
    # by the call for in-memory input, when the scores are computed for lazy input
    # (nothing computed at the call); a missing value where the model has one (PPCA
    # EM, genotypes)
    "transform-nan",
    # the same for MCA, MultivariateEOF, ExtendedEOF, BootstrapEOF and HilbertEOF
    "tools-transform-nan",
]


# -- expected outcomes -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Refused:
    """The cell is refused before any compute: ``error`` raised, its message holds
    ``match``."""

    error: type | tuple
    match: str
    reason: str
    #: False where only a read can find the problem (NaN in the data): refused at the
    #: end of the first pass, before anything is fitted or written
    before_compute: bool = True


@dataclasses.dataclass(frozen=True)
class NotApplicable:
    """The combination has no meaning (not run; the docs table shows the reason)."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Defect:
    """The cell fails today: a defect of issue 38 (``item``) or found by the matrix
    (``item=None``). Run as ``xfail(strict=True)``: fixed, it fails until this row
    goes."""

    item: int | None
    reason: str
    #: the outcome once fixed: None (equal to the reference) or the refusal the fix adds
    then: Refused | None = None


@dataclasses.dataclass(frozen=True)
class Rule:
    """Patterns (fnmatch, ``|`` separates alternatives) over (estimator, kind,
    option, op)."""

    estimator: str
    kind: str
    option: str
    op: str
    outcome: Refused | NotApplicable | Defect | None

    def matches(self, cell: tuple) -> bool:
        return all(
            any(fnmatch.fnmatchcase(value, p) for p in pattern.split("|"))
            for pattern, value in zip(
                (self.estimator, self.kind, self.option, self.op), cell, strict=True
            )
        )


SPARSE_KINDS = "scipy-*|dask-csr"
ANNDATA_KINDS = "anndata*"
ITERATIVE = "PPCA-em|SparsePCA-minibatch|SparsePCA-batch|RobustPCA-randomized"

#: the kinds opened through xarray from a path (xarray's open options apply)
XARRAY_PATHS = "zarr-xarray*|netcdf"
EOF_TOOLS = "eofs_as_correlation|eofs_as_covariance|Rotator|EOF-tools-raw|eof-fields"
NAN_READ = (
    "NaN can only be found by reading the data: refused at the end of the first pass, "
    "before anything is fitted"
)
NAN_NEW = (
    "a NaN at a feature the model uses: refused by the call "
    "for in-memory input, when the scores are computed for "
    "lazy input (only a read finds it; no pass of its own)"
)

#: first matching row wins; a cell no row matches must equal the reference
EXPECTATIONS = [
    # -- scalepca.pp.pca, scanpy's entry point -----------------------------------------
    Rule(
        "PCA-tsqr|PCA-randomized*|PCA-snapshot|PCA-sketch|PPCA-*|KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "*",
        "pp.pca|pp.pca-masks",
        NotApplicable(
            "pp.pca fits PCA (svd_solver='auto'): run once, "
            "against the reference of PCA-covariance_eigh"
        ),
    ),
    Rule(
        "*",
        "*",
        "weights-*|weights+*|land-mask|standardize*|missing|open_options",
        "pp.pca|pp.pca-masks|run-singlecell",
        NotApplicable(
            "pp.pca's preparation is scanpy's (normalize_total, log1p, highly "
            "variable genes, scale: tests/test_singlecell.py), not open_matrix's"
        ),
    ),
    Rule(
        "*",
        "xarray-*",
        "*",
        "pp.pca|pp.pca-masks",
        Refused(
            ValueError,
            "single-cell counts are a matrix over ('obs', 'var')",
            "pp.pca reads cells × genes: an AnnData's matrix or an array",
        ),
    ),
    Rule(
        "*",
        "pandas|dask-dataframe|zarr-*|netcdf|" + BED_KINDS,
        "*",
        "pp.pca|pp.pca-masks",
        Refused(
            TypeError,
            "single-cell counts are read from an AnnData",
            "pp.pca reads AnnData (objects, .zarr/.h5ad stores) and arrays",
        ),
    ),
    Rule(
        "*",
        "|".join(k.name for k in INPUT_KINDS if k.name != "anndata-zarr"),
        "*",
        "run-singlecell",
        NotApplicable(
            "data.singlecell reads AnnData stores: the path kind anndata-zarr"
        ),
    ),
    Rule(
        "PPCA-*",
        "*",
        "zero_center=False",
        "run-singlecell",
        NotApplicable("zero_center is a PCA parameter"),
    ),
    Rule(
        "PCA-tsqr|PPCA-em",
        "*",
        "*",
        "run-singlecell",
        Refused(
            ValueError,
            "needs dense blocks",
            "the single-cell steps give CSR blocks (tsqr's QR factors and EM's rows "
            "are dense); scalepca run says so in the config's words and exits 2",
        ),
    ),
    Rule(
        "KernelPCA-*|SparsePCA-*|RobustPCA-*|PCA-sketch|PCA-randomized-tol",
        "*",
        "*",
        "run-singlecell",
        NotApplicable(
            "the config route's fit is the method's own (its kinds are run by the "
            "other operations): run for PCA and PPCA"
        ),
    ),
    # -- what does not apply -----------------------------------------------------------
    Rule(
        "PCA-tsqr|PCA-randomized|PPCA-*|KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "*",
        "MCA*",
        NotApplicable(
            "MCA fits no estimator of this axis: run once, against the reference "
            "of PCA-covariance_eigh"
        ),
    ),
    Rule(
        "*",
        "*",
        "zero_center=False",
        "MCA*",
        NotApplicable("MCA centres the fields (zero_center is a PCA parameter)"),
    ),
    Rule(
        "PCA-tsqr|PCA-randomized*|PCA-snapshot|PCA-sketch|PPCA-*|KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "*",
        "MultivariateEOF|ExtendedEOF",
        NotApplicable(
            "fits no estimator of this axis: run once, "
            "against the reference of PCA-covariance_eigh"
        ),
    ),
    Rule(
        "*",
        "*",
        "zero_center=False|standardize*",
        "MultivariateEOF|ExtendedEOF",
        NotApplicable(
            "no zero_center or standardize parameter (the multivariate EOF's "
            "normalize scales whole fields)"
        ),
    ),
    Rule(
        "*",
        SPARSE_KINDS,
        "*",
        "MultivariateEOF|ExtendedEOF",
        Refused(
            (ValueError, TypeError),
            "sparse",
            "gridded fields are dense; the joined or time-embedded blocks would be",
        ),
    ),
    Rule(
        "*",
        SPARSE_KINDS,
        "*",
        "MCA*",
        Refused((ValueError, TypeError), "sparse", "MCA's cross products are dense"),
    ),
    Rule(
        "PCA-tsqr|PCA-randomized*|PCA-snapshot|PCA-sketch|PPCA-*|KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "*",
        "HilbertEOF|BootstrapEOF",
        NotApplicable(
            "fits no estimator of this axis: run once, against the dense reference "
            "made with PCA-covariance_eigh's cell"
        ),
    ),
    Rule(
        "*",
        "*",
        "zero_center=False|standardize*",
        "HilbertEOF|BootstrapEOF",
        NotApplicable(
            "the field is centred and taken as given (no zero_center, no "
            "standardize parameter; weight it with open_matrix)"
        ),
    ),
    Rule(
        "*",
        SPARSE_KINDS,
        "*",
        "HilbertEOF|BootstrapEOF",
        Refused(
            (ValueError, TypeError),
            "sparse",
            "the analytic signal and the replicates' Grams are dense",
        ),
    ),
    Rule(
        "PCA-tsqr|PCA-randomized*|PCA-snapshot|PCA-sketch|PPCA-*|KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "*",
        "tools-*",
        NotApplicable(
            "the analysis tools fit no estimator of this axis: run once, against "
            "the reference made with PCA-covariance_eigh's cell"
        ),
    ),
    Rule(
        "*",
        "*",
        "zero_center=False|standardize*",
        "tools-*",
        NotApplicable(
            "the tools centre the field and take it as prepared (no zero_center or "
            "standardize of this axis; MCA's own in tests/test_mca.py)"
        ),
    ),
    Rule(
        "*",
        "|".join(k.name for k in INPUT_KINDS if k.name not in XARRAY_PATHS.split("|")),
        "*",
        "tools-cli-transform",
        NotApplicable(
            "scalepca transform of a tool's model reads a named variable of an "
            "xarray store (NetCDF, xarray zarr), as run's analysis methods do"
        ),
    ),
    Rule(
        "*",
        SPARSE_KINDS,
        "*",
        "tools-raw",
        Refused(
            (ValueError, TypeError),
            "sparse",
            "the tools' cross products, analytic signal and replicates are dense",
        ),
    ),
    Rule(
        "PCA-tsqr|PCA-randomized*|PCA-snapshot|PCA-sketch|PPCA-*|KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "*",
        "cli-run",
        NotApplicable("runs the analysis methods, which fit no estimator of this axis"),
    ),
    Rule(
        "*",
        "|".join(
            k.name
            for k in INPUT_KINDS
            if not any(fnmatch.fnmatchcase(k.name, p) for p in XARRAY_PATHS.split("|"))
        ),
        "*",
        "cli-run",
        NotApplicable(
            "run's analysis methods read a named variable of an xarray store "
            "(NetCDF, xarray zarr)"
        ),
    ),
    Rule(
        "*",
        "*",
        "weights-array|missing|standardize*|zero_center=False|float32+gram-float64",
        "cli-run",
        NotApplicable(
            "a config names its weights (sqrt_coslat, coslat or a variable); the "
            "tools take no zero_center or standardize of this axis (MCA's own in "
            "tests/test_analysis_run.py); NaN at some samples is refused by the "
            "tools themselves (cells MCA, HilbertEOF, BootstrapEOF)"
        ),
    ),
    Rule(
        "KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "*",
        "score",
        NotApplicable("no Gaussian model: score / score_samples are PCA's and PPCA's"),
    ),
    Rule(
        "KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "*",
        EOF_TOOLS,
        NotApplicable("EOF tools take a fitted PCA or PPCA"),
    ),
    Rule(
        "PCA-*|PPCA-closed_form|KernelPCA-*|SparsePCA-elasticnet|RobustPCA-full",
        "*",
        "*",
        "resume-*",
        NotApplicable("not an iterative fit: no checkpoint"),
    ),
    Rule(
        "PPCA-*|KernelPCA-*|SparsePCA-*|RobustPCA-*",
        "*",
        "zero_center=False",
        "*",
        NotApplicable("zero_center is a PCA parameter"),
    ),
    Rule(
        "SparsePCA-*|RobustPCA-*",
        "*",
        "standardize*",
        "*",
        NotApplicable("no standardize parameter"),
    ),
    Rule(
        "*",
        "anndata-backed-permuted|anndata-backed-subset",
        "*",
        "transform-reordered",
        NotApplicable("anndata makes no view of a backed view"),
    ),
    Rule(
        "*",
        "*",
        "float32",
        "score",
        NotApplicable(
            "no stated float32 accuracy: the stated bound (0.13 ε₃₂ λ₁ per "
            "eigenvalue) leaves σ² no digit where λ₁/σ² ≈ 1e8, as on these columns; "
            "float64 products give the log-density to its float64 tolerance "
            "(float32+gram-float64)"
        ),
    ),
    Rule(
        "SparsePCA-*",
        "*",
        "float32",
        "*",
        NotApplicable(
            "no stated float32 bound for the sparse components (measured on these "
            "data against float64: minibatch 6e-3, elasticnet 2e-6); with float64 "
            "products the sparse fits keep their float64 tolerance "
            "(float32+gram-float64)"
        ),
    ),
    Rule(
        "SparsePCA-minibatch",
        "*",
        "*",
        "partial_fit",
        NotApplicable(
            "minibatch's partial_fit is an online step of dictionary learning, not "
            "an update equal to a fit (tests/test_sparse_pca.py)"
        ),
    ),
    # -- refusals ----------------------------------------------------------------------
    Rule(
        "PCA-tsqr|PCA-randomized*|PCA-snapshot|PCA-sketch",
        "*",
        "*",
        "partial_fit",
        Refused(
            AttributeError,
            "partial_fit cannot update svd_solver=",
            "only the covariance solver's fit is a function of mergeable moments",
        ),
    ),
    Rule(
        "PPCA-em",
        "*",
        "*",
        "partial_fit",
        Refused(AttributeError, "partial_fit cannot update solver='em'", "EM iterates"),
    ),
    Rule(
        "KernelPCA-exact",
        "*",
        "*",
        "partial_fit",
        Refused(
            AttributeError,
            "partial_fit cannot update approximation='exact'",
            "the n × n kernel of every row",
        ),
    ),
    Rule(
        "KernelPCA-*",
        "*",
        "*",
        "partial_fit",
        Refused(
            AttributeError,
            "partial_fit cannot update fit_inverse_transform=True",
            "the pre-image ridge is reduced over the scores (Nyström and RFF update "
            "without it: tests/test_partial_fit.py)",
        ),
    ),
    Rule(
        "SparsePCA-batch",
        "*",
        "*",
        "partial_fit",
        Refused(
            AttributeError,
            "partial_fit cannot update method='batch'",
            "its alternations read every row",
        ),
    ),
    Rule(
        "RobustPCA-*",
        "*",
        "*",
        "partial_fit",
        Refused(
            AttributeError,
            "partial_fit cannot update robust PCA",
            "the augmented Lagrangian iterates over every row",
        ),
    ),
    Rule(
        "PCA-tsqr",
        SPARSE_KINDS,
        "*",
        "*",
        Refused(
            ValueError,
            "svd_solver='tsqr' needs dense blocks",
            "QR factors of sparse blocks are dense",
        ),
    ),
    Rule(
        "PPCA-em",
        SPARSE_KINDS,
        "*",
        "*",
        Refused((ValueError, TypeError), "sparse", "EM maps dense rows"),
    ),
    Rule(
        "RobustPCA-*",
        SPARSE_KINDS,
        "*",
        "*",
        Refused((ValueError, TypeError), "sparse", "S and the multiplier are dense"),
    ),
    Rule(
        "KernelPCA-*",
        SPARSE_KINDS,
        "standardize*",
        "*",
        Refused(
            ValueError,
            "standardize=True centres every feature",
            "centring would make the sparse data "
            "dense (an RBF kernel needs no centring)",
        ),
    ),
    Rule(
        "*",
        SPARSE_KINDS + "|" + ANNDATA_KINDS,
        "weights-*|weights+*|standardize+weights-*",
        "*",
        Refused(ValueError, "weights", "weights apply to gridded fields"),
    ),
    Rule(
        "*",
        "numpy|dask-*|xarray-2d|pandas|zarr-array|zarr-object",
        "weights-named|weights+*|standardize+weights-named",
        "*",
        Refused((ValueError, KeyError), "coslat", "no latitude coordinate"),
    ),
    Rule(
        "*",
        BED_KINDS,
        "float32*",
        "*",
        NotApplicable(
            'read as float64 here (open_matrix dtype="float64"); allele counts are '
            "exact in the float32 reads of the default, tests/test_genotypes.py"
        ),
    ),
    Rule(
        "*",
        BED_KINDS,
        "weights-*|weights+*|standardize+weights-*",
        "*",
        Refused(
            ValueError,
            "weights do not apply to a PLINK .bed",
            "genotypes are standardised by the model (standardize='genotype')",
        ),
    ),
    Rule(
        "PPCA-*|KernelPCA-*",
        "*",
        "standardize=genotype",
        "*",
        Refused(
            TypeError,
            "standardize must be True or False",
            "the genotype standardisation is a PCA option (PPCA fits allele counts as "
            "they are; missing='em' for missing calls)",
        ),
    ),
    Rule(
        "*",
        "*",
        "standardize=genotype",
        "MCA*",
        NotApplicable(
            "MCA standardises its two fields itself (its own standardize); the "
            "genotype scaling is PCA's, tests/test_genotypes.py"
        ),
    ),
    Rule(
        "PCA-covariance_eigh",
        SPARSE_KINDS,
        "standardize=genotype",
        "*",
        Refused(
            ValueError,
            "standardize='genotype' with svd_solver='tsqr' or "
            "'covariance_eigh' needs dense",
            "sparse allele counts run the wide solvers (randomized, snapshot, sketch), "
            "which centre and fill missing calls inside their per-block products",
        ),
    ),
    Rule(
        "PPCA-em",
        "*",
        "standardize*",
        "*",
        Refused(
            ValueError,
            "standardize=True needs solver='closed_form'",
            "the EM solver fits the unstandardised data",
        ),
    ),
    Rule(
        "PPCA-closed_form",
        "*",
        "missing",
        "*",
        Refused(
            ValueError,
            "missing='em' needs solver='em'",
            "the closed form cannot skip missing entries",
        ),
    ),
    Rule(
        "RobustPCA-*",
        "*",
        "missing",
        "*",
        Refused(
            ValueError,
            "mask=",
            "missing entries are marked with mask=; " + NAN_READ,
            before_compute=False,
        ),
    ),
    Rule(
        "PCA-*|KernelPCA-*|SparsePCA-*",
        "*",
        "missing",
        "*",
        Refused(
            ValueError,
            "NaN",
            "only PPCA EM treats NaN entries as missing; " + NAN_READ,
            before_compute=False,
        ),
    ),
    Rule(
        "PCA-*",
        "*",
        "zero_center=False",
        "Rotator",
        Refused(
            ValueError,
            "Rotator needs the eigenvalues of the covariance",
            "the uncentred fit's variances are not the covariance's sorted eigenvalues",
        ),
    ),
    # the raw-data maps are computed and compared first, then the rotation is refused
    Rule(
        "PCA-*",
        "*",
        "zero_center=False",
        "EOF-tools-raw",
        Refused(
            ValueError,
            "Rotator needs the eigenvalues of the covariance",
            "the uncentred fit's variances are not the covariance's sorted eigenvalues",
            before_compute=False,
        ),
    ),
    Rule(
        "PCA-*",
        "*",
        "zero_center=False",
        "eof-fields",
        Refused(
            ValueError,
            "eofscaling=1 needs the eigenvalues of the covariance",
            "the uncentred fit's variances are not the covariance's eigenvalues",
        ),
    ),
    Rule(
        "*",
        "|".join(
            k.name
            for k in INPUT_KINDS
            if not any(fnmatch.fnmatchcase(k.name, p) for p in XARRAY_PATHS.split("|"))
        ),
        "open_options",
        "*",
        Refused(
            ValueError,
            "read through xarray",
            "xarray's open options apply to NetCDF "
            "files and xarray zarr stores (paths)",
        ),
    ),
    Rule(
        ITERATIVE,
        "*",
        "*",
        "resume-data",
        Refused(
            ValueError,
            "was written for a different problem (data_sketch",
            "a checkpoint of other data is refused, and left untouched, once the first "
            "pass has sketched the data",
            before_compute=False,
        ),
    ),
    # -- equal where the rules above do not apply, and the defects found by the matrix -
    Rule(
        "PCA-*",
        "*",
        "zero_center=False",
        "score",
        Refused(ValueError, "zero_center", "the uncentred fit has no Gaussian model"),
    ),
    # -- a NaN in new data (issue 46): one rule, refused (after the rows above) ------
    Rule("*", "*", "standardize=genotype", "transform-nan", None),  # a missing call
    Rule("PPCA-em", "*", "missing", "transform-nan", None),  # missing='em': missing
    Rule(
        "*",
        "*",
        "*",
        "transform-nan",
        Refused(ValueError, "NaN value", NAN_NEW, before_compute=False),
    ),
    Rule(
        "*",
        SPARSE_KINDS,
        "*",
        "tools-transform-nan",
        Refused(
            (ValueError, TypeError),
            "sparse",
            "the tools' cross products, analytic signal and replicates are dense",
        ),
    ),
    Rule(
        "*",
        "*",
        "*",
        "tools-transform-nan",
        Refused(
            ValueError,
            "NaN",
            NAN_NEW + "; HilbertEOF refuses a gap in any "
            "series it uses (the Hilbert transform "
            "runs along time: one NaN moves every PC)",
            before_compute=False,
        ),
    ),
]


@functools.cache  # the collection asks for each of the ~2,400 cells twice
def expectation(cell: tuple):
    """The outcome the table gives ``cell`` (None: equal to the reference). A composite
    operation ``save-load>OP`` has OP's outcome, unless a row names it."""
    for rule in EXPECTATIONS:
        if rule.matches(cell):
            return rule.outcome
    if ">" in cell[3]:
        return expectation((*cell[:3], cell[3].rsplit(">", 1)[1]))
    return _implicit(cell)


_KINDS = {k.name: k for k in INPUT_KINDS}
_OPTIONS = {o.name: o for o in OPTIONS}
_ESTIMATORS = {e.name: e for e in ESTIMATORS}


def _implicit(cell):
    est, kind, option, op = cell
    if op == "cli-transform" and not _KINDS[kind].path:
        return NotApplicable("the CLI reads stores: path kinds only")
    if op == "transform-reordered" and not (
        _KINDS[kind].labelled and not _KINDS[kind].path
    ):
        return NotApplicable(
            "features without labels (or a store): their order is the data's"
        )
    if op.startswith("transform-as-other-kind") and not _KINDS[kind].also_as:
        return NotApplicable("no other kind of these data listed for this kind")
    if op == "transform-as-other-kind-reordered" and not (
        _KINDS[kind].labelled and any(_KINDS[k].labelled for k in _KINDS[kind].also_as)
    ):
        return NotApplicable(
            "a fit or other kinds without feature labels: the features' order "
            "is the data's (scikit-learn warns of the missing names only)"
        )
    return None


# -- the cells run ---------------------------------------------------------------------
AXES = ("estimator", "kind", "option", "op")


#: the value of an axis in the cells that cross two others: a gridded field (named
#: weights and land masks apply), no option, a plain fit and transform
DEFAULTS = ("PCA-covariance_eigh", "xarray-field", "none", "transform")


def _names():
    return (
        [e.name for e in ESTIMATORS],
        [k.name for k in INPUT_KINDS],
        [o.name for o in OPTIONS],
        list(OPERATIONS),
    )


#: junctions of three or four features the pairs do not reach (the others at their
#: default are never varied together): patterns as in ``Rule`` (``|`` separates
#: alternatives), each expanded to every combination. An operation ``save-load>OP``
#: saves the fitted model, loads it and runs OP with the loaded one.
EXTRA_CELLS = [
    # scalepca.pp.pca on the kinds it reads, uncentred and on float32 data, whole and
    # masked
    (
        "PCA-covariance_eigh",
        "numpy|dask-csr|anndata|anndata-zarr",
        "zero_center=False|float32|float32+gram-float64",
        "pp.pca|pp.pca-masks",
    ),
    # the config route (data.singlecell with masks) for PCA and PPCA, uncentred too
    (
        "PCA-covariance_eigh|PCA-tsqr|PCA-randomized|PPCA-*",
        "anndata-zarr",
        "none|zero_center=False|float32",
        "run-singlecell",
    ),
    # PPCA standardised, then the EOF tools (maps in the field's units, rotated scores)
    (
        "PPCA-closed_form",
        "xarray-field",
        "standardize|standardize+land-mask",
        EOF_TOOLS,
    ),
    # KernelPCA on sparse input, standardised
    ("KernelPCA-*", "scipy-csr|dask-csr", "standardize", "transform|inverse_transform"),
    # weights (array or named) reach the CLI's transform through the saved model
    (
        "PCA-covariance_eigh|PPCA-closed_form",
        "zarr-xarray|netcdf",
        "weights-array|weights-named|weights+land-mask|standardize+weights-*",
        "cli-transform",
    ),
    # xarray's open options on the paths xarray reads, into the EOF tools
    (
        "PCA-covariance_eigh|PPCA-closed_form",
        XARRAY_PATHS,
        "open_options",
        "transform|eof-fields|eofs_as_correlation",
    ),
    # the genotype map inside the wide solvers' per-block products: a .bed, CSR blocks
    (
        "PCA-randomized*|PCA-snapshot|PCA-sketch",
        BED_KINDS + "|scipy-csr|dask-csr",
        "standardize=genotype",
        "transform|save-load>transform",
    ),
    # column strips (all samples in each block): block Krylov on the sample Gram, each
    # strip centred, standardised or genotype-mapped in its task, all-NaN features left
    # out
    (
        "PCA-randomized*|PCA-snapshot|PCA-sketch",
        "dask-strips|zarr-xarray-strips",
        "none|weights-array|land-mask|standardize|zero_center=False|missing|"
        "standardize+land-mask|float32|float32+gram-float64|standardize=genotype|"
        "standardize+weights-*",
        "transform|save-load>transform",
    ),
    # a land mask survives save and load into the EOF tools
    (
        "PCA-covariance_eigh|PPCA-closed_form",
        "xarray-field",
        "land-mask|weights+land-mask",
        "save-load>" + EOF_TOOLS.replace("|", "|save-load>"),
    ),
    # the analysis tools saved and read back by scalepca.load (for these operations the
    # model saved is the tool's own), on arrays, fields and a path, with land and
    # weights
    (
        "PCA-covariance_eigh",
        "numpy|xarray-field|netcdf",
        "none|weights+land-mask",
        "save-load>MCA|save-load>HilbertEOF|save-load>BootstrapEOF",
    ),
    # the analysis tools saved, loaded and given the raw data: their record of the
    # preparation (weights, land, grid) survives the store
    (
        "PCA-covariance_eigh",
        "numpy|xarray-field|netcdf",
        "none|weights+land-mask",
        "save-load>tools-raw",
    ),
    # scalepca transform of the tools' stores with weights (array or named), land and
    # float32
    (
        "PCA-covariance_eigh",
        XARRAY_PATHS,
        "none|weights-array|weights-named|weights+land-mask|float32",
        "tools-cli-transform",
    ),
    # scalepca run of the analysis methods with weights and land, xarray's open options
    # and float32 data
    (
        "PCA-covariance_eigh",
        "netcdf",
        "weights+land-mask|open_options|float32",
        "cli-run",
    ),
    # a NaN in new data: every estimator on in-memory, dask, CSR and path input; PPCA
    # EM with missing entries and genotypes take it as a missing value
    ("*", "numpy|dask-chunks|scipy-csr|dask-csr|netcdf", "none", "transform-nan"),
    ("PPCA-em", "numpy|dask-chunks|xarray-field", "missing", "transform-nan"),
    (
        "PCA-randomized|PCA-snapshot",
        BED_KINDS + "|dask-chunks",
        "standardize=genotype",
        "transform-nan",
    ),
]


def _expand(patterns: tuple) -> list[tuple]:
    """The cells of an EXTRA_CELLS row: each pattern matched against its axis's names
    (and, for operations, taken as written where it names a composite such as
    ``save-load>OP``)."""
    axes = []
    for names, pattern in zip(_names(), patterns, strict=True):
        values = []
        for p in pattern.split("|"):
            hits = [n for n in names if fnmatch.fnmatchcase(n, p)]
            values += hits or [p]
        axes.append(values)
    return list(itertools.product(*axes))


def extra_cells() -> list[tuple]:
    return list(dict.fromkeys(c for row in EXTRA_CELLS for c in _expand(row)))


def pair_cells() -> list[tuple]:
    """Every pair of two axes crossed, the other two at their default, without
    repeats."""
    names = _names()
    out = {}
    for a, b in itertools.combinations(range(4), 2):
        for va, vb in itertools.product(names[a], names[b]):
            cell = list(DEFAULTS)
            cell[a], cell[b] = va, vb
            out[tuple(cell)] = None
    return list(out)


def cells() -> list[tuple]:
    """The cells run: every pair of axes (:func:`pair_cells`), then
    :data:`EXTRA_CELLS`."""
    return list(dict.fromkeys(pair_cells() + extra_cells()))


# -- the docs page ---------------------------------------------------------------------
def _code(outcome, legend: dict) -> str:
    if outcome is None:
        return "✓"
    if isinstance(outcome, Defect):
        key = (
            f"issue 38 item {outcome.item}: "
            if outcome.item
            else "found by the matrix: "
        ) + outcome.reason
        mark = "D"
    elif isinstance(outcome, Refused):
        names = outcome.error if isinstance(outcome.error, tuple) else (outcome.error,)
        when = "before compute" if outcome.before_compute else "after the first read"
        key = (
            f"refused {when} ({' or '.join(e.__name__ for e in names)}: "
            f"“{outcome.match}”): {outcome.reason}"
        )
        mark = "R"
    else:
        key = f"not applicable: {outcome.reason}"
        mark = "–"
    if key not in legend:
        legend[key] = f"{mark}{sum(1 for k in legend if legend[k][0] == mark) + 1}"
    return legend[key]


def markdown() -> str:
    """The matrix as the docs page "what works with what" (MyST markdown)."""
    names = _names()
    legend: dict = {}
    n_run = sum(1 for c in cells() if not isinstance(expectation(c), NotApplicable))
    parts = [
        "<!-- generated by docs/_ext/docgen.py "
        "from tests/_contract.py: do not edit -->\n",
        "# What works with what\n",
        "scalepca's contract, cell by cell: each estimator and solver, each kind of "
        "input, each preprocessing option and each operation after the fit. In every "
        "cell marked ✓ the result equals the dense in-memory reference — the same "
        "estimator fitted on the dense NumPy float64 matrix with the preprocessing "
        "done by hand (all-NaN features dropped, features standardised in their own "
        "units, then weights multiplied in) — to 1e-10 relative (1e-8 for the "
        "iterative sparse and robust fits; components and scores up to their sign; "
        "the randomized solvers, Nyström and random Fourier features against their "
        "own reference with the same `random_state`). Float32 data (options "
        "`float32…`) are compared with the float64 reference of the same values: with "
        "float32 products (the default) each component within √2 · 0.13 ε₃₂ λ₁ / gap "
        "of its own (the stated eigenvalue accuracy, "
        "`scalepca.linalg.moments.FLOAT32_EIGENVALUE_ERROR`, through the Davis–Kahan "
        "bound sin θ ≤ err / gap, the gap to the nearest other eigenvalue) and each "
        "score within that angle times the row norm plus the float32 rounding of the "
        "projection (other outputs, which mix the modes, to the largest of these "
        "relative to the largest score); with `scalepca.gram-precision: float64` the "
        "fit to 1e-10 and the float32 outputs to their rounding. A cell marked R is "
        "refused before any compute (NaN entries, which only a read finds: at the end "
        "of the first pass), with the error shown below; D marks a known defect, "
        "being fixed; – does not apply.\n",
        f"The test suite runs the {n_run} applicable cells of these tables "
        "(`tests/test_contract.py`, from the lists and the table of expected outcomes "
        "in `tests/_contract.py`, which also write this page): every pair of two axes "
        "is crossed, the other two at their default — estimator "
        f"`{DEFAULTS[0]}`, input `{DEFAULTS[1]}`, option `{DEFAULTS[2]}`, operation "
        f"`{DEFAULTS[3]}` — and the junctions of more features listed under *Beyond "
        f"pairs*.\n",
    ]
    titles = {
        "estimator": "estimator",
        "kind": "input",
        "option": "option",
        "op": "operation",
    }
    for a, b in itertools.combinations(range(4), 2):
        parts.append(f"## {titles[AXES[a]]} × {titles[AXES[b]]}\n")
        header = [f"{titles[AXES[a]]} \\\\ {titles[AXES[b]]}"] + [
            f"`{v}`" for v in names[b]
        ]
        rows = []
        for va in names[a]:
            row = [f"`{va}`"]
            for vb in names[b]:
                cell = list(DEFAULTS)
                cell[a], cell[b] = va, vb
                row.append(_code(expectation(tuple(cell)), legend))
            rows.append(row)
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        parts.append("\n".join(lines) + "\n")
    parts.append("## Beyond pairs\n")
    parts.append(
        "Junctions of three or four features that no pair of axes reaches "
        "(`EXTRA_CELLS`); `save-load>OP` runs OP with the model saved and loaded "
        "(for `MCA`, `HilbertEOF`, `BootstrapEOF` and `tools-raw`, the tools' own "
        "models, read back by `scalepca.load`).\n"
    )
    lines = [
        "| estimator | input | option | operation | outcome |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{e}` | `{k}` | `{o}` | `{op}` | "
        f"{_code(expectation((e, k, o, op)), legend)} |"
        for e, k, o, op in extra_cells()
    ]
    parts.append("\n".join(lines) + "\n")
    parts.append("## Legend\n")
    for text, mark in sorted(legend.items(), key=lambda kv: (kv[1][0], int(kv[1][1:]))):
        parts.append(f"- **{mark}** — {text.replace('|', '/')}")
    parts.append("\n## The axes\n")
    parts.append(
        "- **inputs**: "
        + ", ".join(f"`{k.name}`" for k in INPUT_KINDS)
        + ". Paths are opened with `scalepca.open_matrix`; N-D fields with "
        "`sample_dims`; AnnData views are a permuted or a row-and-gene subset of a "
        "larger object, in memory or backed by an `.h5ad` file."
    )
    parts.append(
        "- **other kinds of the same data** (`transform-as-other-kind`: fitted on the "
        "first, transformed as each of the others; `…-reordered`: the same with the "
        "features in another order, refused naming the features as scikit-learn does, "
        "where the fit and the other kind both label them): "
        + "; ".join(
            f"`{k.name}` → " + ", ".join(f"`{o}`" for o in k.also_as)
            for k in INPUT_KINDS
            if k.also_as
        )
        + "."
    )
    parts.append("- **options**: " + ", ".join(f"`{o.name}`" for o in OPTIONS) + ".")
    parts.append(
        "- **operations**: " + ", ".join(f"`{o}`" for o in OPERATIONS) + ": "
        "`resume-params` fits with a checkpoint and a loose tolerance, then again "
        "with a tight one and the same checkpoint; `resume-data` fits again on other "
        "data (the columns permuted) with the same checkpoint. Either must equal a "
        "fresh fit or be refused. `partial_fit` updates the model with the data, then "
        "with 60 more rows of the same kind (other values, prepared the same way): it "
        "must equal the reference fitted on all 120 rows, or be refused by name "
        "before any compute.\n"
    )
    return "\n".join(parts) + "\n"
