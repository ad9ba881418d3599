// The published DeepLabV3 TFLite model (../shared/models/coral/deeplabv3_mnv2_pascal_quant, uint8
// [1, 513, 513, 3] -> ARG_MAX int64 [1, 513, 513]; see MANIFEST.md there) through the whole stack,
// against Arm NN 20.08's CpuRef backend (Debian python3-pyarmnn + libarmnn-cpuref-backend22).
//
// Arm NN's TFLite parser refuses ARG_MAX, so the reference comes from the same model with its
// output moved to ARG_MAX's input (tests/models/armnn_ref.py, which also writes that truncated
// model). The CTest fixture `deeplab_armnn_reference` (tests/CMakeLists.txt) writes, into
// FURIOSA_DEEPLAB_REF_DIR, three inputs (tests/models/make_seg_inputs.py: a real photograph and
// two seeded images), the reference logits and label maps, and logits.tflite. This test runs
// the full model (label map) and the truncated one (logits) through our runtime and requires
//  - our label map equal to the reference's on >= 99.9% of the pixels (issue 15),
//  - our label map equal to the first-index argmax of our own logits everywhere (the host ARG_MAX
//    of the full model and the logits of the truncated model belong together),
// and prints the agreement and the worst logit difference in quantization steps per input.
// It is hidden from the default Catch2 run ([.]) and runs as its own CTest test after the fixture;
// without the reference files it fails (it never skips).
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

runtime::RunnerOptions deeplab_options(const char* device) {
  runtime::RunnerOptions o;
  o.worker_num = 1;
  o.device = device;
  return o;
}

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

fs::path reference_file(const fs::path& dir, const std::string& name) {
  const fs::path p = dir / name;
  if (!fs::exists(p)) {
    FAIL("missing reference file " << p.string()
         << ": run the CTest fixture deeplab_armnn_reference (needs Debian python3-pyarmnn, "
            "libarmnn-cpuref-backend22, python3-flatbuffers, python3-pil; see .ci/install-deps)");
  }
  return p;
}

}  // namespace

TEST_CASE("TFLite: DeepLabV3 label maps agree with Arm NN CpuRef on three inputs", "[.][deeplab][tflite][models]") {
  const fs::path model = test::shared_model("coral/deeplabv3_mnv2_pascal_quant/deeplabv3_mnv2_pascal_quant.tflite");
  const fs::path ref = FURIOSA_DEEPLAB_REF_DIR;
  const fs::path logits_model = reference_file(ref, "logits.tflite");

  auto runner = runtime::create_runner(model, deeplab_options("npu0pe0"));
  REQUIRE(runner->model().inputs.size() == 1);
  REQUIRE(runner->model().outputs.size() == 1);
  CHECK(runner->model().inputs[0].dtype == DType::UInt8);
  CHECK(runner->model().inputs[0].shape == Shape{1, 513, 513, 3});
  CHECK(runner->model().outputs[0].dtype == DType::Int64);
  CHECK(runner->model().outputs[0].shape == Shape{1, 513, 513});
  auto logits_runner = runtime::create_runner(logits_model, deeplab_options("npu0pe1"));

  std::set<std::int64_t> classes_seen;
  for (int i = 0; i < 3; ++i) {
    INFO("input " << i);
    const Tensor x = runtime::read_npy(reference_file(ref, fmt::format("input_{}.npy", i)));
    const Tensor ref_labels = runtime::read_npy(reference_file(ref, fmt::format("ref_labels_{}.npy", i)));
    const Tensor ref_logits = runtime::read_npy(reference_file(ref, fmt::format("ref_logits_{}.npy", i)));
    REQUIRE(x.dtype() == DType::UInt8);
    REQUIRE(x.shape() == Shape{1, 513, 513, 3});

    const auto t0 = std::chrono::steady_clock::now();
    const Tensor labels = runner->run({x}).at(0);
    const auto t1 = std::chrono::steady_clock::now();
    const Tensor logits = logits_runner->run({x}).at(0);
    REQUIRE(labels.dtype() == DType::Int64);
    REQUIRE(labels.shape() == Shape{1, 513, 513});
    REQUIRE(ref_labels.dtype() == DType::Int64);
    REQUIRE(ref_labels.shape() == labels.shape());
    REQUIRE(logits.dtype() == DType::UInt8);
    REQUIRE(logits.shape() == Shape{1, 513, 513, 21});
    REQUIRE(ref_logits.dtype() == logits.dtype());
    REQUIRE(ref_logits.shape() == logits.shape());

    const auto ours = labels.as<std::int64_t>();
    const auto theirs = ref_labels.as<std::int64_t>();
    std::size_t equal = 0;
    for (std::size_t p = 0; p < ours.size(); ++p) {
      equal += ours[p] == theirs[p];
      classes_seen.insert(theirs[p]);
    }
    const double agreement = static_cast<double>(equal) / static_cast<double>(ours.size());
    const int worst = static_cast<int>(test::max_abs_diff(logits, ref_logits));
    std::size_t logits_off = 0;  // logit values that differ at all
    const auto a = logits.as<std::uint8_t>(), b = ref_logits.as<std::uint8_t>();
    for (std::size_t k = 0; k < a.size(); ++k) logits_off += a[k] != b[k];
    const auto own = argmax_last(logits);
    std::size_t consistent = 0;
    for (std::size_t p = 0; p < own.size(); ++p) consistent += own[p] == ours[p];

    const std::string line = fmt::format(
        "DeepLabV3 input {}: label map equal to Arm NN CpuRef on {:.4f}% of {} pixels; worst |logit - reference| = "
        "{} step(s), {} of {} logits differ; furiosa run {:.0f} ms", i, 100.0 * agreement, ours.size(), worst,
        logits_off, a.size(), std::chrono::duration<double, std::milli>(t1 - t0).count());
    fmt::print("{}\n", line);
    INFO(line);
    CHECK(agreement >= 0.999);
    CHECK(consistent == own.size());
  }
  // The inputs must exercise the model: a reference that labels everything background would make
  // the agreement trivial.
  INFO("classes in the reference label maps: " << classes_seen.size());
  CHECK(classes_seen.size() >= 3);
}
