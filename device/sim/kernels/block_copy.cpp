// The block copies of the data-movement kernels (Reshape, Concat, Split, Transpose, Slice, Pad,
// Resize) and the other layout-agnostic kernels (Requantize, GlobalAveragePool); kernel_common.h
// declares and documents the functions the kernels call.
//
// Every tensor, in either layout, is addressed through element strides over its logical shape
// (layout_strides). A copy walks a logical block with one stride vector per side; dims that are
// contiguous on both sides are merged first (coalesce), so the innermost loop is a single memcpy
// whenever both sides are contiguous along it: whole W-element rows of lowered tensors, whole
// dense blocks of linear ones (e.g. Concat/Split along C of lowered tensors copy whole rows;
// linear -> linear Reshape is one memcpy). The row padding of lowered inputs is never read and
// the row padding of lowered outputs is zeroed. An input whose bytes overlap an output's is
// copied aside first, so in-place programs (output placed over an input) get the right result.
#include "kernel_common.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace furiosa::device::sim::detail {

std::vector<std::int64_t> layout_strides(const TensorRef& ref) {
  if (ref.layout == Layout::LoweredNCHW) {
    const std::int64_t wp = isa::padded_width(ref.shape[3]);
    return {ref.shape[1] * ref.shape[2] * wp, ref.shape[2] * wp, wp, 1};
  }
  return contiguous_strides(ref.shape);
}

namespace {

// Drops extent-1 dims and merges each dim into the next inner one when both sides are
// contiguous across the two. Leaves at least one dim. Extents must be >= 1.
void coalesce(Block& b) {
  Block out;
  for (std::size_t d = 0; d < b.dims.size(); ++d) {
    const std::int64_t n = b.dims[d], ds = b.dst_strides[d], ss = b.src_strides[d];
    if (n == 1) continue;
    if (!out.dims.empty() && out.dst_strides.back() == ds * n && out.src_strides.back() == ss * n) {
      out.dims.back() *= n;
      out.dst_strides.back() = ds;
      out.src_strides.back() = ss;
    } else {
      out.dims.push_back(n);
      out.dst_strides.push_back(ds);
      out.src_strides.push_back(ss);
    }
  }
  if (out.dims.empty()) out = Block{{1}, {1}, {1}};
  b = std::move(out);
}

// Zeroes `n` bytes; short runs (row padding is 1 to 31 elements) inline like copy_bytes.
inline void zero_bytes(std::byte* dst, std::size_t n) {
  if (n >= 64) {
    std::memset(dst, 0, n);
  } else if (n >= 32) {
    std::memset(dst, 0, 32);
    std::memset(dst + n - 32, 0, 32);
  } else if (n >= 16) {
    std::memset(dst, 0, 16);
    std::memset(dst + n - 16, 0, 16);
  } else if (n >= 8) {
    std::memset(dst, 0, 8);
    std::memset(dst + n - 8, 0, 8);
  } else if (n >= 4) {
    std::memset(dst, 0, 4);
    std::memset(dst + n - 4, 0, 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = std::byte{0};
  }
}

// Copies `count` elements of `E` bytes, `ds` / `ss` elements apart.
template <std::size_t E>
void strided_copy(std::byte* dst, std::int64_t ds, const std::byte* src, std::int64_t ss,
                  std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + static_cast<std::size_t>(i * ds) * E,
                src + static_cast<std::size_t>(i * ss) * E, E);
  }
}

// One innermost run of a block copy: `count` elements, `ds` / `ss` elements apart. With `lut`
// (8-bit elements only) every element is mapped through the 256-entry table.
void copy_run(std::byte* dst, std::int64_t ds, const std::byte* src, std::int64_t ss,
              std::int64_t count, std::size_t esize, const std::uint8_t* lut) {
  if (lut != nullptr) {
    const auto* s = reinterpret_cast<const unsigned char*>(src);
    auto* d = reinterpret_cast<unsigned char*>(dst);
    if (ds == 1 && ss == 1) {
      for (std::int64_t i = 0; i < count; ++i) d[i] = lut[s[i]];
    } else {
      for (std::int64_t i = 0; i < count; ++i) d[i * ds] = lut[s[i * ss]];
    }
    return;
  }
  if (ds == 1 && ss == 1) {
    copy_bytes(dst, src, static_cast<std::size_t>(count) * esize);
    return;
  }
  switch (esize) {
    case 1: {
      const auto* s = reinterpret_cast<const unsigned char*>(src);
      auto* d = reinterpret_cast<unsigned char*>(dst);
      for (std::int64_t i = 0; i < count; ++i) d[i * ds] = s[i * ss];
      return;
    }
    case 2: return strided_copy<2>(dst, ds, src, ss, count);
    case 4: return strided_copy<4>(dst, ds, src, ss, count);
    case 8: return strided_copy<8>(dst, ds, src, ss, count);
    default:
      for (std::int64_t i = 0; i < count; ++i) {
        std::memcpy(dst + static_cast<std::size_t>(i * ds) * esize,
                    src + static_cast<std::size_t>(i * ss) * esize, esize);
      }
  }
}

// Walks the elements of a tensor in logical row-major order as runs of contiguous elements
// (whole rows of a lowered tensor, the whole of a linear one).
class RunCursor {
 public:
  // `shape` with its layout strides; element_count(shape) must be > 0.
  RunCursor(const Shape& shape, const std::vector<std::int64_t>& strides) {
    Block b{shape, strides, strides};
    coalesce(b);
    if (b.dst_strides.back() == 1) {  // innermost dim contiguous: runs of its extent
      run_ = b.dims.back();
      b.dims.pop_back();
      b.dst_strides.pop_back();
    }
    dims_ = std::move(b.dims);
    strides_ = std::move(b.dst_strides);
    index_.assign(dims_.size(), 0);
  }
  std::int64_t offset() const { return offset_; }  ///< first element of the current run
  std::int64_t run() const { return run_; }        ///< elements in every run
  void advance() {
    std::size_t d = dims_.size();
    while (d > 0) {
      --d;
      offset_ += strides_[d];
      if (++index_[d] < dims_[d]) return;
      offset_ -= strides_[d] * dims_[d];
      index_[d] = 0;
    }
  }

 private:
  std::vector<std::int64_t> dims_, strides_, index_;
  std::int64_t run_ = 1;
  std::int64_t offset_ = 0;
};

}  // namespace

DstRows dst_rows(const TensorRef& ref) {
  if (ref.layout != Layout::LoweredNCHW) return {};
  return {ref.shape[3], isa::padded_width(ref.shape[3])};
}

bool copy_block(std::byte* dst, const std::byte* src, Block b, std::size_t esize,
                const std::uint8_t* lut, DstRows rows) {
  for (std::int64_t n : b.dims) {
    if (n == 0) return false;
  }
  coalesce(b);
  const std::size_t rank = b.dims.size();
  const std::int64_t inner = b.dims[rank - 1];
  const std::int64_t di = b.dst_strides[rank - 1], si = b.src_strides[rank - 1];
  const std::int64_t mid = rank >= 2 ? b.dims[rank - 2] : 1;
  const std::int64_t dm = rank >= 2 ? b.dst_strides[rank - 2] : 0;
  const std::int64_t sm = rank >= 2 ? b.src_strides[rank - 2] : 0;
  const std::size_t outer_rank = rank >= 2 ? rank - 2 : 0;
  // Byte runs go through the vectorized row copier; a run that is a whole destination row
  // (inner == rows.w, consecutive runs rows.pitch apart) also gets its padding zeroed there.
  const fast::Kernels* fk = fast_kernels();
  const bool fast_rows =
      esize == 1 && di == 1 && si == 1 && fk != nullptr && fk->copy_rows != nullptr;
  const bool whole_rows =
      fast_rows && rows.pitch > rows.w && inner == rows.w && (mid == 1 || dm == rows.pitch);
  std::vector<std::int64_t> index(outer_rank, 0);
  for (;;) {
    std::int64_t doff = 0, soff = 0;
    for (std::size_t d = 0; d < outer_rank; ++d) {
      doff += index[d] * b.dst_strides[d];
      soff += index[d] * b.src_strides[d];
    }
    if (fast_rows) {
      fk->copy_rows(dst + doff, dm, src + soff, sm, mid, inner,
                    whole_rows ? rows.pitch - rows.w : 0, lut);
    } else {
      for (std::int64_t m = 0; m < mid; ++m) {
        copy_run(dst + static_cast<std::size_t>(doff + m * dm) * esize, di,
                 src + static_cast<std::size_t>(soff + m * sm) * esize, si, inner, esize, lut);
      }
    }
    std::size_t d = outer_rank;
    while (d > 0 && ++index[d - 1] == b.dims[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
  return whole_rows;
}

bool copy_row_major(std::byte* dst, const TensorRef& yref, const std::byte* src,
                    const TensorRef& xref) {
  const std::size_t esize = dtype_size(xref.dtype);
  std::int64_t remaining = element_count(xref.shape);
  if (remaining == 0) return false;
  if (xref.shape == yref.shape) {  // a layout change only
    return copy_block(dst, src, Block{yref.shape, layout_strides(yref), layout_strides(xref)},
                      esize, nullptr, dst_rows(yref));
  }
  if (yref.layout == Layout::Linear) {
    return copy_block(
        dst, src, Block{xref.shape, contiguous_strides(xref.shape), layout_strides(xref)}, esize);
  }
  if (xref.layout == Layout::Linear) {
    return copy_block(dst, src,
                      Block{yref.shape, layout_strides(yref), contiguous_strides(yref.shape)},
                      esize, nullptr, dst_rows(yref));
  }
  const Shape& ss = xref.shape;
  const Shape& ds = yref.shape;
  const std::vector<std::int64_t> sst = layout_strides(xref), dst_st = layout_strides(yref);
  RunCursor s(ss, sst), d(ds, dst_st);
  std::int64_t s_used = 0, d_used = 0;
  while (remaining > 0) {
    const std::int64_t n = std::min(s.run() - s_used, d.run() - d_used);
    copy_bytes(dst + static_cast<std::size_t>(d.offset() + d_used) * esize,
               src + static_cast<std::size_t>(s.offset() + s_used) * esize,
               static_cast<std::size_t>(n) * esize);
    remaining -= n;
    if ((s_used += n) == s.run()) {
      s.advance();
      s_used = 0;
    }
    if ((d_used += n) == d.run()) {
      d.advance();
      d_used = 0;
    }
  }
  return false;
}

void clear_row_padding(std::byte* base, const TensorRef& ref) {
  if (ref.layout != Layout::LoweredNCHW) return;
  const std::int64_t w = ref.shape[3], wp = isa::padded_width(w);
  if (wp == w) return;
  const std::size_t esize = dtype_size(ref.dtype);
  const std::int64_t rows = ref.shape[0] * ref.shape[1] * ref.shape[2];
  const auto pad = static_cast<std::size_t>(wp - w) * esize;
  for (std::int64_t r = 0; r < rows; ++r) {
    zero_bytes(base + static_cast<std::size_t>(r * wp + w) * esize, pad);
  }
}

const std::byte* readable(std::span<std::byte> region, const TensorRef& input,
                          const std::vector<TensorRef>& outputs, std::vector<std::byte>& scratch) {
  const std::byte* ptr = region.data() + input.address;
  for (const TensorRef& out : outputs) {
    if (overlaps(input, out)) {
      scratch.assign(ptr, ptr + input.size_bytes());
      return scratch.data();
    }
  }
  return ptr;
}

}  // namespace furiosa::device::sim::detail
