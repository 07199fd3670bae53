// Fusion matching that holds where torch's exporter writes things its own way: weights shared
// through Identity nodes (torch stores equal weights once), torch 1.13's attention (q scaled
// before the MatMul, baddbmm's alpha and beta as Muls), and near-misses named with the node
// where the match stopped (kiln export --explain-fusion).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "export/onnx/onnx_import.h"
#include "export_test_util.h"
#include "onnx_model_util.h"
#include "tooling/export_report.h"

namespace kiln::testing {
namespace {

// y = LayerNorm(x) * scale + bias over the last axis, as torch's exporter decomposes it.
void layer_norm(OnnxModel& m, const std::string& p, const std::string& x, const std::string& scale, const std::string& bias,
                const std::string& y) {
  auto& r1 = m.node("ReduceMean", p + "/ReduceMean", {x}, {p + "/m"});
  OnnxModel::attr_ints(r1, "axes", {-1});
  m.node("Sub", p + "/Sub", {x, p + "/m"}, {p + "/d"});
  m.node("Pow", p + "/Pow", {p + "/d", "two"}, {p + "/sq"});
  auto& r2 = m.node("ReduceMean", p + "/ReduceMean_1", {p + "/sq"}, {p + "/v"});
  OnnxModel::attr_ints(r2, "axes", {-1});
  m.node("Add", p + "/Add", {p + "/v", "eps"}, {p + "/ve"});
  m.node("Sqrt", p + "/Sqrt", {p + "/ve"}, {p + "/sd"});
  m.node("Div", p + "/Div", {p + "/d", p + "/sd"}, {p + "/n"});
  m.node("Mul", p + "/Mul", {p + "/n", scale}, {p + "/s"});
  m.node("Add", p + "/Add_1", {p + "/s", bias}, {y});
}

std::vector<float> ramp(int64_t n, float a, float b) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(a * static_cast<float>(i) + b);
  return v;
}

// Exports `onnx` fused and unfused, runs both at `shapes` on the same inputs, and compares.
exporter::ExportReport fused_matches_unfused(const std::string& onnx, const std::vector<std::string>& dim_args,
                                             const std::vector<std::vector<int64_t>>& shapes) {
  format::ProgramDesc fused_desc, plain_desc;
  ExportOptions fused = dims(dim_args), plain = dims(dim_args);
  fused.delegate = plain.delegate = "none";
  plain.fuse = false;
  auto report = exporter::export_onnx(onnx, fused, &fused_desc);
  EXPECT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(exporter::export_onnx(onnx, plain, &plain_desc).ok());
  auto a = load(fused_desc), b = load(plain_desc);
  EXPECT_TRUE(a->method->bind_shapes(shapes).ok());
  EXPECT_TRUE(b->method->bind_shapes(shapes).ok());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<float> x = ramp(a->method->input(i).numel(), 0.37f + static_cast<float>(i), 0.1f);
    std::copy(x.begin(), x.end(), a->method->input_data<float>(i));
    std::copy(x.begin(), x.end(), b->method->input_data<float>(i));
  }
  EXPECT_TRUE(a->method->execute().ok());
  EXPECT_TRUE(b->method->execute().ok());
  const TensorView &ya = a->method->output(0), &yb = b->method->output(0);
  EXPECT_EQ(ya.numel(), yb.numel());
  for (int64_t k = 0; k < ya.numel() && k < yb.numel(); ++k)
    EXPECT_NEAR(ya.as<float>()[k], yb.as<float>()[k], 1e-5f) << "element " << k;
  return report.ok() ? *report : exporter::ExportReport{};
}

// A fresh model's LayerNorms hold equal weights; torch stores them once and makes the others
// Identity(first). Every LayerNorm fuses (only the first did when Scale had to be an initializer).
TEST(Fusion, LayerNormsWhoseWeightsAreIdentitiesOfSharedOnesFuse) {
  OnnxModel m;
  m.input("x", {"N", "8"}).output("y");
  m.floats("two", {}, {2.f}).floats("eps", {}, {1e-5f});
  m.floats("w0", {8}, std::vector<float>(8, 1.f)).floats("b0", {8}, std::vector<float>(8, 0.f));
  m.node("Identity", "share_w", {"w0"}, {"w1"});
  m.node("Identity", "share_b", {"b0"}, {"b1"});
  layer_norm(m, "/ln0", "x", "w0", "b0", "h");
  m.node("Relu", "/act", {"h"}, {"hr"});
  layer_norm(m, "/ln1", "hr", "w1", "b1", "y");
  const auto r = fused_matches_unfused(m.save("ln_identity.onnx"), {"N=1..4"}, {{3, 8}});
  EXPECT_EQ(r.fusions.size(), 2u);
  EXPECT_TRUE(r.fusion_misses.empty()) << r.fusion_misses.front();
}

// torch 1.13's MultiheadAttention: q / sqrt(d) before bmm(q, k^T), then baddbmm's
// scores * alpha + mask * beta, Softmax, bmm with v.
TEST(Fusion, Torch113AttentionFuses) {
  OnnxModel m;
  m.input("q", {"B", "L", "4"}).input("k", {"B", "L", "4"}).input("v", {"B", "L", "4"}).input("mask", {"B", "L", "L"});
  m.output("y");
  m.floats("sqrt_d", {}, {2.f}).floats("alpha", {}, {1.f}).floats("beta", {}, {1.f});
  m.node("Div", "/attn/Div_2", {"q", "sqrt_d"}, {"qs"});
  auto& t = m.node("Transpose", "/attn/Transpose_4", {"k"}, {"kt"});
  OnnxModel::attr_ints(t, "perm", {0, 2, 1});
  m.node("MatMul", "/attn/MatMul_1", {"qs", "kt"}, {"scores"});
  m.node("Mul", "/attn/Mul_5", {"scores", "alpha"}, {"sa"});
  m.node("Mul", "/attn/Mul_6", {"mask", "beta"}, {"mb"});
  m.node("Add", "/attn/Add_2", {"sa", "mb"}, {"pre"});
  auto& sm = m.node("Softmax", "/attn/Softmax", {"pre"}, {"p"});
  OnnxModel::attr_int(sm, "axis", -1);
  m.node("MatMul", "/attn/MatMul_2", {"p", "v"}, {"y"});
  const auto r = fused_matches_unfused(m.save("attn_113.onnx"), {"B=1..2", "L=1..16"}, {{2, 5, 4}, {2, 5, 4}, {2, 5, 4}, {2, 5, 5}});
  ASSERT_EQ(r.fusions.size(), 1u);
  EXPECT_EQ(r.fusions[0].substr(0, 15), "FusedAttention ");
  EXPECT_EQ(r.ops.count("Softmax"), 0u);
  EXPECT_EQ(r.ops.count("Div"), 0u);  // q's scale folded into the attention's
}

// A LayerNorm whose Scale is computed is a near-miss: the summary counts it, and with
// --explain-fusion names where the match stopped and why.
TEST(Fusion, NearMissesNameTheNodeWhereTheMatchStopped) {
  OnnxModel m;
  m.input("x", {"N", "8"}).output("y");
  m.floats("two", {}, {2.f}).floats("eps", {}, {1e-5f});
  m.floats("w0", {8}, ramp(8, 0.3f, 1.f)).floats("b0", {8}, ramp(8, 0.7f, 0.f));
  m.node("Add", "/scale/Add", {"w0", "w0"}, {"w2"});  // Scale computed at run time: not a constant
  layer_norm(m, "/ln", "x", "w2", "b0", "y");
  ExportOptions o = dims({"N=1..4"});
  format::ProgramDesc d;
  auto r = exporter::export_onnx(m.save("ln_near_miss.onnx"), o, &d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->fusions.empty());
  ASSERT_EQ(r->fusion_misses.size(), 1u);
  const std::string why = "LayerNormalization from '/ln/Div' (Div): stopped at '/ln/Mul' (Mul): Scale is not a rank-1 f32 "
                          "initializer (or an Identity of one)";
  EXPECT_EQ(r->fusion_misses[0], why);
  std::string text = tooling::format_report(*r);
  EXPECT_NE(text.find("fusion near-misses: 1 (LayerNormalization x1; kiln export --explain-fusion names each"), std::string::npos)
      << text;
  o.explain_fusion = true;
  format::ProgramDesc d2;
  r = exporter::export_onnx(m.save("ln_near_miss.onnx"), o, &d2);
  ASSERT_TRUE(r.ok());
  text = tooling::format_report(*r);
  EXPECT_NE(text.find("fusion near-misses: 1 (LayerNormalization x1):\n    " + why + "\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln::testing
