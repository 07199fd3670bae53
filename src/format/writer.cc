#include <cstdio>
#include <cstring>

#include "core/crc32c.h"
#include "format/file_header.h"
#include "format/reader.h"
#include "format/program_desc.h"
#include "program_generated.h"

namespace kiln::format {

const char* storage_name(Storage s) {
  switch (s) {
    case Storage::kConstant: return "constant";
    case Storage::kArena: return "arena";
    case Storage::kInput: return "input";
    case Storage::kOutput: return "output";
    case Storage::kAlias: return "alias";
    case Storage::kDelegate: return "delegate";
  }
  return "unknown";
}

namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<fb::Attribute> write_attr(FlatBufferBuilder& b, const core::AttrStore::Owned& a) {
  auto name = b.CreateString(a.name);
  Offset<flatbuffers::Vector<int64_t>> ints;
  Offset<flatbuffers::Vector<float>> floats;
  Offset<flatbuffers::String> s;
  if (a.kind == core::AttrKind::kInts) ints = b.CreateVector(a.ints);
  if (a.kind == core::AttrKind::kFloats) floats = b.CreateVector(a.floats);
  if (a.kind == core::AttrKind::kString) s = b.CreateString(a.s);
  return fb::CreateAttribute(b, name, static_cast<fb::AttrKind>(a.kind), a.i, a.f, ints, floats, s);
}

Offset<flatbuffers::Vector<uint32_t>> placement_start(FlatBufferBuilder& b, const PlacementDesc& p) {
  return p.below_start.empty() ? 0 : b.CreateVector(p.below_start);
}
Offset<flatbuffers::Vector<int32_t>> placement_below(FlatBufferBuilder& b, const PlacementDesc& p) {
  return p.below_start.empty() ? 0 : b.CreateVector(p.below);
}

Offset<flatbuffers::Vector<int32_t>> placement_order(FlatBufferBuilder& b, const PlacementDesc& p) {
  return p.below_start.empty() ? 0 : b.CreateVector(p.order);
}

Offset<fb::Delegate> write_delegate(FlatBufferBuilder& b, const DelegateDesc& d) {
  if (d.backend.empty()) return 0;
  std::vector<Offset<fb::DelegateRegion>> regions;
  for (const DelegateRegionDesc& r : d.regions) {
    std::vector<Offset<fb::DelegateOp>> ops;
    for (const DelegateOpDesc& op : r.ops)
      ops.push_back(fb::CreateDelegateOp(b, static_cast<fb::DelegateOpKind>(op.kind), op.source, op.fused,
                                         b.CreateVector(op.inputs), b.CreateVector(op.outputs), op.gate,
                                         op.into, op.clamp));
    regions.push_back(fb::CreateDelegateRegion(b, r.first, r.count, b.CreateVector(ops)));
  }
  std::vector<Offset<fb::Declined>> declined;
  for (const DeclinedDesc& x : d.declined) declined.push_back(fb::CreateDeclined(b, x.instruction, b.CreateString(x.reason)));
  auto plan = fb::CreateMemoryPlan(b, d.arena_bytes, d.lower_bound_bytes, b.CreateString(d.plan_strategy),
                                   static_cast<uint32_t>(kSegmentAlignment), placement_start(b, d.placement),
                                   placement_below(b, d.placement), placement_order(b, d.placement));
  return fb::CreateDelegate(b, b.CreateString(d.backend), b.CreateVector(regions), plan, b.CreateVector(d.offsets),
                            b.CreateVector(declined), d.flops, d.delegated_flops, d.layout_changes,
                            d.integer_flops);
}

Offset<fb::Method> write_method(FlatBufferBuilder& b, const MethodDesc& m) {
  std::vector<Offset<fb::Dim>> dims;
  for (const DimSpec& d : m.dims) dims.push_back(fb::CreateDim(b, b.CreateString(d.name), d.min, d.max, d.step, d.data));
  std::vector<fb::ExprNode> exprs;
  for (const core::ExprNode& e : m.exprs) exprs.emplace_back(e.value, e.a, e.b, static_cast<fb::ExprOp>(e.op));
  std::vector<Offset<fb::Guard>> guards;
  for (const kernels::Guard& g : m.guards)
    guards.push_back(fb::CreateGuard(b, static_cast<fb::GuardOp>(g.op), g.lhs, g.rhs, b.CreateString(g.node_name),
                                     b.CreateString(g.op_type), b.CreateString(g.context)));
  std::vector<Offset<fb::Value>> values;
  for (const ValueDesc& v : m.values) {
    auto name = b.CreateString(v.name);
    auto shape = b.CreateVector(v.shape);
    auto example = v.example_shape.empty() ? 0 : b.CreateVector(v.example_shape);
    values.push_back(fb::CreateValue(b, name, static_cast<fb::DType>(v.dtype), shape,
                                     static_cast<fb::StorageKind>(v.storage), v.offset, v.nbytes, v.alias_of,
                                     example, v.nhwc_of));
  }
  std::vector<Offset<fb::Instruction>> instrs;
  for (const InstructionDesc& in : m.instructions) {
    std::vector<Offset<fb::Attribute>> attrs;
    for (const auto& a : in.attrs.items()) attrs.push_back(write_attr(b, a));
    instrs.push_back(fb::CreateInstruction(b, b.CreateString(in.op), b.CreateString(in.node_name),
                                           b.CreateVector(in.inputs), b.CreateVector(in.outputs),
                                           b.CreateVector(attrs), in.scratch,
                                           in.fused_from.empty() ? 0 : b.CreateVectorOfStrings(in.fused_from)));
  }
  auto plan = fb::CreateMemoryPlan(b, m.arena_bytes, m.lower_bound_bytes, b.CreateString(m.plan_strategy),
                                   static_cast<uint32_t>(kSegmentAlignment), placement_start(b, m.placement),
                                   placement_below(b, m.placement), placement_order(b, m.placement));
  Offset<fb::Bucket> bucket = 0;
  if (!m.bucket.of.empty())
    bucket = fb::CreateBucket(b, b.CreateString(m.bucket.of), b.CreateString(m.bucket.dim), m.bucket.size,
                              b.CreateVector(m.bucket.input_axes), b.CreateVector(m.bucket.pads),
                              b.CreateVector(m.bucket.output_axes));
  return fb::CreateMethod(b, b.CreateString(m.name), b.CreateVector(dims), b.CreateVectorOfStructs(exprs),
                          b.CreateVector(guards), b.CreateVector(values), b.CreateVector(m.inputs),
                          b.CreateVector(m.outputs), b.CreateVector(instrs), plan, write_delegate(b, m.delegate), bucket);
}

}  // namespace

Result<std::vector<uint8_t>> serialize_program(const ProgramDesc& desc) {
  FlatBufferBuilder b(1 << 16);
  std::vector<Offset<fb::Method>> methods;
  for (const MethodDesc& m : desc.methods) methods.push_back(write_method(b, m));
  auto root = fb::CreateProgram(b, kFormatVersion, b.CreateString(desc.producer), b.CreateVector(methods),
                                desc.constants.size());
  fb::FinishProgramBuffer(b, root);

  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.format_version = kFormatVersion;
  h.header_size = static_cast<uint32_t>(kHeaderSize);
  h.program_offset = kHeaderSize;
  h.program_size = b.GetSize();
  h.constants_offset = align_up(h.program_offset + h.program_size, kSegmentAlignment);
  h.constants_size = desc.constants.size();
  // Every string the file holds must be valid UTF-8 (the reader refuses others).
  KILN_TRY(check_strings(fb::GetProgram(b.GetBufferPointer())).with_prefix("export: "));

  std::vector<uint8_t> out(h.constants_offset + h.constants_size, 0);
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + h.program_offset, b.GetBufferPointer(), h.program_size);
  if (!desc.constants.empty()) std::memcpy(out.data() + h.constants_offset, desc.constants.data(), h.constants_size);
  seal_checksums(out.data(), out.size());
  return out;
}

void seal_checksums(uint8_t* file, size_t size) {
  FileHeader h;
  std::memcpy(&h, file, sizeof(h));
  auto crc_of = [&](uint64_t off, uint64_t n) -> uint32_t {
    if (off > size || size - off < n) return 0;
    return core::crc32c(file + off, n);
  };
  h.program_crc = crc_of(h.program_offset, h.program_size);
  h.constants_crc = crc_of(h.constants_offset, h.constants_size);
  h.header_crc = core::crc32c(&h, kHeaderCrcBytes);
  std::memcpy(file, &h, sizeof(h));
}

}  // namespace kiln::format
