#pragma once
// Method's state and the steps that make it, shared by the runtime's files (not public API):
// method.cc (create, bind, execute), contract.cc (bind's checks and ways out), schedule.cc
// (execution order, branches and loops).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pthreadpool.h>

#include "core/attrs.h"
#include "core/symexpr.h"
#include "delegates/backend.h"
#include "format/control.h"
#include "format/file_header.h"
#include "kernels/kernel.h"
#include "kernels/thread_pool.h"
#include "kiln/method.h"
#include "runtime/program_impl.h"

namespace kiln {

/// The arena a Method (or a bucketed method's buckets) owns, released with std::free: 64-byte
/// aligned; from 2 MiB up, aligned to 2 MiB and advised as transparent huge pages on Linux, so
/// tens of MB of activations take one TLB entry per 2 MiB from the first execute. With 4 KiB
/// pages, squeezenet at 4x3x320x320 ran 105-114 ms until the kernel promoted the pages after
/// about a second of use, then 74-78 ms (bench/results/heavy_profile.md). Untouched 2 MiB
/// granules still cost no memory. Null when the allocation fails.
void* allocate_owned_arena(uint64_t bytes);
namespace runtime {

/// One portable instruction, flattened: ranges of Method::Impl's operand and attribute arrays.
struct Instr {
  const kernels::OpDef* op = nullptr;
  uint32_t in_begin = 0, n_in = 0, out_begin = 0, n_out = 0, attr_begin = 0, n_attr = 0;
  const TensorView* scratch = nullptr;
  int32_t index = 0;
  int32_t produces = -1;  ///< the data-dependent dim it sets (NonZero's count), or -1
};

/// "1x3x224x224" (sep "x") or "1, 3" (sep ", ").
inline std::string shape_text(const int64_t* dims, int rank, const char* sep) {
  std::string s;
  for (int k = 0; k < rank; ++k) s += (k ? sep : "") + std::to_string(dims[k]);
  return s;
}
inline std::string shape_text(const std::vector<int64_t>& v, const char* sep) {
  return shape_text(v.data(), static_cast<int>(v.size()), sep);
}

// One pass of a plan's placement: each value in `order` just above the values of its list at
// their sizes. Returns the arena bytes it takes; `offsets` holds one entry per value.
template <class Size>
inline uint64_t place_values(const fb::MemoryPlan* plan, Size size, uint64_t* offsets) {
  const auto* start = plan->below_start();
  const auto* below = plan->below();
  uint64_t top = 0;
  for (int32_t v : *plan->order()) {
    uint64_t off = 0;
    for (uint32_t k = start->Get(v); k < start->Get(v + 1); ++k) {
      const int32_t j = below->Get(k);
      off = std::max(off, offsets[j] + format::align_up(size(j), format::kSegmentAlignment));
    }
    offsets[v] = off;
    top = std::max(top, off + format::align_up(size(v), format::kSegmentAlignment));
  }
  return top;
}

}  // namespace runtime

using runtime::Instr;

struct Method::Impl {
  const Program* program = nullptr;
  const fb::Method* m = nullptr;
  MethodMeta meta;
  std::vector<core::ExprNode> exprs;
  std::vector<std::string> dim_names;
  std::vector<int64_t> expr_values;
  std::vector<int64_t> dim_values;
  std::vector<int32_t> dim_origin;  // during bind: flat (input << 8 | axis) that set the dim
  std::vector<int64_t> provisional;  // during bind: each dim's first valid value among all inputs, or -1
  // Placement by shape (plans that carry it): offsets follow the bound-to sizes.
  const fb::MemoryPlan* placing = nullptr;
  std::vector<uint64_t> offsets_now;                 // per value, from the last placement
  std::vector<std::pair<int32_t, int32_t>> aliases;  // (alias, root)
  uint64_t placed_bytes = 0;                         // arena bytes the last placement uses
  std::vector<int64_t> dim_cap;                      // per dim: the most bind admits (max_shapes)
  std::vector<uint64_t> cap_bytes;                   // per value: its bytes at most, under dim_cap
  std::vector<TensorView> views;
  std::vector<int32_t> inputs, outputs;
  std::vector<Instr> instrs;
  std::vector<const TensorView*> in_ptrs;
  std::vector<TensorView*> out_ptrs;
  std::vector<core::AttrRef> attrs;
  std::vector<kernels::OpData> op_data;  // per instruction, from its op's prepare at create
  uint8_t* arena = nullptr;
  void* owned_arena = nullptr;
  uint64_t arena_bytes = 0;
  bool bound = false;
  pthreadpool_t pool = nullptr;
  std::unique_ptr<delegates::Backend> delegate;
  std::string delegate_warning;
  /// Execution order: a portable instruction (region < 0) or a delegate region.
  struct Step {
    int32_t instr = -1;
    int32_t region = -1;
    enum Control : uint8_t { kNone = 0, kIf = 1, kElse = 2, kLoop = 3, kEndLoop = 4 } control = kNone;
    /// kIf: the else block's first step (condition false); kElse: the step after its block;
    /// kLoop: the step after its KilnEndLoop (no iteration); kEndLoop: the body's first step.
    int32_t jump = -1;
    int32_t branch = -1;  ///< kIf, kLoop: its branch (blocks 2*branch: then or body, 2*branch + 1: else, empty for a loop)
    int32_t trip = -1;    ///< kLoop, kEndLoop: the trip count's expression
  };
  /// Per value: the innermost branch block whose instructions make it (or read it, for a
  /// view), -1 outside every block. Bind lets such a value's shape be invalid (a guard of its
  /// block fails there); the block is then marked and refused only if execute enters it.
  std::vector<int32_t> value_block;
  std::vector<int32_t> block_bad;  ///< per block: the first value bind found invalid, or -1
  /// Per instruction: its innermost block (format::instruction_blocks), -1 outside every block.
  std::vector<int32_t> instr_block;
  /// Data-dependent dims (DimSpec::data): bind takes each at its max, and the values whose
  /// shapes read one (`data_shaped`) are placed at their reservation; once the instruction
  /// that produces a dim runs, refresh_data_shapes() sizes them.
  std::vector<int32_t> data_dims;
  std::vector<bool> data_shaped;
  Status refresh_data_shapes(const Instr& producer);
  /// At the start of each execute: the data-dependent dims back at their bounds (where bind
  /// put them), so that a producer finds its whole reservation again after a run that found
  /// fewer.
  void reset_data_dims();
  std::vector<bool> data_found;  ///< per dim: its producer ran in the last execute
  /// The error execute gives on entering block `b` that bind marked.
  Status blocked(int32_t b) const;
  std::vector<Step> schedule;
  bool profiling = false;
  // MethodOptions::check_finite_inputs, when the delegate runs a step that does not keep NaN
  // (StepInfo::keeps_nan): set by attach_delegate.
  bool check_finite = true;
  std::string nan_dropper;  // the first delegated step that does not keep NaN: "'Conv_3' (Conv)"
  /// execute's check of the float inputs for NaN and Inf (the delegate would hide them).
  Status check_finite_inputs() const;
  std::vector<uint64_t> instr_ns;  // profiling: per portable instruction
  uint64_t profiled_runs = 0;
  uint64_t wall_ns = 0, caller_cpu_ns = 0;  // profiling: execute's wall time, and the caller's CPU time in it
  /// execute's walk of the schedule (after its checks).
  Status run();
  /// execute's error for an instruction whose kernel failed with `ks`.
  Status instruction_failure(const Instr& in, kernels::KernelStatus ks, const core::Attrs& attrs) const;
  kernels::ThreadPool::Stats pool_at_start;  // profiling: the pool's counters when it was turned on

  ~Impl() {
    delegate.reset();
    if (pool) pthreadpool_destroy(pool);
    std::free(owned_arena);
  }

  /// Instruction i's node and op type, from the file (for messages and profiles).
  std::string node_name(size_t i) const {
    const fb::Instruction* in = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
    return in->node_name() ? in->node_name()->str() : "";
  }
  std::string op_name(size_t i) const { return m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(i))->op()->str(); }
  std::string input_label(size_t i) const { return "'" + meta.inputs[i].name + "' (#" + std::to_string(i) + ")"; }
  std::string dims_of_expr(int32_t id) const;
  /// used[d] for each dim d that expression `id` reads.
  std::vector<bool> dims_read(int32_t id) const;
  Status check_input(size_t i, const TensorView& t);
  Status apply_shapes();
  /// Places every planned value for the current sizes (`at_caps`: the largest sizes under
  /// dim_cap) and points the views there; never allocates. An error if the arena is too small.
  Status place(bool at_caps);
  /// dim_cap from `max_shapes` (checked against the contract) and cap_bytes from dim_cap.
  Status set_caps(const std::vector<std::vector<int64_t>>& max_shapes);
  // Ways out for bind's errors (they allocate; bind may when it fails).
  /// Every shape defined (no division by zero, overflow or negative size) and every guard
  /// holding with `dims` as the dims' values, except the guards and sizes that read a dim
  /// not `known`.
  bool admits(const std::vector<int64_t>& dims, const std::vector<bool>& known) const;
  /// The value of dim `d` nearest to `got` (on its grid, in its range; a tie goes up, to
  /// padding) that admits() with the other dims at their provisional values (the inputs'
  /// valid sizes); -1 when none is within 4096 grid points either way.
  /// Dims tied to `d` (itself included) is by guards `a == b` between two bare dims: a way
  /// out moves them together.
  std::vector<int> tied_dims(int d) const;
  int64_t nearest_admissible(int d, int64_t got) const;
  /// "; pad on the host to 12" or "; crop or resize on the host to 224"; "" when none.
  std::string way_out(int d, int64_t got) const;
  bool batch_axis(int d) const;
  /// create's one-line refusal when the arena of `bytes` cannot be allocated: its size, the
  /// shapes it was planned for (the bound, or `max_shapes`) and the ways out.
  std::string arena_failure(uint64_t bytes, const std::vector<std::vector<int64_t>>& max_shapes) const;
  /// Each input's shape with every dim at its largest admissible value.
  std::vector<std::vector<int64_t>> bound_shapes() const;
  /// bind's check of the inputs' shapes against the contract (setting dim_values), after
  /// noting each dim's first valid size (`provisional`, what a way out keeps the others at).
  Status check_inputs(const TensorView* inputs, size_t n);
  /// bind's error for a guard that fails at dim_values, with the nearest admissible values.
  Status guard_failure(const fb::Guard* g) const;

  // create's steps (method.cc), in order.
  /// The contract, the expressions, the dims' state and the values' dtypes and ranks.
  void load(const Program& program, const fb::Method* method);
  /// The thread pool (one thread: none).
  Status start_pool(int threads);
  /// The delegate for the method's regions, when asked for and it can be had (else a warning).
  void attach_delegate(bool use_delegate);
  /// The arena: the caller's, checked, or allocated at the caps.
  Status allocate_arena(const MethodOptions& options, void* caller_arena, size_t caller_size);
  /// Points constants into the file and planned values into the arena; aliases at their roots.
  void point_views();
  /// Flat operand and attribute arrays, so execute walks plain arrays.
  void flatten_instructions();
  /// Which values' shapes read a data-dependent dim (they are placed at their reservation).
  void find_data_shaped();
  /// What kernels derive from attributes and operand ranks, once.
  void prepare_kernels();
  /// The execution order (schedule.cc): portable instructions and delegate regions, the jumps
  /// of runtime branches and loops, and each value's block.
  Status build_schedule();
  void map_value_blocks(const std::vector<format::Branch>& branches);
};

}  // namespace kiln
