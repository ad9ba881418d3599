// Private to lowering (lowering.h): the Lowering walker, shared by the files that define it:
//   lowering.cpp            the walk, host slots, NPU segments (device values, program inputs
//                           and outputs, DRAM placement) and the dispatch of each node;
//   lowering_host.cpp       host steps: Quantize / Dequantize, the NHWC Lower, external ops;
//   lowering_arithmetic.cpp NPU kernels that compute: Conv2d, MatMul, MaxPool, Add / Mul / Sub,
//                           GlobalAveragePool, Requantize;
//   lowering_movement.cpp   NPU data-movement kernels: Concat, Split, Transpose, Resize, Slice,
//                           Pad, Reshape.
// One Lowering lowers one graph; not thread-safe (compile() makes one per call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "capability.h"
#include "furiosa/device/isa.h"
#include "lowering.h"

namespace furiosa::compiler::detail {

/// Lowers one placed graph into a CompiledModel (lower_graph). The emitters throw
/// Error(IncompatibleModel) naming the node for supported operators used in ways the kernels do
/// not handle, Error(Internal) for a node placed on the NPU that no kernel takes.
class Lowering {
 public:
  /// `g`, `opt` and `out` are borrowed for the lifetime of the object.
  Lowering(const Graph& g, const CompilerOptions& opt, CompiledModel& out)
      : g_(g), opt_(opt), out_(out) {}

  /// Lowers the whole graph into `out` (once).
  void run();

 private:
  const Value& value(int id) const { return g_.values[static_cast<std::size_t>(id)]; }

  // ---- lowering.cpp: the walk -------------------------------------------------------------------
  // The emission order: graph order, except that a node placed off the NPU waits until a later
  // NPU node reads one of its outputs (directly or through other waiting nodes), or until the
  // end. Host work that only feeds model outputs (an output's DequantizeLinear, a host
  // post-process) then no longer closes the open NPU segment, so NPU nodes after it in graph
  // order join the same program instead of a second one fed from the first through the host
  // (SSD's box and score concatenations, each followed by its output's Dequantize). Waiting
  // nodes keep their relative order, and a node never runs before its producers.
  std::vector<int> schedule() const;
  bool is_graph_output(int id) const;
  void note_entry(const Node& n, const char* placement, std::string target, std::string reason);

  // ---- lowering.cpp: host slots -----------------------------------------------------------------
  int add_slot(std::string name, DType dtype, Shape shape, isa::Layout layout);
  void add_cpu_step(CpuOp op);
  // The host slot of value `id`: closes the open NPU segment when it produces the value, and
  // makes constant slots for initializers.
  int host_value(int id);

  // ---- lowering.cpp: NPU segments ---------------------------------------------------------------
  isa::TensorRef alloc_activation(DType dtype, const Shape& shape, isa::Layout layout);
  isa::TensorRef add_constant(const Tensor& t, isa::Layout layout);
  void push_kernel(isa::Kernel k);
  // Value `id` on the device in any layout (the one it has; program inputs come in dense).
  isa::TensorRef device_any(int id, const Node& consumer);
  // True when value `id` is held on the host in the lowered layout (an NHWC Lower's result).
  bool host_lowered(int id) const;
  // Value `id` on the device in `layout`: creates program inputs (with host Lower), constants,
  // and layout-changing LowLevelReshape kernels as needed.
  isa::TensorRef device_value(int id, isa::Layout layout, const Node& consumer);
  // True when value `id` is on the device only in the lowered layout.
  bool lowered_on_device(int id) const;
  // [N, C, H, W] with W rounded up to the lowered layout's row of isa::kLoweredWidthAlign.
  static Shape padded_shape(Shape s);
  // remove_lower: true when model input `id` (host slot `slot`) is read only by NPU nodes, so
  // the caller can give it lowered; the slot then becomes dense [N, C, H, padded W] with format
  // "lowered_nchw" (its bytes are exactly the lowered layout).
  bool caller_lowered_input(int id, int slot);
  void open_segment_if_needed() { segment_open_ = true; }
  void produce(int id, const isa::TensorRef& r);
  // Ends the open NPU segment: values used later (by other nodes or as graph outputs) become
  // program outputs, with a host Unlower where needed; appends the NPU call step.
  void close_segment();

  // ---- lowering.cpp: emission by placement ------------------------------------------------------
  void emit(int ni);
  // One case per NpuOp (capability.h), no default: a new op needs its emitter.
  void emit_npu(const Node& n, NpuOp op);

  // ---- lowering_host.cpp ------------------------------------------------------------------------
  // A Transpose [0, 3, 1, 2] of an "NHWC" value held on the host (not produced by the open NPU
  // segment) whose result only NPU nodes read: done by the host Lower step reading NHWC.
  bool is_nhwc_lower(const Node& n) const;
  void emit_nhwc_lower(const Node& n);
  CpuOp qdq_op(const Node& n, CpuOpKind kind);
  void emit_qdq(const Node& n);
  void emit_external(const Node& n);

  // ---- lowering_arithmetic.cpp ------------------------------------------------------------------
  // The operands QLinearConv and QLinearMatMul share (ONNX operator spec: inputs 1-2 x/a
  // quantization, 4-5 weight scale and zero point with 1 or `channels` values, 6-7 y
  // quantization, optional 8 an int32 bias of `channels` values, added to the bias area).
  struct WeightedOperands {
    isa::QuantParam x, y;
    std::vector<float> w_scale;
    std::vector<std::int32_t> w_zero_point;
    std::optional<isa::TensorRef> bias;
  };
  WeightedOperands weighted_operands(const Node& n, std::size_t channels);
  void emit_conv(const Node& n);
  void emit_maxpool(const Node& n);
  void emit_matmul(const Node& n);
  // LowLevelAdd / LowLevelMul / LowLevelSub of a QLinearAdd / QLinearMul / furiosa::QLinearSub node
  // (operands A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): lowered operands when all three
  // shapes are equal and one operand is already lowered, else Linear operands of y's rank
  // broadcasting to it.
  void emit_binary(const Node& n, isa::KernelKind kind);
  void emit_gap(const Node& n);
  void emit_requantize(const Node& n);

  // ---- lowering_movement.cpp --------------------------------------------------------------------
  // Output layout of a data-movement op: lowered when 4-D and its first input is lowered.
  isa::Layout movement_layout(int in, const Shape& out_shape) const;
  void emit_concat(const Node& n);
  void emit_qconcat(const Node& n);
  void emit_split(const Node& n);
  void emit_transpose(const Node& n);
  void emit_resize(const Node& n);
  void emit_slice(const Node& n);
  void emit_pad(const Node& n);
  void emit_reshape(const Node& n);

  const Graph& g_;
  const CompilerOptions& opt_;
  CompiledModel& out_;
  std::map<int, std::vector<int>> consumers_;  // value -> consumer nodes (after rewrites)
  std::map<int, int> host_;                    // value -> host slot
  // The open NPU segment.
  bool segment_open_ = false;
  isa::Program prog_;
  NpuCall call_;
  std::vector<std::byte> constants_;
  std::uint64_t act_end_ = 0;
  std::map<std::pair<int, isa::Layout>, isa::TensorRef> dev_;  // (value, layout) -> device tensor
  std::set<int> seg_values_;  // values produced in the open segment
  std::set<int> seg_nodes_;   // nodes emitted in the open segment
};

}  // namespace furiosa::compiler::detail
