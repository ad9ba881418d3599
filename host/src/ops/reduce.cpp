// The host operator library (host/cpu_ops.h): ReduceMean.
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// ReduceMean
// ---------------------------------------------------------------------------------------------

std::string check_reduce_mean(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kF32).in(1, "axes", kIdx, false).reason;
}

// Reduced dims (flags per input dim) and the output shape; empty flags = identity.
struct Reduction {
  std::vector<bool> reduced;
  Shape out;
};
Reduction reduction(const Ctx& c, const Shape& x) {
  std::vector<std::int64_t> axes;
  if (c.has(1)) {
    axes = int_values(c.constant(1, "axes"));
  } else {
    axes = c.node.attr_ints("axes", {});
  }
  const bool keep = c.node.attr_int("keepdims", 1) != 0;
  const std::int64_t rank = static_cast<std::int64_t>(x.size());
  Reduction r;
  r.reduced.assign(x.size(), axes.empty());
  if (axes.empty() && c.node.attr_int("noop_with_empty_axes", 0) != 0) {
    r.reduced.assign(x.size(), false);
    r.out = x;
    return r;
  }
  for (auto a : axes) {
    const auto ax = static_cast<std::size_t>(c.axis(a, rank, "axis"));
    if (r.reduced[ax]) c.bad(fmt::format("axis {} is listed twice", a));
    r.reduced[ax] = true;
  }
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (!r.reduced[d]) {
      r.out.push_back(x[d]);
    } else if (keep) {
      r.out.push_back(1);
    }
  }
  return r;
}

OutInfos infer_reduce_mean(const Ctx& c) {
  return {{DType::Float32, reduction(c, c.shape(0, "data")).out}};
}
std::vector<Tensor> run_reduce_mean(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const Shape& xs = tx.shape();
  const Reduction r = reduction(c, xs);
  Tensor ty(o[0].first, o[0].second);
  // Output strides over the input's dims (keepdims layout), 0 along reduced dims.
  Shape kept(xs.size());
  std::int64_t count = 1;
  for (std::size_t d = 0; d < xs.size(); ++d) {
    kept[d] = r.reduced[d] ? 1 : xs[d];
    if (r.reduced[d]) count *= xs[d];
  }
  std::vector<std::int64_t> st = broadcast_strides(kept, xs.size());
  for (std::size_t d = 0; d < xs.size(); ++d) {
    if (r.reduced[d]) st[d] = 0;
  }
  std::vector<double> acc(static_cast<std::size_t>(ty.elements()), 0.0);
  const float* x = tx.as<float>().data();
  // Reduced dims all after the kept ones (global average pooling over H, W): each output is the
  // sum of one contiguous block, added in the same order as the general walk below (so the
  // same double result), without its per-element index arithmetic.
  std::size_t first_reduced = xs.size();
  while (first_reduced > 0 && r.reduced[first_reduced - 1]) --first_reduced;
  bool trailing = true;
  for (std::size_t d = 0; d < first_reduced; ++d) trailing = trailing && !r.reduced[d];
  if (trailing) {
    for (std::size_t i = 0; i < acc.size(); ++i) {
      const float* block = x + static_cast<std::int64_t>(i) * count;
      double sum = 0.0;
      for (std::int64_t j = 0; j < count; ++j) sum += block[j];
      acc[i] = sum;
    }
  } else {
    strided_rows<1>(xs, {st}, {0},
                    [&](std::int64_t o2, std::array<std::int64_t, 1> off, std::int64_t len,
                        std::array<std::int64_t, 1> inner) {
                      for (std::int64_t j = 0; j < len; ++j) {
                        acc[static_cast<std::size_t>(off[0] + j * inner[0])] += x[o2 + j];
                      }
                    });
  }
  auto y = ty.as<float>();
  for (std::size_t i = 0; i < acc.size(); ++i) {
    y[i] = static_cast<float>(acc[i] / static_cast<double>(count));
  }
  return {std::move(ty)};
}

}  // namespace

OpRows reduce_ops() {
  OpRows rows;
  rows.onnx.push_back({"ReduceMean", 1, 2, 1, check_reduce_mean, infer_reduce_mean, run_reduce_mean});
  return rows;
}

}  // namespace furiosa::host::detail
