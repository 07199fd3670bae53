// ONNX importer on small models built here: contract errors that teach, unsupported ops
// listed at once, forced specialization, folding (Constant, Identity, BatchNormalization,
// If with a constant condition, shape arithmetic) and the result run below the bound.
#include <limits>
#include <gtest/gtest.h>

#include <cstdlib>

#include <cmath>
#include <cstring>

#include "export/onnx/onnx_import.h"
#include "kiln/bucketed.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "e2e/e2e_util.h"
#include "onnx_model_util.h"
#include "export_test_util.h"
#include "aligned_bytes.h"
#include "tooling/program_report.h"

namespace kiln::testing {
namespace {

TEST(OnnxImport, ParsesDimAndInputArguments) {
  auto d = exporter::parse_dim_arg("H=32..224:32");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->min, 32);
  EXPECT_EQ(d->max, 224);
  EXPECT_EQ(d->step, 32);
  auto p = exporter::parse_dim_arg("batch=1");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->pinned);
  EXPECT_FALSE(exporter::parse_dim_arg("H=a..b").ok());
  auto i = exporter::parse_input_arg("x=1,3,H,W");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->second, (std::vector<std::string>{"1", "3", "H", "W"}));
}

TEST(OnnxImport, InputShapesTakeTheRuntimesSyntaxToo) {
  // --input x=batchx4xmax_len reads as batch,4,max_len: each part is a size or a --dim.
  OnnxModel m;
  m.input("x", {"a", "4", "b"}).output("y");
  m.node("Relu", "relu", {"x"}, {"y"});
  format::ProgramDesc d;
  ExportOptions o = dims({"batch=1..8", "max_len=2..16"});
  o.inputs.push_back(*exporter::parse_input_arg("x=batchx4xmax_len"));
  auto r = exporter::export_onnx(m.save("x_syntax.onnx"), o, &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->inputs, std::vector<std::string>{"'x' f32 [batch, 4, max_len]"});
  // A dim whose name has an 'x' in it stays one name.
  OnnxModel one;
  one.input("x", {"a"}).output("y");
  one.node("Relu", "relu", {"x"}, {"y"});
  ExportOptions p = dims({"max_len=2..16"});
  p.inputs.push_back(*exporter::parse_input_arg("x=max_len"));
  format::ProgramDesc d2;
  r = exporter::export_onnx(one.save("x_name.onnx"), p, &d2);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->inputs, std::vector<std::string>{"'x' f32 [max_len]"});
}

TEST(OnnxImport, RejectsTrailingCommasAndRepeatedDims) {
  // Regression: a trailing comma was dropped silently and a repeated --dim overrode the first.
  EXPECT_EQ(exporter::parse_input_arg("x=1,3,").status().message(), "cannot parse --input 'x=1,3,': empty axis");
  OnnxModel m;
  m.input("x", {"n", "3"}).output("y");
  m.node("Relu", "relu", {"x"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("twice.onnx"), dims({"n=1..4", "n=1..8"}), &d);
  EXPECT_EQ(r.status().message(), "--dim 'n' is given more than once");
}

TEST(OnnxImport, HostileSizesAreErrorsNotOverflows) {
  // Regression: an initializer's element count was multiplied unchecked (undefined on
  // overflow) and allocated before its data was checked.
  OnnxModel m;
  m.input("x", {"2", "3"}).output("y");
  m.floats("w", {1}, {1.f});
  m.node("Add", "add", {"x", "w"}, {"y"});
  onnx::TensorProto* w = m.graph()->mutable_initializer(0);
  w->clear_dims();
  for (int64_t k : {int64_t{1} << 32, int64_t{1} << 32, int64_t{4}}) w->add_dims(k);
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("huge_init.onnx"), {}, &d);
  EXPECT_EQ(r.status().message(), "initializer 'w' has more than 2^63 elements, more than a model can hold");
  w->clear_dims();
  w->add_dims(int64_t{1} << 40);
  r = exporter::export_onnx(m.save("big_init.onnx"), {}, &d);
  EXPECT_EQ(r.status().message(), "initializer 'w' has 1099511627776 elements, more than a model can hold");
  // Under the 2^31 limit but far beyond its data (fuzz_onnx: this allocated 16 GB before the check).
  w->clear_dims();
  w->add_dims(int64_t{1} << 30);
  r = exporter::export_onnx(m.save("claimed_init.onnx"), {}, &d);
  EXPECT_EQ(r.status().message(), "initializer 'w' holds 1 values or bytes but its shape needs 1073741824 elements");
  // Regression (fuzz_onnx, UBSan): shape arithmetic on a Reshape's constants multiplied past
  // int64 (undefined) instead of refusing the model.
  OnnxModel big;
  big.input("x", {"n", "4"}).output("y");
  big.ints("s", {3}, {int64_t{1} << 40, int64_t{1} << 40, -1});
  big.node("Reshape", "reshape", {"x", "s"}, {"y"});
  r = exporter::export_onnx(big.save("overflow_reshape.onnx"), dims({"n=1..8"}), &d);
  EXPECT_EQ(r.status().message(),
            "node 'reshape' (Reshape): its shape arithmetic leaves int64 (a size, product or coefficient beyond "
            "9223372036854775807); the model's shape constants are out of range");
  // Regression: a negative or 16-digit dim_value was taken for a dim name.
  OnnxModel n;
  n.input("x", {"2", "3"}).output("y");
  n.node("Relu", "relu", {"x"}, {"y"});
  n.graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(-2);
  r = exporter::export_onnx(n.save("negative_dim.onnx"), {}, &d);
  EXPECT_EQ(r.status().message(), "input 'x' axis 0 has size -2, which is neither a size (up to 15 digits) nor a dim name");
}

TEST(OnnxImport, UnboundedDimNamesInputAxisAndFix) {
  OnnxModel m;
  m.input("pixels", {"1", "3", "height", "width"}).output("y");
  m.node("Relu", "relu", {"pixels"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("unbounded.onnx"), dims({"width=1..64"}), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "input 'pixels' axis 2 is dynamic ('height') but has no bound; add --dim height=MIN..MAX (or --dim height=V to pin it)");
}

// A node's output count must be what its op produces: none (found by fuzz_onnx: the Slice
// shape function wrote an output the node did not have) or one too many (an output left
// undefined for the next node to read) is an export error.
TEST(OnnxImport, NodeOutputCountsMustMatchTheOp) {
  OnnxModel none;
  none.input("x", {"4"}).output("y");
  none.node("Relu", "relu0", {"x"}, {});
  none.node("Relu", "relu1", {"x"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(none.save("no_outputs.onnx"), dims({}), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'relu0' (Relu) has no outputs");
  OnnxModel extra;
  extra.input("x", {"4"}).output("y");
  extra.node("Relu", "relu", {"x"}, {"y", "z"});
  r = exporter::export_onnx(extra.save("extra_output.onnx"), dims({}), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'relu' (Relu) names 2 outputs; the op produces 1");
}

// A node of an op the fusion matchers read by position, with fewer inputs than its arity (found
// by fuzz_onnx: an Erf with no input aborted the GELU matcher): no fusion is tried, and the
// importer refuses the node.
TEST(OnnxImport, MalformedNodesAreRefusedNotMatched) {
  OnnxModel m;
  m.input("x", {"4"}).output("y");
  m.node("Erf", "erf", {}, {"e"});
  m.node("Mul", "mul", {"x", "e"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("erf_no_input.onnx"), dims({}), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(Erf): expects 1 inputs, got 0"), std::string::npos) << r.status().message();
  // The ops the importer handles itself (fuzz_onnx: a Constant with no output aborted in protobuf).
  for (const char* op : {"Constant", "Identity", "Dropout", "If", "NonZero"}) {
    OnnxModel bad;
    bad.input("x", {"4"}).output("y");
    bad.node(op, "own", {}, {});
    bad.node("Relu", "relu", {"x"}, {"y"});
    r = exporter::export_onnx(bad.save("own_no_operands.onnx"), dims({}), &d);
    ASSERT_FALSE(r.ok()) << op;
    const int ins = std::string(op) == "Constant" ? 0 : 1;
    EXPECT_EQ(r.status().message(), "node 'own' (" + std::string(op) + "): expects at least " + std::to_string(ins) +
                                        " inputs and 1 outputs, got 0 and 0");
  }
}

// Constant indices at the ends of int64 (found by fuzz_onnx: negating INT64_MIN overflowed).
TEST(OnnxImport, ExtremeConstantIndicesAreRefused) {
  for (int64_t bad : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    OnnxModel m;
    m.input("x", {"4"}).output("y");
    m.ints("idx", {1}, {bad});
    m.node("Gather", "gather", {"x", "idx"}, {"y"});
    format::ProgramDesc d;
    auto r = exporter::export_onnx(m.save("gather_extreme.onnx"), dims({}), &d);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("index " + std::to_string(bad) + " is out of range for any axis"), std::string::npos)
        << r.status().message();
  }
}

TEST(OnnxImport, UnsupportedOpsListedAtOnce) {
  OnnxModel m;
  m.input("x", {"4"}).output("y");
  m.node("Relu", "ok", {"x"}, {"a"});
  m.node("FancyOp", "f1", {"a"}, {"b"});
  m.node("Det", "d1", {"b"}, {"c"});
  // Grouped by type with a count and the first three names (a quantized model repeats a
  // few types hundreds of times).
  std::string prev = "c";
  for (int k = 2; k <= 5; ++k) {
    const std::string out = k == 5 ? "y" : "f" + std::to_string(k);
    m.node("FancyOp", "f" + std::to_string(k), {prev}, {out});
    prev = out;
  }
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("unsupported.onnx"), {}, &d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "unsupported ops in 6 node(s) of 2 type(s): FancyOp x5 ('f1', 'f2', 'f3', ...); Det x1 ('d1'); Kiln's op list is "
            "src/kernels/portable/ops.inc");
}

TEST(OnnxImport, ForcedSpecializationIsReported) {
  // Reshape [batch, 8] to a literal [1, 8]: only batch == 1 works.
  OnnxModel m;
  m.input("x", {"batch", "8"}).output("y");
  m.ints("shape", {2}, {1, 8});
  m.node("Reshape", "Reshape_3", {"x", "shape"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("forced.onnx"), dims({"batch=1..16"}), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dim 'batch' is specialized to 1 by node 'Reshape_3' (Reshape)"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("export with --dim batch=1"), std::string::npos);
  // Pinned, the same model exports.
  EXPECT_TRUE(exporter::export_onnx(m.save("forced.onnx"), dims({"batch=1"}), &d).ok());
}

TEST(OnnxImport, Opset10ResizeHasUpsampleGeometry) {
  // Regression: Resize-10 (X, scales) ran with opset 11's default half_pixel coordinates.
  // Resize-10 maps output x to input x / scale (asymmetric); nearest takes the floor, or the
  // ceiling on a shrinking axis (ONNX Runtime's rule, checked against it at these shapes).
  // X[r][c] = 7r + c is linear, so bilinear sampling gives 7*min(r', 4) + min(c', 6) exactly.
  struct Case {
    const char* mode;
    float sh, sw;
    int64_t oh, ow;
  };
  for (const Case& k : {Case{"nearest", 0.6f, 0.7f, 3, 4}, Case{"nearest", 2.5f, 1.5f, 12, 10},
                        Case{"linear", 0.6f, 0.7f, 3, 4}, Case{"linear", 2.5f, 1.5f, 12, 10}}) {
    OnnxModel m(10);
    m.input("x", {"1", "1", "5", "7"}).output("y");
    m.floats("scales", {4}, {1.f, 1.f, k.sh, k.sw});
    OnnxModel::attr_str(m.node("Resize", "resize", {"x", "scales"}, {"y"}), "mode", k.mode);
    format::ProgramDesc d;
    auto r = exporter::export_onnx(m.save("resize10.onnx"), {}, &d);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto l = load(d);
    ASSERT_TRUE(l->method->bind_shapes({{1, 1, 5, 7}}).ok());
    for (int i = 0; i < 35; ++i) l->method->input_data<float>(0)[i] = static_cast<float>(i);
    ASSERT_TRUE(l->method->execute().ok());
    const TensorView& y = l->method->output(0);
    ASSERT_EQ(y.dims[2], k.oh);
    ASSERT_EQ(y.dims[3], k.ow);
    const bool nearest = std::string(k.mode) == "nearest";
    for (int64_t i = 0; i < k.oh; ++i)
      for (int64_t j = 0; j < k.ow; ++j) {
        const double rh = i / static_cast<double>(k.sh), rw = j / static_cast<double>(k.sw);
        const double want = nearest ? 7 * std::min(4.0, k.sh < 1 ? std::ceil(rh) : std::floor(rh)) +
                                          std::min(6.0, k.sw < 1 ? std::ceil(rw) : std::floor(rw))
                                    : 7 * std::min(rh, 4.0) + std::min(rw, 6.0);
        EXPECT_NEAR(y.as<float>()[i * k.ow + j], want, 1e-4) << k.mode << " " << k.sh << " at " << i << "," << j;
      }
  }
}

TEST(OnnxImport, TorchOpset9ArangeBecomesRange) {
  // torch before opset 11 writes arange(seq) as NonZero(ConstantOfShape([seq], 1)), then
  // Transpose and Squeeze. Here y = x + arange(seq) for x [1, seq].
  for (int64_t fill : {1, 0}) {
    OnnxModel m(9);
    m.input("x", {"1", "seq"}).output("y");
    m.ints("one", {}, {1});
    m.node("Shape", "shape", {"x"}, {"s"});
    m.node("Gather", "gather", {"s", "one"}, {"n"});
    OnnxModel::attr_ints(m.node("Unsqueeze", "unsqueeze", {"n"}, {"n1"}), "axes", {0});
    OnnxModel::attr_i64_tensor(m.node("ConstantOfShape", "fill", {"n1"}, {"ones"}), "value", fill);
    m.node("NonZero", "nonzero", {"ones"}, {"nz"});
    m.node("Transpose", "transpose", {"nz"}, {"nzt"});
    OnnxModel::attr_ints(m.node("Squeeze", "squeeze", {"nzt"}, {"idx"}), "axes", {1});
    OnnxModel::attr_int(m.node("Cast", "cast", {"idx"}, {"f"}), "to", onnx::TensorProto::FLOAT);
    m.node("Add", "add", {"x", "f"}, {"y"});
    format::ProgramDesc d;
    auto r = exporter::export_onnx(m.save("arange9.onnx"), dims({"seq=1..32"}), &d);
    if (fill == 0) {  // all zeros: the count is a data-dependent dim, known (0) when NonZero runs
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->ops.count("NonZero"), 1u);
      auto l = load(d);
      ASSERT_TRUE(l->method->bind_shapes({{1, 4}}).ok());
      Status st = l->method->execute();  // Add needs the count to broadcast with seq: checked once it is known
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.message().find("nonzero"), std::string::npos) << st.message();
      EXPECT_EQ(l->method->dim_value("nonzero"), 0);
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status().message();
    // [1, seq] -> [seq, 1] moves only a size-1 axis: a view, not a Transpose instruction
    // (SymbolicInts makes the scalar seq that Range reads).
    EXPECT_EQ(r->ops, (std::map<std::string, int>{{"Add", 1}, {"Cast", 1}, {"Range", 1}, {"SymbolicInts", 1}}));
    auto l = load(d);
    for (int64_t seq : {32, 5, 1}) {
      ASSERT_TRUE(l->method->bind_shapes({{1, seq}}).ok());
      for (int64_t j = 0; j < seq; ++j) l->method->input_data<float>(0)[j] = 0.5f * static_cast<float>(j * j);
      ASSERT_TRUE(l->method->execute().ok());
      const TensorView& y = l->method->output(0);
      ASSERT_EQ(y.dims[1], seq);
      for (int64_t j = 0; j < seq; ++j) EXPECT_EQ(y.as<float>()[j], 0.5f * static_cast<float>(j * j) + j) << seq;
    }
  }
}

TEST(OnnxImport, FloatShapeArithmeticFolds) {
  // As tf2onnx and paddle2onnx write a 2x resize: sizes = Cast(int64)(Cast(float)(Shape(x)[2:4]) * 2.0).
  OnnxModel m;
  m.input("x", {"1", "3", "H", "W"}).output("y");
  m.ints("starts", {1}, {2}).ints("ends", {1}, {4}).ints("nc", {2}, {1, 3});
  m.floats("two", {1}, {2.f}).floats("none", {0}, {});
  m.node("Shape", "shape", {"x"}, {"s"});
  m.node("Slice", "slice", {"s", "starts", "ends"}, {"hw"});
  OnnxModel::attr_int(m.node("Cast", "to_float", {"hw"}, {"hwf"}), "to", onnx::TensorProto::FLOAT);
  m.node("Mul", "double", {"hwf", "two"}, {"hw2f"});
  OnnxModel::attr_int(m.node("Cast", "to_int", {"hw2f"}, {"hw2"}), "to", onnx::TensorProto::INT64);
  OnnxModel::attr_int(m.node("Concat", "sizes", {"nc", "hw2"}, {"sz"}), "axis", 0);
  auto& resize = m.node("Resize", "resize", {"x", "none", "none", "sz"}, {"y"});
  OnnxModel::attr_str(resize, "coordinate_transformation_mode", "asymmetric");
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("float_shape.onnx"), dims({"H=1..16", "W=1..16"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->outputs, (std::vector<std::string>{"'y' f32 [1, 3, 2*H, 2*W]"}));
  EXPECT_EQ(r->ops, (std::map<std::string, int>{{"Resize", 1}, {"SymbolicInts", 1}}));  // no float math left
  auto l = load(d);
  for (auto [h, w] : {std::pair<int64_t, int64_t>{16, 16}, {3, 5}, {1, 1}}) {
    ASSERT_TRUE(l->method->bind_shapes({{1, 3, h, w}}).ok());
    float* x = l->method->input_data<float>(0);
    for (int64_t i = 0; i < 3 * h * w; ++i) x[i] = static_cast<float>(i);
    ASSERT_TRUE(l->method->execute().ok());
    const TensorView& y = l->method->output(0);
    ASSERT_EQ(y.dims[2], 2 * h);
    ASSERT_EQ(y.dims[3], 2 * w);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < 2 * h; ++i)
        for (int64_t j = 0; j < 2 * w; ++j)
          ASSERT_EQ(y.as<float>()[(c * 2 * h + i) * 2 * w + j], x[(c * h + i / 2) * w + j / 2]) << h << "x" << w;
  }
}

TEST(OnnxImport, FloatRangeFromShapeSurvivesTheReader) {
  // y = x + arange(float(len(x))): the f32 length reaches Range through a view (Squeeze),
  // and the file's reader must see the same carried values as export did.
  OnnxModel m;
  m.input("x", {"seq"}).output("y");
  m.ints("axes", {1}, {0}).floats("zero", {}, {0.f}).floats("one", {}, {1.f});
  m.node("Shape", "shape", {"x"}, {"s"});
  OnnxModel::attr_int(m.node("Cast", "to_float", {"s"}, {"sf"}), "to", onnx::TensorProto::FLOAT);
  m.node("Squeeze", "squeeze", {"sf", "axes"}, {"n"});
  m.node("Range", "range", {"zero", "n", "one"}, {"r"});
  m.node("Add", "add", {"x", "r"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("float_range.onnx"), dims({"seq=1..64"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->outputs, (std::vector<std::string>{"'y' f32 [seq]"}));
  auto l = load(d);
  for (int64_t seq : {64, 9, 1}) {
    ASSERT_TRUE(l->method->bind_shapes({{seq}}).ok());
    for (int64_t j = 0; j < seq; ++j) l->method->input_data<float>(0)[j] = 0.25f;
    ASSERT_TRUE(l->method->execute().ok());
    for (int64_t j = 0; j < seq; ++j) EXPECT_EQ(l->method->output(0).as<float>()[j], 0.25f + j);
  }
}

TEST(OnnxImport, DropoutMaskAndTrainingMode) {
  // torchvision's Swin exports Dropout(p=0, training=True) with its mask output.
  auto model = [](float ratio, bool mode) {
    OnnxModel m;
    m.input("x", {"n", "3"}).output("y").output("mask", onnx::TensorProto::BOOL);
    m.floats("ratio", {}, {ratio});
    auto* t = m.graph()->add_initializer();
    t->set_name("training");
    t->set_data_type(onnx::TensorProto::BOOL);
    t->add_int32_data(mode ? 1 : 0);
    m.node("Dropout", "drop", {"x", "ratio", "training"}, {"y", "mask"});
    return m;
  };
  for (bool mode : {false, true}) {
    OnnxModel m = model(0.f, mode);
    format::ProgramDesc d;
    auto r = exporter::export_onnx(m.save("dropout.onnx"), dims({"n=1..8"}), &d);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto l = load(d);
    for (int64_t n : {8, 1}) {
      ASSERT_TRUE(l->method->bind_shapes({{n, 3}}).ok());
      for (int64_t i = 0; i < 3 * n; ++i) l->method->input_data<float>(0)[i] = static_cast<float>(i) - 4.f;
      ASSERT_TRUE(l->method->execute().ok());
      const TensorView& mask = l->method->output(1);
      ASSERT_EQ(mask.dtype, DType::kBool);
      ASSERT_EQ(mask.numel(), 3 * n);
      for (int64_t i = 0; i < 3 * n; ++i) {
        EXPECT_EQ(l->method->output(0).as<float>()[i], static_cast<float>(i) - 4.f);
        EXPECT_EQ(mask.as<uint8_t>()[i], 1);
      }
    }
  }
  OnnxModel dropping = model(0.5f, true);
  format::ProgramDesc d;
  auto r = exporter::export_onnx(dropping.save("dropping.onnx"), dims({"n=1..8"}), &d);
  EXPECT_EQ(r.status().message(),
            "node 'drop' (Dropout): training_mode is true with a non-zero ratio, so it drops values at random; "
            "export the model in eval mode");
  OnnxModel runtime_mode;
  runtime_mode.input("x", {"4"}).input("training", {}, onnx::TensorProto::BOOL).output("y");
  runtime_mode.node("Dropout", "drop", {"x", "", "training"}, {"y"});
  r = exporter::export_onnx(runtime_mode.save("runtime_mode.onnx"), {}, &d);
  EXPECT_EQ(r.status().message(), "node 'drop' (Dropout): its ratio and training_mode must be constants");
}

TEST(OnnxImport, DivisibilityGuardSuggestsAStep) {
  // Reshape [batch, length] into [4*batch, -1]: length % 4 == 0, which a step can state.
  OnnxModel m;
  m.input("x", {"batch", "length"}).output("y");
  m.ints("shape", {2}, {4, -1});
  m.node("Reshape", "split4", {"x", "shape"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("guard_step.onnx"), dims({"batch=1", "length=3..50"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // The guard reads one dim: export folds it into the dim's step and range.
  EXPECT_TRUE(r->guards.empty());
  EXPECT_EQ(r->narrowed, std::vector<std::string>{"length: requested [3, 50], admissible [4, 48] step 4 (node 'split4' "
                                                  "(Reshape) needs length % 4 == 0)"});
  EXPECT_EQ(d.methods[0].dims[0].step, 4);
  // Beyond the census (more than 100,000 values) it stays a guard, with the step to write.
  format::ProgramDesc wide;
  r = exporter::export_onnx(m.save("guard_step.onnx"), dims({"batch=1", "length=3..500000"}), &wide);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->guards.size(), 1u);
  EXPECT_EQ(r->guards[0],
            "length % 4 == 0  (node 'split4' (Reshape) to reshape [1, length] into [4, -1]); to state it in the "
            "contract instead: --dim length=4..500000:4");
  // With that step the guard is proven and disappears.
  format::ProgramDesc stepped;
  r = exporter::export_onnx(m.save("guard_step.onnx"), dims({"batch=1", "length=4..48:4"}), &stepped);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->guards.empty());
}

// --bucket seq=4,8: one static method per size, marked as buckets of 'forward' with the input
// axes that carry seq, the pads and the output axes to cut back; the weights are stored once;
// each bucket computes what a static export at its size computes; the reader checks the axes.
TEST(OnnxImport, BucketsAreStaticMethodsWithDispatchData) {
  OnnxModel m;
  m.input("x", {"b", "seq", "4"}).input("mask", {"b", "seq"}).output("y").output("pooled");
  m.floats("w", {4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  m.node("MatMul", "mm", {"x", "w"}, {"y"});
  m.ints("axes", {1}, {1});
  m.node("ReduceSum", "pool", {"y", "axes"}, {"pooled"});
  ExportOptions o = dims({"b=1..2"});
  o.bucket_dim = "seq";
  o.bucket_sizes = {8, 4};
  o.pads["mask"] = -1;
  o.delegate = "none";
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("buckets.onnx"), o, &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(d.methods.size(), 2u);
  EXPECT_EQ(d.methods[0].name, "forward@seq=4");
  EXPECT_EQ(d.methods[1].name, "forward@seq=8");
  const format::BucketDesc& b = d.methods[1].bucket;
  EXPECT_EQ(b.of, "forward");
  EXPECT_EQ(b.dim, "seq");
  EXPECT_EQ(b.size, 8);
  EXPECT_EQ(b.input_axes, (std::vector<int32_t>{0, 1, 1, 1}));  // x axis 1, mask axis 1
  EXPECT_EQ(b.output_axes, (std::vector<int32_t>{0, 1}));       // y axis 1 (pooled has none)
  EXPECT_EQ(b.pads, (std::vector<double>{0, -1}));
  EXPECT_EQ(d.constants.size(), 64u + 8u) << "the weights (64 bytes) and the axes (8) are stored once for both buckets";
  EXPECT_EQ(r->notes[0], "buckets of 'forward' over seq: forward@seq=4, forward@seq=8 (the last one's summary above)");
  // A bucket computes what a static export at its size computes.
  ExportOptions s = dims({"b=1..2", "seq=8"});
  s.delegate = "none";
  format::ProgramDesc st;
  ASSERT_TRUE(exporter::export_onnx(m.save("buckets.onnx"), s, &st).ok());
  auto bucketed = load(d);  // the first method: forward@seq=4
  auto lb = std::make_unique<Loaded>(*format::serialize_program(d));
  auto pb = lb->buf.load();
  ASSERT_TRUE(pb.ok()) << pb.status().message();
  auto m8 = Method::create(**pb, "forward@seq=8");
  ASSERT_TRUE(m8.ok()) << m8.status().message();
  auto ls = load(st);
  for (Method* x : {m8->get(), ls->method.get()}) {
    ASSERT_TRUE(x->bind_shapes({{2, 8, 4}, {2, 8}}).ok());
    for (int64_t k = 0; k < x->input(0).numel(); ++k) x->input_data<float>(0)[k] = static_cast<float>(k % 5) - 2.f;
    for (int64_t k = 0; k < x->input(1).numel(); ++k) x->input_data<float>(1)[k] = 1.f;
    ASSERT_TRUE(x->execute().ok());
  }
  ASSERT_EQ((*m8)->output(0).nbytes(), ls->method->output(0).nbytes());
  EXPECT_EQ(std::memcmp((*m8)->output(0).data, ls->method->output(0).data, ls->method->output(0).nbytes()), 0);
  // The bucketed call: seq = 3 runs the bucket of 4 (x padded with 0, mask with -1), and the
  // outputs cut back to seq = 3 equal a static export at 3 (MatMul is per position; the padded
  // rows of x are 0, so the sum over seq is unchanged).
  auto bm = BucketedMethod::create(**pb, "forward");
  ASSERT_TRUE(bm.ok()) << bm.status().message();
  EXPECT_EQ((*bm)->sizes(), (std::vector<int64_t>{4, 8}));
  ExportOptions s3 = dims({"b=1..2", "seq=3"});
  s3.delegate = "none";
  format::ProgramDesc st3;
  ASSERT_TRUE(exporter::export_onnx(m.save("buckets.onnx"), s3, &st3).ok());
  auto l3 = load(st3);
  std::vector<float> x(2 * 3 * 4), mask(2 * 3, 1.f);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k % 7) - 3.f;
  TensorView in[2];
  in[0].dtype = in[1].dtype = DType::kF32;
  in[0].rank = 3, in[0].dims[0] = 2, in[0].dims[1] = 3, in[0].dims[2] = 4, in[0].data = x.data();
  in[1].rank = 2, in[1].dims[0] = 2, in[1].dims[1] = 3, in[1].data = mask.data();
  ASSERT_TRUE((*bm)->run(in, 2).ok());
  EXPECT_EQ((*bm)->last_bucket(), "forward@seq=4");
  ASSERT_TRUE(l3->method->bind(in, 2).ok());
  std::memcpy(l3->method->input(0).data, x.data(), x.size() * 4);
  std::memcpy(l3->method->input(1).data, mask.data(), mask.size() * 4);
  ASSERT_TRUE(l3->method->execute().ok());
  for (size_t o = 0; o < 2; ++o) {
    const TensorView &got = (*bm)->output(o), &want = l3->method->output(o);
    ASSERT_EQ(got.rank, want.rank);
    for (int k = 0; k < got.rank; ++k) EXPECT_EQ(got.dims[k], want.dims[k]) << "output " << o << " axis " << k;
    EXPECT_EQ(std::memcmp(got.data, want.data, want.nbytes()), 0) << "output " << o;
  }
  in[0].dims[1] = in[1].dims[1] = 9;
  EXPECT_EQ((*bm)->run(in, 2).message(),
            "'seq' is 9, above the largest bucket 8 (buckets: 4, 8); truncate on the host or export a larger bucket");
  in[1].dims[1] = 5;
  EXPECT_EQ((*bm)->run(in, 2).message(), "inputs disagree on 'seq': 9 and 5");
  // Damage: a bucket axis that does not hold the bucket's size is refused at load.
  d.methods[1].bucket.input_axes = {0, 2};
  auto damaged = std::make_unique<Loaded>(*format::serialize_program(d));
  EXPECT_EQ(damaged->buf.load().status().message(),
            "damaged program: method 'forward@seq=8' bucket names an input axis that does not hold its size");
  // Errors: a dim no input uses, a pad for no input.
  o.bucket_dim = "nope";
  format::ProgramDesc e;
  const std::string nope = exporter::export_onnx(m.save("buckets.onnx"), o, &e).status().message();
  EXPECT_NE(nope.find("--dim names 'nope', which no input axis uses"), std::string::npos) << nope;
}

TEST(OnnxImport, BatchNormFoldsIntoConvAndMatches) {
  OnnxModel m;
  m.input("x", {"N", "2", "H", "W"}).output("y");
  std::vector<float> w(3 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  m.floats("w", {3, 2, 3, 3}, w).floats("b", {3}, {0.1f, -0.2f, 0.3f});
  m.floats("scale", {3}, {1.5f, 0.5f, 2.0f}).floats("shift", {3}, {0.0f, 1.0f, -1.0f});
  m.floats("mean", {3}, {0.2f, -0.1f, 0.0f}).floats("var", {3}, {1.0f, 4.0f, 0.25f});
  auto& conv = m.node("Conv", "conv", {"x", "w", "b"}, {"c"});
  OnnxModel::attr_ints(conv, "pads", {1, 1, 1, 1});
  m.node("BatchNormalization", "bn", {"c", "scale", "shift", "mean", "var"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("bn.onnx"), dims({"N=1..2", "H=1..9", "W=1..9"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->ops, (std::map<std::string, int>{{"Conv", 1}}));
  auto l = load(d);
  ASSERT_TRUE(l->method->bind_shapes({{1, 2, 3, 2}}).ok());
  float* x = l->method->input_data<float>(0);
  for (int i = 0; i < 12; ++i) x[i] = std::cos(static_cast<float>(i));
  ASSERT_TRUE(l->method->execute().ok());
  const TensorView& y = l->method->output(0);
  ASSERT_EQ(y.numel(), 3 * 3 * 2);
  // Reference: conv then batch norm, in double.
  const double scale[] = {1.5, 0.5, 2.0}, shift[] = {0, 1, -1}, mean[] = {0.2, -0.1, 0}, var[] = {1, 4, 0.25}, bias[] = {0.1, -0.2, 0.3};
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) {
        double acc = bias[o];
        for (int c = 0; c < 2; ++c)
          for (int u = 0; u < 3; ++u)
            for (int v = 0; v < 3; ++v) {
              int yy = i - 1 + u, xx = j - 1 + v;
              if (yy < 0 || yy >= 3 || xx < 0 || xx >= 2) continue;
              acc += std::cos(static_cast<double>((c * 3 + yy) * 2 + xx)) * w[((o * 2 + c) * 3 + u) * 3 + v];
            }
        double want = (acc - mean[o]) / std::sqrt(var[o] + 1e-5) * scale[o] + shift[o];
        EXPECT_NEAR(y.as<float>()[(o * 3 + i) * 2 + j], want, 1e-4);
      }
}

TEST(OnnxImport, ConstantIdentityAndConstantIfAreRemoved) {
  OnnxModel m;
  m.input("x", {"n"}).input("rate", {}, onnx::TensorProto::INT64).output("y");
  auto& c = m.node("Constant", "two", {}, {"two"});
  auto* a = c.add_attribute();
  a->set_name("value_float");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(2.0f);
  m.node("Identity", "id", {"x"}, {"x2"});
  m.ints("k16000", {}, {16000});
  m.node("Equal", "is16k", {"rate", "k16000"}, {"cond"});
  auto& iff = m.node("If", "branch", {"cond"}, {"y"});
  auto* then_g = iff.add_attribute();
  then_g->set_name("then_branch");
  then_g->set_type(onnx::AttributeProto::GRAPH);
  auto* tg = then_g->mutable_g();
  auto* tn = tg->add_node();
  tn->set_op_type("Mul"), tn->set_name("double"), tn->add_input("x2"), tn->add_input("two"), tn->add_output("t_out");
  tg->add_output()->set_name("t_out");
  auto* else_g = iff.add_attribute();
  else_g->set_name("else_branch");
  else_g->set_type(onnx::AttributeProto::GRAPH);
  auto* eg = else_g->mutable_g();
  auto* en = eg->add_node();
  en->set_op_type("Neg"), en->set_name("negate"), en->add_input("x2"), en->add_output("e_out");
  eg->add_output()->set_name("e_out");
  std::string path = m.save("if.onnx");
  for (auto [rate, op] : {std::pair{"16000", "Mul"}, std::pair{"8000", "Neg"}}) {
    ExportOptions o = dims({"n=1..8"});
    o.consts.emplace_back("rate", rate);
    format::ProgramDesc d;
    auto r = exporter::export_onnx(path, o, &d);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->ops, (std::map<std::string, int>{{op, 1}})) << rate;
    EXPECT_EQ(r->instructions, 1u);
  }
  // Without --const the rate is read at run time: both branches are kept as blocks and the
  // condition chooses one at execute.
  format::ProgramDesc d;
  auto r = exporter::export_onnx(path, dims({"n=1..8"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->runtime_branches, 1u);
  EXPECT_EQ(r->ops, (std::map<std::string, int>{{"Equal", 1}, {"KilnIf", 1}, {"Mul", 1}, {"KilnElse", 1}, {"Neg", 1},
                                                {"KilnSelect", 1}}));
  auto l = load(d);
  auto meta = tooling::method_report(*l->program, d.methods[0].name);
  ASSERT_TRUE(meta.ok());
  ASSERT_EQ(meta->branches.size(), 1u);  // Equal, KilnIf, [Mul], KilnElse, [Neg], KilnSelect
  EXPECT_EQ(meta->branches[0].node, "branch");
  EXPECT_EQ(meta->branches[0].then_begin, 2u);
  EXPECT_EQ(meta->branches[0].then_end, 3u);
  EXPECT_EQ(meta->branches[0].else_begin, 4u);
  EXPECT_EQ(meta->branches[0].else_end, 5u);
  for (int64_t rate : {16000, 8000, 16000}) {
    for (int64_t n : {8, 3}) {
      ASSERT_TRUE(l->method->bind_shapes({{n}, {}}).ok());
      for (int64_t i = 0; i < n; ++i) l->method->input_data<float>(0)[i] = static_cast<float>(i) - 1.5f;
      *l->method->input_data<int64_t>(1) = rate;
      ASSERT_TRUE(l->method->execute().ok());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(l->method->output(0).as<float>()[i], (static_cast<float>(i) - 1.5f) * (rate == 16000 ? 2.f : -1.f)) << rate;
    }
  }
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

TEST(OnnxImport, SoftmaxBeforeOpset13NormalizesTheFlattenedTail) {
  // Opset 11: softmax over dims [axis, rank) taken together (axis defaults to 1).
  OnnxModel m(11);
  m.input("x", {"n", "2", "3"}).output("y");
  m.node("Softmax", "sm", {"x"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("softmax11.onnx"), dims({"n=1..4"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto l = load(d);
  ASSERT_TRUE(l->method->bind_shapes({{2, 2, 3}}).ok());
  float* x = l->method->input_data<float>(0);
  for (int i = 0; i < 12; ++i) x[i] = 0.1f * static_cast<float>(i * i % 7);
  ASSERT_TRUE(l->method->execute().ok());
  const float* y = l->method->output(0).as<float>();
  for (int b = 0; b < 2; ++b) {
    double sum = 0;
    for (int k = 0; k < 6; ++k) sum += std::exp(static_cast<double>(x[b * 6 + k]));
    for (int k = 0; k < 6; ++k) EXPECT_NEAR(y[b * 6 + k], std::exp(static_cast<double>(x[b * 6 + k])) / sum, 1e-6);
  }
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

TEST(OnnxImport, SignatureKeepsTheGraphsNames) {
  // lengths passes through Identity to output_lengths; x is also an output itself; y and y2
  // are one value; a constant is an output. Every name is the graph's own.
  OnnxModel m;
  m.input("x", {"n", "3"}).input("lengths", {"n"}, onnx::TensorProto::INT64);
  m.output("y").output("output_lengths", onnx::TensorProto::INT64).output("x").output("y2").output("k");
  m.floats("k", {2}, {1.5f, -2.f});
  m.node("Relu", "relu", {"x"}, {"y"});
  m.node("Identity", "pass", {"lengths"}, {"output_lengths"});
  m.node("Identity", "again", {"y"}, {"y2"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("names.onnx"), dims({"n=1..8"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto l = load(d);
  auto meta = l->program->method_meta(d.methods[0].name);
  ASSERT_TRUE(meta.ok());
  std::vector<std::string> ins, outs;
  for (const TensorSpec& t : meta->inputs) ins.push_back(t.name);
  for (const TensorSpec& t : meta->outputs) outs.push_back(t.name);
  EXPECT_EQ(ins, (std::vector<std::string>{"x", "lengths"}));
  EXPECT_EQ(outs, (std::vector<std::string>{"y", "output_lengths", "x", "y2", "k"}));
  for (int64_t n : {8, 2}) {
    ASSERT_TRUE(l->method->bind_shapes({{n, 3}, {n}}).ok());
    for (int64_t i = 0; i < 3 * n; ++i) l->method->input_data<float>(0)[i] = static_cast<float>(i) - 4.f;
    for (int64_t i = 0; i < n; ++i) l->method->input_data<int64_t>(1)[i] = 10 + i;
    ASSERT_TRUE(l->method->execute().ok());
    ASSERT_EQ(l->method->output(1).numel(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(l->method->output(1).as<int64_t>()[i], 10 + i);
    for (int64_t i = 0; i < 3 * n; ++i) {
      EXPECT_EQ(l->method->output(0).as<float>()[i], std::max(0.f, static_cast<float>(i) - 4.f));
      EXPECT_EQ(l->method->output(3).as<float>()[i], l->method->output(0).as<float>()[i]);
      EXPECT_EQ(l->method->output(2).as<float>()[i], static_cast<float>(i) - 4.f);
    }
    ASSERT_EQ(l->method->output(4).numel(), 2);
    EXPECT_EQ(l->method->output(4).as<float>()[1], -2.f);
  }
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

TEST(OnnxImport, HalfPrecisionInputsAreNotDeclaredFloat) {
  // A float16 (or double) input or output is refused by name: the contract never says f32
  // where the model says float16. float16 weights and casts inside compute in float32.
  for (int elem : {onnx::TensorProto::FLOAT16, onnx::TensorProto::DOUBLE}) {
    OnnxModel m;
    m.input("x", {"n", "3"}, elem).output("y", elem);
    m.node("Relu", "relu", {"x"}, {"y"});
    format::ProgramDesc d;
    auto r = exporter::export_onnx(m.save("half.onnx"), dims({"n=1..4"}), &d);
    ASSERT_FALSE(r.ok());
    const std::string name = elem == onnx::TensorProto::FLOAT16 ? "float16" : "double";
    EXPECT_EQ(r.status().message(), "input 'x' is " + name + "; Kiln exchanges float32 (its " + name +
                                        " weights and casts compute in float32): export the model with float32 inputs and "
                                        "outputs, e.g. onnxconverter_common's convert_float_to_float16(model, keep_io_types=True)");
  }
  OnnxModel out_only;
  out_only.input("x", {"n", "3"}).output("y", onnx::TensorProto::FLOAT16);
  out_only.node("Cast", "half", {"x"}, {"y"}).add_attribute()->set_name("to");
  auto& cast = *out_only.graph()->mutable_node(0)->mutable_attribute(0);
  cast.set_type(onnx::AttributeProto::INT);
  cast.set_i(onnx::TensorProto::FLOAT16);
  format::ProgramDesc d;
  auto r = exporter::export_onnx(out_only.save("half_out.onnx"), dims({"n=1..4"}), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output 'y' is float16"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// An ONNX file has no example shape: a fixed axis's refusal cites the program's input shape,
// never the bound as if it were the example.
TEST(OnnxImport, AFixedAxisRefusalCitesTheProgramsShape) {
  OnnxModel m;
  m.input("x", {"N", "3", "64", "64"}).output("y");
  m.node("Relu", "relu", {"x"}, {"y"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("fixed_axis.onnx"), dims({"N=1..8"}), &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto l = load(d);
  EXPECT_TRUE(l->method->meta().inputs[0].example_shape.empty());
  EXPECT_EQ(l->method->bind_shapes({{2, 3, 65, 64}}).message(),
            "bind: input 'x' (#0) dim 2 is 65 but the program fixed it to 64 (the program's input is [N, 3, 64, 64]); "
            "resize on the host or re-export with --dim to make it dynamic");
}

}  // namespace
}  // namespace kiln::testing
