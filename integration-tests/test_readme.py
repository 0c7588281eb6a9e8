"""The README's Python examples run as written (they are the first thing a user tries)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_python_examples() -> None:
    assert BLOCKS, "README.md lost its Python example"


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int) -> None:
    exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), {})
