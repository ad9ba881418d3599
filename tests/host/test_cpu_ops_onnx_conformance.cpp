// Host operator library: conformance with every ONNX backend node test of its operators.
// The host (CPU fallback) operator library against every ONNX backend node test of Debian's
// libonnx-testdata that exercises one of its operators; the targeted cases for what the backend
// tests do not cover (dtypes, attribute variants of older/newer opsets, errors) are in the other
// test_cpu_ops_*.cpp files.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/host/cpu_ops.h"
#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"
#include "test_support.h"

using namespace furiosa;
using compiler::Node;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Finding the node tests of an op: a minimal protobuf wire-format reader for the op types of a
// ModelProto's nodes. The importer cannot be used for this: it rejects models with float16,
// double or string tensors before telling which op they test, and those must count as skipped
// cases of their op, not vanish.
// ---------------------------------------------------------------------------------------------

struct WireReader {
  const unsigned char* p;
  const unsigned char* end;

  bool varint(std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      const unsigned char b = *p++;
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Next field; `bytes` is set for length-delimited fields. False at the end or on bad input.
  bool next(std::uint64_t& field, std::string_view& bytes) {
    if (p >= end) return false;
    std::uint64_t key = 0, v = 0;
    if (!varint(key)) return false;
    field = key >> 3;
    bytes = {};
    switch (key & 7) {
      case 0: return varint(v);
      case 1: p += 8; return p <= end;
      case 5: p += 4; return p <= end;
      case 2:
        if (!varint(v) || v > static_cast<std::uint64_t>(end - p)) return false;
        bytes = std::string_view(reinterpret_cast<const char*>(p), v);
        p += v;
        return true;
      default: return false;
    }
  }
};

WireReader reader(std::string_view s) {
  auto* b = reinterpret_cast<const unsigned char*>(s.data());
  return {b, b + s.size()};
}

// "domain::op_type" (or op_type) of every node of the model's graph.
std::vector<std::string> model_node_ops(const std::string& model) {
  std::vector<std::string> ops;
  std::uint64_t f = 0;
  std::string_view graph, sub;
  for (auto m = reader(model); m.next(f, graph);) {
    if (f != 7) continue;  // ModelProto.graph
    for (auto g = reader(graph); g.next(f, sub);) {
      if (f != 1) continue;  // GraphProto.node
      std::string op, domain;
      std::string_view field;
      for (auto n = reader(sub); n.next(f, field);) {
        if (f == 4) op = field;      // NodeProto.op_type
        if (f == 7) domain = field;  // NodeProto.domain
      }
      ops.push_back(domain.empty() || domain == "ai.onnx" ? op : domain + "::" + op);
    }
  }
  return ops;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ONNX backend-test comparison: |actual - expected| <= atol + rtol * |expected| (numpy
// assert_allclose, ONNX's defaults rtol=1e-3, atol=1e-7); integers exactly. Returns "" or what
// differs.
std::string compare(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype()) {
    return fmt::format("dtype {} != expected {}", dtype_name(actual.dtype()),
                       dtype_name(expected.dtype()));
  }
  if (actual.shape() != expected.shape()) {
    return fmt::format("shape {} != expected {}", shape_to_string(actual.shape()),
                       shape_to_string(expected.shape()));
  }
  constexpr double rtol = 1e-3, atol = 1e-7;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(actual.elements()); ++i) {
    const double a = test::element(actual, i), e = test::element(expected, i);
    bool ok;
    if (actual.dtype() != DType::Float32) {
      ok = a == e;
    } else if (std::isnan(e) || std::isnan(a)) {
      ok = std::isnan(e) && std::isnan(a);
    } else if (std::isinf(e) || std::isinf(a)) {
      ok = a == e;
    } else {
      ok = std::abs(a - e) <= atol + rtol * std::abs(e);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  return fmt::format("{} of {} elements differ; first at flat index {}: {} vs expected {}", bad,
                     actual.elements(), first, test::element(actual, first),
                     test::element(expected, first));
}

struct OpStats {
  int found = 0;
  int run = 0;
  std::vector<std::string> skipped;  // "case: reason"
};

// Ops whose node tests in libonnx-testdata 1.12 all use element types the IR cannot hold: every
// single-node Cast test casts from or to float16, bfloat16, double or string. They still must
// have cases (all skipped as unsupported dtypes), and are covered by the targeted tests
// (test_cpu_ops_arithmetic.cpp).
const std::set<std::string> kNoImportableCase = {"Cast"};

// Node test cases of listed ops that are not run, each with its reason. Any other case that the
// importer or cpu_op_supported refuses, or whose results differ, fails the test -- except cases
// whose model uses an element type the IR cannot hold (float16, double, int16, uint16, uint32,
// uint64, bool, string, sequences): those are counted as skipped, since no operator could run
// them. A listed case that is not in the data fails the test too (a stale entry).
const std::map<std::string, std::string> kExcludedCases = {
    {"test_identity_opt", "optional values are not tensors; the IR holds tensors only"},
    {"test_identity_sequence", "sequences are not tensors; the IR holds tensors only"},
    {"test_resize_downsample_scales_cubic_align_corners",
     "align_corners with a fractional input * scale (4 x 0.8): the ONNX reference divides by "
     "(input * scale - 1), ONNX Runtime and this library by (output size - 1); ONNX Runtime's "
     "backend-test filters exclude this case too ('results mismatch with onnx tests')"},
    {"test_resize_downsample_scales_linear_align_corners",
     "align_corners with a fractional input * scale: the ONNX reference divides by "
     "(input * scale - 1), ONNX Runtime (the project's reference) and this library by (output "
     "size - 1); ONNX Runtime excludes this case too"},
};

}  // namespace

TEST_CASE("cpu ops: ONNX backend node tests, one per single-node test of each listed op",
          "[compiler][cpu_ops][onnx]") {
  const fs::path root = FURIOSA_ONNX_TESTDATA_DIR;
  REQUIRE(fs::is_directory(root));
  const auto op_list = host::cpu_op_list();
  std::map<std::string, OpStats> stats;
  for (const auto& op : op_list) stats[op];

  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_", 0) == 0)
      dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  REQUIRE(dirs.size() > 100);

  int total_run = 0, total_skipped = 0;
  std::set<std::string> excluded_found;
  for (const auto& dir : dirs) {
    const auto ops = model_node_ops(read_bytes(dir / "model.onnx"));
    if (ops.size() != 1 || !stats.count(ops[0])) continue;
    const std::string& op = ops[0];
    const std::string name = dir.filename().string();
    OpStats& st = stats[op];
    ++st.found;
    auto skip = [&](const std::string& why) {
      st.skipped.push_back(fmt::format("{}: {}", name, why));
      ++total_skipped;
      WARN("skipped " << op << " case " << name << ": " << why);
    };
    if (auto ex = kExcludedCases.find(name); ex != kExcludedCases.end()) {
      excluded_found.insert(name);
      skip("excluded: " + ex->second);
      continue;
    }

    compiler::Graph g;
    try {
      g = compiler::import_onnx(test::onnx_node_test(name) / "model.onnx");
    } catch (const Error& e) {
      REQUIRE(e.code() == ErrorCode::IncompatibleModel);  // anything else is a broken importer
      INFO("ONNX node test " << name << " is refused by the importer and not in kExcludedCases");
      CHECK_THAT(e.message(), Catch::Contains("has element type"));
      skip("unsupported dtype: " + e.message());
      continue;
    }
    REQUIRE(g.nodes.size() == 1);
    const Node& node = g.nodes[0];
    std::vector<DType> dtypes;
    for (int id : node.inputs)
      dtypes.push_back(id >= 0 ? g.values[static_cast<std::size_t>(id)].dtype : DType::Float32);
    std::string why;
    if (!host::cpu_op_supported(node, dtypes, &why)) {
      REQUIRE(!why.empty());
      FAIL_CHECK("ONNX node test " << name << " is refused and not in kExcludedCases: " << why);
      skip("cpu_op_supported: " + why);
      continue;
    }

    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
        sets.push_back(e.path());
    }
    std::sort(sets.begin(), sets.end());
    REQUIRE(!sets.empty());
    for (const auto& set : sets) {
      INFO("ONNX node test " << name << " / " << set.filename().string());
      std::map<int, Tensor> values;  // graph inputs and expected outputs by value id
      for (std::size_t i = 0; i < g.inputs.size(); ++i) {
        values[g.inputs[i]] = compiler::load_tensor_pb(set / fmt::format("input_{}.pb", i));
      }
      std::map<int, Tensor> expected;
      for (std::size_t i = 0; i < g.outputs.size(); ++i) {
        expected[g.outputs[i]] = compiler::load_tensor_pb(set / fmt::format("output_{}.pb", i));
      }
      std::vector<const Tensor*> inputs;
      std::vector<host::CpuValueInfo> infos(node.inputs.size());
      std::vector<const host::CpuValueInfo*> info_ptrs;
      for (std::size_t k = 0; k < node.inputs.size(); ++k) {
        const int id = node.inputs[k];
        if (id < 0) {
          inputs.push_back(nullptr);
          info_ptrs.push_back(nullptr);
          continue;
        }
        const auto& v = g.values[static_cast<std::size_t>(id)];
        const Tensor* t = v.constant ? &*v.constant : &values.at(id);
        inputs.push_back(t);
        // Every value of a backend test is known, so every input is passed as a constant.
        infos[k] = {t->dtype(), t->shape(), t};
        info_ptrs.push_back(&infos[k]);
      }

      std::vector<std::pair<DType, Shape>> inferred;
      std::vector<Tensor> outputs;
      try {
        inferred = host::cpu_op_infer(node, info_ptrs);
        outputs = host::run_cpu_op(node, inputs);
      } catch (const Error& e) {
        FAIL_CHECK("threw " << e.what());
        continue;
      }
      REQUIRE(outputs.size() == node.outputs.size());
      REQUIRE(inferred.size() == node.outputs.size());
      for (std::size_t k = 0; k < node.outputs.size(); ++k) {
        INFO("output " << k);
        auto it = expected.find(node.outputs[k]);
        if (it == expected.end()) continue;
        CHECK(inferred[k].first == it->second.dtype());
        CHECK(shape_to_string(inferred[k].second) == shape_to_string(it->second.shape()));
        CHECK(compare(outputs[k], it->second) == "");
      }
    }
    ++st.run;
    ++total_run;
  }

  std::ostringstream summary;
  summary << fmt::format("cpu ops ONNX conformance: {} ops, {} cases run, {} cases skipped\n",
                         op_list.size(), total_run, total_skipped);
  for (const auto& op : op_list) {
    const auto& s = stats[op];
    summary << fmt::format("  {:<22} run {:>2}  skipped {:>2}\n", op, s.run, s.skipped.size());
    for (const auto& sk : s.skipped) summary << "      skipped " << sk << "\n";
  }
  std::cout << summary.str() << std::flush;

  for (const auto& [name, why] : kExcludedCases) {
    INFO("kExcludedCases lists " << name << " (" << why
                                 << "), which is no node test of a listed op");
    CHECK(excluded_found.count(name) == 1);
  }
  for (const auto& op : op_list) {
    INFO("op " << op);
    const auto& s = stats[op];
    if (kNoImportableCase.count(op)) {
      // Justified only while the data has cases for it and none of them can be imported.
      CHECK(s.found > 0);
      CHECK(s.run == 0);
    } else {
      REQUIRE(s.run >= 1);
    }
  }
}
