// The execution order of a Method: its portable instructions and delegate regions in order,
// the jumps of runtime branches (KilnIf/KilnElse) and loops (KilnLoop/KilnEndLoop), and the
// block each value belongs to (bind lets a value of a block have an invalid shape; execute
// refuses the block only if it runs).
#include <string>
#include <vector>

#include "runtime/method_impl.h"
#include "core/status.h"

namespace kiln {

Status Method::Impl::build_schedule() {
  const fb::Delegate* del = delegate ? m->delegate() : nullptr;
  size_t next = 0;
  const size_t n_instr = instrs.size();
  if (del)
    for (size_t r = 0; r < del->regions()->size(); ++r) {
      const fb::DelegateRegion* reg = del->regions()->Get(r);
      for (; next < static_cast<size_t>(reg->first()); ++next) schedule.push_back({static_cast<int32_t>(next), -1});
      schedule.push_back({-1, static_cast<int32_t>(r)});
      next = static_cast<size_t>(reg->first() + reg->count());
    }
  for (; next < n_instr; ++next) schedule.push_back({static_cast<int32_t>(next), -1});
  // Runtime branches: where KilnIf and KilnElse jump (the reader checked that blocks nest and
  // that no delegate region crosses one, so every block starts a step).
  KILN_ASSIGN_OR_RETURN(std::vector<format::Branch> branches, format::method_branches(m));
  std::vector<int32_t> step_at(n_instr + 1, -1);
  for (size_t k = 0; k < schedule.size(); ++k) {
    const Step& st = schedule[k];
    step_at[static_cast<size_t>(st.region >= 0 ? del->regions()->Get(static_cast<flatbuffers::uoffset_t>(st.region))->first() : st.instr)] =
        static_cast<int32_t>(k);
  }
  step_at[n_instr] = static_cast<int32_t>(schedule.size());
  for (const format::Branch& b : branches) {
    const int32_t if_step = step_at[static_cast<size_t>(b.if_at)], else_step = step_at[static_cast<size_t>(b.else_at)],
                  end_step = step_at[static_cast<size_t>(b.end)];
    if (if_step < 0 || else_step < 0 || end_step < 0)
      return data_loss("create: method '" + meta.name + "': a delegate region crosses the branch at instruction #" + std::to_string(b.if_at));
    Step& at_if = schedule[static_cast<size_t>(if_step)];
    Step& at_else = schedule[static_cast<size_t>(else_step)];
    at_if.branch = static_cast<int32_t>(&b - branches.data());
    if (b.loop) {  // KilnLoop: past the loop when it runs no iteration; KilnEndLoop: back to the body
      const fb::Instruction* li = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(b.if_at));
      const Instr& lin = instrs[static_cast<size_t>(b.if_at)];
      const int64_t trip = core::Attrs(attrs.data() + lin.attr_begin, lin.n_attr).get_int("trip", -1);
      if (trip < 0 || static_cast<size_t>(trip) >= exprs.size() || li->inputs()->size() < 1)
        return data_loss("create: method '" + meta.name + "': the loop at instruction #" + std::to_string(b.if_at) + " has no trip count");
      at_if.control = Step::kLoop;
      at_if.jump = end_step;
      at_else.control = Step::kEndLoop;
      at_else.jump = if_step + 1;
      at_if.trip = at_else.trip = static_cast<int32_t>(trip);
      continue;
    }
    at_if.control = Step::kIf;
    at_if.jump = else_step + 1;
    at_else.control = Step::kElse;
    at_else.jump = end_step;
  }
  if (!branches.empty()) map_value_blocks(branches);
  return ok_status();
}

// Which block makes each value (inner blocks after outer ones).
void Method::Impl::map_value_blocks(const std::vector<format::Branch>& branches) {
  const size_t nv = views.size();
  value_block.assign(nv, -1);
  block_bad.assign(2 * branches.size(), -1);
  const size_t n_instr = instrs.size();
  instr_block = format::instruction_blocks(branches, n_instr);
  for (size_t i = 0; i < n_instr; ++i) {
    const fb::Instruction* in = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
    for (int32_t o : *in->outputs()) value_block[static_cast<size_t>(o)] = instr_block[i];
    if (in->scratch() >= 0) value_block[static_cast<size_t>(in->scratch())] = instr_block[i];
  }
  // A view: the block of its root; else, as a branch result, the block that gives it; else
  // the block of its first reader (a view of an outer value made inside a block).
  auto is_view = [&](int32_t v) { return v >= 0 && m->values()->Get(static_cast<flatbuffers::uoffset_t>(v))->storage() == fb::StorageKind::Alias; };
  std::vector<bool> placed(nv, false);
  for (size_t v = 0; v < nv; ++v)
    if (is_view(static_cast<int32_t>(v))) {
      value_block[v] = value_block[static_cast<size_t>(m->values()->Get(static_cast<flatbuffers::uoffset_t>(v))->alias_of())];
      placed[v] = value_block[v] >= 0;
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
      value_block[static_cast<size_t>(v)] = static_cast<int32_t>(2 * bi + (k > n ? 1 : 0));
      placed[static_cast<size_t>(v)] = true;
    }
  }
  for (size_t i = 0; i < n_instr; ++i) {
    const fb::Instruction* in = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
    for (int32_t v : *in->inputs())
      if (is_view(v) && !placed[static_cast<size_t>(v)]) {
        value_block[static_cast<size_t>(v)] = instr_block[i];
        placed[static_cast<size_t>(v)] = true;
      }
  }
  for (int32_t o : *m->outputs()) value_block[static_cast<size_t>(o)] = -1;  // outputs are always valid
}

}  // namespace kiln
