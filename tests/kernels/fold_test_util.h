#pragma once
// Helpers for tests of the values that shape functions carry for small integer tensors
// (SymTensor::sym_values): read them as text, and check them against the kernel's output.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sym_test_util.h"

namespace kiln::testing {

/// Output 0's carried values as text, e.g. "[4*batch, 64]" ("[]" when none).
inline std::string values_of(const core::ExprPool& pool, const SymResult& r) {
  return r.outputs.empty() ? "<no output>" : pool.shape_to_string(r.outputs[0].sym_values);
}

/// Element i of an integer or bool tensor, exactly.
inline int64_t int_at(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kI64: return t.data<int64_t>()[i];
    case DType::kI32: return t.data<int32_t>()[i];
    case DType::kBool: return t.bytes[i] != 0;
    case DType::kI8: return t.data<int8_t>()[i];
    case DType::kU8: return t.data<uint8_t>()[i];
    case DType::kF32: return static_cast<int64_t>(t.data<float>()[i]);
  }
  return 0;
}

/// Every tensor of `ts` as a constant (or omitted) input of a shape function.
inline std::vector<kernels::SymTensor> const_inputs(core::ExprPool& pool, const std::vector<Tensor>& ts) {
  std::vector<kernels::SymTensor> in;
  static const uint64_t kEmpty = 0;
  for (const Tensor& t : ts) {
    in.push_back(const_input(pool, t));
    in.back().present = t.present;
    if (t.present && t.bytes.empty()) in.back().const_data = &kEmpty;
    if (!t.present) in.back().const_data = nullptr;
  }
  return in;
}

/// Runs `op` on constant `inputs` twice, through the shape function (which carries values)
/// and through the kernel; succeeds when the carried values are the kernel's output exactly,
/// or when none are carried and the output is empty, above 64 elements or `must_fold` is false.
inline ::testing::AssertionResult fold_matches_kernel(const char* op, const std::vector<Tensor>& inputs,
                                                      const core::AttrStore& attrs = core::AttrStore(),
                                                      bool must_fold = true) {
  OpResult r = run_op(op, inputs, attrs);
  if (!r.status.ok()) return ::testing::AssertionFailure() << op << ": " << r.status.message();
  if (r.kernel != kernels::KernelStatus::kOk) return ::testing::AssertionFailure() << op << ": kernel failed";
  core::ExprPool pool;
  SymResult s = infer(pool, op, const_inputs(pool, inputs), attrs);
  if (!s.status.ok()) return ::testing::AssertionFailure() << op << ": " << s.status.message();
  const std::vector<core::ExprId>& v = s.outputs[0].sym_values;
  const Tensor& y = r.outputs[0];
  if (v.empty()) {
    if (must_fold && y.numel() > 0 && y.numel() <= 64)
      return ::testing::AssertionFailure() << op << ": no values carried";
    return ::testing::AssertionSuccess();
  }
  if (static_cast<int64_t>(v.size()) != y.numel())
    return ::testing::AssertionFailure() << op << ": " << v.size() << " values for " << y.numel() << " elements";
  for (size_t i = 0; i < v.size(); ++i) {
    const auto e = static_cast<int64_t>(i);
    // f32: the carried integer must be exactly what the kernel wrote (no truncation).
    const bool same = pool.is_const(v[i]) && (y.dtype == DType::kF32
                                                  ? static_cast<double>(pool.const_value(v[i])) == y.at(e)
                                                  : pool.const_value(v[i]) == int_at(y, e));
    if (!same)
      return ::testing::AssertionFailure() << op << ": value " << i << " is " << pool.to_string(v[i])
                                           << ", the kernel wrote " << y.at(e);
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::testing
