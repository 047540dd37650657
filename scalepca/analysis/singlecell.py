"""scanpy's ``normalize_total → log1p → highly_variable_genes → scale → pca`` on raw counts in
a few passes, with the results written where scanpy writes them (``scalepca.pp.pca``).

The counts are never rewritten: the steps run inside the passes
(:mod:`scalepca.preprocessing._singlecell`) and are owned by the fitted PCA, whose
``transform`` of new raw counts repeats them. Passes over the counts, with ``target_sum=None``
(the median) and highly variable genes: counts per cell (1), per-gene moments (1), the
covariance of the prepared genes (1), the scores written to ``obsm["X_pca"]`` (1): 4; one
fewer with a given ``target_sum``, one more with ``exclude_highly_expressed``.
"""

from __future__ import annotations

import numpy as np

from ..preprocessing._singlecell import CellSteps, raw_counts

__all__ = ["check_step_keys", "pca", "prepared_matrix"]

#: the keys of the steps (a config's ``data.singlecell``), with their types
STEP_KEYS = {"normalize_total": bool, "target_sum": (int, float, type(None)),
             "exclude_highly_expressed": bool, "max_fraction": (int, float), "log1p": bool,
             "flavor": (str, type(None)), "n_top_genes": (int, type(None)),
             "min_mean": (int, float), "max_mean": (int, float), "min_disp": (int, float),
             "max_disp": (int, float), "n_bins": int, "scale": bool,
             "max_value": (int, float, type(None))}

_DEFAULT = object()

NO_UNCENTRED_AFTER_SCALE = (
    "zero_center=False cannot follow scale=True: the scaled genes are centred, so the "
    "uncentred PCA of them is the centred one of a dense matrix; leave zero_center=True")


def check_step_keys(steps: dict, where: str) -> str | None:
    """Why the mapping ``steps`` cannot be the steps' keywords (None: it can)."""
    import difflib

    for key, value in steps.items():
        if key not in STEP_KEYS:
            close = difflib.get_close_matches(key, STEP_KEYS, n=1)
            return (f"'{where}.{key}' is not a step" + (f"; did you mean {close[0]!r}?"
                                                         if close else "")
                    + f" (allowed: {', '.join(STEP_KEYS)})")
        kind = STEP_KEYS[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            return f"'{where}.{key}' has the wrong type: {value!r}"
    flavor = steps.get("flavor")
    if flavor is not None and flavor not in ("seurat", "cell_ranger", "seurat_v3"):
        return f"'{where}.flavor' is {flavor!r}; allowed: seurat, cell_ranger, seurat_v3"
    return None


def _steps_of(keys: dict, mask=None) -> CellSteps:
    keys = dict(keys)
    return CellSteps(normalize=keys.pop("normalize_total", False),
                     log1p=keys.pop("log1p", False), flavor=keys.pop("flavor", None),
                     scale=keys.pop("scale", False), gene_mask=mask, **keys)


def prepared_matrix(data, steps: dict, *, layer=None, chunks=None):
    """The matrix an estimator fits from the raw counts ``data`` (AnnData object or store)
    after the single-cell ``steps`` (``pp.pca``'s keywords), which are fitted here (their
    passes) and carried by the matrix, so the fitted model owns and repeats them. A
    ``highly_variable`` column of ``var`` selects the genes when no flavour does."""
    raw = raw_counts(data, layer=layer, chunks=chunks)
    var = _var_frame(data)
    _, mask = _gene_mask(var, _DEFAULT, steps.get("flavor"))
    cells = _steps_of(steps, mask)
    cells.check(raw.shape[1])
    return _prepared(raw, cells, var, layer)


def _prepared(raw, steps: CellSteps, var, layer):
    from ..preprocessing._steps import Preprocessing

    steps.fit(_dask_blocks(raw), gene_names=None if var is None else var.index)
    prep = Preprocessing(variable=layer or "X", dims=("obs", "var"), sample_dims=("obs",),
                         feature_dims=("var",), cells=steps)
    return prep.prepare(raw)


def _refuse_view(data) -> None:
    from ..io._anndata import is_anndata_object

    if is_anndata_object(data) and data.is_view:
        raise ValueError("pca writes into the AnnData; give a copy of the view "
                         "(adata[cells, genes].copy()) or its parent")


def _gene_mask(var, mask_var, hvg_flavor):
    """``(mask param as scanpy records it, boolean mask or None)``: scanpy's rule, a
    ``highly_variable`` column of ``var`` is used when present unless told otherwise."""
    if mask_var is _DEFAULT:
        mask_var = ("highly_variable" if hvg_flavor is None and var is not None
                    and "highly_variable" in var.columns else None)
    if mask_var is None:
        return None, None
    if isinstance(mask_var, str):
        if var is None or mask_var not in var.columns:
            raise KeyError(f"mask_var={mask_var!r}: no such column in var")
        return mask_var, np.asarray(var[mask_var], dtype=bool)
    return "mask", np.asarray(mask_var, dtype=bool)


def pca(data, n_comps: int | None = None, *, layer: str | None = None,
        zero_center: bool = True, svd_solver: str = "auto", random_state=0,
        mask_var=_DEFAULT, normalize_total: bool = False, target_sum: float | None = None,
        exclude_highly_expressed: bool = False, max_fraction: float = 0.05,
        log1p: bool = False, flavor: str | None = None, n_top_genes: int | None = None,
        min_mean: float = 0.0125, max_mean: float = 3.0, min_disp: float = 0.5,
        max_disp: float = float("inf"), n_bins: int = 20, scale: bool = False,
        max_value: float | None = None, chunks=None, dtype="float32"):
    """PCA of an AnnData (object, view or ``.zarr``/``.h5ad`` store), scanpy's way, with
    scanpy's preprocessing steps done inside the passes.

    Writes ``obsm["X_pca"]`` (cells × n_comps, ``dtype``), ``varm["PCs"]`` (genes × n_comps,
    zeros for genes left out), ``uns["pca"]`` (``variance``, ``variance_ratio``, ``params``,
    and ``scalepca`` with the passes made) and, when ``flavor`` selects highly variable genes,
    ``var["highly_variable"]``, ``means``, ``dispersions``, ``dispersions_norm`` and
    ``uns["hvg"]`` — into the AnnData object, or into the store without rewriting ``X``.

    Parameters
    ----------
    data : anndata.AnnData or str or path, or an array
        Raw counts in ``X`` (or ``layer``) when steps are asked for; else the matrix to analyse.
        An array (NumPy, SciPy sparse, dask) is analysed the same way and nothing is written.
    n_comps : int, optional
        As scanpy: 50, or one less than the smaller side when that is at most 50.
    mask_var : str, array of bool or None
        Genes to use. By default ``var["highly_variable"]`` when present (as scanpy does) and
        no ``flavor`` is given.
    normalize_total, target_sum, exclude_highly_expressed, max_fraction
        ``sc.pp.normalize_total``'s (``target_sum=None``: the median of the cells' counts).
    log1p : bool
        ``sc.pp.log1p`` (natural log).
    flavor, n_top_genes, min_mean, max_mean, min_disp, max_disp, n_bins
        ``sc.pp.highly_variable_genes``'s, ``flavor`` ``"seurat"``, ``"cell_ranger"`` (on
        the log data) or ``"seurat_v3"`` (on the raw counts, ``n_top_genes`` default 2000;
        needs scikit-misc), None: no selection.
    scale, max_value
        ``sc.pp.scale`` (unit variance, centred; clipped to ``±max_value``), kept sparse.
    zero_center, svd_solver, random_state
        Of the PCA (:class:`scalepca.PCA`); ``zero_center=False`` cannot follow ``scale``.

    Returns
    -------
    scalepca.PCA
        The fitted model; its ``transform`` takes raw counts of new cells.
    """
    _refuse_view(data)
    raw = raw_counts(data, layer=layer, chunks=chunks)
    var = _var_frame(data)
    param, mask = _gene_mask(var, mask_var, flavor)
    if scale and not zero_center:
        raise ValueError(NO_UNCENTRED_AFTER_SCALE)
    steps = CellSteps(normalize=normalize_total, target_sum=target_sum,
                      exclude_highly_expressed=exclude_highly_expressed,
                      max_fraction=max_fraction, log1p=log1p, flavor=flavor,
                      n_top_genes=n_top_genes, min_mean=min_mean, max_mean=max_mean,
                      min_disp=min_disp, max_disp=max_disp, n_bins=n_bins, scale=scale,
                      max_value=max_value, gene_mask=mask)
    steps.check(raw.shape[1])
    model, scores = _fit(raw, steps, var, layer, n_comps, dtype,
                         dict(svd_solver=svd_solver, zero_center=zero_center,
                              random_state=random_state))
    pcs = np.zeros((raw.shape[1], model.n_components_))
    genes = steps.highly_variable_
    pcs[slice(None) if genes is None else genes] = model.components_.T
    uns = {"params": {"zero_center": zero_center,
                      "use_highly_variable": param == "highly_variable",
                      "mask_var": param},
           "variance": model.explained_variance_,
           "variance_ratio": model.explained_variance_ratio_,
           "scalepca": {"n_passes": int(steps.n_passes_ + model.n_passes_ + 1),
                        "n_passes_preprocessing": int(steps.n_passes_),
                        "n_passes_fit": int(model.n_passes_), "n_passes_scores": 1}}
    if param is None:
        del uns["params"]["mask_var"]
    model.singlecell_n_passes_ = uns["scalepca"]["n_passes"]
    _write(data, scores, pcs, uns, _hvg_columns(steps, flavor), flavor)
    return model


def _fit(raw, steps: CellSteps, var, layer, n_comps, dtype, pca_params):
    """Fit the steps (their passes), then PCA on the prepared matrix (its pass); the lazy
    scores in ``dtype``."""
    import xarray as xr

    from ..models.pca import PCA

    matrix = _prepared(raw, steps, var, layer)
    if n_comps is None:  # scanpy's default
        small = min(matrix.shape)
        n_comps = small - 1 if small <= 50 else 50
    model = PCA(n_comps, **pca_params).fit(matrix)
    scores = model.transform(matrix)
    return model, (scores.data if isinstance(scores, xr.DataArray) else scores).astype(dtype)


def _hvg_columns(steps: CellSteps, flavor) -> dict | None:
    """The ``var`` columns scanpy's highly_variable_genes writes for ``flavor``."""
    if flavor == "seurat_v3":
        return {"highly_variable": steps.highly_variable_,
                "highly_variable_rank": steps.highly_variable_rank_, "means": steps.means_,
                "variances": steps.variances_, "variances_norm": steps.variances_norm_}
    if flavor is not None:
        return {"highly_variable": steps.highly_variable_, "means": steps.means_,
                "dispersions": steps.dispersions_, "dispersions_norm": steps.dispersions_norm_}
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


def _dask_blocks(raw):
    import dask.array as da
    import xarray as xr

    from ..preprocessing._singlecell import _as_blocks

    arr = raw.data if isinstance(raw, xr.DataArray) else raw
    return arr if isinstance(arr, da.Array) else _as_blocks(arr)


def _write(data, scores, pcs, uns, hvg, flavor) -> None:
    from ..io._anndata import is_anndata_object

    if not (is_anndata_object(data) or _is_store(data)):
        return  # an array: the fitted model is the result

    if is_anndata_object(data):
        import dask

        (data.obsm["X_pca"],) = dask.compute(scores)
        data.varm["PCs"] = pcs
        data.uns["pca"] = uns
        if hvg is not None:
            for k, v in hvg.items():
                data.var[k] = v
            data.uns["hvg"] = {"flavor": flavor}
        return
    from ..io._anndata_write import write_results

    write_results(data, scores, pcs, uns, hvg, flavor)
