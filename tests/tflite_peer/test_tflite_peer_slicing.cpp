// TFLite SLICE, PADV2, MIRROR_PAD, RELU6, RELU_N1_TO_1, SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND
// against the TFLite peer (TensorFlow Lite 2.14's reference kernels, tflite_peer.h): small models
// written with tflite_writer.h, uint8 and int8, seeded random inputs (every input value once for
// the activations), outputs compared bit-exactly, and the placement of each operator checked in
// the compiled model's report.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_peer.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fb = furiosa::tflite_fb;
using test::QSpec;
using test::TfliteWriter;

namespace {

using Dims = std::vector<std::int32_t>;

constexpr int kReluN1To1 = 20, kRelu6 = 21, kPadV2 = 60, kSlice = 65, kMirrorPad = 100;

fb::TensorType tflite_type(DType d) {
  return d == DType::UInt8 ? fb::TensorType::UINT8 : fb::TensorType::INT8;
}
const char* type_tag(DType d) { return d == DType::UInt8 ? "uint8" : "int8"; }
int type_min(DType d) { return d == DType::UInt8 ? 0 : -128; }
int type_max(DType d) { return d == DType::UInt8 ? 255 : 127; }
Shape to_shape(const Dims& d) { return Shape(d.begin(), d.end()); }

struct Run {
  std::unique_ptr<runtime::Runner> runner;
  std::vector<Tensor> ours, peer;
  double worst = 0;
};

Run run_with_peer(const std::string& name, const std::string& bytes,
                  const std::vector<Tensor>& inputs) {
  const auto path = test::write_peer_model(name + ".tflite", bytes);
  Run r;
  r.runner = runtime::create_runner(path, test::peer_runner_options());
  r.ours = r.runner->run(inputs);
  r.peer = test::run_tflite_peer(path, inputs, r.ours);
  for (std::size_t i = 0; i < r.ours.size(); ++i)
    r.worst = std::max(r.worst, test::worst_difference(r.ours[i], r.peer[i]));
  fmt::print("tflite peer: {}: worst difference {} step(s)\n", name, r.worst);
  return r;
}

void require_placement(const runtime::Runner& runner, const std::string& op,
                       const std::string& where) {
  const auto p = test::placements(runner, op);
  INFO(op << " placements: " << fmt::format("{}", fmt::join(p, ", ")));
  REQUIRE(!p.empty());
  for (const auto& e : p) CHECK(e == where);
}

Tensor random_input(DType d, const Dims& shape, unsigned seed) {
  return test::seeded_ints(d, to_shape(shape), type_min(d), type_max(d), seed);
}

/// [rank, 2] int32 paddings as a constant tensor of `w`.
int paddings_tensor(TfliteWriter& w, const std::vector<std::array<std::int32_t, 2>>& pads,
                    std::vector<std::uint8_t>& storage) {
  std::vector<std::int32_t> flat;
  for (const auto& p : pads) flat.insert(flat.end(), p.begin(), p.end());
  storage = test::raw_bytes(flat);
  return w.tensor("paddings", fb::TensorType::INT32, {static_cast<std::int32_t>(pads.size()), 2},
                  nullptr, &storage);
}

Dims padded(const Dims& in, const std::vector<std::array<std::int32_t, 2>>& pads) {
  Dims out = in;
  for (std::size_t i = 0; i < in.size(); ++i) out[i] += pads[i][0] + pads[i][1];
  return out;
}

}  // namespace

TEST_CASE("TFLite peer: SLICE with constant begin and size (size -1 to the end), uint8 and int8",
          "[tflite_peer]") {
  struct Case {
    Dims in, begin, size;
  };
  const std::vector<Case> cases = {{{1, 6, 7, 5}, {0, 1, 2, 0}, {1, 4, -1, 3}},
                                   {{5, 7}, {2, 0}, {3, -1}},
                                   {{2, 3, 4}, {1, 0, 1}, {1, 3, 2}},
                                   {{4, 9}, {0, 0}, {-1, -1}}};
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const std::string name = fmt::format("slice{}_{}", k, type_tag(d));
      INFO(name);
      const QSpec q{{0.05f}, {d == DType::UInt8 ? 128 : 0}};
      Dims out;
      for (std::size_t i = 0; i < c.in.size(); ++i)
        out.push_back(c.size[i] == -1 ? c.in[i] - c.begin[i] : c.size[i]);
      TfliteWriter w;
      const auto begin_bytes = test::raw_bytes(c.begin), size_bytes = test::raw_bytes(c.size);
      const auto rank = static_cast<std::int32_t>(c.in.size());
      const int x = w.tensor("x", tflite_type(d), c.in, &q);
      const int b = w.tensor("begin", fb::TensorType::INT32, {rank}, nullptr, &begin_bytes);
      const int s = w.tensor("size", fb::TensorType::INT32, {rank}, nullptr, &size_bytes);
      const int y = w.tensor("y", tflite_type(d), out, &q);
      w.op(kSlice, {x, b, s}, {y});
      const auto r = run_with_peer(name, w.finish({x}, {y}), {random_input(d, c.in, 51)});
      CHECK(r.worst == 0);
      CHECK(test::distinct(r.ours[0]) > 4);
      require_placement(*r.runner, k == 3 ? "Identity" : "Slice", "npu");
    }
  }
}

TEST_CASE(
    "TFLite peer: PADV2 with a constant quantized pad value (and without one), uint8 and int8",
    "[tflite_peer]") {
  using Pads = std::vector<std::array<std::int32_t, 2>>;
  struct Case {
    Dims in;
    Pads pads;
    bool with_value;
  };
  const std::vector<Case> cases = {{{1, 4, 5, 3}, {{{0, 0}, {1, 2}, {2, 1}, {0, 1}}}, true},
                                   {{3, 6}, {{{2, 0}, {1, 3}}}, true},
                                   {{1, 4, 5, 3}, {{{0, 0}, {1, 1}, {0, 2}, {0, 0}}}, false}};
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const std::string name = fmt::format("padv2_{}_{}", k, type_tag(d));
      INFO(name);
      const QSpec q{{0.05f}, {d == DType::UInt8 ? 120 : -7}};
      TfliteWriter w;
      std::vector<std::uint8_t> pad_bytes;
      const std::vector<std::uint8_t> value_bytes = {
          static_cast<std::uint8_t>(d == DType::UInt8 ? 201 : -100)};
      const int x = w.tensor("x", tflite_type(d), c.in, &q);
      const int p = paddings_tensor(w, c.pads, pad_bytes);
      const int y = w.tensor("y", tflite_type(d), padded(c.in, c.pads), &q);
      if (c.with_value) {
        const int v = w.tensor("value", tflite_type(d), {}, &q, &value_bytes);
        w.op(kPadV2, {x, p, v}, {y});
      } else {
        w.op(kPadV2, {x, p}, {y});
      }
      const auto r = run_with_peer(name, w.finish({x}, {y}), {random_input(d, c.in, 61)});
      CHECK(r.worst == 0);
      CHECK(test::distinct(r.ours[0]) > 10);
      require_placement(*r.runner, "Concat", "npu");
    }
  }
}

TEST_CASE("TFLite peer: MIRROR_PAD, REFLECT and SYMMETRIC, uint8 and int8, on the host",
          "[tflite_peer]") {
  using Pads = std::vector<std::array<std::int32_t, 2>>;
  struct Case {
    Dims in;
    Pads pads;
  };
  const std::vector<Case> cases = {{{1, 5, 6, 3}, {{{0, 0}, {2, 1}, {1, 3}, {0, 0}}}},
                                   {{4, 7}, {{{3, 2}, {0, 6}}}},
                                   {{2, 3, 4}, {{{1, 1}, {2, 0}, {0, 1}}}}};
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (const auto mode : {fb::MirrorPadMode::REFLECT, fb::MirrorPadMode::SYMMETRIC}) {
      for (std::size_t k = 0; k < cases.size(); ++k) {
        const Case& c = cases[k];
        const bool symmetric = mode == fb::MirrorPadMode::SYMMETRIC;
        const std::string name =
            fmt::format("mirror_pad_{}{}_{}", symmetric ? "symmetric" : "reflect", k, type_tag(d));
        INFO(name);
        const QSpec q{{0.05f}, {d == DType::UInt8 ? 128 : 0}};
        TfliteWriter w;
        std::vector<std::uint8_t> pad_bytes;
        const int x = w.tensor("x", tflite_type(d), c.in, &q);
        const int p = paddings_tensor(w, c.pads, pad_bytes);
        const int y = w.tensor("y", tflite_type(d), padded(c.in, c.pads), &q);
        w.op(kMirrorPad, {x, p}, {y}, fb::BuiltinOptions::MirrorPadOptions,
             fb::CreateMirrorPadOptions(w.builder(), mode).Union());
        const auto r = run_with_peer(name, w.finish({x}, {y}), {random_input(d, c.in, 71)});
        CHECK(r.worst == 0);
        CHECK(test::distinct(r.ours[0]) > 10);
        require_placement(*r.runner, "Gather", "fallback");
      }
    }
  }
}

TEST_CASE("TFLite peer: RELU6 and RELU_N1_TO_1 as 256-entry tables on the NPU, uint8 and int8",
          "[tflite_peer]") {
  struct Case {
    const char* name;
    int code;
    float in_scale;
    int in_zp;
    float out_scale;
    int out_zp;  ///< relative to the type's middle (128 uint8, 0 int8)
  };
  const std::vector<Case> cases = {{"relu6_rescaled", kRelu6, 0.0625f, 9, 0.025f, -118},
                                   {"relu6_same", kRelu6, 0.04f, -100, 0.04f, -100},
                                   {"relu6_wide", kRelu6, 0.01f, 20, 0.05f, 3},
                                   {"relu_n1_to_1_rescaled", kReluN1To1, 0.02f, -5, 1.0f / 127, 0},
                                   {"relu_n1_to_1_same", kReluN1To1, 0.011f, 17, 0.011f, 17}};
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (const Case& c : cases) {
      const std::string name = fmt::format("{}_{}", c.name, type_tag(d));
      INFO(name);
      const int mid = d == DType::UInt8 ? 128 : 0;
      const QSpec qx{{c.in_scale}, {mid + c.in_zp}}, qy{{c.out_scale}, {mid + c.out_zp}};
      TfliteWriter w;
      const int x = w.tensor("x", tflite_type(d), {1, 16, 16, 1}, &qx);
      const int y = w.tensor("y", tflite_type(d), {1, 16, 16, 1}, &qy);
      w.op(c.code, {x}, {y});
      Tensor in(d, {1, 16, 16, 1});
      for (std::size_t i = 0; i < 256; ++i)
        std::memcpy(in.bytes().data() + i, &i, 1);  // every byte once
      const auto r = run_with_peer(name, w.finish({x}, {y}), {in});
      CHECK(r.worst == 0);
      CHECK(test::distinct(r.ours[0]) > 20);
      require_placement(*r.runner, "furiosa::Requantize", "npu");
    }
  }
}

TEST_CASE(
    "TFLite peer: SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND with constant blocks, paddings and "
    "crops, uint8 and "
    "int8, on the NPU",
    "[tflite_peer]") {
  constexpr int kBatchToSpaceNd = 37, kSpaceToBatchNd = 38;
  struct Case {
    int code;
    Dims in, block, pads;  ///< pads: [top, bottom, left, right] paddings or crops
  };
  const std::vector<Case> cases = {{kSpaceToBatchNd, {1, 4, 6, 3}, {2, 2}, {0, 0, 0, 0}},
                                   {kSpaceToBatchNd, {2, 5, 4, 2}, {2, 3}, {1, 0, 1, 1}},
                                   {kSpaceToBatchNd, {1, 3, 3, 1}, {2, 2}, {1, 0, 0, 1}},
                                   {kBatchToSpaceNd, {4, 3, 2, 3}, {2, 2}, {0, 0, 0, 0}},
                                   {kBatchToSpaceNd, {12, 3, 2, 2}, {2, 3}, {1, 0, 1, 1}},
                                   {kBatchToSpaceNd, {4, 2, 3, 1}, {2, 2}, {0, 1, 1, 1}}};
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const bool to_batch = c.code == kSpaceToBatchNd;
      const std::string name =
          fmt::format("{}{}_{}", to_batch ? "space_to_batch" : "batch_to_space", k, type_tag(d));
      INFO(name);
      const QSpec q{{0.05f}, {d == DType::UInt8 ? 133 : 5}};
      const std::int32_t bh = c.block[0], bw = c.block[1];
      Dims out;
      if (to_batch) {
        out = {c.in[0] * bh * bw, (c.in[1] + c.pads[0] + c.pads[1]) / bh,
               (c.in[2] + c.pads[2] + c.pads[3]) / bw, c.in[3]};
      } else {
        out = {c.in[0] / (bh * bw), c.in[1] * bh - c.pads[0] - c.pads[1],
               c.in[2] * bw - c.pads[2] - c.pads[3], c.in[3]};
      }
      TfliteWriter w;
      const auto block_bytes = test::raw_bytes(c.block), pad_bytes = test::raw_bytes(c.pads);
      const int x = w.tensor("x", tflite_type(d), c.in, &q);
      const int b = w.tensor("block_shape", fb::TensorType::INT32, {2}, nullptr, &block_bytes);
      const int p = w.tensor(to_batch ? "paddings" : "crops", fb::TensorType::INT32, {2, 2},
                             nullptr, &pad_bytes);
      const int y = w.tensor("y", tflite_type(d), out, &q);
      w.op(c.code, {x, b, p}, {y});
      const auto r = run_with_peer(name, w.finish({x}, {y}), {random_input(d, c.in, 111)});
      CHECK(r.worst == 0);
      CHECK(test::distinct(r.ours[0]) > 4);
      require_placement(*r.runner, "Transpose", "npu");
    }
  }
}

TEST_CASE(
    "TFLite: refusals of SLICE, PADV2, MIRROR_PAD and SPACE_TO_BATCH_ND are one line naming the "
    "operator",
    "[tflite_peer][errors]") {
  auto refused = [](const std::string& bytes, const std::string& name) -> std::string {
    try {
      (void)runtime::create_runner(test::write_peer_model(name, bytes),
                                   test::peer_runner_options());
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find_first_of("\n\x1b") == std::string::npos);
      return e.message();
    }
    FAIL(name << " was accepted");
    return {};
  };
  const QSpec q{{0.05f}, {128}};
  {  // SLICE with a computed size; a hostile tensor name comes back escaped
    TfliteWriter w;
    const auto begin_bytes = test::raw_bytes(Dims{0, 0});
    const int x = w.tensor("x", fb::TensorType::UINT8, {4, 3}, &q);
    const int b = w.tensor("begin", fb::TensorType::INT32, {2}, nullptr, &begin_bytes);
    const int s = w.tensor("size\n\x1b[2J", fb::TensorType::INT32, {2});
    const int y = w.tensor("y", fb::TensorType::UINT8, {2, 3}, &q);
    w.op(kSlice, {x, b, s}, {y});
    const std::string msg = refused(w.finish({x, s}, {y}), "slice_dynamic.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (SLICE)") &&
                        Catch::Contains("'size\\x0a\\x1b[2J' must be constant"));
  }
  {  // SLICE past the end of a dim
    TfliteWriter w;
    const auto begin_bytes = test::raw_bytes(Dims{3, 0}), size_bytes = test::raw_bytes(Dims{2, -1});
    const int x = w.tensor("x", fb::TensorType::UINT8, {4, 3}, &q);
    const int b = w.tensor("begin", fb::TensorType::INT32, {2}, nullptr, &begin_bytes);
    const int s = w.tensor("size", fb::TensorType::INT32, {2}, nullptr, &size_bytes);
    const int y = w.tensor("y", fb::TensorType::UINT8, {2, 3}, &q);
    w.op(kSlice, {x, b, s}, {y});
    const std::string msg = refused(w.finish({x}, {y}), "slice_outside.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (SLICE)") &&
                        Catch::Contains("begin 3 and size 2 of dim 0"));
  }
  {  // PADV2 whose constant_values has other parameters than the output
    TfliteWriter w;
    std::vector<std::uint8_t> pad_bytes;
    const std::vector<std::uint8_t> value_bytes = {7};
    const QSpec qv{{0.1f}, {128}};
    const int x = w.tensor("x", fb::TensorType::UINT8, {2, 3}, &q);
    const int p = paddings_tensor(w, {{{1, 0}, {0, 1}}}, pad_bytes);
    const int v = w.tensor("value", fb::TensorType::UINT8, {}, &qv, &value_bytes);
    const int y = w.tensor("y", fb::TensorType::UINT8, {3, 4}, &q);
    w.op(kPadV2, {x, p, v}, {y});
    const std::string msg = refused(w.finish({x}, {y}), "padv2_value_params.tflite");
    CHECK_THAT(msg,
               Catch::Contains("operator 0 (PADV2)") &&
                   Catch::Contains(
                       "constant_values 'value' must share the output's quantization parameters"));
  }
  {  // REFLECT MIRROR_PAD by a whole dim
    TfliteWriter w;
    std::vector<std::uint8_t> pad_bytes;
    const int x = w.tensor("x", fb::TensorType::UINT8, {2, 3}, &q);
    const int p = paddings_tensor(w, {{{0, 0}, {3, 0}}}, pad_bytes);
    const int y = w.tensor("y", fb::TensorType::UINT8, {2, 6}, &q);
    w.op(kMirrorPad, {x, p}, {y}, fb::BuiltinOptions::MirrorPadOptions,
         fb::CreateMirrorPadOptions(w.builder(), fb::MirrorPadMode::REFLECT).Union());
    const std::string msg = refused(w.finish({x}, {y}), "mirror_pad_too_far.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (MIRROR_PAD)") &&
                        Catch::Contains("padding 3 of dim 1 must be in [0, 2] for REFLECT"));
  }
  {  // SPACE_TO_BATCH_ND on a 3-D tensor
    TfliteWriter w;
    const auto block_bytes = test::raw_bytes(Dims{2}), pad_bytes = test::raw_bytes(Dims{0, 0});
    const int x = w.tensor("x", fb::TensorType::UINT8, {1, 4, 3}, &q);
    const int b = w.tensor("block_shape", fb::TensorType::INT32, {1}, nullptr, &block_bytes);
    const int p = w.tensor("paddings", fb::TensorType::INT32, {1, 2}, nullptr, &pad_bytes);
    const int y = w.tensor("y", fb::TensorType::UINT8, {2, 2, 3}, &q);
    w.op(38, {x, b, p}, {y});
    const std::string msg = refused(w.finish({x}, {y}), "space_to_batch_3d.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (SPACE_TO_BATCH_ND)") &&
                        Catch::Contains("must be 4-D (NHWC)"));
  }
}
