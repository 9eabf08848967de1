#!/usr/bin/env bash
# Make the environment the book needs: system packages (a CJK font; Chromium for the tests) and a
# .venv with the pinned Python stack. Safe to re-run: it only installs what is missing or changed.
#   usage: scripts/setup-env.sh [book|pdf|test]   (pdf: the book and Chromium to print it)
set -euo pipefail
cd "$(dirname "$0")/.."
purpose=${1:-book}

# --- system packages -------------------------------------------------------------------------
have_cjk_font() {
  # fontconfig may be absent on a minimal machine; matplotlib does not need it, so look for the files too.
  local fonts
  fonts=$(fc-list : family 2>/dev/null || true)
  grep -q "Noto Sans CJK" <<<"$fonts" && return 0
  [ -n "$(find /usr/share/fonts -iname 'NotoSansCJK*' -print -quit 2>/dev/null)" ]
}
missing=()
have_cjk_font || missing+=(fonts-noto-cjk)
# Chromium renders the pages in the tests and prints the book's PDF (CHROMIUM names another Chromium-based
# browser, e.g. the runner's google-chrome; booktools.browser.find_chromium looks for the same names)
if [ "$purpose" = test ] || { [ "$purpose" = pdf ] && [ -z "${CHROMIUM:-}" ]; }; then
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
fi
# Node.js typesets the book's formulas at build time (booktools.prerender_math); npm installs the page audit
command -v node >/dev/null 2>&1 || missing+=(nodejs)
[ "$purpose" = test ] && ! command -v npm >/dev/null 2>&1 && missing+=(npm)
# grade runs students' notebooks inside bubblewrap; the tests grade hostile submissions with it
[ "$purpose" = test ] && ! command -v bwrap >/dev/null 2>&1 && missing+=(bubblewrap)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup-env: installing ${missing[*]} with apt-get"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
  else
    echo "setup-env: please install ${missing[*]} (Debian/Ubuntu: sudo apt-get install ${missing[*]})" >&2
    # the tests check Chinese glyphs and render pages in Chromium; the book's PDF is printed by it
    if [ "$purpose" != book ]; then exit 1; fi
  fi
fi

# --- Python environment ------------------------------------------------------------------------
python=${PYTHON:-}
if [ -z "$python" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then python=$candidate; break; fi
  done
fi
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "setup-env: need Python 3.11 (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup-env: installing requirements.txt into .venv"
  .venv/bin/python -m pip install -q -r requirements.txt
  echo "$want" > "$stamp"
fi

# --- the live explorers' runtime -----------------------------------------------------------------
# Pyodide and ECharts, pinned npm tarballs checked against their registry hashes, downloaded once into
# .cache/live-runtime (src/booktools/live.py); the build copies them next to the pages that use them.
.venv/bin/python -m booktools.live vendor

# --- formulas typeset at build time ------------------------------------------------------------
# MathJax for Node (the npm package mathjax, pinned and hash-checked like the vendored fonts) in .cache/mathjax-node.
.venv/bin/python -m booktools.prerender_math vendor

# --- the web's own page audit (tests/test_page_lighthouse.py) ------------------------------------
# Lighthouse 12.2.3 (13.x wants Node 22) from the npm registry into .cache/lighthouse (booktools.lighthouse).
if [ "$purpose" = test ] && ! .venv/bin/python -c 'import sys; from booktools import lighthouse; sys.exit(not lighthouse.installed())'; then
  echo "setup-env: installing lighthouse into .cache/lighthouse"
  mkdir -p .cache/lighthouse
  npm install --prefix .cache/lighthouse --no-audit --no-fund --save-exact --silent "lighthouse@$(.venv/bin/python -c 'from booktools import lighthouse; print(lighthouse.VERSION)')"
fi
