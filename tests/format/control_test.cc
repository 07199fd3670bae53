// The branch structure of a method's instruction list (src/format/control.h): nesting,
// lengths past an enclosing block, a KilnElse no KilnIf claims; runtime loops (KilnLoop's
// body closed by a KilnEndLoop); and the lifetimes a loop stretches (schedule.h).
#include <gtest/gtest.h>

#include "format/control.h"
#include "format/schedule.h"

namespace kiln::format {
namespace {

using C = ControlInstr;
C plain() { return C{}; }
C if_(int64_t then_len) { return C{C::kIf, then_len}; }
C else_(int64_t else_len) { return C{C::kElse, else_len}; }
C loop(int64_t body_len) { return C{C::kIf, body_len, true}; }
C end_loop() { return C{C::kElse, 0, true}; }

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

TEST(Control, FindsLoopsInsideAndAroundBranches) {
  // 0 Loop[5] 1 a 2 If[1] 3 b 4 Else[0] 5 select 6 EndLoop 7 c
  auto b = find_branches({loop(5), plain(), if_(1), plain(), else_(0), plain(), end_loop(), plain()});
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->size(), 2u);
  EXPECT_TRUE((*b)[0].loop);
  EXPECT_EQ((*b)[0].if_at, 0);
  EXPECT_EQ((*b)[0].else_at, 6);
  EXPECT_EQ((*b)[0].end, 7);
  EXPECT_FALSE((*b)[1].loop);
  // A loop in a then block, an empty body.
  b = find_branches({if_(3), loop(1), plain(), end_loop(), else_(1), loop(0)});
  EXPECT_FALSE(b.ok());  // the else block's loop has no end inside it
  b = find_branches({if_(3), loop(1), plain(), end_loop(), else_(2), loop(0), end_loop()});
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->size(), 3u);
}

TEST(Control, RefusesLoopsThatDoNotClose) {
  auto msg = [](std::vector<C> code) { return find_branches(code).status().message(); };
  EXPECT_EQ(msg({loop(1), plain(), plain()}),
            "damaged program: instruction #0 (KilnLoop): instruction #2 after its body is not a KilnEndLoop");
  EXPECT_EQ(msg({loop(0), else_(0)}), "damaged program: instruction #0 (KilnLoop): instruction #1 after its body is not a KilnEndLoop");
  EXPECT_EQ(msg({if_(0), end_loop()}), "damaged program: instruction #0 (KilnIf): instruction #1 after its then block is not a KilnElse");
  EXPECT_EQ(msg({plain(), end_loop()}), "damaged program: instruction #1 (KilnEndLoop) belongs to no KilnLoop");
  EXPECT_EQ(msg({loop(4), end_loop()}), "damaged program: instruction #0 (KilnLoop) has a body of 4 instructions, past its enclosing block");
}

TEST(Lifetimes, ALoopKeepsWhatItsBodyReadsAndWhatItsEndWrites) {
  // step 1 makes v0; 2 (KilnLoop) makes v1; 3 reads v0 (its last read) and makes v2; 4 reads
  // v2 and makes v3; 5 (KilnEndLoop) reads v1, v3 and makes v4; 6 reads v4.
  std::vector<Step> steps = {{{}, {0}}, {{}, {1}}, {{0}, {2}}, {{2}, {3}}, {{1, 3}, {4}}, {{4}, {5}}};
  std::vector<int32_t> root = {0, 1, 2, 3, 4, 5};
  Lifetimes plain_life = compute_lifetimes(6, steps, {}, {5}, root);
  EXPECT_EQ(plain_life.last[0], 3);
  EXPECT_EQ(plain_life.first[4], 5);
  Lifetimes l = compute_lifetimes(6, steps, {}, {5}, root, {LoopSpan{2, 5}});
  EXPECT_EQ(l.first[0], 1);
  EXPECT_EQ(l.last[0], 5);   // the next iteration reads it again
  EXPECT_EQ(l.first[4], 2);  // written at every iteration's end: alive over the whole loop
  EXPECT_EQ(l.last[4], 6);
  EXPECT_EQ(l.first[2], 3);  // made and read inside one iteration: unchanged
  EXPECT_EQ(l.last[2], 4);
  EXPECT_EQ(l.first[1], 2);
  EXPECT_EQ(l.last[1], 5);
}

}  // namespace
}  // namespace kiln::format
