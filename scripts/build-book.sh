#!/usr/bin/env bash
# Build the HTML book into _build/html from the notebooks' committed outputs (refresh them with
# scripts/execute-notebooks.sh; pytest --nbval checks they still reproduce); any warning fails it.
# Then print it to one PDF, _build/html/batch-size-book.pdf (booktools.pdf: headless Chromium,
# needs the Debian package chromium; set BOOK_PDF=0 to skip), which the preface links to.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh book
.venv/bin/jupyter-book build . -W "$@"
if [ "${BOOK_PDF:-1}" != 0 ]; then
  if ! command -v chromium >/dev/null 2>&1 && [ -z "${CHROMIUM:-}" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "build-book: installing chromium with apt-get (for the PDF)"
      apt-get update -q >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
    else
      echo "build-book: the PDF needs Chromium: sudo apt-get install chromium (or BOOK_PDF=0 to skip it)" >&2
      exit 1
    fi
  fi
  .venv/bin/python -m booktools.pdf --html _build/html
fi
echo "book: open _build/html/index.html"
