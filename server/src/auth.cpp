// Bearer-token authentication (auth.h).
#include "auth.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "furiosa/core/error.h"

namespace furiosa::server {

std::string read_token_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream content;
  if (in) content << in.rdbuf();
  if (!in || in.bad()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--auth-token-file '{}': cannot read it: {}", file.string(),
                            std::strerror(errno)));
  }
  std::string token = content.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--auth-token-file '{}': the file holds no token", file.string()));
  }
  for (const char c : token) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("--auth-token-file '{}': the token holds a space or control "
                              "character (one line of printable characters expected)",
                              file.string()));
    }
  }
  return token;
}

bool equal_constant_time(std::string_view a, std::string_view b) noexcept {
  // Every byte of `b` is visited whatever `a` holds; a length mismatch only sets a bit.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ static_cast<unsigned char>(b[i])));
  }
  return diff == 0;
}

bool bearer_matches(std::string_view header, std::string_view token) noexcept {
  if (token.empty()) return false;
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size()) return false;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    char c = header[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return false;
  }
  std::size_t i = kScheme.size();
  if (header[i] != ' ') return false;
  while (i < header.size() && header[i] == ' ') ++i;
  std::string_view given = header.substr(i);
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  return equal_constant_time(given, token);
}

}  // namespace furiosa::server
