"""The API pages' content, checked on the docstrings they are generated from.

Every fitted attribute a public estimator or tool sets is described in its Attributes
section; the methods a user calls document their parameters and what they return; the
methods taken from the literature cite it (References); and every Examples block the
API pages show runs as shown. The rendered pages themselves are checked by
``tests/test_docs.py``.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import scalepca

NumpyDocString = pytest.importorskip(
    "numpydoc.docscrape", reason="docs extra not installed: pip install -e '.[docs]'"
).NumpyDocString

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
docgen = importlib.import_module("docgen")


def _documented_attributes(cls) -> dict[str, str]:
    """Name -> description of each entry of the class's Attributes section (an entry
    may name several attributes, ``a_, b_ : int``)."""
    doc = NumpyDocString(inspect.getdoc(cls) or "")
    out = {}
    for entry in doc["Attributes"]:
        for name in entry.name.split(","):
            out[name.strip()] = " ".join(entry.desc).strip()
    return out


def _rng():
    return np.random.default_rng(0)


def _low_rank(n=120, d=12):
    rng = _rng()
    return rng.standard_normal((n, 3)) @ rng.standard_normal((3, d)) + 0.1 * (
        rng.standard_normal((n, d))
    )


def _frame():
    import pandas as pd

    X = _low_rank()
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])


def _with_gaps():
    X = _low_rank()
    X[_rng().random(X.shape) < 0.05] = np.nan
    return X


def _genotypes():
    from scalepca.datasets import make_genotypes

    return make_genotypes(60, 50, seed=1).data


#: fits that between them set every fitted attribute (the options that add some:
#: solvers, missing values, standardising, the pre-image map, feature names)
FITS = {
    "PCA": lambda: scalepca.PCA(3).fit(_frame()),
    "PCA randomized": lambda: scalepca.PCA(3, svd_solver="randomized").fit(_low_rank()),
    "PCA sketch": lambda: scalepca.PCA(3, svd_solver="sketch").fit(_low_rank()),
    "PCA genotype": lambda: scalepca.PCA(2, standardize="genotype").fit(_genotypes()),
    "PCA partial_fit": lambda: scalepca.PCA(3).partial_fit(_low_rank()),
    "PPCA": lambda: scalepca.PPCA(3, standardize=True).fit(_frame()),
    "PPCA em": lambda: scalepca.PPCA(3, missing="em").fit(_with_gaps()),
    "KernelPCA exact": lambda: scalepca.KernelPCA(
        3, approximation="exact", fit_inverse_transform=True, standardize=True
    ).fit(_frame()),
    "KernelPCA nystroem": lambda: scalepca.KernelPCA(
        3, fit_inverse_transform=True, random_state=0
    ).fit(_low_rank()),
    "KernelPCA rff": lambda: scalepca.KernelPCA(
        3, approximation="rff", fit_inverse_transform=True, random_state=0
    ).fit(_low_rank()),
    "SparsePCA minibatch": lambda: scalepca.SparsePCA(3, random_state=0).fit(_frame()),
    "SparsePCA batch": lambda: scalepca.SparsePCA(
        3, method="batch", random_state=0
    ).fit(_low_rank()),
    "SparsePCA elasticnet": lambda: scalepca.SparsePCA(3, method="elasticnet").fit(
        _low_rank()
    ),
    "RobustPCA": lambda: scalepca.RobustPCA().fit(_frame()),
    "MultivariateEOF": lambda: scalepca.MultivariateEOF(2).fit(
        [_low_rank(), _low_rank(d=8)]
    ),
    "ExtendedEOF": lambda: scalepca.ExtendedEOF(2, embedding=2).fit(_frame()),
    "MCA": lambda: scalepca.MCA(2).fit(_low_rank(), _low_rank(d=8)),
    "MCA randomized": lambda: scalepca.MCA(2, solver="randomized", random_state=0).fit(
        _low_rank(), _low_rank(d=8)
    ),
    "HilbertEOF": lambda: scalepca.HilbertEOF(2).fit(_low_rank()),
    "BootstrapEOF": lambda: scalepca.BootstrapEOF(2, n_bootstraps=5).fit(_low_rank()),
    "Rotator": lambda: scalepca.Rotator(2).fit(scalepca.PCA(3).fit(_low_rank())),
}


@pytest.mark.parametrize("fit", sorted(FITS))
def test_every_fitted_attribute_is_described(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = FITS[fit]()
    documented = _documented_attributes(type(model))
    fitted = sorted(a for a in vars(model) if a.endswith("_") and not a.startswith("_"))
    assert fitted, fit
    missing = [a for a in fitted if not documented.get(a)]
    assert not missing, (
        f"{type(model).__name__}'s Attributes section does not describe {missing}"
    )


ESTIMATORS = [
    "PCA",
    "PPCA",
    "KernelPCA",
    "SparsePCA",
    "RobustPCA",
    "MultivariateEOF",
    "ExtendedEOF",
    "MCA",
    "HilbertEOF",
    "BootstrapEOF",
    "Rotator",
]


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_every_documented_attribute_has_a_description(cls):
    documented = _documented_attributes(getattr(scalepca, cls))
    assert documented, cls
    assert all(documented.values()), [a for a, d in documented.items() if not d]


METHODS = (
    "fit",
    "transform",
    "fit_transform",
    "partial_fit",
    "score",
    "score_samples",
    "inverse_transform",
    "save",
)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_methods_document_their_parameters_and_returns(cls):
    """As the API pages show them (autodoc inherits a base class's docstring): each
    argument named in Parameters, and a Returns section unless nothing is returned."""
    klass = getattr(scalepca, cls)
    for name in METHODS:
        method = inspect.getattr_static(klass, name, None)
        try:
            bound = getattr(klass, name)
        except AttributeError:  # a method the estimator refuses (RobustPCA.partial_fit)
            continue
        if method is None:
            continue
        doc = NumpyDocString(inspect.getdoc(bound) or "")
        params = {n.strip() for p in doc["Parameters"] for n in p.name.split(",")}
        if isinstance(method, property):  # a method that exists only when fitted so
            assert params and doc["Returns"], f"{cls}.{name}"
            continue
        func = getattr(method, "fn", method)  # available_if: the method it guards
        signature = inspect.signature(func)
        args = [a for a in signature.parameters if a != "self"]
        assert not set(args) - params, (
            f"{cls}.{name}: {sorted(set(args) - params)} not in its Parameters"
        )
        if signature.return_annotation not in (None, "None"):
            assert doc["Returns"], f"{cls}.{name} has no Returns section"
            assert all(r.desc or r.type for r in doc["Returns"]), f"{cls}.{name}"


#: the works each method comes from (an author's name each), cited on its API page
REFERENCES = {
    "scalepca.PCA": ["Halko", "Musco", "Chan", "Minka", "Patterson"],
    "scalepca.PPCA": ["Tipping", "Roweis", "Ilin"],
    "scalepca.KernelPCA": ["Schölkopf", "Williams", "Rahimi", "Bakır"],
    "scalepca.SparsePCA": ["Mairal", "Zou"],
    "scalepca.RobustPCA": ["Candès", "Lin, Z."],
    "scalepca.MultivariateEOF": ["Hannachi"],
    "scalepca.ExtendedEOF": ["Weare"],
    "scalepca.MCA": ["Bretherton"],
    "scalepca.HilbertEOF": ["Barnett", "Horel"],
    "scalepca.BootstrapEOF": ["Babamoradi", "Hanley"],
    "scalepca.north_test": ["North"],
    "scalepca.Rotator": ["Kaiser", "Hendrickson"],
    "scalepca.pp.pca": ["Wolf"],
    "scalepca.datasets.make_genotypes": ["Balding", "Patterson"],
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_methods_from_the_literature_cite_it(name):
    doc = NumpyDocString(inspect.getdoc(docgen._resolve(name)))
    text = "\n".join(doc["References"])
    for author in REFERENCES[name]:
        assert author in text, f"{name}: {author} is not cited"
    # one work a paragraph, each with its year, as scikit-learn writes them
    works = [w for w in text.split("\n\n") if w.strip()]
    assert len(works) >= len(REFERENCES[name]) or "Lin, Z." in text, works
    assert all(any(f"({y})" in w for y in range(1900, 2030)) for w in works), works


def _api_objects():
    """Every object the API pages render a docstring of: the section pages' modules,
    the documented names and their public methods and properties."""
    for page, (module, _) in docgen.API.items():
        if module:
            yield module, importlib.import_module(module)
        for name in docgen.api_names(page):
            obj = docgen._resolve(name)
            yield name, obj
            if inspect.isclass(obj):
                for member, _ in docgen.public_members(obj):
                    attr = inspect.getattr_static(obj, member)
                    func = getattr(attr, "fget", None) or getattr(attr, "fn", attr)
                    yield f"{name}.{member}", func


#: a parameter's entry, its name line included, in at most this many lines (as
#: scikit-learn's): what a user needs to choose; the discussion is the user guide's
MAX_PARAMETER_LINES = 15


def test_every_parameter_is_described_in_at_most_15_lines():
    long = []
    for name, obj in _api_objects():
        doc = NumpyDocString(inspect.getdoc(obj) or "")
        for entry in [*doc["Parameters"], *doc["Other Parameters"]]:
            lines = 1 + len("\n".join(entry.desc).strip().splitlines())
            if lines > MAX_PARAMETER_LINES:
                long.append(f"{name}({entry.name}): {lines} lines")
    assert not long, long


def _examples():
    finder = doctest.DocTestFinder(recurse=False)
    found = {}
    for name, obj in _api_objects():
        tests = [t for t in finder.find(obj, name, globs={}) if t.examples]
        if tests:
            found[name] = tests
    return found


EXAMPLES = _examples()


FIELD_VIEWS = ("eofs", "pcs", "reconstructed_field", "project_field")
GENERATORS = (
    "make_low_rank",
    "make_missing",
    "make_gridded",
    "make_coupled_fields",
    "make_rings",
    "make_sparse_spike",
    "make_counts",
    "make_genotypes",
    "write_dataset",
    "make_low_rank_zarr",
    "write_bed",
)


def test_the_tools_pages_have_examples():
    for name in [
        *(f"scalepca.{c}" for c in ESTIMATORS),
        "scalepca.analysis.eof",
        "scalepca.north_test",
        "scalepca.pp.pca",
        "scalepca.open_matrix",
        "scalepca.load",
        "scalepca.eofs_as_correlation",
        "scalepca.eofs_as_covariance",
        *(f"scalepca.analysis.eof_fields.{f}" for f in FIELD_VIEWS),
        *(f"scalepca.datasets.{f}" for f in GENERATORS),
    ]:
        assert name in EXAMPLES, f"{name}'s page shows no example"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_api_example_runs_as_shown(name):
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for test in EXAMPLES[name]:
            runner.run(test)
    assert runner.summarize(verbose=False).failed == 0, name
