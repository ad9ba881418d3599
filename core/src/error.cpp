// Error codes and the runtime's exception type.
#include "furiosa/core/error.h"

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

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(format_what(code, message)), code_(code), message_(message) {}

Error::Error(ErrorCode code, const std::string& message, ErrorSubject subject)
    : std::runtime_error(format_what(code, message)),
      code_(code),
      message_(message),
      subject_(std::move(subject)) {}

}  // namespace furiosa
