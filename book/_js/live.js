/* Live explorers for the published page (see src/booktools/live.py).
 *
 * Each explorer's frozen view (plain HTML written at build time by src/booktools/frozen.py: its controls,
 * inert, its summary and its default figure) carries a marker (.batchlab-live, with the explorer's name and
 * its context as JSON). When the reader is a few screens from an explorer, this script starts Pyodide
 * once per page (the browser caches it across pages; a reader who asked to save data starts it by
 * scrolling to an explorer or touching it instead), unpacks the book's own Python files and asks
 * batchlab.page.web for the controls, the summary and the chart; the page holds no formula.
 * The frozen view stays until the live one is ready. Opened as file:// (browsers refuse WebAssembly
 * there) or without WebAssembly, the frozen view stays and a line says why.
 */
(function () {
  "use strict";
  var script = document.currentScript;
  var ROOT = new URL("live/", script.src).href;
  var MARKER = ".batchlab-live";
  var runtime = null; // one Promise per page: {py, web}
  var echarts = null;

  var TEXT = {
    idle: "网页里的实时版本：你读到离这里还有几屏时，浏览器就会启动 Python（Pyodide，首次下载约 14 MB，网站压缩传输时约 6 MB，" +
      "之后由浏览器缓存；开了省流量模式时，等你滚动到这里或碰一下控件才启动），用本书自己的公式重新计算；在那之前下面显示的是默认状态。",
    loading: "正在浏览器里启动 Python（Pyodide）……下面仍是默认状态，准备好后控件就会响应。",
    ready: "实时版本：改动控件，浏览器里的 Python（Pyodide）会用本书的公式重新计算并重画。",
    file: "这个页面是以文件（file://）打开的，浏览器不允许在文件页面里加载 WebAssembly，所以控件不响应。" +
      "要让它动起来：在书的 HTML 目录里运行 python -m http.server，再用浏览器打开 http://localhost:8000/ 。",
    nowasm: "这个浏览器不支持 WebAssembly，网页里无法运行 Python：下面只显示默认状态。" +
      "可以点页面顶部的火箭图标在 Binder 或 Colab 里运行本章，或在本地用 Jupyter 打开本章的笔记本。",
    failed: "浏览器里的 Python 没能启动（",
  };

  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.onload = resolve;
      s.onerror = function () { reject(new Error("无法加载 " + src)); };
      document.head.appendChild(s);
    });
  }

  // ECharts is a UMD file: with no AMD loader on the page (the widget manager's require.js is gone) it
  // sets window.echarts.
  function loadEcharts() {
    return loadScript(ROOT + "echarts/echarts.common.min.js").then(function () { return window.echarts; });
  }

  // The service worker (book/_js/live-sw.js, at the site's root) keeps the runtime for the reader's next
  // page. It is registered as the page starts; the runtime is fetched once it controls the page (at most
  // SW_WAIT_MS later), so that even the first page's download is kept.
  var SW_WAIT_MS = 3000;
  var serviceWorker = null; // a Promise, resolved when the page is controlled (or it will not be)
  function registerServiceWorker() {
    if (serviceWorker) return serviceWorker;
    var sw = navigator.serviceWorker;
    if (!sw || !window.isSecureContext || location.protocol === "file:") {
      serviceWorker = Promise.resolve();
      return serviceWorker;
    }
    serviceWorker = new Promise(function (resolve) {
      if (sw.controller) { resolve(); return; }
      sw.addEventListener("controllerchange", function () { resolve(); });
      setTimeout(resolve, SW_WAIT_MS);
      sw.register(new URL("../../bl-live-sw.js", ROOT).href).catch(function () { resolve(); });
    });
    return serviceWorker;
  }

  function startRuntime() {
    if (runtime) return runtime;
    runtime = registerServiceWorker().then(function () { return Promise.all([
      loadScript(ROOT + "pyodide/pyodide.js").then(function () {
        return window.loadPyodide({ indexURL: ROOT + "pyodide/" });
      }),
      fetch(ROOT + "batchlab-live.zip").then(function (r) {
        if (!r.ok) throw new Error("无法加载 batchlab-live.zip");
        return r.arrayBuffer();
      }),
      loadEcharts(),
    ]); }).then(function (parts) {
      var py = parts[0];
      echarts = parts[2];
      py.unpackArchive(parts[1], "zip", { extractDir: "/home/pyodide/live" });
      py.runPython("import sys; sys.path.insert(0, '/home/pyodide/live')");
      return { py: py, web: py.pyimport("batchlab.page.web") };
    });
    return runtime;
  }

  // The page's colour scheme: the theme's own (pydata-sphinx-theme sets data-theme on <html> from the
  // reader's choice or, in its "auto" mode, from the phone's setting), else the phone's setting. The charts
  // are drawn for it (batchlab.page.colours.in_scheme) and redrawn when it changes.
  var DARK_QUERY = "(prefers-color-scheme: dark)";
  function scheme() {
    var theme = document.documentElement.getAttribute("data-theme");
    if (theme === "dark" || theme === "light") return theme;
    return window.matchMedia && window.matchMedia(DARK_QUERY).matches ? "dark" : "light";
  }
  var shown = []; // the explorers that draw a chart

  function recolourAll() {
    var now = scheme();
    shown.forEach(function (ex) { ex.recolour(now); });
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  var uid = 0;

  // A phone's column (book/_static/live.css lays controls out one a row below this width) is too narrow for a
  // drop-down of long options (「16 位混合精度（bf16/fp16 计算，fp32 主权重）」 was cut): a choice of at most
  // FEW_CHOICES options is drawn there as buttons, each option whole.
  var FEW_CHOICES = 4;
  function narrowScreen() { return !!window.matchMedia && window.matchMedia("(max-width: 600px)").matches; }

  /* One control from its declaration (batchlab.page.spec.Control); onChange(value) on a change. */
  function makeControl(c, value, onChange) {
    var id = "bl-live-" + (++uid);
    var row = el("div", { "class": "bl-live-control" + (c.wide ? " bl-live-wide" : ""), "data-name": c.name,
                          "data-kind": c.kind });
    var label = el("label", { "for": id }, c.label);
    row.appendChild(label);
    var input;
    if (c.kind === "int" || c.kind === "float") {
      input = el("input", { id: id, type: "number", min: c.minimum, max: c.maximum,
                            step: c.kind === "int" ? 1 : (c.step || "any"), inputmode: c.kind === "int" ? "numeric" : "decimal" });
      input.value = value;
      input.addEventListener("change", function () {
        var n = input.valueAsNumber;
        onChange(Number.isFinite(n) ? n : input.value);
      });
    } else if (c.kind === "slider" || c.kind === "steps") {
      var values = c.kind === "steps" ? c.options.map(function (o) { return o[1]; }) : null;
      var labels = c.kind === "steps" ? c.options.map(function (o) { return o[0]; }) : null;
      input = el("input", { id: id, type: "range", min: values ? 0 : c.minimum,
                            max: values ? values.length - 1 : c.maximum, step: 1 });
      input.value = values ? Math.max(0, values.indexOf(value)) : value;
      var readout = el("output", { "for": id });
      var show = function () { readout.textContent = values ? labels[+input.value] : input.value; };
      show();
      input.addEventListener("input", show);
      input.addEventListener("change", function () { onChange(values ? values[+input.value] : +input.value); });
      row.appendChild(input);
      row.appendChild(readout);
      return row;
    } else if (c.kind === "choice" && !(c.options.length <= FEW_CHOICES && narrowScreen())) {
      input = el("select", { id: id });
      c.options.forEach(function (o, i) {
        var opt = el("option", { value: String(i) }, o[0]);
        if (o[1] === value) opt.selected = true;
        input.appendChild(opt);
      });
      input.addEventListener("change", function () { onChange(c.options[+input.value][1]); });
    } else { // buttons (and, on a phone, a choice of a few: its long options whole, not cut in a drop-down)
      input = el("div", { id: id, role: "radiogroup", "aria-label": c.label, "class": "bl-live-buttons" });
      c.options.forEach(function (o) {
        var b = el("button", { type: "button", role: "radio", "aria-checked": String(o[1] === value) }, o[0]);
        b.addEventListener("click", function () { onChange(o[1]); });
        input.appendChild(b);
      });
    }
    row.appendChild(input);
    return row;
  }

  function Explorer(notice) {
    this.notice = notice;
    this.name = notice.getAttribute("data-explorer");
    this.context = notice.getAttribute("data-context");
    this.frozen = notice.closest(".bl-frozen") || notice.parentElement;
    this.status = el("div", { "class": "bl-live-status", "role": "status" });
    this.box = el("div", { "class": "bl-live", "data-explorer": this.name, "data-state": "idle", hidden: "" });
    this.frozen.parentElement.insertBefore(this.status, this.frozen);
    this.frozen.parentElement.insertBefore(this.box, this.frozen);
    this.values = null;
    this.updates = [];
  }

  Explorer.prototype.say = function (key, detail) {
    this.notice.style.display = "none"; // the status line speaks for it now
    this.status.textContent = TEXT[key] + (detail ? detail + "）。下面仍是默认状态。" : "");
    this.status.setAttribute("data-state", key);
  };

  Explorer.prototype.start = function () {
    var self = this;
    if (this.started) return;
    this.started = true;
    var t0 = performance.now();
    this.say("loading");
    this.box.setAttribute("data-state", "loading");
    startRuntime().then(function (rt) {
      self.web = rt.web;
      self.show(JSON.parse(rt.web.start(self.name, self.context, scheme())), true);
      self.box.hidden = false;
      self.frozen.style.display = "none";
      self.box.setAttribute("data-ready-ms", String(Math.round(performance.now() - t0)));
      self.box.setAttribute("data-ready-at", String(Math.round(performance.now())));
      self.box.setAttribute("data-state", "ready");
      self.say("ready");
    }).catch(function (err) {
      self.box.setAttribute("data-state", "failed");
      self.say("failed", String(err && err.message || err));
    });
  };

  Explorer.prototype.change = function (name, value) {
    var t0 = performance.now();
    var values = Object.assign({}, this.values);
    values[name] = value;
    this.show(JSON.parse(this.web.update(this.name, this.context, JSON.stringify(values), name, scheme())), false);
    // Timed to the frame after the one that paints the new chart: what a reader waits for.
    var self = this;
    requestAnimationFrame(function () {
      requestAnimationFrame(function () {
        var ms = performance.now() - t0;
        self.updates.push(ms);
        self.box.setAttribute("data-update-ms", String(Math.round(ms)));
        self.box.setAttribute("data-updates", String(self.updates.length));
      });
    });
  };

  Explorer.prototype.show = function (answer, first) {
    var self = this;
    if (answer.controls && (first || JSON.stringify(answer.controls) !== this.controlsKey ||
                            JSON.stringify(answer.values) !== JSON.stringify(this.values))) {
      this.controlsKey = JSON.stringify(answer.controls);
      var form = this.form || el("div", { "class": "bl-live-controls" });
      form.textContent = "";
      answer.controls.forEach(function (c) {
        form.appendChild(makeControl(c, answer.values[c.name], function (v) { self.change(c.name, v); }));
      });
      if (!this.form) { this.form = form; this.box.appendChild(form); }
    }
    this.values = answer.values;
    if (!this.summary) {
      this.summary = el("div", { "class": "bl-live-summary", "aria-live": "polite" });
      this.chartBox = el("div", { "class": "bl-live-chart" });
      this.box.appendChild(this.summary);
      this.box.appendChild(this.chartBox);
    }
    this.summary.innerHTML = answer.summary_html;
    if (answer.chart) { // an invalid value keeps the last chart, as the notebook keeps its last figure
      if (!this.chart) {
        this.box.hidden = false; // ECharts measures its box: it must be laid out
        this.chart = echarts.init(this.chartBox, null, { renderer: "svg" });
        window.addEventListener("resize", function () { self.chart.resize(); });
        shown.push(this);
      }
      this.lightChart = answer.light_chart || answer.chart; // the declared chart, redrawn for a new scheme
      this.chartScheme = answer.light_chart ? "dark" : "light";
      this.chart.setOption(answer.chart, true);
      this.chartBox.setAttribute("data-scheme", this.chartScheme);
    }
  };

  /* The chart drawn again for the page's new colour scheme (nothing recomputed). */
  Explorer.prototype.recolour = function (now) {
    if (!this.chart || now === this.chartScheme) return;
    var option = JSON.parse(this.web.recolour(JSON.stringify(this.lightChart), now));
    if (!option) return;
    this.chartScheme = now;
    this.chart.setOption(option, true);
    this.chartBox.setAttribute("data-scheme", now);
  };

  function attach(notice) {
    if (notice.getAttribute("data-live-attached")) return;
    notice.setAttribute("data-live-attached", "1");
    var ex = new Explorer(notice);
    var touched = function (act) {
      ["pointerdown", "focusin", "keydown"].forEach(function (type) {
        ex.frozen.addEventListener(type, act, { once: true, capture: true });
      });
    };
    // A file:// page or a browser without WebAssembly keeps the notice (and a printed page its words)
    // until a reader touches a control; then it says why nothing moves.
    if (location.protocol === "file:") { touched(function () { ex.say("file"); }); return; }
    if (typeof WebAssembly !== "object") { touched(function () { ex.say("nowasm"); }); return; }
    ex.say("idle");
    var go = function () { ex.start(); };
    touched(go);
    if ("IntersectionObserver" in window) {
      var seen = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); go(); }
      }, { rootMargin: "200px" });
      seen.observe(ex.frozen);
    }
  }

  function scan() { document.querySelectorAll(MARKER).forEach(attach); }

  // The runtime (≈ 6 MB compressed, 14 MB not) is fetched and started while the reader is still a few
  // screens above an explorer (PREFETCH_MARGIN), so it is live within seconds of coming into view, and a
  // reader who only reads the top of the page downloads none of it; on a connection where the reader
  // asked to save data, only when an explorer comes into view or is touched.
  var PREFETCH_MARGIN = "300% 0px 300% 0px"; // three screens above and below the visible part
  function prefetch() {
    var saving = navigator.connection && navigator.connection.saveData;
    var markers = document.querySelectorAll(MARKER);
    if (saving || !markers.length || location.protocol === "file:" || typeof WebAssembly !== "object" ||
        !("IntersectionObserver" in window)) return;
    var near = new IntersectionObserver(function (entries) {
      if (!entries.some(function (e) { return e.isIntersecting; })) return;
      near.disconnect();
      startRuntime().catch(function () { /* an explorer's start says why */ });
    }, { rootMargin: PREFETCH_MARGIN });
    markers.forEach(function (m) { near.observe(m.closest(".bl-frozen") || m); });
  }

  function begin() {
    if (window.matchMedia && window.matchMedia("print").matches) return;
    scan(); // the frozen views are in the page's HTML: every marker is there now
    if (document.querySelector(MARKER) && typeof WebAssembly === "object") registerServiceWorker();
    prefetch();
    // the reader's switch (the theme's button) or the phone's setting changes the scheme
    if ("MutationObserver" in window) {
      new MutationObserver(recolourAll).observe(document.documentElement, { attributes: true,
                                                                           attributeFilter: ["data-theme"] });
    }
    var query = window.matchMedia && window.matchMedia(DARK_QUERY);
    if (query && query.addEventListener) query.addEventListener("change", recolourAll);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", begin);
  else begin();
})();
