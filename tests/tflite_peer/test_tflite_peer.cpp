// TFLite operators against the TFLite peer (TensorFlow Lite 2.14's reference kernels,
// tflite_peer.h): small models written with tflite_writer.h, uint8 and int8, seeded random inputs,
// outputs compared bit-exactly (worst difference printed and required to be 0), and the
// NPU/host placement of each operator checked in the compiled model's report.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_peer.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fb = furiosa::tflite_fb;
using test::QSpec;
using test::TfliteWriter;

namespace {

runtime::RunnerOptions peer_options() {
  runtime::RunnerOptions o;
  o.worker_num = 1;
  o.device = "npu0pe0";
  return o;
}

fb::TensorType tflite_type(DType d) {
  return d == DType::UInt8 ? fb::TensorType::UINT8 : fb::TensorType::INT8;
}
const char* type_tag(DType d) { return d == DType::UInt8 ? "uint8" : "int8"; }
int type_min(DType d) { return d == DType::UInt8 ? 0 : -128; }
int type_max(DType d) { return d == DType::UInt8 ? 255 : 127; }

/// One model run by the runtime and by the peer on the same inputs.
struct PeerRun {
  std::unique_ptr<runtime::Runner> runner;
  std::vector<Tensor> ours, peer;
  double worst = 0;  ///< largest difference over all outputs
};

PeerRun run_both(const std::string& name, const std::string& bytes,
                 const std::vector<Tensor>& inputs) {
  const auto path = test::write_peer_model(name + ".tflite", bytes);
  PeerRun r;
  r.runner = runtime::create_runner(path, peer_options());
  r.ours = r.runner->run(inputs);
  r.peer = test::run_tflite_peer(path, inputs, r.ours);
  for (std::size_t i = 0; i < r.ours.size(); ++i)
    r.worst = std::max(r.worst, test::worst_difference(r.ours[i], r.peer[i]));
  fmt::print("tflite peer: {}: worst difference {} step(s)\n", name, r.worst);
  return r;
}

/// Every entry of `op` in the report has placement `where` (and there is at least one).
void check_placement(const runtime::Runner& runner, const std::string& op,
                     const std::string& where) {
  const auto p = test::placements(runner, op);
  INFO(op << " placements: " << fmt::format("{}", fmt::join(p, ", ")));
  REQUIRE(!p.empty());
  for (const auto& e : p) CHECK(e == where);
}

}  // namespace

TEST_CASE("TFLite peer: ADD and LOGISTIC are bit-identical to TFLite's reference kernels",
          "[tflite_peer]") {
  for (DType d : {DType::UInt8, DType::Int8}) {
    INFO(type_tag(d));
    const int zp = d == DType::UInt8 ? 128 : 0;
    TfliteWriter w;
    const QSpec qa{{0.05f}, {zp}}, qb{{0.03f}, {zp - 10}}, qs{{0.07f}, {zp + 3}};
    const QSpec ql{{1.0f / 256}, {d == DType::UInt8 ? 0 : -128}};
    const int a = w.tensor("a", tflite_type(d), {1, 4, 5, 3}, &qa);
    const int b = w.tensor("b", tflite_type(d), {1, 4, 5, 3}, &qb);
    const int s = w.tensor("s", tflite_type(d), {1, 4, 5, 3}, &qs);
    const int y = w.tensor("y", tflite_type(d), {1, 4, 5, 3}, &ql);
    w.op(0, {a, b}, {s});
    w.op(14, {s}, {y});
    const auto r = run_both(fmt::format("add_logistic_{}", type_tag(d)), w.finish({a, b}, {s, y}),
                            {test::seeded_ints(d, {1, 4, 5, 3}, type_min(d), type_max(d), 1),
                             test::seeded_ints(d, {1, 4, 5, 3}, type_min(d), type_max(d), 2)});
    CHECK(r.worst == 0);
    check_placement(*r.runner, "furiosa::Requantize", "npu");
  }
}
