#include "format/reader.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/symexpr.h"
#include "format/file_header.h"
#include "kernels/kernel.h"
#include "kiln/tensor.h"

namespace kiln::format {

namespace {

Status bad(const std::string& what) { return data_loss("damaged program: " + what); }

std::string where(const fb::Method* m, const char* kind, size_t i) {
  return "method '" + std::string(m->name()->c_str()) + "' " + kind + " #" + std::to_string(i);
}

template <typename T>
size_t len(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

Status check_method(const fb::Method* m, uint64_t constants_size) {
  if (!m->values() || !m->exprs() || !m->inputs() || !m->outputs() || !m->instructions())
    return bad("method '" + m->name()->str() + "' lacks a required table");
  const size_t n_dims = len(m->dims()), n_exprs = len(m->exprs()), n_values = len(m->values());
  for (size_t i = 0; i < n_dims; ++i) {
    const fb::Dim* d = m->dims()->Get(i);
    if (d->min() < 1 || d->min() > d->max() || d->step() < 1)
      return bad(where(m, "dim", i) + " ('" + d->name()->str() + "') has invalid range [" +
                 std::to_string(d->min()) + ", " + std::to_string(d->max()) + "] step " + std::to_string(d->step()));
  }
  for (size_t i = 0; i < n_exprs; ++i) {
    const fb::ExprNode* e = m->exprs()->Get(i);
    auto op = static_cast<int>(e->op());
    if (op < 0 || op > static_cast<int>(fb::ExprOp::Max)) return bad(where(m, "expression", i) + " has unknown op");
    if (e->op() == fb::ExprOp::Const) continue;
    if (e->op() == fb::ExprOp::Dim) {
      if (e->a() < 0 || static_cast<size_t>(e->a()) >= n_dims) return bad(where(m, "expression", i) + " names no dim");
      continue;
    }
    if (e->a() < 0 || static_cast<size_t>(e->a()) >= i || e->b() < 0 || static_cast<size_t>(e->b()) >= i)
      return bad(where(m, "expression", i) + " has operands out of order");
  }
  auto expr_ok = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n_exprs; };
  for (size_t i = 0; i < len(m->guards()); ++i) {
    const fb::Guard* g = m->guards()->Get(i);
    if (!expr_ok(g->lhs()) || !expr_ok(g->rhs()) || static_cast<int>(g->op()) > static_cast<int>(fb::GuardOp::Divisible))
      return bad(where(m, "guard", i) + " is malformed");
  }
  const fb::MemoryPlan* plan = m->plan();
  if (!plan) return bad("method '" + m->name()->str() + "' has no memory plan");
  uint64_t arena_end = 0;  // where the furthest planned slot ends
  for (size_t i = 0; i < n_values; ++i) {
    const fb::Value* v = m->values()->Get(i);
    if (!v->shape() || !v->name()) return bad(where(m, "value", i) + " lacks its name or shape");
    if (static_cast<int>(v->dtype()) > static_cast<int>(fb::DType::Bool)) return bad(where(m, "value", i) + " has unknown dtype");
    if (len(v->shape()) > static_cast<size_t>(kMaxRank)) return bad(where(m, "value", i) + " has rank above 8");
    for (size_t k = 0; k < len(v->shape()); ++k)
      if (!expr_ok(v->shape()->Get(k))) return bad(where(m, "value", i) + " shape names no expression");
    switch (v->storage()) {
      case fb::StorageKind::Constant: {
        uint64_t numel = 1;
        for (size_t k = 0; k < len(v->shape()); ++k) {
          const fb::ExprNode* e = m->exprs()->Get(v->shape()->Get(k));
          if (e->op() != fb::ExprOp::Const || e->value() < 0) return bad(where(m, "value", i) + " is a constant with a dynamic shape");
          numel *= static_cast<uint64_t>(e->value());
        }
        uint64_t need = numel * dtype_size(static_cast<DType>(v->dtype()));
        if (v->nbytes() != need || v->offset() > constants_size || constants_size - v->offset() < need)
          return bad(where(m, "value", i) + " lies outside the constant segment");
        if (v->offset() % kSegmentAlignment != 0)
          return bad(where(m, "value", i) + " is a constant at offset " + std::to_string(v->offset()) +
                     ", not 64-byte aligned");
        break;
      }
      case fb::StorageKind::Arena:
      case fb::StorageKind::Input:
      case fb::StorageKind::Output:
        if (v->offset() > plan->arena_bytes() || plan->arena_bytes() - v->offset() < v->nbytes())
          return bad(where(m, "value", i) + " lies outside the arena (offset " + std::to_string(v->offset()) + " + " +
                     std::to_string(v->nbytes()) + " > " + std::to_string(plan->arena_bytes()) + ")");
        if (v->offset() % kSegmentAlignment != 0)
          return bad(where(m, "value", i) + " has arena offset " + std::to_string(v->offset()) + ", not 64-byte aligned");
        arena_end = std::max(arena_end, v->offset() + v->nbytes());  // <= arena_bytes: no overflow
        break;
      case fb::StorageKind::Alias: {
        int32_t a = v->alias_of();
        if (a < 0 || static_cast<size_t>(a) >= n_values || m->values()->Get(a)->storage() == fb::StorageKind::Alias)
          return bad(where(m, "value", i) + " aliases an invalid value");
        break;
      }
      default: return bad(where(m, "value", i) + " has unknown storage");
    }
  }
  // The planner's arena ends at its furthest slot (sizes rounded up to the alignment); a
  // larger arena_bytes is damage, and the runtime would try to allocate it.
  if (plan->arena_bytes() > align_up(arena_end, kSegmentAlignment))
    return bad("method '" + m->name()->str() + "' plans an arena of " + std::to_string(plan->arena_bytes()) +
               " bytes but its slots end at byte " + std::to_string(arena_end));
  auto value_ok = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n_values; };
  std::vector<bool> dim_seen(n_dims, false);
  for (size_t i = 0; i < len(m->inputs()); ++i) {
    int32_t id = m->inputs()->Get(i);
    if (!value_ok(id) || m->values()->Get(id)->storage() != fb::StorageKind::Input)
      return bad(where(m, "input", i) + " is not an input value");
    const fb::Value* v = m->values()->Get(id);
    for (size_t k = 0; k < len(v->shape()); ++k) {
      const fb::ExprNode* e = m->exprs()->Get(v->shape()->Get(k));
      if (e->op() == fb::ExprOp::Dim) dim_seen[e->a()] = true;
      else if (e->op() != fb::ExprOp::Const) return bad(where(m, "input", i) + " has an axis that is neither static nor a dim");
    }
  }
  for (size_t d = 0; d < n_dims; ++d)
    if (!dim_seen[d]) return bad(where(m, "dim", d) + " appears on no input");
  for (size_t i = 0; i < len(m->outputs()); ++i)
    if (!value_ok(m->outputs()->Get(i))) return bad(where(m, "output", i) + " is out of range");
  for (size_t i = 0; i < len(m->instructions()); ++i) {
    const fb::Instruction* in = m->instructions()->Get(i);
    if (!in->inputs() || !in->outputs()) return bad(where(m, "instruction", i) + " lacks its operand lists");
    const kernels::OpDef* op = kernels::find_op(in->op()->c_str());
    if (!op || op->view) return bad(where(m, "instruction", i) + " uses unknown op '" + in->op()->str() + "'");
    if (in->scratch() != -1) {
      if (!value_ok(in->scratch()) || m->values()->Get(in->scratch())->storage() != fb::StorageKind::Arena ||
          m->values()->Get(in->scratch())->dtype() != fb::DType::Bool)
        return bad(where(m, "instruction", i) + " has an invalid scratch slot");
    }
    for (size_t k = 0; k < len(in->inputs()); ++k)
      if (in->inputs()->Get(k) != -1 && !value_ok(in->inputs()->Get(k)))
        return bad(where(m, "instruction", i) + " reads a value out of range");
    for (size_t k = 0; k < len(in->outputs()); ++k) {
      int32_t id = in->outputs()->Get(k);
      if (!value_ok(id)) return bad(where(m, "instruction", i) + " writes a value out of range");
      auto s = m->values()->Get(id)->storage();
      if (s != fb::StorageKind::Arena && s != fb::StorageKind::Output)
        return bad(where(m, "instruction", i) + " writes a value that is not planned in the arena");
    }
  }
  return ok_status();
}

}  // namespace

Result<ProgramFile> read_program(const uint8_t* data, size_t size) {
  if (!data || size < kHeaderSize) return data_loss("not a .kiln program: file is " + std::to_string(size) + " bytes, shorter than the 64-byte header");
  FileHeader h;
  std::memcpy(&h, data, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return data_loss("not a .kiln program: bad magic");
  if (h.format_version != kFormatVersion)
    return data_loss("unsupported .kiln format version " + std::to_string(h.format_version) + " (this runtime reads version " +
                     std::to_string(kFormatVersion) + "); re-export the model");
  if (h.program_offset < kHeaderSize || h.program_offset > size || size - h.program_offset < h.program_size)
    return data_loss("damaged program: the program section runs past the end of the file (truncated?)");
  if (h.constants_offset > size || size - h.constants_offset < h.constants_size)
    return data_loss("damaged program: the constant segment runs past the end of the file (truncated?)");
  if (h.constants_offset % kSegmentAlignment != 0) return bad("constant segment is not 64-byte aligned");
  const uint8_t* fbuf = data + h.program_offset;
  if (reinterpret_cast<uintptr_t>(fbuf) % 8 != 0) return invalid_argument("program buffer must be 8-byte aligned");
  flatbuffers::Verifier verifier(fbuf, h.program_size);
  if (!fb::ProgramBufferHasIdentifier(fbuf) || !fb::VerifyProgramBuffer(verifier))
    return bad("the FlatBuffers verifier rejected the program section");
  ProgramFile f;
  f.program = fb::GetProgram(fbuf);
  if (f.program->constant_bytes() != h.constants_size) return bad("constant segment size disagrees with the header");
  if (len(f.program->methods()) == 0) return bad("program has no methods");
  f.constants = data + h.constants_offset;
  f.constants_size = h.constants_size;
  for (size_t i = 0; i < f.program->methods()->size(); ++i) KILN_TRY(check_method(f.program->methods()->Get(i), h.constants_size));
  return f;
}

}  // namespace kiln::format
