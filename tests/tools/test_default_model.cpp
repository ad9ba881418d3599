// The project's default model (models/fashion_mnist_int8.onnx) on real Fashion-MNIST data: the
// runtime reproduces, image by image, the int8 predictions the model's generator script recorded
// (same arithmetic), and furiosa-run's default and --dataset modes print them.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <fstream>

#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "furiosa/tools/idx.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

/// The predicted class: the first maximum, as numpy's argmax in the model's generator script.
std::int64_t class_of(const Tensor& t) { return static_cast<std::int64_t>(test::argmax(t)); }

const fs::path kModels = FURIOSA_MODELS_DIR;

}  // namespace

TEST_CASE("the default model classifies the bundled images as its model card says", "[model][default]") {
  auto runner = runtime::create_runner(kModels / "fashion_mnist_int8.onnx");
  std::ifstream expected(kModels / "images/expected_int8.txt");
  REQUIRE(expected);
  std::string file;
  std::int64_t want;
  int n = 0;
  while (expected >> file >> want) {
    auto out = runner->run({runtime::read_npy(kModels / "images" / file)});
    INFO(file);
    CHECK(class_of(out[0]) == want);
    ++n;
  }
  CHECK(n == 8);
}

TEST_CASE("the first 1,000 Fashion-MNIST test images reproduce the recorded int8 accuracy", "[model][default]") {
  const auto ds = tools::load_fashion_mnist_test(tools::kFashionMnistDir);
  REQUIRE(ds.size() == 10000);
  std::ifstream acc_file(kModels / "accuracy_int8.json");
  const auto acc = nlohmann::json::parse(acc_file);
  std::ifstream preds(kModels / "first_1000_int8_predictions.txt");
  std::vector<std::int64_t> recorded;
  for (std::int64_t p; preds >> p;) recorded.push_back(p);
  REQUIRE(recorded.size() == 1000);

  auto runner = runtime::create_runner(kModels / "fashion_mnist_int8.onnx");
  std::size_t correct = 0, differ = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    const auto p = class_of(runner->run({ds.image(i)})[0]);
    correct += p == ds.labels.data[i];
    if (p != recorded[i]) {
      ++differ;
      UNSCOPED_INFO("image " << i << ": runtime " << p << ", script " << recorded[i]);
    }
  }
  CHECK(differ == 0);
  CHECK(correct == acc["first_1000_int8_correct"].get<std::size_t>());
}

TEST_CASE("IDX reader refuses files that are not unsigned-byte IDX", "[datasets]") {
  const test::TempDir scratch("idx");  // per test run (not a fixed name), removed even when a check fails
  const fs::path p = scratch / "bad.idx";
  {
    std::ofstream f(p, std::ios::binary);
    const unsigned char hdr[] = {0, 0, 0x0D, 1, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8};  // float IDX
    f.write(reinterpret_cast<const char*>(hdr), sizeof hdr);
  }
  try {
    tools::read_idx(p);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.what(), Catch::Contains(p.string()) && Catch::Contains("0x0d"));
  }
  // A FIFO (no writer: a blocking open would hang) and a device are refused by name at once.
  const fs::path fifo = scratch / "fifo.idx";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_symlink("/dev/zero", scratch / "zero.idx");
  for (const fs::path& special : {fifo, scratch / "zero.idx"}) {
    try {
      tools::read_idx(special);
      FAIL("no error for " << special.string());
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidInput);
      CHECK_THAT(e.what(), Catch::Contains("IDX file '" + special.string() + "' is not a regular file"));
    }
  }
}
