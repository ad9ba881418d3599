// libFuzzer target: what furiosa-serve reads from the network before any model runs (issue 30).
// The first byte picks the layer:
//   even: the rest is an HTTP/1.1 request, parsed by Beast's request parser with the server's
//         limits (16 KiB of header, 1 MiB of body here); a parsed request's body is then
//         decoded as a v2 inference request, with its Inference-Header-Content-Length;
//   odd:  the rest is an inference request body (JSON, no binary part) for decode_infer_request.
// The model has the inputs of the real mnist-12-int8 (FP32 [1, 1, 28, 28]) plus a UINT8 [2, 3],
// so both the float and the integer stores are reached. A refusal must be a furiosa::Error (or
// a Beast parse error); a crash, a sanitizer report or a hang is a finding.
#include <utility>  // before Boost.Asio 1.74 (awaitable.hpp uses std::exchange)

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/server/v2_protocol.h"
#include "served_model.h"

namespace {

const std::vector<furiosa::runtime::TensorDesc>& model_inputs() {
  static const std::vector<furiosa::runtime::TensorDesc> inputs =
      furiosa::fuzz::served_model_inputs();
  return inputs;
}

void decode(std::string_view body, std::optional<std::size_t> header_length) {
  try {
    (void)furiosa::server::decode_infer_request(body, header_length, model_inputs());
  } catch (const furiosa::Error&) {
  }
}

void http_then_decode(std::string_view bytes) {
  namespace http = boost::beast::http;
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  std::size_t used = 0;
  while (used < bytes.size() && !parser.is_done()) {
    const std::size_t n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (ec == http::error::need_more) break;
    if (ec || n == 0) return;
    used += n;
  }
  if (!parser.is_done()) {
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return;
  }
  const auto& request = parser.get();
  std::optional<std::size_t> header_length;
  if (auto h = request.find("Inference-Header-Content-Length"); h != request.end()) {
    std::size_t n = 0;
    const auto v = h->value();
    auto [p, err] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (err != std::errc() || p != v.data() + v.size()) return;  // the server answers 400 here
    header_length = n;
  }
  decode(request.body(), header_length);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) http_then_decode(rest);
  else decode(rest, std::nullopt);
  return 0;
}
