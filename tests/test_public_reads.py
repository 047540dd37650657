"""The analysis tools and the application read a fitted model through its public
interface (``eof_matrix``, ``project``, ``reconstruct``, ``to_field``,
``preprocessing_``, ``n_spectrum_samples_``, …), never through its private state: a
module function given a model touches none of its ``_names``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1] / "scalepca"

#: the modules that take fitted models from outside them
READERS = [
    "analysis/eof.py",
    "analysis/eof_fields.py",
    "analysis/rotation.py",
    "analysis/plot.py",
    "app/pipeline.py",
    "app/update.py",
    "app/report.py",
    "app/report_figures.py",
]


def _private_reads(tree: ast.Module) -> list[str]:
    """``function: param._name`` for each private attribute a module function reads
    of one of its parameters (``getattr(param, "_name")`` too), and each one a method
    reads of a model it holds (``self._model._name``)."""
    out = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            params = {a.arg for a in (*fn.args.args, *fn.args.kwonlyargs)}
            out += [f"{fn.name}: {r}" for r in _reads_of(fn, params)]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "_model"
            ):
                out.append(f"{cls.name}: _model.{node.attr}")
    return out


def _reads_of(fn: ast.FunctionDef, params: set[str]) -> list[str]:
    found = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in params
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{node.value.id}.{node.attr}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in params
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("_")
        ):
            found.append(f"{node.func.id}({node.args[0].id}, {node.args[1].value!r})")
    return found


@pytest.mark.parametrize("module", READERS)
def test_tools_read_models_through_their_public_interface(module):
    tree = ast.parse((ROOT / module).read_text())
    assert _private_reads(tree) == []


def test_features_left_out_are_a_public_fitted_mask():
    """``features_kept_`` says which features the fit used (all-NaN ones left out);
    the report's summary reads it, not the model's private state."""
    import warnings

    import numpy as np

    import scalepca
    from scalepca.app.report import _summary_rows

    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 6))
    assert scalepca.PCA(2).fit(X).features_kept_.all()
    X[:, [1, 4]] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scalepca.PCA(2).fit(X)
    np.testing.assert_array_equal(
        model.features_kept_, [True, False, True, True, False, True]
    )
    model.features_kept_[0] = False  # a copy: the model is unchanged
    assert model.features_kept_[0]
    rows = dict(
        _summary_rows(
            model, data=None, method="pca", params=None, elapsed=1.0, memory=None
        )
    )
    assert rows["features left out (all NaN)"] == "2"
