"""Run the user guide's examples; keep their output and figures for the guide pages.

    python docs/examples/run.py            # every example
    python docs/examples/run.py pca eof    # some of them

Each ``docs/examples/<name>.py`` runs in a fresh interpreter with ``docs/img/guide/``
as its working directory, so the figure it saves lands there
(``docs/img/guide/<name>.png``); what it prints goes to ``docs/examples/<name>.txt``,
shown under the code on its guide page. ``tests/test_docs.py`` runs them again and
checks that they still print that output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIGURES = HERE.parent / "img" / "guide"


def run(name: str, cwd: Path) -> str:
    """What ``docs/examples/<name>.py`` prints, run in ``cwd``."""
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, str(HERE / f"{name}.py")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode:
        raise RuntimeError(f"docs/examples/{name}.py failed:\n{r.stderr}")
    return r.stdout


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.py") if p.name != "run.py")


if __name__ == "__main__":
    FIGURES.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[1:] or names():
        (HERE / f"{name}.txt").write_text(run(name, FIGURES))
        print(f"docs/examples/{name}.txt, docs/img/guide/{name}.png")
