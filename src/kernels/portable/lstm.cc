// LSTM (ONNX opset 7-14, f32). Per direction and time step, with gates i, o, f, c (that order
// in W, R and B) and activations f, g, h (default Sigmoid, Tanh, Tanh):
//   i = f(Xt*Wi^T + Ht-1*Ri^T + Pi.Ct-1 + Wbi + Rbi)     f = same with Wf, Rf, Pf, Wbf, Rbf
//   c = g(Xt*Wc^T + Ht-1*Rc^T + Wbc + Rbc)               Ct = f.Ct-1 + i.c
//   o = f(Xt*Wo^T + Ht-1*Ro^T + Po.Ct + Wbo + Rbo)       Ht = o.h(Ct)
// `clip` bounds every activation's input, Ct included (as ONNX Runtime does); the state Ct
// itself is not clipped. Rows of Y past a batch row's sequence_lens are zero; Y_h / Y_c hold
// the state after its last valid step (zero for a length of 0). input_forget=1 is rejected.
#include "kernels/portable/rnn.h"

namespace kiln::kernels {

namespace {
// Scratch per batch row: 4*H gate sums, then H of hidden state and H of cell state.
constexpr RnnKind kLstm = {4, 3, 2, 8, 6};
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
  const int64_t hs = r.hidden, in = r.input, g4 = 4 * hs;
  float* gates = static_cast<float*>(c.scratch);  // [batch, 4H]
  float* hstate = gates + r.batch * g4;           // [batch, H]
  float* cstate = hstate + r.batch * hs;          // [batch, H]
  const float* x = c.in(0).as<float>();
  float* y = c.out(0).as<float>();
  float* const states[2] = {hstate, cstate};
  for (int64_t d = 0; d < r.dirs; ++d) {
    const float* w = c.in(1).as<float>() + d * g4 * in;
    const float* rw = c.in(2).as<float>() + d * g4 * hs;
    const float* bias = c.has_input(3) ? c.in(3).as<float>() + d * 2 * g4 : nullptr;
    const float* peep = c.has_input(7) ? c.in(7).as<float>() + d * 3 * hs : nullptr;  // Pi, Po, Pf
    const RnnAct fa = r.f(d, 0, 3), ga = r.f(d, 1, 3), ha = r.f(d, 2, 3);
    float* wt = rnn_weights_scratch(c, kLstm, r);  // W^T [in][4H]
    float* rt = wt + in * g4;                      // R^T [H][4H]
    rnn_transpose(w, g4, in, wt);
    rnn_transpose(rw, g4, hs, rt);
    rnn_load_states(c, r, d, states, 2);
    rnn_for_each_step(c, r, d, [&](int64_t t, int64_t b) {
      float* gb = gates + b * g4;
      float* hb = hstate + b * hs;
      float* cb = cstate + b * hs;
      for (int64_t j = 0; j < g4; ++j) gb[j] = bias ? bias[j] + bias[g4 + j] : 0.f;
      rnn_add_vecmat(wt, g4, g4, in, x + r.x_off(t, b), gb);
      rnn_add_vecmat(rt, g4, g4, hs, hb, gb);
      for (int64_t j = 0; j < hs; ++j) {  // hb is read only by the matvec above: update in place
        float pi = gb[j], po = gb[hs + j], pf = gb[2 * hs + j], pc = gb[3 * hs + j];
        const float c_prev = cb[j];
        if (peep) {
          pi += peep[j] * c_prev;
          pf += peep[2 * hs + j] * c_prev;
        }
        const float ig = rnn_apply(fa, r.clipped(pi)), fg = rnn_apply(fa, r.clipped(pf));
        const float c_new = fg * c_prev + ig * rnn_apply(ga, r.clipped(pc));
        if (peep) po += peep[hs + j] * c_new;
        cb[j] = c_new;
        hb[j] = rnn_apply(fa, r.clipped(po)) * rnn_apply(ha, r.clipped(c_new));
      }
      std::memcpy(y + r.y_off(t, d, b), hb, hs * sizeof(float));
    });
    rnn_finish_direction(c, r, d, states, 2);
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
