// The host operator library (host/cpu_ops.h): MatMul, Gemm, MatMulInteger.
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// MatMul, Gemm, MatMulInteger
// ---------------------------------------------------------------------------------------------

// C[M,N] += A[M,K] * B[K,N] (row-major).
template <class T>
void matmul_acc(const T* a, const T* b, T* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  for (std::int64_t i = 0; i < m; ++i) {
    T* crow = c + i * n;
    for (std::int64_t p = 0; p < k; ++p) {
      const T av = a[i * k + p];
      const T* brow = b + p * n;
      for (std::int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
}

// numpy matmul shape logic.
struct MatMulGeom {
  Shape a, b;      // operands with 1-D promoted to 2-D
  Shape batch;     // broadcast batch dims
  std::int64_t m = 0, k = 0, n = 0;
  Shape out;
};

MatMulGeom matmul_geom(const Ctx& c, const Shape& sa, const Shape& sb) {
  if (sa.empty() || sb.empty()) c.bad("MatMul operands must have rank >= 1");
  MatMulGeom g;
  g.a = sa.size() == 1 ? Shape{1, sa[0]} : sa;
  g.b = sb.size() == 1 ? Shape{sb[0], 1} : sb;
  g.m = g.a[g.a.size() - 2];
  g.k = g.a[g.a.size() - 1];
  g.n = g.b[g.b.size() - 1];
  if (g.b[g.b.size() - 2] != g.k) {
    c.bad(fmt::format("inner dims do not match: {} x {}", shape_to_string(sa), shape_to_string(sb)));
  }
  g.batch = broadcast_shape(c, Shape(g.a.begin(), g.a.end() - 2), Shape(g.b.begin(), g.b.end() - 2));
  g.out = g.batch;
  if (sa.size() > 1) g.out.push_back(g.m);
  if (sb.size() > 1) g.out.push_back(g.n);
  return g;
}

// Batched matmul of dense T arrays shaped g.a and g.b into y (zeroed, shape g.out).
template <class T>
void batched_matmul(const MatMulGeom& g, const T* a, const T* b, T* y) {
  const Shape ba(g.a.begin(), g.a.end() - 2), bb(g.b.begin(), g.b.end() - 2);
  std::array<std::vector<std::int64_t>, 2> st{broadcast_strides(ba, g.batch.size()),
                                              broadcast_strides(bb, g.batch.size())};
  const std::int64_t sa = g.m * g.k, sb = g.k * g.n, sy = g.m * g.n;
  strided_rows<2>(g.batch, st, {0, 0},
                  [&](std::int64_t o, std::array<std::int64_t, 2> off, std::int64_t len,
                      std::array<std::int64_t, 2> inner) {
                    for (std::int64_t j = 0; j < len; ++j) {
                      matmul_acc(a + (off[0] + j * inner[0]) * sa, b + (off[1] + j * inner[1]) * sb,
                                 y + (o + j) * sy, g.m, g.k, g.n);
                    }
                  });
}

std::string check_matmul(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "A", kF32).in(1, "B", kF32).reason;
}
OutInfos infer_matmul(const Ctx& c) {
  return {{DType::Float32, matmul_geom(c, c.shape(0, "A"), c.shape(1, "B")).out}};
}
std::vector<Tensor> run_matmul(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output(o, 0);
  const auto g = matmul_geom(c, c.t(0).shape(), c.t(1).shape());
  batched_matmul<float>(g, c.t(0).as<float>().data(), c.t(1).as<float>().data(), y.as<float>().data());
  return single_output(std::move(y));
}

std::string check_gemm(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "A", kF32).in(1, "B", kF32).in(2, "C", kF32, false).reason;
}

struct GemmGeom {
  std::int64_t m, k, n;
};
GemmGeom gemm_geom(const Ctx& c) {
  const Shape& a = c.shape(0, "A");
  const Shape& b = c.shape(1, "B");
  if (a.size() != 2 || b.size() != 2) {
    c.bad(fmt::format("A and B must be 2-D, got {} and {}", shape_to_string(a), shape_to_string(b)));
  }
  const bool ta = c.node.attr_int("transA", 0) != 0, tb = c.node.attr_int("transB", 0) != 0;
  GemmGeom g{ta ? a[1] : a[0], ta ? a[0] : a[1], tb ? b[0] : b[1]};
  if ((tb ? b[1] : b[0]) != g.k) {
    c.bad(fmt::format("inner dims do not match: A {} (transA={}) and B {} (transB={})",
                      shape_to_string(a), ta, shape_to_string(b), tb));
  }
  if (c.has(2)) {
    const Shape& cs = *c.in[2].shape;
    const Shape mn{g.m, g.n};
    bool ok = cs.size() <= 2;
    for (std::size_t k = 0; ok && k < cs.size(); ++k) {
      const std::int64_t d = cs[cs.size() - 1 - k];
      ok = d == 1 || d == mn[1 - k];
    }
    if (!ok) c.bad(fmt::format("C {} does not broadcast to [{}, {}]", shape_to_string(cs), g.m, g.n));
  }
  return g;
}
OutInfos infer_gemm(const Ctx& c) {
  const auto g = gemm_geom(c);
  return {{DType::Float32, {g.m, g.n}}};
}

// Dense transpose of a 2-D float matrix [r, c] -> [c, r].
std::vector<float> transpose2d(const float* x, std::int64_t rows, std::int64_t cols) {
  std::vector<float> t(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
  }
  return t;
}

std::vector<Tensor> run_gemm(const Ctx& c, const OutInfos& o) {
  const auto g = gemm_geom(c);
  Tensor y = c.output(o, 0);
  const float alpha = float_attr(c.node, "alpha", 1.0f);
  const float beta = float_attr(c.node, "beta", 1.0f);
  const float* a = c.t(0).as<float>().data();
  const float* b = c.t(1).as<float>().data();
  std::vector<float> at, bt;
  if (c.node.attr_int("transA", 0) != 0) {
    at = transpose2d(a, g.k, g.m);
    a = at.data();
  }
  if (c.node.attr_int("transB", 0) != 0) {
    bt = transpose2d(b, g.n, g.k);
    b = bt.data();
  }
  float* yp = y.as<float>().data();
  matmul_acc(a, b, yp, g.m, g.k, g.n);
  const std::int64_t total = g.m * g.n;
  if (alpha != 1.0f) {
    for (std::int64_t i = 0; i < total; ++i) yp[i] *= alpha;
  }
  if (c.has(2) && beta != 0.0f) {
    const Tensor& tc = c.t(2);
    const Shape mn{g.m, g.n};
    const auto st = broadcast_strides(tc.shape(), 2);
    const float* cp = tc.as<float>().data();
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) yp[i * g.n + j] += beta * cp[i * st[0] + j * st[1]];
    }
  }
  return single_output(std::move(y));
}


std::string check_matmul_integer(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}
      .in(0, "A", kQ8)
      .in(1, "B", kQ8)
      .in(2, "a_zero_point", kQ8, false)
      .in(3, "b_zero_point", kQ8, false)
      .same(0, 2)
      .same(1, 3)
      .reason;
}

// Zero-point shape as a broadcast operand: a 1-D per-row zero point of A becomes [M, 1].
Shape integer_zp_shape(const Ctx& c, std::size_t i, bool rows, std::int64_t count) {
  const Shape& z = *c.in[i].shape;
  if (element_count(z) == 1) return Shape{};
  if (z.size() == 1) {
    if (z[0] != count) {
      c.bad(fmt::format("1-D input {} must have {} elements (one per {} ), has {}", i, count,
                        rows ? "row of A" : "column of B", z[0]));
    }
    return rows ? Shape{count, 1} : Shape{count};
  }
  const Shape& x = *c.in[i - 2].shape;
  if (z.size() != x.size() || z[z.size() - (rows ? 1 : 2)] != 1) {
    c.bad(fmt::format("input {} {} must be a scalar, 1-D, or shaped like the operand {} with a {} "
                      "dim of 1", i, shape_to_string(z), shape_to_string(x), rows ? "last" : "second-last"));
  }
  return z;
}

OutInfos infer_matmul_integer(const Ctx& c) {
  const auto g = matmul_geom(c, c.shape(0, "A"), c.shape(1, "B"));
  if (c.has(2)) integer_zp_shape(c, 2, true, g.m);
  if (c.has(3)) integer_zp_shape(c, 3, false, g.n);
  return {{DType::Int32, g.out}};
}

std::vector<Tensor> run_matmul_integer(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output(o, 0);
  const auto g = matmul_geom(c, c.t(0).shape(), c.t(1).shape());
  const auto a = minus_zero_point(c, c.t(0), c.opt(2), c.has(2) ? integer_zp_shape(c, 2, true, g.m) : Shape{},
                                  "a_zero_point");
  const auto b = minus_zero_point(c, c.t(1), c.opt(3), c.has(3) ? integer_zp_shape(c, 3, false, g.n) : Shape{},
                                  "b_zero_point");
  batched_matmul<std::int32_t>(g, a.data(), b.data(), y.as<std::int32_t>().data());
  return single_output(std::move(y));
}

}  // namespace

OpRows matmul_ops() {
  OpRows rows;
  rows.onnx.push_back({"MatMul", 2, 2, 1, check_matmul, infer_matmul, run_matmul});
  rows.onnx.push_back({"Gemm", 2, 3, 1, check_gemm, infer_gemm, run_gemm});
  rows.onnx.push_back({"MatMulInteger", 2, 4, 1, check_matmul_integer, infer_matmul_integer, run_matmul_integer});
  return rows;
}

}  // namespace furiosa::host::detail
