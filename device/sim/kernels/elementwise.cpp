// The element-wise kernels: LowLevelAdd, LowLevelMul and LowLevelSub (two 8-bit operands with
// numpy-style broadcasting) and LowLevelRequantize (one operand, through a 256-entry table).
#include "kernel_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fork_join.h"
#include "furiosa/host/lookup_table.h"

namespace furiosa::device::sim::detail {

namespace {

// Element strides of `ref` in its layout; broadcast dims (1 where `out` is larger) get 0.
std::vector<std::int64_t> broadcast_strides(const TensorRef& ref, const Shape& out) {
  std::vector<std::int64_t> strides = layout_strides(ref);
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (ref.shape[d] != out[d]) strides[d] = 0;  // a broadcast dim of size 1
  }
  return strides;
}

// One element of the fixed-point LowLevelAdd (isa::FixedPointAdd; TFLite AddElementwise).
inline std::int32_t fixed_point_add(std::int32_t a, std::int32_t b, const isa::AddParams& p,
                                    const isa::FixedPointAdd& f) {
  const std::int32_t sa = isa::multiply_by_quantized_multiplier(
      (a - p.a.zero_point) * (std::int32_t{1} << f.left_shift), f.a_mult);
  const std::int32_t sb = isa::multiply_by_quantized_multiplier(
      (b - p.b.zero_point) * (std::int32_t{1} << f.left_shift), f.b_mult);
  const std::int32_t v = isa::multiply_by_quantized_multiplier(sa + sb, f.y_mult) + p.y.zero_point;
  return std::clamp(v, f.out_min, f.out_max);
}

// The located, validated operands of a two-input element-wise kernel (LowLevelAdd / Mul / Sub):
// 8-bit a, b and y, a and b broadcasting numpy-style to y's shape (equal ranks), usable
// quantization parameters; strides are layout strides over y's shape (0 along broadcast dims).
struct BinaryOperands {
  const std::byte* a = nullptr;
  const std::byte* b = nullptr;
  std::byte* y = nullptr;
  Shape dims;  ///< y's shape ({1} for a scalar)
  std::vector<std::int64_t> sa, sb, sy;
  bool a_signed = false, b_signed = false;
  std::int32_t qmin = 0, qmax = 255;
  std::int64_t y_pad = 0;  ///< row padding elements after each innermost run of a lowered y
  bool empty = false;      ///< y has no elements
};

BinaryOperands binary_operands(const isa::Kernel& kernel, std::span<std::byte> region,
                               const isa::QuantParam& a, const isa::QuantParam& b,
                               const isa::QuantParam& y) {
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& bref = kernel.inputs[1];
  const TensorRef& yref = kernel.outputs[0];
  BinaryOperands o;
  o.a = at(region, aref);
  o.b = at(region, bref);
  o.y = at(region, yref);
  require_8bit(aref, "input 0");
  require_8bit(bref, "input 1");
  require_8bit(yref, "output 0");
  const Shape& out = yref.shape;
  for (const auto& [ref, role] : {std::pair{&aref, "input 0"}, std::pair{&bref, "input 1"}}) {
    bool ok = ref->shape.size() == out.size();
    for (std::size_t d = 0; ok && d < out.size(); ++d) {
      ok = ref->shape[d] == out[d] || ref->shape[d] == 1;
    }
    if (!ok) {
      fault("{} does not broadcast to the output shape {}", describe(role, *ref),
            shape_to_string(out));
    }
  }
  require_scale(a.scale, "a_scale");
  require_scale(b.scale, "b_scale");
  require_scale(y.scale, "y_scale");
  require_zero_point(a.zero_point, aref.dtype, "a_zero_point");
  require_zero_point(b.zero_point, bref.dtype, "b_zero_point");
  require_zero_point(y.zero_point, yref.dtype, "y_zero_point");
  o.empty = element_count(out) == 0;
  o.sa = broadcast_strides(aref, out);
  o.sb = broadcast_strides(bref, out);
  o.sy = broadcast_strides(yref, out);
  o.dims = out;
  if (o.dims.empty()) {  // a scalar: one element
    o.dims = {1};
    o.sa = o.sb = o.sy = {0};
  }
  o.a_signed = aref.dtype == DType::Int8;
  o.b_signed = bref.dtype == DType::Int8;
  o.y_pad =
      yref.layout == Layout::LoweredNCHW ? isa::padded_width(o.dims.back()) - o.dims.back() : 0;
  const auto range = isa::quant_range(yref.dtype);
  o.qmin = std::get<0>(range);
  o.qmax = std::get<1>(range);
  return o;
}

// Calls run(pa, pb, py) for every innermost run of the output (dims.back() elements, strides
// sa/sb/sy.back() apart) and zeroes the row padding after each run of a lowered output.
// Element y[i] depends only on a[i] and b[i], and each run reads its elements before writing
// them, so an output placed exactly over an input is fine.
template <class RunFn>
void for_each_binary_run(const BinaryOperands& o, RunFn&& run) {
  const std::size_t outer_rank = o.dims.size() - 1;
  const std::int64_t inner = o.dims.back();
  std::vector<std::int64_t> index(outer_rank, 0);  // odometer over all dims but the last
  for (;;) {
    std::int64_t oa = 0, ob = 0, oy = 0;
    for (std::size_t d = 0; d < outer_rank; ++d) {
      oa += index[d] * o.sa[d];
      ob += index[d] * o.sb[d];
      oy += index[d] * o.sy[d];
    }
    std::byte* py = o.y + oy;
    run(o.a + oa, o.b + ob, py);
    if (o.y_pad > 0) std::memset(py + inner, 0, static_cast<std::size_t>(o.y_pad));
    std::size_t d = outer_rank;
    while (d > 0 && ++index[d - 1] == o.dims[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
}

// Runs elem(a, b) -> stored y over every element (8-bit values as int32).
template <class ElemFn>
void binary_elementwise(const BinaryOperands& o, ElemFn&& elem) {
  if (o.empty) return;
  const std::int64_t inner = o.dims.back();
  const std::int64_t ia = o.sa.back(), ib = o.sb.back(), iy = o.sy.back();
  for_each_binary_run(o, [&](const std::byte* pa, const std::byte* pb, std::byte* py) {
    for (std::int64_t i = 0; i < inner; ++i) {
      store8(py + i * iy, elem(load8(pa + i * ia, o.a_signed), load8(pb + i * ib, o.b_signed)));
    }
  });
}

}  // namespace

namespace {

// A fast QLinearAdd over evenly spaced rows, for parallel_for: rows [r0, r1) of the job.
struct AddRowsJob {
  const fast::Kernels* fk;
  const fast::AddParamsF* p;
  const std::byte* a;
  std::int64_t a_pitch;
  const std::byte* b;
  std::int64_t b_pitch;
  std::byte* y;
  std::int64_t y_pitch, width, y_pad;
};

void add_rows_chunk(void* ctx, std::int64_t r0, std::int64_t r1) {
  const AddRowsJob& j = *static_cast<const AddRowsJob*>(ctx);
  j.fk->add_rows(*j.p, j.a + r0 * j.a_pitch, j.a_pitch, j.b + r0 * j.b_pitch, j.b_pitch,
                 j.y + r0 * j.y_pitch, j.y_pitch, r1 - r0, j.width, j.y_pad);
}

}  // namespace

// LowLevelAdd (com.microsoft QLinearAdd) with numpy-style broadcasting of equal-rank operands.
void add(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::AddParams>(kernel);
  const BinaryOperands o = binary_operands(kernel, region, p.a, p.b, p.y);
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& bref = kernel.inputs[1];
  const TensorRef& yref = kernel.outputs[0];
  if (p.fixed_point) {
    const isa::FixedPointAdd& f = *p.fixed_point;
    if (f.left_shift < 0 || f.left_shift > 22) {
      fault(
          "fixed-point left_shift {} must be in [0, 22] (8-bit operands times 2^left_shift "
          "must fit int32)",
          f.left_shift);
    }
    require_multiplier(f.a_mult, "fixed-point multiplier of a");
    require_multiplier(f.b_mult, "fixed-point multiplier of b");
    require_multiplier(f.y_mult, "fixed-point multiplier of y");
    require_output_range(f.out_min, f.out_max, yref.dtype);
    return binary_elementwise(
        o, [&](std::int32_t a, std::int32_t b) { return fixed_point_add(a, b, p, f); });
  }
  if (o.empty) return;
  const bool mlas = p.formula != isa::AddFormula::Dequantized;
  // MlasRatiosUint8: codes and zero points of int8 tensors + 128, the result's code - 128.
  const bool to_u8 = p.formula == isa::AddFormula::MlasRatiosUint8;
  const std::int32_t a_shift = to_u8 && o.a_signed ? 128 : 0,
                     b_shift = to_u8 && o.b_signed ? 128 : 0;
  const bool y_signed = o.qmin < 0;
  const std::int32_t y_shift = to_u8 && y_signed ? 128 : 0;
  // MlasRatios streams b and takes a as the other operand where ONNX Runtime does: a broadcast
  // along the innermost dim of y that is not 1, or y a single element (isa::AddFormula).
  bool swap = false;
  if (mlas) {
    swap = true;
    for (std::size_t d = yref.shape.size(); d-- > 0;) {
      if (yref.shape[d] == 1) continue;
      swap = aref.shape[d] == 1;
      break;
    }
  }
  const isa::QuantParam qa{p.a.scale, p.a.zero_point + a_shift},
      qb{p.b.scale, p.b.zero_point + b_shift}, qy{p.y.scale, p.y.zero_point + y_shift};
  const MlasAddConsts mk = swap ? mlas_add_consts(qb, qa, qy) : mlas_add_consts(qa, qb, qy);
  const std::size_t outer_rank = o.dims.size() - 1;
  const std::int64_t inner = o.dims.back();
  // The fast kernels stream their operand a and take b streamed too or one element per run
  // (b_broadcast). With MlasRatios* the streamed operand is ONNX Runtime's (swap); the
  // Dequantized sum is symmetric, so a broadcast a is exchanged with a streamed b.
  const bool exchange = mlas ? swap : o.sa.back() == 0 && o.sb.back() == 1;
  const std::vector<std::int64_t>& sv = exchange ? o.sb : o.sa;
  const std::vector<std::int64_t>& ss = exchange ? o.sa : o.sb;
  // Contiguous innermost runs on all three sides go through the vectorized kernel. Each element
  // of y depends only on the same element of a and b, so an output that is exactly one of the
  // inputs is fine; partial overlaps take the scalar loop, which reads before it writes.
  const bool same_or_disjoint =
      (!overlaps(aref, yref) || (aref.address == yref.address && o.sa == o.sy)) &&
      (!overlaps(bref, yref) || (bref.address == yref.address && o.sb == o.sy));
  const fast::Kernels* fk = fast_kernels();
  const bool fast_add = fk != nullptr && fk->add_rows != nullptr && fk->add_run != nullptr &&
                        sv.back() == 1 && (ss.back() == 1 || ss.back() == 0) && o.sy.back() == 1 &&
                        same_or_disjoint;
  if (!fast_add) {
    if (mlas) {
      const std::int32_t lo = o.qmin + y_shift, hi = o.qmax + y_shift;
      return binary_elementwise(o, [&](std::int32_t a, std::int32_t b) {
        a += a_shift;
        b += b_shift;
        return (swap ? mlas_add(b, a, mk, lo, hi) : mlas_add(a, b, mk, lo, hi)) - y_shift;
      });
    }
    return binary_elementwise(o, [&](std::int32_t a, std::int32_t b) {
      return qlinear_add(a, p.a, b, p.b, p.y, o.qmin, o.qmax);
    });
  }
  fast::AddParamsF fast_params =
      fast_add_params(p, o.a_signed, o.b_signed, o.qmin, o.qmax, exchange);
  fast_params.b_broadcast = ss.back() == 0;
  const std::byte* const v_data = exchange ? o.b : o.a;
  const std::byte* const s_data = exchange ? o.a : o.b;
  // Without broadcasting, the runs of every operand are evenly spaced rows: one call.
  if (outer_rank > 0) {
    auto even = [&](const std::vector<std::int64_t>& st) {
      for (std::size_t d = 0; d + 1 < outer_rank; ++d) {
        if (st[d] != st[d + 1] * o.dims[d + 1]) return false;
      }
      return st[outer_rank - 1] != 0 || o.dims[outer_rank - 1] == 1;
    };
    if (even(sv) && even(ss) && even(o.sy)) {
      std::int64_t rows = 1;
      for (std::size_t d = 0; d < outer_rank; ++d) rows *= o.dims[d];
      // The rows are split between the device's idle compute threads (fork_join.h).
      AddRowsJob job{fk,     &fast_params,
                     v_data, sv[outer_rank - 1],
                     s_data, ss[outer_rank - 1],
                     o.y,    o.sy[outer_rank - 1],
                     inner,  o.y_pad};
      parallel_for(rows, chunk_grain(rows, 64), &add_rows_chunk, &job);
      return;
    }
  }
  for_each_binary_run(o, [&](const std::byte* pa, const std::byte* pb, std::byte* py) {
    fk->add_run(fast_params, exchange ? pb : pa, exchange ? pa : pb, py, inner);
  });
}

// LowLevelMul (isa::MulParams): com.microsoft QLinearMul's documented formula, the integer
// product exact and one float32 ratio; or DequantizeLinear, Mul, QuantizeLinear in float32.
void mul(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::MulParams>(kernel);
  const BinaryOperands o = binary_operands(kernel, region, p.a, p.b, p.y);
  if (p.dequantized) {
    return binary_elementwise(o, [&](std::int32_t a, std::int32_t b) {
      const float fa = static_cast<float>(a - p.a.zero_point) * p.a.scale;
      const float fb = static_cast<float>(b - p.b.zero_point) * p.b.scale;
      return host::quantize_value(fa * fb / p.y.scale, p.y.zero_point, o.qmin, o.qmax);
    });
  }
  const float ratio = p.a.scale * p.b.scale / p.y.scale;  // float32, in this order
  if (!std::isfinite(ratio)) fault("a_scale * b_scale / y_scale = {} is not finite", ratio);
  const auto yzp = static_cast<float>(p.y.zero_point);
  binary_elementwise(o, [&](std::int32_t a, std::int32_t b) {
    const float product = static_cast<float>((a - p.a.zero_point) * (b - p.b.zero_point));
    const float scaled = product * ratio;
    return host::quantize_value(scaled + yzp, 0, o.qmin, o.qmax);
  });
}

// LowLevelSub (isa::SubParams): DequantizeLinear of both operands, Sub, QuantizeLinear, in
// float32.
void sub(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::SubParams>(kernel);
  const BinaryOperands o = binary_operands(kernel, region, p.a, p.b, p.y);
  binary_elementwise(o, [&](std::int32_t a, std::int32_t b) {
    const float fa = static_cast<float>(a - p.a.zero_point) * p.a.scale;
    const float fb = static_cast<float>(b - p.b.zero_point) * p.b.scale;
    const float diff = fa - fb;
    return host::quantize_value(diff / p.y.scale, p.y.zero_point, o.qmin, o.qmax);
  });
}

// LowLevelRequantize: DequantizeLinear then QuantizeLinear in float32, element for element, or
// the 256-entry table the compiler computed (RequantizeParams::table).
// Every 8-bit input value maps to one output value, so the formula is evaluated once per
// possible input value into a table and the copy maps elements through it.
host::LookupTable requantize_table(const isa::Kernel& kernel) {
  const auto& p = params_of<isa::RequantizeParams>(kernel);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  require_8bit(xref, "input 0");
  require_8bit(yref, "output 0");
  if (xref.shape != yref.shape) {
    fault("{} must have the shape of {}", describe("output 0", yref), describe("input 0", xref));
  }
  require_scale(p.x.scale, "x_scale");
  require_scale(p.y.scale, "y_scale");
  require_zero_point(p.x.zero_point, xref.dtype, "x_zero_point");
  require_zero_point(p.y.zero_point, yref.dtype, "y_zero_point");

  if (!p.table.empty() && p.table.size() != 256) {
    fault("requantization table has {} entries; expected 0 or 256", p.table.size());
  }
  // Without a table: DequantizeLinear then QuantizeLinear in float32 (isa.h), as a table.
  host::LookupTable lut{};
  if (!p.table.empty()) {
    std::copy(p.table.begin(), p.table.end(), lut.begin());
  } else {
    // Copies, not structured bindings: clang 14 (the fuzz and tidy trees) cannot capture those.
    const auto range = isa::quant_range(yref.dtype);
    const std::int32_t qmin = range[0], qmax = range[1];
    lut = host::build_lookup_table(xref.dtype, yref.dtype, [&](std::int32_t x) {
      const float f = static_cast<float>(x - p.x.zero_point) * p.x.scale;
      return host::quantize_value(f / p.y.scale, p.y.zero_point, qmin, qmax);
    });
  }
  return lut;
}

void map_through_table(std::span<std::byte> region, const TensorRef& xref, const TensorRef& yref,
                       const host::LookupTable& lut) {
  std::byte* yptr = at(region, yref);
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, {yref}, scratch);
  if (!copy_block(yptr, xptr, Block{yref.shape, layout_strides(yref), layout_strides(xref)}, 1,
                  lut.data(), dst_rows(yref))) {
    clear_row_padding(yptr, yref);
  }
}

void requantize(const isa::Kernel& kernel, std::span<std::byte> region) {
  map_through_table(region, kernel.inputs[0], kernel.outputs[0], requantize_table(kernel));
}

}  // namespace furiosa::device::sim::detail

namespace furiosa::device::sim {

fast::AddParamsF fast_add_params(const isa::AddParams& p, bool a_signed, bool b_signed,
                                 std::int32_t qmin, std::int32_t qmax, bool exchange) {
  isa::QuantParam qv = exchange ? p.b : p.a, qs = exchange ? p.a : p.b, qy = p.y;
  const bool v_signed = exchange ? b_signed : a_signed, s_signed = exchange ? a_signed : b_signed;
  fast::AddParamsF f{
      qv.scale, qs.scale, qy.scale, qv.zero_point, qs.zero_point, qy.zero_point, qmin,
      qmax,     v_signed, s_signed, false,         0.0f,          0.0f,          0.0f,
      0,        0,        0,        false};
  if (p.formula == isa::AddFormula::Dequantized) return f;
  f.mlas = true;
  if (p.formula == isa::AddFormula::MlasRatiosUint8) {
    // ORT's QDQS8ToU8 transform: an int8 code x is the uint8 code x + 128 (its byte XOR 0x80
    // read unsigned) with zero point zp + 128; an int8 result is the uint8 one - 128.
    if (v_signed) {
      qv.zero_point += 128;
      f.a_flip = 0x80;
      f.a_signed = false;
    }
    if (s_signed) {
      qs.zero_point += 128;
      f.b_flip = 0x80;
      f.b_signed = false;
    }
    if (qmin < 0) {
      qy.zero_point += 128;
      f.y_flip = 0x80;
      f.qmin = qmin + 128;
      f.qmax = qmax + 128;
    }
  }
  const MlasAddConsts mk = mlas_add_consts(qv, qs, qy);
  f.ra = mk.rv;
  f.rb = mk.rs;
  f.fixed = mk.fixed;
  return f;
}

}  // namespace furiosa::device::sim
