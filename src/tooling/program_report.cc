#include "tooling/program_report.h"

#include "core/symexpr.h"
#include "format/reader.h"
#include "runtime/program_impl.h"
#include "core/status.h"

namespace kiln::tooling {
namespace {

// "f32 [batch, 1280], i64 [batch]"
std::string outputs_text(const fb::Method* m, const fb::Instruction* in, const std::vector<core::ExprNode>& exprs,
                         const std::vector<std::string>& names) {
  std::string outs;
  for (int32_t id : *in->outputs()) {
    const fb::Value* v = m->values()->Get(id);
    std::string shape = "[";
    for (size_t k = 0; k < v->shape()->size(); ++k)
      shape += (k ? ", " : "") + core::format_expr(exprs.data(), exprs.size(), names, v->shape()->Get(k));
    outs += (outs.empty() ? "" : ", ") + std::string(dtype_name(static_cast<DType>(v->dtype()))) + " " + shape + "]";
  }
  return outs;
}

std::vector<BranchReport> branches_of(const fb::Method* m, const std::vector<InstructionReport>& instructions,
                                      const std::vector<core::ExprNode>& exprs, const std::vector<std::string>& names) {
  std::vector<BranchReport> out;
  Result<std::vector<format::Branch>> branches = format::method_branches(m);  // checked at load
  if (!branches.ok()) return out;
  for (const format::Branch& b : *branches) {
    BranchReport r{instructions[static_cast<size_t>(b.if_at)].node, static_cast<size_t>(b.if_at) + 1,
                   static_cast<size_t>(b.else_at), static_cast<size_t>(b.else_at) + 1, static_cast<size_t>(b.end),
                   b.loop, ""};
    const fb::Instruction* li = m->instructions()->Get(static_cast<flatbuffers::uoffset_t>(b.if_at));
    if (b.loop && li->attrs())
      for (const fb::Attribute* a : *li->attrs())
        if (a->kind() == fb::AttrKind::Int && a->name()->str() == "trip" && a->i() >= 0 &&
            static_cast<size_t>(a->i()) < exprs.size())
          r.trip = core::format_expr(exprs.data(), exprs.size(), names, static_cast<int32_t>(a->i()));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Result<MethodReport> method_report(const Program& program, const std::string& name) {
  const ProgramAccess::Impl& p = ProgramAccess::impl(program);
  const fb::Method* m = p.find_method(name);
  if (!m) return not_found("no method '" + name + "' in the program; it has " + p.method_names());
  const std::vector<core::ExprNode> exprs = runtime::load_exprs(m);
  const std::vector<std::string> names = runtime::load_dim_names(m);
  MethodReport r;
  r.plan_strategy = m->plan()->strategy() ? m->plan()->strategy()->str() : "";
  r.num_values = m->values() ? m->values()->size() : 0;
  if (m->instructions()) {
    for (const fb::Instruction* in : *m->instructions()) {
      InstructionReport i;
      i.op = in->op()->str();
      i.node = in->node_name() ? in->node_name()->str() : "";
      if (in->fused_from())
        for (const flatbuffers::String* s : *in->fused_from()) i.fused_from.push_back(s ? s->str() : "");
      i.outputs = outputs_text(m, in, exprs, names);
      r.instructions.push_back(std::move(i));
    }
    r.branches = branches_of(m, r.instructions, exprs, names);
  }
  if (const fb::Delegate* d = m->delegate())
    if (d->declined())
      for (const fb::Declined* x : *d->declined())
        r.declined.emplace_back(static_cast<size_t>(x->instruction()), x->reason() ? x->reason()->str() : "");
  return r;
}

}  // namespace kiln::tooling
