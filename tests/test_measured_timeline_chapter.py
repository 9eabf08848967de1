"""4.4's measured pipeline timelines, as the book stores them: the chapter prints, for each measured panel of its
timeline figure, how many ops are outliers by batchlab.formulas.measured_timeline.outlier_ops (more than
OUTLIER_FACTOR × the median of their siblings). A committed timeline with such an op — one cold or interrupted
op that sets the makespan and the printed bubble — fails here. Timings vary by machine: nothing here asserts one."""
from __future__ import annotations

import re

import nbformat

from batchlab.formulas.measured_timeline import OUTLIER_FACTOR
from booktools import ROOT

CHAPTER = ROOT / "book" / "4.4-efficiency.ipynb"
LINE = re.compile(r"^(?P<panel>[^：]+)：最慢的算子是同段同类中位数的 (?P<ratio>[\d.]+) 倍，"
                  r"离群算子（> (?P<factor>[\d.]+) 倍）(?P<count>\d+) 个$")


def stored_outlier_lines(cell_id: str = "timeline-outliers") -> list[re.Match]:
    """The lines of the chapter's stored output that report outliers, one per measured panel."""
    nb = nbformat.read(CHAPTER, as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == cell_id)
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    return [m for m in map(LINE.match, text.splitlines()) if m]


def test_the_stored_measured_timelines_have_no_outlier_op():
    lines = stored_outlier_lines()
    assert len(lines) == 2, "4.4 应为两条实测时间线（单进程重排、多进程）各打印一行离群算子检查"
    for line in lines:
        assert float(line["factor"]) == OUTLIER_FACTOR
        assert int(line["count"]) == 0 and float(line["ratio"]) <= OUTLIER_FACTOR, line.group(0)


def test_the_line_pattern_reads_a_flagged_timeline():
    """The check can fail: the line the chapter would print for the cold-start timeline it once showed."""
    flagged = LINE.match("单进程实测（9 步中位数），按依赖重排：最慢的算子是同段同类中位数的 40.4 倍，离群算子（> 3 倍）2 个")
    assert flagged and int(flagged["count"]) == 2 and float(flagged["ratio"]) > OUTLIER_FACTOR
