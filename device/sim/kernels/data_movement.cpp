// The data-movement kernels: LowLevelReshape, LowLevelConcat, LowLevelSplit, LowLevelSlice,
// LowLevelPad and LowLevelTranspose, copies between tensors of either layout that never convert
// a value (block_copy.cpp does the copying).
#include "kernel_common.h"

#include <cstring>
#include <string>
#include <vector>

#include "furiosa/host/index_map.h"

namespace furiosa::device::sim::detail {

namespace {

// Throws when two outputs of the kernel share bytes.
void require_disjoint_outputs(const isa::Kernel& kernel) {
  for (std::size_t i = 0; i < kernel.outputs.size(); ++i) {
    for (std::size_t j = i + 1; j < kernel.outputs.size(); ++j) {
      if (overlaps(kernel.outputs[i], kernel.outputs[j])) {
        fault("{} overlaps {}", describe(fmt::format("output {}", i), kernel.outputs[i]),
              describe(fmt::format("output {}", j), kernel.outputs[j]));
      }
    }
  }
}

// An ONNX-style axis in [-rank, rank) as an index in [0, rank); throws when out of range.
std::size_t normalize_axis(std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) fault("axis {} is out of range for rank {}", axis, rank);
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

// Checks the pieces of a Concat (inputs) or Split (outputs) against the whole tensor: same
// dtype and rank, equal extents except along `axis`, where they sum to the whole's extent.
// Returns the normalized axis.
std::size_t require_pieces(const TensorRef& whole, std::string_view whole_role,
                           const std::vector<TensorRef>& pieces, std::string_view piece_role,
                           std::int64_t axis_param) {
  const std::size_t rank = whole.shape.size();
  if (rank == 0) fault("{} must be of rank >= 1", describe(whole_role, whole));
  const std::size_t axis = normalize_axis(axis_param, rank);
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const TensorRef& piece = pieces[i];
    const std::string role = fmt::format("{} {}", piece_role, i);
    require_same_dtype(piece, role, whole, whole_role);
    bool ok = piece.shape.size() == rank;
    for (std::size_t d = 0; ok && d < rank; ++d) ok = d == axis || piece.shape[d] == whole.shape[d];
    if (!ok) {
      fault("{} must match {} in every dim but axis {}", describe(role, piece),
            describe(whole_role, whole), axis);
    }
    sum += piece.shape[axis];
  }
  if (sum != whole.shape[axis]) {
    fault("the {}s' extents along axis {} sum to {}, but {} has {}", piece_role, axis, sum,
          describe(whole_role, whole), whole.shape[axis]);
  }
  return axis;
}

// Gathers outputs[0] from inputs[0] by one index table per dim: output index o along dim d
// reads input index tables[d][o], or `fill` (one element of the dtype) when any dim's entry is
// -1. Both tensors have the same dtype and rank, any layouts; tables[d] has y.shape[d] entries
// in [-1, x.shape[d]). The shared walk of LowLevelSlice and LowLevelPad.
void gather_by_tables(const isa::Kernel& kernel, std::span<std::byte> region,
                      const std::vector<std::vector<std::int64_t>>& tables, const std::byte* fill) {
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = at(region, yref);
  const std::size_t rank = yref.shape.size();
  if (element_count(yref.shape) == 0) return;
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::size_t esize = dtype_size(xref.dtype);
  const std::vector<std::int64_t> xs = layout_strides(xref), ys = layout_strides(yref);
  if (rank == 0) {
    std::memcpy(yptr, xptr, esize);
    return;
  }
  // The innermost dim as one copy when it reads consecutive input elements with stride 1 on both
  // sides (a Slice with step 1, the interior rows of a Pad are not: they mix fill and data).
  const std::vector<std::int64_t>& last = tables[rank - 1];
  const std::int64_t inner = yref.shape[rank - 1];
  bool consecutive = xs[rank - 1] == 1 && ys[rank - 1] == 1 && last[0] >= 0;
  for (std::int64_t i = 1; consecutive && i < inner; ++i) {
    consecutive = last[static_cast<std::size_t>(i)] == last[0] + i;
  }
  std::vector<std::int64_t> index(rank - 1, 0);
  for (;;) {
    std::int64_t xo = 0, yo = 0;
    bool outside = false;
    for (std::size_t d = 0; d + 1 < rank; ++d) {
      const std::int64_t src = tables[d][static_cast<std::size_t>(index[d])];
      outside = outside || src < 0;
      xo += src * xs[d];
      yo += index[d] * ys[d];
    }
    std::byte* row = yptr + static_cast<std::size_t>(yo) * esize;
    if (outside) {
      for (std::int64_t i = 0; i < inner; ++i) {
        std::memcpy(row + static_cast<std::size_t>(i * ys[rank - 1]) * esize, fill, esize);
      }
    } else if (consecutive) {
      copy_bytes(row, xptr + static_cast<std::size_t>(xo + last[0]) * esize,
                 static_cast<std::size_t>(inner) * esize);
    } else {
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t src = last[static_cast<std::size_t>(i)];
        std::memcpy(
            row + static_cast<std::size_t>(i * ys[rank - 1]) * esize,
            src < 0 ? fill : xptr + static_cast<std::size_t>(xo + src * xs[rank - 1]) * esize,
            esize);
      }
    }
    std::size_t d = rank - 1;
    while (d > 0 && ++index[d - 1] == yref.shape[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
  clear_row_padding(yptr, yref);
}

// Checks the operands of LowLevelSlice / LowLevelPad: one input and one output of the same
// dtype and rank, and a per-dim parameter vector `what` of that rank.
void require_index_map_operands(const isa::Kernel& kernel, std::size_t param_size,
                                std::string_view what) {
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  require_same_dtype(yref, "output 0", xref, "input 0");
  if (yref.shape.size() != xref.shape.size()) {
    fault("{} must have the rank of {}", describe("output 0", yref), describe("input 0", xref));
  }
  if (param_size != xref.shape.size()) {
    fault("{} has {} entries but {} has rank {}", what, param_size, describe("input 0", xref),
          xref.shape.size());
  }
}

}  // namespace

// LowLevelReshape: logical row-major copy between any layouts (equal element counts).
void reshape(const isa::Kernel& kernel, std::span<std::byte> region) {
  params_of<isa::ReshapeParams>(kernel);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = at(region, yref);
  require_same_dtype(yref, "output 0", xref, "input 0");
  if (element_count(xref.shape) != element_count(yref.shape)) {
    fault("{} and {} hold different element counts", describe("input 0", xref),
          describe("output 0", yref));
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  if (!copy_row_major(yptr, yref, xptr, xref)) clear_row_padding(yptr, yref);
}

// LowLevelConcat: inputs placed one after the other along the axis of the output.
void concat(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::ConcatParams>(kernel);
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = at(region, yref);
  for (std::size_t i = 0; i < kernel.inputs.size(); ++i) {
  }
  const std::size_t axis = require_pieces(yref, "output 0", kernel.inputs, "input", p.axis);
  const std::vector<std::int64_t> ys = layout_strides(yref);
  const std::size_t esize = dtype_size(yref.dtype);
  // Read every overlapping input before writing anything.
  std::vector<std::vector<std::byte>> scratch(kernel.inputs.size());
  std::vector<const std::byte*> sources;
  for (std::size_t i = 0; i < kernel.inputs.size(); ++i) {
    sources.push_back(readable(region, kernel.inputs[i], kernel.outputs, scratch[i]));
  }
  std::int64_t start = 0;  // position of the current input along the axis
  bool padded = true;      // every input's copy zeroed the row padding of its rows
  for (std::size_t i = 0; i < kernel.inputs.size(); ++i) {
    const TensorRef& xref = kernel.inputs[i];
    padded =
        copy_block(yptr + static_cast<std::size_t>(start * ys[axis]) * esize, sources[i],
                   Block{xref.shape, ys, layout_strides(xref)}, esize, nullptr, dst_rows(yref)) &&
        padded;
    start += xref.shape[axis];
  }
  if (!padded) clear_row_padding(yptr, yref);
}

// LowLevelSplit: consecutive slices of the input along the axis, one per output.
void split(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::SplitParams>(kernel);
  const TensorRef& xref = kernel.inputs[0];
  std::vector<std::byte*> targets;
  for (std::size_t i = 0; i < kernel.outputs.size(); ++i) {
    targets.push_back(at(region, kernel.outputs[i]));
  }
  const std::size_t axis = require_pieces(xref, "input 0", kernel.outputs, "output", p.axis);
  require_disjoint_outputs(kernel);
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::vector<std::int64_t> xs = layout_strides(xref);
  const std::size_t esize = dtype_size(xref.dtype);
  std::int64_t start = 0;  // position of the current output along the axis
  for (std::size_t i = 0; i < kernel.outputs.size(); ++i) {
    const TensorRef& yref = kernel.outputs[i];
    if (!copy_block(targets[i], xptr + static_cast<std::size_t>(start * xs[axis]) * esize,
                    Block{yref.shape, layout_strides(yref), xs}, esize, nullptr, dst_rows(yref))) {
      clear_row_padding(targets[i], yref);
    }
    start += yref.shape[axis];
  }
}

// LowLevelSlice: output index o of dim d reads input index starts[d] + o * steps[d].
void slice(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::SliceParams>(kernel);
  require_index_map_operands(kernel, p.starts.size(), "starts");
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  if (p.steps.size() != p.starts.size()) {
    fault("steps has {} entries and starts {}", p.steps.size(), p.starts.size());
  }
  std::vector<std::vector<std::int64_t>> tables(p.starts.size());
  for (std::size_t d = 0; d < tables.size(); ++d) {
    const std::int64_t n = yref.shape[d], start = p.starts[d], step = p.steps[d];
    if (step == 0) fault("steps[{}] is 0", d);
    if (n == 0) continue;
    if (n > 1 && (step > xref.shape[d] || step < -xref.shape[d])) {
      fault("steps[{}] = {} is larger than dim {} of {}", d, step, d, describe("input 0", xref));
    }
    const std::int64_t end = start + (n - 1) * step;  // last index read (no overflow: checked dims)
    if (start < 0 || start >= xref.shape[d] || end < 0 || end >= xref.shape[d]) {
      fault("dim {}: {} elements from {} by step {} leave {}", d, n, start, step,
            describe("input 0", xref));
    }
    for (std::int64_t o = 0; o < n; ++o) tables[d].push_back(start + o * step);
  }
  gather_by_tables(kernel, region, tables, nullptr);
}

// LowLevelPad: host::pad_source per dim, the constant `value` elsewhere.
void pad(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::PadParams>(kernel);
  require_index_map_operands(kernel, p.begins.size(), "begins");
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  require_8bit(xref, "input 0");
  if (p.mode == isa::PadParams::Mode::Constant)
    require_zero_point(p.value, xref.dtype, "constant value");
  if (p.mode != isa::PadParams::Mode::Constant && p.mode != isa::PadParams::Mode::Edge &&
      p.mode != isa::PadParams::Mode::Reflect && p.mode != isa::PadParams::Mode::Wrap) {
    fault("unknown pad mode {}", static_cast<int>(p.mode));
  }
  std::vector<std::vector<std::int64_t>> tables(p.begins.size());
  for (std::size_t d = 0; d < tables.size(); ++d) {
    const std::int64_t n = xref.shape[d];
    if (p.mode != isa::PadParams::Mode::Constant && n == 0 && yref.shape[d] > 0) {
      fault("dim {} of {} is empty: only the constant mode can pad it", d,
            describe("input 0", xref));
    }
    if (p.begins[d] < -n || p.begins[d] > yref.shape[d]) {
      fault("begins[{}] = {} does not fit {} and {}", d, p.begins[d], describe("input 0", xref),
            describe("output 0", yref));
    }
    for (std::int64_t o = 0; o < yref.shape[d]; ++o)
      tables[d].push_back(host::pad_source(p.mode, o, p.begins[d], n));
  }
  const auto fill = static_cast<std::byte>(static_cast<std::uint8_t>(p.value & 0xff));
  gather_by_tables(kernel, region, tables, &fill);
}

// LowLevelTranspose: output dim d is input dim perm[d].
void transpose(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::TransposeParams>(kernel);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = at(region, yref);
  require_same_dtype(yref, "output 0", xref, "input 0");
  const std::size_t rank = xref.shape.size();  // == p.perm.size() (isa::verify)
  std::vector<bool> seen(rank, false);
  Shape expected(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::int64_t axis = p.perm[d];
    if (axis < 0 || axis >= static_cast<std::int64_t>(rank) ||
        seen[static_cast<std::size_t>(axis)]) {
      fault("perm {} is not a permutation of 0..{}", shape_to_string(p.perm), rank - 1);
    }
    seen[static_cast<std::size_t>(axis)] = true;
    expected[d] = xref.shape[static_cast<std::size_t>(axis)];
  }
  if (yref.shape != expected) {
    fault("{} must have shape {} (input 0 permuted by {})", describe("output 0", yref),
          shape_to_string(expected), shape_to_string(p.perm));
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::vector<std::int64_t> xs = layout_strides(xref);
  std::vector<std::int64_t> src_strides(rank);
  for (std::size_t d = 0; d < rank; ++d) src_strides[d] = xs[static_cast<std::size_t>(p.perm[d])];
  // Walks the output in its own order: writes are sequential, reads gather.
  if (!copy_block(yptr, xptr, Block{yref.shape, layout_strides(yref), src_strides},
                  dtype_size(xref.dtype), nullptr, dst_rows(yref))) {
    clear_row_padding(yptr, yref);
  }
}

}  // namespace furiosa::device::sim::detail
