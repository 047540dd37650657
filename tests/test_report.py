"""scalepca.app.report: the HTML run report (tables + embedded PNG figures), its hook in
``scalepca run``, and how it looks in a real browser (headless Chromium screenshots)."""

from __future__ import annotations

import base64
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


def _figures(page: str) -> list[tuple[str, str]]:
    """``(name, alt text)`` of the figures of a page; each must be a PNG embedded in
    the page itself, drawn at twice the width it is shown at."""
    import html

    found = re.findall(
        r'<img src="data:image/png;base64,([^"]+)" alt="([^"]+)" '
        r'data-figure="([^"]+)" width="(\d+)">',
        page,
    )
    assert len(found) == page.count("<img"), "an image not embedded as a data: URI"
    for data, alt, _name, width in found:
        png = base64.b64decode(data)
        assert png[:8] == PNG_MAGIC
        assert int.from_bytes(png[16:20], "big") == 2 * int(width)  # 2× resolution
        assert len(alt) > 30  # a sentence saying what it shows, not its file name
    return [(name, html.unescape(alt)) for _, alt, name, _ in found]


def _images(page: str) -> list[str]:
    """The figures of a page, by name."""
    return [f"report/{name}.png" for name, _ in _figures(page)]


def _cell(page: str, label: str) -> str:
    m = re.search(rf"<th>{re.escape(label)}[^<]*</th><td>([^<]*)</td>", page)
    assert m, f"no row {label!r} in the report"
    return m.group(1)


def test_pca_report_tables_and_figures(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 20)) * np.linspace(4, 0.5, 20)
    pca = scalepca.PCA(4).fit(X)
    path = write_report(
        pca,
        tmp_path / "run",
        method="pca",
        data={"shape": "500 × 20"},
        memory={
            "client": 3 * 2**30,
            "workers": {"a": 2**30, "b": 2**29},
            "worker_limits": {"a": 2**31, "b": 2**31},
        },
        outputs=["/x/model.zarr"],
    )
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
        assert f'<td class="num">{i + 1}</td>' in page
        assert f"{r:.2f}" in page
    assert f"{np.cumsum(ratios)[-1]:.2f}" in page
    imgs = _images(page)
    # loadings over features without an order: ranked bars, not a line over the index
    assert imgs == ["report/scree.png", "report/loadings.png"]
    # one self-contained file: nothing else written beside it
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["report.html"]
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
    page = Path(
        write_report(pca, tmp_path, scores_store=str(tmp_path / "missing.zarr"))
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
        assert (
            mem["client"] > 10 * 2**20
        )  # a Python process with NumPy uses more than 10 MiB
    assert mem["workers"] == {}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """A ``scalepca run`` job with a report: (its folder, what it printed)."""
    import contextlib
    import io

    import matplotlib

    from scalepca.cli import main

    matplotlib.use("Agg")
    tmp_path = tmp_path_factory.mktemp("run")
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"""
data:
  path: {tmp_path / "data.zarr"}
  generate: {{n_samples: 3000, n_features: 12, rank: 3, chunk_rows: 1000, seed: 0}}
model: {{method: pca, n_components: 3}}
cluster: {{kind: local, n_workers: 1, threads_per_worker: 2, processes: false}}
output: {{store: {tmp_path / "out"}, report: true}}
progress: false
""")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", str(cfg)]) == 0
    return tmp_path, out.getvalue()


def test_cli_run_writes_report(cli_run):
    tmp_path, out = cli_run
    report = tmp_path / "out" / "report.html"
    assert f"written: {report}" in out
    page = report.read_text()
    assert _cell(page, "shape") == "3,000 × 12"
    assert _cell(page, "method").startswith("pca (PCA)")
    # the whole run's passes: the fit's and the one writing the scores
    assert (
        _cell(page, "passes over the data (whole run)")
        == "2 (1 by the fit; 1 writing scores.zarr)"
    )
    assert re.match(r"[\d.]+ (MiB|GiB)", _cell(page, "peak worker memory"))
    # scores were written, so the report scatters a sample of them
    assert _images(page) == [
        "report/scree.png",
        "report/loadings.png",
        "report/scores.png",
    ]
    assert not (tmp_path / "out" / "report").exists()


def _rows(page: str, heading: str) -> list[list[str]]:
    """The cells of the table under ``<h2>heading</h2>``."""
    section = page.split(f"<h2>{heading}</h2>", 1)[1].split("</table>", 1)[0]
    return [
        re.findall(r"<t[dh][^>]*>([^<]*)</t[dh]>", row)
        for row in re.findall(r"<tr>(.*?)</tr>", section)
    ]


def test_cli_report_says_how_the_run_was_made(cli_run):
    import dask
    import yaml
    import zarr

    tmp_path, _ = cli_run
    page = (tmp_path / "out" / "report.html").read_text()
    # time per stage, the fit's passes under the fit, and the total
    rows = _rows(page, "Time")
    assert [r[0] for r in rows] == [
        "stage",
        "starting the cluster",
        "data generation",
        "fit",
        "PCA pass 1: moments",
        "sampling rows for a later --update",
        "writing outputs",
        "pass over the data: writing scores.zarr",
        "total",
    ]
    for _, time, share in rows[1:]:
        assert re.fullmatch(r"[\d,]+\.\d\d s", time) and re.fullmatch(
            r"[\d,]+\.\d", share
        )
    assert rows[-1][2] == "100.0"
    # where it ran and with what
    assert _cell(page, "cluster kind") == "local"
    assert _cell(page, "workers × threads") == "1 worker × 2 threads (2 threads in all)"
    assert re.fullmatch(
        r"[\d,.]+ GiB per worker, [\d,.]+ GiB in all", _cell(page, "memory")
    )
    assert (
        _cell(page, "dask") == dask.__version__
        and _cell(page, "zarr") == zarr.__version__
    )
    assert _cell(page, "numpy") == np.__version__
    assert _cell(page, "scalepca") == scalepca.__version__
    # the config, which runs again as it is
    import html

    text = html.unescape(
        page.split("<h2>Config</h2>", 1)[1].split("<pre>")[1].split("</pre>")[0]
    )
    cfg = yaml.safe_load(text)
    assert (
        cfg["model"]["method"] == "pca" and cfg["model"]["params"]["n_components"] == 3
    )
    assert cfg["data"]["path"] == str(tmp_path / "data.zarr")
    from scalepca.app.config import validate_config

    validate_config(cfg)  # a valid config as written


def test_closed_form_and_chunks_in_words(cli_run):
    tmp_path, _ = cli_run
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<th>iterations</th>" not in page and "<th>converged</th>" not in page
    assert re.fullmatch(
        r"\d+ row chunks? of up to [\d,]+ rows; all 12 features in each",
        _cell(page, "chunks (tasks)"),
    )


def test_ppca_report_scores_axes_names_and_note(tmp_path):
    """% of variance on the score axes, PPCA's posterior-mean note, top features by
    name."""
    import dask.array as da
    import pandas as pd

    from scalepca.app.report_figures import scores_figure
    from scalepca.io import write_array

    rng = np.random.default_rng(4)
    X = rng.standard_normal((400, 8)) * np.array([9, 1, 1, 1, 1, 1, 1, 4.0])
    frame = pd.DataFrame(X, columns=[f"gene_{i}" for i in range(8)])
    ppca = scalepca.PPCA(2).fit(frame)
    store = str(tmp_path / "scores.zarr")
    write_array(da.from_array(ppca.transform(frame), chunks=100), store, name="scores")
    page = Path(
        write_report(ppca, tmp_path / "r", method="ppca", scores_store=store)
    ).read_text()
    assert "posterior means of unit-variance latent variables" in page
    # the loadings' largest entries are the two high-variance columns, by name
    top = dict(r for r in _rows(page, "Top-loading features")[1:])
    assert top["1"].startswith("gene_0 (") and top["2"].startswith("gene_7 (")
    ratio = 100 * ppca.explained_variance_ratio_
    fig = scores_figure(store, None, ppca)
    assert fig.axes[0].get_xlabel() == f"PC1 ({ratio[0]:.1f} % of variance)"
    assert fig.axes[0].get_ylabel() == f"PC2 ({ratio[1]:.1f} % of variance)"
    # the closed form said as such, not as "converged True, iterations 1"
    assert _cell(page, "solution") == "closed form: one direct solve, no iterations"
    assert "<th>iterations</th>" not in page and "<th>converged</th>" not in page


def test_report_is_written_by_default_and_typed(tmp_path):
    from scalepca.app.config import ConfigError, validate_config

    base = {"data": {"path": "x.zarr"}, "model": {"method": "pca"}}
    assert validate_config(base)["output"]["report"] is True
    assert (
        validate_config({**base, "output": {"report": False}})["output"]["report"]
        is False
    )
    with pytest.raises(ConfigError, match="output.report"):
        validate_config({**base, "output": {"report": "yes"}})


def test_kernel_pca_report_draws_no_feature_loadings(tmp_path):
    # KernelPCA's components_ are over kernel features (landmarks), not the input
    # features
    X = np.random.default_rng(3).standard_normal((400, 3))
    kp = scalepca.KernelPCA(3, gamma=0.5, n_features=50, random_state=0).fit(X)
    page = Path(write_report(kp, tmp_path, method="kernel_pca")).read_text()
    assert _images(page) == ["report/scree.png"]
    assert "Not drawn" not in page


def test_report_in_a_real_browser(cli_run, tmp_path):
    """The page as a reader sees it: tables, the embedded figures, and the config."""
    import os
    import shutil

    from matplotlib.image import imread

    from ._browser import screenshot

    page = cli_run[0] / "out" / "report.html"
    keep = os.environ.get(
        "SCALEPCA_REPORT_SCREENSHOTS"
    )  # a folder to keep them in, to look at
    for name, height in (("top", 1000), ("whole", 5000)):
        png = tmp_path / f"report_{name}.png"
        screenshot(page.as_uri(), png, tmp_path / "profile", height=height)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(png, Path(keep) / png.name)
        image = imread(png)[..., :3]
        assert image.shape[:2] == (height, 1280)
        gray = image.mean(axis=2)
        assert gray.mean() > 0.7  # a white page with dark text on many rows
        assert (gray < 0.5).any(axis=1).sum() > 150
        # table header cells (#f4f4f4 on white) are drawn: the stylesheet applied
        assert np.isclose(image, 0xF4 / 255, atol=0.01).all(axis=2).sum() > 1000
    # the figures render from their data: URIs: coloured pixels (the page itself is
    # grey)
    colour = image.max(axis=2) - image.min(axis=2) > 0.25
    assert colour.sum() > 20_000, colour.sum()


def test_timings_hear_every_pass_under_the_progress_display():
    """The timing table and the progress display both listen to the passes of one
    fit."""
    import io

    import dask
    import dask.array as da

    from scalepca.app.progress import progress
    from scalepca.app.report_sections import timing_rows
    from scalepca.app.timing import RunTimings

    X = da.from_array(
        np.random.default_rng(5).standard_normal((400, 6)), chunks=(100, 6)
    )
    timings, log = RunTimings(), io.StringIO()
    with (
        dask.config.set(scheduler="threads"),
        progress(stream=log, client=None, grace=0),
    ):
        with timings.passes(), timings.stage("fit"):
            scalepca.PCA(2, svd_solver="tsqr").fit(X)
    assert [(e, i, label) for e, i, label, _ in timings.pass_times] == [
        ("PCA", 1, "moments"),
        ("PCA", 2, "tsqr"),
    ]
    assert "PCA pass 2 of 2 (tsqr): 5 chunks in" in log.getvalue()
    rows = [r[0] for r in timing_rows(timings)]
    assert rows == ["fit", "    PCA pass 1: moments", "    PCA pass 2: tsqr", "total"]


# -- what each method produced -----------------------------------------------------------
CONFIGS = Path(__file__).resolve().parents[1] / "configs"

#: shipped config → (settings that make its data small, the figures its report shows)
TOOLS = {
    "hilbert_eof": ([], ["scree", "amplitude", "phase", "pc_series"]),
    "mca": ([], ["scree", "patterns_x", "patterns_y", "scores", "pc_series"]),
    "multivariate_eof": (
        [],
        ["scree", "components_sst", "components_z", "scores", "pc_series"],
    ),
    "extended_eof": (
        [],
        [
            "scree",
            "components_mode1",
            "components_mode2",
            "components_mode3",
            "scores",
            "pc_series",
        ],
    ),
    "bootstrap_eof": (
        ["model.n_bootstraps=10"],
        ["scree", "components", "components_interval", "scores", "pc_series"],
    ),
    "ppca": (
        ["data.generate.n_features=30", "model.max_iter=15"],
        ["scree", "loadings", "convergence", "scores"],
    ),
}


@pytest.fixture(scope="module")
def tool_runs(tmp_path_factory):
    """Each shipped analysis config run on small generated data:
    ``{method: (output folder, report page, what the run printed on stderr)}``."""
    import contextlib
    import io
    import warnings

    import matplotlib

    from scalepca.cli import main

    matplotlib.use("Agg")
    root = tmp_path_factory.mktemp("tools")
    runs = {}
    for method, (sets, _) in TOOLS.items():
        out, err = io.StringIO(), io.StringIO()
        argv = ["run", str(CONFIGS / f"{method}.yaml")]
        for s in [
            f"data.path={root / method}.zarr",
            f"output.store={root / 'out' / method}",
            "data.generate.n_samples=240",
            "data.generate.chunk_rows=120",
            "cluster.n_workers=1",
            "cluster.processes=false",
            "progress=false",
            *sets,
        ]:
            argv += ["--set", s]
        with (
            warnings.catch_warnings(record=True) as caught,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            warnings.simplefilter("always")
            assert main(argv) == 0, err.getvalue()
        said = err.getvalue() + "".join(str(w.message) + "\n" for w in caught)
        folder = root / "out" / method
        runs[method] = (folder, (folder / "report.html").read_text(), said)
    return runs


@pytest.mark.parametrize("method", list(TOOLS))
def test_each_tool_report_shows_what_it_produced(tool_runs, method):
    """Every figure drawn, named by what it shows, with no warning on the way."""
    folder, page, said = tool_runs[method]
    assert [name for name, _ in _figures(page)] == TOOLS[method][1]
    assert "Not drawn" not in page
    assert "not drawn" not in said and "Casting complex" not in said
    # the config file and the command in the title
    assert f"<title>scalepca run {method}.yaml: {method}</title>" in page
    assert re.search(r"Command: <code>scalepca run \S+/" + method + r"\.yaml ", page)


def _alts(page: str) -> dict:
    return dict(_figures(page))


def test_hilbert_report_amplitude_phase_and_series(tool_runs):
    import xarray as xr

    from scalepca.app.report_figures import time_series_figure

    folder, page, _ = tool_runs["hilbert_eof"]
    model = scalepca.load(folder / "model.zarr")
    share = f"{100 * model.explained_variance_ratio_[0]:.1f} %"
    alts = _alts(page)
    assert alts["amplitude"].startswith("Maps of the amplitude of complex EOFs 1–4 (")
    assert alts["phase"].startswith("Maps of the phase of complex EOFs 1–4 (" + share)
    # the scores written from the fit: no pass beyond the fit's two
    assert _cell(page, "passes over the data (whole run)") == "2 (2 by the fit)"
    # the amplitude of the complex PCs against the data's own times
    fig = time_series_figure(str(folder / "scores.zarr"), None, model)
    scores = xr.open_zarr(folder / "scores.zarr")
    line = fig.axes[0].lines[0]
    np.testing.assert_array_equal(line.get_xdata(), scores["time"].values)
    np.testing.assert_allclose(
        line.get_ydata(), np.abs(model.scores_[:, 0]), rtol=1e-12
    )


def test_bootstrap_report_says_which_modes_are_separated(tool_runs):
    folder, page, _ = tool_runs["bootstrap_eof"]
    model = scalepca.load(folder / "model.zarr")
    alts = _alts(page)
    assert alts["scree"].startswith("Scree plot with 95 % bootstrap intervals")
    assert f"{model.n_significant_} of 4 modes are separated" in alts["scree"]
    assert alts["components_interval"].startswith(
        "Maps of EOFs 1–4 where their 95 % bootstrap interval excludes zero"
    )


def test_extended_and_multivariate_reports_map_each_lag_and_field(tool_runs):
    page = tool_runs["extended_eof"][1]
    # its scores are a dask.delayed of each block (fused tasks): still a pass
    assert (
        _cell(page, "passes over the data (whole run)")
        == "2 (1 by the fit; 1 writing scores.zarr)"
    )
    alts = _alts(page)
    assert alts["components_mode1"].startswith("Maps of extended EOF 1 (")
    assert alts["components_mode1"].endswith("at lags 0, 2, 4, 6")  # embedding 4, τ 2
    assert "North's error bars" in alts["scree"]
    alts = _alts(tool_runs["multivariate_eof"][1])
    assert alts["components_sst"].startswith("Maps of the sst part of EOFs 1–4 (")
    assert alts["components_z"].startswith("Maps of the z part of EOFs 1–4 (")
    alts = _alts(tool_runs["mca"][1])
    assert alts["patterns_x"].startswith("Maps of the X pattern (sst) of coupled modes")
    assert alts["patterns_y"].endswith("of the squared covariance)")


def test_scree_error_bars_are_norths_and_ppca_draws_its_noise_level():
    """The bars' error bars are North's λ·√(2/n) (as north_test gives them), and
    PPCA's dashed line is σ² as a share of the data's total variance."""
    from scalepca.analysis.eof import north_test
    from scalepca.app.report_figures import report_figures

    rng = np.random.default_rng(7)
    X = rng.standard_normal((300, 12)) * np.linspace(5, 1, 12)
    # the extended EOF's: of its windows, not of its samples
    eeof = scalepca.ExtendedEOF(4, embedding=3, tau=5).fit(X)
    for est in (eeof, scalepca.PCA(4).fit(X), scalepca.PPCA(4).fit(X)):
        scree = next(report_figures(est))
        ax = scree.draw().axes[0]
        from matplotlib.container import BarContainer

        bars = [c for c in ax.containers if isinstance(c, BarContainer)][0]
        segments = bars.errorbar.lines[2][0].get_segments()
        half = np.array([(s[1, 1] - s[0, 1]) / 2 for s in segments])
        errors = north_test(est, vfscaled=True).errors
        np.testing.assert_allclose(half, 100 * errors, rtol=1e-10)
    total = X.var(axis=0, ddof=1).sum()
    levels = [ln.get_ydata()[0] for ln in ax.lines if ln.get_linestyle() == "--"]
    np.testing.assert_allclose(levels, [100 * est.noise_variance_ / total], rtol=1e-8)
    assert "noise level σ²" in scree.alt


def test_genotype_scores_coloured_by_population(tmp_path):
    from scalepca.app.report_figures import sample_labels, scores_figure
    from scalepca.datasets import make_genotypes, write_bed
    from scalepca.io import write_array

    geno = make_genotypes(150, 200, n_populations=3, seed=1)
    path = write_bed(geno, str(tmp_path / "g.bed"))
    X = scalepca.open_matrix(path)
    name, labels = sample_labels(X, {"path": path})
    fam = np.loadtxt(tmp_path / "g.fam", dtype=str, usecols=0)
    assert name == "fid" and (labels == fam).all() and len(set(fam)) == 3
    pca = scalepca.PCA(2).fit(X)
    store = str(tmp_path / "scores.zarr")
    write_array(pca.transform(X), store, name="scores")
    ax = scores_figure(store, None, pca, (name, labels)).axes[0]
    legend = sorted(t.get_text() for t in ax.get_legend().get_texts())
    assert legend == sorted(set(fam))
    # the loadings: ranked bars named by the .bim's SNP ids
    from scalepca.app.report_figures import report_figures

    loadings = [f for f in report_figures(pca) if f.stem == "loadings"][0]
    ax = loadings.draw().axes[0]
    shown = [t.get_text() for t in ax.get_yticklabels()]
    order = np.argsort(-np.abs(pca.components_[0]), kind="stable")[:10]
    assert shown == list(pca.feature_names_in_[order])


def test_anndata_scores_coloured_by_a_categorical_obs_column(tmp_path):
    anndata = pytest.importorskip("anndata")
    import pandas as pd

    from scalepca.app.report_figures import sample_labels

    rng = np.random.default_rng(0)
    kinds = rng.choice(["B", "T", "NK"], 60)
    obs = pd.DataFrame(
        {
            "n_counts": rng.random(60),
            "batch": pd.Categorical(rng.choice(list("ab"), 60)),
            "cell_type": pd.Categorical(kinds),
        },
        index=[f"c{i}" for i in range(60)],
    )
    adata = anndata.AnnData(rng.random((60, 8)).astype("float32"), obs=obs)
    adata.write_zarr(tmp_path / "cells.zarr")
    path = str(tmp_path / "cells.zarr")
    X = scalepca.open_matrix(path, format="anndata")
    name, labels = sample_labels(X, {"path": path})
    # a known label name first (cell_type before batch), every cell's value
    assert name == "obs['cell_type']" and (labels == kinds).all()
    # the cells a config's steps keep (data.singlecell's mask_obs): theirs, by name
    keep = rng.random(60) < 0.5
    _, labels = sample_labels(X.isel(obs=np.flatnonzero(keep)), {"path": path})
    assert (labels == kinds[keep]).all()


def test_hilbert_report_in_a_real_browser(tool_runs, tmp_path):
    """The Hilbert EOF report as a reader sees it: its maps render from their data:
    URIs at the size the page gives them (half their pixels)."""
    import os
    import shutil

    from matplotlib.image import imread

    from ._browser import screenshot

    page = tool_runs["hilbert_eof"][0] / "report.html"
    png = tmp_path / "report_hilbert.png"
    screenshot(page.as_uri(), png, tmp_path / "profile", height=3000)
    keep = os.environ.get("SCALEPCA_REPORT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)
    image = imread(png)[..., :3]
    colour = image.max(axis=2) - image.min(axis=2) > 0.25
    # the amplitude and phase maps, the scree and the series: many coloured rows
    assert colour.any(axis=1).sum() > 1000, colour.any(axis=1).sum()
    # no figure wider than the page's column (1,000 CSS pixels)
    widths = [int(w) for w in re.findall(r'width="(\d+)"', page.read_text())]
    assert widths and max(widths) <= 1000


def test_loadings_over_one_labelled_dim_are_named_by_its_labels():
    """Stations (one feature dim with labels, no feature_names_in_): ranked bars
    named by station; a lat/lon field: maps."""
    import xarray as xr

    from scalepca.app.report_figures import report_figures

    rng = np.random.default_rng(0)
    names = ["oslo", "bergen", "rome", "nice", "lyon", "kiel"]
    field = xr.DataArray(
        rng.standard_normal((100, 6)) * np.arange(1, 7),
        dims=("time", "station"),
        coords={"station": names},
    )
    pca = scalepca.PCA(2).fit(scalepca.open_matrix(field, sample_dims="time"))
    loadings = [f for f in report_figures(pca) if f.stem == "loadings"][0]
    assert "by feature name" in loadings.alt
    ax = loadings.draw().axes[0]
    order = np.argsort(-np.abs(pca.components_[0]), kind="stable")
    assert [t.get_text() for t in ax.get_yticklabels()] == [names[j] for j in order]
    grid = xr.DataArray(
        rng.standard_normal((50, 4, 5)),
        dims=("time", "lat", "lon"),
        coords={"lat": np.arange(4.0), "lon": np.arange(5.0)},
    )
    pca = scalepca.PCA(2).fit(scalepca.open_matrix(grid, sample_dims="time"))
    stems = [f.stem for f in report_figures(pca)]
    assert stems == ["scree", "components"]


def test_figures_follow_the_class_not_its_name():
    """The figures are chosen by the estimator's class (a subclass is drawn as its
    method is), never by the class's name."""
    from scalepca.app.report_figures import Family, family

    class TunedPPCA(scalepca.PPCA):
        pass

    class MCA(scalepca.PCA):  # a PCA, whatever it is called
        pass

    assert family(TunedPPCA()) is Family.PROBABILISTIC
    assert family(MCA()) is Family.LINEAR
    assert family(scalepca.MCA(2)) is Family.COUPLED
