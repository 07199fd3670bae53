#pragma once
// Shared by lstm_test.cc and gru_test.cc: one test case's configuration, its random inputs,
// ONNX's layout indexing (written from the spec, independently of the kernels), the
// activations in double, and the comparison of kernel outputs with a reference.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/attr_store.h"
#include "op_test_util.h"

namespace kiln::testing {

/// One LSTM / GRU configuration.
struct RnnCase {
  int64_t seq = 1, batch = 1, input = 1, hidden = 1;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = false, init_h = false, init_c = false, peep = false;
  std::vector<int32_t> lens;  ///< sequence_lens when non-empty
  float clip = 0.f;           ///< 0: attribute absent
  std::string acts;           ///< activations attribute ("" = absent, defaults)
  std::vector<float> alpha, beta;  ///< activation_alpha / activation_beta (empty = absent)
  int64_t lbr = 0;            ///< GRU linear_before_reset
  size_t num_outputs = 1;

  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  int64_t len(int64_t b) const { return lens.empty() ? seq : lens[b]; }
  std::string describe() const {
    return "seq " + std::to_string(seq) + " batch " + std::to_string(batch) + " input " + std::to_string(input) +
           " hidden " + std::to_string(hidden) + " " + direction + " layout " + std::to_string(layout) +
           (bias ? " B" : "") + (lens.empty() ? "" : " lens") + (init_h ? " h0" : "") + (init_c ? " c0" : "") +
           (peep ? " P" : "") + (clip > 0 ? " clip" : "") + " acts '" + acts + "'" + floats_text(" alpha", alpha) + floats_text(" beta", beta) + " lbr " + std::to_string(lbr) +
           " outputs " + std::to_string(num_outputs);
  }
  static std::string floats_text(const char* what, const std::vector<float>& v) {
    if (v.empty()) return "";
    std::string s = std::string(what) + " {";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "}";
  }
  // ONNX layouts: 0 is X [T, batch, I], Y [T, dirs, batch, H], states [dirs, batch, H];
  // 1 is X [batch, T, I], Y [batch, T, dirs, H], states [batch, dirs, H].
  std::vector<int64_t> x_shape() const {
    return layout ? std::vector<int64_t>{batch, seq, input} : std::vector<int64_t>{seq, batch, input};
  }
  std::vector<int64_t> state_shape() const {
    return layout ? std::vector<int64_t>{batch, dirs(), hidden} : std::vector<int64_t>{dirs(), batch, hidden};
  }
  std::vector<int64_t> y_shape() const {
    return layout ? std::vector<int64_t>{batch, seq, dirs(), hidden} : std::vector<int64_t>{seq, dirs(), batch, hidden};
  }
  int64_t xi(int64_t t, int64_t b, int64_t k) const {
    return layout ? (b * seq + t) * input + k : (t * batch + b) * input + k;
  }
  int64_t yi(int64_t t, int64_t d, int64_t b, int64_t j) const {
    return layout ? ((b * seq + t) * dirs() + d) * hidden + j : ((t * dirs() + d) * batch + b) * hidden + j;
  }
  int64_t si(int64_t d, int64_t b, int64_t j) const {
    return layout ? (b * dirs() + d) * hidden + j : (d * batch + b) * hidden + j;
  }

  core::AttrStore attrs(bool lstm) const {
    core::AttrStore a;
    a.set_int("hidden_size", hidden);
    if (direction != "forward") a.set_str("direction", direction);
    if (layout) a.set_int("layout", layout);
    if (clip > 0) a.set_float("clip", clip);
    if (!acts.empty()) a.set_str("activations", acts);
    if (!alpha.empty()) a.set_floats("activation_alpha", alpha);
    if (!beta.empty()) a.set_floats("activation_beta", beta);
    if (!lstm && lbr) a.set_int("linear_before_reset", lbr);
    return a;
  }
};

/// Every input of a case; absent ones have present == false.
struct RnnInputs {
  Tensor x, w, r, b, lens, h0, c0, p;

  /// Operand list X, W, R, B, sequence_lens, initial_h[, initial_c, P], without trailing
  /// absent entries unless `keep_absent`.
  std::vector<Tensor> list(bool lstm, bool keep_absent) const {
    std::vector<Tensor> v = {x, w, r, b, lens, h0};
    if (lstm) v.insert(v.end(), {c0, p});
    while (!keep_absent && !v.back().present) v.pop_back();
    return v;
  }
};

/// Random inputs for `k` with `gates` gates (4 LSTM, 3 GRU).
inline RnnInputs random_rnn_inputs(std::mt19937& rng, const RnnCase& k, int64_t gates) {
  RnnInputs in;
  const int64_t d = k.dirs(), h = k.hidden;
  in.x = random_f32(rng, k.x_shape());
  in.w = random_f32(rng, {d, gates * h, k.input});
  in.r = random_f32(rng, {d, gates * h, h});
  in.b = k.bias ? random_f32(rng, {d, 2 * gates * h}) : absent();
  in.lens = k.lens.empty() ? absent() : make_tensor<int32_t>({k.batch}, k.lens);
  in.h0 = k.init_h ? random_f32(rng, k.state_shape()) : absent();
  in.c0 = k.init_c ? random_f32(rng, k.state_shape()) : absent();
  in.p = k.peep ? random_f32(rng, {d, 3 * h}) : absent();
  return in;
}

/// Whether the ONNX RNN activation `name` takes an alpha (which 0) or a beta (which 1).
inline int ref_act_takes(const std::string& name, int which) {
  if (name == "Affine" || name == "ScaledTanh" || name == "HardSigmoid") return 1;
  return which == 0 && (name == "LeakyRelu" || name == "ThresholdedRelu" || name == "Elu");
}

/// A random case within the sweep's ranges (seq 1..9, batch 1..4, input 1..5, hidden 1..6).
inline RnnCase random_rnn_case(std::mt19937& rng, bool lstm) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  RnnCase k;
  k.seq = pick(1, 9);
  k.batch = pick(1, 4);
  k.input = pick(1, 5);
  k.hidden = pick(1, 6);
  const char* dirs[] = {"forward", "reverse", "bidirectional"};
  k.direction = dirs[pick(0, 2)];
  k.layout = pick(0, 3) == 0;
  k.bias = pick(0, 1);
  k.init_h = pick(0, 1);
  k.init_c = lstm && pick(0, 1);
  k.peep = lstm && pick(0, 2) == 0;
  if (pick(0, 1))
    for (int64_t b = 0; b < k.batch; ++b) k.lens.push_back(static_cast<int32_t>(pick(0, k.seq)));
  if (pick(0, 3) == 0) k.clip = static_cast<float>(pick(1, 8)) * 0.25f;
  if (pick(0, 1) == 0) {
    // Any of the ONNX RNN activations; values for the ones that take them (all of them when
    // a ScaledTanh needs its own, else a random prefix: the rest take their defaults).
    const char* names[] = {"Sigmoid",    "Tanh",        "Relu", "Affine",   "LeakyRelu", "ThresholdedRelu",
                           "ScaledTanh", "HardSigmoid", "Elu",  "Softsign", "Softplus"};
    int n = (lstm ? 3 : 2) * (k.dirs() == 2 && pick(0, 1) ? 2 : 1);
    int n_alpha = 0, n_beta = 0;
    bool scaled_tanh = false;
    // The gates' f stays a gate (Sigmoid, HardSigmoid: values in [0, 1]); elsewhere an
    // unbounded f makes the recurrence chaotic, and float and double part ways.
    for (int i = 0; i < n; ++i) {
      std::string name = i % (lstm ? 3 : 2) == 0 ? (pick(0, 1) ? "Sigmoid" : "HardSigmoid") : names[pick(0, 10)];
      k.acts += (i ? "," : "") + name;
      n_alpha += ref_act_takes(name, 0);
      n_beta += ref_act_takes(name, 1);
      scaled_tanh |= name == "ScaledTanh";
    }
    std::uniform_real_distribution<float> a(0.25f, 1.25f), b(-0.5f, 0.5f);
    for (int i = 0, m = scaled_tanh ? n_alpha : static_cast<int>(pick(0, n_alpha)); i < m; ++i) k.alpha.push_back(a(rng));
    for (int i = 0, m = scaled_tanh ? n_beta : static_cast<int>(pick(0, n_beta)); i < m; ++i) k.beta.push_back(b(rng));
  }
  k.lbr = lstm ? 0 : pick(0, 1);
  k.num_outputs = static_cast<size_t>(pick(1, lstm ? 3 : 2));
  return k;
}

/// An activation and its parameters.
struct RefAct {
  std::string name;
  double alpha = 0, beta = 0;
};

/// The case's activations (`per_dir` per direction), from the ONNX RNN notes: the list is one
/// set per direction or one set shared by both; activation_alpha / activation_beta are
/// consumed in order by the functions that take a value (ONNX Runtime's reading), and a
/// function past the end takes the default of the ONNX operator of its name.
inline std::vector<RefAct> ref_acts(const RnnCase& c, int per_dir) {
  std::vector<RefAct> acts;
  if (c.acts.empty()) {
    for (int k = 0; k < per_dir; ++k) acts.push_back({k == 0 ? "Sigmoid" : "Tanh"});
    return acts;
  }
  std::string cur;
  for (char ch : c.acts + ",") {
    if (ch != ',') {
      cur += ch;
      continue;
    }
    RefAct a{cur};
    if (cur == "Affine") a.alpha = 1.0;  // ONNX Affine: alpha 1, beta 0
    if (cur == "LeakyRelu") a.alpha = 0.01;
    if (cur == "ThresholdedRelu" || cur == "Elu") a.alpha = 1.0;
    if (cur == "HardSigmoid") a.alpha = 0.2, a.beta = 0.5;
    acts.push_back(a);
    cur.clear();
  }
  size_t na = 0, nb = 0;
  for (RefAct& a : acts) {
    if (ref_act_takes(a.name, 0) && na < c.alpha.size()) a.alpha = c.alpha[na++];
    if (ref_act_takes(a.name, 1) && nb < c.beta.size()) a.beta = c.beta[nb++];
  }
  return acts;
}

/// Activation `k` of direction d, in double.
inline double ref_act(const RnnCase& c, int per_dir, int64_t d, int k, double x) {
  const std::vector<RefAct> acts = ref_acts(c, per_dir);
  const RefAct& a = acts[acts.size() == static_cast<size_t>(per_dir) ? k : d * per_dir + k];
  if (c.clip > 0) x = std::min<double>(c.clip, std::max<double>(-c.clip, x));
  const double al = a.alpha, be = a.beta;
  if (a.name == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (a.name == "Tanh") return std::tanh(x);
  if (a.name == "Relu") return x > 0 ? x : 0;
  if (a.name == "Affine") return al * x + be;
  if (a.name == "LeakyRelu") return x >= 0 ? x : al * x;
  if (a.name == "ThresholdedRelu") return x > al ? x : 0;
  if (a.name == "ScaledTanh") return al * std::tanh(be * x);
  if (a.name == "HardSigmoid") return std::min(1.0, std::max(0.0, al * x + be));
  if (a.name == "Elu") return x >= 0 ? x : al * (std::exp(x) - 1);
  if (a.name == "Softsign") return x / (1 + std::abs(x));
  if (a.name == "Softplus") return std::log(1 + std::exp(x));
  ADD_FAILURE() << "unknown activation " << a.name;
  return 0;
}

/// Expects `got` (f32) to match `want` (double) elementwise.
inline void expect_close(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.at(static_cast<int64_t>(i)), want[i], 1e-4 * (1 + std::abs(want[i]))) << what << ", element " << i;
}

}  // namespace kiln::testing
