// The TFLite importer's tensors (importer.h): the tensor table read from the FlatBuffer with every
// declared size checked before anything is allocated, constant buffers, quantization parameters
// (per tensor for activations, per channel for int8 weights), the IR values and nodes the
// mapping creates, and the two views of an image tensor: the model's NHWC and the NCHW the NPU
// kernels work on, linked by Transpose (or Reshape where the element orders coincide).
#include <fmt/format.h>

#include <cstring>

#include "furiosa/core/error.h"
#include "furiosa/device/isa.h"
#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

namespace {

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

// True when the NCHW and NHWC orders of a 4-D shape [N, H, W, C] list the elements identically
// (one channel, or one pixel), so a Reshape converts between them.
bool orders_coincide(const Shape& nhwc) { return nhwc[3] == 1 || nhwc[1] * nhwc[2] == 1; }

}  // namespace

std::string type_name(fb::TensorType t) {
  const char* n = fb::EnumNameTensorType(t);
  return n && *n ? n : fmt::format("type {}", static_cast<int>(t));
}

int Importer::tensor_index(int t, const char* what) const {
  if (t < 0 || static_cast<std::size_t>(t) >= t_.size()) {
    load_failed(fmt::format("{} refers to tensor {}, the subgraph has {}", what, t, t_.size()));
  }
  return t;
}

void Importer::read_tensors() {
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

DType Importer::dtype(int t) const {
  const TInfo& ti = info(t);
  if (!ti.dtype) {
    bad(fmt::format("tensor '{}' has element type {}, which is not supported (float32, uint8, int8, int32, "
                    "int64)", ti.name, type_name(ti.type)));
  }
  return *ti.dtype;
}

Tensor Importer::constant_tensor(int t) const {
  const TInfo& ti = info(t);
  if (!ti.data && ti.value) return *ti.value;
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

ChannelQuant Importer::channel_quant(int t) const {
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

Quant Importer::quant(int t) const {
  const ChannelQuant q = channel_quant(t);
  if (q.scales.size() != 1) {
    bad(fmt::format("tensor '{}' is quantized per channel ({} scales); activations must be quantized per tensor",
                    info(t).name, q.scales.size()));
  }
  return {q.scales[0], static_cast<std::int32_t>(q.zero_points[0])};
}

std::vector<std::int64_t> Importer::int_constant(int t, const char* what) const {
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

std::string Importer::unique_name(const std::string& name) {
  if (names_.insert(name).second) return name;
  for (int k = 1;; ++k) {
    std::string candidate = fmt::format("{}#{}", name, k);
    if (names_.insert(candidate).second) return candidate;
  }
}

int Importer::add_value(const std::string& name, DType d, Shape shape, std::string format) {
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

int Importer::add_constant(const std::string& name, Tensor t) {
  const int id = add_value(name, t.dtype(), t.shape());
  g_.values[static_cast<std::size_t>(id)].constant = std::move(t);
  return id;
}

int Importer::scale_constant(const std::string& name, const std::vector<float>& scales) {
  Tensor t(DType::Float32, scales.size() == 1 ? Shape{} : Shape{static_cast<std::int64_t>(scales.size())});
  std::copy(scales.begin(), scales.end(), t.as<float>().begin());
  return add_constant(name, std::move(t));
}

int Importer::zero_point_constant(const std::string& name, DType d, const std::vector<std::int64_t>& zps) {
  Tensor t(d, zps.size() == 1 ? Shape{} : Shape{static_cast<std::int64_t>(zps.size())});
  for (std::size_t i = 0; i < zps.size(); ++i) {
    if (d == DType::UInt8) t.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(zps[i]);
    else t.as<std::int8_t>()[i] = static_cast<std::int8_t>(zps[i]);
  }
  return add_constant(name, std::move(t));
}

int Importer::shape_constant(const std::string& name, const Shape& shape) {
  Tensor t(DType::Int64, {static_cast<std::int64_t>(shape.size())});
  std::copy(shape.begin(), shape.end(), t.as<std::int64_t>().begin());
  return add_constant(name, std::move(t));
}

void Importer::add_node(const std::string& op_type, const std::string& domain, std::vector<int> inputs,
                        std::vector<int> outputs, std::map<std::string, Attribute> attributes,
                        const std::string& suffix) {
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

void Importer::add_graph_input(int t) {
  const TInfo& ti = info(t);
  if (ti.data) return;  // a constant listed as input: it stays a constant
  const DType d = dtype(t);
  const int v = add_value(ti.name, d, ti.shape, ti.shape.size() == 4 ? "NHWC" : "");
  info(t).model = v;
  g_.inputs.push_back(v);
}

Shape Importer::nchw_shape(int t) const {
  const Shape& s = info(t).shape;
  return {s[0], s[3], s[1], s[2]};
}

int Importer::model_view(int t) {
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

int Importer::nchw_view(int t) {
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

int Importer::ordered_view(int t) {
  const TInfo& ti = info(t);
  if (ti.model < 0 && ti.nchw >= 0 && orders_coincide(ti.shape)) return ti.nchw;
  return model_view(t);
}

int Importer::output_nchw(int t) {
  if (info(t).shape.size() != 4) bad(fmt::format("output '{}' must be 4-D (NHWC)", info(t).name));
  const int v = add_value(info(t).name + "/nchw", dtype(t), nchw_shape(t));
  info(t).nchw = v;
  return v;
}

int Importer::output_model(int t) {
  const int v = add_value(info(t).name, dtype(t), info(t).shape, info(t).shape.size() == 4 ? "NHWC" : "");
  info(t).model = v;
  return v;
}

int Importer::int64_view(int t, const char* what) {
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

}  // namespace furiosa::compiler::detail::tflite
