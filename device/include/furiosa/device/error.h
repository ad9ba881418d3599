// The one exception type of the runtime: an error code plus a message that names the tensor,
// node, file or device concerned. Every module raises it; the CLI and API edges report it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace furiosa {

/// What kind of failure an Error reports. Names follow FuriosaAI's SDK error classes where one
/// exists (DeviceBusy, QueueWaitTimeout, SessionClosed, ...).
enum class ErrorCode {
  InvalidInput,         ///< wrong input count/name/shape/dtype, unreadable input file
  InvalidArgument,      ///< a bad option value (device spec, batch size, ...)
  ModelLoadFailed,      ///< model file missing, truncated or not parseable
  IncompatibleModel,    ///< model is valid ONNX but violates an assumption of the compiler
  UnsupportedOperator,  ///< a node no backend (NPU or CPU) can run
  CompilationFailed,    ///< internal compiler failure on a supported graph
  DeviceNotFound,       ///< no device matches the requested device file or spec
  DeviceBusy,           ///< the device's cores are already held by another session
  DeviceFault,          ///< a device-side failure (DMA error, hang, invalid program)
  QueueWaitTimeout,     ///< a wait on a queue or fence ran out of time
  SessionClosed,        ///< the session was closed before the request could run
  SessionTerminated,    ///< every result of a closed submitter was received: the queue ended
  IoError,              ///< writing an output file or trace failed
  Internal,             ///< a broken invariant inside the runtime (a bug)
};

/// Stable name of an error code, e.g. "DeviceBusy".
std::string_view to_string(ErrorCode code) noexcept;

/// Exception carrying an ErrorCode. what() is "<Code>: <message>" on one line.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);

  /// The error's category.
  ErrorCode code() const noexcept { return code_; }
  /// The message without the "<Code>: " prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace furiosa
