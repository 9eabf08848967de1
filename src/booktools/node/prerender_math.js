/* Typeset the book's formulas at build time (src/booktools/prerender_math.py runs this with Node).
 *
 * Reads JSON on stdin: {"mathjax": "<the es5/ folder of mathjax@3.2.2>", "font_url": "...",
 * "pages": [[[tex, display], ...], ...]} and writes JSON on stdout: {"pages": [{"html": [...], "css": "...",
 * "errors": n}, ...]}: each formula as MathJax's CommonHTML (the markup MathJax writes in the browser, with
 * its assistive MathML for screen readers) and, per page, the stylesheet for exactly the glyphs that page
 * uses. The reader's browser then loads no MathJax at all.
 */
"use strict";
const path = require("path");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const job = JSON.parse(input);
  const MJ = require(path.join(job.mathjax, "node-main.js"));
  MJ.init({
    loader: { load: ["input/tex-full", "output/chtml", "adaptors/liteDOM", "a11y/assistive-mml"] },
    chtml: { fontURL: job.font_url, adaptiveCSS: true },
    startup: { typeset: false },
  }).then((MathJax) => {
    const adaptor = MathJax.startup.adaptor;
    const pages = job.pages.map((items) => {
      MathJax.startup.output.clearCache();
      let errors = 0;
      const html = items.map(([tex, display]) => {
        const node = MathJax.tex2chtml(tex, { display: display });
        const out = adaptor.outerHTML(node);
        if (out.includes("<mjx-merror")) errors += 1;
        return out;
      });
      return { html: html, css: adaptor.textContent(MathJax.chtmlStylesheet()), errors: errors };
    });
    process.stdout.write(JSON.stringify({ pages: pages }));
  }).catch((err) => {
    process.stderr.write(String(err && err.stack || err) + "\n");
    process.exit(1);
  });
});
