"""Model stores: round trip of every estimator, atomic writes (SIGKILL mid-save),
outputs."""

from __future__ import annotations

import inspect
import os
import sys
import textwrap

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import scalepca
from scalepca.datasets import make_low_rank_sparse
from scalepca.io import write_array
from scalepca.persistence.loading import load
from scalepca.persistence.registry import METHODS, TWO_FIELDS, estimator_class

from .conftest import low_rank_data
from .support.reliability import REPO, run_until_stopped


def _methods():
    """Every method that fits one field (MCA's two fields: tests/test_mca.py and
    tests/test_analysis_contract.py)."""
    return [
        pytest.param(method, estimator_class(method), id=method)
        for method in METHODS
        if method not in TWO_FIELDS
    ]


def _data_for(method, rng):
    if method == "robust_pca":
        return make_low_rank_sparse(
            90, 60, rank=3, corruption=0.05, chunk_rows=30, seed=1
        )
    return da.from_array(low_rank_data(rng, n=400, d=12, rank=3), chunks=(100, 12))


def _estimator(cls):
    sig = inspect.signature(cls.__init__).parameters
    kw = {}
    if "n_components" in sig:
        kw["n_components"] = 3
    if "random_state" in sig:
        kw["random_state"] = 0
    if "max_iter" in sig:
        kw["max_iter"] = 30
    if "landmarks" in sig:
        kw["n_features"] = 100  # kernel PCA: fewer landmarks than samples
    if "alpha" in sig:
        kw["alpha"] = 0.1  # sparse PCA: small enough that no component is all zero
    return cls(**kw)


def _assert_same_state(a, b):
    sa, sb = a._state_to_save(), b._state_to_save()
    assert sorted(sa) == sorted(sb) or set(sb) >= set(sa) - {"posterior_covariance_"}
    for name, value in sa.items():
        # the saved state of the loaded model (partial_fit's moments are saved as flat
        # private names of one dict, _moments_)
        other = sb[name] if name in sb else getattr(b, name)
        if isinstance(value, da.Array):
            assert isinstance(other, da.Array), name
            np.testing.assert_array_equal(
                value.compute(), other.compute(), err_msg=name
            )
        elif isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, other, err_msg=name)
        else:
            assert value == other or (value != value and other != other), name


@pytest.mark.parametrize("method, cls", _methods())
def test_round_trip_identical_transform(tmp_path, rng, method, cls):
    X = _data_for(method, rng)
    _assert_round_trip(_estimator(cls).fit(X), X, tmp_path / f"{method}.zarr")


@pytest.mark.parametrize(
    "variant", ["sparse-elasticnet", "sparse-batch", "ppca-em-missing"]
)
def test_round_trip_of_solver_variants(tmp_path, rng, variant):
    # the variants keep other fitted state than each class's default
    X = da.from_array(low_rank_data(rng, n=400, d=12, rank=3), chunks=(100, 12))
    if variant == "sparse-elasticnet":
        est = scalepca.SparsePCA(3, method="elasticnet", n_nonzero=[4, 4, 4])
    elif variant == "sparse-batch":
        est = scalepca.SparsePCA(3, method="batch", alpha=0.1, random_state=0)
    else:
        Xn = X.compute()
        Xn[rng.random(Xn.shape) < 0.1] = np.nan
        X = da.from_array(Xn, chunks=(100, 12))
        est = scalepca.PPCA(3, solver="em", missing="em", max_iter=30, random_state=0)
    _assert_round_trip(est.fit(X), X, tmp_path / f"{variant}.zarr")


def _assert_round_trip(est, X, path):
    cls = type(est)
    est.save(path)
    back = load(path)
    assert type(back) is cls
    assert back.get_params() == est.get_params()
    # the solver that ran, recorded by every estimator (issue 46 item 9)
    assert isinstance(est.solver_, str) and back.solver_ == est.solver_
    _assert_same_state(est, back)
    if hasattr(est, "transform"):
        Xc = X.compute()
        np.testing.assert_array_equal(
            np.asarray(back.transform(Xc)), np.asarray(est.transform(Xc))
        )
        Zd = back.transform(X)
        assert isinstance(Zd, da.Array)
        np.testing.assert_array_equal(Zd.compute(), est.transform(X).compute())
    # no pickle anywhere: every file is zarr metadata (JSON) or chunk data
    for root, _, files in os.walk(path):
        for f in files:
            if f.endswith(".json"):
                with open(os.path.join(root, f), "rb") as fh:
                    assert b"pickle" not in fh.read()


def test_store_layout_and_attributes(tmp_path, rng):
    X = low_rank_data(rng)
    pca = scalepca.PCA(3, whiten=True).fit(X)
    pca.save(tmp_path / "m.zarr")
    g = zarr.open_group(tmp_path / "m.zarr", mode="r")
    attrs = dict(g.attrs)
    assert attrs["format"] == "scalepca-model" and attrs["complete"] is True
    assert attrs["class"] == "scalepca.models.pca:PCA"
    assert attrs["scalepca_version"] == scalepca.__version__
    assert attrs["params"]["whiten"] is True and attrs["params"]["n_components"] == 3
    assert g["components_"].shape == (3, X.shape[1])
    np.testing.assert_array_equal(g["mean_"][...], pca.mean_)


def test_load_errors(tmp_path, rng):
    with pytest.raises(FileNotFoundError, match="no zarr store"):
        load(tmp_path / "missing.zarr")
    data = tmp_path / "data.zarr"
    zarr.create_array(data, shape=(4, 2), dtype="f8")
    with pytest.raises(ValueError, match="not a scalepca model store"):
        load(data)
    with pytest.raises(ValueError, match="not fitted"):
        scalepca.PCA(2).save(tmp_path / "unfitted.zarr")
    assert not (tmp_path / "unfitted.zarr").exists()
    pca = scalepca.PCA(2).fit(low_rank_data(rng))
    pca.save(tmp_path / "m.zarr")
    zarr.open_group(tmp_path / "m.zarr", mode="r+").attrs["complete"] = False
    with pytest.raises(ValueError, match="incomplete model store"):
        load(tmp_path / "m.zarr")
    # a store of another format version, or of none, is refused by name
    pca.save(tmp_path / "v.zarr")
    group = zarr.open_group(tmp_path / "v.zarr", mode="r+")
    for version, said in ((2, "version 2"), (None, "version None")):
        group.attrs["format_version"] = version
        with pytest.raises(ValueError, match=f"{said}; this scalepca reads version 1"):
            load(tmp_path / "v.zarr")


def test_overwrite_replaces_whole_store(tmp_path, rng):
    X = low_rank_data(rng)
    path = tmp_path / "m.zarr"
    scalepca.PCA(2).fit(X).save(path)
    ppca = scalepca.PPCA(4).fit(X)
    ppca.save(path, overwrite=True)
    back = load(path)
    assert isinstance(back, scalepca.PPCA)
    np.testing.assert_array_equal(back.transform(X), ppca.transform(X))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.zarr"]  # no .tmp/.old left


_KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    import dask, dask.array as da, numpy as np
    import scalepca
    from tests.support.reliability import stop_after_chunks

    X = np.random.default_rng(0).standard_normal((200, 6))
    pca = scalepca.PCA(2).fit(X)

    # a large fitted array of 40 chunks; the save is SIGKILLed once 3 of them are on disk
    pca.big_ = da.ones((400, 6), chunks=(10, 6))  # non-zero: chunks are written
    stop_after_chunks("big_", 3)
    with dask.config.set(scheduler="synchronous"):
        pca.save(sys.argv[1], overwrite=True)
    print("finished", flush=True)
    """
)


def test_sigkill_mid_save_never_loads_as_complete(tmp_path, rng):
    X = low_rank_data(rng, d=6)
    old = scalepca.PCA(3).fit(X)
    target = tmp_path / "model.zarr"
    old.save(target)
    script = tmp_path / "save.py"
    script.write_text(_KILL_SCRIPT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    out = run_until_stopped([sys.executable, str(script), str(target)], env=env)
    assert "finished" not in out
    (tmp,) = [p for p in tmp_path.iterdir() if p.name.startswith("model.zarr.tmp-")]
    written = sum(len(files) for _, _, files in os.walk(tmp / "big_" / "c"))
    assert 3 <= written < 40  # killed in the middle of the save
    # the killed save left a partial store that is refused ...
    with pytest.raises(ValueError, match="incomplete model store"):
        load(tmp)
    # ... and the target is still the previous, complete model
    back = load(target)
    assert not hasattr(back, "big_")
    np.testing.assert_array_equal(back.transform(X), old.transform(X))


class _ResultRecorder:
    """A synchronous scheduler that records what each compute returns to the client."""

    def __init__(self):
        self.nbytes = 0
        self.computes = 0

    def __call__(self, dsk, keys, **kwargs):
        out = dask.get(dsk, keys, **kwargs)
        self.computes += 1
        stack = [out]
        while stack:
            x = stack.pop()
            if isinstance(x, (list, tuple)):
                stack.extend(x)
            elif isinstance(x, dict):
                stack.extend(x.values())
            elif hasattr(x, "nbytes"):
                self.nbytes += x.nbytes
        return out


def test_write_array_is_blockwise_and_regular(tmp_path, rng):
    X = da.from_array(
        rng.standard_normal((2000, 50)), chunks=((300, 700, 500, 500), (50,))
    )
    rec = _ResultRecorder()
    with dask.config.set(scheduler=rec):
        write_array(X * 2.0, tmp_path / "out.zarr", name="scores", attrs={"note": "x"})
    # 800 kB were written; nothing but task bookkeeping came back to the client
    assert rec.computes >= 1 and rec.nbytes < 10_000
    g = zarr.open_group(tmp_path / "out.zarr", mode="r")
    assert g.attrs["complete"] is True and g.attrs["note"] == "x"
    assert g["scores"].chunks == (
        700,
        50,
    )  # irregular dask chunks made regular for zarr
    np.testing.assert_array_equal(g["scores"][...], X.compute() * 2.0)


def test_write_array_xarray_keeps_coordinates(tmp_path, rng):
    time_ = np.arange(120)
    arr = xr.DataArray(
        da.from_array(rng.standard_normal((120, 3)), chunks=((50, 40, 30), 3)),
        dims=("time", "mode"),
        coords={"time": time_, "mode": [0, 1, 2]},
    )
    write_array(arr, tmp_path / "s.zarr", name="scores")
    ds = xr.open_zarr(tmp_path / "s.zarr", consolidated=False)
    np.testing.assert_array_equal(ds["time"].values, time_)
    np.testing.assert_array_equal(ds["scores"].values, arr.values)


def test_outputs_open_with_xarray_without_a_warning(tmp_path):
    """write_array consolidates the store's metadata: xr.open_zarr opens scores (a
    DataArray with coords, and a plain dask array, which gets dims) with warnings as
    errors."""
    import warnings

    import xarray as xr

    from scalepca.io import write_array

    field = xr.DataArray(
        np.random.default_rng(0).standard_normal((30, 4, 5)),
        dims=("time", "lat", "lon"),
        coords={
            "time": np.arange(30),
            "lat": np.linspace(-60, 60, 4),
            "lon": np.arange(5.0),
        },
    ).chunk({"time": 7})
    model = scalepca.PCA(3).fit(scalepca.open_matrix(field, sample_dims="time"))
    scores = model.transform(scalepca.open_matrix(field, sample_dims="time"))
    write_array(scores, tmp_path / "scores.zarr", name="scores")
    plain = da.from_array(np.arange(24.0).reshape(8, 3), chunks=(3, 3))
    write_array(plain, tmp_path / "plain.zarr", name="scores")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = xr.open_zarr(tmp_path / "scores.zarr")
        np.testing.assert_allclose(ds["scores"].values, np.asarray(scores))
        np.testing.assert_array_equal(ds["time"].values, np.arange(30))
        ds2 = xr.open_zarr(tmp_path / "plain.zarr")
        assert ds2["scores"].dims == ("sample", "mode")
        np.testing.assert_array_equal(ds2["scores"].values, np.asarray(plain))


def test_feature_names_survive_save_and_load(tmp_path):
    """A model fitted on a DataFrame keeps ``feature_names_in_`` through save/load
    (stored as JSON strings, never as an object array), and checks them on new
    frames."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    df = pd.DataFrame(rng.standard_normal((60, 4)), columns=["a", "b", "c", "d"])
    est = scalepca.PCA(2).fit(df)
    est.save(tmp_path / "m.zarr")
    back = scalepca.load(tmp_path / "m.zarr")
    assert back.feature_names_in_.dtype == object
    np.testing.assert_array_equal(back.feature_names_in_, ["a", "b", "c", "d"])
    np.testing.assert_allclose(back.transform(df), est.transform(df), rtol=1e-12)
    with pytest.raises(ValueError, match="feature names"):
        back.transform(df.rename(columns={"a": "z"}))
