"""The documentation site builds from the repository, warnings as errors, and renders.

The build runs Sphinx exactly as the README's command does (``-W``: a warning fails),
into a temporary folder, from scratch (``-E``). The front page and an API page are
then opened in a real headless Chromium (Debian's ``chromium`` package) and
screenshotted; without chromium those checks are skipped with the command that
installs it (``.ci/run`` installs it in CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ._browser import rendered_dom, screenshot

ROOT = Path(__file__).parents[1]
pytest.importorskip(
    "sphinx", reason="docs extra not installed: pip install -e '.[docs]'"
)
pytest.importorskip("numpydoc")
pytest.importorskip("myst_nb")
pytest.importorskip("pydata_sphinx_theme")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-E",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(ROOT / "docs"),
            str(out / "html"),
            "-d",
            str(out / "doctrees"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out / "html"


def _text(path: Path) -> str:
    return re.sub(r"<[^>]+>", " ", path.read_text())


def test_every_page_is_built(site):
    for page in (
        "index",
        "getting-started",
        "config",
        "architecture",
        "gallery",
        "benchmarks",
        "bad_input",
        "hpc",
        "development",
        "api/estimators",
        "api/data",
        "api/datasets",
        "api/eof",
        "api/plot",
        "api/cluster",
        "api/config",
        "api/singlecell",
        "guide/index",
        "guide/genotypes",
        *GUIDE_PAGES,
    ):
        assert (site / f"{page}.html").is_file(), page
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    built = sorted(p.stem for p in (site / "_generated" / "gallery").glob("*.html"))
    assert built == notebooks


def test_config_reference_lists_every_schema_key(site):
    from scalepca.app.config import schema_sections
    from scalepca.persistence.registry import METHODS

    text = _text(site / "config.html")
    for _, _, schema in schema_sections():
        for key in schema:
            assert key in text, key
    for method in METHODS:
        assert f"method: {method}" in text


def test_config_reference_every_key_has_a_meaning_and_an_anchor(site):
    """Each ``data.generate`` key of each kind, and each key of the fixed sections,
    has a row with a meaning and an anchor of its own (``config.html#data.path``,
    ``#data.generate.rings.radii``); the generators' Python-only options are no
    keys."""
    import inspect

    from scalepca.app.config import GENERATE_PYTHON_ONLY, schema_sections
    from scalepca.datasets import GENERATORS

    html = (site / "config.html").read_text()
    ids = re.findall(r'<span class="sp-key" id="([^"]+)">', html)
    assert len(ids) == len(set(ids)), "an anchor is given twice"

    def meaning(anchor: str) -> str:
        row = re.search(
            r'<span class="sp-key" id="' + re.escape(anchor) + r'">.*?</tr>', html, re.S
        )
        assert row, f"no row with the anchor {anchor}"
        last = re.findall(r"<td>(.*?)</td>", row.group(0), re.S)[-1]
        return re.sub(r"<[^>]+>", "", last).strip()

    for kind, func in GENERATORS.items():
        for name in inspect.signature(func).parameters:
            anchor = f"data.generate.{kind}.{name}"
            if name in GENERATE_PYTHON_ONLY:
                assert anchor not in ids, anchor
                continue
            assert len(meaning(anchor)) > 10, anchor
    from scalepca.persistence.registry import METHODS, estimator_class

    for method in METHODS:
        for name in inspect.signature(estimator_class(method).__init__).parameters:
            if name != "self":
                assert f"model.{method}.{name}" in ids, f"model.{method}.{name}"
    for _, prefix, schema in schema_sections():
        for key in schema:
            anchors = [a for a in ids if a.startswith(prefix) and a.endswith(f".{key}")]
            anchors += [key] if not prefix and key in ids else []
            assert anchors, f"{prefix}.{key} has no anchor"
            assert all(meaning(a) for a in anchors), f"{prefix}.{key}"


def test_gallery_pages_offer_their_notebook_and_script(site):
    """Every gallery page links its notebook (``.ipynb``) and its script (``.py``),
    files of the built site: the notebook with its outputs, the script its source in
    ``notebooks/src/``, runnable Python."""
    import json

    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = site / "_generated" / "gallery" / f"{nb.stem}.html"
        html = page.read_text()
        links = re.findall(
            r'<a class="reference download internal"[^>]*href="([^"]+)"', html
        )
        files = {Path(link).suffix: (page.parent / link).resolve() for link in links}
        assert set(files) == {".ipynb", ".py"}, (nb.name, links)
        for path in files.values():
            assert path.is_file() and site.resolve() in path.parents, path
        got = json.loads(files[".ipynb"].read_text())
        want = json.loads(nb.read_text())
        assert [c["source"] for c in got["cells"]] == [
            c["source"] for c in want["cells"]
        ], nb.name
        script = files[".py"].read_text()
        assert script == (ROOT / "notebooks" / "src" / f"{nb.stem}.py").read_text()
        compile(script, files[".py"].name, "exec")


def test_gallery_cards_show_one_readable_figure(site):
    """Each card shows the figure of its notebook's cell marked ``thumbnail=true``: one
    figure on one panel, of a shape a card shows readably, not a grid of panels
    squeezed into it."""
    import base64
    import io
    import json

    from matplotlib.image import imread

    cards = (site / "gallery.html").read_text()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = [
            c
            for c in json.loads(nb.read_text())["cells"]
            if c["metadata"].get("thumbnail")
        ]
        assert len(cells) == 1, f"{nb.name}: {len(cells)} cells marked thumbnail"
        source = "".join(cells[0]["source"])
        grids = re.findall(r"subplots\(\s*(\d+)\s*,\s*(\d+)", source)
        assert all(int(a) * int(b) == 1 for a, b in grids), nb.name
        assert not re.search(r"plot\.(components|rpca_frames|rpca_blocks)\(", source)
        (png,) = [
            o["data"]["image/png"]
            for o in cells[0]["outputs"]
            if "image/png" in o.get("data", {})
        ]
        img = re.search(
            r'<a[^>]*href="_generated/gallery/' + nb.stem + r'\.html"[^>]*>\s*<img[^>]*'
            r'src="([^"]+)"',
            cards,
        )
        assert img, f"no card for {nb.name}"
        shown = (site / img.group(1)).read_bytes()
        png = "".join(png) if isinstance(png, list) else png
        assert shown == base64.b64decode(png), nb.name
        height, width = imread(io.BytesIO(shown)).shape[:2]
        assert width >= 300 and 0.5 <= width / height <= 2.5, (nb.name, width, height)


#: a link or a resource on the machine that built or ran something: dead on the site
_LOCAL = re.compile(
    r"""(?:href|src)\s*=\s*["']?(?:https?:)?//(?:127\.0\.0\.1|localhost|0\.0\.0\.0)""",
    re.I,
)


def test_no_links_to_the_machine_that_ran_the_notebooks(site):
    """The Dask client of a notebook shows its dashboard's address as a link; on the
    site it would be a dead one (the notebook's machine's loopback address)."""
    assert _LOCAL.search('<a href="http://127.0.0.1:8787/status">')  # the pattern
    pages = [p for p in site.rglob("*.html")] + list(site.glob("_downloads/*/*.ipynb"))
    assert len(pages) > 50
    for page in pages:
        found = _LOCAL.search(page.read_text())
        assert found is None, f"{page.relative_to(site)}: {found.group(0)}"
    # the address is still shown, as text, where the notebook printed it
    quick = _text(site / "_generated" / "gallery" / "01_quickstart.html")
    assert "Dashboard:" in quick


def test_guide_pages_carry_the_notes_of_their_class(site):
    text = _text(site / "guide" / "pca.html")
    assert "Passes over the data" in text and "Memory per worker" in text
    assert (
        "pca.yaml" in (site / "guide" / "pca.html").read_text() or "svd_solver" in text
    )


def test_gallery_shows_stored_outputs(site):
    html = (site / "_generated" / "gallery" / "02_eof_gridded.html").read_text()
    assert "<img" in html  # figures from the committed outputs, nothing executed


def test_api_page_from_docstrings(site):
    text = _text(site / "api" / "estimators.html")
    for name in ("PCA", "PPCA", "KernelPCA", "SparsePCA", "RobustPCA"):
        assert name in text, name
    text = _text(site / "api" / "generated" / "scalepca.PCA.html")
    for name in ("n_components", "Passes over the data", "explained_variance_"):
        assert name in text, name


def test_references_resolve_to_scalepca_and_the_projects_it_works_with(site):
    """``nitpicky``: the build above fails on any reference without a target; types
    link to NumPy, xarray, anndata, … through the inventories kept with the docs (no
    network here)."""
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert "nitpicky = True" in conf
    pca = (site / "api" / "generated" / "scalepca.PCA.html").read_text()
    assert "https://numpy.org/doc/stable/reference/generated/numpy.ndarray.html" in pca
    assert "https://docs.xarray.dev/en/stable/generated/xarray.DataArray.html" in pca
    pp = (site / "api" / "generated" / "scalepca.pp.pca.html").read_text()
    assert (
        "https://anndata.readthedocs.io/en/stable/generated/anndata.AnnData.html" in pp
    )
    single = (site / "api" / "singlecell.html").read_text()
    assert (
        "https://scanpy.readthedocs.io/en/stable/generated/scanpy.pp.pca.html" in single
    )


def test_api_index_groups_every_public_name_and_no_kernel(site):
    """Every public name has a page and a line in the index; internal kernels have
    neither."""
    import scalepca
    import scalepca.datasets
    import scalepca.pp

    gen = site / "api" / "generated"
    index = (site / "api" / "index.html").read_text()
    public = [f"scalepca.{n}" for n in scalepca.__all__ if n != "__version__"]
    public += [f"scalepca.pp.{n}" for n in scalepca.pp.__all__]
    public += [
        f"scalepca.datasets.{n}"
        for n in ("GenotypeMatrix", "CountMatrix", "make_genotypes", "make_counts")
    ]
    for name in public:
        page = name if (gen / f"{name}.html").is_file() else None
        if page is None:  # an analysis tool documented under its module's name
            page = next(p.stem for p in gen.glob(f"*.{name.rpartition('.')[2]}.html"))
        assert f"generated/{page}.html" in index, name
    assert "generated/scalepca.linalg" not in index
    assert not list(gen.glob("scalepca.linalg.*"))
    # the API index groups by task: headings, each with one-line summaries
    for heading in (
        "Estimators",
        "Single cell",
        "EOF analysis tools",
        "Data in and out",
        "Synthetic data",
        "Figures",
    ):
        assert f">{heading}<" in index, heading


def test_version_on_every_page_changes_and_source_links(site):
    import scalepca

    for page in site.rglob("*.html"):
        if {"_modules", "_static"} & set(page.parts) or page.name in ("search.html",):
            continue
        assert f"v{scalepca.__version__}" in page.read_text(), page.relative_to(site)
    changes = _text(site / "changes.html")
    for breaking in ("overwrite=True", "n_modes", "n_components"):
        assert breaking in changes, breaking
    # every API page links to its source (sphinx.ext.viewcode), and the source page
    # exists
    for page in (site / "api" / "generated").glob("*.html"):
        html = page.read_text()
        assert "viewcode-link" in html, page.name
        target = re.search(r'href="([^"#]*_modules/[^"#]*)', html).group(1)
        assert (page.parent / target).resolve().is_file(), (page.name, target)


def test_benchmarks_page_dates_each_result_and_marks_stale_ones(site):
    import json

    html = (site / "benchmarks.html").read_text()
    text = _text(site / "benchmarks.html")
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        rec = json.loads(path.read_text())["provenance"]
        row = re.search(">" + re.escape(path.name) + r"<(.*?)</tr>", html, re.S)
        assert row and rec["date"] in row.group(1), path.name
    # the PCA section's chart measured the solvers of its date: its warning says so
    pca = text[text.index("PCA of a") : text.index("One-pass fits against the floor")]
    assert "Stale" in pca and "benchmarks/pca.py" in pca


def test_contract_page_is_readable_in_a_browser(site, tmp_path):
    """The contract's tables are narrow (one per estimator, operation and option),
    their cells are words or symbols, the legend comes first and their headers stay
    in view."""
    html = (site / "contract.html").read_text()
    tables = re.findall(r'<table class="sp-contract".*?</table>', html, re.S)
    assert len(tables) >= 16 + 30  # one per estimator and one per operation, at least
    for table in tables:
        head = re.search(r"<thead>(.*?)</thead>", table, re.S).group(1)
        assert head.count("<th") <= 6, head
    assert html.index('id="legend"') < html.index('class="sp-contract"')
    cells = re.findall(r'<td class="sp-\w+"[^>]*>(.*?)</td>', html, re.S)
    words = {re.sub(r"<[^>]+>|\s*[RDN]\d+", "", c).strip() for c in cells}
    assert words <= {"✓", "refused", "n/a", "defect"}, words
    assert not re.search(r"<td[^>]*>\s*[–-]\d", html), (
        "a code that reads as a negative number"
    )
    dom = rendered_dom((site / "contract.html").as_uri(), tmp_path / "profile")
    marks = re.findall(r'<table class="sp-contract"[^>]*>', dom)
    assert len(marks) == len(tables)
    assert all('data-fits="yes"' in m for m in marks), (
        "a contract table is wider than its column"
    )
    assert all('data-sticky="sticky"' in m for m in marks), "a header row scrolls away"


@pytest.mark.parametrize(
    "cls",
    [
        "PCA",
        "PPCA",
        "KernelPCA",
        "SparsePCA",
        "RobustPCA",
        "MultivariateEOF",
        "ExtendedEOF",
    ],
)
def test_class_pages_as_scikit_learn_s(site, cls):
    """Each estimator's page: a link to its user guide page, See also, and the
    methods it takes from scikit-learn listed and linked to scikit-learn's pages."""
    html = (site / "api" / "generated" / f"scalepca.{cls}.html").read_text()
    assert "Read more in the" in html and "../../guide/" in html
    assert "See also" in html
    inherited = html[html.index("Methods inherited from scikit-learn") :]
    for method in ("get_params", "set_params"):
        assert (
            f"sklearn.base.BaseEstimator.html#sklearn.base.BaseEstimator.{method}"
            in inherited
        ), method
    if cls != "RobustPCA":  # a transformer: scikit-learn's output container and names
        assert "TransformerMixin.set_output" in inherited
        assert "get_feature_names_out" in inherited


def test_pp_pca_page_lists_what_it_writes_where(site):
    text = _text(site / "api" / "generated" / "scalepca.pp.pca.html")
    for field in (
        '.obsm["X_pca"]',
        '.varm["PCs"]',
        '.uns["pca"]["variance"]',
        '.uns["pca"]["variance_ratio"]',
        '.var["highly_variable"]',
    ):
        assert field.replace('"', "&quot;") in text or field in text, field


#: every method a user calls, each documented on its estimator's page (an entry of its
#: own)
API_MEMBERS = {
    "PCA": [
        "fit",
        "transform",
        "inverse_transform",
        "fit_transform",
        "score",
        "score_samples",
        "save",
        "partial_fit",
        "components_xr_",
        "mean_xr_",
        # the EOF interface the analysis tools read a fit through
        "eof_matrix",
        "project",
        "project_rows",
        "reconstruct",
        "to_field",
        "n_spectrum_samples_",
    ],
    "PPCA": [
        "fit",
        "transform",
        "inverse_transform",
        "score_samples",
        "impute",
        "sample",
        "get_covariance",
        "save",
        "partial_fit",
        "components_xr_",
        "mean_xr_",
    ],
    "KernelPCA": ["fit", "transform", "inverse_transform", "partial_fit", "save"],
    "SparsePCA": [
        "fit",
        "transform",
        "partial_fit",
        "fit_covariance",
        "save",
        "components_xr_",
    ],
    "RobustPCA": ["fit", "transform", "inverse_transform", "save"],
    "MultivariateEOF": [
        "fit",
        "transform",
        "inverse_transform",
        "save",
        "components_xr_",
    ],
    "ExtendedEOF": [
        "fit",
        "transform",
        "inverse_transform",
        "save",
        "components_xr_",
        "n_spectrum_samples_",
    ],
}


@pytest.mark.parametrize("cls", sorted(API_MEMBERS))
def test_one_api_page_per_estimator_with_its_methods(site, cls):
    html = (site / "api" / "generated" / f"scalepca.{cls}.html").read_text()
    for member in API_MEMBERS[cls]:
        assert f'id="scalepca.{cls}.{member}"' in html, (
            f"{cls}.{member} is not documented"
        )
    # examples render as written: `rank_`, not `rank\_` (which fails when pasted)
    code = " ".join(
        re.findall(r'<div class="highlight[^"]*"><pre>(.*?)</pre>', html, re.S)
    )
    assert code, f"{cls}'s page has no example"
    assert "\\_" not in html, f"an escaped underscore shows on {cls}'s page"


@pytest.mark.parametrize("cls", sorted(API_MEMBERS))
def test_estimator_examples_run_as_shown(cls):
    """The Examples of each estimator's API page, run as doctests: they print what
    they show."""
    import doctest

    import scalepca

    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    tests = doctest.DocTestFinder(recurse=False).find(
        getattr(scalepca, cls), cls, globs={}
    )
    assert tests and tests[0].examples, f"{cls} has no example"
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_api_pages_of_functions_generators_and_plots(site):
    import scalepca.analysis.plot
    import scalepca.datasets

    gen = site / "api" / "generated"
    for name in (
        "open_matrix",
        "load",
        "connect",
        "north_test",
        "eofs_as_correlation",
        "eofs_as_covariance",
        "Rotator",
    ):
        assert (gen / f"scalepca.{name}.html").is_file(), name
    makers = [
        n
        for n in scalepca.datasets.__all__
        if n.startswith("make_") and "zarr" not in n
    ]
    assert "make_counts" in makers
    for name in makers:
        assert (gen / f"scalepca.datasets.{name}.html").is_file(), name
    for name in scalepca.analysis.plot.__all__:
        assert (gen / f"scalepca.analysis.plot.{name}.html").is_file(), name
    # module docstrings render as reST: no literal-block text or raw roles on the pages
    for page in ("api/config.html", "api/plot.html"):
        text = _text(site / page)
        assert ":data:" not in text and ":mod:" not in text and "``" not in text, page
    assert (site / "_static" / "copybutton.js").is_file()  # sphinx-copybutton


def test_config_reference_is_readable(site):
    html = (site / "config.html").read_text()
    text = _text(site / "config.html")
    for role in (":class:", ":func:", ":data:", ":meth:", ":mod:", ":math:"):
        assert role not in text, f"a raw {role} role shows in the config reference"
    # whole descriptions: every choice of a parameter, not its first sentence only
    cell = r'<span class="pre">{}</span></code></p></td>(.*?)</tr>'
    solver = re.search(cell.format("svd_solver"), html, re.S)  # PCA's, the first
    assert solver is not None
    for choice in ("covariance_eigh", "tsqr", "randomized", "auto"):
        assert choice in solver.group(1), choice
    ppca = html[html.index('id="method-ppca"') : html.index('id="method-kernel-pca"')]
    missing = re.search(cell.format("missing"), ppca, re.S)
    assert (
        missing is not None and "error" in missing.group(1) and "em" in missing.group(1)
    )
    # defaults as YAML in every table, never as Python
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S):
        cells = [
            re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<td>(.*?)</td>", row, re.S)
        ]
        if len(cells) >= 3:  # key, (type,) default, meaning
            default = cells[2] if len(cells) == 4 else cells[1]
            assert default not in ("None", "True", "False", "'auto'"), cells[0]
    # sections in the order of a config file
    order = [
        html.index(f'id="{a}"')
        for a in ("data", "data-generate", "model", "cluster", "output", "top-level")
    ]
    assert order == sorted(order)
    # one page, not also its generated fragment
    assert "config_reference" not in (site / "searchindex.js").read_text()


def test_guide_pages_link_no_private_names(site):
    for page in ("guide/index", *GUIDE_PAGES):
        text = _text(site / f"{page}.html")
        assert not re.search(r"scalepca\._|models\._|io\._", text), page


@pytest.mark.parametrize(
    "name",
    sorted(
        p.stem for p in (ROOT / "docs" / "examples").glob("*.py") if p.name != "run.py"
    ),
)
def test_guide_examples_print_what_their_page_shows(tmp_path, name):
    """Each example of the guide still runs and prints the output its page shows."""
    sys.path.insert(0, str(ROOT / "docs" / "examples"))
    try:
        import run
    finally:
        sys.path.pop(0)
    assert (
        run.run(name, tmp_path)
        == (ROOT / "docs" / "examples" / f"{name}.txt").read_text()
    )
    assert (tmp_path / f"{name}.png").is_file()  # the figure its page shows


def test_kernel_pca_caption_holds():
    """The kernel PCA figure's caption says the rings follow each other along kernel
    PC 1, outer left, inner right, with 4 points in an overlap: its output says so."""
    text = (ROOT / "docs" / "examples" / "kernel_pca.txt").read_text()
    spans = [
        (float(a), float(b))
        for a, b in re.findall(r"kernel PC 1 in \[([-+.\d]+), ([-+.\d]+)\]", text)
    ]
    (inner, middle, outer) = spans  # radii 1.0, 2.8, 5.0
    assert outer[1] < middle[0] and middle[0] < inner[0] and middle[1] < inner[1]
    overlap = re.search(r"overlap: (\d+)", text).group(1)
    caption = (ROOT / "docs" / "guide" / "kernel_pca.md").read_text()
    assert f"only a few points ({overlap} of 6,000)" in " ".join(caption.split())


@pytest.mark.parametrize(
    ("page", "figure"),
    [
        ("guide/genotypes", "genotypes.png"),
        ("guide/single_cell", "single_cell_pbmc.png"),
        ("guide/kernel_pca", "kernel_pca.png"),
        ("guide/robust_pca", "robust_pca.png"),
    ],
)
def test_guide_figure_shows_in_a_browser(site, tmp_path, page, figure):
    """The guide's figures of populations, cell types and genes, and the redrawn
    kernel and robust PCA ones, load on their pages."""
    dom = rendered_dom((site / f"{page}.html").as_uri(), tmp_path / "profile")
    tags = [t for t in re.findall(r"<img[^>]*>", dom) if figure in t]
    assert tags, f"{page}: {figure} is not on the page"
    assert all('data-loaded="yes"' in t for t in tags), f"{page}: {figure} not loaded"


def _keep(png: Path) -> None:
    keep = os.environ.get(
        "SCALEPCA_DOCS_SCREENSHOTS"
    )  # a folder to keep them in, to look at
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)


#: the user guide's pages: each has formulas or a figure the browser must show
GUIDE_PAGES = (
    "guide/choosing",
    "guide/pca",
    "guide/ppca",
    "guide/kernel_pca",
    "guide/sparse_pca",
    "guide/robust_pca",
    "guide/eof",
    "guide/single_cell",
    "guide/mca",
    "guide/hilbert_eof",
    "guide/bootstrap_eof",
)
METHOD_PAGES = [p for p in GUIDE_PAGES if p not in ("guide/choosing",)]


@pytest.mark.parametrize("page", METHOD_PAGES)
def test_guide_page_renders_its_formulas_and_figure(site, tmp_path, page):
    dom = rendered_dom((site / f"{page}.html").as_uri(), tmp_path / "profile")
    # MathJax (served with the site) typeset the formulas, without a TeX error
    assert dom.count("<mjx-container") >= 3, f"{page}: formulas not rendered"
    assert "<mjx-merror" not in dom, f"{page}: a formula failed to typeset"
    # its figure loaded (marked by docs/_static/scalepca.js once the page loaded)
    assert re.search(r"<img[^>]*data-loaded=\"yes\"", dom), f"{page}: no figure shown"
    assert 'data-loaded="no"' not in dom, f"{page}: a broken image"


#: API pages whose docstrings write formulas as math (``:math:`` roles, ``.. math::``
#: blocks)
API_MATH_PAGES = {
    "PCA": 20,
    "PPCA": 20,
    "KernelPCA": 10,
    "SparsePCA": 10,
    "RobustPCA": 5,
    "north_test": 2,
}


@pytest.mark.parametrize("name", sorted(API_MATH_PAGES))
def test_api_page_renders_its_formulas(site, tmp_path, name):
    """The docstrings' formulas are typeset by MathJax on the API pages, not shown as
    code."""
    html = (site / "api" / "generated" / f"scalepca.{name}.html").read_text()
    assert ":math:" not in _text(site / "api" / "generated" / f"scalepca.{name}.html")
    dom = rendered_dom(
        (site / "api" / "generated" / f"scalepca.{name}.html").as_uri(),
        tmp_path / "profile",
    )
    typeset = dom.count("<mjx-container")
    assert typeset >= API_MATH_PAGES[name], f"{name}: {typeset} formulas typeset"
    assert "<mjx-merror" not in dom, f"{name}: a formula failed to typeset"
    # the formulas the issue found written as code are gone from the code spans
    code = " ".join(re.findall(r'<span class="pre">(.*?)</span>', html))
    assert "σ²" not in code and "λ_j" not in code, f"{name}: a formula is still code"


@pytest.mark.parametrize(
    "page",
    [
        "index.html",
        "api/estimators.html",
        "api/generated/scalepca.PPCA.html",
        "api/generated/scalepca.PCA.html",
        "guide/ppca.html",
        "guide/eof.html",
        "config.html",
        "gallery.html",
        "benchmarks.html",
        "getting-started.html",
        "contract.html",
        "changes.html",
        "api/index.html",
    ],
)
def test_pages_render_in_a_real_browser(site, tmp_path, page):
    import numpy as np
    from matplotlib.image import imread

    png = tmp_path / (page.replace("/", "_") + ".png")
    screenshot((site / page).as_uri(), png, tmp_path / "profile")
    _keep(png)
    image = imread(png)
    assert image.shape[:2] == (1000, 1280)
    gray = image[..., :3].mean(axis=2)
    # a rendered page: mostly white background, with text (dark pixels) in many rows
    assert gray.mean() > 0.7
    dark_rows = (gray < 0.5).any(axis=1).sum()
    assert dark_rows > 150, f"only {dark_rows} rows hold dark (text) pixels"
    # the theme's stylesheet loaded: the navigation bar is laid out at the top, not a
    # bare unstyled list running down the page
    assert np.std(gray[:80]) > 0.02
