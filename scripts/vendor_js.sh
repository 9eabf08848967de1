#!/usr/bin/env bash
# Re-create book/_vendor/ from the npm registry (run by hand, NOT at build time).
#
# Why: Sphinx loads MathJax from a CDN by default.  The book must work offline (file:// or an intranet server),
# so we ship exact, pinned copies.  `npm pack` downloads the published tarball of an
# exact version; we check its sha512 (npm "integrity") against the value recorded
# below, unpack it and copy only the files the pages actually load.
#
#   mathjax@3.2.2                       -> es5/tex-mml-chtml.js + CHTML woff-v2 fonts
#                                          + autoloaded TeX extensions
#
# The pages load only the fonts: the formulas are typeset at build time (src/booktools/prerender_math.py runs
# the same mathjax@3.2.2, same integrity, with Node), so no page loads tex-mml-chtml.js any more.
#
# Usage:  scripts/vendor_js.sh            (needs node/npm, network to registry.npmjs.org)
# Then check `git diff --stat book/_vendor` and book/_vendor/MANIFEST.sha256.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/book/_vendor"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# name@version  expected-npm-integrity (sha512, as printed by `npm pack --json`)
PACKAGES=(
  "mathjax@3.2.2 sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="
)

cd "$WORK"
for entry in "${PACKAGES[@]}"; do
  spec="${entry% *}"
  want="${entry#* }"
  tgz="$(npm pack --silent "$spec")"
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [[ "$got" != "$want" ]]; then
    echo "integrity mismatch for $spec: got $got, want $want" >&2
    exit 1
  fi
  name="${spec%@*}"; name="${name#@}"; name="${name//\//-}"
  mkdir -p "$name"
  tar xzf "$tgz" -C "$name"
  echo "ok  $spec  ($tgz)"
done

rm -rf "$DEST"
mkdir -p "$DEST/mathjax/es5/output/chtml/fonts"

# No require.js and no ipywidgets HTML manager (embed-amd.js, 4.4 MB): src/booktools/frozen.py writes
# the frozen explorers as HTML at build time, so no page needs them (issue 29).

# --- MathJax 3 combined component; keep the es5/ layout so that MathJax's
# own root detection ([mathjax] = directory of the script) finds the fonts.
MJ=mathjax/package/es5
cp "$MJ/tex-mml-chtml.js" "$DEST/mathjax/es5/"
cp -r "$MJ/output/chtml/fonts/woff-v2" "$DEST/mathjax/es5/output/chtml/fonts/"
# TeX packages that the combined component autoloads on first use
# (\boldsymbol, \cancel, \color, mathtools, physics, mhchem, ...).
# all-packages.js is only used by explicit configuration, so it is skipped.
# Not copied: a11y/ and sre/ (4 MB; only loaded when a reader turns on the
# accessibility options in MathJax's context menu).
mkdir -p "$DEST/mathjax/es5/input/tex"
cp -r "$MJ/input/tex/extensions" "$DEST/mathjax/es5/input/tex/"
rm "$DEST/mathjax/es5/input/tex/extensions/all-packages.js"

# --- licences
cp mathjax/package/LICENSE "$DEST/mathjax/LICENSE"

cat > "$DEST/README.md" <<'TXT'
Vendored JavaScript, produced by `scripts/vendor_js.sh` (do not edit by hand).

| path | npm package | licence |
|------|-------------|---------|
| mathjax/es5/** | mathjax@3.2.2 | Apache-2.0 |

Served by Sphinx as `_static/<path>` (this folder is in `html_static_path`).
Do NOT rename this folder to `_static`: Jupyter Book 1 would then inject every
`.js` file in it into every page.
TXT

(cd "$DEST" && find . -type f ! -name MANIFEST.sha256 | LC_ALL=C sort | xargs sha256sum > MANIFEST.sha256)
du -sh "$DEST"
