"""``import scalepca`` and ``scalepca --help`` stay light: heavy dependencies load on
first use.

Checked by what they import, in fresh interpreters (nothing another test imported
counts), not by a clock; the README gives the measured times.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
HEAVY = (
    "dask.array",
    "distributed",
    "xarray",
    "sklearn",
    "matplotlib",
    "pandas",
    "zarr",
)


def _python(code: str) -> str:
    """What ``code`` prints in a fresh interpreter."""
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    ).stdout


def test_import_loads_no_heavy_dependency():
    code = (
        "import sys, scalepca; scalepca.__version__; "
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = _python(code)
    assert out.strip() == "[]", out


def test_public_names_still_resolve():
    code = (
        "import scalepca; from scalepca import PCA, PPCA, KernelPCA, SparsePCA, "
        "RobustPCA, connect, load, open_matrix; import scalepca.models as m; assert "
        "scalepca.PCA is m.PCA is PCA; assert set(scalepca.__all__) <= "
        "set(dir(scalepca)); print(scalepca.linalg.__name__)"
    )
    out = _python(code)
    assert out.strip() == "scalepca.linalg"


def test_help_loads_no_heavy_dependency():
    code = (
        "import sys, runpy; sys.argv = ['scalepca', '--help']\n"
        "try:\n    runpy.run_module('scalepca.cli', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = _python(code)
    assert out.strip().splitlines()[-1] == "[]", out
