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
inline const char* rnn_act_name(RnnAct a) {
  static const char* const kNames[kRnnActCount] = {"Sigmoid",     "Tanh", "Relu", "Affine",   "LeakyRelu", "ThresholdedRelu",
                                                   "ScaledTanh",  "HardSigmoid", "Elu", "Softsign", "Softplus"};
  return kNames[static_cast<int>(a)];
}

/// How many activation_alpha / activation_beta values `a` takes (0 or 1 each), and the
/// defaults of the ONNX operator of the same name (ONNX: "Default values are the same as of
/// corresponding ONNX operators"): LeakyRelu 0.01, ThresholdedRelu 1, Affine 1 and 0,
/// HardSigmoid 0.2 and 0.5, Elu 1. ScaledTanh has none (*has_default false).
inline void rnn_act_params(RnnAct a, int* n_alpha, int* n_beta, RnnActFn* defaults, bool* has_default) {
  *n_alpha = *n_beta = 0;
  *has_default = true;
  defaults->kind = a;
  defaults->alpha = defaults->beta = 0.f;
  switch (a) {
    case RnnAct::kAffine: *n_alpha = *n_beta = 1, defaults->alpha = 1.f; break;
    case RnnAct::kLeakyRelu: *n_alpha = 1, defaults->alpha = 0.01f; break;
    case RnnAct::kThresholdedRelu: *n_alpha = 1, defaults->alpha = 1.f; break;
    case RnnAct::kScaledTanh: *n_alpha = *n_beta = 1, *has_default = false; break;
    case RnnAct::kHardSigmoid: *n_alpha = *n_beta = 1, defaults->alpha = 0.2f, defaults->beta = 0.5f; break;
    case RnnAct::kElu: *n_alpha = 1, defaults->alpha = 1.f; break;
    default: break;
  }
}

/// Parses one activation name [s, s + n) (ONNX spelling, case-insensitive, spaces trimmed).
inline bool rnn_act_from_name(const char* s, size_t n, RnnAct* out) {
  while (n > 0 && *s == ' ') ++s, --n;
  while (n > 0 && s[n - 1] == ' ') --n;
  auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
  for (int i = 0; i < kRnnActCount; ++i) {
    const char* name = rnn_act_name(static_cast<RnnAct>(i));
    if (std::strlen(name) != n) continue;
    size_t k = 0;
    while (k < n && lower(s[k]) == lower(name[k])) ++k;
    if (k == n) {
      *out = static_cast<RnnAct>(i);
      return true;
    }
  }
  return false;
}

/// Static description of one recurrent op.
struct RnnKind {
  int gates;         ///< 4 for LSTM (i, o, f, c), 3 for GRU (z, r, h)
  int acts_per_dir;  ///< activations per direction: 3 for LSTM (f, g, h), 2 for GRU (f, g)
  int states;        ///< 2 for LSTM (h, c), 1 for GRU (h)
  int max_inputs;    ///< 8 for LSTM (P last), 6 for GRU
  int scratch_rows;  ///< floats of scratch per (batch row, hidden unit)
};

/// The attributes and actual sizes of one run.
struct RnnRun {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool layout1 = false;  ///< batch-first
  bool reverse = false;  ///< direction == reverse (bidirectional runs direction 1 reversed)
  float clip = 0.f;      ///< 0: no clipping
  RnnActFn act[6] = {};  ///< per direction: acts_per_dir entries

  const RnnActFn& f(int64_t d, int k, int per_dir) const { return act[d * per_dir + k]; }
  int64_t x_off(int64_t t, int64_t b) const { return (layout1 ? b * seq + t : t * batch + b) * input; }
  int64_t y_off(int64_t t, int64_t d, int64_t b) const {
    return (layout1 ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  int64_t state_off(int64_t d, int64_t b) const { return (layout1 ? b * dirs + d : d * batch + b) * hidden; }
};

/// Number of directions for the `direction` attribute; 0 when unknown.
inline int rnn_dirs(const core::Attrs& a, bool* reverse) {
  *reverse = a.str_equals("direction", "reverse");
  if (!a.has("direction") || a.str_equals("direction", "forward") || *reverse) return 1;
  return a.str_equals("direction", "bidirectional") ? 2 : 0;
}

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
inline bool rnn_read_acts(const core::Attrs& a, int per_dir, int dirs, RnnActFn* act, RnnActError* err) {
  for (int d = 0; d < dirs; ++d)
    for (int k = 0; k < per_dir; ++k) act[d * per_dir + k].kind = k == 0 ? RnnAct::kSigmoid : RnnAct::kTanh;
  const core::AttrRef* r = a.find("activations");
  if (!r) {  // the defaults take no values
    const char* lists[2] = {"activation_alpha", "activation_beta"};
    for (const char* l : lists) {
      const core::AttrRef* p = a.find(l);
      if (p && (p->kind != core::AttrKind::kFloats || p->count > 0)) {
        err->params = l;
        err->params_not_floats = p->kind != core::AttrKind::kFloats;
        err->param_count = static_cast<int>(p->count);
        return false;
      }
    }
    return true;
  }
  if (r->kind != core::AttrKind::kString) return !(err->not_string = true);
  RnnActFn parsed[6];
  const char* s = r->str;
  for (size_t start = 0;;) {
    size_t end = start;
    while (s[end] != '\0' && s[end] != ',') ++end;
    RnnAct x;
    if (!rnn_act_from_name(s + start, end - start, &x)) {
      err->start = start;
      err->len = end - start;
      return !(err->bad_name = true);
    }
    if (err->count < 6) parsed[err->count].kind = x;
    ++err->count;
    if (s[end] == '\0') break;
    start = end + 1;
  }
  int n = err->count;
  if (n != per_dir && n != per_dir * dirs) return false;
  // Parameters, consumed in order by the functions that take them.
  const char* lists[2] = {"activation_alpha", "activation_beta"};
  const float* values[2] = {nullptr, nullptr};
  int sizes[2] = {0, 0}, used[2] = {0, 0};
  for (int l = 0; l < 2; ++l) {
    const core::AttrRef* p = a.find(lists[l]);
    if (!p) continue;
    if (p->kind == core::AttrKind::kFloats) {
      values[l] = p->floats;
      sizes[l] = static_cast<int>(p->count);
    } else {
      err->params = lists[l];
      return !(err->params_not_floats = true);
    }
  }
  for (int i = 0; i < n; ++i) {
    int takes[2];
    bool has_default = true;
    rnn_act_params(parsed[i].kind, &takes[0], &takes[1], &parsed[i], &has_default);
    for (int l = 0; l < 2; ++l) {
      if (!takes[l]) continue;
      if (used[l] < sizes[l]) {
        (l == 0 ? parsed[i].alpha : parsed[i].beta) = values[l][used[l]];
      } else if (!has_default) {
        err->no_default = i;
        err->params = lists[l];
        return false;
      }
      ++used[l];
    }
  }
  for (int l = 0; l < 2; ++l)
    if (sizes[l] > used[l]) {
      err->params = lists[l];
      err->param_count = sizes[l];
      err->param_used = used[l];
      return false;
    }
  for (int d = 0; d < dirs; ++d)
    for (int k = 0; k < per_dir; ++k) act[d * per_dir + k] = parsed[n == per_dir ? k : d * per_dir + k];
  return true;
}

/// Floats of scratch one direction uses: per batch row (gates and states), then W^T, R^T, a
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
inline bool rnn_read(const RunCtx& c, const RnnKind& k, RnnRun* r) {
  r->dirs = rnn_dirs(c.attrs, &r->reverse);
  r->layout1 = c.attrs.get_int("layout", 0) == 1;
  r->clip = c.attrs.has("clip") ? c.attrs.get_float("clip", 0.f) : 0.f;
  RnnActError err;
  if (r->dirs == 0 || !rnn_read_acts(c.attrs, k.acts_per_dir, static_cast<int>(r->dirs), r->act, &err)) return false;
  const TensorView& x = c.in(0);
  r->seq = x.dims[r->layout1 ? 1 : 0];
  r->batch = x.dims[r->layout1 ? 0 : 1];
  r->input = x.dims[2];
  r->hidden = c.in(2).dims[2];
  size_t need = static_cast<size_t>(r->dirs) * rnn_slot_floats(k, *r) * sizeof(float);
  return c.scratch != nullptr && c.scratch_bytes >= need;
}

/// dst[k][j] = src[j][k] for a row-major [rows, cols] src.
inline void rnn_transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t k = 0; k < cols; ++k) dst[k * rows + j] = src[j * cols + k];
}

/// A direction's part of scratch, after the per-batch-row part (each `gates*H` wide):
/// W^T [input], R^T [H], one bias row, and the input projections of every row of X [seq*batch]
/// in X's memory order.
struct RnnDirScratch {
  float* wt;    ///< W^T [input][gates*H]
  float* rt;    ///< R^T [H][gates*H]
  float* bias;  ///< [gates*H], filled by the kernel
  float* proj;  ///< X*W^T [seq*batch][gates*H]; row x_off(t, b) / input
};

/// Lays out direction d's scratch and fills W^T, R^T and the input projections of all steps:
/// one matrix product over the whole sequence, so the recurrence adds only Ht-1*R^T per step.
inline RnnDirScratch rnn_prepare_direction(const RunCtx& c, const RnnKind& k, const RnnRun& r, int64_t d) {
  const int64_t gh = k.gates * r.hidden, in = r.input, hs = r.hidden, rows = r.seq * r.batch;
  RnnDirScratch s;
  s.wt = rnn_slot(c, k, r, d) + k.scratch_rows * r.batch * r.hidden;
  s.rt = s.wt + in * gh;
  s.bias = s.rt + hs * gh;
  s.proj = s.bias + gh;
  rnn_transpose(c.in(1).as<float>() + d * gh * in, gh, in, s.wt);
  rnn_transpose(c.in(2).as<float>() + d * gh * hs, gh, hs, s.rt);
  const float* x = c.in(0).as<float>();
  // Rows split over the pool (chunks of at least ~64K multiply-adds), as the actual sizes say.
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, 65536 / std::max<int64_t>(1, gh * in)));
  parallel_for(c, static_cast<size_t>(rows), grain, [&](size_t b, size_t e) {
    std::fill(s.proj + b * gh, s.proj + e * gh, 0.f);
    for (size_t row = b; row < e; ++row)
      simd::add_vecmat(s.wt, static_cast<size_t>(gh), static_cast<size_t>(gh), static_cast<size_t>(in), x + row * in,
                       s.proj + row * gh);
  });
  return s;
}

/// gates[j] = proj[j] + bias[j] for j < n.
inline void rnn_start_gates(const float* proj, const float* bias, int64_t n, float* gates) {
  for (int64_t j = 0; j < n; ++j) gates[j] = proj[j] + bias[j];
}

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
inline void rnn_load_states(const RunCtx& c, const RnnRun& r, int64_t d, float* const* states, int n) {
  const int64_t hs = r.hidden;
  for (int s = 0; s < n; ++s)
    for (int64_t b = 0; b < r.batch; ++b) {
      float* st = states[s] + b * hs;
      if (c.has_input(5 + s))
        std::memcpy(st, c.in(5 + s).as<float>() + r.state_off(d, b), hs * sizeof(float));
      else
        std::fill(st, st + hs, 0.f);
    }
}

/// Runs step(t, b) for every batch row b and every time t inside its sequence length, in
/// the order of direction d: all rows advance one step before any row takes the next.
template <typename Step>
inline void rnn_for_each_step(const RunCtx& c, const RnnRun& r, int64_t d, Step step) {
  const bool reverse = r.reverse || d == 1;
  for (int64_t i = 0; i < r.seq; ++i)
    for (int64_t b = 0; b < r.batch; ++b) {
      const int64_t len = rnn_seq_len(c, r, b);
      if (i < len) step(reverse ? len - 1 - i : i, b);
    }
}

/// After direction d: zeroes Y past each row's sequence length and writes the final states
/// to outputs 1.. (Y_h, Y_c); a row of length 0 gets zero states.
inline void rnn_finish_direction(const RunCtx& c, const RnnRun& r, int64_t d, const float* const* states, int n) {
  const int64_t hs = r.hidden;
  float* y = c.out(0).as<float>();
  for (int64_t b = 0; b < r.batch; ++b) {
    const int64_t len = rnn_seq_len(c, r, b);
    for (int64_t t = len; t < r.seq; ++t) std::fill(y + r.y_off(t, d, b), y + r.y_off(t, d, b) + hs, 0.f);
    for (int s = 0; s < n && static_cast<uint32_t>(1 + s) < c.num_outputs; ++s) {
      float* dst = c.out(1 + s).as<float>() + r.state_off(d, b);
      if (len > 0)
        std::memcpy(dst, states[s] + b * hs, hs * sizeof(float));
      else
        std::fill(dst, dst + hs, 0.f);
    }
  }
}


/// Shape function shared by LSTM and GRU: checks attributes and inputs 0..(4 + states),
/// sets Y and the final states, and asks for scratch. Returns the hidden size in *hidden
/// and the number of directions in *dirs.
inline Status rnn_shape(ShapeCtx& c, const RnnKind& k, ExprId* hidden, ExprId* dirs) {
  core::ExprPool& p = c.pool;
  KILN_TRY(c.expect_inputs(3, static_cast<size_t>(k.max_inputs)));
  if (c.outputs.size() > static_cast<size_t>(1 + k.states))
    return c.error("has " + std::to_string(c.outputs.size()) + " outputs, at most " + std::to_string(1 + k.states) +
                   " are defined");
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    if (i != 4) {
      KILN_TRY(c.expect_dtype(i, DType::kF32));
    } else if (c.in(4).dtype != DType::kI32 && c.in(4).dtype != DType::kI64) {
      return c.error(std::string("sequence_lens has dtype ") + dtype_name(c.in(4).dtype) + ", expected i32 or i64");
    }
  }
  // Attributes.
  bool reverse = false;
  int nd = rnn_dirs(c.attrs, &reverse);
  if (nd == 0)
    return c.error(std::string("direction '") + c.attrs.get_str("direction", "?") +
                   "' must be forward, reverse or bidirectional");
  int64_t layout = c.attrs.get_int("layout", 0);
  if (layout != 0 && layout != 1) return c.error("layout " + std::to_string(layout) + " must be 0 or 1");
  if (c.attrs.has("clip") && !(c.attrs.get_float("clip", 0.f) > 0.f)) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", c.attrs.get_float("clip", 0.f));
    return c.error(std::string("clip ") + text + " must be positive (omit it to not clip)");
  }
  RnnActFn act[6];
  RnnActError err;
  if (!rnn_read_acts(c.attrs, k.acts_per_dir, nd, act, &err)) {
    const core::AttrRef* a = c.attrs.find("activations");
    if (err.not_string) return c.error("activations must be one string of names joined with ','");
    if (err.bad_name)
      return c.error("activation '" + std::string(a->str + err.start, err.len) +
                     "' is not supported (supported: Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, "
                     "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)");
    if (err.params_not_floats) return c.error(std::string(err.params) + " must be a list of floats");
    if (err.no_default >= 0)
      return c.error("activation #" + std::to_string(err.no_default) + " 'ScaledTanh' of '" + a->str + "' has no " +
                     err.params + " value and ONNX defines no default for it; list its alpha and beta in " +
                     "activation_alpha and activation_beta");
    if (err.params)
      return c.error(std::string(err.params) + " has " + std::to_string(err.param_count) + " values, but '" +
                     (a ? a->str : k.acts_per_dir == 3 ? "Sigmoid,Tanh,Tanh" : "Sigmoid,Tanh") + "' takes " +
                     std::to_string(err.param_used) +
                     " (values are consumed in order by the functions that take one)");
    return c.error("activations '" + std::string(a->str) + "' lists " + std::to_string(err.count) +
                   " functions, expected " + std::to_string(k.acts_per_dir) +
                   (nd == 2 ? " or " + std::to_string(2 * k.acts_per_dir) : ""));
  }
  // Ranks.
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  const int ranks[] = {3, 3, 3, 2, 1, 3, 3, 2};
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i) && c.rank(i) != ranks[i])
      return c.error(std::string(names[i]) + " " + p.shape_to_string(c.in(i).shape) + " must have rank " +
                     std::to_string(ranks[i]));
  auto shape_of = [&](size_t i) { return std::string(names[i]) + " " + p.shape_to_string(c.in(i).shape); };
  // Sizes: directions and hidden from the attributes, input from W, T and batch from X.
  const std::vector<ExprId>& w = c.in(1).shape;
  ExprId d = p.constant(nd), g = p.constant(k.gates), h;
  KILN_TRY(c.require_eq(w[0], d,
                        "(W " + p.shape_to_string(w) + " must start with num_directions = " + std::to_string(nd) +
                            " for direction=" + c.attrs.get_str("direction", "forward") + ")"));
  if (c.attrs.has("hidden_size")) {
    int64_t hs = c.attrs.get_int("hidden_size", 0);
    if (hs <= 0) return c.error("hidden_size " + std::to_string(hs) + " must be positive");
    if (hs > kMaxSizeAttr)
      return c.error("hidden_size " + std::to_string(hs) + " must be <= " + std::to_string(kMaxSizeAttr));
    h = p.constant(hs);
    KILN_TRY(c.require_eq(w[1], p.mul(g, h),
                          "(" + shape_of(1) + " must have " + std::to_string(k.gates) + "*hidden_size rows)"));
  } else {
    KILN_TRY(
        c.require_divisible(w[1], k.gates, "(" + shape_of(1) + " rows hold " + std::to_string(k.gates) + " gates)"));
    h = p.floordiv(w[1], g);
  }
  const std::vector<ExprId>& x = c.in(0).shape;
  ExprId seq = x[layout ? 1 : 0], batch = x[layout ? 0 : 1];
  KILN_TRY(c.require_eq(x[2], w[2], "(input_size of " + shape_of(0) + " and " + shape_of(1) + ")"));
  // Every other input has one expected shape.
  std::vector<ExprId> state = layout ? std::vector<ExprId>{batch, d, h} : std::vector<ExprId>{d, batch, h};
  auto expect_shape = [&](size_t i, const std::vector<ExprId>& want) -> Status {
    if (!c.has_input(i)) return ok_status();
    std::string why = "(" + shape_of(i) + " must be " + p.shape_to_string(want) + ")";
    for (size_t a = 0; a < want.size(); ++a) KILN_TRY(c.require_eq(c.in(i).shape[a], want[a], why));
    return ok_status();
  };
  KILN_TRY(expect_shape(2, {d, p.mul(g, h), h}));
  KILN_TRY(expect_shape(3, {d, p.mul(p.constant(2 * k.gates), h)}));
  KILN_TRY(expect_shape(4, {batch}));
  for (int s = 0; s < k.states; ++s) KILN_TRY(expect_shape(5 + s, state));
  // Constant sequence lengths are checked now; others by the kernel.
  std::vector<int64_t> lens;
  if (c.has_input(4) && p.is_const(seq) && c.const_ints(4, &lens))
    for (int64_t len : lens)
      if (len < 0 || len > p.const_value(seq))
        return c.error("sequence_lens value " + std::to_string(len) + " is outside [0, " +
                       std::to_string(p.const_value(seq)) + "] (seq_length of " + shape_of(0) + ")");
  // Outputs, and scratch for the gates and the running states of every batch row.
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = layout ? std::vector<ExprId>{batch, seq, d, h} : std::vector<ExprId>{seq, d, batch, h};
  for (size_t o = 1; o < c.outputs.size(); ++o) {
    c.out(o).dtype = DType::kF32;
    c.out(o).shape = state;
  }
  // One slot per direction (rnn_slot_floats): per batch row, gates and states; then, each
  // gates*H wide, W^T, R^T, a bias row and the input projections of all seq*batch rows.
  const ExprId per_row = p.mul(p.constant(k.scratch_rows), p.mul(batch, h));
  const ExprId width = p.add(p.add(c.in(0).shape[2], h), p.add(p.constant(1), p.mul(seq, batch)));
  const ExprId per_dir = p.mul(p.mul(p.constant(k.gates), h), width);
  c.scratch_bytes = p.mul(p.constant(static_cast<int64_t>(sizeof(float))), p.mul(d, p.add(per_row, per_dir)));
  *hidden = h;
  *dirs = d;
  return ok_status();
}

}  // namespace kiln::kernels
