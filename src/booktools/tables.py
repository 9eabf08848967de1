"""Tables a reader can read at 1280 px, on a 390 px phone and in the PDF: a Sphinx extension (registered in
_config.yml, `sphinx: extra_extensions`) that marks up every table of the book, the Markdown tables of the
pages and the result tables the notebooks print (`batchlab.ui.tables`, raw HTML in the page), by one rule.
It changes how a table renders, never its text; book/_static/page.css holds the matching rules.

* **Each cell by its length.** A short cell (a term, a number with its unit: at most NOWRAP_WIDTH display
  columns; a header at most HEADER_NOWRAP, a cell without Chinese at most LATIN_NOWRAP) and every verdict (a column headed
  …结论) stay on one line (`bl-nowrap`). A longer cell wraps (`bl-wrap`, balanced lines) and keeps a
  minimum width (`min-width`, at most PROSE_EM em) where it holds Chinese: enough for two lines, so no
  line holds one or two characters ("未⏎复⏎现", "序列长⏎度"); Latin words wrap at spaces only.
  The last column of a table of three or more columns, where it holds prose (the glossary's 含义), is
  marked `bl-meaning`: at desk width page.css gives it room for a sentence's worth a line.
* **Words stay whole.** Inside a wrapping cell a number with its unit or range ("7%–213%", "1.62 倍",
  "3200 tokens/s") and a hyphenated name ("gpt2-xl", "ZeRO-1") sit in a `bl-keep` span (no break
  inside). A command in a code literal ("python -m batchlab plan --model gpt2-xl …") breaks only between
  options: each `--option value` is one `bl-keep` span. A long code name breaks only before a dot (a
  `<wbr>`; before an underscore too inside a segment longer than SEGMENT), never inside a word; a literal
  with Chinese in it (a message the code prints) wraps between its Chinese characters (`bl-cjk`).
* **On a phone: a table stays a table unless its cells are prose** (`phone_layout`). Each data cell carries
  its column's header (`data-label`; in a result table a `bl-label` span, which keeps the header's <sub>).
  A table whose columns cannot all fit a phone's column (the estimate: `fits_phone`) and whose cells are
  short (numbers, terms, one-line values: a comparison the reader reads across rows) is marked `bl-scroll`:
  below 768 px it scrolls sideways inside its own box with its first column fixed (the rows' names stay
  in view). Only a table with a prose cell beyond its first column (a cell that wraps and holds Chinese)
  is marked `bl-cards`: page.css shows each of its rows as a small card, every value beside its label, the
  verdict (a column headed …结论: `bl-verdict`) right under the row's name.

booktools.tables_check measures the result in the built pages (tests/test_page_tables.py).
"""
from __future__ import annotations

import html
import math
import re

from docutils import nodes
from docutils.transforms import Transform

from batchlab.ui.tables import HTML_CLASS, display_width
from booktools.layout import CJK_CLASS

NOWRAP_WIDTH = 16    # display columns (a CJK character is 2): "每秒浮点运算次数" is 16, "原文的梯度累积步数"
                     # (18) takes two lines; a verdict ("同分布，非同一次更新", 20) never does
HEADER_NOWRAP = 16   # a header up to 8 Chinese characters stays on one line ("初始配置（模型）"): two lines
                     # of a short header left a line of two characters at 1280 px ("气泡⏎（模拟器）")
LATIN_NOWRAP = 12    # a Latin cell longer than this wraps at its spaces ("number of micro-batches")
PROSE_EM = 10.0      # the widest minimum a wrapping cell asks for: 10 Chinese characters a line
SEGMENT = 16         # a code name's segment longer than this may also break before an underscore
PHONE_EM = 20.0      # what a table may need at most to stay a table on a phone (358 px at 16 px = 22.4 em,
                     # less inside an indented block such as an API entry; an estimate, so with room to spare)
VERDICT_HEADER = "结论"   # a column headed …结论 holds the verdict: a card shows it right after the row's name
PAD_EM = {"docutils": 1.0, "raw": 1.6}   # a cell's left + right padding: the theme's, ui.tables' own

KEEP = re.compile(
    r"[-+−±~≈]?\d[\d.,]*%?(?:\s?[–−-]\s?\d[\d.,]*%?)?(?:\s?(?:[A-Za-zµ]+(?:/[A-Za-z]+)?|倍))"  # number + unit
    r"|[-+−±~≈]?\d[\d.,]*%?\s?[–−-]\s?\d[\d.,]*%?"                                         # a range
    r"|[A-Za-z0-9]+(?:[-–/][A-Za-z0-9]+)+")                                                  # hyphenated name
COMMAND = re.compile(r"^python -m \S+")
CJK = re.compile(f"[{CJK_CLASS}]")
DOTTED = re.compile(r"^[\w.()\[\]=…,'\"]+$")


def em_width(text: str) -> float:
    """Width of `text` in em in the book's sans-serif face: a CJK (wide) character 1 em, any other 0.6 em."""
    text = " ".join(text.split())
    wide = display_width(text) - len(text)
    return wide + 0.6 * (len(text) - wide)


def cell_layout(text: str, header: bool = False, verdict: bool = False) -> tuple[bool, float]:
    """(stays on one line, the width in em it needs) for a cell holding `text` (a header's, or a verdict's:
    a verdict is one term, never cut)."""
    text = " ".join(text.split())
    if verdict:
        return True, em_width(text)
    # Latin words wrap only at spaces, so a Latin cell need not stay on one line to keep its words whole
    limit = HEADER_NOWRAP if header else LATIN_NOWRAP if not CJK.search(text) else NOWRAP_WIDTH
    if display_width(text) <= limit:
        return True, em_width(text)
    if not CJK.search(text):   # Latin words: lines as wide as the longest word, whatever their number
        return False, min(PROSE_EM, max(4, math.ceil(max(em_width(w) for w in text.split()))))
    # two balanced lines at most, up to PROSE_EM em a line
    return False, min(PROSE_EM, math.ceil(em_width(text) / 2 + 0.5))


def fits_phone(columns: list[list[str]], pad_em: float, headers: list[str] | None = None) -> bool:
    """Do the columns (each a list of cell texts; `headers` their headers) fit a phone's column side by
    side, each at the width its cells need?"""
    need = 0.0
    for j, cells in enumerate(columns):
        verdict = bool(headers) and headers[j].endswith(VERDICT_HEADER)
        widths = [cell_layout(c, verdict=verdict)[1] for c in cells]
        if headers:
            widths.append(cell_layout(headers[j], header=True)[1])
        need += max(widths, default=0.0) + pad_em
    return need <= PHONE_EM


def is_prose(text: str, header: bool = False) -> bool:
    """Is a cell holding `text` prose: Chinese text too long for one line (`cell_layout`)?"""
    return bool(CJK.search(text)) and not cell_layout(text, header=header)[0]


def phone_layout(columns: list[list[str]], pad_em: float, headers: list[str] | None = None) -> str:
    """How a table shows on a phone: "" (it fits), "bl-scroll" (too wide, short cells: it scrolls in its
    own box, first column fixed) or "bl-cards" (too wide, a prose cell beyond the first column: a card per
    row). A verdict column (…结论) holds terms, never prose."""
    if fits_phone(columns, pad_em, headers):
        return ""
    prose = any(is_prose(c) for j, cells in enumerate(columns[1:], start=1) for c in cells
                if not (headers and headers[j].endswith(VERDICT_HEADER)))
    return "bl-cards" if prose else "bl-scroll"


def _math_text(tex: str) -> str:
    """Roughly what a formula shows: its TeX without commands, braces and scripts' marks."""
    return re.sub(r"\\[A-Za-z]+|[{}_^\\ ]", "", tex) or "x"


def _cell_text(entry: nodes.Element) -> str:
    parts = []
    for node in entry.findall(lambda n: isinstance(n, (nodes.Text, nodes.math))):
        if isinstance(node, nodes.math):
            parts.append(_math_text(node.astext()))
        elif not isinstance(node.parent, nodes.math):
            parts.append(str(node))
    return " ".join("".join(parts).split())


# ---------------------------------------------------------------------------------------- words and commands
def keep_spans(text: str) -> list[tuple[str, bool]]:
    """`text` cut into (piece, keep whole) pieces: numbers with units or ranges and hyphenated names are
    kept whole when they hold a place the browser could break at (a space or a dash)."""
    out, at = [], 0
    for m in KEEP.finditer(text):
        if not re.search(r"[\s–−/-]", m.group()):
            continue
        if m.start() > at:
            out.append((text[at:m.start()], False))
        out.append((m.group(), True))
        at = m.end()
    if at < len(text):
        out.append((text[at:], False))
    return out


def command_groups(command: str) -> list[str]:
    """A command cut where it may break: after `python -m <module>`, then before each `--option`."""
    tokens = command.split()
    groups = [" ".join(tokens[:3])]
    for token in tokens[3:]:
        if token.startswith("--") or len(groups) == 1:
            groups.append(token)
        else:
            groups[-1] += " " + token
    return groups


def name_segments(name: str) -> list[str]:
    """A code name cut where it may break: before each dot, and before an underscore inside a segment
    longer than SEGMENT characters."""
    out = []
    for seg in re.split(r"(?=\.)", name):
        if len(seg) > SEGMENT and "_" in seg[1:]:
            out += [s for s in re.split(r"(?<=.)(?=_)", seg) if s]
        else:
            out.append(seg)
    return [s for s in out if s]


def _literal_pieces(literal: nodes.literal) -> None:
    """Rebuild a code literal of a table cell so that it breaks only where `command_groups` or
    `name_segments` allow (the literal's text is unchanged)."""
    text = literal.astext()
    if COMMAND.match(text):
        children: list[nodes.Node] = []
        for i, group in enumerate(command_groups(text)):
            if i:
                children.append(nodes.Text(" "))
            children.append(nodes.inline(group, group, classes=["bl-keep"]))
    elif CJK.search(text):
        literal["classes"].append("bl-cjk")   # printed Chinese: wraps between characters, as prose
        return
    elif DOTTED.match(text) and len(name_segments(text)) > 1:
        children = []
        for i, seg in enumerate(name_segments(text)):
            if i:
                children.append(nodes.raw("", "<wbr>", format="html"))
            children.append(nodes.Text(seg))
    else:
        return
    literal.children = []
    literal.extend(children)


def _in_code(node: nodes.Node, stop: nodes.Element) -> bool:
    """Is `node` inside a literal, a formula, raw HTML or a span already kept whole (below `stop`)?"""
    p = node.parent
    while p is not None and p is not stop:
        if isinstance(p, (nodes.literal, nodes.math, nodes.raw, nodes.FixedTextElement)) or \
                "bl-keep" in p.get("classes", []):
            return True
        p = p.parent
    return False


def _keep_words(entry: nodes.Element) -> None:
    for text in list(entry.findall(nodes.Text)):
        parent = text.parent
        if _in_code(text, entry):
            continue
        pieces = keep_spans(str(text))
        if not any(keep for _, keep in pieces):
            continue
        new = [nodes.inline(p, p, classes=["bl-keep"]) if keep else nodes.Text(p) for p, keep in pieces]
        i = next(k for k, child in enumerate(parent.children) if child is text)
        parent[i:i + 1] = new


def _keep_html(escaped: str) -> str:
    """`keep_spans` on a cell's escaped HTML text (no tags inside: batchlab.ui.tables writes plain text)."""
    return "".join(f'<span class="bl-keep">{html.escape(p, quote=False)}</span>' if keep
                   else html.escape(p, quote=False) for p, keep in keep_spans(html.unescape(escaped)))


# ---------------------------------------------------------------------------------------- docutils tables
def _style(text: str, nowrap: bool, em: float) -> tuple[str, str]:
    """The cell's class and inline style: a minimum width only where Chinese could otherwise wrap to one
    or two characters a line (a Latin cell's narrowest is its longest word, which the browser keeps)."""
    if nowrap:
        return "bl-nowrap", ""
    return "bl-wrap", (f"min-width: {em:g}em" if CJK.search(text) else "")


class TableLayout(Transform):
    """Mark up every table of a page (see the module docstring)."""
    default_priority = 890   # after booktools.sphinxext's CJKSpaces (880) has joined the cells' lines

    def apply(self, **kwargs) -> None:
        for table in list(self.document.findall(nodes.table)):
            self._docutils(table)
        for raw in list(self.document.findall(nodes.raw)):
            if "html" in raw.get("format", "").split() and f'class="{HTML_CLASS}"' in raw.astext():
                new = layout_html_table(raw.astext())
                if new != raw.astext():
                    raw.children = []
                    raw.append(nodes.Text(new))

    def _docutils(self, table: nodes.table) -> None:
        tgroup = next(iter(table.findall(nodes.tgroup)), None)
        if tgroup is None:
            return
        head = [r for part in tgroup.children if isinstance(part, nodes.thead) for r in part.children]
        body = [r for part in tgroup.children if isinstance(part, nodes.tbody) for r in part.children]
        ncols = int(tgroup.get("cols", 0))
        rows = head + body
        if not body or any(len(r.children) != ncols or any(e.get("morecols") or e.get("morerows")
                                                           for e in r.children) for r in rows):
            return  # spanning cells: leave the table as it is
        headers = [_cell_text(e) for e in head[-1].children] if head else []
        for row in rows:
            for j, entry in enumerate(row.children):
                verdict = bool(headers) and row not in head and headers[j].endswith(VERDICT_HEADER)
                text = _cell_text(entry)
                nowrap, em = cell_layout(text, header=row in head, verdict=verdict)
                cls, style = _style(text, nowrap, em)
                entry["classes"].append(cls)
                if style:
                    entry["bl_style"] = style
                if headers and row not in head:
                    entry["bl_label"] = headers[j]
                    if verdict:
                        entry["classes"].append("bl-verdict")
                for literal in list(entry.findall(nodes.literal)):
                    _literal_pieces(literal)
                if not nowrap:
                    _keep_words(entry)
                if j == ncols - 1 and row not in head and ncols > 2 and is_prose(text):
                    entry["classes"].append("bl-meaning")
        columns = [[_cell_text(r.children[j]) for r in body] for j in range(ncols)]
        phone = phone_layout(columns, PAD_EM["docutils"], headers) if headers else ""
        if phone:
            table["classes"].append(phone)


def visit_entry(self, node: nodes.entry) -> None:
    """The HTML writer's own table cell, with the column's header (`data-label`) and a minimum width."""
    type(self).visit_entry(self, node)
    extra = "".join(f' {name}="{html.escape(node[key])}"' for key, name in
                    (("bl_label", "data-label"), ("bl_style", "style")) if node.get(key))
    tag = self.body[-1]
    if extra and tag[:3] in ("<td", "<th"):
        self.body[-1] = tag[:3] + extra + tag[3:]


# ---------------------------------------------------------------------------------------- result tables
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
_CELL = re.compile(r'<(t[dh]) style="([^"]*)">(.*?)</t[dh]>', re.S)
_TAG = re.compile(r"(<[^>]+>)")


def _plain(inner: str) -> str:
    """What a cell's inner HTML reads as (a header may hold <i> and <sub>: batchlab.page.symbols)."""
    return html.unescape(_TAG.sub("", inner))


def layout_html_table(source: str) -> str:
    """The HTML `batchlab.ui.tables.Table.html()` writes, marked up by the same rules as a Markdown table:
    each cell's class and minimum width, number-with-unit spans, `bl-scroll` or `bl-cards` when it does not fit a phone (`phone_layout`),
    and each data cell's label: its column's header as written (with its <sub>), in a `bl-label` span
    that only a card shows. HTML of another shape is returned unchanged."""
    rows = [_CELL.findall(r.group(1)) for r in _ROW.finditer(source)]
    if len(rows) < 2 or any(not r or len(r) != len(rows[0]) for r in rows) or rows[0][0][0] != "th":
        return source
    headers = [inner for _, _, inner in rows[0]]
    body = rows[1:]
    columns = [[_plain(r[j][2]) for r in body] for j in range(len(headers))]

    def cell(tag: str, style: str, inner: str, label: str | None) -> str:
        text = _plain(inner)
        verdict = label is not None and _plain(label).endswith(VERDICT_HEADER)
        nowrap, em = cell_layout(text, header=tag == "th", verdict=verdict)
        cls, width = _style(text, nowrap, em)
        if verdict:
            cls += " bl-verdict"
        kept = inner if nowrap else "".join(part if part.startswith("<") else _keep_html(part)
                                            for part in _TAG.split(inner))
        if label is not None:
            # one label and one value: a card (page.css) lays the cell out as a grid of the two
            kept = f'<span class="bl-label">{label}</span><span>{kept}</span>'
        return f'<{tag} class="{cls}" style="{style}{"; " + width if width else ""}">{kept}</{tag}>'

    def row(cells, labelled: bool) -> str:
        return "<tr>" + "".join(cell(t, s, x, headers[j] if labelled else None)
                                for j, (t, s, x) in enumerate(cells)) + "</tr>"

    it = iter([row(rows[0], False), *(row(r, True) for r in body)])
    out = _ROW.sub(lambda m: next(it), source)
    phone = phone_layout(columns, PAD_EM["raw"], [_plain(h) for h in headers])
    if phone:
        out = out.replace(f'class="{HTML_CLASS}"', f'class="{HTML_CLASS} {phone}"', 1)
    return out


def setup(app):
    app.add_transform(TableLayout)
    app.add_node(nodes.entry, override=True, html=(visit_entry, None))
    # env_version: bump it when a rule changes, so an incremental build re-reads every page
    return {"version": "1", "env_version": 2, "parallel_read_safe": True, "parallel_write_safe": True}
