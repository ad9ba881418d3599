// Private to the host operator library: float32 exp and the logistic sigmoid over arrays, the
// bulk of a detector's float decode head (YOLOv8's Sigmoid over 80 x 8400 class logits and its
// DFL Softmax), in branch-free loops that GCC vectorizes (float_math.cpp).
//
// Same results on every CPU: the functions use only IEEE float32 additions, multiplications,
// divisions and comparisons (no FMA: the host module builds with -ffp-contract=off), exact
// integer steps and the current rounding mode, so the SSE2, AVX2 and AVX-512 clones and the
// scalar code of other architectures give identical bits. glibc's expf is not used because
// each element would cost a call (about 5 ns), and its vector forms in libmvec (one per vector
// width) make no promise to agree with each other.
#pragma once

#include <cstdint>

namespace furiosa::host::detail {

/// y[i] = e^x[i] for i < n, within 2 ulp of the exact value (Cody-Waite reduction by ln 2 and
/// Cephes' degree-6 polynomial for expf). +inf above 88.7228; 0 below -87.3365, where e^x is
/// below FLT_MIN (glibc returns subnormals there); NaN stays NaN. `x` and `y` may be the same
/// array.
void exp_f32(const float* x, float* y, std::int64_t n);

/// Softmax (or, with `log`, LogSoftmax) over the middle axis of x [n][inner] into y (same shape):
/// per inner position i, m = max_k x[k][i]; e = exp_f32(x - m); sum = the e's added in double
/// in the order of k; y = e * float(1 / sum) (LogSoftmax: x - m - float(log(sum))). `mx`, `sum`
/// and `norm` are scratch of `inner` elements. The same operations in the same order on every
/// CPU (the clones only widen the vectors), so the same bits. x and y must not overlap.
void softmax_f32(const float* x, float* y, std::int64_t n, std::int64_t inner, bool log, float* mx,
                 double* sum, float* norm);

/// y[i] += a * x[i * stride] for i < n (a product rounded to float, then the sum: no FMA), the
/// row update of the host's float Conv (YOLOv8's DFL convolution over 4 x 8400 positions). The
/// clones only widen the vectors, so the bits are the same on every CPU.
void axpy_f32(float* y, const float* x, float a, std::int64_t n, std::int64_t stride);

/// y[i] = 1 / (1 + e^-x[i]) for i < n, computed as 1 / (1 + e) for x >= 0 and e / (1 + e) for
/// x < 0 with e = exp(-|x|) (so neither form overflows). NaN stays NaN. In place allowed.
void sigmoid_f32(const float* x, float* y, std::int64_t n);

}  // namespace furiosa::host::detail
