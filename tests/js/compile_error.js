/* Compile `source` without running it: null if it compiles, else the error ("SyntaxError: …").
 * kind "script": a page's own file, compiled as a function body. kind "expression": a script
 * Playwright runs (booktools.browser.script), which must be one function expression.
 * tests/test_js.py runs it in a blank page of the tests' headless Chromium. */
([source, kind]) => {
  try {
    if (kind !== 'expression') {
      new Function(source);
      return null;
    }
    new Function('return (\n' + source + '\n);');  // one expression, or a SyntaxError
    const made = (0, eval)('(\n' + source + '\n)');  // evaluating an expression only makes the function
    return typeof made === 'function' ? null : `not a function: ${typeof made}`;
  } catch (e) {
    return `${e.name}: ${e.message}`;
  }
}
