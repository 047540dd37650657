"""Sphinx configuration of the scalepca documentation.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (``-W``: warnings are
errors, as in the test suite). Before the sources are read, ``_ext/docgen.py`` writes
the generated pages (config reference, estimator notes, notebook gallery, benchmark
tables) to ``docs/_generated/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

import docgen  # noqa: E402
import inventories  # noqa: E402

import scalepca  # noqa: E402

docgen.generate()

project = "scalepca"
author = "the scalepca developers"
copyright = "2026, the scalepca developers"
version = release = scalepca.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "sphinx_copybutton",
    "sphinx-mathjax-offline",  # MathJax 3 served with the site: formulas render offline
]

# Markdown pages (MyST) and notebooks; reST for the API pages
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
# generated fragments are included by the pages that show them, never pages themselves
# (a page of their own would be a duplicate in the search index)
exclude_patterns = [
    "_build",
    "**.ipynb_checkpoints",
    "_generated/notes_*.rst",
    "_generated/api_*.rst",
    "_generated/*.md",
    # the gallery's notebooks as downloaded: files of the site, not pages
    "_generated/downloads/**",
]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # generated benchmark pages skip heading levels

# notebooks are committed executed; the build renders their stored outputs only
nb_execution_mode = "off"

# API reference: numpydoc renders the docstrings; autodoc imports the package
autodoc_default_options = {"members": False, "inherited-members": False}
autodoc_typehints = "none"  # the numpydoc Parameters sections carry the types
autosummary_generate = False  # docgen writes the pages (docs/api/generated/)
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# parameter types link to their pages: only the names listed here (and numpydoc's
# builtins), so the prose of a type ("ndarray of shape (n, d)") stays prose
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"
numpydoc_xref_aliases = {
    "ndarray": "numpy.ndarray",
    "ndarrays": "numpy.ndarray",
    "Generator": "numpy.random.Generator",
    "dtype": "numpy.dtype",
    "DataArray": "xarray.DataArray",
    "Dataset": "xarray.Dataset",
    "AnnData": "anndata.AnnData",
    "anndata.AnnData": "anndata.AnnData",
    "path": ":class:`python:pathlib.Path`",
    "path-like": ":term:`python:path-like object`",
    "PCA": "scalepca.PCA",
    "PPCA": "scalepca.PPCA",
    "scalepca.PCA": "scalepca.PCA",
    "scalepca.PPCA": "scalepca.PPCA",
}

# every reference resolves, or the build (-W) fails: to scalepca's pages or, through the
# inventories (docs/_ext/inventories.py: each site's, else the copy kept with the docs),
# to the projects scalepca works with
nitpicky = True
intersphinx_mapping = inventories.intersphinx_mapping(
    DOCS / "_generated" / "inventories"
)
intersphinx_timeout = 5
# the page contents of an estimator list fit(), transform(), … without the class name
# before each (the column is narrow: "SparsePCA.fit_covariance()" was cut)
toc_object_entries_show_parents = "hide"

# the copy button copies the code only: no ">>> " / "... " prompts, no "$ " shell
# prompts
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

html_theme = "pydata_sphinx_theme"
html_title = "scalepca"
html_static_path = ["_static"]
templates_path = ["_templates"]
html_css_files = ["scalepca.css"]
html_js_files = ["scalepca.js"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # the version on every page: beside the name in the navigation bar, and in the
    # footer
    "navbar_start": ["navbar-logo", "sp-version"],
    "footer_start": ["copyright", "sp-version"],
    "footer_end": [],
    # the wide tables (benchmarks, config keys, the contract matrix) get the page's
    # width
    "secondary_sidebar_items": {"**": ["page-toc"], "benchmarks": [], "config": []},
}
# pages without sub-pages get no (empty) navigation column: their tables get its width
html_sidebars = {
    "**": ["sidebar-nav-bs"],
    **{
        page: []
        for page in (
            "getting-started",
            "config",
            "benchmarks",
            "hpc",
            "architecture",
            "scaling",
            "bad_input",
            "contract",
            "development",
            "changes",
        )
    },
}


def setup(app):
    # after numpydoc (priority 500) has turned the sections into reST
    app.connect("autodoc-process-docstring", docgen.escape_docstring, priority=600)
    app.connect("missing-reference", docgen.resolve_reexport)
