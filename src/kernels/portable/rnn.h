#pragma once
// Shared by LSTM and GRU (lstm.cc, gru.cc): attribute and shape checks for the shape
// functions, and the same attributes, layouts and sequence lengths read at run time (no
// allocation, no strings).
//
// Inputs: 0 X, 1 W [dirs, gates*H, I], 2 R [dirs, gates*H, H], 3 B [dirs, 2*gates*H],
// 4 sequence_lens [batch], 5.. initial states (initial_h, then initial_c for LSTM).
// Outputs: 0 Y, then one final state per initial state (Y_h, then Y_c for LSTM).
// layout 0: X [T, batch, I], Y [T, dirs, batch, H], states [dirs, batch, H];
// layout 1: X [batch, T, I], Y [batch, T, dirs, H], states [batch, dirs, H].

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/simd/vmath.h"

namespace kiln::kernels {

// The ONNX RNN activation list. Parameters: Affine alpha*x + beta, LeakyRelu (x >= 0 ? x :
// alpha*x), ThresholdedRelu (x > alpha ? x : 0), ScaledTanh alpha*tanh(beta*x), HardSigmoid
// min(max(alpha*x + beta, 0), 1), Elu (x >= 0 ? x : alpha*(e^x - 1)); the others take none.
enum class RnnAct : uint8_t {
  kSigmoid, kTanh, kRelu, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu, kSoftsign, kSoftplus
};
constexpr int kRnnActCount = 11;

/// One activation with its parameters (unused ones are 0).
struct RnnActFn {
  RnnAct kind = RnnAct::kSigmoid;
  float alpha = 0.f, beta = 0.f;
};

/// v[j] = act(clip(v[j])) for j < n, in place (clip 0: none); Sigmoid, Tanh and ScaledTanh
/// vectorized (kernels/simd).
inline void rnn_apply(const RnnActFn& a, float clip, float* v, int64_t n) {
  if (clip > 0.f)
    for (int64_t j = 0; j < n; ++j) v[j] = std::min(clip, std::max(-clip, v[j]));
  const float al = a.alpha, be = a.beta;
  const size_t sn = static_cast<size_t>(n);
  switch (a.kind) {
    case RnnAct::kSigmoid: return simd::sigmoid(v, v, sn);
    case RnnAct::kTanh: return simd::tanh(v, v, sn);
    case RnnAct::kRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] > 0.f ? v[j] : 0.f;
      return;
    case RnnAct::kAffine:
      for (int64_t j = 0; j < n; ++j) v[j] = al * v[j] + be;
      return;
    case RnnAct::kLeakyRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] >= 0.f ? v[j] : al * v[j];
      return;
    case RnnAct::kThresholdedRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] > al ? v[j] : 0.f;
      return;
    case RnnAct::kScaledTanh:
      for (int64_t j = 0; j < n; ++j) v[j] *= be;
      simd::tanh(v, v, sn);
      for (int64_t j = 0; j < n; ++j) v[j] *= al;
      return;
    case RnnAct::kHardSigmoid:
      for (int64_t j = 0; j < n; ++j) v[j] = clamp_keep_nan(al * v[j] + be, 0.f, 1.f);
      return;
    case RnnAct::kElu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] >= 0.f ? v[j] : al * (std::exp(v[j]) - 1.f);
      return;
    case RnnAct::kSoftsign:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] / (1.f + std::fabs(v[j]));
      return;
    case RnnAct::kSoftplus:  // log(1 + e^x) without overflow for large x
      for (int64_t j = 0; j < n; ++j) v[j] = std::max(v[j], 0.f) + std::log1p(std::exp(-std::fabs(v[j])));
      return;
  }
}

/// ONNX spellings in RnnAct order.
const char* rnn_act_name(RnnAct a);

/// How many activation_alpha / activation_beta values `a` takes (0 or 1 each), and the
/// defaults of the ONNX operator of the same name (ONNX: "Default values are the same as of
/// corresponding ONNX operators"): LeakyRelu 0.01, ThresholdedRelu 1, Affine 1 and 0,
/// HardSigmoid 0.2 and 0.5, Elu 1. ScaledTanh has none (*has_default false).
void rnn_act_params(RnnAct a, int* n_alpha, int* n_beta, RnnActFn* defaults, bool* has_default);

/// Parses one activation name [s, s + n) (ONNX spelling, case-insensitive, spaces trimmed).
bool rnn_act_from_name(const char* s, size_t n, RnnAct* out);

/// Static description of one recurrent op.
struct RnnKind {
  int gates;         ///< 4 for LSTM (i, o, f, c), 3 for GRU (z, r, h)
  int acts_per_dir;  ///< activations per direction: 3 for LSTM (f, g, h), 2 for GRU (f, g)
  int states;        ///< 2 for LSTM (h, c), 1 for GRU (h)
  int max_inputs;    ///< 8 for LSTM (P last), 6 for GRU
  int scratch_rows;  ///< floats of scratch per (batch row, hidden unit): the states, and GRU's recurrent sums
};

/// The attributes and actual sizes of one run.
struct RnnRun {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool layout1 = false;  ///< batch-first
  bool reverse = false;  ///< direction == reverse (bidirectional runs direction 1 reversed)
  float clip = 0.f;      ///< 0: no clipping
  RnnActFn act[6] = {};  ///< per direction: acts_per_dir entries

  const RnnActFn& f(int64_t d, int k, int per_dir) const { return act[d * per_dir + k]; }
  /// Row of X (and of the input projections) that holds time t of batch row b.
  int64_t row(int64_t t, int64_t b) const { return layout1 ? b * seq + t : t * batch + b; }
  /// Rows between batch rows b and b + 1 at the same time.
  int64_t row_step() const { return layout1 ? seq : 1; }
  int64_t x_off(int64_t t, int64_t b) const { return row(t, b) * input; }
  int64_t y_off(int64_t t, int64_t d, int64_t b) const {
    return (layout1 ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  int64_t state_off(int64_t d, int64_t b) const { return (layout1 ? b * dirs + d : d * batch + b) * hidden; }
};

/// Number of directions for the `direction` attribute; 0 when unknown.
int rnn_dirs(const core::Attrs& a, bool* reverse);

/// Why an `activations`, `activation_alpha` or `activation_beta` attribute was rejected.
struct RnnActError {
  bool not_string = false;
  bool bad_name = false;  ///< [start, start + len) of the string is not a supported name
  size_t start = 0, len = 0;
  int count = 0;              ///< names in the list
  const char* params = nullptr;  ///< "activation_alpha" / "activation_beta" when that list is wrong
  bool params_not_floats = false;
  int param_count = 0, param_used = 0;  ///< values given, values the functions take
  int no_default = -1;        ///< index of a function missing a value that has no default
};

/// Fills act[] from the `activations` attribute (one string joined with ','), or the
/// defaults (Sigmoid, Tanh[, Tanh]). A bidirectional node may list one set per direction or
/// one set for both. activation_alpha / activation_beta are consumed in list order by the
/// functions that take a value (as ONNX Runtime reads them); a function past the end of a
/// list gets its ONNX default. A list shared by both directions shares its values too.
/// False (with *err filled) on a non-string, an unknown name, a wrong count, parameter lists
/// that are not floats or hold more values than the functions take, or a ScaledTanh without
/// its values.
bool rnn_read_acts(const core::Attrs& a, int per_dir, int dirs, RnnActFn* act, RnnActError* err);

/// Floats of scratch one direction uses: per batch row (scratch_rows * H), then W^T, R^T, a
/// bias row and the input projections. Each direction has its own slot, so the two of a
/// bidirectional layer can run at once.
inline int64_t rnn_slot_floats(const RnnKind& k, const RnnRun& r) {
  return k.scratch_rows * r.batch * r.hidden + k.gates * r.hidden * (r.input + r.hidden + 1 + r.seq * r.batch);
}

/// Direction d's scratch slot.
inline float* rnn_slot(const RunCtx& c, const RnnKind& k, const RnnRun& r, int64_t d) {
  return static_cast<float*>(c.scratch) + d * rnn_slot_floats(k, r);
}

/// Runs fn(ctx, d) for each direction: the two of a bidirectional layer on two threads when
/// the pool has them (each with a ctx whose pool is null: no nested splitting), else in order.
template <typename Fn>
inline void rnn_run_directions(const RunCtx& c, const RnnRun& r, Fn fn) {
  if (r.dirs == 2 && c.pool) {
    RunCtx inner = c;
    inner.pool = nullptr;
    parallel_for(c, 2, 1, [&](size_t b, size_t e) {
      for (size_t d = b; d < e; ++d) fn(inner, static_cast<int64_t>(d));
    });
    return;
  }
  for (int64_t d = 0; d < r.dirs; ++d) fn(c, d);
}

/// Reads attributes and actual sizes for the kernel; false when they are inconsistent
/// (the shape function rejected such nodes already).
bool rnn_read(const RunCtx& c, const RnnKind& k, RnnRun* r);

/// dst[k][j] = src[j][k] for a row-major [rows, cols] src.
void rnn_transpose(const float* src, int64_t rows, int64_t cols, float* dst);

/// A direction's part of scratch, after the per-batch-row part (each `gates*H` wide):
/// W^T [input], R^T [H], one bias row, and the input projections of every row of X [seq*batch]
/// in X's memory order.
struct RnnDirScratch {
  float* wt;    ///< W^T [input][gates*H]
  float* rt;    ///< R^T [H][gates*H]
  float* bias;  ///< [gates*H], filled by the kernel before rnn_project (free after it)
  float* proj;  ///< X*W^T + bias [seq*batch][gates*H]; row r.row(t, b); a step sums its gates there
};

/// Lays out direction d's scratch and fills W^T and R^T.
RnnDirScratch rnn_prepare_direction(const RunCtx& c, const RnnKind& k, const RnnRun& r, int64_t d);

/// The input projections of all steps, bias included: one matrix product over the whole
/// sequence, so the recurrence adds only Ht-1*R^T per step, in place.
void rnn_project(const RunCtx& c, const RnnKind& k, const RnnRun& r, const RnnDirScratch& s);

/// Length of batch row b's sequence (all of X when sequence_lens is omitted); -1 when out of
/// [0, seq].
inline int64_t rnn_seq_len(const RunCtx& c, const RnnRun& r, int64_t b) {
  if (!c.has_input(4)) return r.seq;
  const TensorView& s = c.in(4);
  int64_t len = s.dtype == DType::kI64 ? s.as<int64_t>()[b] : s.as<int32_t>()[b];
  return len >= 0 && len <= r.seq ? len : -1;
}

/// Direction d's running states (h, then c for LSTM; each [batch, H] in scratch) start from
/// inputs 5.. (initial_h, initial_c) when given, else from zeros.
void rnn_load_states(const RunCtx& c, const RnnRun& r, int64_t d, float* const* states, int n);

/// Runs step(t, b0, nb) over rows [b0, b0 + nb) at time t, for every batch row and every time
/// inside its sequence length, in the order of direction d: all rows advance one step before
/// any row takes the next. When every row runs the whole sequence, a step takes all rows at
/// once (their recurrent products share one pass over R); else one row at a time.
template <typename Step>
inline void rnn_for_each_step(const RunCtx& c, const RnnRun& r, int64_t d, Step step) {
  const bool reverse = r.reverse || d == 1;
  bool whole = true;
  for (int64_t b = 0; b < r.batch; ++b) whole = whole && rnn_seq_len(c, r, b) == r.seq;
  for (int64_t i = 0; i < r.seq; ++i) {
    if (whole) {
      step(reverse ? r.seq - 1 - i : i, int64_t{0}, r.batch);
      continue;
    }
    for (int64_t b = 0; b < r.batch; ++b) {
      const int64_t len = rnn_seq_len(c, r, b);
      if (i < len) step(reverse ? len - 1 - i : i, b, int64_t{1});
    }
  }
}

/// After direction d: zeroes Y past each row's sequence length and writes the final states
/// to outputs 1.. (Y_h, Y_c); a row of length 0 gets zero states.
void rnn_finish_direction(const RunCtx& c, const RnnRun& r, int64_t d, const float* const* states, int n);


/// Shape function shared by LSTM and GRU: checks attributes and inputs 0..(4 + states),
/// sets Y and the final states, and asks for scratch. Returns the hidden size in *hidden
/// and the number of directions in *dirs.
Status rnn_shape(ShapeCtx& c, const RnnKind& k, ExprId* hidden, ExprId* dirs);

}  // namespace kiln::kernels
