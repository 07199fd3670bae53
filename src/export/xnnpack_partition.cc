#include "export/xnnpack_partition.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "delegates/xnnpack/support.h"
#include "export/memory_plan.h"
#include "format/control.h"
#include "format/file_header.h"
#include "format/schedule.h"
#include "core/status.h"

namespace kiln::exporter {

namespace {

namespace xnn = delegates::xnnpack;
using core::ExprId;
using format::DelegateOpDesc;
using format::DelegateOpKind;
using format::Storage;

std::vector<core::Interval> expr_ranges(const format::MethodDesc& m) {
  std::vector<core::Interval> r(m.exprs.size());
  for (size_t i = 0; i < m.exprs.size(); ++i) {
    const core::ExprNode& e = m.exprs[i];
    core::Interval a, b;
    if (e.op == core::ExprOp::kDim) a = {m.dims[e.a].min, m.dims[e.a].max};
    else if (e.op != core::ExprOp::kConst) a = r[e.a], b = r[e.b];
    r[i] = core::node_range(e.op, a, b, e.value);
  }
  return r;
}

double bound_numel(const std::vector<core::Interval>& range, const std::vector<ExprId>& shape) {
  double n = 1;
  for (ExprId e : shape) n *= static_cast<double>(std::max<int64_t>(0, range[e].hi));
  return n;
}

// Builds the delegated schedule of one method.
class Partitioner {
 public:
  Partitioner(format::MethodDesc* m, const std::vector<uint8_t>& constants) : m_(*m), constants_(constants) {}

  Status run();

 private:
  int root(int v) const { return m_.values[v].storage == Storage::kAlias ? m_.values[v].alias_of : v; }
  const void* const_data(int v) const {
    const format::ValueDesc& r = m_.values[root(v)];
    return r.storage == Storage::kConstant ? constants_.data() + r.offset : nullptr;
  }
  xnn::Operand operand(int v) const {
    xnn::Operand o;
    if (v < 0) {
      o.present = false;
      return o;
    }
    o.dtype = m_.values[v].dtype;
    o.shape = m_.values[v].shape;
    o.const_data = const_data(v);
    return o;
  }
  std::vector<xnn::Operand> operands(const format::InstructionDesc& in) const {
    std::vector<xnn::Operand> ins;
    for (int32_t v : in.inputs) ins.push_back(operand(v));
    return ins;
  }
  bool is_const1(ExprId e) const { return m_.exprs[e].op == core::ExprOp::kConst && m_.exprs[e].value == 1; }
  // Axes 2.. all statically 1: the bytes read the same channels-first and channels-last.
  bool spatial_one(const std::vector<ExprId>& s) const {
    for (size_t k = 2; k < s.size(); ++k)
      if (!is_const1(s[k])) return false;
    return true;
  }
  size_t rank(int v) const { return m_.values[v].shape.size(); }
  // Can `v` (rank r) be read channels-last by an op of rank `out_rank` without a twin?
  bool nhwc_as_is(int v, size_t out_rank) const {
    const std::vector<ExprId>& s = m_.values[v].shape;
    if (s.size() > out_rank) return false;
    std::vector<ExprId> padded(out_rank - s.size(), -1);
    padded.insert(padded.end(), s.begin(), s.end());
    for (size_t k = 2; k < out_rank; ++k)
      if (padded[k] >= 0 && !is_const1(padded[k])) return false;
    return true;
  }

  void plan_supported();
  Status build_region(int32_t first, int32_t last);
  int twin_of(int v);
  void ensure_base(int v, format::DelegateRegionDesc* r);
  int nhwc_operand(int v, format::DelegateRegionDesc* r);
  bool needed_outside(int v, int32_t first, int32_t last) const;
  int fusable_next(int32_t i, int32_t last) const;
  int fusable_conv_gate(int32_t i, int32_t last, int32_t* gate) const;
  int fusable_clamp_after(int32_t i, int32_t fused, int32_t last) const;
  /// True when the delegate may compute `producer`, a depthwise convolution, inside
  /// `consumer`, the 1x1 convolution after it that reads its output (depthwise_pointwise).
  bool feeds_pointwise(const format::DelegateOpDesc& producer, const format::DelegateOpDesc& consumer) const;
  void plan_arena();
  void mark_concat_slices();

  format::MethodDesc& m_;
  const std::vector<uint8_t>& constants_;
  std::vector<std::optional<xnn::OpPlan>> plans_;
  std::vector<std::vector<int32_t>> readers_;  // per root value: instructions that read it or a view of it
  std::vector<bool> is_output_;                // per root value
  std::vector<int> twin_;                      // per value: its channels-last twin, or -1
  std::vector<bool> base_valid_;               // per value: its own bytes hold its contents
};

void Partitioner::plan_supported() {
  const size_t n = m_.instructions.size();
  plans_.assign(n, std::nullopt);
  format::DelegateDesc& d = m_.delegate;
  // Shapes that read a data-dependent dim change during execute, after the delegate's setup
  // at bind: such instructions stay portable.
  std::vector<bool> data_expr(m_.exprs.size(), false);
  for (size_t e = 0; e < m_.exprs.size(); ++e) {
    const core::ExprNode& x = m_.exprs[e];
    data_expr[e] = x.op == core::ExprOp::kDim ? m_.dims[static_cast<size_t>(x.a)].data
                   : x.op == core::ExprOp::kConst ? false
                                                  : data_expr[static_cast<size_t>(x.a)] || data_expr[static_cast<size_t>(x.b)];
  }
  auto data_shaped = [&](int32_t v) {
    if (v < 0) return false;
    for (ExprId e : m_.values[static_cast<size_t>(v)].shape)
      if (data_expr[static_cast<size_t>(e)]) return true;
    return false;
  };
  for (size_t i = 0; i < n; ++i) {
    const format::InstructionDesc& in = m_.instructions[i];
    bool data = false;
    for (int32_t v : in.inputs) data = data || data_shaped(v);
    for (int32_t v : in.outputs) data = data || data_shaped(v);
    if (data) {
      d.declined.push_back(format::DeclinedDesc{static_cast<int32_t>(i), "its shapes depend on the data (a NonZero or Compress count)"});
      continue;
    }
    std::vector<std::vector<ExprId>> outs;
    for (int32_t o : in.outputs) outs.push_back(m_.values[o].shape);
    Result<xnn::OpPlan> p = xnn::plan_op(in.op, in.attrs.view(), operands(in), outs, m_.exprs.data());
    if (p.ok()) plans_[i] = *p;
    else d.declined.push_back(format::DeclinedDesc{static_cast<int32_t>(i), p.status().message()});
  }
}

int Partitioner::twin_of(int v) {
  if (twin_[v] >= 0) return twin_[v];
  const format::ValueDesc& b = m_.values[v];
  format::ValueDesc t;
  t.name = b.name + "@nhwc";
  t.dtype = b.dtype;
  t.shape.push_back(b.shape[0]);
  for (size_t k = 2; k < b.shape.size(); ++k) t.shape.push_back(b.shape[k]);
  t.shape.push_back(b.shape[1]);
  t.storage = Storage::kDelegate;
  t.nbytes = b.nbytes;
  t.nhwc_of = v;
  m_.values.push_back(std::move(t));
  twin_.push_back(-1);
  base_valid_.push_back(false);
  twin_[v] = static_cast<int>(m_.values.size()) - 1;
  return twin_[v];
}

// Makes v's own (channels-first) bytes valid, converting from its twin if needed.
void Partitioner::ensure_base(int v, format::DelegateRegionDesc* r) {
  int b = root(v);
  if (base_valid_[b]) return;
  r->ops.push_back(DelegateOpDesc{DelegateOpKind::kToNchw, -1, -1, {twin_[b]}, {b}});
  ++m_.delegate.layout_changes;
  base_valid_[b] = true;
}

// The value to read for v in channels-last: its twin (converted on first use) or v itself. A
// view with its root's shape and dtype (a reshape back, as after ChannelShuffle's 5-D view)
// reads the root's twin.
int Partitioner::nhwc_operand(int v, format::DelegateRegionDesc* r) {
  const int b = root(v);
  if (b != v && twin_[b] >= 0 && m_.values[v].shape == m_.values[b].shape && m_.values[v].dtype == m_.values[b].dtype)
    v = b;
  if (twin_[v] >= 0) return twin_[v];  // written when it was made
  ensure_base(v, r);
  const int t = twin_of(v);
  r->ops.push_back(DelegateOpDesc{DelegateOpKind::kToNhwc, -1, -1, {v}, {t}});
  ++m_.delegate.layout_changes;
  return t;
}

bool Partitioner::needed_outside(int v, int32_t first, int32_t last) const {
  int b = root(v);
  if (is_output_[b]) return true;
  for (int32_t i : readers_[b])
    if (i < first || i >= last) return true;
  return false;
}

// The instruction after i that folds into it, or -1: a Relu/Clip becoming its output clamp,
// or the Mul of x and Sigmoid(x) / HardSigmoid(x) making one gate kernel.
int Partitioner::fusable_next(int32_t i, int32_t last) const {
  const format::InstructionDesc& in = m_.instructions[i];
  if (plans_[i] && plans_[i]->kind == xnn::OpKind::kUnary && in.outputs.size() == 1 && !in.inputs.empty()) {
    const int y = in.outputs[0], x = in.inputs[0];
    if (!is_output_[y] && readers_[y].size() == 1) {
      const int32_t j = readers_[y][0];
      const format::InstructionDesc& mul = m_.instructions[j];
      const bool reads_both = mul.inputs.size() == 2 && ((mul.inputs[0] == x && mul.inputs[1] == y) ||
                                                          (mul.inputs[0] == y && mul.inputs[1] == x));
      if (j > i && j < last && plans_[j] && reads_both && xnn::fusable_gate(in.op, in.attrs.view(), mul.op).ok())
        return j;
    }
  }
  if (!plans_[i] || !xnn::takes_clamp(plans_[i]->kind) || in.outputs.size() != 1) return -1;
  // A fully connected layer's bias Add (MatMul then Add of a constant vector, as torch writes
  // nn.Linear on inputs of rank > 2) folds into the layer's bias.
  if (plans_[i]->kind == xnn::OpKind::kFullyConnected && !is_output_[in.outputs[0]] && readers_[in.outputs[0]].size() == 1) {
    const int32_t j = readers_[in.outputs[0]][0];
    const format::InstructionDesc& a = m_.instructions[j];
    if (j > i && j < last && plans_[j] && a.inputs.size() == 2 && a.inputs[0] != a.inputs[1]) {
      const int yk = a.inputs[0] == in.outputs[0] ? 0 : 1;
      if (xnn::fusable_bias(*plans_[i], a.op, operands(a), yk, rank(in.outputs[0]), m_.exprs.data()).ok()) return j;
    }
  }
  if (plans_[i]->kind == xnn::OpKind::kBinary && (plans_[i]->binary == xnn::BinaryOp::kMax || plans_[i]->binary == xnn::BinaryOp::kMin)) return -1;
  const int y = in.outputs[0];
  if (is_output_[y] || readers_[y].size() != 1) return -1;
  const int32_t j = readers_[y][0];
  if (j <= i || j >= last || !plans_[j]) return -1;
  const format::InstructionDesc& a = m_.instructions[j];
  if (a.inputs.empty() || a.inputs[0] != y) return -1;
  for (size_t k = 1; k < a.inputs.size(); ++k)
    if (a.inputs[k] == y) return -1;
  return xnn::fusable_activation(a.op, a.attrs.view(), operands(a)).ok() ? j : -1;
}

// The Relu/Clip after a fully connected layer's fused bias Add (instruction `fused`), or -1:
// it reads the Add's output alone, which nothing else reads, and becomes the layer's clamp.
int Partitioner::fusable_clamp_after(int32_t i, int32_t fused, int32_t last) const {
  if (fused < 0 || !plans_[i] || plans_[i]->kind != xnn::OpKind::kFullyConnected) return -1;
  const format::InstructionDesc& add = m_.instructions[fused];
  if (add.op != "Add" || add.outputs.size() != 1) return -1;
  const int y = add.outputs[0];
  if (is_output_[y] || readers_[y].size() != 1) return -1;
  const int32_t j = readers_[y][0];
  if (j <= fused || j >= last || !plans_[j]) return -1;
  const format::InstructionDesc& a = m_.instructions[j];
  if (a.inputs.empty() || a.inputs[0] != y || a.outputs.size() != 1) return -1;
  for (size_t k = 1; k < a.inputs.size(); ++k)
    if (a.inputs[k] == y || (a.inputs[k] >= 0 && !const_data(a.inputs[k]))) return -1;
  return xnn::fusable_activation(a.op, a.attrs.view(), operands(a)).ok() ? j : -1;
}

// The gate y * act(y) after a float convolution (SiLU: Sigmoid then Mul; hard swish:
// HardSigmoid then Mul), computed in the convolution's output tiles: y is read by the
// activation and the Mul alone, the activation's output by the Mul alone, and neither leaves
// the method. Returns the Mul and sets *gate to the activation, or returns -1.
int Partitioner::fusable_conv_gate(int32_t i, int32_t last, int32_t* gate) const {
  const format::InstructionDesc& conv = m_.instructions[i];
  if (!plans_[i] || plans_[i]->kind != xnn::OpKind::kConv || conv.op != "Conv" || conv.outputs.size() != 1) return -1;
  const int y = conv.outputs[0];
  if (root(y) != y || m_.values[y].dtype != DType::kF32 || is_output_[y] || readers_[y].size() != 2) return -1;
  for (int32_t a : readers_[y]) {
    const format::InstructionDesc& act = m_.instructions[a];
    if (a <= i || a >= last || !plans_[a] || act.inputs.size() != 1 || act.outputs.size() != 1) continue;
    const int g = act.outputs[0];
    if (root(g) != g || is_output_[g] || readers_[g].size() != 1) continue;
    const int32_t j = readers_[g][0];
    const format::InstructionDesc& mul = m_.instructions[j];
    const bool reads_both = mul.inputs.size() == 2 && ((mul.inputs[0] == y && mul.inputs[1] == g) ||
                                                        (mul.inputs[0] == g && mul.inputs[1] == y));
    const bool other = readers_[y][0] == j || readers_[y][1] == j;  // y's second reader is the Mul
    if (j > a && j < last && plans_[j] && reads_both && other &&
        xnn::fusable_gate(act.op, act.attrs.view(), mul.op).ok()) {
      *gate = a;
      return j;
    }
  }
  return -1;
}

Status Partitioner::build_region(int32_t first, int32_t last) {
  format::DelegateRegionDesc r;
  r.first = first;
  r.count = last - first;
  std::vector<bool> fused_away(static_cast<size_t>(last - first), false);
  for (int32_t i = first; i < last; ++i) {
    if (fused_away[i - first]) continue;
    const format::InstructionDesc& in = m_.instructions[i];
    const xnn::OpPlan& p = *plans_[i];
    DelegateOpDesc op;
    op.source = i;
    op.fused = fusable_conv_gate(i, last, &op.gate);
    if (op.fused < 0) op.fused = fusable_next(i, last);
    if (op.gate < 0) op.clamp = fusable_clamp_after(i, op.fused, last);
    if (op.fused >= 0) fused_away[op.fused - first] = true;
    if (op.gate >= 0) fused_away[op.gate - first] = true;
    if (op.clamp >= 0) fused_away[op.clamp - first] = true;
    const int32_t writer = op.clamp >= 0 ? op.clamp : op.fused;
    const std::vector<int32_t> outs = writer >= 0 ? m_.instructions[writer].outputs : in.outputs;
    const size_t out_rank = m_.values[outs[0]].shape.size();
    bool nhwc = p.layout == xnn::Layout::kNhwc;
    if (p.layout == xnn::Layout::kEither && out_rank >= 3) {
      // Pointwise ops follow their inputs: channels-last when an input is only there.
      bool any_twin = false, all_fit = true;
      for (int32_t v : in.inputs) {
        if (v < 0 || const_data(v)) continue;
        if (twin_[v] >= 0 && !base_valid_[root(v)]) any_twin = true;
        if (rank(v) != out_rank && !nhwc_as_is(v, out_rank)) all_fit = false;
      }
      nhwc = any_twin && all_fit;
    }
    for (size_t k = 0; k < in.inputs.size(); ++k) {
      const int32_t v = in.inputs[k];
      if (v < 0 || const_data(v)) {
        op.inputs.push_back(v);
        continue;
      }
      const bool activation = p.kind == xnn::OpKind::kConcat || p.kind == xnn::OpKind::kBinary || k == 0;
      const bool same_bytes = spatial_one(m_.values[v].shape) && base_valid_[root(v)];
      if (nhwc && activation && rank(v) == out_rank && !same_bytes) {
        op.inputs.push_back(nhwc_operand(v, &r));
      } else {
        ensure_base(v, &r);
        op.inputs.push_back(v);
      }
    }
    for (int32_t y : outs) {
      if (nhwc && rank(y) >= 3 && !spatial_one(m_.values[y].shape)) {
        op.outputs.push_back(twin_of(y));
        base_valid_[y] = false;
      } else {
        op.outputs.push_back(y);
        base_valid_[y] = true;
      }
    }
    r.ops.push_back(op);
    for (int32_t y : outs)
      if (!base_valid_[y] && needed_outside(y, first, last)) ensure_base(y, &r);
  }
  m_.delegate.regions.push_back(std::move(r));
  return ok_status();
}

// A channels-last Concat input that only the Concat reads, computed by a float dense convolution
// of the same region, is written by the convolution straight into its channel slice of the
// Concat's output (DelegateOp::into): squeezenet's fire modules at 4x320 copied 5.7 ms of
// 56 there. The Concat's output then lives from the first such convolution on.
void Partitioner::mark_concat_slices() {
  std::vector<int> reads(m_.values.size(), 0);
  auto count = [&](const std::vector<int32_t>& ins) {
    for (int32_t v : ins)
      if (v >= 0) ++reads[root(v)];
  };
  size_t next = 0;
  for (const format::DelegateRegionDesc& r : m_.delegate.regions) {
    for (; next < static_cast<size_t>(r.first); ++next) count(m_.instructions[next].inputs);
    for (const DelegateOpDesc& op : r.ops) count(op.inputs);
    next = static_cast<size_t>(r.first + r.count);
  }
  for (; next < m_.instructions.size(); ++next) count(m_.instructions[next].inputs);
  for (format::DelegateRegionDesc& r : m_.delegate.regions) {
    for (size_t c = 0; c < r.ops.size(); ++c) {
      const DelegateOpDesc& cat = r.ops[c];
      if (cat.kind != DelegateOpKind::kKernel || m_.instructions[cat.source].op != "Concat" || cat.outputs.size() != 1 ||
          m_.values[cat.outputs[0]].storage != Storage::kDelegate)
        continue;
      for (int32_t v : cat.inputs) {
        if (v < 0 || m_.values[v].storage != Storage::kDelegate || reads[v] != 1 ||
            std::count(cat.inputs.begin(), cat.inputs.end(), v) != 1)
          continue;
        for (size_t k = 0; k < c; ++k) {
          DelegateOpDesc& op = r.ops[k];
          if (op.kind != DelegateOpKind::kKernel || op.outputs.size() != 1 || op.outputs[0] != v) continue;
          const std::optional<xnn::OpPlan>& p = plans_[op.source];
          if (m_.instructions[op.source].op == "Conv" && p && p->kind == xnn::OpKind::kConv && p->groups == 1 &&
              m_.values[v].dtype == DType::kF32)
            op.into = cat.outputs[0];
        }
      }
    }
  }
}

bool Partitioner::feeds_pointwise(const DelegateOpDesc& producer, const DelegateOpDesc& consumer) const {
  if (producer.kind != DelegateOpKind::kKernel || consumer.kind != DelegateOpKind::kKernel || producer.inputs.empty() ||
      producer.outputs.size() != 1 || producer.into >= 0 || consumer.inputs.empty() ||
      consumer.inputs[0] != producer.outputs[0])
    return false;
  const std::optional<xnn::OpPlan>& d = plans_[producer.source];
  const std::optional<xnn::OpPlan>& p = plans_[consumer.source];
  return d && p && d->kind == xnn::OpKind::kConv && d->groups > 1 && d->group_in == 1 && d->group_out == 1 &&
         p->kind == xnn::OpKind::kConv && p->groups == 1 && p->kernel_h == 1 && p->kernel_w == 1;
}

void Partitioner::plan_arena() {
  mark_concat_slices();
  format::DelegateDesc& d = m_.delegate;
  const size_t n_values = m_.values.size();
  std::vector<format::Step> steps;
  std::vector<format::LoopSpan> loops;
  std::vector<int64_t> loop_begin;  // KilnLoop's step, until its KilnEndLoop
  auto portable_step = [&](size_t k) {
    const format::InstructionDesc& in = m_.instructions[k];
    if (in.op == format::kLoopOp) loop_begin.push_back(static_cast<int64_t>(steps.size()) + 1);
    if (in.op == format::kEndLoopOp && !loop_begin.empty()) {
      loops.push_back(format::LoopSpan{loop_begin.back(), static_cast<int64_t>(steps.size()) + 1});
      loop_begin.pop_back();
    }
    format::Step st{in.inputs, in.outputs};
    if (in.scratch >= 0) st.writes.push_back(in.scratch);
    steps.push_back(std::move(st));
  };
  size_t next = 0;
  for (const format::DelegateRegionDesc& r : d.regions) {
    for (; next < static_cast<size_t>(r.first); ++next) portable_step(next);
    for (size_t k = 0; k < r.ops.size(); ++k) {
      const DelegateOpDesc& op = r.ops[k];
      steps.push_back(format::Step{op.inputs, op.outputs});
      if (op.into >= 0) steps.back().writes.push_back(op.into);
      // The delegate may compute a depthwise layer inside the 1x1 after it (depthwise_pointwise):
      // the 1x1 then reads the depthwise input, which must not share bytes with its output.
      if (k > 0 && feeds_pointwise(r.ops[k - 1], op)) steps.back().reads.push_back(r.ops[k - 1].inputs[0]);
    }
    next = static_cast<size_t>(r.first + r.count);
  }
  for (; next < m_.instructions.size(); ++next) portable_step(next);
  std::vector<int32_t> roots(n_values);
  for (size_t v = 0; v < n_values; ++v) roots[v] = root(static_cast<int>(v));
  format::Lifetimes life = format::compute_lifetimes(n_values, steps, m_.inputs, m_.outputs, roots, loops);
  std::vector<Buffer> buffers;
  std::vector<int32_t> which;
  for (size_t v = 0; v < n_values; ++v) {
    Storage s = m_.values[v].storage;
    if (s == Storage::kConstant || s == Storage::kAlias || !life.alive(static_cast<int32_t>(v))) continue;
    buffers.push_back(Buffer{m_.values[v].nbytes, life.first[v], life.end(static_cast<int32_t>(v))});
    which.push_back(static_cast<int32_t>(v));
  }
  MemoryPlan plan = plan_memory(buffers, format::kSegmentAlignment, sample_sizes(m_, which));
  d.offsets.assign(n_values, 0);
  for (size_t b = 0; b < buffers.size(); ++b) d.offsets[which[b]] = plan.offsets[b];
  d.placement = placement_of(plan, which, n_values);
  // The portable plan's placement covers the values before the twins: they have empty lists.
  format::PlacementDesc& pp = m_.placement;
  while (!pp.below_start.empty() && pp.below_start.size() < n_values + 1) pp.below_start.push_back(pp.below_start.back());
  d.arena_bytes = plan.arena_bytes;
  d.lower_bound_bytes = plan.lower_bound_bytes;
  d.plan_strategy = plan.strategy;
}

Status Partitioner::run() {
  const size_t n_values = m_.values.size(), n = m_.instructions.size();
  m_.delegate = format::DelegateDesc{};
  m_.delegate.backend = "xnnpack";
  readers_.assign(n_values, {});
  is_output_.assign(n_values, false);
  for (size_t i = 0; i < n; ++i)
    for (int32_t v : m_.instructions[i].inputs)
      if (v >= 0 && (readers_[root(v)].empty() || readers_[root(v)].back() != static_cast<int32_t>(i)))
        readers_[root(v)].push_back(static_cast<int32_t>(i));
  for (int32_t o : m_.outputs) is_output_[root(o)] = true;
  twin_.assign(n_values, -1);
  base_valid_.assign(n_values, true);
  plan_supported();
  // Runtime branches: a region never spans a block boundary (a block may be skipped), and a
  // channels-last twin made inside a block is not there when the block is skipped, so twins
  // are forgotten at every boundary (KilnIf, KilnElse, the end of an else block, a loop's
  // KilnLoop and KilnEndLoop and the instructions after them).
  std::vector<bool> boundary(n + 1, false);
  for (size_t i = 0; i < n; ++i) {
    const std::string& op = m_.instructions[i].op;
    if (op == format::kLoopOp || op == format::kEndLoopOp) {  // a loop's body: from the loop's start and after its end
      boundary[i] = boundary[i + 1] = true;
      continue;
    }
    if (op != format::kIfOp && op != format::kElseOp) continue;
    boundary[i] = true;
    if (op == format::kElseOp) {
      const int64_t len = m_.instructions[i].attrs.view().get_int("else_len", 0);
      if (len >= 0 && i + 1 + static_cast<size_t>(len) <= n) boundary[i + 1 + static_cast<size_t>(len)] = true;
    }
  }
  for (size_t i = 0; i < n;) {
    if (boundary[i]) std::fill(twin_.begin(), twin_.end(), -1);
    if (!plans_[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && plans_[j] && (j == i || !boundary[j])) ++j;
    KILN_TRY(build_region(static_cast<int32_t>(i), static_cast<int32_t>(j)));
    i = j;
  }
  for (size_t i = 0; i < n; ++i) {
    const double f = instruction_flops(m_, i);
    m_.delegate.flops += static_cast<uint64_t>(f);
    if (plans_[i]) m_.delegate.delegated_flops += static_cast<uint64_t>(f);
  }
  plan_arena();
  return ok_status();
}

}  // namespace

double instruction_flops(const format::MethodDesc& m, size_t i) {
  const std::vector<core::Interval> range = expr_ranges(m);
  const format::InstructionDesc& in = m.instructions[i];
  if (in.outputs.empty()) return 0;
  const double out = bound_numel(range, m.values[in.outputs[0]].shape);
  auto hi = [&](int32_t v, int64_t axis) {
    const std::vector<ExprId>& s = m.values[v].shape;
    if (s.empty()) return 1.0;
    size_t k = axis < 0 ? s.size() - 1 : std::min<size_t>(static_cast<size_t>(axis), s.size() - 1);
    return static_cast<double>(std::max<int64_t>(1, range[s[k]].hi));
  };
  const bool qconv = in.op == "QLinearConv" && in.inputs.size() >= 4;
  if ((in.op == "Conv" || in.op == "ConvInteger" || qconv) && in.inputs.size() >= 2) {
    const std::vector<ExprId>& w = m.values[in.inputs[qconv ? 3 : 1]].shape;
    double k = 1;
    for (size_t a = 1; a < w.size(); ++a) k *= static_cast<double>(std::max<int64_t>(1, range[w[a]].hi));
    return 2 * out * k;
  }
  if (in.op == "ConvTranspose" && in.inputs.size() >= 2) {
    const std::vector<ExprId>& w = m.values[in.inputs[1]].shape;
    double k = 1;
    for (size_t a = 1; a < w.size(); ++a) k *= static_cast<double>(std::max<int64_t>(1, range[w[a]].hi));
    return 2 * bound_numel(range, m.values[in.inputs[0]].shape) * k;
  }
  if (in.op == "PackedConvIntegerToFloat") {  // K = group_in x kernel volume, from the attributes
    const core::Attrs a = in.attrs.view();
    double k = static_cast<double>(a.get_int("group_in", 1));
    const int64_t* ks = a.ints("kernel_shape");
    for (uint32_t d = 0; ks && d < a.ints_size("kernel_shape"); ++d) k *= static_cast<double>(ks[d]);
    return 2 * out * k;
  }
  if ((in.op == "MatMul" || in.op == "MatMulInteger" || in.op == "QLinearMatMul" ||
       in.op == "PackedMatMulIntegerToFloat") && in.inputs.size() >= 2)
    return 2 * out * hi(in.inputs[0], -1);
  if (in.op == "Gemm" && in.inputs.size() >= 2) {
    const core::Attrs a = in.attrs.view();
    return 2 * out * hi(in.inputs[0], a.get_int("transA", 0) ? 0 : 1);
  }
  return out;
}

Status partition_xnnpack(format::MethodDesc* m, const std::vector<uint8_t>& constants) {
  Partitioner p(m, constants);
  return p.run();
}

std::string coverage_line(const std::string& backend, size_t delegated, size_t total, uint64_t delegated_flops,
                          uint64_t flops, size_t regions, uint32_t layout_changes) {
  char share[32];
  std::snprintf(share, sizeof(share), "%.1f%%", flops ? 100.0 * static_cast<double>(delegated_flops) / static_cast<double>(flops) : 0.0);
  return backend + ": " + std::to_string(delegated) + "/" + std::to_string(total) + " instructions, " + share +
         " of FLOPs at the bound, " + std::to_string(regions) + " region" + (regions == 1 ? "" : "s") + ", " +
         std::to_string(layout_changes) + " layout change" + (layout_changes == 1 ? "" : "s");
}

std::vector<std::string> group_declined(const std::vector<std::pair<std::string, std::string>>& declined) {
  std::map<std::pair<std::string, std::string>, int> count;
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& d : declined)
    if (count[d]++ == 0) order.push_back(d);
  std::vector<std::string> out;
  for (const auto& d : order)
    out.push_back(d.first + (count[d] > 1 ? " x" + std::to_string(count[d]) : "") + ": " + d.second);
  return out;
}

}  // namespace kiln::exporter
