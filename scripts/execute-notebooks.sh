#!/usr/bin/env bash
# Re-execute notebooks in place after editing batchlab or a notebook, saving outputs and widget
# state (what nbval compares and what the HTML book shows). usage: scripts/execute-notebooks.sh [NB ...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh book
[ $# -gt 0 ] || set -- book/*.ipynb
for nb in "$@"; do
  echo "executing $nb"
  .venv/bin/jupyter execute --inplace "$nb" 2>&1 | grep -v -E "TCP without encryption|NbClientApp" || true
done
