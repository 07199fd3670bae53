#include "format/reader.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/symexpr.h"
#include "format/file_header.h"
#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "kiln/tensor.h"

namespace kiln::format {

namespace {

Status bad(const std::string& what) { return data_loss("damaged program: " + what); }

std::string where(const fb::Method* m, const char* kind, size_t i) {
  return "method '" + std::string(m->name()->c_str()) + "' " + kind + " #" + std::to_string(i);
}

template <typename T>
size_t len(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// The verifier aligns vectors only to 4 bytes; 8-byte elements are read in place (the
// builder leaves empty vectors unaligned, harmlessly).
template <typename T>
bool aligned8(const flatbuffers::Vector<T>* v) {
  return !v || v->size() == 0 || reinterpret_cast<uintptr_t>(v->Data()) % 8 == 0;
}

// Bytes of value `v` at its bound, from the upper bounds of its axes: the rule export used to
// size the plan (GraphBuilder::bound_bytes). False above kMaxValueBytes.
bool bound_bytes(const fb::Value* v, const std::vector<core::Interval>& range, uint64_t* out) {
  uint64_t n = dtype_size(static_cast<DType>(v->dtype()));
  for (int32_t e : *v->shape()) {
    int64_t hi = range[e].hi;
    if (hi < 0) {
      n = 0;
      break;
    }
    if (static_cast<uint64_t>(hi) > kMaxValueBytes || (hi != 0 && n > kMaxValueBytes / static_cast<uint64_t>(hi)))
      return false;
    n *= static_cast<uint64_t>(hi);
  }
  *out = n;
  return true;
}

Status check_method(const fb::Method* m, uint64_t constants_size) {
  if (!m->values() || !m->exprs() || !m->inputs() || !m->outputs() || !m->instructions())
    return bad("method '" + m->name()->str() + "' lacks a required table");
  if (!aligned8(m->exprs())) return bad("method '" + m->name()->str() + "' expression table is misaligned");
  const size_t n_dims = len(m->dims()), n_exprs = len(m->exprs()), n_values = len(m->values());
  for (size_t i = 0; i < n_dims; ++i) {
    const fb::Dim* d = m->dims()->Get(i);
    if (d->min() < 1 || d->min() > d->max() || d->step() < 1)
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
  // Bounds of every expression over the dims' ranges: what sizes can reach once bind admits a shape.
  std::vector<core::Interval> range(n_exprs);
  for (size_t i = 0; i < n_exprs; ++i) {
    const fb::ExprNode* e = m->exprs()->Get(i);
    core::Interval a, b;
    if (e->op() == fb::ExprOp::Dim) a = {m->dims()->Get(e->a())->min(), m->dims()->Get(e->a())->max()};
    else if (e->op() != fb::ExprOp::Const) a = range[e->a()], b = range[e->b()];
    range[i] = core::node_range(static_cast<core::ExprOp>(e->op()), a, b, e->value());
  }
  auto expr_ok = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n_exprs; };
  for (size_t i = 0; i < len(m->guards()); ++i) {
    const fb::Guard* g = m->guards()->Get(i);
    if (!expr_ok(g->lhs()) || !expr_ok(g->rhs()) || static_cast<int>(g->op()) > static_cast<int>(fb::GuardOp::Divisible))
      return bad(where(m, "guard", i) + " is malformed");
    if (g->op() == fb::GuardOp::Divisible &&
        (m->exprs()->Get(g->rhs())->op() != fb::ExprOp::Const || m->exprs()->Get(g->rhs())->value() < 1))
      return bad(where(m, "guard", i) + " tests divisibility by something other than a positive constant");
  }
  const fb::MemoryPlan* plan = m->plan();
  if (!plan) return bad("method '" + m->name()->str() + "' has no memory plan");
  uint64_t arena_end = 0;   // where the furthest planned slot ends
  uint64_t slot_bytes = 0;  // all planned slots side by side, as no plan exceeds
  for (size_t i = 0; i < n_values; ++i) {
    const fb::Value* v = m->values()->Get(i);
    if (!v->shape() || !v->name()) return bad(where(m, "value", i) + " lacks its name or shape");
    if (!aligned8(v->example_shape())) return bad(where(m, "value", i) + " example shape is misaligned");
    if (static_cast<int>(v->dtype()) > static_cast<int>(fb::DType::Bool)) return bad(where(m, "value", i) + " has unknown dtype");
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
      case fb::StorageKind::Alias: {
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
  for (size_t d = 0; d < n_dims; ++d)
    if (!dim_seen[d]) return bad(where(m, "dim", d) + " appears on no input");
  for (size_t i = 0; i < len(m->outputs()); ++i)
    if (!value_ok(m->outputs()->Get(i))) return bad(where(m, "output", i) + " is out of range");
  for (size_t i = 0; i < len(m->instructions()); ++i) {
    const fb::Instruction* in = m->instructions()->Get(i);
    if (!in->inputs() || !in->outputs() || in->outputs()->size() == 0)
      return bad(where(m, "instruction", i) + " lacks its operand lists");
    const kernels::OpDef* op = kernels::find_op(in->op()->c_str());
    if (!op || op->view) return bad(where(m, "instruction", i) + " uses unknown op '" + in->op()->str() + "'");
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
    for (size_t k = 0; k < len(in->inputs()); ++k)
      if (in->inputs()->Get(k) != -1 && !value_ok(in->inputs()->Get(k)))
        return bad(where(m, "instruction", i) + " reads a value out of range");
    for (size_t k = 0; k < len(in->outputs()); ++k) {
      int32_t id = in->outputs()->Get(k);
      if (!value_ok(id)) return bad(where(m, "instruction", i) + " writes a value out of range");
      auto s = m->values()->Get(id)->storage();
      if (s != fb::StorageKind::Arena && s != fb::StorageKind::Output)
        return bad(where(m, "instruction", i) + " writes a value that is not planned in the arena");
    }
  }
  // Slots alive at the same step must not share bytes, with lifetimes as
  // GraphBuilder::emit gives them: step 0 holds the inputs, instruction k runs at step k+1,
  // and inputs and outputs live to the end. Otherwise a kernel reads what it just wrote.
  const int64_t end = static_cast<int64_t>(m->instructions()->size()) + 1;
  std::vector<int64_t> first(n_values, -1), last(n_values, -1);
  auto root = [&](int32_t id) {
    const fb::Value* v = m->values()->Get(id);
    return v->storage() == fb::StorageKind::Alias ? v->alias_of() : id;
  };
  for (int32_t id : *m->inputs()) first[id] = 0, last[id] = end;
  for (size_t k = 0; k < m->instructions()->size(); ++k) {
    const fb::Instruction* in = m->instructions()->Get(k);
    const int64_t step = static_cast<int64_t>(k) + 1;
    for (int32_t id : *in->outputs()) first[id] = last[id] = step;
    if (in->scratch() >= 0) first[in->scratch()] = last[in->scratch()] = step;
    for (int32_t id : *in->inputs())
      if (id >= 0) last[root(id)] = std::max(last[root(id)], step);
  }
  for (int32_t id : *m->outputs()) last[root(id)] = end;
  std::vector<int32_t> slots;
  for (size_t i = 0; i < n_values; ++i) {
    auto s = m->values()->Get(i)->storage();
    if (s == fb::StorageKind::Arena || s == fb::StorageKind::Input || s == fb::StorageKind::Output)
      slots.push_back(static_cast<int32_t>(i));
  }
  auto offset = [&](int32_t i) { return m->values()->Get(i)->offset(); };
  std::sort(slots.begin(), slots.end(), [&](int32_t a, int32_t b) { return offset(a) < offset(b); });
  for (size_t a = 0; a < slots.size(); ++a) {
    const fb::Value* va = m->values()->Get(slots[a]);
    const int64_t a_last = std::max(first[slots[a]], last[slots[a]]);
    for (size_t b = a + 1; b < slots.size() && offset(slots[b]) < va->offset() + va->nbytes(); ++b) {
      const int64_t b_last = std::max(first[slots[b]], last[slots[b]]);
      if (m->values()->Get(slots[b])->nbytes() > 0 && first[slots[a]] <= b_last && first[slots[b]] <= a_last)
        return bad(where(m, "value", static_cast<size_t>(slots[a])) + " and value #" + std::to_string(slots[b]) +
                   " share arena bytes while both are alive");
    }
  }
  return ok_status();
}

// Runs every instruction's shape function again, over the method's own expression table
// (rebuilt with the exporter's ids) and with what export knew of each operand, and requires
// the recorded outputs, guards and scratch to be what it gives. Kernels trust operand
// dtypes, ranks, sizes and attributes; a program that disagrees with its ops is damaged.
Status check_instructions(const fb::Method* m, const uint8_t* constants) {
  core::ExprPool pool;
  for (size_t i = 0; i < len(m->dims()); ++i) {
    const fb::Dim* d = m->dims()->Get(i);
    if (pool.add_dim(core::DimInfo{d->name()->str(), d->min(), d->max(), d->step()}) != static_cast<int>(i))
      return bad(where(m, "dim", i) + " repeats the name '" + d->name()->str() + "'");
  }
  for (const fb::ExprNode* e : *m->exprs())
    pool.append(core::ExprNode{static_cast<core::ExprOp>(e->op()), e->a(), e->b(), e->value()});
  const size_t n_values = m->values()->size();
  std::vector<kernels::SymTensor> sym(n_values);
  std::vector<std::vector<int32_t>> views(n_values);  // alias values of each root
  for (size_t i = 0; i < n_values; ++i) {
    const fb::Value* v = m->values()->Get(i);
    sym[i].dtype = static_cast<DType>(v->dtype());
    sym[i].shape.assign(v->shape()->begin(), v->shape()->end());
    if (v->storage() == fb::StorageKind::Alias) views[v->alias_of()].push_back(static_cast<int32_t>(i));
    const fb::Value* root = v->storage() == fb::StorageKind::Alias ? m->values()->Get(v->alias_of()) : v;
    if (root->storage() != fb::StorageKind::Constant) continue;
    // Shape functions read a static view of a constant through its own shape: it must fit.
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
  // A view carries the contents export knew of its root (as kernels::fold_view does).
  auto carry_to_views = [&](int32_t root) {
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
  };
  auto has_guard = [&](const kernels::Guard& g) {
    for (const fb::Guard* f : *m->guards())
      if (static_cast<int>(f->op()) == static_cast<int>(g.op) && f->lhs() == g.lhs && f->rhs() == g.rhs) return true;
    return false;
  };
  std::vector<core::AttrRef> attrs;
  for (size_t i = 0; i < m->instructions()->size(); ++i) {
    const fb::Instruction* in = m->instructions()->Get(i);
    attrs.clear();
    for (size_t k = 0; k < len(in->attrs()); ++k) attrs.push_back(attr_ref(in->attrs()->Get(k)));
    kernels::ShapeCtx c(pool, core::Attrs(attrs.data(), static_cast<uint32_t>(attrs.size())));
    c.node_name = in->node_name() ? in->node_name()->str() : "";
    c.op_type = in->op()->str();
    for (int32_t id : *in->inputs()) {
      kernels::SymTensor t;
      if (id < 0) t.present = false;
      else t = sym[id];
      c.inputs.push_back(std::move(t));
    }
    c.outputs.resize(in->outputs()->size());
    const std::string what = where(m, "instruction", i) + " (" + c.op_type + ")";
    Status s = kernels::find_op(in->op()->c_str())->shape(c);
    if (!s.ok()) return bad(what + " breaks its op's contract: " + s.message());
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      int32_t id = in->outputs()->Get(k);
      if (c.out(k).dtype != sym[id].dtype || c.out(k).shape != sym[id].shape)
        return bad(what + " output #" + std::to_string(k) + " is recorded as " + dtype_name(sym[id].dtype) + " " +
                   pool.shape_to_string(sym[id].shape) + " but its op gives " + dtype_name(c.out(k).dtype) + " " +
                   pool.shape_to_string(c.out(k).shape));
      sym[id].sym_values = std::move(c.out(k).sym_values);
      carry_to_views(id);
    }
    for (const kernels::Guard& g : c.guards)
      if (!m->guards() || !has_guard(g)) return bad(what + " lacks the guard its op needs " + g.context);
    const bool wants_scratch = c.scratch_bytes != core::kNoExpr;
    if (wants_scratch != (in->scratch() >= 0) ||
        (wants_scratch && sym[in->scratch()].shape != std::vector<core::ExprId>{c.scratch_bytes}))
      return bad(what + " has a scratch slot that does not match what its op asks for");
  }
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

Result<ProgramFile> read_program(const uint8_t* data, size_t size) {
  if (!data || size < kHeaderSize) return data_loss("not a .kiln program: file is " + std::to_string(size) + " bytes, shorter than the 64-byte header");
  FileHeader h;
  std::memcpy(&h, data, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return data_loss("not a .kiln program: bad magic");
  if (h.format_version != kFormatVersion)
    return data_loss("unsupported .kiln format version " + std::to_string(h.format_version) + " (this runtime reads version " +
                     std::to_string(kFormatVersion) + "); re-export the model");
  if (h.program_offset < kHeaderSize || h.program_offset > size || size - h.program_offset < h.program_size)
    return data_loss("damaged program: the program section runs past the end of the file (truncated?)");
  if (h.constants_offset > size || size - h.constants_offset < h.constants_size)
    return data_loss("damaged program: the constant segment runs past the end of the file (truncated?)");
  if (h.constants_offset % kSegmentAlignment != 0) return bad("constant segment is not 64-byte aligned");
  const uint8_t* fbuf = data + h.program_offset;
  if (reinterpret_cast<uintptr_t>(fbuf) % 8 != 0) return invalid_argument("program buffer must be 8-byte aligned");
  flatbuffers::Verifier verifier(fbuf, h.program_size);
  if (!fb::ProgramBufferHasIdentifier(fbuf) || !fb::VerifyProgramBuffer(verifier))
    return bad("the FlatBuffers verifier rejected the program section");
  ProgramFile f;
  f.program = fb::GetProgram(fbuf);
  if (f.program->constant_bytes() != h.constants_size) return bad("constant segment size disagrees with the header");
  if (len(f.program->methods()) == 0) return bad("program has no methods");
  f.constants = data + h.constants_offset;
  f.constants_size = h.constants_size;
  for (size_t i = 0; i < f.program->methods()->size(); ++i) {
    KILN_TRY(check_method(f.program->methods()->Get(i), h.constants_size));
    KILN_TRY(check_instructions(f.program->methods()->Get(i), f.constants));
  }
  return f;
}

}  // namespace kiln::format
