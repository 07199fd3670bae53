#pragma once
// Ahead-of-time arena planning from value lifetimes in execution order.

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::exporter {

/// A planned buffer: `size` bytes alive from step `first` through step `last` inclusive.
struct Buffer {
  uint64_t size = 0;
  int64_t first = 0;
  int64_t last = 0;
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  ///< one per buffer, multiples of the alignment
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;  ///< max over steps of the live bytes
  std::string strategy;            ///< the strategy that produced `offsets`
};

/// Sizes are rounded up to `alignment`. Runs every strategy (greedy by size and greedy
/// by first use, both with best-fit offsets) and keeps the smallest arena.
MemoryPlan plan_memory(const std::vector<Buffer>& buffers, uint64_t alignment = 64);

}  // namespace kiln::exporter
