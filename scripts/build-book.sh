#!/usr/bin/env bash
# Build the HTML book into _build/html, executing every chapter; any warning or failing cell fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh book
.venv/bin/jupyter-book build . -W "$@"
echo "book: open _build/html/index.html"
