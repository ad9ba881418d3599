// Host operator library: support queries, errors, attribute variants across opsets, output reuse.
// Targeted cases of the host (CPU fallback) operator library for what the ONNX backend node tests
// (test_cpu_ops_onnx_conformance.cpp) do not cover: dtypes, attribute variants of older/newer
// opsets, errors.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "cpu_ops_test_support.h"
#include "furiosa/core/error.h"
#include "furiosa/host/cpu_ops.h"

using namespace furiosa;
using compiler::Attribute;
using compiler::Node;
using namespace furiosa::test::cpu_ops_tests;

TEST_CASE("cpu ops: list and support queries", "[compiler][cpu_ops]") {
  const auto list = host::cpu_op_list();
  CHECK(list.size() == 59);
  for (const char* op :
       {"Softmax", "Conv", "DynamicQuantizeLinear", "MatMulInteger", "Cast", "Slice"}) {
    CHECK(std::find(list.begin(), list.end(), op) != list.end());
  }
  std::string why;
  CHECK(host::cpu_op_supported(make_node("Softmax", 1), {DType::Float32}, &why));
  CHECK(why.empty());
  CHECK_FALSE(host::cpu_op_supported(make_node("Softmax", 1), {DType::UInt8}, &why));
  CHECK_THAT(why, Catch::Contains("uint8") && Catch::Contains("float32"));
  Node contrib = make_node("QLinearAdd", 8);
  contrib.domain = "com.microsoft";
  CHECK_FALSE(host::cpu_op_supported(contrib, {}, &why));
  CHECK_THAT(why, Catch::Contains("com.microsoft::QLinearAdd"));
  // Pools take any spatial rank; Conv 1-D and 2-D only.
  CHECK(host::cpu_op_supported(
      make_node("MaxPool", 1, {{"kernel_shape", std::vector<std::int64_t>{2, 2, 2}}}),
      {DType::Float32}, &why));
  CHECK_FALSE(host::cpu_op_supported(
      make_node("Conv", 2, {{"kernel_shape", std::vector<std::int64_t>{2, 2, 2}}}),
      {DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("3-D"));
  CHECK_FALSE(host::cpu_op_supported(make_node("Cast", 1, {{"to", std::int64_t{10}}}),
                                     {DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("type 10"));
  // An omitted optional input's dtype is ignored.
  Node clip = make_node("Clip", 3);
  clip.inputs[1] = -1;
  CHECK(host::cpu_op_supported(clip, {DType::Int8, DType::Float32, DType::Int8}, &why));
  // Attribute of the wrong kind: unsupported with a reason, no exception.
  CHECK_FALSE(host::cpu_op_supported(make_node("Cast", 1, {{"to", std::string("float")}}),
                                     {DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("'to'"));
}

TEST_CASE("cpu ops: errors name the node", "[compiler][cpu_ops]") {
  Tensor a = f32({2, 3}, std::vector<float>(6, 1.0f)), b = f32({4}, std::vector<float>(4, 1.0f));
  try {
    host::run_cpu_op(make_node("Add", 2), {&a, &b});
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::IncompatibleModel);
    CHECK_THAT(e.message(),
               Catch::Contains("t_Add") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  }
  try {
    host::run_cpu_op(make_node("Erf", 1), {&a});
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::UnsupportedOperator);
    CHECK_THAT(e.message(), Catch::Contains("t_Erf"));
  }
  // Reshape's target shape must be a constant for shape inference.
  host::CpuValueInfo data{DType::Float32, {2, 3}, nullptr}, shape{DType::Int64, {1}, nullptr};
  try {
    host::cpu_op_infer(make_node("Reshape", 2), {&data, &shape});
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::IncompatibleModel);
    CHECK_THAT(e.message(), Catch::Contains("t_Reshape") && Catch::Contains("constant"));
  }
  Tensor target = i64({1}, {6});
  shape.constant = &target;
  auto inferred = host::cpu_op_infer(make_node("Reshape", 2), {&data, &shape});
  REQUIRE(inferred.size() == 1);
  CHECK(inferred[0].second == Shape{6});
  // Data-dependent failures: InvalidInput.
  Tensor idx = i64({1}, {5});
  CHECK_THROWS_MATCHES(
      host::run_cpu_op(make_node("Gather", 2), {&a, &idx}), Error,
      Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::InvalidInput; }));
  Tensor n1 = i64({2}, {7, 1}), z = i64({2}, {1, 0});
  CHECK_THROWS_MATCHES(
      host::run_cpu_op(make_node("Div", 2), {&n1, &z}), Error,
      Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::InvalidInput; }));
  // A missing required input.
  CHECK_THROWS_MATCHES(host::run_cpu_op(make_node("MatMul", 2), {&a, nullptr}), Error,
                       Catch::Predicate<Error>([](const Error& e) {
                         return e.code() == ErrorCode::IncompatibleModel &&
                                e.message().find("input 1") != std::string::npos;
                       }));
  // ONNX: pads "cannot be used simultaneously with auto_pad" (Conv, ConvInteger, pooling).
  Tensor img = f32({1, 1, 4, 4}, std::vector<float>(16, 1.0f)),
         wt = f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  const std::map<std::string, Attribute> both = {{"kernel_shape", std::vector<std::int64_t>{3, 3}},
                                                 {"auto_pad", std::string("SAME_UPPER")},
                                                 {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}};
  const auto refused = Catch::Predicate<Error>([](const Error& e) {
    return e.code() == ErrorCode::IncompatibleModel &&
           e.message().find("'auto_pad' (SAME_UPPER) and 'pads' are both set") != std::string::npos;
  });
  CHECK_THROWS_MATCHES(host::run_cpu_op(make_node("MaxPool", 1, both), {&img}), Error, refused);
  CHECK_THROWS_MATCHES(host::run_cpu_op(make_node("Conv", 2, both), {&img, &wt}), Error, refused);
  auto notset = both;
  notset["auto_pad"] = std::string("NOTSET");  // explicit NOTSET with pads is what exporters write
  CHECK(host::run_cpu_op(make_node("MaxPool", 1, notset), {&img}).at(0).shape() ==
        Shape{1, 1, 4, 4});
}

TEST_CASE("cpu ops: attribute and input variants across opsets", "[compiler][cpu_ops]") {
  Tensor x = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  // Squeeze with axes attribute (opset < 13), and with no axes.
  CHECK(run1(make_node("Squeeze", 1, {{"axes", std::vector<std::int64_t>{-2}}}), {&x}).shape() ==
        Shape{2, 3});
  CHECK(run1(make_node("Squeeze", 1), {&x}).shape() == Shape{2, 3});
  CHECK_THROWS_AS(run1(make_node("Squeeze", 1, {{"axes", std::vector<std::int64_t>{0}}}), {&x}),
                  Error);
  // Split with the 'split' attribute (opset < 13) and with 'num_outputs' (opset 18).
  Tensor s = f32({5}, {1, 2, 3, 4, 5});
  auto parts = host::run_cpu_op(
      make_node("Split", 1, {{"split", std::vector<std::int64_t>{1, 4}}}, 2), {&s});
  REQUIRE(parts.size() == 2);
  CHECK(values<float>(parts[1]) == std::vector<float>{2, 3, 4, 5});
  auto thirds =
      host::run_cpu_op(make_node("Split", 1, {{"num_outputs", std::int64_t{3}}}, 3), {&s});
  REQUIRE(thirds.size() == 3);
  CHECK(thirds[2].shape() == Shape{1});
  // ReduceMean with axes as input (opset 18), noop_with_empty_axes.
  Tensor axes = i64({1}, {2});
  Tensor m = run1(make_node("ReduceMean", 2, {{"keepdims", std::int64_t{0}}}), {&x, &axes});
  CHECK(m.shape() == Shape{2, 1});
  CHECK(values<float>(m) == std::vector<float>{2, 5});
  Node noop = make_node("ReduceMean", 2, {{"noop_with_empty_axes", std::int64_t{1}}});
  Tensor none = i64({0}, {});
  CHECK(values<float>(run1(noop, {&x, &none})) == values<float>(x));
  // Clip with min/max attributes (opset < 11) and with only max as input (min omitted).
  CHECK(values<float>(run1(make_node("Clip", 1, {{"min", 2.0f}, {"max", 4.5f}}), {&x})) ==
        std::vector<float>{2, 2, 3, 4, 4.5f, 4.5f});
  Tensor hi = f32({}, {3.0f});
  CHECK(values<float>(run1(make_node("Clip", 3), {&x, nullptr, &hi})) ==
        std::vector<float>{1, 2, 3, 3, 3, 3});
  // Slice with attributes (opset < 10) and with a negative step as inputs.
  CHECK(values<float>(run1(make_node("Slice", 1,
                                     {{"starts", std::vector<std::int64_t>{1}},
                                      {"ends", std::vector<std::int64_t>{3}},
                                      {"axes", std::vector<std::int64_t>{2}}}),
                           {&x})) == std::vector<float>{2, 3, 5, 6});
  Tensor st = i64({1}, {-1}), en = i64({1}, {std::numeric_limits<std::int64_t>::min()}),
         ax = i64({1}, {2}), sp = i64({1}, {-2});
  CHECK(values<float>(run1(make_node("Slice", 5), {&x, &st, &en, &ax, &sp})) ==
        std::vector<float>{3, 1, 6, 4});
  // Data movement on uint8.
  Tensor u = make<std::uint8_t>(DType::UInt8, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(values<std::uint8_t>(run1(make_node("Transpose", 1), {&u})) ==
        std::vector<std::uint8_t>{1, 4, 2, 5, 3, 6});
  CHECK(run1(make_node("Flatten", 1, {{"axis", std::int64_t{0}}}), {&u}).shape() == Shape{1, 6});
  // Gemm with C broadcast from [N] and transB.
  Tensor ga = f32({2, 2}, {1, 2, 3, 4}), gb = f32({3, 2}, {1, 0, 0, 1, 1, 1}),
         gc = f32({3}, {10, 20, 30});
  CHECK(values<float>(run1(make_node("Gemm", 3, {{"transB", std::int64_t{1}}, {"beta", 2.0f}}),
                           {&ga, &gb, &gc})) == std::vector<float>{21, 42, 63, 23, 44, 67});
}

TEST_CASE("cpu ops: outputs reuse the storage offered, zero-filled, with the same values",
          "[compiler][cpu_ops]") {
  // run_cpu_op's `reuse`: an output takes the offered tensor when dtype and shape match (the
  // runtime offers a node's previous outputs), and computes exactly what a fresh,
  // zero-filled output gives, even for operators that accumulate into their output (Conv) and
  // when the offered bytes hold garbage. Another size is not taken.
  const auto garbage = [](std::size_t bytes) {
    std::vector<std::byte> v(bytes);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::byte>(0xA5 ^ (i * 7));
    return v;
  };
  const Shape xs{1, 2, 5, 4}, ws{3, 2, 3, 3};
  Tensor x = f32(xs, ramp(40, 2.0f)), w = f32(ws, ramp(54, 1.0f)),
         b = f32({3}, {0.5f, -1.0f, 2.0f});
  struct Case {
    Node node;
    std::vector<const Tensor*> in;
  };
  Tensor parts = f32({2, 6}, ramp(12));
  const std::vector<Case> cases = {
      {make_node("Conv", 3, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}}), {&x, &w, &b}},
      {make_node("Concat", 2, {{"axis", std::int64_t{1}}}), {&x, &x}},
      {make_node("Split", 1, {{"axis", std::int64_t{1}}}, 2), {&parts}},
      {make_node("Reshape", 2), {&x, nullptr}},
  };
  Tensor shape = i64({2}, {4, 10});
  for (Case c : cases) {
    if (c.node.op_type == "Reshape") c.in[1] = &shape;
    INFO(c.node.op_type);
    const std::vector<Tensor> fresh = host::run_cpu_op(c.node, c.in);
    std::vector<Tensor> reuse;
    std::vector<const std::byte*> offered;
    for (const Tensor& t : fresh) {
      reuse.emplace_back(t.dtype(), t.shape(), garbage(t.size_bytes()));
      offered.push_back(reuse.back().bytes().data());
    }
    const std::vector<Tensor> again = host::run_cpu_op(c.node, c.in, &reuse);
    REQUIRE(again.size() == fresh.size());
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      CHECK(again[i].bytes().data() == offered[i]);  // the storage was taken
      CHECK(reuse[i].size_bytes() == 0);
      CHECK(again[i].shape() == fresh[i].shape());
      CHECK(std::equal(again[i].bytes().begin(), again[i].bytes().end(), fresh[i].bytes().begin(),
                       fresh[i].bytes().end()));
    }
  }
  // An offered tensor of another shape is left alone.
  std::vector<Tensor> small;
  small.push_back(f32({3}, {1.0f, 2.0f, 3.0f}));
  const std::byte* small_bytes = small[0].bytes().data();
  const std::vector<Tensor> out = host::run_cpu_op(cases[1].node, cases[1].in, &small);
  CHECK(out[0].bytes().data() != small_bytes);
  CHECK(small[0].size_bytes() == 12);
}
