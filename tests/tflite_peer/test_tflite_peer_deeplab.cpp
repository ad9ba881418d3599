// The published DeepLabV3 TFLite model (../shared/models/coral/deeplabv3_mnv2_pascal_quant, uint8
// [1, 513, 513, 3] -> ARG_MAX int64 [1, 513, 513]; see MANIFEST.md there) through the whole stack
// against the TFLite peer (TensorFlow Lite 2.14's reference kernels, tflite_peer.h) on three
// inputs (tests/models/make_seg_inputs.py: a real photograph and two seeded images, written by the
// CTest fixture deeplab_inputs into FURIOSA_DEEPLAB_DIR):
//  - the label map equals TFLite's on every pixel;
//  - the logits equal TFLite's bit for bit: both runtimes also run a copy of the model whose
//    output is ARG_MAX's input (tests/models/tflite_truncate.py, the fixture deeplab_logits_model);
//  - our label map is the first-index argmax of our logits everywhere (TFLite's ARG_MAX rule);
//  - the inputs exercise the model: at least two classes and 3% foreground in TFLite's maps.
// Hidden from the default Catch2 run ([.]); the CTest test tflite_deeplabv3_vs_tflite runs it after
// the fixtures. Without the inputs or the peer it fails (it never skips).
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"
#include "tflite_peer.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

// The first index of the largest value along the last axis of a uint8 [..., C] tensor (TFLite's
// ARG_MAX tie rule).
std::vector<std::int64_t> argmax_last(const Tensor& t) {
  const auto c = static_cast<std::size_t>(t.shape().back());
  const auto v = t.as<std::uint8_t>();
  std::vector<std::int64_t> out(v.size() / c);
  for (std::size_t p = 0; p < out.size(); ++p) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < c; ++k) {
      if (v[p * c + k] > v[p * c + best]) best = k;
    }
    out[p] = static_cast<std::int64_t>(best);
  }
  return out;
}

fs::path deeplab_file(const std::string& name) {
  const fs::path p = fs::path(FURIOSA_DEEPLAB_DIR) / name;
  if (!fs::exists(p)) {
    FAIL("missing " << p.string()
                    << ": run the CTest fixtures deeplab_inputs and deeplab_logits_model (they "
                       "need Debian python3-pil, "
                       "python3-numpy and python3-flatbuffers; see .ci/install-deps)");
  }
  return p;
}

}  // namespace

namespace {

// Share of equal elements of two int64 label maps, and the classes of the second.
double agreement(const Tensor& ours, const Tensor& ref, std::set<std::int64_t>* classes) {
  const auto a = ours.as<std::int64_t>(), b = ref.as<std::int64_t>();
  std::size_t equal = 0;
  for (std::size_t p = 0; p < a.size(); ++p) {
    equal += a[p] == b[p];
    if (classes) classes->insert(b[p]);
  }
  return static_cast<double>(equal) / static_cast<double>(a.size());
}

std::size_t count_different(const Tensor& a, const Tensor& b) {
  const auto x = a.as<std::uint8_t>(), y = b.as<std::uint8_t>();
  std::size_t n = 0;
  for (std::size_t k = 0; k < x.size(); ++k) n += x[k] != y[k];
  return n;
}

}  // namespace

TEST_CASE("TFLite peer: DeepLabV3 label maps and logits equal TensorFlow Lite's on three inputs",
          "[.][deeplab]") {
  const fs::path model =
      test::shared_model("coral/deeplabv3_mnv2_pascal_quant/deeplabv3_mnv2_pascal_quant.tflite");
  const fs::path logits_model = deeplab_file("logits.tflite");

  auto runner = runtime::create_runner(model, test::peer_runner_options("npu0pe0"));
  REQUIRE(runner->model().inputs.size() == 1);
  REQUIRE(runner->model().outputs.size() == 1);
  CHECK(runner->model().inputs[0].dtype == DType::UInt8);
  CHECK(runner->model().inputs[0].shape == Shape{1, 513, 513, 3});
  CHECK(runner->model().outputs[0].dtype == DType::Int64);
  CHECK(runner->model().outputs[0].shape == Shape{1, 513, 513});
  // One NPU program with every MAC, the image-pooling AVERAGE_POOL_2D and the three
  // RESIZE_BILINEAR included (no NPU -> host -> NPU round trip); on the host only the NHWC
  // input's Lower, the logits' Unlower and the ARG_MAX after the program.
  const auto summary = compiler::summarize_placement(runner->compiled());
  INFO(summary.to_string());
  CHECK(summary.npu_programs == 1);
  CHECK(summary.host_macs == 0);
  CHECK(summary.host_steps.size() == 3);
  auto logits_runner = runtime::create_runner(logits_model, test::peer_runner_options("npu0pe1"));

  std::set<std::int64_t> classes_seen;
  std::size_t foreground = 0;
  for (int i = 0; i < 3; ++i) {
    INFO("input " << i);
    const Tensor x = runtime::read_npy(deeplab_file(fmt::format("input_{}.npy", i)));
    REQUIRE(x.dtype() == DType::UInt8);
    REQUIRE(x.shape() == Shape{1, 513, 513, 3});
    const auto t0 = std::chrono::steady_clock::now();
    const auto labels = runner->run({x});
    const auto t1 = std::chrono::steady_clock::now();
    const auto logits = logits_runner->run({x});
    REQUIRE(labels.at(0).dtype() == DType::Int64);
    REQUIRE(labels.at(0).shape() == Shape{1, 513, 513});
    REQUIRE(logits.at(0).dtype() == DType::UInt8);
    REQUIRE(logits.at(0).shape() == Shape{1, 513, 513, 21});
    const auto own = argmax_last(logits[0]);
    std::size_t consistent = 0;
    for (std::size_t p = 0; p < own.size(); ++p)
      consistent += own[p] == labels[0].as<std::int64_t>()[p];
    CHECK(consistent == own.size());

    const auto t2 = std::chrono::steady_clock::now();
    const Tensor ref_labels = test::run_tflite_peer(model, {x}, labels).at(0);
    const Tensor ref_logits = test::run_tflite_peer(logits_model, {x}, logits).at(0);
    const auto t3 = std::chrono::steady_clock::now();
    const double agree = agreement(labels[0], ref_labels, &classes_seen);
    const std::size_t differ = count_different(logits[0], ref_logits);
    const std::string line = fmt::format(
        "DeepLabV3 input {} vs TensorFlow Lite 2.14: label map equal on {:.4f}% of {} pixels; {} "
        "of {} logits differ "
        "(worst {} steps); furiosa run {:.0f} ms (simulator, functional), TFLite's reference "
        "kernels {:.0f} ms for both "
        "models",
        i, 100.0 * agree, labels[0].elements(), differ, logits[0].elements(),
        static_cast<int>(test::max_abs_diff(logits[0], ref_logits)),
        std::chrono::duration<double, std::milli>(t1 - t0).count(),
        std::chrono::duration<double, std::milli>(t3 - t2).count());
    fmt::print("{}\n", line);
    INFO(line);
    CHECK(agree == 1.0);
    CHECK(differ == 0);
    for (auto v : ref_labels.as<std::int64_t>()) foreground += v != 0;
  }
  // The inputs must exercise the model: a reference that labels everything background would make
  // the agreement trivial.
  INFO("classes in the reference label maps: " << classes_seen.size() << ", foreground pixels "
                                               << foreground);
  CHECK(classes_seen.size() >= 2);
  CHECK(foreground >= 3 * 513 * 513 / 100);
}
