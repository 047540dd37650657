"""Which modules of scalepca a test run exercised: a pytest plugin.

``python -m pytest -m quick -p tests.support.touched`` lists, at the end, the modules
of ``scalepca/`` that no test imported and those imported whose functions none of the
tests called (modules without functions count as exercised once imported). It is how
the quick tier (``-m quick``, the list in ``tests/conftest.py``) is checked to cover
every module. A trace hook sees every call, so the run is slower than without it; it
sees this process only (not dask worker processes), so run it without ``-n``.
``--touched-json PATH`` writes each test's time and the modules it ran (which tests
could cover a module).
"""

from __future__ import annotations

import ast
import json
import sys
import threading
import time
from pathlib import Path

import pytest

import scalepca

ROOT = Path(scalepca.__file__).resolve().parent
_PREFIX = str(ROOT)
_imported: set[str] = set()
_called: set[str] = set()
_per_test: dict[str, dict] = {}
_current: set[str] = set()


def _trace(frame, event, arg):
    # called on entering each Python frame only (no local tracing: returns None)
    code = frame.f_code
    name = code.co_filename
    if name.startswith(_PREFIX):
        (_imported if code.co_name == "<module>" else _called).add(name)
        _current.add(name)


def _has_functions(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(tree)
    )


def pytest_addoption(parser):
    parser.addoption(
        "--touched-json",
        metavar="PATH",
        help="write each test's duration and the scalepca modules it ran to PATH",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current.clear()
    start = time.perf_counter()
    yield
    _per_test[item.nodeid] = {
        "seconds": time.perf_counter() - start,
        "modules": sorted(str(Path(p).relative_to(ROOT.parent)) for p in _current),
    }


def pytest_configure(config):
    # scalepca/__init__ ran before the hook: count it imported
    _imported.add(str(ROOT / "__init__.py"))
    for name, module in list(sys.modules.items()):
        if name.startswith("scalepca") and getattr(module, "__file__", None):
            _imported.add(str(Path(module.__file__).resolve()))
    sys.settrace(_trace)
    threading.settrace(_trace)


def pytest_terminal_summary(terminalreporter, config):
    sys.settrace(None)
    threading.settrace(None)
    if config.getoption("--touched-json"):
        Path(config.getoption("--touched-json")).write_text(
            json.dumps(_per_test, indent=1)
        )
    modules = sorted(ROOT.rglob("*.py"))
    seen = _imported | _called
    not_imported = [p for p in modules if str(p) not in seen]
    not_called = [
        p
        for p in modules
        if str(p) in seen and str(p) not in _called and _has_functions(p)
    ]
    write = terminalreporter.write_line
    terminalreporter.section("scalepca modules exercised")
    write(
        f"{len(modules) - len(not_imported) - len(not_called)} of {len(modules)} "
        "modules exercised"
    )
    for label, paths in (
        ("not imported", not_imported),
        ("imported, no function called", not_called),
    ):
        for p in paths:
            write(f"{label}: {p.relative_to(ROOT.parent)}")
