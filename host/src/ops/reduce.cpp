// The host operator library (host/cpu_ops.h): ReduceMean, ReduceMax, furiosa::QuantizedMean
// (TFLite's integer MEAN and rescaling SUM), and the selections along one axis: ArgMax, ArgMin,
// TopK.
#include "ops_common.h"

#include "furiosa/host/fixed_point.h"

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

// Where each input element accumulates: output strides over the input's dims (keepdims
// layout), 0 along reduced dims; and how many input elements each output sums.
struct ReductionWalk {
  std::vector<std::int64_t> out_strides;
  std::int64_t count = 1;
};
ReductionWalk reduction_walk(const Reduction& r, const Shape& xs) {
  ReductionWalk w;
  Shape kept(xs.size());
  for (std::size_t d = 0; d < xs.size(); ++d) {
    kept[d] = r.reduced[d] ? 1 : xs[d];
    if (r.reduced[d]) w.count *= xs[d];
  }
  w.out_strides = broadcast_strides(kept, xs.size());
  for (std::size_t d = 0; d < xs.size(); ++d) {
    if (r.reduced[d]) w.out_strides[d] = 0;
  }
  return w;
}
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
  Tensor ty = c.output(o, 0);
  const ReductionWalk walk = reduction_walk(r, xs);  // (no structured binding: lambdas below read these)
  const std::vector<std::int64_t>& st = walk.out_strides;
  const std::int64_t count = walk.count;
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
  return single_output(std::move(ty));
}

// ---------------------------------------------------------------------------------------------
// furiosa::QuantizedMean: TFLite's quantized MEAN (reference_ops::QuantizedMeanOrSum)
// ---------------------------------------------------------------------------------------------

std::string check_qmean(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "data", kQ8);
  const std::int64_t shift = n.attr_int("fixed_point_shift", 0);
  ch.require(n.attributes.count("fixed_point_multiplier") > 0, "attribute 'fixed_point_multiplier' is required");
  ch.require(shift >= -31 && shift <= 30, fmt::format("fixed_point_shift {} is outside [-31, 30]", shift));
  return ch.reason;
}
OutInfos infer_qmean(const Ctx& c) {
  return {{c.dtype(0, "data"), reduction(c, c.shape(0, "data")).out}};
}

std::vector<Tensor> run_qmean(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const Shape& xs = tx.shape();
  const Reduction r = reduction(c, xs);
  Tensor ty = c.output(o, 0);
  const ReductionWalk walk = reduction_walk(r, xs);  // (no structured binding: lambdas below read these)
  const std::vector<std::int64_t>& st = walk.out_strides;
  const std::int64_t count = walk.count;
  const auto multiplier = static_cast<std::int32_t>(c.node.attr_int("fixed_point_multiplier", 0));
  const auto shift = static_cast<std::int32_t>(c.node.attr_int("fixed_point_shift", 0));
  const auto x_zp = static_cast<std::int32_t>(c.node.attr_int("x_zero_point", 0));
  const auto y_zp = static_cast<std::int32_t>(c.node.attr_int("y_zero_point", 0));
  visit_dtype(tx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>) {
      // TFLite sums into int32 (temp_sum); so do we (wrapping is impossible below 2^23 elements).
      std::vector<std::int32_t> acc(static_cast<std::size_t>(ty.elements()), 0);
      const T* x = tx.as<T>().data();
      strided_rows<1>(xs, {st}, {0},
                      [&](std::int64_t o2, std::array<std::int64_t, 1> off, std::int64_t len,
                          std::array<std::int64_t, 1> inner) {
                        for (std::int64_t j = 0; j < len; ++j) {
                          acc[static_cast<std::size_t>(off[0] + j * inner[0])] += x[o2 + j];
                        }
                      });
      constexpr std::int32_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
      auto y = ty.as<T>();
      for (std::size_t i = 0; i < acc.size(); ++i) {
        const auto shifted = static_cast<std::int32_t>(acc[i] - static_cast<std::int64_t>(x_zp) * count);
        const std::int32_t v = multiply_by_quantized_multiplier(shifted, {multiplier, shift}) + y_zp;
        y[i] = static_cast<T>(std::clamp(v, lo, hi));
      }
    }
  });
  return single_output(std::move(ty));
}

// ---------------------------------------------------------------------------------------------
// ReduceMax: the largest stored value (float32, uint8, int8; TFLite's REDUCE_MAX compares the
// stored values: its input and output share their quantization)
// ---------------------------------------------------------------------------------------------

std::string check_reduce_max(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kF32 | kQ8).in(1, "axes", kIdx, false).reason;
}
OutInfos infer_reduce_max(const Ctx& c) {
  return {{c.dtype(0, "data"), reduction(c, c.shape(0, "data")).out}};
}
std::vector<Tensor> run_reduce_max(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const Shape& xs = tx.shape();
  const Reduction r = reduction(c, xs);
  Tensor ty = c.output(o, 0);
  const ReductionWalk walk = reduction_walk(r, xs);
  const std::vector<std::int64_t>& st = walk.out_strides;
  visit_dtype(tx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::uint8_t> ||
                  std::is_same_v<T, std::int8_t>) {
      auto y = ty.as<T>();
      // From -inf for float32 (ONNX: an empty reduction is -inf; TFLite starts from the lowest
      // finite value, which differs only when every input is -inf), the type's minimum for 8-bit.
      const T start = std::is_same_v<T, float> ? -std::numeric_limits<T>::infinity()
                                               : std::numeric_limits<T>::lowest();
      std::fill(y.begin(), y.end(), start);
      const T* x = tx.as<T>().data();
      strided_rows<1>(xs, {st}, {0},
                      [&](std::int64_t o2, std::array<std::int64_t, 1> off, std::int64_t len,
                          std::array<std::int64_t, 1> inner) {
                        for (std::int64_t j = 0; j < len; ++j) {
                          T& m = y[static_cast<std::size_t>(off[0] + j * inner[0])];
                          m = x[o2 + j] > m ? x[o2 + j]
                                            : m;  // TFLite's reducer: (in > current) ? in : current
                        }
                      });
    }
  });
  return single_output(std::move(ty));
}

// ---------------------------------------------------------------------------------------------
// ArgMax, ArgMin, TopK: selections along one axis
// ---------------------------------------------------------------------------------------------

// A tensor seen as [outer, n, inner] around `axis`.
struct AxisView {
  std::size_t axis = 0;
  std::int64_t outer = 1, n = 1, inner = 1;
};
AxisView axis_view(const Ctx& c, const Shape& x, std::int64_t axis_attr) {
  AxisView v;
  v.axis = static_cast<std::size_t>(c.axis(axis_attr, static_cast<std::int64_t>(x.size()), "axis"));
  for (std::size_t d = 0; d < v.axis; ++d) v.outer *= x[d];
  v.n = x[v.axis];
  for (std::size_t d = v.axis + 1; d < x.size(); ++d) v.inner *= x[d];
  return v;
}

// Total orders with NaN as the greatest value (numpy's sort order).
template <class T>
bool nan_greater(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

std::string check_arg(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).reason;
}
OutInfos infer_arg(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  if (x.empty()) c.bad("data must have rank >= 1");
  const AxisView v = axis_view(c, x, c.node.attr_int("axis", 0));
  if (v.n == 0) c.bad(fmt::format("axis {} has size 0: no element to select", v.axis));
  Shape out = x;
  if (c.node.attr_int("keepdims", 1) != 0) {
    out[v.axis] = 1;
  } else {
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(v.axis));
  }
  return {{DType::Int64, out}};
}
// ArgMax (max = true) / ArgMin: the first index of the extreme value, or the last with
// select_last_index; a NaN wins over every number (numpy's argmax/argmin), the first NaN (or the
// last) when there are several.
template <bool max>
std::vector<Tensor> run_arg(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const AxisView v = axis_view(c, x.shape(), c.node.attr_int("axis", 0));
  const bool last = c.node.attr_int("select_last_index", 0) != 0;
  Tensor y = c.output(o, 0);
  auto out = y.as<std::int64_t>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.as<T>().data();
    auto better = [](T a, T b) {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && !std::isnan(b);
      }
      return max ? a > b : a < b;
    };
    for (std::int64_t a = 0; a < v.outer; ++a) {
      for (std::int64_t i = 0; i < v.inner; ++i) {
        const T* s = p + a * v.n * v.inner + i;
        std::int64_t best = 0;
        for (std::int64_t k = 1; k < v.n; ++k) {
          const T cand = s[k * v.inner], cur = s[best * v.inner];
          if (better(cand, cur) || (last && !better(cur, cand))) best = k;
        }
        out[static_cast<std::size_t>(a * v.inner + i)] = best;
      }
    }
  });
  return single_output(std::move(y));
}

std::string check_topk(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "X", kAll).in(1, "K", kIdx, false).reason;
}
// k from input K (opset >= 10) or attribute 'k' (opset 1).
std::int64_t topk_k(const Ctx& c, std::int64_t dim) {
  std::int64_t k = 0;
  if (c.has(1)) {
    const auto kv = int_values(c.constant(1, "K"));
    if (kv.size() != 1) c.bad(fmt::format("K must hold one value, holds {}", kv.size()));
    k = kv[0];
  } else if (c.node.attributes.count("k")) {
    k = c.node.attr_int("k", 0);
  } else {
    c.bad("K is required (input 1 since opset 10, attribute 'k' before)");
  }
  if (k < 0 || k > dim) c.bad(fmt::format("k = {} is out of range for an axis of size {}", k, dim));
  return k;
}
OutInfos infer_topk(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  if (x.empty()) c.bad("X must have rank >= 1");
  const AxisView v = axis_view(c, x, c.node.attr_int("axis", -1));
  Shape out = x;
  out[v.axis] = topk_k(c, v.n);
  return {{c.dtype(0, "X"), out}, {DType::Int64, out}};
}
// Values and int64 indices of the k largest (largest=1) or smallest elements along the axis,
// always in sorted order (sorted=0 leaves the order free); equal values by lower index first;
// NaN counts as the greatest value.
std::vector<Tensor> run_topk(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const AxisView v = axis_view(c, x.shape(), c.node.attr_int("axis", -1));
  const std::int64_t k = topk_k(c, v.n);
  const bool largest = c.node.attr_int("largest", 1) != 0;
  Tensor values = c.output(o, 0), indices = c.output(o, 1);
  auto iv = indices.as<std::int64_t>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.as<T>().data();
    auto vv = values.as<T>();
    std::vector<std::int64_t> order(static_cast<std::size_t>(v.n));
    for (std::int64_t a = 0; a < v.outer; ++a) {
      for (std::int64_t i = 0; i < v.inner; ++i) {
        const T* s = p + a * v.n * v.inner + i;
        for (std::int64_t j = 0; j < v.n; ++j) order[static_cast<std::size_t>(j)] = j;
        auto before = [&](std::int64_t l, std::int64_t r) {
          const T a2 = s[l * v.inner], b2 = s[r * v.inner];
          if (largest ? nan_greater(a2, b2) : nan_greater(b2, a2)) return true;
          if (largest ? nan_greater(b2, a2) : nan_greater(a2, b2)) return false;
          return l < r;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (std::int64_t j = 0; j < k; ++j) {
          const auto at = static_cast<std::size_t>((a * k + j) * v.inner + i);
          vv[at] = s[order[static_cast<std::size_t>(j)] * v.inner];
          iv[at] = order[static_cast<std::size_t>(j)];
        }
      }
    }
  });
  std::vector<Tensor> out;
  out.push_back(std::move(values));
  out.push_back(std::move(indices));
  return out;
}

}  // namespace

OpRows reduce_ops() {
  OpRows rows;
  rows.onnx.push_back({"ReduceMean", 1, 2, 1, check_reduce_mean, infer_reduce_mean, run_reduce_mean});
  rows.onnx.push_back({"ReduceMax", 1, 2, 1, check_reduce_max, infer_reduce_max, run_reduce_max});
  rows.onnx.push_back({"ArgMax", 1, 1, 1, check_arg, infer_arg, run_arg<true>});
  rows.onnx.push_back({"ArgMin", 1, 1, 1, check_arg, infer_arg, run_arg<false>});
  rows.onnx.push_back({"TopK", 1, 2, 2, check_topk, infer_topk, run_topk});
  rows.furiosa.push_back({"QuantizedMean", 1, 2, 1, check_qmean, infer_qmean, run_qmean});
  return rows;
}

}  // namespace furiosa::host::detail
