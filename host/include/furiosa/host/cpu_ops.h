// The host ("external", CPU fallback) operator library (host/src/cpu_ops.cpp and one file per
// operator family under host/src/ops/): float and integer ONNX operators the NPU
// cannot run, executed on dense row-major host tensors. The compiler asks it what the host can
// run (cpu_op_supported), infers shapes with it (cpu_op_infer) and constant-folds with it; the
// runtime executes the CPU partitions with run_cpu_op. Every function is pure: no shared state,
// safe to call from many threads at once.
//
// Semantics follow the ONNX operator specification (https://onnx.ai/onnx/operators/), opsets
// 11-13 and the later input/attribute variants where they differ; the ONNX backend node tests of
// Debian's libonnx-testdata are the arbiter (tests/host/test_cpu_ops_onnx_conformance.cpp runs
// all of them that the IR can import). Choices where the spec leaves freedom are listed at each
// operator below and in cpu_op_list()'s documentation.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/core/tensor.h"
#include "furiosa/host/op_node.h"

namespace furiosa::host {

/// True when the host library implements node.qualified_op() ("Softmax", "com.microsoft::X", ...)
/// for the given input dtypes and the node's attributes; otherwise false, and `reason` (when
/// non-null) receives why, e.g. "Conv: input 0 (X) is uint8, the host kernel takes float32" or
/// "Conv: 3-D windows (kernel_shape/strides/pads of rank 3) are not implemented, only 1-D and 2-D".
///
/// `input_dtypes[i]` is the dtype of node input i. Entries of omitted optional inputs
/// (node.inputs[i] < 0) are ignored, and inputs beyond input_dtypes.size() count as omitted.
/// Shape-dependent limits (e.g. a Conv without kernel_shape on a 5-D input) are only detected by
/// cpu_op_infer / run_cpu_op, which throw Error(IncompatibleModel).
/// Never throws for an unknown op or dtype (returns false); a present attribute of the wrong kind
/// also yields false with the reason.
bool cpu_op_supported(const OpNode& node, const std::vector<DType>& input_dtypes,
                      std::string* reason);

/// What cpu_op_infer knows about one input: its dtype and shape, and its value when it is a
/// constant (initializer or folded value). `constant` must match dtype and shape when set.
struct CpuValueInfo {
  DType dtype = DType::Float32;
  Shape shape;
  const Tensor* constant = nullptr;
};

/// Output dtypes and shapes (one entry per node output, in node order, including outputs the
/// node leaves unnamed) from the input dtypes/shapes. Inputs that determine the output shape must
/// be constants: Reshape's `shape`, Squeeze/Unsqueeze `axes` (input since opset 13), Split's
/// `split` (input since opset 13), Slice's starts/ends/axes/steps (inputs since opset 10),
/// ReduceMean's `axes` (input since opset 18), Resize's scales/sizes, TopK's K, Range's inputs,
/// ConstantOfShape's shape, Expand's shape, Tile's repeats, Pad's pads and axes, and every input
/// of NonMaxSuppression (its output count depends on the scores). `inputs[i]` may be null for an
/// omitted optional input. Shapes must be fully known (no -1 dims). Throws Error(IncompatibleModel)
/// naming the node (name and op) when the inputs do not fit the operator (rank, broadcast, channel
/// counts, missing required input or constant, bad attribute), and Error(UnsupportedOperator) when
/// cpu_op_supported would say no. The Error(IncompatibleModel) cpu_op_infer throws when an input
/// that decides the output shape (Resize's sizes, Tile's repeats, ... as listed above) is not a
/// constant. A compiler may treat the node's outputs as not yet known and infer again once constant
/// folding has given that input a value; the message names the node and the input.
class InputNotConstant : public Error {
 public:
  using Error::Error;
};

std::vector<std::pair<DType, Shape>> cpu_op_infer(const OpNode& node,
                                                  const std::vector<const CpuValueInfo*>& inputs);

/// Runs the node on host tensors (dense row-major). `inputs[i]` is node input i and may be null
/// for an omitted optional input. Returns one tensor per node output, in node order (outputs the
/// node leaves unnamed are computed too; a node without listed outputs gets its first output).
/// Split returns node.outputs.size() parts; MaxPool computes Indices only when the node has a
/// second output. The output dtypes and shapes are exactly those of
/// cpu_op_infer on the same inputs (with every input treated as a constant).
/// Thread-safe (no shared state; inputs are only read).
/// Throws Error naming the node:
///  - UnsupportedOperator: op, dtype or attribute combination the host library does not run
///    (cpu_op_supported is false);
///  - IncompatibleModel: inputs that do not fit the operator (shapes, ranks, attributes,
///    missing required inputs);
///  - InvalidInput: data-dependent failures: an index out of range (Gather), an integer
///    division by zero (Div on integer tensors), a zero or NaN y_scale (QuantizeLinear);
///  - Internal (cpu_op_infer only): a CpuValueInfo whose constant disagrees with its dtype/shape.
///
/// `reuse` (optional): tensors that output i may take when (*reuse)[i] has that output's dtype
/// and shape (the caller's outputs of the previous run of this node): it is then zero-filled
/// and returned in place of a new allocation, as ONNX Runtime's CPU arena reuses its buffers, so a
/// large output does not fault fresh pages in at every run. Taken tensors are left empty; the
/// values computed are the same either way.
std::vector<Tensor> run_cpu_op(const OpNode& node, const std::vector<const Tensor*>& inputs,
                               std::vector<Tensor>* reuse = nullptr);

/// Op types the host library runs, qualified as Node::qualified_op() returns them (all are in the
/// default ai.onnx domain), in a fixed order. Per op, the dtypes and the choices made:
///  - Softmax, LogSoftmax (float32): opset-13 semantics over the single axis `axis` (default -1).
///    For opset < 13 models (coerce-to-2-D semantics, default axis 1) the result is the same
///    whenever the input has no dims after the axis, e.g. [N, C] (the zoo classifiers). The
///    graph's opset is not known here: a 4-D opset-11 Softmax is computed over the one axis, and
///    a missing `axis` means -1. A caller that knows the opset must set `axis` explicitly (1 for
///    opset < 13) or reject inputs with dims after the axis.
///  - Relu (float32, int8, int32, int64), Sigmoid (float32).
///  - Exp, Log, Sqrt, Tanh, Floor, Ceil (float32, the C library's float functions),
///    LeakyRelu (alpha, default 0.01), HardSigmoid (alpha 0.2, beta 0.5: max(0, min(1,
///    alpha * x + beta))), HardSwish (x * HardSigmoid(x) with alpha 1/6, beta 0.5), all float32.
///    Neg (float32, int8, int32, int64), Abs (all five dtypes): integers wrap like numpy (the
///    lowest value stays itself).
///  - Pow (base float32, int32 or int64; exponent any of the five dtypes; numpy broadcasting):
///    computed in double, converted to the base's dtype (integers truncated toward zero, as ONNX
///    Runtime's cast).
///  - Min, Max (all five dtypes, one or more inputs of one dtype, numpy broadcasting); a NaN
///    operand gives NaN (numpy's minimum/maximum).
///  - Clip (all five dtypes): min/max as optional inputs (opset >= 11) or float attributes
///    (opset < 11); defaults are the dtype's lowest/highest value.
///  - Add, Sub, Mul, Div (all five dtypes, both inputs of one dtype): numpy broadcasting; integer
///    arithmetic wraps around like numpy, integer Div truncates toward zero (C++ and ONNX Runtime)
///    and throws InvalidInput on a zero divisor.
///  - MatMul (float32): numpy matmul (1-D operands promoted and the added dim removed, batch dims
///    broadcast). Gemm (float32): alpha, beta, transA, transB, optional C broadcast to [M, N].
///  - Conv (float32), ConvInteger (uint8/int8 x and w, int32 output): 1-D or 2-D, group, pads,
///    strides, dilations, auto_pad (NOTSET, SAME_UPPER, SAME_LOWER, VALID). ConvInteger's
///    x_zero_point is per tensor, w_zero_point per tensor or per output channel.
///  - MaxPool (float32, uint8, int8; optional int64 Indices output with storage_order),
///    AveragePool (float32, count_include_pad): any number of spatial dims (input
///    [N, C, D1, ..., Dn], n >= 1: 1-D, 2-D, 3-D [N, C, D, H, W], ...), kernel_shape, pads,
///    strides, dilations, auto_pad, ceil_mode. With ceil_mode, a last window that would start in
///    the end padding is dropped (ONNX reference / PyTorch / current ONNX Runtime). Indices are
///    flat offsets into X ([0, N * C * D1 * ... * Dn)), the spatial part row-major with
///    storage_order 0 and column-major (D1 fastest) with 1, as ONNX Runtime; ties go to the first
///    tap in row-major window order. AveragePool sums in float32.
///  - GlobalAveragePool (float32, any spatial rank), ReduceMean (float32; axes attribute (< 18)
///    or input (>= 18), keepdims, noop_with_empty_axes; sums in double).
///  - ReduceMax (float32, uint8, int8: the stored values compared, as TFLite's REDUCE_MAX; the same
///    axes and keepdims forms as ReduceMean; float32 starts from -inf, so an empty reduction gives
///    -inf as ONNX specifies).
///  - ArgMax, ArgMin (all five dtypes, int64 output): axis, keepdims, select_last_index; a NaN
///    wins over every number (numpy's argmax/argmin).
///  - TopK (all five dtypes; K as input (>= 10) or attribute 'k' (< 10); values and int64
///    indices): axis, largest; output always sorted (also for sorted=0, where the spec leaves the
///    order free); equal values by lower index first; NaN counts as the greatest value.
///  - Resize (opsets 11-19: inputs X, roi, scales, sizes; exactly one of scales/sizes non-empty,
///    a constant for shape inference): mode 'nearest' (all five dtypes; nearest_mode
///    round_prefer_floor, round_prefer_ceil, floor, ceil), 'linear' or 'cubic' (float32; N-D:
///    every resized dim interpolates, so 2-D on [N, C, H, W] is bilinear / bicubic; cubic with
///    cubic_coeff_a (default -0.75) and exclude_outside, edge values for taps outside; weights in
///    double, as the ONNX reference); every coordinate_transformation_mode (half_pixel,
///    pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize with
///    extrapolation_value, half_pixel_symmetric); 'axes' and keep_aspect_ratio_policy (opset 18).
///    Output dims are floor(input * scale) with scales, else sizes. Lengths in the coordinate
///    formulas are the integer output dims, as ONNX Runtime (the ONNX reference uses input *
///    scale, which differs for align_corners when that is fractional). The opset-10 form (X,
///    scales; nearest or linear) as ONNX Runtime runs it: asymmetric coordinates, nearest
///    truncating the source coordinate when upsampling, rounding it up when downsampling.
///    'linear' also on uint8 and int8, with ONNX Runtime 1.30's CPU arithmetic (float32 scales,
///    coordinates and output dims from scales; 10-bit integer weights for 4-D X as a quantized
///    model between QLinearConvs gets them, float32 weights for 2-D, 3-D, 5-D X and for 4-D NCHW
///    with sh = 1; results truncated toward zero): coordinate modes half_pixel,
///    pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn; rank 2, 3, 4 (scales
///    1 on dims 0 and 1, or 0 and 3) and 5 (scales 1 on dims 0 and 1); policy stretch. Source:
///    onnxruntime/core/providers/cpu/tensor/upsample.cc / upsample.h; docs/operators.md has the
///    full rule. Refused: antialias=1.
///    Extension for TFLite models: the int attribute tflite_arithmetic = 1 (set by the TFLite
///    importer) computes RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR with TFLite's reference
///    kernels instead of the formulas above: X float32, uint8 or int8; `axes` lists the two
///    spatial axes (H before W); coordinate_transformation_mode align_corners, asymmetric, or
///    half_pixel (linear) / tf_half_pixel_for_nn (nearest) for TFLite's align_corners /
///    half_pixel_centers. Coordinates in float32 as TFLite's ComputeInterpolationValues and
///    GetNearestNeighbor; linear float32/uint8 values as the generic ResizeBilinear<T> (float32
///    sum of the four weighted taps plus rounding_offset, 0 for float32 and 0.5 for uint8, then
///    static_cast: uint8 rounds half up); linear int8 as
///    ResizeBilinearInteger (10-bit fixed point, rounding half away from zero). Source:
///    tensorflow/lite/kernels/internal/reference/resize_bilinear.h and
///    resize_nearest_neighbor.h; docs/operators.md has the full rule.
///  - NonMaxSuppression (boxes [B, N, 4] and scores [B, C, N] float32; optional
///    max_output_boxes_per_class (int64, default 0: no output), iou_threshold (default 0),
///    score_threshold (default: none)): center_point_box 0 (any two opposite corners) or 1.
///    Per batch and class, candidates with score > score_threshold in descending score order
///    (equal scores by lower box index, as ONNX Runtime); a box is suppressed when its IoU with
///    a selected box is > iou_threshold (boxes without area never suppress); int64 output
///    [num_selected, 3] of (batch, class, box) ordered by batch, class, then score. The output
///    count depends on the scores, so shape inference needs boxes, scores and the thresholds as
///    constants.
///  - Data movement, all five dtypes: Flatten, Reshape (0 copies the input dim unless allowzero,
///    one -1 inferred), Transpose, Concat, Split (sizes from input (>= 13) or attribute 'split'
///    (< 13), else equal parts, or 'num_outputs' (>= 18) with a smaller last part), Squeeze,
///    Unsqueeze (axes attribute (< 13) or input (>= 13)), Identity, Shape (start/end, any dtype,
///    int64 output), Gather (int32/int64 indices, negative indices), Slice (starts/ends/axes/steps
///    as int32/int64 inputs (>= 10) or attributes (< 10), negative steps).
///  - Shape-subgraph operators, all five dtypes unless noted; their shape-determining inputs
///    must be constants for shape inference: Range (float32, int32, int64 scalars; element i is
///    start + i * delta, count max(ceil((limit - start) / delta), 0)), ConstantOfShape (int64
///    shape; 'value' a one-element tensor of any of the five dtypes, default float32 0), Expand
///    (int64 shape, numpy bidirectional broadcasting), Tile (int64 repeats), Pad (pads as int64
///    input (>= 11) with optional axes (>= 18) or attribute (< 11); negative pads crop; mode
///    constant (constant_value input or float 'value' attribute, default 0), reflect (mirrored
///    without the edge, repeated for pads longer than the dim, like numpy), edge, wrap
///    (periodic)).
///  - Dropout (float32; inference: the output is the input, ratio ignored). Refused: the mask
///    output (bool, which the library has no dtype for), training_mode, is_test=0.
///  - Cast between float32, uint8, int8, int32, int64 ('to' is the ONNX TensorProto type number:
///    1, 2, 3, 6, 7). float -> integer truncates toward zero like numpy's astype, NaN becomes 0
///    and out-of-range values saturate to the target's limits (numpy leaves both undefined);
///    integer -> narrower integer wraps modulo 2^bits like numpy.
///  - QuantizeLinear (x float32 or int32, uint8/int8 output): y = saturate(nearbyint(x / scale)
///    + zero_point) computed in float32, rounding half to even, per tensor or per axis (`axis`,
///    default 1). NaN quantizes to the zero point.
///  - DequantizeLinear (x uint8, int8 or int32): y = float(x - zero_point) * scale in float32,
///    per tensor or per axis.
///  - DynamicQuantizeLinear (float32 -> uint8, float32 scale, uint8 zero point), exactly as the
///    spec: scale = (max(0, max(x)) - min(0, min(x))) / 255, zero point = saturate(round(0 -
///    min / scale)), y = saturate(round(x / scale) + zero point), rounding half to even. When
///    x is all zeros the spec divides by zero; like ONNX Runtime, scale is then 1 (zero point 0).
///  - MatMulInteger (uint8/int8 A and B, int32 output): a_zero_point per tensor, per row of A
///    (M elements, or a tensor broadcastable to A's shape with a last dim of 1) and b_zero_point
///    per tensor, per column of B (N elements, or broadcastable to B's shape with a second-last
///    dim of 1).
///
/// Besides these ONNX operators, run_cpu_op runs operators of the "furiosa" domain that the
/// importers and passes emit (not listed here, since they are no ONNX operators):
///  - furiosa::QLinearSoftmax (uint8/int8 X, float32 x_scale, x_zero_point, float32 y_scale,
///    y_zero_point, scalars -> X's dtype and shape): com.microsoft QLinearSoftmax as ONNX Runtime
///    1.30 computes it (contrib_ops/cpu/quantization/qlinear_softmax.cc): attributes axis
///    (default -1) and opset (13 and later: along axis; before: over the dims from axis on); a
///    float32 table of exp((x - max) * x_scale) scaled by FLT_MAX / (e^5 D), the float32 sum in
///    order, q = nearbyint(e * floor(1 / y_scale) / sum) + y_zero_point, uint8 saturating above
///    255, int8 keeping q's low byte (128 becomes -128; above 255, -1), as the kernel casts.
///    Attribute furiosa_qdq_s8_to_u8 runs an int8 tensor as ORT runs a QDQ group it moved to
///    uint8 (codes and zero points + 128). The compiler emits it for com.microsoft
///    QLinearSoftmax and for DequantizeLinear -> Softmax -> QuantizeLinear groups that ORT fuses
///    (fuse_qdq_operators).
///  - furiosa::QuantizedAveragePool (uint8/int8 X [N, C, H, W] -> same dtype): attributes
///    kernel_shape, strides, pads (ONNX order), output_min, output_max. Each output is the sum of
///    the raw stored values over the window's in-bounds taps divided by their count, rounded half
///    away from zero, clamped to [output_min, output_max] (default: the dtype's range), i.e.
///    TFLite's quantized AVERAGE_POOL_2D reference kernels (input and output share their
///    quantization).
///  - furiosa::QuantizedMean (uint8/int8 data -> same dtype): attributes axes (or an int64 axes
///    input), keepdims, x_zero_point, y_zero_point, fixed_point_multiplier, fixed_point_shift.
///    Each output is MultiplyByQuantizedMultiplier(sum - x_zero_point * count, multiplier, shift)
///    + y_zero_point, clamped to the dtype: TFLite's reference_ops::QuantizedMeanOrSum, whose
///    multiplier (QuantizeMultiplier(in_scale / out_scale) with 1/count folded in) the importer
///    computes.
///  - furiosa::TFLiteDetectionPostProcess (float32 box encodings [1, A, >= 4], class predictions
///    [1, A, C or C + 1], anchors [A, 4] -> float32 boxes [1, N, 4], classes [1, N], scores
///    [1, N], num_detections [1], N = max_detections * max_classes_per_detection): TFLite's
///    custom op TFLite_Detection_PostProcess with its options as attributes (max_detections,
///    max_classes_per_detection, detections_per_class, use_regular_nms, num_classes as ints;
///    nms_score_threshold, nms_iou_threshold, y_scale, x_scale, h_scale, w_scale as floats):
///    center-size decode in double, scores >= threshold, IoU > threshold suppresses, fast
///    (class-agnostic over each anchor's best classes) or regular (per class) NMS, background
///    column 0 skipped when there are C + 1 columns, unused output slots zero. Equal scores are
///    ordered by lower index (TFLite's partial sorts leave that order unspecified).
///  - furiosa::TFLiteTransposeConv (float32 X [N, H, W, I], W [O, KH, KW, I], optional B [O] ->
///    float32 [N, OH, OW, O]): attributes strides [sh, sw], pads [pad_h, pad_w] (TFLite's leading
///    pads), output_shape [N, OH, OW, O], activation_min / activation_max (floats). TFLite's
///    float32 TRANSPOSE_CONV as reference_ops::TransposeConv computes it
///    (tensorflow/lite/kernels/internal/reference/transpose_conv.h): out[n, y*sh - pad_h + ky,
///    x*sw - pad_w + kx, o] += X[n, y, x, i] * W[o, ky, kx, i] from +0 in the reference's scatter
///    order (input row, column, channel), then + B[o] and min(max(v, activation_min),
///    activation_max).
///  - furiosa::TFLiteFloat (float32 A[, B] -> float32, numpy broadcasting): TFLite's float32
///    arithmetic as TensorFlow Lite 2.14's reference kernels write it (reference/{add,sub,mul,
///    div,prelu,leaky_relu,hard_swish}.h, kernels/squared_difference.cc); attribute kind add /
///    sub / mul / div (then min(max(v, activation_min), activation_max)), squared_difference
///    ((a - b) * (a - b)), prelu (a >= 0 ? a : a * B), leaky_relu (one input, attribute alpha:
///    x > 0 ? x : x * alpha), hard_swish (one input: x * min(6, max(0, x + 3)) / 6).
std::vector<std::string> cpu_op_list();

/// The "furiosa" domain operators run_cpu_op runs (listed above, after cpu_op_list()'s), as
/// qualified op types ("furiosa::QuantizedMean"), in the library's table order.
std::vector<std::string> furiosa_op_list();

}  // namespace furiosa::host
