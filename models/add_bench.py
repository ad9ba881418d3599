#!/usr/bin/env python3
"""Four QDQ Adds for timing the simulator's Add kernels (docs/simulator-speed.md, issue 29).

    python3 models/add_bench.py OUT.onnx

Each Add is DequantizeLinear x2 -> Add -> QuantizeLinear -> DequantizeLinear on its own float
inputs (quantized on the host), output [1, 64, 56, 56]:
  add_u8       uint8, equal shapes                       -> AddFormula::MlasRatios
  add_s8       int8, equal shapes                        -> MlasRatiosUint8 (ORT's QDQS8ToU8)
  add_u8_swap  uint8, a [1, 64, 56, 1] broadcast along W -> MlasRatios, ORT's swapped operands
  add_s8_swap  int8, a [1, 64, 56, 1] broadcast along W  -> MlasRatiosUint8, swapped
"""
import sys

import onnx
from onnx import TensorProto, helper

FULL = [1, 64, 56, 56]
COLUMN = [1, 64, 56, 1]


def main(out):
    nodes, inits, inputs, outputs = [], [], [], []

    def qdq(name, x, scale, zp, dtype):
        s = helper.make_tensor(name + "_s", TensorProto.FLOAT, [], [scale])
        z = helper.make_tensor(name + "_z", dtype, [], [zp])
        inits.extend([s, z])
        nodes.append(helper.make_node("QuantizeLinear", [x, s.name, z.name], [name + "_q"], name=name + "_Q"))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", s.name, z.name], [name + "_dq"],
                                      name=name + "_DQ"))
        return name + "_dq"

    for name, dtype, a_shape in [("add_u8", TensorProto.UINT8, FULL), ("add_s8", TensorProto.INT8, FULL),
                                 ("add_u8_swap", TensorProto.UINT8, COLUMN),
                                 ("add_s8_swap", TensorProto.INT8, COLUMN)]:
        signed = dtype == TensorProto.INT8
        inputs.append(helper.make_tensor_value_info(name + "_a", TensorProto.FLOAT, a_shape))
        inputs.append(helper.make_tensor_value_info(name + "_b", TensorProto.FLOAT, FULL))
        a = qdq(name + "_a", name + "_a", 0.031, -3 if signed else 125, dtype)
        b = qdq(name + "_b", name + "_b", 0.017, 7 if signed else 131, dtype)
        nodes.append(helper.make_node("Add", [a, b], [name + "_sum"], name=name))
        y = qdq(name + "_y", name + "_sum", 0.05, 1 if signed else 128, dtype)
        nodes.append(helper.make_node("Identity", [y], [name + "_out"], name=name + "_out"))
        outputs.append(helper.make_tensor_value_info(name + "_out", TensorProto.FLOAT, FULL))
    graph = helper.make_graph(nodes, "add_bench", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main(sys.argv[1])
