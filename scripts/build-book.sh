#!/usr/bin/env bash
# Build the HTML book into _build/html from the notebooks' committed outputs (refresh them with
# scripts/execute-notebooks.sh; pytest --nbval checks they still reproduce); any warning fails it.
# Then print it to one PDF, _build/html/batch-size-book.pdf (booktools.pdf: headless Chromium,
# the Debian package chromium, or $CHROMIUM; BOOK_PDF=0 skips it), which the preface links to.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${BOOK_PDF:-1}" != 0 ]; then bash scripts/setup-env.sh pdf; else bash scripts/setup-env.sh book; fi
.venv/bin/jupyter-book build . -W "$@"
if [ "${BOOK_PDF:-1}" != 0 ]; then
  out=.   # where jupyter-book wrote _build/: the folder given with --path-output, if any
  args=("$@")
  for ((i = 0; i < ${#args[@]} - 1; i++)); do
    [ "${args[i]}" = --path-output ] && out=${args[i + 1]}
  done
  .venv/bin/python -m booktools.pdf --html "$out/_build/html"   # setup-env.sh made sure Chromium is there
fi
echo "book: open _build/html/index.html"
