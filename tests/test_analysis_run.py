"""The analysis tools as run methods and as model stores: ``model.method: mca``,
``hilbert_eof`` and ``bootstrap_eof`` in ``scalepca run`` / ``validate`` on eofs'
example NetCDF files (equal to the Python estimators), ``scalepca.load`` of their
stores through the registry, and the configs refused before any compute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml

import scalepca
from scalepca.analysis.bootstrap import BootstrapEOF
from scalepca.analysis.hilbert_eof import HilbertEOF
from scalepca.analysis.mca import MCA
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main

from .support.compare import assert_close

CONFIGS = Path(__file__).parents[1] / "configs"
TOL = 1e-12


@pytest.fixture(scope="module")
def files(sst_hgt, tmp_path_factory):
    """eofs' SST and Z500 over their common winters in one NetCDF file (the height's
    grid dims renamed), and the SST alone in another."""
    root = tmp_path_factory.mktemp("analysis_run")
    sst, hgt = sst_hgt
    both = xr.Dataset(
        {"sst": sst, "z": hgt.rename(latitude="lat_z", longitude="lon_z")}
    )
    both.to_netcdf(root / "both.nc", engine="scipy")
    sst.to_dataset().to_netcdf(root / "sst.nc", engine="scipy")
    return root


def _config(
    root: Path, method: str, data: dict, *, report: bool = False, **model
) -> Path:
    """The shipped config of ``method`` on ``data``, outputs under
    ``root/out-<method>``, one in-process worker."""
    cfg = yaml.safe_load((CONFIGS / f"{method}.yaml").read_text())
    cfg["data"] = {"sample_dims": ["time"], "weights": "sqrt_coslat", **data}
    cfg["model"].update(model)
    cfg["output"] = {"store": str(root / f"out-{method}"), "report": report}
    cfg["cluster"] = {"kind": "local", "n_workers": 1, "processes": False}
    cfg["progress"] = False
    path = root / f"{method}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _ran(path: Path, capsys) -> None:
    assert main(["validate", str(path)]) == EXIT_OK, capsys.readouterr().err
    assert main(["run", str(path)]) == EXIT_OK, capsys.readouterr().err


def _opened(root: Path, field: str):
    return scalepca.open_matrix(
        str(root / "both.nc"), variable=field, sample_dims="time", weights="sqrt_coslat"
    )


def test_mca_run_equals_the_estimator(files, capsys):
    path = _config(
        files,
        "mca",
        {"path": str(files / "both.nc"), "variable": ["sst", "z"]},
        n_components=3,
        report=True,
    )
    _ran(path, capsys)
    out = files / "out-mca"
    X, Y = _opened(files, "sst"), _opened(files, "z")
    ref = MCA(3).fit(X, Y)
    model = scalepca.load(out / "model.zarr")
    assert isinstance(model, MCA) and model.get_params() == ref.get_params()
    for name in (
        "components_x_",
        "components_y_",
        "singular_values_",
        "squared_covariance_fraction_",
    ):
        assert_close(getattr(model, name), getattr(ref, name), TOL, name)
    scores = xr.open_zarr(out / "scores.zarr")
    zx, zy = ref.transform(X, Y)
    assert_close(
        scores["scores_x"].transpose("time", "mode"),
        zx.transpose("time", "mode"),
        TOL,
        "x",
    )
    assert_close(
        scores["scores_y"].transpose("time", "mode"),
        zy.transpose("time", "mode"),
        TOL,
        "y",
    )
    assert scores.attrs["fields"] == ["sst", "z"]
    xr.testing.assert_allclose(model.components_y_xr_, ref.components_y_xr_)
    page = (out / "report.html").read_text()
    # the written expansion coefficients are drawn (the report looked for "scores")
    assert "expansion coefficients of X against those of Y" in page
    assert "not drawn" not in page
    # scalepca transform of the saved model reads both fields from the store by the
    # variables the model records and writes run's layout: the same scores
    assert (
        main(
            [
                "transform",
                str(out / "model.zarr"),
                str(files / "both.nc"),
                "--out",
                str(files / "t.zarr"),
                "--no-progress",
                "--no-processes",
                "--n-workers",
                "1",
            ]
        )
        == EXIT_OK
    ), capsys.readouterr().err
    again = xr.open_zarr(files / "t.zarr")
    assert set(again.data_vars) == set(scores.data_vars) and again.attrs == scores.attrs
    for name in ("scores_x", "scores_y"):
        assert_close(
            again[name].transpose("time", "mode"),
            scores[name].transpose("time", "mode"),
            TOL,
            f"transform: {name}",
        )
    assert main(["info", str(out / "model.zarr")]) == EXIT_OK
    said = capsys.readouterr().out
    assert (
        "scalepca.analysis.mca:MCA (complete)" in said and "written by scalepca" in said
    )


def test_mca_config_runs_from_a_base_install(files, tmp_path, monkeypatch, capsys):
    """configs/mca.yaml's own advice (the height's grid dims renamed lat_z, lon_z) works
    without cf_xarray, which a base install lacks: the height's latitude is found by its
    CF attributes (it was refused: "no latitude coordinate"). The model is MCA's of each
    field weighted by √cos of its own latitude, given explicitly."""
    import sys

    # import cf_xarray raises ImportError
    monkeypatch.setitem(sys.modules, "cf_xarray", None)
    path = _config(
        tmp_path,
        "mca",
        {"path": str(files / "both.nc"), "variable": ["sst", "z"]},
        n_components=3,
    )
    _ran(path, capsys)
    with xr.open_dataset(files / "both.nc", engine="scipy") as ds:
        ds = ds.load()
    X, Y = (
        scalepca.open_matrix(
            ds[field], sample_dims="time", weights=np.sqrt(np.cos(np.deg2rad(ds[lat])))
        )
        for field, lat in (("sst", "latitude"), ("z", "lat_z"))
    )
    ref = MCA(3).fit(X, Y)
    model = scalepca.load(tmp_path / "out-mca" / "model.zarr")
    for name in (
        "components_x_",
        "components_y_",
        "singular_values_",
        "squared_covariance_fraction_",
    ):
        assert_close(getattr(model, name), getattr(ref, name), TOL, name)


def test_hilbert_eof_run_equals_the_estimator(files, capsys):
    path = _config(
        files,
        "hilbert_eof",
        {"path": str(files / "sst.nc"), "variable": "sst"},
        n_components=3,
        report=True,
    )
    _ran(path, capsys)
    out = files / "out-hilbert_eof"
    X = scalepca.open_matrix(
        str(files / "sst.nc"), variable="sst", sample_dims="time", weights="sqrt_coslat"
    )
    ref = HilbertEOF(3, padding="exp", decay_factor=0.2).fit(X)
    model = scalepca.load(out / "model.zarr")
    assert isinstance(model, HilbertEOF) and model.get_params() == ref.get_params()
    for name in ("components_", "scores_", "explained_variance_ratio_"):
        assert_close(getattr(model, name), getattr(ref, name), TOL, name)
    scores = xr.open_zarr(out / "scores.zarr")
    amplitude = scores["scores_amplitude"].transpose("time", "mode").values
    phase = scores["scores_phase"].transpose("time", "mode").values
    assert_close(amplitude * np.exp(1j * phase), ref.scores_, TOL, "complex PCs")
    assert_close(amplitude, np.abs(ref.scores_), TOL, "amplitude")
    assert (out / "report.html").exists()


def test_bootstrap_eof_run_equals_the_estimator(files, capsys):
    path = _config(
        files,
        "bootstrap_eof",
        {"path": str(files / "sst.nc"), "variable": "sst"},
        n_components=3,
        n_bootstraps=20,
        report=True,
    )
    _ran(path, capsys)
    out = files / "out-bootstrap_eof"
    X = scalepca.open_matrix(
        str(files / "sst.nc"), variable="sst", sample_dims="time", weights="sqrt_coslat"
    )
    ref = BootstrapEOF(3, n_bootstraps=20, random_state=0).fit(X)
    model = scalepca.load(out / "model.zarr")
    assert isinstance(model, BootstrapEOF) and model.get_params() == ref.get_params()
    for name in (
        "components_",
        "explained_variance_",
        "explained_variance_ratio_interval_",
        "components_interval_",
        "explained_variance_ratio_samples_",
    ):
        assert_close(getattr(model, name), getattr(ref, name), TOL, name)
    assert model.n_significant_ == ref.n_significant_
    scores = xr.open_zarr(out / "scores.zarr")["scores"].transpose("time", "mode")
    assert_close(scores, ref.transform(X).transpose("time", "mode"), TOL, "PCs")
    # the PCs are those of the EOFs: (x − mean) · EOF over the ocean cells
    Xv = X.values.reshape(50, -1)
    keep = ~np.isnan(ref.mean_)
    assert_close(
        scores,
        (Xv[:, keep] - ref.mean_[keep]) @ ref.components_[:, keep].T,
        1e-10,
        "by hand",
    )
    assert (out / "report.html").exists()


@pytest.mark.parametrize(
    "make",
    [
        lambda X, Y: MCA(2, standardize=(True, False)).fit(X, Y),
        lambda X, Y: HilbertEOF(2, padding=None, solver="covariance").fit(X),
        lambda X, Y: BootstrapEOF(2, n_bootstraps=10, random_state=None).fit(X),
    ],
    ids=["mca", "hilbert_eof", "bootstrap_eof"],
)
def test_load_of_save_is_the_model(files, tmp_path, make):
    """scalepca.load(store of est.save) is the estimator: its class, parameters and
    state."""
    X, Y = _opened(files, "sst"), _opened(files, "z")
    est = make(X, Y)
    est.save(tmp_path / "m.zarr")
    got = scalepca.load(tmp_path / "m.zarr")
    assert type(got) is type(est) and got.get_params() == est.get_params()
    fitted = [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]
    assert fitted and sorted(fitted) == sorted(
        k for k in vars(got) if k.endswith("_") and not k.startswith("_")
    )
    for name in fitted:
        a, b = getattr(est, name), getattr(got, name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name
        else:
            assert a == b or (a != a and b != b), name


def test_tampered_stores_are_refused(files, tmp_path):
    """An analysis tool's store is checked as every model store is before anything is
    built: parameters against the table, state names and array shapes."""
    import zarr

    X = _opened(files, "sst")
    HilbertEOF(2).fit(X).save(tmp_path / "h.zarr")
    group = zarr.open_group(str(tmp_path / "h.zarr"), mode="r+")
    params = dict(group.attrs["params"])
    group.attrs["params"] = {**params, "padding": "reflect"}
    with pytest.raises(ValueError, match="padding"):
        scalepca.load(tmp_path / "h.zarr")
    group.attrs["params"] = params
    scalars = dict(group.attrs["scalars"])
    group.attrs["scalars"] = {**scalars, "fit": 1}
    with pytest.raises(ValueError, match="'fit' cannot be fitted state of HilbertEOF"):
        scalepca.load(tmp_path / "h.zarr")
    group.attrs["scalars"] = scalars
    group.create_array("extra_", data=np.zeros((10**5, 3)))
    group.attrs["arrays"] = [*group.attrs["arrays"], "extra_"]
    with pytest.raises(ValueError, match="'extra_' has shape"):
        scalepca.load(tmp_path / "h.zarr")


BAD = [
    (
        "mca",
        {"variable": "sst"},
        {},
        "model.method mca pairs two fields over the same "
        "samples: set 'data.variable' to a list of two",
    ),
    ("mca", {"variable": ["sst", "z", "sst"]}, {}, "a list of two variable names"),
    ("mca", {}, {"n_components": 0}, "model.n_components"),
    (
        "mca",
        {},
        {"standardize": "yes"},
        "'model.standardize' must be true, false or a pair",
    ),
    (
        "mca",
        {},
        {"n_components": 600},
        "model.n_components: 600 but the fields have 540 and 1421",
    ),
    (
        "mca",
        {},
        {"max_cross_size": 1000, "solver": "covariance"},
        "over model.max_cross_size",
    ),
    (
        "mca",
        {"output.reconstruction": True},
        {},
        "'output.reconstruction' does not apply to model.method mca",
    ),
    ("hilbert_eof", {"variable": ["sst", "z"]}, {}, "fits several fields"),
    ("hilbert_eof", {}, {"padding": "reflect"}, "model.padding"),
    (
        "hilbert_eof",
        {},
        {"n_components": 60},
        "model.n_components: 60 but the field has 50 samples",
    ),
    (
        "hilbert_eof",
        {"output.reconstruction": True},
        {},
        "'output.reconstruction' does not apply to model.method hilbert_eof",
    ),
    (
        "bootstrap_eof",
        {"output.reconstruction": True},
        {},
        "'output.reconstruction' does not apply to model.method bootstrap_eof",
    ),
    (
        "bootstrap_eof",
        {"output.update": True},
        {},
        "'output.update' does not apply to model.method bootstrap_eof",
    ),
    ("bootstrap_eof", {}, {"confidence": 1.5}, "model.confidence"),
    (
        "bootstrap_eof",
        {},
        {"n_components": 50},
        "model.n_components: 50 but the field has 50 samples",
    ),
    (
        "bootstrap_eof",
        {},
        {"solver": "covariance", "n_bootstraps": 1000},
        "over model.max_partial_bytes",
    ),
    ("bootstrap_eof", {}, {"n_boots": 3}, "n_boots"),
    # xeofs' name of n_components: refused, scalepca's name suggested
    *[
        (m, {}, {"n_modes": 3}, "unknown key(s) 'model.n_modes'")
        for m in ("mca", "hilbert_eof", "bootstrap_eof")
    ],
    *[
        (m, {}, {"n_modes": 3}, "did you mean 'n_components'?")
        for m in ("mca", "hilbert_eof", "bootstrap_eof")
    ],
]


@pytest.mark.parametrize(
    "method, data, model, said", BAD, ids=[f"{m}-{i}" for i, (m, *_) in enumerate(BAD)]
)
def test_bad_configs_are_refused_before_compute(
    files, method, data, model, said, capsys, raise_if_dask_computes
):
    """validate and run refuse in config words, before a cluster starts or data are
    read."""
    path = files / ("both.nc" if method == "mca" else "sst.nc")
    output = {k.split(".", 1)[1]: v for k, v in data.items() if k.startswith("output.")}
    data = {
        "path": str(path),
        "variable": ["sst", "z"] if method == "mca" else "sst",
        **{k: v for k, v in data.items() if not k.startswith("output.")},
    }
    cfg = _config(files, method, data, **model)
    raw = yaml.safe_load(cfg.read_text())
    raw["output"].update(output)
    cfg.write_text(yaml.safe_dump(raw))
    with raise_if_dask_computes():
        for command in ("validate", "run"):
            assert main([command, str(cfg)]) == EXIT_USER_ERROR
            err = capsys.readouterr().err
            assert said in err, err
