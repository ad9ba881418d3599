// Lowering's NPU kernels that compute (lowering_impl.h): LowLevelConv2d /
// LowLevelDepthwiseConv2d, LowLevelMatMul, LowLevelMaxPool, LowLevelAdd / Mul / Sub,
// LowLevelGlobalAveragePool and LowLevelRequantize, with the fixed-point rules of TFLite models.
#include <fmt/format.h>

#include <array>
#include <optional>

#include "furiosa/core/error.h"
#include "graph_utils.h"
#include "lowering_impl.h"

namespace furiosa::compiler::detail {
namespace {

// The fixed-point requantization a node carries (graph.h: fixed_point_multiplier /
// fixed_point_shift / output_min / output_max), or nullopt for the ONNX float rule. `channels`
// is the number of output channels (per-channel multipliers), `out` the output dtype.
std::optional<isa::FixedPointRequant> fixed_point_requant(const Node& n, std::size_t channels,
                                                          DType out) {
  if (!n.attributes.count("fixed_point_multiplier")) return std::nullopt;
  const auto mult = n.attr_ints("fixed_point_multiplier", {});
  const auto shift = n.attr_ints("fixed_point_shift", {});
  if (mult.size() != shift.size() || (mult.size() != 1 && mult.size() != channels)) {
    throw Error(
        ErrorCode::IncompatibleModel,
        fmt::format("node '{}' ({}): fixed_point_multiplier/fixed_point_shift must both have 1 or "
                    "{} values, have {} and {}",
                    n.name, n.qualified_op(), channels, mult.size(), shift.size()));
  }
  isa::FixedPointRequant f;
  for (std::size_t i = 0; i < mult.size(); ++i) {
    f.multipliers.push_back(
        {static_cast<std::int32_t>(mult[i]), static_cast<std::int32_t>(shift[i])});
  }
  const auto range = isa::quant_range(out);
  f.out_min = static_cast<std::int32_t>(n.attr_int("output_min", range[0]));
  f.out_max = static_cast<std::int32_t>(n.attr_int("output_max", range[1]));
  return f;
}

// The fixed-point addition a QLinearAdd node carries (graph.h), or nullopt.
std::optional<isa::FixedPointAdd> fixed_point_add(const Node& n, DType out) {
  if (!n.attributes.count("fixed_point_multiplier")) return std::nullopt;
  const auto mult = n.attr_ints("fixed_point_multiplier", {});
  const auto shift = n.attr_ints("fixed_point_shift", {});
  if (mult.size() != 3 || shift.size() != 3) {
    throw Error(
        ErrorCode::IncompatibleModel,
        fmt::format(
            "node '{}' ({}): fixed_point_multiplier/fixed_point_shift must have 3 values (a, b, y)",
            n.name, n.qualified_op()));
  }
  auto qm = [&](std::size_t i) {
    return isa::QuantizedMultiplier{static_cast<std::int32_t>(mult[i]),
                                    static_cast<std::int32_t>(shift[i])};
  };
  const auto range = isa::quant_range(out);
  return isa::FixedPointAdd{
      .left_shift = static_cast<std::int32_t>(n.attr_int("fixed_point_left_shift", 20)),
      .a_mult = qm(0),
      .b_mult = qm(1),
      .y_mult = qm(2),
      .out_min = static_cast<std::int32_t>(n.attr_int("output_min", range[0])),
      .out_max = static_cast<std::int32_t>(n.attr_int("output_max", range[1]))};
}

}  // namespace

Lowering::WeightedOperands Lowering::weighted_operands(const Node& n, std::size_t channels) {
  WeightedOperands o;
  const auto xq = scalar_quant(g_, n, 1, 2);
  const auto yq = scalar_quant(g_, n, 6, 7);
  o.x = {xq.scale, xq.zero_point};
  o.y = {yq.scale, yq.zero_point};
  o.w_scale = float_values(constant_input(g_, n, 4, "weight scale"));
  o.w_zero_point = int_values(constant_input(g_, n, 5, "weight zero point"));
  if ((o.w_scale.size() != 1 && o.w_scale.size() != channels) ||
      (o.w_zero_point.size() != 1 && o.w_zero_point.size() != channels)) {
    throw Error(
        ErrorCode::IncompatibleModel,
        fmt::format("node '{}' ({}): the weight scale and zero point must have 1 or {} values",
                    n.name, n.op_type, channels));
  }
  if (n.inputs.size() > 8 && n.inputs[8] >= 0) {
    const Tensor& b = constant_input(g_, n, 8, "bias");
    if (b.dtype() != DType::Int32 || b.elements() != static_cast<std::int64_t>(channels)) {
      throw Error(
          ErrorCode::IncompatibleModel,
          fmt::format("node '{}' ({}): bias must be int32 [{}]", n.name, n.op_type, channels));
    }
    o.bias = add_constant(b, isa::Layout::Linear);
  }
  return o;
}

void Lowering::emit_conv(const Node& n) {
  const Value& xv = value(n.inputs[0]);
  const Value& yv = value(n.outputs[0]);
  const Tensor& w = constant_input(g_, n, 3, "w");
  if (w.dtype() != DType::Int8 && w.dtype() != DType::UInt8) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' (QLinearConv): weight must be int8 or uint8", n.name));
  }
  const auto m = static_cast<std::size_t>(w.shape()[0]);
  isa::Conv2dParams p;
  p.weight = add_constant(w, isa::Layout::Linear);
  auto o = weighted_operands(n, m);
  p.x = o.x;
  p.y = o.y;
  p.w_scale = std::move(o.w_scale);
  p.w_zero_point = std::move(o.w_zero_point);
  p.bias = o.bias;
  auto win =
      detail::resolve_window(n, {w.shape()[2], w.shape()[3]}, {xv.shape[2], xv.shape[3]}, false);
  p.pads = win.pads;
  p.strides = win.strides;
  p.dilations = win.dilations;
  p.group = n.attr_int("group", 1);
  p.fixed_point = fixed_point_requant(n, m, yv.dtype);
  const bool depthwise = p.group > 1 && p.group == xv.shape[1];
  auto x = device_value(n.inputs[0], isa::Layout::LoweredNCHW, n);
  auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::LoweredNCHW);
  const auto kind = depthwise ? isa::KernelKind::DepthwiseConv2d : isa::KernelKind::Conv2d;
  note_entry(n, "npu", std::string(isa::kernel_name(kind)),
             fmt::format("{}quantized convolution{}", depthwise ? "depthwise " : "",
                         p.fixed_point ? " (fixed-point requantization)" : ""));
  push_kernel({.kind = kind,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = std::move(p)});
  produce(n.outputs[0], y);
}

void Lowering::emit_maxpool(const Node& n) {
  const Value& xv = value(n.inputs[0]);
  const Value& yv = value(n.outputs[0]);
  auto ks = n.attr_ints("kernel_shape", {});
  auto win = detail::resolve_window(n, {ks[0], ks[1]}, {xv.shape[2], xv.shape[3]},
                                    n.attr_int("ceil_mode", 0) != 0);
  isa::MaxPoolParams p{
      .kernel = win.kernel, .pads = win.pads, .strides = win.strides, .dilations = win.dilations};
  auto x = device_value(n.inputs[0], isa::Layout::LoweredNCHW, n);
  auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::LoweredNCHW);
  push_kernel({.kind = isa::KernelKind::MaxPool,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = p});
  note_entry(n, "npu", "LowLevelMaxPool", fmt::format("MaxPool on {} data", dtype_name(xv.dtype)));
  produce(n.outputs[0], y);
}

void Lowering::emit_matmul(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  const Tensor& b = constant_input(g_, n, 3, "b");
  const auto cols = static_cast<std::size_t>(b.shape()[1]);
  isa::MatMulParams p;
  p.b = add_constant(b, isa::Layout::Linear);
  auto o = weighted_operands(n, cols);
  p.a = o.x;
  p.y = o.y;
  p.b_scale = std::move(o.w_scale);
  p.b_zero_point = std::move(o.w_zero_point);
  p.bias = o.bias;
  p.fixed_point = fixed_point_requant(n, cols, yv.dtype);
  auto a = device_value(n.inputs[0], isa::Layout::Linear, n);
  auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
  push_kernel({.kind = isa::KernelKind::MatMul,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {a},
               .outputs = {y},
               .params = std::move(p)});
  note_entry(
      n, "npu", "LowLevelMatMul",
      fmt::format("quantized matrix multiplication with constant B{}{}", p.bias ? " and bias" : "",
                  p.fixed_point ? " (fixed-point requantization)" : ""));
  produce(n.outputs[0], y);
}

// LowLevelAdd / LowLevelMul / LowLevelSub of a QLinearAdd / QLinearMul / furiosa::QLinearSub node
// (operands A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): lowered operands when all three
// shapes are equal and one operand is already lowered, else Linear operands of y's rank
// broadcasting to it.
void Lowering::emit_binary(const Node& n, isa::KernelKind kind) {
  const Value& av = value(n.inputs[0]);
  const Value& bv = value(n.inputs[3]);
  const Value& yv = value(n.outputs[0]);
  const auto aq = scalar_quant(g_, n, 1, 2);
  const auto bq = scalar_quant(g_, n, 4, 5);
  const auto yq = scalar_quant(g_, n, 6, 7);
  const isa::QuantParam a_q{aq.scale, aq.zero_point}, b_q{bq.scale, bq.zero_point},
      y_q{yq.scale, yq.zero_point};
  const bool lowered = yv.shape.size() == 4 && av.shape == yv.shape && bv.shape == yv.shape &&
                       (lowered_on_device(n.inputs[0]) || lowered_on_device(n.inputs[3]));
  const auto layout = lowered ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
  auto a = device_value(n.inputs[0], layout, n);
  auto b = device_value(n.inputs[3], layout, n);
  for (auto* r : {&a, &b}) {
    while (r->shape.size() < yv.shape.size()) r->shape.insert(r->shape.begin(), 1);
  }
  auto y = alloc_activation(yv.dtype, yv.shape, layout);
  decltype(isa::Kernel::params) params = isa::SubParams{a_q, b_q, y_q};
  std::string what = "subtraction of two tensors";
  // A QDQ group ONNX Runtime runs unfused keeps DequantizeLinear -> op -> QuantizeLinear's
  // float32 arithmetic (kDequantizedArithmetic); com.microsoft QLinearAdd otherwise computes
  // ORT's kernel (isa::AddFormula::MlasRatios, on uint8-moved codes with kQdqS8ToU8).
  const bool dequantized = n.attr_int(std::string(kDequantizedArithmetic), 0) != 0;
  if (kind == isa::KernelKind::Mul) {
    params = isa::MulParams{.a = a_q, .b = b_q, .y = y_q, .dequantized = dequantized};
    what = dequantized ? "multiplication of two tensors, as DequantizeLinear, Mul, QuantizeLinear"
                       : "multiplication of two tensors";
  } else if (kind == isa::KernelKind::Add) {
    auto fixed = fixed_point_add(n, yv.dtype);
    what = fixed         ? "addition, fixed-point requantization"
           : dequantized ? "addition, as DequantizeLinear, Add, QuantizeLinear"
                         : "addition";
    const isa::AddFormula formula = dequantized ? isa::AddFormula::Dequantized
                                    : n.attr_int(std::string(kQdqS8ToU8), 0) != 0
                                        ? isa::AddFormula::MlasRatiosUint8
                                        : isa::AddFormula::MlasRatios;
    params = isa::AddParams{
        .a = a_q, .b = b_q, .y = y_q, .fixed_point = std::move(fixed), .formula = formula};
  }
  push_kernel({.kind = kind,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {a, b},
               .outputs = {y},
               .params = std::move(params)});
  note_entry(n, "npu", std::string(isa::kernel_name(kind)),
             fmt::format("quantized {} ({} layout)", what, isa::layout_name(layout)));
  produce(n.outputs[0], y);
}

void Lowering::emit_gap(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  if (n.op_type ==
      "QuantizedAveragePool") {  // furiosa domain: TFLite's integer mean (capability.cpp)
    const auto range = host::quant_range(yv.dtype);
    const std::array<std::int32_t, 2> clamp{
        static_cast<std::int32_t>(n.attr_int("output_min", std::get<0>(range))),
        static_cast<std::int32_t>(n.attr_int("output_max", std::get<1>(range)))};
    auto x = device_any(n.inputs[0], n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
    push_kernel(
        {.kind = isa::KernelKind::GlobalAveragePool,
         .node_name = n.name,
         .operator_index = n.index,
         .inputs = {x},
         .outputs = {y},
         .params = isa::GlobalAveragePoolParams{.x = {}, .y = {}, .integer_mean_clamp = clamp}});
    note_entry(
        n, "npu", "LowLevelGlobalAveragePool",
        "TFLite average pooling over the whole input (integer mean, rounded half away from zero)");
    produce(n.outputs[0], y);
    return;
  }
  auto xq = scalar_quant(g_, n, 1, 2);
  auto yq = scalar_quant(g_, n, 3, 4);
  auto x = device_any(n.inputs[0], n);
  auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
  push_kernel({.kind = isa::KernelKind::GlobalAveragePool,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = isa::GlobalAveragePoolParams{.x = {xq.scale, xq.zero_point},
                                                      .y = {yq.scale, yq.zero_point}}});
  note_entry(n, "npu", "LowLevelGlobalAveragePool", "quantized global average pooling");
  produce(n.outputs[0], y);
}

void Lowering::emit_requantize(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  auto x = device_any(n.inputs[0], n);
  auto y = alloc_activation(yv.dtype, yv.shape, x.layout);
  isa::RequantizeParams p;
  p.x = {std::get<float>(n.attributes.at("x_scale")),
         static_cast<std::int32_t>(n.attr_int("x_zero_point", 0))};
  p.y = {std::get<float>(n.attributes.at("y_scale")),
         static_cast<std::int32_t>(n.attr_int("y_zero_point", 0))};
  const auto table = n.attr_ints("table", {});
  if (!table.empty() && table.size() != 256) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' (furiosa::Requantize): table has {} entries, expected 256",
                            n.name, table.size()));
  }
  for (auto v : table) p.table.push_back(static_cast<std::uint8_t>(v));
  push_kernel({.kind = isa::KernelKind::Requantize,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = p});
  note_entry(
      n, "npu", "LowLevelRequantize",
      table.empty()
          ? "aligns quantization parameters inside a QDQ region"
          : "8-bit element map computed at compile time (requantization or activation clamp)");
  produce(n.outputs[0], y);
}

}  // namespace furiosa::compiler::detail
