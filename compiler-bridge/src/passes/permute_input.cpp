// permute_input (CompilerOptions::permute_input), with the semantics of FuriosaAI's performance
// guide: the sequence permutes the model input's axes "like torch.permute", so the caller gives
// U = X.permute(perm), U.shape[j] = X.shape[perm[j]] (an N x H x W x C model with [0, 3, 1, 2]
// takes N x C x H x W; an NCHW model with [0, 2, 3, 1] takes N x H x W x C). The graph gets U
// under the input's name and Transpose(U, inverse(perm)) = X. Where the input is only read by
// per-tensor QuantizeLinear nodes the transpose moves after them (quantization is element-wise, so
// the two commute exactly): an NHWC -> NCHW transpose (Transpose perm {0, 3, 1, 2}, from
// permute_input [0, 2, 3, 1]) then becomes part of the host Lower step.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "furiosa/core/error.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  for (const auto& entry : ctx.options.permute_input) {
    // Plain references, not a structured binding: clang 14 cannot capture those in a lambda.
    const std::string& name = entry.first;
    const std::vector<std::int64_t>& perm = entry.second;
    const int x = ctx.graph_input(name, "permute_input");
    const Shape xs = ctx.value(x).shape;
    std::vector<bool> seen(xs.size(), false);
    bool valid = perm.size() == xs.size();
    for (std::int64_t p : perm) {
      valid = valid && p >= 0 && p < static_cast<std::int64_t>(xs.size()) && !seen[static_cast<std::size_t>(p)];
      if (valid) seen[static_cast<std::size_t>(p)] = true;
    }
    if (!valid) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("permute_input: [{}] is not a permutation of the {} axes of input '{}' {}",
                              fmt::join(perm, ", "), xs.size(), name, shape_to_string(xs)),
                  ErrorSubject::of_tensor(name));
    }
    // The Transpose from U back to X: inverse[perm[j]] = j.
    std::vector<std::int64_t> inverse(perm.size());
    for (std::size_t j = 0; j < perm.size(); ++j)
      inverse[static_cast<std::size_t>(perm[j])] = static_cast<std::int64_t>(j);
    // U is NHWC when it feeds an NCHW input through the NHWC -> NCHW transpose.
    const bool nhwc = inverse == std::vector<std::int64_t>{0, 3, 1, 2};
    // U: the given tensor, under the input's name; U.shape[j] = X.shape[perm[j]].
    Value u = ctx.value(x);
    for (std::size_t j = 0; j < perm.size(); ++j) {
      const auto from = static_cast<std::size_t>(perm[j]);
      u.shape[j] = xs[from];
      if (from < ctx.value(x).dim_params.size() && j < u.dim_params.size())
        u.dim_params[j] = ctx.value(x).dim_params[from];
    }
    // The permuted formats of the guide's two cases; any other permutation has no named format.
    const bool nchw = perm == std::vector<std::int64_t>{0, 3, 1, 2} && ctx.value(x).format == "NHWC";
    u.format = nhwc ? "NHWC" : nchw ? "NCHW" : "";
    ctx.value(x).name = name + "/permuted";
    const int uid = ctx.add_value(std::move(u));
    std::replace(g.inputs.begin(), g.inputs.end(), x, uid);
    auto transpose = [&](int in, int out, const std::string& label) {
      Node t;
      t.name = label;
      t.op_type = "Transpose";
      t.attributes["perm"] = inverse;
      t.inputs = {in};
      t.outputs = {out};
      g.nodes.push_back(std::move(t));
    };
    const auto readers = g.consumers(x);
    const bool after_quantize = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](int r) {
      const Node& q = g.nodes[static_cast<std::size_t>(r)];
      return q.op_type == "QuantizeLinear" && q.domain.empty() && q.inputs[0] == x && ctx.qdq_params(q);
    });
    if (after_quantize) {
      for (int r : readers) {
        // Q(U) -> permuted quantized value -> Transpose -> Q's old output.
        Node& q = g.nodes[static_cast<std::size_t>(r)];
        Value qp = ctx.value(q.outputs[0]);
        qp.name += "/permuted";
        qp.shape = ctx.value(uid).shape;
        qp.dim_params = ctx.value(uid).dim_params;
        qp.format = ctx.value(uid).format;
        const int qpid = ctx.add_value(std::move(qp));
        const int old_out = q.outputs[0];
        const std::string label = fmt::format("permute_input/{}/{}", name, q.name);
        q.inputs[0] = uid;
        q.outputs[0] = qpid;
        transpose(qpid, old_out, label);  // invalidates q
      }
    } else {
      transpose(uid, x, fmt::format("permute_input/{}", name));
    }
    ctx.report.notes.push_back(fmt::format(
        "permute_input: input '{}' is given as {}{} (its axes permuted by [{}]) and transposed "
        "back by [{}]{}",
        name, shape_to_string(ctx.value(uid).shape), nhwc ? " (NHWC)" : "", fmt::join(perm, ", "),
        fmt::join(inverse, ", "), after_quantize ? " after the host Quantize" : ""));
  }
  if (!ctx.options.permute_input.empty()) ctx.compact(std::vector<bool>(g.nodes.size(), false));
}

}  // namespace

const Pass kPermuteInput{"permute_input", run};

}  // namespace furiosa::compiler::detail
