#!/usr/bin/python3
"""Build a small synthetic QOperator model (opset 12) exercising what the zoo
models do not: QLinearConcat with differing input params, per-tensor conv
weights without bias, MaxPool after Transpose on quantized data,
QLinearGlobalAveragePool, Squeeze axes attribute and Softmax (opset bump).

Usage: /usr/bin/python3 make_synthetic_qoperator.py OUT.onnx
"""
import sys
import numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
rng = np.random.default_rng(1)
I = []
def c(name, arr): I.append(nh.from_array(np.asarray(arr), name)); return name
c("xs", np.float32(0.02)); c("xzp", np.uint8(128))
c("w1", rng.integers(-100, 100, (4, 3, 3, 3), dtype=np.int8)); c("w1s", np.float32(0.01)); c("w1zp", np.int8(0))
c("y1s", np.float32(0.05)); c("y1zp", np.uint8(10))
c("w2", rng.integers(-100, 100, (5, 3, 1, 1), dtype=np.int8)); c("w2s", rng.uniform(0.005, 0.02, 5).astype(np.float32)); c("w2zp", np.zeros(5, np.int8))
c("b2", rng.integers(-500, 500, 5, dtype=np.int32))
c("y2s", np.float32(0.04)); c("y2zp", np.uint8(100))
c("cs", np.float32(0.06)); c("czp", np.uint8(50))
c("gs", np.float32(0.03)); c("gzp", np.uint8(20))
c("fw", rng.integers(-100, 100, (9, 6), dtype=np.int8)); c("fws", rng.uniform(0.005, 0.02, 6).astype(np.float32)); c("fwzp", np.zeros(6, np.int8))
c("fys", np.float32(0.1)); c("fyzp", np.uint8(128))
nodes = [
 h.make_node("QuantizeLinear", ["x", "xs", "xzp"], ["xq"]),
 h.make_node("QLinearConv", ["xq", "xs", "xzp", "w1", "w1s", "w1zp", "y1s", "y1zp"], ["c1"], pads=[1,1,1,1], name="conv1"),
 h.make_node("QLinearConv", ["xq", "xs", "xzp", "w2", "w2s", "w2zp", "y2s", "y2zp", "b2"], ["c2"], name="conv2"),
 h.make_node("QLinearConcat", ["cs", "czp", "c1", "y1s", "y1zp", "c2", "y2s", "y2zp"], ["cat"], domain="com.microsoft", axis=1, name="cat"),
 h.make_node("Transpose", ["cat"], ["catT"], perm=[0, 1, 3, 2]),
 h.make_node("MaxPool", ["catT"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], name="mp"),
 h.make_node("QLinearGlobalAveragePool", ["mp", "cs", "czp", "gs", "gzp"], ["gap"], domain="com.microsoft", channels_last=0, name="gap"),
 h.make_node("Squeeze", ["gap"], ["sq"], axes=[3]),
 h.make_node("Flatten", ["sq"], ["fl"], axis=1),
 h.make_node("QLinearMatMul", ["fl", "gs", "gzp", "fw", "fws", "fwzp", "fys", "fyzp"], ["mm"], name="mm"),
 h.make_node("DequantizeLinear", ["mm", "fys", "fyzp"], ["mmf"]),
 h.make_node("Softmax", ["mmf"], ["y"], axis=1),
]
# Flatten of [1,9,1]: -> [1,9]
g = h.make_graph(nodes, "synth", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, 6])], I)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 12), h.make_opsetid("com.microsoft", 1)])
m.ir_version = 7
onnx.save(m, sys.argv[1])
