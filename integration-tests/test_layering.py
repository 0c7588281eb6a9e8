"""The packages talk to each other through public names only (issue 15).

Every ``import`` of the monorepo's packages and tests is read from the source (``ast``): a
module of one package may import another package's modules only through public paths (no
``_``-prefixed component after ``chetaev.<package>``). Inside a package anything goes. The
integration tests count as a package of their own, so they may import no private module at
all. A private import found in a docstring or a comment is not an import and is ignored.

``benchmarks/compare_trees.py`` is not scanned: it runs older checkouts too, and falls back
to their private paths where a public name did not exist yet.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "src").is_dir())


def _own(path: Path) -> str | None:
    """The import name of the package ``path`` belongs to (None for the integration tests)."""
    rel = path.relative_to(ROOT).parts
    return rel[1].replace("-", "_") if rel[0] == "packages" else None


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted module) of every absolute import of a ``chetaev.`` module, including the
    ``from chetaev.x import y`` form's ``chetaev.x.y`` (a submodule may be imported so)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
            out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names
                       if a.name.startswith("_"))
    return [(line, m) for line, m in out if m.startswith("chetaev.")]


def _violations(path: Path, text: str | None = None) -> list[str]:
    """The private cross-package imports of ``path`` (its text read unless given)."""
    own = _own(path)
    bad = []
    text = path.read_text(encoding="utf-8") if text is None else text
    for line, module in _imported(ast.parse(text)):
        parts = module.split(".")
        if len(parts) < 2 or parts[1] == own:
            continue
        if any(p.startswith("_") for p in parts[1:]):
            bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    return bad


def _files() -> list[Path]:
    roots = [ROOT / "packages" / p for p in PACKAGES] + [ROOT / "integration-tests"]
    return sorted(f for r in roots for f in r.rglob("*.py") if ".nox" not in f.parts)


def test_no_module_imports_another_packages_private_module() -> None:
    files = _files()
    assert len(files) > 100  # the scan sees the tree (not an empty glob)
    bad = [v for f in files for v in _violations(f)]
    assert not bad, "private cross-package imports:\n" + "\n".join(bad)


@pytest.mark.parametrize("source, owner, expected", [
    ("from chetaev.liegroups._base import X", "gni", 1),
    ("import chetaev.nh_integrators._lie_testing", "gni", 1),
    ("from chetaev.liegroups import _hidden", "gni", 1),
    ("from chetaev.liegroups import SO3", "gni", 0),
    ("from chetaev.gni._reduced import X", "gni", 0),  # inside its own package
    ("from ._reduced import X", "gni", 0),
])
def test_the_scan_finds_a_private_import(source: str, owner: str, expected: int) -> None:
    """The checker itself: it flags private cross-package imports and nothing else."""
    dist = next(p for p in PACKAGES if p.replace("-", "_") == owner)
    probe = ROOT / "packages" / dist / "tests" / "probe.py"  # never written: text given
    assert len(_violations(probe, source + "\n")) == expected
