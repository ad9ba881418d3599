#!/usr/bin/env bash
# Issue 8's speed target, measured on this machine: median latency of ONNX Runtime 1.30 (CPU
# execution provider, one intra-op thread, batch 1) against
# `furiosa-run --bench --mode sync --workers 1 --sim-pacing off` on the same models, in
# alternating rounds so that both see the same machine load. Prints one row per round and
# model, then the median of the rounds and our latency as a fraction of ONNX Runtime's.
#
# Usage: tools/ort-compare/compare.sh [-b BUILD_DIR] [-r ROUNDS] [-n RUNS] [MODEL.onnx ...]
# Defaults: build, 3 rounds, 300 runs, mobilenetv2-12-int8 and shufflenet-v2-12-int8 from
# ../shared/models. Needs node and npm; onnxruntime-node is installed into BUILD_DIR/ort-compare
# (npm --ignore-scripts: its install script only fetches GPU libraries, which are not used).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build" rounds=3 runs=300
while getopts "b:r:n:" opt; do
  case $opt in
    b) build=$(cd "$OPTARG" && pwd) ;;
    r) rounds=$OPTARG ;;
    n) runs=$OPTARG ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  shared="$root/../shared/models/onnx-zoo"
  models=("$shared/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"
          "$shared/shufflenet-v2-12-int8/shufflenet-v2-12-int8.onnx")
fi
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "error: model not found: $m" >&2; exit 1; }
done
run="$build/tools/furiosa-run"
[ -x "$run" ] || { echo "error: $run not built (cmake --build $build)" >&2; exit 1; }
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "error: node and npm are needed (apt-get install nodejs npm)" >&2; exit 1; }

work="$build/ort-compare"
mkdir -p "$work"
cp "$here/package.json" "$here/ort_bench.js" "$work/"
if [ ! -d "$work/node_modules/onnxruntime-node" ]; then
  (cd "$work" && npm install --ignore-scripts --no-audit --no-fund --silent) ||
    { echo "error: npm install onnxruntime-node failed" >&2; exit 1; }
fi

results="$work/results.tsv"
: > "$results"
printf "%-28s %5s %12s %12s\n" model round "ORT p50 ms" "ours p50 ms"
for r in $(seq "$rounds"); do
  for m in "${models[@]}"; do
    name=$(basename "$m" .onnx)
    ort_ms=$(node "$work/ort_bench.js" "$m" "$runs" |
             python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
    "$run" "$m" --bench --mode sync --workers 1 --sim-pacing off -n "$runs" \
      --json "$work/ours.json" > /dev/null 2>&1
    our_ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["latency_us"]["p50"] / 1000)' "$work/ours.json")
    printf "%-28s %5s %12.3f %12.3f\n" "$name" "$r" "$ort_ms" "$our_ms"
    printf "%s\t%s\t%s\n" "$name" "$ort_ms" "$our_ms" >> "$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, ort, ours = line.split('\t')
    rows.setdefault(name, []).append((float(ort), float(ours)))
print()
print(f"{'model':28} {'ORT median':>11} {'ours median':>12} {'ours / ORT':>11}")
for name, pairs in rows.items():
    o = statistics.median(p[0] for p in pairs)
    u = statistics.median(p[1] for p in pairs)
    print(f"{name:28} {o:9.3f} ms {u:10.3f} ms {u / o:10.2f}x")
PY
