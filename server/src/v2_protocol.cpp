// KServe v2 JSON + binary tensor data <-> runtime tensors (v2_protocol.h).
#include "furiosa/server/v2_protocol.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "bounded_json.h"
#include "furiosa/core/error.h"
#include "furiosa/core/text.h"

namespace furiosa::server {

using nlohmann::json;

std::string_view v2_datatype(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32: return "FP32";
    case DType::UInt8: return "UINT8";
    case DType::Int8: return "INT8";
    case DType::Int32: return "INT32";
    case DType::Int64: return "INT64";
  }
  return "";
}

std::optional<DType> dtype_of_v2(std::string_view datatype) noexcept {
  for (DType d : {DType::Float32, DType::UInt8, DType::Int8, DType::Int32, DType::Int64}) {
    if (datatype == v2_datatype(d)) return d;
  }
  return std::nullopt;
}

namespace {

[[noreturn]] void bad_tensor(const std::string& tensor, const std::string& message) {
  // The name may come from the request: escaped, so no request can forge lines in a log.
  throw Error(ErrorCode::InvalidInput, fmt::format("input '{}': {}", escape_text(tensor), message),
              ErrorSubject::of_tensor(tensor));
}

[[noreturn]] void bad_request(const std::string& message) {
  throw Error(ErrorCode::InvalidInput, "inference request: " + message);
}

/// Appends the numbers of a (possibly nested) JSON array, row-major. Iterative: an explicit
/// stack of (array, next index) instead of one call per level, so no nesting can exhaust the
/// thread's stack (the document's depth is bounded by parse_bounded_json anyway).
void flatten(const json& value, std::vector<const json*>& out, const std::string& tensor) {
  auto leaf = [&](const json& v) {
    if (v.is_number() || v.is_boolean()) {
      out.push_back(&v);
    } else {
      bad_tensor(tensor, fmt::format("\"data\" holds a {} where numbers were expected", v.type_name()));
    }
  };
  if (!value.is_array()) return leaf(value);
  std::vector<std::pair<const json*, std::size_t>> open{{&value, 0}};
  while (!open.empty()) {
    auto& [array, next] = open.back();
    if (next == array->size()) {
      open.pop_back();
      continue;
    }
    const json& v = (*array)[next++];
    if (v.is_array()) open.emplace_back(&v, 0);  // invalidates array/next: used no more
    else leaf(v);
  }
}

template <class T>
void store_numbers(const std::vector<const json*>& values, Tensor& tensor, const std::string& name) {
  auto out = tensor.as<T>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const json& v = *values[i];
    if constexpr (std::is_floating_point_v<T>) {
      out[i] = v.get<T>();
    } else {
      // Integers must be whole numbers within the type's range.
      double d = v.is_number_float() ? v.get<double>() : 0.0;
      if (v.is_number_float() && d != std::floor(d)) {
        bad_tensor(name, fmt::format("element {} is {}, not an integer", i, d));
      }
      long double x = v.is_number_unsigned()   ? static_cast<long double>(v.get<std::uint64_t>())
                      : v.is_number_integer() ? static_cast<long double>(v.get<std::int64_t>())
                                               : static_cast<long double>(d);
      if (x < static_cast<long double>(std::numeric_limits<T>::lowest()) ||
          x > static_cast<long double>(std::numeric_limits<T>::max())) {
        bad_tensor(name, fmt::format("element {} = {} is out of range", i, static_cast<double>(x)));
      }
      out[i] = static_cast<T>(x);
    }
  }
}

void store(const std::vector<const json*>& values, Tensor& tensor, const std::string& name) {
  switch (tensor.dtype()) {
    case DType::Float32: return store_numbers<float>(values, tensor, name);
    case DType::UInt8: return store_numbers<std::uint8_t>(values, tensor, name);
    case DType::Int8: return store_numbers<std::int8_t>(values, tensor, name);
    case DType::Int32: return store_numbers<std::int32_t>(values, tensor, name);
    case DType::Int64: return store_numbers<std::int64_t>(values, tensor, name);
  }
}

template <class T>
json numbers_of(const Tensor& tensor) {
  json out = json::array();
  for (T v : tensor.as<T>()) {
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>) out.push_back(static_cast<int>(v));
    else out.push_back(v);
  }
  return out;
}

json data_of(const Tensor& tensor) {
  switch (tensor.dtype()) {
    case DType::Float32: return numbers_of<float>(tensor);
    case DType::UInt8: return numbers_of<std::uint8_t>(tensor);
    case DType::Int8: return numbers_of<std::int8_t>(tensor);
    case DType::Int32: return numbers_of<std::int32_t>(tensor);
    case DType::Int64: return numbers_of<std::int64_t>(tensor);
  }
  return json::array();
}

std::optional<bool> binary_parameter(const json& object) {
  auto p = object.find("parameters");
  if (p == object.end() || !p->is_object()) return std::nullopt;
  auto b = p->find("binary_data");
  if (b == p->end()) return std::nullopt;
  if (!b->is_boolean()) bad_request("parameters.binary_data must be a boolean");
  return b->get<bool>();
}

}  // namespace

InferRequest decode_infer_request(std::string_view body, std::optional<std::size_t> header_length,
                                  const std::vector<runtime::TensorDesc>& model_inputs) {
  std::size_t json_size = body.size();
  if (header_length) {
    if (*header_length > body.size()) {
      bad_request(fmt::format("Inference-Header-Content-Length {} exceeds the body's {} bytes", *header_length,
                              body.size()));
    }
    json_size = *header_length;
  }
  // A request's JSON holds its tensors' elements (when not binary) and a little more: names,
  // datatypes, shapes, parameters, outputs asked for. Values beyond that bound cannot make a
  // valid request, and each would cost a tree node (bounded_json.h), so the parse stops there.
  std::size_t max_values = kMaxJsonRequestOverhead;
  for (const auto& d : model_inputs) {
    std::size_t elements = 1;
    for (const std::int64_t dim : d.shape)
      elements *= static_cast<std::size_t>(std::max<std::int64_t>(dim, 0));
    max_values += elements;
  }
  json request;
  const JsonParse parsed = parse_bounded_json(body.substr(0, json_size), request, max_values);
  if (parsed == JsonParse::TooDeep) {
    bad_request(fmt::format("the JSON is nested deeper than {} levels", kMaxJsonDepth));
  }
  if (parsed == JsonParse::TooManyValues) {
    bad_request(fmt::format(
        "the JSON holds more than {} values, and the model's inputs have {} elements in all",
        max_values, max_values - kMaxJsonRequestOverhead));
  }
  if (parsed != JsonParse::Ok || !request.is_object()) bad_request("the body is not a JSON object");
  InferRequest out;
  if (auto id = request.find("id"); id != request.end()) {
    if (!id->is_string()) bad_request("\"id\" must be a string");
    out.id = id->get<std::string>();
  }
  if (auto p = request.find("parameters"); p != request.end() && p->is_object()) {
    if (auto b = p->find("binary_data_output"); b != p->end()) {
      if (!b->is_boolean()) bad_request("parameters.binary_data_output must be a boolean");
      out.binary_data_output = b->get<bool>();
    }
    if (auto t = p->find("timeout_us"); t != p->end()) {
      if (!t->is_number_integer() || t->get<std::int64_t>() < 1) bad_request("parameters.timeout_us must be an integer >= 1");
      out.timeout_us = t->get<std::int64_t>();
    }
  }
  auto inputs = request.find("inputs");
  if (inputs == request.end() || !inputs->is_array()) bad_request("\"inputs\" must be an array");

  std::map<std::string, const json*> given;
  for (const auto& input : *inputs) {
    if (!input.is_object() || !input.contains("name") || !input["name"].is_string()) {
      bad_request("every input needs a string \"name\"");
    }
    const std::string name = input["name"].get<std::string>();
    bool known = false;
    for (const auto& d : model_inputs) known = known || d.name == name;
    if (!known) bad_tensor(name, "the model has no such input");
    if (!given.emplace(name, &input).second) bad_tensor(name, "given twice");
  }
  // Binary data comes in the order the inputs appear in the request.
  std::size_t offset = json_size;
  std::map<std::string, std::pair<std::size_t, std::size_t>> binary;  // name -> (offset, size)
  for (const auto& input : *inputs) {
    const std::string name = input["name"].get<std::string>();
    auto p = input.find("parameters");
    if (p == input.end() || !p->is_object() || !p->contains("binary_data_size")) continue;
    const auto& size = (*p)["binary_data_size"];
    if (!size.is_number_unsigned()) bad_tensor(name, "parameters.binary_data_size must be a non-negative integer");
    const auto n = size.get<std::size_t>();
    if (!header_length) bad_tensor(name, "binary_data_size given without an Inference-Header-Content-Length header");
    if (n > body.size() - offset) {
      bad_tensor(name, fmt::format("binary_data_size {} runs past the end of the body ({} bytes left)", n,
                                   body.size() - offset));
    }
    binary[name] = {offset, n};
    offset += n;
  }
  if (offset != body.size()) bad_request(fmt::format("{} bytes after the last binary input", body.size() - offset));

  for (const auto& desc : model_inputs) {
    auto it = given.find(desc.name);
    if (it == given.end()) bad_tensor(desc.name, "missing");
    const json& input = *it->second;
    const std::string datatype = input.value("datatype", "");
    if (datatype != v2_datatype(desc.dtype)) {
      bad_tensor(desc.name, fmt::format("datatype {} given, the model expects {}", datatype.empty() ? "(none)" : datatype,
                                        v2_datatype(desc.dtype)));
    }
    if (!input.contains("shape") || !input["shape"].is_array()) bad_tensor(desc.name, "\"shape\" must be an array");
    Shape shape;
    for (const auto& d : input["shape"]) {
      if (!d.is_number_integer()) bad_tensor(desc.name, "\"shape\" must hold integers");
      shape.push_back(d.get<std::int64_t>());
    }
    if (shape != desc.shape) {
      bad_tensor(desc.name, fmt::format("shape {} given, the model expects {}", shape_to_string(shape),
                                        shape_to_string(desc.shape)));
    }
    Tensor tensor(desc.dtype, shape);
    if (auto b = binary.find(desc.name); b != binary.end()) {
      if (b->second.second != tensor.size_bytes()) {
        bad_tensor(desc.name, fmt::format("binary_data_size {} bytes, the shape needs {}", b->second.second,
                                          tensor.size_bytes()));
      }
      std::memcpy(tensor.bytes().data(), body.data() + b->second.first, b->second.second);
    } else {
      if (!input.contains("data")) bad_tensor(desc.name, "no \"data\" and no binary_data_size");
      std::vector<const json*> values;
      flatten(input["data"], values, desc.name);
      if (static_cast<std::int64_t>(values.size()) != tensor.elements()) {
        bad_tensor(desc.name, fmt::format("\"data\" has {} elements, the shape needs {}", values.size(), tensor.elements()));
      }
      store(values, tensor, desc.name);
    }
    out.inputs.push_back(std::move(tensor));
  }

  if (auto outputs = request.find("outputs"); outputs != request.end()) {
    if (!outputs->is_array()) bad_request("\"outputs\" must be an array");
    for (const auto& o : *outputs) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) bad_request("every output needs a string \"name\"");
      out.outputs.push_back(o["name"].get<std::string>());
      if (auto b = binary_parameter(o)) out.binary_outputs.emplace_back(out.outputs.back(), *b);
    }
  }
  return out;
}

EncodedResponse encode_infer_response(const std::string& model_name, const std::string& model_version,
                                      const InferRequest& request,
                                      const std::vector<runtime::TensorDesc>& model_outputs,
                                      const std::vector<Tensor>& outputs) {
  std::vector<std::size_t> chosen;
  if (request.outputs.empty()) {
    for (std::size_t i = 0; i < model_outputs.size(); ++i) chosen.push_back(i);
  } else {
    for (const auto& name : request.outputs) {
      std::size_t i = 0;
      while (i < model_outputs.size() && model_outputs[i].name != name) ++i;
      if (i == model_outputs.size()) {
        throw Error(ErrorCode::InvalidInput,
                    fmt::format("output '{}': the model has no such output", escape_text(name)),
                    ErrorSubject::of_tensor(name));
      }
      chosen.push_back(i);
    }
  }
  json response = {{"model_name", model_name}, {"model_version", model_version}, {"outputs", json::array()}};
  if (!request.id.empty()) response["id"] = request.id;
  std::string binary;
  bool any_binary = false;
  for (std::size_t i : chosen) {
    const auto& desc = model_outputs[i];
    const Tensor& t = outputs.at(i);
    bool as_binary = request.binary_data_output;
    for (const auto& [name, b] : request.binary_outputs) {
      if (name == desc.name) as_binary = b;
    }
    json o = {{"name", desc.name}, {"datatype", v2_datatype(t.dtype())}, {"shape", t.shape()}};
    if (as_binary) {
      any_binary = true;
      o["parameters"] = {{"binary_data_size", t.size_bytes()}};
      binary.append(reinterpret_cast<const char*>(t.bytes().data()), t.size_bytes());
    } else {
      o["data"] = data_of(t);
    }
    response["outputs"].push_back(std::move(o));
  }
  EncodedResponse out;
  out.body = response.dump();
  if (any_binary) {
    out.header_length = out.body.size();
    out.body += binary;
  }
  return out;
}

std::string model_metadata_json(const std::string& name, const std::vector<std::string>& versions,
                                const std::string& platform, const runtime::Model& model) {
  auto tensors = [](const std::vector<runtime::TensorDesc>& descs) {
    json out = json::array();
    for (const auto& d : descs) out.push_back({{"name", d.name}, {"datatype", v2_datatype(d.dtype)}, {"shape", d.shape}});
    return out;
  };
  json m = {{"name", name}, {"versions", versions}, {"platform", platform},
            {"inputs", tensors(model.inputs)}, {"outputs", tensors(model.outputs)}};
  return m.dump();
}

std::string error_json(std::string_view message) {
  return json{{"error", std::string(message)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace furiosa::server
