"""A model fitted through ``open_matrix(table, weights=w)`` weights every table
``transform`` takes (found by the contract matrix, tests/_contract.py): a pandas or
dask DataFrame or a zarr array was passed on unweighted, and its scores were those of
other data without an error."""

from __future__ import annotations

import numpy as np
import pytest

import scalepca

pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")
zarr = pytest.importorskip("zarr")


@pytest.fixture
def data():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 5)) @ rng.normal(size=(5, 5)) + rng.normal(size=5)
    w = np.array([1.0, 0.5, 2.0, 3.0, 0.25])
    ref = scalepca.PCA(3, svd_solver="covariance_eigh").fit(X * w)
    return X, w, ref


def _frame(X):
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])


@pytest.mark.parametrize("kind", ["pandas", "dask-dataframe", "zarr"])
def test_transform_weights_a_table(data, kind, tmp_path):
    X, w, ref = data
    if kind == "pandas":
        table = _frame(X)
    elif kind == "dask-dataframe":
        table = dd.from_pandas(_frame(X), npartitions=3)
    else:
        table = zarr.open_array(
            str(tmp_path / "x.zarr"),
            mode="w",
            shape=X.shape,
            chunks=(16, X.shape[1]),
            dtype=X.dtype,
        )
        table[:] = X
    model = scalepca.PCA(3, svd_solver="covariance_eigh").fit(
        scalepca.open_matrix(table, weights=w)
    )
    Z = np.asarray(model.transform(table))
    expected = ref.transform(X * w)
    Z = Z * np.sign(np.sum(Z * expected, axis=0))
    np.testing.assert_allclose(
        Z, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max()
    )


def test_sparse_input_to_a_weighted_model_is_refused(data):
    sp = pytest.importorskip("scipy.sparse")
    X, w, _ = data
    model = scalepca.PCA(3).fit(scalepca.open_matrix(X, weights=w))
    with pytest.raises(ValueError, match="weights"):
        model.transform(sp.csr_matrix(X))
