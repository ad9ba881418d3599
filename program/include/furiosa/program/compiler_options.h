// The options a model is compiled with (FuriosaAI's `compiler_config`): written into every program
// file and part of the compile cache key, so the runtime reads them without the compiler.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace furiosa::program {

/// Compiler options, named as in FuriosaAI's SDK compiler config and `furiosa compile` (the
/// performance guide's knobs; docs/compiler-options.md gives each one's exact effect). A knob
/// changes how tensors cross the host boundary, never the values computed.
struct CompilerOptions {
  /// Value bound to a symbolic dim 0 (batch) of graph inputs. Must be >= 1.
  std::int64_t batch_size = 1;
  /// Number of PEs the program will run on: 1 = single PE (`--target-npu warboy`), 2 = fused
  /// PE (`warboy-2pe`). The runtime sets it from the device it opens.
  int pe_count = 2;
  /// Inputs (by name) the caller gives already quantized: uint8/int8 with the scale and zero
  /// point of the model's QuantizeLinear on that input, which is then removed (no host
  /// Quantize). Every reader of the input must be a per-tensor QuantizeLinear with the same
  /// parameters, else compile() raises IncompatibleModel naming the input.
  std::vector<std::string> without_quantize;
  /// Outputs (by name) returned as uint8 pixels instead of floats in [0, 1]: the output's
  /// DequantizeLinear is replaced by a requantization to scale 1/255, zero point 0 on the NPU
  /// (nothing when the output already has those parameters), so the value is exactly
  /// QuantizeLinear(y, 1/255, 0) of the float output y (no host Dequantize).
  std::vector<std::string> normalized_pixel_outputs;
  /// Input name -> permutation: the caller gives the input transposed, and the model input is
  /// Transpose(given, perm) (e.g. {0, 3, 1, 2}: NHWC images for an NCHW model). The transpose
  /// runs after the per-tensor host Quantize and, for {0, 3, 1, 2}, inside the host Lower step;
  /// otherwise on the NPU (quantized) or as a host Transpose.
  std::map<std::string, std::vector<std::int64_t>> permute_input;
  /// Input name -> its whole shape (every dim >= 1): pins the input's symbolic (free) dims, the
  /// way ONNX Runtime's free-dimension overrides do, so values computed from shapes (Shape ->
  /// Gather/Slice -> Concat -> Resize sizes, Tile repeats, Reshape shapes) fold to constants at
  /// compile time. The rank and every fixed dim of the model's input must match, else compile()
  /// raises IncompatibleModel naming the input. Applied before batch_size (a pinned dim 0 of 1
  /// is then multiplied like any fixed batch of 1).
  std::map<std::string, std::vector<std::int64_t>> input_shapes;
  /// The caller gives NPU-program inputs in the NPU's lowered layout (LoweredNCHW: each row
  /// padded to 32 elements; the input's shape then reports the padded width, format
  /// "lowered_nchw"), so no host Lower
  /// runs. Applies to 4-D inputs the NPU reads lowered with no host operator before them
  /// (quantized inputs, e.g. with without_quantize).
  bool remove_lower = false;
  /// The caller takes NPU-program outputs in the lowered layout (the output's shape reports the
  /// padded width), so no host Unlower runs. Applies to 4-D lowered outputs with no host
  /// operator after them.
  bool remove_unlower = false;
};

/// "warboy" for pe_count 1, "warboy-2pe" for 2 (`furiosa compile --target-npu`).
std::string_view target_npu_name(int pe_count) noexcept;
/// pe_count of a `--target-npu` name ("warboy" -> 1, "warboy-2pe" -> 2). Throws
/// Error(InvalidArgument) naming the value for anything else.
int parse_target_npu(std::string_view name);

}  // namespace furiosa::program
