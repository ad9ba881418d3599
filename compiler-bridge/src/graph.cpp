// Graph IR helpers.
#include "furiosa/compiler/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "furiosa/core/error.h"

namespace furiosa::compiler {
int Graph::find_value(const std::string& name) const {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

void Graph::bind_constant(const std::string& name, Tensor tensor) {
  int id = find_value(name);
  auto it = std::find(inputs.begin(), inputs.end(), id);
  if (id < 0 || it == inputs.end()) {
    throw Error(ErrorCode::InvalidInput, fmt::format("graph has no input named '{}'", name));
  }
  Value& v = values[id];
  if (v.dtype != tensor.dtype()) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("input '{}': declared {}, bound tensor is {}", name,
                            dtype_name(v.dtype), dtype_name(tensor.dtype())));
  }
  if (v.has_shape) {
    bool ok = v.shape.size() == tensor.shape().size();
    for (std::size_t i = 0; ok && i < v.shape.size(); ++i) {
      ok = v.shape[i] < 0 || v.shape[i] == tensor.shape()[i];
    }
    if (!ok) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("input '{}': declared shape {}, bound tensor has {}", name,
                              shape_to_string(v.shape), shape_to_string(tensor.shape())));
    }
  }
  v.shape = tensor.shape();
  v.dim_params.assign(v.shape.size(), "");
  v.has_shape = true;
  v.constant = std::move(tensor);
  inputs.erase(it);
}

std::vector<int> Graph::consumers(int id) const {
  std::vector<int> out;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    for (int in : nodes[n].inputs) {
      if (in == id) {
        out.push_back(static_cast<int>(n));
        break;
      }
    }
  }
  return out;
}

int Graph::producer(int id) const {
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    for (int out : nodes[n].outputs) {
      if (out == id) return static_cast<int>(n);
    }
  }
  return -1;
}

}  // namespace furiosa::compiler
