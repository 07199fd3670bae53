#pragma once
// Runs a kernel the way a bound-sized arena would present it: every operand sits at the start
// of a larger slot whose tail holds garbage. A kernel that honours the actual dims reads and
// writes only the leading bytes, whatever the bound.

#include <cstring>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace kiln::testing {

struct SlotRun {
  OpResult exact;                ///< run_op on exactly sized buffers
  std::vector<Tensor> outputs;   ///< the same kernel run inside oversized slots
  kernels::KernelStatus kernel = kernels::KernelStatus::kOk;  ///< of the slotted run
  bool tails_intact = true;      ///< no output slot was written past the actual size
};

/// Runs `name` twice: via run_op, then again with every input and output placed at the start
/// of a slot `extra` bytes larger (inputs' tails 0xFF, i.e. NaN / -1; outputs' tails 0xCD).
/// `num_outputs` outputs are requested (optional ones after the first).
inline SlotRun run_op_in_slots(const char* name, const std::vector<Tensor>& inputs,
                               const core::AttrStore& attrs = core::AttrStore(), size_t extra = 256,
                               size_t num_outputs = 1) {
  SlotRun s;
  s.exact = run_op(name, inputs, attrs, num_outputs);
  if (!s.exact.status.ok() || s.exact.kernel != kernels::KernelStatus::kOk) return s;
  auto slot = [&](const Tensor& t, unsigned char tail) {
    std::vector<unsigned char> b(t.bytes.size() + extra, tail);
    if (!t.bytes.empty()) std::memcpy(b.data(), t.bytes.data(), t.bytes.size());
    return b;
  };
  auto fill = [](TensorView& v, const Tensor& t, std::vector<unsigned char>& bytes) {
    v.dtype = t.dtype;
    v.rank = static_cast<int32_t>(t.shape.size());
    for (size_t k = 0; k < t.shape.size(); ++k) v.dims[k] = t.shape[k];
    v.data = bytes.data();
  };
  std::vector<std::vector<unsigned char>> in_bytes, out_bytes;
  for (const Tensor& t : inputs) in_bytes.push_back(slot(t, 0xFF));
  for (const Tensor& t : s.exact.outputs) out_bytes.push_back(slot(t, 0xCD));
  std::vector<TensorView> iv(inputs.size()), ov(s.exact.outputs.size());
  std::vector<const TensorView*> ip(inputs.size());
  std::vector<TensorView*> op(ov.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    fill(iv[i], inputs[i], in_bytes[i]);
    ip[i] = inputs[i].present ? &iv[i] : nullptr;
  }
  for (size_t i = 0; i < ov.size(); ++i) {
    fill(ov[i], s.exact.outputs[i], out_bytes[i]);
    op[i] = &ov[i];
  }
  kernels::RunCtx rc;
  rc.inputs = ip.data();
  rc.num_inputs = static_cast<uint32_t>(ip.size());
  rc.outputs = op.data();
  rc.num_outputs = static_cast<uint32_t>(op.size());
  rc.attrs = attrs.view();
  s.kernel = kernels::run_once(*kernels::find_op(name), rc);
  for (size_t i = 0; i < ov.size(); ++i) {
    Tensor t = s.exact.outputs[i];
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), out_bytes[i].data(), t.bytes.size());
    for (size_t b = t.bytes.size(); b < out_bytes[i].size(); ++b)
      if (out_bytes[i][b] != 0xCD) s.tails_intact = false;
    s.outputs.push_back(std::move(t));
  }
  return s;
}

}  // namespace kiln::testing
