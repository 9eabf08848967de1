"""The notebook's rendering of an explorer's declared controls (:class:`batchlab.page.spec.Control`), for
:class:`batchlab.ui.explorer_widget.ExplorerWidget`: one ipywidget per control, and the line each explorer shows above its controls, which also carries the
explorer's declaration to the published page (book/_js/live.js makes the live explorer from it)."""
from __future__ import annotations

import html
import json

import ipywidgets as widgets

from batchlab.page.spec import LIVE_CLASS, Control, Explorer

__all__ = ["make_widget", "set_options", "KERNEL_NOTICE_HTML", "kernel_notice"]

KERNEL_NOTICE_HTML = (
    "这是一个交互控件：在运行中的 Python 内核里，改动控件就会重新计算和画图。在网上发布的本书页面里，"
    "浏览器会在你第一次碰到控件时自己启动 Python（Pyodide）重新计算；离线打开的 HTML 文件或 PDF 里它只显示默认状态。"
    "也可以点页面顶部的火箭图标，选 Binder 或 Colab 在线运行本章；或在本地克隆仓库后"
    "<code>pip install -e .</code>，用 Jupyter 打开 <code>book/</code> 下本章的笔记本，从头运行。"
)
"""What every explorer says above its controls."""

_NOTICE_STYLE = "font-size:90%;color:#555;border-left:3px solid #1f77b4;padding:2px 8px;margin:0 0 6px 0"


def kernel_notice(explorer: Explorer | None = None) -> widgets.HTML:
    """The explorer's first child: :data:`KERNEL_NOTICE_HTML`, marked with the explorer's name and
    context when the published page can run it live (``explorer`` given)."""
    marker = ""
    if explorer is not None:
        context = html.escape(json.dumps(explorer.context(), ensure_ascii=False), quote=True)
        marker = f' class="{LIVE_CLASS}" data-explorer="{explorer.name}" data-context="{context}"'
    return widgets.HTML(f'<div{marker} style="{_NOTICE_STYLE}">{KERNEL_NOTICE_HTML}</div>')


def _options(control: Control) -> list:
    """The widget's options: the bare values where each label is just the value written out."""
    if all(label == str(value) for label, value in control.options):
        return [value for _, value in control.options]
    return list(control.options)


def make_widget(control: Control, value: object, style: dict | None = None,
                layout: widgets.Layout | None = None) -> widgets.Widget:
    """The ipywidget for ``control``, set to ``value``."""
    common = {"description": control.label, "style": style or {}}
    if layout is not None:
        common["layout"] = layout
    if control.kind == "int":
        return widgets.BoundedIntText(value=value, min=control.minimum, max=control.maximum, **common)
    if control.kind == "float":
        return widgets.BoundedFloatText(value=value, min=control.minimum, max=control.maximum, step=control.step,
                                        **common)
    if control.kind == "slider":
        return widgets.IntSlider(value=value, min=control.minimum, max=control.maximum, continuous_update=False,
                                 **common)
    if control.kind == "steps":
        return widgets.SelectionSlider(options=_options(control), value=value, continuous_update=False,
                                       **common)
    if control.kind == "buttons":
        return widgets.ToggleButtons(options=_options(control), value=value, **common)
    return widgets.Dropdown(options=_options(control), value=value, **common)


def set_options(widget: widgets.Widget, control: Control, value: object) -> None:
    """Give ``widget`` the options ``control`` now declares (a new model's sequence lengths) and ``value``."""
    if control.options and list(widget.options) != _options(control):
        widget.options = _options(control)
    widget.value = value
