#include "format/reader.h"
#include "format/reader_internal.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/symexpr.h"
#include "core/crc32c.h"
#include "core/utf8.h"
#include "format/control.h"
#include "format/file_header.h"
#include "format/schedule.h"
#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "kiln/tensor.h"
#include "core/status.h"

namespace kiln::format {

using namespace reader_detail;  // NOLINT: the checks reader_delegate.cc shares

namespace {

// Bytes of value `v` at its bound, from the upper bounds of its axes: the rule export used to
// size the plan (GraphBuilder::bound_bytes). False above kMaxValueBytes.
bool bound_bytes(const fb::Value* v, const std::vector<core::Interval>& range, uint64_t* out) {
  int64_t hi[kMaxRank];
  const size_t rank = std::min(len(v->shape()), static_cast<size_t>(kMaxRank));
  for (size_t k = 0; k < rank; ++k) hi[k] = range[v->shape()->Get(static_cast<flatbuffers::uoffset_t>(k))].hi;
  return bytes_at_bound(dtype_size(static_cast<DType>(v->dtype())), hi, rank, out);
}

// A bucket's axes name real inputs and outputs (pairs), its size is what those input axes
// hold statically, and it pads every input.
Status check_bucket(const fb::Method* m) {
  const fb::Bucket* b = m->bucket();
  if (!b) return ok_status();
  const std::string name = "method '" + m->name()->str() + "' bucket";
  const size_t n_in = len(m->inputs()), n_out = len(m->outputs());
  if (b->size() < 1 || len(b->pads()) != n_in || len(b->input_axes()) % 2 != 0 || len(b->output_axes()) % 2 != 0 ||
      len(b->input_axes()) == 0)
    return bad(name + " is malformed");
  auto axis_ok = [&](const flatbuffers::Vector<int32_t>* pairs, size_t k, const flatbuffers::Vector<int32_t>* ids, bool input) {
    const int32_t which = pairs->Get(static_cast<flatbuffers::uoffset_t>(k)), axis = pairs->Get(static_cast<flatbuffers::uoffset_t>(k + 1));
    if (which < 0 || static_cast<size_t>(which) >= ids->size()) return false;
    const fb::Value* v = m->values()->Get(ids->Get(static_cast<flatbuffers::uoffset_t>(which)));
    if (axis < 0 || static_cast<size_t>(axis) >= len(v->shape())) return false;
    (void)input;
    const fb::ExprNode* e = m->exprs()->Get(v->shape()->Get(static_cast<flatbuffers::uoffset_t>(axis)));
    return e->op() == fb::ExprOp::Const && e->value() == b->size();
  };
  for (size_t k = 0; k < len(b->input_axes()); k += 2)
    if (!axis_ok(b->input_axes(), k, m->inputs(), true)) return bad(name + " names an input axis that does not hold its size");
  for (size_t k = 0; k < len(b->output_axes()); k += 2)
    if (!axis_ok(b->output_axes(), k, m->outputs(), false)) return bad(name + " names an output axis that does not hold its size");
  (void)n_out;
  return ok_status();
}

}  // namespace

std::vector<Step> schedule_steps(const fb::Method* m, bool delegated, std::vector<LoopSpan>* loops) {
  std::vector<Step> steps;
  std::vector<int64_t> step_of(m->instructions()->size(), -1);  // 1-based, portable instructions
  auto portable_step = [&](size_t k) {
    step_of[k] = static_cast<int64_t>(steps.size()) + 1;
    const fb::Instruction* in = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(k));
    Step st;
    st.reads.assign(in->inputs()->begin(), in->inputs()->end());
    st.writes.assign(in->outputs()->begin(), in->outputs()->end());
    if (in->scratch() >= 0) st.writes.push_back(in->scratch());
    steps.push_back(std::move(st));
  };
  const size_t n_instr = m->instructions()->size();
  size_t next = 0;
  if (delegated && m->delegate() && m->delegate()->regions()) {
    for (const fb::DelegateRegion* r : *m->delegate()->regions()) {
      for (; next < static_cast<size_t>(r->first()); ++next) portable_step(next);
      for (const fb::DelegateOp* op : *r->ops()) {
        steps.push_back(Step{std::vector<int32_t>(op->inputs()->begin(), op->inputs()->end()),
                             std::vector<int32_t>(op->outputs()->begin(), op->outputs()->end())});
        if (op->into() >= 0) steps.back().writes.push_back(op->into());  // a Concat's slice (schema)
      }
      next = static_cast<size_t>(r->first() + r->count());
    }
  }
  for (; next < n_instr; ++next) portable_step(next);
  if (loops) {
    loops->clear();
    Result<std::vector<Branch>> branches = method_branches(m);  // checked by the reader
    if (branches.ok())
      for (const Branch& b : *branches)
        if (b.loop && step_of[static_cast<size_t>(b.if_at)] > 0 && step_of[static_cast<size_t>(b.else_at)] > 0)
          loops->push_back(LoopSpan{step_of[static_cast<size_t>(b.if_at)], step_of[static_cast<size_t>(b.else_at)]});
  }
  return steps;
}

Result<std::vector<Branch>> method_branches(const fb::Method* m) {
  std::vector<ControlInstr> c(len(m->instructions()));
  for (size_t i = 0; i < c.size(); ++i) {
    const fb::Instruction* in = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const std::string& op = in->op()->str();
    const bool loop = op == kLoopOp || op == kEndLoopOp, is_if = op == kIfOp || op == kLoopOp;
    if (!is_if && !loop && op != kElseOp) continue;
    c[i].kind = is_if ? ControlInstr::kIf : ControlInstr::kElse;
    c[i].loop = loop;
    c[i].len = op == kEndLoopOp ? 0 : -1;  // absent: refused below
    const char* key = op == kIfOp ? "then_len" : op == kElseOp ? "else_len" : "body_len";
    for (size_t k = 0; k < len(in->attrs()); ++k) {
      const fb::Attribute* a = in->attrs()->Get(static_cast<flatbuffers::uoffset_t>(k));
      if (a->kind() == fb::AttrKind::Int && a->name()->str() == key && op != kEndLoopOp) c[i].len = a->i();
    }
  }
  return find_branches(c);
}

Lifetimes method_lifetimes(const fb::Method* m, bool delegated) {
  std::vector<LoopSpan> loops;
  const std::vector<Step> steps = schedule_steps(m, delegated, &loops);
  return compute_lifetimes(m->values()->size(), steps, value_list(m->inputs()), value_list(m->outputs()), roots(m), loops);
}

namespace {

// The dims' ranges and the expression table (operands before their uses); returns the bounds
// of every expression over the dims' ranges: what sizes can reach once bind admits a shape.
Status check_exprs(const fb::Method* m, std::vector<core::Interval>* range) {
  const size_t n_dims = len(m->dims()), n_exprs = len(m->exprs());
  for (size_t i = 0; i < n_dims; ++i) {
    const fb::Dim* d = m->dims()->Get(i);
    if (d->min() < 0 || d->min() > d->max() || d->step() < 1)
      return bad(where(m, "dim", i) + " ('" + d->name()->str() + "') has invalid range [" +
                 std::to_string(d->min()) + ", " + std::to_string(d->max()) + "] step " + std::to_string(d->step()));
  }
  for (size_t i = 0; i < n_exprs; ++i) {
    const fb::ExprNode* e = m->exprs()->Get(i);
    auto op = static_cast<int>(e->op());
    if (op < 0 || op > static_cast<int>(fb::ExprOp::Max)) return bad(where(m, "expression", i) + " has unknown op");
    if (e->op() == fb::ExprOp::Const) {
      if (e->a() != -1 || e->b() != -1) return bad(where(m, "expression", i) + " is a constant with operands");
      continue;
    }
    if (e->op() == fb::ExprOp::Dim) {
      if (e->a() < 0 || static_cast<size_t>(e->a()) >= n_dims || e->b() != -1)
        return bad(where(m, "expression", i) + " names no dim");
      continue;
    }
    if (e->a() < 0 || static_cast<size_t>(e->a()) >= i || e->b() < 0 || static_cast<size_t>(e->b()) >= i)
      return bad(where(m, "expression", i) + " has operands out of order");
  }
  range->assign(n_exprs, core::Interval{});
  for (size_t i = 0; i < n_exprs; ++i) {
    const fb::ExprNode* e = m->exprs()->Get(i);
    core::Interval a, b;
    if (e->op() == fb::ExprOp::Dim) a = {m->dims()->Get(e->a())->min(), m->dims()->Get(e->a())->max()};
    else if (e->op() != fb::ExprOp::Const) a = (*range)[e->a()], b = (*range)[e->b()];
    (*range)[i] = core::node_range(static_cast<core::ExprOp>(e->op()), a, b, e->value());
  }
  for (size_t i = 0; i < len(m->guards()); ++i) {
    const fb::Guard* g = m->guards()->Get(i);
    auto expr_ok = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n_exprs; };
    if (!expr_ok(g->lhs()) || !expr_ok(g->rhs()) || static_cast<int>(g->op()) > static_cast<int>(fb::GuardOp::Divisible))
      return bad(where(m, "guard", i) + " is malformed");
    if (g->op() == fb::GuardOp::Divisible &&
        (m->exprs()->Get(g->rhs())->op() != fb::ExprOp::Const || m->exprs()->Get(g->rhs())->value() < 1))
      return bad(where(m, "guard", i) + " tests divisibility by something other than a positive constant");
  }
  return ok_status();
}

// Every value: name, shape, dtype, and where it lives (a constant inside the segment; an arena
// slot inside the arena, large enough at the bound); the arena no larger than its slots.
Status check_values(const fb::Method* m, uint64_t constants_size, const std::vector<core::Interval>& range) {
  const size_t n_exprs = len(m->exprs()), n_values = len(m->values());
  auto expr_ok = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n_exprs; };
  const fb::MemoryPlan* plan = m->plan();
  if (!plan) return bad("method '" + m->name()->str() + "' has no memory plan");
  uint64_t arena_end = 0;   // where the furthest planned slot ends
  uint64_t slot_bytes = 0;  // all planned slots side by side, as no plan exceeds
  for (size_t i = 0; i < n_values; ++i) {
    const fb::Value* v = m->values()->Get(i);
    if (!v->shape() || !v->name()) return bad(where(m, "value", i) + " lacks its name or shape");
    if (!aligned8(v->example_shape())) return bad(where(m, "value", i) + " example shape is misaligned");
    if (static_cast<int>(v->dtype()) > static_cast<int>(fb::DType::U8)) return bad(where(m, "value", i) + " has unknown dtype");
    if (len(v->shape()) > static_cast<size_t>(kMaxRank)) return bad(where(m, "value", i) + " has rank above 8");
    for (size_t k = 0; k < len(v->shape()); ++k) {
      if (!expr_ok(v->shape()->Get(k))) return bad(where(m, "value", i) + " shape names no expression");
      const fb::ExprNode* e = m->exprs()->Get(v->shape()->Get(k));
      if (e->op() == fb::ExprOp::Const && e->value() < 0) return bad(where(m, "value", i) + " has a negative size");
    }
    switch (v->storage()) {
      case fb::StorageKind::Constant: {
        uint64_t numel = 1;
        for (size_t k = 0; k < len(v->shape()); ++k) {
          const fb::ExprNode* e = m->exprs()->Get(v->shape()->Get(k));
          if (e->op() != fb::ExprOp::Const || e->value() < 0) return bad(where(m, "value", i) + " is a constant with a dynamic shape");
          if (e->value() != 0 && numel > constants_size / static_cast<uint64_t>(e->value()))
            return bad(where(m, "value", i) + " is a constant larger than the constant segment");
          numel *= static_cast<uint64_t>(e->value());
        }
        uint64_t need = numel * dtype_size(static_cast<DType>(v->dtype()));
        if (v->nbytes() != need || v->offset() > constants_size || constants_size - v->offset() < need)
          return bad(where(m, "value", i) + " lies outside the constant segment");
        if (v->offset() % kSegmentAlignment != 0)
          return bad(where(m, "value", i) + " is a constant at offset " + std::to_string(v->offset()) +
                     ", not 64-byte aligned");
        break;
      }
      case fb::StorageKind::Arena:
      case fb::StorageKind::Input:
      case fb::StorageKind::Output:
      case fb::StorageKind::Alias:
      case fb::StorageKind::Delegate: {
        uint64_t need = 0;
        const bool bounded = bound_bytes(v, range, &need);
        if (v->nbytes() > kMaxValueBytes)
          return bad(where(m, "value", i) + " ('" + v->name()->str() + "') reserves " + std::to_string(v->nbytes()) +
                     " bytes, above the 1 TiB limit");
        if (!bounded || need > v->nbytes())
          return bad(where(m, "value", i) + " ('" + v->name()->str() + "') may need " +
                     (bounded ? std::to_string(need) + " bytes" : std::string("over 1 TiB")) +
                     " within its dims' ranges but reserves " + std::to_string(v->nbytes()));
        if (v->storage() == fb::StorageKind::Alias) {
          int32_t a = v->alias_of();
          if (a < 0 || static_cast<size_t>(a) >= n_values || m->values()->Get(a)->storage() == fb::StorageKind::Alias)
            return bad(where(m, "value", i) + " aliases an invalid value");
          break;
        }
        if (v->storage() == fb::StorageKind::Delegate) break;  // planned in the delegate's arena only
        if (v->offset() > plan->arena_bytes() || plan->arena_bytes() - v->offset() < v->nbytes())
          return bad(where(m, "value", i) + " lies outside the arena (offset " + std::to_string(v->offset()) + " + " +
                     std::to_string(v->nbytes()) + " > " + std::to_string(plan->arena_bytes()) + ")");
        if (v->offset() % kSegmentAlignment != 0)
          return bad(where(m, "value", i) + " has arena offset " + std::to_string(v->offset()) + ", not 64-byte aligned");
        arena_end = std::max(arena_end, v->offset() + v->nbytes());  // <= arena_bytes: no overflow
        if (__builtin_add_overflow(slot_bytes, align_up(v->nbytes(), kSegmentAlignment), &slot_bytes))
          slot_bytes = UINT64_MAX;
        break;
      }
      default: return bad(where(m, "value", i) + " has unknown storage");
    }
  }
  // The planner's arena ends at its furthest slot (sizes rounded up to the alignment); a
  // larger arena_bytes is damage, and the runtime would try to allocate it.
  if (plan->arena_bytes() > align_up(arena_end, kSegmentAlignment))
    return bad("method '" + m->name()->str() + "' plans an arena of " + std::to_string(plan->arena_bytes()) +
               " bytes but its slots end at byte " + std::to_string(arena_end));
  if (plan->arena_bytes() > slot_bytes)
    return bad("method '" + m->name()->str() + "' plans an arena of " + std::to_string(plan->arena_bytes()) +
               " bytes, more than its slots take side by side (" + std::to_string(slot_bytes) + ")");
  return ok_status();
}

// Inputs are input values sized by static axes and dims; every dim sizes an input (or is data).
Status check_signature(const fb::Method* m) {
  const size_t n_dims = len(m->dims()), n_values = len(m->values());
  auto value_ok = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n_values; };
  std::vector<bool> dim_seen(n_dims, false);
  for (size_t i = 0; i < len(m->inputs()); ++i) {
    int32_t id = m->inputs()->Get(i);
    if (!value_ok(id) || m->values()->Get(id)->storage() != fb::StorageKind::Input)
      return bad(where(m, "input", i) + " is not an input value");
    const fb::Value* v = m->values()->Get(id);
    for (size_t k = 0; k < len(v->shape()); ++k) {
      const fb::ExprNode* e = m->exprs()->Get(v->shape()->Get(k));
      if (e->op() == fb::ExprOp::Dim) dim_seen[e->a()] = true;
      else if (e->op() != fb::ExprOp::Const) return bad(where(m, "input", i) + " has an axis that is neither static nor a dim");
    }
  }
  for (size_t d = 0; d < n_dims; ++d) {
    const bool data = m->dims()->Get(static_cast<flatbuffers::uoffset_t>(d))->data();
    if (!dim_seen[d] && !data) return bad(where(m, "dim", d) + " appears on no input");
    if (dim_seen[d] && data) return bad(where(m, "dim", d) + " is data-dependent but sizes an input");
  }
  for (size_t i = 0; i < len(m->outputs()); ++i)
    if (!value_ok(m->outputs()->Get(i)) || m->values()->Get(m->outputs()->Get(i))->storage() == fb::StorageKind::Delegate)
      return bad(where(m, "output", i) + " is out of range");
  return ok_status();
}

// Each instruction: a known op, operand lists, well-formed attributes, values in range and
// writes to the arena only.
Status check_operands(const fb::Method* m) {
  const size_t n_values = len(m->values());
  auto value_ok = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n_values; };
  for (size_t i = 0; i < len(m->instructions()); ++i) {
    const fb::Instruction* in = m->instructions()->Get(i);
    const kernels::OpDef* op = kernels::find_op(in->op()->c_str());
    if (!op || op->view) return bad(where(m, "instruction", i) + " uses unknown op '" + in->op()->str() + "'");
    if (!in->inputs() || !in->outputs() || (in->outputs()->size() == 0) != kernels::produces_no_outputs(*op))
      return bad(where(m, "instruction", i) + " lacks its operand lists");
    if (in->scratch() != -1) {
      if (!value_ok(in->scratch()) || m->values()->Get(in->scratch())->storage() != fb::StorageKind::Arena ||
          m->values()->Get(in->scratch())->dtype() != fb::DType::Bool)
        return bad(where(m, "instruction", i) + " has an invalid scratch slot");
    }
    for (size_t k = 0; k < len(in->attrs()); ++k) {
      const fb::Attribute* a = in->attrs()->Get(k);
      bool ok = a->kind() == fb::AttrKind::Int || a->kind() == fb::AttrKind::Float ||
                (a->kind() == fb::AttrKind::Ints && a->ints()) || (a->kind() == fb::AttrKind::Floats && a->floats()) ||
                (a->kind() == fb::AttrKind::String && a->s());
      ok = ok && aligned8(a->ints());
      if (!ok) return bad(where(m, "instruction", i) + " attribute '" + a->name()->str() + "' is malformed");
    }
    for (size_t k = 0; k < len(in->inputs()); ++k) {
      int32_t id = in->inputs()->Get(k);
      if (id != -1 && !value_ok(id)) return bad(where(m, "instruction", i) + " reads a value out of range");
      if (id != -1 && m->values()->Get(id)->storage() == fb::StorageKind::Delegate)
        return bad(where(m, "instruction", i) + " reads a value only the delegate plans");
    }
    for (size_t k = 0; k < len(in->outputs()); ++k) {
      int32_t id = in->outputs()->Get(k);
      if (!value_ok(id)) return bad(where(m, "instruction", i) + " writes a value out of range");
      auto s = m->values()->Get(id)->storage();
      if (s != fb::StorageKind::Arena && s != fb::StorageKind::Output)
        return bad(where(m, "instruction", i) + " writes a value that is not planned in the arena");
    }
  }
  return ok_status();
}

// Slots alive at the same step must not share bytes, with lifetimes as GraphBuilder::emit
// gives them. Otherwise a kernel reads what it just wrote.
Status check_no_overlap(const fb::Method* m) {
  const size_t n_values = len(m->values());
  const Lifetimes life = method_lifetimes(m, /*delegated=*/false);
  std::vector<int32_t> slots;
  for (size_t i = 0; i < n_values; ++i) {
    auto s = m->values()->Get(i)->storage();
    if (s == fb::StorageKind::Arena || s == fb::StorageKind::Input || s == fb::StorageKind::Output)
      slots.push_back(static_cast<int32_t>(i));
  }
  int32_t a = -1, b = -1;
  if (find_overlap(slots, [&](int32_t v) { return m->values()->Get(v)->offset(); },
                   [&](int32_t v) { return m->values()->Get(v)->nbytes(); }, life, &a, &b))
    return bad(where(m, "value", static_cast<size_t>(a)) + " and value #" + std::to_string(b) +
               " share arena bytes while both are alive");
  return check_placement(m, m->plan(), slots, "method '" + m->name()->str() + "'");
}

Status check_method(const fb::Method* m, uint64_t constants_size) {
  if (!m->values() || !m->exprs() || !m->inputs() || !m->outputs() || !m->instructions())
    return bad("method '" + m->name()->str() + "' lacks a required table");
  if (!aligned8(m->exprs())) return bad("method '" + m->name()->str() + "' expression table is misaligned");
  std::vector<core::Interval> range;
  KILN_TRY(check_exprs(m, &range));
  KILN_TRY(check_values(m, constants_size, range));
  KILN_TRY(check_signature(m));
  KILN_TRY(check_operands(m));
  return check_no_overlap(m);
}

// A plan's placement at any shape (optional): `order` lists exactly the plan's slots, once
// each, and every value's `below` list names slots placed before it, so bind's one pass over
// `order` reads only offsets it has computed. (Whether two slots alive together are kept apart
// at every shape is the exporter's promise; bind keeps every slot inside the arena regardless.)

// What export knew of a method's values, rebuilt from the file: the expression pool (dims,
// then the method's expressions with the exporter's ids), each value's dtype and symbolic
// shape, a constant's data (a view of one through its own shape: it must fit), and each
// root's views (`views`).
struct Symbols {
  core::ExprPool pool;
  std::vector<kernels::SymTensor> sym;
  std::vector<std::vector<int32_t>> views;

  Status load(const fb::Method* m, const uint8_t* constants) {
    for (size_t i = 0; i < len(m->dims()); ++i) {
      const fb::Dim* d = m->dims()->Get(i);
      if (pool.add_dim(DimSpec{d->name()->str(), d->min(), d->max(), d->step(), d->data()}) != static_cast<int>(i))
        return bad(where(m, "dim", i) + " repeats the name '" + d->name()->str() + "'");
    }
    for (const fb::ExprNode* e : *m->exprs())
      pool.append(core::ExprNode{static_cast<core::ExprOp>(e->op()), e->a(), e->b(), e->value()});
    const size_t n_values = m->values()->size();
    sym.resize(n_values);
    views.resize(n_values);
    for (size_t i = 0; i < n_values; ++i) {
      const fb::Value* v = m->values()->Get(i);
      sym[i].dtype = static_cast<DType>(v->dtype());
      sym[i].shape.assign(v->shape()->begin(), v->shape()->end());
      if (v->storage() == fb::StorageKind::Alias) views[v->alias_of()].push_back(static_cast<int32_t>(i));
      const fb::Value* root = v->storage() == fb::StorageKind::Alias ? m->values()->Get(v->alias_of()) : v;
      if (root->storage() != fb::StorageKind::Constant) continue;
      uint64_t bytes = dtype_size(sym[i].dtype);
      bool fits = true;
      for (core::ExprId e : sym[i].shape) {
        if (!pool.is_const(e)) {  // symbolic: never read as constant data
          bytes = 0;
          break;
        }
        int64_t d = pool.const_value(e);
        fits = fits && d >= 0 && !__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
      }
      if (!fits || bytes > root->nbytes()) return bad(where(m, "value", i) + " views more bytes than the constant it aliases");
      sym[i].const_data = constants + root->offset();
    }
    return ok_status();
  }

  // A view carries the contents export knew of its root (as kernels::fold_view does).
  void carry_to_views(int32_t root) {
    for (int32_t i : views[root]) {
      int64_t n = 1;
      bool is_static = true;
      for (core::ExprId e : sym[i].shape) {
        is_static = is_static && pool.is_const(e);
        if (is_static) n *= pool.const_value(e);
      }
      if (is_static && n <= kernels::kMaxSymValues && n == static_cast<int64_t>(sym[root].sym_values.size()))
        sym[i].sym_values = sym[root].sym_values;
    }
  }
};

// Where a guard an op needs is checked: the method's guards (at bind), or a KilnAssert that
// runs before the instruction on every path to it (earlier, in the instruction's block or one
// enclosing it).
class GuardIndex {
 public:
  Status load(const fb::Method* m) {
    m_ = m;
    const size_t n_instr = m->instructions()->size();
    KILN_ASSIGN_OR_RETURN(std::vector<Branch> branches, method_branches(m));
    block_of_ = instruction_blocks(branches, n_instr, &parent_);
    for (size_t j = 0; j < n_instr; ++j) {  // the KilnAssert instructions, in order (read once)
      const fb::Instruction* a = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(j));
      if (a->op()->str() != "KilnAssert") continue;
      std::vector<core::AttrRef> r;
      for (size_t k = 0; k < len(a->attrs()); ++k) r.push_back(attr_ref(a->attrs()->Get(static_cast<flatbuffers::uoffset_t>(k))));
      const core::Attrs aa(r.data(), static_cast<uint32_t>(r.size()));
      asserts_.push_back(Assert{j, aa.get_int("relation", -1), aa.get_int("lhs", -1), aa.get_int("rhs", -1)});
    }
    return ok_status();
  }

  bool has(const kernels::Guard& g, size_t at) const {
    if (m_->guards())
      for (const fb::Guard* f : *m_->guards())
        if (static_cast<int>(f->op()) == static_cast<int>(g.op) && f->lhs() == g.lhs && f->rhs() == g.rhs) return true;
    for (const Assert& a : asserts_) {
      if (a.at >= at) break;
      if (a.relation == static_cast<int>(g.op) && a.lhs == g.lhs && a.rhs == g.rhs && encloses(block_of_[a.at], block_of_[at]))
        return true;
    }
    return false;
  }

 private:
  struct Assert {
    size_t at;
    int64_t relation, lhs, rhs;
  };
  bool encloses(int32_t outer, int32_t inner) const {
    for (; inner >= 0; inner = parent_[static_cast<size_t>(inner)])
      if (inner == outer) return true;
    return outer < 0;
  }
  const fb::Method* m_ = nullptr;
  std::vector<int32_t> block_of_, parent_;
  std::vector<Assert> asserts_;
};

// Instruction i's shape function over what export knew of its operands: its outputs, guards
// and scratch must be what the file records.
Status check_instruction(const fb::Method* m, size_t i, const GuardIndex& guards, Symbols* s,
                         std::vector<core::AttrRef>* attrs) {
  const fb::Instruction* in = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
  attrs->clear();
  for (size_t k = 0; k < len(in->attrs()); ++k) attrs->push_back(attr_ref(in->attrs()->Get(static_cast<flatbuffers::uoffset_t>(k))));
  kernels::ShapeCtx c(s->pool, core::Attrs(attrs->data(), static_cast<uint32_t>(attrs->size())));
  c.node_name = in->node_name() ? in->node_name()->str() : "";
  c.op_type = in->op()->str();
  for (int32_t id : *in->inputs()) {
    kernels::SymTensor t;
    if (id < 0) t.present = false;
    else t = s->sym[id];
    c.inputs.push_back(std::move(t));
  }
  c.outputs.resize(in->outputs()->size());
  const std::string what = where(m, "instruction", i) + " (" + c.op_type + ")";
  Status st = kernels::find_op(in->op()->c_str())->shape(c);
  if (!st.ok()) return bad(what + " breaks its op's contract: " + st.message());
  std::vector<kernels::SymTensor>& sym = s->sym;
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    int32_t id = in->outputs()->Get(static_cast<flatbuffers::uoffset_t>(k));
    if (c.out(k).dtype != sym[id].dtype || c.out(k).shape != sym[id].shape)
      return bad(what + " output #" + std::to_string(k) + " is recorded as " + dtype_name(sym[id].dtype) + " " +
                 s->pool.shape_to_string(sym[id].shape) + " but its op gives " + dtype_name(c.out(k).dtype) + " " +
                 s->pool.shape_to_string(c.out(k).shape));
    sym[id].sym_values = std::move(c.out(k).sym_values);
    s->carry_to_views(id);
  }
  for (const kernels::Guard& g : c.guards)
    if (!guards.has(g, i)) return bad(what + " lacks the guard its op needs " + g.context);
  const bool wants_scratch = c.scratch_bytes != core::kNoExpr;
  if (wants_scratch != (in->scratch() >= 0) ||
      (wants_scratch && sym[in->scratch()].shape != std::vector<core::ExprId>{c.scratch_bytes}))
    return bad(what + " has a scratch slot that does not match what its op asks for");
  return ok_status();
}

// Runs every instruction's shape function again, over the method's own expression table
// (rebuilt with the exporter's ids) and with what export knew of each operand, and requires
// the recorded outputs, guards and scratch to be what it gives. Kernels trust operand
// dtypes, ranks, sizes and attributes; a program that disagrees with its ops is damaged.
Status check_instructions(const fb::Method* m, const uint8_t* constants) {
  Symbols s;
  KILN_TRY(s.load(m, constants));
  GuardIndex guards;
  KILN_TRY(guards.load(m));
  std::vector<core::AttrRef> attrs;
  for (size_t i = 0; i < m->instructions()->size(); ++i) KILN_TRY(check_instruction(m, i, guards, &s, &attrs));
  return ok_status();
}

}  // namespace

core::AttrRef attr_ref(const fb::Attribute* a) {
  core::AttrRef r;
  r.name = a->name()->c_str();
  r.kind = static_cast<core::AttrKind>(a->kind());
  r.i = a->i();
  r.f = a->f();
  if (a->ints()) {
    r.ints = a->ints()->data();
    r.count = a->ints()->size();
  }
  if (a->floats()) {
    r.floats = a->floats()->data();
    r.count = a->floats()->size();
  }
  if (a->s()) {
    r.str = a->s()->c_str();
    r.count = a->s()->size();
  }
  return r;
}

Status check_strings(const fb::Program* p) {
  auto check = [](const flatbuffers::String* s, const std::string& what) -> Status {
    size_t at = 0;
    if (s && !core::valid_utf8(std::string_view(s->c_str(), s->size()), &at))
      return data_loss(what + " is not valid UTF-8 (byte " + std::to_string(at) + ")");
    // No name holds a NUL: one inside a string means its length was changed to take in the
    // bytes after it (the writer refuses NULs too).
    if (s && std::memchr(s->c_str(), 0, s->size()))
      return data_loss(what + " holds a NUL byte at " +
                       std::to_string(static_cast<const char*>(std::memchr(s->c_str(), 0, s->size())) - s->c_str()) +
                       " (a damaged length?)");
    return ok_status();
  };
  KILN_TRY(check(p->producer(), "the producer string"));
  for (size_t mi = 0; mi < len(p->methods()); ++mi) {
    const fb::Method* m = p->methods()->Get(mi);
    const std::string where = "method #" + std::to_string(mi);
    KILN_TRY(check(m->name(), where + "'s name"));
    for (size_t i = 0; i < len(m->dims()); ++i) KILN_TRY(check(m->dims()->Get(i)->name(), where + " dim #" + std::to_string(i) + "'s name"));
    for (size_t i = 0; i < len(m->guards()); ++i) {
      const fb::Guard* g = m->guards()->Get(i);
      const std::string gw = where + " guard #" + std::to_string(i);
      KILN_TRY(check(g->node_name(), gw + "'s node name"));
      KILN_TRY(check(g->op_type(), gw + "'s op type"));
      KILN_TRY(check(g->context(), gw + "'s context"));
    }
    for (size_t i = 0; i < len(m->values()); ++i) KILN_TRY(check(m->values()->Get(i)->name(), where + " value #" + std::to_string(i) + "'s name"));
    for (size_t i = 0; i < len(m->instructions()); ++i) {
      const fb::Instruction* in = m->instructions()->Get(i);
      const std::string iw = where + " instruction #" + std::to_string(i);
      KILN_TRY(check(in->op(), iw + "'s op"));
      KILN_TRY(check(in->node_name(), iw + "'s node name"));
      for (size_t k = 0; k < len(in->fused_from()); ++k) KILN_TRY(check(in->fused_from()->Get(k), iw + "'s fused node #" + std::to_string(k)));
      for (size_t k = 0; k < len(in->attrs()); ++k) {
        KILN_TRY(check(in->attrs()->Get(k)->name(), iw + "'s attribute #" + std::to_string(k) + " name"));
        KILN_TRY(check(in->attrs()->Get(k)->s(), iw + "'s attribute #" + std::to_string(k) + " string"));
      }
    }
    if (m->plan()) KILN_TRY(check(m->plan()->strategy(), where + "'s plan strategy"));
    if (const fb::Bucket* bk = m->bucket()) {
      KILN_TRY(check(bk->of(), where + "'s bucket name"));
      KILN_TRY(check(bk->dim(), where + "'s bucket dim"));
    }
    if (const fb::Delegate* d = m->delegate()) {
      KILN_TRY(check(d->backend(), where + "'s delegate backend"));
      if (d->plan()) KILN_TRY(check(d->plan()->strategy(), where + "'s delegate plan strategy"));
      for (size_t i = 0; i < len(d->declined()); ++i) KILN_TRY(check(d->declined()->Get(i)->reason(), where + " declined #" + std::to_string(i)));
    }
  }
  return ok_status();
}

Status verify_constants(const ProgramFile& f) {
  if (core::crc32c(f.constants, f.constants_size) != f.constants_crc)
    return data_loss("damaged program: the constant segment's checksum does not match (weights changed or damaged)");
  return ok_status();
}

Result<ProgramFile> read_program(const uint8_t* data, size_t size, bool verify_constants_now) {
  if (!data || size < kHeaderSize) return data_loss("not a .kiln program: file is " + std::to_string(size) + " bytes, shorter than the 64-byte header");
  FileHeader h;
  std::memcpy(&h, data, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return data_loss("not a .kiln program: bad magic");
  // The version decides how to read the rest, so it comes first; the header's checksum tells a
  // newer file (valid in its own layout, which this runtime cannot know) from a damaged one.
  const bool header_ok = core::crc32c(&h, kHeaderCrcBytes) == h.header_crc;
  const std::string version = std::to_string(h.format_version), ours = std::to_string(kFormatVersion);
  if (h.format_version == 1)
    return data_loss(".kiln format version 1 (written before checksums); re-export the model with this Kiln");
  if (h.format_version > kFormatVersion)
    return data_loss(header_ok ? "written by a newer Kiln: .kiln format version " + version + ", this runtime reads version " +
                                     ours + "; update Kiln or re-export with this one"
                               : "damaged program: the header's checksum does not match (or the file was written by a "
                                 "newer Kiln: it says format version " + version + ", this runtime reads " + ours + ")");
  if (h.format_version != kFormatVersion || !header_ok)
    return data_loss("damaged program: the header's checksum does not match (the file was changed or damaged)");
  if (h.header_size != kHeaderSize)
    return data_loss("damaged program: header_size is " + std::to_string(h.header_size) + ", expected " + std::to_string(kHeaderSize));
  if (h.program_offset < kHeaderSize || h.program_offset > size || size - h.program_offset < h.program_size)
    return data_loss("damaged program: the program section runs past the end of the file (truncated?)");
  if (h.constants_offset > size || size - h.constants_offset < h.constants_size)
    return data_loss("damaged program: the constant segment runs past the end of the file (truncated?)");
  // The three segments apart: header, then program, then constants (an empty segment may sit anywhere).
  if (h.constants_size > 0 && (h.constants_offset < kHeaderSize || h.constants_offset < h.program_offset + h.program_size))
    return data_loss("damaged program: the constant segment overlaps the header or the program section");
  if (h.constants_offset % kSegmentAlignment != 0) return bad("constant segment is not 64-byte aligned");
  const uint8_t* fbuf = data + h.program_offset;
  if (core::crc32c(fbuf, h.program_size) != h.program_crc)
    return data_loss("damaged program: the program section's checksum does not match (the file was changed or damaged)");
  if (reinterpret_cast<uintptr_t>(fbuf) % 8 != 0) return invalid_argument("program buffer must be 8-byte aligned");
  flatbuffers::Verifier verifier(fbuf, h.program_size);
  if (!fb::ProgramBufferHasIdentifier(fbuf) || !fb::VerifyProgramBuffer(verifier))
    return bad("the FlatBuffers verifier rejected the program section");
  ProgramFile f;
  f.program = fb::GetProgram(fbuf);
  f.format_version = h.format_version;
  KILN_TRY(check_strings(f.program));
  if (f.program->constant_bytes() != h.constants_size) return bad("constant segment size disagrees with the header");
  if (len(f.program->methods()) == 0) return bad("program has no methods");
  f.constants = data + h.constants_offset;
  f.constants_size = h.constants_size;
  f.constants_crc = h.constants_crc;
  if (verify_constants_now) KILN_TRY(verify_constants(f));
  for (size_t i = 0; i < f.program->methods()->size(); ++i) {
    KILN_TRY(check_method(f.program->methods()->Get(i), h.constants_size));
    KILN_TRY(method_branches(f.program->methods()->Get(i)).status());
    KILN_TRY(check_instructions(f.program->methods()->Get(i), f.constants));
    KILN_TRY(check_delegate(f.program->methods()->Get(i)));
    KILN_TRY(check_bucket(f.program->methods()->Get(i)));
  }
  return f;
}

namespace reader_detail {

std::vector<int32_t> value_list(const flatbuffers::Vector<int32_t>* v) {
  return v ? std::vector<int32_t>(v->begin(), v->end()) : std::vector<int32_t>();
}

std::vector<int32_t> roots(const fb::Method* m) {
  std::vector<int32_t> r(m->values()->size());
  for (size_t i = 0; i < r.size(); ++i) {
    const fb::Value* v = m->values()->Get(i);
    r[i] = v->storage() == fb::StorageKind::Alias ? v->alias_of() : static_cast<int32_t>(i);
  }
  return r;
}

Status check_placement(const fb::Method* m, const fb::MemoryPlan* plan, const std::vector<int32_t>& slots,
                       const std::string& name) {
  const auto* start = plan->below_start();
  const auto *below = plan->below(), *order = plan->order();
  if (!start && !below && !order) return ok_status();
  const size_t n_values = m->values()->size();
  if (!start || !below || !order || start->size() != n_values + 1 || start->Get(0) != 0 ||
      start->Get(static_cast<flatbuffers::uoffset_t>(n_values)) != below->size() || order->size() != slots.size())
    return bad(name + "'s placement is malformed");
  std::vector<int64_t> pos(n_values, -1);
  for (size_t k = 0; k < order->size(); ++k) {
    const int32_t v = order->Get(static_cast<flatbuffers::uoffset_t>(k));
    if (v < 0 || static_cast<size_t>(v) >= n_values || pos[v] >= 0 || !std::binary_search(slots.begin(), slots.end(), v))
      return bad(name + "'s placement order names value #" + std::to_string(v) + ", not one of its slots once");
    pos[v] = static_cast<int64_t>(k);
  }
  for (size_t v = 0; v < n_values; ++v) {
    const uint32_t lo = start->Get(static_cast<flatbuffers::uoffset_t>(v)), hi = start->Get(static_cast<flatbuffers::uoffset_t>(v + 1));
    if (hi < lo || hi > below->size()) return bad(name + "'s placement is malformed");
    if (lo != hi && pos[v] < 0) return bad(name + "'s placement places value #" + std::to_string(v) + ", not one of its slots");
    for (uint32_t k = lo; k < hi; ++k) {
      const int32_t j = below->Get(k);
      if (j < 0 || static_cast<size_t>(j) >= n_values || pos[j] < 0 || pos[j] >= pos[v])
        return bad(name + "'s placement puts value #" + std::to_string(v) + " above value #" + std::to_string(j) +
                   ", which is not placed before it");
    }
  }
  return ok_status();
}

}  // namespace reader_detail

}  // namespace kiln::format
