"""Subsets of cells and genes in ``scalepca.pp.pca`` (issue 36 item 5): views
(``adata[cells, genes]`` of an AnnData in memory, backed by an ``.h5ad`` file or read
lazily) and ``mask_obs`` / ``mask_var`` on objects and ``.zarr``/``.h5ad`` stores, read
where they lie.

The reference is scanpy's in-memory pipeline on the copy of the subset
(``adata[cells, genes].copy()``): library sizes over the subset's genes, gene
statistics over its cells. scanpy is needed (the subsets' references are not stored).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import scalepca

from .fixtures.make_scanpy_pipeline import counts

sc = pytest.importorskip("scanpy")
anndata = pytest.importorskip("anndata")

N_COMPS = 10
STEPS = dict(
    normalize_total=True,
    log1p=True,
    flavor="seurat",
    n_top_genes=100,
    scale=True,
    max_value=10,
)


def min_abs_corr(a, b):
    return min(abs(np.corrcoef(a[:, k], b[:, k])[0, 1]) for k in range(a.shape[1]))


@pytest.fixture(scope="module")
def cells_genes():
    """An AnnData of the synthetic counts with a cell column ``keep`` (about 60 %)
    and a gene mask (about 80 %)."""
    X = sp.csr_matrix(counts().compute(), dtype=np.float64)
    a = anndata.AnnData(X)
    a.obs_names = [f"c{i}" for i in range(a.n_obs)]
    a.var_names = [f"g{j}" for j in range(a.n_vars)]
    rng = np.random.default_rng(0)
    a.obs["keep"] = rng.random(a.n_obs) < 0.6
    genes = rng.random(a.n_vars) < 0.8
    return a, a.obs["keep"].to_numpy(), genes


def scanpy_on_copy(sub):
    """scanpy's pipeline on the in-memory copy of a subset."""
    r = anndata.AnnData(sp.csr_matrix(sub.X, dtype=np.float64))
    sc.pp.normalize_total(r)
    sc.pp.log1p(r)
    sc.pp.highly_variable_genes(r, n_top_genes=STEPS["n_top_genes"])
    sc.pp.scale(r, max_value=STEPS["max_value"])
    sc.pp.pca(r, n_comps=N_COMPS, svd_solver="arpack")
    return r


def check_equal(model, written, ref, cells=None):
    """The model and the AnnData it wrote equal scanpy's results on the copy: the
    same highly variable genes, variance ratios to 1e-8, |corr| of the PCs to 1e-8,
    the cells' scores (in float32, as scanpy's) to 1e-6, NaN for the cells left out."""
    steps = model._preprocessing.cells
    hv = ref.var["highly_variable"].to_numpy()
    np.testing.assert_array_equal(steps.highly_variable_, hv)
    np.testing.assert_array_equal(written.var["highly_variable"].to_numpy(), hv)
    np.testing.assert_allclose(
        written.uns["pca"]["variance_ratio"],
        ref.uns["pca"]["variance_ratio"],
        rtol=1e-8,
    )
    np.testing.assert_allclose(
        model.explained_variance_, ref.uns["pca"]["variance"], rtol=1e-8
    )
    assert (
        1 - min_abs_corr(np.asarray(written.varm["PCs"])[hv], ref.varm["PCs"][hv])
        < 1e-8
    )
    scores = np.asarray(written.obsm["X_pca"], dtype=np.float64)
    if cells is not None:
        assert np.isnan(scores[~cells]).all()
        scores = scores[cells]
    assert np.isfinite(scores).all()
    assert 1 - min_abs_corr(scores, ref.obsm["X_pca"].astype(np.float64)) < 1e-6


@pytest.fixture(scope="module")
def stores(cells_genes, tmp_path_factory):
    a, _, _ = cells_genes
    folder = tmp_path_factory.mktemp("subsets")
    a.write_h5ad(folder / "cells.h5ad")
    a.write_zarr(folder / "cells.zarr")
    return folder


def _fresh(stores, tmp_path, suffix):
    """A copy of the stored AnnData for one test (pp.pca writes into it)."""
    import shutil

    src = stores / f"cells{suffix}"
    dst = tmp_path / f"cells{suffix}"
    (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    return dst


def _read(path):
    return (
        anndata.read_h5ad(path)
        if str(path).endswith(".h5ad")
        else anndata.read_zarr(path)
    )


@pytest.mark.parametrize("where", ["memory", "backed", "lazy"])
def test_a_view_equals_scanpy_on_its_copy(cells_genes, stores, tmp_path, where):
    """``pp.pca(adata[cells, genes])`` of an AnnData in memory, backed by an .h5ad
    file or read lazily from a .zarr store: scanpy's results on the copy, written
    into the view, which becomes an AnnData of its own (a backed one keeps X in the
    file, as a lazy matrix)."""
    a, cells, genes = cells_genes
    ref = scanpy_on_copy(a[cells, genes])
    if where == "memory":
        parent = a.copy()
    elif where == "backed":
        parent = anndata.read_h5ad(_fresh(stores, tmp_path, ".h5ad"), backed="r")
    else:
        parent = anndata.experimental.read_lazy(_fresh(stores, tmp_path, ".zarr"))
    view = parent[np.flatnonzero(cells), genes]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = scalepca.pp.pca(view, N_COMPS, **STEPS)
    assert not view.is_view
    assert view.n_obs == cells.sum() and view.n_vars == genes.sum()
    check_equal(model, view, ref)
    assert (
        "X_pca" not in parent.obsm and "pca" not in parent.uns
    )  # the parent is untouched
    if where == "memory":  # scanpy copies a view in memory, and says so; so do we
        assert any("view of an AnnData" in str(w.message) for w in caught)
    if where == "backed":  # X stays in the file, read when used
        import dask.array as da

        assert isinstance(view.X, da.Array)
        np.testing.assert_array_equal(
            view.X.compute().toarray(), a[cells, genes].X.toarray()
        )


@pytest.mark.parametrize("where", ["memory", ".h5ad", ".zarr"])
def test_mask_obs_equals_scanpy_on_the_cells_copy(cells_genes, stores, tmp_path, where):
    """``mask_obs`` (a column of obs, booleans or positions) on an object or a store:
    scanpy's results on ``adata[mask].copy()``, written into the object or store in
    place, the other cells' rows of X_pca NaN; X not rewritten."""
    a, cells, _ = cells_genes
    ref = scanpy_on_copy(a[cells])
    if where == "memory":
        target = a.copy()
        model = scalepca.pp.pca(target, N_COMPS, mask_obs="keep", **STEPS)
        written = target
    else:
        path = _fresh(stores, tmp_path, where)
        x_bytes = _read(path).X.toarray()
        model = scalepca.pp.pca(
            str(path), N_COMPS, mask_obs=np.flatnonzero(cells), chunks=100, **STEPS
        )
        written = _read(path)
        np.testing.assert_array_equal(written.X.toarray(), x_bytes)
    check_equal(model, written, ref, cells)
    assert written.uns["pca"]["params"]["mask_obs"] == (
        "keep" if where == "memory" else "mask"
    )
    # the scores written are the model's of those cells (rows in place, not shifted)
    mine = np.asarray(model.transform(a[cells]).data)
    np.testing.assert_allclose(
        np.asarray(written.obsm["X_pca"])[cells], mine, rtol=1e-4, atol=1e-4
    )


def test_mask_var_positions_and_column_are_scanpys(cells_genes):
    """mask_var as positions or a var column: the genes PCA uses after normalisation
    over every gene, as scanpy's ``pca(mask_var=...)``."""
    a, _, genes = cells_genes
    ref = anndata.AnnData(a.X.copy())
    sc.pp.normalize_total(ref)
    sc.pp.log1p(ref)
    ref.var["use"] = genes
    sc.pp.pca(ref, n_comps=N_COMPS, mask_var="use", svd_solver="arpack")
    for mask in (np.flatnonzero(genes), "use"):
        b = a.copy()
        b.var["use"] = genes
        model = scalepca.pp.pca(
            b, N_COMPS, normalize_total=True, log1p=True, mask_var=mask
        )
        np.testing.assert_allclose(
            b.uns["pca"]["variance_ratio"], ref.uns["pca"]["variance_ratio"], rtol=1e-8
        )
        assert model.n_features_in_ == genes.sum()
        assert np.all(b.varm["PCs"][~genes] == 0)
        assert 1 - min_abs_corr(b.varm["PCs"][genes], ref.varm["PCs"][genes]) < 1e-8


def test_results_do_not_depend_on_the_chunking(cells_genes, stores, tmp_path):
    """A cell subset read from a store in blocks of 37 or 500 cells: the same fit and
    scores."""
    _, cells, _ = cells_genes
    out = []
    for rows in (37, 500):
        (tmp_path / str(rows)).mkdir()
        path = _fresh(stores, tmp_path / str(rows), ".zarr")
        model = scalepca.pp.pca(
            str(path), N_COMPS, mask_obs=cells, chunks=rows, **STEPS
        )
        out.append((model, np.asarray(_read(path).obsm["X_pca"])))
    (m1, s1), (m2, s2) = out
    np.testing.assert_allclose(
        m1.explained_variance_, m2.explained_variance_, rtol=1e-12
    )
    np.testing.assert_allclose(
        np.abs(m1.components_), np.abs(m2.components_), atol=1e-12
    )
    np.testing.assert_allclose(
        np.abs(s1), np.abs(s2), rtol=1e-5, atol=1e-5, equal_nan=True
    )


def _no_compute(*args, **kwargs):
    raise AssertionError("computed before the check")


def test_bad_masks_are_refused_before_any_pass(cells_genes, stores, tmp_path):
    import dask

    a, cells, _ = cells_genes
    b = a.copy()
    b.obs["group"] = np.where(cells, "x", "y")
    path = str(_fresh(stores, tmp_path, ".zarr"))
    arr = sp.csr_matrix(a.X)
    with dask.config.set(scheduler=_no_compute):
        with pytest.raises(
            KeyError, match=r"mask_obs='kept': no such column in obs .*keep"
        ):
            scalepca.pp.pca(b, 5, mask_obs="kept")
        with pytest.raises(KeyError, match="no such column in obs"):
            scalepca.pp.pca(path, 5, mask_obs="kept")
        with pytest.raises(
            ValueError, match="the obs column holds object, not booleans"
        ):
            scalepca.pp.pca(b, 5, mask_obs="group")
        with pytest.raises(ValueError, match="a position is repeated"):
            scalepca.pp.pca(b, 5, mask_obs=[0, 1, 1])
        with pytest.raises(ValueError, match=f"3 booleans for {a.n_obs} cells"):
            scalepca.pp.pca(b, 5, mask_obs=np.ones(3, dtype=bool))
        with pytest.raises(ValueError, match="mask_obs selects no cell"):
            scalepca.pp.pca(b, 5, mask_obs=np.zeros(a.n_obs, dtype=bool))
        with pytest.raises(ValueError, match=r"positions must lie in \[0, 400\)"):
            scalepca.pp.pca(arr, 5, mask_var=[0, 400])
        with pytest.raises(ValueError, match="these data have none"):
            scalepca.pp.pca(arr, 5, mask_obs="keep")
    assert "X_pca" not in b.obsm


def test_config_and_cli_take_the_masks(cells_genes, stores, tmp_path, capsys):
    """``data.singlecell.mask_obs`` / ``mask_var`` in a run config and
    ``pp-pca --mask-obs``: the same subset, the same numbers as scanpy on the copy."""
    import yaml

    from scalepca.cli import main

    a, cells, genes = cells_genes
    ref = scanpy_on_copy(a[cells])
    path = _fresh(stores, tmp_path, ".zarr")
    assert (
        main(
            [
                "pp-pca",
                str(path),
                "--n-comps",
                str(N_COMPS),
                "--normalize-total",
                "--log1p",
                "--flavor",
                "seurat",
                "--n-top-genes",
                "100",
                "--scale",
                "--max-value",
                "10",
                "--mask-obs",
                "keep",
                "--n-workers",
                "1",
                "-q",
            ]
        )
        == 0
    )
    written = _read(path)
    check_equal(scalepca.pp.pca(a[cells].copy(), N_COMPS, **STEPS), written, ref, cells)
    steps = dict(STEPS, mask_obs="keep")
    cfg = {
        "data": {"path": str(path), "format": "anndata", "singlecell": steps},
        "model": {
            "method": "pca",
            "n_components": N_COMPS,
            "svd_solver": "covariance_eigh",
        },
        "cluster": {
            "kind": "local",
            "n_workers": 1,
            "threads_per_worker": 1,
            "processes": False,
        },
        "output": {"store": str(tmp_path / "out"), "report": False},
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", str(tmp_path / "run.yaml"), "-q"]) == 0, capsys.readouterr().err
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    np.testing.assert_allclose(
        model.explained_variance_ratio_, ref.uns["pca"]["variance_ratio"], rtol=1e-8
    )
    assert model._preprocessing.cells.n_cells_ == cells.sum()


def test_validate_reads_nothing_and_dense_only_solvers_are_refused_first(
    stores, tmp_path, capsys
):
    """``scalepca validate`` on a ``data.singlecell`` config opens the store and fits
    no step (no dask compute at all), yet checks the estimator for the sparse blocks
    the steps make: ``svd_solver: tsqr`` and PPCA's EM are refused there, and
    ``pp.pca(svd_solver="tsqr")`` before the steps' passes."""
    import dask
    import yaml

    from scalepca.cli import main

    path = str(_fresh(stores, tmp_path, ".zarr"))
    singlecell = {
        "normalize_total": True,
        "log1p": True,
        "flavor": "seurat",
        "n_top_genes": 100,
        "mask_obs": "keep",
    }
    cases = [
        ({"method": "pca", "n_components": 5}, None),
        (
            {"method": "pca", "n_components": 5, "svd_solver": "tsqr"},
            "model.svd_solver: tsqr needs dense blocks",
        ),
        (
            {"method": "ppca", "n_components": 5, "solver": "em"},
            "model.solver: em needs dense blocks",
        ),
    ]
    for i, (model, message) in enumerate(cases):
        cfg = tmp_path / f"sc{i}.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "data": {"path": path, "singlecell": singlecell},
                    "model": model,
                    "output": {"store": str(tmp_path / f"out{i}")},
                }
            )
        )
        capsys.readouterr()
        with dask.config.set(scheduler=_no_compute):
            rc = main(["validate", str(cfg)])
        err = capsys.readouterr().err
        if message is None:
            assert rc == 0, err
        else:
            assert rc == 2 and message in err, err
    with dask.config.set(scheduler=_no_compute):
        with pytest.raises(ValueError, match="svd_solver='tsqr' needs dense blocks"):
            scalepca.pp.pca(path, 5, svd_solver="tsqr", **STEPS)
