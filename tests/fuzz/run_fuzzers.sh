#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for a bounded time (issue 19): first over its kept
# regression inputs (tests/fuzz/regressions/TARGET/, every crash ever found), then fuzzing from
# seeds built from the real files in ../shared/models. Fails on any crash, sanitizer report,
# leak, timeout (-timeout per input) or allocation over -malloc_limit_mb; the input is left in
# FUZZ_BUILD/fuzz-artifacts/ (copy it to tests/fuzz/regressions/TARGET/ with the fix).
#   usage: [FUZZ_JOBS=N] tests/fuzz/run_fuzzers.sh FUZZ_BUILD_DIR [SECONDS_PER_TARGET=60] [FURIOSA_COMPILE]
# FURIOSA_COMPILE (default FUZZ_BUILD_DIR/tools/furiosa-compile, else build/tools/furiosa-compile)
# compiles mnist-12-int8 into the .enf seed of fuzz_program_file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "$1" && pwd)"
seconds="${2:-60}"
models="${FURIOSA_SHARED_MODELS_DIR:-$repo/../shared/models}"
[ -d "$models" ] || { echo "run_fuzzers: the shared models folder '$models' is missing (../shared/models)" >&2; exit 1; }
compile="${3:-}"
for c in "$compile" "$build/tools/furiosa-compile" "$repo/build/tools/furiosa-compile"; do
  if [ -n "$c" ] && [ -x "$c" ]; then compile="$c"; break; fi
done

work="$build/fuzz-work"
artifacts="$build/fuzz-artifacts"
rm -rf "$work"
mkdir -p "$work" "$artifacts"

# ---- seeds --------------------------------------------------------------------------------------
seed() {  # seed TARGET FILE [PREFIX_BYTE_OCTAL]: copies FILE into TARGET's corpus, optionally prefixed
  local dir="$work/$1"; mkdir -p "$dir"
  local out="$dir/$(basename "$(dirname "$2")")-$(basename "$2")"
  if [ -n "${3:-}" ]; then { printf "\\$3"; cat "$2"; } > "$out.$3"; else cp "$2" "$out"; fi
}
for m in "$models"/onnx-zoo/mnist-12-int8/*.onnx "$models"/onnx-zoo/mnist-8/*.onnx "$models"/onnx-node-tests/*/model.onnx; do
  seed fuzz_onnx_model "$m"
done
for m in "$models"/furiosa-sdk/MNISTnet_uint8_quant*/*.tflite; do seed fuzz_tflite_model "$m"; done
for t in "$models"/onnx-zoo/mnist-12-int8/test_data_set_0/*.pb "$models"/onnx-node-tests/*/test_data_set_0/*.pb; do
  seed fuzz_tensor_file "$t" 000   # even first byte: TensorProto
done
/usr/bin/python3 - "$work/npy" <<'PY'
import sys, os, numpy as np
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
np.save(f"{d}/f32.npy", np.arange(784, dtype=np.float32).reshape(1, 1, 28, 28))
np.save(f"{d}/u8.npy", np.arange(5, dtype=np.uint8))
np.save(f"{d}/i64.npy", np.int64(7))
PY
for t in "$work"/npy/*.npy; do seed fuzz_tensor_file "$t" 001; done   # odd first byte: .npy
if [ -n "$compile" ] && [ -x "$compile" ]; then
  "$compile" "$models/onnx-zoo/mnist-12-int8/mnist-12-int8.onnx" -o "$work/mnist-12-int8.enf" >/dev/null
  seed fuzz_program_file "$work/mnist-12-int8.enf"
else
  echo "run_fuzzers: no furiosa-compile found: fuzz_program_file starts without an .enf seed" >&2
fi
# Real inference requests for fuzz_v2_request (the mnist-12-int8 test input as furiosa-serve's
# clients send it): a JSON body alone (odd first byte), and whole HTTP requests (even first
# byte) with a JSON body, with the binary tensor data extension and chunked.
/usr/bin/python3 - "$work/v2" "$models/onnx-zoo/mnist-12-int8/test_data_set_0/input_0.pb" <<'PY'
import sys, os, json, onnx
from onnx import numpy_helper
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
t = onnx.TensorProto(); t.ParseFromString(open(sys.argv[2], "rb").read())
x = numpy_helper.to_array(t)
def request(data, params=None):
    i = {"name": "Input3", "datatype": "FP32", "shape": [1, 1, 28, 28]}
    i.update({"parameters": params} if params else {"data": data})
    u8 = {"name": "u8", "datatype": "UINT8", "shape": [2, 3], "data": [[0, 1, 2], [253, 254, 255]]}
    return json.dumps({"id": "r1", "inputs": [i, u8], "parameters": {"timeout_us": 1000}}).encode()
body = request(x.reshape(28, 28).tolist())
open(f"{d}/json.body", "wb").write(body)
def http(body, extra=b""):
    return b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\n" + extra + \
        b"Content-Length: %d\r\n\r\n" % len(body) + body
open(f"{d}/json.http", "wb").write(http(body))
head = request(None, {"binary_data_size": x.nbytes})
open(f"{d}/binary.http", "wb").write(http(head + x.tobytes(), b"Inference-Header-Content-Length: %d\r\n" % len(head)))
chunks = b"".join(b"%x\r\n" % len(body[i:i + 1000]) + body[i:i + 1000] + b"\r\n" for i in range(0, len(body), 1000))
open(f"{d}/chunked.http", "wb").write(b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\n"
                                     b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n")
PY
seed fuzz_v2_request "$work/v2/json.body" 001
for s in "$work"/v2/*.http; do seed fuzz_v2_request "$s" 000; done
# The same input as a gRPC ModelInferRequest (protoc --encode of a text-format message): typed
# contents, and raw_input_contents with an output asked for.
/usr/bin/python3 - "$work/grpc" "$models/onnx-zoo/mnist-12-int8/test_data_set_0/input_0.pb" <<'PY'
import sys, os, onnx
from onnx import numpy_helper
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
t = onnx.TensorProto(); t.ParseFromString(open(sys.argv[2], "rb").read())
x = numpy_helper.to_array(t).reshape(-1)
def tensor(name, datatype, shape, contents=None):
    c = f" contents {{ {contents} }}" if contents else ""
    return f'inputs {{ name: "{name}" datatype: "{datatype}" ' + " ".join(f"shape: {s}" for s in shape) + c + " }\n"
typed = 'model_name: "mnist" id: "r1"\n'
typed += tensor("Input3", "FP32", [1, 1, 28, 28], " ".join(f"fp32_contents: {v!r}" for v in x.tolist()))
typed += tensor("u8", "UINT8", [2, 3], " ".join(f"uint_contents: {v}" for v in [0, 1, 2, 253, 254, 255]))
typed += tensor("i64", "INT64", [3], "int64_contents: -1 int64_contents: 0 int64_contents: 9223372036854775807")
open(f"{d}/typed.txt", "w").write(typed)
def esc(b): return "".join(f"\\{c:03o}" for c in b)
raw = 'model_name: "mnist"\n' + tensor("Input3", "FP32", [1, 1, 28, 28]) + tensor("u8", "UINT8", [2, 3])
raw += tensor("i64", "INT64", [3]) + 'outputs { name: "u8" }\n'
raw += f'raw_input_contents: "{esc(x.astype("<f4").tobytes())}"\n'
raw += f'raw_input_contents: "{esc(bytes([0, 1, 2, 253, 254, 255]))}"\n'
raw += f'raw_input_contents: "{esc((7).to_bytes(8, "little") * 3)}"\n'
open(f"{d}/raw.txt", "w").write(raw)
PY
for s in "$work"/grpc/*.txt; do
  protoc --proto_path="$repo/server/proto" --encode=inference.ModelInferRequest grpc_predict_v2.proto \
    < "$s" > "${s%.txt}.bin"
  seed fuzz_grpc_infer_request "${s%.txt}.bin"
done
for s in "$here"/seeds/trace_file/*.json; do seed fuzz_trace_file "$s" 001; done
for s in "$here"/seeds/trace_file/*.csv; do seed fuzz_trace_file "$s" 000; done
for s in "$here"/seeds/device_spec/*; do seed fuzz_device_spec "$s"; done

# ---- runs ---------------------------------------------------------------------------------------
# FUZZ_JOBS targets at a time (default 1): each libFuzzer process uses one core, and the time limit
# is wall-clock, so run at most one per free core. Each target's output is printed in order.
run_target() {  # run_target TARGET: replays the regressions, then fuzzes; non-zero on any failure
  local target="$1" exe="$build/tests/fuzz/$1"
  local flags=(-timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=1024 -artifact_prefix="$artifacts/$target-")
  if compgen -G "$here/regressions/$target/*" >/dev/null; then
    echo "== $target: regression inputs"
    "$exe" "${flags[@]}" "$here"/regressions/$target/* 2>&1 | tail -n 3 || return 1
  fi
  mkdir -p "$work/$target"
  echo "== $target: fuzzing ${seconds} s from $(ls "$work/$target" | wc -l) seeds"
  if ! "$exe" "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 "$work/$target" > "$work/$target.log" 2>&1; then
    tail -n 60 "$work/$target.log"
    echo "run_fuzzers: $target FAILED; the input is in $artifacts/" >&2
    return 1
  fi
  grep -E "stat::number_of_executed_runs|stat::peak_rss_mb|cov:" "$work/$target.log" | tail -n 3 | tr '\n' ' '
  echo
}
targets=(fuzz_onnx_model fuzz_tflite_model fuzz_tensor_file fuzz_program_file fuzz_trace_file fuzz_device_spec
         fuzz_v2_request fuzz_grpc_infer_request)
for target in "${targets[@]}"; do
  exe="$build/tests/fuzz/$target"
  [ -x "$exe" ] || { echo "run_fuzzers: $exe was not built (cmake --build $build --target fuzzers)" >&2; exit 1; }
done
jobs_max="${FUZZ_JOBS:-1}"
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  { if run_target "$target"; then r=ok; else r=failed; fi; echo "$r" > "$work/$target.status"; } > "$work/$target.out" 2>&1 &
done
wait
status=0
for target in "${targets[@]}"; do
  cat "$work/$target.out"
  [ "$(cat "$work/$target.status" 2>/dev/null)" = ok ] || status=1
done
exit $status
