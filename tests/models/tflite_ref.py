#!/usr/bin/python3
"""An independent reference for uint8 TFLite models: TFLite's published reference-kernel arithmetic
in numpy, for the operators of DeepLabV3 (deeplabv3_mnv2_pascal_quant): CONV_2D,
DEPTHWISE_CONV_2D, ADD, AVERAGE_POOL_2D, CONCATENATION, QUANTIZE, RESIZE_BILINEAR, ARG_MAX, and of
the SSD heads of make-tflite-ssd (tests/runtime/make_tflite_ssd.cpp): RESHAPE, LOGISTIC.

Why: Arm NN's CpuRef backend (tests/models/armnn_ref.py) computes each quantized layer in float
and rounds once, while TFLite's integer kernels use QuantizeMultiplier +
MultiplyByQuantizedMultiplier with its double rounding (SaturatingRoundingDoublingHighMul, then
RoundingDivideByPOT). With a right shift of 1 the double rounding moves about a quarter of the
outputs up by one step (DeepLabV3's first depthwise layer: 19% of its outputs differ from Arm NN
by one step), and over 70 layers the logits drift apart by up to ~15 steps. This script computes
what TFLite's reference kernels compute, so the runtime can be held to that exactly.

The rules, each from tensorflow/lite/kernels/internal (reference/ and common.h) and
tensorflow/lite/kernels (kernel_util.cc, add.cc, concatenation.cc):
 - CONV_2D / DEPTHWISE_CONV_2D (uint8): acc = sum (x - zx)(w - zw) + bias (int32 bias),
   out = MultiplyByQuantizedMultiplier(acc, QuantizeMultiplier(sx * sw / sy)) + zy, clamped to
   the fused activation's range (CalculateActivationRangeQuantized); SAME padding puts the odd
   element at the end; dilations.
 - MultiplyByQuantizedMultiplier(x, q, shift): RoundingDivideByPOT(
   SaturatingRoundingDoublingHighMul(x * 2^max(shift, 0), q), max(-shift, 0)).
 - ADD (uint8): left_shift 20; operands (q - z) * 2^20 scaled by QuantizeMultiplier(s_i / (2
   max(s_a, s_b))), summed, scaled by QuantizeMultiplier(2 max / (2^20 s_y)), + zy, clamped.
 - AVERAGE_POOL_2D (uint8): (sum + count / 2) / count over the in-bounds taps, clamped.
 - CONCATENATION (uint8): inputs with the output's parameters copied; others
   round(q * s + b) + zy with s = s_in / s_out, b = -z_in * s in float32, rounded half away from
   zero (ConcatenationWithScaling), clamped.
 - QUANTIZE (uint8 -> uint8): MultiplyByQuantizedMultiplier(q - z_in,
   QuantizeMultiplier(s_in / s_out)) + z_out, clamped (Requantize).
 - RESIZE_BILINEAR (uint8): the generic ResizeBilinear<T> (kernels/internal/reference/
   resize_bilinear.h), float32 coordinates and weights, the four taps summed in float32, plus its
   rounding_offset 0.5 (integer T), truncated: rounded half up.
 - ARG_MAX: first index of the largest value.
 - RESHAPE: the output tensor's shape (the stored values are not touched).
 - LOGISTIC (uint8): the lookup table of kernels/activations.cc (PopulateLookupTable / LUTPopulate):
   x = s_in * (q - z_in) in float32, 1 / (1 + exp(-x)) in float32, round(y * (1 / s_out)) (half
   away from zero) + z_out, clamped; TFLite requires s_out = 1/256, z_out = 0.
Real multipliers are computed in double from the float32 scales.

The model is read with the `flatbuffers` Python runtime (python3-flatbuffers), field ids as in
TFLite's public schema. Usage:
  /usr/bin/python3 tests/models/tflite_ref.py MODEL.tflite --input x.npy ... \
      [--output out.npy ...] [--logits logits.npy ...] [--all-outputs PREFIX]
--output gets the model's (first) output (the label map), --logits the input of the ARG_MAX
operator, --all-outputs every output k of input i as PREFIX_<i>_<k>.npy.
"""

import argparse
import math
import sys

import numpy as np
import flatbuffers.encode
import flatbuffers.number_types as nt
import flatbuffers.packer
import flatbuffers.table

UINT8, INT32, INT64 = 3, 2, 4


class Model:
    """Tensors and operators of subgraph 0, read with the flatbuffers Table API."""

    def __init__(self, data):
        self.buf = bytearray(data)
        if self.buf[4:8] != b"TFL3":
            raise SystemExit("not a TFLite FlatBuffer (no TFL3 identifier)")
        root = self.table(flatbuffers.encode.Get(flatbuffers.packer.uoffset, self.buf, 0))
        self.codes = [self.builtin_code(p) for p in self.tables(root, 6)]   # Model.operator_codes (id 1)
        self.buffers = self.tables(root, 12)                                # Model.buffers (id 4)
        sg = self.table(self.tables(root, 8)[0])                            # Model.subgraphs (id 2)
        self.tensors = [self.tensor(p) for p in self.tables(sg, 4)]         # SubGraph.tensors (id 0)
        self.inputs = self.ints(sg, 6)                                      # SubGraph.inputs (id 1)
        self.outputs = self.ints(sg, 8)                                     # SubGraph.outputs (id 2)
        self.ops = [self.operator(p) for p in self.tables(sg, 10)]          # SubGraph.operators (id 3)

    def table(self, pos):
        return flatbuffers.table.Table(self.buf, pos)

    def tables(self, t, slot):
        o = t.Offset(slot)
        if o == 0:
            return []
        start = t.Vector(o)
        return [t.Indirect(start + 4 * i) for i in range(t.VectorLen(o))]

    def scalars(self, t, slot, flags, size):
        o = t.Offset(slot)
        if o == 0:
            return []
        start = t.Vector(o)
        return [t.Get(flags, start + size * i) for i in range(t.VectorLen(o))]

    def ints(self, t, slot):
        return self.scalars(t, slot, nt.Int32Flags, 4)

    def field(self, t, slot, flags, default):
        o = t.Offset(slot)
        return t.Get(flags, t.Pos + o) if o else default

    def builtin_code(self, pos):
        t = self.table(pos)
        return max(self.field(t, 4, nt.Int8Flags, 0), self.field(t, 10, nt.Int32Flags, 0))

    def tensor(self, pos):
        t = self.table(pos)
        info = {"shape": self.ints(t, 4), "type": self.field(t, 6, nt.Int8Flags, 0), "data": None,
                "scale": [], "zero_point": []}
        b = self.field(t, 8, nt.Uint32Flags, 0)
        if b:
            bt = self.table(self.buffers[b])
            o = bt.Offset(4)
            if o:
                start = bt.Vector(o)
                info["data"] = bytes(self.buf[start:start + bt.VectorLen(o)])
        o = t.Offset(12)
        if o:
            q = self.table(t.Indirect(t.Pos + o))
            info["scale"] = self.scalars(q, 8, nt.Float32Flags, 4)
            info["zero_point"] = self.scalars(q, 10, nt.Int64Flags, 8)
        return info

    def operator(self, pos):
        t = self.table(pos)
        o = t.Offset(12)  # Operator.builtin_options (id 4)
        options = self.table(t.Indirect(t.Pos + o)) if o else None
        return {"code": self.codes[self.field(t, 4, nt.Uint32Flags, 0)], "inputs": self.ints(t, 6),
                "outputs": self.ints(t, 8), "options": options}

    def option(self, op, field_id, flags, default):
        t = op["options"]
        return self.field(t, 4 + 2 * field_id, flags, default) if t is not None else default

    def constant(self, i, dtype):
        info = self.tensors[i]
        return np.frombuffer(info["data"], dtype=dtype).reshape(info["shape"])

    def quant(self, i):
        info = self.tensors[i]
        return float(np.float32(info["scale"][0])), int(info["zero_point"][0])


# ---- TFLite's fixed-point helpers (common.h / quantization_util.cc) --------------------------

def quantize_multiplier(real):
    if real == 0.0:
        return 0, 0
    m, shift = math.frexp(real)
    q = int(round(m * (1 << 31)))
    if q == (1 << 31):
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q, shift


def rounding_high_mul(a, q):
    """SaturatingRoundingDoublingHighMul(a, q) for int64 arrays of int32 values (the saturating
    case a = q = INT32_MIN cannot occur with q > 0)."""
    ab = a.astype(np.int64) * np.int64(q)
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    s = ab + nudge
    return np.where(s >= 0, s // (1 << 31), -((-s) // (1 << 31)))  # C division truncates


def rounding_divide_by_pot(x, exponent):
    if exponent == 0:
        return x
    mask = np.int64((1 << exponent) - 1)
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, real):
    q, shift = quantize_multiplier(real)
    left, right = max(shift, 0), max(-shift, 0)
    return rounding_divide_by_pot(rounding_high_mul(x.astype(np.int64) * (1 << left), q), right)


def activation_range(act, scale, zero_point):
    def quantize(f):
        return zero_point + int(round_half_away(np.float64(np.float32(f) / np.float32(scale))))
    lo, hi = 0, 255
    if act == 1:       # RELU
        lo = max(lo, quantize(0.0))
    elif act == 2:     # RELU_N1_TO_1
        lo, hi = max(lo, quantize(-1.0)), min(hi, quantize(1.0))
    elif act == 3:     # RELU6
        lo, hi = max(lo, quantize(0.0)), min(hi, quantize(6.0))
    elif act != 0:
        raise SystemExit(f"fused activation {act} is not implemented here")
    return lo, hi


def round_half_away(v):
    v = np.asarray(v, dtype=np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def same_or_valid(padding, size, k, stride, dilation):
    eff = (k - 1) * dilation + 1
    if padding == 0:  # SAME
        out = (size + stride - 1) // stride
        total = max(0, (out - 1) * stride + eff - size)
        return out, total // 2
    return (size - eff + stride) // stride, 0


# ---- the operators ------------------------------------------------------------------------------

def conv(m, op, x, depthwise):
    xi, wi = op["inputs"][0], op["inputs"][1]
    bi = op["inputs"][2] if len(op["inputs"]) > 2 else -1
    yi = op["outputs"][0]
    sx, zx = m.quant(xi)
    sw, zw = m.quant(wi)
    sy, zy = m.quant(yi)
    if len(m.tensors[wi]["scale"]) != 1:
        raise SystemExit("per-channel weights are not implemented here (uint8 models only)")
    w = m.constant(wi, np.uint8).astype(np.int64) - zw
    b = m.constant(bi, np.int32).astype(np.int64) if bi >= 0 else 0
    # options: Conv2DOptions padding 0, stride_w 1, stride_h 2, activation 3, dilation_w 4, _h 5;
    # DepthwiseConv2DOptions padding 0, stride_w 1, stride_h 2, multiplier 3, activation 4,
    # dilation_w 5, dilation_h 6.
    pad = m.option(op, 0, nt.Int8Flags, 0)
    sw_, sh_ = m.option(op, 1, nt.Int32Flags, 1), m.option(op, 2, nt.Int32Flags, 1)
    act = m.option(op, 4 if depthwise else 3, nt.Int8Flags, 0)
    dw_ = m.option(op, 5 if depthwise else 4, nt.Int32Flags, 1)
    dh_ = m.option(op, 6 if depthwise else 5, nt.Int32Flags, 1)
    n, h, wd, c = x.shape
    kh, kw = w.shape[1], w.shape[2]
    oh, pt = same_or_valid(pad, h, kh, sh_, dh_)
    ow, pl = same_or_valid(pad, wd, kw, sw_, dw_)
    xp = np.zeros((n, max(pt + h, (oh - 1) * sh_ + (kh - 1) * dh_ + 1),
                   max(pl + wd, (ow - 1) * sw_ + (kw - 1) * dw_ + 1), c), np.float64)
    xp[:, pt:pt + h, pl:pl + wd, :] = x.astype(np.float64) - zx
    # Products and sums of 8-bit values stay far below 2^53: float64 sums are exact.
    acc = np.zeros((n, oh, ow, w.shape[3] if depthwise else w.shape[0]), np.float64)
    wf = w.astype(np.float64)
    for r in range(kh):
        for s in range(kw):
            patch = xp[:, r * dh_: r * dh_ + (oh - 1) * sh_ + 1: sh_, s * dw_: s * dw_ + (ow - 1) * sw_ + 1: sw_, :]
            if depthwise:
                mult = w.shape[3] // c
                acc += np.repeat(patch, mult, axis=3) * wf[0, r, s, :]
            else:
                acc += patch @ wf[:, r, s, :].T
    acc = acc.astype(np.int64) + b
    real = float(np.float64(np.float32(sx)) * np.float64(np.float32(sw)) / np.float64(np.float32(sy)))
    lo, hi = activation_range(act, sy, zy)
    return np.clip(multiply_by_quantized_multiplier(acc, real) + zy, lo, hi).astype(np.uint8)


def add(m, op, a, b):
    (sa, za), (sb, zb), (sy, zy) = (m.quant(op["inputs"][0]), m.quant(op["inputs"][1]),
                                    m.quant(op["outputs"][0]))
    left_shift = 20
    twice_max = 2.0 * max(sa, sb)
    sa_ = multiply_by_quantized_multiplier((a.astype(np.int64) - za) * (1 << left_shift), sa / twice_max)
    sb_ = multiply_by_quantized_multiplier((b.astype(np.int64) - zb) * (1 << left_shift), sb / twice_max)
    out = multiply_by_quantized_multiplier(sa_ + sb_, twice_max / ((1 << left_shift) * sy)) + zy
    lo, hi = activation_range(m.option(op, 0, nt.Int8Flags, 0), sy, zy)
    return np.clip(out, lo, hi).astype(np.uint8)


def average_pool(m, op, x):
    # Pool2DOptions padding 0, stride_w 1, stride_h 2, filter_width 3, filter_height 4, act 5
    pad = m.option(op, 0, nt.Int8Flags, 0)
    sw_, sh_ = m.option(op, 1, nt.Int32Flags, 1), m.option(op, 2, nt.Int32Flags, 1)
    fw, fh = m.option(op, 3, nt.Int32Flags, 1), m.option(op, 4, nt.Int32Flags, 1)
    sy, zy = m.quant(op["outputs"][0])
    lo, hi = activation_range(m.option(op, 5, nt.Int8Flags, 0), sy, zy)
    n, h, w, c = x.shape
    oh, pt = same_or_valid(pad, h, fh, sh_, 1)
    ow, pl = same_or_valid(pad, w, fw, sw_, 1)
    y = np.zeros((n, oh, ow, c), np.int64)
    for i in range(oh):
        h0, h1 = max(0, i * sh_ - pt), min(h, i * sh_ - pt + fh)
        for j in range(ow):
            w0, w1 = max(0, j * sw_ - pl), min(w, j * sw_ - pl + fw)
            count = (h1 - h0) * (w1 - w0)
            total = x[:, h0:h1, w0:w1, :].astype(np.int64).sum(axis=(1, 2))
            y[:, i, j, :] = (total + count // 2) // count
    return np.clip(y, lo, hi).astype(np.uint8)


def concatenation(m, op, xs):
    axis = m.option(op, 0, nt.Int32Flags, 0)
    sy, zy = m.quant(op["outputs"][0])
    parts = []
    for i, x in zip(op["inputs"], xs):
        s, z = m.quant(i)
        if s == sy and z == zy:
            parts.append(x)
            continue
        scale = np.float32(np.float32(s) * (np.float32(1.0) / np.float32(sy)))
        bias = np.float32(-np.float32(z) * scale)
        r = x.astype(np.float32) * scale + bias  # float32 like the kernel
        parts.append(np.clip(round_half_away(r) + zy, 0, 255).astype(np.uint8))
    lo, hi = activation_range(m.option(op, 1, nt.Int8Flags, 0), sy, zy)
    return np.clip(np.concatenate(parts, axis=axis), lo, hi).astype(np.uint8)


def requantize(m, op, x):
    (sx, zx), (sy, zy) = m.quant(op["inputs"][0]), m.quant(op["outputs"][0])
    out = multiply_by_quantized_multiplier(x.astype(np.int64) - zx, sx / sy) + zy
    return np.clip(out, 0, 255).astype(np.uint8)


def resize_bilinear(m, op, x):
    oh, ow = (int(v) for v in m.constant(op["inputs"][1], np.int32))
    # ResizeBilinearOptions align_corners (id 2), half_pixel_centers (id 3)
    align = bool(m.option(op, 2, nt.BoolFlags, False))
    half = bool(m.option(op, 3, nt.BoolFlags, False))
    n, h, w, c = x.shape

    def axis(size, out):
        scale = np.float32(size) / np.float32(out)
        if align and out > 1:
            scale = np.float32(size - 1) / np.float32(out - 1)
        o = np.arange(out, dtype=np.float32)
        v = (o + np.float32(0.5)) * scale - np.float32(0.5) if half else o * scale
        lo = np.maximum(np.floor(v).astype(np.int64), 0)
        hi = np.minimum(np.ceil(v).astype(np.int64), size - 1)
        return lo, hi, (v - lo.astype(np.float32)).astype(np.float32)

    y0, y1, dy = axis(h, oh)
    x0, x1, dx = axis(w, ow)
    dy, ry = dy[None, :, None, None], (np.float32(1) - dy)[None, :, None, None]
    dx, rx = dx[None, None, :, None], (np.float32(1) - dx)[None, None, :, None]
    f = x.astype(np.float32)
    v = (f[:, y0][:, :, x0] * ry * rx + f[:, y1][:, :, x0] * dy * rx +
         f[:, y0][:, :, x1] * ry * dx + f[:, y1][:, :, x1] * dy * dx) + np.float32(0.5)
    return np.clip(np.trunc(v), 0, 255).astype(np.uint8)


def arg_max(m, op, x):
    axis = int(m.constant(op["inputs"][1], np.int32 if m.tensors[op["inputs"][1]]["type"] == INT32 else np.int64).ravel()[0])
    y = np.argmax(x, axis=axis)
    return y.astype(np.int64 if m.tensors[op["outputs"][0]]["type"] == INT64 else np.int32)


def logistic(m, op, x):
    (sx, zx), (sy, zy) = m.quant(op["inputs"][0]), m.quant(op["outputs"][0])
    if sy != 1.0 / 256 or zy != 0:
        raise SystemExit(f"LOGISTIC output scale {sy} zero point {zy}: TFLite requires 1/256 and 0")
    q = np.arange(256, dtype=np.int32)
    real = np.float32(sx) * (q - zx).astype(np.float32)
    # exp in double rounded to float32: the correctly rounded expf (glibc's expf is too, in all
    # but rare cases; numpy's own float32 exp may be an ulp off)
    e = np.exp(-real.astype(np.float64)).astype(np.float32)
    sig = (np.float32(1) / (np.float32(1) + e)).astype(np.float32)
    table = np.clip(round_half_away(sig * (np.float32(1) / np.float32(sy))) + zy, 0, 255).astype(np.uint8)
    return table[x]


def run(m, x):
    """Runs subgraph 0; returns (values by tensor index)."""
    values = {m.inputs[0]: x}
    for k, op in enumerate(m.ops):
        ins = [values[i] for i in op["inputs"] if i >= 0 and m.tensors[i]["data"] is None]
        code = op["code"]
        if code == 3:
            y = conv(m, op, ins[0], False)
        elif code == 4:
            y = conv(m, op, ins[0], True)
        elif code == 0:
            y = add(m, op, ins[0], ins[1])
        elif code == 1:
            y = average_pool(m, op, ins[0])
        elif code == 2:
            y = concatenation(m, op, ins)
        elif code == 114:
            y = requantize(m, op, ins[0])
        elif code == 23:
            y = resize_bilinear(m, op, ins[0])
        elif code == 56:
            y = arg_max(m, op, ins[0])
        elif code == 22:
            y = ins[0].reshape(m.tensors[op["outputs"][0]]["shape"])
        elif code == 14:
            y = logistic(m, op, ins[0])
        else:
            raise SystemExit(f"operator {k}: builtin code {code} is not implemented here")
        if list(y.shape) != m.tensors[op["outputs"][0]]["shape"]:
            raise SystemExit(f"operator {k}: computed shape {list(y.shape)}, the model says "
                             f"{m.tensors[op['outputs'][0]]['shape']}")
        values[op["outputs"][0]] = y
    return values


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--input", nargs="+", required=True)
    ap.add_argument("--output", nargs="+", default=[])
    ap.add_argument("--logits", nargs="+", default=[])
    ap.add_argument("--all-outputs", help="write output k of input i to <this>_<i>_<k>.npy")
    args = ap.parse_args()
    with open(args.model, "rb") as f:
        m = Model(f.read())
    argmax_ops = [op for op in m.ops if op["code"] == 56]
    for i, path in enumerate(args.input):
        values = run(m, np.load(path))
        y = values[m.outputs[0]]
        if args.output:
            np.save(args.output[i], y)
        if args.all_outputs:
            for k, t in enumerate(m.outputs):
                np.save(f"{args.all_outputs}_{i}_{k}.npy", values[t])
        if args.logits:
            if not argmax_ops:
                raise SystemExit("--logits needs a model with an ARG_MAX operator")
            np.save(args.logits[i], values[argmax_ops[0]["inputs"][0]])
        print(f"tflite_ref: {path}: output {y.dtype} {list(y.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
