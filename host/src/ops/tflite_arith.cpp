// The host operator library (host/cpu_ops.h): TFLite's 8-bit arithmetic on two operands,
// furiosa::TFLiteBinary, with numpy broadcasting. The importer (compiler-bridge/src/tflite)
// computes the fixed-point multipliers as TFLite's Prepare functions do; this kernel applies
// them element by element as TFLite's reference kernels do (tensorflow/lite/kernels/internal/
// reference/{add,mul,prelu}.h, integer_ops/*):
//  - kind "sub" (SUB, kernels/sub.cc: the ADD kernel with the second multiplier negated):
//    sa = mbqm((a - a_zp) << left_shift, m_a), sb = mbqm((b - b_zp) << left_shift, -m_b),
//    y = mbqm(sa + sb, m_y) + y_zp;
//  - kind "mul" (MUL): y = mbqm((a - a_zp) * (b - b_zp), m_y) + y_zp;
//  - kind "div" (DIV, reference_ops::DivElementwise): with a = a - a_zp, b = b - b_zp (both
//    negated when b < 0), y = SmallerThanOneExp(SRDHM(a << h, recip(b)), m_y, shift_y - bits(b) -
//    h)
//    + y_zp, h = CountLeadingSignBits(a) and recip(b) TFLite's GetReciprocal(b, 31) (gemmlowp's
//    Newton-Raphson 1 / (1 + x)); b == b_zp (division by zero, which TFLite does not define)
//    gives the end of the output range on a's side;
//  - kind "squared_difference" (SQUARED_DIFFERENCE, int8, kernels/squared_difference.cc):
//    d = mbqm((a - a_zp) << left_shift, m_a) - mbqm((b - b_zp) << left_shift, m_b),
//    y = mbqm(d * d, m_y) + y_zp;
//  - kind "prelu" (PRELU, b = alpha): x = a - a_zp; y = (x >= 0 ? mbqm(x, m_1)
//    : mbqm(x * (b - b_zp), m_2)) + y_zp;
// with mbqm = multiply_by_quantized_multiplier (fixed_point.h), then clamped to
// [output_min, output_max]. Attributes: kind, a_zero_point, b_zero_point, y_zero_point,
// fixed_point_multiplier / fixed_point_shift (sub, squared_difference: a, b, y; mul: y; prelu:
// identity, alpha), fixed_point_left_shift (sub, squared_difference), output_min / output_max.
#include "furiosa/host/fixed_point.h"
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

enum class Kind { Sub, Mul, Prelu, SquaredDifference, Div };

std::size_t multiplier_count(Kind k) {
  return k == Kind::Sub || k == Kind::SquaredDifference ? 3
         : k == Kind::Mul || k == Kind::Div             ? 1
                                                        : 2;
}

/// gemmlowp SaturatingRoundingMultiplyByPOT<e>, e > 0: x * 2^e saturated where |x| > 2^(31-e) - 1.
std::int32_t saturating_pot(std::int32_t x, int e) {
  const std::int32_t threshold = (std::int32_t{1} << (31 - e)) - 1;
  if (x > threshold) return INT32_MAX;
  if (x < -threshold) return INT32_MIN;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(x) << e);
}

/// TFLite GetReciprocal(x, 31, &bits) for x > 0: 1 / x as a Q0.31 significand and the number
/// of bits x has above 1.0 (gemmlowp one_over_one_plus_x_for_x_in_0_1: three Newton-Raphson
/// steps in Q2.29 from 48/17 - 32/17 d).
std::int32_t reciprocal(std::int32_t x, int* bits) {
  const int clz = __builtin_clz(static_cast<std::uint32_t>(x));
  *bits = 31 - clz;
  const auto a =
      static_cast<std::int32_t>((static_cast<std::uint32_t>(x) << clz) - (std::uint32_t{1} << 31));
  const std::int64_t sum = std::int64_t{a} + INT32_MAX;  // RoundingHalfSum(a, 1.0)
  const auto half_d = static_cast<std::int32_t>((sum + (sum >= 0 ? 1 : -1)) / 2);
  using host::saturating_rounding_doubling_high_mul;
  std::int32_t r = 1515870810 + saturating_rounding_doubling_high_mul(half_d, -1010580540);
  for (int i = 0; i < 3; ++i) {
    const std::int32_t one_minus = (1 << 29) - saturating_rounding_doubling_high_mul(half_d, r);
    r = r + saturating_pot(saturating_rounding_doubling_high_mul(r, one_minus), 2);
  }
  return saturating_pot(r, 1);
}

std::optional<Kind> kind_of(const Node& n) {
  const std::string k = n.attr_string("kind", "");
  if (k == "sub") return Kind::Sub;
  if (k == "mul") return Kind::Mul;
  if (k == "prelu") return Kind::Prelu;
  if (k == "squared_difference") return Kind::SquaredDifference;
  if (k == "div") return Kind::Div;
  return std::nullopt;
}

std::string check_tflite_binary(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "A", kQ8).in(1, "B", kQ8).same(0, 1);
  const auto kind = kind_of(n);
  ch.require(kind.has_value(),
             fmt::format("attribute 'kind' '{}' is not sub, mul, div, prelu or squared_difference",
                         n.attr_string("kind", "")));
  if (!kind) return ch.reason;
  const auto mult = n.attr_ints("fixed_point_multiplier", {});
  const auto shift = n.attr_ints("fixed_point_shift", {});
  ch.require(mult.size() == multiplier_count(*kind) && shift.size() == mult.size(),
             fmt::format("fixed_point_multiplier/fixed_point_shift must have {} values",
                         multiplier_count(*kind)));
  for (std::size_t i = 0; i < shift.size(); ++i) {
    ch.require(shift[i] >= -31 && shift[i] <= 30,
               fmt::format("fixed_point_shift {} is outside [-31, 30]", shift[i]));
    ch.require(mult[i] >= 0 && mult[i] <= INT32_MAX,
               fmt::format("fixed_point_multiplier {} is outside [0, 2^31)", mult[i]));
  }
  const auto left = n.attr_int("fixed_point_left_shift", 0);
  ch.require(left >= 0 && left <= 20,
             fmt::format("fixed_point_left_shift {} is outside [0, 20]", left));
  return ch.reason;
}

OutInfos infer_tflite_binary(const Ctx& c) {
  return {{c.dtype(0, "A"), broadcast_shape(c, c.shape(0, "A"), c.shape(1, "B"))}};
}

/// gemmlowp RoundingDivideByPOT as TFLite's reference DIV runs it. DivElementwise hands it
/// exponents above 31 when the quotient is far below one output step (bits(b) + headroom exceed
/// the output shift); its assert(exponent <= 31) is compiled out, so the int32 shift takes its
/// count mod 32 (x86-64's sar and AArch64's asr alike) and the mask (1ll << e) - 1 is truncated to
/// its low 32 bits. Those are the results TensorFlow Lite returns, so they are reproduced here
/// with defined arithmetic (the shifts themselves would be undefined behaviour in C++).
std::int32_t tflite_div_rounding_divide_by_pot(std::int32_t x, int exponent) {
  if (exponent <= 31) return host::rounding_divide_by_pot(x, exponent);
  const std::uint64_t wide = (std::uint64_t{1} << (exponent & 63)) - 1;
  const auto mask = static_cast<std::int32_t>(static_cast<std::uint32_t>(wide));
  const std::int32_t remainder = x & mask;
  const std::int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> (exponent & 31)) + (remainder > threshold ? 1 : 0);
}

std::vector<Tensor> run_tflite_binary(const Ctx& c, const OutInfos& o) {
  const Node& n = c.node;
  const Kind kind = *kind_of(n);  // checked
  const auto mult = n.attr_ints("fixed_point_multiplier", {});
  const auto shift = n.attr_ints("fixed_point_shift", {});
  auto qm = [&](std::size_t i) {
    return host::QuantizedMultiplier{static_cast<std::int32_t>(mult[i]),
                                     static_cast<std::int32_t>(shift[i])};
  };
  const auto a_zp = static_cast<std::int32_t>(n.attr_int("a_zero_point", 0));
  const auto b_zp = static_cast<std::int32_t>(n.attr_int("b_zero_point", 0));
  const auto y_zp = static_cast<std::int32_t>(n.attr_int("y_zero_point", 0));
  const auto left = static_cast<int>(n.attr_int("fixed_point_left_shift", 0));
  Tensor ty = c.output(o, 0);
  visit_dtype(ty.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>) {
      constexpr std::int32_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
      const auto out_min =
          static_cast<std::int32_t>(std::max<std::int64_t>(lo, n.attr_int("output_min", lo)));
      const auto out_max =
          static_cast<std::int32_t>(std::min<std::int64_t>(hi, n.attr_int("output_max", hi)));
      const host::QuantizedMultiplier m0 = qm(0);
      // (MUL and DIV carry one multiplier, the output's: no second one to read.)
      const host::QuantizedMultiplier m1 = multiplier_count(kind) > 1 ? qm(1) : m0;
      // SUB negates the second multiplier (TFLite's sub.cc), which the doubling high multiply
      // then takes as a negative factor: not always the negation of the positive product.
      const host::QuantizedMultiplier m1_neg{-m1.multiplier, m1.shift};
      const host::QuantizedMultiplier my =
          kind == Kind::Sub || kind == Kind::SquaredDifference ? qm(2) : m0;
      auto f = [&](std::int32_t a, std::int32_t b) -> std::int32_t {
        std::int32_t v = 0;
        switch (kind) {
          case Kind::Sub: {
            const std::int32_t sa =
                host::multiply_by_quantized_multiplier((a - a_zp) * (1 << left), m0);
            const std::int32_t sb =
                host::multiply_by_quantized_multiplier((b - b_zp) * (1 << left), m1_neg);
            v = host::multiply_by_quantized_multiplier(sa + sb, my);
            break;
          }
          case Kind::SquaredDifference: {
            const std::int32_t d =
                host::multiply_by_quantized_multiplier((a - a_zp) * (1 << left), m0) -
                host::multiply_by_quantized_multiplier((b - b_zp) * (1 << left), m1);
            v = host::multiply_by_quantized_multiplier(d * d, my);
            break;
          }
          case Kind::Div: {
            std::int32_t x = a - a_zp, d = b - b_zp;
            if (d == 0) return x >= 0 ? out_max : out_min;
            if (d < 0) {
              x = -x;
              d = -d;
            }
            int bits = 0;
            const std::int32_t recip = reciprocal(d, &bits);
            const int headroom = x == 0 ? 31 : __builtin_clrsb(x);
            const std::int32_t q = host::saturating_rounding_doubling_high_mul(
                static_cast<std::int32_t>(static_cast<std::uint32_t>(x) << headroom), recip);
            // TFLite's MultiplyByQuantizedMultiplierSmallerThanOneExp(q, m, total_shift).
            const int total_shift = my.shift - bits - headroom;
            v = total_shift > 0
                    ? host::multiply_by_quantized_multiplier(q, {my.multiplier, total_shift})
                    : tflite_div_rounding_divide_by_pot(
                          host::saturating_rounding_doubling_high_mul(q, my.multiplier),
                          -total_shift);
            break;
          }
          case Kind::Mul:
            v = host::multiply_by_quantized_multiplier((a - a_zp) * (b - b_zp), my);
            break;
          case Kind::Prelu: {
            const std::int32_t x = a - a_zp;
            v = x >= 0 ? host::multiply_by_quantized_multiplier(x, m0)
                       : host::multiply_by_quantized_multiplier(x * (b - b_zp), m1);
            break;
          }
        }
        return std::clamp(v + y_zp, out_min, out_max);
      };
      const T* pa = c.t(0).as<T>().data();
      const T* pb = c.t(1).as<T>().data();
      T* py = ty.as<T>().data();
      const Shape& out = ty.shape();
      strided_rows<2>(
          out,
          {broadcast_strides(c.t(0).shape(), out.size()),
           broadcast_strides(c.t(1).shape(), out.size())},
          {0, 0},
          [&](std::int64_t row, std::array<std::int64_t, 2> off, std::int64_t len,
              std::array<std::int64_t, 2> inner) {
            for (std::int64_t j = 0; j < len; ++j) {
              py[row + j] = static_cast<T>(f(pa[off[0] + j * inner[0]], pb[off[1] + j * inner[1]]));
            }
          });
    }
  });
  return single_output(std::move(ty));
}

}  // namespace

OpRows tflite_arith_ops() {
  OpRows rows;
  rows.furiosa.push_back(
      {"TFLiteBinary", 2, 2, 1, check_tflite_binary, infer_tflite_binary, run_tflite_binary});
  return rows;
}

}  // namespace furiosa::host::detail
