import pytest

from batchlab.ui.tables import display_width, text_table


def test_display_width_counts_cjk_double():
    assert display_width("abc") == 3 and display_width("批大小") == 6 and display_width("B=8，好") == 7


def test_columns_line_up_by_display_width():
    out = text_table(["批大小", "loss", "结论"], [[8, 2.5, "是"], [512, 1.25, "部分"]], digits=2)
    lines = out.splitlines()
    assert lines[1] == "     8  2.50  是"
    assert lines[2] == "   512  1.25  部分"
    # every line places the third column at the same display column
    assert {display_width(line[:line.rindex("  ") + 2]) for line in lines} == {14}
    with pytest.raises(ValueError, match="every row needs 3 cells"):
        text_table(["a", "b", "c"], [[1, 2]])
