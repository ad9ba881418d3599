#!/usr/bin/env bash
# Issue 8's speed target, measured on this machine: median latency of ONNX Runtime 1.30 (CPU
# execution provider, one intra-op thread unless -t, batch 1) against
# `furiosa-run --bench --mode sync --workers 1 --sim-pacing off` on the same models, in
# alternating rounds so that both see the same machine load. Prints one row per round and
# model, then the median of the rounds and our latency as a fraction of ONNX Runtime's, per
# simulator kernel level (issue 29's table: the CPU model and its SIMD flags are printed with it).
#
# Usage: tools/ort-compare/compare.sh [-b BUILD_DIR] [-r ROUNDS] [-n RUNS] [-i LEVELS]
#                                     [-t THREADS] [-o matched|native] [MODEL.onnx ...]
# Defaults: build, 3 rounds, 300 runs, the level `auto` picks, mobilenetv2-12-int8 and
# shufflenet-v2-12-int8 from ../shared/models. LEVELS: comma-separated FURIOSA_SIM_ISA values
# (e.g. avx2,avx512), each measured in the same alternating rounds, or `all` (every level this
# CPU has). THREADS (default 1): ONNX Runtime's intra-op threads and the simulator's compute
# threads (FURIOSA_SIM_COMPUTE_THREADS, intra-op parallelism on), the same number. -o matched
# (default): ONNX Runtime runs on the same class of CPU as the level it is compared with -- for
# avx2 and avx-vnni it is started with BUILD_DIR/tools/libcpuid-cap.so preloaded
# (FURIOSA_CPUID_CAP=avx2|avx-vnni), which hides AVX-512 (and for avx2 AVX-VNNI) from CPUID so
# that its MLAS kernels are the ones such a CPU runs; -o native: ONNX Runtime always uses every
# instruction this CPU has. Each row names the ORT ISA used. Needs node
# and npm; onnxruntime-node is installed into BUILD_DIR/ort-compare (npm --ignore-scripts: its
# install script only fetches GPU libraries, which are not used).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build" rounds=3 runs=300 levels=auto threads=1 ort_mode=matched
while getopts "b:r:n:i:t:o:" opt; do
  case $opt in
    b) build=$(cd "$OPTARG" && pwd) ;;
    r) rounds=$OPTARG ;;
    n) runs=$OPTARG ;;
    i) levels=$OPTARG ;;
    t) threads=$OPTARG ;;
    o) ort_mode=$OPTARG ;;
    *) sed -n '2,23p' "$0"; exit 2 ;;
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
cp "$here/package.json" "$here/ort_bench.js" "$here/ort_layers.js" "$here/ort_feeds.js" "$work/"
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
case $ort_mode in matched|native) ;; *) echo "error: -o must be matched or native" >&2; exit 2 ;; esac

# The ISA ONNX Runtime is given for a simulator level: the same class of CPU with -o matched.
cap_lib="$build/tools/libcpuid-cap.so"
ort_cap() {
  local level=$1
  if [ "$ort_mode" = native ]; then echo none; return; fi
  case $level in
    avx2|avx-vnni) echo "$level" ;;
    *) echo none ;;
  esac
}
for level in "${level_list[@]}"; do
  cap=$(ort_cap "$level")
  [ "$cap" = none ] && continue
  [ -f "$cap_lib" ] || { echo "error: $cap_lib not built (cmake --build $build --target cpuid-cap), or use -o native" >&2; exit 1; }
  grep -qw cpuid_fault /proc/cpuinfo ||
    { echo "error: this CPU/kernel has no CPUID faulting, so ONNX Runtime cannot be capped at $cap; use -o native" >&2; exit 1; }
done

results="$work/results.tsv"
: > "$results"
printf "%-28s %-12s %-8s %5s %12s %12s\n" model level "ORT ISA" round "ORT p50 ms" "ours p50 ms"
for r in $(seq "$rounds"); do
  for m in "${models[@]}"; do
    name=$(basename "$m" .onnx)
    for level in "${level_list[@]}"; do
      cap=$(ort_cap "$level")
      if [ "$cap" = none ]; then
        ort_json=$(node "$work/ort_bench.js" "$m" "$runs" "$threads")
        ort_isa=native
      else
        ort_json=$(LD_PRELOAD="$cap_lib" FURIOSA_CPUID_CAP=$cap node "$work/ort_bench.js" "$m" "$runs" "$threads")
        ort_isa=$cap
      fi
      ort_ms=$(echo "$ort_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
      FURIOSA_SIM_ISA=$level FURIOSA_SIM_COMPUTE_THREADS=$threads FURIOSA_SIM_INTRA_OP=1 \
        "$run" "$m" --bench --mode sync --workers 1 --sim-pacing off \
        -n "$runs" --json "$work/ours.json" > /dev/null 2>&1
      our_ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["latency_us"]["p50"] / 1000)' "$work/ours.json")
      printf "%-28s %-12s %-8s %5s %12.3f %12.3f\n" "$name" "$level" "$ort_isa" "$r" "$ort_ms" "$our_ms"
      printf "%s\t%s\t%s\t%s\t%s\n" "$name" "$level" "$ort_isa" "$ort_ms" "$our_ms" >> "$results"
    done
  done
done
python3 - "$results" "$threads" <<'PY'
import statistics, sys
rows, levels, ort_isa = {}, [], {}
for line in open(sys.argv[1]):
    name, level, isa, ort, ours = line.rstrip('\n').split('\t')
    rows.setdefault(name, {}).setdefault(level, []).append((float(ort), float(ours)))
    ort_isa[level] = isa
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
print("each cell: our median, ONNX Runtime's median on the ISA in brackets, ours / ORT")
print(f"{'model':28} " + " ".join(f"{l + ' (ORT ' + ort_isa[l] + ')':>32}" for l in levels))
for name, by_level in rows.items():
    cells = []
    for level in levels:
        pairs = by_level.get(level, [])
        o = statistics.median(p[0] for p in pairs)
        u = statistics.median(p[1] for p in pairs)
        cells.append(f"{u:7.3f} ms / {o:7.3f} ms {u / o:5.2f}x")
    print(f"{name:28} " + " ".join(f"{c:>32}" for c in cells))
PY
