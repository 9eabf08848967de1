"""No ASCII space between Chinese characters in the rendered prose.

The Markdown sources break Chinese lines, and HTML shows each break as a space ("。 本书");
booktools.sphinxext joins them when a page is read, so the notebooks need no edit. The browser test
reads every page's main-content text (code, literals, math and MathJax output excluded) at both widths.
Before the extension: 281 such spaces over the 10 pages (13 in the preface, 58 in 4.3).
"""
from __future__ import annotations

import pytest
from docutils import nodes

from booktools.sphinxext import join_cjk
from tests.book_pages import PAGES, WIDTHS


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_no_space_between_chinese_characters(rendered, doc, width):
    problems = rendered[doc, width].layout.cjk_space_problems()
    assert not problems, f"{doc}.html：\n" + "\n".join(problems)


def _para(*children) -> nodes.paragraph:
    return nodes.paragraph("", "", *children)


def test_joins_a_line_break_between_chinese_characters():
    p = _para(nodes.Text("第一句。\n第二句，\n  第三句"))
    assert join_cjk(p) == 2
    assert p.astext() == "第一句。第二句，第三句"


def test_joins_across_inline_markup_and_identical_soft_breaks():
    # MyST gives each soft break its own Text("\n"): equal strings, so replacing must go by identity
    p = _para(nodes.Text("甲"), nodes.Text("\n"), nodes.strong("", "乙"), nodes.Text("\n"), nodes.Text("丙 x"),
              nodes.Text("\n"), nodes.Text("丁"))
    join_cjk(p)
    assert p.astext() == "甲乙丙 x\n丁"


def test_leaves_code_math_and_latin_alone():
    p = _para(nodes.Text("使用 "), nodes.literal("", "中 文"), nodes.Text(" 的值，\n"), nodes.math("", "x"),
              nodes.Text(" 是批大小 B 与 GPU 上的\nbatch"))
    assert join_cjk(p) == 0
    assert p.astext() == "使用 中 文 的值，\nx 是批大小 B 与 GPU 上的\nbatch"
    block = nodes.literal_block("", "中 文\n代码")
    assert join_cjk(block) == 0 and block.astext() == "中 文\n代码"


def test_formula_and_its_closing_punctuation_stay_on_one_line():
    # booktools.cjk_glue: “$B$），” or “`code`）” must not leave “），” to start the next rendered line
    from booktools.cjk_glue import glue
    p = _para(nodes.Text("批大小 "), nodes.math("", "B"), nodes.Text("），其余 "), nodes.math("", "m"),
              nodes.Text(" 个"), nodes.math("", "x"), nodes.Text("。"))
    assert glue(p) == 2
    boxes = [n for n in p.children if isinstance(n, nodes.inline)]
    assert [b.astext() for b in boxes] == ["B），", "x。"] and all(b["classes"] == ["bl-glue"] for b in boxes)
    assert p.astext() == "批大小 B），其余 m 个x。"
    assert glue(_para(nodes.math("", "y"), nodes.Text(" 与"))) == 0
    code = _para(nodes.Text("传 "), nodes.literal("", "--use-flash-attn"), nodes.Text("）；"))
    assert glue(code) == 1 and code.children[1].astext() == "--use-flash-attn）；"


def test_no_formula_before_unglued_punctuation_on_a_page(built):
    # Every inline formula followed by closing punctuation sits in a .bl-glue box on the built pages.
    import re
    from booktools.cjk_glue import CLOSING
    loose = re.compile(r'<span class="math notranslate nohighlight">[^<]*</span>[' + CLOSING + "]")
    found = []
    for page in built.pages():
        html = page.read_text(encoding="utf-8")
        found += [f"{page.name}: {m.group(0)[-40:]}" for m in loose.finditer(html)
                  if not html[:m.start()].rstrip().endswith('<span class="bl-glue">')]
    assert found == []
