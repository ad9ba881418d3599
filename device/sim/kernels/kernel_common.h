// Private to the simulator's functional kernels (device/sim/kernels/; kernels.h is their
// interface): the validation helpers every kernel family shares, 8-bit element access, rank-4
// activations, the switch to the fast kernels (isa_level.cpp), the block copier of the
// data-movement kernels (block_copy.cpp) and the entry point of each kernel kind, defined by
// its family file (conv.cpp, matmul.cpp, pool.cpp, elementwise.cpp, data_movement.cpp,
// resize.cpp) and called by kind from dispatch.cpp.
//
// The simulator's functional kernels. A kernel reaches them only after isa::verify's checks
// (dispatch.cpp): run at load for a prepared program, else by run_kernel before each run. So
// every TensorRef of the kernel (inputs, outputs, weight, bias, b) lies inside the region with
// non-negative dims, lowered refs are rank 4, operand counts fit the kind, the params are the
// kind's alternative and a Transpose's perm has one entry per input dim: kernels do not check
// these again. Each one then validates the rest of its description (dtypes, layouts, shapes,
// parameters) and throws Error(DeviceFault) on a malformed kernel, so a bad program fails its
// fence instead of touching memory it does not own. Arithmetic follows the ONNX quantized operators
// (see isa.h): int32 accumulation of (x - x_zp) * (w - w_zp) plus the int32 bias, float multiplier,
// round half to even, saturation.
//
// The int32 accumulation wraps around on overflow like the hardware's adders; it is done in
// uint32 so that the wrap is well defined C++. Operands minus zero points are widened to int16
// once per kernel so the inner loops are plain int16 x int16 -> int32 multiply-adds.
//
// Fast kernels. At an ISA level above portable (FURIOSA_SIM_ISA, the CPU: fast::kernels_for),
// Conv2d / DepthwiseConv2d, MatMul, Add, MaxPool and the byte copies of the data-movement
// kernels run the level's vectorized kernels (fast_kernels.h) where it has them, with
// bit-identical results (the portable code of each family file stays the reference and the
// fallback; set_fast_kernels_enabled and set_fast_kernels_level switch). Conv and matmul
// weights are packed into the fast kernels' layout by a plan (fast::ConvPlan /
// fast::MatMulPlan): once per program by prepare_program() when the simulator loads it, or per
// call for kernels run without a PreparedProgram. An input that overlaps the kernel's output is
// read from a per-thread snapshot, as if read completely before the output is written.
//
// Kernels with the fixed-point requantization rule (a `fixed_point` value in their params, isa.h;
// TFLite models) and matmuls with a bias run on the portable code only: prepare_program makes no
// plan for them and the per-call fast path is skipped (fast_conv_fits / fast_matmul_fits /
// add()'s fast_add are false for them), so their results never depend on the CPU.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fast_kernels.h"
#include "furiosa/core/error.h"
#include "furiosa/host/lookup_table.h"
#include "kernels.h"

namespace furiosa::device::sim::detail {

using isa::Layout;
using isa::TensorRef;

// Throws Error(DeviceFault) with a formatted message.
template <class... Args>
[[noreturn]] void fault(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ErrorCode::DeviceFault, fmt::format(format, std::forward<Args>(args)...));
}

// "input 0 [1, 3, 8, 8] uint8 lowered_nchw at 0x40", for messages.
std::string describe(std::string_view role, const TensorRef& ref);

// The first byte of `ref` in `region`; `ref` passed isa::verify_kernel for this region's size.
inline std::byte* at(std::span<std::byte> region, const TensorRef& ref) {
  return region.data() + ref.address;
}

// What a kernel's validation reads constant operands (weights, bias) from: the program's
// region when it runs, or only the program's constants when it is prepared at load. A constant
// operand outside `size` is NotResident (the kernel is then prepared when it runs).
struct Readable {
  const std::byte* data = nullptr;
  std::uint64_t size = 0;
};
struct NotResident {};

inline const std::byte* read_at(const Readable& mem, const TensorRef& ref) {
  const std::uint64_t size = ref.size_bytes();
  if (ref.address > mem.size || size > mem.size - ref.address) throw NotResident{};
  return mem.data + ref.address;
}

inline bool is_8bit(DType dtype) { return dtype == DType::UInt8 || dtype == DType::Int8; }

// Throws unless `ref` holds uint8 or int8 elements.
void require_8bit(const TensorRef& ref, std::string_view role);

// Throws unless `ref` is in the Linear layout.
void require_linear(const TensorRef& ref, std::string_view role);

// The kernel's parameters as P. isa::verify guarantees the kind's alternative; the check stays as
// a guard against a kind dispatched to another kind's kernel (a simulator bug, not a program's).
template <class P>
const P& params_of(const isa::Kernel& kernel) {
  const P* p = std::get_if<P>(&kernel.params);
  if (p == nullptr)
    fault("parameters (variant index {}) do not match the kernel kind", kernel.params.index());
  return *p;
}

// Throws unless `scale` is a usable quantization scale (finite and > 0).
void require_scale(float scale, std::string_view what);

// Throws unless `zero_point` lies in the range of `dtype`.
void require_zero_point(std::int32_t zero_point, DType dtype, std::string_view what);

// Throws unless a per-tensor / per-channel vector has size 1 or `channels`.
void require_per_channel_size(std::size_t size, std::int64_t channels, std::string_view what);

// Throws unless `m` is a valid fixed-point multiplier (isa::QuantizedMultiplier's domain).
void require_multiplier(const isa::QuantizedMultiplier& m, std::string_view what);

// Throws unless [out_min, out_max] is a non-empty range inside `dtype`'s range.
void require_output_range(std::int32_t out_min, std::int32_t out_max, DType dtype);

// Validates a FixedPointRequant of a kernel with `channels` output channels and output `dtype`.
void require_fixed_point(const isa::FixedPointRequant& f, std::int64_t channels, DType dtype);

// Reads one uint8 (or int8 when `is_signed`) element as int32. Storage is read as unsigned char
// and converted, which is well defined for any byte value.
inline std::int32_t load8(const std::byte* p, bool is_signed) {
  const auto u = std::to_integer<std::uint8_t>(*p);
  return is_signed ? static_cast<std::int32_t>(static_cast<std::int8_t>(u))
                   : static_cast<std::int32_t>(u);
}

// Writes an int32 already saturated to the 8-bit range (two's complement for int8).
inline void store8(std::byte* p, std::int32_t v) {
  *p = static_cast<std::byte>(static_cast<std::uint8_t>(v));
}

// A rank-4 NCHW tensor in the region, Linear or LoweredNCHW: rows of `w` elements `pitch`
// elements apart (pitch == w for Linear, padded_width(w) for LoweredNCHW).
struct Act4 {
  std::byte* base = nullptr;
  DType dtype = DType::UInt8;
  std::int64_t n = 0, c = 0, h = 0, w = 0, pitch = 0;
  std::size_t esize = 1;

  bool is_signed() const { return dtype == DType::Int8; }
  // First byte of row (in, ic, ih).
  std::byte* row(std::int64_t in, std::int64_t ic, std::int64_t ih) const {
    return base + static_cast<std::size_t>(((in * c + ic) * h + ih) * pitch) * esize;
  }
  // Zeroes the padding after the `w` elements of a row, so lowered outputs are fully defined.
  void clear_padding(std::byte* row_start) const {
    if (pitch > w) {
      std::memset(row_start + static_cast<std::size_t>(w) * esize, 0,
                  static_cast<std::size_t>(pitch - w) * esize);
    }
  }
};

// Checks that `ref` (verified, isa::verify_kernel) is a rank-4 activation (either layout); the
// result's base is null.
Act4 activation_shape(const TensorRef& ref, std::string_view role);

// Locates a rank-4 activation (either layout; verified).
Act4 activation(std::span<std::byte> region, const TensorRef& ref, std::string_view role);

// Output positions o in [0, out) whose input position o * stride + offset lies in [0, in),
// as a half-open range [lo, hi) (empty when lo == hi). stride >= 1.
inline std::pair<std::int64_t, std::int64_t> valid_range(std::int64_t out, std::int64_t stride,
                                                         std::int64_t offset, std::int64_t in) {
  std::int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  std::int64_t hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

// Throws unless window parameters are usable: strides and dilations >= 1, pads >= 0.
void require_window(const std::array<std::int64_t, 4>& pads,
                    const std::array<std::int64_t, 2>& strides,
                    const std::array<std::int64_t, 2>& dilations);

// True when the bytes of the two (located) tensors overlap.
inline bool overlaps(const TensorRef& a, const TensorRef& b) {
  const std::uint64_t sa = a.size_bytes(), sb = b.size_bytes();
  return sa > 0 && sb > 0 && a.address < b.address + sb && b.address < a.address + sa;
}

// Throws unless `other` has `ref`'s dtype (data movement never converts).
void require_same_dtype(const TensorRef& ref, std::string_view role, const TensorRef& other,
                        std::string_view other_role);

// The fast kernels in use now; null: the portable kernels only.
const fast::Kernels* fast_kernels() noexcept;

// Where a fast kernel reads input `in` from: the region, or (when `in` overlaps the output
// `out`, which is written while `in` is read) a per-thread copy of its bytes.
const std::byte* fast_input(std::span<std::byte> region, const TensorRef& in, const TensorRef& out);

// Per-kernel state prepared at program load (PreparedProgram).
struct KernelPlan {
  std::shared_ptr<const fast::ConvPlan> conv;
  std::shared_ptr<const fast::MatMulPlan> matmul;
  /// A convolution fused with the LowLevelRequantize after it (fuse_conv_requantize): that
  /// kernel's table and output. The convolution writes the Requantize's output directly,
  /// through the table, and leaves its own output unwritten.
  std::optional<host::LookupTable> post_table;
  std::optional<TensorRef> fused_output;
  /// A LowLevelRequantize the convolution before it computes (see post_table): nothing to run.
  bool fused_away = false;
};

// ---------------------------------------------------------------------------------------------
// Block copies (block_copy.cpp): the copy engine of the data-movement kernels and the other
// kernels that walk tensors in either layout.

// Element strides of `ref`'s logical shape in its layout: row-major for Linear; for LoweredNCHW
// the H stride is padded_width(W) (isa.h). Only for verified refs.
std::vector<std::int64_t> layout_strides(const TensorRef& ref);

// A logical block copied element for element: extents and element strides of both sides.
struct Block {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> dst_strides;
  std::vector<std::int64_t> src_strides;
};

// Copies `n` bytes between non-overlapping buffers. Short runs (lowered rows are often 7 to 56
// bytes) use fixed-size, possibly overlapping head and tail moves the compiler inlines, which
// is several times faster than a library call per row.
inline void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
  if (n >= 64) {
    std::memcpy(dst, src, n);
  } else if (n >= 32) {
    std::memcpy(dst, src, 32);
    std::memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// The rows of a lowered destination: `w` elements, `pitch` apart (pitch 0: not lowered).
struct DstRows {
  std::int64_t w = 0, pitch = 0;
};

// The DstRows of `ref`.
DstRows dst_rows(const TensorRef& ref);

// Copies block `b` (element size `esize`) from `src` to `dst`, optionally through `lut`. The
// two innermost (coalesced) dims are tight loops; outer dims run on an odometer. Returns true
// when every innermost run was a whole row of the lowered destination `rows` and its padding
// was zeroed on the way (so clear_row_padding is not needed for the bytes written).
bool copy_block(std::byte* dst, const std::byte* src, Block b, std::size_t esize,
                const std::uint8_t* lut = nullptr, DstRows rows = {});

// Copies all elements of `xref` (at src) to `yref` (at dst) in logical row-major order; both hold
// the same number of elements. A linear side is row-major whatever its shape, so it can take the
// other side's shape and the copy becomes one block copy; only lowered -> lowered between
// different shapes walks the two sides' runs separately. Returns true when the row padding of a
// lowered destination was zeroed on the way (see copy_block).
bool copy_row_major(std::byte* dst, const TensorRef& yref, const std::byte* src,
                    const TensorRef& xref);

// Zeroes the row padding of a lowered tensor (nothing for Linear), so outputs are fully defined.
void clear_row_padding(std::byte* base, const TensorRef& ref);

// Where to read a located input from: the region, or a copy in `scratch` when the input's bytes
// overlap one of the kernel's outputs (which are written while the input is read).
const std::byte* readable(std::span<std::byte> region, const TensorRef& input,
                          const std::vector<TensorRef>& outputs, std::vector<std::byte>& scratch);

// ---------------------------------------------------------------------------------------------
// The kernels, one entry point per kernel kind (dispatch.cpp calls them by kind, verified). Each
// validates the rest of its kernel first and throws Error(DeviceFault) when it is malformed.

// conv.cpp
void conv2d(const isa::Kernel& kernel, std::span<std::byte> region, bool depthwise,
            const KernelPlan* prepared);
/// The plan prepare_program keeps for convolution kernel `kernel` of a verified program
/// (isa::verify) whose constant operands are read from `constants`; null when the fast
/// convolution does not take the kernel or its weight or bias is not `frozen` (may be written
/// after load). Throws Error(DeviceFault) when the kernel is malformed, NotResident when its
/// constant operands are not in `constants`.
std::shared_ptr<const fast::ConvPlan> prepare_conv_plan(
    const isa::Kernel& kernel, const Readable& constants,
    const std::function<bool(const TensorRef&)>& frozen);
/// Fuses each LowLevelRequantize into the convolution right before it (`plans` by kernel index,
/// of the verified `program`; KernelPlan::post_table) where that changes nothing anyone can
/// read: the Requantize reads exactly the convolution's output, writes a tensor of the same
/// shape and layout that the convolution's input does not overlap, and no later kernel or
/// program output reads the convolution's output before it is written over. The convolution
/// must have a GEMM plan (not depthwise). A silu-style activation after every convolution
/// (YOLOv8's) is then one pass over the output instead of two. Returns the number fused.
std::size_t fuse_conv_requantize(const isa::Program& program,
                                 std::vector<std::unique_ptr<KernelPlan>>& plans);

// matmul.cpp
void matmul(const isa::Kernel& kernel, std::span<std::byte> region, const KernelPlan* prepared);
/// prepare_conv_plan's counterpart for a matmul kernel (its operand b must be `frozen`).
std::shared_ptr<const fast::MatMulPlan> prepare_matmul_plan(
    const isa::Kernel& kernel, const Readable& constants,
    const std::function<bool(const TensorRef&)>& frozen);

// pool.cpp
void maxpool(const isa::Kernel& kernel, std::span<std::byte> region);
void global_average_pool(const isa::Kernel& kernel, std::span<std::byte> region);

// elementwise.cpp
void add(const isa::Kernel& kernel, std::span<std::byte> region);
void mul(const isa::Kernel& kernel, std::span<std::byte> region);
void sub(const isa::Kernel& kernel, std::span<std::byte> region);
void requantize(const isa::Kernel& kernel, std::span<std::byte> region);
/// LowLevelRequantize's table: RequantizeParams::table, or DequantizeLinear then QuantizeLinear
/// in float32 tabulated. Validates the kernel's dtypes, shapes and parameters first (throws
/// Error(DeviceFault) when they do not fit).
host::LookupTable requantize_table(const isa::Kernel& kernel);
/// y = lut[x] element for element (`x` and `y` located in `region`, same shape, either layout;
/// y's row padding zeroed). `x` may overlap `y`.
void map_through_table(std::span<std::byte> region, const TensorRef& x, const TensorRef& y,
                       const host::LookupTable& lut);

// data_movement.cpp
void reshape(const isa::Kernel& kernel, std::span<std::byte> region);
void concat(const isa::Kernel& kernel, std::span<std::byte> region);
void split(const isa::Kernel& kernel, std::span<std::byte> region);
void transpose(const isa::Kernel& kernel, std::span<std::byte> region);
void slice(const isa::Kernel& kernel, std::span<std::byte> region);
void pad(const isa::Kernel& kernel, std::span<std::byte> region);

// resize.cpp
void resize(const isa::Kernel& kernel, std::span<std::byte> region);

}  // namespace furiosa::device::sim::detail
