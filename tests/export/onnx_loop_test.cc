// ONNX Loop on small models built here: a static trip count unrolls; a trip count from the
// input shapes (or beyond the unrolling limit) becomes a runtime loop, run below the bound and
// at zero iterations; what Kiln cannot run as a loop is refused with the reason.
#include <gtest/gtest.h>

#include <cmath>

#include "export_test_util.h"
#include "onnx_model_util.h"
#include "tooling/program_report.h"

namespace kiln::testing {
namespace {

/// A body graph for `loop` with inputs `ins` and outputs `outs`.
onnx::GraphProto* add_body(onnx::NodeProto& loop, const std::vector<std::string>& ins, const std::vector<std::string>& outs) {
  auto* a = loop.add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* b = a->mutable_g();
  b->set_name("body");
  for (const auto& in : ins) b->add_input()->set_name(in);
  for (const auto& out : outs) b->add_output()->set_name(out);
  return b;
}

void body_node(onnx::GraphProto* b, const std::string& op, const std::vector<std::string>& ins, const std::vector<std::string>& outs) {
  auto* n = b->add_node();
  n->set_op_type(op);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
}

/// The dynamic axis 0 of `x` as a scalar trip count named `trips`.
void trips_from_axis0(OnnxModel& m, const std::string& x) {
  m.ints("zero", {1}, {0});
  m.node("Shape", "shape", {x}, {x + "_shape"});
  m.node("Gather", "first", {x + "_shape", "zero"}, {"trips1"});
  m.node("Squeeze", "trips", {"trips1", "zero"}, {"trips"});
}

/// Loop(trips, "", carried) whose body doubles the carried value and passes the condition through.
OnnxModel doubling_loop(const std::string& trips_from, const std::string& carried = "x") {
  OnnxModel m;
  m.input("x", {"n", "3"}).output("y");
  if (carried != "x") m.input(carried, {"3"});
  if (trips_from == "const") {
    m.ints("trips", {}, {3});
  } else {
    trips_from_axis0(m, "x");
  }
  auto& loop = m.node("Loop", "loop", {"trips", "", carried}, {"y"});
  onnx::GraphProto* b = add_body(loop, {"i", "c", "acc"}, {"c2", "acc2"});
  body_node(b, "Add", {"acc", "acc"}, {"acc2"});
  body_node(b, "Identity", {"c"}, {"c2"});
  return m;
}

TEST(OnnxLoop, AStaticTripCountUnrolls) {
  OnnxModel fixed = doubling_loop("const");
  format::ProgramDesc d;
  auto r = exporter::export_onnx(fixed.save("loop.onnx"), dims({"n=1..4"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->ops, (std::map<std::string, int>{{"Add", 3}}));
  EXPECT_EQ(r->runtime_loops, 0u);
  auto l = load(d);
  ASSERT_TRUE(l->method->bind_shapes({{2, 3}}).ok());
  for (int i = 0; i < 6; ++i) l->method->input_data<float>(0)[i] = static_cast<float>(i);
  ASSERT_TRUE(l->method->execute().ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(l->method->output(0).as<float>()[i], 8.f * static_cast<float>(i));
  // Pinned, the dynamic trip count is static again.
  format::ProgramDesc pinned;
  r = exporter::export_onnx(doubling_loop("shape").save("loop_dyn.onnx"), dims({"n=2"}), &pinned);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->ops, (std::map<std::string, int>{{"Add", 2}}));
}

TEST(OnnxLoop, ATripCountFromTheShapesRunsAsARuntimeLoopAtEveryShape) {
  format::ProgramDesc d;
  auto r = exporter::export_onnx(doubling_loop("shape").save("loop_dyn.onnx"), dims({"n=1..6"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->runtime_loops, 1u);
  EXPECT_EQ(r->ops, (std::map<std::string, int>{{"Add", 1}, {"KilnEndLoop", 1}, {"KilnLoop", 1}}));
  auto l = load(d);
  auto report = tooling::method_report(*l->program, "forward");
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->branches.size(), 1u);
  EXPECT_TRUE(report->branches[0].loop);
  EXPECT_EQ(report->branches[0].trip, "n");
  for (int64_t n : {6, 1, 3, 2, 5}) {  // the bound, then far below it, in no order
    ASSERT_TRUE(l->method->bind_shapes({{n, 3}}).ok());
    for (int64_t i = 0; i < 3 * n; ++i) l->method->input_data<float>(0)[i] = static_cast<float>(i) - 4.f;
    ASSERT_TRUE(l->method->execute().ok());
    ASSERT_EQ(l->method->output(0).dims[0], n);
    for (int64_t i = 0; i < 3 * n; ++i)
      EXPECT_EQ(l->method->output(0).as<float>()[i], std::ldexp(static_cast<float>(i) - 4.f, static_cast<int>(n))) << "n " << n;
  }
}

TEST(OnnxLoop, ZeroIterationsLeaveTheInitialValues) {
  format::ProgramDesc d;
  auto r = exporter::export_onnx(doubling_loop("shape", "s").save("loop_zero.onnx"), dims({"n=0..4"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto l = load(d);
  for (int64_t n : {0, 4, 0, 1}) {
    ASSERT_TRUE(l->method->bind_shapes({{n, 3}, {3}}).ok());
    for (int64_t i = 0; i < 3 * n; ++i) l->method->input_data<float>(0)[i] = 0.f;  // only its shape counts
    for (int i = 0; i < 3; ++i) l->method->input_data<float>(1)[i] = static_cast<float>(i + 1);
    Status st = l->method->execute();
    ASSERT_TRUE(st.ok()) << st.message();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(l->method->output(0).as<float>()[i], static_cast<float>((i + 1) << n)) << "n " << n;
  }
}

TEST(OnnxLoop, RefusesWhatItCannotRunAsALoopWithTheReason) {
  format::ProgramDesc d;
  {  // the trip count is data
    OnnxModel m;
    m.input("x", {"3"}).input("steps", {}, onnx::TensorProto::INT64).output("y");
    auto& loop = m.node("Loop", "loop", {"steps", "", "x"}, {"y"});
    onnx::GraphProto* b = add_body(loop, {"i", "c", "acc"}, {"c", "acc2"});
    body_node(b, "Add", {"acc", "acc"}, {"acc2"});
    auto r = exporter::export_onnx(m.save("loop_data.onnx"), {}, &d);
    EXPECT_EQ(r.status().message(), "node 'loop' (Loop): its trip count 'steps' is data, not a size of the inputs; Kiln runs "
                                    "loops whose trip count the input shapes bound");
  }
  {  // a carried value that grows
    OnnxModel m;
    m.input("x", {"n", "3"}).output("y");
    trips_from_axis0(m, "x");
    auto& loop = m.node("Loop", "loop", {"trips", "", "x"}, {"y"});
    auto* b = add_body(loop, {"i", "c", "acc"}, {"c", "acc2"});
    auto* cat = b->add_node();
    cat->set_op_type("Concat"), cat->add_input("acc"), cat->add_input("acc"), cat->add_output("acc2");
    OnnxModel::attr_int(*cat, "axis", 0);
    auto r = exporter::export_onnx(m.save("loop_grow.onnx"), dims({"n=1..4"}), &d);
    EXPECT_EQ(r.status().message(), "node 'loop' (KilnEndLoop): loop-carried value 0 enters the body as [n, 3] and leaves it "
                                    "as [2*n, 3]; Kiln runs loops whose carried values keep their shape");
  }
  {  // scan outputs of a loop that may stop early
    OnnxModel m;
    m.input("x", {"n", "3"}).output("y").output("ys");
    m.floats("lim", {}, {10.f});
    trips_from_axis0(m, "x");
    auto& loop = m.node("Loop", "loop", {"trips", "", "x"}, {"y", "ys"});
    auto* b = add_body(loop, {"i", "c", "acc"}, {"go", "acc2", "acc2"});
    body_node(b, "Add", {"acc", "acc"}, {"acc2"});
    body_node(b, "ReduceSum", {"acc2"}, {"tot"});
    body_node(b, "Less", {"tot", "lim"}, {"go"});
    auto r = exporter::export_onnx(m.save("loop_early.onnx"), dims({"n=1..4"}), &d);
    EXPECT_EQ(r.status().message(), "node 'loop' (Loop): its body's condition is computed and it has scan outputs, whose length "
                                    "would depend on the data; Kiln runs such loops without scan outputs");
  }
  {  // carried values exchanged
    OnnxModel m;
    m.input("x", {"n", "3"}).input("z", {"n", "3"}).output("y").output("w");
    trips_from_axis0(m, "x");
    auto& loop = m.node("Loop", "loop", {"trips", "", "x", "z"}, {"y", "w"});
    add_body(loop, {"i", "c", "a", "b"}, {"c", "b", "a"});
    auto r = exporter::export_onnx(m.save("loop_swap.onnx"), dims({"n=1..4"}), &d);
    EXPECT_EQ(r.status().message(), "node 'loop': its body passes carried value 1 on as carried value 0; Kiln does not "
                                    "exchange carried values in place");
  }
}

}  // namespace
}  // namespace kiln::testing
