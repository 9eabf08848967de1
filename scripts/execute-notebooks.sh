#!/usr/bin/env bash
# Re-execute notebooks in place after editing batchlab or a notebook, saving outputs and widget
# state (what nbval compares and what the HTML book shows). usage: scripts/execute-notebooks.sh [NB ...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh book
[ $# -gt 0 ] || set -- book/*.ipynb
# A cell gets 300 s, as under nbval in scripts/test.sh: a kernel that stops answering (seen twice, both
# kernel and client idle) fails the run with a TimeoutError instead of hanging it.
for nb in "$@"; do
  echo "executing $nb"
  rc=0
  log=$(.venv/bin/jupyter execute --inplace --timeout=300 "$nb" 2>&1) || rc=$?
  grep -v -E "TCP without encryption|NbClientApp" <<<"$log" || true
  [ "$rc" = 0 ] || { echo "execute-notebooks: $nb failed (exit $rc)" >&2; exit "$rc"; }
done
