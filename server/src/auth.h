// Private: bearer-token authentication of furiosa-serve (--auth-token-file; docs/serving.md
// "Security"), shared by the HTTP sessions and the gRPC front end. The token is held in memory
// only: never logged, never put into an error message.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace furiosa::server {

/// The token of `file`: its content without trailing "\n" / "\r\n" (one or more). Throws
/// Error(InvalidArgument) naming the file (never its content) when it cannot be read, when the
/// token is empty, or when it holds characters a header value cannot carry (control
/// characters, spaces).
std::string read_token_file(const std::filesystem::path& file);

/// Whether `a` equals `b`, in a time that depends on the lengths only, not on where they
/// differ (no early exit): a client cannot find the token byte by byte by timing answers.
bool equal_constant_time(std::string_view a, std::string_view b) noexcept;

/// Whether an Authorization header (HTTP) or `authorization` metadata value (gRPC) is
/// "Bearer <token>": the scheme case-insensitive (RFC 7235), one or more spaces, then the
/// token compared with equal_constant_time. An empty `token` never matches.
bool bearer_matches(std::string_view header, std::string_view token) noexcept;

}  // namespace furiosa::server
