"""The explorers' entry for the published page: book/_js/live.js calls these two functions through
Pyodide, with JSON text in and JSON text out, so the page holds no formula and no second copy of one.

``start(name, context, scheme)`` answers the controls and the first panel; ``update(name, context, values,
changed, scheme)`` the panel after the control ``changed`` moved (with the values that control moved in turn,
named in a note above the summary: :meth:`Explorer.moved`); each draws its chart for the page's colour scheme
(``"light"`` or ``"dark"``: :func:`batchlab.page.colours.in_scheme`), and ``recolour(chart, scheme)`` redraws a
light chart for a page whose scheme changed (the reader switched it, or the phone did at dusk).
Whatever the page sends is checked by the explorer's own rules (:meth:`Explorer.check_values`); a refused
value answers the rule's wording, never a traceback.
"""
from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

from batchlab.page.colours import SCHEMES, in_scheme
from batchlab.page.spec import Explorer, Panel, render_error_html

__all__ = ["EXPLORERS", "declared_explorers", "answer", "start", "update", "recolour"]


def declared_explorers() -> dict[str, type[Explorer]]:
    """Every explorer declared in this folder, by its name (the name its marker carries): each module is
    imported and its :class:`Explorer` subclasses collected, so a new explorer is one new module and no list."""
    found: dict[str, type[Explorer]] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{__package__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Explorer) and value is not Explorer \
                    and value.__module__ == module.__name__:
                if value.name in found or value.name != info.name:
                    raise RuntimeError(f"{value.__qualname__}.name = {value.name!r}：每个探索器的名字须与其模块同名且唯一")
                found[value.name] = value
    return found


EXPLORERS: dict[str, type[Explorer]] = declared_explorers()
"""Every explorer the page can run, by the name its marker carries."""


def _scheme(scheme: object) -> str:
    """The page's colour scheme as sent; anything else draws the light chart (the declared one)."""
    return scheme if scheme in SCHEMES else "light"


def answer(explorer: Explorer | None, values: object, panel: Panel, scheme: str = "light") -> dict:
    """What the page shows: the controls (with their current values), the summary and the chart (drawn for
    ``scheme``; beside a chart of another scheme, ``light_chart`` is the declared one, which :func:`recolour`
    redraws when the page's scheme changes). Without an explorer (its context refused) or an object of values,
    no controls: the page keeps the ones it has."""
    try:
        controls = [c.as_record() for c in explorer.controls(values)] if explorer and isinstance(values, dict) else None
    except ValueError:
        controls = None
    shown = {"values": values, "controls": controls, "summary_html": panel.summary_html,
             "chart": in_scheme(panel.chart, _scheme(scheme)), "error": panel.error}
    if _scheme(scheme) != "light":
        shown["light_chart"] = panel.chart
    return shown


def _refused(explorer: Explorer | None, values: object, message: str) -> str:
    """The answer to a refused value: its rule's one line, as summary and error, and no chart."""
    return json.dumps(answer(explorer, values, Panel(render_error_html(message), error=message)), ensure_ascii=False)


def _not_json(constant: str) -> None:
    raise ValueError(constant)


def _object(name: str, text: str) -> dict:
    """The JSON object ``text`` holds; else ValueError in the book's wording (the page sends what it was given).
    NaN and Infinity are not JSON (a browser's JSON.stringify never writes them): echoed back, the page could
    not parse the answer."""
    try:
        value = json.loads(text, parse_constant=_not_json)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {str(text)[:40]!r}：不是 JSON 文本") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name} = {json.dumps(value, ensure_ascii=False)[:40]}：必须是 JSON 对象（名字 → 值）")
    return value


_MADE: dict[tuple[str, str], Explorer] = {}
"""The explorers made from the contexts the page sent, by (name, context text): a page sends the same context
with every change, and an explorer remembers the jobs it has made (the memory explorer's options try dozens)."""


def _explorer(name: str, context_json: str) -> Explorer:
    if not isinstance(name, str) or name not in EXPLORERS:
        raise ValueError(f"explorer = {name!r}：可选 {', '.join(EXPLORERS)}")
    key = (name, context_json) if isinstance(context_json, str) else None
    if key in _MADE:
        return _MADE[key]
    explorer = _make(name, context_json)
    if key is not None:
        if len(_MADE) >= 8:  # a page holds a few explorers
            _MADE.clear()
        _MADE[key] = explorer
    return explorer


def _make(name: str, context_json: str) -> Explorer:
    context = _object("context", context_json)
    try:
        return EXPLORERS[name].from_context(context)
    except KeyError as err:
        raise ValueError(f"context：不是 {name} 探索器的上下文（缺少 {str(err)[:40]}）") from None
    except (TypeError, AttributeError, IndexError):  # a field of the wrong kind
        raise ValueError(f"context：不是 {name} 探索器的上下文（有字段的类型不对）") from None


def start(name: str, context_json: str, scheme: str = "light") -> str:
    """The explorer's controls and first panel, as JSON text, its chart drawn for the page's ``scheme`` (a
    refused context: its one line, no controls)."""
    try:
        explorer = _explorer(name, context_json)
    except ValueError as err:
        return _refused(None, None, str(err))
    values = explorer.initial_values()
    return json.dumps(answer(explorer, values, explorer.compute(values), scheme), ensure_ascii=False)


def update(name: str, context_json: str, values_json: str, changed: str, scheme: str = "light") -> str:
    """The panel after the control ``changed`` moved to the value in ``values_json``, as JSON text; a refused
    context, values that are not a JSON object, or a refused value answer their rule's one line."""
    explorer = values = None
    try:
        explorer = _explorer(name, context_json)
        values = _object("values", values_json)
        values, note = explorer.moved(values, changed)
    except ValueError as err:  # the checks' one Chinese line
        return _refused(explorer, values, str(err))
    except (KeyError, TypeError) as err:  # an explorer's follow() that did not check: still one line, no traceback
        return _refused(explorer, values, f"values：{changed!r} 改变后这组值无法计算（{type(err).__name__}: {err}）")
    panel = explorer.compute(values)
    panel.summary_html = note + panel.summary_html  # what else moved, above the summary, as the notebook shows it
    return json.dumps(answer(explorer, values, panel, scheme), ensure_ascii=False)


def recolour(chart_json: str, scheme: str) -> str:
    """A light chart (an answer's ``light_chart``, as JSON text) drawn for ``scheme``, as JSON text; text
    that is not a chart answers ``null`` (the page keeps what it shows)."""
    try:
        chart = json.loads(chart_json, parse_constant=_not_json)
    except (TypeError, ValueError):
        return "null"
    return json.dumps(in_scheme(chart, _scheme(scheme)) if isinstance(chart, dict) else None, ensure_ascii=False)
