// TFLite models through the whole stack (importer, compiler, simulator, runtime):
//  - the furiosa-sdk uint8 MNIST models on their ten reference sets (Arm NN CpuRef outputs, see
//    ../shared/models/MANIFEST.md): every output within one quantization step of the reference
//    (the softmax model: within what its one-step logit differences explain) and the predicted
//    class equal on every set; the worst difference per model is printed;
//  - hand-made models written here with the FlatBuffers builder of our schema subset into the
//    build tree: an int8 model with per-channel weights (CONV_2D, DEPTHWISE_CONV_2D,
//    FULLY_CONNECTED) and a uint8 model with the other operators (PAD, MAX_POOL_2D,
//    AVERAGE_POOL_2D, ADD, CONCATENATION with rescaling, RESHAPE, SOFTMAX, DEQUANTIZE), each stage
//    checked against a float reference computed here from the previous stage's output;
//  - shape operators (SHAPE, STRIDED_SLICE, PACK) folded at compile time and STRIDED_SLICE on
//    data with its masks, uint8 MEAN against TFLite's QuantizedMeanOrSum arithmetic, and the
//    custom TFLite_Detection_PostProcess (fast and regular NMS) on hand-computed cases;
//  - unsupported operators: an error naming the operator index and the builtin operator.
#include <flatbuffers/flexbuffers.h>
#include <fmt/format.h>

#include <algorithm>
#include <any>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/runtime/queue.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_subset_generated.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fs = std::filesystem;
namespace fb = furiosa::tflite_fb;

namespace {

// The .tflite writer, raw_bytes and the float NHWC convolution reference (tflite_writer.h).
using test::conv_ref;
using test::QSpec;
using test::raw_bytes;
using test::TfliteWriter;

// Writes `bytes` to the build tree (FURIOSA_TFLITE_TEST_DIR) and returns the path.
fs::path write_model(const std::string& name, const std::string& bytes) {
  const fs::path dir = FURIOSA_TFLITE_TEST_DIR;
  fs::create_directories(dir);
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// ---- float references -----------------------------------------------------------------------

// TFLite's quantization of a real value: round half away from zero, saturate.
std::int32_t quantize_ref(double v, double scale, std::int32_t zp, DType d) {
  const double q = std::round(v / scale) + zp;
  const double lo = d == DType::UInt8 ? 0 : -128, hi = d == DType::UInt8 ? 255 : 127;
  return static_cast<std::int32_t>(std::clamp(q, lo, hi));
}

std::vector<double> dequantized(const Tensor& t, double scale, std::int32_t zp) {
  std::vector<double> out(static_cast<std::size_t>(t.elements()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = (test::element(t, i) - zp) * scale;
  return out;
}

// Largest |ours - expected| over the elements (ours in its own dtype, same element order).
int worst_diff(const Tensor& ours, const std::vector<std::int32_t>& expected) {
  REQUIRE(static_cast<std::size_t>(ours.elements()) == expected.size());
  int worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, static_cast<int>(std::abs(test::element(ours, i) - expected[i])));
  }
  return worst;
}

std::vector<std::int32_t> quantize_all(const std::vector<double>& v, double scale, std::int32_t zp, DType d) {
  std::vector<std::int32_t> out;
  for (double x : v) out.push_back(quantize_ref(x, scale, zp, d));
  return out;
}

// Random weights as 8-bit values, and the bytes to store them.
std::vector<std::int32_t> random_ints(std::mt19937& rng, std::size_t n, std::int32_t lo, std::int32_t hi) {
  std::uniform_int_distribution<std::int32_t> dist(lo, hi);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}
std::vector<std::uint8_t> bytes8(const std::vector<std::int32_t>& v) {
  std::vector<std::uint8_t> out;
  for (auto x : v) out.push_back(static_cast<std::uint8_t>(x));
  return out;
}
std::vector<std::uint8_t> bytes32(const std::vector<std::int32_t>& v) { return raw_bytes(v); }

// One worker on one PE of the built-in simulator (`device`: which one, so two runners can be
// open at once).
// Number of distinct element values: guards the stage checks against degenerate data (a stage
// that clamps everything to one value would compare equal trivially).
std::size_t distinct(const Tensor& t) {
  std::vector<double> v;
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.elements()); ++i) v.push_back(test::element(t, i));
  std::sort(v.begin(), v.end());
  return static_cast<std::size_t>(std::unique(v.begin(), v.end()) - v.begin());
}

runtime::RunnerOptions test_options(const char* device = "npu0pe0") {
  runtime::RunnerOptions o;
  o.worker_num = 1;
  o.device = device;
  return o;
}

// Scale and zero point of a tensor of a .tflite file, read with the generated accessors.
std::pair<double, std::int32_t> tensor_quant(const std::string& bytes, const std::string& name) {
  const fb::Model* m = fb::GetModel(bytes.data());
  const auto* tensors = m->subgraphs()->Get(0)->tensors();
  for (const auto* t : *tensors) {
    if (t->name() && t->name()->str() == name) {
      std::int64_t zp = 0;  // int64 vectors of converted files may be only 4-byte aligned
      std::memcpy(&zp, t->quantization()->zero_point()->Data(), sizeof zp);
      return {t->quantization()->scale()->Get(0), static_cast<std::int32_t>(zp)};
    }
  }
  FAIL("no tensor " << name);
  return {};
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// uint8 softmax of uint8 logits (scale s, zero point zp) with the output quantization of
// TFLite's SOFTMAX (scale 1/256, zero point 0), in double.
std::vector<std::int32_t> softmax_q(const Tensor& logits, double s, std::int32_t zp) {
  const auto x = dequantized(logits, s, zp);
  const double mx = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double v : x) sum += std::exp(v - mx);
  std::vector<std::int32_t> out;
  for (double v : x) out.push_back(quantize_ref(std::exp(v - mx) / sum, 1.0 / 256, 0, DType::UInt8));
  return out;
}

}  // namespace

// ---- the furiosa-sdk models ---------------------------------------------------------------------

TEST_CASE("TFLite: furiosa-sdk uint8 MNIST models match their references on ten sets", "[tflite][models]") {
  const char* names[] = {"MNISTnet_uint8_quant_without_softmax", "MNIST_MobileNet_v2_uint8_quant_without_avgpool_softmax",
                         "MNISTnet_uint8_quant"};
  for (const char* name : names) {
    const fs::path dir = test::shared_model(std::string("furiosa-sdk/") + name);
    auto runner = runtime::create_runner(dir / (std::string(name) + ".tflite"), test_options());
    const auto& in = runner->model().inputs.at(0);
    CHECK(in.dtype == DType::UInt8);
    CHECK(in.shape == Shape{1, 28, 28, 1});
    CHECK(in.format == "NHWC");
    const bool softmax = std::string(name) == "MNISTnet_uint8_quant";
    // The softmax model's logits come from the same network without its head (same weights).
    std::unique_ptr<runtime::Runner> logits_runner;
    std::string logits_bytes;
    if (softmax) {
      const fs::path ldir = test::shared_model("furiosa-sdk/MNISTnet_uint8_quant_without_softmax");
      logits_runner = runtime::create_runner(ldir / "MNISTnet_uint8_quant_without_softmax.tflite", test_options("npu0pe1"));
      logits_bytes = read_bytes(ldir / "MNISTnet_uint8_quant_without_softmax.tflite");
    }
    int worst = 0, matches = 0, worst_set = -1;
    for (int set = 0; set < 10; ++set) {
      const fs::path sd = dir / fmt::format("test_data_set_{}", set);
      const Tensor x = compiler::load_tensor_pb(sd / "input_0.pb");
      const Tensor ref = compiler::load_tensor_pb(sd / "output_0.pb");
      const Tensor y = runner->run({x}).at(0);
      INFO(name << " set " << set);
      REQUIRE(y.dtype() == ref.dtype());
      REQUIRE(y.shape() == ref.shape());
      const int diff = static_cast<int>(test::max_abs_diff(y, ref));
      if (diff > worst) worst = diff, worst_set = set;
      const bool match = test::argmax(y) == test::argmax(ref);
      CHECK(match);
      matches += match;
      if (!softmax) {
        CHECK(diff <= 1);
        continue;
      }
      // Softmax amplifies: a one-step logit difference (0.146) moves probabilities by several
      // steps of 1/256. Check that (a) our logits are within one step of the reference logits,
      // (b) our probabilities are the softmax of our logits within one step, and (c) every
      // difference from the reference is what (a) explains.
      const auto [ls, lz] = tensor_quant(logits_bytes, "MNISTnet/Logits/Conv2d_1c_1x1/BiasAdd");
      const Tensor our_logits = logits_runner->run({x}).at(0);
      const Tensor ref_logits = compiler::load_tensor_pb(
          test::shared_model("furiosa-sdk/MNISTnet_uint8_quant_without_softmax") / fmt::format("test_data_set_{}", set) / "output_0.pb");
      CHECK(test::max_abs_diff(our_logits, ref_logits) <= 1);
      const auto from_ours = softmax_q(our_logits, ls, lz);
      const auto from_ref = softmax_q(ref_logits, ls, lz);
      CHECK(worst_diff(ref, from_ref) == 0);  // the reference is exactly this softmax of its logits
      CHECK(worst_diff(y, from_ours) <= 1);
      for (std::size_t i = 0; i < from_ours.size(); ++i) {
        const double explained = std::abs(from_ours[i] - from_ref[i]) + 1;
        CHECK(std::abs(test::element(y, i) - test::element(ref, i)) <= explained);
      }
    }
    const std::string line = fmt::format("TFLite {}: worst |output - reference| = {} quantization step(s) (set {}), "
                                         "predicted class matches {}/10", name, worst, worst_set < 0 ? 0 : worst_set, matches);
    fmt::print("{}\n", line);
    if (worst > 1) WARN(line << " (softmax of logits that differ by one step; see the checks above)");
    else INFO(line);
    CHECK(matches == 10);
  }
}

TEST_CASE("TFLite: batches and queues give the rows of single runs", "[tflite][models]") {
  const fs::path dir = test::shared_model("furiosa-sdk/MNIST_MobileNet_v2_uint8_quant_without_avgpool_softmax");
  const fs::path model = dir / "MNIST_MobileNet_v2_uint8_quant_without_avgpool_softmax.tflite";
  const Tensor x0 = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
  const Tensor x1 = compiler::load_tensor_pb(dir / "test_data_set_3/input_0.pb");
  std::vector<Tensor> single;
  {
    auto runner = runtime::create_runner(model, test_options());
    single.push_back(runner->run({x0}).at(0));
    single.push_back(runner->run({x1}).at(0));
  }
  // Batch 2: the NHWC Lower and the reshapes carry the batch.
  auto opts = test_options();
  opts.batch_size = 2;
  auto batched = runtime::create_runner(model, opts);
  CHECK(batched->model().inputs[0].shape == Shape{2, 28, 28, 1});
  CHECK(batched->model().inputs[0].format == "NHWC");
  Tensor x(DType::UInt8, {2, 28, 28, 1});
  std::memcpy(x.bytes().data(), x0.bytes().data(), x0.size_bytes());
  std::memcpy(x.bytes().data() + x0.size_bytes(), x1.bytes().data(), x1.size_bytes());
  const Tensor y = batched->run({x}).at(0);
  REQUIRE(y.shape() == Shape{2, 10});
  for (std::size_t i = 0; i < 10; ++i) {
    CHECK(test::element(y, i) == test::element(single[0], i));
    CHECK(test::element(y, 10 + i) == test::element(single[1], i));
  }
  batched.reset();
  // The submit/recv queue reads .tflite paths too.
  runtime::QueueOptions q;
  q.device = "npu0pe0";
  q.worker_num = 1;
  auto [submitter, receiver] = runtime::create_queue(model, q);
  CHECK(submitter.model().inputs[0].format == "NHWC");
  submitter.submit({x1}, 7);
  auto result = receiver.recv(std::chrono::seconds(120));
  CHECK(std::any_cast<int>(result.context) == 7);
  CHECK(test::max_abs_diff(result.value().at(0), single[1]) == 0);
}

// ---- hand-made int8 model with per-channel weights --------------------------------------------

TEST_CASE("TFLite: int8 per-channel CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED match a float reference",
          "[tflite][int8]") {
  std::mt19937 rng(20240611);
  TfliteWriter w;
  auto& b = w.builder();
  // Quantization of the activations (asymmetric int8) and the per-channel weights.
  const double s0 = 1.0 / 127, s1 = 0.05, s2 = 0.03, s3 = 0.1;
  const std::int32_t z0 = 3, z1 = -20, z2 = -128, z3 = 5;
  const QSpec q0{{static_cast<float>(s0)}, {z0}}, q1{{static_cast<float>(s1)}, {z1}};
  const QSpec q2{{static_cast<float>(s2)}, {z2}}, q3{{static_cast<float>(s3)}, {z3}};
  QSpec wq1, wq2, wq3, bq1, bq2, bq3;
  for (int c = 0; c < 8; ++c) wq1.scales.push_back(0.002f + 0.0015f * static_cast<float>(c));
  for (int c = 0; c < 8; ++c) wq2.scales.push_back(0.01f + 0.004f * static_cast<float>((c * 5) % 8));
  for (int c = 0; c < 10; ++c) wq3.scales.push_back(0.001f + 0.0007f * static_cast<float>(c));
  wq1.zero_points.assign(8, 0), wq2.zero_points.assign(8, 0), wq3.zero_points.assign(10, 0);
  wq2.dim = 3;  // depthwise weights [1, kh, kw, C * multiplier]: per channel along dim 3
  for (int c = 0; c < 8; ++c) bq1.scales.push_back(static_cast<float>(s0) * wq1.scales[static_cast<std::size_t>(c)]);
  for (int c = 0; c < 8; ++c) bq2.scales.push_back(static_cast<float>(s1) * wq2.scales[static_cast<std::size_t>(c)]);
  for (int c = 0; c < 10; ++c) bq3.scales.push_back(static_cast<float>(s2) * wq3.scales[static_cast<std::size_t>(c)]);
  bq1.zero_points.assign(8, 0), bq2.zero_points.assign(8, 0), bq3.zero_points.assign(10, 0);

  const auto w1 = random_ints(rng, 8 * 3 * 3 * 3, -127, 127), b1 = random_ints(rng, 8, -3000, 3000);
  const auto w2 = random_ints(rng, 3 * 3 * 8, -127, 127), b2 = random_ints(rng, 8, -2000, 2000);
  const auto w3 = random_ints(rng, 10 * 128, -127, 127), b3 = random_ints(rng, 10, -5000, 5000);
  const auto w1b = bytes8(w1), w2b = bytes8(w2), w3b = bytes8(w3);
  const auto b1b = bytes32(b1), b2b = bytes32(b2), b3b = bytes32(b3);

  const int x = w.tensor("x", fb::TensorType::FLOAT32, {1, 8, 8, 3});
  const int t0 = w.tensor("t0", fb::TensorType::INT8, {1, 8, 8, 3}, &q0);
  const int tw1 = w.tensor("w1", fb::TensorType::INT8, {8, 3, 3, 3}, &wq1, &w1b);
  const int tb1 = w.tensor("b1", fb::TensorType::INT32, {8}, &bq1, &b1b);
  const int t1 = w.tensor("t1", fb::TensorType::INT8, {1, 8, 8, 8}, &q1);
  const int tw2 = w.tensor("w2", fb::TensorType::INT8, {1, 3, 3, 8}, &wq2, &w2b);
  const int tb2 = w.tensor("b2", fb::TensorType::INT32, {8}, &bq2, &b2b);
  const int t2 = w.tensor("t2", fb::TensorType::INT8, {1, 4, 4, 8}, &q2);
  const int tw3 = w.tensor("w3", fb::TensorType::INT8, {10, 128}, &wq3, &w3b);
  const int tb3 = w.tensor("b3", fb::TensorType::INT32, {10}, &bq3, &b3b);
  const int t3 = w.tensor("t3", fb::TensorType::INT8, {1, 10}, &q3);
  const int yf = w.tensor("y", fb::TensorType::FLOAT32, {1, 10});
  w.op(114, {x}, {t0});  // QUANTIZE
  w.op(3, {t0, tw1, tb1}, {t1}, fb::BuiltinOptions::Conv2DOptions,
       fb::CreateConv2DOptions(b, fb::Padding::SAME, 1, 1, fb::ActivationFunctionType::RELU).Union());
  w.op(4, {t1, tw2, tb2}, {t2}, fb::BuiltinOptions::DepthwiseConv2DOptions,
       fb::CreateDepthwiseConv2DOptions(b, fb::Padding::SAME, 2, 2, 1, fb::ActivationFunctionType::RELU6).Union());
  w.op(9, {t2, tw3, tb3}, {t3}, fb::BuiltinOptions::FullyConnectedOptions,
       fb::CreateFullyConnectedOptions(b, fb::ActivationFunctionType::NONE).Union());
  w.op(6, {t3}, {yf});  // DEQUANTIZE
  const fs::path path = write_model("int8_per_channel.tflite", w.finish({x}, {t0, t1, t2, t3, yf}));

  auto runner = runtime::create_runner(path, test_options());
  const auto& m = runner->model();
  REQUIRE(m.inputs.size() == 1);
  CHECK(m.inputs[0].format == "NHWC");
  CHECK(m.inputs[0].dtype == DType::Float32);
  REQUIRE(m.outputs.size() == 5);
  CHECK(m.outputs[1].shape == Shape{1, 8, 8, 8});
  CHECK(m.outputs[1].format == "NHWC");
  CHECK(m.outputs[3].format == "NC");
  // Every requantizing kernel carries TFLite's fixed-point rule.
  int fixed = 0;
  for (const auto& e : runner->partition_report().entries) {
    if (e.placement == "npu" && e.reason.find("fixed-point") != std::string::npos) ++fixed;
  }
  CHECK(fixed == 3);

  Tensor input(DType::Float32, {1, 8, 8, 3});
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : input.as<float>()) v = u(rng);
  const auto out = runner->run({input});

  // QUANTIZE: exactly TFLite's rounding (half away from zero) of x / scale.
  std::vector<std::int32_t> e0;
  for (float v : input.as<float>()) {
    e0.push_back(static_cast<std::int32_t>(std::clamp(std::round(v / static_cast<float>(s0)) + static_cast<float>(z0), -128.0f, 127.0f)));
  }
  CHECK(worst_diff(out[0], e0) == 0);

  // Each stage from the previous stage's actual output, in float, then quantized.
  auto dq = [](const std::vector<std::int32_t>& q, const QSpec& s, std::size_t channels, std::size_t inner) {
    std::vector<double> out(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) out[i] = q[i] * static_cast<double>(s.scales[(i / inner) % channels]);
    return out;
  };
  std::vector<double> bias1(8), bias2(8), bias3(10);
  for (std::size_t c = 0; c < 8; ++c) bias1[c] = b1[c] * static_cast<double>(bq1.scales[c]);
  for (std::size_t c = 0; c < 8; ++c) bias2[c] = b2[c] * static_cast<double>(bq2.scales[c]);
  for (std::size_t c = 0; c < 10; ++c) bias3[c] = b3[c] * static_cast<double>(bq3.scales[c]);
  Shape ys;
  auto r1 = conv_ref(dequantized(out[0], static_cast<float>(s0), z0), {1, 8, 8, 3}, dq(w1, wq1, 8, 27), {8, 3, 3, 3},
                     bias1, 1, true, false, &ys);
  for (auto& v : r1) v = std::max(v, 0.0);  // RELU
  REQUIRE(ys == Shape{1, 8, 8, 8});
  const int d1 = worst_diff(out[1], quantize_all(r1, static_cast<float>(s1), z1, DType::Int8));
  auto r2 = conv_ref(dequantized(out[1], static_cast<float>(s1), z1), {1, 8, 8, 8}, dq(w2, wq2, 8, 1), {1, 3, 3, 8},
                     bias2, 2, true, true, &ys);
  for (auto& v : r2) v = std::clamp(v, 0.0, 6.0);  // RELU6
  REQUIRE(ys == Shape{1, 4, 4, 8});
  const int d2 = worst_diff(out[2], quantize_all(r2, static_cast<float>(s2), z2, DType::Int8));
  const auto a3 = dequantized(out[2], static_cast<float>(s2), z2);  // NHWC order = TFLite's flattening
  std::vector<double> r3(10);
  for (std::size_t u3 = 0; u3 < 10; ++u3) {
    r3[u3] = bias3[u3];
    for (std::size_t k = 0; k < 128; ++k) r3[u3] += a3[k] * w3[u3 * 128 + k] * static_cast<double>(wq3.scales[u3]);
  }
  const auto e3 = quantize_all(r3, static_cast<float>(s3), z3, DType::Int8);
  const int d3 = worst_diff(out[3], e3);
  fmt::print("TFLite int8 per-channel model: worst |output - float reference| conv {}, depthwise {}, fully connected {}\n",
             d1, d2, d3);
  CHECK(d1 <= 1);
  CHECK(d2 <= 1);
  CHECK(d3 <= 1);
  for (std::size_t i = 0; i < 4; ++i) CHECK(distinct(out[i]) >= 8);
  // The per-channel scales matter: one scale for all channels would be far off.
  bool clamped = false;
  for (std::size_t i = 0; i < static_cast<std::size_t>(out[2].elements()); ++i) clamped = clamped || out[2].as<std::int8_t>()[i] == 72;
  CHECK(clamped);  // RELU6 at zero point -128 and scale 0.03 clamps at -128 + 200 = 72
  // DEQUANTIZE: (q - zero point) * scale.
  for (std::size_t i = 0; i < 10; ++i) {
    CHECK(out[4].as<float>()[i] == static_cast<float>(out[3].as<std::int8_t>()[i] - z3) * static_cast<float>(s3));
  }
}

// ---- hand-made uint8 model with the other operators ---------------------------------------------

TEST_CASE("TFLite: uint8 PAD, pools, ADD, CONCATENATION, CONV_2D, RESHAPE, FULLY_CONNECTED, SOFTMAX, DEQUANTIZE",
          "[tflite][uint8]") {
  std::mt19937 rng(7);
  TfliteWriter w;
  auto& b = w.builder();
  const QSpec qx{{0.05f}, {128}}, qd{{0.07f}, {120}}, qe{{0.06f}, {110}}, qf{{0.2f}, {100}};
  const QSpec qh{{0.25f}, {130}}, qp{{1.0f / 256}, {0}}, qwf{{0.02f}, {128}}, qwh{{0.002f}, {120}};
  const QSpec qbf{{0.06f * 0.02f}, {0}}, qbh{{0.2f * 0.002f}, {0}};
  const auto wf = random_ints(rng, 6 * 8, 0, 255), bf = random_ints(rng, 6, -500, 500);
  const auto wh = random_ints(rng, 5 * 96, 0, 255), bh = random_ints(rng, 5, -800, 800);
  const std::vector<std::int32_t> pads = {0, 0, 1, 1, 1, 1, 0, 0}, shape2 = {1, 96};
  const auto wfb = bytes8(wf), whb = bytes8(wh), bfb = bytes32(bf), bhb = bytes32(bh);
  const auto padsb = bytes32(pads), shape2b = bytes32(shape2);

  const int x = w.tensor("x", fb::TensorType::UINT8, {1, 6, 6, 4}, &qx);
  const int tp = w.tensor("pads", fb::TensorType::INT32, {4, 2}, nullptr, &padsb);
  const int a = w.tensor("a", fb::TensorType::UINT8, {1, 8, 8, 4}, &qx);
  const int bt = w.tensor("b", fb::TensorType::UINT8, {1, 4, 4, 4}, &qx);
  const int c = w.tensor("c", fb::TensorType::UINT8, {1, 4, 4, 4}, &qx);
  const int d = w.tensor("d", fb::TensorType::UINT8, {1, 4, 4, 4}, &qd);
  const int e = w.tensor("e", fb::TensorType::UINT8, {1, 4, 4, 8}, &qe);
  const int twf = w.tensor("wf", fb::TensorType::UINT8, {6, 1, 1, 8}, &qwf, &wfb);
  const int tbf = w.tensor("bf", fb::TensorType::INT32, {6}, &qbf, &bfb);
  const int f = w.tensor("f", fb::TensorType::UINT8, {1, 4, 4, 6}, &qf);
  const int tshape = w.tensor("shape", fb::TensorType::INT32, {2}, nullptr, &shape2b);
  const int g = w.tensor("g", fb::TensorType::UINT8, {1, 96}, &qf);
  const int twh = w.tensor("wh", fb::TensorType::UINT8, {5, 96}, &qwh, &whb);
  const int tbh = w.tensor("bh", fb::TensorType::INT32, {5}, &qbh, &bhb);
  const int h = w.tensor("h", fb::TensorType::UINT8, {1, 5}, &qh);
  const int p = w.tensor("p", fb::TensorType::UINT8, {1, 5}, &qp);
  const int pf = w.tensor("pf", fb::TensorType::FLOAT32, {1, 5});
  w.op(34, {x, tp}, {a}, fb::BuiltinOptions::PadOptions, fb::CreatePadOptions(b).Union());
  w.op(17, {a}, {bt}, fb::BuiltinOptions::Pool2DOptions, fb::CreatePool2DOptions(b, fb::Padding::VALID, 2, 2, 2, 2).Union());
  w.op(1, {a}, {c}, fb::BuiltinOptions::Pool2DOptions,
       fb::CreatePool2DOptions(b, fb::Padding::SAME, 2, 2, 3, 3, fb::ActivationFunctionType::RELU).Union());
  w.op(0, {bt, c}, {d}, fb::BuiltinOptions::AddOptions, fb::CreateAddOptions(b, fb::ActivationFunctionType::RELU).Union());
  w.op(2, {d, bt}, {e}, fb::BuiltinOptions::ConcatenationOptions, fb::CreateConcatenationOptions(b, 3).Union());
  w.op(3, {e, twf, tbf}, {f}, fb::BuiltinOptions::Conv2DOptions, fb::CreateConv2DOptions(b, fb::Padding::VALID, 1, 1).Union());
  w.op(22, {f, tshape}, {g}, fb::BuiltinOptions::ReshapeOptions, fb::CreateReshapeOptionsDirect(b, &shape2).Union());
  w.op(9, {g, twh, tbh}, {h}, fb::BuiltinOptions::FullyConnectedOptions, fb::CreateFullyConnectedOptions(b).Union());
  w.op(25, {h}, {p}, fb::BuiltinOptions::SoftmaxOptions, fb::CreateSoftmaxOptions(b, 1.0f).Union());
  w.op(6, {p}, {pf});
  const fs::path path = write_model("uint8_ops.tflite", w.finish({x}, {bt, c, d, e, f, h, p, pf}));

  auto runner = runtime::create_runner(path, test_options());
  Tensor input(DType::UInt8, {1, 6, 6, 4});
  for (auto& v : input.as<std::uint8_t>()) v = static_cast<std::uint8_t>(rng() % 256);
  const auto out = runner->run({input});
  REQUIRE(out.size() == 8);
  const auto& X = input;
  auto at = [](const Tensor& t, std::int64_t n, std::int64_t hh, std::int64_t ww, std::int64_t cc) {
    const auto& s = t.shape();
    return static_cast<std::int32_t>(test::element(t, static_cast<std::size_t>(((n * s[1] + hh) * s[2] + ww) * s[3] + cc)));
  };
  // PAD with the zero point, then MAX_POOL_2D 2x2/2: the maximum of stored values, exactly.
  auto padded = [&](std::int64_t hh, std::int64_t ww, std::int64_t cc) {
    return hh < 1 || hh > 6 || ww < 1 || ww > 6 ? 128 : at(X, 0, hh - 1, ww - 1, cc);
  };
  std::vector<std::int32_t> eb, ec;
  for (std::int64_t oh = 0; oh < 4; ++oh)
    for (std::int64_t ow = 0; ow < 4; ++ow)
      for (std::int64_t cc = 0; cc < 4; ++cc) {
        std::int32_t best = 0;
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) best = std::max(best, padded(oh * 2 + i, ow * 2 + j, cc));
        eb.push_back(best);
        // AVERAGE_POOL_2D 3x3/2 SAME on the 8x8 padded tensor (pads 0 before, 1 after): the mean
        // over the in-bounds taps, RELU.
        double sum = 0;
        int count = 0;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            const std::int64_t hh = oh * 2 + i, ww = ow * 2 + j;
            if (hh >= 8 || ww >= 8) continue;
            sum += (padded(hh, ww, cc) - 128) * 0.05;
            ++count;
          }
        ec.push_back(quantize_ref(std::max(0.0, sum / count), 0.05, 128, DType::UInt8));
      }
  CHECK(worst_diff(out[0], eb) == 0);
  const int dc = worst_diff(out[1], ec);
  // ADD with RELU, from our b and c.
  std::vector<std::int32_t> ed;
  for (std::size_t i = 0; i < 64; ++i) {
    const double v = (test::element(out[0], i) - 128) * 0.05 + (test::element(out[1], i) - 128) * 0.05;
    ed.push_back(quantize_ref(std::max(0.0, v), static_cast<double>(0.07f), 120, DType::UInt8));
  }
  const int dd = worst_diff(out[2], ed);
  // CONCATENATION along channels: d and b rescaled to e's parameters.
  std::vector<std::int32_t> ee;
  for (std::int64_t pix = 0; pix < 16; ++pix) {
    for (std::int64_t cc = 0; cc < 4; ++cc) {
      ee.push_back(quantize_ref((test::element(out[2], static_cast<std::size_t>(pix * 4 + cc)) - 120) * static_cast<double>(0.07f),
                                static_cast<double>(0.06f), 110, DType::UInt8));
    }
    for (std::int64_t cc = 0; cc < 4; ++cc) {
      ee.push_back(quantize_ref((test::element(out[0], static_cast<std::size_t>(pix * 4 + cc)) - 128) * 0.05,
                                static_cast<double>(0.06f), 110, DType::UInt8));
    }
  }
  const int de = worst_diff(out[3], ee);
  // CONV_2D 1x1 (uint8 weights, zero point 128).
  std::vector<double> wfd, bfd(6);
  for (auto v : wf) wfd.push_back((v - 128) * static_cast<double>(0.02f));
  for (std::size_t i = 0; i < 6; ++i) bfd[i] = bf[i] * static_cast<double>(qbf.scales[0]);
  Shape fs_;
  const auto rf = conv_ref(dequantized(out[3], static_cast<double>(0.06f), 110), {1, 4, 4, 8}, wfd, {6, 1, 1, 8}, bfd, 1,
                           false, false, &fs_);
  const int df = worst_diff(out[4], quantize_all(rf, static_cast<double>(0.2f), 100, DType::UInt8));
  // RESHAPE (NHWC order) + FULLY_CONNECTED.
  const auto gv = dequantized(out[4], static_cast<double>(0.2f), 100);
  std::vector<double> rh(5);
  for (std::size_t u = 0; u < 5; ++u) {
    rh[u] = bh[u] * static_cast<double>(qbh.scales[0]);
    for (std::size_t k = 0; k < 96; ++k) rh[u] += gv[k] * (wh[u * 96 + k] - 120) * static_cast<double>(0.002f);
  }
  const int dh = worst_diff(out[5], quantize_all(rh, static_cast<double>(0.25f), 130, DType::UInt8));
  // SOFTMAX of our h.
  const int dp = worst_diff(out[6], softmax_q(out[5], static_cast<double>(0.25f), 130));
  fmt::print("TFLite uint8 ops model: worst |output - float reference| avgpool {}, add {}, concat {}, conv {}, "
             "fully connected {}, softmax {} (maxpool exact)\n", dc, dd, de, df, dh, dp);
  CHECK(dc <= 1);
  CHECK(dd <= 1);
  CHECK(de <= 1);
  CHECK(df <= 1);
  CHECK(dh <= 1);
  CHECK(dp <= 1);
  for (std::size_t i = 0; i < 6; ++i) CHECK(distinct(out[i]) >= 5);
  CHECK(distinct(out[6]) >= 2);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(out[7].as<float>()[i] == static_cast<float>(out[6].as<std::uint8_t>()[i]) * (1.0f / 256));
  }
}

TEST_CASE("TFLite: RESIZE_BILINEAR on the NPU, RESIZE_NEAREST_NEIGHBOR, ARG_MAX and ARG_MIN on the host",
          "[tflite][uint8]") {
  std::mt19937 rng(11);
  TfliteWriter w;
  auto& b = w.builder();
  const QSpec q{{0.1f}, {128}};
  const std::vector<std::int32_t> size33 = {3, 3}, size44 = {4, 4}, axis_last = {-1}, axis3 = {3};
  const auto size33b = bytes32(size33), size44b = bytes32(size44), axis_lastb = bytes32(axis_last), axis3b = bytes32(axis3);
  const int x = w.tensor("x", fb::TensorType::UINT8, {1, 2, 2, 5}, &q);
  const int s33 = w.tensor("size33", fb::TensorType::INT32, {2}, nullptr, &size33b);
  const int s44 = w.tensor("size44", fb::TensorType::INT32, {2}, nullptr, &size44b);
  const int a_last = w.tensor("axis_last", fb::TensorType::INT32, {1}, nullptr, &axis_lastb);
  const int a3 = w.tensor("axis3", fb::TensorType::INT32, {1}, nullptr, &axis3b);
  const int y = w.tensor("y", fb::TensorType::UINT8, {1, 3, 3, 5}, &q);
  const int n = w.tensor("n", fb::TensorType::UINT8, {1, 4, 4, 5}, &q);
  const int z = w.tensor("z", fb::TensorType::INT64, {1, 3, 3});
  const int m = w.tensor("m", fb::TensorType::INT32, {1, 3, 3});
  w.op(23, {x, s33}, {y}, fb::BuiltinOptions::ResizeBilinearOptions, fb::CreateResizeBilinearOptions(b, true, false).Union());
  w.op(97, {x, s44}, {n}, fb::BuiltinOptions::ResizeNearestNeighborOptions,
       fb::CreateResizeNearestNeighborOptions(b, false, true).Union());
  w.op(56, {y, a3}, {z}, fb::BuiltinOptions::ArgMaxOptions, fb::CreateArgMaxOptions(b, fb::TensorType::INT64).Union());
  w.op(79, {y, a_last}, {m}, fb::BuiltinOptions::ArgMinOptions, fb::CreateArgMinOptions(b, fb::TensorType::INT32).Union());
  const fs::path path = write_model("resize_argmax.tflite", w.finish({x}, {y, n, z, m}));

  auto runner = runtime::create_runner(path, test_options());
  Tensor input(DType::UInt8, {1, 2, 2, 5});
  for (auto& v : input.as<std::uint8_t>()) v = static_cast<std::uint8_t>(rng() % 256);
  // Ties for the index rules: channels 1 and 3 of pixel (0, 0) equal and largest, channels 0
  // and 2 equal and smallest, in all four corners (so every resized pixel ties the same way).
  for (int p = 0; p < 4; ++p) {
    auto* px = input.as<std::uint8_t>().data() + p * 5;
    px[1] = px[3] = 250;
    px[0] = px[2] = static_cast<std::uint8_t>(p);
    px[4] = 100;
  }
  const auto out = runner->run({input});
  REQUIRE(out.size() == 4);
  const auto X = input.as<std::uint8_t>();
  auto at = [&](int h, int wd, int c) { return static_cast<int>(X[static_cast<std::size_t>((h * 2 + wd) * 5 + c)]); };
  // align_corners 2 -> 3 puts every output on a corner, an edge midpoint or the centre with
  // weights 0, 1/2 or 1/4, exact in float32: TFLite's uint8 kernel (the generic
  // reference_ops::ResizeBilinear<T>) adds rounding_offset 0.5 and truncates, so the mean
  // rounded half up.
  REQUIRE(out[0].shape() == Shape{1, 3, 3, 5});
  const auto Y = out[0].as<std::uint8_t>();
  for (int h = 0; h < 3; ++h)
    for (int wd = 0; wd < 3; ++wd)
      for (int c = 0; c < 5; ++c) {
        const std::vector<int> rows = h == 1 ? std::vector<int>{0, 1} : std::vector<int>{h / 2};
        const std::vector<int> cols = wd == 1 ? std::vector<int>{0, 1} : std::vector<int>{wd / 2};
        int sum = 0;
        for (int r : rows)
          for (int k : cols) sum += at(r, k, c);
        const int count = static_cast<int>(rows.size() * cols.size());
        const int expected = (2 * sum + count) / (2 * count);
        INFO("y at " << h << "," << wd << "," << c);
        CHECK(static_cast<int>(Y[static_cast<std::size_t>((h * 3 + wd) * 5 + c)]) == expected);
      }
  // half_pixel_centers nearest 2 -> 4: sources floor((o + 0.5) / 2) = 0, 0, 1, 1.
  REQUIRE(out[1].shape() == Shape{1, 4, 4, 5});
  const auto N = out[1].as<std::uint8_t>();
  for (int h = 0; h < 4; ++h)
    for (int wd = 0; wd < 4; ++wd)
      for (int c = 0; c < 5; ++c) CHECK(static_cast<int>(N[static_cast<std::size_t>((h * 4 + wd) * 5 + c)]) == at(h / 2, wd / 2, c));
  // ARG_MAX int64 and ARG_MIN int32 over the channels of y, first index on ties.
  REQUIRE(out[2].dtype() == DType::Int64);
  REQUIRE(out[2].shape() == Shape{1, 3, 3});
  REQUIRE(out[3].dtype() == DType::Int32);
  REQUIRE(out[3].shape() == Shape{1, 3, 3});
  for (std::size_t p = 0; p < 9; ++p) {
    std::size_t hi = 0, lo = 0;
    for (std::size_t c = 1; c < 5; ++c) {
      if (Y[p * 5 + c] > Y[p * 5 + hi]) hi = c;
      if (Y[p * 5 + c] < Y[p * 5 + lo]) lo = c;
    }
    CHECK(out[2].as<std::int64_t>()[p] == static_cast<std::int64_t>(hi));
    CHECK(out[3].as<std::int32_t>()[p] == static_cast<std::int32_t>(lo));
  }
  CHECK(out[2].as<std::int64_t>()[0] == 1);  // the tie 1 / 3 resolved to the first
  CHECK(out[3].as<std::int32_t>()[0] == 0);  // the tie 0 / 2 resolved to the first
  // RESIZE_BILINEAR runs on the NPU (LowLevelResize in TFLite's bilinear mode, the values above);
  // the nearest resize (an `axes` Resize, not a whole-factor repeat on NCHW) and the two
  // arg-reductions on the host as external operators (partition report, external steps).
  std::size_t fallback = 0, external = 0, npu_bilinear = 0;
  for (const auto& e : runner->compiled().report.entries) {
    if (e.op == "Resize" || e.op == "ArgMax" || e.op == "ArgMin") fallback += e.placement == "fallback";
    npu_bilinear += e.op == "Resize" && e.placement == "npu" && e.target == "LowLevelResize";
  }
  for (const auto& step : runner->compiled().steps) {
    external += step.kind == compiler::Step::Kind::Cpu && step.cpu.kind == compiler::CpuOpKind::External;
  }
  CHECK(npu_bilinear == 1);
  CHECK(fallback == 3);
  CHECK(external >= 3);
  std::size_t bilinear_kernels = 0;
  for (const auto& call : runner->compiled().npu_calls) {
    for (const auto& k : call.program->kernels) {
      if (k.kind == isa::KernelKind::Resize) {
        const auto& p = std::get<isa::ResizeParams>(k.params);
        bilinear_kernels += p.mode == isa::ResizeParams::Mode::TfliteBilinear && p.align_corners && !p.half_pixel_centers;
      }
    }
  }
  CHECK(bilinear_kernels == 1);
}

// ---- errors ----------------------------------------------------------------------------------

TEST_CASE("TFLite: an unsupported operator is an error naming its index and builtin name", "[tflite][errors]") {
  TfliteWriter w;
  const QSpec q{{0.1f}, {0}};
  const std::vector<std::int32_t> shape = {1, 4};
  const auto shape_bytes = bytes32(shape);
  const int x = w.tensor("x", fb::TensorType::UINT8, {1, 2, 2, 1}, &q);
  const int s = w.tensor("shape", fb::TensorType::INT32, {2}, nullptr, &shape_bytes);
  const int r = w.tensor("r", fb::TensorType::UINT8, {1, 4}, &q);
  const int t = w.tensor("t", fb::TensorType::UINT8, {1, 4}, &q);
  const int u = w.tensor("u", fb::TensorType::UINT8, {1, 4}, &q);
  w.op(22, {x, s}, {r});  // RESHAPE: supported
  w.op(28, {r}, {t});     // TANH: not supported
  w.op(32, {t}, {u});     // CUSTOM: not supported
  const int v = w.tensor("v", fb::TensorType::UINT8, {1, 4}, &q);
  w.custom_op("Evil\nerror: forged\x1b[2J", {u}, {v}, {});  // a hostile custom code, shown escaped
  const fs::path path = write_model("unsupported.tflite", w.finish({x}, {v}));
  try {
    runtime::create_runner(path, test_options());
    FAIL("an unsupported TFLite operator was accepted");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::UnsupportedOperator);
    CHECK_THAT(err.message(), Catch::Contains("operator 1: TANH (builtin code 28)"));
    CHECK_THAT(err.message(), Catch::Contains("operator 2: CUSTOM (builtin code 32)"));
    CHECK_THAT(err.message(), Catch::Contains(path.string()));
    CHECK_THAT(err.message(), !Catch::Contains("operator 0"));
    CHECK_THAT(err.message(), Catch::Contains("3 TFLite operator(s) cannot run: operator 1: TANH"));
    CHECK_THAT(err.message(), Catch::Contains("custom code 'Evil\\x0aerror: forged\\x1b[2J'"));
    CHECK(std::string(err.what()).find_first_of("\n\x1b") == std::string::npos);  // one line
  }
  CHECK(compiler::tflite_builtin_name(3) == "CONV_2D");
  CHECK(compiler::tflite_builtin_name(114) == "QUANTIZE");
  CHECK(compiler::tflite_builtin_name(999) == "BUILTIN_999");
}

TEST_CASE("TFLite: float compute operators and broken files are refused clearly", "[tflite][errors]") {
  {
    TfliteWriter w;
    auto& b = w.builder();
    const std::vector<float> wv(4, 0.5f);
    const auto wb = raw_bytes(wv);
    const int x = w.tensor("x", fb::TensorType::FLOAT32, {1, 2, 2, 1});
    const int k = w.tensor("k", fb::TensorType::FLOAT32, {1, 2, 2, 1}, nullptr, &wb);
    const int y = w.tensor("y", fb::TensorType::FLOAT32, {1, 1, 1, 1});
    w.op(3, {x, k, -1}, {y}, fb::BuiltinOptions::Conv2DOptions, fb::CreateConv2DOptions(b, fb::Padding::VALID, 1, 1).Union());
    const fs::path path = write_model("float_conv.tflite", w.finish({x}, {y}));
    try {
      compiler::import_tflite(path);
      FAIL("a float CONV_2D was accepted");
    } catch (const Error& err) {
      CHECK(err.code() == ErrorCode::UnsupportedOperator);
      CHECK_THAT(err.message(), Catch::Contains("operator 0 (CONV_2D)") && Catch::Contains("float32"));
    }
  }
  const fs::path truncated = write_model("truncated.tflite", std::string("\x10\0\0\0TFL3\0\0\0\0", 12));
  try {
    compiler::import_model(truncated);
    FAIL("a truncated TFLite file was accepted");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::ModelLoadFailed);
    CHECK_THAT(err.message(), Catch::Contains("truncated.tflite"));
  }
}

TEST_CASE("TFLite: declared sizes are checked against the limits and the buffers before allocating",
          "[tflite][errors][validation]") {
  // A RESHAPE of a constant: the constant's shape and buffer are the culprits below.
  auto model = [](std::vector<std::int32_t> const_shape, std::size_t const_bytes, std::vector<std::int32_t> out_shape) {
    TfliteWriter w;
    const std::vector<std::uint8_t> data(const_bytes, 1);
    const QSpec q{{0.5f}, {0}, 0};
    const int c = w.tensor("weights", fb::TensorType::UINT8, std::move(const_shape), &q, &data);
    const int x = w.tensor("x", fb::TensorType::UINT8, {1, 4}, &q);
    const int y = w.tensor("y", fb::TensorType::UINT8, std::move(out_shape), &q);
    w.op(22, {c}, {y});  // RESHAPE
    return w.finish({x}, {y});
  };
  auto refusal = [](const std::string& bytes, const LoadLimits& limits = {}) {
    try {
      (void)compiler::import_tflite_bytes(bytes, "bad.tflite", limits);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::IncompatibleModel);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      CHECK_THAT(e.message(), Catch::Contains("bad.tflite") && Catch::Contains("'"));
      return e.message();
    }
    FAIL("the model was accepted");
    return std::string();
  };
  // 65536 x 65536 x 5 uint8 = 20 GiB claimed by a 200-byte buffer.
  CHECK_THAT(refusal(model({65536, 65536, 5}, 200, {1, 4})),
             Catch::Contains("tensor 'weights'") && Catch::Contains("its dims claim more than"));
  CHECK_THAT(refusal(model({10, 20}, 199, {1, 4})),
             Catch::Contains("tensor 'weights' uint8 [10, 20] has a buffer of 199 bytes, its shape needs 200"));
  CHECK_THAT(refusal(model({1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, {1, 4})), Catch::Contains("rank 9, more than the limit of 8"));
  CHECK_THAT(refusal(model({2, 2}, 4, {1, 4, 1, 1, 1, 1, 1, 1, 1, 1})), Catch::Contains("tensor 'y' has rank 10"));
  LoadLimits tight;
  tight.max_total_bytes = 100;
  CHECK_THAT(refusal(model({10, 20}, 200, {1, 4}), tight), Catch::Contains("constant data passes the limit of 100"));
}

// ---- shape operators, MEAN, TFLite_Detection_PostProcess ------------------------------------------

TEST_CASE("TFLite: SHAPE -> STRIDED_SLICE -> PACK folds, and STRIDED_SLICE on data follows TFLite's masks",
          "[tflite][shape]") {
  TfliteWriter w;
  auto& b = w.builder();
  const QSpec q{{0.1f}, {0}};
  auto ints = [&](const std::string& name, const std::vector<std::int32_t>& v, std::vector<std::int32_t> shape) {
    const auto bytes = bytes32(v);
    return w.tensor(name, fb::TensorType::INT32, std::move(shape), nullptr, &bytes);
  };
  const int x = w.tensor("x", fb::TensorType::UINT8, {2, 3, 4}, &q);
  // tf.reshape(x, [tf.shape(x)[0], -1])
  const int shape = w.tensor("shape", fb::TensorType::INT32, {3});
  const int dim0 = w.tensor("dim0", fb::TensorType::INT32, {});
  const int packed = w.tensor("packed", fb::TensorType::INT32, {2});
  const int r = w.tensor("r", fb::TensorType::UINT8, {2, 12}, &q);
  w.op(77, {x}, {shape}, fb::BuiltinOptions::ShapeOptions, fb::CreateShapeOptions(b, fb::TensorType::INT32).Union());
  w.op(45, {shape, ints("b0", {0}, {1}), ints("e0", {1}, {1}), ints("s0", {1}, {1})}, {dim0},
       fb::BuiltinOptions::StridedSliceOptions, fb::CreateStridedSliceOptions(b, 0, 0, 0, 0, 1).Union());
  w.op(83, {dim0, ints("minus1", {-1}, {})}, {packed}, fb::BuiltinOptions::PackOptions, fb::CreatePackOptions(b, 2, 0).Union());
  w.op(22, {x, packed}, {r});
  // x[:, -1:0:-1... ] cases: begin_mask/end_mask on dim 0, a negative stride on dim 1, stride 2.
  const int s1 = w.tensor("s1", fb::TensorType::UINT8, {2, 2, 2}, &q);
  w.op(45, {x, ints("b1", {1, -1, 0}, {3}), ints("e1", {0, 0, 4}, {3}), ints("st1", {1, -1, 2}, {3})}, {s1},
       fb::BuiltinOptions::StridedSliceOptions, fb::CreateStridedSliceOptions(b, 0b001, 0b001, 0, 0, 0).Union());
  // x[-1, :, ::-1]: shrink dim 0 at -1, dim 1 whole by the masks, dim 2 reversed to the start.
  const int s2 = w.tensor("s2", fb::TensorType::UINT8, {3, 4}, &q);
  w.op(45, {x, ints("b2", {-1, 0, -1}, {3}), ints("e2", {0, 0, 0}, {3}), ints("st2", {1, 1, -1}, {3})}, {s2},
       fb::BuiltinOptions::StridedSliceOptions, fb::CreateStridedSliceOptions(b, 0b010, 0b110, 0, 0, 0b001).Union());
  const fs::path path = write_model("shape_ops.tflite", w.finish({x}, {r, s1, s2}));

  auto runner = runtime::create_runner(path, test_options());
  Tensor input(DType::UInt8, {2, 3, 4});
  for (std::size_t i = 0; i < 24; ++i) input.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(10 * i + 3);
  const auto out = runner->run({input});
  REQUIRE(out.size() == 3);
  auto X = [&](int a, int bb, int c) { return static_cast<int>(input.as<std::uint8_t>()[static_cast<std::size_t>((a * 3 + bb) * 4 + c)]); };
  REQUIRE(out[0].shape() == Shape{2, 12});
  CHECK(std::equal(out[0].as<std::uint8_t>().begin(), out[0].as<std::uint8_t>().end(), input.as<std::uint8_t>().begin()));
  REQUIRE(out[1].shape() == Shape{2, 2, 2});
  for (int a = 0; a < 2; ++a)
    for (int bb = 0; bb < 2; ++bb)
      for (int c = 0; c < 2; ++c) {
        INFO("s1 at " << a << "," << bb << "," << c);
        CHECK(static_cast<int>(out[1].as<std::uint8_t>()[static_cast<std::size_t>((a * 2 + bb) * 2 + c)]) == X(a, 2 - bb, 2 * c));
      }
  REQUIRE(out[2].shape() == Shape{3, 4});
  for (int bb = 0; bb < 3; ++bb)
    for (int c = 0; c < 4; ++c) CHECK(static_cast<int>(out[2].as<std::uint8_t>()[static_cast<std::size_t>(bb * 4 + c)]) == X(1, bb, 3 - c));
  // The shape chain is evaluated at compile time: no host step, "constant" in the report.
  std::size_t folded = 0;
  for (const auto& e : runner->compiled().report.entries) {
    if (e.node_name.starts_with("STRIDED_SLICE#1") || e.node_name.starts_with("PACK#2")) {
      CHECK(e.placement == std::string("constant"));
      ++folded;
    }
  }
  CHECK(folded >= 2);
  for (const auto& line : compiler::summarize_placement(runner->compiled()).host_steps) {
    CHECK_THAT(line, !Catch::Contains("STRIDED_SLICE#1") && !Catch::Contains("PACK#2") && !Catch::Contains("SHAPE#0"));
  }
}

TEST_CASE("TFLite: STRIDED_SLICE with an ellipsis or new axis mask is refused naming the operator", "[tflite][errors]") {
  TfliteWriter w;
  const auto v = bytes32({0, 0});
  const int x = w.tensor("x", fb::TensorType::UINT8, {2, 3}, nullptr);
  const int bgn = w.tensor("b", fb::TensorType::INT32, {2}, nullptr, &v);
  const int end = w.tensor("e", fb::TensorType::INT32, {2}, nullptr, &v);
  const int st = w.tensor("s", fb::TensorType::INT32, {2}, nullptr, &v);
  const int y = w.tensor("y", fb::TensorType::UINT8, {2, 3}, nullptr);
  w.op(45, {x, bgn, end, st}, {y}, fb::BuiltinOptions::StridedSliceOptions,
       fb::CreateStridedSliceOptions(w.builder(), 0, 0, 1, 0, 0).Union());
  const fs::path path = write_model("strided_slice_ellipsis.tflite", w.finish({x}, {y}));
  try {
    compiler::import_tflite(path);
    FAIL("ellipsis_mask was accepted");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::UnsupportedOperator);
    CHECK_THAT(err.message(), Catch::Contains("operator 0 (STRIDED_SLICE)") && Catch::Contains("ellipsis_mask 1"));
  }
}

namespace {

// TFLite's QuantizeMultiplier (frexp, significand * 2^31 rounded half away from zero).
std::pair<std::int32_t, int> quantize_multiplier_ref(double m) {
  int shift = 0;
  const double q = std::frexp(m, &shift);
  auto q_fixed = static_cast<std::int64_t>(std::round(q * static_cast<double>(1LL << 31)));
  if (q_fixed == (1LL << 31)) {
    q_fixed /= 2;
    ++shift;
  }
  return {static_cast<std::int32_t>(q_fixed), shift};
}

// TFLite's MultiplyByQuantizedMultiplier, written out with gemmlowp's two roundings.
std::int32_t mbqm_ref(std::int32_t x, std::int32_t mult, int shift) {
  const int left = std::max(shift, 0), right = std::max(-shift, 0);
  const std::int64_t ab = static_cast<std::int64_t>(x * (1 << left)) * mult;
  const std::int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
  const auto high = static_cast<std::int32_t>((ab + nudge) / (1LL << 31));
  const std::int32_t mask = (1 << right) - 1;  // right <= 30 in these tests
  const std::int32_t remainder = high & mask;
  const std::int32_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (high >> right) + (remainder > threshold ? 1 : 0);
}

// reference_ops::QuantizedMeanOrSum (compute_sum false) of one sum of `count` uint8 values.
int tflite_mean_ref(std::int32_t sum, std::int32_t count, double in_scale, int in_zp, double out_scale, int out_zp) {
  auto [mult, shift] = quantize_multiplier_ref(in_scale / out_scale);
  int s = 63 - __builtin_clzll(static_cast<unsigned long long>(count));
  s = std::min(s, 32);
  s = std::min(s, 31 + shift);
  mult = static_cast<std::int32_t>((static_cast<std::int64_t>(mult) << s) / count);
  shift -= s;
  const int v = mbqm_ref(sum - in_zp * count, mult, shift) + out_zp;
  return std::clamp(v, 0, 255);
}

}  // namespace

TEST_CASE("TFLite: uint8 MEAN matches TFLite's QuantizedMeanOrSum, keep_dims and rescaling", "[tflite][mean]") {
  TfliteWriter w;
  auto& b = w.builder();
  const QSpec qin{{0.5f}, {10}}, qout{{0.3f}, {3}};
  const auto hw = bytes32({1, 2}), last = bytes32({-1});
  const int x = w.tensor("x", fb::TensorType::UINT8, {1, 2, 2, 3}, &qin);
  const int a_hw = w.tensor("axes_hw", fb::TensorType::INT32, {2}, nullptr, &hw);
  const int a_last = w.tensor("axes_last", fb::TensorType::INT32, {1}, nullptr, &last);
  const int y1 = w.tensor("y1", fb::TensorType::UINT8, {1, 1, 1, 3}, &qin);  // same parameters
  const int y2 = w.tensor("y2", fb::TensorType::UINT8, {1, 3}, &qout);       // rescaled
  const int y3 = w.tensor("y3", fb::TensorType::UINT8, {1, 2, 2}, &qout);
  w.op(40, {x, a_hw}, {y1}, fb::BuiltinOptions::ReducerOptions, fb::CreateReducerOptions(b, true).Union());
  w.op(40, {x, a_hw}, {y2}, fb::BuiltinOptions::ReducerOptions, fb::CreateReducerOptions(b, false).Union());
  w.op(40, {x, a_last}, {y3}, fb::BuiltinOptions::ReducerOptions, fb::CreateReducerOptions(b, false).Union());
  const fs::path path = write_model("mean.tflite", w.finish({x}, {y1, y2, y3}));

  auto runner = runtime::create_runner(path, test_options());
  // Channel 0: values - zp = 1, 2, 3, 0 (mean 1.5, a tie); channel 1: -1, -2, -3, 0 (-1.5);
  // channel 2: spread values.
  Tensor input(DType::UInt8, {1, 2, 2, 3});
  const std::array<std::array<int, 3>, 4> px = {{{11, 9, 200}, {12, 8, 3}, {13, 7, 77}, {10, 10, 254}}};
  for (std::size_t p = 0; p < 4; ++p)
    for (std::size_t c = 0; c < 3; ++c) input.as<std::uint8_t>()[p * 3 + c] = static_cast<std::uint8_t>(px[p][c]);
  const auto out = runner->run({input});
  REQUIRE(out.size() == 3);
  REQUIRE(out[0].shape() == Shape{1, 1, 1, 3});
  REQUIRE(out[1].shape() == Shape{1, 3});
  REQUIRE(out[2].shape() == Shape{1, 2, 2});
  // Equal parameters: the integer mean rounded half away from zero (TFLite's fixed point).
  CHECK(static_cast<int>(out[0].as<std::uint8_t>()[0]) == 12);  // 10 + round(1.5)
  CHECK(static_cast<int>(out[0].as<std::uint8_t>()[1]) == 8);   // 10 + round(-1.5)
  for (std::size_t c = 0; c < 3; ++c) {
    int sum = 0;
    for (std::size_t p = 0; p < 4; ++p) sum += px[p][c];
    INFO("channel " << c);
    CHECK(static_cast<int>(out[0].as<std::uint8_t>()[c]) == tflite_mean_ref(sum, 4, 0.5f, 10, 0.5f, 10));
    CHECK(static_cast<int>(out[1].as<std::uint8_t>()[c]) == tflite_mean_ref(sum, 4, 0.5f, 10, 0.3f, 3));
  }
  CHECK(static_cast<int>(out[1].as<std::uint8_t>()[2]) == 209);  // (133.5 - 10) * 0.5 / 0.3 + 3 = 208.8
  for (std::size_t p = 0; p < 4; ++p) {
    const int sum = px[p][0] + px[p][1] + px[p][2];
    CHECK(static_cast<int>(out[2].as<std::uint8_t>()[p]) == tflite_mean_ref(sum, 3, 0.5f, 10, 0.3f, 3));
  }
  std::size_t host = 0;
  for (const auto& e : runner->compiled().report.entries) host += e.op == "furiosa::QuantizedMean" && e.placement == "fallback";
  CHECK(host == 3);
}

namespace {

struct DppCase {
  bool regular = false;
  int max_detections = 5, max_classes_per_detection = 1;
};

// 4 anchors (yc, xc, h, w), zero box encodings (each box is its anchor), 2 classes after the
// background column, uint8 class predictions with scale 0.01: anchors 0 and 1 overlap (IoU
// 0.905), anchor 2 has a high background score, anchor 3 scores under the threshold.
fs::path dpp_model(const DppCase& k, const std::string& name) {
  TfliteWriter w;
  const std::vector<float> anchors = {0.5f, 0.5f, 0.2f, 0.2f, 0.51f, 0.5f, 0.2f, 0.2f,
                                      0.2f, 0.2f, 0.1f, 0.1f, 0.8f, 0.8f, 0.1f, 0.1f};
  const auto anchor_bytes = raw_bytes(anchors);
  const QSpec qs{{0.01f}, {0}};
  const int boxes = w.tensor("boxes", fb::TensorType::FLOAT32, {1, 4, 4});
  const int scores = w.tensor("scores", fb::TensorType::UINT8, {1, 4, 3}, &qs);
  const int anc = w.tensor("anchors", fb::TensorType::FLOAT32, {4, 4}, nullptr, &anchor_bytes);
  const int n = k.max_detections * k.max_classes_per_detection;
  const int ob = w.tensor("detection_boxes", fb::TensorType::FLOAT32, {1, n, 4});
  const int oc = w.tensor("detection_classes", fb::TensorType::FLOAT32, {1, n});
  const int os = w.tensor("detection_scores", fb::TensorType::FLOAT32, {1, n});
  const int on = w.tensor("num_detections", fb::TensorType::FLOAT32, {1});
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", k.max_detections);
    fbb.Int("max_classes_per_detection", k.max_classes_per_detection);
    fbb.Int("detections_per_class", 10);
    fbb.Bool("use_regular_nms", k.regular);
    fbb.Float("nms_score_threshold", 0.3f);
    fbb.Float("nms_iou_threshold", 0.5f);
    fbb.Int("num_classes", 2);
    fbb.Float("y_scale", 10.0f);
    fbb.Float("x_scale", 10.0f);
    fbb.Float("h_scale", 5.0f);
    fbb.Float("w_scale", 5.0f);
  });
  fbb.Finish();
  w.custom_op("TFLite_Detection_PostProcess", {boxes, scores, anc}, {ob, oc, os, on}, fbb.GetBuffer());
  return write_model(name, w.finish({boxes, scores}, {ob, oc, os, on}));
}

// One detection expected in an output slot: anchor, class, quantized score.
struct Expect {
  int anchor, cls, q;
};

void check_dpp(const std::vector<Tensor>& out, int slots, const std::vector<std::pair<int, Expect>>& expected, int num) {
  const std::vector<std::array<float, 4>> corners = {
      {0.4f, 0.4f, 0.6f, 0.6f}, {0.41f, 0.4f, 0.61f, 0.6f}, {0.15f, 0.15f, 0.25f, 0.25f}, {0.75f, 0.75f, 0.85f, 0.85f}};
  REQUIRE(out.size() == 4);
  REQUIRE(out[0].shape() == Shape{1, slots, 4});
  REQUIRE(out[1].shape() == Shape{1, slots});
  REQUIRE(out[3].shape() == Shape{1});
  CHECK(out[3].as<float>()[0] == static_cast<float>(num));
  std::vector<bool> filled(static_cast<std::size_t>(slots), false);
  for (const auto& [slot, e] : expected) {
    const auto s = static_cast<std::size_t>(slot);
    filled[s] = true;
    INFO("slot " << slot);
    CHECK(out[1].as<float>()[s] == static_cast<float>(e.cls));
    CHECK(out[2].as<float>()[s] == static_cast<float>(e.q) * 0.01f);
    for (std::size_t j = 0; j < 4; ++j) CHECK(std::abs(out[0].as<float>()[4 * s + j] - corners[static_cast<std::size_t>(e.anchor)][j]) < 1e-6f);
  }
  for (std::size_t s = 0; s < filled.size(); ++s) {  // padding: zeros
    if (filled[s]) continue;
    INFO("padding slot " << s);
    CHECK(out[1].as<float>()[s] == 0.0f);
    CHECK(out[2].as<float>()[s] == 0.0f);
    for (std::size_t j = 0; j < 4; ++j) CHECK(out[0].as<float>()[4 * s + j] == 0.0f);
  }
}

std::vector<Tensor> run_dpp(const fs::path& path) {
  auto runner = runtime::create_runner(path, test_options());
  Tensor boxes(DType::Float32, {1, 4, 4});
  std::fill(boxes.as<float>().begin(), boxes.as<float>().end(), 0.0f);
  Tensor scores(DType::UInt8, {1, 4, 3});
  const std::vector<std::uint8_t> s = {0, 90, 10, 0, 80, 70, 95, 5, 60, 0, 20, 25};
  std::copy(s.begin(), s.end(), scores.as<std::uint8_t>().begin());
  return runner->run({boxes, scores});
}

}  // namespace

TEST_CASE("TFLite: TFLite_Detection_PostProcess, fast and regular NMS on hand-computed cases", "[tflite][detection]") {
  SECTION("regular NMS: per class; anchor 1 suppressed in class 0, kept in class 1") {
    const auto out = run_dpp(dpp_model({true, 5, 1}, "dpp_regular.tflite"));
    check_dpp(out, 5, {{0, {0, 0, 90}}, {1, {1, 1, 70}}, {2, {2, 1, 60}}}, 3);
  }
  SECTION("fast NMS, one class per detection: class-agnostic on each anchor's best score") {
    const auto out = run_dpp(dpp_model({false, 5, 1}, "dpp_fast.tflite"));
    check_dpp(out, 5, {{0, {0, 0, 90}}, {1, {2, 1, 60}}}, 2);
  }
  SECTION("fast NMS, two classes per detection: an anchor's classes in its two slots") {
    const auto out = run_dpp(dpp_model({false, 3, 2}, "dpp_fast2.tflite"));
    check_dpp(out, 6, {{0, {0, 0, 90}}, {1, {0, 1, 10}}, {2, {2, 1, 60}}, {3, {2, 0, 5}}}, 2);
  }
  SECTION("max_detections caps the regular result") {
    const auto out = run_dpp(dpp_model({true, 2, 1}, "dpp_regular2.tflite"));
    check_dpp(out, 2, {{0, {0, 0, 90}}, {1, {1, 1, 70}}}, 2);
  }
}

TEST_CASE("TFLite: LOGISTIC as TFLite's 256-entry table (uint8) and Sigmoid (float32)", "[tflite][logistic]") {
  // uint8: every input byte once; the table must be round(256 * sigmoid((q - 128) * 0.05)),
  // saturated at 255 (TFLite's PopulateLookupTable, float32 arithmetic; the rounding of the
  // float32 and double formulas agrees on these 256 values).
  auto model = [](float out_scale, bool float32) {
    TfliteWriter w;
    const QSpec qin{{0.05f}, {128}}, qout{{out_scale}, {0}};
    const auto type = float32 ? fb::TensorType::FLOAT32 : fb::TensorType::UINT8;
    const int x = w.tensor("x", type, {1, 256}, float32 ? nullptr : &qin);
    const int y = w.tensor("y", type, {1, 256}, float32 ? nullptr : &qout);
    w.op(14, {x}, {y});
    return w.finish({x}, {y});
  };
  auto runner = runtime::create_runner(write_model("logistic.tflite", model(1.0f / 256, false)), test_options());
  Tensor in(DType::UInt8, {1, 256});
  for (std::size_t i = 0; i < 256; ++i) in.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(i);
  const Tensor out = runner->run({in}).at(0);
  for (int q = 0; q < 256; ++q) {
    INFO("q " << q);
    const double sig = 1.0 / (1.0 + std::exp(-(q - 128) * static_cast<double>(0.05f)));
    CHECK(static_cast<int>(out.as<std::uint8_t>()[static_cast<std::size_t>(q)]) == std::min(255, static_cast<int>(std::round(256 * sig))));
  }
  std::size_t on_npu = 0;
  for (const auto& e : runner->compiled().report.entries) on_npu += e.op == "furiosa::Requantize" && e.placement == "npu";
  CHECK(on_npu == 1);
  // TFLite requires the output scale 1/256 (and zero point 0 for uint8).
  try {
    (void)compiler::import_tflite_bytes(model(1.0f / 128, false), "logistic.tflite");
    FAIL("a LOGISTIC with output scale 1/128 was accepted");
  } catch (const Error& e) {
    CHECK_THAT(e.message(), Catch::Contains("LOGISTIC") && Catch::Contains("1/256"));
  }
  // float32: Sigmoid on the host.
  auto frunner = runtime::create_runner(write_model("logistic_f32.tflite", model(1.0f, true)), test_options("npu0pe1"));
  Tensor fin(DType::Float32, {1, 256});
  for (std::size_t i = 0; i < 256; ++i) fin.as<float>()[i] = (static_cast<float>(i) - 128) * 0.1f;
  const Tensor fout = frunner->run({fin}).at(0);
  for (std::size_t i = 0; i < 256; ++i) {
    CHECK(fout.as<float>()[i] == Approx(1.0 / (1.0 + std::exp(-static_cast<double>(fin.as<float>()[i])))).epsilon(1e-6));
  }
}
