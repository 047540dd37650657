"""The parameter tables of the estimators (``scalepca/models/_params.py``): one table
per estimator, the same as its ``__init__``, and ``fit`` and ``scalepca validate``
refusing the same bad values because both read it."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import xarray as xr
import yaml

from scalepca.analysis.mca import MCA
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets import make_low_rank, write_dataset
from scalepca.models._params import Shape, parameter_problems, table_of
from scalepca.persistence.registry import METHODS, TWO_FIELDS, estimator_class

N, D = 200, 12


def _init_params(cls) -> set:
    return {
        name
        for name, par in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and par.kind not in (par.VAR_POSITIONAL, par.VAR_KEYWORD)
    }


@pytest.mark.parametrize("method", METHODS)
def test_table_is_the_init_signature(method):
    """Every __init__ parameter is declared, and every declared one is an __init__
    parameter: a renamed parameter cannot leave its check behind."""
    _check_table(estimator_class(method))


#: the analysis tools that declare a table (not methods of a config)
ANALYSIS_TOOLS = [MCA]


@pytest.mark.parametrize("cls", ANALYSIS_TOOLS, ids=lambda cls: cls.__name__)
def test_analysis_table_is_the_init_signature(cls):
    """The same for the analysis tools that declare a table (MCA)."""
    _check_table(cls)


def _check_table(cls):
    table = table_of(cls)
    assert set(table) == _init_params(cls), (
        f"{cls.__name__}: not declared {sorted(_init_params(cls) - set(table))}, "
        f"declared but not parameters {sorted(set(table) - _init_params(cls))}"
    )
    for rule in getattr(cls, "_parameter_rules", ()):
        assert set(rule.needs) <= set(table), rule
    # the defaults pass their own checks, for data of the test's shape
    defaults = cls().get_params(deep=False)
    assert parameter_problems(cls, defaults, Shape(N, D)) == []


#: values of the wrong form or out of range, by the kind of parameter; a value the table
#: itself accepts for the test's data is not used
CANDIDATES = {
    "int": ["x", -(10**9), 2.5, True],
    "real": ["x", -1e9],
    "flag": ["yes", 1],
    "choice": ["no-such-choice", 3],
    "seed": [-1, "x"],
    "path": [3],
    "n_components": [0, 10**6, "x", 2.5],
    "other": ["x", -1, [-1.0]],
}


def _bad_values():
    for method in METHODS:
        cls = estimator_class(method)
        defaults = cls().get_params(deep=False)
        for name, param in table_of(cls).items():
            for value in CANDIDATES[param.kind]:
                if parameter_problems(cls, {**defaults, name: value}, Shape(N, D)):
                    yield pytest.param(
                        method, name, value, id=f"{method}-{name}={value!r}"
                    )


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("params")
    write_dataset(make_low_rank(N, D, rank=3, chunk_rows=50, seed=0), root / "x.zarr")
    X = np.random.default_rng(1).standard_normal((N, D))
    xr.Dataset(
        {"a": (("sample", "f"), X[:, : D // 2]), "b": (("sample", "g"), X[:, D // 2 :])}
    ).to_netcdf(root / "xy.nc", engine="scipy")
    return root


def _config(root, method, params) -> str:
    data = {"path": "x.zarr"}
    if method in TWO_FIELDS:  # two fields over the same samples
        data = {"path": "xy.nc", "variable": ["a", "b"], "sample_dims": ["sample"]}
    cfg = {
        "data": data,
        "model": {"method": method, "params": params},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
    }
    path = root / f"{method}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.mark.parametrize("method", METHODS)
def test_defaults_validate(store, method, capsys):
    assert main(["validate", _config(store, method, {})]) == EXIT_OK, (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("method, name, value", list(_bad_values()))
def test_fit_and_validate_refuse_the_same_values(
    store, method, name, value, capsys, raise_if_dask_computes
):
    cls = estimator_class(method)
    X = np.random.default_rng(0).standard_normal((N, D))
    with pytest.raises((TypeError, ValueError)) as err, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls(**{name: value}).fit(
            *((X[:, : D // 2], X[:, D // 2 :]) if method in TWO_FIELDS else (X,))
        )
    assert name in str(err.value), err.value  # in Python words: the parameter's name
    assert main(["validate", _config(store, method, {name: value})]) == EXIT_USER_ERROR
    said = capsys.readouterr().err
    # in config words: the key (a parameter named method sits under model.params)
    assert ("model.params.method" if name == "method" else f"model.{name}") in said, (
        said
    )
    assert f"{name}=" not in said, said
