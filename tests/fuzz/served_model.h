// The model the server fuzz targets decode requests against (fuzz_v2_request,
// fuzz_grpc_infer_request): the inputs of the real mnist-12-int8 (FP32 [1, 1, 28, 28]) plus a
// UINT8 [2, 3], so the float and the narrowing integer stores are both reached.
#pragma once

#include <vector>

#include "furiosa/runtime/runner.h"

namespace furiosa::fuzz {

/// The inputs above, then `extra` (e.g. an INT64 input for the gRPC target's int64 contents).
inline std::vector<runtime::TensorDesc> served_model_inputs(
    std::vector<runtime::TensorDesc> extra = {}) {
  std::vector<runtime::TensorDesc> d(2);
  d[0].name = "Input3";
  d[0].dtype = DType::Float32;
  d[0].shape = {1, 1, 28, 28};
  d[1].name = "u8";
  d[1].dtype = DType::UInt8;
  d[1].shape = {2, 3};
  d.insert(d.end(), extra.begin(), extra.end());
  return d;
}

}  // namespace furiosa::fuzz
