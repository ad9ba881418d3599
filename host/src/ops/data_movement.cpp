// The host operator library (host/cpu_ops.h): Data movement: Flatten, Reshape, Transpose, Concat, Split, Squeeze, Unsqueeze, Identity, Shape,
// Gather, Slice, Cast; the shape-subgraph operators Range, ConstantOfShape, Expand, Tile, Pad;
// Dropout (inference: identity).
#include "ops_common.h"
#include "furiosa/host/index_map.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Data movement: Flatten, Reshape, Transpose, Concat, Split, Squeeze, Unsqueeze, Identity,
// Shape, Gather, Slice, Cast
// ---------------------------------------------------------------------------------------------


// Same bytes, new shape (Flatten, Reshape, Squeeze, Unsqueeze, Identity).
std::vector<Tensor> run_copy(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  Tensor y = c.output_for_overwrite(o, 0);
  if (!x.bytes().empty()) std::memcpy(y.bytes().data(), x.bytes().data(), x.bytes().size());
  return single_output(std::move(y));
}

OutInfos infer_flatten(const Ctx& c) {
  const Shape& x = c.shape(0, "input");
  const std::int64_t rank = static_cast<std::int64_t>(x.size());
  std::int64_t axis = c.node.attr_int("axis", 1);
  if (axis < -rank || axis > rank) c.bad(fmt::format("axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  std::int64_t a = 1, b = 1;
  for (std::int64_t d = 0; d < rank; ++d) (d < axis ? a : b) *= x[d];
  return {{c.dtype(0, "input"), {a, b}}};
}

std::string check_reshape(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).in(1, "shape", kIdx).reason;
}
OutInfos infer_reshape(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const auto spec = int_values(c.constant(1, "shape"));
  const bool allowzero = c.node.attr_int("allowzero", 0) != 0;
  Shape out(spec.size());
  std::int64_t known = 1;
  int infer_at = -1;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    std::int64_t v = spec[i];
    if (v == 0 && !allowzero) {
      if (i >= x.size()) c.bad(fmt::format("shape[{}] = 0 copies a dim the input {} does not have", i, shape_to_string(x)));
      v = x[i];
    }
    if (v == -1) {
      if (infer_at >= 0) c.bad("shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (v < 0) c.bad(fmt::format("shape[{}] = {} is invalid", i, v));
    out[i] = v;
    known *= v;
  }
  const std::int64_t total = element_count(x);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      c.bad(fmt::format("cannot reshape {} to {}", shape_to_string(x), shape_to_string(spec)));
    }
    out[static_cast<std::size_t>(infer_at)] = total / known;
  } else if (known != total) {
    c.bad(fmt::format("cannot reshape {} ({} elements) to {}", shape_to_string(x), total, shape_to_string(out)));
  }
  return {{c.dtype(0, "data"), out}};
}

std::vector<std::int64_t> transpose_perm(const Ctx& c, std::size_t rank) {
  std::vector<std::int64_t> dflt(rank);
  for (std::size_t i = 0; i < rank; ++i) dflt[i] = static_cast<std::int64_t>(rank - 1 - i);
  auto perm = c.node.attr_ints("perm", dflt);
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank;
  for (std::size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < static_cast<std::int64_t>(rank) && !seen[static_cast<std::size_t>(perm[i])];
    if (ok) seen[static_cast<std::size_t>(perm[i])] = true;
  }
  if (!ok) c.bad(fmt::format("perm {} is not a permutation of {} dims", shape_to_string(perm), rank));
  return perm;
}
OutInfos infer_transpose(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const auto perm = transpose_perm(c, x.size());
  Shape out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[static_cast<std::size_t>(perm[i])];
  return {{c.dtype(0, "data"), out}};
}
std::vector<Tensor> run_transpose(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const auto perm = transpose_perm(c, x.shape().size());
  const auto in_st = contiguous_strides(x.shape());
  std::vector<std::int64_t> st(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) st[i] = in_st[static_cast<std::size_t>(perm[i])];
  Tensor y = c.output_for_overwrite(o, 0);
  gather_strided_any(x.dtype(), x.bytes().data(), y.bytes().data(), y.shape(), st, 0);
  return single_output(std::move(y));
}

std::string check_concat(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.require(!d.empty(), "Concat needs at least one input");
  for (std::size_t i = 0; i < d.size(); ++i) ch.in(i, "input", kAll).same(0, i);
  return ch.reason;
}
OutInfos infer_concat(const Ctx& c) {
  if (c.in.empty()) c.bad("Concat needs at least one input");
  const Shape& first = c.shape(0, "input 0");
  const DType dt = c.dtype(0, "input 0");
  if (first.empty()) c.bad("Concat inputs must have rank >= 1");
  const std::int64_t rank = static_cast<std::int64_t>(first.size());
  if (!c.node.attributes.count("axis")) c.bad("attribute 'axis' is required");
  const auto axis = static_cast<std::size_t>(c.axis(c.node.attr_int("axis", 0), rank, "axis"));
  Shape out = first;
  out[axis] = 0;
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    const Shape& s = c.shape(i, "input");
    if (c.dtype(i, "input") != dt) c.bad("inputs have different dtypes");
    bool ok = s.size() == first.size();
    for (std::size_t d = 0; ok && d < s.size(); ++d) ok = d == axis || s[d] == first[d];
    if (!ok) {
      c.bad(fmt::format("input {} has shape {}, which does not fit {} along axis {}", i,
                        shape_to_string(s), shape_to_string(first), axis));
    }
    out[axis] += s[axis];
  }
  return {{dt, out}};
}
std::vector<Tensor> run_concat(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output_for_overwrite(o, 0);
  const Shape& ys = y.shape();
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(ys.size()), "axis"));
  std::int64_t outer = 1, inner = static_cast<std::int64_t>(dtype_size(y.dtype()));
  for (std::size_t d = 0; d < axis; ++d) outer *= ys[d];
  for (std::size_t d = axis + 1; d < ys.size(); ++d) inner *= ys[d];
  std::byte* dst = y.bytes().data();
  const std::int64_t row = ys[axis] * inner;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    const Tensor& x = c.t(i);
    const std::int64_t chunk = x.shape()[axis] * inner;
    const std::byte* src = x.bytes().data();
    for (std::int64_t a = 0; a < outer && chunk > 0; ++a) {
      std::memcpy(dst + a * row + at, src + a * chunk, static_cast<std::size_t>(chunk));
    }
    at += chunk;
  }
  return single_output(std::move(y));
}

// Split sizes along the axis: input 1 (opset >= 13), attribute 'split' (< 13), 'num_outputs'
// (>= 18, last part smaller), else equal parts.
std::vector<std::int64_t> split_sizes(const Ctx& c, std::int64_t dim) {
  std::vector<std::int64_t> sizes;
  const auto parts = static_cast<std::int64_t>(c.n_out);
  if (c.has(1)) {
    sizes = int_values(c.constant(1, "split"));
  } else if (c.node.attributes.count("split")) {
    sizes = c.node.attr_ints("split", {});
  } else if (c.node.attributes.count("num_outputs")) {
    const std::int64_t num = c.node.attr_int("num_outputs", parts);
    if (num != parts || num < 1) c.bad(fmt::format("num_outputs {} but the node has {} outputs", num, parts));
    const std::int64_t each = (dim + num - 1) / num;
    for (std::int64_t i = 0; i < num; ++i) sizes.push_back(std::max<std::int64_t>(0, std::min(each, dim - i * each)));
  } else {
    if (dim % parts != 0) c.bad(fmt::format("dim {} does not split into {} equal parts", dim, parts));
    sizes.assign(static_cast<std::size_t>(parts), dim / parts);
  }
  if (static_cast<std::int64_t>(sizes.size()) != parts) {
    c.bad(fmt::format("{} split sizes for {} outputs", sizes.size(), parts));
  }
  std::int64_t sum = 0;
  for (auto s : sizes) {
    if (s < 0) c.bad("split sizes must be >= 0");
    sum += s;
  }
  if (sum != dim) c.bad(fmt::format("split sizes sum to {}, the axis has {}", sum, dim));
  return sizes;
}
OutInfos infer_split(const Ctx& c) {
  const Shape& x = c.shape(0, "input");
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(x.size()), "axis"));
  OutInfos out;
  for (auto s : split_sizes(c, x[axis])) {
    Shape o = x;
    o[axis] = s;
    out.push_back({c.dtype(0, "input"), o});
  }
  return out;
}
std::vector<Tensor> run_split(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(xs.size()), "axis"));
  std::int64_t outer = 1, inner = static_cast<std::int64_t>(dtype_size(x.dtype()));
  for (std::size_t d = 0; d < axis; ++d) outer *= xs[d];
  for (std::size_t d = axis + 1; d < xs.size(); ++d) inner *= xs[d];
  const std::int64_t row = xs[axis] * inner;
  std::vector<Tensor> out;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    Tensor y = c.output_for_overwrite(o, i);
    const std::int64_t chunk = o[i].second[axis] * inner;
    for (std::int64_t a = 0; a < outer && chunk > 0; ++a) {
      std::memcpy(y.bytes().data() + a * chunk, x.bytes().data() + a * row + at, static_cast<std::size_t>(chunk));
    }
    at += chunk;
    out.push_back(std::move(y));
  }
  return out;
}

// Axes from input 1 (opset >= 13) or attribute 'axes'; nullopt when neither is given.
std::optional<std::vector<std::int64_t>> axes_operand(const Ctx& c) {
  if (c.has(1)) return int_values(c.constant(1, "axes"));
  if (c.node.attributes.count("axes")) return c.node.attr_ints("axes", {});
  return std::nullopt;
}

OutInfos infer_squeeze(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const std::int64_t rank = static_cast<std::int64_t>(x.size());
  std::vector<bool> drop(x.size(), false);
  if (auto axes = axes_operand(c)) {
    for (auto a : *axes) {
      const auto ax = static_cast<std::size_t>(c.axis(a, rank, "axis"));
      if (x[ax] != 1) c.bad(fmt::format("cannot squeeze axis {} of shape {}: not 1", a, shape_to_string(x)));
      drop[ax] = true;
    }
  } else {
    for (std::size_t d = 0; d < x.size(); ++d) drop[d] = x[d] == 1;
  }
  Shape out;
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (!drop[d]) out.push_back(x[d]);
  }
  return {{c.dtype(0, "data"), out}};
}

OutInfos infer_unsqueeze(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  auto axes = axes_operand(c);
  if (!axes) c.bad("axes are required (input 1 since opset 13, attribute before)");
  const std::int64_t rank = static_cast<std::int64_t>(x.size() + axes->size());
  std::vector<bool> added(static_cast<std::size_t>(rank), false);
  for (auto a : *axes) {
    const auto ax = static_cast<std::size_t>(c.axis(a, rank, "axis"));
    if (added[ax]) c.bad(fmt::format("axis {} is listed twice", a));
    added[ax] = true;
  }
  Shape out;
  std::size_t next = 0;
  for (std::size_t d = 0; d < added.size(); ++d) out.push_back(added[d] ? 1 : x[next++]);
  return {{c.dtype(0, "data"), out}};
}

OutInfos infer_shape(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const auto rank = static_cast<std::int64_t>(x.size());
  auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
  const std::int64_t start = clampi(c.node.attr_int("start", 0));
  const std::int64_t end = clampi(c.node.attr_int("end", rank));
  return {{DType::Int64, {std::max<std::int64_t>(0, end - start)}}};
}
std::vector<Tensor> run_shape(const Ctx& c, const OutInfos& o) {
  const Shape& x = c.t(0).shape();
  const auto rank = static_cast<std::int64_t>(x.size());
  std::int64_t start = c.node.attr_int("start", 0);
  start = std::clamp(start < 0 ? start + rank : start, std::int64_t{0}, rank);
  Tensor y = c.output(o, 0);
  auto v = y.as<std::int64_t>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = x[static_cast<std::size_t>(start) + i];
  return single_output(std::move(y));
}

std::string check_gather(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).in(1, "indices", kIdx).reason;
}
OutInfos infer_gather(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const Shape& idx = c.shape(1, "indices");
  if (x.empty()) c.bad("data must have rank >= 1");
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(x.size()), "axis"));
  Shape out(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.end());
  return {{c.dtype(0, "data"), out}};
}
std::vector<Tensor> run_gather(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(xs.size()), "axis"));
  auto idx = int_values(c.t(1));
  const std::int64_t n = xs[axis];
  for (auto& i : idx) {
    if (i < -n || i >= n) {
      fail(c.node, ErrorCode::InvalidInput, fmt::format("index {} is out of range for axis {} of size {}", i, axis, n));
    }
    if (i < 0) i += n;
  }
  std::int64_t outer = 1, inner = static_cast<std::int64_t>(dtype_size(x.dtype()));
  for (std::size_t d = 0; d < axis; ++d) outer *= xs[d];
  for (std::size_t d = axis + 1; d < xs.size(); ++d) inner *= xs[d];
  Tensor y = c.output(o, 0);
  std::byte* dst = y.bytes().data();
  const std::byte* src = x.bytes().data();
  if (inner == 0) return single_output(std::move(y));
  for (std::int64_t a = 0; a < outer; ++a) {
    for (auto i : idx) {
      std::memcpy(dst, src + (a * n + i) * inner, static_cast<std::size_t>(inner));
      dst += inner;
    }
  }
  return single_output(std::move(y));
}

std::string check_slice(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}
      .in(0, "data", kAll)
      .in(1, "starts", kIdx, false)
      .in(2, "ends", kIdx, false)
      .in(3, "axes", kIdx, false)
      .in(4, "steps", kIdx, false)
      .reason;
}

struct SliceGeom {
  Shape out;
  std::vector<std::int64_t> strides;  // source strides per output dim (steps applied)
  std::int64_t base = 0;              // source offset of the first element
};
SliceGeom slice_geom(const Ctx& c, const Shape& x) {
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (c.has(1)) {
    starts = int_values(c.constant(1, "starts"));
    ends = int_values(c.constant(2, "ends"));
    if (c.has(3)) axes = int_values(c.constant(3, "axes"));
    if (c.has(4)) steps = int_values(c.constant(4, "steps"));
  } else {  // opset < 10
    starts = c.node.attr_ints("starts", {});
    ends = c.node.attr_ints("ends", {});
    axes = c.node.attr_ints("axes", {});
  }
  if (axes.empty()) {
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    c.bad("starts, ends, axes and steps must have the same length");
  }
  const std::int64_t rank = static_cast<std::int64_t>(x.size());
  SliceGeom g;
  g.out = x;
  const auto in_st = contiguous_strides(x);
  g.strides = in_st;
  std::vector<bool> seen(x.size(), false);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const auto ax = static_cast<std::size_t>(c.axis(axes[i], rank, "axis"));
    if (seen[ax]) c.bad(fmt::format("axis {} is sliced twice", axes[i]));
    seen[ax] = true;
    const std::int64_t dim = x[ax], step = steps[i];
    if (step == 0) c.bad("slice step must not be 0");
    const SliceDim sd = slice_dim(dim, starts[i], ends[i], step);
    g.out[ax] = sd.length;
    g.strides[ax] = in_st[ax] * step;
    if (sd.length > 0) g.base += sd.start * in_st[ax];
  }
  return g;
}
OutInfos infer_slice(const Ctx& c) {
  return {{c.dtype(0, "data"), slice_geom(c, c.shape(0, "data")).out}};
}
std::vector<Tensor> run_slice(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const SliceGeom g = slice_geom(c, x.shape());
  Tensor y = c.output(o, 0);
  gather_strided_any(x.dtype(), x.bytes().data(), y.bytes().data(), g.out, g.strides, g.base);
  return single_output(std::move(y));
}


std::string check_cast(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "input", kAll);
  const std::int64_t to = n.attr_int("to", -1);
  ch.require(n.attributes.count("to") > 0, "attribute 'to' is required");
  ch.require(dtype_from_onnx(to).has_value(),
             fmt::format("cast to ONNX type {} is not implemented (only float32, uint8, int8, int32, "
                         "int64: 1, 2, 3, 6, 7)", to));
  return ch.reason;
}
OutInfos infer_cast(const Ctx& c) {
  const auto to = dtype_from_onnx(c.node.attr_int("to", -1));
  if (!to) c.bad("attribute 'to' is missing or names a type the host cannot hold");
  return {{*to, c.shape(0, "input")}};
}
std::vector<Tensor> run_cast(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  Tensor y = c.output(o, 0);
  visit_dtype(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_dtype(y.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      auto s = x.as<From>();
      auto d = y.as<To>();
      for (std::size_t i = 0; i < s.size(); ++i) d[i] = convert<To>(s[i]);
    });
  });
  return single_output(std::move(y));
}

// ---------------------------------------------------------------------------------------------
// Range, ConstantOfShape, Expand, Tile, Pad, Dropout
// ---------------------------------------------------------------------------------------------

std::string check_range(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}
      .in(0, "start", kF32 | kIdx)
      .in(1, "limit", kF32 | kIdx)
      .in(2, "delta", kF32 | kIdx)
      .same(0, 1)
      .same(0, 2)
      .reason;
}
// Element count max(ceil((limit - start) / delta), 0), computed in double.
std::int64_t range_count(const Ctx& c) {
  double v[3];
  const char* names[3] = {"start", "limit", "delta"};
  for (std::size_t i = 0; i < 3; ++i) {
    const Tensor& t = c.constant(i, names[i]);
    if (t.elements() != 1) c.bad(fmt::format("{} must be a scalar, has shape {}", names[i], shape_to_string(t.shape())));
    visit_dtype(t.dtype(), [&](auto tag) { v[i] = static_cast<double>(t.as<decltype(tag)>()[0]); });
  }
  if (v[2] == 0) c.bad("delta must not be 0");
  const double n = std::ceil((v[1] - v[0]) / v[2]);
  return n > 0 ? static_cast<std::int64_t>(n) : 0;
}
OutInfos infer_range(const Ctx& c) { return {{c.dtype(0, "start"), {range_count(c)}}}; }
// Element i is start + i * delta (numpy's arange; integers exactly, floats computed in double).
std::vector<Tensor> run_range(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output(o, 0);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T start = c.t(0).as<T>()[0], delta = c.t(2).as<T>()[0];
    auto out = y.as<T>();
    for (std::size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        out[i] = static_cast<T>(static_cast<double>(start) + static_cast<double>(i) * static_cast<double>(delta));
      } else {
        out[i] = wrap_add(start, wrap_mul(static_cast<T>(i), delta));
      }
    }
  });
  return single_output(std::move(y));
}

std::string check_constant_of_shape(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "input", bit(DType::Int64));
  auto it = n.attributes.find("value");
  if (it != n.attributes.end()) {
    const Tensor* v = std::get_if<Tensor>(&it->second);
    ch.require(v != nullptr, "attribute 'value' must be a tensor");
    ch.require(!v || v->elements() == 1, "attribute 'value' must hold exactly one element");
  }
  return ch.reason;
}
// The fill value: attribute 'value' (one element, any of the five dtypes), default float32 0.
Tensor constant_of_shape_value(const Node& n) {
  auto it = n.attributes.find("value");
  if (it == n.attributes.end()) {
    Tensor t(DType::Float32, {1});
    t.as<float>()[0] = 0.0f;
    return t;
  }
  return std::get<Tensor>(it->second);
}
OutInfos infer_constant_of_shape(const Ctx& c) {
  const auto dims = int_values(c.constant(0, "input"));
  for (auto v : dims) {
    if (v < 0) c.bad(fmt::format("shape {} has a negative dim", shape_to_string(dims)));
  }
  return {{constant_of_shape_value(c.node).dtype(), dims}};
}
std::vector<Tensor> run_constant_of_shape(const Ctx& c, const OutInfos& o) {
  const Tensor v = constant_of_shape_value(c.node);
  Tensor y = c.output(o, 0);
  const std::size_t es = dtype_size(y.dtype());
  for (std::int64_t i = 0; i < y.elements(); ++i) {
    std::memcpy(y.bytes().data() + i * static_cast<std::int64_t>(es), v.bytes().data(), es);
  }
  return single_output(std::move(y));
}

std::string check_expand_tile(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "input", kAll).in(1, n.op_type == "Tile" ? "repeats" : "shape", bit(DType::Int64)).reason;
}
OutInfos infer_expand(const Ctx& c) {
  const auto target = int_values(c.constant(1, "shape"));
  return {{c.dtype(0, "input"), broadcast_shape(c, c.shape(0, "input"), target)}};
}
// The input broadcast to the output shape (numpy's bidirectional broadcasting).
std::vector<Tensor> run_expand(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  Tensor y = c.output(o, 0);
  gather_strided_any(x.dtype(), x.bytes().data(), y.bytes().data(), y.shape(),
                     broadcast_strides(x.shape(), y.shape().size()), 0);
  return single_output(std::move(y));
}

std::vector<std::int64_t> tile_repeats(const Ctx& c, const Shape& x) {
  const auto reps = int_values(c.constant(1, "repeats"));
  if (reps.size() != x.size()) c.bad(fmt::format("repeats has {} values for an input of rank {}", reps.size(), x.size()));
  for (auto r : reps) {
    if (r < 0) c.bad(fmt::format("repeats {} has a negative value", shape_to_string(reps)));
  }
  return reps;
}
OutInfos infer_tile(const Ctx& c) {
  const Shape& x = c.shape(0, "input");
  const auto reps = tile_repeats(c, x);
  Shape out(x.size());
  for (std::size_t d = 0; d < x.size(); ++d) out[d] = x[d] * reps[d];
  return {{c.dtype(0, "input"), out}};
}
// Output dim d of size repeats[d] * input[d] read as [repeats[d], input[d]]: one strided gather
// over the interleaved shape with stride 0 along each repeat dim.
std::vector<Tensor> run_tile(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const auto reps = tile_repeats(c, x.shape());
  const auto st = contiguous_strides(x.shape());
  Shape shape;
  std::vector<std::int64_t> strides;
  for (std::size_t d = 0; d < reps.size(); ++d) {
    shape.insert(shape.end(), {reps[d], x.shape()[d]});
    strides.insert(strides.end(), {0, st[d]});
  }
  Tensor y = c.output(o, 0);
  gather_strided_any(x.dtype(), x.bytes().data(), y.bytes().data(), shape, strides, 0);
  return single_output(std::move(y));
}

std::string check_pad(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "data", kAll).in(1, "pads", bit(DType::Int64), false).in(2, "constant_value", kAll, false).same(0, 2);
  ch.in(3, "axes", kIdx, false);
  const std::string mode = n.attr_string("mode", "constant");
  ch.require(pad_mode(mode).has_value(),
             fmt::format("mode '{}' is not an ONNX Pad mode (constant, reflect, edge, wrap)", mode));
  ch.require(!n.attributes.count("value") || !ch.present(0) || *d[0] == DType::Float32,
             "the 'value' attribute (opset < 11) needs float32 data");
  return ch.reason;
}
// Begin and end pads per dim: input 'pads' (opset >= 11, with optional 'axes' (>= 18)) or the
// 'pads' attribute (< 11).
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> pad_amounts(const Ctx& c, const Shape& x) {
  const auto rank = static_cast<std::int64_t>(x.size());
  std::vector<std::int64_t> pads;
  if (c.has(1)) {
    pads = int_values(c.constant(1, "pads"));
  } else if (c.node.attributes.count("pads")) {
    pads = c.node.attr_ints("pads", {});
  } else {
    c.bad("pads are required (input 1 since opset 11, attribute before)");
  }
  std::vector<std::int64_t> axes;
  if (c.has(3)) {
    for (auto a : int_values(c.constant(3, "axes"))) axes.push_back(c.axis(a, rank, "axes entry"));
  } else {
    for (std::int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) {
    c.bad(fmt::format("pads has {} values, 2 x {} axes expected", pads.size(), axes.size()));
  }
  std::vector<std::int64_t> begin(x.size(), 0), end(x.size(), 0);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    begin[static_cast<std::size_t>(axes[i])] = pads[i];
    end[static_cast<std::size_t>(axes[i])] = pads[axes.size() + i];
  }
  return {begin, end};
}
OutInfos infer_pad(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const auto [begin, end] = pad_amounts(c, x);
  Shape out(x.size());
  for (std::size_t d = 0; d < x.size(); ++d) {
    out[d] = x[d] + begin[d] + end[d];
    if (out[d] < 0) c.bad(fmt::format("pads make dim {} of {} negative", d, shape_to_string(x)));
  }
  return {{c.dtype(0, "data"), out}};
}
std::vector<Tensor> run_pad(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const auto [begin, end] = pad_amounts(c, x.shape());
  const std::string mode_name = c.node.attr_string("mode", "constant");
  const PadMode mode = *pad_mode(mode_name);  // check_pad accepted it
  if (mode != PadMode::Constant) {
    for (std::size_t d = 0; d < x.shape().size(); ++d) {
      if (x.shape()[d] == 0 && o[0].second[d] > 0) c.bad(fmt::format("mode '{}' cannot pad the empty dim {}", mode_name, d));
    }
  }
  Tensor y = c.output(o, 0);
  const std::size_t es = dtype_size(x.dtype());
  std::vector<std::byte> fill(es, std::byte{0});
  if (const Tensor* v = c.opt(2)) {
    if (v->elements() != 1) c.bad("constant_value must hold one value");
    std::memcpy(fill.data(), v->bytes().data(), es);
  } else if (x.dtype() == DType::Float32) {
    const float v = float_attr(c.node, "value", 0.0f);
    std::memcpy(fill.data(), &v, es);
  }
  std::vector<std::vector<std::int64_t>> tables(x.shape().size());
  for (std::size_t d = 0; d < tables.size(); ++d) {
    for (std::int64_t i = 0; i < y.shape()[d]; ++i) tables[d].push_back(pad_source(mode, i, begin[d], x.shape()[d]));
  }
  gather_indexed(es, x.bytes().data(), x.shape(), y.bytes().data(), y.shape(), tables, fill.data());
  return single_output(std::move(y));
}

std::string check_dropout(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "data", kF32).in(1, "ratio", kF32, false);
  ch.require(d.size() < 3 || !d[2].has_value(), "input 2 (training_mode) is not supported (inference only)");
  ch.require(n.outputs.size() < 2 || n.outputs[1] < 0,
             "the mask output (bool) is not supported: the host library has no bool dtype");
  ch.require(n.attr_int("is_test", 1) != 0, "is_test=0 (training, opset < 7) is not supported");
  return ch.reason;
}

}  // namespace

OpRows data_movement_ops() {
  OpRows rows;
  rows.onnx.push_back({"Flatten", 1, 1, 1, check_any, infer_flatten, run_copy});
  rows.onnx.push_back({"Reshape", 2, 2, 1, check_reshape, infer_reshape, run_copy});
  rows.onnx.push_back({"Transpose", 1, 1, 1, check_any, infer_transpose, run_transpose});
  rows.onnx.push_back({"Concat", 1, kMany, 1, check_concat, infer_concat, run_concat});
  rows.onnx.push_back({"Split", 1, 2, kMany, check_data_and_index, infer_split, run_split});
  rows.onnx.push_back({"Squeeze", 1, 2, 1, check_data_and_index, infer_squeeze, run_copy});
  rows.onnx.push_back({"Unsqueeze", 1, 2, 1, check_data_and_index, infer_unsqueeze, run_copy});
  rows.onnx.push_back({"Identity", 1, 1, 1, check_any, infer_same_as_input0, run_copy});
  rows.onnx.push_back({"Cast", 1, 1, 1, check_cast, infer_cast, run_cast});
  rows.onnx.push_back({"Shape", 1, 1, 1, check_any, infer_shape, run_shape});
  rows.onnx.push_back({"Gather", 2, 2, 1, check_gather, infer_gather, run_gather});
  rows.onnx.push_back({"Slice", 1, 5, 1, check_slice, infer_slice, run_slice});
  rows.onnx.push_back({"Range", 3, 3, 1, check_range, infer_range, run_range});
  rows.onnx.push_back({"ConstantOfShape", 1, 1, 1, check_constant_of_shape, infer_constant_of_shape, run_constant_of_shape});
  rows.onnx.push_back({"Expand", 2, 2, 1, check_expand_tile, infer_expand, run_expand});
  rows.onnx.push_back({"Tile", 2, 2, 1, check_expand_tile, infer_tile, run_tile});
  rows.onnx.push_back({"Pad", 1, 4, 1, check_pad, infer_pad, run_pad});
  rows.onnx.push_back({"Dropout", 1, 3, 1, check_dropout, infer_same_as_input0, run_copy});
  return rows;
}

}  // namespace furiosa::host::detail
