// Host operator library: Resize on float32, uint8 and int8, with ONNX Runtime's and TFLite's rules.
// Targeted cases of the host (CPU fallback) operator library for what the ONNX backend node tests
// (test_cpu_ops_onnx_conformance.cpp) do not cover: dtypes, attribute variants of older/newer
// opsets, errors.
#include <cstdint>
#include <string>
#include <vector>

#include "cpu_ops_test_support.h"
#include "furiosa/core/error.h"
#include "furiosa/host/cpu_ops.h"

using namespace furiosa;
using compiler::Attribute;
using compiler::Node;
using namespace furiosa::test::cpu_ops_tests;

TEST_CASE("cpu ops: Resize nearest on uint8 and int8, linear choices", "[compiler][cpu_ops]") {
  // 2x nearest upsampling of a uint8 image (YOLO's Resize), asymmetric + floor (PyTorch export).
  Tensor x = make<std::uint8_t>(DType::UInt8, {1, 1, 2, 2}, {1, 2, 3, 255});
  Tensor scales = f32({4}, {1, 1, 2, 2});
  Node up = make_node("Resize", 3,
                      {{"mode", std::string("nearest")},
                       {"coordinate_transformation_mode", std::string("asymmetric")},
                       {"nearest_mode", std::string("floor")}});
  up.inputs[1] = -1;  // no roi
  Tensor y = run1(up, {&x, nullptr, &scales});
  REQUIRE(y.dtype() == DType::UInt8);
  REQUIRE(y.shape() == Shape{1, 1, 4, 4});
  CHECK(values<std::uint8_t>(y) ==
        std::vector<std::uint8_t>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 255, 255, 3, 3, 255, 255});
  // int8, sizes input, half_pixel + round_prefer_ceil: 3 -> 2 picks source 0.25 -> 0, 1.75 -> 2.
  Tensor xi = make<std::int8_t>(DType::Int8, {3}, {-7, 5, 9});
  Tensor sizes = i64({1}, {2});
  Node down = make_node("Resize", 4, {{"nearest_mode", std::string("round_prefer_ceil")}});
  down.inputs[1] = down.inputs[2] = -1;
  Tensor yi = run1(down, {&xi, nullptr, nullptr, &sizes});
  CHECK(values<std::int8_t>(yi) == std::vector<std::int8_t>{-7, 9});
  // Ties: asymmetric 1 -> 2 with scale 2 gives source 0 and 0.5; round_prefer_floor keeps 0,
  // round_prefer_ceil takes 1.
  Tensor t = f32({2}, {10, 20});
  Tensor s2 = f32({1}, {2});
  Node tie =
      make_node("Resize", 3, {{"coordinate_transformation_mode", std::string("asymmetric")}});
  tie.inputs[1] = -1;
  CHECK(values<float>(run1(tie, {&t, nullptr, &s2})) == std::vector<float>{10, 10, 20, 20});
  tie.attributes["nearest_mode"] = std::string("round_prefer_ceil");
  CHECK(values<float>(run1(tie, {&t, nullptr, &s2})) == std::vector<float>{10, 20, 20, 20});
  // Linear takes float32, uint8 and int8 (not int32); cubic float32 only; both name the mode.
  std::string why;
  CHECK(host::cpu_op_supported(make_node("Resize", 3, {{"mode", std::string("linear")}}),
                               {DType::UInt8, DType::Float32, DType::Float32}, &why));
  CHECK_FALSE(host::cpu_op_supported(make_node("Resize", 3, {{"mode", std::string("linear")}}),
                                     {DType::Int32, DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("linear") && Catch::Contains("int32"));
  CHECK_FALSE(host::cpu_op_supported(make_node("Resize", 3, {{"mode", std::string("cubic")}}),
                                     {DType::UInt8, DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("cubic") && Catch::Contains("uint8"));
  CHECK_FALSE(host::cpu_op_supported(make_node("Resize", 3, {{"mode", std::string("area")}}),
                                     {DType::Float32, DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("area"));
  // The opset-10 form (X, scales): asymmetric coordinates; nearest truncates when upsampling and
  // rounds up when downsampling (ONNX Runtime's rule for it); linear interpolates.
  {
    Tensor row = f32({1, 1, 1, 4}, {1, 2, 3, 4});
    Node r10 = make_node("Resize", 2);
    Tensor up = f32({4}, {1, 1, 1, 1.5f});
    CHECK(values<float>(run1(r10, {&row, &up})) == std::vector<float>{1, 1, 2, 3, 3, 4});
    Tensor down = f32({4}, {1, 1, 1, 0.6f});
    CHECK(values<float>(run1(r10, {&row, &down})) == std::vector<float>{1, 3});
    Node l10 = make_node("Resize", 2, {{"mode", std::string("linear")}});
    Tensor two = f32({4}, {1, 1, 1, 2});
    CHECK(values<float>(run1(l10, {&row, &two})) ==
          std::vector<float>{1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4});
    CHECK_FALSE(host::cpu_op_supported(make_node("Resize", 2, {{"mode", std::string("cubic")}}),
                                       {DType::Float32, DType::Float32}, &why));
    CHECK_THAT(why, Catch::Contains("opset-10"));
  }
  // 3-D linear (trilinear) with the 'axes' attribute (opset 18): only the last two dims resized.
  Tensor v = f32({2, 1, 2}, {0, 2, 4, 6});
  Tensor s3 = f32({2}, {1, 2});
  Node tri = make_node("Resize", 3,
                       {{"mode", std::string("linear")},
                        {"axes", std::vector<std::int64_t>{1, 2}},
                        {"coordinate_transformation_mode", std::string("align_corners")}});
  tri.inputs[1] = -1;
  Tensor yt = run1(tri, {&v, nullptr, &s3});
  REQUIRE(yt.shape() == Shape{2, 1, 4});
  const auto ytv = values<float>(yt);
  const std::vector<float> expect{0, 2.0f / 3, 4.0f / 3, 2, 4, 14.0f / 3, 16.0f / 3, 6};
  for (std::size_t i = 0; i < expect.size(); ++i) CHECK(ytv[i] == Approx(expect[i]));
  // Shape inference needs the scales as a constant.
  host::CpuValueInfo xinfo{DType::Float32, {2, 1, 2}, nullptr}, sinfo{DType::Float32, {2}, nullptr};
  CHECK_THROWS_AS(host::cpu_op_infer(tri, {&xinfo, nullptr, &sinfo}), Error);
  sinfo.constant = &s3;
  CHECK(host::cpu_op_infer(tri, {&xinfo, nullptr, &sinfo}).at(0).second == Shape{2, 1, 4});
}

TEST_CASE("cpu ops: Resize linear on uint8 and int8 follows ONNX Runtime's arithmetic",
          "[compiler][cpu_ops]") {
  // Values worked out by hand from ONNX Runtime's kernels (host/src/ops/resize_ort.cpp,
  // run_ort_linear_q8) and seen from ONNX Runtime 1.30 itself; tests/reference/test_resize_ort.cpp
  // compares whole tensors.
  const auto linear = [](const std::string& coord) {
    Node n = make_node(
        "Resize", 4, {{"mode", std::string("linear")}, {"coordinate_transformation_mode", coord}});
    n.inputs[1] = -1;
    return n;
  };
  // 4-D NCHW with sh != 1: 10-bit weights. [0, 255, 0] to 4 columns with align_corners: source
  // 2/3 has weights (1024 - 682, 682), 682 * 255 / 1024 = 169.8 -> 169; source 4/3 has
  // (683, 341) -> 170.1 -> 170. The rows: 1 -> 2 (sh = 2), both from the one row.
  Node ac = linear("align_corners");
  ac.inputs[2] = -1;
  Tensor xu = make<std::uint8_t>(DType::UInt8, {1, 1, 1, 3}, {0, 255, 0});
  Tensor to_2x4 = i64({4}, {1, 1, 2, 4});
  Tensor yu = run1(ac, {&xu, nullptr, nullptr, &to_2x4});
  REQUIRE(yu.shape() == Shape{1, 1, 2, 4});
  CHECK(values<std::uint8_t>(yu) == std::vector<std::uint8_t>{0, 169, 170, 0, 0, 169, 170, 0});
  // The same row as 2-D X: float32 weights, 0.6666667 * 255 = 170.0 and 0.3333333 * 255 just
  // below 85 (twice), 169.99998 -> 169.
  Tensor x2 = make<std::uint8_t>(DType::UInt8, {1, 3}, {0, 255, 0});
  Tensor to_1x4 = i64({2}, {1, 4});
  CHECK(values<std::uint8_t>(run1(ac, {&x2, nullptr, nullptr, &to_1x4})) ==
        std::vector<std::uint8_t>{0, 170, 169, 0});
  // 4-D NCHW with sh = 1: the float path, as ONNX Runtime runs it on the NHWC tensor.
  Tensor to_1x4_4d = i64({4}, {1, 1, 1, 4});
  CHECK(values<std::uint8_t>(run1(ac, {&xu, nullptr, nullptr, &to_1x4_4d})) ==
        std::vector<std::uint8_t>{0, 170, 169, 0});
  // Truncation toward zero: uint8 (200 + 255) / 2 = 227.5 -> 227 (integer path); int8
  // (-3 + 0) / 2 = -1.5 -> -1 (float path, sh = 1).
  Node as = linear("asymmetric");
  Tensor x2x2 = make<std::uint8_t>(DType::UInt8, {1, 1, 2, 2}, {0, 100, 200, 255});
  Tensor sc = f32({4}, {1, 1, 1.5f, 2});
  Tensor y3 = run1(as, {&x2x2, nullptr, &sc});
  REQUIRE(y3.shape() == Shape{1, 1, 3, 4});
  // Rows from sources 0, 2/3 (weights 342 and 682 of 1024: 682 * 200 / 1024 = 133.2 -> 133) and
  // 4/3, clamped to 1; columns from 0, 1/2, 1, 3/2 (clamped to 1).
  CHECK(values<std::uint8_t>(y3) ==
        std::vector<std::uint8_t>{0, 50, 100, 100, 133, 168, 203, 203, 200, 227, 255, 255});
  Tensor xs8 = make<std::int8_t>(DType::Int8, {1, 1, 2, 2}, {-3, 0, 127, -128});
  Tensor s12 = f32({4}, {1, 1, 1, 2});
  CHECK(values<std::int8_t>(run1(as, {&xs8, nullptr, &s12})) ==
        std::vector<std::int8_t>{-3, -1, 0, 0, 127, 0, -128, -128});
  // Output size from scales: ONNX Runtime's float32 product, 0.7f * 10 = 7 (the spec's floor of
  // the exact product gives 6), on float32 X too: models are made for ORT.
  Tensor x10 = Tensor(DType::UInt8, {1, 1, 1, 10});
  Tensor s07 = f32({4}, {1, 1, 1, 0.7f});
  CHECK(run1(as, {&x10, nullptr, &s07}).shape() == Shape{1, 1, 1, 7});
  Tensor f10 = Tensor(DType::Float32, {1, 1, 1, 10});
  CHECK(run1(as, {&f10, nullptr, &s07}).shape() == Shape{1, 1, 1, 7});
  // Refused: other coordinate modes, cubic, ranks and scale patterns ONNX Runtime has no rule for.
  std::string why;
  CHECK_FALSE(host::cpu_op_supported(linear("tf_crop_and_resize"),
                                     {DType::UInt8, DType::Float32, DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("tf_crop_and_resize") && Catch::Contains("uint8"));
  Tensor x1 = make<std::uint8_t>(DType::UInt8, {2}, {1, 2});
  Tensor s1 = f32({1}, {2});
  CHECK_THROWS_WITH(run1(as, {&x1, nullptr, &s1}), Catch::Contains("rank 1"));
  Tensor s_nc = f32({4}, {1, 2, 2, 2});
  CHECK_THROWS_WITH(run1(as, {&x2x2, nullptr, &s_nc}), Catch::Contains("rank 4"));
}

TEST_CASE("cpu ops: Resize with tflite_arithmetic follows TFLite's reference resize kernels",
          "[compiler][cpu_ops]") {
  // [1, C=1, H, W=1] with axes [2, 3]: a column of two values resized to four rows. Expected
  // values worked out by hand from reference_ops::ResizeBilinear<T> / ResizeBilinearInteger /
  // GetNearestNeighbor (tensorflow/lite/kernels/internal/reference).
  auto node = [](const std::string& mode, const std::string& coord) {
    Node n = make_node("Resize", 4,
                       {{"mode", mode},
                        {"coordinate_transformation_mode", coord},
                        {"axes", std::vector<std::int64_t>{2, 3}},
                        {"tflite_arithmetic", std::int64_t{1}}});
    n.inputs[1] = n.inputs[2] = -1;
    return n;
  };
  Tensor xu = make<std::uint8_t>(DType::UInt8, {1, 1, 2, 1}, {10, 21});
  Tensor xs = make<std::int8_t>(DType::Int8, {1, 1, 2, 1}, {10, 21});
  Tensor xf = f32({1, 1, 2, 1}, {10, 21});
  Tensor sizes = i64({2}, {4, 1});
  // asymmetric: sources 0, 0.5, 1, 1.5 (the last clamped to row 1). uint8 adds the generic
  // kernel's rounding_offset 0.5 before static_cast: 15.5 -> 16; the int8 kernel rounds it half
  // away from zero to 16; float32 keeps 15.5.
  const Node asym = node("linear", "asymmetric");
  CHECK(values<std::uint8_t>(run1(asym, {&xu, nullptr, nullptr, &sizes})) ==
        std::vector<std::uint8_t>{10, 16, 21, 21});
  CHECK(values<std::int8_t>(run1(asym, {&xs, nullptr, nullptr, &sizes})) ==
        std::vector<std::int8_t>{10, 16, 21, 21});
  CHECK(values<float>(run1(asym, {&xf, nullptr, nullptr, &sizes})) ==
        std::vector<float>{10, 15.5f, 21, 21});
  // half_pixel_centers: sources -0.25 (row 0 with weights 1.25 and -0.25 on the same row), 0.25,
  // 0.75, 1.25: 10, 12.75 -> 13, 18.25 -> 18, 21 (rounded: truncation of value + 0.5).
  CHECK(values<std::uint8_t>(run1(node("linear", "half_pixel"), {&xu, nullptr, nullptr, &sizes})) ==
        std::vector<std::uint8_t>{10, 13, 18, 21});
  // align_corners: scale 1/3: 10, 13.67 -> 14, 17.33 -> 17, 21.
  CHECK(values<std::uint8_t>(
            run1(node("linear", "align_corners"), {&xu, nullptr, nullptr, &sizes})) ==
        std::vector<std::uint8_t>{10, 14, 17, 21});
  // Nearest, 3 rows -> 2: asymmetric floor(0, 1.5) = rows 0, 1; align_corners round(0, 2) = 0, 2;
  // half_pixel_centers floor(0.75, 2.25) = 0, 2.
  Tensor x3 = make<std::uint8_t>(DType::UInt8, {1, 1, 3, 1}, {10, 21, 32});
  Tensor s2 = i64({2}, {2, 1});
  CHECK(values<std::uint8_t>(run1(node("nearest", "asymmetric"), {&x3, nullptr, nullptr, &s2})) ==
        std::vector<std::uint8_t>{10, 21});
  CHECK(
      values<std::uint8_t>(run1(node("nearest", "align_corners"), {&x3, nullptr, nullptr, &s2})) ==
      std::vector<std::uint8_t>{10, 32});
  CHECK(values<std::uint8_t>(
            run1(node("nearest", "tf_half_pixel_for_nn"), {&x3, nullptr, nullptr, &s2})) ==
        std::vector<std::uint8_t>{10, 32});
  // 2-D: [1, 1, 2, 2] -> [1, 1, 3, 3] align_corners; the centre is the mean of the four corners
  // (0 + 10 + 20 + 31) / 4 = 15.25 -> 15; edge midpoints 5, 25.5 -> 26, 10, 20.5 -> 21.
  Tensor q = make<std::uint8_t>(DType::UInt8, {1, 1, 2, 2}, {0, 10, 20, 31});
  Tensor s33 = i64({2}, {3, 3});
  CHECK(values<std::uint8_t>(run1(node("linear", "align_corners"), {&q, nullptr, nullptr, &s33})) ==
        std::vector<std::uint8_t>{0, 5, 10, 10, 15, 21, 20, 26, 31});
  // The checker names what is wrong: a missing 'axes', a mode TFLite has no flag for.
  std::string why;
  Node no_axes = asym;
  no_axes.attributes.erase("axes");
  CHECK_FALSE(host::cpu_op_supported(
      no_axes, {DType::UInt8, DType::Float32, DType::Float32, DType::Int64}, &why));
  CHECK_THAT(why, Catch::Contains("axes"));
  CHECK_FALSE(host::cpu_op_supported(node("linear", "pytorch_half_pixel"),
                                     {DType::UInt8, DType::Float32, DType::Float32, DType::Int64},
                                     &why));
  CHECK_THAT(why, Catch::Contains("pytorch_half_pixel"));
  CHECK_FALSE(host::cpu_op_supported(
      asym, {DType::Int32, DType::Float32, DType::Float32, DType::Int64}, &why));
  CHECK_THAT(why, Catch::Contains("int32"));
}
