// What the TFLite operator mappings share (importer.h): arity and type checks, and TFLite's rules
// that several operators use:
//  - fused activations: CalculateActivationRangeQuantized (zero_point + round(f / scale), clamped
//    to the type's range);
//  - windows: ComputePaddingHeightWidth (SAME puts the odd padding element at the end);
//  - multipliers: tflite::QuantizeMultiplier on the double-precision real multiplier
//    input_scale * filter_scale[c] / output_scale (per channel for int8 weights);
//  - a clamp after an operator without its own requantization (pools, concatenation) as a
//    256-entry table (host/lookup_table.h).
#include <fmt/format.h>

#include <limits>

#include "furiosa/device/isa.h"
#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

std::vector<int> Importer::op_inputs(const fb::Operator& op) const {
  std::vector<int> out;
  if (op.inputs()) {
    for (int t : *op.inputs()) out.push_back(t < 0 ? -1 : tensor_index(t, "operator input"));
  }
  return out;
}

std::vector<int> Importer::op_outputs(const fb::Operator& op) const {
  std::vector<int> out;
  if (op.outputs()) {
    for (int t : *op.outputs()) out.push_back(tensor_index(t, "operator output"));
  }
  return out;
}

void Importer::require_arity(const std::vector<int>& in, std::size_t min_in, std::size_t max_in, const std::vector<int>& out) const {
  if (in.size() < min_in || in.size() > max_in || out.size() != 1) {
    bad(fmt::format("has {} inputs and {} outputs; expected {}..{} inputs and 1 output", in.size(), out.size(),
                    min_in, max_in));
  }
  for (std::size_t i = 0; i < min_in; ++i) {
    if (in[i] < 0) bad(fmt::format("required input {} is missing", i));
  }
}

void Importer::require_outputs(const std::vector<int>& in, std::size_t n_in, const std::vector<int>& out, std::size_t n_out) const {
  if (in.size() != n_in || out.size() != n_out) {
    bad(fmt::format("has {} inputs and {} outputs; expected {} and {}", in.size(), out.size(), n_in, n_out));
  }
  for (int t : in) {
    if (t < 0) bad("an input is missing");
  }
}

void Importer::require_quantized(std::initializer_list<int> tensors) const {
  std::optional<DType> first;
  for (int t : tensors) {
    const DType d = dtype(t);
    if (!is_quantized(d)) {
      unsupported(fmt::format("tensor '{}' is {}; only uint8/int8 quantized {} is supported", info(t).name,
                              dtype_name(d), op_name_));
    }
    if (first && *first != d) {
      bad(fmt::format("mixes {} and {} tensors ('{}')", dtype_name(*first), dtype_name(d), info(t).name));
    }
    first = d;
  }
}

void Importer::require_constant(int t, const char* what) const {
  if (!is_constant(t)) bad(fmt::format("{} '{}' must be a constant{}", what, info(t).name, dynamic_origin(t)));
}

void Importer::require_quantized_weight(int w) const {
  require_constant(w, "weight");
  const DType wd = dtype(w);
  if (!is_quantized(wd)) {
    unsupported(fmt::format("weight '{}' is {}; only uint8/int8 weights are supported",
                            info(w).name, dtype_name(wd)));
  }
}

std::array<std::int32_t, 2> Importer::activation_range(fb::ActivationFunctionType act, int y) const {
  const auto [qmin, qmax] = isa::quant_range(dtype(y));
  const Quant q = quant(y);
  auto quantize = [&](float f) { return q.zero_point + round_to_int(std::round(f / q.scale)); };
  switch (act) {
    case fb::ActivationFunctionType::NONE: return {qmin, qmax};
    case fb::ActivationFunctionType::RELU: return {std::max(qmin, quantize(0.0f)), qmax};
    case fb::ActivationFunctionType::RELU6: return {std::max(qmin, quantize(0.0f)), std::min(qmax, quantize(6.0f))};
    case fb::ActivationFunctionType::RELU_N1_TO_1:
      return {std::max(qmin, quantize(-1.0f)), std::min(qmax, quantize(1.0f))};
    default: break;
  }
  const char* name = fb::EnumNameActivationFunctionType(act);
  unsupported(fmt::format("fused activation {} is not supported (NONE, RELU, RELU_N1_TO_1, RELU6)",
                          name && *name ? name : std::to_string(static_cast<int>(act))));
}

std::array<float, 2> Importer::float_activation_range(fb::ActivationFunctionType act) const {
  constexpr float kLowest = std::numeric_limits<float>::lowest(), kMax = std::numeric_limits<float>::max();
  switch (act) {
    case fb::ActivationFunctionType::NONE: return {kLowest, kMax};
    case fb::ActivationFunctionType::RELU: return {0.0f, kMax};
    case fb::ActivationFunctionType::RELU6: return {0.0f, 6.0f};
    case fb::ActivationFunctionType::RELU_N1_TO_1: return {-1.0f, 1.0f};
    default: break;
  }
  const char* name = fb::EnumNameActivationFunctionType(act);
  unsupported(fmt::format("fused activation {} is not supported (NONE, RELU, RELU_N1_TO_1, RELU6)",
                          name && *name ? name : std::to_string(static_cast<int>(act))));
}

Importer::Dim Importer::window_dim(fb::Padding padding, std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dilation) const {
  if (stride < 1 || dilation < 1 || k < 1) {
    bad(fmt::format("stride {}, dilation {} and window {} must be >= 1", stride, dilation, k));
  }
  const std::int64_t eff = (k - 1) * dilation + 1;
  Dim d;
  if (padding == fb::Padding::SAME) {
    d.out = (in + stride - 1) / stride;
    const std::int64_t total = std::max<std::int64_t>(0, (d.out - 1) * stride + eff - in);
    d.before = total / 2;
    d.after = total - d.before;
  } else if (padding == fb::Padding::VALID) {
    d.out = (in - eff + stride) / stride;
  } else {
    bad(fmt::format("unknown padding {}", static_cast<int>(padding)));
  }
  if (d.out < 1) bad(fmt::format("window of extent {} does not fit the input extent {}", eff, in));
  return d;
}

void Importer::check_output_shape(int y, const Shape& expected_nhwc) const {
  if (info(y).shape != expected_nhwc) {
    bad(fmt::format("output '{}' has shape {}, the operator computes {}", info(y).name,
                    shape_to_string(info(y).shape), shape_to_string(expected_nhwc)));
  }
}

void Importer::add_fixed_point(std::map<std::string, Attribute>& attrs, const Quant& x,
                               const std::vector<float>& w_scales, const Quant& y,
                               std::array<std::int32_t, 2> range, ScaleProduct product) const {
  std::vector<std::int64_t> mult, shift;
  for (float ws : w_scales) {
    const double xw = product == ScaleProduct::Float32
                          ? static_cast<double>(x.scale * ws)
                          : static_cast<double>(x.scale) * static_cast<double>(ws);
    const double real = xw / static_cast<double>(y.scale);
    const isa::QuantizedMultiplier m = isa::quantize_multiplier(real);
    mult.push_back(m.multiplier);
    shift.push_back(m.shift);
  }
  attrs["fixed_point_multiplier"] = mult;
  attrs["fixed_point_shift"] = shift;
  attrs["output_min"] = std::int64_t{range[0]};
  attrs["output_max"] = std::int64_t{range[1]};
}

// Binds value v (already computed) to output tensor y, or clamps it into y's value first when
// `range` is narrower than the type's range (an activation of an operator without its own
// requantization: pools, concatenation). `nchw` says which layout v is in.
void Importer::bind_clamped(int v, int y, bool nchw, std::array<std::int32_t, 2> range) {
  const DType d = dtype(y);
  const auto full = isa::quant_range(d);
  if (range == full) {
    if (nchw) info(y).nchw = v;
    else info(y).model = v;
    return;
  }
  const Quant q = quant(y);
  const host::LookupTable table =
      host::build_lookup_table(d, d, [&](std::int32_t x) { return std::clamp(x, range[0], range[1]); });
  const int out = nchw ? output_nchw(y) : output_model(y);
  add_node("Requantize", "furiosa", {v}, {out}, requantize_attrs(q, q, d, table), "/activation");
}

std::map<std::string, Attribute> Importer::requantize_attrs(const Quant& x, const Quant& y, DType y_dtype,
                                                            const host::LookupTable& table) const {
  return {{"x_scale", x.scale},
          {"x_zero_point", std::int64_t{x.zero_point}},
          {"y_scale", y.scale},
          {"y_zero_point", std::int64_t{y.zero_point}},
          {"y_dtype", std::int64_t{static_cast<int>(y_dtype)}},
          {"table", std::vector<std::int64_t>(table.begin(), table.end())}};
}

void Importer::map_by_table(int x, int y, const Quant& xq, const Quant& yq, DType y_dtype,
                            const host::LookupTable& table) {
  const bool nchw = info(x).shape.size() == 4 && info(x).model < 0 && info(x).nchw >= 0;
  add_node("Requantize", "furiosa", {nchw ? nchw_view(x) : model_view(x)}, {nchw ? output_nchw(y) : output_model(y)},
           requantize_attrs(xq, yq, y_dtype, table));
}

std::int64_t Importer::onnx_type(DType d) {
  switch (d) {
    case DType::Float32: return 1;
    case DType::UInt8: return 2;
    case DType::Int8: return 3;
    case DType::Int32: return 6;
    case DType::Int64: return 7;
  }
  return 0;
}

}  // namespace furiosa::compiler::detail::tflite
