#!/usr/bin/env bash
# Installs onnxruntime-node (the version of package.json beside this script) into DIR/node_modules
# for tests/reference, unless that version is already there. Used by the ctest fixture
# ort_node_install; fails (exit 1, with the reason) when node/npm are missing or npm cannot
# install, so the reference tests fail instead of being skipped.
# npm runs with --ignore-scripts: the package's install script only fetches GPU libraries.
#
# Usage: tests/reference/install_ort.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: install_ort.sh DIR}
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "install_ort: node and npm are needed (apt-get install nodejs npm, .ci/install-deps)" >&2; exit 1; }
want=$(node -p "require('$here/package.json').dependencies['onnxruntime-node']")
mkdir -p "$dir"
have=$(node -p "try { require('$dir/node_modules/onnxruntime-node/package.json').version } catch (e) { '' }")
if [ "$have" = "$want" ]; then
  echo "install_ort: onnxruntime-node $have present in $dir"
  exit 0
fi
cp "$here/package.json" "$dir/package.json"
(cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --silent) ||
  { echo "install_ort: npm install onnxruntime-node@$want into $dir failed" >&2; exit 1; }
node -e "require('$dir/node_modules/onnxruntime-node')" ||
  { echo "install_ort: onnxruntime-node@$want installed into $dir but does not load" >&2; exit 1; }
echo "install_ort: onnxruntime-node $want installed into $dir"
