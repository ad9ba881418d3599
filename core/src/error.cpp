// Error codes and the runtime's exception type.
#include "furiosa/core/error.h"

#include "furiosa/core/text.h"

namespace furiosa {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidInput: return "InvalidInput";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::ModelLoadFailed: return "ModelLoadFailed";
    case ErrorCode::IncompatibleModel: return "IncompatibleModel";
    case ErrorCode::UnsupportedOperator: return "UnsupportedOperator";
    case ErrorCode::CompilationFailed: return "CompilationFailed";
    case ErrorCode::DeviceNotFound: return "DeviceNotFound";
    case ErrorCode::DeviceBusy: return "DeviceBusy";
    case ErrorCode::DeviceFault: return "DeviceFault";
    case ErrorCode::DeviceTimeout: return "DeviceTimeout";
    case ErrorCode::QueueWaitTimeout: return "QueueWaitTimeout";
    case ErrorCode::SessionClosed: return "SessionClosed";
    case ErrorCode::SessionTerminated: return "SessionTerminated";
    case ErrorCode::Cancelled: return "Cancelled";
    case ErrorCode::IoError: return "IoError";
    case ErrorCode::Internal: return "Internal";
  }
  return "Unknown";
}

namespace {

// what() text: "<Code>: <message>".
std::string format_what(ErrorCode code, const std::string& message) {
  std::string text(to_string(code));
  text += ": ";
  text += message;
  return text;
}

}  // namespace

Error::Error(ErrorCode code, const std::string& message) : Error(code, message, ErrorSubject{}) {}

// one_line: whatever a message was built from (names from model files, environment variables),
// what() can neither start a forged line, move the cursor nor be cut by a NUL.
Error::Error(ErrorCode code, const std::string& message, ErrorSubject subject)
    : std::runtime_error(format_what(code, one_line(message))),
      code_(code),
      message_(one_line(message)),
      subject_(std::move(subject)) {}

Error in_file(const Error& error, std::string_view file) {
  const std::string shown = escape_text(file);
  ErrorSubject subject = error.subject();
  subject.file = std::string(file);
  if (error.message().find(shown) != std::string::npos)
    return Error(error.code(), error.message(), subject);
  return Error(error.code(), shown + ": " + error.message(), subject);
}

}  // namespace furiosa
