// The host (CPU fallback) operator library: conformance against every ONNX backend node test of
// Debian's libonnx-testdata that exercises one of its operators, plus targeted cases for what the
// backend tests do not cover (dtypes, attribute variants of older/newer opsets, errors).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "furiosa/host/cpu_ops.h"
#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"
#include "furiosa/host/quantize.h"
#include "test_support.h"

using namespace furiosa;
using compiler::Attribute;
using compiler::Node;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Finding the node tests of an op: a minimal protobuf wire-format reader for the op types of a
// ModelProto's nodes. The importer cannot be used for this: it rejects models with float16,
// double or string tensors before telling which op they test, and those must count as skipped
// cases of their op, not vanish.
// ---------------------------------------------------------------------------------------------

struct WireReader {
  const unsigned char* p;
  const unsigned char* end;

  bool varint(std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      const unsigned char b = *p++;
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Next field; `bytes` is set for length-delimited fields. False at the end or on bad input.
  bool next(std::uint64_t& field, std::string_view& bytes) {
    if (p >= end) return false;
    std::uint64_t key = 0, v = 0;
    if (!varint(key)) return false;
    field = key >> 3;
    bytes = {};
    switch (key & 7) {
      case 0: return varint(v);
      case 1: p += 8; return p <= end;
      case 5: p += 4; return p <= end;
      case 2:
        if (!varint(v) || v > static_cast<std::uint64_t>(end - p)) return false;
        bytes = std::string_view(reinterpret_cast<const char*>(p), v);
        p += v;
        return true;
      default: return false;
    }
  }
};

WireReader reader(std::string_view s) {
  auto* b = reinterpret_cast<const unsigned char*>(s.data());
  return {b, b + s.size()};
}

// "domain::op_type" (or op_type) of every node of the model's graph.
std::vector<std::string> model_node_ops(const std::string& model) {
  std::vector<std::string> ops;
  std::uint64_t f = 0;
  std::string_view graph, sub;
  for (auto m = reader(model); m.next(f, graph);) {
    if (f != 7) continue;  // ModelProto.graph
    for (auto g = reader(graph); g.next(f, sub);) {
      if (f != 1) continue;  // GraphProto.node
      std::string op, domain;
      std::string_view field;
      for (auto n = reader(sub); n.next(f, field);) {
        if (f == 4) op = field;      // NodeProto.op_type
        if (f == 7) domain = field;  // NodeProto.domain
      }
      ops.push_back(domain.empty() || domain == "ai.onnx" ? op : domain + "::" + op);
    }
  }
  return ops;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ONNX backend-test comparison: |actual - expected| <= atol + rtol * |expected| (numpy
// assert_allclose, ONNX's defaults rtol=1e-3, atol=1e-7); integers exactly. Returns "" or what
// differs.
std::string compare(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype()) {
    return fmt::format("dtype {} != expected {}", dtype_name(actual.dtype()), dtype_name(expected.dtype()));
  }
  if (actual.shape() != expected.shape()) {
    return fmt::format("shape {} != expected {}", shape_to_string(actual.shape()),
                       shape_to_string(expected.shape()));
  }
  constexpr double rtol = 1e-3, atol = 1e-7;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(actual.elements()); ++i) {
    const double a = test::element(actual, i), e = test::element(expected, i);
    bool ok;
    if (actual.dtype() != DType::Float32) {
      ok = a == e;
    } else if (std::isnan(e) || std::isnan(a)) {
      ok = std::isnan(e) && std::isnan(a);
    } else if (std::isinf(e) || std::isinf(a)) {
      ok = a == e;
    } else {
      ok = std::abs(a - e) <= atol + rtol * std::abs(e);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  return fmt::format("{} of {} elements differ; first at flat index {}: {} vs expected {}", bad,
                     actual.elements(), first, test::element(actual, first), test::element(expected, first));
}

struct OpStats {
  int found = 0;
  int run = 0;
  std::vector<std::string> skipped;  // "case: reason"
};

// Ops whose node tests in libonnx-testdata 1.12 all use element types the IR cannot hold: every
// single-node Cast test casts from or to float16, bfloat16, double or string. They still must
// have cases (all skipped as unsupported dtypes), and are covered by the targeted tests below.
const std::set<std::string> kNoImportableCase = {"Cast"};

// Node test cases of listed ops that are not run, each with its reason. Any other case that the
// importer or cpu_op_supported refuses, or whose results differ, fails the test -- except cases
// whose model uses an element type the IR cannot hold (float16, double, int16, uint16, uint32,
// uint64, bool, string, sequences): those are counted as skipped, since no operator could run
// them. A listed case that is not in the data fails the test too (a stale entry).
const std::map<std::string, std::string> kExcludedCases = {
    {"test_identity_opt", "optional values are not tensors; the IR holds tensors only"},
    {"test_identity_sequence", "sequences are not tensors; the IR holds tensors only"},
    {"test_resize_downsample_scales_cubic_align_corners",
     "align_corners with a fractional input * scale (4 x 0.8): the ONNX reference divides by (input * scale - 1), "
     "ONNX Runtime and this library by (output size - 1); ONNX Runtime's backend-test filters exclude this case "
     "too ('results mismatch with onnx tests')"},
    {"test_resize_downsample_scales_linear_align_corners",
     "align_corners with a fractional input * scale: the ONNX reference divides by (input * scale - 1), "
     "ONNX Runtime (the project's reference) and this library by (output size - 1); ONNX Runtime "
     "excludes this case too"},
};

}  // namespace

TEST_CASE("cpu ops: ONNX backend node tests, one per single-node test of each listed op",
          "[compiler][cpu_ops][onnx]") {
  const fs::path root = FURIOSA_ONNX_TESTDATA_DIR;
  REQUIRE(fs::is_directory(root));
  const auto op_list = host::cpu_op_list();
  std::map<std::string, OpStats> stats;
  for (const auto& op : op_list) stats[op];

  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_", 0) == 0) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  REQUIRE(dirs.size() > 100);

  int total_run = 0, total_skipped = 0;
  std::set<std::string> excluded_found;
  for (const auto& dir : dirs) {
    const auto ops = model_node_ops(read_bytes(dir / "model.onnx"));
    if (ops.size() != 1 || !stats.count(ops[0])) continue;
    const std::string& op = ops[0];
    const std::string name = dir.filename().string();
    OpStats& st = stats[op];
    ++st.found;
    auto skip = [&](const std::string& why) {
      st.skipped.push_back(fmt::format("{}: {}", name, why));
      ++total_skipped;
      WARN("skipped " << op << " case " << name << ": " << why);
    };
    if (auto ex = kExcludedCases.find(name); ex != kExcludedCases.end()) {
      excluded_found.insert(name);
      skip("excluded: " + ex->second);
      continue;
    }

    compiler::Graph g;
    try {
      g = compiler::import_onnx(test::onnx_node_test(name) / "model.onnx");
    } catch (const Error& e) {
      REQUIRE(e.code() == ErrorCode::IncompatibleModel);  // anything else is a broken importer
      INFO("ONNX node test " << name << " is refused by the importer and not in kExcludedCases");
      CHECK_THAT(e.message(), Catch::Contains("has element type"));
      skip("unsupported dtype: " + e.message());
      continue;
    }
    REQUIRE(g.nodes.size() == 1);
    const Node& node = g.nodes[0];
    std::vector<DType> dtypes;
    for (int id : node.inputs) dtypes.push_back(id >= 0 ? g.values[static_cast<std::size_t>(id)].dtype : DType::Float32);
    std::string why;
    if (!host::cpu_op_supported(node, dtypes, &why)) {
      REQUIRE(!why.empty());
      FAIL_CHECK("ONNX node test " << name << " is refused and not in kExcludedCases: " << why);
      skip("cpu_op_supported: " + why);
      continue;
    }

    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    }
    std::sort(sets.begin(), sets.end());
    REQUIRE(!sets.empty());
    for (const auto& set : sets) {
      INFO("ONNX node test " << name << " / " << set.filename().string());
      std::map<int, Tensor> values;  // graph inputs and expected outputs by value id
      for (std::size_t i = 0; i < g.inputs.size(); ++i) {
        values[g.inputs[i]] = compiler::load_tensor_pb(set / fmt::format("input_{}.pb", i));
      }
      std::map<int, Tensor> expected;
      for (std::size_t i = 0; i < g.outputs.size(); ++i) {
        expected[g.outputs[i]] = compiler::load_tensor_pb(set / fmt::format("output_{}.pb", i));
      }
      std::vector<const Tensor*> inputs;
      std::vector<host::CpuValueInfo> infos(node.inputs.size());
      std::vector<const host::CpuValueInfo*> info_ptrs;
      for (std::size_t k = 0; k < node.inputs.size(); ++k) {
        const int id = node.inputs[k];
        if (id < 0) {
          inputs.push_back(nullptr);
          info_ptrs.push_back(nullptr);
          continue;
        }
        const auto& v = g.values[static_cast<std::size_t>(id)];
        const Tensor* t = v.constant ? &*v.constant : &values.at(id);
        inputs.push_back(t);
        // Every value of a backend test is known, so every input is passed as a constant.
        infos[k] = {t->dtype(), t->shape(), t};
        info_ptrs.push_back(&infos[k]);
      }

      std::vector<std::pair<DType, Shape>> inferred;
      std::vector<Tensor> outputs;
      try {
        inferred = host::cpu_op_infer(node, info_ptrs);
        outputs = host::run_cpu_op(node, inputs);
      } catch (const Error& e) {
        FAIL_CHECK("threw " << e.what());
        continue;
      }
      REQUIRE(outputs.size() == node.outputs.size());
      REQUIRE(inferred.size() == node.outputs.size());
      for (std::size_t k = 0; k < node.outputs.size(); ++k) {
        INFO("output " << k);
        auto it = expected.find(node.outputs[k]);
        if (it == expected.end()) continue;
        CHECK(inferred[k].first == it->second.dtype());
        CHECK(shape_to_string(inferred[k].second) == shape_to_string(it->second.shape()));
        CHECK(compare(outputs[k], it->second) == "");
      }
    }
    ++st.run;
    ++total_run;
  }

  std::ostringstream summary;
  summary << fmt::format("cpu ops ONNX conformance: {} ops, {} cases run, {} cases skipped\n",
                         op_list.size(), total_run, total_skipped);
  for (const auto& op : op_list) {
    const auto& s = stats[op];
    summary << fmt::format("  {:<22} run {:>2}  skipped {:>2}\n", op, s.run, s.skipped.size());
    for (const auto& sk : s.skipped) summary << "      skipped " << sk << "\n";
  }
  std::cout << summary.str() << std::flush;

  for (const auto& [name, why] : kExcludedCases) {
    INFO("kExcludedCases lists " << name << " (" << why << "), which is no node test of a listed op");
    CHECK(excluded_found.count(name) == 1);
  }
  for (const auto& op : op_list) {
    INFO("op " << op);
    const auto& s = stats[op];
    if (kNoImportableCase.count(op)) {
      // Justified only while the data has cases for it and none of them can be imported.
      CHECK(s.found > 0);
      CHECK(s.run == 0);
    } else {
      REQUIRE(s.run >= 1);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Targeted cases
// ---------------------------------------------------------------------------------------------

namespace {

Node make_node(const std::string& op, int n_inputs, std::map<std::string, Attribute> attrs = {},
               int n_outputs = 1) {
  Node n;
  n.name = "t_" + op;
  n.op_type = op;
  for (int i = 0; i < n_inputs; ++i) n.inputs.push_back(i);
  for (int i = 0; i < n_outputs; ++i) n.outputs.push_back(100 + i);
  n.attributes = std::move(attrs);
  return n;
}

template <class T>
Tensor make(DType dt, Shape shape, const std::vector<T>& v) {
  REQUIRE(dtype_size(dt) == sizeof(T));
  std::vector<std::byte> bytes(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return Tensor(dt, std::move(shape), std::move(bytes));
}
Tensor f32(Shape s, const std::vector<float>& v) { return make(DType::Float32, std::move(s), v); }
Tensor i64(Shape s, const std::vector<std::int64_t>& v) { return make(DType::Int64, std::move(s), v); }

template <class T>
std::vector<T> values(const Tensor& t) {
  auto s = t.as<T>();
  return {s.begin(), s.end()};
}

Tensor run1(const Node& n, const std::vector<const Tensor*>& in) {
  auto out = host::run_cpu_op(n, in);
  REQUIRE(out.size() == 1);
  return std::move(out[0]);
}

// Deterministic pseudo-random fill.
std::vector<float> ramp(std::size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  std::uint32_t s = 12345;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * scale;
  }
  return v;
}

}  // namespace

TEST_CASE("cpu ops: list and support queries", "[compiler][cpu_ops]") {
  const auto list = host::cpu_op_list();
  CHECK(list.size() == 59);
  for (const char* op : {"Softmax", "Conv", "DynamicQuantizeLinear", "MatMulInteger", "Cast", "Slice"}) {
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
  CHECK(host::cpu_op_supported(make_node("MaxPool", 1, {{"kernel_shape", std::vector<std::int64_t>{2, 2, 2}}}),
                               {DType::Float32}, &why));
  CHECK_FALSE(host::cpu_op_supported(make_node("Conv", 2, {{"kernel_shape", std::vector<std::int64_t>{2, 2, 2}}}),
                                     {DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("3-D"));
  CHECK_FALSE(host::cpu_op_supported(make_node("Cast", 1, {{"to", std::int64_t{10}}}), {DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("type 10"));
  // An omitted optional input's dtype is ignored.
  Node clip = make_node("Clip", 3);
  clip.inputs[1] = -1;
  CHECK(host::cpu_op_supported(clip, {DType::Int8, DType::Float32, DType::Int8}, &why));
  // Attribute of the wrong kind: unsupported with a reason, no exception.
  CHECK_FALSE(host::cpu_op_supported(make_node("Cast", 1, {{"to", std::string("float")}}), {DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("'to'"));
}

TEST_CASE("cpu ops: errors name the node", "[compiler][cpu_ops]") {
  Tensor a = f32({2, 3}, std::vector<float>(6, 1.0f)), b = f32({4}, std::vector<float>(4, 1.0f));
  try {
    host::run_cpu_op(make_node("Add", 2), {&a, &b});
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::IncompatibleModel);
    CHECK_THAT(e.message(), Catch::Contains("t_Add") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
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
  CHECK_THROWS_MATCHES(host::run_cpu_op(make_node("Gather", 2), {&a, &idx}), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::InvalidInput; }));
  Tensor n1 = i64({2}, {7, 1}), z = i64({2}, {1, 0});
  CHECK_THROWS_MATCHES(host::run_cpu_op(make_node("Div", 2), {&n1, &z}), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::InvalidInput; }));
  // A missing required input.
  CHECK_THROWS_MATCHES(host::run_cpu_op(make_node("MatMul", 2), {&a, nullptr}), Error,
                       Catch::Predicate<Error>([](const Error& e) {
                         return e.code() == ErrorCode::IncompatibleModel &&
                                e.message().find("input 1") != std::string::npos;
                       }));
  // ONNX: pads "cannot be used simultaneously with auto_pad" (Conv, ConvInteger, pooling).
  Tensor img = f32({1, 1, 4, 4}, std::vector<float>(16, 1.0f)), wt = f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
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
  CHECK(host::run_cpu_op(make_node("MaxPool", 1, notset), {&img}).at(0).shape() == Shape{1, 1, 4, 4});
}

TEST_CASE("cpu ops: Cast between the five dtypes", "[compiler][cpu_ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({8}, {-1.7f, -0.5f, 0.5f, 2.9f, 300.0f, -300.0f, nan, 3e9f});
  auto to = [&](std::int64_t onnx_type, const Tensor& in) {
    return run1(make_node("Cast", 1, {{"to", onnx_type}}), {&in});
  };
  // float -> int: truncation toward zero, NaN -> 0, saturation out of range.
  CHECK(values<std::uint8_t>(to(2, x)) == std::vector<std::uint8_t>{0, 0, 0, 2, 255, 0, 0, 255});
  CHECK(values<std::int8_t>(to(3, x)) == std::vector<std::int8_t>{-1, 0, 0, 2, 127, -128, 0, 127});
  CHECK(values<std::int32_t>(to(6, x)) ==
        std::vector<std::int32_t>{-1, 0, 0, 2, 300, -300, 0, std::numeric_limits<std::int32_t>::max()});
  CHECK(values<std::int64_t>(to(7, x)) == std::vector<std::int64_t>{-1, 0, 0, 2, 300, -300, 0, 3000000000});
  // int -> narrower int wraps (numpy astype); int -> float exact for small values.
  Tensor w = i64({4}, {-1, 256, 300, -129});
  CHECK(values<std::uint8_t>(to(2, w)) == std::vector<std::uint8_t>{255, 0, 44, 127});
  CHECK(values<std::int8_t>(to(3, w)) == std::vector<std::int8_t>{-1, 0, 44, 127});
  CHECK(values<float>(to(1, w)) == std::vector<float>{-1.0f, 256.0f, 300.0f, -129.0f});
  Tensor u = make<std::uint8_t>(DType::UInt8, {2}, {200, 7});
  CHECK(values<std::int8_t>(to(3, u)) == std::vector<std::int8_t>{-56, 7});
  CHECK(values<std::int32_t>(to(6, u)) == std::vector<std::int32_t>{200, 7});
  const host::CpuValueInfo info{DType::UInt8, {2, 5}, nullptr};
  auto inferred = host::cpu_op_infer(make_node("Cast", 1, {{"to", std::int64_t{6}}}), {&info});
  CHECK(inferred.at(0).first == DType::Int32);
  CHECK(inferred.at(0).second == Shape{2, 5});
}

TEST_CASE("cpu ops: integer arithmetic", "[compiler][cpu_ops]") {
  Tensor a = i64({4}, {7, -7, 7, -7}), b = i64({4}, {2, 2, -2, -2});
  CHECK(values<std::int64_t>(run1(make_node("Div", 2), {&a, &b})) == std::vector<std::int64_t>{3, -3, -3, 3});
  Tensor big = i64({1}, {std::numeric_limits<std::int64_t>::max()}), one = i64({1}, {1});
  CHECK(values<std::int64_t>(run1(make_node("Add", 2), {&big, &one}))[0] == std::numeric_limits<std::int64_t>::min());
  Tensor u1 = make<std::uint8_t>(DType::UInt8, {2}, {250, 3}), u2 = make<std::uint8_t>(DType::UInt8, {2}, {10, 5});
  CHECK(values<std::uint8_t>(run1(make_node("Add", 2), {&u1, &u2})) == std::vector<std::uint8_t>{4, 8});
  CHECK(values<std::uint8_t>(run1(make_node("Sub", 2), {&u1, &u2})) == std::vector<std::uint8_t>{240, 254});
  CHECK(values<std::uint8_t>(run1(make_node("Mul", 2), {&u1, &u2})) == std::vector<std::uint8_t>{196, 15});
  // Shape arithmetic as it appears in exported graphs: Shape -> Gather -> Mul -> Unsqueeze -> Concat.
  Tensor x = f32({2, 3, 4}, std::vector<float>(24, 0.0f));
  Tensor shape = run1(make_node("Shape", 1), {&x});
  CHECK(values<std::int64_t>(shape) == std::vector<std::int64_t>{2, 3, 4});
  Tensor i1 = i64({}, {1}), i2 = i64({}, {2});
  Tensor d1 = run1(make_node("Gather", 2), {&shape, &i1});
  Tensor d2 = run1(make_node("Gather", 2), {&shape, &i2});
  CHECK(d1.shape().empty());
  Tensor prod = run1(make_node("Mul", 2), {&d1, &d2});
  Tensor axes0 = i64({1}, {0});
  Tensor u = run1(make_node("Unsqueeze", 2), {&prod, &axes0});
  Tensor first = run1(make_node("Unsqueeze", 2), {&i2, &axes0});
  Tensor target = run1(make_node("Concat", 2, {{"axis", std::int64_t{0}}}), {&first, &u});
  CHECK(values<std::int64_t>(target) == std::vector<std::int64_t>{2, 12});
  Tensor r = run1(make_node("Reshape", 2), {&x, &target});
  CHECK(r.shape() == Shape{2, 12});
}

TEST_CASE("cpu ops: Softmax and LogSoftmax over one axis of a 4-D input", "[compiler][cpu_ops]") {
  const Shape s{2, 3, 2, 2};
  Tensor x = f32(s, ramp(24, 8.0f));
  auto sm = values<float>(run1(make_node("Softmax", 1, {{"axis", std::int64_t{1}}}), {&x}));
  auto lsm = values<float>(run1(make_node("LogSoftmax", 1, {{"axis", std::int64_t{1}}}), {&x}));
  auto xv = values<float>(x);
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 4; ++i) {
      double sum = 0;
      for (int c = 0; c < 3; ++c) sum += std::exp(static_cast<double>(xv[(n * 3 + c) * 4 + i]));
      for (int c = 0; c < 3; ++c) {
        const std::size_t at = static_cast<std::size_t>((n * 3 + c) * 4 + i);
        CHECK(sm[at] == Approx(std::exp(xv[at]) / sum).epsilon(1e-5));
        CHECK(lsm[at] == Approx(xv[at] - std::log(sum)).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("cpu ops: QuantizeLinear / DequantizeLinear variants", "[compiler][cpu_ops]") {
  // Rounding half to even, int8 saturation, per tensor.
  Tensor x = f32({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 1000.0f, -1000.0f});
  Tensor scale = f32({}, {1.0f});
  Tensor zp = make<std::int8_t>(DType::Int8, {}, {0});
  Tensor q = run1(make_node("QuantizeLinear", 3), {&x, &scale, &zp});
  CHECK(q.dtype() == DType::Int8);
  CHECK(values<std::int8_t>(q) == std::vector<std::int8_t>{0, 2, 2, 0, -2, -2, 127, -128});
  // No zero point: uint8 output.
  Tensor qu = run1(make_node("QuantizeLinear", 2), {&x, &scale});
  CHECK(qu.dtype() == DType::UInt8);
  CHECK(values<std::uint8_t>(qu) == std::vector<std::uint8_t>{0, 2, 2, 0, 0, 0, 255, 0});
  // Per axis 0 of a [2, 3] tensor.
  Tensor x2 = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s2 = f32({2}, {0.5f, 2.0f});
  Tensor z2 = make<std::uint8_t>(DType::UInt8, {2}, {10, 100});
  Tensor q2 = run1(make_node("QuantizeLinear", 3, {{"axis", std::int64_t{0}}}), {&x2, &s2, &z2});
  CHECK(values<std::uint8_t>(q2) == std::vector<std::uint8_t>{12, 14, 16, 102, 102, 103});
  Tensor d2 = run1(make_node("DequantizeLinear", 3, {{"axis", std::int64_t{0}}}), {&q2, &s2, &z2});
  CHECK(values<float>(d2) == std::vector<float>{1, 2, 3, 4, 4, 6});
  // int32 input (bias dequantization), no zero point.
  Tensor b = make<std::int32_t>(DType::Int32, {3}, {-100000, 0, 70000});
  Tensor bs = f32({}, {0.001f});
  auto bd = values<float>(run1(make_node("DequantizeLinear", 2), {&b, &bs}));
  CHECK(bd[0] == Approx(-100.0f));
  CHECK(bd[2] == Approx(70.0f));
  // Per-axis scale whose size does not match the axis.
  Tensor bad = f32({3}, {1, 1, 1});
  CHECK_THROWS_AS(run1(make_node("QuantizeLinear", 2, {{"axis", std::int64_t{0}}}), {&x2, &bad}), Error);
}

TEST_CASE("cpu ops: DynamicQuantizeLinear of all zeros", "[compiler][cpu_ops]") {
  Tensor x = f32({2, 2}, {0, 0, 0, 0});
  auto out = host::run_cpu_op(make_node("DynamicQuantizeLinear", 1, {}, 3), {&x});
  REQUIRE(out.size() == 3);
  CHECK(out[1].as<float>()[0] == 1.0f);
  CHECK(out[2].as<std::uint8_t>()[0] == 0);
  CHECK(values<std::uint8_t>(out[0]) == std::vector<std::uint8_t>{0, 0, 0, 0});
}

TEST_CASE("cpu ops: MatMulInteger with per-row and per-column zero points", "[compiler][cpu_ops]") {
  const std::int64_t M = 3, K = 4, N = 2;
  std::vector<std::int8_t> av(M * K), bv(K * N);
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 255) - 127);
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<std::int8_t>(static_cast<int>(i * 91 % 255) - 127);
  Tensor a = make(DType::Int8, {M, K}, av), b = make(DType::Int8, {K, N}, bv);
  Tensor az = make<std::int8_t>(DType::Int8, {M}, {1, -2, 3});
  Tensor bz = make<std::int8_t>(DType::Int8, {N}, {-4, 5});
  Tensor y = run1(make_node("MatMulInteger", 4), {&a, &b, &az, &bz});
  REQUIRE(y.dtype() == DType::Int32);
  REQUIRE(y.shape() == Shape{M, N});
  const auto yv = values<std::int32_t>(y);
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      std::int32_t ref = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        ref += (av[i * K + k] - az.as<std::int8_t>()[i]) * (bv[k * N + j] - bz.as<std::int8_t>()[j]);
      }
      CHECK(yv[static_cast<std::size_t>(i * N + j)] == ref);
    }
  }
  // Batched A [2, M, K] with a per-row zero point shaped [2, M, 1] and a scalar b zero point.
  std::vector<std::int8_t> av2(av);
  av2.insert(av2.end(), av.begin(), av.end());
  Tensor a2 = make(DType::Int8, {2, M, K}, av2);
  Tensor az2 = make<std::int8_t>(DType::Int8, {2, M, 1}, {1, -2, 3, 0, 0, 0});
  Tensor bz0 = make<std::int8_t>(DType::Int8, {}, {0});
  Tensor y2 = run1(make_node("MatMulInteger", 4), {&a2, &b, &az2, &bz0});
  REQUIRE(y2.shape() == Shape{2, M, N});
  const auto y2v = values<std::int32_t>(y2);
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      std::int32_t r0 = 0, r1 = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        r0 += (av[i * K + k] - az.as<std::int8_t>()[i]) * bv[k * N + j];
        r1 += av[i * K + k] * bv[k * N + j];
      }
      CHECK(y2v[static_cast<std::size_t>(i * N + j)] == r0);
      CHECK(y2v[static_cast<std::size_t>(M * N + i * N + j)] == r1);
    }
  }
}

namespace {

// Naive 2-D convolution reference (x: [N, C, H, W], w: [M, C/g, KH, KW]).
std::vector<double> conv_ref(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                             const Shape& ws, const std::vector<double>& bias, std::int64_t group,
                             std::array<std::int64_t, 2> s, std::array<std::int64_t, 2> d,
                             std::array<std::int64_t, 4> p, Shape& ys) {
  const std::int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], M = ws[0], KH = ws[2], KW = ws[3];
  const std::int64_t OH = (H + p[0] + p[2] - ((KH - 1) * d[0] + 1)) / s[0] + 1;
  const std::int64_t OW = (W + p[1] + p[3] - ((KW - 1) * d[1] + 1)) / s[1] + 1;
  ys = {N, M, OH, OW};
  std::vector<double> y(static_cast<std::size_t>(N * M * OH * OW), 0.0);
  const std::int64_t cg = C / group, mg = M / group;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(m)];
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t kh = 0; kh < KH; ++kh)
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const std::int64_t ih = oh * s[0] - p[0] + kh * d[0], iw = ow * s[1] - p[1] + kw * d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x[static_cast<std::size_t>(((n * C + (m / mg) * cg + c) * H + ih) * W + iw)] *
                       w[static_cast<std::size_t>(((m * cg + c) * KH + kh) * KW + kw)];
              }
          y[static_cast<std::size_t>(((n * M + m) * OH + oh) * OW + ow)] = acc;
        }
  return y;
}

}  // namespace

TEST_CASE("cpu ops: Conv with group, dilations, strides and asymmetric pads", "[compiler][cpu_ops]") {
  const Shape xs{2, 4, 9, 8}, ws{6, 2, 3, 2};
  const auto xv = ramp(static_cast<std::size_t>(element_count(xs)), 2.0f);
  const auto wv = ramp(static_cast<std::size_t>(element_count(ws)), 1.0f);
  const std::vector<float> bv{0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f};
  Tensor x = f32(xs, xv), w = f32(ws, wv), b = f32({6}, bv);
  Node n = make_node("Conv", 3,
                     {{"group", std::int64_t{2}},
                      {"strides", std::vector<std::int64_t>{2, 1}},
                      {"dilations", std::vector<std::int64_t>{2, 3}},
                      {"pads", std::vector<std::int64_t>{1, 0, 2, 3}}});
  Tensor y = run1(n, {&x, &w, &b});
  Shape ys;
  const auto ref = conv_ref({xv.begin(), xv.end()}, xs, {wv.begin(), wv.end()}, ws, {bv.begin(), bv.end()}, 2,
                            {2, 1}, {2, 3}, {1, 0, 2, 3}, ys);
  REQUIRE(y.shape() == ys);
  const auto yv = values<float>(y);
  for (std::size_t i = 0; i < ref.size(); ++i) CHECK(yv[i] == Approx(ref[i]).margin(1e-5));

  // ConvInteger, int8, per-output-channel weight zero point, depthwise (group = C).
  const Shape xq{1, 3, 5, 5}, wq{3, 1, 3, 3};
  std::vector<std::int8_t> xi(75), wi(27);
  for (std::size_t i = 0; i < xi.size(); ++i) xi[i] = static_cast<std::int8_t>(static_cast<int>(i * 53 % 200) - 100);
  for (std::size_t i = 0; i < wi.size(); ++i) wi[i] = static_cast<std::int8_t>(static_cast<int>(i * 29 % 60) - 30);
  Tensor tx = make(DType::Int8, xq, xi), tw = make(DType::Int8, wq, wi);
  Tensor xz = make<std::int8_t>(DType::Int8, {}, {-3});
  Tensor wz = make<std::int8_t>(DType::Int8, {3}, {1, 0, -1});
  Node ci = make_node("ConvInteger", 4, {{"group", std::int64_t{3}}, {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  Tensor yq = run1(ci, {&tx, &tw, &xz, &wz});
  REQUIRE(yq.dtype() == DType::Int32);
  std::vector<double> xd(xi.size()), wd(wi.size());
  for (std::size_t i = 0; i < xi.size(); ++i) xd[i] = xi[i] + 3;
  for (std::size_t i = 0; i < wi.size(); ++i) wd[i] = wi[i] - wz.as<std::int8_t>()[i / 9];
  const auto refq = conv_ref(xd, xq, wd, wq, {}, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, ys);
  REQUIRE(yq.shape() == ys);
  const auto yqv = values<std::int32_t>(yq);
  for (std::size_t i = 0; i < refq.size(); ++i) CHECK(yqv[i] == static_cast<std::int32_t>(refq[i]));

  // 1-D Conv equals the 2-D one with a height of 1.
  Tensor x1 = f32({1, 2, 7}, ramp(14)), w1 = f32({3, 2, 3}, ramp(18));
  Tensor x1b = f32({1, 2, 1, 7}, ramp(14)), w1b = f32({3, 2, 1, 3}, ramp(18));
  Tensor y1 = run1(make_node("Conv", 2, {{"strides", std::vector<std::int64_t>{2}}, {"pads", std::vector<std::int64_t>{1, 1}}}), {&x1, &w1});
  Tensor y1b = run1(make_node("Conv", 2, {{"strides", std::vector<std::int64_t>{1, 2}}, {"pads", std::vector<std::int64_t>{0, 1, 0, 1}}}), {&x1b, &w1b});
  CHECK(y1.shape() == Shape{1, 3, 4});
  CHECK(values<float>(y1) == values<float>(y1b));
}

TEST_CASE("cpu ops: pooling variants", "[compiler][cpu_ops]") {
  // int8 MaxPool with Indices in column-major storage order.
  Tensor x = make<std::int8_t>(DType::Int8, {1, 1, 2, 3}, {-5, 7, 1, 9, -128, 2});
  auto out = host::run_cpu_op(
      make_node("MaxPool", 1, {{"kernel_shape", std::vector<std::int64_t>{2, 2}}, {"storage_order", std::int64_t{1}}}, 2),
      {&x});
  REQUIRE(out.size() == 2);
  CHECK(values<std::int8_t>(out[0]) == std::vector<std::int8_t>{9, 7});
  // 9 is at (h=1, w=0): column-major index 0*2 + 1; 7 at (0, 1): 1*2 + 0.
  CHECK(values<std::int64_t>(out[1]) == std::vector<std::int64_t>{1, 2});
  // AveragePool, count_include_pad with ceil_mode: the divisor counts pads but not taps beyond them.
  Tensor f = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor a = run1(make_node("AveragePool", 1,
                            {{"kernel_shape", std::vector<std::int64_t>{2, 2}},
                             {"strides", std::vector<std::int64_t>{2, 2}},
                             {"pads", std::vector<std::int64_t>{1, 1, 0, 0}},
                             {"count_include_pad", std::int64_t{1}},
                             {"ceil_mode", std::int64_t{1}}}),
                  {&f});
  REQUIRE(a.shape() == Shape{1, 1, 2, 2});
  CHECK(values<float>(a) == std::vector<float>{1.0f / 4, (2.0f + 3) / 4, (4.0f + 7) / 4, (5.0f + 6 + 8 + 9) / 4});
  // Without pads: the last window hangs over the end; only the taps inside the input count.
  Tensor a2 = run1(make_node("AveragePool", 1,
                             {{"kernel_shape", std::vector<std::int64_t>{2, 2}},
                              {"strides", std::vector<std::int64_t>{2, 2}},
                              {"count_include_pad", std::int64_t{1}},
                              {"ceil_mode", std::int64_t{1}}}),
                   {&f});
  REQUIRE(a2.shape() == Shape{1, 1, 2, 2});
  CHECK(values<float>(a2) == std::vector<float>{3.0f, 4.5f, 7.5f, 9.0f});
  Tensor g = run1(make_node("GlobalAveragePool", 1), {&f});
  CHECK(g.shape() == Shape{1, 1, 1, 1});
  CHECK(values<float>(g)[0] == Approx(5.0f));
}

namespace {

// Brute-force 3-D pooling reference, written out per dim (independent of the library's N-D
// window walk): x [N, C, D, H, W], attributes as ONNX names them (pads: begins then ends).
// Gives the max, the average, the row-major and column-major argmax offsets and the shape.
struct Pool3dRef {
  std::vector<float> max, avg;
  std::vector<std::int64_t> idx_row, idx_col;
  Shape ys;
};
Pool3dRef pool3d_ref(const std::vector<float>& x, const Shape& xs, std::array<std::int64_t, 3> k,
                     std::array<std::int64_t, 3> s, std::array<std::int64_t, 3> d, std::array<std::int64_t, 6> p,
                     const std::string& auto_pad, bool ceil_mode, bool include_pad) {
  const std::int64_t N = xs[0], C = xs[1];
  const std::array<std::int64_t, 3> in{xs[2], xs[3], xs[4]};
  std::array<std::int64_t, 3> o{};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::int64_t eff = (k[i] - 1) * d[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o[i] = (in[i] + s[i] - 1) / s[i];
      const std::int64_t total = std::max<std::int64_t>(0, (o[i] - 1) * s[i] + eff - in[i]);
      p[i] = auto_pad == "SAME_LOWER" ? (total + 1) / 2 : total / 2;
      p[i + 3] = total - p[i];
    } else {
      const double f = static_cast<double>(in[i] + p[i] + p[i + 3] - eff) / static_cast<double>(s[i]);
      o[i] = static_cast<std::int64_t>(ceil_mode ? std::ceil(f) : std::floor(f)) + 1;
      if (ceil_mode && (o[i] - 1) * s[i] >= in[i] + p[i]) --o[i];
    }
  }
  Pool3dRef r;
  r.ys = {N, C, o[0], o[1], o[2]};
  const std::int64_t plane = in[0] * in[1] * in[2];
  for (std::int64_t nc = 0; nc < N * C; ++nc)
    for (std::int64_t a = 0; a < o[0]; ++a)
      for (std::int64_t b = 0; b < o[1]; ++b)
        for (std::int64_t e = 0; e < o[2]; ++e) {
          float best = 0, sum = 0;
          std::int64_t row = -1, col = -1, inside = 0, padded = 0;
          for (std::int64_t ka = 0; ka < k[0]; ++ka)
            for (std::int64_t kb = 0; kb < k[1]; ++kb)
              for (std::int64_t ke = 0; ke < k[2]; ++ke) {
                const std::int64_t i0 = a * s[0] - p[0] + ka * d[0], i1 = b * s[1] - p[1] + kb * d[1],
                                   i2 = e * s[2] - p[2] + ke * d[2];
                padded += i0 >= -p[0] && i0 < in[0] + p[3] && i1 >= -p[1] && i1 < in[1] + p[4] &&
                          i2 >= -p[2] && i2 < in[2] + p[5];
                if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                const float v = x[static_cast<std::size_t>(nc * plane + (i0 * in[1] + i1) * in[2] + i2)];
                ++inside;
                sum += v;
                if (row < 0 || v > best) {
                  best = v;
                  row = nc * plane + (i0 * in[1] + i1) * in[2] + i2;
                  col = nc * plane + i0 + i1 * in[0] + i2 * in[0] * in[1];
                }
              }
          const std::int64_t count = include_pad ? padded : inside;
          r.max.push_back(best);
          r.avg.push_back(count > 0 ? sum / static_cast<float>(count) : 0.0f);
          r.idx_row.push_back(row);
          r.idx_col.push_back(col);
        }
  return r;
}

}  // namespace

TEST_CASE("cpu ops: 3-D and higher pooling against a brute-force reference and the 2-D path", "[compiler][cpu_ops]") {
  using V = std::vector<std::int64_t>;
  const Shape xs{2, 3, 5, 6, 7};
  // Distinct values (a permutation of a ramp), so the argmax is unique and ties do not hide
  // an index error.
  std::vector<float> xv(static_cast<std::size_t>(element_count(xs)));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 97) % xv.size()) * 0.25f - 40.0f;
  Tensor x = f32(xs, xv);
  struct Case {
    std::array<std::int64_t, 3> k, s, d;
    std::array<std::int64_t, 6> p;
    std::string auto_pad;
    bool ceil, include_pad;
  };
  const std::vector<Case> cases = {
      {{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, "NOTSET", false, false},  // test_*pool_3d_default
      {{3, 2, 3}, {2, 1, 3}, {1, 2, 1}, {1, 0, 2, 1, 1, 0}, "NOTSET", false, false},
      {{3, 2, 3}, {2, 1, 3}, {1, 2, 1}, {1, 0, 2, 1, 1, 0}, "NOTSET", false, true},
      {{2, 3, 2}, {2, 2, 2}, {1, 1, 2}, {0, 1, 1, 0, 1, 0}, "NOTSET", true, true},
      {{2, 3, 2}, {2, 2, 2}, {1, 1, 2}, {0, 1, 1, 0, 1, 0}, "NOTSET", true, false},
      {{3, 3, 4}, {2, 3, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, "SAME_UPPER", false, true},
      {{3, 3, 4}, {2, 3, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, "SAME_LOWER", false, false},
      {{2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {9, 9, 9, 9, 9, 9}, "VALID", true, false},
  };
  for (const auto& cs : cases) {
    INFO("kernel " << cs.k[0] << "x" << cs.k[1] << "x" << cs.k[2] << " auto_pad " << cs.auto_pad << " ceil "
                   << cs.ceil << " count_include_pad " << cs.include_pad);
    std::map<std::string, Attribute> attrs = {{"kernel_shape", V(cs.k.begin(), cs.k.end())},
                                              {"strides", V(cs.s.begin(), cs.s.end())},
                                              {"dilations", V(cs.d.begin(), cs.d.end())},
                                              {"ceil_mode", std::int64_t{cs.ceil}}};
    if (cs.auto_pad == "NOTSET") attrs["pads"] = V(cs.p.begin(), cs.p.end());
    else attrs["auto_pad"] = cs.auto_pad;
    const auto ref = pool3d_ref(xv, xs, cs.k, cs.s, cs.d, cs.auto_pad == "NOTSET" ? cs.p : std::array<std::int64_t, 6>{},
                                cs.auto_pad, cs.ceil, cs.include_pad);
    std::string why;
    REQUIRE(host::cpu_op_supported(make_node("MaxPool", 1, attrs, 2), {DType::Float32}, &why));
    for (std::int64_t order : {0, 1}) {
      auto m_attrs = attrs;
      m_attrs["storage_order"] = order;
      auto out = host::run_cpu_op(make_node("MaxPool", 1, m_attrs, 2), {&x});
      REQUIRE(out.size() == 2);
      REQUIRE(out[0].shape() == ref.ys);
      REQUIRE(out[1].shape() == ref.ys);
      CHECK(values<float>(out[0]) == ref.max);
      CHECK(values<std::int64_t>(out[1]) == (order == 0 ? ref.idx_row : ref.idx_col));
    }
    auto a_attrs = attrs;
    a_attrs["count_include_pad"] = std::int64_t{cs.include_pad};
    Tensor avg = run1(make_node("AveragePool", 1, a_attrs), {&x});
    REQUIRE(avg.shape() == ref.ys);
    const auto av = values<float>(avg);
    for (std::size_t i = 0; i < av.size(); ++i) CHECK(av[i] == Approx(ref.avg[i]).epsilon(1e-6).margin(1e-6));
  }

  // uint8 and int8: values with ties (first tap in row-major window order wins).
  std::vector<std::uint8_t> xu(xv.size());
  std::vector<std::int8_t> xi(xv.size());
  std::vector<float> xuf(xv.size()), xif(xv.size());
  for (std::size_t i = 0; i < xu.size(); ++i) {
    xu[i] = static_cast<std::uint8_t>((i * 37) % 251);
    xi[i] = static_cast<std::int8_t>(static_cast<int>((i * 53) % 199) - 99);
    xuf[i] = xu[i];
    xif[i] = xi[i];
  }
  Tensor tu = make(DType::UInt8, xs, xu), ti = make(DType::Int8, xs, xi);
  const auto ru = pool3d_ref(xuf, xs, {2, 3, 2}, {2, 2, 2}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, "NOTSET", false, false);
  const auto ri = pool3d_ref(xif, xs, {2, 3, 2}, {2, 2, 2}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, "NOTSET", false, false);
  const Node q8 = make_node("MaxPool", 1, {{"kernel_shape", V{2, 3, 2}}, {"strides", V{2, 2, 2}}, {"pads", V{1, 0, 1, 0, 1, 1}}}, 2);
  auto mu = host::run_cpu_op(q8, {&tu});
  auto mi = host::run_cpu_op(q8, {&ti});
  REQUIRE(mu[0].shape() == ru.ys);
  REQUIRE(mi[0].shape() == ri.ys);
  CHECK(values<std::int64_t>(mu[1]) == ru.idx_row);
  CHECK(values<std::int64_t>(mi[1]) == ri.idx_row);
  for (std::size_t i = 0; i < ru.max.size(); ++i) {
    CHECK(static_cast<float>(mu[0].as<std::uint8_t>()[i]) == ru.max[i]);
    CHECK(static_cast<float>(mi[0].as<std::int8_t>()[i]) == ri.max[i]);
  }

  // A kernel of 1 over the depth is the 2-D pool of every depth slice: the N-D walk and the 2-D
  // kernels (checked against the ONNX backend cases) agree on pads, strides, dilations and
  // ceil_mode, for both ops.
  const Shape x2s{2, 3 * 5, 6, 7};
  Tensor x2 = f32(x2s, xv);
  const std::map<std::string, Attribute> a3 = {{"kernel_shape", V{1, 3, 2}}, {"strides", V{1, 2, 3}},
                                               {"dilations", V{1, 2, 1}}, {"pads", V{0, 2, 1, 0, 1, 1}},
                                               {"ceil_mode", std::int64_t{1}}, {"count_include_pad", std::int64_t{1}}};
  const std::map<std::string, Attribute> a2 = {{"kernel_shape", V{3, 2}}, {"strides", V{2, 3}},
                                               {"dilations", V{2, 1}}, {"pads", V{2, 1, 1, 1}},
                                               {"ceil_mode", std::int64_t{1}}, {"count_include_pad", std::int64_t{1}}};
  for (const char* op : {"MaxPool", "AveragePool"}) {
    INFO(op);
    Tensor y3 = run1(make_node(op, 1, a3), {&x});
    Tensor y2 = run1(make_node(op, 1, a2), {&x2});
    REQUIRE(y3.shape().size() == 5);
    CHECK(Shape{y3.shape()[0], y3.shape()[1] * y3.shape()[2], y3.shape()[3], y3.shape()[4]} == y2.shape());
    CHECK(values<float>(y3) == values<float>(y2));
  }

  // Four spatial dims: a kernel of 1 over the first is the 3-D pool of each of its slices.
  const Shape x4s{1, 2, 3, 4, 5, 6};
  const auto x4v = ramp(static_cast<std::size_t>(element_count(x4s)), 8.0f);
  Tensor x4 = f32(x4s, x4v), x4as3 = f32({1, 6, 4, 5, 6}, x4v);
  for (const char* op : {"MaxPool", "AveragePool"}) {
    INFO(op);
    Tensor y4 = run1(make_node(op, 1, {{"kernel_shape", V{1, 2, 3, 2}}, {"pads", V{0, 1, 1, 0, 0, 0, 1, 1}}}), {&x4});
    Tensor y3 = run1(make_node(op, 1, {{"kernel_shape", V{2, 3, 2}}, {"pads", V{1, 1, 0, 0, 1, 1}}}), {&x4as3});
    CHECK(y4.shape() == Shape{1, 2, 3, 4, 5, 6});
    CHECK(y3.shape() == Shape{1, 6, 4, 5, 6});
    CHECK(values<float>(y4) == values<float>(y3));
  }
  // An input of the wrong rank for the kernel is refused with both shapes named.
  CHECK_THROWS_MATCHES(run1(make_node("MaxPool", 1, {{"kernel_shape", V{2, 2}}}), {&x}), Error,
                       Catch::Predicate<Error>([](const Error& e) {
                         return e.code() == ErrorCode::IncompatibleModel &&
                                e.message().find("2 dims for 3 spatial dims") != std::string::npos;
                       }));
}

TEST_CASE("cpu ops: attribute and input variants across opsets", "[compiler][cpu_ops]") {
  Tensor x = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  // Squeeze with axes attribute (opset < 13), and with no axes.
  CHECK(run1(make_node("Squeeze", 1, {{"axes", std::vector<std::int64_t>{-2}}}), {&x}).shape() == Shape{2, 3});
  CHECK(run1(make_node("Squeeze", 1), {&x}).shape() == Shape{2, 3});
  CHECK_THROWS_AS(run1(make_node("Squeeze", 1, {{"axes", std::vector<std::int64_t>{0}}}), {&x}), Error);
  // Split with the 'split' attribute (opset < 13) and with 'num_outputs' (opset 18).
  Tensor s = f32({5}, {1, 2, 3, 4, 5});
  auto parts = host::run_cpu_op(make_node("Split", 1, {{"split", std::vector<std::int64_t>{1, 4}}}, 2), {&s});
  REQUIRE(parts.size() == 2);
  CHECK(values<float>(parts[1]) == std::vector<float>{2, 3, 4, 5});
  auto thirds = host::run_cpu_op(make_node("Split", 1, {{"num_outputs", std::int64_t{3}}}, 3), {&s});
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
  CHECK(values<float>(run1(make_node("Clip", 3), {&x, nullptr, &hi})) == std::vector<float>{1, 2, 3, 3, 3, 3});
  // Slice with attributes (opset < 10) and with a negative step as inputs.
  CHECK(values<float>(run1(make_node("Slice", 1,
                                     {{"starts", std::vector<std::int64_t>{1}},
                                      {"ends", std::vector<std::int64_t>{3}},
                                      {"axes", std::vector<std::int64_t>{2}}}),
                           {&x})) == std::vector<float>{2, 3, 5, 6});
  Tensor st = i64({1}, {-1}), en = i64({1}, {std::numeric_limits<std::int64_t>::min()}), ax = i64({1}, {2}),
         sp = i64({1}, {-2});
  CHECK(values<float>(run1(make_node("Slice", 5), {&x, &st, &en, &ax, &sp})) == std::vector<float>{3, 1, 6, 4});
  // Data movement on uint8.
  Tensor u = make<std::uint8_t>(DType::UInt8, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(values<std::uint8_t>(run1(make_node("Transpose", 1), {&u})) == std::vector<std::uint8_t>{1, 4, 2, 5, 3, 6});
  CHECK(run1(make_node("Flatten", 1, {{"axis", std::int64_t{0}}}), {&u}).shape() == Shape{1, 6});
  // Gemm with C broadcast from [N] and transB.
  Tensor ga = f32({2, 2}, {1, 2, 3, 4}), gb = f32({3, 2}, {1, 0, 0, 1, 1, 1}), gc = f32({3}, {10, 20, 30});
  CHECK(values<float>(run1(make_node("Gemm", 3, {{"transB", std::int64_t{1}}, {"beta", 2.0f}}), {&ga, &gb, &gc})) ==
        std::vector<float>{21, 42, 63, 23, 44, 67});
}

TEST_CASE("cpu ops: QuantizeLinear follows the one rule of the runtime's Quantize step", "[compiler][cpu_ops]") {
  // The library's QuantizeLinear (constant folding, host fallback) and host::quantize (the
  // runtime's Quantize step) must agree on every value, NaN and infinities included.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 63.75f, 1000.0f, -1000.0f, nan, inf, -inf, -0.0f};
  Tensor x = f32({static_cast<std::int64_t>(xs.size())}, xs);
  Tensor scale = f32({}, {0.5f});
  Tensor zp_u = make<std::uint8_t>(DType::UInt8, {}, {7});
  Tensor zp_s = make<std::int8_t>(DType::Int8, {}, {-3});
  const auto library_u = values<std::uint8_t>(run1(make_node("QuantizeLinear", 3), {&x, &scale, &zp_u}));
  const auto library_s = values<std::int8_t>(run1(make_node("QuantizeLinear", 3), {&x, &scale, &zp_s}));
  std::vector<std::uint8_t> runtime_u(xs.size());
  std::vector<std::int8_t> runtime_s(xs.size());
  host::quantize(xs.data(), runtime_u.data(), static_cast<std::int64_t>(xs.size()), 0.5f, 7);
  host::quantize(xs.data(), runtime_s.data(), static_cast<std::int64_t>(xs.size()), 0.5f, -3);
  CHECK(library_u == runtime_u);
  CHECK(library_s == runtime_s);
  CHECK(library_u[8] == 7);    // NaN -> the zero point
  CHECK(library_s[8] == -3);
  CHECK(library_u[9] == 255);  // +inf -> qmax
  CHECK(library_s[10] == -128);  // -inf -> qmin
}

TEST_CASE("cpu ops: Resize nearest on uint8 and int8, linear choices", "[compiler][cpu_ops]") {
  // 2x nearest upsampling of a uint8 image (YOLO's Resize), asymmetric + floor (PyTorch export).
  Tensor x = make<std::uint8_t>(DType::UInt8, {1, 1, 2, 2}, {1, 2, 3, 255});
  Tensor scales = f32({4}, {1, 1, 2, 2});
  Node up = make_node("Resize", 3,
                      {{"mode", std::string("nearest")},
                       {"coordinate_transformation_mode", std::string("asymmetric")},
                       {"nearest_mode", std::string("floor")}});
  up.inputs[1] = -1;  // no roi
  Tensor y = run1(up, {&x, nullptr, &scales});
  REQUIRE(y.dtype() == DType::UInt8);
  REQUIRE(y.shape() == Shape{1, 1, 4, 4});
  CHECK(values<std::uint8_t>(y) ==
        std::vector<std::uint8_t>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 255, 255, 3, 3, 255, 255});
  // int8, sizes input, half_pixel + round_prefer_ceil: 3 -> 2 picks source 0.25 -> 0, 1.75 -> 2.
  Tensor xi = make<std::int8_t>(DType::Int8, {3}, {-7, 5, 9});
  Tensor sizes = i64({1}, {2});
  Node down = make_node("Resize", 4, {{"nearest_mode", std::string("round_prefer_ceil")}});
  down.inputs[1] = down.inputs[2] = -1;
  Tensor yi = run1(down, {&xi, nullptr, nullptr, &sizes});
  CHECK(values<std::int8_t>(yi) == std::vector<std::int8_t>{-7, 9});
  // Ties: asymmetric 1 -> 2 with scale 2 gives source 0 and 0.5; round_prefer_floor keeps 0,
  // round_prefer_ceil takes 1.
  Tensor t = f32({2}, {10, 20});
  Tensor s2 = f32({1}, {2});
  Node tie = make_node("Resize", 3, {{"coordinate_transformation_mode", std::string("asymmetric")}});
  tie.inputs[1] = -1;
  CHECK(values<float>(run1(tie, {&t, nullptr, &s2})) == std::vector<float>{10, 10, 20, 20});
  tie.attributes["nearest_mode"] = std::string("round_prefer_ceil");
  CHECK(values<float>(run1(tie, {&t, nullptr, &s2})) == std::vector<float>{10, 20, 20, 20});
  // Linear takes float32, uint8 and int8 (not int32); cubic float32 only; both name the mode.
  std::string why;
  CHECK(host::cpu_op_supported(make_node("Resize", 3, {{"mode", std::string("linear")}}),
                               {DType::UInt8, DType::Float32, DType::Float32}, &why));
  CHECK_FALSE(host::cpu_op_supported(make_node("Resize", 3, {{"mode", std::string("linear")}}),
                                     {DType::Int32, DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("linear") && Catch::Contains("int32"));
  CHECK_FALSE(host::cpu_op_supported(make_node("Resize", 3, {{"mode", std::string("cubic")}}),
                                     {DType::UInt8, DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("cubic") && Catch::Contains("uint8"));
  CHECK_FALSE(host::cpu_op_supported(make_node("Resize", 3, {{"mode", std::string("area")}}),
                                     {DType::Float32, DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("area"));
  // The opset-10 form (X, scales): asymmetric coordinates; nearest truncates when upsampling and
  // rounds up when downsampling (ONNX Runtime's rule for it); linear interpolates.
  {
    Tensor row = f32({1, 1, 1, 4}, {1, 2, 3, 4});
    Node r10 = make_node("Resize", 2);
    Tensor up = f32({4}, {1, 1, 1, 1.5f});
    CHECK(values<float>(run1(r10, {&row, &up})) == std::vector<float>{1, 1, 2, 3, 3, 4});
    Tensor down = f32({4}, {1, 1, 1, 0.6f});
    CHECK(values<float>(run1(r10, {&row, &down})) == std::vector<float>{1, 3});
    Node l10 = make_node("Resize", 2, {{"mode", std::string("linear")}});
    Tensor two = f32({4}, {1, 1, 1, 2});
    CHECK(values<float>(run1(l10, {&row, &two})) == std::vector<float>{1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4});
    CHECK_FALSE(host::cpu_op_supported(make_node("Resize", 2, {{"mode", std::string("cubic")}}),
                                       {DType::Float32, DType::Float32}, &why));
    CHECK_THAT(why, Catch::Contains("opset-10"));
  }
  // 3-D linear (trilinear) with the 'axes' attribute (opset 18): only the last two dims resized.
  Tensor v = f32({2, 1, 2}, {0, 2, 4, 6});
  Tensor s3 = f32({2}, {1, 2});
  Node tri = make_node("Resize", 3, {{"mode", std::string("linear")}, {"axes", std::vector<std::int64_t>{1, 2}},
                                     {"coordinate_transformation_mode", std::string("align_corners")}});
  tri.inputs[1] = -1;
  Tensor yt = run1(tri, {&v, nullptr, &s3});
  REQUIRE(yt.shape() == Shape{2, 1, 4});
  const auto ytv = values<float>(yt);
  const std::vector<float> expect{0, 2.0f / 3, 4.0f / 3, 2, 4, 14.0f / 3, 16.0f / 3, 6};
  for (std::size_t i = 0; i < expect.size(); ++i) CHECK(ytv[i] == Approx(expect[i]));
  // Shape inference needs the scales as a constant.
  host::CpuValueInfo xinfo{DType::Float32, {2, 1, 2}, nullptr}, sinfo{DType::Float32, {2}, nullptr};
  CHECK_THROWS_AS(host::cpu_op_infer(tri, {&xinfo, nullptr, &sinfo}), Error);
  sinfo.constant = &s3;
  CHECK(host::cpu_op_infer(tri, {&xinfo, nullptr, &sinfo}).at(0).second == Shape{2, 1, 4});
}

TEST_CASE("cpu ops: Resize linear on uint8 and int8 follows ONNX Runtime's arithmetic", "[compiler][cpu_ops]") {
  // Values worked out by hand from ONNX Runtime's kernels (host/src/ops/resize_ort.cpp,
  // run_ort_linear_q8) and seen from ONNX Runtime 1.30 itself; tests/reference/test_resize_ort.cpp
  // compares whole tensors.
  const auto linear = [](const std::string& coord) {
    Node n = make_node("Resize", 4, {{"mode", std::string("linear")}, {"coordinate_transformation_mode", coord}});
    n.inputs[1] = -1;
    return n;
  };
  // 4-D NCHW with sh != 1: 10-bit weights. [0, 255, 0] to 4 columns with align_corners: source
  // 2/3 has weights (1024 - 682, 682), 682 * 255 / 1024 = 169.8 -> 169; source 4/3 has
  // (683, 341) -> 170.1 -> 170. The rows: 1 -> 2 (sh = 2), both from the one row.
  Node ac = linear("align_corners");
  ac.inputs[2] = -1;
  Tensor xu = make<std::uint8_t>(DType::UInt8, {1, 1, 1, 3}, {0, 255, 0});
  Tensor to_2x4 = i64({4}, {1, 1, 2, 4});
  Tensor yu = run1(ac, {&xu, nullptr, nullptr, &to_2x4});
  REQUIRE(yu.shape() == Shape{1, 1, 2, 4});
  CHECK(values<std::uint8_t>(yu) == std::vector<std::uint8_t>{0, 169, 170, 0, 0, 169, 170, 0});
  // The same row as 2-D X: float32 weights, 0.6666667 * 255 = 170.0 and 0.3333333 * 255 just
  // below 85 (twice), 169.99998 -> 169.
  Tensor x2 = make<std::uint8_t>(DType::UInt8, {1, 3}, {0, 255, 0});
  Tensor to_1x4 = i64({2}, {1, 4});
  CHECK(values<std::uint8_t>(run1(ac, {&x2, nullptr, nullptr, &to_1x4})) ==
        std::vector<std::uint8_t>{0, 170, 169, 0});
  // 4-D NCHW with sh = 1: the float path, as ONNX Runtime runs it on the NHWC tensor.
  Tensor to_1x4_4d = i64({4}, {1, 1, 1, 4});
  CHECK(values<std::uint8_t>(run1(ac, {&xu, nullptr, nullptr, &to_1x4_4d})) ==
        std::vector<std::uint8_t>{0, 170, 169, 0});
  // Truncation toward zero: uint8 (200 + 255) / 2 = 227.5 -> 227 (integer path); int8
  // (-3 + 0) / 2 = -1.5 -> -1 (float path, sh = 1).
  Node as = linear("asymmetric");
  Tensor x2x2 = make<std::uint8_t>(DType::UInt8, {1, 1, 2, 2}, {0, 100, 200, 255});
  Tensor sc = f32({4}, {1, 1, 1.5f, 2});
  Tensor y3 = run1(as, {&x2x2, nullptr, &sc});
  REQUIRE(y3.shape() == Shape{1, 1, 3, 4});
  // Rows from sources 0, 2/3 (weights 342 and 682 of 1024: 682 * 200 / 1024 = 133.2 -> 133) and
  // 4/3, clamped to 1; columns from 0, 1/2, 1, 3/2 (clamped to 1).
  CHECK(values<std::uint8_t>(y3) ==
        std::vector<std::uint8_t>{0, 50, 100, 100, 133, 168, 203, 203, 200, 227, 255, 255});
  Tensor xs8 = make<std::int8_t>(DType::Int8, {1, 1, 2, 2}, {-3, 0, 127, -128});
  Tensor s12 = f32({4}, {1, 1, 1, 2});
  CHECK(values<std::int8_t>(run1(as, {&xs8, nullptr, &s12})) ==
        std::vector<std::int8_t>{-3, -1, 0, 0, 127, 0, -128, -128});
  // Output size from scales: ONNX Runtime's float32 product, 0.7f * 10 = 7 (the spec's floor of
  // the exact product gives 6), on float32 X too: models are made for ORT.
  Tensor x10 = Tensor(DType::UInt8, {1, 1, 1, 10});
  Tensor s07 = f32({4}, {1, 1, 1, 0.7f});
  CHECK(run1(as, {&x10, nullptr, &s07}).shape() == Shape{1, 1, 1, 7});
  Tensor f10 = Tensor(DType::Float32, {1, 1, 1, 10});
  CHECK(run1(as, {&f10, nullptr, &s07}).shape() == Shape{1, 1, 1, 7});
  // Refused: other coordinate modes, cubic, ranks and scale patterns ONNX Runtime has no rule for.
  std::string why;
  CHECK_FALSE(host::cpu_op_supported(linear("tf_crop_and_resize"), {DType::UInt8, DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("tf_crop_and_resize") && Catch::Contains("uint8"));
  Tensor x1 = make<std::uint8_t>(DType::UInt8, {2}, {1, 2});
  Tensor s1 = f32({1}, {2});
  CHECK_THROWS_WITH(run1(as, {&x1, nullptr, &s1}), Catch::Contains("rank 1"));
  Tensor s_nc = f32({4}, {1, 2, 2, 2});
  CHECK_THROWS_WITH(run1(as, {&x2x2, nullptr, &s_nc}), Catch::Contains("rank 4"));
}

TEST_CASE("cpu ops: Resize with tflite_arithmetic follows TFLite's reference resize kernels", "[compiler][cpu_ops]") {
  // [1, C=1, H, W=1] with axes [2, 3]: a column of two values resized to four rows. Expected
  // values worked out by hand from reference_ops::ResizeBilinear<T> / ResizeBilinearInteger /
  // GetNearestNeighbor (tensorflow/lite/kernels/internal/reference).
  auto node = [](const std::string& mode, const std::string& coord) {
    Node n = make_node("Resize", 4, {{"mode", mode}, {"coordinate_transformation_mode", coord},
                                     {"axes", std::vector<std::int64_t>{2, 3}}, {"tflite_arithmetic", std::int64_t{1}}});
    n.inputs[1] = n.inputs[2] = -1;
    return n;
  };
  Tensor xu = make<std::uint8_t>(DType::UInt8, {1, 1, 2, 1}, {10, 21});
  Tensor xs = make<std::int8_t>(DType::Int8, {1, 1, 2, 1}, {10, 21});
  Tensor xf = f32({1, 1, 2, 1}, {10, 21});
  Tensor sizes = i64({2}, {4, 1});
  // asymmetric: sources 0, 0.5, 1, 1.5 (the last clamped to row 1). uint8 adds the generic
  // kernel's rounding_offset 0.5 before static_cast: 15.5 -> 16; the int8 kernel rounds it half
  // away from zero to 16; float32 keeps 15.5.
  const Node asym = node("linear", "asymmetric");
  CHECK(values<std::uint8_t>(run1(asym, {&xu, nullptr, nullptr, &sizes})) == std::vector<std::uint8_t>{10, 16, 21, 21});
  CHECK(values<std::int8_t>(run1(asym, {&xs, nullptr, nullptr, &sizes})) == std::vector<std::int8_t>{10, 16, 21, 21});
  CHECK(values<float>(run1(asym, {&xf, nullptr, nullptr, &sizes})) == std::vector<float>{10, 15.5f, 21, 21});
  // half_pixel_centers: sources -0.25 (row 0 with weights 1.25 and -0.25 on the same row), 0.25,
  // 0.75, 1.25: 10, 12.75 -> 13, 18.25 -> 18, 21 (rounded: truncation of value + 0.5).
  CHECK(values<std::uint8_t>(run1(node("linear", "half_pixel"), {&xu, nullptr, nullptr, &sizes})) ==
        std::vector<std::uint8_t>{10, 13, 18, 21});
  // align_corners: scale 1/3: 10, 13.67 -> 14, 17.33 -> 17, 21.
  CHECK(values<std::uint8_t>(run1(node("linear", "align_corners"), {&xu, nullptr, nullptr, &sizes})) ==
        std::vector<std::uint8_t>{10, 14, 17, 21});
  // Nearest, 3 rows -> 2: asymmetric floor(0, 1.5) = rows 0, 1; align_corners round(0, 2) = 0, 2;
  // half_pixel_centers floor(0.75, 2.25) = 0, 2.
  Tensor x3 = make<std::uint8_t>(DType::UInt8, {1, 1, 3, 1}, {10, 21, 32});
  Tensor s2 = i64({2}, {2, 1});
  CHECK(values<std::uint8_t>(run1(node("nearest", "asymmetric"), {&x3, nullptr, nullptr, &s2})) == std::vector<std::uint8_t>{10, 21});
  CHECK(values<std::uint8_t>(run1(node("nearest", "align_corners"), {&x3, nullptr, nullptr, &s2})) == std::vector<std::uint8_t>{10, 32});
  CHECK(values<std::uint8_t>(run1(node("nearest", "tf_half_pixel_for_nn"), {&x3, nullptr, nullptr, &s2})) ==
        std::vector<std::uint8_t>{10, 32});
  // 2-D: [1, 1, 2, 2] -> [1, 1, 3, 3] align_corners; the centre is the mean of the four corners
  // (0 + 10 + 20 + 31) / 4 = 15.25 -> 15; edge midpoints 5, 25.5 -> 26, 10, 20.5 -> 21.
  Tensor q = make<std::uint8_t>(DType::UInt8, {1, 1, 2, 2}, {0, 10, 20, 31});
  Tensor s33 = i64({2}, {3, 3});
  CHECK(values<std::uint8_t>(run1(node("linear", "align_corners"), {&q, nullptr, nullptr, &s33})) ==
        std::vector<std::uint8_t>{0, 5, 10, 10, 15, 21, 20, 26, 31});
  // The checker names what is wrong: a missing 'axes', a mode TFLite has no flag for.
  std::string why;
  Node no_axes = asym;
  no_axes.attributes.erase("axes");
  CHECK_FALSE(host::cpu_op_supported(no_axes, {DType::UInt8, DType::Float32, DType::Float32, DType::Int64}, &why));
  CHECK_THAT(why, Catch::Contains("axes"));
  CHECK_FALSE(host::cpu_op_supported(node("linear", "pytorch_half_pixel"), {DType::UInt8, DType::Float32, DType::Float32, DType::Int64}, &why));
  CHECK_THAT(why, Catch::Contains("pytorch_half_pixel"));
  CHECK_FALSE(host::cpu_op_supported(asym, {DType::Int32, DType::Float32, DType::Float32, DType::Int64}, &why));
  CHECK_THAT(why, Catch::Contains("int32"));
}

TEST_CASE("cpu ops: TopK, ArgMax and ArgMin ties and NaN", "[compiler][cpu_ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({2, 4}, {3, 1, 3, 2, 5, nan, 5, 0});
  Tensor k = i64({1}, {2});
  auto top = host::run_cpu_op(make_node("TopK", 2, {}, 2), {&x, &k});
  REQUIRE(top.size() == 2);
  // Equal values: lower index first; NaN is the greatest value.
  CHECK(values<std::int64_t>(top[1]) == std::vector<std::int64_t>{0, 2, 1, 0});
  auto small = host::run_cpu_op(make_node("TopK", 2, {{"largest", std::int64_t{0}}}, 2), {&x, &k});
  CHECK(values<std::int64_t>(small[1]) == std::vector<std::int64_t>{1, 3, 3, 0});
  // int64 input, k from the opset-1 attribute, axis 0.
  Tensor xi = i64({3, 1}, {7, 9, 7});
  auto ti = host::run_cpu_op(make_node("TopK", 1, {{"k", std::int64_t{3}}, {"axis", std::int64_t{0}}}, 2), {&xi});
  CHECK(values<std::int64_t>(ti[0]) == std::vector<std::int64_t>{9, 7, 7});
  CHECK(values<std::int64_t>(ti[1]) == std::vector<std::int64_t>{1, 0, 2});
  // ArgMax: first of equal maxima, or the last with select_last_index; NaN wins (numpy).
  Node am = make_node("ArgMax", 1, {{"axis", std::int64_t{1}}, {"keepdims", std::int64_t{0}}});
  CHECK(values<std::int64_t>(run1(am, {&x})) == std::vector<std::int64_t>{0, 1});
  am.attributes["select_last_index"] = std::int64_t{1};
  CHECK(values<std::int64_t>(run1(am, {&x})) == std::vector<std::int64_t>{2, 1});
  Tensor u = make<std::uint8_t>(DType::UInt8, {4}, {4, 0, 9, 0});
  Tensor amin = run1(make_node("ArgMin", 1), {&u});
  CHECK(amin.shape() == Shape{1});
  CHECK(values<std::int64_t>(amin) == std::vector<std::int64_t>{1});
}

TEST_CASE("cpu ops: NonMaxSuppression with ties, thresholds and center boxes", "[compiler][cpu_ops]") {
  // Four boxes of one batch; boxes 0 and 1 overlap (IoU 0.6), 2 is apart, 3 duplicates 2.
  Tensor boxes = f32({1, 4, 4}, {0, 0, 1, 1,  0, 0.25f, 1, 1.25f,  0, 5, 1, 6,  1, 6, 0, 5});
  // Two classes. Class 0: boxes 0..3 scores with a tie between 0 and 2.
  Tensor scores = f32({1, 2, 4}, {0.9f, 0.95f, 0.9f, 0.9f,  0.1f, 0.2f, 0.3f, 0.05f});
  Tensor max_out = i64({1}, {3});
  Tensor iou = f32({1}, {0.5f});
  Tensor thr = f32({1}, {0.15f});
  Tensor sel = run1(make_node("NonMaxSuppression", 5), {&boxes, &scores, &max_out, &iou, &thr});
  REQUIRE(sel.dtype() == DType::Int64);
  // Class 0: 1 (0.95); 0 suppressed by 1; then the tie 2 (lower index first); 3 is 2's
  // duplicate (corners flipped) and suppressed. Class 1: only scores > 0.15: 2, then 1.
  CHECK(values<std::int64_t>(sel) == std::vector<std::int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1});
  // IoU exactly at the threshold is kept (suppression needs IoU > threshold).
  Tensor iou6 = f32({1}, {0.6f});
  Tensor all = run1(make_node("NonMaxSuppression", 4), {&boxes, &scores, &max_out, &iou6});
  CHECK(all.shape()[0] >= 4);
  // max_output_boxes_per_class omitted: no output (the spec's default 0).
  Tensor none = run1(make_node("NonMaxSuppression", 2), {&boxes, &scores});
  CHECK(none.shape() == Shape{0, 3});
  // center_point_box = 1: [x_center, y_center, w, h].
  Tensor cb = f32({1, 2, 4}, {0.5f, 0.5f, 1, 1,  0.5f, 0.6f, 1, 1});
  Tensor cs = f32({1, 1, 2}, {0.5f, 0.6f});
  Tensor one = run1(make_node("NonMaxSuppression", 4, {{"center_point_box", std::int64_t{1}}}), {&cb, &cs, &max_out, &iou});
  CHECK(values<std::int64_t>(one) == std::vector<std::int64_t>{0, 0, 1});
  // The output count depends on the scores: shape inference needs them as constants.
  host::CpuValueInfo bi{DType::Float32, {1, 4, 4}, &boxes}, si{DType::Float32, {1, 2, 4}, nullptr};
  CHECK_THROWS_AS(host::cpu_op_infer(make_node("NonMaxSuppression", 2), {&bi, &si}), Error);
}

TEST_CASE("cpu ops: elementwise functions on edge values", "[compiler][cpu_ops]") {
  Tensor x = f32({4}, {-3, -0.5f, 0, 4});
  CHECK(values<float>(run1(make_node("HardSwish", 1), {&x})) == std::vector<float>{0, -0.5f * (2.5f / 6), 0, 4});
  CHECK(values<float>(run1(make_node("LeakyRelu", 1, {{"alpha", 0.1f}}), {&x}))[0] == Approx(-0.3f));
  CHECK(values<float>(run1(make_node("HardSigmoid", 1), {&x})) == std::vector<float>{0, 0.4f, 0.5f, 1});
  Tensor lo = make<std::int8_t>(DType::Int8, {3}, {-128, -3, 4});
  CHECK(values<std::int8_t>(run1(make_node("Neg", 1), {&lo})) == std::vector<std::int8_t>{-128, 3, -4});
  CHECK(values<std::int8_t>(run1(make_node("Abs", 1), {&lo})) == std::vector<std::int8_t>{-128, 3, 4});
  // Max with NaN propagates it; three inputs broadcast.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = f32({2, 1}, {1, nan}), b = f32({3}, {0, 2, 4}), c = f32({}, {3});
  const auto m = values<float>(run1(make_node("Max", 3), {&a, &b, &c}));
  REQUIRE(m.size() == 6);
  CHECK(m[0] == 3);
  CHECK(m[2] == 4);
  CHECK(std::isnan(m[3]));
  // Pow with an int32 base and a float exponent truncates like ONNX Runtime.
  Tensor base = make<std::int32_t>(DType::Int32, {2}, {2, 3});
  Tensor e = f32({}, {0.5f});
  CHECK(values<std::int32_t>(run1(make_node("Pow", 2), {&base, &e})) == std::vector<std::int32_t>{1, 1});
}

TEST_CASE("cpu ops: Pad modes, Tile, Expand, Range and ConstantOfShape on integer dtypes", "[compiler][cpu_ops]") {
  Tensor x = make<std::uint8_t>(DType::UInt8, {3}, {1, 2, 3});
  Tensor pads = i64({2}, {4, 2});
  auto pad = [&](const std::string& mode) {
    return values<std::uint8_t>(run1(make_node("Pad", 2, {{"mode", mode}}), {&x, &pads}));
  };
  // Reflect beyond the dim's length repeats the mirror (numpy 'reflect').
  CHECK(pad("reflect") == std::vector<std::uint8_t>{1, 2, 3, 2, 1, 2, 3, 2, 1});
  CHECK(pad("edge") == std::vector<std::uint8_t>{1, 1, 1, 1, 1, 2, 3, 3, 3});
  // wrap is periodic (the spec's torus) also for pads longer than the dim.
  CHECK(pad("wrap") == std::vector<std::uint8_t>{3, 1, 2, 3, 1, 2, 3, 1, 2});
  Tensor cv = make<std::uint8_t>(DType::UInt8, {}, {9});
  CHECK(values<std::uint8_t>(run1(make_node("Pad", 3), {&x, &pads, &cv})) ==
        std::vector<std::uint8_t>{9, 9, 9, 9, 1, 2, 3, 9, 9});
  // Negative pads crop; opset-18 axes select the padded dims.
  Tensor m = make<std::int8_t>(DType::Int8, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor crop = i64({2}, {-1, 1});
  Tensor axes = i64({1}, {-1});
  Node pa = make_node("Pad", 4);
  pa.inputs[2] = -1;
  CHECK(values<std::int8_t>(run1(pa, {&m, &crop, nullptr, &axes})) == std::vector<std::int8_t>{2, 3, 0, 5, 6, 0});
  // Tile and Expand on int64; Range on int64 with a negative delta; ConstantOfShape with int8.
  Tensor t = i64({1, 2}, {7, 8});
  Tensor reps = i64({2}, {2, 2});
  CHECK(values<std::int64_t>(run1(make_node("Tile", 2), {&t, &reps})) == std::vector<std::int64_t>{7, 8, 7, 8, 7, 8, 7, 8});
  Tensor shape = i64({3}, {2, 1, 2});
  Tensor e = run1(make_node("Expand", 2), {&t, &shape});
  CHECK(e.shape() == Shape{2, 1, 2});
  Tensor r0 = i64({}, {10}), r1 = i64({}, {3}), rd = i64({}, {-3});
  CHECK(values<std::int64_t>(run1(make_node("Range", 3), {&r0, &r1, &rd})) == std::vector<std::int64_t>{10, 7, 4});
  Tensor fill = make<std::int8_t>(DType::Int8, {1}, {-5});
  Tensor dims = i64({2}, {2, 2});
  Tensor c = run1(make_node("ConstantOfShape", 1, {{"value", fill}}), {&dims});
  CHECK(c.dtype() == DType::Int8);
  CHECK(values<std::int8_t>(c) == std::vector<std::int8_t>{-5, -5, -5, -5});
  // Dropout's mask output would be bool: refused with the reason.
  std::string why;
  CHECK_FALSE(host::cpu_op_supported(make_node("Dropout", 1, {}, 2), {DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("mask"));
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
