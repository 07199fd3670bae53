// The reader's checks of a method's delegate (Method::delegate in schema/program.fbs): its
// channels-last twins, its regions and their ops (what each computes, fuses and writes), the
// schedule they make, and the delegate's arena plan at the bound. The file is a trust
// boundary: whatever export would not have written is refused as damaged.
#include <algorithm>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/control.h"
#include "format/file_header.h"
#include "format/reader.h"
#include "format/reader_internal.h"
#include "format/schedule.h"

namespace kiln::format::reader_detail {
namespace {

// x stands for y in a delegate op: the same value, or y's channels-last twin, or (y a view with
// its root's shape and dtype: a reshape back to it) the root's twin.
bool stands_for(const fb::Method* m, int32_t x, int32_t y) {
  if (x == y) return true;
  const int32_t n = static_cast<int32_t>(m->values()->size());
  if (x < 0 || y < 0 || x >= n || y >= n || m->values()->Get(x)->storage() != fb::StorageKind::Delegate) return false;
  const int32_t of = m->values()->Get(x)->nhwc_of();
  if (of == y) return true;
  const fb::Value* v = m->values()->Get(y);
  if (v->storage() != fb::StorageKind::Alias || v->alias_of() != of || of < 0 || of >= n) return false;
  const fb::Value* r = m->values()->Get(of);
  const auto *vs = v->shape(), *rs = r->shape();
  if (v->dtype() != r->dtype() || !vs || !rs || vs->size() != rs->size()) return false;
  for (uint32_t k = 0; k < vs->size(); ++k)
    if (vs->Get(k) != rs->Get(k)) return false;
  return true;
}

// A convolution's gate: the activation reads the source's output y alone, and the fused Mul
// reads y and the activation's output; each is one instruction of the region.
Status check_gate(const fb::Method* m, const fb::DelegateOp* op, const std::string& what, int32_t first, int32_t last) {
  const int32_t s = op->source(), a = op->gate(), f = op->fused();
  auto in_region = [&](int32_t i) { return i >= first && i < last; };
  if (!in_region(a) || !in_region(f) || a == s || f == s || a == f) return bad(what + " folds a gate outside its region");
  const fb::Instruction* src = m->instructions()->Get(s);
  const fb::Instruction* act = m->instructions()->Get(a);
  const fb::Instruction* mul = m->instructions()->Get(f);
  if (src->outputs()->size() != 1 || act->inputs()->size() != 1 || act->outputs()->size() != 1 ||
      mul->inputs()->size() != 2 || mul->outputs()->size() != 1)
    return bad(what + " folds a gate of the wrong arity");
  const int32_t y = src->outputs()->Get(0), g = act->outputs()->Get(0);
  const int32_t u = mul->inputs()->Get(0), v = mul->inputs()->Get(1);
  if (act->inputs()->Get(0) != y || !((u == y && v == g) || (u == g && v == y)))
    return bad(what + " folds a gate that does not read its output");
  return ok_status();
}

// An activation after a fused bias Add (DelegateOp::clamp): it reads the Add's output first and
// otherwise constants only, has one output, and is an instruction of the region of its own.
Status check_clamp(const fb::Method* m, const fb::DelegateOp* op, const std::string& what, int32_t first, int32_t last) {
  const int32_t s = op->source(), f = op->fused(), c = op->clamp();
  if (op->gate() != -1 || f < 0) return bad(what + " folds an activation without a fused bias Add");
  if (c < first || c >= last || c == s || c == f) return bad(what + " folds an activation outside its region");
  const fb::Instruction* add = m->instructions()->Get(f);
  const fb::Instruction* act = m->instructions()->Get(c);
  if (add->outputs()->size() != 1 || act->outputs()->size() != 1 || act->inputs()->size() < 1 ||
      act->inputs()->Get(0) != add->outputs()->Get(0))
    return bad(what + " folds an activation that does not read the fused instruction's output");
  for (uint32_t k = 1; k < act->inputs()->size(); ++k) {
    const int32_t v = act->inputs()->Get(k);
    const fb::Value* val = v < 0 ? nullptr : m->values()->Get(v);
    if (val && val->storage() == fb::StorageKind::Alias) val = m->values()->Get(val->alias_of());
    if (val && val->storage() != fb::StorageKind::Constant) return bad(what + " folds an activation that reads another value");
  }
  return ok_status();
}

Status check_delegate_op(const fb::Method* m, const fb::DelegateRegion* r, const fb::DelegateOp* op, const std::string& what,
                         std::vector<int>& covered) {
  const int32_t first = r->first(), last = r->first() + r->count();
  if (!op->inputs() || !op->outputs()) return bad(what + " lacks its operand lists");
  auto in_region = [&](int32_t i) { return i >= first && i < last; };
  if (op->kind() == fb::DelegateOpKind::ToNhwc || op->kind() == fb::DelegateOpKind::ToNchw) {
    if (op->into() != -1) return bad(what + " changes layout into a Concat's slice");
    if (op->inputs()->size() != 1 || op->outputs()->size() != 1) return bad(what + " changes layout of other than one value");
    const int32_t from = op->inputs()->Get(0), to = op->outputs()->Get(0);
    const bool ok = op->kind() == fb::DelegateOpKind::ToNhwc ? stands_for(m, to, from) && to != from
                                                            : stands_for(m, from, to) && to != from;
    if (!ok) return bad(what + " converts between values that are not a value and its channels-last twin");
    return ok_status();
  }
  if (op->kind() != fb::DelegateOpKind::Kernel) return bad(what + " has an unknown kind");
  if (op->into() < -1 || (op->into() >= 0 && static_cast<size_t>(op->into()) >= m->values()->size()))
    return bad(what + " writes into no valid value");
  if (!in_region(op->source())) return bad(what + " computes an instruction outside its region");
  const fb::Instruction* src = m->instructions()->Get(op->source());
  ++covered[op->source()];
  const flatbuffers::Vector<int32_t>* target = src->outputs();
  if (op->gate() != -1) {
    KILN_TRY(check_gate(m, op, what, first, last));
    ++covered[op->gate()];
    ++covered[op->fused()];
    target = m->instructions()->Get(op->fused())->outputs();
  } else if (op->fused() != -1) {
    if (!in_region(op->fused()) || op->fused() == op->source()) return bad(what + " fuses an instruction outside its region");
    // The fused instruction reads the source's output, and otherwise only what the source
    // reads or constants: the op's step reads no value its operand list does not name.
    const fb::Instruction* f = m->instructions()->Get(op->fused());
    bool consumes = false, closed = true;
    for (int32_t v : *f->inputs()) {
      if (src->outputs()->size() == 1 && v == src->outputs()->Get(0)) {
        consumes = true;
        continue;
      }
      const fb::Value* val = v < 0 ? nullptr : m->values()->Get(v);
      if (val && val->storage() == fb::StorageKind::Alias) val = m->values()->Get(val->alias_of());
      bool known = !val || val->storage() == fb::StorageKind::Constant;
      for (int32_t s : *src->inputs()) known = known || s == v;
      closed = closed && known;
    }
    if (src->outputs()->size() != 1 || !consumes || !closed || f->outputs()->size() != 1)
      return bad(what + " fuses an instruction that does not consume its output");
    ++covered[op->fused()];
    target = f->outputs();
  }
  if (op->clamp() != -1) {
    KILN_TRY(check_clamp(m, op, what, first, last));
    ++covered[op->clamp()];
    target = m->instructions()->Get(op->clamp())->outputs();
  }
  if (op->inputs()->size() != src->inputs()->size() || op->outputs()->size() != target->size())
    return bad(what + " has operands that do not match its instruction's");
  for (size_t k = 0; k < op->inputs()->size(); ++k)
    if (!stands_for(m, op->inputs()->Get(k), src->inputs()->Get(k))) return bad(what + " reads another value than its instruction");
  for (size_t k = 0; k < op->outputs()->size(); ++k)
    if (!stands_for(m, op->outputs()->Get(k), target->Get(k))) return bad(what + " writes another value than its instruction");
  return ok_status();
}

// A convolution writing into a Concat's slice (DelegateOp::into): its output is a twin that a
// later Concat of the same region reads once, `into` is that Concat's channels-last output,
// and no other step reads the convolution's output (its bytes are then never written).
Status check_into(const fb::Method* m, const fb::DelegateRegion* r, const std::string& rw, const std::vector<int>& reads) {
  auto twin = [&](int32_t v) { return m->values()->Get(v)->storage() == fb::StorageKind::Delegate; };
  for (size_t k = 0; k < r->ops()->size(); ++k) {
    const fb::DelegateOp* op = r->ops()->Get(k);
    if (op->into() < 0) continue;
    const std::string what = rw + " op #" + std::to_string(k);
    const int32_t y = op->outputs()->size() == 1 ? op->outputs()->Get(0) : -1;
    if (y < 0 || m->instructions()->Get(op->source())->op()->str() != "Conv" || !twin(y) || !twin(op->into()))
      return bad(what + " writes into a Concat's slice but is not a channels-last convolution");
    bool found = false;
    for (size_t c = k + 1; c < r->ops()->size() && !found; ++c) {
      const fb::DelegateOp* cat = r->ops()->Get(c);
      if (cat->kind() != fb::DelegateOpKind::Kernel || cat->outputs()->size() != 1 || cat->outputs()->Get(0) != op->into() ||
          m->instructions()->Get(cat->source())->op()->str() != "Concat")
        continue;
      found = std::count(cat->inputs()->begin(), cat->inputs()->end(), y) == 1;
    }
    if (!found) return bad(what + " writes into value #" + std::to_string(op->into()) + ", not a later Concat's output reading it");
    if (reads[y] != 1) return bad(what + " writes into a Concat's slice an output that another step reads");
  }
  return ok_status();
}

// The delegated schedule: twins are permuted copies of their values, regions cover runs of
// instructions exactly once, every value is written before it is read, and the delegate's
// arena plan keeps slots alive together apart (the same rules as the portable plan).

}  // namespace

Status check_delegate(const fb::Method* m) {
  const fb::Delegate* d = m->delegate();
  if (!d) return ok_status();
  const std::string name = "method '" + m->name()->str() + "' delegate";
  const size_t n_values = m->values()->size(), n_instr = m->instructions()->size();
  if (!d->plan() || len(d->offsets()) != n_values || !aligned8(d->offsets()))
    return bad(name + " lacks its arena plan or offsets");
  for (size_t i = 0; i < n_values; ++i) {
    const fb::Value* v = m->values()->Get(i);
    if (v->storage() != fb::StorageKind::Delegate) {
      if (v->nhwc_of() != -1) return bad(where(m, "value", i) + " names a channels-last base but is not a delegate value");
      continue;
    }
    const int32_t b = v->nhwc_of();
    if (b < 0 || static_cast<size_t>(b) >= n_values) return bad(where(m, "value", i) + " is a delegate value with no base");
    const fb::Value* base = m->values()->Get(b);
    const size_t rank = len(base->shape());
    if (base->storage() == fb::StorageKind::Delegate || base->storage() == fb::StorageKind::Constant ||
        base->dtype() != v->dtype() || rank < 3 || len(v->shape()) != rank)
      return bad(where(m, "value", i) + " cannot be the channels-last twin of value #" + std::to_string(b));
    for (size_t k = 0; k < rank; ++k) {
      const size_t from = k == 0 ? 0 : k == rank - 1 ? 1 : k + 1;
      if (v->shape()->Get(k) != base->shape()->Get(from))
        return bad(where(m, "value", i) + " is not the channels-last permutation of value #" + std::to_string(b));
    }
  }
  std::vector<int> covered(n_instr, 0);
  size_t next = 0;
  KILN_ASSIGN_OR_RETURN(std::vector<Branch> branches, method_branches(m));
  for (size_t ri = 0; ri < len(d->regions()); ++ri) {
    const fb::DelegateRegion* r = d->regions()->Get(ri);
    const std::string rw = name + " region #" + std::to_string(ri);
    if (r->first() < 0 || static_cast<size_t>(r->first()) < next || r->count() < 1 ||
        static_cast<size_t>(r->first()) + static_cast<size_t>(r->count()) > n_instr || len(r->ops()) == 0)
      return bad(rw + " covers no valid run of instructions");
    const int64_t lo = r->first(), hi = static_cast<int64_t>(r->first()) + r->count();  // [lo, hi)
    for (const Branch& b : branches)  // a region lies inside one block: it cannot be half skipped
      if ((b.if_at >= lo && b.if_at < hi) || (b.else_at >= lo && b.else_at < hi) || (b.end > lo && b.end < hi))
        return bad(rw + " crosses the blocks of the branch at instruction #" + std::to_string(b.if_at));
    for (size_t k = 0; k < r->ops()->size(); ++k)
      KILN_TRY(check_delegate_op(m, r, r->ops()->Get(k), rw + " op #" + std::to_string(k), covered));
    for (int32_t k = r->first(); k < r->first() + r->count(); ++k)
      if (covered[k] != 1) return bad(rw + " computes instruction #" + std::to_string(k) + " " + std::to_string(covered[k]) + " times");
    next = static_cast<size_t>(r->first() + r->count());
  }
  std::vector<LoopSpan> loops;
  const std::vector<Step> steps = schedule_steps(m, /*delegated=*/true, &loops);
  const std::vector<int32_t> root = roots(m);
  std::vector<bool> written(n_values, false);
  for (size_t i = 0; i < n_values; ++i) written[i] = m->values()->Get(i)->storage() == fb::StorageKind::Constant;
  for (int32_t i : *m->inputs()) written[i] = true;
  for (size_t k = 0; k < steps.size(); ++k) {
    for (int32_t v : steps[k].reads)
      if (v >= 0 && !written[root[v]]) return bad(name + " step #" + std::to_string(k) + " reads value #" + std::to_string(v) + " before it is written");
    for (int32_t v : steps[k].writes) written[v] = true;
  }
  for (int32_t v : *m->outputs())
    if (!written[root[v]]) return bad(name + " never writes output value #" + std::to_string(v));
  std::vector<int> reads(n_values, 0);
  for (const Step& st : steps)
    for (int32_t v : st.reads)
      if (v >= 0) ++reads[root[v]];
  for (int32_t v : *m->outputs()) ++reads[root[v]];
  for (size_t ri = 0; ri < len(d->regions()); ++ri)
    KILN_TRY(check_into(m, d->regions()->Get(ri), name + " region #" + std::to_string(ri), reads));
  const Lifetimes life = compute_lifetimes(n_values, steps, value_list(m->inputs()), value_list(m->outputs()), root, loops);
  const uint64_t arena = d->plan()->arena_bytes();
  uint64_t slot_bytes = 0;
  std::vector<int32_t> slots;
  for (size_t i = 0; i < n_values; ++i) {
    const fb::Value* v = m->values()->Get(i);
    auto s = v->storage();
    if (s == fb::StorageKind::Constant || s == fb::StorageKind::Alias || !life.alive(static_cast<int32_t>(i))) continue;
    const uint64_t off = d->offsets()->Get(i);
    if (off % kSegmentAlignment != 0 || off > arena || arena - off < v->nbytes())
      return bad(name + " places value #" + std::to_string(i) + " outside its arena of " + std::to_string(arena) + " bytes");
    if (__builtin_add_overflow(slot_bytes, align_up(v->nbytes(), kSegmentAlignment), &slot_bytes)) slot_bytes = UINT64_MAX;
    slots.push_back(static_cast<int32_t>(i));
  }
  if (arena > slot_bytes) return bad(name + " plans an arena larger than its slots side by side");
  int32_t a = -1, b = -1;
  if (find_overlap(slots, [&](int32_t v) { return d->offsets()->Get(v); },
                   [&](int32_t v) { return m->values()->Get(v)->nbytes(); }, life, &a, &b))
    return bad(name + " places values #" + std::to_string(a) + " and #" + std::to_string(b) +
               " in the same bytes while both are alive");
  return check_placement(m, d->plan(), slots, name);
}

}  // namespace kiln::format::reader_detail
