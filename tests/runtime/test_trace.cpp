// The trace of real runs: every stage has its span, the span tree is consistent, and the Chrome
// trace is valid Trace Event Format JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/profiler/report.h"
#include "furiosa/runtime/queue.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
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
    // Every inference is a trace of its own; only its record scope (its parent) is in another.
    if (s.name == "Inference") CHECK(p.trace_id != s.trace_id);
    else CHECK(p.trace_id == s.trace_id);
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
  const test::TempDir scratch("trace");  // removed even when parsing throws
  const fs::path file = scratch / "trace.json";
  prof->write_chrome_trace(file);
  std::ifstream f(file);
  const auto j = nlohmann::json::parse(f);
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

TEST_CASE("a profiler keeps only the span kinds it is told to, and Inference spans always", "[trace][model]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const Tensor input = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
  const auto traced = [&](profiler::SpanKinds kinds) {
    profiler::ProfilerOptions po;
    po.kinds = kinds;
    auto prof = std::make_shared<profiler::Profiler>(po);
    runtime::RunnerOptions opts;
    opts.profiler = prof;
    auto runner = runtime::create_runner(dir / "mnist-12-int8.onnx", opts);
    for (int i = 0; i < 2; ++i) runner->run({input});
    runner.reset();
    return prof->records();
  };
  const auto executions = traced(profiler::SpanKinds::NpuExecutions);
  auto execution_names = names(executions);
  execution_names.erase("SimOverrun");  // the simulator's lateness record, when the host ran late
  CHECK(execution_names == std::set<std::string>{"Inference", "Load", "Execution", "Store"});
  CHECK(profiler::summarize_inferences(executions).count == 2);
  CHECK(profiler::npu_execution_report(executions).size() == 2);
  const auto operators = traced(profiler::SpanKinds::NpuOperators);
  CHECK(names(operators) == std::set<std::string>{"Inference", "LowLevelConv2d", "LowLevelMaxPool", "LowLevelReshape",
                                                  "LowLevelMatMul", "LowLevelAdd"});
  const auto host = traced(profiler::SpanKinds::RuntimeSteps);
  for (const auto& s : host) CHECK(s.cat == profiler::Category::Runtime);
  CHECK(names(host).count("Quantize") == 1);
  const auto host_ops = profiler::external_operator_report(host);
  CHECK(host_ops.size() % 2 == 0);  // the same host operators in each of the two inferences
  CHECK(host_ops.size() >= 4);      // Quantize and Dequantize at least
  const auto all = traced(profiler::SpanKinds::RuntimeSteps | profiler::SpanKinds::NpuExecutions |
                          profiler::SpanKinds::NpuOperators);
  CHECK(names(all) == names(traced(profiler::SpanKinds::All)));
  CHECK(profiler::parse_span_kinds("runtime,npu-operators") ==
        (profiler::SpanKinds::RuntimeSteps | profiler::SpanKinds::NpuOperators));
  CHECK(profiler::parse_span_kinds("all") == profiler::SpanKinds::All);
  CHECK_THROWS_WITH(profiler::parse_span_kinds("runtime,npu"), Catch::Contains("unknown span kind 'npu'"));
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
  // Every inference has its own trace_id, also inside the scope, and every span of an inference
  // (host operators, Enqueue, device spans) carries its inference's trace_id.
  std::set<std::string> inference_traces;
  std::map<std::uint64_t, profiler::TraceId> trace_of_span;
  for (const auto& s : spans) trace_of_span[s.span_id] = s.trace_id;
  for (const auto& s : spans) {
    if (s.name == "Inference") CHECK(inference_traces.insert(s.trace_id.to_hex()).second);
    if (s.name == "warm-up") CHECK(inference_traces.count(s.trace_id.to_hex()) == 0);
  }
  CHECK(inference_traces.size() == 3);
  std::map<std::string, int> spans_per_trace;
  for (const auto& s : spans) ++spans_per_trace[s.trace_id.to_hex()];
  for (const auto& t : inference_traces) CHECK(spans_per_trace[t] > 5);
}

// ---- Chrome trace nesting on real traces -----------------------------------------------------

namespace {

/// One X event of a written Chrome trace, in the units a viewer sees.
struct Slice {
  std::string name;
  int pid = 0;
  std::int64_t tid = 0;
  std::int64_t start_ns = 0, end_ns = 0;  ///< llround(ts * 1000), + llround(dur * 1000)
  double ts_us = 0, end_us = 0;           ///< ts and ts + dur as a viewer adds them (double)
  std::string span_id, parent_span_id;
  std::uint64_t flow_id = 0;
};

std::vector<Slice> slices_of(const nlohmann::json& doc) {
  std::vector<Slice> out;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    Slice s;
    s.name = e.at("name");
    s.pid = e.at("pid");
    s.tid = e.at("tid");
    const double ts = e.at("ts"), dur = e.at("dur");
    s.start_ns = std::llround(ts * 1000.0);
    s.end_ns = s.start_ns + std::llround(dur * 1000.0);
    s.ts_us = ts;
    s.end_us = ts + dur;
    s.span_id = e.at("args").at("span_id");
    s.parent_span_id = e.at("args").at("parent_span_id");
    s.flow_id = e.at("args").value("flow_id", std::uint64_t{0});
    out.push_back(s);
  }
  return out;
}

/// Checks what trace viewers need to draw every slice: on each (pid, tid) track the slices nest
/// (none overlaps a sibling or outlives its enclosing slice), both in exact integer ns read back
/// from the written ts/dur and in the double arithmetic (ts + dur) viewers use; every span ends
/// no later than its parent span (parent_span_id) and starts no earlier; and every flow event
/// lies inside the slice of its track that carries its flow id (the Enqueue for "s", the
/// Execution for "f", which binds to it with "bp":"e"). Returns the slices.
std::vector<Slice> check_chrome_nesting(const nlohmann::json& doc) {
  std::vector<Slice> slices = slices_of(doc);
  std::map<std::pair<int, std::int64_t>, std::vector<const Slice*>> tracks;
  std::map<std::string, const Slice*> by_id;
  for (const Slice& s : slices) {
    tracks[{s.pid, s.tid}].push_back(&s);
    by_id[s.span_id] = &s;
  }
  std::size_t track_violations = 0, parent_violations = 0;
  for (auto& [track, list] : tracks) {
    std::stable_sort(list.begin(), list.end(), [](const Slice* a, const Slice* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
    });
    std::vector<const Slice*> open;  // enclosing slices, innermost last
    for (const Slice* s : list) {
      while (!open.empty() && open.back()->end_ns <= s->start_ns) {
        // A closed sibling must also end at or before this start in the viewer's doubles.
        if (open.back()->end_us > s->ts_us) {
          ++track_violations;
          UNSCOPED_INFO("double overlap on track " << track.first << "/" << track.second << ": "
                                                   << open.back()->name << " ends after " << s->name
                                                   << " starts");
        }
        open.pop_back();
      }
      if (!open.empty() && (s->end_ns > open.back()->end_ns || s->end_us > open.back()->end_us)) {
        ++track_violations;
        UNSCOPED_INFO("on track " << track.first << "/" << track.second << ": " << s->name << " ["
                                  << s->start_ns << ", " << s->end_ns << "] outlives "
                                  << open.back()->name << " [" << open.back()->start_ns << ", "
                                  << open.back()->end_ns << "]");
      }
      open.push_back(s);
    }
  }
  for (const Slice& s : slices) {
    const auto it = by_id.find(s.parent_span_id);
    if (it == by_id.end()) continue;
    const Slice& p = *it->second;
    if (s.start_ns < p.start_ns || s.end_ns > p.end_ns || s.end_us > p.end_us) {
      ++parent_violations;
      UNSCOPED_INFO(s.name << " [" << s.start_ns << ", " << s.end_ns << "] is not inside its parent "
                           << p.name << " [" << p.start_ns << ", " << p.end_ns << "]");
    }
  }
  CHECK(track_violations == 0);
  CHECK(parent_violations == 0);

  std::size_t flows = 0;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph != "s" && ph != "f") continue;
    ++flows;
    const std::uint64_t id = e.at("id");
    const double ts = e.at("ts");
    const std::int64_t ts_ns = std::llround(ts * 1000.0);
    if (ph == "f") CHECK(e.value("bp", "") == "e");
    const auto& list = tracks[{e.at("pid").get<int>(), e.at("tid").get<std::int64_t>()}];
    const bool bound = std::any_of(list.begin(), list.end(), [&](const Slice* s) {
      return s->flow_id == id && s->start_ns <= ts_ns && ts_ns < s->end_ns && s->ts_us <= ts &&
             ts < s->end_us && s->name == (ph == "s" ? "Enqueue" : "Execution");
    });
    INFO("flow " << ph << " id " << id);
    CHECK(bound);
  }
  CHECK(flows > 0);
  return slices;
}

nlohmann::json chrome_trace_of(const profiler::Profiler& prof) {
  const test::TempDir scratch("nesting");  // removed even when parsing throws
  const fs::path file = scratch / "trace.json";
  prof.write_chrome_trace(file);
  std::ifstream f(file);
  return nlohmann::json::parse(f);
}

}  // namespace

TEST_CASE("Chrome trace of a sync mnist-12-int8 run nests on every track after rounding",
          "[trace][model][chrome]") {
  auto prof = std::make_shared<profiler::Profiler>();
  runtime::RunnerOptions opts;
  opts.profiler = prof;
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  auto runner = runtime::create_runner(dir / "mnist-12-int8.onnx", opts);
  Tensor input = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
  for (int i = 0; i < 5; ++i) runner->run({input});
  runner.reset();
  const auto slices = check_chrome_nesting(chrome_trace_of(*prof));
  // The kernels (LowLevelAdd is the last, ending with its Execution) are all there.
  CHECK(std::count_if(slices.begin(), slices.end(), [](const Slice& s) { return s.name == "LowLevelAdd"; }) == 5);
  CHECK(std::count_if(slices.begin(), slices.end(), [](const Slice& s) { return s.name == "Execution"; }) == 5);
}

TEST_CASE("Chrome trace of an async MobileNetV2 run: lateness on its own track, PE tracks nest",
          "[trace][model][chrome]") {
  auto prof = std::make_shared<profiler::Profiler>();
  runtime::QueueOptions opts;
  opts.profiler = prof;
  opts.worker_num = 2;
  const auto model = test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx");
  {
    auto [submitter, receiver] = runtime::create_queue(model, opts);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uni(0.f, 1.f);
    Tensor input(DType::Float32, {1, 3, 224, 224});
    for (float& v : input.as<float>()) v = uni(rng);
    std::thread feeder([&, &submitter = submitter] {
      for (int i = 0; i < 8; ++i) submitter.submit({input}, i);
    });
    for (int i = 0; i < 8; ++i) CHECK(receiver.recv(std::chrono::seconds(120)).value().size() == 1);
    feeder.join();
  }
  const nlohmann::json doc = chrome_trace_of(*prof);
  const auto slices = check_chrome_nesting(doc);
  CHECK(std::count_if(slices.begin(), slices.end(), [](const Slice& s) { return s.name == "Execution"; }) == 8);
  // The kernels of a PE never overlap, so Execution spans and their kernels stay on the PE's
  // track; only a Load or Store may land on an overflow lane (a queued execution's Load runs
  // during the kernels before it: docs/timing.md, "An execution"). The host lateness
  // (SimOverrun) is drawn on "PE <p> host lateness", never on the PE's track.
  std::map<std::int64_t, std::string> npu_tracks;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("pid").get<int>() >= 100) {
      npu_tracks[e.at("tid").get<std::int64_t>()] = e.at("args").at("name");
    }
  }
  for (const Slice& s : slices) {
    if (s.pid < 100) continue;
    const std::string& track = npu_tracks[s.tid];
    INFO(s.name << " on " << track);
    CHECK((s.name == "SimOverrun") == (track.find("host lateness") != std::string::npos));
    if (track.find("host lateness") == std::string::npos &&
        track.find("overlap") != std::string::npos) {
      CHECK((s.name == "Load" || s.name == "Store"));
    }
  }
}

// ---- external-operators report on real models ------------------------------------------------

namespace {

/// Runs `model` `n` times on generated inputs with a profiler and returns the
/// external-operators rows (every host operator execution).
std::vector<profiler::ExternalOperatorRow> external_rows(const fs::path& model, int n,
                                                         std::vector<profiler::SpanRecord>* spans) {
  auto prof = std::make_shared<profiler::Profiler>();
  runtime::RunnerOptions opts;
  opts.profiler = prof;
  auto runner = runtime::create_runner(model, opts);
  std::vector<Tensor> inputs;
  for (const auto& d : runner->model().inputs) inputs.emplace_back(d.dtype, d.shape);  // zeros
  for (int i = 0; i < n; ++i) runner->run(inputs);
  runner.reset();
  *spans = prof->records();
  return profiler::external_operator_report(*spans);
}

/// The rows of each inference (by trace_id) number the host operators 0..N-1 in execution
/// order, the same N operators with the same names for every inference; returns the names.
std::vector<std::string> check_host_operator_rows(const std::vector<profiler::ExternalOperatorRow>& rows,
                                                  const std::vector<profiler::SpanRecord>& spans,
                                                  std::size_t inferences) {
  std::map<std::string, std::vector<const profiler::ExternalOperatorRow*>> by_trace;
  for (const auto& r : rows) by_trace[r.trace_id.to_hex()].push_back(&r);
  REQUIRE(by_trace.size() == inferences);
  // Each Inference span owns exactly one group.
  std::size_t inference_spans = 0;
  for (const auto& s : spans) {
    if (s.name != "Inference") continue;
    ++inference_spans;
    CHECK(by_trace.count(s.trace_id.to_hex()) == 1);
  }
  CHECK(inference_spans == inferences);
  std::vector<std::string> names;
  for (const auto& [trace, list] : by_trace) {
    std::vector<std::string> these;
    for (std::size_t i = 0; i < list.size(); ++i) {
      CHECK(list[i]->operator_index == static_cast<std::int32_t>(i));
      CHECK(list[i]->dur_ns >= 0);
      CHECK(list[i]->thread_id != 0);
      these.push_back(list[i]->name);
    }
    if (names.empty()) names = these;
    CHECK(these == names);
  }
  // Exactly the host spans with an operator_index: nothing else (Inference, Enqueue, NPU kernels).
  const auto host_ops = std::count_if(spans.begin(), spans.end(), [](const profiler::SpanRecord& s) {
    return s.cat == profiler::Category::Runtime && s.operator_index >= 0;
  });
  CHECK(rows.size() == static_cast<std::size_t>(host_ops));
  CHECK_THAT(profiler::format_external_operators(rows),
             Catch::StartsWith("trace_id                          span_id           thread.id  name"));
  return names;
}

}  // namespace

TEST_CASE("external-operators report on the SDK's MNIST TFLite model: every host operator, 0..N-1",
          "[trace][model][report]") {
  std::vector<profiler::SpanRecord> spans;
  const auto rows = external_rows(
      test::shared_model("furiosa-sdk/MNISTnet_uint8_quant/MNISTnet_uint8_quant.tflite"), 3, &spans);
  const auto names = check_host_operator_rows(rows, spans, 3);
  // Host Lower (NHWC input), then (the whole-input average pool runs on the NPU) the fallback
  // Softmax between a Dequantize and a Quantize, in execution order.
  CHECK(names == std::vector<std::string>{"Lower", "Dequantize", "Softmax", "Quantize"});
}

TEST_CASE("external-operators report on MobileNetV2: Quantize 0 and Dequantize last",
          "[trace][model][report]") {
  std::vector<profiler::SpanRecord> spans;
  const auto rows = external_rows(
      test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"), 2, &spans);
  const auto names = check_host_operator_rows(rows, spans, 2);
  REQUIRE(names.size() >= 2);
  CHECK(names.front() == "Quantize");
  CHECK(names.back() == "Dequantize");
  CHECK(profiler::format_external_operators(rows) != "(no external operators)\n");
}

// ---- profiling scopes (the SDK's `with profile(...)`) ----------------------------------------

TEST_CASE("a ProfileScope attaches to runners and queues given no profiler, while it is open",
          "[trace][profile-scope]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const fs::path model = dir / "mnist-12-int8.onnx";
  Tensor input = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
  runtime::RunnerOptions ropts;  // no profiler
  ropts.device = "npu0pe0";
  auto runner = runtime::create_runner(model, ropts);  // created before any scope
  auto count = [](const profiler::Profiler& p, const char* name) {
    const auto spans = p.records();
    return std::count_if(spans.begin(), spans.end(), [&](const auto& s) { return s.name == name; });
  };
  auto outer = std::make_shared<profiler::Profiler>();
  auto inner = std::make_shared<profiler::Profiler>();
  runner->run({input});  // no scope: not recorded anywhere
  {
    profiler::ProfileScope scope(outer);
    CHECK(profiler::active_profiler() == outer);
    runner->run({input});
    {
      auto record = scope.profiler().record("trace");
      runner->run({input});
    }
    {
      profiler::ProfileScope nested(inner);  // the innermost scope wins
      CHECK(profiler::active_profiler() == inner);
      runner->run({input});
      runtime::QueueOptions q;  // a queue created inside the scope records too
      q.device = "npu0pe1";
      auto [submitter, receiver] = runtime::create_queue(model, q);
      submitter.submit({input}, 1);
      CHECK(receiver.recv(std::chrono::seconds(120)).value().size() == 1);
    }
    runner->run({input});
  }
  CHECK(profiler::active_profiler() == profiler::process_profiler());
  runner->run({input});  // closed: not recorded
  CHECK(count(*outer, "Inference") == 3);
  CHECK(count(*outer, "trace") == 1);
  CHECK(count(*outer, "Execution") == 3);
  CHECK(count(*inner, "Inference") == 2);
  CHECK(count(*inner, "Compile") == 1);  // the queue was compiled inside the scope
  check_tree(outer->records());
  check_tree(inner->records());
  CHECK_THROWS_AS(profiler::ProfileScope(nullptr), std::invalid_argument);
}
