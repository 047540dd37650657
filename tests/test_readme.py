"""Every ```python block of README.md runs as written, pasted into a file and executed.

Each block is written to ``example.py`` in an empty folder and run with
``python example.py`` in a fresh interpreter — as a new user would — so a missing
``if __name__ == "__main__":`` guard (needed by a LocalCluster of worker processes)
fails here as it would for them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
BLOCKS = re.findall(
    r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.S | re.M
)


def test_readme_has_python_examples():
    assert BLOCKS


@pytest.mark.distributed
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs_as_a_script(tmp_path, index):
    script = tmp_path / "example.py"
    script.write_text(BLOCKS[index])
    r = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
