// Method: create (a short sequence of named steps), bind and execute, profiling. The
// contract's checks are in contract.cc, the execution order in schedule.cc.
#include "kiln/method.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/bytes.h"
#include "core/oom.h"
#include "runtime/method_impl.h"
#include "core/status.h"

namespace kiln {

void* allocate_owned_arena(uint64_t bytes) {
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  // Sizes near 2^64 would wrap in align_up: refuse them as the allocation failure they are.
  if (bytes > UINT64_MAX - kHuge) return nullptr;
  if (bytes < kHuge) return std::aligned_alloc(64, format::align_up(bytes ? bytes : 64, 64));
  const uint64_t size = format::align_up(bytes, kHuge);
  void* p = std::aligned_alloc(kHuge, size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) madvise(p, size, MADV_HUGEPAGE);  // advice: ignored where transparent huge pages are off
#endif
  return p;
}

using runtime::place_values;
using runtime::shape_text;

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
  s.load(program, m);
  KILN_TRY(s.start_pool(options.cpu_threads));
  s.check_finite = options.check_finite_inputs;
  s.attach_delegate(options.use_delegate);
  KILN_TRY(s.set_caps(options.max_shapes).with_prefix("create: "));
  KILN_TRY(s.allocate_arena(options, arena, arena_size));
  s.point_views();
  KILN_TRY(s.place(/*at_caps=*/true).with_prefix("create: "));  // before any bind: at the caps
  s.flatten_instructions();
  s.find_data_shaped();
  s.prepare_kernels();
  KILN_TRY(s.build_schedule());
  auto method = std::unique_ptr<Method>(new Method(std::move(impl)));
  // Start bound at the upper bound so input(i) has its bound shape and size. A bound the
  // contract's guards refuse leaves the Method unbound; running out of memory there (XNNPACK's
  // setup allocates a convolution's indirection buffer) fails create, as any allocation in it.
  Status st = method->bind_shapes(method->bound_shapes());
  if (st.code() == Code::kResourceExhausted) return st.with_prefix("create: ");
  if (!st.ok()) method->impl_->bound = false;
  return method;
}

void Method::Impl::load(const Program& prog, const fb::Method* method) {
  program = &prog;
  m = method;
  const format::ProgramFile& file = ProgramAccess::impl(prog).file;
  meta = runtime::build_meta(m, file);
  exprs = runtime::load_exprs(m);
  dim_names = runtime::load_dim_names(m);
  expr_values.assign(exprs.size(), 0);
  dim_values.assign(dim_names.size(), 0);
  dim_origin.assign(dim_names.size(), -1);
  provisional.assign(dim_names.size(), -1);
  if (m->inputs()) inputs.assign(m->inputs()->begin(), m->inputs()->end());
  if (m->outputs()) outputs.assign(m->outputs()->begin(), m->outputs()->end());
  const size_t nv = m->values()->size();
  views.resize(nv);
  for (size_t i = 0; i < nv; ++i) {
    const fb::Value* v = m->values()->Get(i);
    views[i].dtype = static_cast<DType>(v->dtype());
    views[i].rank = static_cast<int32_t>(v->shape()->size());
  }
}

Status Method::Impl::start_pool(int threads) {
  if (threads <= 1) return ok_status();
  if (!kernels::pthreadpool_api_is_kiln()) {
    delegate_warning = "another pthreadpool library takes the process's pthreadpool calls (loaded before Kiln, into "
                       "the global scope); running on one thread";
    return ok_status();
  }
  pool = pthreadpool_create(static_cast<size_t>(threads));
  if (!pool)
    return resource_exhausted("create: out of memory or threads: cannot start a pool of " + std::to_string(threads) +
                              " threads");
  return ok_status();
}

void Method::Impl::attach_delegate(bool use_delegate) {
  if (!use_delegate || !has_regions(m)) return;
  delegates::BackendContext ctx;
  ctx.method = m;
  ctx.file = &ProgramAccess::impl(*program).file;
  ctx.exprs = &exprs;
  ctx.views = &views;
  ctx.pool = pool;
  auto d = delegates::create_backend(ctx);
  if (d.ok()) {
    delegate = std::move(*d);
    for (size_t r = 0; r < m->delegate()->regions()->size() && nan_dropper.empty(); ++r)
      for (size_t k = 0; k < delegate->num_steps(r) && nan_dropper.empty(); ++k) {
        const delegates::StepInfo info = delegate->step_info(r, k);
        if (info.keeps_nan) continue;
        const size_t i = static_cast<size_t>(std::max(info.source, 0));
        nan_dropper = "'" + node_name(i) + "' (" + op_name(i) + ")";
      }
    check_finite = check_finite && !nan_dropper.empty();
  } else
    delegate_warning = m->delegate()->backend()->str() + " delegate unavailable (" + d.status().message() +
                       "); running the portable kernels";
}

Status Method::Impl::allocate_arena(const MethodOptions& options, void* caller_arena, size_t caller_size) {
  const fb::MemoryPlan* plan = delegate ? m->delegate()->plan() : m->plan();
  uint64_t need = plan->arena_bytes();
  if (plan->below_start()) {  // offsets follow the shape: the arena the caps need
    placing = plan;
    offsets_now.assign(views.size(), 0);
    need = std::min(need, place_values(plan, [&](int32_t v) { return cap_bytes[v]; }, offsets_now.data()));
  }
  arena_bytes = need;
  placed_bytes = need;
  if (caller_arena) {
    if (reinterpret_cast<uintptr_t>(caller_arena) % 16 != 0) return invalid_argument("create: arena must be 16-byte aligned");
    if (caller_size < need)
      return resource_exhausted("create: arena of " + std::to_string(caller_size) + " bytes is smaller than the " +
                                std::to_string(need) + " bytes method '" + meta.name + "' needs at its bound");
    arena = static_cast<uint8_t*>(caller_arena);
    return ok_status();
  }
  owned_arena = allocate_owned_arena(need);
  if (!owned_arena) return resource_exhausted(arena_failure(need, options.max_shapes));
  arena = static_cast<uint8_t*>(owned_arena);
  return ok_status();
}

void Method::Impl::point_views() {
  const fb::Delegate* del = delegate ? m->delegate() : nullptr;
  const uint8_t* constants = ProgramAccess::impl(*program).file.constants;
  for (size_t i = 0; i < views.size(); ++i) {
    const fb::Value* v = m->values()->Get(i);
    TensorView& t = views[i];
    if (v->storage() == fb::StorageKind::Constant) t.data = const_cast<uint8_t*>(constants + v->offset());
    else if (del) t.data = v->storage() == fb::StorageKind::Alias ? nullptr : arena + del->offsets()->Get(i);
    else if (v->storage() != fb::StorageKind::Alias && v->storage() != fb::StorageKind::Delegate) t.data = arena + v->offset();
  }
  for (size_t i = 0; i < views.size(); ++i) {
    const fb::Value* v = m->values()->Get(i);
    if (v->storage() == fb::StorageKind::Alias) {
      views[i].data = views[v->alias_of()].data;
      aliases.emplace_back(static_cast<int32_t>(i), v->alias_of());
    }
  }
}

void Method::Impl::flatten_instructions() {
  if (!m->instructions()) return;
  for (const fb::Instruction* in : *m->instructions()) {
    Instr ins;
    ins.op = kernels::find_op(in->op()->c_str());
    ins.index = static_cast<int32_t>(instrs.size());
    if (in->scratch() >= 0) ins.scratch = &views[in->scratch()];
    ins.in_begin = static_cast<uint32_t>(in_ptrs.size());
    for (int32_t id : *in->inputs()) in_ptrs.push_back(id < 0 ? nullptr : &views[id]);
    ins.n_in = in->inputs()->size();
    ins.out_begin = static_cast<uint32_t>(out_ptrs.size());
    for (int32_t id : *in->outputs()) out_ptrs.push_back(&views[id]);
    ins.n_out = in->outputs()->size();
    ins.attr_begin = static_cast<uint32_t>(attrs.size());
    if (in->attrs()) {
      for (const fb::Attribute* a : *in->attrs()) attrs.push_back(format::attr_ref(a));
      ins.n_attr = in->attrs()->size();
    }
    const core::Attrs a(attrs.data() + ins.attr_begin, ins.n_attr);
    if (kernels::produces_data_dim(*ins.op, a)) ins.produces = static_cast<int32_t>(a.get_int("dim", -1));
    instrs.push_back(ins);
  }
}

void Method::Impl::find_data_shaped() {
  data_found.assign(meta.dims.size(), false);
  for (size_t d = 0; d < meta.dims.size(); ++d)
    if (meta.dims[d].data) data_dims.push_back(static_cast<int32_t>(d));
  if (data_dims.empty()) return;
  std::vector<bool> reads(exprs.size(), false);  // operands precede their users
  for (size_t e = 0; e < exprs.size(); ++e) {
    const core::ExprNode& x = exprs[e];
    reads[e] = x.op == core::ExprOp::kDim ? meta.dims[static_cast<size_t>(x.a)].data
               : x.op == core::ExprOp::kConst ? false
                                              : reads[static_cast<size_t>(x.a)] || reads[static_cast<size_t>(x.b)];
  }
  data_shaped.assign(views.size(), false);
  for (size_t i = 0; i < views.size(); ++i)
    for (int32_t e : *m->values()->Get(static_cast<flatbuffers::uoffset_t>(i))->shape())
      if (reads[static_cast<size_t>(e)]) data_shaped[i] = true;
}

void Method::Impl::prepare_kernels() {
  op_data.resize(instrs.size());
  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instr& in = instrs[i];
    if (in.op->prepare)
      kernels::prepare_op(*in.op, core::Attrs(attrs.data() + in.attr_begin, in.n_attr), in_ptrs.data() + in.in_begin,
                          in.n_in, &op_data[i]);
  }
}

const MethodMeta& Method::meta() const { return impl_->meta; }
size_t Method::num_inputs() const { return impl_->inputs.size(); }
size_t Method::num_outputs() const { return impl_->outputs.size(); }
bool Method::is_bound() const { return impl_->bound; }

std::vector<std::vector<int64_t>> Method::bound_shapes() const { return impl_->bound_shapes(); }


Status Method::bind(const TensorView* inputs, size_t n) {
  Impl& s = *impl_;
  s.bound = false;
  if (n != s.inputs.size())
    return invalid_argument("bind: method '" + s.meta.name + "' takes " + std::to_string(s.inputs.size()) +
                            " inputs, got " + std::to_string(n));
  KILN_TRY(s.check_inputs(inputs, n).with_prefix("bind: "));
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
                      "); the XNNPACK delegate's step for " + nan_dropper +
                      " would turn it into a number, so nothing ran: clean the input, or run the portable kernels (use_delegate = false, --delegate=none), which carry it to the outputs",
                  Reason::kNonFiniteInput);
  }
  return ok_status();
}

namespace {
// CPU time of the calling thread: with wall time, how much of an execute the OS gave it a core.
uint64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}
}  // namespace

Status Method::execute() {
  Impl& s = *impl_;
  if (!s.bound) return failed_precondition("execute: method '" + s.meta.name + "' has no bound input shapes; call bind first");
  if (s.delegate && s.check_finite) KILN_TRY(s.check_finite_inputs());
  if (!s.profiling) return s.run();
  ++s.profiled_runs;
  const auto wall = std::chrono::steady_clock::now();
  const uint64_t cpu = thread_cpu_ns();
  Status st = s.run();
  s.caller_cpu_ns += thread_cpu_ns() - cpu;
  s.wall_ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - wall).count());
  return st;
}

void Method::Impl::reset_data_dims() {
  std::fill(data_found.begin(), data_found.end(), false);
  bool changed = false;
  for (int32_t d : data_dims) {
    int64_t& v = dim_values[static_cast<size_t>(d)];
    changed = changed || v != meta.dims[static_cast<size_t>(d)].max;
    v = meta.dims[static_cast<size_t>(d)].max;
  }
  if (!changed) return;
  // Bind evaluated these very values: nothing can fail.
  core::eval_exprs(exprs.data(), exprs.size(), dim_values.data(), expr_values.data(), nullptr);
  for (size_t i = 0; i < views.size(); ++i) {
    if (!data_shaped[i]) continue;
    const fb::Value* v = m->values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    for (int k = 0; k < views[i].rank; ++k)
      views[i].dims[k] = std::max<int64_t>(0, expr_values[v->shape()->Get(static_cast<flatbuffers::uoffset_t>(k))]);
  }
}

Status Method::Impl::run() {
  reset_data_dims();
  kernels::RunCtx ctx;
  ctx.expr_values = expr_values.data();
  ctx.pool = pool;
  for (size_t k = 0; k < schedule.size();) {
    const Step& step = schedule[k++];
    if (step.region >= 0) {
      KILN_TRY(delegate->run_region(static_cast<size_t>(step.region), profiling).with_prefix("execute: "));
      continue;
    }
    const Instr& in = instrs[static_cast<size_t>(step.instr)];
    if (step.control == Step::kIf) {  // the then block follows; else jump to the else block
      const bool taken = kernels::branch_condition(*in_ptrs[in.in_begin]);
      const int32_t block = 2 * step.branch + (taken ? 0 : 1);
      if (block_bad[static_cast<size_t>(block)] >= 0) return blocked(block);
      if (!taken) k = static_cast<size_t>(step.jump);
      continue;
    }
    if (step.control == Step::kElse) {  // the end of the then block: past the else block
      k = static_cast<size_t>(step.jump);
      continue;
    }
    const auto t0 = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    ctx.inputs = in_ptrs.data() + in.in_begin;
    ctx.num_inputs = in.n_in;
    ctx.outputs = out_ptrs.data() + in.out_begin;
    ctx.num_outputs = in.n_out;
    ctx.attrs = core::Attrs(attrs.data() + in.attr_begin, in.n_attr);
    ctx.scratch = in.scratch ? in.scratch->data : nullptr;
    ctx.op_data = in.op->prepare ? &op_data[static_cast<size_t>(step.instr)] : nullptr;
    ctx.scratch_bytes = in.scratch ? in.scratch->nbytes() : 0;
    ctx.produced_dim = in.produces >= 0 ? &dim_values[static_cast<size_t>(in.produces)] : nullptr;
    kernels::KernelStatus ks = in.op->run(ctx);
    if (ks == kernels::KernelStatus::kOk && step.control == Step::kLoop) {  // slots hold the initial values
      const int64_t trip = expr_values[static_cast<size_t>(step.trip)];
      if (trip <= 0 || !kernels::branch_condition(*in_ptrs[in.in_begin])) {
        k = static_cast<size_t>(step.jump);
      } else if (block_bad[static_cast<size_t>(2 * step.branch)] >= 0) {
        return blocked(2 * step.branch);
      }
    } else if (ks == kernels::KernelStatus::kOk && step.control == Step::kEndLoop) {  // one more iteration?
      const int64_t done = *static_cast<const int64_t*>(in_ptrs[in.in_begin]->data);
      if (done < expr_values[static_cast<size_t>(step.trip)] && kernels::branch_condition(*in_ptrs[in.in_begin + 1]))
        k = static_cast<size_t>(step.jump);
    }
    if (ks == kernels::KernelStatus::kOk && in.produces >= 0) {
      data_found[static_cast<size_t>(in.produces)] = true;
      KILN_TRY(refresh_data_shapes(in));
    }
    if (profiling)
      instr_ns[static_cast<size_t>(step.instr)] += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    if (ks != kernels::KernelStatus::kOk) return instruction_failure(in, ks, ctx.attrs);
  }
  return ok_status();
}

Status Method::Impl::instruction_failure(const Instr& in, kernels::KernelStatus ks, const core::Attrs& attrs) const {
  if (in.produces >= 0 &&
      dim_values[static_cast<size_t>(in.produces)] > meta.dims[static_cast<size_t>(in.produces)].max) {
    const DimSpec& d = meta.dims[static_cast<size_t>(in.produces)];
    return Status(Code::kOutOfRange,
                  "execute: node '" + node_name(static_cast<size_t>(in.index)) + "' (" + in.op->name + ") found " + d.name +
                      " = " + std::to_string(dim_values[static_cast<size_t>(in.produces)]) + ", above its bound " +
                      std::to_string(d.max) + " (export's --dim " + d.name + "=..N sets it)",
                  Reason::kDataAboveBound);
  }
  if (std::strcmp(in.op->name, "KilnAssert") == 0) return block_guard_failed(attrs);
  return Status(Code::kInvalidArgument,
                "execute: instruction #" + std::to_string(in.index) + " node '" + node_name(static_cast<size_t>(in.index)) +
                    "' (" + in.op->name + ") failed: " + kernels::kernel_status_message(ks),
                Reason::kDataRefused);
}

Status Method::Impl::refresh_data_shapes(const Instr& producer) {
  // Runs inside execute: the message is built only on failure (execute allocates nothing).
  const auto after = [&] {
    return "execute: after node '" + node_name(static_cast<size_t>(producer.index)) + "' found " +
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
  s.wall_ns = s.caller_cpu_ns = 0;
  if (s.pool) s.pool_at_start = s.pool->stats();
  if (s.delegate) s.delegate->reset_times();
}

ThreadProfile Method::thread_profile() const {
  const Impl& s = *impl_;
  ThreadProfile t;
  t.runs = s.profiled_runs;
  t.wall_ns = s.wall_ns;
  t.caller_cpu_ns = s.caller_cpu_ns;
  if (!s.pool) return t;
  const kernels::ThreadPool::Stats now = s.pool->stats(), &was = s.pool_at_start;
  t.threads = static_cast<int>(s.pool->threads());
  t.jobs = now.jobs - was.jobs;
  t.items = now.items - was.items;
  t.worker_items = now.worker_items - was.worker_items;
  t.wait_ns = now.wait_ns - was.wait_ns;
  t.long_waits = now.long_waits - was.long_waits;
  t.alone_jobs = now.alone_jobs - was.alone_jobs;
  t.moves = now.moves - was.moves;
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
      rows.push_back(ProfileRow{in.op->name, s.node_name(i), false,
                                shape(in.n_out ? s.out_ptrs[in.out_begin] : nullptr),
                                i < s.instr_ns.size() ? s.instr_ns[i] : 0, s.profiled_runs});
      continue;
    }
    const size_t r = static_cast<size_t>(step.region);
    for (size_t k = 0; k < s.delegate->num_steps(r); ++k) {
      const delegates::StepInfo info = s.delegate->step_info(r, k);
      ProfileRow row;
      row.delegated = true;
      row.ns = info.ns;
      row.runs = s.profiled_runs;
      row.shape = shape(info.out);
      row.in_next = info.in_next;
      if (info.source >= 0) {
        row.op = s.op_name(static_cast<size_t>(info.source));
        if (info.gate >= 0) row.op += "+" + s.op_name(static_cast<size_t>(info.gate));
        if (info.fused >= 0) row.op += "+" + s.op_name(static_cast<size_t>(info.fused));
        if (info.clamp >= 0) row.op += "+" + s.op_name(static_cast<size_t>(info.clamp));
        row.node = s.node_name(static_cast<size_t>(info.source));
      } else {
        row.op = std::string(info.kind) == "to_nhwc" ? "ToNhwc" : "ToNchw";
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

bool Method::delegated() const { return impl_->delegate != nullptr; }
bool Method::checks_finite_inputs() const { return impl_->delegate && impl_->check_finite; }
const std::string& Method::delegate_warning() const { return impl_->delegate_warning; }
uint64_t Method::delegate_packed_bytes() const { return impl_->delegate ? impl_->delegate->packed_bytes() : 0; }
uint64_t Method::planned_arena_bytes() const { return impl_->arena_bytes; }
uint64_t Method::arena_bytes_in_use() const { return impl_->placed_bytes; }

Result<uint64_t> MethodAccess::arena_bytes_for(Method& m, const std::vector<std::vector<int64_t>>& shapes) {
  KILN_TRY(m.bind_shapes(shapes));
  return m.arena_bytes_in_use();
}

uint64_t MethodAccess::live_lower_bound_bytes(const Method& m) {
  const Method::Impl& s = *m.impl_;
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

bool MethodAccess::data_dim_found(const Method& m, const std::string& name) {
  for (size_t d = 0; d < m.impl_->dim_names.size(); ++d)
    if (m.impl_->dim_names[d] == name) return d < m.impl_->data_found.size() && m.impl_->data_found[d];
  return false;
}

}  // namespace kiln
