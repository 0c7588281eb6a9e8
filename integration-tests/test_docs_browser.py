"""The documentation and the report render in a real browser (headless Chromium).

The test builds the Sphinx site (gallery scripts included) into a temporary directory, serves
it and the quick report over HTTP, and opens the docs' index, one tutorial, one gallery page and
the report. It fails on a missing image, on math that MathJax did not render (a raw ``$``,
``\\(`` or ``\\[`` in the visible text outside code), on an internal link that does not resolve
(page or anchor) and on any console error or failed resource load.

Every HTML page is served with a small script injected at the top of its ``<head>`` that
records ``console.error``, uncaught exceptions and resources that fail to load, so errors that
happen before the page's ``load`` event are caught too.
"""

from __future__ import annotations

import http.server
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PAGES = [
    "docs/index.html",
    "docs/tutorials/first_nonholonomic_integration.html",
    "docs/auto_examples/plot_nonholonomic_particle_orders.html",
    "report/index.html",
    "report/report.html",
]

HOOK = b"""<script>
window.__errors = [];
(function () {
  const orig = console.error;
  console.error = function (...args) { window.__errors.push('console.error: ' + args.join(' '));
                                       orig.apply(console, args); };
  window.addEventListener('error', function (e) {
    const t = e.target;
    if (t && t !== window && (t.src || t.href)) {
      window.__errors.push('failed to load ' + (t.src || t.href));
    } else {
      window.__errors.push('uncaught: ' + e.message);
    }
  }, true);
  window.addEventListener('unhandledrejection',
                          e => window.__errors.push('rejection: ' + e.reason));
})();
</script>"""

CHECK_PAGE = """<!doctype html><html><head><title>pending</title></head><body>
<iframe id="f" style="width:1200px;height:900px"></iframe>
<script>
const PAGES = __PAGES__;
const frame = document.getElementById('f');
function visit(url) {
  return new Promise(resolve => {
    frame.onload = async () => {
      const win = frame.contentWindow, doc = frame.contentDocument;
      if (win.MathJax && win.MathJax.startup && win.MathJax.startup.promise) {
        try { await win.MathJax.startup.promise; } catch (e) { win.__errors.push('mathjax: ' + e); }
      }
      const imgs = Array.from(doc.images);
      await Promise.all(imgs.map(i => i.complete ? null :
          new Promise(r => { i.onload = r; i.onerror = r; })));
      const body = doc.body.cloneNode(true);
      body.querySelectorAll('pre, code, script, style, mjx-container, mjx-assistive-mml')
          .forEach(n => n.remove());
      const text = body.textContent;
      const raw = ['$', '\\\\(', '\\\\[', '\\\\begin'].filter(s => text.includes(s));
      const links = Array.from(doc.querySelectorAll('a[href]')).map(a => a.href)
          .filter(h => h.startsWith(location.origin));
      resolve({url: url, images: imgs.length,
               broken: imgs.filter(i => !(i.naturalWidth > 0)).map(i => i.getAttribute('src')),
               math: doc.querySelectorAll('mjx-container').length,
               raw: raw, errors: win.__errors || ['hook missing'], links: links});
    };
    frame.src = url;
  });
}
async function linkOk(href) {
  const [page, frag] = href.split('#');
  try {
    const r = await fetch(page);
    if (!r.ok) return false;
    if (!frag) return true;
    const html = await r.text();
    const doc = new DOMParser().parseFromString(html, 'text/html');
    return doc.getElementById(decodeURIComponent(frag)) !== null
        || doc.getElementsByName(decodeURIComponent(frag)).length > 0;
  } catch (e) { return false; }
}
(async () => {
  const results = [];
  for (const p of PAGES) results.push(await visit(p));
  const all = Array.from(new Set(results.flatMap(r => r.links)));
  const bad = [];
  for (const h of all) if (!(await linkOk(h))) bad.push(h);
  for (const r of results) delete r.links;
  document.title = 'RESULT:' + JSON.stringify({pages: results, links: all.length, bad: bad});
})();
</script></body></html>"""


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files; HTML gets the error-recording hook at the top of its head."""

    def log_message(self, *args) -> None:  # keep pytest's output clean
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if path.suffix != ".html" or not path.is_file() or path.name == "_check.html":
            return super().send_head()
        data = path.read_bytes()
        head = data.find(b"<head>")
        data = data[:head + 6] + HOOK + data[head + 6:] if head >= 0 else HOOK + data
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return io.BytesIO(data)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _build_docs(out: Path) -> None:
    missing = [m for m in ("sphinx", "numpydoc", "sphinx_gallery", "mathjax", "matplotlib")
               if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the documentation's build dependencies are not installed ({missing}); "
                    "the nox integration session installs them (DOCS_DEPS in noxfile.py)")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out.parent / "doctrees"), str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stderr[-4000:]}"


def test_docs_and_report_render(quick_report, check_page, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); "
                    "the nox integration session installs it when it runs as root")
    site = tmp_path / "site"
    _build_docs(site / "docs")
    report_dir, _ = quick_report
    shutil.copytree(report_dir, site / "report")
    (site / "_check.html").write_text(CHECK_PAGE.replace("__PAGES__", json.dumps(PAGES)),
                                      encoding="utf-8")

    info = check_page(browser, site, tmp_path / "profile", budget_ms=60000, timeout=150,
                          handler=_Handler)
    pages = {p["url"]: p for p in info["pages"]}
    assert set(pages) == set(PAGES)
    for url, page in pages.items():
        assert page["broken"] == [], f"{url}: images that did not load: {page['broken']}"
        assert page["raw"] == [], f"{url}: unrendered math in the visible text: {page['raw']}"
        assert page["errors"] == [], f"{url}: console errors: {page['errors']}"
    # the pages that have math show it rendered, and the pages that have figures show them
    assert pages["docs/tutorials/first_nonholonomic_integration.html"]["math"] > 0
    assert pages["docs/auto_examples/plot_nonholonomic_particle_orders.html"]["images"] >= 1
    assert pages["report/report.html"]["images"] == pages["report/index.html"]["images"] > 0
    assert info["links"] > 20
    assert info["bad"] == [], f"broken internal links: {info['bad']}"
