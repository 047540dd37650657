"""The intersphinx inventories of the projects the API pages link to, for a build
offline.

The documentation links types and functions to NumPy, SciPy, scikit-learn, xarray, Dask,
distributed, anndata and scanpy (``intersphinx_mapping`` in ``conf.py``). Each project's
own ``objects.inv`` is tried first, on its site; the machines this project is built and
tested on reach no site but the package registries, so each mapping has a fallback read
from here:

* ``docs/_inventories/*.inv`` — the projects' own inventories as their Sphinx builds
  wrote them, taken from Debian's documentation packages (``python3.11-doc``,
  ``python-scipy-doc``, ``python-sklearn-doc``, ``python-dask-doc``,
  ``python-distributed-doc``; Debian 12). The files' URIs are relative to the site's
  root, and a name's page has kept its path across versions
  (``generated/dask.array.Array.html``).
* NumPy, anndata and scanpy have no documentation package, and xarray's has no API
  entries: :data:`HANDMADE` lists the few of their objects these pages name, at the
  paths of their sites' API pages (each project's autosummary layout), and
  :func:`write_handmade` writes them as inventories at build time. A name missing
  here fails the build (``nitpicky``): add it with its page.
"""

from __future__ import annotations

import zlib
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
SHIPPED = DOCS / "_inventories"

#: project -> (site, inventory file name or None for a handmade one)
SITES = {
    "python": ("https://docs.python.org/3/", "python.inv"),
    "numpy": ("https://numpy.org/doc/stable/", None),
    "scipy": ("https://docs.scipy.org/doc/scipy/", "scipy.inv"),
    "sklearn": ("https://scikit-learn.org/stable/", "sklearn.inv"),
    "xarray": ("https://docs.xarray.dev/en/stable/", None),
    "dask": ("https://docs.dask.org/en/stable/", "dask.inv"),
    "distributed": ("https://distributed.dask.org/en/stable/", "distributed.inv"),
    "anndata": ("https://anndata.readthedocs.io/en/stable/", None),
    "scanpy": ("https://scanpy.readthedocs.io/en/stable/", None),
}


def _api(
    prefix: str, *names: str, role: str = "py:class"
) -> list[tuple[str, str, str]]:
    return [(n, role, f"{prefix}{n}.html#{n}") for n in names]


#: project -> [(name, domain:role, uri relative to the site)]
HANDMADE = {
    "numpy": [
        *_api(
            "reference/generated/",
            "numpy.ndarray",
            "numpy.dtype",
            "numpy.random.Generator",
            "numpy.random.RandomState",
        ),
        ("numpy.inf", "py:data", "reference/constants.html#numpy.inf"),
        ("numpy.nan", "py:data", "reference/constants.html#numpy.nan"),
        (
            "numpy.random.default_rng",
            "py:function",
            "reference/random/generator.html#numpy.random.default_rng",
        ),
        ("array_like", "std:term", "glossary.html#term-array_like"),
        ("numpy", "py:module", "reference/index.html#module-numpy"),
        ("arrays.scalars", "std:label", "reference/arrays.scalars.html#arrays-scalars"),
    ],
    "xarray": [
        *_api("generated/", "xarray.DataArray", "xarray.Dataset"),
        *_api(
            "generated/",
            "xarray.open_dataset",
            "xarray.open_mfdataset",
            "xarray.apply_ufunc",
            role="py:function",
        ),
    ],
    "anndata": _api("generated/", "anndata.AnnData"),
    "scanpy": [
        *_api(
            "generated/",
            "scanpy.pp.pca",
            "scanpy.pp.normalize_total",
            "scanpy.pp.log1p",
            "scanpy.pp.highly_variable_genes",
            "scanpy.pp.scale",
            role="py:function",
        )
    ],
}


def write_handmade(out: Path) -> dict[str, Path]:
    """Write the handmade inventories to ``out``; return project -> file."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for project, entries in HANDMADE.items():
        head = (
            f"# Sphinx inventory version 2\n# Project: {project}\n# Version: \n"
            "# The remainder of this file is compressed using zlib.\n"
        ).encode()
        body = "".join(f"{name} {role} 1 {uri} -\n" for name, role, uri in entries)
        data = head + zlib.compress(body.encode())
        path = out / f"{project}.inv"
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        files[project] = path
    return files


def intersphinx_mapping(out: Path) -> dict:
    """``intersphinx_mapping``: each site's own inventory, then the one kept here."""
    handmade = write_handmade(out)
    return {
        name: (site, (None, str(SHIPPED / inv) if inv else str(handmade[name])))
        for name, (site, inv) in SITES.items()
    }
