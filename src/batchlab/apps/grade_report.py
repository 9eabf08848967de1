"""The grades as the instructor sees them: in the terminal, in a CSV for a spreadsheet, and where that
CSV may be written. Every string a student controls (file names, exception names) is shown with its
control, format and filler characters escaped and its length capped, and a CSV cell that a spreadsheet
would read as a formula is written as text."""
from __future__ import annotations

import csv
import errno
import hashlib
import os
import re
import unicodedata
import uuid
from pathlib import Path
from typing import Any, Sequence

from batchlab.ui.tables import text_table

__all__ = ["MAX_SHOWN", "printable", "spreadsheet_safe", "check_csv_target", "write_csv", "table_text"]

MAX_SHOWN = 120
"""The most characters of one student string shown (a spreadsheet holds 32,767 in a cell; a name or an
exception's name is a few dozen)."""
# Unicode categories that show nothing or move text: controls, format characters (bidi marks, zero
# widths, U+00AD, U+2060…, the tags U+E0000…), separators other than the space, surrogates, private
# use, unassigned; and marks that only vary the character before them
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}
_FILLERS = re.compile("[\u115f\u1160\u3164\uffa0\u034f\u180b-\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escaped(char: str) -> str:
    if char == " " or not (char == "\\" or unicodedata.category(char) in _HIDDEN_CATEGORIES or _FILLERS.match(char)):
        return char
    return char.encode("unicode_escape").decode("ascii")


def printable(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` with every character that shows nothing, looks like another or moves text written as an
    escape (``\\n``, ``\\x1b``, ``\\u202e``, ``\\u3164``), the backslash itself as ``\\\\``, so a student's
    file name or exception name cannot add, move or erase a row on the instructor's screen and two
    different names never print the same; past ``limit`` characters cut, with the length said."""
    shown = "".join(_escaped(c) for c in text[:limit])
    if len(text) <= limit:
        return shown
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]  # two long names differ
    return f"{shown}…（共 {len(text):,} 个字符，摘要 {digest}）"


def spreadsheet_safe(cell: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: one starting with ``= + - @``, tab or CR gets a leading
    apostrophe (OWASP's advice against CSV injection); numbers pass unchanged."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_START):
        return "'" + cell
    return cell


def check_csv_target(csv_path: Path, submissions_dir: Path) -> Path:
    """The file ``--csv`` will write, resolved as the system will (links followed before ``..``); refused,
    before any grading, if writing it could lose something: a link (whoever planted it, in ``/tmp`` say,
    would choose what the table replaces), inside the submissions folder (it would overwrite or join the
    submissions), a folder, a place that cannot be written, a name too long."""
    shown = printable(str(csv_path))
    if len(os.fsencode(Path(csv_path).name)) > 200:  # the temporary file beside it adds a prefix and a suffix
        raise ValueError(f"--csv：文件名太长（{len(os.fsencode(Path(csv_path).name))} 字节，最多 200）")
    if os.path.islink(csv_path):
        raise ValueError(f"--csv {shown!r}：这是一个符号链接，不写到链接指向的地方；请换一个文件名")
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
    spreadsheet would take for a formula written as text (:func:`spreadsheet_safe`). Written to a new
    file (``O_EXCL``, ``O_NOFOLLOW``) in ``path``'s folder, opened once, and renamed over ``path`` in it:
    a failure leaves no half-written table, and a link planted at ``path`` since the check is replaced,
    never followed."""
    path = Path(path)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    temporary = f".grades-{uuid.uuid4().hex}.csv"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
        try:
            with open(fd, "w", newline="", encoding="utf-8-sig") as f:
                writer = csv.writer(f)
                writer.writerow([spreadsheet_safe(h) for h in headers])
                writer.writerows([spreadsheet_safe(c) for c in row] for row in rows)
            os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            os.unlink(temporary, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The table for the terminal, with a line on what the numbers mean."""
    exercises = len(headers) - 3  # all but student, total and status
    return (text_table(headers, rows).text + f"\n\n{len(rows)} 份提交；每道练习答对 1 分，满分 {exercises} 分。"
            "未作答、出错或删掉的练习记 0 分。")
