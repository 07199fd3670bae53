// The branch structure of a method's instruction list (src/format/control.h): nesting,
// lengths past an enclosing block, a KilnElse no KilnIf claims.
#include <gtest/gtest.h>

#include "format/control.h"

namespace kiln::format {
namespace {

using C = ControlInstr;
C plain() { return C{}; }
C if_(int64_t then_len) { return C{C::kIf, then_len}; }
C else_(int64_t else_len) { return C{C::kElse, else_len}; }

TEST(Control, FindsNestedBranches) {
  // 0 If[3] 1 a 2 If[1] 3 b 4 Else[0] 5 Else[2] 6 c 7 d 8 select
  std::vector<C> code = {if_(4), plain(), if_(1), plain(), else_(0), else_(2), plain(), plain(), plain()};
  auto b = find_branches(code);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->size(), 2u);
  EXPECT_EQ((*b)[0].if_at, 0);
  EXPECT_EQ((*b)[0].else_at, 5);
  EXPECT_EQ((*b)[0].end, 8);
  EXPECT_EQ((*b)[1].if_at, 2);
  EXPECT_EQ((*b)[1].else_at, 4);
  EXPECT_EQ((*b)[1].end, 5);
  // Empty blocks, a branch at the very end, one after another.
  b = find_branches({if_(0), else_(0), if_(1), plain(), else_(1), plain()});
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->size(), 2u);
  EXPECT_EQ((*b)[1].end, 6);
  EXPECT_TRUE(find_branches({plain(), plain()})->empty());
}

TEST(Control, RefusesWhatDoesNotNest) {
  auto msg = [](std::vector<C> code) { return find_branches(code).status().message(); };
  EXPECT_EQ(msg({if_(1), plain(), plain()}),
            "damaged program: instruction #0 (KilnIf): instruction #2 after its then block is not a KilnElse");
  EXPECT_EQ(msg({if_(5), else_(0)}), "damaged program: instruction #0 (KilnIf) has a then block of 5 instructions, past its enclosing block");
  EXPECT_EQ(msg({if_(-1), else_(0)}), "damaged program: instruction #0 (KilnIf) has a then block of -1 instructions, past its enclosing block");
  EXPECT_EQ(msg({if_(0), else_(3), plain()}), "damaged program: instruction #1 (KilnElse) has an else block of 3 instructions, past its enclosing block");
  EXPECT_EQ(msg({plain(), else_(0)}), "damaged program: instruction #1 (KilnElse) belongs to no KilnIf");
  // An inner branch that runs past its enclosing then block.
  EXPECT_EQ(msg({if_(3), if_(0), else_(2), plain(), else_(0)}),
            "damaged program: instruction #2 (KilnElse) has an else block of 2 instructions, past its enclosing block");
  // A KilnElse inside the then block that its KilnIf does not claim.
  EXPECT_EQ(msg({if_(2), else_(0), plain(), else_(0)}), "damaged program: instruction #1 (KilnElse) belongs to no KilnIf");
}

}  // namespace
}  // namespace kiln::format
