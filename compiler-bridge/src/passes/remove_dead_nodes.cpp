// remove_dead_nodes: nodes whose outputs nobody reads (no node, no graph output) are removed,
// repeatedly, and listed in the partition report as "removed".
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  bool changed = true;
  std::vector<bool> dead(g.nodes.size(), false);
  while (changed) {
    changed = false;
    for (std::size_t i = g.nodes.size(); i-- > 0;) {
      if (dead[i]) continue;
      bool used = false;
      for (int o : g.nodes[i].outputs) {
        if (o < 0) continue;
        if (ctx.is_graph_output(o)) used = true;
        for (int c : g.consumers(o)) used = used || !dead[static_cast<std::size_t>(c)];
      }
      if (!used) {
        dead[i] = true;
        changed = true;
        ctx.note_entry(g.nodes[i], "removed", "-", "its outputs are not used");
      }
    }
  }
  ctx.compact(dead);
}

}  // namespace

const Pass kRemoveDeadNodes{"remove_dead_nodes", run};

}  // namespace furiosa::compiler::detail
