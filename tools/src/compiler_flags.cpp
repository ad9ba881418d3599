// Command-line flags of the compiler's knobs (compiler_flags.h).
#include "src/compiler_flags.h"

#include <fmt/format.h>

#include <charconv>

#include "furiosa/core/error.h"

namespace furiosa::tools {

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
    const auto eq = spec.find('=');
    auto bad = [&](std::string_view why) {
      return Error(
          ErrorCode::InvalidArgument,
          fmt::format("--permute-input '{}': {} (expected INPUT=P0,P1,..., e.g. images=0,2,3,1)",
                      spec, why));
    };
    if (eq == std::string::npos || eq == 0) throw bad("no INPUT= before the permutation");
    std::vector<std::int64_t> perm;
    std::string_view rest = std::string_view(spec).substr(eq + 1);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
      if (ec != std::errc() || end != item.data() + item.size()) throw bad(fmt::format("'{}' is not an axis", item));
      perm.push_back(v);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    if (perm.empty()) throw bad("empty permutation");
    options.permute_input[spec.substr(0, eq)] = std::move(perm);
  }
}

}  // namespace furiosa::tools
