"""AnnData views (``adata[cells, genes]``), backed and in memory, are read as exactly
their cells and genes, in their order, lazily, with their own names.

A backed view used to be read as the whole file with the view's names attached: a
permuted view labelled row 0 ``c299`` with cell 0's scores, and a subset failed with
xarray's AlignmentError. Every fit, transform and inverse_transform on a view here
equals the same on ``view.to_memory()`` (float64, 1e-10).
"""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest
import scipy.sparse as sp

import scalepca

ad = pytest.importorskip("anndata")

N, D = 300, 20
PERM = np.random.default_rng(3).permutation(N)
GENES = np.random.default_rng(4).permutation(D)[:12]

#: view selections: (name, function of an AnnData)
VIEWS = [
    ("permuted", lambda a: a[PERM]),
    ("first_100", lambda a: a[:100]),
    ("every_third", lambda a: a[::3]),
    ("mask", lambda a: a[np.arange(N) % 4 != 1]),
    ("genes", lambda a: a[:, 5:15]),
    ("cells_and_genes", lambda a: a[PERM[40:260], GENES]),
    ("repeated_cells", lambda a: a[np.r_[7, 7, 3, 250, 0]]),
]


def _no_compute(dsk, keys, **kwargs):
    raise AssertionError("opening the view computed a dask graph")


@pytest.fixture(scope="module")
def matrices():
    X = sp.random(N, D, density=0.3, format="csr", random_state=1, dtype=np.float64)
    X.data = np.round(X.data * 50)
    X = X + sp.diags(np.arange(1, D + 1, dtype=np.float64), shape=(N, D), format="csr")
    return {"csr": X.tocsr(), "dense": X.toarray(), "csc": X.tocsc()}


@pytest.fixture(scope="module")
def files(matrices, tmp_path_factory):
    root = tmp_path_factory.mktemp("views")
    out = {}
    for kind, X in matrices.items():
        a = ad.AnnData(X=X)
        a.obs_names = [f"c{i}" for i in range(N)]
        a.var_names = [f"g{j}" for j in range(D)]
        out[kind] = root / f"{kind}.h5ad"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a.write_h5ad(out[kind])
    return out


def _parent(files, kind, where):
    if where == "backed":
        return ad.read_h5ad(files[kind], backed="r")
    return ad.read_h5ad(files[kind])


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


@pytest.mark.parametrize("where", ["backed", "memory"])
@pytest.mark.parametrize("kind", ["csr", "dense", "csc"])
@pytest.mark.parametrize(("name", "select"), VIEWS, ids=[v[0] for v in VIEWS])
def test_a_view_is_read_as_its_own_cells_and_genes(files, kind, where, name, select):
    view = select(_parent(files, kind, where))
    mem = view.to_memory()
    with dask.config.set(
        scheduler=_no_compute
    ):  # nothing is read when the view is opened
        X = scalepca.open_matrix(view, chunks=64)
    assert X.shape == mem.shape and X.dims == ("obs", "var")
    np.testing.assert_array_equal(
        np.asarray(X["obs_names"].values), mem.obs_names.to_numpy()
    )
    np.testing.assert_array_equal(X["var"].values, mem.var_names.to_numpy())
    assert X.data.chunks[0][0] == min(64, mem.n_obs)
    if (
        where == "backed"
    ):  # one task reads each block's cells: no read of other cells, no shuffle
        assert (
            len(X.data.__dask_graph__()) == 2 * X.data.numblocks[0]
        )  # (its indices, read)
    blocks = [X.data.blocks[i, 0].compute() for i in range(X.data.numblocks[0])]
    if kind != "dense":
        assert all(isinstance(b, sp.csr_matrix) for b in blocks)
    np.testing.assert_array_equal(np.vstack([_dense(b) for b in blocks]), _dense(mem.X))


@pytest.mark.parametrize("where", ["backed", "memory"])
@pytest.mark.parametrize("kind", ["csr", "dense"])
@pytest.mark.parametrize(("name", "select"), VIEWS[:-1], ids=[v[0] for v in VIEWS[:-1]])
def test_fit_transform_inverse_on_a_view_equal_those_on_its_copy(
    files, kind, where, name, select
):
    view = select(_parent(files, kind, where))
    mem = view.to_memory()
    est = scalepca.PCA(3).fit(view)
    ref = scalepca.PCA(3).fit(mem)
    np.testing.assert_allclose(
        est.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    np.testing.assert_allclose(est.components_, ref.components_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(est.feature_names_in_, mem.var_names.to_numpy())
    Z, Zref = est.transform(view), ref.transform(mem)
    np.testing.assert_array_equal(
        np.asarray(Z["obs_names"].values), mem.obs_names.to_numpy()
    )
    np.testing.assert_allclose(Z.values, Zref.values, rtol=1e-10, atol=1e-10)
    back, backref = est.inverse_transform(Z), ref.inverse_transform(Zref)
    np.testing.assert_array_equal(back["var"].values, mem.var_names.to_numpy())
    np.testing.assert_allclose(back.values, backref.values, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("where", ["backed", "memory"])
def test_a_model_scores_permuted_and_subset_cells_of_a_file(files, where):
    full = _parent(files, "csr", where)
    est = scalepca.PCA(3).fit(full)
    Z = est.transform(full).values
    for rows in (PERM, slice(0, 100), np.arange(N) % 4 != 1):
        sub = est.transform(full[rows])
        np.testing.assert_allclose(sub.values, Z[rows], rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(
            np.asarray(sub["obs_names"].values), full.obs_names.to_numpy()[rows]
        )


@pytest.mark.parametrize("where", ["backed", "memory"])
def test_a_view_of_other_genes_is_refused_by_name(files, where):
    full = _parent(files, "csr", where)
    est = scalepca.PCA(3).fit(full)
    with pytest.raises(ValueError, match="yet now missing:\n- g0\n- g1\n- g15\n"):
        est.transform(full[:, 2:15])
    with pytest.raises(
        ValueError, match="(?s)same order as they were in fit.*'g19' at position 0"
    ):
        est.transform(full[:, ::-1])


def test_a_view_of_a_view_in_memory(files):
    # anndata resolves it to one selection of the parent (backed AnnData refuses views
    # of views)
    view = _parent(files, "csr", "memory")[PERM][40:260][:, GENES]
    mem = view.to_memory()
    X = scalepca.open_matrix(view)
    np.testing.assert_array_equal(
        np.asarray(X["obs_names"].values), mem.obs_names.to_numpy()
    )
    np.testing.assert_array_equal(_dense(X.data.compute()), _dense(mem.X))
    est, ref = scalepca.PCA(3).fit(view), scalepca.PCA(3).fit(mem)
    np.testing.assert_allclose(
        est.transform(view).values, ref.transform(mem).values, rtol=1e-10, atol=1e-10
    )


def test_a_layer_of_a_backed_view(matrices, tmp_path):
    # a backed AnnData holds its layers in memory: the view's rows of the layer, lazily
    a = ad.AnnData(X=matrices["csr"], layers={"twice": 2.0 * matrices["dense"]})
    a.obs_names = [f"c{i}" for i in range(N)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a.write_h5ad(tmp_path / "layers.h5ad")
    view = ad.read_h5ad(tmp_path / "layers.h5ad", backed="r")[PERM[:150], GENES]
    X = scalepca.open_matrix(view, layer="twice")
    assert X.name == "twice"
    np.testing.assert_array_equal(
        X.values, 2.0 * matrices["dense"][PERM[:150]][:, GENES]
    )
    np.testing.assert_array_equal(
        np.asarray(X["obs_names"].values), view.obs_names.to_numpy()
    )
