#include "ingot/runtime/error.h"

#include <fmt/format.h>

namespace ingot {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kShapeMismatch:
      return "ShapeMismatch";
    case ErrorCode::kDTypeMismatch:
      return "DTypeMismatch";
    case ErrorCode::kOutOfRange:
      return "OutOfRange";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kUnimplemented:
      return "Unimplemented";
    case ErrorCode::kParseError:
      return "ParseError";
    case ErrorCode::kTraceError:
      return "TraceError";
    case ErrorCode::kOutOfMemory:
      return "OutOfMemory";
    case ErrorCode::kFailedPrecondition:
      return "FailedPrecondition";
    case ErrorCode::kInternal:
      return "Internal";
    case ErrorCode::kResourceExhausted:
      return "ResourceExhausted";
    case ErrorCode::kCancelled:
      return "Cancelled";
  }
  return "Unknown";
}

Error::Error(ErrorCode code, std::string message, std::string hint)
    : code_(code), message_(std::move(message)), hint_(std::move(hint)) {
  what_ = fmt::format("[{}] {}", error_code_name(code_), message_);
  if (!hint_.empty()) what_ += fmt::format(" (hint: {})", hint_);
}

Error Error::with_context(std::string_view context) const {
  return Error(code_, fmt::format("{}: {}", context, message_), hint_);
}

}  // namespace ingot
