"""A live kernel in a real browser: chapter 4.3's memory explorer answers its controls.

The static checks (nbval, the HTML build) never talk to a kernel, so they cannot see a widget that
renders once but ignores its controls. This test starts JupyterLab on 127.0.0.1 (random free port
and token) over a temporary copy of the chapter, opens it in headless Chromium driven by Playwright,
runs all cells, then changes the explorer's recompute dropdown and moves its sequence-length slider
with the keyboard, and asserts that both the figure (the PNG in the ``<img>``) and the summary text
changed each time, to a valid configuration. No cell may end in an error.

Isolation: the server serves a temporary root (it autosaves there, never into ``book/``); Jupyter's
config, data, runtime and IPython directories are temporary too, and the only kernelspec it sees runs
``.venv/bin/python``. The page may not reach anything but 127.0.0.1: every other request is aborted
and recorded, and the test fails if there is one. The server (and its kernels) are stopped in the
fixture's teardown whatever happened.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import psutil
import pytest

from batchlab.measure.pipeline_distributed import free_port
from batchlab.page.spec import render_error_html

from booktools import ROOT, browser as chromium  # booktools.browser: the project's one Chromium launch

pytestmark = pytest.mark.slow

VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
JUPYTER_LAB = ROOT / ".venv" / "bin" / "jupyter-lab"
JS = ROOT / "tests" / "js"  # the scripts this test runs in JupyterLab's page
CHAPTER = "book/4.3-memory.ipynb"  # the memory explorer: the richest widget (dropdowns, sliders, figure, summary)
# The controls moved, by their names in the memory explorer's controls (the page is searched for their labels).
# Sequence length one step down is valid from the default (1024) on; a micro-batch step is not (3 does
# not divide the case study's batch, and the explorer then rightly keeps its last figure).
DROPDOWN, SLIDER, SLIDER_KEY = "recompute", "seq_len", "ArrowLeft"
PNG_PREFIX = "data:image/png;base64,"
INVALID_MARK = re.sub(r"<[^>]+>", "", render_error_html("")).strip()  # what an invalid configuration shows
# Limits for a hang, not speed budgets: "run all" takes ~30–90 s on a loaded 2-core machine (the
# chapter trains tiny models), as long as a cell may take under scripts/test.sh.
SERVER_START_S = 60
RUN_ALL_S = 300
CHANGE_S = 30

# JupyterLab's own outbound traffic, switched off: the news feed, PyPI's "new version" check and the
# extension manager's PyPI search (all fetched by the server, where the browser's filter cannot see them).
LAB_OFFLINE_ARGS = (
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
)
# Every cell stays in the DOM (Lab 4 otherwise may detach off-screen cells from it).
LAB_USER_SETTINGS = {"@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}


def write_kernelspec(data_dir: Path) -> None:
    """The only ``python3`` kernel the server sees: this project's .venv, whatever the user has."""
    spec = data_dir / "kernels" / "python3"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [str(VENV_PYTHON), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (batchlab .venv)", "language": "python",
    }), encoding="utf-8")


def write_lab_settings(config_dir: Path) -> None:
    for plugin, settings in LAB_USER_SETTINGS.items():
        package, name = plugin.rsplit("/", 1)
        path = config_dir / "lab" / "user-settings" / package / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings), encoding="utf-8")


def stop(server: subprocess.Popen, timeout: float = 15) -> None:
    """Stop the server and every process it started (kernels run in sessions of their own)."""
    try:
        children = psutil.Process(server.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    try:
        os.killpg(server.pid, signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
        server.wait(timeout)
    except ProcessLookupError:  # already gone
        pass
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout)
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(children, timeout=timeout)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """JupyterLab on 127.0.0.1 serving a temporary copy of the chapter alone (it reads nothing beside
    itself, as a student's copy has nothing beside it); yields its URL, token, log."""
    if not VENV_PYTHON.is_file():
        pytest.fail(f"需要 {VENV_PYTHON}：先运行 bash scripts/setup-env.sh test")
    base = tmp_path_factory.mktemp("live-kernel")
    root, home = base / "root", base / "jupyter"
    (root / CHAPTER).parent.mkdir(parents=True)
    shutil.copy(ROOT / CHAPTER, root / CHAPTER)
    for name in ("config", "data", "runtime", "ipython"):
        (home / name).mkdir(parents=True)
    write_kernelspec(home / "data")
    write_lab_settings(home / "config")
    env = {**os.environ,
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data"),
           "JUPYTER_PATH": str(home / "data"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "IPYTHONDIR": str(home / "ipython")}
    port, token = free_port(), secrets.token_hex(16)
    log = base / "server.log"
    command = [str(JUPYTER_LAB), "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True", *LAB_OFFLINE_ARGS]
    if os.geteuid() == 0:  # CI runs as root (setup-env.sh installs Chromium with apt there)
        command.append("--allow-root")
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # its own process group, killed as one
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"JupyterLab 退出了（返回码 {server.returncode}）：\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab 在 {SERVER_START_S} s 内没有响应 {url}：\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield {"url": url, "token": token, "root": root, "log": log}
    finally:
        stop(server)


@pytest.fixture(scope="module")
def browser_page(lab: dict) -> Iterator[tuple]:
    """A headless Chromium page whose requests may only go to 127.0.0.1; yields (page, blocked)."""
    blocked: list[str] = []

    def local(url: str) -> bool:
        return urlsplit(url).hostname == "127.0.0.1"

    def abort(route) -> None:
        blocked.append(route.request.url)
        route.abort()

    # offline=False: booktools.browser's dead proxy would also cut off the server on 127.0.0.1; the route
    # below is the guard instead (Chromium's own background traffic is off in chromium.CHROMIUM_ARGS).
    with chromium.launch(offline=False) as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")
        context.route(lambda url: not local(url), abort)
        page = context.new_page()
        page.on("websocket", lambda ws: None if local(ws.url) else blocked.append(ws.url))
        yield page, blocked


def test_memory_explorer_answers_its_controls(lab: dict, browser_page: tuple) -> None:
    from playwright.sync_api import expect

    import matplotlib as mpl

    from batchlab.ui import style
    from batchlab.page.memory import MemoryExplorer
    from batchlab.ui.explorer_widget import ExplorerWidget

    page, blocked = browser_page
    with mpl.rc_context():  # the explorer draws once: in the book's style, not left behind for other tests
        style.setup()
        labels = {name: control.description for name, control in ExplorerWidget(MemoryExplorer()).controls.items()}
    started = time.monotonic()
    page.goto(f"{lab['url']}/lab/tree/{CHAPTER}?token={lab['token']}")
    page.wait_for_function(chromium.script("lab_notebook_open", JS), arg=CHAPTER, timeout=RUN_ALL_S * 1000)
    loaded = time.monotonic()
    # true when every cell has run (false if one failed), or "timeout": page.evaluate has no limit
    ran_ok = page.evaluate(chromium.script("lab_run_all", JS), RUN_ALL_S * 1000)
    errors = page.evaluate(chromium.script("lab_cell_errors", JS))
    ran = time.monotonic()
    assert not errors, f"单元格报错：{errors}"
    assert ran_ok is True, f"notebook:run-all-cells 没有成功跑完（{ran_ok}，限时 {RUN_ALL_S} s）"

    def control(within, kind: str, name: str):
        """The ipywidgets control of class ``widget-<kind>`` labelled like the explorer's ``name``."""
        return within.locator(f".widget-{kind}").filter(has=page.get_by_text(labels[name], exact=True))

    explorer = page.locator(".jp-CodeCell").filter(has=control(page, "dropdown", DROPDOWN))
    expect(explorer).to_have_count(1, timeout=CHANGE_S * 1000)
    image = explorer.locator(".widget-output img")
    summary = explorer.locator(".widget-html-content").last  # the first is the kernel notice above the controls
    expect(image).to_have_count(1, timeout=CHANGE_S * 1000)
    expect(summary).not_to_be_empty()
    assert "Error displaying widget" not in explorer.inner_text()

    def state() -> tuple[str, str]:
        return image.get_attribute("src") or "", summary.inner_text()

    def changed(before: tuple[str, str], what: str) -> tuple[str, str]:
        """Wait until the figure and the summary both differ from ``before``; the new state."""
        deadline = time.monotonic() + CHANGE_S
        while (after := state())[0] == before[0] or after[1] == before[1]:
            if time.monotonic() > deadline:
                pytest.fail(f"{what} 之后 {CHANGE_S} s 内"
                            f"{'图' if after[0] == before[0] else '摘要'}没有变化；摘要：{after[1]!r}")
            time.sleep(0.2)
        assert after[0].startswith(PNG_PREFIX), f"{what} 之后图不是 PNG：{after[0][:60]!r}"
        assert INVALID_MARK not in after[1], f"{what} 得到了无效配置：{after[1]!r}"
        return after

    before = state()
    assert before[0].startswith(PNG_PREFIX), f"图不是 PNG：{before[0][:60]!r}"
    assert INVALID_MARK not in before[1], f"默认配置无效：{before[1]!r}"

    dropdown = control(explorer, "dropdown", DROPDOWN).locator("select")
    chosen = dropdown.locator("option").all_inner_texts()[-1]
    assert chosen != dropdown.evaluate("el => el.options[el.selectedIndex].text"), "下拉框已经在最后一项"
    dropdown.select_option(label=chosen)
    after_dropdown = changed(before, f"下拉框「{labels[DROPDOWN]}」选「{chosen}」")

    slider = control(explorer, "slider", SLIDER)
    readout = slider.locator(".widget-readout")
    value = readout.inner_text()
    slider.locator(".noUi-handle").focus()
    page.keyboard.press(SLIDER_KEY)
    expect(readout).not_to_have_text(value, timeout=CHANGE_S * 1000)
    changed(after_dropdown, f"滑块「{labels[SLIDER]}」按 {SLIDER_KEY}（{value} → {readout.inner_text()}）")

    assert not blocked, f"页面试图访问 127.0.0.1 以外的地址：{blocked}"
    print(f"live kernel: page {loaded - started:.1f} s, run all {ran - loaded:.1f} s, "
          f"two changes {time.monotonic() - ran:.1f} s")
