#pragma once
// The runtime's one view of a delegate: a Backend runs a method's delegate regions (runs of
// portable instructions it computes instead, fb::DelegateRegion) on its own operators. The
// runtime knows only this interface; a backend is found by the name the file stores
// (fb::Delegate::backend, "xnnpack"). Made at Method::create (weights packed), set up at every
// bind (operand shapes may have changed), run at execute (never allocating).
//
// The export side of a backend (which instructions it takes, and why it declines the others)
// is in src/export (xnnpack_partition.h): export links what the runtime must not.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/symexpr.h"
#include "format/reader.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates {

/// What a backend is made from: the verified method, its file, the method's expressions, the
/// Method's value views (one per value; they outlive the backend, and their data pointers and
/// dims are read at setup) and its thread pool (null: one thread).
struct BackendContext {
  const fb::Method* method = nullptr;
  const format::ProgramFile* file = nullptr;
  const std::vector<core::ExprNode>* exprs = nullptr;
  std::vector<TensorView>* views = nullptr;
  pthreadpool_t pool = nullptr;
};

/// One step of a region, for profiles.
struct StepInfo {
  const char* kind = "kernel";  ///< "kernel", "to_nhwc", "to_nchw"
  int32_t source = -1;          ///< kernel: the instruction it computes
  int32_t fused = -1;           ///< kernel: the activation folded into it
  int32_t gate = -1;            ///< kernel: a convolution's gate activation (fused is its Mul)
  int32_t clamp = -1;           ///< kernel: an activation after a fused bias Add
  /// Carries NaN and Inf as the portable kernels do. false: the step can turn a NaN into a
  /// number (XNNPACK 2022's convolution and fully connected operators clamp with x86 max/min),
  /// so execute checks the float inputs first (MethodOptions::check_finite_inputs).
  bool keeps_nan = true;
  const TensorView* out = nullptr;
  uint64_t ns = 0;              ///< time over the profiled runs
  bool in_next = false;         ///< computed inside the next step at this bind (ProfileRow::in_next)
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// After bind: readies every region for the views' current shapes and data pointers.
  virtual Status setup() = 0;
  /// Runs region `r` (fb::Delegate::regions order); with `timed`, adds each step's time to
  /// its profile counter. Never allocates.
  virtual Status run_region(size_t r, bool timed) = 0;
  virtual size_t num_steps(size_t r) const = 0;
  virtual StepInfo step_info(size_t r, size_t k) const = 0;
  virtual void reset_times() = 0;
  /// Bytes the backend allocated at create (packed weights, operator state).
  virtual uint64_t packed_bytes() const = 0;
};

using BackendFactory = Result<std::unique_ptr<Backend>> (*)(const BackendContext& ctx);

/// The backend the file names for this method's delegate (ctx.method->delegate()), made from
/// ctx; kUnimplemented naming it when no backend of that name is linked in.
Result<std::unique_ptr<Backend>> create_backend(const BackendContext& ctx);

/// The names of the backends linked in ("xnnpack").
std::vector<std::string> backend_names();

}  // namespace kiln::delegates
