// The pass pipeline (compiler-bridge/src/passes.h) in a trace: every pass run is a span under the
// span open around compile(), as the runtime's Compile span is; nothing is recorded without one.
#include <algorithm>
#include <string>
#include <vector>

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/profiler/profiler.h"
#include "passes/pass.h"
#include "passes.h"
#include "test_support.h"

using namespace furiosa;

namespace {

compiler::Graph mnist() { return compiler::import_onnx(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx")); }

// The names of the spans whose parent is `parent`, in start order.
std::vector<std::string> children(const std::vector<profiler::SpanRecord>& spans, const profiler::SpanRecord& parent) {
  std::vector<std::string> names;
  for (const auto& s : spans) {
    if (s.parent_span_id == parent.span_id && s.trace_id == parent.trace_id) names.push_back(s.name);
  }
  return names;
}

}  // namespace

TEST_CASE("a traced compile records one child span per pass run under Compile", "[compiler][passes]") {
  profiler::Profiler prof;
  {
    profiler::ScopedSpan compile_span(&prof, "Compile", {});  // as runtime/src/session.cpp opens it
    // import_model, as the compile cache calls it (compile_cache.cpp)
    (void)compiler::compile(compiler::import_model(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx")), {});
  }
  const auto spans = prof.records();
  const auto compile = std::find_if(spans.begin(), spans.end(), [](const auto& s) { return s.name == "Compile"; });
  REQUIRE(compile != spans.end());
  std::vector<std::string> expected = {"import"};
  for (const compiler::detail::Pass* pass : compiler::detail::pass_pipeline()) expected.emplace_back(pass->name());
  expected.insert(expected.end(), {"check_supported", "lower_graph"});
  CHECK(children(spans, *compile) == expected);
  CHECK(spans.size() == expected.size() + 1);  // nothing else, and nothing nested deeper
  for (const auto& s : spans) {
    CHECK(s.start_ns >= compile->start_ns);
    CHECK(s.end_ns <= compile->end_ns);
    CHECK(s.cat == profiler::Category::Runtime);
    CHECK(s.operator_index == -1);  // not a host operator in the external-operators report
  }
  // Each pass span says how many nodes the graph has after it: mnist-12-int8 starts with 11.
  const auto first = std::find_if(spans.begin(), spans.end(), [](const auto& s) { return s.name == "bind_batch"; });
  REQUIRE(first != spans.end());
  CHECK(first->attributes == std::vector<std::pair<std::string, std::string>>{{"nodes", "11"}});
}

TEST_CASE("the pipeline runs the twelve passes, from pinning input shapes to shape inference",
          "[compiler][passes]") {
  const auto pipeline = compiler::detail::pass_pipeline();
  REQUIRE(!pipeline.empty());
  CHECK(pipeline.front()->name() == "pin_input_shapes");
  CHECK(pipeline.back()->name() == "infer_shapes");
  std::vector<std::string> distinct;
  for (const auto* pass : pipeline) {
    if (std::find(distinct.begin(), distinct.end(), pass->name()) == distinct.end()) distinct.emplace_back(pass->name());
  }
  CHECK(distinct.size() == 12);
}

TEST_CASE("compiling with no span open, or a paused profiler, records nothing", "[compiler][passes]") {
  CHECK(profiler::innermost_open_span().profiler == nullptr);
  profiler::Profiler prof;
  (void)compiler::compile(mnist(), {});  // a recording profiler exists, but no span is open
  CHECK(prof.records().empty());
  prof.pause();
  {
    profiler::ScopedSpan compile_span(&prof, "Compile", {});
    CHECK(!compile_span.active());
    CHECK(profiler::innermost_open_span().profiler == nullptr);  // an inactive span is never open
    (void)compiler::compile(mnist(), {});
  }
  prof.resume();
  CHECK(prof.records().empty());
}

TEST_CASE("innermost_open_span follows the spans open on this thread", "[compiler][passes]") {
  profiler::Profiler prof;
  CHECK(profiler::innermost_open_span().profiler == nullptr);
  {
    profiler::ScopedSpan outer(&prof, "outer", {});
    CHECK(profiler::innermost_open_span().profiler == &prof);
    CHECK(profiler::innermost_open_span().context.span_id == outer.context().span_id);
    {
      profiler::ScopedSpan inner(&prof, "inner", outer.context());
      CHECK(profiler::innermost_open_span().context.span_id == inner.context().span_id);
      outer.end();  // ended early, out of order: unlinked from below the inner span
      CHECK(profiler::innermost_open_span().context.span_id == inner.context().span_id);
    }
    CHECK(profiler::innermost_open_span().profiler == nullptr);
  }
  CHECK(prof.records().size() == 2);
}
