#include "export/memory_plan.h"

#include "format/file_header.h"

#include <algorithm>
#include <numeric>

namespace kiln::exporter {

namespace {

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool overlap(const Buffer& a, const Buffer& b) { return a.first <= b.last && b.first <= a.last; }

// Places buffers in `order`; each goes into the smallest gap among already placed
// buffers that are alive at the same time, or on top of them if no gap fits.
std::vector<uint64_t> place_best_fit(const std::vector<Buffer>& bufs, const std::vector<size_t>& order,
                                     uint64_t* arena) {
  std::vector<uint64_t> off(bufs.size(), 0);
  std::vector<size_t> placed;
  *arena = 0;
  for (size_t i : order) {
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [begin, end) of conflicting buffers
    for (size_t j : placed)
      if (overlap(bufs[i], bufs[j])) busy.emplace_back(off[j], off[j] + bufs[j].size);
    std::sort(busy.begin(), busy.end());
    uint64_t best = UINT64_MAX, best_gap = UINT64_MAX, cursor = 0;
    for (auto& [b, e] : busy) {
      if (b > cursor && b - cursor >= bufs[i].size && b - cursor < best_gap) {
        best = cursor;
        best_gap = b - cursor;
      }
      cursor = std::max(cursor, e);
    }
    off[i] = best != UINT64_MAX ? best : cursor;
    *arena = std::max(*arena, off[i] + bufs[i].size);
    placed.push_back(i);
  }
  return off;
}

// The `below` lists of MemoryPlan: the full relation (j alive with i and under it), then
// without the edges a kept one implies (j under k under i): sizes are never negative.
std::vector<std::vector<uint32_t>> placement_order(const std::vector<Buffer>& bufs, const std::vector<uint64_t>& off) {
  const size_t n = bufs.size();
  auto under = [&](size_t j, size_t i) {  // strictly before in (offset, index) order, and not overlapping
    return off[j] + bufs[j].size <= off[i] && (off[j] < off[i] || j < i);
  };
  std::vector<std::vector<uint32_t>> full(n), kept(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (j != i && overlap(bufs[i], bufs[j]) && under(j, i)) full[i].push_back(static_cast<uint32_t>(j));
  std::vector<bool> implied(n);
  for (size_t i = 0; i < n; ++i) {
    std::fill(implied.begin(), implied.end(), false);
    for (uint32_t k : full[i])
      for (uint32_t j : full[k]) implied[j] = true;
    for (uint32_t j : full[i])
      if (!implied[j]) kept[i].push_back(j);
  }
  return kept;
}

// The bytes alive at each step with these sizes.
std::vector<uint64_t> live_by_step(const std::vector<Buffer>& bufs, const std::vector<uint64_t>& size) {
  int64_t steps = 0;
  for (const Buffer& b : bufs) steps = std::max(steps, b.last + 1);
  std::vector<uint64_t> live(static_cast<size_t>(steps) + 1, 0);
  for (size_t i = 0; i < bufs.size(); ++i)
    for (int64_t t = bufs[i].first; t <= bufs[i].last; ++t) live[t] += size[i];
  return live;
}

// Most bytes alive at one step with these sizes.
uint64_t live_peak(const std::vector<Buffer>& bufs, const std::vector<uint64_t>& size) {
  const std::vector<uint64_t> live = live_by_step(bufs, size);
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

// The arena the placement takes with these sizes (see MemoryPlan::below).
uint64_t placed_top(const std::vector<uint64_t>& off, const std::vector<std::vector<uint32_t>>& below,
                    const std::vector<uint64_t>& size) {
  std::vector<size_t> order(off.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return off[a] != off[b] ? off[a] < off[b] : a < b; });
  std::vector<uint64_t> at(off.size(), 0);
  uint64_t top = 0;
  for (size_t i : order) {
    for (uint32_t j : below[i]) at[i] = std::max(at[i], at[j] + size[j]);
    top = std::max(top, at[i] + size[i]);
  }
  return top;
}

// The placement orders the planner tries.
struct Orders {
  std::vector<size_t> by_size, by_breadth, by_first;
};

Orders candidate_orders(const std::vector<Buffer>& bufs, const std::vector<uint64_t>& live) {
  Orders o;
  o.by_size.resize(bufs.size());
  std::iota(o.by_size.begin(), o.by_size.end(), 0);
  std::stable_sort(o.by_size.begin(), o.by_size.end(), [&](size_t a, size_t b) {
    if (bufs[a].size != bufs[b].size) return bufs[a].size > bufs[b].size;
    return bufs[a].last - bufs[a].first > bufs[b].last - bufs[b].first;
  });
  o.by_first.resize(bufs.size());
  std::iota(o.by_first.begin(), o.by_first.end(), 0);
  std::stable_sort(o.by_first.begin(), o.by_first.end(), [&](size_t a, size_t b) {
    if (bufs[a].first != bufs[b].first) return bufs[a].first < bufs[b].first;
    return bufs[a].size > bufs[b].size;
  });
  // Greedy by the breadth of each step: the steps with the most live bytes first,
  // their buffers biggest first (TFLite's "greedy by breadth").
  std::vector<int64_t> step_order(live.size());
  std::iota(step_order.begin(), step_order.end(), 0);
  std::stable_sort(step_order.begin(), step_order.end(), [&](int64_t a, int64_t b) { return live[a] > live[b]; });
  std::vector<bool> taken(bufs.size(), false);
  for (int64_t t : step_order) {
    for (size_t i : o.by_size) {
      if (!taken[i] && bufs[i].first <= t && t <= bufs[i].last) {
        taken[i] = true;
        o.by_breadth.push_back(i);
      }
    }
  }
  for (size_t i : o.by_size)
    if (!taken[i]) o.by_breadth.push_back(i);
  return o;
}

// The sizes at the sample shapes, rounded like the bound's, and each sample's lower bound.
struct Samples {
  std::vector<std::vector<uint64_t>> sizes;
  std::vector<uint64_t> lower;
};

Samples round_samples(const std::vector<Buffer>& bufs, const std::vector<std::vector<uint64_t>>& samples, uint64_t alignment) {
  Samples out;
  for (const std::vector<uint64_t>& smp : samples) {
    if (smp.size() != bufs.size()) continue;
    std::vector<uint64_t> sz(smp.size());
    for (size_t i = 0; i < sz.size(); ++i) sz[i] = round_up(std::min(smp[i], bufs[i].size), alignment);
    out.lower.push_back(live_peak(bufs, sz));
    out.sizes.push_back(std::move(sz));
  }
  return out;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<Buffer>& input, uint64_t alignment, const std::vector<std::vector<uint64_t>>& samples) {
  std::vector<Buffer> bufs = input;
  std::vector<uint64_t> sizes;
  for (Buffer& b : bufs) sizes.push_back(b.size = round_up(b.size, alignment));
  MemoryPlan plan;
  // Lower bound: the most bytes alive at any one step.
  const std::vector<uint64_t> live = live_by_step(bufs, sizes);
  plan.lower_bound_bytes = live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  const Orders orders = candidate_orders(bufs, live);
  struct Candidate { const char* name; const std::vector<size_t>* order; };
  const Candidate candidates[] = {{"greedy-by-size", &orders.by_size}, {"greedy-by-breadth", &orders.by_breadth},
                                  {"greedy-by-first-use", &orders.by_first}};
  const Samples smp = round_samples(bufs, samples, alignment);
  auto ratio = [](uint64_t a, uint64_t b) { return b ? static_cast<double>(a) / static_cast<double>(b) : 1.0; };
  // The arena allocated is the bound's: only strategies within 2% of the smallest one there
  // compete on the samples.
  std::vector<uint64_t> arenas;
  std::vector<std::vector<uint64_t>> offsets;
  for (const Candidate& c : candidates) {
    uint64_t arena = 0;
    offsets.push_back(place_best_fit(bufs, *c.order, &arena));
    arenas.push_back(arena);
  }
  const uint64_t smallest = *std::min_element(arenas.begin(), arenas.end());
  plan.arena_bytes = UINT64_MAX;
  double best_score = 0;
  for (size_t ci = 0; ci < arenas.size(); ++ci) {
    const uint64_t arena = arenas[ci];
    if (static_cast<double>(arena) > 1.02 * static_cast<double>(smallest)) continue;
    std::vector<uint64_t> off = std::move(offsets[ci]);
    std::vector<std::vector<uint32_t>> below = placement_order(bufs, off);
    double score = 1.0;
    for (size_t k = 0; k < smp.sizes.size(); ++k) score = std::max(score, ratio(placed_top(off, below, smp.sizes[k]), smp.lower[k]));
    if (plan.arena_bytes == UINT64_MAX || score < best_score - 1e-9 || (score < best_score + 1e-9 && arena < plan.arena_bytes)) {
      best_score = score;
      plan.arena_bytes = arena;
      plan.offsets = std::move(off);
      plan.below = std::move(below);
      plan.strategy = candidates[ci].name;
    }
  }
  if (bufs.empty()) plan.arena_bytes = 0;
  return plan;
}

format::PlacementDesc placement_of(const MemoryPlan& plan, const std::vector<int32_t>& value_of, size_t n_values) {
  format::PlacementDesc p;
  std::vector<std::vector<int32_t>> below(n_values);
  for (size_t b = 0; b < plan.below.size(); ++b)
    for (uint32_t j : plan.below[b]) below[static_cast<size_t>(value_of[b])].push_back(value_of[j]);
  p.below_start.push_back(0);
  for (size_t v = 0; v < n_values; ++v) {
    p.below.insert(p.below.end(), below[v].begin(), below[v].end());
    p.below_start.push_back(static_cast<uint32_t>(p.below.size()));
  }
  std::vector<size_t> order(value_of.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.offsets[a] != plan.offsets[b] ? plan.offsets[a] < plan.offsets[b] : a < b;
  });
  for (size_t b : order) p.order.push_back(value_of[b]);
  return p;
}

std::vector<std::vector<uint64_t>> sample_sizes(const format::MethodDesc& m, const std::vector<int32_t>& value_of) {
  std::vector<std::vector<uint64_t>> out;
  for (int mid = 0; mid < 2; ++mid) {
    std::vector<int64_t> dims;
    for (const DimSpec& d : m.dims) {
      const int64_t lo = core::ceil_div(d.min, d.step) * d.step;
      dims.push_back(mid ? lo + (d.max - lo) / 2 / d.step * d.step : lo);
    }
    std::vector<int64_t> v(m.exprs.size());
    if (!core::eval_exprs(m.exprs.data(), m.exprs.size(), dims.data(), v.data(), nullptr)) continue;
    std::vector<uint64_t> sizes;
    for (int32_t id : value_of) {
      const format::ValueDesc& val = m.values[static_cast<size_t>(id)];
      uint64_t n = dtype_size(val.dtype);
      for (core::ExprId e : val.shape) n *= static_cast<uint64_t>(std::max<int64_t>(0, v[static_cast<size_t>(e)]));
      sizes.push_back(std::min(n, val.nbytes));  // never above the bound (the planner clamps too)
    }
    out.push_back(std::move(sizes));
  }
  return out;
}

uint64_t arena_at_caps(const format::MethodDesc& m, const format::PlacementDesc& placement, const std::vector<int64_t>& caps) {
  std::vector<core::Interval> r(m.exprs.size());
  for (size_t i = 0; i < m.exprs.size(); ++i) {
    const core::ExprNode& e = m.exprs[i];
    core::Interval a, b;
    if (e.op == core::ExprOp::kDim) {
      const DimSpec& d = m.dims[static_cast<size_t>(e.a)];
      a = {d.min, std::max(d.min, std::min(d.max, caps[static_cast<size_t>(e.a)]))};
    } else if (e.op != core::ExprOp::kConst) {
      a = r[static_cast<size_t>(e.a)], b = r[static_cast<size_t>(e.b)];
    }
    r[i] = core::node_range(e.op, a, b, e.value);
  }
  auto size = [&](int32_t v) {
    const format::ValueDesc& val = m.values[static_cast<size_t>(v)];
    uint64_t n = dtype_size(val.dtype);
    for (core::ExprId e : val.shape) {
      const uint64_t hi = static_cast<uint64_t>(std::max<int64_t>(0, r[static_cast<size_t>(e)].hi));
      n = hi != 0 && n > val.nbytes / hi ? val.nbytes : n * hi;  // never above the bound's
    }
    return round_up(std::min(n, val.nbytes), format::kSegmentAlignment);
  };
  if (placement.below_start.size() != m.values.size() + 1) return 0;
  std::vector<uint64_t> offset(m.values.size(), 0);
  uint64_t top = 0;
  for (int32_t v : placement.order) {
    uint64_t off = 0;
    for (uint32_t k = placement.below_start[static_cast<size_t>(v)]; k < placement.below_start[static_cast<size_t>(v) + 1]; ++k) {
      const int32_t j = placement.below[k];
      off = std::max(off, offset[static_cast<size_t>(j)] + size(j));
    }
    offset[static_cast<size_t>(v)] = off;
    top = std::max(top, off + size(v));
  }
  return top;
}

}  // namespace kiln::exporter
