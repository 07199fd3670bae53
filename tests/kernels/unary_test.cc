// Pointwise unary ops (Relu ... Cos, Tan, Atan, Sinh, Cosh, Asin, Acos, Asinh, Acosh, Atanh,
// Elu, Selu, Softplus, Softsign, Sign, ThresholdedRelu, Mish): hand cases (Round halves to
// even, Softplus never overflows, the inverse functions are NaN outside their domain), a
// seeded sweep against a double reference (also run in oversized slots), empty tensors,
// errors, and the symbolic shape, evaluated and run far below the bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

std::vector<float> run_f32(const char* op, const Tensor& x, const core::AttrStore& attrs = core::AttrStore()) {
  OpResult r = run_op(op, {x}, attrs);
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  return r.outputs.empty() ? std::vector<float>{} : r.outputs[0].values<float>();
}

TEST(Unary, HandComputedActivations) {
  Tensor x = make_tensor<float>({2, 3}, {-2, -0.5f, 0, 0.5f, 3, 6});
  EXPECT_EQ(run_f32("Relu", x), (std::vector<float>{0, 0, 0, 0.5f, 3, 6}));
  EXPECT_EQ(run_f32("LeakyRelu", x), (std::vector<float>{-0.02f, -0.005f, 0, 0.5f, 3, 6}));
  EXPECT_EQ(run_f32("LeakyRelu", x, core::AttrStore().set_float("alpha", 0.5f)),
            (std::vector<float>{-1, -0.25f, 0, 0.5f, 3, 6}));
  // HardSigmoid: clamp(0.2 x + 0.5, 0, 1); HardSwish: x * clamp(x / 6 + 0.5, 0, 1).
  std::vector<float> hs = run_f32("HardSigmoid", x);
  std::vector<float> want_hs = {0.1f, 0.4f, 0.5f, 0.6f, 1, 1};
  for (size_t i = 0; i < hs.size(); ++i) EXPECT_NEAR(hs[i], want_hs[i], 1e-6) << i;
  std::vector<float> hw = run_f32("HardSwish", x);
  std::vector<float> want_hw = {-2 * (1.f / 6), -0.5f * (5.f / 12), 0, 0.5f * (7.f / 12), 3, 6};
  for (size_t i = 0; i < hw.size(); ++i) EXPECT_NEAR(hw[i], want_hw[i], 1e-6) << i;
  std::vector<float> sg = run_f32("Sigmoid", make_tensor<float>({3}, {0, -100, 100}));
  EXPECT_EQ(sg[0], 0.5f);
  EXPECT_NEAR(sg[1], 3.720076e-44, 1e-45);  // exp(-100) / (1 + exp(-100)): tiny, not NaN
  EXPECT_EQ(sg[2], 1);
}

TEST(Unary, HandComputedMath) {
  Tensor x = make_tensor<float>({4}, {0, 1, 4, -1});
  std::vector<float> s = run_f32("Sqrt", x);
  EXPECT_EQ(s[0], 0);
  EXPECT_EQ(s[2], 2);
  EXPECT_TRUE(std::isnan(s[3]));
  std::vector<float> l = run_f32("Log", x);
  EXPECT_EQ(l[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(l[1], 0);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_EQ(run_f32("Exp", make_tensor<float>({1}, {0}))[0], 1);
  EXPECT_NEAR(run_f32("Erf", make_tensor<float>({1}, {1}))[0], 0.8427007929, 1e-6);
  EXPECT_NEAR(run_f32("Tanh", make_tensor<float>({1}, {0.5f}))[0], 0.4621171573, 1e-6);
}

TEST(Unary, GeluBothFormsAgainstTheirDefinitions) {
  // Values of torch.nn.functional.gelu (approximate "none" and "tanh") in double.
  Tensor x = make_tensor<float>({5}, {-3.f, -1.f, 0.f, 0.5f, 2.f});
  const std::vector<float> exact = run_f32("Gelu", x);
  const std::vector<float> tanh_form = run_f32("Gelu", x, core::AttrStore().set_str("approximate", "tanh"));
  const double want_exact[] = {-0.0040496532, -0.1586552539, 0.0, 0.3457312679, 1.9544997361};
  const double want_tanh[] = {-0.0036373920, -0.1588080094, 0.0, 0.3457140028, 1.9545976902};
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(exact[i], want_exact[i], 1e-6) << i;
    EXPECT_NEAR(tanh_form[i], want_tanh[i], 1e-6) << i;
  }
  EXPECT_TRUE(has_text(run_op("Gelu", {x}, core::AttrStore().set_str("approximate", "fast")).status,
                       "node 'test' (Gelu): approximate 'fast' must be 'none' or 'tanh'"));
  EXPECT_TRUE(has_text(run_op("Gelu", {make_tensor<int64_t>({1}, {1})}).status, "input #0 has dtype i64, expected f32"));
}

TEST(Unary, HandComputedRounding) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = make_tensor<float>({8}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.4f, -2.6f});
  EXPECT_EQ(run_f32("Round", x), (std::vector<float>{-2, -2, -0.f, 0, 2, 2, 2, -3}));  // halves to even
  EXPECT_EQ(run_f32("Floor", x), (std::vector<float>{-3, -2, -1, 0, 1, 2, 2, -3}));
  EXPECT_EQ(run_f32("Ceil", x), (std::vector<float>{-2, -1, -0.f, 1, 2, 3, 3, -2}));
  EXPECT_TRUE(std::signbit(run_f32("Round", make_tensor<float>({1}, {-0.5f}))[0]));
  // Beyond 2^23 every float is an integer; infinities and NaN pass through.
  std::vector<float> big = run_f32("Round", make_tensor<float>({4}, {16777215.f, 8388609.f, inf, NAN}));
  EXPECT_EQ(big[0], 16777215.f);
  EXPECT_EQ(big[1], 8388609.f);
  EXPECT_EQ(big[2], inf);
  EXPECT_TRUE(std::isnan(big[3]));
  EXPECT_EQ(run_f32("Reciprocal", make_tensor<float>({4}, {2, -0.25f, 0, -0.f})),
            (std::vector<float>{0.5f, -4, inf, -inf}));
  std::vector<float> sc = run_f32("Sin", make_tensor<float>({2}, {0, 1.5707963f}));
  EXPECT_EQ(sc[0], 0);
  EXPECT_NEAR(sc[1], 1, 1e-7);
  sc = run_f32("Cos", make_tensor<float>({2}, {0, 3.1415927f}));
  EXPECT_EQ(sc[0], 1);
  EXPECT_NEAR(sc[1], -1, 1e-7);
}

void expect_all_near(const std::vector<float>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << what << " at " << i;  // +-inf exactly
    else EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

TEST(Unary, HandComputedSmoothActivations) {
  const float inf = std::numeric_limits<float>::infinity();
  // Elu: alpha * (exp(x) - 1) below 0; exp(-1) - 1 = -0.6321205588.
  Tensor x = make_tensor<float>({4}, {-1, 0, 2, -inf});
  expect_all_near(run_f32("Elu", x), {-0.6321205588, 0, 2, -1}, 1e-7, "Elu");
  expect_all_near(run_f32("Elu", x, core::AttrStore().set_float("alpha", 2)), {-1.2642411177, 0, 2, -2}, 1e-7,
                  "Elu alpha=2");
  // Selu: gamma * x above 0, gamma * alpha * (exp(x) - 1) else; ONNX's default alpha, gamma.
  Tensor s = make_tensor<float>({4}, {-1, 0, 1, -2});
  expect_all_near(run_f32("Selu", s), {-1.1113307413, 0, 1.0507010221, -1.5201664733}, 1e-7, "Selu");
  expect_all_near(run_f32("Selu", s, core::AttrStore().set_float("alpha", 2).set_float("gamma", 0.5f)),
                  {-0.6321205588, 0, 0.5, -0.8646647168}, 1e-7, "Selu alpha=2 gamma=0.5");
  // Softplus: log(1 + exp(x)); the naive formula gives inf at 1000.
  std::vector<float> sp = run_f32("Softplus", make_tensor<float>({6}, {0, 1, 100, -100, 1000, -1000}));
  expect_all_near(sp, {0.6931471806, 1.3132616875, 100, 0, 1000, 0}, 1e-7, "Softplus");
  EXPECT_NEAR(sp[3], 3.720076e-44, 1e-45);  // exp(-100): tiny, not 0 or NaN
  EXPECT_EQ(sp[5], 0);
  EXPECT_EQ(run_f32("Softsign", make_tensor<float>({4}, {-3, 0, 1, 1e30f})), (std::vector<float>{-0.75f, 0, 0.5f, 1}));
  // ThresholdedRelu: x where x > alpha (strictly), else 0.
  Tensor t = make_tensor<float>({5}, {-2, -0.5f, 0.5f, 1, 1.5f});
  EXPECT_EQ(run_f32("ThresholdedRelu", t), (std::vector<float>{0, 0, 0, 0, 1.5f}));
  EXPECT_EQ(run_f32("ThresholdedRelu", t, core::AttrStore().set_float("alpha", -1)),
            (std::vector<float>{0, -0.5f, 0.5f, 1, 1.5f}));
  // Mish: x * tanh(softplus(x)).
  std::vector<float> m = run_f32("Mish", make_tensor<float>({6}, {0, 1, -1, 100, -80, -1000}));
  expect_all_near(m, {0, 0.8650983883, -0.3034014614, 100, 0, 0}, 1e-7, "Mish");
  EXPECT_NEAR(m[4], -1.4438811e-33, 1e-40);  // -80 * exp(-80): tiny, still a normal float
  EXPECT_EQ(m[5], 0);
  expect_all_near(run_f32("Tan", make_tensor<float>({3}, {0, 1, -1})), {0, 1.5574077247, -1.5574077247}, 1e-7, "Tan");
  expect_all_near(run_f32("Atan", make_tensor<float>({4}, {1, -3, inf, -inf})),
                  {0.7853981634, -1.2490457724, 1.5707963268, -1.5707963268}, 1e-7, "Atan");
}

TEST(Unary, HandComputedHyperbolicAndInverse) {
  const float inf = std::numeric_limits<float>::infinity();
  // Values of the double-precision functions at the (exact) float inputs.
  expect_all_near(run_f32("Sinh", make_tensor<float>({5}, {0, 1, -2, 0.5f, 100})),
                  {0, 1.1752011936, -3.6268604078, 0.5210953055, inf}, 1e-7, "Sinh");
  expect_all_near(run_f32("Cosh", make_tensor<float>({5}, {0, 1, -2, 0.5f, -100})),
                  {1, 1.5430806348, 3.7621956911, 1.1276259652, inf}, 1e-7, "Cosh");
  expect_all_near(run_f32("Asin", make_tensor<float>({5}, {0, 1, -1, 0.5f, -0.25f})),
                  {0, 1.5707963268, -1.5707963268, 0.5235987756, -0.2526802551}, 1e-7, "Asin");
  expect_all_near(run_f32("Acos", make_tensor<float>({5}, {0, 1, -1, 0.5f, -0.25f})),
                  {1.5707963268, 0, 3.1415926536, 1.0471975512, 1.8234765819}, 1e-7, "Acos");
  expect_all_near(run_f32("Asinh", make_tensor<float>({5}, {0, 1, -2, 1e10f, -inf})),
                  {0, 0.8813735870, -1.4436354752, 23.7189981105, -inf}, 1e-7, "Asinh");
  expect_all_near(run_f32("Acosh", make_tensor<float>({4}, {1, 2, 10, inf})),
                  {0, 1.3169578969, 2.9932228461, inf}, 1e-7, "Acosh");
  expect_all_near(run_f32("Atanh", make_tensor<float>({5}, {0, 0.5f, -0.5f, 1, -1})),
                  {0, 0.5493061443, -0.5493061443, inf, -inf}, 1e-7, "Atanh");
  // Outside the domain: NaN, as libm gives (and NaN passes through every one of them).
  const std::vector<std::pair<const char*, std::vector<float>>> outside = {
      {"Asin", {1.0001f, -1.5f, inf, NAN}}, {"Acos", {2, -1.0001f, -inf, NAN}},
      {"Acosh", {0.9999f, 0, -3, NAN}},     {"Atanh", {1.0001f, -2, inf, NAN}},
      {"Sinh", {NAN}},                      {"Cosh", {NAN}},
      {"Asinh", {NAN}}};
  for (const auto& [op, xs] : outside) {
    std::vector<float> y = run_f32(op, make_tensor<float>({static_cast<int64_t>(xs.size())}, xs));
    ASSERT_EQ(y.size(), xs.size()) << op;
    for (size_t i = 0; i < y.size(); ++i) EXPECT_TRUE(std::isnan(y[i])) << op << "(" << xs[i] << ") = " << y[i];
  }
  EXPECT_TRUE(std::signbit(run_f32("Sinh", make_tensor<float>({1}, {-0.f}))[0]));  // odd functions keep -0
  EXPECT_TRUE(std::signbit(run_f32("Atanh", make_tensor<float>({1}, {-0.f}))[0]));
}

TEST(Unary, EmptyTensors) {
  // A 0 extent: the output is empty too, and the kernel touches nothing.
  for (const char* op : {"Sinh", "Cosh", "Asin", "Acos", "Asinh", "Acosh", "Atanh", "Atan"}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{0}, {2, 0, 3}, {0, 1}}) {
      OpResult r = run_op(op, {make_tensor<float>(shape, {})});
      ASSERT_TRUE(r.status.ok()) << op << ": " << r.status.message();
      EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk) << op;
      EXPECT_EQ(r.outputs[0].shape, shape) << op;
      EXPECT_TRUE(r.outputs[0].bytes.empty()) << op;
    }
  }
}

TEST(Unary, HandComputedSign) {
  std::vector<float> f = run_f32("Sign", make_tensor<float>({7}, {-2.5f, 0, 3, 1e-30f, -0.f, -1e-45f, NAN}));
  EXPECT_EQ(std::vector<float>(f.begin(), f.begin() + 6), (std::vector<float>{-1, 0, 1, 1, 0, -1}));
  EXPECT_FALSE(std::signbit(f[4]));  // -0 gives +0, as numpy
  EXPECT_TRUE(std::isnan(f[6]));
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  OpResult r = run_op("Sign", {make_tensor<int64_t>({5}, {-5, 0, 7, lo, hi})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].dtype, DType::kI64);
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{-1, 0, 1, -1, 1}));
  r = run_op("Sign", {make_tensor<int32_t>({3}, {-7, 0, 9})});
  EXPECT_EQ(r.outputs[0].dtype, DType::kI32);
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{-1, 0, 1}));
}

TEST(Unary, IntegerNegAbsRelu) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  Tensor a = make_tensor<int64_t>({4}, {-3, 0, 5, lo});
  EXPECT_EQ(run_op("Neg", {a}).outputs[0].values<int64_t>(), (std::vector<int64_t>{3, 0, -5, lo}));  // wraps
  EXPECT_EQ(run_op("Abs", {a}).outputs[0].values<int64_t>(), (std::vector<int64_t>{3, 0, 5, lo}));
  EXPECT_EQ(run_op("Relu", {a}).outputs[0].values<int64_t>(), (std::vector<int64_t>{0, 0, 5, 0}));
  Tensor b = make_tensor<int32_t>({3}, {-7, 7, 0});
  OpResult r = run_op("Abs", {b});
  EXPECT_EQ(r.outputs[0].dtype, DType::kI32);
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{7, 7, 0}));
  EXPECT_EQ(run_op("Neg", {b}).outputs[0].values<int32_t>(), (std::vector<int32_t>{7, -7, 0}));
  EXPECT_EQ(run_f32("Abs", make_tensor<float>({2}, {-1.5f, 2})), (std::vector<float>{1.5f, 2}));
}

TEST(Unary, ClipAttributesAndInputs) {
  Tensor x = make_tensor<float>({5}, {-3, -1, 0, 1, 3});
  // Opset < 11: attributes.
  EXPECT_EQ(run_f32("Clip", x, core::AttrStore().set_float("min", -1.5f).set_float("max", 2)),
            (std::vector<float>{-1.5f, -1, 0, 1, 2}));
  // Opset >= 11: optional scalar inputs; either may be omitted.
  Tensor lo = make_tensor<float>({}, {-0.5f}), hi = make_tensor<float>({}, {0.5f});
  EXPECT_EQ(run_op("Clip", {x, lo, hi}).outputs[0].values<float>(), (std::vector<float>{-0.5f, -0.5f, 0, 0.5f, 0.5f}));
  EXPECT_EQ(run_op("Clip", {x, absent(), hi}).outputs[0].values<float>(), (std::vector<float>{-3, -1, 0, 0.5f, 0.5f}));
  EXPECT_EQ(run_op("Clip", {x, lo}).outputs[0].values<float>(), (std::vector<float>{-0.5f, -0.5f, 0, 1, 3}));
  // No bounds: identity, infinities included.
  Tensor inf = make_tensor<float>({2}, {std::numeric_limits<float>::infinity(), -1});
  EXPECT_EQ(run_f32("Clip", inf), inf.values<float>());
  // min > max: everything becomes max (ONNX).
  EXPECT_EQ(run_op("Clip", {x, hi, lo}).outputs[0].values<float>(), std::vector<float>(5, -0.5f));
  // Integer clip with i64 bounds.
  Tensor xi = make_tensor<int64_t>({4}, {-9, -1, 4, 9});
  Tensor li = make_tensor<int64_t>({1}, {-2}), hi_i = make_tensor<int64_t>({1}, {5});
  EXPECT_EQ(run_op("Clip", {xi, li, hi_i}).outputs[0].values<int64_t>(), (std::vector<int64_t>{-2, -1, 4, 5}));
}

double reference(const std::string& op, double x, double alpha, double beta) {
  if (op == "Relu") return std::max(x, 0.0);
  if (op == "Sigmoid") return 1 / (1 + std::exp(-x));
  if (op == "Tanh") return std::tanh(x);
  if (op == "Exp") return std::exp(x);
  if (op == "Log") return std::log(x);
  if (op == "Sqrt") return std::sqrt(x);
  if (op == "Neg") return -x;
  if (op == "Abs") return std::abs(x);
  if (op == "Erf") return std::erf(x);
  if (op == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
  if (op == "HardSwish") return x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
  if (op == "LeakyRelu") return x < 0 ? alpha * x : x;
  if (op == "Clip") return std::min(std::max(x, alpha), beta);
  if (op == "Reciprocal") return 1 / x;
  if (op == "Floor") return std::floor(x);
  if (op == "Ceil") return std::ceil(x);
  if (op == "Round") return std::nearbyint(x);  // the default rounding mode: halves to even
  if (op == "Sin") return std::sin(x);
  if (op == "Cos") return std::cos(x);
  if (op == "Tan") return std::tan(x);
  if (op == "Atan") return std::atan(x);
  if (op == "Sinh") return std::sinh(x);
  if (op == "Cosh") return std::cosh(x);
  if (op == "Asin") return std::asin(x);
  if (op == "Acos") return std::acos(x);
  if (op == "Asinh") return std::asinh(x);
  if (op == "Acosh") return std::acosh(x);
  if (op == "Atanh") return std::atanh(x);
  if (op == "Elu") return x < 0 ? alpha * (std::exp(x) - 1) : x;
  if (op == "Selu") return x > 0 ? beta * x : beta * alpha * (std::exp(x) - 1);  // beta: gamma
  if (op == "Softplus") return std::log(1 + std::exp(x));
  if (op == "Softsign") return x / (1 + std::abs(x));
  if (op == "Sign") return x > 0 ? 1 : x < 0 ? -1 : 0;
  if (op == "ThresholdedRelu") return x > alpha ? x : 0;
  if (op == "Mish") return x * std::tanh(std::log(1 + std::exp(x)));
  return NAN;
}

TEST(Unary, RandomShapeSweep) {
  std::mt19937 rng(2024);
  const char* ops[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Erf", "HardSigmoid",
                       "HardSwish", "LeakyRelu", "Clip", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos",
                       "Tan", "Atan", "Elu", "Selu", "Softplus", "Softsign", "Sign", "ThresholdedRelu", "Mish",
                       "Sinh", "Cosh", "Asin", "Acos", "Asinh", "Acosh", "Atanh"};
  constexpr int kOps = static_cast<int>(std::size(ops));
  std::uniform_real_distribution<float> param(-1.f, 1.f);
  for (int iter = 0; iter < 20 * kOps; ++iter) {
    std::string op = ops[iter % kOps];
    int rank = 1 + iter / kOps % 5;
    bool positive = op == "Log" || op == "Sqrt" || op == "Reciprocal";
    // The smooth activations also see large |x| (where Softplus and Mish could overflow).
    bool wide = iter % 3 == 0 && (op == "Elu" || op == "Selu" || op == "Softplus" || op == "Softsign" ||
                                  op == "Mish" || op == "Atan" || op == "Sinh" || op == "Cosh" || op == "Asinh");
    float lo = positive ? 0.01f : wide ? -40.f : -5.f, hi = wide ? 40.f : 5.f;
    if (op == "Asin" || op == "Acos") lo = -1.f, hi = 1.f;  // the domain
    if (op == "Atanh") lo = -0.9999f, hi = 0.9999f;        // +-1 give +-inf (a hand case)
    if (op == "Acosh") lo = 1.f, hi = iter % 3 ? 4.f : 1e6f;
    if (op == "Asinh" && wide) lo = -1e6f, hi = 1e6f;
    Tensor x = random_f32(rng, random_shape(rng, rank, 6), lo, hi);
    if (op == "Round" && iter % 2)  // exact halves, where the tie rule shows
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::floor(x.data<float>()[i]) + 0.5f;
    core::AttrStore attrs;
    std::vector<Tensor> inputs = {x};
    double alpha = 0.2, beta = 0.5;  // HardSigmoid's defaults
    if (op == "LeakyRelu") alpha = 0.01;
    if (op == "Elu" || op == "ThresholdedRelu") alpha = 1;
    if (op == "Selu") alpha = 1.67326319217681884765625, beta = 1.05070102214813232421875;  // beta: gamma
    if (op == "Clip") {
      alpha = param(rng) * 3, beta = alpha + std::abs(param(rng)) * 3;
      inputs.push_back(make_tensor<float>({}, {static_cast<float>(alpha)}));
      inputs.push_back(make_tensor<float>({}, {static_cast<float>(beta)}));
      alpha = static_cast<float>(alpha), beta = static_cast<float>(beta);
    } else if (iter % 2 && (op == "HardSigmoid" || op == "LeakyRelu" || op == "Elu" || op == "Selu" ||
                            op == "ThresholdedRelu")) {
      alpha = static_cast<float>(param(rng)), beta = static_cast<float>(param(rng));
      attrs.set_float("alpha", static_cast<float>(alpha));
      if (op == "HardSigmoid" || op == "Selu")
        attrs.set_float(op == "Selu" ? "gamma" : "beta", static_cast<float>(beta));
    }
    SlotRun s = run_op_in_slots(op.c_str(), inputs, attrs);
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, x.shape);
    for (int64_t i = 0; i < y.numel(); ++i) {
      double want = reference(op, x.at(i), alpha, beta);
      ASSERT_NEAR(y.at(i), want, 1e-5 * (1 + std::abs(want))) << op << " at " << i;
    }
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact) << op;
    EXPECT_EQ(s.outputs[0].bytes, y.bytes) << op;
  }
}

TEST(Unary, IntegerSweep) {
  std::mt19937 rng(5);
  const char* ops[] = {"Neg", "Abs", "Relu", "Clip", "Sign"};
  constexpr int kOps = static_cast<int>(std::size(ops));
  std::uniform_int_distribution<int64_t> val(-1000, 1000);
  for (int iter = 0; iter < 20 * kOps; ++iter) {
    std::string op = ops[iter % kOps];
    std::vector<int64_t> shape = random_shape(rng, 1 + iter / kOps % 5, 5);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<int64_t> v(n);
    for (auto& e : v) e = val(rng);
    int64_t lo = val(rng) / 2, hi = lo + std::abs(val(rng));
    bool wide = iter % 2 == 0;  // alternate i64 and i32
    std::vector<Tensor> inputs;
    if (wide) {
      inputs = {make_tensor<int64_t>(shape, v), make_tensor<int64_t>({}, {lo}), make_tensor<int64_t>({}, {hi})};
    } else {
      std::vector<int32_t> w(v.begin(), v.end());
      inputs = {make_tensor<int32_t>(shape, w), make_tensor<int32_t>({}, {static_cast<int32_t>(lo)}),
                make_tensor<int32_t>({}, {static_cast<int32_t>(hi)})};
    }
    if (op != "Clip") inputs.resize(1);
    SlotRun s = run_op_in_slots(op.c_str(), inputs);
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.dtype, inputs[0].dtype);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(y.at(i), reference(op, static_cast<double>(v[i]), lo, hi)) << op << " at " << i;
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(Unary, Errors) {
  Tensor i = make_tensor<int64_t>({2}, {1, 2});
  OpResult r = run_op("Sigmoid", {i});
  EXPECT_NE(r.status.message().find("node 'test' (Sigmoid): input #0 has dtype i64, expected f32"), std::string::npos)
      << r.status.message();
  for (const char* op : {"Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos", "Tan", "Atan", "Elu", "Selu",
                         "Softplus", "Softsign", "ThresholdedRelu", "Mish", "Sinh", "Cosh", "Asin", "Acos", "Asinh",
                         "Acosh", "Atanh"}) {
    r = run_op(op, {i});
    EXPECT_NE(r.status.message().find("input #0 has dtype i64, expected f32"), std::string::npos) << op;
  }
  r = run_op("Abs", {make_tensor<bool>({1}, {true})});
  EXPECT_NE(r.status.message().find("dtype bool, expected f32, i64 or i32"), std::string::npos) << r.status.message();
  EXPECT_TRUE(has_text(run_op("Sign", {make_tensor<bool>({1}, {true})}).status,
                       "node 'test' (Sign): input #0 has dtype bool, expected f32, i64 or i32"));
  EXPECT_TRUE(has_text(run_op("Mish", {i}).status, "node 'test' (Mish): input #0 has dtype i64, expected f32"));
  EXPECT_TRUE(has_text(run_op("Acosh", {make_tensor<bool>({1}, {true})}).status,
                       "node 'test' (Acosh): input #0 has dtype bool, expected f32"));
  EXPECT_TRUE(has_text(run_op("Asin", {make_tensor<int32_t>({1}, {1})}).status,
                       "node 'test' (Asin): input #0 has dtype i32, expected f32"));
  EXPECT_TRUE(has_text(run_op("Cosh", {make_tensor<float>({1}, {1}), make_tensor<float>({1}, {1})}).status,
                       "node 'test' (Cosh): expects 1 inputs, got 2"));
  Tensor x = make_tensor<float>({2}, {1, 2});
  r = run_op("Relu", {x, x});
  EXPECT_NE(r.status.message().find("expects 1 inputs, got 2"), std::string::npos) << r.status.message();
  r = run_op("Clip", {x, x});
  EXPECT_NE(r.status.message().find("min (input #1) must be a scalar, got shape [2]"), std::string::npos)
      << r.status.message();
  r = run_op("Clip", {x, absent(), make_tensor<int64_t>({}, {1})});
  EXPECT_NE(r.status.message().find("max (input #2) has dtype i64, expected f32"), std::string::npos)
      << r.status.message();
  r = run_op("Clip", {x, x, x, x});
  EXPECT_NE(r.status.message().find("expects 1 to 3 inputs, got 4"), std::string::npos) << r.status.message();
}

TEST(Unary, SymbolicShape) {
  core::ExprPool pool;
  core::ExprId batch = pool.dim(pool.add_dim({"batch", 1, 64, 1}));
  core::ExprId seq = pool.dim(pool.add_dim({"seq", 1, 512, 1}));
  for (const char* name : {"Relu", "Clip", "Sigmoid", "Erf", "HardSwish", "Abs", "Reciprocal", "Floor", "Ceil",
                           "Round", "Sin", "Cos", "Tan", "Atan", "Elu", "Selu", "Softplus", "Softsign", "Sign",
                           "ThresholdedRelu", "Mish", "Sinh", "Cosh", "Asin", "Acos", "Asinh", "Acosh", "Atanh"}) {
    core::AttrStore attrs;
    kernels::ShapeCtx c(pool, attrs.view());
    c.inputs.resize(1);
    c.inputs[0].shape = {batch, pool.constant(3), pool.mul(seq, pool.constant(2))};
    c.outputs.resize(1);
    Status st = kernels::find_op(name)->shape(c);
    ASSERT_TRUE(st.ok()) << name << ": " << st.message();
    EXPECT_EQ(pool.shape_to_string(c.out(0).shape), "[batch, 3, 2*seq]") << name;
    EXPECT_EQ(c.out(0).dtype, DType::kF32);
    EXPECT_TRUE(c.guards.empty());
  }
}

// The shape [batch, 3, 2*seq] evaluated at small dims (bounds 8 and 512), then each kernel
// run on buffers of exactly that size, as bind + execute would.
TEST(Unary, RunsFarBelowTheBound) {
  SymPool sp;
  std::mt19937 rng(77);
  for (const char* name : {"Tan", "Atan", "Elu", "Selu", "Softplus", "Softsign", "Sign", "ThresholdedRelu", "Mish",
                           "Sinh", "Cosh", "Asin", "Acos", "Asinh", "Acosh", "Atanh"}) {
    for (DType dt : {DType::kF32, DType::kI64}) {
      if (dt == DType::kI64 && std::string(name) != "Sign") continue;
      SymResult r = infer(sp.pool, name, {sym_input(dt, {sp.batch, sp.c(3), sp.pool.mul(sp.seq, sp.c(2))})});
      ASSERT_TRUE(r.status.ok()) << name << ": " << r.status.message();
      EXPECT_EQ(r.shape, "[batch, 3, 2*seq]") << name;
      EXPECT_EQ(r.outputs[0].dtype, dt) << name;
      EXPECT_TRUE(r.guards.empty()) << name;
      for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1}, {2, 3}, {3, 5}}) {
        std::vector<Tensor> out(1);
        out[0].dtype = dt;
        out[0].shape = eval_shape(sp.pool, r.outputs[0].shape, dims);
        ASSERT_EQ(out[0].shape, (std::vector<int64_t>{dims[0], 3, 2 * dims[1]})) << name;
        const std::string op = name;
        const bool unit = op == "Asin" || op == "Acos" || op == "Atanh";  // inside the domain
        const float lo = unit ? -0.999f : op == "Acosh" ? 1.f : -5.f, hi = unit ? 0.999f : 5.f;
        Tensor x = dt == DType::kF32 ? random_f32(rng, out[0].shape, lo, hi) : random_tensor(rng, dt, out[0].shape);
        ASSERT_EQ(run_kernel(name, {x}, &out), kernels::KernelStatus::kOk) << name;
        double alpha = std::string(name) == "Selu" ? 1.67326319217681884765625 : 1.0;
        double beta = 1.05070102214813232421875;
        for (int64_t i = 0; i < x.numel(); ++i) {
          double want = reference(name, x.at(i), alpha, beta);
          ASSERT_NEAR(out[0].at(i), want, 1e-5 * (1 + std::abs(want))) << name << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::testing
