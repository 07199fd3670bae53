#pragma once
// The contract between an op file and the rest of Kiln.
//
// Every op provides two pure functions, side by side in src/kernels/portable/<op>.cc:
//   Status <op>_shape(ShapeCtx& c);          symbolic output dtypes/shapes + guards
//   KernelStatus <op>_run(const RunCtx& c);  compute at the actual (bound or smaller) shape
// and one line in ops.inc. View ops (Reshape, Flatten, Squeeze, Unsqueeze) provide only the
// shape function: their output aliases the input's bytes and no instruction is emitted.

#include <cstdint>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/symexpr.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::kernels {

using core::ExprId;

/// A tensor during export: dtype, symbolic shape, and its contents when known.
struct SymTensor {
  bool present = true;  ///< false for an omitted optional input
  DType dtype = DType::kF32;
  std::vector<ExprId> shape;
  /// Contents when the tensor is a constant (row-major, `dtype`), else nullptr.
  const void* const_data = nullptr;
  /// Contents of a small integer tensor known symbolically (e.g. a folded Shape result).
  std::vector<ExprId> sym_values;
  /// Outputs: set when the shape function defined it (through ShapeCtx::out), so a node that
  /// names more outputs than its op produces is refused, not left with an undefined one.
  bool defined = false;
};

/// A relation that shape inference needed between symbolic sizes; checked at bind.
struct Guard {
  enum class Op : uint8_t { kEq = 0, kGe = 1, kDivisible = 2 };  ///< lhs == rhs, lhs >= rhs, lhs % rhs == 0
  Op op = Op::kEq;
  ExprId lhs = core::kNoExpr;
  ExprId rhs = core::kNoExpr;
  std::string node_name;  ///< origin: the graph node that needed it
  std::string op_type;
  std::string context;  ///< why, e.g. "to broadcast [1,96,H] with [1,96,W]"
};
static_assert(static_cast<int>(Guard::Op::kEq) == static_cast<int>(core::ExprPool::Relation::kEq) &&
                  static_cast<int>(Guard::Op::kGe) == static_cast<int>(core::ExprPool::Relation::kGe) &&
                  static_cast<int>(Guard::Op::kDivisible) == static_cast<int>(core::ExprPool::Relation::kDivisible),
              "a guard's op is the pool's relation");

/// Shape inference for one node. Inputs are filled in by the caller; the shape function
/// fills `outputs` (already sized to the number of outputs requested) and may add guards.
class ShapeCtx {
 public:
  ShapeCtx(core::ExprPool& pool, core::Attrs attrs) : pool(pool), attrs(attrs) {}

  core::ExprPool& pool;
  core::Attrs attrs;
  std::vector<SymTensor> inputs;
  std::vector<SymTensor> outputs;
  std::vector<Guard> guards;
  /// Bytes of planned scratch memory the kernel needs (symbolic; kNoExpr = none). The
  /// planner gives it a slot alive only during this instruction; see RunCtx::scratch.
  ExprId scratch_bytes = core::kNoExpr;
  /// Set by an op that copies for some shapes but, for these, would write output 0 byte for
  /// byte as input 0 (e.g. a Transpose that moves only size-1 axes): the builder then makes
  /// the output a view of the input, as for the view ops.
  bool same_bytes = false;
  std::string node_name;
  std::string op_type;

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].present; }
  const SymTensor& in(size_t i) const { return inputs[i]; }
  SymTensor& out(size_t i) {
    outputs[i].defined = true;
    return outputs[i];
  }
  int64_t rank(size_t i) const { return static_cast<int64_t>(inputs[i].shape.size()); }

  /// Error naming the node: "node 'Conv_3' (Conv): <what>".
  Status error(const std::string& what) const;
  /// Fails unless min <= number of inputs <= max and inputs [0, min) are present.
  Status expect_inputs(size_t min, size_t max) const;
  /// Fails unless input i has dtype t.
  Status expect_dtype(size_t i, DType t) const;
  /// Requires a == b: passes when provably equal, fails when provably different,
  /// otherwise records a guard checked at bind.
  Status require_eq(ExprId a, ExprId b, const std::string& why);
  /// Requires a % k == 0 (k > 0), proving or guarding as require_eq does.
  Status require_divisible(ExprId a, int64_t k, const std::string& why);
  /// Requires a >= b.
  Status require_ge(ExprId a, ExprId b, const std::string& why);
  /// Requires size `v` >= lo (0: "negative", 1: "0 or negative") for every admissible dim
  /// value: proven by its range or, failing that, by the exact prover over every assignment;
  /// refused with a concrete assignment where it fails ("<what> (<v>) may be negative: at
  /// L = 3 it is -5"); beyond the prover's reach, a guard checked at bind.
  Status require_at_least(ExprId v, int64_t lo, const std::string& what);
  /// Records guard `a op b` unless checking every admissible dim value proves it (then
  /// nothing is recorded) or refutes it (then it is an error).
  Status add_guard(Guard::Op op, ExprId a, ExprId b, const std::string& why);
  /// Numpy-style broadcast of two shapes (guards equality of symbolic non-1 sizes).
  Result<std::vector<ExprId>> broadcast(const std::vector<ExprId>& a, const std::vector<ExprId>& b);
  /// Contents of an integer input as expressions (constant data or sym_values); false if unknown.
  bool int_values(size_t i, std::vector<ExprId>* out);
  /// Contents of an integer input as numbers; false if unknown or not all constant.
  bool const_ints(size_t i, std::vector<int64_t>* out);
  /// Contents of a float input as numbers; false if not constant.
  bool const_floats(size_t i, std::vector<float>* out) const;
  /// Normalizes a possibly negative axis against `rank`; error if out of [-rank, rank).
  Result<int64_t> normalize_axis(int64_t axis, int64_t rank) const;
};

/// Largest size-like attribute an op accepts (kernel size, stride, dilation, pad, hidden
/// size): far above real models, and small enough that shape arithmetic cannot overflow.
constexpr int64_t kMaxSizeAttr = int64_t{1} << 20;

/// Kernel outcome for data-dependent failures that bind cannot rule out.
enum class KernelStatus : uint8_t { kOk = 0, kIndexOutOfRange = 1, kInvalidValue = 2 };
const char* kernel_status_message(KernelStatus s);

/// What a kernel derives once from its attributes (and its operands' ranks), at
/// Method::create, as TFLite Micro's Prepare: execute then reads it instead of looking
/// attributes up by name. Plain data, at most kOpDataBytes.
constexpr size_t kOpDataBytes = 160;
struct alignas(16) OpData {
  unsigned char bytes[kOpDataBytes];
  template <typename T>
  T& as() {
    static_assert(sizeof(T) <= kOpDataBytes && alignof(T) <= 16, "op data too large");
    return *reinterpret_cast<T*>(bytes);
  }
  template <typename T>
  const T& as() const {
    static_assert(sizeof(T) <= kOpDataBytes && alignof(T) <= 16, "op data too large");
    return *reinterpret_cast<const T*>(bytes);
  }
};

/// What a prepare function sees: the instruction's attributes (validated by its shape
/// function) and the ranks of its inputs (-1 for an omitted one).
struct PrepareCtx {
  core::Attrs attrs;
  const int32_t* input_ranks = nullptr;
  uint32_t num_inputs = 0;
};

/// Everything a kernel sees while executing: operands at their actual shapes.
/// An omitted optional input is a nullptr.
struct RunCtx {
  const TensorView* const* inputs = nullptr;
  uint32_t num_inputs = 0;
  TensorView* const* outputs = nullptr;
  uint32_t num_outputs = 0;
  core::Attrs attrs;
  /// Every SymExpr of the method evaluated at bind (index = ExprId); lets a kernel read
  /// sizes that export folded into expressions (see symbolic_ints.cc).
  const int64_t* expr_values = nullptr;
  /// Planned scratch (64-byte aligned) of at least the bytes the shape function asked for,
  /// evaluated at the actual shapes; nullptr when none was asked for.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  /// What the op's prepare function derived at create; nullptr for ops without one.
  const OpData* op_data = nullptr;
  /// The Method's thread pool (MethodOptions::cpu_threads > 1), or nullptr: run on the
  /// calling thread. Kernels split work with parallel_for, sized from the actual shapes.
  pthreadpool_t pool = nullptr;
  /// Ops that produce a data-dependent size (NonZero): where to write it. The Method then
  /// re-evaluates every shape that reads it before the next instruction runs.
  int64_t* produced_dim = nullptr;

  bool has_input(uint32_t i) const { return i < num_inputs && inputs[i] != nullptr; }
  const TensorView& in(uint32_t i) const { return *inputs[i]; }
  TensorView& out(uint32_t i) const { return *outputs[i]; }
};

using ShapeFn = Status (*)(ShapeCtx&);
using RunFn = KernelStatus (*)(const RunCtx&);
using PrepareFn = void (*)(const PrepareCtx&, OpData*);

/// One registered op.
struct OpDef {
  const char* name;
  ShapeFn shape;
  RunFn run;  ///< nullptr for view ops
  bool view;  ///< output aliases input 0 (contiguous reinterpretation)
  PrepareFn prepare;  ///< nullptr when run reads nothing prepared
};

/// Runs op.prepare (which it must have) for these attributes and operands (only their ranks
/// are read; a null operand has rank -1): what a Method does once per instruction at create.
void prepare_op(const OpDef& op, const core::Attrs& attrs, const TensorView* const* inputs, uint32_t num_inputs,
                OpData* data);

/// Runs `op` once outside a Method (export's folding, tests): prepares from ctx's attributes
/// and input ranks when the op has a prepare function and ctx has no op data, then runs.
KernelStatus run_once(const OpDef& op, RunCtx ctx);

/// True for the ops that produce no output (KilnIf, KilnElse, KilnAssert: they act on
/// execution, not on values); every other op writes output 0.
bool produces_no_outputs(const OpDef& op);

/// True for the instructions whose output size is a data-dependent dim they write when they
/// run (NonZero, Compress, Unique, NonMaxSuppression, and TopK with K read from the data;
/// attribute "dim" names it).
bool produces_data_dim(const OpDef& op, const core::Attrs& attrs);
/// The data-dependent dim such an op's attribute "dim" names, as an expression; an error
/// naming the attribute when it names none.
Result<ExprId> data_dim_attr(ShapeCtx& c);

/// Whether a runtime branch's condition (KilnIf, KilnSelect) selects the then block.
bool branch_condition(const TensorView& cond);

/// The op registered under `name` (ONNX op type), or nullptr.
const OpDef* find_op(const char* name);
/// All registered ops, in ops.inc order.
const OpDef* all_ops(size_t* count);

/// Clamps to [lo, hi] keeping NaN (the non-finite rule, README): comparisons with NaN are
/// false, so NaN passes both tests; lo > hi yields hi (ONNX Clip). std::min/std::max and x86
/// max/min instructions return the other operand for NaN: never clamp with them.
template <typename T>
inline T clamp_keep_nan(T x, T lo, T hi) {
  const T v = x < lo ? lo : x;
  return v > hi ? hi : v;
}

/// Runs fn(begin, end) over [0, n) in chunks of at least `grain` items, split over c.pool
/// when there is one and more than one chunk (else inline). Work per call, not per item: the
/// caller sizes `grain` so a chunk is worth waking a thread for.
void parallel_for(const RunCtx& c, size_t n, size_t grain, void (*fn)(void* ctx, size_t begin, size_t end), void* ctx);

template <typename F>
void parallel_for(const RunCtx& c, size_t n, size_t grain, F&& f) {
  parallel_for(c, n, grain, [](void* p, size_t b, size_t e) { (*static_cast<F*>(p))(b, e); }, &f);
}

}  // namespace kiln::kernels
