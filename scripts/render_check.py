#!/usr/bin/env python3
"""Render one built book page in headless Chromium, OFFLINE, and report what rendered.

    python scripts/render_check.py _build/html/book/4.1-definition.html out.png \
        [--dom out.html] [--expect-widgets] [--expect-math] [--chromium PATH]

Every network request the page makes is sent to a proxy at 127.0.0.1:9 (the
discard port, nothing listens), and `<-loopback>` removes Chromium's implicit
loopback bypass, so anything that is not a local file fails.  A page that still
shows its widgets and formulas therefore loads everything from the book itself.

Prints a JSON summary on stdout:
  widget_views   rendered ipywidgets controls (elements with class jupyter-widgets)
  widget_errors  "Error displaying widget" placeholders left by the HTML manager
  mathjax        <mjx-container> elements produced by MathJax
  mathjax_errors MathJax error nodes (<mjx-merror>)
Exit status: 0 ok; 1 an --expect-* check failed; 2 Chromium missing or failed.
Importable: `render(page, png)` returns the summary plus the DOM.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_CHROMIUM = "/usr/bin/chromium"

# A rendered widget is an element whose class list contains "jupyter-widgets"
# (lumino widgets created by the HTML manager).  The stylesheet the manager
# injects also mentions these class names, so count class attributes only.
_WIDGET_RE = re.compile(r'<[a-z]+[^>]*\sclass="[^"]*\bjupyter-widgets\b[^"]*"')
_WIDGET_ERR_RE = re.compile(r"Error displaying widget")
_MJX_RE = re.compile(r"<mjx-container\b")
_MJX_ERR_RE = re.compile(r"<mjx-merror\b")


def find_chromium(explicit: str | None = None) -> str | None:
    """The browser to use: `explicit` if given (no fallback), else $CHROMIUM,
    /usr/bin/chromium, then `chromium`/`chromium-browser` on PATH."""
    cands = [explicit] if explicit else [
        os.environ.get("CHROMIUM"), DEFAULT_CHROMIUM,
        shutil.which("chromium"), shutil.which("chromium-browser")]
    for cand in cands:
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def chromium_command(chromium: str, url: str, png: Path, profile: str,
                     width: int = 1280, height: int = 3000,
                     budget_ms: int = 5000) -> list[str]:
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--no-first-run",
        "--no-default-browser-check",
        f"--user-data-dir={profile}",
        # network off: every request goes to a dead proxy, loopback included
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--virtual-time-budget={budget_ms}",
        f"--screenshot={png}",
        "--dump-dom",
        url,
    ]


def summarize(dom: str) -> dict:
    return {
        "widget_views": len(_WIDGET_RE.findall(dom)),
        "widget_errors": len(_WIDGET_ERR_RE.findall(dom)),
        "mathjax": len(_MJX_RE.findall(dom)),
        "mathjax_errors": len(_MJX_ERR_RE.findall(dom)),
    }


def render(page: str | Path, png: str | Path, chromium: str | None = None,
           timeout: float = 120, **kw) -> dict:
    """Screenshot `page` to `png`; return summarize(dom) plus 'dom' and 'stderr'."""
    exe = find_chromium(chromium)
    if exe is None:
        raise FileNotFoundError(
            f"Chromium not found (looked for {chromium or DEFAULT_CHROMIUM + ', $CHROMIUM, PATH'}); "
            "install the Debian package `chromium`")
    page = Path(page).resolve()
    if not page.is_file():
        raise FileNotFoundError(f"page not found: {page}")
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    if png.exists():
        png.unlink()
    with tempfile.TemporaryDirectory(prefix="render-check-") as profile:
        proc = subprocess.run(
            chromium_command(exe, page.as_uri(), png, profile, **kw),
            capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "HOME": profile},
        )
    if proc.returncode != 0 or not png.is_file():
        raise RuntimeError(
            f"chromium failed (rc={proc.returncode}, screenshot "
            f"{'present' if png.is_file() else 'missing'}):\n{proc.stderr[-3000:]}")
    result = summarize(proc.stdout)
    result["dom"] = proc.stdout
    result["stderr"] = proc.stderr
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", help="built HTML page, e.g. _build/html/book/4.1-definition.html")
    ap.add_argument("png", help="where to write the screenshot")
    ap.add_argument("--dom", help="also write the rendered DOM here")
    ap.add_argument("--chromium", help=f"browser binary (default {DEFAULT_CHROMIUM})")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=3000)
    ap.add_argument("--budget-ms", type=int, default=5000,
                    help="virtual time given to the page's scripts")
    ap.add_argument("--expect-widgets", action="store_true",
                    help="fail unless widget controls rendered without errors")
    ap.add_argument("--expect-math", action="store_true",
                    help="fail unless MathJax rendered formulas without errors")
    args = ap.parse_args(argv)

    try:
        res = render(args.page, args.png, chromium=args.chromium, width=args.width,
                     height=args.height, budget_ms=args.budget_ms)
    except (FileNotFoundError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"render_check: {exc}", file=sys.stderr)
        return 2
    if args.dom:
        Path(args.dom).write_text(res["dom"], encoding="utf-8")
    summary = {k: v for k, v in res.items() if k not in ("dom", "stderr")}
    print(json.dumps(summary))

    failures = []
    if args.expect_widgets and (summary["widget_views"] == 0 or summary["widget_errors"]):
        failures.append("widgets did not render")
    if args.expect_math and (summary["mathjax"] == 0 or summary["mathjax_errors"]):
        failures.append("MathJax did not render")
    for f in failures:
        print(f"render_check: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
