// Guards that read one dim narrow its contract at export (a minimum from downsampling nodes,
// a step, gaps, conflicts), and kiln inspect MODEL.onnx reports what a trial export finds the
// model needs and the flags to write.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "export/onnx/onnx_import.h"
#include "export_test_util.h"
#include "onnx_model_util.h"

namespace kiln::testing {
namespace {

// SqueezeNet-style: each downsampling node needs its output at least 1, which --dim 1..224
// does not say; export states the true minimum in the contract and drops the guards.
void squeeze_like(OnnxModel& m) {
  m.input("x", {"1", "3", "height", "width"}).output("y");
  m.floats("w", {4, 3, 3, 3}, std::vector<float>(4 * 3 * 3 * 3, 0.5f));
  onnx::NodeProto& conv = m.node("Conv", "Conv_0", {"x", "w"}, {"c"});
  OnnxModel::attr_ints(conv, "kernel_shape", {3, 3});
  OnnxModel::attr_ints(conv, "strides", {2, 2});
  for (const char* name : {"MaxPool_1", "MaxPool_2"}) {
    const std::string in = name[8] == '1' ? "c" : "p", out = name[8] == '1' ? "p" : "y";
    onnx::NodeProto& pool = m.node("MaxPool", name, {in}, {out});
    OnnxModel::attr_ints(pool, "kernel_shape", {3, 3});
    OnnxModel::attr_ints(pool, "strides", {2, 2});
    OnnxModel::attr_int(pool, "ceil_mode", 1);
  }
}

TEST(OnnxImport, GuardsOnOneDimNarrowItsRange) {
  OnnxModel m;
  squeeze_like(m);
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("squeeze_like.onnx"), dims({"height=1..224", "width=16..224:8"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->narrowed, std::vector<std::string>{"height: requested [1, 224], admissible [9, 224] (node 'MaxPool_2' "
                                                  "(MaxPool) needs ceildiv(height,8) - 1 >= 1)"});
  EXPECT_TRUE(r->guards.empty());  // width's requested range already satisfied them: proven, not recorded
  EXPECT_EQ(r->dims, (std::vector<std::string>{"height in [9, 224]", "width in [16, 224] step 8"}));
  auto l = load(d);
  EXPECT_EQ(l->method->bind_shapes({{1, 3, 8, 16}}).message(),
            "bind: input 'x' (#0) dim 2 ('height') is 8, outside its range [9, 224]; pad on the host to 9");
  ASSERT_TRUE(l->method->bind_shapes({{1, 3, 9, 16}}).ok());
  ASSERT_TRUE(l->method->execute().ok());
  EXPECT_EQ(l->method->output(0).dims[2], 1);
}

// kiln inspect MODEL.onnx: inputs, dim names, what a trial export finds the model needs of
// them, and the export command to start from.
TEST(OnnxImport, DescribeListsDimsAndTheFlagsToWrite) {
  OnnxModel m;
  squeeze_like(m);
  const std::string path = m.save("describe.onnx");
  auto text = exporter::describe_onnx(path);
  ASSERT_TRUE(text.ok()) << text.status().message();
  for (const std::string& line :
       {std::string("inputs (as declared):\n  'x' f32 [1, 3, height, width]\n"),
        std::string("  'y' f32 [1, 4, ceildiv(height,8) - 1, ceildiv(width,8) - 1]\n"),
        std::string("  height: input 'x' axis 2\n  width: input 'x' axis 3\n"),
        std::string("  height: requested [1, 4096], admissible [9, 4096] (node 'MaxPool_2' (MaxPool) needs "
                    "ceildiv(height,8) - 1 >= 1)\n"),
        "  kiln export " + path + " -o OUT.kiln --dim height=9..MAX --dim width=9..MAX\n"})
    EXPECT_NE(text->find(line), std::string::npos) << line << "\nnot in:\n" << *text;
  // An axis with neither a size nor a name: the --input to write instead.
  OnnxModel bare;
  bare.input("x", {"2", "?"}).output("y");
  bare.node("Relu", "relu", {"x"}, {"y"});
  text = exporter::describe_onnx(bare.save("bare.onnx"));
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_NE(text->find("input 'x' has an axis with neither a size nor a name: give its shape with --input x=D0,D1,..."),
            std::string::npos) << *text;
  EXPECT_EQ(exporter::describe_onnx("/nonexistent.onnx").status().message(),
            "cannot open model '/nonexistent.onnx': no such file");
}

// A model whose trial export at 4096 in every dim (batch too) needs more than the planner
// takes: the trial's bound shrinks until it plans, and the flags given fit a 1 GiB arena
// (a batch dim up to 8).
TEST(OnnxImport, DescribeShrinksTheTrialAndSuggestsFlagsThatFit) {
  OnnxModel m;
  m.input("x", {"N", "3", "H", "W"}).output("y");
  m.floats("w", {1024, 3, 1, 1}, std::vector<float>(3 * 1024, 0.01f));
  m.node("Conv", "wide", {"x", "w"}, {"y"});
  const std::string path = m.save("describe_wide.onnx");
  auto text = exporter::describe_onnx(path);
  ASSERT_TRUE(text.ok()) << text.status().message();
  for (const std::string& line :
       {std::string("(a trial export with every dim in [1, 4096] does not plan; the trial took [1, 256])\n"),
        "  kiln export " + path + " -o OUT.kiln --dim H=1..MAX --dim N=1..MAX --dim W=1..MAX\n",
        std::string("or, to fit a 1 GiB arena (--warn-arena's default; this one is 514 MiB at the bound):\n"),
        "  kiln export " + path + " -o OUT.kiln --dim H=1..128 --dim N=1..8 --dim W=1..128\n"})
    EXPECT_NE(text->find(line), std::string::npos) << line << "\nnot in:\n" << *text;
  EXPECT_EQ(text->find("fails"), std::string::npos) << *text;
}

// Guards whose admissible values have gaps narrow the ends and stay; guards that together
// admit one value or none are errors.
TEST(OnnxImport, NarrowingWithGapsAndConflicts) {
  // Reshape [H] to [H - (H%4)*(H%4 - 3)]: H % 4 must be 0 or 3.
  OnnxModel m;
  m.input("x", {"H"}).output("y");
  m.ints("four", {1}, {4});
  m.ints("three", {1}, {3});
  m.node("Shape", "shape", {"x"}, {"s"});
  m.node("Mod", "mod", {"s", "four"}, {"r"});
  m.node("Sub", "sub3", {"r", "three"}, {"r3"});
  m.node("Mul", "mul", {"r", "r3"}, {"p"});
  m.node("Sub", "sub", {"s", "p"}, {"t"});
  m.node("Reshape", "reshape", {"x", "t"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("gaps.onnx"), dims({"H=1..22"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->narrowed.size(), 1u);
  EXPECT_EQ(r->narrowed[0].substr(0, 81), "H: requested [1, 22], admissible [3, 20] with gaps the guards still check (node '");
  EXPECT_EQ(r->guards.size(), 1u);
  auto l = load(d);
  EXPECT_TRUE(l->method->bind_shapes({{4}}).ok());
  const std::string refused = l->method->bind_shapes({{5}}).message();  // 5 % 4 == 1: a gap
  EXPECT_EQ(refused.substr(0, 6), "bind: ");
  EXPECT_EQ(refused.substr(refused.size() - 31), "; the nearest admissible: H = 4") << refused;

  // length % 6 == 0 and length % 10 == 0: each admits several values of [1, 59], together only 30.
  OnnxModel both;
  both.input("x", {"length"}).output("y6").output("y10");
  both.ints("by6", {2}, {6, -1});
  both.ints("by10", {2}, {10, -1});
  both.node("Reshape", "split6", {"x", "by6"}, {"y6"});
  both.node("Reshape", "split10", {"x", "by10"}, {"y10"});
  r = exporter::export_onnx(both.save("two_steps.onnx"), dims({"length=1..59"}), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "dim 'length' is specialized to 30 by what the model needs of it (node 'split6' (Reshape) needs length % 6 == 0; "
            "node 'split10' (Reshape) needs length % 10 == 0); export with --dim length=30 to accept that, or change the "
            "model so it does not fix the size");
  // Over [1, 29], no value at all.
  r = exporter::export_onnx(both.save("two_steps.onnx"), dims({"length=1..29"}), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "no value of dim 'length' in [1, 29] satisfies what the model needs of it together (node 'split6' (Reshape) "
            "needs length % 6 == 0; node 'split10' (Reshape) needs length % 10 == 0); widen or move the --dim range");
}

// A shape built before narrowing is simplified over the requested range: Slice [1:-1] of B
// gives max(0, B - 2) for B in [1, 8], but a reflect Pad then needs it >= 1, so the contract
// is B in [3, 8], over which load derives B - 2. Export imports again under the narrowed
// contract, so the file records what load derives (found by fuzz_onnx: load refused it).
TEST(OnnxImport, ShapesAreRecordedOverTheNarrowedRange) {
  OnnxModel m;
  m.input("x", {"1", "2", "B", "W"}).output("y");
  m.ints("st", {1}, {1});
  m.ints("en", {1}, {-1});
  m.ints("ax", {1}, {2});
  m.ints("pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  m.node("Slice", "slice", {"x", "st", "en", "ax"}, {"s"});
  OnnxModel::attr_str(m.node("Pad", "pad", {"s", "pads"}, {"y"}), "mode", "reflect");
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("slice_pad.onnx"), dims({"B=1..8", "W=1..8"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->narrowed, std::vector<std::string>{"B: requested [1, 8], admissible [3, 8] (node 'pad' (Pad) needs "
                                                  "max(0,B - 2) >= 1)"});
  EXPECT_EQ(r->outputs, std::vector<std::string>{"'y' f32 [1, 2, B, W + 2]"});
  auto l = load(d);  // load checks each instruction's recorded shapes against its op's
  ASSERT_TRUE(l->method->bind_shapes({{1, 2, 3, 1}}).ok());
  ASSERT_TRUE(l->method->execute().ok());
  EXPECT_EQ(l->method->output(0).dims[2], 3);
}

}  // namespace
}  // namespace kiln::testing
