// perf-guide's steps on MobileNetV2: the host operators each knob removes are gone from the
// profiler's external-operators rows of the next step, steps that do not apply say why, and the
// modelled device figures are present. Timings are printed, never asserted (benchmarks own them).
#include <fmt/format.h>

#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

/// The line of `out` starting with "   <prefix>", or "".
std::string row(const std::string& out, const std::string& prefix) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("   " + prefix, 0) == 0) return line;
  }
  return {};
}

/// Whitespace-separated fields of `line`.
std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

}  // namespace

TEST_CASE("perf-guide walks the guide's steps on MobileNetV2 and each knob removes its host operator",
          "[tools][perf_guide]") {
  const auto model = furiosa::test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx");
  const auto r = furiosa::test::run_command(
      fmt::format("FURIOSA_COMPILE_CACHE_DIR=off '{}' --part steps --seconds 0.2 --model '{}' 2>&1", FURIOSA_PERF_GUIDE_BINARY,
                  model.string()));
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const std::string baseline = row(r.out, "1. baseline");
  REQUIRE_FALSE(baseline.empty());
  CHECK_THAT(baseline, Catch::Contains("Quantize") && Catch::Contains("Dequantize"));
  // "1." "baseline", host us, p50 ms, QPS, samples/s, NPU Total, NPU Run: the modelled device
  // time is there.
  const auto f = fields(baseline);
  REQUIRE(f.size() >= 8);
  CHECK(std::stod(f[6]) > 0.0);  // NPU Total (us)
  CHECK(std::stod(f[7]) > 0.0);  // NPU Run (us)
  CHECK(std::stod(f[7]) <= std::stod(f[6]));
  const std::string without_quantize = row(r.out, "2. + without_quantize");
  REQUIRE_FALSE(without_quantize.empty());
  CHECK_THAT(without_quantize, Catch::Contains("Dequantize"));
  CHECK_THAT(without_quantize, !Catch::Contains(", Quantize") && !Catch::Contains(" Quantize "));
  // 224 wide images and a 2-D output: nothing to relayout, and no image output for pixels.
  CHECK_THAT(row(r.out, "3. + remove_lower"), Catch::Contains("n/a: no host Lower/Unlower runs"));
  CHECK_THAT(row(r.out, "4. + normalized_pixel_outputs"), Catch::Contains("n/a: no image output"));
  CHECK_FALSE(row(r.out, "5. batch 8").empty());
  CHECK_FALSE(row(r.out, "6. two single PEs, worker_num 4").empty());
  CHECK_FALSE(row(r.out, "7. async queue").empty());
  CHECK_THAT(row(r.out, "chosen:"), Catch::Contains("without_quantize [input]"));
  CHECK_THAT(r.out, Catch::Contains("host Dequantize of [1, 1917, 91]"));
}
