#pragma once
// Runtime side of the XNNPACK delegate: operators created (weights packed) at Method::create,
// set up at bind only when an operand's shape changed, run in order at execute. Internal to
// the runtime; no XNNPACK type leaks into public headers.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/symexpr.h"
#include "delegates/backend.h"
#include "format/reader.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

struct Op;  // one step of a region (op.h)

/// The XNNPACK backend (backend.h): XNNPACK's operators, and Kiln's own kernels for what they
/// lack, over channels-last twins of the method's values.
class Delegate final : public Backend {
 public:
  /// Creates the operators of every region of `m->delegate()`. `views` (one per value) must
  /// outlive the delegate; their data pointers are read at setup. Any error means the
  /// caller runs the portable path instead. `pool` may be null (one thread).
  static Result<std::unique_ptr<Delegate>> create(const fb::Method* m, const format::ProgramFile& file,
                                                  const std::vector<core::ExprNode>& exprs,
                                                  std::vector<TensorView>* views, pthreadpool_t pool);
  ~Delegate() override;
  Delegate(const Delegate&) = delete;
  Delegate& operator=(const Delegate&) = delete;

  /// After bind: sets up the operators whose operand shapes changed since their last setup.
  /// Allocates nothing once a setup at the bound has been done (Kiln's xnn_allocator keeps
  /// bound-sized blocks).
  Status setup() override;
  /// Runs region `r`; with `timed`, adds each step's nanoseconds to its counter. Never allocates.
  Status run_region(size_t r, bool timed) override;

  size_t num_regions() const { return regions_.size(); }
  size_t num_steps(size_t r) const override { return regions_[r].size(); }
  StepInfo step_info(size_t r, size_t k) const override;
  void reset_times() override;
  /// Bytes XNNPACK allocated while creating the operators (packed weights, operator state).
  uint64_t packed_bytes() const override { return packed_bytes_; }

 private:
  Delegate() = default;
  std::vector<std::vector<std::unique_ptr<Op>>> regions_;
  pthreadpool_t pool_ = nullptr;
  std::vector<size_t> dims_scratch_;  ///< setup(): operand dims of one op
  uint64_t packed_bytes_ = 0;
};

/// Delegate::create behind the Backend interface (the registry's entry for "xnnpack").
Result<std::unique_ptr<Backend>> create_backend(const BackendContext& ctx);

/// Initializes XNNPACK once per process with Kiln's xnn_allocator (what every Delegate::create
/// does first); kUnimplemented when XNNPACK cannot run on this CPU.
Status initialize();

/// Allocations Kiln's xnn_allocator could not serve from an existing block since start-up
/// (a test hook: bind below the bound and execute must not add to it).
uint64_t allocation_count();

}  // namespace kiln::delegates::xnnpack
