// Runtime: load, bind (every contract error and its message), execute at shapes below the
// bound, outputs with actual shapes, arena ownership.
#include <gtest/gtest.h>

#include <cstring>

#include "export/graph.h"
#include "kiln/method.h"
#include "runtime/program_impl.h"
#include "kiln/program.h"
#include "tooling/examples.h"
#include "aligned_bytes.h"

namespace kiln {
namespace {

using exporter::GraphBuilder;

// y = (a + b) * c,  a,b: [batch, seq], c: [seq] constant-free input; z = a + d where d is [W]
// with a guard seq == W from broadcasting.
std::vector<uint8_t> build_program() {
  GraphBuilder g;
  EXPECT_TRUE(g.add_dim("batch", 1, 8).ok());
  EXPECT_TRUE(g.add_dim("seq", 1, 64, 1).ok());
  EXPECT_TRUE(g.add_dim("W", 2, 64, 2).ok());
  int a = *g.add_input("ids", DType::kF32, {"batch", "seq"});
  int b = *g.add_input("mask", DType::kF32, {"batch", "seq"});
  int pix = *g.add_input("pixels", DType::kF32, {1, 3, 4}, {1, 3, 4});  // traced from this example
  int d = *g.add_input("bias", DType::kF32, {"W"});
  int s = *g.add("Add", "add_ab", {a, b});
  int c = *g.add_constant<float>("scale", DType::kF32, {1}, {2.0f});
  int y = *g.add("Mul", "scale_sum", {s, c});
  int z = *g.add("Add", "Add_57", {a, d});
  int p = *g.add("Mul", "double_pixels", {pix, c});
  EXPECT_TRUE(g.mark_output(y, "y").ok());
  EXPECT_TRUE(g.mark_output(z, "z").ok());
  EXPECT_TRUE(g.mark_output(p, "p").ok());
  format::ProgramDesc desc;
  EXPECT_TRUE(g.emit(&desc).ok());
  auto bytes = format::serialize_program(desc);
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

class MethodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = build_program();
    buf_ = std::make_unique<testing::AlignedBytes>(bytes_);
    auto p = buf_->load();
    ASSERT_TRUE(p.ok()) << p.status().message();
    program_ = std::move(*p);
    auto m = Method::create(*program_, "forward");
    ASSERT_TRUE(m.ok()) << m.status().message();
    method_ = std::move(*m);
  }
  std::string bind_error(std::vector<std::vector<int64_t>> shapes) {
    Status s = method_->bind_shapes(shapes);
    EXPECT_FALSE(s.ok());
    return s.message();
  }
  std::vector<uint8_t> bytes_;
  std::unique_ptr<testing::AlignedBytes> buf_;
  std::unique_ptr<Program> program_;
  std::unique_ptr<Method> method_;
};

TEST_F(MethodTest, MetadataShowsTheContract) {
  const MethodMeta& m = method_->meta();
  ASSERT_EQ(m.inputs.size(), 4u);
  EXPECT_EQ(m.inputs[0].shape_text(), "[batch, seq]");
  EXPECT_EQ(m.inputs[2].shape_text(), "[1, 3, 4]");
  EXPECT_EQ(m.dims[2].step, 2);
  ASSERT_EQ(m.guards.size(), 1u);
  EXPECT_EQ(m.guards[0].text, "seq == W");
  EXPECT_EQ(m.guards[0].node_name, "Add_57");
  EXPECT_EQ(m.outputs[0].name, "y");
  EXPECT_EQ(m.outputs[0].shape_text(), "[batch, seq]");
  EXPECT_GE(m.arena_bytes, m.lower_bound_bytes);
  EXPECT_GT(m.lower_bound_bytes, 0u);
}

TEST_F(MethodTest, ExecutesBelowTheBound) {
  for (int64_t batch : {1, 3, 8}) {
    for (int64_t seq : {2, 6, 64}) {
      ASSERT_TRUE(method_->bind_shapes({{batch, seq}, {batch, seq}, {1, 3, 4}, {seq}}).ok());
      float* a = method_->input_data<float>(0);
      float* b = method_->input_data<float>(1);
      float* d = method_->input_data<float>(3);
      for (int64_t i = 0; i < batch * seq; ++i) a[i] = static_cast<float>(i), b[i] = 1.0f;
      for (int64_t i = 0; i < seq; ++i) d[i] = 100.0f * static_cast<float>(i);
      for (int64_t i = 0; i < 12; ++i) method_->input_data<float>(2)[i] = static_cast<float>(i);
      ASSERT_TRUE(method_->execute().ok());
      const TensorView& y = method_->output(0);
      ASSERT_EQ(y.rank, 2);
      EXPECT_EQ(y.dims[0], batch);
      EXPECT_EQ(y.dims[1], seq);
      for (int64_t i = 0; i < batch * seq; ++i) ASSERT_EQ(y.as<float>()[i], 2.0f * (static_cast<float>(i) + 1.0f));
      const TensorView& z = method_->output(1);
      for (int64_t i = 0; i < batch * seq; ++i)
        ASSERT_EQ(z.as<float>()[i], static_cast<float>(i) + 100.0f * static_cast<float>(i % seq));
      EXPECT_EQ(method_->output(2).as<float>()[11], 22.0f);
    }
  }
}

TEST_F(MethodTest, StaticMismatchNamesTheExampleShapeAndTheFix) {
  EXPECT_EQ(bind_error({{2, 4}, {2, 4}, {1, 3, 5}, {4}}),
            "bind: input 'pixels' (#2) dim 2 is 5 but the program fixed it to 4 (exported from example shape 1x3x4); "
            "resize on the host or re-export with --dim to make it dynamic");
}

TEST_F(MethodTest, AboveMaxAndBelowMin) {
  EXPECT_EQ(bind_error({{2, 600}, {2, 600}, {1, 3, 4}, {600}}),
            "bind: input 'ids' (#0) dim 1 ('seq') is 600, outside its range [1, 64]; truncate on the host to 64");
  // A batch is split or padded with rows whose outputs are dropped, never resized.
  EXPECT_EQ(bind_error({{0, 4}, {0, 4}, {1, 3, 4}, {4}}),
            "bind: input 'ids' (#0) dim 0 ('batch') is 0, outside its range [1, 8]; a batch of 0 has nothing to run: skip the call");
  EXPECT_EQ(bind_error({{9, 4}, {9, 4}, {1, 3, 4}, {4}}),
            "bind: input 'ids' (#0) dim 0 ('batch') is 9, outside its range [1, 8]; split the batch into calls of at most 8 on "
            "the host");
}

TEST_F(MethodTest, OffStep) {
  EXPECT_EQ(bind_error({{2, 5}, {2, 5}, {1, 3, 4}, {5}}),
            "bind: input 'bias' (#3) dim 0 ('W') is 5, not a multiple of its step 2 (range [2, 64]); pad on the host to 6 "
            "(and seq to 6, which must equal it)");
}

TEST_F(MethodTest, SharedDimsMustBeEqual) {
  EXPECT_EQ(bind_error({{2, 12}, {2, 13}, {1, 3, 4}, {12}}),
            "bind: inputs 'ids' dim 1 and 'mask' dim 1 share dim 'seq' and must be equal: got 12 and 13");
}

TEST_F(MethodTest, FailedGuardNamesItsOrigin) {
  EXPECT_EQ(bind_error({{2, 4}, {2, 4}, {1, 3, 4}, {6}}),
            "bind: guard seq == W failed for seq = 4, W = 6 (needed by node 'Add_57' (Add) to broadcast [batch, seq] "
            "with [W]); the nearest admissible: seq = W = 4 or seq = W = 6");
}

// Tools act on the kind of refusal, not on its wording: a guard's is marked as such, the
// contract's other refusals are not.
TEST_F(MethodTest, RefusalsCarryTheirReason) {
  EXPECT_EQ(method_->bind_shapes({{2, 4}, {2, 4}, {1, 3, 4}, {6}}).reason(), Reason::kGuardFailed);
  EXPECT_EQ(method_->bind_shapes({{2, 12}, {2, 13}, {1, 3, 4}, {12}}).reason(), Reason::kNone);
  EXPECT_EQ(method_->bind_shapes({{2, 5}, {2, 5}, {1, 3, 4}, {5}}).reason(), Reason::kNone);
  Status s = Status(Code::kInvalidArgument, "x", Reason::kGuardFailed).with_prefix("bind: ");
  EXPECT_EQ(s.reason(), Reason::kGuardFailed);
  EXPECT_EQ(s.message(), "bind: x");
}

TEST_F(MethodTest, WrongRankAndDtypeAndCount) {
  EXPECT_EQ(bind_error({{2, 4, 1}, {2, 4}, {1, 3, 4}, {4}}),
            "bind: input 'ids' (#0) has rank 3 (shape 2x4x1) but the program expects rank 2 [batch, seq]");
  std::vector<TensorView> v(4);
  auto shapes = std::vector<std::vector<int64_t>>{{2, 4}, {2, 4}, {1, 3, 4}, {4}};
  for (size_t i = 0; i < 4; ++i) {
    v[i].rank = static_cast<int32_t>(shapes[i].size());
    for (size_t k = 0; k < shapes[i].size(); ++k) v[i].dims[k] = shapes[i][k];
  }
  v[1].dtype = DType::kI64;
  Status s = method_->bind(v.data(), v.size());
  EXPECT_EQ(s.message(), "bind: input 'mask' (#1) has dtype i64 but the program expects f32; convert it on the host");
  EXPECT_EQ(bind_error({{2, 4}}), "bind: method 'forward' takes 4 inputs, got 1");
}

TEST_F(MethodTest, ExecuteBeforeSuccessfulBindFails) {
  (void)method_->bind_shapes({{2, 4}});
  Status s = method_->execute();
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
}

TEST_F(MethodTest, ConstantsAreNotCopied) {
  // The program borrows the caller's buffer: the constant segment lies inside it.
  const uint8_t* base = buf_->data();
  auto* c = static_cast<const uint8_t*>(ProgramAccess::constant_data(*program_));
  EXPECT_GE(c, base);
  EXPECT_LT(c, base + bytes_.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 64, 0u);
}

TEST_F(MethodTest, CallerProvidedArena) {
  uint64_t need = method_->meta().arena_bytes;
  std::vector<uint64_t> small(need / 16);
  auto m = Method::create(*program_, "forward", small.data(), small.size() * 8);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kResourceExhausted);
  std::vector<uint64_t> arena(need / 8 + 2);
  auto ok = Method::create(*program_, "forward", arena.data(), arena.size() * 8);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)->input(0).data, static_cast<void*>(reinterpret_cast<uint8_t*>(arena.data()) +
                                                     (static_cast<uint8_t*>((*ok)->input(0).data) -
                                                      reinterpret_cast<uint8_t*>(arena.data()))));
  EXPECT_GE(static_cast<uint8_t*>((*ok)->input(0).data), reinterpret_cast<uint8_t*>(arena.data()));
  auto missing = Method::create(*program_, "nope");
  EXPECT_EQ(missing.status().message(), "no method 'nope' in the program; it has 'forward'");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Memory that follows the shape: the arena in use shrinks with the bound-to shape, and a
// Method created for tightened bounds (max_shapes) allocates only what they need, refuses
// larger shapes, and computes what the uncapped Method computes.
TEST(MethodArena, FollowsTheShapeAndTightenedBoundsAllocateLess) {
  auto model = tooling::make_cnn_example();
  ASSERT_TRUE(model.ok());
  testing::AlignedBytes image(*format::serialize_program(model->program));
  auto program = image.load();
  ASSERT_TRUE(program.ok()) << program.status().message();
  auto full = Method::create(**program, "forward");
  ASSERT_TRUE(full.ok());
  const uint64_t bound = (*full)->planned_arena_bytes();
  EXPECT_EQ((*full)->arena_bytes_in_use(), bound);
  auto at = MethodAccess::arena_bytes_for(**full, {{1, 3, 16, 16}});
  ASSERT_TRUE(at.ok()) << at.status().message();
  const uint64_t small = (*full)->arena_bytes_in_use();
  EXPECT_EQ(*at, small);
  EXPECT_LT(small * 8, bound) << "at 1x3x16x16 of a [4, 3, 64, 64] bound";
  // No arena beats the bytes alive at one step; this one is within 10% of them.
  const uint64_t lower = MethodAccess::live_lower_bound_bytes(**full);
  EXPECT_LE(lower, small);
  EXPECT_LE(small * 10, lower * 11);

  MethodOptions capped;
  capped.max_shapes = {{1, 3, 16, 16}};
  auto need = Method::arena_bytes(**program, "forward", capped);
  ASSERT_TRUE(need.ok()) << need.status().message();
  EXPECT_EQ(*need, small);  // the caps' arena is the placement at the caps
  auto m = Method::create(**program, "forward", capped);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->planned_arena_bytes(), small);
  EXPECT_EQ((*m)->bind_shapes({{1, 3, 17, 16}}).message(),
            "bind: input 'pixels' (#0) dim 2 ('H') is 17, above 16, the most this Method was created for (max_shapes; "
            "the program admits up to 64); crop or resize on the host to 16");
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 3, 16, 16}, std::vector<int64_t>{1, 3, 5, 9}}) {
    ASSERT_TRUE((*m)->bind_shapes({shape}).ok());
    ASSERT_TRUE((*full)->bind_shapes({shape}).ok());
    for (Method* x : {m->get(), full->get()}) {
      TensorView in = x->input(0);
      for (int64_t k = 0; k < in.numel(); ++k) in.as<float>()[k] = static_cast<float>(k % 7) - 3.f;
      ASSERT_TRUE(x->execute().ok());
    }
    ASSERT_EQ((*m)->output(0).nbytes(), (*full)->output(0).nbytes());
    EXPECT_EQ(std::memcmp((*m)->output(0).data, (*full)->output(0).data, (*m)->output(0).nbytes()), 0);
  }
  // Caps outside the contract are refused at create, with the contract's message.
  capped.max_shapes = {{1, 3, 65, 16}};
  EXPECT_EQ(Method::create(**program, "forward", capped).status().message(),
            "create: max_shapes: input 'pixels' (#0) dim 2 ('H') is 65, outside its range [1, 64]; crop or resize on "
            "the host to 64");
}

}  // namespace
}  // namespace kiln
