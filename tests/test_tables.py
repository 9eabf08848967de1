import re

import pytest
from IPython.core.formatters import DisplayFormatter

from batchlab.ui.tables import HTML_CLASS, display_width, text_table


def test_display_width_counts_cjk_double():
    assert display_width("abc") == 3 and display_width("批大小") == 6 and display_width("B=8，好") == 7


def test_columns_line_up_by_display_width():
    out = str(text_table(["批大小", "loss", "结论"], [[8, 2.5, "是"], [512, 1.25, "部分"]], digits=2))
    lines = out.splitlines()
    assert lines[1] == "     8  2.50  是"
    assert lines[2] == "   512  1.25  部分"
    # every line places the third column at the same display column
    assert {display_width(line[:line.rindex("  ") + 2]) for line in lines} == {14}


def test_row_length_error_names_the_rule_in_chinese():
    with pytest.raises(ValueError, match=r"每一行都要有 3 个单元格.*\[2\]"):
        text_table(["a", "b", "c"], [[1, 2]])


def test_html_has_the_same_cells_aligned_by_column_type():
    table = text_table(["批大小", "结论"], [[8, "<是>"], [512, "否"]])
    page = table._repr_html_()
    assert page.startswith(f'<table class="{HTML_CLASS}"') and page.endswith("</table>")
    headers = re.findall(r"<th style=\"([^\"]*)\">([^<]*)</th>", page)
    assert [h for _, h in headers] == ["批大小", "结论"]
    cells = re.findall(r"<td style=\"([^\"]*)\">([^<]*)</td>", page)
    assert [c for _, c in cells] == ["8", "&lt;是&gt;", "512", "否"]   # escaped, same strings as the text
    numbers, text = cells[0][0], cells[1][0]
    assert "text-align: right" in numbers and "text-align: left" in text
    assert text_table(["批大小", "结论"], [[8, "<是>"], [512, "否"]])._repr_html_() == page   # deterministic


def test_jupyter_shows_html_and_aligned_text():
    """What a notebook saves: text/html for the book, the aligned text (not a repr) for text/plain."""
    table = text_table(["B", "损失"], [[8, 2.5]], digits=2)
    data, _ = DisplayFormatter().format(table)
    assert data["text/plain"] == "B  损失\n8  2.50"
    assert data["text/html"] == table.html()


# ── how the book lays a table out (booktools.tables) and reads it back (booktools.tables_check) ─────
from docutils.core import publish_doctree  # noqa: E402

from batchlab.page.symbols import Typeset  # noqa: E402
from booktools import tables as layout_rules  # noqa: E402
from booktools.tables_check import TablesReport  # noqa: E402

COMMAND = ("python -m batchlab plan --model gpt2-xl --seq-len 1024 --global-batch 64 --micro-batch 2 "
           "--pipeline-stages 4 --data-parallel 2 --grad-accum 4")


def test_a_short_cell_stays_on_one_line_and_a_long_one_wraps_in_two_balanced_lines():
    assert layout_rules.cell_layout("未复现") == (True, 3)
    assert layout_rules.cell_layout("每秒浮点运算次数") == (True, 8)
    assert layout_rules.cell_layout("原文的梯度累积步数") == (False, 5)     # two lines: 原文的梯度⏎累积步数
    assert layout_rules.cell_layout("同分布，非同一次更新", verdict=True) == (True, 10)  # a verdict: never cut
    assert layout_rules.cell_layout("0 种设置在 ±3 个百分点内") == (False, 7)  # 2 lines of ≥ 7 em
    assert layout_rules.cell_layout("很长" * 30) == (False, layout_rules.PROSE_EM)
    assert layout_rules.cell_layout("原文的梯度累积步数", header=True) == (False, 5)
    # Latin words wrap at spaces only: the longest word sets the width
    assert layout_rules.cell_layout("activation recomputation (checkpointing)") == (False, 9)


def test_numbers_with_units_ranges_and_hyphenated_names_are_kept_whole():
    kept = lambda text: [p for p, keep in layout_rules.keep_spans(text) if keep]  # noqa: E731
    assert kept("0 种设置在 ±3 个百分点内（模型范围 7%–213%）") == ["7%–213%"]
    assert kept("利用率 1.62 倍，吞吐 1.59 倍") == ["1.62 倍", "1.59 倍"]
    assert kept("按整个集群的 3,200 tokens/s：MFU 1.1%–1.4%") == ["3,200 tokens/s", "1.1%–1.4%"]
    assert kept("gpt2-xl 与 ZeRO-1") == ["gpt2-xl", "ZeRO-1"]
    assert kept("B=8，恒定学习率") == [] and "".join(p for p, _ in layout_rules.keep_spans("a 7 GiB")) == "a 7 GiB"


def test_a_command_breaks_between_options_and_a_code_name_before_a_dot():
    assert layout_rules.command_groups(COMMAND) == [
        "python -m batchlab", "plan", "--model gpt2-xl", "--seq-len 1024", "--global-batch 64",
        "--micro-batch 2", "--pipeline-stages 4", "--data-parallel 2", "--grad-accum 4"]
    assert layout_rules.command_groups("python -m batchlab bench-matmul --m 2048 4096")[-1] == "--m 2048 4096"
    assert layout_rules.name_segments("batchlab.formulas.scaling.scale_lr") == [
        "batchlab", ".formulas", ".scaling", ".scale_lr"]
    assert layout_rules.name_segments("formulas.noise.finite_population_factor") == [
        "formulas", ".noise", ".finite", "_population", "_factor"]


def test_a_result_table_gets_labels_classes_and_cards_when_wide():
    wide = text_table(["原文的说法", "原文", "本书计算", "结论"],
                      [["吞吐提升 59%（910B 低端）", "1.59 倍", "模型 0.86 倍，在报告值的 ±15% 以外", "未复现"]])
    out = layout_rules.layout_html_table(wide.html())
    assert 'class="batchlab-table bl-cards"' in out
    assert re.findall(r'<span class="bl-label">([^<]*)</span>', out) == ["原文的说法", "原文", "本书计算", "结论"]
    assert 'class="bl-nowrap bl-verdict"' in out and '<span class="bl-keep">1.59 倍</span>' not in out  # short
    assert '<span class="bl-keep">±15%</span>' not in out and "min-width: " in out
    shown = re.sub(r'<span class="bl-label">[^<]*</span>', "", out)   # without the labels only a card shows
    assert re.sub(r"<[^>]+>", "", shown) == re.sub(r"<[^>]+>", "", wide.html())   # the same text
    narrow = text_table(["B", "损失"], [[8, 2.5]])
    out = layout_rules.layout_html_table(narrow.html())
    assert "bl-cards" not in out and '<span class="bl-label">损失</span>' in out
    # a header's <sub> stays in its label
    symbols = text_table([Typeset("E/E_min", "E/E<sub>min</sub>"), "B"], [[1.5, 8]])
    assert '<span class="bl-label">E/E<sub>min</sub></span>' in layout_rules.layout_html_table(symbols.html())
    assert layout_rules.layout_html_table("<table><tr><td>x</td></tr></table>") == "<table><tr><td>x</td></tr></table>"


def test_a_markdown_table_gets_the_same_rules():
    rst = f"""
====== ========================
步骤   命令
====== ========================
1      ``{COMMAND}``
2      ``batchlab.formulas.scaling.scale_lr``
====== ========================
"""
    doc = publish_doctree(rst, settings_overrides={"report_level": 5})
    layout_rules.TableLayout(doc).apply()
    entries = list(doc.findall(lambda n: n.tagname == "entry"))
    assert [e.get("bl_label") for e in entries] == [None, None, "步骤", "命令", "步骤", "命令"]
    command = entries[3].next_node(lambda n: n.tagname == "literal")
    assert [c.astext() for c in command.children if c.tagname == "inline"][2] == "--model gpt2-xl"
    assert command.astext() == COMMAND                                  # the text is unchanged
    name = entries[5].next_node(lambda n: n.tagname == "literal")
    assert [c.astext() for c in name.children] == ["batchlab", "<wbr>", ".formulas", "<wbr>", ".scaling", "<wbr>",
                                                   ".scale_lr"]
    assert "bl-nowrap" in entries[2]["classes"] and "bl-wrap" in entries[3]["classes"]


def _line(text: str, before: str | None) -> dict:
    return {"text": text, "chars": len(text.replace(" ", "")), "brokenBefore": before}


def test_the_table_check_reads_lines_as_rules():
    """tables_check's rules on lines as the browser reports them (tests/test_page_tables.py runs them on pages)."""
    cell = {"element": "td", "table": 0, "row": 1, "column": 3, "label": "结论", "head": False}
    rep = TablesReport(width=390, cells=[
        {**cell, "blocks": [[_line("未", None), _line("复现", "cjk")]]},                  # short lines
        {**cell, "blocks": [[_line("第一行", None), _line("二", "forced")]]},               # a <br>: fine
        {**cell, "blocks": [[_line("batchlab.formulas", None), _line(".comm", "inside")]]},  # before a dot: fine
        {**cell, "blocks": [[_line("step_c", None), _line("ommunication", "inside")]]},     # a name cut
        {**cell, "blocks": [[_line("峰值 7.08", None), _line("GiB，放得下", "space")]]},    # number | unit
        {**cell, "blocks": [[_line("plan --model", None), _line("gpt2-xl --seq-len 1024", "space")]]},
    ], tables=[{"element": "table", "columns": 4, "offscreen": [3], "visible": [16, 374]}])
    assert [c["blocks"][0][0]["text"] for c, _ in rep.short_lines()] == ["未"]
    assert [c["blocks"][0][0]["text"] for c, _ in rep.broken_words()] == ["step_c", "峰值 7.08"]
    assert [c["blocks"][0][0]["text"] for c, _ in rep.split_options()] == ["plan --model"]
    problems = rep.problems()
    assert len(problems) == 5 and "第 4 列（共 4 列）在屏幕外" in problems[-1], problems
    assert "第 1 个表格第 2 行「结论」列折成每行不超过 2 个字：未⏎复现" in problems[0], problems


# the five headers issue 42 saw broken into two-character lines at 1280 px ("气泡⏎（模拟器）")
NAMED_HEADERS = ["气泡（模拟器）", "每步点对点消息", "初始配置（模型）", "调整后（模型）", "E/Emin 预测"]


@pytest.mark.parametrize("header", NAMED_HEADERS)
def test_a_short_header_stays_on_one_line(header):
    assert layout_rules.cell_layout(header, header=True)[0], header
    # a longer header still wraps, in two balanced lines
    nowrap, em = layout_rules.cell_layout(header + "与它的来源说明", header=True)
    assert not nowrap and em >= 5


def test_on_a_phone_a_comparison_stays_a_table_and_prose_becomes_cards():
    """phone_layout: a table that fits stays as it is; one too wide with short cells (numbers, terms) scrolls
    in its own box (bl-scroll); one too wide with a prose cell beyond its first column becomes cards."""
    headers = ["调度", "气泡（公式）", "气泡（模拟器）", "空闲时间（相对 1F1B）", "每步点对点消息"]
    numbers = [["1F1B", "GPipe", "交错 1F1B"], ["42.9%", "42.9%", "27.3%"], ["42.9%", "42.9%", "27.3%"],
               ["1.00", "1.00", "0.64"], ["96", "96", "192"]]
    assert layout_rules.phone_layout(numbers, layout_rules.PAD_EM["raw"], headers) == "bl-scroll"
    prose = [c[:] for c in numbers]
    prose[3][1] = "所有微批次的前向走完才开始反向，激活要一直存到反向用完"
    assert layout_rules.phone_layout(prose, layout_rules.PAD_EM["raw"], headers) == "bl-cards"
    # prose in the first column (the rows' names) alone does not make cards; a verdict column is terms
    named = [c[:] for c in numbers]
    named[0][0] = "所有微批次的前向走完才开始反向的调度"
    assert layout_rules.phone_layout(named, layout_rules.PAD_EM["raw"], headers) == "bl-scroll"
    small = [["8", "16"], ["2.5", "2.4"]]
    assert layout_rules.phone_layout(small, layout_rules.PAD_EM["raw"], ["B", "损失"]) == ""


def test_a_result_table_of_numbers_scrolls_on_a_phone():
    wide = text_table(["调度", "气泡（公式）", "气泡（模拟器）", "空闲时间（相对 1F1B）", "每步点对点消息", "峰值显存"],
                      [["1F1B", "42.9%", "42.9%", "1.00", 96, "7.08 GiB"]])
    out = layout_rules.layout_html_table(wide.html())
    assert f'class="{HTML_CLASS} bl-scroll"' in out and "bl-cards" not in out


def test_the_table_check_lets_a_fixed_first_column_table_scroll():
    """A column off the screen is a fault, except in a bl-scroll table (its first column stays fixed)."""
    tables = [{"element": "table.batchlab-table.bl-scroll «调度»", "columns": 5, "offscreen": [3, 4],
               "visible": [16, 374]},
              {"element": "table.batchlab-table «调度»", "columns": 5, "offscreen": [3, 4], "visible": [16, 374]}]
    rep = TablesReport(width=390, cells=[], tables=tables)
    assert rep.offscreen_columns() == [tables[1]]


def test_a_latin_cell_still_wraps_where_a_header_would_not():
    """The longer header limit is for headers only: a Latin body cell longer than LATIN_NOWRAP wraps at its
    spaces, as before ("Micro-Batch Size" beside a squeezed meaning column)."""
    assert layout_rules.cell_layout("Micro-Batch Size", header=True)[0]
    assert not layout_rules.cell_layout("Micro-Batch Size")[0]
    assert layout_rules.cell_layout("Batch Size")[0]


def test_the_meaning_column_is_marked():
    """The last column of prose of a table of three or more columns is bl-meaning; a short one is not."""
    rst = """
====== ============ ==================================================
中文   English      含义
====== ============ ==================================================
批大小 Batch Size   一次参数更新所用的样本数（单设备、不切分时），本书写作 B
微批次 Micro-Batch  一个
====== ============ ==================================================
"""
    doc = publish_doctree(rst, settings_overrides={"report_level": 5})
    layout_rules.TableLayout(doc).apply()
    body = [e for e in doc.findall(lambda n: n.tagname == "entry") if e.get("bl_label")]
    assert [("bl-meaning" in e["classes"]) for e in body] == [False, False, True, False, False, False]
