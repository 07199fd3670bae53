#pragma once
// Runtime branches in a method's instruction list. ONNX's If, when its condition is known
// only at run time, becomes
//   KilnIf(cond) [then_len]  <then block: then_len instructions>
//   KilnElse [else_len]      <else block: else_len instructions>
//   KilnSelect(cond, then outputs..., else outputs...) -> outputs
// Execute evaluates the condition at KilnIf and skips the block not taken (KilnElse, reached
// at the end of the then block, jumps past the else block). Blocks nest. The reader checks
// the structure (find_branches) and the runtime builds its jumps from the same result.

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::format {

inline constexpr const char* kIfOp = "KilnIf";
inline constexpr const char* kElseOp = "KilnElse";

/// One instruction as the branch structure sees it.
struct ControlInstr {
  enum Kind : uint8_t { kPlain = 0, kIf = 1, kElse = 2 } kind = kPlain;
  int64_t len = 0;  ///< KilnIf: then_len; KilnElse: else_len
};

/// One branch: instruction indices of its KilnIf and KilnElse, and the first instruction
/// after its else block.
struct Branch {
  int32_t if_at = -1, else_at = -1, end = -1;
};

/// The branches of an instruction list, in order of if_at; an error naming the first
/// control instruction that does not nest (a length past its enclosing block or the end, a
/// KilnIf whose then block is not followed by a KilnElse, a KilnElse no KilnIf claims).
Result<std::vector<Branch>> find_branches(const std::vector<ControlInstr>& instrs);

}  // namespace kiln::format
