// Private helpers of compiler-bridge.
#include "graph_utils.h"

#include <fmt/format.h>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"

namespace furiosa::compiler::detail {

bool is_constant_input(const Graph& g, const Node& node, std::size_t i) {
  return i < node.inputs.size() && node.inputs[i] >= 0 &&
         g.values[static_cast<std::size_t>(node.inputs[i])].constant.has_value();
}

const Tensor& constant_input(const Graph& g, const Node& node, std::size_t i, const char* what) {
  if (i >= node.inputs.size() || node.inputs[i] < 0) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): input {} ({}) is missing", node.name, node.op_type, i,
                            what));
  }
  const Value& v = g.values[static_cast<std::size_t>(node.inputs[i])];
  if (!v.constant) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): input {} ({}) '{}' must be a constant (initializer)",
                            node.name, node.op_type, i, what, v.name));
  }
  return *v.constant;
}

std::vector<float> float_values(const Tensor& t) {
  if (t.dtype() != DType::Float32) {
    throw Error(ErrorCode::IncompatibleModel, "scale tensor must be float32");
  }
  auto s = t.as<float>();
  return {s.begin(), s.end()};
}

std::vector<std::int32_t> int_values(const Tensor& t) {
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(t.elements()));
  switch (t.dtype()) {
    case DType::UInt8: for (auto v : t.as<std::uint8_t>()) out.push_back(v); break;
    case DType::Int8: for (auto v : t.as<std::int8_t>()) out.push_back(v); break;
    case DType::Int32: for (auto v : t.as<std::int32_t>()) out.push_back(v); break;
    default: throw Error(ErrorCode::IncompatibleModel, "zero point tensor must be an integer type");
  }
  return out;
}

ScalarQuant scalar_quant(const Graph& g, const Node& node, std::size_t scale_i, std::size_t zp_i) {
  ScalarQuant q;
  const Tensor& s = constant_input(g, node, scale_i, "scale");
  if (s.elements() != 1 || s.dtype() != DType::Float32) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): input {} must be a float32 scalar scale, got {} {}",
                            node.name, node.op_type, scale_i, dtype_name(s.dtype()),
                            shape_to_string(s.shape())));
  }
  q.scale = s.as<float>()[0];
  if (zp_i < node.inputs.size() && node.inputs[zp_i] >= 0) {
    const Tensor& z = constant_input(g, node, zp_i, "zero point");
    if (z.elements() != 1 || (z.dtype() != DType::UInt8 && z.dtype() != DType::Int8)) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): input {} must be a uint8/int8 scalar zero point",
                              node.name, node.op_type, zp_i));
    }
    q.zero_point = int_values(z)[0];
    q.dtype = z.dtype();
  }
  if (!(q.scale > 0.0f)) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): scale must be positive, got {}", node.name,
                            node.op_type, q.scale));
  }
  return q;
}

Window2d resolve_window(const Node& node, std::array<std::int64_t, 2> kernel,
                        std::array<std::int64_t, 2> in, bool ceil_mode) {
  Window2d w;
  w.kernel = kernel;
  auto get2 = [&](const char* key, std::array<std::int64_t, 2> fallback) {
    auto v = node.attr_ints(key, {fallback[0], fallback[1]});
    if (v.size() != 2) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): attribute '{}' must have 2 values (2-D only)",
                              node.name, node.op_type, key));
    }
    return std::array<std::int64_t, 2>{v[0], v[1]};
  };
  w.strides = get2("strides", {1, 1});
  w.dilations = get2("dilations", {1, 1});
  auto pads = node.attr_ints("pads", {0, 0, 0, 0});
  if (pads.size() != 4) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): attribute 'pads' must have 4 values", node.name,
                            node.op_type));
  }
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  // ONNX Conv/QLinearConv/pooling: pads "cannot be used simultaneously with auto_pad".
  if (auto_pad != "NOTSET" && node.attributes.count("pads") != 0) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): attributes 'auto_pad' ({}) and 'pads' are both set; ONNX allows "
                            "'pads' only with auto_pad NOTSET",
                            escape_text(node.name), escape_text(node.op_type), escape_text(auto_pad, 32)),
                ErrorSubject::of_node(node.name));
  }
  for (int d = 0; d < 2; ++d) {
    if (w.strides[d] < 1 || w.dilations[d] < 1 || w.kernel[d] < 1) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): kernel, strides and dilations must be >= 1",
                              node.name, node.op_type));
    }
    const std::int64_t eff = (w.kernel[d] - 1) * w.dilations[d] + 1;
    std::int64_t begin = pads[d], end = pads[d + 2];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const std::int64_t out = (in[d] + w.strides[d] - 1) / w.strides[d];
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * w.strides[d] + eff - in[d]);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (auto_pad == "VALID") {
      begin = end = 0;
    } else if (auto_pad != "NOTSET") {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): unknown auto_pad '{}'", node.name, node.op_type,
                              auto_pad));
    }
    const std::int64_t span = in[d] + begin + end - eff;
    if (span < 0) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): window {} does not fit the padded input {}",
                              node.name, node.op_type, eff, in[d] + begin + end));
    }
    std::int64_t out = (ceil_mode ? (span + w.strides[d] - 1) / w.strides[d] : span / w.strides[d]) + 1;
    // ONNX pooling: with ceil_mode the last window must start inside the input or left padding.
    if (ceil_mode && (out - 1) * w.strides[d] >= in[d] + begin) --out;
    w.pads[d] = begin;
    w.pads[d + 2] = end;
    w.out[d] = out;
  }
  return w;
}

}  // namespace furiosa::compiler::detail
