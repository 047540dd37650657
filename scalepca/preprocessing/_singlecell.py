"""Single-cell preparation owned by the model: library-size normalisation, log1p, highly
variable genes and per-gene scaling, applied to raw counts block by block inside the
passes.

scanpy's in-memory pipeline writes a new matrix at each step (``normalize_total``,
``log1p``, ``highly_variable_genes``, ``scale``) before ``pca`` reads the last one. Here
the counts are read as they are stored and each row block is prepared in the task that
reads it (:mod:`scalepca.linalg.singlecell`); what the steps need from the whole matrix
is learned in passes of their own, counted in ``n_passes_``:

1. with ``exclude_highly_expressed``: which genes ever hold more than ``max_fraction``
   of a cell's counts (one pass, a count per gene);
2. with ``target_sum=None``: the counts of every cell (one pass, n numbers to the
   client, whose median is the target; scanpy's rule for CSR input: all cells, empty
   ones included);
3. the per-gene moments of the normalised log data and of its ``expm1`` (one pass, 4 d
   numbers): the highly variable genes (:mod:`._hvg`) and the means and standard
   deviations of scaling.

The prepared matrix (a lazy dask array of CSR blocks on the chosen genes) is then
what PCA fits, in its own pass. Nothing is densified: scaling returns
``S = Z − 1 aᵀ`` (see :mod:`scalepca.linalg.singlecell`), the scaled matrix less a
per-gene constant, which has the covariance of ``Z``. ``prepare`` repeats the steps
on new cells from the stored numbers alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import dask.array as da
import numpy as np
import scipy.sparse as sp

from ..linalg import passes
from ..linalg import singlecell as kernels
from ..linalg.moments import _block_moments_sparse, merge_moments
from ._hvg import FLAVORS, gene_dispersions, select_genes

#: the fitted arrays of :class:`CellSteps` (stored with a model)
ARRAYS = (
    "keep_genes_",
    "highly_variable_",
    "gene_mean_",
    "gene_std_",
    "means_",
    "dispersions_",
    "dispersions_norm_",
    "variances_",
    "variances_norm_",
    "highly_variable_rank_",
)


@dataclass(eq=False)
class CellSteps:
    """The steps from raw counts to the matrix PCA fits, with what they learned.

    Parameters are scanpy's: ``target_sum`` (None: the median of the cells' counts),
    ``exclude_highly_expressed``, ``max_fraction`` (``normalize_total``;
    ``normalize=False`` skips it), ``log1p``, ``flavor`` (of
    ``highly_variable_genes``, None: every gene, or ``gene_mask`` when given),
    ``n_top_genes``, ``min_mean``, ``max_mean``, ``min_disp``, ``max_disp``,
    ``n_bins``, and ``scale`` with ``zero_center_scale`` and ``max_value``
    (``scale``).
    """

    normalize: bool = True
    target_sum: float | None = None
    exclude_highly_expressed: bool = False
    max_fraction: float = 0.05
    log1p: bool = True
    flavor: str | None = "seurat"
    n_top_genes: int | None = None
    min_mean: float = 0.0125
    max_mean: float = 3.0
    min_disp: float = 0.5
    max_disp: float = float("inf")
    n_bins: int = 20
    scale: bool = True
    zero_center_scale: bool = True
    max_value: float | None = None
    gene_mask: np.ndarray | None = field(default=None, repr=False)
    # fitted
    target_sum_: float | None = None
    n_genes_in_: int | None = None
    n_cells_: int | None = None
    gene_names_: list | None = field(default=None, repr=False)
    keep_genes_: np.ndarray | None = field(default=None, repr=False)
    highly_variable_: np.ndarray | None = field(default=None, repr=False)
    gene_mean_: np.ndarray | None = field(default=None, repr=False)
    gene_std_: np.ndarray | None = field(default=None, repr=False)
    means_: np.ndarray | None = field(default=None, repr=False)
    dispersions_: np.ndarray | None = field(default=None, repr=False)
    dispersions_norm_: np.ndarray | None = field(default=None, repr=False)
    variances_: np.ndarray | None = field(default=None, repr=False)
    variances_norm_: np.ndarray | None = field(default=None, repr=False)
    highly_variable_rank_: np.ndarray | None = field(default=None, repr=False)
    n_passes_: int = 0

    # -- checks ------------------------------------------------------------------------
    def check(self, d: int) -> None:
        """Refuse parameters that cannot work on d genes (before any pass)."""
        if self.flavor is not None and self.flavor not in FLAVORS:
            raise ValueError(
                f"flavor must be one of {', '.join(FLAVORS)} "
                f"or None; got {self.flavor!r}"
            )
        if self.flavor == "seurat_v3" and self.gene_mask is None:
            from ._hvg import loess_class

            loess_class()  # scikit-misc is there, before any pass
        if not 0 <= self.max_fraction <= 1:
            raise ValueError(
                f"max_fraction must be between 0 and 1; got {self.max_fraction!r}"
            )
        if self.target_sum is not None and not self.target_sum > 0:
            raise ValueError(f"target_sum must be positive; got {self.target_sum!r}")
        if self.max_value is not None and not self.max_value > 0:
            raise ValueError(f"max_value must be positive; got {self.max_value!r}")
        if self.n_top_genes is not None and not 0 < int(self.n_top_genes):
            raise ValueError(
                f"n_top_genes must be a positive integer; got {self.n_top_genes!r}"
            )
        if self.gene_mask is not None:
            mask = np.asarray(self.gene_mask)
            if mask.dtype != bool or mask.shape != (d,):
                raise ValueError(
                    f"the gene mask must be {d} booleans, one per gene; got "
                    f"{mask.dtype} of shape {mask.shape}"
                )
            if not mask.any():
                raise ValueError("the gene mask selects no gene")
        if self.flavor is not None and self.gene_mask is not None:
            raise ValueError(
                "give either a gene mask or a flavor of highly variable genes"
            )

    @property
    def _hvg_from_moments(self) -> bool:
        return self.flavor is not None and self.gene_mask is None

    @property
    def _seurat(self) -> bool:
        """Whether the genes are chosen by seurat's dispersions, of the expm1 data."""
        return self._hvg_from_moments and self.flavor == "seurat"

    @property
    def _target(self) -> float | None:
        """The sum each cell is normalised to; None: not normalised."""
        return self.target_sum_ if self.normalize else None

    @property
    def _genes(self):
        """The index of the kept genes in arrays over every gene (a boolean mask, or
        every gene)."""
        return slice(None) if self.highly_variable_ is None else self.highly_variable_

    # -- the block steps ---------------------------------------------------------------
    def _normalized(self, x) -> sp.csr_matrix:
        return kernels.normalize_log_block(
            x, target_sum=self._target, keep=self.keep_genes_, log=self.log1p
        )

    @property
    def _needs_counts(self) -> bool:
        """Whether the steps read counts (whole numbers ≥ 0), not any matrix."""
        return self.normalize or self.log1p or self.flavor is not None

    def refusal(self, problems, *, what: str = "X", block: int | None = None):
        """Why counts with ``problems`` (summed
        :func:`~scalepca.linalg.singlecell.count_problems` of the cells read) cannot be
        prepared, in ``pp.pca``'s words; None: they can. ``block``: the counts are those
        of one block of that many cells."""
        nan, inf, negative, fraction = (int(v) for v in problems)
        kinds = [(nan, "NaN"), (inf, "infinite")]
        if self._needs_counts:  # else a matrix analysed as it is: negatives are data
            kinds.append((negative, "negative"))
        found = [f"{n} {word}" for n, word in kinds if n]
        if not found:
            return None
        total = sum(n for n, _ in kinds)
        message = f"{what} contains {_listed(found)} value{'s' if total > 1 else ''}"
        if block is not None:
            message += f" (counted in one block of {block} cells)"
        if not self._needs_counts:
            return message + "; remove or fill them first"
        steps = [
            name
            for name, on in (
                ("normalize_total", self.normalize),
                ("log1p", self.log1p),
                (f"flavor={self.flavor!r}", self.flavor is not None),
            )
            if on
        ]
        verb = "takes" if len(steps) == 1 else "take"
        message += f"; {_listed(steps)} {verb} raw counts, whole numbers ≥ 0"
        if fraction:
            are = "values are" if fraction > 1 else "value is"
            message += f" ({fraction} {are} not whole numbers: normalised data?)"
        return message + "; give the raw counts, with layer=... if they are a layer"

    def check_counts(self, x) -> None:
        """Refuse one raw block (new cells, or the first pass when it is the fit's)."""
        message = self.refusal(
            kernels.count_problems(x),
            block=x.shape[0],
            what=getattr(self, "counts_name_", "X"),
        )
        if message is not None:
            raise ValueError(message)

    def block(self, x) -> sp.csr_matrix:
        """One raw block made into a block of the fitted matrix (kept genes, scaled);
        the counts are checked first (cheap beside the steps)."""
        self.check_counts(x)
        y = self._normalized(x)
        cols = self.highly_variable_
        if not self.scale:
            return y if cols is None else y[:, np.flatnonzero(cols)]
        return kernels.scale_block(
            y,
            cols=cols,
            mean=self.gene_mean_[self._genes],
            std=self.gene_std_[self._genes],
            max_value=self.max_value,
            zero_center=self.zero_center_scale,
        )

    def apply(self, X: da.Array) -> da.Array:
        """The lazy prepared matrix of the raw CSR (or dense) row blocks ``X``."""
        d_out = int(self.n_genes_out)
        meta = sp.csr_matrix((0, 0), dtype=np.float64)
        return X.map_blocks(
            self.block, dtype=np.float64, meta=meta, chunks=(X.chunks[0], (d_out,))
        )

    @property
    def n_genes_out(self) -> int:
        return np.arange(self.n_genes_in_)[self._genes].size

    @property
    def offset_(self) -> np.ndarray:
        """The scaled value of a zero per kept gene (``a``: prepared matrix + ``a`` =
        scaled data; zeros without scaling)."""
        d = self.n_genes_out
        if not self.scale:
            return np.zeros(d)
        return kernels.scale_offset(
            self.gene_mean_[self._genes],
            self.gene_std_[self._genes],
            max_value=self.max_value,
            zero_center=self.zero_center_scale,
        )

    # -- fitting: the passes -----------------------------------------------------------
    def fit(
        self, X: da.Array, *, gene_names=None, split_every: int = 8, what: str = "X"
    ) -> CellSteps:
        """Learn the target sum, the genes and their statistics from raw counts ``X``
        (a dask array of CSR or dense row blocks, genes in one column chunk; named
        ``what`` in messages). Returns ``self``. The first of the passes counts what
        raw counts cannot be (NaN, infinite, negative) over every cell and refuses
        them before its result is used; without a pass, the first read (the fit's)
        refuses them block by block."""
        n, d = X.shape
        self.check(d)
        self.counts_name_, self._unchecked = what, True
        self._v3_clip = None
        self.n_genes_in_, self.n_cells_ = int(d), int(n)
        self.gene_names_ = None if gene_names is None else [str(g) for g in gene_names]
        self.keep_genes_ = None
        self.highly_variable_ = (
            None if self.gene_mask is None else np.asarray(self.gene_mask, dtype=bool)
        )
        with passes.counting(self, chunks=X.numblocks[0]):
            self.n_passes_ = 0
            if self.normalize and self.exclude_highly_expressed:
                counts = self._pass(
                    X,
                    _HighCount(self.max_fraction),
                    _add,
                    split_every,
                    "highly-expressed",
                    "highly expressed genes",
                )
                self.keep_genes_ = counts == 0
            self.target_sum_ = self.target_sum
            totals = self.normalize and self.target_sum is None
            if totals or self._v3:  # one pass: each block read once for both
                first = _FirstPass(self.keep_genes_, totals=totals, sums=self._v3)
                label = " and ".join(
                    name
                    for name, on in (
                        ("counts per cell", totals),
                        ("raw counts' sums", self._v3),
                    )
                    if on
                )
                parts = self._pass(
                    X, first, _concat_cell_counts, split_every, "counts-per-cell", label
                )
                if totals:
                    self.target_sum_ = float(np.median(parts["totals"]))
                if self._v3:
                    self._fit_v3_curve(parts["sums"], n)
            if self.scale or self._hvg_from_moments:  # else nothing to learn from them
                self._fit_gene_moments(X, split_every)
        return self

    def _pass(self, X: da.Array, block, merge, split_every: int, name: str, label: str):
        """One pass of the steps over the raw counts, reduced with ``merge``; the first
        also sums :func:`~scalepca.linalg.singlecell.count_problems` and refuses the
        counts."""
        check, self._unchecked = self._unchecked, False
        if check:
            block, merge = _Checked(block), _CheckedMerge(merge)
        graph = passes.reduce_rows(X, block, merge, split_every=split_every, name=name)
        (out,) = passes.compute(graph, name=label)
        if not check:
            return out
        problems, out = out
        message = self.refusal(problems, what=self.counts_name_)
        if message is not None:
            raise ValueError(message)
        return out

    @property
    def _v3(self) -> bool:
        return self._hvg_from_moments and self.flavor == "seurat_v3"

    def _fit_v3_curve(self, sums: np.ndarray, n: int) -> None:
        """The curve of seurat_v3 from the raw counts' sums. Mean and variance are
        formed as scanpy forms them (``Σx/n``, ``(Σx²/n − mean²)·n/(n − 1)``): sums
        of whole counts are exact, so the LOESS sees the same numbers, and genes of
        equal means (ties, which the LOESS's neighbourhoods depend on to the last
        bit) stay equal."""
        from ._hvg import seurat_v3_clip

        self.means_ = sums[0] / n
        self.variances_ = (sums[1] / n - self.means_**2) * (n / (n - 1))
        self._v3_sd, self._v3_clip = seurat_v3_clip(self.means_, self.variances_, n)

    def _gene_moments_block(self):
        """The task of the gene-moments pass on one raw block (a picklable callable)."""
        return _GeneMoments(self, clip=self._v3_clip)

    def _fit_gene_moments(self, X: da.Array, split_every: int) -> None:
        parts = self._pass(
            X,
            self._gene_moments_block(),
            _merge_pairs,
            split_every,
            "gene-moments",
            "gene moments",
        )
        log_m = parts[0]
        n = log_m["n"]
        ddof = n / (n - 1) if n > 1 else 1.0
        var = log_m["ss"] / n * ddof
        self.gene_mean_ = log_m["mean"]
        std = np.sqrt(var)
        std[std == 0] = 1.0
        self.gene_std_ = std
        if self._v3:
            from ._hvg import seurat_v3_genes

            sums = parts[1]
            self.variances_norm_, self.highly_variable_rank_, self.highly_variable_ = (
                seurat_v3_genes(
                    self.means_,
                    self._v3_sd,
                    sums[0],
                    sums[1],
                    n,
                    2000 if self.n_top_genes is None else self.n_top_genes,
                )
            )
        elif self._hvg_from_moments:
            read = parts[1] if self._seurat else log_m
            mean, disp, norm = gene_dispersions(
                read["mean"],
                read["ss"] / n * ddof,
                flavor=self.flavor,
                n_bins=self.n_bins,
            )
            self.means_, self.dispersions_, self.dispersions_norm_ = mean, disp, norm
            self.highly_variable_ = select_genes(
                mean,
                norm,
                n_top_genes=self.n_top_genes,
                min_mean=self.min_mean,
                max_mean=self.max_mean,
                min_disp=self.min_disp,
                max_disp=self.max_disp,
            )
            if not self.highly_variable_.any():
                raise ValueError(
                    f"highly_variable_genes (flavor={self.flavor!r}) selected no gene "
                    "with these cutoffs; loosen min_mean/min_disp or give n_top_genes"
                )

    # -- new cells ---------------------------------------------------------------------
    def check_genes(self, d: int, names, what: str) -> None:
        """Refuse raw data on other genes than the fitted ones."""
        if d != self.n_genes_in_:
            raise ValueError(
                f"{what} has {d} genes; the model's preparation was fitted on "
                f"{self.n_genes_in_} genes (raw counts, before gene selection)"
            )
        if names is not None and self.gene_names_ is not None:
            names = [str(g) for g in names]
            if names != self.gene_names_:
                bad = next(
                    i
                    for i, (a, b) in enumerate(
                        zip(names, self.gene_names_, strict=True)
                    )
                    if a != b
                )
                raise ValueError(
                    f"{what} has other genes than the fit, or in another order: "
                    f"gene {bad} is {names[bad]!r}, fitted {self.gene_names_[bad]!r}"
                )

    def kept_gene_names(self):
        if self.gene_names_ is None:
            return None
        names = np.asarray(self.gene_names_, dtype=object)
        return names[self._genes]

    # -- storage -----------------------------------------------------------------------
    def to_json(self) -> dict:
        skip = {"gene_mask", *ARRAYS}
        out = {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip
        }
        if out["max_disp"] == float("inf"):
            out["max_disp"] = "inf"
        return out

    def arrays(self) -> dict:
        return {
            name: getattr(self, name)
            for name in ARRAYS
            if getattr(self, name) is not None
        }

    @classmethod
    def from_json(cls, state: dict, arrays: dict) -> CellSteps:
        state = dict(state)
        if state.get("max_disp") == "inf":
            state["max_disp"] = float("inf")
        names = {f.name for f in fields(cls)}
        steps = cls(**{k: v for k, v in state.items() if k in names})
        for name, value in arrays.items():
            setattr(steps, name, np.asarray(value))
        return steps


def _listed(words: list) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


# -- the per-block partials (classes: picklable, and dask tokenizes them by their state)
class _HighCount:
    def __init__(self, max_fraction):
        self.max_fraction = max_fraction

    def __call__(self, x):
        return kernels.count_highly_expressed(x, self.max_fraction)


def _add(a, b):
    return a + b


class _Checked:
    """A pass's block task that also counts what raw counts cannot be."""

    def __init__(self, block):
        self.block = block

    def __call__(self, x):
        return kernels.count_problems(x), self.block(x)


class _CheckedMerge:
    def __init__(self, merge):
        self.merge = merge

    def __call__(self, a, b):
        return a[0] + b[0], self.merge(a[1], b[1])


class _FirstPass:
    """With ``totals``, the counts of each cell (over the genes ``keep``) and, with
    ``sums`` (seurat_v3), per gene the sum and the sum of squares of the raw counts
    ((2, d) float64)."""

    def __init__(self, keep, *, totals: bool, sums: bool):
        self.keep, self.totals, self.sums = keep, totals, sums

    def __call__(self, x):
        x = kernels.as_csr64(x)
        out = {}
        if self.totals:
            out["totals"] = kernels.cell_totals(x, self.keep)
        if self.sums:
            d = x.shape[1]
            out["sums"] = np.stack(
                [
                    np.bincount(x.indices, weights=x.data, minlength=d),
                    np.bincount(x.indices, weights=x.data**2, minlength=d),
                ]
            )
        return out


def _concat_cell_counts(a: dict, b: dict) -> dict:
    """Cells' counts of consecutive blocks in order (the tree merges left to right);
    sums."""
    out = {}
    if "totals" in a:
        out["totals"] = np.concatenate([a["totals"], b["totals"]])
    if "sums" in a:
        out["sums"] = a["sums"] + b["sums"]
    return out


class _GeneMoments:
    """Per-gene moments of the normalised log block (and of its expm1, for seurat;
    the raw counts' clipped sums for seurat_v3)."""

    def __init__(self, steps: CellSteps, clip=None):
        self.target, self.keep, self.log = steps._target, steps.keep_genes_, steps.log1p
        self.with_expm1, self.clip = steps._seurat, clip

    def __call__(self, x):
        y = kernels.normalize_log_block(
            x, target_sum=self.target, keep=self.keep, log=self.log
        )
        out = (_block_moments_sparse(y, with_gram=False),)
        if self.with_expm1:
            e = sp.csr_matrix((np.expm1(y.data), y.indices, y.indptr), shape=y.shape)
            out += (_block_moments_sparse(e, with_gram=False),)
        if self.clip is not None:
            out += (kernels.clipped_sums(x, self.clip),)
        return out  # a tuple: the tree's fold flattens lists


def _merge_pairs(a, b):
    return tuple(
        p + q if isinstance(p, np.ndarray) else merge_moments(p, q)
        for p, q in zip(a, b, strict=True)
    )


# -- raw counts in, the prepared matrix out --------------------------------------------
def raw_counts(X, *, layer: str | None = None, chunks=None, cells=None):
    """Raw counts as ``open_anndata`` reads them: an AnnData (object, view or store
    path) as a lazy DataArray over (obs, var); arrays (NumPy, SciPy sparse, dask) and
    DataArrays as they are. ``cells`` (a boolean mask over the rows) keeps those
    cells, lazily: a store is read only there, an object through its view, an array
    as dask row blocks indexed. Anything else is refused by kind, before any read."""
    import os

    import xarray as xr

    from .._validation import is_sparse
    from ..io._anndata import is_anndata, is_anndata_object, open_anndata_subset

    if is_anndata_object(X) or (isinstance(X, (str, os.PathLike)) and is_anndata(X)):
        return open_anndata_subset(X, cells=cells, layer=layer, chunks=chunks)
    if isinstance(X, xr.DataArray) and X.dims != ("obs", "var"):
        raise ValueError(
            f"a DataArray of dims {X.dims}: single-cell counts are a matrix "
            "over ('obs', 'var') (an AnnData's, as open_matrix reads it)"
        )
    if isinstance(X, (np.ndarray, da.Array, xr.DataArray)) or is_sparse(X):
        if getattr(X, "ndim", 2) != 2:
            raise ValueError(
                f"counts must be a 2-D matrix (cells × genes); got shape {X.shape}"
            )
        if cells is None:
            return X
        return _rows_of(X, cells)
    what = f"a {type(X).__name__}"
    if isinstance(X, (str, os.PathLike)):
        what = f"the path {os.fspath(X)!r}, which is no AnnData store"
    raise TypeError(
        f"single-cell counts are read from an AnnData (object, .zarr or .h5ad "
        f"store) or an array (NumPy, SciPy sparse, dask); got {what}"
    )


def _as_blocks(X) -> da.Array:
    """Counts as a dask array: a DataArray's data, a dask array as it is, a sparse
    matrix as CSR row blocks, anything else as one dense block."""
    import xarray as xr

    from .._validation import as_csr_blocks, is_sparse

    if isinstance(X, xr.DataArray):
        X = X.data
    if isinstance(X, da.Array):
        return X
    if is_sparse(X):
        return as_csr_blocks(X)
    return da.from_array(np.asarray(X), chunks=(-1, -1))


def _rows_of(X, cells):
    """The rows ``cells`` (boolean mask) of an array or DataArray, as lazy row blocks
    of the original blocks' size (dask gathers the rows of each block)."""
    import xarray as xr

    arr = _as_blocks(X)
    block = arr.chunks[0][0]
    out = arr[np.flatnonzero(cells)]
    if out.chunks[0] and out.chunks[0][0] != block:
        out = out.rechunk({0: block})
    if isinstance(X, xr.DataArray):
        rows = np.flatnonzero(cells)
        coords = {
            c: X.coords[c]
            if "obs" not in X.coords[c].dims
            else X.coords[c].isel(obs=rows)
            for c in X.coords
        }
        return xr.DataArray(out, dims=X.dims, coords=coords, name=X.name)
    return out
