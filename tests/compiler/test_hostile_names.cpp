// Names from model files never reach the terminal raw (issue 31): an op_type or node name with a
// newline, an ESC sequence or a NUL comes out escaped, every error is one line, and the errors of
// compile_model_file name the model file once, whichever stage (import, placement, lowering)
// raised them.
#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <optional>
#include <string>

#include "furiosa/compiler/compile_cache.h"
#include "furiosa/core/error.h"
#include "test_support.h"

using namespace furiosa;
using namespace std::string_literals;

namespace {

onnx::ModelProto mnist() {
  std::ifstream in(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"), std::ios::binary);
  onnx::ModelProto model;
  REQUIRE(model.ParseFromIstream(&in));
  return model;
}

/// The first node of `m` with op type `op`.
onnx::NodeProto& node_of(onnx::ModelProto& m, const std::string& op) {
  for (auto& n : *m.mutable_graph()->mutable_node()) {
    if (n.op_type() == op) return n;
  }
  FAIL("mnist-12-int8 has no " << op);
  throw;  // unreachable
}

/// The error compiling `m` written to `<dir>/<file>` raises: one line, naming the file once.
Error compile_error(const onnx::ModelProto& m, const test::TempDir& dir, const std::string& file) {
  const std::string path = (dir / file).string();
  {
    std::ofstream out(path, std::ios::binary);
    REQUIRE(m.SerializeToOstream(&out));
  }
  try {
    (void)compiler::compile_model_file(path, compiler::CompilerOptions{}, std::nullopt);
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.find('\x1b') == std::string::npos);
    CHECK(what.find('\0') == std::string::npos);
    CHECK(what.find(path) != std::string::npos);
    CHECK(what.find(path) == what.rfind(path));  // once
    CHECK(e.file() == path);
    return e;
  }
  FAIL("the model was accepted");
  throw;  // unreachable
}

}  // namespace

TEST_CASE("an op_type with a newline cannot forge an error line", "[compiler][errors][hostile]") {
  const test::TempDir dir("hostile-names");
  onnx::ModelProto m = mnist();
  node_of(m, "Reshape").set_op_type("Foo\nerror: InvalidInput: injected line");
  const Error e = compile_error(m, dir, "injected.onnx");
  CHECK(e.code() == ErrorCode::UnsupportedOperator);
  CHECK_THAT(e.message(), Catch::Contains("(op Foo\\x0aerror: InvalidInput: injected line, domain 'ai.onnx')"));
  CHECK_THAT(e.message(), Catch::Contains("1 node(s) cannot run: node '"));
}

TEST_CASE("UnsupportedOperator lists every such node on one line with escaped names", "[compiler][errors][hostile]") {
  const test::TempDir dir("hostile-names");
  onnx::ModelProto m = mnist();
  auto& a = node_of(m, "Reshape");
  a.set_name("clear\x1b[2Jscreen");
  a.set_op_type("Frobnicate");
  a.set_domain("com.example\r");
  auto& b = node_of(m, "MaxPool");
  b.set_name("cut\0here"s);
  b.set_op_type("Bar\0baz"s);
  const Error e = compile_error(m, dir, "two.onnx");
  CHECK(e.code() == ErrorCode::UnsupportedOperator);
  CHECK_THAT(e.message(), Catch::Contains("2 node(s) cannot run"));
  CHECK_THAT(e.message(), Catch::Contains("node 'clear\\x1b[2Jscreen' (op Frobnicate, domain 'com.example\\x0d')"));
  CHECK_THAT(e.message(), Catch::Contains("node 'cut\\x00here' (op Bar\\x00baz"));
  CHECK_THAT(e.message(), Catch::Contains("docs/operators.md"));
}

TEST_CASE("a lowering error names the file and the escaped node", "[compiler][errors][hostile]") {
  const test::TempDir dir("hostile-names");
  onnx::ModelProto m = mnist();
  auto& conv = node_of(m, "QLinearConv");
  conv.set_name("conv\x1b[2J\nerror: forged");
  auto* attrs = conv.mutable_attribute();
  for (int i = attrs->size() - 1; i >= 0; --i) {
    if (attrs->Get(i).name() == "pads" || attrs->Get(i).name() == "auto_pad") attrs->DeleteSubrange(i, 1);
  }
  auto* pads = conv.add_attribute();  // 3 values: refused by the compiler
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 3; ++i) pads->add_ints(1);
  const Error e = compile_error(m, dir, "bad pads.onnx");
  CHECK(e.code() == ErrorCode::IncompatibleModel);
  CHECK_THAT(e.message(), Catch::Contains("conv\\x1b[2J\\x0aerror: forged"));
  CHECK_THAT(e.message(), Catch::Contains("pads"));
}

TEST_CASE("the file name itself is escaped when it is added", "[compiler][errors][hostile]") {
  const test::TempDir dir("hostile-names");
  onnx::ModelProto m = mnist();
  node_of(m, "Reshape").set_op_type("Foo");
  const std::string path = (dir / "evil\nname.onnx").string();
  {
    std::ofstream out(path, std::ios::binary);
    REQUIRE(m.SerializeToOstream(&out));
  }
  try {
    (void)compiler::compile_model_file(path, compiler::CompilerOptions{}, std::nullopt);
    FAIL("the model was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    CHECK_THAT(e.message(), Catch::StartsWith(dir.string() + "/evil\\x0aname.onnx: 1 node(s) cannot run"));
    CHECK(e.file() == path);
  }
}

TEST_CASE("QLinearConv with both auto_pad and pads is refused (ONNX: pads only with NOTSET)", "[compiler][errors]") {
  const test::TempDir dir("auto-pad");
  onnx::ModelProto m = mnist();
  auto& conv = node_of(m, "QLinearConv");
  bool same = false;
  for (const auto& attr : conv.attribute()) same = same || (attr.name() == "auto_pad" && attr.s() == "SAME_UPPER");
  REQUIRE(same);  // mnist-12-int8's convolutions pad with auto_pad
  auto* pads = conv.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(0);
  const Error e = compile_error(m, dir, "both.onnx");
  CHECK(e.code() == ErrorCode::IncompatibleModel);
  CHECK_THAT(e.message(), Catch::Contains("(QLinearConv): attributes 'auto_pad' (SAME_UPPER) and 'pads' are both set"));
  CHECK(e.node() == conv.name());
}
