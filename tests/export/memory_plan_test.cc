// Memory planner: no two buffers alive at once overlap; arena >= lower bound; known cases.
#include "export/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln::exporter {
namespace {

void expect_valid(const std::vector<Buffer>& bufs, const MemoryPlan& p) {
  ASSERT_EQ(p.offsets.size(), bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % 64, 0u);
    EXPECT_LE(p.offsets[i] + bufs[i].size, p.arena_bytes);
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      bool live_together = bufs[i].first <= bufs[j].last && bufs[j].first <= bufs[i].last;
      bool disjoint = p.offsets[i] + bufs[i].size <= p.offsets[j] || p.offsets[j] + bufs[j].size <= p.offsets[i];
      EXPECT_TRUE(!live_together || disjoint) << i << " and " << j;
    }
  }
  EXPECT_GE(p.arena_bytes, p.lower_bound_bytes);
}

TEST(MemoryPlan, ChainReusesMemory) {
  // a -> b -> c -> d: only two alive at a time.
  std::vector<Buffer> bufs = {{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}};
  MemoryPlan p = plan_memory(bufs);
  expect_valid(bufs, p);
  EXPECT_EQ(p.lower_bound_bytes, 2048u);
  EXPECT_EQ(p.arena_bytes, 2048u);
}

TEST(MemoryPlan, RandomLifetimesStayValidAndTight) {
  std::mt19937 rng(3);
  double worst = 1.0;
  for (int it = 0; it < 100; ++it) {
    std::vector<Buffer> bufs;
    int n = 5 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      int64_t first = rng() % 30;
      bufs.push_back(Buffer{64 * (1 + rng() % 100), first, first + static_cast<int64_t>(rng() % 4)});
    }
    MemoryPlan p = plan_memory(bufs);
    expect_valid(bufs, p);
    worst = std::max(worst, static_cast<double>(p.arena_bytes) / static_cast<double>(p.lower_bound_bytes));
  }
  EXPECT_LT(worst, 1.6);  // greedy is near the bound on short-lived buffers
}

TEST(MemoryPlan, Empty) {
  MemoryPlan p = plan_memory({});
  EXPECT_EQ(p.arena_bytes, 0u);
  EXPECT_EQ(p.lower_bound_bytes, 0u);
}

}  // namespace
}  // namespace kiln::exporter
