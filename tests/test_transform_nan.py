"""One rule for a NaN in new data (issue 46 item 3): a NaN at a feature the model was
fitted on is refused by ``transform`` of every estimator and analysis tool, for every
input kind.

NumPy input is refused by the call (before anything is computed); lazy input (dask,
xarray, the matrix of ``open_matrix``, CSR blocks) is refused when its scores are
computed: finding a NaN needs the data, and the refusal rides in the projection's own
blocks (no pass of its own). Features NaN in every fitted sample (land) were left out of
the fit: NaN there is not refused, and the scores equal NumPy's.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr

import scalepca
from scalepca.analysis.bootstrap import BootstrapEOF
from scalepca.analysis.mca import MCA

ROW, FEATURE = 5, 2


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(40, 6)) @ rng.normal(size=(6, 6)) + rng.normal(size=6)


def _kind(A, kind):
    if kind == "numpy":
        return A
    if kind == "dask":
        return da.from_array(A, chunks=(10, -1))
    if kind == "xarray":
        return xr.DataArray(
            da.from_array(A, chunks=(10, -1)),
            dims=("time", "f"),
            coords={"f": [f"f{j}" for j in range(A.shape[1])]},
            name="x",
        )
    if kind == "open_matrix":
        return scalepca.open_matrix(da.from_array(A, chunks=(10, -1)))
    if kind == "scipy-csr":
        return sp.csr_matrix(A)
    if kind == "dask-csr":
        blocks = da.from_array(A, chunks=(10, -1))
        return blocks.map_blocks(sp.csr_matrix, dtype=A.dtype)
    raise AssertionError(kind)


def _fitted(name, X):
    """(a transform of new data, the fitted tool) for the estimator or tool ``name``."""
    if name == "MCA":
        m = MCA(2).fit(X, X)
        return (lambda A: m.transform(A, A)[0]), m
    if name == "MultivariateEOF":
        m = scalepca.MultivariateEOF(2, normalize="none", area_weights=None).fit([X])
        return (lambda A: m.transform([A])), m
    makers = {
        "PCA": lambda: scalepca.PCA(3),
        "PPCA": lambda: scalepca.PPCA(3),
        "KernelPCA": lambda: scalepca.KernelPCA(3, n_features=20, random_state=0),
        "SparsePCA": lambda: scalepca.SparsePCA(
            3, method="batch", max_iter=5, random_state=0
        ),
        "RobustPCA": lambda: scalepca.RobustPCA(random_state=0, max_iter=5),
        "ExtendedEOF": lambda: scalepca.ExtendedEOF(2, embedding=1),
        "BootstrapEOF": lambda: BootstrapEOF(2, n_bootstraps=3, random_state=0),
    }
    m = makers[name]().fit(X)
    return m.transform, m


def _values(Z):
    Z = Z.data if isinstance(Z, xr.DataArray) else Z
    return np.asarray(Z.compute() if isinstance(Z, da.Array) else Z)


NAMES = [
    "PCA",
    "PPCA",
    "KernelPCA",
    "SparsePCA",
    "RobustPCA",
    "ExtendedEOF",
    "MultivariateEOF",
    "MCA",
    "BootstrapEOF",
]
DENSE = ["numpy", "dask", "xarray", "open_matrix"]


def _cases():
    for name in NAMES:
        for kind in DENSE:
            yield name, kind
    for name in ("PCA", "PPCA", "KernelPCA", "SparsePCA"):  # the estimators fitting CSR
        yield name, "scipy-csr"
        yield name, "dask-csr"


@pytest.mark.filterwarnings("ignore:.*did not converge")
@pytest.mark.parametrize(("name", "kind"), list(_cases()))
def test_nan_in_a_fitted_feature_is_refused(name, kind, raise_if_dask_computes):
    X = _data()
    transform, _ = _fitted(name, _kind(X, kind))
    holed = X.copy()
    holed[ROW, FEATURE] = np.nan
    new = _kind(holed, kind)
    if kind in ("numpy", "scipy-csr"):  # in memory: refused by the call itself
        with pytest.raises(ValueError, match="1 NaN value"):
            transform(new)
        return
    with raise_if_dask_computes():  # lazy: nothing is read to decide
        Z = transform(new)
    with pytest.raises(ValueError, match="1 NaN value"):
        _values(Z)


@pytest.mark.filterwarnings("ignore:.*NaN in every sample")
@pytest.mark.parametrize("name", ["PCA", "BootstrapEOF", "MCA", "MultivariateEOF"])
@pytest.mark.parametrize("kind", DENSE)
def test_nan_at_a_feature_left_out_is_not_refused(name, kind):
    """A feature NaN in every fitted sample (land) stays out: NaN there in new data is
    not looked at, and the scores of every kind equal those of NumPy input (1e-12)."""
    X = _data()
    X[:, 4] = np.nan
    transform, _ = _fitted(name, _kind(X, kind))
    reference, _ = _fitted(name, X)
    new = _data(1)
    new[:, 4] = np.nan
    new[3, 4] = 7.0  # where the model has no component: still left out
    expected = reference(new)
    got = _values(transform(_kind(new, kind)))
    np.testing.assert_allclose(
        got, expected, rtol=0, atol=1e-12 * np.abs(expected).max()
    )


def test_ppca_missing_em_takes_nan_as_missing():
    """PPCA(missing='em') is a model of missing entries: a NaN is not refused, for NumPy
    and lazy input alike (the posterior mean of the row's observed entries)."""
    X = _data()
    m = scalepca.PPCA(3, missing="em", solver="em", max_iter=50, random_state=0)
    m.fit(X)
    holed = X.copy()
    holed[ROW, FEATURE] = np.nan
    expected = m.transform(holed)
    assert np.isfinite(expected).all()
    got = _values(m.transform(_kind(holed, "dask")))
    np.testing.assert_allclose(
        got, expected, rtol=0, atol=1e-12 * np.abs(expected).max()
    )


def test_cli_transform_refuses_a_nan_in_its_words(tmp_path, capsys):
    """`scalepca transform` of a store with one NaN at a fitted cell: exit 2, the
    refusal in the command line's words (the data, not X), and no scores written."""
    from scalepca.cli import main

    field = xr.DataArray(
        _data().reshape(40, 2, 3),
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(40), "lat": [0.0, 10.0], "lon": [0.0, 1.0, 2.0]},
        name="sst",
    )
    field.to_dataset().to_netcdf(tmp_path / "a.nc")
    holed = field.copy(data=field.values.copy())
    holed.values[ROW, 1, 2] = np.nan
    holed.to_dataset().to_netcdf(tmp_path / "b.nc")
    opened = scalepca.open_matrix(tmp_path / "a.nc", variable="sst", sample_dims="time")
    scalepca.PCA(2).fit(opened).save(tmp_path / "m.zarr")
    rc = main(
        [
            "transform",
            str(tmp_path / "m.zarr"),
            str(tmp_path / "b.nc"),
            "--out",
            str(tmp_path / "out.zarr"),
            "--no-progress",
            "--no-processes",
            "--n-workers",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "a row block of the data contains 1 NaN value(s)" in err, err
    assert not (tmp_path / "out.zarr").exists()
