// The host operator library (host/cpu_ops.h): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
// ---------------------------------------------------------------------------------------------

std::string check_quantize(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "x", kF32 | bit(DType::Int32)).in(1, "y_scale", kF32).in(2, "y_zero_point", kQ8, false);
  if (n.attributes.count("output_dtype")) {
    const auto od = dtype_from_onnx(n.attr_int("output_dtype", 0));
    ch.require(od && (bit(*od) & kQ8), "output_dtype must be uint8 or int8");
    ch.require(!ch.present(2) || !od || *d[2] == *od, "output_dtype differs from y_zero_point's dtype");
  }
  return ch.reason;
}
std::string check_dequantize(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}
      .in(0, "x", kQ8 | bit(DType::Int32))
      .in(1, "x_scale", kF32)
      .in(2, "x_zero_point", kQ8 | bit(DType::Int32), false)
      .same(0, 2)
      .reason;
}

// Per-tensor (1 element) or per-axis (1-D, dim[axis] elements) quantization parameters.
// Returns the normalized axis, or -1 for per-tensor.
std::int64_t quant_axis(const Ctx& c, const Shape& x, std::size_t scale_i, std::size_t zp_i) {
  const Shape& s = c.shape(scale_i, "scale");
  if (c.has(zp_i) && *c.in[zp_i].shape != s) {
    c.bad(fmt::format("zero point {} and scale {} differ in shape", shape_to_string(*c.in[zp_i].shape),
                      shape_to_string(s)));
  }
  if (element_count(s) == 1) return -1;  // per tensor (a scalar or a one-element tensor)
  if (s.size() != 1) c.bad(fmt::format("scale {} must be a scalar or 1-D", shape_to_string(s)));
  const auto axis = c.axis(c.node.attr_int("axis", 1), static_cast<std::int64_t>(x.size()), "axis");
  if (s[0] != x[static_cast<std::size_t>(axis)]) {
    c.bad(fmt::format("per-axis scale has {} elements, axis {} of {} has {}", s[0], axis,
                      shape_to_string(x), x[static_cast<std::size_t>(axis)]));
  }
  return axis;
}

DType quantize_out_dtype(const Ctx& c) {
  if (c.has(2)) return c.in[2].dtype;
  if (c.node.attributes.count("output_dtype")) {
    if (auto od = dtype_from_onnx(c.node.attr_int("output_dtype", 0))) return *od;
  }
  return DType::UInt8;
}

OutInfos infer_quantize(const Ctx& c) {
  const Shape& x = c.shape(0, "x");
  quant_axis(c, x, 1, 2);
  return {{quantize_out_dtype(c), x}};
}
OutInfos infer_dequantize(const Ctx& c) {
  const Shape& x = c.shape(0, "x");
  quant_axis(c, x, 1, 2);
  return {{DType::Float32, x}};
}

// One element by the project's one quantization rule (host/quantize.h).
template <class Q>
Q quantize_value(float v, float scale, std::int32_t zp) {
  constexpr auto lo = static_cast<std::int32_t>(std::numeric_limits<Q>::lowest());
  constexpr auto hi = static_cast<std::int32_t>(std::numeric_limits<Q>::max());
  return static_cast<Q>(host::quantize_value(v / scale, zp, lo, hi));
}

std::vector<Tensor> run_quantize(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const std::int64_t axis = quant_axis(c, x.shape(), 1, 2);
  const auto scales = c.t(1).as<float>();
  const std::vector<std::int64_t> zps = c.has(2) ? int_values(c.t(2)) : std::vector<std::int64_t>{};
  for (float s : scales) {
    if (!(s > 0.0f) && !(s < 0.0f)) fail(c.node, ErrorCode::InvalidInput, "y_scale must not be 0");
  }
  std::vector<float> xf(static_cast<std::size_t>(x.elements()));
  if (x.dtype() == DType::Float32) {
    std::copy(x.as<float>().begin(), x.as<float>().end(), xf.begin());
  } else {
    auto xi = x.as<std::int32_t>();
    for (std::size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(xi[i]);
  }
  Tensor y = c.output(o, 0);
  visit_dtype(y.dtype(), [&](auto tag) {
    using Q = decltype(tag);
    if constexpr (std::is_same_v<Q, std::uint8_t> || std::is_same_v<Q, std::int8_t>) {
      Q* out = y.as<Q>().data();
      host::for_each_quant_block(x.shape(), axis, [&](std::int64_t at, std::int64_t len, std::int64_t k) {
        const float s = scales[static_cast<std::size_t>(k)];
        const auto z = static_cast<std::int32_t>(zps.empty() ? 0 : zps[static_cast<std::size_t>(k)]);
        for (std::int64_t j = 0; j < len; ++j) out[at + j] = quantize_value<Q>(xf[static_cast<std::size_t>(at + j)], s, z);
      });
    } else {
      fail(c.node, ErrorCode::UnsupportedOperator, "QuantizeLinear output must be uint8 or int8");
    }
  });
  return single_output(std::move(y));
}

std::vector<Tensor> run_dequantize(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const std::int64_t axis = quant_axis(c, x.shape(), 1, 2);
  const auto scales = c.t(1).as<float>();
  const std::vector<std::int64_t> zps = c.has(2) ? int_values(c.t(2)) : std::vector<std::int64_t>{};
  const auto xv = int_values(x);
  Tensor y = c.output_for_overwrite(o, 0);
  float* out = y.as<float>().data();
  host::for_each_quant_block(x.shape(), axis, [&](std::int64_t at, std::int64_t len, std::int64_t k) {
    const float s = scales[static_cast<std::size_t>(k)];
    const std::int64_t z = zps.empty() ? 0 : zps[static_cast<std::size_t>(k)];
    for (std::int64_t j = 0; j < len; ++j) {
      out[at + j] = static_cast<float>(xv[static_cast<std::size_t>(at + j)] - z) * s;
    }
  });
  return single_output(std::move(y));
}

OutInfos infer_dynamic_quantize(const Ctx& c) {
  return {{DType::UInt8, c.shape(0, "x")}, {DType::Float32, {}}, {DType::UInt8, {}}};
}
std::vector<Tensor> run_dynamic_quantize(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  auto x = tx.as<float>();
  float mn = 0.0f, mx = 0.0f;  // the range always includes 0
  for (float v : x) {
    if (v < mn) mn = v;
    if (v > mx) mx = v;
  }
  float scale = (mx - mn) / 255.0f;
  if (scale == 0.0f) scale = 1.0f;  // x all zeros: the spec divides by 0; ONNX Runtime uses 1
  // saturate(round(0 - min / scale)) to [0, 255]: the one quantization rule with a zero point of 0.
  const std::int32_t zp = host::quantize_value((0.0f - mn) / scale, 0, 0, 255);
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < o.size(); ++i) out.push_back(c.output(o, i));
  auto y = out[0].as<std::uint8_t>();
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = quantize_value<std::uint8_t>(x[i], scale, zp);
  out[1].as<float>()[0] = scale;
  out[2].as<std::uint8_t>()[0] = static_cast<std::uint8_t>(zp);
  return out;
}

}  // namespace

OpRows quantize_ops() {
  OpRows rows;
  rows.onnx.push_back({"QuantizeLinear", 2, 3, 1, check_quantize, infer_quantize, run_quantize});
  rows.onnx.push_back({"DequantizeLinear", 2, 3, 1, check_dequantize, infer_dequantize, run_dequantize});
  rows.onnx.push_back({"DynamicQuantizeLinear", 1, 1, 3, check_float_unary, infer_dynamic_quantize, run_dynamic_quantize});
  return rows;
}

}  // namespace furiosa::host::detail
