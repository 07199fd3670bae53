// LSTM: hand-computed steps, a seeded sweep of shapes, directions, layouts and optional
// inputs against a double reference written from the ONNX equations, errors, and symbolic
// shapes (T, batch) run below the bound.
#include <gtest/gtest.h>

#include <cmath>

#include "guard_text_util.h"
#include "op_test_util.h"
#include "rnn_test_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

struct LstmRef {
  std::vector<double> y, yh, yc;
};

// The ONNX LSTM equations in double, one direction and batch row at a time. Gates in W, R
// and B are ordered i, o, f, c; peepholes P are ordered i, o, f.
//   i = f(Xt*Wi^T + Ht-1*Ri^T + Pi.Ct-1 + Wbi + Rbi)   f = f(... Wf, Rf, Pf.Ct-1 ...)
//   c = g(Xt*Wc^T + Ht-1*Rc^T + Wbc + Rbc)             Ct = f.Ct-1 + i.c
//   o = f(Xt*Wo^T + Ht-1*Ro^T + Po.Ct + Wbo + Rbo)     Ht = o.h(Ct)
// clip bounds every activation's input (ref_act), Ct's copy fed to h included.
LstmRef reference_lstm(const RnnCase& k, const RnnInputs& in) {
  const int64_t hs = k.hidden, is = k.input, nd = k.dirs();
  LstmRef out;
  out.y.assign(static_cast<size_t>(k.seq * nd * k.batch * hs), 0.0);
  out.yh.assign(static_cast<size_t>(nd * k.batch * hs), 0.0);
  out.yc = out.yh;
  enum { kI = 0, kO = 1, kF = 2, kC = 3 };
  for (int64_t d = 0; d < nd; ++d) {
    const bool rev = k.direction == "reverse" || d == 1;
    auto w = [&](int g, int64_t j, int64_t m) { return in.w.at((d * 4 * hs + g * hs + j) * is + m); };
    auto r = [&](int g, int64_t j, int64_t m) { return in.r.at((d * 4 * hs + g * hs + j) * hs + m); };
    auto bias = [&](int g, int64_t j) {
      return in.b.present ? in.b.at(d * 8 * hs + g * hs + j) + in.b.at(d * 8 * hs + 4 * hs + g * hs + j) : 0.0;
    };
    auto peep = [&](int g, int64_t j) { return in.p.present ? in.p.at(d * 3 * hs + g * hs + j) : 0.0; };
    auto act = [&](int which, double x) { return ref_act(k, 3, d, which, x); };
    for (int64_t b = 0; b < k.batch; ++b) {
      std::vector<double> h(hs, 0.0), c(hs, 0.0);
      for (int64_t j = 0; j < hs; ++j) {
        if (in.h0.present) h[j] = in.h0.at(k.si(d, b, j));
        if (in.c0.present) c[j] = in.c0.at(k.si(d, b, j));
      }
      const int64_t len = k.len(b);
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = rev ? len - 1 - s : s;
        auto pre = [&](int g, int64_t j) {
          double v = bias(g, j);
          for (int64_t m = 0; m < is; ++m) v += in.x.at(k.xi(t, b, m)) * w(g, j, m);
          for (int64_t m = 0; m < hs; ++m) v += h[m] * r(g, j, m);
          return v;
        };
        std::vector<double> hn(hs), cn(hs);
        for (int64_t j = 0; j < hs; ++j) {
          double ig = act(0, pre(kI, j) + peep(0, j) * c[j]);
          double fg = act(0, pre(kF, j) + peep(2, j) * c[j]);
          cn[j] = fg * c[j] + ig * act(1, pre(kC, j));
          double og = act(0, pre(kO, j) + peep(1, j) * cn[j]);
          hn[j] = og * act(2, cn[j]);
        }
        h = hn;
        c = cn;
        for (int64_t j = 0; j < hs; ++j) out.y[k.yi(t, d, b, j)] = h[j];
      }
      if (len > 0)
        for (int64_t j = 0; j < hs; ++j) {
          out.yh[k.si(d, b, j)] = h[j];
          out.yc[k.si(d, b, j)] = c[j];
        }
    }
  }
  return out;
}

double sig(double x) { return 1 / (1 + std::exp(-x)); }

TEST(Lstm, HandComputedTwoSteps) {
  // hidden 1, input 1: W = (wi, wo, wf, wc), R likewise, no bias, zero initial state.
  Tensor x = make_tensor<float>({2, 1, 1}, {1, -1});
  Tensor w = make_tensor<float>({1, 4, 1}, {0.5f, -0.5f, 1, 2});
  Tensor r = make_tensor<float>({1, 4, 1}, {0.1f, 0.2f, 0.3f, 0.4f});
  double c1 = sig(0.5) * std::tanh(2.0);
  double h1 = sig(-0.5) * std::tanh(c1);
  double c2 = sig(-1 + 0.3 * h1) * c1 + sig(-0.5 + 0.1 * h1) * std::tanh(-2 + 0.4 * h1);
  double h2 = sig(0.5 + 0.2 * h1) * std::tanh(c2);
  OpResult res = run_op("LSTM", {x, w, r}, AttrStore().set_int("hidden_size", 1), 3);
  ASSERT_TRUE(res.status.ok()) << res.status.message();
  ASSERT_EQ(res.kernel, kernels::KernelStatus::kOk);
  EXPECT_EQ(res.outputs[0].shape, (std::vector<int64_t>{2, 1, 1, 1}));
  EXPECT_EQ(res.outputs[1].shape, (std::vector<int64_t>{1, 1, 1}));
  expect_close(res.outputs[0], {h1, h2}, "Y");
  expect_close(res.outputs[1], {h2}, "Y_h");
  expect_close(res.outputs[2], {c2}, "Y_c");

  // Reverse reads X from the end: the first step sees x = -1.
  res = run_op("LSTM", {x, w, r}, AttrStore().set_int("hidden_size", 1).set_str("direction", "reverse"), 2);
  ASSERT_TRUE(res.status.ok()) << res.status.message();
  double rc1 = sig(-0.5) * std::tanh(-2.0), rh1 = sig(0.5) * std::tanh(rc1);
  EXPECT_NEAR(res.outputs[0].at(1), rh1, 1e-6);                // Y[t=1] is the first reverse step
  EXPECT_NEAR(res.outputs[1].at(0), res.outputs[0].at(0), 0);  // Y_h is Y[t=0]
}

TEST(Lstm, SequenceLensZeroPastTheEnd) {
  // Batch row 1 has length 1 of 3: its Y rows t >= 1 are zero and Y_h is its only step,
  // forward and reverse alike; row 2 has length 0: all zero, Y_h / Y_c zero despite initial state.
  std::mt19937 rng(7);
  RnnCase k;
  k.seq = 3, k.batch = 3, k.input = 2, k.hidden = 2, k.lens = {3, 1, 0}, k.init_h = k.init_c = true;
  k.num_outputs = 3;
  for (const char* dir : {"forward", "reverse"}) {
    k.direction = dir;
    RnnInputs in = random_rnn_inputs(rng, k, 4);
    OpResult res = run_op("LSTM", in.list(true, false), k.attrs(true), 3);
    ASSERT_TRUE(res.status.ok()) << res.status.message();
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t j = 0; j < 2; ++j) {
        if (t >= 1) {
          EXPECT_EQ(res.outputs[0].at(k.yi(t, 0, 1, j)), 0.0) << dir << " t " << t;
        }
        EXPECT_EQ(res.outputs[0].at(k.yi(t, 0, 2, j)), 0.0) << dir << " t " << t;
      }
    for (int64_t j = 0; j < 2; ++j) {
      EXPECT_EQ(res.outputs[1].at(k.si(0, 1, j)), res.outputs[0].at(k.yi(0, 0, 1, j))) << dir;
      EXPECT_EQ(res.outputs[1].at(k.si(0, 2, j)), 0.0) << dir;
      EXPECT_EQ(res.outputs[2].at(k.si(0, 2, j)), 0.0) << dir;
    }
    LstmRef want = reference_lstm(k, in);
    expect_close(res.outputs[0], want.y, dir);
    expect_close(res.outputs[2], want.yc, dir);
  }
}

TEST(Lstm, RandomSweepAgainstReference) {
  std::mt19937 rng(2024);
  int counts[3] = {};
  for (int iter = 0; iter < 400; ++iter) {
    RnnCase k = random_rnn_case(rng, true);
    RnnInputs in = random_rnn_inputs(rng, k, 4);
    counts[k.dirs() == 2 ? 2 : k.direction == "reverse"]++;
    std::string what = "iter " + std::to_string(iter) + ": " + k.describe();
    OpResult res = run_op("LSTM", in.list(true, rng() % 2 == 0), k.attrs(true), k.num_outputs);
    ASSERT_TRUE(res.status.ok()) << what << ": " << res.status.message();
    ASSERT_EQ(res.kernel, kernels::KernelStatus::kOk) << what;
    ASSERT_EQ(res.outputs.size(), k.num_outputs) << what;
    ASSERT_EQ(res.outputs[0].shape, k.y_shape()) << what;
    LstmRef want = reference_lstm(k, in);
    expect_close(res.outputs[0], want.y, what + " Y");
    if (k.num_outputs > 1) expect_close(res.outputs[1], want.yh, what + " Y_h");
    if (k.num_outputs > 2) expect_close(res.outputs[2], want.yc, what + " Y_c");
  }
  for (int n : counts) EXPECT_GT(n, 50);  // every direction was exercised
}

TEST(Lstm, HiddenSizeFromWWhenAbsent) {
  std::mt19937 rng(3);
  RnnCase k;
  k.seq = 2, k.batch = 2, k.input = 3, k.hidden = 5;
  RnnInputs in = random_rnn_inputs(rng, k, 4);
  OpResult res = run_op("LSTM", in.list(true, false), AttrStore(), 1);
  ASSERT_TRUE(res.status.ok()) << res.status.message();
  expect_close(res.outputs[0], reference_lstm(k, in).y, "Y");
}

// A bidirectional LSTM with six different activations, parameters consumed across both
// directions; inputs from closed forms, outputs from ONNX Runtime 1.31.1. (No clip: ONNX
// Runtime does not clip Ct before h, Kiln does, as the ONNX text says.)
TEST(Lstm, MixedActivationsBidirectionalAgainstOnnxRuntime) {
  auto fill = [](std::vector<int64_t> shape, double a, double p, double q, bool sine) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(a * (sine ? std::sin(p * i + q) : std::cos(p * i + q)));
    return make_tensor<float>(std::move(shape), v);
  };
  Tensor x = fill({3, 2, 2}, 1.5, 1.3, 0.1, true), w = fill({2, 8, 2}, 0.8, 0.7, 0, false);
  Tensor r = fill({2, 8, 2}, 0.6, 0.9, 0.5, true), b = fill({2, 16}, 0.3, 1.1, 0, false);
  // Forward HardSigmoid(0.3, 0.45), Elu(0.7), Softsign; reverse Affine(0.9, -0.1),
  // ScaledTanh(1.2, 0.8), Softplus.
  AttrStore a = AttrStore()
                    .set_int("hidden_size", 2)
                    .set_str("direction", "bidirectional")
                    .set_str("activations", "HardSigmoid,Elu,Softsign,Affine,ScaledTanh,Softplus")
                    .set_floats("activation_alpha", {0.3f, 0.7f, 0.9f, 1.2f})
                    .set_floats("activation_beta", {0.45f, -0.1f, 0.8f});
  OpResult res = run_op("LSTM", {x, w, r, b}, a, 3);
  ASSERT_TRUE(res.status.ok()) << res.status.message();
  expect_close(res.outputs[0],
               {-0.008567938, -0.04230935, 0.09983266, -0.02231658, -0.5224625, -0.8388588, 0.1925423,  -0.04230775,
                -0.05047755,  0.07493246,  0,          -0.06163132, -0.3119596, 0.4056379,  -0.1069779, -0.05919301,
                -4.802122e-05, 0.214541,   0,          -0.1048889,  0.06622093, 0.2721947,  -0.727719,  -0.4352641},
               "Y");
  expect_close(res.outputs[1], {-4.802122e-05, 0.214541, 0, -0.1048889, -0.5224625, -0.8388588, 0.1925423, -0.04230775},
               "Y_h");
  expect_close(res.outputs[2], {-5.196634e-05, 0.620544, -0.6392287, -0.3425415, 0.3802247, -0.1603658, -0.1209308, 1.244889},
               "Y_c");
}

TEST(Lstm, Errors) {
  std::mt19937 rng(11);
  RnnCase k;
  k.seq = 2, k.input = 2, k.hidden = 2;  // W [1, 8, 2]
  RnnInputs in = random_rnn_inputs(rng, k, 4);
  auto run = [&](std::vector<Tensor> v, const AttrStore& a, size_t outs = 1) {
    return run_op("LSTM", v, a, outs).status;
  };
  std::vector<Tensor> xwr = in.list(true, false);
  AttrStore h2 = AttrStore().set_int("hidden_size", 2);
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_int("input_forget", 1)),
                       "node 'test' (LSTM): input_forget=1 (coupled input and forget gates) is not supported; "
                       "export with input_forget=0"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_str("activations", "Sigmoid,Swish,Tanh")),
                       "activation 'Swish' is not supported (supported: Sigmoid, Tanh, Relu, Affine, LeakyRelu, "
                       "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2)
                                    .set_str("activations", "Affine,Elu,ScaledTanh")
                                    .set_floats("activation_alpha", {1, 2, 3, 4})
                                    .set_floats("activation_beta", {1, 2})),
                       "node 'test' (LSTM): activation_alpha has 4 values, but 'Affine,Elu,ScaledTanh' takes 3"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2)
                                    .set_str("activations", "Affine,Elu,ScaledTanh")
                                    .set_floats("activation_alpha", {1, 2, 3})
                                    .set_floats("activation_beta", {1})),
                       "activation #2 'ScaledTanh' of 'Affine,Elu,ScaledTanh' has no activation_beta value"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_str("activations", "Sigmoid,Tanh")),
                       "activations 'Sigmoid,Tanh' lists 2 functions, expected 3"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_ints("activations", {1, 2, 3})),
                       "activations must be one string of names joined with ','"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_str("direction", "sideways")),
                       "direction 'sideways' must be forward, reverse or bidirectional"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_str("direction", "bidirectional")),
                       "sizes 1 and 2 must be equal (W [1, 8, 2] must start with num_directions = 2 for "
                       "direction=bidirectional)"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore().set_int("hidden_size", 3)),
                       "sizes 8 and 12 must be equal (W [1, 8, 2] must have 4*hidden_size rows)"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore().set_int("hidden_size", 0)), "hidden_size 0 must be positive"));
  // Regression: 4 * hidden_size overflowed (undefined) for an absurd hidden_size.
  EXPECT_TRUE(has_text(run(xwr, AttrStore().set_int("hidden_size", int64_t{1} << 62)),
                       "hidden_size 4611686018427387904 must be <= 1048576"));
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_int("layout", 2)), "layout 2 must be 0 or 1"));
  EXPECT_TRUE(
      has_text(run(xwr, AttrStore(h2).set_float("clip", -1.f)), "clip -1 must be positive (omit it to not clip)"));
  EXPECT_TRUE(has_text(run(xwr, h2, 4), "has 4 outputs, at most 3 are defined"));
  EXPECT_TRUE(has_text(run({in.x, in.w}, h2), "expects 3 to 8 inputs, got 2"));
  Tensor w6 = random_f32(rng, {1, 6, 2});
  EXPECT_TRUE(
      has_text(run({in.x, w6, in.r}, AttrStore()), "size 6 must be divisible by 4 (W [1, 6, 2] rows hold 4 gates)"));
  EXPECT_TRUE(has_text(run({random_f32(rng, {2, 1, 3}), in.w, in.r}, h2),
                       "sizes 3 and 2 must be equal (input_size of X [2, 1, 3] and W [1, 8, 2])"));
  EXPECT_TRUE(has_text(run({random_f32(rng, {2, 2}), in.w, in.r}, h2), "X [2, 2] must have rank 3"));
  EXPECT_TRUE(has_text(run({in.x, in.w, random_f32(rng, {1, 8, 3})}, h2), "(R [1, 8, 3] must be [1, 8, 2])"));
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, random_f32(rng, {1, 8})}, h2), "(B [1, 8] must be [1, 16])"));
  Tensor h0 = random_f32(rng, {1, 2, 2});  // batch is 1
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, absent(), absent(), h0}, h2), "(initial_h [1, 2, 2] must be [1, 1, 2])"));
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, absent(), absent(), absent(), h0}, h2),
                       "(initial_c [1, 2, 2] must be [1, 1, 2])"));
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, absent(), absent(), absent(), absent(), random_f32(rng, {1, 6, 1})}, h2),
                       "P [1, 6, 1] must have rank 2"));
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, absent(), absent(), absent(), absent(), random_f32(rng, {1, 4})}, h2),
                       "(P [1, 4] must be [1, 6])"));
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, absent(), make_tensor<float>({1}, {2})}, h2),
                       "sequence_lens has dtype f32, expected i32 or i64"));
  EXPECT_TRUE(has_text(run({in.x, in.w, in.r, absent(), make_tensor<int32_t>({1}, {3})}, h2),
                       "sequence_lens value 3 is outside [0, 2] (seq_length of X [2, 1, 2])"));
}

// Runs LSTM over symbolic (T, batch) at `t_b` below the bound, as bind + execute would:
// outputs and scratch sized from the evaluated expressions, scratch slot sized at the bound.
void run_below_bound(core::ExprPool& pool, const SymResult& sym, RnnCase k, std::mt19937& rng, bool bad_len = false) {
  std::vector<int64_t> dims = {k.seq, k.batch}, bound = {16, 8};
  for (int64_t b = 0; b < k.batch; ++b) k.lens.push_back(static_cast<int32_t>(rng() % (k.seq + 1)));
  if (bad_len) k.lens[0] = static_cast<int32_t>(k.seq + 1);
  RnnInputs in = random_rnn_inputs(rng, k, 4);
  std::vector<Tensor> outs(3);
  for (size_t o = 0; o < 3; ++o) outs[o].shape = eval_shape(pool, sym.outputs[o].shape, dims);
  const size_t need = static_cast<size_t>(eval_all(pool, dims)[sym.scratch_bytes]);
  std::vector<float> scratch(static_cast<size_t>(eval_all(pool, bound)[sym.scratch_bytes]) / 4, std::nanf(""));
  ASSERT_LE(need, scratch.size() * 4);
  kernels::KernelStatus st = run_kernel("LSTM", in.list(true, true), &outs, k.attrs(true), scratch.data(), need);
  std::string what = k.describe();
  if (bad_len) {
    EXPECT_EQ(st, kernels::KernelStatus::kInvalidValue) << what;
    return;
  }
  ASSERT_EQ(st, kernels::KernelStatus::kOk) << what;
  ASSERT_EQ(outs[0].shape, k.y_shape()) << what;
  LstmRef want = reference_lstm(k, in);
  expect_close(outs[0], want.y, what + " Y");
  expect_close(outs[1], want.yh, what + " Y_h");
  expect_close(outs[2], want.yc, what + " Y_c");
}

TEST(Lstm, SymbolicShapesAndBelowBound) {
  for (int64_t layout : {0, 1}) {
    core::ExprPool pool;
    ExprId seq = pool.dim(pool.add_dim({"T", 1, 16, 1}));
    ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
    auto k = [&](int64_t v) { return pool.constant(v); };
    auto f32 = [](std::vector<ExprId> s) { return sym_input(DType::kF32, std::move(s)); };
    std::vector<ExprId> state =
        layout ? std::vector<ExprId>{batch, k(2), k(16)} : std::vector<ExprId>{k(2), batch, k(16)};
    std::vector<kernels::SymTensor> inputs = {
        f32(layout ? std::vector<ExprId>{batch, seq, k(8)} : std::vector<ExprId>{seq, batch, k(8)}),
        f32({k(2), k(64), k(8)}),
        f32({k(2), k(64), k(16)}),
        f32({k(2), k(128)}),
        sym_input(DType::kI32, {batch}),
        f32(state),
        f32(state),
        f32({k(2), k(48)})};
    AttrStore attrs = AttrStore().set_int("hidden_size", 16).set_str("direction", "bidirectional");
    if (layout) attrs.set_int("layout", 1);
    SymResult r = infer(pool, "LSTM", inputs, attrs, 3);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(r.shape, layout ? "[batch, T, 2, 16]" : "[T, 2, batch, 16]");
    EXPECT_EQ(pool.shape_to_string(r.outputs[1].shape), layout ? "[batch, 2, 16]" : "[2, batch, 16]");
    EXPECT_EQ(pool.shape_to_string(r.outputs[2].shape), layout ? "[batch, 2, 16]" : "[2, batch, 16]");
    // Per direction (2): (h + c) * 16 * 4 bytes per batch row (the gates are summed in the input
    // projections' rows), then rows 4*16 wide: W^T (8), R^T (16), a bias row and the input
    // projections (T*batch), times 4 bytes
    EXPECT_EQ(pool.to_string(r.scratch_bytes), "256*batch + 512*T*batch + 12800");
    EXPECT_EQ(guards_text(pool, r), "");

    std::mt19937 rng(static_cast<unsigned>(99 + layout));
    for (auto [t, b] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 2}, {5, 1}, {7, 5}, {16, 8}}) {
      RnnCase c;
      c.seq = t, c.batch = b, c.input = 8, c.hidden = 16, c.direction = "bidirectional", c.layout = layout;
      c.bias = c.init_h = c.init_c = c.peep = true;
      c.num_outputs = 3;
      run_below_bound(pool, r, c, rng);
    }
    RnnCase c;
    c.seq = 4, c.batch = 2, c.input = 8, c.hidden = 16, c.direction = "bidirectional", c.layout = layout;
    c.bias = c.init_h = c.init_c = c.peep = true;
    run_below_bound(pool, r, c, rng, /*bad_len=*/true);  // a length past T is caught by the kernel
  }

  // A batch named differently on initial_h needs a guard.
  core::ExprPool pool;
  ExprId seq = pool.dim(pool.add_dim({"T", 1, 16, 1}));
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId other = pool.dim(pool.add_dim({"n", 1, 8, 1}));
  auto k = [&](int64_t v) { return pool.constant(v); };
  auto f32 = [](std::vector<ExprId> s) { return sym_input(DType::kF32, std::move(s)); };
  SymResult r = infer(pool, "LSTM",
                      {f32({seq, batch, k(3)}), f32({k(1), k(8), k(3)}), f32({k(1), k(8), k(2)}), f32({k(1), k(16)}),
                       sym_input(DType::kI64, {batch}), f32({k(1), other, k(2)})},
                      AttrStore(), 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[T, 1, batch, 2]");
  EXPECT_EQ(guards_text(pool, r), "n == batch");
}

}  // namespace
}  // namespace kiln::testing
