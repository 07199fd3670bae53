// Memory planner: no two buffers alive at once overlap; arena >= lower bound; known cases.
#include "export/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Placement by shape: each buffer just above its `below` list, in (offset, index) order, at
// any sizes up to the bound's (including 0): no two buffers alive together overlap, and at the
// bound's sizes the arena is at most the planned one.
TEST(MemoryPlan, PlacementAtAnySizesKeepsLiveBuffersApart) {
  std::mt19937 rng(7);
  for (int it = 0; it < 200; ++it) {
    std::vector<Buffer> bufs;
    const int n = 3 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      int64_t first = rng() % 30;
      bufs.push_back(Buffer{64 * (rng() % 100), first, first + static_cast<int64_t>(rng() % 6)});
    }
    MemoryPlan p = plan_memory(bufs);
    ASSERT_EQ(p.below.size(), bufs.size());
    std::vector<size_t> order(bufs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p.offsets[a] != p.offsets[b] ? p.offsets[a] < p.offsets[b] : a < b; });
    for (int scale = 0; scale < 4; ++scale) {
      std::vector<uint64_t> size(bufs.size()), off(bufs.size(), 0);
      for (size_t i = 0; i < bufs.size(); ++i)  // scale 0: the bound; then each buffer anywhere in [0, bound]
        size[i] = scale == 0 ? bufs[i].size : 64 * (rng() % (bufs[i].size / 64 + 1));
      std::vector<size_t> pos(bufs.size());
      for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = k;
      uint64_t top = 0;
      for (size_t i : order) {
        for (uint32_t j : p.below[i]) {
          ASSERT_LT(pos[j], pos[i]) << "a below list names a buffer placed later";
          off[i] = std::max(off[i], off[j] + size[j]);
        }
        top = std::max(top, off[i] + size[i]);
      }
      if (scale == 0) {
        EXPECT_LE(top, p.arena_bytes);
      }
      for (size_t i = 0; i < bufs.size(); ++i)
        for (size_t j = i + 1; j < bufs.size(); ++j) {
          const bool live_together = bufs[i].first <= bufs[j].last && bufs[j].first <= bufs[i].last;
          const bool disjoint = off[i] + size[i] <= off[j] || off[j] + size[j] <= off[i] || size[i] == 0 || size[j] == 0;
          ASSERT_TRUE(!live_together || disjoint) << "iteration " << it << ": buffers " << i << " and " << j;
        }
    }
  }
}

TEST(MemoryPlan, Empty) {
  MemoryPlan p = plan_memory({});
  EXPECT_EQ(p.arena_bytes, 0u);
  EXPECT_EQ(p.lower_bound_bytes, 0u);
}

}  // namespace
}  // namespace kiln::exporter
