"""The ``chetaev-examples`` command line: input checks, ``--help``, ``--version`` (issue 14),
and the version and typing metadata of every chetaev package (issue 19)."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import re

import pytest
from chetaev.examples import registry
from chetaev.examples._cli import METHOD_CHOICES, main

PACKAGES = {
    "liegroups": "liegroups",
    "rktableaux": "rktableaux",
    "discrete-lagrangian": "discrete_lagrangian",
    "nh-integrators": "nh_integrators",
    "gni": "gni",
    "dsocs": "dsocs",
    "examples": "examples",
}


@pytest.mark.parametrize(("option", "value"), [
    ("--h", "0"), ("--h", "-1"), ("--h", "nan"), ("--h", "inf"),
    ("--t-final", "0"), ("--t-final", "-2.5"),
])
def test_run_rejects_non_positive_step_and_time(option, value, capsys):
    # regression test for issue 14: 0 used to be silently replaced by the default
    with pytest.raises(SystemExit) as exc:
        main(["run", "dm-symplecticity", option, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{option} must be a finite number > 0, got {value}" in err
    assert f"omit {option}" in err


def test_run_rejects_a_non_number(capsys):
    with pytest.raises(SystemExit):
        main(["run", "dm-symplecticity", "--h", "fast"])
    assert "--h must be a number, got 'fast'" in capsys.readouterr().err


@pytest.mark.parametrize(("key", "value"), [("h", 0.0), ("h", -1.0), ("t_final", 0.0)])
def test_experiment_run_rejects_non_positive_overrides(key, value):
    with pytest.raises(ValueError, match=f"{key} must be a finite number > 0"):
        registry["dm-symplecticity"].run(quick=True, **{key: value})


def test_run_help_lists_method_values(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "valid --method values" in out
    for values in METHOD_CHOICES.values():
        assert values in out
    for value in ("rattle", "triple_jump_rattle", "lobatto2", "cayley", "exp", "hamiltonian"):
        assert re.search(rf"\b{value}\b", out)


def test_method_table_names_only_registered_experiments():
    for key in METHOD_CHOICES:
        for pattern in key.split(", "):
            prefix = pattern.rstrip("*")
            hits = [n for n in registry if (n.startswith(prefix) if pattern.endswith("*")
                                            else n == pattern)]
            assert hits, f"--help lists {pattern!r}, which matches no experiment"


def test_every_experiment_appears_in_the_method_table():
    patterns = [p for key in METHOD_CHOICES for p in key.split(", ")]
    for name in registry:
        assert any(name == p or (p.endswith("*") and name.startswith(p[:-1]))
                   for p in patterns), name


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    import chetaev.examples

    assert capsys.readouterr().out.strip() == f"chetaev-examples {chetaev.examples.__version__}"


@pytest.mark.parametrize("dist", sorted(PACKAGES))
def test_package_version_and_typing_marker(dist):
    module = importlib.import_module(f"chetaev.{PACKAGES[dist]}")
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", module.__version__)
    try:
        installed = importlib.metadata.version(f"chetaev-{dist}")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"chetaev-{dist} runs from the source tree (not installed)")
    # one source of truth: setuptools reads _version.py, so metadata and module agree
    assert installed == module.__version__
    assert importlib.resources.files(module).joinpath("py.typed").is_file()
