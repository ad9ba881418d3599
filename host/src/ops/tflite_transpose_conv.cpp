// The host operator library (host/cpu_ops.h): furiosa::TFLiteTransposeConv, TFLite's float32
// TRANSPOSE_CONV as TensorFlow Lite 2.14's reference kernel computes it
// (tensorflow/lite/kernels/internal/reference/transpose_conv.h, reference_ops::TransposeConv,
// called by kernels/transpose_conv.cc). The importer (compiler-bridge/src/tflite/
// transpose_conv.cpp) gives the leading pads it computed with ComputePaddingHeightWidth on the
// output size. The kernel "scatters": the output starts at +0.0f and, for every input element in
// (n, y, x, c) order and every tap (ky, kx, o), out[n, y*sh - pad_h + ky, x*sw - pad_w + kx, o] +=
// in * w when that lies inside the output. Float sums depend on their order; this is the
// reference's order: each output element receives its products by ascending input row, column,
// then channel. Then + bias[o] and min(max(v, activation_min), activation_max)
// (ActivationFunctionWithMinMax). Built with -ffp-contract=off (host/CMakeLists.txt): a fused
// multiply-add would round differently from the reference's product then sum.
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

struct TransposeConvAttrs {
  std::array<std::int64_t, 2> strides{}, pads{};
  Shape out;
  float lo = 0, hi = 0;
};

TransposeConvAttrs transpose_conv_attrs(const Node& n) {
  TransposeConvAttrs a;
  const auto strides = n.attr_ints("strides", {});
  const auto pads = n.attr_ints("pads", {});
  a.out = n.attr_ints("output_shape", {});
  if (strides.size() != 2 || pads.size() != 2 || a.out.size() != 4) {
    fail(n, ErrorCode::IncompatibleModel,
         "attributes strides [2], pads [2] and output_shape [4] are required");
  }
  for (std::size_t d = 0; d < 2; ++d) {
    a.strides[d] = strides[d];
    a.pads[d] = pads[d];
  }
  a.lo = float_attr(n, "activation_min", std::numeric_limits<float>::lowest());
  a.hi = float_attr(n, "activation_max", std::numeric_limits<float>::max());
  return a;
}

std::string check_transpose_conv(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32).in(1, "W", kF32).in(2, "B", kF32, false);
  const auto strides = n.attr_ints("strides", {});
  const auto pads = n.attr_ints("pads", {});
  const auto out = n.attr_ints("output_shape", {});
  // TFLite's options and output_shape are int32; the bounds also keep the index products far
  // from int64 overflow.
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  auto within = [&](const std::vector<std::int64_t>& v, std::int64_t lo) {
    return std::all_of(v.begin(), v.end(), [&](std::int64_t e) { return e >= lo && e <= kMax; });
  };
  ch.require(strides.size() == 2 && within(strides, 1),
             "attribute 'strides' must be 2 values in [1, 2^31)");
  ch.require(pads.size() == 2 && within(pads, 0), "attribute 'pads' must be 2 values in [0, 2^31)");
  ch.require(out.size() == 4 && within(out, 1),
             "attribute 'output_shape' must be 4 values in [1, 2^31)");
  return ch.reason;
}

OutInfos infer_transpose_conv(const Ctx& c) {
  const TransposeConvAttrs a = transpose_conv_attrs(c.node);
  const Shape& xs = c.shape(0, "X");
  const Shape& ws = c.shape(1, "W");
  if (xs.size() != 4 || ws.size() != 4 || xs[3] != ws[3] || ws[0] != a.out[3] ||
      xs[0] != a.out[0]) {
    c.bad(fmt::format(
        "X {} [N, H, W, I], W {} [O, KH, KW, I] and output_shape {} [N, OH, OW, O] do not fit",
        shape_to_string(xs), shape_to_string(ws), shape_to_string(a.out)));
  }
  if (c.has(2) && element_count(c.shape(2, "B")) != ws[0]) {
    c.bad(fmt::format("B {} must hold {} values", shape_to_string(c.shape(2, "B")), ws[0]));
  }
  return {{DType::Float32, a.out}};
}

std::vector<Tensor> run_transpose_conv(const Ctx& c, const OutInfos& o) {
  const TransposeConvAttrs a = transpose_conv_attrs(c.node);
  const Tensor& tx = c.t(0);
  const Tensor& tw = c.t(1);
  const Tensor* tb = c.opt(2);
  const Shape& xs = tx.shape();
  const Shape& ws = tw.shape();
  const std::int64_t N = xs[0], H = xs[1], W = xs[2], I = xs[3];
  const std::int64_t M = ws[0], KH = ws[1], KW = ws[2];
  const std::int64_t OH = a.out[1], OW = a.out[2];
  Tensor ty(DType::Float32, o[0].second);
  auto y = ty.as<float>();
  std::fill(y.begin(), y.end(), 0.0f);
  const float* x = tx.as<float>().data();
  const float* w = tw.as<float>().data();
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t iy = 0; iy < H; ++iy)
      for (std::int64_t ix = 0; ix < W; ++ix)
        for (std::int64_t ic = 0; ic < I; ++ic) {
          const float xv = x[((n * H + iy) * W + ix) * I + ic];
          const std::int64_t oy0 = iy * a.strides[0] - a.pads[0],
                             ox0 = ix * a.strides[1] - a.pads[1];
          for (std::int64_t ky = 0; ky < KH; ++ky) {
            const std::int64_t oy = oy0 + ky;
            if (oy < 0 || oy >= OH) continue;
            for (std::int64_t kx = 0; kx < KW; ++kx) {
              const std::int64_t ox = ox0 + kx;
              if (ox < 0 || ox >= OW) continue;
              float* out = y.data() + ((n * OH + oy) * OW + ox) * M;
              for (std::int64_t m = 0; m < M; ++m) {
                const float product = xv * w[((m * KH + ky) * KW + kx) * I + ic];
                out[m] += product;
              }
            }
          }
        }
  const float* b = tb ? tb->as<float>().data() : nullptr;
  for (std::int64_t i = 0; i < N * OH * OW; ++i) {
    for (std::int64_t m = 0; m < M; ++m) {
      float& v = y[static_cast<std::size_t>(i * M + m)];
      if (b) v += b[m];
      v = std::min(std::max(v, a.lo), a.hi);
    }
  }
  return single_output(std::move(ty));
}

}  // namespace

OpRows tflite_transpose_conv_ops() {
  OpRows rows;
  rows.furiosa.push_back({"TFLiteTransposeConv", 2, 3, 1, check_transpose_conv,
                          infer_transpose_conv, run_transpose_conv});
  return rows;
}

}  // namespace furiosa::host::detail
