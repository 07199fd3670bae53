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
  EXPECT_TRUE(has_text(run(xwr, AttrStore(h2).set_str("activations", "HardSigmoid,Tanh")),
                       "activation 'HardSigmoid' is not supported (supported: Sigmoid, Tanh, Relu)"));
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
  // Per direction (2): (3 gates + temp + h) * 16 * 4 bytes per batch row, then rows 3*16 wide:
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
