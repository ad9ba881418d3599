#!/usr/bin/python3
"""Structural check of a qoperator_to_qdq.py conversion.

Usage: /usr/bin/python3 verify_qdq.py QOPERATOR.onnx QDQ.onnx

For every node of the QOperator model it checks that the QDQ model contains
  * for QLinearConv / QLinearMatMul / QLinearAdd / QLinearGlobalAveragePool /
    QLinearConcat / MaxPool-on-quantized-data: QuantizeLinear -> original output
    name, fed by the expected float op (same attributes), whose inputs are all
    DequantizeLinear nodes of the original quantized tensors, with scale /
    zero-point / weight / bias arrays byte-for-byte equal to the original ones
    (bias scale == float32(x_scale) * w_scale, int32 zero points), correct axis;
  * every other node unchanged (opset-13 attribute->input moves accepted);
and that graph inputs/outputs and all original initializers are unchanged and
no node of the QDQ model is unaccounted for.  Exit status 1 on any mismatch.
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

MS = "com.microsoft"


def consts(g):
    c = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    c[n.output[0]] = numpy_helper.to_array(a.t)
    return c


def same(a, b):
    return a is not None and b is not None and a.dtype == b.dtype and a.shape == b.shape \
        and a.tobytes() == b.tobytes()


def attrs(n):
    return {a.name: helper.get_attribute_value(a) for a in n.attribute}


class Verifier:
    def __init__(self, m_in, m_out):
        self.gi, self.go = m_in.graph, m_out.graph
        self.ci, self.co = consts(self.gi), consts(self.go)
        self.prod = {o: n for n in self.go.node for o in n.output}
        self.used = set()          # ids of output nodes accounted for
        self.errors = []
        self.checked = 0

    def err(self, msg):
        self.errors.append(msg)

    def cin(self, name):
        return self.ci.get(name) if name else None

    def cout(self, name):
        return self.co.get(name) if name else None

    def eq_param(self, orig_name, new_name, what, ctx):
        """Original param (possibly absent) equals the one used in the QDQ model."""
        if not orig_name and not new_name:
            return
        a, b = self.cin(orig_name), self.cout(new_name)
        if orig_name and orig_name not in self.ci:
            if orig_name != new_name:
                self.err("%s: %s %r is not a constant and not passed through (%r)" % (ctx, what, orig_name, new_name))
            return
        if not orig_name or not new_name:
            # absent zero point == uint8 0
            if not orig_name:
                a = np.zeros((), np.uint8)
            else:
                b = np.zeros((), np.uint8)
        if not same(a, b):
            self.err("%s: %s differs: %r vs %r" % (ctx, what, a, b))

    def take(self, tensor, op, ctx):
        n = self.prod.get(tensor)
        if n is None or n.op_type != op or n.domain not in ("", "ai.onnx"):
            self.err("%s: %r is not produced by %s (got %s)" % (ctx, tensor, op, n and n.op_type))
            return None
        self.used.add(id(n))
        return n

    def check_dq(self, tensor, x, s, zp, axis, ctx):
        dq = self.take(tensor, "DequantizeLinear", ctx)
        if dq is None:
            return
        ins = list(dq.input) + ["", "", ""]
        if ins[0] != x:
            xa, xb = self.cin(x), self.cout(ins[0])
            if not same(xa, xb):
                self.err("%s: DQ input %r is not the original %r" % (ctx, ins[0], x))
        self.eq_param(s, ins[1], "scale", ctx)
        self.eq_param(zp, ins[2], "zero point", ctx)
        got = attrs(dq).get("axis")
        if axis is None:
            sz = self.cout(ins[1])
            if got is not None and sz is not None and sz.size > 1:
                self.err("%s: unexpected axis %r" % (ctx, got))
        elif got != axis:
            self.err("%s: DQ axis %r, expected %r" % (ctx, got, axis))

    def check_pattern(self, n, float_op, dq_specs, y_s, y_zp, float_attrs=None):
        ctx = "%s %r" % (n.op_type, n.name)
        q = self.take(n.output[0], "QuantizeLinear", ctx)
        if q is None:
            return
        qins = list(q.input) + ["", ""]
        self.eq_param(y_s, qins[1], "output scale", ctx)
        self.eq_param(y_zp, qins[2], "output zero point", ctx)
        if attrs(q).get("axis") not in (None, 1) and self.cout(qins[1]).size == 1:
            self.err("%s: Q has axis" % ctx)
        f = self.take(q.input[0], float_op, ctx)
        if f is None:
            return
        if float_attrs is not None and attrs(f) != float_attrs:
            self.err("%s: %s attributes %r != %r" % (ctx, float_op, attrs(f), float_attrs))
        if len(f.input) != len(dq_specs):
            self.err("%s: %s has %d inputs, expected %d" % (ctx, float_op, len(f.input), len(dq_specs)))
            return
        for t, spec in zip(f.input, dq_specs):
            if spec[0] == "bias":
                self.check_bias(t, *spec[1:], ctx=ctx)
            else:
                self.check_dq(t, *spec, ctx=ctx)
        self.checked += 1

    def check_bias(self, tensor, b, xs, ws, ctx):
        dq = self.take(tensor, "DequantizeLinear", ctx)
        if dq is None:
            return
        ins = list(dq.input) + ["", ""]
        if ins[0] != b or not same(self.cin(b), self.cout(ins[0])):
            self.err("%s: bias DQ input %r != %r or bytes differ" % (ctx, ins[0], b))
        exp = np.asarray(np.float32(self.ci[xs].astype(np.float32).reshape(())) * self.ci[ws].astype(np.float32),
                         dtype=np.float32)
        got = self.cout(ins[1])
        if not same(exp, got):
            self.err("%s: bias scale differs from float32(x_s)*w_s" % ctx)
        zp = self.cout(ins[2])
        if zp is None or zp.dtype != np.int32 or zp.shape != exp.shape or np.any(zp != 0):
            self.err("%s: bias zero point is not int32 zeros of scale shape" % ctx)
        ax = attrs(dq).get("axis")
        if exp.size > 1 and ax != 0:
            self.err("%s: bias DQ axis %r" % (ctx, ax))

    def producer_params(self, tensor):
        """Output quantization params of the QOperator node that produced a
        quantized tensor, traced back through data movement ops."""
        prod = {o: n for n in self.gi.node for o in n.output}
        movers = {"Reshape", "Transpose", "Split", "Flatten", "Squeeze", "Unsqueeze", "Identity",
                  "Slice", "Gather", "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "MaxPool"}
        while tensor in prod:
            n = prod[tensor]
            ins = list(n.input) + [""] * 9
            if n.op_type in ("QLinearConv", "QLinearMatMul", "QLinearAdd"):
                return ins[6], ins[7]
            if n.op_type == "QLinearGlobalAveragePool":
                return ins[3], ins[4]
            if n.op_type == "QLinearConcat":
                return ins[0], ins[1]
            if n.op_type == "QuantizeLinear":
                return ins[1], ins[2]
            if n.op_type in movers:
                tensor = n.input[0]
                continue
            break
        return None

    def run(self):
        gi, go = self.gi, self.go
        if [v.SerializeToString() for v in gi.input] != [v.SerializeToString() for v in go.input]:
            self.err("graph inputs differ")
        if [v.SerializeToString() for v in gi.output] != [v.SerializeToString() for v in go.output]:
            self.err("graph outputs differ")
        out_inits = {t.name: t for t in go.initializer}
        for t in gi.initializer:
            if t.name not in out_inits or out_inits[t.name].SerializeToString() != t.SerializeToString():
                self.err("initializer %r changed or missing" % t.name)

        out_by_output = {}
        for n in go.node:
            for o in n.output:
                out_by_output[o] = n
        quantized_outputs = set()
        for n in gi.node:
            ins = list(n.input) + [""] * 9
            t, d = n.op_type, n.domain
            if t == "QLinearConv" and d == "":
                ws = self.ci[ins[4]]
                specs = [(ins[0], ins[1], ins[2], None),
                         (ins[3], ins[4], ins[5], 0 if ws.size > 1 else None)]
                if ins[8]:
                    specs.append(("bias", ins[8], ins[1], ins[4]))
                self.check_pattern(n, "Conv", specs, ins[6], ins[7], attrs(n))
            elif t == "QLinearMatMul" and d == "":
                bs = self.ci[ins[4]]
                self.check_pattern(n, "MatMul", [(ins[0], ins[1], ins[2], None),
                                                 (ins[3], ins[4], ins[5], 1 if bs.size > 1 else None)],
                                   ins[6], ins[7], {})
            elif t == "QLinearAdd" and d == MS:
                self.check_pattern(n, "Add", [(ins[0], ins[1], ins[2], None), (ins[3], ins[4], ins[5], None)],
                                   ins[6], ins[7], {})
            elif t == "QLinearGlobalAveragePool" and d == MS:
                self.check_pattern(n, "GlobalAveragePool", [(ins[0], ins[1], ins[2], None)], ins[3], ins[4], {})
            elif t == "QLinearConcat" and d == MS:
                specs = [(n.input[k], n.input[k + 1], n.input[k + 2], None) for k in range(2, len(n.input), 3)]
                self.check_pattern(n, "Concat", specs, ins[0], ins[1], {"axis": attrs(n)["axis"]})
            elif t == "MaxPool" and d == "" and n.output[0] in out_by_output and \
                    out_by_output[n.output[0]].op_type == "QuantizeLinear":
                q = out_by_output[n.output[0]]
                qins = list(q.input) + ["", ""]
                # MaxPool: DQ and Q must use the same params (values), and DQ must read the original input
                pp = self.producer_params(ins[0])
                if pp is None:
                    self.err("MaxPool %r: cannot trace producer params in the original model" % n.name)
                else:
                    self.eq_param(pp[0], qins[1], "MaxPool Q scale vs producer", n.name)
                    self.eq_param(pp[1], qins[2], "MaxPool Q zero point vs producer", n.name)
                self.check_pattern(n, "MaxPool", [(ins[0], qins[1], qins[2], None)], qins[1], qins[2], attrs(n))
                quantized_outputs.add(n.output[0])
            else:
                m = out_by_output.get(n.output[0]) if n.output else None
                if m is None:
                    self.err("node %s %r missing" % (t, n.name))
                    continue
                self.used.add(id(m))
                if m.SerializeToString() == n.SerializeToString():
                    continue
                # accepted opset-13 change: attribute moved to a constant input
                moved = {"Split": "split", "Squeeze": "axes", "Unsqueeze": "axes", "ReduceSum": "axes"}.get(t)
                an, am = attrs(n), attrs(m)
                ok = moved is not None and moved in an and moved not in am and \
                    list(m.input[:len(n.input)]) == list(n.input) and len(m.input) == len(n.input) + 1 and \
                    list(self.co.get(m.input[-1], [])) == list(an[moved]) and \
                    {k: v for k, v in an.items() if k != moved} == am and list(m.output) == list(n.output)
                if t in ("Softmax", "LogSoftmax", "Hardmax"):
                    ok = list(m.input) == list(n.input) and "axis" in am
                if not ok:
                    self.err("node %s %r changed" % (t, n.name))
        for n in go.node:
            if id(n) not in self.used:
                self.err("unaccounted node %s %r in QDQ model" % (n.op_type, n.name))
        if any(n.domain == MS for n in go.node) is False and any(o.domain == MS for o in self.go_model.opset_import):
            self.err("com.microsoft opset import left although unused")
        return self.errors


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: %s QOPERATOR.onnx QDQ.onnx\n" % argv[0])
        return 2
    mi, mo = onnx.load(argv[1]), onnx.load(argv[2])
    v = Verifier(mi, mo)
    v.go_model = mo
    errors = v.run()
    for e in errors:
        print("MISMATCH:", e)
    print("%s: %d QLinear/quantized-MaxPool nodes checked, %d other nodes, %s"
          % (argv[2].rsplit("/", 1)[-1], v.checked, len(mi.graph.node) - v.checked,
             "OK" if not errors else "%d ERRORS" % len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
