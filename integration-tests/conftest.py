"""Shared fixtures for the cross-package tests."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

# ``_siblings`` (the loader of the registry's test modules) is importable by name
sys.path.insert(0, str(Path(__file__).parent))

#: Chromium flags for a headless run on a machine with a closed network (no background
#: connections, no sandbox as root, a fresh profile per run).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


def run_check_page(browser: str, site: Path, profile: Path, *, budget_ms: int, timeout: float,
                   handler: type = http.server.SimpleHTTPRequestHandler) -> dict[str, Any]:
    """Serve ``site`` on loopback, open its ``_check.html`` in headless Chromium and return the
    JSON the page writes into its title after ``RESULT:`` (the browser tests' one protocol)."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/_check.html"
        proc = subprocess.run(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
             f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
            capture_output=True, text=True, timeout=timeout,
        )
    finally:
        server.shutdown()
    dom = proc.stdout
    assert "RESULT:" in dom, f"the check page did not finish: {proc.stderr[-2000:]}"
    payload = dom.split("RESULT:", 1)[1].split("</title>", 1)[0]
    return json.loads(payload.replace("&quot;", '"').replace("&lt;", "<")
                      .replace("&gt;", ">").replace("&amp;", "&"))


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    """Run ``chetaev-examples report --quick`` once per test session; return (dir, results)."""
    if importlib.util.find_spec("chetaev.examples") is None:
        pytest.skip("chetaev-examples is not installed in this environment")
    from chetaev.examples import run_experiments, write_report

    out = tmp_path_factory.mktemp("report")
    results = run_experiments(quick=True, out=out)
    write_report(results, out, quick=True)
    return out, results


@pytest.fixture(scope="session")
def check_page():
    """:func:`run_check_page`, for the browser tests (conftest is not importable by name
    under ``--import-mode=importlib``)."""
    return run_check_page
