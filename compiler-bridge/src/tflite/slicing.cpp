// TFLite operators that copy a part of their input or mirror its edges (importer.h), on the
// model's own layout, the stored values moved without arithmetic (quantized tensors keep their
// values; TFLite's Slice and MirrorPad copy them too):
//  - SLICE with constant begin and size (size -1: to the end of the dim) -> Slice;
//  - MIRROR_PAD with constant paddings -> one Gather per padded axis, the indices mirrored here:
//    REFLECT repeats no edge element (x[p], ..., x[1], x[0], ..., x[d-1], x[d-2], ...), SYMMETRIC
//    repeats it (x[p-1], ..., x[0], x[0], ..., x[d-1], x[d-1], ...).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "importer.h"

namespace furiosa::compiler::detail::tflite {

void Importer::slice(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 3, 3, out);
  const int x = in[0], y = out[0];
  for (int t : {in[1], in[2]}) {
    if (!is_constant(t)) unsupported(fmt::format("'{}' must be constant", info(t).name));
  }
  const auto begin = int_constant(in[1], "begin"), size = int_constant(in[2], "size");
  const Shape& xs = info(x).shape;
  if (begin.size() != xs.size() || size.size() != xs.size()) {
    bad(fmt::format("begin [{}] and size [{}] must have one value per dim of input '{}' {}",
                    fmt::join(begin, ", "), fmt::join(size, ", "), info(x).name,
                    shape_to_string(xs)));
  }
  std::vector<std::int64_t> starts, ends, axes;
  Shape expected;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::int64_t b = begin[i], dim = xs[i];
    const std::int64_t len = size[i] == -1 ? dim - b : size[i];
    // TFLite's slice.cc: 0 <= begin <= dim and begin + size <= dim (size -1: to the end).
    if (b < 0 || b > dim || len < 0 || len > dim - b) {
      bad(fmt::format("begin {} and size {} of dim {} are outside input '{}' {}", b, size[i], i,
                      info(x).name, shape_to_string(xs)));
    }
    if (len == 0) bad(fmt::format("dim {} is sliced to no elements, which is not supported", i));
    expected.push_back(len);
    if (b == 0 && len == dim) continue;  // the whole dim
    starts.push_back(b);
    ends.push_back(b + len);
    axes.push_back(static_cast<std::int64_t>(i));
  }
  dtype(x);
  if (dtype(y) != dtype(x)) bad("input and output types differ");
  check_output_shape(y, expected);
  const std::string base = info(y).name;
  if (axes.empty()) {
    add_node("Identity", "", {model_view(x)}, {output_model(y)}, {});
    return;
  }
  auto vec = [&](const char* what, const std::vector<std::int64_t>& vals) {
    Tensor t(DType::Int64, {static_cast<std::int64_t>(vals.size())});
    std::copy(vals.begin(), vals.end(), t.as<std::int64_t>().begin());
    return add_constant(fmt::format("{}/{}", base, what), std::move(t));
  };
  add_node("Slice", "",
           {model_view(x), vec("starts", starts), vec("ends", ends), vec("axes", axes)},
           {output_model(y)}, {});
}

void Importer::mirror_pad(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], p = in[1], y = out[0];
  require_constant(p, "paddings");
  const auto* o = op.builtin_options_as_MirrorPadOptions();
  const bool symmetric = o && o->mode() == fb::MirrorPadMode::SYMMETRIC;
  if (o && o->mode() != fb::MirrorPadMode::REFLECT && !symmetric) {
    unsupported(fmt::format("mode {} is not supported (REFLECT 0 or SYMMETRIC 1)",
                            static_cast<int>(o->mode())));
  }
  const DType d = dtype(x);
  if (dtype(y) != d) bad("input and output types differ");
  const Shape& xs = info(x).shape;
  const std::size_t rank = xs.size();
  const auto pv = int_constant(p, "paddings");
  if (info(p).shape != Shape{static_cast<std::int64_t>(rank), 2}) {
    bad(fmt::format("paddings '{}' {} must be [{}, 2]", info(p).name,
                    shape_to_string(info(p).shape), rank));
  }
  Shape expected = xs;
  for (std::size_t i = 0; i < rank; ++i) {
    // TFLite's mirror_pad.cc: each pad at most dim - 1 (REFLECT) or dim (SYMMETRIC).
    const std::int64_t most = symmetric ? xs[i] : xs[i] - 1;
    for (std::size_t j = 0; j < 2; ++j) {
      if (pv[2 * i + j] < 0 || pv[2 * i + j] > most) {
        bad(fmt::format("padding {} of dim {} must be in [0, {}] for {} of input '{}' {}",
                        pv[2 * i + j], i, most, symmetric ? "SYMMETRIC" : "REFLECT", info(x).name,
                        shape_to_string(xs)));
      }
    }
    expected[i] += pv[2 * i] + pv[2 * i + 1];
  }
  check_output_shape(y, expected);
  const std::string base = info(y).name;
  int cur = model_view(x);
  Shape shape = xs;
  std::vector<std::size_t> axes;  // the padded axes
  for (std::size_t i = 0; i < rank; ++i) {
    if (pv[2 * i] > 0 || pv[2 * i + 1] > 0) axes.push_back(i);
  }
  if (axes.empty()) {
    add_node("Identity", "", {cur}, {output_model(y)}, {});
    return;
  }
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const std::size_t a = axes[k];
    const std::int64_t dim = xs[a], before = pv[2 * a];
    Tensor idx(DType::Int64, {expected[a]});
    auto iv = idx.as<std::int64_t>();
    for (std::int64_t j = 0; j < expected[a]; ++j) {
      std::int64_t s = j - before;  // the position in x, mirrored back inside [0, dim)
      if (s < 0) s = symmetric ? -s - 1 : -s;
      if (s >= dim) s = symmetric ? 2 * dim - 1 - s : 2 * dim - 2 - s;
      iv[static_cast<std::size_t>(j)] = s;
    }
    shape[a] = expected[a];
    const bool last = k + 1 == axes.size();
    const int v =
        last ? output_model(y) : add_value(fmt::format("{}/mirrored{}", base, a), d, shape);
    add_node("Gather", "",
             {cur, add_constant(fmt::format("{}/mirror{}_indices", base, a), std::move(idx))}, {v},
             {{"axis", static_cast<std::int64_t>(a)}}, fmt::format("/mirror{}", a));
    cur = v;
  }
}

}  // namespace furiosa::compiler::detail::tflite
