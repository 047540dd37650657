"""eofs' scaled EOFs and PCs, anomaly reconstruction and uncentred projection
(scalepca.analysis.eof_fields) against eofs on its example SST file, for every kind
of input."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import scalepca
from scalepca.analysis.eof import coslat_weights
from scalepca.analysis.eof_fields import eofs, pcs, project_field, reconstructed_field

from .support.compare import mode_signs

eofs_examples = pytest.importorskip("eofs.examples")
eofs_xr = pytest.importorskip("eofs.xarray")

K = 6
# land: NaN in every sample, left out of the fit (said by a warning for array input)
pytestmark = pytest.mark.filterwarnings("ignore:PCA. 90 of 540 features are NaN")
KINDS = [
    "numpy",
    "dask-one-chunk",
    "dask-many-chunks",
    "xarray-many-chunks",
    "netcdf-path",
]


@pytest.fixture(scope="module")
def solver(sst):
    w = coslat_weights(sst).broadcast_like(sst.isel(time=0)).values
    return eofs_xr.Eof(sst, weights=w)


def _fitted(sst, kind):
    """(model, field as the kind gives it, grid shape) of the weighted SST of eofs."""
    w = coslat_weights(sst)
    flat_w = w.broadcast_like(sst.isel(time=0)).values.ravel()
    values = sst.values.reshape(sst.shape[0], -1)
    if kind == "numpy":
        X, field = scalepca.open_matrix(values, weights=flat_w), values
    elif kind.startswith("dask"):
        arr = da.from_array(values, chunks=(-1 if kind == "dask-one-chunk" else 7, -1))
        X, field = scalepca.open_matrix(arr, weights=flat_w), arr
    elif kind == "xarray-many-chunks":
        X = scalepca.open_matrix(sst.chunk({"time": 9}), sample_dims="time", weights=w)
        field = sst.chunk({"time": 13})
    else:
        path = eofs_examples.example_data_path("sst_ndjfm_anom.nc")
        X = scalepca.open_matrix(
            path,
            variable="sst",
            sample_dims="time",
            weights="sqrt_coslat",
            chunks={"time": 11},
        )
        field = X
    return scalepca.PCA(K).fit(X), field


def _values(out, n_lead):
    """NumPy values of an output, with the grid's shape for array kinds."""
    out = out.compute() if hasattr(out, "compute") else out
    values = np.asarray(out.values if isinstance(out, xr.DataArray) else out)
    return values.reshape(values.shape[:n_lead] + (-1,))


@pytest.mark.parametrize("kind", KINDS)
def test_eofs_and_pcs_match_eofs(sst, solver, kind):
    model, field = _fitted(sst, kind)
    for scaling in (0, 1, 2):
        ref = solver.eofs(neofs=K, eofscaling=scaling)
        got = eofs(model, eofscaling=scaling)
        if kind in ("xarray-many-chunks", "netcdf-path"):
            assert got.dims == ("mode", "latitude", "longitude")
            np.testing.assert_array_equal(got["mode"].values, np.arange(1, K + 1))
        got, ref = _values(got, 1), ref.values.reshape(K, -1)
        s = mode_signs(got, ref)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))  # land
        np.testing.assert_allclose(
            got, s * ref, rtol=0, atol=1e-8 * np.nanmax(np.abs(ref)), equal_nan=True
        )
        ref_pcs = solver.pcs(npcs=K, pcscaling=scaling).values
        got_pcs = pcs(model, field, pcscaling=scaling)
        if kind in ("xarray-many-chunks", "netcdf-path"):
            assert got_pcs.dims == ("time", "mode")
        np.testing.assert_allclose(
            _values(got_pcs, 2)[..., 0],
            ref_pcs * s.T[0],
            rtol=0,
            atol=1e-8 * np.abs(ref_pcs).max(),
        )
    # scaling 1 gives unit-variance PCs; 2 the loadings (EOF · √λ)
    unit = _values(pcs(model, field, pcscaling=1), 2)[..., 0]
    np.testing.assert_allclose(unit.var(axis=0, ddof=1), 1.0, rtol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_reconstructed_field_matches_eofs(sst, solver, kind):
    model, field = _fitted(sst, kind)
    for modes in (3, [1, 2, 5]):
        ref = solver.reconstructedField(modes).values.reshape(sst.shape[0], -1)
        got = reconstructed_field(model, field, modes)
        if kind in ("xarray-many-chunks", "netcdf-path"):
            assert got.dims == ("time", "latitude", "longitude")
        got = _values(got, 1)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_allclose(
            got, ref, rtol=0, atol=1e-8 * np.nanmax(np.abs(ref)), equal_nan=True
        )
    # with the mean: inverse_transform of all the modes' scores
    full = _values(reconstructed_field(model, field, with_mean=True), 1)
    expected = _values(model.inverse_transform(model.transform(field)), 1)
    np.testing.assert_allclose(full, expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    mean = model._preprocessing.unweight(np.asarray(model.mean_))  # the field's units
    anomalies = _values(reconstructed_field(model, field), 1)
    np.testing.assert_allclose(
        full, anomalies + mean, rtol=1e-12, atol=1e-12, equal_nan=True
    )


@pytest.mark.parametrize("kind", KINDS)
def test_project_field_is_uncentred_as_in_eofs(sst, solver, kind):
    model, field = _fitted(sst, kind)
    shifted_sst = (
        sst + 3.0
    )  # far from the fitted mean: centring would change the result
    if kind == "netcdf-path":
        shifted = shifted_sst
    elif kind == "xarray-many-chunks":
        shifted = shifted_sst.chunk({"time": 13})
    else:
        shifted = field + 3.0
    signs = mode_signs(
        _values(eofs(model), 1), solver.eofs(neofs=K).values.reshape(K, -1)
    ).T[0]
    for scaling in (0, 1, 2):
        for weighted in (True, False):
            ref = solver.projectField(
                shifted_sst, neofs=K, eofscaling=scaling, weighted=weighted
            ).values
            got = _values(
                project_field(model, shifted, eofscaling=scaling, weighted=weighted), 2
            )[..., 0]
            np.testing.assert_allclose(
                got, ref * signs, rtol=0, atol=1e-8 * np.abs(ref).max()
            )
    # the centred projection (transform) differs by the mean's projection
    centred = _values(pcs(model, shifted), 2)[..., 0]
    uncentred = _values(project_field(model, shifted), 2)[..., 0]
    assert np.abs(centred - uncentred).max() > 1.0


def test_scalings_bad_input(sst):
    model, field = _fitted(sst, "xarray-many-chunks")
    for bad in (3, -1, True, "1", 1.5):
        with pytest.raises(ValueError, match="eofscaling must be 0"):
            eofs(model, eofscaling=bad)
        with pytest.raises(ValueError, match="pcscaling must be 0"):
            pcs(model, field, pcscaling=bad)
        with pytest.raises(ValueError, match="eofscaling must be 0"):
            project_field(model, field, eofscaling=bad)
    with pytest.raises(ValueError, match="mode numbers run from 1 to 6"):
        reconstructed_field(model, field, [0, 2])
    with pytest.raises(ValueError, match="mode numbers run from 1 to 6"):
        reconstructed_field(model, field, [7])
    with pytest.raises(ValueError, match="only 6 components"):
        reconstructed_field(model, field, 7)
    with pytest.raises(ValueError, match="with_mean must be"):
        reconstructed_field(model, field, 2, with_mean="yes")
    with pytest.raises(ValueError, match="weighted must be"):
        project_field(model, field, weighted=None)
    with pytest.raises(TypeError, match="fitted linear model"):
        eofs(scalepca.PCA(2))
    uncentred = scalepca.PCA(3, zero_center=False).fit(
        np.random.default_rng(0).normal(size=(20, 5))
    )
    with pytest.raises(ValueError, match="zero_center=False"):
        eofs(uncentred, eofscaling=1)
    eofs(uncentred, eofscaling=0)  # unit-norm EOFs need no eigenvalue


def test_outputs_are_lazy_and_one_pass(sst, raise_if_dask_computes):
    model, field = _fitted(sst, "xarray-many-chunks")
    with raise_if_dask_computes():
        out = [
            pcs(model, field, pcscaling=1),
            reconstructed_field(model, field, 2),
            project_field(model, field),
        ]
    for o in out:
        assert isinstance(o.data, da.Array)
        assert o.data.numblocks[0] == field.data.numblocks[0]  # a map per row block
