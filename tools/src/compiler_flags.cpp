// Command-line flags of the compiler's knobs (compiler_flags.h).
#include "src/compiler_flags.h"

#include <fmt/format.h>

#include <charconv>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"

namespace furiosa::tools {
namespace {

// "NAME=I0,I1,..." of flag `flag` as the name and the integers; `expected` describes the form,
// `item` names one integer. Throws Error(InvalidArgument) naming the flag and the value.
std::pair<std::string, std::vector<std::int64_t>> parse_name_and_list(const std::string& spec,
                                                                      std::string_view flag,
                                                                      std::string_view expected,
                                                                      std::string_view item_name) {
  const auto eq = spec.find('=');
  auto bad = [&](std::string_view why) {
    return Error(ErrorCode::InvalidArgument, fmt::format("{} '{}': {} (expected INPUT={})", flag,
                                                         escape_text(spec), why, expected));
  };
  if (eq == std::string::npos || eq == 0) throw bad("no INPUT= before the list");
  std::vector<std::int64_t> values;
  std::string_view rest = std::string_view(spec).substr(eq + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size()) {
      throw bad(fmt::format("'{}' is not {}", escape_text(item), item_name));
    }
    values.push_back(v);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (values.empty()) throw bad("empty list");
  return {spec.substr(0, eq), std::move(values)};
}

}  // namespace

void add_compiler_flags(CLI::App& app, CompilerFlags& flags) {
  app.add_option("--without-quantize", flags.without_quantize,
                 "INPUT is given already quantized (uint8/int8 with the model's input scale and zero point): "
                 "no host Quantize; repeatable");
  app.add_option("--normalized-pixel-outputs", flags.normalized_pixel_outputs,
                 "OUTPUT is returned as uint8 pixels (value x 255) instead of floats in [0, 1]: no host "
                 "Dequantize; repeatable");
  app.add_option("--permute-input", flags.permute_input,
                 "INPUT=P0,P1,...: INPUT is given with its axes permuted like torch.permute (the "
                 "performance guide's rule): images=0,2,3,1 feeds NHWC images to an NCHW model, "
                 "images=0,3,1,2 NCHW images to an NHWC model; repeatable");
  app.add_option(
      "--input-shape", flags.input_shapes,
      "INPUT=D0,D1,...: pins the symbolic (free) dims of INPUT's shape, like ONNX Runtime's "
      "free-dimension overrides, so shape subgraphs fold at compile time; fixed dims must match "
      "(e.g. images=1,3,640,640); repeatable");
  app.add_flag("--remove-lower", flags.remove_lower,
               "NPU-program inputs are given in the NPU's lowered layout (rows padded to 32): no host Lower");
  app.add_flag("--remove-unlower", flags.remove_unlower,
               "NPU-program outputs are returned in the lowered layout: no host Unlower");
  app.add_option("--target-npu", flags.target_npu, "warboy (single PE) or warboy-2pe (fused PE)")
      ->check(CLI::IsMember({"warboy", "warboy-2pe"}));
}

void apply_compiler_flags(const CompilerFlags& flags, program::CompilerOptions& options) {
  options.without_quantize = flags.without_quantize;
  options.normalized_pixel_outputs = flags.normalized_pixel_outputs;
  options.remove_lower = flags.remove_lower;
  options.remove_unlower = flags.remove_unlower;
  if (!flags.target_npu.empty()) options.pe_count = program::parse_target_npu(flags.target_npu);
  for (const std::string& spec : flags.permute_input) {
    auto [name, perm] =
        parse_name_and_list(spec, "--permute-input", "P0,P1,..., e.g. images=0,2,3,1", "an axis");
    options.permute_input[name] = std::move(perm);
  }
  for (const std::string& spec : flags.input_shapes) {
    auto [name, shape] =
        parse_name_and_list(spec, "--input-shape", "D0,D1,..., e.g. images=1,3,640,640", "a dim");
    options.input_shapes[name] = std::move(shape);
  }
}

}  // namespace furiosa::tools
