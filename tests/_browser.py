"""Headless Chromium for the tests that look at pages as a reader does (docs, run
report).

Debian's ``chromium`` package; without it those tests are skipped with the command that
installs it (``.ci/run`` installs it in CI).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

INSTALL = (
    "chromium is not installed: `apt-get update && apt-get install -y chromium` "
    "(as root; .ci/run does it when CI=true)"
)

#: flags for a headless browser on a machine without network, plus a virtual-time budget
#: so the page's scripts (MathJax, the docs' image check) run to the end before the
#: capture
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=20000",
)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browser() -> str:
    browser = chromium()
    if browser is None:
        pytest.skip(INSTALL)
    return browser


def screenshot(
    url: str, png: Path, profile: Path, height: int = 1000, width: int = 1280
) -> None:
    """Save a ``width`` × ``height`` screenshot of ``url`` to ``png`` (skip without
    chromium)."""
    subprocess.run(
        [
            _browser(),
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--hide-scrollbars",
            f"--screenshot={png}",
            url,
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )


def rendered_dom(url: str, profile: Path, width: int = 1280, height: int = 1000) -> str:
    """The page as the browser holds it once its scripts have run, laid out in a
    window of ``width`` × ``height`` (skip without chromium)."""
    r = subprocess.run(
        [
            _browser(),
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return r.stdout
