#!/usr/bin/python3
"""Write YOLOv8n (640x640, 80 classes, 8400 anchor points) as an int8 ONNX graph with
deterministic random weights, in QOperator form (QDQ form: tests/models/qoperator_to_qdq.py).

Usage:
    /usr/bin/python3 models/yolov8n.py OUT.onnx [--seed S] [--quiet]
    cmake --build BUILD --target yolov8n-model   # BUILD/models/yolov8n{,_qdq}.onnx

Needs Debian's python3-onnx (1.12) and python3-numpy only; run it with /usr/bin/python3.
Takes about 10-20 s here; the file is about 3.3 MB.

What it builds
--------------
The network of Ultralytics' YOLOv8n (ultralytics/cfg/models/v8/yolov8.yaml at scale n: depth
0.33, width 0.25), as Ultralytics' ONNX export writes it, with its decode head:

- input `images`: float32 [1, 3, 640, 640] NCHW in [0, 1] (pixel / 255), quantized by
  `QuantizeLinear` with scale 1/255, zero point 0.
- `Conv` blocks: k x k conv (padding k // 2, BatchNorm folded into weights and bias) + SiLU.
  SiLU x * sigmoid(x) is written as ONNX Runtime's quantizer writes it: `QLinearSigmoid` then
  `QLinearMul` of the conv output and its sigmoid (both com.microsoft).
- backbone: Conv 16 3x3/2, Conv 32 3x3/2, C2f 32 (1 bottleneck, shortcut), Conv 64 3x3/2, C2f 64
  (2), Conv 128 3x3/2, C2f 128 (2), Conv 256 3x3/2, C2f 256 (1), SPPF 256 (three 5x5/1 MaxPools).
- neck (PAN): nearest 2x `Resize` + Concat + C2f 128 (no shortcut), Resize + Concat + C2f 64
  (P3, 80x80), Conv 3x3/2 + Concat + C2f 128 (P4, 40x40), Conv 3x3/2 + Concat + C2f 256 (P5,
  20x20).
- C2f(c_out, n): 1x1 Conv to 2c (c = c_out / 2), `Split` into two halves, n bottlenecks on the
  second half (two 3x3 Convs, plus the input when shortcut: `QLinearAdd`), `QLinearConcat` of
  the halves and every bottleneck output, 1x1 Conv to c_out. SPPF: 1x1 Conv to 128, three
  MaxPools in a row, QLinearConcat of the four, 1x1 Conv to 256.
- Detect head per level (P3, P4, P5): box branch Conv 64 3x3, Conv 64 3x3, conv 1x1 to
  4 x 16 (DFL bins, no SiLU); class branch Conv 80 3x3, Conv 80 3x3, conv 1x1 to 80 (no SiLU);
  QLinearConcat -> [1, 144, h, w], Reshape [1, 144, h * w]; the three levels QLinearConcat on
  axis 2 -> [1, 144, 8400] (80*80 + 40*40 + 20*20), then `DequantizeLinear` -> output `raw`.
- decode on float (Ultralytics' Detect._inference): Split [64, 80]; DFL: Reshape [1, 4, 16, 8400],
  Transpose (0, 2, 1, 3), Softmax over the 16 bins, 1x1 `Conv` with the fixed weights 0..15
  (the expected distance), Reshape [1, 4, 8400]; dist2bbox: Split into left-top / right-bottom,
  x1y1 = anchor - lt, x2y2 = anchor + rb, centre (x1y1 + x2y2) / 2, size x2y2 - x1y1, times
  the level's stride (8, 16, 32); anchors are cell centres (x + 0.5, y + 0.5). Class scores:
  Sigmoid. Output `output0`: float32 [1, 84, 8400] (cx, cy, w, h in input pixels, then 80 class
  scores), Ultralytics' layout; NMS is left to the caller (C++: furiosa/postprocess/yolo.h).

Operator forms (ONNX Runtime's static quantizer in QOperator form): `QLinearConv` with uint8
activations, int8 symmetric per-output-channel weights, int32 bias; MaxPool, Resize, Split and
Reshape on uint8 (they keep their input's scale); com.microsoft QLinearSigmoid, QLinearMul,
QLinearAdd and QLinearConcat.

Weights and scales
------------------
numpy PCG64 seeded with --seed (default 0), as models/ssd_mobilenet_v1.py does (its helpers are
reused): conv weights normal with std 1 / sqrt(fan_in), then BatchNorm folded with the
calibration input's statistics (each output channel scaled and shifted to standard deviation 1
and mean 0 plus normal noise of std 0.1, as a trained network's BN would leave it; the head's
DFL logits std 2, its class logits std 1.5 and mean -8, so that few anchors score high, as
in a real detector), int8 symmetric per output channel in 7 bits (ONNX Runtime's reduce_range,
which keeps its u8s8 kernels exact on CPUs without VNNI; see ssd_mobilenet_v1.py), int32 biases.
Activation scales from a float32 numpy forward pass on one seeded calibration input (uniform
[0, 1)) in which every layer sees the previous layer's quantized values: min/max (extended to
0) -> scale (max - min) / 255 rounded up to the next 2^(k/8), zp rint(-min / scale). Sigmoid
outputs use [0, 1]. Each concatenation's and residual sum's output range covers its inputs', so
nothing saturates on the calibration input.

MACs (convolutions; printed by the script): about 4.37 G per image.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ssd_mobilenet_v1 import Builder, conv_float, dequantize, print_summary, quant_params, quantize  # noqa: E402

IMAGE = 640
NUM_CLASSES = 80
REG_MAX = 16
STRIDES = (8, 16, 32)
INPUT_SCALE = np.float32(1.0 / 255.0)
INPUT_ZP = np.uint8(0)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x.astype(np.float32)))).astype(np.float32)


class YoloBuilder(Builder):
    """Adds YOLOv8's blocks to the SSD script's Builder (initializers, scales, statistics).
    An activation is a tuple (tensor name, uint8 value [C, H, W], scale, zp, scale name, zp name)."""

    def __init__(self, seed: int):
        super().__init__(seed, weight_max=64)
        self.count: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        k = self.count.get(base, 0)
        self.count[base] = k + 1
        return f"{base}_{k}" if k else base

    def node(self, op: str, inputs, outputs, name: str, domain: str = "", **attrs) -> None:
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))

    def quantized(self, name: str, yf: np.ndarray, lo: float | None = None, hi: float | None = None, kind: str = ""):
        """Chooses the output parameters of float values yf (or of [lo, hi]); returns the activation."""
        lo = float(yf.min()) if lo is None else lo
        hi = float(yf.max()) if hi is None else hi
        s, zp = quant_params(lo, hi)
        q = quantize(yf, s, zp)
        if kind:
            self.record(kind, q)
        s_name, zp_name = self.qparams(name, s, zp)
        return (name + "_quantized", q, s, zp, s_name, zp_name)

    def conv(self, x, name: str, cout: int, k: int, stride: int = 1, silu: bool = True, out_std: float = 1.0,
             bias_mean: float = 0.0, bias_std: float = 0.1):
        xname, xq, xs, xzp, xs_name, xzp_name = x
        cin, h, w = xq.shape
        fan_in = cin * k * k
        pad = k // 2
        xf = dequantize(xq, xs, xzp)
        wf = self.rng.standard_normal((cout, cin, k, k), dtype=np.float32) * np.float32(1.0 / math.sqrt(fan_in))
        # BatchNorm folded with the calibration input's statistics: each output channel gets
        # standard deviation out_std and mean bias_mean (plus a little noise), as a trained
        # network's BN would give it.
        y0 = conv_float(xf, wf, np.zeros(cout, np.float32), stride, (pad, pad), 1)
        mean = y0.reshape(cout, -1).mean(axis=1)
        std = np.maximum(y0.reshape(cout, -1).std(axis=1), np.float32(1e-6))
        gamma = (np.float32(out_std) / std).astype(np.float32)
        wf = (wf * gamma[:, None, None, None]).astype(np.float32)
        bf = (np.float32(bias_mean) - mean * gamma +
              self.rng.standard_normal(cout, dtype=np.float32) * np.float32(bias_std)).astype(np.float32)
        qmax = self.weight_max
        ws = (np.abs(wf).reshape(cout, -1).max(axis=1) / np.float32(qmax)).astype(np.float32)
        wq = np.clip(np.rint(wf / ws[:, None, None, None]), -qmax, qmax).astype(np.int8)
        bscale = (np.float32(xs) * ws).astype(np.float32)
        bq = np.rint(bf / bscale).astype(np.int32)
        yf = conv_float(xf, wq.astype(np.float32) * ws[:, None, None, None],
                        bq.astype(np.float32) * bscale, stride, (pad, pad), 1)
        y = self.quantized(name + "_conv", yf, kind="conv" if silu else "head conv")
        self.nodes.append(helper.make_node(
            "QLinearConv",
            [xname, xs_name, xzp_name,
             self.init(name + ".weight_quantized", wq),
             self.init(name + ".weight_scale", ws),
             self.init(name + ".weight_zero_point", np.zeros(cout, np.int8)),
             y[4], y[5],
             self.init(name + ".bias_quantized", bq)],
            [y[0]], name=name + "_QLinearConv", dilations=[1, 1], group=1, kernel_shape=[k, k],
            pads=[pad, pad, pad, pad], strides=[stride, stride]))
        _, ho, wo = y[1].shape
        self.macs += cout * ho * wo * fan_in
        self.params += wf.size + cout
        self.n_conv += 1
        return self.silu(y, name) if silu else y

    def silu(self, x, name: str):
        """QLinearSigmoid(x) then QLinearMul(x, sigmoid): ONNX Runtime's quantized SiLU."""
        xname, xq, xs, xzp, xs_name, xzp_name = x
        xf = dequantize(xq, xs, xzp)
        sig = self.quantized(name + "_sigmoid", sigmoid(xf), 0.0, 1.0)
        self.node("QLinearSigmoid", [xname, xs_name, xzp_name, sig[4], sig[5]], [sig[0]], name + "_QLinearSigmoid",
                  domain="com.microsoft")
        yf = (xf * dequantize(sig[1], sig[2], sig[3])).astype(np.float32)
        y = self.quantized(name + "_silu", yf, kind="silu")
        self.node("QLinearMul", [xname, xs_name, xzp_name, sig[0], sig[4], sig[5], y[4], y[5]], [y[0]],
                  name + "_QLinearMul", domain="com.microsoft")
        return y

    def add(self, a, b, name: str):
        fa, fb = dequantize(a[1], a[2], a[3]), dequantize(b[1], b[2], b[3])
        yf = (fa + fb).astype(np.float32)
        y = self.quantized(name, yf, kind="residual add")
        self.node("QLinearAdd", [a[0], a[4], a[5], b[0], b[4], b[5], y[4], y[5]], [y[0]], name + "_QLinearAdd",
                  domain="com.microsoft")
        return y

    def concat(self, parts, name: str, axis: int):
        """QLinearConcat (axis of the ONNX tensor, batch included); output range = union of the inputs'."""
        floats = [dequantize(p[1], p[2], p[3]) for p in parts]
        lo = min(float(f.min()) for f in floats)
        hi = max(float(f.max()) for f in floats)
        s, zp = quant_params(lo, hi)
        s_name, zp_name = self.qparams(name, s, zp)
        ins = [s_name, zp_name]
        for p in parts:
            ins += [p[0], p[4], p[5]]
        out = name + "_quantized"
        self.node("QLinearConcat", ins, [out], name + "_QLinearConcat", domain="com.microsoft", axis=axis)
        q = np.concatenate([quantize(f, s, zp) for f in floats], axis=axis - 1)
        return (out, q, s, zp, s_name, zp_name)

    def split(self, x, name: str, sizes: list[int]):
        """Split on channels (uint8, the input's parameters)."""
        outs = [f"{name}_split{i}" for i in range(len(sizes))]
        self.node("Split", [x[0], self.init(name + "_split_sizes", np.array(sizes, np.int64))], outs, name + "_Split",
                  axis=1)
        parts, start = [], 0
        for o, n in zip(outs, sizes):
            parts.append((o, x[1][start:start + n], x[2], x[3], x[4], x[5]))
            start += n
        return parts

    def maxpool(self, x, name: str):
        """5x5 / 1 MaxPool with padding 2 on uint8 (uint8 values are >= 0, so zero padding never wins)."""
        q = np.pad(x[1], ((0, 0), (2, 2), (2, 2)))
        c, h, w = x[1].shape
        y = np.zeros_like(x[1])
        for i in range(5):
            for j in range(5):
                y = np.maximum(y, q[:, i:i + h, j:j + w])
        out = name + "_pooled"
        self.node("MaxPool", [x[0]], [out], name + "_MaxPool", kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
        return (out, y, x[2], x[3], x[4], x[5])

    def upsample(self, x, name: str):
        """Nearest 2x Resize on uint8 (PyTorch's nn.Upsample as exported: asymmetric, floor)."""
        out = name + "_resized"
        self.node("Resize", [x[0], "", self.init(name + "_scales", np.array([1, 1, 2, 2], np.float32))], [out],
                  name + "_Resize", mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        return (out, x[1].repeat(2, axis=1).repeat(2, axis=2), x[2], x[3], x[4], x[5])

    def c2f(self, x, name: str, cout: int, n: int, shortcut: bool):
        c = cout // 2
        y = self.conv(x, name + ".cv1", 2 * c, 1)
        parts = self.split(y, name, [c, c])
        for i in range(n):
            t = self.conv(parts[-1], f"{name}.m.{i}.cv1", c, 3)
            t = self.conv(t, f"{name}.m.{i}.cv2", c, 3)
            if shortcut:
                t = self.add(parts[-1], t, f"{name}.m.{i}.add")
            parts.append(t)
        return self.conv(self.concat(parts, name + ".cat", 1), name + ".cv2", cout, 1)

    def sppf(self, x, name: str, cout: int):
        y = self.conv(x, name + ".cv1", x[1].shape[0] // 2, 1)
        parts = [y]
        for i in range(3):
            parts.append(self.maxpool(parts[-1], f"{name}.m{i}"))
        return self.conv(self.concat(parts, name + ".cat", 1), name + ".cv2", cout, 1)

    def detect_level(self, x, name: str):
        """Box and class branches of one level -> QLinearConcat [144, h, w] -> Reshape [144, h*w]."""
        b = self.conv(x, name + ".cv2.0", 4 * REG_MAX, 3)
        b = self.conv(b, name + ".cv2.1", 4 * REG_MAX, 3)
        b = self.conv(b, name + ".cv2.2", 4 * REG_MAX, 1, silu=False, out_std=2.0)
        c = self.conv(x, name + ".cv3.0", NUM_CLASSES, 3)
        c = self.conv(c, name + ".cv3.1", NUM_CLASSES, 3)
        c = self.conv(c, name + ".cv3.2", NUM_CLASSES, 1, silu=False, out_std=1.5, bias_mean=-8.0, bias_std=0.5)
        y = self.concat([b, c], name + ".cat", 1)
        out = name + "_flat"
        ch, h, w = y[1].shape
        self.node("Reshape", [y[0], self.init(name + "_flat_shape", np.array([1, ch, h * w], np.int64))], [out],
                  name + "_Reshape")
        return (out, y[1].reshape(ch, h * w), y[2], y[3], y[4], y[5])


def anchors_and_strides() -> tuple[np.ndarray, np.ndarray]:
    """Ultralytics' make_anchors (offset 0.5): points [2, 8400] (x, y in cells) and strides [1, 8400]."""
    points, strides = [], []
    for s in STRIDES:
        g = IMAGE // s
        ys, xs = np.meshgrid(np.arange(g, dtype=np.float32) + 0.5, np.arange(g, dtype=np.float32) + 0.5, indexing="ij")
        points.append(np.stack([xs.reshape(-1), ys.reshape(-1)]))
        strides.append(np.full((1, g * g), s, np.float32))
    return np.concatenate(points, axis=1), np.concatenate(strides, axis=1)


def decode_head(b: YoloBuilder, raw: str, n: int) -> str:
    """Ultralytics' Detect._inference on the float [1, 144, n] tensor `raw`; returns `output0`."""
    nodes = b.nodes
    c = b.init
    nodes.append(helper.make_node("Split", [raw, c("head_split", np.array([4 * REG_MAX, NUM_CLASSES], np.int64))],
                                  ["box", "cls"], name="head_Split", axis=1))
    nodes.append(helper.make_node("Reshape", ["box", c("dfl_shape", np.array([1, 4, REG_MAX, n], np.int64))],
                                  ["dfl_bins"], name="dfl_Reshape"))
    nodes.append(helper.make_node("Transpose", ["dfl_bins"], ["dfl_transposed"], name="dfl_Transpose", perm=[0, 2, 1, 3]))
    nodes.append(helper.make_node("Softmax", ["dfl_transposed"], ["dfl_softmax"], name="dfl_Softmax", axis=1))
    nodes.append(helper.make_node("Conv", ["dfl_softmax", c("dfl.conv.weight",
                                                           np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1))],
                                  ["dfl_conv"], name="dfl_Conv", kernel_shape=[1, 1]))
    nodes.append(helper.make_node("Reshape", ["dfl_conv", c("dist_shape", np.array([1, 4, n], np.int64))], ["dist"],
                                  name="dfl_Reshape_out"))
    nodes.append(helper.make_node("Split", ["dist", c("dist_split", np.array([2, 2], np.int64))], ["lt", "rb"],
                                  name="dist2bbox_Split", axis=1))
    points, strides = anchors_and_strides()
    nodes.append(helper.make_node("Sub", [c("anchor_points", points[None]), "lt"], ["x1y1"], name="dist2bbox_Sub"))
    nodes.append(helper.make_node("Add", ["anchor_points", "rb"], ["x2y2"], name="dist2bbox_Add"))
    nodes.append(helper.make_node("Add", ["x1y1", "x2y2"], ["xy_sum"], name="dist2bbox_Add_1"))
    nodes.append(helper.make_node("Div", ["xy_sum", c("two", np.array(2.0, np.float32))], ["c_xy"], name="dist2bbox_Div"))
    nodes.append(helper.make_node("Sub", ["x2y2", "x1y1"], ["wh"], name="dist2bbox_Sub_1"))
    nodes.append(helper.make_node("Concat", ["c_xy", "wh"], ["dbox_cells"], name="dist2bbox_Concat", axis=1))
    nodes.append(helper.make_node("Mul", ["dbox_cells", c("strides", strides[None])], ["dbox"], name="dbox_Mul"))
    nodes.append(helper.make_node("Sigmoid", ["cls"], ["cls_sigmoid"], name="cls_Sigmoid"))
    nodes.append(helper.make_node("Concat", ["dbox", "cls_sigmoid"], ["output0"], name="output_Concat", axis=1))
    return "output0"


def build(seed: int) -> tuple[onnx.ModelProto, YoloBuilder, np.ndarray]:
    b = YoloBuilder(seed)
    calib = b.rng.random((3, IMAGE, IMAGE), dtype=np.float32)
    in_s, in_zp = b.qparams("images", INPUT_SCALE, INPUT_ZP)
    b.node("QuantizeLinear", ["images", in_s, in_zp], ["images_quantized"], "images_QuantizeLinear")
    x = ("images_quantized", quantize(calib, INPUT_SCALE, INPUT_ZP), INPUT_SCALE, INPUT_ZP, in_s, in_zp)

    x = b.conv(x, "model.0", 16, 3, 2)
    x = b.conv(x, "model.1", 32, 3, 2)
    x = b.c2f(x, "model.2", 32, 1, True)
    x = b.conv(x, "model.3", 64, 3, 2)
    p3 = b.c2f(x, "model.4", 64, 2, True)
    x = b.conv(p3, "model.5", 128, 3, 2)
    p4 = b.c2f(x, "model.6", 128, 2, True)
    x = b.conv(p4, "model.7", 256, 3, 2)
    x = b.c2f(x, "model.8", 256, 1, True)
    p5 = b.sppf(x, "model.9", 256)
    x = b.concat([b.upsample(p5, "model.10"), p4], "model.11", 1)
    n4 = b.c2f(x, "model.12", 128, 1, False)
    x = b.concat([b.upsample(n4, "model.13"), p3], "model.14", 1)
    o3 = b.c2f(x, "model.15", 64, 1, False)
    x = b.concat([b.conv(o3, "model.16", 64, 3, 2), n4], "model.17", 1)
    o4 = b.c2f(x, "model.18", 128, 1, False)
    x = b.concat([b.conv(o4, "model.19", 128, 3, 2), p5], "model.20", 1)
    o5 = b.c2f(x, "model.21", 256, 1, False)
    assert [o[1].shape[1] for o in (o3, o4, o5)] == [80, 40, 20]

    levels = [b.detect_level(o, f"model.22.{i}") for i, o in enumerate((o3, o4, o5))]
    head = b.concat(levels, "model.22.cat", 2)  # [1, 144, n]
    b.node("DequantizeLinear", [head[0], head[4], head[5]], ["raw"], "raw_DequantizeLinear")
    raw = dequantize(head[1], head[2], head[3]).reshape(4 * REG_MAX + NUM_CLASSES, -1)
    n = raw.shape[1]
    assert n == 8400, n
    out = decode_head(b, "raw", n)

    graph = helper.make_graph(
        b.nodes, "yolov8n_int8",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, IMAGE, IMAGE])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 4 + NUM_CLASSES, n]),
         helper.make_tensor_value_info("raw", TensorProto.FLOAT, [1, 4 * REG_MAX + NUM_CLASSES, n])],
        initializer=b.inits)
    model = helper.make_model(
        graph, producer_name="furiosa-warboy-runtime models/yolov8n.py", producer_version="1",
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 7
    model.doc_string = (f"YOLOv8n 640x640, QOperator int8, deterministic random weights (seed {seed}); outputs: "
                        f"output0 [1,84,8400] (cx, cy, w, h in pixels, 80 sigmoid scores) and raw [1,144,8400] "
                        f"(the dequantized head: 64 DFL logits, 80 class logits)")
    return model, b, raw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output .onnx file")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights and the calibration input")
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    a = ap.parse_args()
    t0 = time.monotonic()
    model, b, raw = build(a.seed)
    onnx.checker.check_model(model)  # full_check=False: com.microsoft ops are not in ONNX's schema
    onnx.save(model, a.out)
    elapsed = time.monotonic() - t0
    if not a.quiet:
        print_summary(model, b)
        cls = sigmoid(raw[4 * REG_MAX:])
        print(f"calibration head: DFL logits in [{raw[:64].min():.3f}, {raw[:64].max():.3f}], class scores "
              f"> 0.5: {int((cls > 0.5).sum())} of {cls.size}")
    print(f"{a.out}: YOLOv8n int8 (QOperator), input float [1,3,{IMAGE},{IMAGE}], seed {a.seed}; "
          f"MACs per image {b.macs:,} = {b.macs / 1e9:.3f} GMACs; {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
