// LowLevelMatMul (QLinearMatMul with a constant B): validation, the portable matmul, and the
// packing of a matmul for the fast kernels (fast::MatMulPlan), per program
// (prepare_matmul_plan) or per call.
#include "kernel_common.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace furiosa::device::sim::detail {

namespace {

// A validated LowLevelMatMul: sizes, the bytes of B and the per-column multiplier.
struct MatMulDesc {
  const isa::MatMulParams* p = nullptr;
  std::int64_t batch = 1, M = 0, K = 0, N = 0;
  const std::byte* bptr = nullptr;
  std::vector<float> mult;                      // float rule
  std::vector<isa::QuantizedMultiplier> fixed;  // fixed-point rule: one per column
  std::vector<std::uint32_t> bias;              // per column (zeros without a bias), wrapped
};

// Validates a matmul kernel (see validate_conv for `mem`).
MatMulDesc validate_matmul(const isa::Kernel& kernel, const Readable& mem) {
  MatMulDesc d;
  const auto& p = params_of<isa::MatMulParams>(kernel);
  d.p = &p;
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  for (const auto& [ref, role] :
       {std::pair{&aref, "input 0"}, std::pair{&yref, "output 0"}, std::pair{&p.b, "b"}}) {
    require_linear(*ref, role);
    require_8bit(*ref, role);
  }
  const std::size_t rank = aref.shape.size();
  if (rank < 2) fault("{} must be of rank >= 2", describe("input 0", aref));
  if (p.b.shape.size() != 2) fault("{} must be of rank 2", describe("b", p.b));
  const std::int64_t M = aref.shape[rank - 2], K = aref.shape[rank - 1], N = p.b.shape[1];
  if (p.b.shape[0] != K) fault("{} must have {} rows (K of input 0)", describe("b", p.b), K);
  Shape expected(aref.shape.begin(), aref.shape.end() - 1);
  expected.push_back(N);
  if (yref.shape != expected) {
    fault("{} must have shape {}", describe("output 0", yref), shape_to_string(expected));
  }
  require_per_channel_size(p.b_scale.size(), N, "b_scale");
  require_per_channel_size(p.b_zero_point.size(), N, "b_zero_point");
  require_scale(p.a.scale, "a_scale");
  require_scale(p.y.scale, "y_scale");
  for (float s : p.b_scale) require_scale(s, "b_scale");
  require_zero_point(p.a.zero_point, aref.dtype, "a_zero_point");
  require_zero_point(p.y.zero_point, yref.dtype, "y_zero_point");
  for (std::int32_t zp : p.b_zero_point) require_zero_point(zp, p.b.dtype, "b_zero_point");
  if (p.fixed_point) {
    require_fixed_point(*p.fixed_point, N, yref.dtype);
    const auto& mults = p.fixed_point->multipliers;
    for (std::int64_t n = 0; n < N; ++n) {
      d.fixed.push_back(mults[mults.size() == 1 ? 0 : static_cast<std::size_t>(n)]);
    }
  } else {
    d.mult.resize(static_cast<std::size_t>(N));
    for (std::int64_t n = 0; n < N; ++n) {
      const float b_scale = p.b_scale[p.b_scale.size() == 1 ? 0 : static_cast<std::size_t>(n)];
      const float value = (p.a.scale * b_scale) / p.y.scale;
      if (!std::isfinite(value)) fault("requantization multiplier of column {} is not finite", n);
      d.mult[static_cast<std::size_t>(n)] = value;
    }
  }
  d.bias.assign(static_cast<std::size_t>(N), 0);
  if (p.bias) {
    require_linear(*p.bias, "bias");
    if (p.bias->dtype != DType::Int32 || p.bias->shape != Shape{N}) {
      fault("{} must be int32 of shape [{}]", describe("bias", *p.bias), N);
    }
    const std::byte* bias_ptr = read_at(mem, *p.bias);
    for (std::int64_t n = 0; n < N; ++n) {
      std::int32_t b;
      std::memcpy(&b, bias_ptr + n * 4, 4);
      d.bias[static_cast<std::size_t>(n)] = static_cast<std::uint32_t>(b);
    }
  }
  d.bptr = read_at(mem, p.b);
  for (std::size_t i = 0; i + 2 < rank; ++i) d.batch *= aref.shape[i];
  d.M = M;
  d.K = K;
  d.N = N;
  return d;
}

// The portable matmul: int16 operands, uint32 accumulators, scalar requantization.
void matmul_generic(const MatMulDesc& d, const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = *d.p;
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  const std::byte* aptr = region.data() + aref.address;
  std::byte* yptr = region.data() + yref.address;
  const std::int64_t M = d.M, K = d.K, N = d.N;
  // B minus its zero points, transposed to [N][K] so the dot products run over contiguous K.
  std::vector<std::int16_t> bq(static_cast<std::size_t>(N * K));
  const bool b_signed = p.b.dtype == DType::Int8;
  for (std::int64_t n = 0; n < N; ++n) {
    const std::size_t pick = p.b_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(n);
    const std::int32_t zp = p.b_zero_point[pick];
    for (std::int64_t k = 0; k < K; ++k) {
      bq[static_cast<std::size_t>(n * K + k)] =
          static_cast<std::int16_t>(load8(d.bptr + k * N + n, b_signed) - zp);
    }
  }
  const bool a_signed = aref.dtype == DType::Int8;
  const auto [qmin, qmax] = isa::quant_range(yref.dtype);
  std::vector<std::int16_t> aq(static_cast<std::size_t>(K));
  for (std::int64_t row = 0; row < d.batch * M; ++row) {
    const std::byte* arow = aptr + row * K;
    for (std::int64_t k = 0; k < K; ++k) {
      aq[static_cast<std::size_t>(k)] =
          static_cast<std::int16_t>(load8(arow + k, a_signed) - p.a.zero_point);
    }
    std::byte* yrow = yptr + row * N;
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int16_t* bn = bq.data() + n * K;
      std::uint32_t acc = d.bias[static_cast<std::size_t>(n)];
      for (std::int64_t k = 0; k < K; ++k) {
        acc += static_cast<std::uint32_t>(std::int32_t{aq[static_cast<std::size_t>(k)]} * bn[k]);
      }
      if (p.fixed_point) {
        store8(yrow + n, isa::requantize_fixed_point(
                             static_cast<std::int32_t>(acc), d.fixed[static_cast<std::size_t>(n)],
                             p.y.zero_point, p.fixed_point->out_min, p.fixed_point->out_max));
      } else {
        store8(yrow + n,
               isa::requantize(static_cast<std::int32_t>(acc), d.mult[static_cast<std::size_t>(n)],
                               p.y.zero_point, qmin, qmax));
      }
    }
  }
}

// True when the fast matmul handles `d`: the float rule without a bias and a non-empty output.
bool fast_matmul_fits(const MatMulDesc& d) {
  return !d.p->fixed_point && !d.p->bias && d.batch * d.M > 0 && d.N > 0;
}

// Packs a validated matmul for the fast kernel.
std::shared_ptr<const fast::MatMulPlan> make_matmul_plan(const MatMulDesc& d,
                                                         const isa::Kernel& kernel) {
  auto plan = std::make_shared<fast::MatMulPlan>();
  fast::MatMulPlan& f = *plan;
  const auto& p = *d.p;
  const TensorRef& aref = kernel.inputs[0];
  f.rows = d.batch * d.M;
  f.K = d.K;
  f.N = d.N;
  f.K4 = (d.K + 3) / 4;
  f.Npad = (d.N + 15) / 16 * 16;
  f.a_signed = aref.dtype == DType::Int8;
  const std::int32_t az = p.a.zero_point + (f.a_signed ? 128 : 0);
  f.az = static_cast<std::uint8_t>(az);
  f.yz = p.y.zero_point;
  const auto [qmin, qmax] = isa::quant_range(kernel.outputs[0].dtype);
  f.qmin = qmin;
  f.qmax = qmax;
  const bool b_signed = p.b.dtype == DType::Int8;
  f.mult.assign(static_cast<std::size_t>(f.Npad), 0.0f);
  f.c0.assign(static_cast<std::size_t>(f.Npad), 0);
  f.bz.assign(static_cast<std::size_t>(f.Npad), 0);
  f.b_packed.assign(static_cast<std::size_t>(f.K4 * f.Npad * 4), 0);
  for (std::int64_t n = 0; n < d.N; ++n) {
    const std::int32_t zp =
        p.b_zero_point[p.b_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(n)];
    const std::int32_t bz = b_signed ? zp : zp - 128;
    std::uint32_t bsum = 0;
    for (std::int64_t k = 0; k < d.K; ++k) {
      const std::int32_t v = load8(d.bptr + k * d.N + n, b_signed) - (b_signed ? 0 : 128);
      bsum += static_cast<std::uint32_t>(v);
      f.b_packed[static_cast<std::size_t>(fast::matmul_b_offset(f.K4, f.Npad, k, n))] =
          static_cast<std::int8_t>(v);
    }
    // K az bz - az sum b, modulo 2^32.
    const std::uint32_t c0 = static_cast<std::uint32_t>(d.K) * static_cast<std::uint32_t>(az) *
                                 static_cast<std::uint32_t>(bz) -
                             static_cast<std::uint32_t>(az) * bsum;
    f.mult[static_cast<std::size_t>(n)] = d.mult[static_cast<std::size_t>(n)];
    f.c0[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(c0);
    f.bz[static_cast<std::size_t>(n)] = bz;
    f.any_bz = f.any_bz || bz != 0;
  }
  return plan;
}

void matmul_fast(const fast::Kernels& fk, const fast::MatMulPlan& plan, const isa::Kernel& kernel,
                 std::span<std::byte> region) {
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  fk.matmul(plan, fast_input(region, aref, yref), region.data() + yref.address);
}

}  // namespace

std::shared_ptr<const fast::MatMulPlan> prepare_matmul_plan(
    const isa::Kernel& kernel, const Readable& constants,
    const std::function<bool(const TensorRef&)>& frozen) {
  const MatMulDesc d = validate_matmul(kernel, constants);
  if (!frozen(d.p->b) || !fast_matmul_fits(d)) return nullptr;
  return make_matmul_plan(d, kernel);
}

// LowLevelMatMul (QLinearMatMul with constant B, per-column quantization of B).
void matmul(const isa::Kernel& kernel, std::span<std::byte> region, const KernelPlan* prepared) {
  const fast::Kernels* fk = fast_kernels();
  const bool fast = fk != nullptr && fk->matmul != nullptr;
  if (prepared != nullptr && prepared->matmul && fast) {
    return matmul_fast(*fk, *prepared->matmul, kernel, region);
  }
  const MatMulDesc d = validate_matmul(kernel, Readable{region.data(), region.size()});
  if (fast && fast_matmul_fits(d)) {
    return matmul_fast(*fk, *make_matmul_plan(d, kernel), kernel, region);
  }
  matmul_generic(d, kernel, region);
}

}  // namespace furiosa::device::sim::detail
