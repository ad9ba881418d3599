#!/usr/bin/env bash
# Issue 8's speed target, measured on this machine: median latency of ONNX Runtime 1.30 (CPU
# execution provider, one intra-op thread unless -t, batch 1) against
# `furiosa-run --bench --mode sync --workers 1 --sim-pacing off` on the same models, in
# alternating rounds so that both see the same machine load. Prints one row per round and
# model, then the median of the rounds and our latency as a fraction of ONNX Runtime's, per
# simulator kernel level (issue 29's table: the CPU model and its SIMD flags are printed with it).
#
# Usage: tools/ort-compare/compare.sh [-b BUILD_DIR] [-r ROUNDS] [-n RUNS] [-i LEVELS]
#                                     [-t THREADS] [MODEL.onnx ...]
# Defaults: build, 3 rounds, 300 runs, the level `auto` picks, mobilenetv2-12-int8 and
# shufflenet-v2-12-int8 from ../shared/models. LEVELS: comma-separated FURIOSA_SIM_ISA values
# (e.g. avx2,avx512), each measured in the same alternating rounds, or `all` (every level this
# CPU has). THREADS (default 1): ONNX Runtime's intra-op threads and the simulator's compute
# threads (FURIOSA_SIM_COMPUTE_THREADS, intra-op parallelism on), the same number. Needs node
# and npm; onnxruntime-node is installed into BUILD_DIR/ort-compare (npm --ignore-scripts: its
# install script only fetches GPU libraries, which are not used).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build" rounds=3 runs=300 levels=auto threads=1
while getopts "b:r:n:i:t:" opt; do
  case $opt in
    b) build=$(cd "$OPTARG" && pwd) ;;
    r) rounds=$OPTARG ;;
    n) runs=$OPTARG ;;
    i) levels=$OPTARG ;;
    t) threads=$OPTARG ;;
    *) sed -n '2,18p' "$0"; exit 2 ;;
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

if [ "$levels" = all ]; then
  # The levels this CPU has, as sim-bench lists them ("this CPU has: portable avx2 ..."), but
  # portable, whose figures are in seconds, not milliseconds.
  levels=$("$build/tools/sim-bench" --isa none --skip-peak --iterations 1 --qps-seconds 0.01 \
             --repeats 1 "${models[0]}" 2>/dev/null | sed -n 's/.*this CPU has: \([^)]*\)).*/\1/p' |
           tr ' ' '\n' | grep -vx portable | paste -sd, -)
fi
IFS=, read -r -a level_list <<< "$levels"

results="$work/results.tsv"
: > "$results"
printf "%-28s %-12s %5s %12s %12s\n" model level round "ORT p50 ms" "ours p50 ms"
for r in $(seq "$rounds"); do
  for m in "${models[@]}"; do
    name=$(basename "$m" .onnx)
    for level in "${level_list[@]}"; do
      ort_ms=$(node "$work/ort_bench.js" "$m" "$runs" "$threads" |
               python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
      FURIOSA_SIM_ISA=$level FURIOSA_SIM_COMPUTE_THREADS=$threads FURIOSA_SIM_INTRA_OP=1 \
        "$run" "$m" --bench --mode sync --workers 1 --sim-pacing off \
        -n "$runs" --json "$work/ours.json" > /dev/null 2>&1
      our_ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["latency_us"]["p50"] / 1000)' "$work/ours.json")
      printf "%-28s %-12s %5s %12.3f %12.3f\n" "$name" "$level" "$r" "$ort_ms" "$our_ms"
      printf "%s\t%s\t%s\t%s\n" "$name" "$level" "$ort_ms" "$our_ms" >> "$results"
    done
  done
done
python3 - "$results" "$threads" <<'PY'
import statistics, sys
rows, levels = {}, []
for line in open(sys.argv[1]):
    name, level, ort, ours = line.rstrip('\n').split('\t')
    rows.setdefault(name, {}).setdefault(level, []).append((float(ort), float(ours)))
    if level not in levels:
        levels.append(level)
cpu, flags = "unknown CPU", []
try:
    for line in open("/proc/cpuinfo"):
        key, _, value = line.partition(":")
        if key.strip() == "model name" and cpu == "unknown CPU":
            cpu = value.strip()
        if key.strip() in ("flags", "Features") and not flags:
            flags = [f for f in value.split() if f in ("avx2", "avx_vnni", "avx512f", "avx512_vnni",
                                                     "avx512vbmi", "asimd", "asimddp", "i8mm")]
except OSError:
    pass
print()
print(f"CPU: {cpu} ({' '.join(flags) or 'no x86 SIMD flags listed'}); threads: {sys.argv[2]}")
print(f"{'model':28} " + " ".join(f"{l + ' / ORT':>16}" for l in levels) + f" {'ORT median':>12}")
for name, by_level in rows.items():
    ort = statistics.median(p[0] for pairs in by_level.values() for p in pairs)
    cells = []
    for level in levels:
        pairs = by_level.get(level, [])
        o = statistics.median(p[0] for p in pairs)
        u = statistics.median(p[1] for p in pairs)
        cells.append(f"{u:7.3f} ms {u / o:5.2f}x")
    print(f"{name:28} " + " ".join(f"{c:>16}" for c in cells) + f" {ort:9.3f} ms")
PY
