#!/usr/bin/env bash
# Build the HTML book into _build/html from the notebooks' committed outputs (refresh them with
# scripts/execute-notebooks.sh; pytest --nbval checks they still reproduce); any warning fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh book
.venv/bin/jupyter-book build . -W "$@"
echo "book: open _build/html/index.html"
