#!/usr/bin/env bash
# Installs the one npm package that PACKAGE_JSON depends on (at the version it names) into
# DIR/node_modules, unless that version is already there. Used by the ctest fixtures that bring a
# reference tool from npm into the build tree: ort_node_install (onnxruntime-node,
# tests/reference/package.json) and trace_engine_install (Chrome DevTools' trace engine,
# tests/profiler/devtools/package.json). Fails (exit 1, with the reason) when node/npm are missing
# or npm cannot install, so the tests needing the package fail instead of being skipped.
# npm runs with --ignore-scripts: onnxruntime-node's install script only fetches GPU libraries.
#
# Usage: tests/install_npm_package.sh PACKAGE_JSON DIR
set -euo pipefail
manifest=$(cd "$(dirname "${1:?usage: install_npm_package.sh PACKAGE_JSON DIR}")" && pwd)/$(basename "$1")
dir=${2:?usage: install_npm_package.sh PACKAGE_JSON DIR}
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "install_npm_package: node and npm are needed (apt-get install nodejs npm, .ci/install-deps)" >&2; exit 1; }
name=$(node -p "Object.keys(require('$manifest').dependencies)[0]")
want=$(node -p "require('$manifest').dependencies['$name']")
mkdir -p "$dir"
have=$(node -p "try { require('$dir/node_modules/$name/package.json').version } catch (e) { '' }")
if [ "$have" = "$want" ]; then
  echo "install_npm_package: $name $have present in $dir"
  exit 0
fi
cp "$manifest" "$dir/package.json"
(cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --silent) ||
  { echo "install_npm_package: npm install $name@$want into $dir failed" >&2; exit 1; }
[ -f "$dir/node_modules/$name/package.json" ] ||
  { echo "install_npm_package: $name@$want installed into $dir but its package.json is missing" >&2; exit 1; }
echo "install_npm_package: $name $want installed into $dir"
