"""The tutorials' code runs as written: every ``.. code-block:: python`` of a page, in order,
in one namespace (a page's blocks build on each other), with its printed output checked for
the statements the page makes (lines printing a comparison must print True)."""

from __future__ import annotations

import contextlib
import io
import re
import textwrap
from pathlib import Path

import pytest

TUTORIALS = Path(__file__).resolve().parents[1] / "docs" / "tutorials"
#: Pages without code: the tutorials' table of contents and the decision table.
NO_CODE = {"index.rst", "choosing_a_method.rst"}
PAGES = sorted(p for p in TUTORIALS.glob("*.rst") if p.name not in NO_CODE)


def code_blocks(text: str) -> list[str]:
    """The bodies of the ``.. code-block:: python`` directives of an rst page."""
    blocks = []
    for m in re.finditer(r"^\.\. code-block:: python\n\n((?:[ ]{3}.*\n|\n)+)", text, flags=re.M):
        blocks.append(textwrap.dedent(m.group(1)))
    return blocks


def test_tutorials_exist() -> None:
    names = {p.name for p in PAGES}
    assert {"define_your_own_system.rst", "first_nonholonomic_integration.rst",
            "lie_groups_and_retractions.rst"} <= names


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_tutorial_code_runs(page: Path) -> None:
    blocks = code_blocks(page.read_text(encoding="utf-8"))
    assert blocks, f"{page.name} has no python code block"
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(blocks):
            exec(compile(block, f"{page.name}[python block {i}]", "exec"), namespace)
    printed = out.getvalue().split()
    assert "False" not in printed, out.getvalue()
