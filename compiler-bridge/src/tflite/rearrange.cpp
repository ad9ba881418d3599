// TFLite operators that rearrange elements without arithmetic (importer.h): GATHER_ND with
// constant indices, SPLIT, SPLIT_V, DEPTH_TO_SPACE and SPACE_TO_DEPTH, all on the model's own
// (NHWC) layout:
//  - GATHER_ND: x viewed as [prod(x.shape[:k]), x.shape[k:]...] (Reshape) and Gather on axis 0
//    with the flat indices computed here (so only constant indices are taken);
//  - SPLIT / SPLIT_V: Split with the sizes (SPLIT_V's one -1 resolved here);
//  - DEPTH_TO_SPACE: Reshape [N, H, W, bs, bs, C'], Transpose [0, 1, 3, 2, 4, 5], Reshape
//    [N, H bs, W bs, C'] (TFLite's depth order: (row offset * bs + column offset) * C' + c);
//  - SPACE_TO_DEPTH: the inverse, Reshape [N, H / bs, bs, W / bs, bs, C], the same Transpose,
//    Reshape [N, H / bs, W / bs, bs bs C];
//  - SPACE_TO_BATCH_ND (4-D, constant block_shape [bh, bw] and paddings): Concat with blocks of
//    the zero point (TFLite pads with the output's zero point), Reshape [N, H' / bh, bh, W' / bw,
//    bw, C], Transpose [2, 4, 0, 1, 3, 5], Reshape [bh bw N, H' / bh, W' / bw, C] (output batch
//    (row offset * bw + column offset) * N + n, as TFLite's);
//  - BATCH_TO_SPACE_ND: the inverse, Reshape [bh, bw, N, H, W, C], Transpose [2, 3, 0, 4, 1, 5],
//    Reshape [N, H bh, W bw, C], then Slice for the constant crops.
// Reshape, Transpose and Split of 8-bit tensors run on the NPU; Gather on the host.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

void Importer::gather_nd(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], idx = in[1], y = out[0];
  if (!is_constant(idx)) unsupported(fmt::format("indices '{}' must be constant", info(idx).name));
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

void Importer::space_batch(const fb::Operator& op, bool to_batch) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 3, 3, out);
  const int x = in[0], y = out[0];
  const char* pads_name = to_batch ? "paddings" : "crops";
  for (int t : {in[1], in[2]}) {
    if (!is_constant(t)) unsupported(fmt::format("'{}' must be constant", info(t).name));
  }
  const auto block = int_constant(in[1], "block_shape");
  const auto pads = int_constant(in[2], pads_name);
  const Shape& xs = info(x).shape;
  if (xs.size() != 4)
    unsupported(fmt::format("input '{}' {} must be 4-D (NHWC)", info(x).name, shape_to_string(xs)));
  if (block.size() != 2 || pads.size() != 4) {
    bad(fmt::format("block_shape '{}' must hold 2 values and {} '{}' 2 x 2", info(in[1]).name,
                    pads_name, info(in[2]).name));
  }
  const DType d = dtype(x);
  if (dtype(y) != d) bad("input and output types differ");
  if (is_quantized(d)) {
    const Quant xq = quant(x), yq = quant(y);
    if (xq.scale != yq.scale || xq.zero_point != yq.zero_point)
      bad("input and output must share their quantization parameters");
  }
  const std::int64_t bh = block[0], bw = block[1];
  if (bh < 1 || bw < 1) bad(fmt::format("block_shape [{}, {}] must be positive", bh, bw));
  for (auto p : pads) {
    if (p < 0) bad(fmt::format("{} must not be negative", pads_name));
  }
  const std::string base = info(y).name;
  if (to_batch) {
    const std::int64_t N = xs[0], C = xs[3];
    const std::int64_t Hp = xs[1] + pads[0] + pads[1], Wp = xs[2] + pads[2] + pads[3];
    if (Hp % bh != 0 || Wp % bw != 0)
      bad(fmt::format("the padded height {} and width {} must be multiples of block_shape [{}, {}]",
                      Hp, Wp, bh, bw));
    check_output_shape(y, {bh * bw * N, Hp / bh, Wp / bw, C});
    // Padding with the zero point (TFLite's SpaceToBatchND pads with the output's zero point).
    std::int32_t fill = is_quantized(d) ? quant(y).zero_point : 0;
    int cur = model_view(x);
    Shape shape = xs;
    for (std::size_t a = 1; a <= 2; ++a) {
      const std::int64_t before = pads[2 * (a - 1)], after = pads[2 * (a - 1) + 1];
      if (before == 0 && after == 0) continue;
      auto fill_block = [&](std::int64_t amount, const char* side) {
        Shape bs = shape;
        bs[a] = amount;
        Tensor t(d, bs);
        if (d == DType::UInt8)
          std::fill(t.as<std::uint8_t>().begin(), t.as<std::uint8_t>().end(),
                    static_cast<std::uint8_t>(fill));
        if (d == DType::Int8)
          std::fill(t.as<std::int8_t>().begin(), t.as<std::int8_t>().end(),
                    static_cast<std::int8_t>(fill));
        return add_constant(fmt::format("{}/pad{}_{}", base, a, side), std::move(t));
      };
      std::vector<int> parts;
      if (before > 0) parts.push_back(fill_block(before, "before"));
      parts.push_back(cur);
      if (after > 0) parts.push_back(fill_block(after, "after"));
      shape[a] += before + after;
      const int v = add_value(fmt::format("{}/padded{}", base, a), d, shape);
      add_node("Concat", "", parts, {v}, {{"axis", static_cast<std::int64_t>(a)}},
               fmt::format("/pad{}", a));
      cur = v;
    }
    const Shape split6 = {N, Hp / bh, bh, Wp / bw, bw, C},
                moved6 = {bh, bw, N, Hp / bh, Wp / bw, C};
    const int s6 = add_value(base + "/blocks", d, split6);
    add_node("Reshape", "", {cur, shape_constant(base + "/blocks_shape", split6)}, {s6}, {},
             "/blocks");
    const int m6 = add_value(base + "/moved", d, moved6);
    add_node("Transpose", "", {s6}, {m6}, {{"perm", std::vector<std::int64_t>{2, 4, 0, 1, 3, 5}}},
             "/move");
    add_node("Reshape", "",
             {m6, shape_constant(base + "/shape", Shape{bh * bw * N, Hp / bh, Wp / bw, C})},
             {output_model(y)}, {});
    return;
  }
  if (xs[0] % (bh * bw) != 0)
    bad(fmt::format("batch {} is not a multiple of block_shape [{}, {}]", xs[0], bh, bw));
  const std::int64_t N = xs[0] / (bh * bw), H = xs[1], W = xs[2], C = xs[3];
  const std::int64_t Hf = H * bh, Wf = W * bw;
  if (pads[0] + pads[1] >= Hf || pads[2] + pads[3] >= Wf)
    bad(fmt::format("crops [{}, {}, {}, {}] leave no elements of [{}, {}]", pads[0], pads[1],
                    pads[2], pads[3], Hf, Wf));
  const Shape expected = {N, Hf - pads[0] - pads[1], Wf - pads[2] - pads[3], C};
  check_output_shape(y, expected);
  const Shape split6 = {bh, bw, N, H, W, C}, moved6 = {N, H, bh, W, bw, C}, full = {N, Hf, Wf, C};
  const int s6 = add_value(base + "/blocks", d, split6);
  add_node("Reshape", "", {model_view(x), shape_constant(base + "/blocks_shape", split6)}, {s6}, {},
           "/blocks");
  const int m6 = add_value(base + "/moved", d, moved6);
  add_node("Transpose", "", {s6}, {m6}, {{"perm", std::vector<std::int64_t>{2, 3, 0, 4, 1, 5}}},
           "/move");
  const bool crop = pads[0] + pads[1] + pads[2] + pads[3] > 0;
  const int f = crop ? add_value(base + "/full", d, full) : output_model(y);
  add_node("Reshape", "", {m6, shape_constant(base + "/full_shape", full)}, {f}, {}, "/full");
  if (!crop) return;
  auto vec = [&](const char* what, std::vector<std::int64_t> vals) {
    Tensor t(DType::Int64, {static_cast<std::int64_t>(vals.size())});
    std::copy(vals.begin(), vals.end(), t.as<std::int64_t>().begin());
    return add_constant(fmt::format("{}/{}", base, what), std::move(t));
  };
  add_node("Slice", "",
           {f, vec("starts", {pads[0], pads[2]}), vec("ends", {Hf - pads[1], Wf - pads[3]}),
            vec("axes", {1, 2})},
           {output_model(y)}, {}, "/crop");
}

}  // namespace furiosa::compiler::detail::tflite
