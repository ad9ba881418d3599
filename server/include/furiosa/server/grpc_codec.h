// The Open Inference Protocol over gRPC (KServe v2 `GRPCInferenceService`,
// proto/grpc_predict_v2.proto): ModelInferRequest -> the runtime's input tensors, and output
// tensors -> ModelInferResponse. Transport-free (protobuf messages only, no gRPC), so the fuzz tree
// (tests/fuzz) links it. Protocol text: ../shared/protocols/kserve-v2/ (grpc_predict_v2.proto,
// "Tensor Data" of the prose spec: `contents` typed fields or `raw_input_contents`, one per input,
// never both).
#pragma once

#include <cstddef>
#include <vector>

#include "furiosa/core/tensor.h"
#include "furiosa/runtime/runner.h"
#include "grpc_predict_v2.pb.h"

namespace furiosa::server {

/// The model's inputs from `request`, in `model_inputs` order, each checked against its
/// description (name known and given once, datatype, shape, element count; integer contents in
/// the dtype's range). Throws Error(InvalidInput) naming the tensor and the problem, e.g.
/// "input 'x': shape [1, 3] given, the model expects [1, 4]". Thread-safe (no shared state).
std::vector<Tensor> decode_grpc_inputs(const inference::ModelInferRequest& request,
                                       const std::vector<runtime::TensorDesc>& model_inputs);

/// Indexes into `outputs` of the outputs `request` asks for, in request order (every output, in
/// model order, when it names none). Throws Error(InvalidInput) naming an unknown output.
std::vector<std::size_t> chosen_grpc_outputs(const inference::ModelInferRequest& request,
                                             const std::vector<runtime::TensorDesc>& outputs);

/// Appends the outputs `chosen` (indexes into `descs` and `outputs`) to `response`: name,
/// datatype, shape, and the data as `raw_output_contents` when `raw` (the client sent raw
/// inputs), else in the typed `contents` field of the dtype.
void encode_grpc_outputs(const std::vector<runtime::TensorDesc>& descs,
                         const std::vector<std::size_t>& chosen, bool raw,
                         const std::vector<Tensor>& outputs,
                         inference::ModelInferResponse& response);

}  // namespace furiosa::server
