#pragma once
// Ahead-of-time arena planning from value lifetimes in execution order.

#include <cstdint>
#include <string>
#include <vector>

#include "format/program_desc.h"

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
  /// Per buffer, the buffers it must sit above at any shape: alive at the same time and
  /// lower in `offsets` (ties by index), minus those another listed one already implies.
  /// Placing each buffer, in order of (offset, index), just above the top of its list's
  /// buffers at their actual sizes never overlaps two live buffers, and at the bound's sizes
  /// reproduces at most `arena_bytes`.
  std::vector<std::vector<uint32_t>> below;
};

/// Sizes are rounded up to `alignment`. Runs every strategy (greedy by size and greedy
/// by first use, both with best-fit offsets) and keeps the smallest arena.
/// `samples` (optional) gives every buffer's size at other shapes (one vector per shape, e.g.
/// every dim at its minimum): the strategy is then the one whose placement at the bound and at
/// each sample is closest to that shape's live lower bound (the worst ratio; ties: the smaller
/// arena).
MemoryPlan plan_memory(const std::vector<Buffer>& buffers, uint64_t alignment = 64,
                       const std::vector<std::vector<uint64_t>>& samples = {});

/// Each buffer's bytes (buffer b is value value_of[b] of `m`) with every dim at its minimum,
/// and in the middle of its range: the samples plan_memory weighs its strategies at.
std::vector<std::vector<uint64_t>> sample_sizes(const format::MethodDesc& m, const std::vector<int32_t>& value_of);

/// The arena bytes `placement` (the method's, or its delegate's) takes when every dim d is at
/// most caps[d] (and at least its min): each value sized by interval arithmetic over those
/// ranges (never above its bound), placed as bind places it. What Method::create allocates for
/// max_shapes at those caps, and, caps at each dim's min, the arena at the smallest shape.
uint64_t arena_at_caps(const format::MethodDesc& m, const format::PlacementDesc& placement, const std::vector<int64_t>& caps);

/// The plan's placement over a method's `n_values` values, buffer b being value value_of[b].
format::PlacementDesc placement_of(const MemoryPlan& plan, const std::vector<int32_t>& value_of, size_t n_values);

}  // namespace kiln::exporter
