#!/usr/bin/env bash
# Run the whole test suite: package tests, nbval on every notebook, static notebook checks,
# the strict book build and the HTML checks (headless Chromium, network off).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh test
# PASSIVE: idle OpenMP threads sleep instead of spinning, so two workers sharing 2 cores do not
# slow each other down 15–25× (numerics are unchanged). A cell that hangs fails after 300 s instead of
# holding CI until its limit.
export OMP_WAIT_POLICY=PASSIVE
# loadfile keeps each notebook on a single worker (its cells share one kernel); the book is built once
# per worker that runs one of its test files (tests/test_html.py, tests/test_page_*.py).
# With no arguments, Lighthouse's audit of the chapter pages (marked `audit`) runs after the rest, alone:
# a second worker's notebooks on the same 2 cores would move its scores by ten points.
if [ $# -gt 0 ]; then audit=(); else audit=(-m "not audit"); fi
.venv/bin/python -m pytest -n 2 --dist loadfile "${audit[@]}" \
  --nbval --nbval-current-env --nbval-sanitize-with tests/nbval-sanitize.cfg --nbval-cell-timeout 300 \
  tests book "$@"
if [ $# -eq 0 ]; then
  exec .venv/bin/python -m pytest -p no:cacheprovider -m audit tests/test_page_lighthouse.py
fi
