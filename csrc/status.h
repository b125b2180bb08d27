// Status: a canonical error code and a message, returned by every core function that can
// fail. The codes are TensorFlow's canonical ones (tensorflow/core/protobuf/error_codes.proto)
// so the bindings (py_convert.cc) can map each one to its psrt.errors class. Thread-compatible
// value type.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace psrt {

enum class Code : uint8_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};
constexpr uint8_t kMaxCode = 16;

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
inline Status FailedPrecondition(std::string m) {
  return Status(Code::kFailedPrecondition, std::move(m));
}
inline Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

#define PSRT_RETURN_IF_ERROR(expr)       \
  do {                                   \
    ::psrt::Status _st = (expr);         \
    if (!_st.ok()) return _st;           \
  } while (0)

}  // namespace psrt
