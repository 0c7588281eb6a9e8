"""The quick report renders in a real browser (headless Chromium) and its images load."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHECK_PAGE = """<!doctype html><html><head><title>pending</title></head><body>
<iframe id="f" src="index.html" style="width:1200px;height:900px"></iframe>
<script>
const f = document.getElementById('f');
f.addEventListener('load', () => {
  const doc = f.contentDocument;
  const imgs = Array.from(doc.images);
  const wait = imgs.map(i => i.complete ? Promise.resolve() :
      new Promise(r => { i.onload = r; i.onerror = r; }));
  Promise.all(wait).then(() => {
    const out = {n: imgs.length,
                 broken: imgs.filter(i => !(i.naturalWidth > 0)).map(i => i.getAttribute('src')),
                 sections: doc.querySelectorAll('section').length};
    document.title = 'RESULT:' + JSON.stringify(out);
  });
});
</script></body></html>"""


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_report_renders_with_images(quick_report, check_page, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); "
                    "the nox integration session installs it when it runs as root")
    report_dir, results = quick_report
    site = tmp_path / "site"
    shutil.copytree(report_dir, site)
    (site / "_check.html").write_text(CHECK_PAGE, encoding="utf-8")

    info = check_page(browser, site, tmp_path / "profile", budget_ms=20000, timeout=120)
    expected_images = sum(1 for r in results if r.figure)
    assert info["sections"] == len(results)
    assert info["n"] == expected_images > 0
    assert info["broken"] == []
