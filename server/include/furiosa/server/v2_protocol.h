// The Open Inference Protocol (KServe v2) over HTTP/REST: JSON inference requests and responses
// with the binary tensor data extension (Triton's `binary_tensor_data`), converted to and from the
// runtime's tensors. Protocol text: ../shared/protocols/kserve-v2/required_api.md ("Inference
// Request JSON Object", "Tensor Data Types") and rest_predict_v2.yaml.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/core/tensor.h"
#include "furiosa/runtime/runner.h"

namespace furiosa::server {

/// The protocol's datatype name of a runtime dtype ("FP32", "UINT8", "INT8", "INT32", "INT64";
/// required_api.md "Tensor Data Types").
std::string_view v2_datatype(DType dtype) noexcept;
/// The runtime dtype of a protocol datatype name, or nullopt for one the runtime does not have
/// (BOOL, FP16, BYTES, ...).
std::optional<DType> dtype_of_v2(std::string_view datatype) noexcept;

/// A decoded inference request: the inputs in model order (validated against the model's
/// descriptions) and what the client asked of the outputs.
struct InferRequest {
  std::string id;                      ///< the request's "id", echoed in the response ("" if none)
  std::vector<Tensor> inputs;          ///< in model().inputs order
  std::vector<std::string> outputs;    ///< requested output names, in request order; empty = all
  /// Output name -> binary_data requested for it (absent: the request-level default).
  std::vector<std::pair<std::string, bool>> binary_outputs;
  bool binary_data_output = false;     ///< request parameters.binary_data_output
  /// Request parameters.timeout_us: the request's deadline, microseconds after it was received
  /// (> 0); nullopt = none, and the server treats a year or more as none. Past it the request
  /// is answered 504 instead of being submitted.
  std::optional<std::int64_t> timeout_us;
};

/// Decodes the body of POST .../infer for a model with inputs `model_inputs`. `header_length` is
/// the Inference-Header-Content-Length header when present: the JSON is the first header_length
/// bytes and the binary tensor data follows, in the order of the inputs that declare
/// parameters.binary_data_size. JSON "data" may be flat or nested (row-major), of numbers.
/// Throws Error(InvalidInput) naming the tensor (unknown or missing input, datatype or shape
/// different from the model's, element count or byte size not matching the shape, non-numeric
/// data) or the problem (malformed JSON, header length beyond the body, trailing binary bytes).
InferRequest decode_infer_request(std::string_view body, std::optional<std::size_t> header_length,
                                  const std::vector<runtime::TensorDesc>& model_inputs);

/// An encoded response body: JSON alone, or JSON followed by binary output data (then
/// `header_length` is the JSON's size, for the Inference-Header-Content-Length header).
struct EncodedResponse {
  std::string body;
  std::optional<std::size_t> header_length;
};

/// Encodes the response to `request` from the model's outputs (`outputs` in model_outputs
/// order): the requested outputs (all when none were named), each as JSON "data" or, when binary
/// data was asked for it, as binary with parameters.binary_data_size. Throws
/// Error(InvalidInput) naming an unknown requested output.
EncodedResponse encode_infer_response(const std::string& model_name, const std::string& model_version,
                                      const InferRequest& request,
                                      const std::vector<runtime::TensorDesc>& model_outputs,
                                      const std::vector<Tensor>& outputs);

/// The model metadata object (required_api.md "Model Metadata Response JSON Object") as JSON text.
std::string model_metadata_json(const std::string& name, const std::vector<std::string>& versions,
                                const std::string& platform, const runtime::Model& model);

/// {"error": message} as JSON text (the protocol's error object).
std::string error_json(std::string_view message);

}  // namespace furiosa::server
