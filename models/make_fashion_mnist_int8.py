#!/usr/bin/python3
"""Train, export and post-training-quantize the project's default model.

Reads Fashion-MNIST from the Debian package dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist/*.gz), trains a small residual CNN with
PyTorch, exports it to ONNX (fashion_mnist_fp32.onnx), quantizes it itself
(static, min/max calibration) into a QOperator-format ONNX model
(fashion_mnist_int8.onnx) built with onnx.helper, and evaluates the int8 graph
with a numpy reference interpreter that uses exactly the runtime's arithmetic
(see /work/shared/DESIGN.md "Where the arithmetic is defined").

Run:  /usr/bin/python3 models/make_fashion_mnist_int8.py
Needs the Debian packages python3-torch python3-onnx python3-numpy
dataset-fashion-mnist.  No onnxruntime, no network access.

All outputs are written next to this script (models/).
"""

import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import onnx
from onnx import helper, numpy_helper, TensorProto

T_START = time.time()

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = "/usr/share/datasets/fashion-mnist"
IMAGES_DIR = os.path.join(HERE, "images")
FP32_ONNX = os.path.join(HERE, "fashion_mnist_fp32.onnx")
INT8_ONNX = os.path.join(HERE, "fashion_mnist_int8.onnx")

SEED = 20240601
EPOCHS = 5
BATCH = 128
LR = 2e-3
CALIB_IMAGES = 2000
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]

f32 = np.float32


# --------------------------------------------------------------------------
# Data: IDX reader (gzip + numpy)
# --------------------------------------------------------------------------
def read_idx(path):
    """Minimal IDX reader: magic = 0x00 0x00 <dtype> <ndim>, big-endian dims."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0:
        raise ValueError("%s: bad IDX magic" % path)
    dtype_code, ndim = data[2], data[3]
    dtypes = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
    dt = dtypes[dtype_code]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    off = 4 + 4 * ndim
    count = int(np.prod(dims))
    arr = np.frombuffer(data, dtype=dt, count=count, offset=off)
    if off + count * dt.itemsize != len(data):
        raise ValueError("%s: size mismatch" % path)
    return arr.reshape(dims)


def load_split(prefix):
    imgs = read_idx(os.path.join(DATA_DIR, "%s-images-idx3-ubyte.gz" % prefix))
    labels = read_idx(os.path.join(DATA_DIR, "%s-labels-idx1-ubyte.gz" % prefix))
    assert imgs.shape[0] == labels.shape[0] and imgs.shape[1:] == (28, 28)
    x = (imgs.astype(f32) / f32(255.0)).reshape(-1, 1, 28, 28)  # NCHW, [0,1]
    return np.ascontiguousarray(x, dtype=f32), labels.astype(np.int64)


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)
        self.conv3 = nn.Conv2d(16, 32, 3, padding=1)
        k = 1.0 / np.sqrt(1568.0)
        self.fc_w = nn.Parameter(torch.empty(1568, 10).uniform_(-k, k))  # [K, N]
        self.fc_b = nn.Parameter(torch.empty(10).uniform_(-k, k))

    def forward(self, x, trace=None):
        c1 = F.relu(self.conv1(x))
        d = F.relu(self.dw(c1))
        p = self.pw(d)
        s = c1 + p
        p1 = F.max_pool2d(s, 2, 2)
        c3 = F.relu(self.conv3(p1))
        p2 = F.max_pool2d(c3, 2, 2)
        flat = torch.reshape(p2, (-1, 1568))
        mm = torch.matmul(flat, self.fc_w)
        logits = mm + self.fc_b
        if trace is not None:
            trace.update(input=x, conv1=c1, dw=d, pw=p, add=s, conv3=c3,
                         matmul=mm, logits=logits)
        return logits


def torch_predict(model, x, bs=1000):
    out = []
    with torch.no_grad():
        for i in range(0, len(x), bs):
            out.append(model(torch.from_numpy(x[i:i + bs])).numpy())
    return np.concatenate(out)


# --------------------------------------------------------------------------
# Quantization helpers (ONNX Runtime static-quantizer conventions)
# --------------------------------------------------------------------------
def act_qparams(rmin, rmax):
    """Per-tensor asymmetric uint8: range extended to include 0."""
    rmin = min(float(rmin), 0.0)
    rmax = max(float(rmax), 0.0)
    scale = f32((rmax - rmin) / 255.0)
    if scale == 0:
        scale = f32(1.0)
    zp = int(np.clip(np.round(-rmin / float(scale)), 0, 255))
    return scale, np.uint8(zp)


def weight_qparams_per_channel(w, axis):
    """Symmetric int8 per channel along `axis`: scale = max|w| / 127, zp = 0."""
    red = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.abs(w).max(axis=red).astype(np.float64)
    scale = (amax / 127.0).astype(f32)
    scale[scale == 0] = f32(1.0)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w.astype(np.float64) / scale.reshape(shape).astype(np.float64)),
                -127, 127).astype(np.int8)
    return q, scale, np.zeros(len(scale), dtype=np.int8)


# --------------------------------------------------------------------------
# numpy reference of the quantized graph (the runtime's arithmetic, exactly)
# --------------------------------------------------------------------------
def _scalar_f32(a):
    a = np.asarray(a)
    assert a.size == 1
    return f32(a.reshape(()))


def _int_zp(a):
    a = np.asarray(a)
    assert a.size == 1
    return np.int32(a.reshape(()))


def _im2col_matmul(xc, wmat):
    """Integer matmul, exact.  xc, wmat hold small integers; the products and
    partial sums are far below 2**53, so float64 BLAS is exact here.  The
    result is returned as int64 and checked against the int32 range by the
    caller."""
    r = xc.astype(np.float64) @ wmat.astype(np.float64)
    return np.rint(r).astype(np.int64)


def ref_quantize(x, scale, zp):
    s = _scalar_f32(scale)
    z = f32(_int_zp(zp))
    x = np.asarray(x, dtype=f32)
    q = np.clip(np.rint(x / s) + z, f32(0), f32(255))
    assert q.dtype == f32
    return q.astype(np.uint8)


def ref_dequantize(q, scale, zp):
    r = (q.astype(np.int32) - _int_zp(zp)).astype(f32) * _scalar_f32(scale)
    assert r.dtype == f32
    return r


def _requant(acc, mult, y_zp, axis_shape):
    assert acc.min() >= -2**31 and acc.max() < 2**31, "int32 accumulator overflow"
    acc32 = acc.astype(np.int32)
    v = np.rint(acc32.astype(f32) * mult.reshape(axis_shape)) + f32(_int_zp(y_zp))
    assert v.dtype == f32
    return np.clip(v, f32(0), f32(255)).astype(np.uint8)


def ref_qlinearconv(x, xs, xz, w, ws, wz, ys, yz, b, pads, strides, group, dil):
    N, C, H, W = x.shape
    M, Cg, KH, KW = w.shape
    assert strides == [1, 1] and dil == [1, 1]
    assert C == Cg * group and M % group == 0
    Mg = M // group
    pt, pl, pb, pr = pads
    xi = x.astype(np.int32) - _int_zp(xz)          # padding value is x_zp -> 0 here
    xp = np.pad(xi, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    OH, OW = H + pt + pb - KH + 1, W + pl + pr - KW + 1
    wz = np.asarray(wz).astype(np.int32).reshape(-1)
    if wz.size == 1:
        wz = np.repeat(wz, M)
    wi = w.astype(np.int32) - wz.reshape(M, 1, 1, 1)
    acc = np.empty((N, M, OH, OW), dtype=np.int64)
    for g in range(group):
        # im2col: [N, OH, OW, Cg*KH*KW] in (c, kh, kw) order, matching w layout
        cols = np.empty((N, OH, OW, Cg, KH, KW), dtype=np.int32)
        for kh in range(KH):
            for kw in range(KW):
                cols[:, :, :, :, kh, kw] = xp[:, g * Cg:(g + 1) * Cg,
                                              kh:kh + OH, kw:kw + OW].transpose(0, 2, 3, 1)
        cols = cols.reshape(N * OH * OW, Cg * KH * KW)
        wm = wi[g * Mg:(g + 1) * Mg].reshape(Mg, Cg * KH * KW).T
        a = _im2col_matmul(cols, wm).reshape(N, OH, OW, Mg).transpose(0, 3, 1, 2)
        acc[:, g * Mg:(g + 1) * Mg] = a
    if b is not None:
        acc += b.astype(np.int64).reshape(1, M, 1, 1)
    ws = np.asarray(ws, dtype=f32).reshape(-1)
    if ws.size == 1:
        ws = np.repeat(ws, M)
    mult = (_scalar_f32(xs) * ws).astype(f32) / _scalar_f32(ys)   # float32 throughout
    assert mult.dtype == f32
    return _requant(acc, mult, yz, (1, M, 1, 1))


def ref_qlinearmatmul(a, as_, az, b, bs, bz, ys, yz):
    K, Nn = b.shape
    ai = a.astype(np.int32) - _int_zp(az)
    bz = np.asarray(bz).astype(np.int32).reshape(-1)
    if bz.size == 1:
        bz = np.repeat(bz, Nn)
    bi = b.astype(np.int32) - bz.reshape(1, Nn)
    acc = _im2col_matmul(ai.reshape(-1, K), bi).reshape(a.shape[:-1] + (Nn,))
    bs = np.asarray(bs, dtype=f32).reshape(-1)
    if bs.size == 1:
        bs = np.repeat(bs, Nn)
    mult = (_scalar_f32(as_) * bs).astype(f32) / _scalar_f32(ys)
    assert mult.dtype == f32
    return _requant(acc, mult, yz, (1,) * (a.ndim - 1) + (Nn,))


def ref_qlinearadd(a, as_, az, b, bs, bz, cs, cz):
    va = _scalar_f32(as_) * (a.astype(np.int32) - _int_zp(az)).astype(f32)
    vb = _scalar_f32(bs) * (b.astype(np.int32) - _int_zp(bz)).astype(f32)
    v = (va + vb) / _scalar_f32(cs)
    y = np.rint(v) + f32(_int_zp(cz))
    assert y.dtype == f32
    return np.clip(y, f32(0), f32(255)).astype(np.uint8)


def ref_maxpool(x, kernel, strides, pads):
    assert pads == [0, 0, 0, 0] and kernel == strides
    N, C, H, W = x.shape
    kh, kw = kernel
    OH, OW = H // kh, W // kw
    v = x[:, :, :OH * kh, :OW * kw].reshape(N, C, OH, kh, OW, kw)
    return v.max(axis=(3, 5))


def run_int8_reference(model, x):
    """Interpret the QOperator ONNX graph `model` on a batch x [N,1,28,28] f32.
    The graph is written for batch 1; the leading dim is treated as the batch
    (Reshape's leading 1 becomes N).  Returns the float32 logits [N, 10]."""
    g = model.graph
    env = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    env[g.input[0].name] = x
    N = x.shape[0]
    for node in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        ins = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "QuantizeLinear":
            out = ref_quantize(*ins)
        elif op == "DequantizeLinear":
            out = ref_dequantize(*ins)
        elif op == "QLinearConv":
            out = ref_qlinearconv(*ins[:8], ins[8] if len(ins) > 8 else None,
                                  list(attrs.get("pads", [0, 0, 0, 0])),
                                  list(attrs.get("strides", [1, 1])),
                                  int(attrs.get("group", 1)),
                                  list(attrs.get("dilations", [1, 1])))
        elif op == "QLinearMatMul":
            out = ref_qlinearmatmul(*ins)
        elif op == "QLinearAdd":
            assert node.domain == "com.microsoft"
            out = ref_qlinearadd(*ins)
        elif op == "MaxPool":
            out = ref_maxpool(ins[0], list(attrs["kernel_shape"]),
                              list(attrs.get("strides", [1, 1])),
                              list(attrs.get("pads", [0, 0, 0, 0])))
        elif op == "Reshape":
            shape = [int(s) for s in ins[1]]
            assert shape[0] == 1
            out = ins[0].reshape([N] + shape[1:])
        else:
            raise NotImplementedError(op)
        env[node.output[0]] = out
    return env[g.output[0].name]


def run_int8_batched(model, x, bs=500):
    return np.concatenate([run_int8_reference(model, x[i:i + bs])
                           for i in range(0, len(x), bs)])


# --------------------------------------------------------------------------
# float reference of the exported fp32 ONNX (to check the export)
# --------------------------------------------------------------------------
def run_fp32_onnx(model, x):
    g = model.graph
    env = {t.name: numpy_helper.to_array(t).astype(np.float64)
           if numpy_helper.to_array(t).dtype == f32 else numpy_helper.to_array(t)
           for t in g.initializer}
    env[g.input[0].name] = x.astype(np.float64)
    N = x.shape[0]
    for node in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        ins = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "Constant":
            out = numpy_helper.to_array(attrs["value"])
        elif op == "Conv":
            xx, w = ins[0], ins[1]
            b = ins[2] if len(ins) > 2 else np.zeros(w.shape[0])
            grp = int(attrs.get("group", 1))
            pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
            M, Cg, KH, KW = w.shape
            xp = np.pad(xx, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
            OH, OW = xx.shape[2] + pt + pb - KH + 1, xx.shape[3] + pl + pr - KW + 1
            out = np.zeros((N, M, OH, OW))
            Mg = M // grp
            for m in range(M):
                gi = m // Mg
                for c in range(Cg):
                    for kh in range(KH):
                        for kw in range(KW):
                            out[:, m] += w[m, c, kh, kw] * xp[:, gi * Cg + c, kh:kh + OH, kw:kw + OW]
            out += b.reshape(1, M, 1, 1)
        elif op == "Relu":
            out = np.maximum(ins[0], 0)
        elif op == "Add":
            out = ins[0] + ins[1]
        elif op == "MaxPool":
            out = ref_maxpool(ins[0], list(attrs["kernel_shape"]),
                              list(attrs.get("strides", [1, 1])),
                              list(attrs.get("pads", [0, 0, 0, 0])))
        elif op == "Reshape":
            shape = [int(s) for s in ins[1]]
            if shape[0] in (1, -1):
                shape[0] = N
            out = ins[0].reshape(shape)
        elif op == "MatMul":
            out = ins[0] @ ins[1]
        elif op == "Gemm":
            out = ins[0] @ (ins[1].T if attrs.get("transB", 0) else ins[1]) + ins[2]
        elif op == "Flatten":
            out = ins[0].reshape(N, -1)
        else:
            raise NotImplementedError(op)
        env[node.output[0]] = out
    return env[g.output[0].name]


# --------------------------------------------------------------------------
# Build the QOperator graph
# --------------------------------------------------------------------------
def build_int8_model(model, ranges):
    sd = {k: v.detach().numpy().astype(f32) for k, v in model.state_dict().items()}
    inits = []
    nodes = []
    qp = {}   # tensor name -> (scale, zp) of the uint8 activation

    def add_init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def act(name, key):
        s, z = act_qparams(*ranges[key])
        add_init(name + "_scale", np.array(s, dtype=f32))
        add_init(name + "_zero_point", np.array(z, dtype=np.uint8))
        qp[name] = (s, z)
        return name + "_scale", name + "_zero_point"

    def alias(name, src):   # MaxPool / Reshape keep their input's scale/zp
        qp[name] = qp[src]
        return src + "_scale", src + "_zero_point"

    # input
    in_s, in_z = act("input", "input")
    nodes.append(helper.make_node("QuantizeLinear", ["input", in_s, in_z],
                                  ["input_quantized"], name="input_QuantizeLinear"))
    qp["input_quantized"] = qp["input"]

    def qconv(prefix, x, x_sz, out_name, range_key, pads, group):
        """x: uint8 input tensor name; x_sz: names of its scale/zp initializers."""
        w = sd[prefix + ".weight"]
        b = sd[prefix + ".bias"]
        wq, ws, wz = weight_qparams_per_channel(w, 0)
        xs = qp[x][0]
        bq = np.round(b.astype(np.float64) /
                      (np.float64(xs) * ws.astype(np.float64))).astype(np.int64)
        assert np.abs(bq).max() < 2**31
        bq = bq.astype(np.int32)
        wn = add_init(prefix + ".weight_quantized", wq)
        wsn = add_init(prefix + ".weight_scale", ws)
        wzn = add_init(prefix + ".weight_zero_point", wz)
        bn = add_init(prefix + ".bias_quantized", bq)
        ys, yz = act(out_name, range_key)
        nodes.append(helper.make_node(
            "QLinearConv", [x, x_sz[0], x_sz[1], wn, wsn, wzn, ys, yz, bn],
            [out_name], name=prefix + "_QLinearConv",
            kernel_shape=list(w.shape[2:]), pads=pads, strides=[1, 1],
            dilations=[1, 1], group=group))
        return ys, yz

    # conv1 + ReLU (ReLU fused: output range calibrated on post-ReLU values)
    c1_sz = qconv("conv1", "input_quantized", (in_s, in_z), "conv1_out_quantized",
                  "conv1", [1, 1, 1, 1], 1)
    dw_sz = qconv("dw", "conv1_out_quantized", c1_sz, "dw_out_quantized",
                  "dw", [1, 1, 1, 1], 16)
    pw_sz = qconv("pw", "dw_out_quantized", dw_sz, "pw_out_quantized",
                  "pw", [0, 0, 0, 0], 1)
    # residual add
    add_sz = act("add_out_quantized", "add")
    nodes.append(helper.make_node(
        "QLinearAdd", ["conv1_out_quantized", c1_sz[0], c1_sz[1],
                       "pw_out_quantized", pw_sz[0], pw_sz[1], add_sz[0], add_sz[1]],
        ["add_out_quantized"], name="residual_QLinearAdd", domain="com.microsoft"))
    nodes.append(helper.make_node("MaxPool", ["add_out_quantized"], ["pool1_out_quantized"],
                                  name="pool1_MaxPool", kernel_shape=[2, 2], strides=[2, 2]))
    pool1_sz = alias("pool1_out_quantized", "add_out_quantized")
    c3_sz = qconv("conv3", "pool1_out_quantized", pool1_sz, "conv3_out_quantized",
                  "conv3", [1, 1, 1, 1], 1)
    nodes.append(helper.make_node("MaxPool", ["conv3_out_quantized"], ["pool2_out_quantized"],
                                  name="pool2_MaxPool", kernel_shape=[2, 2], strides=[2, 2]))
    alias("pool2_out_quantized", "conv3_out_quantized")
    add_init("flatten_shape", np.array([1, 1568], dtype=np.int64))
    nodes.append(helper.make_node("Reshape", ["pool2_out_quantized", "flatten_shape"],
                                  ["flatten_out_quantized"], name="flatten_Reshape"))
    flat_sz = alias("flatten_out_quantized", "conv3_out_quantized")
    # MatMul: weight [K, N], per-column symmetric int8
    wq, ws, wz = weight_qparams_per_channel(sd["fc_w"], 1)
    add_init("fc.weight_quantized", wq)
    add_init("fc.weight_scale", ws)
    add_init("fc.weight_zero_point", wz)
    ms, mz = act("matmul_out_quantized", "matmul")
    nodes.append(helper.make_node(
        "QLinearMatMul", ["flatten_out_quantized", flat_sz[0], flat_sz[1], "fc.weight_quantized",
                          "fc.weight_scale", "fc.weight_zero_point", ms, mz],
        ["matmul_out_quantized"], name="fc_QLinearMatMul"))
    # bias: constant uint8 tensor with its own (asymmetric, activation-style) scale/zp
    b = sd["fc_b"].reshape(1, 10)
    bs_, bz_ = act_qparams(b.min(), b.max())
    bq = ref_quantize(b, bs_, bz_)
    add_init("fc.bias_quantized", bq)
    add_init("fc.bias_quantized_scale", np.array(bs_, dtype=f32))
    add_init("fc.bias_quantized_zero_point", np.array(bz_, dtype=np.uint8))
    ls, lz = act("logits_quantized", "logits")
    nodes.append(helper.make_node(
        "QLinearAdd", ["matmul_out_quantized", ms, mz, "fc.bias_quantized",
                       "fc.bias_quantized_scale", "fc.bias_quantized_zero_point", ls, lz],
        ["logits_quantized"], name="fc_bias_QLinearAdd", domain="com.microsoft"))
    nodes.append(helper.make_node("DequantizeLinear", ["logits_quantized", ls, lz],
                                  ["logits"], name="logits_DequantizeLinear"))

    graph = helper.make_graph(
        nodes, "fashion_mnist_int8",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits)
    m = helper.make_model(graph, producer_name="furiosa-runtime models/make_fashion_mnist_int8.py",
                          producer_version="1",
                          opset_imports=[helper.make_opsetid("", 13),
                                         helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 7
    m.doc_string = ("Fashion-MNIST residual CNN, static post-training quantization, "
                    "QOperator format (uint8 activations, per-channel int8 weights)")
    return m, qp


# --------------------------------------------------------------------------
def main():
    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.use_deterministic_algorithms(True)

    x_train, y_train = load_split("train")
    x_test, y_test = load_split("t10k")
    print("train %s test %s" % (x_train.shape, x_test.shape))

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    steps_per_epoch = (len(x_train) + BATCH - 1) // BATCH
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, epochs=EPOCHS,
                                                steps_per_epoch=steps_per_epoch)
    gen = torch.Generator().manual_seed(SEED)
    xt = torch.from_numpy(x_train)
    yt = torch.from_numpy(y_train)
    t0 = time.time()
    for epoch in range(EPOCHS):
        model.train()
        perm = torch.randperm(len(xt), generator=gen)
        tot, n = 0.0, 0
        for i in range(0, len(xt), BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            loss = F.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item() * len(idx)
            n += len(idx)
        model.eval()
        acc = (torch_predict(model, x_test).argmax(1) == y_test).mean()
        print("epoch %d  loss %.4f  test acc %.4f  (%.0f s)" %
              (epoch + 1, tot / n, acc, time.time() - t0), flush=True)
    train_time = time.time() - t0
    model.eval()

    fp32_logits = torch_predict(model, x_test)
    fp32_pred = fp32_logits.argmax(1)
    fp32_acc = float((fp32_pred == y_test).mean())
    print("fp32 accuracy (10000 test images): %.4f" % fp32_acc)

    # ---- export fp32 ONNX
    torch.onnx.export(model, torch.from_numpy(x_test[:1]), FP32_ONNX,
                      input_names=["input"], output_names=["logits"],
                      opset_version=13, do_constant_folding=True)
    m32 = onnx.load(FP32_ONNX)
    onnx.checker.check_model(m32, full_check=True)
    print("fp32 ONNX ops:", [n.op_type for n in m32.graph.node])
    chk = run_fp32_onnx(m32, x_test[:100])
    d = np.abs(chk - fp32_logits[:100]).max()
    print("fp32 ONNX vs torch, first 100 images: max |logit diff| %.2e" % d)
    assert d < 1e-3

    # ---- calibration: min/max over the first CALIB_IMAGES training images
    ranges = {}
    with torch.no_grad():
        for i in range(0, CALIB_IMAGES, 500):
            tr = {}
            model(torch.from_numpy(x_train[i:i + 500]), trace=tr)
            for k, v in tr.items():
                lo, hi = float(v.min()), float(v.max())
                if k in ranges:
                    lo, hi = min(lo, ranges[k][0]), max(hi, ranges[k][1])
                ranges[k] = (lo, hi)
    for k, (lo, hi) in ranges.items():
        print("calib %-7s min %9.4f max %9.4f" % (k, lo, hi))

    m8, qp = build_int8_model(model, ranges)
    onnx.save(m8, INT8_ONNX)
    m8 = onnx.load(INT8_ONNX)
    try:
        onnx.checker.check_model(m8, full_check=False)
        print("onnx.checker.check_model(int8, full_check=False): OK")
    except Exception as e:   # report, do not hide
        print("onnx.checker.check_model(int8) complained: %s" % e)
    print("int8 ONNX ops:", [(n.domain + "." if n.domain else "") + n.op_type
                             for n in m8.graph.node])
    print("input QuantizeLinear: scale %r (float32 %s) zero_point %d" %
          (float(qp["input"][0]), np.float32(qp["input"][0]).tobytes().hex(),
           int(qp["input"][1])))

    # ---- int8 reference over the test set
    t1 = time.time()
    int8_logits = run_int8_batched(m8, x_test)
    assert int8_logits.dtype == f32
    int8_pred = int8_logits.argmax(1)   # first maximum on ties
    print("int8 reference over 10000 images: %.1f s" % (time.time() - t1))
    # batch-1 spot check: same results as the batched run
    for i in range(4):
        one = run_int8_reference(m8, x_test[i:i + 1])
        assert np.array_equal(one[0], int8_logits[i])
    int8_correct = int((int8_pred == y_test).sum())
    first1000 = int((int8_pred[:1000] == y_test[:1000]).sum())
    int8_acc = int8_correct / 10000.0
    agree = float((int8_pred == fp32_pred).mean())
    print("int8 accuracy (10000 test images): %.4f  (%d correct)" % (int8_acc, int8_correct))
    print("int8 first 1000 test images: %d / 1000 correct" % first1000)
    print("int8 vs fp32: accuracy drop %.2f points, top-1 agreement %.4f"
          % (100 * (fp32_acc - int8_acc), agree))
    assert fp32_acc - int8_acc <= 0.015, "int8 drop too large"

    # ---- outputs
    os.makedirs(IMAGES_DIR, exist_ok=True)
    with open(os.path.join(IMAGES_DIR, "labels.txt"), "w") as fl, \
            open(os.path.join(IMAGES_DIR, "expected_int8.txt"), "w") as fe:
        for i in range(8):
            name = "fashion_%d.npy" % i
            arr = np.ascontiguousarray(x_test[i:i + 1], dtype="<f4")
            np.save(os.path.join(IMAGES_DIR, name), arr)
            fl.write("%s %d %s\n" % (name, y_test[i], CLASS_NAMES[y_test[i]]))
            fe.write("%s %d\n" % (name, int8_pred[i]))
    with open(os.path.join(HERE, "first_1000_int8_predictions.txt"), "w") as f:
        f.write("".join("%d\n" % p for p in int8_pred[:1000]))
    with open(os.path.join(HERE, "accuracy_int8.json"), "w") as f:
        json.dump({"test_images": 10000, "int8_correct": int8_correct,
                   "int8_accuracy": int8_acc, "first_1000_int8_correct": first1000,
                   "fp32_accuracy": fp32_acc}, f, indent=2)
        f.write("\n")
    print("first 8 test labels:      ", list(y_test[:8]))
    print("first 8 int8 predictions: ", list(int8_pred[:8]))
    print("sizes: fp32 %d bytes, int8 %d bytes" %
          (os.path.getsize(FP32_ONNX), os.path.getsize(INT8_ONNX)))
    print("training %.0f s, total %.0f s" % (train_time, time.time() - T_START))


if __name__ == "__main__":
    main()
