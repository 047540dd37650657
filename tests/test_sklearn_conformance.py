"""scikit-learn conformance: ``check_estimator`` on every estimator and solver, feature
names and ``set_output`` in a Pipeline with a ColumnTransformer.

Every check scikit-learn's ``check_estimator`` runs is a test case of its own here
(through ``parametrize_with_checks``), so a failure names its check. No check is
skipped through tags.
"""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import scalepca

ESTIMATORS = [
    scalepca.PCA(svd_solver="covariance_eigh"),
    scalepca.PCA(svd_solver="tsqr"),
    scalepca.PCA(svd_solver="randomized", n_power_iter=2, random_state=0),
    scalepca.PPCA(),
    scalepca.PPCA(solver="em", max_iter=20, random_state=0),
    scalepca.PPCA(solver="em", missing="em", max_iter=20, random_state=0),
    scalepca.KernelPCA(approximation="nystroem", random_state=0),
    scalepca.KernelPCA(approximation="rff", n_features=50, random_state=0),
    scalepca.KernelPCA(approximation="exact", random_state=0),
    scalepca.SparsePCA(method="minibatch", max_iter=10, random_state=0),
    scalepca.SparsePCA(method="batch", max_iter=10, random_state=0),
    scalepca.SparsePCA(method="elasticnet", random_state=0),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# the inexact ALM runs its iterations as dask graphs: about 90 s for the 47 checks
@pytest.mark.slow
@parametrize_with_checks([scalepca.RobustPCA(max_iter=20, random_state=0)])
def test_sklearn_estimator_checks_robust_pca(estimator, check):
    check(estimator)


def _frame(seed=0, n=120):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 6)) @ rng.standard_normal((6, 6))
    return pd.DataFrame(X, columns=[f"f{i}" for i in range(6)])


@pytest.mark.parametrize(
    "est",
    [
        scalepca.PCA(3),
        scalepca.PPCA(3),
        scalepca.SparsePCA(3, method="batch", random_state=0),
        scalepca.KernelPCA(3, n_features=60, random_state=0),
    ],
    ids=lambda e: type(e).__name__,
)
def test_feature_names_in_and_out(est):
    df = _frame()
    est.fit(df)
    np.testing.assert_array_equal(
        est.feature_names_in_, df.columns.to_numpy(dtype=object)
    )
    prefix = type(est).__name__.lower()
    np.testing.assert_array_equal(
        est.get_feature_names_out(), [f"{prefix}{i}" for i in range(3)]
    )
    out = est.set_output(transform="pandas").transform(df)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == [
        f"{prefix}{i}" for i in range(3)
    ]
    np.testing.assert_array_equal(out.index, df.index)
    np.testing.assert_allclose(
        out.to_numpy(), est.set_output(transform="default").transform(df)
    )


def test_failed_fit_leaves_no_feature_names():
    df = _frame()
    est = scalepca.PCA(3).fit(df)
    with pytest.raises(ValueError, match="out of range"):
        est.set_params(n_components=10**6).fit(df)
    assert not hasattr(est, "feature_names_in_") and not hasattr(est, "n_features_in_")


def test_set_output_keeps_dask_and_xarray(raise_if_dask_computes):
    import dask.array as da

    df = _frame()
    est = scalepca.PCA(2).fit(df.to_numpy()).set_output(transform="pandas")
    X = da.from_array(df.to_numpy(), chunks=(40, -1))
    with raise_if_dask_computes():
        Z = est.transform(X)
        assert isinstance(Z, da.Array)
        A = xr.DataArray(X, dims=("time", "station"))
        assert isinstance(est.transform(A), xr.DataArray)


def test_feature_names_from_xarray_coords():
    df = _frame()
    A = xr.DataArray(
        df.to_numpy(), dims=("time", "station"), coords={"station": list(df.columns)}
    )
    est = scalepca.PCA(2).fit(A)
    np.testing.assert_array_equal(
        est.feature_names_in_, df.columns.to_numpy(dtype=object)
    )
    np.testing.assert_array_equal(est.get_feature_names_out(), ["pca0", "pca1"])
    plain = scalepca.PCA(2).fit(xr.DataArray(df.to_numpy(), dims=("time", "station")))
    assert not hasattr(plain, "feature_names_in_")


def test_set_output_pipeline_column_transformer():
    """pandas output through a Pipeline with a ColumnTransformer: names and values
    right."""
    df = _frame()
    df["label"] = np.where(df["f0"] > 0, "up", "down")  # a column the transformer drops
    numeric = [f"f{i}" for i in range(6)]
    ct = ColumnTransformer(
        [("pca", make_pipeline(StandardScaler(), scalepca.PCA(3)), numeric)]
    )
    pipe = make_pipeline(ct).set_output(transform="pandas")
    out = pipe.fit_transform(df)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["pca__pca0", "pca__pca1", "pca__pca2"]
    np.testing.assert_array_equal(out.index, df.index)
    Xs = StandardScaler().fit_transform(df[numeric].to_numpy())
    ref = scalepca.PCA(3).fit(Xs).transform(Xs)
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        pipe.transform(df).to_numpy(), ref, rtol=1e-10, atol=1e-10
    )
