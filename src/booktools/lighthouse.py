"""Lighthouse, the web's own page audit, run on the built book's chapter pages (issue 42).

Lighthouse 12.2.3 (pinned; 13.x wants Node 22) is installed from the npm registry by scripts/setup-env.sh
(``test``) into :data:`PREFIX` and runs with Debian's Chromium at its default mobile preset (simulated slow
4G, 4× slower CPU, a 412 px phone). Each page is served gzip-compressed as a static host serves it
(:func:`booktools.host.serve_like_a_host`). tests/test_page_lighthouse.py holds every chapter page to
:data:`BUDGETS`; benchmarks/bench.py (``--only lighthouse``) reports the same figures.

    python -m booktools.lighthouse --html /tmp/book/_build/html [book/4.3-memory ...]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from booktools import ROOT
from booktools.browser import find_chromium
from booktools.toc import toc_entries

VERSION = "12.2.3"
PREFIX = ROOT / ".cache" / "lighthouse"
"""Where scripts/setup-env.sh installs ``lighthouse@VERSION`` (ignored by git)."""
BIN = PREFIX / "node_modules" / ".bin" / "lighthouse"
BUDGETS = {"performance": 90, "accessibility": 100, "best-practices": 100, "seo": 95}
"""The lowest score (0–100) each category may have on every chapter page (issue 42)."""
METRICS = {"first-contentful-paint": "fcp_ms", "largest-contentful-paint": "lcp_ms",
           "total-blocking-time": "tbt_ms", "cumulative-layout-shift": "cls", "speed-index": "si_ms",
           "total-byte-weight": "bytes", "dom-size": "dom_elements"}
"""The audits whose numbers a report keeps, and the key each is kept under."""


def chapter_pages() -> list[str]:
    """The chapter pages (the notebooks of ``_toc.yml``), as paths of the built site without ``.html``."""
    return [entry for entry in toc_entries() if (ROOT / f"{entry}.ipynb").is_file()]


def installed() -> bool:
    """Is the pinned Lighthouse installed where scripts/setup-env.sh puts it?"""
    package = PREFIX / "node_modules" / "lighthouse" / "package.json"
    return BIN.is_file() and package.is_file() and json.loads(package.read_text())["version"] == VERSION


def summarise(lhr: dict) -> dict:
    """A Lighthouse result (its JSON) as the report keeps it: each category's score (0–100), the metrics of
    :data:`METRICS`, and the audits that cost a category points (id: score 0–1)."""
    out: dict = {name: round(100 * cat["score"]) for name, cat in lhr["categories"].items()}
    audits = lhr["audits"]
    for audit, key in METRICS.items():
        value = audits.get(audit, {}).get("numericValue")
        out[key] = round(value, 3) if key == "cls" and value is not None else (
            None if value is None else round(value))
    failing = {}
    for name, cat in lhr["categories"].items():
        for ref in cat["auditRefs"]:
            audit = audits.get(ref["id"], {})
            score = audit.get("score")
            if ref.get("weight", 0) > 0 and score is not None and score < 1:
                failing[ref["id"]] = round(score, 2)
    out["failing"] = failing
    return out


def audit(url: str, chromium: str | None = None, timeout_s: float = 300.0) -> dict:
    """Run Lighthouse (mobile preset) on ``url``: the full result (Lighthouse's JSON)."""
    if not installed():
        raise FileNotFoundError(f"找不到 Lighthouse {VERSION}：先运行 scripts/setup-env.sh test")
    exe = find_chromium(chromium)
    if exe is None:
        raise FileNotFoundError("找不到 Chromium：请安装 Debian 软件包 chromium")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        # headless Chromium in its own profile, no Google services; --no-sandbox as root (CI containers)
        flags = "--headless=new --no-sandbox --disable-gpu --disable-extensions --no-first-run " \
                "--disable-background-networking --disable-component-update --disable-sync"
        subprocess.run([str(BIN), url, "--quiet", "--output=json", f"--output-path={out}",
                        f"--chrome-flags={flags}", "--only-categories=performance,accessibility,best-practices,seo",
                        "--max-wait-for-load=60000"],
                       check=True, capture_output=True, timeout=timeout_s,
                       env={**os.environ, "CHROME_PATH": exe, "TMPDIR": tmp})
        return json.loads(out.read_text())


def below_budget(scores: dict) -> list[str]:
    """Each category of one page's :func:`summarise` below :data:`BUDGETS`, as a readable line."""
    return [f"{name} {scores[name]} < {floor}" for name, floor in BUDGETS.items() if scores[name] < floor]


RUNS_BELOW_BUDGET = 3
"""Audits of a page that fell below a budget at its first audit; its figures are then their medians.
Lighthouse's own guidance on variability (docs/variability.md): one run can be off by a few points when the
machine is busy; the median of several is what to judge."""


def median_run(runs: list[dict]) -> dict:
    """Several :func:`summarise` results of one page as one: each score and metric its median over the runs,
    the audits that cost points those of the run with the median performance, and ``runs`` how many."""
    ordered = sorted(runs, key=lambda r: r["performance"])
    out = dict(ordered[len(ordered) // 2])
    for key, value in out.items():
        if isinstance(value, (int, float)):  # the scores and metrics; not the failing audits (a dict)
            values = sorted(r[key] for r in runs if r.get(key) is not None)
            out[key] = values[len(values) // 2] if values else None
    out["runs"] = len(runs)
    return out


def audit_pages(html: Path, pages: list[str] | None = None, runs_below_budget: int = RUNS_BELOW_BUDGET) -> dict[str, dict]:
    """Every page of ``pages`` (default: :func:`chapter_pages`) of the built ``html`` served like a host,
    audited once, or ``runs_below_budget`` times when the first audit falls below :data:`BUDGETS` (then
    judged by :func:`median_run`): page -> :func:`summarise` (with ``runs``)."""
    from booktools.host import serve_like_a_host

    results = {}
    with serve_like_a_host(html) as origin:
        for page in pages or chapter_pages():
            runs = [summarise(audit(f"{origin}/{page}.html"))]
            while below_budget(runs[0]) and len(runs) < runs_below_budget:
                runs.append(summarise(audit(f"{origin}/{page}.html")))
            results[page] = median_run(runs)
    return results


def text(results: dict[str, dict]) -> str:
    """The results as a table, one page a line, each category and metric."""
    lines = [f"{'page':<32} perf  a11y  bp   seo   FCP     LCP     TBT    CLS    bytes    DOM"]
    for page, r in results.items():
        lines.append(f"{page:<32} {r['performance']:>4} {r['accessibility']:>5} {r['best-practices']:>4} "
                     f"{r['seo']:>4}  {r['fcp_ms'] / 1000:5.2f} s {r['lcp_ms'] / 1000:5.2f} s {r['tbt_ms']:5} ms "
                     f"{r['cls']:5.3f} {r['bytes'] / 1024:6.0f} KiB {r['dom_elements']:5}"
                     + (f"  （{r['runs']} 次的中位数）" if r.get('runs', 1) > 1 else ""))
        if r["failing"]:
            lines.append("    " + ", ".join(f"{k} {v}" for k, v in sorted(r["failing"].items(), key=lambda kv: kv[1])))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.lighthouse",
                                     description="用 Lighthouse（手机预设）审计构建好的章节页面")
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="构建好的 HTML 目录")
    parser.add_argument("--json", action="store_true", help="输出 JSON")
    parser.add_argument("pages", nargs="*", help="页面（不含 .html），默认全部章节")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        parser.error(f"{args.html} 里没有构建好的书（index.html）")
    results = audit_pages(args.html, args.pages or None)
    print(json.dumps(results, indent=2, ensure_ascii=False) if args.json else text(results))
    return 1 if any(below_budget(r) for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
