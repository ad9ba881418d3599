// Shape arithmetic evaluated while importing (importer.h): TFLite models compute operands that
// must be constants here (RESIZE_* size, TRANSPOSE_CONV output_shape, TILE multiples,
// STRIDED_SLICE begin/end) from SHAPE of a tensor, whose shapes are all static: SHAPE ->
// STRIDED_SLICE -> MUL / ADD / SUB / DIV -> CONCATENATION / PACK -> CAST. After each operator is
// mapped, the IR nodes it added are evaluated by the host operator library (host/cpu_ops.h, the
// same kernels the compiler's fold_constants pass runs) when every input is a constant or a value
// evaluated so far, and the operator's int32/int64 outputs keep the result (TInfo::value). The
// graph keeps the nodes: the compiler folds them again. What stays dynamic is named by
// dynamic_origin() in the refusal of an operand that must be a constant.
#include <fmt/format.h>

#include "furiosa/host/cpu_ops.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

namespace {

/// Outputs larger than this are not evaluated at import (shape values are a few elements; the
/// bound keeps FILL / RANGE of data-sized outputs out of the importer).
constexpr std::int64_t kMaxFoldedElements = 4096;

bool is_int(fb::TensorType t) { return t == fb::TensorType::INT32 || t == fb::TensorType::INT64; }

}  // namespace

bool Importer::is_constant(int t) const { return info(t).data != nullptr || info(t).value.has_value(); }

void Importer::fold_shape_values(const fb::Operator& op, std::size_t first_node) {
  const auto outs = op_outputs(op);
  for (int t : outs) {
    info(t).producer = op_index_;
    info(t).producer_name = op_name_;
  }
  for (int t : outs) {
    if (!is_int(info(t).type) || element_count(info(t).shape) > kMaxFoldedElements) return;
  }
  auto lookup = [&](int v) -> const Tensor* {
    const Value& value = g_.values[static_cast<std::size_t>(v)];
    if (value.constant) return &*value.constant;
    const auto it = folded_.find(v);
    return it == folded_.end() ? nullptr : &it->second;
  };
  for (std::size_t i = first_node; i < g_.nodes.size(); ++i) {
    const Node& n = g_.nodes[i];
    std::vector<const Tensor*> ins;
    std::vector<DType> dtypes;
    for (int in : n.inputs) {
      const Tensor* t = in < 0 ? nullptr : lookup(in);
      if (in >= 0 && !t) return;  // a run-time input: the outputs stay dynamic
      ins.push_back(t);
      dtypes.push_back(t ? t->dtype() : DType::Float32);
    }
    if (!host::cpu_op_supported(n, dtypes, nullptr)) return;
    std::vector<Tensor> res;
    try {
      // Shapes first: a node whose result would be large (a hostile FILL / Expand size) is left
      // to the compiler, which applies its own limits.
      std::vector<host::CpuValueInfo> infos(ins.size());
      std::vector<const host::CpuValueInfo*> info_ptrs;
      for (std::size_t k = 0; k < ins.size(); ++k) {
        if (ins[k]) infos[k] = {ins[k]->dtype(), ins[k]->shape(), ins[k]};
        info_ptrs.push_back(ins[k] ? &infos[k] : nullptr);
      }
      for (const auto& [d, shape] : host::cpu_op_infer(n, info_ptrs)) {
        if (element_count(shape) > kMaxFoldedElements) return;
      }
      res = host::run_cpu_op(n, ins);
    } catch (const Error&) {
      return;  // left to the compiler, whose fold_constants meets the same node and reports it
    }
    for (std::size_t o = 0; o < n.outputs.size() && o < res.size(); ++o) {
      if (n.outputs[o] >= 0) folded_.insert_or_assign(n.outputs[o], std::move(res[o]));
    }
  }
  for (int t : outs) {
    if (info(t).model < 0) continue;
    const Tensor* r = lookup(info(t).model);
    if (r && r->shape() == info(t).shape && r->dtype() == dtype(t)) info(t).value = *r;
  }
}

std::string Importer::dynamic_origin(int t) const {
  // Walks back from t through the first operand that is not known at import.
  int k = t;
  for (std::size_t guard = 0; guard < t_.size(); ++guard) {
    const TInfo& ti = info(k);
    if (ti.producer < 0) {
      return k == t ? "" : fmt::format("; it depends on '{}', which is known only at run time", ti.name);
    }
    const fb::Operator& op = *sg_->operators()->Get(static_cast<flatbuffers::uoffset_t>(ti.producer));
    int next = -1;
    for (int in : op_inputs(op)) {
      if (in >= 0 && !is_constant(in)) {
        next = in;
        break;
      }
    }
    if (next < 0) {
      return fmt::format("; operator {} ({}) computing '{}' could not be evaluated at import",
                         ti.producer, ti.producer_name, ti.name);
    }
    if (info(next).producer < 0) {
      return fmt::format("; it stays dynamic at operator {} ({}), whose input '{}' is known only at run time",
                         ti.producer, ti.producer_name, info(next).name);
    }
    k = next;
  }
  return "";
}

}  // namespace furiosa::compiler::detail::tflite
