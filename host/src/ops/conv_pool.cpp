// The host operator library (host/cpu_ops.h): Conv, ConvInteger, MaxPool, AveragePool, GlobalAveragePool, furiosa::QuantizedAveragePool.
#include "../float_math.h"
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

// Attribute sanity for Conv/ConvInteger/MaxPool/AveragePool (cpu_op_supported). `max_rank` is the
// largest number of spatial dims the op's kernels take (0: any).
std::string check_window_attrs(const Node& n, bool need_kernel, std::size_t max_rank) {
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
  if (max_rank > 0 && r > max_rank) {
    return fmt::format("{}-D windows (kernel_shape/strides/pads of rank {}) are not implemented, only "
                       "1-D and 2-D", r, r);
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID") {
    return fmt::format("unknown auto_pad '{}'", ap);
  }
  return "";
}

// Window geometry over any number of spatial dims: one entry per spatial dim of input [N, C, ...].
struct Window {
  std::vector<std::int64_t> in, k, s, d, pbeg, pend, out;  // as Geom's fields, per dim
  std::size_t rank() const { return in.size(); }
};

// Resolves the window of `node` for input shape x ([N, C, spatial...], at least 1 spatial dim) and
// kernel `kernel` (one entry per spatial dim), per the ONNX Conv / pooling output-size rules.
Window resolve_window(const Ctx& c, const Shape& x, const std::vector<std::int64_t>& kernel, bool ceil_mode) {
  const Node& n = c.node;
  if (x.size() < 3) {
    c.bad(fmt::format("input {} must be [N, C, D1, ...] with at least one spatial dim", shape_to_string(x)));
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
  // ONNX Conv/ConvInteger/pooling: pads "cannot be used simultaneously with auto_pad".
  if (ap != "NOTSET" && n.attributes.count("pads") != 0) {
    c.bad(
        fmt::format("attributes 'auto_pad' ({}) and 'pads' are both set; ONNX allows 'pads' only "
                    "with auto_pad NOTSET",
                    escape_text(ap, 32)));
  }
  Window w;
  w.in.assign(x.begin() + 2, x.end());
  w.k = kernel;
  w.s = strides;
  w.d = dil;
  w.pbeg.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  w.pend.assign(pads.begin() + static_cast<std::ptrdiff_t>(r), pads.end());
  w.out.assign(r, 1);
  for (std::size_t j = 0; j < r; ++j) {
    if (w.k[j] < 1 || w.s[j] < 1 || w.d[j] < 1) c.bad("kernel, strides and dilations must be >= 1");
    if (w.pbeg[j] < 0 || w.pend[j] < 0) c.bad("pads must be >= 0");
    const std::int64_t eff = (w.k[j] - 1) * w.d[j] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      w.out[j] = (w.in[j] + w.s[j] - 1) / w.s[j];
      const std::int64_t total = std::max<std::int64_t>(0, (w.out[j] - 1) * w.s[j] + eff - w.in[j]);
      w.pbeg[j] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pend[j] = total - w.pbeg[j];
      continue;
    }
    if (ap == "VALID") {
      w.pbeg[j] = w.pend[j] = 0;
    } else if (ap != "NOTSET") {
      c.bad(fmt::format("unknown auto_pad '{}'", ap));
    }
    const std::int64_t span = w.in[j] + w.pbeg[j] + w.pend[j] - eff;
    if (span < 0) {
      c.bad(fmt::format("window of extent {} does not fit the padded input extent {}", eff,
                        w.in[j] + w.pbeg[j] + w.pend[j]));
    }
    w.out[j] = (ceil_mode ? (span + w.s[j] - 1) / w.s[j] : span / w.s[j]) + 1;
    // A last window starting in the end padding is dropped (ONNX reference, PyTorch).
    if (ceil_mode && (w.out[j] - 1) * w.s[j] >= w.in[j] + w.pbeg[j]) --w.out[j];
  }
  return w;
}

// The window of a 1-D or 2-D op lifted to Geom (1-D: a height of 1); other ranks are refused.
Geom resolve_geom(const Ctx& c, const Shape& x, const std::vector<std::int64_t>& kernel, bool ceil_mode) {
  if (x.size() != 3 && x.size() != 4) {
    c.bad(fmt::format("input {} must be [N, C, W] or [N, C, H, W]: only 1-D and 2-D windows are "
                      "implemented", shape_to_string(x)));
  }
  const Window w = resolve_window(c, x, kernel, ceil_mode);
  const std::size_t o = 2 - w.rank();  // 1-D lands in the width slot
  std::array<std::int64_t, 2> in{1, 1}, k{1, 1}, s{1, 1}, d{1, 1}, pbeg{0, 0}, pend{0, 0}, out{1, 1};
  for (std::size_t i = 0; i < w.rank(); ++i) {
    in[i + o] = w.in[i], k[i + o] = w.k[i], s[i + o] = w.s[i], d[i + o] = w.d[i];
    pbeg[i + o] = w.pbeg[i], pend[i + o] = w.pend[i], out[i + o] = w.out[i];
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
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, false, 2);
  return ch.reason;
}
std::string check_conv_integer(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "x", kQ8).in(1, "w", kQ8).in(2, "x_zero_point", kQ8, false).in(3, "w_zero_point", kQ8, false);
  ch.same(0, 2).same(1, 3).require(n.attr_int("group", 1) >= 1, "attribute 'group' must be >= 1");
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, false, 2);
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
              if constexpr (std::is_same_v<T, float>) {
                axpy_f32(orow + ow0, row + ow0 * g.sw, wv, ow1 - ow0, g.sw);  // float_math.h
              } else if (g.sw == 1) {
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
  Tensor y = c.output(o, 0);
  conv_kernel<float>(x.as<float>().data(), w.as<float>().data(),
                     c.has(2) ? c.t(2).as<float>().data() : nullptr, y.as<float>().data(),
                     x.shape()[0], x.shape()[1], w.shape()[0], c.node.attr_int("group", 1), g);
  return single_output(std::move(y));
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
  Tensor y = c.output(o, 0);
  conv_kernel<std::int32_t>(xs.data(), ws.data(), nullptr, y.as<std::int32_t>().data(), x.shape()[0],
                            x.shape()[1], w.shape()[0], c.node.attr_int("group", 1), g);
  return single_output(std::move(y));
}

std::string check_maxpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32 | kQ8);
  const auto so = n.attr_int("storage_order", 0);
  ch.require(so == 0 || so == 1, "attribute 'storage_order' must be 0 or 1");
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true, 0);
  return ch.reason;
}
std::string check_avgpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32);
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true, 0);
  return ch.reason;
}

std::vector<std::int64_t> pool_kernel(const Ctx& c) {
  auto ks = c.node.attr_ints("kernel_shape", {});
  if (ks.empty()) c.bad("attribute 'kernel_shape' is required");
  return ks;
}
bool pool_ceil(const Ctx& c) { return c.node.attr_int("ceil_mode", 0) != 0; }

// 1-D and 2-D pooling (input [N, C, W] or [N, C, H, W]) runs on Geom, the kernels real models use.
Geom pool_geom(const Ctx& c, const Shape& x) { return resolve_geom(c, x, pool_kernel(c), pool_ceil(c)); }
// Any spatial rank (input [N, C, D1, ..., Dn], n >= 1); the N-D kernels below take n >= 3.
Window pool_window(const Ctx& c, const Shape& x) { return resolve_window(c, x, pool_kernel(c), pool_ceil(c)); }

Shape pool_out_shape(const Ctx& c, const Shape& x) {
  const Window w = pool_window(c, x);
  Shape out{x[0], x[1]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  return out;
}

OutInfos infer_maxpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  const Shape out = pool_out_shape(c, x);
  OutInfos r{{c.dtype(0, "X"), out}};
  if (c.n_out >= 2) r.push_back({DType::Int64, out});
  return r;
}
OutInfos infer_avgpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  return {{DType::Float32, pool_out_shape(c, x)}};
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

// Advances the multi-index `i` (last dim fastest) inside `extent`; false after the last one.
bool next_index(std::vector<std::int64_t>& i, const std::vector<std::int64_t>& extent) {
  for (std::size_t j = i.size(); j-- > 0;) {
    if (++i[j] < extent[j]) return true;
    i[j] = 0;
  }
  return false;
}

// The taps of one N-D window inside the input, in row-major order of the kernel: their offsets in
// a plane, row-major (`row`) and column-major (`col`, first spatial dim fastest: MaxPool's
// Indices with storage_order 1), and how many taps lie inside the padded input (`padded`, the
// divisor of AveragePool with count_include_pad).
struct WindowTaps {
  std::vector<std::int64_t> row, col;
  std::int64_t padded = 0;
};

// Calls f(out_offset, taps) for every output position of window w, in row-major order of the
// output plane. The general path for any spatial rank (1-D and 2-D pools take the Geom kernels).
template <class F>
void for_each_window(const Window& w, F&& f) {
  const std::size_t r = w.rank();
  std::vector<std::int64_t> row_stride(r, 1), col_stride(r, 1);
  for (std::size_t j = r - 1; j-- > 0;) row_stride[j] = row_stride[j + 1] * w.in[j + 1];
  for (std::size_t j = 1; j < r; ++j) col_stride[j] = col_stride[j - 1] * w.in[j - 1];
  for (std::int64_t e : w.out) {
    if (e == 0) return;  // no output positions (an empty input dim with SAME padding)
  }
  std::vector<std::int64_t> o(r, 0), k(r, 0), start(r, 0);
  WindowTaps taps;
  std::int64_t at = 0;
  do {
    taps.row.clear();
    taps.col.clear();
    taps.padded = 1;
    for (std::size_t j = 0; j < r; ++j) {
      start[j] = o[j] * w.s[j] - w.pbeg[j];
      taps.padded *= taps_inside(start[j], w.k[j], w.d[j], -w.pbeg[j], w.in[j] + w.pend[j]);
    }
    std::fill(k.begin(), k.end(), 0);
    do {
      std::int64_t ro = 0, co = 0;
      bool inside = true;
      for (std::size_t j = 0; j < r && inside; ++j) {
        const std::int64_t p = start[j] + k[j] * w.d[j];
        inside = p >= 0 && p < w.in[j];
        ro += p * row_stride[j];
        co += p * col_stride[j];
      }
      if (inside) {
        taps.row.push_back(ro);
        taps.col.push_back(co);
      }
    } while (next_index(k, w.k));
    f(at++, static_cast<const WindowTaps&>(taps));
  } while (next_index(o, w.out));
}

std::int64_t product(const std::vector<std::int64_t>& v) {
  std::int64_t n = 1;
  for (auto e : v) n *= e;
  return n;
}

// MaxPool over any spatial rank: x [planes, in...] dense, y and indices [planes, out...]. The
// first greatest tap in row-major order wins (as the 2-D kernel); no in-bounds tap gives the
// type's lowest value and index -1.
template <class T>
void maxpool_nd_kernel(const T* x, T* y, std::int64_t* indices, std::int64_t planes, const Window& w,
                       bool column_major) {
  const std::int64_t in_plane = product(w.in), out_plane = product(w.out);
  for_each_window(w, [&](std::int64_t at, const WindowTaps& taps) {
    const auto& flat = column_major ? taps.col : taps.row;
    for (std::int64_t p = 0; p < planes; ++p) {
      const T* xp = x + p * in_plane;
      T best = std::numeric_limits<T>::lowest();
      std::int64_t bi = -1;
      for (std::size_t t = 0; t < taps.row.size(); ++t) {
        const T v = xp[taps.row[t]];
        if (bi < 0 || v > best) {
          best = v;
          bi = flat[t];
        }
      }
      y[p * out_plane + at] = best;
      if (indices) indices[p * out_plane + at] = bi < 0 ? -1 : p * in_plane + bi;
    }
  });
}

std::vector<Tensor> run_maxpool(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const bool nd = x.shape().size() > 4;
  const Geom g = nd ? Geom{} : pool_geom(c, x.shape());
  const Window w = nd ? pool_window(c, x.shape()) : Window{};
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < o.size(); ++i) out.push_back(c.output(o, i));
  std::int64_t* idx = out.size() >= 2 ? out[1].as<std::int64_t>().data() : nullptr;
  const bool column_major = c.node.attr_int("storage_order", 0) == 1;
  const std::int64_t planes = x.shape()[0] * x.shape()[1];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::uint8_t> ||
                  std::is_same_v<T, std::int8_t>) {
      if (nd) {
        maxpool_nd_kernel<T>(x.as<T>().data(), out[0].as<T>().data(), idx, planes, w, column_major);
      } else {
        maxpool_kernel<T>(x.as<T>().data(), out[0].as<T>().data(), idx, planes, g, column_major);
      }
    } else {
      fail(c.node, ErrorCode::UnsupportedOperator, "MaxPool on this dtype is not implemented");
    }
  });
  return out;
}

// AveragePool over any spatial rank: x [planes, in...] dense, y [planes, out...]; the sum in
// float32 in row-major tap order, divided by the in-bounds taps (or, with count_include_pad, the
// taps inside the padded input), 0 when that count is 0.
void avgpool_nd_kernel(const float* x, float* y, std::int64_t planes, const Window& w, bool include_pad) {
  const std::int64_t in_plane = product(w.in), out_plane = product(w.out);
  for_each_window(w, [&](std::int64_t at, const WindowTaps& taps) {
    const std::int64_t count = include_pad ? taps.padded : static_cast<std::int64_t>(taps.row.size());
    for (std::int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * in_plane;
      float sum = 0;
      for (std::int64_t off : taps.row) sum += xp[off];
      y[p * out_plane + at] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
    }
  });
}

std::vector<Tensor> run_avgpool(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const bool include_pad = c.node.attr_int("count_include_pad", 0) != 0;
  Tensor ty = c.output(o, 0);
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  const std::int64_t planes = tx.shape()[0] * tx.shape()[1];
  if (tx.shape().size() > 4) {
    avgpool_nd_kernel(x, y, planes, pool_window(c, tx.shape()), include_pad);
    return single_output(std::move(ty));
  }
  const Geom g = pool_geom(c, tx.shape());
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
  return single_output(std::move(ty));
}

// furiosa::QuantizedAveragePool: the integer average of 8-bit values over the in-bounds taps of
// each window, divided with rounding half away from zero, clamped to [output_min, output_max]
// (TFLite's quantized AVERAGE_POOL_2D reference kernels: the raw stored values are averaged, the
// input and output share their quantization).
std::string check_qavgpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kQ8);
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true, 2);
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
  Tensor ty = c.output(o, 0);
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
  return single_output(std::move(ty));
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
  Tensor ty = c.output(o, 0);
  const std::int64_t planes = tx.shape()[0] * tx.shape()[1];
  const std::int64_t size = planes == 0 ? 0 : tx.elements() / planes;
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  for (std::int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (std::int64_t i = 0; i < size; ++i) sum += x[p * size + i];
    y[p] = static_cast<float>(sum / static_cast<double>(size));
  }
  return single_output(std::move(ty));
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
