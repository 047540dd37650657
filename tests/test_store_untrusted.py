"""``scalepca.load`` on hostile model stores: a store is data and never runs code.

Each store here is written with zarr directly, as an attacker would (stores come from
``s3://``). Every one must be refused with a ``ValueError`` that names the problem,
before an estimator is built or an array is read — and nothing the store names may
have run: the shell commands below would create a file, which must not exist
afterwards.
"""

from __future__ import annotations

import pytest
import zarr

import scalepca
from scalepca.persistence.loading import load

from .conftest import low_rank_data

#: every ``__init__`` of a class named in a store that ran (there must be none)
CONSTRUCTED: list = []


class UnregisteredPCA(scalepca.PCA):
    """A subclass that is not in scalepca's registry; records any construction."""

    def __init__(self, n_components=None, **kw):
        CONSTRUCTED.append(type(self).__name__)
        super().__init__(n_components, **kw)


def _genuine(tmp_path, rng, name="m.zarr"):
    """A store written by the current code (PCA with 12 features, 3 components)."""
    path = tmp_path / name
    scalepca.PCA(3).fit(low_rank_data(rng, n=200, d=12)).save(path)
    return path


def _edit(path, **attrs):
    g = zarr.open_group(str(path), mode="r+")
    g.attrs.update(attrs)
    return g


def _forged(tmp_path, cls_name, params, name="evil.zarr"):
    """A model store made from nothing but attributes, naming ``cls_name``."""
    g = zarr.open_group(str(tmp_path / name), mode="w")
    g.attrs.update(
        {
            "format": "scalepca-model",
            "format_version": 1,
            "scalepca_version": "0.1.0",
            "class": cls_name,
            "params": params,
            "scalars": {"n_features_in_": 2},
            "arrays": [],
            "lazy_arrays": [],
            "complete": True,
        }
    )
    return tmp_path / name


def test_genuine_and_old_class_strings_still_load(tmp_path, rng):
    # the "module:Class" form every store written so far carries maps by class name
    path = _genuine(tmp_path, rng)
    assert zarr.open_group(str(path)).attrs["class"] == "scalepca.models.pca:PCA"
    assert type(load(path)) is scalepca.PCA
    X = low_rank_data(rng, n=200, d=12)
    scalepca.PPCA(3).fit(X).save(tmp_path / "p.zarr")
    assert (
        zarr.open_group(str(tmp_path / "p.zarr")).attrs["class"]
        == "scalepca.models.ppca:PPCA"
    )
    assert type(load(tmp_path / "p.zarr")) is scalepca.PPCA


def test_state_of_another_estimator_is_a_clear_error(tmp_path, rng):
    path = _genuine(tmp_path, rng)
    # a PCA's state has no W_
    _edit(path, **{"class": "scalepca.models.ppca:PPCA", "params": {"n_components": 3}})
    with pytest.raises(ValueError, match=r"its saved state does not make a PPCA.*W_"):
        load(path)


@pytest.mark.parametrize(
    "spec, params",
    [
        ("subprocess:Popen", {"args": "echo pwned > {out}", "shell": True}),
        ("os:system", {"command": "echo pwned > {out}"}),
        ("builtins:eval", {"source": "__import__('os').system('echo pwned > {out}')"}),
        ("builtins:exec", {"source": "open('{out}', 'w').write('pwned')"}),
        ("scalepca.models.pca:__import__('os').system", {}),
    ],
    ids=["subprocess.Popen", "os.system", "builtins.eval", "builtins.exec", "mangled"],
)
def test_other_modules_never_run(tmp_path, spec, params):
    out = tmp_path / "pwned"
    params = {
        k: v.format(out=out) if isinstance(v, str) else v for k, v in params.items()
    }
    path = _forged(tmp_path, spec, params)
    with pytest.raises(ValueError, match=r"is not a scalepca estimator.*PCA, PPCA"):
        load(path)
    assert not out.exists(), "a class named in the store ran"


@pytest.mark.parametrize(
    "spec, params",
    [
        (
            "scalepca.io._store:atomic_group",
            {"path": "{tmp}/written.zarr", "write": None},
        ),
        ("scalepca.cli:main", {"argv": ["info", "{tmp}/x.zarr"]}),
        ("scalepca.app.cluster:connect", {}),
        ("scalepca.models.pca:affine_map", {}),
        ("scalepca.models.base:DecompositionMixin", {}),
        ("scalepca.models.pca:UnregisteredPCA", {"n_components": 3}),
        (f"{__name__}:UnregisteredPCA", {"n_components": 3}),
        ("PCA", {"n_components": 3}),  # no module: not the form scalepca writes
    ],
    ids=[
        "atomic_group",
        "cli.main",
        "connect",
        "function",
        "base-class",
        "subclass-in-scalepca",
        "subclass-elsewhere",
        "bare",
    ],
)
def test_scalepca_names_that_are_not_registered_estimators(tmp_path, rng, spec, params):
    params = {
        k: v.format(tmp=tmp_path) if isinstance(v, str) else v
        for k, v in params.items()
    }
    path = _genuine(tmp_path, rng)
    _edit(path, **{"class": spec, "params": params})
    CONSTRUCTED.clear()
    with pytest.raises(ValueError, match=r"is not a scalepca estimator"):
        load(path)
    assert CONSTRUCTED == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.zarr"]  # nothing written


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"n_components": 3, "evil": 1},
            r"unknown key\(s\) 'params.evil'; allowed: n_components",
        ),
        ({"n_components": 3, "args": "echo pwned"}, r"unknown key\(s\) 'params.args'"),
        (
            {"n_components": "all"},
            r"'params.n_components' must be an integer >= 1, a float in \(0, 1\), "
            r"'mle' or null; got 'all'",
        ),
        (
            {"n_components": 3, "whiten": "yes"},
            r"'params.whiten' must be true or false",
        ),
        (
            {"n_components": 3, "svd_solver": ["full"]},
            r"'params.svd_solver' must be a string",
        ),
        ([1, 2], r"'params' must be a mapping"),
    ],
    ids=[
        "unknown",
        "popen-arg",
        "n_components-str",
        "whiten-str",
        "solver-list",
        "not-a-dict",
    ],
)
def test_params_checked_against_the_signature(tmp_path, rng, params, message):
    path = _genuine(tmp_path, rng)
    _edit(path, params=params)
    with pytest.raises(ValueError, match=message):
        load(path)


@pytest.mark.parametrize(
    "name",
    [
        "__class__",
        "__dict__",
        "fit",
        "transform",
        "_restore_state",
        "components_xr_",
        "n_components",
        "__init__",
        "_saved_private",
        "a b_",
        "x.y_",
    ],
)
def test_hostile_state_names(tmp_path, rng, name):
    path = _genuine(tmp_path, rng)
    g = zarr.open_group(str(path), mode="r+")
    _edit(path, scalars={**g.attrs["scalars"], name: 1})
    with pytest.raises(ValueError, match=r"cannot be fitted state of PCA"):
        load(path)


def test_hostile_array_name(tmp_path, rng):
    path = _genuine(tmp_path, rng)
    g = zarr.open_group(str(path), mode="r+")
    g.create_array("transform", shape=(3,), dtype="f8")
    _edit(path, arrays=[*g.attrs["arrays"], "transform"])
    with pytest.raises(
        ValueError, match=r"'transform'.* cannot be fitted state of PCA"
    ):
        load(path)


def _add_array(path, list_name, name, shape, dtype="f8", replace=True):
    g = zarr.open_group(str(path), mode="r+")
    if name in g and replace:
        del g[name]
    g.create_array(name, shape=shape, dtype=dtype)  # metadata only: no chunk is written
    names = list(g.attrs[list_name])
    if name not in names:
        _edit(path, **{list_name: [*names, name]})


@pytest.mark.parametrize(
    "list_name, name, shape, dtype, message",
    [
        # 8 TB if read: refused from its metadata, before any read
        ("arrays", "components_", (3, 10**12), "f8", r"array 'components_' has shape"),
        (
            "arrays",
            "big_",
            (10**6, 10**6),
            "f8",
            r"no axis longer than the model's largest size",
        ),
        (
            "arrays",
            "cube_",
            (200, 200, 200),
            "f8",
            r"'cube_' has shape .* at most 200² values",
        ),
        (
            "arrays",
            "components_",
            (3, 11),
            "f8",
            r"components_ has shape \(3, 11\); expected \(n_components_, "
            r"n_features_in_\)",
        ),
        ("arrays", "components_", (4, 12), "f8", r"expected .* = \(3, 12\)"),
        ("arrays", "mean_", (11,), "f8", r"mean_ has shape \(11,\); expected \(12,\)"),
        ("arrays", "components_", (3, 12), str, r"'components_' has dtype"),
        ("arrays", "extra_", (3,), [("a", "f8")], r"'extra_' has dtype"),
        ("arrays", "extra_", (3,), "c16", r"'extra_' has dtype complex128"),
        (
            "lazy_arrays",
            "low_rank_",
            (10, 10**9),
            "f8",
            r"lazy array 'low_rank_' has shape",
        ),
    ],
    ids=[
        "huge-components",
        "huge-extra",
        "3-d",
        "width",
        "rows",
        "mean",
        "string",
        "structured",
        "complex",
        "huge-lazy",
    ],
)
@pytest.mark.filterwarnings("ignore:The data type")  # zarr: dtypes without a v3 spec
def test_absurd_arrays_refused_from_metadata(
    tmp_path, rng, list_name, name, shape, dtype, message
):
    path = _genuine(tmp_path, rng)
    _add_array(path, list_name, name, shape, dtype)
    with pytest.raises(ValueError, match=message):
        load(path)


@pytest.mark.parametrize(
    "scalars, message",
    [
        ({"n_features_in_": -1}, r"n_features_in_ must be a positive integer; got -1"),
        ({"n_features_in_": "12"}, r"n_features_in_ must be a positive integer"),
        ({"n_components_": 10**9}, r"components_ has shape \(3, 12\); expected"),
    ],
)
def test_size_scalars_checked(tmp_path, rng, scalars, message):
    path = _genuine(tmp_path, rng)
    g = zarr.open_group(str(path), mode="r+")
    _edit(path, scalars={**g.attrs["scalars"], **scalars})
    with pytest.raises(ValueError, match=message):
        load(path)


def test_listed_array_missing(tmp_path, rng):
    path = _genuine(tmp_path, rng)
    g = zarr.open_group(str(path), mode="r+")
    _edit(path, arrays=[*g.attrs["arrays"], "ghost_"])
    with pytest.raises(ValueError, match=r"'ghost_' is missing or not an array"):
        load(path)
