// GRU: hand-computed steps for both linear_before_reset modes, a seeded sweep of shapes,
// directions, layouts and optional inputs against a double reference written from the ONNX
// equations, errors, and symbolic shapes (T, batch) run below the bound.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <cmath>

#include "guard_text_util.h"
#include "op_test_util.h"
#include "rnn_test_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

struct GruRef {
  std::vector<double> y, yh;
};

// The ONNX GRU equations in double, one direction and batch row at a time. Gates in W, R
// and B are ordered z, r, h.
//   z = f(Xt*Wz^T + Ht-1*Rz^T + Wbz + Rbz)         r = f(... Wr, Rr, Wbr, Rbr)
//   h = g(Xt*Wh^T + (r.Ht-1)*Rh^T + Rbh + Wbh)     linear_before_reset = 0
//   h = g(Xt*Wh^T + r.(Ht-1*Rh^T + Rbh) + Wbh)     linear_before_reset = 1
//   Ht = (1 - z).h + z.Ht-1
GruRef reference_gru(const RnnCase& k, const RnnInputs& in) {
  const int64_t hs = k.hidden, is = k.input, nd = k.dirs();
  GruRef out;
  out.y.assign(static_cast<size_t>(k.seq * nd * k.batch * hs), 0.0);
  out.yh.assign(static_cast<size_t>(nd * k.batch * hs), 0.0);
  enum { kZ = 0, kR = 1, kH = 2 };
  for (int64_t d = 0; d < nd; ++d) {
    const bool rev = k.direction == "reverse" || d == 1;
    auto w = [&](int g, int64_t j, int64_t m) { return in.w.at((d * 3 * hs + g * hs + j) * is + m); };
    auto r = [&](int g, int64_t j, int64_t m) { return in.r.at((d * 3 * hs + g * hs + j) * hs + m); };
    auto wb = [&](int g, int64_t j) { return in.b.present ? in.b.at(d * 6 * hs + g * hs + j) : 0.0; };
    auto rb = [&](int g, int64_t j) { return in.b.present ? in.b.at(d * 6 * hs + 3 * hs + g * hs + j) : 0.0; };
    auto act = [&](int which, double x) { return ref_act(k, 2, d, which, x); };
    for (int64_t b = 0; b < k.batch; ++b) {
      std::vector<double> h(hs, 0.0);
      for (int64_t j = 0; j < hs; ++j)
        if (in.h0.present) h[j] = in.h0.at(k.si(d, b, j));
      const int64_t len = k.len(b);
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = rev ? len - 1 - s : s;
        auto xw = [&](int g, int64_t j) {
          double v = 0;
          for (int64_t m = 0; m < is; ++m) v += in.x.at(k.xi(t, b, m)) * w(g, j, m);
          return v;
        };
        auto times_r = [&](int g, int64_t j, const std::vector<double>& v) {
          double acc = 0;
          for (int64_t m = 0; m < hs; ++m) acc += v[m] * r(g, j, m);
          return acc;
        };
        std::vector<double> z(hs), rg(hs), rh(hs), hn(hs);
        for (int64_t j = 0; j < hs; ++j) {
          z[j] = act(0, xw(kZ, j) + times_r(kZ, j, h) + wb(kZ, j) + rb(kZ, j));
          rg[j] = act(0, xw(kR, j) + times_r(kR, j, h) + wb(kR, j) + rb(kR, j));
          rh[j] = rg[j] * h[j];
        }
        for (int64_t j = 0; j < hs; ++j) {
          double cand = k.lbr ? act(1, xw(kH, j) + rg[j] * (times_r(kH, j, h) + rb(kH, j)) + wb(kH, j))
                              : act(1, xw(kH, j) + times_r(kH, j, rh) + rb(kH, j) + wb(kH, j));
          hn[j] = (1 - z[j]) * cand + z[j] * h[j];
        }
        h = hn;
        for (int64_t j = 0; j < hs; ++j) out.y[k.yi(t, d, b, j)] = h[j];
      }
      if (len > 0)
        for (int64_t j = 0; j < hs; ++j) out.yh[k.si(d, b, j)] = h[j];
    }
  }
  return out;
}

double sig(double x) { return 1 / (1 + std::exp(-x)); }

TEST(Gru, HandComputedTwoSteps) {
  // hidden 1, input 1: W = (wz, wr, wh), R likewise, B = (Wbz, Wbr, Wbh, Rbz, Rbr, Rbh).
  Tensor x = make_tensor<float>({2, 1, 1}, {1, -1});
  Tensor w = make_tensor<float>({1, 3, 1}, {0.5f, -1, 2});
  Tensor r = make_tensor<float>({1, 3, 1}, {0.3f, 0.2f, -0.4f});
  Tensor b = make_tensor<float>({1, 6}, {0.1f, 0.2f, 0.3f, 0.05f, -0.1f, 0.2f});
  for (int64_t lbr : {0, 1}) {
    double z1 = sig(0.5 + 0.15), r1 = sig(-1 + 0.1);
    double c1 = lbr ? std::tanh(2 + r1 * 0.2 + 0.3) : std::tanh(2 + 0.2 + 0.3);
    double h1 = (1 - z1) * c1;
    double z2 = sig(-0.5 + 0.3 * h1 + 0.15), r2 = sig(1 + 0.2 * h1 + 0.1);
    double c2 = lbr ? std::tanh(-2 + r2 * (-0.4 * h1 + 0.2) + 0.3) : std::tanh(-2 + (r2 * h1) * -0.4 + 0.2 + 0.3);
    double h2 = (1 - z2) * c2 + z2 * h1;
    OpResult res =
        run_op("GRU", {x, w, r, b}, AttrStore().set_int("hidden_size", 1).set_int("linear_before_reset", lbr), 2);
    ASSERT_TRUE(res.status.ok()) << res.status.message();
    ASSERT_EQ(res.kernel, kernels::KernelStatus::kOk);
    EXPECT_EQ(res.outputs[0].shape, (std::vector<int64_t>{2, 1, 1, 1}));
    expect_close(res.outputs[0], {h1, h2}, "Y lbr " + std::to_string(lbr));
    expect_close(res.outputs[1], {h2}, "Y_h lbr " + std::to_string(lbr));
  }
}

TEST(Gru, SequenceLensZeroPastTheEnd) {
  std::mt19937 rng(8);
  RnnCase k;
  k.seq = 3, k.batch = 3, k.input = 2, k.hidden = 2, k.lens = {3, 1, 0}, k.init_h = true, k.bias = true;
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    k.direction = dir;
    RnnInputs in = random_rnn_inputs(rng, k, 3);
    OpResult res = run_op("GRU", in.list(false, false), k.attrs(false), 2);
    ASSERT_TRUE(res.status.ok()) << res.status.message();
    for (int64_t d = 0; d < k.dirs(); ++d) {
      for (int64_t t = 0; t < 3; ++t)
        for (int64_t j = 0; j < 2; ++j) {
          if (t >= 1) {
            EXPECT_EQ(res.outputs[0].at(k.yi(t, d, 1, j)), 0.0) << dir << " t " << t;
          }
          EXPECT_EQ(res.outputs[0].at(k.yi(t, d, 2, j)), 0.0) << dir << " t " << t;
        }
      for (int64_t j = 0; j < 2; ++j) {
        EXPECT_EQ(res.outputs[1].at(k.si(d, 1, j)), res.outputs[0].at(k.yi(0, d, 1, j))) << dir;
        EXPECT_EQ(res.outputs[1].at(k.si(d, 2, j)), 0.0) << dir;
      }
    }
    GruRef want = reference_gru(k, in);
    expect_close(res.outputs[0], want.y, dir);
    expect_close(res.outputs[1], want.yh, dir);
  }
}

TEST(Gru, RandomSweepAgainstReference) {
  std::mt19937 rng(4096);
  int counts[3] = {}, lbr_count = 0;
  for (int iter = 0; iter < 400; ++iter) {
    RnnCase k = random_rnn_case(rng, false);
    RnnInputs in = random_rnn_inputs(rng, k, 3);
    counts[k.dirs() == 2 ? 2 : k.direction == "reverse"]++;
    lbr_count += static_cast<int>(k.lbr);
    std::string what = "iter " + std::to_string(iter) + ": " + k.describe();
    OpResult res = run_op("GRU", in.list(false, rng() % 2 == 0), k.attrs(false), k.num_outputs);
    ASSERT_TRUE(res.status.ok()) << what << ": " << res.status.message();
    ASSERT_EQ(res.kernel, kernels::KernelStatus::kOk) << what;
    ASSERT_EQ(res.outputs.size(), k.num_outputs) << what;
    ASSERT_EQ(res.outputs[0].shape, k.y_shape()) << what;
    GruRef want = reference_gru(k, in);
    expect_close(res.outputs[0], want.y, what + " Y");
    if (k.num_outputs > 1) expect_close(res.outputs[1], want.yh, what + " Y_h");
  }
  for (int n : counts) EXPECT_GT(n, 50);  // every direction was exercised
  EXPECT_GT(lbr_count, 100);
}

// PyTorch's GRU (linear_before_reset, default activations, no clip: one pass over R^T and a
// fused row) at hidden sizes around the 8- and 16-lane blocks and the 512-bit row's threshold
// (3H >= 256), both layouts, batches past a block of 4 vectors, and rows of unequal lengths
// (one row per step).
TEST(Gru, PyTorchFormAtVectorEdges) {
  std::mt19937 rng(77);
  for (int64_t hidden : {7, 8, 17, 86, 131})
    for (int64_t layout : {0, 1})
      for (int64_t batch : {1, 5}) {
        RnnCase k;
        k.seq = 4, k.batch = batch, k.input = 6, k.hidden = hidden, k.layout = layout, k.lbr = 1;
        k.bias = true, k.init_h = layout == 1, k.num_outputs = 2;
        k.direction = batch == 5 ? "bidirectional" : "forward";
        if (hidden == 17)
          for (int64_t b = 0; b < batch; ++b) k.lens.push_back(static_cast<int32_t>((b * 3) % (k.seq + 1)));
        RnnInputs in = random_rnn_inputs(rng, k, 3);
        OpResult res = run_op("GRU", in.list(false, true), k.attrs(false), k.num_outputs);
        ASSERT_TRUE(res.status.ok()) << k.describe() << ": " << res.status.message();
        ASSERT_EQ(res.kernel, kernels::KernelStatus::kOk) << k.describe();
        GruRef want = reference_gru(k, in);
        expect_close(res.outputs[0], want.y, k.describe() + " Y");
        expect_close(res.outputs[1], want.yh, k.describe() + " Y_h");
      }
}

// Values from ONNX Runtime 1.31.1. One step, hidden 1, input 1, W = (0, 0, 1), R = 0, no bias:
// with f = Sigmoid, z = 0.5 and Y = g(x) / 2; the test compares 2*Y with g(x).
std::vector<float> gru_g_of_x(const std::vector<float>& xs, const std::string& acts, std::vector<float> alpha,
                              std::vector<float> beta, const std::string& direction = "forward", float clip = 0.f) {
  const int64_t dirs = direction == "bidirectional" ? 2 : 1, batch = static_cast<int64_t>(xs.size());
  std::vector<float> wv, rv(static_cast<size_t>(3 * dirs), 0.f);
  for (int64_t d = 0; d < dirs; ++d) wv.insert(wv.end(), {0.f, 0.f, 1.f});
  AttrStore a = AttrStore().set_int("hidden_size", 1).set_str("activations", acts).set_str("direction", direction);
  if (!alpha.empty()) a.set_floats("activation_alpha", std::move(alpha));
  if (!beta.empty()) a.set_floats("activation_beta", std::move(beta));
  if (clip > 0) a.set_float("clip", clip);
  OpResult res = run_op("GRU",
                        {make_tensor<float>({1, batch, 1}, xs), make_tensor<float>({dirs, 3, 1}, wv),
                         make_tensor<float>({dirs, 3, 1}, rv)},
                        a, 1);
  EXPECT_TRUE(res.status.ok()) << acts << ": " << res.status.message();
  if (!res.status.ok()) return {};
  std::vector<float> g = res.outputs[0].values<float>();
  for (float& v : g) v *= 2;
  return g;
}

void expect_floats(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i]))) << what << " #" << i;
}

TEST(Gru, ActivationsAgainstOnnxRuntime) {
  const std::vector<float> xs = {-2, -1, -0.5f, 0, 0.5f, 1, 2};
  // alpha 0.5, beta 2 for every function (ignored by those that take none).
  expect_floats(gru_g_of_x(xs, "Sigmoid,Affine", {0.5f}, {2}), {1, 1.5, 1.75, 2, 2.25, 2.5, 3}, "Affine");
  expect_floats(gru_g_of_x(xs, "Sigmoid,LeakyRelu", {0.5f}, {}), {-1, -0.5, -0.25, 0, 0.5, 1, 2}, "LeakyRelu");
  expect_floats(gru_g_of_x(xs, "Sigmoid,ThresholdedRelu", {0.5f}, {}), {0, 0, 0, 0, 0, 1, 2}, "ThresholdedRelu");
  expect_floats(gru_g_of_x(xs, "Sigmoid,ScaledTanh", {0.5f}, {2}),
                {-0.4996647, -0.4820138, -0.3807971, 0, 0.380797, 0.4820138, 0.4996647}, "ScaledTanh");
  expect_floats(gru_g_of_x(xs, "Sigmoid,HardSigmoid", {0.5f}, {2}), {1, 1, 1, 1, 1, 1, 1}, "HardSigmoid");
  expect_floats(gru_g_of_x(xs, "Sigmoid,Elu", {0.5f}, {}),
                {-0.4323324, -0.3160603, -0.1967347, 0, 0.5, 1, 2}, "Elu");
  // Defaults (the same in the ONNX notes and ONNX Runtime).
  expect_floats(gru_g_of_x(xs, "Sigmoid,LeakyRelu", {}, {}), {-0.02, -0.01, -0.005, 0, 0.5, 1, 2}, "LeakyRelu 0.01");
  expect_floats(gru_g_of_x(xs, "Sigmoid,HardSigmoid", {}, {}), {0.1, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9}, "HardSigmoid");
  expect_floats(gru_g_of_x(xs, "Sigmoid,Elu", {}, {}), {-0.8646647, -0.6321205, -0.3934693, 0, 0.5, 1, 2}, "Elu 1");
  expect_floats(gru_g_of_x(xs, "Sigmoid,Softsign", {}, {}),
                {-0.6666667, -0.5, -0.3333333, 0, 0.3333333, 0.5, 0.6666667}, "Softsign");
  expect_floats(gru_g_of_x(xs, "Sigmoid,softplus", {}, {}),
                {0.126928, 0.3132617, 0.474077, 0.6931472, 0.974077, 1.313262, 2.126928}, "Softplus");
  // Defaults from the ONNX operators of the same name, where ONNX Runtime reads 0 instead
  // (it gives 0 for Affine and x > 0 ? x : 0 for ThresholdedRelu): Affine alpha 1 beta 0,
  // ThresholdedRelu alpha 1.
  expect_floats(gru_g_of_x(xs, "Sigmoid,Affine", {}, {}), {-2, -1, -0.5, 0, 0.5, 1, 2}, "Affine 1, 0");
  expect_floats(gru_g_of_x(xs, "Sigmoid,ThresholdedRelu", {}, {}), {0, 0, 0, 0, 0, 0, 2}, "ThresholdedRelu 1");
  // ThresholdedRelu keeps x only above alpha, as the ThresholdedRelu operator and ONNX Runtime
  // (the RNN notes write x >= alpha).
  expect_floats(gru_g_of_x({0.999f, 1, 1.001f}, "Sigmoid,ThresholdedRelu", {1}, {}), {0, 0, 1.001}, "x == alpha");
  // Values are consumed in order by the functions that take one: HardSigmoid(0, 0.25) then
  // Affine(1, 0): z = 0.25, Y = 0.75 x, 2*Y = 1.5 x.
  expect_floats(gru_g_of_x(xs, "HardSigmoid,Affine", {0, 1}, {0.25f, 0}), {-3, -1.5, -0.75, 0, 0.75, 1.5, 3},
                "packed");
  // A short list leaves the rest at their defaults; clip bounds the input first.
  expect_floats(gru_g_of_x(xs, "Sigmoid,Affine", {2}, {}), {-4, -2, -1, 0, 1, 2, 4}, "Affine beta default");
  expect_floats(gru_g_of_x(xs, "Sigmoid,Affine", {2}, {0.1f}, "forward", 0.75f),
                {-1.4, -1.4, -0.9, 0.1, 1.1, 1.6, 1.6}, "clip");
  // Bidirectional: one list per direction, values consumed across both.
  std::vector<float> both = gru_g_of_x(xs, "Sigmoid,LeakyRelu,Sigmoid,LeakyRelu", {0.3f, 0.6f}, {}, "bidirectional");
  expect_floats(both, {-0.6, -0.3, -0.15, 0, 0.5, 1, 2, -1.2, -0.6, -0.3, 0, 0.5, 1, 2}, "bidirectional");
  // One list shared by both directions shares its values (ONNX Runtime requires 4 names).
  both = gru_g_of_x(xs, "Sigmoid,LeakyRelu", {0.3f}, {}, "bidirectional");
  expect_floats(both, {-0.6, -0.3, -0.15, 0, 0.5, 1, 2, -0.6, -0.3, -0.15, 0, 0.5, 1, 2}, "shared");
  // Softplus does not overflow (ONNX Runtime returns inf for log(1 + e^100)).
  expect_floats(gru_g_of_x({-100, 100, 30, -30}, "Sigmoid,Softplus", {}, {}), {0, 100, 30, 9.357623e-14}, "Softplus");
}

// A bidirectional GRU with four different parameterized activations and
// linear_before_reset = 1; inputs from closed forms, outputs from ONNX Runtime 1.31.1.
TEST(Gru, MixedActivationsBidirectionalAgainstOnnxRuntime) {
  auto fill = [](std::vector<int64_t> shape, double a, double p, double q, bool sine) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(a * (sine ? std::sin(p * i + q) : std::cos(p * i + q)));
    return make_tensor<float>(std::move(shape), v);
  };
  Tensor x = fill({3, 2, 2}, 1.5, 1.3, 0.1, true), w = fill({2, 6, 2}, 0.8, 0.7, 0, false);
  Tensor r = fill({2, 6, 2}, 0.6, 0.9, 0.5, true), b = fill({2, 12}, 0.3, 1.1, 0, false);
  AttrStore a = AttrStore()
                    .set_int("hidden_size", 2)
                    .set_str("direction", "bidirectional")
                    .set_int("linear_before_reset", 1)
                    .set_str("activations", "LeakyRelu,ThresholdedRelu,Softsign,ScaledTanh")
                    .set_floats("activation_alpha", {0.2f, 0.1f, 0.9f})
                    .set_floats("activation_beta", {1.3f});
  OpResult res = run_op("GRU", {x, w, r, b}, a, 2);
  ASSERT_TRUE(res.status.ok()) << res.status.message();
  expect_close(res.outputs[0],
               {-0.7206196, 0.4993077, 0,         0.1108717, -0.5757375, -1.156695,  0.3192022, 1.029022,
                0.00573321, -0.05155902, -1.144795, 0.8647068, -0.2207569, 0.5014554,  0.04546578, -0.5667037,
                -0.0013025, -0.02202534, -4.68841,  0.8515306, 0.117186,   0.4045526,  -0.6239567, -1.290253},
               "Y");
  expect_close(res.outputs[1], {-0.0013025, -0.02202534, -4.68841, 0.8515306, -0.5757375, -1.156695, 0.3192022, 1.029022},
               "Y_h");
}

TEST(Gru, Errors) {
  std::mt19937 rng(12);
  RnnCase k;
  k.seq = 2, k.input = 2, k.hidden = 2;  // W [1, 6, 2]
  RnnInputs in = random_rnn_inputs(rng, k, 3);
  auto run = [&](std::vector<Tensor> v, const AttrStore& a, size_t outs = 1) {
    return run_op("GRU", v, a, outs).status;
  };
  std::vector<Tensor> xwr = in.list(false, false);
  AttrStore h2 = AttrStore().set_int("hidden_size", 2);
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_int("linear_before_reset", 2)),
                       "node 'test' (GRU): linear_before_reset 2 must be 0 or 1"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_str("activations", "Sigmoid,Tanh,Tanh")),
                       "activations 'Sigmoid,Tanh,Tanh' lists 3 functions, expected 2"));
  EXPECT_TRUE(has_text(
      run(xwr, AttrStore(h2).set_str("activations", "Sigmoid,Tanh,Tanh").set_str("direction", "bidirectional")),
      "lists 3 functions, expected 2 or 4"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_str("activations", "Gelu,Tanh")),
                       "activation 'Gelu' is not supported (supported: Sigmoid, Tanh, Relu, Affine, LeakyRelu, "
                       "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)"));
  // Parameters: floats only, no more than the functions take, ScaledTanh's given.
  AttrStore leaky = AttrStore(h2).set_str("activations", "Sigmoid,LeakyRelu");
  EXPECT_TRUE(has_text(run(xwr, AttrStore(leaky).set_ints("activation_alpha", {1})),
                       "node 'test' (GRU): activation_alpha must be a list of floats"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(leaky).set_floats("activation_alpha", {0.1f, 0.2f})),
                       "node 'test' (GRU): activation_alpha has 2 values, but 'Sigmoid,LeakyRelu' takes 1 (values are "
                       "consumed in order by the functions that take one)"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(leaky).set_floats("activation_beta", {0.1f})),
                       "activation_beta has 1 values, but 'Sigmoid,LeakyRelu' takes 0"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_str("activations", "Sigmoid,ScaledTanh")),
                       "node 'test' (GRU): activation #1 'ScaledTanh' of 'Sigmoid,ScaledTanh' has no activation_alpha "
                       "value and ONNX defines no default for it; list its alpha and beta in activation_alpha and "
                       "activation_beta"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2)
                                    .set_str("activations", "HardSigmoid,ScaledTanh")
                                    .set_floats("activation_alpha", {0.1f, 0.2f})
                                    .set_floats("activation_beta", {0.3f})),
                       "activation #1 'ScaledTanh' of 'HardSigmoid,ScaledTanh' has no activation_beta value"));
  // Without an activations list the defaults take no values.
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_floats("activation_alpha", {0.5f})),
                       "activation_alpha has 1 values, but 'Sigmoid,Tanh' takes 0"));
  EXPECT_TRUE(
      has_text(run(xwr, AttrStore(h2).set_str("activations", "Sigmoid,,Tanh")), "activation '' is not supported"));
  EXPECT_TRUE(has_text(run(xwr, h2, 3), "has 3 outputs, at most 2 are defined"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore().set_int("hidden_size", 4)),
                       "sizes 6 and 12 must be equal (W [1, 6, 2] must have 3*hidden_size rows)"));
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, random_f32(rng, {1, 6})}, h2), "(B [1, 6] must be [1, 12])"));
  EXPECT_TRUE(
      has_text(run({in.x, in.w, in.r, absent(), absent(), absent(), absent()}, h2), "expects 3 to 6 inputs, got 7"));
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, absent(), make_tensor<int64_t>({1}, {-1})}, h2),
                       "sequence_lens value -1 is outside [0, 2]"));
}

TEST(Gru, SymbolicShapesAndBelowBound) {
  core::ExprPool pool;
  ExprId seq = pool.dim(pool.add_dim({"T", 1, 12, 1}));
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 6, 1}));
  auto k = [&](int64_t v) { return pool.constant(v); };
  auto f32 = [](std::vector<ExprId> s) { return sym_input(DType::kF32, std::move(s)); };
  SymResult r = infer(pool, "GRU",
                      {f32({seq, batch, k(5)}), f32({k(2), k(48), k(5)}), f32({k(2), k(48), k(16)}), f32({k(2), k(96)}),
                       sym_input(DType::kI32, {batch}), f32({k(2), batch, k(16)})},
                      AttrStore().set_str("direction", "bidirectional").set_int("linear_before_reset", 1), 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[T, 2, batch, 16]");
  EXPECT_EQ(pool.shape_to_string(r.outputs[1].shape), "[2, batch, 16]");
  // Per direction (2): (3 recurrent sums + temp + h) * 16 * 4 bytes per batch row, then rows 3*16 wide:
  // W^T (5), R^T (16), a bias row and the input projections (T*batch), times 4 bytes
  EXPECT_EQ(pool.to_string(r.scratch_bytes), "640*batch + 384*T*batch + 8448");
  EXPECT_EQ(guards_text(pool, r), "");

  std::mt19937 rng(5);
  for (auto [t, b] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 3}, {5, 2}, {9, 4}, {12, 6}}) {
    RnnCase c;
    c.seq = t, c.batch = b, c.input = 5, c.hidden = 16, c.direction = "bidirectional", c.lbr = 1;
    c.bias = c.init_h = true;
    for (int64_t i = 0; i < b; ++i) c.lens.push_back(static_cast<int32_t>(rng() % (t + 1)));
    RnnInputs in = random_rnn_inputs(rng, c, 3);
    std::vector<int64_t> dims = {t, b}, bound = {12, 6};
    std::vector<Tensor> outs(2);
    for (size_t o = 0; o < 2; ++o) outs[o].shape = eval_shape(pool, r.outputs[o].shape, dims);
    const size_t need = static_cast<size_t>(eval_all(pool, dims)[r.scratch_bytes]);
    std::vector<float> scratch(static_cast<size_t>(eval_all(pool, bound)[r.scratch_bytes]) / 4, std::nanf(""));
    ASSERT_EQ(run_kernel("GRU", in.list(false, true), &outs, c.attrs(false), scratch.data(), need),
              kernels::KernelStatus::kOk)
        << c.describe();
    GruRef want = reference_gru(c, in);
    expect_close(outs[0], want.y, c.describe() + " Y");
    expect_close(outs[1], want.yh, c.describe() + " Y_h");
    // The two directions on two threads (each its own scratch slot): the same bits.
    std::vector<Tensor> threaded = outs;
    pthreadpool_t threads = pthreadpool_create(2);
    ASSERT_EQ(run_kernel("GRU", in.list(false, true), &threaded, c.attrs(false), scratch.data(), need, threads),
              kernels::KernelStatus::kOk);
    pthreadpool_destroy(threads);
    for (size_t o = 0; o < 2; ++o) EXPECT_EQ(threaded[o].bytes, outs[o].bytes) << c.describe() << " output " << o;
    // Too little scratch is refused rather than overrun.
    if (need > 4) {
      EXPECT_EQ(run_kernel("GRU", in.list(false, true), &outs, c.attrs(false), scratch.data(), need - 4),
                kernels::KernelStatus::kInvalidValue);
    }
  }
}

}  // namespace
}  // namespace kiln::testing
