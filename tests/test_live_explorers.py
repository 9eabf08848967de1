"""The explorers live in the published page (issue 20): Pyodide runs the book's own Python in the
browser, so the page holds no second copy of a formula.

Without a browser: the files the page runs are byte-identical to src/ and need nothing a browser's
Python lacks; the declaration is the widgets'; any value a page can send is answered, never raised.
In Chromium (the built book served over http on 127.0.0.1, every other request refused): each
chapter with an explorer is made live, every control is moved once, and after each move the summary
must equal, word for word, what the same Python function returns for those values in this process,
and the chart must change whenever the chart the function describes changed. Pages without an
explorer load none of it; a page opened as a file says how to serve it.
"""
from __future__ import annotations

import ast
import html.parser
import io
import json
import re
import sys
import zipfile
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from batchlab.formulas.roofline import roofline_curve
from batchlab.lecture.case import CASE_STUDY
from batchlab.page import web
from batchlab.page.batch import BatchExplorer
from batchlab.page.memory import MemoryExplorer
from batchlab.page.noise import NoiseExplorer
from batchlab.page.spec import FIELD_WORDS, LIVE_CLASS
from batchlab.page.tradeoff import TradeoffExplorer
from booktools import ROOT, browser as chromium, live, live_page, render_check

TESTS_JS = ROOT / "tests" / "js"  # the tests' own page scripts (live_cache.js)
LIVE_PAGES = ["book/4.1-definition", "book/4.2-convergence", "book/4.3-memory", "book/4.4-efficiency",
              "book/4.5-case-study"]
STILL_PAGES = ["book/preface", "book/4.6-misconceptions", "book/4.7-schedules-parallelism",
               "book/4.8-batch-during-training", "book/glossary", "book/methods", "book/api", "book/instructors"]


def text(fragment: str) -> str:
    """The text a browser shows for an HTML fragment (its textContent)."""
    parts: list[str] = []
    parser = html.parser.HTMLParser(convert_charrefs=True)
    parser.handle_data = parts.append
    parser.feed(fragment)
    parser.close()
    return "".join(parts)


def _curve():
    return roofline_curve(CASE_STUDY.job.model, 280e12, 1.2e12, name="910B 下限（模型）")


def _noise() -> NoiseExplorer:
    """A small measured-looking run: the cloud shrinks as 1/√B, the last B is the whole data set."""
    sizes = [1, 2, 4, 8]
    cloud = SimpleNamespace(batch_sizes=sizes, center=[1.0, 0.0],  # the fields of measure.noise's records
                            points=[[[1 + 0.3 * k / b ** 0.5, 0.2 * (k % 3 - 1) / b ** 0.5] for k in range(-4, 5)]
                                    for b in sizes])
    stats = SimpleNamespace(batch_sizes=sizes, rel_error=[0.9, 0.6, 0.4, 0.0], rel_error_theory=[0.95, 0.62, 0.38, 0.0],
                            cosine=[0.7, 0.8, 0.9, 1.0], sq_error=[0.8, 0.36, 0.16, 0.0],
                            sq_error_theory=[0.9, 0.38, 0.14, 0.0])
    return NoiseExplorer(cloud, stats, base_batch=2, lr_rule="sqrt")


def explorers():
    return [BatchExplorer(), MemoryExplorer(), TradeoffExplorer(_curve()), _noise()]


# ----------------------------------------------------------------------------- without a browser
def test_the_page_runs_the_files_of_src_byte_for_byte():
    archive = zipfile.ZipFile(io.BytesIO(live.sources_zip()))
    assert sorted(archive.namelist()) == sorted(p.as_posix() for p in live.live_sources())
    for name in archive.namelist():
        assert archive.read(name) == (live.SRC / name).read_bytes(), name
    assert "batchlab/page/web.py" in archive.namelist()


def _imports(path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module)
    return found


def test_the_files_the_page_runs_need_only_the_standard_library_and_each_other():
    """Pyodide has no numpy, matplotlib or ipywidgets here (none is vendored): an import of one, or
    of a batchlab module left out of the zip, would break the page."""
    shipped = {p.with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__") for p in live.live_sources()}
    missing = {}
    for rel in live.live_sources():
        for module in _imports(live.SRC / rel):
            top = module.split(".")[0]
            ok = module in shipped if top == "batchlab" else top in sys.stdlib_module_names
            if not ok:
                missing.setdefault(rel.as_posix(), []).append(module)
    assert missing == {}


@pytest.mark.parametrize("explorer", explorers(), ids=lambda e: e.name)
def test_the_page_answers_what_the_notebook_shows(explorer):
    """The same context, through JSON as the page carries it, gives the same summary and chart."""
    context = json.dumps(explorer.context())
    answer = json.loads(web.start(explorer.name, context))
    panel = explorer.compute(explorer.initial_values())
    assert answer["summary_html"] == panel.summary_html and answer["error"] is None
    assert answer["chart"] == json.loads(json.dumps(panel.chart))
    assert [c["name"] for c in answer["controls"]] == [c.name for c in explorer.controls(explorer.initial_values())]


def test_the_widgets_are_made_from_the_declaration():
    from batchlab.ui.explorer_widget import ExplorerWidget
    from batchlab.ui.style import setup

    setup()  # the Chinese font, as every chapter starts
    widget = ExplorerWidget(MemoryExplorer())
    declared = widget.explorer.controls(widget.explorer.initial_values())
    assert [c.name for c in declared] == list(widget.controls)
    for control in declared:
        shown = widget.controls[control.name]
        assert shown.description == control.label
        if control.kind in ("int", "float", "slider"):
            assert (shown.min, shown.max) == (control.minimum, control.maximum)


def test_a_refused_value_is_one_line_naming_it():
    context = json.dumps(BatchExplorer().context())
    values = {**BatchExplorer().initial_values(), "micro_batch_size": "abc"}
    answer = json.loads(web.update("batch", context, json.dumps(values), "micro_batch_size"))
    assert answer["chart"] is None and answer["error"] == "微批次大小 (Micro-Batch)须是 1 到 65,536 之间的整数（现在是「abc」）"
    assert "\n" not in answer["error"] and "Traceback" not in answer["summary_html"]
    values["micro_batch_size"] = 4  # a contrary input: the same call now answers a plan
    assert json.loads(web.update("batch", context, json.dumps(values), "micro_batch_size"))["error"] is None


def python_names(message: str, explorer) -> list[str]:
    """The names of code a refusal shows a reader: the explorer's controls' names (global_batch), the job's
    derived fields (num_microbatches, n_layer), and reprs of text ('abc')."""
    controls = explorer.controls(explorer.initial_values())
    for control in controls:  # a label may hold its name's word ("dropout 概率")
        message = message.replace(control.label, "")
    names = [c.name for c in controls] + list(FIELD_WORDS)
    found = [n for n in names if re.search(rf"(?<![A-Za-z_]){n}(?![A-Za-z_])", message)]
    return found + re.findall(r"'[^']*'", message)


def unformatted_numbers(message: str) -> list[str]:
    """Whole numbers of five digits or more written without the book's thousands separators."""
    return re.findall(r"(?<![\d.,])\d{5,}(?![\d.])", message)


def test_the_wording_checks_can_fail():
    """The old refusals (issue 29) are caught: a field name, a repr, 1000000000000 beside 1,048,576."""
    memory = MemoryExplorer()
    assert python_names("配置无效：global_batch = ''：必须是 ≥ 1 的整数", memory) == ["global_batch", "''"]
    assert python_names("num_microbatches = 2：1F1B 要求", memory) == ["num_microbatches"]
    assert unformatted_numbers("global_batch = 1000000000000：必须在 1 到 1,048,576 之间") == ["1000000000000"]
    assert python_names("全局批大小须是 1 到 1,048,576 之间的整数（现在是空的）", memory) == []


# what a reader can type into a box, or a broken page send: empty, 1e12, text, a fraction, a negative number
TYPED = ["", 1e12, "abc", 2.5, -3, None]


@pytest.mark.parametrize("index", range(4), ids=lambda i: explorers()[i].name)
def test_every_refusal_uses_the_controls_label_and_the_books_numbers(index):
    """Issue 29: refusals named Python fields and reprs; each now names the control by its Chinese label and
    writes numbers as the book does, for every control and every kind of bad value."""
    explorer = explorers()[index]
    context = json.dumps(explorer.context())
    start = explorer.initial_values()
    refusals = 0
    for control in explorer.controls(start):
        for value in TYPED:
            answer = json.loads(web.update(explorer.name, context, json.dumps({**start, control.name: value}),
                                           control.name))
            if answer["error"] is None:
                continue
            refusals += 1
            error = answer["error"]
            assert error.startswith(control.label), (control.name, value, error)
            assert python_names(error, explorer) == [] and unformatted_numbers(error) == [], error
    assert refusals >= len(explorer.controls(start)) * 3
    big = json.loads(web.update(explorer.name, context, json.dumps({**start, next(iter(start)): 1e12}), next(iter(start))))
    assert "1,000,000,000,000" in big["error"] or big["error"] is None


def test_a_formulas_refusal_is_put_in_the_readers_words():
    """What the job refuses past the controls (4.1's calculator shows an indivisible batch on purpose) names
    the labels, not the fields."""
    context = json.dumps(BatchExplorer().context())
    values = {**BatchExplorer().initial_values(), "global_batch": 63}
    error = json.loads(web.update("batch", context, json.dumps(values), "global_batch"))["error"]
    assert error == "全局批大小 (Global Batch) = 63 不能被 微批次大小 (Micro-Batch) × 数据并行度 (DP) = 2 × 2 = 4 整除"
    assert python_names(error, BatchExplorer()) == []


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9), st.floats(allow_nan=True),
                 st.text(max_size=8), st.lists(st.integers(), max_size=2))


@settings(max_examples=150, deadline=None)
@given(index=st.integers(0, 3), name_index=st.integers(0, 20), value=JUNK)
def test_any_value_the_page_sends_is_answered(index, name_index, value):
    explorer = explorers()[index]
    values = explorer.initial_values()
    names = list(values)
    changed = names[name_index % len(names)]
    values[changed] = value
    answer = json.loads(web.update(explorer.name, json.dumps(explorer.context()), json.dumps(values), changed))
    assert (answer["error"] is None) == (answer["chart"] is not None)


NOT_OBJECTS = ["null", "[]", "1", "-2.5", "true", '"memory"', '[{"micro_batch_size": 4}]', "", "{", "NaN-ish"]
"""JSON text that holds no object (or no JSON at all): what a broken page, an old cached script or a reader's
console could send in place of the values or the context."""


def _one_line(answer: dict) -> str:
    """The refusal's line: no chart, no traceback, one Chinese line naming what was wrong."""
    error = answer["error"]
    assert answer["chart"] is None and isinstance(error, str) and "\n" not in error, answer
    assert any("\u4e00" <= ch <= "\u9fff" for ch in error) and "Traceback" not in answer["summary_html"], error
    json.dumps(answer, allow_nan=False)  # what the page parses
    return error


@pytest.mark.parametrize("text", NOT_OBJECTS)
@pytest.mark.parametrize("index", range(4), ids=lambda i: explorers()[i].name)
def test_values_that_are_not_an_object_answer_one_line(index, text):
    explorer = explorers()[index]
    context = json.dumps(explorer.context())
    for changed in explorer.initial_values():
        error = _one_line(json.loads(web.update(explorer.name, context, text, changed)))
        assert error.startswith("values = ")


@pytest.mark.parametrize("text", [*NOT_OBJECTS, "{}", '{"job": 1, "measured": 2, "curve": 3, "cloud": 4, "start": 5}'])
@pytest.mark.parametrize("index", range(4), ids=lambda i: explorers()[i].name)
def test_a_context_that_is_not_the_explorers_answers_one_line(index, text):
    explorer = explorers()[index]
    values = json.dumps(explorer.initial_values())
    for answer in (json.loads(web.start(explorer.name, text)),
                   json.loads(web.update(explorer.name, text, values, next(iter(explorer.initial_values()))))):
        assert _one_line(answer).startswith("context") and answer["controls"] is None


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                      max_size=3), max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(index=st.integers(0, 3), values=JSON_VALUES, context=JSON_VALUES, changed=st.text(max_size=12))
def test_any_json_the_page_sends_is_answered(index, values, context, changed):
    """Any JSON as the values, or as the context, with any control name: an answer, or one line."""
    explorer = explorers()[index]
    good_context, good_values = json.dumps(explorer.context()), json.dumps(explorer.initial_values())
    for answer in (web.update(explorer.name, good_context, json.dumps(values), changed),
                   web.update(explorer.name, json.dumps(context), good_values, changed),
                   web.start(explorer.name, json.dumps(context))):
        answer = json.loads(answer)
        if answer["error"] is not None:
            _one_line(answer)
        else:
            assert answer["chart"] is not None


# ----------------------------------------------------------------------------- in Chromium
def _moves(explorer, values: dict, control) -> list:
    if control.options:  # from the far end: a move to the chapter's neighbour (gpt2-large, not tiny, whose
        # bytes print as 0.00 GiB and hide the next control's change)
        return [v for _, v in reversed(control.options) if v != values[control.name]]
    v = values[control.name]
    step = 1 if control.kind in ("int", "slider") else (control.step or 0.5)
    raw = [v * 2, v // 2 if control.kind in ("int", "slider") else v / 2, v + step, v - step, control.minimum]
    return [x for x in raw if control.minimum <= x <= control.maximum and x != v]


def _answer(name: str, context: str, values: dict, changed: str) -> dict:
    return json.loads(web.update(name, context, json.dumps(values), changed))


def _move_for(name, context, values, control) -> tuple[object, dict]:
    """A new value for ``control`` that the explorer accepts and that changes what it shows."""
    explorer = web.EXPLORERS[name].from_context(json.loads(context))
    now = _answer(name, context, values, control.name)
    for value in _moves(explorer, values, control):
        answer = _answer(name, context, {**values, control.name: value}, control.name)
        if answer["error"] is None and (answer["summary_html"], answer["chart"]) != (now["summary_html"], now["chart"]):
            return value, answer
    raise AssertionError(f"{name}.{control.name}: no move from {values[control.name]!r} changes anything")


@pytest.fixture(scope="module")
def served(built):
    with chromium.launch(loopback=True) as b, chromium.serve(built.html) as origin:
        yield b, origin


@contextmanager
def opened(served, doc: str, requested: list[str], init_script: str | None = None):
    """A tab with the served page ``doc`` loaded in a fresh context (``requested`` collects its requests)."""
    b, origin = served
    context = chromium.served_context(b, origin, requested)
    if init_script:
        context.add_init_script(init_script)
    try:
        tab = context.new_page()
        tab.errors = []
        tab.on("pageerror", lambda e: tab.errors.append(str(e)))
        tab.goto(f"{origin}/{doc}.html", wait_until="load")
        yield tab
    finally:
        context.close()


@pytest.mark.slow  # builds the book and runs Chromium, as tests/test_html.py
@pytest.mark.parametrize("doc", LIVE_PAGES)
def test_every_control_recomputes_with_the_books_python(served, doc):
    requested: list[str] = []
    with opened(served, doc, requested) as tab:
        names = live_page.explorer_names(tab)
        assert names, f"{doc}: no live explorer"
        for i, name in enumerate(names):
            live_page.make_live(tab, i)
            ctx = tab.locator(f".{LIVE_CLASS}").nth(i).get_attribute("data-context")
            explorer = web.EXPLORERS[name].from_context(json.loads(ctx))
            values = explorer.initial_values()
            assert live_page.read(tab, i)["summary"] == text(explorer.compute(values).summary_html)
            for control_name in [c.name for c in explorer.controls(values)]:
                control = next(c for c in explorer.controls(values) if c.name == control_name)
                if control.options and len(control.options) == 1:
                    continue  # one value makes a job here (gpt2-large over 16 stages: one chunk per device)
                before = live_page.read(tab, i)
                previous_chart = _answer(name, ctx, values, control_name)["chart"]
                value, expected = _move_for(name, ctx, values, control)
                live_page.set_control(tab, i, control.as_record(), value)
                shown = live_page.read(tab, i)
                assert shown["summary"] == text(expected["summary_html"]), (doc, name, control_name, value)
                if expected["chart"] != previous_chart:
                    assert shown["chart"] != before["chart"], (doc, name, control_name, "the figure did not change")
                values = expected["values"]
        assert [e for e in tab.errors if not render_check.is_noise(e)] == []
    assert [u for u in requested if u.startswith("refused:")] == []


@pytest.mark.slow
def test_the_runtime_is_fetched_when_the_reader_nears_an_explorer_not_before(served):
    """A reader who reads the top of 4.3 downloads none of the runtime (issue 29: ≤ 2 MB before touching an
    explorer); scrolling to within a few screens of it fetches it, so it is live soon after it is in view."""
    requested: list[str] = []
    with opened(served, "book/4.3-memory", requested) as tab:
        tab.wait_for_timeout(2000)
        assert not [u for u in requested if "/_static/live/" in u]
        where = tab.evaluate(chromium.script("explorer_top"), 0)
        tab.evaluate(chromium.script("scroll_to"), where["top"] - 3 * where["screen"])
        tab.wait_for_function(chromium.script("resource_loaded"), arg="pyodide.asm.wasm", timeout=60_000)
        assert tab.locator(".bl-live").first.get_attribute("data-state") == "idle"  # fetched, not yet shown
        live_page.make_live(tab, 0)
        assert not tab.locator(".bl-frozen").first.is_visible()  # the live explorer replaced it


@pytest.mark.slow
@pytest.mark.parametrize("doc", STILL_PAGES)
def test_a_page_without_an_explorer_loads_no_pyodide(served, doc):
    requested: list[str] = []
    with opened(served, doc, requested) as tab:
        tab.wait_for_timeout(1500)  # the widget manager has drawn whatever it draws
    assert requested and not [u for u in requested if "/_static/live" in u or live.LIVE_SCRIPT in u]


@pytest.mark.slow
def test_a_page_opened_as_a_file_says_how_to_serve_it(built, served):
    b, _origin = served
    blocked: list[str] = []
    context = chromium.offline_context(b, blocked)  # file:// only
    try:
        tab = context.new_page()
        tab.goto((built.html / "book" / "4.3-memory.html").as_uri(), wait_until="load")
        tab.wait_for_selector(".bl-live-status", state="attached", timeout=60_000)
        notice = tab.locator(f".{LIVE_CLASS}").first
        assert notice.is_visible()  # untouched, the page (and its print) keeps the notebook's notice
        tab.locator(".bl-frozen .bl-frozen-control").first.click()  # its inert control: the touch lands on the row
        status = tab.locator(".bl-live-status").first
        assert "python -m http.server" in status.inner_text() and not notice.is_visible()
        assert tab.locator(".bl-frozen").first.is_visible()  # the frozen explorer stays
        assert not [u for u in blocked if "pyodide" in u]
    finally:
        context.close()


@pytest.mark.slow
def test_without_webassembly_the_page_says_so(served):
    requested: list[str] = []
    # a browser without WebAssembly, as some locked-down ones are
    with opened(served, "book/4.1-definition", requested, "delete globalThis.WebAssembly") as tab:
        assert tab.evaluate("typeof WebAssembly") == "undefined"
        tab.wait_for_selector(".bl-live-status", state="attached", timeout=60_000)
        tab.locator(".bl-frozen .bl-frozen-control").first.click()
        assert "不支持 WebAssembly" in tab.locator(".bl-live-status").first.inner_text()
        assert tab.locator(".bl-frozen").first.is_visible()
    assert not [u for u in requested if "pyodide" in u]


def test_the_service_worker_is_named_by_the_runtime_and_the_files(tmp_path):
    """The build writes book/_js/live-sw.js to the site's root with its cache named by the pinned runtime and
    the Python files the page runs: new files, a new cache (the old one is deleted as the new worker starts)."""
    one = live.write_service_worker(tmp_path, b"zip one").read_text(encoding="utf-8")
    assert live.write_service_worker(tmp_path, b"zip one").read_text(encoding="utf-8") == one
    two = live.write_service_worker(tmp_path, b"zip two").read_text(encoding="utf-8")
    name = re.search(r'CACHE = "bl-live-([0-9a-f]{16})"', one)
    assert name and name.group(1) not in two and "RUNTIME_VERSION" not in one
    assert (tmp_path / live.SERVICE_WORKER).is_file()


@pytest.mark.slow
def test_the_next_explorer_page_finds_the_runtime_kept(served):
    """issue 42: a reader who made 4.1's explorer live finds Pyodide, its standard library, ECharts and the
    book's files in the service worker's cache when opening 4.3, which goes live from there."""
    requested: list[str] = []
    with opened(served, "book/4.1-definition", requested) as tab:
        live_page.make_live(tab, 0)
        kept = tab.evaluate(chromium.script("live_cache", TESTS_JS))
        assert kept["controlled"] and len(kept["caches"]) == 1
        assert {"pyodide.asm.wasm", "python_stdlib.zip", "echarts.common.min.js", live.SOURCES_ZIP} <= set(kept["files"])
        b, origin = served
        tab.goto(f"{origin}/book/4.3-memory.html", wait_until="load")
        assert tab.evaluate(chromium.script("live_cache", TESTS_JS))["controlled"]
        live_page.make_live(tab, 0)
    assert [u for u in requested if u.startswith("refused:")] == []


@pytest.mark.slow
def test_a_page_without_an_explorer_registers_no_service_worker(served):
    requested: list[str] = []
    with opened(served, "book/preface", requested) as tab:
        tab.wait_for_timeout(1000)
        kept = tab.evaluate(chromium.script("live_cache", TESTS_JS))
    assert not kept["controlled"] and kept["caches"] == [] and not [u for u in requested if live.SERVICE_WORKER in u]
