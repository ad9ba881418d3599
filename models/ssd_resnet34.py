#!/usr/bin/python3
"""Write MLPerf's SSD-ResNet34 (1200x1200, COCO, 15,130 anchors) as an int8 ONNX graph in
QOperator form, with deterministic random weights and fixed (uncalibrated) activation scales.

Usage:
    /usr/bin/python3 models/ssd_resnet34.py OUT.onnx [--seed S] [--quiet]
    cmake --build BUILD --target ssd-resnet34-model   # BUILD/models/ssd_resnet34.onnx

Needs Debian's python3-onnx (1.12) and python3-numpy only; run it with /usr/bin/python3.
Takes about 2 s here; the file is about 20 MB.

Why it exists
-------------
It is the third MLPerf Inference v2.0 benchmark FuriosaAI published for one Warboy
("ssd-resnet34", closed division), so it checks the timing model (docs/timing.md) out of sample:
nothing is fitted to it. Timing depends on shapes only, so the weights are random and the
activation scales fixed; the outputs are valid int8 arithmetic (the simulator computes them
bit-exactly like any model) but mean nothing. For accuracy work use a trained model.

What it builds
--------------
The network of MLPerf Inference's reference `SSD_R34` (mlcommons/inference,
vision/classification_and_detection/python/models/ssd_r34.py, strides [3, 3, 2, 2, 2, 2]) up to
the raw head outputs; box decoding and NMS are left to the caller.

- input `image`: float32 [1, 3, 1200, 1200] NCHW, normalized with ImageNet's mean and std (about
  [-2.2, 2.7]), quantized by `QuantizeLinear` (scale 2^-6 = 0.015625, zero point 140).
- ResNet-34 backbone up to conv4_x (torchvision's layer3), with the first block of layer3 at
  stride 1 (MLPerf's modification): 7x7/2 conv 3->64 + ReLU (600x600), 3x3/2 max pool, pad 1
  (300x300); layer1: 3 basic blocks of 64 (300x300); layer2: 4 blocks of 128, stride 2
  (150x150); layer3: 6 blocks of 256, stride 1 (150x150). A basic block is 3x3 conv + ReLU ->
  3x3 conv, plus the shortcut (a 1x1 projection conv when the shape changes), then add + ReLU.
- five extra blocks, each 1x1 conv + ReLU then 3x3 conv + ReLU: 256->256->512 /2 pad 1 (75x75),
  512->256->512 /2 pad 1 (38x38), 512->128->256 /2 pad 1 (19x19), 256->128->256 /2 (9x9),
  256->128->256 /1 (7x7).
- heads on the six feature maps (150, 75, 38, 19, 9, 7): a 3x3/3 conv, pad 1, with A * 4
  outputs (locations) and one with A * 81 outputs (classes, 80 COCO + background), A = 4, 6, 6,
  6, 4, 4 anchors per cell: 50x50x4 + 25x25x6 + 13x13x6 + 7x7x6 + 3x3x4 + 3x3x4 = 15,130
  anchors. Each head output is reshaped [1, 4, -1] / [1, 81, -1] as the reference's bbox_view.
- outputs: the six location heads joined by `com.microsoft.QLinearConcat` (axis 2) then
  `DequantizeLinear` -> `locs` float32 [1, 4, 15130]; the class heads likewise -> `confs` float32
  [1, 81, 15130].
BatchNorm is considered folded into the convs (every conv has a bias): 51 `QLinearConv`
(29 backbone, 10 extra, 12 heads), 13 `com.microsoft.QLinearAdd` (one per basic block).

Weights and scales
------------------
numpy PCG64 seeded with --seed (default 0): int8 weights uniform in [-64, 64] with one
per-output-channel scale 1 / (64 * sqrt(fan_in)) (the weight std of a He-style init), int32
biases uniform in [-64, 64] steps. Activation scales are fixed, not calibrated: 6 / 255 with zero
point 0 after a ReLU (range [0, 6]), 12 / 255 with zero point 128 before a residual add and at
the heads (range [-6, 6]).

MACs (a multiply-accumulate of a conv; printed by the script): 216,415,931,904 (216.4 G) per image.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IMAGE = 1200
NUM_CLASSES = 81
INPUT_SCALE = np.float32(2.0 ** -6)
INPUT_ZP = np.uint8(140)
RELU_Q = (np.float32(6.0 / 255.0), np.uint8(0))
SIGNED_Q = (np.float32(12.0 / 255.0), np.uint8(128))
LAYERS = [(3, 64, 1), (4, 128, 2), (6, 256, 1)]  # ResNet-34 layer1..3: blocks, width, stride
# Extra blocks: (1x1 width, 3x3 width, stride, pad).
EXTRAS = [(256, 512, 2, 1), (256, 512, 2, 1), (128, 256, 2, 1), (128, 256, 2, 0), (128, 256, 1, 0)]
ANCHORS = [4, 6, 6, 6, 4, 4]
HEAD_STRIDE = 3


def conv_out(size: int, k: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


class Builder:
    """Appends QOperator nodes; an activation is (name, channels, height, width, scale name, zp name)."""

    def __init__(self, seed: int):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.names: set[str] = set()
        self.macs = 0
        self.params = 0
        self.n_conv = 0
        self.qnames: dict[tuple[float, int], tuple[str, str]] = {}

    def init(self, name: str, arr: np.ndarray) -> str:
        assert name not in self.names, name
        self.names.add(name)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def qparams(self, q: tuple[np.float32, np.uint8]) -> tuple[str, str]:
        """Shared initializers for one (scale, zero point) pair."""
        key = (float(q[0]), int(q[1]))
        if key not in self.qnames:
            i = len(self.qnames)
            self.qnames[key] = (self.init(f"q{i}_scale", np.array(q[0], np.float32)),
                                self.init(f"q{i}_zero_point", np.array(q[1], np.uint8)))
        return self.qnames[key]

    def conv(self, x, name: str, cout: int, k: int, stride: int, pad: int, relu: bool):
        xname, cin, h, w, xs_name, xzp_name = x
        fan_in = cin * k * k
        wq = self.rng.integers(-64, 65, size=(cout, cin, k, k), dtype=np.int8)
        ws = np.full(cout, 1.0 / (64.0 * math.sqrt(fan_in)), np.float32)
        bq = self.rng.integers(-64, 65, size=cout, dtype=np.int32)
        ys_name, yzp_name = self.qparams(RELU_Q if relu else SIGNED_Q)
        out = name + "_quantized"
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
        ho, wo = conv_out(h, k, stride, pad), conv_out(w, k, stride, pad)
        self.macs += cout * ho * wo * fan_in
        self.params += wq.size + cout
        self.n_conv += 1
        return (out, cout, ho, wo, ys_name, yzp_name)

    def add_relu(self, a, b, name: str):
        ys_name, yzp_name = self.qparams(RELU_Q)
        out = name + "_quantized"
        self.nodes.append(helper.make_node(
            "QLinearAdd", [a[0], a[4], a[5], b[0], b[4], b[5], ys_name, yzp_name], [out],
            name=name, domain="com.microsoft"))
        return (out, a[1], a[2], a[3], ys_name, yzp_name)

    def maxpool(self, x, name: str):
        out = name + "_out"
        self.nodes.append(helper.make_node("MaxPool", [x[0]], [out], name=name, kernel_shape=[3, 3],
                                           pads=[1, 1, 1, 1], strides=[2, 2]))
        return (out, x[1], conv_out(x[2], 3, 2, 1), conv_out(x[3], 3, 2, 1), x[4], x[5])

    def basic_block(self, x, name: str, width: int, stride: int):
        y = self.conv(x, name + ".conv1", width, 3, stride, 1, True)
        y = self.conv(y, name + ".conv2", width, 3, 1, 1, False)
        shortcut = x
        if stride != 1 or x[1] != width:
            shortcut = self.conv(x, name + ".downsample", width, 1, stride, 0, False)
        return self.add_relu(y, shortcut, name + ".add")

    def concat_output(self, parts, name: str, rows: int):
        """Reshape each head to [1, rows, -1], QLinearConcat over axis 2, DequantizeLinear `name`."""
        ys_name, yzp_name = self.qparams(SIGNED_Q)
        ins = [ys_name, yzp_name]
        anchors = 0
        for y, head in parts:
            shape = self.init(head + "_shape", np.array([1, rows, -1], np.int64))
            out = head + "_reshaped"
            self.nodes.append(helper.make_node("Reshape", [y[0], shape], [out], name=head + "_Reshape"))
            ins += [out, y[4], y[5]]
            anchors += y[1] * y[2] * y[3] // rows
        q_out = name + "_quantized"
        self.nodes.append(helper.make_node("QLinearConcat", ins, [q_out], name=name + "_QLinearConcat",
                                           domain="com.microsoft", axis=2))
        self.nodes.append(helper.make_node("DequantizeLinear", [q_out, ys_name, yzp_name], [name],
                                           name=name + "_DequantizeLinear"))
        return anchors


def build(seed: int) -> tuple[onnx.ModelProto, Builder]:
    b = Builder(seed)
    in_s_name, in_zp_name = b.qparams((INPUT_SCALE, INPUT_ZP))
    b.nodes.append(helper.make_node("QuantizeLinear", ["image", in_s_name, in_zp_name], ["image_quantized"],
                                    name="image_QuantizeLinear"))
    x = ("image_quantized", 3, IMAGE, IMAGE, in_s_name, in_zp_name)
    x = b.conv(x, "backbone.conv1", 64, 7, 2, 3, True)
    x = b.maxpool(x, "backbone.maxpool")
    for li, (blocks, width, stride) in enumerate(LAYERS, start=1):
        for bi in range(blocks):
            x = b.basic_block(x, f"backbone.layer{li}.{bi}", width, stride if bi == 0 else 1)
    features = [x]
    for i, (w1, w3, stride, pad) in enumerate(EXTRAS):
        x = b.conv(x, f"additional_blocks.{i}.0", w1, 1, 1, 0, True)
        x = b.conv(x, f"additional_blocks.{i}.2", w3, 3, stride, pad, True)
        features.append(x)
    assert [f[2] for f in features] == [150, 75, 38, 19, 9, 7], [f[2] for f in features]

    locs, confs = [], []
    for i, (f, a) in enumerate(zip(features, ANCHORS)):
        locs.append((b.conv(f, f"loc.{i}", a * 4, 3, HEAD_STRIDE, 1, False), f"loc.{i}"))
        confs.append((b.conv(f, f"conf.{i}", a * NUM_CLASSES, 3, HEAD_STRIDE, 1, False), f"conf.{i}"))
    n_anchors = b.concat_output(locs, "locs", 4)
    assert n_anchors == 15130, n_anchors
    assert b.concat_output(confs, "confs", NUM_CLASSES) == n_anchors

    graph = helper.make_graph(
        b.nodes, "ssd_resnet34_int8",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, IMAGE, IMAGE])],
        [helper.make_tensor_value_info("locs", TensorProto.FLOAT, [1, 4, n_anchors]),
         helper.make_tensor_value_info("confs", TensorProto.FLOAT, [1, NUM_CLASSES, n_anchors])],
        initializer=b.inits)
    model = helper.make_model(
        graph, producer_name="furiosa-warboy-runtime models/ssd_resnet34.py", producer_version="1",
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 7
    model.doc_string = (f"SSD-ResNet34 1200x1200 (MLPerf), QOperator int8, deterministic random weights "
                        f"(seed {seed}), fixed activation scales: for timing, not accuracy; outputs: "
                        f"locations [1,4,15130] and class logits [1,81,15130]")
    return model, b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output .onnx file")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights")
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    a = ap.parse_args()
    t0 = time.monotonic()
    model, b = build(a.seed)
    onnx.checker.check_model(model)  # full_check=False: com.microsoft ops are not in ONNX's schema
    onnx.save(model, a.out)
    if not a.quiet:
        ops: dict[str, int] = {}
        for n in model.graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        print("nodes: " + ", ".join(f"{k} {v}" for k, v in ops.items()))
    print(f"{a.out}: SSD-ResNet34 int8 (QOperator), input float [1,3,{IMAGE},{IMAGE}], seed {a.seed}; "
          f"convs {b.n_conv}, parameters {b.params:,}; MACs per image {b.macs:,} = {b.macs / 1e9:.1f} GMACs; "
          f"{time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
