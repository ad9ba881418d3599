// make-tflite-ssd OUT_DIR: writes a small uint8 SSD detector in the layout TOCO gives TF Object
// Detection API models (ssd_mobilenet_v1_quantized and the like), with seeded weights, and three
// seeded input images, for the comparison with TensorFlow Lite in
// tests/tflite_peer/test_tflite_peer_ssd.cpp (CTest fixture tflite_ssd_model,
// tests/CMakeLists.txt).
//
// The network (uint8, per-tensor quantization, every activation's range calibrated on the three
// inputs as a converter calibrates on representative data):
//   image [1, 96, 96, 3] (scale 1/128, zero point 128)
//   CONV_2D 3x3/2 -> 8, RELU6; DEPTHWISE 3x3/2, RELU6; CONV_2D 1x1 -> 16, RELU6;
//   DEPTHWISE 3x3/2, RELU6; CONV_2D 1x1 -> 32, RELU6              = feature map 0, 12 x 12
//   DEPTHWISE 3x3/2, RELU6; CONV_2D 1x1 -> 32, RELU6              = feature map 1, 6 x 6
//   per map: box head CONV_2D 1x1 -> 3 anchors x 4 and class head CONV_2D 1x1 -> 3 x (4 + 1)
//   RESHAPE [1, -1, 4] and [1, -1, 5], CONCATENATION on axis 1 (the maps' heads share the
//   concatenation's quantization, as TOCO makes them: no rescaling), LOGISTIC on the class logits
//   (scale 1/256, zero point 0, as TFLite requires)
//   TFLite_Detection_PostProcess(box encodings [1, 540, 4], scores [1, 540, 5], anchors [540, 4])
//   with y/x/h/w scales 10, 10, 5, 5, 4 classes, max_detections 16, one class per detection,
//   score threshold 0.6, IoU threshold 0.6.
// The anchors are SSD's (TF's multiple grid anchor generator): scales 0.2 and 0.45, aspect ratios
// 1, 2 and 1/2, centers at the cell centers, in the order of the heads' reshape (y, x, anchor);
// (y_center, x_center, h, w) constants, quantized to uint8 with their range as TOCO quantizes
// a quantized detector's anchors.
// Each class's head bias is set so that about 0.7% of the (anchor, input) pairs score above
// the threshold (0.6): seeded random weights alone would give either no detections or hundreds.
//
// Files written: ssd_fast.tflite (use_regular_nms false), ssd_regular.tflite (true),
// ssd_fast_multiclass.tflite (use_regular_nms false, max_classes_per_detection 3: outputs of
// 16 x 3 slots),
// ssd_heads.tflite (the same network without the post-processing: outputs are the box encodings
// "concat" and the LOGISTIC scores "convert_scores", the post-processing's two inputs),
// ssd_postprocess_fast.tflite and ssd_postprocess_regular.tflite (the post-processing alone, its
// inputs those two tensors), input_0.npy .. input_2.npy (uint8 [1, 96, 96, 3]). Deterministic:
// the same files on every run.
#include <flatbuffers/flexbuffers.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/runtime/tensor_file.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fs = std::filesystem;
namespace fb = furiosa::tflite_fb;

namespace {

constexpr int kImage = 96;
constexpr int kClasses = 4;             // without the background column
constexpr int kAnchorsPerCell = 3;
constexpr int kInputs = 3;
constexpr double kScoreThreshold = 0.6;
constexpr int kMaxDetections = 16;

struct QParams {
  float scale = 1;
  int zero_point = 0;
};

// Asymmetric uint8 parameters covering [lo, hi] (0 always representable), as TOCO chooses them.
QParams uint8_params(double lo, double hi) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (hi - lo < 1e-6) hi = lo + 1e-6;
  QParams q;
  q.scale = static_cast<float>((hi - lo) / 255.0);
  q.zero_point = static_cast<int>(std::clamp(std::round(-lo / q.scale), 0.0, 255.0));
  return q;
}

std::uint8_t quantize(double v, const QParams& q) {
  return static_cast<std::uint8_t>(std::clamp(std::round(v / q.scale) + q.zero_point, 0.0, 255.0));
}
double dequantize(std::uint8_t v, const QParams& q) { return (static_cast<int>(v) - q.zero_point) * static_cast<double>(q.scale); }

// One convolution layer of the network: its topology, quantized weights and bias, and the
// calibrated output parameters.
struct Layer {
  std::string name;
  int input = -1;  // layer index, -1: the image
  bool depthwise = false;
  int k = 1, stride = 1, cout = 0;
  bool relu6 = true;
  Shape ws;                        // OHWI, or 1HWO for depthwise
  std::vector<std::uint8_t> w;     // quantized weights
  QParams wq;
  std::vector<double> bias_real;   // float bias before quantization
  std::vector<std::int32_t> bias;  // int32, scale in_scale * w_scale
  QParams out;
  Shape out_shape;                 // NHWC
};

// A fake-quantized activation: real values on the uint8 grid of `q`, NHWC.
struct Act {
  std::vector<double> v;
  Shape s;
  QParams q;
};

class SsdNet {
 public:
  explicit SsdNet(std::uint32_t seed) : rng_(seed) {
    add("conv0", -1, false, 3, 2, 8, true);
    add("dw1", 0, true, 3, 2, 8, true);
    add("pw1", 1, false, 1, 1, 16, true);
    add("dw2", 2, true, 3, 2, 16, true);
    add("pw2", 3, false, 1, 1, 32, true);  // feature map 0
    add("dw3", 4, true, 3, 2, 32, true);
    add("pw3", 5, false, 1, 1, 32, true);  // feature map 1
    add("box0", 4, false, 1, 1, kAnchorsPerCell * 4, false);
    add("cls0", 4, false, 1, 1, kAnchorsPerCell * (kClasses + 1), false);
    add("box1", 6, false, 1, 1, kAnchorsPerCell * 4, false);
    add("cls1", 6, false, 1, 1, kAnchorsPerCell * (kClasses + 1), false);
  }

  std::vector<Layer> layers;
  QParams image_q{1.0f / 128, 128};

  // Chooses every layer's weight quantization, bias and output parameters from a float run on
  // `images` (fake-quantized between layers, as the integer network sees them).
  void calibrate(const std::vector<std::vector<std::uint8_t>>& images) {
    std::vector<Act> in;
    for (const auto& img : images) {
      Act a{{}, {1, kImage, kImage, 3}, image_q};
      for (auto b : img) a.v.push_back(dequantize(b, image_q));
      in.push_back(std::move(a));
    }
    std::vector<std::vector<Act>> acts(layers.size());
    for (std::size_t l = 0; l < layers.size(); ++l) {
      Layer& L = layers[l];
      const auto& src = L.input < 0 ? in : acts[static_cast<std::size_t>(L.input)];
      const QParams in_q = src[0].q;
      const bool is_class = L.name.rfind("cls", 0) == 0;
      if (is_class) set_class_bias(L, src);
      quantize_bias(L, in_q);
      std::vector<std::vector<double>> outs;
      double lo = 0, hi = 0;
      for (const auto& a : src) {
        outs.push_back(run(L, a, in_q));
        for (double v : outs.back()) lo = std::min(lo, v), hi = std::max(hi, v);
      }
      L.out = L.relu6 ? uint8_params(0, std::min(hi, 6.0)) : uint8_params(lo, hi);
      for (auto& o : outs) {
        Act a{std::move(o), L.out_shape, L.out};
        for (double& v : a.v) v = dequantize(quantize(v, L.out), L.out);
        acts[l].push_back(std::move(a));
      }
    }
    // The heads of both maps feed one CONCATENATION each: one set of parameters covering both
    // (TOCO's unified concatenation ranges), so the concatenation copies bytes.
    for (auto [a, b] : {std::pair{7, 9}, std::pair{8, 10}}) {
      Layer& A = layers[static_cast<std::size_t>(a)];
      Layer& B = layers[static_cast<std::size_t>(b)];
      const double lo = std::min(-A.out.zero_point * static_cast<double>(A.out.scale), -B.out.zero_point * static_cast<double>(B.out.scale));
      const double hi = std::max((255 - A.out.zero_point) * static_cast<double>(A.out.scale), (255 - B.out.zero_point) * static_cast<double>(B.out.scale));
      A.out = B.out = uint8_params(lo, hi);
    }
  }

 private:
  std::mt19937 rng_;

  void add(const std::string& name, int input, bool depthwise, int k, int stride, int cout, bool relu6) {
    Layer L;
    L.name = name;
    L.input = input;
    L.depthwise = depthwise;
    L.k = k;
    L.stride = stride;
    L.cout = cout;
    L.relu6 = relu6;
    const int cin = input < 0 ? 3 : layers[static_cast<std::size_t>(input)].cout;
    const int in_size = input < 0 ? kImage : static_cast<int>(layers[static_cast<std::size_t>(input)].out_shape[1]);
    const int out_size = (in_size + stride - 1) / stride;  // SAME
    L.out_shape = {1, out_size, out_size, cout};
    L.ws = depthwise ? Shape{1, k, k, cout} : Shape{cout, k, k, cin};
    // He-normal float weights, quantized per tensor over their own range.
    const double fan_in = depthwise ? k * k : k * k * cin;
    std::normal_distribution<double> wd(0.0, std::sqrt(2.0 / fan_in));
    std::vector<double> wf(static_cast<std::size_t>(element_count(L.ws)));
    double lo = 0, hi = 0;
    for (double& v : wf) {
      v = wd(rng_);
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
    L.wq = uint8_params(lo, hi);
    for (double v : wf) L.w.push_back(quantize(v, L.wq));
    std::normal_distribution<double> bd(0.0, relu6 ? 0.2 : 0.1);
    for (int c = 0; c < cout; ++c) L.bias_real.push_back(bd(rng_));
    layers.push_back(std::move(L));
  }

  static void quantize_bias(Layer& L, const QParams& in_q) {
    L.bias.clear();
    const double s = static_cast<double>(in_q.scale) * static_cast<double>(L.wq.scale);
    for (double b : L.bias_real) L.bias.push_back(static_cast<std::int32_t>(std::round(b / s)));
  }

  // The layer in float on fake-quantized input `a`: dequantized weights, the int32 bias's value.
  std::vector<double> run(const Layer& L, const Act& a, const QParams& in_q) const {
    std::vector<double> w;
    for (auto b : L.w) w.push_back(dequantize(b, L.wq));
    std::vector<double> bias;
    for (auto b : L.bias) bias.push_back(b * static_cast<double>(in_q.scale) * static_cast<double>(L.wq.scale));
    Shape os;
    auto y = test::conv_ref(a.v, a.s, w, L.ws, bias, L.stride, true, L.depthwise, &os);
    if (os != L.out_shape) throw Error(ErrorCode::Internal, fmt::format("{}: shape {} != {}", L.name, shape_to_string(os), shape_to_string(L.out_shape)));
    if (L.relu6) {
      for (double& v : y) v = std::clamp(v, 0.0, 6.0);
    }
    return y;
  }

  // Class head biases: the background column 0 keeps its random bias; class c's bias puts the
  // 99.3th percentile of its logits (over anchors, cells and inputs) at logit(0.6).
  void set_class_bias(Layer& L, const std::vector<Act>& src) {
    const QParams in_q = src[0].q;
    std::fill(L.bias_real.begin(), L.bias_real.end(), 0.0);
    quantize_bias(L, in_q);
    std::vector<std::vector<double>> per_class(kClasses + 1);
    for (const auto& a : src) {
      const auto y = run(L, a, in_q);
      for (std::size_t i = 0; i < y.size(); ++i) per_class[i % (kClasses + 1)].push_back(y[i]);
    }
    std::normal_distribution<double> bd(0.0, 0.1);
    const double target = std::log(kScoreThreshold / (1 - kScoreThreshold));
    for (int c = 0; c <= kClasses; ++c) {
      auto& v = per_class[static_cast<std::size_t>(c)];
      std::sort(v.begin(), v.end());
      const double q = v[static_cast<std::size_t>(0.993 * static_cast<double>(v.size() - 1))];
      const double b = c == 0 ? bd(rng_) : target - q;
      for (int a = 0; a < kAnchorsPerCell; ++a) L.bias_real[static_cast<std::size_t>(a * (kClasses + 1) + c)] = b;
    }
  }
};

// SSD anchors (y_center, x_center, h, w) for feature maps of `sizes` cells with one scale each.
std::vector<float> ssd_anchors(const std::vector<int>& sizes, const std::vector<double>& scales) {
  const double ratios[kAnchorsPerCell] = {1.0, 2.0, 0.5};
  std::vector<float> out;
  for (std::size_t m = 0; m < sizes.size(); ++m) {
    const int f = sizes[m];
    for (int y = 0; y < f; ++y)
      for (int x = 0; x < f; ++x)
        for (double r : ratios) {
          out.push_back(static_cast<float>((y + 0.5) / f));
          out.push_back(static_cast<float>((x + 0.5) / f));
          out.push_back(static_cast<float>(scales[m] / std::sqrt(r)));
          out.push_back(static_cast<float>(scales[m] * std::sqrt(r)));
        }
  }
  return out;
}

// A seeded synthetic photograph: a smooth two-color gradient, six filled rectangles and ellipses
// of random colors and sizes, and some noise. uint8 [96, 96, 3] row-major.
std::vector<std::uint8_t> make_image(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> img(static_cast<std::size_t>(kImage * kImage * 3));
  double c0[3], c1[3];
  for (int c = 0; c < 3; ++c) c0[c] = 255 * u(rng), c1[c] = 255 * u(rng);
  const double angle = 6.283185307179586 * u(rng);
  for (int y = 0; y < kImage; ++y)
    for (int x = 0; x < kImage; ++x) {
      const double t = 0.5 + 0.5 * std::sin(angle) * (y / double(kImage) - 0.5) + 0.5 * std::cos(angle) * (x / double(kImage) - 0.5);
      for (int c = 0; c < 3; ++c) img[static_cast<std::size_t>((y * kImage + x) * 3 + c)] = c0[c] * (1 - t) + c1[c] * t;
    }
  for (int s = 0; s < 6; ++s) {
    const double cy = kImage * u(rng), cx = kImage * u(rng);
    const double hy = kImage * (0.08 + 0.25 * u(rng)), hx = kImage * (0.08 + 0.25 * u(rng));
    const bool ellipse = u(rng) < 0.5;
    double col[3];
    for (double& c : col) c = 255 * u(rng);
    for (int y = 0; y < kImage; ++y)
      for (int x = 0; x < kImage; ++x) {
        const double dy = (y - cy) / hy, dx = (x - cx) / hx;
        const bool inside = ellipse ? dy * dy + dx * dx <= 1 : std::abs(dy) <= 1 && std::abs(dx) <= 1;
        if (!inside) continue;
        for (int c = 0; c < 3; ++c) img[static_cast<std::size_t>((y * kImage + x) * 3 + c)] = col[c];
      }
  }
  std::normal_distribution<double> noise(0.0, 6.0);
  std::vector<std::uint8_t> out;
  for (double v : img) out.push_back(static_cast<std::uint8_t>(std::clamp(std::round(v + noise(rng)), 0.0, 255.0)));
  return out;
}

// The full models (fast / regular NMS), the network without the post-processing, and the
// post-processing alone (inputs: the heads' two tensors, with their quantization).
enum class Variant { Fast, Regular, FastMulticlass, Heads, PostFast, PostRegular };

// Tensor indices of the network's image input and its two head outputs.
struct NetworkTensors {
  int image, boxes, scores;
};

// Writes the network (image -> box encodings "concat" [1, A, 4] and LOGISTIC scores
// "convert_scores" [1, A, C + 1]) into `w`.
NetworkTensors write_network(test::TfliteWriter& w, const SsdNet& net, int A) {
  auto& b = w.builder();
  auto qspec = [](const QParams& q) { return test::QSpec{{q.scale}, {q.zero_point}}; };
  auto shape32 = [](const Shape& s) { return std::vector<std::int32_t>(s.begin(), s.end()); };
  const auto iq = qspec(net.image_q);
  const int image = w.tensor("normalized_input_image_tensor", fb::TensorType::UINT8, {1, kImage, kImage, 3}, &iq);
  std::vector<int> out_tensor(net.layers.size());
  for (std::size_t l = 0; l < net.layers.size(); ++l) {
    const Layer& L = net.layers[l];
    const int x = L.input < 0 ? image : out_tensor[static_cast<std::size_t>(L.input)];
    const QParams in_q = L.input < 0 ? net.image_q : net.layers[static_cast<std::size_t>(L.input)].out;
    const auto wq = qspec(L.wq);
    const test::QSpec bq{{in_q.scale * L.wq.scale}, {0}};
    const auto oq = qspec(L.out);
    const int wt = w.tensor(L.name + "/weights", fb::TensorType::UINT8, shape32(L.ws), &wq, &L.w);
    const auto bias_bytes = test::raw_bytes(L.bias);
    const int bt = w.tensor(L.name + "/bias", fb::TensorType::INT32, {L.cout}, &bq, &bias_bytes);
    const int y = w.tensor(L.name + "/output", fb::TensorType::UINT8, shape32(L.out_shape), &oq);
    const auto act = L.relu6 ? fb::ActivationFunctionType::RELU6 : fb::ActivationFunctionType::NONE;
    if (L.depthwise) {
      w.op(4, {x, wt, bt}, {y}, fb::BuiltinOptions::DepthwiseConv2DOptions,
           fb::CreateDepthwiseConv2DOptions(b, fb::Padding::SAME, L.stride, L.stride, 1, act).Union());
    } else {
      w.op(3, {x, wt, bt}, {y}, fb::BuiltinOptions::Conv2DOptions,
           fb::CreateConv2DOptions(b, fb::Padding::SAME, L.stride, L.stride, act).Union());
    }
    out_tensor[l] = y;
  }
  // Per map: RESHAPE of the NHWC head to [1, cells * anchors, depth] (a constant shape input and
  // the new_shape option, as converters write both), then one CONCATENATION per head kind.
  auto concat_heads = [&](int first, int second, int depth, const std::string& name) {
    std::vector<std::int32_t> parts;
    for (int l : {first, second}) {
      const Layer& L = net.layers[static_cast<std::size_t>(l)];
      const std::int32_t rows = static_cast<std::int32_t>(element_count(L.out_shape) / depth);
      const std::vector<std::int32_t> new_shape = {1, rows, depth};
      const auto shape_bytes = test::raw_bytes(new_shape);
      const int st = w.tensor(L.name + "/reshape/shape", fb::TensorType::INT32, {3}, nullptr, &shape_bytes);
      const auto oq = qspec(L.out);
      const int r = w.tensor(L.name + "/reshape", fb::TensorType::UINT8, new_shape, &oq);
      w.op(22, {out_tensor[static_cast<std::size_t>(l)], st}, {r}, fb::BuiltinOptions::ReshapeOptions,
           fb::CreateReshapeOptionsDirect(b, &new_shape).Union());
      parts.push_back(r);
    }
    const auto cq = qspec(net.layers[static_cast<std::size_t>(first)].out);
    const int c = w.tensor(name, fb::TensorType::UINT8, {1, A, depth}, &cq);
    w.op(2, parts, {c}, fb::BuiltinOptions::ConcatenationOptions, fb::CreateConcatenationOptions(b, 1).Union());
    return c;
  };
  const int boxes = concat_heads(7, 9, 4, "concat");
  const int logits = concat_heads(8, 10, kClasses + 1, "concat_1");
  const test::QSpec sq{{1.0f / 256}, {0}};
  const int scores = w.tensor("convert_scores", fb::TensorType::UINT8, {1, A, kClasses + 1}, &sq);
  w.op(14, {logits}, {scores});
  return {image, boxes, scores};
}

std::string write_model(const SsdNet& net, const std::vector<float>& anchors, Variant variant) {
  test::TfliteWriter w;
  auto qspec = [](const QParams& q) { return test::QSpec{{q.scale}, {q.zero_point}}; };
  const int A = static_cast<int>(anchors.size() / 4);
  const bool post_only = variant == Variant::PostFast || variant == Variant::PostRegular;
  const bool regular = variant == Variant::Regular || variant == Variant::PostRegular;
  int boxes = -1, scores = -1;
  std::vector<std::int32_t> inputs;
  const test::QSpec sq{{1.0f / 256}, {0}};
  if (post_only) {
    const auto bq = qspec(net.layers[7].out);
    boxes = w.tensor("concat", fb::TensorType::UINT8, {1, A, 4}, &bq);
    scores = w.tensor("convert_scores", fb::TensorType::UINT8, {1, A, kClasses + 1}, &sq);
    inputs = {boxes, scores};
  } else {
    const auto t = write_network(w, net, A);
    boxes = t.boxes;
    scores = t.scores;
    inputs = {t.image};
    if (variant == Variant::Heads) return w.finish(inputs, {boxes, scores});
  }

  // uint8 anchors, as TOCO writes a quantized detector's: TFLite's kernel dequantizes the anchors
  // with their own parameters whenever the box encodings are uint8 (float32 anchors would be read
  // as bytes). Scale and zero point from the anchors' range, as a converter's min / max give them.
  const auto [lo_it, hi_it] = std::minmax_element(anchors.begin(), anchors.end());
  const float lo = std::min(*lo_it, 0.0f), hi = std::max(*hi_it, 0.0f);
  const float a_scale = (hi - lo) / 255.0f;
  const auto a_zp = static_cast<std::int64_t>(std::lround(-lo / a_scale));
  std::vector<std::uint8_t> anchor_bytes;
  for (float v : anchors) {
    anchor_bytes.push_back(
        static_cast<std::uint8_t>(std::clamp<long>(std::lround(v / a_scale) + a_zp, 0, 255)));
  }
  const test::QSpec aq{{a_scale}, {a_zp}};
  const int anc = w.tensor("anchors", fb::TensorType::UINT8, {A, 4}, &aq, &anchor_bytes);
  // TFLite's output slots: max_detections x max_classes_per_detection.
  const int classes_per_detection = variant == Variant::FastMulticlass ? 3 : 1;
  const int slots = kMaxDetections * classes_per_detection;
  const int ob = w.tensor("TFLite_Detection_PostProcess", fb::TensorType::FLOAT32, {1, slots, 4});
  const int oc = w.tensor("TFLite_Detection_PostProcess:1", fb::TensorType::FLOAT32, {1, slots});
  const int os = w.tensor("TFLite_Detection_PostProcess:2", fb::TensorType::FLOAT32, {1, slots});
  const int on = w.tensor("TFLite_Detection_PostProcess:3", fb::TensorType::FLOAT32, {1});
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", kMaxDetections);
    fbb.Int("max_classes_per_detection", classes_per_detection);
    fbb.Int("detections_per_class", 100);
    fbb.Bool("use_regular_nms", regular);
    fbb.Float("nms_score_threshold", static_cast<float>(kScoreThreshold));
    fbb.Float("nms_iou_threshold", 0.6f);
    fbb.Int("num_classes", kClasses);
    fbb.Float("y_scale", 10.0f);
    fbb.Float("x_scale", 10.0f);
    fbb.Float("h_scale", 5.0f);
    fbb.Float("w_scale", 5.0f);
  });
  fbb.Finish();
  w.custom_op("TFLite_Detection_PostProcess", {boxes, scores, anc}, {ob, oc, os, on}, fbb.GetBuffer());
  return w.finish(inputs, {ob, oc, os, on});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const fs::path dir = argv[1];
    fs::create_directories(dir);
    std::vector<std::vector<std::uint8_t>> images;
    for (int i = 0; i < kInputs; ++i) images.push_back(make_image(1000u + static_cast<std::uint32_t>(i)));
    SsdNet net(20261126u);
    net.calibrate(images);
    const auto anchors = ssd_anchors({12, 6}, {0.2, 0.45});
    for (auto [variant, name] :
         {std::pair{Variant::Fast, "ssd_fast.tflite"},
          std::pair{Variant::Regular, "ssd_regular.tflite"},
          std::pair{Variant::FastMulticlass, "ssd_fast_multiclass.tflite"},
          std::pair{Variant::Heads, "ssd_heads.tflite"},
          std::pair{Variant::PostFast, "ssd_postprocess_fast.tflite"},
          std::pair{Variant::PostRegular, "ssd_postprocess_regular.tflite"}}) {
      const std::string bytes = write_model(net, anchors, variant);
      std::ofstream(dir / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!fs::exists(dir / name) || fs::file_size(dir / name) != bytes.size()) {
        throw Error(ErrorCode::IoError, fmt::format("could not write {}", (dir / name).string()));
      }
    }
    for (int i = 0; i < kInputs; ++i) {
      Tensor t(DType::UInt8, {1, kImage, kImage, 3});
      std::copy(images[static_cast<std::size_t>(i)].begin(), images[static_cast<std::size_t>(i)].end(), t.as<std::uint8_t>().begin());
      runtime::write_npy(dir / fmt::format("input_{}.npy", i), t);
    }
    std::printf(
        "make-tflite-ssd: wrote "
        "ssd_{fast,regular,fast_multiclass,heads,postprocess_fast,postprocess_regular}.tflite and "
        "%d "
        "inputs to %s\n",
        kInputs, dir.string().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make-tflite-ssd: %s\n", e.what());
    return 1;
  }
}
