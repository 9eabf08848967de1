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
