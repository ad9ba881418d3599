#!/usr/bin/python3
"""Build a YOLO11-style attention block (C2PSA's PSABlock: Attention + FFN) in QDQ form, written the
way ONNX Runtime's static quantizer (quantize_static, QuantFormat.QDQ) writes it, for
tests/reference/test_attention_qdq_ort.cpp (issue 33):

  x float [1, C, H, W] -> Q/DQ
  qkv  = Conv 1x1 C -> 2C (per-channel int8 weights, int32 bias)            -> Q/DQ
  Reshape [1, heads, 2C/heads, H*W] -> Split (key_dim, key_dim, head_dim)  -> Q/DQ each (same params)
  attn = MatMul(Transpose(q, [0,1,3,2]), k)  (two activations)             -> Q/DQ
  attn = Mul(attn, key_dim ** -0.5)  (a quantized scalar constant)         -> Q/DQ
  attn = Softmax(attn, axis=-1)  (output 1/256, zp 0 / -128 or 1/127, 0 as the quantizer fixes) -> Q/DQ
  o    = MatMul(v, Transpose(attn, [0,1,3,2]))  (two activations)          -> Q/DQ
  o    = Reshape [1, C, H, W] + pe(v): depthwise Conv 3x3 of v               -> Add -> Q/DQ
  o    = Conv 1x1 proj                                                      -> Q/DQ
  y    = x + o (residual)                                                   -> Q/DQ
  f    = Conv 1x1 C -> 2C, SiLU (Sigmoid -> Q/DQ, Mul -> Q/DQ), Conv 1x1 2C -> C -> Q/DQ
  out  = y + f                                                              -> Q -> DQ (float32 output)

Every activation tensor gets one QuantizeLinear -> DequantizeLinear pair shared by its consumers (the
quantizer's default, no dedicated pairs); weights are per output channel, symmetric int8; biases
int32 with scale x_scale * w_scale. Activation scales come from a float run on seeded inputs
(min/max calibration, as the quantizer's MinMax calibrator). Variants:
  u8   uint8 activations, asymmetric (the quantizer's default)
  i8   int8 activations, asymmetric (softmax output 1/256, zp -128)
  i8s  int8 activations, symmetric (ActivationSymmetric; softmax output 1/127, zp 0)

Usage: /usr/bin/python3 make_attention_qdq.py VARIANT OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

C, H, W, HEADS = 64, 10, 12, 2
HEAD_DIM = C // HEADS          # 32
KEY_DIM = HEAD_DIM // 2        # 16
N = H * W


def build(variant):
    rng = np.random.default_rng(33)
    signed = variant != "u8"
    symmetric = variant == "i8s"
    qdt = np.int8 if signed else np.uint8
    qmin, qmax = (-128, 127) if signed else (0, 255)

    weights = {}

    def conv_w(name, cout, cin_per_group, k):
        w = rng.normal(0, 1.0 / np.sqrt(cin_per_group * k * k), (cout, cin_per_group, k, k)).astype(np.float32)
        b = rng.normal(0, 0.1, cout).astype(np.float32)
        weights[name] = (w, b)

    conv_w("qkv", 2 * C, C, 1)
    conv_w("pe", C, 1, 3)
    conv_w("proj", C, C, 1)
    conv_w("ffn1", 2 * C, C, 1)
    conv_w("ffn2", C, 2 * C, 1)

    def conv(x, name, group=1, pad=0):
        w, b = weights[name]
        n, c, hh, ww = x.shape
        k = w.shape[2]
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        y = np.zeros((n, w.shape[0], hh, ww), np.float32)
        cpg = c // group
        opg = w.shape[0] // group
        for o in range(w.shape[0]):
            g = o // opg
            for i in range(cpg):
                for dy in range(k):
                    for dx in range(k):
                        y[:, o] += w[o, i, dy, dx] * xp[:, g * cpg + i, dy:dy + hh, dx:dx + ww]
            y[:, o] += b[o]
        return y

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def sigmoid(a):
        return 1 / (1 + np.exp(-a))

    # Float run for calibration (min/max per tensor).
    x = rng.uniform(-1, 1, (1, C, H, W)).astype(np.float32)
    ranges = {}

    def seen(name, v):
        ranges[name] = (min(float(v.min()), 0.0), max(float(v.max()), 0.0))
        return v

    seen("x", x)
    qkv = seen("qkv", conv(x, "qkv"))
    r = qkv.reshape(1, HEADS, 2 * HEAD_DIM, N)
    q, k, v = r[:, :, :KEY_DIM], r[:, :, KEY_DIM:2 * KEY_DIM], r[:, :, 2 * KEY_DIM:]
    attn = seen("attn", np.matmul(q.transpose(0, 1, 3, 2), k))
    attn_s = seen("attn_s", attn * np.float32(KEY_DIM ** -0.5))
    sm = softmax(attn_s)
    o = seen("o", np.matmul(v, sm.transpose(0, 1, 3, 2)))
    vimg = v.reshape(1, C, H, W)
    pe = seen("pe", conv(vimg, "pe", group=C, pad=1))
    o2 = seen("o2", o.reshape(1, C, H, W) + pe)
    pr = seen("proj", conv(o2, "proj"))
    y = seen("y", x + pr)
    f1 = seen("f1", conv(y, "ffn1"))
    s1 = seen("s1", sigmoid(f1))
    m1 = seen("m1", f1 * s1)
    f2 = seen("f2", conv(m1, "ffn2"))
    seen("out", y + f2)

    def qparams(name):
        lo, hi = ranges[name]
        if symmetric:
            m = max(abs(lo), abs(hi))
            return np.float32(2 * m / (qmax - qmin)), 0
        scale = np.float32((hi - lo) / (qmax - qmin))
        zp = int(np.clip(round(qmin - lo / scale), qmin, qmax))
        return scale, zp

    nodes, inits = [], []
    counter = [0]

    def const(name, arr):
        inits.append(nh.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, out, **attrs):
        counter[0] += 1
        nodes.append(h.make_node(op, ins, [out], name=f"{op}_{counter[0]}", **attrs))
        return out

    def qdq(t, scale, zp):
        s = const(t + "_scale", np.float32(scale))
        z = const(t + "_zero_point", np.array(zp, qdt))
        node("QuantizeLinear", [t, s, z], t + "_QuantizeLinear_Output")
        return node("DequantizeLinear", [t + "_QuantizeLinear_Output", s, z], t + "_DequantizeLinear_Output")

    def qdq_named(t, name):
        return qdq(t, *qparams(name))

    def qconv(t_dq, t_scale, name, out, group=1, pad=0):
        w, b = weights[name]
        m = np.abs(w.reshape(w.shape[0], -1)).max(1)
        ws = (m / 127.0).astype(np.float32)
        wq = np.clip(np.round(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
        bs = (np.float32(t_scale) * ws).astype(np.float32)
        bq = np.round(b / bs).astype(np.int32)
        const(name + "_w", wq); const(name + "_w_scale", ws); const(name + "_w_zp", np.zeros(len(ws), np.int8))
        const(name + "_b", bq); const(name + "_b_scale", bs); const(name + "_b_zp", np.zeros(len(bs), np.int32))
        node("DequantizeLinear", [name + "_w", name + "_w_scale", name + "_w_zp"], name + "_w_dq", axis=0)
        node("DequantizeLinear", [name + "_b", name + "_b_scale", name + "_b_zp"], name + "_b_dq", axis=0)
        attrs = {"group": group} if group != 1 else {}
        if pad:
            attrs.update(pads=[pad] * 4, kernel_shape=[3, 3])
        return node("Conv", [t_dq, name + "_w_dq", name + "_b_dq"], out, **attrs)

    xs, xz = qparams("x")
    x_dq = qdq("images", xs, xz)
    qkv_dq = qdq_named(qconv(x_dq, xs, "qkv", "qkv"), "qkv")
    shape = const("attn_shape", np.array([1, HEADS, 2 * HEAD_DIM, N], np.int64))
    r_dq = qdq_named(node("Reshape", [qkv_dq, shape], "qkv_r"), "qkv")
    split = const("split", np.array([KEY_DIM, KEY_DIM, HEAD_DIM], np.int64))
    counter[0] += 1
    nodes.append(h.make_node("Split", [r_dq, split], ["q", "k", "v"], axis=2, name=f"Split_{counter[0]}"))
    q_dq, k_dq, v_dq = (qdq_named(t, "qkv") for t in ("q", "k", "v"))
    qt_dq = qdq_named(node("Transpose", [q_dq], "qt", perm=[0, 1, 3, 2]), "qkv")
    attn_dq = qdq_named(node("MatMul", [qt_dq, k_dq], "attn"), "attn")
    sc = float(KEY_DIM ** -0.5)
    # The scalar constant: quantized by the quantizer as a weight (int8 symmetric here: one value).
    const("attn_mul_c", np.array(127, np.int8)); const("attn_mul_c_scale", np.float32(sc / 127)); const("attn_mul_c_zp", np.int8(0))
    node("DequantizeLinear", ["attn_mul_c", "attn_mul_c_scale", "attn_mul_c_zp"], "attn_mul_c_dq")
    attn_s_dq = qdq_named(node("Mul", [attn_dq, "attn_mul_c_dq"], "attn_s"), "attn_s")
    if variant == "u8":
        sm_params = (1 / 256.0, 0)
    elif symmetric:
        sm_params = (1 / 127.0, 0)
    else:
        sm_params = (1 / 256.0, -128)
    sm_dq = qdq(node("Softmax", [attn_s_dq], "sm", axis=-1), *sm_params)
    smt_dq = qdq(node("Transpose", [sm_dq], "smt", perm=[0, 1, 3, 2]), *sm_params)
    o_dq = qdq_named(node("MatMul", [v_dq, smt_dq], "o"), "o")
    img = const("img_shape", np.array([1, C, H, W], np.int64))
    o_img_dq = qdq_named(node("Reshape", [o_dq, img], "o_img"), "o")
    v_img_dq = qdq_named(node("Reshape", [v_dq, img], "v_img"), "qkv")
    pe_dq = qdq_named(qconv(v_img_dq, qparams("qkv")[0], "pe", "pe", group=C, pad=1), "pe")
    o2_dq = qdq_named(node("Add", [o_img_dq, pe_dq], "o2"), "o2")
    pr_dq = qdq_named(qconv(o2_dq, qparams("o2")[0], "proj", "proj"), "proj")
    y_dq = qdq_named(node("Add", [x_dq, pr_dq], "y"), "y")
    f1_dq = qdq_named(qconv(y_dq, qparams("y")[0], "ffn1", "f1"), "f1")
    s1_dq = qdq_named(node("Sigmoid", [f1_dq], "s1"), "s1")
    m1_dq = qdq_named(node("Mul", [f1_dq, s1_dq], "m1"), "m1")
    f2_dq = qdq_named(qconv(m1_dq, qparams("m1")[0], "ffn2", "f2"), "f2")
    out = node("Add", [y_dq, f2_dq], "sum")
    os_, oz = qparams("out")
    s = const("out_scale", np.float32(os_)); z = const("out_zero_point", np.array(oz, qdt))
    node("QuantizeLinear", [out, s, z], "out_q")
    node("DequantizeLinear", ["out_q", s, z], "output0")

    graph = h.make_graph(nodes, f"attention_qdq_{variant}",
                         [h.make_tensor_value_info("images", T.FLOAT, [1, C, H, W])],
                         [h.make_tensor_value_info("output0", T.FLOAT, [1, C, H, W])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("u8", "i8", "i8s"):
        sys.exit("usage: make_attention_qdq.py u8|i8|i8s OUT.onnx")
    onnx.save(build(sys.argv[1]), sys.argv[2])
