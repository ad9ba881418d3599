// int32 DIV against the TFLite peer (TensorFlow Lite 2.14's reference kernels, tflite_peer.h):
// kernels/div.cc's reference_ops::Div / BroadcastDivSlow, C++ integer division truncated toward
// zero and then the fused activation's clamp (CalculateActivationRange<int32_t>), imported as
// ONNX Div (+ Clip) on the host. Outputs are compared byte for byte on inputs with negative
// values on both sides and nonzero divisors (the peer fails the invocation on a zero divisor).
// Also: a SHAPE -> STRIDED_SLICE -> DIV -> PACK chain giving RESIZE_BILINEAR's size, evaluated at
// import; a constant zero divisor refused at import naming the operator and the tensor; a zero
// divisor met at run time failing the run naming the node; INT32_MIN / -1 giving INT32_MIN
// (undefined in C++, a SIGFPE in TFLite on x86-64; the importer's documented choice); and the
// importer's operator table refusing, for every row, an operand type in neither of its lists.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/core/error.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_peer.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fb = furiosa::tflite_fb;
using test::TfliteWriter;

namespace {

using Dims = std::vector<std::int32_t>;
using Act = fb::ActivationFunctionType;

constexpr int kResizeBilinear = 23, kDiv = 42, kStridedSlice = 45, kShape = 77, kPack = 83;

/// y = DIV(a, b) on int32 tensors with fused activation `act`; b a constant holding `b_data`
/// when given (named `b_name`).
std::string div_model(const Dims& as, const Dims& bs, const Dims& ys, Act act,
                      const std::vector<std::int32_t>* b_data = nullptr,
                      const std::string& b_name = "b") {
  TfliteWriter w;
  const int a = w.tensor("a", fb::TensorType::INT32, as);
  const auto b_bytes = b_data ? test::raw_bytes(*b_data) : std::vector<std::uint8_t>{};
  const int b = w.tensor(b_name, fb::TensorType::INT32, bs, nullptr, b_data ? &b_bytes : nullptr);
  const int y = w.tensor("y", fb::TensorType::INT32, ys);
  w.op(kDiv, {a, b}, {y}, fb::BuiltinOptions::DivOptions,
       fb::CreateDivOptions(w.builder(), act).Union());
  return b_data ? w.finish({a}, {y}) : w.finish({a, b}, {y});
}

/// Seeded int32 values in [lo, hi]; `nonzero` maps 0 to 7 and -1 to -3 (no zero divisor, and
/// no INT32_MIN / -1 where `specials` put INT32_MIN into a dividend).
Tensor ints(const Dims& dims, int lo, int hi, unsigned seed, bool nonzero,
            const std::vector<std::int32_t>& specials = {}) {
  Tensor t = test::seeded_ints(DType::Int32, Shape(dims.begin(), dims.end()), lo, hi, seed);
  auto v = t.as<std::int32_t>();
  for (auto& e : v) {
    if (nonzero && e == 0) e = 7;
    if (nonzero && e == -1) e = -3;
  }
  for (std::size_t i = 0; i < specials.size() && i < v.size(); ++i) v[i] = specials[i];
  return t;
}

/// The message of the Error that importing `bytes` (written as `name`) throws; fails when none.
std::string import_error(const std::string& name, const std::string& bytes) {
  const auto path = test::write_peer_model(name, bytes);
  try {
    (void)compiler::import_tflite(path);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    return e.message();
  }
  FAIL(name << " was accepted");
  return {};
}

}  // namespace

TEST_CASE(
    "TFLite peer: int32 DIV truncating toward zero with broadcasting and each fused activation on "
    "the host",
    "[tflite_peer]") {
  struct Case {
    const char* name;
    Dims as, bs;
    Act act;
    std::size_t min_distinct;
  };
  const std::vector<Case> cases = {
      {"same", {1, 6, 7, 5}, {1, 6, 7, 5}, Act::NONE, 20},
      {"broadcast_relu", {1, 6, 7, 5}, {5}, Act::RELU, 10},
      {"rank3_relu6", {2, 3, 8}, {3, 1}, Act::RELU6, 5},
      {"broadcast_relu_n1_to_1", {1, 4, 4, 8}, {1, 1, 1, 8}, Act::RELU_N1_TO_1, 3},
      {"scalar_left", {}, {2, 5, 3}, Act::NONE, 10},
  };
  for (const Case& c : cases) {
    const std::string name = fmt::format("int32_div_{}", c.name);
    INFO(name);
    Dims ys(std::max(c.as.size(), c.bs.size()), 1);
    for (std::size_t k = 0; k < ys.size(); ++k) {
      const std::int32_t da = k < c.as.size() ? c.as[c.as.size() - 1 - k] : 1;
      const std::int32_t db = k < c.bs.size() ? c.bs[c.bs.size() - 1 - k] : 1;
      ys[ys.size() - 1 - k] = std::max(da, db);
    }
    // Dividends of both signs (with the extremes), small divisors of both signs: quotients
    // that truncate, e.g. -7 / 2 = -3 and 7 / -2 = -3.
    const Tensor a =
        c.as.empty() ? ints(c.as, -100, 100, 5, false, {-97})
                     : ints(c.as, -100, 100, 5, false, {INT32_MIN, INT32_MAX, -7, 7, -9, 9, -1, 1});
    const Tensor b = ints(c.bs, -9, 9, 6, true);
    const auto path = test::write_peer_model(name + ".tflite", div_model(c.as, c.bs, ys, c.act));
    auto runner = runtime::create_runner(path, test::peer_runner_options());
    const auto ours = runner->run({a, b});
    const auto peer = test::run_tflite_peer(path, {a, b}, ours);
    REQUIRE(ours.size() == 1);
    REQUIRE(peer.size() == 1);
    REQUIRE(ours[0].shape() == peer[0].shape());
    REQUIRE(ours[0].dtype() == DType::Int32);
    fmt::print("tflite peer: {}: worst difference {}\n", name,
               test::worst_difference(ours[0], peer[0]));
    CHECK(std::memcmp(ours[0].bytes().data(), peer[0].bytes().data(), ours[0].size_bytes()) == 0);
    CHECK(test::distinct(ours[0]) >= c.min_distinct);
    const auto p = test::placements(*runner, "Div");
    INFO("Div placements: " << fmt::format("{}", fmt::join(p, ", ")));
    REQUIRE(!p.empty());
    for (const auto& e : p) CHECK(e == "fallback");
  }
}

TEST_CASE("TFLite: int32 DIV truncates toward zero and gives INT32_MIN for INT32_MIN / -1",
          "[tflite_peer]") {
  const std::vector<std::int32_t> av = {-7, 7, -7, 7, INT32_MIN, INT32_MIN, INT32_MAX, 5};
  const std::vector<std::int32_t> bv = {2, -2, -2, 2, -1, 1, -1, 9};
  const std::vector<std::int32_t> want = {-3, -3, 3, 3, INT32_MIN, INT32_MIN, -INT32_MAX, 0};
  for (const bool constant : {false, true}) {
    INFO((constant ? "constant divisor" : "divisor an input"));
    const auto path =
        test::write_peer_model(constant ? "int32_div_edges_const.tflite" : "int32_div_edges.tflite",
                               div_model({8}, {8}, {8}, Act::NONE, constant ? &bv : nullptr));
    auto runner = runtime::create_runner(path, test::peer_runner_options());
    Tensor a(DType::Int32, {8}), b(DType::Int32, {8});
    std::memcpy(a.bytes().data(), av.data(), a.size_bytes());
    std::memcpy(b.bytes().data(), bv.data(), b.size_bytes());
    const auto ours = constant ? runner->run({a}) : runner->run({a, b});
    REQUIRE(ours.size() == 1);
    const auto got = ours[0].as<std::int32_t>();
    CHECK(std::vector<std::int32_t>(got.begin(), got.end()) == want);
  }
}

TEST_CASE("TFLite: int32 DIV by a constant zero is refused at import naming the tensor",
          "[tflite_peer][errors]") {
  const std::vector<std::int32_t> bv = {3, 0, -2, 5};
  const std::string msg =
      import_error("int32_div_zero_const.tflite",
                   div_model({2, 4}, {4}, {2, 4}, Act::NONE, &bv, "zero\ndivisor"));
  CHECK_THAT(msg,
             Catch::Contains("operator 0 (DIV)") &&
                 Catch::Contains("divisor 'zero\\x0adivisor' is a constant with 0 at element 1"));
}

TEST_CASE("TFLite: int32 DIV by zero at run time fails the run naming the node",
          "[tflite_peer][errors]") {
  const auto path =
      test::write_peer_model("int32_div_zero_run.tflite", div_model({4}, {4}, {4}, Act::RELU));
  auto runner = runtime::create_runner(path, test::peer_runner_options());
  Tensor a = ints({4}, -50, 50, 8, false), b = ints({4}, -5, 5, 9, true);
  b.as<std::int32_t>()[2] = 0;
  try {
    (void)runner->run({a, b});
    FAIL("a zero divisor was accepted");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    CHECK_THAT(e.message(), Catch::Contains("node 'DIV#0") && Catch::Contains("division by zero"));
  }
  // The runner stays usable.
  b.as<std::int32_t>()[2] = 4;
  const auto ok = runner->run({a, b});
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].as<std::int32_t>()[2] == std::max(0, a.as<std::int32_t>()[2] / 4));
}

namespace {

/// x [1, 8, 10, 3] float32 resized to size PACK(SHAPE(x)[1] / 2, SHAPE(x)[2] / -2 / -1) =
/// [4, 5], by int32 DIVs of shrunk STRIDED_SLICEs (negative divisors: truncation).
std::string div_resize_model() {
  TfliteWriter w;
  auto constant = [&](const std::string& name, std::int32_t v) {
    const auto bytes = test::raw_bytes(std::vector<std::int32_t>{v});
    return w.tensor(name, fb::TensorType::INT32, {}, nullptr, &bytes);
  };
  auto one = [&](const std::string& name, std::int32_t v) {
    const auto bytes = test::raw_bytes(std::vector<std::int32_t>{v});
    return w.tensor(name, fb::TensorType::INT32, {1}, nullptr, &bytes);
  };
  auto div = [&](int a, int b, const std::string& name) {
    const int y = w.tensor(name, fb::TensorType::INT32, {});
    w.op(kDiv, {a, b}, {y}, fb::BuiltinOptions::DivOptions,
         fb::CreateDivOptions(w.builder(), Act::NONE).Union());
    return y;
  };
  const int x = w.tensor("x", fb::TensorType::FLOAT32, {1, 8, 10, 3});
  const int s = w.tensor("shape", fb::TensorType::INT32, {4});
  w.op(kShape, {x}, {s}, fb::BuiltinOptions::ShapeOptions,
       fb::CreateShapeOptions(w.builder(), fb::TensorType::INT32).Union());
  std::vector<std::int32_t> dims;
  for (std::int32_t axis : {1, 2}) {
    const int d = w.tensor(fmt::format("d{}", axis), fb::TensorType::INT32, {});
    w.op(kStridedSlice,
         {s, one(fmt::format("begin{}", axis), axis), one(fmt::format("end{}", axis), axis + 1),
          one(fmt::format("stride{}", axis), 1)},
         {d}, fb::BuiltinOptions::StridedSliceOptions,
         fb::CreateStridedSliceOptions(w.builder(), 0, 0, 0, 0, 1).Union());
    dims.push_back(axis == 1 ? div(d, constant("two", 2), "h_half")
                             : div(div(d, constant("minus_two", -2), "w_neg_half"),
                                   constant("minus_one", -1), "w_half"));
  }
  const int size = w.tensor("size", fb::TensorType::INT32, {2});
  w.op(kPack, dims, {size}, fb::BuiltinOptions::PackOptions,
       fb::CreatePackOptions(w.builder(), 2, 0).Union());
  const int y = w.tensor("y", fb::TensorType::FLOAT32, {1, 4, 5, 3});
  w.op(kResizeBilinear, {x, size}, {y}, fb::BuiltinOptions::ResizeBilinearOptions,
       fb::CreateResizeBilinearOptions(w.builder(), false, true).Union());
  return w.finish({x}, {y});
}

}  // namespace

TEST_CASE(
    "TFLite peer: a RESIZE_BILINEAR size from SHAPE -> STRIDED_SLICE -> DIV -> PACK is "
    "evaluated at import",
    "[tflite_peer]") {
  const auto path = test::write_peer_model("shape_chain_div_resize.tflite", div_resize_model());
  auto runner = runtime::create_runner(path, test::peer_runner_options());
  Tensor x(DType::Float32, {1, 8, 10, 3});
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (auto& v : x.as<float>()) v = dist(rng);
  const auto ours = runner->run({x});
  const auto peer = test::run_tflite_peer(path, {x}, ours);
  REQUIRE(ours.size() == 1);
  REQUIRE(peer.size() == 1);
  REQUIRE(ours[0].shape() == Shape{1, 4, 5, 3});
  REQUIRE(ours[0].shape() == peer[0].shape());
  fmt::print("tflite peer: shape_chain_div_resize: worst difference {}\n",
             test::worst_difference(ours[0], peer[0]));
  CHECK(std::memcmp(ours[0].bytes().data(), peer[0].bytes().data(), ours[0].size_bytes()) == 0);
  CHECK(test::distinct(ours[0]) > 8);
  std::size_t folded = 0;
  for (const auto& e : runner->compiled().report.entries) {
    if (e.node_name.starts_with("DIV#")) {
      INFO(e.node_name);
      CHECK(e.placement == std::string("constant"));
      ++folded;
    }
  }
  CHECK(folded == 3);
  for (const auto& line : compiler::summarize_placement(runner->compiled()).host_steps) {
    INFO(line);
    for (const char* op : {"SHAPE#", "STRIDED_SLICE#", "DIV#", "PACK#"})
      CHECK_THAT(line, !Catch::Contains(op));
  }
}

namespace {

/// The builtin code named `name` (tflite_builtin_name), or -1.
int builtin_code(const std::string& name) {
  for (int code = 0; code < 146; ++code) {
    if (compiler::tflite_builtin_name(code) == name) return code;
  }
  return -1;
}

/// A TensorType whose IR type is `d`, and its name in the table's lists.
struct TypeChoice {
  fb::TensorType type;
  const char* name;
};
const std::vector<TypeChoice> kTypes = {
    {fb::TensorType::FLOAT32, "float32"}, {fb::TensorType::UINT8, "uint8"},
    {fb::TensorType::INT8, "int8"},       {fb::TensorType::INT32, "int32"},
    {fb::TensorType::INT64, "int64"},     {fb::TensorType::INT16, "int16"}};

/// Whether `name` is one of the comma-separated types at the start of `cell` (before a note).
bool listed(const std::string& cell, const std::string& name) {
  std::size_t pos = 0;
  while (pos < cell.size()) {
    const std::size_t end = cell.find_first_of(", ", pos);
    const std::string word =
        cell.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (word == name) return true;
    if (end == std::string::npos || cell[end] != ',') return false;
    pos = end + 2;
  }
  return false;
}

}  // namespace

TEST_CASE("TFLite: every operator table row refuses an operand type in neither of its lists",
          "[tflite_peer][errors]") {
  std::size_t checked = 0;
  for (const auto& row : compiler::tflite_operator_table()) {
    if (row.operand < 0) continue;  // SHAPE: no type is checked
    const int code = builtin_code(row.name);
    if (code < 0) continue;  // the custom operator
    for (const auto& t : kTypes) {
      if (listed(row.npu, t.name) || listed(row.host, t.name)) continue;
      INFO(row.name << " on " << t.name);
      // Every input of that type, one output: the table's check comes before the mapping's.
      TfliteWriter w;
      const test::QSpec q{{0.5f}, {0}};
      std::vector<std::int32_t> in;
      for (int k = 0; k <= row.operand; ++k) {
        in.push_back(w.tensor(k == row.operand ? "odd\x1btype" : fmt::format("in{}", k), t.type,
                              {1, 2, 2, 1}, &q));
      }
      const int y = w.tensor("y", t.type, {1, 2, 2, 1}, &q);
      w.op(code, in, {y});
      // (No graph inputs: the import reads the inputs' types before any operator otherwise.)
      const std::string msg = import_error(
          fmt::format("table_refuses_{}_{}.tflite", row.name, t.name), w.finish({}, {y}));
      CHECK_THAT(msg, Catch::Contains(fmt::format("operator 0 ({})", row.name)) &&
                          Catch::Contains(fmt::format("input {} 'odd\\x1btype' is {}; {} takes ",
                                                      row.operand, t.name, row.name)));
      ++checked;
    }
  }
  CHECK(checked > 100);
}
