"""The grades as the instructor sees them: in the terminal, in a CSV for a spreadsheet, and where that
CSV may be written. Every string a student controls (file names, exception names) is shown with its
control characters escaped, and a CSV cell that a spreadsheet would read as a formula is written as text."""
from __future__ import annotations

import csv
import errno
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Sequence

from batchlab.ui.tables import text_table

__all__ = ["printable", "spreadsheet_safe", "check_csv_target", "write_csv", "table_text"]

# C0 and C1 controls, DEL, and the Unicode characters that move or reorder text on a screen
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def printable(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x1b``, ``\\u202e``), so a
    student's file name or exception name cannot add, move or erase a row on the instructor's screen."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def spreadsheet_safe(cell: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: one starting with ``= + - @``, tab or CR gets a leading
    apostrophe (OWASP's advice against CSV injection); numbers pass unchanged."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_START):
        return "'" + cell
    return cell


def check_csv_target(csv_path: Path, submissions_dir: Path) -> Path:
    """The file ``--csv`` will write, resolved as the system will (links followed before ``..``); refused,
    before any grading, if writing it could lose something: inside the submissions folder (it would
    overwrite or join the submissions), a folder, a place that cannot be written, a name too long."""
    shown = printable(str(csv_path))
    if len(os.fsencode(Path(csv_path).name)) > 200:  # the temporary file beside it adds a prefix and a suffix
        raise ValueError(f"--csv：文件名太长（{len(os.fsencode(Path(csv_path).name))} 字节，最多 200）")
    try:
        target = Path(os.path.realpath(csv_path))
        inside = target.is_relative_to(Path(os.path.realpath(submissions_dir)))
        exists, is_dir = target.exists(), target.is_dir()
        parent_ok = target.parent.is_dir()
    except (OSError, ValueError) as err:  # a name with a NUL byte, a folder name over the system's limit
        code = errno.errorcode.get(err.errno, "") if isinstance(err, OSError) else "含有空字符"
        raise ValueError(f"--csv {shown!r}：无法使用这个路径（{code}）") from None
    if inside:
        raise ValueError(f"--csv {shown!r}：不能写进提交文件夹 {printable(str(submissions_dir))!r}（会覆盖或混入学生的文件）")
    if is_dir:
        raise ValueError(f"--csv {shown!r}：这是一个文件夹，不是文件")
    if not parent_ok:
        raise ValueError(f"--csv {shown!r}：文件夹 {printable(str(target.parent))!r} 不存在")
    if not os.access(target.parent, os.W_OK) or (exists and not os.access(target, os.W_OK)):
        raise ValueError(f"--csv {shown!r}：没有写入权限")
    return target


def write_csv(path: Path, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """The table as CSV, UTF-8 with a byte-order mark so that Excel reads the Chinese, every cell a
    spreadsheet would take for a formula written as text (:func:`spreadsheet_safe`); written to a
    temporary file beside ``path`` and renamed over it, so a failure leaves no half-written table."""
    with tempfile.NamedTemporaryFile("w", newline="", encoding="utf-8-sig", dir=Path(path).parent,
                                     prefix=".grades-", suffix=".csv", delete=False) as f:
        writer = csv.writer(f)
        writer.writerow([spreadsheet_safe(h) for h in headers])
        writer.writerows([spreadsheet_safe(c) for c in row] for row in rows)
    os.replace(f.name, path)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The table for the terminal, with a line on what the numbers mean."""
    exercises = len(headers) - 3  # all but student, total and status
    return (text_table(headers, rows).text + f"\n\n{len(rows)} 份提交；每道练习答对 1 分，满分 {exercises} 分。"
            "未作答、出错或删掉的练习记 0 分。")
