"""AnnData in: objects (in memory, backed), ``.zarr`` and ``.h5ad`` stores, layers; the
counts generator; ``scalepca validate`` / ``run`` with ``data.format: anndata``.

The matrices read here are compared entry for entry with what ``anndata`` itself
reads; the PCA of a store is compared with scanpy's ``sc.pp.pca`` on the same
AnnData.
"""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest
import scipy.sparse as sp
import yaml

import scalepca
from scalepca._validation import is_sparse
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets import count_model, make_counts, make_low_rank, write_dataset
from scalepca.preprocessing._matrix import as_matrix

from .conftest import S3_BUCKET as BUCKET

ad = pytest.importorskip("anndata")

PCA_TAKES_SPARSE = getattr(scalepca.PCA, "_accepts_sparse", False)
needs_sparse_pca = pytest.mark.skipif(
    not PCA_TAKES_SPARSE,
    reason="PCA on sparse blocks comes with the w20a branch (issue 20); "
    "runs once both branches are merged",
)


def _stacked(arr) -> sp.csr_matrix:
    """The CSR blocks of a DataArray/dask matrix stacked (small test sizes only)."""
    data = getattr(arr, "data", arr)
    blocks = [data.blocks[i, 0].compute() for i in range(data.numblocks[0])]
    assert all(isinstance(b, sp.csr_matrix) for b in blocks)
    return sp.vstack(blocks, format="csr")


def _no_compute(dsk, keys, **kwargs):
    raise AssertionError("opening the store computed a dask graph")


def _same(a, b) -> bool:
    return a.shape == b.shape and (sp.csr_matrix(a) != sp.csr_matrix(b)).nnz == 0


@pytest.fixture(scope="module")
def adata():
    rng = np.random.default_rng(0)
    X = sp.random(400, 30, density=0.15, format="csr", random_state=1, dtype=np.float32)
    a = ad.AnnData(X=X)
    a.obs_names = [f"cell{i}" for i in range(400)]
    a.var_names = [f"G{j}" for j in range(30)]
    a.obs["group"] = rng.choice(["x", "y"], 400)
    counts = X.copy()
    counts.data = np.ceil(counts.data * 20).astype(np.float32)
    a.layers["counts"] = counts
    a.layers["dense"] = counts.toarray()
    return a


@pytest.fixture(scope="module")
def stores(adata, tmp_path_factory):
    root = tmp_path_factory.mktemp("anndata")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adata.write_zarr(root / "cells.zarr")
        adata.write_h5ad(root / "cells.h5ad")
    return root


SOURCES = ["object", "backed", "zarr", "h5ad"]


def _source(kind, adata, stores):
    if kind == "object":
        return adata
    if kind == "backed":
        return ad.read_h5ad(stores / "cells.h5ad", backed="r")
    return str(stores / f"cells.{kind}")


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("layer", [None, "counts", "dense"])
def test_open_matrix_reads_x_and_layers_as_anndata_does(adata, stores, kind, layer):
    X = scalepca.open_matrix(_source(kind, adata, stores), layer=layer)
    assert X.dims == ("obs", "var") and X.shape == adata.shape
    assert X.name == (layer or "X")
    np.testing.assert_array_equal(X["var"].values, adata.var_names.to_numpy())
    np.testing.assert_array_equal(
        np.asarray(X["obs_names"].values), adata.obs_names.to_numpy()
    )
    ref = adata.X if layer is None else adata.layers[layer]
    if layer == "dense":  # a dense matrix stays dense: NumPy blocks
        assert not is_sparse(X.data)
        np.testing.assert_array_equal(X.values, ref)
        return
    assert is_sparse(X.data) and isinstance(X.data._meta, sp.csr_matrix)
    assert _same(_stacked(X), ref)
    # the estimators' gate keeps the CSR blocks and the gene names as the feature
    # template
    m = as_matrix(X, accept_sparse=True)
    assert m.kind == "xarray" and isinstance(m.data._meta, sp.csr_matrix)
    assert m.prep.variable == (layer or "X") and m.prep.sample_dims == ("obs",)


@pytest.mark.parametrize("kind", ["zarr", "h5ad"])
def test_store_is_read_lazily(adata, stores, kind):
    with dask.config.set(scheduler=_no_compute):
        X = scalepca.open_matrix(_source(kind, adata, stores), chunks={"obs": 64})
    assert X.data.chunks[0] == (64,) * 6 + (16,)
    assert X["obs_names"].chunks is not None  # cell names stay in the store
    assert _same(_stacked(X), adata.X)


def test_default_blocks_hold_about_64_mib_of_stored_values(tmp_path, monkeypatch):
    from scalepca import _validation

    monkeypatch.setattr(_validation, "SPARSE_BLOCK_BYTES", 40_000)
    X = sp.random(
        3000, 200, density=0.05, format="csr", random_state=2, dtype=np.float32
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ad.AnnData(X=X).write_zarr(tmp_path / "a.zarr")
    M = scalepca.open_matrix(str(tmp_path / "a.zarr"))
    import zarr

    g = zarr.open_group(tmp_path / "a.zarr", mode="r")["X"]
    stored = [g[k].dtype.itemsize for k in ("data", "indices", "indptr")]
    per_row = (
        X.nnz / 3000 * (stored[0] + stored[1]) + stored[2]
    )  # bytes a row takes in store
    assert M.data.numblocks[0] > 1
    assert max(M.data.chunks[0]) == int(40_000 // per_row)
    assert _same(_stacked(M), X)


@pytest.mark.parametrize("kind", SOURCES)
def test_missing_layer_names_the_layers_with_a_close_match(adata, stores, kind):
    with pytest.raises(
        KeyError,
        match=r"no layer 'count'; did you mean 'counts'\? \(its layers: "
        r"counts, dense",
    ):
        scalepca.open_matrix(_source(kind, adata, stores), layer="count")


def test_wrong_arguments_and_missing_store(adata, stores, tmp_path):
    with pytest.raises(ValueError, match="layer= and not variable|pass layer=..."):
        scalepca.open_matrix(adata, variable="counts")
    with pytest.raises(ValueError, match="sample_dims and feature_dims do not apply"):
        scalepca.open_matrix(adata, sample_dims="obs")
    with pytest.raises(
        ValueError, match="weights apply to gridded fields; AnnData is read as it"
    ):
        scalepca.open_matrix(adata, weights=np.ones(30))
    with pytest.raises(FileNotFoundError):
        scalepca.open_matrix(str(tmp_path / "none.h5ad"))
    with pytest.raises(FileNotFoundError):
        scalepca.open_matrix(str(tmp_path / "none.zarr"), format="anndata")
    plain = tmp_path / "plain.zarr"
    write_dataset(make_low_rank(20, 5, rank=2), plain)
    with pytest.raises(ValueError, match="applies to AnnData only"):
        scalepca.open_matrix(str(plain), layer="counts")
    with pytest.raises(ValueError, match="is not an AnnData store"):
        scalepca.open_matrix(str(plain), format="anndata")


@pytest.mark.parametrize("form", ["csr", "csc", "dask_csr"])
def test_open_matrix_takes_sparse_arrays_as_csr_row_blocks(adata, form):
    import dask.array as da

    X = adata.layers["counts"]
    src = {
        "csr": X,
        "csc": X.tocsc(),
        "dask_csr": da.from_array(X, chunks=(100, 30), asarray=False),
    }[form]
    M = scalepca.open_matrix(src, chunks=128)
    assert isinstance(M._meta, sp.csr_matrix) and M.chunks[0] == (128, 128, 128, 16)
    assert _same(_stacked(M), X)
    with pytest.raises(ValueError, match="weights are not applied to sparse input"):
        scalepca.open_matrix(src, weights=np.ones(30))


# -- the counts generator --------------------------------------------------------------
@pytest.fixture(scope="module")
def counts_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("counts") / "cells.zarr"
    write_dataset(make_counts(2500, 300, density=0.08, chunk_rows=600, seed=5), path)
    return path


def test_counts_store_round_trips_through_anndata_and_open_matrix(counts_store):
    a = ad.read_zarr(counts_store)
    assert a.shape == (2500, 300) and isinstance(a.X, sp.csr_matrix)
    assert a.obs_names[0] == "cell_0000" and a.var_names[-1] == "gene_299"
    X = scalepca.open_matrix(str(counts_store))
    assert _same(_stacked(X), a.X)
    np.testing.assert_array_equal(
        np.asarray(X["obs_names"].values), a.obs_names.to_numpy()
    )
    np.testing.assert_array_equal(X["var"].values, a.var_names.to_numpy())
    assert np.all(a.X.data == np.round(a.X.data)) and a.X.data.min() >= 1  # counts


def test_counts_density_is_the_requested_one(counts_store):
    a = ad.read_zarr(counts_store)
    # 750,000 entries: the realised density has sd ~ 3e-4 around its expectation, and
    # the expectation is calibrated on 1,024 model cells (sd of a cell's density ~ 0.03
    # → ~1e-3)
    assert a.X.nnz / (2500 * 300) == pytest.approx(0.08, rel=0.04)
    # the calibration itself: the model's expected density over fresh cells is the
    # target
    model = count_model(300, density=0.02, dispersion=None, seed=9)
    rng = np.random.default_rng(123)
    p0 = np.exp(-np.exp(model.log_means(rng, 20_000)))
    assert 1 - p0.mean() == pytest.approx(0.02, rel=0.03)


@pytest.mark.parametrize("dispersion", [None, 5.0, 0.5])
@pytest.mark.parametrize("mean", [0.05, 2.0, 40.0, 900.0])
def test_count_values_follow_the_stated_distribution(dispersion, mean):
    from scipy import stats

    from scalepca.datasets._generators import _quantile_counts, _zero_probability

    rng = np.random.default_rng(11)
    mu, u = np.full(200_000, mean), rng.random(200_000)
    nz = u > _zero_probability(mu, dispersion)
    k = np.zeros(mu.shape, dtype=np.int64)
    k[nz] = _quantile_counts(mu[nz], u[nz], dispersion)
    dist = (
        stats.poisson(mean)
        if dispersion is None
        else stats.nbinom(dispersion, dispersion / (dispersion + mean))
    )
    # mean within 5 standard errors; the frequencies of the 8 likeliest values likewise
    assert abs(k.mean() - mean) < 5 * dist.std() / np.sqrt(k.size)
    if dispersion is None and mean > 700:  # the normal approximation: moments only
        assert k.var() == pytest.approx(dist.var(), rel=0.02)
        return
    for value in np.argsort(dist.pmf(np.arange(int(4 * mean) + 10)))[-8:]:
        p = dist.pmf(value)
        assert abs(np.mean(k == value) - p) < 5 * np.sqrt(p * (1 - p) / k.size) + 1e-9


def test_counts_do_not_depend_on_chunking_and_repeat_with_the_seed():
    ref = _stacked(make_counts(700, 40, density=0.2, chunk_rows=700, seed=1).X)
    for rows in (1, 37, 256, 333):
        assert _same(
            _stacked(make_counts(700, 40, density=0.2, chunk_rows=rows, seed=1).X), ref
        )
    assert not _same(_stacked(make_counts(700, 40, density=0.2, seed=2).X), ref)
    pois = _stacked(make_counts(700, 40, density=0.2, dispersion=None, seed=1).X)
    assert not _same(pois, ref)


def test_counts_store_is_the_same_whatever_the_blocks(tmp_path):
    for rows in (50, 1000):
        write_dataset(
            make_counts(1000, 25, density=0.3, chunk_rows=rows, seed=4, layer="counts"),
            tmp_path / f"c{rows}.zarr",
        )
    a, b = (ad.read_zarr(tmp_path / f"c{rows}.zarr") for rows in (50, 1000))
    assert a.X is None and _same(a.layers["counts"], b.layers["counts"])
    X = scalepca.open_matrix(str(tmp_path / "c50.zarr"), layer="counts")
    assert _same(_stacked(X), a.layers["counts"])


def _make_counts_cli(path, capsys, n, d, *extra):
    """``scalepca make-data --kind counts`` of ``n`` × ``d`` (density 0.25, seed 3,
    64-row chunks) to ``path``, with the ``extra`` arguments."""
    rc = main(
        [
            "make-data",
            str(path),
            "--kind",
            "counts",
            "--n-samples",
            str(n),
            "--n-features",
            str(d),
            "--density",
            "0.25",
            "--seed",
            "3",
            "--chunk-rows",
            "64",
            *extra,
            "-q",
        ]
    )
    assert rc == EXIT_OK, capsys.readouterr().err


def test_make_data_counts_cli(tmp_path, capsys):
    path = tmp_path / "cli.zarr"
    _make_counts_cli(path, capsys, 300, 50, "--set", "layer=counts")
    a = ad.read_zarr(path)
    assert _same(
        a.layers["counts"], _stacked(make_counts(300, 50, density=0.25, seed=3).X)
    )


def test_csr_index_type_is_scipys():
    from scalepca.datasets import csr_index_dtype

    # public from scipy 1.15; the private name before
    scipys = getattr(sp, "get_index_dtype", None) or sp._sputils.get_index_dtype
    for nnz, shape in [
        (10, (5, 3)),
        (2**31 - 1, (5, 3)),
        (2**31, (5, 3)),
        (5, (2**31, 3)),
        (5, (3, 2**31)),
    ]:
        assert csr_index_dtype(nnz, shape) == scipys(maxval=max(nnz, *shape))


def test_make_data_counts_store_runs_scanpys_default_pca(tmp_path, capsys):
    # the store's indices and indptr share one integer type, as in the stores anndata
    # writes: scanpy's sparse PCA kernels refused int32 indices with int64 indptr
    # ("Buffer dtype mismatch"); its result equals scalepca's on the same store
    sc = pytest.importorskip("scanpy")
    path = tmp_path / "counts.zarr"
    _make_counts_cli(path, capsys, 400, 60, "--dtype", "float64")
    a = ad.read_zarr(path)
    assert (
        a.X.indices.dtype == a.X.indptr.dtype == np.int32
    )  # scipy's choice for this size
    own = ad.AnnData(
        X=sp.csr_matrix(a.X.toarray())
    )  # the same matrix written by anndata
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own.write_zarr(tmp_path / "own.zarr")
    back = ad.read_zarr(tmp_path / "own.zarr").X
    assert (back.indices.dtype, back.indptr.dtype) == (
        a.X.indices.dtype,
        a.X.indptr.dtype,
    )
    sc.pp.pca(a, n_comps=5)  # scanpy's defaults
    dense = a.X.toarray()
    est = scalepca.PCA(5).fit(
        scalepca.open_matrix(str(path)) if PCA_TAKES_SPARSE else dense
    )
    comps = a.varm["PCs"].T
    signs = np.sign(np.sum(est.components_ * comps, axis=1))
    np.testing.assert_allclose(est.components_ * signs[:, None], comps, atol=1e-8)
    np.testing.assert_allclose(
        est.explained_variance_, a.uns["pca"]["variance"], rtol=1e-8
    )
    np.testing.assert_allclose(
        np.asarray(est.transform(dense)) * signs, a.obsm["X_pca"], atol=1e-8
    )


# -- scanpy's PCA on the same AnnData --------------------------------------------------
@needs_sparse_pca
@pytest.mark.parametrize("kind", ["object", "zarr"])
def test_pca_of_a_store_equals_scanpy(counts_store, kind):
    sc = pytest.importorskip("scanpy")
    a = ad.read_zarr(counts_store)
    a.X = a.X.astype(np.float64)
    ref = sc.pp.pca(a, n_comps=5, svd_solver="covariance_eigh", copy=True)
    src = a if kind == "object" else str(counts_store)
    est = scalepca.PCA(5).fit(scalepca.open_matrix(src))
    comps = ref.varm["PCs"].T
    signs = np.sign(np.sum(est.components_ * comps, axis=1))
    np.testing.assert_allclose(est.components_ * signs[:, None], comps, atol=1e-8)
    np.testing.assert_allclose(
        est.explained_variance_, ref.uns["pca"]["variance"], rtol=1e-8
    )
    assert list(est.components_xr_["var"].values[:2]) == ["gene_000", "gene_001"]


# -- validate / run --------------------------------------------------------------------
def _config(folder, name, data, **extra):
    cfg = {
        "data": data,
        "model": {"method": "pca", "n_components": 3},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        **extra,
    }
    path = folder / name
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"path": "cells.zarr", "format": "anndata", "layer": "count"},
            "data.layer: '.*cells.zarr' has no layer 'count'; did you mean "
            "'counts'\\? .*data.layer: null reads X",
        ),
        ({"path": "nope.zarr", "format": "anndata"}, "data.path: no AnnData store at"),
        (
            {"path": "cells.h5ad", "format": "anndata", "variable": "X"},
            "'data.variable' do\\(es\\) not apply to data.format anndata",
        ),
        (
            {"path": "cells.zarr", "format": "anndatta"},
            "'data.format' is 'anndatta'; allowed",
        ),
        (
            {"path": "cells.zarr", "weights": "coslat"},
            "'data.weights' weights apply to gridded fields; AnnData is read as it is",
        ),
    ],
)
def test_validate_anndata_problems_in_config_words(stores, capsys, data, expected):
    rc = main(["validate", str(_config(stores, "bad.yaml", data))])
    err = capsys.readouterr().err
    assert rc == EXIT_USER_ERROR
    assert __import__("re").search(expected, err), err


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("variable", "nonexistent"),
        ("variable", "X"),
        ("sample_dims", ["obs"]),
        ("feature_dims", "var"),
    ],
)
@pytest.mark.parametrize("path", ["cells.zarr", "cells.h5ad"])
def test_cli_refuses_variable_and_dims_of_an_anndata_store(
    stores, tmp_path, capsys, command, key, value, path
):
    # open_matrix refuses them for AnnData; the CLI said "valid" and ran when the store
    # was recognised by its path (no data.format)
    with pytest.raises(ValueError, match="AnnData"):
        scalepca.open_matrix(str(stores / path), **{key: value})
    cfg = _config(
        stores,
        f"{command}-{key}.yaml",
        {"path": path, "layer": "dense", key: value},
        output={"store": str(tmp_path / "out"), "report": False},
    )
    rc = main([command, str(cfg)] + (["-q"] if command == "run" else []))
    err = capsys.readouterr().err
    assert rc == EXIT_USER_ERROR, err
    assert (
        f"'data.{key}' do(es) not apply to the AnnData store '{stores / path}' "
        "(a cell × gene matrix); choose the matrix with 'data.layer' (null: X)"
    ) in err
    assert not (tmp_path / "out").exists()


def test_config_refuses_variable_for_generated_counts(tmp_path, capsys):
    cfg = _config(
        tmp_path,
        "gen.yaml",
        {
            "path": "cells.zarr",
            "variable": "X",
            "generate": {"kind": "counts", "n_samples": 50, "n_features": 10},
        },
    )
    assert main(["validate", str(cfg)]) == EXIT_USER_ERROR
    assert (
        "'data.variable' do(es) not apply to the "
        "AnnData store data.generate.kind counts writes"
    ) in capsys.readouterr().err
    assert not (tmp_path / "cells.zarr").exists()


@pytest.mark.parametrize("path", ["cells.zarr", "cells.h5ad"])
def test_validate_anndata_store(stores, capsys, path):
    rc = main(
        [
            "validate",
            str(
                _config(
                    stores,
                    "ok.yaml",
                    {"path": path, "format": "anndata", "layer": "counts"},
                )
            ),
        ]
    )
    out, err = capsys.readouterr()
    if PCA_TAKES_SPARSE:
        assert rc == EXIT_OK, err
        assert "400 samples × 30 features" in out
    else:  # refused by name before any cluster starts
        assert rc == EXIT_USER_ERROR
        assert "model.method pca does not take sparse input" in err


@needs_sparse_pca
def test_run_on_an_anndata_store_labels_outputs_by_gene(tmp_path, capsys):
    cfg = _config(
        tmp_path,
        "run.yaml",
        {
            "path": "cells.zarr",
            "format": "anndata",
            "layer": "counts",
            "generate": {
                "kind": "counts",
                "n_samples": 600,
                "n_features": 40,
                "layer": "counts",
                "chunk_rows": 128,
            },
        },
        output={"store": "out", "report": False},
    )
    assert main(["run", str(cfg), "-q"]) == EXIT_OK, capsys.readouterr().err
    model = scalepca.load(str(tmp_path / "out" / "model.zarr"))
    assert list(model.components_xr_["var"].values[:2]) == ["gene_00", "gene_01"]
    import xarray as xr

    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr")
    assert scores["scores"].shape == (600, 3)


# -- labels through a fit: a dense layer, which every estimator takes today ------------
def test_a_model_fitted_on_anndata_is_labelled_by_gene_and_cell(
    adata, stores, tmp_path
):
    X = scalepca.open_matrix(str(stores / "cells.zarr"), layer="dense", chunks=64)
    est = scalepca.PCA(3).fit(X)
    ref = scalepca.PCA(3).fit(adata.layers["dense"].astype(np.float64))
    np.testing.assert_allclose(
        est.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    np.testing.assert_array_equal(
        est.components_xr_["var"].values, adata.var_names.to_numpy()
    )
    Z = est.transform(X)
    assert Z.dims == ("obs", "mode")
    np.testing.assert_array_equal(
        np.asarray(Z["obs_names"].values), adata.obs_names.to_numpy()
    )
    est.save(str(tmp_path / "m.zarr"))
    back = scalepca.load(str(tmp_path / "m.zarr"))
    np.testing.assert_array_equal(
        back.components_xr_["var"].values, adata.var_names.to_numpy()
    )
    np.testing.assert_allclose(back.transform(X).values, Z.values, rtol=1e-12)
    with pytest.raises(ValueError, match="variable 'counts', fitted on 'dense'"):
        back.transform(scalepca.open_matrix(adata, layer="counts"))


def test_run_and_transform_on_an_anndata_store(stores, tmp_path, capsys):
    import xarray as xr

    cfg = _config(
        stores,
        "dense.yaml",
        {"path": "cells.h5ad", "layer": "dense"},
        output={"store": str(tmp_path / "out"), "report": False},
    )
    assert main(["run", str(cfg), "-q"]) == EXIT_OK, capsys.readouterr().err
    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr")["scores"]
    assert scores.dims == ("obs", "mode") and scores.shape == (400, 3)
    assert scores["obs_names"].values[0] == "cell0"
    rc = main(
        [
            "transform",
            str(tmp_path / "out" / "model.zarr"),
            str(stores / "cells.zarr"),
            "--out",
            str(tmp_path / "again.zarr"),
            "--processes",
            "--n-workers",
            "1",
            "-q",
        ]
    )
    assert rc == EXIT_OK, capsys.readouterr().err
    again = xr.open_zarr(tmp_path / "again.zarr")["scores"]
    np.testing.assert_allclose(again.values, scores.values, rtol=1e-10)


def test_an_anndata_object_is_taken_as_it_is(adata):
    X = adata.layers["dense"].astype(np.float64)
    dense = ad.AnnData(X=X, obs=adata.obs[[]], var=adata.var, layers={"twice": 2.0 * X})
    est = scalepca.PCA(3).fit(dense)  # its X
    ref = scalepca.PCA(3).fit(dense.X)
    np.testing.assert_allclose(
        est.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    np.testing.assert_array_equal(
        est.components_xr_["var"].values, adata.var_names.to_numpy()
    )
    Z = est.transform(dense)
    assert Z.dims == ("obs", "mode")
    np.testing.assert_allclose(Z.values, ref.transform(dense.X), rtol=1e-8, atol=1e-10)
    # a model fitted on a layer reads that layer of an AnnData given to transform
    on_layer = scalepca.PCA(3).fit(scalepca.open_matrix(dense, layer="twice"))
    np.testing.assert_allclose(
        on_layer.transform(dense).values,
        on_layer.transform(2.0 * dense.X),
        rtol=1e-8,
        atol=1e-10,
    )


def test_pca_of_a_dense_anndata_equals_scanpy(adata):
    # the comparison test_pca_of_a_store_equals_scanpy makes on sparse counts, on a
    # dense layer
    sc = pytest.importorskip("scanpy")
    a = ad.AnnData(
        X=adata.layers["dense"].astype(np.float64), obs=adata.obs[[]], var=adata.var
    )
    ref = sc.pp.pca(a, n_comps=5, svd_solver="covariance_eigh", copy=True)
    est = scalepca.PCA(5).fit(scalepca.open_matrix(a))
    comps = ref.varm["PCs"].T
    signs = np.sign(np.sum(est.components_ * comps, axis=1))
    np.testing.assert_allclose(est.components_ * signs[:, None], comps, atol=1e-8)
    np.testing.assert_allclose(
        est.explained_variance_, ref.uns["pca"]["variance"], rtol=1e-8
    )
    np.testing.assert_allclose(
        est.transform(a).values * signs, ref.obsm["X_pca"], atol=1e-8
    )


def test_counts_store_on_s3_is_written_in_place_and_read_by_signature(s3):
    opts, fs = s3
    url = f"s3://{BUCKET}/cells/counts.zarr"
    write_dataset(
        make_counts(500, 20, density=0.3, chunk_rows=128, seed=8),
        url,
        storage_options=opts,
    )
    assert fs.exists(f"{BUCKET}/cells/counts.zarr/X/indptr")
    X = scalepca.open_matrix(
        url, storage_options=opts
    )  # an AnnData by its root attributes
    assert X.dims == ("obs", "var")
    assert _same(_stacked(X), _stacked(make_counts(500, 20, density=0.3, seed=8).X))


@pytest.mark.parametrize("name", ["cells.zarr", "cells.h5ad"])
def test_info_describes_an_anndata_store(stores, capsys, name):
    assert main(["info", str(stores / name)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "400 cells (obs) × 30 genes (var)" in out
    assert "X: csr_matrix, float32" in out and "layers/counts: csr_matrix" in out
    assert "layers/dense: array" in out
