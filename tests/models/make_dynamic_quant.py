#!/usr/bin/env python3
"""Writes a small dynamically quantized ONNX model (ONNX Runtime's quantize_dynamic pattern) with
Constant nodes, plus a seeded input and its expected output computed here in numpy:

  x -> Mul(Constant value_float) -> DynamicQuantizeLinear -> ConvInteger(uint8 weights, pads 1)
    -> Cast(float) -> Mul(x_scale) -> Mul(Constant tensor, per-channel weight scale) -> y

Usage: make_dynamic_quant.py OUT_DIR   (writes model.onnx, input_0.pb, output_0.pb)
Needs Debian's python3-onnx and python3-numpy; run with /usr/bin/python3.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def dynamic_quantize(x):
    """DynamicQuantizeLinear as the ONNX spec writes it, in float32, rounding half to even."""
    lo = np.float32(min(0.0, float(x.min())))
    hi = np.float32(max(0.0, float(x.max())))
    scale = np.float32((hi - lo) / np.float32(255))
    zp = np.uint8(np.clip(np.rint(np.float32(0) - lo / scale), 0, 255))
    y = np.clip(np.rint(x / scale) + np.float32(zp), 0, 255).astype(np.uint8)
    return y, scale, zp


def conv_integer(x, x_zp, w, w_zp, pad):
    xi = np.pad(x.astype(np.int32) - int(x_zp), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    wi = w.astype(np.int32) - int(w_zp)
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    y = np.zeros((n, m, h, wd), dtype=np.int32)
    for i in range(h):
        for j in range(wd):
            patch = xi[:, :, i:i + kh, j:j + kw]
            y[:, :, i, j] = np.tensordot(patch, wi, axes=([1, 2, 3], [1, 2, 3]))
    return y


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(15)
    w = rng.integers(0, 256, size=(4, 3, 3, 3), dtype=np.uint8)
    w_zp = np.uint8(128)
    w_scale = np.array([0.01, 0.02, 0.015, 0.005], dtype=np.float32).reshape(1, 4, 1, 1)
    nodes = [
        helper.make_node("Constant", [], ["gain"], value_float=0.5),
        helper.make_node("Constant", [], ["w_scale"],
                         value=numpy_helper.from_array(w_scale, "w_scale_value")),
        helper.make_node("Mul", ["x", "gain"], ["x_half"]),
        helper.make_node("DynamicQuantizeLinear", ["x_half"], ["x_q", "x_scale", "x_zp"]),
        helper.make_node("ConvInteger", ["x_q", "w", "x_zp", "w_zp"], ["acc"], pads=[1, 1, 1, 1]),
        helper.make_node("Cast", ["acc"], ["acc_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["acc_f", "x_scale"], ["y_x"]),
        helper.make_node("Mul", ["y_x", "w_scale"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "dynamic_quant",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(w_zp), "w_zp")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, "model.onnx"))

    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32) * np.float32(3)
    xq, xs, xzp = dynamic_quantize(x * np.float32(0.5))
    acc = conv_integer(xq, xzp, w, w_zp, 1)
    y = (acc.astype(np.float32) * xs) * w_scale
    with open(os.path.join(out_dir, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    with open(os.path.join(out_dir, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y.astype(np.float32), "y").SerializeToString())


if __name__ == "__main__":
    main()
