#pragma once
// Errors are values: every fallible call returns Status or Result<T>. The library never
// aborts on bad input and throws nothing; it builds with or without exceptions (core/oom.h says what an
// allocation failure does in each). An ok Status holds no message and never allocates.

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace kiln {

/// Broad category of a failure; the message says what exactly went wrong and, where there is
/// one, the way out. What each code means to a caller, and where it comes from:
enum class Code {
  kOk = 0,
  /// The caller passed something the contract does not allow: bind with a wrong dtype or rank,
  /// a static axis of another size, dims that share a name but differ, a failed guard; an
  /// arena not 16-byte aligned. Fix the input (the message names input, axis, both values).
  kInvalidArgument,
  /// A value lies outside its documented range: a dim outside [min, max], off its step, or
  /// above the Method's max_shapes; a data-dependent count above its bound at execute.
  kOutOfRange,
  /// A named method, input or output does not exist (the message lists the names there are).
  kNotFound,
  /// A file or buffer is not a .kiln program, is damaged or truncated (checksums), or has a
  /// format version this runtime does not read (the message says which side is older).
  kDataLoss,
  /// A valid request this build cannot serve (e.g. an op the runtime was built without).
  kUnimplemented,
  /// A call in the wrong state: execute before a successful bind.
  kFailedPrecondition,
  /// Memory or threads ran out, or a caller-provided arena is smaller than arena_bytes().
  kResourceExhausted,
  /// A bug in Kiln (a plan that does not fit its own bounds): please report it.
  kInternal,
  /// The operating system refused a file operation (open, stat, mmap); errno's text follows.
  kIoError,
};

/// Finer than Code where a caller acts on the kind of refusal (a tool that tries other shapes,
/// an app that falls back); most errors have none.
enum class Reason : uint8_t {
  kNone = 0,
  /// bind: a guard (a shape relation export recorded, "H % 32 == 0") refused the shapes.
  kGuardFailed,
  /// execute: the branch the input data chose cannot run at these shapes (its block's own guard).
  kBlockRefused,
  /// execute: a data-dependent count (NonZero's) exceeded the bound the contract declares for it.
  kDataAboveBound,
  /// execute: a float input holds NaN or Inf and the Method runs the XNNPACK delegate, whose
  /// clamps would turn it into a number (MethodOptions::check_finite_inputs; README,
  /// "Non-finite values"). Nothing ran; the message names the input, the element and its value.
  kNonFiniteInput,
  /// execute: a kernel refused the input data (an index out of range, a value the op cannot
  /// take); the message names the instruction. The shapes were fine: bind accepted them.
  kDataRefused,
};

/// Lower-case name of a code ("invalid argument").
const char* code_name(Code code);

/// Result of an operation that returns nothing. Cheap to copy when ok.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message, Reason reason = Reason::kNone)
      : code_(code), reason_(reason), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  Reason reason() const { return reason_; }
  /// The human-readable message; empty when ok.
  const std::string& message() const { return message_; }
  /// Prepends context: "bind: " + message.
  Status with_prefix(const std::string& prefix) const {
    if (ok()) return *this;
    return Status(code_, prefix + message_, reason_);
  }

 private:
  Code code_ = Code::kOk;
  Reason reason_ = Reason::kNone;
  std::string message_;
};

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
