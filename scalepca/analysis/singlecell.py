"""scanpy's ``normalize_total → log1p → highly_variable_genes → scale → pca`` on raw
counts in a few passes, with the results written where scanpy writes them
(``scalepca.pp.pca``).

The counts are never rewritten: the steps run inside the passes
(:mod:`scalepca.preprocessing._singlecell`) and are owned by the fitted PCA, whose
``transform`` of new raw counts repeats them. Passes over the counts, with
``target_sum=None`` (the median) and highly variable genes: counts per cell (1),
per-gene moments (1), the covariance of the prepared genes (1), the scores written to
``obsm["X_pca"]`` (1): 4; one fewer with a given ``target_sum``, one more with
``exclude_highly_expressed``.

Subsets of cells and genes are read where they lie, never copied: a view
(``adata[cells, genes]``, in memory, backed or read lazily) or ``mask_obs`` reads
only its cells, a row block per task, and keeps its genes inside the task. A subset
is analysed as scanpy analyses the copy ``adata[cells, genes].copy()``: a cell's
library size is summed over the subset's genes, the genes' statistics over the
subset's cells. ``mask_var`` is scanpy's: the genes the PCA uses, after normalisation
over every gene.
"""

from __future__ import annotations

import numpy as np

from ..preprocessing._singlecell import CellSteps, _as_blocks, raw_counts

__all__ = ["check_step_keys", "pca", "prepared_matrix"]

#: the keys of the steps (a config's ``data.singlecell``), with their types
STEP_KEYS = {
    "normalize_total": bool,
    "target_sum": (int, float, type(None)),
    "exclude_highly_expressed": bool,
    "max_fraction": (int, float),
    "log1p": bool,
    "flavor": (str, type(None)),
    "n_top_genes": (int, type(None)),
    "min_mean": (int, float),
    "max_mean": (int, float),
    "min_disp": (int, float),
    "max_disp": (int, float),
    "n_bins": int,
    "scale": bool,
    "max_value": (int, float, type(None)),
    "mask_obs": (str, type(None)),
    "mask_var": (str, type(None)),
}

_DEFAULT = object()

NO_UNCENTRED_AFTER_SCALE = (
    "zero_center=False cannot follow scale=True: the scaled genes are centred, so the "
    "uncentred PCA of them is the centred one of a dense matrix; leave zero_center=True"
)


def check_step_keys(steps: dict, where: str) -> str | None:
    """Why the mapping ``steps`` cannot be the steps' keywords (None: it can)."""
    from .._schema import did_you_mean

    for key, value in steps.items():
        if key not in STEP_KEYS:
            return (
                f"'{where}.{key}' is not a step{did_you_mean(key, STEP_KEYS)}"
                f" (allowed: {', '.join(STEP_KEYS)})"
            )
        kind = STEP_KEYS[key]
        if not isinstance(value, kind) or (
            isinstance(value, bool) and kind is not bool
        ):
            return f"'{where}.{key}' has the wrong type: {value!r}"
    flavor = steps.get("flavor")
    if flavor is not None and flavor not in ("seurat", "cell_ranger", "seurat_v3"):
        return (
            f"'{where}.flavor' is {flavor!r}; allowed: seurat, cell_ranger, seurat_v3"
        )
    return None


def _steps_of(keys: dict, mask=None) -> CellSteps:
    keys = {k: v for k, v in keys.items() if k not in ("mask_obs", "mask_var")}
    return CellSteps(
        normalize=keys.pop("normalize_total", False),
        log1p=keys.pop("log1p", False),
        flavor=keys.pop("flavor", None),
        scale=keys.pop("scale", False),
        gene_mask=mask,
        **keys,
    )


def prepared_matrix(data, steps: dict, *, layer=None, chunks=None):
    """The matrix an estimator fits from the raw counts ``data`` (AnnData object or
    store) after the single-cell ``steps`` (``pp.pca``'s keywords), which are fitted
    here (their passes) and carried by the matrix, so the fitted model owns and
    repeats them. A ``highly_variable`` column of ``var`` selects the genes when no
    flavour does."""
    _, cells = _cell_mask(data, steps.get("mask_obs"))
    raw = raw_counts(data, layer=layer, chunks=chunks, cells=cells)
    var = _var_frame(data)
    _, mask = _gene_mask(
        var, steps.get("mask_var", _DEFAULT), steps.get("flavor"), raw.shape[1]
    )
    cells = _steps_of(steps, mask)
    cells.check(raw.shape[1])
    return _prepared(raw, cells, var, layer)


def unfitted_matrix(data, steps: dict, *, layer=None, chunks=None):
    """What :func:`prepared_matrix` would hand an estimator, without fitting the
    steps (nothing is read: ``scalepca validate``): the lazy raw counts of the chosen
    cells, cut to as many genes as the steps keep when that is known before their
    passes (``n_top_genes`` of a flavour, else the gene mask, else every gene). Its
    blocks are sparse, as the prepared ones always are."""
    _, cells = _cell_mask(data, steps.get("mask_obs"))
    raw = raw_counts(data, layer=layer, chunks=chunks, cells=cells)
    _, mask = _gene_mask(
        _var_frame(data),
        steps.get("mask_var", _DEFAULT),
        steps.get("flavor"),
        raw.shape[1],
    )
    genes = raw.shape[1] if mask is None else int(mask.sum())
    if steps.get("flavor") is not None and steps.get("n_top_genes") is not None:
        genes = min(genes, int(steps["n_top_genes"]))
    return raw[:, :genes]


def _prepared(raw, steps: CellSteps, var, layer):
    from ..preprocessing._steps import Preprocessing

    steps.fit(
        _as_blocks(raw),
        gene_names=None if var is None else var.index,
        what="X" if layer is None else f"layer {layer!r}",
    )
    prep = Preprocessing(
        variable=layer or "X",
        dims=("obs", "var"),
        sample_dims=("obs",),
        feature_dims=("var",),
        cells=steps,
    )
    return prep.prepare(raw)


def _check_view(data) -> None:
    """Refuse, before any pass, a view the results cannot be written into: anndata
    makes a view of a backed AnnData its own object only with its ``raw`` loaded into
    memory."""
    from ..io._anndata import is_anndata_object

    if (
        is_anndata_object(data)
        and data.is_view
        and data.isbacked
        and data.raw is not None
    ):
        raise ValueError(
            "pca writes into the view, made an AnnData of its own; this view of a "
            "backed AnnData has a .raw, which anndata cannot carry over without "
            "loading it: give the store's path with mask_obs=, or view.to_memory()"
        )


def _make_actual(view) -> None:
    """The view made an AnnData of its own, to hold the results. In memory, a copy,
    as scanpy makes one; of a backed AnnData, whose copy anndata makes only in
    memory, an AnnData whose ``X`` is the view's lazy matrix read from the file
    (nothing is copied)."""
    import warnings

    if view.isbacked:
        from ..io._anndata import view_matrix

        X = view_matrix(view, layer=None, chunks=None).data
        view._init_as_actual(view._mutated_copy(X=X))
        return
    warnings.warn(
        "pca was given a view of an AnnData: the view becomes a copy of its "
        "cells and genes, which holds the results (as scanpy does)",
        UserWarning,
        stacklevel=4,
    )
    view._init_as_actual(view.copy())


def _as_mask(mask, n: int, what: str, unit: str) -> np.ndarray:
    """A boolean mask of length n from booleans or integer positions (no repeats)."""
    arr = np.asarray(mask)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ValueError(f"{what}: {arr.size} booleans for {n} {unit}")
        out = arr
    elif arr.ndim == 1 and np.issubdtype(arr.dtype, np.integer):
        if arr.size and not (-n <= arr.min() and arr.max() < n):
            raise ValueError(f"{what}: positions must lie in [0, {n}) ({n} {unit})")
        out = np.zeros(n, dtype=bool)
        out[arr] = True
        if np.count_nonzero(out) != arr.size:
            raise ValueError(
                f"{what}: a position is repeated; give each of the {unit} once"
            )
    else:
        raise ValueError(
            f"{what}: give booleans (one per {unit[:-1]}), integer positions or a "
            f"column name; got {arr.dtype} of shape {arr.shape}"
        )
    if not out.any():
        raise ValueError(f"{what} selects no {unit[:-1]}")
    return out


def _column(data, axis: str, name: str):
    """Column ``name`` of ``obs`` or ``var`` of an AnnData object or store (only that
    column is read)."""
    from ..io._anndata import _open_root, is_anndata_object

    if is_anndata_object(data):
        frame = getattr(data, axis)
        if name not in frame.columns:
            raise KeyError(
                f"mask_{axis}={name!r}: no such column in {axis} (its columns: "
                f"{', '.join(map(str, frame.columns)) or 'none'})"
            )
        return np.asarray(frame[name])
    if not _is_store(data):
        raise ValueError(
            f"mask_{axis}={name!r} names a column of an AnnData's {axis}; these "
            "data have none: give booleans or positions"
        )
    import anndata

    root = _open_root(data, None)
    try:
        group = root[axis]
        names = [k for k in group.keys() if k != group.attrs.get("_index", "_index")]
        if name not in names:
            raise KeyError(
                f"mask_{axis}={name!r}: no such column in {axis} (its columns: "
                f"{', '.join(sorted(names)) or 'none'})"
            )
        return np.asarray(anndata.io.read_elem(group[name]))
    finally:
        if hasattr(root, "close"):
            root.close()


def _n_cells(data) -> int:
    from ..io._anndata import is_anndata_object

    if is_anndata_object(data):
        return data.n_obs
    return int(raw_counts(data).shape[0])


def _cell_mask(data, mask_obs):
    """``(mask_obs as recorded in uns, boolean mask or None)``."""
    if mask_obs is None:
        return None, None
    if isinstance(mask_obs, str):
        values = _column(data, "obs", mask_obs)
        if values.dtype != bool:
            raise ValueError(
                f"mask_obs={mask_obs!r}: the obs column "
                f"holds {values.dtype}, not booleans"
            )
        return mask_obs, _as_mask(values, values.size, "mask_obs", "cells")
    return "mask", _as_mask(mask_obs, _n_cells(data), "mask_obs", "cells")


def _gene_mask(var, mask_var, hvg_flavor, d: int):
    """``(mask param as scanpy records it, boolean mask or None)``: scanpy's rule, a
    ``highly_variable`` column of ``var`` is used when present unless told otherwise.
    A flavour's genes are that column in scanpy's pipeline (``highly_variable_genes``
    writes it, ``pca`` reads it), chosen in the steps' passes here (no mask yet)."""
    if mask_var is _DEFAULT and hvg_flavor is not None:
        return "highly_variable", None
    if mask_var is _DEFAULT:
        mask_var = (
            "highly_variable"
            if var is not None and "highly_variable" in var.columns
            else None
        )
    if mask_var is None:
        return None, None
    if isinstance(mask_var, str):
        if var is None or mask_var not in var.columns:
            raise KeyError(f"mask_var={mask_var!r}: no such column in var")
        return mask_var, np.asarray(var[mask_var], dtype=bool)
    # the mask as given, as scanpy records it
    return np.asarray(mask_var), _as_mask(mask_var, d, "mask_var", "genes")


def pca(
    data,
    n_comps: int | None = None,
    *,
    layer: str | None = None,
    zero_center: bool = True,
    svd_solver: str = "auto",
    random_state=0,
    mask_var=_DEFAULT,
    mask_obs=None,
    normalize_total: bool = False,
    target_sum: float | None = None,
    exclude_highly_expressed: bool = False,
    max_fraction: float = 0.05,
    log1p: bool = False,
    flavor: str | None = None,
    n_top_genes: int | None = None,
    min_mean: float = 0.0125,
    max_mean: float = 3.0,
    min_disp: float = 0.5,
    max_disp: float = float("inf"),
    n_bins: int = 20,
    scale: bool = False,
    max_value: float | None = None,
    chunks=None,
    dtype="float32",
):
    """PCA of an AnnData (object, view or ``.zarr``/``.h5ad`` store), scanpy's way, with
    scanpy's preprocessing steps done inside the passes.

    Writes ``obsm["X_pca"]`` (cells × n_comps, ``dtype``), ``varm["PCs"]`` (genes ×
    n_comps, zeros for genes left out), ``uns["pca"]`` (``variance``,
    ``variance_ratio``, ``params``, and ``scalepca`` with the passes made) and, when
    ``flavor`` selects highly variable genes, ``var["highly_variable"]``, ``means``,
    ``dispersions``, ``dispersions_norm`` and ``uns["hvg"]`` — into the AnnData object,
    or into the store without rewriting ``X``.

    Parameters
    ----------
    data : AnnData or str or path, or an array
        Raw counts in ``X`` (or ``layer``) when steps are asked for; else the matrix to
        analyse. An array (NumPy, SciPy sparse, dask) is analysed the same way and
        nothing is written.
    n_comps : int, optional
        As scanpy: 50, or one less than the smaller side when that is at most 50.
    mask_var : str, array of bool or int, or None
        Genes the PCA uses (a ``var`` column, booleans or positions), after
        normalisation over every gene, as scanpy's. By default
        ``var["highly_variable"]`` when present (as scanpy does) and no ``flavor`` is
        given.
    mask_obs : str, array of bool or int, or None
        Cells to analyse (an ``obs`` column of booleans, booleans or positions), read
        where they lie: the result is scanpy's on ``adata[mask_obs].copy()``. The other
        cells' rows of ``obsm["X_pca"]`` are NaN; the data are not copied. A view
        (``adata[cells, genes]``) is analysed the same way; it becomes an AnnData of its
        own to hold the results: a copy in memory, as scanpy makes, or, for a view of a
        backed AnnData, one whose ``X`` is the view's lazy matrix, read from the file.
    normalize_total, target_sum, exclude_highly_expressed, max_fraction
        ``sc.pp.normalize_total``'s (``target_sum=None``: the median of the cells'
        counts).
    log1p : bool
        ``sc.pp.log1p`` (natural log).
    flavor, n_top_genes, min_mean, max_mean, min_disp, max_disp, n_bins
        ``sc.pp.highly_variable_genes``'s, ``flavor`` ``"seurat"``, ``"cell_ranger"``
        (on the log data) or ``"seurat_v3"`` (on the raw counts, ``n_top_genes`` default
        2000; needs scikit-misc), None: no selection.
    scale, max_value
        ``sc.pp.scale`` (unit variance, centred; clipped to ``±max_value``), kept
        sparse.
    zero_center, svd_solver, random_state
        Of the PCA (:class:`scalepca.PCA`); ``zero_center=False`` cannot follow
        ``scale``.

    Returns
    -------
    scalepca.PCA
        The fitted model; its ``transform`` takes raw counts of new cells. For AnnData
        input (an object, a view or a store), sets the following fields, as scanpy does:

        ``.obsm["X_pca"]`` : ndarray of shape (n_obs, n_comps)
            The cells' scores (NaN rows for cells left out by ``mask_obs``).
        ``.varm["PCs"]`` : ndarray of shape (n_vars, n_comps)
            The loadings (zeros for genes left out).
        ``.uns["pca"]["variance"]`` : ndarray of shape (n_comps,)
            The variance of each component's scores.
        ``.uns["pca"]["variance_ratio"]`` : ndarray of shape (n_comps,)
            Each component's share of the total variance.
        ``.uns["pca"]["params"]`` : dict
            The parameters as scanpy writes them; ``.uns["pca"]["scalepca"]`` holds the
            passes made.
        ``.var["highly_variable"]`` and ``.uns["hvg"]``
            When ``flavor`` selects highly variable genes, with the ``.var`` columns
            ``means``, ``dispersions`` and ``dispersions_norm``, as
            :func:`scanpy.pp.highly_variable_genes` writes them.

    References
    ----------
    Wolf, F. A., Angerer, P. & Theis, F. J. (2018). SCANPY: large-scale single-cell
    gene expression data analysis. Genome Biology, 19, 15.

    Examples
    --------
    >>> import anndata, numpy as np, scipy.sparse as sp, scalepca
    >>> counts = np.random.default_rng(0).poisson(1.0, (200, 50)).astype("float32")
    >>> adata = anndata.AnnData(sp.csr_matrix(counts))                 # cells × genes
    >>> model = scalepca.pp.pca(adata, n_comps=5, normalize_total=True, log1p=True)
    >>> adata.obsm["X_pca"].shape, adata.varm["PCs"].shape
    ((200, 5), (50, 5))
    >>> adata.uns["pca"]["variance_ratio"].shape
    (5,)
    """
    _check_view(data)
    # the steps hand the fit CSR blocks: refused before their passes
    if svd_solver == "tsqr":
        raise ValueError(
            "svd_solver='tsqr' needs dense blocks, and scalepca.pp.pca hands the "
            "fit sparse (CSR) blocks; use svd_solver='covariance_eigh' or "
            "'randomized' (or 'auto')"
        )
    obs_param, cells = _cell_mask(data, mask_obs)
    raw = raw_counts(data, layer=layer, chunks=chunks, cells=cells)
    var = _var_frame(data)
    param, mask = _gene_mask(var, mask_var, flavor, raw.shape[1])
    if scale and not zero_center:
        raise ValueError(NO_UNCENTRED_AFTER_SCALE)
    steps = CellSteps(
        normalize=normalize_total,
        target_sum=target_sum,
        exclude_highly_expressed=exclude_highly_expressed,
        max_fraction=max_fraction,
        log1p=log1p,
        flavor=flavor,
        n_top_genes=n_top_genes,
        min_mean=min_mean,
        max_mean=max_mean,
        min_disp=min_disp,
        max_disp=max_disp,
        n_bins=n_bins,
        scale=scale,
        max_value=max_value,
        gene_mask=mask,
    )
    steps.check(raw.shape[1])
    model, scores = _fit(
        raw,
        steps,
        var,
        layer,
        n_comps,
        dtype,
        dict(svd_solver=svd_solver, zero_center=zero_center, random_state=random_state),
    )
    pcs = np.zeros((raw.shape[1], model.n_components_))
    genes = steps.highly_variable_
    if genes is None:  # every gene
        genes = slice(None)
    pcs[genes] = model.components_.T
    uns = _uns(model, steps, zero_center, param, obs_param, layer)
    model.singlecell_n_passes_ = uns["scalepca"]["n_passes"]
    _write(data, scores, pcs, uns, _hvg_columns(steps, flavor), flavor, cells)
    return model


def _uns(model, steps: CellSteps, zero_center: bool, mask_var, mask_obs, layer) -> dict:
    """``uns["pca"]`` as scanpy writes it (``params``, ``variance``,
    ``variance_ratio``), with the cells' mask when one was given and the passes made."""
    params = {
        "zero_center": zero_center,
        "use_highly_variable": isinstance(mask_var, str)
        and mask_var == "highly_variable",
        "mask_var": mask_var,
    }
    if layer is not None:
        params["layer"] = layer
    if mask_obs is not None:
        params["mask_obs"] = mask_obs
    return {
        "params": params,
        "variance": model.explained_variance_,
        "variance_ratio": model.explained_variance_ratio_,
        "scalepca": {
            "n_passes": int(steps.n_passes_ + model.n_passes_ + 1),
            "n_passes_preprocessing": int(steps.n_passes_),
            "n_passes_fit": int(model.n_passes_),
            "n_passes_scores": 1,
        },
    }


def _fit(raw, steps: CellSteps, var, layer, n_comps, dtype, pca_params):
    """Fit the steps (their passes), then PCA on the prepared matrix (its pass); the
    lazy scores in ``dtype``."""
    import xarray as xr

    from ..models.pca import PCA

    matrix = _prepared(raw, steps, var, layer)
    if n_comps is None:  # scanpy's default: 50, or one less than the smaller side
        n_comps = min(50, min(matrix.shape) - 1)
    model = PCA(n_comps, **pca_params).fit(matrix)
    scores = model.transform(matrix)
    if isinstance(scores, xr.DataArray):
        scores = scores.data
    return model, scores.astype(dtype)


def _hvg_columns(steps: CellSteps, flavor) -> dict | None:
    """The ``var`` columns scanpy's highly_variable_genes writes for ``flavor``."""
    if flavor == "seurat_v3":
        return {
            "highly_variable": steps.highly_variable_,
            "highly_variable_rank": steps.highly_variable_rank_,
            "means": steps.means_,
            "variances": steps.variances_,
            "variances_norm": steps.variances_norm_,
        }
    if flavor is not None:
        return {
            "highly_variable": steps.highly_variable_,
            "means": steps.means_,
            "dispersions": steps.dispersions_,
            "dispersions_norm": steps.dispersions_norm_,
        }
    return None


def _is_store(data) -> bool:
    import os

    from ..io._anndata import is_anndata

    return isinstance(data, (str, os.PathLike)) and is_anndata(data)


def _var_frame(data):
    """The ``var`` table (genes), small: from the object, or read from the store."""
    from ..io._anndata import _open_root, is_anndata_object

    if is_anndata_object(data):
        return data.var
    if _is_store(data):
        import anndata

        root = _open_root(data, None)
        try:
            return anndata.io.read_elem(root["var"])
        finally:
            if hasattr(root, "close"):
                root.close()
    return None


def _write(data, scores, pcs, uns, hvg, flavor, cells) -> None:
    from ..io._anndata import is_anndata_object

    if not (is_anndata_object(data) or _is_store(data)):
        return  # an array: the fitted model is the result

    if is_anndata_object(data):
        import dask

        if data.is_view:
            _make_actual(data)
        (values,) = dask.compute(scores)
        if cells is not None:  # the other cells' rows: NaN
            values, sub = (
                np.full((cells.size, values.shape[1]), np.nan, values.dtype),
                values,
            )
            values[cells] = sub
        data.obsm["X_pca"] = values
        data.varm["PCs"] = pcs
        data.uns["pca"] = uns
        if hvg is not None:
            for k, v in hvg.items():
                data.var[k] = v
            data.uns["hvg"] = {"flavor": flavor}
        return
    from ..io._anndata_write import write_results

    write_results(
        data,
        scores if cells is None else _scatter_rows(scores, cells),
        pcs,
        uns,
        hvg,
        flavor,
    )


def _scatter_rows(scores, cells):
    """The lazy scores of the cells ``cells`` (mask) placed in rows of every cell,
    NaN for the others, a block of the store's rows per task."""
    import dask.array as da

    block = max(scores.chunks[0])
    starts = np.arange(0, cells.size, block)
    counts = tuple(int(c) for c in np.add.reduceat(cells.astype(np.int64), starts))
    sub = scores.rechunk({0: counts, 1: -1})
    mask = da.from_array(cells[:, None], chunks=(block, 1))
    out = da.blockwise(
        _scatter_block,
        "ij",
        mask,
        "ij",
        sub,
        "ij",
        dtype=scores.dtype,
        align_arrays=False,
        concatenate=True,
        meta=np.empty((0, 0), dtype=scores.dtype),
    )
    return da.Array(
        out.dask, out.name, (mask.chunks[0], (scores.shape[1],)), meta=out._meta
    )


def _scatter_block(mask, sub):
    out = np.full((mask.shape[0], sub.shape[1]), np.nan, dtype=sub.dtype)
    out[mask[:, 0]] = sub
    return out
