// The host operator library (host/cpu_ops.h): Softmax and LogSoftmax.
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Softmax, LogSoftmax
// ---------------------------------------------------------------------------------------------

OutInfos infer_softmax(const Ctx& c) {
  const Shape& x = c.shape(0, "input");
  c.axis(c.node.attr_int("axis", -1), static_cast<std::int64_t>(x.size()), "axis");
  return {{DType::Float32, x}};
}

template <bool log>
std::vector<Tensor> run_softmax(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  Tensor ty(o[0].first, o[0].second);
  const Shape& s = tx.shape();
  const std::int64_t rank = static_cast<std::int64_t>(s.size());
  if (rank == 0) {  // a scalar: softmax 1, log-softmax 0
    ty.as<float>()[0] = std::isnan(tx.as<float>()[0]) ? tx.as<float>()[0] : (log ? 0.0f : 1.0f);
    return {std::move(ty)};
  }
  const std::int64_t axis = c.axis(c.node.attr_int("axis", -1), rank, "axis");
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= s[d];
  const std::int64_t n = s[axis];
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  for (std::int64_t a = 0; a < outer; ++a) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t base = a * n * inner + i;
      float mx = -std::numeric_limits<float>::infinity();
      for (std::int64_t k = 0; k < n; ++k) mx = std::max(mx, x[base + k * inner]);
      double sum = 0;
      for (std::int64_t k = 0; k < n; ++k) {
        const float e = std::exp(x[base + k * inner] - mx);
        if constexpr (!log) y[base + k * inner] = e;
        sum += e;
      }
      if constexpr (log) {
        const float ls = static_cast<float>(std::log(sum));
        for (std::int64_t k = 0; k < n; ++k) y[base + k * inner] = x[base + k * inner] - mx - ls;
      } else {
        const float inv = static_cast<float>(1.0 / sum);
        for (std::int64_t k = 0; k < n; ++k) y[base + k * inner] *= inv;
      }
    }
  }
  return {std::move(ty)};
}

}  // namespace

OpRows softmax_ops() {
  OpRows rows;
  rows.onnx.push_back({"Softmax", 1, 1, 1, check_float_unary, infer_softmax, run_softmax<false>});
  rows.onnx.push_back({"LogSoftmax", 1, 1, 1, check_float_unary, infer_softmax, run_softmax<true>});
  return rows;
}

}  // namespace furiosa::host::detail
