#include "tooling/program_report.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

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

// ---- quantized values ------------------------------------------------------------------

// Which operands of a quantized instruction are quantized values, and where their scale and
// zero point are: {operand (>= 0 an input, -1 - k output k), scale input, zero point input}
// (-1: none; -2: computed at run time).
struct QSlot {
  int value, scale, zero;
};
std::vector<QSlot> quantized_slots(const std::string& op) {
  if (op == "QuantizeLinear") return {{-1, 1, 2}};
  if (op == "DequantizeLinear") return {{0, 1, 2}};
  if (op == "QLinearConv" || op == "QLinearMatMul") return {{0, 1, 2}, {3, 4, 5}, {-1, 6, 7}};
  if (op == "DynamicQuantizeLinear") return {{-1, -2, -2}};
  if (op == "MatMulInteger" || op == "ConvInteger") return {{0, -1, 2}, {1, -1, 3}};
  if (op == "PackedMatMulIntegerToFloat" || op == "PackedConvIntegerToFloat") return {{0, -2, 2}, {3, 6, 5}};
  return {};
}

// Value `id`'s constant bytes (through aliases), or null.
const uint8_t* constant_bytes(const fb::Method* m, const uint8_t* constants, int32_t id, uint64_t* nbytes) {
  for (int hops = 0; id >= 0 && hops < 8; ++hops) {
    const fb::Value* v = m->values()->Get(static_cast<flatbuffers::uoffset_t>(id));
    if (v->storage() == fb::StorageKind::Constant) {
      *nbytes = v->nbytes();
      return constants ? constants + v->offset() : nullptr;
    }
    if (v->storage() != fb::StorageKind::Alias) return nullptr;
    id = v->alias_of();
  }
  return nullptr;
}

std::string number(double x) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.6g", x);
  return b;
}

// "scale 0.0235" / "scale per channel: 32 values in [0.001, 0.02]" (what = "scale").
std::string values_text(const std::string& what, const std::vector<double>& v) {
  if (v.size() == 1) return what + " " + number(v[0]);
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  if (*lo == *hi) return what + " " + number(*lo) + " (each of " + std::to_string(v.size()) + " channels)";
  return what + " per channel: " + std::to_string(v.size()) + " values in [" + number(*lo) + ", " + number(*hi) + "]";
}

// The constant's values as doubles (f32, i8, u8, i32); empty when not a constant.
std::vector<double> constant_values(const fb::Method* m, const uint8_t* constants, int32_t id) {
  uint64_t nbytes = 0;
  const uint8_t* p = constant_bytes(m, constants, id, &nbytes);
  std::vector<double> out;
  if (!p) return out;
  const DType t = static_cast<DType>(m->values()->Get(static_cast<flatbuffers::uoffset_t>(id))->dtype());
  const size_t size = t == DType::kF32 || t == DType::kI32 ? 4 : t == DType::kI8 || t == DType::kU8 ? 1 : 0;
  for (uint64_t k = 0; size && k + size <= nbytes; k += size) {
    if (t == DType::kF32) {
      float f;
      std::memcpy(&f, p + k, 4);
      out.push_back(f);
    } else if (t == DType::kI32) {
      int32_t i;
      std::memcpy(&i, p + k, 4);
      out.push_back(i);
    } else {
      out.push_back(t == DType::kI8 ? static_cast<int8_t>(p[k]) : p[k]);
    }
  }
  return out;
}

std::vector<QuantizedValueReport> quantized_of(const fb::Method* m, const uint8_t* constants,
                                               const std::vector<core::ExprNode>& exprs,
                                               const std::vector<std::string>& names) {
  std::vector<QuantizedValueReport> out;
  std::set<int32_t> seen;
  for (const fb::Instruction* in : *m->instructions()) {
    const std::string op = in->op()->str();
    auto input = [&](int k) { return k >= 0 && static_cast<uint32_t>(k) < in->inputs()->size() ? in->inputs()->Get(k) : -1; };
    for (const QSlot& s : quantized_slots(op)) {
      const int32_t id = s.value >= 0 ? input(s.value)
                         : static_cast<uint32_t>(-1 - s.value) < in->outputs()->size() ? in->outputs()->Get(-1 - s.value)
                                                                                          : -1;
      if (id < 0 || !seen.insert(id).second) continue;
      const fb::Value* v = m->values()->Get(static_cast<flatbuffers::uoffset_t>(id));
      QuantizedValueReport r;
      r.name = v->name() ? v->name()->str() : "#" + std::to_string(id);
      std::string shape = "[";
      for (size_t k = 0; k < v->shape()->size(); ++k)
        shape += (k ? ", " : "") + core::format_expr(exprs.data(), exprs.size(), names, v->shape()->Get(k));
      r.type = std::string(dtype_name(static_cast<DType>(v->dtype()))) + " " + shape + "]";
      if (op.rfind("Packed", 0) == 0 && s.value == 3) r.type += " (weights packed for the int8 GEMM)";
      const std::vector<double> scale = s.scale >= 0 ? constant_values(m, constants, input(s.scale)) : std::vector<double>{};
      r.scale = s.scale == -1 ? "no scale (an integer result)"
                : scale.empty() ? "scale computed at run time"
                                : values_text("scale", scale);
      const std::vector<double> zero = s.zero >= 0 ? constant_values(m, constants, input(s.zero)) : std::vector<double>{};
      r.zero_point = s.zero == -2 || (s.zero >= 0 && input(s.zero) >= 0 && zero.empty()) ? "zero point computed at run time"
                     : zero.empty() ? "zero point 0"
                                    : values_text("zero point", zero);
      out.push_back(std::move(r));
    }
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
    r.quantized = quantized_of(m, static_cast<const uint8_t*>(ProgramAccess::constant_data(program)), exprs, names);
  }
  if (const fb::Delegate* d = m->delegate())
    if (d->declined())
      for (const fb::Declined* x : *d->declined())
        r.declined.emplace_back(static_cast<size_t>(x->instruction()), x->reason() ? x->reason()->str() : "");
  return r;
}

}  // namespace kiln::tooling
