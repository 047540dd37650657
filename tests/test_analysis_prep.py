"""The analysis tools own their data's preparation (MCA, Hilbert EOF, bootstrap EOF),
as every scalepca model: ``transform`` of new raw data (a DataArray in the field's
own layout and units, a Dataset holding its variable) repeats the fit's stacking and
weighting from the model alone, also after ``scalepca.save``/``scalepca.load``, and
``scalepca transform`` reads their saved models' fields by name; on eofs' example
winters (SST × Z500, √cos φ weighted)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import zarr

import scalepca
from scalepca.analysis.bootstrap import BootstrapEOF
from scalepca.analysis.hilbert_eof import HilbertEOF
from scalepca.analysis.mca import MCA
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main

from .support.compare import assert_close

TOL = 1e-12
WEIGHTED = dict(sample_dims="time", weights="sqrt_coslat")
CLI = ["--no-progress", "--no-processes", "--n-workers", "1"]


@pytest.fixture(scope="module")
def files(sst_hgt, tmp_path_factory):
    """eofs' SST and Z500 of the common winters in one NetCDF file (the height's grid
    dims renamed: two grids in one store, as ``scalepca run``'s MCA reads them)."""
    root = tmp_path_factory.mktemp("analysis_prep")
    sst, hgt = sst_hgt
    both = xr.Dataset(
        {"sst": sst, "z": hgt.rename(latitude="lat_z", longitude="lon_z")}
    )
    both.to_netcdf(root / "both.nc", engine="scipy")
    return root


def _opened(root, name):
    return scalepca.open_matrix(str(root / "both.nc"), variable=name, **WEIGHTED)


def _raw(root, name):
    return xr.open_dataset(root / "both.nc", engine="scipy")[name]


def _values(Z):
    """Scores as (time, mode) NumPy (complex kept)."""
    if isinstance(Z, xr.DataArray):
        Z = Z.transpose("time", "mode").values
    return np.asarray(Z)


def _fit(name, root):
    X = _opened(root, "sst")
    if name == "mca":
        return MCA(2).fit(X, _opened(root, "z"))
    if name == "hilbert_eof":
        return HilbertEOF(2).fit(X)
    return BootstrapEOF(2, n_bootstraps=10, random_state=0).fit(X)


def _transform(model, fields):
    """The scores of ``fields`` ((sst, z)): MCA's pair, the others' of the SST."""
    if isinstance(model, MCA):
        return model.transform(*fields)
    return (model.transform(fields[0]),)


TOOLS = ["mca", "hilbert_eof", "bootstrap_eof"]


@pytest.mark.parametrize("name", TOOLS)
def test_transform_of_the_raw_fields_after_load(files, name, tmp_path):
    """Saved, loaded, the tool stacks and weighs the raw fields itself: their scores
    equal those of the matrices open_matrix made (1e-12), also on other times, and on
    the training fields the fitted scores (Hilbert EOF: ``scores_``)."""
    fitted = _fit(name, files)
    fitted.save(tmp_path / "tool.zarr")
    model = scalepca.load(tmp_path / "tool.zarr")
    matrices = (_opened(files, "sst"), _opened(files, "z"))
    raw = (_raw(files, "sst"), _raw(files, "z"))
    for got, expected, fit in zip(
        _transform(model, raw),
        _transform(model, matrices),
        _transform(fitted, matrices),
        strict=False,
    ):
        assert got.dims[0] == "time" and got.dims[-1] == "mode"
        assert_close(
            _values(got),
            _values(expected),
            TOL,
            f"{name}: raw fields vs their matrices",
        )
        assert_close(
            _values(got),
            _values(fit),
            TOL,
            f"{name}: the loaded model vs the fitted one",
        )
    if name == "hilbert_eof":
        assert_close(
            _values(model.transform(raw[0])),
            _values(fitted.scores_),
            TOL,
            "hilbert_eof: scores_",
        )
    # other times, as a Dataset: the variable taken by the name the model records
    later = xr.Dataset(
        {
            "sst": raw[0].isel(time=slice(20, None)),
            "z": raw[1].isel(time=slice(20, None)),
        }
    )
    by_hand = [scalepca.open_matrix(later[v], **WEIGHTED) for v in ("sst", "z")]
    for got, expected in zip(
        _transform(model, (later, later)), _transform(model, by_hand), strict=False
    ):
        assert got.sizes["time"] == 30
        assert_close(
            _values(got), _values(expected), TOL, f"{name}: a Dataset of later winters"
        )


def test_hilbert_inverse_transform_in_the_field_units(files):
    """All modes of the weighted field: inverse_transform gives the field back in its
    own units (the weights the model recorded divided out), NaN over land."""
    X = _opened(files, "sst")
    model = HilbertEOF(50, padding=None).fit(X)
    Xhat = model.inverse_transform()
    field = _raw(files, "sst").transpose("time", "latitude", "longitude")
    got = Xhat.transpose("time", "latitude", "longitude").values
    ocean = ~np.isnan(field.values)
    np.testing.assert_allclose(
        got[ocean], field.values[ocean], atol=1e-10 * np.nanmax(np.abs(field.values))
    )
    assert np.isnan(got[~ocean]).all()


@pytest.mark.parametrize("name", TOOLS)
def test_cli_transform_of_a_saved_tool(files, name, tmp_path, capsys):
    """`scalepca transform MODEL DATA --out` of a tool's store: the arrays of run's
    scores.zarr (the same names and attributes), equal to the tool's transform in
    Python."""
    model = _fit(name, files)
    model.save(tmp_path / "tool.zarr")
    out = tmp_path / "scores.zarr"
    assert (
        main(
            [
                "transform",
                str(tmp_path / "tool.zarr"),
                str(files / "both.nc"),
                "--out",
                str(out),
                *CLI,
            ]
        )
        == EXIT_OK
    ), capsys.readouterr().err
    written = xr.open_zarr(out)
    fields = (_opened(files, "sst"), _opened(files, "z"))
    arrays, attrs = (
        model.scores_arrays(fields)
        if name == "mca"
        else model.scores_arrays(fields[0], fitted=True)
    )
    assert set(written.data_vars) == set(arrays)
    assert {
        k: v for k, v in written.attrs.items() if k not in ("format", "complete")
    } == (attrs or {})
    for key, expected in arrays.items():
        assert_close(_values(written[key]), _values(expected), TOL, f"{name}: {key}")
    if name == "hilbert_eof":
        z = written["scores_amplitude"] * np.exp(1j * written["scores_phase"])
        assert_close(
            _values(z), _values(model.scores_), TOL, "hilbert_eof: complex PCs"
        )
    assert zarr.open_group(str(out), mode="r").attrs["format"] == "scalepca-output"


@pytest.mark.parametrize(
    "model_of, args, said",
    [
        (
            "mca",
            ["--variable", "sst"],
            "--variable does not apply: the MCA model was fitted on "
            "the fields sst (X) and z (Y)",
        ),
        (
            "mca",
            ["--weights", "coslat", "--sample-dims", "time"],
            "--sample-dims and --weights do not apply",
        ),
        (
            "mca-sst-only",
            [],
            "has no variable(s) z; the MCA model was "
            "fitted on the fields sst (X) and z (Y)",
        ),
        ("mca-arrays", [], "the MCA model records no variable for field X"),
        (
            "hilbert_eof",
            ["--variable", "z"],
            "--variable 'z': the model was fitted on variable 'sst'",
        ),
        (
            "bootstrap_eof",
            ["--sample-dims", "longitude"],
            "--sample-dims longitude: the model was fitted with sample dims time",
        ),
        (
            "bootstrap_eof",
            ["--weights", "coslat"],
            "--weights coslat: the data would be weighted by coslat",
        ),
        (
            "hilbert_eof-grid",
            [],
            "the data is not on the grid the model was fitted on: 29 along "
            "'longitude' (fitted: 30)",
        ),
        (
            "bootstrap_eof-grid",
            [],
            "the data is not on the grid the model was fitted on: 29 along "
            "'longitude' (fitted: 30)",
        ),
        (
            "hilbert_eof-moved",
            [],
            "the data is not on the features the model was fitted on: the "
            "'longitude' coordinates differ",
        ),
    ],
    ids=[
        "mca-variable",
        "mca-weights",
        "mca-missing-field",
        "mca-arrays",
        "hilbert-variable",
        "bootstrap-dims",
        "bootstrap-weights",
        "hilbert-grid",
        "bootstrap-grid",
        "hilbert-moved-grid",
    ],
)
def test_cli_transform_refuses_before_compute(
    files, sst_hgt, model_of, args, said, tmp_path, capsys, raise_if_dask_computes
):
    """Bad combinations of a tool's model and DATA or options: exit 2, one line in the
    command line's words, nothing computed or written."""
    data = files / "both.nc"
    if model_of == "mca-arrays":
        values = [_raw(files, v).values.reshape(50, -1) for v in ("sst", "z")]
        model = MCA(2).fit(*(np.nan_to_num(v) for v in values))
    else:
        model = _fit(model_of.split("-")[0], files)
    if model_of == "mca-sst-only":
        data = tmp_path / "sst.nc"
        sst_hgt[0].to_dataset().to_netcdf(data, engine="scipy")
    if model_of.endswith("-grid"):  # the same variable on a grid with a longitude less
        data = tmp_path / "sst_cut.nc"
        sst_hgt[0].isel(longitude=slice(1, None)).to_dataset().to_netcdf(
            data, engine="scipy"
        )
    if model_of.endswith("-moved"):  # the same sizes, the longitudes moved
        data = tmp_path / "sst_moved.nc"
        sst = sst_hgt[0]
        sst.assign_coords(longitude=sst["longitude"] + 1.0).to_dataset().to_netcdf(
            data, engine="scipy"
        )
    model.save(tmp_path / "tool.zarr")
    with raise_if_dask_computes():
        rc = main(
            [
                "transform",
                str(tmp_path / "tool.zarr"),
                str(data),
                "--out",
                str(tmp_path / "s.zarr"),
                *args,
                *CLI,
            ]
        )
    err = capsys.readouterr().err
    assert rc == EXIT_USER_ERROR and said in err, err
    assert not (tmp_path / "s.zarr").exists()


def test_raw_field_on_another_grid_is_refused_before_compute(
    files, raise_if_dask_computes
):
    """A raw field on another grid, or another variable, is refused by the model's
    record, naming what differs, before anything is read."""
    model, mca = _fit("hilbert_eof", files), _fit("mca", files)
    sst = _raw(files, "sst")
    with raise_if_dask_computes():
        with pytest.raises(ValueError, match="not on the grid the model was fitted on"):
            model.transform(sst.isel(latitude=slice(1, None)))
        with pytest.raises(
            ValueError, match="variable 'z'; the model was fitted on variable 'sst'"
        ):
            model.transform(sst.rename("z"))
        with pytest.raises(
            ValueError,
            match="Y is variable 'sst'; the model was fitted on variable 'z'",
        ):
            mca.transform(Y=sst)
        with pytest.raises(
            ValueError, match=r"Y has dims .*\(missing \[.lat_z., .lon_z.\]"
        ):
            mca.transform(Y=sst.rename("z"))


def test_a_moved_grid_is_refused_as_by_pca(files, raise_if_dask_computes):
    """A field of the fitted sizes whose coordinates moved is not the fitted grid:
    every tool refuses it as PCA's transform does (raw or through open_matrix),
    before anything is read, naming the coordinate."""
    sst, z = _raw(files, "sst"), _raw(files, "z")
    moved = sst.assign_coords(longitude=sst["longitude"] + 1.0)
    said = "not on the features the model was fitted on: the 'longitude' coordinates differ"
    models = {name: _fit(name, files) for name in TOOLS}
    pca = scalepca.PCA(2).fit(_opened(files, "sst"))
    with raise_if_dask_computes():
        for m in (pca, models["hilbert_eof"], models["bootstrap_eof"]):
            for data in (
                moved,
                scalepca.open_matrix(moved.to_dataset(), variable="sst", **WEIGHTED),
            ):
                with pytest.raises(ValueError, match=said):
                    m.transform(data)
        with pytest.raises(ValueError, match="X is " + said):
            models["mca"].transform(moved, z)
        moved_z = z.assign_coords(lat_z=z["lat_z"] + 0.5)
        with pytest.raises(
            ValueError, match="Y is not on the features .* 'lat_z' coordinates"
        ):
            models["mca"].transform(Y=moved_z)
