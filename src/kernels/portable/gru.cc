// GRU (ONNX opset 7-14, f32). Per direction and time step, with gates z, r, h (that order in
// W, R and B) and activations f, g (default Sigmoid, Tanh):
//   z = f(Xt*Wz^T + Ht-1*Rz^T + Wbz + Rbz)        r = same with Wr, Rr, Wbr, Rbr
//   h = g(Xt*Wh^T + (r.Ht-1)*Rh^T + Rbh + Wbh)    linear_before_reset = 0
//   h = g(Xt*Wh^T + r.(Ht-1*Rh^T + Rbh) + Wbh)    linear_before_reset = 1
//   Ht = (1 - z).h + z.Ht-1
// `clip` bounds every activation's input. f, g may be any of the ONNX RNN activations, with
// activation_alpha and activation_beta (rnn.h). Rows of Y past a batch row's sequence_lens are
// zero; Y_h holds the state after its last valid step (zero for a length of 0).
#include "kernels/portable/rnn.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {
// Scratch per batch row: 3*H recurrent sums (Ht-1*R^T; the gate sums are in the input
// projections' rows), H for r.Ht-1 (or Ht-1*Rh^T + Rbh), H of hidden state; then the direction
// being run (RnnDirScratch).
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
  const int64_t hs = r.hidden, g3 = 3 * hs;
  float* y = c.out(0).as<float>();
  rnn_run_directions(c, r, [&](const RunCtx& c, int64_t d) {
    float* rec = rnn_slot(c, kGru, r, d);  // [batch, 3H]
    float* tmp = rec + r.batch * g3;       // [batch, H]
    float* hstate = tmp + r.batch * hs;    // [batch, H]
    const float* wb = c.has_input(3) ? c.in(3).as<float>() + d * 2 * g3 : nullptr;
    const float* rb = wb ? wb + g3 : nullptr;
    const RnnActFn &fa = r.f(d, 0, 2), &ga = r.f(d, 1, 2);
    const RnnDirScratch s = rnn_prepare_direction(c, kGru, r, d);  // Rh^T: the last H columns of R^T
    // z and r get both biases; h gets Wbh, plus Rbh here unless it sits inside r.(...).
    for (int64_t j = 0; j < g3; ++j) s.bias[j] = wb ? wb[j] + (j < 2 * hs || !lbr ? rb[j] : 0.f) : 0.f;
    rnn_project(c, kGru, r, s);
    // Then the bias row starts the recurrent sums: [0 | 0 | Rbh] (linear_before_reset).
    for (int64_t j = 0; j < g3; ++j) s.bias[j] = lbr && rb && j >= 2 * hs ? rb[j] : 0.f;
    rnn_load_states(c, r, d, &hstate, 1);
    // PyTorch's GRU (linear_before_reset, Sigmoid and Tanh, no clip): one pass over R^T for all
    // three gates, then one fused pass per row.
    const bool fused = lbr && r.clip == 0.f && fa.kind == RnnAct::kSigmoid && ga.kind == RnnAct::kTanh;
    const size_t h = static_cast<size_t>(hs), g = static_cast<size_t>(g3);
    const int64_t ps = r.row_step() * g3;  // between batch rows' gate sums
    rnn_for_each_step(c, r, d, [&](int64_t t, int64_t b0, int64_t nb) {
      const int64_t b1 = b0 + nb;
      float* g0 = s.proj + r.row(t, b0) * g3;  // X*W^T + biases: the gate sums, in place
      const float* h0 = hstate + b0 * hs;
      if (fused) {
        simd::vecmat(s.rt, g, g, h, h0, h, s.bias, 0, rec + b0 * g3, g, static_cast<size_t>(nb));
        for (int64_t b = b0; b < b1; ++b)
          simd::gru_row(g0 + (b - b0) * ps, rec + b * g3, hstate + b * hs, y + r.y_off(t, d, b), h);
        return;
      }
      simd::add_vecmat(s.rt, g, 2 * h, h, h0, h, g0, static_cast<size_t>(ps), static_cast<size_t>(nb));
      for (int64_t b = b0; b < b1; ++b) rnn_apply(fa, r.clip, g0 + (b - b0) * ps, 2 * hs);
      if (lbr) {  // tb = Ht-1*Rh^T + Rbh, then h += r.tb
        simd::vecmat(s.rt + 2 * hs, g, h, h, h0, h, s.bias + 2 * hs, 0, tmp + b0 * hs, h, static_cast<size_t>(nb));
        for (int64_t b = b0; b < b1; ++b) {
          float* gb = g0 + (b - b0) * ps;
          for (int64_t j = 0; j < hs; ++j) gb[2 * hs + j] += gb[hs + j] * tmp[b * hs + j];
        }
      } else {  // tb = r.Ht-1, then h += tb*Rh^T
        for (int64_t b = b0; b < b1; ++b)
          for (int64_t j = 0; j < hs; ++j) tmp[b * hs + j] = g0[(b - b0) * ps + hs + j] * hstate[b * hs + j];
        simd::add_vecmat(s.rt + 2 * hs, g, h, h, tmp + b0 * hs, h, g0 + 2 * hs, static_cast<size_t>(ps),
                         static_cast<size_t>(nb));
      }
      for (int64_t b = b0; b < b1; ++b) {
        const float* zg = g0 + (b - b0) * ps;
        float* hg = g0 + (b - b0) * ps + 2 * hs;
        float* hb = hstate + b * hs;
        rnn_apply(ga, r.clip, hg, hs);
        for (int64_t j = 0; j < hs; ++j) hb[j] = (1.f - zg[j]) * hg[j] + zg[j] * hb[j];
        std::memcpy(y + r.y_off(t, d, b), hb, hs * sizeof(float));
      }
    });
    rnn_finish_direction(c, r, d, &hstate, 1);
  });
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
