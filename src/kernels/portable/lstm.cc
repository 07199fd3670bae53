// LSTM (ONNX opset 7-14, f32). Per direction and time step, with gates i, o, f, c (that order
// in W, R and B) and activations f, g, h (default Sigmoid, Tanh, Tanh):
//   i = f(Xt*Wi^T + Ht-1*Ri^T + Pi.Ct-1 + Wbi + Rbi)     f = same with Wf, Rf, Pf, Wbf, Rbf
//   c = g(Xt*Wc^T + Ht-1*Rc^T + Wbc + Rbc)               Ct = f.Ct-1 + i.c
//   o = f(Xt*Wo^T + Ht-1*Ro^T + Po.Ct + Wbo + Rbo)       Ht = o.h(Ct)
// `clip` bounds every activation's input, Ct included (as ONNX Runtime does); the state Ct
// itself is not clipped. f, g, h may be any of the ONNX RNN activations, with activation_alpha
// and activation_beta (rnn.h). Rows of Y past a batch row's sequence_lens are zero; Y_h / Y_c hold
// the state after its last valid step (zero for a length of 0). input_forget=1 is rejected.
#include "kernels/portable/rnn.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {
// Scratch per batch row: H of hidden state and H of cell state (a step sums its gates in the
// input projections' rows).
constexpr RnnKind kLstm = {4, 3, 2, 8, 2};
}  // namespace

Status lstm_shape(ShapeCtx& c) {
  ExprId h = core::kNoExpr, d = core::kNoExpr;
  KILN_TRY(rnn_shape(c, kLstm, &h, &d));
  if (c.attrs.get_int("input_forget", 0) != 0)
    return c.error("input_forget=" + std::to_string(c.attrs.get_int("input_forget", 0)) +
                   " (coupled input and forget gates) is not supported; export with input_forget=0");
  if (c.has_input(7)) {
    std::vector<ExprId> want = {d, c.pool.mul(c.pool.constant(3), h)};
    std::string why = "(P " + c.pool.shape_to_string(c.in(7).shape) + " must be " + c.pool.shape_to_string(want) + ")";
    for (size_t a = 0; a < 2; ++a) KILN_TRY(c.require_eq(c.in(7).shape[a], want[a], why));
  }
  return ok_status();
}

KernelStatus lstm_run(const RunCtx& c) {
  RnnRun r;
  if (!rnn_read(c, kLstm, &r)) return KernelStatus::kInvalidValue;
  for (int64_t b = 0; b < r.batch; ++b)
    if (rnn_seq_len(c, r, b) < 0) return KernelStatus::kInvalidValue;
  const int64_t hs = r.hidden, g4 = 4 * hs;
  float* y = c.out(0).as<float>();
  rnn_run_directions(c, r, [&](const RunCtx& c, int64_t d) {
    float* hstate = rnn_slot(c, kLstm, r, d);  // [batch, H]
    float* cstate = hstate + r.batch * hs;    // [batch, H]
    float* const states[2] = {hstate, cstate};
    const float* bias = c.has_input(3) ? c.in(3).as<float>() + d * 2 * g4 : nullptr;
    const float* peep = c.has_input(7) ? c.in(7).as<float>() + d * 3 * hs : nullptr;  // Pi, Po, Pf
    const RnnActFn &fa = r.f(d, 0, 3), &ga = r.f(d, 1, 3), &ha = r.f(d, 2, 3);
    const RnnDirScratch s = rnn_prepare_direction(c, kLstm, r, d);
    for (int64_t j = 0; j < g4; ++j) s.bias[j] = bias ? bias[j] + bias[g4 + j] : 0.f;
    rnn_project(c, kLstm, r, s);
    rnn_load_states(c, r, d, states, 2);
    const int64_t ps = r.row_step() * g4;  // between batch rows' gate sums
    rnn_for_each_step(c, r, d, [&](int64_t t, int64_t b0, int64_t nb) {
      float* g0 = s.proj + r.row(t, b0) * g4;  // X*W^T + biases: the gate sums, in place
      // hstate is read only here: updated in place below
      simd::add_vecmat(s.rt, static_cast<size_t>(g4), static_cast<size_t>(g4), static_cast<size_t>(hs),
                       hstate + b0 * hs, static_cast<size_t>(hs), g0, static_cast<size_t>(ps), static_cast<size_t>(nb));
      for (int64_t b = b0; b < b0 + nb; ++b) {
        float* gb = g0 + (b - b0) * ps;
        float* hb = hstate + b * hs;
        float* cb = cstate + b * hs;
        float *ig = gb, *og = gb + hs, *fg = gb + 2 * hs, *cg = gb + 3 * hs;
        if (peep)
          for (int64_t j = 0; j < hs; ++j) {
            ig[j] += peep[j] * cb[j];
            fg[j] += peep[2 * hs + j] * cb[j];
          }
        rnn_apply(fa, r.clip, ig, hs);
        rnn_apply(fa, r.clip, fg, hs);
        rnn_apply(ga, r.clip, cg, hs);
        for (int64_t j = 0; j < hs; ++j) cb[j] = fg[j] * cb[j] + ig[j] * cg[j];
        if (peep)
          for (int64_t j = 0; j < hs; ++j) og[j] += peep[hs + j] * cb[j];
        rnn_apply(fa, r.clip, og, hs);
        std::memcpy(cg, cb, hs * sizeof(float));  // h(Ct) in the c gate's place, clipped as every input
        rnn_apply(ha, r.clip, cg, hs);
        for (int64_t j = 0; j < hs; ++j) hb[j] = og[j] * cg[j];
        std::memcpy(y + r.y_off(t, d, b), hb, hs * sizeof(float));
      }
    });
    rnn_finish_direction(c, r, d, states, 2);
  });
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
