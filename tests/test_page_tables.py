"""Tables as a reader sees them, measured in Chromium on the built book at 1280×800 and 390×844
(booktools.tables_check through render_check, on the pages tests/conftest.py loads once per process), on
every page: no cell wraps to lines of one or two characters, no word, number with its unit or code name is
cut inside, no command breaks between an option and its value or inside an option, and no table column
lies off the screen (on a phone a wide table shows each row as a card: booktools.tables, page.css §2a).

Before booktools.tables (measured on the build of db5a718): at 1280 px 83 cells had a line of at most two
characters (4.5's audit table stacked "未⏎复⏎现" in its 结论 column, 4.3 "参⏎数", 4.1 "序列长⏎度",
"gpt2-⏎xl"), 50 were cut inside a word (4.6's checklist "--⏎model", "-⏎-global-batch",
"step_c⏎ommunication"), 2 commands split an option from its value and one glossary column lay off the
screen; at 390 px 268 cells had such a line (4.3 73, 4.5 54, 4.6 41, 4.2 40, glossary 24), 89 were cut
inside a word and 50 columns lay off the screen (4.5's verdicts, 4.6's commands, the glossary's meanings).
"""
from __future__ import annotations

import pytest

from booktools import browser as chromium, layout, render_check, tables_check
from tests.book_pages import PAGES, WIDTHS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_table_cells_read_whole(rendered, doc, width):
    """No cell wraps to one or two characters a line, no word or command is cut, no column is off the screen
    (at 1280 px too: 4.6's checklist, its commands glued to a "；" by booktools.cjk_glue, once ran off it)."""
    problems = rendered[doc, width].tables.problems()
    assert not problems, f"{doc}.html：\n" + "\n".join(problems)


def _cells(rep: tables_check.TablesReport, label: str) -> list[dict]:
    return [c for c in rep.cells if c["label"] == label and not c["head"]]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_tables_the_issue_names_are_measured(rendered, width):
    """The check reads the cells it is about: 4.5's verdicts, 4.6's commands, the glossary's terms."""
    verdicts = _cells(rendered["book/4.5-case-study", width].tables, "结论")
    assert len(verdicts) >= 10 and all(len(b) == 1 for c in verdicts for b in c["blocks"]), verdicts
    assert {c["blocks"][-1][0]["text"] for c in verdicts} == {"复现", "未复现"}   # (a card's label comes first)
    commands = _cells(rendered["book/4.6-misconceptions", width].tables, "命令、函数或控件")
    assert any("--global-batch 64" in line["text"] for c in commands for b in c["blocks"] for line in b), commands
    assert any(len(b) > 1 for c in commands for b in c["blocks"]), "the commands never wrap: nothing measured"
    glossary = rendered["book/glossary", width].tables
    assert len(glossary.tables) >= 5 and len(_cells(glossary, "中文")) >= 40


def test_wide_tables_are_cards_on_a_phone(rendered, built):
    """At 390 px 4.5's audit table and 4.6's checklist show each row as a card: every data cell labelled
    with its column's header, the verdict column on the screen."""
    for doc, label in (("book/4.5-case-study", "结论"), ("book/4.6-misconceptions", "命令、函数或控件")):
        cards = [t for t in built.soup(doc).select("table.bl-cards")
                 if label in [th.get_text(strip=True) for th in t.select("thead th")]]
        assert cards, (doc, label)
        for table in cards:
            assert all(td.get("data-label") or td.select_one("span.bl-label") for td in table.select("tbody td")), table
        rep = rendered[doc, "390"].tables
        assert rep.tables and not rep.offscreen_columns(), rep.tables


BROKEN = """<html><head><meta charset="utf-8"><style>
body{margin:0;font-size:16px;font-family:sans-serif} article{width:340px} td{padding:2px;vertical-align:top}
code{font-family:monospace;font-size:13px}</style></head><body><article class="bd-article">
<table id="squeezed"><tr><td style="width:1em">未复现</td><td style="width:3.5em">序列长度</td></tr></table>
<table id="words"><tr><td style="width:3em;overflow-wrap:anywhere">gpt2-xl</td>
  <td style="width:6em;overflow-wrap:anywhere"><code>batchlab.formulas.comm.step_communication</code></td>
  <td style="width:3em">7.08 GiB</td></tr></table>
<table id="command"><tr><td style="width:4em;overflow-wrap:anywhere"><code>--global-batch 64</code></td>
  <td style="width:10ch;font:13px monospace">--model gpt2xl --seq 1024</td></tr></table>
<div style="overflow-x:auto"><table id="wide"><tr><th>一</th><th>二</th><th>三</th></tr>
  <tr><td style="white-space:nowrap">很长的一格很长的一格很长的</td><td style="white-space:nowrap">很长的一格很长的一格</td>
  <td style="white-space:nowrap">结论</td></tr></table></div>
<table id="fine"><tr><td style="width:9em"><code>batchlab.formulas<wbr>.comm<wbr>.step_communication</code></td>
  <td style="white-space:nowrap">第一行<br>二</td><td style="white-space:nowrap">复现</td>
  <td style="text-wrap:balance;min-width:5em">先写明的判据被测量满足，未被满足时不成立</td></tr></table>
</article></body></html>"""


@pytest.mark.parametrize("width", WIDTHS)
def test_table_check_catches_each_fault(browser, tmp_path, width):
    """booktools.tables_check can fail: a cell squeezed to one or two characters a line, a word, a model
    name, a code name and a number with its unit cut, a command cut inside an option and between an
    option and its value, a column off the screen; a code name broken before a dot, a forced line break
    and a long cell in balanced lines are not reported."""
    page = tmp_path / "tables.html"
    page.write_text(BROKEN, encoding="utf-8")
    rep = render_check.check_page(browser, page, viewport=layout.VIEWPORTS[width]).tables
    text = "\n".join(rep.problems())
    short = [c["element"] for c, _ in rep.short_lines()]
    assert any("未复现" in e for e in short) and any("序列长度" in e for e in short), text
    broken = " ".join(c["element"] for c, _ in rep.broken_words())
    for cut in ("gpt2-xl", "step_communication", "7.08 GiB", "--global-batch"):
        assert cut in broken, (cut, text)
    options = [b for _, b in rep.split_options()]
    assert [line["text"] for line in options[0]][:1] == ["--model"], text
    assert [t["offscreen"] for t in rep.offscreen_columns()] == [[1, 2]], rep.tables
    fine = [c for c in rep.cells if "#fine" in c["element"]]
    assert len(fine) == 4 and not any("#fine" in line for line in rep.problems()), text
    assert any(len(b) > 1 for c in fine for b in c["blocks"]), fine  # the fine cells did wrap


# --------------------------------------------------------------------------- issue 42 item 6
NAMED_HEADERS = {"book/4.7-schedules-parallelism": ["气泡（模拟器）", "每步点对点消息"],
                 "book/4.5-case-study": ["初始配置（模型）", "调整后（模型）"]}
SQUEEZE = chromium.script("squeeze_headers")   # the named headers given their old wrap


def _named_header_lines(tab, names: list[str]) -> dict[str, int]:
    """{header: how many lines it takes} for the named headers of the page loaded in `tab`."""
    out = {}
    for cell in tables_check.measure(tab, 1280).cells:
        text = "".join(line["text"] for line in cell["blocks"][0]).replace(" ", "") if cell["blocks"] else ""
        if cell["head"] and text in [n.replace(" ", "") for n in names]:
            out[text] = max(out.get(text, 0), len(cell["blocks"][0]))
    return out


def test_the_headers_the_issue_names_stay_on_one_line_at_1280(built, browser):
    """The headers issue 42 saw broken into two-character lines at 1280 px are on one line; given the wrap
    and minimum width they had before (booktools.tables' old header limit), the same measurement finds the
    break."""

    context = chromium.offline_context(browser, viewport=layout.VIEWPORTS["1280"])
    try:
        tab = context.new_page()
        for doc, names in NAMED_HEADERS.items():
            tab.goto(built.page(doc).as_uri(), wait_until="load")
            lines = _named_header_lines(tab, names)
            assert len(lines) >= len(names) and set(lines.values()) == {1}, (doc, lines)
            tab.evaluate(SQUEEZE, names)
            squeezed = _named_header_lines(tab, names)
            assert max(squeezed.values()) > 1, (doc, squeezed)
    finally:
        context.close()


def test_on_a_phone_comparison_tables_scroll_with_their_first_column_fixed(built, browser):
    """At 390 px the result tables of numbers (bl-scroll) stay tables: each that is wider than the column
    scrolls in its own box and its first column does not move; without page.css it moves with the rest."""

    for refuse in (False, True):
        context = chromium.offline_context(browser, viewport=layout.VIEWPORTS["390"])
        if refuse:
            chromium.refuse_stylesheet(context, "page.css")
        try:
            tab = context.new_page()
            tab.goto(built.page("book/4.7-schedules-parallelism").as_uri(), wait_until="load")
            tables = tables_check.fixed_first_columns(tab)
        finally:
            context.close()
        assert tables and all(t["scrolled"] > 0 for t in tables), tables
        moved = [t for t in tables if t["moved"]]
        assert (len(moved) == len(tables)) if refuse else not moved, moved


def test_cards_only_where_cells_are_prose(built):
    """A table shown as cards on a phone has a prose cell beyond its first column; a scrolling one has none;
    most comparison tables stay tables (66 of 71 were cards before)."""
    from booktools.tables import is_prose

    cards = scrolls = 0
    for doc in PAGES:
        soup = built.soup(doc)
        for table in soup.select("table.bl-cards, table.bl-scroll"):
            rows = [tr.find_all("td")[1:] for tr in table.select("tbody tr")]
            texts = [" ".join((td.find("span", class_="bl-label") and td.find_all("span")[-1] or td)
                              .get_text(" ", strip=True).split()) for row in rows for td in row]
            prose = any(is_prose(t) for t in texts)
            if "bl-cards" in table["class"]:
                cards += 1
                assert prose, (doc, texts[:6])
            else:
                scrolls += 1
    assert scrolls > 2 * cards, (cards, scrolls)
