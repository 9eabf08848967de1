"""``python -m batchlab grade``: the answers it reads, how it reads a class's files, the table, bad
arguments, and (slow: one sandboxed kernel per notebook) the exact rows for the fixtures in
``tests/fixtures/grading/``: all correct, some wrong, an error cell, an endless loop, a truncated file.
Hostile submissions are in ``test_grade_hostile.py``."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from batchlab.apps.cli import main
from batchlab.apps.grade import (MAX_SUBMISSION_BYTES, Grade, _judged, _student, asked_exercises,
                                 grade_notebook, grade_table, read_notebook, submissions)
from batchlab.apps.grade_kernel import OK, _status
from batchlab.apps.grade_report import check_csv_target, printable, spreadsheet_safe, write_csv
from batchlab.ui.exercises import EXERCISES, answers, check, expected, is_correct, judge
from booktools import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "grading"
CHAPTER_4_1 = [i for i in EXERCISES if i.startswith("4.1-")]  # the columns of a class that hands in chapter 4.1


def _scores(*right: int) -> list[int]:
    """1 for each exercise of 4.1 whose number is in ``right`` (1, 3: 4.1-1 and 4.1-3), 0 for the others."""
    return [int(int(i.removeprefix("4.1-")) in right) for i in CHAPTER_4_1]


def _row(student: str, right: tuple[int, ...], status: str) -> list[str]:
    """The CSV row of a student who answered the exercises ``right`` of 4.1 correctly."""
    return [student, *map(str, _scores(*right)), str(len(right)), status]


HEADERS = ["学生", *CHAPTER_4_1, "总分", "状态"]
# the fixtures answer 4.1-1 … 4.1-6 (the chapter's exercises when they were written): a later exercise scores 0
ROWS = [
    _row("all_correct", (1, 2, 3, 4, 5, 6), "ok"),
    _row("endless_loop", (1, 2), "超时：单元格 4 运行超过 5 秒，已中断"),
    # its last cell is tagged raises-exception: a student's tag does not hide an error from the grader
    _row("error_cell", (2, 3, 4, 5, 6),
         "出错：单元格 3 抛出 ZeroDivisionError；单元格 4 抛出 NameError；单元格 10 抛出 ValueError"),
    _row("some_wrong", (1, 3), "ok"),
    _row("truncated", (), "不是 notebook：第 52 行第 5 列起不是合法的 JSON，文件不完整或已损坏"),
]


# ── the answers: recorded in the kernel, judged by the grader ────────────────────────────────────

def test_answers_hold_each_exercises_latest_answer(capsys):
    is_correct("4.1-4", expected("4.1-4"))
    assert answers()["4.1-4"] == expected("4.1-4")
    check("4.1-4", expected("4.1-4") + 1)  # the printing path records too
    assert "不对。提示" in capsys.readouterr().out and answers()["4.1-4"] == expected("4.1-4") + 1
    check("4.1-4", None)
    assert answers()["4.1-4"] is None
    with pytest.raises(ValueError, match="没有这道练习"):
        is_correct("9.9-9", 1)
    assert "9.9-9" not in answers()
    answers()["4.1-4"] = 3  # a copy: a caller cannot change the record
    assert answers()["4.1-4"] is None


def test_the_grader_judges_the_sent_answers_itself():
    right, wrong = expected("4.1-4"), expected("4.1-4") + 1
    sent = json.dumps({"4.1-4": right, "4.1-2": wrong, "9.9-9": 1, "4.1-3": "junk"})
    assert _judged(sent) == {"4.1-4"}
    # verdicts sent as data are answers, and wrong ones
    forged = json.dumps({i: True for i in CHAPTER_4_1})
    assert _judged(forged) == set()
    for broken in ("", "{oops", "[1, 2]", "null", "[" * 100_000 + "]" * 100_000):
        assert _judged(broken) == set()
    assert judge("4.1-4", right) and not judge("4.1-4", True)


# ── reading a class's files (no kernel) ─────────────────────────────────────────────────────────

def test_files_that_are_not_notebooks_say_why(tmp_path):
    with pytest.raises(ValueError, match="^第 52 行第 5 列起不是合法的 JSON，文件不完整或已损坏$"):
        read_notebook((FIXTURES / "truncated.ipynb").read_bytes())
    (tmp_path / "li.docx").write_bytes(b"PK\x03\x04")
    assert grade_notebook(tmp_path / "li.docx") == Grade("li", "不是 notebook：扩展名是 .docx，不是 .ipynb")
    (tmp_path / "wang.ipynb").write_text('{"cells": 3}', encoding="utf-8")
    assert grade_notebook(tmp_path / "wang.ipynb").status.startswith("不是 notebook：不符合 nbformat 格式（")
    (tmp_path / "zhao.ipynb").write_text("", encoding="utf-8")
    assert grade_notebook(tmp_path / "zhao.ipynb").status == "不是 notebook：第 1 行第 1 列起不是合法的 JSON，文件不完整或已损坏"


def test_asked_exercises_are_the_known_ids_in_book_order():
    assert asked_exercises(read_notebook((FIXTURES / "endless_loop.ipynb").read_bytes())) == ("4.1-1", "4.1-2")
    notebook = read_notebook((FIXTURES / "all_correct.ipynb").read_bytes())
    notebook.cells[-1].source = "ask('9.9-1')  # a typo: ask raises in the kernel, no column here"
    notebook.cells[2].source += "\nask( \"4.1-6\" )"
    assert asked_exercises(notebook) == ("4.1-1", "4.1-2", "4.1-3", "4.1-4", "4.1-5", "4.1-6")


def test_every_visible_file_is_a_submission(tmp_path):
    for name in ("b.ipynb", "a.txt", ".hidden.ipynb"):
        (tmp_path / name).write_text("{}", encoding="utf-8")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    assert [p.name for p in submissions(tmp_path)] == ["a.txt", "b.ipynb"]


def test_a_file_name_in_gbk_is_read_and_a_vanished_file_gets_its_own_row(tmp_path):
    gbk = tmp_path / os.fsdecode("张三.ipynb".encode("gbk"))  # a zip made on a Chinese Windows
    gbk.write_text("{}", encoding="utf-8")
    assert _student(gbk) == "张三"
    gone = tmp_path / "li.ipynb"
    assert grade_notebook(gone).status.startswith("读不到文件（FileNotFoundError），批改开始后它被删除或改动了")


# ── the table ─────────────────────────────────────────────────────────────────────────────────────

def test_columns_are_the_assignments_chapters_and_a_missing_one_scores_0():
    grades = [Grade("zhang", OK, ("4.1-1", "4.1-3"), frozenset({"4.1-1", "4.1-3"})),
              Grade("li", OK, ("4.1-1",), frozenset()),  # deleted 4.1-3: 0, not a blank
              Grade("wang", "不是 notebook：…"),
              Grade("zhao", OK, ("4.2-1",), frozenset({"4.2-1", "4.1-2"}))]  # one notebook of 3 asks 4.2: no column
    headers, rows = grade_table(grades)
    assert headers == ["学生", *CHAPTER_4_1, "总分", "状态"]
    assert rows == [["zhang", *_scores(1, 3), 2, OK], ["li", *_scores(), 0, OK],
                    ["wang", *_scores(), 0, "不是 notebook：…"], ["zhao", *_scores(2), 1, OK]]
    # half the readable notebooks asking is enough; the instructor can also name the chapters
    assert grade_table(grades[:1] + grades[3:])[0][1:-2] == [*CHAPTER_4_1,
                                                          *(i for i in EXERCISES if i.startswith("4.2-"))]
    assert grade_table(grades, ["4.3"])[0][1:-2] == [i for i in EXERCISES if i.startswith("4.3-")]
    with pytest.raises(ValueError, match="--chapter 9.9：没有这一章的练习"):
        grade_table(grades, ["9.9"])


def test_the_csv_goes_nowhere_it_could_lose_something(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "li.ipynb").write_text("{}", encoding="utf-8")
    for target, reason in ((subs / "li.ipynb", "不能写进提交文件夹"), (subs / "new.csv", "不能写进提交文件夹"),
                           (tmp_path, "这是一个文件夹"), (tmp_path / "no" / "g.csv", "不存在")):
        with pytest.raises(ValueError, match=reason):
            check_csv_target(target, subs)
    check_csv_target(tmp_path / "grades.csv", subs)
    write_csv(tmp_path / "grades.csv", ["学生"], [["li"]])
    assert (tmp_path / "grades.csv").read_bytes() == "\ufeff学生\r\nli\r\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grades.csv", "subs"]  # no temporary left


def test_the_csv_check_follows_links_as_the_write_will(tmp_path, monkeypatch):
    """``S/../victim.txt`` with S a link into the submissions: the system resolves S first, so the
    write would land inside them, whatever the text of the path says."""
    subs = tmp_path / "subs"
    (subs / "inner").mkdir(parents=True)
    (subs / "victim.txt").write_text("keep", encoding="utf-8")
    (tmp_path / "S").symlink_to(subs / "inner")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="不能写进提交文件夹"):
        check_csv_target(Path("S/../victim.txt"), subs)
    assert check_csv_target(Path("grades.csv"), subs) == tmp_path.resolve() / "grades.csv"


@pytest.mark.parametrize("name, reason", [("x" * 300 + ".csv", "文件名太长"), ("a\x00b.csv", "无法使用这个路径")])
def test_a_strange_csv_name_is_one_line_not_a_traceback(tmp_path, name, reason, capsys):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "li.docx").write_text("x", encoding="utf-8")
    assert main(["grade", str(tmp_path / "subs"), "--csv", str(tmp_path / name.replace("\\x00", "\x00"))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and reason in err and "Traceback" not in err


def test_student_strings_are_escaped_and_csv_formulas_are_text(tmp_path):
    assert printable("Err\nfake 1 1 6 ok") == "Err\\nfake 1 1 6 ok"
    assert printable("\x1b[3A\x1b[2K\rli\u202eabc") == "\\x1b[3A\\x1b[2K\\rli\\u202eabc"
    assert printable("张三 ok") == "张三 ok"
    assert _student(tmp_path / "a\nb.ipynb") == "a\\nb"
    cells = ['=HYPERLINK("evil.invalid","click")', "+1", "-2", "@SUM(A1)", "\tx", "\rx", "李四", 3, "4.1-1"]
    assert [spreadsheet_safe(c) for c in cells] == [
        '\'=HYPERLINK("evil.invalid","click")', "'+1", "'-2", "'@SUM(A1)", "'\tx", "'\rx", "李四", 3, "4.1-1"]
    write_csv(tmp_path / "g.csv", ["学生", "总分"], [['=1+1', 1]])
    assert (tmp_path / "g.csv").read_bytes().decode("utf-8-sig") == "学生,总分\r\n'=1+1,1\r\n"


def test_only_regular_files_are_graded_and_the_rest_say_why(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "zhao.ipynb").write_text("{}", encoding="utf-8")
    (subs / "link.ipynb").symlink_to(subs / "zhao.ipynb")
    os.mkfifo(subs / "pipe.ipynb")  # reading it would wait for ever
    with open(subs / "big.ipynb", "wb") as f:
        f.truncate(MAX_SUBMISSION_BYTES + 1)
    assert [p.name for p in submissions(subs)] == ["big.ipynb", "link.ipynb", "pipe.ipynb", "zhao.ipynb"]
    assert grade_notebook(subs / "link.ipynb").status == "未批改：这是一个符号链接，只批改文件夹里的普通文件"
    assert grade_notebook(subs / "pipe.ipynb").status == "未批改：不是普通文件，只批改文件夹里的普通文件"
    assert grade_notebook(subs / "big.ipynb").status.startswith("未批改：文件有 16 MiB，超过 16 MiB 的上限")
    deep = subs / "deep.ipynb"
    deep.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    assert grade_notebook(deep).status == "不是 notebook：JSON 嵌套过深，不是 Jupyter 保存的文件"


def test_status_names_the_cells_and_keeps_a_cascade_short():
    assert _status([], 600) == OK
    assert _status([(3, "NameError")], 600) == "出错：单元格 3 抛出 NameError"
    errors = [(n, "NameError") for n in range(4, 9)]
    assert _status([(2, "batchlab-grade-timeout"), *errors], 30) == (
        "超时：单元格 2 运行超过 30 秒，已中断；单元格 4 抛出 NameError；单元格 5 抛出 NameError；另有 3 处")


# ── bad arguments: exit 2 with one line, before any grading ─────────────────────────────────────

@pytest.mark.parametrize("args, reason", [
    (["no/such/dir"], "DIR = 'no/such/dir'：不是一个存在的文件夹"),
    ([str(FIXTURES), "--timeout", "0"], "timeout = 0：必须在 1 到 86,400 之间"),
    ([str(FIXTURES), "--csv", "no/such/dir/grades.csv"], "--csv 'no/such/dir/grades.csv'：文件夹 '"),
    ([str(FIXTURES), "--csv", str(FIXTURES / "all_correct.ipynb")], "：不能写进提交文件夹"),
    ([str(FIXTURES), "--chapter", "4.9"], "--chapter 4.9：没有这一章的练习"),
])
def test_bad_arguments_exit_2_with_one_line(args, reason, capsys):
    assert main(["grade", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("python -m batchlab grade: error: ") and reason in err
    assert err.count("\n") == 1


def test_an_empty_folder_is_a_bad_argument(tmp_path, capsys):
    assert main(["grade", str(tmp_path)]) == 2
    assert "文件夹里没有要批改的文件" in capsys.readouterr().err


def test_json_report_of_a_class_that_handed_in_no_notebook(tmp_path, capsys):
    (tmp_path / "li.docx").write_bytes(b"PK\x03\x04")  # no notebook: no kernel starts
    assert main(["grade", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["headers"] == ["学生", "总分", "状态"]
    assert report["rows"] == [["li", 0, "不是 notebook：扩展名是 .docx，不是 .ipynb"]]


# ── the class of fixtures, each notebook in its own kernel ──────────────────────────────────────

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The fixtures handed in as a class folder, graded once, the CSV written beside it."""
    class_dir = tmp_path_factory.mktemp("submissions")
    for notebook in FIXTURES.glob("*.ipynb"):
        shutil.copy(notebook, class_dir)
    out = class_dir.parent / "grades.csv"
    proc = subprocess.run([sys.executable, "-m", "batchlab", "grade", str(class_dir), "--timeout", "5",
                           "--csv", str(out)], capture_output=True, text=True, timeout=300)
    return proc, out


@pytest.mark.slow
def test_the_csv_has_one_exact_row_per_student(graded):
    proc, out = graded
    assert proc.returncode == 0, proc.stderr
    raw = out.read_bytes()
    assert raw.startswith("\ufeff".encode())  # Excel needs the byte-order mark to read UTF-8 Chinese
    assert list(csv.reader(raw.decode("utf-8-sig").splitlines())) == [HEADERS, *ROWS]


@pytest.mark.slow
def test_the_terminal_shows_the_same_rows_and_one_line_on_how_it_ran(graded):
    proc, out = graded
    lines = proc.stdout.splitlines()
    assert [line.split() for line in lines[:6]] == [HEADERS, *(row[:-1] + row[-1].split() for row in ROWS)]
    assert lines[-2:] == [f"5 份提交；每道练习答对 1 分，满分 {len(CHAPTER_4_1)} 分。未作答、出错或删掉的练习记 0 分。", f"已写入 {out}"]
    # stderr is a pipe, not a terminal: the first line (sandboxes at once, what counts memory), no progress line
    assert proc.stderr.startswith("批改 5 份，同时运行 ") and "计数" in proc.stderr.splitlines()[0]
    assert "5/5" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_kernel_that_dies_costs_its_row_only(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    cells = [new_code_cell("from batchlab.ui.exercises import check"), new_code_cell('check("4.1-1", 8)'),
             new_code_cell("import os\nos._exit(1)  # the kernel process ends")]
    nbformat.write(new_notebook(cells=cells), tmp_path / "qian.ipynb")
    grade = grade_notebook(tmp_path / "qian.ipynb", timeout=30)
    assert grade == Grade("qian", "出错：内核在单元格 3 意外退出", ("4.1-1",))  # its answers died with it


def test_a_notebook_whose_cells_only_check_is_asked_what_it_checks():
    """The chapters' self-check cells name the exercise in check(...) (the question is Markdown above)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("**练习 4.1-2** …"),
                nbformat.v4.new_code_cell('answer = None  # 换成你的答案\ncheck("4.1-2", answer)'),
                nbformat.v4.new_code_cell('ask("4.1-1")'), nbformat.v4.new_code_cell('check("9.9", 1)')]
    assert asked_exercises(nb) == ("4.1-1", "4.1-2")


def test_no_sandbox_here_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    """Where bubblewrap cannot build the sandbox (user namespaces forbidden, say), grade refuses before
    running anything, in one line that says what to enable."""
    import shutil as shutil_module

    from batchlab.apps import sandbox

    (tmp_path / "li.ipynb").write_text("{}", encoding="utf-8")
    real_which = shutil_module.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: "/bin/false" if name == "bwrap" else real_which(name))
    sandbox.bwrap.cache_clear()
    try:
        assert main(["grade", str(tmp_path)]) == 2
    finally:
        sandbox.bwrap.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "建不起沙箱" in err and "用户命名空间" in err
