"""Run-config validation: every shipped config, and every error names the key and the
choices."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scalepca.app.config import (
    CLUSTER_KINDS,
    ConfigError,
    apply_overrides,
    check_cluster,
    load_config,
    validate_config,
)
from scalepca.persistence.registry import METHODS

CONFIGS = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))


def _base(**sections):
    cfg = {"data": {"path": "x.zarr"}, "model": {"method": "pca", "n_components": 2}}
    cfg.update(sections)
    return cfg


def test_configs_present():
    names = {p.stem for p in CONFIGS}
    assert {"quickstart", "slurm", "pbs", "address"} <= names
    assert set(METHODS) <= names, (
        f"a config per method is missing: {set(METHODS) - names}"
    )


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_validates(path):
    method = yaml.safe_load(path.read_text())["model"]["method"]
    cfg = load_config(path)
    assert cfg["model"]["method"] == method
    assert cfg["cluster"]["kind"] in CLUSTER_KINDS


def test_quickstart_defaults_filled():
    cfg = load_config(Path(__file__).parents[1] / "configs" / "quickstart.yaml")
    assert cfg["model"] == {"method": "ppca", "params": {"n_components": 10}}
    assert cfg["data"]["generate"]["kind"] == "low_rank"
    assert cfg["output"]["scores"] is True and cfg["output"]["reconstruction"] is False
    assert cfg["progress"] is True
    assert cfg["output"]["report"] is True  # the main job shows its figures
    assert cfg["cluster"]["kind"] == "local" and cfg["cluster"]["n_workers"] == 2


@pytest.mark.parametrize(
    "cfg, fragments",
    [
        ([1, 2], ["YAML mapping"]),
        ({"model": {"method": "pca"}}, ["needs a 'data' section"]),
        (
            _base(modle={}),
            ["'modle'", "allowed: data, model, cluster, output, progress"],
        ),
        (_base(data={"path": "x", "varible": "a"}), ["'data.varible'", "variable"]),
        (_base(data={"variable": "a"}), ["'data.path' is required"]),
        (_base(data={"path": 3}), ["'data.path' must be a string", "3"]),
        (
            _base(data={"path": "x", "chunks": [1, 2, 3]}),
            ["'data.chunks'", "[rows, columns]"],
        ),
        (_base(data={"path": "x", "chunks": 0}), ["'data.chunks' must be at least 1"]),
        (_base(data={"path": "x", "sample_dims": [1]}), ["'data.sample_dims'"]),
        (_base(model={"n_components": 2}), ["'method' key", "pca, ppca"]),
        (
            _base(model={"method": "pcaa"}),
            ["'model.method' 'pcaa' is unknown", "allowed: pca, ppca, kernel_pca"],
        ),
        (
            _base(model={"method": "pca", "n_component": 2}),
            ["'model.n_component'", "n_components", "svd_solver"],
        ),
        (
            _base(model={"method": "pca", "n_components": "ten"}),
            [
                "'model.n_components' must be an integer "
                ">= 1, a float in (0, 1), 'mle' or null",
                "'ten'",
            ],
        ),
        (
            _base(model={"method": "kernel_pca", "n_components": "ten"}),
            ["'model.n_components' must be an integer", "'ten'"],
        ),
        (
            _base(model={"method": "pca", "whiten": "yes"}),
            ["'model.whiten' must be true or false"],
        ),
        (
            _base(model={"method": "pca", "svd_solver": 3}),
            ["'model.svd_solver' must be a string"],
        ),
        (
            _base(
                model={
                    "method": "pca",
                    "params": {"n_components": 2},
                    "n_components": 3,
                }
            ),
            ["'n_components' given both"],
        ),
        (
            _base(model={"method": "pca", "params": [1]}),
            ["'model.params' must be a mapping"],
        ),
        (
            _base(cluster={"kind": "yarn"}),
            [
                "'cluster.kind' 'yarn' is unknown",
                "local, address",
                "slurm",
                "kubernetes",
                "gateway",
            ],
        ),
        (
            _base(cluster={"n_workers": "two"}),
            ["'cluster.n_workers' must be an integer or null"],
        ),
        (_base(cluster={"n_workers": 0}), ["'cluster.n_workers' must be at least 1"]),
        (
            _base(cluster={"kind": "local", "cores": 4}),
            ["'cluster.cores'", "n_workers"],
        ),
        (_base(cluster={"kind": "address"}), ["'cluster.address' is required"]),
        (
            _base(cluster={"kind": "address", "address": "http://x:1"}),
            ["scheme 'http'"],
        ),
        (
            _base(cluster={"kind": "address", "address": "tls://h:8786"}),
            ["TLS address", "cluster.security", "tls_ca_file"],
        ),
        (
            _base(
                cluster={
                    "kind": "address",
                    "address": "tls://h:8786",
                    "security": {"tls_ca_file": "ca.pem"},
                }
            ),
            ["'cluster.security.tls_client_cert' is required"],
        ),
        (
            _base(cluster={"kind": "slurm", "cores": 4}),
            ["'cluster.memory' is required"],
        ),
        (
            _base(
                cluster={"kind": "slurm", "cores": 4, "memory": "8GB", "walltime": 2}
            ),
            ["'cluster.walltime' must be a string or null", "2"],
        ),
        (
            _base(
                cluster={
                    "kind": "slurm",
                    "cores": 4,
                    "memory": "8GB",
                    "adaptive": {"minimum_jobs": 3, "maximum_jobs": 1},
                }
            ),
            ["0 <= minimum <= maximum"],
        ),
        (
            _base(
                cluster={
                    "kind": "slurm",
                    "cores": 4,
                    "memory": "8GB",
                    "adaptive": {"minimum": 1, "maximum": 2},
                }
            ),
            ["'cluster.adaptive.minimum'", "minimum_jobs, maximum_jobs"],
        ),
        (
            _base(
                cluster={"kind": "slurm", "cores": 4, "memory": "8GB", "job_extra": [1]}
            ),
            ["'cluster.job_extra' must be a list of strings"],
        ),
        (
            _base(
                cluster={
                    "kind": "htcondor",
                    "cores": 4,
                    "memory": "8GB",
                    "disk": "1GB",
                    "queue": "q",
                }
            ),
            ["'cluster.queue'"],
        ),
        (_base(output={"scores": "yes"}), ["'output.scores' must be true or false"]),
        (
            _base(output={"low_rank": True}),
            ["'output.low_rank' is only available", "robust_pca"],
        ),
        (_base(output={"stor": "x"}), ["'output.stor'", "store, storage_options"]),
        (_base(progress="on"), ["'progress' must be true or false"]),
        (
            _base(data={"path": "x", "generate": {"kind": "spiral"}}),
            [
                "'data.generate.kind' 'spiral' is unknown",
                "low_rank",
                "rings",
                "low_rank_sparse",
            ],
        ),
        (
            _base(
                data={"path": "x", "generate": {"kind": "low_rank", "n_samples": 10}}
            ),
            ["needs 'n_features'"],
        ),
        (
            _base(
                data={
                    "path": "x",
                    "generate": {"n_samples": 10, "n_features": 3, "rnk": 2},
                }
            ),
            ["'data.generate.rnk'", "rank"],
        ),
        (
            _base(
                data={"path": "x", "generate": {"n_samples": "many", "n_features": 3}}
            ),
            ["'data.generate.n_samples' must be an integer"],
        ),
        # the generator's option to return the truth too is Python's: a config writes
        # the data only, and would otherwise fail writing a tuple
        (
            _base(
                data={
                    "path": "x",
                    "generate": {"kind": "rings", "n_samples": 9, "return_labels": 1},
                }
            ),
            ["'data.generate.return_labels' is for Python", "written alone"],
        ),
    ],
)
def test_errors_name_key_and_allowed(cfg, fragments):
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, msg
    assert "\n" not in msg


def test_model_params_may_nest_under_params():
    cfg = validate_config(
        _base(
            model={"method": "pca", "params": {"n_components": 3, "svd_solver": "tsqr"}}
        )
    )
    assert cfg["model"] == {
        "method": "pca",
        "params": {"n_components": 3, "svd_solver": "tsqr"},
    }


def test_integral_float_accepted_for_int():
    cfg = validate_config(_base(model={"method": "pca", "n_components": 3.0}))
    n = cfg["model"]["params"]["n_components"]
    assert n == 3 and isinstance(n, int)
    with pytest.raises(ConfigError, match="'model.n_components' must be an integer"):
        validate_config(_base(model={"method": "pca", "n_components": 2.5}))


@pytest.mark.parametrize("method", ["pca", "ppca"])
@pytest.mark.parametrize("value", [0.95, 0.5, "mle", 4, None])
def test_n_components_fraction_and_mle_forms(method, value):
    cfg = validate_config(_base(model={"method": method, "n_components": value}))
    assert cfg["model"]["params"]["n_components"] == value


@pytest.mark.parametrize(
    ("method", "value", "words"),
    [
        ("pca", 1.5, ["'model.n_components' must be", "1.5", "between 0 and 1"]),
        ("pca", 0.0, ["'model.n_components'", "0.0"]),
        ("ppca", -0.2, ["'model.n_components'", "-0.2"]),
        (
            "pca",
            "MLE",
            ["'model.n_components'", "'MLE'", "the only string accepted is 'mle'"],
        ),
        ("pca", 0, ["'model.n_components'", "at least 1"]),
        ("sparse_pca", 0.5, ["'model.n_components' must be an integer"]),
        ("kernel_pca", "mle", ["'model.n_components' must be an integer"]),
    ],
)
def test_n_components_bad_forms_rejected(method, value, words):
    with pytest.raises(ConfigError) as err:
        validate_config(_base(model={"method": method, "n_components": value}))
    for word in words:
        assert word in str(err.value)


def test_n_components_forms_from_the_command_line():
    raw = _base(model={"method": "pca"})
    for text, value in [("0.9", 0.9), ("mle", "mle"), ("7", 7)]:
        cfg = validate_config(apply_overrides(raw, [f"model.n_components={text}"]))
        assert cfg["model"]["params"]["n_components"] == value


def test_cluster_defaults_and_kinds():
    assert check_cluster(None)["kind"] == "local"
    slurm = check_cluster(
        {
            "kind": "slurm",
            "cores": 8,
            "memory": "16GB",
            "walltime": "01:00:00",
            "queue": "q",
            "adaptive": {"maximum_jobs": 4},
        }
    )
    assert slurm["adaptive"] == {"minimum_jobs": 0, "maximum_jobs": 4}
    assert slurm["jobs"] == 1
    pbs = check_cluster(
        {"kind": "pbs", "cores": 8, "memory": "16GB", "resource_spec": "x"}
    )
    assert pbs["resource_spec"] == "x"
    with pytest.raises(ConfigError, match="'cluster.resource_spec'"):
        check_cluster(
            {"kind": "slurm", "cores": 8, "memory": "16GB", "resource_spec": "x"}
        )
    kube = check_cluster(
        {"kind": "kubernetes", "adaptive": {"minimum": 1, "maximum": 3}}
    )
    assert kube["adaptive"] == {"minimum": 1, "maximum": 3}


def test_overrides():
    raw = {"data": {"path": "a"}, "model": {"method": "pca"}}
    out = apply_overrides(
        raw,
        [
            "model.n_components=20",
            "cluster.n_workers=3",
            "data.sample_dims=[time]",
            "output.store=null",
        ],
    )
    assert out["model"]["n_components"] == 20
    assert out["cluster"]["n_workers"] == 3
    assert out["data"]["sample_dims"] == ["time"]
    assert out["output"]["store"] is None
    assert "n_components" not in raw["model"]  # the input is not modified
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_overrides(raw, ["model.n_components"])
    with pytest.raises(ConfigError, match="'path' is not a section"):
        apply_overrides(raw, ["data.path.x=1"])
    with pytest.raises(ConfigError, match="not valid YAML"):
        apply_overrides(raw, ["model.n_components=[1"])


def test_load_config_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("data:\n  path: x\n model: [\n")
    with pytest.raises(ConfigError, match=r"not valid YAML \(line \d+, column \d+\)"):
        load_config(bad)
    dup = tmp_path / "dup.yaml"
    dup.write_text("data:\n  path: x\nmodel:\n  method: pca\n  method: ppca\n")
    with pytest.raises(ConfigError, match="the key 'method' is given twice"):
        load_config(dup)
    ok = tmp_path / "ok.yaml"
    ok.write_text("data:\n  path: x\nmodel:\n  method: pca\n")
    assert load_config(ok, ["model.n_components=4"])["model"]["params"] == {
        "n_components": 4
    }
