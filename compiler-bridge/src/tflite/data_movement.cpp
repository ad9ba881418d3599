// TFLite's reshapes, concatenation and data-movement operators (importer.h):
//  - RESHAPE to the output tensor's shape; PAD / PADV2 as a Concat with blocks of the zero point
//    (PADV2: of its constant value, stored as is, as TFLite's Pad does);
//  - CONCATENATION of uint8 inputs with other parameters than the output's: the float rescaling
//    of reference_ops::ConcatenationWithScaling (round(q * s + b) with s = in_scale / out_scale,
//    b = -in_zero_point * s, rounded half away from zero), as a 256-entry table;
//  - SHAPE, STRIDED_SLICE, PACK, TILE, GATHER, FILL, RANGE: ONNX Shape (a constant here: TFLite
//    shapes are static), Slice (+ Reshape for shrink_axis_mask), Reshape + Concat, Tile, Gather,
//    Expand, Range; on constant inputs the compiler's fold_constants pass evaluates them once
//    (passes/fold_constants.cpp), on data they run as those operators.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

void Importer::reshape(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 2, out);
  const int x = in[0], y = out[0];
  const Shape target = info(y).shape;
  if (element_count(target) != element_count(info(x).shape)) {
    bad(fmt::format("cannot reshape {} to {}", shape_to_string(info(x).shape), shape_to_string(target)));
  }
  // The output tensor's shape is authoritative; a new_shape option must agree with it (one -1
  // standing for the remaining dim).
  if (const auto* o = op.builtin_options_as_ReshapeOptions(); o && o->new_shape() && o->new_shape()->size() > 0) {
    Shape wanted(o->new_shape()->begin(), o->new_shape()->end());
    bool agrees = wanted.size() == target.size();
    for (std::size_t i = 0; agrees && i < wanted.size(); ++i) agrees = wanted[i] == -1 || wanted[i] == target[i];
    if (!agrees) {
      bad(fmt::format("new_shape {} disagrees with the output shape {}", shape_to_string(wanted), shape_to_string(target)));
    }
  }
  dtype(x);
  add_node("Reshape", "", {ordered_view(x), shape_constant(info(y).name + "/shape", target)}, {output_model(y)}, {});
}

void Importer::concatenation(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  if (in.empty() || out.size() != 1) bad("needs at least one input and one output");
  const int y = out[0];
  const auto* o = op.builtin_options_as_ConcatenationOptions();
  if (!o) bad("has no ConcatenationOptions");
  const DType d = dtype(y);
  const std::size_t rank = info(y).shape.size();
  std::int64_t axis = o->axis();
  if (axis < 0) axis += static_cast<std::int64_t>(rank);
  if (axis < 0 || axis >= static_cast<std::int64_t>(rank)) bad(fmt::format("axis {} is out of range for rank {}", o->axis(), rank));
  for (int t : in) {
    if (t < 0) bad("an input is missing");
    if (dtype(t) != d) bad(fmt::format("input '{}' is {}, the output {}", info(t).name, dtype_name(dtype(t)), dtype_name(d)));
    if (info(t).shape.size() != rank) bad(fmt::format("input '{}' has rank {}, the output {}", info(t).name, info(t).shape.size(), rank));
  }
  const bool nchw = rank == 4;
  std::vector<int> parts;
  if (!is_quantized(d)) {
    if (d == DType::Float32 && o->fused_activation_function() != fb::ActivationFunctionType::NONE) {
      unsupported("a fused activation on float32 inputs is not supported");
    }
    for (int t : in) parts.push_back(nchw ? nchw_view(t) : model_view(t));
    add_node("Concat", "", parts, {nchw ? output_nchw(y) : output_model(y)}, {{"axis", nchw ? nchw_axis(axis) : axis}});
    return;
  }
  const Quant yq = quant(y);
  for (int t : in) {
    int v = nchw ? nchw_view(t) : model_view(t);
    const Quant tq = quant(t);
    if (tq.scale != yq.scale || tq.zero_point != yq.zero_point) {
      if (d == DType::Int8) {
        bad(fmt::format("int8 input '{}' has other quantization parameters than the output; TFLite requires "
                        "them equal for int8 concatenation", info(t).name));
      }
      // reference_ops::ConcatenationWithScaling, element for element (uint8).
      const float inverse_output_scale = 1.0f / yq.scale;
      const float scale = tq.scale * inverse_output_scale;
      const float bias = -static_cast<float>(tq.zero_point) * scale;
      const host::LookupTable table = host::build_lookup_table(d, d, [&](std::int32_t q) {
        const float r = static_cast<float>(q) * scale + bias;
        return round_to_int(r) + yq.zero_point;
      });
      const Shape& vs = g_.values[static_cast<std::size_t>(v)].shape;
      const int r = add_value(info(t).name + "/rescaled", d, vs);
      add_node("Requantize", "furiosa", {v}, {r}, requantize_attrs(tq, yq, d, table), "/rescale");
      v = r;
    }
    parts.push_back(v);
  }
  const int c = add_value(info(y).name + "/concat", d, nchw ? nchw_shape(y) : info(y).shape);
  add_node("Concat", "", parts, {c}, {{"axis", nchw ? nchw_axis(axis) : axis}});
  bind_clamped(c, y, nchw, activation_range(o->fused_activation_function(), y));
}

void Importer::pad(const fb::Operator& op, bool v2) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, v2 ? 3 : 2, out);
  const int x = in[0], p = in[1], y = out[0];
  require_constant(p, "paddings");
  const DType d = dtype(x);
  if (dtype(y) != d) bad("input and output types differ");
  const Shape& xs = info(x).shape;
  const std::size_t rank = xs.size();
  const Tensor pt = constant_tensor(p);
  if (pt.shape() != Shape{static_cast<std::int64_t>(rank), 2} || (pt.dtype() != DType::Int32 && pt.dtype() != DType::Int64)) {
    bad(fmt::format("paddings must be int32/int64 [{}, 2], are {} {}", rank, dtype_name(pt.dtype()), shape_to_string(pt.shape())));
  }
  std::vector<std::array<std::int64_t, 2>> pads(rank);
  Shape expected = xs;
  for (std::size_t i = 0; i < rank; ++i) {
    for (std::size_t j = 0; j < 2; ++j) {
      pads[i][j] = pt.dtype() == DType::Int32 ? pt.as<std::int32_t>()[2 * i + j] : pt.as<std::int64_t>()[2 * i + j];
      if (pads[i][j] < 0) bad("negative paddings are not supported");
    }
    expected[i] += pads[i][0] + pads[i][1];
  }
  check_output_shape(y, expected);
  // The padding value: the output zero point for quantized tensors (TFLite PAD), else 0; PADV2's
  // constant_values when given (quantized: its stored value, with the output's parameters).
  std::int32_t fill = 0;
  float fill_f = 0.0f;
  if (is_quantized(d)) {
    const Quant xq = quant(x), yq = quant(y);
    if (xq.scale != yq.scale || xq.zero_point != yq.zero_point) {
      bad("input and output must share their quantization parameters");
    }
    fill = yq.zero_point;
  } else if (d != DType::Float32) {
    unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(d)));
  }
  if (in.size() == 3 && in[2] >= 0) {
    const int c = in[2];
    require_constant(c, "constant_values");
    const Tensor ct = constant_tensor(c);
    if (ct.dtype() != d || element_count(ct.shape()) != 1) {
      bad(fmt::format("constant_values '{}' must be one {} value, is {} {}", info(c).name,
                      dtype_name(d), dtype_name(ct.dtype()), shape_to_string(ct.shape())));
    }
    if (is_quantized(d)) {
      const Quant cq = quant(c), yq = quant(y);
      if (cq.scale != yq.scale || cq.zero_point != yq.zero_point) {
        bad(fmt::format("constant_values '{}' must share the output's quantization parameters",
                        info(c).name));
      }
      fill = d == DType::UInt8 ? std::int32_t{ct.as<std::uint8_t>()[0]}
                               : std::int32_t{ct.as<std::int8_t>()[0]};
    } else {
      fill_f = ct.as<float>()[0];
    }
  }
  const bool nchw = rank == 4;
  int cur = nchw ? nchw_view(x) : model_view(x);
  Shape shape = nchw ? nchw_shape(x) : xs;
  std::vector<std::size_t> axes;  // model axes with padding
  for (std::size_t i = 0; i < rank; ++i) {
    if (pads[i][0] > 0 || pads[i][1] > 0) axes.push_back(i);
  }
  const std::string base = info(y).name;
  if (axes.empty()) {
    add_node("Identity", "", {cur}, {nchw ? output_nchw(y) : output_model(y)}, {});
    return;
  }
  // One Concat per padded axis: [fill block, x, fill block] (LowLevelConcat on the NPU).
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const std::size_t ma = axes[k];
    const auto ax = static_cast<std::size_t>(nchw ? nchw_axis(static_cast<std::int64_t>(ma)) : static_cast<std::int64_t>(ma));
    auto block = [&](std::int64_t amount, const char* side) {
      Shape bs = shape;
      bs[ax] = amount;
      Tensor t(d, bs);
      if (d == DType::UInt8) std::fill(t.as<std::uint8_t>().begin(), t.as<std::uint8_t>().end(), static_cast<std::uint8_t>(fill));
      if (d == DType::Int8) std::fill(t.as<std::int8_t>().begin(), t.as<std::int8_t>().end(), static_cast<std::int8_t>(fill));
      if (d == DType::Float32) std::fill(t.as<float>().begin(), t.as<float>().end(), fill_f);
      return add_constant(fmt::format("{}/pad{}_{}", base, ma, side), std::move(t));
    };
    std::vector<int> ordered;  // [fill block, x, fill block]
    if (pads[ma][0] > 0) ordered.push_back(block(pads[ma][0], "before"));
    ordered.push_back(cur);
    if (pads[ma][1] > 0) ordered.push_back(block(pads[ma][1], "after"));
    shape[ax] += pads[ma][0] + pads[ma][1];
    const bool last = k + 1 == axes.size();
    const int v = last ? (nchw ? output_nchw(y) : output_model(y)) : add_value(fmt::format("{}/padded{}", base, ma), d, shape);
    add_node("Concat", "", ordered, {v}, {{"axis", static_cast<std::int64_t>(ax)}}, fmt::format("/pad{}", ma));
    cur = v;
  }
}

void Importer::shape_op(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  const DType yd = dtype(y);
  if (yd != DType::Int32 && yd != DType::Int64) bad(fmt::format("output '{}' is {}; SHAPE gives int32 or int64", info(y).name, dtype_name(yd)));
  const Shape& xs = info(x).shape;
  check_output_shape(y, {static_cast<std::int64_t>(xs.size())});
  Tensor t(yd, {static_cast<std::int64_t>(xs.size())});
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (yd == DType::Int32) t.as<std::int32_t>()[i] = static_cast<std::int32_t>(xs[i]);
    else t.as<std::int64_t>()[i] = xs[i];
  }
  info(y).model = add_constant(info(y).name, std::move(t));
}

// STRIDED_SLICE with constant begin/end/strides -> Slice (+ Reshape dropping shrunk axes), with
// TFLite's mask semantics (strided_slice_logic.h): a begin_mask bit starts at the first element
// of the stride's direction, an end_mask bit runs to the last, a shrink_axis_mask bit takes the
// one element at begin and removes the dim; negative begin/end count from the end and are
// clamped. ellipsis_mask, new_axis_mask and offset are refused.
void Importer::strided_slice(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 4, 4, out);
  const int x = in[0], y = out[0];
  const auto* o = op.builtin_options_as_StridedSliceOptions();
  const std::int32_t begin_mask = o ? o->begin_mask() : 0, end_mask = o ? o->end_mask() : 0;
  const std::int32_t shrink_mask = o ? o->shrink_axis_mask() : 0;
  if (o && (o->ellipsis_mask() != 0 || o->new_axis_mask() != 0)) {
    unsupported(fmt::format("ellipsis_mask {} and new_axis_mask {} are not supported (both must be 0)",
                            o->ellipsis_mask(), o->new_axis_mask()));
  }
  if (o && o->offset()) unsupported("offset = true is not supported");
  const auto begin = int_constant(in[1], "begin"), end = int_constant(in[2], "end"), strides = int_constant(in[3], "strides");
  const Shape& xs = info(x).shape;
  if (begin.size() != end.size() || begin.size() != strides.size() || begin.size() > xs.size()) {
    bad(fmt::format("begin, end and strides have {}, {} and {} values for input '{}' {}", begin.size(), end.size(),
                    strides.size(), info(x).name, shape_to_string(xs)));
  }
  std::vector<std::int64_t> starts, ends, axes, steps;
  Shape full, expected;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::int64_t dim = xs[i];
    if (i >= begin.size()) {
      full.push_back(dim);
      expected.push_back(dim);
      continue;
    }
    const bool shrink = (shrink_mask >> i) & 1;
    std::int64_t step = strides[i];
    if (step == 0) bad(fmt::format("strides[{}] is 0", i));
    auto clamp = [&](std::int64_t v) {
      if (v < 0) v += dim;
      return step > 0 ? std::clamp<std::int64_t>(v, 0, dim) : std::clamp<std::int64_t>(v, -1, dim - 1);
    };
    std::int64_t start = ((begin_mask >> i) & 1) ? (step > 0 ? 0 : dim - 1) : clamp(begin[i]);
    std::int64_t stop = 0;
    if (shrink) {
      if (((begin_mask >> i) & 1) == 0 && (begin[i] < -dim || begin[i] >= dim)) {
        bad(fmt::format("begin[{}] = {} is out of range for shrinking dim {} of size {}", i, begin[i], i, dim));
      }
      step = 1;
      start = std::clamp<std::int64_t>(start, 0, dim - 1);
      stop = start + 1;
    } else {
      stop = ((end_mask >> i) & 1) ? (step > 0 ? dim : -1) : clamp(end[i]);
    }
    const std::int64_t len = step > 0 ? std::max<std::int64_t>(0, (stop - start + step - 1) / step)
                                      : std::max<std::int64_t>(0, (start - stop - step - 1) / -step);
    if (len == 0) bad(fmt::format("dim {} is sliced to no elements, which is not supported", i));
    full.push_back(len);
    if (!shrink) expected.push_back(len);
    if (len == dim && step == 1) continue;  // the whole dim
    starts.push_back(start);
    ends.push_back(step < 0 && stop < 0 ? -dim - 1 : stop);  // ONNX: -dim - 1 is "before 0"
    axes.push_back(static_cast<std::int64_t>(i));
    steps.push_back(step);
  }
  check_output_shape(y, expected);
  dtype(x);
  const std::string base = info(y).name;
  int v = model_view(x);
  if (!axes.empty()) {
    auto vec = [&](const char* what, const std::vector<std::int64_t>& vals) {
      Tensor t(DType::Int64, {static_cast<std::int64_t>(vals.size())});
      std::copy(vals.begin(), vals.end(), t.as<std::int64_t>().begin());
      return add_constant(fmt::format("{}/{}", base, what), std::move(t));
    };
    const bool last = full == expected;
    const int s = last ? output_model(y) : add_value(base + "/slice", dtype(x), full);
    add_node("Slice", "", {v, vec("starts", starts), vec("ends", ends), vec("axes", axes), vec("steps", steps)}, {s}, {});
    if (last) return;
    v = s;
  }
  add_node("Reshape", "", {v, shape_constant(base + "/shape", expected)}, {output_model(y)}, {}, "/shrink");
}

void Importer::pack(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  if (in.empty() || out.size() != 1) bad(fmt::format("has {} inputs and {} outputs; expected >= 1 and 1", in.size(), out.size()));
  const int y = out[0];
  const auto* o = op.builtin_options_as_PackOptions();
  const Shape& s = info(in[0]).shape;
  const auto rank = static_cast<std::int64_t>(s.size());
  std::int64_t axis = o ? o->axis() : 0;
  if (axis < 0) axis += rank + 1;
  if (axis < 0 || axis > rank) bad(fmt::format("axis {} is out of range for inputs of rank {}", o ? o->axis() : 0, rank));
  if (o && o->values_count() != static_cast<std::int32_t>(in.size())) {
    bad(fmt::format("values_count {} disagrees with its {} inputs", o->values_count(), in.size()));
  }
  const DType d = dtype(in[0]);
  for (int t : in) {
    if (t < 0) bad("an input is missing");
    if (info(t).shape != s || dtype(t) != d) {
      bad(fmt::format("input '{}' is {} {}, the first input {} {}", info(t).name, dtype_name(dtype(t)),
                      shape_to_string(info(t).shape), dtype_name(d), shape_to_string(s)));
    }
  }
  Shape one = s;
  one.insert(one.begin() + axis, 1);
  Shape expected = s;
  expected.insert(expected.begin() + axis, static_cast<std::int64_t>(in.size()));
  check_output_shape(y, expected);
  const std::string base = info(y).name;
  if (in.size() == 1) {
    add_node("Reshape", "", {model_view(in[0]), shape_constant(base + "/shape", expected)}, {output_model(y)}, {});
    return;
  }
  std::vector<int> parts;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const int v = add_value(fmt::format("{}/part{}", base, k), d, one);
    add_node("Reshape", "", {model_view(in[k]), shape_constant(fmt::format("{}/part{}_shape", base, k), one)}, {v}, {},
             fmt::format("/part{}", k));
    parts.push_back(v);
  }
  add_node("Concat", "", parts, {output_model(y)}, {{"axis", axis}});
}

void Importer::tile(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], m = in[1], y = out[0];
  dtype(x);
  if (is_constant(m)) {
    const auto mult = int_constant(m, "multiples");
    const Shape& xs = info(x).shape;
    if (mult.size() != xs.size()) bad(fmt::format("multiples '{}' has {} values for input {}", info(m).name, mult.size(), shape_to_string(xs)));
    Shape expected = xs;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (mult[i] < 0) bad(fmt::format("multiples[{}] = {} is negative", i, mult[i]));
      expected[i] *= mult[i];
    }
    check_output_shape(y, expected);
  }
  add_node("Tile", "", {model_view(x), int64_view(m, "multiples")}, {output_model(y)}, {});
}

void Importer::gather(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], idx = in[1], y = out[0];
  const auto* o = op.builtin_options_as_GatherOptions();
  if (o && o->batch_dims() != 0) unsupported(fmt::format("batch_dims {} is not supported (0 only)", o->batch_dims()));
  const Shape& xs = info(x).shape;
  const auto rank = static_cast<std::int64_t>(xs.size());
  std::int64_t axis = o ? o->axis() : 0;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) bad(fmt::format("axis {} is out of range for input '{}' {}", o ? o->axis() : 0, info(x).name, shape_to_string(xs)));
  const DType id = dtype(idx);
  if (id != DType::Int32 && id != DType::Int64) bad(fmt::format("indices '{}' must be int32 or int64, is {}", info(idx).name, dtype_name(id)));
  dtype(x);
  Shape expected(xs.begin(), xs.begin() + axis);
  expected.insert(expected.end(), info(idx).shape.begin(), info(idx).shape.end());
  expected.insert(expected.end(), xs.begin() + axis + 1, xs.end());
  check_output_shape(y, expected);
  add_node("Gather", "", {model_view(x), model_view(idx)}, {output_model(y)}, {{"axis", axis}});
}

// TRANSPOSE: output dim i is input dim perm[i] (ONNX Transpose's perm), on the model's layout.
void Importer::transpose(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], p = in[1], y = out[0];
  require_constant(p, "permutation");
  const auto perm = int_constant(p, "permutation");
  const Shape& xs = info(x).shape;
  const auto rank = static_cast<std::int64_t>(xs.size());
  std::vector<bool> seen(xs.size(), false);
  Shape expected;
  for (std::int64_t d : perm) {
    if (d < 0 || d >= rank || seen[static_cast<std::size_t>(d)] || perm.size() != xs.size()) {
      bad(fmt::format("permutation [{}] is not a permutation of the {} dims of input '{}'",
                      fmt::join(perm, ", "), rank, info(x).name));
    }
    seen[static_cast<std::size_t>(d)] = true;
    expected.push_back(xs[static_cast<std::size_t>(d)]);
  }
  dtype(x);
  check_output_shape(y, expected);
  add_node("Transpose", "", {model_view(x)}, {output_model(y)}, {{"perm", perm}});
}

void Importer::fill(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int dims = in[0], value = in[1], y = out[0];
  if (element_count(info(value).shape) != 1) bad(fmt::format("value '{}' must hold one element", info(value).name));
  if (dtype(value) != dtype(y)) bad(fmt::format("value '{}' is {}, output '{}' {}", info(value).name, dtype_name(dtype(value)), info(y).name, dtype_name(dtype(y))));
  int v = model_view(value);
  if (!info(value).shape.empty()) {
    const int scalar = add_value(info(value).name + "/scalar", dtype(value), {});
    add_node("Reshape", "", {v, shape_constant(info(value).name + "/scalar_shape", {})}, {scalar}, {}, "/scalar");
    v = scalar;
  }
  add_node("Expand", "", {v, int64_view(dims, "dims")}, {output_model(y)}, {});
}

void Importer::range(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 3, 3, out);
  std::vector<int> scalars;
  for (int t : in) {
    if (element_count(info(t).shape) != 1 || dtype(t) != dtype(out[0])) {
      bad(fmt::format("input '{}' must be one {} value, is {} {}", info(t).name, dtype_name(dtype(out[0])),
                      dtype_name(dtype(t)), shape_to_string(info(t).shape)));
    }
    int v = model_view(t);
    if (!info(t).shape.empty()) {
      const int s = add_value(info(t).name + "/scalar", dtype(t), {});
      add_node("Reshape", "", {v, shape_constant(info(t).name + "/scalar_shape", {})}, {s}, {}, "/scalar");
      v = s;
    }
    scalars.push_back(v);
  }
  add_node("Range", "", scalars, {output_model(out[0])}, {});
}

}  // namespace furiosa::compiler::detail::tflite
