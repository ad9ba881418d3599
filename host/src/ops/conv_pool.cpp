// The host operator library (host/cpu_ops.h): Conv, ConvInteger, MaxPool, AveragePool, GlobalAveragePool, furiosa::QuantizedAveragePool.
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Conv, ConvInteger, MaxPool, AveragePool, GlobalAveragePool
// ---------------------------------------------------------------------------------------------

// Window geometry over 1 or 2 spatial dims, lifted to 2 (1-D: a height of 1).
struct Geom {
  std::int64_t h = 1, w = 1;          // input spatial size
  std::int64_t kh = 1, kw = 1;        // kernel
  std::int64_t sh = 1, sw = 1;        // strides
  std::int64_t dh = 1, dw = 1;        // dilations
  std::int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right
  std::int64_t oh = 1, ow = 1;        // output spatial size
};

// Attribute sanity for Conv/ConvInteger/MaxPool/AveragePool (cpu_op_supported).
std::string check_window_attrs(const Node& n, bool need_kernel) {
  std::size_t r = 0;
  auto ks = n.attr_ints("kernel_shape", {});
  if (ks.empty()) {
    if (need_kernel) return "attribute 'kernel_shape' is required";
  } else {
    r = ks.size();
  }
  for (const char* key : {"strides", "dilations"}) {
    auto v = n.attr_ints(key, {});
    if (v.empty()) continue;
    if (r == 0) r = v.size();
    if (v.size() != r) return fmt::format("attribute '{}' has {} values for {} spatial dims", key, v.size(), r);
  }
  auto pads = n.attr_ints("pads", {});
  if (!pads.empty()) {
    if (r == 0) r = pads.size() / 2;
    if (pads.size() != 2 * r) return fmt::format("attribute 'pads' has {} values for {} spatial dims", pads.size(), r);
  }
  if (r > 2) {
    return fmt::format("{}-D windows (kernel_shape/strides/pads of rank {}) are not implemented, only "
                       "1-D and 2-D", r, r);
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID") {
    return fmt::format("unknown auto_pad '{}'", ap);
  }
  return "";
}

// Resolves the window of `node` for input shape x ([N, C, spatial...], 1 or 2 spatial dims) and
// kernel `kernel` (one entry per spatial dim), per the ONNX Conv / pooling output-size rules.
Geom resolve_geom(const Ctx& c, const Shape& x, const std::vector<std::int64_t>& kernel, bool ceil_mode) {
  const Node& n = c.node;
  if (x.size() != 3 && x.size() != 4) {
    c.bad(fmt::format("input {} must be [N, C, W] or [N, C, H, W]: only 1-D and 2-D windows are "
                      "implemented", shape_to_string(x)));
  }
  const std::size_t r = x.size() - 2;
  if (kernel.size() != r) c.bad(fmt::format("kernel has {} dims for {} spatial dims", kernel.size(), r));
  auto strides = n.attr_ints("strides", std::vector<std::int64_t>(r, 1));
  auto dil = n.attr_ints("dilations", std::vector<std::int64_t>(r, 1));
  auto pads = n.attr_ints("pads", std::vector<std::int64_t>(2 * r, 0));
  if (strides.size() != r || dil.size() != r || pads.size() != 2 * r) {
    c.bad(fmt::format("strides/dilations/pads must have {}/{}/{} values", r, r, 2 * r));
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  std::array<std::int64_t, 2> in{1, 1}, k{1, 1}, s{1, 1}, d{1, 1}, pbeg{0, 0}, pend{0, 0}, out{1, 1};
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t j = i + (2 - r);  // 1-D lands in the width slot
    in[j] = x[2 + i];
    k[j] = kernel[i];
    s[j] = strides[i];
    d[j] = dil[i];
    pbeg[j] = pads[i];
    pend[j] = pads[i + r];
    if (k[j] < 1 || s[j] < 1 || d[j] < 1) c.bad("kernel, strides and dilations must be >= 1");
    if (pbeg[j] < 0 || pend[j] < 0) c.bad("pads must be >= 0");
    const std::int64_t eff = (k[j] - 1) * d[j] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      out[j] = (in[j] + s[j] - 1) / s[j];
      const std::int64_t total = std::max<std::int64_t>(0, (out[j] - 1) * s[j] + eff - in[j]);
      pbeg[j] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pend[j] = total - pbeg[j];
      continue;
    }
    if (ap == "VALID") {
      pbeg[j] = pend[j] = 0;
    } else if (ap != "NOTSET") {
      c.bad(fmt::format("unknown auto_pad '{}'", ap));
    }
    const std::int64_t span = in[j] + pbeg[j] + pend[j] - eff;
    if (span < 0) {
      c.bad(fmt::format("window of extent {} does not fit the padded input extent {}", eff,
                        in[j] + pbeg[j] + pend[j]));
    }
    out[j] = (ceil_mode ? (span + s[j] - 1) / s[j] : span / s[j]) + 1;
    // A last window starting in the end padding is dropped (ONNX reference, PyTorch).
    if (ceil_mode && (out[j] - 1) * s[j] >= in[j] + pbeg[j]) --out[j];
  }
  Geom g;
  g.h = in[0], g.w = in[1], g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1];
  g.dh = d[0], g.dw = d[1], g.pt = pbeg[0], g.pl = pbeg[1], g.pb = pend[0], g.pr = pend[1];
  g.oh = out[0], g.ow = out[1];
  return g;
}

Shape window_out_shape(const Shape& x, std::int64_t channels, const Geom& g) {
  if (x.size() == 3) return {x[0], channels, g.ow};
  return {x[0], channels, g.oh, g.ow};
}

std::string check_conv(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32).in(1, "W", kF32).in(2, "B", kF32, false);
  ch.require(n.attr_int("group", 1) >= 1, "attribute 'group' must be >= 1");
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, false);
  return ch.reason;
}
std::string check_conv_integer(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "x", kQ8).in(1, "w", kQ8).in(2, "x_zero_point", kQ8, false).in(3, "w_zero_point", kQ8, false);
  ch.same(0, 2).same(1, 3).require(n.attr_int("group", 1) >= 1, "attribute 'group' must be >= 1");
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, false);
  return ch.reason;
}

Geom conv_geom(const Ctx& c, const Shape& x, const Shape& w) {
  if (w.size() != x.size()) {
    c.bad(fmt::format("weight {} must have the rank of the input {}", shape_to_string(w), shape_to_string(x)));
  }
  const std::int64_t group = c.node.attr_int("group", 1);
  if (x.size() < 3 || group < 1 || x[1] % group != 0 || w[0] % group != 0 || w[1] * group != x[1]) {
    c.bad(fmt::format("input {} does not fit weight {} with group {}", shape_to_string(x),
                      shape_to_string(w), group));
  }
  std::vector<std::int64_t> kernel(w.begin() + 2, w.end());
  auto ks = c.node.attr_ints("kernel_shape", kernel);
  if (ks != kernel) c.bad("attribute kernel_shape does not match the weight's spatial dims");
  return resolve_geom(c, x, kernel, false);
}

OutInfos infer_conv(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  const Shape& w = c.shape(1, "W");
  const Geom g = conv_geom(c, x, w);
  if (c.has(2)) {
    const Shape& b = *c.in[2].shape;
    if (b.size() != 1 || b[0] != w[0]) {
      c.bad(fmt::format("bias {} must be [{}]", shape_to_string(b), w[0]));
    }
  }
  return {{DType::Float32, window_out_shape(x, w[0], g)}};
}

OutInfos infer_conv_integer(const Ctx& c) {
  const Shape& x = c.shape(0, "x");
  const Shape& w = c.shape(1, "w");
  const Geom g = conv_geom(c, x, w);
  if (c.has(2) && element_count(*c.in[2].shape) != 1) {
    c.bad(fmt::format("x_zero_point {} must be a scalar (per-tensor)", shape_to_string(*c.in[2].shape)));
  }
  if (c.has(3)) {
    const Shape& z = *c.in[3].shape;
    if (element_count(z) != 1 && !(z.size() == 1 && z[0] == w[0])) {
      c.bad(fmt::format("w_zero_point {} must be a scalar or have one value per output channel ({})",
                        shape_to_string(z), w[0]));
    }
  }
  return {{DType::Int32, window_out_shape(x, w[0], g)}};
}

// Direct convolution: y[n, m] = bias[m] + sum over the group's channels and the kernel.
// x: [N, C, H, W], w: [M, C/group, KH, KW], y: [N, M, OH, OW] (zeroed), all dense.
template <class T>
void conv_kernel(const T* x, const T* w, const T* bias, T* y, std::int64_t batch, std::int64_t chans,
                 std::int64_t maps, std::int64_t group, const Geom& g) {
  const std::int64_t cg = chans / group, mg = maps / group;
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  for (std::int64_t n = 0; n < batch; ++n) {
    for (std::int64_t m = 0; m < maps; ++m) {
      T* out = y + (n * maps + m) * out_plane;
      if (bias) std::fill(out, out + out_plane, bias[m]);
      const std::int64_t grp = m / mg;
      for (std::int64_t ci = 0; ci < cg; ++ci) {
        const T* xp = x + (n * chans + grp * cg + ci) * in_plane;
        const T* wp = w + (m * cg + ci) * g.kh * g.kw;
        for (std::int64_t kh = 0; kh < g.kh; ++kh) {
          for (std::int64_t kw = 0; kw < g.kw; ++kw) {
            const T wv = wp[kh * g.kw + kw];
            // Output columns whose input column ow*sw - pl + kw*dw lies in [0, W).
            const std::int64_t off = kw * g.dw - g.pl;
            const std::int64_t ow0 = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
            const std::int64_t last = g.w - 1 - off;
            const std::int64_t ow1 = last < 0 ? 0 : std::min(g.ow, last / g.sw + 1);
            if (ow0 >= ow1) continue;
            for (std::int64_t oh = 0; oh < g.oh; ++oh) {
              const std::int64_t ih = oh * g.sh - g.pt + kh * g.dh;
              if (ih < 0 || ih >= g.h) continue;
              const T* row = xp + ih * g.w + off;
              T* orow = out + oh * g.ow;
              if (g.sw == 1) {
                for (std::int64_t ow = ow0; ow < ow1; ++ow) orow[ow] += wv * row[ow];
              } else {
                for (std::int64_t ow = ow0; ow < ow1; ++ow) orow[ow] += wv * row[ow * g.sw];
              }
            }
          }
        }
      }
    }
  }
}

std::vector<Tensor> run_conv(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Tensor& w = c.t(1);
  const Geom g = conv_geom(c, x.shape(), w.shape());
  Tensor y(o[0].first, o[0].second);
  conv_kernel<float>(x.as<float>().data(), w.as<float>().data(),
                     c.has(2) ? c.t(2).as<float>().data() : nullptr, y.as<float>().data(),
                     x.shape()[0], x.shape()[1], w.shape()[0], c.node.attr_int("group", 1), g);
  return {std::move(y)};
}

std::vector<Tensor> run_conv_integer(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Tensor& w = c.t(1);
  const Geom g = conv_geom(c, x.shape(), w.shape());
  // Subtracting the zero points first makes padding contribute 0, as ONNX Runtime pads x with
  // x_zero_point.
  const auto xs = minus_zero_point(c, x, c.opt(2), Shape{}, "x_zero_point");
  Shape wz;
  if (c.has(3) && c.t(3).elements() != 1) {
    wz = Shape(w.shape().size(), 1);
    wz[0] = w.shape()[0];  // one per output channel
  }
  const auto ws = minus_zero_point(c, w, c.opt(3), wz, "w_zero_point");
  Tensor y(o[0].first, o[0].second);
  conv_kernel<std::int32_t>(xs.data(), ws.data(), nullptr, y.as<std::int32_t>().data(), x.shape()[0],
                            x.shape()[1], w.shape()[0], c.node.attr_int("group", 1), g);
  return {std::move(y)};
}

std::string check_maxpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32 | kQ8);
  const auto so = n.attr_int("storage_order", 0);
  ch.require(so == 0 || so == 1, "attribute 'storage_order' must be 0 or 1");
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true);
  return ch.reason;
}
std::string check_avgpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32);
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true);
  return ch.reason;
}

Geom pool_geom(const Ctx& c, const Shape& x) {
  auto ks = c.node.attr_ints("kernel_shape", {});
  if (ks.empty()) c.bad("attribute 'kernel_shape' is required");
  return resolve_geom(c, x, ks, c.node.attr_int("ceil_mode", 0) != 0);
}

OutInfos infer_maxpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  const Shape out = window_out_shape(x, x.size() >= 2 ? x[1] : 0, pool_geom(c, x));
  OutInfos r{{c.dtype(0, "X"), out}};
  if (c.n_out >= 2) r.push_back({DType::Int64, out});
  return r;
}
OutInfos infer_avgpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  return {{DType::Float32, window_out_shape(x, x.size() >= 2 ? x[1] : 0, pool_geom(c, x))}};
}

template <class T>
void maxpool_kernel(const T* x, T* y, std::int64_t* indices, std::int64_t planes, const Geom& g,
                    bool column_major) {
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  for (std::int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * in_plane;
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        T best = std::numeric_limits<T>::lowest();
        std::int64_t bi = -1;
        for (std::int64_t kh = 0; kh < g.kh; ++kh) {
          const std::int64_t ih = oh * g.sh - g.pt + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (std::int64_t kw = 0; kw < g.kw; ++kw) {
            const std::int64_t iw = ow * g.sw - g.pl + kw * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            const T v = xp[ih * g.w + iw];
            if (bi < 0 || v > best) {
              best = v;
              bi = column_major ? iw * g.h + ih : ih * g.w + iw;
            }
          }
        }
        const std::int64_t at = p * out_plane + oh * g.ow + ow;
        y[at] = best;
        if (indices) indices[at] = bi < 0 ? -1 : p * in_plane + bi;
      }
    }
  }
}

std::vector<Tensor> run_maxpool(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Geom g = pool_geom(c, x.shape());
  std::vector<Tensor> out;
  for (const auto& [dt, shape] : o) out.emplace_back(dt, shape);
  std::int64_t* idx = out.size() >= 2 ? out[1].as<std::int64_t>().data() : nullptr;
  const bool column_major = c.node.attr_int("storage_order", 0) == 1;
  const std::int64_t planes = x.shape()[0] * x.shape()[1];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::uint8_t> ||
                  std::is_same_v<T, std::int8_t>) {
      maxpool_kernel<T>(x.as<T>().data(), out[0].as<T>().data(), idx, planes, g, column_major);
    } else {
      fail(c.node, ErrorCode::UnsupportedOperator, "MaxPool on this dtype is not implemented");
    }
  });
  return out;
}

// Number of window taps (start + k*d, k < kernel) inside [lo, hi).
std::int64_t taps_inside(std::int64_t start, std::int64_t kernel, std::int64_t dil, std::int64_t lo,
                         std::int64_t hi) {
  std::int64_t n = 0;
  for (std::int64_t k = 0; k < kernel; ++k) {
    const std::int64_t p = start + k * dil;
    n += p >= lo && p < hi;
  }
  return n;
}

std::vector<Tensor> run_avgpool(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const Geom g = pool_geom(c, tx.shape());
  const bool include_pad = c.node.attr_int("count_include_pad", 0) != 0;
  Tensor ty(o[0].first, o[0].second);
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  const std::int64_t planes = tx.shape()[0] * tx.shape()[1];
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  for (std::int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in_plane;
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      const std::int64_t hs = oh * g.sh - g.pt;
      const std::int64_t nh = include_pad ? taps_inside(hs, g.kh, g.dh, -g.pt, g.h + g.pb)
                                          : taps_inside(hs, g.kh, g.dh, 0, g.h);
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        const std::int64_t ws = ow * g.sw - g.pl;
        const std::int64_t nw = include_pad ? taps_inside(ws, g.kw, g.dw, -g.pl, g.w + g.pr)
                                            : taps_inside(ws, g.kw, g.dw, 0, g.w);
        float sum = 0;
        for (std::int64_t kh = 0; kh < g.kh; ++kh) {
          const std::int64_t ih = hs + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (std::int64_t kw = 0; kw < g.kw; ++kw) {
            const std::int64_t iw = ws + kw * g.dw;
            if (iw >= 0 && iw < g.w) sum += xp[ih * g.w + iw];
          }
        }
        const std::int64_t count = nh * nw;
        y[p * out_plane + oh * g.ow + ow] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
      }
    }
  }
  return {std::move(ty)};
}

// furiosa::QuantizedAveragePool: the integer average of 8-bit values over the in-bounds taps of
// each window, divided with rounding half away from zero, clamped to [output_min, output_max]
// (TFLite's quantized AVERAGE_POOL_2D reference kernels: the raw stored values are averaged, the
// input and output share their quantization).
std::string check_qavgpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kQ8);
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true);
  ch.require(n.attr_ints("kernel_shape", {}).size() == 2, "2-D pooling only (kernel_shape has 2 values)");
  ch.require(n.attr_ints("dilations", {1, 1}) == std::vector<std::int64_t>{1, 1}, "dilations must be 1");
  ch.require(n.attr_int("ceil_mode", 0) == 0, "ceil_mode must be 0");
  return ch.reason;
}
OutInfos infer_qavgpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  if (x.size() != 4) c.bad(fmt::format("input {} must be [N, C, H, W]", shape_to_string(x)));
  return {{c.dtype(0, "X"), window_out_shape(x, x[1], pool_geom(c, x))}};
}
std::vector<Tensor> run_qavgpool(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const Geom g = pool_geom(c, tx.shape());
  Tensor ty(o[0].first, o[0].second);
  const auto [qmin, qmax] = tx.dtype() == DType::UInt8 ? std::array<std::int64_t, 2>{0, 255}
                                                       : std::array<std::int64_t, 2>{-128, 127};
  const std::int64_t lo = c.node.attr_int("output_min", qmin), hi = c.node.attr_int("output_max", qmax);
  if (lo < qmin || hi > qmax || lo > hi) {
    c.bad(fmt::format("output range [{}, {}] is not inside the {} range", lo, hi, dtype_name(tx.dtype())));
  }
  const std::int64_t planes = tx.shape()[0] * tx.shape()[1];
  visit_dtype(tx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>) {
      const T* x = tx.as<T>().data();
      T* y = ty.as<T>().data();
      for (std::int64_t p = 0; p < planes; ++p) {
        const T* xp = x + p * g.h * g.w;
        for (std::int64_t oh = 0; oh < g.oh; ++oh) {
          const std::int64_t h0 = std::max<std::int64_t>(0, oh * g.sh - g.pt);
          const std::int64_t h1 = std::min<std::int64_t>(g.h, oh * g.sh - g.pt + g.kh);
          for (std::int64_t ow = 0; ow < g.ow; ++ow) {
            const std::int64_t w0 = std::max<std::int64_t>(0, ow * g.sw - g.pl);
            const std::int64_t w1 = std::min<std::int64_t>(g.w, ow * g.sw - g.pl + g.kw);
            std::int64_t sum = 0;
            for (std::int64_t ih = h0; ih < h1; ++ih) {
              for (std::int64_t iw = w0; iw < w1; ++iw) sum += xp[ih * g.w + iw];
            }
            const std::int64_t count = std::max<std::int64_t>(0, h1 - h0) * std::max<std::int64_t>(0, w1 - w0);
            std::int64_t avg = 0;
            if (count > 0) avg = sum >= 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
            y[p * g.oh * g.ow + oh * g.ow + ow] = static_cast<T>(std::clamp(avg, lo, hi));
          }
        }
      }
    }
  });
  return {std::move(ty)};
}

OutInfos infer_global_avgpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  if (x.size() < 2) c.bad(fmt::format("input {} must be [N, C, ...]", shape_to_string(x)));
  Shape out = x;
  for (std::size_t d = 2; d < out.size(); ++d) out[d] = 1;
  return {{DType::Float32, out}};
}
std::vector<Tensor> run_global_avgpool(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  Tensor ty(o[0].first, o[0].second);
  const std::int64_t planes = tx.shape()[0] * tx.shape()[1];
  const std::int64_t size = planes == 0 ? 0 : tx.elements() / planes;
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  for (std::int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (std::int64_t i = 0; i < size; ++i) sum += x[p * size + i];
    y[p] = static_cast<float>(sum / static_cast<double>(size));
  }
  return {std::move(ty)};
}

}  // namespace

OpRows conv_pool_ops() {
  OpRows rows;
  rows.onnx.push_back({"Conv", 2, 3, 1, check_conv, infer_conv, run_conv});
  rows.onnx.push_back({"MaxPool", 1, 1, 2, check_maxpool, infer_maxpool, run_maxpool});
  rows.onnx.push_back({"AveragePool", 1, 1, 1, check_avgpool, infer_avgpool, run_avgpool});
  rows.onnx.push_back({"GlobalAveragePool", 1, 1, 1, check_float_unary, infer_global_avgpool, run_global_avgpool});
  rows.onnx.push_back({"ConvInteger", 2, 4, 1, check_conv_integer, infer_conv_integer, run_conv_integer});
  rows.furiosa.push_back({"QuantizedAveragePool", 1, 1, 1, check_qavgpool, infer_qavgpool, run_qavgpool});
  return rows;
}

}  // namespace furiosa::host::detail
