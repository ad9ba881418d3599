#!/usr/bin/python3
"""YOLOv8's decode head (models/yolov8n.py: DFL and dist2bbox after the raw head output) in QDQ
form, written the way ONNX Runtime's static quantizer (quantize_static, QuantFormat.QDQ, uint8
activations, int8 weights, MinMax calibration) writes it, for tests/reference/test_yolo_decode_qdq_ort.cpp
(issue 33: exporters quantize the decode too, and there QDQ models drifted from ONNX Runtime).

  raw float [1, 144, 8400] (graph input)                                   -> Q/DQ
  Split [64, 80] -> box, cls               (the quantizer's Split: outputs keep the input's params)
  box: Reshape [1, 4, 16, 8400], Transpose (0, 2, 1, 3)                   -> Q/DQ (input's params)
  Softmax over the 16 bins                 (output 1/256, zero point 0: the quantizer's fixed params)
  Conv 1x1 with the weights 0..15          (int8 symmetric per-tensor weights, no bias) -> Q/DQ
  Reshape [1, 4, 8400], Split [2, 2] -> lt, rb                            -> Q/DQ (input's params)
  x1y1 = Sub(anchor_points, lt)            (Sub is not quantized: float) -> Q/DQ as Add's input
  x2y2 = Add(anchor_points, rb)            (the anchors a quantized uint8 constant, which the
                                           float Sub reads dequantized too) -> Q/DQ
  xy   = Add(x1y1, x2y2)                                                    -> Q/DQ
  c_xy = Div(xy, 2), wh = Sub(x2y2, x1y1)  (float)                 -> Q/DQ as Concat's inputs
  dbox = Mul(Concat(c_xy, wh), strides)    (strides a quantized uint8 constant) -> Q/DQ each
  cls  = Sigmoid(cls)                                                       -> Q/DQ
  output0 = Concat(dbox, cls)              float: the final Concat is excluded from quantization
                                           (nodes_to_exclude), as users do: quantized with one
                                           range it would round every score to 0 or one box step

Every quantized tensor gets one QuantizeLinear -> DequantizeLinear pair that all its consumers read.
Ranges come from a float run of this head on three calibration inputs (seeds 101-103, not the
test's): DFL logits ~ N(0, 3) and class logits ~ N(-7, 2.5) (a few anchors score above 0.85),
plus 16 objects per input seen by 3 x 3 anchors each (seeded_head).

Usage: /usr/bin/python3 make_yolo_decode_qdq.py OUT.onnx
Also writes the test's three inputs, OUT_input_{1,2,3}.npy (seeds 1-3 of the same distribution).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
import yolov8n  # noqa: E402  (the head's constants and anchors are the generated YOLOv8n's)

REG_MAX, NUM_CLASSES = yolov8n.REG_MAX, yolov8n.NUM_CLASSES
GRIDS = tuple(yolov8n.IMAGE // s for s in yolov8n.STRIDES)
N = sum(g * g for g in GRIDS)  # 8400


def anchors_and_strides():
    """models/yolov8n.py's anchor points [1, 2, N] and strides [1, 1, N]."""
    points, strides = yolov8n.anchors_and_strides()
    return points[None], strides[None]


def seeded_head(seed):
    """A raw head: noise, plus 16 objects each seen by the 3 x 3 anchors around its center, whose
    DFL logits point at one common box and whose class scores are high, so that NMS has
    overlapping boxes of one class to suppress."""
    rng = np.random.default_rng(seed)
    box = rng.normal(0.0, 3.0, (1, 4, REG_MAX, N))
    cls = rng.normal(-7.0, 2.5, (1, NUM_CLASSES, N))
    offsets = np.cumsum([0] + [g * g for g in GRIDS])
    bins = np.arange(REG_MAX)
    for _ in range(16):
        level = int(rng.integers(len(GRIDS)))
        g = GRIDS[level]
        cy, cx = (int(v) for v in rng.integers(2, g - 2, 2))
        half_w, half_h = rng.uniform(2.0, 6.0, 2)
        c = int(rng.integers(NUM_CLASSES))
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                a = offsets[level] + (cy + dy) * g + (cx + dx)
                for side, dist in enumerate((half_w + dx, half_h + dy, half_w - dx, half_h - dy)):
                    box[0, side, :, a] = np.maximum(-2.0 * (bins - dist) ** 2, -12.0) + rng.normal(0.0, 0.3, REG_MAX)
                cls[0, c, a] = rng.normal(4.0, 1.0)
    return np.concatenate([box.reshape(1, 4 * REG_MAX, N), cls], axis=1).astype(np.float32)


def float_head(raw):
    """The head in float32 (numpy): every tensor the quantizer calibrates, by name."""
    t = {"raw": raw}
    t["box"], t["cls"] = raw[:, : 4 * REG_MAX], raw[:, 4 * REG_MAX:]
    t["dfl_bins"] = t["box"].reshape(1, 4, REG_MAX, N)
    t["dfl_transposed"] = t["dfl_bins"].transpose(0, 2, 1, 3)
    e = np.exp(t["dfl_transposed"] - t["dfl_transposed"].max(axis=1, keepdims=True))
    t["dfl_softmax"] = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    t["dfl_conv"] = np.einsum("nbkx,b->nkx", t["dfl_softmax"], np.arange(REG_MAX, dtype=np.float32))[:, None]
    t["dist"] = t["dfl_conv"].reshape(1, 4, N)
    t["lt"], t["rb"] = t["dist"][:, :2], t["dist"][:, 2:]
    points, strides = anchors_and_strides()
    t["x1y1"] = points - t["lt"]
    t["x2y2"] = points + t["rb"]
    t["xy_sum"] = t["x1y1"] + t["x2y2"]
    t["c_xy"] = t["xy_sum"] / np.float32(2)
    t["wh"] = t["x2y2"] - t["x1y1"]
    t["dbox_cells"] = np.concatenate([t["c_xy"], t["wh"]], axis=1)
    t["dbox"] = t["dbox_cells"] * strides
    t["cls_sigmoid"] = (1 / (1 + np.exp(-t["cls"]))).astype(np.float32)
    return t


def qparams(lo, hi):
    """uint8 asymmetric scale and zero point of a range, as the quantizer's compute_scale_zp."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zp = int(np.clip(round(-lo / float(scale)), 0, 255))
    return scale, zp


def build():
    calib = [float_head(seeded_head(s)) for s in (101, 102, 103)]
    ranges = {k: (min(c[k].min() for c in calib), max(c[k].max() for c in calib)) for k in calib[0]}
    nodes, inits = [], []
    points, strides = anchors_and_strides()

    def const(name, arr):
        inits.append(nh.from_array(np.asarray(arr), name))
        return name

    def qdq(tensor, scale, zp, out=None):
        """Q -> DQ of `tensor`; returns the dequantized name."""
        s = const(tensor + "_scale", np.array(scale, np.float32))
        z = const(tensor + "_zero_point", np.array(zp, np.uint8))
        q = tensor + "_quantized"
        out = out or tensor + "_dequantized"
        nodes.append(h.make_node("QuantizeLinear", [tensor, s, z], [q], name=tensor + "_QuantizeLinear"))
        nodes.append(h.make_node("DequantizeLinear", [q, s, z], [out], name=tensor + "_DequantizeLinear"))
        return out

    def qdq_calibrated(tensor):
        return qdq(tensor, *qparams(*ranges[tensor]))

    def quantized_constant(name, arr):
        """A float constant as the quantizer stores it: uint8 initializer + DequantizeLinear."""
        scale, zp = qparams(arr.min(), arr.max())
        q = np.clip(np.round(arr / scale) + zp, 0, 255).astype(np.uint8)
        const(name + "_quantized", q)
        s, z = const(name + "_scale", np.array(scale, np.float32)), const(name + "_zero_point", np.array(zp, np.uint8))
        nodes.append(h.make_node("DequantizeLinear", [name + "_quantized", s, z], [name + "_dequantized"],
                                 name=name + "_DequantizeLinear"))
        return name + "_dequantized"

    raw_scale, raw_zp = qparams(*ranges["raw"])
    raw = qdq("raw", raw_scale, raw_zp)
    nodes.append(h.make_node("Split", [raw, const("head_split", np.array([4 * REG_MAX, NUM_CLASSES], np.int64))],
                             ["box", "cls"], name="head_Split", axis=1))
    box, cls = qdq("box", raw_scale, raw_zp), qdq("cls", raw_scale, raw_zp)
    nodes.append(h.make_node("Reshape", [box, const("dfl_shape", np.array([1, 4, REG_MAX, N], np.int64))],
                             ["dfl_bins"], name="dfl_Reshape"))
    bins = qdq("dfl_bins", raw_scale, raw_zp)
    nodes.append(h.make_node("Transpose", [bins], ["dfl_transposed"], name="dfl_Transpose", perm=[0, 2, 1, 3]))
    tr = qdq("dfl_transposed", raw_scale, raw_zp)
    nodes.append(h.make_node("Softmax", [tr], ["dfl_softmax"], name="dfl_Softmax", axis=1))
    sm = qdq("dfl_softmax", np.float32(1.0 / 256.0), 0)
    # int8 symmetric per-tensor weights 0..15: scale 15 / 127, values round(k * 127 / 15).
    w = np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1)
    w_scale = np.float32(np.abs(w).max() / 127.0)
    const("dfl.conv.weight_quantized", np.clip(np.round(w / w_scale), -127, 127).astype(np.int8))
    const("dfl.conv.weight_scale", np.array(w_scale, np.float32))
    const("dfl.conv.weight_zero_point", np.array(0, np.int8))
    nodes.append(h.make_node("DequantizeLinear", ["dfl.conv.weight_quantized", "dfl.conv.weight_scale",
                                                  "dfl.conv.weight_zero_point"], ["dfl.conv.weight_dequantized"],
                             name="dfl.conv.weight_DequantizeLinear"))
    nodes.append(h.make_node("Conv", [sm, "dfl.conv.weight_dequantized"], ["dfl_conv"], name="dfl_Conv",
                             kernel_shape=[1, 1]))
    conv_scale, conv_zp = qparams(*ranges["dfl_conv"])
    conv = qdq("dfl_conv", conv_scale, conv_zp)
    nodes.append(h.make_node("Reshape", [conv, const("dist_shape", np.array([1, 4, N], np.int64))], ["dist"],
                             name="dfl_Reshape_out"))
    dist = qdq("dist", conv_scale, conv_zp)
    nodes.append(h.make_node("Split", [dist, const("dist_split", np.array([2, 2], np.int64))], ["lt", "rb"],
                             name="dist_Split", axis=1))
    lt, rb = qdq("lt", conv_scale, conv_zp), qdq("rb", conv_scale, conv_zp)
    anchors = quantized_constant("anchor_points", points)
    # Every consumer of a quantized constant reads its DequantizeLinear, the float Sub too.
    nodes.append(h.make_node("Sub", [anchors, lt], ["x1y1"], name="dist2bbox_Sub"))
    nodes.append(h.make_node("Add", [anchors, rb], ["x2y2"], name="dist2bbox_Add"))
    x1y1, x2y2 = qdq_calibrated("x1y1"), qdq_calibrated("x2y2")
    nodes.append(h.make_node("Add", [x1y1, x2y2], ["xy_sum"], name="dist2bbox_Add_1"))
    xy = qdq_calibrated("xy_sum")
    nodes.append(h.make_node("Div", [xy, const("two", np.array(2.0, np.float32))], ["c_xy"], name="dist2bbox_Div"))
    nodes.append(h.make_node("Sub", [x2y2, x1y1], ["wh"], name="dist2bbox_Sub_1"))
    c_xy, wh = qdq_calibrated("c_xy"), qdq_calibrated("wh")
    nodes.append(h.make_node("Concat", [c_xy, wh], ["dbox_cells"], name="dist2bbox_Concat", axis=1))
    cells = qdq_calibrated("dbox_cells")
    nodes.append(h.make_node("Mul", [cells, quantized_constant("strides", strides)], ["dbox"], name="dbox_Mul"))
    dbox = qdq_calibrated("dbox")
    nodes.append(h.make_node("Sigmoid", [cls], ["cls_sigmoid"], name="cls_Sigmoid"))
    scores = qdq_calibrated("cls_sigmoid")
    nodes.append(h.make_node("Concat", [dbox, scores], ["output0"], name="output_Concat", axis=1))

    graph = h.make_graph(nodes, "yolov8_decode_qdq",
                         [h.make_tensor_value_info("raw", T.FLOAT, [1, 4 * REG_MAX + NUM_CLASSES, N])],
                         [h.make_tensor_value_info("output0", T.FLOAT, [1, 4 + NUM_CLASSES, N])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], producer_name="make_yolo_decode_qdq.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_yolo_decode_qdq.py OUT.onnx")
    out = sys.argv[1]
    onnx.save(build(), out)
    # The test's inputs, seeds 1-3 (the calibration used 101-103), next to the model.
    stem = out[: -len(".onnx")] if out.endswith(".onnx") else out
    for seed in (1, 2, 3):
        np.save(f"{stem}_input_{seed}.npy", seeded_head(seed))
    print(f"make_yolo_decode_qdq: wrote {out} and {stem}_input_{{1,2,3}}.npy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
