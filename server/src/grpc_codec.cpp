// The KServe v2 gRPC codec (grpc_codec.h): ModelInferRequest <-> runtime tensors.
#include "furiosa/server/grpc_codec.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <type_traits>

#include "furiosa/core/error.h"
#include "furiosa/server/v2_protocol.h"

namespace furiosa::server {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

[[noreturn]] void bad_tensor(const std::string& tensor, const std::string& message) {
  throw Error(ErrorCode::InvalidInput, fmt::format("input '{}': {}", tensor, message),
              ErrorSubject::of_tensor(tensor));
}

/// Copies typed contents into `tensor`, range-checked.
template <class T, class Field>
void store(const Field& values, Tensor& tensor, const std::string& name) {
  if (static_cast<std::int64_t>(values.size()) != tensor.elements()) {
    bad_tensor(name, fmt::format("contents hold {} elements, the shape needs {}", values.size(),
                                 tensor.elements()));
  }
  auto out = tensor.as<T>();
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(v)) {
      if (v < static_cast<decltype(v)>(std::numeric_limits<T>::lowest()) ||
          v > static_cast<decltype(v)>(std::numeric_limits<T>::max())) {
        bad_tensor(name, fmt::format("element {} = {} is out of range", i, v));
      }
    }
    out[static_cast<std::size_t>(i)] = static_cast<T>(v);
  }
}

}  // namespace

std::vector<Tensor> decode_grpc_inputs(const ModelInferRequest& request,
                                       const std::vector<runtime::TensorDesc>& model_inputs) {
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("inference request: {} raw_input_contents for {} inputs",
                            request.raw_input_contents_size(), request.inputs_size()));
  }
  std::map<std::string, int> given;
  for (int j = 0; j < request.inputs_size(); ++j) {
    const auto& name = request.inputs(j).name();
    bool known = false;
    for (const auto& d : model_inputs) known = known || d.name == name;
    if (!known) bad_tensor(name, "the model has no such input");
    if (!given.emplace(name, j).second) bad_tensor(name, "given twice");
  }
  std::vector<Tensor> out;
  for (const auto& desc : model_inputs) {
    auto it = given.find(desc.name);
    if (it == given.end()) bad_tensor(desc.name, "missing");
    const auto& input = request.inputs(it->second);
    if (input.datatype() != v2_datatype(desc.dtype)) {
      bad_tensor(desc.name, fmt::format("datatype {} given, the model expects {}",
                                        input.datatype().empty() ? "(none)" : input.datatype(),
                                        v2_datatype(desc.dtype)));
    }
    Shape shape(input.shape().begin(), input.shape().end());
    if (shape != desc.shape) {
      bad_tensor(desc.name, fmt::format("shape {} given, the model expects {}",
                                        shape_to_string(shape), shape_to_string(desc.shape)));
    }
    Tensor tensor(desc.dtype, shape);
    if (raw) {
      if (input.has_contents()) bad_tensor(desc.name, "contents given beside raw_input_contents");
      const auto& bytes = request.raw_input_contents(it->second);
      if (bytes.size() != tensor.size_bytes()) {
        bad_tensor(desc.name, fmt::format("raw contents of {} bytes, the shape needs {}",
                                          bytes.size(), tensor.size_bytes()));
      }
      std::memcpy(tensor.bytes().data(), bytes.data(), bytes.size());
    } else {
      const auto& c = input.contents();
      switch (desc.dtype) {
        case DType::Float32: store<float>(c.fp32_contents(), tensor, desc.name); break;
        case DType::UInt8: store<std::uint8_t>(c.uint_contents(), tensor, desc.name); break;
        case DType::Int8: store<std::int8_t>(c.int_contents(), tensor, desc.name); break;
        case DType::Int32: store<std::int32_t>(c.int_contents(), tensor, desc.name); break;
        case DType::Int64: store<std::int64_t>(c.int64_contents(), tensor, desc.name); break;
      }
    }
    out.push_back(std::move(tensor));
  }
  return out;
}

std::vector<std::size_t> chosen_grpc_outputs(const ModelInferRequest& request,
                                             const std::vector<runtime::TensorDesc>& outputs) {
  std::vector<std::size_t> chosen;
  if (request.outputs_size() == 0) {
    for (std::size_t i = 0; i < outputs.size(); ++i) chosen.push_back(i);
    return chosen;
  }
  for (const auto& o : request.outputs()) {
    std::size_t i = 0;
    while (i < outputs.size() && outputs[i].name != o.name()) ++i;
    if (i == outputs.size()) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("output '{}': the model has no such output", o.name()),
                  ErrorSubject::of_tensor(o.name()));
    }
    chosen.push_back(i);
  }
  return chosen;
}

namespace {

template <class T, class Field>
void append(const Tensor& t, Field* field) {
  for (T v : t.as<T>()) field->Add(v);
}

}  // namespace

void encode_grpc_outputs(const std::vector<runtime::TensorDesc>& descs,
                         const std::vector<std::size_t>& chosen, bool raw,
                         const std::vector<Tensor>& outputs, ModelInferResponse& response) {
  for (std::size_t i : chosen) {
    const Tensor& t = outputs.at(i);
    auto* o = response.add_outputs();
    o->set_name(descs[i].name);
    o->set_datatype(std::string(v2_datatype(t.dtype())));
    for (auto d : t.shape()) o->add_shape(d);
    if (raw) {
      response.add_raw_output_contents(reinterpret_cast<const char*>(t.bytes().data()),
                                       t.size_bytes());
      continue;
    }
    auto* c = o->mutable_contents();
    switch (t.dtype()) {
      case DType::Float32: append<float>(t, c->mutable_fp32_contents()); break;
      case DType::UInt8: append<std::uint8_t>(t, c->mutable_uint_contents()); break;
      case DType::Int8: append<std::int8_t>(t, c->mutable_int_contents()); break;
      case DType::Int32: append<std::int32_t>(t, c->mutable_int_contents()); break;
      case DType::Int64: append<std::int64_t>(t, c->mutable_int64_contents()); break;
    }
  }
}

}  // namespace furiosa::server
