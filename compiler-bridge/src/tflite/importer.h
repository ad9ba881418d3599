// The TFLite importer's shared state (compiler/tflite_import.h is the public side): one Importer
// per model, its member functions spread by concept over the files of this folder:
//   importer.cpp        the driver: run(), errors, operator codes, the operator dispatch, the
//                       public import_tflite* functions
//   tensors.cpp         tensors, buffers and quantization parameters; IR values and nodes; the
//                       NHWC / NCHW views of a tensor
//   operator_common.cpp arity and type checks, fused activations, windows, fixed-point
//                       multipliers, lookup-table attributes
//   conv.cpp            CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED
//   transpose_conv.cpp  TRANSPOSE_CONV
//   elementwise.cpp     ADD, SOFTMAX, LOGISTIC, QUANTIZE, DEQUANTIZE, CAST, RELU6, RELU_N1_TO_1
//   arithmetic.cpp      SUB, MUL, DIV, PRELU, SQUARED_DIFFERENCE, MINIMUM, MAXIMUM, LEAKY_RELU,
//                       HARD_SWISH, EXP, RSQRT, SQRT; the float32 forms of ADD and these
//   pooling.cpp         MAX_POOL_2D, AVERAGE_POOL_2D, RESIZE_*, MEAN, ARG_MAX, ARG_MIN
//   data_movement.cpp   RESHAPE, CONCATENATION, PAD, PADV2, SHAPE, STRIDED_SLICE, PACK, TILE,
//   GATHER,
//                       FILL, RANGE, TRANSPOSE
//   rearrange.cpp       GATHER_ND, SPLIT, SPLIT_V, DEPTH_TO_SPACE, SPACE_TO_DEPTH,
//                       SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND
//   slicing.cpp         SLICE, MIRROR_PAD
//   reduce.cpp          SUM, REDUCE_MAX
//   detection.cpp       TFLite_Detection_PostProcess
//   shape_values.cpp    int32/int64 shape arithmetic evaluated at import
// The tables and multipliers are computed by the importer; the device only knows the generic
// fixed-point rule (isa.h) and 256-entry tables (host/lookup_table.h).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "furiosa/compiler/graph.h"
#include "furiosa/core/limits.h"
#include "furiosa/host/lookup_table.h"
#include "tflite_subset_generated.h"

namespace furiosa::compiler::detail::tflite {

namespace fb = furiosa::tflite_fb;

/// The schema's name of a tensor type ("INT16"), or "type <n>" for a number it does not name.
std::string type_name(fb::TensorType t);

/// std::round of v as int32, saturated (v may be huge for extreme scales; the results are clamped
/// to an 8-bit range afterwards anyway).
inline std::int32_t round_to_int(double v) {
  return static_cast<std::int32_t>(std::clamp(std::round(v), -1.0e9, 1.0e9));
}

/// NHWC axis -> NCHW axis (0..3).
inline std::int64_t nchw_axis(std::int64_t nhwc_axis) {
  static constexpr std::array<std::int64_t, 4> map = {0, 2, 3, 1};
  return map[static_cast<std::size_t>(nhwc_axis)];
}

/// Per-tensor quantization of an activation.
struct Quant {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
};

/// Quantization of a (weight) tensor: one entry, or one per index of `dim`.
struct ChannelQuant {
  std::vector<float> scales;
  std::vector<std::int64_t> zero_points;
  int dim = 0;
};

/// Everything the importer knows about one TFLite tensor.
struct TInfo {
  std::string name;
  fb::TensorType type = fb::TensorType::FLOAT32;
  std::optional<DType> dtype;
  Shape shape;                                              ///< the model's own shape (NHWC for images)
  const fb::QuantizationParameters* q = nullptr;
  const flatbuffers::Vector<std::uint8_t>* data = nullptr;  ///< constant data, or null
  int model = -1;                                           ///< IR value in the model's layout
  int nchw = -1;                                            ///< IR value in NCHW (4-D tensors only)
  /// int32/int64 values evaluated at import from static shapes (shape_values.cpp), or none.
  std::optional<Tensor> value;
  int producer = -1;          ///< the operator writing this tensor, -1 for inputs and constants
  std::string producer_name;  ///< its name
};

/// Maps subgraph 0 of one verified model to the graph IR. Single use: construct, then run() once.
/// Borrows the model's bytes for its lifetime. Every error is an Error naming the model and, while
/// an operator is mapped, the operator's index and name (where()).
class Importer {
 public:
  Importer(const fb::Model& model, std::string source, const LoadLimits& limits)
      : m_(model), source_(std::move(source)), limits_(limits) {}

  /// The whole mapping: tensors, then the operators in order, then the outputs.
  Graph run();

 private:
  // ---- errors (importer.cpp) --------------------------------------------------------------------
  /// Error(ModelLoadFailed) naming the model.
  [[noreturn]] void load_failed(const std::string& msg) const;
  /// The model, and the operator being mapped (index and name) if any.
  std::string where() const;
  /// Error(IncompatibleModel) naming where().
  [[noreturn]] void bad(const std::string& msg) const;
  /// Error(UnsupportedOperator) naming where().
  [[noreturn]] void unsupported(const std::string& msg) const;

  // ---- operator codes and dispatch (importer.cpp) -----------------------------------------------
  /// The custom_code of a CUSTOM operator ("" when absent).
  std::string custom_code(const fb::Operator& op) const;
  /// The builtin code of an operator (either field of its OperatorCode).
  int builtin_code(const fb::Operator& op) const;
  /// Refuses every operator outside the supported set, all listed in one error.
  void check_operators() const;
  /// Refuses the operator being mapped (code_, op_name_) when the type of the input its row of
  /// the operator table names (importer.cpp kSupported, the source of docs/operators.md's index)
  /// is in neither of the row's type sets: Error(UnsupportedOperator) naming where(), the input's
  /// index and escaped name, and its type. An absent input is left to the mapping's arity check.
  void check_operand_type(const fb::Operator& op) const;
  /// Maps one operator by its code (code_, op_name_).
  void map_operator(const fb::Operator& op);

  // ---- tensors and quantization (tensors.cpp) ---------------------------------------------------
  /// Checks a tensor index read from the model.
  int tensor_index(int t, const char* what) const;
  /// Fills t_ from subgraph 0, checking every declared size against the limits and the buffers.
  void read_tensors();
  /// What the importer knows about tensor t.
  const TInfo& info(int t) const { return t_[static_cast<std::size_t>(t)]; }
  /// The same, mutable.
  TInfo& info(int t) { return t_[static_cast<std::size_t>(t)]; }
  /// The IR type of tensor t, or Error(IncompatibleModel) for a type the IR lacks.
  DType dtype(int t) const;
  /// The constant data of tensor t as a host tensor in the model's layout.
  Tensor constant_tensor(int t) const;
  /// The quantization parameters of tensor t (one or per channel), checked.
  ChannelQuant channel_quant(int t) const;
  /// Per-tensor quantization of an 8-bit activation.
  Quant quant(int t) const;
  /// Whether tensor t is known at import: constant data or a value evaluated from static shapes.
  bool is_constant(int t) const;
  /// The integer values of constant tensor t (int32 or int64).
  std::vector<std::int64_t> int_constant(int t, const char* what) const;

  // ---- IR values and nodes (tensors.cpp) --------------------------------------------------------
  /// `name`, or `name#k` when taken.
  std::string unique_name(const std::string& name);
  /// A new IR value with a static shape; returns its id.
  int add_value(const std::string& name, DType d, Shape shape, std::string format = {});
  /// A new constant IR value holding `t`.
  int add_constant(const std::string& name, Tensor t);
  /// A float32 scale constant: a scalar for one scale, else 1-D.
  int scale_constant(const std::string& name, const std::vector<float>& scales);
  /// A zero-point constant of type d: a scalar for one zero point, else 1-D.
  int zero_point_constant(const std::string& name, DType d, const std::vector<std::int64_t>& zps);
  /// An int64 constant holding `shape` (a Reshape target).
  int shape_constant(const std::string& name, const Shape& shape);
  /// Appends a node of the current operator, named after it (plus `suffix`).
  void add_node(const std::string& op_type, const std::string& domain, std::vector<int> inputs,
                std::vector<int> outputs, std::map<std::string, Attribute> attributes,
                const std::string& suffix = {});
  /// Marks tensor t a graph input (constants listed as inputs stay constants).
  void add_graph_input(int t);

  // ---- layouts (tensors.cpp) --------------------------------------------------------------------
  /// The NCHW shape of 4-D tensor t.
  Shape nchw_shape(int t) const;
  /// Tensor t in the model's own layout (NHWC for 4-D).
  int model_view(int t);
  /// Tensor t (4-D) in NCHW.
  int nchw_view(int t);
  /// Tensor t as an operand of an element-wise or flattening operator: the NCHW view when that is
  /// the only one and its element order equals the model's, else the model's layout.
  int ordered_view(int t);
  /// A new IR value for output tensor t in NCHW.
  int output_nchw(int t);
  /// A new IR value for output tensor t in the model's layout.
  int output_model(int t);
  /// An int64 IR value of an int32/int64 tensor: an int64 constant, or a Cast of a computed value.
  int int64_view(int t, const char* what);

  // ---- operator checks and shared rules (operator_common.cpp) -----------------------------------
  /// The operator's input tensors (-1 for an omitted optional input).
  std::vector<int> op_inputs(const fb::Operator& op) const;
  /// The operator's output tensors.
  std::vector<int> op_outputs(const fb::Operator& op) const;
  /// min_in..max_in inputs (the first min_in present) and one output.
  void require_arity(const std::vector<int>& in, std::size_t min_in, std::size_t max_in, const std::vector<int>& out) const;
  /// Exactly n_in inputs, all present, and n_out outputs.
  void require_outputs(const std::vector<int>& in, std::size_t n_in, const std::vector<int>& out, std::size_t n_out) const;
  /// The compute operators take 8-bit activations of one type.
  void require_quantized(std::initializer_list<int> tensors) const;
  /// Tensor t must be a constant.
  void require_constant(int t, const char* what) const;
  /// A weight tensor the NPU can take: a constant of uint8 or int8.
  void require_quantized_weight(int w) const;
  /// The output clamp of a fused activation (TFLite CalculateActivationRangeQuantized).
  std::array<std::int32_t, 2> activation_range(fb::ActivationFunctionType act, int y) const;
  /// The float32 clamp of a fused activation (kernels/kernel_util.h
  /// CalculateActivationRange<float>): NONE, RELU, RELU6, RELU_N1_TO_1.
  std::array<float, 2> float_activation_range(fb::ActivationFunctionType act) const;
  /// Explicit pads and output size of one spatial dim.
  struct Dim {
    std::int64_t before = 0, after = 0, out = 0;
  };
  /// One spatial dim of a window (TFLite ComputePaddingHeightWidth: SAME puts the odd padding
  /// element at the end).
  Dim window_dim(fb::Padding padding, std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dilation) const;
  /// Output tensor y must have the shape the operator computes.
  void check_output_shape(int y, const Shape& expected_nhwc) const;
  /// How TFLite 2.14 forms a convolution's real multiplier input_scale * filter_scale /
  /// output_scale (kernels/kernel_util.cc): PopulateConvolutionQuantizationParams' per-channel
  /// arrays (int8 CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV; per-channel FULLY_CONNECTED)
  /// multiply the scales in double; GetQuantizedConvolutionMultipler, whose one multiplier the
  /// uint8 kernels and per-tensor FULLY_CONNECTED use, multiplies them in float32 first. The two
  /// multipliers can differ in their last bits, and then the results at rounding boundaries.
  enum class ScaleProduct { Double, Float32 };
  /// The fixed-point multiplier attributes of a requantizing node, one per weight scale.
  void add_fixed_point(std::map<std::string, Attribute>& attrs, const Quant& x,
                       const std::vector<float>& w_scales, const Quant& y,
                       std::array<std::int32_t, 2> range, ScaleProduct product) const;
  /// Binds value v to output tensor y, clamped to `range` where that is narrower than the type's.
  void bind_clamped(int v, int y, bool nchw, std::array<std::int32_t, 2> range);
  /// The attributes of a furiosa::Requantize node that maps x to y by `table`.
  std::map<std::string, Attribute> requantize_attrs(const Quant& x, const Quant& y, DType y_dtype,
                                                    const host::LookupTable& table) const;
  /// Maps tensor x to output tensor y element by element through `table` (a furiosa::Requantize
  /// with x's and y's parameters), in NCHW when that is the only view of x so far.
  void map_by_table(int x, int y, const Quant& xq, const Quant& yq, DType y_dtype, const host::LookupTable& table);
  /// The ONNX TensorProto type number of an IR dtype (Cast's `to`).
  static std::int64_t onnx_type(DType d);

  // ---- convolution and fully connected (conv.cpp) -----------------------------------------------
  /// The tensors of a weighted operator; b is -1 without a bias.
  struct WeightedOperands {
    int x = -1, w = -1, b = -1, y = -1;
  };
  /// The operands of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED, checked: input, weight and an
  /// optional bias, one output; x and y 8-bit of one type, w a constant 8-bit weight.
  WeightedOperands weighted_operands(const fb::Operator& op) const;
  /// CONV_2D / DEPTHWISE_CONV_2D -> QLinearConv on the NCHW view.
  void conv(const fb::Operator& op, bool depthwise);
  /// int8 weights must be symmetric (zero point 0).
  void require_symmetric_int8(int w, const ChannelQuant& wq) const;
  /// The eight operands of QLinearConv / QLinearMatMul, in order: xv (x's IR value), x's scale and
  /// zero point, the weight constant `w_data` (named `w_name`) with w's quantization, y's scale and
  /// zero point; the constants are named "<y>/<names[i]>_scale" / "_zero_point".
  std::vector<int> qlinear_operands(int xv, int x, const Quant& xq, const std::string& w_name, Tensor w_data, int w,
                                    const ChannelQuant& wq, int y, const Quant& yq, std::array<const char*, 2> names);
  /// The int32 [channels] bias constant b.
  int bias_constant(int b, std::int64_t channels);
  /// FULLY_CONNECTED -> QLinearMatMul on rows (+ Reshape).
  void fully_connected(const fb::Operator& op);

  // ---- transposed convolution (transpose_conv.cpp) ----------------------------------------------
  /// The checked operands and options of TRANSPOSE_CONV (kernels/transpose_conv.cc).
  struct TransposeConvOperands {
    int shape = -1, w = -1, x = -1, b = -1, y = -1;  ///< output_shape, weights, input, bias, output
    fb::Padding padding = fb::Padding::SAME;
    fb::ActivationFunctionType act = fb::ActivationFunctionType::NONE;
    std::array<std::int64_t, 2> strides{1, 1};  ///< height, width
    /// TFLite's leading pads (ComputePaddingHeightWidth on the output size), height, width.
    std::array<std::int64_t, 2> pads{};
    std::vector<std::int64_t> out;  ///< output_shape [N, H, W, O]
  };
  /// The operands of TRANSPOSE_CONV, checked: a constant int32 [4] output_shape that a forward
  /// convolution of the output maps back onto the input, one type, an int32 (float32) bias [O]
  /// (int8: with zero point 0, as kernels/transpose_conv.cc Prepare requires).
  TransposeConvOperands transpose_conv_operands(const fb::Operator& op) const;
  /// TRANSPOSE_CONV -> (Reshape, Pad, Reshape,) Pad, QLinearConv with flipped weights (8-bit, NPU)
  /// or furiosa::TFLiteTransposeConv (float32, host).
  void transpose_conv(const fb::Operator& op);
  /// The float32 TRANSPOSE_CONV as furiosa::TFLiteTransposeConv (reference_ops::TransposeConv).
  void transpose_conv_float(const TransposeConvOperands& t);

  // ---- element-wise operators (elementwise.cpp) -------------------------------------------------
  /// ADD -> com.microsoft QLinearAdd with TFLite's fixed-point rule.
  void add(const fb::Operator& op);
  /// SOFTMAX -> Softmax in float (between DequantizeLinear and QuantizeLinear when 8-bit).
  void softmax(const fb::Operator& op);
  /// LOGISTIC -> furiosa::Requantize with TFLite's table (8-bit) or Sigmoid (float32).
  void logistic(const fb::Operator& op);
  /// QUANTIZE -> QuantizeLinear (float input) or furiosa::Requantize (8-bit input).
  void quantize(const fb::Operator& op);
  /// DEQUANTIZE -> DequantizeLinear.
  void dequantize(const fb::Operator& op);
  /// CAST -> Cast of the stored values.
  void cast(const fb::Operator& op);
  /// RELU6 (lo 0, hi 6) / RELU_N1_TO_1 (lo -1, hi 1) -> furiosa::Requantize with TFLite's
  /// requantize-and-clamp as a table (8-bit) or Clip (float32).
  void relu_clamp(const fb::Operator& op, float lo, float hi);

  // ---- two-operand arithmetic and parametric activations (arithmetic.cpp) ----------------------
  /// The inputs a, b and output y of a broadcasting two-operand operator; y's shape checked.
  void binary_operands(const fb::Operator& op, int& a, int& b, int& y) const;
  /// SUB ("sub"), MUL ("mul"), DIV ("div"), PRELU ("prelu") or SQUARED_DIFFERENCE
  /// ("squared_difference") -> furiosa::TFLiteBinary with TFLite's fixed-point multipliers (host).
  void tflite_binary(const fb::Operator& op, const std::string& kind);
  /// The float32 forms of ADD, SUB, MUL, DIV (`kind` "add", ... with the fused activation's
  /// clamp), SQUARED_DIFFERENCE and PRELU -> furiosa::TFLiteFloat (reference/{add,sub,mul,div,
  /// prelu}.h, kernels/squared_difference.cc; host).
  void float_binary(const fb::Operator& op, const std::string& kind);
  /// The int32 forms of ADD, SUB, MUL, DIV (`kind` "add", "sub", "mul", "div";
  /// reference/{add,sub,mul,div}.h, with CalculateActivationRange<int32_t>) -> Add / Sub / Mul /
  /// Div (+ Clip), folded on constants. DIV truncates toward zero (C++ `/`); a divisor known at
  /// import holding a 0 is refused (Error IncompatibleModel naming the operator and the tensor), as
  /// kernels/div.cc fails the invocation on it; INT32_MIN / -1 gives INT32_MIN (the host Div).
  void int_binary(const fb::Operator& op, const std::string& kind);
  /// SQRT (float32, kernels/elementwise.cc) -> Sqrt (host).
  void sqrt_op(const fb::Operator& op);
  /// MINIMUM / MAXIMUM -> Min / Max of the stored values.
  void min_max(const fb::Operator& op, bool max);
  /// LEAKY_RELU -> furiosa::Requantize with TFLite's fixed-point rule as a table.
  void leaky_relu(const fb::Operator& op);
  /// HARD_SWISH -> furiosa::Requantize with TFLite's 16-bit fixed-point rule as a table.
  void hard_swish(const fb::Operator& op);
  /// EXP -> furiosa::Requantize with TFLite's float32 table (8-bit) or Exp (float32).
  void exp_op(const fb::Operator& op);
  /// RSQRT -> furiosa::Requantize with TFLite's fixed-point table (int8) or Sqrt + Div (float32).
  void rsqrt(const fb::Operator& op);

  // ---- pooling, resizing, reductions (pooling.cpp) ----------------------------------------------
  /// MAX_POOL_2D -> MaxPool, AVERAGE_POOL_2D -> furiosa::QuantizedAveragePool.
  void pool(const fb::Operator& op, bool max);
  /// RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR -> Resize with TFLite's arithmetic.
  void resize(const fb::Operator& op, bool bilinear);
  /// MEAN -> furiosa::QuantizedMean (8-bit) or ReduceMean (float32).
  void mean(const fb::Operator& op);
  /// ARG_MAX / ARG_MIN -> ArgMax / ArgMin (+ Cast to int32).
  void arg_min_max(const fb::Operator& op, bool max);

  // ---- shape values evaluated at import (shape_values.cpp) ---------------------------------------
  /// Evaluates the IR nodes the operator added (from first_node on) with the host operator
  /// library when all their inputs are known, so its int32/int64 outputs get TInfo::value (the
  /// SHAPE -> STRIDED_SLICE -> MUL -> PACK / CONCATENATION -> CAST chains of TFLite exports, whose
  /// shapes kernels/shape.cc gives statically); records each output's producer.
  void fold_shape_values(const fb::Operator& op, std::size_t first_node);
  /// Why tensor t is not known at import, for a refusal: "; it stays dynamic at operator k (NAME),
  /// whose input 'x' is known only at run time", or "" for a graph input.
  std::string dynamic_origin(int t) const;

  // ---- reshapes, concatenation, data movement (data_movement.cpp) -------------------------------
  /// RESHAPE -> Reshape to the output tensor's shape.
  void reshape(const fb::Operator& op);
  /// CONCATENATION -> Concat, inputs rescaled by table where their parameters differ.
  void concatenation(const fb::Operator& op);
  /// PAD / PADV2 (v2: an optional constant_values input) -> Concat with constant blocks of the
  /// zero point or of PADV2's constant value.
  void pad(const fb::Operator& op, bool v2);
  /// SHAPE -> a constant.
  void shape_op(const fb::Operator& op);
  /// STRIDED_SLICE -> Slice (+ Reshape).
  void strided_slice(const fb::Operator& op);
  /// PACK -> Reshape each input, Concat.
  void pack(const fb::Operator& op);
  /// TILE -> Tile.
  void tile(const fb::Operator& op);
  /// GATHER -> Gather.
  void gather(const fb::Operator& op);
  /// FILL -> Expand.
  void fill(const fb::Operator& op);
  /// RANGE -> Range.
  void range(const fb::Operator& op);
  /// TRANSPOSE -> Transpose with the constant permutation.
  void transpose(const fb::Operator& op);

  // ---- rearrangements (rearrange.cpp) -----------------------------------------------------------
  /// GATHER_ND with constant indices -> Reshape to rows + Gather of the flat row numbers.
  void gather_nd(const fb::Operator& op);
  /// SPLIT (sizes_given false) / SPLIT_V -> Split.
  void split(const fb::Operator& op, bool sizes_given);
  /// DEPTH_TO_SPACE (to_space) / SPACE_TO_DEPTH -> Reshape, Transpose, Reshape.
  void depth_space(const fb::Operator& op, bool to_space);
  /// SPACE_TO_BATCH_ND (to_batch) / BATCH_TO_SPACE_ND with constant block_shape and paddings /
  /// crops -> (Concat padding,) Reshape, Transpose, Reshape (, Slice cropping).
  void space_batch(const fb::Operator& op, bool to_batch);

  // ---- slices and mirrored padding (slicing.cpp) ------------------------------------------------
  /// SLICE with constant begin and size -> Slice.
  void slice(const fb::Operator& op);
  /// MIRROR_PAD (REFLECT / SYMMETRIC) with constant paddings -> Gather per padded axis.
  void mirror_pad(const fb::Operator& op);

  // ---- SUM and REDUCE_MAX (reduce.cpp) ----------------------------------------------------------
  /// The operands of a reduction with constant axes, checked: y's shape, one type of float32,
  /// uint8 or int8.
  struct Reduced {
    int x = -1, y = -1;
    bool keep = false;
    std::vector<std::int64_t> axes;  ///< the reduced dims, ascending, each once
    Shape shape;                     ///< y's shape
    std::int64_t count = 1;          ///< input elements per output
  };
  Reduced reduced_operands(const fb::Operator& op) const;
  /// No axes: y is a copy of x (a Reshape); returns whether that was the case.
  bool reduce_copy(const Reduced& r);
  /// SUM (uint8, rescaling) -> furiosa::QuantizedMean with TFLite's undivided multiplier (host).
  void sum(const fb::Operator& op);
  /// REDUCE_MAX -> ReduceMax of the stored values (host).
  void reduce_max(const fb::Operator& op);

  // ---- detection post-processing (detection.cpp) ------------------------------------------------
  /// A float32 view of a detection input: the tensor itself, or its DequantizeLinear (uint8/int8).
  int float_view(int t, const char* what);
  /// TFLite_Detection_PostProcess -> furiosa::TFLiteDetectionPostProcess.
  void detection_postprocess(const fb::Operator& op);

  const fb::Model& m_;
  std::string source_;
  LoadLimits limits_;
  std::uint64_t constant_bytes_ = 0;  ///< all tensors' buffer bytes so far (limits_.max_total_bytes)
  const fb::SubGraph* sg_ = nullptr;
  Graph g_;
  std::vector<TInfo> t_;
  std::set<std::string> names_;
  std::map<int, Tensor> folded_;  ///< IR value -> its value evaluated at import (shape_values.cpp)
  int op_index_ = -1;  ///< the operator being mapped, -1 outside
  int code_ = -1;      ///< its builtin code
  std::string op_name_;
};

}  // namespace furiosa::compiler::detail::tflite
