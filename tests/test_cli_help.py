"""Each command's ``--help`` names the documentation page that describes it.

The documentation is not published online (``pyproject.toml`` has no Documentation
URL), so the help names the page by its title and says how to build the site and
which file of it to open; the page must exist under that title.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

import pytest

from scalepca.cli import DOCS_BUILD, DOCS_PAGES, build_parser

ROOT = Path(__file__).parents[1]


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    return dict(action.choices)


def test_every_command_has_a_docs_page():
    assert set(DOCS_PAGES) == set(_subcommands())


@pytest.mark.parametrize("command", sorted(DOCS_PAGES))
def test_help_names_the_page_and_how_to_open_it(command):
    text = _subcommands()[command].format_help()
    title, page = DOCS_PAGES[command]
    assert f'the page "{title}" of the scalepca documentation' in text
    assert DOCS_BUILD in text and f"docs/_build/html/{page}" in text
    # a page of the built site, never a source file of the repository
    assert not re.search(r"docs/[\w/-]+\.md", text), text


def _page_title(page: str) -> str:
    source = ROOT / "docs" / Path(page.split("#")[0]).with_suffix(".md")
    text = source.read_text()
    if "_generated/config_reference.md" in text:  # the page is generated whole
        sys.path.insert(0, str(ROOT / "docs" / "_ext"))
        text = importlib.import_module("docgen").config_reference()
    heading = re.search(r"^# (.+)$", text, re.M)
    assert heading, source
    return heading.group(1).strip()


@pytest.mark.parametrize("command", sorted(DOCS_PAGES))
def test_the_named_page_exists_under_that_title(command):
    title, page = DOCS_PAGES[command]
    assert _page_title(page) == title


def test_the_build_command_is_the_readme_s():
    readme = (ROOT / "README.md").read_text()
    assert DOCS_BUILD.removeprefix("python ").replace("-b html", "-W -b html") in readme
