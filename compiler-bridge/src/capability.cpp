// The NPU's op table and placement (capability.h).
#include "capability.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "furiosa/compiler/compiler.h"
#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "furiosa/host/cpu_ops.h"
#include "furiosa/host/index_map.h"
#include "graph_utils.h"

namespace furiosa::compiler {
namespace detail {
namespace {

bool quantized_input0(const Graph& g, const Node& n) {
  return !n.inputs.empty() && n.inputs[0] >= 0 && is_quantized(g.values[static_cast<std::size_t>(n.inputs[0])].dtype);
}

/// One row of the NPU op table: an op the NPU claims when `claims` says yes.
struct NpuRow {
  std::string_view op;         ///< Node::qualified_op()
  NpuOp lowering;
  std::string_view condition;  ///< what `claims` checks, for supported_operators()
  bool (*claims)(const Graph&, const Node&);
};

bool always(const Graph&, const Node&) { return true; }

bool matmul_claim(const Graph& g, const Node& n) {
  return is_constant_input(g, n, 3) && g.values[static_cast<std::size_t>(n.inputs[3])].shape.size() == 2;
}

bool gap_claim(const Graph& g, const Node& n) {
  return n.attr_int("channels_last", 0) == 0 && g.values[static_cast<std::size_t>(n.inputs[0])].shape.size() == 4;
}

bool maxpool_claim(const Graph& g, const Node& n) {
  return quantized_input0(g, n) && (n.outputs.size() < 2 || n.outputs[1] < 0) &&
         n.attr_int("storage_order", 0) == 0 && g.values[static_cast<std::size_t>(n.inputs[0])].shape.size() == 4;
}

bool resize_claim(const Graph& g, const Node& n) {
  return quantized_input0(g, n) && (nearest_repeat(g, n).has_value() || tflite_bilinear_flags(g, n).has_value() ||
                                    onnx_linear_resize(g, n).has_value());
}

constexpr std::string_view kQuantizedData = "on uint8/int8 tensors";

// furiosa::QuantizedAveragePool (TFLite's AVERAGE_POOL_2D) whose one window is the whole input:
// 4-D uint8/int8, kernel_shape = [H, W], no padding, output [N, C, 1, 1].
bool whole_input_average_pool_claim(const Graph& g, const Node& n) {
  if (!quantized_input0(g, n) || n.outputs.empty() || n.outputs[0] < 0) return false;
  const Value& x = g.values[static_cast<std::size_t>(n.inputs[0])];
  const Value& y = g.values[static_cast<std::size_t>(n.outputs[0])];
  if (!x.has_shape || !y.has_shape || x.shape.size() != 4 || y.shape != Shape{x.shape[0], x.shape[1], 1, 1}) return false;
  const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
  return n.attr_ints("kernel_shape", {}) == std::vector<std::int64_t>{x.shape[2], x.shape[3]} &&
         std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p == 0; });
}

bool slice_claim(const Graph& g, const Node& n) { return quantized_input0(g, n) && slice_params(g, n).has_value(); }

bool pad_claim(const Graph& g, const Node& n) { return quantized_input0(g, n) && pad_params(g, n).has_value(); }

// QLinearMul / QLinearSub / QLinearAdd operand layout: (A, A_scale, A_zp, B, B_scale, B_zp,
// C_scale, C_zp).
bool qlinear_binary_claim(const Graph& g, const Node& n) {
  return binary_claim(g, n, {0, 3}, {{1, 2}, {4, 5}, {6, 7}});
}

const std::array<NpuRow, 23>& npu_table() {
  static const std::array<NpuRow, 23> rows = {{
      {"QLinearConv", NpuOp::Conv, "LowLevelConv2d / LowLevelDepthwiseConv2d", always},
      {"QLinearMatMul", NpuOp::MatMul, "with a constant 2-D B (LowLevelMatMul)", matmul_claim},
      {"com.microsoft::QLinearAdd", NpuOp::Add, "LowLevelAdd", always},
      {"com.microsoft::QLinearGlobalAveragePool", NpuOp::GlobalAveragePool, "4-D NCHW (channels_last 0)", gap_claim},
      {"furiosa::QuantizedAveragePool", NpuOp::GlobalAveragePool,
       "TFLite AVERAGE_POOL_2D with one window over the whole input (TFLite's integer mean)",
       whole_input_average_pool_claim},
      {"com.microsoft::QLinearConcat", NpuOp::QLinearConcat, "per-input scales requantized on the NPU", always},
      {"furiosa::Requantize", NpuOp::Requantize, "QDQ regions and TFLite element maps", always},
      {"MaxPool", NpuOp::MaxPool, "4-D, on uint8/int8 tensors, no Indices output", maxpool_claim},
      {"Concat", NpuOp::Concat, kQuantizedData, quantized_input0},
      {"Split", NpuOp::Split, kQuantizedData, quantized_input0},
      {"Transpose", NpuOp::Transpose, kQuantizedData, quantized_input0},
      {"Reshape", NpuOp::Reshape, kQuantizedData, quantized_input0},
      {"Flatten", NpuOp::Reshape, kQuantizedData, quantized_input0},
      {"Squeeze", NpuOp::Reshape, kQuantizedData, quantized_input0},
      {"Unsqueeze", NpuOp::Reshape, kQuantizedData, quantized_input0},
      {"Identity", NpuOp::Reshape, kQuantizedData, quantized_input0},
      {"Resize", NpuOp::Resize,
       "nearest upsampling by whole factors of 4-D uint8/int8 tensors; TFLite RESIZE_BILINEAR (uint8/int8, "
       "TFLite's reference arithmetic); linear on 4-D uint8/int8 with constant scales or sizes (ONNX Runtime's "
       "8-bit arithmetic)",
       resize_claim},
      {"Slice", NpuOp::Slice, "uint8/int8 with constant starts, ends, axes and steps", slice_claim},
      {"Pad", NpuOp::Pad, "uint8/int8 with constant pads, constant_value and axes; all four modes", pad_claim},
      {"com.microsoft::QLinearMul", NpuOp::Mul,
       "two tensors (a tensor times a function of itself becomes a table); constant per-tensor parameters",
       qlinear_binary_claim},
      {"furiosa::QLinearSub", NpuOp::Sub, "QDQ DequantizeLinear x2 -> Sub -> QuantizeLinear", qlinear_binary_claim},
      // Quantize/Dequantize are the runtime's own host steps (Where::Host), listed here so the
      // listing and the conformance tests see them; place() handles them before the table.
      {"QuantizeLinear", NpuOp::Reshape, "host Quantize step (per tensor and per axis)", nullptr},
      {"DequantizeLinear", NpuOp::Reshape, "host Dequantize step (per tensor and per axis)", nullptr},
  }};
  return rows;
}

}  // namespace

Placement place(const Graph& g, const Node& n, std::string* why) {
  const std::string op = n.qualified_op();
  if (op == "QuantizeLinear" || op == "DequantizeLinear") return {Where::Host};
  for (const NpuRow& row : npu_table()) {
    if (row.op == op && row.claims && row.claims(g, n)) return {Where::Npu, row.lowering};
  }
  std::vector<DType> dtypes;
  for (int i : n.inputs) dtypes.push_back(i >= 0 ? g.values[static_cast<std::size_t>(i)].dtype : DType::Float32);
  std::string reason;
  if (host::cpu_op_supported(n, dtypes, &reason)) return {Where::External};
  if (why) *why = reason.empty() ? "no NPU kernel and no host operator for it" : reason;
  return {Where::Unsupported};
}

void check_supported(const Graph& g) {
  std::vector<std::string> bad;
  std::string first;  // the first such node, for ErrorSubject
  for (const Node& n : g.nodes) {
    std::string why;
    if (place(g, n, &why).where == Where::Unsupported) {
      if (bad.empty()) first = n.name;
      bad.push_back(fmt::format("node '{}' (op {}, domain '{}'): {}", escape_text(n.name, 64), escape_text(n.op_type, 64),
                                n.domain.empty() ? "ai.onnx" : escape_text(n.domain, 64), escape_text(why)));
    }
  }
  if (bad.empty()) return;
  // One line (README): every such node, then where the supported set is listed.
  constexpr std::size_t kShown = 8;
  std::string msg = fmt::format("{} node(s) cannot run: ", bad.size());
  for (std::size_t i = 0; i < bad.size() && i < kShown; ++i) msg += (i == 0 ? "" : "; ") + bad[i];
  if (bad.size() > kShown) msg += fmt::format("; and {} more", bad.size() - kShown);
  msg += " (supported operators: docs/operators.md, compiler::supported_operators())";
  throw Error(ErrorCode::UnsupportedOperator, msg, ErrorSubject::of_node(first));
}

bool is_data_movement(const Node& n) {
  static constexpr std::array<std::string_view, 10> ops = {"MaxPool", "Reshape",   "Flatten",   "Concat",
                                                           "Transpose", "Split", "Squeeze",   "Unsqueeze",
                                                           "Identity", "Slice"};
  if (!n.domain.empty()) return false;
  // A nearest Resize only picks elements (linear modes compute new values).
  if (n.op_type == "Resize") return n.attr_string("mode", "nearest") == "nearest";
  return std::find(ops.begin(), ops.end(), n.op_type) != ops.end();
}

std::optional<std::array<std::int64_t, 2>> nearest_repeat(const Graph& g, const Node& n) {
  if (n.op_type != "Resize" || !n.domain.empty() || n.inputs.empty() || n.outputs.empty() || n.inputs[0] < 0 ||
      n.outputs[0] < 0 || n.attributes.count("axes") || n.attr_string("mode", "nearest") != "nearest") {
    return std::nullopt;
  }
  const Value& x = g.values[static_cast<std::size_t>(n.inputs[0])];
  const Value& y = g.values[static_cast<std::size_t>(n.outputs[0])];
  if (!x.has_shape || !y.has_shape || x.shape.size() != 4 || y.shape.size() != 4 || x.shape[0] != y.shape[0] ||
      x.shape[1] != y.shape[1]) {
    return std::nullopt;
  }
  const std::int64_t h = x.shape[2], w = x.shape[3], oh = y.shape[2], ow = y.shape[3];
  if (h <= 0 || w <= 0 || oh % h != 0 || ow % w != 0) return std::nullopt;
  // The host library's Resize on a [1, 1, H, W] ramp (value = source index) with the node's
  // attributes and constant roi / scales / sizes (sizes with N = C = 1).
  Tensor ramp(DType::Float32, {1, 1, h, w});
  for (std::int64_t i = 0; i < h * w; ++i) ramp.as<float>()[static_cast<std::size_t>(i)] = static_cast<float>(i);
  std::vector<const Tensor*> ins{&ramp};
  Tensor sizes(DType::Int64, {4});
  for (std::size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.inputs[i] < 0) {
      ins.push_back(nullptr);
      continue;
    }
    if (!is_constant_input(g, n, i)) return std::nullopt;
    const Tensor& t = *g.values[static_cast<std::size_t>(n.inputs[i])].constant;
    if (i == 3) {
      if (t.dtype() != DType::Int64 || t.elements() != 4) return std::nullopt;
      const auto s = t.as<std::int64_t>();
      sizes.as<std::int64_t>()[0] = 1;
      sizes.as<std::int64_t>()[1] = 1;
      sizes.as<std::int64_t>()[2] = s[2];
      sizes.as<std::int64_t>()[3] = s[3];
      ins.push_back(&sizes);
    } else {
      ins.push_back(&t);
    }
  }
  Tensor map;
  try {
    map = std::move(host::run_cpu_op(n, ins).at(0));
  } catch (const Error&) {
    return std::nullopt;
  }
  if (map.shape() != Shape{1, 1, oh, ow}) return std::nullopt;
  const std::int64_t fh = oh / h, fw = ow / w;
  const auto m = map.as<float>();
  for (std::int64_t i = 0; i < oh; ++i) {
    for (std::int64_t j = 0; j < ow; ++j) {
      if (m[static_cast<std::size_t>(i * ow + j)] != static_cast<float>((i / fh) * w + j / fw)) return std::nullopt;
    }
  }
  return std::array<std::int64_t, 2>{fh, fw};
}

std::optional<std::array<bool, 2>> tflite_bilinear_flags(const Graph& g, const Node& n) {
  if (n.op_type != "Resize" || !n.domain.empty() || n.attr_int("tflite_arithmetic", 0) != 1 ||
      n.attr_string("mode", "nearest") != "linear" || n.attr_ints("axes", {}) != std::vector<std::int64_t>{2, 3} ||
      n.inputs.empty() || n.outputs.empty() || n.inputs[0] < 0 || n.outputs[0] < 0) {
    return std::nullopt;
  }
  const Value& x = g.values[static_cast<std::size_t>(n.inputs[0])];
  const Value& y = g.values[static_cast<std::size_t>(n.outputs[0])];
  if ((x.dtype != DType::UInt8 && x.dtype != DType::Int8) || !x.has_shape || !y.has_shape || x.shape.size() != 4 ||
      y.shape.size() != 4 || x.shape[0] != y.shape[0] || x.shape[1] != y.shape[1] || element_count(y.shape) <= 0) {
    return std::nullopt;
  }
  // The same reading of the coordinate mode as the host kernel (host/src/ops/resize.cpp).
  const std::string coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord != "align_corners" && coord != "half_pixel" && coord != "asymmetric") return std::nullopt;
  return std::array<bool, 2>{coord == "align_corners", coord == "half_pixel"};
}

namespace {

// The int64/int32 values of input `i` of `n` into `out`: true when the input is absent (out left
// as is) or a constant of those types; false otherwise.
bool constant_ints(const Graph& g, const Node& n, std::size_t i, std::vector<std::int64_t>& out) {
  if (i >= n.inputs.size() || n.inputs[i] < 0) return true;
  if (!is_constant_input(g, n, i)) return false;
  const Tensor& t = *g.values[static_cast<std::size_t>(n.inputs[i])].constant;
  if (t.dtype() == DType::Int64) {
    out.assign(t.as<std::int64_t>().begin(), t.as<std::int64_t>().end());
  } else if (t.dtype() == DType::Int32) {
    out.assign(t.as<std::int32_t>().begin(), t.as<std::int32_t>().end());
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::optional<isa::SliceParams> slice_params(const Graph& g, const Node& n) {
  if (n.op_type != "Slice" || !n.domain.empty() || n.inputs.empty() || n.outputs.empty() || n.inputs[0] < 0 ||
      n.outputs[0] < 0) {
    return std::nullopt;
  }
  const Value& x = g.values[static_cast<std::size_t>(n.inputs[0])];
  const Value& y = g.values[static_cast<std::size_t>(n.outputs[0])];
  if (!x.has_shape || !y.has_shape || x.shape.size() != y.shape.size()) return std::nullopt;
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (n.inputs.size() > 1) {
    if (!constant_ints(g, n, 1, starts) || !constant_ints(g, n, 2, ends) || !constant_ints(g, n, 3, axes) ||
        !constant_ints(g, n, 4, steps)) {
      return std::nullopt;
    }
  } else {  // opset 1: attributes
    starts = n.attr_ints("starts", {});
    ends = n.attr_ints("ends", {});
    axes = n.attr_ints("axes", {});
  }
  if (axes.empty()) {
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) return std::nullopt;
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  isa::SliceParams p{std::vector<std::int64_t>(x.shape.size(), 0), std::vector<std::int64_t>(x.shape.size(), 1)};
  std::vector<bool> seen(x.shape.size(), false);
  Shape out = x.shape;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || seen[static_cast<std::size_t>(a)] || steps[i] == 0) return std::nullopt;
    const auto ax = static_cast<std::size_t>(a);
    seen[ax] = true;
    const host::SliceDim d = host::slice_dim(x.shape[ax], starts[i], ends[i], steps[i]);
    p.starts[ax] = d.start;
    p.steps[ax] = steps[i];
    out[ax] = d.length;
  }
  if (out != y.shape) return std::nullopt;
  return p;
}

std::optional<isa::PadParams> pad_params(const Graph& g, const Node& n) {
  if (n.op_type != "Pad" || !n.domain.empty() || n.inputs.size() < 2 || n.outputs.empty() || n.inputs[0] < 0 ||
      n.outputs[0] < 0 || !is_constant_input(g, n, 1)) {
    return std::nullopt;
  }
  const Value& x = g.values[static_cast<std::size_t>(n.inputs[0])];
  const Value& y = g.values[static_cast<std::size_t>(n.outputs[0])];
  const auto mode = host::pad_mode(n.attr_string("mode", "constant"));
  if (!mode || !x.has_shape || !y.has_shape || x.shape.size() != y.shape.size()) return std::nullopt;
  const Tensor& pads = *g.values[static_cast<std::size_t>(n.inputs[1])].constant;
  if (pads.dtype() != DType::Int64) return std::nullopt;
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  std::vector<std::int64_t> axes;
  if (!constant_ints(g, n, 3, axes)) return std::nullopt;
  if (n.inputs.size() <= 3 || n.inputs[3] < 0) {
    for (std::int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (static_cast<std::size_t>(pads.elements()) != 2 * axes.size()) return std::nullopt;
  isa::PadParams p{std::vector<std::int64_t>(x.shape.size(), 0), *mode, 0};
  const auto pv = pads.as<std::int64_t>();
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return std::nullopt;
    p.begins[static_cast<std::size_t>(a)] = pv[i];
  }
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    if (p.begins[d] < -x.shape[d] || p.begins[d] > y.shape[d]) return std::nullopt;
    if (*mode != host::PadMode::Constant && x.shape[d] == 0 && y.shape[d] > 0) return std::nullopt;
  }
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    if (!is_constant_input(g, n, 2)) return std::nullopt;
    const Tensor& v = *g.values[static_cast<std::size_t>(n.inputs[2])].constant;
    if (v.elements() != 1 || v.dtype() != x.dtype) return std::nullopt;
    p.value = v.dtype() == DType::Int8 ? std::int32_t{v.as<std::int8_t>()[0]} : std::int32_t{v.as<std::uint8_t>()[0]};
  }
  return p;
}

bool binary_claim(const Graph& g, const Node& n, std::initializer_list<std::size_t> data,
                  std::initializer_list<std::array<std::size_t, 2>> quant_inputs) {
  if (n.outputs.empty() || n.outputs[0] < 0) return false;
  const Value& y = g.values[static_cast<std::size_t>(n.outputs[0])];
  if (!y.has_shape || !is_quantized(y.dtype)) return false;
  for (std::size_t i : data) {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return false;
    const Value& v = g.values[static_cast<std::size_t>(n.inputs[i])];
    if (!is_quantized(v.dtype) || !v.has_shape || v.shape.size() > y.shape.size()) return false;
    const std::size_t lead = y.shape.size() - v.shape.size();
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] != y.shape[lead + d] && v.shape[d] != 1) return false;
    }
  }
  for (const auto& q : quant_inputs) {
    for (std::size_t k = 0; k < 2; ++k) {
      const std::size_t i = q[k];
      if (i >= n.inputs.size() || n.inputs[i] < 0) {
        if (k == 0) return false;  // a scale is required; a zero point defaults to 0
        continue;
      }
      if (!is_constant_input(g, n, i) || g.values[static_cast<std::size_t>(n.inputs[i])].constant->elements() != 1) {
        return false;
      }
    }
  }
  return true;
}

std::optional<isa::ResizeParams> onnx_linear_resize(const Graph& g, const Node& n) {
  if (n.op_type != "Resize" || !n.domain.empty() || n.attr_int("tflite_arithmetic", 0) != 0 ||
      n.attr_string("mode", "nearest") != "linear" || n.attributes.count("axes") || n.inputs.size() < 3 ||
      n.outputs.empty() || n.inputs[0] < 0 || n.outputs[0] < 0) {
    return std::nullopt;
  }
  const Value& x = g.values[static_cast<std::size_t>(n.inputs[0])];
  const Value& y = g.values[static_cast<std::size_t>(n.outputs[0])];
  const std::string coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (!is_quantized(x.dtype) || !x.has_shape || !y.has_shape || x.shape.size() != 4 || y.shape.size() != 4 ||
      x.shape[0] != y.shape[0] || x.shape[1] != y.shape[1] || element_count(y.shape) <= 0 ||
      coord == "tf_crop_and_resize") {
    return std::nullopt;
  }
  std::vector<DType> dtypes;
  for (int i : n.inputs) dtypes.push_back(i >= 0 ? g.values[static_cast<std::size_t>(i)].dtype : DType::Float32);
  if (!host::cpu_op_supported(n, dtypes, nullptr)) return std::nullopt;
  isa::ResizeParams p{.mode = isa::ResizeParams::Mode::OnnxLinear, .coordinate_transformation_mode = coord};
  const bool has_sizes = n.inputs.size() > 3 && n.inputs[3] >= 0;
  const bool has_scales = n.inputs[2] >= 0 && !(is_constant_input(g, n, 2) &&
                                                g.values[static_cast<std::size_t>(n.inputs[2])].constant->elements() == 0);
  if (has_scales == has_sizes) return std::nullopt;
  const std::size_t i = has_scales ? 2 : 3;
  if (!is_constant_input(g, n, i)) return std::nullopt;
  const Tensor& t = *g.values[static_cast<std::size_t>(n.inputs[i])].constant;
  if (t.elements() != 4) return std::nullopt;
  if (has_scales) {
    if (t.dtype() != DType::Float32) return std::nullopt;
    const auto s = t.as<float>();
    if (s[0] != 1.0f || s[1] != 1.0f) return std::nullopt;
    p.scales = std::array<float, 2>{s[2], s[3]};
  } else {
    if (t.dtype() != DType::Int64) return std::nullopt;
    const auto s = t.as<std::int64_t>();
    if (Shape(s.begin(), s.end()) != y.shape) return std::nullopt;
  }
  return p;
}

std::vector<std::size_t> data_inputs(const Node& n) {
  if (n.op_type == "Concat") {
    std::vector<std::size_t> all(n.inputs.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  return {0};
}

}  // namespace detail

std::vector<std::string> supported_operators() {
  std::vector<std::string> out;
  for (const auto& row : detail::npu_table()) {
    out.push_back(fmt::format("{}: {} ({})", row.claims ? "NPU" : "host", row.op, row.condition));
  }
  out.emplace_back("QDQ: DequantizeLinear -> data-movement ops -> QuantizeLinear groups run on the NPU");
  out.emplace_back("TFLite models: the operators of compiler::tflite_supported_operators() map onto the above "
                   "(AVERAGE_POOL_2D runs on the host as furiosa::QuantizedAveragePool)");
  std::string host = "host external operators:";
  for (const auto& op : host::cpu_op_list()) host += " " + op;
  out.push_back(host);
  return out;
}

std::vector<NpuOperatorInfo> npu_operator_table() {
  std::vector<NpuOperatorInfo> out;
  for (const auto& row : detail::npu_table()) {
    out.push_back({std::string(row.op), std::string(row.condition), row.claims == nullptr});
  }
  return out;
}

std::vector<std::string> npu_operators() {
  std::vector<std::string> out;
  for (const auto& row : detail::npu_table()) {
    if (!row.op.starts_with("furiosa::")) out.emplace_back(row.op);
  }
  return out;
}

}  // namespace furiosa::compiler
