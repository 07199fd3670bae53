// The .kiln format: round trip through the writer and reader, and damaged files rejected
// with an error (never a crash).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "export/graph.h"
#include "core/crc32c.h"
#include "format/file_header.h"
#include "kiln/method.h"
#include "runtime/program_impl.h"
#include "kiln/program.h"
#include "tooling/examples.h"
#include "scratch_dir.h"
#include "aligned_bytes.h"
#include "tooling/program_report.h"
#include "core/status.h"

namespace kiln {
namespace {

format::ProgramDesc small_desc() {
  exporter::GraphBuilder g("main");
  EXPECT_TRUE(g.add_dim("n", 1, 16, 1).ok());
  int x = *g.add_input("x", DType::kF32, {"n", 3});
  int w = *g.add_constant<float>("w", DType::kF32, {3}, {1.f, 2.f, 3.f});
  int y = *g.add("Mul", "mul", {x, w});
  int z = *g.add("Add", "add", {y, x});
  EXPECT_TRUE(g.mark_output(z, "out").ok());
  format::ProgramDesc d;
  EXPECT_TRUE(g.emit(&d).ok());
  return d;
}

std::vector<uint8_t> small_program() { return *format::serialize_program(small_desc()); }

size_t value_named(const format::MethodDesc& m, const std::string& name) {
  for (size_t i = 0; i < m.values.size(); ++i)
    if (m.values[i].name == name) return i;
  ADD_FAILURE() << "no value '" << name << "'";
  return 0;
}

size_t instruction_of(const format::MethodDesc& m, const std::string& op) {
  for (size_t i = 0; i < m.instructions.size(); ++i)
    if (m.instructions[i].op == op) return i;
  ADD_FAILURE() << "no " << op << " instruction";
  return 0;
}

// Damaged on purpose, then sealed with valid checksums (as a buggy writer would), so the
// structural checks behind the checksums are exercised too.
void reseal(std::vector<uint8_t>* bytes) { format::seal_checksums(bytes->data(), bytes->size()); }

format::FileHeader header_of(const std::vector<uint8_t>& bytes) {
  format::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h;
}

// Loads, and if that works, binds and runs at a few shapes; must never crash.
Status load_and_run(const std::vector<uint8_t>& bytes) {
  testing::AlignedBytes a(bytes);
  auto p = a.load();
  if (!p.ok()) return p.status();
  for (size_t i = 0; i < (*p)->num_methods(); ++i) {
    auto m = Method::create(**p, (*p)->method_name(i));
    if (!m.ok()) return m.status();
    for (const auto& shapes : {(*m)->bound_shapes()}) {
      Status s = (*m)->bind_shapes(shapes);
      if (!s.ok()) return s;
      KILN_TRY((*m)->execute());
    }
  }
  return ok_status();
}

TEST(Format, RoundTripKeepsTheContract) {
  std::vector<uint8_t> bytes = small_program();
  std::string path = ::kiln::testing::scratch_dir() + "/round_trip.kiln";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  auto p = Program::load(path);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ((*p)->num_methods(), 1u);
  EXPECT_EQ((*p)->method_name(0), "main");
  auto meta = (*p)->method_meta("main");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->inputs[0].name, "x");
  EXPECT_EQ(meta->inputs[0].shape_text(), "[n, 3]");
  EXPECT_EQ(meta->dims[0].name, "n");
  EXPECT_EQ(meta->dims[0].max, 16);
  EXPECT_EQ(meta->outputs[0].shape_text(), "[n, 3]");
  EXPECT_EQ(meta->constant_bytes, 12u);
  EXPECT_EQ((*p)->constant_bytes(), 12u);
  EXPECT_EQ(meta->num_instructions, 2u);
  auto report = tooling::method_report(**p, "main");
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->instructions.size(), 2u);
  EXPECT_EQ(report->instructions[0].op, "Mul");
  EXPECT_EQ(report->instructions[1].op, "Add");
  // The constant segment starts 64-byte aligned in the mapping.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ProgramAccess::constant_data(**p)) % 64, 0u);
  auto m = Method::create(**p, "main");
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->bind_shapes({{2, 3}}).ok());
  for (int i = 0; i < 6; ++i) (*m)->input_data<float>(0)[i] = 1.f;
  ASSERT_TRUE((*m)->execute().ok());
  EXPECT_EQ((*m)->output(0).as<float>()[2], 4.f);
}

TEST(Format, MissingAndEmptyFiles) {
  auto p = Program::load("/nonexistent/model.kiln");
  EXPECT_EQ(p.status().code(), Code::kIoError);
  EXPECT_NE(p.status().message().find("cannot open program '/nonexistent/model.kiln'"), std::string::npos);
  std::string path = ::kiln::testing::scratch_dir() + "/empty.kiln";
  std::fclose(std::fopen(path.c_str(), "wb"));
  EXPECT_EQ(Program::load(path).status().code(), Code::kDataLoss);
  // A directory is named as one (it used to read "No such device").
  auto d = Program::load(::kiln::testing::scratch_dir());
  EXPECT_NE(d.status().message().find("it is a directory, not a .kiln program file"), std::string::npos) << d.status().message();
}

TEST(Format, StringsMustBeValidUtf8) {
  // The writer refuses a name that is not UTF-8 (an ONNX input named so used to export fine,
  // then abort `kiln inspect --json`).
  format::ProgramDesc d = small_desc();
  d.methods[0].values[value_named(d.methods[0], "out")].name = "o\xFFut";
  auto bytes = format::serialize_program(d);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("name is not valid UTF-8 (byte 1)"), std::string::npos) << bytes.status().message();
  // A file whose string bytes were changed behind valid checksums is refused at load.
  std::vector<uint8_t> good = small_program();
  const format::FileHeader h = header_of(good);
  auto at = std::search(good.begin() + static_cast<long>(h.program_offset), good.end(), std::begin("out") , std::end("out") - 1);
  ASSERT_NE(at, good.end());
  *(at + 1) = 0xFF;
  reseal(&good);
  const std::string msg = load_and_run(good).message();
  EXPECT_NE(msg.find("is not valid UTF-8 (byte 1)"), std::string::npos) << msg;
}

// A string whose length field was changed (behind valid checksums) must not show the bytes
// after it as part of the name: the load fails, or every name reads as written.
TEST(Format, AChangedStringLengthNeverShowsNeighbouringBytes) {
  const std::vector<uint8_t> good = small_program();
  const format::FileHeader h = header_of(good);
  auto at = std::search(good.begin() + static_cast<long>(h.program_offset), good.end(), std::begin("out"), std::end("out") - 1);
  ASSERT_NE(at, good.end());
  const size_t len_at = static_cast<size_t>(at - good.begin()) - 4;  // FlatBuffers: uint32 length, bytes, NUL
  uint32_t len;
  std::memcpy(&len, good.data() + len_at, 4);
  ASSERT_EQ(len, 3u);
  int refused = 0;
  for (uint32_t changed : {0u, 1u, 2u, 4u, 5u, 6u, 7u, 8u, 12u, 16u, 100u}) {
    std::vector<uint8_t> bytes = good;
    std::memcpy(bytes.data() + len_at, &changed, 4);
    reseal(&bytes);
    testing::AlignedBytes a(bytes);
    auto p = a.load();
    if (!p.ok()) {
      ++refused;
      continue;
    }
    auto meta = (*p)->method_meta("forward");
    ASSERT_TRUE(meta.ok());
    for (const TensorSpec& t : meta->outputs)
      EXPECT_TRUE(t.name == "out" || t.name.size() < 3) << "length " << changed << " read the name as '" << t.name << "'";
  }
  EXPECT_GE(refused, 8);
}

TEST(Format, EveryTruncationIsRejected) {
  std::vector<uint8_t> bytes = small_program();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    Status s = load_and_run(cut);
    ASSERT_FALSE(s.ok()) << "truncated to " << n << " bytes was accepted";
    ASSERT_EQ(s.code(), Code::kDataLoss) << s.message();
  }
}

TEST(Format, BadMagicAndVersion) {
  std::vector<uint8_t> bytes = small_program();
  bytes[0] = 'X';
  EXPECT_NE(load_and_run(bytes).message().find("bad magic"), std::string::npos);
  bytes = small_program();
  uint32_t v = 99;
  std::memcpy(bytes.data() + 8, &v, 4);
  reseal(&bytes);  // a real file of a newer Kiln carries its own valid checksums
  EXPECT_NE(load_and_run(bytes).message().find("written by a newer Kiln: .kiln format version 99, this runtime reads version 2"),
            std::string::npos) << load_and_run(bytes).message();
  v = 1;  // a file from before checksums
  std::memcpy(bytes.data() + 8, &v, 4);
  EXPECT_NE(load_and_run(bytes).message().find(".kiln format version 1 (written before checksums); re-export"), std::string::npos)
      << load_and_run(bytes).message();
}

TEST(Format, EveryChangedByteIsCaughtByAChecksum) {
  const std::vector<uint8_t> good = small_program();
  const format::FileHeader h = header_of(good);
  for (size_t pos = 0; pos < good.size(); ++pos) {
    if (pos >= h.program_offset + h.program_size && pos < h.constants_offset) continue;  // alignment padding
    std::vector<uint8_t> bytes = good;
    bytes[pos] ^= 0x10;
    const std::string msg = load_and_run(bytes).message();
    const bool caught = msg.find("checksum does not match") != std::string::npos || msg.find("bad magic") != std::string::npos;
    ASSERT_TRUE(caught) << "byte " << pos << ": " << msg;
  }
}

TEST(Format, ConstantsCheckedAtLoadOrLater) {
  std::vector<uint8_t> bytes = small_program();
  bytes[header_of(bytes).constants_offset] ^= 1;  // a weight changed on disk
  testing::AlignedBytes a(bytes);
  auto full = a.load();
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("the constant segment's checksum does not match"), std::string::npos);
  LoadOptions lazy;
  lazy.verify_constants = false;
  auto p = Program::load_buffer(a.data(), a.size(), lazy);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_NE((*p)->verify_constants().message().find("checksum does not match"), std::string::npos);
  auto q = Program::load_buffer(a.data(), a.size());
  EXPECT_FALSE(q.ok());
}

TEST(Format, SegmentsMustNotOverlapAndHeaderSizeIsChecked) {
  std::vector<uint8_t> bytes = small_program();
  format::FileHeader h = header_of(bytes);
  h.constants_offset = 0;  // the weights read from the header: NaN outputs before this check
  std::memcpy(bytes.data(), &h, sizeof(h));
  reseal(&bytes);
  EXPECT_NE(load_and_run(bytes).message().find("the constant segment overlaps the header or the program section"),
            std::string::npos) << load_and_run(bytes).message();
  bytes = small_program();
  h = header_of(bytes);
  h.constants_offset = h.program_offset;  // over the program
  std::memcpy(bytes.data(), &h, sizeof(h));
  reseal(&bytes);
  EXPECT_NE(load_and_run(bytes).message().find("overlaps"), std::string::npos);
  bytes = small_program();
  h = header_of(bytes);
  h.header_size = 48;
  std::memcpy(bytes.data(), &h, sizeof(h));
  reseal(&bytes);
  EXPECT_NE(load_and_run(bytes).message().find("header_size is 48, expected 64"), std::string::npos);
}

TEST(Format, RandomCorruptionNeverCrashes) {
  std::vector<uint8_t> good = small_program();
  std::mt19937 rng(42);
  int rejected = 0;
  for (int it = 0; it < 3000; ++it) {
    std::vector<uint8_t> bytes = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    if (it % 2) reseal(&bytes);  // half behind valid checksums: the structural checks must hold alone
    Status s = load_and_run(bytes);  // must return, ok or not
    if (!s.ok()) ++rejected;
  }
  EXPECT_GT(rejected, 0);
}

TEST(Format, RandomCorruptionOfTheCnnNeverCrashes) {
  // Regression: before the reader re-ran every instruction's shape function, flipped bytes
  // in attributes and operand lists reached the kernels (MaxPool read a missing
  // kernel_shape through a null pointer, Gemm read past its weights) and arena offsets
  // reached them unaligned.
  std::vector<uint8_t> good = *format::serialize_program(tooling::make_cnn_example()->program);
  uint64_t program_size;
  std::memcpy(&program_size, good.data() + 24, 8);
  std::mt19937 rng(7);
  int rejected = 0;
  for (int it = 0; it < 3000; ++it) {
    std::vector<uint8_t> bytes = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      size_t pos = rng() % (format::kHeaderSize + program_size);  // the header and the FlatBuffer
      switch (rng() % 3) {
        case 0: bytes[pos] = static_cast<uint8_t>(rng()); break;
        case 1: bytes[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        default: bytes[pos] = rng() % 2 ? 0xff : 0; break;
      }
    }
    reseal(&bytes);  // behind valid checksums: the structural checks must hold alone
    if (!load_and_run(bytes).ok()) ++rejected;
  }
  EXPECT_GT(rejected, 0);
}

TEST(Format, PlanMustMatchItsSlots) {
  // Regression: an inflated arena_bytes (one flipped byte asked for 12 TB) went to the
  // allocator, and a slot at an unaligned offset handed kernels misaligned floats.
  format::ProgramDesc d = small_desc();
  d.methods[0].arena_bytes += uint64_t{1} << 40;
  EXPECT_NE(load_and_run(*format::serialize_program(d)).message().find("plans an arena of"), std::string::npos);
  d = small_desc();  // a slot moved far up (a flipped offset byte) asks for more than the slots take
  d.methods[0].values[value_named(d.methods[0], "out")].offset = uint64_t{1} << 30;
  d.methods[0].arena_bytes = (uint64_t{1} << 30) + 192;  // where "out" (192 bytes) ends
  Status s = load_and_run(*format::serialize_program(d));
  EXPECT_NE(s.message().find("more than its slots take side by side"), std::string::npos) << s.message();
  d = small_desc();
  d.methods[0].values[value_named(d.methods[0], "out")].offset += 4;
  d.methods[0].arena_bytes += 64;
  EXPECT_NE(load_and_run(*format::serialize_program(d)).message().find("not 64-byte aligned"), std::string::npos);
  // Regression: slots alive together could share bytes (Concat then memcpy'd onto its input).
  d = small_desc();
  format::MethodDesc& m = d.methods[0];
  m.values[value_named(m, "out")].offset = m.values[value_named(m, "mul")].offset;
  m.arena_bytes = 0;  // still as tight as the planner makes it
  for (const format::ValueDesc& v : m.values)
    if (v.storage != format::Storage::kConstant && v.storage != format::Storage::kAlias)
      m.arena_bytes = std::max(m.arena_bytes, v.offset + (v.nbytes + 63) / 64 * 64);
  s = load_and_run(*format::serialize_program(d));
  EXPECT_NE(s.message().find("share arena bytes while both are alive"), std::string::npos) << s.message();
}

TEST(Format, ShapesMustFitTheirSlots) {
  // Regression: a size raised to 2^62 in the expression table overflowed numel at bind.
  format::ProgramDesc d = small_desc();
  format::MethodDesc& m = d.methods[0];
  for (core::ExprNode& e : m.exprs)
    if (e.op == core::ExprOp::kConst && e.value == 3) e.value = int64_t{1} << 62;
  Status s = load_and_run(*format::serialize_program(d));
  EXPECT_NE(s.message().find("('x') may need over 1 TiB within its dims' ranges but reserves 192"), std::string::npos)
      << s.message();
  d = small_desc();
  d.methods[0].values[value_named(d.methods[0], "x")].nbytes = 64;
  s = load_and_run(*format::serialize_program(d));
  EXPECT_NE(s.message().find("('x') may need 192 bytes within its dims' ranges but reserves 64"), std::string::npos)
      << s.message();
}

TEST(Format, InstructionsMustAgreeWithTheirOps) {
  // Regression: kernels trusted what the reader never checked against the op.
  format::ProgramDesc d = tooling::make_cnn_example()->program;
  d.methods[0].instructions[instruction_of(d.methods[0], "MaxPool")].attrs = core::AttrStore();
  Status s = load_and_run(*format::serialize_program(d));
  EXPECT_NE(s.message().find("(MaxPool) breaks its op's contract: "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("attribute 'kernel_shape' is required"), std::string::npos) << s.message();

  d = small_desc();
  d.methods[0].values[value_named(d.methods[0], "mul")].dtype = DType::kI32;
  s = load_and_run(*format::serialize_program(d));
  EXPECT_NE(s.message().find("instruction #0 (Mul) output #0 is recorded as i32 [n, 3] but its op gives f32 [n, 3]"),
            std::string::npos)
      << s.message();

  // A guard the op needs must be in the program.
  exporter::GraphBuilder g("main");
  ASSERT_TRUE(g.add_dim("a", 1, 8, 1).ok());
  ASSERT_TRUE(g.add_dim("b", 1, 8, 1).ok());
  int x = *g.add_input("x", DType::kF32, {"a"});
  int y = *g.add_input("y", DType::kF32, {"b"});
  ASSERT_TRUE(g.mark_output(*g.add("Add", "add", {x, y}), "z").ok());
  format::ProgramDesc with_guard;
  ASSERT_TRUE(g.emit(&with_guard).ok());
  ASSERT_EQ(with_guard.methods[0].guards.size(), 1u);
  EXPECT_TRUE(load_and_run(*format::serialize_program(with_guard)).ok());
  with_guard.methods[0].guards.clear();
  s = load_and_run(*format::serialize_program(with_guard));
  EXPECT_NE(s.message().find("instruction #0 (Add) lacks the guard its op needs"), std::string::npos) << s.message();
}

TEST(Format, SemanticPassCatchesOutOfRangeIndices) {
  // A program whose instruction reads value 99: the verifier accepts it, the semantic pass not.
  format::ProgramDesc d;
  format::MethodDesc m;
  m.exprs.push_back(core::ExprNode{core::ExprOp::kConst, -1, -1, 4});
  format::ValueDesc in;
  in.name = "x";
  in.shape = {0};
  in.storage = format::Storage::kInput;
  in.nbytes = 16;
  m.values.push_back(in);
  format::ValueDesc out = in;
  out.name = "y";
  out.storage = format::Storage::kOutput;
  out.offset = 64;
  m.values.push_back(out);
  m.inputs = {0};
  m.outputs = {1};
  format::InstructionDesc ins;
  ins.op = "Relu";
  ins.inputs = {99};
  ins.outputs = {1};
  m.instructions.push_back(ins);
  m.arena_bytes = 128;
  d.methods.push_back(m);
  Status s = load_and_run(*format::serialize_program(d));
  EXPECT_EQ(s.message(), "damaged program: method 'forward' instruction #0 reads a value out of range");
  d.methods[0].instructions[0].inputs = {0};
  d.methods[0].instructions[0].op = "NoSuchOp";
  s = load_and_run(*format::serialize_program(d));
  EXPECT_EQ(s.message(), "damaged program: method 'forward' instruction #0 uses unknown op 'NoSuchOp'");
  d.methods[0].instructions[0].op = "Relu";
  d.methods[0].values[1].offset = 120;
  s = load_and_run(*format::serialize_program(d));
  EXPECT_NE(s.message().find("lies outside the arena"), std::string::npos) << s.message();
  d.methods[0].values[1].offset = 64;
  EXPECT_TRUE(load_and_run(*format::serialize_program(d)).ok());
}

}  // namespace
}  // namespace kiln
