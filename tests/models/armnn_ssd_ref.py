#!/usr/bin/python3
"""Arm NN CpuRef reference outputs of the small uint8 SSD TFLite models of make-tflite-ssd.

Reads what tests/runtime/make_tflite_ssd.cpp writes into DIR (ssd_fast.tflite,
ssd_regular.tflite, ssd_heads.tflite, ssd_postprocess_fast.tflite, ssd_postprocess_regular.tflite
and the uint8 inputs input_<i>.npy, [1, H, W, 3] NHWC) and the heads TFLite's arithmetic gives
(tflite_heads_<i>_0.npy / _1.npy, written by tests/models/tflite_ref.py --all-outputs), runs the
models with Arm NN's CpuRef backend (Debian `python3-pyarmnn` + `libarmnn-cpuref-backend22`, the
TFLite parser of Arm NN 20.08; tests/models/armnn_ref.py's runner) and writes

  armnn_<fast|regular>_<i>_<what>.npy        the full model on input i
  armnn_heads_<i>_boxes.npy                  uint8 [1, A, 4]      (box encodings)
  armnn_heads_<i>_scores.npy                 uint8 [1, A, C + 1]  (LOGISTIC scores)
  armnn_post_<fast|regular>_<src>_<i>_<what>.npy
                                             the post-processing alone on the heads of input i
                                             as Arm NN (src "armnn") or TFLite's arithmetic
                                             (src "tflite") computes them

where <what> is boxes (float32 [1, D, 4], ymin, xmin, ymax, xmax), classes (float32 [1, D]),
scores (float32 [1, D]) or num (float32 [1]).

The post-processing outputs are bound by the names make-tflite-ssd gives them
("TFLite_Detection_PostProcess", ":1", ":2", ":3"), not by position. Arm NN parses every operator
of these models (CONV_2D, DEPTHWISE_CONV_2D, RESHAPE, CONCATENATION, LOGISTIC and the custom
TFLite_Detection_PostProcess); the models use nothing else, so no rewriting is needed.

Usage: /usr/bin/python3 tests/models/armnn_ssd_ref.py DIR
Exit status 0 on success; any failure (pyarmnn missing, parse error, missing file) raises and
exits non-zero, so the CTest fixture fails and the comparison is not run.
"""

import os
import sys
import time

import numpy as np

from armnn_ref import run_armnn_outputs

DPP_OUTPUTS = {"TFLite_Detection_PostProcess": "boxes", "TFLite_Detection_PostProcess:1": "classes",
               "TFLite_Detection_PostProcess:2": "scores", "TFLite_Detection_PostProcess:3": "num"}
HEADS_OUTPUTS = {"concat": "boxes", "convert_scores": "scores"}


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__)
        return 2
    d = sys.argv[1]
    xs = []
    while os.path.exists(os.path.join(d, f"input_{len(xs)}.npy")):
        x = np.load(os.path.join(d, f"input_{len(xs)}.npy"))
        if x.dtype != np.uint8 or x.ndim != 4 or x.shape[0] != 1 or x.shape[3] != 3:
            raise SystemExit(f"input_{len(xs)}.npy: expected uint8 [1, H, W, 3], got {x.dtype} {list(x.shape)}")
        xs.append(x)
    if not xs:
        raise SystemExit(f"no input_0.npy in {d}: run make-tflite-ssd first")
    heads = {"armnn": [], "tflite": []}
    for variant, names in (("fast", DPP_OUTPUTS), ("regular", DPP_OUTPUTS), ("heads", HEADS_OUTPUTS)):
        model = os.path.join(d, f"ssd_{variant}.tflite")
        t0 = time.monotonic()
        ys, out_names, _ = run_armnn_outputs(model, xs)
        seconds = time.monotonic() - t0
        if sorted(out_names) != sorted(names):
            raise SystemExit(f"{model}: outputs {out_names}, expected {sorted(names)}")
        for i, outputs in enumerate(ys):
            by_name = dict(zip(out_names, outputs))
            for tensor, what in names.items():
                np.save(os.path.join(d, f"armnn_{variant}_{i}_{what}.npy"), by_name[tensor])
            if variant == "heads":
                heads["armnn"].append({n: by_name[n] for n in HEADS_OUTPUTS})
                summary = f"box encodings {by_name['concat'].dtype} {list(by_name['concat'].shape)}"
            else:
                n = int(by_name["TFLite_Detection_PostProcess:3"][0])
                classes = by_name["TFLite_Detection_PostProcess:1"][0, :n].astype(int).tolist()
                summary = f"{n} detections, classes {classes}"
            print(f"armnn CpuRef ssd_{variant} input {i}: {summary}")
        print(f"armnn CpuRef ssd_{variant}: parse, optimize and {len(xs)} runs in {seconds:.2f} s")
    for i in range(len(xs)):
        paths = [os.path.join(d, f"tflite_heads_{i}_{k}.npy") for k in (0, 1)]
        for p in paths:
            if not os.path.exists(p):
                raise SystemExit(f"missing {p}: run tests/models/tflite_ref.py on ssd_heads.tflite first")
        heads["tflite"].append(dict(zip(HEADS_OUTPUTS, (np.load(p) for p in paths))))
    # The post-processing alone, on heads that are equal for Arm NN and the runtime under test.
    for variant in ("fast", "regular"):
        model = os.path.join(d, f"ssd_postprocess_{variant}.tflite")
        for src, feeds in heads.items():
            ys, out_names, _ = run_armnn_outputs(model, feeds)
            for i, outputs in enumerate(ys):
                by_name = dict(zip(out_names, outputs))
                for tensor, what in DPP_OUTPUTS.items():
                    np.save(os.path.join(d, f"armnn_post_{variant}_{src}_{i}_{what}.npy"), by_name[tensor])
                n = int(by_name["TFLite_Detection_PostProcess:3"][0])
                print(f"armnn CpuRef ssd_postprocess_{variant} on the {src} heads of input {i}: {n} detections")
    return 0


if __name__ == "__main__":
    sys.exit(main())
