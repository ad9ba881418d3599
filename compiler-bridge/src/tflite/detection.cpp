// TFLite_Detection_PostProcess (custom operator; importer.h) -> furiosa::TFLiteDetectionPostProcess
// (host/cpu_ops.h), which follows kernels/detection_postprocess.cc; its options come from the
// operator's FlexBuffer map.
#include <fmt/format.h>

#include <flatbuffers/flexbuffers.h>

#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

int Importer::float_view(int t, const char* what) {
  const DType d = dtype(t);
  if (d == DType::Float32) return model_view(t);
  if (!is_quantized(d)) bad(fmt::format("{} '{}' is {}; float32, uint8 and int8 are supported", what, info(t).name, dtype_name(d)));
  const Quant q = quant(t);
  const std::string base = info(t).name;
  const int v = add_value(base + "/dequantized", DType::Float32, info(t).shape);
  add_node("DequantizeLinear", "", {model_view(t), scale_constant(base + "/scale", {q.scale}),
                                    zero_point_constant(base + "/zero_point", d, {q.zero_point})}, {v}, {}, "/dequantize");
  return v;
}

// TFLite_Detection_PostProcess (custom) -> furiosa::TFLiteDetectionPostProcess with the options
// of its FlexBuffer map. Quantized box encodings and class predictions are dequantized first
// ((q - zero_point) * scale in float32, as the kernel does); the constant anchors are
// dequantized here.
void Importer::detection_postprocess(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_outputs(in, 3, out, 4);
  const auto* opts = op.custom_options();
  if (!opts || opts->size() == 0) bad("has no custom_options (its FlexBuffer map of options)");
  if (!flexbuffers::VerifyBuffer(opts->data(), opts->size())) bad("custom_options is not a valid FlexBuffer");
  const auto root = flexbuffers::GetRoot(opts->data(), opts->size());
  if (!root.IsMap()) bad("custom_options is not a FlexBuffer map");
  const flexbuffers::Map map = root.AsMap();
  auto option = [&](const char* key, bool required) {
    const flexbuffers::Reference r = map[key];
    if (required && r.IsNull()) bad(fmt::format("custom option '{}' is missing", key));
    return r;
  };
  std::map<std::string, Attribute> attrs;
  for (const char* key : {"max_detections", "max_classes_per_detection", "num_classes"}) {
    attrs[key] = std::int64_t{option(key, true).AsInt32()};
  }
  const auto per_class = option("detections_per_class", false);
  attrs["detections_per_class"] = std::int64_t{per_class.IsNull() ? 100 : per_class.AsInt32()};
  const auto regular = option("use_regular_nms", false);
  attrs["use_regular_nms"] = std::int64_t{!regular.IsNull() && regular.AsBool() ? 1 : 0};
  for (const char* key : {"nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale", "h_scale", "w_scale"}) {
    attrs[key] = option(key, true).AsFloat();
  }
  const std::int64_t max_det = std::get<std::int64_t>(attrs["max_detections"]);
  const std::int64_t per_det = std::get<std::int64_t>(attrs["max_classes_per_detection"]);
  if (max_det < 0 || per_det < 1) bad(fmt::format("max_detections {} and max_classes_per_detection {} must be >= 0 and >= 1", max_det, per_det));
  const int anchors = in[2];
  require_constant(anchors, "anchors");
  const Shape& as = info(anchors).shape;
  if (as.size() != 2 || as[1] != 4) bad(fmt::format("anchors '{}' must be [anchors, 4], is {}", info(anchors).name, shape_to_string(as)));
  const Tensor at = constant_tensor(anchors);
  Tensor af(DType::Float32, as);
  if (at.dtype() == DType::Float32) {
    af = at;
  } else if (is_quantized(at.dtype())) {
    const Quant q = quant(anchors);
    for (std::size_t i = 0; i < static_cast<std::size_t>(at.elements()); ++i) {
      const float v = at.dtype() == DType::UInt8 ? static_cast<float>(at.as<std::uint8_t>()[i]) : static_cast<float>(at.as<std::int8_t>()[i]);
      af.as<float>()[i] = (v - static_cast<float>(q.zero_point)) * q.scale;
    }
  } else {
    bad(fmt::format("anchors '{}' are {}; float32, uint8 and int8 are supported", info(anchors).name, dtype_name(at.dtype())));
  }
  const std::int64_t n = max_det * per_det;
  const std::array<Shape, 4> shapes = {Shape{1, n, 4}, Shape{1, n}, Shape{1, n}, Shape{1}};
  std::vector<int> outs;
  for (std::size_t k = 0; k < 4; ++k) {
    TInfo& ti = info(out[k]);
    if (dtype(out[k]) != DType::Float32) bad(fmt::format("output '{}' is {}; the outputs are float32", ti.name, dtype_name(dtype(out[k]))));
    if (ti.shape.empty()) ti.shape = shapes[k];  // converters may leave the shapes to the kernel
    check_output_shape(out[k], shapes[k]);
    outs.push_back(output_model(out[k]));
  }
  const int boxes = float_view(in[0], "box encodings"), scores = float_view(in[1], "class predictions");
  add_node("TFLiteDetectionPostProcess", "furiosa", {boxes, scores, add_constant(info(anchors).name + "/float", std::move(af))},
           outs, std::move(attrs));
}

}  // namespace furiosa::compiler::detail::tflite
