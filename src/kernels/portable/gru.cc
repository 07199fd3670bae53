// GRU (ONNX opset 7-14, f32). Per direction and time step, with gates z, r, h (that order in
// W, R and B) and activations f, g (default Sigmoid, Tanh):
//   z = f(Xt*Wz^T + Ht-1*Rz^T + Wbz + Rbz)        r = same with Wr, Rr, Wbr, Rbr
//   h = g(Xt*Wh^T + (r.Ht-1)*Rh^T + Rbh + Wbh)    linear_before_reset = 0
//   h = g(Xt*Wh^T + r.(Ht-1*Rh^T + Rbh) + Wbh)    linear_before_reset = 1
//   Ht = (1 - z).h + z.Ht-1
// `clip` bounds every activation's input. Rows of Y past a batch row's sequence_lens are
// zero; Y_h holds the state after its last valid step (zero for a length of 0).
#include "kernels/portable/rnn.h"

namespace kiln::kernels {

namespace {
// Scratch per batch row: 3*H gate sums, H for r.Ht-1 (or Ht-1*Rh^T + Rbh), H of hidden state;
// then W^T and R^T of the direction being run (rnn_weights_scratch).
constexpr RnnKind kGru = {3, 2, 1, 6, 5};
}  // namespace

Status gru_shape(ShapeCtx& c) {
  ExprId h = core::kNoExpr, d = core::kNoExpr;
  KILN_TRY(rnn_shape(c, kGru, &h, &d));
  int64_t lbr = c.attrs.get_int("linear_before_reset", 0);
  if (lbr != 0 && lbr != 1) return c.error("linear_before_reset " + std::to_string(lbr) + " must be 0 or 1");
  return ok_status();
}

KernelStatus gru_run(const RunCtx& c) {
  RnnRun r;
  if (!rnn_read(c, kGru, &r)) return KernelStatus::kInvalidValue;
  for (int64_t b = 0; b < r.batch; ++b)
    if (rnn_seq_len(c, r, b) < 0) return KernelStatus::kInvalidValue;
  const bool lbr = c.attrs.get_int("linear_before_reset", 0) != 0;
  const int64_t hs = r.hidden, in = r.input, g3 = 3 * hs;
  float* gates = static_cast<float*>(c.scratch);  // [batch, 3H]
  float* tmp = gates + r.batch * g3;              // [batch, H]
  float* hstate = tmp + r.batch * hs;             // [batch, H]
  const float* x = c.in(0).as<float>();
  float* y = c.out(0).as<float>();
  for (int64_t d = 0; d < r.dirs; ++d) {
    const float* w = c.in(1).as<float>() + d * g3 * in;
    const float* rw = c.in(2).as<float>() + d * g3 * hs;
    const float* wb = c.has_input(3) ? c.in(3).as<float>() + d * 2 * g3 : nullptr;
    const float* rb = wb ? wb + g3 : nullptr;
    const RnnAct fa = r.f(d, 0, 2), ga = r.f(d, 1, 2);
    float* wt = rnn_weights_scratch(c, kGru, r);  // W^T [in][3H]
    float* rt = wt + in * g3;                     // R^T [H][3H]; Rh^T is its last H columns
    rnn_transpose(w, g3, in, wt);
    rnn_transpose(rw, g3, hs, rt);
    rnn_load_states(c, r, d, &hstate, 1);
    rnn_for_each_step(c, r, d, [&](int64_t t, int64_t b) {
      float* gb = gates + b * g3;
      float* tb = tmp + b * hs;
      float* hb = hstate + b * hs;
      // z and r get both biases; h gets Wbh, plus Rbh here unless it sits inside r.(...).
      for (int64_t j = 0; j < g3; ++j) gb[j] = wb ? wb[j] + (j < 2 * hs || !lbr ? rb[j] : 0.f) : 0.f;
      rnn_add_vecmat(wt, g3, g3, in, x + r.x_off(t, b), gb);
      rnn_add_vecmat(rt, g3, 2 * hs, hs, hb, gb);
      float* zg = gb;
      float* rg = gb + hs;
      for (int64_t j = 0; j < 2 * hs; ++j) gb[j] = rnn_apply(fa, r.clipped(gb[j]));
      if (lbr) {
        for (int64_t j = 0; j < hs; ++j) tb[j] = rb ? rb[2 * hs + j] : 0.f;
        rnn_add_vecmat(rt + 2 * hs, g3, hs, hs, hb, tb);
        for (int64_t j = 0; j < hs; ++j) gb[2 * hs + j] += rg[j] * tb[j];
      } else {
        for (int64_t j = 0; j < hs; ++j) tb[j] = rg[j] * hb[j];
        rnn_add_vecmat(rt + 2 * hs, g3, hs, hs, tb, gb + 2 * hs);
      }
      for (int64_t j = 0; j < hs; ++j) {
        const float hh = rnn_apply(ga, r.clipped(gb[2 * hs + j]));
        hb[j] = (1.f - zg[j]) * hh + zg[j] * hb[j];
      }
      std::memcpy(y + r.y_off(t, d, b), hb, hs * sizeof(float));
    });
    rnn_finish_direction(c, r, d, &hstate, 1);
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
