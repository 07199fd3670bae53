#include "format/control.h"
#include "core/status.h"

namespace kiln::format {

Result<std::vector<Branch>> find_branches(const std::vector<ControlInstr>& instrs) {
  const int64_t n = static_cast<int64_t>(instrs.size());
  struct Open {
    size_t branch;
    bool in_else;
  };
  std::vector<Branch> branches;
  std::vector<Open> open;  // innermost last
  auto where = [](int64_t i) { return "instruction #" + std::to_string(i); };
  for (int64_t i = 0; i <= n; ++i) {
    while (!open.empty() && open.back().in_else && branches[open.back().branch].end == i) open.pop_back();
    if (i == n) break;
    const ControlInstr& c = instrs[static_cast<size_t>(i)];
    const char* else_op = c.loop ? "KilnEndLoop" : "KilnElse";
    if (c.kind == ControlInstr::kElse) {
      if (open.empty() || open.back().in_else || branches[open.back().branch].else_at != i)
        return data_loss("damaged program: " + where(i) + " (" + else_op + ") belongs to no " + (c.loop ? "KilnLoop" : "KilnIf"));
      open.back().in_else = true;
      continue;
    }
    if (c.kind != ControlInstr::kIf) continue;
    // The innermost open block ends at its KilnElse (then block) or at its end (else block).
    const int64_t limit = open.empty() ? n
                          : open.back().in_else ? branches[open.back().branch].end
                                                : branches[open.back().branch].else_at;
    const char* if_op = c.loop ? "KilnLoop" : "KilnIf";
    if (c.len < 0 || c.len > limit - i - 2)
      return data_loss("damaged program: " + where(i) + " (" + if_op + ") has a " + (c.loop ? "body" : "then block") + " of " +
                       std::to_string(c.len) + " instructions, past its enclosing block");
    const int64_t else_at = i + 1 + c.len;
    const ControlInstr& e = instrs[static_cast<size_t>(else_at)];
    if (e.kind != ControlInstr::kElse || e.loop != c.loop)
      return data_loss("damaged program: " + where(i) + " (" + if_op + "): " + where(else_at) + " after its " +
                       (c.loop ? "body is not a KilnEndLoop" : "then block is not a KilnElse"));
    if (e.len < 0 || e.len > limit - else_at - 1 || (e.loop && e.len != 0))
      return data_loss("damaged program: " + where(else_at) + " (" + else_op + ") has an else block of " + std::to_string(e.len) +
                       " instructions, past its enclosing block");
    branches.push_back(Branch{static_cast<int32_t>(i), static_cast<int32_t>(else_at), static_cast<int32_t>(else_at + 1 + e.len), c.loop});
    open.push_back(Open{branches.size() - 1, false});
  }
  if (!open.empty()) return data_loss("damaged program: a branch's blocks run past the last instruction");
  return branches;
}

std::vector<int32_t> instruction_blocks(const std::vector<Branch>& branches, size_t n_instr, std::vector<int32_t>* parent) {
  std::vector<int32_t> block_of(n_instr, -1);
  if (parent) parent->clear();
  for (size_t b = 0; b < branches.size(); ++b) {  // outer branches first: inner ones overwrite
    const Branch& br = branches[b];
    if (parent) parent->insert(parent->end(), 2, block_of[static_cast<size_t>(br.if_at)]);
    for (int32_t i = br.if_at + 1; i < br.end; ++i)
      if (i != br.else_at) block_of[static_cast<size_t>(i)] = static_cast<int32_t>(2 * b + (i > br.else_at ? 1 : 0));
  }
  return block_of;
}

}  // namespace kiln::format
