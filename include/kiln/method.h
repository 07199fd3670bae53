#pragma once
// A method ready to run: arena, resolved kernels, bind (contract check) and execute.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/program.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

/// One row of a Method's profile: a portable instruction, or one step of a delegate region
/// (an XNNPACK operator or Kiln kernel computing an instruction, or a layout change).
struct ProfileRow {
  std::string op;      ///< "Conv", "Conv+Relu", "ToNhwc"
  std::string node;    ///< the instruction's node name (layout changes: the value's name)
  bool delegated = false;
  std::string shape;   ///< output shape at the current bind ("1x64x40x40")
  uint64_t ns = 0;     ///< total nanoseconds over `runs` executions
  uint64_t runs = 0;
  /// delegated: computed inside the next step at the current bind (a depthwise convolution whose
  /// rows go straight to the 1x1 convolution after it), whose time includes this one's.
  bool in_next = false;
};

/// Where execute's wall time went between this Method's threads and the rest of the machine,
/// while profiling was on (Method::thread_profile()).
struct ThreadProfile {
  int threads = 1;
  uint64_t runs = 0;          ///< executions profiled
  uint64_t jobs = 0;          ///< parallel jobs (an op's parallel loop), over `runs`
  uint64_t items = 0;         ///< their work items; `worker_items` of them ran on the workers
  uint64_t worker_items = 0;
  uint64_t wait_ns = 0;       ///< the caller waiting for workers' chunks after finishing its own
  uint64_t long_waits = 0;    ///< waits over 200 us: a worker preempted while it held a chunk
  uint64_t alone_jobs = 0;    ///< jobs the caller ran alone: the workers had found no core
  uint64_t moves = 0;         ///< workers moved off the caller's core, where the OS had queued them
  uint64_t wall_ns = 0;       ///< execute's wall time over `runs`
  uint64_t caller_cpu_ns = 0; ///< the calling thread's CPU time in it: below wall_ns, the OS ran other work on its core
};

/// How a Method runs.
struct MethodOptions {
  /// Run the program's delegate regions (XNNPACK) when it has them; false runs every
  /// instruction with the portable kernels.
  bool use_delegate = true;
  /// Threads of the Method's one thread pool (>= 1), shared by the delegate and the kernels
  /// that parallelize.
  int cpu_threads = 1;
  /// Tightened bounds: the largest shape of each input this Method will be bound to (empty:
  /// the program's bound). They must satisfy the contract; create then allocates only what
  /// they need (for a program whose plan places by shape), and bind refuses larger shapes.
  std::vector<std::vector<int64_t>> max_shapes;
  /// When the delegate runs a step that can turn a NaN into a number (XNNPACK's convolution and
  /// fully connected operators: their fused clamps keep the non-NaN operand), execute first
  /// checks every float input for NaN and Inf and, on finding one, runs nothing and returns
  /// kInvalidArgument with Reason::kNonFiniteInput, naming the input and the element: without
  /// the check a sensor fault could come out as a plausible answer. The portable kernels, and
  /// a delegate whose every step is Kiln's own kernel or an XNNPACK operator without a clamp,
  /// propagate NaN and Inf and need no check (checks_finite_inputs() says which). The scan
  /// reads each input once (under 1% of execute; bench/results/nonfinite_check.md). false: skip it.
  bool check_finite_inputs = true;
};

/// Executes one method of a Program. Life cycle: create -> (bind -> write inputs -> execute
/// -> read outputs)*. create allocates (instruction tables, and the arena when the caller
/// gives none); bind allocates nothing unless it fails; execute never allocates.
///
/// Threads: one Method runs one call at a time; it is not safe to call a Method from two
/// threads at once (bind, execute and the views they update share its arena). Use one Method
/// per thread: Methods created from the same Program run concurrently and share its weights.
/// const members (meta, input, output, the lookups) may be read concurrently while no thread
/// calls a non-const member.
class Method {
 public:
  /// `arena` (optional) must be 16-byte aligned, at least meta().arena_bytes long, and
  /// outlive the Method; without it the Method owns an arena of the planned size.
  static Result<std::unique_ptr<Method>> create(const Program& program, const std::string& name,
                                                void* arena = nullptr, size_t arena_size = 0);
  /// create() with options. A delegate that cannot initialize (unsupported CPU, an operator
  /// XNNPACK refuses) is not an error: the Method runs portable and delegate_warning() says why.
  /// With a caller arena, it must hold arena_bytes(program, name, options) bytes.
  static Result<std::unique_ptr<Method>> create(const Program& program, const std::string& name,
                                                const MethodOptions& options, void* arena = nullptr,
                                                size_t arena_size = 0);
  /// Arena bytes create() needs for this method with these options (the delegate's plan when
  /// it would run, else the portable plan).
  static Result<uint64_t> arena_bytes(const Program& program, const std::string& name, const MethodOptions& options);
  ~Method();
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

  const MethodMeta& meta() const;
  size_t num_inputs() const;
  size_t num_outputs() const;

  /// Checks the inputs' dtypes and shapes against the contract (rank, static sizes, dim
  /// ranges and steps, shared dims, guards), then evaluates every shape once. Data pointers
  /// are ignored. Errors are kInvalidArgument/kOutOfRange with a message naming the input,
  /// axis, both values, the contract and the way out.
  Status bind(const TensorView* inputs, size_t n);
  /// bind() with the program's dtypes.
  Status bind_shapes(const std::vector<std::vector<int64_t>>& shapes);
  /// The shape bind() would use if called with no inputs changed: each input at its bound.
  std::vector<std::vector<int64_t>> bound_shapes() const;
  bool is_bound() const;

  /// Index of the input or output named `name` (as in meta().inputs / outputs); kNotFound
  /// lists the names there are.
  Result<size_t> input_index(const std::string& name) const;
  Result<size_t> output_index(const std::string& name) const;

  /// Input i in the arena: its shape at the bound (before bind) or the bound-to shape. Read
  /// only: bind sets the shape. An index >= num_inputs() gives an empty view (rank 0, data null).
  const TensorView& input(size_t i) const;
  /// Where to write input i's data before execute (input(i).nbytes() bytes), or nullptr when i
  /// >= num_inputs(). The typed form also returns nullptr when T is not the input's dtype.
  void* input_data(size_t i);
  template <typename T>
  T* input_data(size_t i) {
    return i < num_inputs() && input(i).dtype == dtype_of<T>() ? static_cast<T*>(input_data(i)) : nullptr;
  }
  /// bind(inputs) and copy each input's data into the arena.
  Status set_inputs(const TensorView* inputs, size_t n);

  /// Runs every instruction at the bound-to shapes. kFailedPrecondition before bind;
  /// a data-dependent kernel failure (e.g. Gather index out of range) names the node.
  Status execute();

  /// Output i at its actual shape after execute. Points into the arena (or the constant
  /// segment, which is read-only memory); valid until the next bind/execute. An index >=
  /// num_outputs() gives an empty view (rank 0, data null).
  const TensorView& output(size_t i) const;

  /// True when delegate regions run (false: portable only, by option, absence or fallback).
  bool delegated() const;
  /// True when execute checks the float inputs for NaN and Inf first
  /// (MethodOptions::check_finite_inputs): the delegate runs, and one of its steps could turn a
  /// NaN into a number. A delegate whose every step carries NaN and Inf as the portable
  /// kernels do (Kiln's own kernels; XNNPACK's unary maps and copies) needs no check.
  bool checks_finite_inputs() const;
  /// Why the delegate did not initialize ("" when it did or was not asked for).
  const std::string& delegate_warning() const;
  /// Bytes the delegate allocated at create for packed weights and operator state.
  uint64_t delegate_packed_bytes() const;
  /// Arena bytes in use (the plan this Method runs).
  uint64_t planned_arena_bytes() const;
  /// Arena bytes the values take at the bound-to shapes (before any bind: at the bound).
  /// Programs whose plan places by shape pack their values for the shapes of each bind, so
  /// this follows the shape; the rest of the arena is never touched (and, for an arena the
  /// Method allocated, costs no resident memory until it is; an owned arena of 2 MiB or more is
  /// advised as transparent huge pages on Linux, so memory is then committed 2 MiB at a time).
  uint64_t arena_bytes_in_use() const;

  /// Times every step of execute from now on (two clock reads per step; no allocation),
  /// or stops timing. Turning it on clears what was measured.
  void set_profiling(bool on);
  /// What execute took per step since profiling was turned on, in execution order.
  std::vector<ProfileRow> profile() const;
  /// What the thread pool did since profiling was turned on: where 2 threads lose to 1 on a
  /// CPU shared with other work (the caller waiting for a preempted worker).
  ThreadProfile thread_profile() const;

  /// Value of dim `name` after bind, or -1. A data-dependent dim (DimSpec::data, NonZero's
  /// count) reads its bound after bind and its actual value after execute, when the outputs'
  /// shapes (output(i).dims) follow it.
  int64_t dim_value(const std::string& name) const;


 private:
  friend struct MethodAccess;  // tools' and tests' access (src/runtime/program_impl.h)
  struct Impl;
  explicit Method(std::unique_ptr<Impl> impl);
  static Result<std::unique_ptr<Method>> create_method(const Program& program, const std::string& name,
                                                       const MethodOptions& options, void* arena, size_t arena_size);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
