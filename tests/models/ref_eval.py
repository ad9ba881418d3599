#!/usr/bin/python3
"""Tiny numpy reference evaluator to cross-check a QOperator model against its
QDQ conversion (no onnxruntime needed).

Usage: /usr/bin/python3 ref_eval.py QOPERATOR.onnx QDQ.onnx [NUM_RANDOM_INPUTS]

QOperator ops are evaluated the way ONNX Runtime's kernels do it (integer
accumulation, float32 requantization multiplier, round-half-to-even); the QDQ
model is evaluated with plain ONNX semantics (float32 DequantizeLinear, float op
computed in float64 then rounded to float32, QuantizeLinear).  The two are NOT
expected to be bit-identical here (float vs. integer accumulation can flip a
rounding tie by one LSB); identical results are the job of a runtime/compiler
that fuses DQ->op->Q back into the integer kernel.  A conversion bug (wrong
scale, zero point, axis, bias scale, attribute) shows up as large differences.

Reports, for every quantized tensor present in both models under the same name,
the fraction of equal elements and the max |difference| in LSBs, plus the final
outputs' max difference and argmax agreement.  Only the ops used by the test
models are implemented (2-D Conv/MaxPool).
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def attrs(n):
    return {a.name: helper.get_attribute_value(a) for a in n.attribute}


def sat(v, dtype):
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


def pads_for(x_hw, k, s, d, at):
    ap = at.get("auto_pad", b"NOTSET")
    ap = ap.decode() if isinstance(ap, bytes) else ap
    nd = len(k)
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(nd):
            out = -(-x_hw[i] // s[i])
            total = max(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - x_hw[i])
            small = total // 2
            b = small if ap == "SAME_UPPER" else total - small
            begin.append(b)
            end.append(total - b)
        return begin, end
    if ap == "VALID":
        return [0] * nd, [0] * nd
    p = at.get("pads", [0] * (2 * nd))
    return list(p[:nd]), list(p[nd:])


def windows(x, k, s, d, begin, end, pad_value, ceil_mode=0):
    """x [N,C,H,W] -> [N,C,kh,kw,Ho,Wo] (float64)."""
    n, c, h, w = x.shape
    end = list(end)
    outs = []
    for i, L in enumerate((h, w)):
        ek = (k[i] - 1) * d[i] + 1
        span = L + begin[i] + end[i] - ek
        o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= L + begin[i]:
            o -= 1
        need = (o - 1) * s[i] + ek - (L + begin[i] + end[i])
        if need > 0:
            end[i] += need
        outs.append(o)
    xp = np.full((n, c, h + begin[0] + end[0], w + begin[1] + end[1]), pad_value, dtype=np.float64)
    xp[:, :, begin[0]:begin[0] + h, begin[1]:begin[1] + w] = x
    ho, wo = outs
    cols = np.empty((n, c, k[0], k[1], ho, wo), dtype=np.float64)
    for i in range(k[0]):
        for j in range(k[1]):
            cols[:, :, i, j] = xp[:, :, i * d[0]: i * d[0] + s[0] * (ho - 1) + 1: s[0],
                                  j * d[1]: j * d[1] + s[1] * (wo - 1) + 1: s[1]]
    return cols


def conv(x, w, at):
    """float64 conv, x [N,C,H,W], w [M,C/g,kh,kw] (already zero-point-shifted)."""
    if x.ndim != 4:
        raise NotImplementedError("only 2-D conv")
    g = at.get("group", 1)
    k = list(at.get("kernel_shape", w.shape[2:]))
    s = list(at.get("strides", [1, 1]))
    d = list(at.get("dilations", [1, 1]))
    b, e = pads_for(x.shape[2:], k, s, d, at)
    cols = windows(x, k, s, d, b, e, 0.0)
    n, c, _, _, ho, wo = cols.shape
    m = w.shape[0]
    cols = cols.reshape(n, g, (c // g) * k[0] * k[1], ho * wo)
    wg = w.astype(np.float64).reshape(g, m // g, -1)
    y = np.einsum("gmk,ngkp->ngmp", wg, cols, optimize=True)
    return y.reshape(n, m, ho, wo)


def maxpool(x, at):
    k = list(at["kernel_shape"])
    s = list(at.get("strides", [1] * len(k)))
    d = list(at.get("dilations", [1] * len(k)))
    b, e = pads_for(x.shape[2:], k, s, d, at)
    cols = windows(x.astype(np.float64), k, s, d, b, e, -np.inf, at.get("ceil_mode", 0))
    return cols.max(axis=(2, 3)).astype(x.dtype)


def bshape(p, x, axis):
    """Reshape a per-axis param for broadcasting along `axis` of x."""
    p = np.asarray(p)
    if p.size <= 1:
        return p.reshape(())
    sh = [1] * x.ndim
    sh[axis] = p.size
    return p.reshape(sh)


def requant(acc, mult, zp, dtype):
    v = np.rint(acc.astype(np.float32) * np.asarray(mult, np.float32))
    return sat(v + zp.astype(np.int64), dtype)


def model_opset(model):
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def run(model, feeds, force=None, stats=None):
    """Evaluate; if `force` (an env of the other model) is given, every
    quantized tensor also present there is compared (into `stats`: name ->
    max LSB diff, equal count, total count) and then replaced by the forced
    value, so each node is checked in isolation (no error propagation)."""
    g = model.graph
    env = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    env.update(feeds)
    for n in g.node:
        ins = [env[i] if i else None for i in n.input] + [None] * 9
        at = attrs(n)
        t = n.op_type
        if t == "Constant":
            out = [numpy_helper.to_array(at["value"]) if "value" in at else None]
        elif t == "QuantizeLinear":
            zp = ins[2] if ins[2] is not None else np.zeros((), np.uint8)
            ax = at.get("axis", 1)
            v = np.rint(ins[0].astype(np.float32) / bshape(ins[1], ins[0], ax).astype(np.float32))
            out = [sat(v + bshape(zp, ins[0], ax).astype(np.int64), zp.dtype)]
        elif t == "DequantizeLinear":
            x = ins[0]
            ax = at.get("axis", 1)
            zp = ins[2] if ins[2] is not None else np.zeros((), x.dtype)
            out = [((x.astype(np.int64) - bshape(zp, x, ax).astype(np.int64)).astype(np.float32)
                    * bshape(ins[1], x, ax).astype(np.float32)).astype(np.float32)]
        elif t == "QLinearConv":
            x, xs, xzp, w, ws, wzp, ys, yzp, b = ins[:9]
            xi = x.astype(np.int64) - xzp.astype(np.int64)
            wi = w.astype(np.int64) - bshape(wzp, w, 0).astype(np.int64)
            acc = np.rint(conv(xi.astype(np.float64), wi.astype(np.float64), at)).astype(np.int64)
            if b is not None:
                acc = acc + b.astype(np.int64).reshape(1, -1, 1, 1)
            mult = (np.float32(xs) * ws.astype(np.float32)) / np.float32(ys)
            out = [requant(acc, bshape(mult, acc, 1), yzp, yzp.dtype)]
        elif t == "QLinearMatMul":
            a, as_, azp, bb, bs, bzp, ys, yzp = ins[:8]
            ai = (a.astype(np.int64) - azp.astype(np.int64)).astype(np.float64)
            bi = (bb.astype(np.int64) - bshape(bzp, bb, bb.ndim - 1).astype(np.int64)).astype(np.float64)
            acc = np.rint(ai @ bi).astype(np.int64)
            mult = (np.float32(as_) * bs.astype(np.float32)) / np.float32(ys)
            out = [requant(acc, bshape(mult, acc, acc.ndim - 1), yzp, yzp.dtype)]
        elif t == "QLinearAdd":
            a, as_, azp, bb, bs, bzp, cs, czp = ins[:8]
            ra = np.float32(as_) / np.float32(cs)
            rb = np.float32(bs) / np.float32(cs)
            v = (a.astype(np.int64) - azp.astype(np.int64)).astype(np.float32) * ra + \
                (bb.astype(np.int64) - bzp.astype(np.int64)).astype(np.float32) * rb
            out = [sat(np.rint(v) + czp.astype(np.int64), czp.dtype)]
        elif t == "QLinearGlobalAveragePool":
            x, xs, xzp, ys, yzp = ins[:5]
            cnt = int(np.prod(x.shape[2:]))
            acc = (x.astype(np.int64) - xzp.astype(np.int64)).sum(axis=tuple(range(2, x.ndim)), keepdims=True)
            out = [requant(acc, np.float32(xs) / (np.float32(ys) * np.float32(cnt)), yzp, yzp.dtype)]
        elif t == "QLinearConcat":
            ys, yzp = ins[0], ins[1]
            parts = []
            for k in range(2, len(n.input), 3):
                x, xs, xzp = env[n.input[k]], env[n.input[k + 1]], env[n.input[k + 2]]
                v = (x.astype(np.int64) - xzp.astype(np.int64)).astype(np.float32) * np.float32(xs)
                parts.append(sat(np.rint(v / np.float32(ys)) + yzp.astype(np.int64), yzp.dtype))
            out = [np.concatenate(parts, axis=at["axis"])]
        elif t == "Conv":
            y = conv(ins[0].astype(np.float64), ins[1].astype(np.float64), at)
            if ins[2] is not None:
                y = y + ins[2].astype(np.float64).reshape(1, -1, 1, 1)
            out = [y.astype(np.float32)]
        elif t == "MatMul":
            out = [(ins[0].astype(np.float64) @ ins[1].astype(np.float64)).astype(np.float32)]
        elif t == "Add":
            r = ins[0].astype(np.float64) + ins[1].astype(np.float64) if ins[0].dtype.kind == "f" else ins[0] + ins[1]
            out = [r.astype(ins[0].dtype)]
        elif t == "GlobalAveragePool":
            out = [ins[0].astype(np.float64).mean(axis=tuple(range(2, ins[0].ndim)), keepdims=True).astype(np.float32)]
        elif t == "ReduceMean":
            axes = at.get("axes")
            if axes is None and ins[1] is not None:
                axes = list(ins[1])
            axes = tuple(axes) if axes is not None else None
            out = [ins[0].astype(np.float64).mean(axis=axes, keepdims=bool(at.get("keepdims", 1))).astype(np.float32)]
        elif t == "MaxPool":
            out = [maxpool(ins[0], at)]
        elif t == "Concat":
            out = [np.concatenate([env[i] for i in n.input], axis=at["axis"])]
        elif t == "Reshape":
            shape = [int(v) for v in ins[1]]
            shape = [ins[0].shape[i] if v == 0 else v for i, v in enumerate(shape)]
            out = [ins[0].reshape(shape)]
        elif t == "Transpose":
            out = [np.transpose(ins[0], at.get("perm"))]
        elif t == "Flatten":
            ax = at.get("axis", 1)
            out = [ins[0].reshape(int(np.prod(ins[0].shape[:ax])), -1)]
        elif t == "Split":
            ax = at.get("axis", 0)
            split = at.get("split")
            if split is None and ins[1] is not None:
                split = list(ins[1])
            if split is None:
                split = [ins[0].shape[ax] // len(n.output)] * len(n.output)
            idx = np.cumsum(split)[:-1]
            out = np.split(ins[0], idx, axis=ax)
        elif t == "Shape":
            out = [np.array(ins[0].shape, dtype=np.int64)]
        elif t == "Gather":
            out = [np.take(ins[0], ins[1], axis=at.get("axis", 0))]
        elif t in ("Unsqueeze", "Squeeze"):
            axes = at.get("axes")
            if axes is None and ins[1] is not None:
                axes = [int(v) for v in ins[1]]
            x = ins[0]
            if t == "Unsqueeze":
                r = x.ndim + len(axes)
                for a in sorted(a % r for a in axes):
                    x = np.expand_dims(x, a)
            else:
                x = np.squeeze(x, axis=tuple(axes) if axes is not None else None)
            out = [x]
        elif t == "Softmax":
            ax = at.get("axis", -1 if model_opset(model) >= 13 else 1)
            x = ins[0].astype(np.float64)
            if model_opset(model) < 13:  # coerce to 2-D at `ax`
                sh = x.shape
                x2 = x.reshape(int(np.prod(sh[:ax % x.ndim])), -1)
                e = np.exp(x2 - x2.max(axis=1, keepdims=True))
                out = [(e / e.sum(axis=1, keepdims=True)).reshape(sh).astype(np.float32)]
            else:
                e = np.exp(x - x.max(axis=ax, keepdims=True))
                out = [(e / e.sum(axis=ax, keepdims=True)).astype(np.float32)]
        elif t == "Identity":
            out = [ins[0]]
        else:
            raise NotImplementedError("op %s:%s" % (n.domain, t))
        for name, v in zip(n.output, out):
            if name:
                v = np.asarray(v)
                if force is not None and name in force and v.dtype in (np.uint8, np.int8):
                    f = force[name]
                    if f.shape != v.shape or f.dtype != v.dtype:
                        raise RuntimeError("shape/dtype mismatch for %r" % name)
                    diff = np.abs(f.astype(np.int64) - v.astype(np.int64))
                    mx, eq, tot = stats.get(name, (0, 0, 0))
                    stats[name] = (max(mx, int(diff.max())), eq + int((diff == 0).sum()), tot + diff.size)
                    v = f
                env[name] = v
    return env


def make_inputs(model, rng):
    g = model.graph
    inits = {t.name for t in g.initializer}
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    feeds = {}
    for vi in g.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in tt.shape.dim]
        lo, hi = -1.0, 1.0
        for n in g.node:
            if n.op_type == "QuantizeLinear" and n.input[0] == vi.name:
                s = float(consts[n.input[1]])
                zp = consts[n.input[2]] if len(n.input) > 2 and n.input[2] else np.zeros((), np.uint8)
                info = np.iinfo(zp.dtype)
                lo, hi = (info.min - int(zp)) * s, (info.max - int(zp)) * s
                break
        feeds[vi.name] = rng.uniform(lo, hi, size=shape).astype(np.float32)
    return feeds


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write("usage: %s QOPERATOR.onnx QDQ.onnx [NUM_RANDOM_INPUTS]\n" % argv[0])
        return 2
    mq, md = onnx.load(argv[1]), onnx.load(argv[2])
    runs = int(argv[3]) if len(argv) == 4 else 3
    rng = np.random.default_rng(0)
    worst_lsb, agree, total_eq, total_n, worst_out = 0, 0, 0, 0, 0.0
    worst_name = None
    iso = {}
    for _ in range(runs):
        feeds = make_inputs(mq, rng)
        eq_env, ed_env = run(mq, feeds), run(md, feeds)
        for name, a in eq_env.items():
            b = ed_env.get(name)
            if b is None or a.dtype not in (np.uint8, np.int8) or name in feeds:
                continue
            if b.shape != a.shape or b.dtype != a.dtype:
                print("shape/dtype mismatch for %r: %s%s vs %s%s" % (name, a.dtype, a.shape, b.dtype, b.shape))
                return 1
            diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
            total_eq += int((diff == 0).sum())
            total_n += diff.size
            if diff.max() > worst_lsb:
                worst_lsb, worst_name = int(diff.max()), name
        for vo in mq.graph.output:
            a, b = eq_env[vo.name], ed_env[vo.name]
            worst_out = max(worst_out, float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()))
            agree += int(np.array_equal(a.reshape(a.shape[0], -1).argmax(1), b.reshape(b.shape[0], -1).argmax(1)))
        run(md, feeds, force=eq_env, stats=iso)
    print("%s: %d runs, quantized tensors equal %.4f%% of %d elements, max diff %d LSB (%s), "
          "outputs max |diff| %.6g, argmax agree %d/%d"
          % (argv[2].rsplit("/", 1)[-1], runs, 100.0 * total_eq / max(total_n, 1), total_n, worst_lsb,
             worst_name, worst_out, agree, runs * len(mq.graph.output)))
    iso_max = max((v[0] for v in iso.values()), default=0)
    iso_eq = sum(v[1] for v in iso.values())
    iso_tot = sum(v[2] for v in iso.values())
    bad = sorted((k for k, v in iso.items() if v[0] > 1), key=lambda k: -iso[k][0])
    print("  per-node (isolated, inputs forced from the QOperator run): %d tensors, %.4f%% equal, "
          "max diff %d LSB%s" % (len(iso), 100.0 * iso_eq / max(iso_tot, 1), iso_max,
                                 "; >1 LSB at: %s" % bad[:10] if bad else ""))
    return 1 if iso_max > 1 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
