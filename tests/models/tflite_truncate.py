#!/usr/bin/python3
"""Writes a copy of a TFLite segmentation model whose output is its ARG_MAX's input (the logits).

DeepLabV3 (coral/deeplabv3_mnv2_pascal_quant) ends in ARG_MAX; tests/tflite_peer/
test_tflite_peer_deeplab.cpp compares the logits too, so it runs this copy under both this
runtime and TensorFlow Lite. The subgraph's `outputs` vector gets the ARG_MAX input tensor index,
and the operator is dropped from the `operators` vector of offsets (later entries move one slot
down with their relative offsets adjusted, the length shrinks by one). No other byte changes, so
every other field (including ones this script does not know) stays as written. The tables are
read with the `flatbuffers` Python runtime (Debian `python3-flatbuffers`); field ids are those
of TFLite's public schema (tensorflow/lite/schema/schema.fbs), the same ones
compiler-bridge/schema/tflite_subset.fbs declares.

Usage: /usr/bin/python3 tests/models/tflite_truncate.py MODEL.tflite OUT.tflite
Exit status 0 on success; a model without exactly one ARG_MAX or one output exits non-zero with
one line saying so.
"""

import struct
import sys

import flatbuffers.encode
import flatbuffers.number_types
import flatbuffers.packer
import flatbuffers.table

ARG_MAX = 56  # BuiltinOperator ARG_MAX

# vtable slots (4 + 2 * field id) of the public schema
MODEL_OPERATOR_CODES = 6   # Model.operator_codes (id 1)
MODEL_SUBGRAPHS = 8        # Model.subgraphs (id 2)
SUBGRAPH_OUTPUTS = 8       # SubGraph.outputs (id 2)
SUBGRAPH_OPERATORS = 10    # SubGraph.operators (id 3)
OPERATOR_OPCODE_INDEX = 4  # Operator.opcode_index (id 0)
OPERATOR_INPUTS = 6        # Operator.inputs (id 1)
OPCODE_DEPRECATED_BUILTIN = 4  # OperatorCode.deprecated_builtin_code (id 0, int8)
OPCODE_BUILTIN = 10            # OperatorCode.builtin_code (id 3, int32)


def table_at(buf, pos):
    return flatbuffers.table.Table(buf, pos)


def vector_of_tables(tab, slot):
    """Positions of the elements of a vector of tables and the position of the vector's first
    element (each element is a uoffset relative to its own position)."""
    o = tab.Offset(slot)
    if o == 0:
        return [], None
    start = tab.Vector(o)
    n = tab.VectorLen(o)
    return [tab.Indirect(start + 4 * i) for i in range(n)], start


def builtin_code(buf, opcode_pos):
    t = table_at(buf, opcode_pos)
    o = t.Offset(OPCODE_DEPRECATED_BUILTIN)
    dep = t.Get(flatbuffers.number_types.Int8Flags, t.Pos + o) if o else 0
    o = t.Offset(OPCODE_BUILTIN)
    code = t.Get(flatbuffers.number_types.Int32Flags, t.Pos + o) if o else 0
    return max(dep, code)


def truncate_at_argmax(data):
    """Returns (new bytes, logits tensor index): ARG_MAX removed, its input made the output."""
    buf = bytearray(data)
    if buf[4:8] != b"TFL3":
        raise SystemExit("not a TFLite FlatBuffer (no TFL3 identifier)")
    model = table_at(buf, flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0))
    codes, _ = vector_of_tables(model, MODEL_OPERATOR_CODES)
    subgraphs, _ = vector_of_tables(model, MODEL_SUBGRAPHS)
    if not subgraphs:
        raise SystemExit("the model has no subgraph")
    sg = table_at(buf, subgraphs[0])
    ops, ops_start = vector_of_tables(sg, SUBGRAPH_OPERATORS)
    argmax = []
    for i, pos in enumerate(ops):
        op = table_at(buf, pos)
        o = op.Offset(OPERATOR_OPCODE_INDEX)
        idx = op.Get(flatbuffers.number_types.Uint32Flags, op.Pos + o) if o else 0
        if builtin_code(buf, codes[idx]) == ARG_MAX:
            argmax.append(i)
    if len(argmax) != 1:
        raise SystemExit(f"expected exactly one ARG_MAX operator, found {len(argmax)}")
    k = argmax[0]
    op = table_at(buf, ops[k])
    o = op.Offset(OPERATOR_INPUTS)
    logits = op.Get(flatbuffers.number_types.Int32Flags, op.Vector(o))
    # The subgraph must have one output (the label map), replaced by the logits tensor.
    o = sg.Offset(SUBGRAPH_OUTPUTS)
    if o == 0 or sg.VectorLen(o) != 1:
        raise SystemExit("expected a subgraph with exactly one output")
    struct.pack_into("<i", buf, sg.Vector(o), logits)
    # Drop entry k of the operators vector: later entries move down 4 bytes, so their offsets
    # (relative to their own slot) grow by 4.
    n = len(ops)
    for i in range(k, n - 1):
        rel = struct.unpack_from("<I", buf, ops_start + 4 * (i + 1))[0]
        struct.pack_into("<I", buf, ops_start + 4 * i, rel + 4)
    struct.pack_into("<I", buf, ops_start - 4, n - 1)
    return bytes(buf), logits


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: tflite_truncate.py MODEL.tflite OUT.tflite")
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    truncated, logits = truncate_at_argmax(data)
    with open(sys.argv[2], "wb") as f:
        f.write(truncated)
    print(f"tflite_truncate: {sys.argv[2]}: output = tensor {logits} (ARG_MAX's input)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
