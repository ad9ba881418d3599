// Helpers shared by the targeted cases of the host operator library's tests (test_cpu_ops_*.cpp):
// making a node and tensors, reading a tensor's values, running a one-output node, a fill.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/host/cpu_ops.h"
#include "test_support.h"

namespace furiosa::test::cpu_ops_tests {

inline compiler::Node make_node(const std::string& op, int n_inputs,
                                std::map<std::string, compiler::Attribute> attrs = {},
                                int n_outputs = 1) {
  compiler::Node n;
  n.name = "t_" + op;
  n.op_type = op;
  for (int i = 0; i < n_inputs; ++i) n.inputs.push_back(i);
  for (int i = 0; i < n_outputs; ++i) n.outputs.push_back(100 + i);
  n.attributes = std::move(attrs);
  return n;
}

template <class T>
Tensor make(DType dt, Shape shape, const std::vector<T>& v) {
  REQUIRE(dtype_size(dt) == sizeof(T));
  std::vector<std::byte> bytes(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return Tensor(dt, std::move(shape), std::move(bytes));
}
inline Tensor f32(Shape s, const std::vector<float>& v) {
  return make(DType::Float32, std::move(s), v);
}
inline Tensor i64(Shape s, const std::vector<std::int64_t>& v) {
  return make(DType::Int64, std::move(s), v);
}

template <class T>
std::vector<T> values(const Tensor& t) {
  auto s = t.as<T>();
  return {s.begin(), s.end()};
}

inline Tensor run1(const compiler::Node& n, const std::vector<const Tensor*>& in) {
  auto out = host::run_cpu_op(n, in);
  REQUIRE(out.size() == 1);
  return std::move(out[0]);
}

// Deterministic pseudo-random fill.
inline std::vector<float> ramp(std::size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  std::uint32_t s = 12345;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * scale;
  }
  return v;
}

}  // namespace furiosa::test::cpu_ops_tests
