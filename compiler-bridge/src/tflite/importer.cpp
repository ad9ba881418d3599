// The TFLite importer's driver (importer.h): run() over subgraph 0, the errors that name the model
// and operator, the operator codes, the dispatch to the operator families, and the public
// import_tflite* functions (compiler/tflite_import.h). The arithmetic each operator follows is
// written at its mapping, with TFLite's source it comes from: multipliers (QuantizeMultiplier),
// fused activations and windows in operator_common.cpp, the operator families in their files.
#include <fmt/format.h>
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

#include "furiosa/compiler/tflite_import.h"
#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"
#include "furiosa/core/text.h"
#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {
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
  kDepthToSpace = 5,
  kDequantize = 6,
  kFullyConnected = 9,
  kLogistic = 14,
  kMaxPool2d = 17,
  kReluN1To1 = 20,
  kRelu6 = 21,
  kMul = 18,
  kReshape = 22,
  kResizeBilinear = 23,
  kSoftmax = 25,
  kSpaceToDepth = 26,
  kCustom = 32,
  kPad = 34,
  kGather = 36,
  kBatchToSpaceNd = 37,
  kSpaceToBatchNd = 38,
  kTranspose = 39,
  kMean = 40,
  kSub = 41,
  kDiv = 42,
  kStridedSlice = 45,
  kExp = 47,
  kSplit = 49,
  kCast = 53,
  kPrelu = 54,
  kMaximum = 55,
  kArgMax = 56,
  kMinimum = 57,
  kPadV2 = 60,
  kSlice = 65,
  kTransposeConv = 67,
  kTile = 69,
  kSqrt = 75,
  kRsqrt = 76,
  kSum = 74,
  kShape = 77,
  kArgMin = 79,
  kReduceMax = 82,
  kPack = 83,
  kFill = 94,
  kRange = 96,
  kResizeNearestNeighbor = 97,
  kLeakyRelu = 98,
  kSquaredDifference = 99,
  kMirrorPad = 100,
  kSplitV = 102,
  kGatherNd = 107,
  kQuantize = 114,
  kHardSwish = 117,
};
// The tensor types of the operator table, as bits of a set, in the order the operator index
// lists them.
enum TypeBit : unsigned {
  kF32 = 1u << 0,
  kU8 = 1u << 1,
  kI8 = 1u << 2,
  kI32 = 1u << 3,
  kI64 = 1u << 4,
};
constexpr unsigned k8 = kU8 | kI8;
constexpr unsigned kOther = kF32 | kI32 | kI64;  // data movement the NPU leaves to the host
constexpr unsigned kAny = kF32 | k8 | kI32 | kI64;
constexpr unsigned kAllFloat = kF32 | k8;
constexpr unsigned kArith = kF32 | k8 | kI32;

// The supported builtins, in the order tflite_supported_operators() lists them: the one source of
// the tensor types each operator takes. The type of input `operand` must be in npu | host, or
// check_operand_type() refuses the operator before its mapping runs; tflite_operator_table() (and
// so docs/operators.md's generated operator index) renders the same sets. `npu`: the types whose
// instances the mapping places on the NPU (8-bit only); `host`: those it runs on the host (or
// folds to constants). The mappings may refuse further cases (parameters, other operands' types),
// each naming why.
struct BuiltinRow {
  int code;
  unsigned npu;
  unsigned host;
  int operand = 0;             ///< the input whose type the sets name; -1: none (SHAPE)
  const char* npu_note = "";   ///< text after the NPU types in the index
  const char* host_note = "";  ///< text after the host types in the index
};
// clang-format off
constexpr std::array<BuiltinRow, 54> kSupported = {{
    {kAdd, k8, kF32 | kI32},
    {kAveragePool2d, k8, k8, 0, "(one window over the whole input)"},
    {kConcatenation, k8, kOther},
    {kConv2d, k8, 0},
    {kDepthwiseConv2d, k8, 0},
    {kDequantize, 0, k8, 0, "", "(to float32)"},
    {kFullyConnected, k8, 0},
    {kMaxPool2d, k8, 0},
    {kReshape, k8, kOther},
    {kResizeBilinear, k8, kF32},
    {kSoftmax, 0, kAllFloat, 0, "", "(in float32)"},
    {kPad, k8, kF32},
    {kArgMax, 0, kAny},
    {kArgMin, 0, kAny},
    {kResizeNearestNeighbor, 0, kAllFloat},
    {kQuantize, k8, kF32, 0, "(to uint8, int8)", "(to uint8, int8)"},
    {kMean, 0, kAllFloat},
    {kShape, 0, 0, -1, "", "none: a constant"},
    {kStridedSlice, k8, kOther},
    {kPack, k8, kOther},
    {kTile, 0, kAny},
    {kGather, 0, kAny},
    {kCast, 0, kAny},
    {kFill, 0, kAny, 1},
    {kRange, 0, kOther},
    {kLogistic, k8, kF32},
    {kSub, 0, kArith},
    {kMul, 0, kArith},
    {kPrelu, 0, kAllFloat},
    {kMinimum, 0, kAny},
    {kMaximum, 0, kAny},
    {kLeakyRelu, k8, kF32},
    {kTranspose, k8, kOther},
    {kHardSwish, k8, kF32},
    {kGatherNd, 0, kAny},
    {kSplit, k8, kOther, 1},
    {kSplitV, k8, kOther},
    {kDepthToSpace, k8, kOther},
    {kSpaceToDepth, k8, kOther},
    {kExp, kI8, kF32},
    {kSquaredDifference, 0, kF32 | kI8},
    {kRsqrt, kI8, kF32},
    {kSqrt, 0, kF32},
    {kDiv, 0, kF32 | kU8 | kI32},
    {kSlice, k8, kOther},
    {kPadV2, k8, kF32},
    {kMirrorPad, 0, kAny},
    {kRelu6, k8, kF32},
    {kReluN1To1, k8, kF32},
    {kSum, 0, kU8},
    {kReduceMax, 0, kAllFloat},
    {kSpaceToBatchNd, k8, kOther},
    {kBatchToSpaceNd, k8, kOther},
    {kTransposeConv, k8, kF32, 2},
}};
// clang-format on

// Custom operators the importer maps (OperatorCode.custom_code of a CUSTOM operator).
constexpr const char* kDetectionPostProcess = "TFLite_Detection_PostProcess";
// Its row: the boxes' type (uint8 and int8 inputs are dequantized).
constexpr BuiltinRow kDetectionRow = {.code = kCustom,
                                      .npu = 0,
                                      .host = kAllFloat,
                                      .host_note = "(uint8, int8 dequantized to float32)"};

/// The bit of DType d.
unsigned type_bit(DType d) {
  switch (d) {
    case DType::Float32: return kF32;
    case DType::UInt8: return kU8;
    case DType::Int8: return kI8;
    case DType::Int32: return kI32;
    case DType::Int64: return kI64;
  }
  return 0;
}

/// The types of a set, "float32, uint8" ("" for none).
std::string type_list(unsigned set) {
  std::string out;
  for (DType d : {DType::Float32, DType::UInt8, DType::Int8, DType::Int32, DType::Int64}) {
    if (set & type_bit(d)) out += (out.empty() ? "" : ", ") + std::string(dtype_name(d));
  }
  return out;
}

/// A cell of the operator index: the types, then the note ("" when both are empty).
std::string type_cell(unsigned set, const char* note) {
  const std::string types = type_list(set);
  if (!*note) return types;
  return types.empty() ? std::string(note) : types + " " + note;
}

/// The row of builtin `code` (the detection row for CUSTOM), or null when unsupported.
const BuiltinRow* find_row(int code) {
  if (code == kCustom) return &kDetectionRow;
  for (const auto& r : kSupported) {
    if (r.code == code) return &r;
  }
  return nullptr;
}

bool is_supported(int code) { return code != kCustom && find_row(code) != nullptr; }

}  // namespace

Graph Importer::run() {
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
      const std::size_t first_node = g_.nodes.size();
      check_operand_type(op);
      map_operator(op);
      fold_shape_values(op, first_node);
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

void Importer::load_failed(const std::string& msg) const {
  throw Error(ErrorCode::ModelLoadFailed, fmt::format("{}: {}", source_, msg), ErrorSubject::of_file(source_));
}

std::string Importer::where() const {
  return op_index_ < 0 ? source_ : fmt::format("{}: operator {} ({})", source_, op_index_, op_name_);
}

void Importer::bad(const std::string& msg) const {
  throw Error(ErrorCode::IncompatibleModel, fmt::format("{}: {}", where(), msg));
}

void Importer::unsupported(const std::string& msg) const {
  throw Error(ErrorCode::UnsupportedOperator, fmt::format("{}: {}", where(), msg));
}

std::string Importer::custom_code(const fb::Operator& op) const {
  const fb::OperatorCode& c = *m_.operator_codes()->Get(op.opcode_index());  // checked by builtin_code
  return c.custom_code() ? c.custom_code()->str() : "";
}

int Importer::builtin_code(const fb::Operator& op) const {
  const auto* codes = m_.operator_codes();
  if (!codes || op.opcode_index() >= codes->size()) {
    load_failed(fmt::format("operator {} has opcode index {}, the model has {} operator codes", op_index_,
                            op.opcode_index(), codes ? codes->size() : 0));
  }
  const fb::OperatorCode& c = *codes->Get(op.opcode_index());
  // Files from before code 127 only fill the int8 field; newer ones fill both.
  return std::max<int>(c.deprecated_builtin_code(), c.builtin_code());
}

void Importer::check_operators() const {
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
      what += fmt::format(", custom code '{}'", c.custom_code() ? escape_text(c.custom_code()->str(), 64) : "");
    }
    bad_ops.push_back(what);
  }
  if (bad_ops.empty()) return;
  // One line (README): the unsupported operators, then the supported set.
  constexpr std::size_t kShown = 8;
  std::string msg = fmt::format("{}: {} TFLite operator(s) cannot run: ", source_, bad_ops.size());
  for (std::size_t i = 0; i < bad_ops.size() && i < kShown; ++i) msg += (i == 0 ? "" : "; ") + bad_ops[i];
  if (bad_ops.size() > kShown) msg += fmt::format("; and {} more", bad_ops.size() - kShown);
  msg += "; supported TFLite operators:";
  for (const auto& s : tflite_supported_operators()) msg += " " + s;
  throw Error(ErrorCode::UnsupportedOperator, msg, ErrorSubject::of_file(source_));
}

void Importer::check_operand_type(const fb::Operator& op) const {
  const BuiltinRow* row = find_row(code_);
  if (!row || row->operand < 0) return;
  const auto in = op_inputs(op);
  const auto k = static_cast<std::size_t>(row->operand);
  if (k >= in.size() || in[k] < 0) return;  // the mapping's arity check names what is missing
  const TInfo& ti = info(in[k]);
  const unsigned accepted = row->npu | row->host;
  if (ti.dtype && (type_bit(*ti.dtype) & accepted) != 0) return;
  std::string type = ti.dtype ? std::string(dtype_name(*ti.dtype)) : type_name(ti.type);
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  unsupported(fmt::format(
      "input {} '{}' is {}; {} takes {} only (its row of the importer's operator table, "
      "docs/operators.md)",
      k, escape_text(ti.name), type, op_name_, type_list(accepted)));
}

void Importer::map_operator(const fb::Operator& op) {
  switch (code_) {
    case kConv2d: return conv(op, false);
    case kDepthwiseConv2d: return conv(op, true);
    case kTransposeConv: return transpose_conv(op);
    case kFullyConnected: return fully_connected(op);
    case kAdd: return add(op);
    case kMaxPool2d: return pool(op, true);
    case kAveragePool2d: return pool(op, false);
    case kReshape: return reshape(op);
    case kSoftmax: return softmax(op);
    case kLogistic: return logistic(op);
    case kConcatenation: return concatenation(op);
    case kPad: return pad(op, false);
    case kPadV2: return pad(op, true);
    case kSlice: return slice(op);
    case kMirrorPad: return mirror_pad(op);
    case kRelu6: return relu_clamp(op, 0.0f, 6.0f);
    case kReluN1To1: return relu_clamp(op, -1.0f, 1.0f);
    case kQuantize: return quantize(op);
    case kDequantize: return dequantize(op);
    case kResizeBilinear: return resize(op, true);
    case kResizeNearestNeighbor: return resize(op, false);
    case kArgMax: return arg_min_max(op, true);
    case kArgMin: return arg_min_max(op, false);
    case kMean: return mean(op);
    case kSum: return sum(op);
    case kReduceMax: return reduce_max(op);
    case kShape: return shape_op(op);
    case kStridedSlice: return strided_slice(op);
    case kPack: return pack(op);
    case kTile: return tile(op);
    case kGather: return gather(op);
    case kCast: return cast(op);
    case kFill: return fill(op);
    case kRange: return range(op);
    case kSub: return tflite_binary(op, "sub");
    case kMul: return tflite_binary(op, "mul");
    case kDiv: return tflite_binary(op, "div");
    case kPrelu: return tflite_binary(op, "prelu");
    case kSquaredDifference: return tflite_binary(op, "squared_difference");
    case kMinimum: return min_max(op, false);
    case kMaximum: return min_max(op, true);
    case kLeakyRelu: return leaky_relu(op);
    case kTranspose: return transpose(op);
    case kHardSwish: return hard_swish(op);
    case kGatherNd: return gather_nd(op);
    case kSplit: return split(op, false);
    case kSplitV: return split(op, true);
    case kDepthToSpace: return depth_space(op, true);
    case kSpaceToDepth: return depth_space(op, false);
    case kSpaceToBatchNd: return space_batch(op, true);
    case kBatchToSpaceNd: return space_batch(op, false);
    case kExp: return exp_op(op);
    case kRsqrt: return rsqrt(op);
    case kSqrt: return sqrt_op(op);
    case kCustom:
      if (op_name_ == kDetectionPostProcess) return detection_postprocess(op);
      unsupported("is not supported");
    default: unsupported("is not supported");  // check_operators() already refused it
  }
}

}  // namespace furiosa::compiler::detail::tflite

namespace furiosa::compiler {

namespace fb = furiosa::tflite_fb;
using detail::tflite::kBuiltinNames;
using detail::tflite::kDetectionPostProcess;
using detail::tflite::kSupported;

std::string tflite_builtin_name(int code) {
  if (code >= 0 && static_cast<std::size_t>(code) < kBuiltinNames.size()) return kBuiltinNames[static_cast<std::size_t>(code)];
  return fmt::format("BUILTIN_{}", code);
}

std::vector<std::string> tflite_supported_operators() {
  std::vector<std::string> out;
  for (const auto& row : kSupported) out.push_back(tflite_builtin_name(row.code));
  out.push_back(std::string("CUSTOM:") + kDetectionPostProcess);
  return out;
}

std::vector<TfliteOperatorInfo> tflite_operator_table() {
  using detail::tflite::BuiltinRow;
  using detail::tflite::type_cell;
  auto info = [](std::string name, const BuiltinRow& row) {
    return TfliteOperatorInfo{std::move(name), type_cell(row.npu, row.npu_note),
                              type_cell(row.host, row.host_note), row.operand};
  };
  std::vector<TfliteOperatorInfo> out;
  for (const auto& row : kSupported) out.push_back(info(tflite_builtin_name(row.code), row));
  out.push_back(
      info(std::string("CUSTOM:") + kDetectionPostProcess, detail::tflite::kDetectionRow));
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
  return detail::tflite::Importer(*fb::GetModel(bytes.data()), source, limits).run();
}

Graph import_tflite(const std::filesystem::path& path, const LoadLimits& limits) {
  return import_tflite_bytes(read_regular_file(path, ErrorCode::ModelLoadFailed, "model file"), path.string(), limits);
}

}  // namespace furiosa::compiler
