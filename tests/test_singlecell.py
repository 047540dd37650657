"""scanpy's pipeline inside the passes (``scalepca.pp.pca``, the single-cell steps of
``preprocessing/_singlecell.py`` and their kernels in ``linalg/singlecell.py``).

The reference is scanpy's in-memory pipeline — ``normalize_total``, ``log1p``,
``highly_variable_genes``, ``scale``, ``pca(svd_solver="arpack")`` — run live when
scanpy is installed, else read from ``fixtures/scanpy_pipeline.npz`` (written by
``fixtures/make_scanpy_pipeline.py`` with scanpy 1.11.5 on the same synthetic
counts).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import dask
import numpy as np
import pytest
import scipy.sparse as sp

import scalepca
from scalepca.linalg import singlecell as kernels

from .fixtures.make_scanpy_pipeline import CONFIGS, N_COMPS, counts, scanpy_pipeline

FIXTURE = Path(__file__).parent / "fixtures" / "scanpy_pipeline.npz"
HAVE_SCANPY = importlib.util.find_spec("scanpy") is not None


@pytest.fixture(scope="module")
def raw():
    return counts()


def reference(name, X):
    """scanpy's results for configuration ``name``: live, or the stored fixture."""
    if HAVE_SCANPY:
        norm, hvg, mv = CONFIGS[name]
        a = scanpy_pipeline(X.compute(), norm, hvg, mv)
        return {
            "highly_variable": a.var["highly_variable"].to_numpy(),
            "variance": np.asarray(a.uns["pca"]["variance"]),
            "variance_ratio": np.asarray(a.uns["pca"]["variance_ratio"]),
            "PCs": np.asarray(a.varm["PCs"]),
            "X_pca": np.asarray(a.obsm["X_pca"]),
        }
    with np.load(FIXTURE) as f:
        return {k.split("/", 1)[1]: f[k] for k in f.files if k.startswith(name + "/")}


def ours(name, X, **kw):
    norm, hvg, mv = CONFIGS[name]
    return scalepca.pp.pca(
        X,
        N_COMPS,
        normalize_total=True,
        log1p=True,
        scale=True,
        max_value=mv,
        **norm,
        **hvg,
        **kw,
    )


def min_abs_corr(a, b):
    return min(abs(np.corrcoef(a[:, k], b[:, k])[0, 1]) for k in range(a.shape[1]))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_pipeline_equals_scanpys(raw, name):
    ref = reference(name, raw)
    model = ours(name, raw)
    steps = model._preprocessing.cells
    np.testing.assert_array_equal(steps.highly_variable_, ref["highly_variable"])
    np.testing.assert_allclose(
        model.explained_variance_ratio_, ref["variance_ratio"], rtol=1e-8
    )
    np.testing.assert_allclose(model.explained_variance_, ref["variance"], rtol=1e-8)
    hv = ref["highly_variable"]
    assert 1 - min_abs_corr(model.components_.T, ref["PCs"][hv]) < 1e-8
    scores = np.asarray(model.transform(raw))
    assert (
        1 - min_abs_corr(scores, ref["X_pca"].astype(np.float64)) < 1e-6
    )  # float32 X_pca


@pytest.mark.parametrize(
    ("name", "passes"),
    [("seurat", 2), ("seurat_clip_exclude", 3), ("cell_ranger_clip", 1)],
)
def test_passes_of_the_pipeline(raw, name, passes):
    """The steps' passes: counts per cell (target_sum=None), highly expressed genes
    (exclude_highly_expressed), per-gene moments; then one for the covariance."""
    model = ours(name, raw)
    assert model._preprocessing.cells.n_passes_ == passes
    assert model.n_passes_ == 1
    assert model.singlecell_n_passes_ == passes + 2  # and the scores


@pytest.mark.parametrize("n_top_genes", [50, 120])
def test_seurat_v3_on_raw_counts_equals_scanpys(raw, n_top_genes):
    """seurat_v3 ranks genes from the raw counts (a LOESS curve between two passes,
    the second fused with the gene moments): the same genes as scanpy's, then the
    pipeline."""
    sc = pytest.importorskip("scanpy")
    anndata = pytest.importorskip("anndata")
    pytest.importorskip("skmisc")
    ref = anndata.AnnData(sp.csr_matrix(raw.compute()))
    sc.pp.highly_variable_genes(ref, flavor="seurat_v3", n_top_genes=n_top_genes)
    sc.pp.normalize_total(ref)
    sc.pp.log1p(ref)
    sc.pp.scale(ref, max_value=10)
    sc.pp.pca(ref, n_comps=N_COMPS, svd_solver="arpack")
    model = scalepca.pp.pca(
        raw,
        N_COMPS,
        normalize_total=True,
        log1p=True,
        flavor="seurat_v3",
        n_top_genes=n_top_genes,
        scale=True,
        max_value=10,
    )
    steps = model._preprocessing.cells
    np.testing.assert_array_equal(steps.highly_variable_, ref.var["highly_variable"])
    np.testing.assert_allclose(
        steps.variances_norm_, ref.var["variances_norm"], rtol=1e-12
    )
    np.testing.assert_allclose(
        model.explained_variance_ratio_, ref.uns["pca"]["variance_ratio"], rtol=1e-8
    )
    hv = ref.var["highly_variable"].to_numpy()
    assert 1 - min_abs_corr(model.components_.T, ref.varm["PCs"][hv]) < 1e-8
    assert (
        steps.n_passes_ == 2
    )  # counts per cell with the raw sums; moments with clipped sums


def test_scaling_stays_sparse_and_is_the_scaled_matrix_less_a_constant():
    rng = np.random.default_rng(0)
    y = sp.random(50, 7, density=0.3, random_state=1, format="csr") * 5
    dense = y.toarray()
    mean, std = dense.mean(0), dense.std(0, ddof=1)
    for mv in (None, 0.7, 3.0):
        z = (dense - mean) / std
        if mv is not None:
            z = np.clip(z, -mv, mv)
        s = kernels.scale_block(
            y, cols=None, mean=mean, std=std, max_value=mv, zero_center=True
        )
        assert sp.issparse(s) and s.nnz == y.nnz
        a = kernels.scale_offset(mean, std, max_value=mv, zero_center=True)
        np.testing.assert_allclose(s.toarray() + a, z, atol=1e-13)
    cols = rng.random(7) < 0.6
    s = kernels.scale_block(
        y, cols=cols, mean=mean[cols], std=std[cols], max_value=1.0, zero_center=False
    )
    np.testing.assert_allclose(s.toarray(), np.minimum(dense[:, cols] / std[cols], 1.0))


def test_transform_of_new_cells_repeats_the_steps_and_survives_save_load(raw, tmp_path):
    model = ours("seurat_clip_exclude", raw[:600])
    new = raw[600:]
    scores = np.asarray(model.transform(new))
    steps = model._preprocessing.cells
    prepared = steps.block(new.compute())  # the steps by hand, from the stored numbers
    np.testing.assert_allclose(
        scores, (prepared.toarray() - model.mean_) @ model.components_.T, atol=1e-10
    )
    model.save(tmp_path / "m.zarr")
    loaded = scalepca.load(tmp_path / "m.zarr")
    np.testing.assert_array_equal(np.asarray(loaded.transform(new)), scores)
    assert loaded._preprocessing.cells.target_sum_ == steps.target_sum_
    with pytest.raises(ValueError, match="400 genes"):
        model.transform(raw[:10, :300])


def test_refusals_before_any_pass(raw):
    with dask.config.set(scheduler=_no_compute):
        with pytest.raises(ValueError, match="flavor must be one of"):
            scalepca.pp.pca(raw, 5, log1p=True, flavor="seurat_v4")
        with pytest.raises(ValueError, match="zero_center=False cannot follow scale"):
            scalepca.pp.pca(raw, 5, scale=True, zero_center=False)
        with pytest.raises(ValueError, match="max_fraction"):
            scalepca.pp.pca(
                raw,
                5,
                normalize_total=True,
                exclude_highly_expressed=True,
                max_fraction=2.0,
            )


def _no_compute(*args, **kwargs):
    raise AssertionError("computed before the check")


# -- on AnnData objects and stores -----------------------------------------------------
@pytest.fixture
def counts_store(raw, tmp_path):
    pytest.importorskip("anndata")
    from scalepca.datasets._generators import CountMatrix
    from scalepca.datasets._writing import write_dataset

    path = tmp_path / "counts.zarr"
    write_dataset(CountMatrix(raw), path)
    return path


def test_pca_of_a_store_writes_scanpys_results_without_rewriting_x(raw, counts_store):
    anndata = pytest.importorskip("anndata")
    x_files = {
        p: p.stat().st_mtime_ns for p in (counts_store / "X").rglob("*") if p.is_file()
    }
    model = ours("seurat", str(counts_store))
    assert {
        p: p.stat().st_mtime_ns for p in (counts_store / "X").rglob("*") if p.is_file()
    } == x_files
    back = anndata.read_zarr(counts_store)
    ref = reference("seurat", raw)
    np.testing.assert_array_equal(
        back.var["highly_variable"].to_numpy(), ref["highly_variable"]
    )
    np.testing.assert_allclose(
        back.uns["pca"]["variance_ratio"], ref["variance_ratio"], rtol=1e-8
    )
    assert back.obsm["X_pca"].shape == (raw.shape[0], N_COMPS)
    assert back.obsm["X_pca"].dtype == np.float32
    pcs = back.varm["PCs"]
    assert np.all(pcs[~ref["highly_variable"]] == 0)
    assert (
        1
        - min_abs_corr(pcs[ref["highly_variable"]], ref["PCs"][ref["highly_variable"]])
        < 1e-8
    )
    assert back.uns["pca"]["scalepca"]["n_passes"] == model.singlecell_n_passes_ == 4
    # a model fitted on the store takes an AnnData of new cells (raw counts) as they are
    np.testing.assert_allclose(
        np.asarray(model.transform(back).data), back.obsm["X_pca"], rtol=1e-4, atol=1e-4
    )


def test_pca_uses_highly_variable_of_var_as_scanpy_does(raw):
    anndata = pytest.importorskip("anndata")
    X = sp.csr_matrix(raw.compute())
    a = anndata.AnnData(X)
    mask = np.zeros(X.shape[1], dtype=bool)
    mask[::3] = True
    a.var["highly_variable"] = mask
    model = scalepca.pp.pca(a, 5)
    assert model.n_features_in_ == mask.sum()
    assert a.uns["pca"]["params"] == {
        "zero_center": True,
        "use_highly_variable": True,
        "mask_var": "highly_variable",
    }
    assert np.all(a.varm["PCs"][~mask] == 0)
    full = scalepca.pp.pca(anndata.AnnData(X), 5, mask_var=None)
    assert full.n_features_in_ == X.shape[1]
    if HAVE_SCANPY:
        import scanpy as sc

        b = anndata.AnnData(X.copy())
        b.var["highly_variable"] = mask
        sc.pp.pca(b, 5, svd_solver="arpack")
        np.testing.assert_allclose(
            a.uns["pca"]["variance_ratio"], b.uns["pca"]["variance_ratio"], rtol=1e-8
        )


@pytest.mark.parametrize(
    "case",
    ["flavor", "none", "column_default", "column_off", "booleans", "column", "layer"],
)
def test_params_of_uns_pca_are_scanpys_key_by_key(case):
    """``uns["pca"]["params"]`` as scanpy's pipeline writes it: a flavour's genes are
    its ``var["highly_variable"]`` (so ``use_highly_variable`` and ``mask_var``),
    ``mask_var`` always (None without a mask, the booleans as given), ``layer`` when
    one is read."""
    sc = pytest.importorskip("scanpy")
    anndata = pytest.importorskip("anndata")
    rng = np.random.default_rng(3)
    X = sp.random(
        200,
        60,
        density=0.3,
        random_state=3,
        format="csr",
        data_rvs=lambda k: rng.integers(1, 9, k).astype(np.float64),
    )
    genes = np.arange(60) % 3 != 0
    kw = {
        "none": {},
        "column_default": {},
        "column_off": {"mask_var": None},
        "booleans": {"mask_var": genes},
        "column": {"mask_var": "keep"},
        "layer": {"layer": "counts"},
        "flavor": {},
    }[case]

    def cells():
        a = anndata.AnnData(X.copy())
        a.layers["counts"] = X.copy()
        a.var["keep"] = genes
        if case.startswith("column_"):
            a.var["highly_variable"] = genes
        return a

    ref, mine = cells(), cells()
    if case == "flavor":
        sc.pp.normalize_total(ref)
        sc.pp.log1p(ref)
        sc.pp.highly_variable_genes(ref, flavor="seurat", n_top_genes=20)
        kw_ours = {
            "normalize_total": True,
            "log1p": True,
            "flavor": "seurat",
            "n_top_genes": 20,
        }
    else:
        kw_ours = kw
    sc.pp.pca(ref, 5, svd_solver="arpack", **kw)
    scalepca.pp.pca(mine, 5, **kw_ours)
    theirs, written = ref.uns["pca"]["params"], mine.uns["pca"]["params"]
    assert set(written) == set(theirs)
    for key, value in theirs.items():
        if key == "use_highly_variable" and isinstance(value, np.ndarray):
            # scanpy compares the booleans it was given with "highly_variable"
            # elementwise
            assert not value.any() and written[key] is False
        elif isinstance(value, np.ndarray):
            np.testing.assert_array_equal(written[key], value)
        else:
            assert written[key] == value, key
    np.testing.assert_allclose(
        mine.uns["pca"]["variance_ratio"], ref.uns["pca"]["variance_ratio"], rtol=1e-8
    )


def test_pipeline_on_pbmc68k_equals_scanpys():
    """scanpy's bundled pbmc68k_reduced keeps log-normalised values in ``raw``, not
    counts: their ``expm1`` (normalised counts, non-negative) go through the whole
    pipeline."""
    sc = pytest.importorskip("scanpy")
    anndata = pytest.importorskip("anndata")
    pb = sc.datasets.pbmc68k_reduced()
    X = sp.csr_matrix(pb.raw.X, dtype=np.float64)
    X.data = np.expm1(X.data)
    ref = anndata.AnnData(X.copy())
    sc.pp.normalize_total(ref)
    sc.pp.log1p(ref)
    sc.pp.highly_variable_genes(ref, n_top_genes=300)
    sc.pp.scale(ref, max_value=10)
    sc.pp.pca(ref, n_comps=30, svd_solver="arpack")
    mine = anndata.AnnData(X.copy())
    scalepca.pp.pca(
        mine,
        30,
        normalize_total=True,
        log1p=True,
        flavor="seurat",
        n_top_genes=300,
        scale=True,
        max_value=10,
    )
    np.testing.assert_array_equal(
        mine.var["highly_variable"], ref.var["highly_variable"]
    )
    np.testing.assert_allclose(
        mine.uns["pca"]["variance_ratio"], ref.uns["pca"]["variance_ratio"], rtol=1e-8
    )
    hv = ref.var["highly_variable"].to_numpy()
    assert 1 - min_abs_corr(mine.varm["PCs"][hv], ref.varm["PCs"][hv]) < 1e-8


def test_cli_pp_pca_writes_into_the_store(raw, counts_store, capsys):
    anndata = pytest.importorskip("anndata")
    from scalepca.cli import main

    assert (
        main(
            [
                "pp-pca",
                str(counts_store),
                "--n-comps",
                "5",
                "--normalize-total",
                "--log1p",
                "--flavor",
                "cell_ranger",
                "--n-top-genes",
                "100",
                "--scale",
                "--max-value",
                "1",
                "--target-sum",
                "10000",
                "--n-workers",
                "1",
                "-q",
            ]
        )
        == 0
    )
    assert "written into" in capsys.readouterr().out
    back = anndata.read_zarr(counts_store)
    ref = reference("cell_ranger_clip", raw)
    np.testing.assert_array_equal(back.var["highly_variable"], ref["highly_variable"])
    np.testing.assert_allclose(
        back.uns["pca"]["variance_ratio"], ref["variance_ratio"][:5], rtol=1e-8
    )
    assert main(["pp-pca", str(counts_store.parent), "-q"]) == 2  # not an AnnData store
    assert "is not an AnnData store" in capsys.readouterr().err


@pytest.mark.parametrize("interrupted_at", ["fit", "PCs"])
def test_cli_pp_pca_interrupted_says_whether_it_wrote_into_the_store(
    counts_store, capsys, monkeypatch, interrupted_at
):
    """Ctrl+C during the fit leaves the store as it was ("nothing written"); during the
    writes into the store (after obsm/X_pca, at varm/PCs) it says the store was partly
    written."""
    anndata = pytest.importorskip("anndata")
    import scalepca.analysis.singlecell as sc_module
    from scalepca.cli import main

    if interrupted_at == "fit":

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt  # Ctrl+C here

        monkeypatch.setattr(sc_module, "_write", interrupted)
    else:
        real = anndata.io.write_elem

        def interrupted(group, name, value, **kwargs):
            if name == "PCs":
                raise KeyboardInterrupt  # Ctrl+C here, obsm/X_pca written
            return real(group, name, value, **kwargs)

        monkeypatch.setattr(anndata.io, "write_elem", interrupted)
    rc = main(["pp-pca", str(counts_store), "--n-comps", "5", "--n-workers", "1", "-q"])
    err = capsys.readouterr().err
    assert rc == 130
    if interrupted_at == "fit":
        assert err == "scalepca: interrupted (nothing written)\n", err
    else:
        assert err == (
            f"scalepca: interrupted (partly written: {counts_store} (obsm, "
            "varm, uns, var: run pp-pca again))\n"
        ), err
        assert "X_pca" in anndata.read_zarr(counts_store).obsm


def test_pca_of_an_h5ad_file_writes_into_it(raw, tmp_path):
    anndata = pytest.importorskip("anndata")
    path = tmp_path / "cells.h5ad"
    anndata.AnnData(sp.csr_matrix(raw.compute())).write_h5ad(path)
    model = ours("seurat", str(path))
    back = anndata.read_h5ad(path)
    ref = reference("seurat", raw)
    np.testing.assert_array_equal(back.var["highly_variable"], ref["highly_variable"])
    np.testing.assert_allclose(
        back.uns["pca"]["variance_ratio"], ref["variance_ratio"], rtol=1e-8
    )
    np.testing.assert_allclose(
        back.obsm["X_pca"], np.asarray(model.transform(raw)), rtol=1e-5, atol=1e-5
    )  # stored in float32, as scanpy's
    np.testing.assert_array_equal(back.X.toarray(), raw.compute().toarray())


@pytest.mark.parametrize("flavor", ["seurat", "seurat_v3"])
def test_each_pass_reads_each_block_once(raw, flavor):
    """The counted passes are the reads: every block of the counts is read once a
    pass (the counts per cell and seurat_v3's raw sums share theirs), scores
    included."""
    anndata = pytest.importorskip("anndata")
    if flavor == "seurat_v3":
        pytest.importorskip("skmisc")
    import threading

    reads, lock = [], threading.Lock()

    def counted(block):
        with lock:
            reads.append(1)
        return block

    a = anndata.AnnData(raw.map_blocks(counted, dtype=raw.dtype, meta=raw._meta))
    model = scalepca.pp.pca(
        a,
        5,
        normalize_total=True,
        log1p=True,
        flavor=flavor,
        n_top_genes=100,
        scale=True,
        max_value=10,
    )
    assert model.singlecell_n_passes_ == 4
    assert len(reads) == 4 * raw.numblocks[0]


def test_run_config_with_singlecell_steps_and_transform_of_the_store(
    raw, counts_store, tmp_path, capsys
):
    """``data.singlecell`` in a run config: the model fitted on the prepared counts
    keeps the steps (saved with it), and ``scalepca transform`` of the raw store
    repeats them."""
    pytest.importorskip("anndata")
    import yaml
    import zarr

    from scalepca.cli import main

    steps = {"normalize_total": True, "log1p": True, "flavor": "seurat", "scale": True}
    cfg = {
        "data": {"path": str(counts_store), "format": "anndata", "singlecell": steps},
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
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["run", str(path), "-q"]) == 0, capsys.readouterr().err
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    ref = reference("seurat", raw)
    np.testing.assert_allclose(
        model.explained_variance_ratio_, ref["variance_ratio"], rtol=1e-8
    )
    np.testing.assert_array_equal(
        model._preprocessing.cells.highly_variable_, ref["highly_variable"]
    )
    out = tmp_path / "scores.zarr"
    assert (
        main(
            [
                "transform",
                str(tmp_path / "out" / "model.zarr"),
                str(counts_store),
                "--out",
                str(out),
                "--n-workers",
                "1",
                "--no-processes",
                "-q",
            ]
        )
        == 0
    ), capsys.readouterr().err
    scores = np.asarray(zarr.open_group(str(out), mode="r")["scores"])
    assert 1 - min_abs_corr(scores, ref["X_pca"].astype(np.float64)) < 1e-6
    bad = dict(cfg, data={**cfg["data"], "singlecell": {"flavour": "seurat"}})
    path.write_text(yaml.safe_dump(bad))
    assert main(["validate", str(path)]) == 2
    assert "did you mean 'flavor'" in capsys.readouterr().err


# the longest test of the file, mostly numba compiling pynndescent and UMAP; 8,192 cells
# are needed to leave scanpy's exact neighbour search, which is the point
@pytest.mark.slow
def test_scanpy_neighbors_and_umap_continue_from_the_write_back():
    """The guide's next step on what ``pp.pca`` wrote: ``sc.pp.neighbors`` and
    ``sc.tl.umap`` on 8,192 cells, where scanpy's neighbours leave the exact search for
    pynndescent (whose 0.7 returns a ``csr_array``, on which scanpy 1.11 calls
    ``getnnz``: pinned below 0.7 with the tests). The graph is that of the scores: its
    neighbours are the exact nearest ones of ``obsm["X_pca"]``, nearly all of them."""
    sc = pytest.importorskip("scanpy")
    anndata = pytest.importorskip("anndata")
    from sklearn.neighbors import NearestNeighbors

    from scalepca.datasets._generators import make_counts

    n, k = 8192, 15
    X = make_counts(n, 120, density=0.1, seed=4).X.compute()
    a = anndata.AnnData(sp.csr_matrix(X))
    scalepca.pp.pca(
        a,
        10,
        normalize_total=True,
        log1p=True,
        flavor="seurat",
        n_top_genes=60,
        scale=True,
        max_value=10,
    )
    assert type(a.obsm["X_pca"]) is np.ndarray and type(a.varm["PCs"]) is np.ndarray
    sc.pp.neighbors(a, n_neighbors=k, random_state=0)
    graph = a.obsp["distances"]
    assert isinstance(graph, sp.csr_matrix) and graph.shape == (n, n)
    exact = NearestNeighbors(n_neighbors=k).fit(a.obsm["X_pca"])
    truth = exact.kneighbors(
        return_distance=False
    )  # the others nearest, itself left out
    found = [set(graph[i].indices) for i in range(n)]
    hits = [len(found[i] & set(truth[i, : k - 1])) for i in range(n)]
    assert np.mean(hits) / (k - 1) > 0.95
    sc.tl.umap(a, random_state=0)
    assert a.obsm["X_umap"].shape == (n, 2) and np.isfinite(a.obsm["X_umap"]).all()
