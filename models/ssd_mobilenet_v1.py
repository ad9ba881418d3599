#!/usr/bin/python3
"""Write MLPerf's SSD-MobileNet v1 (300x300, COCO, 1917 anchors) as an int8 ONNX graph with
deterministic random weights, in QOperator form (QDQ form: tests/models/qoperator_to_qdq.py).

Usage:
    /usr/bin/python3 models/ssd_mobilenet_v1.py OUT.onnx [--seed S] [--quiet]
    cmake --build BUILD --target ssd-mobilenet-model   # BUILD/models/ssd_mobilenet_v1{,_qdq}.onnx

Needs Debian's python3-onnx (1.12) and python3-numpy only; run it with /usr/bin/python3.
Takes about 5-10 s here; the file is about 6.9 MB.

What it builds
--------------
The network of MLPerf Inference's SSD-MobileNet v1 (TensorFlow's ssd_mobilenet_v1_coco_2018_01_28,
the model of MLPerf's "ssd-mobilenet" benchmark), up to the raw head outputs; box decoding and
non-maximum suppression are left to the caller (C++: furiosa/postprocess/ssd.h).

- input `image`: float32 [1, 3, 300, 300] NCHW in [-1, 1] (MobileNet's preprocessing
  2 * pixel / 255 - 1), quantized by `QuantizeLinear` with scale 2/255, zero point 128.
- MobileNet v1 backbone (depth multiplier 1): 3x3/2 conv 3->32 + ReLU6, then 13
  depthwise-separable blocks (3x3 depthwise conv, group = channels, + ReLU6; 1x1 pointwise conv +
  ReLU6) with pointwise widths 64, 128, 128, 256, 256, 512, 512 x5, 1024, 1024 and stride 2 in the
  depthwise convs of blocks 2, 4, 6 and 12. TensorFlow's SAME padding is written as explicit
  (possibly asymmetric, bottom/right-heavy) pads.
- feature maps: block 11's output (19x19x512), block 13's (10x10x1024), and four extra layers,
  each 1x1 conv + ReLU6 then 3x3/2 conv + ReLU6: 256->512 (5x5), 128->256 (3x3), 128->256 (2x2),
  64->128 (1x1).
- heads per feature map i (TF's convolutional box predictor with kernel size 1): a 1x1 conv with
  A_i * 4 outputs (box encodings) and a 1x1 conv with A_i * 91 outputs (class logits, 90 COCO
  classes + background), A = 3, 6, 6, 6, 6, 6 anchors per cell: 19*19*3 + 10*10*6 + 5*5*6 +
  3*3*6 + 2*2*6 + 1*6 = 1917 anchors. Each head output is Transpose(0, 2, 3, 1) then
  Reshape [1, -1, 4] / [1, -1, 91] (anchor order: row, column, anchor of the cell).
- outputs: the six box heads joined by `com.microsoft.QLinearConcat` (axis 1, each input with its
  own scale) then `DequantizeLinear` -> `boxes` float32 [1, 1917, 4] (TF's box encodings
  ty, tx, th, tw, to be decoded with variances 0.1, 0.1, 0.2, 0.2 against the anchors of
  furiosa::postprocess::ssd_mobilenet_v1_anchors()); the same for the class heads -> `scores`
  float32 [1, 1917, 91] (logits; TF's model applies a sigmoid).
BatchNorm is considered folded into the convs (every conv has a bias).

Operator forms (ONNX Runtime's static quantizer in QOperator form): `QLinearConv` with uint8
activations, int8 symmetric per-output-channel weights, int32 bias; ReLU6 folded into the output
quantization (zero point 0, range [0, min(6, calibrated max)]: values above 6 saturate, which is
ReLU6); Transpose and Reshape on uint8; `com.microsoft.QLinearConcat`; `DequantizeLinear`.

Weights and scales
------------------
numpy PCG64 seeded with --seed (default 0). Conv weights normal with std gain / sqrt(fan_in)
(gain sqrt(2) before a ReLU6, 1 for the heads), int8 symmetric per output channel in 7 bits, as
ONNX Runtime's quantizer writes them with reduce_range=True: scale max|w| / 64, values in
[-64, 64] (--full-range-weights: max|w| / 127, [-127, 127]). The reduced range is what keeps ONNX
Runtime exact on CPUs without VNNI: its u8s8 kernels there add pairs of uint8 x int8 products
in 16 bits with saturation (x86 VPMADDUBSW), and 255 * 127 * 2 overflows where 255 * 64 * 2 does
not (ONNX Runtime's quantization docs, FAQ on reduce_range and saturation); full-range weights
make ONNX Runtime differ from the ONNX definition by tens of steps on this model there. Biases normal std 0.01 (0.5 for the class heads, so that the logits spread),
quantized as int32 rint(b / (x_scale * w_scale)). Activation scales come from a float32 numpy
forward pass on one seeded calibration input (uniform [-1, 1)) in which every layer sees the
previous layer's quantized values: min/max (extended to 0) -> scale (max - min) / 255 rounded up
to the next 2^(k/8), zp rint(-min / scale); ReLU6 outputs use [0, min(6, max)]. Each
concatenation's output range is the union of its inputs' ranges, so its Requantize steps never
saturate. The script prints, per tensor kind, the share of calibration values at 0 and 255.

MACs (a multiply-accumulate of a conv; printed by the script): about 1.23 G per image.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IMAGE = 300
NUM_CLASSES = 91
INPUT_SCALE = np.float32(2.0 / 255.0)
INPUT_ZP = np.uint8(128)
RELU_GAIN = math.sqrt(2.0)
# (pointwise width, depthwise stride) of MobileNet v1's 13 depthwise-separable blocks.
BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1),
          (512, 1), (512, 1), (1024, 2), (1024, 1)]
# Extra feature layers: (1x1 width, 3x3/2 width).
EXTRAS = [(256, 512), (128, 256), (128, 256), (64, 128)]
ANCHORS = [3, 6, 6, 6, 6, 6]


def round_scale(s: float) -> np.float32:
    """Rounds a positive scale up to the next 2^(k/8), as float32."""
    s = max(float(s), 1e-8)
    return np.float32(2.0 ** (math.ceil(math.log2(s) * 8.0 - 1e-9) / 8.0))


def quant_params(lo: float, hi: float) -> tuple[np.float32, np.uint8]:
    """Asymmetric uint8 (scale, zero point) for [lo, hi] extended to include 0."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = round_scale((hi - lo) / 255.0)
    zp = int(np.clip(np.rint(-lo / float(scale)), 0, 255))
    return scale, np.uint8(zp)


def quantize(x: np.ndarray, scale: np.float32, zp) -> np.ndarray:
    q = np.rint(x.astype(np.float32) / scale) + np.float32(zp)
    return np.clip(q, 0, 255).astype(np.uint8)


def dequantize(q: np.ndarray, scale: np.float32, zp) -> np.ndarray:
    return (q.astype(np.float32) - np.float32(zp)) * scale


def same_pads(size: int, k: int, stride: int) -> tuple[int, int]:
    """TensorFlow SAME padding (begin, end) of one spatial dim: the extra pixel goes at the end."""
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def windows(x: np.ndarray, k: int, stride: int, pads: tuple[int, int]) -> np.ndarray:
    """[C, k, k, Ho, Wo] view of zero-padded x [C, H, W]."""
    x = np.pad(x, ((0, 0), pads, pads))
    c, h, w = x.shape
    ho = (h - k) // stride + 1
    wo = (w - k) // stride + 1
    sc, sh, sw = x.strides
    return np.lib.stride_tricks.as_strided(x, shape=(c, k, k, ho, wo),
                                           strides=(sc, sh, sw, sh * stride, sw * stride), writeable=False)


def conv_float(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pads: tuple[int, int],
               group: int) -> np.ndarray:
    """x [C,H,W] float32, w [M,C/group,k,k]; group 1 or C (depthwise). Returns [M,Ho,Wo] float32."""
    m, _, k, _ = w.shape
    v = windows(x, k, stride, pads)
    if group == 1:
        cols = np.ascontiguousarray(v).reshape(-1, v.shape[3] * v.shape[4])
        y = (w.reshape(m, -1) @ cols).reshape(m, v.shape[3], v.shape[4])
    else:
        y = np.einsum("cijhw,cij->chw", v, w[:, 0], optimize=True)
    return (y + b[:, None, None]).astype(np.float32)


class Builder:
    def __init__(self, seed: int, weight_max: int = 64):
        self.weight_max = weight_max
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.names: set[str] = set()
        self.macs = 0
        self.params = 0
        self.n_conv = 0
        self.stats: dict[str, list[tuple[float, float]]] = {}

    def init(self, name: str, arr: np.ndarray) -> str:
        assert name not in self.names, name
        self.names.add(name)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def qparams(self, name: str, scale: np.float32, zp: np.uint8) -> tuple[str, str]:
        return (self.init(name + "_scale", np.array(scale, np.float32)),
                self.init(name + "_zero_point", np.array(zp, np.uint8)))

    def record(self, kind: str, q: np.ndarray) -> None:
        self.stats.setdefault(kind, []).append((float(np.mean(q == 0)), float(np.mean(q == 255))))

    # An activation: (tensor name, uint8 calibration value, scale, zp, scale name, zp name)
    def conv(self, x, name: str, cout: int, k: int, stride: int, depthwise: bool, relu6: bool,
             gain: float, bias_std: float = 0.01, kind: str | None = None):
        xname, xq, xs, xzp, xs_name, xzp_name = x
        cin, h, w = xq.shape
        group = cin if depthwise else 1
        if depthwise:
            assert cout == cin
        fan_in = (cin // group) * k * k
        wf = self.rng.standard_normal((cout, cin // group, k, k), dtype=np.float32) * np.float32(gain / math.sqrt(fan_in))
        qmax = self.weight_max
        ws = (np.abs(wf).reshape(cout, -1).max(axis=1) / np.float32(qmax)).astype(np.float32)
        wq = np.clip(np.rint(wf / ws[:, None, None, None]), -qmax, qmax).astype(np.int8)
        bf = self.rng.standard_normal(cout, dtype=np.float32) * np.float32(bias_std)
        bscale = (np.float32(xs) * ws).astype(np.float32)
        bq = np.rint(bf / bscale).astype(np.int32)
        ph, pw = same_pads(h, k, stride), same_pads(w, k, stride)
        assert ph == pw
        yf = conv_float(dequantize(xq, xs, xzp), wq.astype(np.float32) * ws[:, None, None, None],
                        bq.astype(np.float32) * bscale, stride, ph, group)
        lo, hi = float(yf.min()), float(yf.max())
        if relu6:
            lo, hi = 0.0, min(hi, 6.0)
        ys, yzp = quant_params(lo, hi)
        yq = quantize(yf, ys, yzp)
        self.record(kind or ("depthwise+relu6" if depthwise else "conv+relu6" if relu6 else "conv"), yq)
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
            [out], name=name, dilations=[1, 1], group=group, kernel_shape=[k, k],
            pads=[ph[0], pw[0], ph[1], pw[1]], strides=[stride, stride]))
        _, ho, wo = yq.shape
        self.macs += cout * ho * wo * fan_in
        self.params += wf.size + cout
        self.n_conv += 1
        return (out, yq, ys, yzp, ys_name, yzp_name)

    def head(self, feature, name: str, anchors: int, width: int, gain: float, bias_std: float, kind: str):
        """1x1 conv -> Transpose(0,2,3,1) -> Reshape [1, -1, width]; returns the flattened activation."""
        y = self.conv(feature, name, anchors * width, 1, 1, False, False, gain, bias_std, kind)
        t_out = name + "_transposed"
        self.nodes.append(helper.make_node("Transpose", [y[0]], [t_out], name=name + "_Transpose", perm=[0, 2, 3, 1]))
        r_out = name + "_reshaped"
        shape = self.init(name + "_shape", np.array([1, -1, width], np.int64))
        self.nodes.append(helper.make_node("Reshape", [t_out, shape], [r_out], name=name + "_Reshape"))
        flat = y[1].transpose(1, 2, 0).reshape(-1, width)
        return (r_out, flat, y[2], y[3], y[4], y[5])

    def concat_output(self, parts, name: str):
        """QLinearConcat over axis 1 (output range = union of the inputs') -> DequantizeLinear `name`."""
        lo = min(float(dequantize(p[1], p[2], p[3]).min()) for p in parts)
        hi = max(float(dequantize(p[1], p[2], p[3]).max()) for p in parts)
        ys, yzp = quant_params(lo, hi)
        ys_name, yzp_name = self.qparams(name + "_concat", ys, yzp)
        ins = [ys_name, yzp_name]
        for p in parts:
            ins += [p[0], p[4], p[5]]
        q_out = name + "_quantized"
        self.nodes.append(helper.make_node("QLinearConcat", ins, [q_out], name=name + "_QLinearConcat",
                                           domain="com.microsoft", axis=1))
        self.nodes.append(helper.make_node("DequantizeLinear", [q_out, ys_name, yzp_name], [name],
                                           name=name + "_DequantizeLinear"))
        yq = np.concatenate([quantize(dequantize(p[1], p[2], p[3]), ys, yzp) for p in parts], axis=0)
        self.record(name, yq)
        return dequantize(yq, ys, yzp)


def print_summary(model: onnx.ModelProto, b: Builder) -> None:
    """Node counts, convs and parameters, and the calibration's share of saturated uint8 values."""
    ops: dict[str, int] = {}
    for n in model.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print("nodes: " + ", ".join(f"{k} {v}" for k, v in ops.items()))
    print(f"convs {b.n_conv}, parameters {b.params:,}")
    print("calibration (one random image), share of uint8 values at 0 / at 255:")
    for kind, st in b.stats.items():
        z = np.mean([s[0] for s in st])
        f = np.mean([s[1] for s in st])
        print(f"  {kind:16s} x{len(st):<3d} {100 * z:5.1f} % / {100 * f:5.2f} %")


def build(seed: int, weight_max: int) -> tuple[onnx.ModelProto, Builder, np.ndarray, np.ndarray]:
    b = Builder(seed, weight_max)
    calib = b.rng.random((3, IMAGE, IMAGE), dtype=np.float32) * np.float32(2.0) - np.float32(1.0)
    in_s_name, in_zp_name = b.qparams("image", INPUT_SCALE, INPUT_ZP)
    b.nodes.append(helper.make_node("QuantizeLinear", ["image", in_s_name, in_zp_name], ["image_quantized"],
                                    name="image_QuantizeLinear"))
    x = ("image_quantized", quantize(calib, INPUT_SCALE, INPUT_ZP), INPUT_SCALE, INPUT_ZP, in_s_name, in_zp_name)

    x = b.conv(x, "FeatureExtractor.Conv2d_0", 32, 3, 2, False, True, RELU_GAIN)
    features = []
    for i, (width, stride) in enumerate(BLOCKS, start=1):
        cin = x[1].shape[0]
        x = b.conv(x, f"FeatureExtractor.Conv2d_{i}_depthwise", cin, 3, stride, True, True, RELU_GAIN)
        x = b.conv(x, f"FeatureExtractor.Conv2d_{i}_pointwise", width, 1, 1, False, True, RELU_GAIN)
        if i in (11, 13):
            features.append(x)
    for j, (w1, w3) in enumerate(EXTRAS, start=2):
        x = b.conv(x, f"FeatureExtractor.Conv2d_13_pointwise_1_Conv2d_{j}_1x1_{w1}", w1, 1, 1, False, True, RELU_GAIN)
        x = b.conv(x, f"FeatureExtractor.Conv2d_13_pointwise_2_Conv2d_{j}_3x3_s2_{w3}", w3, 3, 2, False, True,
                   RELU_GAIN)
        features.append(x)
    assert [f[1].shape[1] for f in features] == [19, 10, 5, 3, 2, 1], [f[1].shape for f in features]

    box_parts, class_parts = [], []
    for i, (f, a) in enumerate(zip(features, ANCHORS)):
        box_parts.append(b.head(f, f"BoxPredictor_{i}.BoxEncodingPredictor", a, 4, 1.0, 0.01, "box head"))
        class_parts.append(b.head(f, f"BoxPredictor_{i}.ClassPredictor", a, NUM_CLASSES, 1.0, 0.5, "class head"))
    boxes = b.concat_output(box_parts, "boxes")
    scores = b.concat_output(class_parts, "scores")
    n_anchors = boxes.shape[0]
    assert n_anchors == 1917, n_anchors

    graph = helper.make_graph(
        b.nodes, "ssd_mobilenet_v1_int8",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, IMAGE, IMAGE])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, n_anchors, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, n_anchors, NUM_CLASSES])],
        initializer=b.inits)
    model = helper.make_model(
        graph, producer_name="furiosa-warboy-runtime models/ssd_mobilenet_v1.py", producer_version="1",
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 7
    model.doc_string = (f"SSD-MobileNet v1 300x300 (MLPerf), QOperator int8, deterministic random weights "
                        f"(seed {seed}, weights in [-{weight_max}, {weight_max}]); outputs: box encodings [1,1917,4] and class logits [1,1917,91]")
    return model, b, boxes, scores


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output .onnx file")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights and the calibration input")
    ap.add_argument("--full-range-weights", action="store_true",
                    help="int8 weights in [-127, 127] instead of ONNX Runtime's reduce_range [-64, 64]")
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    a = ap.parse_args()
    t0 = time.monotonic()
    model, b, boxes, scores = build(a.seed, 127 if a.full_range_weights else 64)
    onnx.checker.check_model(model)  # full_check=False: com.microsoft ops are not in ONNX's schema
    onnx.save(model, a.out)
    elapsed = time.monotonic() - t0
    if not a.quiet:
        print_summary(model, b)
        print(f"calibration outputs: boxes in [{boxes.min():.3f}, {boxes.max():.3f}], "
              f"scores in [{scores.min():.3f}, {scores.max():.3f}]")
    print(f"{a.out}: SSD-MobileNet v1 int8 (QOperator), input float [1,3,{IMAGE},{IMAGE}], seed {a.seed}, "
          f"weights in [-{b.weight_max}, {b.weight_max}]; "
          f"MACs per image {b.macs:,} = {b.macs / 1e9:.3f} GMACs; {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
