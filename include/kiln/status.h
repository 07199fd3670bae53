#pragma once
// Errors are values: every fallible call returns Status or Result<T>. The library never
// aborts on bad input and throws nothing; it builds with or without exceptions (core/oom.h says what an
// allocation failure does in each). An ok Status holds no message and never allocates.

#include <string>
#include <type_traits>
#include <utility>

namespace kiln {

/// Broad category of a failure; the message says what exactly went wrong.
enum class Code {
  kOk = 0,
  kInvalidArgument,     ///< caller passed something the contract does not allow
  kOutOfRange,          ///< a value lies outside its documented range
  kNotFound,            ///< a named method, input or op does not exist
  kDataLoss,            ///< a file is damaged, truncated or not a .kiln program
  kUnimplemented,       ///< valid request that this build does not support
  kFailedPrecondition,  ///< call made in the wrong state (e.g. execute before bind)
  kResourceExhausted,   ///< a caller-provided buffer is too small, threads or memory ran out
  kInternal,            ///< a bug in Kiln
  kIoError,             ///< the operating system refused a file operation
};

/// Lower-case name of a code ("invalid argument").
const char* code_name(Code code);

/// Result of an operation that returns nothing. Cheap to copy when ok.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  /// The human-readable message; empty when ok.
  const std::string& message() const { return message_; }
  /// Prepends context: "bind: " + message.
  Status with_prefix(const std::string& prefix) const {
    if (ok()) return *this;
    return Status(code_, prefix + message_);
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status out_of_range(std::string m) { return Status(Code::kOutOfRange, std::move(m)); }
inline Status not_found(std::string m) { return Status(Code::kNotFound, std::move(m)); }
inline Status data_loss(std::string m) { return Status(Code::kDataLoss, std::move(m)); }
inline Status unimplemented(std::string m) { return Status(Code::kUnimplemented, std::move(m)); }
inline Status failed_precondition(std::string m) { return Status(Code::kFailedPrecondition, std::move(m)); }
inline Status resource_exhausted(std::string m) { return Status(Code::kResourceExhausted, std::move(m)); }
inline Status internal_error(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status io_error(std::string m) { return Status(Code::kIoError, std::move(m)); }

/// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : has_value_(true) { new (&storage_) T(std::move(value)); }  // NOLINT
  Result(Status status) : status_(std::move(status)) {                            // NOLINT
    if (status_.ok()) status_ = Status(Code::kInternal, "result constructed from ok status");
  }
  Result(const Result& o) : status_(o.status_), has_value_(o.has_value_) {
    if (has_value_) new (&storage_) T(*o.ptr());
  }
  Result(Result&& o) noexcept : status_(std::move(o.status_)), has_value_(o.has_value_) {
    if (has_value_) new (&storage_) T(std::move(*o.ptr()));
  }
  Result& operator=(Result o) {
    reset();
    status_ = std::move(o.status_);
    has_value_ = o.has_value_;
    if (has_value_) new (&storage_) T(std::move(*o.ptr()));
    return *this;
  }
  ~Result() { reset(); }

  bool ok() const { return has_value_; }
  const Status& status() const { return status_; }
  T& value() & { return *ptr(); }
  const T& value() const& { return *ptr(); }
  T&& value() && { return std::move(*ptr()); }
  T* operator->() { return ptr(); }
  const T* operator->() const { return ptr(); }
  T& operator*() & { return *ptr(); }
  const T& operator*() const& { return *ptr(); }

 private:
  T* ptr() { return reinterpret_cast<T*>(&storage_); }
  const T* ptr() const { return reinterpret_cast<const T*>(&storage_); }
  void reset() {
    if (has_value_) ptr()->~T();
    has_value_ = false;
  }
  Status status_;
  bool has_value_ = false;
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

/// Returns the Status from the enclosing function if `expr` is not ok.
#define KILN_TRY(expr)                               \
  do {                                               \
    ::kiln::Status kiln_try_status_ = (expr);        \
    if (!kiln_try_status_.ok()) return kiln_try_status_; \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

/// `KILN_ASSIGN_OR_RETURN(auto x, f());` assigns the value or returns the Status.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_result_, __LINE__), lhs, expr)
