// The host operator library (host/cpu_ops.h): Softmax, LogSoftmax and furiosa::QLinearSoftmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "../float_math.h"
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
  Tensor ty = c.output_for_overwrite(o, 0);
  const Shape& s = tx.shape();
  const std::int64_t rank = static_cast<std::int64_t>(s.size());
  if (rank == 0) {  // a scalar: softmax 1, log-softmax 0
    ty.as<float>()[0] = std::isnan(tx.as<float>()[0]) ? tx.as<float>()[0] : (log ? 0.0f : 1.0f);
    return single_output(std::move(ty));
  }
  const std::int64_t axis = c.axis(c.node.attr_int("axis", -1), rank, "axis");
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= s[d];
  const std::int64_t n = s[axis];
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  // Per outer index, n rows of `inner` contiguous values (float_math.h: softmax_f32, cloned
  // for AVX-512 and AVX2 with the same operations in the same order).
  std::vector<float> mx(static_cast<std::size_t>(inner));
  std::vector<double> sum(static_cast<std::size_t>(inner));
  std::vector<float> norm(static_cast<std::size_t>(inner));
  for (std::int64_t a = 0; a < outer; ++a) {
    softmax_f32(x + a * n * inner, y + a * n * inner, n, inner, log, mx.data(), sum.data(),
                norm.data());
  }
  return single_output(std::move(ty));
}

// ---------------------------------------------------------------------------------------------
// furiosa::QLinearSoftmax: com.microsoft QLinearSoftmax as ONNX Runtime 1.30 computes it
// (contrib_ops/cpu/quantization/qlinear_softmax.cc: its lookup table and QlinearSoftmaxCPU).
// Inputs X (uint8 or int8), x_scale, x_zero_point, y_scale, y_zero_point (scalars); attributes
// axis and opset (13 and later: softmax along axis; before: over the dims from axis on). Per row
// of D values along the reduced dims:
//  - e = table[x - max(row) + 255], table[i] = float(exp((i - 255 + b / x_scale) * x_scale)) in
//    double, b = log(FLT_MAX / D) - 5 (the zero point cancels);
//  - sum = e[0] + e[1] + ... in float32, in order;
//  - q = nearbyint(e * floor(1 / y_scale) / sum) in float32, then + y_zero_point: uint8 keeps
//    min(q, 255); int8 keeps the low byte of q (so 128 becomes -128) and turns anything above
//    255 into -1, as the kernel casts.
// Attribute furiosa_qdq_s8_to_u8 (int8 QDQ groups whose pairs ONNX Runtime moved to uint8): the
// codes and zero points are shifted by 128 and the uint8 rule applies.
// ---------------------------------------------------------------------------------------------

std::string check_qlinear_softmax(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}
      .in(0, "X", kQ8)
      .in(1, "x_scale", kF32)
      .in(2, "x_zero_point", kQ8, false)
      .in(3, "y_scale", kF32)
      .in(4, "y_zero_point", kQ8, false)
      .same(0, 2)
      .same(0, 4)
      .reason;
}

OutInfos infer_qlinear_softmax(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  if (x.empty()) c.bad("X must have rank 1 or more");
  c.axis(c.node.attr_int("axis", -1), static_cast<std::int64_t>(x.size()), "axis");
  return {{c.dtype(0, "X"), x}};
}

float scalar_input(const Ctx& c, std::size_t i, const char* what) {
  const Tensor* t = c.opt(i);
  if (!t) return 0.0f;
  if (t->elements() != 1)
    c.bad(fmt::format("{} must be a scalar, has {} values", what, t->elements()));
  switch (t->dtype()) {
    case DType::Float32: return t->as<float>()[0];
    case DType::UInt8: return static_cast<float>(t->as<std::uint8_t>()[0]);
    case DType::Int8: return static_cast<float>(t->as<std::int8_t>()[0]);
    default: c.bad(fmt::format("{} has dtype {}", what, dtype_name(t->dtype())));
  }
}

std::vector<Tensor> run_qlinear_softmax(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const bool to_u8 = c.node.attr_int("furiosa_qdq_s8_to_u8", 0) != 0;
  const bool is_int8 = tx.dtype() == DType::Int8 && !to_u8;
  const float x_scale = scalar_input(c, 1, "x_scale");
  const float y_scale = scalar_input(c, 3, "y_scale");
  const float shift = tx.dtype() == DType::Int8 && to_u8 ? 128.0f : 0.0f;
  const float y_zp = scalar_input(c, 4, "y_zero_point") + shift;
  if (!(x_scale > 0.0f) || !(y_scale > 0.0f) || !std::isfinite(x_scale) ||
      !std::isfinite(y_scale)) {
    c.bad(fmt::format("x_scale {} and y_scale {} must be positive and finite", x_scale, y_scale));
  }
  const Shape& s = tx.shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  const std::int64_t axis = c.axis(c.node.attr_int("axis", -1), rank, "axis");
  const bool per_axis = c.node.attr_int("opset", 13) >= 13;
  std::int64_t outer = 1, inner = 1, n = 1;
  for (std::int64_t k = 0; k < axis; ++k) outer *= s[k];
  if (per_axis) {
    n = s[axis];
    for (std::int64_t k = axis + 1; k < rank; ++k) inner *= s[k];
  } else {
    for (std::int64_t k = axis; k < rank; ++k) n *= s[k];
  }
  Tensor ty = c.output(o, 0);
  if (n == 0 || outer == 0 || inner == 0) return single_output(std::move(ty));
  const auto d = static_cast<std::size_t>(n);
  // The table (qlinear_softmax.cc: the reduced length sets the headroom b).
  double b =
      std::log(static_cast<double>(std::numeric_limits<float>::max()) / static_cast<double>(d));
  if (b > 5.0) b -= 5.0;
  std::array<float, 256> table{};
  for (int i = 0; i < 256; ++i) {
    table[static_cast<std::size_t>(i)] = static_cast<float>(
        std::exp((static_cast<double>(i) - 255.0 + b / static_cast<double>(x_scale)) *
                 static_cast<double>(x_scale)));
  }
  const float y_mult = std::floor(1.0f / y_scale);
  std::vector<int> codes(d);
  std::vector<float> e(d);
  auto code = [&](std::int64_t k) {
    return tx.dtype() == DType::UInt8
               ? static_cast<int>(tx.as<std::uint8_t>()[static_cast<std::size_t>(k)])
               : static_cast<int>(tx.as<std::int8_t>()[static_cast<std::size_t>(k)]);
  };
  for (std::int64_t a = 0; a < outer; ++a) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t base = a * n * inner + i;
      int mx = std::numeric_limits<int>::min();
      for (std::size_t k = 0; k < d; ++k) {
        codes[k] = code(base + static_cast<std::int64_t>(k) * inner);
        mx = std::max(mx, codes[k]);
      }
      for (std::size_t k = 0; k < d; ++k) {
        const int index = codes[k] - mx + 255;  // 0..255: mx is the row's largest code
        e[k] = table[static_cast<std::size_t>(index)];
      }
      float sum = 0.0f;
      for (std::size_t k = 0; k < d; ++k) sum += e[k];
      for (std::size_t k = 0; k < d; ++k) {
        // Beyond the type's range anything saturates alike; an infinite quotient (a y_scale so
        // small that e * floor(1 / y_scale) overflows) counts as large.
        const float r = std::nearbyint(e[k] * y_mult / sum);
        const std::int64_t q = (r < 1e6f ? static_cast<std::int64_t>(r) : std::int64_t{1000000}) +
                               static_cast<std::int64_t>(y_zp);
        const auto at = static_cast<std::size_t>(base + static_cast<std::int64_t>(k) * inner);
        if (!is_int8) {
          const std::int64_t u = std::min<std::int64_t>(q, 255);
          if (tx.dtype() == DType::UInt8) {
            ty.as<std::uint8_t>()[at] = static_cast<std::uint8_t>(u);
          } else {  // int8 moved to uint8: back by 128
            ty.as<std::int8_t>()[at] = static_cast<std::int8_t>(u - 128);
          }
        } else {
          ty.as<std::int8_t>()[at] =
              q > 255 ? std::int8_t{-1}
                      : static_cast<std::int8_t>(static_cast<std::uint8_t>(q & 0xff));
        }
      }
    }
  }
  return single_output(std::move(ty));
}

}  // namespace

OpRows softmax_ops() {
  OpRows rows;
  rows.onnx.push_back({"Softmax", 1, 1, 1, check_float_unary, infer_softmax, run_softmax<false>});
  rows.onnx.push_back({"LogSoftmax", 1, 1, 1, check_float_unary, infer_softmax, run_softmax<true>});
  rows.furiosa.push_back({"QLinearSoftmax", 4, 5, 1, check_qlinear_softmax, infer_qlinear_softmax,
                          run_qlinear_softmax});
  return rows;
}

}  // namespace furiosa::host::detail
