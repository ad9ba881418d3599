// Dense <-> lowered relayouts (layout.h).
#include "furiosa/host/layout.h"

#include <cstring>

namespace furiosa::host {

std::size_t lowered_size(const Shape& s, std::size_t es) noexcept {
  if (s.size() != 4) return 0;
  return static_cast<std::size_t>(s[0] * s[1] * s[2] * padded_width(s[3])) * es;
}

namespace {

// Copies rows of W elements between dense (stride W) and lowered (stride padded_width(W)).
void copy_rows(const Shape& s, std::size_t es, const std::byte* in, std::byte* out, bool to_lowered) {
  const std::int64_t rows = s[0] * s[1] * s[2], w = s[3], wp = padded_width(w);
  const std::size_t in_stride = static_cast<std::size_t>(to_lowered ? w : wp) * es;
  const std::size_t out_stride = static_cast<std::size_t>(to_lowered ? wp : w) * es;
  const std::size_t row = static_cast<std::size_t>(w) * es;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(out + static_cast<std::size_t>(r) * out_stride, in + static_cast<std::size_t>(r) * in_stride, row);
  }
}

}  // namespace

void lower(const Shape& nchw, std::size_t es, std::span<const std::byte> in, std::span<std::byte> out) {
  std::memset(out.data(), 0, out.size());
  copy_rows(nchw, es, in.data(), out.data(), true);
}

void unlower(const Shape& nchw, std::size_t es, std::span<const std::byte> in, std::span<std::byte> out) {
  copy_rows(nchw, es, in.data(), out.data(), false);
}

void lower_nhwc(const Shape& nhwc, std::size_t es, std::span<const std::byte> in, std::span<std::byte> out) {
  const std::int64_t N = nhwc[0], H = nhwc[1], W = nhwc[2], C = nhwc[3], wp = padded_width(W);
  std::memset(out.data(), 0, out.size());
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t c = 0; c < C; ++c) {
      for (std::int64_t h = 0; h < H; ++h) {
        std::byte* dst = out.data() + static_cast<std::size_t>(((n * C + c) * H + h) * wp) * es;
        const std::byte* src = in.data() + static_cast<std::size_t>(((n * H + h) * W) * C + c) * es;
        if (es == 1) {
          for (std::int64_t w = 0; w < W; ++w) dst[w] = src[w * C];
        } else {
          for (std::int64_t w = 0; w < W; ++w) {
            std::memcpy(dst + static_cast<std::size_t>(w) * es, src + static_cast<std::size_t>(w * C) * es, es);
          }
        }
      }
    }
  }
}

}  // namespace furiosa::host
