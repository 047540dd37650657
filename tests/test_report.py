"""scalepca.app.report: the HTML run report (tables + PNG figures) and its hook in
``scalepca run``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import scalepca
from scalepca.app.report import peak_memory, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytest.importorskip("matplotlib")


@pytest.fixture(autouse=True)
def _agg():
    import matplotlib

    matplotlib.use("Agg")
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _images(page: str) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', page)


def _cell(page: str, label: str) -> str:
    m = re.search(rf"<th>{re.escape(label)}[^<]*</th><td>([^<]*)</td>", page)
    assert m, f"no row {label!r} in the report"
    return m.group(1)


def test_pca_report_tables_and_figures(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 20)) * np.linspace(4, 0.5, 20)
    pca = scalepca.PCA(4).fit(X)
    path = write_report(pca, tmp_path / "run", method="pca", data={"shape": "500 × 20"},
                        memory={"client": 3 * 2**30, "workers": {"a": 2**30, "b": 2**29},
                                "worker_limits": {"a": 2**31, "b": 2**31}},
                        outputs=["/x/model.zarr"])
    page = Path(path).read_text()
    assert Path(path) == tmp_path / "run" / "report.html"
    assert _cell(page, "passes over the data") == "1"
    assert _cell(page, "shape") == "500 × 20"
    assert _cell(page, "peak worker memory") == "1.00 GiB of a 2.00 GiB limit"
    assert _cell(page, "peak client memory") == "3.00 GiB"
    assert "n_components=4" in _cell(page, "parameters")
    # the spectrum table: one row per component with ratio and cumulative %
    ratios = 100 * pca.explained_variance_ratio_
    for i, r in enumerate(ratios):
        assert f"<td class=\"num\">{i + 1}</td>" in page
        assert f"{r:.2f}" in page
    assert f"{np.cumsum(ratios)[-1]:.2f}" in page
    imgs = _images(page)
    assert imgs == ["report/scree.png", "report/components.png"]
    for src in imgs:
        assert (tmp_path / "run" / src).read_bytes()[:8] == PNG_MAGIC
    assert "/x/model.zarr" in page and "Not drawn" not in page


def test_rpca_report_has_convergence_and_parts(tmp_path):
    rng = np.random.default_rng(1)
    n = 60
    L0 = rng.standard_normal((n, 2)) @ rng.standard_normal((2, n))
    M = L0 + np.where(rng.random((n, n)) < 0.05, 5.0, 0.0)
    rpca = scalepca.RobustPCA(random_state=0).fit(M)
    page = Path(write_report(rpca, tmp_path, method="robust_pca", X=M)).read_text()
    assert _images(page) == ["report/convergence.png", "report/rpca_parts.png"]
    assert _cell(page, "rank") == str(rpca.rank_)
    assert _cell(page, "iterations") == str(rpca.n_iter_)


def test_sparse_and_em_reports(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 10)) @ rng.standard_normal((10, 10))
    sp = scalepca.SparsePCA(3, method="batch", alpha=0.5, random_state=0).fit(X)
    page = Path(write_report(sp, tmp_path / "s", method="sparse_pca")).read_text()
    assert "report/loadings.png" in _images(page)
    X[rng.random(X.shape) < 0.1] = np.nan
    em = scalepca.PPCA(2, missing="em", max_iter=20).fit(X)
    page = Path(write_report(em, tmp_path / "e", method="ppca")).read_text()
    assert "report/convergence.png" in _images(page)


def test_failed_figure_is_named_not_raised(tmp_path):
    pca = scalepca.PCA(2).fit(np.random.default_rng(0).standard_normal((50, 4)))
    page = Path(write_report(pca, tmp_path, scores_store=str(tmp_path / "missing.zarr"))
                ).read_text()
    assert "Not drawn" in page and "scores:" in page
    assert "report/scree.png" in _images(page)


def test_without_matplotlib_tables_only(tmp_path, monkeypatch):
    pca = scalepca.PCA(2).fit(np.random.default_rng(0).standard_normal((50, 4)))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    page = Path(write_report(pca, tmp_path)).read_text()
    assert not _images(page)
    assert "scalepca[plot]" in page
    assert _cell(page, "passes over the data") == "1"
    assert not (tmp_path / "report").exists()


def test_peak_memory_of_this_process():
    mem = peak_memory(None)
    if sys.platform.startswith("linux"):
        assert mem["client"] > 10 * 2**20  # a Python process with NumPy uses more than 10 MiB
    assert mem["workers"] == {}


def test_cli_run_writes_report(tmp_path, capsys):
    from scalepca.cli import main

    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"""
data:
  path: {tmp_path / 'data.zarr'}
  generate: {{n_samples: 3000, n_features: 12, rank: 3, chunk_rows: 1000, seed: 0}}
model: {{method: pca, n_components: 3}}
cluster: {{kind: local, n_workers: 1, threads_per_worker: 2, processes: false}}
output: {{store: {tmp_path / 'out'}, report: true}}
progress: false
""")
    assert main(["run", str(cfg)]) == 0
    out = capsys.readouterr().out
    report = tmp_path / "out" / "report.html"
    assert f"written: {report}" in out
    page = report.read_text()
    assert _cell(page, "shape") == "3,000 × 12"
    assert _cell(page, "method").startswith("pca (PCA)")
    assert _cell(page, "passes over the data") == "1"
    assert re.match(r"[\d.]+ (MiB|GiB)", _cell(page, "peak worker memory"))
    # scores were written, so the report scatters a sample of them
    assert _images(page) == ["report/scree.png", "report/components.png", "report/scores.png"]
    for src in _images(page):
        assert (tmp_path / "out" / src).read_bytes()[:8] == PNG_MAGIC


def test_report_is_written_by_default_and_typed(tmp_path):
    from scalepca.app.config import ConfigError, validate_config

    base = {"data": {"path": "x.zarr"}, "model": {"method": "pca"}}
    assert validate_config(base)["output"]["report"] is True
    assert validate_config({**base, "output": {"report": False}})["output"]["report"] is False
    with pytest.raises(ConfigError, match="output.report"):
        validate_config({**base, "output": {"report": "yes"}})


def test_kernel_pca_report_draws_no_feature_loadings(tmp_path):
    # KernelPCA's components_ are over kernel features (landmarks), not the input features
    X = np.random.default_rng(3).standard_normal((400, 3))
    kp = scalepca.KernelPCA(3, gamma=0.5, n_features=50, random_state=0).fit(X)
    page = Path(write_report(kp, tmp_path, method="kernel_pca")).read_text()
    assert _images(page) == ["report/scree.png"]
    assert "Not drawn" not in page
