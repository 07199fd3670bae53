#include "kiln/method.h"

#include "core/bytes.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include <pthreadpool.h>

#include "delegates/xnnpack/delegate.h"
#include "kernels/thread_pool.h"
#include "kernels/kernel.h"
#include "format/file_header.h"
#include "core/oom.h"
#include "runtime/program_impl.h"

namespace kiln {

namespace {

struct Instr {
  const kernels::OpDef* op = nullptr;
  uint32_t in_begin = 0, n_in = 0, out_begin = 0, n_out = 0, attr_begin = 0, n_attr = 0;
  const TensorView* scratch = nullptr;
  int32_t index = 0;
  int32_t produces = -1;  ///< the data-dependent dim it sets (NonZero's count), or -1
};

std::string shape_text(const int64_t* dims, int rank, const char* sep) {
  std::string s;
  for (int k = 0; k < rank; ++k) s += (k ? sep : "") + std::to_string(dims[k]);
  return s;
}

std::string shape_text(const std::vector<int64_t>& v, const char* sep) {
  return shape_text(v.data(), static_cast<int>(v.size()), sep);
}

}  // namespace

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
  std::unique_ptr<delegates::xnnpack::Delegate> delegate;
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
  std::vector<int32_t> instr_block;  ///< per instruction: its innermost block, or -1
  /// Data-dependent dims (DimSpec::data): bind takes each at its max, and the values whose
  /// shapes read one (`data_shaped`) are placed at their reservation; once the instruction
  /// that produces a dim runs, refresh_data_shapes() sizes them.
  std::vector<int32_t> data_dims;
  std::vector<bool> data_shaped;
  Status refresh_data_shapes(const Instr& producer);
  /// The error execute gives on entering block `b` that bind marked.
  Status blocked(int32_t b) const;
  std::vector<Step> schedule;
  bool profiling = false;
  bool check_finite = true;  // MethodOptions::check_finite_inputs, when the delegate runs
  /// execute's check of the float inputs for NaN and Inf (the delegate would hide them).
  Status check_finite_inputs() const;
  std::vector<uint64_t> instr_ns;  // profiling: per portable instruction
  uint64_t profiled_runs = 0;
  kernels::ThreadPool::Stats pool_at_start;  // profiling: the pool's counters when it was turned on

  ~Impl() {
    delegate.reset();
    if (pool) pthreadpool_destroy(pool);
    std::free(owned_arena);
  }

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
  /// create's one-line refusal when the arena of `bytes` cannot be allocated: its size, the
  /// shapes it was planned for (the bound, or `max_shapes`) and the ways out.
  std::string arena_failure(uint64_t bytes, const std::vector<std::vector<int64_t>>& max_shapes) const;
  /// Each input's shape with every dim at its largest admissible value.
  std::vector<std::vector<int64_t>> bound_shapes() const;
};

namespace {
// One pass of a plan's placement: each value in `order` just above the values of its list at
// their sizes. Returns the arena bytes it takes; `offsets` holds one entry per value.
template <class Size>
uint64_t place_values(const fb::MemoryPlan* plan, Size size, uint64_t* offsets) {
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
}  // namespace

Status Method::Impl::set_caps(const std::vector<std::vector<int64_t>>& max_shapes) {
  dim_cap.resize(meta.dims.size());
  for (size_t d = 0; d < dim_cap.size(); ++d) dim_cap[d] = meta.dims[d].max;
  cap_bytes.resize(m->values()->size());
  for (size_t v = 0; v < cap_bytes.size(); ++v) cap_bytes[v] = m->values()->Get(v)->nbytes();
  if (max_shapes.empty()) return ok_status();
  // The contract's own check of the shapes, then each dim's value is its cap.
  std::vector<TensorView> t(max_shapes.size());
  if (max_shapes.size() != inputs.size())
    return invalid_argument("max_shapes gives " + std::to_string(max_shapes.size()) + " shapes; method '" + meta.name +
                            "' takes " + std::to_string(inputs.size()) + " inputs");
  std::fill(dim_origin.begin(), dim_origin.end(), -1);
  std::fill(provisional.begin(), provisional.end(), -1);
  for (size_t i = 0; i < t.size(); ++i) {
    if (max_shapes[i].size() > static_cast<size_t>(kMaxRank))
      return invalid_argument("max_shapes: input #" + std::to_string(i) + " has rank above " + std::to_string(kMaxRank));
    t[i].dtype = meta.inputs[i].dtype;
    t[i].rank = static_cast<int32_t>(max_shapes[i].size());
    for (size_t k = 0; k < max_shapes[i].size(); ++k) t[i].dims[k] = max_shapes[i][k];
    KILN_TRY(check_input(i, t[i]).with_prefix("max_shapes: "));
  }
  for (size_t d = 0; d < dim_cap.size(); ++d)
    if (dim_origin[d] >= 0) dim_cap[d] = dim_values[d];
  // Each value's size at most over [min, cap] of every dim (interval arithmetic: sound).
  std::vector<core::Interval> r(exprs.size());
  for (size_t i = 0; i < exprs.size(); ++i) {
    const core::ExprNode& e = exprs[i];
    core::Interval a, b;
    if (e.op == core::ExprOp::kDim) a = {meta.dims[e.a].min, dim_cap[e.a]};
    else if (e.op != core::ExprOp::kConst) a = r[e.a], b = r[e.b];
    r[i] = core::node_range(e.op, a, b, e.value);
  }
  for (size_t v = 0; v < cap_bytes.size(); ++v) {
    const fb::Value* value = m->values()->Get(v);
    if (value->storage() == fb::StorageKind::Constant) continue;
    uint64_t n = dtype_size(static_cast<DType>(value->dtype()));
    for (int32_t e : *value->shape()) {
      const uint64_t hi = static_cast<uint64_t>(std::max<int64_t>(0, r[e].hi));
      n = hi != 0 && n > cap_bytes[v] / hi ? cap_bytes[v] : n * hi;  // never above the bound's
    }
    cap_bytes[v] = std::min(cap_bytes[v], n);
  }
  return ok_status();
}

std::string Method::Impl::arena_failure(uint64_t bytes, const std::vector<std::vector<int64_t>>& max_shapes) const {
  auto shapes_text = [](const std::vector<std::vector<int64_t>>& shapes) {
    std::string t;
    for (size_t i = 0; i < shapes.size(); ++i) t += (i ? "," : "") + (shapes[i].empty() ? "scalar" : shape_text(shapes[i], "x"));
    return t;
  };
  const std::string size = core::human_bytes(bytes) + " (" + std::to_string(bytes) + " bytes";
  if (!max_shapes.empty())
    return "cannot allocate the arena for method '" + meta.name + "': " + size + ", planned for max_shapes " +
           shapes_text(max_shapes) + "); give smaller max_shapes (kiln_runner --max_shapes) or free memory";
  return "cannot allocate the arena for method '" + meta.name + "': " + size + ", planned at the bound " +
         shapes_text(bound_shapes()) + "); give max_shapes for the largest shapes you will run (kiln_runner --max_shapes, Python "
         "max_shapes=), or re-export with smaller --dim bounds";
}

Status Method::Impl::place(bool at_caps) {
  if (!placing) return ok_status();
  const uint64_t top = at_caps ? place_values(placing, [&](int32_t v) { return cap_bytes[v]; }, offsets_now.data())
                               : place_values(placing, [&](int32_t v) {
                                   return !data_shaped.empty() && data_shaped[static_cast<size_t>(v)] ? cap_bytes[v] : views[v].nbytes();
                                 }, offsets_now.data());
  if (top > arena_bytes)
    return internal_error("the placement at these shapes needs " + std::to_string(top) + " arena bytes, more than the " +
                          std::to_string(arena_bytes) + " allocated");
  for (int32_t v : *placing->order()) views[v].data = arena + offsets_now[v];
  for (const auto& [a, root] : aliases) views[a].data = views[root].data;
  placed_bytes = top;
  return ok_status();
}

bool Method::Impl::admits(const std::vector<int64_t>& dims, const std::vector<bool>& known) const {
  std::vector<int64_t> v(exprs.size());
  if (!core::eval_exprs(exprs.data(), exprs.size(), dims.data(), v.data(), nullptr)) return false;
  auto decided = [&](int32_t e) {  // reads only known dims
    const std::vector<bool> used = dims_read(e);
    for (size_t k = 0; k < used.size(); ++k)
      if (used[k] && !known[k]) return false;
    return true;
  };
  if (m->guards())
    for (const fb::Guard* g : *m->guards()) {
      const int64_t l = v[g->lhs()], r = v[g->rhs()];
      const bool pass = g->op() == fb::GuardOp::Eq ? l == r : g->op() == fb::GuardOp::Ge ? l >= r : (r != 0 && l % r == 0);
      if (!pass && decided(g->lhs()) && decided(g->rhs())) return false;
    }
  for (const fb::Value* value : *m->values())
    for (int32_t e : *value->shape())
      if (v[e] < 0 && decided(e)) return false;
  return true;
}

std::vector<int> Method::Impl::tied_dims(int d) const {
  std::vector<int> tied = {d};
  for (bool grew = true; grew && m->guards();) {
    grew = false;
    for (const fb::Guard* g : *m->guards()) {
      const core::ExprNode &l = exprs[g->lhs()], &r = exprs[g->rhs()];
      if (g->op() != fb::GuardOp::Eq || l.op != core::ExprOp::kDim || r.op != core::ExprOp::kDim) continue;
      const bool has_l = std::find(tied.begin(), tied.end(), l.a) != tied.end();
      const bool has_r = std::find(tied.begin(), tied.end(), r.a) != tied.end();
      if (has_l != has_r) {
        tied.push_back(has_l ? r.a : l.a);
        grew = true;
      }
    }
  }
  return tied;
}

int64_t Method::Impl::nearest_admissible(int d, int64_t got) const {
  constexpr int kTries = 4096;
  const DimSpec& s = meta.dims[static_cast<size_t>(d)];
  std::vector<int64_t> dims(provisional.size());
  std::vector<bool> known(provisional.size());
  const std::vector<int> tied = tied_dims(d);
  for (size_t k = 0; k < dims.size(); ++k) {
    known[k] = provisional[k] >= 0 || std::find(tied.begin(), tied.end(), static_cast<int>(k)) != tied.end();
    dims[k] = provisional[k] >= 0 ? provisional[k] : meta.dims[k].min;
  }
  auto ok = [&](int64_t v) {
    for (int t : tied) dims[static_cast<size_t>(t)] = v;
    return admits(dims, known);
  };
  // Bounds are on the step's grid (export checks), so are these; a cap (max_shapes) may not be.
  const int64_t hi = dim_cap.empty() ? s.max : core::floor_div(dim_cap[static_cast<size_t>(d)], s.step) * s.step;
  int64_t up = -1, down = -1;
  if (got <= hi) {
    int64_t v = got < s.min ? s.min : core::ceil_div(got, s.step) * s.step;
    for (int k = 0; k < kTries && v <= hi && up < 0; ++k, v += s.step)
      if (ok(v)) up = v;
  }
  if (got > s.min) {
    int64_t v = got > hi ? hi : core::floor_div(got - 1, s.step) * s.step;
    for (int k = 0; k < kTries && v >= s.min && down < 0; ++k, v -= s.step)
      if (ok(v)) down = v;
  }
  if (up < 0) return down;
  if (down < 0) return up;
  // Compared as distances from got, which lies between them (no overflow: both are in range).
  return up - got <= got - down ? up : down;
}

std::string Method::Impl::way_out(int d, int64_t got) const {
  const int64_t v = nearest_admissible(d, got);
  if (v < 0) return "";
  std::string also;  // tied dims the inputs give another size
  for (int t : tied_dims(d))
    if (t != d && provisional[t] >= 0 && provisional[t] != v) also += (also.empty() ? "" : ", ") + dim_names[t];
  return (v > got ? "; pad on the host to " : "; crop or resize on the host to ") + std::to_string(v) +
         (also.empty() ? "" : " (and " + also + " to " + std::to_string(v) + ", which must equal it)");
}

std::vector<bool> Method::Impl::dims_read(int32_t id) const {
  std::vector<bool> used(dim_values.size(), false), seen(exprs.size(), false);
  std::vector<int32_t> stack = {id};
  while (!stack.empty()) {
    int32_t e = stack.back();
    stack.pop_back();
    if (e < 0 || seen[e]) continue;
    seen[e] = true;
    if (exprs[e].op == core::ExprOp::kDim) {
      used[exprs[e].a] = true;
    } else if (exprs[e].op != core::ExprOp::kConst) {
      stack.push_back(exprs[e].a);
      stack.push_back(exprs[e].b);
    }
  }
  return used;
}

std::string Method::Impl::dims_of_expr(int32_t id) const {
  // Lists "H = 100, W = 64" for the dims an expression reads.
  const std::vector<bool> used = dims_read(id);
  std::string s;
  for (size_t d = 0; d < used.size(); ++d)
    if (used[d]) s += (s.empty() ? "" : ", ") + dim_names[d] + " = " + std::to_string(dim_values[d]);
  return s;
}

Status Method::Impl::check_input(size_t i, const TensorView& t) {
  const TensorSpec& spec = meta.inputs[i];
  const fb::Value* v = m->values()->Get(inputs[i]);
  if (t.dtype != spec.dtype)
    return invalid_argument("input " + input_label(i) + " has dtype " + dtype_name(t.dtype) + " but the program expects " +
                            dtype_name(spec.dtype) + "; convert it on the host");
  if (t.rank != static_cast<int32_t>(spec.axes.size()))
    return invalid_argument("input " + input_label(i) + " has rank " + std::to_string(t.rank) + " (shape " +
                            shape_text(t.dims, t.rank, "x") + ") but the program expects rank " +
                            std::to_string(spec.axes.size()) + " " + spec.shape_text());
  for (int k = 0; k < t.rank; ++k) {
    const core::ExprNode& e = exprs[v->shape()->Get(k)];
    int64_t got = t.dims[k];
    auto axis = [&] { return "input " + input_label(i) + " dim " + std::to_string(k); };  // for messages only
    if (e.op == core::ExprOp::kConst) {
      if (got != e.value) {
        // The shape it was exported from when one is known; else the program's shape for it.
        std::string example = spec.example_shape.empty() ? " (the program's input is " + spec.shape_text() + ")"
                                                         : " (exported from example shape " + shape_text(spec.example_shape, "x") + ")";
        return invalid_argument(axis() + " is " + std::to_string(got) + " but the program fixed it to " +
                                std::to_string(e.value) + example +
                                "; resize on the host or re-export with --dim to make it dynamic");
      }
      continue;
    }
    const DimSpec& d = meta.dims[e.a];
    if (got < d.min || got > d.max)
      return out_of_range(axis() + " ('" + d.name + "') is " + std::to_string(got) + ", outside its range [" +
                          std::to_string(d.min) + ", " + std::to_string(d.max) + "]" + way_out(e.a, got));
    if (!dim_cap.empty() && got > dim_cap[e.a])
      return out_of_range(axis() + " ('" + d.name + "') is " + std::to_string(got) + ", above " +
                          std::to_string(dim_cap[e.a]) + ", the most this Method was created for (max_shapes; the "
                          "program admits up to " + std::to_string(d.max) + ")" + way_out(e.a, got));
    if (got % d.step != 0)
      return out_of_range(axis() + " ('" + d.name + "') is " + std::to_string(got) + ", not a multiple of its step " +
                          std::to_string(d.step) + " (range [" + std::to_string(d.min) + ", " + std::to_string(d.max) +
                          "])" + way_out(e.a, got));
    if (dim_origin[e.a] >= 0) {
      if (dim_values[e.a] != got) {
        size_t oi = static_cast<size_t>(dim_origin[e.a] >> 8);
        int ok = dim_origin[e.a] & 0xff;
        return invalid_argument("inputs '" + meta.inputs[oi].name + "' dim " + std::to_string(ok) + " and '" + spec.name +
                                "' dim " + std::to_string(k) + " share dim '" + d.name + "' and must be equal: got " +
                                std::to_string(dim_values[e.a]) + " and " + std::to_string(got));
      }
    } else {
      dim_values[e.a] = got;
      dim_origin[e.a] = static_cast<int32_t>(i << 8 | static_cast<size_t>(k));
    }
  }
  return ok_status();
}

Status Method::Impl::apply_shapes() {
  size_t bad = 0;
  if (!core::eval_exprs(exprs.data(), exprs.size(), dim_values.data(), expr_values.data(), &bad))
    return invalid_argument("shape expression " + core::format_expr(exprs.data(), exprs.size(), dim_names, static_cast<int32_t>(bad)) +
                            " divides by zero or overflows int64 for " + dims_of_expr(static_cast<int32_t>(bad)));
  if (m->guards()) {
    for (const fb::Guard* g : *m->guards()) {
      int64_t l = expr_values[g->lhs()], r = expr_values[g->rhs()];
      bool pass = g->op() == fb::GuardOp::Eq ? l == r : g->op() == fb::GuardOp::Ge ? l >= r : (r != 0 && l % r == 0);
      if (pass) continue;
      std::string vars = dims_of_expr(g->lhs());
      std::string rvars = dims_of_expr(g->rhs());
      if (!rvars.empty() && rvars != vars) vars += (vars.empty() ? "" : ", ") + rvars;
      std::string origin = g->node_name() ? g->node_name()->str() : "";
      std::string op = g->op_type() ? g->op_type()->str() : "";
      std::string ctx = g->context() && g->context()->size() ? " " + g->context()->str() : "";
      // The way out: for each dim the guard reads, its nearest value that the others admit.
      std::vector<int32_t> read;
      for (int32_t root : {g->lhs(), g->rhs()}) {
        std::vector<int32_t> stack = {root};
        while (!stack.empty()) {
          const int32_t x = stack.back();
          stack.pop_back();
          if (exprs[x].op == core::ExprOp::kDim) {
            if (std::find(read.begin(), read.end(), exprs[x].a) == read.end()) read.push_back(exprs[x].a);
          } else if (exprs[x].op != core::ExprOp::kConst) {
            stack.push_back(exprs[x].a);
            stack.push_back(exprs[x].b);
          }
        }
      }
      std::sort(read.begin(), read.end());
      std::vector<std::string> options;
      for (int32_t d : read) {
        const int64_t v = nearest_admissible(d, dim_values[d]);
        if (v < 0) continue;
        std::vector<int> tied = tied_dims(d);  // they move together: "seq = W = 4"
        std::sort(tied.begin(), tied.end());
        std::string option;
        for (int t : tied) option += dim_names[t] + " = ";
        option += std::to_string(v);
        if (std::find(options.begin(), options.end(), option) == options.end()) options.push_back(option);
      }
      std::string nearby;
      for (const std::string& o : options) nearby += (nearby.empty() ? "; the nearest admissible: " : " or ") + o;
      return Status(Code::kInvalidArgument,
                    "guard " + runtime::guard_text(g, exprs, dim_names) + " failed for " + vars + " (needed by node '" +
                        origin + "' (" + op + ")" + ctx + ")" + nearby,
                    Reason::kGuardFailed);
    }
  }
  std::fill(block_bad.begin(), block_bad.end(), -1);
  for (size_t i = 0; i < views.size(); ++i) {
    const fb::Value* v = m->values()->Get(i);
    TensorView& t = views[i];
    const int32_t blk = value_block.empty() ? -1 : value_block[i];
    if (blk >= 0) {  // inside a block: an invalid shape marks the block instead of failing bind
      bool valid = true;
      uint64_t n = dtype_size(t.dtype);
      for (int k = 0; k < t.rank; ++k) {
        const int64_t d = expr_values[v->shape()->Get(k)];
        valid = valid && d >= 0 && !__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n);
      }
      const uint64_t limit = v->storage() == fb::StorageKind::Alias ? m->values()->Get(v->alias_of())->nbytes() : v->nbytes();
      if (!valid || n > limit) {
        if (block_bad[static_cast<size_t>(blk)] < 0) block_bad[static_cast<size_t>(blk)] = static_cast<int32_t>(i);
        for (int k = 0; k < t.rank; ++k) t.dims[k] = 0;  // never read: execute refuses the block
        continue;
      }
    }
    for (int k = 0; k < t.rank; ++k) {
      int64_t d = expr_values[v->shape()->Get(k)];
      if (d < 0)
        return invalid_argument("value '" + v->name()->str() + "' would have negative size " + std::to_string(d) +
                                " on axis " + std::to_string(k) + " for " + dims_of_expr(v->shape()->Get(k)));
      t.dims[k] = d;
    }
    uint64_t limit = v->storage() == fb::StorageKind::Alias ? m->values()->Get(v->alias_of())->nbytes() : v->nbytes();
    if (t.nbytes() > limit)
      return internal_error("value '" + v->name()->str() + "' needs " + std::to_string(t.nbytes()) +
                            " bytes but the plan reserved " + std::to_string(limit));
  }
  return ok_status();
}

Method::Method(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Method::~Method() = default;

Result<std::unique_ptr<Method>> Method::create(const Program& program, const std::string& name, void* arena,
                                               size_t arena_size) {
  return create(program, name, MethodOptions{}, arena, arena_size);
}

namespace {
bool has_regions(const fb::Method* m) {
  return m->delegate() && m->delegate()->regions() && m->delegate()->regions()->size() > 0;
}
}  // namespace

Result<uint64_t> Method::arena_bytes(const Program& program, const std::string& name, const MethodOptions& options) {
  const fb::Method* m = ProgramAccess::impl(program).find_method(name);
  if (!m) return not_found("no method '" + name + "' in the program; it has " + ProgramAccess::impl(program).method_names());
  const fb::MemoryPlan* plan = options.use_delegate && has_regions(m) ? m->delegate()->plan() : m->plan();
  if (options.max_shapes.empty() || !plan->below_start()) return plan->arena_bytes();
  Impl s;  // only what set_caps reads
  s.program = &program;
  s.m = m;
  s.meta = runtime::build_meta(m, ProgramAccess::impl(program).file);
  s.exprs = runtime::load_exprs(m);
  s.dim_names = runtime::load_dim_names(m);
  s.dim_values.assign(s.dim_names.size(), 0);
  s.dim_origin.assign(s.dim_names.size(), -1);
  s.provisional.assign(s.dim_names.size(), -1);
  if (m->inputs()) s.inputs.assign(m->inputs()->begin(), m->inputs()->end());
  KILN_TRY(s.set_caps(options.max_shapes));
  std::vector<uint64_t> offsets(m->values()->size(), 0);
  return std::min(plan->arena_bytes(), place_values(plan, [&](int32_t v) { return s.cap_bytes[v]; }, offsets.data()));
}

Result<std::unique_ptr<Method>> Method::create(const Program& program, const std::string& name,
                                               const MethodOptions& options, void* arena, size_t arena_size) {
  return core::returning_oom([&] { return create_method(program, name, options, arena, arena_size); });
}

Result<std::unique_ptr<Method>> Method::create_method(const Program& program, const std::string& name,
                                                      const MethodOptions& options, void* arena, size_t arena_size) {
  const ProgramAccess::Impl& p = ProgramAccess::impl(program);
  const fb::Method* m = p.find_method(name);
  if (!m) return not_found("no method '" + name + "' in the program; it has " + p.method_names());
  if (options.cpu_threads < 1 || options.cpu_threads > 1024)
    return invalid_argument("create: cpu_threads is " + std::to_string(options.cpu_threads) + "; use 1 to 1024");
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.program = &program;
  s.m = m;
  s.meta = runtime::build_meta(m, p.file);
  s.exprs = runtime::load_exprs(m);
  s.dim_names = runtime::load_dim_names(m);
  s.expr_values.assign(s.exprs.size(), 0);
  s.dim_values.assign(s.dim_names.size(), 0);
  s.dim_origin.assign(s.dim_names.size(), -1);
  s.provisional.assign(s.dim_names.size(), -1);
  size_t nv = m->values()->size();
  s.views.resize(nv);
  for (size_t i = 0; i < nv; ++i) {
    const fb::Value* v = m->values()->Get(i);
    s.views[i].dtype = static_cast<DType>(v->dtype());
    s.views[i].rank = static_cast<int32_t>(v->shape()->size());
  }
  if (options.cpu_threads > 1 && !kernels::pthreadpool_api_is_kiln()) {
    s.delegate_warning = "another pthreadpool library takes the process's pthreadpool calls (loaded before Kiln, into "
                         "the global scope); running on one thread";
  } else if (options.cpu_threads > 1) {
    s.pool = pthreadpool_create(static_cast<size_t>(options.cpu_threads));
    if (!s.pool) return resource_exhausted("create: out of memory or threads: cannot start a pool of " + std::to_string(options.cpu_threads) +
                                            " threads");
  }
  s.check_finite = options.check_finite_inputs;
  if (options.use_delegate && has_regions(m)) {
    auto d = delegates::xnnpack::Delegate::create(m, p.file, s.exprs, &s.views, s.pool);
    if (d.ok()) s.delegate = std::move(*d);
    else s.delegate_warning = "xnnpack delegate unavailable (" + d.status().message() + "); running the portable kernels";
  }
  const fb::Delegate* del = s.delegate ? m->delegate() : nullptr;
  const fb::MemoryPlan* plan = del ? del->plan() : m->plan();
  if (m->inputs()) s.inputs.assign(m->inputs()->begin(), m->inputs()->end());
  KILN_TRY(s.set_caps(options.max_shapes).with_prefix("create: "));
  uint64_t need = plan->arena_bytes();
  if (plan->below_start()) {  // offsets follow the shape: the arena the caps need
    s.placing = plan;
    s.offsets_now.assign(nv, 0);
    need = std::min(need, place_values(plan, [&](int32_t v) { return s.cap_bytes[v]; }, s.offsets_now.data()));
  }
  s.arena_bytes = need;
  if (arena) {
    if (reinterpret_cast<uintptr_t>(arena) % 16 != 0) return invalid_argument("create: arena must be 16-byte aligned");
    if (arena_size < need)
      return resource_exhausted("create: arena of " + std::to_string(arena_size) + " bytes is smaller than the " +
                                std::to_string(need) + " bytes method '" + name + "' needs at its bound");
    s.arena = static_cast<uint8_t*>(arena);
  } else {
    // Sizes near 2^64 would wrap in align_up: refuse them as the allocation failure they are.
    const bool representable = need <= UINT64_MAX - 64;
    s.owned_arena = representable ? std::aligned_alloc(64, format::align_up(need ? need : 64, 64)) : nullptr;
    if (!s.owned_arena) return resource_exhausted(s.arena_failure(need, options.max_shapes));
    s.arena = static_cast<uint8_t*>(s.owned_arena);
  }
  for (size_t i = 0; i < nv; ++i) {
    const fb::Value* v = m->values()->Get(i);
    TensorView& t = s.views[i];
    if (v->storage() == fb::StorageKind::Constant) t.data = const_cast<uint8_t*>(p.file.constants + v->offset());
    else if (del) t.data = v->storage() == fb::StorageKind::Alias ? nullptr : s.arena + del->offsets()->Get(i);
    else if (v->storage() != fb::StorageKind::Alias && v->storage() != fb::StorageKind::Delegate) t.data = s.arena + v->offset();
  }
  for (size_t i = 0; i < nv; ++i) {
    const fb::Value* v = m->values()->Get(i);
    if (v->storage() == fb::StorageKind::Alias) {
      s.views[i].data = s.views[v->alias_of()].data;
      s.aliases.emplace_back(static_cast<int32_t>(i), v->alias_of());
    }
  }
  s.placed_bytes = need;
  KILN_TRY(s.place(/*at_caps=*/true).with_prefix("create: "));  // before any bind: at the caps
  if (m->outputs()) s.outputs.assign(m->outputs()->begin(), m->outputs()->end());
  // Flatten operands and attributes so execute walks plain arrays.
  if (m->instructions()) {
    for (const fb::Instruction* in : *m->instructions()) {
      Instr ins;
      ins.op = kernels::find_op(in->op()->c_str());
      ins.index = static_cast<int32_t>(s.instrs.size());
      if (in->scratch() >= 0) ins.scratch = &s.views[in->scratch()];
      ins.in_begin = static_cast<uint32_t>(s.in_ptrs.size());
      for (int32_t id : *in->inputs()) s.in_ptrs.push_back(id < 0 ? nullptr : &s.views[id]);
      ins.n_in = in->inputs()->size();
      ins.out_begin = static_cast<uint32_t>(s.out_ptrs.size());
      for (int32_t id : *in->outputs()) s.out_ptrs.push_back(&s.views[id]);
      ins.n_out = in->outputs()->size();
      ins.attr_begin = static_cast<uint32_t>(s.attrs.size());
      if (in->attrs()) {
        for (const fb::Attribute* a : *in->attrs()) s.attrs.push_back(format::attr_ref(a));
        ins.n_attr = in->attrs()->size();
      }
      if (kernels::produces_data_dim(*ins.op))
        ins.produces = static_cast<int32_t>(core::Attrs(s.attrs.data() + ins.attr_begin, ins.n_attr).get_int("dim", -1));
      s.instrs.push_back(ins);
    }
  }
  for (size_t d = 0; d < s.meta.dims.size(); ++d)
    if (s.meta.dims[d].data) s.data_dims.push_back(static_cast<int32_t>(d));
  if (!s.data_dims.empty()) {
    std::vector<bool> reads(s.exprs.size(), false);  // operands precede their users
    for (size_t e = 0; e < s.exprs.size(); ++e) {
      const core::ExprNode& x = s.exprs[e];
      reads[e] = x.op == core::ExprOp::kDim ? s.meta.dims[static_cast<size_t>(x.a)].data
                 : x.op == core::ExprOp::kConst ? false
                                                : reads[static_cast<size_t>(x.a)] || reads[static_cast<size_t>(x.b)];
    }
    s.data_shaped.assign(nv, false);
    for (size_t i = 0; i < nv; ++i)
      for (int32_t e : *m->values()->Get(static_cast<flatbuffers::uoffset_t>(i))->shape())
        if (reads[static_cast<size_t>(e)]) s.data_shaped[i] = true;
  }
  // Prepare: what kernels derive from attributes and operand ranks, once.
  s.op_data.resize(s.instrs.size());
  for (size_t i = 0; i < s.instrs.size(); ++i) {
    const Instr& in = s.instrs[i];
    if (!in.op->prepare) continue;
    int32_t ranks[16];
    kernels::PrepareCtx pc;
    pc.attrs = core::Attrs(s.attrs.data() + in.attr_begin, in.n_attr);
    pc.num_inputs = std::min<uint32_t>(in.n_in, 16);
    for (uint32_t k = 0; k < pc.num_inputs; ++k) {
      const TensorView* v = s.in_ptrs[in.in_begin + k];
      ranks[k] = v ? v->rank : -1;
    }
    pc.input_ranks = ranks;
    in.op->prepare(pc, &s.op_data[i]);
  }
  size_t next = 0;
  const size_t n_instr = s.instrs.size();
  if (del)
    for (size_t r = 0; r < del->regions()->size(); ++r) {
      const fb::DelegateRegion* reg = del->regions()->Get(r);
      for (; next < static_cast<size_t>(reg->first()); ++next) s.schedule.push_back({static_cast<int32_t>(next), -1});
      s.schedule.push_back({-1, static_cast<int32_t>(r)});
      next = static_cast<size_t>(reg->first() + reg->count());
    }
  for (; next < n_instr; ++next) s.schedule.push_back({static_cast<int32_t>(next), -1});
  // Runtime branches: where KilnIf and KilnElse jump (the reader checked that blocks nest and
  // that no delegate region crosses one, so every block starts a step).
  KILN_ASSIGN_OR_RETURN(std::vector<format::Branch> branches, format::method_branches(m));
  std::vector<int32_t> step_at(n_instr + 1, -1);
  for (size_t k = 0; k < s.schedule.size(); ++k) {
    const Impl::Step& st = s.schedule[k];
    step_at[static_cast<size_t>(st.region >= 0 ? del->regions()->Get(static_cast<flatbuffers::uoffset_t>(st.region))->first() : st.instr)] =
        static_cast<int32_t>(k);
  }
  step_at[n_instr] = static_cast<int32_t>(s.schedule.size());
  for (const format::Branch& b : branches) {
    const int32_t if_step = step_at[static_cast<size_t>(b.if_at)], else_step = step_at[static_cast<size_t>(b.else_at)],
                  end_step = step_at[static_cast<size_t>(b.end)];
    if (if_step < 0 || else_step < 0 || end_step < 0)
      return data_loss("create: method '" + name + "': a delegate region crosses the branch at instruction #" + std::to_string(b.if_at));
    Impl::Step& at_if = s.schedule[static_cast<size_t>(if_step)];
    Impl::Step& at_else = s.schedule[static_cast<size_t>(else_step)];
    at_if.branch = static_cast<int32_t>(&b - branches.data());
    if (b.loop) {  // KilnLoop: past the loop when it runs no iteration; KilnEndLoop: back to the body
      const fb::Instruction* li = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(b.if_at));
      const Instr& lin = s.instrs[static_cast<size_t>(b.if_at)];
      const int64_t trip = core::Attrs(s.attrs.data() + lin.attr_begin, lin.n_attr).get_int("trip", -1);
      if (trip < 0 || static_cast<size_t>(trip) >= s.exprs.size() || li->inputs()->size() < 1)
        return data_loss("create: method '" + name + "': the loop at instruction #" + std::to_string(b.if_at) + " has no trip count");
      at_if.control = Impl::Step::kLoop;
      at_if.jump = end_step;
      at_else.control = Impl::Step::kEndLoop;
      at_else.jump = if_step + 1;
      at_if.trip = at_else.trip = static_cast<int32_t>(trip);
      continue;
    }
    at_if.control = Impl::Step::kIf;
    at_if.jump = else_step + 1;
    at_else.control = Impl::Step::kElse;
    at_else.jump = end_step;
  }
  if (!branches.empty()) {  // which block makes each value (inner blocks after outer ones)
    s.value_block.assign(nv, -1);
    s.block_bad.assign(2 * branches.size(), -1);
    std::vector<int32_t>& instr_block = s.instr_block;
    instr_block.assign(n_instr, -1);
    for (size_t bi = 0; bi < branches.size(); ++bi) {
      const format::Branch& b = branches[bi];
      for (int32_t i = b.if_at + 1; i < b.end; ++i)
        if (i != b.else_at) instr_block[static_cast<size_t>(i)] = static_cast<int32_t>(2 * bi + (i > b.else_at ? 1 : 0));
    }
    for (size_t i = 0; i < n_instr; ++i) {
      const fb::Instruction* in = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
      for (int32_t o : *in->outputs()) s.value_block[static_cast<size_t>(o)] = instr_block[i];
      if (in->scratch() >= 0) s.value_block[static_cast<size_t>(in->scratch())] = instr_block[i];
    }
    // A view: the block of its root; else, as a branch result, the block that gives it; else
    // the block of its first reader (a view of an outer value made inside a block).
    auto is_view = [&](int32_t v) { return v >= 0 && m->values()->Get(static_cast<flatbuffers::uoffset_t>(v))->storage() == fb::StorageKind::Alias; };
    std::vector<bool> placed(nv, false);
    for (size_t v = 0; v < nv; ++v)
      if (is_view(static_cast<int32_t>(v))) {
        s.value_block[v] = s.value_block[static_cast<size_t>(m->values()->Get(static_cast<flatbuffers::uoffset_t>(v))->alias_of())];
        placed[v] = s.value_block[v] >= 0;
      }
    for (size_t bi = 0; bi < branches.size(); ++bi) {
      const size_t at = static_cast<size_t>(branches[bi].end);
      if (at >= n_instr || branches[bi].loop) continue;
      const fb::Instruction* sel = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(at));
      if (sel->op()->str() != "KilnSelect" || sel->inputs()->size() < 3) continue;
      const uint32_t n = (sel->inputs()->size() - 1) / 2;
      for (uint32_t k = 1; k < sel->inputs()->size(); ++k) {
        const int32_t v = sel->inputs()->Get(k);
        if (!is_view(v) || placed[static_cast<size_t>(v)]) continue;
        s.value_block[static_cast<size_t>(v)] = static_cast<int32_t>(2 * bi + (k > n ? 1 : 0));
        placed[static_cast<size_t>(v)] = true;
      }
    }
    for (size_t i = 0; i < n_instr; ++i) {
      const fb::Instruction* in = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
      for (int32_t v : *in->inputs())
        if (is_view(v) && !placed[static_cast<size_t>(v)]) {
          s.value_block[static_cast<size_t>(v)] = instr_block[i];
          placed[static_cast<size_t>(v)] = true;
        }
    }
    for (int32_t o : *m->outputs()) s.value_block[static_cast<size_t>(o)] = -1;  // outputs are always valid
  }
  auto method = std::unique_ptr<Method>(new Method(std::move(impl)));
  // Start bound at the upper bound so input(i) has its bound shape and size.
  Status st = method->bind_shapes(method->bound_shapes());
  if (!st.ok()) method->impl_->bound = false;
  return method;
}

const MethodMeta& Method::meta() const { return impl_->meta; }
size_t Method::num_inputs() const { return impl_->inputs.size(); }
size_t Method::num_outputs() const { return impl_->outputs.size(); }
bool Method::is_bound() const { return impl_->bound; }

std::vector<std::vector<int64_t>> Method::bound_shapes() const { return impl_->bound_shapes(); }

std::vector<std::vector<int64_t>> Method::Impl::bound_shapes() const {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorSpec& t : meta.inputs) {
    std::vector<int64_t> s;
    for (const AxisSpec& a : t.axes) {
      if (a.dim < 0) { s.push_back(a.size); continue; }
      const DimSpec& d = meta.dims[a.dim];
      s.push_back(d.max / d.step * d.step);  // largest admissible value
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

Status Method::bind(const TensorView* inputs, size_t n) {
  Impl& s = *impl_;
  s.bound = false;
  if (n != s.inputs.size())
    return invalid_argument("bind: method '" + s.meta.name + "' takes " + std::to_string(s.inputs.size()) +
                            " inputs, got " + std::to_string(n));
  std::fill(s.dim_origin.begin(), s.dim_origin.end(), -1);
  // Each dim's first valid size among all inputs: what an error's way out keeps the other dims at.
  std::fill(s.provisional.begin(), s.provisional.end(), -1);
  for (size_t i = 0; i < n; ++i) {
    const flatbuffers::Vector<int32_t>* shape = s.m->values()->Get(s.inputs[i])->shape();
    if (inputs[i].rank != static_cast<int32_t>(shape->size())) continue;
    for (int k = 0; k < inputs[i].rank; ++k) {
      const core::ExprNode& e = s.exprs[shape->Get(k)];
      const int64_t got = inputs[i].dims[k];
      if (e.op != core::ExprOp::kDim || s.provisional[e.a] >= 0) continue;
      const DimSpec& d = s.meta.dims[e.a];
      if (got >= d.min && got <= d.max && got % d.step == 0) s.provisional[e.a] = got;
    }
  }
  for (size_t i = 0; i < n; ++i) KILN_TRY(s.check_input(i, inputs[i]).with_prefix("bind: "));
  for (int32_t d : s.data_dims) s.dim_values[static_cast<size_t>(d)] = s.meta.dims[static_cast<size_t>(d)].max;
  KILN_TRY(s.apply_shapes().with_prefix("bind: "));
  KILN_TRY(s.place(/*at_caps=*/false).with_prefix("bind: "));
  if (s.delegate) KILN_TRY(s.delegate->setup().with_prefix("bind: "));
  s.bound = true;
  return ok_status();
}

Status Method::bind_shapes(const std::vector<std::vector<int64_t>>& shapes) {
  // Views on the stack for up to 16 inputs: bind allocates nothing on success.
  constexpr size_t kOnStack = 16;
  TensorView stack_views[kOnStack];
  std::vector<TensorView> heap_views(shapes.size() > kOnStack ? shapes.size() : 0);
  TensorView* views = shapes.size() > kOnStack ? heap_views.data() : stack_views;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].size() > static_cast<size_t>(kMaxRank))
      return invalid_argument("bind: input #" + std::to_string(i) + " has rank " + std::to_string(shapes[i].size()) +
                              ", above the maximum " + std::to_string(kMaxRank));
    views[i].dtype = i < impl_->meta.inputs.size() ? impl_->meta.inputs[i].dtype : DType::kF32;
    views[i].rank = static_cast<int32_t>(shapes[i].size());
    for (size_t k = 0; k < shapes[i].size(); ++k) views[i].dims[k] = shapes[i][k];
  }
  return bind(views, shapes.size());
}

namespace {
const TensorView kNoTensor{};  // what input(i) and output(i) give for an index out of range

// A KilnAssert (a guard of a branch's block) failed where the inputs chose that block.
Status block_guard_failed(const core::Attrs& assert_attrs) {
  return Status(Code::kInvalidArgument,
                "execute: " + std::string(assert_attrs.get_str("text", "a guard")) +
                    "; it fails at these input shapes, in a branch's block (checked when the block runs)",
                Reason::kBlockRefused);
}

Result<size_t> find_tensor(const std::vector<TensorSpec>& specs, const std::string& name, const char* what,
                           const std::string& method) {
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name) return i;
  std::string names;
  for (const TensorSpec& t : specs) names += (names.empty() ? "'" : ", '") + t.name + "'";
  return not_found("method '" + method + "' has no " + what + " named '" + name + "'; its " + what + "s are " +
                   (names.empty() ? "none" : names));
}
}  // namespace

Result<size_t> Method::input_index(const std::string& name) const {
  return find_tensor(impl_->meta.inputs, name, "input", impl_->meta.name);
}
Result<size_t> Method::output_index(const std::string& name) const {
  return find_tensor(impl_->meta.outputs, name, "output", impl_->meta.name);
}

const TensorView& Method::input(size_t i) const {
  return i < impl_->inputs.size() ? impl_->views[impl_->inputs[i]] : kNoTensor;
}
void* Method::input_data(size_t i) { return i < impl_->inputs.size() ? impl_->views[impl_->inputs[i]].data : nullptr; }

Status Method::set_inputs(const TensorView* inputs, size_t n) {
  KILN_TRY(bind(inputs, n));
  for (size_t i = 0; i < n; ++i) {
    const TensorView& dst = input(i);
    if (inputs[i].data && inputs[i].data != dst.data) std::memcpy(dst.data, inputs[i].data, dst.nbytes());
  }
  return ok_status();
}

namespace {

// Index of the first NaN or Inf of x[0, n), or n: blocks of 256 are tested branch-free (exponent
// bits all ones; the loop vectorizes), and only a block that has one is searched.
size_t first_non_finite(const float* x, size_t n) {
  constexpr size_t kBlock = 256;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    uint32_t bad = 0;
    for (size_t i = b; i < e; ++i) {
      uint32_t u;
      std::memcpy(&u, x + i, sizeof u);
      bad |= static_cast<uint32_t>((u & 0x7f800000u) == 0x7f800000u);
    }
    if (bad)
      for (size_t i = b; i < e; ++i)
        if (!std::isfinite(x[i])) return i;
  }
  return n;
}

}  // namespace

Status Method::Impl::check_finite_inputs() const {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView& t = views[inputs[i]];
    if (t.dtype != DType::kF32) continue;
    const size_t n = static_cast<size_t>(t.numel()), at = first_non_finite(t.as<float>(), n);
    if (at == n) continue;
    const float v = t.as<float>()[at];
    int64_t idx[kMaxRank] = {};
    size_t rest = at;
    for (int k = t.rank - 1; k >= 0; --k) {
      idx[k] = static_cast<int64_t>(rest % static_cast<size_t>(t.dims[k]));
      rest /= static_cast<size_t>(t.dims[k]);
    }
    const std::string index = shape_text(idx, t.rank, ", "), shape = shape_text(t.dims, t.rank, "x");
    return Status(Code::kInvalidArgument,
                  "execute: input " + input_label(i) + " holds " + (std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf") +
                      " at element " + std::to_string(at) + " (index [" + index + "] of " + (shape.empty() ? "a scalar" : shape) +
                      "); the XNNPACK delegate would turn it into a number, so nothing ran: clean the input, or run "
                      "the portable kernels (use_delegate = false, --delegate=none), which carry it to the outputs",
                  Reason::kNonFiniteInput);
  }
  return ok_status();
}

Status Method::execute() {
  Impl& s = *impl_;
  if (!s.bound) return failed_precondition("execute: method '" + s.meta.name + "' has no bound input shapes; call bind first");
  if (s.delegate && s.check_finite) KILN_TRY(s.check_finite_inputs());
  kernels::RunCtx ctx;
  ctx.expr_values = s.expr_values.data();
  ctx.pool = s.pool;
  if (s.profiling) ++s.profiled_runs;
  for (size_t k = 0; k < s.schedule.size();) {
    const Impl::Step& step = s.schedule[k++];
    if (step.region >= 0) {
      KILN_TRY(s.delegate->run_region(static_cast<size_t>(step.region), s.profiling).with_prefix("execute: "));
      continue;
    }
    const Instr& in = s.instrs[static_cast<size_t>(step.instr)];
    if (step.control == Impl::Step::kIf) {  // the then block follows; else jump to the else block
      const bool taken = kernels::branch_condition(*s.in_ptrs[in.in_begin]);
      const int32_t block = 2 * step.branch + (taken ? 0 : 1);
      if (s.block_bad[static_cast<size_t>(block)] >= 0) return s.blocked(block);
      if (!taken) k = static_cast<size_t>(step.jump);
      continue;
    }
    if (step.control == Impl::Step::kElse) {  // the end of the then block: past the else block
      k = static_cast<size_t>(step.jump);
      continue;
    }
    const auto t0 = s.profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    ctx.inputs = s.in_ptrs.data() + in.in_begin;
    ctx.num_inputs = in.n_in;
    ctx.outputs = s.out_ptrs.data() + in.out_begin;
    ctx.num_outputs = in.n_out;
    ctx.attrs = core::Attrs(s.attrs.data() + in.attr_begin, in.n_attr);
    ctx.scratch = in.scratch ? in.scratch->data : nullptr;
    ctx.op_data = in.op->prepare ? &s.op_data[static_cast<size_t>(step.instr)] : nullptr;
    ctx.scratch_bytes = in.scratch ? in.scratch->nbytes() : 0;
    ctx.produced_dim = in.produces >= 0 ? &s.dim_values[static_cast<size_t>(in.produces)] : nullptr;
    kernels::KernelStatus ks = in.op->run(ctx);
    if (ks == kernels::KernelStatus::kOk && step.control == Impl::Step::kLoop) {  // slots hold the initial values
      const int64_t trip = s.expr_values[static_cast<size_t>(step.trip)];
      if (trip <= 0 || !kernels::branch_condition(*s.in_ptrs[in.in_begin])) {
        k = static_cast<size_t>(step.jump);
      } else if (s.block_bad[static_cast<size_t>(2 * step.branch)] >= 0) {
        return s.blocked(2 * step.branch);
      }
    } else if (ks == kernels::KernelStatus::kOk && step.control == Impl::Step::kEndLoop) {  // one more iteration?
      const int64_t done = *static_cast<const int64_t*>(s.in_ptrs[in.in_begin]->data);
      if (done < s.expr_values[static_cast<size_t>(step.trip)] && kernels::branch_condition(*s.in_ptrs[in.in_begin + 1]))
        k = static_cast<size_t>(step.jump);
    }
    if (ks == kernels::KernelStatus::kOk && in.produces >= 0) KILN_TRY(s.refresh_data_shapes(in));
    if (s.profiling)
      s.instr_ns[static_cast<size_t>(step.instr)] += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    if (ks != kernels::KernelStatus::kOk && in.produces >= 0 &&
        s.dim_values[static_cast<size_t>(in.produces)] > s.meta.dims[static_cast<size_t>(in.produces)].max) {
      const DimSpec& d = s.meta.dims[static_cast<size_t>(in.produces)];
      return Status(Code::kOutOfRange,
                    "execute: node '" + s.meta.instruction_nodes[in.index] + "' (" + in.op->name + ") found " + d.name +
                        " = " + std::to_string(s.dim_values[static_cast<size_t>(in.produces)]) + ", above its bound " +
                        std::to_string(d.max) + " (export's --dim " + d.name + "=..N sets it)",
                    Reason::kDataAboveBound);
    }
    if (ks != kernels::KernelStatus::kOk && std::strcmp(in.op->name, "KilnAssert") == 0)
      return block_guard_failed(ctx.attrs);
    if (ks != kernels::KernelStatus::kOk)
      return invalid_argument("execute: instruction #" + std::to_string(in.index) + " node '" +
                              s.meta.instruction_nodes[in.index] + "' (" + in.op->name + ") failed: " +
                              kernels::kernel_status_message(ks));
  }
  return ok_status();
}

Status Method::Impl::refresh_data_shapes(const Instr& producer) {
  // Runs inside execute: the message is built only on failure (execute allocates nothing).
  const auto after = [&] {
    return "execute: after node '" + meta.instruction_nodes[static_cast<size_t>(producer.index)] + "' found " +
           meta.dims[static_cast<size_t>(producer.produces)].name + " = " +
           std::to_string(dim_values[static_cast<size_t>(producer.produces)]) + ": ";
  };
  size_t bad = 0;
  if (!core::eval_exprs(exprs.data(), exprs.size(), dim_values.data(), expr_values.data(), &bad))
    return invalid_argument(after() + "shape expression " + core::format_expr(exprs.data(), exprs.size(), dim_names, static_cast<int32_t>(bad)) +
                            " divides by zero or overflows int64");
  for (size_t i = 0; i < views.size(); ++i) {
    if (!data_shaped[i]) continue;
    const fb::Value* v = m->values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    TensorView& t = views[i];
    uint64_t n = dtype_size(t.dtype);
    bool valid = true;
    for (int k = 0; k < t.rank; ++k) {
      const int64_t d = expr_values[v->shape()->Get(static_cast<flatbuffers::uoffset_t>(k))];
      valid = valid && d >= 0 && !__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n);
      t.dims[k] = d < 0 ? 0 : d;
    }
    const uint64_t limit = v->storage() == fb::StorageKind::Alias ? m->values()->Get(v->alias_of())->nbytes() : v->nbytes();
    if (!valid || n > limit)
      return invalid_argument(after() + "value '" + v->name()->str() + "' has no valid size within its reservation there");
  }
  return ok_status();
}

Status Method::Impl::blocked(int32_t b) const {
  // The block's first guard that fails here says why; else the value bind found invalid.
  for (const Step& st : schedule) {
    if (st.instr < 0 || (st.region >= 0)) continue;
    const Instr& in = instrs[static_cast<size_t>(st.instr)];
    if (std::strcmp(in.op->name, "KilnAssert") != 0) continue;
    const core::Attrs a(attrs.data() + in.attr_begin, in.n_attr);
    const int64_t rel = a.get_int("relation", -1), l = expr_values[a.get_int("lhs", 0)], r = expr_values[a.get_int("rhs", 0)];
    const bool holds = rel == 0 ? l == r : rel == 1 ? l >= r : (r != 0 && core::floor_mod(l, r) == 0);
    if (!holds && instr_block[static_cast<size_t>(st.instr)] == b) return block_guard_failed(a);
  }
  const fb::Value* v = m->values()->Get(static_cast<flatbuffers::uoffset_t>(block_bad[static_cast<size_t>(b)]));
  return Status(Code::kInvalidArgument,
                "execute: a branch's block cannot run at these input shapes: its value '" + v->name()->str() +
                    "' has no valid size there",
                Reason::kBlockRefused);
}

const TensorView& Method::output(size_t i) const {
  return i < impl_->outputs.size() ? impl_->views[impl_->outputs[i]] : kNoTensor;
}

void MethodAccess::fill_arena(Method& m, uint8_t byte) { std::memset(m.impl_->arena, byte, m.impl_->arena_bytes); }

void Method::set_profiling(bool on) {
  Impl& s = *impl_;
  s.profiling = on;
  if (!on) return;
  s.instr_ns.assign(s.instrs.size(), 0);
  s.profiled_runs = 0;
  if (s.pool) s.pool_at_start = s.pool->stats();
  if (s.delegate) s.delegate->reset_times();
}

ThreadProfile Method::thread_profile() const {
  const Impl& s = *impl_;
  ThreadProfile t;
  t.runs = s.profiled_runs;
  if (!s.pool) return t;
  const kernels::ThreadPool::Stats now = s.pool->stats(), &was = s.pool_at_start;
  t.threads = static_cast<int>(s.pool->threads());
  t.jobs = now.jobs - was.jobs;
  t.items = now.items - was.items;
  t.worker_items = now.worker_items - was.worker_items;
  t.wait_ns = now.wait_ns - was.wait_ns;
  t.long_waits = now.long_waits - was.long_waits;
  t.alone_jobs = now.alone_jobs - was.alone_jobs;
  return t;
}

std::vector<ProfileRow> Method::profile() const {
  const Impl& s = *impl_;
  std::vector<ProfileRow> rows;
  auto shape = [](const TensorView* t) {
    std::string out;
    for (int k = 0; t && k < t->rank; ++k) out += (k ? "x" : "") + std::to_string(t->dims[k]);
    return out.empty() ? std::string("scalar") : out;
  };
  for (const Impl::Step& step : s.schedule) {
    if (step.region < 0) {
      const size_t i = static_cast<size_t>(step.instr);
      const Instr& in = s.instrs[i];
      rows.push_back(ProfileRow{in.op->name, s.meta.instruction_nodes[i], false,
                                shape(in.n_out ? s.out_ptrs[in.out_begin] : nullptr),
                                i < s.instr_ns.size() ? s.instr_ns[i] : 0, s.profiled_runs});
      continue;
    }
    const size_t r = static_cast<size_t>(step.region);
    for (size_t k = 0; k < s.delegate->num_steps(r); ++k) {
      const delegates::xnnpack::Delegate::StepInfo info = s.delegate->step_info(r, k);
      ProfileRow row;
      row.delegated = true;
      row.ns = info.ns;
      row.runs = s.profiled_runs;
      row.shape = shape(info.out);
      if (info.source >= 0) {
        row.op = s.meta.instruction_ops[static_cast<size_t>(info.source)];
        if (info.fused >= 0) row.op += "+" + s.meta.instruction_ops[static_cast<size_t>(info.fused)];
        row.node = s.meta.instruction_nodes[static_cast<size_t>(info.source)];
      } else {
        row.op = std::string(info.kind) == "to_nhwc" ? "ToNhwc" : "ToNchw";
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

bool Method::delegated() const { return impl_->delegate != nullptr; }
const std::string& Method::delegate_warning() const { return impl_->delegate_warning; }
uint64_t Method::delegate_packed_bytes() const { return impl_->delegate ? impl_->delegate->packed_bytes() : 0; }
uint64_t Method::planned_arena_bytes() const { return impl_->arena_bytes; }
uint64_t Method::arena_bytes_in_use() const { return impl_->placed_bytes; }

Result<uint64_t> Method::arena_bytes_for(const std::vector<std::vector<int64_t>>& shapes) {
  KILN_TRY(bind_shapes(shapes));
  return arena_bytes_in_use();
}

uint64_t Method::live_lower_bound_bytes() const {
  const Impl& s = *impl_;
  const format::Lifetimes life = format::method_lifetimes(s.m, s.delegate != nullptr);
  int64_t steps = 0;
  for (size_t v = 0; v < life.first.size(); ++v) steps = std::max(steps, life.end(static_cast<int32_t>(v)) + 1);
  std::vector<uint64_t> live(static_cast<size_t>(steps), 0);
  for (size_t v = 0; v < life.first.size(); ++v) {
    const auto storage = s.m->values()->Get(v)->storage();
    if (storage == fb::StorageKind::Constant || storage == fb::StorageKind::Alias || !life.alive(static_cast<int32_t>(v))) continue;
    const uint64_t bytes = format::align_up(s.views[v].nbytes(), format::kSegmentAlignment);
    for (int64_t t = std::max<int64_t>(0, life.first[v]); t <= life.end(static_cast<int32_t>(v)); ++t) live[t] += bytes;
  }
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

int64_t Method::dim_value(const std::string& name) const {
  for (size_t d = 0; d < impl_->dim_names.size(); ++d)
    if (impl_->dim_names[d] == name) return impl_->bound ? impl_->dim_values[d] : -1;
  return -1;
}

}  // namespace kiln
