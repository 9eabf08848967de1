// 搜索结果的摘要：命中的那一句，纯文字。只在 search.html 加载（booktools.reader_page 加入）。
// Sphinx 7.4 的 searchtools.js 取每个结果页的 HTML，把整个 [role=main] 的文字从命中处前 120 字起截 240 字：
// 公式是 TeX 源码（\(1/B\)），打印用的本页目录排在正文前面（摘要成了标题列表），API 页是常量的取值。
// 这里换掉它的两个函数（Search.htmlToText、Search.makeSearchSummary）：
// 1. 只读正文（article），去掉打印用目录、标题旁的链接符号、脚本和样式；公式写成纯文字（\frac{a}{b} → a/b）；
// 2. 摘要是含检索词（读者输入的词，和 searchtools.js 切出的词）的那一句（按 。！？；切句）：先找段落，再找列表、
//    表格和定义，再找代码；只在标题里找到时，是那一节正文的第一句（不重复标题）；页脚的上一页/下一页不算；
//    句子太长时只留检索词前后各约 MAX_SIDE 个字。
// searchtools.js 在本文件之后加载，它在 DOMContentLoaded 时才开始检索；本文件的 DOMContentLoaded 监听先登记，先运行。
(function () {
  "use strict";
  var MAX_SIDE = 60;
  var SKIP = [".headerlink", "script", "style", "template", ".onlyprint", "#jb-print-docs-body",
              "mjx-assistive-mml", ".copybtn", "button", ".toggle-details__summary", ".prev-next-area",
              ".prev-next-footer", "nav"].join(", ");
  var PARAGRAPH = "p:not(li p, td p, th p, dt p), dd, figcaption, caption";
  var SENTENCE = 10;   // 比检索词长出这么多字的块算一句话，而不是一个标签
  var PROSE = "li, td, th, dt, .admonition-title";
  var CODE = "pre";
  var HEADING = "h1, h2, h3, h4, h5, h6";
  var GREEK = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", eta: "η", theta: "θ",
    lambda: "λ", mu: "μ", nu: "ν", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", phi: "φ", psi: "ψ", omega: "ω",
    Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Pi: "Π", Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω",
    cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥", geq: "≥", approx: "≈", ne: "≠", neq: "≠",
    propto: "∝", infty: "∞", to: "→", rightarrow: "→", sum: "∑", pm: "±", ll: "≪", gg: "≫", dots: "…",
    ldots: "…", cdots: "⋯", min: "min", max: "max", log: "log", exp: "exp", sqrt: "√"
  };

  // 一个公式的 TeX 写成读者看到的纯文字（近似）
  function texToPlain(tex) {
    var s = tex.replace(/^\s*(\\\(|\\\[|\$\$?)/, "").replace(/(\\\)|\\\]|\$\$?)\s*$/, "");
    var before;
    do {   // \frac{a}{b} → (a)/(b) 由内向外
      before = s;
      s = s.replace(/\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, function (m, a, b) {
        return (a.length > 1 ? "(" + a + ")" : a) + "/" + (b.length > 1 ? "(" + b + ")" : b);
      });
    } while (s !== before);
    s = s.replace(/\\(?:operatorname|mathrm|text|textrm|mathbf|mathit|mathcal|boldsymbol|mathsf)\s*\{([^{}]*)\}/g, "$1");
    s = s.replace(/\\([A-Za-z]+)/g, function (m, name) { return GREEK[name] !== undefined ? GREEK[name] : ""; });
    s = s.replace(/\\[,;:! ]|~/g, " ").replace(/\\\\/g, " ").replace(/\\[{}%&#_$]/g, function (m) { return m[1]; });
    s = s.replace(/[{}]/g, "").replace(/_/g, "").replace(/\s+/g, " ");
    return s.trim();
  }

  function readable(doc) {
    // 建书时已排好的公式（mjx-container）：读它给读屏软件的 MathML 的文字，再去掉其余不读的部分
    doc.querySelectorAll("mjx-container").forEach(function (el) {
      var math = el.querySelector("math");
      el.textContent = " " + (el.getAttribute("aria-label") || (math ? math.textContent : "")) + " ";
    });
    doc.querySelectorAll(SKIP).forEach(function (el) { el.remove(); });
    doc.querySelectorAll("span.math, div.math").forEach(function (el) {
      if (!el.querySelector("mjx-container")) el.textContent = " " + texToPlain(el.textContent) + " ";
    });
  }

  function flat(text) {
    return text.replace(/\s+/g, " ").trim();
  }

  // 一段文字里含检索词的那一句；太长时截到检索词前后各约 MAX_SIDE 个字
  function sentenceAround(text, at, length) {
    var start = at, end = at + length;
    while (start > 0 && !/[。！？；!?]/.test(text[start - 1])) start--;
    while (end < text.length && !/[。！？；!?]/.test(text[end])) end++;
    if (end < text.length) end++;
    var cutStart = Math.max(start, at - MAX_SIDE), cutEnd = Math.min(end, at + length + MAX_SIDE);
    return (cutStart > start ? "…" : "") + text.slice(cutStart, cutEnd).trim() + (cutEnd < end ? "…" : "");
  }

  function blocksOf(root, selector) {
    // 最内层的块：一个列表项里的段落只算一次
    return Array.prototype.filter.call(root.querySelectorAll(selector), function (el) {
      return !el.querySelector(selector);
    });
  }

  function summary(htmlString, keywords, anchor) {
    var doc = new DOMParser().parseFromString(htmlString, "text/html");
    readable(doc);
    var root = doc.querySelector("article.bd-article") || doc.querySelector('[role="main"]') || doc.body;
    if (anchor) {
      var part = null;
      try { part = root.querySelector(anchor); } catch (e) { part = null; }
      if (part) root = part;
    }
    // 先用读者输入的词（searchtools.js 给的是词干：“stage_memori”），再用它切出的词
    var typed = (new URLSearchParams(window.location.search).get("q") || "").split(/[\s，。、；：,;:]+/);
    var words = typed.concat(Array.from(keywords)).map(function (k) { return String(k).toLowerCase(); })
      .filter(function (k) { return k; })
      .sort(function (a, b) { return b.length - a.length; });
    // 先找句子，再找标签（只写着一节名字的表格格子或列表项：“4.3 显存占用”）
    var groups = [PARAGRAPH, PROSE, CODE, HEADING];
    for (var pass = 0; pass < 2; pass++) {
      for (var g = 0; g < groups.length; g++) {
        var blocks = blocksOf(root, groups[g]);
        for (var i = 0; i < blocks.length; i++) {
          var text = flat(blocks[i].textContent);
          var lower = text.toLowerCase();
          for (var w = 0; w < words.length; w++) {
            var at = lower.indexOf(words[w]);
            if (at > -1 && (pass === 1 || text.length >= words[w].length + SENTENCE)) {
              if (groups[g] === HEADING) return firstSentence(blocks[i].closest("section") || root);
              return sentenceAround(text, at, words[w].length);
            }
          }
        }
      }
    }
    // 检索词不在正文里（它的索引项也可能来自页面的关键词）：正文的第一句
    return firstSentence(root);
  }

  // 一节（或一页）正文的第一句：检索词只在标题里时，摘要说这一节讲什么，而不是重复标题
  function firstSentence(root) {
    var first = root.querySelector("p:not(li p, td p, th p, dt p)");
    return first ? sentenceAround(flat(first.textContent), 0, 0) : "";
  }

  function install() {
    if (typeof Search === "undefined") return;
    Search.htmlToText = function (htmlString, anchor) {
      var doc = new DOMParser().parseFromString(htmlString, "text/html");
      readable(doc);
      var root = doc.querySelector("article.bd-article") || doc.body;
      return flat(root.textContent);
    };
    Search.makeSearchSummary = function (htmlText, keywords, anchor) {
      var text = summary(htmlText, keywords, anchor);
      var p = document.createElement("p");
      p.classList.add("context");
      p.textContent = text;
      return p;
    };
  }

  // 供测试在页面里调用
  window.batchlabSearch = { texToPlain: texToPlain, summary: summary };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", install);
  } else {
    install();
  }
})();
