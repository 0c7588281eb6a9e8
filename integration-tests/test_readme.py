"""The README's Python examples run as written (they are the first thing a user tries).

The examples that use numba (the compiled fast path from your own numba functions) run in
``nox -s tests_fast``, which installs the ``[fast]`` extra; elsewhere they skip."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
PLAIN = [i for i, b in enumerate(BLOCKS) if "import numba" not in b]
NUMBA = [i for i, b in enumerate(BLOCKS) if "import numba" in b]


def test_readme_has_python_examples() -> None:
    assert PLAIN and NUMBA, "README.md lost its Python examples"


def _run(index: int) -> None:
    exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), {})


@pytest.mark.parametrize("index", PLAIN)
def test_readme_example_runs(index: int) -> None:
    _run(index)


@pytest.mark.parametrize("index", NUMBA)
def test_readme_numba_example_runs(index: int) -> None:
    pytest.importorskip("numba")
    _run(index)
