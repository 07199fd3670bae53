#include "format/schedule.h"

#include <algorithm>

namespace kiln::format {

Lifetimes compute_lifetimes(size_t n_values, const std::vector<Step>& steps, const std::vector<int32_t>& inputs,
                            const std::vector<int32_t>& outputs, const std::vector<int32_t>& root,
                            const std::vector<LoopSpan>& loops) {
  Lifetimes l;
  l.first.assign(n_values, -1);
  l.last.assign(n_values, -1);
  const int64_t end = static_cast<int64_t>(steps.size()) + 1;
  for (int32_t i : inputs) l.first[i] = 0, l.last[i] = end;
  for (size_t k = 0; k < steps.size(); ++k) {
    const int64_t step = static_cast<int64_t>(k) + 1;
    for (int32_t o : steps[k].writes)
      if (o >= 0 && l.first[o] < 0) l.first[o] = l.last[o] = step;
    for (int32_t i : steps[k].reads)
      if (i >= 0) l.last[root[i]] = std::max(l.last[root[i]], step);
  }
  // Inner loops first (their spans end earlier); an outer loop then extends what an inner
  // one already extended.
  std::vector<LoopSpan> order = loops;
  std::sort(order.begin(), order.end(), [](const LoopSpan& a, const LoopSpan& b) { return a.end - a.begin < b.end - b.begin; });
  for (const LoopSpan& sp : order) {
    if (sp.begin < 1 || sp.end > static_cast<int64_t>(steps.size()) || sp.begin > sp.end) continue;
    for (int64_t step = sp.begin; step <= sp.end; ++step)
      for (int32_t i : steps[static_cast<size_t>(step - 1)].reads)
        if (i >= 0 && l.first[root[i]] < sp.begin) l.last[root[i]] = std::max(l.last[root[i]], sp.end);
    for (int32_t o : steps[static_cast<size_t>(sp.end - 1)].writes)
      if (o >= 0) l.first[o] = std::min(l.first[o], sp.begin);
  }
  for (int32_t o : outputs) l.last[root[o]] = end;
  return l;
}

bool find_overlap(const std::vector<int32_t>& slots, const std::function<uint64_t(int32_t)>& offset,
                  const std::function<uint64_t(int32_t)>& size, const Lifetimes& life, int32_t* a, int32_t* b) {
  std::vector<int32_t> sorted = slots;
  std::sort(sorted.begin(), sorted.end(), [&](int32_t x, int32_t y) { return offset(x) < offset(y); });
  for (size_t i = 0; i < sorted.size(); ++i) {
    const int32_t va = sorted[i];
    if (size(va) == 0) continue;
    for (size_t j = i + 1; j < sorted.size() && offset(sorted[j]) < offset(va) + size(va); ++j) {
      const int32_t vb = sorted[j];
      if (size(vb) > 0 && life.first[va] <= life.end(vb) && life.first[vb] <= life.end(va)) {
        *a = va;
        *b = vb;
        return true;
      }
    }
  }
  return false;
}

}  // namespace kiln::format
