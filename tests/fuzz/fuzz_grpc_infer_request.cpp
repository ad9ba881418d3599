// libFuzzer target: what furiosa-serve's gRPC front end reads from a ModelInfer call before any
// model runs (issue 30). The bytes are parsed as an inference.ModelInferRequest (protobuf's
// parser, as gRPC hands the message over) and decoded into the runtime's tensors against a
// model with the inputs of the real mnist-12-int8 (FP32 [1, 1, 28, 28]) plus UINT8 [2, 3] and
// INT64 [3], so the float, narrowing-integer and raw paths are all reached; the outputs it asks
// for are chosen and the decoded inputs encoded back as a response, both ways (typed contents
// and raw). A refusal must be a furiosa::Error; a crash, a sanitizer report or a hang is a
// finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/server/grpc_codec.h"
#include "served_model.h"

namespace {

const std::vector<furiosa::runtime::TensorDesc>& model_inputs() {
  static const std::vector<furiosa::runtime::TensorDesc> inputs = [] {
    furiosa::runtime::TensorDesc i64;
    i64.name = "i64";
    i64.dtype = furiosa::DType::Int64;
    i64.shape = {3};
    return furiosa::fuzz::served_model_inputs({i64});
  }();
  return inputs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  try {
    const auto inputs = furiosa::server::decode_grpc_inputs(request, model_inputs());
    // The model's outputs are its inputs here: every chosen one is encoded both ways.
    const auto chosen = furiosa::server::chosen_grpc_outputs(request, model_inputs());
    for (const bool raw : {false, true}) {
      inference::ModelInferResponse response;
      furiosa::server::encode_grpc_outputs(model_inputs(), chosen, raw, inputs, response);
      if (response.outputs_size() != static_cast<int>(chosen.size())) __builtin_trap();
    }
  } catch (const furiosa::Error&) {
  }
  return 0;
}
