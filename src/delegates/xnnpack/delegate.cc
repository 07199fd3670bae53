// The XNNPACK backend: Kiln's xnn_allocator, and the regions' ops made from the table
// (ops.inc) at create, set up at bind when their operands changed, run at execute. The ops
// themselves are in their families' files (op.h).
#include "delegates/xnnpack/delegate.h"

#include <pthreadpool.h>
#include <xnnpack.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <mutex>
#include <string>

#include "delegates/xnnpack/op.h"
#include "delegates/xnnpack/support.h"
#include "core/status.h"

namespace kiln::delegates::xnnpack {

namespace {

// --- Kiln's xnn_allocator ---------------------------------------------------------------
// Blocks carry their capacity, so XNNPACK's re-allocation of an indirection buffer for a
// smaller shape (every setup at a changed shape) is served in place: after the first setup at
// the bound, setups allocate nothing.
std::atomic<uint64_t> g_allocations{0};
std::atomic<uint64_t> g_bytes{0};
constexpr size_t kHeader = 64;  // keeps the payload 64-byte aligned

void* alloc_block(size_t size) {
  // Through operator new (nothrow), like every other allocation of Kiln's, so an app's
  // replacement of it (and the allocation-failure tests) sees XNNPACK's blocks too.
  void* p = ::operator new((size + 2 * kHeader - 1) / kHeader * kHeader, std::align_val_t{kHeader}, std::nothrow);
  if (!p) return nullptr;
  ++g_allocations;
  g_bytes += size;
  std::memcpy(p, &size, sizeof(size));
  return static_cast<uint8_t*>(p) + kHeader;
}
size_t capacity(void* payload) {
  size_t c;
  std::memcpy(&c, static_cast<uint8_t*>(payload) - kHeader, sizeof(c));
  return c;
}
void free_block(void*, void* payload) {
  if (payload) ::operator delete(static_cast<uint8_t*>(payload) - kHeader, std::align_val_t{kHeader});
}
void* allocate(void*, size_t size) { return alloc_block(size); }
void* reallocate(void*, void* payload, size_t size) {
  if (payload && capacity(payload) >= size) return payload;
  void* q = alloc_block(size);
  if (!q) return nullptr;  // realloc's contract: the old block stays valid
  if (payload) std::memcpy(q, payload, capacity(payload));
  free_block(nullptr, payload);
  return q;
}
void* aligned_allocate(void*, size_t alignment, size_t size) {
  return alignment <= kHeader ? alloc_block(size) : nullptr;
}

const xnn_allocator kAllocator = {nullptr, allocate, reallocate, free_block, aligned_allocate, free_block};

}  // namespace

Status initialize() {
  static std::once_flag once;
  static xnn_status status = xnn_status_uninitialized;
  std::call_once(once, [] { status = xnn_initialize(&kAllocator); });
  if (status != xnn_status_success)
    return unimplemented("XNNPACK cannot initialize on this CPU (xnn_status " + std::to_string(status) + ")");
  return ok_status();
}

std::string status_text(xnn_status s) {
  switch (s) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
  }
  return "status " + std::to_string(static_cast<int>(s));
}

Status check_create(xnn_status s, const std::string& what) {
  if (s == xnn_status_success) return ok_status();
  return unimplemented(what + ": XNNPACK create failed (" + status_text(s) + ")");
}

Status check_setup(xnn_status s, const Op& op) {
  if (s == xnn_status_success) return ok_status();
  // (a convolution's indirection buffer is allocated here, at the first setup of a size)
  if (s == xnn_status_out_of_memory) return resource_exhausted(op.what + ": XNNPACK setup ran out of memory");
  return invalid_argument(op.what + ": XNNPACK setup failed (" + status_text(s) + ")");
}

Status XnnOp::run() {
  if (xnn_run_operator(xop, pool) != xnn_status_success) return internal_error(what + ": XNNPACK run failed");
  return ok_status();
}

// --- Shapes ------------------------------------------------------------------------------

void nhwc_dims(const TensorView& t, bool twin, size_t* n, size_t* h, size_t* w, size_t* c) {
  const int r = t.rank;
  *n = static_cast<size_t>(t.dims[0]);
  if (twin) {
    *c = static_cast<size_t>(t.dims[r - 1]);
    *w = static_cast<size_t>(t.dims[r - 2]);
    *h = r == 4 ? static_cast<size_t>(t.dims[1]) : 1;
  } else {
    *c = static_cast<size_t>(t.dims[1]);
    *w = static_cast<size_t>(t.dims[r - 1]);
    *h = r == 4 ? static_cast<size_t>(t.dims[2]) : 1;
  }
}

size_t numel(const TensorView& t) {
  size_t n = 1;
  for (int k = 0; k < t.rank; ++k) n *= static_cast<size_t>(t.dims[k]);
  return n;
}

TensorView as_nhwc(const TensorView& t, bool twin) {
  TensorView v = t;
  if (twin || t.rank < 3) return v;
  for (int k = 1; k + 1 < t.rank; ++k) v.dims[k] = t.dims[k + 1];
  v.dims[t.rank - 1] = t.dims[1];
  return v;
}

int64_t same_upper_pad(size_t in, size_t out, size_t stride, size_t kernel, size_t dilation) {
  const int64_t total = static_cast<int64_t>((out - 1) * stride + (kernel - 1) * dilation + 1) - static_cast<int64_t>(in);
  return std::max<int64_t>(0, total) / 2;
}

// --- What an op's create reads -------------------------------------------------------------

const float* OpSource::const_f32(int32_t v) const {
  if (v < 0) return nullptr;
  const fb::Value* val = m->values()->Get(v);
  if (val->storage() == fb::StorageKind::Alias) val = m->values()->Get(val->alias_of());
  return val->storage() == fb::StorageKind::Constant ? reinterpret_cast<const float*>(file->constants + val->offset())
                                                      : nullptr;
}

const float* OpSource::operand_f32(size_t k) const {
  return k < in->inputs()->size() ? const_f32(in->inputs()->Get(static_cast<flatbuffers::uoffset_t>(k))) : nullptr;
}

namespace {
core::Attrs attrs_of(const fb::Instruction* in, std::vector<core::AttrRef>* storage) {
  storage->clear();
  if (in->attrs())
    for (const fb::Attribute* a : *in->attrs()) storage->push_back(format::attr_ref(a));
  return core::Attrs(storage->data(), static_cast<uint32_t>(storage->size()));
}
}  // namespace

core::Attrs OpSource::attrs(std::vector<core::AttrRef>* storage) const { return attrs_of(in, storage); }

void KernelOperands::capture(const OpSource& src) {
  src.attrs(&attrs);
  views.clear();
  for (int32_t v : *src.dop->inputs()) views.push_back(v >= 0 ? &(*src.views)[v] : nullptr);
}

namespace {

// Below this much work (output elements times FLOPs per element), an op runs single-threaded.
constexpr double kMinParallelWork = 1 << 16;
// Ops that only move memory (at most one FLOP per output: elementwise ops, reductions, layout
// changes) are bound by bytes that sit in the producing core's cache. The pool deals each
// thread the same rows job after job (its home range), so an op whose input its producer split
// the same way finds it in its own core's cache: splitting pays from this many elements
// (mobilenet_v3_small 4x3x320x320 at 2 threads: its squeeze-excite GlobalAveragePool, Mul and
// Add run on one thread below 2^18 elements, reading half their input from the other core;
// 5.47 -> 5.04 ms at 2^14).
constexpr double kMinParallelMoves = 1 << 14;
// A Concat's inputs come from different producers (a skip connection's long before), whose
// split its own does not match: splitting it pays only above this many output elements.
// Measured on the zoo's unet decoder at 1x3x64x64: its 65,536-element Concat took 2.4x longer
// on 2 threads than on 1.
constexpr double kMinParallelCopies = 1 << 18;

// The pool for an op of this much work, or null (run on the calling thread).
pthreadpool_t pool_for(pthreadpool_t pool, size_t elements, double flops_per_output, bool concat = false) {
  const double n = static_cast<double>(elements);
  if (concat) return n >= kMinParallelCopies ? pool : nullptr;
  return flops_per_output <= 1 ? (n >= kMinParallelMoves ? pool : nullptr)
                               : (n * flops_per_output >= kMinParallelWork ? pool : nullptr);
}

// What an op's size is judged by: its output elements, or, for ops that only move memory, the
// larger of its output and its first input (a reduction such as GlobalAveragePool reads far
// more than it writes).
size_t moved_elements(const Op& op) {
  size_t n = numel(*op.out);
  if (op.plan.flops_per_output <= 1 && !op.ins.empty() && op.ins[0]) n = std::max(n, numel(*op.ins[0]));
  return n;
}

// --- Making a region's ops ---------------------------------------------------------------

// What the support check sees of instruction `in`: operands (constants with their bytes).
std::vector<Operand> operands_of(const fb::Method* m, const format::ProgramFile& file, const fb::Instruction* in) {
  std::vector<Operand> ops;
  for (int32_t v : *in->inputs()) {
    Operand o;
    if (v < 0) {
      o.present = false;
    } else {
      const fb::Value* val = m->values()->Get(v);
      const fb::Value* root = val->storage() == fb::StorageKind::Alias ? m->values()->Get(val->alias_of()) : val;
      o.dtype = static_cast<DType>(val->dtype());
      o.shape.assign(val->shape()->begin(), val->shape()->end());
      if (root->storage() == fb::StorageKind::Constant) o.const_data = file.constants + root->offset();
    }
    ops.push_back(std::move(o));
  }
  return ops;
}

bool is_twin(const fb::Method* m, int32_t v) { return m->values()->Get(v)->storage() == fb::StorageKind::Delegate; }

bool spatial_one(const std::vector<core::ExprNode>& exprs, const fb::Value* v) {
  for (size_t k = 2; k < v->shape()->size(); ++k) {
    const core::ExprNode& e = exprs[v->shape()->Get(k)];
    if (e.op != core::ExprOp::kConst || e.value != 1) return false;
  }
  return true;
}

// What export fused into the instruction (DelegateOp::fused): a Mul into a Sigmoid or
// HardSigmoid (a gate), a convolution's gate (DelegateOp::gate and the Mul), an Add of a constant vector into a fully connected layer's bias, or a
// Relu/Clip into the op's output clamp.
Status apply_fusion(const OpSource& src, OpPlan* plan, Gate* gate, OpSource* out, const std::string& what) {
  const fb::Method* m = src.m;
  const fb::Instruction* in = src.in;
  const fb::Instruction* f = m->instructions()->Get(src.dop->fused());
  if (src.dop->gate() >= 0) {  // a convolution's gate: the reader checked what it reads
    const fb::Instruction* a = m->instructions()->Get(src.dop->gate());
    std::vector<core::AttrRef> act_attrs;
    Result<Gate> g = fusable_gate(a->op()->str(), attrs_of(a, &act_attrs), f->op()->str());
    if (!g.ok() || plan->kind != OpKind::kConv)
      return unimplemented(what + " cannot fold the gate of instruction #" + std::to_string(src.dop->gate()));
    *gate = *g;
    out->gate = gate;
    return ok_status();
  }
  std::vector<core::AttrRef> source_attrs;
  Result<Gate> g = fusable_gate(in->op()->str(), attrs_of(in, &source_attrs), f->op()->str());
  const int32_t x = in->inputs()->Get(0), y = in->outputs()->Get(0);
  const bool reads_both = f->inputs()->size() == 2 && ((f->inputs()->Get(0) == x && f->inputs()->Get(1) == y) ||
                                                       (f->inputs()->Get(0) == y && f->inputs()->Get(1) == x));
  if (g.ok() && reads_both && plan->kind == OpKind::kUnary) {
    *gate = *g;
    out->gate = gate;
    return ok_status();
  }
  const int yk = f->inputs()->size() == 2 && f->inputs()->Get(1) == y ? 1 : 0;
  const std::vector<Operand> f_operands = operands_of(m, *src.file, f);
  Result<const float*> bias =
      fusable_bias(*plan, f->op()->str(), f_operands, yk, m->values()->Get(y)->shape()->size(), src.exprs->data());
  if (bias.ok() && f->inputs()->Get(yk) == y) {  // the Add's constant joins the layer's bias
    const float* own = src.operand_f32(2);
    out->fused_bias.assign(*bias, *bias + plan->out_channels);
    for (size_t k = 0; own && k < out->fused_bias.size(); ++k) out->fused_bias[k] += own[k];
    return ok_status();
  }
  std::vector<core::AttrRef> attrs;
  Result<std::pair<float, float>> clamp = fusable_activation(f->op()->str(), attrs_of(f, &attrs), f_operands);
  const bool no_clamp = plan->kind == OpKind::kBinary && (plan->binary == BinaryOp::kMax || plan->binary == BinaryOp::kMin);
  if (!clamp.ok() || !takes_clamp(plan->kind) || no_clamp)
    return unimplemented(what + " cannot fuse instruction #" + std::to_string(src.dop->fused()));
  plan->out_min = std::max(plan->out_min, clamp->first);
  plan->out_max = std::min(plan->out_max, clamp->second);
  return ok_status();
}

// An activation after a fully connected layer's fused bias Add (DelegateOp::clamp; the reader
// checked what it reads) narrows the layer's output clamp.
Status apply_clamp(const OpSource& src, OpPlan* plan, const std::string& what) {
  const fb::Instruction* a = src.m->instructions()->Get(src.dop->clamp());
  std::vector<core::AttrRef> attrs;
  Result<std::pair<float, float>> clamp =
      fusable_activation(a->op()->str(), attrs_of(a, &attrs), operands_of(src.m, *src.file, a));
  if (!clamp.ok() || plan->kind != OpKind::kFullyConnected || src.dop->fused() < 0)
    return unimplemented(what + " cannot fold instruction #" + std::to_string(src.dop->clamp()) + " into its clamp");
  plan->out_min = std::max(plan->out_min, clamp->first);
  plan->out_max = std::min(plan->out_max, clamp->second);
  return ok_status();
}

// The op's operands and output, in the layouts export chose.
void wire(const OpSource& src, Op* op) {
  const int32_t out_id = src.dop->outputs()->Get(0);
  op->out = &(*src.views)[out_id];
  op->out_twin = is_twin(src.m, out_id);
  bool any_twin = op->out_twin;
  for (size_t k = 0; k < src.dop->inputs()->size(); ++k) {
    const int32_t v = src.dop->inputs()->Get(static_cast<flatbuffers::uoffset_t>(k));
    op->in_twin.push_back(v >= 0 && is_twin(src.m, v));
    any_twin = any_twin || op->in_twin.back();
    op->ins.push_back(v >= 0 && !src.operands[k].const_data ? &(*src.views)[v] : nullptr);
  }
  op->nhwc = op->plan.layout == Layout::kNhwc || (op->plan.layout == Layout::kEither && any_twin);
}

// The layout rules export used, checked again on the verified program: a channels-last op
// reads twins, or channels-first values whose bytes read the same channels-last; a plain op
// never sees a twin.
Status check_layouts(const OpSource& src, const Op& op) {
  const fb::Method* m = src.m;
  const std::vector<core::ExprNode>& exprs = *src.exprs;
  const int32_t out_id = src.dop->outputs()->Get(0);
  bool any_twin = op.out_twin;
  for (bool t : op.in_twin) any_twin = any_twin || t;
  if (op.plan.layout == Layout::kPlain && any_twin) return unimplemented(op.what + " reads a channels-last operand");
  if (!op.nhwc) {
    if (op.out_twin) return unimplemented(op.what + " writes a channels-last value from a channels-first op");
    return ok_status();
  }
  const size_t out_rank = m->values()->Get(out_id)->shape()->size();
  if (!op.out_twin && !spatial_one(exprs, m->values()->Get(out_id))) return unimplemented(op.what + " writes channels-first");
  const bool all = op.plan.kind == OpKind::kBinary || op.plan.kind == OpKind::kConcat;
  for (size_t k = 0; k < op.ins.size(); ++k) {
    if (!op.ins[k] || op.in_twin[k] || (!all && k > 0)) continue;
    const fb::Value* v = m->values()->Get(src.dop->inputs()->Get(static_cast<flatbuffers::uoffset_t>(k)));
    const size_t r = v->shape()->size();
    bool fits = r == out_rank ? spatial_one(exprs, v) : r < out_rank;
    for (size_t a = 0; fits && r < out_rank && a < r; ++a) {
      const core::ExprNode& e = exprs[v->shape()->Get(a)];
      if (out_rank - r + a >= 2 && (e.op != core::ExprOp::kConst || e.value != 1)) fits = false;
    }
    if (!fits) return unimplemented(op.what + " reads a channels-first operand in a channels-last op");
  }
  return ok_status();
}

// One step of a region, made from the verified program: its plan from the table's support
// check, what export fused into it, its operands, then the family's create.
Result<std::unique_ptr<Op>> create_op(OpSource src) {
  const fb::DelegateOp* dop = src.dop;
  if (dop->kind() != fb::DelegateOpKind::Kernel) {
    std::unique_ptr<Op> op = make_layout_change(dop->kind() == fb::DelegateOpKind::ToNhwc);
    op->ins.push_back(&(*src.views)[dop->inputs()->Get(0)]);
    op->out = &(*src.views)[dop->outputs()->Get(0)];
    return op;
  }
  const fb::Instruction* in = src.m->instructions()->Get(dop->source());
  src.in = in;
  const std::string what = "instruction #" + std::to_string(dop->source()) + " '" +
                           (in->node_name() ? in->node_name()->str() : "") + "' (" + in->op()->str() + ")";
  if (dop->outputs()->size() != 1) return unimplemented(what + " has more than one output");
  src.operands = operands_of(src.m, *src.file, in);
  std::vector<std::vector<core::ExprId>> out_shapes;
  for (int32_t v : *in->outputs())
    out_shapes.emplace_back(src.m->values()->Get(v)->shape()->begin(), src.m->values()->Get(v)->shape()->end());
  std::vector<core::AttrRef> attrs;
  Result<OpPlan> planned = plan_op(in->op()->str(), attrs_of(in, &attrs), src.operands, out_shapes, src.exprs->data());
  if (!planned.ok()) return unimplemented(what + " cannot run on XNNPACK: " + planned.status().message());
  OpPlan plan = *planned;
  Gate gate;
  if (dop->fused() >= 0) KILN_TRY(apply_fusion(src, &plan, &gate, &src, what));
  if (dop->clamp() >= 0) KILN_TRY(apply_clamp(src, &plan, what));
  std::unique_ptr<Op> op = find_entry(in->op()->str())->make(plan, src);
  op->plan = plan;
  op->what = what;
  op->source = dop->source();
  op->fused = dop->fused();
  op->gate_act = dop->gate();
  op->clamp = dop->clamp();
  wire(src, op.get());
  KILN_TRY(check_layouts(src, *op));
  KILN_TRY(op->create(src));
  return op;
}

// Convolutions that write their Concat's slice (DelegateOp::into; the reader checked that a
// later Concat of the region reads the output once and nothing else does): where the op can,
// it writes there from the slice's first channel and the Concat skips that input.
void wire_slices(const fb::Method* m, const fb::DelegateRegion* r, const std::vector<core::ExprNode>& exprs,
                 std::vector<std::unique_ptr<Op>>& ops) {
  auto channels = [&](int32_t v) {
    const fb::Value* val = m->values()->Get(v);
    const bool twin = val->storage() == fb::StorageKind::Delegate;
    return static_cast<size_t>(exprs[val->shape()->Get(twin ? val->shape()->size() - 1 : 1)].value);
  };
  for (size_t k = 0; k < ops.size(); ++k) {
    const fb::DelegateOp* dop = r->ops()->Get(static_cast<flatbuffers::uoffset_t>(k));
    if (dop->into() < 0 || !ops[k]->writes_slices()) continue;
    const int32_t y = dop->outputs()->Get(0);
    for (size_t c = k + 1; c < ops.size(); ++c) {
      const fb::DelegateOp* cat = r->ops()->Get(static_cast<flatbuffers::uoffset_t>(c));
      if (cat->kind() != fb::DelegateOpKind::Kernel || cat->outputs()->Get(0) != dop->into()) continue;
      size_t offset = 0;
      for (size_t i = 0; i < cat->inputs()->size(); ++i) {
        const int32_t v = cat->inputs()->Get(static_cast<flatbuffers::uoffset_t>(i));
        if (v == y) {
          if (ops[c]->input_in_place(i)) ops[k]->into = ops[c]->out, ops[k]->into_channel = offset;
          break;
        }
        offset += channels(v);
      }
      break;
    }
  }
}

// How many read value v other than the op at `except` of region r (its DelegateOp index) and
// its instruction: the region's other ops, every instruction of the method, its outputs.
size_t other_readers(const fb::Method* m, const fb::DelegateRegion* r, int32_t v, size_t except) {
  const int32_t source = r->ops()->Get(static_cast<flatbuffers::uoffset_t>(except))->source();
  size_t n = 0;
  for (size_t k = 0; k < r->ops()->size(); ++k)
    if (k != except)
      for (int32_t i : *r->ops()->Get(static_cast<flatbuffers::uoffset_t>(k))->inputs()) n += i == v;
  for (size_t k = 0; k < m->instructions()->size(); ++k)
    if (static_cast<int32_t>(k) != source)
      for (int32_t i : *m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(k))->inputs()) n += i == v;
  for (int32_t o : *m->outputs()) n += o == v;
  return n;
}

// A depthwise convolution whose output only the next op reads, a 1x1 convolution: that op
// computes both (depthwise_pointwise), the depthwise rows never written to memory.
void fuse_depthwise_pointwise(const fb::Method* m, const fb::DelegateRegion* r, std::vector<std::unique_ptr<Op>>& ops) {
  for (size_t k = 0; k + 1 < ops.size(); ++k) {
    Op& producer = *ops[k];
    Op& consumer = *ops[k + 1];
    if (!producer.can_feed() || producer.into || consumer.ins.empty() || consumer.ins[0] != producer.out) continue;
    const int32_t v = r->ops()->Get(static_cast<flatbuffers::uoffset_t>(k))->outputs()->Get(0);
    if (other_readers(m, r, v, k + 1) == 0) consumer.take_feeder(&producer);
  }
}

}  // namespace

Result<std::unique_ptr<Delegate>> Delegate::create(const fb::Method* m, const format::ProgramFile& file,
                                                   const std::vector<core::ExprNode>& exprs,
                                                   std::vector<TensorView>* views, pthreadpool_t pool) {
  const fb::Delegate* d = m->delegate();
  if (!d) return failed_precondition("the method has no delegate");
  if (d->backend()->str() != "xnnpack") return unimplemented("unknown delegate backend '" + d->backend()->str() + "'");
  KILN_TRY(initialize());
  const uint64_t bytes_before = g_bytes;
  std::unique_ptr<Delegate> del(new Delegate());
  del->pool_ = pool;
  OpSource src;
  src.m = m;
  src.file = &file;
  src.exprs = &exprs;
  src.views = views;
  for (const fb::DelegateRegion* r : *d->regions()) {
    std::vector<std::unique_ptr<Op>> ops;
    for (const fb::DelegateOp* dop : *r->ops()) {
      src.dop = dop;
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, create_op(src));
      ops.push_back(std::move(op));
    }
    wire_slices(m, r, exprs, ops);
    fuse_depthwise_pointwise(m, r, ops);
    del->regions_.push_back(std::move(ops));
  }
  del->packed_bytes_ = g_bytes - bytes_before;
  return del;
}

Delegate::~Delegate() = default;

Result<std::unique_ptr<Backend>> create_backend(const BackendContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Delegate> d, Delegate::create(ctx.method, *ctx.file, *ctx.exprs, ctx.views, ctx.pool));
  return std::unique_ptr<Backend>(std::move(d));
}

Status Delegate::setup() {
  Shape& now = dims_scratch_;  // keeps its capacity: no allocation after the first bind
  for (std::vector<std::unique_ptr<Op>>& ops : regions_) {
    for (std::unique_ptr<Op>& p : ops) {
      Op& op = *p;
      if (op.is_layout_change()) continue;
      now.clear();  // the operands' shapes and addresses (placement by shape moves values)
      for (const TensorView* t : op.ins)
        if (t) {
          for (int k = 0; k < t->rank; ++k) now.push_back(static_cast<size_t>(t->dims[k]));
          now.push_back(reinterpret_cast<uintptr_t>(t->data));
        }
      for (int k = 0; k < op.out->rank; ++k) now.push_back(static_cast<size_t>(op.out->dims[k]));
      now.push_back(reinterpret_cast<uintptr_t>(op.out->data));
      if (op.into) {
        for (int k = 0; k < op.into->rank; ++k) now.push_back(static_cast<size_t>(op.into->dims[k]));
        now.push_back(reinterpret_cast<uintptr_t>(op.into->data));
      }
      if (now == op.last && !op.last.empty()) continue;
      op.last = now;
      op.skip = numel(*op.out) == 0;  // an empty input with a non-empty output (MatMul, K = 0) still runs
      // Waking the pool costs microseconds: small ops run on the calling thread.
      op.pool = pool_for(pool_, moved_elements(op), op.plan.flops_per_output, op.plan.kind == OpKind::kConcat);
      if (op.skip) continue;
      Status s = op.setup();
      if (!s.ok()) {
        op.last.clear();
        return s;
      }
    }
  }
  return ok_status();
}

StepInfo Delegate::step_info(size_t r, size_t k) const {
  const Op& op = *regions_[r][k];
  StepInfo s;
  s.kind = op.step_kind;
  s.source = op.source;
  s.fused = op.fused;
  s.gate = op.gate_act;
  s.clamp = op.clamp;
  s.keeps_nan = op.keeps_nan();
  s.out = op.out;
  s.ns = op.ns;
  s.in_next = op.in_next();
  return s;
}

void Delegate::reset_times() {
  for (auto& ops : regions_)
    for (auto& op : ops) op->ns = 0;
}

Status Delegate::run_region(size_t r, bool timed) {
  for (std::unique_ptr<Op>& p : regions_[r]) {
    Op& op = *p;
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (op.is_layout_change()) op.pool = pool_for(pool_, numel(*op.out), 1);
    if (!op.skip) KILN_TRY(op.run());
    if (timed)
      op.ns += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  }
  return ok_status();
}

uint64_t allocation_count() { return g_allocations; }

}  // namespace kiln::delegates::xnnpack
