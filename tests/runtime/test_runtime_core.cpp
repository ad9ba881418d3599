// The programs-only runtime (furiosa::runtime_core): a program file compiled ahead of time by
// furiosa-compile runs with no compiler linked (runtime_core_links_no_compiler checks this
// binary's symbols), reproduces the default model's recorded predictions on real Fashion-MNIST
// images, and anything that would need the compiler is refused with one clear line.
#include <fmt/format.h>

#include <fstream>

#include "furiosa/core/error.h"
#include "furiosa/runtime/queue.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "furiosa/tools/idx.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

/// The predicted class: the first maximum, as numpy's argmax in the model's generator script.
std::int64_t class_of(const Tensor& t) { return static_cast<std::int64_t>(test::argmax(t)); }

fs::path enf() { return test::build_path("FURIOSA_DEFAULT_ENF"); }
fs::path models() { return test::build_path("FURIOSA_MODELS_DIR"); }

}  // namespace

TEST_CASE("runtime_core runs a program file: the default model's recorded predictions on 200 test images",
          "[runtime_core][model]") {
  const auto ds = tools::load_fashion_mnist_test(tools::kFashionMnistDir);
  std::ifstream preds(models() / "first_1000_int8_predictions.txt");
  std::vector<std::int64_t> recorded;
  for (std::int64_t p; preds >> p;) recorded.push_back(p);
  REQUIRE(recorded.size() == 1000);

  auto runner = runtime::create_runner(enf());
  REQUIRE(runner->model().inputs.size() == 1);
  CHECK(runner->model().inputs[0].shape == Shape{1, 1, 28, 28});
  // 200 images: enough to show the program path computes what the compiled path does (which
  // test_default_model checks on all 1,000), and under a minute at 200 ms per inference.
  std::size_t differ = 0;
  for (std::size_t i = 0; i < 200; ++i) {
    const auto p = class_of(runner->run({ds.image(i)})[0]);
    if (p != recorded[i]) {
      ++differ;
      UNSCOPED_INFO("image " << i << ": runtime " << p << ", script " << recorded[i]);
    }
  }
  CHECK(differ == 0);
}

TEST_CASE("runtime_core serves a program file through the submit/recv queues", "[runtime_core]") {
  auto [submitter, receiver] = runtime::create_queue(enf());
  std::ifstream expected(models() / "images/expected_int8.txt");
  std::map<int, std::int64_t> want;
  std::string file;
  std::int64_t label = 0;
  int n = 0;
  while (expected >> file >> label) {
    submitter.submit({runtime::read_npy(models() / "images" / file)}, n);
    want[n++] = label;
  }
  REQUIRE(n == 8);
  for (int i = 0; i < n; ++i) {
    auto result = receiver.recv(std::chrono::seconds(60));
    const int context = std::any_cast<int>(result.context);
    CHECK(class_of(result.value()[0]) == want.at(context));
  }
}

TEST_CASE("runtime_core refuses what needs the compiler with one line naming the file", "[runtime_core]") {
  const fs::path onnx = models() / "fashion_mnist_int8.onnx";
  try {
    runtime::create_runner(onnx);
    FAIL("an ONNX model was accepted by the programs-only runtime");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::ModelLoadFailed);
    CHECK(e.subject().file == onnx.string());
    CHECK_THAT(e.message(), Catch::Contains("is not a program file (.enf)") && Catch::Contains("furiosa-compile"));
    CHECK(e.message().find('\n') == std::string::npos);
  }
  CHECK_THROWS_MATCHES(runtime::describe_model(onnx), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::ModelLoadFailed; }));
  const test::TempDir scratch("runtime-core");
  const fs::path pb = scratch / "input_0.pb";
  std::ofstream(pb) << "not read";
  try {
    runtime::load_tensor_file(pb);
    FAIL("a TensorProto file was read without the ONNX importer");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.message(), Catch::Contains("give a .npy file"));
  }
}
