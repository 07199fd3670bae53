#include "tooling/inspect.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "export/xnnpack_partition.h"
#include "kiln/bucketed.h"
#include "kiln/method.h"
#include "kiln/version.h"
#include "tooling/program_report.h"
#include "core/dim_text.h"

namespace kiln::tooling {

namespace {

std::string dim_range(const DimSpec& d) { return core::dim_range_text(d); }

// For each dim, the input axes that carry it ("'ids' dim 1").
std::vector<std::vector<std::string>> dim_uses(const MethodMeta& m) {
  std::vector<std::vector<std::string>> uses(m.dims.size());
  for (const TensorSpec& t : m.inputs)
    for (size_t k = 0; k < t.axes.size(); ++k)
      if (t.axes[k].dim >= 0) uses[t.axes[k].dim].push_back("'" + t.name + "' dim " + std::to_string(k));
  return uses;
}

std::map<std::string, int> op_counts(const MethodReport& r) {
  std::map<std::string, int> counts;
  for (const InstructionReport& i : r.instructions) ++counts[i.op];
  return counts;
}

double ratio(const MethodMeta& m) {
  return m.lower_bound_bytes ? static_cast<double>(m.arena_bytes) / static_cast<double>(m.lower_bound_bytes) : 1.0;
}

std::vector<std::pair<std::string, std::string>> declined_pairs(const MethodReport& r) {
  std::vector<std::pair<std::string, std::string>> d;
  for (const auto& [i, reason] : r.declined) d.emplace_back(i < r.instructions.size() ? r.instructions[i].op : "?", reason);
  return d;
}

// Bytes of packed weights when the delegate is created; -1 when it cannot be. The Method is
// created for the smallest shapes (max_shapes at every dim's minimum), so its arena is that
// of the minimum, not of the bound (which may be more than the machine has); at the bound
// only when the contract refuses those shapes.
int64_t packed_bytes(const Program& program, const MethodMeta& m) {
  if (m.delegate.regions == 0) return 0;
  MethodOptions smallest;
  for (const TensorSpec& t : m.inputs) {
    std::vector<int64_t> shape;
    for (const AxisSpec& a : t.axes) {
      if (a.dim < 0) {
        shape.push_back(a.size);
        continue;
      }
      const DimSpec& d = m.dims[static_cast<size_t>(a.dim)];
      shape.push_back((d.min + d.step - 1) / d.step * d.step);
    }
    smallest.max_shapes.push_back(std::move(shape));
  }
  auto method = Method::create(program, m.name, smallest);
  if (!method.ok()) method = Method::create(program, m.name, MethodOptions{});
  if (!method.ok() || !(*method)->delegated()) return -1;
  return static_cast<int64_t>((*method)->delegate_packed_bytes());
}

std::string delegate_text(const Program& program, const MethodMeta& m, const MethodReport& r) {
  const DelegateMeta& d = m.delegate;
  if (d.backend.empty()) return "  delegate: none (portable kernels only)\n";
  std::ostringstream o;
  o << "  delegate " << exporter::coverage_line(d.backend, d.delegated_instructions, m.num_instructions,
                                                d.delegated_flops, d.flops, d.regions, d.layout_changes)
    << "\n    arena " << d.arena_bytes << " bytes when delegated (lower bound " << d.lower_bound_bytes << ")";
  int64_t packed = packed_bytes(program, m);
  if (packed >= 0) o << ", packed weights " << packed << " bytes";
  else o << ", cannot initialize here (runs portable)";
  o << "\n";
  std::vector<std::string> declined = exporter::group_declined(declined_pairs(r));
  if (!declined.empty()) o << "  declined:\n";
  for (const std::string& x : declined) o << "    " << x << "\n";
  return o.str();
}


// The contract: dims, inputs, outputs, the equalities shared dims impose, guards.
void contract_text(const MethodMeta& m, std::ostringstream& o) {
  o << "  dims:" << (m.dims.empty() ? " none (fully static)" : "") << "\n";
  std::vector<std::vector<std::string>> uses = dim_uses(m);
  for (size_t d = 0; d < m.dims.size(); ++d) o << "    " << m.dims[d].name << " in " << dim_range(m.dims[d]) << "\n";
  o << "  inputs:\n";
  for (size_t k = 0; k < m.inputs.size(); ++k)
    o << "    #" << k << " '" << m.inputs[k].name << "' " << dtype_name(m.inputs[k].dtype) << " " << m.inputs[k].shape_text()
      << "\n";
  o << "  outputs:\n";
  for (size_t k = 0; k < m.outputs.size(); ++k)
    o << "    #" << k << " '" << m.outputs[k].name << "' " << dtype_name(m.outputs[k].dtype) << " "
      << m.outputs[k].shape_text() << "\n";
  bool any_eq = false;
  for (size_t d = 0; d < m.dims.size(); ++d) {
    if (uses[d].size() < 2) continue;
    if (!any_eq) o << "  equalities:\n";
    any_eq = true;
    o << "    " << m.dims[d].name << ":";
    for (size_t u = 0; u < uses[d].size(); ++u) o << (u ? " ==" : "") << " " << uses[d][u];
    o << "\n";
  }
  o << "  guards:" << (m.guards.empty() ? " none" : "") << "\n";
  for (const GuardSpec& g : m.guards)
    o << "    " << g.text << "  (node '" << g.node_name << "' (" << g.op_type << ")" << (g.context.empty() ? "" : " " + g.context)
      << ")\n";
}

// Runtime branches and loops.
void branches_text(const MethodReport& r, std::ostringstream& o) {
  const bool any_if = std::any_of(r.branches.begin(), r.branches.end(), [](const BranchReport& b) { return !b.loop; });
  if (any_if) o << "  runtime branches (the condition read at execute; a block's guards checked when it runs):\n";
  for (const BranchReport& b : r.branches) {
    if (b.loop) continue;
    size_t asserts = 0;
    for (size_t k = b.then_begin; k < b.else_end; ++k) asserts += r.instructions[k].op == "KilnAssert";
    auto block = [](size_t begin, size_t end) {
      if (begin == end) return std::string("empty");
      return "#" + std::to_string(begin) + (end - begin > 1 ? " to #" + std::to_string(end - 1) : std::string()) + " (" +
             std::to_string(end - begin) + " instruction" + (end - begin == 1 ? "" : "s") + ")";
    };
    o << "    node '" << b.node << "': then " << block(b.then_begin, b.then_end) << ", else " << block(b.else_begin, b.else_end)
      << "; " << asserts << " block guard" << (asserts == 1 ? "" : "s") << "\n";
  }
  for (const BranchReport& b : r.branches)
    if (b.loop)
      o << "  runtime loop node '" << b.node << "': body #" << b.then_begin << " to #" << b.then_end - 1 << " ("
        << b.then_end - b.then_begin << " instructions), at most " << b.trip << " iterations\n";
}

// Instructions by op, fusions, and (with `instructions`) every instruction.
void instructions_text(const MethodReport& r, std::ostringstream& o) {
  o << "  instructions: " << r.instructions.size();
  std::map<std::string, int> counts = op_counts(r);
  std::string sep = " (";
  for (const auto& [op, n] : counts) {
    o << sep << op << " " << n;
    sep = ", ";
  }
  o << (counts.empty() ? "" : ")") << "\n";
  branches_text(r, o);
  size_t fused = 0, from = 0;
  for (const InstructionReport& i : r.instructions) fused += !i.fused_from.empty(), from += i.fused_from.size();
  if (fused) o << "  fused: " << fused << " instruction(s) from " << from << " model nodes\n";
  for (size_t k = 0; k < r.instructions.size(); ++k) {
    const InstructionReport& in = r.instructions[k];
    if (in.fused_from.empty()) continue;
    o << "    #" << k << " " << in.op << " '" << in.node << "' <- " << in.fused_from.size() << " nodes:";
    for (size_t i = 0; i < in.fused_from.size(); ++i) o << (i ? ", " : " ") << in.fused_from[i];
    o << "\n";
  }
}

// Quantized models: the share of FLOPs in integer instructions and each quantized value's
// dtype, scale and zero point.
void quantized_text(const MethodMeta& m, const MethodReport& r, std::ostringstream& o) {
  if (r.quantized.empty()) return;
  if (m.delegate.flops > 0 && m.delegate.integer_flops > 0) {  // older files lack the count
    char share[32];
    std::snprintf(share, sizeof(share), "%.1f%%",
                  100.0 * static_cast<double>(m.delegate.integer_flops) / static_cast<double>(m.delegate.flops));
    o << "  int8: " << share << " of FLOPs at the bound in integer instructions\n";
  }
  o << "  quantized values: " << r.quantized.size() << "\n";
  for (const QuantizedValueReport& q : r.quantized)
    o << "    '" << q.name << "' " << q.type << ": " << q.scale << ", " << q.zero_point << "\n";
}

}  // namespace

std::string inspect_text(const Program& program, const std::string& path, bool instructions) {
  std::ostringstream o;
  o << "program " << path << ": " << program.num_methods() << " method(s), " << program.constant_bytes()
    << " constant bytes (the constant segment, 64-byte alignment included), .kiln format version " << program.format_version()
    << "\n";
  for (const BucketSpec& b : BucketedMethod::describe(program)) {
    o << "\nmethod '" << b.method << "': buckets over " << b.dim << ": ";
    for (size_t k = 0; k < b.sizes.size(); ++k) o << (k ? ", " : "") << b.sizes[k];
    o << " (called as one method: kiln_runner --method_name=" << b.method << ", Python program.methods['" << b.method << "'])\n"
      << "  dispatch: " << b.rule() << "; above " << b.sizes.back() << " refused\n  bucket methods:";
    for (const std::string& n : b.bucket_methods) o << " '" << n << "'";
    o << "\n";
  }
  for (size_t i = 0; i < program.num_methods(); ++i) {
    Result<MethodMeta> meta = program.method_meta(program.method_name(i));
    Result<MethodReport> report = method_report(program, program.method_name(i));
    if (!meta.ok() || !report.ok()) continue;
    const MethodMeta& m = *meta;
    const MethodReport& r = *report;
    o << "\nmethod '" << m.name << "'\n";
    contract_text(m, o);
    o << "  memory: arena " << m.arena_bytes << " bytes at the bound, lower bound " << m.lower_bound_bytes << " bytes ("
      << std::fixed;
    o.precision(3);
    o << ratio(m) << "x, " << r.plan_strategy << ")\n";
    o.unsetf(std::ios::floatfield);
    o << "  constants: " << m.constant_bytes << " bytes\n";
    instructions_text(r, o);
    quantized_text(m, r, o);
    o << delegate_text(program, m, r);
    if (instructions)
      for (size_t k = 0; k < r.instructions.size(); ++k)
        o << "    #" << k << " " << r.instructions[k].op << " '" << r.instructions[k].node << "' -> "
          << r.instructions[k].outputs << "\n";
  }
  return o.str();
}

std::string version_text(const std::string& tool) {
  return tool + " " + version() + " (.kiln format version " + std::to_string(format_version()) + ")";
}

namespace {

nlohmann::json tensor_json(const TensorSpec& t, const MethodMeta& m) {
  using nlohmann::json;
  json a = json::array();
  for (const AxisSpec& ax : t.axes) {
    if (ax.size >= 0) {
      a.push_back(ax.size);
    } else if (ax.dim >= 0) {
      const DimSpec& d = m.dims[ax.dim];
      a.push_back(json{{"dim", d.name}, {"min", d.min}, {"max", d.max}, {"step", d.step}});
    } else {
      a.push_back(json{{"expr", ax.text}});
    }
  }
  json o{{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", a}, {"shape_text", t.shape_text()}};
  if (!t.example_shape.empty()) o["example_shape"] = t.example_shape;
  return o;
}

nlohmann::json delegate_json(const Program& program, const MethodMeta& m, const MethodReport& r) {
  using nlohmann::json;
  if (m.delegate.backend.empty()) return nullptr;
  const DelegateMeta& d = m.delegate;
  json declined = json::array();
  for (const auto& [k, reason] : r.declined)
    declined.push_back(json{{"instruction", k}, {"op", k < r.instructions.size() ? r.instructions[k].op : "?"},
                            {"node", k < r.instructions.size() ? r.instructions[k].node : "?"}, {"reason", reason}});
  return json{{"backend", d.backend},
              {"regions", d.regions},
              {"delegated_instructions", d.delegated_instructions},
              {"instructions", m.num_instructions},
              {"flops", d.flops},
              {"delegated_flops", d.delegated_flops},
              {"flop_coverage", d.flops ? static_cast<double>(d.delegated_flops) / static_cast<double>(d.flops) : 0.0},
              {"layout_changes", d.layout_changes},
              {"integer_flops", d.integer_flops},
              {"arena_bytes", d.arena_bytes},
              {"lower_bound_bytes", d.lower_bound_bytes},
              {"packed_bytes", packed_bytes(program, m)},
              {"declined", declined}};
}

void report_json(const MethodReport& r, nlohmann::json* jm) {
  using nlohmann::json;
  (*jm)["plan_strategy"] = r.plan_strategy;
  (*jm)["instructions_by_op"] = op_counts(r);
  (*jm)["branches"] = json::array();
  for (const BranchReport& b : r.branches)
    if (b.loop)
      (*jm)["branches"].push_back(json{{"node", b.node}, {"loop", true}, {"body", {b.then_begin, b.then_end}}, {"trip", b.trip}});
    else
      (*jm)["branches"].push_back(
          json{{"node", b.node}, {"then", {b.then_begin, b.then_end}}, {"else", {b.else_begin, b.else_end}}});
  (*jm)["quantized_values"] = json::array();
  for (const QuantizedValueReport& q : r.quantized)
    (*jm)["quantized_values"].push_back(
        json{{"name", q.name}, {"type", q.type}, {"scale", q.scale}, {"zero_point", q.zero_point}});
  (*jm)["instructions"] = json::array();
  for (const InstructionReport& in : r.instructions)
    (*jm)["instructions"].push_back(
        json{{"op", in.op}, {"node", in.node}, {"outputs", in.outputs}, {"fused_from", in.fused_from}});
}

}  // namespace

nlohmann::json inspect_json(const Program& program, const std::string& path) {
  using nlohmann::json;
  json j;
  j["path"] = path;
  j["constant_bytes"] = program.constant_bytes();
  j["format_version"] = program.format_version();
  j["bucketed_methods"] = json::array();
  for (const BucketSpec& b : BucketedMethod::describe(program)) {
    json axes_in = json::array(), axes_out = json::array();
    for (const BucketSpec::Axis& a : b.inputs) axes_in.push_back(json{{"input", a.tensor}, {"axis", a.axis}, {"pad", a.pad}});
    for (const BucketSpec::Axis& a : b.outputs) axes_out.push_back(json{{"output", a.tensor}, {"axis", a.axis}});
    j["bucketed_methods"].push_back(json{{"name", b.method}, {"dim", b.dim}, {"sizes", b.sizes}, {"bucket_methods", b.bucket_methods},
                                         {"padded_inputs", axes_in}, {"cut_outputs", axes_out}, {"dispatch", b.rule()}});
  }
  j["methods"] = json::array();
  for (size_t i = 0; i < program.num_methods(); ++i) {
    Result<MethodMeta> meta = program.method_meta(program.method_name(i));
    Result<MethodReport> report = method_report(program, program.method_name(i));
    if (!meta.ok() || !report.ok()) continue;
    const MethodMeta& m = *meta;
    json jm;
    jm["name"] = m.name;
    jm["dims"] = json::array();
    std::vector<std::vector<std::string>> uses = dim_uses(m);
    for (size_t d = 0; d < m.dims.size(); ++d)
      jm["dims"].push_back(json{{"name", m.dims[d].name}, {"min", m.dims[d].min}, {"max", m.dims[d].max},
                                {"step", m.dims[d].step}, {"used_by", uses[d]}});
    jm["inputs"] = json::array();
    for (const TensorSpec& t : m.inputs) jm["inputs"].push_back(tensor_json(t, m));
    jm["outputs"] = json::array();
    for (const TensorSpec& t : m.outputs) jm["outputs"].push_back(tensor_json(t, m));
    jm["guards"] = json::array();
    for (const GuardSpec& g : m.guards)
      jm["guards"].push_back(json{{"text", g.text}, {"node", g.node_name}, {"op", g.op_type}, {"context", g.context}});
    jm["arena_bytes"] = m.arena_bytes;
    jm["lower_bound_bytes"] = m.lower_bound_bytes;
    jm["arena_over_lower_bound"] = ratio(m);
    jm["constant_bytes"] = m.constant_bytes;
    jm["num_instructions"] = m.num_instructions;
    report_json(*report, &jm);
    jm["delegate"] = delegate_json(program, m, *report);
    j["methods"].push_back(jm);
  }
  return j;
}

Result<std::string> check_shapes(const Program& program, const std::string& method,
                                 const std::vector<std::vector<int64_t>>& shapes) {
  if (!program.method_meta(method).ok() && BucketedMethod::has_buckets(program, method)) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<BucketedMethod> b, BucketedMethod::create(program, method));
    KILN_TRY(b->bind_shapes(shapes));
    const BucketSpec& spec = b->spec();
    const size_t k = *b->select(shapes);
    const BucketSpec::Axis& a = spec.inputs.front();
    const int64_t actual = shapes[static_cast<size_t>(a.index)][static_cast<size_t>(a.axis)];
    return "bucket '" + spec.bucket_methods[k] + "' runs (" + spec.dim + " " + std::to_string(actual) +
           (actual == spec.sizes[k] ? "" : " padded to " + std::to_string(spec.sizes[k])) + ")";
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Method> m, Method::create(program, method));
  KILN_TRY(m->bind_shapes(shapes));
  return std::string();
}

size_t num_inputs(const Program& program, const std::string& method) {
  if (auto meta = program.method_meta(method); meta.ok()) return meta->inputs.size();
  for (const BucketSpec& b : BucketedMethod::describe(program))
    if (b.method == method)
      if (auto meta = program.method_meta(b.bucket_methods.front()); meta.ok()) return meta->inputs.size();
  return 0;
}

}  // namespace kiln::tooling
