"""Write the example notebooks from their sources in ``notebooks/src/``, and optionally execute
them.

    python notebooks/build.py            # write every notebook (no outputs)
    python notebooks/build.py --execute  # write and execute them, saving outputs in place
    python notebooks/build.py --execute 4 6   # only notebooks 4 and 6

Each notebook's cells live in ``src/NN_name.py``, a jupytext "percent" script (``# %%`` opens
a code cell, ``# %% [markdown]`` a text cell whose lines are comments; ``gallery="name"`` on a
cell's marker names the PNG its first figure is saved as in docs/img/; ``thumbnail=true`` marks
the cell whose figure, one panel, is the notebook's card in the docs' gallery). The notebooks are
committed with their outputs, so they can be read on the web without running anything. Edit
the sources (one place), then rebuild with ``--execute``. Every notebook generates its own
small data in a temporary directory and removes it at the end; nothing is downloaded.
``tests/test_notebooks.py`` executes them all.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jupytext
import nbformat

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"


def read_cells(source: Path) -> list:
    """The cells of one percent script (text cells without their comment marks)."""
    return jupytext.read(source, fmt="py:percent").cells


#: number → (notebook file name, its cells), from the scripts ``src/NN_name.py``
NOTEBOOKS = {int(src.name[:2]): (f"{src.stem}.ipynb", read_cells(src))
             for src in sorted(SOURCES.glob("[0-9][0-9]_*.py"))}


def build(number: int) -> Path:
    name, cells = NOTEBOOKS[number]
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = HERE / name
    nbformat.write(nb, path)
    return path


def execute(path: Path, timeout: int = 600) -> float:
    """Run a notebook top to bottom in a fresh kernel (cwd: notebooks/); save outputs."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    elapsed = time.perf_counter() - t0
    nbformat.write(nb, path)
    return elapsed


def save_gallery(path: Path, out_dir: Path = HERE.parent / "docs" / "img") -> list[Path]:
    """Save the first figure of every cell tagged ``gallery`` in an executed notebook."""
    import base64

    nb = nbformat.read(path, as_version=4)
    saved = []
    for cell in nb.cells:
        name = cell.metadata.get("gallery")
        if not name:
            continue
        pngs = [o["data"]["image/png"] for o in cell.get("outputs", [])
                if "image/png" in o.get("data", {})]
        if not pngs:
            raise RuntimeError(f"{path.name}: gallery cell {name!r} has no figure; execute it")
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / f"{name}.png"
        target.write_bytes(base64.b64decode(pngs[0]))
        saved.append(target)
    return saved


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("numbers", nargs="*", type=int, help="notebooks to build (default all)")
    p.add_argument("--execute", action="store_true", help="execute and save outputs")
    p.add_argument("--gallery", action="store_true",
                   help="only save the tagged figures of the executed notebooks to docs/img/")
    args = p.parse_args(argv)
    for n in args.numbers or sorted(NOTEBOOKS):
        if args.gallery:
            for target in save_gallery(HERE / NOTEBOOKS[n][0]):
                print(f"saved {target}")
            continue
        path = build(n)
        if args.execute:
            print(f"{path.name}: executed in {execute(path):.1f} s", flush=True)
        else:
            print(f"{path.name}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
