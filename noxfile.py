"""Sessions for the chetaev monorepo.

``nox`` with no arguments runs every per-package ``tests`` session, ``tests_fast`` (the
compiled backend with numba), the ``integration`` session and the full ``demo`` (the paper
reproductions; it fails unless every experiment matches its paper's claim). Each ``tests``
session builds a fresh virtualenv that holds only one package, its declared (local)
dependencies and its ``[test]`` extra, and runs that package's tests against the *installed*
wheel. That is how we prove every package installs and works on its own.

Other sessions: ``lint`` (ruff), ``docs`` (Sphinx, warnings are errors),
``demo`` (the paper reproductions), ``bench`` (timed benchmarks).

Environment variables read here:

``CHETAEV_NUMPY_SPEC``
    A pip requirement for numpy (e.g. ``numpy==1.24.*``, the oldest version the pyprojects
    allow) installed together with the packages in every session, so the suites run under
    that numpy; unset, pip picks the newest.
``HYPOTHESIS_PROFILE``
    The hypothesis profile of the test sessions; ``ci`` (derandomized, registered in each
    tests/conftest.py that uses hypothesis) unless set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PACKAGES_DIR = ROOT / "packages"

# The dependency graph of DESIGN.md: package -> local packages it depends on.
# No edge may point the other way.
LOCAL_DEPS: dict[str, list[str]] = {
    "liegroups": [],
    "rktableaux": [],
    "discrete-lagrangian": ["liegroups", "rktableaux"],
    "nh-integrators": ["discrete-lagrangian"],
    "gni": ["discrete-lagrangian"],
    "dsocs": ["discrete-lagrangian"],
    "examples": ["nh-integrators", "gni", "dsocs"],
}
# Extras a local package requires of its local dependencies (as in its pyproject.toml), so
# that a session installing it also installs them: package -> {dependency: [extras]}.
LOCAL_DEP_EXTRAS: dict[str, dict[str, list[str]]] = {
    "examples": {"discrete-lagrangian": ["symbolic"]},  # models built by the symbolic route
}


def _closure(name: str) -> list[str]:
    """``name`` and every local package it depends on, dependencies first."""
    seen: list[str] = []

    def visit(pkg: str) -> None:
        for dep in LOCAL_DEPS[pkg]:
            visit(dep)
        if pkg not in seen:
            seen.append(pkg)

    visit(name)
    return seen


def _present(name: str) -> bool:
    return (PACKAGES_DIR / name / "pyproject.toml").is_file()


PRESENT = [p for p in LOCAL_DEPS if _present(p)]

# "demo" is the full main job (a few minutes): CI must see every experiment pass.
nox.options.sessions = ["tests", "tests_fast", "integration", "demo"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True


def _install_local(session: nox.Session, *names: str, extra: str | None = None,
                   dep_extras: dict[str, list[str]] | None = None) -> None:
    """Install local packages (non-editable) with all their local dependencies.

    Every path is passed to one ``pip install`` so pip resolves the
    ``chetaev-*`` requirements against the local directories, never PyPI.
    """
    wanted: list[str] = []
    for name in names:
        for pkg in _closure(name):
            if pkg not in wanted:
                wanted.append(pkg)
    extras: dict[str, list[str]] = {pkg: [] for pkg in wanted}
    for pkg in wanted:
        for dep, required in LOCAL_DEP_EXTRAS.get(pkg, {}).items():
            extras[dep] += [e for e in required if e not in extras[dep]]
    if extra:
        for pkg in names:
            extras[pkg].insert(0, extra)
    for dep, dep_extra in (dep_extras or {}).items():
        if dep in extras:
            extras[dep] += [e for e in dep_extra if e not in extras[dep]]
    args = []
    for pkg in wanted:
        path = f"./packages/{pkg}"
        if extras[pkg]:
            path += f"[{','.join(extras[pkg])}]"
        args.append(path)
    # Resolved in the same pip call as the packages, so scipy & co. come in versions that
    # support the pinned numpy.
    numpy_spec = os.environ.get("CHETAEV_NUMPY_SPEC", "").strip()
    if numpy_spec:
        args.append(numpy_spec)
    session.install(*args)
    if numpy_spec:
        session.run("python", "-c", "import numpy; print('numpy', numpy.__version__)")


def _test_env() -> dict[str, str]:
    """Environment of the test sessions: the derandomized hypothesis profile by default."""
    return {"HYPOTHESIS_PROFILE": os.environ.get("HYPOTHESIS_PROFILE", "ci")}


def _run_package_tests(session: nox.Session, package: str) -> None:
    _install_local(session, package, extra="test")
    tests_dir = PACKAGES_DIR / package / "tests"
    # Run from a neutral directory so the source tree cannot shadow the wheel.
    session.chdir(session.create_tmp())
    session.run(
        "python", "-m", "pytest", str(tests_dir), "-q", "-p", "no:cacheprovider",
        "--import-mode=importlib", *session.posargs, env=_test_env(),
    )


@nox.session
@nox.parametrize("package", PRESENT)
def tests(session: nox.Session, package: str) -> None:
    """Test one package in a virtualenv holding only it and its dependencies."""
    _run_package_tests(session, package)


@nox.session
def tests_fast(session: nox.Session) -> None:
    """The compiled backend's tests (issue 17): discrete-lagrangian, nh-integrators, gni and
    dsocs with the ``[fast]`` extra (numba), and the registry-wide ones of
    ``integration-tests`` (``test_compiled_protocol.py``, the compiled order study of
    ``test_order.py``, the README's numba example). The other sessions run without numba, so
    ``backend="auto"`` stays on numpy there and no session pays the first-call compile."""
    _install_local(session, "nh-integrators", "gni", "dsocs", extra="test",
                   dep_extras={"discrete-lagrangian": ["test", "fast"]})
    files = [str(path) for pkg in ("discrete-lagrangian", "nh-integrators", "gni", "dsocs")
             for path in sorted((PACKAGES_DIR / pkg / "tests").glob("test_compiled*.py"))]
    integration = ROOT / "integration-tests"
    files += [str(integration / "test_compiled_protocol.py"),
              f"{integration / 'test_order.py'}::test_measured_order_compiled",
              f"{integration / 'test_readme.py'}::test_readme_numba_example_runs"]
    session.chdir(session.create_tmp())
    session.run("python", "-m", "pytest", *files, "-q", "-p", "no:cacheprovider",
                "--import-mode=importlib", *session.posargs, env=_test_env())


# The Python versions every package supports (the classifiers of each pyproject.toml say the
# same). ``tests_pythons`` runs each package's tests on each of them that is installed here;
# an absent interpreter is skipped (listed in SKIPPED_PYTHONS), not an error.
SUPPORTED_PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


def _runs(version: str) -> bool:
    """Whether ``python<version>`` exists and starts (a pyenv shim may exist without it)."""
    exe = shutil.which(f"python{version}")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "-c", "pass"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


FOUND_PYTHONS = [v for v in SUPPORTED_PYTHONS if _runs(v)]
SKIPPED_PYTHONS = [v for v in SUPPORTED_PYTHONS if v not in FOUND_PYTHONS]


@nox.session(python=FOUND_PYTHONS or False)
@nox.parametrize("package", PRESENT)
def tests_pythons(session: nox.Session, package: str) -> None:
    """``tests`` on every supported Python installed on this machine (others are skipped)."""
    if not FOUND_PYTHONS:
        session.skip(f"none of Python {', '.join(SUPPORTED_PYTHONS)} is installed")
    if SKIPPED_PYTHONS:
        session.log(f"skipped (not installed): Python {', '.join(SKIPPED_PYTHONS)}")
    _run_package_tests(session, package)


# What the documentation build needs beyond the packages: Sphinx and numpydoc, sphinx-gallery
# (runs docs/examples/plot_*.py at build time; matplotlib draws their figures) and MathJax
# served from a packaged copy (django-static-mathjax: MathJax's files, no dependencies), so
# the math renders offline.
DOCS_DEPS = ["sphinx>=7", "numpydoc>=1.6", "sphinx-gallery>=0.17", "matplotlib>=3.6",
             "django-static-mathjax>=3.2"]


def _ensure_chromium(session: nox.Session) -> None:
    """Install Debian's Chromium for the report's browser test, where we are allowed to.

    On a machine where this is impossible (not root, no apt-get) the browser test skips and
    says why; everything else still runs.
    """
    if shutil.which("chromium") or not shutil.which("apt-get") or os.geteuid() != 0:
        return
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    try:
        session.run("apt-get", "install", "-y", "-q", "chromium", external=True, env=env,
                    silent=True)
    except nox.command.CommandFailed:
        try:
            session.run("apt-get", "update", "-q", external=True, env=env, silent=True)
            session.run("apt-get", "install", "-y", "-q", "chromium", external=True, env=env,
                        silent=True)
        except nox.command.CommandFailed:
            session.warn("could not install chromium; the report's browser test will skip")


@nox.session
def integration(session: nox.Session) -> None:
    """Cross-package tests: orders, invariants, independent references."""
    if not any((ROOT / "integration-tests").glob("test_*.py")):
        session.skip("integration-tests/ holds no test module yet")
    _install_local(session, *PRESENT, extra="test")
    session.install(*DOCS_DEPS)  # the browser test builds the docs (test_docs_browser.py)
    _ensure_chromium(session)
    session.chdir(session.create_tmp())
    session.run(
        "python", "-m", "pytest", str(ROOT / "integration-tests"), "-q",
        "-p", "no:cacheprovider", "--import-mode=importlib", *session.posargs,
        env=_test_env(),
    )


@nox.session
def lint(session: nox.Session) -> None:
    """Static checks with ruff."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx site; any warning is an error."""
    _install_local(session, *PRESENT)
    session.install(*DOCS_DEPS)
    out = ROOT / "docs" / "_build" / "html"
    # -E: re-read every page (autodoc output depends on the installed code, which sphinx's
    # incremental build does not track)
    session.run("sphinx-build", "-E", "-W", "--keep-going", "-b", "html", "docs", str(out))
    session.log(f"Documentation written to {out / 'index.html'}")


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: reproduce the papers' experiments into build/report/."""
    if "examples" not in PRESENT:
        session.error(
            "packages/examples is not in the repository yet, so there is no report to build; "
            "run `nox` for the test suites instead."
        )
    _install_local(session, "examples", extra="plot")
    out = ROOT / "build" / "report"
    session.run("chetaev-examples", "report", "--out", str(out), *session.posargs)
    session.log(f"Report written to {out / 'index.html'} (also report.md and results.json)")


@nox.session
def bench(session: nox.Session) -> None:
    """Timed benchmarks (not part of the test suite).

    ``nox -s bench`` runs every ``benchmarks/bench_*.py`` completely (long: run it on an idle
    machine); ``nox -s bench -- --quick`` is a short run that checks the scripts and the sanity
    of their numbers. With ``CHETAEV_BENCH_BASE=/path/to/another/checkout`` the session also
    runs ``benchmarks/compare_trees.py`` (that checkout against this tree, side by side).
    """
    _install_local(session, *PRESENT)
    session.install("scipy", "threadpoolctl")
    quick = "--quick" in session.posargs
    # the two scripts without --quick get a small size instead
    quick_args = {"bench_ensemble.py": ["--members", "4000", "--skip-cluster"],
                  "bench_liegroups.py": ["100000"]}
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        args = quick_args.get(script.name, session.posargs) if quick else session.posargs
        session.run("python", str(script), *args)
    base = os.environ.get("CHETAEV_BENCH_BASE")
    if base:
        session.run("python", str(ROOT / "benchmarks" / "compare_trees.py"), base, str(ROOT),
                    *(["--quick"] if quick else []))
