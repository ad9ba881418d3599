// TFLite: the furiosa-sdk uint8 MNIST models through the whole stack, in batches and queues too.
// TFLite models through the whole stack (importer, compiler, simulator, runtime): the furiosa-sdk
// uint8 MNIST models on their ten reference sets (Arm NN CpuRef outputs, see
// ../shared/models/MANIFEST.md): every output within one quantization step of the reference (the
// softmax model: within what its one-step logit differences explain) and the predicted class
// equal on every set; the worst difference per model is printed.
#include <fmt/format.h>

#include <algorithm>
#include <any>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
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
#include "tflite_test_support.h"
#include "tflite_writer.h"

using namespace furiosa;
using namespace furiosa::test::tflite_tests;
namespace fs = std::filesystem;
namespace fb = furiosa::tflite_fb;

// ---- the furiosa-sdk models ---------------------------------------------------------------------

TEST_CASE("TFLite: furiosa-sdk uint8 MNIST models match their references on ten sets",
          "[tflite][models]") {
  const char* names[] = {"MNISTnet_uint8_quant_without_softmax",
                         "MNIST_MobileNet_v2_uint8_quant_without_avgpool_softmax",
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
      logits_runner = runtime::create_runner(ldir / "MNISTnet_uint8_quant_without_softmax.tflite",
                                             test_options("npu0pe1"));
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
          test::shared_model("furiosa-sdk/MNISTnet_uint8_quant_without_softmax") /
          fmt::format("test_data_set_{}", set) / "output_0.pb");
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
    const std::string line = fmt::format(
        "TFLite {}: worst |output - reference| = {} quantization step(s) (set {}), "
        "predicted class matches {}/10",
        name, worst, worst_set < 0 ? 0 : worst_set, matches);
    fmt::print("{}\n", line);
    if (worst > 1)
      WARN(line << " (softmax of logits that differ by one step; see the checks above)");
    else INFO(line);
    CHECK(matches == 10);
  }
}

TEST_CASE("TFLite: batches and queues give the rows of single runs", "[tflite][models]") {
  const fs::path dir =
      test::shared_model("furiosa-sdk/MNIST_MobileNet_v2_uint8_quant_without_avgpool_softmax");
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
