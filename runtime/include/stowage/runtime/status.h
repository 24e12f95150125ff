// Status and Result<T>: error reporting for the Stowage runtime, planner and tools.
//
// The runtime never throws across its API: every fallible function returns a Status or a
// Result<T>. A Status carries a category (StatusCode) and a one-line, human-readable message that
// names the file, the byte offset or field, and what was expected (see DESIGN.md, "Bad input").
// Both types are cheap to move; an OK Status holds no message. Thread-safety: plain values.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace stowage {

/// Error categories, in the spirit of absl/IREE status codes.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     ///< a caller-supplied value is wrong (flag, option, shape)
  kOutOfRange,          ///< an index, offset or size is outside its valid range
  kNotFound,            ///< a named thing (key, tensor, device, file) does not exist
  kAlreadyExists,       ///< a name is used twice
  kDataLoss,            ///< a file is malformed, truncated or corrupted
  kFailedPrecondition,  ///< inputs are valid separately but do not match (model vs plan)
  kResourceExhausted,   ///< memory or a capacity limit was exceeded
  kUnimplemented,       ///< valid input that this build does not handle
  kUnavailable,         ///< a device or backend is not present on this machine
  kInternal,            ///< a bug: an invariant did not hold
  kIoError,             ///< the operating system refused an I/O operation
};

/// Returns a stable lower-case name for `code` ("invalid argument", "data loss", ...).
const char* StatusCodeName(StatusCode code);

/// The result of an operation that returns no value. Default-constructed = OK.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  /// The one-line message (empty for OK).
  const std::string& message() const { return message_; }
  /// "<code name>: <message>", or "ok".
  std::string ToString() const;
  /// Returns a copy whose message is "<prefix>: <message>" (no-op for OK).
  Status WithPrefix(const std::string& prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Shorthand constructors.
inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }

/// Either a value of type T or a non-OK Status. Accessing value() of an error is a bug (asserts
/// in debug builds); callers check ok() first or use STOWAGE_ASSIGN_OR_RETURN. Built from an OK
/// Status (a caller's bug: `return st;` without a value) it holds kInternal "Result constructed
/// from an OK status", in release builds too, so the bug surfaces as an error, not as a result
/// that is neither a value nor an error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status)                      // NOLINT: implicit by design
      : v_(status.ok() ? Status(StatusCode::kInternal, "Result constructed from an OK status")
                       : std::move(status)) {
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  /// The error (OK status when a value is held).
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace stowage

#define STOWAGE_CONCAT_IMPL(a, b) a##b
#define STOWAGE_CONCAT(a, b) STOWAGE_CONCAT_IMPL(a, b)

/// Evaluates `expr` (a Status) and returns it from the enclosing function if it is not OK.
#define STOWAGE_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::stowage::Status stowage_status_ = (expr);        \
    if (!stowage_status_.ok()) return stowage_status_; \
  } while (0)

/// `lhs = value of expr` (a Result<T>), or returns its Status from the enclosing function.
#define STOWAGE_ASSIGN_OR_RETURN(lhs, expr) \
  STOWAGE_ASSIGN_OR_RETURN_IMPL(STOWAGE_CONCAT(stowage_result_, __LINE__), lhs, expr)
#define STOWAGE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
