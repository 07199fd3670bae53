#include "kernels/kernel.h"
#include "kernels/thread_pool.h"
#include "core/status.h"

#include <pthreadpool.h>

#include <algorithm>

#include <cstring>

namespace kiln::kernels {

Status ShapeCtx::error(const std::string& what) const {
  return invalid_argument("node '" + node_name + "' (" + op_type + "): " + what);
}

Status ShapeCtx::expect_inputs(size_t min, size_t max) const {
  if (inputs.size() < min || inputs.size() > max) {
    std::string range = min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max);
    return error("expects " + range + " inputs, got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < min; ++i)
    if (!inputs[i].present) return error("input #" + std::to_string(i) + " is required but missing");
  return ok_status();
}

Status ShapeCtx::expect_dtype(size_t i, DType t) const {
  if (inputs[i].dtype != t)
    return error("input #" + std::to_string(i) + " has dtype " + dtype_name(inputs[i].dtype) + ", expected " +
                 dtype_name(t));
  return ok_status();
}

Status ShapeCtx::add_guard(Guard::Op op, ExprId a, ExprId b, const std::string& why) {
  if (op == Guard::Op::kEq) {
    // State equalities in their smallest terms: k*x == k*y becomes x == y, and
    // d*floordiv(x,d) == x becomes x % d == 0.
    ExprId a2, b2;
    if (pool.cancel_common(a, b, &a2, &b2)) a = a2, b = b2;
    for (int flip = 0; flip < 2; ++flip) {
      const core::ExprNode& m = pool.node(a);
      if (m.op == core::ExprOp::kMul && pool.is_const(m.a)) {
        const core::ExprNode& q = pool.node(m.b);
        if (q.op == core::ExprOp::kFloorDiv && q.a == b && q.b == m.a) {
          op = Guard::Op::kDivisible;
          a = b;
          b = m.a;
          break;
        }
      }
      std::swap(a, b);
    }
  }
  // Small contracts are checked exhaustively: a relation that holds for every admissible
  // dim value needs no guard; one that holds for none is an export error.
  core::ExprPool::Census c = pool.census(a, static_cast<core::ExprPool::Relation>(op), b);
  if (c.complete && c.satisfied == c.assignments) return ok_status();
  if (c.complete && c.satisfied == 0) {
    std::string text =
        core::relation_text(pool.to_string(a), static_cast<core::ExprPool::Relation>(op), pool.to_string(b));
    return error(text + " holds for no admissible value of its dims " + why + "; widen or move the --dim ranges");
  }
  guards.push_back(Guard{op, a, b, node_name, op_type, why});
  return ok_status();
}

Status ShapeCtx::require_at_least(ExprId v, int64_t lo, const std::string& what) {
  if (pool.range(v).lo >= lo) return ok_status();
  const std::string below = lo == 0 ? "negative" : lo == 1 ? "0 or negative" : "below " + std::to_string(lo);
  if (pool.is_const(v)) return error(what + " (" + pool.to_string(v) + ") is " + below);
  const ExprId bound = pool.constant(lo);
  core::ExprPool::Census c = pool.census(v, core::ExprPool::Relation::kGe, bound, 100000);
  if (c.complete && c.satisfied == c.assignments) return ok_status();
  if (c.complete)
    return error(what + " (" + pool.to_string(v) + ") may be " + below + ": at " +
                 pool.assignment_text(c.dims, c.first_failure) + " it is " + std::to_string(c.failure_lhs));
  guards.push_back(Guard{Guard::Op::kGe, v, bound, node_name, op_type, "for " + what + " to be at least " + std::to_string(lo)});
  return ok_status();
}

Status ShapeCtx::require_eq(ExprId a, ExprId b, const std::string& why) {
  if (a == b) return ok_status();
  ExprId diff = pool.sub(a, b);
  if (pool.is_const(diff)) {
    if (pool.const_value(diff) == 0) return ok_status();
    return error("sizes " + pool.to_string(a) + " and " + pool.to_string(b) + " must be equal " + why);
  }
  core::Interval r = pool.range(diff);
  if (r.lo > 0 || r.hi < 0)
    return error("sizes " + pool.to_string(a) + " and " + pool.to_string(b) + " can never be equal " + why);
  return add_guard(Guard::Op::kEq, a, b, why);
  return ok_status();
}

Status ShapeCtx::require_divisible(ExprId a, int64_t k, const std::string& why) {
  ExprId m = pool.mod(a, pool.constant(k));
  if (pool.is_const(m)) {
    if (pool.const_value(m) == 0) return ok_status();
    return error("size " + pool.to_string(a) + " must be divisible by " + std::to_string(k) + " " + why);
  }
  return add_guard(Guard::Op::kDivisible, a, pool.constant(k), why);
  return ok_status();
}

Status ShapeCtx::require_ge(ExprId a, ExprId b, const std::string& why) {
  core::Interval r = pool.range(pool.sub(a, b));
  if (r.lo >= 0) return ok_status();
  if (r.hi < 0)
    return error("size " + pool.to_string(a) + " must be at least " + pool.to_string(b) + " " + why);
  return add_guard(Guard::Op::kGe, a, b, why);
  return ok_status();
}

Result<std::vector<ExprId>> ShapeCtx::broadcast(const std::vector<ExprId>& a, const std::vector<ExprId>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<ExprId> out(n);
  std::string why = "to broadcast " + pool.shape_to_string(a) + " with " + pool.shape_to_string(b);
  for (size_t k = 0; k < n; ++k) {
    ExprId x = k + a.size() >= n ? a[k + a.size() - n] : pool.constant(1);
    ExprId y = k + b.size() >= n ? b[k + b.size() - n] : pool.constant(1);
    if (x == y || pool.is_const_value(y, 1)) {
      out[k] = x;
    } else if (pool.is_const_value(x, 1)) {
      out[k] = y;
    } else {
      if (pool.is_const(x) && pool.is_const(y)) return error("cannot broadcast " + why.substr(13));
      KILN_TRY(require_eq(x, y, why));
      out[k] = pool.is_const(y) ? y : x;
    }
  }
  return out;
}

bool ShapeCtx::int_values(size_t i, std::vector<ExprId>* out) {
  out->clear();
  if (!has_input(i)) return false;
  const SymTensor& t = inputs[i];
  if (t.dtype != DType::kI64 && t.dtype != DType::kI32) return false;  // f32 and bool values are not sizes
  if (!t.sym_values.empty()) {
    *out = t.sym_values;
    return true;
  }
  if (!t.const_data) return false;
  int64_t n = 1;
  for (ExprId d : t.shape) {
    if (!pool.is_const(d)) return false;
    n *= pool.const_value(d);
  }
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = t.dtype == DType::kI64 ? static_cast<const int64_t*>(t.const_data)[k]
                                       : static_cast<const int32_t*>(t.const_data)[k];
    out->push_back(pool.constant(v));
  }
  return true;
}

bool ShapeCtx::const_ints(size_t i, std::vector<int64_t>* out) {
  std::vector<ExprId> e;
  out->clear();
  if (!int_values(i, &e)) return false;
  for (ExprId x : e) {
    if (!pool.is_const(x)) return false;
    out->push_back(pool.const_value(x));
  }
  return true;
}

bool ShapeCtx::const_floats(size_t i, std::vector<float>* out) const {
  out->clear();
  if (!has_input(i) || !inputs[i].const_data || inputs[i].dtype != DType::kF32) return false;
  int64_t n = 1;
  for (ExprId d : inputs[i].shape) {
    if (!pool.is_const(d)) return false;
    n *= pool.const_value(d);
  }
  const float* p = static_cast<const float*>(inputs[i].const_data);
  out->assign(p, p + n);
  return true;
}

Result<int64_t> ShapeCtx::normalize_axis(int64_t axis, int64_t rank) const {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    return error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

const char* kernel_status_message(KernelStatus s) {
  switch (s) {
    case KernelStatus::kOk: return "ok";
    case KernelStatus::kIndexOutOfRange: return "an index in the input data is out of range";
    case KernelStatus::kInvalidValue: return "the input data holds a value the op cannot accept";
  }
  return "unknown kernel failure";
}

void prepare_op(const OpDef& op, const core::Attrs& attrs, const TensorView* const* inputs, uint32_t num_inputs,
                OpData* data) {
  int32_t ranks[16];
  PrepareCtx pc;
  pc.attrs = attrs;
  pc.num_inputs = num_inputs < 16 ? num_inputs : 16;
  for (uint32_t k = 0; k < pc.num_inputs; ++k) ranks[k] = inputs[k] ? inputs[k]->rank : -1;
  pc.input_ranks = ranks;
  op.prepare(pc, data);
}

KernelStatus run_once(const OpDef& op, RunCtx ctx) {
  OpData data;
  if (op.prepare && !ctx.op_data) {
    prepare_op(op, ctx.attrs, ctx.inputs, ctx.num_inputs, &data);
    ctx.op_data = &data;
  }
  return op.run(ctx);
}

namespace {
struct ChunkJob {
  void (*fn)(void*, size_t, size_t);
  void* ctx;
  size_t n, chunk;
};
void run_chunks(const void* p, size_t b, size_t e) {
  const ChunkJob& j = *static_cast<const ChunkJob*>(p);
  j.fn(j.ctx, b * j.chunk, std::min(j.n, e * j.chunk));
}
}  // namespace

void parallel_for(const RunCtx& c, size_t n, size_t grain, void (*fn)(void* ctx, size_t begin, size_t end), void* ctx) {
  if (n == 0) return;
  const size_t threads = c.pool ? pthreadpool_get_threads_count(c.pool) : 1;
  grain = std::max<size_t>(1, grain);
  if (threads <= 1 || n <= grain) return fn(ctx, 0, n);
  // Chunks of at least the grain, about 8 per thread: the pool hands them out in guided
  // shares, so a thread the OS has preempted leaves its part to the others.
  const size_t chunk = std::max(grain, (n + 8 * threads - 1) / (8 * threads));
  const ChunkJob job{fn, ctx, n, chunk};
  run_on(c.pool, run_chunks, &job, (n + chunk - 1) / chunk);
}

}  // namespace kiln::kernels
