// The one exception type of the runtime: an error code, a one-line message that names the tensor,
// node, file or device concerned, and the same names as typed fields so that callers (the CLI,
// the Python layer, a server) can act on them without parsing the message.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

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
  DeviceFault,          ///< a device-side failure (DMA error, execution error, invalid program)
  DeviceTimeout,        ///< an execution did not finish within the watchdog's limit (a hang);
                        ///< the device was reset
  QueueWaitTimeout,     ///< a wait on a queue or fence ran out of time
  SessionClosed,        ///< the session was closed before the request could run
  SessionTerminated,    ///< every result of a closed submitter was received: the queue ended
  Cancelled,            ///< the request was cancelled (InferRequest::cancel) before it completed
  IoError,              ///< writing an output file or trace failed
  Internal,             ///< a broken invariant inside the runtime (a bug)
};

/// Stable name of an error code, e.g. "DeviceBusy".
std::string_view to_string(ErrorCode code) noexcept;

/// The objects an error is about, each empty when it does not apply. The message names them
/// too; these fields are for programs.
struct ErrorSubject {
  std::string device_file;  ///< device file, e.g. "npu0pe0-1" (device errors)
  std::string node;         ///< graph node name (compiler / operator errors)
  std::string tensor;       ///< tensor name (input validation, tensor files)
  std::string file;         ///< file path (model, input, trace files)

  /// A subject naming only a device file / node / tensor / file.
  static ErrorSubject of_device(std::string device_file) { return {std::move(device_file), {}, {}, {}}; }
  static ErrorSubject of_node(std::string node) { return {{}, std::move(node), {}, {}}; }
  static ErrorSubject of_tensor(std::string tensor) { return {{}, {}, std::move(tensor), {}}; }
  static ErrorSubject of_file(std::string file) { return {{}, {}, {}, std::move(file)}; }
};

/// Exception carrying an ErrorCode. what() is "<Code>: <message>" on one line: the constructor
/// passes the message through one_line (text.h), so control bytes (a newline or ESC from a
/// model's node name, a NUL) and broken UTF-8 become "\xNN" escapes. Copyable and immutable
/// after construction, so one Error may be rethrown on several threads.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  /// Same, with the objects the error is about as typed fields.
  Error(ErrorCode code, const std::string& message, ErrorSubject subject);

  /// The error's category.
  ErrorCode code() const noexcept { return code_; }
  /// The message without the "<Code>: " prefix.
  const std::string& message() const noexcept { return message_; }
  /// The device file concerned, or "".
  const std::string& device_file() const noexcept { return subject_.device_file; }
  /// The graph node concerned, or "".
  const std::string& node() const noexcept { return subject_.node; }
  /// The tensor concerned, or "".
  const std::string& tensor() const noexcept { return subject_.tensor; }
  /// The file concerned, or "".
  const std::string& file() const noexcept { return subject_.file; }
  /// All four.
  const ErrorSubject& subject() const noexcept { return subject_; }

 private:
  ErrorCode code_;
  std::string message_;
  ErrorSubject subject_;
};

/// `error` rethrown where the file it concerns is known: the same code and subject, with
/// subject.file set to `file` and the message prefixed "<file>: " (escaped) unless it already
/// names the file (as the loaders' messages do), so each message names its file once.
Error in_file(const Error& error, std::string_view file);

}  // namespace furiosa
