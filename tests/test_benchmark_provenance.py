"""Every benchmark result says which code it measured, and goes stale when that code
changes.

``benchmarks/_provenance.py`` records in each ``benchmarks/results/*.json`` the
revision, the date and a hash of the code of each file the result depends on. A
result whose code changed since must be re-run, or listed in ``KNOWN_STALE``, which
the benchmarks page shows as stale.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))


@pytest.fixture(scope="module")
def prov():
    spec = importlib.util.spec_from_file_location(
        "_bench_provenance", ROOT / "benchmarks" / "_provenance.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", RESULTS, ids=[p.stem for p in RESULTS])
def test_each_result_records_the_code_it_measured(prov, path):
    assert path.stem in prov.DEPENDS, (
        f"{path.name}: say which files it measures in DEPENDS"
    )
    rec = json.loads(path.read_text()).get("provenance")
    assert rec, f"{path.name} records no provenance"
    assert rec["date"] and len(rec["revision"]) == 40
    if path.stem not in prov.KNOWN_STALE:  # a stale one may predate a new dependency
        assert set(rec["sources"]) == set(prov.DEPENDS[path.stem])
    for file in prov.DEPENDS[path.stem]:
        assert (ROOT / file).is_file(), f"{path.name} depends on {file}, which is gone"


def test_a_result_is_current_or_shown_as_stale(prov):
    stale = {
        p.stem for p in RESULTS if prov.stale_sources(p.stem, json.loads(p.read_text()))
    }
    unnoticed = stale - prov.KNOWN_STALE
    assert not unnoticed, (
        f"the code of {sorted(unnoticed)} changed since they were measured: re-run "
        "their benchmark, or add them to KNOWN_STALE in benchmarks/_provenance.py (shown as "
        "stale on the benchmarks page)"
    )
    fresh = prov.KNOWN_STALE - stale
    assert not fresh, (
        f"{sorted(fresh)} describe the current code: remove from KNOWN_STALE"
    )


def test_staleness_follows_the_code_not_its_words(prov):
    code = 'def f(x):\n    """Square."""\n    return x * x  # a comment\n'
    same = (
        'def f(x):\n    """The square of x, reworded."""\n    # why\n    return x * x\n'
    )
    other = 'def f(x):\n    """Square."""\n    return x ** 2\n'
    assert prov.code_hash(code) == prov.code_hash(same)
    assert prov.code_hash(code) != prov.code_hash(other)


def test_a_changed_solver_makes_its_result_stale(prov):
    """A result recorded from today's files is current; one file's code changed makes it
    stale, naming that file."""
    rec = {"sources": {p: prov._file_code_hash(p) for p in prov.DEPENDS["pca"]}}
    assert prov.stale_sources("pca", {"provenance": rec}) == []
    rec["sources"]["scalepca/models/pca.py"] = prov.code_hash("x = 1\n")
    assert prov.stale_sources("pca", {"provenance": rec}) == ["scalepca/models/pca.py"]


def test_a_part_kept_from_an_earlier_run_keeps_the_result_stale(prov):
    """A run that re-measures one part of a file and keeps the others: the kept parts'
    provenance stays, and so does the staleness it records."""
    old = {"sources": {p: prov.code_hash("x = 1\n") for p in prov.DEPENDS["rpca"]}}
    rec = prov.updated("rpca", old)
    assert rec["earlier"] is old
    assert prov.stale_sources("rpca", {"provenance": rec}) == sorted(
        prov.DEPENDS["rpca"]
    )
    assert prov.stale_sources("rpca", {"provenance": prov.updated("rpca", None)}) == []
