// The trace of real runs: every stage has its span, the span tree is consistent, and the Chrome
// trace is valid Trace Event Format JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/profiler/report.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

// Checks the tree: each parent exists in the same trace and contains its children in time.
void check_tree(const std::vector<profiler::SpanRecord>& spans) {
  std::map<std::uint64_t, const profiler::SpanRecord*> by_id;
  for (const auto& s : spans) {
    CHECK(by_id.emplace(s.span_id, &s).second);  // ids are unique
    CHECK(s.end_ns >= s.start_ns);
  }
  for (const auto& s : spans) {
    if (s.parent_span_id == 0) continue;
    auto it = by_id.find(s.parent_span_id);
    INFO("span " << s.name << " parent " << s.parent_span_id);
    REQUIRE(it != by_id.end());
    const auto& p = *it->second;
    CHECK(p.trace_id == s.trace_id);
    CHECK(p.start_ns <= s.start_ns);
    CHECK(s.end_ns <= p.end_ns);
  }
}

std::set<std::string> names(const std::vector<profiler::SpanRecord>& spans) {
  std::set<std::string> out;
  for (const auto& s : spans) out.insert(s.name);
  return out;
}

}  // namespace

TEST_CASE("a traced mnist-12-int8 run has a span for every stage", "[trace][model]") {
  auto prof = std::make_shared<profiler::Profiler>();
  runtime::RunnerOptions opts;
  opts.profiler = prof;
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  auto runner = runtime::create_runner(dir / "mnist-12-int8.onnx", opts);
  Tensor input = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
  for (int i = 0; i < 3; ++i) runner->run({input});
  runner.reset();
  const auto spans = prof->records();
  const auto n = names(spans);
  for (const char* want : {"Compile", "Inference", "Quantize", "Lower", "Enqueue", "Load", "Execution",
                           "LowLevelConv2d", "LowLevelMaxPool", "LowLevelReshape", "LowLevelMatMul",
                           "LowLevelAdd", "Store", "Dequantize"}) {
    INFO("span " << want);
    CHECK(n.count(want) == 1);
  }
  check_tree(spans);
  // Attributes: NPU spans carry the PE and execution; kernels and CPU ops their operator_index.
  std::set<std::int64_t> executions;
  for (const auto& s : spans) {
    if (s.cat == profiler::Category::NPU) {
      CHECK(s.pe_index == 0);
      CHECK(s.card == 0);
      CHECK(s.execution_index >= 0);
      executions.insert(s.execution_index);
    }
    if (s.name.rfind("LowLevel", 0) == 0) {
      CHECK(s.operator_index >= 0);
      CHECK(s.instruction_index >= 0);
    }
    if (s.name == "Quantize" || s.name == "Dequantize") CHECK(s.operator_index >= 0);
    if (s.name == "Inference") CHECK(s.parent_span_id == 0);
    if (s.cat == profiler::Category::Runtime) CHECK(s.thread_id != 0);
  }
  CHECK(executions.size() == 3);
  const auto summary = profiler::summarize_inferences(spans);
  CHECK(summary.count == 3);
  CHECK(summary.min_ns > 0);

  // The Chrome trace parses and holds one X event per span plus metadata and a flow pair.
  const fs::path file = fs::temp_directory_path() / fmt::format("furiosa-trace-{}.json", ::getpid());
  prof->write_chrome_trace(file);
  std::ifstream f(file);
  const auto j = nlohmann::json::parse(f);
  fs::remove(file);
  REQUIRE(j.contains("traceEvents"));
  std::size_t x = 0, flows_s = 0, flows_f = 0;
  for (const auto& e : j["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++x;
      CHECK(e["dur"].get<double>() >= 0);
      CHECK(e["args"].contains("trace_id"));
      CHECK(e["args"].contains("span_id"));
    }
    flows_s += ph == "s";
    flows_f += ph == "f";
  }
  CHECK(x == spans.size());
  CHECK(flows_s == 3);
  CHECK(flows_f == 3);
}

TEST_CASE("a model with a lowered output traces Lower and Unlower", "[trace][conformance]") {
  auto prof = std::make_shared<profiler::Profiler>();
  runtime::RunnerOptions opts;
  opts.profiler = prof;
  const auto dir = test::shared_model("onnx-node-tests/test_qlinearconv");
  compiler::Graph g = compiler::import_onnx(dir / "model.onnx");
  std::vector<std::string> in;
  for (int id : g.inputs) in.push_back(g.values[static_cast<std::size_t>(id)].name);
  for (std::size_t i = 1; i < in.size(); ++i) {
    g.bind_constant(in[i], compiler::load_tensor_pb(dir / fmt::format("test_data_set_0/input_{}.pb", i)));
  }
  auto runner = runtime::create_runner(std::move(g), opts);
  runner->run({compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb")});
  runner.reset();
  const auto spans = prof->records();
  const auto n = names(spans);
  CHECK(n.count("Lower") == 1);
  CHECK(n.count("Unlower") == 1);
  CHECK(n.count("LowLevelConv2d") == 1);
  check_tree(spans);
}

TEST_CASE("inferences inside record(\"label\") are children of the record scope", "[trace]") {
  auto prof = std::make_shared<profiler::Profiler>();
  runtime::RunnerOptions opts;
  opts.profiler = prof;
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  auto runner = runtime::create_runner(dir / "mnist-12-int8.onnx", opts);
  Tensor input = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
  {
    auto scope = prof->record("warm-up");
    runner->run({input});
    runner->run({input});
  }
  prof->pause();
  runner->run({input});  // not recorded
  prof->resume();
  runner->run({input});  // a root inference again
  runner.reset();
  const auto spans = prof->records();
  std::uint64_t scope_id = 0;
  for (const auto& s : spans) {
    if (s.name == "warm-up") scope_id = s.span_id;
  }
  REQUIRE(scope_id != 0);
  int under_scope = 0, roots = 0;
  for (const auto& s : spans) {
    if (s.name != "Inference") continue;
    if (s.parent_span_id == scope_id) ++under_scope;
    if (s.parent_span_id == 0) ++roots;
  }
  CHECK(under_scope == 2);
  CHECK(roots == 1);
  check_tree(spans);
}
