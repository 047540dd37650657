"""Feature names are one notion across input kinds: the columns of a pandas or dask
DataFrame, the feature coordinate of a DataArray and the genes of an AnnData are
recorded in ``fit`` as ``feature_names_in_`` and checked on the data given to
``transform`` and the other methods, whatever kind each side is. The same names in
another order are refused (a model fitted on a DataFrame took a DataArray with its
columns reversed: scores off by hundreds), so are other names; names on one side only
give scikit-learn's warning.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import scalepca

ad = pytest.importorskip("anndata")
dd = pytest.importorskip("dask.dataframe")

NAMES = [f"f{i}" for i in range(6)]
SCALES = np.array([1, 10, 100, 0.1, 1, 1000])


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((150, 6)) @ rng.standard_normal((6, 6))) * SCALES


def _as(kind, X, names):
    """``X`` (columns named ``names``) as an input of ``kind``."""
    if kind == "pandas":
        return pd.DataFrame(X, columns=names)
    if kind == "dask_dataframe":
        return dd.from_pandas(pd.DataFrame(X, columns=names), npartitions=3)
    if kind == "xarray":
        return xr.DataArray(X, dims=("sample", "feature"), coords={"feature": names})
    if kind == "anndata":
        return ad.AnnData(X=X, var=pd.DataFrame(index=pd.Index(names)))
    raise AssertionError(kind)


def _values(Z) -> np.ndarray:
    return np.asarray(Z.values if isinstance(Z, xr.DataArray) else Z)


KINDS = ["pandas", "dask_dataframe", "xarray", "anndata"]


@pytest.mark.parametrize("fit_kind", KINDS)
def test_names_of_every_kind_are_recorded(X, fit_kind):
    est = scalepca.PCA(3).fit(_as(fit_kind, X, NAMES))
    assert est.feature_names_in_.dtype == object
    np.testing.assert_array_equal(est.feature_names_in_, NAMES)


#: dims of the DataArray a model fitted on ``kind`` keeps (its layout: other dims are
#: refused)
LAYOUT = {"xarray": ("sample", "feature"), "anndata": ("obs", "var")}


def _layouts_differ(fit_kind, new_kind) -> bool:
    return {fit_kind, new_kind} == set(LAYOUT)


@pytest.mark.parametrize("new_kind", KINDS)
@pytest.mark.parametrize("fit_kind", KINDS)
def test_features_are_checked_across_kinds(X, fit_kind, new_kind):
    est = scalepca.PCA(3).fit(_as(fit_kind, X, NAMES))
    if _layouts_differ(fit_kind, new_kind):  # xarray dims are part of the data's layout
        with pytest.raises(ValueError, match="has dims|features along"):
            est.transform(_as(new_kind, X, NAMES))
        return
    ref = scalepca.PCA(3).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # names on both sides: no warning
        Z = est.transform(_as(new_kind, X, NAMES))
    np.testing.assert_allclose(_values(Z), ref.transform(X), rtol=1e-10, atol=1e-10)
    # the same features in another order: refused (they were taken by position)
    rev = NAMES[::-1]
    with pytest.raises(
        ValueError,
        match="Feature names must be in the same order as they were "
        r"in fit\.\nX has them in another order: 'f5' at position 0, where the "
        "fit had 'f0'",
    ):
        est.transform(_as(new_kind, X[:, ::-1], rev))
    # other features: each named
    with pytest.raises(
        ValueError,
        match="Feature names unseen at fit time:\n- g1\n"
        "Feature names seen at fit time, yet now missing:\n- f1\n",
    ):
        est.transform(_as(new_kind, X, ["f0", "g1", *NAMES[2:]]))
    with pytest.raises(ValueError, match="yet now missing:\n- f4\n- f5\n"):
        est.transform(_as(new_kind, X[:, :4], NAMES[:4]))


@pytest.mark.parametrize("kind", KINDS)
def test_names_on_one_side_warn_as_scikit_learn_does(X, kind):
    est = scalepca.PCA(2).fit(X)
    with pytest.warns(
        UserWarning, match="X has feature names, but PCA was fitted without"
    ):
        est.transform(_as(kind, X, NAMES))
    named = scalepca.PCA(2).fit(_as(kind, X, NAMES))
    for bare in (X, da.from_array(X, chunks=50), xr.DataArray(X, dims=("s", "f"))):
        if isinstance(bare, xr.DataArray) and kind in LAYOUT:
            # refused: a model fitted on a DataArray checks its coordinates (below)
            continue
        with pytest.warns(
            UserWarning,
            match="X does not have valid feature names, but PCA was "
            "fitted with feature names",
        ):
            named.transform(bare)
    if kind in LAYOUT:
        with (
            pytest.raises(ValueError, match="coordinate along the features"),
            pytest.warns(UserWarning, match="X does not have valid feature names"),
        ):
            named.transform(xr.DataArray(X, dims=LAYOUT[kind]))


@pytest.mark.parametrize("fit_kind", ["pandas", "xarray", "anndata"])
def test_names_are_checked_after_save_and_load(X, fit_kind, tmp_path):
    est = scalepca.PCA(3).fit(_as(fit_kind, X, NAMES))
    est.save(str(tmp_path / "m.zarr"))
    back = scalepca.load(str(tmp_path / "m.zarr"))
    np.testing.assert_array_equal(back.feature_names_in_, NAMES)
    for kind in KINDS:
        if _layouts_differ(fit_kind, kind):
            continue
        np.testing.assert_allclose(
            _values(back.transform(_as(kind, X, NAMES))),
            _values(est.transform(_as(kind, X, NAMES))),
            rtol=1e-12,
        )
        with pytest.raises(ValueError, match="same order as they were in fit"):
            back.transform(_as(kind, X[:, ::-1], NAMES[::-1]))


def test_other_methods_check_names_too(X):
    est = scalepca.PPCA(3).fit(_as("pandas", X, NAMES))
    rev = _as("xarray", X[:, ::-1], NAMES[::-1])
    for method in ("transform", "score", "score_samples"):
        with pytest.raises(ValueError, match="same order as they were in fit"):
            getattr(est, method)(rev)
    np.testing.assert_allclose(
        est.score(_as("xarray", X, NAMES)), est.score(X), rtol=1e-12
    )


def test_mixed_column_names_are_refused_as_scikit_learn_does(X):
    df = pd.DataFrame(X, columns=["a", "b", 2, 3, 4, 5])
    with pytest.raises(
        TypeError,
        match="Feature names are only supported if all input "
        "features have string names",
    ):
        scalepca.PCA(2).fit(df)
