"""Before/after crops of each chapter's worst spot, for the closing note of issue 19.

The "before" screenshots are the full pages at 1280 px taken before the issue's work,
`_build/screenshots/book/<page>.png`; the "after" ones are what tests/test_html.py (or
`python -m booktools.render_check --screenshots _build/screenshots/book --width 1280`) writes now,
a box in the old full-page shot (left, top, right, bottom in pixels, chosen by looking), and the same
passage in the built book now, found by a CSS selector and shot as an element at 1280 px in Chromium
(the passage moves down the page as a chapter grows, so a pixel box would drift), with a line saying
what changed. The pictures land in `_build/screenshots/pairs/<page>-before.png` and `<page>-after.png`
(_build is not committed):

    .venv/bin/python -m booktools.shot_pairs [--html _build/html] [--shots _build/screenshots/book] [--out _build/screenshots/pairs]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from booktools import ROOT

Box = tuple[int, int, int, int]

# chapter: (box in the before shot, the same passage in the built page now as a CSS selector, what changed)
REGIONS: dict[str, tuple[Box, str, str]] = {
    "4.1-definition": ((230, 10080, 1080, 10880), "section:has(> h2:has-text('练习'))",
                       "练习：题目原是 ask() 打印的等宽输出，右侧被截断，每题后跟同一句“还没有作答”；"
                       "现在是正文里加粗编号的题目，下面只有两行自测单元。"),
    "4.2-convergence": ((230, 4040, 1080, 4390), "div.cell:has(pre:has-text('plot_training_curves(runs')) .cell_output",
                        "四个批大小的训练曲线：原来两幅小图的图例和刻度约 6 px，对数轴刻度挤在一起，曲线互相遮挡；"
                        "现在整栏宽、8 pt 以上，曲线颜色和线型都不同，图例在图下方。"),
    "4.3-memory": ((230, 6600, 1080, 7000), "div.cell:has(pre:has-text('plot_schedule_memory')) .cell_output",
                   "各流水线阶段的显存构成：原来两幅并排的小图字约 5 px，超出显存的部分看不出；"
                   "现在上下两幅整栏宽，设备显存线、超出部分（斜线）和各阶段占比标注都读得清。"),
    "4.4-efficiency": ((230, 8170, 1080, 8710), ".widget-vbox",
                       "权衡探索器：原来小图刻度写成 160000、“16%”压在标记上，也不说明控件需要内核，且与 4.5 显示同一状态；"
                       "现在先有一行说明如何让控件动起来，图中刻度为 200k、标注不压标记，默认状态与 4.5 不同。"),
    "4.5-case-study": ((230, 4020, 1080, 4620), "div.cell:has(pre:has-text('plot_memory_audit')) .cell_output",
                       "显存审计：原来 24 根柱子配 70° 旋转的小号标签，读不出哪根是哪个配置；"
                       "现在是调整前后最满阶段显存占比的散点图（96 种设置），虚线为前后相等，原文报告的 92% → 85% 以星标出。"),
    "4.6-misconceptions": ((230, 10440, 1080, 11400), "table:has(th:has-text('步骤'))",
                           "调参速查表：原来“步骤”列被挤成每行一个字，命令列很窄；"
                           "现在步骤一行写完，问题、命令、章节各列可读。"),
}


AFTER_MAX_HEIGHT = 1100
"""An after picture is cut to this many pixels (a long section is shown by its start)."""


def crop_pairs(shots: Path, html: Path, out: Path, regions: dict[str, tuple[Box, str, str]] = REGIONS) -> list[str]:
    """Write the pairs; return the chapters whose before screenshot, built page or passage is missing."""
    from PIL import Image

    from booktools import browser

    out.mkdir(parents=True, exist_ok=True)
    missing = []
    with browser.launch() as b:
        context = browser.offline_context(b, viewport={"width": 1280, "height": 800})
        try:
            for page, (before, selector, _) in regions.items():
                shot, built = shots / f"{page}.png", html / "book" / f"{page}.html"
                if not shot.is_file() or not built.is_file():
                    missing.append(page)
                    continue
                with Image.open(shot) as im:
                    left, top, right, bottom = before
                    im.crop((left, top, min(right, im.width), min(bottom, im.height))).save(out / f"{page}-before.png")
                tab = context.new_page()
                tab.goto(built.resolve().as_uri(), wait_until="load")
                tab.wait_for_timeout(2500)  # widgets drawn, formulas typeset
                # the theme's sticky bar would sit over the passage once it is scrolled to
                tab.add_style_tag(content=".bd-header-article, .bd-header { display: none !important; }")
                found = tab.locator(selector)
                if found.count() == 0:
                    missing.append(page)
                    continue
                target = found.first
                target.evaluate(browser.script("scroll_into_view"))
                box = target.bounding_box()
                clip = {"x": box["x"], "y": box["y"], "width": box["width"],
                        "height": min(box["height"], AFTER_MAX_HEIGHT)}
                tab.screenshot(path=str(out / f"{page}-after.png"), clip=clip)
                tab.close()
        finally:
            context.close()
    return missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m booktools.shot_pairs", description=__doc__.splitlines()[0])
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    ap.add_argument("--shots", type=Path, default=ROOT / "_build" / "screenshots" / "book")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "screenshots" / "pairs")
    args = ap.parse_args(argv)
    missing = crop_pairs(args.shots, args.html, args.out)
    for page, (_, _, change) in REGIONS.items():
        if page not in missing:
            print(f"{page}: {args.out / page}-before.png / -after.png — {change}")
    for page in missing:
        print(f"{page}: 缺少之前的截图 {args.shots / page}.png、构建好的页面或要截的段落", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
