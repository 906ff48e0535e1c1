// Status and StatusOr<T>: how every expected failure travels in tencache.
//
// Expected failures (bad input, I/O errors, out of budget, timeouts) are returned,
// never thrown; exceptions from libtorch and yaml-cpp are converted at the
// boundary where they are caught. A Status names what failed (file, key, tensor)
// in its message. Assertions are only for bugs. Status is a value type: copy it
// freely; it is safe to read from many threads once constructed.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace tencache {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input from the user: a job file, a flag, a size string
  kNotFound,            // a named thing (file, preset, instance, tensor) does not exist
  kIoError,             // the OS said no: EIO, ENOSPC, short I/O that could not be retried
  kCorruption,          // data failed verification (checksum mismatch, truncated file)
  kResourceExhausted,   // a budget or pool is too small for what was asked
  kTimeout,             // a blocking wait ran past its deadline
  kFailedPrecondition,  // called in the wrong state (e.g. release without acquire)
  kUnavailable,         // a feature the platform lacks (no GPU, no io_uring)
  kInternal,            // a bug: an invariant did not hold
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: job.yaml: key 'x': ..." or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// The process exit code a CLI uses for a Status: 0 ok, 2 bad input (invalid
// argument or a named thing not found), 1 anything else.
int ExitCodeFor(const Status& status);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tencache

#define TC_CONCAT_INNER_(a, b) a##b
#define TC_CONCAT_(a, b) TC_CONCAT_INNER_(a, b)

#define TC_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::tencache::Status tc_status_ = (expr);       \
    if (!tc_status_.ok()) return tc_status_;      \
  } while (0)

#define TC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define TC_ASSIGN_OR_RETURN(lhs, expr) \
  TC_ASSIGN_OR_RETURN_IMPL_(TC_CONCAT_(tc_statusor_, __LINE__), lhs, expr)
