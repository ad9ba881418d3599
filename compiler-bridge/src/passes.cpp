// Graph rewrites before placement (passes.h).
#include "passes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <set>

#include "capability.h"
#include "furiosa/core/error.h"
#include "furiosa/host/cpu_ops.h"
#include "furiosa/host/lookup_table.h"
#include "graph_utils.h"

namespace furiosa::compiler::detail {

void note_entry(PartitionReport& report, const Node& n, const char* placement, std::string target,
                std::string reason) {
  report.entries.push_back({n.name, n.qualified_op(), n.index, placement, std::move(target), std::move(reason)});
}

namespace {

bool is_quantized(DType d) { return d == DType::UInt8 || d == DType::Int8; }

class Passes {
 public:
  Passes(Graph& g, const CompilerOptions& opt, PartitionReport& report) : g_(g), opt_(opt), report_(report) {}

  void run() {
    batch_fixed_inputs();
    infer_shapes(g_, opt_);
    apply_without_quantize();
    apply_permute_input();
    apply_normalized_pixel_outputs();
    infer_shapes(g_, opt_);
    fold_constants();
    fuse_qdq_operators();
    expand_qlinear_elementwise();
    // The fused groups' DequantizeLinear nodes would otherwise count as outside readers and
    // keep a QDQ SiLU's inner Q/DQ pair out of its table.
    remove_dead_nodes();
    fuse_lookup_tables();
    fold_qdq_regions();
    remove_dead_nodes();
    infer_shapes(g_, opt_);
  }

 private:
  const Value& value(int id) const { return g_.values[static_cast<std::size_t>(id)]; }
  Value& value(int id) { return g_.values[static_cast<std::size_t>(id)]; }
  bool is_graph_output(int id) const {
    return std::find(g_.outputs.begin(), g_.outputs.end(), id) != g_.outputs.end();
  }
  void note_entry(const Node& n, const char* placement, std::string target, std::string reason) {
    detail::note_entry(report_, n, placement, std::move(target), std::move(reason));
  }

  // Drops nodes flagged in `dead` and sorts the rest topologically (keeping graph order where
  // possible).
  void compact(const std::vector<bool>& dead) {
    std::vector<Node> live;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!dead[i]) live.push_back(std::move(g_.nodes[i]));
    }
    std::set<int> available;
    for (int id : g_.inputs) available.insert(id);
    for (std::size_t i = 0; i < g_.values.size(); ++i) {
      if (g_.values[i].constant) available.insert(static_cast<int>(i));
    }
    std::vector<Node> sorted;
    std::vector<bool> done(live.size(), false);
    while (sorted.size() < live.size()) {
      bool progress = false;
      for (std::size_t i = 0; i < live.size(); ++i) {
        if (done[i]) continue;
        bool ready = std::all_of(live[i].inputs.begin(), live[i].inputs.end(),
                                 [&](int in) { return in < 0 || available.count(in); });
        if (!ready) continue;
        for (int o : live[i].outputs) available.insert(o);
        sorted.push_back(std::move(live[i]));
        done[i] = true;
        progress = true;
        break;  // restart from the front to keep the original order
      }
      if (!progress) throw Error(ErrorCode::IncompatibleModel, "the graph has a cycle or a node reads an undefined value");
    }
    g_.nodes = std::move(sorted);
  }

  void fold_constants() {
    std::vector<bool> dead(g_.nodes.size(), false);
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      // DequantizeLinear stays (QDQ fusion reads the quantized weights behind it); a
      // QuantizeLinear of constant float weights folds: the weights are quantized once here with
      // the ONNX rule (host/quantize.h), then fused like the integer-weight form.
      if (n.domain.empty() && n.op_type == "DequantizeLinear") continue;
      std::vector<Tensor> outs;
      if (n.op_type == "Shape" && n.domain.empty() && n.inputs.size() == 1 && value(n.inputs[0]).has_shape &&
          std::all_of(value(n.inputs[0]).shape.begin(), value(n.inputs[0]).shape.end(), [](auto d) { return d >= 0; }) &&
          n.attributes.empty()) {
        const Shape& s = value(n.inputs[0]).shape;
        Tensor t(DType::Int64, {static_cast<std::int64_t>(s.size())});
        std::copy(s.begin(), s.end(), t.as<std::int64_t>().begin());
        outs.push_back(std::move(t));
      } else {
        if (n.inputs.empty()) continue;
        std::vector<const Tensor*> ins;
        std::vector<DType> dtypes;
        bool all_const = true;
        for (int in : n.inputs) {
          if (in < 0) {
            ins.push_back(nullptr);
            dtypes.push_back(DType::Float32);
            continue;
          }
          all_const = all_const && value(in).constant.has_value();
          ins.push_back(value(in).constant ? &*value(in).constant : nullptr);
          dtypes.push_back(value(in).dtype);
        }
        if (!all_const || !cpu_op_supported(n, dtypes, nullptr)) continue;
        outs = run_cpu_op(n, ins);
      }
      for (std::size_t o = 0; o < n.outputs.size() && o < outs.size(); ++o) {
        if (n.outputs[o] < 0) continue;
        Value& v = value(n.outputs[o]);
        v.dtype = outs[o].dtype();
        v.shape = outs[o].shape();
        v.dim_params.assign(v.shape.size(), "");
        v.has_shape = true;
        v.constant = std::move(outs[o]);
      }
      dead[i] = true;
      note_entry(n, "constant", "-",
                 n.op_type == "QuantizeLinear" ? "constant float weights quantized at compile time (QuantizeLinear rule)"
                                               : "all inputs are known at compile time: evaluated once");
    }
    compact(dead);
    infer_shapes(g_, opt_);
  }

  // ---- the performance guide's knobs (CompilerOptions) -----------------------------------------
  // The graph input named `name`, or Error(IncompatibleModel) naming the knob and the inputs.
  int graph_input(const std::string& name, const char* knob) const {
    for (int id : g_.inputs) {
      if (value(id).name == name) return id;
    }
    std::string names;
    for (int id : g_.inputs) names += (names.empty() ? "" : ", ") + value(id).name;
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("{}: the model has no input named '{}' (inputs: {})", knob, name, names),
                ErrorSubject::of_tensor(name));
  }

  // Replaces every read of value `from` (by nodes and as a graph output) with `to`.
  void replace_uses(int from, int to) {
    for (Node& n : g_.nodes) {
      for (int& in : n.inputs) {
        if (in == from) in = to;
      }
    }
    for (int& o : g_.outputs) {
      if (o == from) o = to;
    }
  }

  int add_value(Value v) {
    g_.values.push_back(std::move(v));
    return static_cast<int>(g_.values.size() - 1);
  }

  // without_quantize: the input becomes the QuantizeLinear's output type and the QuantizeLinear
  // nodes reading it disappear. Each reader must be a per-tensor QuantizeLinear with one set of
  // parameters (what the caller quantizes with).
  void apply_without_quantize() {
    std::vector<bool> dead(g_.nodes.size(), false);
    for (const std::string& name : opt_.without_quantize) {
      const int x = graph_input(name, "without_quantize");
      if (value(x).dtype == DType::UInt8 || value(x).dtype == DType::Int8) {
        report_.notes.push_back(fmt::format("without_quantize: input '{}' already is {}; nothing to remove", name,
                                            dtype_name(value(x).dtype)));
        continue;
      }
      const auto readers = g_.consumers(x);
      std::optional<detail::ScalarQuant> params;
      for (int r : readers) {
        const Node& q = g_.nodes[static_cast<std::size_t>(r)];
        const auto p = q.op_type == "QuantizeLinear" && q.domain.empty() && q.inputs[0] == x &&
                               q.attr_string("rounding", "half_to_even") == "half_to_even"
                           ? qdq_params(q)
                           : std::nullopt;
        if (!p || (params && !same(*p, *params))) {
          throw Error(ErrorCode::IncompatibleModel,
                      fmt::format("without_quantize: input '{}' is read by node '{}' ({}), not only by per-tensor "
                                  "QuantizeLinear nodes with one scale and zero point, so it cannot be given "
                                  "quantized", name, q.name, q.qualified_op()),
                      ErrorSubject::of_tensor(name));
        }
        params = p;
      }
      if (!params) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("without_quantize: input '{}' is not quantized by the model", name),
                    ErrorSubject::of_tensor(name));
      }
      value(x).dtype = params->dtype;
      for (int r : readers) {
        const Node& q = g_.nodes[static_cast<std::size_t>(r)];
        replace_uses(q.outputs[0], x);
        dead[static_cast<std::size_t>(r)] = true;
        note_entry(q, "folded", "-", fmt::format("without_quantize: input '{}' is given quantized", name));
      }
      report_.notes.push_back(fmt::format(
          "without_quantize: input '{}' is given as {} quantized with scale {} and zero point {} (no host Quantize)",
          name, dtype_name(params->dtype), params->scale, params->zero_point));
    }
    compact(dead);
  }

  // permute_input: the caller's tensor U (the input's name, permuted shape) feeds
  // Transpose(U, perm) = the model's input. Where the input is only read by per-tensor
  // QuantizeLinear nodes the transpose moves after them (quantization is element-wise, so the
  // two commute exactly): with perm {0, 3, 1, 2} it then becomes part of the host Lower step.
  void apply_permute_input() {
    for (const auto& entry : opt_.permute_input) {
      // Plain references, not a structured binding: clang 14 cannot capture those in a lambda.
      const std::string& name = entry.first;
      const std::vector<std::int64_t>& perm = entry.second;
      const int x = graph_input(name, "permute_input");
      const Shape xs = value(x).shape;
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
      const bool nhwc = perm == std::vector<std::int64_t>{0, 3, 1, 2};
      // U: the given tensor, under the input's name; U.shape[perm[j]] = X.shape[j].
      Value u = value(x);
      for (std::size_t j = 0; j < perm.size(); ++j) {
        u.shape[static_cast<std::size_t>(perm[j])] = xs[j];
        if (j < value(x).dim_params.size()) u.dim_params[static_cast<std::size_t>(perm[j])] = value(x).dim_params[j];
      }
      u.format = nhwc ? "NHWC" : "";
      value(x).name = name + "/permuted";
      const int uid = add_value(std::move(u));
      std::replace(g_.inputs.begin(), g_.inputs.end(), x, uid);
      auto transpose = [&](int in, int out, const std::string& label) {
        Node t;
        t.name = label;
        t.op_type = "Transpose";
        t.attributes["perm"] = perm;
        t.inputs = {in};
        t.outputs = {out};
        g_.nodes.push_back(std::move(t));
      };
      const auto readers = g_.consumers(x);
      const bool after_quantize = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](int r) {
        const Node& q = g_.nodes[static_cast<std::size_t>(r)];
        return q.op_type == "QuantizeLinear" && q.domain.empty() && q.inputs[0] == x && qdq_params(q);
      });
      if (after_quantize) {
        for (int r : readers) {
          // Q(U) -> permuted quantized value -> Transpose -> Q's old output.
          Node& q = g_.nodes[static_cast<std::size_t>(r)];
          Value qp = value(q.outputs[0]);
          qp.name += "/permuted";
          qp.shape = value(uid).shape;
          qp.dim_params = value(uid).dim_params;
          qp.format = value(uid).format;
          const int qpid = add_value(std::move(qp));
          const int old_out = q.outputs[0];
          const std::string label = fmt::format("permute_input/{}/{}", name, q.name);
          q.inputs[0] = uid;
          q.outputs[0] = qpid;
          transpose(qpid, old_out, label);  // invalidates q
        }
      } else {
        transpose(uid, x, fmt::format("permute_input/{}", name));
      }
      report_.notes.push_back(fmt::format("permute_input: input '{}' is given as {}{} and transposed by [{}]{}", name,
                                          shape_to_string(value(uid).shape), nhwc ? " (NHWC)" : "",
                                          fmt::join(perm, ", "), after_quantize ? " after the host Quantize" : ""));
    }
    if (!opt_.permute_input.empty()) compact(std::vector<bool>(g_.nodes.size(), false));
  }

  // normalized_pixel_outputs: the output's DequantizeLinear gives way to a requantization to
  // uint8 with scale 1/255 and zero point 0 (none when the quantized value already has those
  // parameters), computed on the NPU; the output keeps its name.
  void apply_normalized_pixel_outputs() {
    const float pixel_scale = 1.0f / 255.0f;
    for (const std::string& name : opt_.normalized_pixel_outputs) {
      auto it = std::find_if(g_.outputs.begin(), g_.outputs.end(), [&](int id) { return value(id).name == name; });
      if (it == g_.outputs.end()) {
        std::string names;
        for (int id : g_.outputs) names += (names.empty() ? "" : ", ") + value(id).name;
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("normalized_pixel_outputs: the model has no output named '{}' (outputs: {})", name,
                                names),
                    ErrorSubject::of_tensor(name));
      }
      const int y = *it;
      const int p = g_.producer(y);
      const Node* dq = p >= 0 ? &g_.nodes[static_cast<std::size_t>(p)] : nullptr;
      const auto params = dq && dq->op_type == "DequantizeLinear" && dq->domain.empty() ? qdq_params(*dq) : std::nullopt;
      if (!params || value(dq->inputs[0]).constant) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("normalized_pixel_outputs: output '{}' is not produced by a per-tensor "
                                "DequantizeLinear of a computed tensor", name),
                    ErrorSubject::of_tensor(name));
      }
      const int q = dq->inputs[0];
      value(y).name = name + "/float";
      int pixels = q;
      if (params->scale == pixel_scale && params->zero_point == 0 && params->dtype == DType::UInt8) {
        value(q).name = name;  // already pixels: the quantized tensor is the output
      } else {
        Value v = value(q);
        v.name = name;
        v.dtype = DType::UInt8;
        v.constant.reset();
        pixels = add_value(std::move(v));
        Node rq;
        rq.name = "normalized_pixel_outputs/" + name;
        rq.op_type = "Requantize";
        rq.domain = "furiosa";
        rq.index = dq->index;
        rq.inputs = {q};
        rq.outputs = {pixels};
        rq.attributes["x_scale"] = params->scale;
        rq.attributes["x_zero_point"] = std::int64_t{params->zero_point};
        rq.attributes["y_scale"] = pixel_scale;
        rq.attributes["y_zero_point"] = std::int64_t{0};
        rq.attributes["y_dtype"] = std::int64_t{static_cast<int>(DType::UInt8)};
        g_.nodes.push_back(std::move(rq));
      }
      *it = pixels;
      report_.notes.push_back(fmt::format(
          "normalized_pixel_outputs: output '{}' is returned as uint8 pixels (scale 1/255, zero point 0){}", name,
          pixels == q ? "" : fmt::format(", requantized on the NPU from scale {} zero point {}", params->scale,
                                         params->zero_point)));
    }
  }

  // Per-tensor quantization of a Q/DQ node, or nullopt (per-axis or non-constant parameters).
  std::optional<detail::ScalarQuant> qdq_params(const Node& n) const {
    try {
      auto q = scalar_quant(g_, n, 1, 2);
      if (!(n.inputs.size() > 2 && n.inputs[2] >= 0)) q.dtype = DType::UInt8;
      return q;
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  static bool same(const detail::ScalarQuant& a, const detail::ScalarQuant& b) {
    return a.scale == b.scale && a.zero_point == b.zero_point && a.dtype == b.dtype;
  }

  // Model-level batch for graphs whose inputs have a fixed dim 0 of 1: dim 0 of every input
  // becomes batch_size, and so does a leading 1 of constant Reshape shapes (the batch axis kept
  // through reshapes, as in MNIST's [1, 256] and ShuffleNet's [1, 2, 58, 28, 28]). Symbolic batch
  // dims are bound by infer_shapes instead.
  void batch_fixed_inputs() {
    const std::int64_t n = opt_.batch_size;
    if (n == 1) return;
    bool fixed = false;
    for (int id : g_.inputs) {
      Value& v = value(id);
      if (v.shape.empty() || v.shape[0] < 0) continue;
      if (v.shape[0] != 1) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("batch size {}: graph input '{}' has a fixed dim 0 of {}, only 1 or a symbolic dim "
                                "can be batched", n, v.name, v.shape[0]));
      }
      v.shape[0] = n;
      fixed = true;
    }
    if (!fixed) return;
    for (Node& node : g_.nodes) {
      if (node.op_type != "Reshape" || !node.domain.empty() || !detail::is_constant_input(g_, node, 1)) continue;
      const Tensor& shape = *value(node.inputs[1]).constant;
      if (shape.dtype() != DType::Int64 || shape.elements() < 1 || shape.as<std::int64_t>()[0] != 1) continue;
      Tensor batched = shape;
      batched.as<std::int64_t>()[0] = n;
      Value bv;
      bv.name = value(node.inputs[1]).name + fmt::format("/batch{}", n);
      bv.dtype = DType::Int64;
      bv.shape = shape.shape();
      bv.dim_params.assign(bv.shape.size(), "");
      bv.has_shape = true;
      bv.constant = std::move(batched);
      g_.values.push_back(std::move(bv));
      node.inputs[1] = static_cast<int>(g_.values.size() - 1);
    }
    report_.notes.push_back(fmt::format("batch size {}: dim 0 of the inputs and the leading 1 of constant "
                                            "Reshape shapes were multiplied", n));
  }

  // A constant zero point of `dtype` (for DequantizeLinear nodes that omit theirs).
  // A float32 scalar constant named `name` (reused when it exists with that name).
  int float_scalar_value(const std::string& name, float v) {
    if (int id = g_.find_value(name); id >= 0) return id;
    Value c;
    c.name = name;
    c.dtype = DType::Float32;
    c.has_shape = true;
    c.constant = Tensor(DType::Float32, {});
    c.constant->as<float>()[0] = v;
    return add_value(std::move(c));
  }

  // The value of a constant scalar (one element) as float, or nullopt.
  std::optional<float> scalar_constant(int id) const {
    if (id < 0 || !value(id).constant || value(id).constant->elements() != 1) return std::nullopt;
    const Tensor& t = *value(id).constant;
    switch (t.dtype()) {
      case DType::Float32: return t.as<float>()[0];
      case DType::UInt8: return static_cast<float>(t.as<std::uint8_t>()[0]);
      case DType::Int8: return static_cast<float>(t.as<std::int8_t>()[0]);
      default: return std::nullopt;
    }
  }

  int zero_point_value(DType dtype) {
    Value v;
    v.name = fmt::format("furiosa_zero_point_{}", dtype_name(dtype));
    if (int id = g_.find_value(v.name); id >= 0) return id;
    v.dtype = dtype;
    v.has_shape = true;
    v.constant = Tensor(dtype, {});
    g_.values.push_back(std::move(v));
    return static_cast<int>(g_.values.size() - 1);
  }

  // The live DequantizeLinear node producing value `id`, or -1.
  int dq_producer(int id, const std::vector<bool>& dead) const {
    const int p = id >= 0 ? g_.producer(id) : -1;
    if (p < 0 || dead[static_cast<std::size_t>(p)]) return -1;
    const Node& n = g_.nodes[static_cast<std::size_t>(p)];
    return n.op_type == "DequantizeLinear" && n.domain.empty() ? p : -1;
  }

  // (quantized value, scale, zero point) read by DequantizeLinear node `dq`.
  std::array<int, 3> dq_operands(const Node& dq) {
    const int zp = dq.inputs.size() > 2 && dq.inputs[2] >= 0 ? dq.inputs[2] : zero_point_value(value(dq.inputs[0]).dtype);
    return {dq.inputs[0], dq.inputs[1], zp};
  }

  // True when bias DequantizeLinear `db` has scale x_scale * w_scale[c] (float32) and zero point
  // 0, i.e. its int32 values are exactly what QLinearConv's B means.
  bool bias_scale_matches(const Node& db, const Node& dx, const Node& dw) const {
    if (!detail::is_constant_input(g_, db, 1) || !detail::is_constant_input(g_, dx, 1) || !detail::is_constant_input(g_, dw, 1)) return false;
    const auto bs = float_values(constant_input(g_, db, 1, "scale"));
    const auto xs = float_values(constant_input(g_, dx, 1, "scale"));
    const auto ws = float_values(constant_input(g_, dw, 1, "scale"));
    if (xs.size() != 1) return false;
    if (detail::is_constant_input(g_, db, 2)) {
      for (auto z : int_values(constant_input(g_, db, 2, "zero point"))) {
        if (z != 0) return false;
      }
    }
    for (std::size_t c = 0; c < bs.size(); ++c) {
      const float want = xs[0] * ws[ws.size() == 1 ? 0 : std::min(c, ws.size() - 1)];
      if (std::abs(bs[c] - want) > 1e-6f * std::abs(want)) return false;
    }
    return bs.size() == 1 || bs.size() == ws.size();
  }

  // QDQ encoding: DequantizeLinear inputs -> Conv / MatMul / Add / GlobalAveragePool ->
  // QuantizeLinear becomes the QOperator node with the same parameters (QLinearConv,
  // QLinearMatMul, QLinearAdd, QLinearGlobalAveragePool), as ONNX Runtime's QDQ transformer does.
  // Groups that do not fit stay float and run as host operators.
  void fuse_qdq_operators() {
    std::vector<bool> dead(g_.nodes.size(), false);
    const std::size_t count = g_.nodes.size();
    for (std::size_t i = 0; i < count; ++i) {
      const Node op = g_.nodes[i];
      if (!op.domain.empty() || op.outputs.size() != 1) continue;
      const std::string t = op.op_type;
      if (t != "Conv" && t != "MatMul" && t != "Add" && t != "Mul" && t != "Sub" && t != "GlobalAveragePool") continue;
      const auto cons = g_.consumers(op.outputs[0]);
      if (cons.size() != 1 || is_graph_output(op.outputs[0])) continue;
      const Node& q = g_.nodes[static_cast<std::size_t>(cons[0])];
      if (q.op_type != "QuantizeLinear" || !q.domain.empty() || !qdq_params(q)) continue;
      const bool binary = t == "Add" || t == "Mul" || t == "Sub";
      const std::size_t data_inputs = t == "Conv" || t == "MatMul" || binary ? 2 : 1;
      std::vector<int> dqs;
      for (std::size_t k = 0; k < data_inputs && k < op.inputs.size(); ++k) dqs.push_back(dq_producer(op.inputs[k], dead));
      if (dqs.size() != data_inputs || std::count(dqs.begin(), dqs.end(), -1)) continue;
      const Node& dx = g_.nodes[static_cast<std::size_t>(dqs[0])];
      if (!qdq_params(dx) || value(dx.inputs[0]).constant) continue;  // activation: per-tensor, run time
      const int yzp = q.inputs.size() > 2 && q.inputs[2] >= 0 ? q.inputs[2] : zero_point_value(DType::UInt8);
      Node fused;
      fused.name = op.name;
      fused.index = op.index;
      fused.attributes = op.attributes;
      fused.outputs = {q.outputs[0]};
      auto x = dq_operands(dx);
      if (t == "GlobalAveragePool") {
        fused.op_type = "QLinearGlobalAveragePool";
        fused.domain = "com.microsoft";
        fused.attributes["channels_last"] = std::int64_t{0};
        fused.inputs = {x[0], x[1], x[2], q.inputs[1], yzp};
      } else {
        const Node& dw = g_.nodes[static_cast<std::size_t>(dqs[1])];
        auto w = dq_operands(dw);
        if (binary) {
          // DQ, DQ -> Mul -> Q is what ONNX Runtime runs as QLinearMul (its QDQ fusion), with the
          // contrib formula of expand_qlinear_elementwise(). ONNX Runtime does not fuse Sub: it
          // runs DQ, Sub and Q in float32, which furiosa::QLinearSub (LowLevelSub) computes
          // exactly, in the QLinearAdd operand layout.
          if (!qdq_params(dw)) continue;
          fused.op_type = t == "Add" ? "QLinearAdd" : t == "Mul" ? "QLinearMul" : "QLinearSub";
          fused.domain = t == "Sub" ? "furiosa" : "com.microsoft";
          fused.inputs = {x[0], x[1], x[2], w[0], w[1], w[2], q.inputs[1], yzp};
        } else {
          if (!value(dw.inputs[0]).constant) continue;  // weights must be constants
          fused.op_type = t == "Conv" ? "QLinearConv" : "QLinearMatMul";
          fused.inputs = {x[0], x[1], x[2], w[0], w[1], w[2], q.inputs[1], yzp};
          if (t == "Conv" && op.inputs.size() > 2 && op.inputs[2] >= 0) {
            // The bias must be DequantizeLinear(int32 B, x_scale * w_scale, 0).
            const int db = dq_producer(op.inputs[2], dead);
            if (db < 0 || value(g_.nodes[static_cast<std::size_t>(db)].inputs[0]).dtype != DType::Int32) continue;
            if (!bias_scale_matches(g_.nodes[static_cast<std::size_t>(db)], dx, dw)) continue;
            fused.inputs.push_back(g_.nodes[static_cast<std::size_t>(db)].inputs[0]);
          }
        }
      }
      g_.nodes[i] = std::move(fused);
      dead[static_cast<std::size_t>(cons[0])] = true;
      note_entry(q, "folded", g_.nodes[i].op_type, "QDQ group fused into " + g_.nodes[i].qualified_op());
    }
    compact(dead);
  }

  // com.microsoft QLinearMul with constant per-tensor parameters as float ops computing the
  // formula of its contrib-operator documentation, which ONNX Runtime's kernel (MLAS qlmul.cpp)
  // follows: C = (A - A_zp) * (B - B_zp) * (A_scale * B_scale / C_scale) + C_zp, the integer
  // product exact, the ratio a float32 constant, then rounded half to even and saturated. It
  // differs from dequantize-multiply-quantize in float rounding: one step on some inputs, which
  // a deep network with a SiLU per conv (YOLOv8) amplifies to tens of steps.
  // DequantizeLinear with scale 1 gives the exact A - A_zp; QuantizeLinear with scale 1 rounds
  // and saturates. Returns false (nothing added) when a parameter is not a constant scalar.
  bool expand_contrib_mul(const Node& n, const std::vector<std::array<int, 3>>& data, std::array<int, 2> y) {
    const auto sa = scalar_constant(data[0][1]), sb = scalar_constant(data[1][1]), sc = scalar_constant(y[0]);
    const auto zc = y[1] >= 0 ? scalar_constant(y[1]) : std::optional<float>(0.0f);
    if (!sa || !sb || !sc || !zc || !(*sc > 0)) return false;
    const float ratio = *sa * *sb / *sc;  // float32 arithmetic, as the kernel computes it
    const int one = float_scalar_value("furiosa_one_f32", 1.0f);
    auto float_value = [&](const std::string& suffix) {
      Value f;
      f.name = n.name + "/" + suffix;
      f.dtype = DType::Float32;
      return add_value(std::move(f));
    };
    auto add_node = [&](const std::string& op, const std::string& suffix, std::vector<int> inputs, int output) {
      Node m;
      m.name = n.name + "/" + suffix;
      m.op_type = op;
      m.index = n.index;
      m.inputs = std::move(inputs);
      m.outputs = {output};
      g_.nodes.push_back(std::move(m));
      return output;
    };
    std::vector<int> centred;
    for (const auto& [x, scale, zp] : data) {
      centred.push_back(add_node("DequantizeLinear", fmt::format("DequantizeLinear_{}", centred.size()),
                                 {x, one, zp >= 0 ? zp : zero_point_value(value(x).dtype)},
                                 float_value(fmt::format("centred_{}", centred.size()))));
    }
    const int product = add_node("Mul", "Mul_integers", {centred[0], centred[1]}, float_value("product"));
    const int scaled = add_node("Mul", "Mul_ratio", {product, float_scalar_value(n.name + "/ratio", ratio)},
                                float_value("scaled"));
    const int shifted = add_node("Add", "Add_zero_point", {scaled, float_scalar_value(n.name + "/C_zero_point", *zc)},
                                 float_value("shifted"));
    const DType out = y[1] >= 0 ? value(y[1]).dtype : DType::UInt8;  // C's type is its zero point's
    add_node("QuantizeLinear", "QuantizeLinear", {shifted, one, zero_point_value(out)}, n.outputs[0]);
    return true;
  }

  // The quantized tensor that value `v` is an element-wise function of: followed back through
  // com.microsoft QLinearSigmoid / QLinearLeakyRelu, furiosa::Requantize, and QuantizeLinear of
  // float table ops (is_table_op, one non-constant input) of a DequantizeLinear. `v` itself when
  // it is not such a function.
  int elementwise_root(int v) const {
    for (std::size_t guard = 0; guard <= g_.nodes.size(); ++guard) {
      const int p = v >= 0 ? g_.producer(v) : -1;
      if (p < 0) return v;
      const Node& pn = g_.nodes[static_cast<std::size_t>(p)];
      if ((pn.domain == "com.microsoft" && (pn.op_type == "QLinearSigmoid" || pn.op_type == "QLinearLeakyRelu")) ||
          (pn.domain == "furiosa" && pn.op_type == "Requantize")) {
        v = pn.inputs[0];
        continue;
      }
      if (!pn.domain.empty() || pn.op_type != "QuantizeLinear") return v;
      int u = pn.inputs[0];
      for (std::size_t step = 0; step <= g_.nodes.size(); ++step) {
        const int pu = u >= 0 ? g_.producer(u) : -1;
        if (pu < 0) return v;
        const Node& un = g_.nodes[static_cast<std::size_t>(pu)];
        if (un.domain.empty() && un.op_type == "DequantizeLinear") {
          u = -1;
          v = un.inputs[0];
          break;
        }
        if (!is_table_op(un)) return v;
        int next = -1;
        for (int in : un.inputs) {
          if (in < 0 || value(in).constant) continue;
          if (next >= 0) return v;  // two varying inputs: not a function of one tensor
          next = in;
        }
        if (next < 0) return v;
        u = next;
      }
      if (u >= 0) return v;
    }
    return v;
  }

  // ---- element-wise functions of one quantized tensor as 256-entry tables --------------------
  // com.microsoft QLinearSigmoid / QLinearLeakyRelu (ONNX Runtime's contrib ops, QOperator
  // form) become their QDQ meaning, DequantizeLinear -> float op -> QuantizeLinear, and
  // QLinearMul the float ops of its documented formula (expand_contrib_mul), so the table fusion
  // below (or, for a product of two independent tensors, the host library) runs them with the
  // arithmetic of the contrib-operator documentation.
  void expand_qlinear_elementwise() {
    const std::size_t count = g_.nodes.size();
    std::vector<bool> dead(count, false);
    for (std::size_t i = 0; i < count; ++i) {
      const Node n = g_.nodes[i];
      if (n.domain != "com.microsoft") continue;
      // (data, scale, zero point) input triples, then the output's scale and zero point.
      std::vector<std::array<int, 3>> data;
      std::array<int, 2> y{};
      std::string float_op;
      if (n.op_type == "QLinearSigmoid" || n.op_type == "QLinearLeakyRelu") {
        if (n.inputs.size() < 4) continue;
        data.push_back({n.inputs[0], n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : -1});
        y = {n.inputs[3], n.inputs.size() > 4 ? n.inputs[4] : -1};
        float_op = n.op_type == "QLinearSigmoid" ? "Sigmoid" : "LeakyRelu";
      } else if (n.op_type == "QLinearMul") {
        if (n.inputs.size() < 7) continue;
        // A product of two independent tensors stays one node for LowLevelMul; a tensor times a
        // function of itself (SiLU's x * sigmoid(x)) is expanded for the table fusion.
        if (elementwise_root(n.inputs[0]) != elementwise_root(n.inputs[3]) &&
            detail::binary_claim(g_, n, {0, 3}, {{1, 2}, {4, 5}, {6, 7}})) {
          continue;
        }
        data.push_back({n.inputs[0], n.inputs[1], n.inputs[2]});
        data.push_back({n.inputs[3], n.inputs[4], n.inputs[5]});
        y = {n.inputs[6], n.inputs.size() > 7 ? n.inputs[7] : -1};
        float_op = "Mul";
      } else {
        continue;
      }
      if (float_op == "Mul" && expand_contrib_mul(n, data, y)) {
        dead[i] = true;
        dead.resize(g_.nodes.size(), false);
        continue;
      }
      Node op;
      op.name = n.name;
      op.op_type = float_op;
      op.index = n.index;
      if (float_op == "LeakyRelu") op.attributes["alpha"] = n.attributes.count("alpha") ? n.attributes.at("alpha") : Attribute{0.01f};
      for (const auto& [x, scale, zp] : data) {
        Value f;
        f.name = fmt::format("{}/{}_dequantized", n.name, value(x).name);
        f.dtype = DType::Float32;
        const int fid = add_value(std::move(f));
        Node dq;
        dq.name = fmt::format("{}/DequantizeLinear_{}", n.name, op.inputs.size());
        dq.op_type = "DequantizeLinear";
        dq.index = n.index;
        dq.inputs = {x, scale, zp >= 0 ? zp : zero_point_value(value(x).dtype)};
        dq.outputs = {fid};
        g_.nodes.push_back(std::move(dq));
        op.inputs.push_back(fid);
      }
      Value f;
      f.name = n.name + "/float";
      f.dtype = DType::Float32;
      op.outputs = {add_value(std::move(f))};
      Node q;
      q.name = n.name + "/QuantizeLinear";
      q.op_type = "QuantizeLinear";
      q.index = n.index;
      q.inputs = {op.outputs[0], y[0], y[1] >= 0 ? y[1] : zero_point_value(DType::UInt8)};
      q.outputs = {n.outputs[0]};
      g_.nodes.push_back(std::move(op));
      g_.nodes.push_back(std::move(q));
      dead[i] = true;
      dead.resize(g_.nodes.size(), false);
    }
    compact(dead);
    infer_shapes(g_, opt_);
  }

  // Float element-wise ops a lookup table may contain (one input varies, the others are scalar
  // constants).
  static bool is_table_op(const Node& n) {
    static constexpr std::array<std::string_view, 19> ops = {
        "Sigmoid", "Tanh", "Exp", "Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Clip", "Mul", "Add",
        "Sub", "Div", "Neg", "Abs", "Min", "Max", "Pow", "Sqrt", "Log"};
    return n.domain.empty() && std::find(ops.begin(), ops.end(), n.op_type) != ops.end();
  }

  // A QuantizeLinear whose input is a float function of ONE quantized tensor x, computed by
  // element-wise ops (Sigmoid, Mul, Clip, ...) with scalar constants, DequantizeLinear of x, and
  // QuantizeLinear -> DequantizeLinear pairs in between (as in a QDQ SiLU x * sigmoid(x)),
  // becomes one furiosa::Requantize with a 256-entry table: the region is evaluated once, by the
  // host operator library, on all 256 values of x, so the table equals the float graph's result
  // for every input, rounded exactly as its QuantizeLinear rounds (the usual NPU technique for
  // activations).
  void fuse_lookup_tables() {
    std::vector<bool> dead(g_.nodes.size(), false);
    // Last QuantizeLinear first, so a function with inner Q/DQ pairs (SiLU's quantized sigmoid)
    // becomes one table rather than a table for its first part.
    for (std::size_t qi = g_.nodes.size(); qi-- > 0;) {
      if (dead[qi]) continue;
      const Node& q = g_.nodes[qi];
      if (q.op_type != "QuantizeLinear" || !q.domain.empty() || !qdq_params(q)) continue;
      if (q.attr_string("rounding", "half_to_even") != "half_to_even") continue;
      // Grow the region backwards from the QuantizeLinear.
      std::set<int> region;  // node ids, evaluated in graph order
      int source = -1;       // the quantized tensor x
      bool ok = true, has_function = false;
      std::vector<int> frontier{q.inputs[0]};
      while (ok && !frontier.empty()) {
        const int v = frontier.back();
        frontier.pop_back();
        const int p = g_.producer(v);
        if (p < 0 || dead[static_cast<std::size_t>(p)] || region.count(p)) {
          ok = p >= 0 && region.count(p);
          continue;
        }
        const Node& pn = g_.nodes[static_cast<std::size_t>(p)];
        if (pn.domain.empty() && pn.op_type == "DequantizeLinear") {
          const auto params = qdq_params(pn);
          const int x = pn.inputs[0];
          const Value& xv = value(x);
          if (!params || xv.constant || !is_quantized(xv.dtype)) { ok = false; break; }
          const int xp = g_.producer(x);
          const bool inner_pair = xp >= 0 && g_.nodes[static_cast<std::size_t>(xp)].op_type == "QuantizeLinear" &&
                                  g_.nodes[static_cast<std::size_t>(xp)].domain.empty() && !is_graph_output(x) &&
                                  value(g_.nodes[static_cast<std::size_t>(xp)].inputs[0]).dtype == DType::Float32;
          region.insert(p);
          if (inner_pair && x != source) {
            region.insert(xp);  // Q -> DQ inside the function: evaluated as written
            frontier.push_back(g_.nodes[static_cast<std::size_t>(xp)].inputs[0]);
          } else if (source < 0 || source == x) {
            source = x;
          } else {
            ok = false;
          }
        } else if (is_table_op(pn) && pn.outputs.size() == 1) {
          region.insert(p);
          has_function = true;
          for (int in : pn.inputs) {
            if (in < 0) continue;
            const Value& iv = value(in);
            if (iv.constant) {
              if (iv.constant->elements() != 1) ok = false;  // per-channel constants: no single table
            } else if (iv.dtype != DType::Float32) {
              ok = false;
            } else {
              frontier.push_back(in);
            }
          }
        } else {
          ok = false;
        }
      }
      if (!ok || !has_function || source < 0) continue;
      // Closure: values made inside the region are read only inside it (DequantizeLinear nodes
      // of x may have other readers: they stay for those).
      for (int r : region) {
        const Node& rn = g_.nodes[static_cast<std::size_t>(r)];
        if (rn.op_type == "DequantizeLinear" && rn.inputs[0] == source) continue;
        for (int o : rn.outputs) {
          if (o < 0) continue;
          if (is_graph_output(o)) ok = false;
          for (int c : g_.consumers(o)) ok = ok && (region.count(c) || c == static_cast<int>(qi));
        }
      }
      if (!ok) continue;
      // Evaluate the region on all 256 values of x (the byte pattern = the table's index).
      const DType xd = value(source).dtype;
      Tensor all(xd, {256});
      for (int b = 0; b < 256; ++b) all.bytes()[static_cast<std::size_t>(b)] = static_cast<std::byte>(b);
      std::map<int, Tensor> known;
      known.emplace(source, all);
      std::vector<int> order(region.begin(), region.end());
      order.push_back(static_cast<int>(qi));
      bool evaluated = true;
      for (int r : order) {  // node ids are in topological order
        const Node& rn = g_.nodes[static_cast<std::size_t>(r)];
        std::vector<const Tensor*> ins;
        for (int in : rn.inputs) {
          if (in < 0) ins.push_back(nullptr);
          else if (value(in).constant) ins.push_back(&*value(in).constant);
          else if (auto it = known.find(in); it != known.end()) ins.push_back(&it->second);
          else evaluated = false;
        }
        if (!evaluated) break;
        // Scalar constants of any rank broadcast against [256]; a constant of rank > 1 would make
        // the result rank > 1 with the same 256 elements, which is still the table.
        auto outs = run_cpu_op(rn, ins);
        known.insert_or_assign(rn.outputs[0], std::move(outs.at(0)));
      }
      if (!evaluated) continue;
      const Tensor& y = known.at(q.outputs[0]);
      if (y.elements() != 256) continue;
      // Element b of y is the result for the input byte b (the table's own order).
      const host::LookupTable table = host::build_lookup_table(xd, y.dtype(), [&](std::int32_t x) {
        const auto b = static_cast<std::uint8_t>(x);
        return host::lookup_table_input(y.dtype(), static_cast<std::uint8_t>(y.bytes()[b]));
      });
      const Node& first_dq = [&]() -> const Node& {
        for (int r : region) {
          const Node& rn = g_.nodes[static_cast<std::size_t>(r)];
          if (rn.op_type == "DequantizeLinear" && rn.inputs[0] == source) return rn;
        }
        return g_.nodes[static_cast<std::size_t>(*region.begin())];
      }();
      const auto xq = *qdq_params(first_dq);
      const auto yq = *qdq_params(q);
      std::string ops;
      for (int r : region) {
        const Node& rn = g_.nodes[static_cast<std::size_t>(r)];
        if (rn.op_type != "DequantizeLinear" && rn.op_type != "QuantizeLinear") ops += (ops.empty() ? "" : ", ") + rn.op_type;
      }
      Node rq;
      rq.name = q.name + "/LookupTable";
      rq.op_type = "Requantize";
      rq.domain = "furiosa";
      rq.index = q.index;
      rq.inputs = {source};
      rq.outputs = {q.outputs[0]};
      rq.attributes["x_scale"] = xq.scale;
      rq.attributes["x_zero_point"] = std::int64_t{xq.zero_point};
      rq.attributes["y_scale"] = yq.scale;
      rq.attributes["y_zero_point"] = std::int64_t{yq.zero_point};
      rq.attributes["y_dtype"] = std::int64_t{static_cast<int>(yq.dtype)};
      rq.attributes["table"] = std::vector<std::int64_t>(table.begin(), table.end());
      for (int r : region) {
        const Node& rn = g_.nodes[static_cast<std::size_t>(r)];
        if (rn.op_type == "DequantizeLinear" && rn.inputs[0] == source) continue;  // may have other readers
        dead[static_cast<std::size_t>(r)] = true;
        note_entry(rn, "folded", "LowLevelRequantize", fmt::format("part of the 256-entry table of {}", ops));
      }
      note_entry(q, "folded", "LowLevelRequantize",
                 fmt::format("element-wise {} on {} computed at compile time as a 256-entry table", ops,
                             dtype_name(xd)));
      g_.nodes[qi] = std::move(rq);
    }
    compact(dead);
  }

  // An ONNX Pad of a float tensor that a QDQ region may contain: constant pads (and axes), and a
  // constant_value that is absent or a constant scalar (it is requantized with the region).
  bool is_float_pad(const Node& n) const {
    if (n.op_type != "Pad" || !n.domain.empty() || n.inputs.size() < 2 || n.inputs[1] < 0 ||
        !value(n.inputs[1]).constant || n.attributes.count("pads")) {
      return false;
    }
    if (n.inputs.size() > 3 && n.inputs[3] >= 0 && !value(n.inputs[3]).constant) return false;
    return n.inputs.size() < 3 || n.inputs[2] < 0 || scalar_constant(n.inputs[2]).has_value();
  }

  void fold_qdq_regions() {
    const int original_count = static_cast<int>(g_.nodes.size());
    std::vector<bool> dead(g_.nodes.size(), false);
    for (int qi = 0; qi < original_count; ++qi) {
      const Node& q = g_.nodes[static_cast<std::size_t>(qi)];
      if (dead[static_cast<std::size_t>(qi)] || q.op_type != "QuantizeLinear" || !q.domain.empty()) continue;
      // A QuantizeLinear with TFLite's rounding (graph.h) keeps its own rule on the host.
      if (q.attr_string("rounding", "half_to_even") != "half_to_even") continue;
      auto target = qdq_params(q);
      if (!target) continue;
      // Grow the region backwards from the QuantizeLinear's input.
      std::set<int> region;
      std::vector<std::pair<int, int>> boundary;  // (value read by the region, DQ node)
      std::vector<int> frontier{q.inputs[0]};
      bool ok = true;
      while (ok && !frontier.empty()) {
        const int v = frontier.back();
        frontier.pop_back();
        const int p = g_.producer(v);
        if (p < 0 || dead[static_cast<std::size_t>(p)]) { ok = false; break; }
        const Node& pn = g_.nodes[static_cast<std::size_t>(p)];
        if (pn.op_type == "DequantizeLinear" && pn.domain.empty()) {
          auto dqp = qdq_params(pn);
          if (!dqp || value(pn.inputs[0]).constant || !is_quantized(value(pn.inputs[0]).dtype)) { ok = false; break; }
          if (std::find(boundary.begin(), boundary.end(), std::make_pair(v, p)) == boundary.end()) boundary.emplace_back(v, p);
        } else if ((is_data_movement(pn) || is_float_pad(pn)) && value(v).dtype == DType::Float32) {
          if (region.insert(p).second) {
            for (std::size_t i : data_inputs(pn)) frontier.push_back(pn.inputs[i]);
          }
        } else {
          ok = false;
        }
      }
      if (!ok || region.empty()) continue;
      // Closure: region outputs feed only the region or QuantizeLinear nodes with the target
      // parameters.
      std::set<int> qs;
      for (int r : region) {
        for (int o : g_.nodes[static_cast<std::size_t>(r)].outputs) {
          if (o < 0) continue;
          if (is_graph_output(o)) ok = false;
          for (int c : g_.consumers(o)) {
            if (region.count(c)) continue;
            const Node& cn = g_.nodes[static_cast<std::size_t>(c)];
            auto cp = cn.op_type == "QuantizeLinear" && cn.domain.empty() ? qdq_params(cn) : std::nullopt;
            if (cp && same(*cp, *target) && !is_graph_output(cn.outputs[0])) qs.insert(c);
            else if (cp && same(*cp, *target) && g_.consumers(o).size() == 1) qs.insert(c);
            else ok = false;
          }
        }
      }
      if (!ok) continue;
      // Rewrite the boundary: read the quantized tensor, requantized where parameters differ.
      for (const auto& [v, dqi] : boundary) {
        const Node dq = g_.nodes[static_cast<std::size_t>(dqi)];
        const auto dqp = *qdq_params(dq);
        int replacement = dq.inputs[0];
        if (!same(dqp, *target)) {
          Value rv;
          rv.name = dq.name + "/requantized";
          rv.dtype = target->dtype;
          rv.shape = value(dq.inputs[0]).shape;
          rv.has_shape = value(dq.inputs[0]).has_shape;
          rv.dim_params.assign(rv.shape.size(), "");
          g_.values.push_back(std::move(rv));
          replacement = static_cast<int>(g_.values.size() - 1);
          Node rq;
          rq.name = dq.name + "/Requantize";
          rq.op_type = "Requantize";
          rq.domain = "furiosa";
          rq.index = dq.index;
          rq.inputs = {dq.inputs[0]};
          rq.outputs = {replacement};
          rq.attributes["x_scale"] = dqp.scale;
          rq.attributes["x_zero_point"] = std::int64_t{dqp.zero_point};
          rq.attributes["y_scale"] = target->scale;
          rq.attributes["y_zero_point"] = std::int64_t{target->zero_point};
          rq.attributes["y_dtype"] = std::int64_t{static_cast<int>(target->dtype)};
          g_.nodes.push_back(std::move(rq));
          dead.push_back(false);
        }
        for (int r : region) {
          for (int& in : g_.nodes[static_cast<std::size_t>(r)].inputs) {
            if (in == v) in = replacement;
          }
        }
        if (g_.consumers(v).empty() && !is_graph_output(v)) {
          dead[static_cast<std::size_t>(dqi)] = true;
          note_entry(dq, "folded", same(dqp, *target) ? "-" : "LowLevelRequantize",
                     same(dqp, *target) ? "DequantizeLinear -> data movement -> QuantizeLinear with equal "
                                          "parameters: runs on the quantized tensor"
                                        : fmt::format("DequantizeLinear (scale {}, zero point {}) -> data movement "
                                                      "-> QuantizeLinear (scale {}, zero point {}): requantized "
                                                      "on the NPU", dqp.scale, dqp.zero_point, target->scale,
                                                      target->zero_point));
        }
      }
      // A Pad's constant_value becomes the target quantization of it (0 when absent): inside the
      // region every tensor carries the target parameters, so Q(Pad(x, c)) = Pad(Q(x), Q(c)).
      for (int r : region) {
        Node& rn = g_.nodes[static_cast<std::size_t>(r)];
        if (rn.op_type != "Pad") continue;
        const float c = rn.inputs.size() > 2 && rn.inputs[2] >= 0 ? *scalar_constant(rn.inputs[2]) : 0.0f;
        const auto range = host::quant_range(target->dtype);
        Value qv;
        qv.name = rn.name + "/constant_value_quantized";
        qv.dtype = target->dtype;
        qv.has_shape = true;
        qv.constant = Tensor(target->dtype, {});
        const std::int32_t q = host::quantize_value(c / target->scale, target->zero_point, std::get<0>(range),
                                                    std::get<1>(range));
        qv.constant->bytes()[0] = static_cast<std::byte>(static_cast<std::uint8_t>(q & 0xff));
        if (rn.inputs.size() < 3) rn.inputs.resize(3, -1);
        rn.inputs[2] = add_value(std::move(qv));
      }
      // The QuantizeLinear nodes disappear: their outputs become the region's outputs.
      for (int c : qs) {
        const Node& cn = g_.nodes[static_cast<std::size_t>(c)];
        const int o = cn.inputs[0];
        const int qout = cn.outputs[0];
        if (g_.consumers(o).size() == 1) {
          for (int r : region) {
            for (int& out : g_.nodes[static_cast<std::size_t>(r)].outputs) {
              if (out == o) out = qout;
            }
          }
        } else {
          for (auto& n : g_.nodes) {
            for (int& in : n.inputs) {
              if (in == qout) in = o;
            }
          }
        }
        dead[static_cast<std::size_t>(c)] = true;
        note_entry(cn, "folded", "-", "QuantizeLinear after data movement on quantized tensors");
      }
    }
    compact(dead);
  }

  void remove_dead_nodes() {
    bool changed = true;
    std::vector<bool> dead(g_.nodes.size(), false);
    while (changed) {
      changed = false;
      for (std::size_t i = g_.nodes.size(); i-- > 0;) {
        if (dead[i]) continue;
        bool used = false;
        for (int o : g_.nodes[i].outputs) {
          if (o < 0) continue;
          if (is_graph_output(o)) used = true;
          for (int c : g_.consumers(o)) used = used || !dead[static_cast<std::size_t>(c)];
        }
        if (!used) {
          dead[i] = true;
          changed = true;
          note_entry(g_.nodes[i], "removed", "-", "its outputs are not used");
        }
      }
    }
    compact(dead);
  }

  Graph& g_;
  const CompilerOptions& opt_;
  PartitionReport& report_;
};

}  // namespace

void run_passes(Graph& g, const CompilerOptions& options, PartitionReport& report) {
  Passes(g, options, report).run();
}

}  // namespace furiosa::compiler::detail
