// TFLite's SUM and REDUCE_MAX with constant axes (importer.h), on the model's own layout:
//  - SUM on uint8 (kernels/reduce.cc EvalSum): when the input and output parameters differ,
//    reference_ops::QuantizedMeanOrSum with compute_sum: the int32 sum of the stored values,
//    m = QuantizeMultiplier(double(in_scale) / out_scale) (PrepareMeanOrSum; not divided by the
//    count as MEAN's is), mbqm(sum - zp_in * count, m) + zp_out, saturated ->
//    furiosa::QuantizedMean with that multiplier (host). With equal parameters TFLite adds the
//    stored values in the 8-bit type itself (wrapping around), which is refused, as are float32 and
//    int8 SUM (TFLite 2.14's reference kernel, the peer, gave -1 for every output of rescaling int8
//    SUMs: nothing to match);
//  - REDUCE_MAX: the largest stored value (TFLite requires equal input and output parameters) ->
//    ReduceMax (host), float32, uint8 and int8.
// Empty axes copy the input (TFLite's ReduceIsCopy); duplicate axes count once (ResolveAxis).
#include <fmt/format.h>

#include "furiosa/device/isa.h"
#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

Importer::Reduced Importer::reduced_operands(const fb::Operator& op) const {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  Reduced r;
  r.x = in[0];
  r.y = out[0];
  if (!is_constant(in[1])) unsupported(fmt::format("axis '{}' must be constant", info(in[1]).name));
  const auto* o = op.builtin_options_as_ReducerOptions();
  r.keep = o && o->keep_dims();
  const Shape& xs = info(r.x).shape;
  const auto rank = static_cast<std::int64_t>(xs.size());
  std::vector<bool> reduced(xs.size(), false);
  for (auto a : int_constant(in[1], "axis")) {
    const std::int64_t ax = a < 0 ? a + rank : a;
    if (ax < 0 || ax >= rank) {
      bad(fmt::format("axis {} is out of range for input '{}' {}", a, info(r.x).name,
                      shape_to_string(xs)));
    }
    reduced[static_cast<std::size_t>(ax)] = true;
  }
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (!reduced[i]) {
      r.shape.push_back(xs[i]);
      continue;
    }
    r.axes.push_back(static_cast<std::int64_t>(i));
    r.count *= xs[i];
    if (r.keep) r.shape.push_back(1);
  }
  check_output_shape(r.y, r.shape);
  const DType d = dtype(r.x);
  if (d != dtype(r.y)) {
    bad(fmt::format("input '{}' is {}, output '{}' {}", info(r.x).name, dtype_name(d),
                    info(r.y).name, dtype_name(dtype(r.y))));
  }
  if (d != DType::Float32 && !is_quantized(d)) {
    unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported",
                            info(r.x).name, dtype_name(d)));
  }
  return r;
}

bool Importer::reduce_copy(const Reduced& r) {
  if (!r.axes.empty()) return false;
  add_node("Reshape", "", {model_view(r.x), shape_constant(info(r.y).name + "/shape", r.shape)},
           {output_model(r.y)}, {});
  return true;
}

void Importer::sum(const fb::Operator& op) {
  const Reduced r = reduced_operands(op);
  const DType d = dtype(r.x);
  if (d != DType::UInt8) {
    unsupported(fmt::format("input '{}' is {}; only uint8 SUM is supported", info(r.x).name,
                            dtype_name(d)));
  }
  const Quant xq = quant(r.x), yq = quant(r.y);
  if (xq.scale == yq.scale && xq.zero_point == yq.zero_point) {
    unsupported(fmt::format(
        "input '{}' and output '{}' share their quantization parameters; TFLite then adds the "
        "stored values in {} itself (wrapping around), which is not supported",
        info(r.x).name, info(r.y).name, dtype_name(d)));
  }
  if (reduce_copy(r)) return;
  if (r.count >= (std::int64_t{1} << 23)) {
    unsupported(fmt::format("{} elements per sum are more than the int32 sum holds exactly (2^23)",
                            r.count));
  }
  const isa::QuantizedMultiplier m =
      isa::quantize_multiplier(static_cast<double>(xq.scale) / static_cast<double>(yq.scale));
  if (m.shift < -31 || m.shift > 30) {
    unsupported(fmt::format("the scale ratio {} / {} needs a shift of {}, outside [-31, 30]",
                            xq.scale, yq.scale, m.shift));
  }
  std::map<std::string, Attribute> attrs = {{"axes", r.axes},
                                            {"keepdims", std::int64_t{r.keep ? 1 : 0}},
                                            {"x_zero_point", std::int64_t{xq.zero_point}},
                                            {"y_zero_point", std::int64_t{yq.zero_point}},
                                            {"fixed_point_multiplier", std::int64_t{m.multiplier}},
                                            {"fixed_point_shift", std::int64_t{m.shift}}};
  add_node("QuantizedMean", "furiosa", {model_view(r.x)}, {output_model(r.y)}, std::move(attrs));
}

void Importer::reduce_max(const fb::Operator& op) {
  const Reduced r = reduced_operands(op);
  if (is_quantized(dtype(r.x))) {
    const Quant xq = quant(r.x), yq = quant(r.y);
    if (xq.scale != yq.scale || xq.zero_point != yq.zero_point) {
      bad(
          fmt::format("input '{}' and output '{}' must share their quantization parameters (as "
                      "TFLite requires)",
                      info(r.x).name, info(r.y).name));
    }
  }
  if (reduce_copy(r)) return;
  add_node("ReduceMax", "", {model_view(r.x)}, {output_model(r.y)},
           {{"axes", r.axes}, {"keepdims", std::int64_t{r.keep ? 1 : 0}}});
}

}  // namespace furiosa::compiler::detail::tflite
