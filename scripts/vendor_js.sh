#!/usr/bin/env bash
# Re-create book/_vendor/ from the npm registry (run by hand, NOT at build time).
#
# Why: myst-nb and Sphinx load require.js, the ipywidgets HTML manager and MathJax
# from CDNs by default.  The book must work offline (file:// or an intranet server),
# so we ship exact, pinned copies.  `npm pack` downloads the published tarball of an
# exact version; we check its sha512 (npm "integrity") against the value recorded
# below, unpack it and copy only the files the pages actually load.
#
#   requirejs@2.3.4                     -> require.js          (myst-nb default: 2.3.4)
#   @jupyter-widgets/html-manager@1.0.6 -> embed-amd.js          (myst-nb 1.4 default;
#                                          html-manager 1.x = ipywidgets 8 / controls 2.0)
#   mathjax@3.2.2                       -> es5/tex-mml-chtml.js + CHTML woff-v2 fonts
#                                          + autoloaded TeX extensions
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
  "requirejs@2.3.4 sha512-qPD5gRrj6kGQ0ZySAJgqbArkaDqPMbQIT0zSZDkIv1mfA17w/tR2Faq5l2qqRf2CdQx6FWln9nUrgd2UDzb19A=="
  "@jupyter-widgets/html-manager@1.0.6 sha512-+Mn+Ra8wyIHrYaUpfmf9A3dsLkt/NuwzPQN8sthdxBD35VV5cOJbpmgMhNR27n/rmP3mKyEe0PWCJrtZrXTXDQ=="
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
mkdir -p "$DEST/requirejs" "$DEST/jupyter-widgets" "$DEST/mathjax/es5/output/chtml/fonts"

# --- require.js (the npm tarball ships the unminified build only)
cp requirejs/package/require.js "$DEST/requirejs/require.js"

# --- ipywidgets embedder (AMD flavour, as myst-nb expects).  Its Font Awesome
# font files are NOT copied: embed-amd.js resolves them against the require.js
# module id (<page dir>/@jupyter-widgets/html-manager/dist/...), not against its
# own URL, so they 404 even from the CDN.  Only icon-bearing widgets (buttons
# with `icon=`) are affected; sliders/HTML/plots are not.
HM=jupyter-widgets-html-manager/package
cp "$HM/dist/embed-amd.js" "$DEST/jupyter-widgets/embed-amd.js"

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
cp requirejs/package/package.json "$DEST/requirejs/package.json"
cp "$HM/LICENSE" "$DEST/jupyter-widgets/LICENSE"
cp "$HM/dist/embed.js.LICENSE.txt" "$DEST/jupyter-widgets/THIRD-PARTY-LICENSES.txt"
cp mathjax/package/LICENSE "$DEST/mathjax/LICENSE"

# requirejs 2.3.4's tarball has no LICENSE file; its package.json says MIT.
cat > "$DEST/README.md" <<'TXT'
Vendored JavaScript, produced by `scripts/vendor_js.sh` (do not edit by hand).

| path | npm package | licence |
|------|-------------|---------|
| requirejs/require.js | requirejs@2.3.4 | MIT (see requirejs/package.json) |
| jupyter-widgets/embed-amd.js | @jupyter-widgets/html-manager@1.0.6 | BSD-3-Clause (+ bundled deps, see THIRD-PARTY-LICENSES.txt) |
| mathjax/es5/** | mathjax@3.2.2 | Apache-2.0 |

Served by Sphinx as `_static/<path>` (this folder is in `html_static_path`).
Do NOT rename this folder to `_static`: Jupyter Book 1 would then inject every
`.js` file in it into every page.
TXT

(cd "$DEST" && find . -type f ! -name MANIFEST.sha256 | LC_ALL=C sort | xargs sha256sum > MANIFEST.sha256)
du -sh "$DEST"
