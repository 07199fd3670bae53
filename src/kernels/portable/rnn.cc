// LSTM and GRU's shared attribute, shape and layout code (rnn.h).
#include "kernels/portable/rnn.h"
#include "core/status.h"
#include "kernels/portable/strided_copy.h"

namespace kiln::kernels {

const char* rnn_act_name(RnnAct a) {
  static const char* const kNames[kRnnActCount] = {"Sigmoid",     "Tanh", "Relu", "Affine",   "LeakyRelu", "ThresholdedRelu",
                                                   "ScaledTanh",  "HardSigmoid", "Elu", "Softsign", "Softplus"};
  return kNames[static_cast<int>(a)];
}

void rnn_act_params(RnnAct a, int* n_alpha, int* n_beta, RnnActFn* defaults, bool* has_default) {
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

bool rnn_act_from_name(const char* s, size_t n, RnnAct* out) {
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

int rnn_dirs(const core::Attrs& a, bool* reverse) {
  *reverse = a.str_equals("direction", "reverse");
  if (!a.has("direction") || a.str_equals("direction", "forward") || *reverse) return 1;
  return a.str_equals("direction", "bidirectional") ? 2 : 0;
}

bool rnn_read_acts(const core::Attrs& a, int per_dir, int dirs, RnnActFn* act, RnnActError* err) {
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

bool rnn_read(const RunCtx& c, const RnnKind& k, RnnRun* r) {
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

void rnn_transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  const int64_t dims[2] = {cols, rows}, strides[2] = {1, cols};
  strided_copy(dst, src, sizeof(float), 2, dims, strides, 0);
}

RnnDirScratch rnn_prepare_direction(const RunCtx& c, const RnnKind& k, const RnnRun& r, int64_t d) {
  const int64_t gh = k.gates * r.hidden, in = r.input, hs = r.hidden;
  RnnDirScratch s;
  s.wt = rnn_slot(c, k, r, d) + k.scratch_rows * r.batch * r.hidden;
  s.rt = s.wt + in * gh;
  s.bias = s.rt + hs * gh;
  s.proj = s.bias + gh;
  rnn_transpose(c.in(1).as<float>() + d * gh * in, gh, in, s.wt);
  rnn_transpose(c.in(2).as<float>() + d * gh * hs, gh, hs, s.rt);
  return s;
}

void rnn_project(const RunCtx& c, const RnnKind& k, const RnnRun& r, const RnnDirScratch& s) {
  const int64_t gh = k.gates * r.hidden, in = r.input, rows = r.seq * r.batch;
  const float* x = c.in(0).as<float>();
  // Rows split over the pool (chunks of at least ~64K multiply-adds), as the actual sizes say.
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, 65536 / std::max<int64_t>(1, gh * in)));
  parallel_for(c, static_cast<size_t>(rows), grain, [&](size_t b, size_t e) {
    simd::vecmat(s.wt, static_cast<size_t>(gh), static_cast<size_t>(gh), static_cast<size_t>(in), x + b * in,
                 static_cast<size_t>(in), s.bias, 0, s.proj + b * gh, static_cast<size_t>(gh), e - b);
  });
}

void rnn_load_states(const RunCtx& c, const RnnRun& r, int64_t d, float* const* states, int n) {
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

void rnn_finish_direction(const RunCtx& c, const RnnRun& r, int64_t d, const float* const* states, int n) {
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

namespace {

// The attributes a shape function checks: direction, layout, clip and the activation list;
// the number of directions and the layout into `nd` and `layout`.
Status rnn_check_attrs(ShapeCtx& c, const RnnKind& k, int* nd_out, int64_t* layout_out) {
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
  *nd_out = nd;
  *layout_out = layout;
  return ok_status();
}

const char* const kRnnInputNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};

std::string rnn_shape_of(const ShapeCtx& c, size_t i) {
  return std::string(kRnnInputNames[i]) + " " + c.pool.shape_to_string(c.in(i).shape);
}

// The count of outputs, and every input's dtype and rank.
Status rnn_check_inputs(ShapeCtx& c, const RnnKind& k) {
  KILN_TRY(c.expect_inputs(3, static_cast<size_t>(k.max_inputs)));
  if (c.outputs.size() > static_cast<size_t>(1 + k.states))
    return c.error("has " + std::to_string(c.outputs.size()) + " outputs, at most " + std::to_string(1 + k.states) +
                   " are defined");
  const int ranks[] = {3, 3, 3, 2, 1, 3, 3, 2};
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    if (i != 4) {
      KILN_TRY(c.expect_dtype(i, DType::kF32));
    } else if (c.in(4).dtype != DType::kI32 && c.in(4).dtype != DType::kI64) {
      return c.error(std::string("sequence_lens has dtype ") + dtype_name(c.in(4).dtype) + ", expected i32 or i64");
    }
  }
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i) && c.rank(i) != ranks[i])
      return c.error(rnn_shape_of(c, i) + " must have rank " + std::to_string(ranks[i]));
  return ok_status();
}

// The hidden size: the attribute's (W's rows must be gates * hidden_size), or W's rows over
// the gates.
Status rnn_hidden(ShapeCtx& c, const RnnKind& k, ExprId g, ExprId* h) {
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& w = c.in(1).shape;
  if (!c.attrs.has("hidden_size")) {
    KILN_TRY(c.require_divisible(w[1], k.gates,
                                 "(" + rnn_shape_of(c, 1) + " rows hold " + std::to_string(k.gates) + " gates)"));
    *h = p.floordiv(w[1], g);
    return ok_status();
  }
  const int64_t hs = c.attrs.get_int("hidden_size", 0);
  if (hs <= 0) return c.error("hidden_size " + std::to_string(hs) + " must be positive");
  if (hs > kMaxSizeAttr) return c.error("hidden_size " + std::to_string(hs) + " must be <= " + std::to_string(kMaxSizeAttr));
  *h = p.constant(hs);
  return c.require_eq(w[1], p.mul(g, *h),
                      "(" + rnn_shape_of(c, 1) + " must have " + std::to_string(k.gates) + "*hidden_size rows)");
}

}  // namespace

Status rnn_shape(ShapeCtx& c, const RnnKind& k, ExprId* hidden, ExprId* dirs) {
  core::ExprPool& p = c.pool;
  KILN_TRY(rnn_check_inputs(c, k));
  int nd = 0;
  int64_t layout = 0;
  KILN_TRY(rnn_check_attrs(c, k, &nd, &layout));
  auto shape_of = [&](size_t i) { return rnn_shape_of(c, i); };
  // Sizes: directions and hidden from the attributes, input from W, T and batch from X.
  const std::vector<ExprId>& w = c.in(1).shape;
  ExprId d = p.constant(nd), g = p.constant(k.gates), h;
  KILN_TRY(c.require_eq(w[0], d,
                        "(W " + p.shape_to_string(w) + " must start with num_directions = " + std::to_string(nd) +
                            " for direction=" + c.attrs.get_str("direction", "forward") + ")"));
  KILN_TRY(rnn_hidden(c, k, g, &h));
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
