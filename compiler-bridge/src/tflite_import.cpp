// TFLite FlatBuffer -> graph IR (see tflite_import.h for the mapping).
//
// Sources of the arithmetic (all TFLite's, for bit-exact TFLite semantics):
//  - multipliers: tflite::QuantizeMultiplier on the double-precision real multiplier
//    input_scale * filter_scale[c] / output_scale (conv, depthwise, fully connected, per channel
//    for int8 weights), input_scale / output_scale (QUANTIZE between 8-bit types);
//  - ADD: left_shift 20, input multipliers scale_i / (2 max(scale_a, scale_b)) and output
//    multiplier 2 max(scale_a, scale_b) / (2^20 output_scale) (tensorflow/lite/kernels/add.cc);
//  - fused activations: CalculateActivationRangeQuantized (zero_point + round(f / scale), clamped
//    to the type's range);
//  - CONCATENATION of uint8 inputs with other parameters than the output's: the float rescaling
//    of reference_ops::ConcatenationWithScaling (round(q * s + b) with s = in_scale / out_scale,
//    b = -in_zero_point * s, rounded half away from zero), as a 256-entry table;
//  - AVERAGE_POOL_2D: reference_ops::AveragePool's integer average (furiosa::QuantizedAveragePool);
//  - RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR: Resize with tflite_arithmetic = 1, the float32
//    coordinates and uint8 truncation of reference_ops::ResizeBilinear<T>, the 10-bit fixed point
//    of ResizeBilinearInteger for int8, reference_ops::GetNearestNeighbor (host/cpu_ops.h);
//  - ARG_MAX / ARG_MIN: ArgMax / ArgMin on the stored values, first index on ties
//    (reference_ops::ArgMinMax keeps the first extreme);
//  - MEAN on uint8/int8: reference_ops::QuantizedMeanOrSum (kernels/reduce.cc, EvalQuantizedMean):
//    QuantizeMultiplier(in_scale / out_scale) with 1/count folded into the multiplier
//    (furiosa::QuantizedMean); float32: ReduceMean;
//  - LOGISTIC on uint8/int8: the lookup table of kernels/activations.cc (float32 sigmoid of the
//    dequantized value, rounded half away from zero to the output's 1/256 steps);
//  - TFLite_Detection_PostProcess (custom): kernels/detection_postprocess.cc
//    (furiosa::TFLiteDetectionPostProcess, host/cpu_ops.h);
//  - SHAPE, STRIDED_SLICE, PACK, TILE, GATHER, CAST, FILL, RANGE: ONNX Shape (a constant here:
//    TFLite shapes are static), Slice (+ Reshape for shrink_axis_mask), Reshape + Concat, Tile,
//    Gather, Cast, Expand, Range; on constant inputs the compiler's fold_constants() evaluates
//    them once (passes.cpp), on data they run as those operators.
// The tables and multipliers are computed here; the device only knows the generic fixed-point
// rule (isa.h).
#include "furiosa/compiler/tflite_import.h"

#include <fmt/format.h>
#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/flexbuffers.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"
#include "furiosa/device/isa.h"
#include "furiosa/host/lookup_table.h"
#include "tflite_subset_generated.h"

namespace furiosa::compiler {
namespace fb = furiosa::tflite_fb;

namespace {

// Builtin operator names by code (the public BuiltinOperator enum, codes 0..145).
constexpr std::array<const char*, 146> kBuiltinNames = {
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE",
    "DEQUANTIZE", "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP",
    "L2_NORMALIZATION", "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "LSH_PROJECTION",
    "LSTM", "MAX_POOL_2D", "MUL", "RELU", "RELU_N1_TO_1", "RELU6", "RESHAPE", "RESIZE_BILINEAR",
    "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "SVDF", "TANH", "CONCAT_EMBEDDINGS", "SKIP_GRAM", "CALL",
    "CUSTOM", "EMBEDDING_LOOKUP_SPARSE", "PAD", "UNIDIRECTIONAL_SEQUENCE_RNN", "GATHER",
    "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE", "MEAN", "SUB", "DIV", "SQUEEZE",
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE", "BIDIRECTIONAL_SEQUENCE_RNN", "EXP", "TOPK_V2",
    "SPLIT", "LOG_SOFTMAX", "DELEGATE", "BIDIRECTIONAL_SEQUENCE_LSTM", "CAST", "PRELU", "MAXIMUM",
    "ARG_MAX", "MINIMUM", "LESS", "NEG", "PADV2", "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "SELECT",
    "SLICE", "SIN", "TRANSPOSE_CONV", "SPARSE_TO_DENSE", "TILE", "EXPAND_DIMS", "EQUAL", "NOT_EQUAL",
    "LOG", "SUM", "SQRT", "RSQRT", "SHAPE", "POW", "ARG_MIN", "FAKE_QUANT", "REDUCE_PROD",
    "REDUCE_MAX", "PACK", "LOGICAL_OR", "ONE_HOT", "LOGICAL_AND", "LOGICAL_NOT", "UNPACK",
    "REDUCE_MIN", "FLOOR_DIV", "REDUCE_ANY", "SQUARE", "ZEROS_LIKE", "FILL", "FLOOR_MOD", "RANGE",
    "RESIZE_NEAREST_NEIGHBOR", "LEAKY_RELU", "SQUARED_DIFFERENCE", "MIRROR_PAD", "ABS", "SPLIT_V",
    "UNIQUE", "CEIL", "REVERSE_V2", "ADD_N", "GATHER_ND", "COS", "WHERE", "RANK", "ELU",
    "REVERSE_SEQUENCE", "MATRIX_DIAG", "QUANTIZE", "MATRIX_SET_DIAG", "ROUND", "HARD_SWISH", "IF",
    "WHILE", "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "SCATTER_ND", "SELECT_V2",
    "DENSIFY", "SEGMENT_SUM", "BATCH_MATMUL", "PLACEHOLDER_FOR_GREATER_OP_CODES", "CUMSUM",
    "CALL_ONCE", "BROADCAST_TO", "RFFT2D", "CONV_3D", "IMAG", "REAL", "COMPLEX_ABS", "HASHTABLE",
    "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE", "REDUCE_ALL", "CONV_3D_TRANSPOSE",
    "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "BROADCAST_ARGS"};

// Builtin codes the importer maps.
enum Builtin : int {
  kAdd = 0,
  kAveragePool2d = 1,
  kConcatenation = 2,
  kConv2d = 3,
  kDepthwiseConv2d = 4,
  kDequantize = 6,
  kFullyConnected = 9,
  kLogistic = 14,
  kMaxPool2d = 17,
  kReshape = 22,
  kResizeBilinear = 23,
  kSoftmax = 25,
  kCustom = 32,
  kPad = 34,
  kGather = 36,
  kMean = 40,
  kStridedSlice = 45,
  kCast = 53,
  kArgMax = 56,
  kTile = 69,
  kShape = 77,
  kArgMin = 79,
  kPack = 83,
  kFill = 94,
  kRange = 96,
  kResizeNearestNeighbor = 97,
  kQuantize = 114,
};
constexpr std::array<int, 26> kSupported = {
    kAdd,    kAveragePool2d, kConcatenation, kConv2d, kDepthwiseConv2d,       kDequantize, kFullyConnected,
    kMaxPool2d, kReshape,    kResizeBilinear, kSoftmax, kPad,                 kArgMax,     kArgMin,
    kResizeNearestNeighbor, kQuantize, kMean, kShape, kStridedSlice,         kPack,       kTile,
    kGather, kCast,          kFill,          kRange,  kLogistic};

// Custom operators the importer maps (OperatorCode.custom_code of a CUSTOM operator).
constexpr const char* kDetectionPostProcess = "TFLite_Detection_PostProcess";

bool is_supported(int code) { return std::find(kSupported.begin(), kSupported.end(), code) != kSupported.end(); }

std::optional<DType> dtype_of(fb::TensorType t) {
  switch (t) {
    case fb::TensorType::FLOAT32: return DType::Float32;
    case fb::TensorType::UINT8: return DType::UInt8;
    case fb::TensorType::INT8: return DType::Int8;
    case fb::TensorType::INT32: return DType::Int32;
    case fb::TensorType::INT64: return DType::Int64;
    default: return std::nullopt;
  }
}

std::string type_name(fb::TensorType t) {
  const char* n = fb::EnumNameTensorType(t);
  return n && *n ? n : fmt::format("type {}", static_cast<int>(t));
}

bool is_quantized(DType d) { return d == DType::UInt8 || d == DType::Int8; }

// std::round of v as int32, saturated (v may be huge for extreme scales; the results are clamped
// to an 8-bit range afterwards anyway).
std::int32_t round_to_int(double v) {
  return static_cast<std::int32_t>(std::clamp(std::round(v), -1.0e9, 1.0e9));
}

// True when the NCHW and NHWC orders of a 4-D shape [N, H, W, C] list the elements identically
// (one channel, or one pixel), so a Reshape converts between them.
bool orders_coincide(const Shape& nhwc) { return nhwc[3] == 1 || nhwc[1] * nhwc[2] == 1; }

// NHWC axis -> NCHW axis.
std::int64_t nchw_axis(std::int64_t nhwc_axis) {
  static constexpr std::array<std::int64_t, 4> map = {0, 2, 3, 1};
  return map[static_cast<std::size_t>(nhwc_axis)];
}

// Per-tensor quantization of an activation.
struct Quant {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
};

// Quantization of a (weight) tensor: one entry, or one per index of `dim`.
struct ChannelQuant {
  std::vector<float> scales;
  std::vector<std::int64_t> zero_points;
  int dim = 0;
};

// Everything the importer knows about one TFLite tensor.
struct TInfo {
  std::string name;
  fb::TensorType type = fb::TensorType::FLOAT32;
  std::optional<DType> dtype;
  Shape shape;                               // the model's own shape (NHWC for images)
  const fb::QuantizationParameters* q = nullptr;
  const flatbuffers::Vector<std::uint8_t>* data = nullptr;  // constant data, or null
  int model = -1;                            // IR value in the model's layout
  int nchw = -1;                             // IR value in NCHW (4-D tensors only)
};

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::ModelLoadFailed,
                fmt::format("model file '{}' does not exist or is not a file", path.string()),
                ErrorSubject::of_file(path.string()));
  }
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (!f) {
    throw Error(ErrorCode::ModelLoadFailed, fmt::format("cannot read model file '{}'", path.string()),
                ErrorSubject::of_file(path.string()));
  }
  return ss.str();
}

class Importer {
 public:
  Importer(const fb::Model& model, std::string source, const LoadLimits& limits)
      : m_(model), source_(std::move(source)), limits_(limits) {}

  Graph run() {
    if (m_.version() != 3) {
      load_failed(fmt::format("TFLite schema version {} is not supported (version 3 only)", m_.version()));
    }
    if (!m_.subgraphs() || m_.subgraphs()->size() == 0) load_failed("the model has no subgraph");
    sg_ = m_.subgraphs()->Get(0);
    g_.name = sg_->name() && sg_->name()->size() ? sg_->name()->str() : "tflite";
    read_tensors();
    check_operators();
    if (sg_->inputs()) {
      for (int t : *sg_->inputs()) add_graph_input(tensor_index(t, "subgraph input"));
    }
    if (sg_->operators()) {
      for (flatbuffers::uoffset_t i = 0; i < sg_->operators()->size(); ++i) {
        const fb::Operator& op = *sg_->operators()->Get(i);
        op_index_ = static_cast<int>(i);
        code_ = builtin_code(op);
        op_name_ = code_ == kCustom ? custom_code(op) : tflite_builtin_name(code_);
        map_operator(op);
      }
    }
    op_index_ = -1;
    if (!sg_->outputs() || sg_->outputs()->size() == 0) load_failed("subgraph 0 has no outputs");
    for (int t : *sg_->outputs()) {
      const int ti = tensor_index(t, "subgraph output");
      if (t_[ti].model < 0 && t_[ti].nchw < 0 && !t_[ti].data) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("{}: output tensor '{}' is produced by no operator", source_, t_[ti].name));
      }
      const int v = model_view(ti);
      if (std::find(g_.outputs.begin(), g_.outputs.end(), v) == g_.outputs.end()) g_.outputs.push_back(v);
    }
    return std::move(g_);
  }

 private:
  // ---- errors -----------------------------------------------------------------------------------
  [[noreturn]] void load_failed(const std::string& msg) const {
    throw Error(ErrorCode::ModelLoadFailed, fmt::format("{}: {}", source_, msg), ErrorSubject::of_file(source_));
  }
  std::string where() const {
    return op_index_ < 0 ? source_ : fmt::format("{}: operator {} ({})", source_, op_index_, op_name_);
  }
  [[noreturn]] void bad(const std::string& msg) const {
    throw Error(ErrorCode::IncompatibleModel, fmt::format("{}: {}", where(), msg));
  }
  [[noreturn]] void unsupported(const std::string& msg) const {
    throw Error(ErrorCode::UnsupportedOperator, fmt::format("{}: {}", where(), msg));
  }

  // ---- tensors ----------------------------------------------------------------------------------
  int tensor_index(int t, const char* what) const {
    if (t < 0 || static_cast<std::size_t>(t) >= t_.size()) {
      load_failed(fmt::format("{} refers to tensor {}, the subgraph has {}", what, t, t_.size()));
    }
    return t;
  }

  void read_tensors() {
    const auto* tensors = sg_->tensors();
    if (!tensors) load_failed("subgraph 0 has no tensor list");
    const auto* buffers = m_.buffers();
    for (flatbuffers::uoffset_t i = 0; i < tensors->size(); ++i) {
      const fb::Tensor& t = *tensors->Get(i);
      TInfo info;
      info.name = t.name() && t.name()->size() ? t.name()->str() : fmt::format("tensor_{}", i);
      info.type = t.type();
      info.dtype = dtype_of(t.type());
      if (t.shape()) info.shape.assign(t.shape()->begin(), t.shape()->end());
      info.q = t.quantization();
      if (t.buffer() != 0) {
        if (!buffers || t.buffer() >= buffers->size()) {
          load_failed(fmt::format("tensor '{}' refers to buffer {}, the model has {}", info.name, t.buffer(),
                                  buffers ? buffers->size() : 0));
        }
        const fb::Buffer& b = *buffers->Get(t.buffer());
        if (b.offset() > 1 || b.size() > 0) {
          bad(fmt::format("tensor '{}' keeps its data outside the FlatBuffer (offset {}), which is not supported",
                          info.name, b.offset()));
        }
        if (b.data() && b.data()->size() > 0) info.data = b.data();
      }
      if (t.sparsity()) bad(fmt::format("tensor '{}' is sparse, which is not supported", info.name));
      for (auto d : info.shape) {
        if (d < 0) bad(fmt::format("tensor '{}' has a negative dim in {}", info.name, shape_to_string(info.shape)));
      }
      // Declared sizes checked before anything is allocated: rank, elements and bytes within the
      // limits, and a buffer holding exactly the bytes the shape needs.
      if (info.dtype) {
        std::uint64_t bytes = 0;
        try {
          bytes = checked_tensor_bytes(*info.dtype, info.shape, limits_, info.name, ErrorCode::IncompatibleModel);
        } catch (const Error& e) {
          bad(e.message());
        }
        if (info.data && info.data->size() != bytes) {
          bad(fmt::format("tensor '{}' {} {} has a buffer of {} bytes, its shape needs {}", info.name,
                          dtype_name(*info.dtype), shape_to_string(info.shape), info.data->size(), bytes));
        }
      } else if (info.shape.size() > limits_.max_rank) {
        bad(fmt::format("tensor '{}' has rank {}, more than the limit of {}", info.name, info.shape.size(),
                        limits_.max_rank));
      }
      if (info.data) {
        constant_bytes_ += info.data->size();
        if (constant_bytes_ > limits_.max_total_bytes) {
          bad(fmt::format("constant data passes the limit of {} bytes at tensor '{}'", limits_.max_total_bytes,
                          info.name));
        }
      }
      t_.push_back(std::move(info));
    }
  }

  // The custom_code of a CUSTOM operator ("" when absent).
  std::string custom_code(const fb::Operator& op) const {
    const fb::OperatorCode& c = *m_.operator_codes()->Get(op.opcode_index());  // checked by builtin_code
    return c.custom_code() ? c.custom_code()->str() : "";
  }

  int builtin_code(const fb::Operator& op) const {
    const auto* codes = m_.operator_codes();
    if (!codes || op.opcode_index() >= codes->size()) {
      load_failed(fmt::format("operator {} has opcode index {}, the model has {} operator codes", op_index_,
                              op.opcode_index(), codes ? codes->size() : 0));
    }
    const fb::OperatorCode& c = *codes->Get(op.opcode_index());
    // Files from before code 127 only fill the int8 field; newer ones fill both.
    return std::max<int>(c.deprecated_builtin_code(), c.builtin_code());
  }

  // Every operator outside the supported set, listed in one error.
  void check_operators() const {
    if (!sg_->operators()) return;
    std::vector<std::string> bad_ops;
    for (flatbuffers::uoffset_t i = 0; i < sg_->operators()->size(); ++i) {
      const fb::Operator& op = *sg_->operators()->Get(i);
      const int code = builtin_code(op);
      if (is_supported(code)) continue;
      if (code == kCustom && custom_code(op) == kDetectionPostProcess) continue;
      std::string what = fmt::format("operator {}: {} (builtin code {})", i, tflite_builtin_name(code), code);
      if (code == kCustom) {
        const fb::OperatorCode& c = *m_.operator_codes()->Get(op.opcode_index());
        what += fmt::format(", custom code '{}'", c.custom_code() ? c.custom_code()->str() : "");
      }
      bad_ops.push_back(what);
    }
    if (bad_ops.empty()) return;
    std::string msg = fmt::format("{}: {} TFLite operator(s) cannot run:", source_, bad_ops.size());
    for (const auto& b : bad_ops) msg += "\n  " + b;
    msg += "\nsupported TFLite operators:";
    for (const auto& s : tflite_supported_operators()) msg += " " + s;
    throw Error(ErrorCode::UnsupportedOperator, msg);
  }

  const TInfo& info(int t) const { return t_[static_cast<std::size_t>(t)]; }
  TInfo& info(int t) { return t_[static_cast<std::size_t>(t)]; }

  DType dtype(int t) const {
    const TInfo& ti = info(t);
    if (!ti.dtype) {
      bad(fmt::format("tensor '{}' has element type {}, which is not supported (float32, uint8, int8, int32, "
                      "int64)", ti.name, type_name(ti.type)));
    }
    return *ti.dtype;
  }

  // The constant data of tensor t as a host tensor in the model's layout.
  Tensor constant_tensor(int t) const {
    const TInfo& ti = info(t);
    const DType d = dtype(t);
    const auto need = static_cast<std::size_t>(element_count(ti.shape)) * dtype_size(d);  // checked in read_tensors
    if (!ti.data || ti.data->size() != need) {
      bad(fmt::format("constant tensor '{}' {} {} holds {} bytes, expected {}", ti.name, dtype_name(d),
                      shape_to_string(ti.shape), ti.data ? ti.data->size() : 0, need));
    }
    Tensor out(d, ti.shape);
    if (out.size_bytes() > 0) std::memcpy(out.bytes().data(), ti.data->data(), out.size_bytes());
    return out;
  }

  ChannelQuant channel_quant(int t) const {
    const TInfo& ti = info(t);
    ChannelQuant q;
    if (!ti.q || !ti.q->scale() || ti.q->scale()->size() == 0) {
      bad(fmt::format("tensor '{}' has no quantization parameters", ti.name));
    }
    q.scales.assign(ti.q->scale()->begin(), ti.q->scale()->end());
    if (ti.q->zero_point() && ti.q->zero_point()->size() > 0) {
      // Copied byte-wise: converters (e.g. TOCO) leave int64 vectors only 4-byte aligned, and the
      // verifier checks only the alignment of a vector's length field.
      const auto* zp = ti.q->zero_point();
      q.zero_points.resize(zp->size());
      std::memcpy(q.zero_points.data(), zp->Data(), zp->size() * sizeof(std::int64_t));
    } else {
      q.zero_points.assign(q.scales.size(), 0);
    }
    if (q.zero_points.size() != q.scales.size()) {
      bad(fmt::format("tensor '{}' has {} scales and {} zero points", ti.name, q.scales.size(), q.zero_points.size()));
    }
    q.dim = ti.q->quantized_dimension();
    for (float s : q.scales) {
      if (!(s > 0.0f) || !std::isfinite(s)) bad(fmt::format("tensor '{}' has the scale {}", ti.name, s));
    }
    const auto [lo, hi] = isa::quant_range(dtype(t));
    for (auto z : q.zero_points) {
      if (z < lo || z > hi) bad(fmt::format("tensor '{}' has the zero point {} outside its type's range", ti.name, z));
    }
    return q;
  }

  // Per-tensor quantization of an 8-bit activation.
  Quant quant(int t) const {
    const ChannelQuant q = channel_quant(t);
    if (q.scales.size() != 1) {
      bad(fmt::format("tensor '{}' is quantized per channel ({} scales); activations must be quantized per tensor",
                      info(t).name, q.scales.size()));
    }
    return {q.scales[0], static_cast<std::int32_t>(q.zero_points[0])};
  }

  // ---- values and nodes -------------------------------------------------------------------------
  std::string unique_name(const std::string& name) {
    if (names_.insert(name).second) return name;
    for (int k = 1;; ++k) {
      std::string candidate = fmt::format("{}#{}", name, k);
      if (names_.insert(candidate).second) return candidate;
    }
  }

  int add_value(const std::string& name, DType d, Shape shape, std::string format = {}) {
    Value v;
    v.name = unique_name(name);
    v.dtype = d;
    v.dim_params.assign(shape.size(), "");
    v.shape = std::move(shape);
    v.has_shape = true;
    v.format = std::move(format);
    g_.values.push_back(std::move(v));
    return static_cast<int>(g_.values.size() - 1);
  }

  int add_constant(const std::string& name, Tensor t) {
    const int id = add_value(name, t.dtype(), t.shape());
    g_.values[static_cast<std::size_t>(id)].constant = std::move(t);
    return id;
  }

  int scale_constant(const std::string& name, const std::vector<float>& scales) {
    Tensor t(DType::Float32, scales.size() == 1 ? Shape{} : Shape{static_cast<std::int64_t>(scales.size())});
    std::copy(scales.begin(), scales.end(), t.as<float>().begin());
    return add_constant(name, std::move(t));
  }

  int zero_point_constant(const std::string& name, DType d, const std::vector<std::int64_t>& zps) {
    Tensor t(d, zps.size() == 1 ? Shape{} : Shape{static_cast<std::int64_t>(zps.size())});
    for (std::size_t i = 0; i < zps.size(); ++i) {
      if (d == DType::UInt8) t.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(zps[i]);
      else t.as<std::int8_t>()[i] = static_cast<std::int8_t>(zps[i]);
    }
    return add_constant(name, std::move(t));
  }

  int shape_constant(const std::string& name, const Shape& shape) {
    Tensor t(DType::Int64, {static_cast<std::int64_t>(shape.size())});
    std::copy(shape.begin(), shape.end(), t.as<std::int64_t>().begin());
    return add_constant(name, std::move(t));
  }

  void add_node(const std::string& op_type, const std::string& domain, std::vector<int> inputs,
                std::vector<int> outputs, std::map<std::string, Attribute> attributes,
                const std::string& suffix = {}) {
    Node n;
    n.op_type = op_type;
    n.domain = domain;
    n.index = op_index_;
    n.name = unique_name(op_index_ < 0 ? fmt::format("tflite{}", suffix)
                                       : fmt::format("{}#{}{}", op_name_, op_index_, suffix));
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    n.attributes = std::move(attributes);
    g_.nodes.push_back(std::move(n));
  }

  // ---- layouts ----------------------------------------------------------------------------------
  Shape nchw_shape(int t) const {
    const Shape& s = info(t).shape;
    return {s[0], s[3], s[1], s[2]};
  }

  // Tensor t in the model's own layout (NHWC for 4-D).
  int model_view(int t) {
    TInfo& ti = info(t);
    if (ti.model >= 0) return ti.model;
    if (ti.data) {
      ti.model = add_constant(ti.name, constant_tensor(t));
      return ti.model;
    }
    if (ti.nchw < 0) bad(fmt::format("tensor '{}' is read before any operator produces it", ti.name));
    const int v = add_value(ti.name, dtype(t), ti.shape, "NHWC");
    if (orders_coincide(ti.shape)) {
      add_node("Reshape", "", {ti.nchw, shape_constant(ti.name + "/nhwc_shape", ti.shape)}, {v}, {}, "/to_nhwc");
    } else {
      add_node("Transpose", "", {ti.nchw}, {v}, {{"perm", std::vector<std::int64_t>{0, 2, 3, 1}}}, "/to_nhwc");
    }
    info(t).model = v;
    return v;
  }

  // Tensor t (4-D) in NCHW.
  int nchw_view(int t) {
    TInfo& ti = info(t);
    if (ti.shape.size() != 4) bad(fmt::format("tensor '{}' must be 4-D (NHWC), has shape {}", ti.name, shape_to_string(ti.shape)));
    if (ti.nchw >= 0) return ti.nchw;
    if (ti.data) {
      const Tensor m = constant_tensor(t);
      Tensor n(m.dtype(), nchw_shape(t));
      const std::size_t es = dtype_size(m.dtype());
      const std::int64_t N = ti.shape[0], H = ti.shape[1], W = ti.shape[2], C = ti.shape[3];
      for (std::int64_t b = 0; b < N; ++b)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t w = 0; w < W; ++w)
            for (std::int64_t c = 0; c < C; ++c)
              std::memcpy(n.bytes().data() + static_cast<std::size_t>(((b * C + c) * H + h) * W + w) * es,
                          m.bytes().data() + static_cast<std::size_t>(((b * H + h) * W + w) * C + c) * es, es);
      ti.nchw = add_constant(ti.name + "/nchw", std::move(n));
      return ti.nchw;
    }
    const int src = model_view(t);
    // Always a Transpose (even where a Reshape would do): at a graph input the compiler turns it
    // into the host Lower step reading NHWC.
    const int v = add_value(info(t).name + "/nchw", dtype(t), nchw_shape(t));
    add_node("Transpose", "", {src}, {v}, {{"perm", std::vector<std::int64_t>{0, 3, 1, 2}}}, "/to_nchw");
    info(t).nchw = v;
    return v;
  }

  // Tensor t as an operand of an element-wise or flattening operator: the NCHW view when that is
  // the only one and its element order equals the model's, else the model's layout.
  int ordered_view(int t) {
    const TInfo& ti = info(t);
    if (ti.model < 0 && ti.nchw >= 0 && orders_coincide(ti.shape)) return ti.nchw;
    return model_view(t);
  }

  // A new IR value for the output tensor t in NCHW / in the model's layout.
  int output_nchw(int t) {
    if (info(t).shape.size() != 4) bad(fmt::format("output '{}' must be 4-D (NHWC)", info(t).name));
    const int v = add_value(info(t).name + "/nchw", dtype(t), nchw_shape(t));
    info(t).nchw = v;
    return v;
  }
  int output_model(int t) {
    const int v = add_value(info(t).name, dtype(t), info(t).shape, info(t).shape.size() == 4 ? "NHWC" : "");
    info(t).model = v;
    return v;
  }

  void add_graph_input(int t) {
    const TInfo& ti = info(t);
    if (ti.data) return;  // a constant listed as input: it stays a constant
    const DType d = dtype(t);
    const int v = add_value(ti.name, d, ti.shape, ti.shape.size() == 4 ? "NHWC" : "");
    info(t).model = v;
    g_.inputs.push_back(v);
  }

  // ---- operator helpers -------------------------------------------------------------------------
  std::vector<int> op_inputs(const fb::Operator& op) const {
    std::vector<int> out;
    if (op.inputs()) {
      for (int t : *op.inputs()) out.push_back(t < 0 ? -1 : tensor_index(t, "operator input"));
    }
    return out;
  }
  std::vector<int> op_outputs(const fb::Operator& op) const {
    std::vector<int> out;
    if (op.outputs()) {
      for (int t : *op.outputs()) out.push_back(tensor_index(t, "operator output"));
    }
    return out;
  }
  void require_arity(const std::vector<int>& in, std::size_t min_in, std::size_t max_in, const std::vector<int>& out) const {
    if (in.size() < min_in || in.size() > max_in || out.size() != 1) {
      bad(fmt::format("has {} inputs and {} outputs; expected {}..{} inputs and 1 output", in.size(), out.size(),
                      min_in, max_in));
    }
    for (std::size_t i = 0; i < min_in; ++i) {
      if (in[i] < 0) bad(fmt::format("required input {} is missing", i));
    }
  }

  // The compute operators take 8-bit activations of one type.
  void require_quantized(std::initializer_list<int> tensors) const {
    std::optional<DType> first;
    for (int t : tensors) {
      const DType d = dtype(t);
      if (!is_quantized(d)) {
        unsupported(fmt::format("tensor '{}' is {}; only uint8/int8 quantized {} is supported", info(t).name,
                                dtype_name(d), op_name_));
      }
      if (first && *first != d) {
        bad(fmt::format("mixes {} and {} tensors ('{}')", dtype_name(*first), dtype_name(d), info(t).name));
      }
      first = d;
    }
  }

  void require_constant(int t, const char* what) const {
    if (!info(t).data) bad(fmt::format("{} '{}' must be a constant", what, info(t).name));
  }

  // A weight tensor the NPU can take: a constant of uint8 or int8.
  void require_quantized_weight(int w) const {
    require_constant(w, "weight");
    const DType wd = dtype(w);
    if (!is_quantized(wd)) {
      unsupported(fmt::format("weight '{}' is {}; only uint8/int8 weights are supported",
                              info(w).name, dtype_name(wd)));
    }
  }

  // The output clamp of a fused activation (TFLite CalculateActivationRangeQuantized).
  std::array<std::int32_t, 2> activation_range(fb::ActivationFunctionType act, int y) const {
    const auto [qmin, qmax] = isa::quant_range(dtype(y));
    const Quant q = quant(y);
    auto quantize = [&](float f) { return q.zero_point + round_to_int(std::round(f / q.scale)); };
    switch (act) {
      case fb::ActivationFunctionType::NONE: return {qmin, qmax};
      case fb::ActivationFunctionType::RELU: return {std::max(qmin, quantize(0.0f)), qmax};
      case fb::ActivationFunctionType::RELU6: return {std::max(qmin, quantize(0.0f)), std::min(qmax, quantize(6.0f))};
      case fb::ActivationFunctionType::RELU_N1_TO_1:
        return {std::max(qmin, quantize(-1.0f)), std::min(qmax, quantize(1.0f))};
      default: break;
    }
    const char* name = fb::EnumNameActivationFunctionType(act);
    unsupported(fmt::format("fused activation {} is not supported (NONE, RELU, RELU_N1_TO_1, RELU6)",
                            name && *name ? name : std::to_string(static_cast<int>(act))));
  }

  // Explicit pads and output size of one spatial dim (TFLite ComputePaddingHeightWidth: SAME puts
  // the odd padding element at the end).
  struct Dim {
    std::int64_t before = 0, after = 0, out = 0;
  };
  Dim window_dim(fb::Padding padding, std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dilation) const {
    if (stride < 1 || dilation < 1 || k < 1) {
      bad(fmt::format("stride {}, dilation {} and window {} must be >= 1", stride, dilation, k));
    }
    const std::int64_t eff = (k - 1) * dilation + 1;
    Dim d;
    if (padding == fb::Padding::SAME) {
      d.out = (in + stride - 1) / stride;
      const std::int64_t total = std::max<std::int64_t>(0, (d.out - 1) * stride + eff - in);
      d.before = total / 2;
      d.after = total - d.before;
    } else if (padding == fb::Padding::VALID) {
      d.out = (in - eff + stride) / stride;
    } else {
      bad(fmt::format("unknown padding {}", static_cast<int>(padding)));
    }
    if (d.out < 1) bad(fmt::format("window of extent {} does not fit the input extent {}", eff, in));
    return d;
  }

  void check_output_shape(int y, const Shape& expected_nhwc) const {
    if (info(y).shape != expected_nhwc) {
      bad(fmt::format("output '{}' has shape {}, the operator computes {}", info(y).name,
                      shape_to_string(info(y).shape), shape_to_string(expected_nhwc)));
    }
  }

  // The fixed-point multiplier attributes of a requantizing node: one multiplier per scale of
  // the weights (TFLite's double-precision effective scale, QuantizeMultiplier).
  void add_fixed_point(std::map<std::string, Attribute>& attrs, const Quant& x, const std::vector<float>& w_scales,
                       const Quant& y, std::array<std::int32_t, 2> range) const {
    std::vector<std::int64_t> mult, shift;
    for (float ws : w_scales) {
      const double real = static_cast<double>(x.scale) * static_cast<double>(ws) / static_cast<double>(y.scale);
      const isa::QuantizedMultiplier m = isa::quantize_multiplier(real);
      mult.push_back(m.multiplier);
      shift.push_back(m.shift);
    }
    attrs["fixed_point_multiplier"] = mult;
    attrs["fixed_point_shift"] = shift;
    attrs["output_min"] = std::int64_t{range[0]};
    attrs["output_max"] = std::int64_t{range[1]};
  }

  // Binds value v (already computed) to output tensor y, or clamps it into y's value first when
  // `range` is narrower than the type's range (an activation of an operator without its own
  // requantization: pools, concatenation). `nchw` says which layout v is in.
  void bind_clamped(int v, int y, bool nchw, std::array<std::int32_t, 2> range) {
    const DType d = dtype(y);
    const auto full = isa::quant_range(d);
    if (range == full) {
      if (nchw) info(y).nchw = v;
      else info(y).model = v;
      return;
    }
    const Quant q = quant(y);
    const host::LookupTable table =
        host::build_lookup_table(d, d, [&](std::int32_t x) { return std::clamp(x, range[0], range[1]); });
    const int out = nchw ? output_nchw(y) : output_model(y);
    add_node("Requantize", "furiosa", {v}, {out}, requantize_attrs(q, q, d, table), "/activation");
  }

  // The attributes of a furiosa::Requantize node that maps x to y by `table`.
  std::map<std::string, Attribute> requantize_attrs(const Quant& x, const Quant& y, DType y_dtype,
                                                    const host::LookupTable& table) const {
    return {{"x_scale", x.scale},
            {"x_zero_point", std::int64_t{x.zero_point}},
            {"y_scale", y.scale},
            {"y_zero_point", std::int64_t{y.zero_point}},
            {"y_dtype", std::int64_t{static_cast<int>(y_dtype)}},
            {"table", std::vector<std::int64_t>(table.begin(), table.end())}};
  }

  // ---- operators --------------------------------------------------------------------------------
  void map_operator(const fb::Operator& op) {
    switch (code_) {
      case kConv2d: return conv(op, false);
      case kDepthwiseConv2d: return conv(op, true);
      case kFullyConnected: return fully_connected(op);
      case kAdd: return add(op);
      case kMaxPool2d: return pool(op, true);
      case kAveragePool2d: return pool(op, false);
      case kReshape: return reshape(op);
      case kSoftmax: return softmax(op);
      case kLogistic: return logistic(op);
      case kConcatenation: return concatenation(op);
      case kPad: return pad(op);
      case kQuantize: return quantize(op);
      case kDequantize: return dequantize(op);
      case kResizeBilinear: return resize(op, true);
      case kResizeNearestNeighbor: return resize(op, false);
      case kArgMax: return arg_min_max(op, true);
      case kArgMin: return arg_min_max(op, false);
      case kMean: return mean(op);
      case kShape: return shape_op(op);
      case kStridedSlice: return strided_slice(op);
      case kPack: return pack(op);
      case kTile: return tile(op);
      case kGather: return gather(op);
      case kCast: return cast(op);
      case kFill: return fill(op);
      case kRange: return range(op);
      case kCustom:
        if (op_name_ == kDetectionPostProcess) return detection_postprocess(op);
        unsupported("is not supported");
      default: unsupported("is not supported");  // check_operators() already refused it
    }
  }

  void conv(const fb::Operator& op, bool depthwise) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 3, out);
    const int x = in[0], w = in[1], b = in.size() > 2 ? in[2] : -1, y = out[0];
    require_quantized({x, y});
    require_quantized_weight(w);
    const DType wd = dtype(w);
    const Shape& xs = info(x).shape;
    const Shape& ws = info(w).shape;
    if (xs.size() != 4 || ws.size() != 4) bad("input and weight must be 4-D (NHWC, OHWI / 1HWO)");
    fb::Padding padding = fb::Padding::SAME;
    std::int64_t sh = 1, sw = 1, dh = 1, dw = 1, multiplier = 0;
    fb::ActivationFunctionType act = fb::ActivationFunctionType::NONE;
    if (depthwise) {
      const auto* o = op.builtin_options_as_DepthwiseConv2DOptions();
      if (!o) bad("has no DepthwiseConv2DOptions");
      padding = o->padding(), sh = o->stride_h(), sw = o->stride_w(), dh = o->dilation_h_factor(),
      dw = o->dilation_w_factor(), multiplier = o->depth_multiplier(), act = o->fused_activation_function();
    } else {
      const auto* o = op.builtin_options_as_Conv2DOptions();
      if (!o) bad("has no Conv2DOptions");
      padding = o->padding(), sh = o->stride_h(), sw = o->stride_w(), dh = o->dilation_h_factor(),
      dw = o->dilation_w_factor(), act = o->fused_activation_function();
    }
    const std::int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3], kh = ws[1], kw = ws[2];
    std::int64_t M = 0, group = 1, cin = 0;
    if (depthwise) {
      M = ws[3];
      if (ws[0] != 1 || C < 1 || M % C != 0) {
        bad(fmt::format("weight {} does not fit {} input channels", shape_to_string(ws), C));
      }
      if (multiplier != 0 && multiplier != M / C) {
        bad(fmt::format("depth_multiplier {} does not match weight {} and {} input channels", multiplier,
                        shape_to_string(ws), C));
      }
      group = C;
      cin = 1;
    } else {
      M = ws[0];
      cin = ws[3];
      if (cin < 1 || C % cin != 0) bad(fmt::format("weight {} does not fit {} input channels", shape_to_string(ws), C));
      group = C / cin;
      if (M % group != 0) bad(fmt::format("{} output channels do not split into {} groups", M, group));
    }
    const Dim dy = window_dim(padding, H, kh, sh, dh), dx = window_dim(padding, W, kw, sw, dw);
    check_output_shape(y, {N, dy.out, dx.out, M});

    // Weights as OIHW ([M, C/group, kH, kW]).
    const Tensor wt = constant_tensor(w);
    Tensor oihw(wd, {M, cin, kh, kw});
    const auto* src = reinterpret_cast<const std::uint8_t*>(wt.bytes().data());
    auto* dst = reinterpret_cast<std::uint8_t*>(oihw.bytes().data());
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t i = 0; i < cin; ++i)
        for (std::int64_t r = 0; r < kh; ++r)
          for (std::int64_t s = 0; s < kw; ++s)
            dst[((m * cin + i) * kh + r) * kw + s] =
                depthwise ? src[(r * kw + s) * M + m] : src[((m * kh + r) * kw + s) * cin + i];

    const Quant xq = quant(x), yq = quant(y);
    ChannelQuant wq = channel_quant(w);
    const int wdim = depthwise ? 3 : 0;
    if (wq.scales.size() != 1) {
      if (static_cast<std::int64_t>(wq.scales.size()) != M || wq.dim != wdim) {
        bad(fmt::format("weight '{}' has {} scales along dim {}; expected 1 or {} along dim {}", info(w).name,
                        wq.scales.size(), wq.dim, M, wdim));
      }
    }
    require_symmetric_int8(w, wq);
    const std::string base = info(y).name;
    std::vector<int> inputs = {nchw_view(x),
                               scale_constant(base + "/x_scale", {xq.scale}),
                               zero_point_constant(base + "/x_zero_point", dtype(x), {xq.zero_point}),
                               add_constant(info(w).name + "/oihw", std::move(oihw)),
                               scale_constant(base + "/w_scale", wq.scales),
                               zero_point_constant(base + "/w_zero_point", wd, wq.zero_points),
                               scale_constant(base + "/y_scale", {yq.scale}),
                               zero_point_constant(base + "/y_zero_point", dtype(y), {yq.zero_point})};
    if (b >= 0) inputs.push_back(bias_constant(b, M));
    std::map<std::string, Attribute> attrs = {
        {"kernel_shape", std::vector<std::int64_t>{kh, kw}},
        {"strides", std::vector<std::int64_t>{sh, sw}},
        {"dilations", std::vector<std::int64_t>{dh, dw}},
        {"pads", std::vector<std::int64_t>{dy.before, dx.before, dy.after, dx.after}},
        {"group", group}};
    add_fixed_point(attrs, xq, wq.scales, yq, activation_range(act, y));
    add_node("QLinearConv", "", std::move(inputs), {output_nchw(y)}, std::move(attrs));
  }

  // int8 weights are symmetric in TFLite's quantization specification; the int8 reference
  // kernels never subtract a weight zero point.
  void require_symmetric_int8(int w, const ChannelQuant& wq) const {
    if (dtype(w) != DType::Int8) return;
    for (auto z : wq.zero_points) {
      if (z != 0) bad(fmt::format("int8 weight '{}' has the zero point {}; int8 weights must be symmetric (0)", info(w).name, z));
    }
  }

  int bias_constant(int b, std::int64_t channels) {
    require_constant(b, "bias");
    if (dtype(b) != DType::Int32 || info(b).shape != Shape{channels}) {
      bad(fmt::format("bias '{}' must be int32 [{}], is {} {}", info(b).name, channels, dtype_name(dtype(b)),
                      shape_to_string(info(b).shape)));
    }
    return add_constant(info(b).name, constant_tensor(b));
  }

  void fully_connected(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 3, out);
    const int x = in[0], w = in[1], b = in.size() > 2 ? in[2] : -1, y = out[0];
    require_quantized({x, y});
    require_quantized_weight(w);
    const DType wd = dtype(w);
    const auto* o = op.builtin_options_as_FullyConnectedOptions();
    const auto act = o ? o->fused_activation_function() : fb::ActivationFunctionType::NONE;
    if (o && o->weights_format() != fb::FullyConnectedOptionsWeightsFormat::DEFAULT) {
      bad("only the DEFAULT weights format is supported (not SHUFFLED4x16INT8)");
    }
    const Shape& ws = info(w).shape;
    if (ws.size() != 2) bad(fmt::format("weight must be 2-D [units, depth], is {}", shape_to_string(ws)));
    const std::int64_t units = ws[0], depth = ws[1];
    const std::int64_t total = element_count(info(x).shape);
    if (depth < 1 || total % depth != 0) bad(fmt::format("input {} does not split into rows of {}", shape_to_string(info(x).shape), depth));
    const std::int64_t batch = total / depth;

    int a = ordered_view(x);
    const Shape rows{batch, depth};
    if (g_.values[static_cast<std::size_t>(a)].shape != rows) {
      const int flat = add_value(info(x).name + "/rows", dtype(x), rows);
      add_node("Reshape", "", {a, shape_constant(info(x).name + "/rows_shape", rows)}, {flat}, {}, "/rows");
      a = flat;
    }
    // B = W^T: [depth, units].
    const Tensor wt = constant_tensor(w);
    Tensor bt(wd, {depth, units});
    const auto* src = reinterpret_cast<const std::uint8_t*>(wt.bytes().data());
    auto* dst = reinterpret_cast<std::uint8_t*>(bt.bytes().data());
    for (std::int64_t u = 0; u < units; ++u)
      for (std::int64_t k = 0; k < depth; ++k) dst[k * units + u] = src[u * depth + k];

    const Quant xq = quant(x), yq = quant(y);
    const ChannelQuant wq = channel_quant(w);
    if (wq.scales.size() != 1 && (static_cast<std::int64_t>(wq.scales.size()) != units || wq.dim != 0)) {
      bad(fmt::format("weight '{}' has {} scales along dim {}; expected 1 or {} along dim 0", info(w).name,
                      wq.scales.size(), wq.dim, units));
    }
    require_symmetric_int8(w, wq);
    const std::string base = info(y).name;
    std::vector<int> inputs = {a,
                               scale_constant(base + "/a_scale", {xq.scale}),
                               zero_point_constant(base + "/a_zero_point", dtype(x), {xq.zero_point}),
                               add_constant(info(w).name + "/transposed", std::move(bt)),
                               scale_constant(base + "/b_scale", wq.scales),
                               zero_point_constant(base + "/b_zero_point", wd, wq.zero_points),
                               scale_constant(base + "/y_scale", {yq.scale}),
                               zero_point_constant(base + "/y_zero_point", dtype(y), {yq.zero_point})};
    if (b >= 0) inputs.push_back(bias_constant(b, units));
    std::map<std::string, Attribute> attrs;
    add_fixed_point(attrs, xq, wq.scales, yq, activation_range(act, y));
    const Shape result{batch, units};
    if (info(y).shape == result) {
      add_node("QLinearMatMul", "", std::move(inputs), {output_model(y)}, std::move(attrs));
      return;
    }
    if (element_count(info(y).shape) != batch * units) {
      bad(fmt::format("output '{}' {} does not hold {} x {} values", info(y).name, shape_to_string(info(y).shape), batch, units));
    }
    const int mm = add_value(base + "/rows", dtype(y), result);
    add_node("QLinearMatMul", "", std::move(inputs), {mm}, std::move(attrs));
    add_node("Reshape", "", {mm, shape_constant(base + "/shape", info(y).shape)}, {output_model(y)}, {}, "/reshape");
  }

  void add(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 2, out);
    const int a = in[0], b = in[1], y = out[0];
    require_quantized({a, b, y});
    const auto* o = op.builtin_options_as_AddOptions();
    const auto act = o ? o->fused_activation_function() : fb::ActivationFunctionType::NONE;
    const Quant aq = quant(a), bq = quant(b), yq = quant(y);
    const bool nchw = info(a).shape.size() == 4 && info(a).shape == info(b).shape && info(a).shape == info(y).shape;
    const int av = nchw ? nchw_view(a) : model_view(a);
    const int bv = nchw ? nchw_view(b) : model_view(b);
    // tensorflow/lite/kernels/add.cc (8-bit): left_shift 20, operands brought to twice the larger
    // input scale, the sum back to the output scale.
    constexpr int kLeftShift = 20;
    const double twice_max = 2.0 * static_cast<double>(std::max(aq.scale, bq.scale));
    const auto ma = isa::quantize_multiplier(static_cast<double>(aq.scale) / twice_max);
    const auto mb = isa::quantize_multiplier(static_cast<double>(bq.scale) / twice_max);
    const auto my = isa::quantize_multiplier(twice_max / (static_cast<double>(1 << kLeftShift) * static_cast<double>(yq.scale)));
    const auto range = activation_range(act, y);
    const std::string base = info(y).name;
    add_node("QLinearAdd", "com.microsoft",
             {av, scale_constant(base + "/a_scale", {aq.scale}), zero_point_constant(base + "/a_zero_point", dtype(a), {aq.zero_point}),
              bv, scale_constant(base + "/b_scale", {bq.scale}), zero_point_constant(base + "/b_zero_point", dtype(b), {bq.zero_point}),
              scale_constant(base + "/y_scale", {yq.scale}), zero_point_constant(base + "/y_zero_point", dtype(y), {yq.zero_point})},
             {nchw ? output_nchw(y) : output_model(y)},
             {{"fixed_point_left_shift", std::int64_t{kLeftShift}},
              {"fixed_point_multiplier", std::vector<std::int64_t>{ma.multiplier, mb.multiplier, my.multiplier}},
              {"fixed_point_shift", std::vector<std::int64_t>{ma.shift, mb.shift, my.shift}},
              {"output_min", std::int64_t{range[0]}},
              {"output_max", std::int64_t{range[1]}}});
  }

  void pool(const fb::Operator& op, bool max) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 1, 1, out);
    const int x = in[0], y = out[0];
    require_quantized({x, y});
    const auto* o = op.builtin_options_as_Pool2DOptions();
    if (!o) bad("has no Pool2DOptions");
    const Shape& xs = info(x).shape;
    if (xs.size() != 4) bad(fmt::format("input must be 4-D (NHWC), is {}", shape_to_string(xs)));
    const std::int64_t fh = o->filter_height(), fw = o->filter_width();
    const Dim dy = window_dim(o->padding(), xs[1], fh, o->stride_h(), 1);
    const Dim dx = window_dim(o->padding(), xs[2], fw, o->stride_w(), 1);
    check_output_shape(y, {xs[0], dy.out, dx.out, xs[3]});
    const auto range = activation_range(o->fused_activation_function(), y);
    std::map<std::string, Attribute> attrs = {
        {"kernel_shape", std::vector<std::int64_t>{fh, fw}},
        {"strides", std::vector<std::int64_t>{o->stride_h(), o->stride_w()}},
        {"pads", std::vector<std::int64_t>{dy.before, dx.before, dy.after, dx.after}}};
    const int xv = nchw_view(x);
    if (max) {
      // The maximum of the stored values, then the activation's clamp (reference MaxPool).
      const int v = add_value(info(y).name + "/max", dtype(x), nchw_shape(y));
      add_node("MaxPool", "", {xv}, {v}, std::move(attrs));
      bind_clamped(v, y, true, range);
      return;
    }
    attrs["output_min"] = std::int64_t{range[0]};
    attrs["output_max"] = std::int64_t{range[1]};
    add_node("QuantizedAveragePool", "furiosa", {xv}, {output_nchw(y)}, std::move(attrs));
  }

  void reshape(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 1, 2, out);
    const int x = in[0], y = out[0];
    const Shape target = info(y).shape;
    if (element_count(target) != element_count(info(x).shape)) {
      bad(fmt::format("cannot reshape {} to {}", shape_to_string(info(x).shape), shape_to_string(target)));
    }
    // The output tensor's shape is authoritative; a new_shape option must agree with it (one -1
    // standing for the remaining dim).
    if (const auto* o = op.builtin_options_as_ReshapeOptions(); o && o->new_shape() && o->new_shape()->size() > 0) {
      Shape wanted(o->new_shape()->begin(), o->new_shape()->end());
      bool agrees = wanted.size() == target.size();
      for (std::size_t i = 0; agrees && i < wanted.size(); ++i) agrees = wanted[i] == -1 || wanted[i] == target[i];
      if (!agrees) {
        bad(fmt::format("new_shape {} disagrees with the output shape {}", shape_to_string(wanted), shape_to_string(target)));
      }
    }
    dtype(x);
    add_node("Reshape", "", {ordered_view(x), shape_constant(info(y).name + "/shape", target)}, {output_model(y)}, {});
  }

  void softmax(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 1, 1, out);
    const int x = in[0], y = out[0];
    const auto* o = op.builtin_options_as_SoftmaxOptions();
    const float beta = o ? o->beta() : 1.0f;
    const DType xd = dtype(x);
    if (xd != dtype(y)) bad("input and output types differ");
    const std::string base = info(y).name;
    const Shape& s = info(x).shape;
    int v = model_view(x);
    if (is_quantized(xd)) {
      const Quant xq = quant(x);
      const int f = add_value(base + "/dequantized", DType::Float32, s);
      add_node("DequantizeLinear", "", {v, scale_constant(base + "/x_scale", {xq.scale}),
                                        zero_point_constant(base + "/x_zero_point", xd, {xq.zero_point})}, {f}, {}, "/dequantize");
      v = f;
    } else if (xd != DType::Float32) {
      unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(xd)));
    }
    if (beta != 1.0f) {
      Tensor bt(DType::Float32, {});
      bt.as<float>()[0] = beta;
      const int scaled = add_value(base + "/scaled", DType::Float32, s);
      add_node("Mul", "", {v, add_constant(base + "/beta", std::move(bt))}, {scaled}, {}, "/beta");
      v = scaled;
    }
    if (!is_quantized(xd)) {
      add_node("Softmax", "", {v}, {output_model(y)}, {{"axis", std::int64_t{-1}}});
      return;
    }
    const int p = add_value(base + "/float", DType::Float32, s);
    add_node("Softmax", "", {v}, {p}, {{"axis", std::int64_t{-1}}});
    const Quant yq = quant(y);
    add_node("QuantizeLinear", "", {p, scale_constant(base + "/y_scale", {yq.scale}),
                                    zero_point_constant(base + "/y_zero_point", xd, {yq.zero_point})},
             {output_model(y)}, {{"rounding", std::string("half_away_from_zero")}}, "/quantize");
  }

  // LOGISTIC. uint8/int8: furiosa::Requantize with the 256-entry table TFLite's default kernel
  // builds (kernels/activations.cc, SigmoidPrepare -> PopulateLookupTable / LUTPopulate): x =
  // in_scale * (q - in_zp) and 1 / (1 + exp(-x)) in float32, then round(y * 256) (half away from
  // zero) + out_zp, clamped; TFLite requires the output scale 1/256 and zero point 0 (uint8) or
  // -128 (int8). float32: Sigmoid (host).
  void logistic(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 1, 1, out);
    const int x = in[0], y = out[0];
    const DType xd = dtype(x);
    if (xd != dtype(y)) bad("input and output types differ");
    if (xd == DType::Float32) {
      add_node("Sigmoid", "", {model_view(x)}, {output_model(y)}, {});
      return;
    }
    if (!is_quantized(xd)) unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(xd)));
    const Quant xq = quant(x), yq = quant(y);
    const std::int32_t want_zp = xd == DType::UInt8 ? 0 : -128;
    if (yq.scale != 1.0f / 256 || yq.zero_point != want_zp) {
      bad(fmt::format("output '{}' has scale {} and zero point {}; TFLite's LOGISTIC requires 1/256 and {}",
                      info(y).name, yq.scale, yq.zero_point, want_zp));
    }
    const host::LookupTable table = host::build_lookup_table(xd, xd, [&](std::int32_t q) {
      const float real = xq.scale * static_cast<float>(q - xq.zero_point);
      const float sig = 1.0f / (1.0f + std::exp(-real));
      const float rescaled = std::round(sig * (1.0f / yq.scale));
      return static_cast<std::int32_t>(rescaled + static_cast<float>(yq.zero_point));
    });
    const bool nchw = info(x).shape.size() == 4 && info(x).model < 0 && info(x).nchw >= 0;
    add_node("Requantize", "furiosa", {nchw ? nchw_view(x) : model_view(x)}, {nchw ? output_nchw(y) : output_model(y)},
             requantize_attrs(xq, yq, xd, table));
  }

  void concatenation(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    if (in.empty() || out.size() != 1) bad("needs at least one input and one output");
    const int y = out[0];
    const auto* o = op.builtin_options_as_ConcatenationOptions();
    if (!o) bad("has no ConcatenationOptions");
    const DType d = dtype(y);
    const std::size_t rank = info(y).shape.size();
    std::int64_t axis = o->axis();
    if (axis < 0) axis += static_cast<std::int64_t>(rank);
    if (axis < 0 || axis >= static_cast<std::int64_t>(rank)) bad(fmt::format("axis {} is out of range for rank {}", o->axis(), rank));
    for (int t : in) {
      if (t < 0) bad("an input is missing");
      if (dtype(t) != d) bad(fmt::format("input '{}' is {}, the output {}", info(t).name, dtype_name(dtype(t)), dtype_name(d)));
      if (info(t).shape.size() != rank) bad(fmt::format("input '{}' has rank {}, the output {}", info(t).name, info(t).shape.size(), rank));
    }
    const bool nchw = rank == 4;
    std::vector<int> parts;
    if (!is_quantized(d)) {
      if (d == DType::Float32 && o->fused_activation_function() != fb::ActivationFunctionType::NONE) {
        unsupported("a fused activation on float32 inputs is not supported");
      }
      for (int t : in) parts.push_back(nchw ? nchw_view(t) : model_view(t));
      add_node("Concat", "", parts, {nchw ? output_nchw(y) : output_model(y)}, {{"axis", nchw ? nchw_axis(axis) : axis}});
      return;
    }
    const Quant yq = quant(y);
    for (int t : in) {
      int v = nchw ? nchw_view(t) : model_view(t);
      const Quant tq = quant(t);
      if (tq.scale != yq.scale || tq.zero_point != yq.zero_point) {
        if (d == DType::Int8) {
          bad(fmt::format("int8 input '{}' has other quantization parameters than the output; TFLite requires "
                          "them equal for int8 concatenation", info(t).name));
        }
        // reference_ops::ConcatenationWithScaling, element for element (uint8).
        const float inverse_output_scale = 1.0f / yq.scale;
        const float scale = tq.scale * inverse_output_scale;
        const float bias = -static_cast<float>(tq.zero_point) * scale;
        const host::LookupTable table = host::build_lookup_table(d, d, [&](std::int32_t q) {
          const float r = static_cast<float>(q) * scale + bias;
          return round_to_int(r) + yq.zero_point;
        });
        const Shape& vs = g_.values[static_cast<std::size_t>(v)].shape;
        const int r = add_value(info(t).name + "/rescaled", d, vs);
        add_node("Requantize", "furiosa", {v}, {r}, requantize_attrs(tq, yq, d, table), "/rescale");
        v = r;
      }
      parts.push_back(v);
    }
    const int c = add_value(info(y).name + "/concat", d, nchw ? nchw_shape(y) : info(y).shape);
    add_node("Concat", "", parts, {c}, {{"axis", nchw ? nchw_axis(axis) : axis}});
    bind_clamped(c, y, nchw, activation_range(o->fused_activation_function(), y));
  }

  void pad(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 2, out);
    const int x = in[0], p = in[1], y = out[0];
    require_constant(p, "paddings");
    const DType d = dtype(x);
    if (dtype(y) != d) bad("input and output types differ");
    const Shape& xs = info(x).shape;
    const std::size_t rank = xs.size();
    const Tensor pt = constant_tensor(p);
    if (pt.shape() != Shape{static_cast<std::int64_t>(rank), 2} || (pt.dtype() != DType::Int32 && pt.dtype() != DType::Int64)) {
      bad(fmt::format("paddings must be int32/int64 [{}, 2], are {} {}", rank, dtype_name(pt.dtype()), shape_to_string(pt.shape())));
    }
    std::vector<std::array<std::int64_t, 2>> pads(rank);
    Shape expected = xs;
    for (std::size_t i = 0; i < rank; ++i) {
      for (std::size_t j = 0; j < 2; ++j) {
        pads[i][j] = pt.dtype() == DType::Int32 ? pt.as<std::int32_t>()[2 * i + j] : pt.as<std::int64_t>()[2 * i + j];
        if (pads[i][j] < 0) bad("negative paddings are not supported");
      }
      expected[i] += pads[i][0] + pads[i][1];
    }
    check_output_shape(y, expected);
    // The padding value: the output zero point for quantized tensors (TFLite PAD), else 0.
    std::int32_t fill = 0;
    if (is_quantized(d)) {
      const Quant xq = quant(x), yq = quant(y);
      if (xq.scale != yq.scale || xq.zero_point != yq.zero_point) {
        bad("input and output must share their quantization parameters");
      }
      fill = yq.zero_point;
    } else if (d != DType::Float32) {
      unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(d)));
    }
    const bool nchw = rank == 4;
    int cur = nchw ? nchw_view(x) : model_view(x);
    Shape shape = nchw ? nchw_shape(x) : xs;
    std::vector<std::size_t> axes;  // model axes with padding
    for (std::size_t i = 0; i < rank; ++i) {
      if (pads[i][0] > 0 || pads[i][1] > 0) axes.push_back(i);
    }
    const std::string base = info(y).name;
    if (axes.empty()) {
      add_node("Identity", "", {cur}, {nchw ? output_nchw(y) : output_model(y)}, {});
      return;
    }
    // One Concat per padded axis: [fill block, x, fill block] (LowLevelConcat on the NPU).
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const std::size_t ma = axes[k];
      const auto ax = static_cast<std::size_t>(nchw ? nchw_axis(static_cast<std::int64_t>(ma)) : static_cast<std::int64_t>(ma));
      auto block = [&](std::int64_t amount, const char* side) {
        Shape bs = shape;
        bs[ax] = amount;
        Tensor t(d, bs);
        if (d == DType::UInt8) std::fill(t.as<std::uint8_t>().begin(), t.as<std::uint8_t>().end(), static_cast<std::uint8_t>(fill));
        if (d == DType::Int8) std::fill(t.as<std::int8_t>().begin(), t.as<std::int8_t>().end(), static_cast<std::int8_t>(fill));
        return add_constant(fmt::format("{}/pad{}_{}", base, ma, side), std::move(t));
      };
      std::vector<int> ordered;  // [fill block, x, fill block]
      if (pads[ma][0] > 0) ordered.push_back(block(pads[ma][0], "before"));
      ordered.push_back(cur);
      if (pads[ma][1] > 0) ordered.push_back(block(pads[ma][1], "after"));
      shape[ax] += pads[ma][0] + pads[ma][1];
      const bool last = k + 1 == axes.size();
      const int v = last ? (nchw ? output_nchw(y) : output_model(y)) : add_value(fmt::format("{}/padded{}", base, ma), d, shape);
      add_node("Concat", "", ordered, {v}, {{"axis", static_cast<std::int64_t>(ax)}}, fmt::format("/pad{}", ma));
      cur = v;
    }
  }

  void quantize(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 1, 1, out);
    const int x = in[0], y = out[0];
    const DType xd = dtype(x), yd = dtype(y);
    if (!is_quantized(yd)) unsupported(fmt::format("output '{}' is {}; only uint8/int8 outputs are supported", info(y).name, dtype_name(yd)));
    const Quant yq = quant(y);
    const std::string base = info(y).name;
    if (xd == DType::Float32) {
      // TFLite's AffineQuantize rounds half away from zero.
      add_node("QuantizeLinear", "", {model_view(x), scale_constant(base + "/y_scale", {yq.scale}),
                                      zero_point_constant(base + "/y_zero_point", yd, {yq.zero_point})},
               {output_model(y)}, {{"rounding", std::string("half_away_from_zero")}});
      return;
    }
    if (!is_quantized(xd)) unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(xd)));
    // Between 8-bit types: reference_ops::Requantize with QuantizeMultiplier(in_scale / out_scale).
    const Quant xq = quant(x);
    const auto m = isa::quantize_multiplier(static_cast<double>(xq.scale) / static_cast<double>(yq.scale));
    const host::LookupTable table = host::build_lookup_table(xd, yd, [&](std::int32_t q) {
      return isa::multiply_by_quantized_multiplier(q - xq.zero_point, m) + yq.zero_point;
    });
    const bool nchw = info(x).shape.size() == 4 && info(x).model < 0 && info(x).nchw >= 0;
    add_node("Requantize", "furiosa", {nchw ? nchw_view(x) : model_view(x)}, {nchw ? output_nchw(y) : output_model(y)},
             requantize_attrs(xq, yq, yd, table));
  }

  void dequantize(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 1, 1, out);
    const int x = in[0], y = out[0];
    const DType xd = dtype(x);
    if (!is_quantized(xd)) unsupported(fmt::format("input '{}' is {}; only uint8/int8 inputs are supported", info(x).name, dtype_name(xd)));
    if (dtype(y) != DType::Float32) bad("the output must be float32");
    const Quant xq = quant(x);
    const std::string base = info(y).name;
    // Keep the NCHW layout when only that exists and the result is not a model output.
    bool is_output = false;
    if (sg_->outputs()) {
      for (int t : *sg_->outputs()) is_output = is_output || t == y;
    }
    const bool nchw = !is_output && info(x).shape.size() == 4 && info(x).model < 0 && info(x).nchw >= 0;
    add_node("DequantizeLinear", "", {nchw ? nchw_view(x) : model_view(x), scale_constant(base + "/x_scale", {xq.scale}),
                                      zero_point_constant(base + "/x_zero_point", xd, {xq.zero_point})},
             {nchw ? output_nchw(y) : output_model(y)}, {});
  }


  // RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR -> Resize on the NCHW view with axes [2, 3],
  // sizes from the operator's size input, the ONNX coordinate mode of TFLite's flags
  // (align_corners -> align_corners, half_pixel_centers -> half_pixel (bilinear) /
  // tf_half_pixel_for_nn (nearest), neither -> asymmetric; nearest_mode round_prefer_ceil with
  // align_corners, else floor) and tflite_arithmetic = 1 for TFLite's own float32 / integer
  // arithmetic (host/cpu_ops.h). Quantized tensors are resized as stored values, as TFLite's
  // kernels do (they never rescale; converters give input and output the same parameters).
  void resize(const fb::Operator& op, bool bilinear) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 2, out);
    const int x = in[0], size = in[1], y = out[0];
    require_constant(size, "size");
    const DType d = dtype(x);
    if (d != DType::Float32 && !is_quantized(d)) {
      unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(d)));
    }
    if (dtype(y) != d) bad(fmt::format("input '{}' is {}, output '{}' {}", info(x).name, dtype_name(d), info(y).name, dtype_name(dtype(y))));
    const Shape& xs = info(x).shape;
    if (xs.size() != 4) bad(fmt::format("input '{}' must be 4-D (NHWC), has shape {}", info(x).name, shape_to_string(xs)));
    const Tensor st = constant_tensor(size);
    if (st.dtype() != DType::Int32 || st.elements() != 2) {
      bad(fmt::format("size '{}' must be int32 [2] (height, width), is {} {}", info(size).name, dtype_name(st.dtype()),
                      shape_to_string(st.shape())));
    }
    const std::int64_t oh = st.as<std::int32_t>()[0], ow = st.as<std::int32_t>()[1];
    if (oh < 1 || ow < 1) bad(fmt::format("size '{}' = [{}, {}] must be positive", info(size).name, oh, ow));
    check_output_shape(y, {xs[0], oh, ow, xs[3]});
    bool align_corners = false, half_pixel = false;
    if (bilinear) {
      if (const auto* o = op.builtin_options_as_ResizeBilinearOptions()) {
        align_corners = o->align_corners();
        half_pixel = o->half_pixel_centers();
      }
      // TFLite's Prepare/kernels require it (reference_ops::ResizeBilinear checks the same).
      if (align_corners && half_pixel) bad("align_corners and half_pixel_centers are both set; TFLite allows one at most");
    } else {
      if (const auto* o = op.builtin_options_as_ResizeNearestNeighborOptions()) {
        align_corners = o->align_corners();
        half_pixel = o->half_pixel_centers();
      }
      if (align_corners && half_pixel) {
        unsupported("align_corners together with half_pixel_centers has no ONNX coordinate mode and is not supported");
      }
    }
    const std::string coord = align_corners ? "align_corners"
                              : half_pixel  ? (bilinear ? "half_pixel" : "tf_half_pixel_for_nn")
                                            : "asymmetric";
    std::map<std::string, Attribute> attrs = {{"mode", std::string(bilinear ? "linear" : "nearest")},
                                              {"coordinate_transformation_mode", coord},
                                              {"axes", std::vector<std::int64_t>{2, 3}},
                                              {"tflite_arithmetic", std::int64_t{1}}};
    if (!bilinear) attrs["nearest_mode"] = std::string(align_corners ? "round_prefer_ceil" : "floor");
    Tensor sizes(DType::Int64, {2});
    sizes.as<std::int64_t>()[0] = oh;
    sizes.as<std::int64_t>()[1] = ow;
    const int sv = add_constant(info(y).name + "/sizes", std::move(sizes));
    add_node("Resize", "", {nchw_view(x), -1, -1, sv}, {output_nchw(y)}, std::move(attrs));
  }

  // ARG_MAX / ARG_MIN -> ArgMax / ArgMin (keepdims 0, first index on ties, as TFLite's
  // reference_ops::ArgMinMax), then Cast to int32 when the output is INT32. The channel axis of
  // a tensor that only exists in NCHW is reduced there (same result layout: [N, H, W]).
  void arg_min_max(const fb::Operator& op, bool max) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 2, out);
    const int x = in[0], a = in[1], y = out[0];
    require_constant(a, "axis");
    dtype(x);
    const Tensor at = constant_tensor(a);
    if ((at.dtype() != DType::Int32 && at.dtype() != DType::Int64) || at.elements() != 1) {
      bad(fmt::format("axis '{}' must be one int32/int64 value, is {} {}", info(a).name, dtype_name(at.dtype()),
                      shape_to_string(at.shape())));
    }
    const Shape& xs = info(x).shape;
    const auto rank = static_cast<std::int64_t>(xs.size());
    std::int64_t axis = at.dtype() == DType::Int32 ? at.as<std::int32_t>()[0] : at.as<std::int64_t>()[0];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) bad(fmt::format("axis {} is out of range for input '{}' {}", axis, info(x).name, shape_to_string(xs)));
    const DType yd = dtype(y);
    if (yd != DType::Int32 && yd != DType::Int64) bad(fmt::format("output '{}' is {}; ARG_MAX/ARG_MIN give int32 or int64", info(y).name, dtype_name(yd)));
    const auto* opt_max = op.builtin_options_as_ArgMaxOptions();
    const auto* opt_min = op.builtin_options_as_ArgMinOptions();
    const std::optional<fb::TensorType> wanted = max ? (opt_max ? std::optional(opt_max->output_type()) : std::nullopt)
                                                     : (opt_min ? std::optional(opt_min->output_type()) : std::nullopt);
    if (wanted && info(y).type != *wanted) {
      bad(fmt::format("output_type {} disagrees with the output tensor '{}' ({})", type_name(*wanted), info(y).name, type_name(info(y).type)));
    }
    Shape expected = xs;
    expected.erase(expected.begin() + axis);
    check_output_shape(y, expected);
    const bool nchw = rank == 4 && axis == 3 && info(x).model < 0 && info(x).nchw >= 0;
    const int xv = nchw ? nchw_view(x) : model_view(x);
    const std::map<std::string, Attribute> attrs = {{"axis", nchw ? std::int64_t{1} : axis},
                                                    {"keepdims", std::int64_t{0}},
                                                    {"select_last_index", std::int64_t{0}}};
    const char* onnx_op = max ? "ArgMax" : "ArgMin";
    if (yd == DType::Int64) {
      add_node(onnx_op, "", {xv}, {output_model(y)}, attrs);
      return;
    }
    const int idx = add_value(info(y).name + "/int64", DType::Int64, expected);
    add_node(onnx_op, "", {xv}, {idx}, attrs);
    add_node("Cast", "", {idx}, {output_model(y)}, {{"to", std::int64_t{6}}}, "/int32");  // TensorProto INT32
  }

  // ---- shape operators, MEAN, detection post-processing -----------------------------------------
  // The integer values of constant tensor t (int32 or int64).
  std::vector<std::int64_t> int_constant(int t, const char* what) const {
    require_constant(t, what);
    const Tensor c = constant_tensor(t);
    std::vector<std::int64_t> v;
    if (c.dtype() == DType::Int32) {
      for (auto x : c.as<std::int32_t>()) v.push_back(x);
    } else if (c.dtype() == DType::Int64) {
      for (auto x : c.as<std::int64_t>()) v.push_back(x);
    } else {
      bad(fmt::format("{} '{}' must be int32 or int64, is {}", what, info(t).name, dtype_name(c.dtype())));
    }
    return v;
  }

  // An int64 IR value of an int32/int64 tensor: an int64 constant, or a Cast of a computed value.
  int int64_view(int t, const char* what) {
    const DType d = dtype(t);
    if (d != DType::Int32 && d != DType::Int64) bad(fmt::format("{} '{}' must be int32 or int64, is {}", what, info(t).name, dtype_name(d)));
    if (info(t).data) {
      const auto v = int_constant(t, what);
      Tensor c(DType::Int64, info(t).shape);
      std::copy(v.begin(), v.end(), c.as<std::int64_t>().begin());
      return add_constant(info(t).name + "/int64", std::move(c));
    }
    const int src = model_view(t);
    if (d == DType::Int64) return src;
    const int v = add_value(info(t).name + "/int64", DType::Int64, info(t).shape);
    add_node("Cast", "", {src}, {v}, {{"to", std::int64_t{7}}}, "/int64");
    return v;
  }

  // The ONNX TensorProto type number of an IR dtype (Cast's `to`).
  static std::int64_t onnx_type(DType d) {
    switch (d) {
      case DType::Float32: return 1;
      case DType::UInt8: return 2;
      case DType::Int8: return 3;
      case DType::Int32: return 6;
      case DType::Int64: return 7;
    }
    return 0;
  }

  void require_outputs(const std::vector<int>& in, std::size_t n_in, const std::vector<int>& out, std::size_t n_out) const {
    if (in.size() != n_in || out.size() != n_out) {
      bad(fmt::format("has {} inputs and {} outputs; expected {} and {}", in.size(), out.size(), n_in, n_out));
    }
    for (int t : in) {
      if (t < 0) bad("an input is missing");
    }
  }

  // SHAPE: TFLite shapes are static, so the result is a constant now (what fold_constants()
  // does for ONNX Shape).
  void shape_op(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 1, 1, out);
    const int x = in[0], y = out[0];
    const DType yd = dtype(y);
    if (yd != DType::Int32 && yd != DType::Int64) bad(fmt::format("output '{}' is {}; SHAPE gives int32 or int64", info(y).name, dtype_name(yd)));
    const Shape& xs = info(x).shape;
    check_output_shape(y, {static_cast<std::int64_t>(xs.size())});
    Tensor t(yd, {static_cast<std::int64_t>(xs.size())});
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (yd == DType::Int32) t.as<std::int32_t>()[i] = static_cast<std::int32_t>(xs[i]);
      else t.as<std::int64_t>()[i] = xs[i];
    }
    info(y).model = add_constant(info(y).name, std::move(t));
  }

  // STRIDED_SLICE with constant begin/end/strides -> Slice (+ Reshape dropping shrunk axes), with
  // TFLite's mask semantics (strided_slice_logic.h): a begin_mask bit starts at the first element
  // of the stride's direction, an end_mask bit runs to the last, a shrink_axis_mask bit takes the
  // one element at begin and removes the dim; negative begin/end count from the end and are
  // clamped. ellipsis_mask, new_axis_mask and offset are refused.
  void strided_slice(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 4, 4, out);
    const int x = in[0], y = out[0];
    const auto* o = op.builtin_options_as_StridedSliceOptions();
    const std::int32_t begin_mask = o ? o->begin_mask() : 0, end_mask = o ? o->end_mask() : 0;
    const std::int32_t shrink_mask = o ? o->shrink_axis_mask() : 0;
    if (o && (o->ellipsis_mask() != 0 || o->new_axis_mask() != 0)) {
      unsupported(fmt::format("ellipsis_mask {} and new_axis_mask {} are not supported (both must be 0)",
                              o->ellipsis_mask(), o->new_axis_mask()));
    }
    if (o && o->offset()) unsupported("offset = true is not supported");
    const auto begin = int_constant(in[1], "begin"), end = int_constant(in[2], "end"), strides = int_constant(in[3], "strides");
    const Shape& xs = info(x).shape;
    if (begin.size() != end.size() || begin.size() != strides.size() || begin.size() > xs.size()) {
      bad(fmt::format("begin, end and strides have {}, {} and {} values for input '{}' {}", begin.size(), end.size(),
                      strides.size(), info(x).name, shape_to_string(xs)));
    }
    std::vector<std::int64_t> starts, ends, axes, steps;
    Shape full, expected;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const std::int64_t dim = xs[i];
      if (i >= begin.size()) {
        full.push_back(dim);
        expected.push_back(dim);
        continue;
      }
      const bool shrink = (shrink_mask >> i) & 1;
      std::int64_t step = strides[i];
      if (step == 0) bad(fmt::format("strides[{}] is 0", i));
      auto clamp = [&](std::int64_t v) {
        if (v < 0) v += dim;
        return step > 0 ? std::clamp<std::int64_t>(v, 0, dim) : std::clamp<std::int64_t>(v, -1, dim - 1);
      };
      std::int64_t start = ((begin_mask >> i) & 1) ? (step > 0 ? 0 : dim - 1) : clamp(begin[i]);
      std::int64_t stop = 0;
      if (shrink) {
        if (((begin_mask >> i) & 1) == 0 && (begin[i] < -dim || begin[i] >= dim)) {
          bad(fmt::format("begin[{}] = {} is out of range for shrinking dim {} of size {}", i, begin[i], i, dim));
        }
        step = 1;
        start = std::clamp<std::int64_t>(start, 0, dim - 1);
        stop = start + 1;
      } else {
        stop = ((end_mask >> i) & 1) ? (step > 0 ? dim : -1) : clamp(end[i]);
      }
      const std::int64_t len = step > 0 ? std::max<std::int64_t>(0, (stop - start + step - 1) / step)
                                        : std::max<std::int64_t>(0, (start - stop - step - 1) / -step);
      if (len == 0) bad(fmt::format("dim {} is sliced to no elements, which is not supported", i));
      full.push_back(len);
      if (!shrink) expected.push_back(len);
      if (len == dim && step == 1) continue;  // the whole dim
      starts.push_back(start);
      ends.push_back(step < 0 && stop < 0 ? -dim - 1 : stop);  // ONNX: -dim - 1 is "before 0"
      axes.push_back(static_cast<std::int64_t>(i));
      steps.push_back(step);
    }
    check_output_shape(y, expected);
    dtype(x);
    const std::string base = info(y).name;
    int v = model_view(x);
    if (!axes.empty()) {
      auto vec = [&](const char* what, const std::vector<std::int64_t>& vals) {
        Tensor t(DType::Int64, {static_cast<std::int64_t>(vals.size())});
        std::copy(vals.begin(), vals.end(), t.as<std::int64_t>().begin());
        return add_constant(fmt::format("{}/{}", base, what), std::move(t));
      };
      const bool last = full == expected;
      const int s = last ? output_model(y) : add_value(base + "/slice", dtype(x), full);
      add_node("Slice", "", {v, vec("starts", starts), vec("ends", ends), vec("axes", axes), vec("steps", steps)}, {s}, {});
      if (last) return;
      v = s;
    }
    add_node("Reshape", "", {v, shape_constant(base + "/shape", expected)}, {output_model(y)}, {}, "/shrink");
  }

  // PACK -> each input reshaped with a dim of 1 at `axis`, then Concat along it.
  void pack(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    if (in.empty() || out.size() != 1) bad(fmt::format("has {} inputs and {} outputs; expected >= 1 and 1", in.size(), out.size()));
    const int y = out[0];
    const auto* o = op.builtin_options_as_PackOptions();
    const Shape& s = info(in[0]).shape;
    const auto rank = static_cast<std::int64_t>(s.size());
    std::int64_t axis = o ? o->axis() : 0;
    if (axis < 0) axis += rank + 1;
    if (axis < 0 || axis > rank) bad(fmt::format("axis {} is out of range for inputs of rank {}", o ? o->axis() : 0, rank));
    if (o && o->values_count() != static_cast<std::int32_t>(in.size())) {
      bad(fmt::format("values_count {} disagrees with its {} inputs", o->values_count(), in.size()));
    }
    const DType d = dtype(in[0]);
    for (int t : in) {
      if (t < 0) bad("an input is missing");
      if (info(t).shape != s || dtype(t) != d) {
        bad(fmt::format("input '{}' is {} {}, the first input {} {}", info(t).name, dtype_name(dtype(t)),
                        shape_to_string(info(t).shape), dtype_name(d), shape_to_string(s)));
      }
    }
    Shape one = s;
    one.insert(one.begin() + axis, 1);
    Shape expected = s;
    expected.insert(expected.begin() + axis, static_cast<std::int64_t>(in.size()));
    check_output_shape(y, expected);
    const std::string base = info(y).name;
    if (in.size() == 1) {
      add_node("Reshape", "", {model_view(in[0]), shape_constant(base + "/shape", expected)}, {output_model(y)}, {});
      return;
    }
    std::vector<int> parts;
    for (std::size_t k = 0; k < in.size(); ++k) {
      const int v = add_value(fmt::format("{}/part{}", base, k), d, one);
      add_node("Reshape", "", {model_view(in[k]), shape_constant(fmt::format("{}/part{}_shape", base, k), one)}, {v}, {},
               fmt::format("/part{}", k));
      parts.push_back(v);
    }
    add_node("Concat", "", parts, {output_model(y)}, {{"axis", axis}});
  }

  void tile(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 2, out);
    const int x = in[0], m = in[1], y = out[0];
    dtype(x);
    if (info(m).data) {
      const auto mult = int_constant(m, "multiples");
      const Shape& xs = info(x).shape;
      if (mult.size() != xs.size()) bad(fmt::format("multiples '{}' has {} values for input {}", info(m).name, mult.size(), shape_to_string(xs)));
      Shape expected = xs;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        if (mult[i] < 0) bad(fmt::format("multiples[{}] = {} is negative", i, mult[i]));
        expected[i] *= mult[i];
      }
      check_output_shape(y, expected);
    }
    add_node("Tile", "", {model_view(x), int64_view(m, "multiples")}, {output_model(y)}, {});
  }

  void gather(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 2, out);
    const int x = in[0], idx = in[1], y = out[0];
    const auto* o = op.builtin_options_as_GatherOptions();
    if (o && o->batch_dims() != 0) unsupported(fmt::format("batch_dims {} is not supported (0 only)", o->batch_dims()));
    const Shape& xs = info(x).shape;
    const auto rank = static_cast<std::int64_t>(xs.size());
    std::int64_t axis = o ? o->axis() : 0;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) bad(fmt::format("axis {} is out of range for input '{}' {}", o ? o->axis() : 0, info(x).name, shape_to_string(xs)));
    const DType id = dtype(idx);
    if (id != DType::Int32 && id != DType::Int64) bad(fmt::format("indices '{}' must be int32 or int64, is {}", info(idx).name, dtype_name(id)));
    dtype(x);
    Shape expected(xs.begin(), xs.begin() + axis);
    expected.insert(expected.end(), info(idx).shape.begin(), info(idx).shape.end());
    expected.insert(expected.end(), xs.begin() + axis + 1, xs.end());
    check_output_shape(y, expected);
    add_node("Gather", "", {model_view(x), model_view(idx)}, {output_model(y)}, {{"axis", axis}});
  }

  // CAST converts the stored values (no quantization is applied), as TFLite's kernel does.
  void cast(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 1, 1, out);
    const int x = in[0], y = out[0];
    dtype(x);
    check_output_shape(y, info(x).shape);
    add_node("Cast", "", {model_view(x)}, {output_model(y)}, {{"to", onnx_type(dtype(y))}});
  }

  // FILL(dims, value) -> Expand(value, dims).
  void fill(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 2, out);
    const int dims = in[0], value = in[1], y = out[0];
    if (element_count(info(value).shape) != 1) bad(fmt::format("value '{}' must hold one element", info(value).name));
    if (dtype(value) != dtype(y)) bad(fmt::format("value '{}' is {}, output '{}' {}", info(value).name, dtype_name(dtype(value)), info(y).name, dtype_name(dtype(y))));
    int v = model_view(value);
    if (!info(value).shape.empty()) {
      const int scalar = add_value(info(value).name + "/scalar", dtype(value), {});
      add_node("Reshape", "", {v, shape_constant(info(value).name + "/scalar_shape", {})}, {scalar}, {}, "/scalar");
      v = scalar;
    }
    add_node("Expand", "", {v, int64_view(dims, "dims")}, {output_model(y)}, {});
  }

  void range(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 3, 3, out);
    std::vector<int> scalars;
    for (int t : in) {
      if (element_count(info(t).shape) != 1 || dtype(t) != dtype(out[0])) {
        bad(fmt::format("input '{}' must be one {} value, is {} {}", info(t).name, dtype_name(dtype(out[0])),
                        dtype_name(dtype(t)), shape_to_string(info(t).shape)));
      }
      int v = model_view(t);
      if (!info(t).shape.empty()) {
        const int s = add_value(info(t).name + "/scalar", dtype(t), {});
        add_node("Reshape", "", {v, shape_constant(info(t).name + "/scalar_shape", {})}, {s}, {}, "/scalar");
        v = s;
      }
      scalars.push_back(v);
    }
    add_node("Range", "", scalars, {output_model(out[0])}, {});
  }

  // MEAN over constant axes. uint8/int8: furiosa::QuantizedMean with TFLite's
  // reference_ops::QuantizedMeanOrSum arithmetic: multiplier QuantizeMultiplier(in_scale /
  // out_scale), then shift s = min(floor(log2(count)), 32, 31 + shift), multiplier
  // (multiplier << s) / count, shift - s; float32: ReduceMean. A rank-4 input held only in NCHW
  // is reduced there when the result's element order is the model's.
  void mean(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_arity(in, 2, 2, out);
    const int x = in[0], y = out[0];
    const auto* o = op.builtin_options_as_ReducerOptions();
    const bool keep = o && o->keep_dims();
    const Shape& xs = info(x).shape;
    const auto rank = static_cast<std::int64_t>(xs.size());
    std::vector<bool> reduced(xs.size(), false);
    for (auto a : int_constant(in[1], "axis")) {
      const std::int64_t ax = a < 0 ? a + rank : a;
      if (ax < 0 || ax >= rank) bad(fmt::format("axis {} is out of range for input '{}' {}", a, info(x).name, shape_to_string(xs)));
      reduced[static_cast<std::size_t>(ax)] = true;  // duplicates count once (TFLite's ResolveAxis)
    }
    Shape expected;
    std::vector<std::int64_t> axes;
    std::int64_t count = 1;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (!reduced[i]) {
        expected.push_back(xs[i]);
        continue;
      }
      axes.push_back(static_cast<std::int64_t>(i));
      count *= xs[i];
      if (keep) expected.push_back(1);
    }
    check_output_shape(y, expected);
    const DType d = dtype(x);
    if (d != dtype(y)) bad(fmt::format("input '{}' is {}, output '{}' {}", info(x).name, dtype_name(d), info(y).name, dtype_name(dtype(y))));
    if (d != DType::Float32 && !is_quantized(d)) unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(d)));
    if (count == 0) bad(fmt::format("input '{}' {} has no elements to average", info(x).name, shape_to_string(xs)));
    if (axes.empty()) {  // TFLite copies the input (ReduceIsCopy), even between quantizations
      add_node("Reshape", "", {ordered_view(x), shape_constant(info(y).name + "/shape", expected)}, {output_model(y)}, {});
      return;
    }
    // The NCHW view when only it exists and the result's order agrees with the model's.
    bool nchw = rank == 4 && info(x).model < 0 && info(x).nchw >= 0;
    std::vector<std::int64_t> nchw_axes;
    if (nchw) {
      for (auto a : axes) nchw_axes.push_back(nchw_axis(a));
      std::sort(nchw_axes.begin(), nchw_axes.end());
      if (!keep) {
        std::int64_t prev = -1;  // the kept dims must appear in the same order in both layouts
        for (std::int64_t i = 0; i < 4; ++i) {
          if (reduced[static_cast<std::size_t>(i)]) continue;
          nchw = nchw && nchw_axis(i) > prev;
          prev = nchw_axis(i);
        }
      }
    }
    const int xv = nchw ? nchw_view(x) : model_view(x);
    const int yv = nchw && keep ? output_nchw(y) : output_model(y);
    std::map<std::string, Attribute> attrs = {{"axes", nchw ? nchw_axes : axes}, {"keepdims", std::int64_t{keep ? 1 : 0}}};
    if (d == DType::Float32) {
      add_node("ReduceMean", "", {xv}, {yv}, std::move(attrs));
      return;
    }
    const Quant xq = quant(x), yq = quant(y);
    isa::QuantizedMultiplier m = isa::quantize_multiplier(static_cast<double>(xq.scale) / static_cast<double>(yq.scale));
    int s = std::bit_width(static_cast<std::uint64_t>(count)) - 1;  // 63 - CountLeadingZeros(count)
    s = std::min(s, 32);
    s = std::min(s, 31 + m.shift);
    m.multiplier = static_cast<std::int32_t>((static_cast<std::int64_t>(m.multiplier) << s) / count);
    m.shift -= s;
    attrs["x_zero_point"] = std::int64_t{xq.zero_point};
    attrs["y_zero_point"] = std::int64_t{yq.zero_point};
    attrs["fixed_point_multiplier"] = std::int64_t{m.multiplier};
    attrs["fixed_point_shift"] = std::int64_t{m.shift};
    add_node("QuantizedMean", "furiosa", {xv}, {yv}, std::move(attrs));
  }

  // A float32 view of a detection input: the tensor itself, or its DequantizeLinear (uint8/int8).
  int float_view(int t, const char* what) {
    const DType d = dtype(t);
    if (d == DType::Float32) return model_view(t);
    if (!is_quantized(d)) bad(fmt::format("{} '{}' is {}; float32, uint8 and int8 are supported", what, info(t).name, dtype_name(d)));
    const Quant q = quant(t);
    const std::string base = info(t).name;
    const int v = add_value(base + "/dequantized", DType::Float32, info(t).shape);
    add_node("DequantizeLinear", "", {model_view(t), scale_constant(base + "/scale", {q.scale}),
                                      zero_point_constant(base + "/zero_point", d, {q.zero_point})}, {v}, {}, "/dequantize");
    return v;
  }

  // TFLite_Detection_PostProcess (custom) -> furiosa::TFLiteDetectionPostProcess with the options
  // of its FlexBuffer map. Quantized box encodings and class predictions are dequantized first
  // ((q - zero_point) * scale in float32, as the kernel does); the constant anchors are
  // dequantized here.
  void detection_postprocess(const fb::Operator& op) {
    const auto in = op_inputs(op);
    const auto out = op_outputs(op);
    require_outputs(in, 3, out, 4);
    const auto* opts = op.custom_options();
    if (!opts || opts->size() == 0) bad("has no custom_options (its FlexBuffer map of options)");
    if (!flexbuffers::VerifyBuffer(opts->data(), opts->size())) bad("custom_options is not a valid FlexBuffer");
    const auto root = flexbuffers::GetRoot(opts->data(), opts->size());
    if (!root.IsMap()) bad("custom_options is not a FlexBuffer map");
    const flexbuffers::Map map = root.AsMap();
    auto option = [&](const char* key, bool required) {
      const flexbuffers::Reference r = map[key];
      if (required && r.IsNull()) bad(fmt::format("custom option '{}' is missing", key));
      return r;
    };
    std::map<std::string, Attribute> attrs;
    for (const char* key : {"max_detections", "max_classes_per_detection", "num_classes"}) {
      attrs[key] = std::int64_t{option(key, true).AsInt32()};
    }
    const auto per_class = option("detections_per_class", false);
    attrs["detections_per_class"] = std::int64_t{per_class.IsNull() ? 100 : per_class.AsInt32()};
    const auto regular = option("use_regular_nms", false);
    attrs["use_regular_nms"] = std::int64_t{!regular.IsNull() && regular.AsBool() ? 1 : 0};
    for (const char* key : {"nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale", "h_scale", "w_scale"}) {
      attrs[key] = option(key, true).AsFloat();
    }
    const std::int64_t max_det = std::get<std::int64_t>(attrs["max_detections"]);
    const std::int64_t per_det = std::get<std::int64_t>(attrs["max_classes_per_detection"]);
    if (max_det < 0 || per_det < 1) bad(fmt::format("max_detections {} and max_classes_per_detection {} must be >= 0 and >= 1", max_det, per_det));
    const int anchors = in[2];
    require_constant(anchors, "anchors");
    const Shape& as = info(anchors).shape;
    if (as.size() != 2 || as[1] != 4) bad(fmt::format("anchors '{}' must be [anchors, 4], is {}", info(anchors).name, shape_to_string(as)));
    const Tensor at = constant_tensor(anchors);
    Tensor af(DType::Float32, as);
    if (at.dtype() == DType::Float32) {
      af = at;
    } else if (is_quantized(at.dtype())) {
      const Quant q = quant(anchors);
      for (std::size_t i = 0; i < static_cast<std::size_t>(at.elements()); ++i) {
        const float v = at.dtype() == DType::UInt8 ? static_cast<float>(at.as<std::uint8_t>()[i]) : static_cast<float>(at.as<std::int8_t>()[i]);
        af.as<float>()[i] = (v - static_cast<float>(q.zero_point)) * q.scale;
      }
    } else {
      bad(fmt::format("anchors '{}' are {}; float32, uint8 and int8 are supported", info(anchors).name, dtype_name(at.dtype())));
    }
    const std::int64_t n = max_det * per_det;
    const std::array<Shape, 4> shapes = {Shape{1, n, 4}, Shape{1, n}, Shape{1, n}, Shape{1}};
    std::vector<int> outs;
    for (std::size_t k = 0; k < 4; ++k) {
      TInfo& ti = info(out[k]);
      if (dtype(out[k]) != DType::Float32) bad(fmt::format("output '{}' is {}; the outputs are float32", ti.name, dtype_name(dtype(out[k]))));
      if (ti.shape.empty()) ti.shape = shapes[k];  // converters may leave the shapes to the kernel
      check_output_shape(out[k], shapes[k]);
      outs.push_back(output_model(out[k]));
    }
    const int boxes = float_view(in[0], "box encodings"), scores = float_view(in[1], "class predictions");
    add_node("TFLiteDetectionPostProcess", "furiosa", {boxes, scores, add_constant(info(anchors).name + "/float", std::move(af))},
             outs, std::move(attrs));
  }


  const fb::Model& m_;
  std::string source_;
  LoadLimits limits_;
  std::uint64_t constant_bytes_ = 0;  // all tensors' buffer bytes so far (limits_.max_total_bytes)
  const fb::SubGraph* sg_ = nullptr;
  Graph g_;
  std::vector<TInfo> t_;
  std::set<std::string> names_;
  int op_index_ = -1;
  int code_ = -1;
  std::string op_name_;
};

}  // namespace

std::string tflite_builtin_name(int code) {
  if (code >= 0 && static_cast<std::size_t>(code) < kBuiltinNames.size()) return kBuiltinNames[static_cast<std::size_t>(code)];
  return fmt::format("BUILTIN_{}", code);
}

std::vector<std::string> tflite_supported_operators() {
  std::vector<std::string> out;
  for (int code : kSupported) out.push_back(tflite_builtin_name(code));
  out.push_back(std::string("CUSTOM:") + kDetectionPostProcess);
  return out;
}

bool is_tflite_bytes(const std::string& bytes) noexcept {
  return bytes.size() >= 8 && std::memcmp(bytes.data() + 4, fb::ModelIdentifier(), 4) == 0;
}

Graph import_tflite_bytes(const std::string& bytes, const std::string& source, const LoadLimits& limits) {
  if (!is_tflite_bytes(bytes)) {
    throw Error(ErrorCode::ModelLoadFailed,
                fmt::format("'{}' is not a TFLite model (no \"TFL3\" identifier at byte 4)", source),
                ErrorSubject::of_file(source));
  }
  flatbuffers::Verifier verifier(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  if (!fb::VerifyModelBuffer(verifier)) {
    throw Error(ErrorCode::ModelLoadFailed,
                fmt::format("'{}' is not a valid TFLite model (the FlatBuffer fails verification: truncated or "
                            "corrupt)", source),
                ErrorSubject::of_file(source));
  }
  return Importer(*fb::GetModel(bytes.data()), source, limits).run();
}

Graph import_tflite(const std::filesystem::path& path, const LoadLimits& limits) {
  return import_tflite_bytes(read_file(path), path.string(), limits);
}

namespace {

bool has_tflite_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".tflite";
}

}  // namespace

Graph import_model_bytes(const std::string& bytes, const std::filesystem::path& path, const LoadLimits& limits) {
  if (has_tflite_extension(path) || is_tflite_bytes(bytes)) return import_tflite_bytes(bytes, path.string(), limits);
  return import_onnx_bytes(bytes, path.string(), limits);
}

Graph import_model(const std::filesystem::path& path, const LoadLimits& limits) {
  if (has_tflite_extension(path)) return import_tflite(path, limits);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    std::ifstream f(path, std::ios::binary);
    std::string head(8, '\0');
    f.read(head.data(), 8);
    if (f.gcount() == 8 && is_tflite_bytes(head)) return import_tflite(path, limits);
  }
  return import_onnx(path, limits);
}

}  // namespace furiosa::compiler
