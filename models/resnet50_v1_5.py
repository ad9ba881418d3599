#!/usr/bin/python3
"""Write a ResNet-50 v1.5 int8 ONNX graph (QOperator format) with deterministic random weights.

Usage:
    /usr/bin/python3 models/resnet50_v1_5.py OUT.onnx [--input-dtype float|uint8]
                                             [--batch N|symbolic] [--seed S] [--quiet]
    cmake --build BUILD --target resnet50-model   # BUILD/models/resnet50_v1_5{,_uint8}.onnx

Takes about 2-3 s and 150 MB of memory here; the file is 25.8 MB.

Needs Debian's python3-onnx (1.12) and python3-numpy only; run it with /usr/bin/python3.

What it builds
--------------
The architecture of MLPerf's / torchvision's ResNet-50 v1.5, for 224x224 RGB images:

- stem: 7x7/2 conv 3->64, pad 3, + ReLU (112x112); 3x3/2 max pool, pad 1 (56x56)
- 4 stages of bottleneck blocks, [3, 4, 6, 3] blocks, widths 64/128/256/512, expansion 4
  (outputs 256/512/1024/2048 channels at 56/28/14/7). A block is
  1x1 conv + ReLU -> 3x3 conv (pad 1) + ReLU -> 1x1 conv, plus the shortcut, then add + ReLU.
  The first block of stages 2-4 puts its stride 2 in the 3x3 conv (this is what makes it v1.5;
  v1 strides the first 1x1 conv). The first block of every stage has a 1x1 projection
  shortcut conv with the stage's stride (1 for stage 1); the other blocks add their input.
- global average pool (2048), flatten, fully connected 2048 -> 1000.
BatchNorm is considered folded into the convs (every conv has a bias), as in deployed models.

There are 53 convs (stem + 16 blocks x 3 + 4 projections), 16 residual adds and 25,530,472
parameters (torchvision's resnet50 has 25,557,032: its BatchNorms have a scale and a shift per
channel, folded here into one bias per channel).

Operator forms (those of the ONNX Model Zoo's mobilenetv2-12-int8 and of ONNX Runtime's static
quantizer in QOperator format, all accepted by this project's compiler, see docs/operators.md):

| layer | node(s) |
|---|---|
| float input (`--input-dtype float`) | `QuantizeLinear` (scale 1/255, zp 0) |
| uint8 input (`--input-dtype uint8`) | none: the graph input is already the uint8 tensor |
| conv (+ReLU) | `QLinearConv`: uint8 activations, int8 weights with per-output-channel symmetric scales (int8 zero points), int32 bias; a following ReLU is folded into the output quantization (zp 0) |
| residual add + ReLU | `com.microsoft.QLinearAdd`, ReLU folded into its output quantization (zp 0) |
| max pool | `MaxPool` on uint8 |
| global average pool | `com.microsoft.QLinearGlobalAveragePool` (`channels_last` 0) |
| flatten | `Flatten` (axis 1) on uint8 |
| fc | `QLinearMatMul` with B int8 [2048, 1000] per-column scales, then the bias as `com.microsoft.QLinearAdd` with a constant uint8 [1, 1000] |
| output | `DequantizeLinear` -> float32 `output` [N, 1000] |

Input `input`: float32 [N,3,224,224] in [0, 1] (quantized with scale 1/255, zp 0), or with
`--input-dtype uint8` uint8 [N,3,224,224] = round(255 * x) (the same quantization, done by the
caller; the performance guide's "uint8 input saves the host Quantize"). Both variants have the
same weights and scales, so their outputs are equal for equal quantized inputs.
`--batch N` (default 1) fixes dim 0 of input and output to N; `--batch symbolic` makes it the
symbolic dim `batch_size` (the compiler binds it to RunnerOptions::batch_size / furiosa-run's
--batch-size). A batch-1 graph also runs at other batches: the compiler multiplies a fixed dim 0
of 1 (furiosa-run --batch-size N).

Weights and scales
------------------
Timing depends on shapes only, so the weights are random, but deterministic (numpy PCG64 seeded
with --seed, default 0; the graph does not depend on --batch or --input-dtype):
- conv weights: normal float with std gain / sqrt(fan_in): gain sqrt(2) (He) for the convs followed
  by a ReLU, 0.5 for the last conv of each block (so the residual stream's range stays about
  constant over the 16 blocks instead of growing ~1.5x per block), 1 for the projections. Then
  int8 symmetric per output channel, scale[m] = max|w[m]| / 127, q = clip(rint(w / scale), -127,
  127), zero points int8 0. Bias: normal, std 0.01, quantized as int32
  rint(b / (x_scale * w_scale[m])).
- fc weight: normal, std sqrt(1 / 2048), int8 per column; bias normal, std 0.01.
- activation scales/zero points are calibrated on one seeded random input (uniform [0, 1), like
  furiosa-run's generated inputs) by a float32 numpy forward pass that quantizes every
  activation as the graph does (so each layer sees the previous layer's quantized values):
  the min/max of each tensor (extended to include 0; 0 for ReLU-folded outputs) gives
  scale = (max - min) / 255, rounded up to the next 2^(k/8) (so that tiny BLAS
  differences between machines seldom change the file; on one machine it is byte-identical), and zp = rint(-min / scale). The script prints, per tensor kind, the share
  of calibration values that land on 0 and on 255 (about 50 % at 0 after a ReLU, ~0 % at 255),
  and the calibration image's top-5; the logits are in about [-3, 3].
  furiosa-run's output for that same image matches this float32 model within 2 steps of the
  output quantization. Note that images of i.i.d. noise all give nearly the same top-5 (the
  global average pool averages the noise out); structured inputs give different classes.

MACs (batch 1, a multiply-accumulate of a conv or matmul = 1 MAC; the script prints its count):
convs 4,087,136,256 + fc 2,048,000 = 4,089,184,256 MACs (~4.1 GMACs, 8.2 GOPs) per image.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STAGES = [(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)]  # blocks, width, stride
EXPANSION = 4
NUM_CLASSES = 1000
IMAGE = 224
INPUT_SCALE = np.float32(1.0 / 255.0)
HE_GAIN = math.sqrt(2.0)  # weight std = gain / sqrt(fan_in): He init for convs followed by ReLU
RESIDUAL_GAIN = 0.5  # last conv of each block: keeps the residual stream's range about constant over 16 blocks


def round_scale(s: float) -> np.float32:
    """Rounds a positive scale up to the next 2^(k/8), as float32."""
    s = max(float(s), 1e-8)
    return np.float32(2.0 ** (math.ceil(math.log2(s) * 8.0 - 1e-9) / 8.0))


def quant_params(lo: float, hi: float, relu: bool) -> tuple[np.float32, np.uint8]:
    """Asymmetric uint8 (scale, zero point) for the range [lo, hi] extended to include 0."""
    if relu:
        lo = 0.0
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = round_scale((hi - lo) / 255.0)
    zp = int(np.clip(np.rint(-lo / float(scale)), 0, 255))
    return scale, np.uint8(zp)


def quantize(x: np.ndarray, scale: np.float32, zp: np.uint8) -> np.ndarray:
    q = np.rint(x.astype(np.float32) / scale) + np.float32(zp)
    return np.clip(q, 0, 255).astype(np.uint8)


def dequantize(q: np.ndarray, scale: np.float32, zp) -> np.ndarray:
    return (q.astype(np.float32) - np.float32(zp)) * scale


def conv2d_float(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """x [C,H,W] float32, w [M,C,kh,kw]; zero padding. Returns [M,Ho,Wo] float32 (im2col + BLAS)."""
    c, h, wd = x.shape
    m, _, kh, kw = w.shape
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    ho = (h + 2 * pad - kh) // stride + 1
    wo = (wd + 2 * pad - kw) // stride + 1
    if kh == 1 and kw == 1:
        cols = x[:, ::stride, ::stride][:, :ho, :wo].reshape(c, ho * wo)
    else:
        sc, sh, sw = x.strides
        view = np.lib.stride_tricks.as_strided(
            x, shape=(c, kh, kw, ho, wo), strides=(sc, sh, sw, sh * stride, sw * stride), writeable=False)
        cols = np.ascontiguousarray(view).reshape(c * kh * kw, ho * wo)
    y = w.reshape(m, -1) @ cols
    return (y + b[:, None]).reshape(m, ho, wo).astype(np.float32)


def maxpool_u8(q: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    c, h, w = q.shape
    # Padding never wins a max over uint8 (pads act as -inf); 0 is the minimum of uint8.
    x = np.pad(q, ((0, 0), (pad, pad), (pad, pad)), constant_values=0)
    ho = (h + 2 * pad - k) // stride + 1
    wo = (w + 2 * pad - k) // stride + 1
    out = np.zeros((c, ho, wo), np.uint8)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, x[:, i:i + stride * ho:stride, j:j + stride * wo:stride])
    return out


class Builder:
    def __init__(self, seed: int):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.init_names: set[str] = set()
        self.macs_conv = 0
        self.macs_fc = 0
        self.params = 0
        self.n_conv = 0
        self.n_add = 0
        self.stats: dict[str, list[tuple[float, float]]] = {}

    def init(self, name: str, arr: np.ndarray) -> str:
        assert name not in self.init_names, name
        self.init_names.add(name)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def qparams(self, name: str, scale: np.float32, zp: np.uint8) -> tuple[str, str]:
        return (self.init(name + "_scale", np.array(scale, np.float32)),
                self.init(name + "_zero_point", np.array(zp, np.uint8)))

    def record(self, kind: str, q: np.ndarray) -> None:
        self.stats.setdefault(kind, []).append((float(np.mean(q == 0)), float(np.mean(q == 255))))

    # An activation: (tensor name, numpy uint8 calibration value [C,H,W], scale, zp, scale name, zp name)
    def conv(self, x, name: str, cout: int, k: int, stride: int, pad: int, relu: bool, gain: float):
        xname, xq, xs, xzp, xs_name, xzp_name = x
        cin, h, w = xq.shape
        fan_in = cin * k * k
        wf = self.rng.standard_normal((cout, cin, k, k), dtype=np.float32) * np.float32(gain / math.sqrt(fan_in))
        ws = (np.abs(wf).reshape(cout, -1).max(axis=1) / np.float32(127.0)).astype(np.float32)
        wq = np.clip(np.rint(wf / ws[:, None, None, None]), -127, 127).astype(np.int8)
        bf = self.rng.standard_normal(cout, dtype=np.float32) * np.float32(0.01)
        bscale = (np.float32(xs) * ws).astype(np.float32)
        bq = np.rint(bf / bscale).astype(np.int32)
        # Calibration: float32 conv of the dequantized values with the dequantized weights.
        yf = conv2d_float(dequantize(xq, xs, xzp), wq.astype(np.float32) * ws[:, None, None, None],
                          bq.astype(np.float32) * bscale, stride, pad)
        ys, yzp = quant_params(float(yf.min()), float(yf.max()), relu)
        yq = quantize(yf, ys, yzp)
        self.record("conv+relu" if relu else "conv", yq)
        out = name + "_quantized"
        ys_name, yzp_name = self.qparams(name, ys, yzp)
        self.nodes.append(helper.make_node(
            "QLinearConv",
            [xname, xs_name, xzp_name,
             self.init(name + ".weight_quantized", wq),
             self.init(name + ".weight_scale", ws),
             self.init(name + ".weight_zero_point", np.zeros(cout, np.int8)),
             ys_name, yzp_name,
             self.init(name + ".bias_quantized", bq)],
            [out], name=name, dilations=[1, 1], group=1, kernel_shape=[k, k],
            pads=[pad, pad, pad, pad], strides=[stride, stride]))
        _, ho, wo = yq.shape
        self.macs_conv += cout * ho * wo * fan_in
        self.params += wf.size + cout
        self.n_conv += 1
        return (out, yq, ys, yzp, ys_name, yzp_name)

    def add_relu(self, a, b, name: str):
        af = dequantize(a[1], a[2], a[3])
        bf = dequantize(b[1], b[2], b[3])
        yf = af + bf
        ys, yzp = quant_params(float(yf.min()), float(yf.max()), relu=True)
        yq = quantize(yf, ys, yzp)
        self.record("add+relu", yq)
        out = name + "_quantized"
        ys_name, yzp_name = self.qparams(name, ys, yzp)
        self.nodes.append(helper.make_node(
            "QLinearAdd", [a[0], a[4], a[5], b[0], b[4], b[5], ys_name, yzp_name], [out],
            name=name, domain="com.microsoft"))
        self.n_add += 1
        return (out, yq, ys, yzp, ys_name, yzp_name)

    def maxpool(self, x, name: str):
        yq = maxpool_u8(x[1], 3, 2, 1)
        out = name + "_quantized"
        self.nodes.append(helper.make_node("MaxPool", [x[0]], [out], name=name, kernel_shape=[3, 3],
                                           pads=[1, 1, 1, 1], strides=[2, 2]))
        return (out, yq, x[2], x[3], x[4], x[5])

    def bottleneck(self, x, name: str, width: int, stride: int, project: bool):
        out_c = width * EXPANSION
        y = self.conv(x, name + ".conv1", width, 1, 1, 0, relu=True, gain=HE_GAIN)
        y = self.conv(y, name + ".conv2", width, 3, stride, 1, relu=True, gain=HE_GAIN)  # v1.5: stride here
        y = self.conv(y, name + ".conv3", out_c, 1, 1, 0, relu=False, gain=RESIDUAL_GAIN)
        shortcut = (self.conv(x, name + ".downsample.0", out_c, 1, stride, 0, relu=False, gain=1.0)
                    if project else x)
        return self.add_relu(y, shortcut, name + ".add")

    def head(self, x):
        # Global average pool (uint8 -> uint8).
        pooled = dequantize(x[1], x[2], x[3]).mean(axis=(1, 2), dtype=np.float32)
        ps, pzp = quant_params(float(pooled.min()), float(pooled.max()), relu=True)
        pq = quantize(pooled, ps, pzp)
        self.record("avgpool", pq)
        ps_name, pzp_name = self.qparams("avgpool", ps, pzp)
        self.nodes.append(helper.make_node(
            "QLinearGlobalAveragePool", [x[0], x[4], x[5], ps_name, pzp_name], ["avgpool_quantized"],
            name="avgpool", domain="com.microsoft", channels_last=0))
        self.nodes.append(helper.make_node("Flatten", ["avgpool_quantized"], ["flatten_quantized"],
                                           name="flatten", axis=1))
        # FC: QLinearMatMul (B [2048, 1000] int8 per column) + bias as QLinearAdd, as the zoo does.
        k = pq.shape[0]
        wf = self.rng.standard_normal((k, NUM_CLASSES), dtype=np.float32) * np.float32(math.sqrt(1.0 / k))
        ws = (np.abs(wf).max(axis=0) / np.float32(127.0)).astype(np.float32)
        wq = np.clip(np.rint(wf / ws[None, :]), -127, 127).astype(np.int8)
        mf = dequantize(pq, ps, pzp)[None, :] @ (wq.astype(np.float32) * ws[None, :])
        ms, mzp = quant_params(float(mf.min()), float(mf.max()), relu=False)
        mq = quantize(mf, ms, mzp)
        self.record("fc matmul", mq)
        ms_name, mzp_name = self.qparams("fc_MatMul", ms, mzp)
        self.nodes.append(helper.make_node(
            "QLinearMatMul",
            ["flatten_quantized", ps_name, pzp_name,
             self.init("fc.weight_quantized", wq), self.init("fc.weight_scale", ws),
             self.init("fc.weight_zero_point", np.zeros(NUM_CLASSES, np.int8)),
             ms_name, mzp_name],
            ["fc_MatMul_quantized"], name="fc_MatMul"))
        bf = self.rng.standard_normal((1, NUM_CLASSES), dtype=np.float32) * np.float32(0.01)
        bs, bzp = quant_params(float(bf.min()), float(bf.max()), relu=False)
        bq = quantize(bf, bs, bzp)
        bs_name, bzp_name = self.qparams("fc.bias", bs, bzp)
        logits = dequantize(mq, ms, mzp) + dequantize(bq, bs, bzp)
        os_, ozp = quant_params(float(logits.min()), float(logits.max()), relu=False)
        oq = quantize(logits, os_, ozp)
        self.record("logits", oq)
        os_name, ozp_name = self.qparams("output", os_, ozp)
        self.nodes.append(helper.make_node(
            "QLinearAdd",
            ["fc_MatMul_quantized", ms_name, mzp_name, self.init("fc.bias_quantized", bq), bs_name, bzp_name,
             os_name, ozp_name],
            ["output_quantized"], name="fc_Add", domain="com.microsoft"))
        self.nodes.append(helper.make_node("DequantizeLinear", ["output_quantized", os_name, ozp_name],
                                           ["output"], name="output_DequantizeLinear"))
        self.macs_fc += k * NUM_CLASSES
        self.params += wf.size + NUM_CLASSES
        return dequantize(oq, os_, ozp)[0]


def build(seed: int, input_dtype: str, batch) -> tuple[onnx.ModelProto, Builder, np.ndarray]:
    b = Builder(seed)
    # Calibration input: uniform [0, 1), like furiosa-run's generated inputs, quantized as the graph does.
    calib = b.rng.random((3, IMAGE, IMAGE), dtype=np.float32)
    in_zp = np.uint8(0)
    xq = quantize(calib, INPUT_SCALE, in_zp)
    in_s_name, in_zp_name = b.qparams("input", INPUT_SCALE, in_zp)
    if input_dtype == "float":
        b.nodes.append(helper.make_node("QuantizeLinear", ["input", in_s_name, in_zp_name], ["input_quantized"],
                                        name="input_QuantizeLinear"))
        x = ("input_quantized", xq, INPUT_SCALE, in_zp, in_s_name, in_zp_name)
    else:
        x = ("input", xq, INPUT_SCALE, in_zp, in_s_name, in_zp_name)

    x = b.conv(x, "conv1", 64, 7, 2, 3, relu=True, gain=HE_GAIN)
    x = b.maxpool(x, "maxpool")
    for si, (blocks, width, stride) in enumerate(STAGES):
        for bi in range(blocks):
            x = b.bottleneck(x, f"layer{si + 1}.{bi}", width, stride if bi == 0 else 1, project=bi == 0)
    logits = b.head(x)

    dim0 = "batch_size" if batch == "symbolic" else int(batch)
    in_type = TensorProto.FLOAT if input_dtype == "float" else TensorProto.UINT8
    graph = helper.make_graph(
        b.nodes, "resnet50_v1_5_int8",
        [helper.make_tensor_value_info("input", in_type, [dim0, 3, IMAGE, IMAGE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [dim0, NUM_CLASSES])],
        initializer=b.inits)
    model = helper.make_model(
        graph, producer_name="furiosa-warboy-runtime models/resnet50_v1_5.py", producer_version="1",
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 7
    model.doc_string = (f"ResNet-50 v1.5, QOperator int8, deterministic random weights (seed {seed}), "
                        f"input {input_dtype}, batch {batch}")
    return model, b, logits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output .onnx file")
    ap.add_argument("--input-dtype", choices=["float", "uint8"], default="float",
                    help="graph input: float32 in [0,1] with a QuantizeLinear (default), or uint8")
    ap.add_argument("--batch", default="1", help="dim 0 of input and output: N >= 1 (default 1) or 'symbolic'")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights and the calibration input")
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    a = ap.parse_args()
    if a.batch != "symbolic":
        try:
            if int(a.batch) < 1:
                raise ValueError
        except ValueError:
            ap.error("--batch must be an integer >= 1 or 'symbolic'")

    t0 = time.monotonic()
    model, b, logits = build(a.seed, a.input_dtype, a.batch)
    onnx.checker.check_model(model)  # full_check=False: com.microsoft ops are not in ONNX's schema
    onnx.save(model, a.out)
    elapsed = time.monotonic() - t0

    total = b.macs_conv + b.macs_fc
    if not a.quiet:
        ops = {}
        for n in model.graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        print("nodes: " + ", ".join(f"{k} {v}" for k, v in ops.items()))
        print(f"convs {b.n_conv}, residual adds {b.n_add}, parameters {b.params:,}")
        print("calibration (one random image), share of uint8 values at 0 / at 255:")
        for kind, st in b.stats.items():
            z = np.mean([s[0] for s in st])
            f = np.mean([s[1] for s in st])
            print(f"  {kind:10s} x{len(st):<3d} {100 * z:5.1f} % / {100 * f:5.2f} %")
        top = np.argsort(-logits, kind="stable")[:5]
        print("calibration top-5: " + ", ".join(f"{int(i)}:{logits[i]:.3f}" for i in top))
    print(f"{a.out}: ResNet-50 v1.5 int8, input {a.input_dtype} [{a.batch},3,{IMAGE},{IMAGE}], seed {a.seed}; "
          f"MACs per image {total:,} (convs {b.macs_conv:,} + fc {b.macs_fc:,}) = {total / 1e9:.3f} GMACs; "
          f"{elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
