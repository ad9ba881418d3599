// The compiler's graph passes (compile() step 1): the Pass interface, the context every pass
// works on, and one accessor per pass. Each pass lives in its own file of this folder; the one
// order they run in is written in pipeline.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/graph.h"
#include "graph_utils.h"

namespace furiosa::compiler::detail {

/// What a pass works on: the graph it rewrites in place, the options it reads and the partition
/// report it adds entries and notes to, plus the helpers several passes share. Borrowed for one
/// compile; thread-compatible.
class PassContext {
 public:
  PassContext(Graph& graph, const CompilerOptions& options, PartitionReport& report)
      : graph(graph), options(options), report(report) {}

  Graph& graph;
  const CompilerOptions& options;
  PartitionReport& report;

  /// The value with id `id`.
  const Value& value(int id) const { return graph.values[static_cast<std::size_t>(id)]; }
  /// The value with id `id`, mutable.
  Value& value(int id) { return graph.values[static_cast<std::size_t>(id)]; }
  /// True when value `id` is a graph output.
  bool is_graph_output(int id) const;
  /// Appends the partition entry of node `n` (placement "constant", "folded", "removed", ...).
  void note_entry(const Node& n, const char* placement, std::string target, std::string reason);
  /// Appends value `v` to the graph; returns its id.
  int add_value(Value v);

  /// Drops the nodes flagged in `dead` and sorts the rest topologically, keeping the graph's
  /// order where it can. Throws Error(IncompatibleModel) for a cycle or a read of an undefined
  /// value.
  void compact(const std::vector<bool>& dead);
  /// Replaces every read of value `from` (by nodes and as a graph output) with `to`.
  void replace_uses(int from, int to);
  /// The graph input named `name`, or Error(IncompatibleModel) naming the option `knob` and the
  /// inputs there are.
  int graph_input(const std::string& name, const char* knob) const;

  /// Per-tensor quantization of a QuantizeLinear / DequantizeLinear node (a missing zero point
  /// means uint8 0), or nullopt for per-axis or non-constant parameters.
  std::optional<ScalarQuant> qdq_params(const Node& n) const;
  /// True when two per-tensor quantizations are equal (scale, zero point and type).
  static bool same(const ScalarQuant& a, const ScalarQuant& b) {
    return a.scale == b.scale && a.zero_point == b.zero_point && a.dtype == b.dtype;
  }
  /// The value of a constant with one element as float (float32, uint8, int8), or nullopt.
  std::optional<float> scalar_constant(int id) const;
  /// A float32 scalar constant named `name` with value `v` (the existing value of that name if
  /// there is one).
  int float_scalar_value(const std::string& name, float v);
  /// The zero-valued scalar constant of type `dtype` the passes share (for DequantizeLinear /
  /// QuantizeLinear nodes that omit their zero point).
  int zero_point_value(DType dtype);
};

/// A graph rewrite: a name and a function over the context. Immutable and stateless (the
/// context carries everything), so one object serves every compile on any thread; the passes
/// are constants defined at namespace scope by their files, constant-initialized.
class Pass {
 public:
  /// The function that rewrites ctx.graph in place; it throws Error naming the node or option it
  /// cannot handle.
  using Run = void (*)(PassContext& ctx);

  constexpr Pass(std::string_view name, Run run) noexcept : name_(name), run_(run) {}

  /// The pass's name: its span's name in a trace ("fold_constants").
  constexpr std::string_view name() const noexcept { return name_; }
  /// Runs the pass on ctx.graph.
  void run(PassContext& ctx) const { run_(ctx); }

 private:
  std::string_view name_;
  Run run_;
};

/// Float element-wise ops a lookup table may contain (one input varies, the others are scalar
/// constants): read by expand_qlinear_elementwise and fuse_lookup_tables.
bool is_table_op(const Node& n);

// The passes, one per file of this folder named after the pass (what each does: its file's
// comment).
extern const Pass kPinInputShapes;
extern const Pass kBindBatch;
extern const Pass kInferShapes;
extern const Pass kWithoutQuantize;
extern const Pass kPermuteInput;
extern const Pass kNormalizedPixelOutputs;
extern const Pass kFoldConstants;
extern const Pass kFuseQdqOperators;
extern const Pass kExpandQlinearElementwise;
extern const Pass kRemoveDeadNodes;
extern const Pass kFuseLookupTables;
extern const Pass kFoldQdqRegions;

}  // namespace furiosa::compiler::detail
