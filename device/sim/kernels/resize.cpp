// LowLevelResize: nearest upsampling by whole factors as a block copy, and the bilinear modes
// (TfliteBilinear, OnnxLinear) on the host operator library's Resize.
#include "kernel_common.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "furiosa/host/cpu_ops.h"

namespace furiosa::device::sim::detail {

namespace {

// LowLevelResize, modes TfliteBilinear and OnnxLinear: the input gathered into a dense NCHW
// tensor, resized by the host operator library's Resize on the equivalent node (the one
// arithmetic of each mode in the project), the result copied into the output's layout.
void resize_on_host_arithmetic(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::ResizeParams>(kernel);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = at(region, yref);
  if (xref.dtype != DType::UInt8 && xref.dtype != DType::Int8) {
    fault("bilinear resize takes uint8 or int8, {} is {}", describe("input 0", xref),
          dtype_name(xref.dtype));
  }
  if (xref.shape.size() != 4 || yref.shape.size() != 4 || yref.shape[0] != xref.shape[0] ||
      yref.shape[1] != xref.shape[1]) {
    fault("{} and {} must be 4-D with equal N and C", describe("input 0", xref),
          describe("output 0", yref));
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::size_t esize = dtype_size(xref.dtype);
  Tensor x(xref.dtype, xref.shape);
  copy_block(reinterpret_cast<std::byte*>(x.bytes().data()), xptr,
             Block{xref.shape, contiguous_strides(xref.shape), layout_strides(xref)}, esize);
  host::OpNode node;
  node.name = kernel.node_name;
  node.op_type = "Resize";
  node.outputs = {0};
  node.attributes["mode"] = std::string("linear");
  Tensor sizes(DType::Int64, {4});
  Tensor scales(DType::Float32, {4});
  std::vector<const Tensor*> inputs{&x, nullptr, nullptr, &sizes};
  if (p.mode == isa::ResizeParams::Mode::TfliteBilinear) {
    node.attributes["tflite_arithmetic"] = std::int64_t{1};
    node.attributes["axes"] = std::vector<std::int64_t>{2, 3};
    node.attributes["coordinate_transformation_mode"] =
        std::string(p.align_corners        ? "align_corners"
                    : p.half_pixel_centers ? "half_pixel"
                                           : "asymmetric");
    sizes = Tensor(DType::Int64, {2});
    sizes.as<std::int64_t>()[0] = yref.shape[2];
    sizes.as<std::int64_t>()[1] = yref.shape[3];
  } else {
    node.attributes["coordinate_transformation_mode"] = p.coordinate_transformation_mode;
    if (p.scales) {
      const float values[4] = {1.0f, 1.0f, (*p.scales)[0], (*p.scales)[1]};
      std::copy(values, values + 4, scales.as<float>().begin());
      inputs = {&x, nullptr, &scales};
    } else {
      std::copy(yref.shape.begin(), yref.shape.end(), sizes.as<std::int64_t>().begin());
    }
  }
  node.inputs.clear();
  for (std::size_t i = 0; i < inputs.size(); ++i)
    node.inputs.push_back(inputs[i] ? static_cast<int>(i) : -1);
  Tensor y;
  try {
    y = std::move(host::run_cpu_op(node, inputs).at(0));
  } catch (const Error& e) {
    fault("the resize cannot run: {}", e.message());
  }
  if (y.shape() != yref.shape) {
    fault("the resize gives {}, not the shape of {}", shape_to_string(y.shape()),
          describe("output 0", yref));
  }
  if (!copy_block(yptr, reinterpret_cast<const std::byte*>(y.bytes().data()),
                  Block{yref.shape, layout_strides(yref), contiguous_strides(yref.shape)}, esize,
                  nullptr, dst_rows(yref))) {
    clear_row_padding(yptr, yref);
  }
}

}  // namespace

// LowLevelResize: nearest upsampling by whole factors. With rows contiguous on both sides, row by
// row; otherwise the output is walked as [N, C, H, scale_h, W, scale_w] with source strides 0
// along the two repeat dims (a copy per element along W).
void resize(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::ResizeParams>(kernel);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  require_same_dtype(yref, "output 0", xref, "input 0");
  if (p.mode != isa::ResizeParams::Mode::NearestRepeat)
    return resize_on_host_arithmetic(kernel, region);
  std::byte* yptr = at(region, yref);
  if (xref.shape.size() != 4 || p.scale_h < 1 || p.scale_w < 1) {
    fault("{} must be 4-D and the scales >= 1 (scale_h {}, scale_w {})", describe("input 0", xref),
          p.scale_h, p.scale_w);
  }
  const Shape expected{xref.shape[0], xref.shape[1], xref.shape[2] * p.scale_h,
                       xref.shape[3] * p.scale_w};
  if (yref.shape != expected) {
    fault("{} must have shape {} (input 0 upsampled by {} x {})", describe("output 0", yref),
          shape_to_string(expected), p.scale_h, p.scale_w);
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::vector<std::int64_t> xs = layout_strides(xref), ys = layout_strides(yref);
  const std::size_t esize = dtype_size(xref.dtype);
  if (xs[3] == 1 && ys[3] == 1) {
    // Rows are contiguous on both sides (NCHW or lowered): each output row is built once from
    // its source row (every element repeated scale_w times) and stored scale_h times, instead of
    // the block copy's one-element runs (YOLOv8n's two 2x upsamplings: 1.8 ms -> 0.24 ms,
    // docs/simulator-speed.md).
    const std::int64_t W = xref.shape[3], OW = W * p.scale_w;
    const std::size_t row_bytes = static_cast<std::size_t>(OW) * esize;
    std::vector<std::uint16_t> row16((row_bytes + 1) / 2);  // 16-bit units for the 2x case
    std::byte* row = reinterpret_cast<std::byte*>(row16.data());
    for (std::int64_t n = 0; n < xref.shape[0]; ++n) {
      for (std::int64_t c = 0; c < xref.shape[1]; ++c) {
        for (std::int64_t h = 0; h < xref.shape[2]; ++h) {
          const std::byte* src =
              xptr + static_cast<std::size_t>(n * xs[0] + c * xs[1] + h * xs[2]) * esize;
          if (esize == 1 && p.scale_w == 2) {  // vectorizes: each byte b becomes the pair b, b
            const auto* in = reinterpret_cast<const std::uint8_t*>(src);
            for (std::int64_t w = 0; w < W; ++w) {
              row16[static_cast<std::size_t>(w)] = static_cast<std::uint16_t>(in[w] * 0x0101u);
            }
          } else {
            std::byte* out = row;
            for (std::int64_t w = 0; w < W; ++w) {
              for (std::int64_t r = 0; r < p.scale_w; ++r, out += esize) {
                std::memcpy(out, src + static_cast<std::size_t>(w) * esize, esize);
              }
            }
          }
          for (std::int64_t r = 0; r < p.scale_h; ++r) {
            std::byte* dst = yptr + static_cast<std::size_t>(n * ys[0] + c * ys[1] +
                                                             (h * p.scale_h + r) * ys[2]) *
                                        esize;
            copy_bytes(dst, row, row_bytes);
          }
        }
      }
    }
    clear_row_padding(yptr, yref);
    return;
  }
  const Block block{
      {xref.shape[0], xref.shape[1], xref.shape[2], p.scale_h, xref.shape[3], p.scale_w},
      {ys[0], ys[1], ys[2] * p.scale_h, ys[2], ys[3] * p.scale_w, ys[3]},
      {xs[0], xs[1], xs[2], 0, xs[3], 0}};
  if (!copy_block(yptr, xptr, block, esize, nullptr, dst_rows(yref))) {
    clear_row_padding(yptr, yref);
  }
}

}  // namespace furiosa::device::sim::detail
