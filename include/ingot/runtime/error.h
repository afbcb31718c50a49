// ingot::Error: the one exception type thrown by ingot library code.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace ingot {

/// What kind of failure an ingot::Error reports. Stable; tests match on it.
enum class ErrorCode {
  kInvalidArgument,     ///< an argument has a bad value (negative size, unknown name, ...)
  kShapeMismatch,       ///< shapes of operands/arguments are incompatible
  kDTypeMismatch,       ///< dtypes of operands/arguments are incompatible
  kOutOfRange,          ///< an axis, index or dimension number is out of range
  kNotFound,            ///< a named thing (op, attribute, value id) does not exist
  kUnimplemented,       ///< a rule/kernel is missing for an op or dtype
  kParseError,          ///< textual IR could not be parsed
  kTraceError,          ///< a Tensor was used outside the trace it belongs to
  kOutOfMemory,         ///< an allocator could not satisfy a request
  kFailedPrecondition,  ///< an object is in the wrong state for the call
  kInternal,            ///< an invariant of ingot itself broke (a bug)
  kResourceExhausted,   ///< a system resource other than memory ran out (threads, file descriptors)
  kCancelled,           ///< stopped on request before finishing (a signal: SIGINT, SIGTERM)
};

/// Short stable name of an error code, e.g. "ShapeMismatch".
std::string_view error_code_name(ErrorCode code);

/// The exception thrown by every ingot library function on bad input or failure.
///
/// `message` names the offending argument and its value(s); `hint` says what to do about it.
/// what() returns "[Code] message (hint: hint)". Library code never exits the process.
class Error : public std::exception {
 public:
  /// @param code     the category of the failure.
  /// @param message  what went wrong, naming the argument and values involved.
  /// @param hint     what the caller can do about it; may be empty.
  Error(ErrorCode code, std::string message, std::string hint = {});

  ErrorCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const std::string& hint() const noexcept { return hint_; }
  const char* what() const noexcept override { return what_.c_str(); }

  /// Returns a copy whose message is prefixed by `context` (e.g. the IR node being
  /// verified): "context: message". Code and hint are kept.
  Error with_context(std::string_view context) const;

 private:
  ErrorCode code_;
  std::string message_;
  std::string hint_;
  std::string what_;
};

}  // namespace ingot
