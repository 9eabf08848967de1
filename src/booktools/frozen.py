"""The frozen explorers as plain HTML, drawn at build time from the widget state each notebook saved.

A published page shows every explorer twice over its life: frozen (its controls at their starting values,
the summary and the default figure the notebook drew) until the reader's browser has started Python, then
live (book/_js/live.js, src/booktools/live.py). myst-nb draws the frozen view in the browser through
require.js and the ipywidgets HTML manager (``embed-amd.js``, 4.4 MB), which a phone on a mobile link waited
seconds for before it showed any text (issue 29: first contentful paint 7.9 s). This Sphinx extension
writes the same view as HTML instead: each widget-view output becomes a ``<div class="bl-frozen">`` holding

* every HTML widget's HTML (the explorer's notice, with the marker live.js looks for, and its summary);
* every control as an inert form control with its label and value (sliders with their value beside them,
  drop-downs, buttons, number boxes), ``disabled``: nothing moves before the live explorer replaces it;
* every figure an Output widget saved, as an ``<img>`` file in ``_images/`` with its size (booktools.fast_pages
  makes it lazy below a page's first section; the checks and the printed PDF load every image first);
  a figure whose output carries a phone drawing (batchlab.ui.style.display_drawings: the explorer's first
  drawing) in the ``<picture>`` of a chapter figure (booktools.picture), its phone PNG beside the desk one.

and the page carries no widget state and loads no widget manager (``nb_ipywidgets_js: {}`` in
_config.yml). A widget model this module cannot draw fails the build, so a frozen view never silently
loses a control.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import struct
from pathlib import Path

from docutils import nodes

from batchlab.ui.style import PHONE_METADATA
from booktools.picture import PICTURE_END, picture_start, png_size
from booktools.toc import WIDGET_STATE, WIDGET_VIEW

__all__ = ["FROZEN_CLASS", "frozen_html", "widget_state", "FrozenImage", "setup"]

FROZEN_CLASS = "bl-frozen"
"""The class of a frozen explorer's outer ``<div>`` (book/_js/live.js replaces it, live.css lays it out)."""
IMAGE_FOLDER = "_images"
_VIEW_SCRIPT = re.compile(rf'^<script type="{re.escape(WIDGET_VIEW)}">(.*)</script>$', re.S)


class FrozenImage:
    """A figure a frozen view shows: its PNG bytes and the file name it is written under."""

    def __init__(self, png: bytes) -> None:
        self.png = png
        self.name = f"frozen-{hashlib.sha256(png).hexdigest()[:16]}.png"
        self.width, self.height = struct.unpack(">II", png[16:24])  # the PNG's IHDR


def widget_state(notebook: dict) -> dict:
    """The widget models a notebook saved, by model id (empty when it saved none)."""
    return (notebook.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}) or {}).get("state", {}) or {}


def _ref(value: object) -> str:
    return str(value).removeprefix("IPY_MODEL_")


def _label(text: str) -> str:
    return f'<span class="bl-frozen-label">{html.escape(text)}</span>' if text else ""


def _control(kind: str, label: str, body: str, shown: str | None = None) -> str:
    readout = f'<output class="bl-frozen-value">{html.escape(shown)}</output>' if shown is not None else ""
    return f'<div class="bl-frozen-control" data-kind="{kind}">{_label(label)}{body}{readout}</div>'


def _number(value: object) -> str:
    return json.dumps(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def frozen_html(state: dict, model_id: str, images: list[FrozenImage], image_uri: str = "") -> str:
    """The HTML of the widget view ``model_id`` drawn from the saved ``state`` (model id → model), its figures
    appended to ``images`` and referred to as ``image_uri`` + file name. ValueError names a model this
    module cannot draw."""
    model = state.get(model_id)
    if model is None:
        raise ValueError(f"组件 {model_id} 没有保存的状态：笔记本需要重新执行（scripts/execute-notebooks.sh）")
    name, s = model.get("model_name", ""), model.get("state", {})
    label = s.get("description", "") or ""
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"):
        inner = "".join(frozen_html(state, _ref(c), images, image_uri) for c in s.get("children", []))
        return f'<div class="bl-frozen-{"row" if name == "HBoxModel" else "box"}">{inner}</div>'
    if name in ("HTMLModel", "HTMLMathModel"):
        return f'<div class="bl-frozen-html">{_label(label)}{s.get("value", "")}</div>'
    if name == "LabelModel":
        return f'<div class="bl-frozen-html">{html.escape(s.get("value", ""))}</div>'
    if name in ("IntSliderModel", "FloatSliderModel"):
        value = s.get("value")
        body = (f'<input type="range" disabled min="{_number(s.get("min"))}" max="{_number(s.get("max"))}" '
                f'step="{_number(s.get("step"))}" value="{_number(value)}" aria-label="{html.escape(label)}">')
        return _control("slider", label, body, str(value))
    if name in ("SelectionSliderModel", "SelectionRangeSliderModel"):
        labels, index = s.get("_options_labels", []), s.get("index", 0)
        body = (f'<input type="range" disabled min="0" max="{max(len(labels) - 1, 0)}" step="1" value="{index}" '
                f'aria-label="{html.escape(label)}">')
        return _control("steps", label, body, labels[index] if labels else "")
    if name in ("DropdownModel", "SelectModel", "RadioButtonsModel"):
        labels, index = s.get("_options_labels", []), s.get("index")
        options = "".join(f'<option{" selected" if i == index else ""}>{html.escape(text)}</option>'
                          for i, text in enumerate(labels))
        return _control("choice", label, f'<select disabled aria-label="{html.escape(label)}">{options}</select>')
    if name == "ToggleButtonsModel":
        labels, index = s.get("_options_labels", []), s.get("index")
        buttons = "".join(f'<button type="button" disabled aria-pressed="{str(i == index).lower()}">'
                          f"{html.escape(text)}</button>" for i, text in enumerate(labels))
        return _control("buttons", label, f'<div class="bl-frozen-buttons" role="group" '
                                          f'aria-label="{html.escape(label)}">{buttons}</div>')
    if name in ("IntTextModel", "BoundedIntTextModel", "FloatTextModel", "BoundedFloatTextModel"):
        body = (f'<input type="number" disabled value="{_number(s.get("value"))}" '
                f'aria-label="{html.escape(label)}">')
        return _control("number", label, body)
    if name == "OutputModel":
        return f'<div class="bl-frozen-output">{"".join(_output(o, images, image_uri) for o in s.get("outputs", []))}</div>'
    raise ValueError(f"冻结视图画不了组件 {model_id}（{name}）：在 booktools/frozen.py 里加上它的画法")


def _output(output: dict, images: list[FrozenImage], image_uri: str) -> str:
    data = output.get("data", {})
    if "image/png" in data:
        image = FrozenImage(base64.b64decode(data["image/png"]))
        images.append(image)
        alt = html.escape(data.get("text/plain", "") if not str(data.get("text/plain", "")).startswith("<") else "")
        img = (f'<img class="bl-frozen-figure" src="{image_uri}{image.name}" width="{image.width}" '
               f'height="{image.height}" decoding="async" alt="{alt or "探索器默认状态的图"}">')
        phone = ((output.get("metadata") or {}).get(PHONE_METADATA) or {}).get("image/png")
        if not phone:
            return img
        small = FrozenImage(base64.b64decode(phone))
        images.append(small)
        return picture_start(f"{image_uri}{small.name}", *png_size(small.png)) + img + PICTURE_END
    if "text/html" in data:
        return "".join(data["text/html"]) if isinstance(data["text/html"], list) else data["text/html"]
    text = output.get("text") or data.get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else text
    return f"<pre>{html.escape(text)}</pre>" if text else ""


# ----------------------------------------------------------------------------- Sphinx
def _freeze(app, doctree) -> None:
    """Each widget view of a notebook page becomes its frozen HTML; the page embeds no widget state."""
    docname = app.env.docname
    path = Path(app.env.doc2path(docname))
    views = [n for n in doctree.findall(nodes.raw) if _VIEW_SCRIPT.match(n.astext().strip())]
    if path.suffix != ".ipynb" or not views:
        return
    state = widget_state(json.loads(path.read_text(encoding="utf-8")))
    depth = docname.count("/")
    images: list[FrozenImage] = []
    for node in views:
        model_id = json.loads(_VIEW_SCRIPT.match(node.astext().strip()).group(1))["model_id"]
        body = frozen_html(state, model_id, images, "../" * depth + IMAGE_FOLDER + "/")
        node.parent.replace(node, nodes.raw("", f'<div class="{FROZEN_CLASS}">{body}</div>', format="html"))
    folder = Path(app.outdir) / IMAGE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for image in images:
        (folder / image.name).write_bytes(image.png)
    try:  # myst-nb stored the state as a script for this page; without views nothing reads it
        from myst_nb.sphinx_ import NbMetadataCollector

        NbMetadataCollector.get_js_files(app.env, docname).pop("ipywidgets_state", None)
    except (ImportError, KeyError):
        pass


def setup(app):
    app.connect("doctree-read", _freeze)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
