// TFLite operators that rearrange elements without arithmetic (importer.h): GATHER_ND with
// constant indices, SPLIT, SPLIT_V, DEPTH_TO_SPACE and SPACE_TO_DEPTH, all on the model's own
// (NHWC) layout:
//  - GATHER_ND: x viewed as [prod(x.shape[:k]), x.shape[k:]...] (Reshape) and Gather on axis 0
//    with the flat indices computed here (so only constant indices are taken);
//  - SPLIT / SPLIT_V: Split with the sizes (SPLIT_V's one -1 resolved here);
//  - DEPTH_TO_SPACE: Reshape [N, H, W, bs, bs, C'], Transpose [0, 1, 3, 2, 4, 5], Reshape
//    [N, H bs, W bs, C'] (TFLite's depth order: (row offset * bs + column offset) * C' + c);
//  - SPACE_TO_DEPTH: the inverse, Reshape [N, H / bs, bs, W / bs, bs, C], the same Transpose,
//    Reshape [N, H / bs, W / bs, bs bs C].
// Reshape, Transpose and Split of 8-bit tensors run on the NPU; Gather on the host.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "importer.h"

namespace furiosa::compiler::detail::tflite {

void Importer::gather_nd(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], idx = in[1], y = out[0];
  if (!info(idx).data) unsupported(fmt::format("indices '{}' must be constant", info(idx).name));
  const auto indices = int_constant(idx, "indices");
  const Shape& xs = info(x).shape;
  const Shape& is = info(idx).shape;
  if (is.empty() || is.back() < 1 || static_cast<std::size_t>(is.back()) > xs.size()) {
    bad(fmt::format("indices '{}' {} must have a last dim in [1, {}]", info(idx).name,
                    shape_to_string(is), xs.size()));
  }
  const auto k = static_cast<std::size_t>(is.back());
  const Shape outer(is.begin(), is.end() - 1);
  Shape expected = outer;
  expected.insert(expected.end(), xs.begin() + static_cast<std::ptrdiff_t>(k), xs.end());
  dtype(x);
  check_output_shape(y, expected);
  // Flat row numbers of x's first k dims, row-major.
  Tensor flat(DType::Int64, outer);
  auto fv = flat.as<std::int64_t>();
  for (std::size_t r = 0; r < fv.size(); ++r) {
    std::int64_t f = 0;
    for (std::size_t j = 0; j < k; ++j) {
      const std::int64_t v = indices[r * k + j];
      if (v < 0 || v >= xs[j]) {
        bad(fmt::format("index {} of indices '{}' is outside dim {} of input '{}' {}", v,
                        info(idx).name, j, info(x).name, shape_to_string(xs)));
      }
      f = f * xs[j] + v;
    }
    fv[r] = f;
  }
  Shape rows{1};
  for (std::size_t j = 0; j < k; ++j) rows[0] *= xs[j];
  rows.insert(rows.end(), xs.begin() + static_cast<std::ptrdiff_t>(k), xs.end());
  const std::string base = info(y).name;
  const int xr = add_value(base + "/rows", dtype(x), rows);
  add_node("Reshape", "", {model_view(x), shape_constant(base + "/rows_shape", rows)}, {xr}, {},
           "/rows");
  add_node("Gather", "", {xr, add_constant(base + "/flat_indices", std::move(flat))},
           {output_model(y)}, {{"axis", std::int64_t{0}}});
}

void Importer::split(const fb::Operator& op, bool sizes_given) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  // SPLIT: (axis, x); SPLIT_V: (x, size_splits, axis).
  if (in.size() != (sizes_given ? 3u : 2u) || out.empty()) {
    bad(fmt::format("has {} inputs and {} outputs; {} inputs and at least one output are required",
                    in.size(), out.size(), sizes_given ? 3 : 2));
  }
  const int x = sizes_given ? in[0] : in[1];
  const int a = sizes_given ? in[2] : in[0];
  const auto axis_v = int_constant(a, "axis");
  const Shape& xs = info(x).shape;
  const auto rank = static_cast<std::int64_t>(xs.size());
  if (axis_v.size() != 1 || axis_v[0] < -rank || axis_v[0] >= rank) {
    bad(fmt::format("axis '{}' must hold one value in [{}, {})", info(a).name, -rank, rank));
  }
  const std::int64_t axis = axis_v[0] < 0 ? axis_v[0] + rank : axis_v[0];
  const std::int64_t len = xs[static_cast<std::size_t>(axis)];
  const auto n = static_cast<std::int64_t>(out.size());
  std::vector<std::int64_t> sizes;
  if (sizes_given) {
    sizes = int_constant(in[1], "size_splits");
    const auto unknown = std::count(sizes.begin(), sizes.end(), std::int64_t{-1});
    std::int64_t known = 0;
    for (auto s : sizes) known += s == -1 ? 0 : s;
    if (unknown > 1 || static_cast<std::int64_t>(sizes.size()) != n) {
      bad(fmt::format("size_splits [{}] must have {} entries with at most one -1",
                      fmt::join(sizes, ", "), n));
    }
    for (auto& s : sizes) {
      if (s == -1) s = len - known;
    }
  } else {
    if (len % n != 0)
      bad(fmt::format("dim {} ({}) of input '{}' does not split into {} equal parts", axis, len,
                      info(x).name, n));
    sizes.assign(static_cast<std::size_t>(n), len / n);
  }
  std::int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0) bad(fmt::format("size_splits [{}] has a negative size", fmt::join(sizes, ", ")));
    total += s;
  }
  if (total != len)
    bad(fmt::format("the sizes [{}] do not add up to dim {} ({}) of input '{}'",
                    fmt::join(sizes, ", "), axis, len, info(x).name));
  dtype(x);
  std::vector<int> outs;
  for (std::size_t i = 0; i < out.size(); ++i) {
    Shape expected = xs;
    expected[static_cast<std::size_t>(axis)] = sizes[i];
    check_output_shape(out[i], expected);
    outs.push_back(output_model(out[i]));
  }
  add_node("Split", "", {model_view(x), shape_constant(info(out[0]).name + "/split", sizes)}, outs,
           {{"axis", axis}});
}

void Importer::depth_space(const fb::Operator& op, bool to_space) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  std::int64_t bs = 0;
  if (to_space) {
    if (const auto* o = op.builtin_options_as_DepthToSpaceOptions()) bs = o->block_size();
  } else if (const auto* o = op.builtin_options_as_SpaceToDepthOptions()) {
    bs = o->block_size();
  }
  const Shape& xs = info(x).shape;
  if (xs.size() != 4)
    bad(fmt::format("input '{}' {} must be 4-D (NHWC)", info(x).name, shape_to_string(xs)));
  if (bs < 1) bad(fmt::format("block_size {} must be >= 1", bs));
  const std::int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  Shape split6, moved6, expected;
  if (to_space) {
    if (C % (bs * bs) != 0)
      bad(fmt::format("depth {} is not a multiple of block_size^2 ({})", C, bs * bs));
    split6 = {N, H, W, bs, bs, C / (bs * bs)};
    moved6 = {N, H, bs, W, bs, C / (bs * bs)};
    expected = {N, H * bs, W * bs, C / (bs * bs)};
  } else {
    if (H % bs != 0 || W % bs != 0)
      bad(fmt::format("height {} and width {} must be multiples of block_size {}", H, W, bs));
    split6 = {N, H / bs, bs, W / bs, bs, C};
    moved6 = {N, H / bs, W / bs, bs, bs, C};
    expected = {N, H / bs, W / bs, bs * bs * C};
  }
  dtype(x);
  check_output_shape(y, expected);
  const std::string base = info(y).name;
  const int a = add_value(base + "/blocks", dtype(x), split6);
  add_node("Reshape", "", {model_view(x), shape_constant(base + "/blocks_shape", split6)}, {a}, {},
           "/blocks");
  const int b = add_value(base + "/moved", dtype(x), moved6);
  add_node("Transpose", "", {a}, {b}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2, 4, 5}}},
           "/move");
  add_node("Reshape", "", {b, shape_constant(base + "/shape", expected)}, {output_model(y)}, {});
}

}  // namespace furiosa::compiler::detail::tflite
