#!/usr/bin/env bash
# The report's first screen as a user sees it: a headless Chromium screenshot of report.html.
# Usage: scripts/screenshot-report.sh REPORT.html OUT.png [WIDTH,HEIGHT]   (Debian: apt-get install chromium)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 REPORT.html OUT.png [WIDTH,HEIGHT]" >&2; exit 2; }
html=$(realpath -e -- "$1") || { echo "screenshot: $1: no such file" >&2; exit 2; }
out=$(realpath -m -- "$2")
size=${3:-1400,1000}
[[ $size =~ ^[0-9]{3,4},[0-9]{3,5}$ ]] || { echo "screenshot: size must be WIDTH,HEIGHT (e.g. 1400,1000)" >&2; exit 2; }
browser=$(command -v chromium || command -v chromium-browser) || { echo "screenshot: chromium not found (apt-get install chromium)" >&2; exit 1; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$profile" --window-size="$size" \
  --screenshot="$out" "file://$html" >/dev/null 2>&1
[ -s "$out" ] || { echo "screenshot: chromium wrote no $out" >&2; exit 1; }
echo "$out"
