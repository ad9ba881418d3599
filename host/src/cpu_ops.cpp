// The host (CPU fallback) operator library's op table and public entry points (host/cpu_ops.h);
// the operators themselves live in one file per family under ops/.
#include "ops/ops_common.h"

namespace furiosa::host {
namespace detail {
namespace {

/// The ONNX operators of every family, then the "furiosa" domain operators that importers emit
/// (not ONNX operators, so not part of cpu_op_list(), which the ONNX conformance tests enumerate).
const OpRows& op_rows() {
  static const OpRows rows = [] {
    OpRows all;
    for (OpRows (*family)() :
         {softmax_ops, elementwise_ops, matmul_ops, conv_pool_ops, reduce_ops, data_movement_ops,
          quantize_ops, resize_ops, detection_ops, tflite_arith_ops, tflite_transpose_conv_ops,
          tflite_float_ops}) {
      OpRows part = family();
      all.onnx.insert(all.onnx.end(), part.onnx.begin(), part.onnx.end());
      all.furiosa.insert(all.furiosa.end(), part.furiosa.begin(), part.furiosa.end());
    }
    return all;
  }();
  return rows;
}
const std::vector<OpDef>& op_table() { return op_rows().onnx; }
const std::vector<OpDef>& furiosa_op_table() { return op_rows().furiosa; }

const OpDef* find_op(const Node& node) {
  if (node.domain == "furiosa") {
    for (const auto& op : furiosa_op_table()) {
      if (op.name == node.op_type) return &op;
    }
    return nullptr;
  }
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  for (const auto& op : op_table()) {
    if (op.name == node.op_type) return &op;
  }
  return nullptr;
}

// Dtypes of the present inputs, per the rules of cpu_op_supported.
DtypeList dtype_list(const Node& node, const std::vector<DType>& dtypes) {
  DtypeList d(dtypes.size());
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (i >= node.inputs.size() || node.inputs[i] >= 0) d[i] = dtypes[i];
  }
  return d;
}

// "" when supported, else why not. Never throws.
std::string unsupported_reason(const Node& node, const OpDef* op, const DtypeList& d) {
  if (!op) {
    return fmt::format("{} is not implemented by the host operator library", node.qualified_op());
  }
  std::size_t count = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i]) count = i + 1;
  }
  if (count > op->max_inputs) {
    return fmt::format("{} takes at most {} inputs, the node has {}", op->name, op->max_inputs, count);
  }
  try {
    return op->check(node, d);
  } catch (const Error& e) {
    return e.message();
  }
}

// Resolves the op and checks support; throws UnsupportedOperator naming the node otherwise, or
// IncompatibleModel when a required input is missing.
const OpDef& require_op(const Node& node, const DtypeList& d) {
  const OpDef* op = find_op(node);
  if (op) {
    for (std::size_t i = 0; i < op->min_inputs; ++i) {
      if (i >= d.size() || !d[i]) {
        fail(node, ErrorCode::IncompatibleModel,
             fmt::format("required input {} is missing ({} needs at least {} inputs)", i, op->name,
                         op->min_inputs));
      }
    }
  }
  std::string why = unsupported_reason(node, op, d);
  if (!why.empty()) fail(node, ErrorCode::UnsupportedOperator, "the host library cannot run it: " + why);
  return *op;
}

std::size_t output_count(const Node& node, const OpDef& op) {
  std::size_t n = std::max<std::size_t>(1, node.outputs.size());
  if (op.max_outputs != kMany && n > op.max_outputs) {
    fail(node, ErrorCode::IncompatibleModel,
         fmt::format("has {} outputs, {} produces at most {}", n, op.name, op.max_outputs));
  }
  return n;
}

OutInfos infer_checked(const OpDef& op, const Ctx& c) {
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    if (!c.in[i].present) continue;
    for (auto dim : *c.in[i].shape) {
      if (dim < 0) {
        c.bad(fmt::format("input {} has an unknown dim in shape {}", i, shape_to_string(*c.in[i].shape)));
      }
    }
  }
  OutInfos out = op.infer(c);
  if (out.size() > c.n_out) out.resize(c.n_out);
  if (out.size() < c.n_out) {
    c.bad(fmt::format("has {} outputs, {} produces {}", c.n_out, op.name, out.size()));
  }
  return out;
}

}  // namespace
}  // namespace detail

using namespace detail;

bool cpu_op_supported(const Node& node, const std::vector<DType>& input_dtypes, std::string* reason) {
  std::string why = unsupported_reason(node, find_op(node), dtype_list(node, input_dtypes));
  if (reason) *reason = why;
  return why.empty();
}

std::vector<std::pair<DType, Shape>> cpu_op_infer(const Node& node,
                                                  const std::vector<const CpuValueInfo*>& inputs) {
  DtypeList d(inputs.size());
  std::vector<In> in(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    d[i] = inputs[i]->dtype;
    in[i] = In{true, inputs[i]->dtype, &inputs[i]->shape, inputs[i]->constant};
    if (in[i].value && (in[i].value->dtype() != in[i].dtype || in[i].value->shape() != inputs[i]->shape)) {
      fail(node, ErrorCode::Internal,
           fmt::format("input {}: constant is {} {}, the value info says {} {}", i,
                       dtype_name(in[i].value->dtype()), shape_to_string(in[i].value->shape()),
                       dtype_name(in[i].dtype), shape_to_string(inputs[i]->shape)));
    }
  }
  const OpDef& op = require_op(node, d);
  const Ctx c{node, in, output_count(node, op)};
  return infer_checked(op, c);
}

std::vector<Tensor> run_cpu_op(const Node& node, const std::vector<const Tensor*>& inputs,
                               std::vector<Tensor>* reuse) {
  DtypeList d(inputs.size());
  std::vector<In> in(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    d[i] = inputs[i]->dtype();
    in[i] = In{true, inputs[i]->dtype(), &inputs[i]->shape(), inputs[i]};
  }
  const OpDef& op = require_op(node, d);
  const Ctx c{node, in, output_count(node, op), reuse};
  const OutInfos infos = infer_checked(op, c);
  std::vector<Tensor> out = op.run(c, infos);
  out.resize(infos.size());
  return out;
}

std::vector<std::string> cpu_op_list() {
  std::vector<std::string> names;
  for (const auto& op : op_table()) names.emplace_back(op.name);
  return names;
}

std::vector<std::string> furiosa_op_list() {
  std::vector<std::string> names;
  for (const auto& op : furiosa_op_table()) names.emplace_back("furiosa::" + std::string(op.name));
  return names;
}

}  // namespace furiosa::host
