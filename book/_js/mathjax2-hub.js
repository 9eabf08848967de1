// ipywidgets 8 typesets widget labels through the MathJax 2 API, MathJax.Hub.Queue(["Typeset",
// MathJax.Hub, element]) (jupyter-widgets/ipywidgets#3829). The book loads MathJax 3, which has no Hub,
// so every widget label threw a TypeError. This gives MathJax 3 a Hub whose Queue forwards "Typeset"
// jobs to typesetPromise. It is attached again at DOMContentLoaded because MathJax 3 (a deferred
// script) replaces the global MathJax object when it loads; the widget manager renders after that.
(function () {
  function typeset(element) {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
      mj.startup.promise.then(function () { return window.MathJax.typesetPromise([element]); });
    }
  }
  function attach() {
    var mj = window.MathJax;
    if (!mj || mj.Hub) return;
    mj.Hub = {
      Queue: function () {
        for (var i = 0; i < arguments.length; i++) {
          var job = arguments[i];
          if (Array.isArray(job) && job[0] === "Typeset" && job[2]) typeset(job[2]);
        }
      }
    };
  }
  attach();
  document.addEventListener("DOMContentLoaded", attach);
})();
