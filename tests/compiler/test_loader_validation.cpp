// Loader validation (issue 19): every rule the ONNX and TensorProto loaders check before they
// allocate, one case each on the real mnist-12-int8 / MobileNetV2 files changed in one place.
// Each refusal must be one line naming the file and the tensor, node or value concerned.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <string>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"
#include "furiosa/core/limits.h"
#include "test_support.h"

using namespace furiosa;

namespace {

onnx::ModelProto read_model(const std::string& rel) {
  std::ifstream in(test::shared_model(rel), std::ios::binary);
  onnx::ModelProto model;
  REQUIRE(model.ParseFromIstream(&in));
  return model;
}

/// The error importing `m` with `limits` raises; fails the test when it is accepted.
Error refusal(const onnx::ModelProto& m, const LoadLimits& limits = {}) {
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  try {
    (void)compiler::import_onnx_bytes(bytes, "bad.onnx", limits);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);  // one line
    CHECK_THAT(e.message(), Catch::Contains("bad.onnx"));
    return e;
  }
  FAIL("the model was accepted");
  throw;  // unreachable
}

}  // namespace

TEST_CASE("ONNX import: the real models pass every check with the default limits", "[compiler][validation]") {
  for (const char* rel : {"onnx-zoo/mnist-12-int8/mnist-12-int8.onnx",
                          "onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"}) {
    INFO(rel);
    CHECK_NOTHROW(compiler::import_onnx(test::shared_model(rel)));
  }
}

TEST_CASE("ONNX import: one refusal per validation rule, naming the file and the culprit",
          "[compiler][validation][errors]") {
  const onnx::ModelProto model = read_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  REQUIRE(model.graph().node_size() > 2);
  const std::string first_node_output = model.graph().node(0).output(0);

  SECTION("rank over the limit") {
    onnx::ModelProto m = model;
    auto* init = m.mutable_graph()->mutable_initializer(0);
    init->clear_dims();
    init->clear_raw_data();
    for (int i = 0; i < 9; ++i) init->add_dims(1);
    const Error e = refusal(m);
    CHECK(e.code() == ErrorCode::IncompatibleModel);
    CHECK_THAT(e.message(), Catch::Contains("rank 9, more than the limit of 8") && Catch::Contains(init->name()));
    CHECK(e.tensor() == init->name());
  }
  SECTION("limits are the caller's: a tighter byte limit refuses the largest weight") {
    LoadLimits tight;
    tight.max_tensor_bytes = 1000;
    const Error e = refusal(model, tight);
    CHECK_THAT(e.message(), Catch::Contains("more than the limit of 1000"));
  }
  SECTION("constant data over the model total") {
    LoadLimits tight;
    tight.max_total_bytes = 4096;
    CHECK_THAT(refusal(model, tight).message(), Catch::Contains("constant data passes the limit of 4096 bytes"));
  }
  SECTION("a declared input shape claiming more than any tensor may hold") {
    onnx::ModelProto m = model;
    auto* dims = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    dims->mutable_dim(0)->set_dim_value(std::int64_t{1} << 40);
    const Error e = refusal(m);
    CHECK_THAT(e.message(), Catch::Contains(m.graph().input(0).name()) && Catch::Contains("its dims claim more than"));
  }
  SECTION("a value defined twice") {
    onnx::ModelProto m = model;
    m.mutable_graph()->mutable_node(1)->set_output(0, first_node_output);
    const Error e = refusal(m);
    CHECK_THAT(e.message(), Catch::Contains(fmt::format("value '{}' is defined twice", first_node_output)));
    CHECK_THAT(e.message(), Catch::Contains(m.graph().node(1).op_type()));
  }
  SECTION("a node output shadowing an initializer") {
    onnx::ModelProto m = model;
    m.mutable_graph()->mutable_node(0)->set_output(0, m.graph().initializer(0).name());
    CHECK_THAT(refusal(m).message(), Catch::Contains("defined twice, by an initializer"));
  }
  SECTION("a cycle: the first node reads the last node's output") {
    onnx::ModelProto m = model;
    const auto& last = m.graph().node(m.graph().node_size() - 1);
    const std::string loop = last.output(0);
    m.mutable_graph()->mutable_node(0)->set_input(0, loop);
    const Error e = refusal(m);
    CHECK_THAT(e.message(), Catch::Contains(fmt::format("reads '{}', which no earlier node", loop)));
  }
  SECTION("a dangling name") {
    onnx::ModelProto m = model;
    m.mutable_graph()->mutable_node(2)->set_input(0, "nowhere");
    CHECK_THAT(refusal(m).message(), Catch::Contains("reads 'nowhere'"));
  }
  SECTION("a graph output nothing produces") {
    onnx::ModelProto m = model;
    m.mutable_graph()->mutable_output(0)->set_name("nothing");
    CHECK_THAT(refusal(m).message(), Catch::Contains("graph output 'nothing' is produced by no node"));
  }
  SECTION("an opset outside the versions this build knows") {
    onnx::ModelProto m = model;
    for (auto& op : *m.mutable_opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") op.set_version(1000);
    }
    CHECK_THAT(refusal(m).message(), Catch::Contains("opset 1000 of the default ONNX domain is outside 1..30"));
  }
  SECTION("a domain imported twice") {
    onnx::ModelProto m = model;
    auto* dup = m.add_opset_import();
    dup->set_domain("");
    dup->set_version(12);
    CHECK_THAT(refusal(m).message(), Catch::Contains("imported twice"));
  }
  SECTION("a node without op_type") {
    onnx::ModelProto m = model;
    m.mutable_graph()->mutable_node(1)->clear_op_type();
    m.mutable_graph()->mutable_node(1)->set_name("headless");
    const Error e = refusal(m);
    CHECK_THAT(e.message(), Catch::Contains("node 'headless' has no op_type"));
    CHECK(e.node() == "headless");
  }
}

TEST_CASE("TensorProto files: dims are checked against the limits and the data", "[compiler][validation][errors]") {
  const auto ref = test::shared_model("onnx-zoo/mnist-12-int8/test_data_set_0/input_0.pb");
  std::ifstream in(ref, std::ios::binary);
  onnx::TensorProto t;
  REQUIRE(t.ParseFromIstream(&in));
  std::string name;
  std::string bytes;
  REQUIRE(t.SerializeToString(&bytes));
  const Tensor good = compiler::load_tensor_pb_bytes(bytes, "input_0.pb", &name);
  CHECK(good.shape() == Shape{1, 1, 28, 28});
  CHECK(name == t.name());

  t.set_dims(0, std::int64_t{1} << 33);
  REQUIRE(t.SerializeToString(&bytes));
  try {
    (void)compiler::load_tensor_pb_bytes(bytes, "input_0.pb");
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(e.file() == "input_0.pb");
    CHECK_THAT(e.message(), Catch::Contains("its dims claim more than"));
  }
  try {
    (void)compiler::load_tensor_pb_bytes("\x0a\xff\xff\xff\xff\x0f", "garbage.pb");
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.file() == "garbage.pb");
    CHECK_THAT(e.message(), Catch::Contains("not a serialized ONNX TensorProto"));
  }
}
