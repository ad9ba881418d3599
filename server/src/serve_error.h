// What furiosa-serve's front ends share about one request's outcome: the transport-independent
// status (mapped once to HTTP codes in server.cpp and to gRPC codes in grpc_frontend.cpp), the
// error carrying it, deadlines and the completion callback.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/core/tensor.h"

namespace furiosa::server {

/// Outcome classes of a request. HTTP / gRPC: Ok 200 / OK, InvalidArgument 400 /
/// INVALID_ARGUMENT, NotFound 404 / NOT_FOUND, ResourceExhausted 429 / RESOURCE_EXHAUSTED,
/// Unavailable 503 / UNAVAILABLE, DeadlineExceeded 504 / DEADLINE_EXCEEDED, Internal 500 / INTERNAL.
enum class ServeStatus { Ok, InvalidArgument, NotFound, ResourceExhausted, Unavailable, DeadlineExceeded, Internal };

/// An error of the serving layer itself (admission, deadline, shutdown, unknown model): what() is
/// the message for the client. Immutable; may be rethrown on several threads.
class ServeError : public std::runtime_error {
 public:
  ServeError(ServeStatus status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// The outcome class.
  ServeStatus status() const noexcept { return status_; }

 private:
  ServeStatus status_;
};

/// The outcome class of an exception: a ServeError's own; a runtime Error by its code
/// (InvalidInput/InvalidArgument -> InvalidArgument, SessionClosed/SessionTerminated ->
/// Unavailable, DeviceTimeout -> DeadlineExceeded, else Internal); anything else Internal.
ServeStatus status_of(const std::exception& e) noexcept;
/// Same for an exception_ptr (null -> Ok).
ServeStatus status_of(std::exception_ptr e) noexcept;
/// The metrics label of a status: "ok", "invalid_argument", "not_found", "resource_exhausted",
/// "unavailable", "deadline_exceeded", "internal".
std::string_view reason_label(ServeStatus status) noexcept;

/// The serving clock (monotonic).
using Clock = std::chrono::steady_clock;
/// A request's deadline; nullopt = none.
using Deadline = std::optional<Clock::time_point>;
/// Completion of one admitted request: its outputs (model order), or its error (then outputs are
/// empty). Called exactly once, on a server-internal thread; must not block for long.
using Completion = std::function<void(std::vector<Tensor> outputs, std::exception_ptr error)>;

}  // namespace furiosa::server
