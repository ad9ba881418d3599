#!/usr/bin/python3
"""Reference logits and label map of a TFLite segmentation model from Arm NN's CpuRef backend.

Arm NN 20.08's TFLite parser (Debian `python3-pyarmnn` + `libarmnn-cpuref-backend22`) refuses
ARG_MAX, the last operator of segmentation models such as DeepLabV3 (deeplabv3_mnv2_pascal_quant:
"Operator not supported ... ARG_MAX"). This script therefore

 1. rewrites the .tflite FlatBuffer so that the graph output is ARG_MAX's input (the quantized
    logits) and the ARG_MAX operator is gone (--logits-model writes that file too, so the runtime
    under test can run the very same truncated model);
 2. runs the truncated model with pyarmnn on the CpuRef backend on uint8 inputs read from .npy
    files ([1, H, W, C], NHWC);
 3. writes the logits (--logits, the model's own dtype and NHWC shape) and the label map
    (--labels, int64 [1, H, W]): the index of the largest logit along the last axis, the first
    one on ties, which is TFLite's ARG_MAX rule (reference_ops::ArgMinMax keeps the first index
    whose value compares greater than the running maximum).

The rewrite is done in place in a copy of the buffer with the `flatbuffers` Python runtime
(Debian `python3-flatbuffers`) reading the tables: the subgraph's `outputs` vector gets the
ARG_MAX input tensor index, and the operator is dropped from the `operators` vector of offsets
(the later entries move one slot down with their relative offsets adjusted, the length shrinks
by one). No other byte changes, so every other field (including ones this script does not know)
stays as written. Field ids are those of TFLite's public schema (tensorflow/lite/schema/
schema.fbs), the same ones compiler-bridge/schema/tflite_subset.fbs declares.

Usage:
  /usr/bin/python3 tests/models/armnn_ref.py MODEL.tflite --input x.npy \
      [--logits logits.npy ...] [--labels labels.npy ...] [--logits-model truncated.tflite]
(several inputs share one parse and optimization of the network).
Exit status 0 on success; any failure (pyarmnn missing, parse error) raises and exits non-zero.
"""

import argparse
import struct
import sys

import numpy as np
import os
import tempfile

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


def run_armnn_outputs(model_path, xs):
    """Runs a model on CpuRef once per element of xs (one parse and optimization for all): an
    array for a one-input model, or a dict of arrays by input tensor name. Returns (outputs,
    output names, output binding infos): outputs[i] is the list of arrays of every subgraph
    output for xs[i], in the subgraph's output order."""
    import pyarmnn as ann  # imported here so --help works without it

    parser = ann.ITfLiteParser()
    network = parser.CreateNetworkFromBinaryFile(model_path)
    in_names = list(parser.GetSubgraphInputTensorNames(0))
    out_names = list(parser.GetSubgraphOutputTensorNames(0))
    in_bindings = [parser.GetNetworkInputBindingInfo(0, n) for n in in_names]
    out_bindings = [parser.GetNetworkOutputBindingInfo(0, n) for n in out_names]
    runtime = ann.IRuntime(ann.CreationOptions())
    optimized, _ = ann.Optimize(network, [ann.BackendId("CpuRef")], runtime.GetDeviceSpec(),
                                ann.OptimizerOptions())
    net_id, _ = runtime.LoadNetwork(optimized)
    ys = []
    for x in xs:
        if not isinstance(x, dict):
            if len(in_names) != 1:
                raise SystemExit(f"{model_path} has inputs {in_names}; give them by name")
            x = {in_names[0]: x}
        if sorted(x) != sorted(in_names):
            raise SystemExit(f"{model_path} has inputs {in_names}, given {sorted(x)}")
        inputs = ann.make_input_tensors(in_bindings, [x[n] for n in in_names])
        outputs = ann.make_output_tensors(out_bindings)
        runtime.EnqueueWorkload(net_id, inputs, outputs)
        ys.append(ann.workload_tensors_to_ndarray(outputs))
    return ys, out_names, [b[1] for b in out_bindings]


def run_armnn(model_path, xs):
    """Runs the model on CpuRef once per input; returns (outputs, output name, scale, offset)
    of its first output."""
    ys, names, infos = run_armnn_outputs(model_path, xs)
    return ([y[0] for y in ys], names[0], infos[0].GetQuantizationScale(),
            infos[0].GetQuantizationOffset())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--input", nargs="+", required=True,
                    help="uint8 .npy files, each a model input [1, H, W, C]")
    ap.add_argument("--logits", nargs="+", default=[],
                    help="write the reference logits of each input here (.npy, one per input)")
    ap.add_argument("--labels", nargs="+", default=[],
                    help="write the reference label map of each input here (.npy int64 [1, H, W])")
    ap.add_argument("--logits-model", help="write the truncated model (output = logits) here")
    args = ap.parse_args()
    for what, paths in (("--logits", args.logits), ("--labels", args.labels)):
        if paths and len(paths) != len(args.input):
            ap.error(f"{what} needs one path per input ({len(args.input)}), got {len(paths)}")

    with open(args.model, "rb") as f:
        data = f.read()
    truncated, logits_index = truncate_at_argmax(data)
    xs = [np.load(p) for p in args.input]
    if args.logits_model:
        with open(args.logits_model, "wb") as f:
            f.write(truncated)
        results = run_armnn(args.logits_model, xs)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "logits.tflite")
            with open(path, "wb") as f:
                f.write(truncated)
            results = run_armnn(path, xs)
    ys, name, scale, zero_point = results
    for i, y in enumerate(ys):
        labels = np.argmax(y, axis=-1).astype(np.int64)
        if args.logits:
            np.save(args.logits[i], y)
        if args.labels:
            np.save(args.labels[i], labels)
        print(f"armnn CpuRef: {args.input[i]}: logits '{name}' (tensor {logits_index}) {y.dtype} "
              f"{list(y.shape)} scale {scale} zero_point {zero_point}; "
              f"labels present {sorted(np.unique(labels).tolist())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
