// Graph builder: symbolic shapes stay readable, guards carry their origin, views alias,
// dead nodes are dropped, bounds are validated, and the example models' arenas stay put.
#include "export/graph.h"

#include <gtest/gtest.h>

#include "kiln/method.h"
#include "tooling/examples.h"
#include "aligned_bytes.h"

namespace kiln::exporter {
namespace {

core::AttrStore conv_attrs(int64_t stride) {
  core::AttrStore a;
  a.set_ints("kernel_shape", {3, 3}).set_ints("strides", {stride, stride}).set_ints("pads", {1, 1, 1, 1});
  return a;
}

TEST(GraphBuilder, ConvShapesReadSymbolically) {
  GraphBuilder g;
  ASSERT_TRUE(g.add_dim("batch", 1, 8).ok());
  ASSERT_TRUE(g.add_dim("H", 16, 512).ok());
  ASSERT_TRUE(g.add_dim("W", 16, 512).ok());
  int x = *g.add_input("x", DType::kF32, {"batch", 3, "H", "W"});
  std::vector<float> w(64 * 3 * 9, 0.1f);
  int k = *g.add_constant("k", DType::kF32, {64, 3, 3, 3}, w);
  int y = *g.add("Conv", "conv", {x, k}, conv_attrs(2));
  EXPECT_EQ(g.shape_string(y), "[batch, 64, ceildiv(H,2), ceildiv(W,2)]");
  int f = *g.add("Flatten", "flat", {y});
  EXPECT_EQ(g.shape_string(f), "[batch, 64*ceildiv(H,2)*ceildiv(W,2)]");
}

TEST(GraphBuilder, BroadcastGuardRecordsOrigin) {
  GraphBuilder g;
  ASSERT_TRUE(g.add_dim("H", 1, 64).ok());
  ASSERT_TRUE(g.add_dim("W", 1, 64).ok());
  int a = *g.add_input("a", DType::kF32, {1, "H"});
  int b = *g.add_input("b", DType::kF32, {"W", 1});
  int c = *g.add_input("c", DType::kF32, {"W"});
  int s = *g.add("Add", "outer", {a, b});  // broadcasts freely: no guard
  EXPECT_EQ(g.shape_string(s), "[W, H]");
  EXPECT_TRUE(g.guards().empty());
  int t = *g.add("Add", "Add_57", {s, c});  // needs H == W
  EXPECT_EQ(g.shape_string(t), "[W, H]");
  ASSERT_EQ(g.guards().size(), 1u);
  EXPECT_EQ(g.guards()[0].node_name, "Add_57");
  EXPECT_EQ(g.guards()[0].context, "to broadcast [W, H] with [W]");
}

TEST(GraphBuilder, ProvablyImpossibleShapesFailAtExport) {
  GraphBuilder g;
  ASSERT_TRUE(g.add_dim("H", 1, 8).ok());
  int a = *g.add_input("a", DType::kF32, {"H"});
  int b = *g.add_input("b", DType::kF32, {16});
  auto r = g.add("Add", "bad_add", {a, b});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'bad_add' (Add): sizes H and 16 can never be equal"), std::string::npos)
      << r.status().message();
}

TEST(GraphBuilder, ViewsAliasAndDeadNodesVanish) {
  GraphBuilder g;
  ASSERT_TRUE(g.add_dim("n", 1, 16).ok());
  int x = *g.add_input("x", DType::kF32, {"n", 4, 2});
  int r = *g.add("Relu", "relu", {x});
  int f = *g.add("Flatten", "flat", {r});
  (void)*g.add("Sigmoid", "unused", {x});
  ASSERT_TRUE(g.mark_output(f, "y").ok());
  format::ProgramDesc d;
  auto stats = g.emit(&d);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->instructions, 1u);  // relu only; flatten is a view, sigmoid is dead
  EXPECT_EQ(stats->views, 1u);
  const auto& m = d.methods[0];
  const auto& out = m.values[m.outputs[0]];
  EXPECT_EQ(out.storage, format::Storage::kAlias);
  EXPECT_EQ(m.values[out.alias_of].name, "relu");
  // The view's root lives to the end: runs correctly below the bound.
  auto bytes = format::serialize_program(d);
  ASSERT_TRUE(bytes.ok());
  testing::AlignedBytes buf(*bytes);
  auto p = buf.load();
  ASSERT_TRUE(p.ok());
  auto meth = Method::create(**p, "forward");
  ASSERT_TRUE(meth.ok());
  ASSERT_TRUE((*meth)->bind_shapes({{3, 4, 2}}).ok());
  for (int i = 0; i < 24; ++i) (*meth)->input_data<float>(0)[i] = static_cast<float>(i % 5) - 2.0f;
  ASSERT_TRUE((*meth)->execute().ok());
  const TensorView& y = (*meth)->output(0);
  EXPECT_EQ(y.rank, 2);
  EXPECT_EQ(y.dims[0], 3);
  EXPECT_EQ(y.dims[1], 8);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(y.as<float>()[i], std::max(0.0f, static_cast<float>(i % 5) - 2.0f));
}

TEST(GraphBuilder, DimValidation) {
  GraphBuilder g;
  EXPECT_EQ(g.add_dim("a", -1, 4).message(), "dim 'a' has min -1; dims are at least 0");
  EXPECT_TRUE(g.add_dim("empty", 0, 4).ok());  // a size may be 0 (an empty KV cache)
  EXPECT_EQ(g.add_dim("a", 5, 4).message(), "dim 'a' has min above max [5, 4]");
  EXPECT_EQ(g.add_dim("a", 5, 7, 8).message(), "dim 'a' admits no value: no multiple of 8 in [5, 7]");
  EXPECT_EQ(g.add_input("x", DType::kF32, {"seq"}).status().message(),
            "input 'x' axis 0 names dim 'seq', which has no bounds; declare it with --dim seq=MIN..MAX");
}

TEST(GraphBuilder, HugeValuesFailInsteadOfWrapping) {
  // Regression: the bound's byte count was multiplied unchecked, so [n, n] f32 with n up to
  // 2^35 wrapped to 0 bytes (2^72 mod 2^64) and was planned in no memory at all.
  GraphBuilder g;
  ASSERT_TRUE(g.add_dim("n", 1, int64_t{1} << 35).ok());
  int x = *g.add_input("x", DType::kF32, {"n", "n"});
  int y = *g.add("Relu", "relu", {x});
  ASSERT_TRUE(g.mark_output(y, "y").ok());
  format::ProgramDesc d;
  EXPECT_EQ(g.emit(&d).status().message(), "value 'x' would exceed 1 TiB at the bound");
}

// An axis that can only be empty makes the value 0 bytes whatever the other axes' bounds, in
// export's plan and in the reader's check alike, wherever the empty axis lies (found by
// fuzz_onnx: export planned a [17, H, 2^38, 0] layout copy in no bytes, the reader refused it).
TEST(GraphBuilder, AnEmptyAxisHoldsNothingWhateverTheOthers) {
  for (bool empty_first : {true, false}) {
    GraphBuilder g;
    ASSERT_TRUE(g.add_dim("n", 1, int64_t{1} << 39).ok());  // 4 * 2^39 bytes: over 1 TiB with any other axis
    const std::vector<Axis> axes = empty_first ? std::vector<Axis>{int64_t{0}, "n"} : std::vector<Axis>{"n", int64_t{0}};
    int x = *g.add_input("x", DType::kF32, axes);
    int y = *g.add("Relu", "relu", {x});
    ASSERT_TRUE(g.mark_output(y, "y").ok());
    format::ProgramDesc d;
    auto stats = g.emit(&d);
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    EXPECT_EQ(stats->arena_bytes, 0u);
    auto bytes = format::serialize_program(d);
    ASSERT_TRUE(bytes.ok());
    testing::AlignedBytes buf(*bytes);
    auto p = buf.load();
    ASSERT_TRUE(p.ok()) << p.status().message();
    auto meth = Method::create(**p, "forward");
    ASSERT_TRUE(meth.ok());
    const std::vector<int64_t> shape = empty_first ? std::vector<int64_t>{0, 5} : std::vector<int64_t>{5, 0};
    ASSERT_TRUE((*meth)->bind_shapes({shape}).ok());
    ASSERT_TRUE((*meth)->execute().ok());
    EXPECT_EQ((*meth)->output(0).dims[empty_first ? 1 : 0], 5);
  }
}

// Arena-size regression checks for the bundled examples: a change to the planner or the
// models that moves these numbers must be deliberate.
TEST(GraphBuilder, ExampleArenasStayNearTheLowerBound) {
  struct Case { const char* name; Result<tooling::ExampleModel> (*make)(); uint64_t arena; };
  for (Case c : {Case{"mlp", &tooling::make_mlp_example, 0}, Case{"cnn", &tooling::make_cnn_example, 0}}) {
    auto m = c.make();
    ASSERT_TRUE(m.ok());
    const auto& meth = m->program.methods[0];
    EXPECT_LE(static_cast<double>(meth.arena_bytes), 1.05 * static_cast<double>(meth.lower_bound_bytes)) << c.name;
    EXPECT_GE(meth.arena_bytes, meth.lower_bound_bytes) << c.name;
  }
  EXPECT_EQ(tooling::make_mlp_example()->program.methods[0].arena_bytes, 20480u);
  EXPECT_EQ(tooling::make_cnn_example()->program.methods[0].arena_bytes, 458752u);
}

}  // namespace
}  // namespace kiln::exporter
