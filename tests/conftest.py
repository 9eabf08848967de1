"""Fixtures the test modules share; pytest hands them to any test under tests/ that names them, so no
test module imports another (the project-wide hooks are in the root conftest.py).

* ``built``: the book, built ONCE per test process (session scope) into a temporary directory as
  scripts/build-book.sh builds it: ``jupyter-book build <repo> --path-output <tmp> -W`` (publishes the
  notebooks' committed outputs, which nbval checks), then ``python -m booktools.pdf`` (the book's PDF).
  To check an existing build instead, point BATCHLAB_HTML_DIR at its html folder:

      BATCHLAB_HTML_DIR=_build/html .venv/bin/python -m pytest tests/test_html.py

* ``browser``: headless Chromium from ``booktools.browser.launch()``, one per module (Playwright's sync
  API allows one driver per thread, and some modules launch their own). Chromium (/usr/bin/chromium,
  Debian package ``chromium``) is a required test dependency: without it these tests fail, not skip.
* ``rendered``: every toc page loaded once per width (``layout.VIEWPORTS``), offline, measured
  (``render_check`` and its layout report) and screenshot to _build/screenshots/<page>-<width>.png:
  ``{(doc, width): report}``, loaded once per process and shared by tests/test_html.py and
  tests/test_page_*.py.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from booktools import ROOT, browser as chromium, layout, render_check
from tests.book_pages import PAGES, WIDTHS, Built, screenshot_path

BUILD_TIMEOUT_S = 1800
_RENDERED: dict[Path, dict] = {}  # one round of page loads per process (the browser is per module)


def _jupyter_book() -> str:
    exe = Path(sys.executable).with_name("jupyter-book")
    return str(exe) if exe.is_file() else (shutil.which("jupyter-book") or "jupyter-book")


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Built:
    reuse = os.environ.get("BATCHLAB_HTML_DIR")
    if reuse:
        html = Path(reuse).resolve()
        if not (html / "index.html").is_file():
            pytest.fail(f"BATCHLAB_HTML_DIR={reuse} holds no built book (no index.html)")
        return Built(html, None, None, None)
    out = tmp_path_factory.mktemp("book")
    cmd = [_jupyter_book(), "build", str(ROOT), "--path-output", str(out), "-W"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                          cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seconds = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"book build failed (rc={proc.returncode}): {' '.join(cmd)}\n{log[-6000:]}")
    html = out / "_build" / "html"
    # the second step of scripts/build-book.sh: the book's PDF, into the built site
    pdf = subprocess.run([sys.executable, "-m", "booktools.pdf", "--html", str(html)], capture_output=True,
                         text=True, timeout=BUILD_TIMEOUT_S, cwd=ROOT)
    if pdf.returncode != 0:
        pytest.fail(f"python -m booktools.pdf failed (rc={pdf.returncode}):\n{(pdf.stdout + pdf.stderr)[-6000:]}")
    return Built(html, log, proc.returncode, seconds)


@pytest.fixture(scope="module")
def browser():
    if chromium.find_chromium() is None:
        pytest.fail(f"需要 Chromium（apt-get install chromium；默认位置 {chromium.DEFAULT_CHROMIUM}）")
    with chromium.launch() as b:
        yield b


@pytest.fixture(scope="module")
def rendered(built, browser) -> dict:
    if built.html not in _RENDERED:
        _RENDERED[built.html] = {
            (doc, w): render_check.check_page(browser, built.page(doc), screenshot_path(doc, w),
                                              viewport=layout.VIEWPORTS[w])
            for doc in PAGES for w in WIDTHS}
    return _RENDERED[built.html]
