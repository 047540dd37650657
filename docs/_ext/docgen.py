"""Pages generated at documentation build time from the code and the repository.

Run by ``docs/conf.py`` before Sphinx reads the sources (and runnable alone:
``python docs/_ext/docgen.py``). Everything goes to ``docs/_generated/`` (not
committed), so the pages below cannot drift from what they describe:

* ``config_reference.md`` — the run-config reference, from the schema in
  :mod:`scalepca.app.config` (fixed sections and :data:`~scalepca.app.config.KEY_DOCS`),
  the estimators' signatures and numpydoc parameter descriptions (``model``), and the
  generators' signatures (``data.generate``). A schema key without a description fails
  the build.
* ``notes_<Class>.rst`` — the Notes section (passes over the data, memory per worker) of
  each estimator's docstring, for the user guide.
* ``gallery/*.ipynb`` — the executed notebooks in ``notebooks/`` (rendered with their
  stored outputs, never executed by the build), each with links to download it
  (``downloads/*.ipynb``) and its source script (``downloads/*.py``); links of the
  outputs to the machine that ran it (a Dask dashboard) are left out.
* ``benchmarks.md`` — curated tables and charts (``bench/*.png``, matplotlib) of
  ``benchmarks/results/*.json`` (in ``docgen_bench.py``).
* ``layout.md`` — one line per module of the package, from the modules' docstrings.
* ``contract_matrix.md`` — what works with what: the contract matrix's tables, from
  the lists and the table of expected outcomes in ``tests/_contract.py`` that
  ``tests/test_contract.py`` runs.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
OUT = DOCS / "_generated"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(headers, rows) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _key(name: str, anchor: str) -> str:
    """A table's key cell: the key as code, with an anchor a link can point at
    (``config.html#data.generate.low_rank.rank``)."""
    return f'<span class="sp-key" id="{anchor}"></span>`{name}`'


# -- plain-text docstrings as reST -----------------------------------------------------
_PROTECTED = re.compile(r"(``.*?``|:\w+:`[^`]*`|`[^`]*`_?|\*\*[^*]+\*\*|\$[^$]+\$)")


def escape_plain(line: str) -> str:
    """Escape what reST reads as markup in plain docstring text, outside literals and
    roles.

    The docstrings write fitted attributes as ``rank_`` and norms as ``|M|``: in reST
    a word ending in ``_`` is a link and ``|M|`` a substitution. Escaped, they render
    as written.
    """
    parts = _PROTECTED.split(line)
    for i in range(0, len(parts), 2):  # even items are outside the protected spans
        text = re.sub(r"(?<=\w)_(?=[\s,.;:)\]]|$)", r"\_", parts[i])
        parts[i] = re.sub(r"\|(\w+)\|", r"\|\1\|", text)
    return "".join(parts)


CODE_DIRECTIVES = (".. code-block::", ".. code::", ".. sourcecode::")


def escape_docstring(app, what, name, obj, options, lines) -> None:
    """``autodoc-process-docstring`` handler, run after numpydoc turned sections into
    reST.

    Code is left as written: doctest blocks (from a ``>>>`` line to the next blank
    line) and literal blocks (the indented lines after a paragraph ending in ``::``)
    are literal in reST already, and an escape there would show (``rank\\_`` fails
    when pasted).
    """
    out, doctest, literal, base = [], False, False, None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith(">>>"):
            doctest = True
        elif not stripped:
            doctest = False
        if (
            base is not None and stripped
        ):  # a literal block is what is indented past `base`
            literal = indent > base
            base = base if literal else None
        code = doctest or literal
        out.append(line if code else escape_plain(line))
        if not code and (
            stripped.endswith("::") or stripped.startswith(CODE_DIRECTIVES)
        ):
            base, literal = indent, False
    lines[:] = out


# -- config reference ------------------------------------------------------------------
_ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|data|attr|exc|obj):`([^`]+)`")


def _rst_to_md(text: str) -> str:
    """Docstring fragments in reST as MyST: ``literal`` → `literal`, :class:`X` →
    {py:class}`X`, :doc:`p` → {doc}`p`, :math:`x` → {math}`x` (a role left in reST
    would show as raw text)."""
    text = _ROLE.sub(lambda m: f"{{py:{m.group(1)}}}`{m.group(2)}`", text)
    text = re.sub(r":doc:`([^`]+)`", r"{doc}`\1`", text)  # a link to a guide page
    # formulas: {math} roles; a table cell cannot hold "|", so norms are written \Vert,
    # \vert
    text = re.sub(
        r":math:`([^`]+)`",
        lambda m: (
            "{math}`"
            + m.group(1).replace("\\|", "\\Vert ").replace("|", "\\vert ")
            + "`"
        ),
        text,
    )
    return re.sub(r"``(.+?)``", r"`\1`", text)


def _yaml(value) -> str:
    """A default as it is written in a config file (YAML), not as Python writes it."""
    import yaml

    if isinstance(value, tuple):
        value = list(value)
    try:
        text = yaml.safe_dump(value, default_flow_style=True).strip()
    except yaml.YAMLError:  # an object YAML cannot write: not settable from a config
        return f"(Python: `{value!r}`)"
    return "`" + text.removesuffix("...").strip() + "`"


def _param_docs(doc) -> dict[str, str]:
    """Every parameter's whole numpydoc description, one line of MyST."""
    descs = {}
    for p in doc["Parameters"]:
        text = _rst_to_md(" ".join(line.strip() for line in p.desc).strip())
        for n in p.name.split(","):
            descs[n.strip()] = text
    return descs


def _model_section() -> list[str]:
    from numpydoc.docscrape import ClassDoc

    from scalepca.app import config
    from scalepca.persistence.registry import METHODS, estimator_class

    parts = [
        "## model\n",
        "`method` picks the estimator; its parameters sit beside `method` (or under "
        "`model.params`, needed for sparse PCA's own `method` parameter). Names, "
        "types, choices and ranges are checked against the estimator's parameter "
        "table when the config is read; bounds that depend on the data "
        "(`n_components` at most min(n, d)) and the conditions between parameters "
        "for the data's shape, in `scalepca validate` and before `run` starts a "
        "cluster — the same table `fit` checks. The meanings are the estimators' own "
        "parameter descriptions.\n",
    ]
    for method, target in METHODS.items():
        cls = estimator_class(method)
        name = target.split(":")[1]
        full = public_name(name)  # the page the API reference gives it
        parts.append(f"### method: {method}\n")
        parts.append(
            f"Estimator {{class}}`{full}` ([API page](api/generated/{full}.rst)).\n"
        )
        descs = _param_docs(ClassDoc(cls))
        rows = []
        for pname, par in inspect.signature(cls.__init__).parameters.items():
            if pname == "self" or par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD):
                continue
            default = "required" if par.default is par.empty else _yaml(par.default)
            rows.append(
                [
                    _key(pname, f"model.{method}.{pname}"),
                    config.describe_parameter(cls, pname),
                    default,
                    descs.get(pname, ""),
                ]
            )
        parts.append(_table(["key", "type", "default", "meaning"], rows))
    return parts


def _generate_section() -> list[str]:
    """``data.generate``: each generator's keys, with the meanings of its docstring's
    Parameters section (the one place they are written: its API page shows them too).
    A key without one fails the build."""
    from numpydoc.docscrape import FunctionDoc

    from scalepca.app.config import GENERATE_PYTHON_ONLY
    from scalepca.datasets import GENERATORS

    parts = [
        "## data.generate\n",
        "`kind` (default `low_rank`) and the generator's parameters; the store is "
        "written block by block at `data.path` when it does not exist.\n",
    ]
    missing = []
    for kind, func in GENERATORS.items():
        parts.append(f"### kind: {kind}\n")
        summary = (inspect.getdoc(func) or "").split("\n\n")[0].replace("\n", " ")
        if summary:
            parts.append(_rst_to_md(summary) + "\n")
        descs = _param_docs(FunctionDoc(func))
        rows = []
        for pname, par in inspect.signature(func).parameters.items():
            if pname in GENERATE_PYTHON_ONLY:
                continue
            if not descs.get(pname):
                missing.append(f"{func.__name__}({pname})")
            default = "required" if par.default is par.empty else _yaml(par.default)
            rows.append(
                [
                    _key(pname, f"data.generate.{kind}.{pname}"),
                    default,
                    descs.get(pname, ""),
                ]
            )
        parts.append(_table(["key", "default", "meaning"], rows))
    if missing:
        raise RuntimeError(
            "generator parameters without a description in their docstring's "
            f"Parameters section: {', '.join(missing)}"
        )
    return parts


def _section_anchor(title: str, prefix: str) -> str:
    """The anchor prefix of a fixed section's keys: its key prefix, with the kind for
    sections of one cluster kind (``cluster.slurm``) and the kinds for the sections
    that share a prefix (``cluster.adaptive.batch``)."""
    kind = re.match(r"cluster, kind: (\w+)", title)
    if kind:
        return f"cluster.{kind.group(1)}"
    if prefix == "cluster.adaptive":
        which = re.search(r"\((\w+)", title).group(1)
        return f"{prefix}.{which}"
    return prefix


def config_reference() -> str:
    from scalepca.app import config

    parts = [
        "<!-- generated by docs/_ext/docgen.py from "
        "scalepca/app/config.py: do not edit -->\n",
        "# Config reference\n",
        "A run config is a YAML file with the sections `data`, `model`, `cluster`, "
        "`output` and the key `progress`. Unknown keys are refused with the allowed "
        "ones; `scalepca validate CONFIG` checks a config against its data without "
        "running it, `scalepca plan CONFIG` predicts its passes, bytes, peak worker "
        "memory and time (see [Scaling](scaling.md)), and `--set key.sub=value` "
        "overrides any key on the command line. "
        "Relative paths in the file ("
        + ", ".join(f"`{'.'.join(k)}`" for k in config.PATH_KEYS)
        + ") are taken from the config file's folder. Defaults are written as in the YAML "
        "file. Every key's row has an anchor to link to: its key with its section "
        "(`config.html#data.path`), and with the generator, method or cluster kind "
        "where the key is one of theirs (`#data.generate.rings.radii`, "
        "`#model.pca.n_components`, `#cluster.slurm.queue`).\n",
        "Sections, in the order of a config file: [data](#data), "
        "[data.generate](#data-generate), [model](#model), [cluster](#cluster), "
        "[output](#output), [progress](#top-level).\n",
    ]
    missing, fixed = [], {}
    for title, prefix, schema in config.schema_sections():
        rows = []
        section = _section_anchor(title, prefix)
        if title.startswith("cluster, kind: local"):
            rows.append(
                [
                    _key("kind", "cluster.kind"),
                    "a string",
                    "`local`",
                    _rst_to_md(config.KEY_DOCS["cluster.kind"])
                    + " One of: "
                    + ", ".join(f"`{k}`" for k in config.CLUSTER_KINDS),
                ]
            )
        for key, field in schema.items():
            full = f"{prefix}.{key}" if prefix else key
            doc = config.KEY_DOCS.get(full)
            if doc is None:
                missing.append(full)
                continue
            typ, default = config.describe_field(field)
            default = default if default == "required" else f"`{default}`"
            anchor = f"{section}.{key}" if section else key
            rows.append([_key(key, anchor), typ, default, _rst_to_md(doc)])
        fixed[title] = _table(["key", "type", "default", "meaning"], rows)
    if missing:
        raise RuntimeError(
            f"config keys without a description in scalepca.app.config.KEY_DOCS: "
            f"{', '.join(missing)}"
        )

    def take(pred, level="##"):
        out = []
        for title in [t for t in fixed if pred(t)]:
            out += [f"{level} {title}\n", fixed.pop(title)]
        return out

    parts += take(lambda t: t == "data")
    parts += _generate_section()
    parts += _model_section()
    parts.append("## cluster\n")
    parts.append("`kind` picks where the workers run; each kind has its own keys.\n")
    parts += take(lambda t: t.startswith("cluster"), "###")
    parts += take(lambda t: t == "output")
    parts += take(
        lambda t: True
    )  # the top level (progress) and any section added later
    return "\n".join(parts)


# -- estimator notes -------------------------------------------------------------------
CLASSES = (
    "PCA",
    "PPCA",
    "KernelPCA",
    "SparsePCA",
    "RobustPCA",
    "MultivariateEOF",
    "ExtendedEOF",
)


def class_notes(name: str) -> str:
    from numpydoc.docscrape import ClassDoc

    import scalepca

    notes = ClassDoc(getattr(scalepca, name))["Notes"]
    if not notes:
        raise RuntimeError(f"scalepca.{name} has no Notes section (passes and memory)")
    return "\n".join(escape_plain(line) for line in notes) + "\n"


# -- gallery ---------------------------------------------------------------------------
def _notebook_thumbnail(nb: dict, name: str) -> bytes:
    """The PNG of the notebook's gallery card: the figure of its cell marked
    ``thumbnail=true`` in ``notebooks/src/`` (one figure of one panel, chosen to be
    readable at the card's size; a grid of panels squeezed into a card is not)."""
    import base64

    pngs = [
        out["data"]["image/png"]
        for cell in nb["cells"]
        if cell.get("metadata", {}).get("thumbnail")
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]
    if len(pngs) != 1:
        raise RuntimeError(
            f"notebooks/{name}: the gallery needs one cell marked thumbnail=true with "
            f"one figure; found {len(pngs)} figures in such cells"
        )
    png = pngs[0]
    return base64.b64decode("".join(png) if isinstance(png, list) else png)


#: a link to the machine that ran a notebook (a Dask dashboard, a scheduler): dead
#: anywhere else
_LOCAL_LINK = re.compile(
    r"<a\b[^>]*href=[\"']?(?:https?:)?//(?:127\.0\.0\.1|localhost|0\.0\.0\.0)"
    r"[^>]*>(.*?)</a>",
    re.S | re.I,
)


def _without_local_links(nb: dict) -> dict:
    """The notebook with every link of its outputs to the machine that ran it (a
    Dask client's dashboard) turned into plain text: the address stays readable, as
    the place the dashboard was, and nothing on the site links to it."""
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            for mime, value in out.get("data", {}).items():
                if mime != "text/html":
                    continue
                lines = value if isinstance(value, list) else [value]
                text = _LOCAL_LINK.sub(r"\1", "".join(lines))
                out["data"][mime] = text.splitlines(keepends=True)
    return nb


def _download_cell(stem: str) -> dict:
    """The markdown cell put under a gallery page's title: the notebook and its
    script, as files of the site (``{download}``: Sphinx copies them to
    ``_downloads/``)."""
    text = (
        "```{container} sp-downloads\n"
        f"Download this example: {{download}}`notebook ({stem}.ipynb) "
        f"<../downloads/{stem}.ipynb>` · {{download}}`Python script ({stem}.py) "
        f"<../downloads/{stem}.py>` (jupytext's percent format: runs as it stands "
        "with `python`, and opens as a notebook in Jupyter with jupytext).\n"
        "```"
    )
    return {"cell_type": "markdown", "id": "downloads", "metadata": {}, "source": text}


def gallery_files(out: Path) -> list[Path]:
    """Each notebook of ``notebooks/`` as the gallery shows it and as it is
    downloaded.

    ``out/gallery/<name>.ipynb`` is the page (its stored outputs, a download cell
    under the title); ``out/downloads/<name>.ipynb`` the notebook and
    ``out/downloads/<name>.py`` its source script (``notebooks/src/``), both without
    links to the machine that ran it. Returns the files.
    """
    written = []
    for sub in ("gallery", "downloads"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = _without_local_links(json.loads(path.read_text()))
        script = ROOT / "notebooks" / "src" / f"{path.stem}.py"
        page = dict(
            nb, cells=[nb["cells"][0], _download_cell(path.stem), *nb["cells"][1:]]
        )
        for target, text in (
            (
                out / "downloads" / path.name,
                json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
            ),
            (out / "downloads" / script.name, script.read_text()),
            (
                out / "gallery" / path.name,
                json.dumps(page, indent=1, ensure_ascii=False) + "\n",
            ),
        ):
            if not target.exists() or target.read_text() != text:
                target.write_text(text)
            written.append(target)
    return written


def gallery_cards(thumbs: Path) -> str:
    """The gallery page's grid: a thumbnail and the title of every notebook, linked to
    it.

    Thumbnails are written to ``thumbs``; paths are relative to ``docs/`` (the
    gallery page).
    """
    thumbs.mkdir(parents=True, exist_ok=True)
    cards = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        first = "".join(nb["cells"][0]["source"]).splitlines()[0]
        title = first.lstrip("#").strip().replace("`", "")
        png = _notebook_thumbnail(nb, path.name)
        card = ["::::{container} sp-card"]
        target = thumbs / f"{path.stem}.png"
        if not target.exists() or target.read_bytes() != png:
            target.write_bytes(png)
        rel = target.relative_to(DOCS).as_posix()
        card += [
            "```{image} " + rel,
            f":alt: {title}",
            f":target: _generated/gallery/{path.stem}.html",
            "```",
        ]
        card += ["", f"{{doc}}`{title} <_generated/gallery/{path.stem}>`", "::::", ""]
        cards += card
    return "\n".join([":::::{container} sp-gallery", "", *cards, ":::::", ""])


# -- package layout --------------------------------------------------------------------
def package_layout() -> str:
    """One line per module of the package: its path and the first line of its
    docstring."""
    import ast

    pkg = ROOT / "scalepca"
    rows = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        first = doc.split("\n\n")[0].replace("\n", " ").strip()
        # modules and their functions are named as code: most are internal, without a
        # page
        rows.append([f"`{rel}`", _rst_to_md(_ROLE.sub(r"``\2``", first))])
    return (
        "<!-- generated by docs/_ext/docgen.py from the modules' docstrings -->\n\n"
        + _table(["module", "what it holds (its docstring's first sentence)"], rows)
    )


# -- contract matrix -------------------------------------------------------------------
def contract_matrix() -> str:
    """The contract matrix's page, from the same lists the tests run (NumPy only
    imported)."""
    from docgen_contract import contract_page

    return contract_page()


# -- API reference: one page per public object -----------------------------------------
#: the API reference's sections, grouped by task: page (docs/api/<page>.rst) -> (the
#: module the page presents, or None; [(a group's heading or None, the objects it lists,
#: by name in that module or by full name)]), each object documented on a page of its
#: own (docs/api/generated/<full name>.rst). The one place that says where a public name
#: lives: a module that moves changes here only. Internal kernels (``scalepca.linalg``)
#: are not listed: the architecture page describes them.
API = {
    "estimators": (
        None,
        [
            (
                "PCA and its variants",
                [
                    "scalepca.PCA",
                    "scalepca.PPCA",
                    "scalepca.KernelPCA",
                    "scalepca.SparsePCA",
                    "scalepca.RobustPCA",
                ],
            ),
            (
                "Gridded fields",
                [
                    "scalepca.MultivariateEOF",
                    "scalepca.ExtendedEOF",
                    "@MCA",
                    "@HilbertEOF",
                    "@BootstrapEOF",
                ],
            ),
        ],
    ),
    "singlecell": (None, [(None, ["scalepca.pp.pca"])]),
    "eof": (
        "scalepca.analysis.eof",
        [
            (
                "After the fit",
                [
                    "scalepca.north_test",
                    "NorthTest",
                    "scalepca.eofs_as_correlation",
                    "scalepca.eofs_as_covariance",
                    "scalepca.Rotator",
                ],
            ),
            (
                "EOFs, PCs, reconstructions and projections as eofs names them",
                [
                    "scalepca.analysis.eof_fields.eofs",
                    "scalepca.analysis.eof_fields.pcs",
                    "scalepca.analysis.eof_fields.reconstructed_field",
                    "scalepca.analysis.eof_fields.project_field",
                ],
            ),
            ("Latitude weights", ["coslat_weights", "find_lat_lon"]),
        ],
    ),
    "data": (
        "scalepca.io",
        [
            (
                None,
                [
                    "scalepca.open_matrix",
                    "scalepca.load",
                    "write_array",
                    "open_zarr_node",
                    "scalepca.preprocessing.as_matrix",
                ],
            )
        ],
    ),
    "datasets": (
        "scalepca.datasets",
        [
            (
                "Generators",
                [
                    "make_low_rank",
                    "make_missing",
                    "make_gridded",
                    "make_coupled_fields",
                    "make_rings",
                    "make_sparse_spike",
                    "make_low_rank_sparse",
                    "make_counts",
                    "make_genotypes",
                    "make_low_rank_zarr",
                ],
            ),
            ("Writing", ["write_dataset", "write_bed"]),
            (
                "The models behind them",
                [
                    "low_rank_factors",
                    "sparse_spike_loadings",
                    "count_model",
                    "CountMatrix",
                    "GenotypeMatrix",
                ],
            ),
        ],
    ),
    "plot": (
        "scalepca.analysis.plot",
        [
            (
                None,
                [
                    "scree",
                    "components",
                    "scores",
                    "top_loadings",
                    "sparse_loadings",
                    "rpca_frames",
                    "rpca_blocks",
                    "convergence",
                ],
            )
        ],
    ),
    "cluster": (
        "scalepca.app.cluster",
        [(None, ["scalepca.connect", "make_cluster", "progress"])],
    ),
    "config": (
        "scalepca.app.config",
        [
            (
                None,
                [
                    "load_config",
                    "validate_config",
                    "resolve_paths",
                    "apply_overrides",
                    "ConfigError",
                ],
            )
        ],
    ),
}

#: the analysis tools' modules: ``@MCA`` above is ``scalepca.MCA`` where the package
#: exports it at the top level, else its module's name (each page follows the public
#: name)
ANALYSIS = {
    "MCA": "scalepca.analysis.mca",
    "HilbertEOF": "scalepca.analysis.hilbert_eof",
    "BootstrapEOF": "scalepca.analysis.bootstrap",
}


def public_name(name: str) -> str:
    import scalepca

    name = name.removeprefix("@")
    return (
        f"scalepca.{name}"
        if name in getattr(scalepca, "__all__", ())
        else f"{ANALYSIS[name]}.{name}"
    )


def api_groups(page: str) -> list[tuple[str | None, list[str]]]:
    """The groups of a section page, each with the full names of the objects it
    lists."""
    module, groups = API[page]
    return [
        (
            title,
            [
                public_name(n)
                if n.startswith("@")
                else n
                if n.startswith("scalepca.")
                else f"{module}.{n}"
                for n in names
            ],
        )
        for title, names in groups
    ]


def api_names(page: str) -> list[str]:
    """The full names of the objects a section page lists."""
    return [n for _, names in api_groups(page) for n in names]


def _resolve(dotted: str):
    import importlib

    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def public_members(cls) -> list[tuple[str, str]]:
    """``(name, directive)`` of the public methods and properties scalepca itself
    defines on ``cls`` or its scalepca bases (scikit-learn's ``get_params`` & co. are
    left to its docs)."""
    out = []
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        owner = next(c for c in cls.__mro__ if name in c.__dict__)
        if not owner.__module__.startswith("scalepca"):
            continue
        attr = owner.__dict__[name]
        if type(attr).__name__ == "RequestMethod":  # scikit-learn's metadata routing
            continue
        if isinstance(attr, property):
            out.append((name, "autoproperty"))
        elif inspect.isfunction(attr) or hasattr(
            attr, "fn"
        ):  # hasattr: available_if methods
            out.append((name, "automethod"))
        # anything else (a named tuple's fields) is described by the class's docstring
    return out


#: the user guide's page of each documented object (by its last name)
GUIDE = {
    "PCA": "pca",
    "PPCA": "ppca",
    "KernelPCA": "kernel_pca",
    "SparsePCA": "sparse_pca",
    "RobustPCA": "robust_pca",
    "MultivariateEOF": "eof",
    "ExtendedEOF": "eof",
    "MCA": "mca",
    "HilbertEOF": "hilbert_eof",
    "BootstrapEOF": "bootstrap_eof",
    "pca": "single_cell",
    "north_test": "eof",
    "NorthTest": "eof",
    "eofs_as_correlation": "eof",
    "eofs_as_covariance": "eof",
    "Rotator": "eof",
    "eofs": "eof",
    "pcs": "eof",
    "reconstructed_field": "eof",
    "project_field": "eof",
    "coslat_weights": "eof",
    "make_genotypes": "pca",
    "GenotypeMatrix": "pca",
}

#: related objects of each estimator (See also), scalepca's first, then its peers'
SEE_ALSO = {
    "PCA": [
        "scalepca.PPCA",
        "scalepca.KernelPCA",
        "scalepca.SparsePCA",
        "scalepca.RobustPCA",
        "sklearn.decomposition.PCA",
        "sklearn.decomposition.IncrementalPCA",
    ],
    "PPCA": [
        "scalepca.PCA",
        "sklearn.decomposition.PCA",
        "sklearn.decomposition.FactorAnalysis",
    ],
    "KernelPCA": ["scalepca.PCA", "sklearn.decomposition.KernelPCA"],
    "SparsePCA": [
        "scalepca.PCA",
        "sklearn.decomposition.SparsePCA",
        "sklearn.decomposition.MiniBatchSparsePCA",
    ],
    "RobustPCA": ["scalepca.PCA", "scalepca.PPCA"],
    "MultivariateEOF": ["scalepca.PCA", "scalepca.ExtendedEOF", "@MCA"],
    "ExtendedEOF": ["scalepca.PCA", "scalepca.MultivariateEOF", "@HilbertEOF"],
    "MCA": ["scalepca.MultivariateEOF", "sklearn.cross_decomposition.PLSSVD"],
    "HilbertEOF": ["scalepca.PCA", "scalepca.ExtendedEOF", "scipy.signal.hilbert"],
    "BootstrapEOF": ["scalepca.PCA", "scalepca.north_test"],
    "pca": ["scalepca.PCA", "scanpy.pp.pca"],
}

#: scikit-learn's page of each method an estimator inherits from it (its inventory's
#: names)
SKLEARN_METHODS = {
    "get_params": "sklearn.base.BaseEstimator.get_params",
    "set_params": "sklearn.base.BaseEstimator.set_params",
    "set_output": "sklearn.base.TransformerMixin.set_output",
    "get_feature_names_out": "sklearn.base.ClassNamePrefixFeaturesOutMixin"
    ".get_feature_names_out",
    "fit_transform": "sklearn.base.TransformerMixin.fit_transform",
}


def inherited_members(cls) -> list[tuple[str, str]]:
    """``(name, first line of its docstring)`` of the public methods ``cls`` takes from
    scikit-learn as they are (``get_params``, ``set_output``, …)."""
    out = []
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        owner = next(c for c in cls.__mro__ if name in c.__dict__)
        attr = owner.__dict__[name]
        if (
            owner.__module__.startswith("scalepca")
            or type(attr).__name__ == "RequestMethod"
            or not callable(getattr(cls, name, None))
        ):  # available_if: a descriptor
            continue
        doc = (inspect.getdoc(getattr(cls, name)) or "").strip().split("\n")[0]
        out.append((name, doc))
    return out


def _guide_link(name: str) -> list[str]:
    if name not in GUIDE:
        return []
    return [f"Read more in the :doc:`user guide <../../guide/{GUIDE[name]}>`.", ""]


def _see_also(name: str) -> list[str]:
    """A See also box after the object's description: its peers with their first
    lines."""
    lines = []
    if name in SEE_ALSO:
        lines += [".. seealso::", ""]
        for other in SEE_ALSO[name]:
            target = public_name(other) if other.startswith("@") else other
            lines.append(f"   :obj:`{target}`")
            if target.startswith("scalepca"):
                summary = (inspect.getdoc(_resolve(target)) or "").split("\n\n")[0]
                lines[-1] += " — " + escape_plain(" ".join(summary.split()))
            lines.append("")
    return lines


def _inherited_section(cls) -> list[str]:
    inherited = inherited_members(cls)
    if not inherited:
        return []
    lines = [
        "Methods inherited from scikit-learn",
        "-----------------------------------",
        "",
        "As every scikit-learn estimator has them; documented on scikit-learn's pages.",
        "",
    ]
    for method, doc in inherited:
        ref = (
            f":meth:`{method}() <{SKLEARN_METHODS[method]}>`"
            if method in SKLEARN_METHODS
            else f"``{method}()``"
        )
        lines.append(f"- {ref} — {escape_plain(doc)}")
    return lines + [""]


def api_page(dotted: str) -> str:
    obj = _resolve(dotted)
    module, _, name = dotted.rpartition(".")
    lines = [
        ".. generated by docs/_ext/docgen.py: do not edit",
        "",
        name,
        "=" * len(name),
        "",
        f".. currentmodule:: {module}",
        "",
        *_guide_link(name),
    ]
    if inspect.isclass(obj) and not issubclass(obj, BaseException):
        members = public_members(obj)
        lines += [f".. autoclass:: {name}", "", *_see_also(name)]
        methods = [m for m, kind in members if kind == "automethod"]
        props = [m for m, kind in members if kind == "autoproperty"]
        if methods:
            lines += ["Methods", "-------", "", ".. autosummary::", ""]
            lines += [f"   ~{name}.{m}" for m in methods] + [""]
            lines += [f".. automethod:: {name}.{m}\n" for m in methods]
        if props:
            # an estimator's properties are its fitted attributes as xarray objects
            title = (
                "Fitted attributes as xarray" if hasattr(obj, "fit") else "Properties"
            )
            lines += [title, "-" * len(title), ""]
            lines += [f".. autoproperty:: {name}.{p}\n" for p in props]
        lines += _inherited_section(obj)
    elif inspect.isclass(obj):
        lines += [f".. autoexception:: {name}", ""]
    else:
        lines += [f".. autofunction:: {name}", "", *_see_also(name)]
    return "\n".join(lines) + "\n"


def api_section(page: str) -> str:
    """One section page's body: its module's docstring, a summary table of each group of
    its objects and their table of contents."""
    module, _ = API[page]
    lines = [f".. automodule:: {module}", "   :no-members:", ""] if module else []
    # full names: no current module (the automodule sets one)
    lines += [".. currentmodule:: None", ""]
    for title, names in api_groups(page):
        if title:
            lines += [title, "-" * len(title), ""]
        lines += [".. autosummary::", ""] + [f"   {n}" for n in names] + [""]
    lines += [".. toctree::", "   :hidden:", ""]
    lines += [f"   generated/{n}" for n in api_names(page)]
    return "\n".join(lines) + "\n"


def api_index() -> str:
    """The API index: every section page's title (a link to it) and its objects, each
    with the first line of its docstring, by task."""
    lines = [".. currentmodule:: None", ""]
    for page in API:
        title = (DOCS / "api" / f"{page}.rst").read_text().splitlines()[0]
        lines += [title, "-" * len(title), "", f"On the page :doc:`{page}`.", ""]
        for group, names in api_groups(page):
            if group:
                lines += [f".. rubric:: {group}", ""]
            lines += [".. autosummary::", ""] + [f"   {n}" for n in names] + [""]
    return "\n".join(lines) + "\n"


# -- references to re-exported names ---------------------------------------------------
def _documented() -> dict[int, str]:
    """id of each documented object (and of each method or property on a documented
    class) -> the full name its page gives it."""
    out = {}
    for page in API:
        for name in api_names(page):
            obj = _resolve(name)
            out[id(obj)] = name
            if inspect.isclass(obj):
                for member, _ in public_members(obj):
                    attr = inspect.getattr_static(obj, member)
                    out[id(getattr(attr, "__func__", attr))] = f"{name}.{member}"
    return out


_DOCUMENTED: dict[int, str] = {}


def _lookup(dotted: str):
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = (
                    inspect.getattr_static(obj, attr)
                    if inspect.isclass(obj)
                    else getattr(obj, attr)
                )
        except AttributeError:
            return None
        return getattr(obj, "__func__", obj)
    return None


def resolve_reexport(app, env, node, contnode):
    """``missing-reference`` handler: a name written where the code defines it
    (``scalepca.models.pca.PCA``, or ``PCA`` inside that module, ``load`` inside a
    class) links to the page of its public name (``scalepca.PCA``). Anything else
    stays unresolved, and fails the build (``nitpicky``)."""
    if node.get("refdomain") != "py":
        return None
    if not _DOCUMENTED:
        _DOCUMENTED.update(_documented())
    target = node["reftarget"].lstrip("~.")
    module, cls = node.get("py:module"), node.get("py:class")
    candidates = [target, f"scalepca.{target}"]
    if module:
        candidates[:0] = [f"{module}.{cls}.{target}"] if cls else []
        candidates.insert(len(candidates) - 2, f"{module}.{target}")
    name = None
    for dotted in candidates:
        obj = _lookup(dotted) if dotted.startswith("scalepca") else None
        name = _DOCUMENTED.get(id(obj)) if obj is not None else None
        if name is not None:
            break
    else:  # a summary line in a table has no module: the one documented name it ends
        ends = [n for n in _DOCUMENTED.values() if n.endswith(f".{target}")]
        # a method named on its class's page: that class's
        page = node["refdoc"].rpartition("/")[2]
        ends = [n for n in ends if n.startswith(f"{page}.")] or ends
        name = ends[0] if len(set(ends)) == 1 else None
    if name is None:
        return None
    return env.domains["py"].resolve_xref(
        env, node["refdoc"], app.builder, "obj", name, node, contnode
    )


# -- all -------------------------------------------------------------------------------
def generate() -> list[Path]:
    """Write every generated page under ``docs/_generated``; return the files
    written."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    OUT.mkdir(exist_ok=True)
    written = []

    def write(name: str, text: str) -> None:
        path = OUT / name
        if (
            not path.exists() or path.read_text() != text
        ):  # unchanged files keep their mtime
            path.write_text(text)
        written.append(path)

    write("config_reference.md", config_reference())
    for name in CLASSES:
        write(f"notes_{name}.rst", class_notes(name))
    from docgen_bench import (
        benchmark_page,
        status_table,
    )  # imports this module: loaded once

    write("benchmarks.md", benchmark_page())
    write("benchmarks_status.md", status_table())
    write("layout.md", package_layout())
    write("contract_matrix.md", contract_matrix())
    api_dir = DOCS / "api" / "generated"
    api_dir.mkdir(exist_ok=True)
    pages = set()
    write("api_index.rst", api_index())
    for page in API:
        write(f"api_{page}.rst", api_section(page))
        for name in api_names(page):
            write(f"../api/generated/{name}.rst", api_page(name))
            pages.add(f"{name}.rst")
    for old in api_dir.glob("*.rst"):  # a page of a name that moved or went
        if old.name not in pages:
            old.unlink()
    gallery = OUT / "gallery"
    gallery.mkdir(exist_ok=True)
    write("gallery_cards.md", gallery_cards(gallery / "thumbs"))
    written += gallery_files(OUT)
    return written


if __name__ == "__main__":
    for p in generate():
        print(p.relative_to(ROOT))
