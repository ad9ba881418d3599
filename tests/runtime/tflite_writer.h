// Writing .tflite files in tests and test tools: a FlatBuffers builder for one-subgraph models
// over the schema subset the importer reads (compiler-bridge/schema/tflite_subset.fbs, generated
// header tflite_subset_generated.h; link furiosa_tflite_schema), and a float NHWC convolution
// reference with TFLite's padding rules.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "furiosa/core/tensor.h"
#include "tflite_subset_generated.h"

namespace furiosa::test {

namespace fb = furiosa::tflite_fb;

/// Quantization of a tensor: one scale and zero point (per tensor) or one per slice along
/// `dim` (TFLite's quantized_dimension, per channel).
struct QSpec {
  std::vector<float> scales;
  std::vector<std::int64_t> zero_points;
  int dim = 0;
};

/// Builds a one-subgraph TFLite model (schema version 3) with the FlatBuffers builder generated
/// from our schema subset: add tensors, then operators in execution order, then finish().
class TfliteWriter {
 public:
  TfliteWriter() { buffers_.push_back(fb::CreateBuffer(b_)); }  // buffer 0: the empty sentinel

  /// The builder, for operator options (fb::CreateConv2DOptions(builder(), ...)).
  flatbuffers::FlatBufferBuilder& builder() { return b_; }

  /// Adds a tensor and returns its index; `shape` as TFLite stores it (NHWC images), `q` its
  /// quantization, `data` (raw little-endian bytes) makes it a constant.
  int tensor(const std::string& name, fb::TensorType type, std::vector<std::int32_t> shape,
             const QSpec* q = nullptr, const std::vector<std::uint8_t>* data = nullptr) {
    std::uint32_t buffer = 0;
    if (data) {
      buffers_.push_back(fb::CreateBufferDirect(b_, data));
      buffer = static_cast<std::uint32_t>(buffers_.size() - 1);
    }
    flatbuffers::Offset<fb::QuantizationParameters> qp = 0;
    if (q) qp = fb::CreateQuantizationParametersDirect(b_, &q->scales, &q->zero_points, q->dim);
    tensors_.push_back(fb::CreateTensorDirect(b_, &shape, type, buffer, name.c_str(), qp));
    return static_cast<int>(tensors_.size() - 1);
  }

  /// Adds a builtin operator (BuiltinOperator code) reading tensors `in` (-1: an omitted
  /// optional input) and writing `out`, with its options table.
  void op(int code, std::vector<std::int32_t> in, std::vector<std::int32_t> out,
          fb::BuiltinOptions type = fb::BuiltinOptions::NONE, flatbuffers::Offset<void> options = 0) {
    auto it = std::find(codes_.begin(), codes_.end(), code);
    if (it == codes_.end()) {
      codes_.push_back(code);
      // Like current converters: the int8 field holds codes below 127, the int32 field all.
      code_tables_.push_back(fb::CreateOperatorCode(b_, static_cast<std::int8_t>(std::min(code, 127)), 0, code));
      it = codes_.end() - 1;
    }
    ops_.push_back(fb::CreateOperatorDirect(b_, static_cast<std::uint32_t>(it - codes_.begin()), &in, &out, type, options));
  }

  /// Adds a CUSTOM operator (builtin code 32) with its custom_code and FlexBuffer options.
  void custom_op(const std::string& custom_code, std::vector<std::int32_t> in, std::vector<std::int32_t> out,
                 const std::vector<std::uint8_t>& options) {
    code_tables_.push_back(fb::CreateOperatorCode(b_, 32, b_.CreateString(custom_code), 32));
    codes_.push_back(-1);  // never matched by op()
    ops_.push_back(fb::CreateOperatorDirect(b_, static_cast<std::uint32_t>(code_tables_.size() - 1), &in, &out,
                                            fb::BuiltinOptions::NONE, 0, &options));
  }

  /// Finishes the model with the given graph inputs and outputs; returns the file's bytes.
  /// Call once.
  std::string finish(std::vector<std::int32_t> inputs, std::vector<std::int32_t> outputs) {
    auto sg = fb::CreateSubGraphDirect(b_, &tensors_, &inputs, &outputs, &ops_, "main");
    std::vector<flatbuffers::Offset<fb::SubGraph>> sgs{sg};
    fb::FinishModelBuffer(b_, fb::CreateModelDirect(b_, 3, &code_tables_, &sgs, &buffers_));
    return {reinterpret_cast<const char*>(b_.GetBufferPointer()), b_.GetSize()};
  }

 private:
  flatbuffers::FlatBufferBuilder b_;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers_;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors_;
  std::vector<flatbuffers::Offset<fb::Operator>> ops_;
  std::vector<int> codes_;
  std::vector<flatbuffers::Offset<fb::OperatorCode>> code_tables_;
};

/// The bytes of `v` as stored in memory (little-endian on every supported host).
template <class T>
std::vector<std::uint8_t> raw_bytes(const std::vector<T>& v) {
  std::vector<std::uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

/// A float NHWC convolution with TFLite's SAME/VALID padding (SAME: the extra row/column at the
/// end): x [N, H, W, C], weights OHWI for a convolution or 1HWO with O = C * multiplier for a
/// depthwise one (`depthwise`), one bias per output channel, one stride for both axes. Returns
/// NHWC and sets `out_shape`.
inline std::vector<double> conv_ref(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                             const Shape& ws, const std::vector<double>& bias, std::int64_t stride, bool same,
                             bool depthwise, Shape* out_shape) {
  const std::int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  const std::int64_t kh = ws[1], kw = ws[2], M = depthwise ? ws[3] : ws[0];
  auto dim = [&](std::int64_t in, std::int64_t k, std::int64_t* before) {
    if (!same) {
      *before = 0;
      return (in - k + stride) / stride;
    }
    const std::int64_t out = (in + stride - 1) / stride;
    *before = std::max<std::int64_t>(0, (out - 1) * stride + k - in) / 2;
    return out;
  };
  std::int64_t pt = 0, pl = 0;
  const std::int64_t OH = dim(H, kh, &pt), OW = dim(W, kw, &pl);
  *out_shape = {N, OH, OW, M};
  std::vector<double> y(static_cast<std::size_t>(N * OH * OW * M));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow)
        for (std::int64_t m = 0; m < M; ++m) {
          double acc = bias[static_cast<std::size_t>(m)];
          for (std::int64_t r = 0; r < kh; ++r)
            for (std::int64_t s = 0; s < kw; ++s) {
              const std::int64_t ih = oh * stride - pt + r, iw = ow * stride - pl + s;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const double* xp = x.data() + ((n * H + ih) * W + iw) * C;
              if (depthwise) {
                acc += xp[m / (M / C)] * w[static_cast<std::size_t>((r * kw + s) * M + m)];
              } else {
                for (std::int64_t c = 0; c < C; ++c) acc += xp[c] * w[static_cast<std::size_t>(((m * kh + r) * kw + s) * C + c)];
              }
            }
          y[static_cast<std::size_t>(((n * OH + oh) * OW + ow) * M + m)] = acc;
        }
  return y;
}

}  // namespace furiosa::test
