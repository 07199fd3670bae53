#pragma once
// Runtime branches in a method's instruction list. ONNX's If, when its condition is known
// only at run time, becomes
//   KilnIf(cond) [then_len]  <then block: then_len instructions>
//   KilnElse [else_len]      <else block: else_len instructions>
//   KilnSelect(cond, then outputs..., else outputs...) -> outputs
// Execute evaluates the condition at KilnIf and skips the block not taken (KilnElse, reached
// at the end of the then block, jumps past the else block). Blocks nest. The reader checks
// the structure (find_branches) and the runtime builds its jumps from the same result.
//
// Runtime loops (ONNX Loop/Scan whose trip count is a shape expression) have the same
// structure with an empty else block:
//   KilnLoop(cond, init...) -> (iter, slot...) [body_len]  <body: body_len instructions>
//   KilnEndLoop(iter, cond, slot..., result..., scan...) -> (scan outputs...)
// KilnLoop copies the initial values into the slots; KilnEndLoop writes this iteration's scan
// rows, copies the results into the slots and counts the iteration; execute jumps back to the
// body while the count is below the trip count and the body's condition holds. A value read in
// the body and made before it lives until KilnEndLoop; KilnEndLoop's outputs live from
// KilnLoop (schedule.h: loop spans).

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::format {

inline constexpr const char* kIfOp = "KilnIf";
inline constexpr const char* kElseOp = "KilnElse";
inline constexpr const char* kLoopOp = "KilnLoop";
inline constexpr const char* kEndLoopOp = "KilnEndLoop";

/// One instruction as the branch structure sees it.
struct ControlInstr {
  enum Kind : uint8_t { kPlain = 0, kIf = 1, kElse = 2 } kind = kPlain;
  int64_t len = 0;  ///< KilnIf: then_len; KilnElse: else_len (KilnLoop: body_len; KilnEndLoop: 0)
  bool loop = false;  ///< KilnLoop (kind kIf) or KilnEndLoop (kind kElse)
};

/// One branch: instruction indices of its KilnIf and KilnElse, and the first instruction
/// after its else block.
struct Branch {
  int32_t if_at = -1, else_at = -1, end = -1;
  bool loop = false;  ///< a loop: if_at is its KilnLoop, else_at its KilnEndLoop, end = else_at + 1
};

/// The branches of an instruction list, in order of if_at; an error naming the first
/// control instruction that does not nest (a length past its enclosing block or the end, a
/// KilnIf whose then block is not followed by a KilnElse, a KilnElse no KilnIf claims, a
/// KilnLoop not closed by a KilnEndLoop).
Result<std::vector<Branch>> find_branches(const std::vector<ControlInstr>& instrs);

/// Blocks of `branches` (find_branches' order): block 2*b is branch b's then block (a loop's
/// body), 2*b + 1 its else block (empty for a loop). Per instruction of a list of `n_instr`,
/// its innermost block, -1 outside every block (KilnIf, KilnElse, KilnLoop and KilnEndLoop
/// belong to the enclosing block). `parent`, when given, gets each block's enclosing block.
std::vector<int32_t> instruction_blocks(const std::vector<Branch>& branches, size_t n_instr,
                                        std::vector<int32_t>* parent = nullptr);

}  // namespace kiln::format
