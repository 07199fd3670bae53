#include "export/pipeline.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <numeric>

#include "core/bytes.h"
#include "core/dim_text.h"
#include "export/graph.h"
#include "export/memory_plan.h"
#include "export/xnnpack_partition.h"
#include "core/status.h"

namespace kiln::exporter {

namespace {

/// Exports again under other options (without arena limits) and returns the arena at the bound:
/// how a suggested smaller bound is confirmed to fit.
using Reexport = std::function<Result<uint64_t>(const ExportOptions&)>;

/// For a guard `D % k == 0` on a bare dim D, the --dim that states it in the contract instead
/// (the multiples of lcm(step, k) within D's range); empty when there is none.
std::string step_hint(const core::ExprPool& pool, const kernels::Guard& g) {
  if (g.op != kernels::Guard::Op::kDivisible || !pool.is_const(g.rhs)) return "";
  const core::ExprNode& n = pool.node(g.lhs);
  if (n.op != core::ExprOp::kDim) return "";
  const DimSpec& d = pool.dims()[n.a];
  const int64_t k = pool.const_value(g.rhs);
  if (k <= 1 || k > (int64_t{1} << 30)) return "";
  const int64_t step = std::lcm(d.step, k), lo = (d.min + step - 1) / step * step, hi = d.max / step * step;
  if (lo > hi) return "";
  return "; to state it in the contract instead: --dim " + d.name + "=" + std::to_string(lo) + ".." +
         std::to_string(hi) + ":" + std::to_string(step);
}

// The larger of the method's arenas (portable, delegated) when every dim d is at most caps[d].
uint64_t arena_at(const format::MethodDesc& m, const std::vector<int64_t>& caps) {
  uint64_t a = std::min(m.arena_bytes, arena_at_caps(m, m.placement, caps));
  if (!m.delegate.backend.empty() && !m.delegate.regions.empty())
    a = std::max(a, std::min(m.delegate.arena_bytes, arena_at_caps(m, m.delegate.placement, caps)));
  return a;
}

// Each dim's smallest admissible value (min rounded up to its step).
int64_t lowest(const DimSpec& d) { return core::ceil_div(d.min, d.step) * d.step; }

// `--dim` flags a user can shrink: bounded dims of the contract that a --dim states.
std::vector<bool> shrinkable_dims(const format::MethodDesc& m, const ExportOptions& opts) {
  std::vector<bool> out(m.dims.size(), false);
  for (size_t d = 0; d < m.dims.size(); ++d)
    out[d] = !m.dims[d].data && m.dims[d].max > lowest(m.dims[d]) &&
             std::any_of(opts.dims.begin(), opts.dims.end(), [&](const DimArg& a) { return a.name == m.dims[d].name && !a.pinned; });
  return out;
}

// Smaller maxima for the dims, found by halving (on each dim's step grid) the dim whose halving
// shrinks the arena most (ties: the dim with the larger max), until the arena fits `limit`.
// `caps` starts at the bound; false when even every shrinkable dim at its minimum is over.
bool shrink_to_fit(const format::MethodDesc& m, const std::vector<bool>& shrinkable, uint64_t limit,
                   std::vector<int64_t>* caps) {
  uint64_t now = arena_at(m, *caps);
  for (int round = 0; now > limit && round < 4096; ++round) {
    int best = -1;
    uint64_t best_arena = 0;
    int64_t best_value = 0;
    for (size_t d = 0; d < caps->size(); ++d) {
      if (!shrinkable[d] || (*caps)[d] <= lowest(m.dims[d])) continue;
      const int64_t step = m.dims[d].step;
      const int64_t half = std::max(lowest(m.dims[d]), (*caps)[d] / 2 / step * step);
      std::vector<int64_t> trial = *caps;
      trial[d] = half;
      const uint64_t a = arena_at(m, trial);
      if (best < 0 || a < best_arena || (a == best_arena && (*caps)[d] > (*caps)[static_cast<size_t>(best)]))
        best = static_cast<int>(d), best_arena = a, best_value = half;
    }
    if (best < 0) return false;
    (*caps)[static_cast<size_t>(best)] = best_value;
    now = best_arena;
  }
  return now <= limit;
}

// What a contract costs: the arenas at the minimum for the summary, then the limits. Over
// `warn_arena_bytes` adds a warning, over `max_arena_bytes` refuses; both name the dims the
// arena grows with and a smaller bound that fits (confirmed by `reexport` when given).
Status weigh_arena(const format::MethodDesc& m, const ExportOptions& opts, const Reexport& reexport, ExportReport* report) {
  std::vector<int64_t> bound, minimum;
  for (const DimSpec& d : m.dims) bound.push_back(d.max), minimum.push_back(d.data ? d.max : lowest(d));
  report->arena_min_bytes = std::min(m.arena_bytes, arena_at_caps(m, m.placement, minimum));
  if (!m.delegate.backend.empty() && !m.delegate.regions.empty())
    report->delegate_arena_min_bytes = std::min(m.delegate.arena_bytes, arena_at_caps(m, m.delegate.placement, minimum));
  const uint64_t arena = arena_at(m, bound);
  const bool refuse = opts.max_arena_bytes && arena > opts.max_arena_bytes;
  const uint64_t warn_at = opts.max_arena_bytes ? std::min(opts.warn_arena_bytes, opts.max_arena_bytes) : opts.warn_arena_bytes;
  if (!refuse && !(warn_at && arena > warn_at)) return ok_status();
  const uint64_t limit = refuse ? opts.max_arena_bytes : warn_at;
  // Dims in the order the --dim flags give them, then the rest.
  std::vector<size_t> order;
  for (const DimArg& a : opts.dims)
    for (size_t d = 0; d < m.dims.size(); ++d)
      if (m.dims[d].name == a.name && std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  for (size_t d = 0; d < m.dims.size(); ++d)
    if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  // The dims the arena grows with: at their minimum (the others at the bound) it is smaller.
  std::string responsible;
  for (size_t d : order) {
    if (m.dims[d].data || m.dims[d].max <= lowest(m.dims[d])) continue;
    std::vector<int64_t> one = bound;
    one[d] = lowest(m.dims[d]);
    if (arena_at(m, one) < arena)
      responsible += (responsible.empty() ? "" : ", ") + m.dims[d].name + "=" + std::to_string(m.dims[d].max);
  }
  const std::vector<bool> shrinkable = shrinkable_dims(m, opts);
  std::vector<int64_t> caps = bound;
  bool fits = shrink_to_fit(m, shrinkable, limit, &caps);
  std::string flags;
  uint64_t target = limit;
  for (int confirm = 0; fits && reexport && confirm < 3; ++confirm) {  // the plan a re-export makes at those bounds
    ExportOptions o = opts;
    for (DimArg& a : o.dims)
      for (size_t d = 0; d < m.dims.size(); ++d)
        if (a.name == m.dims[d].name && caps[d] != bound[d]) a.max = caps[d];
    Result<uint64_t> replanned = reexport(o);
    if (!replanned.ok() || *replanned <= limit) break;
    // The re-export planned more than this placement estimated: aim lower by that ratio.
    target = static_cast<uint64_t>(static_cast<double>(target) * static_cast<double>(limit) / static_cast<double>(*replanned));
    fits = shrink_to_fit(m, shrinkable, target, &caps);
  }
  for (size_t d : order)
    if (fits && caps[d] != bound[d])
      flags += (flags.empty() ? "" : " ") + std::string("--dim ") + m.dims[d].name + "=" + std::to_string(lowest(m.dims[d])) +
               ".." + std::to_string(caps[d]) + (m.dims[d].step > 1 ? ":" + std::to_string(m.dims[d].step) : "");
  const std::string what = refuse ? "the limit of " + core::human_bytes(limit) : "the warning threshold of " + core::human_bytes(limit);
  const std::string raise = refuse ? "raise --max-arena" : "raise --warn-arena";
  std::string text = "arena at the bound is " + core::human_bytes(arena) + (responsible.empty() ? "" : " (" + responsible + ")") +
                     ", over " + what + " (" + core::human_bytes(report->arena_min_bytes) + " at the minimum)";
  text += fits ? "; lower the bounds, e.g. " + flags + ", or " + raise
               : "; no smaller --dim bounds fit (the arena at the minimum is over it too): " + raise;
  if (refuse) return failed_precondition(text);
  report->warnings.push_back(text);
  return ok_status();
}

// --delegate: partitions method `m` for the delegate and reports its coverage; refuses less
// than --require-coverage, or a delegate Kiln does not have.
Status delegate_method(const ExportOptions& opts, const std::vector<uint8_t>& constants, format::MethodDesc* method,
                       ExportReport* report) {
  format::MethodDesc& m = *method;
  double all = 0, integer = 0;  // the share of FLOPs the integer kernels compute (quantized models)
  for (size_t i = 0; i < m.instructions.size(); ++i) {
    const std::string& op = m.instructions[i].op;
    const double f = instruction_flops(m, i);
    all += f;
    if (op == "QLinearConv" || op == "ConvInteger" || op == "QLinearMatMul" || op == "MatMulInteger" ||
        op == "PackedMatMulIntegerToFloat" || op == "PackedConvIntegerToFloat")
      integer += f;
  }
  report->int8_flop_share = integer > 0 && all > 0 ? integer / all : 0;
  if (opts.delegate == "none") return ok_status();
  if (opts.delegate != "xnnpack") return invalid_argument("unknown --delegate '" + opts.delegate + "'; use xnnpack or none");
  KILN_TRY(partition_xnnpack(&m, constants));
  m.delegate.integer_flops = static_cast<uint64_t>(integer);
  const format::DelegateDesc& d = m.delegate;
  size_t delegated = 0;
  for (const auto& r : d.regions) delegated += static_cast<size_t>(r.count);
  report->coverage = coverage_line(d.backend, delegated, m.instructions.size(), d.delegated_flops, d.flops,
                                   d.regions.size(), d.layout_changes);
  std::vector<std::pair<std::string, std::string>> declined;
  for (const auto& x : d.declined) declined.emplace_back(m.instructions[x.instruction].op, x.reason);
  report->declined = group_declined(declined);
  report->delegate_arena_bytes = d.arena_bytes;
  report->delegate_lower_bound_bytes = d.lower_bound_bytes;
  const double share = d.flops ? static_cast<double>(d.delegated_flops) / static_cast<double>(d.flops) : 1.0;
  if (share < opts.require_coverage) {
    std::string list;
    for (const std::string& x : report->declined) list += "; " + x;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f%% < required %.1f%%", 100 * share, 100 * opts.require_coverage);
    return failed_precondition(std::string("the xnnpack delegate covers ") + buf + " of FLOPs; declined" + list);
  }
  return ok_status();
}

// The emitted method's contract and plan as the report's lines.
void describe_method(const GraphBuilder& g, const MethodStats& stats, const format::MethodDesc& m, ExportReport* report) {
  report->instructions = stats.instructions;
  report->views = stats.views;
  report->folded_constant_nodes = g.folded_constant_nodes();
  report->folded_shape_nodes = g.folded_shape_nodes();
  report->arena_bytes = stats.arena_bytes;
  report->lower_bound_bytes = stats.lower_bound_bytes;
  report->constant_bytes = stats.constant_bytes;
  const core::ExprPool& pool = g.pool();
  report->contract_dims = pool.dims();
  for (const DimSpec& d : pool.dims())
    report->dims.push_back(d.name + " in " + core::dim_range_text(d));
  for (int32_t id : m.inputs)
    report->inputs.push_back("'" + m.values[id].name + "' " + dtype_name(m.values[id].dtype) + " " + pool.shape_to_string(m.values[id].shape));
  for (int32_t id : m.outputs)
    report->outputs.push_back("'" + m.values[id].name + "' " + dtype_name(m.values[id].dtype) + " " + pool.shape_to_string(m.values[id].shape));
  for (const kernels::Guard& gd : m.guards) {
    std::string text = core::relation_text(pool.to_string(gd.lhs), static_cast<core::ExprPool::Relation>(gd.op),
                                           pool.to_string(gd.rhs));
    report->guards.push_back(text + "  (node '" + gd.node_name + "' (" + gd.op_type + ")" +
                            (gd.context.empty() ? "" : " " + gd.context) + ")" + step_hint(pool, gd));
  }
  for (const auto& in : m.instructions) ++report->ops[in.op];
}

// Import under `opts`, then again while the model's guards narrow a dim (GraphBuilder::narrow_dims):
// the shapes an import builds are simplified over the ranges it starts from (a Slice's
// max(0, B - 2) stays so for B in [1, 8]), while load derives them over the narrowed contract
// (B in [3, 8]: B - 2), so the file must come from an import under the narrowed ranges. The
// report keeps what the passes narrowed, from the requested ranges on; each pass shrinks a
// range or ends the loop.
Result<std::unique_ptr<GraphBuilder>> import_narrowed(const ImportGraph& import, const ExportOptions& opts, ExportReport* report) {
  ExportOptions o = opts;
  std::vector<std::string> narrowed;
  for (;;) {
    auto g = std::make_unique<GraphBuilder>(opts.method_name);
    *report = ExportReport();
    report->explain_fusion = opts.explain_fusion;
    KILN_TRY(import(o, g.get(), report));
    bool changed = false;
    for (DimArg& d : o.dims) {
      const int i = g->pool().find_dim(d.name);
      if (i < 0) continue;
      const DimSpec& now = g->pool().dims()[static_cast<size_t>(i)];
      changed = changed || now.min != d.min || now.max != d.max || now.step != d.step;
      d.min = now.min;
      d.max = now.max;
      d.step = now.step;
    }
    if (!changed) {  // a last pass narrows nothing new (at most gaps its guards still check)
      if (!narrowed.empty()) report->narrowed = std::move(narrowed);
      return g;
    }
    narrowed.insert(narrowed.end(), report->narrowed.begin(), report->narrowed.end());
  }
}

// One method: import, emit, delegate, describe, weigh.
Result<ExportReport> export_method(const ImportGraph& import, const ExportOptions& opts, format::ProgramDesc* program,
                                   const Reexport& reexport = nullptr) {
  ExportReport report;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<GraphBuilder> built, import_narrowed(import, opts, &report));
  GraphBuilder& g = *built;
  KILN_ASSIGN_OR_RETURN(MethodStats stats, g.emit(program));
  format::MethodDesc& m = program->methods.back();
  KILN_TRY(delegate_method(opts, program->constants, &m, &report));
  describe_method(g, stats, m, &report);
  report.constant_segment_bytes = program->constants.size();
  KILN_TRY(weigh_arena(m, opts, reexport, &report));
  return report;
}

// The arena at the bound of an export under `o`, without limits (a Reexport).
Result<uint64_t> unlimited_arena(const ImportGraph& import, ExportOptions o) {
  o.max_arena_bytes = o.warn_arena_bytes = 0;
  format::ProgramDesc scratch;
  KILN_ASSIGN_OR_RETURN(ExportReport r, export_method(import, o, &scratch));
  return std::max(r.arena_bytes, r.delegate_arena_bytes);
}

// `o` without the bucket dim's --dim and without buckets: what each bucket's export adds to.
ExportOptions without_bucket_dim(ExportOptions o) {
  const std::string dim = o.bucket_dim;
  o.bucket_sizes.clear();
  o.dims.erase(std::remove_if(o.dims.begin(), o.dims.end(), [&](const DimArg& d) { return d.name == dim; }), o.dims.end());
  return o;
}

// Which axes of method `pm`'s values `ids` carry dim `dim`: (value index, axis) pairs.
std::vector<int32_t> axes_with_dim(const format::MethodDesc& pm, const std::vector<int32_t>& ids, int dim) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const format::ValueDesc& v = pm.values[static_cast<size_t>(ids[i])];
    for (size_t k = 0; k < v.shape.size(); ++k) {
      const core::ExprNode& e = pm.exprs[static_cast<size_t>(v.shape[k])];
      if (e.op == core::ExprOp::kDim && e.a == dim) out.insert(out.end(), {static_cast<int32_t>(i), static_cast<int32_t>(k)});
    }
  }
  return out;
}

// A probe export with the bucket dim dynamic over [smallest, largest] `sizes` finds the axes
// that carry it and the pads of each input; `input_names` gets the method's inputs.
Result<format::BucketDesc> probe_buckets(const ImportGraph& import, const ExportOptions& opts, const std::vector<int64_t>& sizes,
                                         std::vector<std::string>* input_names) {
  ExportOptions probe = without_bucket_dim(opts);
  probe.dims.push_back(dim_arg(opts.bucket_dim, sizes.front(), sizes.back()));
  probe.delegate = "none";
  probe.max_arena_bytes = probe.warn_arena_bytes = 0;  // each bucket is weighed, not the probe
  format::ProgramDesc scratch;
  KILN_TRY(export_method(import, probe, &scratch).status());
  const format::MethodDesc& pm = scratch.methods.back();
  int dim = -1;
  for (size_t d = 0; d < pm.dims.size(); ++d)
    if (pm.dims[d].name == opts.bucket_dim) dim = static_cast<int>(d);
  if (dim < 0) return invalid_argument("--bucket names dim '" + opts.bucket_dim + "', which no input axis uses");
  format::BucketDesc bucket;
  bucket.of = opts.method_name;
  bucket.dim = opts.bucket_dim;
  bucket.input_axes = axes_with_dim(pm, pm.inputs, dim);
  bucket.output_axes = axes_with_dim(pm, pm.outputs, dim);
  for (int32_t id : pm.inputs) {
    const std::string& name = pm.values[static_cast<size_t>(id)].name;
    input_names->push_back(name);
    auto it = opts.pads.find(name);
    bucket.pads.push_back(it == opts.pads.end() ? 0.0 : it->second);
  }
  for (const auto& pad : opts.pads)
    if (std::find(input_names->begin(), input_names->end(), pad.first) == input_names->end())
      return invalid_argument("--pad names '" + pad.first + "', which is not an input");
  return bucket;
}

// --bucket: the probe (probe_buckets), then one export per size with the dim pinned, each
// marked as a bucket.
Result<ExportReport> export_buckets(const ImportGraph& import, const ExportOptions& opts, format::ProgramDesc* program) {
  std::vector<int64_t> sizes = opts.bucket_sizes;
  std::sort(sizes.begin(), sizes.end());
  if (sizes.front() < 1 || std::adjacent_find(sizes.begin(), sizes.end()) != sizes.end())
    return invalid_argument("--bucket " + opts.bucket_dim + ": sizes must be positive and distinct");
  std::vector<std::string> inputs;
  KILN_ASSIGN_OR_RETURN(format::BucketDesc bucket, probe_buckets(import, opts, sizes, &inputs));
  ExportReport report;
  std::string written;
  for (int64_t size : sizes) {
    ExportOptions o = without_bucket_dim(opts);
    o.dims.push_back(dim_arg(opts.bucket_dim, size, size, 1, /*pinned=*/true));
    o.method_name = opts.method_name + "@" + opts.bucket_dim + "=" + std::to_string(size);
    KILN_ASSIGN_OR_RETURN(report, export_method(import, o, program));
    bucket.size = size;
    program->methods.back().bucket = bucket;
    written += (written.empty() ? "" : ", ") + o.method_name;
  }
  report.notes.push_back("buckets of '" + opts.method_name + "' over " + opts.bucket_dim + ": " + written +
                         " (the last one's summary above)");
  bool masked = false;
  for (std::string n : inputs) {
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    masked = masked || n.find("mask") != std::string::npos;
  }
  if (!masked)
    report.notes.push_back("warning: no input looks like a mask, so padded positions are not masked out: outputs at a "
                           "padded length may differ from the same input unpadded; compare with a static export");
  return report;
}

}  // namespace

Result<ExportReport> run_export(const ImportGraph& import, const ExportOptions& opts, format::ProgramDesc* program) {
  if (!opts.bucket_sizes.empty()) return export_buckets(import, opts, program);
  const Reexport reexport = [&](const ExportOptions& o) { return unlimited_arena(import, o); };
  return export_method(import, opts, program, reexport);
}

}  // namespace kiln::exporter
