#!/usr/bin/python3
"""Build a small QOperator model (ai.onnx opset 19, com.microsoft 1) whose every operator after the
input QuantizeLinear runs on the NPU, for the comparison with ONNX Runtime in
tests/reference/test_npu_ops_ort.cpp (issue 15: Slice, Pad, Mul and Sub of quantized tensors).

  x float [1, 8, 20, 24] -> QuantizeLinear -> Pad constant (the zero point) -> QLinearConv 3x3 -> a
  a -> Pad reflect -> QLinearConv 3x3 -> b
  b -> QLinearGlobalAveragePool -> g                      [1, 16, 1, 1]
  QLinearMul(a, g)  (broadcast, an SE-style gate)      -> m1
  QLinearMul(a, b)  (two independent tensors)          -> m2
  Slice(m1, H 1:-1:2, W 0::3)                          -> s1 [1, 16, 10, 9]
  Slice(m2, W from the end by -2)                      -> s2 [1, 16, 21, 13]
  Pad edge (H before 1, W after 2, through `axes`)    -> e1 [1, 16, 11, 11]
  Pad wrap (W 2 and 1)                                 -> wp [1, 16, 21, 16]
  DequantizeLinear x2 -> Sub -> QuantizeLinear (QDQ; e1 - g, broadcast) -> d
  outputs: DequantizeLinear of d ("sub_out") and of wp ("wrap_out"), float32.

Weights come from numpy's default_rng(15); scales were chosen from a float run so that outputs use
most of the uint8 range. Usage: /usr/bin/python3 make_npu_ops_model.py OUT.onnx
"""
import sys

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
import onnx

rng = np.random.default_rng(15)
inits = []


def const(name, arr):
    inits.append(nh.from_array(np.asarray(arr), name))
    return name


const("xs", np.float32(0.02)); const("xzp", np.uint8(128))
const("w1", rng.integers(-40, 40, (16, 8, 3, 3), dtype=np.int8)); const("w1s", np.float32(0.004)); const("w1zp", np.int8(0))
const("as", np.float32(0.03)); const("azp", np.uint8(120))
const("w2", rng.integers(-40, 40, (16, 16, 3, 3), dtype=np.int8))
const("w2s", rng.uniform(0.002, 0.004, 16).astype(np.float32)); const("w2zp", np.zeros(16, np.int8))
const("b2", rng.integers(-2000, 2000, 16, dtype=np.int32))
const("bs", np.float32(0.05)); const("bzp", np.uint8(130))
const("gs", np.float32(0.004)); const("gzp", np.uint8(128))
const("m1s", np.float32(0.0006)); const("m1zp", np.uint8(125))
const("m2s", np.float32(0.06)); const("m2zp", np.uint8(118))
const("ds", np.float32(0.002)); const("dzp", np.uint8(128))
const("pads_c", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64))
const("pads_r", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
const("pads_e", np.array([1, 0, 0, 2], np.int64)); const("axes_e", np.array([2, 3], np.int64))
const("pads_w", np.array([0, 0, 0, 2, 0, 0, 0, 1], np.int64))
const("s1_starts", np.array([1, 0], np.int64)); const("s1_ends", np.array([-1, 1000], np.int64))
const("s1_axes", np.array([2, 3], np.int64)); const("s1_steps", np.array([2, 3], np.int64))
const("s2_starts", np.array([-1], np.int64)); const("s2_ends", np.array([-1000], np.int64))
const("s2_axes", np.array([3], np.int64)); const("s2_steps", np.array([-2], np.int64))

nodes = [
    h.make_node("QuantizeLinear", ["x", "xs", "xzp"], ["xq"], name="quantize"),
    h.make_node("Pad", ["xq", "pads_c", "xzp"], ["xp"], mode="constant", name="pad_constant"),
    h.make_node("QLinearConv", ["xp", "xs", "xzp", "w1", "w1s", "w1zp", "as", "azp"], ["a"], name="conv_a"),
    h.make_node("Pad", ["a", "pads_r"], ["ap"], mode="reflect", name="pad_reflect"),
    h.make_node("QLinearConv", ["ap", "as", "azp", "w2", "w2s", "w2zp", "bs", "bzp", "b2"], ["b"], name="conv_b"),
    h.make_node("QLinearGlobalAveragePool", ["b", "bs", "bzp", "gs", "gzp"], ["g"], domain="com.microsoft",
                channels_last=0, name="gap"),
    h.make_node("QLinearMul", ["a", "as", "azp", "g", "gs", "gzp", "m1s", "m1zp"], ["m1"], domain="com.microsoft",
                name="mul_gate"),
    h.make_node("QLinearMul", ["a", "as", "azp", "b", "bs", "bzp", "m2s", "m2zp"], ["m2"], domain="com.microsoft",
                name="mul_ab"),
    h.make_node("Slice", ["m1", "s1_starts", "s1_ends", "s1_axes", "s1_steps"], ["s1"], name="slice_strided"),
    h.make_node("Slice", ["m2", "s2_starts", "s2_ends", "s2_axes", "s2_steps"], ["s2"], name="slice_backwards"),
    h.make_node("Pad", ["s1", "pads_e", "", "axes_e"], ["e1"], mode="edge", name="pad_edge"),
    h.make_node("Pad", ["s2", "pads_w"], ["wp"], mode="wrap", name="pad_wrap"),
    h.make_node("DequantizeLinear", ["e1", "m1s", "m1zp"], ["e1f"], name="dq_e1"),
    h.make_node("DequantizeLinear", ["g", "gs", "gzp"], ["gf"], name="dq_g"),
    h.make_node("Sub", ["e1f", "gf"], ["df"], name="sub"),
    h.make_node("QuantizeLinear", ["df", "ds", "dzp"], ["d"], name="q_sub"),
    h.make_node("DequantizeLinear", ["d", "ds", "dzp"], ["sub_out"], name="dq_sub_out"),
    h.make_node("DequantizeLinear", ["wp", "m2s", "m2zp"], ["wrap_out"], name="dq_wrap_out"),
]
graph = h.make_graph(nodes, "npu_ops", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 20, 24])],
                     [h.make_tensor_value_info("sub_out", T.FLOAT, [1, 16, 11, 11]),
                      h.make_tensor_value_info("wrap_out", T.FLOAT, [1, 16, 21, 16])], inits)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 19), h.make_opsetid("com.microsoft", 1)])
model.ir_version = 9  # opset 19 needs IR 9 (onnx 1.14); Debian's onnx 1.12 writes it without checking
onnx.save(model, sys.argv[1])
