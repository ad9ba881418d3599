#!/usr/bin/python3
"""Convert a QOperator-format quantized ONNX model into the equivalent QDQ model.

Usage: /usr/bin/python3 qoperator_to_qdq.py [--float-weights] IN.onnx OUT.onnx

Every QLinear* node becomes DequantizeLinear(inputs) -> float op -> QuantizeLinear
(output keeps its original name), the way ONNX Runtime's quantizer lays out a
QDQ model.  All quantization parameters (scale / zero-point initializers,
integer weights and int32 biases) are reused unchanged; the only new constants
are the per-channel bias scales float32(x_scale) * w_scale (float32 arithmetic)
and their int32 zero points.  See README.md in this folder for the rules.

With --float-weights the integer weights of QLinearConv / QLinearMatMul become float32
initializers (their dequantized values) behind a QuantizeLinear -> DequantizeLinear pair, the
form of exporters that keep float weights; quantizing them again with the same parameters
gives back the integer weights exactly, so the outputs stay identical.

Needs only onnx (tested with Debian python3-onnx 1.12) and numpy.
"""
import collections
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

MS = "com.microsoft"

# Ops that only move / select quantized data; they stay on the quantized tensor
# unchanged and the tensor keeps the quantization params of its input.
DATA_MOVEMENT = {
    "Reshape", "Transpose", "Split", "Flatten", "Squeeze", "Unsqueeze", "Identity",
    "Slice", "Gather", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
}
# QLinear ops in com.microsoft that we know about but do not convert.
UNSUPPORTED_QOPS = {
    "QLinearLeakyRelu", "QLinearAveragePool",
    "QLinearSoftmax", "QLinearReduceMean", "QLinearWhere", "QGemm", "QAttention",
    "QEmbedLayerNormalization", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
    "QLinearConvTranspose",
}


class ConversionError(RuntimeError):
    pass


def fail(msg):
    raise ConversionError(msg)


def is_default_domain(domain):
    return domain in ("", "ai.onnx")


def op_key(node):
    return node.op_type if is_default_domain(node.domain) else "%s:%s" % (node.domain, node.op_type)


def count_ops(graph):
    return collections.Counter(op_key(n) for n in graph.node)


def fmt_counts(c):
    return "{" + ", ".join("%s:%d" % (k, c[k]) for k in sorted(c)) + "}"


def attr_dict(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class Converter:
    def __init__(self, model, float_weights=False):
        self.model = model
        self.float_weights = float_weights
        self.g = model.graph
        for n in self.g.node:
            for a in n.attribute:
                if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    fail("node %r (%s) has a subgraph; subgraphs are not supported" % (n.name, n.op_type))

        # constants: initializers and Constant nodes
        self.const = {t.name: numpy_helper.to_array(t) for t in self.g.initializer}
        for n in self.g.node:
            if n.op_type == "Constant" and is_default_domain(n.domain):
                for a in n.attribute:
                    if a.name == "value":
                        self.const[n.output[0]] = numpy_helper.to_array(a.t)

        # every name already in use (tensors, value_info, nodes)
        self.used = set(self.const)
        for vi in list(self.g.input) + list(self.g.output) + list(self.g.value_info):
            self.used.add(vi.name)
        for n in self.g.node:
            self.used.update(n.input)
            self.used.update(n.output)
        self.used.discard("")
        # node names live in their own namespace; a converted node's name is
        # released and reused for the float op that replaces it
        self.used_node_names = {n.name for n in self.g.node if n.name}

        self.producer = {}
        self.consumers = collections.defaultdict(list)
        for n in self.g.node:
            for o in n.output:
                self.producer[o] = n
            for i in n.input:
                if i:
                    self.consumers[i].append(n)

        self.qparams = self._propagate_qparams()
        self.new_nodes = []
        self.new_inits = []
        self.dq_cache = {}
        self.converted = 0

    # ------------------------------------------------------------------ helpers
    def unique(self, base, used=None):
        used = self.used if used is None else used
        name = base
        k = 1
        while name in used:
            name = "%s_%d" % (base, k)
            k += 1
        used.add(name)
        return name

    def carr(self, name, what):
        if name not in self.const:
            fail("%s %r is not a constant (initializer / Constant node)" % (what, name))
        return self.const[name]

    def size_of(self, name):
        """Number of elements of a constant, or None if not a constant."""
        return int(self.const[name].size) if name in self.const else None

    def require_scalar(self, name, what, node):
        s = self.size_of(name)
        if s is not None and s != 1:
            fail("%s %r of node %r has %d elements; only per-tensor is supported here"
                 % (what, name, node.name, s))

    def add_init(self, base, arr):
        name = self.unique(base)
        self.new_inits.append(numpy_helper.from_array(arr, name))
        self.const[name] = arr
        return name

    def _propagate_qparams(self):
        """tensor -> (scale_name, zp_name_or_None) for quantized tensors produced
        by QuantizeLinear / QLinear* ops, propagated through data movement ops."""
        qp = {}
        for n in self.g.node:  # graph is topologically sorted
            t, dom = n.op_type, n.domain
            ins = list(n.input) + [""] * 9
            if is_default_domain(dom) and t == "QuantizeLinear":
                qp[n.output[0]] = (ins[1], ins[2] or None)
            elif is_default_domain(dom) and t == "QLinearConv":
                qp[n.output[0]] = (ins[6], ins[7] or None)
            elif is_default_domain(dom) and t == "QLinearMatMul":
                qp[n.output[0]] = (ins[6], ins[7] or None)
            elif dom == MS and t in ("QLinearAdd", "QLinearMul"):
                qp[n.output[0]] = (ins[6], ins[7] or None)
            elif dom == MS and t in ("QLinearGlobalAveragePool", "QLinearAveragePool",
                                      "QLinearSigmoid", "QLinearLeakyRelu"):
                qp[n.output[0]] = (ins[3], ins[4] or None)
            elif dom == MS and t == "QLinearConcat":
                qp[n.output[0]] = (ins[0], ins[1] or None)
            elif is_default_domain(dom) and (t in DATA_MOVEMENT or t in ("MaxPool", "Resize")):
                if n.input and n.input[0] in qp:
                    outs = n.output[:1] if t in ("MaxPool", "Resize") else n.output
                    for o in outs:
                        qp[o] = qp[n.input[0]]
            elif is_default_domain(dom) and t == "Concat":
                ps = [qp.get(i) for i in n.input]
                if ps and all(p is not None for p in ps) and self._same_params(ps):
                    qp[n.output[0]] = ps[0]
        return qp

    def _same_params(self, ps):
        def key(p):
            s, z = p
            if s in self.const and (z is None or z in self.const):
                zb = b"" if z is None else self.const[z].tobytes() + self.const[z].dtype.str.encode()
                return (self.const[s].tobytes(), zb)
            return p
        return len({key(p) for p in ps}) == 1

    def params_for_quantized(self, tensor, node):
        """Quantization params of a quantized tensor consumed by a plain op."""
        if tensor in self.qparams:
            return self.qparams[tensor]
        # fall back: look forward through data movement ops for a QLinear consumer
        seen = set()
        todo = [tensor]
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            for c in self.consumers.get(t, []):
                ins = list(c.input) + [""] * 9
                if c.op_type == "QLinearConv" or c.op_type == "QLinearMatMul":
                    if ins[0] == t:
                        return (ins[1], ins[2] or None)
                    if ins[3] == t:
                        fail("quantized weight path through %r not supported" % node.name)
                if c.domain == MS and c.op_type in ("QLinearAdd", "QLinearMul"):
                    if ins[0] == t:
                        return (ins[1], ins[2] or None)
                    if ins[3] == t:
                        return (ins[4], ins[5] or None)
                if c.domain == MS and c.op_type == "QLinearGlobalAveragePool" and ins[0] == t:
                    return (ins[1], ins[2] or None)
                if c.domain == MS and c.op_type == "QLinearConcat":
                    for k in range(2, len(c.input), 3):
                        if c.input[k] == t:
                            return (c.input[k + 1], c.input[k + 2] or None)
                if c.domain == "" and c.op_type == "DequantizeLinear" and ins[0] == t:
                    return (ins[1], ins[2] or None)
                if is_default_domain(c.domain) and (c.op_type in DATA_MOVEMENT or
                                                   c.op_type in ("MaxPool", "Resize", "Concat")):
                    todo.extend(c.output)
        fail("cannot find quantization params of tensor %r (input of %r)" % (tensor, node.name))

    # ------------------------------------------------------------ node emitters
    def emit(self, op, inputs, outputs, name, attrs=None, domain=""):
        node = helper.make_node(op, inputs, outputs, name=self.unique(name, self.used_node_names),
                                domain=domain)
        if attrs:
            node.attribute.extend(attrs)
        self.new_nodes.append(node)
        return node

    def dq(self, x, s, zp, axis=None):
        key = (x, s, zp, axis)
        if key in self.dq_cache:
            return self.dq_cache[key]
        out = self.unique(x + "_dequantized")
        inputs = [x, s] + ([zp] if zp else [])
        attrs = []
        if axis is not None:
            attrs.append(helper.make_attribute("axis", axis))
        self.emit("DequantizeLinear", inputs, [out], "%s_DequantizeLinear" % x, attrs)
        self.dq_cache[key] = out
        return out

    def weight_dq(self, w, s, zp, axis):
        """DequantizeLinear of a weight; with --float-weights through float32 weights and a
        QuantizeLinear."""
        if not self.float_weights or w not in self.const:
            return self.dq(w, s, zp, axis)
        wq = self.const[w].astype(np.int32)
        scale = self.carr(s, "weight scale").astype(np.float32)
        zero = self.carr(zp, "weight zero point").astype(np.int32) if zp else np.zeros_like(scale, dtype=np.int32)
        shape = [1] * wq.ndim
        if axis is not None:
            shape[axis] = -1
        wf = ((wq - zero.reshape(shape)).astype(np.float32) * scale.reshape(shape)).astype(np.float32)
        wf_name = self.add_init(w + "_float", wf)
        requantized = self.unique(w + "_requantized")
        attrs = [helper.make_attribute("axis", axis)] if axis is not None else []
        self.emit("QuantizeLinear", [wf_name, s] + ([zp] if zp else []), [requantized], "%s_QuantizeLinear" % w, attrs)
        return self.dq(requantized, s, zp, axis)

    def q(self, xf, s, zp, out):
        self.emit("QuantizeLinear", [xf, s] + ([zp] if zp else []), [out], "%s_QuantizeLinear" % out)

    def float_name(self, qout):
        return self.unique(qout + "_float")

    @staticmethod
    def opt(ins, i):
        return ins[i] if i < len(ins) and ins[i] else None

    def per_axis(self, scale_name, axis):
        n = self.size_of(scale_name)
        if n is None:
            fail("scale %r must be a constant" % scale_name)
        return axis if n > 1 else None

    # ------------------------------------------------------------- conversions
    def conv_qlinearconv(self, n):
        ins = list(n.input)
        if len(ins) not in (8, 9):
            fail("QLinearConv %r has %d inputs" % (n.name, len(ins)))
        x, xs, xzp, w, ws, wzp, ys, yzp = [ins[i] if ins[i] else None for i in range(8)]
        b = self.opt(ins, 8)
        self.require_scalar(xs, "x_scale", n)
        self.require_scalar(ys, "y_scale", n)
        xf = self.dq(x, xs, xzp)
        wf = self.weight_dq(w, ws, wzp, self.per_axis(ws, 0))
        conv_in = [xf, wf]
        if b:
            x_scale = self.carr(xs, "x_scale").astype(np.float32).reshape(())
            w_scale = self.carr(ws, "w_scale").astype(np.float32)
            b_scale = np.asarray(np.float32(x_scale) * w_scale, dtype=np.float32)
            assert b_scale.dtype == np.float32
            b_zp = np.zeros(b_scale.shape, dtype=np.int32)
            bs_name = self.add_init(b + "_scale", b_scale)
            bzp_name = self.add_init(b + "_zero_point", b_zp)
            conv_in.append(self.dq(b, bs_name, bzp_name, axis=0 if b_scale.size > 1 else None))
        yf = self.float_name(n.output[0])
        self.emit("Conv", conv_in, [yf], n.name or n.output[0], list(n.attribute))
        self.q(yf, ys, yzp, n.output[0])

    def conv_qlinearmatmul(self, n):
        ins = list(n.input)
        if len(ins) != 8:
            fail("QLinearMatMul %r has %d inputs" % (n.name, len(ins)))
        a, as_, azp, b, bs, bzp, ys, yzp = [i if i else None for i in ins]
        self.require_scalar(as_, "a_scale", n)
        self.require_scalar(ys, "y_scale", n)
        axis = None
        if self.size_of(bs) is None:
            fail("b_scale of %r must be a constant" % n.name)
        if self.size_of(bs) > 1:
            if b in self.const and self.const[b].ndim != 2:
                fail("per-column b_scale with rank-%d B in %r not supported" % (self.const[b].ndim, n.name))
            axis = 1
        af = self.dq(a, as_, azp)
        bf = self.weight_dq(b, bs, bzp, axis)
        yf = self.float_name(n.output[0])
        self.emit("MatMul", [af, bf], [yf], n.name or n.output[0], list(n.attribute))
        self.q(yf, ys, yzp, n.output[0])

    def conv_qlinear_binary(self, n, float_op):
        ins = list(n.input) + [""] * 8
        a, as_, azp, b, bs, bzp, cs, czp = [i if i else None for i in ins[:8]]
        for s, w in ((as_, "A_scale"), (bs, "B_scale"), (cs, "C_scale")):
            self.require_scalar(s, w, n)
        af = self.dq(a, as_, azp)
        bf = self.dq(b, bs, bzp)
        yf = self.float_name(n.output[0])
        self.emit(float_op, [af, bf], [yf], n.name or n.output[0])
        self.q(yf, cs, czp, n.output[0])

    def conv_qlinear_gap(self, n):
        at = attr_dict(n)
        if at.get("channels_last", 0) != 0:
            fail("QLinearGlobalAveragePool %r has channels_last=1 (not supported)" % n.name)
        ins = list(n.input) + [""] * 5
        x, xs, xzp, ys, yzp = [i if i else None for i in ins[:5]]
        self.require_scalar(xs, "x_scale", n)
        self.require_scalar(ys, "y_scale", n)
        xf = self.dq(x, xs, xzp)
        yf = self.float_name(n.output[0])
        self.emit("GlobalAveragePool", [xf], [yf], n.name or n.output[0])
        self.q(yf, ys, yzp, n.output[0])

    def conv_qlinear_concat(self, n):
        ins = list(n.input)
        if len(ins) < 5 or (len(ins) - 2) % 3 != 0:
            fail("QLinearConcat %r has %d inputs" % (n.name, len(ins)))
        ys, yzp = ins[0], ins[1] or None
        self.require_scalar(ys, "Y_scale", n)
        xfs = []
        for k in range(2, len(ins), 3):
            self.require_scalar(ins[k + 1], "x_scale", n)
            xfs.append(self.dq(ins[k], ins[k + 1], ins[k + 2] or None))
        at = attr_dict(n)
        if "axis" not in at:
            fail("QLinearConcat %r has no axis" % n.name)
        yf = self.float_name(n.output[0])
        self.emit("Concat", xfs, [yf], n.name or n.output[0], [helper.make_attribute("axis", at["axis"])])
        self.q(yf, ys, yzp, n.output[0])

    def conv_qlinear_unary(self, n, float_op):
        """QLinearSigmoid (X, X_scale, X_zp, Y_scale, Y_zp) -> DQ -> float op -> Q."""
        ins = list(n.input) + [""] * 5
        x, xs, xzp, ys, yzp = [i if i else None for i in ins[:5]]
        self.require_scalar(xs, "X_scale", n)
        self.require_scalar(ys, "Y_scale", n)
        xf = self.dq(x, xs, xzp)
        yf = self.float_name(n.output[0])
        self.emit(float_op, [xf], [yf], n.name or n.output[0])
        self.q(yf, ys, yzp, n.output[0])

    def conv_same_params(self, n):
        """MaxPool / Resize on quantized data: DQ -> float op -> Q with the input's parameters (the
        op's other inputs, e.g. Resize's roi and scales, pass unchanged)."""
        if n.op_type == "MaxPool" and len([o for o in n.output if o]) > 1:
            fail("MaxPool %r with Indices output on quantized data not supported" % n.name)
        s, zp = self.params_for_quantized(n.input[0], n)
        self.require_scalar(s, "scale", n)
        xf = self.dq(n.input[0], s, zp)
        yf = self.float_name(n.output[0])
        self.emit(n.op_type, [xf] + list(n.input[1:]), [yf], n.name or n.output[0], list(n.attribute))
        self.q(yf, s, zp, n.output[0])

    # ------------------------------------------------------------------- driver
    def _converts(self, n):
        t, d = n.op_type, n.domain
        if is_default_domain(d):
            return t in ("QLinearConv", "QLinearMatMul") or (t in ("MaxPool", "Resize") and self.is_quantized(n.input[0]))
        return d == MS and t in ("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearGlobalAveragePool",
                                 "QLinearConcat")

    def is_quantized(self, t):
        if t in self.qparams:
            return True
        if t in self.const:
            return self.const[t].dtype in (np.uint8, np.int8)
        for vi in list(self.g.input) + list(self.g.value_info):
            if vi.name == t:
                return vi.type.tensor_type.elem_type in (onnx.TensorProto.UINT8, onnx.TensorProto.INT8)
        return False

    def run(self):
        for n in self.g.node:
            t, d = n.op_type, n.domain
            if self._converts(n):
                self.used_node_names.discard(n.name)
            if is_default_domain(d) and t == "QLinearConv":
                self.conv_qlinearconv(n)
            elif is_default_domain(d) and t == "QLinearMatMul":
                self.conv_qlinearmatmul(n)
            elif d == MS and t in ("QLinearAdd", "QLinearMul"):
                self.conv_qlinear_binary(n, t[len("QLinear"):])
            elif d == MS and t == "QLinearSigmoid":
                self.conv_qlinear_unary(n, "Sigmoid")
            elif d == MS and t == "QLinearGlobalAveragePool":
                self.conv_qlinear_gap(n)
            elif d == MS and t == "QLinearConcat":
                self.conv_qlinear_concat(n)
            elif is_default_domain(d) and t in ("MaxPool", "Resize") and self.is_quantized(n.input[0]):
                self.conv_same_params(n)
            elif (d == MS and (t in UNSUPPORTED_QOPS or t.startswith("QLinear"))) or \
                    (is_default_domain(d) and t in ("ConvInteger", "MatMulInteger")):
                fail("unsupported quantized op %s (node %r)" % (op_key(n), n.name))
            else:
                if any(self.is_quantized(i) for i in n.input if i) and is_default_domain(d) and \
                        t not in DATA_MOVEMENT and \
                        t not in ("Concat", "QuantizeLinear", "DequantizeLinear", "Shape", "Size"):
                    sys.stderr.write("warning: %s node %r operates on quantized data; kept unchanged\n"
                                     % (t, n.name))
                self.new_nodes.append(n)
                continue
            self.converted += 1
        return self.new_nodes, self.new_inits


# ------------------------------------------------------------- opset handling
def get_opset(model, domain_set):
    for o in model.opset_import:
        if o.domain in domain_set:
            return o
    return None


SOFTMAX_LIKE = ("Softmax", "LogSoftmax", "Hardmax")


def upgrade_nodes_to_13(nodes, new_inits, used_names):
    """Opset <13 -> 13: move Split 'split' / Squeeze, Unsqueeze, ReduceSum 'axes'
    attributes to int64 initializer inputs (their only semantic change)."""
    def unique(base):
        name, k = base, 1
        while name in used_names:
            name = "%s_%d" % (base, k)
            k += 1
        used_names.add(name)
        return name

    for n in nodes:
        if not is_default_domain(n.domain):
            continue
        t = n.op_type
        attr_name = {"Split": "split", "Squeeze": "axes", "Unsqueeze": "axes", "ReduceSum": "axes"}.get(t)
        if not attr_name:
            continue
        vals = [a for a in n.attribute if a.name == attr_name]
        if not vals:
            continue
        if len(n.input) != 1:
            fail("%s %r has %d inputs before opset 13" % (t, n.name, len(n.input)))
        keep = [a for a in n.attribute if a.name != attr_name]
        arr = np.array(list(helper.get_attribute_value(vals[0])), dtype=np.int64)
        nm = unique("%s_%s" % (n.name or n.output[0], attr_name))
        new_inits.append(numpy_helper.from_array(arr, nm))
        del n.attribute[:]
        n.attribute.extend(keep)
        n.input.append(nm)


def upgrade_softmax_to_13(nodes, rank_of):
    """Softmax/LogSoftmax/Hardmax <13 coerce the input to 2-D at `axis`
    (default 1); from 13 they work on one axis (default -1).  Same meaning only
    when axis is the last one: then make the axis explicit, else refuse."""
    for n in nodes:
        if not (is_default_domain(n.domain) and n.op_type in SOFTMAX_LIKE):
            continue
        axis = attr_dict(n).get("axis", 1)
        r = rank_of(n.input[0])
        if r is None:
            fail("%s %r: input rank unknown, cannot upgrade it to opset 13" % (n.op_type, n.name))
        if axis < 0:
            axis += r
        if axis != r - 1:
            fail("%s %r: axis %d of a rank-%d input changes meaning in opset 13"
                 % (n.op_type, n.name, axis, r))
        keep = [a for a in n.attribute if a.name != "axis"]
        del n.attribute[:]
        n.attribute.extend(keep)
        n.attribute.append(helper.make_attribute("axis", -1))


def main(argv):
    float_weights = "--float-weights" in argv[1:]
    argv = [a for a in argv if a != "--float-weights"]
    if len(argv) != 3:
        sys.stderr.write("usage: %s [--float-weights] IN.onnx OUT.onnx\n" % argv[0])
        return 2
    model = onnx.load(argv[1])
    before = count_ops(model.graph)

    conv = Converter(model, float_weights)
    new_nodes, new_inits = conv.run()

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    del g.node[:]
    g.node.extend(new_nodes)
    g.initializer.extend(new_inits)

    # opset handling
    ai = get_opset(out, ("", "ai.onnx"))
    if ai is None:
        fail("model has no ai.onnx opset import")
    if ai.version < 10:
        fail("ai.onnx opset %d < 10 is not supported" % ai.version)
    if ai.version < 13 and conv.converted:
        extra = []
        upgrade_nodes_to_13(g.node, extra, conv.used)
        g.initializer.extend(extra)
        ai.version = 13
        out.ir_version = max(out.ir_version, 7)  # opset 13 needs IR >= 7
        # Softmax-like ops need the input rank: shape-infer the (now opset 13)
        # output model, falling back to the input model's inference
        if any(is_default_domain(n.domain) and n.op_type in SOFTMAX_LIKE for n in g.node):
            ranks = {k: v.ndim for k, v in conv.const.items()}
            for m in (model, out):
                try:
                    inf = onnx.shape_inference.infer_shapes(m)
                except Exception:  # noqa: BLE001 - best effort, checked below
                    continue
                for vi in list(inf.graph.value_info) + list(inf.graph.input) + list(inf.graph.output):
                    tt = vi.type.tensor_type
                    if tt.HasField("shape"):
                        ranks[vi.name] = len(tt.shape.dim)
            upgrade_softmax_to_13(g.node, ranks.get)

    # drop com.microsoft opset import if unused
    if not any(n.domain == MS for n in g.node):
        keep = [o for o in out.opset_import if o.domain != MS]
        del out.opset_import[:]
        out.opset_import.extend(keep)

    # value_info: keep only entries for tensors still produced by a node
    # (their types are unchanged: QLinear outputs keep their names and dtypes)
    produced = {o for n in g.node for o in n.output}
    io = {v.name for v in list(g.input) + list(g.output)}
    keep_vi = [v for v in g.value_info if v.name in produced and v.name not in io]
    del g.value_info[:]
    g.value_info.extend(keep_vi)

    # sanity: every converted output keeps its dtype; graph I/O unchanged
    assert [v.SerializeToString() for v in g.input] == [v.SerializeToString() for v in model.graph.input]
    assert [v.SerializeToString() for v in g.output] == [v.SerializeToString() for v in model.graph.output]

    # checks -- fail loudly
    has_custom = any(not is_default_domain(n.domain) for n in g.node)
    try:
        onnx.checker.check_model(out, full_check=not has_custom)
        onnx.shape_inference.infer_shapes(out, check_type=True, strict_mode=not has_custom)
    except Exception as e:
        onnx.save(out, argv[2] + ".failed")
        fail("checker/shape inference failed (model written to %s.failed): %s" % (argv[2], e))

    onnx.save(out, argv[2])
    after = count_ops(g)
    print("%s: before %s -> after %s" % (argv[1].rsplit("/", 1)[-1], fmt_counts(before), fmt_counts(after)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except ConversionError as e:
        sys.stderr.write("qoperator_to_qdq: error: %s\n" % e)
        sys.exit(1)
