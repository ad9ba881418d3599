// The TFLite peer from tests (tflite_peer.h).
#include "tflite_peer.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <cstring>
#include <random>

#include "furiosa/compiler/compiler.h"
#include "test_paths.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace furiosa::test {

namespace {

void write_bytes(const fs::path& p, const void* data, std::size_t n) {
  std::ofstream f(p, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  REQUIRE(f.good());
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

}  // namespace

std::vector<Tensor> run_tflite_peer(const fs::path& model, const std::vector<Tensor>& inputs,
                                    const std::vector<Tensor>& like) {
  const fs::path root = fs::path(FURIOSA_TFLITE_PEER_DIR) / "root";
  const fs::path libdir = root / "usr/lib/x86_64-linux-gnu";
  const fs::path lib = libdir / "libtensorflow-lite.so.2.14.1";
  const fs::path loader = libdir / "ld-linux-x86-64.so.2";
  if (!fs::exists(lib) || !fs::exists(loader)) {
    FAIL("the TFLite peer is missing from "
         << FURIOSA_TFLITE_PEER_DIR
         << " (the tflite_peer_install test could not fetch it; run it and read its output)");
  }
  const fs::path work = fs::path(FURIOSA_TFLITE_PEER_WORK_DIR) / model.stem();
  fs::create_directories(work);
  std::string cmd = fmt::format("{} --library-path {} {} {} {} {}", quoted(loader), quoted(libdir),
                                quoted(FURIOSA_TFLITE_PEER_RUN), quoted(lib), quoted(model),
                                quoted(work / "out"));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const fs::path p = work / fmt::format("in{}.bin", i);
    write_bytes(p, inputs[i].bytes().data(), inputs[i].size_bytes());
    cmd += " " + quoted(p);
  }
  const CommandResult r = run_command(cmd + " 2>&1");
  INFO(cmd << "\n" << r.out);
  REQUIRE(r.exit_code == 0);
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < like.size(); ++i) {
    const std::string bytes = read_all(work / fmt::format("out{}.bin", i));
    Tensor t(like[i].dtype(), like[i].shape());
    REQUIRE(bytes.size() == t.size_bytes());
    std::memcpy(t.bytes().data(), bytes.data(), bytes.size());
    out.push_back(std::move(t));
  }
  return out;
}

runtime::RunnerOptions peer_runner_options(const char* device) {
  runtime::RunnerOptions o;
  o.worker_num = 1;
  o.device = device;
  return o;
}

double worst_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(a.elements()); ++i) {
    worst = std::max(worst, std::abs(element(a, i) - element(b, i)));
  }
  return worst;
}

fs::path write_peer_model(const std::string& name, const std::string& bytes) {
  const fs::path dir = FURIOSA_TFLITE_PEER_WORK_DIR;
  fs::create_directories(dir);
  const fs::path p = dir / name;
  write_bytes(p, bytes.data(), bytes.size());
  return p;
}

Tensor seeded_ints(DType d, const Shape& shape, int lo, int hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  Tensor t(d, shape);
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.elements()); ++i) {
    const int v = dist(rng);
    switch (d) {
      case DType::UInt8: t.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(v); break;
      case DType::Int8: t.as<std::int8_t>()[i] = static_cast<std::int8_t>(v); break;
      case DType::Int32: t.as<std::int32_t>()[i] = v; break;
      default: FAIL("seeded_ints: dtype " << dtype_name(d));
    }
  }
  return t;
}

std::size_t distinct(const Tensor& t) {
  std::vector<double> v;
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.elements()); ++i)
    v.push_back(element(t, i));
  std::sort(v.begin(), v.end());
  return static_cast<std::size_t>(std::unique(v.begin(), v.end()) - v.begin());
}

std::vector<std::string> placements(const runtime::Runner& runner, const std::string& op) {
  std::vector<std::string> out;
  for (const auto& e : runner.compiled().report.entries) {
    if (e.op == op) out.push_back(e.placement);
  }
  return out;
}

}  // namespace furiosa::test
