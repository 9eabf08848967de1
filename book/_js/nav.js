// The book's navigation drawers, keyboard and screen-reader details. The themes open and close them
// (pydata-sphinx-theme 0.17: below 992 px ☰ moves the sidebar into a <dialog> drawer, closed by Escape or
// a tap on the backdrop; sphinx-book-theme 1.3: from 992 px ☰ hides and shows the left column). This adds:
// 1. aria-expanded on each toggle says whether its drawer (or the left column) is open now;
// 2. an opened drawer puts the focus on the current page's link, a closed one gives it back to its toggle,
//    and so does the toggle that hides or shows the column (sphinx-book-theme blurs the toggle on click,
//    before pydata records the focus, which then returned to <body>: a keyboard reader lost their place);
// 3. a link to a section of this page, followed from the page-contents drawer, closes the drawer, so the
//    reader sees where it went;
// 4. (below) no search highlights on a page opened after a search.
(function () {
  "use strict";
  // 4. no search highlights carried from the search page: Sphinx's searchtools.js stores the query in
  //    localStorage and sphinx_highlight.js marks its words on the next page opened, with a 「隐藏搜索结果」
  //    link; this runs first of the page's (deferred) scripts, before sphinx_highlight.js reads it
  //    (booktools.fast_pages puts nav.js first)
  try {
    localStorage.removeItem("sphinx_highlight_terms");
  } catch (e) { /* storage refused (a private window): nothing stored either */ }

  var WIDE = window.matchMedia("(min-width: 992px)"); // the themes' width for a column, not a drawer

  function setup() {
    [
      ["primary", "a.current"],
      ["secondary", "a"]
    ].forEach(function (pair) {
      var side = pair[0];
      var toggle = document.querySelector(".bd-header-article ." + side + "-toggle");
      var sidebar = document.getElementById("pst-" + side + "-sidebar");
      var dialog = document.getElementById("pst-" + side + "-sidebar-modal");
      if (!toggle || !sidebar || !dialog) return;

      function expanded() {
        if (dialog.open) return true;
        // a column, not a drawer: hidden, it carries pst-sidebar-hidden
        return side === "primary" && WIDE.matches && !sidebar.classList.contains("pst-sidebar-hidden");
      }
      function update() {
        toggle.setAttribute("aria-expanded", expanded() ? "true" : "false");
      }

      new MutationObserver(function () {
        update();
        if (dialog.open) {
          var target = dialog.querySelector(pair[1]);
          if (target) target.focus();
        }
      }).observe(dialog, { attributes: true, attributeFilter: ["open"] });
      new MutationObserver(update).observe(sidebar, { attributes: true, attributeFilter: ["class"] });
      WIDE.addEventListener("change", update);

      // after pydata's own close handler, which focuses what it recorded (<body>); not after a followed
      // link to this page, where the reader's place is the section they chose
      var followed = false;
      dialog.addEventListener("close", function () {
        if (followed) {
          followed = false;
          return;
        }
        setTimeout(function () { toggle.focus(); }, 0);
      });

      // a column (wide screen): sphinx-book-theme blurs the toggle it hides the column with; a keyboard
      // reader keeps the focus on it (a capture listener on the document runs before the theme's own)
      document.addEventListener("click", function (event) {
        if (WIDE.matches && event.target.closest && event.target.closest("button") === toggle) {
          setTimeout(function () { toggle.focus(); }, 0);
        }
      }, true);

      dialog.addEventListener("click", function (event) {
        var link = event.target.closest && event.target.closest("a[href]");
        if (!link || !dialog.open) return;
        var url = new URL(link.href, document.baseURI);
        if (url.pathname === location.pathname && url.hash) {
          followed = true;
          dialog.close();
        }
      });
      update();
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
