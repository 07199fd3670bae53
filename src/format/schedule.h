#pragma once
// Value lifetimes over a schedule, and the check that planned slots alive together do not
// share bytes. Export plans with these lifetimes; the reader re-derives them from the file
// (for the portable schedule and for the delegated one) and refuses overlapping slots.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::format {

/// One step of a schedule: the value ids it reads and writes (-1 entries are ignored).
struct Step {
  std::vector<int32_t> reads;
  std::vector<int32_t> writes;
};

/// first/last step each value is alive (-1 when never). Step 0 holds the inputs, step k of
/// `steps` runs at k + 1, and inputs and outputs live to the end (inputs survive execute for
/// re-runs). A read of an alias keeps its root alive.
struct Lifetimes {
  std::vector<int64_t> first, last;
  bool alive(int32_t v) const { return first[v] >= 0 || last[v] >= 0; }
  int64_t end(int32_t v) const { return first[v] > last[v] ? first[v] : last[v]; }
};

/// A runtime loop's steps in a schedule (1-based, as lifetimes count): its KilnLoop and its
/// KilnEndLoop (control.h). The body between them runs again after KilnEndLoop.
struct LoopSpan {
  int64_t begin = 0, end = 0;
};

/// `root[v]` is the value whose bytes v uses (v itself unless v is an alias). Over each loop
/// span, a value made before the loop and read in it lives to the loop's end (the next
/// iteration reads it again), and what the loop's end writes lives from the loop's start
/// (it accumulates over iterations).
Lifetimes compute_lifetimes(size_t n_values, const std::vector<Step>& steps, const std::vector<int32_t>& inputs,
                            const std::vector<int32_t>& outputs, const std::vector<int32_t>& root,
                            const std::vector<LoopSpan>& loops = {});

/// Among `slots` (value ids with an offset and a size), the first pair alive at the same step
/// whose bytes overlap; returns false when there is none. Zero-sized slots never overlap.
bool find_overlap(const std::vector<int32_t>& slots, const std::function<uint64_t(int32_t)>& offset,
                  const std::function<uint64_t(int32_t)>& size, const Lifetimes& life, int32_t* a, int32_t* b);

}  // namespace kiln::format
